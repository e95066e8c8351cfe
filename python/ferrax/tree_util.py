"""Pytrees: nested tuples, lists, dicts, namedtuples, None and registered classes.

A pytree flattens to a list of leaves and a :class:`PyTreeDef` that rebuilds it. Dicts
flatten in sorted key order; ``None`` is an empty node (no leaves). Flattening is
iterative, so deep nests cannot overflow the stack.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, NamedTuple, TypeVar

__all__ = [
    "PyTreeDef",
    "register_pytree_node",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
]

T = TypeVar("T")

FlattenFn = Callable[[Any], tuple[Iterable[Any], Hashable]]
UnflattenFn = Callable[[Hashable, Iterable[Any]], Any]


class _NodeKind(NamedTuple):
    flatten: FlattenFn
    unflatten: UnflattenFn


_registry: dict[type, _NodeKind] = {}


def register_pytree_node(cls: type[T], flatten: FlattenFn, unflatten: UnflattenFn) -> None:
    """Makes instances of ``cls`` pytree nodes.

    ``flatten(x)`` returns ``(children, aux_data)`` where ``aux_data`` is hashable;
    ``unflatten(aux_data, children)`` rebuilds the node.
    """
    if cls in _registry or cls in (tuple, list, dict, type(None)):
        raise ValueError(f"{cls.__name__} is already a pytree node type")
    _registry[cls] = _NodeKind(flatten, unflatten)


class PyTreeDef:
    """The structure of a pytree: node kinds, auxiliary data and arity, leaves as holes.

    Hashable and comparable, so it can key caches.
    """

    __slots__ = ("_kind", "_aux", "_children", "_num_leaves", "_hash")

    def __init__(self, kind: str | type, aux: Hashable, children: tuple[PyTreeDef, ...]) -> None:
        self._kind = kind
        self._aux = aux
        self._children = children
        self._num_leaves = 1 if kind == "leaf" else sum(c._num_leaves for c in children)
        self._hash = hash((kind, aux, children))

    @property
    def num_leaves(self) -> int:
        """How many leaves the tree has."""
        return self._num_leaves

    @property
    def children(self) -> tuple[PyTreeDef, ...]:
        """The structures of the node's children."""
        return self._children

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return (
            self._hash == other._hash
            and self._kind == other._kind
            and self._aux == other._aux
            and self._children == other._children
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"PyTreeDef({self._describe()})"

    def _describe(self) -> str:
        if self._kind == "leaf":
            return "*"
        inner = ", ".join(c._describe() for c in self._children)
        if self._kind == "none":
            return "None"
        if self._kind is tuple:
            return f"({inner}{',' if len(self._children) == 1 else ''})"
        if self._kind is list:
            return f"[{inner}]"
        if self._kind is dict:
            keys = self._aux if isinstance(self._aux, tuple) else ()
            return "{" + ", ".join(f"{k!r}: {c._describe()}" for k, c in zip(keys, self._children)) + "}"
        name = self._kind.__name__ if isinstance(self._kind, type) else str(self._kind)
        return f"{name}({inner})"


_LEAF = PyTreeDef("leaf", None, ())


def _node_of(x: Any) -> tuple[str | type, Hashable, list[Any]] | None:
    """The kind, aux data and children of a node, or None for a leaf."""
    t = type(x)
    if t is tuple or t is list:
        return t, None, list(x)
    if t is dict:
        keys = tuple(sorted(x))
        return dict, keys, [x[k] for k in keys]
    if x is None:
        return "none", None, []
    reg = _registry.get(t)
    if reg is not None:
        children, aux = reg.flatten(x)
        return t, aux, list(children)
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return t, None, list(x)
    return None


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], PyTreeDef]:
    """The leaves of ``tree`` (left to right) and its structure."""
    leaves: list[Any] = []
    # Iterative post-order: (node, kind, aux, children, built child defs).
    stack: list[tuple[str | type, Hashable, list[Any], list[PyTreeDef]]] = []
    result: PyTreeDef | None = None

    def visit(x: Any) -> PyTreeDef | None:
        if is_leaf is not None and is_leaf(x):
            leaves.append(x)
            return _LEAF
        node = _node_of(x)
        if node is None:
            leaves.append(x)
            return _LEAF
        kind, aux, children = node
        stack.append((kind, aux, children[::-1], []))
        return None

    done = visit(tree)
    if done is not None:
        return leaves, done
    while stack:
        kind, aux, pending, built = stack[-1]
        if pending:
            child = pending.pop()
            d = visit(child)
            if d is not None:
                built.append(d)
            continue
        stack.pop()
        node_def = PyTreeDef(kind, aux, tuple(built))
        if stack:
            stack[-1][3].append(node_def)
        else:
            result = node_def
    assert result is not None
    return leaves, result


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuilds a tree of this structure from its leaves."""
    it = iter(leaves)
    leaves_list = list(it)
    if len(leaves_list) != treedef.num_leaves:
        raise ValueError(
            f"tree structure {treedef} has {treedef.num_leaves} leaves, got {len(leaves_list)}"
        )
    pos = 0
    # Iterative: (def, built children).
    stack: list[tuple[PyTreeDef, list[Any]]] = [(treedef, [])]
    result: Any = None
    while stack:
        d, built = stack[-1]
        if d._kind == "leaf":
            stack.pop()
            value = leaves_list[pos]
            pos += 1
        elif len(built) < len(d._children):
            stack.append((d._children[len(built)], []))
            continue
        else:
            stack.pop()
            value = _build(d, built)
        if stack:
            stack[-1][1].append(value)
        else:
            result = value
    return result


def _build(d: PyTreeDef, children: list[Any]) -> Any:
    kind = d._kind
    if kind is tuple:
        return tuple(children)
    if kind is list:
        return children
    if kind is dict:
        keys = d._aux
        assert isinstance(keys, tuple)
        return dict(zip(keys, children))
    if kind == "none":
        return None
    assert isinstance(kind, type)
    reg = _registry.get(kind)
    if reg is not None:
        return reg.unflatten(d._aux, children)
    return kind(*children)  # a namedtuple


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of ``tree``, left to right."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The structure of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Applies ``f`` to the leaves of ``tree`` (and the matching leaves of ``rest``)."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_def = tree_flatten(r, is_leaf)
        if r_def != treedef:
            raise ValueError(f"tree structures differ: {treedef} and {r_def}")
        others.append(r_leaves)
    return tree_unflatten(treedef, [f(x, *xs) for x, *xs in zip(leaves, *others)])
