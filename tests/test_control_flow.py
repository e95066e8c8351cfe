"""Structured control flow (cond, switch, while_loop, fori_loop, scan): eager results,
staged jaxprs, and jit against eager."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import TypeCheckError, lax
from ferrax.core import parse_jaxpr, typecheck


def _check_staged(f: Any, *args: Any) -> list[str]:
    """Stages f; the text parses back identically and typechecks; jit matches eager.
    Returns the primitives of the top-level equations."""
    closed = fx.make_jaxpr(f)(*args)
    text = str(closed.jaxpr)
    assert str(parse_jaxpr(text)) == text
    typecheck(closed.jaxpr)
    eager = fx.tree_util.tree_leaves(f(*args))
    compiled = fx.tree_util.tree_leaves(fx.jit(f)(*args))
    assert len(eager) == len(compiled)
    for e, c in zip(eager, compiled):
        assert np.asarray(e).dtype == np.asarray(c).dtype
        np.testing.assert_allclose(np.asarray(c), np.asarray(e), rtol=1e-5, atol=1e-6)
    return [e.primitive for e in closed.jaxpr.eqns]


X = np.linspace(0.1, 1.0, 4, dtype=np.float32)


@pytest.mark.parametrize("pred", [True, False, 1, 0])
def test_cond(pred: Any) -> None:
    def f(p: Any, x: Any) -> Any:
        return lax.cond(p, lambda x: fnp.sin(x), lambda x: fnp.cos(x) * 2.0, x)

    want = np.sin(X) if pred else np.cos(X) * 2.0
    np.testing.assert_allclose(np.asarray(f(pred, X)), want, rtol=1e-6)
    assert "cond" in _check_staged(f, pred, X)


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 7])
def test_switch_clamps_and_joins_closed_over_constants(index: int) -> None:
    a = np.full(4, 2.0, np.float32)
    b = np.arange(4, dtype=np.float32)
    branches = [lambda x: x + a, lambda x: x * b, lambda x: -x]

    def f(i: Any, x: Any) -> Any:
        return lax.switch(i, branches, x)

    k = min(max(index, 0), 2)
    want = [X + a, X * b, -X][k]
    np.testing.assert_allclose(np.asarray(f(index, X)), want, rtol=1e-6)
    _check_staged(f, index, X)


def test_while_loop_with_pytree_carry_and_constants() -> None:
    c = np.ones(4, np.float32)

    def f(x: Any) -> Any:
        return lax.while_loop(lambda v: v["i"] < 5, lambda v: {"i": v["i"] + 1, "x": v["x"] * 2.0 + c}, {"i": 0, "x": x})

    out = f(X)
    want = X.copy()
    for _ in range(5):
        want = want * 2.0 + 1.0
    assert int(np.asarray(out["i"])) == 5
    np.testing.assert_allclose(np.asarray(out["x"]), want, rtol=1e-6)
    assert _check_staged(f, X) == ["while"]


def test_fori_loop() -> None:
    def f(x: Any) -> Any:
        return lax.fori_loop(0, 6, lambda i, v: v + i * x, fnp.zeros_like(x))

    np.testing.assert_allclose(np.asarray(f(X)), np.asarray(15 * X), rtol=1e-6)
    _check_staged(f, X)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan(reverse: bool) -> None:
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)

    def f(xs: Any) -> Any:
        return lax.scan(lambda c, x: (c + x, (c * x, c.sum())), fnp.zeros(3), xs, reverse=reverse)

    carry, (ys, sums) = f(xs)
    c = np.zeros(3, np.float32)
    want_ys: list[Any] = [None] * 4
    want_sums: list[Any] = [None] * 4
    for t in (reversed(range(4)) if reverse else range(4)):
        want_ys[t], want_sums[t] = c * xs[t], c.sum()
        c = c + xs[t]
    np.testing.assert_allclose(np.asarray(carry), c)
    np.testing.assert_allclose(np.asarray(ys), np.stack(want_ys))
    np.testing.assert_allclose(np.asarray(sums), np.array(want_sums))
    assert "scan" in _check_staged(f, xs)


def test_nested_control_flow_under_jit() -> None:
    def f(xs: Any, p: Any) -> Any:
        def body(v: Any) -> Any:
            i, acc = v
            _, ys = lax.scan(lambda c, x: (c, fnp.sin(x) + c), acc[0], xs)
            return i + 1, acc + ys.sum(axis=0)

        def loop(acc: Any) -> Any:
            return lax.while_loop(lambda v: v[0] < 3, body, (0, acc))[1]

        return lax.cond(p, loop, lambda a: a * 0.0, fnp.zeros(xs.shape[1]))

    xs = np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)
    assert _check_staged(f, xs, True)[-1] == "cond"
    np.testing.assert_allclose(np.asarray(f(xs, False)), np.zeros(3))


def test_scan_without_xs_uses_length() -> None:
    carry, ys = lax.scan(lambda c, _: (c * 2.0, c), 1.0, None, length=4)
    assert float(np.asarray(carry)) == 16.0
    np.testing.assert_array_equal(np.asarray(ys), [1.0, 2.0, 4.0, 8.0])


def test_control_flow_errors() -> None:
    with pytest.raises(TypeCheckError, match="the output of true_fun has type float32\\[4\\] but the corresponding output of false_fun has type float32\\[\\]"):
        lax.cond(True, lambda x: x, lambda x: x.sum(), X)
    with pytest.raises(TypeCheckError, match="input carry v has type int32\\[\\] but the corresponding output carry component has type float32\\[\\]"):
        lax.while_loop(lambda v: v < 3, lambda v: v.astype(np.float32), np.int32(0))
    with pytest.raises(TypeCheckError, match="boolean scalar"):
        lax.while_loop(lambda v: v, lambda v: v + 1, 0)
    with pytest.raises(TypeCheckError, match="input carry c has type float32"):
        lax.scan(lambda c, x: (c.astype(np.int32), x), np.float32(0), X)
    with pytest.raises(ValueError, match="different leading sizes"):
        lax.scan(lambda c, x: (c, x), 0.0, (X, np.ones(3, np.float32)))
    with pytest.raises(TypeCheckError, match="predicate must be a scalar"):
        lax.cond(X > 0, lambda x: x, lambda x: x, X)


def test_type_errors_are_type_errors() -> None:
    # As JAX's: TypeCheckError and ConcretizationError are TypeErrors (and FerraxErrors).
    assert issubclass(fx.TypeCheckError, TypeError) and issubclass(fx.TypeCheckError, fx.FerraxError)
    assert issubclass(fx.ConcretizationError, TypeError) and issubclass(fx.ConcretizationError, fx.FerraxError)
    with pytest.raises(TypeError):
        parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[4] = sin a in (b,) }")


def _line_of(marker: str) -> int:
    """The line of this file that holds ``marker`` (in a comment), for messages that
    must name the user's line."""
    with open(__file__) as f:
        for k, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return k
    raise AssertionError(marker)


