"""jit's hit path (``ferrax._ir.Dispatcher``, in Rust): a call whose signature ran before
gives what the Python path gives and what JAX gives, and every call it does not take
(new signatures, committed arrays, static arguments, staging, other x64 modes, other
leaves) goes to the Python path unchanged."""

from __future__ import annotations

import functools
import gc
import threading
import weakref
from collections import namedtuple
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import tree_util

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def put(tree: Any) -> Any:
    return tree_util.tree_map(ferrax.device_put, tree)


def jput(tree: Any) -> Any:
    return jax.tree_util.tree_map(jnp.asarray, tree)


def assert_same_tree(got: Any, want: Any) -> None:
    """Same structure (as JAX flattens it), leaves equal in value, dtype and weak type."""
    got_leaves, got_tree = tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert str(got_tree).replace("PyTreeDef", "") == str(want_tree).replace("PyTreeDef", "")
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert isinstance(g, ferrax.Array)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.weak_type == w.weak_type
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def hit_and_slow(jf: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """The first call's result (the Python path, which registers the signature) and a
    second call's (the hit path), checking that the second was a hit."""
    before = jf._hit_path_size()
    slow = jf(*args, **kwargs)
    assert jf._hit_path_size() == before + 1, "the Python path did not register the call"
    hit = jf._hit_until(6, *args, **kwargs)  # a miss raises
    again = jf(*args, **kwargs)
    for h in (hit, again):
        h_leaves, h_tree = tree_util.tree_flatten(h)
        s_leaves, s_tree = tree_util.tree_flatten(slow)
        assert h_tree == s_tree
        for a, b in zip(h_leaves, s_leaves):
            assert type(a) is type(b) and a.aval == b.aval and a.committed == b.committed
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return slow, again


def test_one_array_as_python_path_and_jax() -> None:
    x = np.array([1.0, 2.0, 3.0], np.float32)
    jf = ferrax.jit(lambda x: x + 1.0)
    slow, hit = hit_and_slow(jf, put(x))
    want = jax.jit(lambda x: x + 1.0)(jput(x))
    assert_same_tree(slow, want)
    assert_same_tree(hit, want)
    assert type(hit) is type(slow)
    assert not hit.committed


def test_ten_arguments_in_nests() -> None:
    rng = np.random.default_rng(0)
    leaves = [rng.standard_normal(3).astype(np.float32) for _ in range(10)]
    # Dicts out of sorted order, None nodes, tuples and lists inside each other.
    tree = {
        "z": (leaves[0], [leaves[1], None, leaves[2]]),
        "a": {"q": leaves[3], "b": leaves[4]},
        "m": [(leaves[5],), {"y": leaves[6], "x": [leaves[7], leaves[8]]}],
        "c": leaves[9],
        "n": None,
    }

    def f(t: Any, scale: Any) -> Any:
        z0, (z1, _, z2) = t["z"]
        return {"out": [z0 * scale - z1, z2 + t["a"]["q"]], "b": t["a"]["b"] * t["c"],
                "m": (t["m"][0][0], t["m"][1]["y"] - t["m"][1]["x"][0] + t["m"][1]["x"][1])}

    s = np.float32(2.0)
    slow, hit = hit_and_slow(ferrax.jit(f), put(tree), put(s))
    want = jax.jit(f)(jput(tree), jput(s))
    assert_same_tree(slow, want)
    assert_same_tree(hit, want)


def test_dict_keys_in_another_order_keep_their_leaves() -> None:
    jf = ferrax.jit(lambda d: d["a"] - 10 * d["b"] + 100 * d["c"])
    one, two, three = (put(np.full(2, v, np.float32)) for v in (1, 2, 3))
    for d in ({"c": three, "a": one, "b": two}, {"a": one, "b": two, "c": three}, {"b": two, "c": three, "a": one}):
        for _ in range(2):
            np.testing.assert_array_equal(np.asarray(jf(d)), np.full(2, 1 - 20 + 300, np.float32))
    # Other arrays in a registered key order: the leaves follow their keys.
    np.testing.assert_array_equal(np.asarray(jf({"c": one, "a": three, "b": two})), np.full(2, 3 - 20 + 100, np.float32))
    assert jf._cache_size() == 1


def test_one_array_in_two_places_then_two_arrays() -> None:
    jf = ferrax.jit(lambda a, b: a - 2 * b)
    x, y = put(np.ones(3, np.float32)), put(np.full(3, 5.0, np.float32))
    hit_and_slow(jf, x, x)
    np.testing.assert_array_equal(np.asarray(jf(x, y)), np.full(3, -9.0, np.float32))
    np.testing.assert_array_equal(np.asarray(jf(y, x)), np.full(3, 3.0, np.float32))
    d = ferrax.jit(lambda t: t["b"] - t["a"])
    hit_and_slow(d, {"b": x, "a": x})
    np.testing.assert_array_equal(np.asarray(d({"b": x, "a": y})), np.full(3, -4.0, np.float32))


def test_weak_types_are_part_of_the_signature() -> None:
    weak: Any = ferrax.jit(lambda: 2.0)()
    strong = put(np.float32(2.0))
    assert weak.weak_type and not strong.weak_type
    half = put(np.ones(3, np.float16))
    jf = ferrax.jit(lambda s, h: s * h)
    jjf = jax.jit(lambda s, h: s * h)
    jweak = jax.jit(lambda: 2.0)()
    for s, js in ((weak, jweak), (strong, jnp.float32(2.0)), (weak, jweak)):
        for _ in range(2):
            assert_same_tree(jf(s, half), jjf(js, jnp.ones(3, np.float16)))
    assert jf._cache_size() == 2 and jf._hit_path_size() == 2


def test_x64_switches_between_calls_of_one_function() -> None:
    x = put(np.arange(3, dtype=np.int32))
    jf = ferrax.jit(lambda x: x.astype(float) + 0.5)
    for x64, dtype in ((False, np.float32), (True, np.float64), (False, np.float32), (True, np.float64)):
        with ferrax.enable_x64(x64):
            for _ in range(2):
                out = jf(x)
                assert out.dtype == dtype
                np.testing.assert_array_equal(np.asarray(out), np.arange(3) + 0.5)
    assert jf._hit_path_size() == 2


def test_committed_arrays_take_the_python_path() -> None:
    jf = ferrax.jit(lambda x: x * 2)
    c = ferrax.device_put(np.ones(3, np.float32), ferrax.devices()[0])
    assert c.committed
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(jf(c)), np.full(3, 2.0, np.float32))
    assert jf._hit_path_size() == 0
    with pytest.raises(RuntimeError, match="not a hit"):
        jf._hit_until(6, c)
    u = put(np.ones(3, np.float32))
    hit_and_slow(jf, u)
    np.testing.assert_array_equal(np.asarray(jf(c)), np.full(3, 2.0, np.float32))  # still the Python path
    assert jf._cache_size() == 1


