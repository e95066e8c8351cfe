"""Order statistics and set operations, as ``jax.numpy`` has them: ``quantile``,
``percentile``, ``median`` and their ``nan*`` forms; ``unique`` (with ``size=``) and
``unique_values``/``unique_counts``/``unique_inverse``/``unique_all``; ``isin``,
``setdiff1d``, ``union1d``, ``intersect1d`` and ``setxor1d``.

The quantiles sort along the reduced axis and gather the two neighbours of each
quantile's position, as JAX stages them (so gradients flow through ``sort`` and
``gather``). Integer inputs give floats; the result has the input's promoted inexact
dtype; a NaN makes the slice's quantile NaN (the ``nan*`` forms skip NaNs instead).

Unique values and set operations have a data-dependent size: eagerly they work as
NumPy's; under ``jit`` (or any transformation that traces the input) they need
``size=`` (the result is cut or padded to it, with ``fill_value``, by default the
smallest value), as in JAX; without it they raise :class:`ferrax.ConcretizationError`.
"""

from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import numpy as np

from ferrax import dtypes, lax
from ferrax._lax.structural import expand_dims_as_jax
from ferrax._array import Array
from ferrax._core import Tracer, aval_of, to_numpy, user_location
from ferrax.errors import ConcretizationError
from ferrax.numpy import _creation, _reductions, _shape, _ufuncs
from ferrax.numpy._promotion import ArrayLike, as_array, convert, promote_dtypes

__all__ = [
    "intersect1d",
    "isin",
    "median",
    "nanmedian",
    "nanpercentile",
    "nanquantile",
    "percentile",
    "quantile",
    "setdiff1d",
    "setxor1d",
    "union1d",
    "unique",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
]

QuantileAxis = int | tuple[int, ...] | None

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


# ------------------------------------------------------------------------ quantiles


def _to_inexact(x: Array) -> Array:
    aval = aval_of(x)
    want = dtypes.to_inexact(aval.dtype)
    return x if want == aval.dtype else convert(x, want, aval.weak_type)


def _full(shape: tuple[int, ...], value: Any, dtype: np.dtype[Any]) -> Array:
    return lax.full(shape, _scalar(value, dtype))


def _scalar(value: Any, dtype: np.dtype[Any]) -> Any:
    """``value`` as a NumPy scalar of ``dtype``: a literal of the jaxpr, as JAX's constants."""
    return np.asarray(value, dtype=dtype)[()]


