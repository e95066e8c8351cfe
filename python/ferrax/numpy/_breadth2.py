"""More of ``jax.numpy``'s everyday names (issue 12 item 3): ``amax``/``amin``/``ptp``,
the data-dependent ``nonzero`` family with ``size=``/``fill_value=`` (``argwhere``,
``flatnonzero``, one-argument ``where``, ``extract``, ``compress``), ``append``,
``insert``, ``delete``, the Array API aliases (``concat``, ``permute_dims``,
``matrix_transpose``, ``unstack``), shape queries, and the ufuncs ``copysign``,
``signbit``, ``fmax``, ``fmin``, ``float_power``, ``frexp``, ``ldexp``, ``modf``,
``gcd``, ``lcm``, ``sinc``, ``deg2rad`` and their aliases.

Each is composed from ``lax`` and the package's functions as ``jax.numpy`` composes it,
so dtypes and weak types follow JAX's in both x64 modes. Functions whose output shape
depends on the data need ``size=`` under a transformation and raise
:class:`ferrax.ConcretizationError` without it.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

import ferrax.numpy as fnp
from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import Tracer, user_location
from ferrax._custom_derivatives import custom_jvp
from ferrax.errors import ConcretizationError
from ferrax.numpy._promotion import (
    ArrayLike,
    Axis,
    DTypeLike,
    as_array,
    convert,
    promote_args,
    promote_args_inexact,
    promote_dtypes,
)
from ferrax.numpy import _reductions
from ferrax.numpy._shape import normalize_axis

__all__ = [
    "amax", "amin", "append", "argwhere", "broadcast_arrays", "compress", "concat", "copy",
    "copysign", "deg2rad", "degrees", "delete", "extract", "fabs", "flatnonzero",
    "float_power", "fmax", "fmin", "frexp", "gcd", "insert", "isscalar", "lcm", "ldexp",
    "matrix_transpose", "modf", "ndim", "nonzero", "permute_dims", "ptp", "rad2deg",
    "radians", "reciprocal", "shape", "signbit", "sinc", "size", "unstack", "where",
]


def _like(x: Array, value: Any) -> Array:
    """``value`` as a scalar of ``x``'s dtype and weak type (JAX's ``_lax_const``)."""
    return convert(value, np.dtype(x.dtype), bool(x.weak_type))


def _location() -> str:
    return user_location()


def _static_size(size: Any, name: str) -> int:
    if isinstance(size, Tracer):
        raise ConcretizationError(
            f"The size argument of jnp.{name} must be statically specified to use jnp.{name} "
            f"within JAX transformations, at {_location()}"
        )
    return operator.index(size)


def _concrete_count(mask: Array, name: str) -> int:
    """The number of true entries of ``mask``, which must be concrete (no ``size=``)."""
    if isinstance(mask, Tracer):
        raise ConcretizationError(
            f"Abstract tracer value encountered where concrete value is expected: traced array with "
            f"shape {mask.aval.str_short()}. The size argument of jnp.{name} must be statically "
            f"specified to use jnp.{name} within JAX transformations, at {_location()}"
        )
    return int(np.count_nonzero(np.asarray(mask)))


# ------------------------------------------------------------------------- reductions


amax = _reductions.max
"""An alias of :func:`ferrax.numpy.max` (as ``jax.numpy.amax``)."""
amin = _reductions.min
"""An alias of :func:`ferrax.numpy.min` (as ``jax.numpy.amin``)."""


def ptp(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False) -> Array:
    """The range (maximum minus minimum) of ``a`` over ``axis``."""
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.ptp is not supported, at {_location()}")
    x = as_array(a, "ptp")
    return fnp.subtract(fnp.max(x, axis=axis, keepdims=keepdims), fnp.min(x, axis=axis, keepdims=keepdims))


# ----------------------------------------------------------- data-dependent selection


def nonzero(
    a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | tuple[ArrayLike, ...] | None = None
) -> tuple[Array, ...]:
    """The indices of the nonzero elements of ``a``, one array per axis (default int).

    With ``size=`` the result has that length: the first ``size`` indices, padded with
    ``fill_value`` (a scalar, or one per axis; default 0); needed under ``jit``.
    """
    arr = as_array(a, "nonzero")
    if arr.ndim == 0:
        raise ValueError(
            "Calling nonzero on 0d arrays is not allowed. Use jnp.atleast_1d(scalar).nonzero() "
            f"instead, at {_location()}"
        )
    mask = arr if arr.dtype == np.bool_ else fnp.not_equal(arr, 0)
    n = _concrete_count(mask, "nonzero") if size is None else _static_size(size, "nonzero")
    index = dtypes.default_int()
    if math.prod(arr.shape) == 0 or n == 0:
        return tuple(fnp.zeros(n, index) for _ in arr.shape)
    flat = fnp.ravel(mask)
    running = lax.cumsum(lax.convert_element_type(flat, index), 0)
    bins = fnp.zeros(n, index).at[running].add(1, mode="drop")
    flat_indices = lax.cumsum(bins, 0)
    strides = [math.prod(arr.shape[i + 1 :]) for i in range(arr.ndim)]
    out = [
        fnp.remainder(fnp.floor_divide(flat_indices, convert(s, index)), convert(d, index))
        for s, d in zip(strides, arr.shape)
    ]
    if fill_value is not None:
        fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * arr.ndim
        if builtins.any(np.shape(v) != () for v in fills):
            raise ValueError(
                f"fill_value must be a scalar or a tuple of length {arr.ndim}; got {fill_value}, at {_location()}"
            )
        past = fnp.greater_equal(fnp.arange(n), fnp.sum(mask))
        out = [fnp.where(past, v, o) for v, o in zip(fills, out, strict=True)]
    return tuple(out)


def flatnonzero(
    a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | tuple[ArrayLike, ...] | None = None
) -> Array:
    """The indices of the nonzero elements of ``a`` flattened (see :func:`nonzero`)."""
    return nonzero(fnp.ravel(as_array(a, "flatnonzero")), size=size, fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Array:
    """The indices of the nonzero elements of ``a`` as rows of an ``(n, a.ndim)`` array
    (see :func:`nonzero` for ``size=`` and ``fill_value=``)."""
    x = as_array(a, "argwhere")
    parts = nonzero(fnp.atleast_1d(x), size=size, fill_value=fill_value)
    result = fnp.transpose(fnp.vstack(parts))
    if x.ndim == 0:
        return fnp.reshape(result[:0], (result.shape[0], 0))
    return fnp.reshape(result, (result.shape[0], x.ndim))


def where(
    condition: ArrayLike,
    x: ArrayLike | None = None,
    y: ArrayLike | None = None,
    /,
    *,
    size: int | None = None,
    fill_value: ArrayLike | tuple[ArrayLike, ...] | None = None,
) -> Any:
    """``x`` where ``condition`` is true, else ``y`` (broadcast, promoted); with only
    ``condition``, :func:`nonzero` (``size=`` and ``fill_value=`` as there)."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        missing = 1 if x is None else 2
        raise TypeError(f"where requires ndarray or scalar arguments, got None at position {missing}, at {_location()}")
    if size is not None or fill_value is not None:
        raise ValueError(f"size and fill_value arguments cannot be used in three-term where function, at {_location()}")
    from ferrax.numpy._ufuncs import where as select

    return select(condition, x, y)


