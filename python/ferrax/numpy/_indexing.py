"""Basic indexing (``x[i]``, ``x[1:3]``, ``x[::2]``, ``x[:, None]``, ``x[..., -1]``,
``x[i]`` with a traced ``i``) and functional updates (``x.at[i].set(v)``, ``.add(v)``).

There is no gather or scatter primitive, so indexing is what ``slice``,
``dynamic_slice``, ``squeeze``, ``broadcast_in_dim`` and ``dynamic_update_slice`` can
express:

* an int picks an element: ``slice`` + ``squeeze`` (static ints, normalized and checked
  against the size, as JAX does for Python ints), ``dynamic_slice`` + ``squeeze`` for a
  traced integer scalar (normalized with ``select_n``; out of range, it is clamped as
  ``dynamic_slice`` clamps);
* slices have static bounds; positive steps are ``slice`` strides. Negative steps would
  need a ``rev`` primitive: they work on concrete arrays (computed by NumPy) and raise
  ``IndexError`` on traced ones (unless they pick at most one element);
* ``None`` inserts an axis (``broadcast_in_dim``); one ``...`` stands for the axes not
  indexed.

Integer-array ("fancy") indices and boolean masks would need gather/scatter and raise
``IndexError``, as do out-of-range static indices.

``x.at[index].set(v)`` broadcasts ``v`` (converted to ``x``'s dtype) to the shape of
``x[index]`` and writes it with ``dynamic_update_slice``; ``.add(v)`` reads the region
(``slice`` or ``dynamic_slice``), adds and writes back. Indices are ints (static or
traced), ``None``, ``...`` and slices of step 1. A traced index out of range is clamped
(``dynamic_update_slice``'s rule) where JAX's scatter would drop the update.
"""

from __future__ import annotations

import builtins
from typing import Any, Literal, NamedTuple, TypeAlias

import numpy as np

from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import ConcreteArray, Tracer, aval_of, to_numpy, user_location
from ferrax.numpy._promotion import ArrayLike, as_array, broadcast_to, convert, operand_aval, shape_error
from ferrax.numpy._shape import insert_axes

__all__ = ["getitem", "index_update"]


class _Int(NamedTuple):
    """A static integer index, normalized to ``[0, size)``."""

    value: int


class _Traced(NamedTuple):
    """A traced integer index: an int32 scalar (negative counts from the end)."""

    value: Array


class _Slice(NamedTuple):
    """A slice with static bounds, as ``slice.indices`` gives them."""

    start: int
    stop: int | None  # None: past the beginning (a negative step reaching index 0)
    step: int
    length: int


_Entry: TypeAlias = _Int | _Traced | _Slice | None  # None: a new axis


def _unsupported(item: object, what: str) -> IndexError:
    return IndexError(
        f"{what} are not supported: ferrax has no gather/scatter primitive, so an index is "
        "made of ints (static or traced scalars), slices with static bounds, None and "
        f"'...' (got {_describe(item)}), at {user_location()}"
    )


def _describe(item: object) -> str:
    if isinstance(item, (Array, np.ndarray)):
        return f"an array of type {aval_of(item).str_short()}"
    return f"{type(item).__name__} {item!r}"


def _static_int(item: object) -> int | None:
    """The value of a concrete integer index (Python, NumPy, or 0-d concrete array)."""
    if isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
        return int(item)
    return None


def _scalar_index(item: object, dim: int, size: int) -> _Int | _Traced:
    if isinstance(item, (bool, np.bool_)):
        raise _unsupported(item, "boolean indices (masks)")
    static = _static_int(item)
    if static is None:
        if isinstance(item, (list, tuple)):
            raise _unsupported(item, "sequences as indices (integer-array indexing)")
        if not isinstance(item, (Array, np.ndarray)):
            raise IndexError(
                "only integers, slices (':'), ellipsis ('...'), None and integer scalar "
                f"arrays are valid indices; got {_describe(item)}, at {user_location()}"
            )
        aval = aval_of(item)
        if aval.dtype == np.bool_:
            raise _unsupported(item, "boolean array indices (masks)")
        if not dtypes.is_int(aval.dtype):
            raise IndexError(f"indices must be integers, got {_describe(item)}, at {user_location()}")
        if aval.shape != ():
            raise _unsupported(item, "integer-array (fancy) indices")
        if isinstance(item, Tracer):
            return _Traced(_as_int32(item))
        static = int(to_numpy(item))
    if not -size <= static < size:
        raise IndexError(
            f"index {static} is out of bounds for axis {dim} with size {size}, at {user_location()}"
        )
    return _Int(static % size)


