"""``reduce_and``, ``reduce_or``, ``reduce_xor``, ``nextafter`` and ``reduce_precision``
against JAX 0.10.2, bit for bit: every integer dtype and bool for the logical
reductions, every float dtype for the others, on random bit patterns (NaNs, infinities
and subnormals among them) and on every pair of edge values, eagerly, under ``jit`` and
under ``vmap``, each over many inputs in one compilation; their errors, weak types and
derivatives as JAX has them; and ``jnp.all``/``jnp.any`` binding the logical reductions
where ``jax.numpy`` does.

(The generated tables of tests/test_jvp_primitives.py, test_batch_primitives.py,
test_jit_primitives.py and test_lax.py cover these primitives with the others.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax
from ferrax.errors import ConcretizationError, TypeCheckError

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

NDArray = np.ndarray[Any, Any]

INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)]
FLOATS = [np.dtype(t) for t in (np.float16, np.float32, np.float64)] + [np.dtype(ml_dtypes.bfloat16)]
LOGICAL = ("reduce_and", "reduce_or", "reduce_xor")


@pytest.fixture(autouse=True)
def x64() -> Iterator[None]:
    """64-bit dtypes in both libraries (JAX's flag, ferrax's switch)."""
    with jax.enable_x64(True), ferrax.enable_x64(True):
        yield


def random_bits(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> NDArray:
    """Random bytes read as ``dtype`` (every pattern: NaNs, infinities, subnormals)."""
    n = int(np.prod(shape)) * dtype.itemsize
    return rng.integers(0, 256, n, dtype=np.uint8).view(dtype).reshape(shape)


def edges(dtype: np.dtype[Any]) -> NDArray:
    """Both zeros, the smallest subnormals and a larger one, the smallest normal and
    its neighbour below, one, the largest finite value, the infinities and NaN, of
    each sign."""
    info = ml_dtypes.finfo(dtype)  # type: ignore[no-untyped-call]
    u = np.dtype(f"u{dtype.itemsize}")
    tiny = int(np.array(info.tiny, dtype).view(u))
    magnitudes = [0, 1, 2, 5, tiny - 1, tiny]
    patterns = np.array(magnitudes + [m | 1 << (8 * dtype.itemsize - 1) for m in magnitudes], u).view(dtype)
    special = np.array([1.0, -1.0, np.inf, -np.inf, np.nan], np.float64).astype(dtype)
    return np.concatenate([patterns, special, np.array([info.max, -info.max], dtype)])


def bits_of(x: Any) -> NDArray:
    """An array's bytes (so NaN payloads and signed zeros compare too)."""
    return np.ascontiguousarray(np.asarray(x)).reshape(-1).view(np.uint8)


def assert_bits_equal(actual: Any, expected: Any, what: str) -> None:
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype and a.shape == e.shape, f"{what}: {a.dtype}{a.shape}, JAX's {e.dtype}{e.shape}"
    np.testing.assert_array_equal(bits_of(a), bits_of(e), err_msg=what)


def compare(ops: Callable[[Any, list[Any]], list[Any]], operands: list[Any], labels: list[str]) -> None:
    """``ops`` of both libraries on ``operands``: ferrax eager and jitted against JAX
    jitted (one compilation each), bit for bit."""
    theirs = jax.jit(lambda xs: ops(jax.lax, xs))(operands)
    eager = ops(lax, operands)
    staged = ferrax.jit(lambda xs: ops(lax, xs))(operands)
    for label, t, e, s in zip(labels, theirs, eager, staged, strict=True):
        assert_bits_equal(e, t, f"{label} (eager)")
        assert_bits_equal(s, t, f"{label} (jit)")


# -------------------------------------------------------------- the logical reductions