def compress(
    condition: ArrayLike,
    a: ArrayLike,
    axis: int | None = None,
    *,
    size: int | None = None,
    fill_value: ArrayLike = 0,
    out: None = None,
) -> Array:
    """The slices of ``a`` along ``axis`` (of the flattened ``a`` for None) where the 1-d
    ``condition`` is true; ``size=`` pads with ``fill_value`` (needed under ``jit``)."""
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.compress is not supported, at {_location()}")
    cond = fnp.astype(as_array(condition, "compress"), np.bool_)
    arr = as_array(a, "compress", 1)
    as_array(fill_value, "compress", 2)
    if cond.ndim != 1:
        raise ValueError(f"condition must be a 1D array, at {_location()}")
    if axis is None:
        axis = 0
        arr = fnp.ravel(arr)
    else:
        arr = fnp.moveaxis(arr, axis, 0)
    n = arr.shape[0]
    cond, extra = cond[:n], cond[n:]
    arr = arr[: cond.shape[0]]
    if size is None:
        if isinstance(cond, Tracer) or isinstance(extra, Tracer):
            _concrete_count(cond if isinstance(cond, Tracer) else extra, "compress")
        if bool(np.any(np.asarray(extra))):
            raise ValueError(f"condition contains entries that are out of bounds, at {_location()}")
        result = arr[np.asarray(cond)]
    else:
        size = _static_size(size, "compress")
        if not 0 <= size <= arr.shape[0]:
            raise ValueError(
                "size must be positive and not greater than the size of the array axis; "
                f"got size={size} for a.shape[axis]={arr.shape[0]}, at {_location()}"
            )
        mask = fnp.expand_dims(cond, tuple(range(1, arr.ndim)))
        arr = fnp.where(mask, arr, fnp.array(fill_value, dtype=arr.dtype))
        result = arr[fnp.argsort(cond, stable=True, descending=True)][:size]
    return fnp.moveaxis(result, 0, axis)


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None, fill_value: ArrayLike = 0) -> Array:
    """The elements of ``arr`` where ``condition`` is true, both flattened (see
    :func:`compress`)."""
    c = as_array(condition, "extract")
    x = as_array(arr, "extract", 1)
    return compress(fnp.ravel(c), fnp.ravel(x), size=size, fill_value=fill_value)


