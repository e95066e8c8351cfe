"""A corpus of jaxprs as JAX prints them, for ferrax's parser and printer.

Each program below is written once against an API namespace (`Api`: JAX's or ferrax's
`numpy`, `lax`, `jit`, `grad`, ...), so the same source traces with either library.
`python scripts/jax_corpus.py` traces every program with JAX and writes
`rust/ir/tests/jax_corpus/<name>.jaxpr`: exactly `str(jax.make_jaxpr(fn)(*args))` and a
newline. Files of that directory that it did not write are removed (its README.md
stays). `python scripts/jax_corpus.py --check` traces again in memory and exits 1,
naming the files that differ from the checked-in ones. `python scripts/jax_corpus.py
--diff NAME...` traces those programs with ferrax and prints how its text differs from
JAX's (a unified diff; nothing when they agree).

Left out, for ferrax has nothing of them: `custom_linear_solve` (so `jnp.linalg.solve`
and `inv`), complex dtypes (so `eig` and FFTs), `pmap`; and programs whose jaxprs hold
primitives ferrax lacks: `empty2` (the grad of a `cond` whose branches keep residuals,
the grad of `cholesky`) and `platform_index` (`jnp.linalg.det` and `slogdet`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = ROOT / "rust" / "ir" / "tests" / "jax_corpus"
KEEP = {"README.md"}

Fn = Callable[..., Any]
Built = tuple[Fn, tuple[Any, ...]]


class Api:
    """One library's names, as JAX spells them: `api.numpy`, `api.lax`, `api.jit`, ..."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.name: str = lib.__name__
        self.numpy = lib.numpy
        self.lax = lib.lax
        self.random = lib.random
        self.nn = lib.nn
        self.scipy = lib.scipy
        self.debug = lib.debug
        self.jit: Callable[..., Any] = lib.jit
        self.grad: Callable[..., Any] = lib.grad
        self.value_and_grad: Callable[..., Any] = lib.value_and_grad
        self.vmap: Callable[..., Any] = lib.vmap
        self.jvp: Callable[..., Any] = lib.jvp
        self.vjp: Callable[..., Any] = lib.vjp
        self.linearize: Callable[..., Any] = lib.linearize
        self.hessian: Callable[..., Any] = lib.hessian
        self.jacfwd: Callable[..., Any] = lib.jacfwd
        self.jacrev: Callable[..., Any] = lib.jacrev
        self.checkpoint: Callable[..., Any] = lib.checkpoint
        self.custom_jvp: Callable[..., Any] = lib.custom_jvp
        self.custom_vjp: Callable[..., Any] = lib.custom_vjp
        self.make_jaxpr: Callable[..., Any] = lib.make_jaxpr
        self.enable_x64: Callable[..., Any] = lib.enable_x64
        self.stop_gradient: Callable[..., Any] = lib.lax.stop_gradient


def jax_api() -> Api:
    import jax

    return Api(jax)


def ferrax_api() -> Api:
    import ferrax

    return Api(ferrax)


# name -> (builder, traced with 64-bit types)
PROGRAMS: dict[str, tuple[Callable[[Api], Built], bool]] = {}


def program(*, x64: bool = False) -> Callable[[Callable[[Api], Built]], Callable[[Api], Built]]:
    """Registers a builder under its function name (less a leading `p_`)."""

    def register(build: Callable[[Api], Built]) -> Callable[[Api], Built]:
        name = build.__name__.removeprefix("p_")
        assert name not in PROGRAMS, name
        PROGRAMS[name] = (build, x64)
        return build

    return register


@contextlib.contextmanager
def _mode(api: Api, x64: bool) -> Iterator[None]:
    if x64:
        with api.enable_x64(True):
            yield
    else:
        yield


def trace(api: Api, name: str) -> str:
    """The text `api.make_jaxpr` prints for program `name`, with a final newline."""
    build, x64 = PROGRAMS[name]
    with _mode(api, x64):
        fn, args = build(api)
        return str(api.make_jaxpr(fn)(*args)) + "\n"


def generate(api: Api | None = None) -> dict[str, str]:
    """File name -> text, for every program, traced with `api` (JAX's by default)."""
    api = api or jax_api()
    return {f"{name}.jaxpr": trace(api, name) for name in PROGRAMS}


# ---------------------------------------------------------------------------- data


def f32(*shape: int, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def i32(*shape: int, hi: int = 5, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).integers(0, hi, shape).astype(np.int32)


def _mlp_params(sizes: tuple[int, ...] = (4, 8, 3)) -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    return [(f32(a, b, seed=i), f32(b, seed=10 + i)) for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]


def _mlp(api: Api) -> Fn:
    jnp = api.numpy

    def mlp(params: Any, x: Any) -> Any:
        for w, b in params[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = params[-1]
        return x @ w + b

    return mlp


def _mse(api: Api) -> Fn:
    jnp = api.numpy
    mlp = _mlp(api)

    def loss(params: Any, x: Any, y: Any) -> Any:
        return jnp.mean((mlp(params, x) - y) ** 2)

    return loss


# ------------------------------------------------------------------ neural networks


@program()
def p_mlp_forward(api: Api) -> Built:
    return _mlp(api), (_mlp_params(), f32(5, 4))


@program()
def p_mlp_three_layers_relu(api: Api) -> Built:
    jnp, nn = api.numpy, api.nn

    def net(params: Any, x: Any) -> Any:
        for w, b in params[:-1]:
            x = nn.relu(jnp.dot(x, w) + b)
        w, b = params[-1]
        return jnp.dot(x, w) + b

    return net, (_mlp_params((6, 16, 16, 2)), f32(8, 6))


@program()
def p_mlp_loss_grad(api: Api) -> Built:
    return api.grad(_mse(api)), (_mlp_params(), f32(5, 4), f32(5, 3))


@program()
def p_mlp_value_and_grad(api: Api) -> Built:
    return api.value_and_grad(_mse(api)), (_mlp_params(), f32(5, 4), f32(5, 3))


@program()
def p_mlp_grad_wrt_inputs(api: Api) -> Built:
    return api.grad(_mse(api), argnums=1), (_mlp_params(), f32(5, 4), f32(5, 3))


@program()
def p_mlp_per_example_grads(api: Api) -> Built:
    loss = _mse(api)
    return api.vmap(api.grad(loss), in_axes=(None, 0, 0)), (_mlp_params(), f32(6, 4), f32(6, 3))


@program()
def p_mlp_vmap_batch(api: Api) -> Built:
    return api.vmap(_mlp(api), in_axes=(None, 0)), (_mlp_params(), f32(7, 4))


@program()
def p_mlp_jvp(api: Api) -> Built:
    mlp = _mlp(api)
    params = _mlp_params()

    def f(x: Any, t: Any) -> Any:
        return api.jvp(lambda z: mlp(params, z), (x,), (t,))

    return f, (f32(5, 4), f32(5, 4, seed=1))


@program()
def p_mlp_linearize(api: Api) -> Built:
    mlp = _mlp(api)

    def f(params: Any, x: Any, t: Any) -> Any:
        y, f_jvp = api.linearize(lambda z: mlp(params, z), x)
        return y, f_jvp(t)

    return f, (_mlp_params(), f32(5, 4), f32(5, 4, seed=1))


@program()
def p_mlp_vjp(api: Api) -> Built:
    mlp = _mlp(api)

    def f(params: Any, x: Any, ct: Any) -> Any:
        y, pullback = api.vjp(mlp, params, x)
        return y, pullback(ct)

    return f, (_mlp_params(), f32(5, 4), f32(5, 3))


@program()
def p_jit_train_step(api: Api) -> Built:
    loss = _mse(api)

    @api.jit
    def train_step(params: Any, x: Any, y: Any) -> Any:
        value, grads = api.value_and_grad(loss)(params, x, y)
        new = [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, grads)]
        return value, new

    return train_step, (_mlp_params(), f32(5, 4), f32(5, 3))


@program()
def p_softmax_cross_entropy(api: Api) -> Built:
    jnp, nn = api.numpy, api.nn

    def loss(logits: Any, labels: Any) -> Any:
        logp = nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.sum(nn.one_hot(labels, 10) * logp, axis=-1))

    return loss, (f32(4, 10), i32(4, hi=10))


