"""`ferrax.tree` and the key-path half of `ferrax.tree_util` against `jax.tree` and
`jax.tree_util` (JAX 0.10.2), over a table of trees built alike for both: leaves, key
paths (their reprs and `keystr` texts), structures, the reductions, transpose,
broadcast, registration helpers (`register_dataclass`, `register_pytree_with_keys`,
`register_static`, `Partial`) and the errors JAX raises."""

from __future__ import annotations

import collections
import dataclasses
import functools
import pickle
from collections.abc import Callable, Hashable, Iterable
from typing import Any, NamedTuple

import jax
import jax.tree_util as jtu
import numpy as np
import pytest

import ferrax
import ferrax.tree as ftree
import ferrax.tree_util as ftu

LIBS = [(ftree, ftu), (jax.tree, jtu)]


class Point(NamedTuple):
    x: Any
    y: Any


class Box:
    """Registered without keys (paths use FlattenedIndexKey)."""

    def __init__(self, a: Any, b: Any, name: str = "box") -> None:
        self.a, self.b, self.name = a, b, name


class Keyed:
    """Registered with keys of its own (GetAttrKey and a DictKey)."""

    def __init__(self, u: Any, v: Any) -> None:
        self.u, self.v = u, v


@dataclasses.dataclass
class Params:
    w: Any
    b: Any
    act: str = dataclasses.field(default="relu", metadata={"static": True})


@dataclasses.dataclass
class Explicit:
    x: Any
    op: str
    z: Any


@dataclasses.dataclass(frozen=True)
class Token:
    name: str


def _box_flatten(b: Box) -> tuple[tuple[Any, Any], Hashable]:
    return (b.a, b.b), b.name


def _box_unflatten(name: Hashable, children: Iterable[Any]) -> Box:
    a, b = children
    assert isinstance(name, str)
    return Box(a, b, name)


def _keyed_flatten(k: Keyed, lib: Any) -> tuple[list[tuple[Any, Any]], Hashable]:
    return [(lib.GetAttrKey("u"), k.u), (lib.DictKey("vee"), k.v)], None


def _keyed_unflatten(aux: Hashable, children: Iterable[Any]) -> Keyed:
    return Keyed(*children)


for _tu in (ftu, jtu):
    _tu.register_pytree_node(Box, _box_flatten, _box_unflatten)
    _tu.register_pytree_with_keys(Keyed, functools.partial(_keyed_flatten, lib=_tu), _keyed_unflatten)
    _tu.register_dataclass(Params)
    _tu.register_dataclass(Explicit, data_fields=["x", "z"], meta_fields=["op"])
    _tu.register_static(Token)


def _trees(tu: Any) -> list[Any]:
    """The table, built for one library (``Partial`` is each library's own class)."""
    deep: Any = 0
    for i in range(300):
        deep = [deep, {"k": i}] if i % 2 else Point(deep, None)
    return [
        1,
        None,
        (),
        [],
        {},
        (1,),
        [1, 2.0, "three"],
        {"b": 1, "a": 2, "c": (3, 4)},
        {1: "x", 0: "y"},
        Point(1, [2, 3]),
        Point(None, Point(1, (2,))),
        Box((1, 2), {"k": 3}),
        Keyed([1, 2], {"q": 3}),
        Params(np.ones(2), 3.0),
        Explicit(1, "add", [2, None]),
        [Token("t"), 1],
        tu.Partial(max, 1, key=2),
        tu.Partial(functools.partial(min, 4), 5),
        [None, (None, 1), {"x": None}],
        collections.OrderedDict([("z", 1), ("a", 2)]),
        collections.defaultdict(list, {"b": [1], "a": [2, 3]}),
        {"nested": [{"deep": (Point(1, None), Box(2, [3]))}]},
        deep,
    ]


N_TREES = len(_trees(ftu))


def _plain(x: Any) -> Any:
    """A leaf as comparable data."""
    return x.tolist() if isinstance(x, np.ndarray) else x


