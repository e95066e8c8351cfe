"""Forward-mode rules of every built-in primitive, generated over the primitive table.

Each primitive name of ``ferrax._ir.builtin_primitives()`` has a case generator (a test
fails when one is missing, so the table stays complete). A case is a ``lax`` function
written once for both libraries (``op(ferrax.lax)`` and ``op(jax.lax)``) with operands
of a few shapes, random values, float32 and float16 (integer operands where the
primitive takes them: indices, shifts, comparisons). Each case checks:

(a) ``ferrax.jvp`` equals ``jax.jvp`` on the same inputs (values and dtypes; float0
    tangents for integer and boolean outputs);
(b) ``ferrax.test_util.check_grads(..., order=2, modes=("fwd",))`` (against finite
    differences; float16 with a larger step);
(c) the same jvp staged under ``ferrax.jit`` equals the eager one.

Reverse mode (``check_grads(..., order=2, modes=("rev",))``, float32) runs over the same
table (a primitive without a transposition rule would be a strict xfail). Plus
a few jaxpr-structure checks against ``jax.make_jaxpr`` of the same jvp, and tests of
``check_grads`` itself (it fails on wrong rules, first and second order).

JAX's references are computed in one ``jax.jit`` per dtype, and ferrax's staged jvps in
one ``ferrax.jit`` per dtype: compilations, not the checks, dominate the run time.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import ferrax
from ferrax import lax
from ferrax._interpreters.ad import float0
from ferrax._lax import structural
from ferrax.core import Primitive, ShapedArray
from ferrax.test_util import check_grads

jax = pytest.importorskip("jax")
jlax = pytest.importorskip("jax.lax")

NDArray = np.ndarray[Any, Any]
Op = Callable[[Any], Callable[..., Any]]

#: The control-flow primitives and add_any have their rules and tests with the lead's
#: work on calls, control flow and reverse mode; they are the only exceptions.
# Primitives built from user functions or rules: tests/test_ad_higher_order.py checks them.
LEAD_OWNED = {
    "jit", "cond", "while", "scan", "add_any", "custom_jvp_call", "custom_vjp_call", "remat2", "stop_gradient",
}
# Host callbacks: their values come from Python, their rules are their own (tested
# against JAX in test_callbacks.py).
HOST_CALLBACKS = {"debug_callback", "pure_callback", "io_callback", "debug_print"}

F32: np.dtype[Any] = np.dtype(np.float32)
F16: np.dtype[Any] = np.dtype(np.float16)
FLOATS = [F32, F16]


class Case(NamedTuple):
    """``op(L)(*args)`` for ``L`` = ``ferrax.lax`` or ``jax.lax``."""

    label: str
    op: Op
    args: tuple[NDArray, ...]
    grads: bool = True  # False where finite differences are meaningless (ties)
    jax_differs: str = ""  # why JAX's jvp is not the reference here (checked by (b))
    mesh: str = ""  # the mesh the op uses, if any: one jit stages the cases of one mesh
    order: int = 2  # the order checked against finite differences in float32


Gen = Callable[[np.random.Generator, np.dtype[Any]], list[Case]]


def call(name: str, *params: Any, **kw: Any) -> Op:
    """The op ``L.name(*operands, *params, **kw)``."""
    return lambda L: lambda *xs: getattr(L, name)(*xs, *params, **kw)


# ------------------------------------------------------------------------ operand makers


def normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> NDArray:
    return rng.standard_normal(shape).astype(dtype)


def uniform(rng: np.random.Generator, shape: tuple[int, ...], lo: float, hi: float, dtype: np.dtype[Any]) -> NDArray:
    return rng.uniform(lo, hi, shape).astype(dtype)


def away_from_zero(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> NDArray:
    x: NDArray = (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)
    return x


def int_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The integer dtype paired with a float dtype in the integer-operand cases."""
    return np.dtype(np.int32 if dtype == F32 else np.int8)


SHAPES: list[tuple[int, ...]] = [(), (3,), (2, 3)]


def shapes(dtype: np.dtype[Any]) -> list[tuple[int, ...]]:
    """Every shape in float32; in float16 (a dtype, not a shape, to check) the largest."""
    return SHAPES if dtype == F32 else SHAPES[-1:]


def unary(name: str, draw: Callable[[np.random.Generator, tuple[int, ...], np.dtype[Any]], NDArray]) -> Gen:
    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        return [Case(str(s), lambda L: getattr(L, name), (draw(rng, s, dtype),)) for s in shapes(dtype)]

    return gen


def in_range(lo: float, hi: float) -> Callable[[np.random.Generator, tuple[int, ...], np.dtype[Any]], NDArray]:
    return lambda rng, s, d: uniform(rng, s, lo, hi, d)


def binary(
    name: str,
    draw_x: Callable[[np.random.Generator, tuple[int, ...], np.dtype[Any]], NDArray] = normal,
    draw_y: Callable[[np.random.Generator, tuple[int, ...], np.dtype[Any]], NDArray] = normal,
) -> Gen:
    """Same shapes, then a scalar and a size-1 axis broadcast against a matrix."""

    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        pairs = [((), ()), ((3,), (3,)), ((2, 3), (2, 3)), ((2, 3), ()), ((2, 3), (1, 3))]
        pairs = pairs if dtype == F32 else pairs[2:]
        return [
            Case(f"{a}x{b}", lambda L: getattr(L, name), (draw_x(rng, a, dtype), draw_y(rng, b, dtype)))
            for a, b in pairs
        ]

    return gen


def integer_binary(name: str, *, shifts: bool = False) -> Gen:
    """Integer (and boolean, for logic) operands: the tangents are float0."""

    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        it = int_dtype(dtype)
        hi = 8 if shifts else 100
        x = rng.integers(-100, 100, (2, 3)).astype(it)
        y = rng.integers(0, hi, (2, 3)).astype(it)
        cases = [Case("int", lambda L: getattr(L, name), (x, y))]
        if not shifts:
            b = rng.integers(0, 2, (2, 3)).astype(bool), rng.integers(0, 2, (2, 3)).astype(bool)
            cases.append(Case("bool", lambda L: getattr(L, name), b))
        return cases

    return gen


def comparison(name: str) -> Gen:
    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        x = normal(rng, (2, 3), dtype)
        y = x.copy()
        y[0] = normal(rng, (3,), dtype)  # some equal, some not
        i = rng.integers(-3, 3, (4,)).astype(int_dtype(dtype))
        return [
            Case("float", lambda L: getattr(L, name), (x, y)),
            Case("int", lambda L: getattr(L, name), (i, i[::-1].copy())),
        ]

    return gen


# ------------------------------------------------------------------- elementwise cases


