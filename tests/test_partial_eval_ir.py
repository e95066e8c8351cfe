"""``ferrax._ir.partial_eval``: the Rust partial-evaluation pass from Python.

Programs with ``jit``, ``cond``, ``scan`` and ``while`` inside are staged with
``ferrax.make_jaxpr`` and split for every mask of unknown inputs: running the known jaxpr
on the known inputs, then the unknown jaxpr on the residuals and the unknown inputs
(``ferrax.eval_jaxpr``), gives what the original gives. Which outputs are unknown agrees
with JAX's ``partial_eval_jaxpr_nounits`` on the same programs, ``while`` loops included
(split into a known loop over the known carries and the whole loop when the condition is
known, wholly unknown when it is not); ``linearize`` through a ``while`` loop keeps the
primal known. A wrong flag count raises ``PassError``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.interpreters import partial_eval as jax_pe

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import PassError, _ir, lax

NDArray = np.ndarray[Any, Any]
Program = Callable[..., Any]


def _mlp_jit(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    w = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)

    @jit
    def layer(x: Any, b: Any) -> Any:
        return np_.tanh(x @ w + b), np_.sin(x)

    def f(x: Any, b: Any, s: Any) -> Any:
        h, t = layer(x, b)
        return h * s, t.sum()

    return f


def _cond(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    def f(p: Any, x: Any, y: Any) -> Any:
        return lax_.cond(p > 0, lambda a, b: (np_.sin(a) * b, a.sum()), lambda a, b: (b * 2.0, np_.cos(b).sum()), x, y)

    return f


def _switch_in_jit(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    @jit
    def f(i: Any, x: Any, y: Any) -> Any:
        branches = [lambda a, b: a * b, lambda a, b: np_.exp(a) + b, lambda a, b: a]
        return lax_.switch(i, branches, x, y)

    return f


def _scan(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    k = np.array([0.5, -1.0, 2.0], dtype=np.float32)

    def f(c: Any, h: Any, xs: Any) -> Any:
        def body(carry: Any, x: Any) -> Any:
            a, b = carry
            a2 = a * 0.9 + np_.sin(x)
            b2 = np_.tanh(b * k + a * x)
            return (a2, b2), a2 * b2

        return lax_.scan(body, (c, h), xs)

    return f


def _scan_reverse(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    def f(c: Any, xs: Any, ys: Any) -> Any:
        def body(carry: Any, xy: Any) -> Any:
            x, y = xy
            return carry + np_.cos(x) * y, np_.sin(carry) * x

        return lax_.scan(body, c, (xs, ys), reverse=True)

    return f


def _fori(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    def f(x: Any, y: Any) -> Any:
        z = lax_.fori_loop(0, 3, lambda i, c: np_.sin(c) + 0.5, x)
        return z * y, z

    return f


def _while(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    def f(n: Any, x: Any, y: Any) -> Any:
        def body(c: Any) -> Any:
            i, a, b = c
            return i + 1, a * 0.5 + 1.0, b * a

        return lax_.while_loop(lambda c: c[0] < n, body, (0, x, y))

    return f


def _while_jvp(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    # The loop a JVP makes: primal x and tangent t carried together, a counter for cond.
    def f(n: Any, x: Any, t: Any) -> Any:
        def body(c: Any) -> Any:
            i, a, da = c
            return i + 1, np_.sin(a), np_.cos(a) * da

        return lax_.while_loop(lambda c: c[0] < n, body, (0, x, t))

    return f


def _while_cond_through_body(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    # u reaches b, then a, which the condition reads; c only feeds itself. (u is updated:
    # JAX's while_loop makes a carry the body returns unchanged a const, ferrax's does not.)
    def f(a: Any, b: Any, c: Any, u: Any) -> Any:
        def body(s: Any) -> Any:
            i, a, b, c, u = s
            return i + 1, a * b, np_.sin(u), np_.cos(c), u * 0.5

        def cond(s: Any) -> Any:
            return (s[0] < 3) & (s[1] < 1e9)

        return lax_.while_loop(cond, body, (0, a, b, c, u))

    return f


def _while_consts(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    # k and m are consts of the body, n of the condition.
    def f(n: Any, k: Any, m: Any, x: Any) -> Any:
        def body(c: Any) -> Any:
            i, a, b = c
            return i + 1, a * k + 1.0, b + np_.sin(a) * m

        return lax_.while_loop(lambda c: c[0] < n, body, (0, x, x * 0.5))

    return f


def _fori_dynamic_in_jit(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    @jit
    def f(n: Any, x: Any, y: Any) -> Any:
        a, b = lax_.fori_loop(0, n, lambda i, c: (np_.sin(c[0]) * 1.5, c[1] * np_.cos(c[0]) + y), (x, y))
        return a * y, b

    return f


ARGS: dict[str, list[Any]] = {
    "mlp_jit": [
        np.linspace(0.1, 1.0, 6, dtype=np.float32).reshape(2, 3),
        np.array([0.1, 0.2, 0.3, 0.4], np.float32),
        np.float32(1.5),
    ],
    "cond": [np.float32(1.0), np.array([0.5, 1.0, 1.5], np.float32), np.array([2.0, 3.0, 4.0], np.float32)],
    "cond_false": [np.float32(-1.0), np.array([0.5, 1.0, 1.5], np.float32), np.array([2.0, 3.0, 4.0], np.float32)],
    "switch_in_jit": [np.int32(1), np.array([0.5, 1.0], np.float32), np.array([2.0, 3.0], np.float32)],
    "scan": [
        np.array([0.1, 0.2, 0.3], np.float32),
        np.array([1.0, -1.0, 0.5], np.float32),
        np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3),
    ],
    "scan_reverse": [
        np.float32(0.3),
        np.linspace(-1.0, 1.0, 5, dtype=np.float32),
        np.linspace(2.0, 1.0, 5, dtype=np.float32),
    ],
    "fori": [np.array([0.1, 0.2], np.float32), np.array([1.0, 2.0], np.float32)],
    "while": [np.int32(3), np.array([1.0, 2.0], np.float32), np.array([0.5, 0.25], np.float32)],
    "while_jvp": [np.int32(4), np.array([1.0, 2.0], np.float32), np.array([0.5, -0.25], np.float32)],
    "while_cond_through_body": [np.float32(0.5), np.float32(1.5), np.float32(-1.0), np.float32(2.0)],
    "while_consts": [np.int32(3), np.float32(0.5), np.float32(2.0), np.array([1.0, 2.0], np.float32)],
    "fori_dynamic_in_jit": [np.int32(3), np.array([0.1, 0.2], np.float32), np.array([1.0, 2.0], np.float32)],
}

PROGRAMS: dict[str, Callable[[Any, Any, Callable[[Program], Program]], Program]] = {
    "mlp_jit": _mlp_jit,
    "cond": _cond,
    "cond_false": _cond,
    "switch_in_jit": _switch_in_jit,
    "scan": _scan,
    "scan_reverse": _scan_reverse,
    "fori": _fori,
    "while": _while,
    "while_jvp": _while_jvp,
    "while_cond_through_body": _while_cond_through_body,
    "while_consts": _while_consts,
    "fori_dynamic_in_jit": _fori_dynamic_in_jit,
}

SAME_AS_JAX = list(PROGRAMS)


def _masks(n: int) -> list[list[bool]]:
    return [list(m) for m in itertools.product([False, True], repeat=n)]


def _split_and_run(closed: _ir.ClosedJaxpr, args: list[Any], unknowns: list[bool], instantiate: list[bool]) -> list[bool]:
    """Splits, runs both halves, compares with the original; returns the unknown flags."""
    jaxpr = closed.jaxpr
    known, unknown, out_uk, n_res = _ir.partial_eval(jaxpr, unknowns, instantiate)
    _ir.typecheck(known)
    _ir.typecheck(unknown)
    assert len(known.invars) == unknowns.count(False)
    assert len(unknown.invars) == n_res + unknowns.count(True)
    assert len(known.outvars) == out_uk.count(False) + n_res
    assert len(unknown.outvars) == out_uk.count(True)
    assert all(o or not i for o, i in zip(out_uk, instantiate))
    expected = fx.eval_jaxpr(jaxpr, closed.consts, *args)
    known_outs = fx.eval_jaxpr(known, closed.consts, *[a for a, u in zip(args, unknowns) if not u])
    n_known = len(known_outs) - n_res
    unknown_outs = fx.eval_jaxpr(unknown, [], *known_outs[n_known:], *[a for a, u in zip(args, unknowns) if u])
    k_it, u_it = iter(known_outs[:n_known]), iter(unknown_outs)
    for i, (e, u) in enumerate(zip(expected, out_uk)):
        got = next(u_it) if u else next(k_it)
        np.testing.assert_allclose(
            np.asarray(got), np.asarray(e), rtol=1e-6, atol=1e-6, err_msg=f"output {i}, unknowns {unknowns}\n{jaxpr}"
        )
    return out_uk


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_halves_compute_the_original(name: str) -> None:
    f = PROGRAMS[name](fnp, lax, fx.jit)
    args = ARGS[name]
    closed = fx.make_jaxpr(f)(*args)
    n_out = len(closed.jaxpr.outvars)
    for unknowns in _masks(len(args)):
        out_uk = _split_and_run(closed, args, unknowns, [False] * n_out)
        if not any(unknowns):
            assert not any(out_uk)
        _split_and_run(closed, args, unknowns, [True] * n_out)


@pytest.mark.parametrize("name", SAME_AS_JAX)
def test_unknown_outputs_agree_with_jax(name: str) -> None:
    args = ARGS[name]
    ours = fx.make_jaxpr(PROGRAMS[name](fnp, lax, fx.jit))(*args)
    theirs = jax.make_jaxpr(PROGRAMS[name](jnp, jax.lax, jax.jit))(*args)
    n_out = len(ours.jaxpr.outvars)
    assert len(theirs.jaxpr.outvars) == n_out
    for unknowns in _masks(len(args)):
        _, _, out_uk, _ = _ir.partial_eval(ours.jaxpr, unknowns, [False] * n_out)
        _, _, jax_uk, _ = jax_pe.partial_eval_jaxpr_nounits(theirs, unknowns, instantiate=False)
        assert out_uk == list(jax_uk), (unknowns, str(ours.jaxpr))


def test_while_splits_into_a_known_loop_and_the_whole_loop() -> None:
    args = ARGS["while"]
    closed = fx.make_jaxpr(PROGRAMS["while"](fnp, lax, fx.jit))(*args)
    known, unknown, out_uk, n_res = _ir.partial_eval(closed.jaxpr, [False, False, True], [False] * 3)
    assert out_uk == [False, False, True]
    # The known loop carries the counter and a; the unknown one is the original loop.
    assert [e.primitive for e in known.eqns] == ["while"]
    assert len(known.eqns[0].outvars) == 2
    assert [e.primitive for e in unknown.eqns] == ["while"]
    assert str(unknown.eqns[0].params["body_jaxpr"]) == str(closed.jaxpr.eqns[0].params["body_jaxpr"])
    assert n_res == 2  # n and x; the literal initial counter stays a literal


def test_while_with_a_condition_on_an_unknown_value_is_wholly_unknown() -> None:
    args = ARGS["while"]
    closed = fx.make_jaxpr(PROGRAMS["while"](fnp, lax, fx.jit))(*args)
    known, unknown, out_uk, n_res = _ir.partial_eval(closed.jaxpr, [True, False, False], [False] * 3)
    assert out_uk == [True, True, True]
    assert known.eqns == []
    assert [e.primitive for e in unknown.eqns] == ["while"]


def _loop_while(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    def f(x: Any) -> Any:
        def body(c: Any) -> Any:
            i, a = c
            return i + 1, np_.sin(a) * 1.5 + a * a

        return lax_.while_loop(lambda c: c[0] < 3, body, (0, x))[1]

    return f


def _loop_fori_traced_bound_in_jit(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    @jit
    def g(n: Any, x: Any) -> Any:
        return lax_.fori_loop(0, n, lambda i, c: (np_.cos(c[0]) * c[1], c[1] + c[0]), (x, x * 0.5))

    def f(x: Any) -> Any:
        a, b = g(np.int32(4), x)
        return a * b

    return f


def _loop_while_on_a_value_in_jit(np_: Any, lax_: Any, jit: Callable[[Program], Program]) -> Program:
    # The trip count depends on the primal: it stays known, the tangent follows it.
    @jit
    def f(x: Any) -> Any:
        def body(c: Any) -> Any:
            s, a = c
            return s + np_.abs(a).sum(), a * 0.75 + np_.tanh(a)

        return lax_.while_loop(lambda c: c[0] < 10.0, body, (np_.float32(0.0), x))

    return f


LOOPS = {
    "while": _loop_while,
    "fori_traced_bound_in_jit": _loop_fori_traced_bound_in_jit,
    "while_on_a_value_in_jit": _loop_while_on_a_value_in_jit,
}


@pytest.mark.parametrize("name", list(LOOPS))
def test_linearize_through_a_while_loop_keeps_the_primal_known(name: str) -> None:
    x = np.array([0.3, -0.7, 1.1], np.float32)
    y, f_lin = fx.linearize(LOOPS[name](fnp, lax, fx.jit), x)
    y_jax, f_lin_jax = jax.linearize(LOOPS[name](jnp, jax.lax, jax.jit), x)
    # The primal outputs are values (a tracer left over from the trace would not convert).
    leaves, leaves_jax = jax.tree_util.tree_leaves(y), jax.tree_util.tree_leaves(y_jax)
    assert len(leaves) == len(leaves_jax)
    for got, want in zip(leaves, leaves_jax):
        value = np.asarray(got)
        assert value.dtype == np.asarray(want).dtype
        np.testing.assert_allclose(value, np.asarray(want), rtol=1e-5)
    for t in (np.array([1.0, 0.5, -2.0], np.float32), np.array([0.0, 1.0, 0.0], np.float32)):
        for got, want in zip(jax.tree_util.tree_leaves(f_lin(t)), jax.tree_util.tree_leaves(f_lin_jax(t))):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_scan_residuals_are_stacked() -> None:
    args = ARGS["scan"]
    closed = fx.make_jaxpr(PROGRAMS["scan"](fnp, lax, fx.jit))(*args)
    known, unknown, out_uk, n_res = _ir.partial_eval(closed.jaxpr, [False, True, False], [False] * 3)
    assert out_uk == [False, True, True]
    assert [e.primitive for e in known.eqns] == ["scan"]
    assert [e.primitive for e in unknown.eqns] == ["scan"]
    # The known scan returns the known carry and stacks the residuals along the length.
    stacked = known.eqns[0].outvars[1:]
    assert stacked and all(v.aval.shape[0] == 4 for v in stacked)


@pytest.mark.parametrize(
    ("unknowns", "instantiate", "message"),
    [
        ([True], [False], "unknowns has 1 flags but the jaxpr needs 2"),
        ([True, False], [False, False], "instantiate has 2 flags but the jaxpr needs 1"),
    ],
)
def test_bad_flag_counts_raise_pass_error(unknowns: list[bool], instantiate: list[bool], message: str) -> None:
    j = _ir.parse_jaxpr("{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = add a b in (c,) }")
    with pytest.raises(PassError, match=message):
        _ir.partial_eval(j, unknowns, instantiate)
