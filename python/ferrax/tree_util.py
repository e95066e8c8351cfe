"""Pytrees: nested tuples, lists, dicts, namedtuples, None and registered classes.

A pytree flattens to a list of leaves and a :class:`PyTreeDef` that rebuilds it. As in
JAX: dicts flatten in sorted key order (``OrderedDict`` in insertion order), ``None`` is a
node without children (no leaves), namedtuples are nodes of their class, and any other
object is a leaf unless its class is registered with :func:`register_pytree_node`.
Every function here is iterative, so deeply nested trees cannot overflow the stack.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, NamedTuple, TypeVar

from ferrax._array import type_name

__all__ = [
    "PyTreeDef",
    "register_pytree_node",
    "register_pytree_node_class",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
]

T = TypeVar("T")
C = TypeVar("C", bound=type)

FlattenFn = Callable[[Any], tuple[Iterable[Any], Hashable]]
UnflattenFn = Callable[[Hashable, Iterable[Any]], Any]
IsLeaf = Callable[[Any], bool]


class _NodeKind(NamedTuple):
    flatten: FlattenFn
    unflatten: UnflattenFn


_registry: dict[type, _NodeKind] = {}
_BUILT_IN = (tuple, list, dict, OrderedDict, defaultdict, type(None))
# Types seen to be leaves (a cache for flattening; registering a type clears it).
_leaf_types: set[type] = set()


def register_pytree_node(cls: type[T], flatten: FlattenFn, unflatten: UnflattenFn) -> None:
    """Makes instances of ``cls`` (exactly; not its subclasses) pytree nodes.

    ``flatten(x)`` returns ``(children, aux_data)`` where ``aux_data`` is hashable and
    comparable; ``unflatten(aux_data, children)`` rebuilds the node.
    """
    if cls in _registry or cls in _BUILT_IN:
        raise ValueError(f"{cls.__name__} is already a pytree node type")
    _registry[cls] = _NodeKind(flatten, unflatten)
    _leaf_types.clear()


def register_pytree_node_class(cls: C) -> C:
    """Class decorator: registers ``cls`` with its ``tree_flatten`` method and its
    ``tree_unflatten(aux_data, children)`` classmethod."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), getattr(cls, "tree_unflatten"))
    return cls


# Node kinds of the built-in containers (registered classes and namedtuples are their
# class).
_LEAF_KIND = "leaf"
_NONE_KIND = "None"


class PyTreeDef:
    """The structure of a pytree: node kinds, auxiliary data and arity, leaves as holes.

    Hashable and comparable (in time linear in its size, without recursion), so it can
    key caches.
    """

    __slots__ = ("_kind", "_aux", "_children", "_num_leaves", "_hash", "_plan")

    _kind: str | type
    _aux: Hashable
    _children: tuple[PyTreeDef, ...]
    _num_leaves: int
    _hash: int
    # How :func:`tree_unflatten` rebuilds the tree, made on first use: the nodes in
    # post-order, a leaf as None and a node as (its structure, its arity).
    _plan: list[tuple[PyTreeDef, int] | None] | None

    def __init__(self, kind: str | type, aux: Hashable, children: tuple[PyTreeDef, ...]) -> None:
        self._plan = None
        self._kind = kind
        self._aux = aux
        self._children = children
        self._num_leaves = 1 if kind == _LEAF_KIND else sum(c._num_leaves for c in children)
        # The children's hashes are cached, so this is not recursive.
        self._hash = hash((kind, aux, tuple(c._hash for c in children)))

    @property
    def num_leaves(self) -> int:
        """How many leaves the tree has."""
        return self._num_leaves

    @property
    def children(self) -> tuple[PyTreeDef, ...]:
        """The structures of the node's children."""
        return self._children

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """The tree of this structure with these leaves (:func:`tree_unflatten`)."""
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """The subtrees of ``tree`` at this structure's leaves; ``tree`` must have this
        structure down to them (else ``ValueError``)."""
        out: list[Any] = []
        pending: list[tuple[PyTreeDef, Any]] = [(self, tree)]
        while pending:
            d, x = pending.pop()
            if d._kind == _LEAF_KIND:
                out.append(x)
                continue
            node = _node_of(x)
            if node is None or node[0] != d._kind or node[1] != d._aux:
                raise ValueError(
                    f"tree structure mismatch: expected {d._describe_node()}, got "
                    f"{_describe_value(x)} (in {self})"
                )
            children = node[2]
            if len(children) != len(d._children):
                raise ValueError(
                    f"tree structure mismatch: expected {d._describe_node()}, got "
                    f"{_describe_value(x)} (in {self})"
                )
            pending.extend(reversed(list(zip(d._children, children))))
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        pending = [(self, other)]
        while pending:
            a, b = pending.pop()
            if a is b:
                continue
            if (
                a._hash != b._hash
                or a._kind != b._kind
                or a._aux != b._aux
                or len(a._children) != len(b._children)
            ):
                return False
            pending.extend(zip(a._children, b._children))
        return True

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"PyTreeDef({self._describe()})"

    def _describe_node(self) -> str:
        kind = self._kind
        if kind is tuple:
            return f"a tuple of {len(self._children)}"
        if kind is list:
            return f"a list of {len(self._children)}"
        if kind in (dict, OrderedDict, defaultdict):
            return f"a {getattr(kind, '__name__', kind)} with keys {list(self._keys())}"
        if kind == _NONE_KIND:
            return "None"
        return f"a {getattr(kind, '__name__', kind)} node"

    def _keys(self) -> tuple[Any, ...]:
        aux = self._aux
        if self._kind is defaultdict:
            assert isinstance(aux, tuple)
            return tuple(aux[1])
        return aux if isinstance(aux, tuple) else ()

    def _describe(self) -> str:
        # Iterative: a stack of text fragments and nodes still to describe.
        parts: list[str] = []
        pending: list[PyTreeDef | str] = [self]
        while pending:
            item = pending.pop()
            if isinstance(item, str):
                parts.append(item)
                continue
            kind = item._kind
            if kind == _LEAF_KIND:
                parts.append("*")
                continue
            if kind == _NONE_KIND:
                parts.append("None")
                continue
            if kind is tuple:
                opening, closing = "(", ",)" if len(item._children) == 1 else ")"
                labels = [""] * len(item._children)
            elif kind is list:
                opening, closing = "[", "]"
                labels = [""] * len(item._children)
            elif kind in (dict, OrderedDict, defaultdict):
                opening, closing = "{", "}"
                labels = [f"{k!r}: " for k in item._keys()]
            else:
                opening, closing = f"{getattr(kind, '__name__', kind)}(", ")"
                labels = [""] * len(item._children)
            todo: list[PyTreeDef | str] = [opening]
            for i, (label, child) in enumerate(zip(labels, item._children)):
                todo.append((", " if i else "") + label)
                todo.append(child)
            todo.append(closing)
            pending.extend(reversed(todo))
        return "".join(parts)


