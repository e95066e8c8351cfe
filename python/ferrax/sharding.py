"""``ferrax.sharding``: how an array is laid out over devices, with JAX's classes.

A :class:`Mesh` arranges devices in a named grid (``Mesh(devices.reshape(2, 2), ("x",
"y"))``); a :class:`PartitionSpec` (``P``) says which mesh axes split each dimension of an
array (``P("x", None)``: rows split over ``x``, columns whole, copies over ``y``); a
:class:`NamedSharding` pairs the two. :class:`SingleDeviceSharding` is one device.

``ferrax.device_put(x, sharding)`` lays out a value, ``jit(f, in_shardings=...,
out_shardings=...)`` and ``lax.with_sharding_constraint`` ask XLA's SPMD partitioner for a
layout; arrays report theirs as ``.sharding``.

Partitions are numbered in the order of the mesh's devices (row-major over its axes):
a program compiled for a mesh runs with that device assignment.
"""

from __future__ import annotations

import enum
import itertools
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ferrax.errors import ShardingError

__all__ = [
    "AxisType",
    "Device",
    "Mesh",
    "NamedSharding",
    "PartitionSpec",
    "Sharding",
    "SingleDeviceSharding",
]

Device = Any
"""A device of jaxlib's runtime (``ferrax.devices()`` lists them)."""

SpecEntry = None | str | tuple[str, ...]


class PartitionSpec:
    """Which mesh axes split each dimension of an array, as JAX's ``PartitionSpec``.

    Each entry is ``None`` (the dimension is not split), a mesh axis name, or a tuple of
    names (split over their product, major to minor). Missing trailing entries mean
    ``None``. Mesh axes named nowhere hold copies (the array is replicated over them).
    """

    __slots__ = ("_partitions",)

    def __init__(self, *partitions: SpecEntry | Sequence[str]) -> None:
        entries: list[SpecEntry] = []
        for p in partitions:
            if p is None or isinstance(p, str):
                entries.append(p)
            elif isinstance(p, (tuple, list)) and all(isinstance(a, str) for a in p):
                entries.append(tuple(p) if len(p) != 1 else p[0])
            else:
                raise TypeError(
                    f"a PartitionSpec entry is None, a mesh axis name or a tuple of names, got {p!r}"
                )
        self._partitions: tuple[SpecEntry, ...] = tuple(entries)

    def __len__(self) -> int:
        return len(self._partitions)

    def __iter__(self) -> Iterator[SpecEntry]:
        return iter(self._partitions)

    def __getitem__(self, i: int) -> SpecEntry:
        return self._partitions[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionSpec):
            return self._partitions == other._partitions
        if isinstance(other, tuple):
            return self._partitions == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._partitions)

    def __repr__(self) -> str:
        inner = ", ".join(repr(p) for p in self._partitions)
        if len(self._partitions) == 1:
            inner += ","
        return f"P({inner})"

    __str__ = __repr__

    def axes_of(self, dim: int) -> tuple[str, ...]:
        """The mesh axes splitting dimension ``dim`` (none beyond the spec's length)."""
        if dim >= len(self._partitions):
            return ()
        p = self._partitions[dim]
        if p is None:
            return ()
        return (p,) if isinstance(p, str) else p

    def _entries(self) -> tuple[SpecEntry, ...]:
        return self._partitions


P = PartitionSpec


class AxisType(enum.Enum):
    """How a mesh axis is partitioned. ferrax partitions every axis automatically
    (``Auto``); the others are accepted for compatibility and behave as ``Auto``."""

    Auto = "Auto"
    Explicit = "Explicit"
    Manual = "Manual"

    def __repr__(self) -> str:
        return self.value