# ------------------------------------------------------------ joining and removing


def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Array:
    """``values`` appended to ``arr`` along ``axis`` (both flattened for None)."""
    if axis is None:
        return fnp.concatenate([fnp.ravel(arr), fnp.ravel(values)], 0)
    return fnp.concatenate([arr, values], axis=axis)


def _static_axis(axis: Any, name: str) -> int:
    if isinstance(axis, Tracer):
        raise ConcretizationError(f"axis argument of jnp.{name}() must be concrete, at {_location()}")
    return operator.index(axis)


def insert(arr: ArrayLike, obj: ArrayLike | slice, values: ArrayLike, axis: int | None = None) -> Array:
    """``arr`` with ``values`` inserted before the indices ``obj`` (a scalar, a 1-d
    integer array or a slice) along ``axis`` (of the flattened ``arr`` for None)."""
    a = as_array(arr, "insert")
    if not isinstance(obj, slice):
        as_array(obj, "insert", 1)
    vals = as_array(values, "insert", 2)
    if axis is None:
        a = fnp.ravel(a)
        axis = 0
    dim = normalize_axis(_static_axis(axis, "insert"), a.ndim, "insert")
    if isinstance(obj, slice):
        indices = fnp.arange(*obj.indices(a.shape[dim]))
    else:
        indices = fnp.asarray(obj)
    if indices.ndim > 1:
        raise ValueError(
            f"jnp.insert(): obj must be a slice, a one-dimensional array, or a scalar; got {obj}, at {_location()}"
        )
    if not dtypes.is_int(indices.dtype):
        if math.prod(indices.shape) == 0 and not isinstance(obj, Array):
            indices = fnp.astype(indices, dtypes.default_int())
        else:
            raise ValueError(f"jnp.insert(): index array must be integer typed; got {obj}, at {_location()}")
    vals = fnp.array(vals, ndmin=a.ndim, dtype=a.dtype)
    if math.prod(indices.shape) == 1:
        index = fnp.ravel(indices)[0]
        if indices.ndim == 0:
            vals = fnp.moveaxis(vals, 0, dim)
        indices = fnp.full(vals.shape[dim], index)
    n_input = a.shape[dim]
    n_insert = fnp.broadcast_shapes(indices.shape, (vals.shape[dim],))[0]
    out_shape = list(a.shape)
    out_shape[dim] += n_insert
    out = fnp.zeros_like(a, shape=tuple(out_shape))
    indices = fnp.where(fnp.less(indices, 0), fnp.add(indices, n_input), indices)
    indices = fnp.clip(indices, 0, n_input)
    values_ind = indices.at[fnp.argsort(indices)].add(fnp.arange(n_insert, dtype=indices.dtype))
    arr_mask = fnp.ones(n_input + n_insert, dtype=np.bool_).at[values_ind].set(False)
    arr_ind = nonzero(arr_mask, size=n_input)[0]
    lead = (slice(None),) * dim
    out = out.at[(*lead, values_ind)].set(vals)
    return out.at[(*lead, arr_ind)].set(a)


