"""Pytrees: nested tuples, lists, dicts, namedtuples, None and registered classes.

A pytree flattens to a list of leaves and a :class:`PyTreeDef` that rebuilds it. As in
JAX: dicts flatten in sorted key order (``OrderedDict`` in insertion order), ``None`` is a
node without children (no leaves), namedtuples are nodes of their class, and any other
object is a leaf unless its class is registered with :func:`register_pytree_node`.
Every function here is iterative, so deeply nested trees cannot overflow the stack.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from ferrax._array import type_name

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "Partial",
    "PyTreeDef",
    "SequenceKey",
    "all_leaves",
    "flatten_one_level",
    "flatten_one_level_with_keys",
    "is_tree_node",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "tree_all",
    "tree_broadcast",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_reduce_associative",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_tuple",
]

T = TypeVar("T")
C = TypeVar("C", bound=type)

FlattenFn = Callable[[Any], tuple[Iterable[Any], Hashable]]
UnflattenFn = Callable[[Hashable, Iterable[Any]], Any]
IsLeaf = Callable[[Any], bool]
FlattenWithKeysFn = Callable[[Any], tuple[Iterable[tuple[Any, Any]], Hashable]]


class _NodeKind(NamedTuple):
    flatten: FlattenFn
    unflatten: UnflattenFn
    # ``x -> ([(key, child), ...], aux)``; None: the children's keys are their positions
    # (FlattenedIndexKey).
    flatten_with_keys: FlattenWithKeysFn | None = None


_registry: dict[type, _NodeKind] = {}
_BUILT_IN = (tuple, list, dict, OrderedDict, defaultdict, type(None))
# Types seen to be leaves (a cache for flattening; registering a type clears it).
_leaf_types: set[type] = set()
# Whether one of the leaf types make_jaxpr's builder reads itself (Python scalars, NumPy
# arrays: see JaxprBuilder.stage_args) has been registered as a node; it then leaves
# every argument tree to tree_flatten.
_leaf_types_registered = False


def register_pytree_node(
    nodetype: type[T],
    flatten_func: FlattenFn,
    unflatten_func: UnflattenFn,
    flatten_with_keys_func: FlattenWithKeysFn | None = None,
) -> None:
    """Makes instances of ``nodetype`` (exactly; not its subclasses) pytree nodes.

    ``flatten_func(x)`` returns ``(children, aux_data)`` where ``aux_data`` is hashable
    and comparable; ``unflatten_func(aux_data, children)`` rebuilds the node. The
    optional ``flatten_with_keys_func(x)`` returns ``([(key, child), ...], aux_data)``:
    the keys of the children in key paths (:func:`tree_flatten_with_path`; by default
    ``FlattenedIndexKey(i)``).
    """
    if nodetype in _registry or nodetype in _BUILT_IN:
        raise ValueError(
            f"Duplicate custom PyTreeDef type registration for {nodetype}: "
            f"{nodetype.__name__} is already a pytree node type"
        )
    global _leaf_types_registered
    _registry[nodetype] = _NodeKind(flatten_func, unflatten_func, flatten_with_keys_func)
    _leaf_types.clear()
    if nodetype in (bool, int, float) or (nodetype.__module__, nodetype.__qualname__) == ("numpy", "ndarray"):
        _leaf_types_registered = True


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

    __slots__ = ("_kind", "_aux", "_children", "_num_leaves", "_num_nodes", "_hash", "_plan")

    _kind: str | type
    _aux: Hashable
    _children: tuple[PyTreeDef, ...]
    _num_leaves: int
    _num_nodes: int
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
        self._num_nodes = 1 + sum(c._num_nodes for c in children)
        # The children's hashes are cached, so this is not recursive.
        self._hash = hash((kind, aux, tuple(c._hash for c in children)))

    @property
    def num_leaves(self) -> int:
        """How many leaves the tree has."""
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """How many nodes the tree has, leaves and ``None`` included."""
        return self._num_nodes

    @property
    def children(self) -> tuple[PyTreeDef, ...]:
        """The structures of the node's children."""
        return self._children

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """This structure with ``inner`` in place of each of its leaves."""
        plan = self._plan
        if plan is None:
            plan = self._plan = _unflatten_plan(self)
        built: list[PyTreeDef] = []
        for step in plan:
            if step is None:
                built.append(inner)
            else:
                d, arity = step
                children = tuple(built[len(built) - arity :])
                del built[len(built) - arity :]
                built.append(PyTreeDef(d._kind, d._aux, children))
        return built[0]

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
            if node is None or node[0] != d._kind or node[1] != d._aux or len(node[2]) != len(d._children):
                self._raise_mismatch(tree)
            pending.extend(reversed(list(zip(d._children, node[2]))))
        return out

    def _raise_mismatch(self, tree: Any) -> typing.NoReturn:
        """The ``ValueError`` of :meth:`flatten_up_to`, naming the key path of the first
        node (left to right) where ``tree`` departs from this structure."""
        # Walked again with keys (errors only): each visited node records its parent's
        # index and its key, so a path is rebuilt without copying prefixes.
        trail: list[tuple[int, Any]] = []
        pending: list[tuple[PyTreeDef, Any, int, Any]] = [(self, tree, -1, None)]
        while pending:
            d, x, parent, key = pending.pop()
            trail.append((parent, key))
            here = len(trail) - 1
            if d._kind == _LEAF_KIND:
                continue
            node = _keyed_node_of(x)
            if node is None or node[0] != d._kind or node[1] != d._aux or len(node[2]) != len(d._children):
                path: list[Any] = []
                i = here
                while trail[i][0] >= 0:
                    path.append(trail[i][1])
                    i = trail[i][0]
                where = f" at key path {keystr(tuple(reversed(path)))}" if path else ""
                raise ValueError(
                    f"tree structure mismatch{where}: expected {d._describe_node()}, got "
                    f"{_describe_value(x)} (in {self})"
                )
            pending.extend(reversed([(c, child, here, k) for c, child, k in zip(d._children, node[2], node[3])]))
        raise AssertionError("flatten_up_to found a mismatch the second walk does not")

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
_KEY_MAX = 4096


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
    if len(key) > _KEY_MAX:  # a large tree: not worth keeping
        return leaves, _flatten_building(tree, None)[1]
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


