"""Named axes: which axis names are bound while a function runs, and by what.

``vmap(f, axis_name='i')`` binds ``'i'`` to its batching trace while ``f`` runs; a
``shard_map`` binds its mesh's axes while its body is traced or evaluated. The
collectives (``ferrax.lax.psum`` and friends) look their axis names up here: a name
bound by a ``vmap`` sends the collective to that ``vmap``'s batching trace, which gives
it its single-device meaning; a name bound by a ``shard_map`` is recorded in the jaxpr
(the Rust typechecker knows the sizes from the environment passed along). The innermost
binding of a name wins. The stack is per thread, as the trace stack.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ferrax._user_frames import user_location

if TYPE_CHECKING:
    from ferrax._core import MainTrace

__all__ = ["AxisFrame", "axis_env", "bind_axes", "frame_of", "unbound_axis_error"]


class AxisFrame:
    """One bound axis name: its size, and the ``vmap``'s main trace that binds it
    (``None`` for a ``shard_map``'s mesh axis)."""

    __slots__ = ("name", "size", "main")

    def __init__(self, name: Hashable, size: int, main: MainTrace | None) -> None:
        self.name = name
        self.size = size
        self.main = main

    def __repr__(self) -> str:
        kind = "vmap" if self.main is not None else "mesh"
        return f"AxisFrame({self.name!r}, {self.size}, {kind})"


class _Frames(threading.local):
    def __init__(self) -> None:
        self.frames: list[AxisFrame] = []


_state = _Frames()


@contextmanager
def bind_axes(frames: Sequence[AxisFrame]) -> Iterator[None]:
    """Binds these axis names for the duration of the block (innermost last)."""
    stack = _state.frames
    n = len(stack)
    stack.extend(frames)
    try:
        yield
    finally:
        del stack[n:]


def frame_of(name: Hashable) -> AxisFrame | None:
    """The innermost binding of ``name``, if any."""
    for frame in reversed(_state.frames):
        if frame.name == name:
            return frame
    return None


def axis_env() -> dict[str, int] | None:
    """Every bound axis name and its size (the innermost binding of each), as the Rust
    rules take them; ``None`` when no axis is bound, or when a ``vmap`` named its axis
    with something else than a string (the rules then check collectives leniently)."""
    frames = _state.frames
    if not frames:
        return None
    env: dict[str, int] = {}
    for frame in frames:
        if not isinstance(frame.name, str):
            return None
        env[frame.name] = frame.size
    return env


def unbound_axis_error(name: object, what: str) -> NameError:
    """JAX's error for an axis name nothing binds (a ``NameError`` whose text holds
    ``unbound axis name: <name>``), saying where ``what`` must be called."""
    return NameError(
        f"Found an unbound axis name: {name}. To fix this, please call {what} under "
        f"`ferrax.shard_map` or a `ferrax.vmap` with that axis_name, at {user_location()}"
    )
