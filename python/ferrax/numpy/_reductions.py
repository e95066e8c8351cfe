"""Reductions: ``sum``, ``prod``, ``mean``, ``var``, ``std``, ``max``, ``min``, ``all``,
``any``, ``argmax`` and ``argmin``.

Dtypes are JAX's: ``sum`` and ``prod`` accumulate bools and integers narrower than 32
bits as int32 (uint32 for unsigned ones), float16 and bfloat16 in float32 (converted
back); ``mean`` of integers and bools is float32; ``argmax`` gives int32. Results are
strongly typed. ``keepdims`` re-inserts the reduced axes with ``broadcast_in_dim``.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ferrax import _ir, dtypes, lax
from ferrax._array import Array
from ferrax._core import ConcreteArray, aval_of, user_location
from ferrax._staging import JaxprTracer, params_once
from ferrax.numpy._promotion import ArrayLike, Axis, DTypeLike, as_array, convert
from ferrax.numpy import _promotion, _ufuncs
from ferrax.numpy._shape import insert_axes, normalize_axes, normalize_axis, ravel, reshape

__all__ = ["all", "any", "argmax", "argmin", "max", "mean", "min", "prod", "sum"]

_HALF = (np.dtype(np.float16), dtypes.bfloat16)
_F32 = np.dtype(np.float32)
# rank -> the params of reduce_sum over every axis (sum's staging fast path), converted once.
_sum_all_params: dict[int, _ir.Params] = {}


def _accumulator(d: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype ``sum`` and ``prod`` give values of dtype ``d``."""
    if d == np.bool_:
        return dtypes.default_int()
    if d.kind in "iu" and d.itemsize < dtypes.default_int().itemsize:
        return dtypes.default_int() if d.kind == "i" else dtypes.default_uint()
    return d


def _compute(d: np.dtype[Any]) -> np.dtype[Any]:
    """Half floats are accumulated in float32."""
    return np.dtype(np.float32) if d in _HALF else d


