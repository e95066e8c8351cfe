"""Changing shapes: ``reshape``, ``ravel``, ``transpose``, ``swapaxes``, ``flip``, ``squeeze``,
``expand_dims``, ``concatenate`` and ``stack``.

As JAX's functions, each skips the primitive when it would not change anything (a
reshape to the same shape, the identity permutation). New axes are made with
``broadcast_in_dim``, as JAX does.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax._jit import staged
from ferrax import lax
from ferrax._array import Array
from ferrax._core import user_location
from ferrax.numpy._promotion import ArrayLike, Axis, Shape, as_array, broadcast_error, promote_dtypes, shape_error

__all__ = [
    "concatenate",
    "expand_dims",
    "flip",
    "insert_axes",
    "normalize_axes",
    "normalize_axis",
    "ravel",
    "repeat",
    "reshape",
    "squeeze",
    "stack",
    "unstack",
    "swapaxes",
    "transpose",
]


def normalize_axis(axis: int, ndim: int, name: str) -> int:
    """``axis`` in ``[0, ndim)`` (negative axes count from the end)."""
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise np.exceptions.AxisError(
            f"{name}: axis {a} is out of bounds for an array of dimension {ndim}, at {user_location()}"
        )
    return a % ndim if ndim else a


def normalize_axes(axis: Axis, ndim: int, name: str) -> tuple[int, ...]:
    """The axes ``axis`` names (all for ``None``), normalized; repeats are an error."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(normalize_axis(a, ndim, name) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated axis in {list(axes)}, at {user_location()}")
    return out


def _check_order(order: str) -> None:
    """JAX's ``order=`` values: ``'C'`` and ``'F'``; ``'A'`` is not implemented."""
    if order == "A":
        raise NotImplementedError(f"np.reshape order=A is not implemented, at {user_location()}")
    if order not in ("C", "F"):
        raise ValueError(f"Unexpected value for 'order' argument: {order}, at {user_location()}")


def reshape(a: ArrayLike, shape: Shape, order: str = "C", *, copy: bool | None = None) -> Array:
    """``a`` with a new shape of as many elements; one dimension may be -1 (inferred).
    ``order="F"`` reads and writes the elements column-major (JAX's ``reshape`` with
    reversed dimensions, then a transpose); ``copy`` is accepted (arrays are immutable).

    A shape of another size is a :class:`~ferrax.TypeCheckError`.
    """
    _check_order(order)
    x = as_array(a, "reshape")
    dims = [shape] if isinstance(shape, (int, np.integer)) else list(shape)
    dims = [operator.index(d) for d in dims]
    if dims.count(-1) > 1:
        raise TypeError(f"reshape: only one dimension can be -1, got {dims}, at {user_location()}")
    if -1 in dims:
        known = 1
        for d in dims:
            if d != -1:
                known *= d
        if known == 0 or x.size % known:
            raise shape_error(f"reshape: cannot reshape {x.size} elements into shape {dims}")
        dims[dims.index(-1)] = x.size // known
    if builtins.any(d < 0 for d in dims) or _prod(dims) != x.size:
        raise shape_error(
            f"reshape: cannot reshape an array of shape {list(x.shape)} ({x.size} elements) "
            f"into shape {dims}"
        )
    if order == "F":
        reversed_axes = tuple(range(x.ndim))[::-1]
        return transpose(lax.reshape(x, dims[::-1], reversed_axes))
    if tuple(dims) == x.shape:
        return x
    return lax.reshape(x, dims)


