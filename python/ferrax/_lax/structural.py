"""Primitives that move data: broadcast, reshape, transpose, squeeze, expand_dims,
concatenate, slices, iota, and dot_general."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import Primitive
from ferrax._lax._operands import canonical_dtype, scalar

__all__ = [
    "broadcast_in_dim", "broadcasted_iota", "concatenate", "dot_general", "dynamic_slice",
    "dynamic_update_slice", "expand_dims", "iota", "reshape", "slice", "squeeze", "transpose",
]

DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]


def _ints(xs: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


broadcast_in_dim_p = Primitive.builtin("broadcast_in_dim")


@broadcast_in_dim_p.def_impl
def _broadcast_in_dim_impl(
    x: np.ndarray[Any, Any], *, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...], sharding: None = None
) -> Any:
    expanded = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        expanded[dst] = x.shape[src]
    return np.broadcast_to(x.reshape(expanded), shape)


reshape_p = Primitive.builtin("reshape")


@reshape_p.def_impl
def _reshape_impl(
    x: np.ndarray[Any, Any], *, new_sizes: tuple[int, ...], dimensions: tuple[int, ...] | None = None, sharding: None = None
) -> Any:
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return np.reshape(x, new_sizes)


transpose_p = Primitive.builtin("transpose")
transpose_p.def_impl(lambda x, *, permutation: np.transpose(x, permutation))

squeeze_p = Primitive.builtin("squeeze")
squeeze_p.def_impl(lambda x, *, dimensions: np.squeeze(x, tuple(dimensions)) if dimensions else x)

expand_dims_p = Primitive.builtin("expand_dims")
expand_dims_p.def_impl(lambda x, *, dimensions: np.expand_dims(x, tuple(dimensions)) if dimensions else x)

concatenate_p = Primitive.builtin("concatenate")
concatenate_p.def_impl(lambda *xs, dimension: np.concatenate(xs, axis=dimension))

slice_p = Primitive.builtin("slice")


@slice_p.def_impl
def _slice_impl(
    x: np.ndarray[Any, Any], *, start_indices: tuple[int, ...], limit_indices: tuple[int, ...], strides: tuple[int, ...] | None = None
) -> Any:
    steps = strides or (1,) * x.ndim
    return x[tuple(builtins.slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, steps))]


def _clamped_starts(shape: Sequence[int], sizes: Sequence[int], starts: Sequence[Any]) -> list[int]:
    return [int(np.clip(int(s), 0, d - z)) for s, d, z in zip(starts, shape, sizes)]


dynamic_slice_p = Primitive.builtin("dynamic_slice")


@dynamic_slice_p.def_impl
def _dynamic_slice_impl(x: np.ndarray[Any, Any], *starts: Any, slice_sizes: tuple[int, ...]) -> Any:
    begin = _clamped_starts(x.shape, slice_sizes, starts)
    return x[tuple(builtins.slice(b, b + z) for b, z in zip(begin, slice_sizes))]


dynamic_update_slice_p = Primitive.builtin("dynamic_update_slice")


@dynamic_update_slice_p.def_impl
def _dynamic_update_slice_impl(x: np.ndarray[Any, Any], update: np.ndarray[Any, Any], *starts: Any) -> Any:
    begin = _clamped_starts(x.shape, update.shape, starts)
    out = np.array(x, copy=True)
    out[tuple(builtins.slice(b, b + z) for b, z in zip(begin, update.shape))] = update
    return out


iota_p = Primitive.builtin("iota")


@iota_p.def_impl
def _iota_impl(*, dtype: np.dtype[Any], shape: tuple[int, ...], dimension: int, sharding: None = None) -> Any:
    idx = np.arange(shape[dimension], dtype=dtype)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(idx.reshape(view), shape)


dot_general_p = Primitive.builtin("dot_general")


@dot_general_p.def_impl
def _dot_general_impl(
    lhs: np.ndarray[Any, Any],
    rhs: np.ndarray[Any, Any],
    *,
    dimension_numbers: DotDimensionNumbers,
    precision: Any = None,
    preferred_element_type: Any = None,
    out_sharding: None = None,
) -> Any:
    (lc, rc), (lb, rb) = dimension_numbers
    lfree = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rfree = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    # Move batch dims first, then free, then contracting; contract with einsum.
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lsub = [""] * lhs.ndim
    rsub = [""] * rhs.ndim
    out: list[str] = []
    for a, b in zip(lb, rb):
        c = next(letters)
        lsub[a] = rsub[b] = c
        out.append(c)
    for a, b in zip(lc, rc):
        c = next(letters)
        lsub[a] = rsub[b] = c
    for a in lfree:
        lsub[a] = next(letters)
        out.append(lsub[a])
    for b in rfree:
        rsub[b] = next(letters)
        out.append(rsub[b])
    spec = f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}"
    result_type = np.result_type(lhs.dtype, rhs.dtype) if preferred_element_type is None else preferred_element_type
    return np.einsum(spec, lhs.astype(result_type), rhs.astype(result_type))


# ---------------------------------------------------------------------------- functions


def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Array:
    """``operand`` broadcast to ``shape``; its axis ``i`` becomes axis ``broadcast_dimensions[i]``."""
    return broadcast_in_dim_p.bind(  # type: ignore[no-any-return]
        scalar(operand), shape=_ints(shape), broadcast_dimensions=_ints(broadcast_dimensions)
    )


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Array:
    """``operand`` with shape ``new_sizes`` (after permuting by ``dimensions`` if given)."""
    return reshape_p.bind(  # type: ignore[no-any-return]
        scalar(operand),
        new_sizes=_ints(new_sizes),
        dimensions=None if dimensions is None else _ints(dimensions),
    )


def transpose(operand: Any, permutation: Sequence[int]) -> Array:
    """``operand`` with axes permuted: output axis ``i`` is input axis ``permutation[i]``."""
    return transpose_p.bind(scalar(operand), permutation=_ints(permutation))  # type: ignore[no-any-return]


def squeeze(array: Any, dimensions: Sequence[int]) -> Array:
    """``array`` without the given size-1 axes."""
    return squeeze_p.bind(scalar(array), dimensions=_ints(dimensions))  # type: ignore[no-any-return]


def expand_dims(array: Any, dimensions: Sequence[int]) -> Array:
    """``array`` with size-1 axes inserted at ``dimensions`` (positions in the result)."""
    return expand_dims_p.bind(scalar(array), dimensions=_ints(dimensions))  # type: ignore[no-any-return]


def concatenate(operands: Sequence[Any], dimension: int) -> Array:
    """The operands joined along ``dimension``."""
    return concatenate_p.bind(*[scalar(o) for o in operands], dimension=int(dimension))  # type: ignore[no-any-return]


def slice(
    operand: Any,
    start_indices: Sequence[int],
    limit_indices: Sequence[int],
    strides: Sequence[int] | None = None,
) -> Array:
    """The static slice ``operand[start:limit:stride, ...]``."""
    return slice_p.bind(  # type: ignore[no-any-return]
        scalar(operand),
        start_indices=_ints(start_indices),
        limit_indices=_ints(limit_indices),
        strides=None if strides is None else _ints(strides),
    )


def _index_operands(indices: Sequence[Any]) -> list[Any]:
    from ferrax._lax.elementwise import convert_element_type

    out = [scalar(i) for i in indices]
    # All indices share one integer dtype (int32 unless one is wider).
    from ferrax._core import aval_of

    dts = {aval_of(i).dtype for i in out}
    if len(dts) > 1:
        out = [convert_element_type(i, np.int32) for i in out]
    return out


def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Array:
    """A slice of ``slice_sizes`` starting at traced ``start_indices`` (clamped in range)."""
    return dynamic_slice_p.bind(  # type: ignore[no-any-return]
        scalar(operand), *_index_operands(start_indices), slice_sizes=_ints(slice_sizes)
    )


def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any]) -> Array:
    """``operand`` with ``update`` written at traced ``start_indices`` (clamped in range)."""
    return dynamic_update_slice_p.bind(  # type: ignore[no-any-return]
        scalar(operand), scalar(update), *_index_operands(start_indices)
    )


def iota(dtype: Any, size: int) -> Array:
    """``[0, 1, ..., size - 1]``."""
    return iota_p.bind(dtype=canonical_dtype(dtype), shape=(int(size),), dimension=0)  # type: ignore[no-any-return]


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Array:
    """An array of ``shape`` counting along ``dimension``."""
    return iota_p.bind(  # type: ignore[no-any-return]
        dtype=canonical_dtype(dtype), shape=_ints(shape), dimension=int(dimension)
    )


def dot_general(
    lhs: Any,
    rhs: Any,
    dimension_numbers: DotDimensionNumbers,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Array:
    """Generalized dot product: ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``."""
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((_ints(lc), _ints(rc)), (_ints(lb), _ints(rb)))
    params: dict[str, Any] = {"dimension_numbers": dn}
    if precision is not None:
        params["precision"] = str(precision)
    if preferred_element_type is not None:
        params["preferred_element_type"] = canonical_dtype(preferred_element_type)
    return dot_general_p.bind(scalar(lhs), scalar(rhs), **params)  # type: ignore[no-any-return]
