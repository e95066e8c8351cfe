"""Primitives that move data: broadcast, reshape, transpose, squeeze, expand_dims,
concatenate, slices, pad, iota, and dot_general."""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax import dtypes
from ferrax._array import Array
from ferrax._core import ConcreteArray, Primitive, Tracer, aval_of, to_numpy, user_location
from ferrax._interpreters import ad
from ferrax._lax._operands import bind1, canonical_dtype, is_python_scalar, quiet, scalar, scalar_as
from ferrax._lax.elementwise import float_to_int

__all__ = [
    "broadcast_in_dim", "broadcasted_iota", "concatenate", "dot_general", "dynamic_index_in_dim",
    "dynamic_slice", "dynamic_slice_in_dim", "dynamic_update_slice", "expand_dims", "iota", "pad",
    "reshape", "slice", "split", "squeeze", "transpose",
    "optimization_barrier", "stack", "tile", "unstack",
]

NDArray = np.ndarray[Any, Any]
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]


def _ints(xs: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _dims(xs: Sequence[int | np.integer[Any]]) -> tuple[int, ...]:
    """Axis numbers as given: NumPy integers stay so (JAX keeps them, and prints them
    ``np.int64(1)``), others become ints."""
    out: tuple[Any, ...] = tuple(x if isinstance(x, np.integer) else int(x) for x in xs)
    return out


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

split_p = Primitive.builtin("split", multiple_results=True)


@split_p.def_impl
def _split_impl(x: NDArray, *, sizes: tuple[int, ...], axis: int) -> list[NDArray]:
    ends = np.cumsum((0, *sizes))
    index: list[Any] = [builtins.slice(None)] * x.ndim
    out = []
    for lo, hi in zip(ends[:-1], ends[1:]):
        index[axis] = builtins.slice(int(lo), int(hi))
        out.append(x[tuple(index)])
    return out


stack_p = Primitive.builtin("stack")
stack_p.def_impl(lambda *xs, axis: np.stack(xs, axis=axis))

unstack_p = Primitive.builtin("unstack", multiple_results=True)
unstack_p.def_impl(lambda x, *, axis: [np.take(x, i, axis=axis) for i in range(x.shape[axis])])

tile_p = Primitive.builtin("tile")
tile_p.def_impl(lambda x, *, reps: np.tile(x, reps) if reps else np.array(x))

optimization_barrier_p = Primitive.builtin("optimization_barrier", multiple_results=True)
optimization_barrier_p.def_impl(lambda *xs: list(xs))

slice_p = Primitive.builtin("slice")


@slice_p.def_impl
def _slice_impl(
    x: np.ndarray[Any, Any], *, start_indices: tuple[int, ...], limit_indices: tuple[int, ...], strides: tuple[int, ...] | None = None
) -> Any:
    steps = strides or (1,) * x.ndim
    return x[tuple(builtins.slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, steps))]


pad_p = Primitive.builtin("pad")


@pad_p.def_impl
def _pad_impl(x: NDArray, value: NDArray, *, padding_config: tuple[tuple[int, int, int], ...]) -> Any:
    # Interior padding first (the operand strided into a buffer of the padding value),
    # then low/high: positive ones extend with the value, negative ones crop.
    dilated = [0 if d == 0 else (d - 1) * (i + 1) + 1 for d, (_, _, i) in zip(x.shape, padding_config)]
    out = np.full(dilated, value, dtype=x.dtype)
    out[tuple(builtins.slice(None, None, i + 1) for _, _, i in padding_config)] = x
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi, _ in padding_config]
    out = np.pad(out, grow, mode="constant", constant_values=value) if out.ndim else out
    crop = tuple(
        builtins.slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi, _), n in zip(padding_config, out.shape)
    )
    return out[crop]


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