@pytest.mark.parametrize("i", range(N_TREES))
def test_leaves_paths_and_keystr_as_jax(i: int) -> None:
    ours, theirs = _trees(ftu)[i], _trees(jtu)[i]
    got, want = ftu.tree_leaves_with_path(ours), jtu.tree_leaves_with_path(theirs)
    assert [_plain(x) for _, x in got] == [_plain(x) for _, x in want]
    assert [repr(p) for p, _ in got] == [repr(p) for p, _ in want]
    for (p, _), (q, _) in zip(got, want):
        assert ftu.keystr(p) == jtu.keystr(q)
        assert ftu.keystr(p, simple=True, separator="/") == jtu.keystr(q, simple=True, separator="/")
    leaves, treedef = ftree.flatten_with_path(ours)
    assert leaves == got
    jtreedef: Any = jax.tree.structure(theirs)
    assert (treedef.num_leaves, treedef.num_nodes) == (jtreedef.num_leaves, jtreedef.num_nodes)
    assert treedef == ftree.structure(ours)
    assert ftu.treedef_is_leaf(treedef) == jtu.treedef_is_leaf(jtreedef)
    assert len(ftu.treedef_children(treedef)) == len(jtu.treedef_children(jtreedef))
    assert [_plain(x) for x in ftree.leaves(ours)] == [_plain(x) for x in jax.tree.leaves(theirs)]


@pytest.mark.parametrize("i", range(N_TREES))
def test_map_with_path_rebuilds_as_jax(i: int) -> None:
    ours, theirs = _trees(ftu)[i], _trees(jtu)[i]

    def tag(tu: Any) -> Callable[..., Any]:
        return lambda p, x: (tu.keystr(p), _plain(x))

    got = ftree.map_with_path(tag(ftu), ours)
    want = jax.tree.map_with_path(tag(jtu), theirs)
    is_pair = lambda x: isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str)  # noqa: E731
    assert ftree.leaves(got, is_leaf=is_pair) == jax.tree.leaves(want, is_leaf=is_pair)
    assert ftree.structure(got, is_leaf=is_pair) == ftree.structure(ours)
    # The rebuilt tree has the original's classes and aux data.
    if ftree.structure(ours) != ftree.structure(0):
        assert type(got) is type(ours)


def test_key_classes() -> None:
    for name, arg in [("SequenceKey", 0), ("DictKey", "a"), ("DictKey", 1), ("GetAttrKey", "x"), ("FlattenedIndexKey", 3)]:
        ours, theirs = getattr(ftu, name)(arg), getattr(jtu, name)(arg)
        assert (repr(ours), str(ours)) == (repr(theirs), str(theirs))
        assert ours == getattr(ftu, name)(arg) and hash(ours) == hash(getattr(ftu, name)(arg))
        assert pickle.loads(pickle.dumps(ours)) == ours
        assert type(ours).__match_args__ == type(theirs).__match_args__
    assert ftu.SequenceKey(0) != ftu.FlattenedIndexKey(0)  # type: ignore[comparison-overlap]
    match ftu.DictKey("k"):
        case ftu.DictKey(key=k):
            assert k == "k"
    assert ftu.keystr(()) == jtu.keystr(()) == ""
    assert ftu.keystr((1, "a")) == jtu.keystr((1, "a"))  # non-key entries: their str


def test_is_leaf_with_and_without_path() -> None:
    tree = {"a": [1, (2, 3)], "b": Point(4, 5)}
    for tree_mod, tu in LIBS:
        got = tree_mod.leaves_with_path(tree, is_leaf=lambda x: isinstance(x, tuple))
        assert [(tu.keystr(p), x) for p, x in got] == [("['a'][0]", 1), ("['a'][1]", (2, 3)), ("['b']", Point(4, 5))]
        got = tree_mod.leaves_with_path(tree, is_leaf=lambda p, x: len(p) == 2, is_leaf_takes_path=True)
        assert [(tu.keystr(p), x) for p, x in got] == [
            ("['a'][0]", 1), ("['a'][1]", (2, 3)), ("['b'].x", 4), ("['b'].y", 5)
        ]
        # is_leaf sees the root and None too.
        assert tree_mod.leaves_with_path(None, is_leaf=lambda x: x is None) == [((), None)]
        out = tree_mod.map_with_path(lambda p, x, y: len(p) + x + y, [1, (2,)], [10, (20,)])
        assert out == [12, (24,)]


