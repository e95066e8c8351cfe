"""More of ``jax.numpy``'s everyday names (issue 12 item 3): ``amax``/``amin``/``ptp``,
the data-dependent ``nonzero`` family with ``size=``/``fill_value=`` (``argwhere``,
``flatnonzero``, one-argument ``where``, ``extract``, ``compress``), ``append``,
``insert``, ``delete``, the Array API aliases (``concat``, ``permute_dims``,
``matrix_transpose``), shape queries, and the ufuncs ``copysign``,
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
from ferrax.numpy._breadth import _promote_inexact
from ferrax.numpy._shape import normalize_axes, normalize_axis

__all__ = [
    "amax", "amin", "append", "argwhere", "broadcast_arrays", "compress", "concat", "copy",
    "copysign", "deg2rad", "degrees", "delete", "extract", "fabs", "flatnonzero",
    "float_power", "fmax", "fmin", "frexp", "gcd", "insert", "isscalar", "lcm", "ldexp",
    "matrix_transpose", "modf", "ndim", "nonzero", "permute_dims", "ptp", "rad2deg",
    "radians", "reciprocal", "shape", "signbit", "sinc", "size", "where",
    "apply_along_axis", "apply_over_axes", "argpartition", "bincount", "block", "choose",
    "corrcoef", "cov", "cross", "diagflat", "digitize", "dsplit", "ediff1d", "fromfunction",
    "geomspace", "gradient", "histogram", "histogram2d", "histogram_bin_edges", "histogramdd",
    "hsplit", "matvec", "partition", "place", "put", "put_along_axis", "resize", "rollaxis",
    "rot90", "trapezoid", "trim_zeros", "unwrap", "vander", "vdot", "vecdot", "vecmat",
    "vectorize", "vsplit", "packbits", "unpackbits", "spacing",
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


# ------------------------------------------------------------- counting and binning


def bincount(x: ArrayLike, weights: ArrayLike | None = None, minlength: int = 0, *, length: int | None = None) -> Array:
    """The number of occurrences of each value ``0..length-1`` in the non-negative
    integer ``x`` (summed ``weights`` if given); ``length`` is needed under ``jit``."""
    arr = as_array(x, "bincount")
    if arr.dtype == np.bool_:
        arr = lax.convert_element_type(arr, np.dtype(np.int32))
    if not dtypes.is_int(np.dtype(arr.dtype)):
        raise TypeError(f"x argument to bincount must have an integer type; got {arr.dtype}, at {_location()}")
    if arr.ndim != 1:
        raise ValueError(f"only 1-dimensional input supported, at {_location()}")
    minlength = operator.index(_static_axis(minlength, "bincount"))
    if length is None:
        if isinstance(arr, Tracer):
            raise ConcretizationError(
                f"Abstract tracer value encountered where concrete value is expected: traced array with shape "
                f"{arr.aval.str_short()}. The error occurred because of argument 'x' of jnp.bincount. To avoid "
                f"this error, pass a static `length` argument, at {_location()}"
            )
        host = np.asarray(arr)
        length = builtins.max(minlength, int(builtins.max(0, host.max())) + 1 if host.size else 0)
    else:
        length = _static_size(length, "bincount")
    if weights is None:
        w: Array = convert(1, dtypes.default_int())
    else:
        w = as_array(weights, "bincount", 1)
        if w.shape != arr.shape:
            raise ValueError(f"type of weights must match type of x. Got {arr.shape} and {w.shape}, at {_location()}")
    return fnp.zeros(length, w.dtype).at[fnp.clip(arr, 0)].add(w, mode="drop")


def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False, *, method: str | None = None) -> Array:
    """The index of the bin of each element of ``x`` (``bins`` increasing or
    decreasing), by :func:`ferrax.numpy.searchsorted`."""
    arr, edges = as_array(x, "digitize"), as_array(bins, "digitize", 1)
    if edges.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}, at {_location()}")
    if edges.shape[0] == 0:
        return fnp.zeros_like(arr, dtype=np.int32)
    side = "left" if right else "right"
    kw: dict[str, Any] = {} if method is None else {"method": method}
    return fnp.where(
        fnp.greater_equal(edges[-1], edges[0]),
        fnp.searchsorted(edges, arr, side=side, **kw),
        fnp.subtract(edges.shape[0], fnp.searchsorted(edges[::-1], arr, side=side, **kw)),
    )


def histogram_bin_edges(
    a: ArrayLike, bins: ArrayLike | str = 10, range: Sequence[ArrayLike] | None = None, weights: ArrayLike | None = None
) -> Array:
    """The edges of ``histogram``'s bins: ``bins + 1`` equal steps over ``range``
    (default: the data's minimum and maximum), or ``bins`` itself if it is 1-d."""
    if isinstance(bins, str):
        raise NotImplementedError(f"string values for `bins` not implemented, at {_location()}")
    arr = as_array(a, "histogram_bin_edges")
    as_array(bins, "histogram_bin_edges", 1)
    d = dtypes.to_inexact(np.dtype(arr.dtype))
    if np.ndim(bins) == 1:
        return fnp.asarray(bins, dtype=d)
    count = operator.index(_static_axis(bins, "histogram_bin_edges"))
    lo_hi = fnp.asarray([fnp.min(arr), fnp.max(arr)] if range is None else list(range), dtype=d)
    if lo_hi.shape != (2,):
        raise ValueError(f"`range` must be either None or a sequence of scalars, got {range}, at {_location()}")
    flat = fnp.equal(ptp(lo_hi), 0)
    lo = fnp.where(flat, fnp.subtract(lo_hi[0], 0.5), lo_hi[0])
    hi = fnp.where(flat, fnp.add(lo_hi[1], 0.5), lo_hi[1])
    result: Array = fnp.linspace(lo, hi, count + 1, dtype=d)
    return result


def histogram(
    a: ArrayLike,
    bins: ArrayLike = 10,
    range: Sequence[ArrayLike] | None = None,
    weights: ArrayLike | None = None,
    density: bool | None = None,
) -> tuple[Array, Array]:
    """The (weighted) counts of ``a`` in each bin, and the bin edges."""
    if weights is None:
        (arr,) = _promote_inexact("histogram", as_array(a, "histogram"))
        w = fnp.ones_like(arr)
    else:
        arr, w = as_array(a, "histogram"), as_array(weights, "histogram", 2)
        if arr.shape != w.shape:
            raise ValueError(f"weights should have the same shape as a, at {_location()}")
        arr, w = _promote_inexact("histogram", arr, w)
    edges = histogram_bin_edges(arr, bins, range, w)
    index = fnp.searchsorted(edges, arr, side="right")
    index = fnp.where(fnp.equal(arr, edges[-1]), edges.shape[0] - 1, index)
    counts = fnp.zeros(edges.shape[0], w.dtype).at[index].add(w)[1:]
    if density:
        counts = fnp.divide(fnp.divide(counts, fnp.diff(edges)), fnp.sum(counts))
    return counts, edges


def histogramdd(
    sample: ArrayLike,
    bins: ArrayLike | list[ArrayLike] = 10,
    range: Sequence[Sequence[ArrayLike] | None] | None = None,
    weights: ArrayLike | None = None,
    density: bool | None = None,
) -> tuple[Array, list[Array]]:
    """The counts of the ``(N, D)`` points ``sample`` in a D-dimensional grid of bins,
    and each dimension's edges."""
    if weights is None:
        (pts,) = _promote_inexact("histogramdd", as_array(sample, "histogramdd"))
        w: Array | None = None
    else:
        pts, w = as_array(sample, "histogramdd"), as_array(weights, "histogramdd", 3)
        if w.shape != pts.shape[:1]:
            raise ValueError(f"should have one weight for each sample, at {_location()}")
        pts, w = _promote_inexact("histogramdd", pts, w)
    n, d = pts.shape
    if range is not None and (len(range) != d or builtins.any(r is not None and len(r) != 2 for r in range)):
        raise ValueError(f"For sample.shape={(n, d)}, range must be a sequence of {d} pairs or Nones; got range={range}, at {_location()}")
    try:
        per_dim = list(bins)  # type: ignore[arg-type]
    except TypeError:
        per_dim = [bins] * d
    else:
        if len(per_dim) != d:
            raise ValueError(f"should be a bin for each dimension, at {_location()}")
    indices_by_dim, edges_by_dim = [], []
    for i in builtins.range(d):
        edges = histogram_bin_edges(pts[:, i], per_dim[i], None if range is None else range[i], w)
        index = fnp.searchsorted(edges, pts[:, i], side="right")
        index = fnp.where(fnp.equal(pts[:, i], edges[-1]), fnp.subtract(index, 1), index)
        indices_by_dim.append(index)
        edges_by_dim.append(edges)
    nbins = tuple(e.shape[0] + 1 for e in edges_by_dim)
    flat = fnp.ravel_multi_index(tuple(indices_by_dim), nbins, mode="clip")
    hist = fnp.reshape(bincount(flat, w, length=math.prod(nbins)), nbins)
    hist = hist[(slice(1, -1),) * d]
    if density:
        hist = fnp.astype(hist, pts.dtype)
        hist = fnp.divide(hist, fnp.sum(hist))
        for width in fnp.ix_(*(fnp.diff(e) for e in edges_by_dim)):
            hist = fnp.divide(hist, width)
    return hist, edges_by_dim


def histogram2d(
    x: ArrayLike,
    y: ArrayLike,
    bins: ArrayLike | list[ArrayLike] = 10,
    range: Sequence[Sequence[ArrayLike] | None] | None = None,
    weights: ArrayLike | None = None,
    density: bool | None = None,
) -> tuple[Array, Array, Array]:
    """The counts of the points ``(x, y)`` in a 2-d grid of bins, and both edges."""
    xa, ya = as_array(x, "histogram2d"), as_array(y, "histogram2d", 1)
    try:
        count = len(bins)  # type: ignore[arg-type]
    except TypeError:
        count = 1
    if count not in (1, 2):
        edges = fnp.asarray(bins)
        bins = [edges, edges]
    hist, edges_by_dim = histogramdd(fnp.transpose(fnp.stack([xa, ya])), bins, range, weights, density)
    return hist, edges_by_dim[0], edges_by_dim[1]


def cov(
    m: ArrayLike,
    y: ArrayLike | None = None,
    rowvar: bool = True,
    bias: bool = False,
    ddof: int | None = None,
    fweights: ArrayLike | None = None,
    aweights: ArrayLike | None = None,
    dtype: DTypeLike | None = None,
) -> Array:
    """The covariance matrix of the variables in the rows (columns if not ``rowvar``)
    of ``m`` (and ``y``), with frequency and analytic weights."""
    if y is not None:
        mm, yy = promote_args_inexact("cov", m, y)
        if yy.ndim > 2:
            raise ValueError(f"y has more than 2 dimensions, at {_location()}")
    else:
        (mm,) = promote_args_inexact("cov", m)
    if mm.ndim > 2:
        raise ValueError(f"m has more than 2 dimensions, at {_location()}")
    if dtype is not None and not dtypes.is_float(dtypes.canonicalize(dtype, "cov")):
        raise ValueError(f"cov: dtype must be a subclass of float or complex; got dtype={dtype}, at {_location()}")
    X = fnp.atleast_2d(mm)
    if not rowvar and mm.ndim != 1:
        X = fnp.transpose(X)
    if X.shape[0] == 0:
        return fnp.reshape(fnp.array([]), (0, 0))
    if y is not None:
        Y = fnp.atleast_2d(yy)
        if not rowvar and Y.shape[0] != 1:
            Y = fnp.transpose(Y)
        X = fnp.concatenate([X, Y], axis=0)
    if X.shape[1] == 0:
        return fnp.full(() if X.shape[0] == 1 else (X.shape[0], X.shape[0]), np.nan, dtype=X.dtype)
    if ddof is None:
        ddof = 1 if not bias else 0
    w: Array | None = None
    aw: Array | None = None
    if fweights is not None:
        fw = as_array(fweights, "cov")
        if fw.ndim > 1:
            raise RuntimeError(f"cannot handle multidimensional fweights, at {_location()}")
        if fw.shape[0] != X.shape[1]:
            raise RuntimeError(f"incompatible numbers of samples and fweights, at {_location()}")
        if not dtypes.is_int(np.dtype(fw.dtype)):
            raise TypeError(f"fweights must be integer, at {_location()}")
        w = fnp.abs(fw)
    if aweights is not None:
        aw = as_array(aweights, "cov")
        if aw.ndim > 1:
            raise RuntimeError(f"cannot handle multidimensional aweights, at {_location()}")
        if aw.shape[0] != X.shape[1]:
            raise RuntimeError(f"incompatible numbers of samples and aweights, at {_location()}")
        aw = fnp.abs(aw)
        w = aw if w is None else fnp.multiply(w, aw)
    if dtype is not None:
        X = fnp.astype(X, dtype)
        w = None if w is None else fnp.astype(w, dtype)
    avg, w_sum = fnp.average(X, axis=1, weights=w, returned=True)
    total = w_sum[0]
    f: Any
    if w is None:
        f = X.shape[1] - ddof
    elif ddof == 0:
        f = total
    elif aw is None:
        f = fnp.subtract(total, ddof)
    else:
        f = fnp.subtract(total, fnp.divide(fnp.multiply(ddof, fnp.sum(fnp.multiply(w, aw))), total))
    X = fnp.subtract(X, avg[:, None])
    XT = fnp.transpose(X if w is None else fnp.multiply(X, w[None, :]))
    return fnp.squeeze(fnp.true_divide(fnp.dot(X, XT), f))


def corrcoef(x: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True, dtype: DTypeLike | None = None) -> Array:
    """The Pearson correlation coefficients of the variables (see :func:`cov`), clipped
    to [-1, 1]."""
    as_array(x, "corrcoef")
    if dtype is not None and not dtypes.is_float(dtypes.canonicalize(dtype, "corrcoef")):
        raise ValueError(f"corrcoef: dtype must be a subclass of float or complex; got dtype={dtype}, at {_location()}")
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return fnp.divide(c, c)
    stddev = fnp.sqrt(fnp.diag(c))
    c = fnp.divide(fnp.divide(c, stddev[:, None]), stddev[None, :])
    return fnp.clip(c, -1, 1)


# ------------------------------------------------------------------------ products


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None) -> Array:
    """The cross product of 3-vectors (or 2-vectors, as z = 0) along the given axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x = fnp.moveaxis(as_array(a, "cross"), axisa, -1)
    y = fnp.moveaxis(as_array(b, "cross", 1), axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ValueError(f"Dimension must be either 2 or 3 for cross product, at {_location()}")
    if x.shape[-1] == 2 and y.shape[-1] == 2:
        return fnp.subtract(fnp.multiply(x[..., 0], y[..., 1]), fnp.multiply(x[..., 1], y[..., 0]))
    x0, x1 = x[..., 0], x[..., 1]
    x2 = x[..., 2] if x.shape[-1] == 3 else fnp.zeros_like(x0)
    y0, y1 = y[..., 0], y[..., 1]
    y2 = y[..., 2] if y.shape[-1] == 3 else fnp.zeros_like(y0)
    c = fnp.array([
        fnp.subtract(fnp.multiply(x1, y2), fnp.multiply(x2, y1)),
        fnp.subtract(fnp.multiply(x2, y0), fnp.multiply(x0, y2)),
        fnp.subtract(fnp.multiply(x0, y1), fnp.multiply(x1, y0)),
    ])
    return fnp.moveaxis(c, 0, axisc)


def vdot(a: ArrayLike, b: ArrayLike, *, precision: Any = None, preferred_element_type: DTypeLike | None = None) -> Array:
    """The dot product of ``a`` and ``b`` flattened."""
    return fnp.dot(fnp.ravel(as_array(a, "vdot")), fnp.ravel(as_array(b, "vdot", 1)))


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None, preferred_element_type: DTypeLike | None = None) -> Array:
    """The dot products of the vectors along ``axis`` (the other axes broadcast)."""
    a, b = as_array(x1, "vecdot"), as_array(x2, "vecdot", 1)
    if a.shape[axis] != b.shape[axis]:
        raise ValueError(f"axes must match; got shapes {a.shape} and {b.shape} with axis={axis}, at {_location()}")
    a, b = fnp.moveaxis(a, axis, -1), fnp.moveaxis(b, axis, -1)
    result: Array = vectorize(vdot, signature="(n),(n)->()")(a, b)
    return result


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Matrix-vector products over the leading (broadcast) axes."""
    a, b = as_array(x1, "matvec"), as_array(x2, "matvec", 1)
    result: Array = vectorize(fnp.matmul, signature="(n,m),(m)->(n)")(a, b)
    return result


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Vector-matrix products over the leading (broadcast) axes."""
    a, b = as_array(x1, "vecmat"), as_array(x2, "vecmat", 1)
    result: Array = vectorize(fnp.matmul, signature="(n),(n,m)->(m)")(a, b)
    return result


# ------------------------------------------------------------ calculus and signals


def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: ArrayLike = 1.0, axis: int = -1) -> Array:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule (sample points
    ``x`` or spacing ``dx``)."""
    if x is None:
        (ya,) = _promote_inexact("trapezoid", as_array(y, "trapezoid"))
        step = fnp.asarray(dx)
        if step.ndim > 0:
            step = fnp.expand_dims(step, tuple(builtins.range(ya.ndim - step.ndim)))
            step = fnp.moveaxis(step, axis, -1)
    else:
        ya, xa = _promote_inexact("trapezoid", as_array(y, "trapezoid"), as_array(x, "trapezoid", 1))
        step = fnp.diff(xa) if xa.ndim == 1 else fnp.moveaxis(fnp.diff(xa, axis=axis), axis, -1)
    ya = fnp.moveaxis(ya, axis, -1)
    if step.ndim == 0 or step.shape[-1] == 1:
        h = step if step.ndim == 0 else step[..., 0]
        return fnp.multiply(h, fnp.subtract(fnp.sum(ya, -1), fnp.multiply(0.5, fnp.add(ya[..., 0], ya[..., -1]))))
    return fnp.multiply(0.5, fnp.sum(fnp.multiply(step, fnp.add(ya[..., 1:], ya[..., :-1])), -1))


