"""vmap against jax.vmap: the first part of issue 9 (the batching trace, the API, rules
for the elementwise, structural, dot_general and reduction primitives).

Each program is written once for both systems (``m`` is ferrax's or JAX's namespace).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax


class M(NamedTuple):
    np: Any
    lax: Any
    vmap: Any
    grad: Any
    jit: Any


FX = M(fnp, lax, ferrax.vmap, ferrax.grad, ferrax.jit)
JX = M(jnp, jax.lax, jax.vmap, jax.grad, jax.jit)


def _x(*shape: int, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class Program(NamedTuple):
    name: str
    run: Callable[[M], Any]


def _mlp(m: M) -> Callable[..., Any]:
    def loss(params: Any, x: Any, y: Any) -> Any:
        (w1, b1), (w2, b2) = params
        h = m.np.tanh(x @ w1 + b1)
        return m.np.sum((h @ w2 + b2 - y) ** 2)

    return loss


PARAMS = [(_x(3, 8, seed=1), _x(8, seed=2)), (_x(8, 2, seed=3), _x(2, seed=4))]
XS, YS = _x(6, 3, seed=5), _x(6, 2, seed=6)

PROGRAMS = [
    Program("unary", lambda m: m.vmap(m.np.sin)(_x(5, 3))),
    Program("binary, both mapped", lambda m: m.vmap(lambda a, b: a * b + a)(_x(4, 3), _x(4, 3, seed=1))),
    Program("binary, one unmapped", lambda m: m.vmap(lambda a, b: a - b, in_axes=(0, None))(_x(4, 3), _x(3, seed=1))),
    Program("scalar operand mapped", lambda m: m.vmap(lambda s, v: s * v, in_axes=(0, None))(_x(4), _x(3, seed=1))),
    Program("in_axes 1, out_axes 1", lambda m: m.vmap(lambda a: a * 2.0 + m.np.sum(a), in_axes=1, out_axes=1)(_x(4, 3))),
    Program("negative axes", lambda m: m.vmap(lambda a: m.np.exp(a), in_axes=-1, out_axes=-1)(_x(2, 3))),
    Program("matmul, one mapped", lambda m: m.vmap(lambda a, w: a @ w, in_axes=(0, None))(_x(4, 3), _x(3, 5, seed=1))),
    Program("matmul, rhs mapped", lambda m: m.vmap(lambda a, w: a @ w, in_axes=(None, 0))(_x(2, 3), _x(4, 3, 5, seed=1))),
    Program("matmul, both mapped", lambda m: m.vmap(lambda a, w: a @ w)(_x(4, 2, 3), _x(4, 3, 5, seed=1))),
    Program("reductions", lambda m: m.vmap(lambda a: (m.np.sum(a, axis=0), m.np.max(a), m.np.argmax(a, axis=1)))(_x(4, 3, 5))),
    Program("reshape and transpose", lambda m: m.vmap(lambda a: m.np.reshape(a, (6,)).T + m.np.transpose(a).ravel())(_x(4, 2, 3))),
    Program("broadcasting inside", lambda m: m.vmap(lambda a, b: a[:, None] + b[None, :])(_x(4, 3), _x(4, 2, seed=1))),
    Program("where (select_n)", lambda m: m.vmap(lambda a: m.np.where(a > 0, a, 0.5 * a))(_x(4, 3))),
    Program("clip (clamp)", lambda m: m.vmap(lambda a, lo: m.lax.clamp(lo, a, 1.0), in_axes=(0, 0))(_x(4, 3), _x(4, seed=1) - 1.0)),
    Program("concatenate and slice", lambda m: m.vmap(lambda a, b: m.np.concatenate([a, b])[1:4])(_x(4, 3), _x(4, 2, seed=1))),
    Program("pytree in_axes", lambda m: m.vmap(lambda d: d["a"] * d["b"], in_axes=({"a": 0, "b": None},))({"a": _x(4, 3), "b": _x(3, seed=1)})),
    Program("unmapped output broadcast", lambda m: m.vmap(lambda a, b: (a + 1.0, b), in_axes=(0, None))(_x(4), _x(3, seed=1))),
    Program("nested vmap", lambda m: m.vmap(m.vmap(lambda a, b: a * b, in_axes=(0, None)), in_axes=(None, 0))(_x(3), _x(4, seed=1))),
    Program("vmap of jit", lambda m: m.vmap(m.jit(lambda a: m.np.tanh(a) * a))(_x(4, 3))),
    Program("jit of vmap", lambda m: m.jit(m.vmap(lambda a, w: m.np.tanh(a @ w), in_axes=(0, None)))(_x(4, 3), _x(3, 2, seed=1))),
    Program("per-example gradients of an MLP", lambda m: m.vmap(m.grad(_mlp(m)), in_axes=(None, 0, 0))(PARAMS, XS, YS)),
    Program("jit of per-example gradients", lambda m: m.jit(m.vmap(m.grad(_mlp(m)), in_axes=(None, 0, 0)))(PARAMS, XS, YS)),
]


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_vmap_matches_jax(prog: Program) -> None:
    got, want = prog.run(FX), prog.run(JX)
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert str(g_tree) == str(w_tree)
    for g, w in zip(g_leaves, w_leaves):
        ga, wa = np.asarray(g), np.asarray(w)
        assert ga.shape == wa.shape and ga.dtype == wa.dtype, f"{ga.dtype}{ga.shape} vs {wa.dtype}{wa.shape}"
        np.testing.assert_allclose(ga, wa, rtol=2e-5, atol=2e-5)


def test_vmap_jaxpr_keeps_the_batch_in_the_primitives() -> None:
    # Vectorized, not looped: one dot_general for the whole batch, as JAX stages it.
    def f(m: M) -> Any:
        return m.vmap(lambda a, w: m.np.tanh(a @ w), in_axes=(0, None))

    ours = [e.primitive for e in ferrax.make_jaxpr(f(FX))(_x(4, 3), _x(3, 2)).jaxpr.eqns]
    theirs = [e.primitive.name for e in jax.make_jaxpr(f(JX))(_x(4, 3), _x(3, 2)).jaxpr.eqns]
    assert ours == theirs


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.vmap(lambda a, b: a + b)(_x(4), _x(3)),
        lambda m: m.vmap(lambda a: a, in_axes=2)(_x(4, 3)),
        lambda m: m.vmap(lambda a: a, in_axes=(0, 0))(_x(4)),
        lambda m: m.vmap(lambda a: a, in_axes=None)(_x(4)),
    ],
    ids=["inconsistent sizes", "axis out of range", "in_axes of the wrong length", "nothing mapped"],
)
def test_vmap_errors_as_jax(make: Callable[[M], Any]) -> None:
    with pytest.raises(Exception) as jax_error:
        make(JX)
    with pytest.raises(type(jax_error.value)) as ours:
        make(FX)
    assert "test_vmap.py" in str(ours.value)


def test_missing_rule_is_a_clear_error() -> None:
    # A primitive defined outside ferrax without a batching rule: JAX's error class
    # (NotImplementedError), naming the primitive and the user's line.
    from ferrax.core import Primitive

    double = Primitive("double_it")
    double.def_abstract_eval(lambda a: a)
    double.def_impl(lambda x: 2 * np.asarray(x))
    assert np.array_equal(np.asarray(double.bind(_x(3))), 2 * _x(3))
    with pytest.raises(NotImplementedError, match="Batching rule for 'double_it'") as e:
        ferrax.vmap(lambda x: double.bind(x))(_x(2, 3))
    assert "test_vmap.py" in str(e.value)
