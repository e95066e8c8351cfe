"""Reading ``lax`` operands: arrays pass through; Python scalars take a dtype."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ferrax import dtypes
from ferrax._array import Array
from ferrax._core import ConcreteArray, Primitive, Tracer, aval_of, to_numpy

R = TypeVar("R")


def is_array(x: Any) -> bool:
    """True for ferrax arrays and NumPy arrays/scalars (not Python scalars)."""
    return isinstance(x, (Tracer, ConcreteArray, np.ndarray, np.generic))


def is_python_scalar(x: Any) -> bool:
    """True for Python ``bool``, ``int`` and ``float`` (NumPy scalars excluded)."""
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def scalar_as(x: Any, like: Any) -> Any:
    """A Python scalar as a weakly typed scalar of ``like``'s dtype; others unchanged.

    This is how ``lax`` takes ``lax.add(x, 1.0)``: the scalar adopts ``x``'s dtype when
    the dtype's kind is at least the scalar's (an int scalar with a float array, not a
    float scalar with an int array: that one keeps its own dtype, float32, and the
    primitive's rule reports the mismatch). A Python ``bool`` is a plain ``bool``.
    """
    if isinstance(x, Array) or not is_python_scalar(x):
        return x
    if isinstance(x, bool):
        return ConcreteArray(np.asarray(x), False)
    # Typed as JAX types it first: an int must fit the default int type (OverflowError).
    value = to_numpy(x)
    dtype = value.dtype
    if is_array(like):
        other = aval_of(like).dtype
        if dtypes.kind_rank(other) >= dtypes.kind_rank(dtype):
            dtype = other
    if value.dtype == dtype:
        return ConcreteArray(value, True)
    if isinstance(x, int) and dtypes.is_int(dtype):
        # An int out of the other operand's range is an OverflowError (NumPy's check).
        return ConcreteArray(np.asarray(x, dtype=dtype), True)
    widening = value.dtype.kind != "f" or dtype.itemsize >= value.dtype.itemsize
    if dtype.kind == "f" and dtype.itemsize >= 4 and widening:
        # To float32 or float64 from an int (of at most 64 bits: within float32's range)
        # or a narrower float: nothing can overflow, and `errstate` costs microseconds.
        return ConcreteArray(value.astype(dtype), True)
    with np.errstate(over="ignore"):  # as XLA converts: out of range is an infinity
        return ConcreteArray(value.astype(dtype), True)


def pair(x: Any, y: Any) -> tuple[Any, Any]:
    """Two binary operands with Python scalars typed after the other operand."""
    if isinstance(x, Array) and isinstance(y, Array):
        return x, y
    return scalar_as(x, y), scalar_as(y, x)


def scalar(x: Any) -> Any:
    """A Python scalar as a weakly typed array of its default dtype (bool: strong)."""
    return scalar_as(x, x)


def dtype_of(x: Any) -> np.dtype[Any]:
    """The ferrax dtype of any operand."""
    return aval_of(x).dtype


def canonical_dtype(d: Any, name: str = "") -> np.dtype[Any]:
    """A dtype-like the user asked ``name`` for, as a NumPy dtype ferrax supports (64-bit
    ones truncated with JAX's warning without x64: :func:`ferrax.dtypes.canonicalize`)."""
    return dtypes.canonicalize(d, name)


def bind1(primitive: Primitive, *args: Any, **params: Any) -> Array:
    """Binds a primitive with one result."""
    out: Array = primitive.bind(*args, **params)
    return out


def quiet(impl: Callable[..., R]) -> Callable[..., R]:
    """An eager rule with NumPy's floating-point warnings off: overflow to inf, NaN from
    invalid operations and division by zero are results, as in XLA, not warnings."""

    @functools.wraps(impl)
    def rule(*args: Any, **params: Any) -> R:
        with np.errstate(all="ignore"):
            return impl(*args, **params)

    return rule