def _prod(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def ravel(a: ArrayLike, order: str = "C") -> Array:
    """``a`` flattened to one dimension (row-major; column-major for ``order="F"``)."""
    if order == "K":
        raise NotImplementedError(f"Ravel not implemented for order='K', at {user_location()}")
    x = as_array(a, "ravel")
    return reshape(x, (x.size,), order)


def transpose(a: ArrayLike, axes: Sequence[int] | None = None) -> Array:
    """``a`` with its axes permuted: result axis ``i`` is ``a``'s axis ``axes[i]``
    (reversed by default)."""
    x = as_array(a, "transpose")
    if axes is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        perm = tuple(normalize_axis(i, x.ndim, "transpose") for i in axes)
        if sorted(perm) != list(range(x.ndim)):
            raise TypeError(  # as JAX
                f"transpose: axes {list(axes)} are not a permutation of the {x.ndim} axes, "
                f"at {user_location()}"
            )
    if perm == tuple(range(x.ndim)):
        return x
    return lax.transpose(x, perm)


def swapaxes(a: ArrayLike, axis1: int, axis2: int) -> Array:
    """``a`` with two axes exchanged."""
    x = as_array(a, "swapaxes")
    perm = list(range(x.ndim))
    i, j = normalize_axis(axis1, x.ndim, "swapaxes"), normalize_axis(axis2, x.ndim, "swapaxes")
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(x, perm)


def flip(m: ArrayLike, axis: Axis = None) -> Array:
    """``m`` with the order of its elements reversed along ``axis`` (every axis by
    default), with ``rev`` as JAX."""
    return _flip(as_array(m, "flip"), tuple(axis) if isinstance(axis, list) else axis)


@staged(static_argnames=("axis",))
def _flip(x: Array, axis: Axis) -> Array:
    return lax.rev(x, normalize_axes(axis, x.ndim, "flip"))


def squeeze(a: ArrayLike, axis: Axis = None) -> Array:
    """``a`` without the given size-1 axes (all of them by default)."""
    x = as_array(a, "squeeze")
    if axis is None:
        dims = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        dims = normalize_axes(axis, x.ndim, "squeeze")
        for i in dims:
            if x.shape[i] != 1:
                raise ValueError(
                    f"squeeze: axis {i} has size {x.shape[i]}, not 1 (shape {list(x.shape)}), "
                    f"at {user_location()}"
                )
    if not dims:
        return x
    return lax.squeeze(x, sorted(dims))


def expand_dims(a: ArrayLike, axis: int | Sequence[int]) -> Array:
    """``a`` with size-1 axes inserted at ``axis`` (positions in the result)."""
    x = as_array(a, "expand_dims")
    out_ndim = x.ndim + (1 if isinstance(axis, (int, np.integer)) else len(axis))
    new = normalize_axes(axis, out_ndim, "expand_dims")
    return insert_axes(x, new)


def insert_axes(x: Array, new: Sequence[int]) -> Array:
    """``x`` with size-1 axes at positions ``new`` of the result (``broadcast_in_dim``)."""
    if not new:
        return x
    out_ndim = x.ndim + len(new)
    kept = [i for i in range(out_ndim) if i not in set(new)]
    shape = [1] * out_ndim
    for src, dst in enumerate(kept):
        shape[dst] = x.shape[src]
    return lax.broadcast_in_dim(x, shape, kept)


def concatenate(arrays: Sequence[ArrayLike], axis: int | None = 0) -> Array:
    """The arrays joined along ``axis`` (flattened first if ``axis`` is None), in their
    promoted dtype. Shapes differing off ``axis`` are a :class:`~ferrax.TypeCheckError`."""
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise ValueError(f"concatenate needs a non-empty sequence of arrays, at {user_location()}")
    xs = [as_array(x, "concatenate", i) for i, x in enumerate(promote_dtypes("concatenate", *arrays))]
    if axis is None:
        xs = [ravel(x) for x in xs]
        axis = 0
    ndim = xs[0].ndim
    if ndim == 0:
        raise ValueError(
            f"concatenate: zero-dimensional arrays cannot be concatenated, at {user_location()}"
        )
    dim = normalize_axis(axis, ndim, "concatenate")
    for x in xs:
        if x.ndim != ndim or builtins.any(
            a != b for i, (a, b) in enumerate(zip(x.shape, xs[0].shape)) if i != dim
        ):
            shapes = ", ".join(str(list(y.shape)) for y in xs)
            raise shape_error(
                f"concatenate: shapes {shapes} differ off the concatenation axis {dim}"
            )
    if len(xs) == 1:
        return xs[0]
    return lax.concatenate(xs, dim)


def stack(arrays: Sequence[ArrayLike] | Array | np.ndarray[Any, Any], axis: int = 0) -> Array:
    """The arrays, of one shape, joined along a new axis ``axis`` (one ``stack``
    equation, as JAX); one array stands for the arrays along its first axis."""
    if isinstance(arrays, (np.ndarray, Array)) and np.ndim(arrays) > 0:
        # The array's first axis moved to ``axis`` (no unstacking, as JAX).
        x = as_array(arrays, "stack")
        dim = normalize_axis(axis, x.ndim, "stack")
        perm = [*range(1, dim + 1), 0, *range(dim + 1, x.ndim)]
        return lax.transpose(x, perm) if dim else x
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise ValueError(f"stack needs a non-empty sequence of arrays, at {user_location()}")
    xs = [as_array(x, "stack", i) for i, x in enumerate(promote_dtypes("stack", *arrays))]
    shape = xs[0].shape
    if builtins.any(x.shape != shape for x in xs):
        shapes = ", ".join(str(list(x.shape)) for x in xs)
        raise broadcast_error(f"stack: arrays must have one shape, got {shapes}")
    dim = normalize_axis(axis, len(shape) + 1, "stack")
    return lax.stack(xs, dim)


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Array, ...]:
    """The slices of ``x`` along ``axis``, that axis removed (one ``unstack`` equation,
    as JAX)."""
    v = as_array(x, "unstack")
    if v.ndim == 0:
        raise ValueError(f"Unstack requires arrays with rank > 0, however a scalar array was passed, at {user_location()}")
    return lax.unstack(v, normalize_axis(axis, v.ndim, "unstack"))


