"""``jit`` as JAX's: on methods (a descriptor), ``functools.partial(jit, ...)``, early
errors for non-callables, and ``jit(f).trace(...)`` giving a ``Traced``."""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import tree_util
from ferrax.core import ClosedJaxpr, ShapedArray

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


class Scaler:
    """Static ``self`` (hashable by identity): its attributes are constants of the trace."""

    def __init__(self, k: float) -> None:
        self.k = k
        self.traces = 0

    @functools.partial(ferrax.jit, static_argnums=0)
    def scale(self, x: Any) -> Any:
        self.traces += 1
        return x * self.k

    @ferrax.jit
    def traced_self(self, x: Any) -> Any:
        return x


class Params:
    """A pytree ``self``: its leaves are traced arguments."""

    def __init__(self, w: Any, b: Any) -> None:
        self.w = w
        self.b = b

    @ferrax.jit
    def apply(self, x: Any) -> Any:
        return x @ self.w + self.b


tree_util.register_pytree_node(Params, lambda p: ((p.w, p.b), None), lambda _, children: Params(*children))


def test_jit_on_a_method_binds_self() -> None:
    p = Params(np.eye(2, dtype=np.float32), np.ones(2, np.float32))
    x = np.array([[1.0, 2.0]], np.float32)
    out = p.apply(x)
    assert isinstance(out, ferrax.Array)
    assert out.tolist() == [[2.0, 3.0]]
    # New leaves, same types: the same trace; the result follows the new values.
    q = Params(2 * np.eye(2, dtype=np.float32), np.zeros(2, np.float32))
    assert q.apply(x).tolist() == [[2.0, 4.0]]
    assert Params.apply._cache_size() == 1
    # Through the class, self is passed explicitly.
    assert Params.apply(p, x).tolist() == [[2.0, 3.0]]
    assert isinstance(Params.__dict__["apply"], ferrax.jit(lambda: 0).__class__)


def test_partial_jit_with_static_self() -> None:
    s = Scaler(3.0)
    x = np.arange(3, dtype=np.float32)
    assert s.scale(x).tolist() == [0.0, 3.0, 6.0]
    assert s.scale(x + 1).tolist() == [3.0, 6.0, 9.0]
    assert s.traces == 1  # same self, same types: traced once
    t = Scaler(-1.0)
    assert t.scale(x).tolist() == [0.0, -1.0, -2.0]
    assert t.traces == 1 and s.traces == 1  # another self is another static key


def test_a_non_array_self_that_is_not_static_is_a_type_error() -> None:
    s = Scaler(1.0)
    with pytest.raises(TypeError) as info:
        s.traced_self(np.ones(2, np.float32))
    assert "Scaler" in str(info.value)


def test_unhashable_static_self_is_a_type_error() -> None:
    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        @functools.partial(ferrax.jit, static_argnums=0)
        def f(self, x: Any) -> Any:
            return x

    with pytest.raises(ValueError, match="not hashable"):  # as JAX
        Unhashable().f(np.ones(2, np.float32))


def test_jit_on_a_method_matches_jax() -> None:
    class J:
        def __init__(self, k: float) -> None:
            self.k = k

        @functools.partial(jax.jit, static_argnums=0)
        def scale(self, x: Any) -> Any:
            return x * self.k

    x = np.linspace(-1, 1, 5).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(Scaler(2.5).scale(x)), np.asarray(J(2.5).scale(x)))


def test_jit_of_a_static_method_and_a_bound_method() -> None:
    class C:
        @staticmethod
        @ferrax.jit
        def double(x: Any) -> Any:
            return x * 2

        def triple(self, x: Any) -> Any:
            return x * 3

    assert C.double(np.float32(2)).tolist() == 4.0
    assert C().double(np.float32(2)).tolist() == 4.0
    bound = ferrax.jit(functools.partial(C.triple, C()))
    assert bound(np.float32(2)).tolist() == 6.0


@pytest.mark.parametrize("bad", [3, "f", None, [lambda x: x], 2.5])
def test_jit_of_a_non_callable_fails_at_once(bad: Any) -> None:
    with pytest.raises(TypeError) as info:
        ferrax.jit(bad)
    message = str(info.value)
    assert "callable" in message
    assert os.path.basename(__file__) in message
    with pytest.raises(TypeError, match="callable"):
        jax.jit(bad)


def test_partial_jit_of_a_non_callable_fails_when_applied() -> None:
    decorator = functools.partial(ferrax.jit, static_argnums=0)
    with pytest.raises(TypeError, match="callable"):
        decorator(42)  # type: ignore[arg-type]


def f_trace(x: Any, y: Any) -> tuple[ferrax.Array, dict[str, ferrax.Array]]:
    return x * 2.0, {"s": fnp.sum(x + y)}


def test_trace_returns_a_traced_with_jaxpr_and_lower() -> None:
    x = np.ones((2, 3), np.float32)
    y = np.float32(1.0)
    jf = ferrax.jit(f_trace)
    traced = jf.trace(x, y)
    assert isinstance(traced.jaxpr, ClosedJaxpr)
    assert str(traced.jaxpr) == str(ferrax.make_jaxpr(f_trace)(x, y))
    assert traced.fun_name == "f_trace"
    assert traced.in_avals == [ShapedArray((2, 3), np.float32), ShapedArray((), np.float32)]
    info = traced.out_info
    assert isinstance(info, tuple) and isinstance(info[1], dict)
    assert info[0] == ShapedArray((2, 3), np.float32)
    assert info[1]["s"] == ShapedArray((), np.float32)
    assert traced.out_avals == [info[0], info[1]["s"]]
    lowered = traced.lower()
    assert lowered.as_text() == jf.lower(x, y).as_text()
    compiled = lowered.compile()
    out = compiled(x, y)
    assert out[0].tolist() == (x * 2).tolist()
    assert float(out[1]["s"]) == 12.0


def test_trace_agrees_with_jax_traced() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours = ferrax.jit(lambda v: fnp.sum(v * 2.0, axis=0)).trace(x)
    theirs = jax.jit(lambda v: jnp.sum(v * 2.0, axis=0)).trace(x)
    assert ours.out_info.shape == theirs.out_info.shape
    assert ours.out_info.dtype == theirs.out_info.dtype
    ours_eqns = [e.primitive for e in ours.jaxpr.jaxpr.eqns]
    theirs_eqns = [e.primitive.name for e in theirs.jaxpr.jaxpr.eqns]
    assert ours_eqns == theirs_eqns


def test_trace_with_static_arguments_does_not_run() -> None:
    calls: list[int] = []

    def g(x: Any, n: int) -> Any:
        calls.append(n)
        return x**n

    traced = ferrax.jit(g, static_argnums=1).trace(np.float32(2), 3)
    assert calls == [3]
    assert "integer_pow" in str(traced.jaxpr)
    assert traced.in_avals == [ShapedArray((), np.float32)]


def test_make_jaxpr_still_returns_the_closed_jaxpr() -> None:
    out = ferrax.make_jaxpr(lambda v: v + 1)(np.ones(2, np.float32))
    assert isinstance(out, ClosedJaxpr)
