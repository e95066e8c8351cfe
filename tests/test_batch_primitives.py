"""Batching rules of every built-in primitive, generated over the primitive table (issue 9).

Each primitive name of ``ferrax._ir.builtin_primitives()`` has a case generator (a test
fails when one is missing, and another when a built-in primitive has no batching rule).
The cases are those of the JVP table (``test_jvp_primitives.CASES``: a ``lax`` function
written once for both libraries, ``op(ferrax.lax)`` and ``op(jax.lax)``, with operands),
more where batching has more to check (indices and predicates as operands that differ
per lane, weakly typed outputs), and cases built through the public API for the
primitives made from user functions (``jit``, ``cond``/``switch``, ``while_loop``,
``scan``, ``custom_jvp``, ``custom_vjp``, ``checkpoint``, ``stop_gradient``). Every case
is asserted to bind the primitive it is filed under, so that it tests what it names.

Every case is vmapped four times: each operand's batch axis is 0, 1, -1 or None
(rotated over the operands and over the vmaps, at least one operand mapped), batch sizes
1 and 3 (2 for some), ``out_axes`` 0 or a non-zero one. The lanes of a mapped operand
are the same case's operands drawn with other seeds (so each lane is a valid input: a
positive argument of ``log``, an index in range, a different trip count). Each vmap
checks:

(a) the eager ``ferrax.vmap`` equals a Python loop over the lanes applying the unbatched
    op (ferrax, eagerly), stacked along ``out_axes``: values (exact for integers and
    booleans), dtypes and weak types;
(b) its shapes, dtypes and weak types are ``jax.vmap``'s (by ``jax.eval_shape``: one
    trace per dtype for the whole table, nothing compiled);
(c) for one vmap of each case (a batch of 2 or 3), ``ferrax.jit`` of it equals the eager
    one (one ``ferrax.jit`` per dtype for the whole table: compiling, not checking, is
    what costs time, about 35 ms a vmap, so not all four).

Plus: jvp and vjp of a vmapped ``custom_jvp``/``custom_vjp`` function use the user's
rules, and the loop check fails an extension primitive with a wrong rule.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import ferrax
import test_jvp_primitives as jvp
from ferrax import lax
from ferrax._lax import elementwise
from ferrax.core import Primitive, ShapedArray
from ferrax.tree_util import tree_flatten
from test_jvp_primitives import F16, F32, Case, Gen, NDArray, Op, normal, uniform

jax = pytest.importorskip("jax")
jlax = pytest.importorskip("jax.lax")

FLOATS = [F32, F16]
Axis = int | None


def top(L: Any) -> Any:
    """The library whose ``lax`` is ``L`` (for ``jit``, ``custom_jvp``, ``checkpoint``)."""
    return ferrax if L is lax else jax


def weak(value: float, dtype: np.dtype[Any]) -> Any:
    """A Python float (weakly typed) next to float32 operands; next to float16 ones a
    float16 scalar, as JAX's ``lax`` refuses a Python float there (ferrax's takes it)."""
    return value if dtype == F32 else np.asarray(value, dtype)


# ----------------------------------------------------------- cases beyond the JVP table


#: A case generator given the lane it draws operands for (``lane_index`` needs it).
LaneGen = Callable[[np.random.Generator, np.dtype[Any], int], list[Case]]


def any_lane(gen: Gen) -> LaneGen:
    """A generator of the JVP table: its operands are random, whatever the lane."""
    return lambda rng, dtype, lane: gen(rng, dtype)


def extended(base: Gen, *more: LaneGen) -> LaneGen:
    """The JVP table's cases of a primitive, then more."""

    def gen(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
        return base(rng, dtype) + [c for g in more for c in g(rng, dtype, lane)]

    return gen


def lane_index(lane: int, lo: int, hi: int, step: int = 1) -> NDArray:
    """An int32 scalar in ``[lo, hi)``, ``step`` further in each lane (modulo the
    range): indices and trip counts that differ between the lanes."""
    return np.asarray(lo + (lane * step) % (hi - lo), np.int32)


def lane_pred(lane: int) -> NDArray:
    """A boolean scalar that alternates over the lanes."""
    return np.asarray(lane % 2 == 0)


def more_select_n(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    # A scalar predicate that differs per lane: batched, it is no longer a scalar.
    x, y = normal(rng, (2, 3), dtype), normal(rng, (2, 3), dtype)
    return [
        Case("lane_scalar_pred", lambda L: L.select_n, (lane_pred(lane), x, y)),
        # Weakly typed cases: a weak output that differs per lane.
        Case("weak_cases", lambda L: lambda p: L.select_n(p, 1.0, 2.0), (lane_pred(lane),)),
    ]


def more_dynamic_slice(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    x = normal(rng, (5, 4), dtype)
    return [Case("lane_indices", lambda L: lambda a, p, q: L.dynamic_slice(a, (p, q), (2, 3)), (x, lane_index(lane, -1, 6, 3), lane_index(lane, 0, 3)))]


def more_dynamic_update_slice(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    x, u = normal(rng, (5, 4), dtype), normal(rng, (2, 3), dtype)
    return [
        Case(
            "lane_indices",
            lambda L: lambda a, b, p, q: L.dynamic_update_slice(a, b, (p, q)),
            (x, u, lane_index(lane, -1, 6, 3), lane_index(lane, 0, 3, 2)),
        )
    ]


def more_gather(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    x = normal(rng, (5, 3), dtype)
    rows = rng.integers(-1, 6, (4, 1)).astype(np.int32)  # some out of range: clipped

    def op(L: Any) -> Callable[..., Any]:
        return lambda a, i: L.gather(a, i, L.GatherDimensionNumbers((1,), (0,), (0,)), (1, 3), mode="clip")

    return [Case("lane_rows", op, (x, rows))]


def more_scatter(name: str) -> LaneGen:
    def gen(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
        x, u = normal(rng, (5, 3), dtype), normal(rng, (3, 3), dtype)
        # Distinct positions per lane (which of repeated updates wins is unspecified).
        rows = rng.permutation(5)[:3].reshape(3, 1).astype(np.int32)

        def op(L: Any) -> Callable[..., Any]:
            dn = L.ScatterDimensionNumbers((1,), (0,), (0,))
            return lambda a, i, b: getattr(L, name)(a, i, b, dn)

        return [Case("lane_indices", op, (x, rows, u))]

    return gen


def more_pad(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    return [Case("vector", jvp.call("pad", ((2, -1, 1),)), (normal(rng, (4,), dtype), normal(rng, (), dtype)))]


def gen_iota(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    # iota has no operand: it is created inside a mapped function, next to mapped values.
    x = normal(rng, (2, 3), dtype)
    return [
        Case("plus_x", lambda L: lambda a: L.add(a, L.iota(dtype, 3)), (x[0],)),
        Case("broadcasted", lambda L: lambda a: L.mul(a, L.broadcasted_iota(dtype, (2, 3), 0)), (x,)),
        Case("int_index", lambda L: lambda i: L.add(i, L.iota(np.int32, 4)), (lane_index(lane, -5, 5, 3),)),
    ]


def gen_add_any(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    # JAX's add_any is private (ad_util.add_jaxvals_p): its shapes and dtypes are add's.
    def op(L: Any) -> Callable[..., Any]:
        return elementwise.add_any_p.bind if L is lax else L.add

    return [Case(str(s), op, (normal(rng, s, dtype), normal(rng, s, dtype))) for s in [(), (2, 3)]]


# ------------------------------------------------- primitives built from user functions


def gen_jit(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    def two(L: Any) -> Any:
        return top(L).jit(lambda a, b: L.add(L.sin(a), L.broadcast_in_dim(b, (2, 3), (1,))))

    def nested(L: Any) -> Any:
        inner = top(L).jit(lambda a: L.mul(a, a))
        return top(L).jit(lambda a: (inner(L.exp(a)), L.argmax(a, 0, np.int32)))

    x, y = normal(rng, (2, 3), dtype), normal(rng, (3,), dtype)
    w = normal(rng, (3,), dtype)
    return [
        Case("two", two, (x, y)),
        Case("nested_int_output", nested, (x,)),
        # A closed-over constant and a weak-typed Python scalar.
        Case("closure", lambda L: top(L).jit(lambda a: L.mul(L.add(a, w), weak(2.0, dtype))), (y,)),
    ]


def gen_cond(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    def two_branches(L: Any) -> Callable[..., Any]:
        return lambda p, a, b: L.cond(p, lambda x, y: (L.sin(x), L.mul(x, y)), lambda x, y: (L.neg(y), L.add(x, y)), a, b)

    def int_output(L: Any) -> Callable[..., Any]:
        return lambda p, a: L.cond(p, lambda x: (x, L.argmax(x, 0, np.int32)), lambda x: (L.exp(x), L.argmin(x, 0, np.int32)), a)

    def fixed_pred(L: Any) -> Callable[..., Any]:
        return lambda a, b: L.cond(np.asarray(False), lambda x, y: L.mul(x, y), lambda x, y: L.sub(x, y), a, b)

    def pred_only(L: Any) -> Callable[..., Any]:
        return lambda p: L.cond(p, L.sin, L.cos, c)

    def switch(L: Any) -> Callable[..., Any]:
        return lambda i, a: L.switch(i, [L.sin, L.cos, lambda x: L.mul(x, x)], a)

    def switch_closure(L: Any) -> Callable[..., Any]:
        return lambda i, a: L.switch(i, [lambda x: L.add(x, c), lambda x: L.sub(x, c)], a)

    a, b, c = normal(rng, (3,), dtype), normal(rng, (3,), dtype), normal(rng, (2, 3), dtype)
    return [
        Case("two_branches", two_branches, (lane_pred(lane), a, b)),
        Case("int_output", int_output, (lane_pred(lane + 1), normal(rng, (2, 3), dtype))),
        Case("unbatched_pred", fixed_pred, (a, b)),  # only the operands can be mapped
        Case("pred_only", pred_only, (lane_pred(lane),)),  # only the predicate can be mapped
        Case("weak_outputs", lambda L: lambda p: L.cond(p, lambda: 1.5, lambda: -0.5), (lane_pred(lane),)),
        Case("switch", switch, (lane_index(lane, -1, 5, 2), a)),  # -1 and 3: clamped
        Case("switch_closure", switch_closure, (lane_index(lane, 0, 2), normal(rng, (2, 3), dtype))),
    ]


def gen_while(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    def trip_count(L: Any) -> Callable[..., Any]:
        # n differs per lane: the lanes run different numbers of iterations.
        return lambda n, a: L.while_loop(lambda c: L.lt(c[0], n), lambda c: (L.add(c[0], 1), L.mul(c[1], weak(1.5, dtype))), (np.int32(0), a))

    def weak_carry(L: Any) -> Callable[..., Any]:
        # A Python int carry: weakly typed, and batched by the trip count.
        return lambda n: L.while_loop(lambda c: L.lt(c, n), lambda c: L.add(c, 1), 0)

    def carry_pred(L: Any) -> Callable[..., Any]:
        # The predicate reads the carry: batched whenever the carry is.
        return lambda a: L.while_loop(
            lambda c: L.lt(L.reduce_sum(c, (0,)), weak(6.0, dtype)), lambda c: L.add(c, L.add(L.abs(c), weak(0.5, dtype))), a
        )

    def fixed_count(L: Any) -> Callable[..., Any]:
        # An unbatched predicate; a mapped body constant.
        return lambda a, w: L.while_loop(
            lambda c: L.lt(c[0], 3), lambda c: (L.add(c[0], 1), L.add(L.mul(c[1], w), weak(1.0, dtype))), (np.int32(0), a)
        )

    def cond_const(L: Any) -> Callable[..., Any]:
        # A mapped constant of the predicate only.
        return lambda lim, a: L.while_loop(lambda c: L.lt(c[0], lim), lambda c: (L.add(c[0], weak(0.75, dtype)), c[1]), (np.asarray(0, dtype), a))

    a, w = uniform(rng, (3,), 0.1, 1.0, dtype), uniform(rng, (3,), -1.0, 1.0, dtype)
    return [
        Case("trip_count", trip_count, (lane_index(lane, 0, 5, 2), a)),
        Case("weak_carry", weak_carry, (lane_index(lane, 0, 5, 2),)),
        Case("carry_pred", carry_pred, (uniform(rng, (2,), -1.0, 2.0, dtype),)),
        Case("fixed_count", fixed_count, (a, w)),
        Case("cond_const", cond_const, (uniform(rng, (), 0.0, 3.0, dtype), normal(rng, (2, 2), dtype))),
    ]


def gen_scan(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    def body(L: Any) -> Callable[[Any, Any], tuple[Any, Any]]:
        return lambda c, x: (L.add(L.mul(c, weak(0.5, dtype)), x), L.mul(c, x))

    def both(L: Any) -> Callable[..., Any]:
        return lambda c0, xs: L.scan(body(L), c0, xs)

    def carry_only(L: Any) -> Callable[..., Any]:
        return lambda c0: L.scan(body(L), c0, xs)  # batched carry, unbatched xs

    def xs_only(L: Any) -> Callable[..., Any]:
        return lambda ys: L.scan(body(L), c0, ys)  # unbatched carry, batched xs

    def consts(L: Any) -> Callable[..., Any]:
        # A mapped constant of the body, a reversed scan, two carries (one integer).
        def run(w: Any, c: Any, ys: Any) -> Any:
            def f(c: Any, x: Any) -> tuple[Any, Any]:
                return (L.add(L.mul(c[0], w), x), L.add(c[1], 1)), L.reduce_sum(c[0], (0,))

            return L.scan(f, (c, np.int32(0)), ys, reverse=True)

        return run

    def weak_carry(L: Any) -> Callable[..., Any]:
        # A Python float carry (weakly typed, unbatched) next to batched xs.
        return lambda ys: L.scan(lambda c, x: (L.add(c, 1.0), L.mul(x, weak(2.0, dtype))), 0.0, ys)

    def no_xs(L: Any) -> Callable[..., Any]:
        return lambda c: L.scan(lambda c, _: (L.sin(c), L.cos(c)), c, None, length=3)

    c0, xs = normal(rng, (3,), dtype), normal(rng, (4, 3), dtype)
    return [
        Case("both", both, (c0, xs)),
        Case("carry_only", carry_only, (c0,)),
        Case("xs_only", xs_only, (xs,)),
        Case("consts", consts, (normal(rng, (3,), dtype), c0, xs)),
        Case("no_xs", no_xs, (normal(rng, (2,), dtype),)),
        Case("weak_carry", weak_carry, (xs,)),
    ]


def gen_custom_jvp(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    def two(L: Any) -> Any:
        f = top(L).custom_jvp(lambda a, b: L.mul(L.sin(a), b))
        f.defjvp(lambda ps, ts: (f(*ps), L.add(L.mul(ts[0], L.cos(ps[0])), ts[1])))
        return f

    def closure(L: Any) -> Any:
        f = top(L).custom_jvp(lambda a: (L.add(a, c), L.reduce_max(a, (0,))))
        f.defjvp(lambda ps, ts: (f(*ps), (ts[0], L.reduce_sum(ts[0], (0,)))))
        return f

    c = normal(rng, (3,), dtype)
    return [Case("two", two, (normal(rng, (2, 3), dtype), normal(rng, (2, 3), dtype))), Case("closure", closure, (normal(rng, (3,), dtype),))]


def gen_custom_vjp(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    def two(L: Any) -> Any:
        f = top(L).custom_vjp(lambda a, b: L.mul(L.sin(a), b))
        f.defvjp(lambda a, b: (f(a, b), (a, b)), lambda r, g: (L.mul(g, L.cos(r[0])), L.mul(g, r[1])))
        return f

    def closure(L: Any) -> Any:
        f = top(L).custom_vjp(lambda a: L.exp(L.sub(a, c)))
        f.defvjp(lambda a: (f(a), a), lambda r, g: (g,))
        return f

    c = normal(rng, (3,), dtype)
    return [Case("two", two, (normal(rng, (3,), dtype), normal(rng, (3,), dtype))), Case("closure", closure, (normal(rng, (3,), dtype),))]


def gen_remat(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    def two(L: Any) -> Any:
        return top(L).checkpoint(lambda a, b: L.sin(L.mul(L.sin(a), b)))

    def closure(L: Any) -> Any:
        return top(L).checkpoint(lambda a: (L.tanh(L.add(a, c)), L.reduce_max(a, (1,))))

    c = normal(rng, (2, 3), dtype)
    return [Case("two", two, (normal(rng, (2, 3), dtype), normal(rng, (2, 3), dtype))), Case("closure", closure, (normal(rng, (2, 3), dtype),))]


def gen_stop_gradient(rng: np.random.Generator, dtype: np.dtype[Any], lane: int) -> list[Case]:
    return [
        Case("float", lambda L: lambda a: L.add(L.stop_gradient(a), a), (normal(rng, (2, 3), dtype),)),
        Case("int", lambda L: L.stop_gradient, (lane_index(lane, -5, 5, 3),)),
    ]


# ------------------------------------------------------------------------- the table

CASES: dict[str, LaneGen] = {
    **{name: any_lane(gen) for name, gen in jvp.CASES.items()},
    "select_n": extended(jvp.gen_select_n, more_select_n),
    "dynamic_slice": extended(jvp.gen_dynamic_slice, more_dynamic_slice),
    "dynamic_update_slice": extended(jvp.gen_dynamic_update_slice, more_dynamic_update_slice),
    "gather": extended(jvp.gen_gather, more_gather),
    "scatter": extended(jvp.gen_scatter, more_scatter("scatter")),
    "scatter-add": extended(jvp.CASES["scatter-add"], more_scatter("scatter_add")),
    "scatter-sub": extended(jvp.CASES["scatter-sub"], more_scatter("scatter_sub")),
    "scatter-mul": extended(jvp.gen_scatter_mul, more_scatter("scatter_mul")),
    "scatter-min": extended(jvp.CASES["scatter-min"], more_scatter("scatter_min")),
    "scatter-max": extended(jvp.CASES["scatter-max"], more_scatter("scatter_max")),
    "pad": extended(jvp.gen_pad, more_pad),
    "iota": gen_iota,
    "add_any": gen_add_any,
    "jit": gen_jit,
    "cond": gen_cond,
    "while": gen_while,
    "scan": gen_scan,
    "custom_jvp_call": gen_custom_jvp,
    "custom_vjp_call": gen_custom_vjp,
    "remat2": gen_remat,
    "stop_gradient": gen_stop_gradient,
}

#: The batch sizes of a case's vmaps (2 replaces one 3 for some cases).
SIZES = (1, 3, 3, 3)


def cases_of(name: str, dtype: np.dtype[Any], seed: int = 0) -> list[Case]:
    """The cases of one primitive and dtype with operands drawn from ``seed`` (the
    lanes of a batch are the operands of seeds 0, 1, 2, ...); those with operands only
    (a vmap maps at least one)."""
    rng = np.random.default_rng(zlib.crc32(f"{name}-{dtype.name}-{seed}".encode()))
    return [c for c in CASES[name](rng, dtype, seed) if c.args]


def test_every_primitive_has_cases() -> None:
    table = set(ferrax._ir.builtin_primitives())
    missing = sorted(table - set(CASES) - jvp.HOST_CALLBACKS)
    assert not missing, f"primitives without batching cases: {missing}"
    assert not set(CASES) - table, "cases for primitives that are not in the table"
    for name in CASES:
        assert all(cases_of(name, d) for d in FLOATS), f"{name} generates no case"


def test_every_primitive_has_a_batching_rule() -> None:
    from ferrax._lax.registry import _collect

    prims = _collect()
    without = [n for n in ferrax._ir.builtin_primitives() if prims[n].batch_rule is None]
    assert without == [], f"built-in primitives without a batching rule: {without}"


# ------------------------------------------------------------------- the batched runs


class Run(NamedTuple):
    """One vmap of a case: its batch axes (one per operand), size, out_axes and the
    batched operands; ``lanes[b]`` are the operands of lane ``b``."""

    label: str
    op: Op
    in_axes: tuple[Axis, ...]
    size: int
    out_axes: int
    batched: tuple[NDArray, ...]
    lanes: list[tuple[NDArray, ...]]
    staged: bool  # also run under ferrax.jit (one vmap of each case: compiling is slow)
    mesh: str = ""  # the case's mesh, if any: one staging holds the runs of one mesh


def axis_kinds(x: NDArray) -> list[Axis]:
    """The batch axes an operand can take (axis 1 needs an operand of rank 1 or more)."""
    return [0, 1, -1, None] if np.ndim(x) >= 1 else [0, -1, None]


def out_rank(op: Op, args: tuple[NDArray, ...]) -> int:
    leaves, _ = tree_flatten(op(lax)(*args))
    return min(np.ndim(leaf) for leaf in leaves)


def runs_of(name: str, dtype: np.dtype[Any]) -> list[Run]:
    """Every vmap of the cases of ``name``."""
    return runs_of_cases(name, [cases_of(name, dtype, seed) for seed in range(max(SIZES))])


def runs_of_cases(name: str, seeds: list[list[Case]]) -> list[Run]:
    """The vmaps of each case of ``seeds[0]`` (lane ``b`` of a mapped operand is the
    operand of ``seeds[b]``): the kinds of batch axis rotate over the operands and over
    the vmaps (an operand takes each kind once), starting at a place drawn from the
    case's name. The batch of 1 is a vmap without unmapped operands where there is one
    (unmapped operands are checked next to lanes that differ); some cases have a batch of
    2; half of the vmaps have a non-zero ``out_axes``; one vmap of each case is staged."""
    runs = []
    for k, case in enumerate(seeds[0]):
        start = zlib.crc32(f"{name}/{case.label}".encode())
        every_axes = []
        for j in range(len(SIZES)):
            axes = [kinds[(start + j + i) % len(kinds)] for i, kinds in enumerate(map(axis_kinds, case.args))]
            if all(a is None for a in axes):
                axes[(start + j) % len(axes)] = 0
            every_axes.append(axes)
        order = [(start + d) % len(SIZES) for d in range(len(SIZES))]
        one = next((j for j in order if None not in every_axes[j]), order[0])
        for j, axes in enumerate(every_axes):
            after = (j - one) % len(SIZES)
            size = SIZES[after]
            if after == 1 and start % 3 == 0:
                size = 2
            lanes = [
                tuple(seeds[b][k].args[i] if a is not None else case.args[i] for i, a in enumerate(axes)) for b in range(size)
            ]
            batched = tuple(
                np.stack([lane[i] for lane in lanes], axis=a) if a is not None else case.args[i] for i, a in enumerate(axes)
            )
            front = (start // 4 + j) % 2 == 0
            out_axes = 0 if front else (1 if out_rank(case.op, case.args) >= 1 else -1)
            staged = after == 1 + start % 3
            runs.append(Run(case.label, case.op, tuple(axes), size, out_axes, batched, lanes, staged, case.mesh))
    return runs


def describe(run: Run) -> str:
    return f"{run.label} in_axes={run.in_axes} size={run.size} out_axes={run.out_axes}"


def vmapped(vmap: Callable[..., Any], L: Any, run: Run) -> Callable[..., Any]:
    return vmap(run.op(L), in_axes=run.in_axes, out_axes=run.out_axes)  # type: ignore[no-any-return]


def loop(run: Run) -> list[tuple[NDArray, bool]]:
    """The reference: the unbatched op on each lane, its outputs stacked along
    ``out_axes``, with their weak types (every lane's)."""
    outs = [tree_flatten(run.op(lax)(*lane))[0] for lane in run.lanes]
    stacked = []
    for leaves in zip(*outs):
        weak = {bool(getattr(leaf, "weak_type", False)) for leaf in leaves}
        assert len(weak) == 1, "lanes of different weak types"
        stacked.append((np.stack([np.asarray(leaf) for leaf in leaves], axis=run.out_axes), weak.pop()))
    return stacked


def tolerance(dtype: np.dtype[Any], staged: bool) -> float:
    if dtype == F16:
        return 1e-2 if staged else 2e-3
    return 2e-5 if staged else 2e-6


def assert_same(actual: Any, expected: NDArray, weak: bool, dtype: np.dtype[Any], what: str, staged: bool = False) -> None:
    actual_weak = bool(getattr(actual, "weak_type", False))
    assert actual_weak == weak, f"{what}: weak_type {actual_weak}, expected {weak}"
    a = np.asarray(actual)
    assert a.dtype == expected.dtype, f"{what}: dtype {a.dtype}, expected {expected.dtype}"
    assert a.shape == expected.shape, f"{what}: shape {a.shape}, expected {expected.shape}"
    if a.dtype.kind in "biu":
        np.testing.assert_array_equal(a, expected, err_msg=what)
    else:
        tol = tolerance(dtype, staged)
        np.testing.assert_allclose(a.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol, err_msg=what)


def check_against_loop(runs: list[Run], results: list[list[Any]], dtype: np.dtype[Any]) -> None:
    """Each run's outputs (``results``, the leaves of its eager vmap) are the loop's."""
    for run, leaves in zip(runs, results, strict=True):
        expected = loop(run)
        assert len(leaves) == len(expected), f"{describe(run)}: {len(leaves)} outputs, expected {len(expected)}"
        for i, (leaf, (value, weak)) in enumerate(zip(leaves, expected)):
            assert_same(leaf, value, weak, dtype, f"{describe(run)}: output {i}")


@functools.cache
def eager(name: str, dtype: np.dtype[Any]) -> tuple[list[Run], list[list[Any]]] | str:
    """The runs of ``name`` and the leaves of their eager ferrax vmaps, or the first
    error (as text)."""
    try:
        runs = runs_of(name, dtype)
    except Exception as e:  # a case that cannot run unbatched: reported by its test
        return f"the cases: {type(e).__name__}: {e}"
    results = []
    for run in runs:
        try:
            results.append(tree_flatten(vmapped(ferrax.vmap, lax, run)(*run.batched))[0])
        except Exception as e:
            return f"{describe(run)}: {type(e).__name__}: {e}"
    return runs, results


def stage(library: str, runs: list[Run]) -> list[list[Any]]:
    """The runs' vmaps in one ``ferrax.jit`` (the leaves of each), or their shapes in one
    ``jax.eval_shape``."""
    if library == "jax":
        fns = [vmapped(jax.vmap, jlax, r) for r in runs]
        out = jax.eval_shape(lambda argss: [f(*a) for f, a in zip(fns, argss)], [r.batched for r in runs])
    else:
        fns = [vmapped(ferrax.vmap, lax, r) for r in runs]
        out = ferrax.jit(lambda argss: [f(*a) for f, a in zip(fns, argss)])([r.batched for r in runs])
    return [tree_flatten(o)[0] for o in out]


@functools.cache
def staged_table(library: str, dtype: np.dtype[Any]) -> dict[str, list[list[Any]]] | None:
    """The runs of every primitive whose eager vmaps work, in one staging of
    ``library`` per mesh (the runs without one together, and those of each mesh: one
    jit holds one mesh), by primitive name; None if that fails (each test then stages
    its own, to report its own error)."""
    groups: dict[str, tuple[list[str], list[Run]]] = {}
    for name in CASES:
        done = eager(name, dtype)
        if not isinstance(done, str):
            for run in done[0]:
                if library == "jax" or run.staged:
                    names, runs = groups.setdefault(run.mesh, ([], []))
                    names.append(name)
                    runs.append(run)
    table: dict[str, list[list[Any]]] = {}
    for names, runs in groups.values():
        try:
            results = stage(library, runs)
        except Exception:
            return None
        for name, r in zip(names, results):
            table.setdefault(name, []).append(r)
    return table


# One worker per dtype (pytest-xdist's loadgroup): the eager runs and staged tables are
# computed once.
@pytest.mark.parametrize(
    "name, dtype",
    [pytest.param(n, d, id=f"{n}-{d.name}", marks=pytest.mark.xdist_group(f"vmap-{d.name}")) for n in CASES for d in FLOATS],
)
def test_vmap_matches_loop(name: str, dtype: np.dtype[Any]) -> None:
    done = eager(name, dtype)
    assert not isinstance(done, str), done
    runs, results = done
    # (a) against the loop over the lanes.
    check_against_loop(runs, results, dtype)
    # (b) shapes, dtypes and weak types as jax.vmap's.
    table = staged_table("jax", dtype)
    theirs = table.get(name, []) if table is not None else stage("jax", runs)
    for run, leaves, shaped in zip(runs, results, theirs, strict=True):
        assert len(leaves) == len(shaped), f"{describe(run)}: {len(leaves)} outputs, JAX's {len(shaped)}"
        for i, (leaf, s) in enumerate(zip(leaves, shaped)):
            got = (np.shape(leaf), np.dtype(leaf.dtype), bool(getattr(leaf, "weak_type", False)))
            assert got == (s.shape, np.dtype(s.dtype), s.weak_type), f"{describe(run)}: output {i}: {got}, JAX's {s}"
    # (c) one vmap of each case under ferrax.jit.
    chosen = [(run, leaves) for run, leaves in zip(runs, results) if run.staged]
    table = staged_table("ferrax", dtype)
    staged = table.get(name, []) if table is not None else stage("ferrax", [run for run, _ in chosen])
    for (run, leaves), s_leaves in zip(chosen, staged, strict=True):
        for i, (leaf, s_leaf) in enumerate(zip(leaves, s_leaves, strict=True)):
            assert_same(s_leaf, np.asarray(leaf), bool(getattr(leaf, "weak_type", False)), dtype, f"{describe(run)}: staged output {i}", staged=True)


# ------------------------------------------------------------- what the table covers


def jaxpr_primitives(text: str) -> set[str]:
    """The primitives of a printed jaxpr, nested jaxprs included."""
    return set(re.findall(r" = ([a-z_][\w-]*)", text))


@pytest.mark.parametrize("name", list(CASES))
def test_cases_bind_their_primitive(name: str) -> None:
    for case in cases_of(name, F32):
        text = str(ferrax.make_jaxpr(case.op(lax))(*case.args))
        assert name in jaxpr_primitives(text), f"{case.label}: no {name} in\n{text}"


def test_runs_cover_every_kind_of_axis() -> None:
    # Over the table: every kind of batch axis, unmapped operands next to mapped ones,
    # batch sizes 1, 2 and 3, out_axes 0 and not.
    runs = [r for name in CASES for r in runs_of(name, F32)]
    kinds = {a for r in runs for a in r.in_axes}
    assert kinds == {0, 1, -1, None}
    assert any(None in r.in_axes and len(set(r.in_axes)) >= 3 for r in runs)
    assert {r.size for r in runs} == {1, 2, 3}
    assert {r.out_axes for r in runs} == {0, 1, -1}
    # Per case: lanes that differ with an unmapped operand next to mapped ones, and with
    # a batch axis not first.
    for name in CASES:
        for case in cases_of(name, F32):
            mine = [r for r in runs_of(name, F32) if r.label == case.label and r.size > 1]
            if len(case.args) >= 2:
                assert any(None in r.in_axes for r in mine), f"{name} {case.label}"
            if any(np.ndim(x) >= 1 for x in case.args):
                assert any(a not in (0, None) and np.ndim(x) >= 1 for r in mine for a, x in zip(r.in_axes, case.args)), f"{name} {case.label}"


# --------------------------------------------------------------------- the check itself


def test_the_loop_check_fails_a_wrong_rule() -> None:
    # An extension primitive (a cumulative sum over the last axis) with a right rule
    # passes; the same with a rule that leaves the batch axis where it was (wrong
    # unless it is first: the sum then runs over the batch axis or the wrong one) fails.
    def extension(name: str, right: bool) -> Primitive:
        p = Primitive(name)
        p.def_impl(lambda x: np.cumsum(x, axis=-1))
        p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))

        def rule(vals: Any, dims: Any, *, axis_size: int) -> tuple[Any, Any]:
            x = lax.transpose(vals[0], (dims[0], *(a for a in range(np.ndim(vals[0])) if a != dims[0])))
            return (p.bind(x), 0) if right else (p.bind(vals[0]), dims[0])

        p.def_batch(rule)
        return p

    rng = np.random.default_rng(0)
    lanes = [normal(rng, (2, 3), F32) for _ in range(3)]
    for name, right in [("cumsum_right_for_test", True), ("cumsum_wrong_for_test", False)]:
        p = extension(name, right)
        runs = runs_of_cases(name, [[Case("matrix", lambda L: p.bind, (x,))] for x in lanes])
        assert any(a not in (0, None) for r in runs for a in r.in_axes)
        results = [tree_flatten(vmapped(ferrax.vmap, lax, r)(*r.batched))[0] for r in runs]
        if right:
            check_against_loop(runs, results, F32)
        else:
            with pytest.raises(AssertionError):
                check_against_loop(runs, results, F32)


# ------------------------------------------------------- custom rules under batching


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_custom_rules_survive_batching(axis: int) -> None:
    # A batched custom_jvp_call or custom_vjp_call keeps the user's rules (on purpose not
    # the functions' derivatives, so that a rule dropped for differentiating the call is
    # seen): jvp and vjp of the vmapped function are the rules', lane by lane.
    @ferrax.custom_jvp
    def f(a: Any, b: Any) -> Any:
        return lax.mul(lax.sin(a), b)

    f.defjvp(lambda ps, ts: (f(*ps), lax.add(lax.mul(ts[0], 10.0), ts[1])))

    @ferrax.custom_vjp
    def g(a: Any, b: Any) -> Any:
        return lax.mul(lax.sin(a), b)

    g.defvjp(lambda a, b: (g(a, b), b), lambda b, ct: (lax.mul(ct, b), lax.mul(ct, 7.0)))
    rng = np.random.default_rng(3)
    xs, ts, cts = (normal(rng, (3, 2), F32) for _ in range(3))
    b, tb = normal(rng, (2,), F32), normal(rng, (2,), F32)
    lanes = range(3)

    def batched(x: NDArray) -> NDArray:
        return np.moveaxis(x, 0, axis)

    _, t_out = ferrax.jvp(ferrax.vmap(f, in_axes=(axis, None), out_axes=axis), (batched(xs), b), (batched(ts), tb))
    expected = np.stack([np.asarray(ferrax.jvp(f, (xs[k], b), (ts[k], tb))[1]) for k in lanes], axis=axis)
    assert_same(t_out, expected, False, F32, "custom_jvp tangent")
    _, pullback = ferrax.vjp(ferrax.vmap(g, in_axes=(axis, None), out_axes=axis), batched(xs), b)
    ct_x, ct_b = pullback(batched(cts))
    per_lane = [ferrax.vjp(g, xs[k], b)[1](cts[k]) for k in lanes]
    assert_same(ct_x, batched(np.stack([np.asarray(c[0]) for c in per_lane])), False, F32, "custom_vjp cotangent of x")
    assert_same(ct_b, np.sum([np.asarray(c[1]) for c in per_lane], axis=0), False, F32, "custom_vjp cotangent of b")