class Mesh:
    """Devices arranged in a grid with named axes, as JAX's ``Mesh``.

    ``Mesh(np.array(ferrax.devices()).reshape(2, 2), ("x", "y"))``. Partition ``i`` of a
    program compiled for the mesh runs on ``mesh.devices.flat[i]``.
    """

    def __init__(
        self,
        devices: Any,
        axis_names: str | Sequence[str],
        axis_types: AxisType | Sequence[AxisType] | None = None,
    ) -> None:
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        arr = np.array(devices, dtype=object) if not isinstance(devices, np.ndarray) else devices
        if arr.ndim != len(names):
            raise ValueError(
                f"Mesh requires the ndim of its first argument (`devices`) to equal the length "
                f"of its second argument (`axis_names`), but got devices.ndim == {arr.ndim} and "
                f"len(axis_names) == {len(names)}."
            )
        if len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"mesh axis names must be distinct strings, got {names}")
        flat = list(arr.flat)
        if len({id(d) for d in flat}) != len(flat) or len({d.id for d in flat}) != len(flat):
            raise ValueError("a Mesh's devices must be distinct")
        if axis_types is None:
            types: tuple[AxisType, ...] = (AxisType.Auto,) * len(names)
        elif isinstance(axis_types, AxisType):
            types = (axis_types,) * len(names)
        else:
            types = tuple(axis_types)
        if len(types) != len(names):
            raise ValueError(f"got {len(types)} axis_types for {len(names)} mesh axes")
        self.devices: np.ndarray[Any, Any] = arr
        self.axis_names: tuple[str, ...] = names
        self.axis_types: tuple[AxisType, ...] = types
        self._sizes: tuple[int, ...] = tuple(int(s) for s in arr.shape)
        self._flat: tuple[Device, ...] = tuple(arr.flat)
        self._hash = hash((names, self._sizes, tuple(d.id for d in self._flat), types))

    @property
    def shape(self) -> dict[str, int]:
        """Each axis name with its size, in order."""
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        """The size of each axis."""
        return self._sizes

    @property
    def shape_tuple(self) -> tuple[tuple[str, int], ...]:
        """``((name, size), ...)``."""
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        """The number of devices."""
        return int(self.devices.size)

    @property
    def device_ids(self) -> np.ndarray[Any, Any]:
        """The devices' ids, in the mesh's shape."""
        ids: np.ndarray[Any, Any] = np.vectorize(lambda d: d.id, otypes=[int])(self.devices)
        return ids

    @property
    def _flat_devices(self) -> tuple[Device, ...]:
        return self._flat

    @property
    def local_devices(self) -> list[Device]:
        """The mesh's devices this process drives."""
        from ferrax._runtime import backend

        me = backend().process_index
        return [d for d in self.devices.flat if d.process_index == me]

    def _key(self) -> tuple[Any, ...]:
        return (self.axis_names, self._sizes, tuple(d.id for d in self._flat), self.axis_types)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return isinstance(other, Mesh) and self._hash == other._hash and self._key() == other._key()

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return (
            f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, "
            f"axis_types=({', '.join(t.value for t in self.axis_types)}{',' if len(self.axis_types) == 1 else ''}))"
        )

    def __str__(self) -> str:
        axes = ", ".join(f"'{n}': {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        types = ", ".join(t.value for t in self.axis_types)
        return f"Mesh({axes}, axis_types=({types}{',' if len(self.axis_types) == 1 else ''}))"


class Sharding:
    """How an array is laid out over devices (the base of the sharding classes)."""

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        """The devices in partition order."""
        raise NotImplementedError

    def _tiling(self, rank: int) -> tuple[list[int], list[int], int]:
        """``(tiles per dimension, partition of each tile in row-major order over
        [tiles..., copies], copies)``; see :func:`_hlo_text`."""
        raise NotImplementedError

    @property
    def device_set(self) -> set[Device]:
        """The devices the array lives on."""
        return set(self._device_assignment)

    @property
    def num_devices(self) -> int:
        """How many devices."""
        return len(self._device_assignment)

    @property
    def memory_kind(self) -> str:
        """Where on the device (always ``"device"``)."""
        return "device"

    @property
    def addressable_devices(self) -> set[Device]:
        """The devices of this process that hold part of the array."""
        from ferrax._runtime import backend

        me = backend().process_index
        return {d for d in self._device_assignment if d.process_index == me}

    @property
    def is_fully_addressable(self) -> bool:
        """Whether this process drives every device of the sharding."""
        return self.addressable_devices == self.device_set

    def is_fully_replicated_for(self, rank: int) -> bool:
        """Whether every device holds the whole array of rank ``rank``."""
        tiles, _, _ = self._tiling(rank)
        return all(t == 1 for t in tiles)

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every device holds the whole array."""
        raise NotImplementedError

    def shard_shape(self, global_shape: Sequence[int]) -> tuple[int, ...]:
        """The shape of each device's part of an array of ``global_shape``."""
        tiles, _, _ = self._tiling(len(global_shape))
        self._check_divisible(tuple(global_shape), tiles)
        return tuple(d // t for d, t in zip(global_shape, tiles))

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict[Device, tuple[slice, ...]]:
        """Each device with the slice of the global array it holds."""
        shape = tuple(global_shape)
        tiles, order, copies = self._tiling(len(shape))
        self._check_divisible(shape, tiles)
        devices = self._device_assignment
        out: dict[Device, tuple[slice, ...]] = {}
        coords = itertools.product(*(range(t) for t in tiles), range(copies))
        for partition, coord in zip(order, coords):
            idx = []
            for d, (size, t) in enumerate(zip(shape, tiles)):
                if t == 1:
                    idx.append(slice(None))
                else:
                    step = size // t
                    idx.append(slice(coord[d] * step, (coord[d] + 1) * step))
            out[devices[partition]] = tuple(idx)
        return out

    def _replica_ids(self, rank: int) -> dict[Device, int]:
        tiles, order, copies = self._tiling(rank)
        devices = self._device_assignment
        return {devices[p]: i % copies for i, p in enumerate(order)}

    def _check_divisible(self, shape: tuple[int, ...], tiles: list[int]) -> None:
        for d, (size, t) in enumerate(zip(shape, tiles)):
            if size % t:
                raise ShardingError(
                    f"Sharding {self!r} implies that array axis {d} is partitioned {t} times, "
                    f"but the dimension size is {size} (full shape: {shape}, per-dimension "
                    f"tiling factors: {tiles} should evenly divide the shape)"
                )

    def _hlo_text(self, rank: int) -> str:
        """The sharding as XLA's HloSharding text (``{replicated}``, ``{devices=[2,1]0,1}``)."""
        raise NotImplementedError


class NamedSharding(Sharding):
    """An array split over the axes of a :class:`Mesh` as a :class:`PartitionSpec` says."""

    def __init__(self, mesh: Mesh, spec: PartitionSpec, *, memory_kind: str | None = None) -> None:
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding expects a Mesh, got {mesh!r}")
        if not isinstance(spec, PartitionSpec):
            raise TypeError(f"NamedSharding expects a PartitionSpec (ferrax.P), got {spec!r}")
        if memory_kind not in (None, "device"):
            raise ValueError(f"memory_kind {memory_kind!r} is not supported (only 'device')")
        seen: set[str] = set()
        for d in range(len(spec)):
            for a in spec.axes_of(d):
                if a not in mesh.axis_names:
                    raise ShardingError(f"Resource axis: {a} of {spec} is not found in mesh: {mesh.axis_names}.")
                if a in seen:
                    raise ShardingError(
                        f"A single NamedSharding spec specification can map every mesh axis to at "
                        f"most one positional dimension, but {spec} has duplicate entries for `{a}`"
                    )
                seen.add(a)
        self.mesh = mesh
        self.spec = spec
        self._tilings: dict[int, tuple[list[int], list[int], int]] = {}

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return self.mesh._flat

    def _tiling(self, rank: int) -> tuple[list[int], list[int], int]:
        found = self._tilings.get(rank)
        if found is None:
            found = self._tilings[rank] = self._compute_tiling(rank)
        return found

    def _compute_tiling(self, rank: int) -> tuple[list[int], list[int], int]:
        if len(self.spec) > rank:
            raise ShardingError(
                f"Sharding {self!r} is only valid for values of rank at least {len(self.spec)}, "
                f"but was applied to a value of rank {rank}."
            )
        from ferrax import _ir

        return _ir.sharding_tiling(self.mesh.axis_names, self.mesh.axis_sizes, tuple(self.spec), rank)

    def _hlo_text(self, rank: int) -> str:
        self._tiling(rank)  # a spec longer than the rank is refused with JAX's message
        from ferrax import _ir

        return _ir.hlo_sharding(self.mesh.axis_names, self.mesh.axis_sizes, tuple(self.spec), rank)

    @property
    def is_fully_replicated(self) -> bool:
        return all(len(self.spec.axes_of(d)) == 0 or all(self.mesh.shape[a] == 1 for a in self.spec.axes_of(d)) for d in range(len(self.spec)))

    def with_spec(self, spec: PartitionSpec) -> NamedSharding:
        """The same mesh with another spec."""
        return NamedSharding(self.mesh, spec)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, NamedSharding):
            return NotImplemented
        return (
            hash(self) == hash(other)
            and self.mesh == other.mesh
            and self.__dict__["_trimmed_spec"] == other.__dict__["_trimmed_spec"]
        )

    def __hash__(self) -> int:
        # Cached with the trimmed spec (a call of a jitted function compares its
        # arguments' shardings with the executable's).
        h = self.__dict__.get("_hash_value")
        if h is None:
            trimmed = self.__dict__["_trimmed_spec"] = _trimmed(self.spec)
            h = self.__dict__["_hash_value"] = hash((self.mesh, trimmed))
        return int(h)

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec}, memory_kind=device)"


