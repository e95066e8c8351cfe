"""``shard_map``: a function written for one device's block, mapped over a mesh (JAX 0.10's
``jax.shard_map``), and the ``shard_map`` primitive's Python rules.

``shard_map(f, mesh=mesh, in_specs=..., out_specs=...)(*args)`` traces ``f`` on each
argument's per-device block (each dimension divided by the sizes of the mesh axes its
spec names) with the mesh's axes bound for the collectives (``lax.psum(x, "x")``), so
the body is one jaxpr for every device. The Rust pass ``insert_pvary`` makes the body's
varying axes explicit (``pvary`` equations, JAX's ``vma`` types): it tells which mesh
axes each output varies over, checked against ``out_specs`` (an output declared
replicated over an axis must not vary over it), and it makes the transposes local
(``psum``'s is ``pvary``, ``pvary``'s is ``psum``). The result is one ``shard_map``
equation; called with no transformation active it runs through ``ferrax.jit`` over the
mesh's devices (XLA's SPMD partitioner, ``sdy.manual_computation``).

Rules: JVP (the body's JVP, tangents laid out as their primals), batching (the body
vectorized, the batch axis unsharded: ``None`` inserted first in the specs), partial
evaluation (the Rust pass, as for ``jit``) and transposition (the Rust pass).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from ferrax import _ir
from ferrax._core import EvalTrace, Primitive, aval_of, find_top_trace, user_location
from ferrax._interpreters import ad, batching
from ferrax._interpreters.axis_env import AxisFrame, bind_axes
from ferrax._interpreters.partial_eval import partial_eval_rules, split_by_pass
from ferrax._staging import trace_to_jaxpr
from ferrax import sharding as sharding_module
from ferrax.sharding import Mesh, NamedSharding, PartitionSpec
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = ["shard_map", "shard_map_p"]

shard_map_p = Primitive.builtin("shard_map", multiple_results=True)

Spec = tuple[Any, ...]  # a partition spec as the IR takes it: entries None, a name, or names
MeshParam = Any  # a Mesh, or ((name, size), ...) as the IR gives it back


# ----------------------------------------------------------------------------- helpers


def _mesh_axes(mesh: MeshParam) -> tuple[tuple[str, int], ...]:
    if isinstance(mesh, Mesh):
        return mesh.shape_tuple
    return tuple((str(n), int(s)) for n, s in mesh)


def _frames(mesh: MeshParam) -> list[AxisFrame]:
    return [AxisFrame(name, size, None) for name, size in _mesh_axes(mesh)]


def _spec_axes(spec: Spec) -> list[tuple[str, ...]]:
    """The mesh axes splitting each dimension the spec names."""
    out: list[tuple[str, ...]] = []
    for entry in spec:
        if entry is None:
            out.append(())
        elif isinstance(entry, str):
            out.append((entry,))
        else:
            out.append(tuple(entry))
    return out


def _varying(spec: Spec) -> tuple[str, ...]:
    """The mesh axes a value laid out by ``spec`` varies over (those it is split over)."""
    return tuple(a for axes in _spec_axes(spec) for a in axes)


def _as_spec(spec: Any) -> Spec:
    if spec is None:
        return ()
    return tuple(spec)


def _tiles(mesh: MeshParam, spec: Spec, rank: int) -> list[int]:
    sizes = dict(_mesh_axes(mesh))
    axes = _spec_axes(spec)
    return [math.prod(sizes[a] for a in axes[d]) if d < len(axes) else 1 for d in range(rank)]


def _with_batch_axis(spec: Spec) -> Spec:
    return (None, *spec)


def _pvary(
    body: _ir.ClosedJaxpr, mesh: MeshParam, in_specs: Sequence[Spec], out_specs: Sequence[Spec]
) -> tuple[_ir.ClosedJaxpr, list[tuple[str, ...]]]:
    """The body with its varying axes made explicit (Rust's ``insert_pvary``: ``pvary``
    where an operand varies over fewer axes than its equation needs, and on outputs
    varying over fewer axes than their out_spec names), and the axes each output varies
    over."""
    jaxpr, out_axes = _ir.insert_pvary(
        body.jaxpr, _mesh_axes(mesh), [list(_varying(s)) for s in in_specs], [list(_varying(s)) for s in out_specs]
    )
    return _ir.ClosedJaxpr(jaxpr, list(body.consts)), [tuple(a) for a in out_axes]


def _params(
    body: _ir.ClosedJaxpr, mesh: MeshParam, in_specs: Sequence[Spec], out_specs: Sequence[Spec], check_vma: bool
) -> dict[str, Any]:
    return {
        "jaxpr": body,
        "mesh": mesh if isinstance(mesh, Mesh) else _mesh_axes(mesh),
        "in_specs": tuple(in_specs),
        "out_specs": tuple(out_specs),
        "check_vma": check_vma,
        "newly_manual_axes": frozenset(n for n, _ in _mesh_axes(mesh)),
    }


def _user_name(f: Callable[..., Any]) -> str:
    return getattr(f, "__name__", "fun")


# ------------------------------------------------------------------- specs against values


def _is_spec_leaf(x: Any) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def _prefix_specs(specs: Any, tree: PyTreeDef, what: str) -> list[Spec]:
    """One spec per leaf of ``tree`` from ``specs``, a pytree prefix of it whose leaves
    are PartitionSpecs (or None: replicated); JAX's ValueError when they disagree."""
    if _is_spec_leaf(specs):
        return [_as_spec(specs)] * tree.num_leaves
    children = tree.children
    kind = tree._kind
    if isinstance(specs, (tuple, list)) and kind in (tuple, list):
        if len(specs) != len(children):
            raise ValueError(
                f"pytree structure error: different lengths of {kind.__name__} at key path\n"
                f"    shard_map {what}\n"
                f"At that key path, the prefix pytree shard_map {what} has a subtree of type "
                f"{type(specs).__name__} of length {len(specs)}, but the full pytree has a subtree "
                f"of the same type but of length {len(children)}, at {user_location()}"
            )
        out: list[Spec] = []
        for s, child in zip(specs, children):
            out.extend(_prefix_specs(s, child, what))
        return out
    if isinstance(specs, dict) and kind is dict:
        keys = tree._aux if isinstance(tree._aux, (tuple, list)) else None
        if keys is not None and sorted(specs) == sorted(keys):
            out = []
            for k, child in zip(keys, children):
                out.extend(_prefix_specs(specs[k], child, what))
            return out
    raise ValueError(
        f"shard_map {what} must be a pytree prefix of the corresponding value (with "
        f"PartitionSpec leaves), got {specs!r} for a value of structure {tree}, at {user_location()}"
    )


