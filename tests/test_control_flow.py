"""Structured control flow (cond, switch, while_loop, fori_loop, scan): eager results,
staged jaxprs, and jit against eager."""

from __future__ import annotations

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
    with pytest.raises(TypeCheckError, match="branch 1 returns"):
        lax.cond(True, lambda x: x, lambda x: x.sum(), X)
    with pytest.raises(TypeCheckError, match="body_fun must return"):
        lax.while_loop(lambda v: v < 3, lambda v: v.astype(np.float32), 0)
    with pytest.raises(TypeCheckError, match="bool scalar"):
        lax.while_loop(lambda v: v, lambda v: v + 1, 0)
    with pytest.raises(TypeCheckError, match="carry's types"):
        lax.scan(lambda c, x: (c.astype(np.int32), x), 0.0, X)
    with pytest.raises(TypeCheckError, match="one length"):
        lax.scan(lambda c, x: (c, x), 0.0, (X, np.ones(3, np.float32)))
    with pytest.raises(TypeCheckError, match="predicate must be a scalar"):
        lax.cond(X > 0, lambda x: x, lambda x: x, X)


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
