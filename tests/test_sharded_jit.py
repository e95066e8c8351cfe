"""``jit`` over several devices: ``in_shardings``/``out_shardings`` and arguments laid
out by ``device_put``, compiled by XLA's SPMD partitioner (Shardy) on the four CPU devices
of tests/conftest.py; values against the one-device run and JAX, layouts against JAX's,
bad layouts refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh as JMesh
from jax.sharding import NamedSharding as JNamed
from jax.sharding import PartitionSpec as _JP

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import lax
from ferrax.sharding import Mesh, NamedSharding, PartitionSpec

P = PartitionSpec


def _jax_wsc(x: Any, s: Any) -> Any:
    return jax.lax.with_sharding_constraint(x, s)  # type: ignore[no-untyped-call]


def JP(*entries: Any) -> Any:
    """JAX's PartitionSpec (its constructor is untyped)."""
    return _JP(*entries)  # type: ignore[no-untyped-call]


def _pair(shape: tuple[int, ...], names: tuple[str, ...]) -> tuple[Mesh, JMesh]:
    return (
        Mesh(np.array(fx.devices()).reshape(shape), names),
        JMesh(np.array(jax.devices()).reshape(shape), names),
    )


# (function on ferrax.numpy, the same on jax.numpy, argument shapes)
PROGRAMS: dict[str, tuple[Callable[..., Any], Callable[..., Any], list[tuple[int, ...]]]] = {
    "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(8, 4), (4, 8)]),
    "mlp": (
        lambda w, x: fnp.sum(fnp.tanh(x @ w) ** 2, axis=1),
        lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2, axis=1),
        [(4, 4), (8, 4)],
    ),
    "reduce": (lambda a, b: (a.sum(0), a * b), lambda a, b: (a.sum(0), a * b), [(8, 4), (8, 4)]),
    "transpose": (lambda a, b: a.T + b, lambda a, b: a.T + b, [(4, 8), (8, 4)]),
}

SPECS: list[tuple[tuple[int, ...], tuple[str, ...], tuple[Any, ...], Any]] = [
    ((4,), ("x",), (P("x"), P()), P("x")),
    ((4,), ("x",), (P(), P(None, "x")), None),
    ((2, 2), ("x", "y"), (P("x", "y"), P("y")), P("x")),
    ((2, 2), ("x", "y"), (P(("x", "y")), P()), P()),
    ((2, 2), ("x", "y"), (P(None, "x"), P("y", None)), None),
    ((1, 4), ("a", "b"), (P("b"), P()), P("b")),
]


def _jspec(spec: Any) -> Any:
    return None if spec is None else JP(*spec)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("case", range(len(SPECS)))
def test_sharded_jit_matches_one_device_and_jax(name: str, case: int) -> None:
    f, jf, shapes = PROGRAMS[name]
    mesh_shape, names, in_specs, out_spec = SPECS[case]
    mesh, jmesh = _pair(mesh_shape, names)
    rng = np.random.default_rng(case)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ins = tuple(NamedSharding(mesh, s) for s in in_specs)
    jins = tuple(JNamed(jmesh, JP(*s)) for s in in_specs)
    try:
        jout = jax.jit(jf, in_shardings=jins, out_shardings=None if out_spec is None else JNamed(jmesh, _jspec(out_spec)))(*args)
    except ValueError as e:
        # JAX refuses the layout (a dimension the spec does not divide): ferrax too.
        with pytest.raises(fx.ShardingError):
            fx.jit(f, in_shardings=ins, out_shardings=None if out_spec is None else NamedSharding(mesh, out_spec))(*args)
        assert "divide" in str(e) or "rank" in str(e)
        return
    out = fx.jit(f, in_shardings=ins, out_shardings=None if out_spec is None else NamedSharding(mesh, out_spec))(*args)
    single = fx.jit(f)(*args)
    for o, s, j in zip(fx.tree_util.tree_leaves(out), fx.tree_util.tree_leaves(single), jax.tree_util.tree_leaves(jout)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(s), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(o), np.asarray(j), rtol=1e-5, atol=1e-5)
        # The layout of each result: the one asked for, or the one XLA chose (as JAX's).
        want = {d.id: idx for d, idx in j.sharding.devices_indices_map(j.shape).items()}
        got = {d.id: idx for d, idx in o.sharding.devices_indices_map(o.shape).items()}
        assert got == want, (o.sharding, j.sharding)
        if out_spec is not None:
            assert o.sharding == NamedSharding(mesh, out_spec)


