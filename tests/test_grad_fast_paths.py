"""The differentiation fast paths stage exactly what the general path does.

Tracing ``grad``, ``jvp`` and ``vmap`` of a program takes short cuts: ``Primitive.bind``
hands a primitive straight to the trace of its operands when that trace is the
innermost one (no ``find_top_trace``, nothing to raise), the arithmetic operators of a
JVP tracer with a Python scalar hand the constant straight to the primitive's JVP rule,
and ``ferrax.numpy``'s float functions bind their primitive at once to a float tracer.
These tests stage programs both ways (the short cuts replaced by the general path) and
compare the jaxpr texts (or the errors), over higher-order derivatives, ``vmap`` of
``grad``, x64, weak types, Python scalars, integer operands and closures over outer
tracers.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import _core, lax
from ferrax._array import Array
from ferrax._interpreters import ad
from ferrax._interpreters.batching import BatchTracer
from test_trace_fast_paths import _stage

_OPERATORS = ["add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv"]
_FLOAT_FUNCTIONS = ["sin", "cos", "exp", "log", "tanh", "sqrt"]


def _general_bind(primitive: _core.Primitive, args: Any, params: Any) -> Any:
    """``bind`` as the core defines it: the top trace, every argument raised into it."""
    trace = _core.find_top_trace(args)
    outs = trace.process_primitive(primitive, [trace.full_raise(a) for a in args], params)
    return outs if primitive.multiple_results else outs[0]


@contextmanager
def _general_paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every short cut replaced by the general path."""
    with monkeypatch.context() as m:
        m.setattr(_core.Primitive, "bind", lambda self, *args, **params: _general_bind(self, args, params))
        m.setattr(_core, "bind", _general_bind)
        for tracer_type in (ad.JVPTracer, BatchTracer):
            for name in _OPERATORS:
                m.setattr(tracer_type, f"__{name}__", getattr(Array, f"__{name}__"))
        for name in _FLOAT_FUNCTIONS:
            m.setattr(fnp, name, getattr(fnp, name).__wrapped__)
        yield


def _same(monkeypatch: pytest.MonkeyPatch, f: Callable[..., Any], *args: Any) -> str:
    fast = _stage(f, *args)
    with _general_paths(monkeypatch):
        slow = _stage(f, *args)
    assert fast == slow
    return fast


SCALARS: list[Any] = [1.5, 2, 0.0, -0.0, 0, 0.1, -3, 2**24, 2**24 + 1, 2**31, 1e39,
                      float("inf"), float("nan"), True, np.float32(2.0), np.float64(0.1)]