def test_flatten_with_path_of_a_leaf_and_of_none() -> None:
    for tree_mod, _ in LIBS:
        leaves, treedef = tree_mod.flatten_with_path(5)
        assert leaves == [((), 5)] and treedef.num_leaves == 1
        leaves, treedef = tree_mod.flatten_with_path(None)
        assert leaves == [] and treedef.num_leaves == 0 and treedef.num_nodes == 1


def test_deep_paths_without_recursion() -> None:
    depth = 20_000
    tree: Any = 1
    for _ in range(depth):
        tree = [tree]
    ((path, leaf),) = ftu.tree_leaves_with_path(tree)
    assert leaf == 1 and len(path) == depth and path[0] == ftu.SequenceKey(0)
    assert ftu.tree_map_with_path(lambda p, x: len(p), tree) is not None
    assert ftu.keystr(path[:3]) == "[0][0][0]"


# ------------------------------------------------------------------ reductions & co


def test_reduce_all_and_associative() -> None:
    tree = [1, (2, {"a": 3}), Point(4, 5)]
    for tree_mod, tu in LIBS:
        assert tree_mod.reduce(lambda a, b: a * 10 + b, tree) == 12345
        assert tree_mod.reduce(lambda a, b: a + [b], tree, []) == [1, 2, 3, 4, 5]
        assert tree_mod.reduce(lambda a, b: a + b, None, 7) == 7
        assert tree_mod.reduce_associative(lambda a, b: (a, b), tree) == ((1, 2), (3, (4, 5)))
        assert tree_mod.reduce_associative(lambda a, b: (a, b), [1, 2, 3]) == (1, (2, 3))
        assert tree_mod.reduce_associative(lambda a, b: a + b, [], identity=0) == 0
        assert tree_mod.all([True, (1, {"a": 2.0})]) and not tree_mod.all([True, (0,)]) and tree_mod.all(None)
        assert tu.tree_all([1, [1]], is_leaf=lambda x: isinstance(x, list) and len(x) == 1)
        with pytest.raises(TypeError, match="reduce\\(\\) of empty"):
            tree_mod.reduce(lambda a, b: a, [None])
        with pytest.raises(TypeError, match="Must specify identity for parallel reduction of empty sequence"):
            tree_mod.reduce_associative(lambda a, b: a, {})


def test_transpose_and_broadcast_as_jax() -> None:
    cases = [
        (["*", "*"], ("*", "*", "*"), [(1, 2, 3), (4, 5, 6)]),
        (["*", "*"], None, [(1, {"a": 2}), (3, {"a": 4})]),
        ({"p": "*", "q": "*"}, Point("*", "*"), {"p": Point(1, 2), "q": Point(3, 4)}),
    ]
    for outer, inner, tree in cases:
        results = []
        for tree_mod, _ in LIBS:
            results.append(
                tree_mod.transpose(
                    tree_mod.structure(outer), None if inner is None else tree_mod.structure(inner), tree
                )
            )
        assert results[0] == results[1]
    for tree_mod, _ in LIBS:
        with pytest.raises(TypeError, match="Mismatch"):
            tree_mod.transpose(tree_mod.structure([0, 0]), tree_mod.structure((0, 0)), [(1, 2), (3,)])
    for prefix, full in [([1, 2], [(3, 4), {"a": 5}]), (0, {"a": [1, 2]}), ({"a": 1, "b": None}, {"a": (1, 2), "b": None})]:
        assert ftree.broadcast(prefix, full) == jax.tree.broadcast(prefix, full)
    for tree_mod, _ in LIBS:
        with pytest.raises(ValueError):
            tree_mod.broadcast([1, 2], [(3, 4)])


