"""The built-in primitives by name, for interpreting jaxprs (``eval_jaxpr``)."""

from __future__ import annotations

from ferrax._core import Primitive, extension_named
from ferrax._lax import bits, control, custom, elementwise, layout, parallel, reductions, slicing, sorting, special, structural
from ferrax._lax import linalg


def _collect() -> dict[str, Primitive]:
    found: dict[str, Primitive] = {}
    for module in (bits, control, custom, elementwise, layout, parallel, reductions, slicing, sorting, special, structural, linalg):
        for value in vars(module).values():
            if isinstance(value, Primitive):
                found[value.name] = value
    from ferrax._jit import jit_p
    from ferrax._shard_map import shard_map_p

    found[jit_p.name] = jit_p
    found[shard_map_p.name] = shard_map_p
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