def logical_operand(rng: np.random.Generator, dtype: np.dtype[Any]) -> NDArray:
    if dtype == np.bool_:
        return rng.integers(0, 2, (3, 4, 5)).astype(bool)
    # Mostly set bits (so that and-reductions are not all zero), and random patterns.
    dense = (random_bits(rng, (3, 4, 5), dtype) | random_bits(rng, (3, 4, 5), dtype)) | random_bits(rng, (3, 4, 5), dtype)
    return np.where(rng.random((3, 4, 5)) < 0.5, dense, random_bits(rng, (3, 4, 5), dtype))


def test_logical_reductions_match_jax() -> None:
    # (XLA compiles each reduction for about 40 ms: one set of axes per dtype and
    # primitive; test_lax.py has more axes, on fewer values.)
    rng = np.random.default_rng(0)
    dtypes = [np.dtype(np.bool_), *INTS]
    xs = [logical_operand(rng, d) for d in dtypes] + [np.zeros((0, 4), d) for d in dtypes]
    cases = [(i, name, [(1,), (0, 2)][(i + k) % 2]) for i in range(len(dtypes)) for k, name in enumerate(LOGICAL)]
    # Over no elements: the identities (all ones and True for and; zero, False for the
    # others).
    cases += [(len(dtypes) + i, "reduce_and", (0,)) for i in range(len(dtypes))]
    cases += [(len(dtypes), name, (0,)) for name in ("reduce_or", "reduce_xor")]

    def ops(L: Any, operands: list[Any]) -> list[Any]:
        return [getattr(L, name)(operands[i], axes) for i, name, axes in cases]

    compare(ops, xs, [f"{name}{axes} of {xs[i].dtype}{list(xs[i].shape)}" for i, name, axes in cases])


def test_logical_reductions_under_vmap_match_jax() -> None:
    rng = np.random.default_rng(1)
    xs = [logical_operand(rng, d) for d in (np.dtype(np.bool_), np.dtype(np.uint16), np.dtype(np.int64))]
    cases = [(i, name, axes, in_axis) for i, name in enumerate(LOGICAL) for axes, in_axis in [((0,), 1), ((0, 1), 2)]]

    def ops(L: Any, operands: list[Any]) -> list[Any]:
        vmap = ferrax.vmap if L is lax else jax.vmap
        return [vmap(lambda a, name=name, axes=axes: getattr(L, name)(a, axes), in_axis)(operands[i]) for i, name, axes, in_axis in cases]

    compare(ops, xs, [f"vmap({name}{axes}) over axis {a} of {xs[i].dtype}" for i, name, axes, a in cases])


def test_logical_reductions_strip_weak_types_and_refuse_floats() -> None:
    for name in LOGICAL:
        for value in (5, True):
            mine, theirs = getattr(lax, name)(value, ()), getattr(jax.lax, name)(value, ())
            assert (mine.dtype, mine.weak_type, mine.item()) == (theirs.dtype, theirs.weak_type, theirs.item())
        # JAX: "logical reduction requires operand dtype bool or int, got float32".
        with pytest.raises(TypeError, match="bool or int"):
            getattr(jax.lax, name)(np.ones(3, np.float32), (0,))
        with pytest.raises(TypeCheckError, match=f"{name}.*operand 0 has dtype f32.*bool or an integer(.|\n)*test_logical_and_precision.py"):
            getattr(lax, name)(np.ones(3, np.float32), (0,))


def test_logical_reduction_axes_errors_are_jaxs() -> None:
    x = np.ones((2, 3), np.int32)
    # An axis out of range: an IndexError (JAX's shape rule, np.delete's).
    with pytest.raises(IndexError):
        jax.lax.reduce_or(x, (2,))
    with pytest.raises(IndexError, match=r"reduce_or: axis 2 is out of bounds(.|\n)*test_logical_and_precision.py"):
        lax.reduce_or(x, (2,))
    # Negative or repeated axes: JAX traces them, then fails to lower them (ValueError).
    for axes in [(-1,), (0, 0)]:
        with pytest.raises(ValueError):
            jax.lax.reduce_and(x, axes)
        with pytest.raises(ValueError, match=r"reduce_and: axes .* must be distinct and in \[0, 2\)"):
            lax.reduce_and(x, axes)


