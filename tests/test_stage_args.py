"""``make_jaxpr``'s arguments staged in one call (``JaxprBuilder.stage_args``) give what
the general way gives: the pytree flattened by ``tree_flatten``, each leaf typed by
``aval_of``, the tracers put back by ``tree_unflatten``.

Each case is staged both ways and compared: the jaxpr text, and what the traced function
received (its tree structure, dict key order and each tracer's type). Trees the fast
path leaves to Python (namedtuples, other dict classes, non-str keys, NumPy scalars,
ferrax arrays, byte-swapped dtypes, non-arrays) must reach the general way with nothing
declared.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import _ir, tree_util
from ferrax._staging import JaxprTracer, _arg_aval, trace_to_jaxpr
from ferrax.tree_util import tree_flatten, tree_leaves

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]


class Point(NamedTuple):
    x: Any
    y: Any


def _describe(tree: Any) -> Any:
    """What a traced function sees of its arguments: containers (dicts with their keys in
    order), None, and each tracer's type."""
    if isinstance(tree, JaxprTracer):
        return ("tracer", tree.aval.str_short(), tree.aval.weak_type)
    if isinstance(tree, dict):
        return (type(tree).__name__, [(k, _describe(v)) for k, v in tree.items()])
    if isinstance(tree, (tuple, list)):
        return (type(tree).__name__, [_describe(v) for v in tree])
    return ("other", repr(tree))


def _body(seen: list[Any]) -> Callable[..., Any]:
    def f(*args: Any) -> Any:
        seen.append(_describe(args))
        leaves = [x for x in tree_leaves(args) if isinstance(x, JaxprTracer)]
        return [fnp.sum(x) for x in leaves] if leaves else 0.0

    return f


def _outcome(stage: Callable[[Callable[..., Any]], Any]) -> tuple[str, list[Any]]:
    seen: list[Any] = []
    try:
        text = str(stage(_body(seen)))
    except Exception as e:  # noqa: BLE001 - compared between the two ways
        message = re.sub(r",? at \S+:\d+.*", "", str(e).splitlines()[0])
        text = f"{type(e).__name__}: {message}"
    return text, seen


def _general(f: Callable[..., Any], args: tuple[Any, ...]) -> _ir.ClosedJaxpr:
    """The general way: flatten, type each leaf, stage the flat types."""
    flat, in_tree = tree_flatten(args)
    return trace_to_jaxpr(f, [_arg_aval(x, i) for i, x in enumerate(flat)], in_tree)[0]


def _both(*args: Any) -> tuple[tuple[str, list[Any]], tuple[str, list[Any]]]:
    fast = _outcome(lambda f: ferrax.make_jaxpr(f)(*args))
    slow = _outcome(lambda f: _general(f, args))
    return fast, slow


def _takes_fast_path(args: tuple[Any, ...]) -> bool:
    """Whether stage_args stages ``args`` itself; when it does not, nothing is declared."""
    builder = _ir.JaxprBuilder()
    staged = builder.stage_args(args, JaxprTracer, None, ferrax.config.jax_enable_x64)
    if staged is None:
        assert len(builder.build([]).invars) == 0
        return False
    return True


def _array(dtype: str, shape: tuple[int, ...] = (2, 3)) -> np.ndarray[Any, Any]:
    return np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)