def test_structure_helpers_as_jax() -> None:
    x, y = [1, (2, 3)], {"a": 4, "b": None}
    for tree_mod, tu in LIBS:
        t = tu.treedef_tuple([tree_mod.structure(x), tree_mod.structure(y)])
        assert t == tree_mod.structure((x, y)) and t.num_leaves == 4
        assert tu.treedef_children(tree_mod.structure(x)) == [tree_mod.structure(1), tree_mod.structure((2, 3))]
        assert tu.treedef_is_leaf(tree_mod.structure(1)) and tu.treedef_is_leaf(tree_mod.structure(None))
        assert not tu.treedef_is_leaf(tree_mod.structure([1]))
        assert tree_mod.structure([1, 2]).compose(tree_mod.structure((1, 1))) == tree_mod.structure([(1, 1), (1, 1)])
    all_items: list[list[Any]] = [[1, None], [1, 2], [1, [2]], [], [Token("t")], [np.ones(2)]]
    for items in all_items:
        assert ftu.all_leaves(items) == jtu.all_leaves(items), items
    assert ftu.all_leaves([[1], 2], is_leaf=lambda v: isinstance(v, list)) == jtu.all_leaves(
        [[1], 2], is_leaf=lambda v: isinstance(v, list)
    )
    types: list[type] = [int, type(None), Point, Box, Params, collections.OrderedDict, dict, list, np.ndarray, Token]
    for typ in types:
        assert ftu.is_tree_node(typ) == jtu.is_tree_node(typ), typ


def test_flatten_one_level_as_jax() -> None:
    for tree in [[1, 2], (1,), {"b": 1, "a": 2}, None, collections.OrderedDict(b=1, a=2), Explicit(1, "op", 2)]:
        children, aux = ftu.flatten_one_level(tree)
        jchildren, jaux = jtu.flatten_one_level(tree)
        assert (list(children), aux) == (list(jchildren), jaux)
        pairs, aux = ftu.flatten_one_level_with_keys(tree)
        jpairs, jaux = jtu.flatten_one_level_with_keys(tree)
        assert ([(repr(k), c) for k, c in pairs], aux) == ([(repr(k), c) for k, c in jpairs], jaux)
    children, aux = ftu.flatten_one_level(Point(1, 2))
    assert (list(children), aux) == ([1, 2], Point)
    for tu in (ftu, jtu):
        with pytest.raises(ValueError, match="can't tree-flatten type: <class 'int'>"):
            tu.flatten_one_level(3)


# ------------------------------------------------------------------ registration


def test_register_dataclass_forms_and_static_fields() -> None:
    for tree_mod, tu in LIBS:
        p = Params(1.0, 2.0, act="tanh")
        assert tree_mod.leaves(p) == [1.0, 2.0]
        q = tree_mod.map(lambda v: v * 2, p)
        assert q == Params(2.0, 4.0, act="tanh")
        assert tree_mod.structure(p) != tree_mod.structure(Params(1.0, 2.0))  # act is aux data

        @tu.register_dataclass
        @dataclasses.dataclass
        class WithStatic:
            x: Any
            n: int = tree_mod.static(default=3)

        assert tree_mod.leaves(WithStatic(5)) == [5]
        assert tree_mod.map(lambda v: v + 1, WithStatic(5, 4)) == WithStatic(6, 4)
        paths = [tu.keystr(k) for k, _ in tree_mod.leaves_with_path(WithStatic(5))]
        assert paths == [".x"]


def test_register_dataclass_errors_as_jax() -> None:
    class NotData:
        pass

    @dataclasses.dataclass
    class D:
        a: Any
        b: Any

    cases: list[tuple[Callable[[Any], Any], type[Exception], str]] = [
        (lambda tu: tu.register_dataclass(D, data_fields=["a"]), TypeError, "must both be specified"),
        (lambda tu: tu.register_dataclass(NotData), TypeError, "required when nodetype is not a dataclass"),
        (lambda tu: tu.register_dataclass(D, data_fields=["a"], meta_fields=[]), ValueError, "Missing fields: {'b'}"),
        (lambda tu: tu.register_dataclass(D, data_fields=["a", "b", "c"], meta_fields=[]), ValueError, "Unexpected fields: {'c'}"),
        (lambda tu: tu.register_dataclass(NotData, data_fields=["a"], meta_fields=["a"]), ValueError, "must not overlap"),
    ]
    for make, error, message in cases:
        for tu in (ftu, jtu):
            with pytest.raises(error, match=message):
                make(tu)
    for tu in (ftu, jtu):
        with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
            tu.register_pytree_node(Box, _box_flatten, _box_unflatten)