def _reduce_axes(x: Array, axis: QuantileAxis, keepdims: bool, name: str) -> tuple[Array, int, list[int] | None, Any]:
    """``x`` with the reduced axes as one axis; that axis; the shape ``keepdims`` asks
    for at the end (``None``: the computation keeps it itself); a function doing the
    same to another array of ``x``'s shape (the weights)."""
    if axis is None:
        keep = [1] * x.ndim if keepdims else None
        return _shape.ravel(x), 0, keep, _shape.ravel
    if isinstance(axis, tuple):
        axes = tuple(_shape.normalize_axis(a, x.ndim, name) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(f"repeated axis, at {user_location()}")
        kept = [i for i in range(x.ndim) if i not in axes]
        reduced = sorted(axes)
        sizes = [x.shape[i] for i in kept] + [math.prod(x.shape[i] for i in reduced)]
        keep = [1 if i in axes else d for i, d in enumerate(x.shape)] if keepdims else None

        def same(y: Array) -> Array:
            return lax.reshape(y, sizes, kept + reduced)

        return same(x), len(kept), keep, same
    return x, _shape.normalize_axis(axis, x.ndim, name), None, lambda y: y


def _weights(name: str, x: Array, weights: ArrayLike | None, axis: QuantileAxis, method: str) -> tuple[Array, Array | None]:
    """``x`` (inexact) and the weights (of ``x``'s dtype and shape) JAX's checks allow."""
    if weights is None:
        return _to_inexact(x), None
    if method != "inverted_cdf":
        raise NotImplementedError(
            f"{method} doesn't support weights. Only method 'inverted_cdf' supports weights, at {user_location()}"
        )
    w = as_array(weights, name, 2)
    d = dtypes.to_inexact(promote_dtypes(name, x, w)[0].dtype)
    x, w = convert(x, d, aval_of(x).weak_type), convert(w, d, aval_of(w).weak_type)
    if w.shape != x.shape:
        if axis is None:
            raise ValueError(f"Weights shape must match 'a' shape when axis is None, at {user_location()}")
        axes = _shape.normalize_axes(axis, x.ndim, name)
        wanted = tuple(x.shape[i] for i in axes)
        if w.shape != wanted:
            raise ValueError(f"Weights shape {w.shape} must match reduction axes {wanted}, at {user_location()}")
        w = lax.broadcast_in_dim(w, x.shape, axes)
    return x, w


def _quantile(
    name: str, a: ArrayLike, q: ArrayLike, axis: QuantileAxis, method: str, keepdims: bool, skip_nans: bool, weights: ArrayLike | None = None
) -> Array:
    if method not in (*_METHODS, "inverted_cdf"):
        raise ValueError(
            "method can only be 'linear', 'lower', 'higher', 'midpoint', 'nearest' or 'inverted_cdf', "
            f"at {user_location()}"
        )
    x, w = _weights(name, as_array(a, name), weights, axis, method)
    qa = as_array(q, name, 1)
    if not dtypes.is_float(qa.dtype):
        raise TypeError(f"floor does not accept dtype {qa.dtype}. Accepted dtypes are subtypes of floating, at {user_location()}")
    if qa.ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {qa.shape}, at {user_location()}")
    result_dtype = x.dtype
    x, dim, keep, same = _reduce_axes(x, axis, keepdims, name)
    if w is not None:
        w = same(w)
    if skip_nans:
        x = _ufuncs.where(lax.ne(x, x), np.nan, x)  # NaNs of either sign sort last
    else:
        if x.shape[dim] == 0:
            raise TypeError(
                f"Slice size at index {dim} in gather op is out of range, must be within [0, 0 + 1), got 1, "
                f"at {user_location()}"
            )
        x = _ufuncs.where(_reductions.any(lax.ne(x, x), axis=dim, keepdims=True), np.nan, x)
    if w is None:
        x = lax.sort(x, dimension=dim)
    else:
        x, w = lax.sort_key_val(x, w, dimension=dim)
    if method == "inverted_cdf":
        result = _inverted_cdf(x, w, qa, dim, keepdims, skip_nans)
    else:
        result = _interpolated(x, qa, dim, keepdims, skip_nans, method)
    if keepdims and keep is not None:
        result = lax.reshape(result, (*qa.shape, *keep))
    out: Array = lax.convert_element_type(result, result_dtype)
    return out


def _interpolated(x: Array, qa: Array, dim: int, keepdims: bool, skip_nans: bool, method: str) -> Array:
    """The sorted ``x``'s values on either side of each quantile's position along
    ``dim``, gathered and combined as ``method`` says (the quantiles' axis first)."""
    q_shape, q_ndim = qa.shape, qa.ndim
    qd = qa.dtype
    index = dtypes.default_int()
    one = _scalar(1, qd)
    if skip_nans:
        counts = _reductions.sum(lax.bitwise_not(lax.ne(x, x)), axis=dim, dtype=qd, keepdims=keepdims)
        reduced = counts.shape
        qb = expand_dims_as_jax(qa, tuple(range(q_ndim, len(reduced) + q_ndim)))
        counts = expand_dims_as_jax(counts, tuple(range(q_ndim)))
        pos = _ufuncs.multiply(qb, lax.sub(counts, one))
        low, high = lax.floor(pos), lax.ceil(pos)
        high_weight = lax.sub(pos, low)
        low_weight = lax.sub(one, high_weight)
        top = lax.sub(counts, one)
        low = _ufuncs.maximum(_scalar(0, qd), _ufuncs.minimum(low, top))
        high = _ufuncs.maximum(_scalar(0, qd), _ufuncs.minimum(high, top))
        low, high = lax.convert_element_type(low, index), lax.convert_element_type(high, index)
        out_shape = q_shape + reduced
        iotas: list[Any] = [lax.broadcasted_iota(index, out_shape, d + q_ndim) for d in range(len(reduced))]
        if keepdims:
            iotas[dim] = low
        else:
            iotas.insert(dim, low)
        low_value = x[tuple(iotas)]
        iotas[dim] = high
        high_value = x[tuple(iotas)]
    else:
        last = _scalar(x.shape[dim] - 1, qd)
        pos = lax.mul(qa, last)
        low, high = lax.floor(pos), lax.ceil(pos)
        high_weight = lax.sub(pos, low)
        low_weight = lax.sub(one, high_weight)
        low = lax.clamp(_scalar(0, qd), low, last)
        high = lax.clamp(_scalar(0, qd), high, last)
        low, high = lax.convert_element_type(low, index), lax.convert_element_type(high, index)
        slice_sizes = list(x.shape)
        slice_sizes[dim] = 1
        dnums = lax.GatherDimensionNumbers(
            offset_dims=tuple(range(q_ndim, x.ndim + q_ndim if keepdims else x.ndim + q_ndim - 1)),
            collapsed_slice_dims=() if keepdims else (dim,),
            start_index_map=(dim,),
        )

        def take(i: Array) -> Array:
            starts = lax.broadcast_in_dim(i, (*q_shape, 1), tuple(range(q_ndim)))
            return lax.gather(x, starts, dnums, slice_sizes)

        low_value, high_value = take(low), take(high)
        # The weights (of q's shape) lined up with the values' leading axes.
        low_weight = lax.broadcast_in_dim(low_weight, low_value.shape, tuple(range(q_ndim)))
        high_weight = lax.broadcast_in_dim(high_weight, high_value.shape, tuple(range(q_ndim)))
    if method == "linear":
        out: Array = lax.add(
            lax.mul(lax.convert_element_type(low_value, qd), low_weight),
            lax.mul(lax.convert_element_type(high_value, qd), high_weight),
        )
        return out
    if method == "lower":
        return low_value
    if method == "higher":
        return high_value
    if method == "nearest":
        out = lax.select_n(lax.le(high_weight, _scalar(0.5, qd)), high_value, low_value)
        return out
    out = lax.mul(lax.add(low_value, high_value), _scalar(0.5, low_value.dtype))
    return out


def _inverted_cdf(x: Array, w: Array | None, qa: Array, dim: int, keepdims: bool, skip_nans: bool) -> Array:
    """The first sorted value whose running weight reaches ``q`` of the total (weights
    of one by default); NaN where a weight is negative or NaN, or (``skip_nans``: all)
    values are NaN. As JAX computes it, with the quantiles' axis first."""
    from ferrax.numpy._indexing import take_along_axis

    q_ndim, qd = qa.ndim, qa.dtype
    index = dtypes.default_int()
    if w is None:
        w = lax.full(x.shape, _scalar(1, x.dtype))
    bad_weights = lax.bitwise_or(lax.lt(w, _scalar(0, w.dtype)), lax.ne(w, w))
    nan_data = lax.ne(x, x)
    clean = lax.select_n(lax.bitwise_or(bad_weights, nan_data), w, lax.full(w.shape, _scalar(0, w.dtype)))
    running = lax.cumsum(clean, dim)
    total = lax.index_in_dim(running, -1, axis=dim, keepdims=keepdims)
    target = _ufuncs.multiply(lax.reshape(qa, qa.shape + (1,) * total.ndim), expand_dims_as_jax(total, tuple(range(q_ndim))))
    if not keepdims:
        target = expand_dims_as_jax(target, (dim + q_ndim,))
    below = lax.lt(expand_dims_as_jax(running, tuple(range(q_ndim))), target)
    idx = _reductions.sum(lax.convert_element_type(below, index), axis=dim + q_ndim, keepdims=keepdims)
    if skip_nans:
        valid = _reductions.sum(lax.bitwise_not(nan_data), axis=dim, dtype=qd, keepdims=keepdims)
    else:
        valid = lax.full(total.shape, _scalar(x.shape[dim], qd))
    limit = expand_dims_as_jax(lax.convert_element_type(lax.sub(valid, _scalar(1, qd)), index), tuple(range(q_ndim)))
    idx = _ufuncs.maximum(_scalar(0, index), _ufuncs.minimum(idx, limit))
    if keepdims:
        idx = lax.squeeze(idx, (q_ndim + dim,))
    if q_ndim == 0:
        result = lax.squeeze(take_along_axis(x, expand_dims_as_jax(idx, (dim,)), axis=dim), (dim,))
    else:
        perm = [*range(q_ndim, q_ndim + dim), *range(q_ndim), *range(q_ndim + dim, idx.ndim)]
        picked = take_along_axis(x, lax.transpose(idx, perm), axis=dim)
        result = lax.transpose(picked, [perm.index(i) for i in range(len(perm))])
    if keepdims:
        result = expand_dims_as_jax(result, (q_ndim + dim,))
    any_bad = _reductions.any(bad_weights, axis=dim, keepdims=keepdims)
    if skip_nans:
        force_nan = lax.bitwise_or(any_bad, lax.eq(valid, _scalar(0, qd)))
    else:
        force_nan = lax.bitwise_or(any_bad, _reductions.any(nan_data, axis=dim, keepdims=keepdims))
    return _ufuncs.where(expand_dims_as_jax(force_nan, tuple(range(q_ndim))), np.nan, result)


def _check_unsupported(name: str, out: object, overwrite_input: bool) -> None:
    if overwrite_input or out is not None:
        raise ValueError(
            f"jax.numpy.{name} does not support overwrite_input=True or out != None, at {user_location()}"
        )


def quantile(
    a: ArrayLike,
    q: ArrayLike,
    axis: QuantileAxis = None,
    out: None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
    *,
    weights: ArrayLike | None = None,
) -> Array:
    """The ``q``-th quantiles (``q`` a float or a 1-d array of floats in ``[0, 1]``) of
    ``a`` along ``axis`` (an int, a tuple, or ``None`` for all), with ``method``
    ``linear``, ``lower``, ``higher``, ``midpoint``, ``nearest`` or ``inverted_cdf``
    (the only one taking ``weights``, of ``a``'s shape or of the reduced axes'); the
    quantiles' axis comes first. NaN where the slice holds a NaN. ``out`` and
    ``overwrite_input=True`` are refused (``ValueError``), as in JAX."""
    _check_unsupported("quantile", out, overwrite_input)
    return _quantile("quantile", a, q, axis, method, keepdims, skip_nans=False, weights=weights)


def nanquantile(
    a: ArrayLike,
    q: ArrayLike,
    axis: QuantileAxis = None,
    out: None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
    *,
    weights: ArrayLike | None = None,
) -> Array:
    """:func:`quantile` of the values that are not NaN (NaN for a slice of NaNs only)."""
    _check_unsupported("nanquantile", out, overwrite_input)
    return _quantile("nanquantile", a, q, axis, method, keepdims, skip_nans=True, weights=weights)


def _percent(name: str, q: ArrayLike) -> Array:
    return _ufuncs.true_divide(_to_inexact(as_array(q, name, 1)), 100)


def percentile(
    a: ArrayLike,
    q: ArrayLike,
    axis: QuantileAxis = None,
    out: None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
    *,
    weights: ArrayLike | None = None,
) -> Array:
    """:func:`quantile` with ``q`` in percent (``[0, 100]``, integers allowed)."""
    _check_unsupported("quantile", out, overwrite_input)
    return _quantile("percentile", a, _percent("percentile", q), axis, method, keepdims, skip_nans=False, weights=weights)


def nanpercentile(
    a: ArrayLike,
    q: ArrayLike,
    axis: QuantileAxis = None,
    out: None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
    *,
    weights: ArrayLike | None = None,
) -> Array:
    """:func:`nanquantile` with ``q`` in percent."""
    _check_unsupported("nanquantile", out, overwrite_input)
    return _quantile("nanpercentile", a, _percent("nanpercentile", q), axis, method, keepdims, skip_nans=True, weights=weights)


def median(a: ArrayLike, axis: QuantileAxis = None, out: None = None, overwrite_input: bool = False, keepdims: bool = False) -> Array:
    """The median along ``axis`` (the flattened array by default): the middle value, or
    the mean of the two middle ones; NaN where the slice holds a NaN."""
    _check_unsupported("quantile", out, overwrite_input)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, skip_nans=False)


