"""``ferrax.lax`` functions that are compositions of primitives (JAX's names and
arguments): slicing along one axis, ``collapse``, ``broadcast``, ``full``, ``dot``,
``batch_matmul``, ``reciprocal``, ``map`` (a ``scan``) and ``associative_scan`` (the
parallel prefix by odd and even elements, as JAX computes it, so results agree to the
bit)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax import dtypes
from ferrax._array import Array
from ferrax._core import ConcreteArray, aval_of, user_location
from ferrax._lax._operands import scalar
from ferrax._lax.control import scan
from ferrax._lax.elementwise import add, bitwise_or, convert_element_type, integer_pow
from ferrax._lax.slicing import rev
from ferrax._lax.structural import (
    broadcast_in_dim,
    concatenate,
    dot_general,
    dynamic_update_slice,
    expand_dims_as_jax,
    pad,
    reshape,
    slice,
    squeeze,
)
from ferrax.tree_util import tree_flatten, tree_unflatten

__all__ = [
    "associative_scan",
    "batch_matmul",
    "broadcast",
    "broadcast_shapes",
    "broadcast_to_rank",
    "collapse",
    "dot",
    "dynamic_update_index_in_dim",
    "dynamic_update_slice_in_dim",
    "full",
    "full_like",
    "index_in_dim",
    "map",
    "reciprocal",
    "slice_in_dim",
    # issue 12: JAX's small helpers
    "broadcast_like", "empty", "index_take",
]


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(aval_of(scalar(x)).shape)


def _as_array(x: Any) -> Array:
    """``x`` as an array (a NumPy value or scalar wrapped, as JAX's ``asarray``)."""
    x = scalar(x)
    return x if isinstance(x, Array) else ConcreteArray(np.asarray(x), False)


def _axis(axis: int, rank: int, what: str) -> int:
    a = operator.index(axis)
    if not -rank <= a < rank:
        raise ValueError(f"{what}: axis {a} is out of bounds for an array of rank {rank}, at {user_location()}")
    return a % rank


def slice_in_dim(operand: Any, start_index: int | None, limit_index: int | None, stride: int = 1, axis: int = 0) -> Array:
    """``operand[start_index:limit_index:stride]`` along ``axis`` (indices may be
    negative or None, as Python's; static)."""
    shape = _shape(operand)
    ax = _axis(axis, len(shape), "slice_in_dim")
    size = shape[ax]
    start = 0 if start_index is None else operator.index(start_index)
    limit = size if limit_index is None else operator.index(limit_index)
    start = start + size if start < 0 else start
    limit = limit + size if limit < 0 else limit
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[ax], limits[ax], strides[ax] = start, limit, operator.index(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Array:
    """The element ``index`` (static, may be negative) along ``axis``, the axis kept
    (of size 1) if ``keepdims``."""
    shape = _shape(operand)
    ax = _axis(axis, len(shape), "index_in_dim")
    i = operator.index(index)
    i = i + shape[ax] if i < 0 else i
    out = slice_in_dim(operand, i, i + 1, 1, ax)
    return out if keepdims else squeeze(out, (ax,))


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int) -> Array:
    """``update`` written into ``operand`` from ``start_index`` (may be traced) along
    ``axis``, at 0 along every other axis."""
    rank = len(_shape(operand))
    ax = _axis(axis, rank, "dynamic_update_slice_in_dim")
    starts: list[Any] = [0] * rank
    starts[ax] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int) -> Array:
    """``update`` (of ``operand``'s rank, or one less: the axis added) written at
    ``index`` (may be traced) along ``axis``."""
    rank = len(_shape(operand))
    ax = _axis(axis, rank, "dynamic_update_index_in_dim")
    if len(_shape(update)) == rank - 1:
        update = expand_dims_as_jax(update, (ax,))
    return dynamic_update_slice_in_dim(operand, update, index, ax)


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Array:
    """The dimensions ``start_dimension`` to ``stop_dimension`` (excluded; the last
    when None) merged into one."""
    shape = _shape(operand)
    rank = len(shape)
    lo = operator.index(start_dimension)
    hi = rank if stop_dimension is None else operator.index(stop_dimension)
    lo, hi = (lo + rank if lo < 0 else lo), (hi + rank if hi < 0 else hi)
    if not 0 <= lo <= hi <= rank:
        raise ValueError(
            f"collapse: dimensions {start_dimension} to {stop_dimension} are not a range of an "
            f"array of rank {rank}, at {user_location()}"
        )
    merged = int(np.prod(shape[lo:hi], dtype=np.int64))
    return reshape(operand, shape[:lo] + (merged,) + shape[hi:])