def test_layouts_flow_into_the_next_call_without_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    mesh = Mesh(np.array(fx.devices()), ("x",))
    split = NamedSharding(mesh, P("x"))
    f = fx.jit(lambda a: fnp.tanh(a) * 2.0, in_shardings=split, out_shardings=split)
    x = fx.device_put(np.arange(8.0, dtype=np.float32), split)
    y = f(x)
    from ferrax import _runtime

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an argument was copied")

    monkeypatch.setattr(type(_runtime.backend()), "put_sharded", refuse)
    z = f(f(y))  # laid out as the calls expect: passed as they are
    g = fx.jit(lambda a: a + 1.0)  # no shardings: the argument's layout is kept
    w = g(z)
    assert w.sharding == split
    np.testing.assert_allclose(np.asarray(w), np.tanh(np.tanh(np.tanh(np.arange(8.0)) * 2) * 2) * 2 + 1, rtol=1e-5)


def test_arguments_laid_out_otherwise_than_last_call_are_placed_again() -> None:
    """A call whose arguments carry the shardings of the last call that needed no copy
    passes them as they are; any other layout, or a host array, is placed again."""
    mesh = Mesh(np.array(fx.devices()), ("x",))
    split, repl = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())
    f = fx.jit(lambda a, b: a * 2.0 + b, in_shardings=(split, repl), out_shardings=split)
    a = np.arange(8.0, dtype=np.float32)
    b = np.float32(0.5)
    want = a * 2.0 + b
    laid = (fx.device_put(a, split), fx.device_put(b, repl))
    equal = (fx.device_put(a, NamedSharding(mesh, P("x"))), fx.device_put(b, NamedSharding(mesh, P())))
    for args in [laid, laid, (a, b), laid, equal, (laid[0], b), laid]:
        out = f(*args)
        assert out.sharding == split
        np.testing.assert_array_equal(np.asarray(out), want)
        assert [s.data.shape for s in out.addressable_shards] == [(2,)] * 4
    with pytest.raises(fx.errors.ShardingError, match="device_put it with that sharding first"):
        f(fx.device_put(a, repl), laid[1])
    # Without in_shardings the arguments' layouts decide, call by call.
    g = fx.jit(lambda a, b: a * 2.0 + b)
    for x_sharding in [split, repl, split, repl]:
        out = g(fx.device_put(a, x_sharding), laid[1])
        np.testing.assert_array_equal(np.asarray(out), want)
        assert out.sharding.is_fully_replicated == (x_sharding is repl)


def test_committed_arguments_decide_the_layout() -> None:
    mesh, jmesh = _pair((2, 2), ("x", "y"))
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    x = fx.device_put(a, NamedSharding(mesh, P("x", "y")))
    jx = jax.device_put(a, JNamed(jmesh, JP("x", "y")))
    out = fx.jit(lambda v: v * 3.0)(x)
    jout = jax.jit(lambda v: v * 3.0)(jx)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jout))
    assert {d.id: i for d, i in out.sharding.devices_indices_map((8, 4)).items()} == {
        d.id: i for d, i in jout.sharding.devices_indices_map((8, 4)).items()
    }
    # A value on one other device runs there.
    dev = fx.devices()[3]
    y = fx.device_put(np.float32(2.0), dev)
    r = fx.jit(lambda v: v + 1.0)(y)
    assert float(r) == 3.0 and r.sharding.device_set == {dev}


def test_bad_layouts_are_refused() -> None:
    mesh = Mesh(np.array(fx.devices()), ("x",))
    split = NamedSharding(mesh, P("x"))
    with pytest.raises(fx.ShardingError, match="evenly divide"):
        fx.jit(lambda a: a, in_shardings=split)(np.ones(6, np.float32))
    with pytest.raises(fx.ShardingError, match="evenly divide"):
        fx.jit(lambda a: a[:3], out_shardings=split)(np.ones(8, np.float32))
    other = Mesh(np.array(fx.devices()[:2]), ("x",))
    x = fx.device_put(np.ones(4, np.float32), split)
    y = fx.device_put(np.ones(4, np.float32), NamedSharding(other, P("x")))
    with pytest.raises(fx.ShardingError, match="incompatible devices"):
        fx.jit(lambda a, b: a + b)(x, y)
    with pytest.raises(ValueError, match="in_shardings"):
        fx.jit(lambda a, b: a + b, in_shardings=(split,))(x, x)
    with pytest.raises(fx.ShardingError, match="laid out as"):
        fx.jit(lambda a: a, in_shardings=NamedSharding(mesh, P()))(x)


