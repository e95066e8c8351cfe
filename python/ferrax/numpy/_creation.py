"""Making arrays: from Python and NumPy values (``array``, ``asarray``), filled
(``zeros``, ``ones``, ``full`` and their ``_like`` forms), ranges (``arange``,
``linspace``) and ``eye``.

Default dtypes are JAX's: Python floats give float32, ints int32 (float64 and int64 with
x64); a Python scalar on its own stays weakly typed; NumPy values keep their dtype, but
64-bit ones become 32-bit without x64, and a ``dtype=float64`` request is then float32
with JAX's ``UserWarning`` (see :mod:`ferrax.dtypes`). Filled arrays and ranges are
built from primitives (``broadcast_in_dim``, ``iota``), so under a transformation they
are equations, not constants.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import ConcreteArray, Tracer, aval_of, to_numpy, user_location
from ferrax.errors import ConcretizationError, FerraxError
from ferrax.numpy._promotion import (
    ArrayLike,
    broadcast_to,
    DTypeLike,
    Shape,
    convert,
    host_convert,
    is_python_scalar,
    operand_aval,
    shape_error,
)

__all__ = [
    "array",
    "asarray",
    "astype",
    "arange",
    "eye",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "zeros",
    "zeros_like",
]


# ------------------------------------------------------------------- from Python values


def array(object: Any, dtype: DTypeLike | None = None, copy: bool = True, ndmin: int = 0) -> Array:
    """An array from ``object``: an array, a scalar, or nested lists/tuples of them.

    Without ``dtype``: a Python scalar alone stays weakly typed (``array(1.0)`` is a weak
    float32); nested sequences take the promoted dtype of their elements (Python floats
    float32, ints int32, NumPy values their own; 64-bit with x64) and are not weak;
    NumPy arrays keep their dtype (64-bit ones become 32-bit without x64). Traced
    elements are stacked into a traced array. ``copy`` is accepted
    for NumPy compatibility (ferrax arrays are immutable). ``ndmin`` prepends size-1
    dimensions up to that many dimensions.
    """
    if copy and isinstance(object, Tracer):
        # A traced array is copied, as JAX's `array` copies it (a `copy` equation).
        from ferrax._lax.structural import copy as copy_array

        object = copy_array(object)
    out = _to_array(object, dtype, "array")
    if out.ndim < ndmin:
        out = lax.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


def asarray(a: Any, dtype: DTypeLike | None = None, copy: bool | None = None) -> Array:
    """``a`` as an array (of ``dtype`` if given); ferrax arrays of that type are returned
    as they are. Same conversions as :func:`array`."""
    del copy
    return _to_array(a, dtype, "asarray")


def astype(x: ArrayLike, dtype: DTypeLike) -> Array:
    """``x`` converted to ``dtype`` (``convert_element_type``; strongly typed).

    Floats to integers truncate toward zero and saturate, NaN becomes 0 (XLA's rules).
    """
    operand_aval("astype", x)
    return convert(x, dtypes.canonicalize(dtype, "astype"), False)


def _check_python_ints_fit(obj: Any, dtype: np.dtype[Any]) -> None:
    """Python numbers (alone or in nested lists) asked for as an integer ``dtype`` must
    fit it once floats are truncated, as in JAX: ``asarray(300, dtype=np.int8)`` and
    ``uint8(-1.5)`` are ``OverflowError``s, not wrapped values."""
    info = np.iinfo(dtype)
    pending = [obj]
    while pending:
        item = pending.pop()
        if isinstance(item, (list, tuple)):
            pending.extend(item)
        elif is_python_scalar(item) and not isinstance(item, bool):
            value = int(item)
            if not info.min <= value <= info.max:
                raise OverflowError(
                    f"Python integer {value} out of bounds for {dtype.name}, at {user_location()}"
                )


def _to_array(obj: Any, dtype: DTypeLike | None, name: str) -> Array:
    want = None if dtype is None else dtypes.canonicalize(dtype, name)
    if want is not None and want.kind in "iu" and (is_python_scalar(obj) or isinstance(obj, (list, tuple))):
        _check_python_ints_fit(obj, want)
    if isinstance(obj, Array):
        if want is None:
            return obj
        return convert(obj, want, False)
    if is_python_scalar(obj):
        if want is None:
            return ConcreteArray(to_numpy(obj), aval_of(obj).weak_type)
        if want.kind in "iu" and not isinstance(obj, bool):
            # It fits (checked above) once truncated: the default int type does not matter.
            return ConcreteArray(np.asarray(int(obj), dtype=want))
        return convert(obj, want, False)
    if isinstance(obj, (list, tuple)):
        return _from_sequence(obj, want)
    if isinstance(obj, (np.ndarray, np.generic)) or hasattr(obj, "__array__"):
        value = np.asarray(obj)
        return ConcreteArray(host_convert(value, want or _supported(value.dtype)))
    raise TypeError(
        f"cannot make an array from {type(obj).__name__} {obj!r}, at {user_location()}"
    )


def _supported(dtype: np.dtype[Any]) -> np.dtype[Any]:
    try:
        return dtypes.canonical(dtypes.supported(dtype))
    except TypeError as e:
        raise TypeError(f"{e}, at {user_location()}") from None


def _leaves(obj: Any, out: list[Any]) -> None:
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        else:
            out.append(x)


def _from_sequence(obj: list[Any] | tuple[Any, ...], want: np.dtype[Any] | None) -> Array:
    leaves: list[Any] = []
    _leaves(obj, leaves)
    if leaves:
        avals = [operand_aval("array", x, i) for i, x in enumerate(leaves)]
        inferred, _ = dtypes.result_type([(a.dtype, a.weak_type) for a in avals])
    else:
        inferred = dtypes.default_float()
    if builtins.any(isinstance(x, Tracer) for x in leaves):
        return _stack_nested(obj, want or inferred)
    value = np.array(obj, dtype=inferred)
    return ConcreteArray(value if want is None else host_convert(value, want))


def _stack_nested(obj: Any, dtype: np.dtype[Any]) -> Array:
    """Nested sequences with traced elements, as one traced array (stacked by rows)."""
    if not isinstance(obj, (list, tuple)):
        return convert(obj, dtype, False)
    rows = [_stack_nested(x, dtype) for x in obj]
    if not rows:
        raise ValueError(f"cannot stack an empty sequence with traced values, at {user_location()}")
    shape = rows[0].shape
    if builtins.any(r.shape != shape for r in rows):
        raise shape_error(
            "array: the elements of a sequence have different shapes "
            f"({', '.join(str(list(r.shape)) for r in rows)})"
        )
    expanded = [lax.broadcast_in_dim(r, (1, *shape), tuple(range(1, len(shape) + 1))) for r in rows]
    return expanded[0] if len(expanded) == 1 else lax.concatenate(expanded, 0)


# ------------------------------------------------------------------------------ filled


def _shape(shape: Shape, name: str) -> tuple[int, ...]:
    try:
        dims = (shape,) if isinstance(shape, (int, np.integer, Array)) else tuple(shape)
        out = tuple(operator.index(d) for d in dims)
    except TypeError as e:
        if isinstance(e, FerraxError):  # a traced dimension says so itself
            raise
        raise TypeError(
            f"{name}: a shape is an integer or a sequence of integers, got {shape!r}, at {user_location()}"
        ) from None
    if builtins.any(d < 0 for d in out):
        raise ValueError(
            f"{name}: negative dimensions are not allowed (shape {list(out)}), at {user_location()}"
        )
    return out


def _fill(shape: tuple[int, ...], value: Any, dtype: np.dtype[Any], weak: bool) -> Array:
    """``value`` (a scalar or an array broadcastable to ``shape``) of ``dtype``,
    broadcast to ``shape``."""
    x = convert(value, dtype, weak)
    if x.shape == shape:
        return x
    if x.shape == ():
        return lax.broadcast_in_dim(x, shape, ())
    return broadcast_to(x, shape)


def zeros(shape: Shape, dtype: DTypeLike | None = None) -> Array:
    """An array of zeros (of the default float dtype unless ``dtype`` is given)."""
    d = dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype, "zeros")
    return _fill(_shape(shape, "zeros"), 0, d, False)


def ones(shape: Shape, dtype: DTypeLike | None = None) -> Array:
    """An array of ones (of the default float dtype unless ``dtype`` is given)."""
    d = dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype, "ones")
    return _fill(_shape(shape, "ones"), 1, d, False)


def full(shape: Shape, fill_value: ArrayLike, dtype: DTypeLike | None = None) -> Array:
    """An array of ``shape`` filled with ``fill_value`` (a scalar or an array broadcast to
    ``shape``); of ``fill_value``'s dtype and weak type unless ``dtype`` is given."""
    aval = operand_aval("full", fill_value, 1)
    if dtype is None:
        return _fill(_shape(shape, "full"), fill_value, aval.dtype, aval.weak_type)
    return _fill(_shape(shape, "full"), fill_value, dtypes.canonicalize(dtype, "full"), False)


def _like(name: str, a: ArrayLike, value: Any, dtype: DTypeLike | None, shape: Shape | None) -> Array:
    aval = operand_aval(name, a)
    dims = aval.shape if shape is None else _shape(shape, name)
    if dtype is None:
        return _fill(dims, value, aval.dtype, aval.weak_type)
    return _fill(dims, value, dtypes.canonicalize(dtype, name), False)


def zeros_like(a: ArrayLike, dtype: DTypeLike | None = None, shape: Shape | None = None) -> Array:
    """Zeros of ``a``'s shape and dtype (weak type included) unless given."""
    return _like("zeros_like", a, 0, dtype, shape)


def ones_like(a: ArrayLike, dtype: DTypeLike | None = None, shape: Shape | None = None) -> Array:
    """Ones of ``a``'s shape and dtype (weak type included) unless given."""
    return _like("ones_like", a, 1, dtype, shape)


def full_like(
    a: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike | None = None, shape: Shape | None = None
) -> Array:
    """``fill_value`` in an array of ``a``'s shape and dtype (weak type included) unless given."""
    return _like("full_like", a, fill_value, dtype, shape)


# ------------------------------------------------------------------------------ ranges


def _static_scalar(x: Any, name: str, what: str) -> bool | int | float:
    if isinstance(x, Tracer):
        raise ConcretizationError(
            f"{name}: {what} must be a concrete value, but it is traced ({x.aval.str_short()}), "
            f"at {user_location()}. The shape of the result depends on it: pass it as a "
            "Python number (static_argnums)."
        )
    value = np.asarray(x)
    if value.ndim != 0:
        raise TypeError(
            f"{name}: {what} must be a scalar, got shape {value.shape}, at {user_location()}"
        )
    return value.item()  # type: ignore[no-any-return]


def arange(
    start: ArrayLike,
    stop: ArrayLike | None = None,
    step: ArrayLike | None = None,
    dtype: DTypeLike | None = None,
) -> Array:
    """Evenly spaced values in ``[start, stop)``, as ``numpy.arange``.

    The dtype is the promoted dtype of the arguments (``arange(5)`` is int32,
    ``arange(0.0, 1.0, 0.1)`` float32, ``arange(np.int8(5))`` int8; int64 and float64
    with x64). The arguments must be
    concrete: they fix the length. Integer ranges are built from ``iota``; float ranges
    are computed on the host (in float64, then rounded to the dtype).
    """
    args = [a for a in (start, stop, step) if a is not None]
    if dtype is None:
        avals = [operand_aval("arange", a, i) for i, a in enumerate(args)]
        want, _ = dtypes.result_type([(a.dtype, a.weak_type) for a in avals])
    else:
        want = dtypes.canonicalize(dtype, "arange")
    if want == np.bool_:
        raise TypeError(
            f"arange does not accept dtype bool (integer and floating dtypes only), at {user_location()}"
        )
    # arange(n) names n `stop`, as NumPy's and JAX's messages do.
    lo = _static_scalar(start, "arange", "start" if stop is not None else "stop")
    hi = None if stop is None else _static_scalar(stop, "arange", "stop")
    st = 1 if step is None else _static_scalar(step, "arange", "step")
    if hi is None:
        lo, hi = 0, lo
    if st == 0:
        raise ValueError(f"arange: step must not be zero, at {user_location()}")
    integral = builtins.all(isinstance(v, int) for v in (lo, hi, st))
    if integral and dtypes.is_int(want):
        assert isinstance(lo, int) and isinstance(hi, int) and isinstance(st, int)
        n = len(range(lo, hi, st))
        out = lax.iota(want, n)
        if st != 1:
            out = lax.mul(ConcreteArray(np.asarray(st, dtype=want), True), out)
        if lo != 0:
            out = lax.add(ConcreteArray(np.asarray(lo, dtype=want), True), out)
        return out
    values = np.arange(lo, hi, st, dtype=np.float64 if dtypes.is_float(want) else None)
    return ConcreteArray(values.astype(want))


def diagonal_offset(k: Any, name: str) -> tuple[int, np.dtype[Any]]:
    """A static diagonal offset ``k`` and its dtype, as ``jnp.asarray(k)`` types it: a
    Python int is of the default int dtype (int64 with x64), a NumPy integer of its own."""
    if isinstance(k, Tracer):
        operator.index(k)  # a traced offset: the error operator.index gives
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer, np.ndarray, Array)):
        raise ValueError(f"{name}: k must be a scalar integer; got {k!r}, at {user_location()}")
    if isinstance(k, int):
        return k, dtypes.default_int()
    value = np.asarray(k)
    if value.shape != () or value.dtype.kind not in "iu":
        raise ValueError(f"{name}: k must be a scalar integer; got {k!r}, at {user_location()}")
    return int(value), dtypes.canonical(value.dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike | None = None) -> Array:
    """An ``N`` x ``M`` array with ones on diagonal ``k`` (of the default float dtype
    unless ``dtype`` is given): ``iota + k == iota``, converted, as JAX's (the ``iota``s
    of the offset's dtype, the offset added even when 0)."""
    rows = operator.index(N)
    cols = rows if M is None else operator.index(M)
    if isinstance(k, int) and not isinstance(k, bool):
        info = np.iinfo(np.int32)  # JAX clips a Python int offset to int32's range
        k = builtins.max(int(info.min), builtins.min(k, int(info.max)))
    shift, index = diagonal_offset(k, "eye")
    want = dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype, "eye")
    if rows < 0 or cols < 0:
        raise ValueError(f"eye: negative dimensions are not allowed, at {user_location()}")
    i = lax.broadcasted_iota(index, (rows, cols), 0)
    j = lax.broadcasted_iota(index, (rows, cols), 1)
    return convert(lax.eq(lax.add(i, ConcreteArray(np.asarray(shift, index), False)), j), want, False)
