"""Arrays over the devices of several processes, as JAX makes them: from each process's
own data (:func:`make_array_from_process_local_data`), from one array per local device
(:func:`make_array_from_single_device_arrays`), and back to every process
(:func:`process_allgather`, in :mod:`ferrax.experimental.multihost_utils`).

An array laid out over devices of several processes holds only this process's parts;
each process calls these functions with its own data, in the same order (they are
collective where they compute: the gather runs on every process's devices).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax import _ir, dtypes
from ferrax._core import aval_of, to_numpy, user_location
from ferrax._runtime import DeviceArray, backend, device_put
from ferrax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding

__all__ = [
    "make_array_from_process_local_data",
    "make_array_from_single_device_arrays",
    "assert_equal",
    "broadcast_one_to_all",
    "global_array_to_host_local_array",
    "host_local_array_to_global_array",
    "process_allgather",
    "sync_global_devices",
]


def _process_count() -> int:
    return len({d.process_index for d in backend().all_devices})


def _check_sharding(fname: str, sharding: Any) -> Sharding:
    if not isinstance(sharding, Sharding):
        raise TypeError(
            f"ferrax.{fname}: sharding must be a ferrax.sharding.Sharding (NamedSharding, "
            f"SingleDeviceSharding, ...), got {sharding!r:.80}, at {user_location()}"
        )
    return sharding


def _blocks(sharding: Sharding, rank: int) -> dict[Any, tuple[int, ...]]:
    """Each device with the position of its block in the grid of blocks (one block per
    split of each dimension), whatever the array's size."""
    tiles, _, _ = sharding._tiling(rank)
    index = sharding.devices_indices_map(tuple(tiles))
    return {d: tuple(s.start or 0 for s in idx) for d, idx in index.items()}


def _process_blocks(sharding: Sharding, rank: int, dim: int) -> dict[int, frozenset[int]]:
    """Each process with the blocks of dimension ``dim`` its devices hold."""
    out: dict[int, set[int]] = {}
    for d, pos in _blocks(sharding, rank).items():
        out.setdefault(int(d.process_index), set()).add(pos[dim])
    return {p: frozenset(s) for p, s in out.items()}


def _local_to_global_shape(sharding: Sharding, local_shape: tuple[int, ...]) -> tuple[int | None, ...]:
    """The global shape when each process holds its own part of every split dimension:
    a dimension is ``None`` where the processes' parts are not a uniform split (parts
    of different sizes, or overlapping without being equal)."""
    me = backend().process_index
    out: list[int | None] = []
    for dim, size in enumerate(local_shape):
        per_process = _process_blocks(sharding, len(local_shape), dim)
        distinct = set(per_process.values())
        uniform = len({len(s) for s in distinct}) == 1 and all(
            a == b or not (a & b) for a, b in itertools.combinations(distinct, 2)
        )
        out.append(size * len(distinct) if uniform and me in per_process else None)
    return tuple(out)


def make_array_from_process_local_data(
    sharding: Any, local_data: Any, global_shape: Any = None
) -> Any:
    """An array laid out as ``sharding`` over the devices of every process, made from
    this process's part of it (``local_data``: a NumPy array or array-like, or a pytree
    of them with a sharding and a global shape per leaf or one for all), as
    ``jax.make_array_from_process_local_data``.

    Along a dimension whose size is the global size, ``local_data`` is the whole
    dimension; along the others, it is this process's blocks, in order (for a batch split
    over 2 processes of 2 devices each, process 1's 4 rows are rows 4..7 of 8). Without
    ``global_shape``, every split dimension is taken to be split evenly among the
    processes. With one process, this is ``device_put(local_data, sharding)``.
    """
    from ferrax.tree_util import tree_flatten, tree_unflatten

    leaves, tree = tree_flatten(local_data)
    shardings = _prefix_leaves(sharding, tree, len(leaves), lambda s: isinstance(s, Sharding))
    shapes = _prefix_leaves(global_shape, tree, len(leaves), lambda s: s is None or isinstance(s, tuple))
    out = []
    for data, s, shape in zip(leaves, shardings, shapes):
        s = _check_sharding("make_array_from_process_local_data", s)
        if _process_count() == 1:
            d_shape = tuple(np.shape(data))
            if shape is not None and tuple(shape) != d_shape:
                raise ValueError(
                    "When calling `make_array_from_process_local_data` on a single process, "
                    "global_shape should be None or equal to local_data.shape.Got "
                    f"global_shape={tuple(shape)} and local_data.shape={d_shape}."
                )
            out.append(device_put(data, s))
        else:
            out.append(_from_process_local_data(data, s, None if shape is None else tuple(shape)))
    return tree_unflatten(tree, out)