def _as_int32(i: Tracer) -> Array:
    """A traced index as a strongly typed int32 (as JAX's indices); ``lax.dynamic_slice``
    and ``dynamic_update_slice`` count negative ones from the end."""
    aval = i.aval
    if aval.dtype != np.int32 or aval.weak_type:
        return lax.convert_element_type(i, np.int32)
    return i


def _slice_bound(v: object) -> int | None:
    if v is None:
        return None
    static = _static_int(v)
    if static is None and isinstance(v, (Array, np.ndarray)) and not isinstance(v, Tracer):
        aval = aval_of(v)
        if aval.shape == () and dtypes.is_int(aval.dtype):
            static = int(to_numpy(v))
    if static is None:
        hint = (
            "; a traced start needs lax.dynamic_slice (the size must be static)"
            if isinstance(v, Tracer)
            else ""
        )
        raise IndexError(
            f"slice bounds must be static integers, got {_describe(v)}{hint}, at {user_location()}"
        )
    return static


def _slice(item: slice, size: int) -> _Slice:
    bounds = slice(_slice_bound(item.start), _slice_bound(item.stop), _slice_bound(item.step))
    start, stop, step = bounds.indices(size)
    length = len(range(start, stop, step))
    return _Slice(start, None if stop < 0 else stop, step, length)


def _parse(shape: tuple[int, ...], index: object) -> list[_Entry]:
    """The index as one entry per operand dimension (ints, slices) or new axis (None)."""
    items = index if isinstance(index, tuple) else (index,)
    ellipses = builtins.sum(1 for it in items if it is Ellipsis)
    if ellipses > 1:
        raise IndexError(f"an index can only have a single ellipsis ('...'), at {user_location()}")
    consumed = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    ndim = len(shape)
    if consumed > ndim:
        raise IndexError(
            f"too many indices: the array has {ndim} dimension{'s' if ndim != 1 else ''} "
            f"but {consumed} were indexed, at {user_location()}"
        )
    if not ellipses:
        items = (*items, Ellipsis)
    entries: list[_Entry] = []
    dim = 0
    for it in items:
        if it is None:
            entries.append(None)
        elif it is Ellipsis:
            for _ in range(ndim - consumed):
                entries.append(_Slice(0, shape[dim], 1, shape[dim]))
                dim += 1
        elif isinstance(it, slice):
            entries.append(_slice(it, shape[dim]))
            dim += 1
        else:
            entries.append(_scalar_index(it, dim, shape[dim]))
            dim += 1
    return entries


def getitem(a: ArrayLike, index: Any) -> Array:
    """``a[index]`` for basic indices (see the module's notes)."""
    x = as_array(a, "indexing")
    entries = _parse(x.shape, index)
    dims = [e for e in entries if e is not None]
    traced = [e for e in dims if isinstance(e, _Traced)]
    if builtins.any(isinstance(e, _Slice) and e.step < 0 and e.length > 1 for e in dims):
        if isinstance(x, Tracer) or traced:
            raise IndexError(
                "slices with a negative step are not supported on traced arrays: reversing "
                "needs a `rev` primitive, which ferrax does not have yet (they work on "
                f"concrete arrays); index with a positive step instead, at {user_location()}"
            )
        return _getitem_on_host(x, entries)
    y = x
    windows = [_window(e, size) for e, size in zip(dims, x.shape)]
    starts, limits, strides = ([w[k] for w in windows] for k in range(3))
    if starts != [0] * x.ndim or limits != list(x.shape) or strides != [1] * x.ndim:
        y = lax.slice(y, starts, limits, None if strides == [1] * x.ndim else strides)
    if traced:
        begin: list[Any] = [e.value if isinstance(e, _Traced) else 0 for e in dims]
        sizes = [1 if isinstance(e, _Traced) else d for e, d in zip(dims, y.shape)]
        y = lax.dynamic_slice(y, begin, sizes)
    dropped = [i for i, e in enumerate(dims) if isinstance(e, (_Int, _Traced))]
    if dropped:
        y = lax.squeeze(y, dropped)
    return insert_axes(y, _new_axes(entries))


def _window(e: _Int | _Traced | _Slice, size: int) -> tuple[int, int, int]:
    """``slice``'s start, limit and stride in one dimension (a traced index takes the
    whole dimension: ``dynamic_slice`` picks from it)."""
    if isinstance(e, _Int):
        return e.value, e.value + 1, 1
    if isinstance(e, _Slice):
        return _slice_window(e)
    return 0, size, 1