def _dot_accumulator(lhs: np.dtype[Any], rhs: np.dtype[Any], preferred: np.dtype[Any] | None) -> np.dtype[Any]:
    """The dtype to contract in: the operands' join (or the preferred type), floats at
    least float32 (as XLA accumulates half-precision dots), float for float operands."""
    acc, _ = dtypes.promote([(lhs, False), (rhs, False)])
    if preferred is not None and (dtypes.is_float(preferred) or not dtypes.is_float(acc)):
        acc = np.dtype(preferred)
    if dtypes.is_float(acc) and acc.itemsize < 4:
        acc = np.dtype(np.float32)
    return acc


@dot_general_p.def_impl
@quiet
def _dot_general_impl(
    lhs: NDArray,
    rhs: NDArray,
    *,
    dimension_numbers: DotDimensionNumbers,
    precision: Any = None,
    preferred_element_type: Any = None,
    out_sharding: None = None,
) -> Any:
    (lc, rc), (lb, rb) = dimension_numbers
    # One einsum letter per axis: batch axes first, then lhs's free axes, then rhs's.
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    lsub = [""] * lhs.ndim
    rsub = [""] * rhs.ndim
    out: list[str] = []
    for a, b in zip(lb, rb):
        lsub[a] = rsub[b] = next(letters)
        out.append(lsub[a])
    for a, b in zip(lc, rc):
        lsub[a] = rsub[b] = next(letters)
    for i in range(lhs.ndim):
        if not lsub[i]:
            lsub[i] = next(letters)
            out.append(lsub[i])
    for i in range(rhs.ndim):
        if not rsub[i]:
            rsub[i] = next(letters)
            out.append(rsub[i])
    spec = f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}"
    preferred = None if preferred_element_type is None else np.dtype(preferred_element_type)
    acc = _dot_accumulator(lhs.dtype, rhs.dtype, preferred)
    result = np.einsum(spec, lhs.astype(acc), rhs.astype(acc))
    if preferred is not None and dtypes.is_int(preferred) and dtypes.is_float(acc):
        return float_to_int(result, preferred)
    return result


# ---------------------------------------------------------------------------- functions


def _normalize_axes(axes: Sequence[int], ndim: int, what: str) -> tuple[int, ...]:
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"{what}: axis {a} is out of range for rank {ndim}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: repeated axis in {tuple(axes)}")
    return tuple(sorted(out))


def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Array:
    """``operand`` broadcast to ``shape``; its axis ``i`` becomes axis ``broadcast_dimensions[i]``.

    An array that already has ``shape`` (with ``broadcast_dimensions`` the identity) is
    returned as it is.
    """
    x = scalar(operand)
    shape_t, dims = _ints(shape), _dims(broadcast_dimensions)
    if isinstance(x, Array) and x.shape == shape_t and dims == tuple(range(len(shape_t))):
        return x
    return bind1(broadcast_in_dim_p, x, shape=shape_t, broadcast_dimensions=dims)


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Array:
    """``operand`` with shape ``new_sizes``, its elements read in the order of the axes
    ``dimensions`` (row-major order by default). The same shape is returned as it is."""
    x = scalar(operand)
    sizes = _ints(new_sizes)
    dims = None if dimensions is None else _ints(dimensions)
    if isinstance(x, Array) and x.shape == sizes and dims in (None, tuple(range(x.ndim))):
        return x
    return bind1(reshape_p, x, new_sizes=sizes, dimensions=dims, sharding=None)


def transpose(operand: Any, permutation: Sequence[int]) -> Array:
    """``operand`` with axes permuted: output axis ``i`` is input axis ``permutation[i]``."""
    x = scalar(operand)
    perm = _ints(permutation)
    if isinstance(x, Array) and perm == tuple(range(x.ndim)):
        return x
    return bind1(transpose_p, x, permutation=perm)


def squeeze(array: Any, dimensions: Sequence[int]) -> Array:
    """``array`` without the given size-1 axes (negative axes count from the end)."""
    x = scalar(array)
    dims = _normalize_axes(dimensions, len(aval_of(x).shape), "squeeze")
    if not dims and isinstance(x, Array):
        return x
    return bind1(squeeze_p, x, dimensions=dims)