def test_new_shapes_and_dtypes_compile_then_hit() -> None:
    traces: list[Any] = []

    def f(x: Any) -> Any:
        traces.append(x.aval)
        return x * 3

    jf = ferrax.jit(f)
    values = [np.ones(3, np.float32), np.ones(4, np.float32), np.ones(3, np.int32), np.ones((2, 2), np.float32)]
    for v in values + values:
        out = jf(put(v))
        assert out.dtype == v.dtype and out.shape == v.shape
        np.testing.assert_array_equal(np.asarray(out), v * 3)
    assert len(traces) == 4 and jf._hit_path_size() == 4
    for v in values:
        jf._hit_until(6, put(v))


def test_keyword_arguments() -> None:
    def f(x: Any, y: Any, *, z: Any) -> Any:
        return x - y * z

    x, y, z = (put(np.full(3, v, np.float32)) for v in (10, 2, 3))
    jf = ferrax.jit(f)
    slow, hit = hit_and_slow(jf, x, y=y, z=z)
    assert_same_tree(hit, jax.jit(f)(jput(np.full(3, 10, np.float32)), y=jnp.full(3, 2.0), z=jnp.full(3, 3.0)))
    np.testing.assert_array_equal(np.asarray(jf(x, z=z, y=y)), np.full(3, 4.0, np.float32))
    np.testing.assert_array_equal(np.asarray(jf(x, y, z=z)), np.full(3, 4.0, np.float32))
    np.testing.assert_array_equal(np.asarray(jf(x, y=z, z=y)), np.full(3, 4.0, np.float32))


