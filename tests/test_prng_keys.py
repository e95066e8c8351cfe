"""Typed PRNG keys (dtype ``key<fry>``) against JAX 0.10.2: the jaxprs ferrax.random traces
(``random_seed``, ``random_wrap``, ``random_unwrap``, ``random_split``, ``random_fold_in``,
``random_bits`` on ``key<fry>`` variables) print as JAX's, and the keys and bits are
JAX's, eagerly, under jit and under vmap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
import ferrax.random as fr
from ferrax import dtypes
from ferrax._lax import prng


def _jaxpr_texts(f_fx: Callable[..., Any], f_jax: Callable[..., Any], fx_args: tuple[Any, ...], jax_args: tuple[Any, ...]) -> tuple[str, str]:
    return str(ferrax.make_jaxpr(f_fx)(*fx_args)), str(jax.make_jaxpr(f_jax)(*jax_args))


# Programs over keys whose jaxprs are the key primitives alone: (name, ferrax fn, jax fn,
# argument maker (module -> args)).
_PROGRAMS: list[tuple[str, Callable[..., Any], Callable[..., Any], Callable[[Any], tuple[Any, ...]]]] = [
    ("split", lambda k: fr.split(k), lambda k: jax.random.split(k), lambda m: (m.key(0),)),
    ("split_shape", lambda k: fr.split(k, (2, 3)), lambda k: jax.random.split(k, (2, 3)), lambda m: (m.key(0),)),
    ("split_raw", lambda k: fr.split(k), lambda k: jax.random.split(k), lambda m: (m.PRNGKey(0),)),
    ("fold_in", lambda k, d: fr.fold_in(k, d), lambda k, d: jax.random.fold_in(k, d), lambda m: (m.key(1), np.int32(7))),
    ("bits", lambda k: fr.bits(k, (3,)), lambda k: jax.random.bits(k, (3,)), lambda m: (m.key(2),)),
    ("key_data", lambda k: fr.key_data(k), lambda k: jax.random.key_data(k), lambda m: (m.key(3),)),
    ("wrap", lambda d: fr.wrap_key_data(d), lambda d: jax.random.wrap_key_data(d), lambda m: (np.array([1, 2], np.uint32),)),
    ("seed", lambda s: fr.key(s), lambda s: jax.random.key(s), lambda m: (np.int32(5),)),
    ("prngkey", lambda s: fr.PRNGKey(s), lambda s: jax.random.PRNGKey(s), lambda m: (np.int32(5),)),

    ("vmap_bits", ferrax.vmap(lambda k: fr.bits(k, (4,))), jax.vmap(lambda k: jax.random.bits(k, (4,))),
     lambda m: (m.split(m.key(0), 3),)),
    ("vmap_fold_in", ferrax.vmap(lambda k, d: fr.fold_in(k, d)), jax.vmap(lambda k, d: jax.random.fold_in(k, d)),
     lambda m: (m.split(m.key(0), 3), np.arange(3, dtype=np.int32))),
    ("vmap_split", ferrax.vmap(lambda k: fr.split(k, (2, 5))), jax.vmap(lambda k: jax.random.split(k, (2, 5))),
     lambda m: (m.split(m.key(0), 3),)),
    ("vmap_seed", ferrax.vmap(lambda s: fr.key(s)), jax.vmap(lambda s: jax.random.key(s)),
     lambda m: (np.arange(3, dtype=np.int32),)),
    ("vmap_wrap_axis1", ferrax.vmap(lambda d: fr.wrap_key_data(d), in_axes=1),
     jax.vmap(lambda d: jax.random.wrap_key_data(d), in_axes=1), lambda m: (np.zeros((2, 3), np.uint32),)),
]


@pytest.mark.parametrize("name,f_fx,f_jax,make", _PROGRAMS, ids=[p[0] for p in _PROGRAMS])
def test_key_jaxprs_print_as_jaxs(name: str, f_fx: Callable[..., Any], f_jax: Callable[..., Any], make: Callable[[Any], tuple[Any, ...]]) -> None:
    got, want = _jaxpr_texts(f_fx, f_jax, make(fr), make(jax.random))
    assert got == want


def _data(x: Any) -> np.ndarray[Any, Any]:
    """Key data (or plain values) of either library's result, as NumPy."""
    if isinstance(x, fr.KeyArray):
        return np.asarray(fr.key_data(x))
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(x))
    return np.asarray(x)