@program()
def p_softmax_cross_entropy_grad(api: Api) -> Built:
    jnp, nn = api.numpy, api.nn

    def loss(logits: Any, labels: Any) -> Any:
        logp = nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    return api.grad(loss), (f32(4, 10), i32(4, hi=10))


@program()
def p_logsumexp(api: Api) -> Built:
    return (lambda x: api.nn.logsumexp(x, axis=1)), (f32(3, 6),)


@program()
def p_logsumexp_grad(api: Api) -> Built:
    return api.grad(lambda x: api.nn.logsumexp(x)), (f32(6),)


@program()
def p_softmax(api: Api) -> Built:
    return (lambda x: api.nn.softmax(x, axis=-1)), (f32(2, 5),)


@program()
def p_sigmoid_binary_cross_entropy(api: Api) -> Built:
    jnp, nn = api.numpy, api.nn

    def bce(logits: Any, y: Any) -> Any:
        return -jnp.mean(y * nn.log_sigmoid(logits) + (1 - y) * nn.log_sigmoid(-logits))

    return api.value_and_grad(bce), (f32(8), (f32(8, seed=2) > 0).astype(np.float32))


@program()
def p_gelu_silu_softplus(api: Api) -> Built:
    nn = api.nn
    return (lambda x: nn.gelu(x) + nn.silu(x) + nn.softplus(x)), (f32(3, 3),)


@program()
def p_gelu_exact(api: Api) -> Built:
    return (lambda x: api.nn.gelu(x, approximate=False)), (f32(4),)


@program()
def p_elu_leaky_relu_grad(api: Api) -> Built:
    jnp, nn = api.numpy, api.nn
    return api.grad(lambda x: jnp.sum(nn.elu(x) * nn.leaky_relu(x, 0.1))), (f32(5),)


@program()
def p_layer_norm(api: Api) -> Built:
    jnp = api.numpy

    def layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.var(x, axis=-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta

    return layer_norm, (f32(4, 8), f32(8, seed=1), f32(8, seed=2))


@program()
def p_layer_norm_grad(api: Api) -> Built:
    jnp = api.numpy

    def loss(x: Any) -> Any:
        mean = jnp.mean(x, axis=-1, keepdims=True)
        centered = x - mean
        y = centered * api.lax.rsqrt(jnp.mean(centered**2, axis=-1, keepdims=True) + 1e-5)
        return jnp.sum(y**3)

    return api.grad(loss), (f32(2, 6),)


@program()
def p_self_attention(api: Api) -> Built:
    jnp, nn = api.numpy, api.nn

    def attention(q: Any, k: Any, v: Any) -> Any:
        scores = q @ k.T / math.sqrt(q.shape[-1])
        return nn.softmax(scores, axis=-1) @ v

    return attention, (f32(5, 8), f32(6, 8, seed=1), f32(6, 4, seed=2))


@program()
def p_multi_head_attention_einsum(api: Api) -> Built:
    jnp, nn = api.numpy, api.nn

    def mha(q: Any, k: Any, v: Any) -> Any:
        scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) * 0.5
        mask = jnp.tril(jnp.ones((4, 4), dtype=bool))
        scores = jnp.where(mask, scores, -1e9)
        return jnp.einsum("bhqk,bhkd->bhqd", nn.softmax(scores, axis=-1), v)

    return mha, (f32(2, 3, 4, 4), f32(2, 3, 4, 4, seed=1), f32(2, 3, 4, 4, seed=2))


@program()
def p_batched_matmul_dot_general(api: Api) -> Built:
    lax = api.lax
    return (lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))), (f32(3, 4, 5), f32(3, 5, 2))


@program()
def p_dot_general_preferred_type(api: Api) -> Built:
    lax = api.lax

    def f(a: Any, b: Any) -> Any:
        return lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=np.float32)

    return f, (i32(3, 4).astype(np.int8), i32(4, 2).astype(np.int8))


@program()
def p_conv2d_nchw(api: Api) -> Built:
    lax = api.lax

    def conv(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(x, w, (1, 1), "SAME")

    return conv, (f32(2, 3, 8, 8), f32(4, 3, 3, 3, seed=1))


@program()
def p_conv2d_nhwc_strided(api: Api) -> Built:
    lax = api.lax

    def conv(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(
            x, w, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )

    return conv, (f32(1, 9, 9, 2), f32(3, 3, 2, 5, seed=1))


@program()
def p_conv1d_grad(api: Api) -> Built:
    jnp, lax = api.numpy, api.lax

    def loss(w: Any, x: Any) -> Any:
        y = lax.conv_general_dilated(x, w, (1,), [(1, 1)])
        return jnp.sum(jnp.tanh(y))

    return api.grad(loss), (f32(2, 1, 3), f32(1, 1, 10, seed=1))


@program()
def p_max_pool(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")), (f32(1, 6, 6, 2),)


@program()
def p_avg_pool(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "SAME") / 4.0), (f32(5, 5),)


@program()
def p_max_pool_grad(api: Api) -> Built:
    jnp, lax = api.numpy, api.lax

    def loss(x: Any) -> Any:
        return jnp.sum(lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 2), "VALID"))

    return api.grad(loss), (f32(4, 4),)


@program()
def p_batch_norm_train(api: Api) -> Built:
    jnp = api.numpy

    def bn(x: Any, scale: Any, bias: Any) -> Any:
        mean = x.mean(axis=0)
        var = ((x - mean) ** 2).mean(axis=0)
        return scale * (x - mean) / jnp.sqrt(var + 1e-5) + bias, mean, var

    return bn, (f32(16, 4), f32(4, seed=1), f32(4, seed=2))


@program()
def p_embedding_lookup(api: Api) -> Built:
    return (lambda table, ids: table[ids].sum(axis=1)), (f32(10, 4), i32(3, 5, hi=10))


# ------------------------------------------------------------------ control flow


@program()
def p_cond_simple(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy
    return (lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x)), (np.bool_(True), f32(3))


@program()
def p_cond_with_consts(api: Api) -> Built:
    lax = api.lax
    w = f32(3, 3)

    def f(x: Any) -> Any:
        return lax.cond(x.sum() > 0, lambda y: y @ w, lambda y: y - 1.0, x)

    return f, (f32(3),)