def expand_dims(array: Any, dimensions: Sequence[int]) -> Array:
    """``array`` with size-1 axes inserted at ``dimensions`` (positions in the result;
    negative ones count from its end)."""
    x = scalar(array)
    dims = _normalize_axes(dimensions, len(aval_of(x).shape) + len(dimensions), "expand_dims")
    if not dims and isinstance(x, Array):
        return x
    return bind1(expand_dims_p, x, dimensions=dims)


def expand_dims_as_jax(array: Any, dimensions: Sequence[int]) -> Array:
    """JAX's ``lax.expand_dims``: ``array`` with size-1 axes at ``dimensions`` (positions
    in the result) by a ``broadcast_in_dim``, the equation JAX records. The ferrax
    functions mirroring JAX code that calls ``lax.expand_dims`` use this, so that they
    trace as JAX's; ``lax.expand_dims`` itself binds the ``expand_dims`` primitive."""
    x = scalar(array)
    shape = tuple(aval_of(x).shape)
    out_ndim = len(shape) + len(dimensions)
    dims = _normalize_axes(dimensions, out_ndim, "expand_dims")
    kept = [i for i in range(out_ndim) if i not in dims]
    out_shape = [1] * out_ndim
    for src, dst in enumerate(kept):
        out_shape[dst] = shape[src]
    return broadcast_in_dim(x, out_shape, kept)


def concatenate(operands: Sequence[Any], dimension: int) -> Array:
    """The operands (of one dtype and rank) joined along ``dimension``."""
    xs = [scalar(o) for o in operands]
    if len(xs) == 1 and isinstance(xs[0], Array):
        return xs[0]
    return bind1(concatenate_p, *xs, dimension=int(dimension))


def split(operand: Any, sizes: Sequence[int | np.integer[Any]], axis: int = 0) -> list[Array]:
    """``operand`` cut along ``axis`` into consecutive pieces of ``sizes`` (which add up
    to the axis's size); one array per piece."""
    x = scalar(operand)
    rank = len(aval_of(x).shape)
    a = operator.index(axis)
    if not -rank <= a < rank:
        raise ValueError(f"axis {a} is out of bounds for array of dimension {rank}, at {user_location()}")
    return list(split_p.bind(x, sizes=_dims(sizes), axis=a % rank))


def stack(operands: Sequence[Any], axis: int = 0) -> Array:
    """The operands (of one shape and dtype) stacked along a new axis ``axis`` (negative
    counts from the end of the result's axes)."""
    xs = [scalar(o) for o in operands]
    if not xs:
        raise ValueError(f"stack expects at least one operand, got 0, at {user_location()}")
    shapes = [tuple(aval_of(x).shape) for x in xs]
    if len(set(shapes)) > 1:
        # As JAX: a ValueError (a dtype mismatch is the rule's TypeError).
        raise ValueError(
            f"All input arrays must have the same shape. Got {', '.join(map(str, shapes))}, at {user_location()}"
        )
    rank = len(shapes[0]) + 1
    a = operator.index(axis)
    if not -rank <= a < rank:
        raise ValueError(f"axis {a} is out of bounds for array of dimension {rank}, at {user_location()}")
    return bind1(stack_p, *xs, axis=a % rank)


def unstack(x: Any, axis: int = 0) -> tuple[Array, ...]:
    """The slices of ``x`` along ``axis``, that axis removed from each (the inverse of
    ``stack``)."""
    v = scalar(x)
    rank = len(aval_of(v).shape)
    a = operator.index(axis)
    if rank == 0:
        raise ValueError(
            f"unstack requires arrays with rank > 0, however a scalar array of shape () was passed, "
            f"at {user_location()}"
        )
    if not -rank <= a < rank:
        raise ValueError(f"axis {a} is out of bounds for array of dimension {rank}, at {user_location()}")
    return tuple(unstack_p.bind(v, axis=a % rank))


def tile(operand: Any, reps: Sequence[int]) -> Array:
    """``operand`` repeated ``reps[i]`` times along each axis ``i`` (``len(reps)`` is its
    rank)."""
    return bind1(tile_p, scalar(operand), reps=_ints(reps))