def test_lowered_text_carries_the_layouts() -> None:
    mesh = Mesh(np.array(fx.devices()).reshape(2, 2), ("x", "y"))
    f = fx.jit(
        lambda a, b: a @ b,
        in_shardings=(NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P(None, "y"))),
        out_shardings=NamedSharding(mesh, P()),
    )
    a = np.ones((8, 8), np.float32)
    text = f.lower(a, a).as_text()
    assert 'sdy.mesh @mesh = <["x"=2, "y"=2]>' in text
    assert '#sdy.sharding<@mesh, [{"x"}, {}]>' in text
    assert '#sdy.sharding<@mesh, [{}, {"y"}]>' in text
    assert "mhlo.num_partitions = 4" in text


def test_with_sharding_constraint() -> None:
    mesh, jmesh = _pair((2, 2), ("x", "y"))

    def f(a: Any, b: Any) -> Any:
        c = lax.with_sharding_constraint(a @ b, NamedSharding(mesh, P("x")))
        return fnp.sin(c)

    def jf(a: Any, b: Any) -> Any:
        c = _jax_wsc(a @ b, JNamed(jmesh, JP("x")))
        return jnp.sin(c)

    a = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    out = fx.jit(f)(a, a)
    jout = jax.jit(jf)(a, a)
    np.testing.assert_allclose(np.asarray(out), np.asarray(jout), rtol=1e-5, atol=1e-5)
    text = fx.jit(f).lower(a, a).as_text()
    assert "sdy.sharding_constraint" in text
    assert "sharding_constraint" in str(fx.make_jaxpr(f)(a, a))
    # Eagerly it lays the value out; under grad and vmap it passes through.
    v = lax.with_sharding_constraint(a, NamedSharding(mesh, P("x")))
    assert v.sharding == NamedSharding(mesh, P("x"))
    g = fx.grad(lambda a: fnp.sum(f(a, a)))(a)
    jg = jax.grad(lambda a: jnp.sum(jf(a, a)))(a)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=1e-4, atol=1e-4)
    vm = fx.vmap(lambda r: lax.with_sharding_constraint(r * 2.0, NamedSharding(mesh, P("x"))))(a)
    np.testing.assert_allclose(np.asarray(vm), a * 2.0)


def test_shardings_of_a_jit_staged_into_another_trace() -> None:
    """Inside another jit, under grad or vmap, a jit's in/out shardings become layout
    requests around its call (JAX keeps them on its pjit equation)."""
    mesh, jmesh = _pair((4,), ("x",))
    split = NamedSharding(mesh, P("x"))
    inner = fx.jit(lambda a: fnp.sin(a) * 2.0, in_shardings=split, out_shardings=NamedSharding(mesh, P()))
    a = np.linspace(-1.0, 1.0, 8, dtype=np.float32)
    text = str(fx.make_jaxpr(lambda v: inner(v) + 1.0)(a))
    assert text.count("sharding_constraint") == 2, text
    out = fx.jit(lambda v: inner(v) + 1.0)(a)
    np.testing.assert_allclose(np.asarray(out), np.sin(a) * 2.0 + 1.0, rtol=1e-6)
    g = fx.grad(lambda v: fnp.sum(inner(v)))(a)
    jinner = jax.jit(lambda v: jnp.sin(v) * 2.0, in_shardings=JNamed(jmesh, JP("x")), out_shardings=JNamed(jmesh, JP()))
    jg = jax.grad(lambda v: jnp.sum(jinner(v)))(a)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=1e-6)
    vm = fx.vmap(inner)(np.stack([a, a]))
    np.testing.assert_allclose(np.asarray(vm), np.stack([np.sin(a) * 2.0] * 2), rtol=1e-6)