# ------------------------------------------------------------------ key paths


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """The key of a child of a list or tuple: its index (``[0]`` in :func:`keystr`)."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    """The key of a child of a dict (``['a']`` in :func:`keystr`)."""

    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """The key of a child held in an attribute: a namedtuple's field, a registered
    dataclass's data field (``.name`` in :func:`keystr`)."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """The key of a child of a registered class that gives no keys: its position among
    the children its ``flatten`` returns."""

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


KeyEntry = Any
"""One step of a key path: a :class:`SequenceKey`, :class:`DictKey`, :class:`GetAttrKey`,
:class:`FlattenedIndexKey` or a key a registered class gives."""
KeyPath = tuple[Any, ...]
"""The keys from the root of a tree down to one of its subtrees."""


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """The key path as text: ``['a'][0].x`` (each key's ``str``), or with ``simple``
    the bare keys (``a``, ``0``, ``x``), joined by ``separator``."""
    return separator.join(_simple_key_text(k) if simple else str(k) for k in keys)


def _simple_key_text(key: Any) -> str:
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, (DictKey, FlattenedIndexKey)):
        return str(key.key)
    if isinstance(key, GetAttrKey):
        return str(key.name)
    return str(key)


def _keyed_node_of(x: Any) -> tuple[str | type, Hashable, list[Any], list[Any]] | None:
    """The kind, aux data, children and the children's keys of a node, or None for a
    leaf."""
    reg = _registry.get(type(x))
    if reg is not None and reg.flatten_with_keys is not None:
        pairs, aux = reg.flatten_with_keys(x)
        pairs = list(pairs)
        return type(x), aux, [c for _, c in pairs], [k for k, _ in pairs]
    node = _node_of(x)
    if node is None:
        return None
    kind, aux, children = node
    keys: list[Any]
    if kind is tuple or kind is list:
        keys = [SequenceKey(i) for i in range(len(children))]
    elif kind is dict or kind is OrderedDict:
        assert isinstance(aux, tuple)
        keys = [DictKey(k) for k in aux]
    elif kind is defaultdict:
        assert isinstance(aux, tuple)
        keys = [DictKey(k) for k in aux[1]]
    elif kind == _NONE_KIND:
        keys = []
    elif reg is None:  # a namedtuple
        keys = [GetAttrKey(f) for f in getattr(kind, "_fields")]
    else:
        keys = [FlattenedIndexKey(i) for i in range(len(children))]
    return kind, aux, children, keys


def tree_flatten_with_path(
    tree: Any, is_leaf: Callable[..., bool] | None = None, is_leaf_takes_path: bool = False
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """The leaves of ``tree`` with their key paths (``[(path, leaf), ...]``, left to
    right) and its structure.

    ``is_leaf(x)`` (``is_leaf(path, x)`` with ``is_leaf_takes_path``) true makes ``x`` a
    leaf even if it is a node.
    """
    out: list[tuple[KeyPath, Any]] = []
    # Post-order with an explicit stack of (kind, aux, children left to visit and their
    # keys (both reversed), structures of the children visited); ``path`` holds the keys
    # from the root to the node being visited.
    stack: list[tuple[str | type, Hashable, list[Any], list[Any], list[PyTreeDef]]] = []
    path: list[Any] = []
    x = tree
    while True:
        done: PyTreeDef | None
        if is_leaf is not None and (is_leaf(tuple(path), x) if is_leaf_takes_path else is_leaf(x)):
            node = None
        else:
            node = _keyed_node_of(x)
        if node is None:
            out.append((tuple(path), x))
            done = _LEAF
        else:
            kind, aux, children, keys = node
            children.reverse()
            keys.reverse()
            stack.append((kind, aux, children, keys, []))
            done = None
        while stack:
            kind, aux, pending, pending_keys, built = stack[-1]
            if done is not None:
                built.append(done)
                path.pop()
                done = None
            if pending:
                x = pending.pop()
                path.append(pending_keys.pop())
                break
            stack.pop()
            done = PyTreeDef(kind, aux, tuple(built))
        else:
            assert done is not None
            return out, done


def tree_leaves_with_path(
    tree: Any, is_leaf: Callable[..., bool] | None = None, is_leaf_takes_path: bool = False
) -> list[tuple[KeyPath, Any]]:
    """The leaves of ``tree`` with their key paths, left to right
    (:func:`tree_flatten_with_path`)."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> Any:
    """:func:`tree_map` where ``f`` also receives each leaf's key path first:
    ``f(path, leaf, *leaves_of_rest)``."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [treedef.flatten_up_to(r) for r in rest]
    return tree_unflatten(treedef, [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Hashable]:
    """The children of the node ``tree`` and its aux data (``ValueError`` for a leaf)."""
    node = _node_of(tree)
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    kind, aux, children = node
    if kind is type(tree) and _registry.get(kind) is None and kind not in _BUILT_IN:
        aux = typing.cast(Hashable, kind)  # a namedtuple: its class, as JAX reports
    return children, aux


def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Hashable]:
    """The ``(key, child)`` pairs of the node ``tree`` and its aux data (``ValueError``
    for a leaf)."""
    node = _keyed_node_of(tree)
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    kind, aux, children, keys = node
    if kind is type(tree) and _registry.get(kind) is None and kind not in _BUILT_IN:
        aux = typing.cast(Hashable, kind)
    return list(zip(keys, children)), aux


# ------------------------------------------------------------------ registration


def register_pytree_with_keys(
    nodetype: type[T],
    flatten_with_keys: FlattenWithKeysFn,
    unflatten_func: UnflattenFn,
    flatten_func: FlattenFn | None = None,
) -> None:
    """Makes instances of ``nodetype`` pytree nodes whose children have keys:
    ``flatten_with_keys(x)`` returns ``([(key, child), ...], aux_data)``. Flattening
    without keys uses ``flatten_func`` if given, else ``flatten_with_keys``."""
    if flatten_func is None:

        def flatten_func(x: Any) -> tuple[list[Any], Hashable]:
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux

    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_with_keys_class(cls: C) -> C:
    """Class decorator: registers ``cls`` with its ``tree_flatten_with_keys`` method,
    its ``tree_unflatten(aux_data, children)`` classmethod and its ``tree_flatten``
    method if it has one."""
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(
        cls, lambda x: x.tree_flatten_with_keys(), getattr(cls, "tree_unflatten"), flatten
    )
    return cls


def register_dataclass(
    nodetype: C,
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
    drop_fields: Sequence[str] = (),
) -> C:
    """Makes instances of ``nodetype`` pytree nodes whose children are the attributes
    named in ``data_fields`` (keys :class:`GetAttrKey`) and whose aux data are those
    named in ``meta_fields`` (static: hashable). For a dataclass both may be omitted:
    fields are data unless their metadata says ``static=True`` (``ferrax.tree.static``).
    Rebuilt by ``nodetype(**fields)``. Returns ``nodetype``, so it works as a decorator.
    """
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError(
                "register_dataclass: data_fields and meta_fields must both be specified when "
                f"either is specified. Got data_fields={data_fields!r} meta_fields={meta_fields!r}."
            )
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                "register_dataclass: data_fields and meta_fields are required when nodetype "
                f"is not a dataclass. Got nodetype={nodetype!r}."
            )
        fields = dataclasses.fields(nodetype)
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data = tuple(data_fields)
    meta = tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        named = {*data, *meta}
        if named != init_fields:
            msg = "data_fields and meta_fields must include all dataclass fields with ``init=True`` and only them."
            if missing := init_fields - named:
                msg += f" Missing fields: {missing}. Add them to drop_fields to suppress this error."
            if unexpected := named - init_fields:
                msg += f" Unexpected fields: {unexpected}."
            raise ValueError(msg)
    if overlap := set(data) & set(meta):
        raise ValueError(f"data_fields and meta_fields must not overlap. Overlapping fields: {overlap}.")

    def flatten(x: Any) -> tuple[tuple[Any, ...], Hashable]:
        return tuple(getattr(x, n) for n in data), tuple(getattr(x, n) for n in meta)

    def flatten_with_keys(x: Any) -> tuple[list[tuple[Any, Any]], Hashable]:
        return [(GetAttrKey(n), getattr(x, n)) for n in data], tuple(getattr(x, n) for n in meta)

    def unflatten(aux: Hashable, children: Iterable[Any]) -> Any:
        assert isinstance(aux, tuple)
        return nodetype(**dict(zip(meta, aux)), **dict(zip(data, children)))

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


def register_static(cls: C) -> C:
    """Registers ``cls`` as a pytree node without children: its instances are their own
    (hashable) aux data, so ``jit`` treats them as static. Returns ``cls``."""
    register_pytree_with_keys(cls, lambda x: ((), x), lambda aux, _: aux)
    return cls


def is_tree_node(typ: type) -> bool:
    """Whether instances of ``typ`` are pytree nodes (built-in containers, ``None``'s
    type, namedtuples and registered classes)."""
    return (
        typ in _BUILT_IN
        or typ in _registry
        or (isinstance(typ, type) and issubclass(typ, tuple) and hasattr(typ, "_fields"))
    )


# ------------------------------------------------------------------ structures


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The structures of the root's children."""
    return list(treedef.children)


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether the structure is a single node (a leaf, or ``None`` or an empty
    container)."""
    return treedef.num_nodes == 1


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The structure of a tuple of trees of these structures."""
    return PyTreeDef(tuple, None, tuple(treedefs))


def all_leaves(iterable: Iterable[Any], is_leaf: IsLeaf | None = None) -> bool:
    """Whether every element of ``iterable`` is a leaf (``None`` is not one)."""
    items = list(iterable)
    if is_leaf is None:
        return all(_node_of(x) is None for x in items)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))