def optimization_barrier(operand: Any) -> Any:
    """``operand`` (a pytree) unchanged; under ``jit`` the compiler may not move work
    across the barrier (nothing is computed earlier or merged with work after it)."""
    from ferrax.tree_util import tree_flatten, tree_unflatten

    flat, tree = tree_flatten(operand)
    outs = optimization_barrier_p.bind(*[scalar(x) for x in flat])
    return tree_unflatten(tree, list(outs))


def slice(
    operand: Any,
    start_indices: Sequence[int],
    limit_indices: Sequence[int],
    strides: Sequence[int] | None = None,
) -> Array:
    """The static slice ``operand[start:limit:stride, ...]``."""
    return bind1(
        slice_p,
        scalar(operand),
        start_indices=_ints(start_indices),
        limit_indices=_ints(limit_indices),
        strides=None if strides is None else _ints(strides),
    )


def pad(operand: Any, padding_value: Any, padding_config: Sequence[Sequence[int | np.integer[Any]]]) -> Array:
    """``operand`` with ``padding_value`` inserted: per dimension ``(low, high, interior)``
    elements before, after and between neighbours (negative ``low``/``high`` crop).

    As JAX: the padding value must be a scalar of the operand's dtype (a Python scalar
    takes its own default dtype, so ``pad(float32_array, 0, ...)`` is a ``TypeError``);
    a config of the wrong length, negative interior padding or a dimension cropped below
    zero is a ``ValueError``.
    """
    x = scalar(operand)
    value = scalar(padding_value)
    config = tuple(_dims(triple) for triple in padding_config)
    shape = aval_of(x).shape
    if aval_of(value).shape != ():
        raise ValueError(f"padding_value must be a scalar; got shape {aval_of(value).shape}")
    if len(config) != len(shape):
        raise ValueError(
            "length of padding_config must equal the number of axes of operand, got "
            f"padding_config {config} for operand shape {shape}"
        )
    if any(i < 0 for _, _, i in config):
        raise ValueError(f"interior padding in padding_config must be nonnegative, got padding_config {config}")
    result = tuple(lo + hi + (0 if d == 0 else (d - 1) * (i + 1) + 1) for (lo, hi, i), d in zip(config, shape))
    if any(d < 0 for d in result):
        raise ValueError(
            f"Dimension size after padding is not at least 0, got result shape {result}, "
            f"for padding_config {config} and operand shape {shape}"
        )
    return bind1(pad_p, x, value, padding_config=config)


def _start_indices(shape: Sequence[int], indices: Sequence[Any], what: str) -> list[Any]:
    """Start indices of one integer dtype, negative ones counted from the end (statically
    for concrete indices; with ``lt``, ``add`` and ``select_n`` for traced ones, as JAX)."""
    from ferrax._lax.elementwise import add, convert_element_type, lt, select_n

    if len(indices) != len(shape):
        raise TypeError(f"{what}: {len(indices)} start indices for an operand of rank {len(shape)}")
    arrays = [i for i in indices if not is_python_scalar(i)]
    kinds = {aval_of(i).dtype for i in arrays}
    for d in kinds:
        if not dtypes.is_int(d):
            raise TypeError(f"{what}: start indices must be integers, got {d}")
    # Python ints take the arrays' dtype; arrays of several dtypes are converted to int32.
    dtype = kinds.pop() if len(kinds) == 1 else dtypes.default_int()
    out: list[Any] = []
    for i, size in zip(indices, shape):
        # As JAX: Python and NumPy integers are normalized now, arrays (traced or not)
        # in the jaxpr.
        if isinstance(i, (Tracer, ConcreteArray)):
            if i.dtype != dtype:
                i = convert_element_type(i, dtype)
            if dtype.kind == "i":
                i = select_n(lt(i, 0), i, add(i, size))
            out.append(i)
        else:
            value = int(to_numpy(i)) if not is_python_scalar(i) else int(i)
            if value < 0:
                value += size
            # Out of the dtype's range is out of the array's: the primitive clamps.
            info = np.iinfo(dtype)
            value = builtins.min(builtins.max(value, int(info.min)), int(info.max))
            out.append(ConcreteArray(np.asarray(value, dtype=dtype), False))
    return out