def delete(
    arr: ArrayLike, obj: ArrayLike | slice, axis: int | None = None, *, assume_unique_indices: bool = False
) -> Array:
    """``arr`` without the entries ``obj`` (an int, a slice, an integer or boolean
    array) along ``axis`` (of the flattened ``arr`` for None). Integer arrays must be
    concrete unless ``assume_unique_indices``."""
    a = as_array(arr, "delete")
    if axis is None:
        a = fnp.ravel(a)
        axis = 0
    dim = normalize_axis(_static_axis(axis, "delete"), a.ndim, "delete")
    lead = (slice(None),) * dim
    n = a.shape[dim]
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, (bool, np.bool_)):
        i = normalize_axis(int(obj), n, "delete")
        return fnp.concatenate([a[(*lead, slice(0, i))], a[(*lead, slice(i + 1, None))]], axis=dim)
    if isinstance(obj, slice):
        obj = fnp.arange(n)[obj]
        assume_unique_indices = True
    index = as_array(obj, "delete", 1)
    if dtypes.is_int(index.dtype) and assume_unique_indices:
        flat = fnp.ravel(index)
        flat = fnp.clip(fnp.where(fnp.less(flat, 0), fnp.add(flat, n), flat), 0, n)
        flat = fnp.sort(flat)
        flat = fnp.subtract(flat, fnp.arange(flat.shape[0], dtype=flat.dtype))
        keep = fnp.arange(n - flat.shape[0], dtype=flat.dtype)
        keep = fnp.add(keep, fnp.sum(fnp.greater_equal(keep[None, :], flat[:, None]), 0, dtype=keep.dtype))
        return a[(*lead, keep)]
    if isinstance(index, Tracer):
        raise ConcretizationError(
            f"Abstract tracer value encountered where concrete value is expected: the 'obj' array "
            f"argument of jnp.delete() ({index.aval.str_short()}) must be concrete, at {_location()}"
        )
    host = np.asarray(index)
    if dtypes.is_int(host.dtype):
        keep_mask = np.ones(n, dtype=bool)
        keep_mask[host] = False
    elif host.dtype == np.bool_:
        if host.shape != (n,):
            raise ValueError(
                "np.delete(arr, obj): for boolean indices, obj must be one-dimensional with length "
                f"matching specified axis, at {_location()}"
            )
        keep_mask = ~host
    else:
        raise ValueError(f"np.delete(arr, obj): got obj.dtype={host.dtype}; must be integer or bool, at {_location()}")
    return a[(*lead, keep_mask)]


def concat(arrays: Sequence[ArrayLike], /, *, axis: int | None = 0) -> Array:
    """The Array API name of :func:`ferrax.numpy.concatenate`."""
    return fnp.concatenate(arrays, axis=axis)


def permute_dims(a: ArrayLike, /, axes: tuple[int, ...]) -> Array:
    """The Array API name of :func:`ferrax.numpy.transpose` (``axes`` required)."""
    return fnp.transpose(a, axes)


