"""``ferrax.numpy``: a NumPy-compatible subset with JAX's semantics.

Broadcasting follows NumPy; dtype promotion follows JAX (Python scalars are weakly typed:
``x_f32 * 2.0`` stays float32). Results are :class:`ferrax.Array`; under a
transformation they are traced.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax import _array, dtypes, lax
from ferrax._array import Array
from ferrax._core import ConcreteArray, Tracer, aval_of

__all__ = [
    "abs", "add", "asarray", "divide", "equal", "exp", "floor_divide", "greater",
    "greater_equal", "less", "less_equal", "log", "logical_and", "logical_not", "logical_or",
    "maximum", "minimum", "multiply", "negative", "not_equal", "power", "remainder", "sin",
    "cos", "sqrt", "square", "subtract", "sum", "tanh", "true_divide",
]


# ------------------------------------------------------------------ promotion, broadcasting


def _is_python_scalar(x: Any) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def promote_args(*args: Any) -> list[Any]:
    """The operands converted to their common dtype (JAX's promotion, weak types included)
    and broadcast to their common shape."""
    avals = [aval_of(a) for a in args]
    dtype, weak = dtypes.promote([(a.dtype, a.weak_type) for a in avals])
    converted = [_convert(a, av, dtype, weak) for a, av in zip(args, avals)]
    return _broadcast_all(converted, [tuple(av.shape) for av in avals])


def _convert(x: Any, aval: Any, dtype: np.dtype[Any], weak: bool) -> Any:
    if _is_python_scalar(x):
        # A literal of the result dtype; weak when the result is.
        return ConcreteArray(np.asarray(x, dtype=dtype), weak)
    if aval.dtype != dtype or aval.weak_type != weak:
        if isinstance(x, (np.ndarray, np.generic)):
            return np.asarray(x, dtype=dtype)
        return lax.convert_element_type(x, dtype, weak)
    return x


def _broadcast_all(xs: list[Any], shapes: list[tuple[int, ...]]) -> list[Any]:
    nonscalar = {s for s in shapes if s != ()}
    if len(nonscalar) <= 1:
        # Equal shapes or scalars: the primitives broadcast rank-0 operands themselves.
        return xs
    try:
        out = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"shapes {', '.join(map(str, shapes))} do not broadcast together") from None
    return [x if s == out or s == () else broadcast_to(x, out) for x, s in zip(xs, shapes)]


def broadcast_to(x: Any, shape: Sequence[int]) -> Array:
    """``x`` broadcast to ``shape`` (NumPy rules)."""
    src = tuple(aval_of(x).shape)
    shape = tuple(int(d) for d in shape)
    if src == shape:
        return asarray(x)
    lead = len(shape) - len(src)
    if lead < 0 or any(s not in (1, d) for s, d in zip(src, shape[lead:])):
        raise ValueError(f"cannot broadcast shape {src} to {shape}")
    return lax.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def asarray(x: Any, dtype: Any = None) -> Array:
    """``x`` as a ferrax array (of ``dtype`` if given)."""
    if isinstance(x, (Tracer, ConcreteArray)) and dtype is None:
        return x
    if isinstance(x, Array) and dtype is not None:
        return lax.convert_element_type(x, dtype)
    if _is_python_scalar(x) and dtype is None:
        aval = aval_of(x)
        return ConcreteArray(np.asarray(x, dtype=aval.dtype), aval.weak_type)
    value = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtypes.canonicalize(dtype))
    if value.dtype == np.float64 and not isinstance(x, (np.ndarray, np.generic)) and dtype is None:
        # Python lists of floats: float32, as JAX's default.
        value = value.astype(dtypes.default_float)
    if value.dtype == np.int64 and not isinstance(x, (np.ndarray, np.generic)) and dtype is None:
        value = value.astype(dtypes.default_int)
    return ConcreteArray(value)


# ------------------------------------------------------------------------- elementwise


def add(x: Any, y: Any) -> Array:
    """``x + y``."""
    return lax.add(*promote_args(x, y))


def subtract(x: Any, y: Any) -> Array:
    """``x - y``."""
    return lax.sub(*promote_args(x, y))


def multiply(x: Any, y: Any) -> Array:
    """``x * y``."""
    return lax.mul(*promote_args(x, y))


def true_divide(x: Any, y: Any) -> Array:
    """``x / y`` (integers divide as floats)."""
    a, b = promote_args(x, y)
    if not dtypes.is_float(aval_of(a).dtype):
        a, b = promote_args(a, b, 1.0)[:2]
    return lax.div(a, b)


divide = true_divide


def floor_divide(x: Any, y: Any) -> Array:
    """``x // y``."""
    a, b = promote_args(x, y)
    if dtypes.is_float(aval_of(a).dtype):
        from ferrax._lax.elementwise import div

        q = div(a, b)
        return _floor(q)
    # Integer floor division: truncate, then correct where signs differ and rem != 0.
    q = lax.div(a, b)
    r = lax.rem(a, b)
    fix = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(b, 0)))
    return lax.select_n(fix, q, lax.sub(q, 1))


def _floor(x: Any) -> Array:
    # floor(x) = x - rem(x, 1) adjusted for negatives; exact for floats.
    r = lax.rem(x, 1.0)
    t = lax.sub(x, r)
    return lax.select_n(lax.lt(r, 0.0), t, lax.sub(t, 1.0))


