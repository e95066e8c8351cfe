"""Primitives that index with computed positions: ``gather``, the ``scatter`` family and
``rev``, with their eager rules (XLA's semantics, in NumPy) and the ``ferrax.lax``
functions that bind them.

The parameters are JAX's: ``dimension_numbers`` is a :class:`GatherDimensionNumbers` or
:class:`ScatterDimensionNumbers` (the index vector is always the last axis of the
indices, as in JAX), ``mode`` a :class:`GatherScatterMode`. What happens to an index out
of range depends on the mode:

* ``CLIP``: the start of each window is clamped so that the whole window is inside the
  operand (gathers and scatters alike);
* ``FILL_OR_DROP``: a gathered window that is not entirely inside is ``fill_value``
  throughout; a scattered window that is not entirely inside is dropped;
* ``PROMISE_IN_BOUNDS``: the caller promises indices in range; what ferrax (and XLA)
  does otherwise is: gathers clamp, scatters drop.

Several updates to one element combine with the primitive's operation (``scatter-add``
adds them all, ...); with ``scatter`` one of them wins (NumPy's last, XLA's unspecified).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ferrax import dtypes
from ferrax._array import Array
from ferrax._core import ConcreteArray, Primitive, user_location
from ferrax._interpreters import ad
from ferrax._lax._operands import bind1, quiet, scalar, scalar_as
from ferrax._lax.elementwise import add, div, eq, mul, select_n
from ferrax._lax.structural import broadcast_in_dim, iota, reshape

__all__ = [
    "GatherDimensionNumbers",
    "GatherScatterMode",
    "ScatterDimensionNumbers",
    "gather",
    "rev",
    "scatter",
    "scatter_add",
    "scatter_max",
    "scatter_min",
    "scatter_mul",
    "scatter_sub",
]

NDArray = np.ndarray[Any, Any]


class GatherDimensionNumbers(NamedTuple):
    """How the axes of a gather's operand, indices and result relate (XLA's gather,
    with the index vector always the last axis of the indices).

    * ``offset_dims``: the result axes that run along a window (ascending);
    * ``collapsed_slice_dims``: operand axes of window size 1 with no result axis;
    * ``start_index_map``: the operand axis each component of an index vector starts;
    * ``operand_batching_dims``, ``start_indices_batching_dims``: operand axes paired
      with axes of the indices (the window starts at the batch position there).
    """

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the axes of a scatter's operand, indices and updates relate (XLA's scatter,
    with the index vector always the last axis of the indices).

    * ``update_window_dims``: the update axes that run along a window (ascending);
    * ``inserted_window_dims``: operand axes of window size 1 with no update axis;
    * ``scatter_dims_to_operand_dims``: the operand axis each index component starts;
    * ``operand_batching_dims``, ``scatter_indices_batching_dims``: operand axes paired
      with axes of the indices.
    """

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode(enum.Enum):
    """What a gather or scatter does with indices out of range (see the module's notes).

    ``ONE_HOT`` exists for JAX's names; ferrax does not implement it.
    """

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()
    ONE_HOT = enum.auto()

    @staticmethod
    def from_any(s: str | GatherScatterMode | None) -> GatherScatterMode:
        """The mode named by ``s``: ``"clip"``, ``"fill"`` or ``"drop"`` (also ``None``),
        ``"promise_in_bounds"``, ``"one_hot"``, or a mode itself."""
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s == "fill" or s == "drop":
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if s == "one_hot":
            return GatherScatterMode.ONE_HOT
        raise ValueError(f'Unknown gather mode "{s}"')


# ------------------------------------------------------------------------- eager rules


def _full_starts(
    indices: NDArray,
    operand_rank: int,
    index_map: Sequence[int],
    operand_batching: Sequence[int],
    indices_batching: Sequence[int],
) -> NDArray:
    """For every index vector: the start of its window along every operand axis
    (int64, shape ``indices.shape[:-1] + (operand_rank,)``)."""
    batch_shape = indices.shape[:-1]
    starts = np.zeros((*batch_shape, operand_rank), dtype=np.int64)
    for k, d in enumerate(index_map):
        starts[..., d] = indices[..., k].astype(np.int64)
    for d, b in zip(operand_batching, indices_batching):
        view = [1] * len(batch_shape)
        view[b] = batch_shape[b]
        starts[..., d] = np.arange(batch_shape[b]).reshape(view)
    return starts