def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Array:
    """The slice of ``slice_sizes`` at ``start_indices``, which may be traced; a negative
    index counts from the end, and the slice is moved back inside the array if it would
    overrun it."""
    x = scalar(operand)
    starts = _start_indices(aval_of(x).shape, start_indices, "dynamic_slice")
    return bind1(dynamic_slice_p, x, *starts, slice_sizes=_ints(slice_sizes))


def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any]) -> Array:
    """``operand`` with ``update`` written at ``start_indices`` (as in :func:`dynamic_slice`)."""
    x = scalar(operand)
    starts = _start_indices(aval_of(x).shape, start_indices, "dynamic_update_slice")
    return bind1(dynamic_update_slice_p, x, scalar_as(update, x), *starts)


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0) -> Array:
    """:func:`dynamic_slice` along ``axis`` only: ``slice_size`` elements from
    ``start_index`` (which may be traced), every other axis whole."""
    shape = aval_of(scalar(operand)).shape
    starts: list[Any] = [0] * len(shape)
    sizes = list(shape)
    starts[int(axis)] = start_index
    sizes[int(axis)] = int(slice_size)
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True) -> Array:
    """The element ``index`` (which may be traced) along ``axis``; the axis is kept (of
    size 1) if ``keepdims``, else dropped."""
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def iota(dtype: Any, size: int) -> Array:
    """``[0, 1, ..., size - 1]``."""
    return bind1(iota_p, dtype=canonical_dtype(dtype, "iota"), shape=(int(size),), dimension=0, sharding=None)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Array:
    """An array of ``shape`` counting along ``dimension``."""
    return bind1(iota_p, dtype=canonical_dtype(dtype, "broadcasted_iota"), shape=_ints(shape), dimension=int(dimension), sharding=None)


def dot_general(
    lhs: Any,
    rhs: Any,
    dimension_numbers: DotDimensionNumbers,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Array:
    """Generalized dot product: ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.

    The result's axes are the batch axes, then ``lhs``'s free axes, then ``rhs``'s.
    Operands of different dtypes give the more precise one (as in JAX);
    ``preferred_element_type`` sets the result's dtype.
    """
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((_ints(lc), _ints(rc)), (_ints(lb), _ints(rb)))
    params: dict[str, Any] = {"dimension_numbers": dn}
    if precision is not None:
        params["precision"] = str(precision)
    if preferred_element_type is not None:
        params["preferred_element_type"] = canonical_dtype(preferred_element_type, "dot_general")
    return bind1(dot_general_p, scalar(lhs), scalar(rhs), **params)


copy_p = Primitive.builtin("copy")
"""``copy``: the operand's value in a new buffer (``jnp.array(x, copy=True)`` in JAX)."""
copy_p.def_impl(lambda x: np.array(x, copy=True))


def copy(x: Any) -> Array:
    """A copy of ``x`` (the ``copy`` primitive; staged, it keeps a copy JAX would make)."""
    return bind1(copy_p, scalar(x))


# -------------------------------------------------------------------------- derivatives
# Forward-mode rules (``ferrax._interpreters.ad``). Every primitive here but iota and
# dot_general is linear in its array operand(s): the tangent is the primitive applied to
# the tangents (zeros materialized where an operand of concatenate, pad or
# dynamic_update_slice has none); start indices are integers and keep their primal value.

for _p in (broadcast_in_dim_p, reshape_p, transpose_p, squeeze_p, expand_dims_p, concatenate_p, slice_p, copy_p, split_p):
    ad.deflinear(_p)
for _p in (stack_p, unstack_p, tile_p):
    ad.deflinear(_p)


def _optimization_barrier_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    # As JAX: one barrier for the primals and one for the (materialized) tangents.
    outs = optimization_barrier_p.bind(*primals)
    return outs, optimization_barrier_p.bind(*[ad.instantiate(t) for t in tangents])


optimization_barrier_p.def_jvp(_optimization_barrier_jvp)
ad.deflinear(pad_p)  # jointly in the operand and the padding value
ad.deflinear(dynamic_slice_p, [0])
ad.deflinear(dynamic_update_slice_p, [0, 1])


def _iota_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    # iota has no operands, so its (all zero) tangents never reach a rule; registered
    # so that every primitive of the catalogue has one.
    ans = bind1(iota_p, **params)
    return ans, ad.Zero(aval_of(ans))


iota_p.def_jvp(_iota_jvp)

# Bilinear: d(x . y) = dx . y + x . dy, in that order (as JAX's rule), with the same
# parameters (a preferred element type included).
ad.defjvp(
    dot_general_p,
    lambda g, ans, x, y, **params: bind1(dot_general_p, g, y, **params),
    lambda g, ans, x, y, **params: bind1(dot_general_p, x, g, **params),
)


# ---------------------------------------------------------------------------- batching
# Rules for ``vmap``: the batch axis goes first, and the primitive's axes shift by one.


def _moveaxis(x: Any, src: int, dst: int) -> Array:
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def _broadcast_new_axis(x: Any, size: int, axis: int) -> Array:
    shape = list(x.shape)
    shape.insert(axis, size)
    dims = [i if i < axis else i + 1 for i in range(x.ndim)]
    return broadcast_in_dim(x, shape, dims)


def _front(vals: Any, dims: Any, size: int) -> list[Any]:
    from ferrax._interpreters import batching

    return [batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims)]