def remainder(x: Any, y: Any) -> Array:
    """``x % y`` with the sign of ``y`` (NumPy's)."""
    a, b = promote_args(x, y)
    r = lax.rem(a, b)
    fix = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(b, 0)))
    return lax.select_n(fix, r, lax.add(r, b))


def power(x: Any, y: Any) -> Array:
    """``x ** y``."""
    if _is_python_scalar(y) and isinstance(y, int) and not isinstance(y, bool):
        return lax.integer_pow(asarray(x), y)
    a, b = promote_args(x, y)
    return lax.pow(a, b)


def negative(x: Any) -> Array:
    """``-x``."""
    return lax.neg(x)


def abs(x: Any) -> Array:
    """``|x|``."""
    return lax.abs(x)


def maximum(x: Any, y: Any) -> Array:
    """Elementwise maximum."""
    return lax.max(*promote_args(x, y))


def minimum(x: Any, y: Any) -> Array:
    """Elementwise minimum."""
    return lax.min(*promote_args(x, y))


def equal(x: Any, y: Any) -> Array:
    """``x == y``."""
    return lax.eq(*promote_args(x, y))


def not_equal(x: Any, y: Any) -> Array:
    """``x != y``."""
    return lax.ne(*promote_args(x, y))


def less(x: Any, y: Any) -> Array:
    """``x < y``."""
    return lax.lt(*promote_args(x, y))


def less_equal(x: Any, y: Any) -> Array:
    """``x <= y``."""
    return lax.le(*promote_args(x, y))


def greater(x: Any, y: Any) -> Array:
    """``x > y``."""
    return lax.gt(*promote_args(x, y))


def greater_equal(x: Any, y: Any) -> Array:
    """``x >= y``."""
    return lax.ge(*promote_args(x, y))


def logical_and(x: Any, y: Any) -> Array:
    """Elementwise ``and`` of truth values."""
    return lax.bitwise_and(*promote_args(_as_bool(x), _as_bool(y)))


def logical_or(x: Any, y: Any) -> Array:
    """Elementwise ``or`` of truth values."""
    return lax.bitwise_or(*promote_args(_as_bool(x), _as_bool(y)))


def logical_not(x: Any) -> Array:
    """Elementwise ``not`` of truth values."""
    return lax.bitwise_not(_as_bool(x))


def _as_bool(x: Any) -> Any:
    if _is_python_scalar(x):
        return bool(x)
    if aval_of(x).dtype == np.bool_:
        return x
    return not_equal(x, 0)


def _float_arg(x: Any) -> Any:
    """Integer and bool inputs of float functions become the default float."""
    aval = aval_of(x)
    if dtypes.is_float(aval.dtype):
        return x
    return lax.convert_element_type(x, dtypes.default_float, aval.weak_type) if not _is_python_scalar(x) else float(x)


def sin(x: Any) -> Array:
    """Sine."""
    return lax.sin(_float_arg(x))


def cos(x: Any) -> Array:
    """Cosine."""
    return lax.cos(_float_arg(x))


def tanh(x: Any) -> Array:
    """Hyperbolic tangent."""
    return lax.tanh(_float_arg(x))


def exp(x: Any) -> Array:
    """``e**x``."""
    return lax.exp(_float_arg(x))


def log(x: Any) -> Array:
    """Natural logarithm."""
    return lax.log(_float_arg(x))


def sqrt(x: Any) -> Array:
    """Square root."""
    return lax.sqrt(_float_arg(x))


def square(x: Any) -> Array:
    """``x * x``."""
    return lax.integer_pow(x, 2)


# -------------------------------------------------------------------------- reductions


def _axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of bounds for an array of dimension {ndim}")
        out.append(a % ndim)
    return tuple(out)


def sum(a: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """Sum over ``axis`` (all axes by default); bools and small ints sum as int32."""
    x = asarray(a)
    axes = _axes(axis, x.ndim)
    if x.dtype == np.bool_:
        x = lax.convert_element_type(x, dtypes.default_int)
    out = lax.reduce_sum(x, axes)
    return _keepdims(out, x.ndim, axes) if keepdims else out


def _keepdims(x: Array, ndim: int, axes: tuple[int, ...]) -> Array:
    return lax.expand_dims(x, sorted(axes)) if axes else x


# ------------------------------------------------------------ methods of Array (used by it)


def astype(x: Any, dtype: Any) -> Array:
    """``x`` converted to ``dtype``."""
    return lax.convert_element_type(x, dtype)


def reshape(a: Any, newshape: Sequence[int] | int) -> Array:
    """``a`` with a new shape; one dimension may be -1."""
    x = asarray(a)
    shape = [newshape] if isinstance(newshape, int) else list(newshape)
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in shape:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        shape[shape.index(-1)] = x.size // known if known else 0
    return lax.reshape(x, shape)


def transpose(a: Any, axes: Sequence[int] | None = None) -> Array:
    """``a`` with permuted axes (reversed by default)."""
    x = asarray(a)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(a % x.ndim for a in axes)
    return lax.transpose(x, perm)


# Operators of ferrax.Array are implemented by this module.
_array._fnp = sys.modules[__name__]