def _trimmed(spec: PartitionSpec) -> tuple[SpecEntry, ...]:
    entries = list(spec._entries())
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries)


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    def __init__(self, device: Device, *, memory_kind: str | None = None) -> None:
        if memory_kind not in (None, "device"):
            raise ValueError(f"memory_kind {memory_kind!r} is not supported (only 'device')")
        self._device = device

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return (self._device,)

    def _tiling(self, rank: int) -> tuple[list[int], list[int], int]:
        return [1] * rank, [0], 1

    def _hlo_text(self, rank: int) -> str:
        return "{replicated}"

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SingleDeviceSharding):
            return NotImplemented
        return bool(self._device.id == other._device.id)

    def __hash__(self) -> int:
        return hash(("single", self._device.id))

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind=device)"


class PositionalSharding(Sharding):
    """A layout XLA chose that no :class:`NamedSharding` of the mesh spells (rare):
    its HloSharding text over the devices in partition order."""

    def __init__(self, devices: Sequence[Device], hlo_text: str, tiles: list[int], order: list[int], copies: int) -> None:
        self._devices = tuple(devices)
        self._text = hlo_text
        self._tiles = tiles
        self._order = order
        self._copies = copies

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return self._devices

    def _tiling(self, rank: int) -> tuple[list[int], list[int], int]:
        return list(self._tiles), list(self._order), self._copies

    def _hlo_text(self, rank: int) -> str:
        return self._text

    @property
    def is_fully_replicated(self) -> bool:
        return all(t == 1 for t in self._tiles)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PositionalSharding):
            return NotImplemented
        return self._text == other._text and [d.id for d in self._devices] == [d.id for d in other._devices]

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return f"GSPMDSharding({self._text}, devices={[d.id for d in self._devices]})"