def nanmedian(a: ArrayLike, axis: QuantileAxis = None, out: None = None, overwrite_input: bool = False, keepdims: bool = False) -> Array:
    """:func:`median` of the values that are not NaN (NaN for a slice of NaNs only)."""
    _check_unsupported("nanquantile", out, overwrite_input)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, skip_nans=True)


# ------------------------------------------------------------------------ unique


_SIZE_HINT = (
    "To make jnp.unique() compatible with JIT and other transforms, you can specify "
    "a concrete value for the size argument, which will determine the output size."
)


def _concrete(x: Any, what: str) -> None:
    """A data-dependent size needs ``x``'s value: a traced ``x`` is an error."""
    if isinstance(x, Tracer):
        hint = "" if "size" in what else ": pass a static size= to fix the output size"
        raise ConcretizationError(
            f"Abstract tracer value encountered where concrete value is expected: traced array with "
            f"shape {x.aval.str_short()}. {what}{hint}, at {user_location()}"
        )


def _static_size(size: Any, what: str) -> int:
    _concrete(size, what)
    try:
        return operator.index(size)
    except TypeError:
        raise TypeError(
            f"'{type(size).__name__}' object cannot be interpreted as an integer (size), at {user_location()}"
        ) from None


def _nonzero_sized(mask: Array, size: int, fill: Any = 0) -> Array:
    """The positions of the true entries of the 1-d ``mask``, the first ``size`` of them,
    padded with ``fill`` (default int dtype): a running count scattered into bins, as
    JAX's ``nonzero(size=)`` computes it."""
    index = dtypes.default_int()
    if mask.shape[0] == 0 or size == 0:
        return _full((size,), fill, index)
    running = lax.cumsum(lax.convert_element_type(mask, index), 0)
    bins = _full((size,), 0, index).at[running].add(1, mode="drop")
    positions = lax.cumsum(bins, 0)
    count = _reductions.sum(mask, dtype=index)
    past = lax.ge(lax.iota(index, size), count)
    return _ufuncs.where(past, _scalar(fill, index), positions)


