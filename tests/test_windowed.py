"""Windowed reductions (pooling) against JAX 0.10.2: ``lax.reduce_window`` binding
``reduce_window_sum``/``max``/``min`` or the generic ``reduce_window``, and the
primitives of max pooling's derivatives (``select_and_gather_add``,
``select_and_scatter_add``).

Cases are generated (ranks 1 to 3, strides, padding strings and pairs, negative padding,
both dilations, float32/float16/bfloat16/int dtypes) and evaluated three ways in few
compilations: ferrax eagerly (NumPy), all of them in one ``ferrax.jit``, and all of them
in one ``jax.jit``. Derivatives (jvp, grad, second order) and ``vmap`` likewise; jaxprs
are compared with JAX's text; errors with JAX's exception classes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np
import pytest

import ferrax
from ferrax import lax
from ferrax.core import parse_jaxpr
from ferrax.test_util import check_grads

jax = pytest.importorskip("jax")
jlax = pytest.importorskip("jax.lax")

NDArray = np.ndarray[Any, Any]
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint8)]


class Pool(NamedTuple):
    """One ``reduce_window`` call: ``op`` is add, max, min, mul (the generic primitive)
    or pair (two operands at once: a product and a max)."""

    op: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    window: tuple[int, ...]
    strides: tuple[int, ...]
    padding: Any
    base_dilation: tuple[int, ...]
    window_dilation: tuple[int, ...]

    def init(self, dtype: np.dtype[Any]) -> Any:
        if self.op == "add":
            return np.asarray(0, dtype)
        if self.op in ("mul", "pair"):
            return np.asarray(1, dtype)
        if dtype.kind == "f" or dtype == BF16:
            return np.asarray(-np.inf if self.op == "max" else np.inf, dtype)
        info = np.iinfo(dtype)
        return np.asarray(info.min if self.op == "max" else info.max, dtype)

    def fun(self, L: Any) -> Callable[..., Any]:
        comp = {"add": L.add, "max": L.max, "min": L.min, "mul": L.mul}.get(self.op)
        w = (self.window, self.strides, self.padding, self.base_dilation, self.window_dilation)
        if self.op == "pair":
            def pair(a: Any, b: Any) -> Any:
                return L.reduce_window(
                    (a, b), (self.init(self.dtype), self.init(np.dtype(np.int32))),
                    lambda p, q: (L.mul(p[0], q[0]), L.max(p[1], q[1])), *w,
                )
            return pair
        return lambda a: L.reduce_window(a, self.init(self.dtype), comp, *w)

    def args(self, rng: np.random.Generator) -> tuple[NDArray, ...]:
        if self.dtype.kind in "iu":
            info = np.iinfo(self.dtype)
            x = rng.integers(max(info.min, -20), min(info.max, 20), self.shape).astype(self.dtype)
        elif self.op in ("mul", "pair"):
            x = rng.uniform(0.8, 1.25, self.shape).astype(self.dtype)
        else:
            x = rng.standard_normal(self.shape).astype(self.dtype)
        if self.op == "pair":
            return x, rng.integers(-9, 9, self.shape).astype(np.int32)
        return (x,)


def pools(seed: int, count: int) -> list[Pool]:
    """Random pools: every op, rank and dtype, padding as strings or pairs (some
    negative), strides and dilations over 1 to 3."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        op = ["add", "max", "min", "mul", "pair"][k % 5]
        dtype = DTYPES[k % len(DTYPES)]
        if op == "add" and dtype.kind == "u":
            dtype = np.dtype(np.int32)
        if op in ("mul", "pair") and dtype.kind in "iu":
            dtype = np.dtype(np.float32)  # products of integers overflow: floats
        rank = 1 + k % 3
        shape = tuple(int(rng.integers(1, 7)) for _ in range(rank))
        window = tuple(int(rng.integers(1, 4)) for _ in range(rank))
        strides = tuple(int(rng.integers(1, 4)) for _ in range(rank))
        bd = tuple(int(rng.integers(1, 3)) for _ in range(rank))
        wd = tuple(int(rng.integers(1, 3)) for _ in range(rank))
        if k % 4 == 0:
            padding: Any = ["VALID", "SAME", "SAME_LOWER"][k % 3]
        else:
            padding = tuple((int(rng.integers(-1, 3)), int(rng.integers(-1, 3))) for _ in range(rank))
        out.append(Pool(op, shape, dtype, window, strides, padding, bd, wd))
    return out


