"""The differentiation API: ``jvp`` (and, as they land, ``linearize``, ``vjp``,
``grad``), with JAX's names, conventions and errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import ConcreteArray, aval_of, user_location
from ferrax._interpreters import ad
from ferrax.tree_util import tree_flatten, tree_unflatten

__all__ = ["jvp"]


def _tangent_value(t: Any, aval: Any) -> Any:
    """An output tangent as the user sees it: zeros materialized, float0 for integers."""
    if not ad.is_differentiable(aval.dtype):
        return np.zeros(aval.shape, dtype=ad.float0)
    if type(t) is ad.Zero:
        return ad.instantiate(t)
    return t


def _check_tangent(i: int, primal: Any, tangent: Any) -> Any:
    """The input tangent for one primal leaf, checked as JAX checks it."""
    p = aval_of(primal)
    t_dtype = np.dtype(tangent.dtype) if hasattr(tangent, "dtype") else aval_of(tangent).dtype
    t_shape = tuple(np.shape(tangent))
    if not ad.is_differentiable(p.dtype):
        if t_dtype != ad.float0:
            raise TypeError(
                "primal and tangent arguments to ferrax.jvp do not match; dtypes must be equal, "
                f"or in case of int/bool primal dtype the tangent dtype must be float0. Got primal "
                f"dtype {p.dtype} and so expected tangent dtype float0, but got tangent dtype "
                f"{t_dtype} instead (leaf {i}), at {user_location()}"
            )
        if t_shape != p.shape:
            raise ValueError(
                f"ferrax.jvp called with different primal and tangent shapes; got primal shape "
                f"{p.shape} and tangent shape {t_shape} (leaf {i}), at {user_location()}"
            )
        return ad.Zero(p)
    t = aval_of(tangent)
    if t.dtype != p.dtype:
        raise TypeError(
            "primal and tangent arguments to ferrax.jvp do not match; dtypes must be equal, "
            f"or in case of int/bool primal dtype the tangent dtype must be float0. Got primal "
            f"dtype {p.dtype} and tangent dtype {t.dtype} (leaf {i}), at {user_location()}"
        )
    if t.shape != p.shape:
        raise ValueError(
            f"ferrax.jvp called with different primal and tangent shapes; got primal shape "
            f"{p.shape} and tangent shape {t.shape} (leaf {i}), at {user_location()}"
        )
    return tangent


def jvp(
    fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False
) -> tuple[Any, ...]:
    """Forward-mode derivative: ``fun(*primals)`` and its directional derivative along
    ``tangents`` (a tuple or list like ``primals``, one tangent per array leaf, of the
    leaf's shape and dtype; ``float0`` for integer and boolean leaves). Returns
    ``(primals_out, tangents_out)``, plus ``aux`` with ``has_aux``."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            "primal and tangent arguments to ferrax.jvp must be tuples or lists; found "
            f"{type(primals).__name__} and {type(tangents).__name__}, at {user_location()}"
        )
    flat_p, tree_p = tree_flatten(tuple(primals))
    flat_t, tree_t = tree_flatten(tuple(tangents))
    if tree_p != tree_t:
        raise TypeError(
            "primal and tangent arguments to ferrax.jvp must have the same tree structure; "
            f"primals have tree structure {tree_p} whereas tangents have tree structure "
            f"{tree_t}, at {user_location()}"
        )
    checked = [_check_tangent(i, p, t) for i, (p, t) in enumerate(zip(flat_p, flat_t))]
    out_tree_cell: list[Any] = []

    def flat_fun(*leaves: Any) -> list[Any]:
        out = fun(*tree_unflatten(tree_p, list(leaves)))
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(
                    "with has_aux=True the function must return a pair (output, aux), "
                    f"got {type(out).__name__}, at {user_location()}"
                )
            out, aux = out
            traces = {x._trace for x in leaves if isinstance(x, ad.JVPTracer)}
            aux_leaves, aux_tree = tree_flatten(aux)
            aux_leaves = [
                x.primal if isinstance(x, ad.JVPTracer) and x._trace in traces else x for x in aux_leaves
            ]
            out_tree_cell.append(tree_unflatten(aux_tree, aux_leaves))
        flat_out, out_tree = tree_flatten(out)
        out_tree_cell.insert(0, out_tree)
        return flat_out

    p_out, t_out = ad.jvp_flat(flat_fun, list(flat_p), checked)
    out_tree = out_tree_cell[0]
    t_values = [_tangent_value(t, aval_of(p)) for t, p in zip(t_out, p_out)]
    p_values = [p if isinstance(p, Array) else ConcreteArray(np.asarray(p)) for p in p_out]
    result = (tree_unflatten(out_tree, p_values), tree_unflatten(out_tree, t_values))
    if has_aux:
        return (*result, out_tree_cell[1])
    return result