def test_static_arguments_take_the_python_path() -> None:
    def f(x: Any, n: int, *, mode: str) -> Any:
        return x * n if mode == "mul" else x + n

    jf = ferrax.jit(f, static_argnums=1, static_argnames="mode")
    jjf = jax.jit(f, static_argnums=1, static_argnames="mode")
    x = np.arange(3, dtype=np.float32)
    for n, mode in ((2, "mul"), (2, "add"), (3, "mul"), (2, "mul")):
        for _ in range(2):
            assert_same_tree(jf(put(x), n, mode=mode), jjf(jput(x), n, mode=mode))
    assert jf._hit_path_size() == 0 and jf._cache_size() == 3


def test_a_result_pytree_with_constants_and_none() -> None:
    def f(x: Any, y: Any) -> Any:
        return {"sum": x + y, "parts": (x * y, [x - y, None, 3.0]), "none": None, "one": fnp.ones(2, np.int32)}

    x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    slow, hit = hit_and_slow(ferrax.jit(f), put(x), put(y))
    want = jax.jit(lambda x, y: {"sum": x + y, "parts": (x * y, [x - y, None, 3.0]), "none": None,
                                 "one": jnp.ones(2, np.int32)})(jput(x), jput(y))
    assert_same_tree(slow, want)
    assert_same_tree(hit, want)
    assert list(hit) == list(slow)


def test_functions_returning_constants_only() -> None:
    x = put(np.ones(3, np.float32))
    for f in (lambda x: 1.0, lambda x: None, lambda x: (), lambda x: (None, 2), lambda x: [x, 7.5, {"k": None}]):
        slow, hit = hit_and_slow(ferrax.jit(f), x)
        want = jax.jit(f)(jnp.ones(3, np.float32))
        assert_same_tree(slow, want)
        assert_same_tree(hit, want)


Pair = namedtuple("Pair", ["a", "b"])


def test_named_tuples_out_and_in() -> None:
    x = put(np.ones(3, np.float32))
    jf = ferrax.jit(lambda x: Pair(x + 1, x * 3))
    slow, hit = hit_and_slow(jf, x)
    assert type(hit) is Pair and type(slow) is Pair
    np.testing.assert_array_equal(np.asarray(hit.b), np.full(3, 3.0, np.float32))
    # A named tuple as an argument is a node the hit path leaves to Python.
    g = ferrax.jit(lambda p: p.a - p.b)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(g(Pair(x, x))), np.zeros(3, np.float32))
    assert g._hit_path_size() == 0


def test_other_leaves_take_the_python_path() -> None:
    jf = ferrax.jit(lambda x, y: x * y)
    x = put(np.arange(3, dtype=np.float32))
    hit_and_slow(jf, x, x)
    for y in (np.ones(3, np.float32), 2.0, x * 1, fnp.ones(3)):
        for _ in range(2):
            np.testing.assert_array_equal(np.asarray(jf(x, y)), np.asarray(x) * np.asarray(y))


def test_staging_traces_take_the_python_path() -> None:
    jf = ferrax.jit(lambda x: x + 1.0)
    x = put(np.ones(3, np.float32))
    before = str(ferrax.make_jaxpr(lambda: jf(x))())
    hit_and_slow(jf, x)
    assert str(ferrax.make_jaxpr(lambda: jf(x))()) == before
    assert "jit" in before
    outer = ferrax.jit(lambda y: jf(y) * 2)
    np.testing.assert_array_equal(np.asarray(outer(x)), np.full(3, 4.0, np.float32))
    np.testing.assert_array_equal(np.asarray(ferrax.grad(lambda y: jf(y).sum())(x)), np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(ferrax.vmap(jf)(put(np.ones((2, 3), np.float32)))), np.full((2, 3), 2.0))