def _in_bounds(starts: NDArray, shape: Sequence[int], window: Sequence[int], axes: Sequence[int]) -> NDArray:
    """Whether each window lies inside the operand along ``axes``."""
    ok = np.ones(starts.shape[:-1], dtype=bool)
    for d in axes:
        ok &= (starts[..., d] >= 0) & (starts[..., d] <= shape[d] - window[d])
    return ok


def _clamp(starts: NDArray, shape: Sequence[int], window: Sequence[int]) -> NDArray:
    """Window starts moved so that each window lies inside the operand."""
    upper = np.maximum(np.asarray(shape, dtype=np.int64) - np.asarray(window, dtype=np.int64), 0)
    return np.clip(starts, 0, upper)


def _gather_impl(
    operand: NDArray,
    indices: NDArray,
    *,
    dimension_numbers: GatherDimensionNumbers,
    slice_sizes: tuple[int, ...],
    indices_are_sorted: bool,
    unique_indices: bool,
    mode: GatherScatterMode,
    fill_value: Any = None,
) -> NDArray:
    dn = dimension_numbers
    rank = operand.ndim
    starts = _full_starts(
        indices, rank, dn.start_index_map, dn.operand_batching_dims, dn.start_indices_batching_dims
    )
    inside = _in_bounds(starts, operand.shape, slice_sizes, dn.start_index_map)
    starts = _clamp(starts, operand.shape, slice_sizes)
    batch_shape = starts.shape[:-1]
    nb = len(batch_shape)
    # One index array per operand axis, of shape batch_shape + slice_sizes.
    coords = []
    for d in range(rank):
        offsets = np.arange(slice_sizes[d]).reshape([1] * nb + [slice_sizes[d] if e == d else 1 for e in range(rank)])
        start = starts[..., d].reshape(batch_shape + (1,) * rank)
        coords.append(start + offsets)
    window = operand[tuple(coords)] if rank else np.broadcast_to(operand, batch_shape)
    window = np.broadcast_to(window, batch_shape + tuple(slice_sizes))
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window = window.reshape(batch_shape + tuple(s for d, s in enumerate(slice_sizes) if d not in dropped))
    if mode == GatherScatterMode.FILL_OR_DROP:
        fill = np.asarray(fill_value if fill_value is not None else _default_fill(operand.dtype))
        with np.errstate(all="ignore"):
            fill = fill.astype(operand.dtype)
        mask = inside.reshape(batch_shape + (1,) * (window.ndim - nb))
        window = np.where(mask, window, fill)
    # Result axes: the offset axes at offset_dims, the batch axes elsewhere in order.
    out_rank = window.ndim
    perm: list[int] = []
    batch_axis = 0
    for j in range(out_rank):
        if j in dn.offset_dims:
            perm.append(nb + dn.offset_dims.index(j))
        else:
            perm.append(batch_axis)
            batch_axis += 1
    return np.transpose(window, perm)


def _default_fill(dtype: np.dtype[Any]) -> Any:
    """JAX's fill value for FILL_OR_DROP gathers: NaN, the minimum signed or the maximum
    unsigned integer, True."""
    if dtypes.is_float(dtype):
        return np.nan
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    if dtype.kind == "u":
        return np.iinfo(dtype).max
    return True


