"""Utilities for several processes, as ``jax.experimental.multihost_utils``:
:func:`process_allgather` (every process's value on every process),
:func:`broadcast_one_to_all` (one process's value on every process),
:func:`assert_equal` (every process has the same value) and
:func:`sync_global_devices` (a barrier)."""

from ferrax._multihost import assert_equal, broadcast_one_to_all, process_allgather, sync_global_devices

__all__ = ["assert_equal", "broadcast_one_to_all", "process_allgather", "sync_global_devices"]