_LEAF = PyTreeDef(_LEAF_KIND, None, ())


def _sorted_keys(d: dict[Any, Any]) -> tuple[Any, ...]:
    try:
        return tuple(sorted(d))
    except TypeError:
        raise TypeError(
            f"the keys of a dict in a pytree must be sortable (they are flattened in sorted "
            f"order), got {list(d)}"
        ) from None


def _node_of(x: Any) -> tuple[str | type, Hashable, list[Any]] | None:
    """The kind, aux data and children of a node, or None for a leaf."""
    t = type(x)
    if t in _leaf_types:
        return None
    if t is tuple or t is list:
        return t, None, list(x)
    if t is dict:
        keys = _sorted_keys(x)
        return dict, keys, [x[k] for k in keys]
    if x is None:
        return _NONE_KIND, None, []
    reg = _registry.get(t)
    if reg is not None:
        children, aux = reg.flatten(x)
        return t, aux, list(children)
    if t is OrderedDict:
        keys = tuple(x)
        return OrderedDict, keys, [x[k] for k in keys]
    if t is defaultdict:
        keys = _sorted_keys(x)
        return defaultdict, (x.default_factory, keys), [x[k] for k in keys]
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return t, None, list(x)
    if not isinstance(x, tuple):
        _leaf_types.add(t)
    return None


def _describe_value(x: Any) -> str:
    node = _node_of(x)
    if node is None:
        return f"a leaf of type {type_name(x)}"
    return PyTreeDef(node[0], node[1], tuple(_LEAF for _ in node[2]))._describe_node()


# Structures met before, by their key (see tree_flatten): a call of a jitted function
# flattens its arguments each time, and building the PyTreeDef nodes costs more than
# reading the leaves.
_TREEDEFS: dict[tuple[Any, ...], PyTreeDef] = {}
_TREEDEFS_MAX = 4096