def test_register_pytree_with_keys_class_and_register_static() -> None:
    for tree_mod, tu in LIBS:

        @tu.register_pytree_with_keys_class
        class Special:
            def __init__(self, x: Any, y: Any) -> None:
                self.x, self.y = x, y

            def tree_flatten_with_keys(self) -> tuple[tuple[tuple[Any, Any], ...], None]:
                return ((tu.GetAttrKey("x"), self.x), (tu.GetAttrKey("y"), self.y)), None

            @classmethod
            def tree_unflatten(cls, aux: None, children: Iterable[Any]) -> Any:
                return cls(*children)

        paths = [tu.keystr(p) for p, _ in tree_mod.leaves_with_path([Special(1, (2,))])]
        assert paths == ["[0].x", "[0].y[0]"]
        s = tree_mod.map(lambda v: v + 1, Special(1, 2))
        assert (s.x, s.y) == (2, 3)
        assert tree_mod.leaves([Token("a"), 1]) == [1]
        assert tree_mod.structure(Token("a")) != tree_mod.structure(Token("b"))


def test_partial_is_a_pytree_and_traced_by_jit() -> None:
    add = ftu.Partial(lambda a, b, *, c: a + b * c, 1.0, c=3.0)
    assert add(2.0) == 7.0
    assert ftree.leaves(add) == [1.0, 3.0]
    call = ferrax.jit(lambda f, x: f(x))
    assert float(call(add, 2.0)) == 7.0
    inner = functools.partial(min, 4)
    p = ftu.Partial(inner, 5)
    assert ftree.leaves(p) == [5] and p(3) == 3 and p.func == inner
    q = ftree.map(lambda v: v, p)
    assert isinstance(q, ftu.Partial) and q(1) == 1


def test_module_exports() -> None:
    want_tree = sorted(n for n in dir(jax.tree) if not n.startswith("_"))
    assert sorted(ftree.__all__) == want_tree
    jax_names = {n for n in dir(jtu) if not n.startswith("_")}
    assert jax_names - set(ftu.__all__) <= {"default_registry"}
    for name in ftree.__all__:
        assert getattr(ftree, name).__doc__, name
    for name in ftu.__all__:
        assert getattr(ftu, name).__doc__, name
    assert ferrax.tree is ftree


# ------------------------------------------------------------------ eval_shape & co

import jax.numpy as jnp  # noqa: E402

import ferrax.numpy as fnp  # noqa: E402

JAX_STRUCT: Any = jax.ShapeDtypeStruct  # untyped in jax


def _struct_text(tree: Any, lib: Any) -> list[tuple[Any, ...]]:
    """The (path, shape, dtype name, weak type) of each struct of an eval_shape result."""
    def is_struct(x: Any) -> bool:
        return isinstance(x, (ferrax.ShapeDtypeStruct, JAX_STRUCT))

    out = []
    for path, s in lib.tree_util.tree_leaves_with_path(tree, is_leaf=is_struct):
        assert is_struct(s), s
        out.append((lib.tree_util.keystr(path), tuple(s.shape), str(s.dtype), bool(s.weak_type), s.sharding))
    return out


EVAL_SHAPE_CASES: list[tuple[str, Callable[..., Any], Callable[[Any], tuple[Any, ...]]]] = [
    ("binary", lambda np_, x, y: (x + y, x.sum(), 1.0), lambda lib: (lib.ShapeDtypeStruct((2, 3), np.float32), 2)),
    ("weak in", lambda np_, x: x * 2, lambda lib: (lib.ShapeDtypeStruct((2,), np.int32, weak_type=True),)),
    ("64-bit in", lambda np_, x, y: (x, y), lambda lib: (lib.ShapeDtypeStruct((2,), np.float64), np.int64(3))),
    ("promotion", lambda np_, x, y: x * y, lambda lib: (lib.ShapeDtypeStruct((3,), np.int8), lib.ShapeDtypeStruct((3,), np.float16))),
    ("pytrees", lambda np_, t: {"s": t["a"] @ t["b"][0], "n": None, "m": np_.mean(t["b"][1])},
     lambda lib: ({"a": lib.ShapeDtypeStruct((2, 4), np.float32), "b": [np.ones((4, 5), np.float32), np.arange(3)]},)),
    ("consts out", lambda np_, x: (np.ones(2), 3, 2.5, True, np_.zeros((2, 2), np_.int8)), lambda lib: (1,)),
    ("python scalars", lambda np_, x, y: x / y, lambda lib: (3, 2)),
    ("bool", lambda np_, x: x > 0, lambda lib: (lib.ShapeDtypeStruct((4, 1), np.float32),)),
    ("keys", lambda np_, k: (k, k.reshape((1,))), lambda lib: (lib.random.key(0),)),
]