def test_carry_errors_name_the_path_and_the_users_function() -> None:
    def step(carry: Any, x: Any) -> Any:
        n, state = carry
        return (n + 1, {"h": fnp.concatenate([state["h"], x[None]])}), x

    with pytest.raises(TypeError) as info:
        lax.scan(step, (0, {"h": X}), X)  # scan-carry
    message = str(info.value)
    assert "the input carry component carry[1]['h'] has type float32[4]" in message
    assert "corresponding output carry component has type float32[5], so the shapes do not match" in message
    assert f"step at {__file__}:" in message
    assert f"test_control_flow.py:{_line_of('scan-carry')}" in message

    def body(i: Any, val: Any) -> Any:
        return val[0], val[1].astype(np.int32)

    with pytest.raises(TypeError, match=r"input carry component val\[1\] has type float32\[4\] .* int32\[4\], so the dtypes do not match"):
        lax.fori_loop(0, 3, body, (1.0, X))
    with pytest.raises(TypeError, match=r"structures differ: the input carry val is \(\*, \*\) and the output carry is \*"):
        lax.fori_loop(0, 3, lambda i, val: val[0], (1.0, X))


def test_branch_errors_name_the_branches() -> None:
    def small(x: Any) -> Any:
        return x[:2]

    with pytest.raises(TypeError) as info:
        lax.switch(1, [lambda x: x, small, lambda x: x], X)  # switch-branches
    message = str(info.value)
    assert "output of branches[0] has type float32[4] but the corresponding output of branches[1] has type float32[2]" in message
    assert f"small at {__file__}:" in message
    assert f"test_control_flow.py:{_line_of('switch-branches')}" in message
    with pytest.raises(TypeError, match=r"true_fun returns \(\*, \*\) and false_fun returns \*"):
        lax.cond(True, lambda x: (x, x), lambda x: x, X)