def _prefix_leaves(value: Any, tree: Any, n: int, is_leaf: Any) -> list[Any]:
    """``value`` given once for every leaf, or as a tree of the leaves' shape."""
    from ferrax.tree_util import tree_flatten

    if is_leaf(value):
        return [value] * n
    values, value_tree = tree_flatten(value, is_leaf=is_leaf)
    if value_tree != tree:
        raise ValueError(
            f"the tree of shardings / global shapes {value_tree} does not match the tree of "
            f"values {tree}, at {user_location()}"
        )
    return values


def _from_process_local_data(data: Any, sharding: Sharding, global_shape: tuple[int, ...] | None) -> DeviceArray:
    aval = aval_of(data)
    value = to_numpy(data)
    if value.dtype != aval.dtype:
        value = value.astype(aval.dtype)
    local_shape = tuple(value.shape)
    rank = len(local_shape)
    if global_shape is None:
        computed = _local_to_global_shape(sharding, local_shape)
        if None in computed:
            raise ValueError(
                "Unable to compute global_shape due to non-uniform sharding. Specify global "
                f"shape directly. Partially computed global_shape={computed}."
            )
        shape = tuple(int(d) for d in computed if d is not None)
    else:
        if None in global_shape:
            raise ValueError(f"global_shape={global_shape} has Nones. This is not supported.")
        if len(global_shape) != rank:
            raise ValueError(
                f"global_shape={global_shape} and local_data.shape={local_shape} differ in rank, "
                f"at {user_location()}"
            )
        shape = global_shape
    blocks = _blocks(sharding, rank)
    index = sharding.devices_indices_map(shape)
    me = backend().process_index
    local = [d for d in sharding._device_assignment if d.process_index == me]
    tiles, _, _ = sharding._tiling(rank)
    full = []
    for dim, (data_dim, global_dim) in enumerate(zip(local_shape, shape)):
        full.append(data_dim == global_dim)
        if data_dim != global_dim:
            held = len({blocks[d][dim] for d in local}) * (global_dim // tiles[dim])
            if held != data_dim:
                raise ValueError(
                    "Invalid host data, each dimension should match either global or process "
                    f"shape. In dimension {dim}, the process data has {data_dim} elements. "
                    f"Process addresses {held} elements and global_shape={shape}."
                )
    # Each of this process's blocks along a dimension, in order, is the next piece of
    # the local data along it.
    order = [sorted({blocks[d][dim] for d in local}) for dim in range(rank)]
    parts: list[np.ndarray[Any, Any]] = []
    for d in local:
        idx = []
        for dim in range(rank):
            if full[dim]:
                idx.append(index[d][dim])
            else:
                step = shape[dim] // tiles[dim]
                k = order[dim].index(blocks[d][dim])
                idx.append(slice(k * step, (k + 1) * step))
        parts.append(value[tuple(idx)])
    out_aval = _ir.ShapedArray(shape, aval.dtype, aval.weak_type)
    return _assemble(out_aval, sharding, local, parts)


def _assemble(aval: _ir.ShapedArray, sharding: Sharding, devices: Sequence[Any], parts: Sequence[Any]) -> DeviceArray:
    """One array from this process's parts (NumPy arrays or single-device buffers), one
    per local device of ``sharding`` in its order."""
    be = backend()
    buffers = []
    for d, part in zip(devices, parts):
        if isinstance(part, np.ndarray):
            part = np.ascontiguousarray(part)
            part_aval = _ir.ShapedArray(part.shape, aval.dtype, aval.weak_type)
            part = be.xc.batched_device_put(
                part_aval, be.single(d), [part], [d], True, False, be.semantics, enable_x64=True
            )
        buffers.append(part)
    rank = len(aval.shape)
    if sharding.num_devices == 1:
        return DeviceArray(buffers[0], aval, sharding)
    buffer = be.jax_ext.ArrayImpl(aval, be.xsharding(sharding, rank), buffers, True, True)
    return DeviceArray(buffer, aval, sharding)


def make_array_from_single_device_arrays(
    shape: Sequence[int], sharding: Any, arrays: Sequence[Any], *, dtype: Any = None
) -> DeviceArray:
    """An array of ``shape`` laid out as ``sharding``, made of one array per device of
    this process that ``sharding`` uses (``arrays``, each on its device, e.g. from
    ``ferrax.device_put(part, device)``), as ``jax.make_array_from_single_device_arrays``.
    Each array must have the sharding's shard shape and the same dtype."""
    fname = "make_array_from_single_device_arrays"
    s = _check_sharding(fname, sharding)
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(
            f"ferrax.make_array_from_single_device_arrays `arrays` argument must be a list or "
            f"tuple, but got {type(arrays)}."
        )
    if any(not isinstance(a, DeviceArray) for a in arrays):
        kinds = sorted({type(a).__name__ for a in arrays})
        raise ValueError(
            f"ferrax.{fname} requires a list of concrete arrays on devices (ferrax.device_put) "
            f"as input, but got types {kinds}, at {user_location()}"
        )
    shape = tuple(int(d) for d in shape)
    if dtype is None:
        if not arrays:
            raise ValueError(
                "If the Array has no addressable shards, `dtype` must be provided via the "
                f"`dtype` argument to `ferrax.{fname}`."
            )
        dt = arrays[0].dtype
    else:
        dt = dtypes.canonical(np.dtype(dtype))
        if arrays and arrays[0].dtype != dt:
            raise ValueError(
                f"If `dtype` is provided to `ferrax.{fname}`, it must match the dtype of the "
                f"addressable shards. Got dtype={dt} and shard dtype={arrays[0].dtype}`."
            )
    me = backend().process_index
    local = [d for d in s._device_assignment if d.process_index == me]
    if len(arrays) != len(local):
        raise ValueError(
            f"Expected {len(local)} per-device arrays (this is how many devices are addressable "
            f"by the sharding), but got {len(arrays)}"
        )
    by_id: dict[int, DeviceArray] = {}
    for a in arrays:
        devs = a.sharding._device_assignment
        if len(devs) != 1:
            raise ValueError(
                f"ferrax.{fname}: every array must be on one device, got one laid out over "
                f"{len(devs)} devices ({a.sharding!r}), at {user_location()}"
            )
        by_id.setdefault(int(devs[0].id), a)
    if len(by_id) != len(arrays):
        ids = [int(a.sharding._device_assignment[0].id) for a in arrays]
        raise ValueError(
            "When making an array from single-device arrays, the input arrays must be from "
            f"distinct devices, but got device IDs {ids}"
        )
    wanted = {int(d.id) for d in local}
    if set(by_id) != wanted:
        msg = "Addressable devices and per-device arrays devices do not match."
        if wanted - set(by_id):
            msg += f" Sharding contains devices {wanted - set(by_id)} that are not present in per-device arrays."
        if set(by_id) - wanted:
            msg += f" Per-device arrays contain devices {set(by_id) - wanted} that are not present in the sharding."
        raise ValueError(msg)
    aval = _ir.ShapedArray(shape, dt, False)
    expected = s.shard_shape(shape)
    for a in arrays:
        if a.dtype != dt:
            raise ValueError(
                "Input buffers to `Array` must have matching dtypes. "
                f"Got {a.dtype}, expected {dt} for buffer: {a}"
            )
        if tuple(a.shape) != expected:
            raise ValueError(
                f"Expected shard shape {expected} doesn't match the single device array shape "
                f"{tuple(a.shape)}. Shape of Array is {aval.str_short()} with sharding {s}"
            )
    ordered = [by_id[int(d.id)] for d in local]
    return _assemble(aval, s, local, [a._buffer for a in ordered])


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Every process's value, on every process, as NumPy arrays (a pytree in, the same
    tree out), as ``jax.experimental.multihost_utils.process_allgather``.

    An array laid out over several processes' devices is returned whole (``tiled=True``
    is required). Any other value (NumPy, a scalar, an array on this process's devices)
    must have the same shape on every process: the processes' values are stacked along a
    new first axis (``tiled=False``) or concatenated along the first axis
    (``tiled=True``; a scalar is stacked). Every process must call it.
    """
    from ferrax.tree_util import tree_map

    return tree_map(lambda x: _allgather_one(x, tiled), in_tree)


def _allgather_one(x: Any, tiled: bool) -> np.ndarray[Any, Any]:
    if isinstance(x, DeviceArray) and not x.sharding.is_fully_addressable:
        if not tiled:
            raise ValueError("Gathering global non-fully-addressable arrays only supports tiled=True")
        return np.asarray(x)
    host = np.asarray(x)
    n = _process_count()
    if n == 1:
        return host if tiled else np.expand_dims(host, axis=0)
    if host.ndim == 0 or not tiled:
        host = np.expand_dims(host, axis=0)
    _agree("process_allgather", f"{host.shape}:{host.dtype}")
    be = backend()
    me = be.process_index
    devices = sorted(be.all_devices, key=lambda d: (d.process_index, d.id))
    per = len(devices) // n
    mesh = Mesh(np.array(devices, dtype=object).reshape(n, per), ("processes", "local_devices"))
    sharding = NamedSharding(mesh, PartitionSpec("processes"))
    local = [d for d in sharding._device_assignment if d.process_index == me]
    aval = aval_of(host)
    value = to_numpy(host)
    shape = (value.shape[0] * n,) + value.shape[1:]
    whole = _assemble(_ir.ShapedArray(shape, aval.dtype, False), sharding, local, [value] * len(local))
    return np.array(whole)


_agreements = itertools.count()


def _agree(what: str, value: str, timeout_s: float = 300.0) -> None:
    """Checks that every process calls ``what`` with the same ``value`` (a shape, ...)
    through the coordination service's key-value store: a mismatch is a ValueError and
    a process that does not come within the timeout a DistributedError naming it, where
    a collective with mismatched operands would fail obscurely or wait forever."""
    from ferrax import distributed

    client = distributed.global_state.client
    if client is None:
        return
    me = distributed.global_state.process_id
    n = distributed.global_state.num_processes
    k = next(_agreements)
    client.key_value_set(f"ferrax/{what}/{k}/{me}", value)
    for p in range(n):
        try:
            theirs = client.blocking_key_value_get(f"ferrax/{what}/{k}/{p}", int(timeout_s * 1000))
        except RuntimeError as e:
            raise distributed.DistributedError(
                f"ferrax.{what}: process {p} did not reach call {k} of {what} within "
                f"{timeout_s:g} s ({str(e).splitlines()[0]})"
            ) from None
        if theirs != value:
            raise ValueError(
                f"ferrax.{what}: the processes disagree: process {me} has {value}, process {p} "
                f"has {theirs} (every process must pass arrays of the same shape and dtype), at "
                f"{user_location()}"
            )


def sync_global_devices(name: str) -> None:
    """Waits until every process reaches this point (a barrier named ``name``), as
    ``jax.experimental.multihost_utils.sync_global_devices``."""
    from ferrax import distributed

    client = distributed.global_state.client
    if client is None:
        return
    _agree("sync_global_devices", name)


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """The source process's values on every process, as NumPy arrays (a pytree in, the
    same tree out), as ``jax.experimental.multihost_utils.broadcast_one_to_all``: the
    source is process 0, or the processes passing ``is_source=True`` (their values are
    summed, as JAX sums them). Every process must call it with values of the same
    shapes."""
    from ferrax.tree_util import tree_map

    if _process_count() == 1:
        return tree_map(np.asarray, in_tree)
    source = backend().process_index == 0 if is_source is None else bool(is_source)

    def one(x: Any) -> np.ndarray[Any, Any]:
        value = np.asarray(x)
        stacked = _allgather_one(value if source else np.zeros_like(value), tiled=False)
        return np.asarray(stacked.sum(axis=0, dtype=stacked.dtype))

    return tree_map(one, in_tree)


def assert_equal(in_tree: Any, fail_message: str = "") -> None:
    """Raises AssertionError (with ``fail_message``) unless every process passes the
    same values (a pytree of arrays), as ``jax.experimental.multihost_utils.assert_equal``."""
    from ferrax.tree_util import tree_leaves, tree_map

    def expected(x: Any) -> np.ndarray[Any, Any]:
        if isinstance(x, DeviceArray) and not x.sharding.is_fully_addressable:
            return np.asarray(x.addressable_shards[0].data)
        value = np.asarray(x)
        if value.ndim == 0:
            value = np.expand_dims(value, axis=0)
        return np.concatenate([value] * _process_count())

    out = process_allgather(in_tree, tiled=True)
    want = tree_map(expected, in_tree)
    if not all(bool(np.all(np.equal(a, b))) for a, b in zip(tree_leaves(want), tree_leaves(out))):
        raise AssertionError(f"{fail_message}. Expected: {out}; got: {in_tree}.")


def local_mesh(mesh: Mesh) -> Mesh:
    """The part of ``mesh`` this process drives, as a mesh with the same axis names
    (JAX's ``Mesh.local_mesh``): this process's devices must form a contiguous block
    of the mesh."""
    me = backend().process_index
    is_local = np.vectorize(lambda d: d.process_index == me, otypes=[bool])(mesh.devices)
    block = []
    for axis in range(mesh.devices.ndim):
        others = tuple(a for a in range(mesh.devices.ndim) if a != axis)
        present = np.flatnonzero(is_local.any(axis=others) if others else is_local)
        if present.size == 0:
            raise ValueError(f"the mesh holds no device of process {me}, at {user_location()}")
        block.append(slice(int(present.min()), int(present.max()) + 1))
    if not is_local[tuple(block)].all():
        raise ValueError(
            "When passing host local inputs to pjit, devices connected to a single host must "
            "form a contiguous subcube of the global device mesh"
        )
    return Mesh(mesh.devices[tuple(block)], mesh.axis_names, mesh.axis_types)


def _rescaled_shape(shape: tuple[int, ...], spec: PartitionSpec, divide: Mesh, multiply: Mesh) -> tuple[int, ...]:
    """``shape`` with each split dimension divided by its axes' sizes in ``divide`` and
    multiplied by their sizes in ``multiply`` (local <-> global shapes)."""
    out = list(shape)
    for dim in range(len(shape)):
        for axis in spec.axes_of(dim):
            d, m = divide.shape[axis], multiply.shape[axis]
            if out[dim] % d:
                raise ValueError(
                    f"dimension {dim} of size {out[dim]} is split over mesh axis {axis!r} of size "
                    f"{d}, which does not divide it, at {user_location()}"
                )
            out[dim] = out[dim] // d * m
    return tuple(out)


def _check_spec(spec: Any) -> PartitionSpec:
    if spec is None:
        raise ValueError(
            "`None` is not a valid input to the pspecs argument. Please use "
            "ferrax.sharding.PartitionSpec() if you wanted to replicate your input."
        )
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"pspecs must be PartitionSpecs (ferrax.P), got {spec!r:.80}, at {user_location()}")
    return spec


def host_local_array_to_global_array(local_inputs: Any, global_mesh: Mesh, pspecs: Any) -> Any:
    """Global arrays over ``global_mesh`` made of each process's local values (a pytree;
    ``pspecs`` one PartitionSpec for all or a tree of them), as JAX's
    ``multihost_utils.host_local_array_to_global_array``: the local value is laid out
    over this process's part of the mesh (:func:`local_mesh`) as its spec says, and
    along each split dimension the processes' values follow one another. Eager only."""
    from ferrax.tree_util import tree_flatten, tree_unflatten

    leaves, tree = tree_flatten(local_inputs)
    specs = _prefix_leaves(pspecs, tree, len(leaves), lambda s: s is None or isinstance(s, PartitionSpec))
    local = local_mesh(global_mesh)
    out = []
    for x, spec in zip(leaves, specs):
        spec = _check_spec(spec)
        if isinstance(x, DeviceArray) and not x.sharding.is_fully_addressable:
            out.append(x)
            continue
        aval = aval_of(x)
        value = to_numpy(x)
        if value.dtype != aval.dtype:
            value = value.astype(aval.dtype)
        shape = _rescaled_shape(tuple(value.shape), spec, local, global_mesh)
        sharding = NamedSharding(global_mesh, spec)
        index = NamedSharding(local, spec).devices_indices_map(value.shape)
        devices = [d for d in sharding._device_assignment if d.process_index == backend().process_index]
        parts = [value[index[d]] for d in devices]
        out.append(_assemble(_ir.ShapedArray(shape, aval.dtype, aval.weak_type), sharding, devices, parts))
    return tree_unflatten(tree, out)