def tolerance(dtype: np.dtype[Any]) -> float:
    return 2e-2 if dtype in (np.dtype(np.float16), BF16) else 1e-5


def assert_close(actual: Any, expected: Any, dtype: np.dtype[Any], what: str) -> None:
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype and a.shape == e.shape, f"{what}: {a.dtype}{a.shape} vs JAX's {e.dtype}{e.shape}"
    if a.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e, err_msg=what)
    else:
        tol = tolerance(dtype)
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol, err_msg=what)


def flat(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


# ------------------------------------------------------------------------------ values


def test_values_eager_and_jit_match_jax() -> None:
    cases = pools(0, 40)
    rng = np.random.default_rng(1)
    args = [c.args(rng) for c in cases]
    jax_out = jax.jit(lambda argss: [c.fun(jlax)(*a) for c, a in zip(cases, argss)])(args)
    jit_out = ferrax.jit(lambda argss: [c.fun(lax)(*a) for c, a in zip(cases, argss)])(args)
    for c, a, j, s in zip(cases, args, jax_out, jit_out):
        eager = c.fun(lax)(*a)
        for e, jj, ss in zip(flat(eager), flat(j), flat(s)):
            assert_close(e, jj, c.dtype, f"eager {c}")
            assert_close(ss, jj, c.dtype, f"jit {c}")


def test_monoids_bind_the_specific_primitives_as_jax() -> None:
    # lax.add/max/min with their identity bind reduce_window_sum/max/min; another initial
    # value, another computation, or a traced initial value bind the generic primitive.
    x = np.ones((4, 4), np.float32)
    calls: list[Callable[[Any], Callable[..., Any]]] = [
        lambda L: lambda a: L.reduce_window(a, 0.0, L.add, (2, 2), (1, 1), "VALID"),
        lambda L: lambda a: L.reduce_window(a, -np.inf, L.max, (2, 2), (2, 2), "SAME"),
        lambda L: lambda a: L.reduce_window(a, np.inf, L.min, (2, 2), (1, 1), ((1, 0), (0, 1))),
        lambda L: lambda a: L.reduce_window(a, 1.0, L.add, (2, 2), (1, 1), "VALID"),
        lambda L: lambda a: L.reduce_window(a, 0.0, L.max, (2, 2), (1, 1), "VALID"),
        lambda L: lambda a: L.reduce_window(a, a[0, 0], L.add, (2, 2), (1, 1), "VALID"),
        lambda L: lambda a: L.reduce_window(a, 1.0, L.mul, (2, 2), (1, 1), "VALID", (2, 1), (1, 2)),
    ]
    for call in calls:
        ours = str(ferrax.make_jaxpr(call(lax))(x))
        theirs = str(jax.make_jaxpr(call(jlax))(x))
        assert ours == theirs, f"{ours}\n{theirs}"


# ------------------------------------------------------------------------- derivatives


def pooling(kind: str, window: tuple[int, ...], strides: tuple[int, ...], padding: Any, bd: Any = None, wd: Any = None) -> Callable[[Any], Callable[..., Any]]:
    """Max, min, sum or average pooling over ``L``."""
    def f(L: Any) -> Callable[..., Any]:
        def pool(x: Any) -> Any:
            if kind == "avg":
                s = L.reduce_window(x, 0.0, L.add, window, strides, padding, bd, wd)
                return L.div(s, float(np.prod(window)))
            comp, init = {"max": (L.max, -np.inf), "min": (L.min, np.inf), "sum": (L.add, 0.0)}[kind]
            return L.reduce_window(x, init, comp, window, strides, padding, bd, wd)
        return pool
    return f


POOLS = [
    pooling("max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
    pooling("max", (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    pooling("min", (1, 3, 2, 1), (1, 1, 2, 1), ((0, 0), (1, 1), (1, 0), (0, 0)), (1, 2, 1, 1)),
    pooling("avg", (1, 2, 2, 1), (1, 2, 2, 1), "SAME"),
    pooling("sum", (1, 2, 3, 1), (1, 1, 2, 1), ((0, 0), (2, -1), (0, 1), (0, 0)), (1, 1, 2, 1), (1, 2, 1, 1)),
    pooling("max", (3,), (2,), ((1, 1),), (2,)),
    pooling("min", (2, 2), (1, 1), "SAME_LOWER"),
]


def distinct(rng: np.random.Generator, shape: tuple[int, ...]) -> NDArray:
    """Distinct values (no ties between window elements: gradients are unique)."""
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n / 2) * 0.05).reshape(shape).astype(np.float32)


def pool_inputs(rng: np.random.Generator) -> list[NDArray]:
    return [distinct(rng, (2, 6, 7, 3) if i < 5 else ((9,) if i == 5 else (5, 4))) for i in range(len(POOLS))]


def test_grads_of_pooling_match_jax_eager_and_jit() -> None:
    xs = pool_inputs(np.random.default_rng(2))

    def grads(g: Any, L: Any) -> Callable[..., Any]:
        # A weighted sum (every cotangent differs), squared to reach second order.
        return lambda xs: [g(lambda x, p=p: L.reduce_sum(L.square(p(L)(x)), tuple(range(x.ndim))))(x) for p, x in zip(POOLS, xs)]

    theirs = jax.jit(grads(jax.grad, jlax))(xs)
    staged = ferrax.jit(grads(ferrax.grad, lax))(xs)
    eager = grads(ferrax.grad, lax)(xs)
    for k, (e, s, j) in enumerate(zip(eager, staged, theirs)):
        assert_close(e, j, np.dtype(np.float32), f"eager grad {k}")
        assert_close(s, j, np.dtype(np.float32), f"jit grad {k}")


def test_jvps_of_pooling_match_jax() -> None:
    rng = np.random.default_rng(3)
    xs = pool_inputs(rng)
    ts = [np.asarray(rng.standard_normal(x.shape), np.float32) for x in xs]
    theirs = jax.jit(lambda xs, ts: [jax.jvp(p(jlax), (x,), (t,)) for p, x, t in zip(POOLS, xs, ts)])(xs, ts)
    staged = ferrax.jit(lambda xs, ts: [ferrax.jvp(p(lax), (x,), (t,)) for p, x, t in zip(POOLS, xs, ts)])(xs, ts)
    for k, (p, x, t) in enumerate(zip(POOLS, xs, ts)):
        eager = ferrax.jvp(p(lax), (x,), (t,))
        for e, s, j in zip(eager, staged[k], theirs[k]):
            assert_close(e, j, np.dtype(np.float32), f"eager jvp {k}")
            assert_close(s, j, np.dtype(np.float32), f"jit jvp {k}")


def test_pooling_check_grads_to_second_order() -> None:
    # In float64, where finite differences of second order are precise.
    rng = np.random.default_rng(4)
    with ferrax.enable_x64(True):
        for p, x in zip(POOLS, pool_inputs(rng)):
            check_grads(p(lax), (x.astype(np.float64),), order=2, modes=("fwd", "rev"))


def test_window_dilated_max_pooling_has_jvp_but_no_vjp_as_jax() -> None:
    f = pooling("max", (2, 2), (1, 1), "VALID", None, (2, 1))
    x = distinct(np.random.default_rng(5), (5, 4))
    t = np.ones_like(x)
    ours, theirs = ferrax.jvp(f(lax), (x,), (t,)), jax.jvp(f(jlax), (x,), (t,))
    for a, b in zip(ours, theirs):
        assert_close(a, b, np.dtype(np.float32), "jvp")
    with pytest.raises(NotImplementedError, match="window dilation"):
        jax.grad(lambda a: f(jlax)(a).sum())(x)
    with pytest.raises(ferrax.errors.ReverseModeError, match="window dilation") as info:
        ferrax.grad(lambda a: lax.reduce_sum(f(lax)(a), (0, 1)))(x)
    assert "test_windowed.py" in str(info.value)


def test_generic_reduce_window_forward_mode_and_no_reverse_mode() -> None:
    # The jvp is a reduce_window over (operands, tangents) whose reducer is the jvp of
    # the computation (JAX's rule); reverse mode fails as in JAX (a ValueError).
    rng = np.random.default_rng(6)
    x = rng.uniform(0.8, 1.25, (4, 5)).astype(np.float32)
    prod = Pool("mul", x.shape, np.dtype(np.float32), (2, 2), (1, 2), ((1, 0), (0, 1)), (2, 1), (1, 1))
    check_grads(prod.fun(lax), (x,), order=2, modes=("fwd",))
    t = rng.standard_normal(x.shape).astype(np.float32)
    for a, b in zip(ferrax.jvp(prod.fun(lax), (x,), (t,)), jax.jvp(prod.fun(jlax), (x,), (t,))):
        assert_close(a, b, np.dtype(np.float32), "jvp")
    with pytest.raises(ValueError):
        jax.grad(lambda a: prod.fun(jlax)(a).sum())(x)
    with pytest.raises(ValueError):
        ferrax.grad(lambda a: lax.reduce_sum(prod.fun(lax)(a), (0, 1)))(x)
    # An integer operand beside a float one: its output has no tangent, the float one's
    # is the product's (JAX's rule fails here: it reduces a float0 tangent).
    pair = Pool("pair", x.shape, np.dtype(np.float32), (2, 2), (1, 1), "SAME", (1, 1), (1, 1))
    alone = Pool("mul", x.shape, np.dtype(np.float32), (2, 2), (1, 1), "SAME", (1, 1), (1, 1))
    k = rng.integers(-9, 9, x.shape).astype(np.int32)
    (out, idx), (t_out, t_idx) = ferrax.jvp(lambda a: pair.fun(lax)(a, k), (x,), (t,))
    j_out, jt_out = jax.jvp(alone.fun(jlax), (x,), (t,))
    assert_close(out, j_out, np.dtype(np.float32), "pair")
    assert_close(idx, jax.jit(pair.fun(jlax))(x, k)[1], np.dtype(np.int32), "pair")
    assert_close(t_out, jt_out, np.dtype(np.float32), "pair tangent")
    assert t_idx.dtype == ferrax._interpreters.ad.float0


def normalized(jaxpr_text: str) -> str:
    """JAX's text read back and printed as ferrax prints a jaxpr's body (JAX prints
    unused outputs as ``_``; NumPy ints in pad configs, ``np.int64(1)``, stay)."""
    return str(parse_jaxpr(jaxpr_text))


def test_jaxprs_of_grads_and_jvps_are_jax_s() -> None:
    x = np.ones((2, 6, 7, 3), np.float32)
    for k, p in enumerate(POOLS[:5]):

        def loss(L: Any, p: Callable[[Any], Callable[..., Any]] = p) -> Callable[..., Any]:
            return lambda a: L.reduce_sum(p(L)(a), (0, 1, 2, 3))

        def jvp_of(top: Any, L: Any, p: Callable[[Any], Callable[..., Any]] = p) -> Callable[..., Any]:
            return lambda a, t: top.jvp(p(L), (a,), (t,))

        ours = str(ferrax.make_jaxpr(ferrax.grad(loss(lax)))(x).jaxpr)
        assert ours == normalized(str(jax.make_jaxpr(jax.grad(loss(jlax)))(x))), f"grad {k}"
        ours = str(ferrax.make_jaxpr(jvp_of(ferrax, lax))(x, x).jaxpr)
        assert ours == normalized(str(jax.make_jaxpr(jvp_of(jax, jlax))(x, x))), f"jvp {k}"


def test_stablehlo_of_max_pooling_grad_is_jax_s_ops() -> None:
    x = np.ones((2, 6, 6, 3), np.float32)
    def f(L: Any) -> Callable[..., Any]:
        return lambda a: L.reduce_sum(pooling("max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID")(L)(a), (0, 1, 2, 3))

    def ops(text: str) -> list[str]:
        return re.findall(r"stablehlo\.(reduce_window|select_and_scatter|pad|slice)\b", text)

    ours = ferrax.jit(ferrax.grad(f(lax))).lower(x).as_text()
    theirs = jax.jit(jax.grad(f(jlax))).lower(x).as_text()
    # JAX drops the unused forward pooling before lowering; XLA drops ferrax's.
    assert ops(theirs) == ["pad", "select_and_scatter", "slice"]
    assert ops(ours) in (ops(theirs), ["reduce_window", *ops(theirs)]), ours


# ----------------------------------------------------------------------------- vmap


def test_vmap_matches_jax_vmap() -> None:
    rng = np.random.default_rng(7)
    cases = [c for c in pools(8, 15) if c.op != "pair"]
    args = []
    axes = []
    for k, c in enumerate(cases):
        (x,) = c.args(rng)
        axis = k % (x.ndim + 1)
        lanes = [c.args(rng)[0] for _ in range(3)]
        args.append(np.stack([x, *lanes[1:]], axis=axis))
        axes.append(axis)

    def run(vmap: Any, L: Any) -> Callable[..., Any]:
        return lambda xs: [vmap(c.fun(L), in_axes=ax)(x) for c, ax, x in zip(cases, axes, xs)]

    theirs = jax.jit(run(jax.vmap, jlax))(args)
    eager = run(ferrax.vmap, lax)(args)
    for c, e, j in zip(cases, eager, theirs):
        assert_close(e, j, c.dtype, f"vmap {c}")
    # The grad of max pooling (select_and_scatter_add) batched in both operands: the
    # pooled input and the weights of its outputs.
    x = distinct(rng, (3, 4, 5))
    w = rng.standard_normal((4, 3, 3)).astype(np.float32)
    pool = pooling("max", (2, 2), (1, 2), "SAME")

    def weighted_grad(L: Any) -> Callable[..., Any]:
        top = ferrax if L is lax else jax
        return lambda a, b: top.grad(lambda y: L.reduce_sum(L.mul(pool(L)(y), b), (0, 1)))(a)

    ours = ferrax.vmap(weighted_grad(lax), in_axes=(0, 2))(x, w)
    expected = jax.vmap(weighted_grad(jlax), in_axes=(0, 2))(x, w)
    assert_close(ours, expected, np.dtype(np.float32), "vmap of grad")


# ----------------------------------------------------------------------------- helpers


def test_padtype_to_pads_and_shape_tuple_match_jax() -> None:
    rng = np.random.default_rng(9)
    for _ in range(40):
        rank = int(rng.integers(1, 4))
        shape = tuple(int(rng.integers(0, 9)) for _ in range(rank))
        window = tuple(int(rng.integers(1, 5)) for _ in range(rank))
        strides = tuple(int(rng.integers(1, 4)) for _ in range(rank))
        for mode in ("VALID", "SAME", "SAME_LOWER", "same"):
            pads = lax.padtype_to_pads(shape, window, strides, mode)
            assert [tuple(p) for p in pads] == [tuple(map(int, p)) for p in jlax.padtype_to_pads(shape, window, strides, mode)]
            bd = tuple(int(rng.integers(1, 3)) for _ in range(rank))
            wd = tuple(int(rng.integers(1, 3)) for _ in range(rank))
            ours = lax.reduce_window_shape_tuple(shape, window, strides, pads, bd, wd)
            assert ours == tuple(jlax.reduce_window_shape_tuple(shape, window, strides, pads, bd, wd))


# ----------------------------------------------------------------------------- errors


ERRORS: list[tuple[str, Callable[[Any], Callable[[], Any]]]] = [
    ("tree mismatch", lambda L: lambda: L.reduce_window((np.ones(4, np.float32),) * 2, 0.0, L.add, (2,))),
    ("output tree", lambda L: lambda: L.reduce_window(np.ones(4, np.float32), 0.0, lambda a, b: (a, b), (2,))),
    ("padding string", lambda L: lambda: L.reduce_window(np.ones(4, np.float32), 0.0, L.add, (2,), (1,), "FULL")),
    ("window rank", lambda L: lambda: L.reduce_window(np.ones((4, 4), np.float32), 0.0, L.add, (2,))),
    ("zero stride", lambda L: lambda: L.reduce_window(np.ones(4, np.float32), 0.0, L.add, (2,), (0,))),
    ("init dtype", lambda L: lambda: L.reduce_window(np.ones(4, np.float16), 1.0, L.mul, (2,))),
    ("init shape", lambda L: lambda: L.reduce_window(np.ones(4, np.float32), np.ones(2, np.float32), L.mul, (2,))),
    ("bool sum", lambda L: lambda: L.reduce_window(np.ones(4, np.bool_), False, L.add, (2,))),
    ("zero window", lambda L: lambda: L.reduce_window(np.ones(4, np.float32), -np.inf, L.max, (0,))),
    ("padding count", lambda L: lambda: L.reduce_window(np.ones((4, 4), np.float32), 0.0, L.add, (2, 2), (1, 1), ((0, 0),))),
    ("same without strides", lambda L: lambda: L.reduce_window(np.ones((4, 4), np.float32), 0.0, L.add, (2, 2), None, "SAME")),
    ("strides count", lambda L: lambda: L.reduce_window(np.ones((4, 4), np.float32), 0.0, L.add, (2, 2), (1,))),
    ("zero dilation", lambda L: lambda: L.reduce_window(np.ones((4, 4), np.float32), 1.0, L.mul, (2, 2), (1, 1), "VALID", None, (1, 0))),
]


@pytest.mark.parametrize("label, call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_jax_s(label: str, call: Callable[[Any], Callable[[], Any]]) -> None:
    with pytest.raises(Exception) as theirs:
        call(jlax)()
    with pytest.raises(type(theirs.value)) as ours:
        call(lax)()
    assert "test_windowed.py" in str(ours.value), str(ours.value)  # the user's line
    assert "Primitive" not in str(ours.value) and "_lax" not in str(ours.value)


def test_cost_analysis_counts_xla_s_flops() -> None:
    # Against XLA's count of JAX's lowering (before optimization): each window combines
    # window - 1 times (a comparison and two selects per pair for the jvp's
    # select_and_gather_add); select_and_scatter_add compares over each source
    # element's window and adds it once. Lowering only: nothing is compiled.
    x = np.ones((2, 6, 6, 3), np.float32)
    max_pool = pooling("max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    sum_pool = pooling("sum", (1, 3, 3, 1), (1, 1, 1, 1), "SAME", (1, 2, 1, 1))

    def grad_only(L: Any) -> Callable[..., Any]:
        # The pooled value unused, so JAX's lowering has only the select_and_scatter_add.
        top = ferrax if L is lax else jax
        return lambda a, c: top.vjp(max_pool(L), a)[1](c)[0]

    c = np.ones((2, 3, 3, 3), np.float32)
    for fun, args in [
        (max_pool, (x,)),
        (sum_pool, (x,)),
        (lambda L: lambda a, t: (jax if L is jlax else ferrax).jvp(max_pool(L), (a,), (t,)), (x, x)),
    ]:
        ours = ferrax.cost_analysis(fun(lax))(*args)["flops"]
        assert ours == jax.jit(fun(jlax)).lower(*args).cost_analysis()["flops"]
    ours = ferrax.cost_analysis(lambda a, c: lax.reduce_sum(grad_only(lax)(a, c), (0,)))(x, c)["flops"]
    theirs = jax.jit(grad_only(jlax)).lower(x, c).cost_analysis()["flops"]
    # ferrax's count includes the sum; the forward pooling vjp evaluates is dead code,
    # removed before counting (as JAX's lowering removes it).
    assert ours == theirs + (2 - 1) * 6 * 6 * 3


def test_rank_0_windows() -> None:
    # A scalar is one window of itself. (JAX's lowering of the grad aborts XLA's CPU
    # compiler, a rank-0 select_and_scatter; ferrax's passes the source through.)
    x = np.float32(3.0)

    def run(top: Any, L: Any) -> Callable[..., Any]:
        return lambda a: (
            L.reduce_window(a, 0.0, L.add, (), (), ()),
            L.reduce_window(a, 1.0, L.mul, (), (), "SAME"),
            top.jvp(lambda y: L.reduce_window(y, -np.inf, L.max, (), (), ()), (a,), (a,)),
        )

    expected = jax.jit(run(jax, jlax))(x)
    for ours in (run(ferrax, lax)(x), ferrax.jit(run(ferrax, lax))(x)):
        for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(expected)):
            assert_close(a, b, np.dtype(np.float32), "rank 0")
    grad = ferrax.grad(lambda y: lax.reduce_window(y, -np.inf, lax.max, (), (), ()))
    assert float(grad(x)) == float(ferrax.jit(grad)(x)) == 1.0