def _slice_window(e: _Slice) -> tuple[int, int, int]:
    """``slice``'s start, limit and stride for a slice picking ``e.length`` elements."""
    if e.length == 0:
        return 0, 0, 1
    if e.step < 0:  # one element
        return e.start, e.start + 1, 1
    assert e.stop is not None
    return e.start, e.stop, e.step


def _new_axes(entries: list[_Entry]) -> list[int]:
    """Positions of the new axes in the result."""
    out, pos = [], 0
    for e in entries:
        if e is None:
            out.append(pos)
            pos += 1
        elif isinstance(e, _Slice):
            pos += 1
    return out


def _getitem_on_host(x: Array, entries: list[_Entry]) -> Array:
    items: list[Any] = []
    for e in entries:
        if e is None:
            items.append(None)
        elif isinstance(e, _Int):
            items.append(e.value)
        elif isinstance(e, _Slice):
            items.append(slice(e.start, e.stop, e.step))
    value = np.array(to_numpy(x)[tuple(items)])
    return ConcreteArray(value, x.weak_type)


def index_update(a: ArrayLike, index: Any, value: Any, mode: Literal["set", "add"]) -> Array:
    """``a`` with ``value`` written at (``"set"``) or added to (``"add"``) ``a[index]``:
    what ``a.at[index].set(value)`` and ``.add(value)`` do (see the module's notes)."""
    name = f".at[...].{mode}"
    x = as_array(a, name)
    entries = _parse(x.shape, index)
    starts: list[Any] = []
    region: list[int] = []
    # For each axis of x[index]: the axis of x it is (None for a new axis).
    view_axes: list[int | None] = []
    for e in entries:
        if e is None:
            view_axes.append(None)
        elif isinstance(e, (_Int, _Traced)):
            starts.append(e.value)
            region.append(1)
        else:
            if e.step != 1 and e.length > 1:
                raise IndexError(
                    f"{name}: only slices with step 1 are supported (got step {e.step}): "
                    f"ferrax has no scatter primitive, at {user_location()}"
                )
            starts.append(_slice_window(e)[0])
            view_axes.append(len(region))
            region.append(e.length)
    view = tuple(1 if a is None else region[a] for a in view_axes)
    value = _checked_value(name, value, view)
    if 0 in region:
        return x
    update = _update_region(name, value, x, view_axes, tuple(region))
    static = not builtins.any(isinstance(s, Array) for s in starts)
    whole = static and builtins.all(s == 0 for s in starts) and tuple(region) == x.shape
    if mode == "add":
        if whole:
            current = x
        elif static:
            current = lax.slice(x, starts, [s + r for s, r in zip(starts, region)])
        else:
            current = lax.dynamic_slice(x, starts, region)
        update = lax.bitwise_or(current, update) if x.dtype == np.bool_ else lax.add(current, update)
    elif mode != "set":
        raise ValueError(f"index_update: mode must be 'set' or 'add', got {mode!r}")
    if whole:
        return update
    return lax.dynamic_update_slice(x, update, starts)


def _checked_value(name: str, value: Any, view: tuple[int, ...]) -> Any:
    """``value``, if its shape broadcasts to the shape of ``x[index]`` (``view``)."""
    if isinstance(value, (list, tuple)):
        from ferrax.numpy._creation import asarray

        value = asarray(value)
    shape = operand_aval(name, value).shape
    lead = len(view) - len(shape)
    if lead < 0 or builtins.any(s not in (1, d) for s, d in zip(shape, view[lead:])):
        raise shape_error(
            f"{name}: a value of shape {list(shape)} cannot be broadcast to the indexed "
            f"region of shape {list(view)}"
        )
    return value


def _update_region(
    name: str, value: Any, x: Array, view_axes: list[int | None], region: tuple[int, ...]
) -> Array:
    """``value`` in ``x``'s dtype (and weak type), shaped as the ``region`` of ``x`` it is
    written to: one ``broadcast_in_dim`` when its axes all fall on axes of ``x``."""
    update = as_array(convert(value, x.dtype, x.weak_type), name)
    if update.shape == region:
        return update
    targets = view_axes[len(view_axes) - update.ndim :]
    if builtins.all(t is not None for t in targets):
        return lax.broadcast_in_dim(update, region, [t for t in targets if t is not None])
    # Some of its axes are new axes (of size 1): broadcast to x[index]'s shape, reshape.
    view = tuple(1 if a is None else region[a] for a in view_axes)
    if update.shape != view:
        update = broadcast_to(update, view)
    return update if view == region else lax.reshape(update, region)
