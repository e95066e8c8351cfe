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
    checkpoint: Any
    custom_jvp: Any
    custom_vjp: Any


FX = M(fnp, lax, ferrax.vmap, ferrax.grad, ferrax.jit, ferrax.checkpoint, ferrax.custom_jvp, ferrax.custom_vjp)
JX = M(jnp, jax.lax, jax.vmap, jax.grad, jax.jit, jax.checkpoint, jax.custom_jvp, jax.custom_vjp)


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


def _softplus(m: M) -> Any:
    """log(1 + exp(x)) with a hand-written derivative (the logistic function)."""

    def plain(x: Any) -> Any:
        return m.np.log1p(m.np.exp(x))

    def rule(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return softplus(x), t / (1.0 + m.np.exp(-x))

    softplus = m.custom_jvp(plain)
    softplus.defjvp(rule)
    return softplus


def _clip_grad(m: M) -> Any:
    """x * y whose cotangents are clipped to [-0.5, 0.5]."""

    def plain(x: Any, y: Any) -> Any:
        return x * y

    def fwd(x: Any, y: Any) -> Any:
        return x * y, (x, y)

    def bwd(res: Any, g: Any) -> Any:
        x, y = res
        return m.np.clip(g * y, -0.5, 0.5), m.np.clip(g * x, -0.5, 0.5)

    f = m.custom_vjp(plain)
    f.defvjp(fwd, bwd)
    return f


BOOLS = np.array([True, False, False, True])
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
    # Control flow.
    Program("cond, batched predicate", lambda m: m.vmap(lambda p, a: m.lax.cond(p, m.np.sin, lambda v: v * 2.0, a))(BOOLS, _x(4, 3))),
    Program("cond, unbatched predicate", lambda m: m.vmap(lambda p, a: m.lax.cond(p, m.np.sin, lambda v: v * 2.0, a), in_axes=(None, 1))(True, _x(3, 4))),
    Program("cond, predicate from the data", lambda m: m.vmap(lambda a: m.lax.cond(m.np.sum(a) > 0, lambda v: v - 1.0, lambda v: v + 1.0, a))(_x(6, 2))),
    Program("cond, unbatched operand of a batched branch", lambda m: m.vmap(lambda p, a, b: m.lax.cond(p, lambda v: v * b, lambda v: v, a), in_axes=(None, None, 0))(False, _x(3), _x(4, 3, seed=1))),
    Program("switch, batched index", lambda m: m.vmap(lambda i, a: m.lax.switch(i, [m.np.sin, m.np.cos, lambda v: -v], a))(np.array([0, 2, 1, 7], np.int32), _x(4, 3))),
    Program("while_loop, trip counts per lane", lambda m: m.vmap(lambda n, a: m.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0), (0, a)))(np.array([0, 3, 1, 5], np.int32), _x(4, 2))),
    Program("while_loop, batched only in the carry", lambda m: m.vmap(lambda a: m.lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, m.np.tanh(c[1])), (0, a)))(_x(4, 2))),
    Program("fori_loop, traced bound", lambda m: m.vmap(lambda n, a: m.lax.fori_loop(0, n, lambda i, c: c * 0.5 + i, a))(np.array([2, 0, 4], np.int32), _x(3, 2))),
    Program("scan, batched carry, unbatched xs", lambda m: m.vmap(lambda c: m.lax.scan(lambda c, x: (m.np.tanh(c * x), c.sum()), c, _x(5, 3, seed=2)))(_x(4, 3))),
    Program("scan, unbatched carry, batched xs on axis 1", lambda m: m.vmap(lambda xs: m.lax.scan(lambda c, x: (c + x, c * x), np.zeros(3, np.float32), xs), in_axes=1)(_x(5, 4, 3))),
    Program("scan, reverse, batched consts", lambda m: m.vmap(lambda w, xs: m.lax.scan(lambda c, x: (c * w + x, c), np.float32(0.0), xs, reverse=True), in_axes=(0, None))(_x(4), _x(6, seed=2))),
    Program("grad of vmap of scan", lambda m: m.grad(lambda w: m.np.sum(m.vmap(lambda c: m.lax.scan(lambda c, x: (m.np.sin(c * w + x), c), c, _x(5, seed=3))[0])(_x(4, seed=1))))(np.float32(0.7))),
    Program("vmap of grad of a while loop", lambda m: m.vmap(m.grad(lambda a: m.lax.fori_loop(0, 3, lambda i, c: m.np.sin(c) * a, a)))(_x(4))),
    Program("vmap of grad through cond", lambda m: m.vmap(m.grad(lambda a: m.lax.cond(a > 0, lambda v: v**3, lambda v: -v, a)))(_x(6))),
    # Nesting, custom rules.
    Program("nested vmap, in_axes 1 inside 0", lambda m: m.vmap(m.vmap(lambda a, b: m.np.dot(a, b), in_axes=(1, None)), in_axes=(0, 0))(_x(2, 3, 4), _x(2, 3, seed=1))),
    Program("nested vmap, out_axes 1", lambda m: m.vmap(m.vmap(lambda a: a * 2.0, in_axes=-1, out_axes=1), in_axes=1, out_axes=0)(_x(3, 4, 5))),
    Program("custom_jvp, vmap of grad", lambda m: m.vmap(m.grad(lambda a: _softplus(m)(a)))(_x(5))),
    Program("custom_vjp, grad of vmap, shared input", lambda m: m.grad(lambda a, b: m.np.sum(m.vmap(_clip_grad(m), in_axes=(0, None))(a, b)), (0, 1))(_x(4, 3), _x(3, seed=1))),
    Program("checkpoint, vmap of grad", lambda m: m.vmap(m.grad(lambda a: m.np.sum(m.checkpoint(lambda v: m.np.sin(m.np.sin(v)))(a))))(_x(4, 3))),
    Program("stop_gradient, vmap of grad", lambda m: m.vmap(m.grad(lambda a: m.np.sum(m.lax.stop_gradient(a) * a)))(_x(4, 3))),
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
        lambda m: m.vmap(lambda d: d["a"] + d["b"])({"a": _x(3), "b": _x(4)}),
        lambda m: m.vmap(lambda a: a, axis_size=5)(_x(3)),
        lambda m: m.vmap(lambda a: (a, 2 * a), out_axes=(0, None))(_x(3)),
        lambda m: m.vmap(lambda a: (a, 2 * a), out_axes=(0, 3))(_x(3)),
        lambda m: m.vmap(lambda a: a, in_axes=1.5)(_x(3)),
    ],
    ids=[
        "inconsistent sizes", "axis out of range", "in_axes of the wrong length", "nothing mapped",
        "inconsistent sizes in a dict", "axis_size disagrees", "out_axes None for a batched output",
        "out_axes out of range", "in_axes not an int",
    ],
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


