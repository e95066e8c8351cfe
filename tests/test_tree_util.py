"""Pytrees (`ferrax.tree_util`): every node kind, registration, deep nesting, tree_map;
the structures and leaf orders are JAX's."""

from __future__ import annotations

import collections
import re
from collections.abc import Hashable, Iterable
from typing import Any, NamedTuple

import numpy as np
import pytest

from ferrax import tree_util
from ferrax.tree_util import (
    PyTreeDef,
    register_pytree_node,
    register_pytree_node_class,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
)


class Point(NamedTuple):
    x: Any
    y: Any


class Other(NamedTuple):
    x: Any
    y: Any


class Box:
    """A registered class: children ``value`` and ``extra``, aux ``name``."""

    def __init__(self, name: str, value: Any, extra: Any = None) -> None:
        self.name = name
        self.value = value
        self.extra = extra

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Box)
            and (self.name, self.value, self.extra) == (other.name, other.value, other.extra)
        )

    def __hash__(self) -> int:
        return hash(self.name)


def _flatten_box(b: Box) -> tuple[list[Any], Hashable]:
    return [b.value, b.extra], b.name


def _unflatten_box(name: Hashable, children: Iterable[Any]) -> Box:
    value, extra = children
    assert isinstance(name, str)
    return Box(name, value, extra)


register_pytree_node(Box, _flatten_box, _unflatten_box)


@register_pytree_node_class
class Pair:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b

    def tree_flatten(self) -> tuple[tuple[Any, Any], None]:
        return (self.a, self.b), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: Iterable[Any]) -> Pair:
        return cls(*children)


class NotRegistered:
    pass


TREES: list[Any] = [
    1,
    None,
    (),
    [],
    {},
    (1,),
    [1, 2.0, "three"],
    {"b": 1, "a": 2, "c": (3, 4)},
    Point(1, [2, 3]),
    Box("box", (1, 2), {"k": 3}),
    Pair([1], None),
    [None, (None, 1), {"x": None}],
    collections.OrderedDict([("z", 1), ("a", 2)]),
    collections.defaultdict(list, {"b": [1], "a": [2, 3]}),
    {"nested": [{"deep": (Point(1, None), Box("b", 2))}]},
    (np.ones(2), np.float32(3), NotRegistered()),
]


def _tree_id(tree: Any) -> str:
    """A case's id without object addresses (the same in every process: pytest-xdist's
    workers must collect the same ids)."""
    return re.sub(r" object at 0x[0-9a-f]+", "", repr(tree))


@pytest.mark.parametrize("tree", TREES, ids=_tree_id)
def test_roundtrip(tree: Any) -> None:
    leaves, treedef = tree_flatten(tree)
    rebuilt = tree_unflatten(treedef, leaves)
    assert type(rebuilt) is type(tree)
    assert tree_structure(rebuilt) == treedef
    again = tree_leaves(rebuilt)
    assert len(again) == len(leaves) and all(a is b for a, b in zip(again, leaves))
    assert treedef.num_leaves == len(leaves)
    assert hash(treedef) == hash(tree_structure(rebuilt))
    assert tree_structure(treedef.unflatten(leaves)) == treedef


def test_structures_met_before_are_the_ones_built() -> None:
    """tree_flatten reuses a structure met before (keyed by what it read): each must be
    the structure built node by node, also for trees alike but for one node."""
    from ferrax.tree_util import _flatten_building

    variants = TREES + [
        ((1, 2), 3), (1, (2, 3)), [1, [2]], [[1], 2], {"a": (1,)}, {"b": (1,)},
        {"a": [1]}, (None, 1), (1, None), Box("a", 1), Box("b", 1), Point(1, 2), (1, 2),
    ]
    for _ in range(2):  # the second pass finds every structure met
        for tree in variants:
            leaves, treedef = tree_flatten(tree)
            built_leaves, built = _flatten_building(tree, None)
            assert treedef == built and repr(treedef) == repr(built)
            assert all(a is b for a, b in zip(leaves, built_leaves)) and len(leaves) == len(built_leaves)
            assert type(tree_unflatten(treedef, leaves)) is type(tree)