TREES: list[tuple[str, tuple[Any, ...]]] = [
    ("no arguments", ()),
    ("one array", (_array("float32"),)),
    ("mlp params", ([(_array("float32", (4, 4)), _array("float32", (4,))) for _ in range(3)],
                    _array("float32", (2, 4)))),
    ("dict sorted", ({"w": _array("float32"), "b": _array("int32", (3,)), "a": 1.5},)),
    ("nested dicts", ({"z": {"y": [1, 2.5, True]}, "a": (None, _array("uint8"))}, [None])),
    ("unicode keys", ({"é": 1.0, "e": 2.0, "z": 3.0, "Z": 4.0, "日本": 5.0, "": 6.0},)),
    ("python scalars", (1, 2.0, True, False, -7, 0.0)),
    ("scalar arrays", (np.array(3.0), np.array(2, np.int64), np.zeros((0, 4), np.float32))),
    ("empty containers", ((), [], {}, None, ((), [{}]))),
    ("shared leaf", ((lambda a: (a, [a, {"k": a}]))(_array("float32")),)),
    ("deep nesting", (((((((_array("float32"),),),),),),),)),
]


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("name,args", TREES, ids=[t[0] for t in TREES])
def test_trees_stage_as_the_general_way(name: str, args: tuple[Any, ...], x64: bool) -> None:
    with ferrax.enable_x64(x64):
        assert _takes_fast_path(args), name
        fast, slow = _both(*args)
    assert fast == slow, name
    assert fast[1], "the traced function ran"


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_dtypes_stage_as_the_general_way(dtype: str, x64: bool) -> None:
    args = (_array(dtype), {"s": _array(dtype, ())}, [_array(dtype, (1, 0, 2))])
    with ferrax.enable_x64(x64):
        assert _takes_fast_path(args)
        fast, slow = _both(*args)
    assert fast == slow, dtype


def test_bfloat16_stages_as_the_general_way() -> None:
    args = (np.ones((2, 2), ferrax.dtypes.bfloat16),)
    assert _takes_fast_path(args)
    assert _both(*args)[0] == _both(*args)[1]


LEFT_TO_PYTHON: list[tuple[str, tuple[Any, ...]]] = [
    ("namedtuple", (Point(_array("float32"), 1.0),)),
    ("OrderedDict", (collections.OrderedDict([("b", 1.0), ("a", _array("int32"))]),)),
    ("defaultdict", (collections.defaultdict(int, {"b": 1.0, "a": 2.0}),)),
    ("int keys", ({2: 1.0, 1: _array("float32")},)),
    ("mixed keys", ({"a": 1.0, 1: 2.0},)),
    ("numpy scalar", (np.float32(2.0), np.int64(3))),
    ("ferrax array", (fnp.ones(3), [fnp.zeros((2,), np.int32)])),
    ("byte-swapped dtype", (np.ones(3, dtype=">f4"),)),
    ("subclass of ndarray", (np.ma.masked_array(np.ones(3, np.float32)),)),
    ("bool subclass of int in a tuple subclass", (Point(True, 1),)),
    ("a string leaf", ("not an array",)),
    ("an object leaf", ([1.0, object()],)),
    ("complex", (np.ones(2, np.complex64),)),
    ("a string array", (np.array(["a", "b"]),)),
]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name,args", LEFT_TO_PYTHON, ids=[t[0] for t in LEFT_TO_PYTHON])
def test_other_trees_take_the_general_way(name: str, args: tuple[Any, ...]) -> None:
    assert not _takes_fast_path(args), name
    fast, slow = _both(*args)
    assert fast == slow, name


def test_a_tree_holding_itself_is_left_to_python() -> None:
    loop: list[Any] = [1.0]
    loop.append(loop)
    assert not _takes_fast_path((loop,))
    # Wide: each node read puts 10^5 more in wait.
    wide: list[Any] = []
    wide.extend([wide] * 100_000)
    assert not _takes_fast_path((wide,))


def test_many_leaves() -> None:
    # Keys sorted as strs ("10" before "2"), as tree_flatten sorts them.
    args = ([float(i) for i in range(300)], {str(i): i for i in range(300)})
    assert _takes_fast_path(args)
    fast, slow = _both(*args)
    assert fast == slow


def test_a_tree_too_large_to_read_takes_the_general_way() -> None:
    args = ([[0.5] * 1000 for _ in range(70)],)
    assert not _takes_fast_path(args)
    fast, slow = _both(*args)
    assert fast == slow


