"""The incomplete gamma family against JAX 0.10.2: ``lax.igamma``, ``lax.igammac``,
``lax.igamma_grad_a`` (primitives) and ``lax.random_gamma_grad`` (traced into JAX's
loops), and ``scipy.special.gammainc``/``gammaincc``.

Compiled values are JAX's bits (the lowering writes JAX's series and continued fraction op
for op) in float32, float64, float16 and bfloat16; eager values (the same algorithm in
NumPy float64) are within float tolerance of them; derivatives, jaxprs, weak types and
errors are JAX's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ferrax
from ferrax import lax
from ferrax.errors import DifferentiationError
from ferrax.scipy import special as fsp

NDArray = np.ndarray[Any, Any]

#: Edges (a or x zero, negative, infinite, NaN), both branches (series where x <= 1 or
#: x <= a, continued fraction elsewhere), large and tiny operands.
EDGE_A = [0.0, 0.0, 1e-30, 0.5, 0.5, 1.0, 1.0, 2.5, 3.0, 10.0, 4.0, 2.0, 2.0, -1.0, 1.0, np.nan, np.inf, 50.0, 1e4, 0.1]
EDGE_X = [0.5, 2.0, 0.5, 0.3, np.inf, 2.0, 1.0, 1.5, 7.0, 9.0, 30.0, 0.0, -1.0, 1.0, np.nan, 1.0, 1.0, 1.0, 1e4 + 50, 0.05]

NAMES = ["igamma", "igammac", "igamma_grad_a", "random_gamma_grad"]


def _operands(dtype: Any, seed: int = 0) -> tuple[NDArray, NDArray]:
    rng = np.random.default_rng(seed)
    a = np.concatenate([EDGE_A, rng.uniform(0.01, 20.0, 60), rng.uniform(0.01, 2.0, 20)])
    x = np.concatenate([EDGE_X, rng.uniform(0.0, 25.0, 60), rng.uniform(0.0, 2.0, 20)])
    return a.astype(dtype), x.astype(dtype)


def _same_bits(got: NDArray, want: NDArray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want.astype(np.float64))
    assert np.array_equal(np.isnan(got.astype(np.float64)), nan)
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    bad = ~nan & (got.view(width) != want.view(width))
    assert not bad.any(), f"differ at {np.flatnonzero(bad)}: {got[bad]} vs {want[bad]}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["f32", "f16", "bf16"])
def test_compiled_values_are_jax_bits(name: str, dtype: Any) -> None:
    a, x = _operands(dtype)
    # With a rank-0 operand too, which broadcasts (JAX broadcasts both to one shape
    # first); both in one compilation.
    def both(lib: Any) -> Any:
        f = getattr(lib, name)
        return lambda a, x, a7, x3: (f(a, x), f(a7, x3))

    want = jax.jit(both(jax.lax))(a, x, a[:7], x[3])
    got = ferrax.jit(both(lax))(a, x, a[:7], x[3])
    for g, w in zip(got, want, strict=True):
        _same_bits(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("name", NAMES)
def test_compiled_values_are_jax_bits_in_float64(name: str) -> None:
    a, x = _operands(np.float64)
    with jax.enable_x64(True), ferrax.enable_x64(True):
        want = np.asarray(jax.jit(getattr(jax.lax, name))(a, x))
        got = np.asarray(ferrax.jit(getattr(lax, name))(a, x))
    _same_bits(got, want)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_eager_values_match_jax(name: str, dtype: Any) -> None:
    a, x = _operands(dtype, seed=1)
    want = np.asarray(jax.jit(getattr(jax.lax, name))(a, x)).astype(np.float64)
    got = np.asarray(getattr(lax, name)(a, x))
    assert got.dtype == np.dtype(dtype)
    # JAX's float32 iterations stop at float32's epsilon and use XLA's lgamma/digamma:
    # a few ulps (relative to the magnitudes that cancel in the derivatives).
    rtol, atol = (2e-4, 1e-6) if dtype == np.float32 else (4e-3, 2e-3)
    # Except at a = 1e4, x = 1e4 + 50, where JAX's float32 loses three digits (a log x - x
    # and lgamma(a) cancel) and the eager value is the true one (as SciPy's).
    keep = ~((a == 1e4) & (x > 1e4))
    np.testing.assert_allclose(got[keep].astype(np.float64), want[keep], rtol=rtol, atol=atol, equal_nan=True)


def test_eager_float64_matches_scipy() -> None:
    import scipy.special as sp

    a, x = _operands(np.float64, seed=2)
    keep = (a > 0) & (x >= 0) & np.isfinite(a) & np.isfinite(x)
    with ferrax.enable_x64(True):
        p = np.asarray(lax.igamma(a[keep], x[keep]))
        q = np.asarray(lax.igammac(a[keep], x[keep]))
    np.testing.assert_allclose(p, sp.gammainc(a[keep], x[keep]), rtol=1e-10, atol=1e-300)
    # (1 - P where P is about 1 leaves float64's rounding: a = 1e-30.)
    np.testing.assert_allclose(q, sp.gammaincc(a[keep], x[keep]), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize(
    "args",
    [(1.0, 2.0), (np.float32(1.5), 2.0), (np.ones(3, np.float16), np.float16(2)), (np.ones((2, 3), np.float32), np.float32(0.5))],
    ids=["weak-weak", "f32-weak", "f16", "matrix-scalar"],
)
@pytest.mark.parametrize("name", ["igamma", "igammac", "igamma_grad_a"])
def test_jaxprs_dtypes_and_weak_types_are_jax(name: str, args: tuple[Any, Any]) -> None:
    want = jax.make_jaxpr(getattr(jax.lax, name))(*args)
    got = ferrax.make_jaxpr(getattr(lax, name))(*args)
    assert str(got) == str(want)
    j, f = getattr(jax.lax, name)(*args), getattr(lax, name)(*args)
    assert (f.dtype, f.shape, f.weak_type) == (j.dtype, j.shape, j.aval.weak_type)


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.igamma(np.ones(2, np.int32), np.ones(2, np.int32)),
        lambda L: L.igammac(np.ones(2, np.float16), np.ones(2, np.float32)),
        lambda L: L.igamma_grad_a(np.array([True]), np.array([True])),
        # A Python scalar takes the default float type (JAX's lax does not promote).
        lambda L: L.igamma(1.0, np.ones(3, np.float16)),
        lambda L: L.random_gamma_grad(np.ones(2, np.int32), np.ones(2, np.int32)),
        lambda L: L.random_gamma_grad(np.ones(2, np.float32), np.ones(2, np.float16)),
    ],
    ids=["igamma-int", "igammac-mixed", "igamma_grad_a-bool", "igamma-weak-f16", "random_gamma_grad-int", "random_gamma_grad-mixed"],
)
def test_bad_dtypes_are_type_errors(call: Callable[[Any], Any]) -> None:
    with pytest.raises(TypeError):
        call(jax.lax)
    with pytest.raises(ferrax.TypeCheckError, match=r"expected a float dtype|differ") as info:
        call(lax)
    assert isinstance(info.value, TypeError)
    assert "test_igamma.py" in str(info.value)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
@pytest.mark.parametrize("argnum", [0, 1])
def test_derivative_jaxprs_are_jax(name: str, argnum: int) -> None:
    want = jax.make_jaxpr(jax.grad(getattr(jax.lax, name), argnum))(1.5, 2.0)
    got = ferrax.make_jaxpr(ferrax.grad(getattr(lax, name), argnum))(1.5, 2.0)
    assert _structure(got) == _structure(want)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_derivatives_match_jax(name: str) -> None:
    a = np.array([0.3, 1.5, 2.5, 7.0, 0.9], np.float32)
    x = np.array([0.2, 2.0, 1.0, 9.0, 4.0], np.float32)

    def total(L: Any, mod: Any) -> Any:
        return lambda a, x: getattr(L, name)(a, x).sum()

    want = jax.jit(jax.grad(total(jax.lax, jnp), (0, 1)))(a, x)
    got = ferrax.jit(ferrax.grad(total(lax, None), (0, 1)))(a, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-7)
    eager = ferrax.grad(total(lax, None), (0, 1))(a, x)
    for g, w in zip(eager, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=1e-6)


def test_igamma_grad_a_has_no_derivative() -> None:
    with pytest.raises(NotImplementedError, match="igamma_grad_a"):
        jax.grad(jax.lax.igamma_grad_a)(1.0, 2.0)
    with pytest.raises(DifferentiationError, match="Differentiation rule for 'igamma_grad_a' not implemented"):
        ferrax.grad(lax.igamma_grad_a)(1.0, 2.0)
    with pytest.raises(NotImplementedError):
        ferrax.jvp(lambda x: lax.igamma_grad_a(1.0, x), (2.0,), (1.0,))


def _type(v: Any) -> str:
    try:
        return str(v.aval.str_short(short_dtypes=True))  # JAX's
    except TypeError:
        return str(v.aval.str_short())  # ferrax's


def _structure(jaxpr: Any) -> list[Any]:
    """A jaxpr (JAX's or ferrax's) without its variable names (JAX prints ``_`` for an
    unused result, ferrax names it): per equation its primitive, its operands (a
    literal's value, a variable's type) and its results' types; the sub-jaxprs (the
    while loops' bodies and conditions) after, by the same. Iterative: a worklist."""
    out: list[Any] = []
    work = [jaxpr]
    while work:
        j = work.pop(0)
        j = getattr(j, "jaxpr", j)
        for e in j.eqns:
            prim = e.primitive if isinstance(e.primitive, str) else e.primitive.name
            operands = e.invars if hasattr(e, "invars") else e.inputs
            ins = [repr(float(v.val)) if hasattr(v, "val") else _type(v) for v in operands]
            outs = [_type(v) for v in e.outvars]
            for _, v in sorted(e.params.items()):
                if hasattr(v, "jaxpr") or hasattr(v, "eqns"):
                    work.append(v)
            out.append((prim, ins, outs))
    return out


