"""NumPy indexing as ``jax.numpy`` does it: ``x[index]``, ``x.at[index]`` updates,
``take`` and ``take_along_axis``.

An index is a tuple of ints, slices (static bounds, any step), ``None``, one ``...``,
integer arrays (NumPy, concrete or traced ferrax arrays; advanced indexing, broadcast
together) and boolean masks of concrete values. As in JAX, ``x[index]`` is staged as the
simplest primitives that express it, tried in this order:

1. ``slice`` (+ ``rev`` for negative steps, ``squeeze`` for ints, ``broadcast_in_dim``
   for ``None``) when every entry is a static int in range, a slice or ``None``;
2. ``dynamic_slice`` (+ the same) when the ints may be traced scalars or out of range
   (a start out of range is clamped) and slices have step 1 or -1;
3. otherwise ``gather``, whose dimension numbers this module computes, with NumPy's rule
   for where the advanced-index axes go: in place if the advanced indices (ints count
   as advanced indices here) are adjacent, first otherwise.

Out of range, a gather clamps (``mode="promise_in_bounds"``, the default for reads; also
``"clip"``) or gives ``fill_value`` (``mode="fill"``); updates (``scatter``) drop
out-of-range windows by default (``"fill"``/``"drop"``) or clamp them (``"clip"``).
``.at[index]`` always scatters, as in JAX. Negative indices count from the end; an
unsigned index is never negative.

A boolean mask must have a concrete value (its number of true elements is the result's
shape): a traced mask raises :class:`ferrax.errors.NonConcreteBooleanIndexError`.

Differences from JAX: ``x.at[idx].apply(f)`` calls ``f`` on the array of indexed values
(read with a gather, written back with a scatter), so ``f`` should be elementwise (JAX
calls it on each scalar), and applies it once per indexed element even if ``idx`` repeats
it (JAX applies it once per repetition); an update whose dtype cannot be cast safely is
converted silently (JAX warns that it will refuse it); concrete index arrays are
normalized (negatives counted from the end) on the host, so the jaxpr holds the
normalized constant instead of JAX's ``select_n`` over it.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ferrax import _core
from ferrax._jit import staged
from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import ConcreteArray, Tracer, aval_of, to_numpy, user_location
from ferrax.errors import NonConcreteBooleanIndexError
from ferrax.numpy._promotion import ArrayLike, as_array, broadcast_to, promote_dtypes
from ferrax.numpy._shape import insert_axes

__all__ = ["getitem", "index_apply", "index_update", "take", "take_along_axis"]

NDArray = np.ndarray[Any, Any]
Mode = str | lax.GatherScatterMode | None


class _Kind(enum.Enum):
    NONE = "none"
    ELLIPSIS = "ellipsis"
    SLICE = "slice"
    INT = "int"  # a static Python or NumPy integer
    BOOL = "bool"  # a boolean scalar or mask
    ARRAY = "array"  # an integer array (0-d ones included), NumPy or ferrax


class _Item(NamedTuple):
    """One entry of an index, with the axes of the operand it consumes."""

    value: Any
    kind: _Kind
    axes: tuple[int, ...]


# ------------------------------------------------------------------------------ parsing


def _is_static_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _kind(item: object) -> _Kind:
    if item is None:
        return _Kind.NONE
    if item is Ellipsis:
        return _Kind.ELLIPSIS
    if isinstance(item, slice):
        return _Kind.SLICE
    if _is_static_int(item):
        return _Kind.INT
    if isinstance(item, (bool, np.bool_)):
        return _Kind.BOOL
    if isinstance(item, (Array, np.ndarray)):
        dtype = aval_of(item).dtype
        if dtype == np.bool_:
            return _Kind.BOOL
        if dtypes.is_int(dtype):
            return _Kind.ARRAY
        raise TypeError(
            f"Indexer must have integer or boolean type, got indexer with type {dtype}, "
            f"at {user_location()}"
        )
    if isinstance(item, str):
        raise TypeError(f"ferrax does not support string indexing; got {item!r}, at {user_location()}")
    if isinstance(item, (list, tuple)):
        if not item:
            return _Kind.ARRAY
        try:
            value = np.asarray(item)
        except ValueError:
            value = np.asarray(0.0)
        if value.dtype == np.bool_:
            return _Kind.BOOL
        if dtypes.is_int(value.dtype):
            return _Kind.ARRAY
        raise TypeError(
            "Indexer must have integer or boolean type, got indexer with type "
            f"{value.dtype if value.dtype != object else 'object'}, at {user_location()}"
        )
    if isinstance(item, (float, complex, np.generic)):
        raise TypeError(
            "Indexer must have integer or boolean type, got indexer with type "
            f"{np.dtype(type(item))}, at {user_location()}"
        )
    raise IndexError(
        "only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and integer or "
        f"boolean arrays are valid indices. Got {item!r}, at {user_location()}"
    )


def _as_tuple(index: object) -> tuple[Any, ...]:
    if isinstance(index, tuple):
        return index
    if isinstance(index, list):
        # JAX refuses every non-tuple sequence (NumPy guesses).
        nested = builtins.any(
            isinstance(i, (list, tuple, slice)) or i is None or i is Ellipsis
            or (isinstance(i, (Array, np.ndarray)) and np.ndim(i) != 0)
            for i in index
        )
        hint = "arr[tuple(seq)]" if nested else "arr[array(seq)]"
        raise TypeError(
            "Using a non-tuple sequence for multidimensional indexing is not allowed; use "
            f"`{hint}` instead of `arr[seq]`, at {user_location()}"
        )
    return (index,)


def _parse(index: object, shape: tuple[int, ...]) -> list[_Item]:
    """The index's entries with the operand axes each consumes (``...`` consuming the
    axes no other entry does)."""
    items = _as_tuple(index)
    kinds = [_kind(i) for i in items]
    consumed: list[int] = []
    ellipses: list[int] = []
    for n, (item, kind) in enumerate(zip(items, kinds)):
        if kind in (_Kind.NONE, _Kind.ELLIPSIS):
            consumed.append(0)
            if kind is _Kind.ELLIPSIS:
                ellipses.append(n)
        elif kind is _Kind.BOOL:
            consumed.append(int(np.ndim(item)) if not isinstance(item, Array) else item.ndim)
        else:
            consumed.append(1)
    if len(ellipses) > 1:
        raise IndexError(f"an index can only have a single ellipsis ('...'), at {user_location()}")
    total = builtins.sum(consumed)
    if total > len(shape):
        raise IndexError(
            f"Too many indices: array is {len(shape)}-dimensional, but {total} were "
            f"indexed, at {user_location()}"
        )
    if ellipses:
        consumed[ellipses[0]] = len(shape) - total
    out, axis = [], 0
    for item, kind, n in zip(items, kinds, consumed):
        out.append(_Item(item, kind, tuple(range(axis, axis + n))))
        axis += n
    return out


def _static_bound(v: object) -> Any:
    """A slice bound's static value (``slice.indices`` refuses non-integers); raises
    :class:`_NotStatic` for a traced one."""
    if v is None:
        return None
    if _is_static_int(v):
        return int(v)  # type: ignore[call-overload]
    if isinstance(v, Tracer):
        raise _NotStatic
    if isinstance(v, (ConcreteArray, np.ndarray)) and np.ndim(v) == 0 and dtypes.is_int(aval_of(v).dtype):
        return int(to_numpy(v))
    return v


class _NotStatic(Exception):
    """A slice bound that is not a static integer."""


def _slice_indices(s: slice, size: int, position: int) -> tuple[int, int, int]:
    """``s.indices(size)``, with an ``IndexError`` for bounds that are not static."""
    try:
        bounds = slice(_static_bound(s.start), _static_bound(s.stop), _static_bound(s.step))
    except _NotStatic:
        raise IndexError(
            f"Slice entries must be static integers. Got {_show_slice(s)} at position "
            f"{position}; a traced start needs ferrax.lax.dynamic_slice (whose size is "
            f"static), at {user_location()}"
        ) from None
    if bounds.step == 0:
        raise ValueError(f"slice step cannot be zero, at {user_location()}")
    try:
        return bounds.indices(size)
    except TypeError as e:
        raise TypeError(f"{e}; got {_show_slice(s)}, at {user_location()}") from None


def _show_slice(s: slice) -> str:
    def show(v: object) -> str:
        return f"<traced {aval_of(v).str_short()}>" if isinstance(v, Tracer) else repr(v)

    return f"slice({show(s.start)}, {show(s.stop)}, {show(s.step)})"


def _expand_ellipsis(items: list[_Item], ndim: int) -> list[_Item]:
    """The items with ``...`` and the implicit trailing axes as full slices."""
    out: list[_Item] = []
    used = 0
    for it in items:
        used += len(it.axes)
        if it.kind is _Kind.ELLIPSIS:
            out.extend(_Item(slice(None), _Kind.SLICE, (a,)) for a in it.axes)
        else:
            out.append(it)
    out.extend(_Item(slice(None), _Kind.SLICE, (a,)) for a in range(used, ndim))
    return out


def _parse_mode(mode: Mode, what: str) -> lax.GatherScatterMode:
    parsed = lax.GatherScatterMode.from_any(mode)
    if parsed == lax.GatherScatterMode.ONE_HOT:
        raise NotImplementedError(f"{what}: mode 'one_hot' is not supported by ferrax, at {user_location()}")
    return parsed


def _empty_axis_error(axis: int) -> IndexError:
    return IndexError(f"index is out of bounds for axis {axis} with size 0, at {user_location()}")


# ------------------------------------------------------------------- slices (no gather)


def _static_slice(x: Array, items: list[_Item], mode: Mode) -> Array | None:
    """``x[items]`` with ``slice``, ``rev``, ``squeeze`` and ``broadcast_in_dim``; None if
    the index needs more (arrays, masks, traced or out-of-range ints, fill mode)."""
    parsed = lax.GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else _parse_mode(mode, "indexing")
    if parsed not in (lax.GatherScatterMode.PROMISE_IN_BOUNDS, lax.GatherScatterMode.CLIP):
        return None
    for it in items:
        if it.kind in (_Kind.ARRAY, _Kind.BOOL):
            return None
        if it.kind is _Kind.INT and parsed == lax.GatherScatterMode.PROMISE_IN_BOUNDS:
            size = x.shape[it.axes[0]]
            i = int(it.value)
            if i < 0:
                i += size
            if not 0 <= i < size:
                return None
        if it.kind is _Kind.SLICE:
            try:
                for b in (it.value.start, it.value.stop, it.value.step):
                    _static_bound(b)
            except _NotStatic:
                return None
    starts: list[int] = []
    limits: list[int] = []
    strides: list[int] = []
    rev_axes: list[int] = []
    squeeze_axes: list[int] = []
    new_axes: list[int] = []
    for position, it in enumerate(_expand_ellipsis(items, x.ndim)):
        if it.kind is _Kind.NONE:
            new_axes.append(len(starts) - len(squeeze_axes) + len(new_axes))
        elif it.kind is _Kind.INT:
            (axis,) = it.axes
            size = x.shape[axis]
            if size == 0:
                raise _empty_axis_error(axis)
            i = int(it.value)
            if i < 0 and not isinstance(it.value, np.unsignedinteger):
                i += size
            i = builtins.min(builtins.max(i, 0), size - 1)
            starts.append(i)
            limits.append(i + 1)
            strides.append(1)
            squeeze_axes.append(axis)
        else:
            (axis,) = it.axes
            size = x.shape[axis]
            start, stop, step = _slice_indices(it.value, size, position)
            if step < 0:
                first = builtins.min(size, stop + 1 + builtins.abs(start - stop - 1) % -step)
                starts.append(first)
                limits.append(builtins.max(first, start + 1))
                strides.append(-step)
                rev_axes.append(axis)
            else:
                starts.append(start)
                limits.append(builtins.max(start, stop))
                strides.append(step)
    y = x
    unit = builtins.all(s == 1 for s in strides)
    if not (unit and builtins.all((s, l) == (0, d) for s, l, d in zip(starts, limits, x.shape))):
        y = lax.slice(y, starts, limits, None if unit else strides)
    if rev_axes:
        y = lax.rev(y, rev_axes)
    if squeeze_axes:
        y = lax.squeeze(y, squeeze_axes)
    return insert_axes(y, new_axes)


def _dynamic_slice(x: Array, items: list[_Item], mode: Mode) -> Array | None:
    """``x[items]`` with ``dynamic_slice`` (ints may be traced scalars, or out of range:
    clamped); None if the index needs a gather."""
    if mode is not None and _parse_mode(mode, "indexing") not in (
        lax.GatherScatterMode.PROMISE_IN_BOUNDS,
        lax.GatherScatterMode.CLIP,
    ):
        return None
    for it in items:
        if it.kind is _Kind.BOOL:
            return None
        if it.kind is _Kind.SLICE:
            try:
                step = _static_bound(it.value.step)
                _static_bound(it.value.start)
                _static_bound(it.value.stop)
            except _NotStatic:
                return None
            if step not in (None, 1, -1):
                return None
        if it.kind is _Kind.ARRAY and (not isinstance(it.value, (Array, np.ndarray)) or np.ndim(it.value) != 0):
            return None
    starts: list[Any] = []
    sizes: list[int] = []
    rev_axes: list[int] = []
    squeeze_axes: list[int] = []
    new_axes: list[int] = []
    for position, it in enumerate(_expand_ellipsis(items, x.ndim)):
        if it.kind is _Kind.NONE:
            new_axes.append(len(starts) - len(squeeze_axes) + len(new_axes))
        elif it.kind in (_Kind.INT, _Kind.ARRAY):
            (axis,) = it.axes
            if x.shape[axis] == 0:
                raise _empty_axis_error(axis)
            starts.append(_scalar_start(it.value))
            sizes.append(1)
            squeeze_axes.append(axis)
        else:
            (axis,) = it.axes
            start, stop, step = _slice_indices(it.value, x.shape[axis], position)
            if step < 0:
                first = stop + 1
                starts.append(first)
                sizes.append(builtins.max(0, start + 1 - first))
                rev_axes.append(axis)
            else:
                starts.append(start)
                sizes.append(builtins.max(0, stop - start))
    if len(starts) > 1:
        starts = [_as_index_dtype(s) for s in starts]
    # Reached only with a traced or out-of-range index (the static forms are slices).
    y = lax.dynamic_slice(x, starts, sizes)
    if rev_axes:
        y = lax.rev(y, rev_axes)
    if squeeze_axes:
        y = lax.squeeze(y, squeeze_axes)
    return insert_axes(y, new_axes)


def _scalar_start(v: Any) -> Any:
    """A scalar index as a start for ``dynamic_slice``: a traced one strongly typed."""
    if isinstance(v, Tracer):
        aval = v.aval
        if aval.weak_type:
            return lax.convert_element_type(v, aval.dtype)
        return v
    if isinstance(v, (ConcreteArray, np.ndarray)):
        return to_numpy(v)[()]
    return v


def _as_index_dtype(v: Any) -> Any:
    """A start index as an int32 (``dynamic_slice`` wants one dtype for all). A constant
    becomes an int32 array, as in JAX: ``dynamic_slice`` then normalizes it as it does a
    traced index (``lt``, ``add``, ``select_n``), where it takes Python ints as they are."""
    if isinstance(v, Tracer):
        return lax.convert_element_type(v, np.int32)
    return ConcreteArray(np.asarray(to_numpy(v), dtype=np.int32), False)


# ------------------------------------------------------------------------------ gather


class _GatherPlan(NamedTuple):
    """How ``x[index]`` is a gather (and ``x.at[index]`` a scatter)."""

    slice_shape: tuple[int, ...]  # the shape of x[index], new axes included
    gather_slice_shape: tuple[int, ...]  # slice_sizes
    indices: Any  # NumPy array or traced Array, index vectors on the last axis
    dnums: lax.GatherDimensionNumbers
    unique_indices: bool
    indices_are_sorted: bool
    reversed_dims: tuple[int, ...]  # axes of the gather's result to reverse
    newaxis_dims: tuple[int, ...]  # axes of x[index] that are None entries
    scalar_bool_dims: tuple[int, ...]  # axes inserted in x for scalar boolean entries


def _index_dtype(shape: Sequence[int]) -> np.dtype[Any]:
    big = builtins.any(d >= 2**31 for d in shape)
    return np.dtype(np.int64) if big else np.dtype(np.int32)


def _expand_masks(items: list[_Item], shape: tuple[int, ...]) -> list[_Item]:
    """Boolean masks replaced by the integer arrays of their true positions (one per
    axis they cover); boolean scalars stay."""
    out: list[_Item] = []
    for position, it in enumerate(items):
        if it.kind is not _Kind.BOOL:
            out.append(it)
            continue
        if isinstance(it.value, Tracer):
            raise NonConcreteBooleanIndexError(
                f"Array boolean indices must be concrete; got {it.value.aval.str_short()}: the "
                "number of true elements is the shape of the result, so the mask's value must "
                "be known while tracing. Use ferrax.numpy.where(mask, x, 0) (or a static "
                f"mask), at {user_location()}"
            )
        mask = np.asarray(to_numpy(it.value) if isinstance(it.value, Array) else it.value, dtype=bool)
        if mask.ndim == 0:
            out.append(_Item(bool(mask), _Kind.BOOL, ()))
            continue
        expected = [shape[a] for a in it.axes]
        if not builtins.all(s in (0, e) for s, e in zip(mask.shape, expected)):
            raise IndexError(
                "boolean index did not match shape of indexed array in index "
                f"{position}: got {mask.shape}, expected {expected}, at {user_location()}"
            )
        for positions, axis in zip(np.nonzero(mask), it.axes):
            out.append(_Item(positions.astype(np.int32), _Kind.ARRAY, (axis,)))
    return out


def _normalized(value: Any, size: int, with_where: bool = False) -> Any:
    """An integer index (static, NumPy or traced) with negative entries counted from
    the end (unsigned ones are left as they are). ``with_where``: a traced index is
    selected with ``jnp.where`` (a nested jit, as JAX's ``take`` does), not ``select_n``."""
    if _is_static_int(value):
        i = int(value)
        return i + size if i < 0 and not isinstance(value, np.unsignedinteger) else i
    if isinstance(value, Tracer):
        if value.dtype.kind == "u":
            return value
        if with_where:
            from ferrax.numpy._ufuncs import where

            negative = lax.lt(value, 0)
            return where(negative, lax.add(value, size), value)
        return lax.select_n(lax.lt(value, 0), value, lax.add(value, size))
    arr = np.asarray(to_numpy(value) if isinstance(value, Array) else value)
    if arr.dtype.kind == "u":
        return arr
    if arr.size == 0 and arr.dtype.kind not in "iu":
        arr = arr.astype(np.int32)
    return np.where(arr < 0, arr + size, arr)


def _convert_index(value: Any, dtype: np.dtype[Any]) -> Any:
    if isinstance(value, Tracer):
        return lax.convert_element_type(value, dtype)
    return np.asarray(value).astype(dtype)


def _broadcast_index(value: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(value, Tracer):
        return broadcast_to(value, shape)
    return np.broadcast_to(value, shape)


def _gather_plan(x_shape: tuple[int, ...], items: list[_Item]) -> _GatherPlan:
    """The gather (dimension numbers, indices, shapes) computing ``x[items]``; ``items``
    have their masks expanded."""
    for position, it in enumerate(items):
        if it.kind is _Kind.SLICE:
            _slice_indices(it.value, 1, position)  # static bounds, or IndexError
    items = [
        _Item(np.asarray(it.value), it.kind, it.axes) if isinstance(it.value, (list, tuple)) else it
        for it in items
    ]
    advanced_positions = [n for n, it in enumerate(items) if it.kind in (_Kind.ARRAY, _Kind.INT)]
    contiguous = builtins.all(b - a == 1 for a, b in zip(advanced_positions, advanced_positions[1:]))
    items = _expand_ellipsis(items, len(x_shape))
    # Scalar booleans: each inserts an axis of size 1 indexed by [0] (True) or [] (False),
    # at its position in the index (as JAX counts it: None entries included).
    scalar_bool_dims = tuple(n for n, it in enumerate(items) if it.kind is _Kind.BOOL)
    rank = len(x_shape) + len(scalar_bool_dims)
    for n in scalar_bool_dims:
        if n >= rank:
            raise ValueError(
                f"axis {n} is out of bounds for array of dimension {rank}: a boolean scalar "
                f"index after new axes (None) is not supported (as in JAX), at {user_location()}"
            )
    shape = list(x_shape)
    current = 0
    renumbered: list[_Item] = []
    for n, it in enumerate(items):
        if it.kind is _Kind.BOOL:
            shape.insert(n, 1)
            renumbered.append(_Item(np.arange(int(it.value), dtype=np.int32), _Kind.ARRAY, (current,)))
            current += 1
        else:
            renumbered.append(_Item(it.value, it.kind, tuple(range(current, current + len(it.axes)))))
            current += len(it.axes)
    items = [
        _Item(_normalized(it.value, shape[it.axes[0]]), it.kind, it.axes)
        if it.kind in (_Kind.INT, _Kind.ARRAY)
        else it
        for it in renumbered
    ]
    index_dtype = _index_dtype(shape)

    advanced: list[Any] = []
    advanced_at: list[int] = []  # positions in items
    x_advanced_axes: list[int] = []
    if builtins.any(it.kind is _Kind.ARRAY and np.ndim(it.value) > 0 for it in items):
        j = 0
        for n, it in enumerate(items):
            if it.kind is _Kind.NONE:
                continue
            if it.kind in (_Kind.ARRAY, _Kind.INT):
                advanced.append(it.value)
                advanced_at.append(n)
                x_advanced_axes.append(j)
            j += 1

    x_axis = 0
    y_axis = 0  # axis of the result before collapsing
    collapsed_y_axis = 0
    offset_dims: list[int] = []
    collapsed_slice_dims: list[int] = []
    start_index_map: list[int] = []
    pieces: list[tuple[Any, int]] = []  # index arrays and the first axis they occupy
    indices_shape: list[int] = []
    slice_shape: list[int] = []
    newaxis_dims: list[int] = []
    reversed_dims: list[int] = []
    gather_slice_shape: list[int] = []

    for n, it in enumerate(items):
        if advanced and ((contiguous and n == advanced_at[0]) or (not contiguous and n == 0)):
            shapes = [a.shape if isinstance(a, Array) else np.shape(a) for a in advanced]
            try:
                bshape = np.broadcast_shapes(*shapes)
            except ValueError:
                raise ValueError(
                    f"Incompatible shapes for broadcasting: the index arrays have shapes "
                    f"{shapes}, at {user_location()}"
                ) from None
            start = len(indices_shape)
            pieces.extend((_broadcast_index(_convert_index(a, index_dtype), bshape), start) for a in advanced)
            indices_shape.extend(bshape)
            start_index_map.extend(x_advanced_axes)
            collapsed_slice_dims.extend(x_advanced_axes)
            slice_shape.extend(bshape)
            y_axis += len(bshape)
            collapsed_y_axis += len(bshape)
        if n in advanced_at:
            x_axis += 1
            gather_slice_shape.append(1)
            continue
        if it.kind in (_Kind.INT, _Kind.ARRAY):  # a scalar
            if shape[x_axis] == 0:
                raise _empty_axis_error(x_axis)
            pieces.append((_convert_index(it.value, index_dtype), len(indices_shape)))
            collapsed_slice_dims.append(x_axis)
            gather_slice_shape.append(1)
            start_index_map.append(x_axis)
            x_axis += 1
        elif it.kind is _Kind.NONE:
            slice_shape.append(1)
            newaxis_dims.append(y_axis)
            y_axis += 1
        else:
            start, stop, step = _slice_indices(it.value, shape[x_axis], n)
            size = len(range(start, stop, step))
            slice_shape.append(size)
            if step == 1:
                if size != shape[x_axis]:
                    pieces.append((np.asarray(start, dtype=index_dtype), len(indices_shape)))
                    start_index_map.append(x_axis)
                gather_slice_shape.append(size)
                offset_dims.append(collapsed_y_axis)
            else:
                positions = np.arange(size, dtype=index_dtype) * step + start
                if step < 0:
                    reversed_dims.append(collapsed_y_axis)
                    positions = positions[::-1].copy()
                gather_slice_shape.append(1)
                pieces.append((positions, len(indices_shape)))
                start_index_map.append(x_axis)
                indices_shape.append(size)
                collapsed_slice_dims.append(x_axis)
            collapsed_y_axis += 1
            y_axis += 1
            x_axis += 1

    indices = _assemble_indices(pieces, indices_shape, index_dtype)
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(offset_dims),
        collapsed_slice_dims=tuple(sorted(collapsed_slice_dims)),
        start_index_map=tuple(start_index_map),
    )
    return _GatherPlan(
        slice_shape=tuple(slice_shape),
        gather_slice_shape=tuple(gather_slice_shape),
        indices=indices,
        dnums=dnums,
        unique_indices=not advanced,
        indices_are_sorted=not advanced,
        reversed_dims=tuple(reversed_dims),
        newaxis_dims=tuple(newaxis_dims),
        scalar_bool_dims=scalar_bool_dims,
    )


def _assemble_indices(pieces: list[tuple[Any, int]], shape: list[int], dtype: np.dtype[Any]) -> Any:
    """The gather's indices: each piece broadcast over ``shape`` (its axes from its start
    axis on), stacked along a new last axis. NumPy when no piece is traced."""
    if not pieces:
        return np.zeros((0,), dtype=dtype)
    traced = builtins.any(isinstance(p, Tracer) for p, _ in pieces)
    if len(pieces) == 1:
        (p, _), = pieces
        if traced:
            return lax.broadcast_in_dim(p, (*p.shape, 1), tuple(range(p.ndim)))
        if np.ndim(p) == 0 and _core._state.dynamic:
            # One static index, staged as JAX stages it: a literal broadcast to (1,).
            return lax.broadcast_in_dim(np.asarray(p, dtype=dtype), (1,), ())
        return np.asarray(p)[..., None]
    full = (*shape, 1)

    def on_host(p: Any, start: int) -> NDArray:
        p = np.asarray(p)
        view = [1] * len(full)
        view[start : start + p.ndim] = p.shape
        return np.broadcast_to(p.reshape(view), full)

    if not traced:
        return np.concatenate([on_host(p, start) for p, start in pieces], axis=-1)
    # Static pieces are broadcast on the host (constants), traced ones staged.
    cols = [
        lax.broadcast_in_dim(p, full, tuple(range(start, start + p.ndim)))
        if isinstance(p, Tracer)
        else on_host(p, start)
        for p, start in pieces
    ]
    return lax.concatenate(cols, len(shape))


def _fill_value(fill_value: Any) -> Any:
    if fill_value is None:
        return None
    if isinstance(fill_value, Tracer):
        raise fill_value._concrete_error("the fill_value argument to indexed get()")
    if np.ndim(fill_value) != 0:
        raise ValueError(f"fill_value argument to indexed get() must be a scalar, at {user_location()}")
    if isinstance(fill_value, (np.ndarray, np.generic, Array)):
        return np.asarray(fill_value).item()
    return fill_value


def _zeros(x: Array, shape: tuple[int, ...]) -> Array:
    zero = ConcreteArray(np.zeros((), dtype=x.dtype), x.weak_type)
    return lax.broadcast_in_dim(zero, shape, ())


def getitem(
    a: ArrayLike,
    index: Any,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: Mode = None,
    fill_value: Any = None,
) -> Array:
    """``a[index]`` (also ``a.at[index].get(...)``), as ``jax.numpy`` computes it: see
    the module's notes. ``mode`` and ``fill_value`` say what out-of-range indices give."""
    x = as_array(a, "indexing")
    items = _parse(index, x.shape)
    if builtins.all(it.kind is not _Kind.BOOL for it in items):
        sliced = _static_slice(x, items, mode)
        if sliced is None:
            sliced = _dynamic_slice(x, items, mode)
        if sliced is not None:
            return sliced
    fill = _fill_value(fill_value)
    plan = _gather_plan(x.shape, _expand_masks(items, x.shape))
    y = insert_axes(x, plan.scalar_bool_dims) if plan.scalar_bool_dims else x
    if 0 in plan.slice_shape:
        return _zeros(x, plan.slice_shape)
    if 0 not in np.shape(plan.indices):
        y = lax.gather(
            y,
            plan.indices,
            plan.dnums,
            plan.gather_slice_shape,
            unique_indices=unique_indices or plan.unique_indices,
            indices_are_sorted=indices_are_sorted or plan.indices_are_sorted,
            mode=mode,
            fill_value=fill,
        )
    if plan.reversed_dims:
        y = lax.rev(y, plan.reversed_dims)
    return insert_axes(y, plan.newaxis_dims)


# ----------------------------------------------------------------------------- scatter

_SCATTERS: dict[str, Callable[..., Array]] = {
    "set": lax.scatter,
    "add": lax.scatter_add,
    "subtract": lax.scatter_sub,
    "multiply": lax.scatter_mul,
    "min": lax.scatter_min,
    "max": lax.scatter_max,
}


def _update_value(x: Array, value: Any, name: str) -> Any:
    """The update as an array (Python scalars stay scalars, converted on the host by the
    promotion): a Python int that fits ``x``'s integer dtype takes it."""
    if isinstance(value, (list, tuple)):
        from ferrax.numpy._creation import asarray

        return asarray(value)
    if isinstance(value, int) and not isinstance(value, bool) and dtypes.is_int(x.dtype):
        info = np.iinfo(x.dtype)
        if info.min <= value <= info.max:
            return ConcreteArray(np.asarray(value, dtype=x.dtype), False)
        # As JAX: a weakly typed array of the default int, converted (wrapping) to x's.
        return as_array(value, name)
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        return value
    return as_array(value, name)


def index_update(
    a: ArrayLike,
    index: Any,
    value: Any,
    op: str = "set",
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: Mode = None,
) -> Array:
    """``a`` with ``a[index]`` replaced by (``op="set"``) or combined with (``"add"``,
    ``"subtract"``, ``"multiply"``, ``"min"``, ``"max"``) ``value``, broadcast to the
    shape of ``a[index]``: what ``a.at[index].set(value)`` and friends do. Updates out of
    range are dropped (``mode="fill"``, the default) or clamped (``"clip"``)."""
    scatter = _SCATTERS.get(op)
    if scatter is None:
        raise ValueError(f"index_update: op must be one of {sorted(_SCATTERS)}, got {op!r}")
    name = f".at[...].{op}"
    x = as_array(a, name)
    y = _update_value(x, value, name)
    items = _expand_masks(_parse(index, x.shape), x.shape)
    plan = _gather_plan(x.shape, items)
    if 0 in plan.slice_shape:
        return x
    xp, yp = promote_dtypes(name, x, y)
    xp, yp = as_array(xp, name), as_array(yp, name)
    yp = _broadcast_update(yp, plan.slice_shape, name)
    if plan.newaxis_dims:
        yp = lax.squeeze(yp, plan.newaxis_dims)
    if plan.reversed_dims:
        yp = lax.rev(yp, plan.reversed_dims)
    if plan.scalar_bool_dims:
        xp = insert_axes(xp, plan.scalar_bool_dims)
    dnums = lax.ScatterDimensionNumbers(
        update_window_dims=plan.dnums.offset_dims,
        inserted_window_dims=plan.dnums.collapsed_slice_dims,
        scatter_dims_to_operand_dims=plan.dnums.start_index_map,
    )
    out = scatter(
        xp,
        plan.indices,
        yp,
        dnums,
        indices_are_sorted=indices_are_sorted or plan.indices_are_sorted,
        unique_indices=unique_indices or plan.unique_indices,
        mode=mode,
    )
    if plan.scalar_bool_dims:
        out = lax.squeeze(out, plan.scalar_bool_dims)
    return lax.convert_element_type(out, x.dtype, x.weak_type)


def _broadcast_update(y: Array, shape: tuple[int, ...], name: str) -> Array:
    lead = len(shape) - y.ndim
    if lead < 0 or builtins.any(s not in (1, d) for s, d in zip(y.shape, shape[lead:])):
        from ferrax.numpy._promotion import shape_error

        raise shape_error(
            f"{name}: a value of shape {list(y.shape)} cannot be broadcast to the indexed "
            f"region of shape {list(shape)}"
        )
    return broadcast_to(y, shape)


def index_apply(
    a: ArrayLike,
    index: Any,
    func: Callable[[Array], Any],
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: Mode = None,
) -> Array:
    """``a`` with ``func`` applied to the elements ``a[index]`` (``a.at[index].apply``):
    read with a gather, written back with a scatter (``func`` is applied once per
    element, even where ``index`` repeats one)."""
    x = as_array(a, ".at[...].apply")
    read_mode = "clip" if mode is not None and lax.GatherScatterMode.from_any(mode) == lax.GatherScatterMode.CLIP else None
    current = getitem(x, index, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=read_mode)
    return index_update(
        x, index, func(current), "set", indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode
    )


# ------------------------------------------------------------------- take and friends


def _canonical_axis(axis: int, ndim: int, what: str) -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what}: axis {axis} is out of bounds for an array of rank {ndim}, at {user_location()}")
    return axis % ndim