class Pair:
    """A registered pytree node whose flatten computes with ferrax.numpy."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


tree_util.register_pytree_node(Pair, lambda p: ((fnp.asarray(p.a) * 2, p.b), None), lambda _, c: Pair(*c))


def test_a_registered_node_is_flattened_outside_the_trace() -> None:
    # Its flatten runs before tracing (no equation of it is recorded), as JAX runs it.
    def f(p: Pair) -> Any:
        return p.a + p.b

    x = np.ones(3, np.float32)
    ours = ferrax.make_jaxpr(f)(Pair(x, x))
    assert [e.primitive for e in ours.jaxpr.eqns] == ["add"]
    assert not _takes_fast_path((Pair(x, x),))


def test_registering_a_leaf_type_as_a_node_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    # If Python floats are nodes (an odd registration, but an allowed one), tree_flatten
    # decides what they are: make_jaxpr no longer reads them itself.
    monkeypatch.setattr(tree_util, "_registry", dict(tree_util._registry))
    monkeypatch.setattr(tree_util, "_leaf_types", set())
    monkeypatch.setattr(tree_util, "_leaf_types_registered", False)
    tree_util.register_pytree_node(float, lambda x: ((), x), lambda aux, _: aux)
    assert tree_util._leaf_types_registered
    closed = ferrax.make_jaxpr(lambda a, b: a)(np.ones(2, np.float32), 2.5)
    assert len(closed.jaxpr.invars) == 1  # the float is a node without leaves


def test_the_trace_state_is_restored_after_an_error() -> None:
    def inner(x: Any) -> Any:
        raise ValueError("inside")

    def outer(x: Any, w: Any) -> Any:
        with pytest.raises(ValueError, match="inside"):
            ferrax.make_jaxpr(inner)(np.ones(3, np.float32))
        # The outer trace is the innermost again: its fast paths record.
        return fnp.sum(x @ w + x[0])

    x, w = np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)
    closed = ferrax.make_jaxpr(outer)(x, w)
    prims = [e.primitive for e in closed.jaxpr.eqns]
    assert prims[0] == "dot_general" and prims[-1] == "reduce_sum", prims
    from ferrax._core import trace_state

    state = trace_state()
    assert len(state.stack) == 1 and not state.dynamic


def test_a_whole_sum_of_keys_is_refused_at_the_user_line() -> None:
    # Not a number: sum's fast path leaves it to the general way, which refuses it.
    key = ferrax.random.key(0)
    with pytest.raises(TypeError, match="key<fry>") as info:
        ferrax.make_jaxpr(lambda k: fnp.sum(k))(key)
    assert "test_stage_args.py" in str(info.value)


def test_dict_arguments_match_jax_invar_order() -> None:
    tree = {"w": _array("float32", (3, 2)), "b": _array("int32", (2,)), "a": {"y": 1.0, "x": np.ones(4, np.float32)}}

    def f(d: Any) -> Any:
        return [d[k] for k in sorted(d) if k != "a"] + [d["a"]["x"], d["a"]["y"]]

    ours = ferrax.make_jaxpr(f)(tree).jaxpr.invars
    theirs = jax.make_jaxpr(f)(tree).jaxpr.invars
    assert [(v.aval.str_short(), v.aval.weak_type) for v in ours] == [
        (v.aval.str_short(short_dtypes=True), v.aval.weak_type) for v in theirs
    ]


def test_make_jaxpr_is_named_as_jax_names_it() -> None:
    def model(x: Any) -> Any:
        """The model's doc."""
        return x

    ours, theirs = ferrax.make_jaxpr(model), jax.make_jaxpr(model)
    assert ours.__name__ == theirs.__name__ == "make_jaxpr(model)"
    assert ours.__qualname__ == theirs.__qualname__
    assert ours.__doc__ == theirs.__doc__ == "The model's doc."
    assert ours.__wrapped__ is model  # type: ignore[attr-defined]
