"""The bit primitives against JAX 0.10.2, bit for bit: ``population_count``, ``clz``,
``bitcast_convert_type`` (every pair of dtypes) and ``threefry2x32`` (random keys and
counts with the edge values 0 and 0xFFFFFFFF), eagerly, under ``jit`` and ``vmap``, each
over many inputs in one compilation; and their errors, as JAX raises them.

(The generated tables of tests/test_jvp_primitives.py, test_batch_primitives.py and
test_jit_primitives.py cover their jvp, batching and jit rules with the other
primitives.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ferrax
from ferrax import lax
from ferrax._lax.bits import threefry2x32
from ferrax.errors import ShapeError, TypeCheckError

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

NDArray = np.ndarray[Any, Any]

INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)]
FLOATS = [np.dtype(t) for t in (np.float16, np.float32, np.float64)] + [np.dtype(ml_dtypes.bfloat16)]
U32_EDGES = np.array([0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF], np.uint32)


@pytest.fixture(autouse=True)
def x64() -> Iterator[None]:
    """64-bit dtypes in both libraries (JAX's flag, ferrax's switch)."""
    with jax.enable_x64(True), ferrax.enable_x64(True):
        yield


def random_bits(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> NDArray:
    """Random bytes read as ``dtype`` (every pattern: NaNs and infinities for floats)."""
    n = int(np.prod(shape)) * dtype.itemsize
    return rng.integers(0, 256, n, dtype=np.uint8).view(dtype).reshape(shape)


def int_operand(rng: np.random.Generator, dtype: np.dtype[Any]) -> NDArray:
    """Random values over the whole range, then 0, 1, -1 (all ones), the least and the
    greatest value."""
    info = np.iinfo(dtype)
    edges = np.array([0, 1, info.max, info.min], dtype)
    ones = np.array([-1]).astype(dtype) if dtype.kind == "i" else np.array([info.max], dtype)
    return np.concatenate([random_bits(rng, (59,), dtype), edges, ones])


def bits_of(x: Any) -> NDArray:
    """An array's bytes (so NaN payloads compare too)."""
    a = np.ascontiguousarray(np.asarray(x))
    return a.reshape(-1).view(np.uint8)


def assert_bits_equal(actual: Any, expected: Any, what: str) -> None:
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype and a.shape == e.shape, f"{what}: {a.dtype}{a.shape}, JAX's {e.dtype}{e.shape}"
    np.testing.assert_array_equal(bits_of(a), bits_of(e), err_msg=what)


# --------------------------------------------------------------- population_count, clz


def test_bit_counts_match_jax() -> None:
    rng = np.random.default_rng(0)
    xs = [int_operand(rng, d) for d in INTS]

    def counts(L: Any, operands: list[Any]) -> list[Any]:
        return [f(x) for x in operands for f in (L.population_count, L.clz)]

    theirs = jax.jit(lambda ops: counts(jax.lax, ops))(xs)
    eager = counts(lax, xs)
    staged = ferrax.jit(lambda ops: counts(lax, ops))(xs)
    for k, (t, e, s) in enumerate(zip(theirs, eager, staged, strict=True)):
        what = f"{['population_count', 'clz'][k % 2]} of {xs[k // 2].dtype}"
        assert_bits_equal(e, t, what + " (eager)")
        assert_bits_equal(s, t, what + " (jit)")


def test_bit_counts_keep_weak_types_and_refuse_non_integers() -> None:
    for name in ("population_count", "clz"):
        mine, theirs = getattr(lax, name)(7), getattr(jax.lax, name)(7)
        assert theirs.weak_type
        assert (mine.weak_type, mine.dtype, int(mine)) == (theirs.weak_type, theirs.dtype, int(theirs))
    for dtype in (np.bool_, np.float32):
        for name in ("population_count", "clz"):
            with pytest.raises(TypeError):
                getattr(jax.lax, name)(np.zeros(2, dtype))
            with pytest.raises(TypeCheckError, match=f"{name}.*operand 0 has dtype.*an integer dtype(.|\n)*test_bits.py"):
                getattr(lax, name)(np.zeros(2, dtype))


# ---------------------------------------------------------------- bitcast_convert_type


def bitcast_pairs() -> list[tuple[np.dtype[Any], np.dtype[Any]]]:
    dtypes = INTS + FLOATS
    return [(a, b) for a in dtypes for b in dtypes]


