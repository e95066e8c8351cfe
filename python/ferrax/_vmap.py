"""``vmap``: a function mapped over an axis of its arguments, vectorized (JAX's API)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ferrax._core import aval_of, user_location
from ferrax._interpreters import batching
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = ["vmap"]


def _leaf_axes(axes: Any, tree: PyTreeDef, what: str) -> list[int | None]:
    """``axes`` (an int, None, or a pytree prefix of ``tree``'s) for every leaf."""
    if axes is None or isinstance(axes, int):
        return [axes] * tree.num_leaves
    children = tree.children
    if isinstance(axes, (tuple, list)) and tree._kind in (tuple, list) and len(axes) == len(children):
        out: list[int | None] = []
        for a, child in zip(axes, children):
            out.extend(_leaf_axes(a, child, what))
        return out
    if isinstance(axes, dict) and tree._kind is dict:
        keys = tree._aux if isinstance(tree._aux, (tuple, list)) else None
        if keys is not None and sorted(axes) == sorted(keys):
            out = []
            for k, child in zip(keys, children):
                out.extend(_leaf_axes(axes[k], child, what))
            return out
    raise ValueError(
        f"vmap {what} specification must be a tree prefix of the corresponding value, got "
        f"specification {axes!r} for value tree {tree}, at {user_location()}"
    )


def vmap(
    fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0, axis_size: int | None = None
) -> Callable[..., Any]:
    """``fun`` mapped over axis ``in_axes`` of its arguments (an int, None for an
    argument every element shares, or a pytree of those matching the arguments),
    vectorized: the mapped axis of the outputs is ``out_axes``."""
    if not callable(fun):
        raise TypeError(f"vmap: expected a callable value, got {fun!r:.60}, at {user_location()}")

    @functools.wraps(fun)
    def mapped(*args: Any) -> Any:
        flat, in_tree = tree_flatten(args)
        spec = in_axes if not isinstance(in_axes, list) else tuple(in_axes)
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(
                f"vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                f"positional arguments passed to the function, but got len(in_axes)={len(spec)}, "
                f"len(args)={len(args)}, at {user_location()}"
            )
        axes = _leaf_axes(spec, in_tree, "in_axes")
        sizes = []
        dims: list[int | None] = []
        for i, (x, a) in enumerate(zip(flat, axes)):
            if a is None:
                dims.append(None)
                continue
            nd = len(aval_of(x).shape)
            if not -nd <= a < nd:
                raise ValueError(
                    f"vmap was requested to map its argument along axis {a}, which implies that "
                    f"its rank should be at least {a + 1 if a >= 0 else -a}, but is only {nd} "
                    f"(its shape is {aval_of(x).shape}), at {user_location()}"
                )
            dims.append(a % nd)
            sizes.append(aval_of(x).shape[a % nd])
        size = axis_size if axis_size is not None else (sizes[0] if sizes else None)
        if size is None:
            raise ValueError(f"vmap must have at least one non-None value in in_axes, at {user_location()}")
        if any(s != size for s in sizes):
            listed = ", ".join(f"axis {a} of argument leaf {i} of shape {aval_of(x).shape}" for i, (x, a) in enumerate(zip(flat, axes)) if a is not None)
            raise ValueError(f"vmap got inconsistent sizes for array axes to be mapped: {listed}, at {user_location()}")
        out_tree_cell: list[PyTreeDef] = []

        def flat_fun(*leaves: Any) -> list[Any]:
            out = fun(*tree_unflatten(in_tree, list(leaves)))
            out_flat, out_tree = tree_flatten(out)
            out_tree_cell.append(out_tree)
            return out_flat

        outs, out_dims = batching.batch_flat(flat_fun, list(flat), dims, size)
        out_tree = out_tree_cell[0]
        oaxes = _leaf_axes(out_axes if not isinstance(out_axes, list) else tuple(out_axes), out_tree, "out_axes")
        results = []
        for o, d, a in zip(outs, out_dims, oaxes):
            if a is None:
                if d is not None:
                    raise ValueError(f"vmap has mapped output but out_axes is None, at {user_location()}")
                results.append(o)
                continue
            if d is None:
                o = batching.bdim_at_front(o, None, size)
                d = 0
            nd = len(aval_of(o).shape)
            results.append(batching.moveaxis(o, d, a % nd))
        return tree_unflatten(out_tree, results)

    return mapped