@pytest.mark.parametrize("case", EVAL_SHAPE_CASES, ids=lambda c: c[0])
def test_eval_shape_as_jax(case: tuple[str, Callable[..., Any], Callable[[Any], tuple[Any, ...]]]) -> None:
    _, fn, make_args = case
    got = ferrax.eval_shape(functools.partial(fn, fnp), *make_args(ferrax))
    want = jax.eval_shape(functools.partial(fn, jnp), *make_args(jax))
    assert _struct_text(got, ferrax) == _struct_text(want, jax)


def test_eval_shape_keyword_arguments_and_structs_in_structs_out() -> None:
    out = ferrax.eval_shape(lambda x, *, k: x * k, fnp.ones(3), k=2.0)
    assert out == ferrax.ShapeDtypeStruct((3,), np.float32)
    again = ferrax.eval_shape(lambda t: t, out)
    assert again == out
    # Nothing is compiled or computed: a function too big to run is fine.
    big = ferrax.eval_shape(lambda x: x @ x, ferrax.ShapeDtypeStruct((100_000, 100_000), np.float32))
    assert big.shape == (100_000, 100_000)
    # jax's structs are accepted too (any object with a shape and a dtype).
    assert ferrax.eval_shape(lambda x: x, JAX_STRUCT((2,), np.int8)).dtype == np.int8


def test_eval_shape_errors_as_jax() -> None:
    for lib, np_ in [(ferrax, fnp), (jax, jnp)]:
        with pytest.raises(TypeError):
            lib.eval_shape(lambda x: x, "a")
        with pytest.raises(TypeError):
            lib.eval_shape(lambda x: x + np_.ones(3), np_.ones(2))


def test_shape_dtype_struct_as_jax() -> None:
    libs: list[Any] = [ferrax, jax]
    for lib in libs:
        S: Any = lib.ShapeDtypeStruct
        s = S([2, 3], "float32")
        assert s.shape == (2, 3) and s.dtype == np.float32 and s.sharding is None and s.weak_type is False
        assert (s.ndim, s.size, len(s)) == (2, 6, 2)
        assert s == S((2, 3), np.float32) and hash(s) == hash(S((2, 3), np.float32))
        assert s != S((2, 3), np.float32, weak_type=True) and s != (2, 3)
        assert s.update(shape=(4,)) == S((4,), np.float32) and s.update(weak_type=True).weak_type
        assert S((2,), int).dtype == np.int64 and S((2,), float).dtype == np.float64
        with pytest.raises(RuntimeError, match="Cannot reassign attributes \\(shape\\) of immutable ShapeDtypeStruct"):
            s.shape = (3,)
        with pytest.raises(ValueError, match="dtype must be specified"):
            S((2,), None)
        with pytest.raises(TypeError):
            S((2,), "foo")
        with pytest.raises(TypeError):
            S(3, np.float32)
        with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
            len(S((), np.float32))
    struct_args: list[tuple[Any, Any, dict[str, Any]]] = [
        ((2, 3), np.float32, {}), ((), np.int8, {"weak_type": True}), ((0, 1), np.bool_, {})
    ]
    for shape, dtype, kw in struct_args:
        args = (shape, dtype)
        assert repr(ferrax.ShapeDtypeStruct(*args, **kw)) == repr(JAX_STRUCT(*args, **kw))
        assert str(ferrax.ShapeDtypeStruct(*args, **kw)) == str(JAX_STRUCT(*args, **kw))
    assert ferrax.ShapeDtypeStruct.like(fnp.ones((2,), fnp.int8)) == ferrax.ShapeDtypeStruct((2,), np.int8)
    assert ferrax.ShapeDtypeStruct.like(2.0) == ferrax.ShapeDtypeStruct((), np.float32, weak_type=True)
    assert ftree.leaves([ferrax.ShapeDtypeStruct((2,), np.float32)]) == [ferrax.ShapeDtypeStruct((2,), np.float32)]


