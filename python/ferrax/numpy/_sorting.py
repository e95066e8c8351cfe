"""Sorting and cumulative reductions: ``sort``, ``argsort``, ``lexsort``, ``searchsorted``,
``cumsum``, ``cumprod``, ``nancumsum``, ``nancumprod``, ``cumulative_sum`` and
``cumulative_prod``, as ``jax.numpy`` has them.

Sorting is ``lax.sort``'s order: -0.0 equals 0.0 and NaNs come last. ``argsort`` gives
the default int dtype; ``descending=True`` keeps ties in their original order when
``stable``. The cumulative reductions keep the operand's dtype, except bools (the default
int) and, for ``cumulative_sum``/``cumulative_prod``, integers narrower than the default
ones for ``cumulative_sum`` (promoted as NumPy does); ``dtype=`` picks another one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ferrax._jit import staged
from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import aval_of, user_location
from ferrax.numpy._promotion import ArrayLike, DTypeLike, as_array, convert, promote_dtypes
from ferrax.numpy._shape import normalize_axis, ravel
from ferrax.numpy._ufuncs import where

__all__ = [
    "argsort",
    "cumprod",
    "cumsum",
    "cumulative_prod",
    "cumulative_sum",
    "lexsort",
    "nancumprod",
    "nancumsum",
    "searchsorted",
    "sort",
]


def _no_kind(name: str, kind: Any, order: Any) -> None:
    if kind is not None:
        raise TypeError(
            f"'kind' argument to {name} is not supported. Use stable=True or stable=False to specify "
            f"sort stability, at {user_location()}"
        )
    if order is not None:
        raise TypeError(f"'order' argument to {name} is not supported, at {user_location()}")


def _along(name: str, a: ArrayLike, axis: int | None) -> tuple[Array, int]:
    arr = as_array(a, name)
    if axis is None:
        return ravel(arr), 0
    return arr, normalize_axis(axis, len(aval_of(arr).shape), name)


@staged(static_argnames=("axis", "kind", "order", "stable", "descending"))
def sort(
    a: ArrayLike, axis: int | None = -1, *, kind: None = None, order: None = None, stable: bool = True, descending: bool = False
) -> Array:
    """``a`` sorted along ``axis`` (the flattened array for ``None``); NaNs last."""
    _no_kind("sort", kind, order)
    arr, dim = _along("sort", a, axis)
    out: Array = lax.sort(arr, dimension=dim, is_stable=stable)
    return lax.rev(out, (dim,)) if descending else out


@staged(static_argnames=("axis", "kind", "order", "stable", "descending", "dtype"))
def argsort(
    a: ArrayLike,
    axis: int | None = -1,
    *,
    kind: None = None,
    order: None = None,
    stable: bool = True,
    descending: bool = False,
    dtype: DTypeLike | None = None,
) -> Array:
    """The indices that sort ``a`` along ``axis`` (default int dtype, or ``dtype``)."""
    _no_kind("argsort", kind, order)
    arr, dim = _along("argsort", a, axis)
    shape = tuple(aval_of(arr).shape)
    if dtype is not None:
        index = dtypes.canonicalize(dtype, "argsort")
    else:
        index = np.dtype(np.int64) if shape[dim] > np.iinfo(np.int32).max else dtypes.default_int()
    iota = lax.broadcasted_iota(index, shape, dim)
    if descending and stable:
        # Reversed first, so that ties keep their order once the result is reversed.
        arr, iota = lax.rev(arr, (dim,)), lax.rev(iota, (dim,))
    _, indices = lax.sort_key_val(arr, iota, dimension=dim, is_stable=stable)
    return lax.rev(indices, (dim,)) if descending else indices


def lexsort(keys: Any, axis: int = -1) -> Array:
    """The indices that sort by the last key, then the one before, ... (a stable sort;
    default int dtype)."""
    arrays = [as_array(k, "lexsort", i) for i, k in enumerate(keys)]
    if not arrays:
        raise TypeError(f"need sequence of keys with len > 0 in lexsort, at {user_location()}")
    shapes = {tuple(aval_of(k).shape) for k in arrays}
    if len(shapes) > 1:
        raise ValueError(f"all keys need to be the same shape, at {user_location()}")
    shape = shapes.pop()
    index = dtypes.default_int()
    if not shape:
        return convert(0, index)
    dim = normalize_axis(axis, len(shape), "lexsort")
    if shape[dim] > np.iinfo(np.int32).max:
        index = np.dtype(np.int64)
    iota = lax.broadcasted_iota(index, shape, dim)
    out: tuple[Array, ...] = lax.sort((*arrays[::-1], iota), dimension=dim, num_keys=len(arrays))
    return out[-1]


def _total_less(x: Any, y: Any, or_equal: bool) -> Any:
    """``x < y`` (``<=`` when ``or_equal``) in the sort's order: NaN after everything."""
    if not dtypes.is_float(aval_of(x).dtype):
        return lax.le(x, y) if or_equal else lax.lt(x, y)
    x_nan, y_nan = lax.ne(x, x), lax.ne(y, y)
    if or_equal:
        return lax.bitwise_or(lax.le(x, y), y_nan)
    return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(y_nan, lax.bitwise_not(x_nan)))