def named_from_hlo(mesh: Mesh, rank: int, tiles: list[int], order: list[int], copies: int) -> NamedSharding | None:
    """The :class:`NamedSharding` of ``mesh`` with this tiling, if one spells it (mesh
    axes are assigned to dimensions in mesh order or any order, tried exhaustively: a
    mesh has a handful of axes)."""
    names = mesh.axis_names
    sizes = dict(zip(names, mesh.axis_sizes))
    target = (tiles, order, copies)

    def choices(t: int, free: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        if t == 1:
            yield ()
            return
        for k in range(1, len(free) + 1):
            for combo in itertools.permutations(free, k):
                if math.prod(sizes[a] for a in combo) == t:
                    yield combo

    def search(d: int, free: tuple[str, ...], acc: list[SpecEntry]) -> NamedSharding | None:
        if d == rank:
            entries = list(acc)
            while entries and entries[-1] is None:
                entries.pop()
            cand = NamedSharding(mesh, PartitionSpec(*entries))
            return cand if cand._tiling(rank) == target else None
        for combo in choices(tiles[d], free):
            entry: SpecEntry = None if not combo else (combo[0] if len(combo) == 1 else combo)
            found = search(d + 1, tuple(a for a in free if a not in combo), acc + [entry])
            if found is not None:
                return found
        return None

    if len(tiles) != rank:
        return None
    return search(0, names, [])


def spec_axes(spec: PartitionSpec) -> Mapping[int, tuple[str, ...]]:
    """Each split dimension with its mesh axes."""
    return {d: spec.axes_of(d) for d in range(len(spec)) if spec.axes_of(d)}


# Meshes the functions being traced use (sharding constraints, shard_map): a jitted
# function runs on its mesh's devices even when no argument or output says so. One stack
# of sets per thread, as tracing state is per thread.
_meshes_in_use = threading.local()


def note_mesh(mesh: Mesh) -> None:
    """Records that the function being traced uses ``mesh`` (no-op outside a trace that
    collects meshes)."""
    stack: list[set[Mesh]] | None = getattr(_meshes_in_use, "stack", None)
    if stack:
        stack[-1].add(mesh)


@contextmanager
def collecting_meshes() -> Iterator[set[Mesh]]:
    """Collects the meshes noted inside the block (nested blocks' meshes count for the
    enclosing ones too)."""
    stack: list[set[Mesh]] | None = getattr(_meshes_in_use, "stack", None)
    if stack is None:
        stack = _meshes_in_use.stack = []
    found: set[Mesh] = set()
    stack.append(found)
    try:
        yield found
    finally:
        stack.pop()
        if stack:
            stack[-1].update(found)