def _nonzero(mask: Array, size: int | None, fill: Any = 0) -> Array:
    if size is None:
        return _creation.asarray(np.flatnonzero(to_numpy(mask)).astype(dtypes.default_int()))
    return _nonzero_sized(mask, size, fill)


def _sorted_mask(ar: Array, axis: int, equal_nan: bool) -> tuple[Array, Array, Array]:
    """The slices along ``axis`` sorted (lexicographically), a mask of the first of each
    run of equal ones, and the sorting permutation."""
    from ferrax.numpy._breadth import moveaxis
    from ferrax.numpy._sorting import lexsort

    aux = moveaxis(ar, axis, 0)
    count, *rest = aux.shape
    width = math.prod(rest)
    if width == 0:
        count = 1
        perm = _full((1,), 0, dtypes.default_int())
    else:
        columns = lax.transpose(lax.reshape(aux, (count, width)), (1, 0))
        perm = lexsort([columns[i] for i in range(width - 1, -1, -1)])
    aux = aux[perm]
    if aux.size:
        first = lax.slice_in_dim(aux, 1, aux.shape[0], axis=0)
        before = lax.slice_in_dim(aux, 0, aux.shape[0] - 1, axis=0)
        differs = lax.ne(first, before)
        if equal_nan and dtypes.is_float(aux.dtype):
            both_nan = lax.bitwise_and(lax.ne(first, first), lax.ne(before, before))
            differs = lax.bitwise_and(differs, lax.bitwise_not(both_nan))
        new = _reductions.any(differs, axis=tuple(range(1, aux.ndim)))
        mask = _creation.ones(count, dtype=bool).at[1:].set(new)
    else:
        mask = _creation.zeros(count, dtype=bool)
    return aux, mask, perm