def matrix_transpose(x: ArrayLike, /) -> Array:
    """The last two axes of ``x`` (at least 2-d) swapped."""
    arr = as_array(x, "matrix_transpose")
    if arr.ndim < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got ndim={arr.ndim}, at {_location()}")
    return fnp.swapaxes(arr, -1, -2)


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Array, ...]:
    """The slices of ``x`` along ``axis``, as a tuple."""
    arr = as_array(x, "unstack")
    if arr.ndim == 0:
        raise ValueError(f"Unstack requires arrays with rank > 0, however a scalar array was passed, at {_location()}")
    dim = normalize_axis(axis, arr.ndim, "unstack")
    return tuple(lax.index_in_dim(arr, i, dim, keepdims=False) for i in range(arr.shape[dim]))


def broadcast_arrays(*args: ArrayLike) -> list[Array]:
    """The arguments broadcast to their common shape."""
    arrays = [as_array(a, "broadcast_arrays", i) for i, a in enumerate(args)]
    if not arrays:
        return []
    target = fnp.broadcast_shapes(*(x.shape for x in arrays))
    return [x if x.shape == target else fnp.broadcast_to(x, target) for x in arrays]


def copy(a: ArrayLike, order: str | None = None) -> Array:
    """A copy of ``a`` (``array(a, copy=True)``)."""
    if order not in (None, "K"):
        raise NotImplementedError(f"Only order='K' is implemented for jnp.copy, at {_location()}")
    return fnp.array(a, copy=True)


ndim = np.ndim
"""The number of dimensions of an array (NumPy's ``ndim``, which ``jax.numpy`` re-exports)."""
shape = np.shape
"""The shape of an array (NumPy's ``shape``, as ``jax.numpy``)."""
size = np.size
"""The number of elements of an array, or along an axis (NumPy's ``size``, as ``jax.numpy``)."""


def isscalar(element: Any) -> bool:
    """Whether ``element`` is a scalar as JAX sees it: a Python or NumPy scalar, or a
    0-d array."""
    if np.isscalar(element):
        return True
    if isinstance(element, (np.ndarray, Array)):
        return element.ndim == 0
    if getattr(element, "__jax_array__", None) is not None:
        return fnp.asarray(element).ndim == 0
    return False


# ------------------------------------------------------------------------- ufuncs


def reciprocal(x: ArrayLike, /) -> Array:
    """``1 / x`` elementwise, in the inexact dtype of ``x``."""
    (arr,) = promote_args_inexact("reciprocal", x)
    return lax.integer_pow(arr, -1)


def fabs(x: ArrayLike, /) -> Array:
    """The absolute value, as a float."""
    (arr,) = promote_args_inexact("fabs", x)
    return lax.abs(arr)


def signbit(x: ArrayLike, /) -> Array:
    """Whether each element's sign bit is set (true for -0.0 and negative NaNs)."""
    (arr,) = promote_args("signbit", x)
    d = np.dtype(arr.dtype)
    if dtypes.is_int(d):
        return lax.lt(arr, _like(arr, 0))
    if d == np.bool_:
        return fnp.zeros(arr.shape, np.bool_)
    if not dtypes.is_float(d):
        raise ValueError(f"jax.numpy.signbit is not well defined for {d}, at {_location()}")
    bits = d.itemsize * 8
    ints = lax.bitcast_convert_type(arr, np.dtype(f"int{bits}"))
    return lax.lt(ints, convert(0, np.dtype(f"int{bits}")))


