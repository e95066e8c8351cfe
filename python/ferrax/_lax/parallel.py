"""Collectives over named axes, with JAX 0.10's names, params and semantics.

``psum``, ``pmax``, ``pmin`` (``axes``), ``pvary`` (``axes``: marks a value as varying
over mesh axes; the identity on data), ``all_gather``, ``reduce_scatter``
(``ferrax.lax.psum_scatter``), ``ppermute``, ``all_to_all`` and ``axis_index``. An axis
name is bound either by ``vmap(..., axis_name=)`` or by a ``shard_map``'s mesh
(:mod:`ferrax._interpreters.axis_env`).

* Under a ``vmap`` whose axis a collective names, the collective takes its
  single-device meaning there (each primitive's *own-axis* batching rule below: ``psum``
  sums over the batch axis, ``axis_index`` is an ``iota``, ``all_gather`` moves the batch
  axis into place, ...), so it never reaches a jaxpr.
* A collective over another axis applied to a batched value is the same collective on
  the batched value (its dimension params shifted past the batch axis).
* Inside a ``shard_map`` body the collective is an equation of the jaxpr; the Rust
  passes transpose it (``psum`` <-> ``pvary``, ``all_gather`` <-> ``reduce_scatter``,
  ``ppermute`` by the inverse permutation, ``all_to_all`` with its axes swapped) and
  XLA runs it.

Reverse mode under a named ``vmap`` (``vmap(grad(f), axis_name=...)`` with a ``psum``
in ``f``) follows JAX's vmap semantics: each lane's cotangent is its own, so ``psum``'s
transpose sums them. The transpose pass turns ``psum`` into ``pvary`` (the shard_map
meaning); a ``pvary`` over a vmap's axis, which users cannot write (JAX refuses it), is
only ever such a transpose, and its batching rule sums over the lanes.

Forward mode: every collective but ``pmax``/``pmin`` is linear. JAX 0.10 has no JVP rule
for ``pmax``/``pmin``; ferrax gives them ``reduce_max``'s: the tangent averaged over the
positions (devices, lanes) holding the extremum.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import ConcreteArray, Primitive, aval_of, find_top_trace, user_location
from ferrax._interpreters import ad, batching
from ferrax._interpreters.axis_env import frame_of, unbound_axis_error
from ferrax._lax._operands import scalar, scalar_as
from ferrax._lax.elementwise import convert_element_type, div, eq, mul
from ferrax._lax.reductions import reduce_max, reduce_min, reduce_sum
from ferrax._lax.structural import broadcast_in_dim, concatenate, expand_dims_as_jax, iota, reshape, slice, squeeze
from ferrax.tree_util import tree_flatten, tree_unflatten

__all__ = [
    "all_gather",
    "all_to_all",
    "axis_index",
    "axis_size",
    "pcast",
    "pmax",
    "pmean",
    "pmin",
    "ppermute",
    "pshuffle",
    "psum",
    "psum_scatter",
    "pvary",
]

AxisName = Any  # a hashable name (str), or a tuple of them


class Collective(Primitive):
    """A primitive over named axes.

    Its ``bind`` looks the axis names up: an unbound one is JAX's ``NameError``; a name
    a ``vmap`` binds sends the application to that ``vmap``'s batching trace even when
    the operands are not batched there (``psum`` of an unbatched value is the axis size
    times it), by raising the operands into the innermost such trace if it is above
    their own.
    """

    def bind(self, *args: Any, **params: Any) -> Any:
        axes_of = self.collective_axes
        assert axes_of is not None
        main = None
        for name in axes_of(params):
            frame = frame_of(name)
            if frame is None:
                raise unbound_axis_error(name, _USER_NAMES.get(self.name, self.name))
            if frame.main is not None and (main is None or frame.main.level > main.level):
                main = frame.main
        trace = find_top_trace(args)
        if main is not None and main.level > trace.main.level:
            trace = main.trace
        tracers = [trace.full_raise(a) for a in args]
        outs = trace.process_primitive(self, tracers, params)
        return outs if self.multiple_results else outs[0]


_USER_NAMES = {"reduce_scatter": "psum_scatter"}


def _names(axis_name: AxisName) -> tuple[str, ...]:
    """An axis name or a tuple of them, as a tuple (JAX's ``TypeError`` for a set)."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}, at {user_location()}")
    if isinstance(axis_name, (tuple, list)):
        return tuple(axis_name)
    return (axis_name,)


def _axes_param(params: dict[str, Any]) -> tuple[str, ...]:
    return tuple(params["axes"])


def _axis_name_param(params: dict[str, Any]) -> tuple[str, ...]:
    return _names(params["axis_name"])


def _collective(name: str, axes_of: Any) -> Collective:
    p = Collective(name)
    p._builtin = True
    p.collective_axes = axes_of
    return p


psum_p = _collective("psum", _axes_param)
pmax_p = _collective("pmax", _axes_param)
pmin_p = _collective("pmin", _axes_param)
pvary_p = _collective("pvary", _axes_param)
all_gather_p = _collective("all_gather", _axis_name_param)
reduce_scatter_p = _collective("reduce_scatter", _axis_name_param)
ppermute_p = _collective("ppermute", _axis_name_param)
all_to_all_p = _collective("all_to_all", _axis_name_param)
axis_index_p = _collective("axis_index", _axis_name_param)


# ------------------------------------------------------------------------ user functions


def _no_groups(axis_index_groups: Any, what: str) -> None:
    if axis_index_groups is not None:
        raise NotImplementedError(f"{what}: axis_index_groups other than None are not supported, at {user_location()}")


def axis_size(axis_name: AxisName) -> int:
    """The size of a bound named axis (the product of the sizes for a tuple of names)."""
    size = 1
    for name in _names(axis_name):
        frame = frame_of(name)
        if frame is None:
            raise unbound_axis_error(name, "axis_size")
        size *= frame.size
    return size


def _check_bound(names: Sequence[str], what: str) -> None:
    for name in names:
        if frame_of(name) is None:
            raise unbound_axis_error(name, what)


def _leaves(x: Any) -> tuple[list[Any], Any]:
    leaves, tree = tree_flatten(x)
    return [scalar(v) for v in leaves], tree


def psum(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The sum of ``x`` (a pytree of arrays) over the devices or lanes of the named
    axes; booleans are counted as int32 (as JAX)."""
    names = _names(axis_name)
    _no_groups(axis_index_groups, "psum")
    _check_bound(names, "psum")
    leaves, tree = _leaves(x)
    if not names:
        return tree_unflatten(tree, leaves)
    outs = []
    for v in leaves:
        if aval_of(v).dtype == np.bool_:
            v = convert_element_type(v, np.int32)
        outs.append(psum_p.bind(v, axes=names, axis_index_groups=None))
    return tree_unflatten(tree, outs)


def pmean(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The mean of ``x`` over the named axes (integers give floats, as true division)."""
    names = _names(axis_name)
    _no_groups(axis_index_groups, "pmean")
    _check_bound(names, "pmean")
    n = axis_size(names)
    summed = psum(x, names)
    leaves, tree = tree_flatten(summed)
    return tree_unflatten(tree, [v / n for v in leaves])


def _extremum(p: Primitive, what: str, x: Any, axis_name: AxisName, axis_index_groups: Any) -> Any:
    names = _names(axis_name)
    _no_groups(axis_index_groups, what)
    _check_bound(names, what)
    leaves, tree = _leaves(x)
    if not names:
        return tree_unflatten(tree, leaves)
    return tree_unflatten(tree, [p.bind(v, axes=names, axis_index_groups=None) for v in leaves])


def pmax(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The maximum of ``x`` over the named axes."""
    return _extremum(pmax_p, "pmax", x, axis_name, axis_index_groups)


def pmin(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The minimum of ``x`` over the named axes."""
    return _extremum(pmin_p, "pmin", x, axis_name, axis_index_groups)


def pvary(x: Any, axis_name: AxisName) -> Any:
    """``x`` marked as varying over the named mesh axes (the identity on values; what
    JAX 0.10 writes ``pcast(x, axis_name, to='varying')``)."""
    names = _names(axis_name)
    _check_bound(names, "pvary")
    for name in names:
        frame = frame_of(name)
        if frame is not None and frame.main is not None:
            raise ValueError(f"pvary should be called under ferrax.shard_map (axis {name!r} is a vmap's), at {user_location()}")
    leaves, tree = _leaves(x)
    if not names:
        return tree_unflatten(tree, leaves)
    return tree_unflatten(tree, [pvary_p.bind(v, axes=names) for v in leaves])


def pcast(x: Any, axis_name: AxisName, *, to: str) -> Any:
    """JAX 0.10's ``lax.pcast``: ``to='varying'`` is :func:`pvary`; an invariant value
    is what ``psum`` returns, so ``to='invariant'`` is refused as JAX refuses a cast
    from varying to invariant."""
    if to not in ("varying", "invariant", "reduced", "unreduced"):
        raise ValueError(
            "Got unexpected `to` value. Allowed `to` values are: "
            f"('varying', 'invariant', 'reduced', 'unreduced'), at {user_location()}"
        )
    if to != "varying":
        raise ValueError(f"Unsupported pcast from=varying, to={to!r}, at {user_location()}")
    return pvary(x, axis_name)


def all_gather(
    x: Any, axis_name: AxisName, *, axis_index_groups: Any = None, axis: int = 0, tiled: bool = False,
    to: str = "varying",
) -> Any:
    """Every device's (lane's) ``x`` stacked along a new axis ``axis`` (``tiled``:
    concatenated along the existing axis ``axis``)."""
    names = _names(axis_name)
    _no_groups(axis_index_groups, "all_gather")
    _check_bound(names, "all_gather")
    leaves, tree = _leaves(x)
    if not names:
        return tree_unflatten(tree, leaves)
    size = axis_size(names)
    outs = []
    for v in leaves:
        rank = len(aval_of(v).shape)
        bound = rank if tiled else rank + 1
        if not -bound <= axis < bound:
            raise ValueError(f"axis {axis} is out of bounds for array of dimension {bound}, at {user_location()}")
        outs.append(
            all_gather_p.bind(
                v, all_gather_dimension=axis % bound, axis_index_groups=None, axis_name=names,
                axis_size=size, tiled=bool(tiled),
            )
        )
    return tree_unflatten(tree, outs)


def psum_scatter(
    x: Any, axis_name: AxisName, *, scatter_dimension: int = 0, axis_index_groups: Any = None, tiled: bool = False
) -> Any:
    """The sum over the named axes, of which each device (lane) keeps its block along
    ``scatter_dimension`` (``tiled=False``: that dimension's size is the axis size and
    it is removed)."""
    names = _names(axis_name)
    _no_groups(axis_index_groups, "psum_scatter")
    _check_bound(names, "psum_scatter")
    leaves, tree = _leaves(x)
    size = axis_size(names)
    outs = []
    for v in leaves:
        shape = aval_of(v).shape
        if not -len(shape) <= scatter_dimension < max(len(shape), 1):
            raise ValueError(
                f"scatter_dimension {scatter_dimension} is out of bounds for array of dimension "
                f"{len(shape)}, at {user_location()}"
            )
        d = scatter_dimension % max(len(shape), 1)
        n = shape[d] if shape else 1
        if tiled and n % size != 0:
            raise ValueError(
                f"tiled reduce_scatter operand scatter dimension size {n} must be divisible by "
                f"shard_count {size}, at {user_location()}"
            )
        if not tiled and n != size:
            raise ValueError(
                f"reduce_scatter operand scatter dimension size {n} must match shard count {size}, "
                f"at {user_location()}"
            )
        outs.append(
            reduce_scatter_p.bind(
                v, axis_index_groups=None, axis_name=names, axis_size=size, scatter_dimension=d,
                tiled=bool(tiled),
            )
        )
    return tree_unflatten(tree, outs)


def ppermute(x: Any, axis_name: AxisName, perm: Sequence[tuple[int, int]]) -> Any:
    """Sends each device's (lane's) ``x`` along the ``(source, destination)`` pairs of
    ``perm``; a device no pair sends to gets zeros."""
    names = _names(axis_name)
    _check_bound(names, "ppermute")
    size = axis_size(names)
    pairs = tuple((int(s), int(d)) for s, d in perm)
    srcs = [s for s, _ in pairs]
    dsts = [d for _, d in pairs]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {list(perm)}, at {user_location()}")
    if any(not 0 <= i < size for i in srcs + dsts):
        raise ValueError(
            f"ppermute perm indices must be in range(axis_size) = range({size}), got {list(perm)}, "
            f"at {user_location()}"
        )
    leaves, tree = _leaves(x)
    return tree_unflatten(tree, [ppermute_p.bind(v, axis_name=names, perm=pairs) for v in leaves])


def pshuffle(x: Any, axis_name: AxisName, perm: Sequence[int]) -> Any:
    """Device (lane) ``i`` gets the ``x`` of device ``perm[i]`` (``perm`` a permutation)."""
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}, at {user_location()}")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


def all_to_all(
    x: Any, axis_name: AxisName, split_axis: int, concat_axis: int, *, axis_index_groups: Any = None,
    tiled: bool = False,
) -> Any:
    """Splits ``x`` along ``split_axis`` into one block per device (lane), sends block
    ``j`` to device ``j``, and concatenates the blocks received along ``concat_axis``
    (``tiled=False``: ``split_axis``'s size is the axis size; it is removed and a new
    axis of the axis size is inserted at ``concat_axis``)."""
    names = _names(axis_name)
    _no_groups(axis_index_groups, "all_to_all")
    _check_bound(names, "all_to_all")
    size = axis_size(names)
    name_param: Any = names[0] if len(names) == 1 else names
    leaves, tree = _leaves(x)
    outs = []
    for v in leaves:
        shape = aval_of(v).shape
        split, concat = split_axis, concat_axis
        if not -len(shape) <= split < len(shape):
            raise ValueError(f"axis {split} is out of bounds for array of dimension {len(shape)}, at {user_location()}")
        split %= len(shape)
        if tiled:
            if shape[split] % size != 0:
                raise ValueError(
                    f"The size of all_to_all split_axis ({shape[split]}) has to be divisible by the size "
                    f"of the named axis {axis_name} ({size}), at {user_location()}"
                )
            if not -len(shape) <= concat < len(shape):
                raise ValueError(f"axis {concat} is out of bounds for array of dimension {len(shape)}, at {user_location()}")
            concat %= len(shape)
        else:
            if shape[split] != size:
                raise ValueError(
                    "all_to_all requires the size of the mapped axis axis_name to equal "
                    f"x.shape[split_axis], but they are {size} and {shape[split]} respectively, "
                    f"at {user_location()}"
                )
            if not -len(shape) <= concat < len(shape):
                raise ValueError(f"axis {concat} is out of bounds for array of dimension {len(shape)}, at {user_location()}")
            concat %= len(shape)
            # The primitive splits and concatenates existing axes: a new axis of size 1
            # to concatenate along, and the split axis (then of size 1) squeezed after.
            if split < concat:
                concat += 1
                v = expand_dims_as_jax(v, (concat,))
            elif split > concat:
                v = expand_dims_as_jax(v, (concat,))
                split += 1
        out = all_to_all_p.bind(
            v, axis_index_groups=None, axis_name=name_param, concat_axis=concat, split_axis=split, tiled=bool(tiled)
        )
        if not tiled and split != concat:
            out = squeeze(out, (split,))
        outs.append(out)
    return tree_unflatten(tree, outs)


def axis_index(axis_name: AxisName) -> Array:
    """This device's (lane's) index along the named axis (int32; for a tuple of names,
    the row-major index over them)."""
    names = _names(axis_name)
    _check_bound(names, "axis_index")
    if len(names) == 1:
        out: Any = axis_index_p.bind(axis_name=names[0])
        return out  # type: ignore[no-any-return]
    index: Any = None
    for name in names:
        i = axis_index_p.bind(axis_name=name)
        index = i if index is None else index * axis_size(name) + i
    return index  # type: ignore[no-any-return]


# -------------------------------------------------------------------------- derivatives

for _p in (psum_p, pvary_p, all_gather_p, reduce_scatter_p, ppermute_p, all_to_all_p):
    ad.deflinear(_p)


def _extremum_jvp(p: Primitive) -> Any:
    def rule(primals: Sequence[Any], tangents: Sequence[Any], *, axes: tuple[str, ...], axis_index_groups: Any) -> tuple[Any, Any]:
        # reduce_max's rule across devices: the tangent averaged over the positions
        # holding the extremum.
        (x,), (t,) = primals, tangents
        ans = p.bind(x, axes=axes, axis_index_groups=axis_index_groups)
        t = ad.instantiate(t)
        where = convert_element_type(eq(x, ans), aval_of(t).dtype)
        num = psum_p.bind(mul(t, where), axes=axes, axis_index_groups=None)
        count = psum_p.bind(where, axes=axes, axis_index_groups=None)
        return ans, div(num, count)

    return rule


pmax_p.def_jvp(_extremum_jvp(pmax_p))
pmin_p.def_jvp(_extremum_jvp(pmin_p))


def _axis_index_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    # An integer with no operand: never differentiated (kept for the rule table).
    out = axis_index_p.bind(**params)
    return out, ad.Zero(aval_of(out))


axis_index_p.def_jvp(_axis_index_jvp)


# ---------------------------------------------------------------------------- batching
# One rule per collective, ``rule(vals, dims, own, size, params)``, with two cases: the
# vmap's own axis is among those the collective names (``own`` is its name: the
# collective's single-device meaning over the batch axis, then the collective over the
# remaining names), or another axis with a batched operand (``own`` is None: the same
# collective on the batched value, its dimension params shifted past the batch axis).

Params = dict[str, Any]
Dims = Sequence[int | None]


def _rest(names: Sequence[str], own: str) -> tuple[str, ...]:
    return tuple(n for n in names if n != own)


def _only_own(names: Sequence[str], own: str, what: str) -> None:
    if tuple(names) != (own,):
        raise NotImplementedError(
            f"{what} over the axes {tuple(names)} inside a vmap of axis {own!r}: only the vmap's "
            f"axis alone is supported, at {user_location()}"
        )


def _times(x: Any, n: int) -> Any:
    return mul(x, scalar_as(n, x))


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(aval_of(x).shape)


def _front(x: Any, d: int | None) -> Any:
    assert d is not None
    return batching.moveaxis(x, d, 0)


def _reduction_rule(p: Primitive, reduce: Any, if_unbatched: Any) -> Any:
    """psum, pmax, pmin: reduced over the batch axis (unbatched: ``if_unbatched``)."""

    def rule(vals: Sequence[Any], dims: Dims, own: str | None, size: int, params: Params) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        if own is None:
            return p.bind(x, **params), d
        out = if_unbatched(x, size) if d is None else reduce(x, (d,))
        rest = _rest(params["axes"], own)
        if rest:
            out = p.bind(out, axes=rest, axis_index_groups=params["axis_index_groups"])
        return out, None

    return rule


def _pvary_rule(vals: Sequence[Any], dims: Dims, own: str | None, size: int, params: Params) -> tuple[Any, Any]:
    # Users cannot apply pvary over a vmap's axis (JAX's ValueError, see pvary): over
    # one, a pvary is the transpose of a psum, which in JAX's vmap semantics is a psum
    # (each lane's cotangent is its own: they are summed), so it sums over the lanes.
    (x,), (d,) = vals, dims
    if own is None:
        return pvary_p.bind(x, **params), d
    out = _times(x, size) if d is None else reduce_sum(x, (d,))
    rest = _rest(params["axes"], own)
    return (pvary_p.bind(out, axes=rest) if rest else out), None


def _all_gather_rule(vals: Sequence[Any], dims: Dims, own: str | None, size: int, params: Params) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    a = params["all_gather_dimension"]
    if own is None:
        return all_gather_p.bind(_front(x, d), **{**params, "all_gather_dimension": a + 1}), 0
    _only_own(params["axis_name"], own, "all_gather")
    stacked = batching.bdim_at_front(x, d, size)
    out = batching.moveaxis(stacked, 0, a)
    if params["tiled"]:
        shape = _shape(stacked)[1:]
        out = reshape(out, [*shape[:a], size * shape[a], *shape[a + 1 :]])
    return out, None


def _reduce_scatter_rule(vals: Sequence[Any], dims: Dims, own: str | None, size: int, params: Params) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    s = params["scatter_dimension"]
    if own is None:
        return reduce_scatter_p.bind(_front(x, d), **{**params, "scatter_dimension": s + 1}), 0
    _only_own(params["axis_name"], own, "psum_scatter")
    total = _times(x, size) if d is None else reduce_sum(x, (d,))
    if params["tiled"]:
        shape = _shape(total)
        total = reshape(total, [*shape[:s], size, shape[s] // size, *shape[s + 1 :]])
    # Lane i keeps block i of the scatter dimension: that dimension is the batch axis.
    return total, s


def _ppermute_rule(vals: Sequence[Any], dims: Dims, own: str | None, size: int, params: Params) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if own is None:
        return ppermute_p.bind(x, **params), d
    _only_own(params["axis_name"], own, "ppermute")
    stacked = batching.bdim_at_front(x, d, size)
    rest = list(_shape(stacked)[1:])
    source = {dst: src for src, dst in params["perm"]}
    zero = ConcreteArray(np.zeros((), aval_of(stacked).dtype), False)
    pieces = []
    for dst in range(size):
        src = source.get(dst)
        if src is None:  # no lane sends here: zeros
            pieces.append(broadcast_in_dim(zero, [1, *rest], ()))
        else:
            pieces.append(slice(stacked, [src] + [0] * len(rest), [src + 1, *rest]))
    return concatenate(pieces, 0), 0


def _all_to_all_rule(vals: Sequence[Any], dims: Dims, own: str | None, size: int, params: Params) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    s, c = params["split_axis"], params["concat_axis"]
    if own is None:
        return all_to_all_p.bind(_front(x, d), **{**params, "split_axis": s + 1, "concat_axis": c + 1}), 0
    # The primitive's meaning (see all_to_all): lane j gets the blocks j of the split
    # axis of every lane i, concatenated in the order of i along the concat axis.
    _only_own(_names(params["axis_name"]), own, "all_to_all")
    n = size
    stacked = batching.bdim_at_front(x, d, n)  # (i, *shape)
    shape = _shape(stacked)[1:]
    k = shape[s] // n
    # (i, *shape[:s], j, k, *shape[s+1:]), then j first: (j, i, *lane).
    blocks = reshape(stacked, [n, *shape[:s], n, k, *shape[s + 1 :]])
    blocks = batching.moveaxis(blocks, 1 + s, 0)
    lane = [*shape[:s], k, *shape[s + 1 :]]
    # i just before the concat axis, then merged into it.
    blocks = batching.moveaxis(blocks, 1, 1 + c)
    return reshape(blocks, [n, *lane[:c], n * lane[c], *lane[c + 1 :]]), 0


def _axis_index_rule(vals: Sequence[Any], dims: Dims, own: str | None, size: int, params: Params) -> tuple[Any, Any]:
    assert own is not None  # it has no operand to be batched
    return iota(np.int32, size), 0


psum_p.collective_batch_rule = _reduction_rule(psum_p, reduce_sum, _times)
pmax_p.collective_batch_rule = _reduction_rule(pmax_p, reduce_max, lambda x, n: x)
pmin_p.collective_batch_rule = _reduction_rule(pmin_p, reduce_min, lambda x, n: x)
pvary_p.collective_batch_rule = _pvary_rule
all_gather_p.collective_batch_rule = _all_gather_rule
reduce_scatter_p.collective_batch_rule = _reduce_scatter_rule
ppermute_p.collective_batch_rule = _ppermute_rule
all_to_all_p.collective_batch_rule = _all_to_all_rule
axis_index_p.collective_batch_rule = _axis_index_rule


def _as_batch_rule(p: Primitive) -> None:
    """The ordinary batching rule: another axis than the vmap's (BatchTrace calls the
    collective rule itself; this is for callers that only know ``batch_rule``)."""
    crule = p.collective_batch_rule
    assert crule is not None

    def rule(vals: Sequence[Any], dims: Dims, *, axis_size: int, **params: Any) -> tuple[Any, Any]:
        return crule(vals, dims, None, axis_size, params)  # type: ignore[no-any-return]

    p.def_batch(rule)


def _no_eager(p: Primitive) -> None:
    """A collective alone has no eager meaning: it runs inside a shard_map (compiled) or
    a named vmap (rewritten by its batching rule); reaching the eager evaluator means its
    axis is bound by neither."""

    def impl(*args: Any, **params: Any) -> Any:
        axes_of = p.collective_axes
        assert axes_of is not None
        raise unbound_axis_error(axes_of(params)[0], _USER_NAMES.get(p.name, p.name))

    p.def_impl(impl)


for _p in (psum_p, pmax_p, pmin_p, pvary_p, all_gather_p, reduce_scatter_p, ppermute_p, all_to_all_p, axis_index_p):
    _as_batch_rule(_p)
    _no_eager(_p)