def _gather_1d(arr: Any, index: Any) -> Any:
    """``arr[index]`` for a 1-d ``arr`` and an index array of any shape (clipped), as
    the gather JAX stages for ``sorted_arr[mid]``."""
    rank = len(aval_of(index).shape)
    dnums = lax.GatherDimensionNumbers(offset_dims=(rank,), collapsed_slice_dims=(), start_index_map=(0,))
    starts = lax.broadcast_in_dim(index, (*aval_of(index).shape, 1), tuple(range(rank)))
    window = lax.gather(arr, starts, dnums, (1,), mode="clip")
    return lax.squeeze(window, (rank,))


def _search_scan(arr: Any, values: Any, side: str, index: np.dtype[Any], unrolled: bool) -> Array:
    """Binary search: ``ceil(log2(n + 1))`` halvings of ``(low, high]`` for every value at
    once, a ``scan`` (or, ``unrolled``, as many steps written out) with unsigned bounds."""
    n = aval_of(arr).shape[0]
    vshape = tuple(aval_of(values).shape)
    unsigned = np.dtype(np.uint64) if index.itemsize == 8 else np.dtype(np.uint32)
    levels = int(np.ceil(np.log2(n + 1)))

    def halve(carry: tuple[Any, Any], _: Any) -> tuple[tuple[Any, Any], None]:
        low, high = carry
        mid = lax.add(low, lax.div(lax.sub(high, low), convert(2, unsigned)))
        go_left = _total_less(values, _gather_1d(arr, mid), or_equal=side == "left")
        return (lax.select_n(go_left, mid, low), lax.select_n(go_left, high, mid)), None

    carry = (lax.full(vshape, unsigned.type(0)), lax.full(vshape, unsigned.type(n)))
    if unrolled:
        for _ in range(levels):
            carry, _ = halve(carry, None)
    else:
        carry, _ = lax.scan(halve, carry, None, length=levels)
    out: Array = lax.convert_element_type(carry[1], index)
    return out


def _search_sort(arr: Any, values: Any, side: str, index: np.dtype[Any]) -> Array:
    """Ranks in one sort of ``a`` and the values together, less the values' own ranks."""
    flat = lax.reshape(values, (int(np.prod(aval_of(values).shape, dtype=np.int64)),))
    n, m = aval_of(arr).shape[0], aval_of(flat).shape[0]
    working = np.dtype(np.int32) if n + m <= np.iinfo(np.int32).max else np.dtype(np.int64)

    def rank(x: Any) -> Any:
        size = aval_of(x).shape[0]
        iota = lax.iota(working, size)
        _, order = lax.sort_key_val(x, iota)
        return lax.full((size,), 0, working).at[order].set(iota)

    if side == "left":
        placed = lax.slice(rank(lax.concatenate([flat, arr], 0)), (0,), (m,))
    else:
        placed = lax.slice(rank(lax.concatenate([arr, flat], 0)), (n,), (n + m,))
    out: Array = lax.reshape(lax.sub(placed, rank(flat)), tuple(aval_of(values).shape))
    return lax.convert_element_type(out, index)


def _search_compare_all(arr: Any, values: Any, side: str, index: np.dtype[Any]) -> Array:
    """Every element of ``a`` against every value: counts of those below (or not above)."""
    n = aval_of(arr).shape[0]
    vshape = tuple(aval_of(values).shape)
    rank = len(vshape)
    a_b = lax.broadcast_in_dim(arr, (n, *vshape), (0,))
    v_b = lax.broadcast_in_dim(values, (n, *vshape), tuple(range(1, rank + 1)))
    below = _total_less(a_b, v_b, or_equal=side == "right")
    out: Array = lax.reduce_sum(lax.convert_element_type(below, index), (0,))
    return out


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike | None = None, *, method: str = "scan") -> Array:
    """Where each element of ``v`` would go in the sorted 1-d ``a`` to keep it sorted:
    before equal elements (``side="left"``) or after them (``"right"``); int32 indices
    (int64 past 2**31 elements) of ``v``'s shape, in the sort's order (NaNs last).

    ``method`` is JAX's: ``"scan"`` (a binary search, ``lax.scan`` over ``log2(n)``
    halvings), ``"scan_unrolled"`` (the same steps written out), ``"sort"`` (one sort of
    ``a`` and ``v`` together) or ``"compare_all"`` (every pair compared: small ``a``)."""
    if side not in ("left", "right"):
        raise ValueError(f"{side!r} is an invalid value for keyword 'side', at {user_location()}")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise ValueError(
            f"invalid argument method={method!r}, expected one of "
            f"['compare_all', 'scan', 'scan_unrolled', 'sort'], at {user_location()}"
        )
    arr, values = as_array(a, "searchsorted"), as_array(v, "searchsorted", 1)
    if len(aval_of(arr).shape) != 1:
        raise ValueError(f"a should be 1-dimensional, at {user_location()}")
    arr, values = promote_dtypes("searchsorted", arr, values)
    if sorter is not None:
        arr = arr[as_array(sorter, "searchsorted", 2)]
    n = aval_of(arr).shape[0]
    index = np.dtype(np.int64) if n > np.iinfo(np.int32).max else np.dtype(np.int32)
    if method in ("scan", "scan_unrolled"):
        if n == 0:
            return lax.full(tuple(aval_of(values).shape), 0, index)
        return _search_scan(arr, values, side, index, method == "scan_unrolled")
    if method == "sort":
        return _search_sort(arr, values, side, index)
    return _search_compare_all(arr, values, side, index)