def copysign(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The magnitude of ``x1`` with the sign of ``x2`` (as floats)."""
    a, b = promote_args_inexact("copysign", x1, x2)
    return fnp.where(signbit(b), lax.neg(lax.abs(a)), lax.abs(a))


def fmax(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The elementwise maximum, ignoring NaNs (NaN only where both are)."""
    mask = fnp.logical_or(fnp.greater(x1, x2), fnp.isnan(x2))
    return fnp.where(mask, x1, x2)


def fmin(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The elementwise minimum, ignoring NaNs (NaN only where both are)."""
    mask = fnp.logical_or(fnp.less(x1, x2), fnp.isnan(x2))
    return fnp.where(mask, x1, x2)


def float_power(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x ** y`` computed in the promoted inexact dtype."""
    return lax.pow(*promote_args_inexact("float_power", x, y))


def _bits_int(d: np.dtype[Any]) -> np.dtype[Any]:
    return np.dtype(f"int{d.itemsize * 8}")


@custom_jvp
def _frexp(x: Array) -> tuple[Array, Array]:
    d = np.dtype(x.dtype)
    info = fnp.finfo(d)
    nmant, nexp = int(info.nmant), int(info.nexp)
    mask = (1 << nexp) - 1
    bias = 1 - int(info.minexp)
    it = _bits_int(d)
    tiny = lax.lt(lax.abs(x), convert(float(info.tiny), d))
    scaled = fnp.where(tiny, lax.mul(x, convert(float(1 << nmant), d)), x)
    exp_base = fnp.where(tiny, convert(-nmant, it), convert(0, it))
    bits = lax.bitcast_convert_type(scaled, it)
    e = lax.add(exp_base, lax.sub(lax.bitwise_and(lax.shift_right_arithmetic(bits, convert(nmant, it)), convert(mask, it)), convert(bias - 1, it)))
    bits = lax.bitwise_and(bits, convert(~(mask << nmant), it))
    bits = lax.bitwise_or(bits, convert((bias - 1) << nmant, it))
    m = lax.bitcast_convert_type(bits, d)
    special = fnp.logical_or(fnp.logical_or(fnp.isinf(x), fnp.isnan(x)), lax.eq(x, convert(0, d)))
    e = fnp.where(special, convert(0, it), e)
    return fnp.where(special, x, m), lax.convert_element_type(e, np.dtype(np.int32))


@_frexp.defjvp
def _frexp_jvp(primals: tuple[Array], tangents: tuple[Array]) -> tuple[tuple[Array, Array], tuple[Array, Array]]:
    (x,), (t,) = primals, tangents
    m, e = _frexp(x)
    return (m, e), (lax.mul(t, fnp.exp2(lax.neg(lax.convert_element_type(e, t.dtype)))), fnp.zeros_like(e))


def frexp(x: ArrayLike, /) -> tuple[Array, Array]:
    """The mantissa (in [0.5, 1), signed) and the int32 exponent of each element, so
    that ``x == m * 2**e``."""
    (arr,) = promote_args_inexact("frexp", as_array(x, "frexp"))
    result: tuple[Array, Array] = _frexp(arr)
    return result


def ldexp(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``x1 * 2**x2`` for an integer ``x2``."""
    a, b = as_array(x1, "ldexp"), as_array(x2, "ldexp", 1)
    if dtypes.is_float(np.dtype(b.dtype)):
        raise ValueError(f"ldexp not supported for input types {(np.dtype(a.dtype), np.dtype(b.dtype))}, at {_location()}")
    (a,) = promote_args_inexact("ldexp", x1)
    m, e = frexp(a)
    b = fnp.asarray(x2)
    e = fnp.astype(fnp.add(fnp.astype(e, b.dtype), b), a.dtype)
    positive = fnp.greater(e, 0)
    m = fnp.where(positive, fnp.multiply(m, 2), m)
    e = fnp.where(positive, fnp.subtract(e, 1), e)
    out = fnp.multiply(m, fnp.power(convert(2, np.dtype(m.dtype)), e))
    return fnp.where(fnp.logical_or(fnp.isinf(a), fnp.equal(a, 0)), a, out)


def modf(x: ArrayLike, /, out: None = None) -> tuple[Array, Array]:
    """The fractional and integral parts of each element (both with ``x``'s sign)."""
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.modf is not supported, at {_location()}")
    (arr,) = promote_args_inexact("modf", x)
    whole = fnp.where(lax.ge(arr, _like(arr, 0)), fnp.floor(arr), fnp.ceil(arr))
    return fnp.subtract(arr, whole), whole


def _integers(name: str, x1: ArrayLike, x2: ArrayLike) -> list[Array]:
    a, b = promote_dtypes(name, as_array(x1, name), as_array(x2, name, 1))
    if not dtypes.is_int(np.dtype(a.dtype)):
        raise ValueError(f"Arguments to jax.numpy.{name} must be integers, at {_location()}")
    return broadcast_arrays(a, b)


def _gcd(x1: Array, x2: Array) -> Array:
    def keep_going(xs: tuple[Array, Array]) -> Array:
        return fnp.any(fnp.not_equal(xs[1], 0))

    def step(xs: tuple[Array, Array]) -> tuple[Array, Array]:
        a, b = xs
        nz = fnp.not_equal(b, 0)
        a, b = fnp.where(nz, b, a), fnp.where(nz, lax.rem(a, fnp.where(nz, b, _like(b, 1))), _like(b, 0))
        swap = fnp.less(a, b)
        return fnp.where(swap, b, a), fnp.where(swap, a, b)

    result: Array = lax.while_loop(keep_going, step, (fnp.abs(x1), fnp.abs(x2)))[0]
    return result


def gcd(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The greatest common divisor of ``|x1|`` and ``|x2|`` (integers), by Euclid's
    algorithm in one ``while_loop``."""
    a, b = _integers("gcd", x1, x2)
    return _gcd(a, b)


def lcm(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The least common multiple of ``|x1|`` and ``|x2|`` (integers; 0 if either is 0)."""
    a, b = _integers("lcm", x1, x2)
    a, b = fnp.abs(a), fnp.abs(b)
    d = _gcd(a, b)
    safe = fnp.where(fnp.equal(d, 0), _like(d, 1), d)
    return fnp.where(fnp.equal(d, 0), _like(d, 0), fnp.multiply(a, fnp.floor_divide(b, safe)))


@custom_jvp
def _sinc_at_zero(x: Array) -> Array:
    # sin(pi x)/(pi x) at 0 is 1, its derivative there 0: the jvp gives that slope.
    return lax.add(lax.mul(x, _like(x, 0)), _like(x, 1))


@_sinc_at_zero.defjvp
def _sinc_at_zero_jvp(primals: tuple[Array], tangents: tuple[Array]) -> tuple[Array, Array]:
    (x,), (t,) = primals, tangents
    return _sinc_at_zero(x), lax.mul(lax.mul(x, _like(x, 0)), t)


def sinc(x: ArrayLike, /) -> Array:
    """The normalised sinc, ``sin(pi x) / (pi x)`` (1 at 0)."""
    (arr,) = promote_args_inexact("sinc", x)
    d = np.dtype(arr.dtype)
    zero = lax.eq(arr, _like(arr, 0))
    pi_x = lax.mul(_like(arr, np.pi), arr)
    safe = fnp.where(zero, _like(arr, 1), pi_x)
    return fnp.where(zero, _sinc_at_zero(pi_x), lax.div(lax.sin(safe), safe))


def deg2rad(x: ArrayLike, /) -> Array:
    """Degrees to radians."""
    (arr,) = promote_args_inexact("deg2rad", x)
    return lax.mul(arr, _like(arr, np.pi / 180))


def rad2deg(x: ArrayLike, /) -> Array:
    """Radians to degrees."""
    (arr,) = promote_args_inexact("rad2deg", x)
    return lax.mul(arr, _like(arr, 180 / np.pi))


def radians(x: ArrayLike, /) -> Array:
    """An alias of :func:`deg2rad`."""
    return deg2rad(x)


def degrees(x: ArrayLike, /) -> Array:
    """An alias of :func:`rad2deg`."""
    return rad2deg(x)