def _chain(op: Callable[[Any, Any], Any], s: Any, fn: str = "sin") -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        for _ in range(2):
            x = op(getattr(fnp, fn)(x), s) + x
        return fnp.sum(x)

    return f


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", _OPERATORS)
def test_grad_with_python_scalars(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    base = getattr(operator, name.removeprefix("r"))

    def op(x: Any, s: Any) -> Any:
        return base(s, x) if name.startswith("r") else base(x, s)

    for s in SCALARS:
        for x in (np.linspace(0.5, 1.5, 4, dtype=np.float32), 1.25, np.float32(1.25), np.ones(3, np.float16)):
            _same(monkeypatch, ferrax.grad(_chain(op, s)), x)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", _OPERATORS)
def test_zero_and_python_scalar_tangents(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    base = getattr(operator, name.removeprefix("r"))

    def op(x: Any, s: Any) -> Any:
        return base(s, x) if name.startswith("r") else base(x, s)

    x = np.linspace(0.5, 1.5, 4, dtype=np.float32)
    for s in (1.5, 2, 0.0):
        # A symbolic zero tangent (stop_gradient), with a scalar and with a tracer.
        _same(monkeypatch, ferrax.grad(lambda x: fnp.sum(op(lax.stop_gradient(x), s) + x)), x)
        _same(monkeypatch, ferrax.grad(lambda x: fnp.sum(op(lax.stop_gradient(x), x) * s)), x)
        _same(monkeypatch, ferrax.grad(lambda x: fnp.sum(op(x, lax.stop_gradient(x)) * s)), x)
        # Python scalar primals and tangents given to jvp.
        _same(monkeypatch, lambda y: ferrax.jvp(lambda x: op(x, s) * y, (1.25,), (1.0,)), x)
        _same(monkeypatch, lambda y: ferrax.jvp(lambda x: op(x, x) * y, (1.25,), (1.0,)), x)
        _same(monkeypatch, lambda y: ferrax.jvp(lambda x: op(op(x, s), x), (y,), (0.5,)), np.float32(1.25))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("fn", _FLOAT_FUNCTIONS)
def test_float_functions(fn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    f = _chain(operator.mul, 1.5, fn)
    x = np.linspace(0.5, 1.5, 4, dtype=np.float32)
    _same(monkeypatch, ferrax.grad(f), x)
    _same(monkeypatch, lambda x: ferrax.jvp(f, (x,), (x,)), x)
    # Integer operands are not float: the general way (promotion to float32).
    _same(monkeypatch, lambda n: ferrax.grad(lambda y: fnp.sum(getattr(fnp, fn)(n) * y))(1.0), np.arange(3))


def _program(x: Any, y: Any) -> Any:
    z = fnp.sin(x) * 1.5 + x * y
    z = fnp.tanh(z) / 3 - 2.0 * z
    return fnp.sum(z * z)


def test_higher_order(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.linspace(0.1, 0.9, 5, dtype=np.float32)
    scalar = lambda x: _program(x, 0.5)  # noqa: E731
    _same(monkeypatch, ferrax.grad(scalar), x)
    _same(monkeypatch, ferrax.grad(lambda x: fnp.sum(ferrax.grad(scalar)(x))), x)
    _same(monkeypatch, ferrax.grad(ferrax.grad(lambda t: _program(t, t))), np.float32(0.3))
    _same(monkeypatch, lambda x: ferrax.jvp(lambda y: ferrax.jvp(scalar, (y,), (y,)), (x,), (x,)), x)
    _same(monkeypatch, ferrax.vmap(ferrax.grad(scalar)), np.ones((3, 5), np.float32))
    _same(monkeypatch, ferrax.grad(lambda x: fnp.sum(ferrax.vmap(lambda r: fnp.sin(r) * 2.0 + r)(x))), np.ones((3, 5), np.float32))
    _same(monkeypatch, ferrax.jit(ferrax.grad(scalar)), x)
    _same(monkeypatch, ferrax.grad(ferrax.jit(scalar)), x)


def test_closures_over_outer_tracers(monkeypatch: pytest.MonkeyPatch) -> None:
    def outer(x: Any) -> Any:
        # The inner gradient closes over the outer one's tracer x.
        inner = ferrax.grad(lambda y: fnp.sum(fnp.sin(x * y) * 1.5 + y * x))(x)
        return fnp.sum(inner * 2.0 + x)

    x = np.linspace(0.1, 0.9, 4, dtype=np.float32)
    _same(monkeypatch, ferrax.grad(outer), x)
    _same(monkeypatch, lambda x: ferrax.jvp(outer, (x,), (x,)), x)
    # A JVP tracer closed over by a jit inside the gradient: below the jit's staging.
    _same(monkeypatch, ferrax.grad(lambda x: fnp.sum(ferrax.jit(lambda y: fnp.sin(x) * 1.5 + y * x)(x))), x)
    _same(monkeypatch, ferrax.grad(lambda x: fnp.sum(ferrax.jit(lambda y: fnp.exp(x + 1.0) - y)(x))), x)
    # A closed-over traced value of make_jaxpr's own trace, and a NumPy constant.
    c = np.arange(4, dtype=np.float32)
    _same(monkeypatch, lambda x: ferrax.grad(lambda y: fnp.sum(fnp.sin(y) * x + c * 1.5))(x), x)


def test_weak_types_ints_and_x64(monkeypatch: pytest.MonkeyPatch) -> None:
    # A weakly typed (Python scalar) argument, and an integer operand.
    _same(monkeypatch, ferrax.grad(lambda x: _program(x, 2)), 0.5)
    _same(monkeypatch, ferrax.grad(lambda x, n: fnp.sum(fnp.sin(x) * n * 2 + n)), np.ones(3, np.float32), np.arange(3))
    _same(monkeypatch, ferrax.grad(lambda x, n: fnp.sum(x * (n * 2 + 1))), np.ones(3, np.float32), np.arange(3))
    _same(monkeypatch, ferrax.grad(lambda x: fnp.sum(lax.convert_element_type(x * 3, np.int32) * x)), np.ones(3, np.float32))
    # An int argument: grad's own error, the same both ways.
    assert "TypeError" in _same(monkeypatch, ferrax.grad(lambda n: n * 1.5), 3)
    with ferrax.enable_x64():
        _same(monkeypatch, ferrax.grad(lambda x: _program(x, 0.5)), np.linspace(0.1, 0.9, 5))
        _same(monkeypatch, ferrax.grad(lambda x: _program(x, 0.5)), 0.5)
        _same(monkeypatch, ferrax.grad(lambda x: _program(x, 0.5)), np.ones(3, np.float32))
        _same(monkeypatch, ferrax.grad(_chain(operator.mul, 1.5)), np.ones(3, np.float32))


def test_errors_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # Shapes that do not broadcast, under a JVP trace.
    text = _same(monkeypatch, ferrax.grad(lambda x: fnp.sum(fnp.sin(x) * np.ones(2, np.float32))), np.ones(3, np.float32))
    assert "Error" in text
    # A non-scalar output.
    assert "TypeError" in _same(monkeypatch, ferrax.grad(lambda x: fnp.sin(x) * 2.0), np.ones(3, np.float32))
    # Tracers leaked from a finished gradient: its JVP tracer, and its tangent (a tracer
    # of its finished partial evaluation, refused by the recipe's builder).
    leaked: list[Any] = []

    def leak(x: Any) -> Any:
        y = fnp.sin(x) * 2.0
        leaked.append(y)
        return fnp.sum(y)

    x = np.ones(3, np.float32)
    ferrax.grad(leak)(x)
    assert "Error" in _same(monkeypatch, ferrax.grad(lambda y: fnp.sum(y * leaked[0])), x)
    assert "Error" in _same(monkeypatch, ferrax.grad(lambda y: fnp.sum(y * leaked[0].tangent)), x)
    assert "Error" in _same(monkeypatch, ferrax.grad(lambda y: fnp.sum(fnp.sin(leaked[0].tangent) * y)), x)


def test_chain_values() -> None:
    # The fast paths compute the right gradient (sin(x) * 1.5 + x, twice, summed).
    x = np.linspace(0.1, 0.9, 4, dtype=np.float32)
    g = np.asarray(ferrax.grad(_chain(operator.mul, 1.5))(x))
    y = x.astype(np.float64)
    d1 = 1.5 * np.cos(y) + 1
    y1 = np.sin(y) * 1.5 + y
    d2 = 1.5 * np.cos(y1) + 1
    np.testing.assert_allclose(g, d1 * d2, rtol=1e-5)