def tree_flatten(tree: Any, is_leaf: IsLeaf | None = None) -> tuple[list[Any], PyTreeDef]:
    """The leaves of ``tree`` (left to right) and its structure.

    ``is_leaf(x)`` true makes ``x`` a leaf even if it is a node.
    """
    if is_leaf is not None:
        return _flatten_building(tree, is_leaf)
    # One pass collects the leaves and a key of the structure: per node in pre-order, 0
    # for a leaf, 1 for None, a list's or tuple's type and length, else the kind, aux
    # data and arity (so a key spells one structure); the structure itself is built
    # only for a key not met before.
    leaves: list[Any] = []
    key: list[Any] = []
    stack = [tree]
    leaf_types = _leaf_types
    while stack:
        x = stack.pop()
        t = type(x)
        if t in leaf_types:
            leaves.append(x)
            key.append(0)
        elif t is list or t is tuple:
            key.append(t)
            key.append(len(x))
            stack.extend(reversed(x))
        elif x is None:
            key.append(1)
        else:
            node = _node_of(x)
            if node is None:
                leaves.append(x)
                key.append(0)
                continue
            kind, aux, children = node
            key.append(kind)
            key.append(aux)
            key.append(len(children))
            children.reverse()
            stack.extend(children)
    k = tuple(key)
    treedef = _TREEDEFS.get(k)
    if treedef is None:
        treedef = _flatten_building(tree, None)[1]
        if len(_TREEDEFS) >= _TREEDEFS_MAX:
            _TREEDEFS.clear()
        _TREEDEFS[k] = treedef
    return leaves, treedef


def _flatten_building(tree: Any, is_leaf: IsLeaf | None) -> tuple[list[Any], PyTreeDef]:
    """:func:`tree_flatten`, building the structure's nodes as it goes."""
    leaves: list[Any] = []
    # Post-order with an explicit stack of (kind, aux, children left to visit (reversed),
    # structures of the children visited).
    stack: list[tuple[str | type, Hashable, list[Any], list[PyTreeDef]]] = []
    x = tree
    leaf_types = _leaf_types
    while True:
        done: PyTreeDef | None
        if type(x) in leaf_types and is_leaf is None:
            node = None
        else:
            node = None if is_leaf is not None and is_leaf(x) else _node_of(x)
        if node is None:
            leaves.append(x)
            done = _LEAF
        else:
            kind, aux, children = node
            children.reverse()
            stack.append((kind, aux, children, []))
            done = None
        # Close every node whose children are all visited; find the next child.
        while stack:
            kind, aux, pending, built = stack[-1]
            if done is not None:
                built.append(done)
                done = None
            if pending:
                x = pending.pop()
                break
            stack.pop()
            done = PyTreeDef(kind, aux, tuple(built))
        else:
            assert done is not None
            return leaves, done


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuilds a tree of this structure from its leaves."""
    leaves_list = list(leaves)
    if len(leaves_list) != treedef.num_leaves:
        raise ValueError(
            f"tree structure {treedef} has {treedef.num_leaves} leaves, got {len(leaves_list)}"
        )
    plan = treedef._plan
    if plan is None:
        plan = treedef._plan = _unflatten_plan(treedef)
    values: list[Any] = []
    pos = 0
    for step in plan:
        if step is None:
            values.append(leaves_list[pos])
            pos += 1
        else:
            d, arity = step
            if arity:
                children = values[-arity:]
                del values[-arity:]
            else:
                children = []
            values.append(_build(d, children))
    return values[0]


def _unflatten_plan(treedef: PyTreeDef) -> list[tuple[PyTreeDef, int] | None]:
    """The nodes of ``treedef`` in post-order (a leaf as None), without recursion."""
    plan: list[tuple[PyTreeDef, int] | None] = []
    # (structure, whether its children are already pending)
    stack: list[tuple[PyTreeDef, bool]] = [(treedef, False)]
    while stack:
        d, expanded = stack.pop()
        if d._kind == _LEAF_KIND:
            plan.append(None)
        elif expanded:
            plan.append((d, len(d._children)))
        else:
            stack.append((d, True))
            stack.extend((c, False) for c in reversed(d._children))
    return plan


def _build(d: PyTreeDef, children: list[Any]) -> Any:
    kind = d._kind
    if kind is tuple:
        return tuple(children)
    if kind is list:
        return children
    if kind is dict or kind is OrderedDict:
        return kind(zip(d._keys(), children))
    if kind == _NONE_KIND:
        return None
    if kind is defaultdict:
        assert isinstance(d._aux, tuple)
        return defaultdict(d._aux[0], zip(d._keys(), children))
    assert isinstance(kind, type)
    reg = _registry.get(kind)
    if reg is not None:
        return reg.unflatten(d._aux, children)
    return kind(*children)  # a namedtuple


def tree_leaves(tree: Any, is_leaf: IsLeaf | None = None) -> list[Any]:
    """The leaves of ``tree``, left to right."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: IsLeaf | None = None) -> PyTreeDef:
    """The structure of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf | None = None) -> Any:
    """``f`` applied to the leaves of ``tree`` (and the matching parts of ``rest``), in a
    tree of ``tree``'s structure.

    Each tree of ``rest`` has ``tree``'s structure, or has it as a prefix: then ``f``
    receives its subtrees at ``tree``'s leaves. A mismatch is a ``ValueError``.
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return tree_unflatten(treedef, [f(x, *xs) for x, *xs in zip(leaves, *others)])