def take(
    a: ArrayLike,
    indices: ArrayLike,
    axis: int | None = None,
    out: None = None,
    mode: str | None = None,
    unique_indices: bool = False,
    indices_are_sorted: bool = False,
    fill_value: Any = None,
) -> Array:
    """The elements of ``a`` at ``indices`` along ``axis`` (of the flattened array if
    None), as ``jax.numpy.take``: out-of-range indices give ``fill_value`` (NaN for
    floats, ...) by default (``mode="fill"``), are clamped (``"clip"``) or wrap around
    (``"wrap"``); negative indices count from the end."""
    return _take(
        a, indices, axis, out, mode, unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
        fill_value=fill_value,
    )


@staged(static_argnames=("axis", "mode", "unique_indices", "indices_are_sorted", "fill_value"))
def _take(
    a: ArrayLike, indices: ArrayLike, axis: int | None, out: None, mode: str | None, *, unique_indices: bool,
    indices_are_sorted: bool, fill_value: Any,
) -> Array:
    if out is not None:
        raise NotImplementedError("The 'out' argument to take is not supported.")
    x = as_array(a, "take")
    idx = as_array(indices, "take", 1)
    if not dtypes.is_int(idx.dtype):
        raise TypeError(f"take: indices must be integers, got {idx.dtype}, at {user_location()}")
    if axis is None:
        from ferrax.numpy._shape import ravel

        x = ravel(x)
        ax = 0
    else:
        ax = _canonical_axis(axis, x.ndim, "take")
    size = x.shape[ax]
    from ferrax.numpy._ufuncs import remainder

    if mode is None or mode == "fill":
        gather_mode: Mode = "fill"
        idx = as_array(_normalized(idx if isinstance(idx, Tracer) else to_numpy(idx), size, True), "take")
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to take is not supported.")
    elif mode == "wrap":
        idx = remainder(idx, ConcreteArray(np.asarray(size, dtype=idx.dtype)))
        gather_mode = "promise_in_bounds"
    elif mode == "clip":
        gather_mode = "clip"
    else:
        raise ValueError(f"Invalid mode '{mode}' for take, at {user_location()}")
    shape = list(x.shape)
    if shape[ax] == 0:
        if idx.size != 0:
            raise IndexError(f"Cannot do a non-empty take() from an empty axis, at {user_location()}")
        return x
    if idx.size == 0:
        return _zeros(x, (*shape[:ax], *idx.shape, *shape[ax + 1 :]))
    nd = idx.ndim
    shape[ax] = 1
    dnums = lax.GatherDimensionNumbers(
        offset_dims=(*range(ax), *range(ax + nd, x.ndim + nd - 1)),
        collapsed_slice_dims=(ax,),
        start_index_map=(ax,),
    )
    gather_idx = (
        lax.broadcast_in_dim(idx, (*idx.shape, 1), tuple(range(nd)))
        if isinstance(idx, Tracer)
        else to_numpy(idx)[..., None]
    )
    return lax.gather(
        x,
        gather_idx,
        dnums,
        tuple(shape),
        mode=gather_mode,
        unique_indices=unique_indices,
        indices_are_sorted=indices_are_sorted,
        fill_value=_fill_value(fill_value),
    )


