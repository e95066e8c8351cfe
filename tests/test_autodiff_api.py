"""The differentiation API (``jvp``, ``linearize``, ``vjp``, ``grad``,
``value_and_grad``) against JAX's on a suite of programs.

Each program is written once, as a function of a namespace ``m`` holding either
ferrax's modules and transformations (``m.np`` = ``ferrax.numpy``, ``m.lax`` =
``ferrax.lax``, ``m.jit``, ``m.grad``, ...) or JAX's, so both systems run the same
source. Every program is differentiated in each of its modes by both systems with the
same primals, tangents and cotangents, and the results must agree: tree structure,
dtypes (float0 for integer leaves), weak types and values.

Then: jit of value_and_grad of a sample of the programs; every gradient jaxpr prints,
parses back and typechecks; transformations composed with each other (jit of grad,
grad of grad of jit, argnums tuples, has_aux, Hessian-vector products, custom rules,
...); the cost of reverse mode (the gradient's jaxpr grows linearly in the program's
length); the primitive sequences of ``make_jaxpr(grad(f))`` and of the staged linear
maps of ``linearize`` and ``vjp`` against JAX's (where they differ, the reason is
written next to the list); the types of staged transformations; x64 mode.

JAX's results are computed under one ``jax.jit`` per program or case (JAX's op-by-op
dispatch would compile every operation), with the inputs closed over so that Python
scalars stay weakly typed.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import ferrax as fx
import ferrax.numpy as fnp
from ferrax.core import parse_jaxpr, typecheck

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def _ns(np_: Any, lax_: Any, api: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        np=np_,
        lax=lax_,
        jit=api.jit,
        grad=api.grad,
        value_and_grad=api.value_and_grad,
        vjp=api.vjp,
        jvp=api.jvp,
        linearize=api.linearize,
        make_jaxpr=api.make_jaxpr,
        custom_jvp=api.custom_jvp,
        custom_vjp=api.custom_vjp,
        checkpoint=api.checkpoint,
    )


FX = _ns(fnp, fx.lax, fx)
JX = _ns(jnp, jax.lax, jax)
FLOAT0 = jax.dtypes.float0

_RNG = np.random.default_rng(0)


def _f32(*shape: int, positive: bool = False) -> np.ndarray[Any, Any]:
    x = _RNG.standard_normal(shape).astype(np.float32)
    return np.abs(x) + np.float32(0.5) if positive else x


# ------------------------------------------------------------------ comparing results


def _leaf_dtype(x: Any) -> np.dtype[Any]:
    if isinstance(x, bool):
        return np.dtype(np.bool_)
    if isinstance(x, int):
        return np.dtype(np.int32)
    if isinstance(x, float):
        return np.dtype(np.float32)
    dtype: np.dtype[Any] = np.dtype(x.dtype)
    return dtype


def _is_float(dtype: np.dtype[Any]) -> bool:
    return bool(np.issubdtype(dtype, np.inexact)) or dtype.name == "bfloat16"


def _random_like(x: Any, rng: np.random.Generator) -> Any:
    """A tangent or cotangent for the leaf ``x``: random of its dtype, float0 zeros for
    integer and boolean leaves."""
    dtype = _leaf_dtype(x)
    shape = np.shape(x)
    if not _is_float(dtype):
        return np.zeros(shape, FLOAT0)
    return rng.standard_normal(shape).astype(dtype)


def _weak(x: Any) -> bool:
    return bool(getattr(x, "weak_type", False))


def _assert_same(got: Any, want: Any, rtol: float = 2e-5, atol: float = 1e-6) -> None:
    """ferrax's result equals JAX's: tree structure, dtype, shape, weak type, values."""
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert g_tree == w_tree, f"tree {g_tree} != JAX's {w_tree}"
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        ga, wa = np.asarray(g), np.asarray(w)
        assert ga.dtype == wa.dtype, f"leaf {i}: dtype {ga.dtype} != JAX's {wa.dtype}"
        assert ga.shape == wa.shape, f"leaf {i}: shape {ga.shape} != JAX's {wa.shape}"
        assert _weak(g) == _weak(w), f"leaf {i}: weak_type {_weak(g)} != JAX's {_weak(w)}"
        if wa.dtype == FLOAT0:
            continue
        if not _is_float(wa.dtype):
            np.testing.assert_array_equal(ga, wa, err_msg=f"leaf {i}")
            continue
        np.testing.assert_allclose(ga.astype(np.float64), wa.astype(np.float64), rtol=rtol, atol=atol, err_msg=f"leaf {i}")


# ------------------------------------------------------------------------ the programs


def _jit(m: Any, f: Callable[..., Any]) -> Callable[..., Any]:
    jitted: Callable[..., Any] = m.jit(f)
    return jitted


class Program(NamedTuple):
    name: str
    make: Callable[[Any], Callable[..., Any]]
    args: tuple[Any, ...]
    argnums: int | tuple[int, ...] = 0
    # Which of jvp, linearize, vjp, grad apply (grad: the output is a real scalar).
    modes: frozenset[str] = frozenset({"jvp", "linearize", "vjp", "grad"})
    rtol: float = 2e-5
    # JAX's reference runs eagerly (Python control flow on values), not under jit.
    jax_eager: bool = False


FORWARD = frozenset({"jvp", "linearize"})
NO_GRAD = frozenset({"jvp", "linearize", "vjp"})


def mlp(m: Any) -> Callable[..., Any]:
    def f(params: Any, x: Any, y: Any) -> Any:
        (w1, b1), (w2, b2) = params
        h = m.np.tanh(x @ w1 + b1)
        return m.np.mean((h @ w2 + b2 - y) ** 2)

    return f


def softmax_cross_entropy(m: Any) -> Callable[..., Any]:
    def f(logits: Any, labels: Any) -> Any:
        z = logits - m.lax.stop_gradient(m.np.max(logits, axis=-1, keepdims=True))
        logp = z - m.np.log(m.np.sum(m.np.exp(z), axis=-1, keepdims=True))
        return -m.np.mean(m.np.sum(labels * logp, axis=-1))

    return f


def layer_norm(m: Any) -> Callable[..., Any]:
    def f(x: Any, g: Any, b: Any) -> Any:
        mu = m.np.mean(x, axis=-1, keepdims=True)
        var = m.np.mean((x - mu) ** 2, axis=-1, keepdims=True)
        y = (x - mu) / m.np.sqrt(var + 1e-5) * g + b
        return m.np.sum(y * m.np.sin(y))

    return f


def attention(m: Any) -> Callable[..., Any]:
    def f(q: Any, k: Any, v: Any) -> Any:
        s = q @ m.np.transpose(k) / np.float32(np.sqrt(8.0))
        s = s - m.np.max(s, axis=-1, keepdims=True)
        p = m.np.exp(s)
        p = p / m.np.sum(p, axis=-1, keepdims=True)
        return m.np.sum((p @ v) ** 2)

    return f


def rnn_scan(m: Any) -> Callable[..., Any]:
    def f(params: Any, xs: Any, h0: Any) -> Any:
        w, u, b = params

        def step(h: Any, x: Any) -> Any:
            h = m.np.tanh(h @ w + x @ u + b)
            return h, m.np.sum(h)

        h, ys = m.lax.scan(step, h0, xs)
        return m.np.sum(h) + m.np.sum(ys**2)

    return f


def scan_reverse_pytree(m: Any) -> Callable[..., Any]:
    def f(c0: Any, a: Any, b: Any) -> Any:
        def step(c: Any, ab: Any) -> Any:
            x, y = ab
            c = c * m.np.cos(x) + y
            return c, {"out": c * x}

        c, ys = m.lax.scan(step, c0, (a, b), reverse=True)
        return c + m.np.sum(ys["out"])

    return f


def fori_static(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(m.lax.fori_loop(0, 4, lambda i, c: m.np.sin(c) * x + i, x))

    return f


def fori_in_jit_indexing(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.lax.fori_loop(0, 3, lambda i, c: c * x[i] + m.np.sin(c), 1.0)

    return _jit(m, f)


def fori_pytree_carry(m: Any) -> Callable[..., Any]:
    def f(w: Any, h: Any) -> Any:
        def body(i: Any, c: Any) -> Any:
            h, acc = c
            h = m.np.tanh(w @ h)
            return h, acc + m.np.sum(h) * (i + 1)

        h, acc = m.lax.fori_loop(0, 5, body, (h, 0.0))
        return acc + m.np.sum(h)

    return f


def cond_in_jit(m: Any) -> Callable[..., Any]:
    def f(p: Any, x: Any) -> Any:
        y = m.lax.cond(p > 0, lambda x: m.np.sin(x) * x, lambda x: m.np.cos(x), x)
        return m.np.sum(y * p)

    return _jit(m, f)


def cond_two_operands(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        out = m.lax.cond(m.np.sum(x) > m.np.sum(y), lambda a, b: a * b, lambda a, b: a + m.np.exp(b), x, y)
        return m.np.sum(out)

    return _jit(m, f)


def switch_in_jit(m: Any) -> Callable[..., Any]:
    def f(i: Any, x: Any) -> Any:
        branches = [lambda x: m.np.sin(x), lambda x: m.np.cos(x) * x, lambda x: x**2]
        return m.np.sum(m.lax.switch(i, branches, x))

    return _jit(m, f)


def cond_in_scan(m: Any) -> Callable[..., Any]:
    def f(c0: Any, xs: Any) -> Any:
        def step(c: Any, x: Any) -> Any:
            c = m.lax.cond(x > 0, lambda c: c * x, lambda c: c + m.np.sin(x), c)
            return c, c

        c, ys = m.lax.scan(step, c0, xs)
        return c + m.np.sum(ys)

    return _jit(m, f)


def while_loop_fwd(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        def body(c: Any) -> Any:
            i, v = c
            return i + 1, v * 1.5 + m.np.sin(v)

        return m.lax.while_loop(lambda c: c[0] < 5, body, (0, x))[1]

    return f


def while_in_jit_fwd(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.lax.while_loop(lambda v: m.np.sum(v) < 10.0, lambda v: v * 2.0 + m.np.tanh(v), x)

    return _jit(m, f)


def cond_integer_outputs(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.lax.cond(m.np.sum(x) > 0, lambda x: (x * 2.0, m.np.argmax(x)), lambda x: (m.np.sin(x), m.np.argmin(x)), x)

    return f


def switch_pytree(m: Any) -> Callable[..., Any]:
    def f(i: Any, d: Any) -> Any:
        branches = [
            lambda d: {"u": d["a"] * d["b"], "v": d["a"]},
            lambda d: {"u": m.np.sin(d["a"]), "v": d["b"] * 3.0},
            lambda d: {"u": d["b"], "v": m.np.exp(d["a"])},
        ]
        return m.lax.switch(i, branches, d)

    return f


def scan_length_only(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        def step(c: Any, _: Any) -> Any:
            i, v = c
            return (i + 1, v * x + m.np.sin(v)), {"v": v, "i": i}

        return m.lax.scan(step, (0, x), None, length=4, reverse=True)

    return f


def while_closed_over(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        # The carry starts constant; its tangent comes only from x, closed over.
        return m.lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * x + 1.0), (0, m.np.ones(3)))[1]

    return f


def nested_control_flow(m: Any) -> Callable[..., Any]:
    def f(x: Any, xs: Any) -> Any:
        def step(c: Any, y: Any) -> Any:
            inner = m.lax.while_loop(lambda v: v[0] < 2, lambda v: (v[0] + 1, m.lax.cond(y > 0, lambda u: u * y, lambda u: u + x, v[1])), (0, c))
            return inner[1], inner[1] * x

        return m.lax.scan(step, x, xs)

    return f


def cond_on_differentiated_predicate(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.lax.cond(x > 0.5, lambda x: x**2, lambda x: -x, x) + m.lax.cond(x < 0, lambda: x * 3.0, lambda: x * 5.0)

    return f


def jitted(m: Any) -> Callable[..., Any]:
    return _jit(m, lambda x, y: m.np.sum(m.np.sin(x) * y))


def nested_jit(m: Any) -> Callable[..., Any]:
    inner = m.jit(lambda z: z * m.np.exp(z))

    def f(x: Any) -> Any:
        return m.np.sum(inner(x) + inner(x * 2.0))

    return _jit(m, f)


def elementwise_chain(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        y = m.np.exp(x) + m.np.log(x) + m.np.sin(x) * m.np.cos(x) + m.np.tanh(x)
        y = y + m.lax.logistic(x) + m.np.sqrt(x) + m.lax.rsqrt(x) + m.np.tan(x * 0.3)
        return m.np.sum(y)

    return f


def powers(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        return m.np.sum(x**3 + x**y + 2.0**y + m.np.square(y) + x**-2)

    return f


def division(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        return m.np.sum(x / y + 1.0 / x - y / 3.0)

    return f


def piecewise(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        z = m.np.maximum(x, y) + m.np.minimum(x, 0.25) + m.np.abs(x) + m.np.where(x > 0, x * y, y)
        return m.np.sum(z + m.np.clip(y, -0.5, 0.5) + m.np.sign(x) * y)

    return f


def reductions(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return (
            m.np.sum(m.np.sum(x, axis=0) ** 2)
            + m.np.mean(x)
            + m.np.sum(m.np.max(x, axis=1))
            + m.np.min(x)
            + m.np.prod(x[0])
        )

    return f


def structural(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        a = m.np.reshape(x, (3, 4))
        b = m.np.transpose(a)
        c = m.np.expand_dims(m.np.sum(b, axis=1), 0)
        d = m.np.concatenate([m.np.squeeze(c, 0), x[0]])
        e = m.np.stack([x[1], x[0] * 2.0])
        g = m.np.broadcast_to(x[2], (5, 4))
        return m.np.sum(d**2) + m.np.sum(e * m.np.sin(e)) + m.np.sum(g * m.np.arange(20.0, dtype=np.float32).reshape(5, 4))

    return f


def slicing(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(x[1:3] ** 2) + x[-1] * x[0] + m.np.sum(x[::-1] * m.np.arange(6.0, dtype=np.float32)) + m.np.sum(x[:, None] * x[None, :4])

    return f


def strided_slice(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(x[::2] * x[1::2]) + m.np.sum(x[::-2] ** 2)

    return f


IDX = np.array([3, 0, 3, 1], np.int32)


def gather(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        a = x[IDX]
        b = m.np.take_along_axis(m.np.reshape(x, (2, 3)), np.array([[2, 0], [1, 1]], np.int32), axis=1)
        return m.np.sum(a * m.np.sin(a)) + m.np.sum(b**2)

    return f


def scatter(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        a = x.at[np.array([1, 4], np.int32)].set(y)
        b = x.at[IDX].add(m.np.concatenate([y, y]))
        c = x.at[2].mul(3.0)
        return m.np.sum(a * b) + m.np.sum(c**2)

    return f


def scatter_updates(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        a = x.at[np.array([1, 9], np.int32)].add(y)  # index 9 is out of range: dropped
        b = x.at[np.array([3, 4], np.int32)].set(y * y)
        return m.np.sum(a**2) + m.np.sum(b * x)

    return f


def gather_out_of_range(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        a = x[np.array([-1, 7, 2, 2], np.int32)]  # 7 is clamped
        b = x.at[np.array([0, 8], np.int32)].get(mode="fill", fill_value=0.0)
        return m.np.sum(a**2) + m.np.sum(b * m.np.sin(b))

    return f


def dynamic_index(m: Any) -> Callable[..., Any]:
    def f(x: Any, i: Any, y: Any) -> Any:
        a = m.lax.dynamic_slice(x, (i,), (2,))
        b = m.lax.dynamic_update_slice(x, y * a, (i + 1,))
        return m.np.sum(a * b[i]) + m.np.sum(b**2)

    return _jit(m, f)


def dtype_round_trip(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        h = (x.astype(np.float16) * 2.0).astype(np.float32)
        return m.np.sum(h * x)

    return f


def float16_program(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        return m.np.sum(m.np.sin(x) * y + x * x)

    return f


def weak_scalar(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return x * 2.0 + x**2 + m.np.sin(x)

    return f


def stop_gradient(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(x * m.lax.stop_gradient(x) + m.lax.stop_gradient(m.np.sin(x)) * m.np.cos(x))

    return f


def python_branch(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        if m.np.sum(x) > 0:
            return m.np.sum(m.np.sin(x) * x)
        return m.np.sum(m.np.cos(x))

    return f


def python_loop(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        y = x
        while m.np.max(m.np.abs(y)) < 10.0:
            y = y * 1.7 + 0.1
        return m.np.sum(y)

    return f


def integer_argument(m: Any) -> Callable[..., Any]:
    def f(x: Any, n: Any, y: Any) -> Any:
        return m.np.sum(x * n + y * m.np.sin(x) ** n)

    return f


def dict_input(m: Any) -> Callable[..., Any]:
    def f(d: Any) -> Any:
        return m.np.sum(d["a"] * d["b"]) + m.np.sum(m.np.tanh(d["c"][0]) * d["c"][1])

    return f


def dict_output(m: Any) -> Callable[..., Any]:
    def f(d: Any) -> Any:
        return {"s": m.np.sum(d["a"] * d["b"]), "v": (d["a"] - d["b"], m.np.exp(d["a"]))}

    return f


def integer_output(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return x * 2.0, m.np.argmax(x), (x > 0)

    return f


C = _f32(5)


def closure_constant(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum((x - C) ** 2 * C)

    return f


def matmuls(m: Any) -> Callable[..., Any]:
    def f(v: Any, a: Any, b: Any) -> Any:
        return m.np.dot(v, v) + m.np.sum(a @ v) + m.np.sum(m.np.matmul(b, m.np.swapaxes(b, 1, 2)) ** 2)

    return f


def special(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(m.np.expm1(x) * m.np.log1p(x * x) + m.np.log1p(m.np.exp(x)))

    return f


def statistics(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(m.np.var(x, axis=0)) + m.np.std(x)

    return f


def outer_broadcast(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        return m.np.sum(m.np.sin(x[:, None] * y[None, :]) + x[:, None])

    return f


def fan_out(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        y = m.np.sin(x)
        z = y * y + y
        return m.np.sum(z * z + y)

    return f


def logsumexp(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        mx = m.np.max(x, axis=-1, keepdims=True)
        return m.np.sum(m.np.log(m.np.sum(m.np.exp(x - mx), axis=-1)) + m.np.squeeze(mx, -1))

    return f


def argmax_index(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return x[m.np.argmax(x)] * m.np.sum(x)

    return f


def vector_output(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        return m.np.tanh(x @ y) * 3.0

    return f


def lax_primitives(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        a = m.lax.mul(m.lax.add(x, y), m.lax.sub(x, y))
        b = m.lax.div(a, m.lax.exp(y)) + m.lax.neg(x)
        c = m.lax.select_n(x > y, a, b)
        d = m.lax.reduce_sum(m.lax.integer_pow(c, 2), (0,))
        return d + m.lax.reduce_max(m.lax.rev(b, (0,)), (0,))

    return f


def lax_primitives_more(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        a = m.lax.clamp(np.float32(-0.5), x, np.float32(0.5)) + m.lax.pow(m.lax.abs(y) + 1.0, x)
        b = m.lax.select_n(m.lax.convert_element_type(x > 0, np.int32) + m.lax.convert_element_type(y > 0, np.int32), x, y, a)
        c = m.lax.reduce_min(m.lax.expand_dims(b, (0,)), (1,)) + m.lax.reduce_prod(m.lax.square(x[:3]), (0,))
        d = m.lax.dot_general(m.lax.reshape(x, (1, 5)), m.lax.reshape(y, (5, 1)), (((1,), (0,)), ((), ())))
        e = m.lax.concatenate([m.lax.sin(x), m.lax.tan(y * 0.3)], 0)
        g = m.lax.rem(x, np.float32(0.7)) + m.lax.sqrt(m.lax.abs(y) + 1.0) + m.lax.log1p(m.lax.abs(x)) + m.lax.expm1(y)
        return m.np.sum(c) + m.np.sum(d) + m.np.sum(e**2) + m.np.sum(g * m.lax.sign(y))

    return f


def dynamic_slicing_eager(m: Any) -> Callable[..., Any]:
    def f(x: Any, i: Any, y: Any) -> Any:
        a = m.lax.dynamic_slice(x, (i,), (2,))
        b = m.lax.dynamic_update_slice(x, y * a, (i + 1,))
        return m.np.sum(a * b[i]) + m.np.sum(b**2)

    return f


# Zeros and ties: where derivatives have kinks and conventions.
CORNERS = np.array([0.0, 1.5, -2.0, 1.5, 0.0], np.float32)
I35 = np.arange(15, dtype=np.int32).reshape(3, 5)


def prod_with_zeros(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.prod(x) + m.np.prod(x[1:]) + m.np.sum(m.np.prod(m.np.reshape(x[1:], (2, 2)), axis=1))

    return f


def max_min_ties(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        y = m.np.reshape(m.np.concatenate([x, x[::-1]]), (2, 5))
        return m.np.max(x) + m.np.min(x[1:4]) + m.np.sum(m.np.max(y, axis=0)) + m.np.sum(m.np.min(y, axis=1))

    return f


def kinks(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(m.np.abs(x) + m.np.maximum(x, 0.0) + m.np.minimum(x, x) + m.np.clip(x, 0.0, 1.5) + m.np.where(x > 0, x, 0.0))

    return f


def integer_cuts(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(x * x.astype(np.int32) + m.np.round(x) * x + (x > 0) * x)

    return f


def rounding(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(m.np.round(x) * 2.0 + m.np.round(x * 0.5))

    return f


def floor_division(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        return m.np.sum(m.np.floor_divide(x, y) * 1e-6 + m.np.sin(y))

    return f


def array_methods(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        a = (x.reshape(-1, 1).T @ x.reshape(5, 1)).sum() + x.ravel().mean()
        return a + m.np.swapaxes(m.np.reshape(x, (1, 5)), 0, 1).sum(axis=0)[0] + m.np.repeat(x, 2).sum() + m.np.take(x, np.array([4, 0])).sum()

    return f


def integer_promotion(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum((I35 @ x) / 2) + m.np.sum(x / 2 + 3 * x)

    return f


def float_exponents(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum((m.np.abs(x) + 0.1) ** 0.5 + x**2.0 + (m.np.abs(x) + 1) ** 1.5)

    return f


def mixed_widths(m: Any) -> Callable[..., Any]:
    def f(h: Any, x: Any, b: Any, u: Any) -> Any:
        # float16 * float32 promotes; bool and uint8 operands promote to float.
        return m.np.sum(h * x + m.np.where(b, h, x) * u + b * x + h.astype(np.float32) ** 2)

    return f


def bfloat16_program(m: Any) -> Callable[..., Any]:
    def f(x: Any, w: Any) -> Any:
        return m.np.sum(m.np.tanh(x @ w) * x[:, :1])

    return f


def unused_argument(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any, z: Any) -> Any:
        return m.np.sum(m.np.sin(x) * z)

    return f


def constant_outputs(m: Any) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        return {"x": x, "c": m.np.ones(3) * 2.0, "y": m.np.zeros_like(y), "z": x * 0.0}

    return f


def custom_jvp_softplus(m: Any) -> Callable[..., Any]:
    def softplus(x: Any) -> Any:
        return m.np.log1p(m.np.exp(x))

    def softplus_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        # Deliberately not the true derivative, so the rule is seen to be used.
        return sp(x), t * m.lax.logistic(x) * 2.0

    sp = m.custom_jvp(softplus)
    sp.defjvp(softplus_jvp)

    def f(x: Any) -> Any:
        return m.np.sum(sp(x) * x)

    return f


def custom_jvp_nondiff(m: Any) -> Callable[..., Any]:
    def power(n: int, x: Any) -> Any:
        return x**n

    def power_jvp(n: int, primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return power(n, x), n * x ** (n - 1) * t + 1.0

    pw = m.custom_jvp(power, nondiff_argnums=(0,))
    pw.defjvp(power_jvp)

    def f(x: Any) -> Any:
        return m.np.sum(pw(3, x) + pw(2, m.np.sin(x)))

    return f


def custom_vjp_clip_gradient(m: Any) -> Callable[..., Any]:
    def identity(x: Any) -> Any:
        return x * 1.0

    def fwd(x: Any) -> Any:
        return x * 1.0, m.np.sign(x)

    def bwd(sign: Any, g: Any) -> Any:
        return (m.np.clip(g, -0.5, 0.5) * sign,)

    clipped = m.custom_vjp(identity)
    clipped.defvjp(fwd, bwd)

    def f(x: Any, y: Any) -> Any:
        return m.np.sum(clipped(x * 3.0) * y)

    return f


def checkpointed(m: Any) -> Callable[..., Any]:
    def block(x: Any, w: Any) -> Any:
        return m.np.tanh(m.np.sin(x @ w) @ w)

    remat_block = m.checkpoint(block)

    def f(x: Any, w: Any) -> Any:
        return m.np.sum(remat_block(remat_block(x, w), w) ** 2)

    return f


P_MLP = ((_f32(4, 8), _f32(8)), (_f32(8, 1), _f32(1)))
LABELS = np.eye(5, dtype=np.float32)[np.array([0, 3, 1, 4])]

# fmt: off
PROGRAMS: list[Program] = [
    Program("mlp", mlp, (P_MLP, _f32(16, 4), _f32(16, 1)), rtol=1e-4),
    Program("softmax cross-entropy", softmax_cross_entropy, (_f32(4, 5), LABELS)),
    Program("layer norm", layer_norm, (_f32(3, 8), _f32(8), _f32(8)), argnums=(0, 1, 2), rtol=1e-4),
    Program("attention", attention, (_f32(4, 8), _f32(4, 8), _f32(4, 8)), argnums=(0, 1, 2), rtol=1e-4),
    Program("rnn by scan", rnn_scan, ((_f32(4, 4) * 0.5, _f32(3, 4) * 0.5, _f32(4)), _f32(6, 3), _f32(4)), argnums=(0, 2), rtol=1e-4),
    Program("reverse scan over a pytree", scan_reverse_pytree, (np.float32(0.5), _f32(5), _f32(5)), argnums=(0, 1, 2)),
    Program("fori_loop static bounds", fori_static, (_f32(3),)),
    Program("fori_loop in jit, indexing by i", fori_in_jit_indexing, (_f32(3),)),
    Program("fori_loop pytree carry", fori_pytree_carry, (_f32(3, 3), _f32(3)), argnums=(0, 1), rtol=1e-4),
    Program("cond in jit, true branch", cond_in_jit, (np.float32(1.5), _f32(4)), argnums=1),
    Program("cond in jit, false branch", cond_in_jit, (np.float32(-1.5), _f32(4)), argnums=(0, 1)),
    Program("cond with two operands", cond_two_operands, (_f32(4), _f32(4)), argnums=(0, 1)),
    Program("switch in jit, branch 0", switch_in_jit, (np.int32(0), _f32(4)), argnums=1),
    Program("switch in jit, branch 1", switch_in_jit, (np.int32(1), _f32(4)), argnums=1),
    Program("switch in jit, clamped index", switch_in_jit, (np.int32(7), _f32(4)), argnums=1),
    Program("cond in scan in jit", cond_in_scan, (np.float32(0.3), _f32(6)), argnums=(0, 1)),
    Program("while_loop (forward mode)", while_loop_fwd, (_f32(3),), modes=FORWARD),
    Program("while_loop in jit (forward mode)", while_in_jit_fwd, (_f32(3, positive=True),), modes=FORWARD),
    Program("cond with integer outputs", cond_integer_outputs, (_f32(4),), modes=NO_GRAD),
    Program("switch over pytrees", switch_pytree, (np.int32(1), {"a": _f32(3), "b": _f32(3)}), modes=NO_GRAD),
    Program("scan by length, reverse, integer carry", scan_length_only, (_f32(3),), modes=NO_GRAD),
    Program("while_loop, tangent only from a closed-over value", while_closed_over, (_f32(3),), modes=FORWARD),
    Program("scan of while of cond (forward mode)", nested_control_flow, (np.float32(0.7), _f32(3)), modes=FORWARD),
    Program("cond on a differentiated predicate", cond_on_differentiated_predicate, (np.float32(0.7),)),
    Program("jit", jitted, (_f32(5), _f32(5)), argnums=(0, 1)),
    Program("nested jit", nested_jit, (_f32(5),)),
    Program("elementwise chain", elementwise_chain, (_f32(6, positive=True),), rtol=1e-4),
    Program("powers", powers, (_f32(5, positive=True), _f32(5)), argnums=(0, 1), rtol=1e-4),
    Program("division", division, (_f32(5, positive=True), _f32(5, positive=True)), argnums=(0, 1)),
    Program("max, min, abs, where, clip, sign", piecewise, (_f32(6), _f32(6)), argnums=(0, 1)),
    Program("reductions", reductions, (_f32(3, 4),), rtol=1e-4),
    Program("reshape, transpose, concatenate, stack", structural, (_f32(3, 4),)),
    Program("slicing", slicing, (_f32(6),)),
    Program("strided slices", strided_slice, (_f32(6),)),
    Program("gather", gather, (_f32(6),)),
    Program("scatter: at[].set/add/mul", scatter, (_f32(6), _f32(2)), argnums=(0, 1)),
    Program("dynamic_slice and dynamic_update_slice", dynamic_index, (_f32(6), np.int32(2), _f32(2)), argnums=(0, 2)),
    Program("convert_element_type round trip", dtype_round_trip, (_f32(5),), rtol=2e-3),
    Program("float16", float16_program, (_f32(4).astype(np.float16), _f32(4).astype(np.float16)), argnums=(0, 1), rtol=5e-3),
    Program("weak-typed Python scalar", weak_scalar, (1.5,)),
    Program("stop_gradient", stop_gradient, (_f32(5),)),
    Program("Python if on a concrete value, taken", python_branch, (np.abs(_f32(4)),), jax_eager=True),
    Program("Python if on a concrete value, not taken", python_branch, (-np.abs(_f32(4)),), jax_eager=True),
    Program("Python while on concrete values", python_loop, (_f32(3),), jax_eager=True),
    Program("integer argument, argnums elsewhere", integer_argument, (_f32(4), np.array([1, 2, 3, 0], np.int32), _f32(4)), argnums=(0, 2)),
    Program("dict input", dict_input, ({"a": _f32(3), "b": _f32(3), "c": (_f32(2), _f32(2))},)),
    Program("dict and tuple output", dict_output, ({"a": _f32(3), "b": _f32(3)},), modes=NO_GRAD),
    Program("integer and boolean outputs", integer_output, (_f32(4),), modes=NO_GRAD),
    Program("closure over a constant", closure_constant, (_f32(5),)),
    Program("matmuls, batched", matmuls, (_f32(3), _f32(4, 3), _f32(2, 3, 4)), argnums=(0, 1, 2), rtol=1e-4),
    Program("expm1, log1p", special, (_f32(5),), rtol=1e-4),
    Program("var and std", statistics, (_f32(4, 3),), rtol=1e-4),
    Program("outer broadcast", outer_broadcast, (_f32(3), _f32(4)), argnums=(0, 1)),
    Program("fan-out", fan_out, (_f32(5),)),
    Program("logsumexp", logsumexp, (_f32(3, 4),)),
    Program("argmax as an index", argmax_index, (_f32(5),)),
    Program("vector output", vector_output, (_f32(3, 4), _f32(4)), modes=NO_GRAD),
    Program("lax primitives", lax_primitives, (_f32(5), _f32(5)), argnums=(0, 1)),
    Program("more lax primitives", lax_primitives_more, (_f32(5), _f32(5)), argnums=(0, 1), rtol=1e-4),
    Program("scatter: updates differentiated, out-of-range dropped", scatter_updates, (_f32(6), _f32(2)), argnums=(0, 1)),
    Program("gather: negative, clamped and filled indices", gather_out_of_range, (_f32(6),)),
    Program("dynamic_slice and dynamic_update_slice, eager", dynamic_slicing_eager, (_f32(6), np.int32(2), _f32(2)), argnums=(0, 2)),
    Program("prod with zeros", prod_with_zeros, (CORNERS,)),
    Program("max and min with ties", max_min_ties, (CORNERS,)),
    Program("kinks at zero and ties", kinks, (CORNERS,)),
    Program("integer conversions cut the gradient", integer_cuts, (CORNERS,)),
    Program("array methods", array_methods, (CORNERS,)),
    Program("round, halves and large values", rounding, (np.array([-2.5, 0.5, 1.5, 0.2, 1e9, -3e8], np.float32),)),
    Program("floor_divide of large values", floor_division, (np.array([-2.5, 0.5, 1.5, 0.2, 1e9, -3e8], np.float32), np.array([1.3, -0.7, 0.3, 2.0, 3.0, 1.5], np.float32)), argnums=(0, 1)),
    Program("integer operands promoted", integer_promotion, (CORNERS,)),
    Program("float exponents", float_exponents, (CORNERS,)),
    Program("float16, float32, bool and uint8 mixed", mixed_widths, (_f32(4).astype(np.float16), _f32(4), _f32(4) > 0, np.arange(4, dtype=np.uint8)), argnums=(0, 1), rtol=2e-3),
    Program("bfloat16", bfloat16_program, (_f32(3, 4).astype(jnp.bfloat16), _f32(4, 2).astype(jnp.bfloat16)), argnums=(0, 1), rtol=3e-2),
    Program("unused arguments", unused_argument, (_f32(4), _f32(4), _f32(4)), argnums=(0, 1, 2)),
    Program("identity, constant and zero outputs", constant_outputs, (_f32(3), _f32(3)), modes=NO_GRAD),
    Program("custom_jvp", custom_jvp_softplus, (_f32(4),)),
    Program("custom_jvp with nondiff_argnums", custom_jvp_nondiff, (_f32(4),)),
    Program("checkpoint", checkpointed, (_f32(2, 3), _f32(3, 3)), argnums=(0, 1), rtol=1e-4),
    Program("custom_vjp", custom_vjp_clip_gradient, (_f32(4), _f32(4)), argnums=(0, 1), modes=frozenset({"vjp", "grad"})),
]
# fmt: on


def _params(mode: str) -> list[Any]:
    return [pytest.param(p, id=p.name) for p in PROGRAMS if mode in p.modes]


_BY_NAME = {p.name: p for p in PROGRAMS}


class Inputs(NamedTuple):
    tangents: list[Any]  # three sets of tangents, one per primal leaf
    cotangent: Any  # one cotangent per output leaf


@functools.cache
def _inputs(name: str) -> Inputs:
    prog = _BY_NAME[name]
    rng = np.random.default_rng(sum(map(ord, prog.name)))
    tangents = [jax.tree_util.tree_map(lambda x: _random_like(x, rng), prog.args) for _ in range(3)]
    f = prog.make(JX)
    out = f(*prog.args) if prog.jax_eager else jax.eval_shape(f, *prog.args)
    cotangent = jax.tree_util.tree_map(lambda x: _random_like(np.zeros(x.shape, x.dtype), rng), out)
    return Inputs(tangents, cotangent)


@functools.cache
def _reference(name: str) -> dict[str, Any]:
    """JAX's results for every mode of ``prog``, computed in one compiled function
    (JAX's op-by-op dispatch would compile each operation instead), the inputs closed
    over so that they keep their Python types (weak scalars stay weak). Programs with
    Python control flow on values run eagerly."""
    prog = _BY_NAME[name]
    inputs = _inputs(name)

    def run() -> dict[str, Any]:
        f = prog.make(JX)
        res: dict[str, Any] = {}
        if "jvp" in prog.modes:
            res["jvp"] = jax.jvp(f, prog.args, inputs.tangents[0])
        if "linearize" in prog.modes:
            out, f_jvp = jax.linearize(f, *prog.args)
            res["linearize"] = (out, [f_jvp(*t) for t in inputs.tangents])
            res["f_jvp"] = f_jvp  # a pytree of residuals: it leaves the jit
        if "vjp" in prog.modes:
            out, f_vjp = jax.vjp(f, *prog.args)
            res["vjp"] = (out, f_vjp(inputs.cotangent))
            res["f_vjp"] = f_vjp
        if "grad" in prog.modes:
            res["grad"] = jax.value_and_grad(f, argnums=prog.argnums)(*prog.args)
        return res

    return run() if prog.jax_eager else jax.jit(run)()


def test_the_suite_is_large_enough() -> None:
    assert len(PROGRAMS) >= 40
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS)


@pytest.mark.parametrize("prog", _params("jvp"))
def test_jvp(prog: Program) -> None:
    want = _reference(prog.name)["jvp"]
    got = fx.jvp(prog.make(FX), prog.args, _inputs(prog.name).tangents[0])
    _assert_same(got, want, prog.rtol)


@pytest.mark.parametrize("prog", _params("linearize"))
def test_linearize_then_several_tangents(prog: Program) -> None:
    want_out, want_tangents = _reference(prog.name)["linearize"]
    got_out, f_jvp = fx.linearize(prog.make(FX), *prog.args)
    _assert_same(got_out, want_out, prog.rtol)
    for tangents, want in zip(_inputs(prog.name).tangents, want_tangents):
        _assert_same(f_jvp(*tangents), want, prog.rtol)


@pytest.mark.parametrize("prog", _params("vjp"))
def test_vjp(prog: Program) -> None:
    want_out, want_cts = _reference(prog.name)["vjp"]
    got_out, f_vjp = fx.vjp(prog.make(FX), *prog.args)
    _assert_same(got_out, want_out, prog.rtol)
    _assert_same(f_vjp(_inputs(prog.name).cotangent), want_cts, prog.rtol)


@pytest.mark.parametrize("prog", _params("grad"))
def test_grad_and_value_and_grad(prog: Program) -> None:
    want = _reference(prog.name)["grad"]
    got = fx.value_and_grad(prog.make(FX), argnums=prog.argnums)(*prog.args)
    _assert_same(got, want, prog.rtol)
    _assert_same(fx.grad(prog.make(FX), argnums=prog.argnums)(*prog.args), want[1], prog.rtol)


def _staged_params(names: set[str] | None = None) -> list[Any]:
    return [
        pytest.param(p, id=p.name)
        for p in PROGRAMS
        if "grad" in p.modes and not p.jax_eager and (names is None or p.name in names)
    ]


# Each compiles with XLA: a sample of the programs (jit of grad of the rest is the
# same composition, covered by test_composed).
# fmt: off
COMPILED = {
    "mlp", "softmax cross-entropy", "layer norm", "attention", "rnn by scan", "fori_loop pytree carry",
    "cond in jit, false branch", "switch in jit, clamped index", "cond in scan in jit", "weak-typed Python scalar",
    "integer argument, argnums elsewhere", "dict input", "scatter: updates differentiated, out-of-range dropped",
    "gather: negative, clamped and filled indices", "bfloat16", "float16", "stop_gradient",
}
# fmt: on


def test_the_compiled_sample_names_programs() -> None:
    assert COMPILED <= {p.name for p in PROGRAMS}


@pytest.mark.parametrize("prog", _staged_params(COMPILED))
def test_jit_of_value_and_grad(prog: Program) -> None:
    want = _reference(prog.name)["grad"]
    got = fx.jit(fx.value_and_grad(prog.make(FX), argnums=prog.argnums))(*prog.args)
    _assert_same(got, want, prog.rtol)


@pytest.mark.parametrize("prog", _staged_params())
def test_gradient_jaxpr_prints_parses_and_typechecks(prog: Program) -> None:
    closed = fx.make_jaxpr(fx.grad(prog.make(FX), argnums=prog.argnums))(*prog.args)
    text = str(closed.jaxpr)
    assert str(parse_jaxpr(text)) == text
    typecheck(closed.jaxpr)


# ------------------------------------------------------- transformations composed


class Case(NamedTuple):
    name: str
    # Runs the transformations of the namespace ``m`` and returns what they give.
    run: Callable[[Any], Any]
    rtol: float = 2e-5
    atol: float = 1e-6
    # JAX's side runs eagerly (its result holds non-array leaves), not under one jit.
    jax_eager: bool = False
    # A known difference from JAX, as a strict xfail with this reason.
    differs: str = ""


X5 = _f32(5)
T5 = _f32(5)
TANGENTS = [_f32(5) for _ in range(3)]
W34 = _f32(3, 4)
V3 = _f32(3)
XS_MLP = (_f32(16, 4), _f32(16, 1))
W33 = _f32(3, 3)
RNN_ARGS = ((_f32(4, 4) * 0.5, _f32(3, 4) * 0.5, _f32(4)), _f32(6, 3), _f32(4))
RNN_TANGENT = (_f32(4, 4), _f32(3, 4), _f32(4))


def loss(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(m.np.sin(x) * x**2)

    return f


def loss3(m: Any) -> Callable[..., Any]:
    def f(a: Any, b: Any, c: Any) -> Any:
        return m.np.sum(m.np.tanh(a @ b) * c)

    return f


def with_aux(m: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.np.sum(x**2), {"mean": m.np.mean(x), "sin": m.np.sin(x)}

    return f


def _vjp_applied(m: Any, f: Callable[..., Any], ct: Any, *primals: Any, has_aux: bool = False) -> Any:
    res = m.vjp(f, *primals, has_aux=has_aux)
    return (res[0], res[1](ct), *res[2:])


def _linearize_applied(m: Any, f: Callable[..., Any], tangents: list[Any], *primals: Any) -> Any:
    out, f_jvp = m.linearize(f, *primals)
    return out, [f_jvp(t) for t in tangents]


# fmt: off
CASES: list[Case] = [
    Case("jit of grad", lambda m: m.jit(m.grad(loss(m)))(X5)),
    Case("grad of jit", lambda m: m.grad(m.jit(loss(m)))(X5)),
    Case("grad of grad of jit", lambda m: m.grad(m.grad(m.jit(lambda x: m.np.sin(x) * x**3)))(np.float32(0.7))),
    Case("jit of grad of grad", lambda m: m.jit(m.grad(m.grad(lambda x: m.np.sin(x) * x**3)))(np.float32(0.7))),
    Case("grad of grad of grad", lambda m: m.grad(m.grad(m.grad(lambda x: m.np.tanh(x) * x)))(np.float32(0.3)), rtol=1e-4),
    Case("grad with argnums (0, 2)", lambda m: m.grad(loss3(m), argnums=(0, 2))(W34, X5[:4], V3)),
    Case("grad with argnums (1,)", lambda m: m.grad(loss3(m), argnums=(1,))(W34, X5[:4], V3)),
    Case("grad with argnums (2, 0): order kept", lambda m: m.grad(loss3(m), argnums=(2, 0))(W34, X5[:4], V3)),
    Case("grad with argnums -1", lambda m: m.grad(loss3(m), argnums=-1)(W34, X5[:4], V3)),
    Case("value_and_grad with argnums tuple", lambda m: m.value_and_grad(loss3(m), argnums=(0, 1, 2))(W34, X5[:4], V3)),
    Case("grad with has_aux", lambda m: m.grad(with_aux(m), has_aux=True)(X5)),
    Case("value_and_grad with has_aux", lambda m: m.value_and_grad(with_aux(m), has_aux=True)(X5)),
    Case("vjp with has_aux", lambda m: _vjp_applied(m, lambda x: (m.np.sin(x), m.np.cos(x)), T5, X5, has_aux=True)),
    Case("jvp with has_aux", lambda m: m.jvp(lambda x: (m.np.sin(x), x * 2.0), (X5,), (T5,), has_aux=True)),
    Case("linearize with has_aux", lambda m: (lambda r: (r[0], r[1](T5), r[2]))(m.linearize(with_aux(m), X5, has_aux=True))),
    Case("vjp with an integer input: float0 cotangent", lambda m: _vjp_applied(m, lambda x, i: x * i, T5, X5, np.arange(5, dtype=np.int32))),
    Case("vjp with a boolean input", lambda m: _vjp_applied(m, lambda x, b: m.np.where(b, x, -x), T5, X5, X5 > 0)),
    Case("grad with a Python int argument elsewhere", lambda m: m.grad(lambda x, n: m.np.sum(x**n))(X5, 3)),
    Case("grad of a weak Python float stays weak", lambda m: m.grad(lambda x: x * x + 1.0)(3.0)),
    Case("value_and_grad of jit, weak scalars", lambda m: m.value_and_grad(m.jit(lambda x, y: x * y + m.np.sin(x)), argnums=(0, 1))(1.5, 2.0)),
    Case("Hessian-vector product: jvp of grad", lambda m: m.jvp(m.grad(loss(m)), (X5,), (T5,))),
    Case("Hessian-vector product of jit", lambda m: m.jit(lambda x, v: m.jvp(m.grad(loss(m)), (x,), (v,))[1])(X5, T5)),
    Case("Hessian-vector product: vjp of grad", lambda m: _vjp_applied(m, m.grad(loss(m)), T5, X5)),
    Case("grad of jvp", lambda m: m.grad(lambda x: m.np.sum(m.jvp(loss(m), (x,), (T5,))[1] * x))(X5)),
    Case("linearize of jit, several tangents", lambda m: _linearize_applied(m, m.jit(loss(m)), TANGENTS, X5)),
    Case("linearize of grad, several tangents", lambda m: _linearize_applied(m, m.grad(loss(m)), TANGENTS, X5)),
    Case("grad with respect to a dict", lambda m: m.grad(lambda d: m.np.sum(d["w"] * m.np.exp(d["b"])))({"w": X5, "b": T5})),
    Case("grad with respect to a list of tuples", lambda m: m.grad(lambda ps: sum(m.np.sum(a * b) for a, b in ps))([(X5, T5), (T5, X5)])),
    Case("grad inside scan in jit", lambda m: m.jit(lambda xs: m.lax.scan(lambda c, x: (c + m.grad(lambda y: m.np.sin(y) * y)(x), c), 0.0, xs))(X5)),
    Case("grad inside jit with static_argnums", lambda m: m.jit(lambda x, n: m.grad(lambda y: m.np.sum(y**n))(x), static_argnums=1)(X5, 3)),
    Case("nested grad: no perturbation confusion", lambda m: m.grad(lambda x: m.grad(lambda y: x * y * y)(x))(np.float32(1.5))),
    Case("nested jvp: no perturbation confusion", lambda m: m.jvp(lambda x: m.jvp(lambda y: x * y, (x,), (np.float32(1.0),))[1], (np.float32(2.0),), (np.float32(1.0),))),
    Case("grad through cond closing over a traced value", lambda m: m.grad(lambda x: m.jit(lambda p: m.lax.cond(p > 0, lambda: x * p, lambda: x - p))(x * 2.0))(np.float32(0.5))),
    Case("jvp of scan with an integer carry", lambda m: m.jvp(lambda x: m.lax.scan(lambda c, _: ((c[0] + 1, c[1] * x), None), (0, 1.0), None, length=3)[0], (np.float32(2.0),), (np.float32(1.0),))),
    Case("vjp with a float64 NumPy cotangent (x64 off)", lambda m: _vjp_applied(m, lambda x: m.np.sin(x), T5.astype(np.float64), X5)),
    Case("jvp with a float64 NumPy tangent for a weak scalar", lambda m: m.jvp(lambda x: x * 3.0, (2.0,), (np.float64(1.0),))),
    Case("grad of a constant function: weak zero", lambda m: m.grad(lambda x: 1.0)(1.0)),
    Case("grad of a function ignoring a strong argument", lambda m: m.grad(lambda x, y: m.np.sum(y * 2.0))(X5, T5)),
    Case("grad with has_aux: list pair, Python aux", lambda m: m.grad(lambda x: [m.np.sum(x * x), (1, "label")], has_aux=True)(X5), jax_eager=True),
    Case("grad of grad through scan", lambda m: m.grad(m.grad(lambda x: m.lax.scan(lambda c, y: (m.np.sin(c * y), c), x, X5)[0]))(np.float32(0.4)), rtol=1e-4),
    Case("grad of grad through cond", lambda m: m.grad(m.grad(lambda x: m.lax.cond(x > 0, lambda x: m.np.sin(x) * x, lambda x: x**3, x)))(np.float32(0.4))),
    Case("Hessian-vector product of an RNN by scan", lambda m: m.jvp(lambda p: m.grad(rnn_scan(m))(p, *RNN_ARGS[1:]), (RNN_ARGS[0],), (RNN_TANGENT,)), rtol=1e-4, atol=1e-4),
    Case("jit of grad of jit with cond", lambda m: m.jit(m.grad(m.jit(lambda x, p: m.np.sum(m.lax.cond(p, lambda: m.np.sin(x), lambda: x * x))), argnums=0))(X5, True)),
    Case("grad of scan over integer xs closing over x", lambda m: m.grad(lambda x: m.lax.scan(lambda c, i: (c + x * i, None), 0.0, np.arange(4, dtype=np.int32))[0])(np.float32(0.7))),
    Case("grad through switch closing over values", lambda m: m.grad(lambda x, y: m.lax.switch(1, [lambda: x, lambda: x * y, lambda: y], ), argnums=(0, 1))(np.float32(0.7), np.float32(1.3))),
    Case("grad of fori_loop with a pytree carry in jit", lambda m: m.jit(m.grad(fori_pytree_carry(m), argnums=(0, 1)))(W33, V3), rtol=1e-4),
    Case("vjp of jit with float and integer outputs", lambda m: _vjp_applied(m, m.jit(lambda x: (x * 2.0, m.np.argmax(x))), (T5, np.zeros((), FLOAT0)), X5)),
    Case("linearize of jit with cond, several tangents", lambda m: _linearize_applied(m, m.jit(lambda x: m.lax.cond(m.np.sum(x) > 0, m.np.sin, m.np.cos, x)), TANGENTS, X5)),
    Case(
        "grad of a weak scalar through a scan carry",
        lambda m: m.grad(lambda x: m.lax.scan(lambda c, y: (c * y, None), x, X5)[0])(0.7),
        # ferrax's scan promotes the weak carry with convert_element_type, whose transpose
        # converts the cotangent back to the weak input type; JAX's gradient is strong.
        differs="the gradient is weakly typed (value equal); JAX's is strong",
    ),
    Case("grad of a weak scalar times a strong array", lambda m: m.grad(lambda x: m.np.sum(x * X5))(0.7)),
    Case("vjp of a weak scalar into a strong output", lambda m: _vjp_applied(m, lambda x: x * X5, np.float32(1.0) * T5, 0.7)),
    Case("jvp of a weak scalar into a strong output", lambda m: m.jvp(lambda x: x * X5, (0.7,), (np.float32(1.0),))),
    Case("jit of value_and_grad of mlp", lambda m: m.jit(m.value_and_grad(mlp(m)))(P_MLP, *XS_MLP), rtol=1e-4),
]
# fmt: on


def test_the_cases_are_distinct() -> None:
    assert len({c.name for c in CASES}) == len(CASES)
    assert len(CASES) + len(PROGRAMS) >= 80


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(reason=c.differs, strict=True)] if c.differs else []) for c in CASES],
)
def test_composed(case: Case) -> None:
    # JAX's op-by-op dispatch compiles every operation; one jit compiles the case once.
    want = case.run(JX) if case.jax_eager else jax.jit(lambda: case.run(JX))()
    got = case.run(FX)
    _assert_same(got, want, case.rtol, case.atol)


# ------------------------------------------------------------- cost of reverse mode


def _chain(n: int) -> Callable[..., Any]:
    def f(a: Any, z: Any) -> Any:
        for _ in range(n):
            z = a * (z + z)
        return z

    return f


def test_gradient_jaxpr_grows_linearly() -> None:
    counts = {n: len(fx.make_jaxpr(fx.grad(_chain(n)))(1.5, 0.5).jaxpr.eqns) for n in (50, 100, 200)}
    # About 4x from 50 to 200 (6n - 3 equations: a little over 4x).
    assert counts[50] < counts[100] < counts[200] <= 4.1 * counts[50], counts
    # A constant number of equations per primal equation: the increments are equal.
    assert counts[200] - counts[100] == 2 * (counts[100] - counts[50]), counts
    # No more than JAX makes.
    for n, count in counts.items():
        assert count <= len(jax.make_jaxpr(jax.grad(_chain(n)))(1.5, 0.5).jaxpr.eqns), (n, counts)


def test_gradient_of_the_chain_is_right() -> None:
    f = _chain(50)
    _assert_same(fx.value_and_grad(f, argnums=(0, 1))(np.float32(0.51), np.float32(0.5)), jax.value_and_grad(f, argnums=(0, 1))(np.float32(0.51), np.float32(0.5)), rtol=1e-4)


# ------------------------------------------------ the gradient's jaxpr against JAX's


class Structure(NamedTuple):
    name: str
    make: Callable[[Any], Callable[..., Any]]
    args: tuple[Any, ...]
    argnums: int | tuple[int, ...] = 0
    # Why ferrax's primitive sequence differs from JAX's, when it does.
    differs: str = ""


M23 = np.ones((2, 3), np.float32)

# fmt: off
STRUCTURES: list[Structure] = [
    Structure("sin times x", lambda m: lambda x: m.np.sum(m.np.sin(x) * x), (X5,)),
    Structure("tanh", lambda m: lambda x: m.np.sum(m.np.tanh(x)), (X5,)),
    Structure("exp times log", lambda m: lambda x: m.np.sum(m.np.exp(x) * m.np.log(x)), (np.abs(X5),)),
    Structure("division", lambda m: lambda x, y: m.np.sum(x / y), (X5, T5), (0, 1)),
    Structure("sub and neg", lambda m: lambda x, y: m.np.sum(-(x - y) * y), (X5, T5), (0, 1)),
    Structure("square and cube", lambda m: lambda x: m.np.sum(x * x + x**3), (X5,)),
    Structure("mean of cos", lambda m: lambda x: m.np.mean(m.np.cos(x)), (X5,)),
    Structure("scalar chain, weak constant", lambda m: lambda x: m.np.sin(m.np.cos(x)) * x + 2.0, (1.0,)),
    Structure("dense layer", lambda m: lambda w, b: m.np.sum(m.np.tanh(M23 @ w + b)), (W34, X5[:4]), (0, 1)),
    Structure("reshape and transpose", lambda m: lambda x: m.np.sum(m.np.transpose(m.np.reshape(m.np.sin(x), (3, 2))) * M23), (_f32(6),)),
    Structure("chain of 5", lambda m: _chain(5), (1.5, 0.5), (0, 1)),
    Structure("jit", lambda m: m.jit(lambda x: m.np.sum(m.np.sin(x) * x)), (X5,)),
    Structure("cond", lambda m: lambda x: m.lax.cond(x > 0, m.np.sin, m.np.cos, x), (1.0,)),
    Structure("scan", lambda m: lambda x: m.lax.scan(lambda c, y: (c * m.np.sin(y), None), x, X5)[0], (1.0,)),
    Structure("fori_loop closing over x", lambda m: lambda x: m.lax.fori_loop(0, 3, lambda i, c: c * x, 1.0), (1.0,)),
    Structure("checkpoint", lambda m: m.checkpoint(lambda x: m.np.sin(m.np.sin(x))), (1.0,)),
    Structure("maximum", lambda m: lambda x: m.np.sum(m.np.maximum(x, 0.5)), (X5,)),
]
# fmt: on


@pytest.mark.parametrize(
    "s",
    [pytest.param(s, id=s.name, marks=[pytest.mark.xfail(reason=s.differs, strict=True)] if s.differs else []) for s in STRUCTURES],
)
def test_gradient_jaxpr_has_jax_primitive_sequence(s: Structure) -> None:
    got = [e.primitive for e in fx.make_jaxpr(fx.grad(s.make(FX), argnums=s.argnums))(*s.args).jaxpr.eqns]
    want = [e.primitive.name for e in jax.make_jaxpr(jax.grad(s.make(JX), argnums=s.argnums))(*s.args).jaxpr.eqns]
    assert got == want


# The programs whose linear maps (linearize's f_jvp and vjp's function, staged) are
# JAX's primitive for primitive. Elsewhere they differ in ways that are not errors:
# JAX's jnp wraps some functions (clip, where, var, take, indexing) in a `jit`; JAX
# transposes slices to `pad` and concatenate to `split` where ferrax writes into zeros
# with dynamic_update_slice and slices; ferrax computes some residuals (a mean's
# division, sqrt's 0.5/ans) on the other side of the known/unknown boundary.
# fmt: off
SAME_LINEAR_MAPS = [
    "attention", "rnn by scan", "reverse scan over a pytree", "fori_loop static bounds",
    "fori_loop in jit, indexing by i", "fori_loop pytree carry", "cond in jit, true branch",
    "cond in jit, false branch", "cond with two operands", "cond in scan in jit", "jit", "nested jit", "powers",
    "division", "convert_element_type round trip", "float16", "weak-typed Python scalar", "dict input",
    "closure over a constant", "matmuls, batched", "expm1, log1p", "outer broadcast", "fan-out", "vector output",
    "integer operands promoted", "float exponents", "unused arguments", "identity, constant and zero outputs",
]
# fmt: on


@pytest.mark.parametrize("name", SAME_LINEAR_MAPS)
def test_linear_maps_have_jax_primitive_sequence(name: str) -> None:
    prog, inputs = _BY_NAME[name], _inputs(name)
    ref = _reference(name)
    _, f_jvp = fx.linearize(prog.make(FX), *prog.args)
    _, f_vjp = fx.vjp(prog.make(FX), *prog.args)
    for got, want, args in ((f_jvp, ref["f_jvp"], inputs.tangents[0]), (f_vjp, ref["f_vjp"], (inputs.cotangent,))):
        got_eqns = fx.make_jaxpr(got)(*args).jaxpr.eqns
        want_eqns = jax.make_jaxpr(want)(*args).jaxpr.eqns
        assert [e.primitive for e in got_eqns] == [str(e.primitive) for e in want_eqns]


@pytest.mark.parametrize("prog", ["custom_jvp", "custom_vjp", "checkpoint"])
def test_custom_rules_and_checkpoint_stage_as_jax_primitives(prog: str) -> None:
    p = _BY_NAME[prog]
    got = [e.primitive for e in fx.make_jaxpr(p.make(FX))(*p.args).jaxpr.eqns]
    want = [str(e.primitive) for e in jax.make_jaxpr(p.make(JX))(*p.args).jaxpr.eqns]
    assert got == want
    assert {"custom_jvp_call", "custom_vjp_call", "remat2"} & set(got)


# --------------------------------------------- staged transformations: their types


def _avals(avals: Any) -> list[tuple[tuple[int, ...], str, bool]]:
    return [(tuple(a.shape), np.dtype(a.dtype).name, bool(a.weak_type)) for a in avals]


# fmt: off
STAGED: list[Case] = [
    Case("grad, argnums tuple, weak scalar", lambda m: m.make_jaxpr(m.grad(lambda x, y: m.np.sum(m.np.sin(x) * y), argnums=(0, 1)))(X5, 2.0)),
    Case("value_and_grad of a weak scalar", lambda m: m.make_jaxpr(m.value_and_grad(lambda x: x * 2.0))(2.0)),
    Case("jvp, weak primal, strong tangent", lambda m: m.make_jaxpr(lambda x, t: m.jvp(lambda x: x * 2.0, (x,), (t,)))(2.0, np.float32(1))),
    Case("vjp, weak primal", lambda m: m.make_jaxpr(lambda x, t: m.vjp(lambda x: x * 2.0, x)[1](t))(2.0, np.float32(1))),
    Case("grad of a float16 function", lambda m: m.make_jaxpr(m.grad(lambda x: m.np.sum(x * x)))(X5.astype(np.float16))),
    Case("jvp with an integer input", lambda m: m.make_jaxpr(lambda x, n: m.jvp(lambda x, n: x * n, (x, n), (x, np.zeros((), FLOAT0))))(X5, np.int32(2))),
]
# fmt: on


@pytest.mark.parametrize("case", STAGED, ids=[c.name for c in STAGED])
def test_staged_types(case: Case) -> None:
    got, want = case.run(FX), case.run(JX)
    assert _avals(got.in_avals) == _avals(want.in_avals)
    assert _avals(got.out_avals) == _avals(want.out_avals)


# --------------------------------------- linearize and vjp trace the function once


def test_linearized_and_vjp_functions_do_not_trace_again() -> None:
    calls: list[int] = []

    def f(x: Any) -> Any:
        calls.append(1)
        return loss(FX)(x)

    _, f_jvp = fx.linearize(f, X5)
    _, f_vjp = fx.vjp(f, X5)
    assert len(calls) == 2
    for t in TANGENTS:
        _assert_same(f_jvp(t), jax.linearize(loss(JX), X5)[1](t))
        _assert_same(f_vjp(np.float32(1.5)), jax.vjp(loss(JX), X5)[1](np.float32(1.5)))
    assert len(calls) == 2


# ------------------------------------------------------------------------- x64 mode

X5_64 = X5.astype(np.float64)

# fmt: off
X64_CASES: list[Case] = [
    Case("grad of a float64 function", lambda m: m.value_and_grad(lambda x: m.np.sum(m.np.tanh(x) * x**2))(X5_64)),
    Case("grad of a weak Python float is weak float64", lambda m: m.grad(lambda x: x * m.np.sin(x) + 1.0)(0.5)),
    Case("float32 stays float32", lambda m: m.value_and_grad(lambda x: m.np.sum(x * 2.0 + m.np.exp(x)))(X5)),
    Case("mixed float32 and float64", lambda m: m.grad(lambda x, y: m.np.sum(x * y), argnums=(0, 1))(X5, X5_64)),
    Case("vjp with an int64 input", lambda m: _vjp_applied(m, lambda x, n: x * n, X5_64, X5_64, np.arange(5))),
    Case("jvp of float64 in a jitted scan", lambda m: m.jvp(m.jit(lambda x: m.lax.scan(lambda c, y: (c * y, c), 1.0, x)), (X5_64,), (X5_64,))),
]
# fmt: on


@pytest.mark.parametrize("case", X64_CASES, ids=[c.name for c in X64_CASES])
def test_x64(case: Case) -> None:
    with jax.enable_x64(True), fx.enable_x64(True):
        want = case.run(JX)
        got = case.run(FX)
        _assert_same(got, want, 1e-12 if "float64" in case.name else case.rtol)