def bitcast_operand(rng: np.random.Generator, src: np.dtype[Any], dst: np.dtype[Any]) -> NDArray:
    """Random bits of ``src``, shaped for a bitcast to ``dst`` (a last axis of the widths'
    ratio when ``dst`` is wider)."""
    shape: tuple[int, ...] = (3, 5)
    if dst.itemsize > src.itemsize:
        shape = (*shape, dst.itemsize // src.itemsize)
    return random_bits(rng, shape, src)


def test_bitcast_matches_jax_for_every_pair_of_dtypes() -> None:
    rng = np.random.default_rng(1)
    pairs = bitcast_pairs()
    xs = [bitcast_operand(rng, a, b) for a, b in pairs]

    def casts(L: Any, operands: list[Any]) -> list[Any]:
        return [L.bitcast_convert_type(x, b) for x, (_, b) in zip(operands, pairs)]

    theirs = jax.jit(lambda ops: casts(jax.lax, ops))(xs)
    eager = casts(lax, xs)
    staged = ferrax.jit(lambda ops: casts(lax, ops))(xs)
    for (a, b), t, e, s in zip(pairs, theirs, eager, staged, strict=True):
        assert_bits_equal(e, t, f"{a} -> {b} (eager)")
        assert_bits_equal(s, t, f"{a} -> {b} (jit)")


def test_bitcast_of_scalars_and_weak_types_as_jax() -> None:
    cases: list[tuple[Any, Any]] = [(np.uint32(0x01020304), np.uint8), (1.5, np.int32), (3, np.float32), (np.float64(-2.0), np.uint16)]
    for x, d in cases:
        mine, theirs = lax.bitcast_convert_type(x, d), jax.lax.bitcast_convert_type(x, d)
        assert_bits_equal(mine, theirs, f"{x!r} -> {d}")
        assert mine.weak_type is False and theirs.weak_type is False


def test_bitcast_errors_as_jax() -> None:
    # Widths that do not fit: ValueError (ferrax's ShapeError is one).
    wrong: list[tuple[Any, Any]] = [(np.zeros((3, 3), np.uint8), np.uint32), (np.uint16(1), np.uint32), (np.zeros((3,), np.float32), np.float64)]
    for x, d in wrong:
        with pytest.raises(ValueError):
            jax.lax.bitcast_convert_type(x, d)
        with pytest.raises(ShapeError, match="needs a last axis of [24], got [13], at .*test_bits.py"):
            lax.bitcast_convert_type(x, d)
    # bool, unless to itself: TypeError.
    bools: list[tuple[Any, Any]] = [(np.zeros(3, np.bool_), np.uint8), (np.zeros(3, np.uint8), np.bool_)]
    for x, d in bools:
        with pytest.raises(TypeError):
            jax.lax.bitcast_convert_type(x, d)
        with pytest.raises(TypeCheckError, match="bool.*test_bits.py"):
            lax.bitcast_convert_type(x, d)
    b = np.array([True, False])
    np.testing.assert_array_equal(np.asarray(lax.bitcast_convert_type(b, np.bool_)), b)


def test_bitcast_vmapped_along_the_axis_it_joins() -> None:
    # Batched along the last axis, the one a widening bitcast consumes (jax.vmap fails
    # here: its rule keeps the batch axis in place): against a loop over the lanes.
    x = np.random.default_rng(2).integers(0, 256, (2, 4, 3), dtype=np.uint8)
    for f in (ferrax.vmap(lambda a: lax.bitcast_convert_type(a, np.uint32), in_axes=-1),
              ferrax.jit(ferrax.vmap(lambda a: lax.bitcast_convert_type(a, np.uint32), in_axes=-1))):
        got = np.asarray(f(x))
        want = np.stack([x[..., i].copy().view(np.uint32).reshape(2) for i in range(3)])
        np.testing.assert_array_equal(got, want)
    # Narrowing with the batch axis last: a new trailing axis after it.
    y = np.arange(6, dtype=np.uint32).reshape(2, 3) * np.uint32(0x01010101)
    got = np.asarray(ferrax.vmap(lambda a: lax.bitcast_convert_type(a, np.uint8), in_axes=1)(y))
    want = np.asarray(jax.vmap(lambda a: jax.lax.bitcast_convert_type(a, np.uint8), in_axes=1)(y))
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------ threefry2x32


def threefry_jax(*xs: Any) -> Any:
    from jax._src.random.threefry2x32 import threefry2x32_p

    return threefry2x32_p.bind(*xs)  # type: ignore[no-untyped-call]


def u32s(rng: np.random.Generator, *shape: int) -> NDArray:
    """Random uint32 values (every bit pattern)."""
    return np.asarray(rng.integers(0, 2**32, shape, dtype=np.uint64).astype(np.uint32))


def threefry_operands(rng: np.random.Generator) -> list[tuple[Any, ...]]:
    """Keys and counts: random ones, the edges in every combination, scalar keys, keys
    of size-1 axes, and an empty count array."""
    def u(*shape: int) -> NDArray:
        return u32s(rng, *shape)

    k0, k1, x0, x1 = (np.array(g, np.uint32).reshape(-1) for g in np.meshgrid(U32_EDGES, U32_EDGES, U32_EDGES, U32_EDGES))
    return [
        (u(2000), u(2000), u(2000), u(2000)),
        (k0, k1, x0, x1),
        (u(), u(), u(500), u(500)),
        (np.uint32(0), np.uint32(0xFFFFFFFF), U32_EDGES, U32_EDGES[::-1].copy()),
        (u(4, 1), u(1, 1), u(1, 6), u(4, 6)),
        (u(), u(), u(0), u(0)),
    ]


def test_threefry2x32_matches_jax() -> None:
    ops = threefry_operands(np.random.default_rng(3))
    # JAX's shape rule takes keys of different shapes (broadcast together), but its CPU
    # lowering fails on them (its rolled loop carries the keys): JAX gets the operands
    # broadcast to one shape.
    theirs = jax.jit(lambda all_ops: [threefry_jax(*o) for o in all_ops])([np.broadcast_arrays(*o) for o in ops])
    eager = [threefry2x32(*o) for o in ops]
    staged = ferrax.jit(lambda all_ops: [threefry2x32(*o) for o in all_ops])(ops)
    for k, (t, e, s) in enumerate(zip(theirs, eager, staged, strict=True)):
        for w in range(2):
            assert_bits_equal(e[w], t[w], f"operands {k}, word {w} (eager)")
            assert_bits_equal(s[w], t[w], f"operands {k}, word {w} (jit)")


def test_threefry2x32_under_vmap_matches_jax() -> None:
    rng = np.random.default_rng(4)
    keys, counts = u32s(rng, 5, 2), u32s(rng, 5, 7)
    # Per-lane keys against shared counts (as vmap over jax.random.split keys does), and
    # a batch axis not first.
    for in_axes, args in [((0, None), (keys, counts[0])), ((1, 0), (keys.T.copy(), counts))]:
        def f(k: Any, x: Any) -> Any:
            return threefry2x32(k[0], k[1], x, x)

        def g(k: Any, x: Any) -> Any:
            return threefry_jax(k[0], k[1], x, x)

        theirs = jax.vmap(g, in_axes=in_axes)(*args)
        for mine in (ferrax.vmap(f, in_axes=in_axes)(*args), ferrax.jit(ferrax.vmap(f, in_axes=in_axes))(*args)):
            for w in range(2):
                assert_bits_equal(mine[w], theirs[w], f"in_axes={in_axes}, word {w}")


def test_threefry2x32_jvp_is_zero_and_errors_as_jax() -> None:
    k = np.uint32(7)
    x = np.arange(3, dtype=np.uint32)
    float0 = np.zeros(3, jax.dtypes.float0)
    (y0, _), (t0, t1) = ferrax.jvp(lambda a: threefry2x32(k, k, a, a), (x,), (float0,))
    assert t0.dtype == float0.dtype and t0.shape == (3,) and t1.shape == (3,)
    assert_bits_equal(y0, threefry_jax(k, k, x, x)[0], "jvp primal")
    for bad in [(k, k, x.astype(np.int32), x), (k, k, np.zeros(2, np.uint32), x), (k, k, x, np.zeros((1, 3), np.uint32))]:
        with pytest.raises(TypeError):
            threefry_jax(*bad)
        with pytest.raises(TypeCheckError, match="threefry2x32(.|\n)*test_bits.py"):
            threefry2x32(*bad)


def test_bit_primitives_cost_one_flop_per_element() -> None:
    # population_count, clz and bitcast_convert_type of u32[8] count one operation per
    # element each, as XLA counts them (8 each); threefry2x32 counts none, a deliberate
    # difference (XLA counts its 43 integer operations per element).
    x = np.zeros(8, np.uint32)
    f = lambda a: (lax.population_count(a), lax.clz(a), lax.bitcast_convert_type(a, np.float32), *threefry2x32(a, a, a, a))  # noqa: E731
    cost = ferrax.cost_analysis(f)(x)
    assert cost["flops"] == 3 * 8
    assert cost["by_primitive"]["threefry2x32"]["flops"] == 0