def _check_spec_names(mesh: Mesh, specs: Sequence[Spec], what: str) -> None:
    manual = frozenset(mesh.axis_names)
    for spec in specs:
        seen: set[str] = set()
        for axes in _spec_axes(spec):
            for a in axes:
                if a not in manual:
                    raise ValueError(
                        f"shard_map {what} argument must refer to an axis marked as manual "
                        f"({manual}), but:\n  {what} refers to {a!r}\nCheck the {what} values passed "
                        f"to shard_map, at {user_location()}"
                    )
                if a in seen:
                    raise ValueError(
                        "A single NamedSharding spec specification can map every mesh axis to at most "
                        f"one positional dimension, but {PartitionSpec(*spec)} has duplicate entries for "
                        f"`{a}`, at {user_location()}"
                    )
                seen.add(a)


def _arg_names(f: Callable[..., Any], args: tuple[Any, ...]) -> list[str]:
    """``args[0], where args[0] is bound to f's parameter 'a'`` for each leaf."""
    import inspect

    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        bound = f", where args[{i}] is bound to {_user_name(f)}'s parameter '{params[i]}'" if i < len(params) else ""
        names.extend([f"args[{i}]{bound}"] * len(tree_flatten(a)[0]))
    return names


def _type_text(a: _ir.ShapedArray) -> str:
    return f"{a.dtype.name}[{','.join(str(d) for d in a.shape)}]"