def test_errors_inside_a_body_name_the_line_and_the_function() -> None:
    def body(v: Any) -> Any:
        return v + np.ones(3, np.float32)  # inside-body

    with pytest.raises(TypeError) as info:
        lax.while_loop(lambda v: v[0] < 3, body, X)
    message = str(info.value)
    assert f"test_control_flow.py:{_line_of('inside-body')}" in message
    assert "while tracing body_fun of lax.while_loop (" in message
    # Nested control flow: one line per enclosing function, innermost first.

    def outer(x: Any) -> Any:
        return lax.cond(x[0] > 0, lambda y: fnp.sin(y) + np.ones(2, np.float32), lambda y: y, x)  # nested-branch

    with pytest.raises(TypeError) as info:
        lax.fori_loop(0, 2, lambda i, x: outer(x), X)
    message = str(info.value)
    assert f"test_control_flow.py:{_line_of('nested-branch')}" in message
    assert message.index("while tracing true_fun of lax.cond") < message.index("while tracing body_fun of lax.fori_loop")
    # Each context line names the user's function and file, never one of ferrax's.
    for line in message.splitlines():
        if "while tracing" in line:
            assert f"at {__file__}:" in line and "ferrax" not in line, line
    with pytest.raises(TypeError) as info:
        lax.scan(lambda c, x: (c + np.ones(2, np.float32), x), X, X)
    context = [line for line in str(info.value).splitlines() if "while tracing" in line]
    assert len(context) == 1 and "f of lax.scan (" in context[0] and f"at {__file__}:" in context[0]


def test_no_internal_names_in_tracer_errors() -> None:
    with pytest.raises(TypeError) as info:
        fx.jit(lambda n: fnp.arange(n))(3)
    assert "stop" in str(info.value)
    for bad in ("JaxprTracer", "ConcreteArray", "MainTrace"):
        assert bad not in str(info.value)


# ----------------------------------------------------- weak types through the loops

# Initial carries (Python scalars are weakly typed) and bodies (the new carry as a
# function of the old), every pair run through fori_loop, while_loop and scan.
CARRIES: dict[str, Any] = {
    "int": 0,
    "float": 1.5,
    "bool": True,
    "np.int32": np.int32(1),
    "np.float32": np.float32(1),
    "np.float16": np.float16(1),
    "f32[3]": np.zeros(3, np.float32),
    "i32[3]": np.zeros(3, np.int32),
}
BODIES: dict[str, Any] = {
    "same": lambda c: c,
    "+int": lambda c: c + 1,
    "+float": lambda c: c + 1.5,
    "+np.f32": lambda c: c + np.float32(1.5),
    "+np.i32": lambda c: c + np.int32(1),
    "+np.f16": lambda c: c + np.float16(1),
    "pyfloat": lambda c: 2.5,
    "pyint": lambda c: 2,
    "+f32[3]": lambda c: c + np.ones(3, np.float32),
}
# fori_loop_n: the upper bound an argument, traced under make_jaxpr and jit (a while
# loop there, as in JAX).
LOOPS = ["fori_loop", "fori_loop_n", "while_loop", "scan"]
WEAK_CASES = [(c, b, loop) for c in CARRIES for b in BODIES for loop in LOOPS]