# ------------------------------------------------------------------------- nextafter


def nextafter_operands(rng: np.random.Generator, dtype: np.dtype[Any]) -> tuple[NDArray, NDArray]:
    """Random patterns against random patterns, then every pair of edge values (XLA's
    CPU backend compares subnormals as zeros except in float16: those pairs tell)."""
    e = edges(dtype)
    x = np.concatenate([random_bits(rng, (500,), dtype), np.repeat(e, len(e))])
    y = np.concatenate([random_bits(rng, (500,), dtype), np.tile(e, len(e))])
    return x, y


def test_nextafter_matches_jax_bit_for_bit() -> None:
    rng = np.random.default_rng(2)
    pairs = [nextafter_operands(rng, d) for d in FLOATS]
    operands = [a for p in pairs for a in p] + [np.float32(0.5), np.array([1.0, -2.0, 0.0], np.float32)]

    def ops(L: Any, xs: list[Any]) -> list[Any]:
        outs = [L.nextafter(xs[2 * k], xs[2 * k + 1]) for k in range(len(FLOATS))]
        # A scalar broadcast against a vector, both ways.
        return [*outs, L.nextafter(xs[-1], xs[-2]), L.nextafter(xs[-2], xs[-1])]

    compare(ops, operands, [f"nextafter of {d}" for d in FLOATS] + ["vector, scalar", "scalar, vector"])


def test_nextafter_under_vmap_matches_jax() -> None:
    rng = np.random.default_rng(3)
    x, y = random_bits(rng, (4, 6), np.dtype(np.float32)), random_bits(rng, (6, 4), np.dtype(np.float32))
    s = np.float32(1.0)

    def ops(L: Any, xs: list[Any]) -> list[Any]:
        vmap = ferrax.vmap if L is lax else jax.vmap
        a, b, c = xs
        return [
            vmap(L.nextafter, (0, 1))(a, b),
            vmap(L.nextafter, (1, None))(a, c),
            vmap(L.nextafter, (None, 0))(c, b),
        ]

    compare(ops, [x, y, s], ["both mapped", "scalar unmapped", "scalar first"])


def test_nextafter_types_and_errors_are_jaxs() -> None:
    mine, theirs = lax.nextafter(1.0, 2.0), jax.lax.nextafter(1.0, 2.0)
    assert (mine.dtype, mine.weak_type, mine.item()) == (theirs.dtype, theirs.weak_type, theirs.item())
    half = np.ones(3, np.float16)
    # lax.nextafter does not promote: a Python float next to float16 is a float32 (as in
    # JAX), an integer is refused, and so are mismatched shapes.
    bad: list[tuple[Any, Any]] = [(half, 1.0), (np.ones(3, np.int32), np.ones(3, np.int32)), (np.ones(3, np.float32), np.ones(2, np.float32))]
    for a, b in bad:
        with pytest.raises(TypeError):
            jax.lax.nextafter(a, b)
        with pytest.raises(TypeCheckError, match="nextafter(.|\n)*test_logical_and_precision.py"):
            lax.nextafter(a, b)


def test_nextafter_has_no_derivative_as_in_jax() -> None:
    x, zero = np.array([1.0, 2.0], np.float32), np.float32(0.0)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'nextafter' not implemented"):
        jax.grad(lambda a: jax.lax.nextafter(a, zero).sum())(x)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'nextafter' not implemented(.|\n)*test_logical_and_precision.py"):
        ferrax.grad(lambda a: lax.nextafter(a, zero).sum())(x)
    with pytest.raises(NotImplementedError, match="nextafter"):
        ferrax.jvp(lambda a: lax.nextafter(zero, a), (x,), (x,))
    # Without a tangent (stop_gradient) it differentiates, as zeros.
    g = ferrax.grad(lambda a: (a * lax.nextafter(lax.stop_gradient(a), zero)).sum())(x)
    jg = jax.grad(lambda a: (a * jax.lax.nextafter(jax.lax.stop_gradient(a), zero)).sum())(x)
    assert_bits_equal(g, jg, "grad through stop_gradient")