def _local_avals(
    f: Callable[..., Any], args: tuple[Any, ...], mesh: Mesh, avals: Sequence[_ir.ShapedArray], specs: Sequence[Spec]
) -> list[_ir.ShapedArray]:
    """Each argument's per-device type; JAX's errors for specs longer than the rank and
    dimensions the mesh axes do not divide."""
    names = _arg_names(f, args)
    sizes = dict(mesh.shape_tuple)
    problems = []
    local = []
    for aval, spec, name in zip(avals, specs, names):
        rank = len(aval.shape)
        if len(spec) > rank:
            raise ValueError(
                f"shard_map applied to the function '{_user_name(f)}' was given an in_specs entry which is "
                "too long to be compatible with the corresponding input value from the function:\n"
                f"in_specs is {PartitionSpec(*spec)} which has length {len(spec)}, but the passed {name}, "
                f"has shape {_type_text(aval)}, which has rank {rank} (and {rank} < {len(spec)})\n"
                "Entries in in_specs must be of length no greater than the number of axes in the "
                f"corresponding input value, at {user_location()}"
            )
        shape = list(aval.shape)
        for d, axes in enumerate(_spec_axes(spec)):
            k = math.prod(sizes[a] for a in axes)
            if shape[d] % k:
                mapped = " and ".join(f"'{a}' (of size {sizes[a]})" for a in axes)
                problems.append(
                    f"* the passed {name} of shape {_type_text(aval)}, corresponds to in_specs of value "
                    f"{PartitionSpec(*spec)}, which maps array axis {d} (of size {shape[d]}) to mesh axis "
                    f"{mapped}, but {k} does not evenly divide {shape[d]}"
                )
            else:
                shape[d] //= k
        local.append(_ir.ShapedArray(tuple(shape), aval.dtype, aval.weak_type))
    if problems:
        raise ValueError(
            f"shard_map applied to the function '{_user_name(f)}' was given argument arrays with axis "
            "sizes that are not evenly divisible by the corresponding mesh axis sizes:\n"
            f"The mesh given has shape {mesh.axis_sizes} with corresponding axis names {mesh.axis_names}.\n"
            + "\n".join(problems)
            + "\nArray arguments' axis sizes must be evenly divisible by the mesh axis or axes indicated "
            "by the corresponding elements of the argument's in_specs entry. Consider checking that "
            f"in_specs are correct, and if so consider changing the mesh axis sizes or else padding "
            f"the input and adapting '{_user_name(f)}' appropriately, at {user_location()}"
        )
    return local


def _set_text(axes: Sequence[str]) -> str:
    return "{" + ", ".join(axes) + "}"


def _check_out_vma(f: Callable[..., Any], mesh: Mesh, out_specs: Sequence[Spec], out_axes: Sequence[tuple[str, ...]]) -> None:
    """An output must not vary over a mesh axis its out_spec leaves it replicated over."""
    for spec, varying in zip(out_specs, out_axes):
        named = _varying(spec)
        extra = [a for a in mesh.axis_names if a in varying and a not in named]
        if extra:
            raise ValueError(
                f"shard_map applied to the function '{_user_name(f)}' was given out_specs which require "
                "replication which can't be statically inferred given the mesh:\n"
                f"The mesh given has shape {mesh.axis_sizes} with corresponding axis names {mesh.axis_names}.\n"
                f"out_specs is {PartitionSpec(*spec)} which implies that the corresponding output value is only "
                f"varying across mesh axes {_set_text(named)} and not {_set_text(extra)}, but it was inferred "
                f"to be possibly varying over {_set_text(extra)}\n"
                "Check if these output values are meant to be replicated over those mesh axes. If not, "
                "consider revising the corresponding out_specs entries. If so, consider disabling the "
                f"check by passing the check_vma=False argument to `ferrax.shard_map`, at {user_location()}"
            )


def _check_out_ranks(mesh: Mesh, out_specs: Sequence[Spec], out_avals: Sequence[_ir.ShapedArray]) -> None:
    for spec, aval in zip(out_specs, out_avals):
        if len(spec) > len(aval.shape):
            raise ValueError(
                f"shard_map out_specs entry {PartitionSpec(*spec)} has length {len(spec)}, but the "
                f"corresponding output has shape {_type_text(aval)} of rank {len(aval.shape)}, at "
                f"{user_location()}"
            )


# --------------------------------------------------------------------------- the API