def test_leaf_orders() -> None:
    assert tree_leaves({"b": 1, "a": 2, "c": (3, 4)}) == [2, 1, 3, 4]
    assert tree_leaves([None, (None, 1), {"x": None}]) == [1]
    assert tree_leaves(Point(1, [2, 3])) == [1, 2, 3]
    assert tree_leaves(Box("box", (1, 2), {"k": 3})) == [1, 2, 3]
    assert tree_leaves(Pair([1], None)) == [1]
    # OrderedDict in insertion order, defaultdict sorted (as JAX).
    assert tree_leaves(collections.OrderedDict([("z", 1), ("a", 2)])) == [1, 2]
    assert tree_leaves(collections.defaultdict(int, {"z": 1, "a": 2})) == [2, 1]
    # Anything else is a leaf: strings, arrays, unregistered objects, dict subclasses.
    leaf = NotRegistered()
    assert tree_leaves(["s", leaf]) == ["s", leaf]
    counter = collections.Counter("aab")
    assert tree_leaves([counter]) == [counter]


def test_dict_keys_sorted_and_rebuilt_sorted() -> None:
    d = {"b": 1, "a": 2}
    leaves, treedef = tree_flatten(d)
    assert list(tree_unflatten(treedef, leaves)) == ["a", "b"]
    assert tree_structure({"a": 0, "b": 0}) == tree_structure({"b": 0, "a": 0})
    with pytest.raises(TypeError, match="sortable"):
        tree_flatten({1: "x", "a": "y"})


def test_structures_distinguish_node_kinds() -> None:
    structures = [
        tree_structure(t)
        for t in [(1, 2), [1, 2], Point(1, 2), Other(1, 2), {"x": 1, "y": 2}, Box("a", 1, 2), Box("b", 1, 2), Pair(1, 2)]
    ]
    assert len(set(structures)) == len(structures)
    assert tree_structure((1, (2, 3))) != tree_structure((1, 2, 3))
    assert tree_structure(None) != tree_structure(())
    assert tree_structure((1, None)) != tree_structure((1,))
    assert tree_structure([np.ones(3), 2]) == tree_structure(["a", NotRegistered()])
    assert tree_structure(1) == tree_structure("leaf")


def test_repr() -> None:
    assert repr(tree_structure({"b": [1, (2,)], "a": None})) == "PyTreeDef({'a': None, 'b': [*, (*,)]})"
    assert repr(tree_structure(Point(1, 2))) == "PyTreeDef(Point(*, *))"
    assert repr(tree_structure(1)) == "PyTreeDef(*)"


def test_namedtuples_rebuild_their_class() -> None:
    p = tree_map(lambda v: v * 10, Point(1, 2))
    assert isinstance(p, Point) and p == Point(10, 20)


def test_registered_class_keeps_aux_data() -> None:
    b = tree_map(lambda v: v + 1, Box("name", 1, [2]))
    assert b == Box("name", 2, [3])


def test_is_leaf() -> None:
    tree = [(1, 2), (3, (4, 5))]
    leaves, treedef = tree_flatten(tree, is_leaf=lambda x: isinstance(x, tuple) and len(x) == 2 and x[0] == 3)
    assert leaves == [1, 2, (3, (4, 5))]
    assert tree_unflatten(treedef, leaves) == tree
    assert tree_map(lambda t: t, tree, is_leaf=lambda x: isinstance(x, tuple)) == tree


def test_registering_twice_or_builtins_fails() -> None:
    with pytest.raises(ValueError, match="already"):
        register_pytree_node(Box, _flatten_box, _unflatten_box)
    with pytest.raises(ValueError, match="already"):
        register_pytree_node(dict, lambda d: (d.values(), None), lambda a, c: dict(c))


