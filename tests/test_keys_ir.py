"""Typed PRNG keys (``key<fry>``) in the IR against JAX 0.10.2: JAX prints a jaxpr with
key arrays (the ``random_*`` primitives, and the structural and control-flow primitives
JAX binds on keys); the Rust parser reads JAX's text; the reference evaluator and the
StableHLO lowering run through XLA must both give the bits ``jax.jit`` gives (keys
compared through ``jax.random.key_data``). A key array crosses into the lowered module as
its data, ``uint32[..., 2]`` (JAX's physical layout); the reference evaluator takes and
gives keys packed one per integer, ``(word0 << 32) | word1``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax._src.random import prng as _jprng  # noqa: E402

from ferrax import TypeCheckError, _ir, dtypes  # noqa: E402
from ferrax._runtime import backend, compile_stablehlo  # noqa: E402

NDArray = np.ndarray[Any, Any]
# JAX's internal key primitives and a few lax functions are untyped.
jprng: Any = _jprng
LAX: Any = lax
IMPL = jax.random.key(0)._impl


def is_key(aval: Any) -> bool:
    return bool(aval.dtype == dtypes.key_fry)


def physical(aval: Any) -> Any:
    """The aval of a value as the lowered module holds it (keys: ``uint32[..., 2]``)."""
    if is_key(aval):
        return _ir.ShapedArray((*aval.shape, 2), np.uint32)
    return aval


def data_of(x: Any) -> NDArray:
    """A JAX value as NumPy data (keys: their ``uint32[..., 2]`` data)."""
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(x))
    return np.asarray(x)


def pack(words: NDArray) -> list[int]:
    """Keys' data ``uint32[..., 2]`` as the evaluator's packed integers."""
    w = words.astype(np.uint64).reshape(-1, 2)
    return [int(v) for v in ((w[:, 0] << np.uint64(32)) | w[:, 1]).view(np.int64)]


def unpack(values: list[int], shape: tuple[int, ...]) -> NDArray:
    v = np.asarray(values, dtype=np.int64).view(np.uint64)
    words = np.stack([(v >> np.uint64(32)).astype(np.uint32), v.astype(np.uint32)], axis=-1)
    return words.reshape((*shape, 2))


def evaluator_values(x: NDArray) -> list[Any]:
    """Values as the reference evaluator takes them (uint64 as int64 bit patterns)."""
    return (x.view(np.int64) if x.dtype == np.uint64 else x).ravel().tolist()


def run_ir(f: Callable[..., Any], *args: Any) -> None:
    """Checks that the IR's reference evaluator and lowering of JAX's jaxpr of ``f`` give
    ``jax.jit(f)``'s bits (JAX's constants are the leading arguments of ``@main``)."""
    closed = jax.make_jaxpr(f)(*args)
    jaxpr = _ir.parse_jaxpr(str(closed))
    const_avals = [v.aval for v in jaxpr.constvars]
    consts = [data_of(c) for c in closed.consts]
    flat = [data_of(a) for a in jax.tree_util.tree_leaves(args)]
    want = [data_of(o) for o in jax.tree_util.tree_leaves(jax.jit(f)(*args))]
    assert len(want) == len(jaxpr.out_avals)
    # The lowering, compiled by XLA. backend().put, not buffer_of: 64-bit seeds must
    # reach XLA as they are, whatever ferrax's x64 mode.
    exe = compile_stablehlo(
        _ir.lower_to_stablehlo(jaxpr, "t"), [physical(a) for a in jaxpr.out_avals]
    )
    bufs = [
        backend().put(np.ascontiguousarray(x.astype(physical(a).dtype)), physical(a))
        for x, a in zip(consts + flat, const_avals + jaxpr.in_avals)
    ]
    xla = [np.asarray(o) for o in exe(bufs)]
    # The reference evaluator.
    def ref_values(avals: list[Any], xs: list[NDArray]) -> list[tuple[Any, list[Any]]]:
        return [(a, pack(x) if is_key(a) else evaluator_values(x)) for a, x in zip(avals, xs)]

    ref = [
        unpack(values, tuple(aval.shape))
        if is_key(aval)
        else np.asarray(values).astype(aval.dtype).reshape(aval.shape)
        for aval, values in _ir.reference_eval(
            jaxpr, ref_values(const_avals, consts), ref_values(jaxpr.in_avals, flat)
        )
    ]
    for i, (w, x, r) in enumerate(zip(want, xla, ref)):
        assert x.dtype == w.dtype and x.shape == w.shape, (i, x.dtype, x.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(x, w, err_msg=f"output {i} compiled")
        if np.issubdtype(w.dtype, np.floating):
            # Floats from the bits (samplers): the evaluator's transcendental functions
            # are within an ulp or so of XLA's (see ferrax_ir::eval); the bits are exact.
            np.testing.assert_allclose(r, w, rtol=1e-6, err_msg=f"output {i} reference")
        else:
            np.testing.assert_array_equal(r, w, err_msg=f"output {i} reference")


def keys(n: int, seed: int = 0) -> Any:
    return jax.random.split(jax.random.key(seed), n)


@pytest.mark.parametrize(
    "seed",
    [
        jnp.int32(0), jnp.int32(-1), jnp.int32(2**31 - 1), jnp.int8(-5), jnp.uint8(200),
        jnp.uint32(0xDEADBEEF), jnp.array([3, -4, 7], jnp.int32), jnp.zeros((2, 0), jnp.int16),
    ],
)
def test_random_seed(seed: Any) -> None:
    run_ir(lambda s: jprng.random_seed(s, IMPL), seed)


def test_random_seed_64_bit() -> None:
    with jax.enable_x64(True):
        for s in (np.int64(-1), np.int64(2**40 + 3), np.uint64(2**63 + 5), np.array([-(2**62), 9])):
            run_ir(lambda s: jprng.random_seed(s, IMPL), jnp.asarray(s))


@pytest.mark.parametrize("key_shape", [(), (3,), (2, 2), (0,)])
@pytest.mark.parametrize("shape", [(), (2,), (2, 3), (0, 2), (5, 1, 2)])
def test_random_split(key_shape: tuple[int, ...], shape: tuple[int, ...]) -> None:
    k = keys(max(int(np.prod(key_shape)), 1)).reshape(-1)[: int(np.prod(key_shape))]
    run_ir(lambda k: jprng.random_split(k, shape), k.reshape(key_shape))


@pytest.mark.parametrize("bit_width", [8, 16, 32])
@pytest.mark.parametrize("shape", [(), (3,), (2, 4), (0,)])
def test_random_bits(bit_width: int, shape: tuple[int, ...]) -> None:
    run_ir(lambda k: jprng.random_bits(k, bit_width, shape), keys(2, 7))
    run_ir(lambda k: jprng.random_bits(k, bit_width, shape), jax.random.key(11))


def test_random_bits_64() -> None:
    with jax.enable_x64(True):
        run_ir(lambda k: jprng.random_bits(k, 64, (3, 2)), keys(2, 5))
        run_ir(lambda k: jax.random.bits(k, (4,), jnp.uint64), jax.random.key(1))


def test_random_fold_in() -> None:
    ks = keys(3, 4)
    run_ir(lambda k, m: jprng.random_fold_in(k, m), ks, jnp.array([0, 1, 0xFFFFFFFF], jnp.uint32))
    run_ir(lambda k, m: jprng.random_fold_in(k, m), ks, jnp.uint32(17))
    run_ir(lambda k, m: jprng.random_fold_in(k, m), jax.random.key(2), jnp.uint32(5))
    run_ir(lambda k, m: jprng.random_fold_in(k, m), ks, jnp.array([-1, 3, 9], jnp.int32))
    run_ir(lambda k, m: jprng.random_fold_in(k, m), ks.reshape(3, 1), jnp.ones((1, 4), jnp.uint32))


def test_wrap_unwrap_clone_and_raw_keys() -> None:
    data = np.array([[0, 42], [7, 0xDEADBEEF]], np.uint32)
    run_ir(lambda d: jax.random.clone(jax.random.wrap_key_data(d)), data)
    run_ir(lambda k: jax.random.key_data(k), keys(3))
    # Raw keys: JAX wraps and unwraps around each random primitive.
    run_ir(lambda k: jax.random.split(k, 4), jax.random.PRNGKey(3))
    run_ir(lambda k: jax.random.fold_in(k, 9), jax.random.PRNGKey(3))
    run_ir(lambda s: jax.random.PRNGKey(s), jnp.int32(-7))


def test_samplers_through_keys() -> None:
    # A sampler built on random_bits: the IR's bits feed JAX's float construction.
    k = jax.random.key(0)
    run_ir(lambda k: jax.random.uniform(k, (5,)), k)
    run_ir(lambda k: jax.random.randint(k, (3, 2), -5, 9), k)
    run_ir(lambda k: [jax.random.normal(s, (2,)) for s in jax.random.split(k, 3)], k)


def test_key_dtype_in_python() -> None:
    a = _ir.ShapedArray((3,), dtypes.key_fry)
    assert a.dtype == dtypes.key_fry and str(a) == "ShapedArray(key<fry>[3])"
    assert _ir.ShapedArray((3,), "key<fry>") == a
    from ferrax.random import KeyDType

    assert KeyDType is dtypes.KeyDType and dtypes.key_fry.itemsize == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{ lambda ; a:key<fry>[3]. let b:key<fry>[3] = add a a in (b,) }", "dtype key<fry>"),
        ("{ lambda ; a:key<rbg>[]. let  in (a,) }", "PRNG key implementation 'rbg'"),
        (
            "{ lambda ; a:u32[3]. let b:key<fry>[] = random_wrap[impl=fry] a in (b,) }",
            "expected key_data.shape to end with (2,)",
        ),
        (
            "{ lambda ; a:i32[2]. let b:key<fry>[] = random_wrap[impl=fry] a in (b,) }",
            "dtype i32",
        ),
        (
            "{ lambda ; a:f32[]. let b:key<fry>[] = random_seed[impl=fry] a in (b,) }",
            "PRNG key seed must be an integer",
        ),
        (
            "{ lambda ; a:i32[]. let b:key<fry>[] = random_seed[impl=rbg] a in (b,) }",
            "PRNG implementation 'rbg'",
        ),
        ("{ lambda ; a:u32[2]. let b:u32[2] = random_unwrap a in (b,) }", "key array"),
        (
            "{ lambda ; a:key<fry>[3] b:u32[2]. let c:key<fry>[3] = random_fold_in a b in (c,) }",
            "incompatible shapes for broadcasting",
        ),
        (
            "{ lambda ; a:key<fry>[]. let b:u32[] = convert_element_type[new_dtype=uint32 weak_type=False] a in (b,) }",
            "dtype key<fry>",
        ),
        (
            "{ lambda ; a:u32[]. let b:key<fry>[] = convert_element_type[new_dtype=key<fry> weak_type=False] a in (b,) }",
            "not a numeric dtype",
        ),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        _ir.parse_jaxpr(text)
    assert isinstance(info.value, (TypeCheckError, _ir_parse_error()))


def _ir_parse_error() -> type[Exception]:
    from ferrax import ParseError

    return ParseError


# --- keys through the structural and control-flow primitives -------------------------

K23 = jax.random.split(jax.random.key(0), 6).reshape(2, 3)

STRUCTURAL: dict[str, Callable[[Any], Any]] = {
    "reshape": lambda k: lax.reshape(k, (3, 2)),
    "broadcast_in_dim": lambda k: lax.broadcast_in_dim(k, (4, 2, 3), (1, 2)),
    "broadcast_scalar": lambda k: lax.broadcast_in_dim(k[0, 1], (2, 2), ()),
    "expand_squeeze": lambda k: lax.squeeze(lax.expand_dims(k, (0, 2)), (0,)),
    "transpose": lambda k: lax.transpose(k, (1, 0)),
    "rev": lambda k: lax.rev(k, (0, 1)),
    "slice": lambda k: lax.slice(k, (0, 1), (2, 3)),
    "slice_strided": lambda k: lax.slice(k, (0, 0), (2, 3), (1, 2)),
    "dynamic_slice": lambda k: lax.dynamic_slice(k, (jnp.int32(1), jnp.int32(1)), (1, 2)),
    "dynamic_update_slice": lambda k: lax.dynamic_update_slice(k, k[:1, :2], (1, 1)),
    "concatenate": lambda k: lax.concatenate([k, k[:1]], 0),
    "select_n": lambda k: lax.select_n(jnp.array([[True, False, True], [False, True, False]]), k, lax.rev(k, (0,))),
    "select_n_scalar": lambda k: lax.select_n(jnp.int32(1), k, lax.rev(k, (1,))),
    "copy": lambda k: LAX.copy_p.bind(k),
    "optimization_barrier": lambda k: LAX.optimization_barrier(k),
    "gather": lambda k: k[jnp.array([1, 0, 1])],
    "gather_2d": lambda k: k[jnp.array([1, 0]), jnp.array([2, 0])],
    "gather_fill": lambda k: k.at[jnp.array([1, 5])].get(mode="fill"),
    "scatter": lambda k: k.at[jnp.array([1])].set(k[:1]),
    "scatter_2d": lambda k: k.at[jnp.array([0, 1]), jnp.array([2, 1])].set(k[1, :2]),
    "cond": lambda k: lax.cond(True, lambda k: lax.rev(k, (0,)), lambda k: k, k),
    "switch_split": lambda k: lax.switch(1, [lambda k: k, lambda k: jax.random.split(k[0, 0], 3).reshape(1, 3)], k[:1]),
    "while": lambda k: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, lax.rev(c[1], (1,))), (0, k))[1],
    "scan": lambda k: lax.scan(lambda c, x: (x, c), k[0], k),
    "scan_split": lambda k: lax.scan(lambda c, x: (jax.random.fold_in(c, 1), jax.random.split(x)), k[0, 0], k[0]),
    "jit": lambda k: jax.jit(lambda k: lax.rev(k, (0,)))(k),
    "eq_ne": lambda k: (k == lax.rev(k, (1,)), k != k[:, 1:2], k == k[1, 1]),
}


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural_on_keys(name: str) -> None:
    run_ir(STRUCTURAL[name], K23)