def test_jnp_nextafter_promotes_as_jax() -> None:
    args: list[tuple[Any, Any]] = [
        (np.arange(3, dtype=np.int32), 2),
        (np.ones(3, np.float16), 2.0),
        (np.ones(3, np.float16), np.zeros(3, np.float32)),
        (np.ones(3, ml_dtypes.bfloat16), np.float16(-1.0)),
        (True, np.zeros(2, np.uint8)),
    ]
    for a, b in args:
        mine, theirs = fnp.nextafter(a, b), jnp.nextafter(a, b)
        assert (mine.dtype, mine.weak_type) == (theirs.dtype, theirs.weak_type), (a, b)
        assert_bits_equal(mine, theirs, f"jnp.nextafter({a!r}, {b!r})")


# ------------------------------------------------------------------- reduce_precision

#: Narrower and wider than each dtype's format (XLA compiles each for about 100 ms: six;
#: the Rust evaluator's tests and test_lax.py have others).
FORMATS = [(1, 0), (3, 2), (5, 10), (8, 7), (8, 23), (11, 52)]


def test_reduce_precision_matches_jax_bit_for_bit() -> None:
    rng = np.random.default_rng(4)
    # Random patterns (NaN payloads of both signs kept as XLA keeps them), edge values,
    # and normal values across the range of the narrow formats.
    with np.errstate(over="ignore"):
        xs = [
            np.concatenate([random_bits(rng, (300,), d), edges(d), (rng.standard_normal(50) * 10.0 ** rng.integers(-6, 6, 50)).astype(d)])
            for d in FLOATS
        ]

    def ops(L: Any, operands: list[Any]) -> list[Any]:
        return [L.reduce_precision(x, e, m) for x in operands for e, m in FORMATS]

    compare(ops, xs, [f"reduce_precision({d}, {e}, {m})" for d in FLOATS for e, m in FORMATS])


def test_reduce_precision_derivatives_and_vmap_are_jaxs() -> None:
    x = np.array([0.1, 1.3, -7.77, 3e5], np.float32)

    def f(L: Any) -> Callable[[Any], Any]:
        return lambda a: L.reduce_precision(a * a, 5, 3)

    def names(text: str) -> list[str]:
        return [line.split(" = ")[1].split("[")[0].split(" ")[0] for line in text.splitlines() if " = " in line]

    # The tangent and the cotangent rounded the same way (JAX's rules): the same jaxprs.
    for transform in ("grad", "jvp"):
        if transform == "grad":
            ours = ferrax.make_jaxpr(ferrax.grad(lambda a: f(lax)(a).sum()))(x)
            theirs = jax.make_jaxpr(jax.grad(lambda a: f(jax.lax)(a).sum()))(x)
        else:
            ours = ferrax.make_jaxpr(lambda a: ferrax.jvp(f(lax), (a,), (a,)))(x)
            theirs = jax.make_jaxpr(lambda a: jax.jvp(f(jax.lax), (a,), (a,)))(x)
        assert names(str(ours)) == names(str(theirs)), f"{ours}\n{theirs}"
    g, jg = ferrax.grad(lambda a: f(lax)(a).sum())(x), jax.grad(lambda a: f(jax.lax)(a).sum())(x)
    assert_bits_equal(g, jg, "grad")
    m = np.stack([x, -x, x * 3])
    assert_bits_equal(ferrax.vmap(f(lax), 1)(m), jax.vmap(f(jax.lax), 1)(m), "vmap")