def _repeat_each(x: Array, n: int, dim: int) -> Array:
    """Every element of ``x`` repeated ``n`` times along ``dim``: a new axis after
    ``dim`` broadcast to ``n``, merged into ``dim`` (as JAX stages it)."""
    shape = x.shape
    wide = shape[: dim + 1] + (n,) + shape[dim + 1 :]
    kept = tuple(i for i in range(len(wide)) if i != dim + 1)
    return reshape(lax.broadcast_in_dim(x, wide, kept), shape[:dim] + (shape[dim] * n,) + shape[dim + 1 :])


def repeat(
    a: ArrayLike,
    repeats: ArrayLike,
    axis: int | None = None,
    *,
    total_repeat_length: int | None = None,
) -> Array:
    """Each element of ``a`` repeated ``repeats`` times along ``axis`` (of the flattened
    array by default); ``repeats`` is an int or one count per element, known when
    tracing (traced counts are not supported)."""
    from ferrax._core import Tracer

    x = as_array(a, "repeat")
    if axis is None:
        x = ravel(x)
        axis = 0
    dim = normalize_axis(axis, x.ndim, "repeat")
    given: object = repeats
    if isinstance(given, (list, tuple)):
        # As JAX: counts are an array or an int (np.asarray them).
        raise TypeError(f"repeat: repeats must be an int or an array, got {type(given).__name__}, at {user_location()}")
    if isinstance(repeats, Tracer):
        raise NotImplementedError(
            f"repeat: traced repeat counts give a data-dependent shape and are not supported, "
            f"at {user_location()}"
        )
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "biu":
        raise TypeError(f"repeat: repeats must be integers, got dtype {counts.dtype}, at {user_location()}")
    if counts.ndim == 1 and counts.shape[0] == 1:
        counts = counts.reshape(())
    if builtins.any(int(c) < 0 for c in counts.reshape(-1)):
        raise ValueError(f"repeat: repeats may not be negative, got {counts.tolist()}, at {user_location()}")
    if counts.ndim == 0:
        total = int(counts) * x.shape[dim]
        out = x if int(counts) == 1 else _repeat_each(x, int(counts), dim)
    elif counts.shape != (x.shape[dim],):
        raise ValueError(
            f"repeat: {counts.shape[0]} repeat counts for an axis of length {x.shape[dim]}, "
            f"at {user_location()}"
        )
    else:
        total = int(counts.sum())
        pieces = []
        for i, c in enumerate(counts.tolist()):
            if c:
                start = [0] * x.ndim
                limit = list(x.shape)
                start[dim], limit[dim] = i, i + 1
                pieces.append(_repeat_each(lax.slice(x, start, limit), int(c), dim))
        if not pieces:
            empty = list(x.shape)
            empty[dim] = 0
            return reshape(lax.slice(x, [0] * x.ndim, empty), tuple(empty))
        out = pieces[0] if len(pieces) == 1 else lax.concatenate(pieces, dim)
    if total_repeat_length is not None and total_repeat_length != total:
        raise NotImplementedError(
            f"repeat: total_repeat_length={total_repeat_length} differs from the {total} "
            f"repeated elements, at {user_location()}"
        )
    return out
