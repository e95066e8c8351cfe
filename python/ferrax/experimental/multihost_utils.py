"""Utilities for several processes, as ``jax.experimental.multihost_utils``:
:func:`process_allgather` (every process's value on every process),
:func:`broadcast_one_to_all` (one process's value on every process),
:func:`assert_equal` (every process has the same value),
:func:`host_local_array_to_global_array` and :func:`global_array_to_host_local_array`
(each process's local values <-> global arrays) and :func:`sync_global_devices` (a
barrier)."""

from ferrax._multihost import (
    assert_equal,
    broadcast_one_to_all,
    global_array_to_host_local_array,
    host_local_array_to_global_array,
    process_allgather,
    sync_global_devices,
)

__all__ = [
    "assert_equal",
    "broadcast_one_to_all",
    "global_array_to_host_local_array",
    "host_local_array_to_global_array",
    "process_allgather",
    "sync_global_devices",
]
