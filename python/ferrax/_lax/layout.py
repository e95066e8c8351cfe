"""``sharding_constraint``: a value laid out over devices as a sharding asks
(``lax.with_sharding_constraint``), with its rules side by side.

Inside ``jit`` the primitive stays in the jaxpr and lowers to Shardy's
``sdy.sharding_constraint`` for XLA's partitioner; eagerly the value is laid out at once
(``device_put``). It is the identity on values, so it is linear (its transpose, in Rust,
is itself) and vectorizes by leaving the batch axis unsplit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ferrax._core import EvalTrace, Primitive, find_top_trace, user_location
from ferrax._interpreters import ad

__all__ = ["sharding_constraint_p", "with_sharding_constraint"]

sharding_constraint_p = Primitive.builtin("sharding_constraint")
"""``sharding_constraint[mesh spec]``: the operand, laid out as ``spec`` on ``mesh``."""


@sharding_constraint_p.def_impl
def _impl(x: Any, *, mesh: Any, spec: Any) -> Any:
    # Evaluating a jaxpr eagerly: the value is the operand (the layout is for XLA).
    return x


ad.deflinear(sharding_constraint_p)


def _batch(vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, mesh: Any, spec: Any) -> tuple[Any, int | None]:
    (x,), (d,) = vals, dims
    if d is None:
        return sharding_constraint_p.bind(x, mesh=mesh, spec=spec), None
    entries = list(spec) + [None] * (x.ndim - 1 - len(spec))
    entries.insert(d, None)
    return sharding_constraint_p.bind(x, mesh=mesh, spec=tuple(entries)), d


sharding_constraint_p.def_batch(_batch)


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """``x`` (a pytree) laid out as ``shardings`` say (a :class:`NamedSharding`, a
    :class:`PartitionSpec` of the mesh in use, or a pytree prefix of them), as JAX's:
    under ``jit`` a request to XLA's partitioner, eagerly a ``device_put``."""
    from ferrax._runtime import device_put
    from ferrax.sharding import NamedSharding, PartitionSpec, note_mesh
    from ferrax.tree_util import tree_flatten, tree_unflatten

    leaves, tree = tree_flatten(x)
    if isinstance(shardings, (NamedSharding, PartitionSpec)):
        targets = [shardings] * len(leaves)
    else:
        targets, ttree = tree_flatten(shardings, is_leaf=lambda s: isinstance(s, (NamedSharding, PartitionSpec)))
        if len(targets) != len(leaves):
            raise ValueError(
                f"with_sharding_constraint: {len(targets)} shardings for {len(leaves)} values "
                f"(the tree of shardings {ttree} is not the values' {tree}), at {user_location()}"
            )
    out = []
    for leaf, s in zip(leaves, targets):
        if isinstance(s, PartitionSpec):
            raise ValueError(
                "with_sharding_constraint needs a NamedSharding (a PartitionSpec alone needs a "
                f"mesh in context, which ferrax does not have), at {user_location()}"
            )
        if not isinstance(s, NamedSharding):
            raise TypeError(f"with_sharding_constraint expects NamedShardings, got {s!r}, at {user_location()}")
        rank = len(getattr(leaf, "shape", ()))
        s._tiling(rank)  # a spec longer than the rank is refused here, with JAX's message
        if isinstance(find_top_trace([leaf]), EvalTrace):
            out.append(device_put(leaf, s))
        else:
            note_mesh(s.mesh)
            out.append(sharding_constraint_p.bind(leaf, mesh=s.mesh.shape_tuple, spec=tuple(s.spec)))
    return tree_unflatten(tree, out)