def gradient(f: ArrayLike, *varargs: ArrayLike, axis: int | Sequence[int] | None = None, edge_order: int | None = None) -> Any:
    """The gradient of sampled values by central differences inside and one-sided
    differences at the edges; spacings as scalars or coordinate arrays. One array
    for one axis, else a list."""
    if edge_order is not None:
        raise NotImplementedError(f"The 'edge_order' argument to jnp.gradient is not supported, at {_location()}")
    a, *spacing = _promote_inexact("gradient", f, *varargs)

    def along(h: Any, ax: int) -> Array:
        def cut(v: Array, lo: int | None, hi: int | None) -> Array:
            n = v.shape[ax]
            s, e, _ = slice(lo, hi).indices(n)
            return lax.slice_in_dim(v, s, builtins.max(s, e), axis=ax)

        upper = fnp.subtract(cut(a, 1, 2), cut(a, 0, 1))
        lower = fnp.subtract(cut(a, -1, None), cut(a, -2, -1))
        if np.ndim(h) == 0:
            inner = fnp.divide(fnp.multiply(fnp.subtract(cut(a, 2, None), cut(a, None, -2)), 0.5), h)
            lower, upper = fnp.divide(lower, h), fnp.divide(upper, h)
        elif np.ndim(h) == 1:
            if h.shape[0] != a.shape[ax]:
                raise ValueError(
                    "Spacing arrays must have the same length as the dimension along which the gradient is "
                    f"calculated, at {_location()}"
                )
            shape_h = [1] * a.ndim
            shape_h[ax] = h.shape[0]
            hh = fnp.reshape(h, tuple(shape_h))
            upper = fnp.divide(upper, fnp.subtract(cut(hh, 1, 2), cut(hh, 0, 1)))
            lower = fnp.divide(lower, fnp.subtract(cut(hh, -1, None), cut(hh, -2, -1)))
            d1 = fnp.subtract(cut(hh, 1, -1), cut(hh, 0, -2))
            d2 = fnp.subtract(cut(hh, 2, None), cut(hh, 1, -1))
            ca = fnp.divide(fnp.negative(d2), fnp.multiply(d1, fnp.add(d1, d2)))
            cb = fnp.divide(fnp.subtract(d2, d1), fnp.multiply(d1, d2))
            cc = fnp.divide(d1, fnp.multiply(d2, fnp.add(d1, d2)))
            inner = fnp.add(fnp.add(fnp.multiply(ca, cut(a, 0, -2)), fnp.multiply(cb, cut(a, 1, -1))), fnp.multiply(cc, cut(a, 2, None)))
        else:
            raise ValueError(f"Spacing arrays must be 1D arrays or scalars, at {_location()}")
        return fnp.concatenate([upper, inner, lower], axis=ax)

    if axis is None:
        axes = tuple(builtins.range(a.ndim))
    else:
        axes = tuple(normalize_axis(i, a.ndim, "gradient") for i in ((axis,) if isinstance(axis, int) else axis))
    if not axes:
        return []
    if builtins.min(s for i, s in enumerate(a.shape) if i in axes) < 2:
        raise ValueError(
            f"Shape of array too small to calculate a numerical gradient, at least 2 elements are required, at {_location()}"
        )
    if not spacing:
        steps: list[Any] = [1.0] * len(axes)
    elif len(spacing) == 1:
        steps = list(spacing) * len(axes)
    elif len(spacing) == len(axes):
        steps = list(spacing)
    else:
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}, at {_location()}")
    grads = [along(h, ax) for ax, h in zip(axes, steps)]
    return grads[0] if len(axes) == 1 else grads


