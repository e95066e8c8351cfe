"""cost_analysis: flops, transcendentals and bytes against XLA's analysis of the same
program written with jax.numpy (``jax.jit(f).lower(*args).cost_analysis()``, before
optimization), with each deliberate difference accounted for; the concrete counting of
``cond`` and ``while``; the per-primitive breakdown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import _ir, lax

RNG = np.random.default_rng(0)
X = RNG.standard_normal(128).astype(np.float32)
Y = RNG.standard_normal(128).astype(np.float32)
I = RNG.integers(1, 9, 128).astype(np.int32)  # noqa: E741
J = RNG.integers(1, 9, 128).astype(np.int32)
M = RNG.standard_normal((16, 8)).astype(np.float32)
A = RNG.standard_normal((32, 64)).astype(np.float32)
B = RNG.standard_normal((64, 16)).astype(np.float32)
PARAMS = (
    RNG.standard_normal((8, 32)).astype(np.float32),
    np.zeros(32, np.float32),
    RNG.standard_normal((32, 4)).astype(np.float32),
    np.zeros(4, np.float32),
)
BATCH = RNG.standard_normal((16, 8)).astype(np.float32)

# Elementwise primitives whose operands the lowering broadcasts explicitly.
BROADCASTING = {"add", "sub", "mul", "div", "max", "min", "pow", "atan2", "add_any", "select_n", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor"}


def xla(f: Callable[..., Any], *args: Any) -> tuple[float, float, float]:
    r = jax.jit(f).lower(*args).cost_analysis()
    assert r is not None
    return r.get("flops", 0.0), r.get("transcendentals", 0.0), r.get("bytes accessed", 0.0)


def ours(f: Callable[..., Any], *args: Any) -> tuple[float, float, float]:
    r = fx.cost_analysis(f)(*args)
    return r["flops"], r["transcendentals"], r["bytes_accessed"]


def lowering_broadcast_bytes(f: Callable[..., Any], *args: Any) -> float:
    """The bytes of the broadcasts JAX's lowering inserts for implicitly broadcast
    operands, which ferrax does not count (by hand, from the HLO JAX emits): a scalar is
    broadcast (its bytes and the output's); an array with dimensions of size 1 of ``s``
    elements is broadcast in place (2s), reshaped (2s) and broadcast (s + the output)."""
    total = 0.0
    for e in fx.make_jaxpr(f)(*args).jaxpr.eqns:
        out = e.outvars[0].aval
        n_out = int(np.prod(out.shape))
        for a in e.inputs if e.primitive in BROADCASTING else []:
            s, width = int(np.prod(a.aval.shape)), np.dtype(a.aval.dtype).itemsize
            if s != n_out:
                total += width * ((1 + n_out) if a.aval.shape == () else (5 * s + n_out))
    return total


def mlp(np_: Any) -> Callable[..., Any]:
    return lambda p, x: np_.tanh(x @ p[0] + p[1]) @ p[2] + p[3]


def loss(np_: Any) -> Callable[..., Any]:
    return lambda p, x: np_.sum(mlp(np_)(p, x) * mlp(np_)(p, x))


def jvp_of(fx_or_jax: Any, np_: Any) -> Callable[..., Any]:
    return lambda p, x: fx_or_jax.jvp(lambda x: mlp(np_)(p, x), (x,), (x,))


SUITE: list[tuple[str, Callable[[Any], Callable[..., Any]], tuple[Any, ...], int]] = [
    # (name, the program over a numpy module, arguments, its number of outputs)
    ("float elementwise", lambda n: lambda x, y: x * y + x - y / y, (X, Y), 1),
    ("int elementwise", lambda n: lambda i, j: n.maximum(i * j + i, j) ^ (i < j), (I, J), 1),
    ("transcendentals", lambda n: lambda x, y: n.exp(x) + n.log(n.abs(y)) + n.sin(x) * n.tanh(y) + n.sqrt(n.abs(x)), (X, Y), 1),
    ("scalar literal", lambda n: lambda x: n.cos(x) * 1.5 - 2.0, (X,), 1),
    ("reductions", lambda n: lambda m: (n.sum(m, axis=0), n.max(m, axis=1), n.sum(m)), (M,), 3),
    ("dot", lambda n: lambda a, b: a @ b, (A, B), 1),
    ("reshape/transpose", lambda n: lambda m: (m.T.reshape(4, 32) * m.reshape(4, 32)).T, (M,), 1),
    ("mlp", mlp, (PARAMS, BATCH), 1),
    # ferrax's batching of the biases' broadcast_in_dim adds a reshape of f32[1,32] and
    # one of f32[1,4] to the jaxpr (JAX broadcasts to rank 3 at once): 2 x 128 + 2 x 16
    # bytes; counted apart below.
    ("mlp vmap", lambda n: (fx if n is fnp else jax).vmap(mlp(n), in_axes=(None, 0)), (PARAMS, BATCH[None].repeat(3, 0)), 1),
    ("mlp jvp", lambda n: jvp_of(fx if n is fnp else jax, n), (PARAMS, BATCH), 2),
]


@pytest.mark.parametrize(("name", "program", "args", "outputs"), SUITE, ids=[s[0] for s in SUITE])
def test_matches_xla(name: str, program: Callable[[Any], Callable[..., Any]], args: tuple[Any, ...], outputs: int) -> None:
    f = program(fnp)
    flops, trans, nbytes = ours(f, *args)
    x_flops, x_trans, x_bytes = xla(program(jnp), *args)
    assert (flops, trans) == (x_flops, x_trans)
    # Documented: the lowering's broadcasts are not counted; XLA counts 8 bytes per
    # output of a program with several (the root tuple).
    tuple_bytes = 8 * outputs if outputs > 1 else 0
    extra_reshapes = 2 * 128 + 2 * 16 if name == "mlp vmap" else 0
    assert nbytes - extra_reshapes + lowering_broadcast_bytes(f, *args) + tuple_bytes == x_bytes


def test_grad_matches_xla_but_for_the_multiplications_by_one() -> None:
    flops, trans, nbytes = ours(fx.grad(loss(fnp)), PARAMS, BATCH)
    x_flops, x_trans, x_bytes = xla(jax.grad(loss(jnp)), PARAMS, BATCH)
    # JAX's lowering drops the two multiplications of f32[16,4] by the broadcast ones of
    # the output cotangent (2 x 64 flops), which ferrax counts.
    assert (flops - 2 * 64, trans) == (x_flops, x_trans)
    # Bytes: those multiplications and the broadcast of the ones (3 x 256 each, 4 + 256)
    # are XLA's to drop; the lowering's broadcasts are ferrax's to leave out, XLA sharing
    # one broadcast of 1.0 between the two `sub 1.0 tanh` (4 + 2048); 4 outputs.
    dropped = 2 * 3 * 256 + (4 + 256)
    shared = 4 + 2048
    assert nbytes - dropped + lowering_broadcast_bytes(fx.grad(loss(fnp)), PARAMS, BATCH) - shared + 8 * 4 == x_bytes


def test_the_breakdown_sums_to_the_totals() -> None:
    r = fx.cost_analysis(fx.grad(loss(fnp)))(PARAMS, BATCH)
    assert set(r["by_primitive"]) >= {"dot_general", "tanh", "mul", "reduce_sum", "transpose"}
    for k in ("flops", "transcendentals", "bytes_accessed"):
        assert sum(c[k] for c in r["by_primitive"].values()) == r[k]
    assert r["by_primitive"]["tanh"] == {"flops": 0.0, "transcendentals": 2 * 16 * 32, "bytes_accessed": 2 * 2 * 4 * 16 * 32}


def test_chain_by_hand() -> None:
    def chain(x: Any) -> Any:
        for _ in range(10):
            x = fnp.sin(x) * 1.5 + x
        return fnp.sum(x)

    # sin (a transcendental), mul, add on 128 elements per step; the sum's 127 adds.
    # Bytes: sin 2 x 512, mul and add 3 x 512 (the scalar read as f32[128]), the sum
    # 512 + 4 (its initial value) + 4.
    assert fx.cost_analysis(chain)(np.zeros(128, np.float32)) == {
        "flops": 10 * 2 * 128 + 127,
        "transcendentals": 10 * 128,
        "bytes_accessed": 10 * (1024 + 1536 + 1536) + 520,
        "while_loops": 0,
        "by_primitive": {
            "sin": {"flops": 0, "transcendentals": 1280, "bytes_accessed": 10240},
            "mul": {"flops": 1280, "transcendentals": 0, "bytes_accessed": 15360},
            "add": {"flops": 1280, "transcendentals": 0, "bytes_accessed": 15360},
            "reduce_sum": {"flops": 127, "transcendentals": 0, "bytes_accessed": 520},
        },
    }


def test_scan_counts_its_body_length_times() -> None:
    xs = np.zeros((5, 3), np.float32)
    scan = fx.cost_analysis(lambda xs: lax.scan(lambda c, x: (c + x, c * x), fnp.zeros(3), xs))(xs)
    assert (scan["flops"], scan["while_loops"]) == (5 * (3 + 3), 0)  # XLA: once


def test_concrete_while_counts_its_trips() -> None:
    x = np.zeros(4, np.float32)

    def count_to_7(x: Any) -> Any:
        return lax.while_loop(lambda v: v[0] < 7, lambda v: (v[0] + 1, v[1] * 2.0, fnp.sin(v[2])), (0, x, x))

    r = fx.cost_analysis(count_to_7)(x)
    # 7 trips of the body (an i32 add, a mul and a sin of f32[4]), 8 predicates.
    assert (r["flops"], r["transcendentals"], r["while_loops"]) == (7 * (1 + 4) + 8, 7 * 4, 0)
    assert r["by_primitive"]["lt"]["flops"] == 8
    # Traced (under jit): one iteration, and the loop is reported.
    traced: dict[str, Any] = {}

    def under_jit(x: Any) -> Any:
        traced.update(fx.cost_analysis(count_to_7)(x))
        return x

    fx.jit(under_jit)(x)
    assert (traced["flops"], traced["while_loops"]) == (1 + 4 + 1, 1)


def test_concrete_cond_counts_the_branch_taken() -> None:
    x = np.zeros(4, np.float32)

    def f(p: Any, x: Any) -> Any:
        return lax.cond(p, lambda v: fnp.sin(v) * 2.0, lambda v: v - 1.0, x)

    # The predicate's conversion to an index (1 flop) and the branch taken.
    assert ours(f, True, x)[:2] == (1 + 4, 4)
    assert ours(f, False, x)[:2] == (1 + 4, 0)
    # Inside a jit call, too; statically, the costliest branch.
    assert ours(fx.jit(f), False, x)[:2] == (1 + 4, 0)
    assert _ir.cost_analysis(fx.make_jaxpr(f)(False, x).jaxpr)["transcendentals"] == 4


def test_lowered_primitives_count_as_xla_counts_their_lowering() -> None:
    # integer_pow (square-and-multiply, a division for y < 0), logistic (neg, exp, add,
    # div), clamp, select_n, convert, floor, neg, abs, argmax of floats and of integers:
    # flops and transcendentals equal XLA's (their bytes differ: see passes::cost).
    import ferrax.nn as fnn

    def odd(n: Any, L: Any, nn: Any) -> Callable[..., Any]:
        return lambda x, i: (
            L.integer_pow(x, 3),
            L.integer_pow(x, -2),
            nn.sigmoid(x),
            L.clamp(0.0, x, 1.0),
            n.where(x > 0, x, x * x),
            x.astype(n.int32),
            n.argmax(x),
            n.argmax(i),
            n.floor(x),
            -x,
            n.abs(i),
        )

    assert ours(odd(fnp, lax, fnn), X, I)[:2] == xla(odd(jnp, jax.lax, jax.nn), X, I)[:2]


def test_static_control_flow_against_xla() -> None:
    def static(f: Callable[..., Any], *args: Any) -> tuple[float, float]:
        r = _ir.cost_analysis(fx.make_jaxpr(f)(*args).jaxpr)
        return r["flops"], r["transcendentals"]

    x, xs = np.zeros(4, np.float32), np.zeros((5, 3), np.float32)

    def count_to_7(L: Any, n: Any) -> Callable[..., Any]:
        return lambda x: L.while_loop(lambda v: v[0] < 7, lambda v: (v[0] + 1, v[1] * 2.0, n.sin(v[2])), (0, x, x))

    def branches(L: Any, n: Any) -> Callable[..., Any]:
        return lambda p, x: L.cond(p, lambda v: n.sin(v) * 2.0, lambda v: v * v * v - 1.0, x)

    def scan(L: Any, n: Any) -> Callable[..., Any]:
        return lambda xs: L.scan(lambda c, x: (c + x, c * x), n.zeros(3), xs)

    # A while loop: one iteration of predicate and body, as XLA.
    assert static(count_to_7(lax, fnp), x) == xla(count_to_7(jax.lax, jnp), x)[:2]
    # cond: the costliest branch (1 + 12 flops, none transcendental); XLA takes the
    # maximum of each count over the branches (the other branch's 4 sines).
    assert static(branches(lax, fnp), True, x) == (13, 0)
    assert xla(branches(jax.lax, jnp), True, x)[:2] == (13, 4)
    # scan: 5 times the body (3 + 3); XLA once, with the loop counter's add and compare.
    assert static(scan(lax, fnp), xs) == (5 * 6, 0)
    assert xla(scan(jax.lax, jnp), xs)[:2] == (6 + 2, 0)


def test_concrete_while_slices_through_the_body() -> None:
    # The predicate reads `i` and a captured limit (a constant of the predicate); `i`'s
    # next value reads `step`, so the slice runs both (not the sines): i = 0, 1, 3, 7,
    # ..., 127 is 7 trips. Each of the 8 predicates slices the limit and converts and
    # compares `i` (2 flops); each body adds and multiplies (2 flops).
    limit = fnp.asarray(np.full(2, 100, np.int32))

    def doubling(x: Any) -> Any:
        return lax.while_loop(lambda s: s[0] < limit[1], lambda s: (s[0] + s[1], s[1] * 2, fnp.sin(s[2])), (0, 1, x))

    r = fx.cost_analysis(doubling)(np.zeros(16, np.float32))
    assert (r["transcendentals"], r["flops"], r["while_loops"]) == (7 * 16, 7 * 2 + 8 * 2, 0)