def test_device_get_and_block_until_ready_as_jax() -> None:
    compiled = ferrax.jit(lambda: fnp.arange(3.0))()
    jcompiled = jax.jit(lambda: jnp.arange(3.0))()
    ours = {"a": fnp.ones(2), "b": 1, "c": np.float32(2), "d": None, "e": "text", "f": compiled}
    theirs = {"a": jnp.ones(2), "b": 1, "c": np.float32(2), "d": None, "e": "text", "f": jcompiled}
    got, want = ferrax.device_get(ours), jax.device_get(theirs)
    assert ftree.structure(got) == ftree.structure(want)
    for x, y in zip(ftree.leaves(got), jax.tree.leaves(want)):
        assert type(x) is type(y)
        if isinstance(y, np.ndarray):
            assert x.dtype == y.dtype and x.tolist() == y.tolist()
        else:
            assert x == y
    assert ferrax.block_until_ready(ours) is ours
    assert ferrax.block_until_ready(compiled) is compiled
    # Under a transformation a tracer is left as it is.
    assert float(ferrax.grad(lambda x: ferrax.device_get(x) * 2.0)(1.0)) == 2.0


def test_mismatch_errors_name_the_key_path() -> None:
    cases = [
        ([1, {"a": (1, 2)}], [1, {"a": (1,)}], "at key path \\[1\\]\\['a'\\]: expected a tuple of 2, got a tuple of 1"),
        ({"x": [0, None]}, {"x": [0, 1]}, "at key path \\['x'\\]\\[1\\]: expected None, got a leaf"),
        (Point(1, (2, 3)), Point(1, 2), "at key path .y: expected a tuple of 2"),
        ([1, 2], (1, 2), "mismatch: expected a list of 2, got a tuple of 2"),  # at the root: no path
    ]
    for first, second, message in cases:
        with pytest.raises(ValueError, match=message):
            ftree.map(lambda *xs: xs, first, second)
    deep: Any = 1
    other: Any = (1,)
    for _ in range(20_000):
        deep, other = [deep], [other]
    with pytest.raises(ValueError, match="at key path (\\[0\\]){20000}: expected a tuple of 1, got a leaf of type int"):
        ftree.map(lambda *xs: xs, other, deep)


def _parameters(f: Any) -> list[tuple[str, str]] | None:
    import inspect

    try:
        return [(p.name, p.kind.name) for p in inspect.signature(f).parameters.values()]
    except (TypeError, ValueError):
        return None


def test_signatures_as_jax() -> None:
    """Parameter names and kinds of every function shared with JAX (keyword callers
    written for JAX keep working); classes JAX implements in C++ have no signature."""
    pairs: list[tuple[Any, Any, list[str]]] = [
        (ftree, jax.tree, ftree.__all__),
        (ftu, jtu, [n for n in ftu.__all__ if n not in {"KeyEntry", "KeyPath", "PyTreeDef", "Partial"}]),
        (ferrax, jax, ["eval_shape", "device_get", "block_until_ready"]),
    ]
    for ours, theirs, names in pairs:
        for name in names:
            want = _parameters(getattr(theirs, name))
            if want is not None:
                assert _parameters(getattr(ours, name)) == want, name
    # JAX's extra keyword-only parameters (private logging; layouts and refs) aside.
    want_print = [p for p in _parameters(jax.debug.print) or [] if p[0] != "_use_logging"]
    assert _parameters(ferrax.debug.print) == want_print
    assert _parameters(ferrax.ShapeDtypeStruct) == (_parameters(JAX_STRUCT) or [])[:4]


def test_registered_dataclass_through_jit_with_static_fields() -> None:
    def apply(np_: Any, p: Params, x: Any) -> Any:
        y = x * p.w + p.b
        return np_.tanh(y) if p.act == "tanh" else np_.maximum(y, 0.0)

    f = ferrax.jit(functools.partial(apply, fnp))
    g = jax.jit(functools.partial(apply, jnp))
    x = np.array([-1.0, 2.0], np.float32)
    for act in ("relu", "tanh"):
        p = Params(np.float32(2.0), np.float32(0.5), act=act)
        np.testing.assert_allclose(np.asarray(f(p, x)), np.asarray(g(p, x)), rtol=1e-6)
    # The static field is part of the signature: one trace per value of act.
    assert f._cache_size() == 2