def ediff1d(ary: ArrayLike, to_end: ArrayLike | None = None, to_begin: ArrayLike | None = None) -> Array:
    """The differences of consecutive elements of ``ary`` flattened, with ``to_begin``
    and ``to_end`` (cast to its dtype) around them."""
    arr = fnp.ravel(as_array(ary, "ediff1d"))
    result = lax.sub(arr[1:], arr[:-1])
    if to_begin is not None:
        result = fnp.concatenate([fnp.ravel(fnp.astype(as_array(to_begin, "ediff1d"), arr.dtype)), result])
    if to_end is not None:
        result = fnp.concatenate([result, fnp.ravel(fnp.astype(as_array(to_end, "ediff1d"), arr.dtype))])
    return result


def unwrap(p: ArrayLike, discont: ArrayLike | None = None, axis: int = -1, period: ArrayLike = 2 * np.pi) -> Array:
    """``p`` with jumps larger than ``discont`` along ``axis`` replaced by their
    complement modulo ``period``."""
    pa: Array
    pa, per = promote_dtypes("unwrap", as_array(p, "unwrap"), period)
    if pa.shape[axis] == 0:
        return pa
    if discont is None:
        discont = fnp.divide(per, 2)
    half = fnp.floor_divide(per, 2) if dtypes.is_int(np.dtype(pa.dtype)) else fnp.divide(per, 2)
    dd = fnp.diff(pa, axis=axis)
    ddmod = fnp.subtract(fnp.mod(fnp.add(dd, half), per), half)
    ddmod = fnp.where(fnp.logical_and(fnp.equal(ddmod, fnp.negative(half)), fnp.greater(dd, 0)), half, ddmod)
    correct = fnp.where(fnp.less(fnp.abs(dd), discont), 0, fnp.subtract(ddmod, dd))
    dim = normalize_axis(axis, pa.ndim, "unwrap")
    head = lax.slice_in_dim(pa, 0, 1, axis=dim)
    tail = fnp.add(lax.slice_in_dim(pa, 1, pa.shape[dim], axis=dim), fnp.cumsum(correct, axis=dim))
    return fnp.concatenate([head, tail], axis=dim)


