"""``ferrax.lax``'s compositions of primitives (slice_in_dim, collapse, full, dot,
batch_matmul, map, associative_scan, ...) against ``jax.lax``: values, dtypes and weak
types, eagerly and under jit, and the errors JAX raises."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax

RNG = np.random.default_rng(0)
A = RNG.standard_normal((4, 5, 6)).astype(np.float32)
M = RNG.standard_normal((3, 4, 5)).astype(np.float32)
N = RNG.standard_normal((3, 5, 2)).astype(np.float32)
V = RNG.standard_normal(5).astype(np.float32)
I = np.arange(24, dtype=np.int32).reshape(4, 6)

# (label, function of a lax module giving the result); the same call on both libraries.
CASES: list[tuple[str, Callable[[Any], Any]]] = [
    ("slice_in_dim", lambda L: L.slice_in_dim(A, 1, 4, 2, axis=1)),
    ("slice_in_dim negative", lambda L: L.slice_in_dim(A, -3, None, axis=-1)),
    ("slice_in_dim None start", lambda L: L.slice_in_dim(I, None, -1, axis=0)),
    ("index_in_dim", lambda L: L.index_in_dim(A, -1, axis=1)),
    ("index_in_dim dropped", lambda L: L.index_in_dim(A, 2, axis=2, keepdims=False)),
    ("dynamic_update_slice_in_dim", lambda L: L.dynamic_update_slice_in_dim(I, np.full((4, 2), -1, np.int32), 3, axis=1)),
    ("dynamic_update_index_in_dim", lambda L: L.dynamic_update_index_in_dim(I, np.full((6,), 7, np.int32), 2, 0)),
    ("dynamic_update_index_in_dim keepdims", lambda L: L.dynamic_update_index_in_dim(A, A[:, :1], 4, 1)),
    ("collapse", lambda L: L.collapse(A, 0, 2)),
    ("collapse to the end", lambda L: L.collapse(A, 1)),
    ("broadcast", lambda L: L.broadcast(V, (2, 3))),
    ("broadcast none", lambda L: L.broadcast(V, ())),
    ("broadcast_to_rank", lambda L: L.broadcast_to_rank(V, 3)),
    ("full weak", lambda L: L.full((2, 3), 1.5)),
    ("full int", lambda L: L.full((2,), 3, np.int8)),
    ("full of an array scalar", lambda L: L.full((3,), np.float16(2.0))),
    ("full_like", lambda L: L.full_like(I, 4.7)),
    ("full_like dtype shape", lambda L: L.full_like(I, 2, np.float32, (5,))),
    ("reciprocal", lambda L: L.reciprocal(A)),
    ("dot matrix vector", lambda L: L.dot(M[0], V)),
    ("dot vector matrix", lambda L: L.dot(V, N[0])),
    ("dot matrix matrix", lambda L: L.dot(M[0], N[0])),
    ("dot with dimension_numbers", lambda L: L.dot(M, N, dimension_numbers=(((2,), (1,)), ((0,), (0,))))),
    ("batch_matmul", lambda L: L.batch_matmul(M, N)),
    ("map", lambda L: L.map(lambda x: x.sum() * x, A)),
    ("map batch_size", lambda L: L.map(lambda x: (x * 2.0, x.max()), A, batch_size=3)),
    ("map batch_size dividing", lambda L: L.map(lambda x: x + 1.0, A, batch_size=2)),
    ("associative_scan add", lambda L: L.associative_scan(L.add, A)),
    ("associative_scan mul axis 1", lambda L: L.associative_scan(L.mul, A, axis=1)),
    ("associative_scan max reverse", lambda L: L.associative_scan(L.max, A, reverse=True, axis=2)),
    ("associative_scan int", lambda L: L.associative_scan(L.add, I, axis=1)),
    ("associative_scan bool", lambda L: L.associative_scan(L.bitwise_or, I % 5 == 0)),
]


def _recurrence(L: Any) -> Any:
    # h_t = a_t * h_{t-1} + b_t as the scan of (a, b) pairs: a pytree of two arrays.
    def fn(x: Any, y: Any) -> Any:
        return (x[0] * y[0], y[0] * x[1] + y[1])

    return L.associative_scan(fn, (A[:, 0] * 0.5, A[:, 1]))


CASES.append(("associative_scan pytree", _recurrence))
for n in range(0, 10):
    CASES.append((f"associative_scan length {n}", lambda L, n=n: L.associative_scan(L.add, A.reshape(-1)[:n] if n else np.zeros((0, 2), np.float32))))  # type: ignore[misc]

LIBS = {"ferrax": lax, "jax": jax.lax}


def _leaves(x: Any) -> list[Any]:
    return jax.tree_util.tree_leaves(x) if not isinstance(x, ferrax.Array) else [x]


def _check(got: Any, want: Any, exact: bool) -> None:
    g, w = ferrax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert a.shape == b.shape and a.dtype == b.dtype
        # (A scan of fewer than 2 elements returns its operand as it is, NumPy or not.)
        assert type(a) is np.ndarray if type(b) is np.ndarray else a.weak_type == b.weak_type
        if exact:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("label, make", CASES, ids=[c[0] for c in CASES])
def test_eager_matches_jax(label: str, make: Callable[[Any], Any]) -> None:
    # Scans combine in JAX's order, so their floats agree to the bit.
    _check(make(lax), make(jax.lax), exact=not label.startswith(("dot", "batch_matmul", "map")))


def test_jitted_match_jax_in_one_compilation() -> None:
    got = ferrax.jit(lambda: [make(lax) for _, make in CASES])()
    want = jax.jit(lambda: [make(jax.lax) for _, make in CASES])()
    for (label, _), g, w in zip(CASES, got, want):
        _check(g, w, exact=False)


def test_associative_scan_of_traced_values_and_its_gradient() -> None:
    def f(L: Any, np_: Any) -> Callable[[Any], Any]:
        return lambda x: np_.sum(L.associative_scan(L.mul, x) ** 2)

    x = A[:, 0, 0]
    np.testing.assert_allclose(ferrax.grad(f(lax, fnp))(x), jax.grad(f(jax.lax, jnp))(x), rtol=1e-5)
    xs = A[:, :, 0].T
    np.testing.assert_allclose(
        ferrax.vmap(f(lax, fnp))(xs), jax.vmap(f(jax.lax, jnp))(xs), rtol=1e-5
    )


def test_map_traces_a_scan_as_jax() -> None:
    got = str(ferrax.make_jaxpr(lambda xs: lax.map(fnp.sin, xs))(A))
    want = str(jax.make_jaxpr(lambda xs: jax.lax.map(jnp.sin, xs))(A))
    assert "scan[" in got and got.count("sin") == want.count("sin") == 1


ERRORS: list[tuple[str, Callable[[Any], Any]]] = [
    ("dot of rank 3", lambda L: L.dot(M, N)),
    ("dot of mismatched sizes", lambda L: L.dot(V, M[0])),
    ("batch_matmul batch mismatch", lambda L: L.batch_matmul(M, N[:2])),
    ("batch_matmul rank 1", lambda L: L.batch_matmul(V, V)),
    ("full of an array", lambda L: L.full((2,), np.ones(2))),
    ("associative_scan lengths differ", lambda L: L.associative_scan(lambda a, b: a, (V, A[:, 0, 0]))),
    ("broadcast_shapes", lambda L: L.broadcast_shapes((2, 3), (4, 3))),
]


@pytest.mark.parametrize("label, make", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_as_jax(label: str, make: Callable[[Any], Any]) -> None:
    with pytest.raises(Exception) as theirs:
        make(jax.lax)
    with pytest.raises(type(theirs.value)):
        make(lax)


def test_broadcast_shapes_as_jax() -> None:
    for shapes in [((2, 3), (3,)), ((1, 4), (5, 1)), ((), (2,)), ((2, 1, 3), (4, 1))]:
        assert lax.broadcast_shapes(*shapes) == jax.lax.broadcast_shapes(*shapes)