def broadcast(operand: Any, sizes: Sequence[int]) -> Array:
    """``operand`` with leading dimensions ``sizes`` added."""
    shape = _shape(operand)
    sizes = tuple(operator.index(s) for s in sizes)
    if not sizes:
        return _as_array(operand)
    return broadcast_in_dim(operand, sizes + shape, tuple(range(len(sizes), len(sizes) + len(shape))))


def broadcast_to_rank(x: Any, rank: int) -> Array:
    """``x`` with leading dimensions of size 1 up to ``rank``."""
    ndim = len(_shape(x))
    if ndim == rank:
        return _as_array(x)
    return broadcast(x, (1,) * (rank - ndim))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape NumPy's broadcasting gives ``shapes`` (a ValueError when they do not
    broadcast)."""
    rank = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (rank - len(s)) + tuple(operator.index(d) for d in s) for s in shapes]
    out = []
    for dims in zip(*padded):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={[tuple(s) for s in shapes]}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None, *, sharding: Any = None) -> Array:
    """An array of ``shape`` filled with ``fill_value`` (of ``dtype``, else the value's;
    weakly typed when the value is a Python scalar and ``dtype`` is None)."""
    if sharding is not None:
        raise NotImplementedError(f"lax.full: sharding= is not supported, at {user_location()}")
    if np.ndim(fill_value) != 0:
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape {np.shape(fill_value)}.")
    value = scalar(fill_value)
    aval = aval_of(value)
    if dtype is None:
        value = convert_element_type(value, aval.dtype, weak_type=aval.weak_type)
    else:
        target = dtypes.canonicalize(dtype, "full")
        folded = _folded(fill_value, target)
        if folded is not None:
            value = folded
        else:
            value = convert_element_type(value, target, weak_type=False)
    return broadcast(value, tuple(shape))


def _folded(fill_value: Any, dtype: np.dtype[Any]) -> ConcreteArray | None:
    """A constant fill value (a Python or NumPy scalar, a NumPy array) converted to a
    strong ``dtype`` now, as JAX converts constants (no convert_element_type equation:
    ``broadcast_in_dim -inf:f32[]``); None for other values (traced, ferrax arrays)."""
    if not isinstance(fill_value, (bool, int, float, complex, np.generic, np.ndarray)):
        return None
    if dtypes.is_key(dtype) or isinstance(fill_value, np.ndarray) and dtypes.is_key(fill_value.dtype):
        return None
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            value = np.asarray(fill_value).astype(dtype)
    except (OverflowError, TypeError, ValueError):
        return None
    return ConcreteArray(value, False)


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Sequence[int] | None = None, sharding: Any = None) -> Array:
    """An array like ``x`` (its shape and dtype unless given) filled with ``fill_value``."""
    aval = aval_of(scalar(x))
    out_dtype = aval.dtype if dtype is None else dtypes.canonicalize(dtype, "full_like")
    out = full(aval.shape if shape is None else shape, fill_value, out_dtype, sharding=sharding)
    if dtype is None and aval.weak_type:
        out = convert_element_type(out, out_dtype, weak_type=True)
    return out


def reciprocal(x: Any) -> Array:
    """``1 / x`` (an ``integer_pow`` of -1, as JAX records it)."""
    return integer_pow(x, -1)


def dot(
    lhs: Any, rhs: Any, *, dimension_numbers: Any = None, precision: Any = None,
    preferred_element_type: Any = None, out_sharding: Any = None,
) -> Array:
    """``dot_general`` with ``dimension_numbers``, or without them the vector and matrix
    products (``lhs``'s last axis against ``rhs``'s first, ranks 1 and 2)."""
    if out_sharding is not None:
        raise NotImplementedError(f"lax.dot: out_sharding= is not supported, at {user_location()}")
    if dimension_numbers is None:
        ls, rs = _shape(lhs), _shape(rhs)
        if not (1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and ls[-1] == rs[0]):
            raise ValueError(
                "lax.dot: dimension_numbers must be specified when not performing simple "
                "un-batched matrix-matrix, matrix-vector, or vector-vector products; got "
                f"lhs_shape={ls} rhs_shape={rs}, at {user_location()}"
            )
        dimension_numbers = (((len(ls) - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)


def batch_matmul(lhs: Any, rhs: Any, precision: Any = None) -> Array:
    """Matrix products over the trailing two axes, batched over the leading ones (of
    equal sizes)."""
    ls, rs = _shape(lhs), _shape(rhs)
    if min(len(ls), len(rs)) < 2:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D, got {len(ls)}, {len(rs)}, at {user_location()}")
    if len(ls) != len(rs):
        raise ValueError(f"Arguments to batch_matmul must have same ndim, got {len(ls)}, {len(rs)}, at {user_location()}")
    batch = tuple(range(len(ls) - 2))
    return dot_general(lhs, rhs, (((len(ls) - 1,), (len(rs) - 2,)), (batch, batch)), precision)


def map(f: Callable[[Any], Any], xs: Any, *, batch_size: int | None = None) -> Any:
    """``f`` applied to each slice of ``xs`` (a pytree) along its leading axis, stacked:
    a ``scan``; with ``batch_size``, ``f`` is vmapped over that many slices per step (the
    remainder in one more vmapped call)."""
    if batch_size is None:
        return scan(lambda carry, x: (carry, f(x)), (), xs)[1]
    from ferrax._vmap import vmap

    leaves, tree = tree_flatten(xs)
    n = _shape(leaves[0])[0] if leaves else 0
    size = operator.index(batch_size)
    if size < 1:
        raise ValueError(f"lax.map: batch_size must be positive, got {size}, at {user_location()}")
    steps, rest = divmod(n, size)
    parts = []
    if steps:
        blocks = [reshape(slice_in_dim(x, 0, steps * size), (steps, size) + _shape(x)[1:]) for x in leaves]
        mapped = scan(lambda carry, x: (carry, vmap(f)(x)), (), tree_unflatten(tree, blocks))[1]
        out_leaves, out_tree = tree_flatten(mapped)
        parts.append([collapse(y, 0, 2) for y in out_leaves])
    if rest:
        tail = vmap(f)(tree_unflatten(tree, [slice_in_dim(x, steps * size, None) for x in leaves]))
        out_leaves, out_tree = tree_flatten(tail)
        parts.append(out_leaves)
    if not parts:
        return scan(lambda carry, x: (carry, f(x)), (), xs)[1]
    joined = [concatenate(list(ys), 0) if len(ys) > 1 else ys[0] for ys in zip(*parts)]
    return tree_unflatten(out_tree, joined)


def _interleave(a: Array, b: Array, axis: int) -> Array:
    """``a[0], b[0], a[1], b[1], ...`` along ``axis`` (``a`` as long as ``b`` or one
    more): both padded with zeros between their elements, then added."""
    na, nb = _shape(a)[axis], _shape(b)[axis]
    rank = len(_shape(a))
    pad_a = [(0, 0, 0)] * rank
    pad_b = [(0, 0, 0)] * rank
    pad_a[axis] = (0, 1 if na == nb else 0, 1)
    pad_b[axis] = (1, 0 if na == nb else 1, 1)
    dtype = aval_of(a).dtype
    zero = convert_element_type(0, dtype, weak_type=False)
    combine = bitwise_or if dtype == np.bool_ else add
    return combine(pad(a, zero, pad_a), pad(b, zero, pad_b))


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """The inclusive scan of ``elems`` (a pytree of arrays of one length along ``axis``)
    with the associative ``fn``, in O(log n) steps of elementwise ``fn`` calls: pairs of
    neighbours combined, the half-length problem scanned, the other half filled in."""
    leaves, tree = tree_flatten(elems)
    if not leaves:
        raise ValueError(f"associative_scan: elems has no arrays, at {user_location()}")
    rank = len(_shape(leaves[0]))
    ax = _axis(axis, rank, "associative_scan")
    lengths = {_shape(x)[ax] for x in leaves}
    if len(lengths) != 1:
        raise ValueError(f"Array inputs to associative_scan must have the same first dimension. (saw: {sorted(lengths)})")
    if reverse:
        leaves = [rev(x, (ax,)) for x in leaves]

    def combine(a: list[Array], b: list[Array]) -> list[Array]:
        out = fn(tree_unflatten(tree, a), tree_unflatten(tree, b))
        got, out_tree = tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"associative_scan: fn must return a value of the structure of elems ({tree}), got {out_tree}")
        return got

    # The odd/even recursion, unrolled: the levels going down (halving), then back up.
    levels: list[list[Array]] = [list(leaves)]
    while _shape(levels[-1][0])[ax] >= 2:
        cur = levels[-1]
        levels.append(combine(
            [slice_in_dim(x, 0, -1, 2, ax) for x in cur], [slice_in_dim(x, 1, None, 2, ax) for x in cur],
        ))
    scanned = levels.pop()
    while levels:
        cur = levels.pop()
        n = _shape(cur[0])[ax]
        odd = scanned
        if n % 2 == 0:
            even = combine([slice_in_dim(x, 0, -1, 1, ax) for x in odd], [slice_in_dim(x, 2, None, 2, ax) for x in cur])
        else:
            even = combine(odd, [slice_in_dim(x, 2, None, 2, ax) for x in cur])
        even = [concatenate([slice_in_dim(x, 0, 1, 1, ax), e], ax) for x, e in zip(cur, even)]
        scanned = [_interleave(e, o, ax) for e, o in zip(even, odd)]
    if reverse:
        scanned = [rev(x, (ax,)) for x in scanned]
    return tree_unflatten(tree, scanned)


# ---------------------------------------------------------------- issue 12: small helpers


def broadcast_like(arr: Any, like_arr: Any) -> Array:
    """``arr`` broadcast (NumPy's trailing-axes rule) to the shape of ``like_arr``."""
    x = _as_array(arr)
    shape = _shape(like_arr)
    have = _shape(x)
    if have == shape:
        return x
    if len(have) > len(shape) or any(
        d not in (1, s) for d, s in zip(have, shape[len(shape) - len(have):])
    ):
        raise ValueError(f"Incompatible shapes for broadcasting: {have} and requested shape {shape}, at {user_location()}")
    return broadcast_in_dim(x, shape, tuple(range(len(shape) - len(have), len(shape))))


def empty(shape: Sequence[int], dtype: Any, *, out_sharding: Any = None) -> Array:
    """An array of ``shape`` and ``dtype`` whose values do not matter (zeros here; JAX
    binds its ``empty`` primitive, which XLA also fills with zeros)."""
    if out_sharding is not None:
        raise NotImplementedError(f"lax.empty: out_sharding= is not supported, at {user_location()}")
    return full(tuple(shape), 0, dtype)


def index_take(src: Any, idxs: Sequence[Any], axes: Sequence[int]) -> Array:
    """``src`` indexed by one integer vector per axis of ``axes`` (taken modulo the axis
    sizes, as JAX), the other axes kept: a gather of the index tuples."""
    from ferrax._lax.elementwise import lt, rem, select_n
    from ferrax._lax.slicing import GatherDimensionNumbers, gather

    x = _as_array(src)
    shape = _shape(x)
    axes = tuple(operator.index(a) for a in axes)
    columns = [expand_dims_as_jax(_as_array(i), (1,)) for i in idxs]
    indices = concatenate(columns, 1)
    n = _shape(indices)[0]
    sizes = np.array([shape[a] for a in axes], dtype=aval_of(indices).dtype)
    size = broadcast_in_dim(sizes, (n, len(axes)), (1,))
    r = rem(indices, size)
    indices = select_n(lt(r, _zero_like(r)), r, add(r, size))
    slice_sizes = [1 if a in axes else d for a, d in enumerate(shape)]
    dnums = GatherDimensionNumbers(
        offset_dims=tuple(range(1, len(shape) - len(axes) + 1)),
        collapsed_slice_dims=axes,
        start_index_map=axes,
    )
    return gather(x, indices, dnums, tuple(slice_sizes), mode="promise_in_bounds")


def _zero_like(x: Any) -> Array:
    return full(_shape(x), 0, aval_of(x).dtype)