def _scatter_targets(
    operand: NDArray,
    indices: NDArray,
    updates: NDArray,
    dn: ScatterDimensionNumbers,
    mode: GatherScatterMode,
) -> tuple[tuple[NDArray, ...], NDArray]:
    """The operand position each update element goes to (one flat index array per
    operand axis) and the flat update values, windows out of range dropped (or clamped)."""
    rank = operand.ndim
    starts = _full_starts(
        indices, rank, dn.scatter_dims_to_operand_dims, dn.operand_batching_dims, dn.scatter_indices_batching_dims
    )
    # Window size along each operand axis: 1 on inserted and batching axes, else the
    # size of the matching update window axis.
    window_axes = [d for d in range(rank) if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
    window = [1] * rank
    for d, u in zip(window_axes, dn.update_window_dims):
        window[d] = updates.shape[u]
    if mode == GatherScatterMode.CLIP:
        starts = _clamp(starts, operand.shape, window)
        inside = np.ones(starts.shape[:-1], dtype=bool)
    else:
        inside = _in_bounds(starts, operand.shape, window, range(rank))
    # Updates with their scatter axes first (in order), then their window axes.
    scatter_axes = [a for a in range(updates.ndim) if a not in dn.update_window_dims]
    ups = np.transpose(updates, scatter_axes + list(dn.update_window_dims))
    nb = len(scatter_axes)
    batch_shape = ups.shape[:nb]
    win_shape = ups.shape[nb:]
    nw = len(win_shape)
    coords = []
    for d in range(rank):
        start = starts[..., d].reshape(batch_shape + (1,) * nw)
        if d in window_axes:
            k = window_axes.index(d)
            offsets = np.arange(win_shape[k]).reshape([1] * nb + [win_shape[k] if e == k else 1 for e in range(nw)])
            coords.append(np.broadcast_to(start + offsets, ups.shape))
        else:
            coords.append(np.broadcast_to(start, ups.shape))
    keep = np.broadcast_to(inside.reshape(batch_shape + (1,) * nw), ups.shape)
    return tuple(c[keep] for c in coords), ups[keep]


def _scatter_rule(combine: Callable[[NDArray, tuple[NDArray, ...], NDArray], None]) -> Callable[..., NDArray]:
    @quiet
    def impl(
        operand: NDArray,
        indices: NDArray,
        updates: NDArray,
        *,
        dimension_numbers: ScatterDimensionNumbers,
        indices_are_sorted: bool,
        unique_indices: bool,
        mode: GatherScatterMode,
        update_jaxpr: Any = None,
        update_consts: Any = (),
    ) -> NDArray:
        out = np.array(operand, copy=True)
        where, values = _scatter_targets(operand, indices, updates, dimension_numbers, mode)
        if out.ndim == 0:  # every update goes to the one element
            flat = out.reshape(1)
            combine(flat, (np.zeros(values.shape[0], dtype=np.intp),), values.astype(out.dtype))
            return flat.reshape(())
        combine(out, where, values.astype(out.dtype))
        return out

    return impl


def _set(out: NDArray, where: tuple[NDArray, ...], values: NDArray) -> None:
    out[where] = values


def _add(out: NDArray, where: tuple[NDArray, ...], values: NDArray) -> None:
    if out.dtype == np.bool_:
        np.logical_or.at(out, where, values)
    else:
        np.add.at(out, where, values)


def _sub(out: NDArray, where: tuple[NDArray, ...], values: NDArray) -> None:
    if out.dtype == np.bool_:
        np.logical_and.at(out, where, np.logical_not(values))
    else:
        np.subtract.at(out, where, values)


def _mul(out: NDArray, where: tuple[NDArray, ...], values: NDArray) -> None:
    if out.dtype == np.bool_:
        np.logical_and.at(out, where, values)
    else:
        np.multiply.at(out, where, values)


def _min(out: NDArray, where: tuple[NDArray, ...], values: NDArray) -> None:
    np.minimum.at(out, where, values)


def _max(out: NDArray, where: tuple[NDArray, ...], values: NDArray) -> None:
    np.maximum.at(out, where, values)


gather_p = Primitive.builtin("gather")
gather_p.def_impl(_gather_impl)
scatter_p = Primitive.builtin("scatter")
scatter_p.def_impl(_scatter_rule(_set))
scatter_add_p = Primitive.builtin("scatter-add")
scatter_add_p.def_impl(_scatter_rule(_add))
scatter_sub_p = Primitive.builtin("scatter-sub")
scatter_sub_p.def_impl(_scatter_rule(_sub))
scatter_mul_p = Primitive.builtin("scatter-mul")
scatter_mul_p.def_impl(_scatter_rule(_mul))
scatter_min_p = Primitive.builtin("scatter-min")
scatter_min_p.def_impl(_scatter_rule(_min))
scatter_max_p = Primitive.builtin("scatter-max")
scatter_max_p.def_impl(_scatter_rule(_max))

rev_p = Primitive.builtin("rev")
rev_p.def_impl(lambda x, *, dimensions: np.flip(x, tuple(dimensions)) if dimensions else x)


# --------------------------------------------------------------------------- functions


def _ints(xs: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _gather_dims(dn: GatherDimensionNumbers) -> GatherDimensionNumbers:
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError(
            f"gather: dimension_numbers must be a lax.GatherDimensionNumbers, got {type(dn).__name__}"
        )
    return GatherDimensionNumbers(*(_ints(f) for f in dn))


def _scatter_dims(dn: ScatterDimensionNumbers) -> ScatterDimensionNumbers:
    if not isinstance(dn, ScatterDimensionNumbers):
        raise TypeError(
            f"scatter: dimension_numbers must be a lax.ScatterDimensionNumbers, got {type(dn).__name__}"
        )
    return ScatterDimensionNumbers(*(_ints(f) for f in dn))


def _supported(mode: GatherScatterMode, what: str) -> GatherScatterMode:
    if mode == GatherScatterMode.ONE_HOT:
        raise NotImplementedError(f"{what}: mode ONE_HOT is not supported by ferrax")
    return mode


def gather(
    operand: Any,
    start_indices: Any,
    dimension_numbers: GatherDimensionNumbers,
    slice_sizes: Sequence[int],
    *,
    unique_indices: bool = False,
    indices_are_sorted: bool = False,
    mode: str | GatherScatterMode | None = None,
    fill_value: Any = None,
) -> Array:
    """XLA's gather: windows of ``slice_sizes`` taken from ``operand`` at the positions
    in ``start_indices`` (index vectors along its last axis), arranged as
    ``dimension_numbers`` says. ``mode`` defaults to ``PROMISE_IN_BOUNDS``; with
    ``"fill"``, windows out of range are ``fill_value`` (NaN for floats, the minimum
    signed or maximum unsigned integer, True, by default)."""
    parsed = _supported(GatherScatterMode.from_any("promise_in_bounds" if mode is None else mode), "gather")
    x = scalar(operand)
    fill: Any = None
    if parsed == GatherScatterMode.FILL_OR_DROP:
        fill = fill_value if fill_value is not None else _default_fill(np.dtype(x.dtype) if isinstance(x, Array) else np.asarray(x).dtype)
        if isinstance(fill, (np.generic, np.ndarray)):
            fill = fill.item()
    return bind1(
        gather_p,
        x,
        scalar(start_indices),
        dimension_numbers=_gather_dims(dimension_numbers),
        slice_sizes=_ints(slice_sizes),
        indices_are_sorted=bool(indices_are_sorted),
        unique_indices=bool(unique_indices),
        mode=parsed,
        fill_value=fill,
    )


def _scatter(
    primitive: Primitive,
    operand: Any,
    scatter_indices: Any,
    updates: Any,
    dimension_numbers: ScatterDimensionNumbers,
    indices_are_sorted: bool,
    unique_indices: bool,
    mode: str | GatherScatterMode | None,
) -> Array:
    x = scalar(operand)
    return bind1(
        primitive,
        x,
        scalar(scatter_indices),
        scalar_as(updates, x),
        dimension_numbers=_scatter_dims(dimension_numbers),
        indices_are_sorted=bool(indices_are_sorted),
        unique_indices=bool(unique_indices),
        mode=_supported(GatherScatterMode.from_any(mode), primitive.name),
        update_jaxpr=_update_jaxpr(primitive.name, x),
        update_consts=(),
    )


# The combining jaxprs of scatter-add/mul/min/max, one per kind and dtype, shared as
# JAX's are (so two scatters of a program print one `let jaxpr`).
_COMBINERS = {"scatter-add": "add", "scatter-mul": "mul", "scatter-min": "min", "scatter-max": "max"}
_update_jaxprs: dict[tuple[str, np.dtype[Any]], Any] = {}


def _update_jaxpr(name: str, operand: Any) -> Any:
    """What JAX holds as a scatter's ``update_jaxpr``: its combining function on two
    scalars of the operand's dtype (None for ``scatter``, which replaces, and for bools,
    which JAX's scatter-add does not take)."""
    from ferrax import _ir
    from ferrax._core import aval_of

    dtype = np.dtype(aval_of(operand).dtype)
    combine = _COMBINERS.get(name)
    if combine is None or dtype == np.bool_:
        return None
    key = (name, dtype)
    jaxpr = _update_jaxprs.get(key)
    if jaxpr is None:
        b = _ir.JaxprBuilder()
        aval = _ir.ShapedArray((), dtype)
        x, y = b.add_invar(aval), b.add_invar(aval)
        jaxpr = _update_jaxprs[key] = _ir.ClosedJaxpr(b.build(b.add_eqn(combine, [x, y], {})), [])
    return jaxpr


def scatter(
    operand: Any,
    scatter_indices: Any,
    updates: Any,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: str | GatherScatterMode | None = None,
) -> Array:
    """XLA's scatter: ``operand`` with the windows of ``updates`` written at the positions
    in ``scatter_indices``. ``mode`` defaults to ``FILL_OR_DROP`` (windows out of range
    are dropped); ``"clip"`` clamps them into range."""
    return _scatter(scatter_p, operand, scatter_indices, updates, dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter_add(
    operand: Any,
    scatter_indices: Any,
    updates: Any,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: str | GatherScatterMode | None = None,
) -> Array:
    """As :func:`scatter`, adding the updates (repeated positions add up)."""
    return _scatter(scatter_add_p, operand, scatter_indices, updates, dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter_sub(
    operand: Any,
    scatter_indices: Any,
    updates: Any,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: str | GatherScatterMode | None = None,
) -> Array:
    """As :func:`scatter`, subtracting the updates."""
    return _scatter(scatter_sub_p, operand, scatter_indices, updates, dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter_mul(
    operand: Any,
    scatter_indices: Any,
    updates: Any,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: str | GatherScatterMode | None = None,
) -> Array:
    """As :func:`scatter`, multiplying by the updates."""
    return _scatter(scatter_mul_p, operand, scatter_indices, updates, dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter_min(
    operand: Any,
    scatter_indices: Any,
    updates: Any,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: str | GatherScatterMode | None = None,
) -> Array:
    """As :func:`scatter`, keeping the minimum of the operand and the updates."""
    return _scatter(scatter_min_p, operand, scatter_indices, updates, dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter_max(
    operand: Any,
    scatter_indices: Any,
    updates: Any,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: str | GatherScatterMode | None = None,
) -> Array:
    """As :func:`scatter`, keeping the maximum of the operand and the updates."""
    return _scatter(scatter_max_p, operand, scatter_indices, updates, dimension_numbers, indices_are_sorted, unique_indices, mode)


def rev(operand: Any, dimensions: Sequence[int]) -> Array:
    """``operand`` with the order of its elements reversed along ``dimensions``."""
    x = scalar(operand)
    # Always an equation (also for no dimensions), as JAX's.
    return bind1(rev_p, x, dimensions=_ints(dimensions))


# -------------------------------------------------------------------------- derivatives
# Forward-mode rules (``ferrax._interpreters.ad``), JAX's, written with the functions
# above so that they differentiate again and stage like user code. Indices are integers:
# they have no tangent and keep their primal value.


def _full(shape: Sequence[int], value: Any, dtype: Any) -> Any:
    return broadcast_in_dim(ConcreteArray(np.asarray(value, dtype), False), shape, ())


def _gather_jvp(g: Any, ans: Any, operand: Any, indices: Any, **params: Any) -> Any:
    # Linear in the operand; windows out of range (FILL_OR_DROP) have a zero tangent.
    if params["mode"] == GatherScatterMode.FILL_OR_DROP:
        params = {**params, "fill_value": 0}
    return bind1(gather_p, g, indices, **params)


ad.defjvp(gather_p, _gather_jvp, None)
ad.deflinear(scatter_add_p, [0, 2])
ad.deflinear(scatter_sub_p, [0, 2])
ad.deflinear(rev_p)


def _inverse_gather(
    dn: ScatterDimensionNumbers, operand_shape: Sequence[int], updates_shape: Sequence[int]
) -> tuple[GatherDimensionNumbers, list[int]]:
    """The gather that reads back, for every update element, the operand element the
    scatter ``dn`` writes it to: its dimension numbers and slice sizes."""
    gdn = GatherDimensionNumbers(
        offset_dims=dn.update_window_dims,
        collapsed_slice_dims=dn.inserted_window_dims,
        start_index_map=dn.scatter_dims_to_operand_dims,
        operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.scatter_indices_batching_dims,
    )
    windows = iter(dn.update_window_dims)
    sizes = [
        1 if d in dn.inserted_window_dims or d in dn.operand_batching_dims else updates_shape[next(windows)]
        for d in range(len(operand_shape))
    ]
    return gdn, sizes


def _scatter_mul_jvp_updates(g: Any, ans: Any, x: Any, i: Any, y: Any, **params: Any) -> Any:
    if not params["unique_indices"]:
        raise NotImplementedError(
            "scatter_mul gradients are only implemented if `unique_indices=True`, "
            f"at {user_location()}"
        )
    dn, mode = params["dimension_numbers"], params["mode"]
    spread = scatter_add(
        _full(x.shape, 0, x.dtype), i, g, dn,
        indices_are_sorted=params["indices_are_sorted"], unique_indices=True, mode=mode,
    )
    return mul(x, spread)


ad.defjvp(
    scatter_mul_p,
    lambda g, ans, x, i, y, **params: bind1(scatter_mul_p, g, i, y, **params),
    None,
    _scatter_mul_jvp_updates,
)


def _scatter_extremal_jvp(primitive: Primitive) -> Callable[..., tuple[Any, Any]]:
    """scatter-min/max: an element's tangent is averaged over the candidates (the
    operand's element and the updates written there) equal to the result, as JAX's
    (the same equations in the same order)."""

    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        operand, indices, updates = primals
        ans = bind1(primitive, operand, indices, updates, **params)
        g_operand, g_updates = ad.instantiate(tangents[0]), ad.instantiate(tangents[2])
        dn, mode = params["dimension_numbers"], params["mode"]
        gdn, sizes = _inverse_gather(dn, operand.shape, updates.shape)
        fill = 0 if mode == GatherScatterMode.FILL_OR_DROP else None

        def read(x: Any) -> Any:
            return gather(x, indices, gdn, sizes, mode=mode, fill_value=fill)

        def count(x: Callable[[], Any]) -> Any:
            zeros = _full(operand.shape, 0, operand.dtype)
            return read(scatter_add(zeros, indices, x(), dn, mode=mode))

        def ones_u() -> Any:
            return _full(updates.shape, 1, updates.dtype)

        def zeros_u() -> Any:
            return _full(updates.shape, 0, updates.dtype)

        initial, target = read(operand), read(ans)
        successful = eq(updates, target)
        retained = eq(initial, target)
        num_updates = count(lambda: select_n(successful, zeros_u(), ones_u()))
        num_refs = count(ones_u)
        # Where the operand's element is retained, it shares the tangent with the
        # updates (1 / (n + 1) each). Computed twice, as JAX does, for the same jaxpr.
        with_operand = div(1.0, add(num_updates, 1.0))
        updates_normalizer = select_n(retained, div(1.0, num_updates), with_operand)
        updates_coef = select_n(successful, zeros_u(), updates_normalizer)
        with_operand = div(1.0, add(num_updates, 1.0))
        operand_normalizer = select_n(retained, zeros_u(), with_operand)
        operand_coef = div(add(-1.0, operand_normalizer), num_refs)
        tangent_updates = add(mul(read(g_operand), operand_coef), mul(g_updates, updates_coef))
        tangent = scatter_add(
            g_operand, indices, tangent_updates, dn,
            indices_are_sorted=params["indices_are_sorted"], unique_indices=params["unique_indices"], mode=mode,
        )
        return ans, tangent

    return rule


scatter_min_p.def_jvp(_scatter_extremal_jvp(scatter_min_p))
scatter_max_p.def_jvp(_scatter_extremal_jvp(scatter_max_p))


def _scatter_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    """Plain scatter (JAX's rule, the same equations in the same order). With unique
    indices the tangents are scattered like the values. Otherwise the update that wins
    each element is found by scattering distinct ids and reading them back; the operand
    and the updates are masked to what the result keeps, and the result and its tangent
    are scatter-adds of the masked values (so that only scatter-add needs a transpose
    rule)."""
    operand, indices, updates = primals
    g_operand, g_updates = ad.instantiate(tangents[0]), ad.instantiate(tangents[2])
    if params["unique_indices"]:
        ans = bind1(scatter_p, operand, indices, updates, **params)
        return ans, bind1(scatter_p, g_operand, indices, g_updates, **params)
    dn, mode = params["dimension_numbers"], params["mode"]
    sorted_, unique = params["indices_are_sorted"], params["unique_indices"]
    ids_shape = [1 if a in dn.update_window_dims else n for a, n in enumerate(updates.shape)]
    num_ids = int(np.prod(ids_shape, dtype=np.int64))
    id_dtype = np.dtype(np.uint32)
    update_ids = add(reshape(iota(id_dtype, num_ids), ids_shape), _full(updates.shape, 1, id_dtype))
    scattered_ids = scatter(
        _full(operand.shape, 0, id_dtype), indices, update_ids, dn,
        indices_are_sorted=sorted_, unique_indices=unique, mode=mode,
    )
    gdn, sizes = _inverse_gather(dn, operand.shape, updates.shape)
    gathered_ids = gather(scattered_ids, indices, gdn, sizes)

    def untouched(x: Any) -> Any:  # x where no update landed, else 0
        kept = eq(scattered_ids, _full(operand.shape, 0, id_dtype))
        return select_n(kept, _full(x.shape, 0, x.dtype), x)

    def winning(u: Any) -> Any:  # the updates that the result keeps, others 0
        kept = eq(update_ids, gathered_ids)
        return select_n(kept, _full(u.shape, 0, u.dtype), u)

    masked = untouched(operand), winning(updates), untouched(g_operand), winning(g_updates)

    def scatter_added(x: Any, u: Any) -> Any:
        return scatter_add(x, indices, u, dn, indices_are_sorted=sorted_, unique_indices=unique, mode=mode)

    return scatter_added(masked[0], masked[1]), scatter_added(masked[2], masked[3])


scatter_p.def_jvp(_scatter_jvp)


# ---------------------------------------------------------------------------- batching
# Rules for ``vmap`` (``ferrax._interpreters.batching``). The batch axis goes first. A
# gather or scatter of a batched operand at unbatched indices takes the batch axis as one
# more window axis (the whole of it); with batched indices, the batch axes of operand and
# indices are paired as batching dimensions (``operand_batching_dims``), so that every
# batch element reads (or writes) its own operand. An unbatched operand at batched
# indices is read as it is; a scatter broadcasts it first (every element writes its own).


def _shift(axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(a + 1 for a in axes)


def _gather_batch(
    vals: Sequence[Any],
    dims: Sequence[int | None],
    *,
    axis_size: int,
    dimension_numbers: GatherDimensionNumbers,
    slice_sizes: tuple[int, ...],
    indices_are_sorted: bool,
    unique_indices: bool,
    mode: GatherScatterMode,
    fill_value: Any,
) -> tuple[Any, int]:
    from ferrax._interpreters import batching

    operand, indices = vals
    operand_dim, indices_dim = dims
    dn = dimension_numbers
    params: dict[str, Any] = {"mode": mode, "fill_value": fill_value}
    if indices_dim is None:
        assert operand_dim is not None  # a rule runs with a batched operand
        operand = batching.moveaxis(operand, operand_dim, 0)
        dn = GatherDimensionNumbers(
            offset_dims=(0, *_shift(dn.offset_dims)),
            collapsed_slice_dims=_shift(dn.collapsed_slice_dims),
            start_index_map=_shift(dn.start_index_map),
            operand_batching_dims=_shift(dn.operand_batching_dims),
            start_indices_batching_dims=dn.start_indices_batching_dims,
        )
        sizes = (axis_size, *slice_sizes)
        params.update(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
    elif operand_dim is None:
        indices = batching.moveaxis(indices, indices_dim, 0)
        dn = dn._replace(
            offset_dims=_shift(dn.offset_dims),
            start_indices_batching_dims=_shift(dn.start_indices_batching_dims),
        )
        sizes = slice_sizes
        # The elements' indices together may repeat or be out of order.
        params.update(indices_are_sorted=False, unique_indices=False)
    else:
        operand = batching.moveaxis(operand, operand_dim, 0)
        indices = batching.moveaxis(indices, indices_dim, 0)
        dn = GatherDimensionNumbers(
            offset_dims=_shift(dn.offset_dims),
            collapsed_slice_dims=_shift(dn.collapsed_slice_dims),
            start_index_map=_shift(dn.start_index_map),
            operand_batching_dims=(0, *_shift(dn.operand_batching_dims)),
            start_indices_batching_dims=(0, *_shift(dn.start_indices_batching_dims)),
        )
        sizes = (1 if axis_size else 0, *slice_sizes)
        params.update(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
    return bind1(gather_p, operand, indices, dimension_numbers=dn, slice_sizes=sizes, **params), 0


def _scatter_batch(primitive: Primitive) -> Callable[..., tuple[Any, int]]:
    def rule(
        vals: Sequence[Any],
        dims: Sequence[int | None],
        *,
        axis_size: int,
        dimension_numbers: ScatterDimensionNumbers,
        **params: Any,
    ) -> tuple[Any, int]:
        from ferrax._interpreters import batching

        operand, indices, updates = vals
        operand_dim, indices_dim, updates_dim = dims
        dn = dimension_numbers
        # Every element writes into its own operand: an unbatched one is broadcast.
        operand = batching.bdim_at_front(operand, operand_dim, axis_size)
        updates = batching.bdim_at_front(updates, updates_dim, axis_size)
        if indices_dim is None:
            dn = ScatterDimensionNumbers(
                update_window_dims=(0, *_shift(dn.update_window_dims)),
                inserted_window_dims=_shift(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_shift(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=_shift(dn.operand_batching_dims),
                scatter_indices_batching_dims=dn.scatter_indices_batching_dims,
            )
        else:
            indices = batching.moveaxis(indices, indices_dim, 0)
            dn = ScatterDimensionNumbers(
                update_window_dims=_shift(dn.update_window_dims),
                inserted_window_dims=_shift(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_shift(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=(0, *_shift(dn.operand_batching_dims)),
                scatter_indices_batching_dims=(0, *_shift(dn.scatter_indices_batching_dims)),
            )
        return bind1(primitive, operand, indices, updates, dimension_numbers=dn, **params), 0

    return rule


def _rev_batch(vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, dimensions: tuple[int, ...]) -> tuple[Any, int | None]:
    (x,), (d,) = vals, dims
    assert d is not None
    return bind1(rev_p, x, dimensions=tuple(a + 1 if a >= d else a for a in dimensions)), d


gather_p.def_batch(_gather_batch)
for _p in (scatter_p, scatter_add_p, scatter_sub_p, scatter_mul_p, scatter_min_p, scatter_max_p):
    _p.def_batch(_scatter_batch(_p))
rev_p.def_batch(_rev_batch)