def test_staging_is_seen_per_thread() -> None:
    # Each thread's trace state is its own: a thread tracing does not turn the hit path
    # off in another, and a thread that hit before it traces stages once it does.
    jf = ferrax.jit(lambda x: x + 1.0)
    x = put(np.ones(3, np.float32))
    before = str(ferrax.make_jaxpr(lambda: jf(x))())
    hit_and_slow(jf, x)
    results: dict[str, Any] = {}
    inside = threading.Event()
    leave = threading.Event()

    def tracer_thread() -> None:
        try:
            jf._hit_until(6, x)  # a hit (a miss raises): nothing staged in this thread yet

            def f() -> Any:
                inside.set()
                leave.wait(30)
                return jf(x)

            results["jaxpr"] = str(ferrax.make_jaxpr(f)())
        except BaseException as e:  # reported by the main thread
            results["error"] = e
            inside.set()

    t = threading.Thread(target=tracer_thread)
    t.start()
    assert inside.wait(30)
    try:
        # The other thread is inside make_jaxpr: this one still runs on the hit path.
        size = jf._hit_path_size()
        np.testing.assert_array_equal(np.asarray(jf(x)), np.full(3, 2.0, np.float32))
        assert jf._hit_path_size() == size
        np.testing.assert_array_equal(np.asarray(jf._hit_until(6, x)), np.full(3, 2.0, np.float32))
    finally:
        leave.set()
        t.join()
    assert "error" not in results, results.get("error")
    assert results["jaxpr"] == before


def test_errors_are_the_python_paths() -> None:
    jf = ferrax.jit(lambda x, y: x + y)
    x = put(np.ones(3, np.float32))
    hit_and_slow(jf, x, x)
    with pytest.raises(TypeError, match="argument leaf 1 of type str is not an array"):
        jf(x, "abc")
    with pytest.raises(TypeError):
        jf(x)  # type: ignore[call-arg]
    with pytest.raises(ferrax.FerraxError) as info:
        jf(x, put(np.ones(4, np.float32)))
    with pytest.raises(type(info.value)):
        jf(x, put(np.ones(4, np.float32)))
    with pytest.raises(RuntimeError, match="not a hit"):
        jf._hit_until(6, x, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="no step 7"):
        jf._hit_until(7, x, x)


def test_methods_and_threads() -> None:
    class Model:
        @ferrax.jit
        def apply(self: Any, x: Any) -> Any:
            return x * 2

    m = Model()
    # A plain object as `self` is a leaf the hit path does not take.
    with pytest.raises(TypeError, match="not an array"):
        m.apply(put(np.ones(2, np.float32)))

    jf = ferrax.jit(lambda x: x * 2 + 1)
    x = put(np.arange(4, dtype=np.float32))
    hit_and_slow(jf, x)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(200):
                np.testing.assert_array_equal(np.asarray(jf(x)), np.arange(4) * 2 + 1)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


class Scaled:
    """A registered pytree class whose unflatten checks its leaves (as user classes may)."""

    def __init__(self, value: Any, scale: float) -> None:
        assert not isinstance(value, int), "an array leaf was expected"
        self.value = value
        self.scale = scale


def _unflatten_scaled(scale: Any, children: Any) -> Scaled:
    (value,) = children
    return Scaled(value, scale)


tree_util.register_pytree_node(Scaled, lambda s: ((s.value,), s.scale), _unflatten_scaled)


def test_registered_classes_out_and_in() -> None:
    jf = ferrax.jit(lambda x: (Scaled(x * 2, 0.5), x))
    x = put(np.arange(3, dtype=np.float32))
    slow, hit = hit_and_slow(jf, x)
    assert type(hit[0]) is Scaled and hit[0].scale == 0.5
    np.testing.assert_array_equal(np.asarray(hit[0].value), np.arange(3) * 2)
    g = ferrax.jit(lambda s: s.value * s.scale)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(g(Scaled(x, 3.0))), np.arange(3) * 3)
    assert g._hit_path_size() == 0


def test_the_collector_sees_what_signatures_hold() -> None:
    # Cycles through a signature (its Python unflattening holds the traced entry) are
    # collectable only if the garbage collector is shown what the hit path holds.
    jf = ferrax.jit(lambda x: Pair(x, x * 2))
    x = put(np.ones(2, np.float32))
    hit_and_slow(jf, x)
    (entry,) = jf._cache.values()
    assert entry.executable is not None
    held = gc.get_referents(jf)
    assert any(h is entry.executable._handlers for h in held)
    assert any(h is x.aval for h in held)
    assert any(isinstance(h, functools.partial) and h.args == (entry,) for h in held)
    ref = weakref.ref(jf)
    del jf
    gc.collect()
    assert ref() is None
