"""QR and SVD (issue 12, item 5): ``lax.linalg.qr``/``svd``, ``numpy.linalg.qr``/``svd``/
``svdvals``/``matrix_rank``/``cond``/``norm`` (2, -2, 'nuc'), ``scipy.linalg.qr``/``svd``,
``random.orthogonal`` and ``nn.initializers.orthogonal`` against JAX 0.10.2.

Cases are generated over functions (written once for both libraries) and matrix shapes
(tall, wide, square, batched, empty), float32 and float64 under x64. Checked: eager values
equal JAX's bits (eager ferrax calls the LAPACK routines jaxlib's kernels call, with the
same workspaces), one ``ferrax.jit`` over every case gives JAX's bits, gradients and
``vmap`` equal JAX's, the jaxpr prints as JAX's, the lowered module calls the same
LAPACK targets, bad operands and modes raise JAX's exception types.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
import ferrax.scipy.linalg as fsl
from ferrax import lax
from jax_harness import assert_close_to_jax, three_ways

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jsl = pytest.importorskip("jax.scipy.linalg")

NDArray = np.ndarray[Any, Any]


class Lib(NamedTuple):
    lax: Any
    np: Any
    scipy: Any


FX = Lib(lax, fnp, fsl)
JX = Lib(jax.lax, jnp, jsl)

Fn = Callable[[Lib], Callable[..., Any]]

# Every way in: lax (full and reduced), numpy's modes, scipy's modes.
FUNCTIONS: dict[str, Fn] = {
    "lax full": lambda L: lambda x: L.lax.linalg.qr(x),
    "lax reduced": lambda L: lambda x: L.lax.linalg.qr(x, full_matrices=False),
    "np reduced": lambda L: lambda x: tuple(L.np.linalg.qr(x)),
    "np complete": lambda L: lambda x: tuple(L.np.linalg.qr(x, mode="complete")),
    "np r": lambda L: lambda x: L.np.linalg.qr(x, mode="r"),
    "scipy full": lambda L: lambda x: L.scipy.qr(x),
    "scipy economic": lambda L: lambda x: L.scipy.qr(x, mode="economic"),
    "scipy r": lambda L: lambda x: L.scipy.qr(x, mode="r"),
    "lax svd full": lambda L: lambda x: L.lax.linalg.svd(x),
    "lax svd reduced": lambda L: lambda x: L.lax.linalg.svd(x, full_matrices=False),
    "lax svd values": lambda L: lambda x: L.lax.linalg.svd(x, compute_uv=False),
    "np svd": lambda L: lambda x: tuple(L.np.linalg.svd(x, full_matrices=False)),
    "np svdvals": lambda L: lambda x: L.np.linalg.svdvals(x),
    "np norm 2": lambda L: lambda x: L.np.linalg.norm(x, ord=2, axis=(-2, -1)),
    "np norm nuc": lambda L: lambda x: L.np.linalg.norm(x, ord="nuc", axis=(-2, -1)),
    "np pinv": lambda L: lambda x: L.np.linalg.pinv(x),
    "np pinv rtol": lambda L: lambda x: L.np.linalg.pinv(x, rtol=0.5),
    "scipy svd": lambda L: lambda x: L.scipy.svd(x),
    "scipy svd values": lambda L: lambda x: L.scipy.svd(x, compute_uv=False),
}
# (JAX's max and min of no singular values raise.)
NONEMPTY: dict[str, Fn] = {
    "np matrix_rank": lambda L: lambda x: L.np.linalg.matrix_rank(x),
    "np norm -2 keepdims": lambda L: lambda x: L.np.linalg.norm(x, ord=-2, axis=(-1, -2), keepdims=True),
    "np cond": lambda L: lambda x: L.np.linalg.cond(x),
    "np cond -2": lambda L: lambda x: L.np.linalg.cond(x, -2),
}
SHAPES = [(4, 3), (3, 5), (3, 3), (2, 4, 2), (2, 0, 3), (3, 0), (1, 1)]


def _flat(out: Any) -> list[NDArray]:
    if isinstance(out, (tuple, list)):
        return [np.asarray(o) for o in out]
    return [np.asarray(out)]


def _cases(dtype: Any) -> list[tuple[str, Fn, NDArray]]:
    rng = np.random.default_rng(0)
    out = []
    for name, fn in FUNCTIONS.items():
        for shape in SHAPES:
            out.append((f"{name} {shape}", fn, rng.standard_normal(shape).astype(dtype)))
    for name, fn in NONEMPTY.items():
        for shape in SHAPES:
            if 0 not in shape:
                out.append((f"{name} {shape}", fn, rng.standard_normal(shape).astype(dtype)))
    # Rank-deficient: matrix_rank below min(m, n).
    low = (rng.standard_normal((2, 5, 1)) @ rng.standard_normal((2, 1, 4))).astype(dtype)
    out.append(("np matrix_rank low", NONEMPTY["np matrix_rank"], low))
    return out


@pytest.mark.parametrize(("dtype", "x64"), [(np.float32, False), (np.float64, True)])
def test_values_and_compiled_bits_match_jax(dtype: Any, x64: bool) -> None:
    cases = _cases(dtype)
    with ferrax.enable_x64(x64), jax.enable_x64(x64):
        args = [c[2] for c in cases]
        theirs = jax.jit(lambda xs: [fn(JX)(x) for (_, fn, _), x in zip(cases, xs)])(args)
        compiled = ferrax.jit(lambda xs: [fn(FX)(x) for (_, fn, _), x in zip(cases, xs)])(args)
        for (name, fn, x), t, k in zip(cases, theirs, compiled, strict=True):
            eager = fn(FX)(x)
            assert isinstance(eager, tuple) == isinstance(t, (tuple, list)), name
            for e, j, c in zip(_flat(eager), _flat(t), _flat(k), strict=True):
                assert e.dtype == j.dtype == c.dtype and e.shape == j.shape == c.shape, (name, e.shape, j.shape)
                if "pinv" in name:  # eager matmuls are NumPy's, not XLA's: an ulp apart
                    np.testing.assert_allclose(e, j, rtol=4 * np.finfo(dtype).eps, atol=4 * np.finfo(dtype).eps, err_msg=name)
                else:
                    np.testing.assert_array_equal(e, j, err_msg=f"{name} (eager)")
                np.testing.assert_array_equal(c, j, err_msg=f"{name} (compiled)")


def test_integer_input_is_promoted_as_jax() -> None:
    x = np.arange(6, dtype=np.int32).reshape(3, 2) + np.eye(3, 2, dtype=np.int32)
    for fn in (FUNCTIONS["np reduced"], FUNCTIONS["scipy full"]):
        ours, theirs = _flat(fn(FX)(x)), _flat(fn(JX)(x))
        for o, t in zip(ours, theirs, strict=True):
            assert o.dtype == t.dtype
            np.testing.assert_allclose(o, t, rtol=1e-6, atol=1e-6)


def _loss(f: Callable[..., Any], L: Any) -> Callable[..., Any]:
    def loss(x: Any) -> Any:
        outs = f(x)
        return sum(L.sum(L.sin(o)) for o in (outs if isinstance(outs, tuple) else (outs,)))

    return loss


def test_gradients_and_jvps_match_jax() -> None:
    rng = np.random.default_rng(1)
    shapes = [(4, 3), (3, 5), (3, 3), (2, 4, 2)]
    xs = [(rng.standard_normal(s) + 2 * np.eye(s[-2], s[-1])).astype(np.float32) for s in shapes]
    ts = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    fns = [FUNCTIONS["lax full"], FUNCTIONS["lax reduced"], FUNCTIONS["lax svd reduced"], FUNCTIONS["np norm nuc"],
           FUNCTIONS["np pinv"]]

    def run(library: Any, lib: Lib, L: Any) -> Callable[..., Any]:
        def all_of(xs: Any, ts: Any) -> Any:
            out = []
            for fn in fns:
                for x, t in zip(xs, ts):
                    out.append(library.grad(_loss(fn(lib), L))(x))
                    tangent = library.jvp(fn(lib), (x,), (t,))[1]
                    out.extend(tangent if isinstance(tangent, tuple) else (tangent,))
            return out

        return all_of

    theirs, ours, eager = three_ways(run, (jax, JX, jnp), (ferrax, FX, fnp), xs, ts)
    assert_close_to_jax(theirs, ours, eager, rtol=1e-4, atol=1e-4, scaled=True)


def test_vmap_matches_jax() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    for axis in (0, 1, 2):
        for fn in (FUNCTIONS["lax full"], FUNCTIONS["np reduced"], FUNCTIONS["np svd"], NONEMPTY["np matrix_rank"]):
            ours = ferrax.vmap(fn(FX), in_axes=axis)(x)
            theirs = jax.vmap(fn(JX), in_axes=axis)(x)
            for o, t in zip(_flat(ours), _flat(theirs), strict=True):
                assert o.shape == t.shape
                np.testing.assert_array_equal(o, t)


def test_jaxpr_prints_as_jax() -> None:
    x = np.ones((2, 4, 3), np.float32)
    for full in (True, False):
        ours = str(ferrax.make_jaxpr(lambda a: lax.linalg.qr(a, full_matrices=full))(x))
        theirs = str(jax.make_jaxpr(lambda a: jax.lax.linalg.qr(a, full_matrices=full))(x))
        assert ours == theirs
        for uv in (True, False):
            ours = str(ferrax.make_jaxpr(lambda a: lax.linalg.svd(a, full_matrices=full, compute_uv=uv))(x))
            theirs = str(jax.make_jaxpr(lambda a: jax.lax.linalg.svd(a, full_matrices=full, compute_uv=uv))(x))
            assert ours == theirs


def test_lowering_calls_jaxlib_lapack_targets() -> None:
    x = np.ones((2, 4, 3), np.float64)

    def targets(text: str) -> list[str]:
        return sorted(re.findall(r"lapack_\w+_ffi", text))

    with ferrax.enable_x64(True), jax.enable_x64(True):
        ours = ferrax.jit(lambda a: (lax.linalg.qr(a), lax.linalg.svd(a))).lower(x).as_text()
        theirs = jax.jit(lambda a: (jax.lax.linalg.qr(a), jax.lax.linalg.svd(a))).lower(x).as_text()
    assert targets(ours) == targets(theirs) == ["lapack_dgeqrf_ffi", "lapack_dgesdd_ffi", "lapack_dorgqr_ffi"]


def test_lstsq_matches_jax() -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 3)).astype(np.float32)
    low = (rng.standard_normal((4, 1)) @ rng.standard_normal((1, 3))).astype(np.float32)
    b1, b2 = rng.standard_normal(5).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    cases = [(a, b1, None), (low, b2, None), (a.T.copy(), b2[:3], 0.5), (np.zeros((0, 3), np.float32), np.zeros(0, np.float32), None)]

    def run(L: Lib) -> Callable[..., Any]:
        return lambda args: [L.np.linalg.lstsq(x, y, rcond=r) for (x, y, r) in args]

    pairs = [(x, y) for x, y, _ in cases]
    rconds = [r for _, _, r in cases]
    theirs = jax.jit(lambda ps: run(JX)([(x, y, r) for (x, y), r in zip(ps, rconds)]))(pairs)
    ours = ferrax.jit(lambda ps: run(FX)([(x, y, r) for (x, y), r in zip(ps, rconds)]))(pairs)
    eager = run(FX)(cases)
    for t, o, e in zip(theirs, ours, eager, strict=True):
        for ti, oi, ei in zip(t, o, e, strict=True):
            assert np.asarray(oi).dtype == np.asarray(ti).dtype and np.shape(oi) == np.shape(ti)
            np.testing.assert_allclose(np.asarray(oi), np.asarray(ti), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(np.asarray(ei), np.asarray(ti), rtol=1e-5, atol=1e-5)
    # numpy_resid: empty residuals where NumPy's are (eager only).
    ours_r = fnp.linalg.lstsq(low, b2, numpy_resid=True)[1]
    theirs_r = jnp.linalg.lstsq(low, b2, numpy_resid=True)[1]
    assert np.shape(ours_r) == np.shape(theirs_r) == (0,)
    _raises_like_jax(lambda L: L.np.linalg.lstsq, a, b2)


def test_orthogonal_samplers_match_jax() -> None:
    samplers: list[tuple[int, tuple[int, ...], int | None]] = [(3, (), None), (2, (2,), 4), (4, (), 2)]
    for n, shape, m in samplers:
        ours = ferrax.random.orthogonal(ferrax.random.key(3), n, shape, m=m)
        theirs = jax.random.orthogonal(jax.random.key(3), n, shape, m=m)
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-6)
    initializers: list[tuple[tuple[int, ...], int]] = [((3, 4), -1), ((2, 3, 5), 0), ((4, 0), -1)]
    for shape, axis in initializers:
        ours = ferrax.nn.initializers.orthogonal(2.0, axis)(ferrax.random.key(1), shape)
        theirs = jax.nn.initializers.orthogonal(2.0, axis)(jax.random.key(1), shape)
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-6)


def _raises_like_jax(fn: Fn, *args: Any) -> None:
    with pytest.raises(Exception) as theirs:
        fn(JX)(*args)
    with pytest.raises(Exception) as ours:
        fn(FX)(*args)
    assert isinstance(ours.value, type(theirs.value)), (ours.value, theirs.value)
    assert "test_linalg2.py" in str(ours.value)  # the user's line


def test_errors_match_jax() -> None:
    f32 = np.float32
    _raises_like_jax(lambda L: L.lax.linalg.qr, np.ones(3, f32))
    _raises_like_jax(lambda L: L.lax.linalg.qr, np.ones((2, 2), np.int32))
    _raises_like_jax(lambda L: L.np.linalg.qr, np.ones(3, f32))
    _raises_like_jax(lambda L: lambda x: L.np.linalg.qr(x, mode="economic"), np.ones((2, 2), f32))
    _raises_like_jax(lambda L: lambda x: L.scipy.qr(x, mode="reduced"), np.ones((2, 2), f32))
    _raises_like_jax(lambda L: L.lax.linalg.svd, np.ones(3, f32))
    _raises_like_jax(lambda L: L.np.linalg.svd, np.ones(3, f32))
    _raises_like_jax(lambda L: L.np.linalg.cond, np.ones(3, f32))
    _raises_like_jax(lambda L: L.np.linalg.pinv, np.ones(3, f32))
    _raises_like_jax(lambda L: L.np.linalg.cond, np.ones((0, 3), f32))
    _raises_like_jax(lambda L: lambda x: L.np.linalg.cond(x, 1), np.ones((2, 3), f32))
    # Full non-square singular vectors have no derivative, in JAX either.
    with pytest.raises(NotImplementedError):
        ferrax.grad(lambda x: lax.linalg.svd(x)[0].sum())(np.ones((3, 2), f32))
    with pytest.raises(ValueError, match="at least a 2D shape.*test_linalg2.py"):
        ferrax.nn.initializers.orthogonal()(ferrax.random.key(0), (3,))
    with pytest.raises(ValueError):
        jax.nn.initializers.orthogonal()(jax.random.key(0), (3,))
