"""``pad``: NumPy's padding modes, built from ``lax.pad``, slices, ``rev`` and
concatenations as ``jax.numpy`` builds them.

Widths are known when tracing (they fix the shape). ``mode`` is ``constant`` (per-side
values too), ``edge``, ``wrap``, ``reflect``/``symmetric`` (``reflect_type`` ``even`` or
``odd``, widths beyond the axis reflected again), ``linear_ramp`` (``end_values``),
``maximum``/``minimum``/``mean``/``median`` (``stat_length``; integers rounded), ``empty``
(zeros, as XLA has no uninitialized memory) or a function ``f(vector, (before, after),
axis, kwargs)`` applied along each axis.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._jit import staged
from ferrax._core import Tracer, aval_of, user_location
from ferrax.numpy import _creation, _reductions, _shape, _ufuncs
from ferrax.numpy._promotion import ArrayLike, as_array, broadcast_to, convert

__all__ = ["pad"]

Pairs = tuple[tuple[Any, Any], ...]

_KWARGS: dict[str, tuple[str, ...]] = {
    "empty": (), "edge": (), "wrap": (), "constant": ("constant_values",),
    "linear_ramp": ("end_values",), "maximum": ("stat_length",), "mean": ("stat_length",),
    "median": ("stat_length",), "minimum": ("stat_length",), "reflect": ("reflect_type",),
    "symmetric": ("reflect_type",),
}


def _pairs(values: Any, nd: int, name: str) -> Pairs:
    """``values`` as one ``(before, after)`` pair per axis (NumPy's broadcasting of
    ``pad_width``-like arguments)."""
    if isinstance(values, Tracer):
        raise TypeError(f"pad: {name} must be known when tracing (it fixes the shape), at {user_location()}")
    try:
        arr = np.asarray(values, dtype=object if not isinstance(values, (Array, np.ndarray)) else None)
    except ValueError:
        raise TypeError(f"`{name}` entries must be the same shape: {values}, at {user_location()}") from None
    if arr.dtype == object and builtins.any(np.ndim(v) != 0 for v in arr.reshape(-1)):
        raise TypeError(f"`{name}` entries must be the same shape: {values}, at {user_location()}")
    if arr.shape == (nd, 2):
        return tuple((arr[i, 0], arr[i, 1]) for i in range(nd))
    if arr.shape == (1, 2):
        return tuple((arr[0, 0], arr[0, 1]) for _ in range(nd))
    if arr.shape == (2,):
        return tuple((arr[0], arr[1]) for _ in range(nd))
    if arr.shape in ((1,), ()):
        v = arr.reshape(-1)[0]
        return tuple((v, v) for _ in range(nd))
    raise ValueError(
        f"jnp.pad: {name} with nd={nd} has unsupported shape {arr.shape}. Valid shapes are "
        f"({nd}, 2), (1, 2), (2,), (1,), or (), at {user_location()}"
    )


def _slice(x: Array, start: int, stop: int, axis: int) -> Array:
    lo, hi = [0] * x.ndim, list(x.shape)
    lo[axis], hi[axis] = start, stop
    return lax.slice(x, lo, hi, [1] * x.ndim)  # JAX's slice_in_dim: unit strides spelled out


def _no_padding(pair: tuple[int, int], mode: str) -> None:
    if pair[0] > 0 or pair[1] > 0:
        raise ValueError(f"Cannot apply '{mode}' padding to empty axis, at {user_location()}")


def _constant(x: Array, widths: Pairs, values: Any) -> Array:
    if isinstance(values, (list, tuple)):
        values = np.asarray(values)
    v = convert(values, x.dtype, aval_of(x).weak_type)
    if v.ndim == 0 or v.shape == (1,):
        # The widths as NumPy integers, as JAX reads them from an array.
        return lax.pad(x, _shape.reshape(v, ()), [(np.int64(lo), np.int64(hi), 0) for lo, hi in widths])
    if v.ndim == 1 and v.shape[0] != 2:
        raise ValueError(
            f"jnp.pad: constant_values has unsupported shape {v.shape}. If the shape is 1D or 2D, "
            f"the last dimension must be of size 1 or 2, at {user_location()}"
        )
    table = broadcast_to(v, (x.ndim, 2))
    for i, (lo, hi) in enumerate(widths):
        for side, width in ((0, lo), (1, hi)):
            if width:
                config = [(0, 0, 0)] * x.ndim
                config[i] = (width, 0, 0) if side == 0 else (0, width, 0)
                value = _shape.reshape(lax.slice(table, (i, side), (i + 1, side + 1)), ())
                x = lax.pad(x, value, config)
    return x


def _wrap(x: Array, widths: Pairs) -> Array:
    for i, (lo, hi) in enumerate(widths):
        size = x.shape[i]
        if size == 0:
            _no_padding((lo, hi), "wrap")
            continue
        lo_reps, lo_rest = divmod(lo, size)
        hi_reps, hi_rest = divmod(hi, size)
        parts = [_slice(x, size - lo_rest, size, i)] if lo_rest else []
        parts += [x] * (lo_reps + hi_reps + 1)
        if hi_rest:
            parts.append(_slice(x, 0, hi_rest, i))
        x = lax.concatenate(parts, i) if len(parts) > 1 else x
    return x


def _reflect(x: Array, widths: Pairs, mode: str, odd: bool) -> Array:
    for i, (lo, hi) in enumerate(widths):
        size = x.shape[i]
        if size == 0:
            _no_padding((lo, hi), mode)
            continue
        offset = 1 if mode == "reflect" and size > 1 else 0
        for before, width in ((True, lo), (False, hi)):
            edge = _slice(x, 0, 1, i) if before else _slice(x, x.shape[i] - 1, x.shape[i], i)
            while width > 0:
                step = builtins.min(width, size - offset)
                width -= step
                n = x.shape[i]
                if before:
                    piece = _slice(x, offset, offset + step, i)
                else:
                    stop = n if mode == "symmetric" or size == 1 else n - 1
                    piece = _slice(x, stop - step, stop, i)
                piece = _shape.flip(piece, i)
                if odd:
                    piece = _ufuncs.subtract(_ufuncs.multiply(2, edge), piece)
                    if size > 1:
                        edge = _slice(piece, 0, 1, i) if before else _slice(piece, piece.shape[i] - 1, piece.shape[i], i)
                x = lax.concatenate([piece, x] if before else [x, piece], i)
    return x


def _edge(x: Array, widths: Pairs) -> Array:
    for i, (lo, hi) in enumerate(widths):
        n = x.shape[i]
        if n == 0:
            _no_padding((lo, hi), "edge")
            continue
        parts = [_shape.repeat(_slice(x, 0, 1, i), lo, i), x, _shape.repeat(_slice(x, n - 1, n, i), hi, i)]
        x = lax.concatenate(parts, i)
    return x


def _linear_ramp(x: Array, widths: Pairs, ends: Pairs) -> Array:
    from ferrax.numpy._breadth import linspace

    weak = aval_of(x).weak_type
    for i, (lo, hi) in enumerate(widths):
        n = x.shape[i]
        first = _shape.squeeze(_slice(x, 0, 1, i), i)
        last = _shape.squeeze(_slice(x, n - 1, n, i), i)
        before = convert(linspace(ends[i][0], first, lo, endpoint=False, dtype=x.dtype, axis=i), x.dtype, weak)
        after = convert(linspace(ends[i][1], last, hi, endpoint=False, dtype=x.dtype, axis=i), x.dtype, weak)
        x = lax.concatenate([before, x, _shape.flip(after, i)], i)
    return x


def _stats(x: Array, widths: Pairs, lengths: Pairs | None, stat: Callable[..., Array]) -> Array:
    weak = aval_of(x).weak_type
    for i, (lo, hi) in enumerate(widths):
        n = x.shape[i]
        if lengths is None:
            before = after = stat(x, axis=i, keepdims=True)
        else:
            len_lo, len_hi = lengths[i]
            if len_lo == 0 or len_hi == 0:
                raise ValueError(f"stat_length of 0 yields no value for padding, at {user_location()}")
            len_lo, len_hi = builtins.min(len_lo, n), builtins.min(len_hi, n)
            before = stat(_slice(x, 0, len_lo, i), axis=i, keepdims=True)
            after = stat(_slice(x, n - len_hi, n, i), axis=i, keepdims=True)
        if dtypes.is_int(x.dtype):
            before, after = _ufuncs.round(before), _ufuncs.round(after)
        before, after = convert(before, x.dtype, weak), convert(after, x.dtype, weak)
        x = lax.concatenate([_shape.repeat(before, lo, i), x, _shape.repeat(after, hi, i)], i)
    return x


def _empty(x: Array, widths: Pairs) -> Array:
    for i, (lo, hi) in enumerate(widths):
        shape_lo = x.shape[:i] + (lo,) + x.shape[i + 1 :]
        shape_hi = x.shape[:i] + (hi,) + x.shape[i + 1 :]
        x = lax.concatenate([_creation.zeros_like(x, shape=shape_lo), x, _creation.zeros_like(x, shape=shape_hi)], i)
    return x


def _along_axes(x: Array, widths: Pairs, func: Callable[..., Any], kwargs: dict[str, Any]) -> Array:
    """NumPy's ``pad`` with a function: zero-padded, then ``func(vector, pair, axis,
    kwargs)`` over every 1-D slice along each axis (``vmap`` over the others)."""
    from ferrax import vmap
    from ferrax.numpy._breadth import moveaxis

    out = _constant(x, widths, 0)
    for axis in range(out.ndim):
        pair = widths[axis]

        def one(v: Array, axis: int = axis, pair: tuple[int, int] = pair) -> Any:
            return func(v, pair, axis, kwargs)

        moved = moveaxis(out, axis, -1)
        f: Callable[..., Any] = one
        for _ in range(out.ndim - 1):
            f = vmap(f)
        out = moveaxis(as_array(f(moved)), -1, axis)
    return out


def pad(array: ArrayLike, pad_width: Any, mode: str | Callable[..., Any] = "constant", **kwargs: Any) -> Array:
    """``array`` padded by ``pad_width`` (``(before, after)`` per axis, or one pair or
    one number for all) in NumPy's ``mode`` (see the module doc)."""
    x = as_array(array, "pad")
    widths = _pairs(pad_width, x.ndim, "pad_width")
    for lo, hi in widths:
        if not (isinstance(lo, (int, np.integer)) and isinstance(hi, (int, np.integer))):
            raise TypeError(f"`pad_width` must be of integral type, at {user_location()}")
    widths = tuple((operator.index(lo), operator.index(hi)) for lo, hi in widths)
    if callable(mode):
        return _along_axes(x, widths, mode, kwargs)
    if mode not in _KWARGS:
        raise NotImplementedError(f"Unimplemented padding mode '{mode}' for np.pad, at {user_location()}")
    unsupported = set(kwargs) - set(_KWARGS[mode])
    if unsupported:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unsupported}, at {user_location()}")
    if x.ndim == 0:
        return x
    if builtins.any(lo < 0 or hi < 0 for lo, hi in widths):
        raise ValueError(f"index can't contain negative values, at {user_location()}")
    return _pad(
        x, widths, mode, kwargs.get("constant_values", 0), _frozen(kwargs.get("stat_length")),
        _frozen(kwargs.get("end_values", 0)), kwargs.get("reflect_type", "even"),
    )