# ------------------------------------------------------------------ reductions


class _Unspecified:
    """No initializer given (``None`` is a valid one)."""


_UNSPECIFIED: Any = _Unspecified()


def tree_reduce(
    function: Callable[[T, Any], T],
    tree: Any,
    initializer: Any = _UNSPECIFIED,
    is_leaf: IsLeaf | None = None,
) -> T:
    """``functools.reduce`` over the leaves of ``tree`` (left to right)."""
    leaves: list[T] = tree_leaves(tree, is_leaf)
    if initializer is _UNSPECIFIED:
        return functools.reduce(function, leaves)
    start: T = initializer
    return functools.reduce(function, leaves, start)


def tree_reduce_associative(
    operation: Callable[[T, T], T],
    tree: Any,
    *,
    identity: Any = _UNSPECIFIED,
    is_leaf: IsLeaf | None = None,
) -> T:
    """Reduces the leaves with an associative ``operation`` as a balanced tree (halves
    combined as JAX combines them); ``identity`` is the result for no leaves."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _UNSPECIFIED:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity  # type: ignore[no-any-return]
    out: T = _balanced_reduce(leaves, 0, len(leaves), operation)
    return out


def _balanced_reduce(xs: list[Any], lo: int, hi: int, op: Callable[[Any, Any], Any]) -> Any:
    # Recursion depth is log2 of the number of leaves.
    if hi - lo == 1:
        return xs[lo]
    mid = lo + (hi - lo) // 2
    return op(_balanced_reduce(xs, lo, mid, op), _balanced_reduce(xs, mid, hi, op))


def tree_all(tree: Any, *, is_leaf: IsLeaf | None = None) -> bool:
    """Whether every leaf of ``tree`` is true."""
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any) -> Any:
    """A tree of structure ``outer`` of trees of structure ``inner`` turned into a tree of
    structure ``inner`` of trees of structure ``outer`` (``inner`` None: read from the
    first outer leaf). A tree of another structure is a ``TypeError``."""
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    inner_size, outer_size = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != inner_size * outer_size:
        raise TypeError(f"Mismatch\n{treedef}\n != \n{outer_treedef.compose(inner_treedef)}")
    rows = [flat[i * inner_size : (i + 1) * inner_size] for i in range(outer_size)]
    columns = [tree_unflatten(outer_treedef, [row[j] for row in rows]) for j in range(inner_size)]
    return tree_unflatten(inner_treedef, columns)


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf | None = None) -> Any:
    """``full_tree``'s structure with each leaf of ``prefix_tree`` (a prefix of it)
    repeated over the leaves of the subtree it stands for."""
    prefix_leaves, prefix_treedef = tree_flatten(prefix_tree, is_leaf)
    subtrees = prefix_treedef.flatten_up_to(full_tree)
    out: list[Any] = []
    for leaf, subtree in zip(prefix_leaves, subtrees):
        out.extend([leaf] * tree_structure(subtree).num_leaves)
    return tree_unflatten(tree_structure(full_tree), out)


# ------------------------------------------------------------------ Partial


class _WrappedPartial:
    """A ``functools.partial`` held as the function of a :class:`Partial` (which would
    otherwise merge its arguments into its own and change the tree's leaves)."""

    def __init__(self, fun: functools.partial[Any]) -> None:
        self.fun = fun
        self.func = fun.func
        self.args = fun.args
        self.keywords = fun.keywords

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return self.fun(*args, **kw)

    def __hash__(self) -> int:
        return hash(self.fun)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _WrappedPartial):
            return bool(self.fun == other.fun)
        return bool(self.fun == other)

    def __repr__(self) -> str:
        return repr(self.fun)


class Partial(functools.partial[Any]):
    """``functools.partial`` as a pytree: the bound arguments are its children (traced
    by ``jit``), the function its aux data, so a partially applied function can be an
    argument of a transformed function."""

    def __new__(cls, func: Callable[..., Any], /, *args: Any, **kw: Any) -> Partial:
        if isinstance(func, functools.partial):
            func = _WrappedPartial(func)
        return super().__new__(cls, func, *args, **kw)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),  # type: ignore[index, arg-type]
)