def _promote_integer(d: np.dtype[Any]) -> np.dtype[Any]:
    if d == np.bool_:
        return dtypes.default_int()
    if d.kind == "u" and d.itemsize < dtypes.default_uint().itemsize:
        return dtypes.default_uint()
    if d.kind == "i" and d.itemsize < dtypes.default_int().itemsize:
        return dtypes.default_int()
    return d


def _cumulative(
    name: str,
    reduce: Callable[..., Array],
    a: ArrayLike,
    axis: int | None,
    dtype: DTypeLike | None,
    out: None,
    *,
    fill_nan: bool = False,
    fill_value: int = 0,
    promote_integers: bool = False,
) -> Array:
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported, at {user_location()}")
    arr = as_array(a, name)
    shape = tuple(aval_of(arr).shape)
    if axis is None or not shape:
        arr = lax.reshape(arr, (int(np.prod(shape, dtype=np.int64)),))
    dim = normalize_axis(0 if axis is None else axis, len(aval_of(arr).shape), name)
    d = aval_of(arr).dtype
    if fill_nan and dtypes.is_float(d):
        arr = where(lax.ne(arr, arr), convert(fill_value, d), arr)
    if dtype is None:
        result = _promote_integer(d) if promote_integers or d == np.bool_ else d
        compute = result
    elif np.dtype(dtype) == np.bool_:
        result = np.dtype(np.bool_)
        if d != np.bool_:
            arr = lax.ne(arr, convert(0, d))
        compute = _promote_integer(result)
    else:
        result = dtypes.canonicalize(dtype, name)
        compute = result
    arr = lax.convert_element_type(arr, compute)
    return lax.convert_element_type(reduce(arr, dim), result)


@staged(static_argnames=("axis", "dtype"))
def cumsum(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None, out: None = None) -> Array:
    """The running sum along ``axis`` (of the flattened array by default)."""
    return _cumulative("cumsum", lax.cumsum, a, axis, dtype, out)


@staged(static_argnames=("axis", "dtype"))
def cumprod(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None, out: None = None) -> Array:
    """The running product along ``axis`` (of the flattened array by default)."""
    return _cumulative("cumprod", lax.cumprod, a, axis, dtype, out)


def nancumsum(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None, out: None = None) -> Array:
    """``cumsum`` with NaNs counted as zero."""
    return _cumulative("nancumsum", lax.cumsum, a, axis, dtype, out, fill_nan=True, fill_value=0)


def nancumprod(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None, out: None = None) -> Array:
    """``cumprod`` with NaNs counted as one."""
    return _cumulative("nancumprod", lax.cumprod, a, axis, dtype, out, fill_nan=True, fill_value=1)


def _cumulative_with_initial(
    name: str, reduce: Callable[..., Array], x: ArrayLike, axis: int | None, dtype: DTypeLike | None, include_initial: bool, initial: int
) -> Array:
    # JAX promotes narrow integers for cumulative_sum only.
    arr = as_array(x, name)
    ndim = len(aval_of(arr).shape)
    if axis is None:
        if ndim > 1:
            raise ValueError(
                f"The array passed to jnp.{name} has more than one dimension: axis must be given, at {user_location()}"
            )
        axis = 0
    if ndim == 0:
        raise ValueError(f"The array passed to jnp.{name} must not be a scalar, at {user_location()}")
    dim = normalize_axis(axis, ndim, name)
    result = _cumulative(name, reduce, arr, dim, dtype, None, promote_integers=name == "cumulative_sum")
    if include_initial:
        r_aval = aval_of(result)
        config = [(0, 0, 0)] * ndim
        config[dim] = (1, 0, 0)
        result = lax.pad(result, convert(initial, r_aval.dtype), config)
    return result


def cumulative_sum(
    x: ArrayLike, /, *, axis: int | None = None, dtype: DTypeLike | None = None, include_initial: bool = False
) -> Array:
    """The Array API's running sum (narrow integers promoted to the default int width; a zero
    first with ``include_initial``)."""
    return _cumulative_with_initial("cumulative_sum", lax.cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(
    x: ArrayLike, /, *, axis: int | None = None, dtype: DTypeLike | None = None, include_initial: bool = False
) -> Array:
    """The Array API's running product (a one first with ``include_initial``)."""
    return _cumulative_with_initial("cumulative_prod", lax.cumprod, x, axis, dtype, include_initial, 1)