def _finish(out: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
    return insert_axes(out, sorted(axes)) if keepdims else out


def _masked(x: Array, where: ArrayLike | None, fill: Any) -> Array:
    """``x`` with ``fill`` where the mask ``where`` is false (``x`` if there is none)."""
    if where is None:
        return x
    return _ufuncs.where(where, x, convert(fill, x.dtype, False))


def _accumulate(
    name: str,
    reduce: Any,
    combine: Any,
    identity: int,
    a: ArrayLike,
    axis: Axis,
    dtype: DTypeLike | None,
    keepdims: bool,
    initial: ArrayLike | None,
    where: ArrayLike | None,
) -> Array:
    x = as_array(a, name)
    if x.dtype == np.bool_:
        # JAX's _cast_to_numeric: bools are summed (multiplied) as int32 first.
        x = convert(x, np.dtype(np.int32), aval_of(x).weak_type)
    axes = normalize_axes(axis, x.ndim, name)
    result = _accumulator(x.dtype) if dtype is None else dtypes.canonicalize(dtype, name)
    # Half floats are accumulated in float32 unless a dtype is asked for (JAX's).
    x = _masked(convert(x, _compute(result) if dtype is None else result, False), where, identity)
    if result == np.bool_:
        # A bool sum is "any", a bool product "all" (JAX's reduce_or/reduce_and).
        reduce, combine = {
            "sum": (lax.reduce_or, _ufuncs.bitwise_or),
            "prod": (lax.reduce_and, _ufuncs.bitwise_and),
        }[name]
    out = reduce(x, axes)
    if initial is not None:
        # JAX applies the initial value as its first operand: `add initial out`.
        out = combine(convert(initial, out.dtype, False), out)
    return convert(_finish(out, axes, keepdims), result, False)


def sum(
    a: ArrayLike,
    axis: Axis = None,
    dtype: DTypeLike | None = None,
    *,
    keepdims: bool = False,
    initial: ArrayLike | None = None,
    where: ArrayLike | None = None,
) -> Array:
    """The sum over ``axis`` (all axes by default): ``reduce_sum``, plus ``initial``,
    of the elements where ``where`` is true."""
    if (
        type(a) is JaxprTracer
        and a._trace.main.innermost_dynamic
        and axis is None
        and dtype is None
        and not keepdims
        and initial is None
        and where is None
    ):
        # A tracer of the innermost staging trace summed whole in its own strong dtype:
        # the one reduce_sum the general way records, recorded at once.
        trace = a._trace
        aval = a.aval
        d = aval.dtype
        if not aval.weak_type and (d == _F32 or (d.kind in "iuf" and _accumulator(d) == d and _compute(d) == d)):
            rank = len(aval.shape)
            params = _sum_all_params.get(rank) or params_once(
                _sum_all_params, rank, "reduce_sum", {"axes": tuple(range(rank)), "out_sharding": None}
            )
            return trace.record("reduce_sum", [a], params)
    return _accumulate("sum", lax.reduce_sum, _ufuncs.add, 0, a, axis, dtype, keepdims, initial, where)


def prod(
    a: ArrayLike,
    axis: Axis = None,
    dtype: DTypeLike | None = None,
    *,
    keepdims: bool = False,
    initial: ArrayLike | None = None,
    where: ArrayLike | None = None,
) -> Array:
    """The product over ``axis`` (all axes by default): ``reduce_prod``, times
    ``initial``, of the elements where ``where`` is true."""
    return _accumulate("prod", lax.reduce_prod, _ufuncs.multiply, 1, a, axis, dtype, keepdims, initial, where)


def mean(
    a: ArrayLike,
    axis: Axis = None,
    dtype: DTypeLike | None = None,
    *,
    keepdims: bool = False,
    where: ArrayLike | None = None,
) -> Array:
    """The mean over ``axis`` (all axes by default): the sum divided by the count.

    Integers and bools average as float32 (64-bit integers as float64); half floats are
    summed in float32. The mean of no elements is NaN.
    """
    x = as_array(a, "mean")
    axes = normalize_axes(axis, x.ndim, "mean")
    if dtype is not None:
        result = dtypes.canonicalize(dtype, "mean")
    else:
        result = dtypes.to_inexact(x.dtype)
    # As JAX's: half floats are summed in float32 unless a dtype is asked for (then
    # everything is computed in it).
    compute = _compute(result) if dtype is None else result
    # As JAX's: the count (a sum of the mask, first), the sum (with keepdims its axes
    # put back), their quotient, converted to the result dtype.
    normalizer: Any
    if where is None:
        count = 1
        for i in axes:
            count *= x.shape[i]
        normalizer = ConcreteArray(np.asarray(count, compute), False)
    else:
        mask = as_array(where, "mean")
        if mask.dtype != np.bool_:
            mask = _ufuncs.not_equal(mask, False)
        normalizer = sum(_promotion.broadcast_to(mask, x.shape), axes, dtype=compute, keepdims=keepdims)
    total = sum(x, axes, dtype=compute, keepdims=keepdims, where=where)
    return convert(lax.div(total, normalizer), result, False)


def _extremum(
    name: str,
    reduce: Any,
    combine: Any,
    a: ArrayLike,
    axis: Axis,
    keepdims: bool,
    initial: ArrayLike | None,
    where: ArrayLike | None,
) -> Array:
    x = as_array(a, name)
    axes = normalize_axes(axis, x.ndim, name)
    if initial is None:
        if where is not None:
            raise ValueError(
                f"{name}: the reduction has no identity, so a where= mask needs an initial= "
                f"value, at {user_location()}"
            )
        if builtins.any(x.shape[i] == 0 for i in axes):
            raise ValueError(
                f"{name}: reduction over an axis of size 0 has no identity (shape "
                f"{list(x.shape)}), at {user_location()}"
            )
        out = reduce(convert(x, x.dtype, False), axes)
        return _finish(out, axes, keepdims)
    init = convert(initial, x.dtype, False)
    if builtins.any(x.shape[i] == 0 for i in axes):
        # Nothing to reduce: the initial value, in the reduced shape.
        kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return _finish(_promotion.broadcast_to(init, kept), axes, keepdims)
    out = combine(init, reduce(_masked(convert(x, x.dtype, False), where, init), axes))
    return _finish(out, axes, keepdims)


def max(
    a: ArrayLike,
    axis: Axis = None,
    *,
    keepdims: bool = False,
    initial: ArrayLike | None = None,
    where: ArrayLike | None = None,
) -> Array:
    """The maximum over ``axis`` (all axes by default): ``reduce_max``; NaN propagates.
    With ``initial``, at least that (and defined over no elements); ``where`` masks
    elements out (it needs ``initial``)."""
    return _extremum("max", lax.reduce_max, _ufuncs.maximum, a, axis, keepdims, initial, where)


def min(
    a: ArrayLike,
    axis: Axis = None,
    *,
    keepdims: bool = False,
    initial: ArrayLike | None = None,
    where: ArrayLike | None = None,
) -> Array:
    """The minimum over ``axis`` (all axes by default): ``reduce_min``; NaN propagates.
    With ``initial``, at most that (and defined over no elements); ``where`` masks
    elements out (it needs ``initial``)."""
    return _extremum("min", lax.reduce_min, _ufuncs.minimum, a, axis, keepdims, initial, where)


def _truth(name: str, a: ArrayLike) -> Array:
    """The operand as bools (nonzero is true; NaN too), by ``convert_element_type`` as JAX."""
    x = as_array(a, name)
    return convert(x, np.dtype(np.bool_), False)


def all(a: ArrayLike, axis: Axis = None, *, keepdims: bool = False, where: ArrayLike | None = None) -> Array:
    """Whether every element over ``axis`` (where ``where`` is true) is true (nonzero):
    ``reduce_and`` of the operand as bools, as ``jax.numpy``; true for no elements."""
    x = _masked(_truth("all", a), where, True)
    axes = normalize_axes(axis, x.ndim, "all")
    return _finish(lax.reduce_and(x, axes), axes, keepdims)


def any(a: ArrayLike, axis: Axis = None, *, keepdims: bool = False, where: ArrayLike | None = None) -> Array:
    """Whether some element over ``axis`` (where ``where`` is true) is true (nonzero):
    ``reduce_or`` of the operand as bools, as ``jax.numpy``; false for no elements."""
    x = _masked(_truth("any", a), where, False)
    axes = normalize_axes(axis, x.ndim, "any")
    return _finish(lax.reduce_or(x, axes), axes, keepdims)


def _arg(name: str, reduce: Any, a: ArrayLike, axis: int | None, keepdims: bool) -> Array:
    x = as_array(a, name)
    ndim = x.ndim
    if axis is None:
        flat = ravel(x)
        dim = 0
    else:
        flat = x
        dim = normalize_axis(axis, ndim, name)
    if flat.shape[dim] == 0:
        raise ValueError(f"{name} of an empty sequence (shape {list(x.shape)}), at {user_location()}")
    out: Array = reduce(convert(flat, flat.dtype, False), dim, dtypes.default_int())
    if not keepdims:
        return out
    if axis is None:
        return reshape(out, (1,) * ndim)
    return insert_axes(out, (dim,))


def argmax(a: ArrayLike, axis: int | None = None, *, keepdims: bool = False) -> Array:
    """The index (int32) of the maximum along ``axis`` (of the flattened array by
    default); the first one on ties."""
    return _arg("argmax", lax.argmax, a, axis, keepdims)


def argmin(a: ArrayLike, axis: int | None = None, *, keepdims: bool = False) -> Array:
    """The index (int32) of the minimum along ``axis`` (of the flattened array by
    default); the first one on ties."""
    return _arg("argmin", lax.argmin, a, axis, keepdims)