def _loop_program(lx: Any, np_: Any, body_key: str, loop: str) -> Any:
    bf = BODIES[body_key]

    def prog(c0: Any, n: Any) -> Any:
        if loop == "fori_loop":
            return lx.fori_loop(0, 3, lambda i, c: bf(c), c0)
        if loop == "fori_loop_n":
            return lx.fori_loop(0, n, lambda i, c: bf(c), c0)
        if loop == "while_loop":
            return lx.while_loop(lambda kc: kc[0] < 3, lambda kc: (kc[0] + 1, bf(kc[1])), (0, c0))
        return lx.scan(lambda c, x: (bf(c), c), c0, None, length=3)

    return prog


def _types(avals: Any) -> list[tuple[str, bool]]:
    return [(np.dtype(a.dtype).name, bool(a.weak_type)) for a in avals]


def _jax_types(key: tuple[str, str, str]) -> list[tuple[str, bool]] | type[BaseException]:
    """JAX's output types for a case, or the builtin class of its error."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    carry, body, loop = key
    try:
        closed = jax.make_jaxpr(_loop_program(jax.lax, jnp, body, loop))(CARRIES[carry], 3)
    except (TypeError, ValueError) as e:
        return TypeError if isinstance(e, TypeError) else ValueError
    return _types(closed.out_avals)


@pytest.mark.parametrize("key", WEAK_CASES, ids=["-".join(k) for k in WEAK_CASES])
def test_weak_carries_as_jax(key: tuple[str, str, str]) -> None:
    want = _jax_types(key)
    carry, body, loop = key
    prog = _loop_program(lax, fnp, body, loop)
    c0 = CARRIES[carry]
    if not isinstance(want, list):
        for run in (prog, fx.jit(prog), fx.make_jaxpr(prog)):
            with pytest.raises(want, match="carry"):
                run(c0, 3)
        return
    assert _types(fx.make_jaxpr(prog)(c0, 3).out_avals) == want
    eager = fx.tree_util.tree_leaves(prog(c0, 3))
    jitted = fx.tree_util.tree_leaves(fx.jit(prog)(c0, 3))
    assert _types(eager) == want
    assert _types(jitted) == want
    for e, j in zip(eager, jitted):
        np.testing.assert_array_equal(np.asarray(e), np.asarray(j))


@pytest.mark.parametrize("key", [("int", "+float", "fori_loop"), ("int", "+float", "fori_loop_n"), ("int", "pyfloat", "scan"), ("float", "+np.f16", "while_loop"), ("int", "+np.f32", "scan")])
def test_weak_carry_values_as_jax(key: tuple[str, str, str]) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    carry, body, loop = key
    theirs = jax.tree_util.tree_leaves(jax.jit(_loop_program(jax.lax, jnp, body, loop))(CARRIES[carry], 3))
    ours = fx.tree_util.tree_leaves(_loop_program(lax, fnp, body, loop)(CARRIES[carry], 3))
    for a, b in zip(ours, theirs):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# Loop bounds: the index's type and the loop's result, as JAX's fori_loop gives them
# (Python and NumPy integer bounds, mixed, and traced under jit).
BOUNDS: dict[str, Any] = {
    "int": 3,
    "np.int32": np.int32(3),
    "np.int64": np.int64(3),
    "np.int8": np.int8(3),
    "np.int16": np.int16(3),
    "float": 3.0,
}
BOUND_CASES = [(lo, hi, traced) for lo in BOUNDS for hi in BOUNDS for traced in ("", "lower", "upper")]


def _bounds_program(lx: Any, jit: Any, lo_key: str, hi_key: str, traced: str) -> Any:
    lo = type(BOUNDS[lo_key])(0)
    hi = BOUNDS[hi_key]
    init = np.int8(0)

    def body(i: Any, c: Any) -> Any:
        return c + i

    if traced == "lower":
        return lambda: jit(lambda a: lx.fori_loop(a, hi, body, init))(lo)
    if traced == "upper":
        return lambda: jit(lambda b: lx.fori_loop(lo, b, body, init))(hi)
    return lambda: lx.fori_loop(lo, hi, body, init)


@pytest.mark.parametrize("key", BOUND_CASES, ids=["-".join(k) for k in BOUND_CASES])
def test_fori_loop_bounds_as_jax(key: tuple[str, str, str]) -> None:
    jax = pytest.importorskip("jax")
    try:
        theirs = jax.make_jaxpr(lambda: _bounds_program(jax.lax, jax.jit, *key)())()
    except TypeError:
        with pytest.raises(TypeError):
            _bounds_program(lax, fx.jit, *key)()
        return
    want = _types(theirs.out_avals)
    ours = _bounds_program(lax, fx.jit, *key)()
    assert _types([ours]) == want
    assert int(np.asarray(ours)) == 3 if want[0][0] != "float32" else float(np.asarray(ours)) == 3.0


@pytest.mark.parametrize(
    "pred",
    [True, False, 0, 2, -1, 0.0, 0.5, np.int32(0), np.int32(7), np.uint8(1), np.float32(0), np.float16(-2), np.bool_(True)],
    ids=repr,
)
def test_cond_predicates_as_jax(pred: Any) -> None:
    jax = pytest.importorskip("jax")

    def prog(lx: Any) -> Any:
        return lambda p: lx.cond(p, lambda: np.float32(1), lambda: np.float32(2))

    want = np.asarray(jax.jit(prog(jax.lax))(pred))
    assert np.asarray(prog(lax)(pred)) == want
    assert np.asarray(fx.jit(prog(lax))(pred)) == want


@pytest.mark.parametrize("pred", [np.complex64(1), "yes", None, [True], np.ones(2, bool)], ids=repr)
def test_cond_rejects_predicates_as_jax(pred: Any) -> None:
    jax = pytest.importorskip("jax")
    with pytest.raises(TypeError):
        jax.lax.cond(pred, lambda: 1.0, lambda: 2.0)
    with pytest.raises(TypeError, match="predicate"):
        lax.cond(pred, lambda: 1.0, lambda: 2.0)


def test_fori_loop_with_concrete_bounds_is_a_scan_as_in_jax() -> None:
    jax = pytest.importorskip("jax")

    def prog(lx: Any) -> Any:
        return lambda x: lx.fori_loop(0, 4, lambda i, c: c * 2.0 + i, x)

    ours = [str(e.primitive) for e in fx.make_jaxpr(prog(lax))(X).jaxpr.eqns]
    theirs = [str(e.primitive) for e in jax.make_jaxpr(prog(jax.lax))(X).jaxpr.eqns]
    assert ours == theirs == ["scan"]
    n_ours = [str(e.primitive) for e in fx.make_jaxpr(lambda x, n: lax.fori_loop(0, n, lambda i, c: c + i, x))(X, 3).jaxpr.eqns]
    assert n_ours == ["while"]


def test_staged_like_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    def program(lx: Any, np_: Any) -> Any:
        def f(x: Any) -> Any:
            y = lx.cond(x[0] > 0, np_.sin, np_.cos, x)
            i, z = lx.while_loop(lambda v: v[0] < 3, lambda v: (v[0] + 1, v[1] * 2.0), (0, y))
            c, ys = lx.scan(lambda c, t: (c + t, c * t), z[0], z)
            return c, ys

        return f

    ours = fx.make_jaxpr(program(lax, fnp))(X)
    theirs = jax.make_jaxpr(program(jax.lax, jnp))(X)
    # The same control-flow primitives with the same output types.
    def pick(eqns: Any) -> list[str]:
        return [str(getattr(e.primitive, "name", e.primitive)) for e in eqns]

    assert [p for p in pick(ours.jaxpr.eqns) if p in ("cond", "while", "scan")] == ["cond", "while", "scan"]
    assert [p for p in pick(theirs.jaxpr.eqns) if p in ("cond", "while", "scan")] == ["cond", "while", "scan"]
    assert [(a.shape, a.dtype) for a in ours.out_avals] == [(a.shape, a.dtype) for a in theirs.out_avals]


# Branch outputs of every kind against each other: JAX's result types (those of the
# false branch, weak types included) or its error class.
OUTPUTS: dict[str, Any] = {
    "int": 1,
    "float": 1.5,
    "np.float32": np.float32(1),
    "np.int32": np.int32(1),
    "f32[2]": np.ones(2, np.float32),
    "pair": (1.0, np.float32(2)),
}
BRANCH_CASES = [(t, f) for t in OUTPUTS for f in OUTPUTS]


@pytest.mark.parametrize("key", BRANCH_CASES, ids=["-".join(k) for k in BRANCH_CASES])
def test_branch_output_types_as_jax(key: tuple[str, str]) -> None:
    jax = pytest.importorskip("jax")
    t, f = (OUTPUTS[k] for k in key)

    def prog(lx: Any) -> Any:
        return lambda p, i: (lx.cond(p, lambda: t, lambda: f), lx.switch(i, [lambda: f, lambda: t, lambda: f]))

    try:
        want: Any = _types(jax.make_jaxpr(prog(jax.lax))(True, 1).out_avals)
    except TypeError:
        want = TypeError
    if want is TypeError:
        with pytest.raises(TypeError, match="branches must return the same"):
            fx.make_jaxpr(prog(lax))(True, 1)
        return
    assert _types(fx.make_jaxpr(prog(lax))(True, 1).out_avals) == want
    assert _types(fx.tree_util.tree_leaves(prog(lax)(True, 1))) == want


# vmap of control flow whose decision differs per element, against JAX: the values (eager
# and jitted) and, for programs of lax operations only, the jaxpr text.

N = np.array([0, 3, 1, 5], np.int32)
A = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(4, 2)
M = np.linspace(0.5, 2.0, 6, dtype=np.float32).reshape(2, 3)


def _while_layouts(lx: Any, vmap: Any) -> dict[str, Any]:
    """vmapped while loops with a batched predicate (or a batched carry only), their carries
    batched or not when they enter: (function, arguments)."""

    def count_to(n: Any, a: Any) -> Any:  # the bound a batched cond constant; carries unbatched
        return lx.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0, c[2]), (0, a, M))

    def until_large(a: Any) -> Any:  # the predicate depends on a batched carry; M unbatched
        return lx.while_loop(
            lambda c: lx.reduce_max(c[0], (0,)) < 4.0, lambda c: (c[0] * 2.0 + 1.0, c[1] + 1.0), (a, M)
        )

    def fixed_trips(a: Any) -> Any:  # the predicate is the same for every element
        return lx.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, lx.sin(c[1])), (0, a))

    def lanes(n: Any, a: Any) -> Any:  # vmap within: the inner predicate batched (bool[2])
        return vmap(lambda x: lx.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1.0, c[1] * 0.5), (x, n)))(a)

    def lanes_and_rows(a: Any, b: Any) -> Any:  # b, batched outside, does not reach the predicate
        body = lambda c: (c[0] + 1.0, c[1] * 0.5 + c[0])  # noqa: E731
        return vmap(lambda x: lx.while_loop(lambda c: c[0] < 3.0, body, (x, b)))(a)

    return {
        "bound_batched": (vmap(count_to, in_axes=(0, None)), (N, A[0])),
        "bound_batched_carry_batched": (vmap(count_to), (N, A)),
        "carry_batched_axis1": (vmap(until_large, in_axes=1), (A.T,)),
        "predicate_unbatched": (vmap(fixed_trips), (A,)),
        "outer_batch_not_in_predicate": (vmap(lanes_and_rows, in_axes=(None, 0)), (A[0] * 3, M.T)),
        "outer_batch_in_predicate": (vmap(lanes, in_axes=(0, 0)), (np.array([1.0, 3.0], np.float32), A[:2] * 2)),
    }


WHILE_LAYOUTS = list(_while_layouts(lax, fx.vmap))


def test_vmap_of_while_with_batched_predicate_as_jax() -> None:
    jax = pytest.importorskip("jax")
    ours, theirs = _while_layouts(lax, fx.vmap), _while_layouts(jax.lax, jax.vmap)
    # JAX's values, computed once for every layout.
    want = jax.jit(lambda: {k: f(*args) for k, (f, args) in theirs.items()})()
    for key in WHILE_LAYOUTS:
        f, args = ours[key]
        expected = jax.tree_util.tree_leaves(want[key])
        for got in (f(*args), fx.jit(f)(*args)):
            leaves = fx.tree_util.tree_leaves(got)
            assert len(leaves) == len(expected), key
            for g, w in zip(leaves, expected):
                assert np.asarray(g).shape == np.asarray(w).shape, key
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, err_msg=key)
        assert _text(fx.make_jaxpr(f)(*args)) == _text(jax.make_jaxpr(theirs[key][0])(*args)), key


def _text(closed: Any) -> str:
    """A jaxpr's text on one line, JAX's `np.int64(1)` params (NPINT in test_jax_corpus)
    written as ints."""
    text = re.sub(r"np\.int64\((-?\d+)\)", r"\1", str(closed))
    return re.sub(r"\s+\]", "]", re.sub(r"\[\s+", "[", re.sub(r"\s+", " ", text)))


def test_vmap_of_while_with_batched_predicate_keeps_it_batched() -> None:
    # The cond_jaxpr returns the predicate per element; the body does not select.
    closed = fx.make_jaxpr(fx.vmap(lambda n: lax.while_loop(lambda c: c < 10, lambda c: c * 2 + 1, n)))(N)
    (eqn,) = closed.jaxpr.eqns
    assert eqn.primitive == "while"
    assert [a.str_short() for a in eqn.params["cond_jaxpr"].out_avals] == ["bool[4]"]
    assert "select_n" not in str(eqn.params["body_jaxpr"])
    want = []
    for n in N.tolist():
        while n < 10:
            n = n * 2 + 1
        want.append(n)
    np.testing.assert_array_equal(np.asarray(fx.vmap(lambda n: lax.while_loop(lambda c: c < 10, lambda c: c * 2 + 1, n))(N)), want)


def test_jvp_of_vmap_of_while_with_batched_predicate() -> None:
    jax = pytest.importorskip("jax")

    def prog(lx: Any, vmap: Any) -> Any:
        return vmap(lambda n, a: lx.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, lx.sin(c[1]) * 1.5), (0, a))[1])

    t = np.ones_like(A)
    got = fx.jvp(lambda a: prog(lax, fx.vmap)(N, a), (A,), (t,))
    want = jax.jvp(lambda a: prog(jax.lax, jax.vmap)(N, a), (A,), (t,))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)


def _cond_program(lx: Any, np_: Any, vmap: Any) -> Any:
    # sqrt and its derivative are NaN where the branch is not taken: the gradient must not be.
    return vmap(lambda p, x: lx.cond(p, lambda v: lx.sqrt(v) * 2.0, lambda v: v * v, x))


def test_vmap_of_cond_with_batched_predicate_as_jax() -> None:
    jax = pytest.importorskip("jax")
    p = np.array([True, False, True, False])
    x = np.array([0.5, -2.0, 3.0, -0.25], np.float32)
    ours, theirs = _cond_program(lax, fnp, fx.vmap), _cond_program(jax.lax, jax.numpy, jax.vmap)
    assert str(fx.make_jaxpr(ours)(p, x)) == str(jax.make_jaxpr(theirs)(p, x))
    want_v, want_g = jax.jit(lambda: (theirs(p, x), jax.grad(lambda x: theirs(p, x).sum())(x)))()
    grad = fx.grad(lambda x: ours(p, x).sum())
    for v, g in ((ours(p, x), grad(x)), fx.jit(lambda: (ours(p, x), grad(x)))()):
        np.testing.assert_allclose(np.asarray(v), np.asarray(want_v), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(g), np.asarray(want_g), rtol=1e-6)
        assert np.isfinite(np.asarray(g)).all()


def test_cond_branch_without_constants_is_inlined_as_jax() -> None:
    jax = pytest.importorskip("jax")
    w = np.arange(9, dtype=np.float32).reshape(3, 3)

    def prog(lx: Any) -> Any:
        return lambda p, x: lx.cond(p, lambda v: v - 1.0, lambda v: lx.dot(w, v), x)

    ours = fx.make_jaxpr(prog(lax))(True, X[:3])
    assert str(ours) == str(jax.make_jaxpr(prog(jax.lax))(True, X[:3]))
    assert "jit" not in str(ours)
    for p in (True, False):
        np.testing.assert_allclose(np.asarray(fx.jit(prog(lax))(p, X[:3])), np.asarray(prog(jax.lax)(p, X[:3])), rtol=1e-6)



def test_forwarded_carries_become_body_constants_as_jax() -> None:
    # A carry the body returns unchanged and the predicate does not read is a body
    # constant (fori_loop's M); one the predicate reads stays a carry (while_loop's M).
    jax = pytest.importorskip("jax")

    def prog(lx: Any) -> Any:
        return lambda x, n: (
            lx.fori_loop(0, n, lambda i, c: (c[0] * 2.0, c[1], c[2] + 1), (x, M, 0)),
            lx.while_loop(lambda c: c[1].sum() > c[0], lambda c: (c[0] + 1.0, c[1]), (x, M)),
        )

    x = np.float32(1.0)
    ours = fx.make_jaxpr(prog(lax))(x, 3)
    assert str(ours) == str(jax.make_jaxpr(prog(jax.lax))(x, 3))
    assert [e.params["body_nconsts"] for e in ours.jaxpr.eqns] == [1, 0]
    want = jax.tree_util.tree_leaves(prog(jax.lax)(x, 3))
    for got in (prog(lax)(x, 3), fx.jit(prog(lax))(x, 3)):
        leaves = fx.tree_util.tree_leaves(got)
        assert [np.asarray(g).dtype for g in leaves] == [np.asarray(w).dtype for w in want]
        for g, w in zip(leaves, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_weak_float_literals_as_jax() -> None:
    # A Python float next to a weakly typed float32 value is a weak literal JAX writes as
    # the Python float (0.9), on every path: the operator, ferrax.numpy, lax, under jvp;
    # next to a strong one it is the float32 value (0.8999999761581421).
    jax = pytest.importorskip("jax")

    def prog(lx: Any, np_: Any, jvp: Any) -> Any:
        def body(c: Any, x: Any) -> Any:
            return c * 0.9 + np_.multiply(c, 0.1) + lx.mul(c, 0.3) + x * 0.7, c

        def f(xs: Any) -> Any:
            out = lx.scan(body, 0.0, xs, reverse=True)
            return out, jvp(lambda y: y * 0.9 + 0.1, (xs,), (xs,))

        return f

    xs = np.arange(8, dtype=np.float32)
    ours, theirs = prog(lax, fnp, fx.jvp), prog(jax.lax, jax.numpy, jax.jvp)
    text = str(fx.make_jaxpr(ours)(xs))
    assert "0.9:f32[]" in text and "0.8999999761581421:f32[]" in text
    assert text == str(jax.make_jaxpr(theirs)(xs))
    want = jax.tree_util.tree_leaves(theirs(xs))
    for got in (ours(xs), fx.jit(ours)(xs)):
        for g, w in zip(fx.tree_util.tree_leaves(got), want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