def _install_batching() -> None:
    from ferrax._interpreters import batching

    batching.register_axis_ops(_moveaxis, _broadcast_new_axis)
    batching.defvectorized(copy_p)

    def bcast(vals: Any, dims: Any, *, axis_size: int, shape: Any, broadcast_dimensions: Any, **params: Any) -> Any:
        (x,) = _front(vals, dims, axis_size)
        return bind1(
            broadcast_in_dim_p, x, shape=(axis_size, *shape),
            # Shifted with NumPy, as JAX's rule (so printed `np.int64(1)`).
            broadcast_dimensions=(0, *np.add(1, broadcast_dimensions)) if broadcast_dimensions else (0,), **params,
        ), 0

    broadcast_in_dim_p.def_batch(bcast)

    def reshape_rule(vals: Any, dims: Any, *, axis_size: int, new_sizes: Any, dimensions: Any, **params: Any) -> Any:
        (x,) = _front(vals, dims, axis_size)
        if dimensions is not None:
            x = transpose(x, (0, *(d + 1 for d in dimensions)))
        return bind1(reshape_p, x, new_sizes=(axis_size, *new_sizes), dimensions=None, **params), 0

    reshape_p.def_batch(reshape_rule)

    def transpose_rule(vals: Any, dims: Any, *, axis_size: int, permutation: Any) -> Any:
        (x,) = _front(vals, dims, axis_size)
        return bind1(transpose_p, x, permutation=(0, *(p + 1 for p in permutation))), 0

    transpose_p.def_batch(transpose_rule)

    def shifted(prim: Primitive, key: str) -> None:
        def rule(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> Any:
            (x,) = _front(vals, dims, axis_size)
            params[key] = tuple(d + 1 for d in params[key])
            return bind1(prim, x, **params), 0

        prim.def_batch(rule)

    shifted(squeeze_p, "dimensions")
    shifted(expand_dims_p, "dimensions")

    def concat_rule(vals: Any, dims: Any, *, axis_size: int, dimension: int) -> Any:
        return bind1(concatenate_p, *_front(vals, dims, axis_size), dimension=dimension + 1), 0

    concatenate_p.def_batch(concat_rule)

    def split_rule(vals: Any, dims: Any, *, axis_size: int, sizes: Any, axis: int) -> Any:
        (x,) = _front(vals, dims, axis_size)
        outs = split_p.bind(x, sizes=sizes, axis=axis + 1)
        return list(outs), [0] * len(outs)

    split_p.def_batch(split_rule)

    def stack_rule(vals: Any, dims: Any, *, axis_size: int, axis: int) -> Any:
        # As JAX: one batch axis shared by all stays where it is; otherwise all in front.
        b = dims[0]
        if b is not None and all(d == b for d in dims):
            return (bind1(stack_p, *vals, axis=axis), b + 1) if axis <= b else (bind1(stack_p, *vals, axis=axis + 1), b)
        return bind1(stack_p, *_front(vals, dims, axis_size), axis=axis + 1), 0

    stack_p.def_batch(stack_rule)

    def unstack_rule(vals: Any, dims: Any, *, axis_size: int, axis: int) -> Any:
        (x,), (b,) = vals, dims
        out_axis, out_b = (axis, b - 1) if axis < b else (axis + 1, b)
        outs = unstack_p.bind(x, axis=out_axis)
        return list(outs), [out_b] * len(outs)

    unstack_p.def_batch(unstack_rule)

    def tile_rule(vals: Any, dims: Any, *, axis_size: int, reps: Any) -> Any:
        (x,), (b,) = vals, dims
        return bind1(tile_p, x, reps=(*reps[:b], 1, *reps[b:])), b

    tile_p.def_batch(tile_rule)

    def barrier_rule(vals: Any, dims: Any, *, axis_size: int) -> Any:
        return list(optimization_barrier_p.bind(*vals)), list(dims)

    optimization_barrier_p.def_batch(barrier_rule)

    def slice_rule(vals: Any, dims: Any, *, axis_size: int, start_indices: Any, limit_indices: Any, strides: Any) -> Any:
        (x,) = _front(vals, dims, axis_size)
        return bind1(
            slice_p, x, start_indices=(0, *start_indices), limit_indices=(axis_size, *limit_indices),
            strides=None if strides is None else (1, *strides),
        ), 0

    slice_p.def_batch(slice_rule)

    def dot_rule(vals: Any, dims: Any, *, axis_size: int, dimension_numbers: Any, **params: Any) -> Any:
        (lc, rc), (lb, rb) = dimension_numbers
        lhs, rhs = vals
        ld, rd = dims
        def shift(xs: Sequence[int]) -> tuple[int, ...]:
            return tuple(i + 1 for i in xs)

        if ld is not None and rd is not None:
            lhs, rhs = batching.moveaxis(lhs, ld, 0), batching.moveaxis(rhs, rd, 0)
            dn = ((shift(lc), shift(rc)), ((0, *shift(lb)), (0, *shift(rb))))
            return bind1(dot_general_p, lhs, rhs, dimension_numbers=dn, **params), 0
        if ld is not None:
            lhs = batching.moveaxis(lhs, ld, 0)
            dn = ((shift(lc), tuple(rc)), (shift(lb), tuple(rb)))
            # The batch axis is lhs's first free axis: right after the batch dimensions.
            return bind1(dot_general_p, lhs, rhs, dimension_numbers=dn, **params), len(lb)
        rhs = batching.moveaxis(rhs, rd, 0)
        dn = ((tuple(lc), shift(rc)), (tuple(lb), shift(rb)))
        lhs_free = lhs.ndim - len(lc) - len(lb)
        return bind1(dot_general_p, lhs, rhs, dimension_numbers=dn, **params), len(lb) + lhs_free

    dot_general_p.def_batch(dot_rule)


_install_batching()


# ------------------------------------------------------------------- batching (indexing)
# pad, the dynamic slices and iota. Batched start indices make a dynamic slice a gather
# (and a dynamic update a scatter), each element at its own position, as JAX does; so do
# unbatched ones of a batched operand (the gather's window spans the batch axis).


def _batched_starts(starts: Sequence[Any], dims: Sequence[int | None], size: int) -> tuple[Any, int | None]:
    """The scalar start indices as one index vector (shape ``(n,)``, unbatched) or one per
    batch element (``(size, n)``, batch axis 0) if any of them is batched."""
    if not any(d is not None for d in dims):
        return concatenate([broadcast_in_dim(s, (1,), ()) for s in starts], 0), None
    columns = [broadcast_in_dim(s, (size, 1), () if d is None else (0,)) for s, d in zip(starts, dims)]
    return concatenate(columns, 1), 0


def _install_indexing_batching() -> None:
    # slicing.py imports this module: its names are looked up when a rule runs.
    from ferrax._lax.elementwise import select_n

    def pad_rule(vals: Any, dims: Any, *, axis_size: int, padding_config: Any) -> Any:
        x, value = vals
        x_dim, value_dim = dims
        if x_dim is None:
            x = _broadcast_new_axis(x, axis_size, 0)
            x_dim = 0
        config = list(padding_config)
        config.insert(x_dim, (0, 0, 0))
        if value_dim is None:
            return bind1(pad_p, x, value, padding_config=tuple(config)), x_dim
        # A padding value per element: pad with zeros, then select the elements' values
        # where a mask (the operand's positions) is false.
        zero = ConcreteArray(np.zeros((), x.dtype), False)
        padded = bind1(pad_p, x, zero, padding_config=tuple(config))
        inside = broadcast_in_dim(ConcreteArray(np.asarray(True), False), x.shape, ())
        mask = bind1(pad_p, inside, ConcreteArray(np.asarray(False), False), padding_config=tuple(config))
        values = broadcast_in_dim(value, padded.shape, (x_dim,))
        return select_n(mask, values, padded), x_dim

    pad_p.def_batch(pad_rule)

    def dynamic_slice_rule(vals: Any, dims: Any, *, axis_size: int, slice_sizes: Any) -> Any:
        x, *starts = vals
        x_dim, *start_dims = dims
        if not starts:  # a scalar operand: the slice is the operand
            return x, x_dim
        from ferrax._lax import slicing

        axes = tuple(range(len(starts)))
        indices, indices_dim = _batched_starts(starts, start_dims, axis_size)
        dn = slicing.GatherDimensionNumbers(offset_dims=axes, collapsed_slice_dims=(), start_index_map=axes)
        return slicing._gather_batch(
            [x, indices], [x_dim, indices_dim], axis_size=axis_size, dimension_numbers=dn,
            slice_sizes=tuple(slice_sizes), indices_are_sorted=True, unique_indices=True,
            mode=slicing.GatherScatterMode.CLIP, fill_value=None,
        )

    dynamic_slice_p.def_batch(dynamic_slice_rule)

    def dynamic_update_slice_rule(vals: Any, dims: Any, *, axis_size: int) -> Any:
        x, update, *starts = vals
        x_dim, update_dim, *start_dims = dims
        if not starts:  # a scalar operand: the update replaces it
            return _front([update], [update_dim], axis_size)[0], 0
        from ferrax._lax import slicing

        axes = tuple(range(len(starts)))
        indices, indices_dim = _batched_starts(starts, start_dims, axis_size)
        dn = slicing.ScatterDimensionNumbers(
            update_window_dims=axes, inserted_window_dims=(), scatter_dims_to_operand_dims=axes
        )
        return slicing._scatter_batch(slicing.scatter_p)(
            [x, indices, update], [x_dim, indices_dim, update_dim], axis_size=axis_size, dimension_numbers=dn,
            indices_are_sorted=True, unique_indices=True, mode=slicing.GatherScatterMode.CLIP,
            update_jaxpr=None, update_consts=(),
        )

    dynamic_update_slice_p.def_batch(dynamic_update_slice_rule)

    def iota_rule(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> Any:
        # iota has no operands, so a batching trace never runs this rule (a primitive
        # whose operands are all unbatched is applied as it is); were it run, the value
        # is the same for every element: unbatched.
        return bind1(iota_p, **params), None

    iota_p.def_batch(iota_rule)


_install_indexing_batching()