def shard_map(
    f: Callable[..., Any] | None = None,
    /,
    *,
    out_specs: Any,
    in_specs: Any = None,
    mesh: Mesh | None = None,
    axis_names: Any = frozenset(),
    check_vma: bool = True,
) -> Any:
    """``f``, written for one device's block of its arguments, mapped over ``mesh``.

    ``in_specs`` (a :class:`~ferrax.sharding.PartitionSpec` per argument, or a pytree
    prefix of the arguments) says which mesh axes split each argument's dimensions;
    ``f`` receives each device's block and may use the collectives of ``ferrax.lax``
    over the mesh's axis names. ``out_specs`` says how the blocks ``f`` returns make the
    outputs: an output whose spec leaves a mesh axis out must be the same on every
    device along it (``check_vma``: checked while tracing, as JAX). Usable as a
    decorator: ``shard_map(mesh=..., in_specs=..., out_specs=...)(f)``. ``axis_names``
    (a subset of the mesh's axes to map manually) is accepted when it names them all.
    """
    if f is None:
        return functools.partial(
            shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh, axis_names=axis_names, check_vma=check_vma
        )
    if not callable(f):
        raise TypeError(f"shard_map requires a callable for its first argument, got {f!r}, at {user_location()}")
    if mesh is None:
        raise ValueError(
            "The context mesh cannot be empty: pass shard_map a mesh (mesh=ferrax.sharding.Mesh(...)), "
            f"at {user_location()}"
        )
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_map requires a ferrax.sharding.Mesh for mesh, got {mesh!r}, at {user_location()}")
    names = frozenset(axis_names)
    if names and names != frozenset(mesh.axis_names):
        raise NotImplementedError(
            f"shard_map over part of the mesh's axes (axis_names={set(names)} of {mesh.axis_names}) "
            f"is not supported: map all of them, at {user_location()}"
        )
    if in_specs is None:
        raise NotImplementedError(
            "shard_map needs in_specs (inferring them from the arguments' shardings is not "
            f"supported), at {user_location()}"
        )

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        flat, in_tree = tree_flatten(args)
        specs = _prefix_specs(in_specs, in_tree, "in_specs")
        _check_spec_names(mesh, specs, "in_specs")
        avals = [aval_of(x) for x in flat]
        local = _local_avals(f, args, mesh, avals, specs)
        out_tree_cell: list[PyTreeDef] = []

        def body_fun(*leaves: Any) -> list[Any]:
            out = f(*tree_unflatten(in_tree, list(leaves)))
            out_flat, out_tree = tree_flatten(out)
            out_tree_cell.append(out_tree)
            return out_flat

        with bind_axes(_frames(mesh)):
            closed, _ = trace_to_jaxpr(body_fun, local, _flat_tree(len(local)))
        out_tree = out_tree_cell[0]
        outs_specs = _prefix_specs(out_specs, out_tree, "out_specs")
        _check_spec_names(mesh, outs_specs, "out_specs")
        _check_out_ranks(mesh, outs_specs, closed.out_avals)
        body, consts = ad.hoist_consts(closed)
        # Constants the body closes over are the same on every device.
        all_specs = [()] * len(consts) + specs
        body, out_axes = _pvary(body, mesh, all_specs, outs_specs)
        if check_vma:
            _check_out_vma(f, mesh, outs_specs, out_axes)
        params = _params(body, mesh, all_specs, outs_specs, check_vma)
        operands = [*consts, *flat]
        # A jit tracing this call compiles for the mesh's devices (ferrax.sharding's
        # record of the meshes a traced function uses, where the branch has it).
        note_mesh = getattr(sharding_module, "note_mesh", None)
        if note_mesh is not None:
            note_mesh(mesh)
        if isinstance(find_top_trace(operands), EvalTrace):
            outs = _eager(params)(*operands)
        else:
            outs = shard_map_p.bind(*operands, **params)
        return tree_unflatten(out_tree, list(outs))

    return mapped


def _flat_tree(n: int) -> PyTreeDef:
    return tree_flatten(tuple(range(n)))[1]


# ------------------------------------------------------------------------------- eager


def _device_mesh(mesh: MeshParam) -> Mesh:
    """The mesh's devices: a Mesh as given, or the first devices in the IR's order."""
    if isinstance(mesh, Mesh):
        return mesh
    import numpy as np

    from ferrax._devices import devices

    axes = _mesh_axes(mesh)
    n = math.prod(s for _, s in axes)
    found = devices()
    if len(found) < n:
        raise ValueError(f"a shard_map over a mesh of {n} devices, but only {len(found)} devices exist")
    return Mesh(np.array(found[:n], dtype=object).reshape([s for _, s in axes]), [a for a, _ in axes])