def _unique(
    ar: Array,
    axis: int,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    equal_nan: bool = True,
    size: int | None = None,
    fill_value: ArrayLike | None = None,
    return_true_size: bool = False,
) -> tuple[Array, ...]:
    from ferrax.numpy._breadth import diff, moveaxis

    index = dtypes.default_int()
    if ar.shape[axis] == 0 and size and fill_value is None:
        raise ValueError(
            "jnp.unique: for zero-sized input with nonzero size argument, fill_value must be specified, "
            f"at {user_location()}"
        )
    aux, mask, perm = _sorted_mask(ar, axis, equal_nan)
    ind = _nonzero(mask, size)
    result = aux[ind] if aux.size else aux
    if size is not None and fill_value is not None:
        fill = _creation.astype(as_array(fill_value, "unique", 1), result.dtype)
        if result.shape[0]:
            below = lax.lt(lax.iota(index, size), _reductions.sum(mask, dtype=index))
            valid = expand_dims_as_jax(below, tuple(range(1, result.ndim)))
            result = _ufuncs.where(valid, result, fill)
        else:
            result = _creation.full((size, *result.shape[1:]), fill, result.dtype)
    out: list[Array] = [moveaxis(result, 0, axis)]
    if return_index:
        out.append(perm[ind] if aux.size else perm)
    if return_inverse:
        if aux.size:
            rank = lax.sub(lax.cumsum(lax.convert_element_type(mask, index), 0), _scalar(1, index))
            out.append(_full(mask.shape, 0, index).at[perm].set(rank))
        else:
            out.append(_full((ar.shape[axis],), 0, index))
    if return_counts:
        if aux.size:
            if size is None:
                starts = _shape.concatenate([ind, _full((1,), mask.shape[0], index)])
            else:
                starts = _nonzero_sized(mask, size + 1)
                tail = starts[1:]
                starts = starts.at[1:].set(_ufuncs.where(tail, tail, mask.shape[0]))
            out.append(diff(starts))
        elif ar.shape[axis]:
            out.append(_full((1,), ar.shape[axis], index))
        else:
            out.append(_full((0,), 0, index))
    if return_true_size:
        out.append(_reductions.sum(mask, dtype=index))
    return tuple(out)


def unique(
    ar: ArrayLike,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: int | None = None,
    *,
    equal_nan: bool = True,
    size: int | None = None,
    fill_value: ArrayLike | None = None,
    sorted: bool = True,
) -> Any:
    """The sorted unique values of ``ar`` (flattened, or the unique slices along
    ``axis``), with, as asked, the index of each one's first occurrence, the inverse
    (the unique value's index for every input element: ``ar``'s shape when ``axis`` is
    None) and the counts (default int dtype). NaNs are one value if ``equal_nan``.

    ``size`` fixes the number of unique values (cut or padded with ``fill_value``,
    default the smallest value; padded counts are 0): needed when ``ar`` is traced.
    ``sorted`` is accepted (the values are always sorted)."""
    del sorted
    arr = as_array(ar, "unique")
    if size is None:
        _concrete(arr, "The error arose for the first argument of jnp.unique(). " + _SIZE_HINT)
    else:
        size = _static_size(size, "The error arose for the size argument of jnp.unique(). " + _SIZE_HINT)
    shape = arr.shape
    if axis is None:
        arr, dim = _shape.ravel(arr), 0
    else:
        dim = _shape.normalize_axis(axis, arr.ndim, "unique")
    out = _unique(arr, dim, return_index, return_inverse, return_counts, equal_nan=equal_nan, size=size, fill_value=fill_value)
    if return_inverse and axis is None:
        at = 2 if return_index else 1
        out = (*out[:at], _shape.reshape(out[at], shape), *out[at + 1 :])
    return out[0] if len(out) == 1 else out