@pytest.mark.parametrize("name,f_fx,f_jax,make", _PROGRAMS, ids=[p[0] for p in _PROGRAMS])
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_key_values_are_jaxs(name: str, f_fx: Callable[..., Any], f_jax: Callable[..., Any], make: Callable[[Any], tuple[Any, ...]], jitted: bool) -> None:
    fx = ferrax.jit(f_fx) if jitted else f_fx
    got = jax.tree_util.tree_leaves(jax.tree_util.tree_map(_data, fx(*make(fr)), is_leaf=lambda x: isinstance(x, fr.KeyArray)))
    want = jax.tree_util.tree_leaves(jax.tree_util.tree_map(_data, f_jax(*make(jax.random))))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("seed", [0, 1, -1, 2**31 - 1, -(2**31)])
def test_seeds_and_64_bit_seeds(seed: int) -> None:
    np.testing.assert_array_equal(_data(fr.key(seed)), _data(jax.random.key(seed)))
    with jax.enable_x64(True), ferrax.enable_x64(True):
        for s in (seed, 2**40 + 3, -(2**40) - 5):
            got = _data(ferrax.jit(fr.key)(np.int64(s)))
            want = _data(jax.random.key(np.int64(s)))
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(_data(fr.key(np.int64(s))), want)


def test_key_arrays_in_jaxprs_and_layouts() -> None:
    ks = fr.split(fr.key(0), 3)
    jks = jax.random.split(jax.random.key(0), 3)
    assert ks.dtype == dtypes.key_fry and str(ks.dtype) == "key<fry>" and ks.shape == (3,)
    # Layout changes on typed keys: the same keys as JAX's, eagerly and staged.
    layouts: list[Callable[[Any], Any]] = [
        lambda k: k[1], lambda k: k.reshape(3, 1), lambda k: k[::-1], lambda k: k.reshape(1, 3).T,
        lambda k: k.reshape(1, 3).squeeze(),
    ]
    for f in layouts:
        np.testing.assert_array_equal(_data(f(ks)), _data(f(jks)))
        np.testing.assert_array_equal(_data(ferrax.jit(f)(ks)), _data(f(jks)))
    text = str(ferrax.make_jaxpr(lambda k: k[0])(ks))
    assert "key<fry>[3]" in text and "key<fry>[]" in text


def test_keys_through_scan_cond_and_while() -> None:
    def body(k: Any, _: Any) -> tuple[Any, Any]:
        k, sub = fr.split(k)
        return k, fr.uniform(sub)

    def jbody(k: Any, _: Any) -> tuple[Any, Any]:
        k, sub = jax.random.split(k)
        return k, jax.random.uniform(sub)

    k, xs = ferrax.lax.scan(body, fr.key(4), None, length=5)
    jk, jxs = jax.lax.scan(jbody, jax.random.key(4), None, length=5)
    np.testing.assert_array_equal(_data(k), _data(jk))
    np.testing.assert_array_equal(np.asarray(xs), np.asarray(jxs))
    text = str(ferrax.make_jaxpr(lambda k: ferrax.lax.scan(body, k, None, length=5))(fr.key(4)))
    assert "key<fry>[]" in text and "random_split" in text and "random_bits" in text
    got = ferrax.lax.cond(True, lambda k: fr.fold_in(k, 1), lambda k: k, fr.key(2))
    want = jax.lax.cond(True, lambda k: jax.random.fold_in(k, 1), lambda k: k, jax.random.key(2))
    np.testing.assert_array_equal(_data(got), _data(want))


def test_grad_through_samplers_with_typed_keys() -> None:
    g = ferrax.grad(lambda x, k: x * fr.uniform(k))(1.5, fr.key(0))
    jg = jax.grad(lambda x, k: x * jax.random.uniform(k))(1.5, jax.random.key(0))
    np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=0, atol=0)


def test_primitive_results_have_key_dtype() -> None:
    k = prng.random_seed(np.int32(3))
    assert k.dtype == dtypes.key_fry and k.shape == ()
    with pytest.raises(TypeError, match="PRNG key"):
        np.asarray(fr.KeyArray(k))
    assert prng.random_unwrap(prng.random_split(k, (2,))).shape == (2, 2)
    assert prng.random_bits(prng.random_split(k, (2,)), 8, (3,)).dtype == np.uint8