_eager_cache: dict[Any, Callable[..., Any]] = {}


def _eager(params: dict[str, Any]) -> Callable[..., Any]:
    """The shard_map equation run through ``ferrax.jit`` over its mesh's devices (XLA's
    SPMD partitioner), its in_specs and out_specs as the in/out shardings: arguments
    are laid out by their specs, results keep the out_specs' layouts. Cached per
    equation."""
    mesh = _device_mesh(params["mesh"])
    body: _ir.ClosedJaxpr = params["jaxpr"]
    key = (body, mesh, params["in_specs"], params["out_specs"], params["check_vma"])
    fn = _eager_cache.get(key)
    if fn is not None:
        return fn
    from ferrax._jit import jit

    bound = {**params, "mesh": mesh}

    def shard_map_call(*xs: Any) -> Any:
        return shard_map_p.bind(*xs, **bound)

    in_shardings = tuple(NamedSharding(mesh, PartitionSpec(*s)) for s in params["in_specs"])
    out_shardings = [NamedSharding(mesh, PartitionSpec(*s)) for s in params["out_specs"]]
    jitted = jit(shard_map_call, in_shardings=in_shardings, out_shardings=out_shardings)

    def run(*args: Any) -> list[Any]:
        return list(jitted(*args))

    if len(_eager_cache) > 256:
        _eager_cache.clear()
    _eager_cache[key] = run
    return run


@shard_map_p.def_impl
def _shard_map_impl(*args: Any, **params: Any) -> list[Any]:
    return list(_eager(params)(*args))


# --------------------------------------------------------------------------------- rules


def _shard_map_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    jaxpr: _ir.ClosedJaxpr = params["jaxpr"]
    mesh, in_specs, out_specs = params["mesh"], params["in_specs"], params["out_specs"]
    nonzero = [type(t) is not ad.Zero for t in tangents]
    with bind_axes(_frames(mesh)):
        jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzero, False)
    body, consts = ad.hoist_consts(jvp_closed)
    specs = [()] * len(consts) + list(in_specs) + [s for s, nz in zip(in_specs, nonzero) if nz]
    o_specs = list(out_specs) + [s for s, nz in zip(out_specs, out_nz) if nz]
    body, _ = _pvary(body, mesh, specs, o_specs)
    new = _params(body, mesh, specs, o_specs, params.get("check_vma", True))
    outs = shard_map_p.bind(*consts, *primals, *[t for t in tangents if type(t) is not ad.Zero], **new)
    n = len(jaxpr.out_avals)
    rest = iter(outs[n:])
    return list(outs[:n]), [next(rest) if nz else ad.Zero(a) for nz, a in zip(out_nz, jaxpr.out_avals)]


shard_map_p.def_jvp(_shard_map_jvp)


def _shard_map_batch(
    vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, **params: Any
) -> tuple[list[Any], list[int | None]]:
    jaxpr: _ir.ClosedJaxpr = params["jaxpr"]
    mesh, in_specs, out_specs = params["mesh"], params["in_specs"], params["out_specs"]
    in_batched = [d is not None for d in dims]
    with bind_axes(_frames(mesh)):
        batched, out_batched = batching.batch_jaxpr(jaxpr, axis_size, in_batched, False)
    body, consts = ad.hoist_consts(batched)
    specs = [()] * len(consts) + [_with_batch_axis(s) if b else s for s, b in zip(in_specs, in_batched)]
    o_specs = [_with_batch_axis(s) if b else s for s, b in zip(out_specs, out_batched)]
    body, _ = _pvary(body, mesh, specs, o_specs)
    new = _params(body, mesh, specs, o_specs, params.get("check_vma", True))
    outs = shard_map_p.bind(*consts, *batching.at_front(vals, dims), **new)
    return list(outs), [0 if b else None for b in out_batched]


shard_map_p.def_batch(_shard_map_batch)
# Known and unknown operands (reverse mode): the Rust pass splits the equation in two.
partial_eval_rules["shard_map"] = split_by_pass