class UniqueAllResult(NamedTuple):
    """What :func:`unique_all` returns."""

    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    """What :func:`unique_counts` returns."""

    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    """What :func:`unique_inverse` returns."""

    values: Array
    inverse_indices: Array


def unique_all(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> UniqueAllResult:
    """The Array API's ``unique_all``: values, first indices, inverse indices (``x``'s
    shape) and counts; NaNs are distinct values."""
    values, indices, inverse, counts = unique(
        x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False, size=size, fill_value=fill_value
    )
    return UniqueAllResult(values, indices, inverse, counts)


def unique_counts(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> UniqueCountsResult:
    """The Array API's ``unique_counts``: values and counts; NaNs are distinct values."""
    values, counts = unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value)
    return UniqueCountsResult(values, counts)


def unique_inverse(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> UniqueInverseResult:
    """The Array API's ``unique_inverse``: values and inverse indices (``x``'s shape);
    NaNs are distinct values."""
    values, inverse = unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value)
    return UniqueInverseResult(values, inverse)


def unique_values(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Array:
    """The Array API's ``unique_values``: the sorted unique values; NaNs are distinct."""
    out: Array = unique(x, equal_nan=False, size=size, fill_value=fill_value)
    return out


# ------------------------------------------------------------------------ set operations


def _in1d(name: str, ar1: ArrayLike, ar2: ArrayLike, invert: bool, method: str, assume_unique: bool) -> Array:
    a1, a2 = promote_dtypes(name, as_array(ar1, name), as_array(ar2, name, 1))
    a1, a2 = _shape.ravel(a1), _shape.ravel(a2)
    if a1.size == 0 or a2.size == 0:
        return (_creation.ones if invert else _creation.zeros)(a1.shape, dtype=bool)
    if method in ("auto", "compare_all"):
        pairs = (lax.ne if invert else lax.eq)(
            lax.broadcast_in_dim(a1, (a1.shape[0], a2.shape[0]), (0,)),
            lax.broadcast_in_dim(a2, (a1.shape[0], a2.shape[0]), (1,)),
        )
        return (_reductions.all if invert else _reductions.any)(pairs, axis=-1)
    if method == "binary_search":
        from ferrax.numpy._sorting import searchsorted

        ordered = lax.sort(a2, dimension=0)
        found = ordered[searchsorted(ordered, a1)]
        return (lax.ne if invert else lax.eq)(a1, found)
    if method == "sort":
        if assume_unique:
            values, back = a1, None
        else:
            high = _reductions.max(a2)
            values, back = _unique(a1, 0, return_inverse=True, size=a1.shape[0], fill_value=high)
        joined = _shape.concatenate([values, a2])
        aux, order = lax.sort_key_val(joined, lax.iota(dtypes.default_int(), joined.shape[0]))
        same = (lax.ne if invert else lax.eq)(aux[1:], aux[:-1])
        start = _creation.ones if invert else _creation.zeros
        hit = start(values.shape, dtype=bool).at[order[:-1]].set(same, mode="drop")
        return hit if back is None else hit[back]
    raise ValueError(
        f"method={method!r} is not implemented; options are 'compare_all', 'binary_search', 'sort', and 'auto', "
        f"at {user_location()}"
    )


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False, invert: bool = False, *, method: str = "auto") -> Array:
    """Whether each element of ``element`` is among ``test_elements`` (``element``'s
    shape; negated with ``invert``); ``method`` is JAX's ``"auto"``/``"compare_all"``
    (every pair), ``"binary_search"`` or ``"sort"``."""
    result = _in1d("isin", element, test_elements, invert, method, assume_unique)
    return _shape.reshape(result, np.shape(as_array(element, "isin")))


def _fill_like(x: Array, fill_value: ArrayLike | None, default: Any = 0) -> Array:
    value = default if fill_value is None else fill_value
    return _creation.astype(as_array(value, "fill_value"), x.dtype)


def setdiff1d(
    ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None, fill_value: ArrayLike | None = None
) -> Array:
    """The sorted unique values of ``ar1`` not in ``ar2``; ``size``/``fill_value`` as
    :func:`unique`'s (the fill defaults to 0)."""
    a1, a2 = _shape.ravel(as_array(ar1, "setdiff1d")), _shape.ravel(as_array(ar2, "setdiff1d", 1))
    if size is None:
        _concrete(a1, "The error arose in setdiff1d()")
    else:
        size = _static_size(size, "The error arose in setdiff1d()")
    fill = _fill_like(a1, fill_value)
    if a1.size == 0:
        return _creation.full((size or 0,), fill, a1.dtype)
    if not assume_unique:
        a1 = unique(a1, size=size and a1.size)
    mask = _in1d("setdiff1d", a1, a2, True, "auto", assume_unique)
    if size is None:
        return a1[_nonzero(mask, None)]
    if not assume_unique:
        # The padding unique() added repeats the first value: not part of the result.
        distinct = lax.sub(_scalar(a1.size + 1, dtypes.default_int()), _reductions.sum(lax.eq(a1, a1[0]), dtype=dtypes.default_int()))
        mask = _ufuncs.logical_and(mask, lax.lt(lax.iota(dtypes.default_int(), a1.size), distinct))
    count = _reductions.sum(mask, dtype=dtypes.default_int())
    picked = a1[_nonzero_sized(mask, size)]
    return _ufuncs.where(lax.lt(lax.iota(dtypes.default_int(), size), count), picked, fill)


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Array:
    """The sorted unique values of both arrays (flattened); ``size``/``fill_value`` as
    :func:`unique`'s."""
    a1, a2 = as_array(ar1, "union1d"), as_array(ar2, "union1d", 1)
    if size is None:
        _concrete(a1, "The error arose in union1d()")
        _concrete(a2, "The error arose in union1d()")
    else:
        size = _static_size(size, "The error arose in union1d()")
    out: Array = unique(_shape.concatenate([a1, a2], axis=None), size=size, fill_value=fill_value)
    return out


def setxor1d(
    ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None, fill_value: ArrayLike | None = None
) -> Array:
    """The sorted values in exactly one of the two arrays; ``size``/``fill_value`` as
    :func:`unique`'s (the fill defaults to the largest result value, as JAX's)."""
    a1, a2 = promote_dtypes("setxor1d", as_array(ar1, "setxor1d"), as_array(ar2, "setxor1d", 1))
    a1, a2 = _shape.ravel(a1), _shape.ravel(a2)
    if size is None:
        _concrete(a1, "The error arose in setxor1d()")
        _concrete(a2, "The error arose in setxor1d()")
        if not assume_unique:
            a1, a2 = unique(a1), unique(a2)
        aux: Array = lax.sort(_shape.concatenate([a1, a2]), dimension=0)
        if aux.size == 0:
            return aux
        edge = _creation.array([True])
        flag = _shape.concatenate([edge, lax.ne(aux[1:], aux[:-1]), edge])
        keep = _ufuncs.logical_and(flag[1:], flag[:-1])
        return aux[_nonzero(keep, None)]
    size = _static_size(size, "The error arose in setxor1d()")
    index = dtypes.default_int()
    if assume_unique:
        aux = lax.sort(_shape.concatenate([a1, a2]), dimension=0)
        flag = _shape.concatenate([_creation.array([aux.size > 0]), lax.ne(aux[1:], aux[:-1]), _creation.array([True])])
    else:
        u1, n1 = _unique(a1, 0, size=a1.size, return_true_size=True)
        u2, n2 = _unique(a2, 0, size=a2.size, return_true_size=True)
        joined = _creation.zeros(a1.size + a2.size, dtype=a1.dtype)
        joined = lax.dynamic_update_slice(joined, u1, (0,))
        joined = lax.dynamic_update_slice(joined, u2, (n1,))
        distinct = lax.add(n1, n2)
        valid = lax.lt(lax.iota(index, joined.shape[0] + 1), lax.add(distinct, _scalar(1, index)))
        _, aux = lax.sort((lax.bitwise_not(valid[1:]), joined), dimension=0, num_keys=2)
        edges = _shape.concatenate([_creation.array([aux.size > 0]), lax.ne(aux[1:], aux[:-1]), _creation.array([False])])
        # The last value is unlike the (invalid) one after it.
        flag = _ufuncs.logical_and(valid, edges.at[distinct].set(True))
    keep = _ufuncs.logical_and(flag[1:], flag[:-1])
    return _sized_result(aux, keep, size, fill_value)


def _sized_result(aux: Array, keep: Array, size: int, fill_value: ArrayLike | None) -> Array:
    """The first ``size`` entries of ``aux`` where ``keep``, padded with ``fill_value``
    (by default the smallest kept value, as JAX's set operations pad)."""
    index = dtypes.default_int()
    count = _reductions.sum(keep, dtype=index)
    if aux.size:
        values = aux.at[_nonzero_sized(keep, size, fill=aux.size)].get(mode="fill", fill_value=0)
    else:
        values = _full((size,), 0, aux.dtype)
    shown = lax.lt(lax.iota(index, size), count)
    if fill_value is None:
        values = _ufuncs.where(shown, values, _reductions.max(values))
        return _ufuncs.where(shown, values, _reductions.min(values))
    return _ufuncs.where(shown, values, _fill_like(values, fill_value))


def intersect1d(
    ar1: ArrayLike,
    ar2: ArrayLike,
    assume_unique: bool = False,
    return_indices: bool = False,
    *,
    size: int | None = None,
    fill_value: ArrayLike | None = None,
) -> Array | tuple[Array, Array, Array]:
    """The sorted values in both arrays (flattened), and with ``return_indices`` the
    indices of their first occurrences in each; ``size``/``fill_value`` as
    :func:`unique`'s (padded indices are out of range: the arrays' sizes)."""
    a1, a2 = promote_dtypes("intersect1d", as_array(ar1, "intersect1d"), as_array(ar2, "intersect1d", 1))
    a1, a2 = _shape.ravel(a1), _shape.ravel(a2)
    index = dtypes.default_int()
    if size is not None:
        return _intersect1d_sized(a1, a2, fill_value, assume_unique, _static_size(size, "The error arose in intersect1d()"), return_indices)
    ind1: Array | None = None
    ind2: Array | None = None
    if not assume_unique:
        if return_indices:
            a1, ind1 = unique(a1, return_index=True)
            a2, ind2 = unique(a2, return_index=True)
        else:
            a1, a2 = unique(a1), unique(a2)
    joined = _shape.concatenate([a1, a2])
    if return_indices:
        aux, order = lax.sort_key_val(joined, lax.iota(index, joined.shape[0]))
    else:
        aux, order = lax.sort(joined, dimension=0), None
    if aux.size == 0:
        empty = _full((0,), 0, index)
        return (aux, empty, empty) if return_indices else aux
    same = lax.eq(aux[1:], aux[:-1])
    hits = _nonzero(same, None)
    values = aux[:-1][hits]
    if not return_indices:
        return values
    assert order is not None
    i1 = order[:-1][hits]
    i2 = lax.sub(order[1:][hits], _scalar(a1.size, index))
    if ind1 is not None and ind2 is not None:
        i1, i2 = ind1[i1], ind2[i2]
    return values, i1, i2


def _intersect1d_sized(a1: Array, a2: Array, fill_value: ArrayLike | None, assume_unique: bool, size: int, return_indices: bool) -> Array | tuple[Array, Array, Array]:
    index = dtypes.default_int()
    if assume_unique:
        ind1, n1 = lax.iota(index, a1.size), _scalar(a1.size, index)
        ind2 = lax.iota(index, a2.size)
        joined = _shape.concatenate([a1, a2])
        aux, order = lax.sort((joined, lax.iota(index, joined.shape[0])), dimension=0, num_keys=1)
        valid = _creation.ones(joined.shape[0], dtype=bool)
    else:
        u1, ind1, n1 = _unique(a1, 0, size=a1.size, return_index=True, return_true_size=True, fill_value=0)
        u2, ind2, n2 = _unique(a2, 0, size=a2.size, return_index=True, return_true_size=True, fill_value=0)
        joined = _creation.zeros(a1.size + a2.size, dtype=a1.dtype)
        joined = lax.dynamic_update_slice(joined, u1, (0,))
        joined = lax.dynamic_update_slice(joined, u2, (n1,))
        valid = lax.lt(lax.iota(index, joined.shape[0]), lax.add(n1, n2))
        _, aux, order = lax.sort((lax.bitwise_not(valid), joined, lax.iota(index, joined.shape[0])), dimension=0, num_keys=2)
    if aux.size == 0:
        hits = _full((0,), 0, index)
        values = _full((size,), 0, aux.dtype)
        count = _scalar(0, index)
    else:
        same = _ufuncs.logical_and(lax.eq(aux[1:], aux[:-1]), valid[1:])
        count = _reductions.sum(same, dtype=index)
        hits = _nonzero_sized(same, size, fill=aux.size)
        values = aux.at[hits].get(mode="fill", fill_value=0)
    shown = lax.lt(lax.iota(index, size), count)
    if fill_value is None:
        values = _ufuncs.where(shown, values, _reductions.max(values))
        values = _ufuncs.where(shown, values, _reductions.min(values))
    else:
        values = _ufuncs.where(shown, values, _fill_like(values, fill_value))
    if not return_indices:
        return values
    i1 = order.at[hits].get(mode="fill", fill_value=a1.size)
    found = lax.lt(lax.iota(index, i1.shape[0]), count)  # (no entries when both are empty)
    i1 = _ufuncs.where(found, i1, a1.size)
    i2 = lax.sub(order.at[lax.add(hits, _scalar(1, index))].get(mode="fill", fill_value=a2.size), n1)
    i2 = _ufuncs.where(found, i2, a2.size)
    if not assume_unique:
        i1 = ind1.at[i1].get(mode="fill", fill_value=ind1.size)
        i2 = ind2.at[i2].get(mode="fill", fill_value=ind2.size)
    return values, i1, i2