@staged(static_argnames=("axis", "mode", "fill_value"))
def take_along_axis(
    arr: ArrayLike,
    indices: ArrayLike,
    axis: int | None = -1,
    mode: str | lax.GatherScatterMode | None = None,
    fill_value: Any = None,
) -> Array:
    """``arr``'s elements at ``indices`` along ``axis`` (``indices`` has ``arr``'s rank
    and broadcasts against it on the other axes), as ``jax.numpy.take_along_axis``:
    out-of-range indices give ``fill_value`` by default (``mode="fill"``)."""
    x = as_array(arr, "take_along_axis")
    idx = as_array(indices, "take_along_axis", 1)
    if not dtypes.is_int(idx.dtype):
        raise TypeError(f"take_along_axis indices must be of integer type, got {idx.dtype}, at {user_location()}")
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(
                f"take_along_axis indices must be 1D if axis=None, got shape {idx.shape}, at {user_location()}"
            )
        from ferrax.numpy._shape import ravel

        x = ravel(x)
        axis = 0
    rank = x.ndim
    if rank != idx.ndim:
        raise ValueError(
            f"indices and arr must have the same number of dimensions; {idx.ndim} vs. {rank}, "
            f"at {user_location()}"
        )
    ax = _canonical_axis(axis, rank, "take_along_axis")
    idx_shape = idx.shape
    arr_shape = tuple(1 if i == ax else d for i, d in enumerate(x.shape))
    try:
        out_shape = np.broadcast_shapes(idx_shape, arr_shape)
    except ValueError:
        raise ValueError(
            f"take_along_axis: indices of shape {idx_shape} do not broadcast against an array of "
            f"shape {x.shape} off axis {ax}, at {user_location()}"
        ) from None
    size = x.shape[ax]
    if size == 0:
        return _zeros(x, tuple(out_shape))
    wrap = mode != "promise_in_bounds"
    if wrap:
        idx = as_array(_normalized(idx if isinstance(idx, Tracer) else to_numpy(idx), size), "take_along_axis")
    index_dims = [i for i, d in enumerate(idx_shape) if i == ax or d != 1]
    gather_shape = (*(out_shape[i] for i in index_dims), 1)
    gather_idx = lax.reshape(idx, gather_shape) if isinstance(idx, Tracer) else to_numpy(idx).reshape(gather_shape)
    slice_sizes: list[int] = []
    offset_dims: list[int] = []
    start_index_map: list[int] = []
    collapsed: list[int] = []
    operand_batching: list[int] = []
    indices_batching: list[int] = []
    squeeze: list[int] = []
    new_i = 0
    j = 0
    for i in range(rank):
        if i == ax:
            slice_sizes.append(1)
            start_index_map.append(new_i)
            collapsed.append(new_i)
            new_i += 1
            j += 1
        elif idx_shape[i] == 1:
            offset_dims.append(i)
            slice_sizes.append(arr_shape[i])
            new_i += 1
        elif arr_shape[i] == 1:
            squeeze.append(i)
            j += 1
        else:
            slice_sizes.append(0 if arr_shape[i] == 0 else 1)
            operand_batching.append(new_i)
            indices_batching.append(j)
            new_i += 1
            j += 1
    if squeeze:
        x = lax.squeeze(x, squeeze)
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(offset_dims),
        collapsed_slice_dims=tuple(collapsed),
        start_index_map=tuple(start_index_map),
        operand_batching_dims=tuple(operand_batching),
        start_indices_batching_dims=tuple(indices_batching),
    )
    return lax.gather(
        x, gather_idx, dnums, tuple(slice_sizes), mode="fill" if mode is None else mode, fill_value=_fill_value(fill_value)
    )