def test_reduce_precision_arguments_are_jaxs() -> None:
    x = np.ones(3, np.float32)
    mine, theirs = lax.reduce_precision(1.5, 2, 0), jax.lax.reduce_precision(1.5, 2, 0)
    assert (mine.dtype, mine.weak_type, mine.item()) == (theirs.dtype, theirs.weak_type, theirs.item())
    # Counts are integers (operator.index: NumPy integers too), at least 1 and 0.
    assert_bits_equal(lax.reduce_precision(x, np.int64(5), np.uint8(2)), jax.lax.reduce_precision(x, np.int64(5), np.uint8(2)), "NumPy counts")
    bad: list[tuple[Any, Any, type[Exception], str]] = [
        (5.0, 10, TypeError, "cannot be interpreted as an integer"),
        (0, 10, ValueError, "exponent_bits must be positive; got 0"),
        (5, -1, ValueError, "mantissa_bits must be non-negative; got -1"),
    ]
    for e, m, err, message in bad:
        with pytest.raises(err, match=message):
            jax.lax.reduce_precision(x, e, m)
        with pytest.raises(err, match=message):
            lax.reduce_precision(x, e, m)
    with pytest.raises(ValueError, match="test_logical_and_precision.py"):
        lax.reduce_precision(x, 0, 10)
    # A float operand only (JAX: "reduce_precision does not accept dtype int32").
    with pytest.raises(TypeError):
        jax.lax.reduce_precision(np.ones(3, np.int32), 5, 10)
    with pytest.raises(TypeCheckError, match="reduce_precision operand 0 has dtype i32; expected a float dtype"):
        lax.reduce_precision(np.ones(3, np.int32), 5, 10)
    # The counts must be known while tracing (JAX: a ConcretizationTypeError).
    with pytest.raises(TypeError):
        jax.jit(lambda e: jax.lax.reduce_precision(x, e, 10))(5)
    with pytest.raises(ConcretizationError, match="exponent_bits of lax.reduce_precision"):
        ferrax.jit(lambda e: lax.reduce_precision(x, e, 10))(5)


# --------------------------------------------------------------------- jnp.all, any


def reductions_in(text: str) -> list[str]:
    """The reduction primitives of a printed jaxpr, in order."""
    return [w.split("[")[0] for w in text.split() if w.startswith("reduce_")]


def test_jnp_all_and_any_bind_the_logical_reductions_as_jax() -> None:
    f32 = np.array([[1.0, 0.0, np.nan], [2.0, 3.0, 4.0]], np.float32)
    i32 = np.array([[0, 1, 2], [3, 0, 5]], np.int32)
    mask = np.array([[True, False, True], [True, True, False]])
    calls: list[tuple[str, Callable[[Any], Callable[..., Any]], Any]] = [
        ("all", lambda np_: lambda a: np_.all(a), f32),
        ("any axis", lambda np_: lambda a: np_.any(a, axis=1), i32),
        ("all keepdims", lambda np_: lambda a: np_.all(a, axis=0, keepdims=True), i32),
        ("any where", lambda np_: lambda a: np_.any(a, where=mask), f32),
        ("all where", lambda np_: lambda a: np_.all(a, axis=(0, 1), where=mask), i32),
        ("all bool", lambda np_: lambda a: np_.all(a > 1, axis=-1), f32),
        ("scalar", lambda np_: lambda a: np_.any(a), 3.0),
        ("method", lambda np_: lambda a: (np_.asarray(a) > 0).all(axis=0), i32),
        ("bool sum", lambda np_: lambda a: np_.sum(a > 2, axis=0, dtype=bool), i32),
        ("bool prod", lambda np_: lambda a: np_.prod(a, dtype=bool), i32),
        ("bool einsum", lambda np_: lambda a: np_.einsum("ij->j", a > 2), i32),
    ]
    for label, call, x in calls:
        ours, theirs = ferrax.make_jaxpr(call(fnp))(x), jax.make_jaxpr(call(jnp))(x)
        assert reductions_in(str(ours)) == reductions_in(str(theirs)), f"{label}:\n{ours}\n{theirs}"
        mine, want = call(fnp)(x), call(jnp)(x)
        assert (mine.dtype, mine.weak_type) == (want.dtype, want.weak_type), label
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(want), err_msg=label)
