"""The devices ferrax runs on, as JAX lists them: ``ferrax.devices()`` and friends.

Several CPU devices in one process: ``ferrax.config.update("jax_num_cpu_devices", 4)``
before the first computation (or ``JAX_NUM_CPU_DEVICES=4``, or XLA's own
``XLA_FLAGS=--xla_force_host_platform_device_count=4``). Several processes:
:func:`ferrax.distributed.initialize`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax._runtime import backend
from ferrax.sharding import AxisType, Mesh

__all__ = [
    "device_count",
    "devices",
    "local_device_count",
    "local_devices",
    "make_mesh",
    "process_count",
    "process_index",
]


def _check_backend(backend_name: str | None) -> None:
    if backend_name not in (None, "cpu"):
        raise RuntimeError(f"Unknown backend {backend_name}: ferrax runs on 'cpu'")


def devices(backend: str | None = None) -> list[Any]:
    """Every device of every process, ordered by id."""
    _check_backend(backend)
    return list(_backend().all_devices)


def local_devices(process_index: int | None = None, backend: str | None = None) -> list[Any]:
    """The devices of one process (this one by default)."""
    _check_backend(backend)
    be = _backend()
    me = be.process_index if process_index is None else process_index
    return [d for d in be.all_devices if d.process_index == me]


def device_count(backend: str | None = None) -> int:
    """How many devices all processes have together."""
    return len(devices(backend))


def local_device_count(backend: str | None = None) -> int:
    """How many devices this process has."""
    return len(local_devices(backend=backend))


def process_index(backend: str | None = None) -> int:
    """This process's index among the processes of a distributed run (0 alone)."""
    _check_backend(backend)
    return int(_backend().process_index)


def process_count(backend: str | None = None) -> int:
    """How many processes run together (1 alone)."""
    _check_backend(backend)
    return len({d.process_index for d in _backend().all_devices})


def _backend() -> Any:
    return backend()


def make_mesh(
    axis_shapes: Sequence[int],
    axis_names: Sequence[str],
    axis_types: Sequence[AxisType] | None = None,
    *,
    devices: Sequence[Any] | None = None,
) -> Mesh:
    """A :class:`Mesh` of the given shape over the first devices (all of them by
    default, which must then number exactly the product of ``axis_shapes``). ferrax
    partitions every axis automatically (``AxisType.Auto``, JAX's default here is
    ``Explicit``)."""
    shape = tuple(int(s) for s in axis_shapes)
    names = tuple(axis_names)
    if len(shape) != len(names):
        raise ValueError(f"make_mesh: {len(shape)} axis sizes for {len(names)} axis names")
    devs = list(devices) if devices is not None else globals()["devices"]()
    n = int(np.prod(shape)) if shape else 1
    if n != len(devs):
        raise ValueError(
            f"Number of devices {len(devs)} must equal the product of mesh_shape {shape}"
        )
    arr = np.empty(len(devs), dtype=object)
    for i, d in enumerate(devs):
        arr[i] = d
    return Mesh(arr.reshape(shape), names, axis_types)
