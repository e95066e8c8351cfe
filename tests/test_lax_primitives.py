"""``ferrax.lax``'s primitive objects (JAX's ``lax.*_p`` names) and JAX's jaxprs for
``stack``, ``unstack``, ``tile``, ``mulhi`` and ``optimization_barrier`` through
``ferrax.numpy`` and ``ferrax.lax`` (issue 12).

Each exported ``X_p`` is the object ferrax's own rules bind (the registry's primitive of
that name), is exported for every ``jax.lax`` primitive ferrax has, and binding it gives
what the ``lax`` function gives (one jaxpr for all the unary and binary ones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax
from ferrax._lax import registry

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jlax = pytest.importorskip("jax.lax")

EXPORTED = sorted(n for n in lax.__all__ if n.endswith("_p"))


def test_every_jax_primitive_ferrax_has_is_exported() -> None:
    want = set()
    for name in dir(jlax):
        if not name.endswith("_p"):
            continue
        try:
            registry.primitive_named(getattr(jlax, name).name)
        except NotImplementedError:
            continue
        want.add(name)
    assert want == set(EXPORTED)


@pytest.mark.parametrize("name", EXPORTED)
def test_exported_primitive_is_the_one_rules_use(name: str) -> None:
    p = getattr(lax, name)
    assert p is registry.primitive_named(p.name)
    assert p.name == getattr(jlax, name).name


F = np.linspace(-1.5, 2.0, 12, dtype=np.float32).reshape(3, 4)
I = np.array([[-7, 3, 2**31 - 1, -(2**31)], [0, 1, -1, 5], [9, -9, 100, 12345]], np.int32)

# (primitive object, lax function, operands, params): bind(*operands, **params) must give
# lax_function(*operands).
UNARY = ["abs", "ceil", "cos", "exp", "expm1", "floor", "log1p", "logistic", "neg", "sign", "sin",
         "sqrt", "square", "tan", "tanh", "rsqrt", "atan", "sinh", "cosh", "asinh", "erf", "cbrt"]
BINARY = ["add", "sub", "mul", "div", "max", "min", "pow", "atan2", "eq", "ne", "lt", "le", "gt", "ge"]
Call = Callable[..., Any]
CASES: list[tuple[str, Call, Call]] = [
    *[(n, lambda x, n=n: getattr(lax, f"{n}_p").bind(abs(x) + 0.5), lambda x, n=n: getattr(lax, n)(abs(x) + 0.5))
      for n in UNARY],
    *[(n, lambda x, n=n: getattr(lax, f"{n}_p").bind(abs(x) + 0.5, x * x), lambda x, n=n: getattr(lax, n)(abs(x) + 0.5, x * x))
      for n in BINARY],
    ("reduce_sum", lambda x: lax.reduce_sum_p.bind(x, axes=(1,), out_sharding=None), lambda x: lax.reduce_sum(x, (1,))),
    ("transpose", lambda x: lax.transpose_p.bind(x, permutation=(1, 0)), lambda x: lax.transpose(x, (1, 0))),
    ("stack", lambda x: lax.stack_p.bind(x, x, axis=1), lambda x: lax.stack([x, x], 1)),
    ("tile", lambda x: lax.tile_p.bind(x, reps=(2, 1)), lambda x: lax.tile(x, (2, 1))),
    ("unstack", lambda x: lax.stack(lax.unstack_p.bind(x, axis=1), 0), lambda x: lax.stack(lax.unstack(x, 1), 0)),
    ("barrier", lambda x: lax.optimization_barrier_p.bind(x, x)[1], lambda x: lax.optimization_barrier((x, x))[1]),
]


def test_binding_a_primitive_object_gives_the_lax_function() -> None:
    def both(x: Any) -> Any:
        return [(bind(x), fn(x)) for _, bind, fn in CASES]

    for x in (F, ferrax.numpy.asarray(F)):
        for (name, _, _), (got, want) in zip(CASES, both(x)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
            assert got.dtype == want.dtype, name
    # Staged, the two give the same equations.
    jaxpr = str(ferrax.make_jaxpr(both)(F))
    for line in jaxpr.splitlines():
        assert "custom" not in line
    assert "stack[axis=1]" in jaxpr and "tile[reps=(2, 1)]" in jaxpr
    ours = ferrax.make_jaxpr(lambda x: lax.mulhi_p.bind(x, x))(I)
    assert str(ours) == str(ferrax.make_jaxpr(lambda x: lax.mulhi(x, x))(I))
    np.testing.assert_array_equal(np.asarray(lax.mulhi_p.bind(I, I)), np.asarray(jlax.mulhi(I, I)))


# ferrax.numpy and ferrax.lax against jax.numpy and jax.lax: the same jaxpr text and values.
X = np.arange(6, dtype=np.float32).reshape(2, 3)
PARITY: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("stack", lambda m, x: m.stack([x, 2 * x])),
    ("stack-last", lambda m, x: m.stack([x, x, x], axis=-1)),
    ("stack-one", lambda m, x: m.stack([x])),
    ("stack-promoted", lambda m, x: m.stack([x, m.ones((2, 3), np.int32)], axis=1)),
    ("tile", lambda m, x: m.tile(x, (2, 1))),
    ("tile-int", lambda m, x: m.tile(x, 2)),
    ("tile-ones", lambda m, x: m.tile(x, (1, 1))),
    ("tile-grow", lambda m, x: m.tile(x, (2, 2, 1))),
    ("unstack", lambda m, x: m.unstack(x, axis=1)),
    ("lax-unstack", lambda m, x: (jlax if m is jnp else lax).unstack(x, 0)),
]


@pytest.mark.parametrize("name, f", PARITY, ids=[p[0] for p in PARITY])
def test_numpy_binds_what_jax_numpy_binds(name: str, f: Callable[[Any, Any], Any]) -> None:
    ours = ferrax.make_jaxpr(lambda x: f(fnp, x))(X)
    theirs = jax.make_jaxpr(lambda x: f(jnp, x))(X)
    assert str(ours) == str(theirs)
    got, want = f(fnp, X), f(jnp, X)
    for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        assert g.dtype == w.dtype


def primitive_names(jaxpr_text: str) -> list[str]:
    """The primitive of each equation, in order (from the printed jaxpr)."""
    return [line.split(" = ", 1)[1].strip().split("[", 1)[0].split(" ", 1)[0]
            for line in jaxpr_text.splitlines() if " = " in line and "lambda" not in line]


def test_grad_jaxprs_match_jax() -> None:
    # Transposes: unstack <-> stack, tile -> reshape + reduce_sum (JAX's equations; the
    # printer breaks JAX's long reshape line, so the primitives are compared in order).
    def f(L: Any) -> Callable[[Any], Any]:
        return lambda x: L.reduce_sum(
            L.mul(L.tile(x, (2, 3)), L.tile(x, (2, 3))), (0, 1)
        ) + L.reduce_sum(L.stack(L.unstack(x, 1), 0), (0, 1))

    ours = str(ferrax.make_jaxpr(ferrax.grad(f(lax)))(X))
    theirs = str(jax.make_jaxpr(jax.grad(f(jlax)))(X))
    assert primitive_names(ours) == primitive_names(theirs)
    reshape = ours.split("reshape[", 1)[1].split("]", 1)[0]
    assert "new_sizes=(2, 2, 3, 3)" in reshape and "sharding=None" in reshape
    assert "stack[axis=1]" in ours and "unstack[axis=0]" in ours


def test_optimization_barrier_keeps_the_tree_and_lowers_to_one_op() -> None:
    tree = {"a": X, "b": (np.int32(3), [X[0]])}
    out = lax.optimization_barrier(tree)
    assert ferrax.tree_util.tree_structure(out) == ferrax.tree_util.tree_structure(tree)
    text = ferrax.jit(lambda t: lax.optimization_barrier(t)).lower(tree).as_text()
    assert text.count("stablehlo.optimization_barrier") == 1
    jtext = jax.jit(lambda t: jlax.optimization_barrier(t)).lower(tree).as_text()
    assert jtext.count("stablehlo.optimization_barrier") == 1
    assert str(ferrax.make_jaxpr(lax.optimization_barrier)(tree)) == str(jax.make_jaxpr(jlax.optimization_barrier)(tree))


def test_mulhi_lowers_to_chlo_as_jax() -> None:
    u = np.array([2**32 - 1, 2**31 + 5, 3], np.uint32)
    text = ferrax.jit(lax.mulhi).lower(u, u).as_text()
    assert "chlo.mulhi" in text
    assert "chlo.mulhi" in jax.jit(jlax.mulhi).lower(u, u).as_text()


@pytest.mark.parametrize("name, f, exc", [
    ("stack of shapes", lambda L: L.stack([np.ones(2, np.float32), np.ones(3, np.float32)]), ValueError),
    ("stack axis", lambda L: L.stack([np.ones(2, np.float32)], axis=2), ValueError),
    ("stack nothing", lambda L: L.stack([]), (ValueError, IndexError)),
    ("unstack scalar", lambda L: L.unstack(np.float32(1.0)), ValueError),
    ("unstack axis", lambda L: L.unstack(np.ones(2, np.float32), 1), ValueError),
    ("tile reps", lambda L: L.tile(np.ones((2, 3), np.float32), (2,)), TypeError),
    ("mulhi float", lambda L: L.mulhi(np.float32(1.0), np.float32(2.0)), TypeError),
])
def test_errors_are_jaxs(name: str, f: Callable[[Any], Any], exc: Any) -> None:
    with pytest.raises(exc):
        f(jlax)
    with pytest.raises(exc) as info:
        f(lax)
    assert "test_lax_primitives.py" in str(info.value), str(info.value)


def test_small_helpers_match_jax() -> None:
    x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    # Out-of-range and negative indices wrap (modulo the axis size), as JAX's.
    idx = (np.array([0, 1, -1, 7], np.int32), np.array([1, 0, 5, -4], np.int32))
    for axes in [(0, 1), (0, 2), (1, 2)]:
        want = np.asarray(jlax.index_take(x, idx, axes))
        np.testing.assert_array_equal(np.asarray(lax.index_take(x, idx, axes)), want)
    for L in (jlax, lax):  # the gather's collapsed axes must be sorted
        with pytest.raises(TypeError):
            L.index_take(x, idx, (2, 1))
    staged = ferrax.jit(lambda x: lax.index_take(x, idx, (1, 2)))(x)
    np.testing.assert_array_equal(np.asarray(staged), np.asarray(jlax.index_take(x, idx, (1, 2))))
    for arr in (np.float32(2.0), np.ones(4, np.float32), np.ones((3, 1), np.int32), x):
        got, want = lax.broadcast_like(arr, x), jlax.broadcast_like(arr, x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert got.dtype == want.dtype
    with pytest.raises(ValueError):
        lax.broadcast_like(np.ones(3, np.float32), x)
    e = lax.empty((2, 3), np.int32)
    assert e.shape == (2, 3) and e.dtype == jlax.empty((2, 3), np.int32).dtype
    for args in [((10, 11), (3, 3), (2, 1)), ((10, 11), (3, 4), (3, 2)), ((7,), (4,), (3,)), ((1, 9), (5, 2), (4, 4))]:
        for padding in ("SAME", "SAME_LOWER", "VALID", "same"):
            assert lax.padtype_to_pads(*args, padding) == jlax.padtype_to_pads(*args, padding)
    with pytest.raises(RuntimeError):
        jlax.padtype_to_pads((3,), (2,), (1,), "FULL")
    with pytest.raises(RuntimeError):
        lax.padtype_to_pads((3,), (2,), (1,), "FULL")
