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