# ------------------------------------------------------------------ rearranging


def rot90(m: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Array:
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes``."""
    arr = as_array(m, "rot90")
    if arr.ndim < 2:
        raise ValueError(
            f"rot90 requires its first argument to have ndim at least two, but got first argument of shape "
            f"{arr.shape}, which has ndim {arr.ndim}, at {_location()}"
        )
    a1, a2 = (normalize_axis(ax, arr.ndim, "rot90") for ax in axes)
    if a1 == a2:
        raise ValueError(f"Axes must be different, at {_location()}")
    k = k % 4
    if k == 0:
        return arr
    if k == 2:
        return fnp.flip(fnp.flip(arr, a1), a2)
    perm = list(builtins.range(arr.ndim))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    if k == 1:
        return fnp.transpose(fnp.flip(arr, a2), perm)
    return fnp.flip(fnp.transpose(arr, perm), a2)


def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Array:
    """``a`` with ``axis`` moved to before position ``start`` (NumPy's older
    :func:`moveaxis`)."""
    arr = as_array(a, "rollaxis")
    n = arr.ndim
    ax = normalize_axis(axis, n, "rollaxis")
    start = operator.index(start)
    if not -n <= start <= n:
        raise ValueError(f"start={start} must satisfy {-n}<=start<={n}, at {_location()}")
    if start < 0:
        start += n
    if start > ax:
        start -= 1
    return fnp.moveaxis(arr, ax, start)


def resize(a: ArrayLike, new_shape: int | Sequence[int]) -> Array:
    """``a`` flattened, repeated as needed and cut to ``new_shape``."""
    dims = (operator.index(new_shape),) if isinstance(new_shape, (int, np.integer)) else tuple(operator.index(d) for d in new_shape)
    if builtins.any(d < 0 for d in dims):
        raise ValueError(f"all elements of `new_shape` must be non-negative, at {_location()}")
    flat = fnp.ravel(as_array(a, "resize"))
    total = math.prod(dims)
    if flat.shape[0] == 0 or total == 0:
        return fnp.zeros_like(flat, shape=dims)
    flat = fnp.tile(flat, -(-total // flat.shape[0]))[:total]
    return fnp.reshape(flat, dims)


def trim_zeros(filt: ArrayLike, trim: str = "fb", axis: int | Sequence[int] | None = None) -> Array:
    """``filt`` without its leading ('f') and trailing ('b') zeros (along ``axis``,
    default every axis); needs concrete values."""
    arr = as_array(filt, "trim_zeros")
    if isinstance(arr, Tracer):
        raise ConcretizationError(
            f"Abstract tracer value encountered where concrete value is expected: the `filt` argument of "
            f"trim_zeros() ({arr.aval.str_short()}) must be concrete, at {_location()}"
        )
    axes = set(normalize_axes(axis, arr.ndim, "trim_zeros")) if axis is not None else set(builtins.range(arr.ndim))
    mode = trim.lower()
    if not axes or ("f" not in mode and "b" not in mode):
        return arr
    host = np.asarray(arr)
    cuts = []
    for ax in builtins.range(arr.ndim):
        if ax not in axes:
            cuts.append(slice(None))
            continue
        mask = np.asarray(host.any(axis=tuple(i for i in builtins.range(arr.ndim) if i != ax)))
        if not mask.any():
            cuts.append(slice(0, 0))
            continue
        start = int(mask.argmax()) if "f" in mode else None
        stop = arr.shape[ax] - int(mask[::-1].argmax()) if "b" in mode else None
        cuts.append(slice(start, stop))
    return arr[tuple(cuts)]


def _split_along(name: str, ary: ArrayLike, sections: Any, axis: int) -> list[Array]:
    arr = as_array(ary, name)
    if axis >= arr.ndim:
        # As JAX, which reads the axis' size from the shape tuple.
        raise IndexError(f"tuple index out of range ({name} splits axis {axis} of a {arr.ndim}-d array), at {_location()}")
    return fnp.split(arr, sections, axis=axis)


def hsplit(ary: ArrayLike, indices_or_sections: int | Sequence[int] | ArrayLike) -> list[Array]:
    """``ary`` split column-wise (along axis 1, or 0 for vectors)."""
    arr = as_array(ary, "hsplit")
    return _split_along("hsplit", arr, indices_or_sections, 1 if arr.ndim > 1 else 0)


def vsplit(ary: ArrayLike, indices_or_sections: int | Sequence[int] | ArrayLike) -> list[Array]:
    """``ary`` split row-wise (along axis 0)."""
    return _split_along("vsplit", ary, indices_or_sections, 0)


def dsplit(ary: ArrayLike, indices_or_sections: int | Sequence[int] | ArrayLike) -> list[Array]:
    """``ary`` (at least 3-d) split depth-wise (along axis 2)."""
    return _split_along("dsplit", ary, indices_or_sections, 2)


def block(arrays: ArrayLike | list[Any]) -> Array:
    """An array assembled from nested lists of blocks (the innermost lists joined along
    the last axis, the outer ones along earlier axes)."""
    # An explicit stack of the nested lists' levels, so that deep nesting is no recursion.
    def leaf(x: Any) -> tuple[Array, int]:
        if isinstance(x, tuple):
            raise ValueError(f"jax.numpy.block does not allow tuples, got {x}, at {_location()}")
        if isinstance(x, list):
            if not x:
                raise ValueError(f"jax.numpy.block does not allow empty list arguments, at {_location()}")
            return fnp.asarray(0), -1
        return fnp.asarray(x), 1

    # Post-order walk: each frame is (list, results so far).
    if not isinstance(arrays, list):
        return leaf(arrays)[0]
    leaf(arrays)
    frames: list[tuple[list[Any], list[tuple[Array, int]]]] = [(arrays, [])]
    while True:
        items, done = frames[-1]
        if len(done) < len(items):
            nxt = items[len(done)]
            if isinstance(nxt, list):
                leaf(nxt)
                frames.append((nxt, []))
            else:
                done.append(leaf(nxt))
            continue
        depths = [d for _, d in done]
        if builtins.any(d != depths[0] for d in depths[1:]):
            raise ValueError(f"Mismatched list depths in jax.numpy.block, at {_location()}")
        rank = builtins.max(depths[0], builtins.max(x.ndim for x, _ in done))
        parts = [fnp.reshape(x, (1,) * (rank - x.ndim) + x.shape) for x, _ in done]
        joined = (fnp.concatenate(parts, axis=-depths[0]), depths[0] + 1)
        frames.pop()
        if not frames:
            return joined[0]
        frames[-1][1].append(joined)


def choose(a: ArrayLike, choices: Any, out: None = None, mode: str = "raise") -> Array:
    """Elements picked from ``choices`` by the integer ``a`` (all broadcast); ``mode``
    'raise' (needs concrete ``a``), 'wrap' or 'clip' for indices out of range."""
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.choose is not supported, at {_location()}")
    idx = as_array(a, "choose")
    options = [as_array(c, "choose", i + 1) for i, c in enumerate(choices)]
    if not dtypes.is_int(np.dtype(idx.dtype)):
        raise ValueError(f"`a` array must be integer typed, at {_location()}")
    n = len(options)
    if mode == "raise":
        if isinstance(idx, Tracer):
            raise ConcretizationError(
                "Abstract tracer value encountered where concrete value is expected: jnp.choose was jit-compiled "
                f"with mode='raise'. Use mode='wrap' or mode='clip' instead, at {_location()}"
            )
        host = np.asarray(idx)
        if bool(np.any((host < 0) | (host >= n))):
            raise ValueError(f"invalid entry in choice array, at {_location()}")
    elif mode == "wrap":
        idx = fnp.remainder(idx, n)
    elif mode == "clip":
        idx = fnp.clip(idx, 0, n - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip', at {_location()}")
    idx, *options = broadcast_arrays(idx, *options)
    return fnp.array(options)[(idx, *fnp.indices(idx.shape, sparse=True))]


def _tile_to(x: Array, n: int) -> Array:
    return fnp.tile(x, -(-n // x.shape[0]))[:n] if x.shape[0] != n else x


def put(a: ArrayLike, ind: ArrayLike, v: ArrayLike, mode: str | None = None, *, inplace: bool = True) -> Array:
    """``a`` with the flat positions ``ind`` set to ``v`` (repeated as needed); arrays
    are immutable, so ``inplace=False`` is required, as in JAX."""
    if inplace:
        raise ValueError(
            "jax.numpy.put cannot modify arrays in-place, because JAX arrays are immutable. Pass inplace=False "
            f"to instead return an updated array, at {_location()}"
        )
    arr, index = as_array(a, "put"), fnp.ravel(as_array(ind, "put", 1))
    vals = fnp.ravel(as_array(v, "put", 2))
    if math.prod(arr.shape) == 0 or index.shape[0] == 0 or vals.shape[0] == 0:
        return arr
    vals = _tile_to(vals, index.shape[0])
    size = math.prod(arr.shape)
    if mode is None:
        scatter = "drop"
    elif mode == "clip":
        index, scatter = fnp.clip(index, 0, size - 1), "promise_in_bounds"
    elif mode == "wrap":
        index, scatter = fnp.remainder(index, size), "promise_in_bounds"
    elif mode == "raise":
        raise NotImplementedError(f"The 'raise' mode to jnp.put is not supported, at {_location()}")
    else:
        raise ValueError(f"mode should be one of 'wrap' or 'clip'; got mode={mode!r}, at {_location()}")
    return arr.at[fnp.unravel_index(index, arr.shape)].set(vals, mode=scatter)


def put_along_axis(
    arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None, inplace: bool = True, *, mode: str | None = None
) -> Array:
    """``arr`` with ``values`` written at ``indices`` along ``axis`` (the inverse of
    :func:`ferrax.numpy.take_along_axis`); ``inplace=False`` is required."""
    if inplace:
        raise ValueError(
            "jax.numpy.put_along_axis cannot modify arrays in-place, because JAX arrays are immutable. Pass "
            f"inplace=False to instead return an updated array, at {_location()}"
        )
    x, idx, vals = as_array(arr, "put_along_axis"), as_array(indices, "put_along_axis", 1), as_array(values, "put_along_axis", 2)
    flattened = axis is None
    if axis is None:
        x, axis = fnp.ravel(x), 0
    if x.ndim != idx.ndim:
        raise ValueError(
            f"put_along_axis arguments 'arr' and 'indices' must have same ndim. Got arr.ndim={x.ndim} and "
            f"indices.ndim={idx.ndim}, at {_location()}"
        )
    dim = normalize_axis(axis, x.ndim, "put_along_axis")
    try:
        vals = fnp.broadcast_to(vals, idx.shape)
    except ValueError:
        raise ValueError(
            f"put_along_axis argument 'values' must be broadcastable to 'indices'. Got values.shape={vals.shape} "
            f"and indices.shape={idx.shape}, at {_location()}"
        ) from None
    # The other axes index themselves (NumPy's take_along_axis layout).
    grid = fnp.indices(idx.shape, sparse=True)
    where_ = tuple(idx if i == dim else g for i, g in enumerate(grid))
    out = x.at[where_].set(vals, mode=mode)
    return fnp.reshape(out, as_array(arr, "put_along_axis").shape) if flattened else out


def place(arr: ArrayLike, mask: ArrayLike, vals: ArrayLike, *, inplace: bool = True) -> Array:
    """``arr`` with the elements where ``mask`` is true replaced, in order, by ``vals``
    (repeated as needed); ``inplace=False`` is required."""
    data, m, v = as_array(arr, "place"), as_array(mask, "place", 1), fnp.ravel(as_array(vals, "place", 2))
    if inplace:
        raise ValueError(
            "jax.numpy.place cannot modify arrays in-place, because JAX arrays are immutable. Pass inplace=False "
            f"to instead return an updated array, at {_location()}"
        )
    n = math.prod(m.shape)
    if math.prod(data.shape) != n:
        raise ValueError(f"place: arr and mask must be the same size, at {_location()}")
    if v.shape[0] == 0:
        raise ValueError(f"Cannot place values from an empty array, at {_location()}")
    if n == 0:
        return data
    index = nonzero(fnp.ravel(m), size=n, fill_value=n)[0]
    return fnp.reshape(fnp.ravel(data).at[index].set(_tile_to(v, n), mode="drop"), data.shape)


def diagflat(v: ArrayLike, k: int = 0) -> Array:
    """A 2-d array with ``v`` flattened on its ``k``-th diagonal."""
    flat = fnp.ravel(as_array(v, "diagflat"))
    n = flat.shape[0] + builtins.abs(k)
    i = fnp.arange(0, n - builtins.abs(k))
    fi = fnp.add(fnp.add(i, k), fnp.multiply(i, n)) if k >= 0 else fnp.add(i, fnp.multiply(fnp.subtract(i, k), n))
    return fnp.reshape(fnp.zeros(n * n, dtype=flat.dtype).at[fi].set(flat), (n, n))


def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Array:
    """The Vandermonde matrix of the 1-d ``x``: its columns are powers of ``x``
    (decreasing unless ``increasing``)."""
    arr = as_array(x, "vander")
    if arr.ndim != 1:
        raise ValueError(f"x must be a one-dimensional array, at {_location()}")
    n = arr.shape[0] if N is None else operator.index(_static_axis(N, "vander"))
    if n < 0:
        raise ValueError(f"N must be nonnegative, at {_location()}")
    powers = lax.iota(np.dtype(arr.dtype), n)
    if not increasing:
        powers = lax.sub(convert(n - 1, np.dtype(arr.dtype)), powers)
    return fnp.power(arr[:, None], powers[None, :])


def geomspace(
    start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, dtype: DTypeLike | None = None, axis: int = 0
) -> Array:
    """``num`` numbers spaced evenly on a log scale from ``start`` to ``stop`` (signs
    kept)."""
    num = operator.index(_static_axis(num, "geomspace"))
    axis = operator.index(_static_axis(axis, "geomspace"))
    d = dtypes.to_inexact(fnp.result_type(start, stop)) if dtype is None else dtypes.canonicalize(dtype, "geomspace")
    compute = dtypes.to_inexact(d)
    lo = fnp.astype(as_array(start, "geomspace"), compute)
    hi = fnp.astype(as_array(stop, "geomspace", 1), compute)
    sign = fnp.sign(lo)
    res = fnp.multiply(sign, fnp.logspace(fnp.log10(fnp.divide(lo, sign)), fnp.log10(fnp.divide(hi, sign)), num, endpoint=endpoint, base=10.0, dtype=compute, axis=0))
    ax = normalize_axis(axis, res.ndim, "geomspace")
    if ax != 0:
        res = lax.transpose(res, (*builtins.range(1, ax + 1), 0, *builtins.range(ax + 1, res.ndim)))
    return lax.convert_element_type(res, d)


# ------------------------------------------------------------ applying functions


def fromfunction(function: Any, shape: Any, *, dtype: DTypeLike = float, **kwargs: Any) -> Array:
    """``function`` applied to the index grid of ``shape`` (vectorized with ``vmap``,
    each argument one axis' indices in ``dtype``)."""
    from ferrax import vmap

    dims = (operator.index(shape),) if isinstance(shape, (int, np.integer)) else tuple(operator.index(s) for s in shape)
    f = function
    for i in builtins.range(len(dims)):
        axes = [0 if i == j else None for j in builtins.range(len(dims))]
        f = vmap(f, in_axes=tuple(axes[::-1]))
    result: Array = f(*(fnp.arange(s, dtype=dtype) for s in dims), **kwargs)
    return result


def apply_along_axis(func1d: Any, axis: int, arr: ArrayLike, *args: Any, **kwargs: Any) -> Array:
    """``func1d`` applied to each 1-d slice of ``arr`` along ``axis`` (by ``vmap``)."""
    from ferrax import vmap

    x = as_array(arr, "apply_along_axis")
    ax = normalize_axis(axis, x.ndim, "apply_along_axis")

    def f(v: Any) -> Any:
        return func1d(v, *args, **kwargs)

    for i in builtins.range(1, x.ndim - ax):
        f = vmap(f, in_axes=i, out_axes=-1)
    for _ in builtins.range(ax):
        f = vmap(f, in_axes=0, out_axes=0)
    result: Array = f(x)
    return result


def apply_over_axes(func: Any, a: ArrayLike, axes: Sequence[int]) -> Array:
    """``func(a, axis)`` applied for each of ``axes`` in turn, each result keeping the
    reduced axis."""
    x = as_array(a, "apply_over_axes")
    for axis in axes:
        b = func(x, axis)
        if b.ndim == x.ndim:
            x = b
        elif b.ndim == x.ndim - 1:
            x = fnp.expand_dims(b, axis)
        else:
            raise ValueError(f"function is not returning an array of the correct shape, at {_location()}")
    return x


def _parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    import re

    arg = r"\(\w*(?:,\w+)*\)"
    if not re.fullmatch(rf"{arg}(?:,{arg})*->{arg}(?:,{arg})*", signature.replace(" ", "")):
        raise ValueError(f"not a valid gufunc signature: {signature}, at {_location()}")
    ins, outs = signature.replace(" ", "").split("->")

    def parse(part: str) -> list[tuple[str, ...]]:
        return [tuple(d for d in m.split(",") if d) for m in re.findall(r"\((\w*(?:,\w+)*)\)", part)]

    return parse(ins), parse(outs)


def vectorize(pyfunc: Any, *, excluded: Any = frozenset(), signature: str | None = None) -> Any:
    """``pyfunc`` vectorized over the leading (broadcast) axes of its array arguments
    by ``vmap``, as ``jax.numpy.vectorize``: ``signature`` names core dimensions
    (``"(n),(n)->()"``), ``excluded`` the positions (or keyword names) of arguments
    passed as they are."""
    import functools

    if builtins.any(not isinstance(e, (str, int)) for e in excluded):
        raise TypeError(
            f"jax.numpy.vectorize can only exclude integer or string arguments, but excluded={excluded!r}, "
            f"at {_location()}"
        )
    if builtins.any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers, at {_location()}")
    cores_in: list[tuple[str, ...]] | None = None
    if signature is not None:
        cores_in, _ = _parse_signature(signature)

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from ferrax import vmap

        fixed_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
        positions = [i for i in builtins.range(len(args)) if i not in excluded]
        arrays = [fnp.asarray(args[i]) for i in positions]
        cores = [()] * len(arrays) if cores_in is None else cores_in
        if len(cores) != len(arrays):
            raise TypeError(
                f"wrong number of positional arguments: expected {len(cores)}, got {len(arrays)}, at {_location()}"
            )
        sizes: dict[str, int] = {}
        for x, core in zip(arrays, cores):
            if x.ndim < len(core):
                raise ValueError(
                    f"input with shape {x.shape} does not have enough dimensions for all core dimensions {core}, "
                    f"at {_location()}"
                )
            for name, n in zip(core, x.shape[x.ndim - len(core):]):
                if sizes.setdefault(name, n) != n:
                    raise ValueError(
                        f"inconsistent size for core dimension {name!r}: {n} vs {sizes[name]}, at {_location()}"
                    )
        batch = fnp.broadcast_shapes(*(x.shape[: x.ndim - len(c)] for x, c in zip(arrays, cores))) if arrays else ()
        arrays = [fnp.broadcast_to(x, batch + x.shape[x.ndim - len(c):]) for x, c in zip(arrays, cores)]

        def call(*xs: Any) -> Any:
            full = list(args)
            for i, x in zip(positions, xs):
                full[i] = x
            return pyfunc(*full, **fixed_kwargs)

        f = call
        for _ in batch:
            f = vmap(f)
        return f(*arrays)

    return wrapped


# -------------------------------------------------------------------- partitions


def partition(a: ArrayLike, kth: int, axis: int = -1) -> Array:
    """``a`` rearranged along ``axis`` so that its ``kth`` element is where sorting
    would put it, the smaller ones before and the larger after (by ``top_k``)."""
    arr = as_array(a, "partition")
    ax = normalize_axis(axis, arr.ndim, "partition")
    k = normalize_axis(kth, arr.shape[ax], "partition")
    x = fnp.swapaxes(arr, ax, -1)
    if np.dtype(x.dtype).kind == "u":
        bottom = fnp.subtract(fnp.negative(lax.top_k(fnp.negative(fnp.add(x, 1)), k + 1)[0]), 1)
    else:
        bottom = fnp.negative(lax.top_k(fnp.negative(x), k + 1)[0])
    top = lax.top_k(x, x.shape[-1] - k - 1)[0]
    return fnp.swapaxes(lax.concatenate([bottom, top], x.ndim - 1), -1, ax)


def argpartition(a: ArrayLike, kth: int, axis: int = -1) -> Array:
    """The indices that :func:`partition` ``a`` along ``axis``."""
    from ferrax import vmap

    arr = as_array(a, "partition")
    ax = normalize_axis(axis, arr.ndim, "argpartition")
    k = normalize_axis(kth, arr.shape[ax], "argpartition")
    x = fnp.swapaxes(arr, ax, -1)
    if np.dtype(x.dtype).kind == "u":
        bottom = lax.top_k(fnp.negative(fnp.add(x, 1)), k + 1)[1]
    else:
        bottom = lax.top_k(fnp.negative(x), k + 1)[1]

    def zero_at(v: Array, i: Array) -> Array:
        return v.at[i].set(0)

    f: Any = zero_at
    for _ in builtins.range(x.ndim - 1):
        f = vmap(f)
    proxy = f(fnp.ones(x.shape, np.float32), bottom)
    top = lax.top_k(proxy, x.shape[-1] - k - 1)[1]
    return fnp.swapaxes(lax.concatenate([bottom, top], x.ndim - 1), -1, ax)


# ----------------------------------------------------------------------- bits


def _bit_order(bitorder: str) -> None:
    if bitorder not in ("little", "big"):
        raise ValueError(f"'order' must be either 'little' or 'big', at {_location()}")


def packbits(a: ArrayLike, axis: int | None = None, bitorder: str = "big") -> Array:
    """The truth of each element of ``a`` packed eight to a uint8 along ``axis`` (the
    flattened ``a`` for None), zero-padded; the first bit the most significant unless
    ``bitorder='little'``."""
    arr = as_array(a, "packbits")
    if not (dtypes.is_int(np.dtype(arr.dtype)) or arr.dtype == np.bool_):
        raise TypeError(f"Expected an input array of integer or boolean data type, at {_location()}")
    _bit_order(bitorder)
    u8 = np.dtype(np.uint8)
    bits = fnp.not_equal(arr, fnp.zeros((), arr.dtype))
    x = lax.convert_element_type(bits, u8)
    shifts = fnp.arange(8, dtype=u8)
    if bitorder == "big":
        shifts = shifts[::-1]
    if axis is None:
        x, axis = fnp.ravel(x), 0
    x = fnp.swapaxes(x, axis, -1)
    rest = x.shape[-1] % 8
    if rest:
        x = lax.pad(x, convert(0, u8), [(0, 0, 0)] * (x.ndim - 1) + [(0, 8 - rest, 0)])
    x = fnp.reshape(x, x.shape[:-1] + (x.shape[-1] // 8, 8))
    packed = fnp.astype(fnp.sum(fnp.left_shift(x, fnp.expand_dims(shifts, tuple(builtins.range(x.ndim - 1)))), -1), u8)
    return fnp.swapaxes(packed, axis, -1)


def unpackbits(a: ArrayLike, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Array:
    """The bits of the uint8 ``a`` as uint8 zeros and ones along ``axis`` (the
    flattened ``a`` for None), the first ``count`` of them (zero-padded) if given."""
    arr = as_array(a, "unpackbits")
    if arr.dtype != np.uint8:
        raise TypeError(f"Expected an input array of unsigned byte data type, at {_location()}")
    _bit_order(bitorder)
    u8 = np.dtype(np.uint8)
    masks = fnp.left_shift(fnp.asarray(1), fnp.arange(8, dtype=u8))
    if bitorder == "big":
        masks = masks[::-1]
    x = arr
    if axis is None:
        x, axis = fnp.ravel(x), 0
    x = fnp.swapaxes(x, axis, -1)
    unpacked = fnp.astype(fnp.greater(fnp.bitwise_and(x[..., None], fnp.expand_dims(masks, tuple(builtins.range(x.ndim)))), 0), u8)
    unpacked = fnp.reshape(unpacked, unpacked.shape[:-2] + (-1,))
    if count is not None:
        if count > unpacked.shape[-1]:
            unpacked = fnp.pad(unpacked, [(0, 0)] * (unpacked.ndim - 1) + [(0, count - unpacked.shape[-1])])
        else:
            unpacked = unpacked[..., :count]
    return fnp.swapaxes(unpacked, axis, -1)


def _step_bits(x: Array, up: Array) -> Array:
    """The neighbouring float of each element of ``x``: one unit in the last place
    away from zero where ``up`` is true, towards zero elsewhere (its bits plus or minus
    one; zeros, infinities and NaNs are the caller's)."""
    it = _bits_int(np.dtype(x.dtype))
    bits = lax.bitcast_convert_type(x, it)
    stepped = fnp.where(up, lax.add(bits, convert(1, it)), lax.sub(bits, convert(1, it)))
    return lax.bitcast_convert_type(stepped, np.dtype(x.dtype))


def spacing(x: ArrayLike, /) -> Array:
    """The distance from each element of ``x`` to its neighbour away from zero (towards
    +inf for float16, as JAX), signed as ``x``; the smallest subnormal at zero."""
    (arr,) = promote_args_inexact("spacing", x)
    d = np.dtype(arr.dtype)
    tiny = float(fnp.finfo(d).smallest_subnormal)
    zero = lax.eq(arr, _like(arr, 0))
    if d == np.float16:
        # nextafter(x, +inf): away from zero above it, towards zero below, +tiny at both zeros.
        up = _step_bits(arr, fnp.logical_not(fnp.signbit(arr)))
        special = fnp.logical_or(fnp.isnan(arr), lax.eq(arr, _like(arr, np.inf)))
        nxt = fnp.where(zero, _like(arr, tiny), fnp.where(special, arr, up))
        return lax.sub(nxt, arr)
    nxt = _step_bits(arr, fnp.ones(arr.shape, np.bool_))
    result = lax.sub(nxt, arr)
    # At zero (and where XLA flushes a subnormal difference to zero) the smallest subnormal.
    return fnp.where(lax.eq(result, _like(arr, 0)), copysign(_like(arr, tiny), arr), result)