@pytest.mark.parametrize(
    "args",
    [(1.0, 2.0), (np.ones(3, np.float32), np.ones(3, np.float32)), (np.ones(3, np.float16), 2.0)],
    ids=["weak scalars", "f32[3]", "f16[3] and a scalar"],
)
def test_random_gamma_grad_traces_as_jax(args: tuple[Any, Any]) -> None:
    want = jax.make_jaxpr(jax.lax.random_gamma_grad)(*args)
    got = ferrax.make_jaxpr(lax.random_gamma_grad)(*args)
    assert "while[" in str(got) and " igamma" not in str(got)
    assert _structure(got) == _structure(want)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
@pytest.mark.parametrize(
    "args",
    [(1, 2.0), (np.ones(2, np.float32), 2), (np.arange(1, 4), np.arange(3)), (np.float16(2), np.ones(2, np.float32))],
    ids=["int-weak", "f32-int", "ints", "f16-f32"],
)
def test_scipy_gammainc_as_jax(name: str, args: tuple[Any, Any]) -> None:
    want_jaxpr = jax.make_jaxpr(getattr(jax.scipy.special, name))(*args)
    got_jaxpr = ferrax.make_jaxpr(getattr(fsp, name))(*args)
    assert str(got_jaxpr) == str(want_jaxpr)
    want = np.asarray(jax.jit(getattr(jax.scipy.special, name))(*args))
    got = np.asarray(ferrax.jit(getattr(fsp, name))(*args))
    _same_bits(got, want)


def test_vmap_of_igamma_is_elementwise() -> None:
    a, x = _operands(np.float32, seed=3)
    a, x = a[:24].reshape(4, 6), x[:24].reshape(4, 6)
    for name in ["igamma", "igammac", "igamma_grad_a"]:
        f = getattr(lax, name)
        got = np.asarray(ferrax.jit(ferrax.vmap(f, in_axes=(0, 1)))(a, x.T))
        want = np.asarray(jax.jit(jax.vmap(getattr(jax.lax, name), in_axes=(0, 1)))(a, x.T))
        _same_bits(got, want)
