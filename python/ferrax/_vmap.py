"""``vmap``: a function mapped over an axis of its arguments, vectorized (JAX's API)."""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ferrax._core import Tracer, aval_of, user_location
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


def _arg_names(fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """How JAX's messages name each leaf of the arguments: the parameter's name and the
    leaf's path within it (``d['a']``), or ``args[1]`` when the name is unknown."""
    from ferrax._lax.control import _leaf_paths, _param_name

    names: list[str] = []
    for i, a in enumerate(args):
        base = _param_name(fun, i, "")
        base = f"argument {base}" if base else f"args[{i}]"
        names.extend(base + p for p in _leaf_paths(tree_flatten(a)[1]))
    names.extend(f"kwargs{p}" for p in _leaf_paths(tree_flatten(kwargs)[1]))
    return names


def _type_text(x: Any) -> str:
    a = aval_of(x)
    return f"{a.dtype.name}[{','.join(str(d) for d in a.shape)}]"


def vmap(
    fun: Callable[..., Any],
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Hashable | None = None,
    axis_size: int | None = None,
    spmd_axis_name: Hashable | tuple[Hashable, ...] | None = None,
) -> Callable[..., Any]:
    """``fun`` mapped over axis ``in_axes`` of its arguments (an int, None for an
    argument every element shares, or a pytree of those matching the arguments),
    vectorized: the mapped axis of the outputs is ``out_axes`` (None: an output the same
    for every element). ``axis_size`` gives the size when no argument is mapped.

    ``axis_name`` names the mapped axis for the collectives ``fun`` applies
    (``lax.psum(x, axis_name)`` sums over the mapped elements, ``lax.axis_index`` is
    each element's index, ...), as in JAX. ``spmd_axis_name`` is accepted for JAX's
    signature; it only places the mapped axis on mesh devices in JAX, which does not
    change values, and ferrax does not place it yet."""
    if not callable(fun):
        raise TypeError(f"vmap: expected a callable value, got {fun!r:.60}, at {user_location()}")
    for what, spec in (("in_axes", in_axes), ("out_axes", out_axes)):
        bad = [a for a in tree_flatten(spec)[0] if not (isinstance(a, int) and not isinstance(a, bool))]
        if bad:
            raise TypeError(
                f"vmap {what} must be an int, None, or a (nested) tuple, list or dict of those "
                f"matching the {'arguments' if what == 'in_axes' else 'outputs'}, but got {spec!r}, "
                f"at {user_location()}"
            )

    @functools.wraps(fun)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        # Keyword arguments are mapped over their first axis, as in JAX.
        flat, in_tree = tree_flatten(args)
        kw_flat, kw_tree = tree_flatten(kwargs)
        spec = in_axes if not isinstance(in_axes, list) else tuple(in_axes)
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(
                f"vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                f"positional arguments passed to the function, but got len(in_axes)={len(spec)}, "
                f"len(args)={len(args)}, at {user_location()}"
            )
        axes = _leaf_axes(spec, in_tree, "in_axes") + [0] * len(kw_flat)
        n_pos = len(flat)
        flat = [*flat, *kw_flat]
        sizes = []
        dims: list[int | None] = []
        for x, a in zip(flat, axes):
            if a is None:
                dims.append(None)
                continue
            shape = aval_of(x).shape
            nd = len(shape)
            if not -nd <= a < nd:
                raise ValueError(
                    f"vmap was requested to map its argument along axis {a}, which implies that "
                    f"its rank should be at least {a + 1 if a >= 0 else -a}, but is only {nd} "
                    f"(its shape is {shape}), at {user_location()}"
                )
            dims.append(a % nd)
            sizes.append(shape[a % nd])
        size = axis_size if axis_size is not None else (sizes[0] if sizes else None)
        if size is None:
            raise ValueError(
                f"vmap must have at least one non-None value in in_axes (or an axis_size), at {user_location()}"
            )
        if any(s != size for s in sizes):
            names = _arg_names(fun, args, kwargs)
            mapped_leaves = [(x, d, name) for x, d, name in zip(flat, dims, names) if d is not None]
            lines = [] if axis_size is None else [f"the `axis_size` argument was {axis_size}"]
            # As JAX: one line per size, the most common first, with an example.
            for k, (sz, count) in enumerate(collections.Counter(sizes).most_common()):
                x, d, name = next(leaf for leaf in mapped_leaves if aval_of(leaf[0]).shape[leaf[1]] == sz)
                example = f"axis {d} of {name} of type {_type_text(x)}"
                if count == 1:
                    lines.append(f"one axis had size {sz}: {example}")
                else:
                    lines.append(f"{'most' if k == 0 else 'some'} axes ({count} of them) had size {sz}, e.g. {example}")
            raise ValueError(
                "vmap got inconsistent sizes for array axes to be mapped:\n"
                + ";\n".join(f"  * {line}" for line in lines)
                + f"\n  at {user_location()}"
            )
        out_tree_cell: list[PyTreeDef] = []
        raw_cell: list[list[Any]] = []

        def flat_fun(*leaves: Any) -> list[Any]:
            out = fun(*tree_unflatten(in_tree, list(leaves[:n_pos])), **tree_unflatten(kw_tree, list(leaves[n_pos:])))
            out_flat, out_tree = tree_flatten(out)
            out_tree_cell.append(out_tree)
            raw_cell.append(out_flat)
            return out_flat

        outs, out_dims = batching.batch_flat(flat_fun, list(flat), dims, size, axis_name)
        out_tree = out_tree_cell[0]
        oaxes = _leaf_axes(out_axes if not isinstance(out_axes, list) else tuple(out_axes), out_tree, "out_axes")
        from ferrax._lax.control import _leaf_paths

        results = []
        for o, od, a, path, raw in zip(outs, out_dims, oaxes, _leaf_paths(out_tree), raw_cell[0]):
            if a is None and not isinstance(raw, Tracer):
                # A value the function returned as it is (a Python scalar, a NumPy
                # array): returned as it is, as JAX does.
                results.append(raw)
                continue
            if a is None:
                if od is not None:
                    raise ValueError(
                        f"at vmap out_axes{path}, got axis spec None but output was batched on "
                        f"axis {od}, at {user_location()}"
                    )
                results.append(o)
                continue
            if od is None:
                o = batching.bdim_at_front(o, None, size)
                od = 0
            nd = len(aval_of(o).shape)
            if not -nd <= a < nd:
                raise ValueError(
                    f"at vmap out_axes{path}, axis {a} is out of bounds for the output of "
                    f"dimension {nd} (with its mapped axis), at {user_location()}"
                )
            results.append(batching.moveaxis(o, od, a % nd))
        return tree_unflatten(out_tree, results)

    return mapped
