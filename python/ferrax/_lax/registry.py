"""The built-in primitives by name, for interpreting jaxprs (``eval_jaxpr``)."""

from __future__ import annotations

from ferrax._core import Primitive, extension_named
from ferrax._lax import bits, control, custom, elementwise, layout, parallel, reductions, slicing, sorting, special, structural
from ferrax._lax import windowed
from ferrax._lax import prng
from ferrax._lax import convolution
from ferrax._lax import linalg
from ferrax._lax import igamma


def _collect() -> dict[str, Primitive]:
    found: dict[str, Primitive] = {}
    for module in (bits, control, custom, elementwise, layout, parallel, reductions, slicing, sorting, special, structural, windowed,
                   convolution, linalg, prng, igamma):
        for value in vars(module).values():
            if isinstance(value, Primitive):
                found[value.name] = value
    from ferrax._jit import jit_p
    from ferrax._shard_map import shard_map_p

    found[jit_p.name] = jit_p
    found[shard_map_p.name] = shard_map_p
    from ferrax._callback import debug_callback_p, debug_print_p, io_callback_p, pure_callback_p

    for callback_p in (debug_callback_p, pure_callback_p, io_callback_p, debug_print_p):
        found[callback_p.name] = callback_p
    return found


_by_name: dict[str, Primitive] | None = None


def primitive_named(name: str) -> Primitive:
    """The built-in primitive called ``name`` (or the extension primitive of that name
    a jaxpr holds)."""
    global _by_name
    if _by_name is None:
        _by_name = _collect()
    prim = _by_name.get(name)
    if prim is None:
        prim = extension_named(name)
    if prim is None:
        raise NotImplementedError(f"no Python rules are registered for primitive '{name}'")
    return prim