def global_array_to_host_local_array(global_inputs: Any, global_mesh: Mesh, pspecs: Any) -> Any:
    """This process's part of each global array (a pytree; ``pspecs`` as above), as an
    array over this process's part of the mesh, as JAX's
    ``multihost_utils.global_array_to_host_local_array``: the inverse of
    :func:`host_local_array_to_global_array`. Arrays this process holds whole are
    returned as they are. Eager only; every process must call it (reading a global
    array back is collective)."""
    from ferrax.tree_util import tree_flatten, tree_unflatten

    leaves, tree = tree_flatten(global_inputs)
    specs = _prefix_leaves(pspecs, tree, len(leaves), lambda s: s is None or isinstance(s, PartitionSpec))
    local = local_mesh(global_mesh)
    out = []
    for x, spec in zip(leaves, specs):
        spec = _check_spec(spec)
        if isinstance(x, DeviceArray) and x.sharding.is_fully_addressable:
            out.append(x)
            continue
        aval = aval_of(x)
        whole = np.asarray(x)
        if whole.dtype != aval.dtype:
            whole = whole.astype(aval.dtype)
        shape = _rescaled_shape(tuple(whole.shape), spec, global_mesh, local)
        global_index = NamedSharding(global_mesh, spec).devices_indices_map(whole.shape)
        sharding = NamedSharding(local, spec)
        devices = list(sharding._device_assignment)
        # Each local device holds the same block of the local array as of the global one.
        parts = [whole[global_index[d]] for d in devices]
        out.append(_assemble(_ir.ShapedArray(shape, aval.dtype, aval.weak_type), sharding, devices, parts))
    return tree_unflatten(tree, out)