def gen_not(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = rng.integers(-100, 100, (3,)).astype(int_dtype(dtype))
    return [Case("int", lambda L: L.bitwise_not, (x,)), Case("bool", lambda L: L.bitwise_not, (x > 0,))]


def gen_count_bits(name: str) -> Gen:
    """population_count, clz: integer operands (edge values included), float0 tangents."""

    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        it = int_dtype(dtype)
        info = np.iinfo(it)
        x = np.concatenate([rng.integers(info.min, info.max, (6,), dtype=it, endpoint=True), np.array([0, -1, info.min, info.max], it)])
        return [Case("int", lambda L: getattr(L, name), (x,))]

    return gen


def gen_bitcast(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    """Floats to the integer of their width, to themselves and to a narrower float (zero
    tangents, JAX's rule: never checked by finite differences, where the identity would
    have a derivative of 1), and integers to floats."""
    x = normal(rng, (2, 3), dtype)
    k = dtype.itemsize
    same_int = np.dtype(f"i{k}")
    cases = [
        Case("to_int", lambda L: lambda a: L.bitcast_convert_type(a, same_int), (x,)),
        Case("to_self", lambda L: lambda a: L.bitcast_convert_type(a, dtype), (x,), grads=False),
        Case("from_int", lambda L: lambda a: L.bitcast_convert_type(a, dtype), (x.view(same_int),)),
        # Bytes joined along the last axis (reshaped first: jax.vmap of a widening bitcast
        # batched along that axis fails, which the batching table would try; ferrax's
        # rule is checked there in tests/test_bits.py).
        Case("widen", lambda L: lambda a: L.bitcast_convert_type(L.reshape(a, (2, 3, k)), dtype), (x.view(np.int8).reshape(2, 3 * k),)),
    ]
    if dtype.itemsize >= 4:
        cases.append(Case("narrower", lambda L: lambda a: L.bitcast_convert_type(a, np.float16), (x,), grads=False))
    return cases


def threefry_op(L: Any) -> Callable[..., Any]:
    """threefry2x32 of ``L`` (JAX's from its PRNG module), both words in one array."""
    if L is jlax:
        from jax._src.random.threefry2x32 import threefry2x32_p

        def fn(*xs: Any) -> Any:
            return L.concatenate(threefry2x32_p.bind(*xs), 0)  # type: ignore[no-untyped-call]
    else:
        from ferrax._lax.bits import threefry2x32

        def fn(*xs: Any) -> Any:
            return L.concatenate(threefry2x32(*xs), 0)

    return fn


def gen_threefry2x32(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    def u(*shape: int) -> NDArray:
        return np.asarray(rng.integers(0, 2**32, shape, dtype=np.uint32))

    return [Case("scalar keys", threefry_op, (u(), u(), u(4), u(4))), Case("arrays", threefry_op, (u(3), u(3), u(3), u(3)))]


def importlib_prng() -> Any:
    from ferrax._lax import prng

    return prng


def prng_op(kind: str, *params: Any) -> Op:
    """A key primitive on key data: the data wrapped into typed keys (``random_wrap``),
    the primitive, and keys unwrapped again (``random_unwrap``) where it gives keys;
    ferrax's from ferrax._lax.prng, JAX's from its PRNG module (float0 tangents)."""

    def op(L: Any) -> Callable[..., Any]:
        P: Any
        if L is jlax:
            import importlib

            P = importlib.import_module("jax._src.random.prng")
            impl = P.prngs["threefry2x32"]
            def wrap(d: Any) -> Any:
                return P.random_wrap(d, impl=impl)

            fns: dict[str, Callable[..., Any]] = {
                "seed": lambda s: P.random_unwrap(P.random_seed(s, impl=impl)),
                "wrap": lambda d: P.random_unwrap(wrap(d)),
                "split": lambda d: P.random_unwrap(P.random_split(wrap(d), *params)),
                "bits": lambda d: P.random_bits(wrap(d), *params),
                "fold_in": lambda d, m: P.random_unwrap(P.random_fold_in(wrap(d), m)),
                "clone": lambda d: P.random_unwrap(jax.random.clone(wrap(d))),
            }
        else:
            P = importlib_prng()
            fns = {
                "seed": lambda s: P.random_unwrap(P.random_seed(s)),
                "wrap": lambda d: P.random_unwrap(P.random_wrap(d)),
                "split": lambda d: P.random_unwrap(P.random_split(P.random_wrap(d), *params)),
                "bits": lambda d: P.random_bits(P.random_wrap(d), *params),
                "fold_in": lambda d, m: P.random_unwrap(P.random_fold_in(P.random_wrap(d), m)),
                "clone": lambda d: P.random_unwrap(P.random_clone(P.random_wrap(d))),
            }
        return fns[kind]

    return op


def gen_prng(kind: str) -> Gen:
    """The key primitives: key data (uint32[..., 2]) or seeds as operands; no derivative
    (float0 tangents), as JAX."""

    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        def u(*shape: int) -> NDArray:
            return np.asarray(rng.integers(0, 2**32, shape, dtype=np.uint32))

        if kind == "seed":
            return [Case("seeds", prng_op("seed"), (rng.integers(-(2**31), 2**31, (3,), dtype=np.int32),))]
        if kind == "bits":
            return [
                Case("one key", prng_op("bits", 32, (4,)), (u(2),)),
                Case("keys, 8 bits", prng_op("bits", 8, (2, 3)), (u(3, 2),)),
            ]
        if kind == "split":
            return [Case("one key", prng_op("split", (2,)), (u(2),)), Case("keys", prng_op("split", (2, 3)), (u(3, 2),))]
        if kind == "fold_in":
            return [Case("keys", prng_op("fold_in"), (u(3, 2), u(3)))]
        return [Case("keys", prng_op(kind), (u(3, 2),))]

    return gen


def logical_reduction(name: str) -> Gen:
    """reduce_and/or/xor: integer (signed and unsigned) and bool operands, float0
    tangents (JAX has no rule but zeros for these)."""

    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        x = rng.integers(-100, 100, (2, 3)).astype(int_dtype(dtype))
        b = rng.integers(0, 2, (2, 3)).astype(bool)
        return [
            Case("int", call(name, (1,)), (x,)),
            Case("uint all axes", call(name, (0, 1)), (x.astype(np.uint8),)),
            Case("bool", call(name, (0,)), (b,)),
        ]

    return gen


def gen_nextafter(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    """JAX 0.10 has no derivative rule for nextafter (differentiating it raises there and
    in ferrax: test_logical_and_precision.py checks that); its operands without tangents
    (behind stop_gradient) differentiate as zeros, the nextafter itself evaluated."""

    def op(L: Any) -> Callable[..., Any]:
        return lambda a, b: L.nextafter(L.stop_gradient(a), L.stop_gradient(b))

    return [
        Case("stop_gradient", op, (normal(rng, (2, 3), dtype), normal(rng, (2, 3), dtype)), grads=False),
        Case("scalar", op, (normal(rng, (2, 3), dtype), normal(rng, (), dtype)), grads=False),
    ]


def first_order(gen: Gen) -> Gen:
    """The cases of ``gen`` checked to first order only (the second derivative in ``a``
    of igamma would differentiate igamma_grad_a, which has no rule, as in JAX)."""
    return lambda rng, dtype: [c._replace(order=1) for c in gen(rng, dtype)]


def gen_igamma_grad_a(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    """JAX 0.10 has no derivative rule for igamma_grad_a (test_igamma.py checks that
    differentiating it raises); behind stop_gradient it evaluates, tangents zero."""

    def op(L: Any) -> Callable[..., Any]:
        return lambda a, x: L.igamma_grad_a(L.stop_gradient(a), L.stop_gradient(x))

    a, x = uniform(rng, (2, 3), 0.5, 4.0, dtype), uniform(rng, (2, 3), 0.1, 6.0, dtype)
    return [
        Case("stop_gradient", op, (a, x), grads=False),
        Case("scalar", op, (a, uniform(rng, (), 0.1, 6.0, dtype)), grads=False),
    ]


def gen_reduce_precision(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    """To the dtype's own format (the identity: finite differences apply) and to a
    narrower one (a staircase at that scale: JAX's rule, linear, compared with JAX only)."""
    own = {F32: (8, 23), F16: (5, 10)}.get(dtype, (11, 52))
    narrow = (5, 10) if dtype.itemsize >= 4 else (4, 3)
    return [
        Case(f"own format {own}", call("reduce_precision", *own), (normal(rng, (2, 3), dtype),)),
        Case(f"narrower {narrow}", call("reduce_precision", *narrow), (normal(rng, (2, 3), dtype),), grads=False),
        Case("scalar", call("reduce_precision", *narrow), (normal(rng, (), dtype),), grads=False),
    ]


def off_the_steps(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> NDArray:
    """Integers plus 0.1 to 0.4, either sign: away from where floor, ceil and round jump
    (integers, half-integers), so finite differences see their zero derivative."""
    k = rng.integers(-3, 4, shape)
    x: NDArray = (k + rng.uniform(0.1, 0.4, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)
    return x


def gen_lgamma(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    # Positive arguments, and negative ones between the poles (the reflection formula).
    return [
        *unary("lgamma", in_range(0.5, 4.0))(rng, dtype),
        Case("negative", call("lgamma"), (uniform(rng, (2, 3), -2.8, -2.2, dtype),)),
    ]


def gen_digamma(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        *unary("digamma", in_range(0.5, 4.0))(rng, dtype),
        Case("negative", call("digamma"), (uniform(rng, (2, 3), -1.8, -1.2, dtype),)),
    ]


def gen_is_finite(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (2, 3), dtype)
    y = x.copy()
    y[0, :] = [np.inf, -np.inf, np.nan]
    # A bool output: float0 tangents (no finite differences at the non-finite points).
    return [Case("finite", call("is_finite"), (x,)), Case("non-finite", call("is_finite"), (y,), grads=False)]


def gen_round(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = off_the_steps(rng, (2, 3), dtype)
    return [
        Case("default", call("round"), (x,)),
        *[Case(f"method={m}", call("round", m), (x,)) for m in (0, 1)],
    ]


def gen_integer_pow(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        Case(f"y={y}", call("integer_pow", y), (away_from_zero(rng, (2, 3), dtype),))
        for y in (0, 1, 2, 3, -2)
    ]


def gen_rem(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    # x = y * (k + f) with f away from the jumps at integers.
    def draw(shape: tuple[int, ...]) -> tuple[NDArray, NDArray]:
        y = rng.uniform(1.5, 2.5, shape) * rng.choice([-1.0, 1.0], shape)
        x = y * (rng.integers(-2, 3, shape) + rng.uniform(0.2, 0.8, shape))
        return x.astype(dtype), y.astype(dtype)

    # float16 differences of x near 5 are a few ulps: checked against JAX only.
    return [Case(str(s), lambda L: L.rem, draw(s), grads=dtype != F16) for s in shapes(dtype)]


def gen_pow(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    cases = binary("pow", in_range(0.5, 2.0), in_range(-1.5, 1.5))(rng, dtype)
    n = rng.integers(-2, 4, (2, 3)).astype(np.int32)
    cases.append(Case("int_exponent", lambda L: L.pow, (uniform(rng, (2, 3), 0.5, 2.0, dtype), n)))
    # A zero base with positive exponents, a zero exponent.
    zero_base = np.array([0.0, 0.0, 1.5], dtype), np.array([1.0, 2.5, 0.0], dtype)
    cases.append(Case("zero_base", lambda L: L.pow, zero_base, grads=False))
    zero_zero = np.array([0.0], dtype), np.array([0.0], dtype)
    note = "JAX's d/dx x**y at x = y = 0 is NaN for a float y (y * x**(y - 1)); ferrax's is 0"
    cases.append(Case("zero_to_zero", lambda L: L.pow, zero_zero, grads=False, jax_differs=note))
    return cases


def extremum(name: str) -> Gen:
    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        cases = binary(name)(rng, dtype)
        x = normal(rng, (4,), dtype)
        y = x.copy()
        y[1::2] = normal(rng, (2,), dtype)
        cases.append(Case("ties", lambda L: getattr(L, name), (x, y), grads=False))
        return cases

    return gen


def gen_select_n(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x, y, z = (normal(rng, (2, 3), dtype) for _ in range(3))
    which_bool = rng.integers(0, 2, (2, 3)).astype(bool)
    which_int = rng.integers(0, 3, (2, 3)).astype(np.int32)
    return [
        Case("bool", lambda L: L.select_n, (which_bool, x, y)),
        Case("int32", lambda L: L.select_n, (which_int, x, y, z)),
        Case("scalar_pred", lambda L: L.select_n, (np.array(True), x, y)),
        Case("one_constant_case", lambda L: lambda p, a: L.select_n(p, a, np.ones((2, 3), dtype)), (which_bool, x)),
    ]


def gen_clamp(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (2, 3), dtype) * np.asarray(2, dtype)
    lo = uniform(rng, (2, 3), -1.0, -0.1, dtype)
    hi = uniform(rng, (2, 3), 0.1, 1.0, dtype)
    return [
        Case("arrays", lambda L: L.clamp, (lo, x, hi)),
        Case("scalar_bounds", lambda L: lambda a: L.clamp(np.asarray(-0.5, dtype), a, np.asarray(0.7, dtype)), (x,)),
        Case(
            "scalar_bounds_with_tangents",
            lambda L: L.clamp,
            (np.asarray(-0.5, dtype), x, np.asarray(0.7, dtype)),
            jax_differs="JAX's clamp JVP raises for scalar bounds with tangents (select of unequal shapes)",
        ),
    ]


def gen_convert(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    # Narrowing is checked against JAX, not by finite differences (the differences
    # would be the narrower type's rounding).
    other = F16 if dtype == F32 else F32
    x = normal(rng, (2, 3), dtype) * np.asarray(10, dtype)
    i = rng.integers(-9, 9, (2, 3)).astype(np.int32)
    return [
        Case("to_float", lambda L: lambda a: L.convert_element_type(a, other), (x,), grads=other.itemsize >= dtype.itemsize),
        Case("to_int", lambda L: lambda a: L.convert_element_type(a, np.int32), (x,)),
        Case("from_int", lambda L: lambda a: L.convert_element_type(a, dtype), (i,)),
    ]


# -------------------------------------------------------------------- reduction cases

REDUCTION_SHAPES = [((3, 4), (1,)), ((3, 5), (0, 1)), ((2, 3, 4), (0, 2)), ((4,), (0,))]


def reduction(name: str, *, ties: bool = False, zeros: bool = False) -> Gen:
    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        # float16 differences of a product of many elements are mostly rounding: those
        # are checked against JAX only.
        def grads(shape: tuple[int, ...], axes: tuple[int, ...]) -> bool:
            return dtype != F16 or not zeros or int(np.prod([shape[a] for a in axes])) <= 4

        cases = [
            Case(f"{s}{axes}", call(name, axes), (normal(rng, s, dtype),), grads(s, axes))
            for s, axes in REDUCTION_SHAPES
        ]
        if ties:
            x = np.tile(normal(rng, (1, 3), dtype), (4, 1))
            cases.append(Case("ties", lambda L: lambda a: getattr(L, name)(a, (0,)), (x,), grads=False))
            # A NaN is the extremum, equal to nothing: NaN tangents, as JAX's; infinities.
            x = normal(rng, (3, 4), dtype)
            x[0, 1], x[1, 2], x[2, 0] = np.nan, np.inf, -np.inf
            cases.append(Case("nan_inf", lambda L: lambda a: getattr(L, name)(a, (1,)), (x,), grads=False))
        if zeros:
            x = normal(rng, (3, 5), dtype)
            x[0, 1] = x[1, 1] = x[1, 3] = 0
            cases.append(Case("zeros", lambda L: lambda a: getattr(L, name)(a, (1,)), (x,), grads((3, 5), (1,))))
            odd = normal(rng, (7, 2), dtype)
            cases.append(Case("odd", lambda L: lambda a: getattr(L, name)(a, (0,)), (odd,), grads((7, 2), (0,))))
        return cases

    return gen


def arg_reduction(name: str) -> Gen:
    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        x = normal(rng, (3, 4), dtype)
        return [
            Case(f"axis{a}", call(name, a, np.int32), (x,)) for a in (0, 1)
        ]

    return gen


# ------------------------------------------------------------------- structural cases


def gen_broadcast_in_dim(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    specs = [((3,), (2, 3), (1,)), ((), (2, 2), ()), ((3, 1), (3, 4), (0, 1)), ((2, 3), (2, 4, 3), (0, 2))]
    return [
        Case(f"{a}to{s}", call("broadcast_in_dim", s, d), (normal(rng, a, dtype),))
        for a, s, d in specs
    ]


def gen_reshape(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (2, 3), dtype)
    return [
        Case("rows", lambda L: lambda a: L.reshape(a, (3, 2)), (x,)),
        Case("dimensions", lambda L: lambda a: L.reshape(a, (6,), (1, 0)), (x,)),
        Case("scalar", lambda L: lambda a: L.reshape(a, (1, 1)), (normal(rng, (), dtype),)),
    ]


def gen_transpose(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        Case("3d", lambda L: lambda a: L.transpose(a, (2, 0, 1)), (normal(rng, (2, 3, 4), dtype),)),
        Case("2d", lambda L: lambda a: L.transpose(a, (1, 0)), (normal(rng, (2, 3), dtype),)),
    ]


def gen_squeeze(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        Case("two_axes", lambda L: lambda a: L.squeeze(a, (0, 2)), (normal(rng, (1, 3, 1), dtype),)),
        Case("to_scalar", lambda L: lambda a: L.squeeze(a, (0,)), (normal(rng, (1,), dtype),)),
    ]


def gen_expand_dims(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        Case("front", lambda L: lambda a: L.expand_dims(a, (0,)), (normal(rng, (3,), dtype),)),
        Case("two", lambda L: lambda a: L.expand_dims(a, (0, 2)), (normal(rng, (2, 3), dtype),)),
    ]


def gen_concatenate(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x, y, c = normal(rng, (2, 3), dtype), normal(rng, (2, 1), dtype), normal(rng, (1, 3), dtype)
    return [
        Case("two", lambda L: lambda a, b: L.concatenate([a, b], 1), (x, y)),
        # An operand without a tangent (a constant): its tangent is zeros.
        Case("constant", lambda L: lambda a: L.concatenate([c, a, c], 0), (x,)),
    ]


def gen_split(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (3, 5), dtype)
    return [
        # Every piece used (joined again in another order).
        Case("pieces", lambda L: lambda a: L.concatenate(L.split(a, (2, 0, 3), 1)[::-1], 1), (x,)),
        # Only some pieces used: the others' cotangents are zeros.
        Case("one used", lambda L: lambda a: L.split(a, (1, 2), 0)[1], (x,)),
    ]


def linalg_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """jaxlib's LAPACK kernels take float32 and float64 only (JAX and ferrax refuse
    float16): the float16 run checks the float32 cases again, at its tolerances."""
    return F32 if dtype == F16 else dtype


def well_conditioned(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> NDArray:
    """A random matrix (batch) with a dominant diagonal: triangular solves and LU
    pivots stay well away from ties and singularity."""
    n = min(shape[-2:])
    x = rng.standard_normal(shape)
    x[..., range(n), range(n)] += 4.0 * np.sign(x[..., range(n), range(n)] + 0.5)
    return x.astype(dtype)


def spd(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> NDArray:
    x = rng.standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def gen_cholesky(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    d = linalg_dtype(dtype)
    op: Op = lambda L: lambda a: L.linalg.cholesky(a)
    return [Case("3x3", op, (spd(rng, (3, 3), d),)), Case("batched", op, (spd(rng, (2, 4, 4), d),))]


def gen_triangular_solve(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    d = linalg_dtype(dtype)

    def solve(**kw: bool) -> Op:
        return lambda L: lambda a, b: L.linalg.triangular_solve(a, b, **kw)

    a, a2 = well_conditioned(rng, (3, 3), d), well_conditioned(rng, (2, 3, 3), d)
    return [
        Case("left lower", solve(left_side=True, lower=True), (a, normal(rng, (3, 2), d))),
        Case("left upper transposed", solve(left_side=True, transpose_a=True), (a, normal(rng, (3, 4), d))),
        Case("right unit", solve(lower=True, unit_diagonal=True), (a2, normal(rng, (2, 4, 3), d))),
        Case("right transposed", solve(transpose_a=True), (a, normal(rng, (2, 3), d))),
    ]


def gen_lu(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    d = linalg_dtype(dtype)
    op: Op = lambda L: lambda a: L.linalg.lu(a)[0]
    # (Second differences of a 3x3 LU in float32 are often too coarse to check the
    # second order, in JAX too: the square case is 2x2.)
    return [
        Case("square", op, (well_conditioned(rng, (2, 2), d),)),
        Case("wide batched", op, (well_conditioned(rng, (2, 2, 3), d),)),
        Case("tall", op, (well_conditioned(rng, (4, 2), d),)),
    ]


def gen_eigh(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    d = linalg_dtype(dtype)
    # Well-separated eigenvalues (distinct, as the rule assumes); eigenvectors through a
    # sign-invariant function (their signs are LAPACK's choice).
    base = np.diag([1.0, 3.0, 6.0])
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    a = (q @ base @ q.T + 0.1 * spd(rng, (3, 3), np.dtype(np.float64))).astype(d)
    # (The eigenvalues alone fail reverse-mode check_grads against float32 finite
    # differences in JAX too, with the same gradients: compared with JAX only.)
    return [
        Case("values", lambda L: lambda x: L.linalg.eigh(x)[1], (a,), grads=False),
        Case("vectors squared", lambda L: lambda x: L.mul(L.linalg.eigh(x)[0], L.linalg.eigh(x)[0]), (a,)),
        Case("batched", lambda L: lambda x: L.linalg.eigh(x)[1], (np.stack([a, a * 2]),), grads=False),
    ]


def gen_qr(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    d = linalg_dtype(dtype)

    def op(full: bool, axis: int) -> Op:
        # q and r joined (along the dimension they share) into one output.
        return lambda L: lambda a: L.concatenate(L.linalg.qr(a, full_matrices=full), a.ndim + axis)

    # Tall (reduced and full q) and wide (batched): every branch of JAX's rule.
    return [
        Case("tall reduced", op(False, -2), (well_conditioned(rng, (4, 2), d),)),
        Case("tall full", op(True, -1), (well_conditioned(rng, (3, 2), d),)),
        Case("wide batched", op(False, -1), (well_conditioned(rng, (2, 2, 3), d),)),
        Case("tall pivoted", lambda L: lambda a: L.concatenate(L.linalg.qr(a, pivoting=True, full_matrices=False)[:2], 0),
             (well_conditioned(rng, (4, 2), d),)),
    ]


def gen_geqrf(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    """JAX 0.10 has no derivative rule for geqrf (differentiating it raises there and in
    ferrax: test_linalg3.py checks that); behind stop_gradient, zeros."""
    d = linalg_dtype(dtype)

    def op(out: int) -> Op:
        def f(L: Any) -> Callable[..., Any]:
            geqrf = L.linalg.geqrf if L is lax else jax._src.lax.linalg.geqrf
            return lambda a: geqrf(L.stop_gradient(a))[out]

        return f

    return [
        Case("tall factors", op(0), (well_conditioned(rng, (4, 3), d),), grads=False),
        Case("wide batched taus", op(1), (well_conditioned(rng, (2, 2, 3), d),), grads=False),
    ]


def gen_geqp3(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    """No derivative rule in JAX 0.10 (as geqrf's); behind stop_gradient, zeros."""
    d = linalg_dtype(dtype)

    def op(out: int) -> Op:
        def f(L: Any) -> Callable[..., Any]:
            geqp3 = L.linalg.geqp3 if L is lax else jax._src.lax.linalg.geqp3
            return lambda a: geqp3(L.stop_gradient(a), L.full(a.shape[:-2] + a.shape[-1:], 0, np.int32))[out]

        return f

    return [
        Case("tall factors", op(0), (well_conditioned(rng, (4, 3), d),), grads=False),
        Case("wide batched taus", op(2), (well_conditioned(rng, (2, 2, 3), d),), grads=False),
    ]


def gen_householder_product(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    """No derivative rule in JAX 0.10 (as geqrf's); behind stop_gradient, zeros."""
    d = linalg_dtype(dtype)

    def op(L: Any) -> Callable[..., Any]:
        return lambda a, t: L.linalg.householder_product(L.stop_gradient(a), L.stop_gradient(t))

    return [
        Case("tall", op, (normal(rng, (4, 3), d), normal(rng, (2,), d)), grads=False),
        Case("batched square", op, (normal(rng, (2, 3, 3), d), normal(rng, (2, 3), d)), grads=False),
    ]


def gen_svd(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    d = linalg_dtype(dtype)

    def vectors(a: Any) -> Any:
        return a[..., :2, :2]

    # Distinct singular values (as the rule assumes); vectors through a sign-invariant
    # function (their signs are LAPACK's choice): u's rows times vt's columns squared.
    def op(full: bool) -> Op:
        def f(L: Any) -> Callable[..., Any]:
            def g(a: Any) -> Any:
                u, s, vt = L.linalg.svd(a, full_matrices=full)
                return L.mul(L.mul(vectors(u), vectors(u)), L.mul(vectors(vt), vectors(vt)))

            return g

        return f

    # (float32 second-order check_grads fails in JAX too, with the same values as
    # ferrax's: compared with JAX only.)
    return [
        Case("values", lambda L: lambda a: L.linalg.svd(a, compute_uv=False), (well_conditioned(rng, (2, 4, 2), d),), grads=False),
        Case("tall vectors", op(False), (well_conditioned(rng, (3, 2), d),), grads=False),
        Case("wide vectors", op(False), (well_conditioned(rng, (2, 3), d),), grads=False),
    ]


def gen_stack(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x, y = normal(rng, (3, 4), dtype), normal(rng, (3, 4), dtype)
    return [
        Case("axis 1", lambda L: lambda a, b: L.stack([a, b, a], axis=1), (x, y)),
        Case("last axis", lambda L: lambda a: L.stack([a], axis=-1), (x,)),
    ]


def gen_unstack(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (3, 4), dtype)
    return [
        # Every result used (stacked again in another order); only one used.
        Case("all", lambda L: lambda a: L.stack(L.unstack(a, axis=1)[::-1], axis=0), (x,)),
        Case("one used", lambda L: lambda a: L.unstack(a, axis=0)[1], (x,)),
    ]


def gen_tile(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (2, 3), dtype)
    return [
        Case("2x3", lambda L: lambda a: L.tile(a, (2, 3)), (x,)),
        Case("zero reps", lambda L: lambda a: L.tile(a, (1, 0)), (x,)),
    ]


def gen_optimization_barrier(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x, y = normal(rng, (2, 3), dtype), normal(rng, (2, 3), dtype)
    return [
        Case("two", lambda L: lambda a, b: L.sub(*L.optimization_barrier((L.sin(a), b))), (x, y)),
        Case("one used", lambda L: lambda a, b: L.optimization_barrier([a, b])[1], (x, y)),
    ]


def gen_pad(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x, v = normal(rng, (3, 4), dtype), normal(rng, (), dtype)
    return [
        Case("edges", call("pad", ((1, 2, 0), (0, 1, 0))), (x, v)),
        Case("interior_and_crop", call("pad", ((0, 0, 1), (-1, 2, 2))), (x, v)),
        Case("constant_value", lambda L: lambda a: L.pad(a, np.asarray(0, dtype), ((2, 0, 1), (1, -2, 0))), (x,)),
        Case("value_only", lambda L: lambda b: L.pad(x, b, ((1, 1, 1), (0, 0, 0))), (v,)),
    ]


def gen_slice(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (5, 4), dtype)
    return [
        Case("unit", lambda L: lambda a: L.slice(a, (1, 0), (4, 3)), (x,)),
        Case("strided", lambda L: lambda a: L.slice(a, (0, 1), (5, 4), (2, 2)), (x,)),
    ]


def gen_dynamic_slice(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (5, 4), dtype)
    i, j = np.asarray(3, np.int32), np.asarray(-1, np.int32)
    return [
        Case("static", lambda L: lambda a: L.dynamic_slice(a, (1, 2), (2, 2)), (x,)),
        # Indices as operands (traced under jit; float0 tangents), one past the end.
        Case("operands", lambda L: lambda a, p, q: L.dynamic_slice(a, (p, q), (3, 2)), (x, i, j)),
    ]


def gen_dynamic_update_slice(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x, u = normal(rng, (5, 4), dtype), normal(rng, (2, 3), dtype)
    return [
        Case("both", lambda L: lambda a, b: L.dynamic_update_slice(a, b, (1, 1)), (x, u)),
        Case("operand_only", lambda L: lambda a: L.dynamic_update_slice(a, u, (2, 0)), (x,)),
        Case("update_only", lambda L: lambda b, p: L.dynamic_update_slice(x, b, (p, 1)), (u, np.asarray(3, np.int32))),
    ]


def gen_iota(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        Case("float", lambda L: lambda: L.iota(dtype, 5), ()),
        Case("broadcasted", lambda L: lambda: L.broadcasted_iota(np.int32, (2, 3), 1), ()),
        Case("times_x", lambda L: lambda a: L.mul(a, L.iota(dtype, 4)), (normal(rng, (4,), dtype),)),
    ]


def gen_dot_general(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    mm = (((1,), (0,)), ((), ()))
    batched = (((2,), (1,)), ((0,), (0,)))
    cases = [
        Case("matmul", lambda L: lambda a, b: L.dot_general(a, b, mm), (normal(rng, (3, 4), dtype), normal(rng, (4, 5), dtype))),
        Case("batched", lambda L: lambda a, b: L.dot_general(a, b, batched), (normal(rng, (2, 3, 4), dtype), normal(rng, (2, 4, 5), dtype))),
        Case("vector", lambda L: lambda a, b: L.dot_general(a, b, (((0,), (0,)), ((), ()))), (normal(rng, (4,), dtype), normal(rng, (4,), dtype))),
    ]
    w = normal(rng, (4, 2), dtype)
    cases.append(Case("constant_rhs", lambda L: lambda a: L.dot_general(a, w, mm), (normal(rng, (3, 4), dtype),)))
    i = rng.integers(-3, 4, (3, 4)).astype(np.int32)
    cases += [
        # Mixed dtypes (the result is the wider; checked against JAX only: differences
        # in a float16 operand are its rounding) and an integer operand (no tangent).
        Case("mixed", lambda L: lambda a, b: L.dot_general(a, b, mm), (normal(rng, (3, 4), F16), normal(rng, (4, 5), dtype)), grads=False),
        Case("int_lhs", lambda L: lambda a, b: L.dot_general(a, b, mm, preferred_element_type=dtype), (i, normal(rng, (4, 5), dtype))),
    ]
    if dtype == F16:
        cases.append(
            Case(
                "preferred_f32",
                lambda L: lambda a, b: L.dot_general(a, b, mm, preferred_element_type=np.float32),
                (normal(rng, (3, 4), dtype), normal(rng, (4, 5), dtype)),
            )
        )
    return cases


def gen_conv_general_dilated(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    conv = "conv_general_dilated"
    cases = [
        Case("2d_same_strided", call(conv, (2, 1), "SAME"), (normal(rng, (2, 3, 5, 4), dtype), normal(rng, (4, 3, 3, 2), dtype))),
        Case(
            "1d_nhc_dilated_groups",
            call(conv, (2,), ((2, 1),), (2,), (2,), ("NHC", "HIO", "NHC"), 2),
            (normal(rng, (2, 6, 4), dtype), normal(rng, (3, 2, 6), dtype)),
        ),
        Case("1d_batch_groups", call(conv, (1,), ((0, 1),), batch_group_count=2), (normal(rng, (4, 2, 5), dtype), normal(rng, (4, 2, 2), dtype))),
    ]
    w = normal(rng, (2, 3, 2), dtype)
    cases.append(Case("constant_rhs", lambda L: lambda a: L.conv_general_dilated(a, w, (1,), "VALID"), (normal(rng, (2, 3, 4), dtype),)))
    if dtype == F16:
        cases.append(
            Case(
                "preferred_f32",
                call(conv, (1,), "SAME", preferred_element_type=np.float32),
                (normal(rng, (1, 2, 5), dtype), normal(rng, (3, 2, 3), dtype)),
            )
        )
    return cases


def gen_copy(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    def op(L: Any) -> Callable[..., Any]:
        return structural.copy if L is lax else L.copy_p.bind

    return [Case(str(s), op, (normal(rng, s, dtype),)) for s in shapes(dtype)]


# ------------------------------------------------------------------ gather and scatter


def gen_gather(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (5, 3), dtype)
    rows = np.array([[0], [4], [2], [2]], np.int32)
    out_of_range = np.array([[0], [7], [-2]], np.int32)
    points = np.array([[0, 1], [4, 2], [3, 0]], np.int32)

    def rows_of(idx: NDArray, mode: str, **kw: Any) -> Op:
        return lambda L: lambda a: L.gather(a, idx, L.GatherDimensionNumbers((1,), (0,), (0,)), (1, 3), mode=mode, **kw)

    def elements(L: Any) -> Callable[..., Any]:
        return lambda a, i: L.gather(a, i, L.GatherDimensionNumbers((), (0, 1), (0, 1)), (1, 1), mode="clip")

    return [
        Case("rows", rows_of(rows, "promise_in_bounds"), (x,)),
        Case("clip", rows_of(out_of_range, "clip"), (x,)),
        Case("fill", rows_of(out_of_range, "fill", fill_value=0.5), (x,)),
        # NaN filling (the default) has NaN differences: checked against JAX only.
        Case("fill_nan", rows_of(out_of_range, "fill"), (x,), grads=False),
        Case("indices_operand", elements, (x, points)),
    ]


SCATTER_IDX = np.array([[0], [2], [2], [4]], np.int32)  # a repeated position
UNIQUE_IDX = np.array([[0], [2], [3], [4]], np.int32)
OUT_OF_RANGE_IDX = np.array([[1], [7], [3], [-3]], np.int32)


def scatter_op(name: str, idx: NDArray, **kw: Any) -> Op:
    def op(L: Any) -> Callable[..., Any]:
        dn = L.ScatterDimensionNumbers((1,), (0,), (0,))
        return lambda a, u: getattr(L, name)(a, idx, u, dn, **kw)

    return op


def scatter_gen(name: str, *, extremal: bool = False) -> Gen:
    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        x, u = normal(rng, (5, 3), dtype), normal(rng, (4, 3), dtype)
        clip_note = (
            "JAX's scatter-min/max rule reads the operand back with FILL_OR_DROP gathers "
            "whatever the mode: NaN tangents where a clipped index is out of range"
        )
        cases = [
            Case("repeated", scatter_op(name, SCATTER_IDX), (x, u)),
            Case("clip", scatter_op(name, OUT_OF_RANGE_IDX, mode="clip"), (x, u), jax_differs=clip_note if extremal else ""),
            Case("drop", scatter_op(name, OUT_OF_RANGE_IDX), (x, u)),
            Case("updates_only", lambda L: lambda b: scatter_op(name, SCATTER_IDX)(L)(x, b), (u,)),
        ]
        if extremal:
            tied_u = u.copy()
            tied_u[2] = tied_u[1]  # two updates tie at row 2
            tied_x = x.copy()
            tied_x[0] = tied_u[0]  # an update ties with the operand at row 0
            cases.append(Case("ties", scatter_op(name, SCATTER_IDX), (tied_x, tied_u), grads=False))
        return cases

    return gen


def gen_scatter_mul(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x, u = normal(rng, (5, 3), dtype), normal(rng, (4, 3), dtype)
    return [
        Case("unique", scatter_op("scatter_mul", UNIQUE_IDX, unique_indices=True), (x, u)),
        # Repeated positions: only the operand may have a tangent (as in JAX).
        Case("operand_only", lambda L: lambda a: scatter_op("scatter_mul", SCATTER_IDX)(L)(a, u), (x,)),
    ]


def gen_scatter(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x, u = normal(rng, (5, 3), dtype), normal(rng, (4, 3), dtype)
    # Positions are distinct (which of repeated updates wins is unspecified), but only
    # the first case promises it: the others take JAX's general rule.
    return [
        Case("unique", scatter_op("scatter", UNIQUE_IDX, unique_indices=True), (x, u)),
        Case("general", scatter_op("scatter", UNIQUE_IDX), (x, u)),
        Case("drop", scatter_op("scatter", OUT_OF_RANGE_IDX), (x, u)),
        Case("updates_only", lambda L: lambda b: scatter_op("scatter", UNIQUE_IDX)(L)(x, b), (u,)),
    ]


def gen_rev(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (3, 4), dtype)
    return [Case(str(d), call("rev", d), (x,)) for d in [(0,), (1,), (0, 1)]]


def gen_sort(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    # Distinct float keys (ties would make finite differences meaningless); integer keys
    # with ties in the lexicographic cases.
    x, y = normal(rng, (3, 5), dtype), normal(rng, (3, 5), dtype)
    k = rng.integers(0, 2, (3, 5)).astype(np.int32)
    return [
        Case("last", lambda L: lambda a: L.sort(a), (x,)),
        Case("first", lambda L: lambda a: L.sort(a, dimension=0), (x,)),
        # One output per case (the checks take one): the values, or the second key.
        Case("key_val", lambda L: lambda a, b: L.sort_key_val(a, b)[1], (x, y)),
        Case("two_keys", lambda L: lambda i, a, b: L.sort((i, a, b), dimension=1, num_keys=2)[2], (k, x, y)),
        Case("second_key", lambda L: lambda i, a, b: L.sort((i, a, b), dimension=1, num_keys=2)[1], (k, x, y)),
        Case("int_key", lambda L: lambda i, a: L.sort((i, a), dimension=0, num_keys=1)[1], (k, x)),
    ]


def gen_top_k(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (3, 5), dtype)
    return [
        Case("values", lambda L: lambda a: L.top_k(a, 2)[0], (x,)),
        Case("axis 0", lambda L: lambda a: L.top_k(a, 3, axis=0)[0], (x,)),
        Case("positions", lambda L: lambda a: L.top_k(a, 2)[1], (x,)),
    ]


def spread(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> NDArray:
    """Distinct values at least 0.08 apart (a window's max stays put under finite
    differences, in float16 too)."""
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n / 2) * 0.1 + rng.uniform(0, 0.02, n)).reshape(shape).astype(dtype)


def windowed(name: str) -> Gen:
    """Pooling: ``lax.reduce_window`` with ``add``/``max``/``min`` and their identities
    (binding reduce_window_sum/max/min), a product (the generic reduce_window), and the
    primitives of max pooling's derivatives, bound directly (JAX's private helpers)."""

    def sga(L: Any) -> Any:
        if L is lax:
            from ferrax._lax.windowed import _select_and_gather_add

            return lambda t, a, *w: _select_and_gather_add(t, a, "ge", *w)
        from jax._src.lax import windowed_reductions as wr

        return lambda t, a, *w: wr._select_and_gather_add(t, a, jlax.ge_p, *w)

    def sas(L: Any) -> Any:
        if L is lax:
            from ferrax._lax.windowed import _select_and_scatter_add

            return lambda s, a, *w: _select_and_scatter_add(s, a, "le", *w)
        from jax._src.lax import windowed_reductions as wr

        return lambda s, a, *w: wr._select_and_scatter_add(s, a, jlax.le_p, *w)

    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        x = spread(rng, (4, 6), dtype)
        pads = ((1, 0), (0, 1))
        if name == "reduce_window":
            one = np.asarray(1, dtype)
            x = uniform(rng, (4, 6), 0.8, 1.25, dtype)
            return [
                # JAX's reduce_window has no reverse mode (nor linearize): the forward
                # rule is checked against finite differences in test_windowed.py.
                Case("product", lambda L: lambda a: L.reduce_window(a, one, L.mul, (2, 2), (1, 2), pads), (x,), grads=False),
            ]
        if name == "select_and_gather_add":
            t = normal(rng, (4, 6), dtype)
            return [
                Case("ge", lambda L: lambda t, a: sga(L)(t, a, (2, 2), (2, 2), pads, (1, 1), (1, 1)), (t, x)),
                Case("dilated", lambda L: lambda t, a: sga(L)(t, a, (2, 3), (1, 2), pads, (2, 1), (1, 1)), (t, x)),
            ]
        if name == "select_and_scatter_add":
            src = normal(rng, (2, 3), dtype)
            return [Case("le", lambda L: lambda s, a: sas(L)(s, a, (2, 2), (2, 2), pads), (src, x))]
        op, init = {
            "reduce_window_sum": ("add", 0.0),
            "reduce_window_max": ("max", -np.inf),
            "reduce_window_min": ("min", np.inf),
        }[name]
        # Window dilation for the sum only: max/min pooling has no reverse mode with it
        # (JAX's select_and_gather_add transpose refuses it; test_windowed.py checks).
        wdil = (1, 2) if name == "reduce_window_sum" else (1, 1)
        return [
            Case("pool", lambda L: lambda a: L.reduce_window(a, init, getattr(L, op), (2, 2), (2, 2), "VALID"), (x,)),
            Case(
                "dilated",
                lambda L: lambda a: L.reduce_window(a, init, getattr(L, op), (2, 3), (1, 2), "SAME", (2, 1), wdil),
                (x,),
            ),
        ]

    return gen


def cumulative(name: str) -> Gen:
    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        # cumprod: factors near 1 (float32 second differences of large products are noise).
        x = uniform(rng, (3, 4), 0.8, 1.25, dtype) if name == "cumprod" else normal(rng, (3, 4), dtype)
        return [
            Case(f"axis{axis}{' reverse' if rev else ''}", call(name, axis, rev), (x,))
            for axis, rev in [(0, False), (1, True)]  # both axes, both directions
        ]

    return gen


def _named(L: Any, spec: tuple[Any, ...]) -> Any:
    """A NamedSharding of ``spec`` on a mesh of the four test devices, in ferrax's or
    JAX's classes as ``L`` is ferrax.lax or jax.lax."""
    if L is lax:
        from ferrax.sharding import Mesh, NamedSharding, PartitionSpec

        return NamedSharding(Mesh(np.array(ferrax.devices()), ("x",)), PartitionSpec(*spec))
    return jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(jax.devices()), ("x",)), jax.sharding.PartitionSpec(*spec))


def gen_sharding_constraint(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (4, 3), dtype)
    def op(spec: tuple[Any, ...]) -> Op:
        return lambda L: lambda a: L.with_sharding_constraint(L.sin(a), _named(L, spec))

    return [Case(str(spec), op(spec), (x,), mesh="x=4") for spec in [(), ("x",), (None, None)]]


# -------------------------------------------------------------------- collectives
# A collective means something only over a bound axis name: each case runs it in a
# shard_map over a mesh of the first four CPU devices, (2, 2) with axes x and y (one
# mesh for the whole table, which one jit stages), written once for both libraries
# (ferrax.shard_map or jax.shard_map, chosen by the lax module the op is given). Under
# jvp, the shard_map's rule differentiates its body, so the collective's own rule runs;
# reverse mode transposes it (psum <-> pvary, ...).


def scase(label: str, op: Op, args: tuple[NDArray, ...], **kw: Any) -> Case:
    """A case whose op is a shard_map (see :func:`in_shard_map`)."""
    return Case(label, op, args, mesh="x=2,y=2", **kw)


def in_shard_map(body: Op, in_specs: list[tuple[Any, ...]], out_spec: tuple[Any, ...]) -> Op:
    """``body`` (an op) in a shard_map over the (2, 2) mesh with these specs (tuples of
    entries)."""

    def op(L: Any) -> Callable[..., Any]:
        if L is lax:
            devices, sm, P, Mesh = ferrax.devices(), ferrax.shard_map, ferrax.sharding.PartitionSpec, ferrax.sharding.Mesh
        else:
            devices, sm, P, Mesh = jax.devices(), jax.shard_map, jax.sharding.PartitionSpec, jax.sharding.Mesh
        grid = Mesh(np.array(devices[:4], dtype=object).reshape(2, 2), ("x", "y"))
        return sm(body(L), mesh=grid, in_specs=tuple(P(*s) for s in in_specs), out_specs=P(*out_spec))  # type: ignore[no-any-return]

    return op


def gen_psum(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        scase("x", in_shard_map(lambda L: lambda a: L.psum(a, "x"), [("x",)], ()), (normal(rng, (4, 3), dtype),)),
        scase("both", in_shard_map(lambda L: lambda a: L.psum(a, ("x", "y")), [("x", "y")], ()), (normal(rng, (4, 6), dtype),)),
        scase("y", in_shard_map(lambda L: lambda a: L.psum(a * a, "y"), [("x", "y")], ("x",)), (normal(rng, (4, 6), dtype),)),
    ]


def gen_extremum(name: str) -> Gen:
    note = f"JAX 0.10 has no derivative rule for {name} (ferrax's is reduce_max's)"

    def gen(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
        return [
            scase("x", in_shard_map(lambda L: lambda a: getattr(L, name)(a, "x"), [("x",)], ()), (normal(rng, (4, 3), dtype),), jax_differs=note),
            scase("both", in_shard_map(lambda L: lambda a: getattr(L, name)(a, ("x", "y")), [("x", "y")], ()), (normal(rng, (4, 6), dtype),), jax_differs=note),
        ]

    return gen


def gen_pvary(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [scase("replicated", in_shard_map(lambda L: lambda a: L.pcast(a * a, "x", to="varying"), [()], ("x",)), (normal(rng, (2, 3), dtype),))]


def gen_all_gather(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    x = normal(rng, (4, 3), dtype)
    return [
        scase("stacked", in_shard_map(lambda L: lambda a: L.all_gather(a, "x"), [("x",)], ("x",)), (x,)),
        scase("tiled", in_shard_map(lambda L: lambda a: L.all_gather(a, "y", axis=1, tiled=True), [("x",)], ("x", "y")), (x,)),
    ]


def gen_reduce_scatter(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        scase("tiled", in_shard_map(lambda L: lambda a: L.psum_scatter(a, "x", tiled=True), [("x",)], ("x",)), (normal(rng, (8, 3), dtype),)),
        # No untiled case: JAX's vmap of an untiled psum_scatter batched after its
        # scatter dimension fails (IndexError), and the batching table compares with it;
        # tests/test_shard_map.py checks the untiled form (and its vmap against a loop).
    ]


def gen_ppermute(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        scase("swap", in_shard_map(lambda L: lambda a: L.ppermute(a, "x", [(0, 1), (1, 0)]), [("x",)], ("x",)), (normal(rng, (4, 3), dtype),)),
        scase("partial", in_shard_map(lambda L: lambda a: L.ppermute(a, ("x", "y"), [(0, 2), (3, 1)]), [("x", "y")], ("x", "y")), (normal(rng, (4, 6), dtype),)),
    ]


def gen_all_to_all(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        scase("tiled", in_shard_map(lambda L: lambda a: L.all_to_all(a, "x", 0, 1, tiled=True), [("x",)], ("x",)), (normal(rng, (8, 3), dtype),)),
        scase("untiled", in_shard_map(lambda L: lambda a: L.all_to_all(a, "y", 1, 0), [("x",)], ("x", "y")), (normal(rng, (4, 2), dtype),)),
    ]


def gen_axis_index(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    def body(L: Any) -> Callable[[Any], Any]:
        return lambda a: L.mul(a, L.convert_element_type(L.axis_index("x"), a.dtype))

    return [scase("scaled", in_shard_map(body, [("x",)], ("x",)), (normal(rng, (4, 3), dtype),))]


def gen_shard_map(rng: np.random.Generator, dtype: np.dtype[Any]) -> list[Case]:
    return [
        scase("x", in_shard_map(lambda L: lambda a, b: L.mul(L.sin(a), b), [("x",), ()], ("x",)), (normal(rng, (4, 3), dtype), normal(rng, (2, 3), dtype))),
        scase("y", in_shard_map(lambda L: lambda a: L.tanh(a), [(None, "y")], (None, "y")), (normal(rng, (3, 4), dtype),)),
    ]


# ------------------------------------------------------------------------- the table

CASES: dict[str, Gen] = {
    "sharding_constraint": gen_sharding_constraint,
    "neg": unary("neg", normal),
    "abs": unary("abs", away_from_zero),
    "sign": unary("sign", away_from_zero),
    "exp": unary("exp", normal),
    "log": unary("log", in_range(0.5, 2.0)),
    "log1p": unary("log1p", in_range(-0.5, 1.0)),
    "expm1": unary("expm1", normal),
    "sin": unary("sin", normal),
    "cos": unary("cos", normal),
    "tan": unary("tan", in_range(-1.0, 1.0)),
    "tanh": unary("tanh", normal),
    "logistic": unary("logistic", normal),
    # special functions and the rest of the trigonometric family (issue 12)
    "erf_inv": unary("erf_inv", in_range(-0.8, 0.8)),
    "erf": unary("erf", normal),
    "erfc": unary("erfc", normal),
    "lgamma": gen_lgamma,
    "digamma": gen_digamma,
    "exp2": unary("exp2", normal),
    "cbrt": unary("cbrt", away_from_zero),
    "asin": unary("asin", in_range(-0.8, 0.8)),
    "acos": unary("acos", in_range(-0.8, 0.8)),
    "atan": unary("atan", normal),
    "sinh": unary("sinh", normal),
    "cosh": unary("cosh", normal),
    "asinh": unary("asinh", normal),
    "acosh": unary("acosh", in_range(1.2, 3.0)),
    "atanh": unary("atanh", in_range(-0.8, 0.8)),
    "atan2": binary("atan2", normal, away_from_zero),
    "is_finite": gen_is_finite,
    "sqrt": unary("sqrt", in_range(0.5, 2.0)),
    "rsqrt": unary("rsqrt", in_range(0.5, 2.0)),
    "square": unary("square", normal),
    "floor": unary("floor", off_the_steps),
    "ceil": unary("ceil", off_the_steps),
    "round": gen_round,
    "not": gen_not,
    "integer_pow": gen_integer_pow,
    "add": binary("add"),
    "sub": binary("sub"),
    "mul": binary("mul"),
    "div": binary("div", normal, away_from_zero),
    "rem": gen_rem,
    "pow": gen_pow,
    "max": extremum("max"),
    "min": extremum("min"),
    "and": integer_binary("bitwise_and"),
    "or": integer_binary("bitwise_or"),
    "xor": integer_binary("bitwise_xor"),
    "shift_left": integer_binary("shift_left", shifts=True),
    "shift_right_logical": integer_binary("shift_right_logical", shifts=True),
    "shift_right_arithmetic": integer_binary("shift_right_arithmetic", shifts=True),
    "population_count": gen_count_bits("population_count"),
    "clz": gen_count_bits("clz"),
    "bitcast_convert_type": gen_bitcast,
    "threefry2x32": gen_threefry2x32,
    "random_seed": gen_prng("seed"),
    "random_wrap": gen_prng("wrap"),
    "random_unwrap": gen_prng("wrap"),
    "random_split": gen_prng("split"),
    "random_bits": gen_prng("bits"),
    "random_fold_in": gen_prng("fold_in"),
    "random_clone": gen_prng("clone"),
    "eq": comparison("eq"),
    "ne": comparison("ne"),
    "lt": comparison("lt"),
    "le": comparison("le"),
    "gt": comparison("gt"),
    "ge": comparison("ge"),
    "select_n": gen_select_n,
    "clamp": gen_clamp,
    "convert_element_type": gen_convert,
    "reduce_sum": reduction("reduce_sum"),
    "reduce_max": reduction("reduce_max", ties=True),
    "reduce_min": reduction("reduce_min", ties=True),
    "reduce_prod": reduction("reduce_prod", zeros=True),
    "argmax": arg_reduction("argmax"),
    "argmin": arg_reduction("argmin"),
    # the logical reductions, nextafter and reduce_precision (issue 12)
    "reduce_and": logical_reduction("reduce_and"),
    "reduce_or": logical_reduction("reduce_or"),
    "reduce_xor": logical_reduction("reduce_xor"),
    "nextafter": gen_nextafter,
    "reduce_precision": gen_reduce_precision,
    "broadcast_in_dim": gen_broadcast_in_dim,
    "reshape": gen_reshape,
    "transpose": gen_transpose,
    "squeeze": gen_squeeze,
    "expand_dims": gen_expand_dims,
    "concatenate": gen_concatenate,
    "split": gen_split,
    "cholesky": gen_cholesky,
    "triangular_solve": gen_triangular_solve,
    "lu": gen_lu,
    "eigh": gen_eigh,
    "qr": gen_qr,
    "svd": gen_svd,
    "geqrf": gen_geqrf,
    "householder_product": gen_householder_product,
    "geqp3": gen_geqp3,
    "stack": gen_stack,
    "unstack": gen_unstack,
    "tile": gen_tile,
    "optimization_barrier": gen_optimization_barrier,
    "mulhi": integer_binary("mulhi", shifts=True),
    "pad": gen_pad,
    "slice": gen_slice,
    "dynamic_slice": gen_dynamic_slice,
    "dynamic_update_slice": gen_dynamic_update_slice,
    "dot_general": gen_dot_general,
    "conv_general_dilated": gen_conv_general_dilated,
    "iota": gen_iota,
    "copy": gen_copy,
    "gather": gen_gather,
    "scatter": gen_scatter,
    "scatter-add": scatter_gen("scatter_add"),
    "scatter-sub": scatter_gen("scatter_sub"),
    "scatter-mul": gen_scatter_mul,
    "scatter-min": scatter_gen("scatter_min", extremal=True),
    "scatter-max": scatter_gen("scatter_max", extremal=True),
    "rev": gen_rev,
    "sort": gen_sort,
    "top_k": gen_top_k,
    "cumsum": cumulative("cumsum"),
    "cumprod": cumulative("cumprod"),
    "cummax": cumulative("cummax"),
    "cummin": cumulative("cummin"),
    "cumlogsumexp": cumulative("cumlogsumexp"),
    "reduce_window_sum": windowed("reduce_window_sum"),
    "reduce_window_max": windowed("reduce_window_max"),
    "reduce_window_min": windowed("reduce_window_min"),
    "reduce_window": windowed("reduce_window"),
    "select_and_gather_add": windowed("select_and_gather_add"),
    "select_and_scatter_add": windowed("select_and_scatter_add"),
    "psum": gen_psum,
    "pmax": gen_extremum("pmax"),
    "pmin": gen_extremum("pmin"),
    "pvary": gen_pvary,
    "all_gather": gen_all_gather,
    "reduce_scatter": gen_reduce_scatter,
    "ppermute": gen_ppermute,
    "all_to_all": gen_all_to_all,
    "axis_index": gen_axis_index,
    "shard_map": gen_shard_map,
    # the incomplete gamma family (a in (0.5, 4), x in (0.1, 6): both the series and
    # the continued fraction; igamma_grad_a has no derivative, as in JAX)
    "igamma": first_order(binary("igamma", in_range(0.5, 4.0), in_range(0.1, 6.0))),
    "igammac": first_order(binary("igammac", in_range(0.5, 4.0), in_range(0.1, 6.0))),
    "igamma_grad_a": gen_igamma_grad_a,
}


def test_every_primitive_has_cases() -> None:
    table = set(ferrax._ir.builtin_primitives())
    missing = sorted(table - LEAD_OWNED - HOST_CALLBACKS - set(CASES))
    assert not missing, f"primitives without JVP cases: {missing}"
    assert not set(CASES) - table, "cases for primitives that are not in the table"
    rng = np.random.default_rng(0)
    for name, gen in CASES.items():
        assert all(gen(rng, d) for d in FLOATS), f"{name} generates no case"


def test_every_primitive_has_a_jvp_rule() -> None:
    # The whole table, the lead's primitives included (their behaviour is tested with
    # calls and control flow).
    from ferrax._lax.registry import primitive_named

    names = ferrax._ir.builtin_primitives()
    assert [n for n in names if primitive_named(n).jvp_rule is None] == []


def cases_of(name: str, dtype: np.dtype[Any]) -> list[Case]:
    """The cases of one primitive and dtype (seeded by both: reproducible)."""
    return CASES[name](np.random.default_rng(zlib.crc32(f"{name}-{dtype.name}".encode())), dtype)


# ------------------------------------------------------------------------- the checks


def is_float(x: Any) -> bool:
    return bool(np.dtype(x.dtype).kind == "f")


def tangents_for(rng: np.random.Generator, args: tuple[NDArray, ...]) -> tuple[NDArray, ...]:
    """A random tangent per float operand, float0 zeros for the others."""
    return tuple(
        np.asarray(rng.standard_normal(a.shape)).astype(a.dtype) if is_float(a) else np.zeros(a.shape, float0) for a in args
    )


def tolerance(dtype: np.dtype[Any]) -> float:
    return 2e-5 if dtype == F32 else 1e-2


def assert_same(actual: Any, expected: Any, dtype: np.dtype[Any], what: str) -> None:
    weak, j_weak = getattr(actual, "weak_type", False), getattr(expected, "weak_type", False)
    assert weak == j_weak, f"{what}: weak_type {weak}, JAX's is {j_weak}"
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype}, JAX's is {e.dtype}"
    assert a.shape == e.shape, f"{what}: shape {a.shape}, JAX's is {e.shape}"
    if a.dtype == float0:
        return
    if a.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e, err_msg=what)
    else:
        tol = tolerance(dtype)
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol, err_msg=what)


def staged_jvp(jvp: Callable[..., Any], f: Callable[..., Any], tangents: tuple[Any, ...]) -> Callable[..., Any]:
    """``jvp(f, args, tangents)`` as a function of the operands and of the float
    operands' tangents (the float0 ones are made inside): for ``jit``."""
    floats = [i for i, t in enumerate(tangents) if t.dtype != float0]

    def run(args: tuple[Any, ...], float_tangents: tuple[Any, ...]) -> Any:
        ts = list(tangents)
        for i, t in zip(floats, float_tangents):
            ts[i] = t
        p, t = jvp(f, tuple(args), tuple(ts))
        # ferrax.jit cannot return float0 arrays (JAX's jit can): integer outputs'
        # tangents are compared eagerly only.
        return p, t if is_float(p) else None

    return run


def float_parts(tangents: tuple[NDArray, ...]) -> tuple[NDArray, ...]:
    return tuple(t for t in tangents if t.dtype != float0)


def tangents_of(cases: list[Case]) -> list[tuple[NDArray, ...]]:
    rng = np.random.default_rng(1)
    return [tangents_for(rng, c.args) for c in cases]


def run_staged(
    jit: Callable[..., Any], jvp: Callable[..., Any], L: Any, cases: list[Case], tangents: list[tuple[NDArray, ...]]
) -> list[Any]:
    """The jvps of ``cases`` in one ``jit`` (integer operands traced)."""
    fns = [staged_jvp(jvp, c.op(L), t) for c, t in zip(cases, tangents)]
    staged = jit(lambda argss, tss: [fn(a, t) for fn, a, t in zip(fns, argss, tss)])
    return list(staged([c.args for c in cases], [float_parts(t) for t in tangents]))


@functools.cache
def staged_table(library: str, dtype: np.dtype[Any]) -> dict[str, list[Any]] | None:
    """Every case of every primitive (JAX's: those compared with JAX) staged in one
    ``jit`` of ``library`` per mesh (one for the cases without a mesh, one per mesh the
    others use: a jit holds one mesh), results by primitive name; None if that fails
    (each test then stages its own cases, to report its own error). A few compilations
    instead of one per primitive (or per primitive JAX runs eagerly) take most of this
    file's time."""
    groups: dict[str, tuple[list[str], list[Case], list[tuple[NDArray, ...]]]] = {}
    for name in CASES:
        cs = cases_of(name, dtype)
        ts = tangents_of(cs)
        for c, t in zip(cs, ts):
            if library == "ferrax" or not c.jax_differs:
                names, cases, tangents = groups.setdefault(c.mesh, ([], [], []))
                names.append(name)
                cases.append(c)
                tangents.append(t)
    table: dict[str, list[Any]] = {}
    for names, cases, tangents in groups.values():
        try:
            if library == "jax":
                results = run_staged(jax.jit, jax.jvp, jlax, cases, tangents)
            else:
                results = run_staged(ferrax.jit, ferrax.jvp, lax, cases, tangents)
        except Exception:
            return None
        for name, r in zip(names, results):
            table.setdefault(name, []).append(r)
    return table


# One worker per dtype (pytest-xdist's loadgroup): the staged tables are built once.
@pytest.mark.parametrize(
    "name, dtype",
    [pytest.param(n, d, id=f"{n}-{d.name}", marks=pytest.mark.xdist_group(f"jvp-{d.name}")) for n in CASES for d in FLOATS],
)
def test_jvp_matches_jax(name: str, dtype: np.dtype[Any]) -> None:
    cases = cases_of(name, dtype)
    tangents = tangents_of(cases)
    eager = [ferrax.jvp(c.op(lax), c.args, t) for c, t in zip(cases, tangents)]
    # (a) values and dtypes as JAX's (float0 tangents for integer and boolean outputs),
    # JAX's staged with every other primitive's.
    compared = [k for k, c in enumerate(cases) if not c.jax_differs]
    jax_table = staged_table("jax", dtype)
    theirs = (
        jax_table.get(name, [])  # none where every case differs from JAX
        if jax_table is not None
        else run_staged(jax.jit, jax.jvp, jlax, [cases[k] for k in compared], [tangents[k] for k in compared])
    )
    for k, (j_out, j_t_out) in zip(compared, theirs, strict=True):
        out, t_out = eager[k]
        assert_same(out, j_out, dtype, f"{cases[k].label}: primal")
        if is_float(out):
            assert_same(t_out, j_t_out, dtype, f"{cases[k].label}: tangent")
        else:  # JAX's tangent of an integer output: float0 zeros of its shape
            assert_same(t_out, np.zeros(j_out.shape, float0), dtype, f"{cases[k].label}: tangent")
    # (c) the same jvps staged under ferrax.jit equal the eager ones.
    fx_table = staged_table("ferrax", dtype)
    staged = fx_table.get(name, []) if fx_table is not None else run_staged(ferrax.jit, ferrax.jvp, lax, cases, tangents)
    for c, (out, t_out), (s_out, s_t_out) in zip(cases, eager, staged, strict=True):
        assert_same(s_out, out, dtype, f"{c.label}: staged primal")
        if is_float(out):
            assert_same(s_t_out, t_out, dtype, f"{c.label}: staged tangent")
    # (b) against finite differences.
    for c in cases:
        check_grads_fwd(c, dtype)


def of_floats(case: Case) -> tuple[Callable[..., Any], list[NDArray]] | None:
    """The case as a function of its float operands (the others closed over: integers
    have no tangent to check) and those operands; None when there is nothing to check
    against finite differences (no float operand or output, or ``grads`` off)."""
    f = case.op(lax)
    floats = [i for i, a in enumerate(case.args) if is_float(a)]
    if not (case.grads and floats and is_float(f(*case.args))):
        return None

    def fun(*xs: Any) -> Any:
        args = list(case.args)
        for i, x in zip(floats, xs):
            args[i] = x
        return f(*args)

    return fun, [case.args[i] for i in floats]


def check_grads_fwd(case: Case, dtype: np.dtype[Any]) -> None:
    checked = of_floats(case)
    if checked is None:
        return
    fun, args = checked
    # float16 has too few bits for second differences: first order, with a larger step
    # and tolerance (differences of float16 values are good to a few percent).
    if dtype == F32:
        check_grads(fun, args, order=case.order, modes=("fwd",))
    else:
        check_grads(fun, args, order=1, modes=("fwd",), eps=1e-2, atol=5e-2, rtol=5e-2)


# --------------------------------------------------------------- structure against JAX


def primitive_names(jaxpr_text: str) -> list[str]:
    """The primitive of each equation, in order (from the printed jaxpr)."""
    names = []
    for line in jaxpr_text.splitlines():
        if " = " in line and "lambda" not in line:
            rhs = line.split(" = ", 1)[1].strip()
            names.append(rhs.split("[", 1)[0].split(" ", 1)[0])
    return names


def without_add_any(names: list[str]) -> list[str]:
    # Until add_any joins the catalogue, tangents are summed by add.
    if "add_any" in ferrax._ir.builtin_primitives():
        return names
    return ["add" if n == "add_any" else n for n in names]


STRUCTURE: list[tuple[str, Op, tuple[tuple[int, ...], ...]]] = [
    ("dot_general", lambda L: lambda a, b: L.dot_general(a, b, (((1,), (0,)), ((), ()))), ((3, 4), (4, 5))),
    ("reduce_sum", lambda L: lambda a: L.reduce_sum(a, (1,)), ((3, 4),)),
    ("conv_general_dilated", lambda L: lambda a, b: L.conv_general_dilated(a, b, (1,), "SAME"), ((2, 3, 5), (4, 3, 3))),
    ("broadcast_in_dim", lambda L: lambda a: L.broadcast_in_dim(a, (2, 3, 4), (1, 2)), ((3, 4),)),
    ("reduce_max", lambda L: lambda a: L.reduce_max(a, (1,)), ((3, 4),)),
    # The pairwise-product tree (odd halves padded with a 1).
    ("reduce_prod", lambda L: lambda a: L.reduce_prod(a, (1,)), ((3, 5),)),
    ("pad", lambda L: lambda a, v: L.pad(a, v, ((1, 2, 1), (0, -1, 0))), ((3, 4), ())),
    ("concatenate", lambda L: lambda a: L.concatenate([a, np.zeros((1, 4), np.float32)], 0), ((3, 4),)),
    ("split", lambda L: lambda a: L.split(a, (1, 3), 1)[1], ((3, 4),)),
    ("stack", lambda L: lambda a: L.stack([a, a], 1), ((3, 4),)),
    ("unstack", lambda L: lambda a: L.unstack(a, 1)[2], ((3, 4),)),
    ("tile", lambda L: lambda a: L.tile(a, (2, 1)), ((3, 4),)),
    ("optimization_barrier", lambda L: lambda a, b: L.sub(*L.optimization_barrier((a, b))), ((3, 4), (3, 4))),
    ("scatter", lambda L: lambda a, u: scatter_op("scatter", UNIQUE_IDX)(L)(a, u), ((5, 3), (4, 3))),
    ("scatter-max", lambda L: lambda a, u: scatter_op("scatter_max", SCATTER_IDX)(L)(a, u), ((5, 3), (4, 3))),
    ("scatter-add", lambda L: lambda a, u: scatter_op("scatter_add", SCATTER_IDX)(L)(a, u), ((5, 3), (4, 3))),
    ("gather", lambda L: lambda a: L.gather(a, np.array([[1], [0]], np.int32), L.GatherDimensionNumbers((1,), (0,), (0,)), (1, 4), mode="clip"), ((3, 4),)),
]


@pytest.mark.parametrize("name, op, shapes", STRUCTURE, ids=[s[0] for s in STRUCTURE])
def test_jvp_jaxpr_structure_matches_jax(name: str, op: Op, shapes: tuple[tuple[int, ...], ...]) -> None:
    args = [np.ones(s, np.float32) for s in shapes]
    n = len(args)

    def jvp_of(jvp: Callable[..., Any], f: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *xs: jvp(f, tuple(xs[:n]), tuple(xs[n:]))

    ours = str(ferrax.make_jaxpr(jvp_of(ferrax.jvp, op(lax)))(*args, *args))
    theirs = str(jax.make_jaxpr(jvp_of(jax.jvp, op(jlax)))(*args, *args))
    assert primitive_names(ours) == without_add_any(primitive_names(theirs)), f"{ours}\n{theirs}"


def test_scatter_mul_updates_tangent_needs_unique_indices() -> None:
    # As JAX: the updates' tangent of scatter-mul is only defined with unique_indices.
    x, u = np.ones((5, 3), np.float32), np.ones((4, 3), np.float32)
    with pytest.raises(NotImplementedError, match="unique_indices"):
        jax.jvp(lambda b: scatter_op("scatter_mul", SCATTER_IDX)(jlax)(x, b), (u,), (u,))
    with pytest.raises(NotImplementedError, match="unique_indices") as info:
        ferrax.jvp(lambda b: scatter_op("scatter_mul", SCATTER_IDX)(lax)(x, b), (u,), (u,))
    assert "test_jvp_primitives.py" in str(info.value)  # the user's line


# ------------------------------------------------------------------- check_grads itself


def extension(name: str, impl: Callable[[NDArray], NDArray]) -> Primitive:
    p = Primitive(name)
    p.def_impl(impl)
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    return p


def test_check_grads_passes_a_right_rule_and_fails_a_wrong_one() -> None:
    cube = extension("cube_for_test", lambda x: x**3)
    cube.def_jvp(lambda ps, ts: (cube.bind(ps[0]), lax.mul(ts[0], lax.mul(3.0, lax.square(ps[0])))))
    x = np.linspace(-1.0, 1.0, 5, dtype=np.float32)
    check_grads(cube.bind, (x,), order=2, modes=("fwd",))
    wrong = extension("cube_wrong_for_test", lambda x: x**3)
    wrong.def_jvp(lambda ps, ts: (wrong.bind(ps[0]), lax.mul(ts[0], lax.mul(2.0, lax.square(ps[0])))))
    with pytest.raises(AssertionError, match="JVP tangent"):
        check_grads(wrong.bind, (x,), order=1, modes=("fwd",))


def test_check_grads_checks_the_second_order() -> None:
    # cube's rule uses three_x2 (3x^2), whose own rule is wrong (5x instead of 6x):
    # the first order is right, the second is not.
    three_x2 = extension("three_x2_for_test", lambda x: 3 * x * x)
    three_x2.def_jvp(lambda ps, ts: (three_x2.bind(ps[0]), lax.mul(ts[0], lax.mul(5.0, ps[0]))))
    cube = extension("cube2_for_test", lambda x: x**3)
    cube.def_jvp(lambda ps, ts: (cube.bind(ps[0]), lax.mul(ts[0], three_x2.bind(ps[0]))))
    x = np.linspace(0.5, 1.5, 4, dtype=np.float32)
    check_grads(cube.bind, (x,), order=1, modes=("fwd",))
    with pytest.raises(AssertionError, match="JVP of JVP"):
        check_grads(cube.bind, (x,), order=2, modes=("fwd",))


def test_check_grads_tolerances_and_pytrees() -> None:
    # Pytree arguments and outputs, explicit tolerances (a number or per dtype).
    def f(d: dict[str, Any]) -> tuple[Any, Any]:
        return lax.sin(d["a"]), lax.mul(d["a"], d["b"])

    args = ({"a": np.float32(0.3) + np.zeros(3, np.float32), "b": np.arange(3, dtype=np.float32)},)
    check_grads(f, args, order=2, modes=("fwd",), atol=1e-2, rtol=1e-2)
    check_grads(f, args, order=1, modes=("fwd",), atol={np.float32: 1e-2}, rtol={np.float32: 1e-2}, eps=1e-3)


# ------------------------------------------------------------------------ reverse mode

#: Reverse mode needs transposition rules (Rust, ``ferrax-ir``): a primitive without one
#: would be listed here as a strict xfail (whoever adds the rule removes its line). Every
#: primitive of the table has one now.
NO_TRANSPOSE_YET: dict[str, str] = {}


def rev_params() -> list[Any]:
    params = []
    for name in CASES:
        reason = NO_TRANSPOSE_YET.get(name)
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        params.append(pytest.param(name, id=name, marks=marks))
    return params


@pytest.mark.parametrize("name", rev_params())
def test_vjp_check_grads(name: str) -> None:
    # check_grads in reverse mode (ferrax.vjp), to second order, in float32 only:
    # float16 inner products of finite differences are too coarse to check anything.
    for c in cases_of(name, F32):
        checked = of_floats(c)
        if checked is not None:
            check_grads(*checked, order=c.order, modes=("rev",))


# ---------------------------------------------------------------------------- float64


def float64_failures(shard: int = 0, shards: int = 1) -> list[str]:
    """check_grads in every mode (forward, reverse, and forward through ``linearize``)
    to second order over the table in float64, where finite differences are precise (run
    with x64 on: :func:`test_check_grads_in_float64`); the primitives whose index in the
    sorted table is ``shard`` modulo ``shards``."""
    f64 = np.dtype(np.float64)
    found = []
    for name in sorted(CASES)[shard::shards]:
        modes = ("fwd", "lin") if name in NO_TRANSPOSE_YET else ("fwd", "rev", "lin")
        for c in cases_of(name, f64):
            checked = of_floats(c)
            if checked is None:
                continue
            try:
                check_grads(*checked, order=c.order, modes=modes)
            except Exception as e:  # reported together, by case
                found.append(f"{name} {c.label}: {type(e).__name__}: {str(e)[:400]}")
    return found


F64_SHARDS = 4


@pytest.mark.parametrize("shard", range(F64_SHARDS))
def test_check_grads_in_float64(shard: int) -> None:
    # In a process of its own (x64 is on from the start there), a quarter of the table per
    # test, so the test workers share the work.
    env = dict(os.environ, JAX_ENABLE_X64="1", TF_CPP_MIN_LOG_LEVEL="3")
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_jvp_primitives as t; "
        "import ferrax; assert ferrax.config.jax_enable_x64; "
        f"found = t.float64_failures({shard}, {F64_SHARDS}); print(len(found)); print('\\n'.join(found))"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-c", script, here], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    count, _, listing = done.stdout.partition("\n")
    assert count.strip() == "0", f"{count.strip()} float64 checks failed:\n{listing}"