@program()
def p_cond_multiple_operands(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy

    def f(a: Any, b: Any, n: Any) -> Any:
        return lax.cond(n > 2, lambda a, b: (a + b, a * 2), lambda a, b: (a - b, b), a, b)

    return f, (f32(2), f32(2, seed=1), np.int32(3))


@program()
def p_switch_three_branches(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy
    branches = [jnp.sin, jnp.cos, lambda x: x * 3.0]
    return (lambda i, x: lax.switch(i, branches, x)), (np.int32(1), f32(4))


@program()
def p_while_loop_newton_sqrt(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy

    def newton_sqrt(a: Any) -> Any:
        def cond(c: Any) -> Any:
            x, i = c
            return (jnp.abs(x * x - a) > 1e-5) & (i < 50)

        def body(c: Any) -> Any:
            x, i = c
            return 0.5 * (x + a / x), i + 1

        return lax.while_loop(cond, body, (a, 0))[0]

    return newton_sqrt, (np.float32(2.0),)


@program()
def p_fori_loop_static_bounds(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.fori_loop(0, 5, lambda i, c: c * 2.0 + i, x)), (f32(3),)


@program()
def p_fori_loop_dynamic_bounds(api: Api) -> Built:
    lax = api.lax
    return (lambda n, x: lax.fori_loop(0, n, lambda i, c: c + i.astype(np.float32), x)), (np.int32(4), f32(3))


@program()
def p_scan_cumulative_sum(api: Api) -> Built:
    lax = api.lax

    def f(xs: Any) -> Any:
        return lax.scan(lambda c, x: (c + x, c), 0.0, xs)

    return f, (f32(6),)


@program()
def p_scan_rnn(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy
    w_h, w_x = f32(4, 4), f32(3, 4, seed=1)

    def rnn(h0: Any, xs: Any) -> Any:
        def step(h: Any, x: Any) -> Any:
            h = jnp.tanh(h @ w_h + x @ w_x)
            return h, h.sum()

        return lax.scan(step, h0, xs)

    return rnn, (f32(4, seed=3), f32(5, 3, seed=4))


@program()
def p_scan_rnn_grad(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy

    def loss(w: Any, xs: Any) -> Any:
        def step(h: Any, x: Any) -> Any:
            h = jnp.tanh(h @ w + x)
            return h, None

        h, _ = lax.scan(step, jnp.zeros(3), xs)
        return jnp.sum(h**2)

    return api.grad(loss), (f32(3, 3), f32(4, 3, seed=1))


@program()
def p_scan_nested(api: Api) -> Built:
    lax = api.lax

    def outer(c: Any, row: Any) -> Any:
        inner, ys = lax.scan(lambda a, x: (a * x + 1.0, a), c, row)
        return inner, ys

    return (lambda c, xs: lax.scan(outer, c, xs)), (np.float32(1.0), f32(3, 4))


@program()
def p_scan_reverse(api: Api) -> Built:
    lax = api.lax
    return (lambda xs: lax.scan(lambda c, x: (c * 0.9 + x, c), 0.0, xs, reverse=True)), (f32(8),)


@program()
def p_scan_no_xs_length(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.scan(lambda c, _: (c @ c, api.numpy.trace(c)), x, None, length=3)), (f32(2, 2),)


@program()
def p_cond_inside_scan(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy

    def step(c: Any, x: Any) -> Any:
        c = lax.cond(x > 0, lambda v: v + x, lambda v: v * 0.5, c)
        return c, jnp.abs(c)

    return (lambda xs: lax.scan(step, 1.0, xs)), (f32(5),)


@program()
def p_while_inside_cond(api: Api) -> Built:
    lax = api.lax

    def halve(x: Any) -> Any:
        return lax.while_loop(lambda v: v > 1.0, lambda v: v / 2.0, x)

    return (lambda x: lax.cond(x > 10.0, halve, lambda v: v, x)), (np.float32(37.0),)


@program()
def p_scan_inside_while(api: Api) -> Built:
    lax = api.lax

    def body(c: Any) -> Any:
        i, x = c
        x, _ = lax.scan(lambda a, b: (a + b, None), x, f32(3, 2))
        return i + 1, x

    return (lambda x: lax.while_loop(lambda c: c[0] < 4, body, (0, x))), (f32(2),)


@program()
def p_cond_grad(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy

    def f(x: Any) -> Any:
        return lax.cond(x > 0, lambda v: v * 2.0, lambda v: v * 3.0 + 1.0, x)

    return api.grad(f), (np.float32(0.7),)


@program()
def p_switch_grad(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy
    branches = [lambda x: x * 2.0, jnp.negative, lambda x: x / 4.0 - 1.0]
    return api.grad(lambda x, i: lax.switch(i, branches, x)), (np.float32(0.3), np.int32(2))


@program()
def p_vmap_of_cond(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy

    def f(p: Any, x: Any) -> Any:
        return lax.cond(p, jnp.sin, jnp.cos, x)

    return api.vmap(f), (np.array([True, False, True]), f32(3))


@program()
def p_vmap_of_while(api: Api) -> Built:
    lax = api.lax

    def collatz_steps(n: Any) -> Any:
        def body(c: Any) -> Any:
            n, k = c
            return api.numpy.where(n % 2 == 0, n // 2, 3 * n + 1), k + 1

        return lax.while_loop(lambda c: c[0] > 1, body, (n, 0))[1]

    return api.vmap(collatz_steps), (np.array([6, 7, 27], np.int32),)


@program()
def p_jvp_of_fori_loop(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy

    def f(x: Any) -> Any:
        return lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) + c, x)

    return (lambda x, t: api.jvp(f, (x,), (t,))), (f32(2), f32(2, seed=1))


@program()
def p_vmap_of_scan(api: Api) -> Built:
    lax = api.lax

    def cumprod(xs: Any) -> Any:
        return lax.scan(lambda c, x: (c * x, c * x), 1.0, xs)[1]

    return api.vmap(cumprod), (f32(3, 4),)


@program()
def p_scan_euler_pendulum(api: Api) -> Built:
    lax, jnp = api.lax, api.numpy

    def euler(y0: Any, dt: Any) -> Any:
        def step(y: Any, _: Any) -> Any:
            dy = jnp.stack([y[1], -jnp.sin(y[0])])
            return y + dt * dy, y[0]

        return lax.scan(step, y0, None, length=10)

    return euler, (np.array([1.0, 0.0], np.float32), np.float32(0.1))


# ------------------------------------------------------------ custom derivatives


def _softplus_custom_jvp(api: Api) -> Fn:
    jnp = api.numpy

    @api.custom_jvp
    def softplus(x: Any) -> Any:
        return jnp.log1p(jnp.exp(x))

    def softplus_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return softplus(x), t * api.nn.sigmoid(x)

    softplus.defjvp(softplus_jvp)
    typed: Fn = softplus
    return typed


def _clip_gradient(api: Api) -> Fn:
    jnp = api.numpy

    @api.custom_vjp
    def clip_gradient(x: Any) -> Any:
        return x

    def fwd(x: Any) -> Any:
        return x, None

    def bwd(_: Any, g: Any) -> Any:
        return (jnp.clip(g, -1.0, 1.0),)

    clip_gradient.defvjp(fwd, bwd)
    typed: Fn = clip_gradient
    return typed


@program()
def p_custom_jvp_call(api: Api) -> Built:
    return _softplus_custom_jvp(api), (f32(4),)


@program()
def p_custom_jvp_grad(api: Api) -> Built:
    sp = _softplus_custom_jvp(api)
    return api.grad(lambda x: api.numpy.sum(sp(x))), (f32(4),)


@program()
def p_custom_jvp_jvp(api: Api) -> Built:
    sp = _softplus_custom_jvp(api)
    return (lambda x, t: api.jvp(sp, (x,), (t,))), (f32(4), f32(4, seed=1))


@program()
def p_custom_jvp_vmap(api: Api) -> Built:
    return api.vmap(_softplus_custom_jvp(api)), (f32(3, 2),)


@program()
def p_custom_jvp_safe_log(api: Api) -> Built:
    jnp = api.numpy

    @api.custom_jvp
    def safe_log(x: Any) -> Any:
        return jnp.log(jnp.maximum(x, 1e-12))

    def safe_log_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return safe_log(x), t / jnp.maximum(x, 1e-12)

    safe_log.defjvp(safe_log_jvp)
    return api.value_and_grad(lambda x: safe_log(x).sum()), (np.abs(f32(5)),)


@program()
def p_custom_vjp_call(api: Api) -> Built:
    return _clip_gradient(api), (f32(3),)


@program()
def p_custom_vjp_grad(api: Api) -> Built:
    clip = _clip_gradient(api)
    jnp = api.numpy
    return api.grad(lambda x: jnp.sum(clip(x) ** 3)), (f32(3),)


@program()
def p_custom_vjp_with_residuals(api: Api) -> Built:
    jnp = api.numpy

    @api.custom_vjp
    def stable_norm(x: Any) -> Any:
        return jnp.sqrt(jnp.sum(x * x))

    def fwd(x: Any) -> Any:
        n = stable_norm(x)
        return n, (x, n)

    def bwd(res: Any, g: Any) -> Any:
        x, n = res
        return (g * x / n,)

    stable_norm.defvjp(fwd, bwd)
    return api.value_and_grad(stable_norm), (f32(4),)


@program()
def p_custom_jvp_nested_in_jit_grad(api: Api) -> Built:
    jnp = api.numpy

    @api.custom_jvp
    def scaled_tanh(x: Any) -> Any:
        return jnp.tanh(x) * 2.0

    def scaled_tanh_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        y = scaled_tanh(x)
        return y, t * (2.0 - y * y / 2.0)

    scaled_tanh.defjvp(scaled_tanh_jvp)
    return api.jit(api.grad(lambda x: scaled_tanh(scaled_tanh(x)))), (np.float32(0.5),)


# --------------------------------------------------------------- checkpointing


@program()
def p_checkpoint_simple(api: Api) -> Built:
    jnp = api.numpy
    return api.checkpoint(lambda x: jnp.sin(jnp.sin(x))), (f32(3),)


@program()
def p_checkpoint_grad(api: Api) -> Built:
    jnp = api.numpy

    def block(x: Any) -> Any:
        return jnp.tanh(jnp.tanh(x) * 2.0)

    return api.grad(lambda x: jnp.sum(api.checkpoint(block)(x))), (f32(4),)


def nothing_saveable(*args: Any, **params: Any) -> bool:
    """A checkpoint policy that keeps nothing."""
    return False


@program()
def p_checkpoint_policy(api: Api) -> Built:
    jnp = api.numpy
    block = api.checkpoint(lambda x: jnp.sin(x) * jnp.cos(x), policy=nothing_saveable)
    return api.grad(lambda x: jnp.sum(block(x))), (f32(4),)


@program()
def p_checkpoint_no_prevent_cse(api: Api) -> Built:
    jnp = api.numpy
    block = api.checkpoint(lambda w, x: jnp.tanh(x @ w), prevent_cse=False)
    return api.grad(lambda w, x: jnp.sum(block(w, x))), (f32(3, 3), f32(2, 3))


@program()
def p_checkpoint_scan_layers(api: Api) -> Built:
    jnp, lax = api.numpy, api.lax

    def loss(ws: Any, x: Any) -> Any:
        def layer(h: Any, w: Any) -> Any:
            return api.checkpoint(lambda h, w: jnp.tanh(h @ w))(h, w), None

        h, _ = lax.scan(layer, x, ws)
        return jnp.sum(h)

    return api.grad(loss), (f32(3, 4, 4), f32(4))


# -------------------------------------------------------------------------- jit


@program()
def p_nested_jit(api: Api) -> Built:
    jnp = api.numpy

    @api.jit
    def inner(x: Any) -> Any:
        return jnp.exp(x) - 1.0

    @api.jit
    def outer(x: Any, y: Any) -> Any:
        return inner(x) * y

    return outer, (f32(3), f32(3, seed=1))


@program()
def p_shared_jit_called_twice(api: Api) -> Built:
    jnp = api.numpy

    @api.jit
    def dense(x: Any) -> Any:
        return jnp.tanh(x * 2.0 + 1.0)

    return (lambda x: dense(dense(x)) + dense(x)), (f32(4),)


@program()
def p_shared_jit_in_branches(api: Api) -> Built:
    jnp, lax = api.numpy, api.lax

    @api.jit
    def g(x: Any) -> Any:
        return jnp.sin(x) * x

    return (lambda x: lax.cond(x.sum() > 0, lambda y: g(y) + 1.0, lambda y: g(y) - 1.0, x) + g(x)), (f32(2),)


@program()
def p_jit_of_grad_of_jit(api: Api) -> Built:
    jnp = api.numpy

    @api.jit
    def energy(x: Any) -> Any:
        return jnp.sum(x**4 - x**2)

    return api.jit(api.grad(energy)), (f32(3),)


@program()
def p_jit_multiple_outputs(api: Api) -> Built:
    jnp = api.numpy

    @api.jit
    def stats(x: Any) -> Any:
        return {"max": jnp.max(x), "min": jnp.min(x), "mean": jnp.mean(x)}

    return stats, (f32(10),)


@program()
def p_stop_gradient(api: Api) -> Built:
    jnp = api.numpy

    def loss(x: Any) -> Any:
        target = api.stop_gradient(jnp.tanh(x))
        return jnp.sum((x - target) ** 2)

    return api.grad(loss), (f32(3),)


@program()
def p_vmap_of_jit(api: Api) -> Built:
    jnp = api.numpy

    @api.jit
    def norm(v: Any) -> Any:
        return jnp.sqrt(jnp.sum(v * v))

    return api.vmap(norm), (f32(4, 3),)


# --------------------------------------------------------------------- indexing


@program()
def p_index_static_int(api: Api) -> Built:
    return (lambda x: x[2] + x[-1]), (f32(5, 2),)


@program()
def p_index_static_slices(api: Api) -> Built:
    return (lambda x: x[1:5:2, ::-1] * 2.0), (f32(6, 3),)


@program()
def p_index_traced_int(api: Api) -> Built:
    return (lambda x, i: x[i]), (f32(5, 3), np.int32(2))


@program()
def p_index_int_array(api: Api) -> Built:
    return (lambda x, idx: x[idx]), (f32(6), i32(4, hi=6))


@program()
def p_index_newaxis_ellipsis(api: Api) -> Built:
    return (lambda x: x[..., None, 0] + x[None, :, 1:2]), (f32(3, 4),)


@program()
def p_at_set(api: Api) -> Built:
    return (lambda x, i: x.at[i].set(0.0)), (f32(5), np.int32(1))


@program()
def p_at_add_indices(api: Api) -> Built:
    return (lambda x, idx, v: x.at[idx].add(v)), (f32(6), i32(3, hi=6), f32(3, seed=1))


@program()
def p_at_mul_max_min(api: Api) -> Built:
    def f(x: Any) -> Any:
        return x.at[0].mul(3.0).at[1:3].max(0.0).at[-1].min(1.0)

    return f, (f32(5),)


@program()
def p_segment_sum_scatter(api: Api) -> Built:
    jnp = api.numpy
    return (lambda data, seg: jnp.zeros(4, np.float32).at[seg].add(data)), (f32(8), i32(8, hi=4))


@program()
def p_gather_grad(api: Api) -> Built:
    jnp = api.numpy
    return api.grad(lambda x, idx: jnp.sum(x[idx] ** 2)), (f32(6), i32(4, hi=6))


@program()
def p_dynamic_slice(api: Api) -> Built:
    lax = api.lax
    return (lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 3))), (f32(5, 3), np.int32(1))


@program()
def p_dynamic_update_slice(api: Api) -> Built:
    lax = api.lax
    return (lambda x, u, i: lax.dynamic_update_slice(x, u, (i,))), (f32(8), f32(3, seed=1), np.int32(2))


@program()
def p_take_along_axis(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x, idx: jnp.take_along_axis(x, idx, axis=1)), (f32(3, 5), i32(3, 2, hi=5))


@program()
def p_jnp_take(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x, idx: jnp.take(x, idx, axis=0)), (f32(5, 2), i32(3, hi=5))


@program()
def p_where_select(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x, y: jnp.where(x > y, x, y * 2.0)), (f32(4), f32(4, seed=1))


@program()
def p_where_nan_masking(api: Api) -> Built:
    jnp = api.numpy

    def f(x: Any) -> Any:
        safe = jnp.where(x > 0, x, 1.0)
        return jnp.where(x > 0, jnp.log(safe), 0.0)

    return api.grad(lambda x: f(x).sum()), (f32(5),)


@program()
def p_one_hot_argmax(api: Api) -> Built:
    jnp, nn = api.numpy, api.nn
    return (lambda logits: nn.one_hot(jnp.argmax(logits, axis=-1), logits.shape[-1])), (f32(3, 4),)


@program()
def p_argmax_argmin(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (jnp.argmax(x, axis=0), jnp.argmin(x, axis=1))), (f32(3, 4),)


# -------------------------------------------------------------- shape operations


@program()
def p_pad_constant(api: Api) -> Built:
    return (lambda x: api.numpy.pad(x, ((1, 2), (0, 1)))), (f32(2, 3),)


@program()
def p_pad_edge_reflect(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.pad(x, 2, mode="edge") + jnp.pad(x, 2, mode="reflect")), (f32(5),)


@program()
def p_lax_pad_interior_negative(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.pad(x, np.float32(0), [(-1, 2, 1)])), (f32(5),)


@program()
def p_concatenate_stack(api: Api) -> Built:
    jnp = api.numpy
    return (lambda a, b: (jnp.concatenate([a, b], axis=0), jnp.stack([a, b], axis=1))), (f32(2, 3), f32(2, 3, seed=1))


@program()
def p_split_and_sum(api: Api) -> Built:
    jnp = api.numpy

    def f(x: Any) -> Any:
        a, b, c = jnp.split(x, 3, axis=1)
        return a * b + c

    return f, (f32(2, 6),)


@program()
def p_reshape_transpose(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.transpose(x.reshape(2, 3, 4), (2, 0, 1)).reshape(-1, 2)), (f32(24),)


@program()
def p_expand_squeeze_broadcast(api: Api) -> Built:
    jnp = api.numpy

    def f(x: Any) -> Any:
        y = jnp.expand_dims(x, 0)
        return jnp.broadcast_to(y, (3, 1, 4)).squeeze(1)

    return f, (f32(1, 4),)


@program()
def p_tile_repeat(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (jnp.tile(x, (2, 1)), jnp.repeat(x, 2, axis=1))), (f32(2, 3),)


@program()
def p_flip_roll(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.flip(x, 0) + jnp.roll(x, 1, axis=1)), (f32(3, 4),)


@program()
def p_outer_and_meshgrid(api: Api) -> Built:
    jnp = api.numpy

    def f(a: Any, b: Any) -> Any:
        xx, yy = jnp.meshgrid(a, b)
        return jnp.outer(a, b) + xx.T * yy.T

    return f, (f32(3), f32(4, seed=1))


@program()
def p_arange_linspace_iota(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: x * jnp.arange(5) + jnp.linspace(0.0, 1.0, 5)), (f32(5),)


@program()
def p_triu_tril_eye(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.triu(x) - jnp.tril(x, -1) + jnp.eye(4)), (f32(4, 4),)


@program()
def p_unstack_lax(api: Api) -> Built:
    lax = api.lax

    def f(x: Any) -> Any:
        a, b, c = lax.unstack(x, 0)
        return a * b - c

    return f, (f32(3, 2),)


# -------------------------------------------------------------------- reductions


@program()
def p_reductions_sum_mean_var(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (jnp.sum(x, axis=0), jnp.mean(x), jnp.var(x, axis=1), jnp.std(x))), (f32(3, 5),)


@program()
def p_reductions_max_min_prod(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (jnp.max(x, axis=1), jnp.min(x), jnp.prod(x, axis=0))), (f32(3, 5),)


@program()
def p_reduce_prod_grad(api: Api) -> Built:
    jnp = api.numpy
    return api.grad(lambda x: jnp.prod(x)), (f32(4),)


@program()
def p_any_all(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (jnp.any(x > 1.0), jnp.all(x > -3.0, axis=0))), (f32(4, 2),)


@program()
def p_cumsum_cumprod(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (jnp.cumsum(x, axis=0), jnp.cumprod(x, axis=1))), (f32(3, 4),)


@program()
def p_cummax_cumlogsumexp(api: Api) -> Built:
    lax = api.lax
    return (lambda x: (lax.cummax(x, axis=0), lax.cumlogsumexp(x, axis=0, reverse=True))), (f32(6),)


@program()
def p_cumsum_grad(api: Api) -> Built:
    jnp = api.numpy
    return api.grad(lambda x: jnp.sum(jnp.cumsum(x) ** 2)), (f32(5),)


@program()
def p_sort(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.sort(x, axis=-1)), (f32(3, 5),)


@program()
def p_argsort(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.argsort(x)), (f32(6),)


@program()
def p_sort_key_val(api: Api) -> Built:
    lax = api.lax
    return (lambda k, v: lax.sort_key_val(k, v)), (f32(5), i32(5))


@program()
def p_top_k(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.top_k(x, 3)), (f32(2, 8),)


@program()
def p_linalg_norm(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (jnp.linalg.norm(x), jnp.linalg.norm(x, axis=0, ord=1))), (f32(3, 4),)


@program()
def p_mean_keepdims_normalize(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: x / jnp.sum(x, axis=1, keepdims=True)), (np.abs(f32(3, 4)),)


# ------------------------------------------------------------------------ linalg


@program()
def p_cholesky(api: Api) -> Built:
    jnp = api.numpy
    a = f32(4, 4)
    return (lambda m: jnp.linalg.cholesky(m @ m.T + 4.0 * jnp.eye(4))), (a,)


@program()
def p_qr(api: Api) -> Built:
    return (lambda m: api.numpy.linalg.qr(m)), (f32(5, 3),)


@program()
def p_triangular_solve(api: Api) -> Built:
    sl = api.scipy.linalg
    return (lambda a, b: sl.solve_triangular(a, b, lower=True)), (np.tril(f32(3, 3)) + 3 * np.eye(3, dtype=np.float32), f32(3, 2))


@program()
def p_cho_solve_gaussian_process(api: Api) -> Built:
    jnp, sl = api.numpy, api.scipy.linalg

    def gp_mean(x: Any, y: Any) -> Any:
        k = jnp.exp(-((x[:, None] - x[None, :]) ** 2)) + 0.1 * jnp.eye(x.shape[0])
        chol = jnp.linalg.cholesky(k)
        alpha = sl.solve_triangular(chol.T, sl.solve_triangular(chol, y, lower=True), lower=False)
        return k @ alpha

    return gp_mean, (f32(5), f32(5, seed=1))


@program()
def p_eigh(api: Api) -> Built:
    jnp = api.numpy
    return (lambda m: jnp.linalg.eigh(m + m.T)), (f32(4, 4),)


@program()
def p_svd(api: Api) -> Built:
    jnp = api.numpy
    return (lambda m: jnp.linalg.svd(m, full_matrices=False)), (f32(4, 3),)


@program()
def p_svd_values_only(api: Api) -> Built:
    jnp = api.numpy
    return (lambda m: jnp.linalg.svd(m, compute_uv=False)), (f32(3, 3),)


@program()
def p_lu_decomposition(api: Api) -> Built:
    return (lambda m: api.lax.linalg.lu(m)), (f32(4, 4),)


@program()
def p_matrix_power_trace(api: Api) -> Built:
    jnp = api.numpy
    return (lambda m: jnp.trace(jnp.linalg.matrix_power(m, 3))), (f32(3, 3),)


# ------------------------------------------------------------------------ random


@program()
def p_random_key_split(api: Api) -> Built:
    return (lambda k: api.random.split(k, 4)), (api.random.key(0),)


@program()
def p_random_normal(api: Api) -> Built:
    return (lambda k: api.random.normal(k, (3, 2))), (api.random.key(1),)


@program()
def p_random_uniform_range(api: Api) -> Built:
    return (lambda k: api.random.uniform(k, (4,), minval=-1.0, maxval=2.0)), (api.random.key(2),)


@program()
def p_random_bernoulli_dropout(api: Api) -> Built:
    jnp, random = api.numpy, api.random

    def dropout(key: Any, x: Any) -> Any:
        keep = random.bernoulli(key, 0.9, x.shape)
        return jnp.where(keep, x / 0.9, 0.0)

    return dropout, (random.key(3), f32(2, 5))


@program()
def p_random_categorical(api: Api) -> Built:
    return (lambda k, logits: api.random.categorical(k, logits, axis=-1)), (api.random.key(4), f32(3, 5))


@program()
def p_random_legacy_prngkey(api: Api) -> Built:
    random = api.random

    def f(seed: Any) -> Any:
        key = random.PRNGKey(seed)
        k1, k2 = random.split(key)
        return random.uniform(k1, (2,)), random.normal(k2, ())

    return f, (np.int32(7),)


@program()
def p_random_fold_in_loop(api: Api) -> Built:
    lax, random = api.lax, api.random

    def f(key: Any) -> Any:
        def body(i: Any, acc: Any) -> Any:
            return acc + random.normal(random.fold_in(key, i), (2,))

        return lax.fori_loop(0, 3, body, api.numpy.zeros(2))

    return f, (random.key(5),)


@program()
def p_random_init_mlp(api: Api) -> Built:
    random = api.random

    def init(key: Any) -> Any:
        k1, k2 = random.split(key)
        return random.normal(k1, (4, 8)) * 0.5, random.truncated_normal(k2, -2.0, 2.0, (8,))

    return init, (random.key(6),)


@program()
def p_random_vmap_keys(api: Api) -> Built:
    random = api.random
    return api.vmap(lambda k: random.uniform(k, (2,))), (random.split(random.key(8), 3),)


@program()
def p_random_key_data_wrap(api: Api) -> Built:
    random = api.random
    return (lambda k: random.wrap_key_data(random.key_data(k) ^ np.uint32(1))), (random.key(9),)


@program()
def p_random_bits_randint(api: Api) -> Built:
    random = api.random
    return (lambda k: (random.bits(k, (3,)), random.randint(k, (3,), 0, 10))), (random.key(10),)


@program()
def p_random_permutation(api: Api) -> Built:
    random = api.random
    return (lambda k, x: random.permutation(k, x)), (random.key(11), f32(5))


# ------------------------------------------------------- integers, bits and bools


@program()
def p_integer_arithmetic(api: Api) -> Built:
    return (lambda a, b: (a // b, a % b, a * b - a, -a)), (i32(4, hi=20) - 10, i32(4, hi=5, seed=1) + 1)


@program()
def p_bitwise_ops(api: Api) -> Built:
    return (lambda a, b: ((a & b) | (a ^ ~b), a << 2, b >> 1)), (i32(5, hi=100), i32(5, hi=100, seed=1))


@program()
def p_shift_logical_unsigned(api: Api) -> Built:
    lax = api.lax

    def f(x: Any) -> Any:
        return lax.shift_right_logical(x, np.uint32(3)) ^ lax.shift_left(x, np.uint32(29))

    return f, (np.arange(4, dtype=np.uint32) * np.uint32(123456789),)


@program()
def p_population_count_clz(api: Api) -> Built:
    lax = api.lax
    return (lambda x: (lax.population_count(x), lax.clz(x))), (i32(4, hi=1000),)


@program()
def p_hash_mix_uint32(api: Api) -> Built:
    lax = api.lax

    def mix(x: Any) -> Any:
        x = x ^ lax.shift_right_logical(x, np.uint32(16))
        x = x * np.uint32(0x7FEB352D)
        x = x ^ lax.shift_right_logical(x, np.uint32(15))
        x = x * np.uint32(0x846CA68B)
        return x ^ lax.shift_right_logical(x, np.uint32(16))

    return mix, (np.arange(5, dtype=np.uint32),)


@program()
def p_bool_logic(api: Api) -> Built:
    jnp = api.numpy

    def f(a: Any, b: Any) -> Any:
        return jnp.logical_and(a, b) | jnp.logical_not(a) ^ jnp.logical_or(a, ~b)

    return f, (np.array([True, False, True]), np.array([False, False, True]))


@program()
def p_comparisons_to_float(api: Api) -> Built:
    def f(x: Any, y: Any) -> Any:
        return (x < y).astype(np.float32) + (x >= y) * 2.0 + (x == y) + (x != 0)

    return f, (f32(4), f32(4, seed=1))


@program()
def p_int8_uint8_convert(api: Api) -> Built:
    jnp = api.numpy

    def quantize(x: Any) -> Any:
        q = jnp.clip(jnp.round(x * 127.0), -128, 127).astype(np.int8)
        return q, q.astype(np.uint8), q.astype(np.float32) / 127.0

    return quantize, (f32(6),)


@program()
def p_bitcast_float_bits(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.bitcast_convert_type(x, np.uint32) >> np.uint32(23)), (f32(4),)


@program()
def p_float16_bfloat16_mixed(api: Api) -> Built:
    jnp = api.numpy

    def f(x: Any) -> Any:
        h = x.astype(np.float16)
        b = x.astype(jnp.bfloat16)
        return (h * h).astype(np.float32) + (b + b).astype(np.float32)

    return f, (f32(3),)


# ------------------------------------------------------------------ 64-bit types


@program(x64=True)
def p_x64_float64_mlp(api: Api) -> Built:
    params = [(w.astype(np.float64), b.astype(np.float64)) for w, b in _mlp_params()]
    return _mlp(api), (params, f32(3, 4).astype(np.float64))


@program(x64=True)
def p_x64_float64_grad(api: Api) -> Built:
    jnp = api.numpy
    return api.grad(lambda x: jnp.sum(jnp.exp(x) * jnp.sin(x))), (np.linspace(0, 1, 4),)


@program(x64=True)
def p_x64_int64_arithmetic(api: Api) -> Built:
    return (lambda a: a * 3 + (a >> 2) - 2**40), (np.arange(4, dtype=np.int64),)


@program(x64=True)
def p_x64_uint64_xor_all_ones(api: Api) -> Built:
    return (lambda x: x ^ np.uint64(0xFFFFFFFFFFFFFFFF)), (np.arange(3, dtype=np.uint64),)


@program(x64=True)
def p_x64_uint64_large_constants(api: Api) -> Built:
    def f(x: Any) -> Any:
        x = x * np.uint64(0x9E3779B97F4A7C15)
        return (x + np.uint64(2**63 + 5)) & np.uint64(0xFFFF0000FFFF0000)

    return f, (np.arange(3, dtype=np.uint64),)


@program(x64=True)
def p_x64_cumsum_int64(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.cumsum(x) + jnp.int64(1)), (np.arange(5, dtype=np.int64),)


@program(x64=True)
def p_x64_mixed_precision(api: Api) -> Built:
    jnp = api.numpy
    return (lambda a, b: (a.astype(np.float64) + b, jnp.sum(a))), (f32(3), np.ones(3, np.float64))


@program(x64=True)
def p_x64_float64_scan(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.scan(lambda c, y: (c + y * 1e-10, c), 0.0, x)), (np.linspace(0, 1, 4),)


@program(x64=True)
def p_x64_random_normal(api: Api) -> Built:
    return (lambda k: api.random.normal(k, (3,), dtype=np.float64)), (api.random.key(0),)


# ------------------------------------------------------------------ long and short


@program()
def p_short_one_line(api: Api) -> Built:
    return (lambda x: api.numpy.sin(x)), (f32(3),)


@program()
def p_short_two_ops(api: Api) -> Built:
    return (lambda x, y: x * y + 1.0), (f32(2), f32(2, seed=1))


@program()
def p_wrapped_long_line(api: Api) -> Built:
    return (lambda x: api.numpy.expm1(x + 1.0)), (f32(1),)


@program()
def p_long_chain_several_hundred_vars(api: Api) -> Built:
    jnp = api.numpy

    def f(x: Any) -> Any:
        for i in range(200):
            x = jnp.sin(x) * float(i % 7 + 1) + x
        return x

    return f, (f32(2),)


@program()
def p_long_unrolled_polynomial(api: Api) -> Built:
    coeffs = [float(c) for c in np.linspace(-1, 1, 40)]

    def horner(x: Any) -> Any:
        acc = x * 0.0
        for c in coeffs:
            acc = acc * x + c
        return acc

    return horner, (f32(3),)


@program()
def p_many_inputs_outputs(api: Api) -> Built:
    jnp = api.numpy

    def f(*xs: Any) -> Any:
        return tuple(jnp.tanh(a) * b for a, b in zip(xs, xs[1:]))

    return f, tuple(f32(2, seed=i) for i in range(12))


@program()
def p_no_equations_identity(api: Api) -> Built:
    return (lambda x, y: (y, x)), (f32(2), i32(3))


@program()
def p_constant_output(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (x, jnp.ones(3), 2.0)), (f32(1),)


@program()
def p_closed_over_array_constvars(api: Api) -> Built:
    table = f32(4, 3)
    return (lambda x: x @ table.T + table.sum()), (f32(2, 3),)


@program()
def p_scalar_literals_mixed(api: Api) -> Built:
    return (lambda x, n: x * 2 + n * 3 - 1.5), (np.float32(1.0), np.int32(2))


# ---------------------------------------------------------- special functions


@program()
def p_expm1_log1p(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.log1p(jnp.abs(x)) + jnp.expm1(x)), (f32(4),)


@program()
def p_erf_erfc_erfinv(api: Api) -> Built:
    sp = api.scipy.special
    return (lambda x: sp.erf(x) + sp.erfc(x) + sp.erfinv(x * 0.5)), (f32(4) * 0.5,)


@program()
def p_lgamma_digamma(api: Api) -> Built:
    sp = api.scipy.special
    return (lambda x: sp.gammaln(x) + sp.digamma(x)), (np.abs(f32(4)) + 0.5,)


@program()
def p_lgamma_grad(api: Api) -> Built:
    sp = api.scipy.special
    return api.grad(lambda x: sp.gammaln(x).sum()), (np.abs(f32(3)) + 1.0,)


@program()
def p_logistic_grad(api: Api) -> Built:
    lax = api.lax
    return api.grad(lambda x: lax.logistic(x).sum()), (f32(4),)


@program()
def p_trig_hyperbolic(api: Api) -> Built:
    jnp = api.numpy

    def f(x: Any) -> Any:
        return jnp.tan(x) + jnp.arcsin(x * 0.1) + jnp.arccos(x * 0.1) + jnp.arctan(x) + jnp.cosh(x) + jnp.arcsinh(x)

    return f, (f32(3),)


@program()
def p_atan2_hypot(api: Api) -> Built:
    jnp = api.numpy
    return (lambda y, x: (jnp.arctan2(y, x), jnp.hypot(x, y))), (f32(3), f32(3, seed=1))


@program()
def p_round_floor_ceil_sign(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.round(x) + jnp.floor(x) + jnp.ceil(x) + jnp.sign(x) + jnp.trunc(x)), (f32(4) * 3,)


@program()
def p_integer_pow_and_pow(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x, p: (x**3, x**-2, jnp.power(jnp.abs(x), p), api.lax.integer_pow(x, 5))), (f32(3), np.float32(1.5))


@program()
def p_sqrt_rsqrt_cbrt(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.sqrt(x) + lax.rsqrt(x) + lax.cbrt(x)), (np.abs(f32(3)) + 0.1,)


@program()
def p_clamp_clip(api: Api) -> Built:
    jnp, lax = api.numpy, api.lax
    return (lambda x: (lax.clamp(-1.0, x, 1.0), jnp.clip(x, 0.0))), (f32(5),)


@program()
def p_select_n(api: Api) -> Built:
    lax = api.lax
    return (lambda w, a, b, c: lax.select_n(w, a, b, c)), (i32(4, hi=3), f32(4), f32(4, seed=1), f32(4, seed=2))


@program()
def p_isfinite_nan_to_num(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (jnp.isfinite(x), jnp.nan_to_num(x / (x - x)))), (f32(3),)


@program()
def p_nextafter_exp2_log2(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.nextafter(x, 0.0) + jnp.exp2(x) + jnp.log2(jnp.abs(x) + 1.0)), (f32(3),)


@program()
def p_debug_print(api: Api) -> Built:
    def f(x: Any) -> Any:
        api.debug.print("x = {}", x)
        return x * 2.0

    return f, (f32(3),)


@program()
def p_debug_print_in_loop(api: Api) -> Built:
    lax = api.lax

    def body(i: Any, c: Any) -> Any:
        api.debug.print("step {i}: {c}", i=i, c=c)
        return c + 1.0

    return (lambda x: lax.fori_loop(0, 3, body, x)), (np.float32(0.0),)


# ------------------------------------------------------------- higher order AD


@program()
def p_grad_of_grad(api: Api) -> Built:
    jnp = api.numpy
    return api.grad(api.grad(lambda x: jnp.sin(x) * x**3)), (np.float32(0.4),)


@program()
def p_hessian(api: Api) -> Built:
    jnp = api.numpy
    return api.hessian(lambda x: jnp.sum(x**3 * jnp.cos(x))), (f32(3),)


@program()
def p_jacfwd(api: Api) -> Built:
    jnp = api.numpy
    return api.jacfwd(lambda x: jnp.tanh(x) * x[0]), (f32(3),)


@program()
def p_jacrev(api: Api) -> Built:
    jnp = api.numpy
    return api.jacrev(lambda x: jnp.sin(x) @ jnp.ones((3, 2))), (f32(3),)


@program()
def p_vmap_nested_matvec(api: Api) -> Built:
    jnp = api.numpy
    dot = lambda a, b: jnp.sum(a * b)
    return api.vmap(api.vmap(dot, (0, None)), (None, 1)), (f32(4, 3), f32(3, 5))


@program()
def p_vmap_in_axes_out_axes(api: Api) -> Built:
    jnp = api.numpy
    return api.vmap(lambda x, y: jnp.outer(x, y), in_axes=(1, 0), out_axes=2), (f32(3, 4), f32(4, 2))


@program()
def p_hvp_forward_over_reverse(api: Api) -> Built:
    jnp = api.numpy

    def f(x: Any) -> Any:
        return jnp.sum(jnp.exp(x) * x)

    def hvp(x: Any, v: Any) -> Any:
        return api.jvp(api.grad(f), (x,), (v,))[1]

    return hvp, (f32(3), f32(3, seed=1))


@program()
def p_grad_has_aux(api: Api) -> Built:
    jnp = api.numpy

    def loss(w: Any, x: Any) -> Any:
        pred = x @ w
        return jnp.mean(pred**2), {"pred": pred}

    return api.grad(loss, has_aux=True), (f32(3), f32(4, 3))


@program()
def p_grad_argnums_zero(api: Api) -> Built:
    jnp = api.numpy
    return api.grad(lambda x, n: jnp.sum(x ** 2) * n, argnums=0), (f32(3), np.float32(2.0))


@program()
def p_transpose_linear_function(api: Api) -> Built:
    jnp = api.numpy

    def f(x: Any, ct: Any) -> Any:
        _, pullback = api.vjp(lambda v: jnp.cumsum(v[::-1]) * 2.0 + v.sum(), x)
        return pullback(ct)

    return f, (f32(4), f32(4, seed=1))


# ------------------------------------------------------------------- misc numpy


@program()
def p_diff_convolve(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: (jnp.diff(x), jnp.convolve(x, jnp.array([1.0, -1.0], np.float32)))), (f32(6),)


@program()
def p_clip_by_global_norm(api: Api) -> Built:
    jnp = api.numpy

    def clip(grads: Any) -> Any:
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in grads))
        scale = jnp.minimum(1.0, 1.0 / (norm + 1e-6))
        return [g * scale for g in grads]

    return clip, ([f32(3, 2), f32(2, seed=1), f32(4, seed=2)],)


@program()
def p_adam_update(api: Api) -> Built:
    jnp = api.numpy

    def adam(p: Any, g: Any, m: Any, v: Any, t: Any) -> Any:
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        mhat = m / (1 - 0.9**t)
        vhat = v / (1 - 0.999**t)
        return p - 1e-3 * mhat / (jnp.sqrt(vhat) + 1e-8), m, v

    return adam, (f32(4), f32(4, seed=1), f32(4, seed=2), np.abs(f32(4, seed=3)), np.float32(3.0))


@program()
def p_pairwise_distances(api: Api) -> Built:
    jnp = api.numpy

    def dists(a: Any, b: Any) -> Any:
        sq = jnp.sum(a**2, 1)[:, None] + jnp.sum(b**2, 1)[None, :] - 2 * a @ b.T
        return jnp.sqrt(jnp.maximum(sq, 0.0))

    return dists, (f32(4, 3), f32(5, 3, seed=1))


@program()
def p_kmeans_assign(api: Api) -> Built:
    jnp = api.numpy

    def assign(points: Any, centers: Any) -> Any:
        d = jnp.sum((points[:, None, :] - centers[None, :, :]) ** 2, axis=-1)
        labels = jnp.argmin(d, axis=1)
        onehot = api.nn.one_hot(labels, centers.shape[0])
        return onehot.T @ points / jnp.maximum(onehot.sum(0)[:, None], 1.0)

    return assign, (f32(10, 2), f32(3, 2, seed=1))


@program()
def p_histogram_bincount(api: Api) -> Built:
    jnp = api.numpy
    return (lambda x: jnp.bincount(x, length=5)), (i32(10, hi=5),)


@program()
def p_digitize_by_comparison(api: Api) -> Built:
    jnp = api.numpy
    edges = np.array([0.0, 0.5, 1.0], np.float32)
    return (lambda x: jnp.sum(x[:, None] > edges[None, :], axis=1)), (f32(5),)


@program()
def p_reduce_precision(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10)), (f32(3),)


@program()
def p_optimization_barrier(api: Api) -> Built:
    lax = api.lax
    return (lambda x, y: lax.optimization_barrier((x * 2.0, y))), (f32(2), i32(2))


@program()
def p_broadcasted_iota_mask(api: Api) -> Built:
    lax = api.lax

    def causal(x: Any) -> Any:
        r = lax.broadcasted_iota(np.int32, x.shape, 0)
        c = lax.broadcasted_iota(np.int32, x.shape, 1)
        return lax.select_n(r >= c, lax.full_like(x, -np.inf), x)

    return causal, (f32(3, 3),)


@program()
def p_rev_and_slice(api: Api) -> Built:
    lax = api.lax
    return (lambda x: lax.rev(lax.slice(x, (1, 0), (3, 4), (1, 2)), (0,))), (f32(4, 4),)


@program()
def p_jit_vmap_grad_per_row(api: Api) -> Built:
    jnp = api.numpy

    def per_row(w: Any, row: Any) -> Any:
        return jnp.sum(jnp.tanh(row * w))

    return api.jit(api.vmap(api.grad(per_row), in_axes=(None, 0))), (f32(3), f32(4, 3, seed=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the checked-in files; write nothing")
    parser.add_argument("--diff", nargs="+", metavar="NAME", help="diff ferrax's trace of these programs against JAX's file")
    args = parser.parse_args(argv)
    if args.diff:
        return _diff(args.diff)
    texts = generate()
    if args.check:
        on_disk = {p.name: p.read_text() for p in CORPUS_DIR.glob("*") if p.name not in KEEP}
        bad = sorted(n for n in set(texts) | set(on_disk) if texts.get(n) != on_disk.get(n))
        for name in bad:
            print(f"differs: {name}", file=sys.stderr)
        return 1 if bad else 0
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    for p in CORPUS_DIR.iterdir():
        if p.name not in texts and p.name not in KEEP:
            p.unlink()
    for name, text in texts.items():
        path = CORPUS_DIR / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    print(f"{len(texts)} jaxprs in {CORPUS_DIR.relative_to(ROOT)}")
    return 0


def _diff(names: list[str]) -> int:
    import difflib

    api, differ = ferrax_api(), 0
    for name in names:
        want = (CORPUS_DIR / f"{name}.jaxpr").read_text()
        try:
            got = trace(api, name)
        except Exception as e:  # reported as the difference
            got = f"{type(e).__name__}: {e}\n"
        lines = difflib.unified_diff(want.splitlines(True), got.splitlines(True), f"jax/{name}", f"ferrax/{name}")
        text = "".join(lines)
        differ += bool(text)
        sys.stdout.write(text)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