def test_registering_after_use_as_a_leaf() -> None:
    class Late:
        def __init__(self, v: Any) -> None:
            self.v = v

    assert len(tree_leaves([Late(1)])) == 1 and isinstance(tree_leaves([Late(1)])[0], Late)
    register_pytree_node(Late, lambda x: ([x.v], None), lambda aux, c: Late(*c))
    assert tree_leaves([Late(1), Late((2, 3))]) == [1, 2, 3]


# ------------------------------------------------------------------------ tree_map


def test_tree_map_several_trees() -> None:
    a = {"x": [1, 2], "y": (3,)}
    b = {"x": [10, 20], "y": (30,)}
    c = {"x": [100, 200], "y": (300,)}
    assert tree_map(lambda p, q, r: p + q + r, a, b, c) == {"x": [111, 222], "y": (333,)}


def test_tree_map_with_a_prefix_tree() -> None:
    # The other trees may go deeper than the first: f gets their subtrees.
    out = tree_map(lambda x, sub: (x, sub), [1, 2], [(3, 4), {"k": 5}])
    assert out == [(1, (3, 4)), (2, {"k": 5})]


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        ([1, 2], [1, 2, 3], "expected a list of 2, got a list of 3"),
        ([1, 2], (1, 2), "expected a list of 2, got a tuple of 2"),
        ({"a": 1}, {"b": 1}, r"keys \['a'\], got a dict with keys \['b'\]"),
        (Point(1, 2), Other(1, 2), "expected a Point node, got a Other node"),
        (Box("a", 1), Box("b", 1), "expected a Box node"),
        ((1, (2, 3)), (1, 2), "expected a tuple of 2, got a leaf of type int"),
        (None, 1, "expected None, got a leaf"),
    ],
)
def test_tree_map_mismatched_structures(first: Any, second: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tree_map(lambda *xs: xs, first, second)


def test_unflatten_wrong_leaf_count() -> None:
    with pytest.raises(ValueError, match="has 2 leaves, got 3"):
        tree_unflatten(tree_structure((1, 2)), [1, 2, 3])


# ------------------------------------------------------------------- deep nesting

DEPTH = 100_000


def nested(depth: int, make: Any) -> Any:
    tree: Any = 0
    for i in range(depth):
        tree = make(tree, i)
    return tree


@pytest.mark.parametrize(
    "make",
    [
        lambda t, i: [t],
        lambda t, i: {"k": t, "a": i},
        lambda t, i: Point(t, None),
        lambda t, i: Box("b", t),
    ],
    ids=["list", "dict", "namedtuple", "registered"],
)
def test_deep_nesting_of_each_node_kind(make: Any) -> None:
    tree = nested(DEPTH, make)
    leaves, treedef = tree_flatten(tree)
    assert treedef.num_leaves == len(leaves)
    rebuilt = tree_unflatten(treedef, leaves)
    assert tree_structure(rebuilt) == treedef


def test_deep_nesting_without_recursion() -> None:
    tree = nested(DEPTH, lambda t, i: (i, t))
    leaves, treedef = tree_flatten(tree)
    assert leaves == list(range(DEPTH - 1, -1, -1)) + [0]
    rebuilt = tree_unflatten(treedef, leaves)
    assert tree_structure(rebuilt) == treedef and hash(tree_structure(rebuilt)) == hash(treedef)
    doubled = tree_map(lambda a, b: a + b, tree, rebuilt)
    assert tree_leaves(doubled) == [2 * x for x in leaves]
    assert repr(treedef).startswith("PyTreeDef((*, (*, (*, ")
    # One level less: unequal, found without recursion either.
    assert treedef != tree_structure(tree[1])


def test_deep_nesting_of_none_and_empty_nodes() -> None:
    tree = nested(DEPTH, lambda t, i: [t, None, ()])
    leaves, treedef = tree_flatten(tree)
    assert leaves == [0]
    assert tree_structure(tree_unflatten(treedef, [1])) == treedef


def test_module_exports() -> None:
    for name in tree_util.__all__:
        assert getattr(tree_util, name).__doc__, name
    assert isinstance(tree_structure(1), PyTreeDef)
