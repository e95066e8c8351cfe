"""Utilities for several processes, as ``jax.experimental.multihost_utils``:
:func:`process_allgather` (every process's value on every process) and
:func:`sync_global_devices` (a barrier)."""

from ferrax._multihost import process_allgather, sync_global_devices

__all__ = ["process_allgather", "sync_global_devices"]