# --------------------------------------------------------------------------------- pmap


def pmap(
    fun: Callable[..., Any],
    axis_name: Any = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    static_broadcasted_argnums: int | Sequence[int] = (),
    devices: Sequence[Any] | None = None,
    backend: str | None = None,
    axis_size: int | None = None,
    donate_argnums: int | Sequence[int] = (),
) -> Callable[..., Any]:
    """``fun`` mapped over axis ``in_axes`` of its arguments, one element per device, as
    JAX now defines ``pmap``: a ``shard_map`` over a one-axis mesh of the first
    ``n`` devices (``devices`` if given), where ``n`` is the mapped size; each device
    runs ``fun`` on its element, with ``axis_name`` bound for the collectives.
    ``backend`` and ``donate_argnums`` are accepted and ignored (one CPU backend, no
    donation)."""
    from ferrax._devices import devices as all_devices
    from ferrax._lax.structural import expand_dims, squeeze
    from ferrax._vmap import _leaf_axes

    if not callable(fun):
        raise TypeError(f"pmap requires a callable, got {fun!r}, at {user_location()}")
    static = (static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int) else tuple(static_broadcasted_argnums)
    name = axis_name if axis_name is not None else f"_pmap_{id(fun)}"

    @functools.wraps(fun)
    def mapped(*args: Any) -> Any:
        n_args = len(args)
        fixed = {i % n_args: args[i] for i in static if -n_args <= i < n_args}
        dynamic = tuple(a for i, a in enumerate(args) if i not in fixed)
        spec = in_axes
        if isinstance(spec, (tuple, list)) and fixed:
            spec = tuple(s for i, s in enumerate(spec) if i not in fixed)
        flat, tree = tree_flatten(dynamic)
        axes = _leaf_axes(spec if not isinstance(spec, list) else tuple(spec), tree, "in_axes")
        sizes = set()
        moved = []
        for x, a in zip(flat, axes):
            if a is None:
                moved.append(x)
                continue
            nd = len(aval_of(x).shape)
            a = a % nd if nd else a
            sizes.add(aval_of(x).shape[a])
            moved.append(batching.moveaxis(x, a, 0))
        if axis_size is not None:
            sizes.add(axis_size)
        if len(sizes) != 1:
            raise ValueError(f"pmap got inconsistent sizes for array axes to be mapped: {sorted(sizes)}, at {user_location()}")
        (size,) = sizes
        pool = list(devices) if devices is not None else all_devices()
        if size > len(pool):
            raise ValueError(
                f"compiling computation that requires {size} logical devices, but only {len(pool)} XLA "
                f"devices are available (num_replicas={size}), at {user_location()}"
            )
        import numpy as np

        mesh = Mesh(np.array(pool[:size], dtype=object), (name,))
        in_specs = tuple(PartitionSpec(name) if a is not None else PartitionSpec() for a in axes)
        out_tree_cell: list[PyTreeDef] = []

        def per_device(*leaves: Any) -> list[Any]:
            vals = [squeeze(v, (0,)) if a is not None else v for v, a in zip(leaves, axes)]
            dyn = iter(tree_unflatten(tree, vals))
            full = [fixed[i] if i in fixed else next(dyn) for i in range(n_args)]
            out = fun(*full)
            out_flat, out_tree = tree_flatten(out)
            out_tree_cell.append(out_tree)
            return [expand_dims(o, (0,)) for o in out_flat]

        # The outputs' structure is known once traced: out_specs as a callable prefix is
        # not JAX's API, so trace once for the structure (cheap: no compilation).
        sm = shard_map(per_device, mesh=mesh, in_specs=in_specs, out_specs=PartitionSpec(name), check_vma=False)
        outs = sm(*moved)
        out_tree = out_tree_cell[-1]
        oaxes = _leaf_axes(out_axes if not isinstance(out_axes, list) else tuple(out_axes), out_tree, "out_axes")
        results = []
        for o, a in zip(outs, oaxes):
            if a is None:
                raise ValueError(f"pmap out_axes None is not supported, at {user_location()}")
            nd = len(aval_of(o).shape)
            results.append(batching.moveaxis(o, 0, a % nd))
        return tree_unflatten(out_tree, results)

    return mapped