def _frozen(value: Any) -> Any:
    """Nested lists as tuples (a jit's static argument is hashed)."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


@staged(static_argnames=("widths", "mode", "stat_length", "end_values", "reflect_type"))
def _pad(
    x: Array, widths: tuple[tuple[int, int], ...], mode: str, constant_values: Any, stat_length: Any,
    end_values: Any, reflect_type: str,
) -> Array:
    if mode == "constant":
        return _constant(x, widths, constant_values)
    if mode == "wrap":
        return _wrap(x, widths)
    if mode in ("symmetric", "reflect"):
        kind = reflect_type
        if kind not in ("even", "odd"):
            raise ValueError(f"reflect_type must be 'even' or 'odd', got {kind!r}, at {user_location()}")
        return _reflect(x, widths, mode, kind == "odd")
    if mode == "edge":
        return _edge(x, widths)
    if mode == "linear_ramp":
        return _linear_ramp(x, widths, _pairs(end_values, x.ndim, "end_values"))
    if mode == "empty":
        return _empty(x, widths)
    lengths = None if stat_length is None else _pairs(stat_length, x.ndim, "stat_length")
    if lengths is not None:
        lengths = tuple((operator.index(a), operator.index(b)) for a, b in lengths)
    from ferrax.numpy._stats import median

    stats: dict[str, Callable[..., Array]] = {
        "maximum": _reductions.max, "minimum": _reductions.min, "mean": _reductions.mean, "median": median,
    }
    return _stats(x, widths, lengths, stats[mode])
