"""The staging fast paths stage exactly what the general path does.

While tracing, ``x + y``, ``x * 2.0`` and the other arithmetic operators of a traced
value skip ``ferrax.numpy``'s promotion when it has nothing to do (operands of one type,
or a Python scalar that becomes a literal of the tracer's dtype). These tests compare the
jaxpr each operator stages with the one the ``ferrax.numpy`` function stages, over
dtypes, weak types and scalars, including those the fast paths must leave alone.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax

OPS: list[tuple[str, Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = [
    ("add", operator.add, fnp.add),
    ("sub", operator.sub, fnp.subtract),
    ("mul", operator.mul, fnp.multiply),
    ("div", operator.truediv, fnp.true_divide),
]


def _typed(kind: str) -> tuple[Any, Callable[[Any], Any]]:
    """An argument and a function making from it a tracer of the type ``kind``."""
    if kind == "f32-weak":
        return 1.5, lambda x: x
    if kind == "i32-weak":
        return 3, lambda x: x
    if kind == "bool-weak":
        return np.array([True, False]), lambda x: lax.convert_element_type(x, np.bool_, True)
    if kind == "f64-weak":
        return np.ones(3), lambda x: lax.convert_element_type(x, np.float64, True)
    dtype = {"f32": "float32", "i32": "int32", "f64": "float64", "f16": "float16",
             "bf16": "bfloat16", "i8": "int8", "u32": "uint32"}.get(kind, kind)
    value = np.ones(3, dtype=np.dtype(ferrax.dtypes.canonicalize(dtype)))
    return value, lambda x: x


KINDS = ["f32", "f32-weak", "i32", "i32-weak", "f64", "f64-weak", "f16", "bf16", "i8", "u32",
         "bool", "bool-weak"]
SCALARS: list[Any] = [1.5, 2, 0.0, -0.0, 0, 0.1, -3, 2**24, 2**24 + 1, 2**31, -(2**31),
                      2**40, 1e39, float("inf"), float("nan"), True, np.float32(2.0),
                      np.float64(0.1)]


def _stage(f: Callable[..., Any], *args: Any) -> str:
    """The jaxpr text of ``f`` staged on ``args``, or the exception it raised (without
    the user's line it names)."""
    try:
        return str(ferrax.make_jaxpr(f)(*args))
    except Exception as e:  # noqa: BLE001 - compared between the two paths
        message = re.sub(r",? at \S+:\d+.*", "", str(e).splitlines()[0])
        return f"{type(e).__name__}: {message}"


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", OPS, ids=lambda o: o[0])
def test_scalar_operand(op: tuple[str, Any, Any], kind: str) -> None:
    _, operator_fn, numpy_fn = op
    arg, make = _typed(kind)
    for s in SCALARS:
        fast = _stage(lambda x: operator_fn(make(x), s), arg)
        slow = _stage(lambda x: numpy_fn(make(x), s), arg)
        assert fast == slow, (kind, s)
        fast = _stage(lambda x: operator_fn(s, make(x)), arg)
        slow = _stage(lambda x: numpy_fn(s, make(x)), arg)
        assert fast == slow, (kind, s, "reflected")


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", OPS, ids=lambda o: o[0])
def test_same_type_operands(op: tuple[str, Any, Any], kind: str) -> None:
    _, operator_fn, numpy_fn = op
    arg, make = _typed(kind)
    fast = _stage(lambda x: operator_fn(make(x), make(x)), arg)
    slow = _stage(lambda x: numpy_fn(make(x), make(x)), arg)
    assert fast == slow
    # Two distinct values of one type, and a value with itself.
    fast = _stage(lambda x, y: operator_fn(make(x), make(y)), arg, arg)
    slow = _stage(lambda x, y: numpy_fn(make(x), make(y)), arg, arg)
    assert fast == slow


@pytest.mark.parametrize("op", OPS, ids=lambda o: o[0])
def test_mixed_operands_take_the_general_path(op: tuple[str, Any, Any]) -> None:
    _, operator_fn, numpy_fn = op
    x = np.ones((2, 3), np.float32)
    others: list[Any] = [np.ones(3, np.float32), np.ones((2, 3), np.int32), np.ones((2, 3)),
                         np.float32(2.0), fnp.asarray(2.0)]
    for y in others:
        assert _stage(lambda a: operator_fn(a, y), x) == _stage(lambda a: numpy_fn(a, y), x)
        assert _stage(lambda a, b: operator_fn(a, b), x, y) == _stage(
            lambda a, b: numpy_fn(a, b), x, y
        )


def test_outer_tracers_in_an_inner_trace() -> None:
    x = np.ones(3, np.float32)

    def outer(a: Any) -> Any:
        inner = ferrax.make_jaxpr(lambda b: a * 2.0 + b * a)(x)
        return a * 3.0, inner

    def outer_numpy(a: Any) -> Any:
        inner = ferrax.make_jaxpr(lambda b: fnp.add(fnp.multiply(a, 2.0), fnp.multiply(b, a)))(x)
        return fnp.multiply(a, 3.0), inner

    seen: list[str] = []
    for f in (outer, outer_numpy):
        def run(a: Any, f: Any = f) -> Any:
            out, inner = f(a)
            seen.append(str(inner))
            return out

        seen.append(str(ferrax.make_jaxpr(run)(x)))
    assert seen[0] == seen[2] and seen[1] == seen[3]
    assert "mul" in seen[0]


def test_literals_are_rounded_like_numpy() -> None:
    x = np.ones(3, np.float32)
    for s in [0.1, 1 / 3, 1e-45, 3.4028235e38, -0.0, 16777217]:
        fast = str(ferrax.make_jaxpr(lambda a: a * s)(x))
        want = repr(np.asarray(s, np.float32).item())
        assert f"{want}:f32[]" in fast, (s, fast)


def test_common_operators_skip_ferrax_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast paths are taken where they apply (tracing speed depends on it)."""

    def general(*args: Any) -> Any:
        raise AssertionError("took the general path")

    for name in ("add", "subtract", "multiply", "true_divide"):
        monkeypatch.setattr(fnp, name, general)

    def f(x: Any, y: Any) -> Any:
        z = x * 1.5 + x - 2 * x / 3.0
        return 1.0 - z / x, y * 2 - 7 + y

    closed = ferrax.make_jaxpr(f)(np.ones(4, np.float32), np.ones(4, np.int32))
    assert len(closed.jaxpr.eqns) == 10
    with pytest.raises(AssertionError, match="general path"):
        ferrax.make_jaxpr(lambda x: x + np.ones(4, np.float32))(np.ones(4, np.float32))


X64_KINDS: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    "f32": (np.ones(3, np.float32), lambda x: x),
    "f32-weak": (np.ones(3, np.float32), lambda x: lax.convert_element_type(x, np.float32, True)),
    "i32-weak": (np.ones(3, np.int32), lambda x: lax.convert_element_type(x, np.int32, True)),
    "f64": (np.ones(3), lambda x: x),
    "float": (1.5, lambda x: x),
    "int": (3, lambda x: x),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", list(X64_KINDS))
@pytest.mark.parametrize("op", OPS, ids=lambda o: o[0])
def test_scalar_operand_with_x64(op: tuple[str, Any, Any], kind: str) -> None:
    # With x64 a Python scalar is a weak 64-bit value: a weak 32-bit tracer and it meet
    # at 64 bits, which the fast path must not shortcut.
    _, operator_fn, numpy_fn = op
    arg, make = X64_KINDS[kind]
    with ferrax.enable_x64():
        for s in SCALARS:
            for fast_fn, slow_fn in (
                (lambda x: operator_fn(make(x), s), lambda x: numpy_fn(make(x), s)),
                (lambda x: operator_fn(s, make(x)), lambda x: numpy_fn(s, make(x))),
            ):
                assert _stage(fast_fn, arg) == _stage(slow_fn, arg), (kind, s)


# ------------------------------------------------- broadcasting, products, float functions
# Two tracers of one dtype and weak type but different shapes, dot/matmul of two tracers,
# and float functions of one tracer are staged without ferrax.numpy's promotion too.

SHAPED_KINDS: dict[str, tuple[Any, bool]] = {
    "f32": (np.float32, False), "f32-weak": (np.float32, True), "i32": (np.int32, False),
    "i32-weak": (np.int32, True), "f16": (np.float16, False), "bool": (np.bool_, False),
    "u8": (np.uint8, False), "f64": (np.float64, False),
}


def _shaped(kind: str, shape: tuple[int, ...]) -> tuple[Any, Callable[[Any], Any]]:
    """An argument of ``shape`` and a function making from it a tracer of type ``kind``."""
    dtype, weak = SHAPED_KINDS[kind]
    dtype = ferrax.dtypes.canonicalize(dtype)
    arg = np.arange(1, 1 + int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dtype)
    if weak:
        return arg, lambda x: lax.convert_element_type(x, dtype, True)
    return arg, lambda x: x


SHAPE_PAIRS = [((3,), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((1, 3), (2, 3)), ((), (2, 3)),
               ((2, 3), ()), ((3,), (4, 2, 3)), ((2, 1, 3), (4, 3)), ((3,), (2, 4)),
               ((2, 3), (3, 2)), ((2, 3), (2, 3))]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", list(SHAPED_KINDS))
@pytest.mark.parametrize("op", OPS, ids=lambda o: o[0])
def test_broadcast_operands(op: tuple[str, Any, Any], kind: str) -> None:
    _, operator_fn, numpy_fn = op
    for xs, ys in SHAPE_PAIRS:
        (a, make_a), (b, make_b) = _shaped(kind, xs), _shaped(kind, ys)
        fast = _stage(lambda x, y: operator_fn(make_a(x), make_b(y)), a, b)
        slow = _stage(lambda x, y: numpy_fn(make_a(x), make_b(y)), a, b)
        assert fast == slow, (kind, xs, ys)
        with ferrax.enable_x64():
            fast = _stage(lambda x, y: operator_fn(make_a(x), make_b(y)), a, b)
            slow = _stage(lambda x, y: numpy_fn(make_a(x), make_b(y)), a, b)
        assert fast == slow, (kind, xs, ys, "x64")


def test_broadcast_operator_values_match_jax() -> None:
    jax = pytest.importorskip("jax")
    h, bias = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1.0, -2.0, 0.5], np.float32)
    got = ferrax.jit(lambda h, b: (h + b, b * h, h - b, b / h))(h, bias)
    want = jax.jit(lambda h, b: (h + b, b * h, h - b, b / h))(h, bias)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert str(ferrax.make_jaxpr(lambda h, b: h + b)(h, bias)) == str(jax.make_jaxpr(lambda h, b: h + b)(h, bias))


PRODUCT_SHAPES = [((4, 3), (3, 2)), ((3,), (3, 2)), ((4, 3), (3,)), ((3,), (3,)), ((5, 4, 3), (3, 2)),
                  ((4, 3), (4, 2)), ((4, 3), (2, 3, 5)), ((2, 4, 3), (2, 3, 5)), ((), (3,)), ((3,), ())]


def _no_product_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from ferrax import _staging
    from ferrax.numpy import _products

    # Both names: ferrax.numpy's dot and matmul, and the tracer's `@`.
    monkeypatch.setattr(_products, "_staged_product", lambda a, b: None)
    monkeypatch.setattr(_staging, "_staged_product", lambda a, b: None)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", list(SHAPED_KINDS))
def test_products(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fns: list[Callable[[Any, Any], Any]] = [fnp.matmul, fnp.dot, operator.matmul]
    cases = []
    for xs, ys in PRODUCT_SHAPES:
        for other in (kind, "f32", "f16"):
            (a, make_a), (b, make_b) = _shaped(kind, xs), _shaped(other, ys)
            for f in fns:
                cases.append((lambda x, y, f=f, ma=make_a, mb=make_b: f(ma(x), mb(y)), a, b))
    fast = [_stage(f, a, b) for f, a, b in cases]
    _no_product_fast_path(monkeypatch)
    slow = [_stage(f, a, b) for f, a, b in cases]
    for i, (got, want) in enumerate(zip(fast, slow)):
        assert got == want, (kind, i, got, want)


def test_product_values_and_text_match_jax() -> None:
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    x, w, v = (rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3, 5), (3,)])
    f = lambda x, w, v: (x @ w, fnp.dot(x, v), fnp.matmul(v, w))  # noqa: E731
    g = lambda x, w, v: (x @ w, jax.numpy.dot(x, v), jax.numpy.matmul(v, w))  # noqa: E731
    for got, want in zip(ferrax.jit(f)(x, w, v), jax.jit(g)(x, w, v)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert str(ferrax.make_jaxpr(f)(x, w, v)) == str(jax.make_jaxpr(g)(x, w, v))


FLOAT_UNARY = ["exp", "expm1", "log", "log1p", "sin", "cos", "tan", "tanh", "sqrt", "arcsin",
               "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "cbrt", "exp2"]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_float_unary(name: str) -> None:
    fast_fn = getattr(fnp, name)
    slow_fn = fast_fn.__wrapped__  # the function without its staging fast path
    for kind in SHAPED_KINDS:
        for x64 in (False, True):
            with ferrax.enable_x64(x64):
                a, make = _shaped(kind, (2, 3))
                fast = _stage(lambda x: fast_fn(make(x)), a)
                assert fast == _stage(lambda x: slow_fn(make(x)), a), (kind, x64)
                for scalar in (0.5, 2, True):
                    # Not tracers: the function itself, eagerly and staged.
                    assert _stage(lambda x: fast_fn(scalar) + x, a) == _stage(lambda x: slow_fn(scalar) + x, a)
                    np.testing.assert_array_equal(np.asarray(fast_fn(scalar)), np.asarray(slow_fn(scalar)))


def test_mlp_layer_skips_ferrax_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dense layer's matmul, bias add and tanh take the fast paths (tracing speed
    depends on it); a mismatched contraction still gets the general path's error."""
    from ferrax.numpy import _products, _promotion, _ufuncs

    def general(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("took the general path")

    monkeypatch.setattr(_products, "_operands", general)
    monkeypatch.setattr(_ufuncs, "promote_args", general)
    monkeypatch.setattr(_ufuncs, "_inexact", general)
    monkeypatch.setattr(_promotion, "promote_args", general)
    w, b, x = np.ones((8, 4), np.float32), np.ones(4, np.float32), np.ones((2, 8), np.float32)
    closed = ferrax.make_jaxpr(lambda w, b, x: fnp.tanh(x @ w + b))(w, b, x)
    prims = [e.primitive for e in closed.jaxpr.eqns]
    assert prims == ["dot_general", "broadcast_in_dim", "add", "tanh"], prims
    with pytest.raises(AssertionError, match="general path"):
        ferrax.make_jaxpr(lambda w, x: x @ w)(w, np.ones((2, 3), np.float32))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", list(SHAPED_KINDS))
def test_sum(kind: str) -> None:
    from ferrax.numpy import _reductions

    def general(x: Any) -> Any:  # sum's general way, without its staging fast path
        return _reductions._accumulate("sum", lax.reduce_sum, fnp.add, 0, x, None, None, False, None, None)

    for shape in [(), (3,), (2, 3), (2, 1, 4)]:
        for x64 in (False, True):
            with ferrax.enable_x64(x64):
                a, make = _shaped(kind, shape)
                fast = _stage(lambda x: fnp.sum(make(x)), a)
                assert fast == _stage(lambda x: general(make(x)), a), (kind, shape, x64)
                np.testing.assert_array_equal(np.asarray(ferrax.jit(lambda x: fnp.sum(make(x)))(a)), np.sum(a))


def test_numpy_argument_types_are_shared() -> None:
    """NumPy arguments of one shape and dtype get one type object (so two of them meet
    the operator fast paths), in the mode they were typed in."""
    a, b = np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)
    from ferrax._core import aval_of

    assert aval_of(a) is aval_of(b)
    assert aval_of(np.ones(2)).dtype == np.float32
    with ferrax.enable_x64():
        assert aval_of(np.ones(2)).dtype == np.float64
    assert aval_of(np.ones(2)).dtype == np.float32