def test_size_errors_name_the_arguments_as_jax() -> None:
    def f(x: Any, y: Any) -> Any:
        return x + y

    makes: list[Callable[[M], Any]] = [
        lambda m: m.vmap(f, in_axes=(0, 1))(_x(3), _x(3, 4)),
        lambda m: m.vmap(lambda d: d["a"] + d["b"])({"a": _x(3), "b": _x(4)}),
        lambda m: m.vmap(f, axis_size=5)(_x(3), _x(3)),
    ]
    for make in makes:
        with pytest.raises(ValueError) as theirs:
            make(JX)
        with pytest.raises(ValueError) as ours:
            make(FX)
        # JAX's message, then the user's line.
        assert str(ours.value).startswith(str(theirs.value)), (str(ours.value), str(theirs.value))
        assert "test_vmap.py" in str(ours.value)
    with pytest.raises(ValueError, match=r"out_axes\[1\], got axis spec None but output was batched"):
        ferrax.vmap(lambda a: (a, 2 * a), out_axes=(0, None))(_x(3))
    # An output that does not depend on the mapped input: broadcast (out_axes an int) or
    # returned as it is (out_axes None), as in JAX.
    assert np.array_equal(np.asarray(ferrax.vmap(lambda a: np.float32(1.0), out_axes=None)(_x(3))), np.float32(1.0))
    assert np.asarray(ferrax.vmap(lambda a: np.ones(2, np.float32), out_axes=1)(_x(3))).shape == (2, 3)


def test_keyword_arguments_are_mapped_over_their_first_axis() -> None:
    def f(a: Any, *, scale: Any) -> Any:
        return a * scale

    got = ferrax.vmap(f, in_axes=(None,))(_x(3), scale=_x(4, seed=1))
    want = jax.vmap(f, in_axes=(None,))(_x(3), scale=_x(4, seed=1))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    with pytest.raises(ValueError) as theirs:
        jax.vmap(f)(_x(3), scale=_x(4))
    with pytest.raises(ValueError) as ours:
        ferrax.vmap(f)(_x(3), scale=_x(4))
    assert str(ours.value).startswith(str(theirs.value))


def test_unmapped_python_values_are_returned_as_they_are() -> None:
    # out_axes None on a value the function returns untouched: JAX returns it as it is.
    for m in (FX, JX):
        a, k = m.vmap(lambda v: (v * 2.0, 3), out_axes=(0, None))(_x(2))
        assert k == 3 and type(k) is int
        b = m.vmap(lambda v: (v, 3.5), out_axes=0)(_x(2))[1]
        assert np.asarray(b).shape == (2,) and np.asarray(b).dtype == np.float32
