"""Pytrees under short names, as ``jax.tree``: ``ferrax.tree.map`` is
:func:`ferrax.tree_util.tree_map`, ``ferrax.tree.leaves_with_path`` is
:func:`ferrax.tree_util.tree_leaves_with_path`, and so on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ferrax import tree_util
from ferrax.tree_util import KeyPath, PyTreeDef

__all__ = [
    "all",
    "broadcast",
    "flatten",
    "flatten_with_path",
    "leaves",
    "leaves_with_path",
    "map",
    "map_with_path",
    "reduce",
    "reduce_associative",
    "static",
    "structure",
    "transpose",
    "unflatten",
]

T = TypeVar("T")
_UNSPECIFIED: Any = tree_util._UNSPECIFIED


def all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every leaf of ``tree`` is true."""
    return tree_util.tree_all(tree, is_leaf=is_leaf)


def broadcast(prefix_tree: Any, full_tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``full_tree``'s structure with each leaf of ``prefix_tree`` (a prefix of it)
    repeated over the leaves of the subtree it stands for."""
    return tree_util.tree_broadcast(prefix_tree, full_tree, is_leaf)


def flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], PyTreeDef]:
    """The leaves of ``tree`` (left to right) and its structure."""
    return tree_util.tree_flatten(tree, is_leaf)


def flatten_with_path(
    tree: Any, is_leaf: Callable[..., bool] | None = None, is_leaf_takes_path: bool = False
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """The ``(key path, leaf)`` pairs of ``tree`` and its structure."""
    return tree_util.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)


def leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of ``tree``, left to right."""
    return tree_util.tree_leaves(tree, is_leaf)


def leaves_with_path(
    tree: Any, is_leaf: Callable[..., bool] | None = None, is_leaf_takes_path: bool = False
) -> list[tuple[KeyPath, Any]]:
    """The ``(key path, leaf)`` pairs of ``tree``, left to right."""
    return tree_util.tree_leaves_with_path(tree, is_leaf, is_leaf_takes_path)


def map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``f`` applied to the leaves of ``tree`` (and the matching subtrees of ``rest``),
    in a tree of ``tree``'s structure."""
    return tree_util.tree_map(f, tree, *rest, is_leaf=is_leaf)


def map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> Any:
    """:func:`map` where ``f`` receives each leaf's key path first."""
    return tree_util.tree_map_with_path(f, tree, *rest, is_leaf=is_leaf, is_leaf_takes_path=is_leaf_takes_path)


def reduce(
    function: Callable[[T, Any], T],
    tree: Any,
    initializer: Any = _UNSPECIFIED,
    is_leaf: Callable[[Any], bool] | None = None,
) -> T:
    """``functools.reduce`` over the leaves of ``tree``."""
    return tree_util.tree_reduce(function, tree, initializer, is_leaf)


def reduce_associative(
    operation: Callable[[T, T], T],
    tree: Any,
    *,
    identity: Any = _UNSPECIFIED,
    is_leaf: Callable[[Any], bool] | None = None,
) -> T:
    """Reduces the leaves with an associative ``operation`` as a balanced tree."""
    return tree_util.tree_reduce_associative(operation, tree, identity=identity, is_leaf=is_leaf)


def static(**kwargs: Any) -> Any:
    """A ``dataclasses.field`` marked static (``metadata={'static': True}``): aux data,
    not a child, when the class is registered with
    :func:`ferrax.tree_util.register_dataclass`."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)


def structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The structure of ``tree``."""
    return tree_util.tree_structure(tree, is_leaf)


def transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any) -> Any:
    """A tree of structure (outer, inner) turned into one of structure (inner, outer)."""
    return tree_util.tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose)


def unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """The tree of structure ``treedef`` with these leaves."""
    return tree_util.tree_unflatten(treedef, leaves)
