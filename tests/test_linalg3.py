"""The rest of numpy.linalg / scipy.linalg (brief L) against JAX 0.10.2: ``svd``/``pinv``/
``matrix_rank`` with ``hermitian=True``, ``random.multivariate_normal``'s ``'svd'`` and
``'eigh'`` methods.

Each function is written once for both libraries; values, dtypes (float32, float64 under
x64), one ``ferrax.jit`` over every case against ``jax.jit``'s bits, gradients, ``vmap``,
jaxpr text and errors are compared with JAX's.
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
    random: Any


FX = Lib(lax, fnp, fsl, ferrax.random)
JX = Lib(jax.lax, jnp, jsl, jax.random)

Fn = Callable[[Lib], Callable[..., Any]]

# Functions of one symmetric matrix (batched, or empty).
SYMMETRIC: dict[str, Fn] = {
    "svd hermitian": lambda L: lambda x: tuple(L.np.linalg.svd(x, hermitian=True)),
    "svd hermitian values": lambda L: lambda x: L.np.linalg.svd(x, hermitian=True, compute_uv=False),
    "pinv hermitian": lambda L: lambda x: L.np.linalg.pinv(x, hermitian=True),
    "matrix_rank hermitian": lambda L: lambda x: L.np.linalg.matrix_rank(x, hermitian=True),
}
SYMMETRIC_SHAPES = [(3, 3), (2, 4, 4), (1, 1), (0, 0)]
# (JAX's max of no singular values raises.)
NONEMPTY_ONLY = {"matrix_rank hermitian"}
# Eager matmuls are NumPy's, not XLA's: an ulp apart.
ULP_APART = {"pinv hermitian"}


def _flat(out: Any) -> list[NDArray]:
    if isinstance(out, (tuple, list)):
        return [np.asarray(o) for o in out]
    return [np.asarray(out)]


def _symmetric(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> NDArray:
    a = rng.standard_normal(shape)
    out: NDArray = (a + np.swapaxes(a, -1, -2)).astype(dtype)
    return out


def _cases(dtype: Any) -> list[tuple[str, Fn, NDArray]]:
    rng = np.random.default_rng(0)
    out = []
    for name, fn in SYMMETRIC.items():
        for shape in SYMMETRIC_SHAPES:
            if name in NONEMPTY_ONLY and 0 in shape:
                continue
            out.append((f"{name} {shape}", fn, _symmetric(rng, shape, dtype)))
    # Rank-deficient and indefinite: eigenvalues of both signs and zeros.
    v = rng.standard_normal((4, 2))
    low = (v @ np.diag([3.0, -2.0]) @ v.T).astype(dtype)
    for name in ("svd hermitian", "pinv hermitian", "matrix_rank hermitian"):
        out.append((f"{name} low", SYMMETRIC[name], low))
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
                if name.split(" (")[0].removesuffix(" low") in ULP_APART:
                    tol = 8 * np.finfo(dtype).eps * max(1.0, float(np.max(np.abs(j), initial=0)))
                    np.testing.assert_allclose(e, j, rtol=tol, atol=tol, err_msg=name)
                else:
                    np.testing.assert_array_equal(e, j, err_msg=f"{name} (eager)")
                np.testing.assert_array_equal(c, j, err_msg=f"{name} (compiled)")


def test_hermitian_rank_of_a_low_rank_matrix() -> None:
    v = np.random.default_rng(5).standard_normal((5, 2))
    low = (v @ v.T).astype(np.float32)
    assert int(fnp.linalg.matrix_rank(low, hermitian=True)) == int(jnp.linalg.matrix_rank(low, hermitian=True)) == 2


def _loss(f: Callable[..., Any], L: Any) -> Callable[..., Any]:
    def loss(x: Any) -> Any:
        outs = f(x)
        return sum(L.sum(L.sin(o)) for o in (outs if isinstance(outs, tuple) else (outs,)))

    return loss


def test_gradients_and_jvps_match_jax() -> None:
    rng = np.random.default_rng(1)
    xs = [_symmetric(rng, s, np.float32) + 3 * np.eye(s[-1], dtype=np.float32) for s in [(3, 3), (2, 4, 4)]]
    # Tangents that are not symmetric: the hermitian paths read the symmetrized matrix.
    ts = [rng.standard_normal(x.shape).astype(np.float32) for x in xs]
    fns = [SYMMETRIC["pinv hermitian"], SYMMETRIC["svd hermitian values"]]

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
    x = _symmetric(np.random.default_rng(2), (3, 4, 4), np.float32)
    x = np.moveaxis(x, 0, 1)  # the batch in the middle: axes 1 is the batch
    for fn in SYMMETRIC.values():
        ours = ferrax.vmap(fn(FX), in_axes=1)(x)
        theirs = jax.vmap(fn(JX), in_axes=1)(x)
        for o, t in zip(_flat(ours), _flat(theirs), strict=True):
            assert o.shape == t.shape and o.dtype == t.dtype
            np.testing.assert_allclose(o, t, rtol=1e-6, atol=1e-6)


def _equations(text: str) -> list[str]:
    """The primitives and their one-line params, in order, without JAX's jit wrapper."""
    return [p for p in re.findall(r"= (\w+(?:\[[^\]\n]*\])?)", text) if not p.startswith("jit")]


def test_svd_hermitian_jaxpr_has_jax_equations() -> None:
    x = np.ones((4, 4), np.float32)
    for uv in (True, False):
        ours = str(ferrax.make_jaxpr(lambda a: fnp.linalg.svd(a, hermitian=True, compute_uv=uv))(x))
        theirs = str(jax.make_jaxpr(lambda a: jnp.linalg.svd(a, hermitian=True, compute_uv=uv))(x))
        if uv:  # (JAX's take_along_axis normalizes the indices first: a jit of its own.)
            theirs = re.sub(r"convert_element_type.*?reshape", "reshape", theirs, flags=re.S)
        assert _equations(ours) == _equations(theirs)


@pytest.mark.parametrize("method", ["svd", "eigh", "cholesky"])
def test_multivariate_normal_methods_match_jax(method: str) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 3))
    cov = (a @ np.swapaxes(a, -1, -2)).astype(np.float32)
    mean = rng.standard_normal(3).astype(np.float32)
    for shape in [None, (4, 2)]:
        ours = FX.random.multivariate_normal(ferrax.random.key(1), mean, cov, shape, method=method)
        theirs = JX.random.multivariate_normal(jax.random.key(1), mean, cov, shape, method=method)
        compiled = ferrax.jit(lambda k, m, c: ferrax.random.multivariate_normal(k, m, c, shape, method=method))(
            ferrax.random.key(1), mean, cov
        )
        assert ours.shape == theirs.shape == compiled.shape and ours.dtype == theirs.dtype == compiled.dtype
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(np.asarray(compiled), np.asarray(theirs))
    with ferrax.enable_x64(True), jax.enable_x64(True):
        ours = FX.random.multivariate_normal(ferrax.random.key(2), mean, cov, method=method, dtype=np.float64)
        theirs = JX.random.multivariate_normal(jax.random.key(2), mean, cov, method=method, dtype=np.float64)
        assert ours.dtype == theirs.dtype == np.float64
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-12, atol=1e-12)


def test_multivariate_normal_semidefinite_cov_by_svd_and_eigh() -> None:
    # A singular covariance: Cholesky gives NaN, the SVD and eigh factors do not.
    cov = np.array([[1.0, 1.0], [1.0, 1.0]], np.float32)
    mean = np.zeros(2, np.float32)
    for method in ("svd", "eigh"):
        ours = np.asarray(ferrax.random.multivariate_normal(ferrax.random.key(0), mean, cov, (3,), method=method))
        theirs = np.asarray(jax.random.multivariate_normal(jax.random.key(0), mean, cov, (3,), method=method))
        assert np.all(np.isnan(ours) == np.isnan(theirs))
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def _raises_like_jax(fn: Fn, *args: Any) -> None:
    with pytest.raises(Exception) as theirs:
        fn(JX)(*args)
    with pytest.raises(Exception) as ours:
        fn(FX)(*args)
    assert isinstance(ours.value, type(theirs.value)), (ours.value, theirs.value)
    assert "test_linalg3.py" in str(ours.value)  # the user's line


def test_errors_match_jax() -> None:
    f32 = np.float32
    _raises_like_jax(lambda L: lambda x: L.np.linalg.svd(x, hermitian=True), np.ones((2, 3), f32))
    _raises_like_jax(lambda L: lambda x: L.np.linalg.pinv(x, hermitian=True), np.ones((2, 3), f32))
    _raises_like_jax(
        lambda L: lambda m, c: L.random.multivariate_normal(
            (ferrax if L is FX else jax).random.key(0), m, c, method="qr"
        ),
        np.zeros(2, f32),
        np.eye(2, dtype=f32),
    )


def test_det_gradients_at_singular_matrices_match_jax() -> None:
    rng = np.random.default_rng(6)
    rank3 = rng.standard_normal((5, 3)) @ rng.standard_normal((3, 5))  # rank n-2: zero adjugate
    rank4 = rng.standard_normal((5, 4)) @ rng.standard_normal((4, 5))  # rank n-1: rank-one adjugate
    xs = [a.astype(np.float32) for a in (rank3, rank4, rng.standard_normal((2, 4, 4)), np.zeros((4, 4)), np.ones((1, 1)))]
    ts = [rng.standard_normal(x.shape).astype(np.float32) for x in xs]

    def run(library: Any, L: Any) -> Callable[..., Any]:
        def all_of(xs: Any, ts: Any) -> Any:
            out = []
            for x, t in zip(xs, ts):
                out.append(library.grad(lambda a: L.linalg.det(a).sum())(x))
                out.append(library.jvp(L.linalg.det, (x,), (t,))[1])
            return out

        return all_of

    theirs, ours, eager = three_ways(run, (jax, jnp), (ferrax, fnp), xs, ts)
    assert not any(np.any(np.isnan(np.asarray(t))) for t in theirs)
    assert_close_to_jax(theirs, ours, eager, rtol=1e-5, atol=1e-5)
    # The rank n-1 gradient is the (nonzero) adjugate's transpose.
    assert np.abs(np.asarray(eager[2])).max() > 1e-3
    # Second order and vmap.
    b = rng.standard_normal((3, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(ferrax.hessian(fnp.linalg.det)(b[0])), np.asarray(jax.hessian(jnp.linalg.det)(b[0])), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(ferrax.vmap(ferrax.grad(fnp.linalg.det))(b)), np.asarray(jax.vmap(jax.grad(jnp.linalg.det))(b)), rtol=1e-5, atol=1e-5
    )


# ------------------------------------------------- geqrf, householder_product, qr raw

from jax._src.lax import linalg as jax_lax_linalg  # noqa: E402  (geqrf is not public in JAX)

RAW_SHAPES = [(4, 3), (3, 5), (3, 3), (2, 4, 2), (0, 3), (3, 0), (1, 1)]


def _raw_cases(dtype: Any) -> list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[NDArray, ...]]]:
    """(name, ferrax function, JAX function, operands)."""
    rng = np.random.default_rng(7)
    out: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[NDArray, ...]]] = []
    for shape in RAW_SHAPES:
        x = rng.standard_normal(shape).astype(dtype)
        out.append((f"geqrf {shape}", lax.linalg.geqrf, jax_lax_linalg.geqrf, (x,)))
        out.append((f"qr raw {shape}", lambda a: tuple(fnp.linalg.qr(a, mode="raw")), lambda a: tuple(jnp.linalg.qr(a, mode="raw")), (x,)))
        m, n = shape[-2:]
        if m >= n:
            packed, taus = (np.asarray(t) for t in jax_lax_linalg.geqrf(x))
            for k in sorted({0, taus.shape[-1] // 2, taus.shape[-1]}):
                out.append((f"householder_product {shape} k={k}", lax.linalg.householder_product,
                            jax.lax.linalg.householder_product, (packed, np.ascontiguousarray(taus[..., :k]))))
        if m == n:
            for name in ("slogdet qr",):
                out.append((f"{name} {shape}", lambda a: tuple(fnp.linalg.slogdet(a, method="qr")),
                            lambda a: tuple(jnp.linalg.slogdet(a, method="qr")), (x,)))
    # A singular matrix and one with a zero column below the diagonal (tau 0).
    sing = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]], dtype)
    upper = np.triu(rng.standard_normal((3, 3))).astype(dtype)
    for name, a in (("singular", sing), ("upper", upper)):
        out.append((f"slogdet qr {name}", lambda a: tuple(fnp.linalg.slogdet(a, method="qr")),
                    lambda a: tuple(jnp.linalg.slogdet(a, method="qr")), (a,)))
        out.append((f"geqrf {name}", lax.linalg.geqrf, jax_lax_linalg.geqrf, (a,)))
    return out


@pytest.mark.parametrize(("dtype", "x64"), [(np.float32, False), (np.float64, True)])
def test_geqrf_householder_product_raw_and_slogdet_qr_bits_match_jax(dtype: Any, x64: bool) -> None:
    cases = _raw_cases(dtype)
    with ferrax.enable_x64(x64), jax.enable_x64(x64):
        args = [c[3] for c in cases]
        theirs = jax.jit(lambda xs: [j(*x) for (_, _, j, _), x in zip(cases, xs)])(args)
        compiled = ferrax.jit(lambda xs: [f(*x) for (_, f, _, _), x in zip(cases, xs)])(args)
        for (name, f, _, x), t, k in zip(cases, theirs, compiled, strict=True):
            eager = f(*x)
            for e, j, c in zip(_flat(eager), _flat(t), _flat(k), strict=True):
                assert e.dtype == j.dtype == c.dtype and e.shape == j.shape == c.shape, (name, e.shape, j.shape)
                if name.startswith("slogdet"):  # eager logs are NumPy's, not XLA's: ulps apart
                    np.testing.assert_allclose(e, j, rtol=4 * np.finfo(dtype).eps, err_msg=f"{name} (eager)")
                else:
                    np.testing.assert_array_equal(e, j, err_msg=f"{name} (eager)")
                np.testing.assert_array_equal(c, j, err_msg=f"{name} (compiled)")


def test_householder_product_of_geqrf_is_qr() -> None:
    x = np.random.default_rng(8).standard_normal((2, 5, 3)).astype(np.float32)
    packed, taus = lax.linalg.geqrf(x)
    q = lax.linalg.householder_product(packed, taus)
    np.testing.assert_array_equal(np.asarray(q), np.asarray(lax.linalg.qr(x, full_matrices=False)[0]))


def test_geqrf_and_householder_product_jaxpr_and_lowering_as_jax() -> None:
    a, t = np.ones((2, 4, 3), np.float64), np.ones((2, 3), np.float64)

    def ours(x: Any, y: Any) -> Any:
        return lax.linalg.geqrf(x), lax.linalg.householder_product(x, y)

    def theirs(x: Any, y: Any) -> Any:
        return jax_lax_linalg.geqrf(x), jax.lax.linalg.householder_product(x, y)

    assert str(ferrax.make_jaxpr(ours)(a, t)) == str(jax.make_jaxpr(theirs)(a, t))
    with ferrax.enable_x64(True), jax.enable_x64(True):
        ours_text = ferrax.jit(ours).lower(a, t).as_text()
        theirs_text = jax.jit(theirs).lower(a, t).as_text()
        qr_text = ferrax.jit(lambda x: fnp.linalg.slogdet(x, method="qr")).lower(a[:, :3]).as_text()

    def targets(text: str) -> list[str]:
        return sorted(re.findall(r"lapack_\w+_ffi", text))

    assert targets(ours_text) == targets(theirs_text) == ["lapack_dgeqrf_ffi", "lapack_dorgqr_ffi"]
    assert targets(qr_text) == ["lapack_dgeqrf_ffi"]
    # The kernels' layouts and batch dimension counts as JAX's.
    for text in (ours_text, theirs_text):
        assert 'num_batch_dims = "1"' in text and "dense<[1, 2, 0]>" in text


def test_raw_primitives_vmap_matches_jax() -> None:
    x = np.random.default_rng(9).standard_normal((4, 3, 2)).astype(np.float32)
    for axis in (0, 1, 2):
        ours = ferrax.vmap(lax.linalg.geqrf, in_axes=axis)(x)
        theirs = jax.vmap(jax_lax_linalg.geqrf, in_axes=axis)(x)
        for o, t in zip(_flat(ours), _flat(theirs), strict=True):
            np.testing.assert_array_equal(o, t)
    packed, taus = (np.asarray(v) for v in jax_lax_linalg.geqrf(x))
    for axes in ((0, 0), (0, None), (None, 0)):
        a = packed if axes[0] == 0 else packed[0]
        t = taus if axes[1] == 0 else taus[0]
        ours = ferrax.vmap(lax.linalg.householder_product, in_axes=axes)(a, t)
        theirs = jax.vmap(jax.lax.linalg.householder_product, in_axes=axes)(a, t)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    ours = ferrax.vmap(lambda a: fnp.linalg.slogdet(a, method="qr"))(x[:, :2])
    theirs = jax.vmap(lambda a: jnp.linalg.slogdet(a, method="qr"))(x[:, :2])
    for o, t in zip(_flat(ours), _flat(theirs), strict=True):  # (eager logs: NumPy's)
        np.testing.assert_allclose(o, t, rtol=4 * float(np.finfo(np.float32).eps))


def test_slogdet_qr_gradients_match_jax() -> None:
    rng = np.random.default_rng(10)
    xs = [rng.standard_normal(s).astype(np.float32) + 3 * np.eye(s[-1], dtype=np.float32) for s in [(3, 3), (2, 4, 4), (2, 2)]]
    ts = [rng.standard_normal(x.shape).astype(np.float32) for x in xs]

    def run(library: Any, L: Any) -> Callable[..., Any]:
        def all_of(xs: Any, ts: Any) -> Any:
            out = []
            for x, t in zip(xs, ts):
                out.append(library.grad(lambda a: L.linalg.slogdet(a, method="qr")[1].sum())(x))
                out.extend(library.jvp(lambda a: tuple(L.linalg.slogdet(a, method="qr")), (x,), (t,))[1])
            return out

        return all_of

    theirs, ours, eager = three_ways(run, (jax, jnp), (ferrax, fnp), xs, ts)
    assert_close_to_jax(theirs, ours, eager, rtol=1e-5, atol=1e-5)


def test_raw_primitive_errors_match_jax() -> None:
    f32 = np.float32
    jx: dict[str, Callable[..., Any]] = {"geqrf": jax_lax_linalg.geqrf, "householder_product": jax.lax.linalg.householder_product}
    fx: dict[str, Callable[..., Any]] = {"geqrf": lax.linalg.geqrf, "householder_product": lax.linalg.householder_product}
    bad: list[tuple[str, tuple[Any, ...]]] = [
        ("geqrf", (np.ones(3, f32),)),
        ("geqrf", (np.ones((2, 2), np.int32),)),
        ("householder_product", (np.ones((2, 3), f32), np.ones(2, f32))),
        ("householder_product", (np.ones((3, 2), f32), np.ones(3, f32))),
        ("householder_product", (np.ones((2, 3, 2), f32), np.ones(2, f32))),
        ("householder_product", (np.ones((3, 2), f32), np.ones((), f32))),
        ("householder_product", (np.ones((3, 2), f32), np.ones(2, np.int32))),
    ]
    for name, args in bad:
        with pytest.raises(Exception) as theirs:
            jax.jit(jx[name])(*args)
        with pytest.raises(Exception) as ours:
            fx[name](*args)
        assert isinstance(ours.value, type(theirs.value)), (name, ours.value, theirs.value)
        assert "test_linalg3.py" in str(ours.value)
    # Not differentiable, in JAX either.
    x = np.eye(3, dtype=f32)
    for lib, fn in ((ferrax, fx["geqrf"]), (jax, jx["geqrf"])):
        with pytest.raises(NotImplementedError, match="geqrf"):
            lib.grad(lambda a: fn(a)[0].sum())(x)
    for lib, fn in ((ferrax, fx["householder_product"]), (jax, jx["householder_product"])):
        with pytest.raises(NotImplementedError, match="householder_product"):
            lib.grad(lambda a: fn(a, a[0]).sum())(x)
    with pytest.raises(ValueError, match="Unknown slogdet method.*test_linalg3.py"):
        fnp.linalg.slogdet(x, method="svd")


# ------------------------------------------------- polyfit and numpy.linalg's other names

POLYFIT_OPTIONS: list[dict[str, Any]] = [{}, {"w": True}, {"full": True}, {"cov": True}, {"cov": "unscaled"}, {"cov": True, "w": True}, {"rcond": 0.1}]


@pytest.mark.parametrize(("dtype", "x64"), [(np.float32, False), (np.float64, True)])
def test_polyfit_matches_jax(dtype: Any, x64: bool) -> None:
    rng = np.random.default_rng(11)
    x = np.linspace(-1, 2, 9).astype(dtype)
    ys = [rng.standard_normal(9).astype(dtype), rng.standard_normal((9, 2)).astype(dtype)]
    w = (rng.random(9) + 0.5).astype(dtype)
    cases = [(deg, opts, y) for deg in (0, 2, 3) for opts in POLYFIT_OPTIONS for y in ys]

    def run(L: Any) -> Callable[..., Any]:
        def all_of(x: Any, ys: Any, w: Any) -> Any:
            out = []
            for deg, opts, y in cases:
                kw = {k: (w if k == "w" else v) for k, v in opts.items()}
                r = L.polyfit(x, ys[0] if y.ndim == 1 else ys[1], deg, **kw)
                out.append(r if isinstance(r, tuple) else (r,))
            return out

        return all_of

    with ferrax.enable_x64(x64), jax.enable_x64(x64):
        theirs = jax.jit(run(jnp))(x, ys, w)
        compiled = ferrax.jit(run(fnp))(x, ys, w)
        eager = run(fnp)(x, ys, w)
        for (deg, opts, y), t, c, e in zip(cases, theirs, compiled, eager, strict=True):
            for ti, ci, ei in zip(t, c, e, strict=True):
                ti, ci, ei = np.asarray(ti), np.asarray(ci), np.asarray(ei)
                assert ti.shape == ci.shape == ei.shape and ti.dtype == ci.dtype == ei.dtype, (deg, opts)
                np.testing.assert_array_equal(ci, ti, err_msg=f"{deg} {opts} (compiled)")
                # Eager matmuls and solves are NumPy's: close, not the same bits.
                scale = max(1.0, float(np.max(np.abs(ti), initial=0)))
                tol = 1e-3 if dtype == np.float32 else 1e-9
                np.testing.assert_allclose(ei, ti, rtol=tol, atol=tol * scale, err_msg=f"{deg} {opts} (eager)")
    # An exact fit recovers the coefficients.
    xs = np.arange(6, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(fnp.polyfit(xs, 2 * xs**2 - 1, 2)), [2, 0, -1], atol=1e-4)


def test_polyfit_errors_match_jax() -> None:
    f32 = np.float32
    x, y = np.arange(4, dtype=f32), np.arange(4, dtype=f32)
    bad: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((x, y, -1), {}),
        ((x[None], y, 1), {}),
        ((x[:0], y[:0], 1), {}),
        ((x, y[None, None], 1), {}),
        ((x, y[:3], 1), {}),
        ((x, y, 1), {"w": np.ones((4, 1), f32)}),
        ((x, y, 1), {"w": np.ones(3, f32)}),
        ((x, y, 3), {"cov": True}),
        ((np.arange(4), y, 1), {}),
    ]
    for args, kw in bad:
        with pytest.raises(Exception) as theirs:
            jnp.polyfit(*args, **kw)
        with pytest.raises(Exception) as ours:
            fnp.polyfit(*args, **kw)
        assert isinstance(ours.value, type(theirs.value)), (args, kw, ours.value, theirs.value)
        assert "test_linalg3.py" in str(ours.value)


def test_array_api_names_and_tensor_solves_match_jax() -> None:
    rng = np.random.default_rng(12)
    a = rng.standard_normal((2, 3, 3)).astype(np.float32)
    v = rng.standard_normal(3).astype(np.float32)
    i8 = np.arange(6, dtype=np.int8).reshape(2, 3)
    t = rng.standard_normal((2, 3, 6)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    cases: list[tuple[str, Fn, tuple[Any, ...]]] = [
        ("cross", lambda L: L.np.linalg.cross, (a, a[::-1])),
        ("cross axis", lambda L: lambda p, q: L.np.linalg.cross(p, q, axis=-2), (a, a)),
        ("diagonal", lambda L: lambda p: L.np.linalg.diagonal(p, offset=1), (a,)),
        ("matmul", lambda L: L.np.linalg.matmul, (a, a)),
        ("matmul int32", lambda L: lambda p: L.np.linalg.matmul(p, p.T, preferred_element_type=np.int32), (i8,)),
        ("matmul vector", lambda L: lambda p, q: L.np.linalg.matmul(q, p, preferred_element_type=np.float32), (a, v)),
        ("matrix_transpose", lambda L: L.np.linalg.matrix_transpose, (a,)),
        ("outer", lambda L: L.np.linalg.outer, (v, v[::-1])),
        ("tensordot", lambda L: L.np.linalg.tensordot, (a, a[0])),
        ("tensordot axes", lambda L: lambda p, q: L.np.linalg.tensordot(p, q, axes=([2], [0])), (a, a[0])),
        ("trace", lambda L: lambda p: L.np.linalg.trace(p, offset=-1), (a,)),
        ("vecdot", lambda L: lambda p, q: L.np.linalg.vecdot(p, q, axis=0), (a, a)),
        ("tensorinv", lambda L: L.np.linalg.tensorinv, (t,)),
        ("tensorinv ind", lambda L: lambda p: L.np.linalg.tensorinv(p.reshape(6, 2, 3), 1), (t,)),
        ("tensorsolve", lambda L: L.np.linalg.tensorsolve, (t, b)),
        ("tensorsolve axes", lambda L: lambda p, q: L.np.linalg.tensorsolve(p.reshape(6, 2, 3), q, axes=(0,)), (t, b)),
    ]
    theirs = jax.jit(lambda args: [fn(JX)(*x) for (_, fn, _), x in zip(cases, args)])([c[2] for c in cases])
    compiled = ferrax.jit(lambda args: [fn(FX)(*x) for (_, fn, _), x in zip(cases, args)])([c[2] for c in cases])
    for (name, fn, args), t_, c in zip(cases, theirs, compiled, strict=True):
        e = np.asarray(fn(FX)(*args))
        t_, c = np.asarray(t_), np.asarray(c)
        assert e.shape == t_.shape == c.shape and e.dtype == t_.dtype == c.dtype, name
        np.testing.assert_allclose(c, t_, rtol=1e-6, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(e, t_, rtol=1e-5, atol=1e-5, err_msg=name)
    # Gradients through the tensor solves.
    def g(L: Lib) -> Callable[..., Any]:
        return lambda p, q: L.np.linalg.tensorsolve(p, q).sum() + L.np.linalg.tensorinv(p).sum()

    for o, t_ in zip(ferrax.grad(g(FX), (0, 1))(t, b), jax.grad(g(JX), (0, 1))(t, b), strict=True):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t_), rtol=1e-4, atol=1e-4)
    for fn, args in [
        (lambda L: L.np.linalg.cross, (v[:2], v[:2])),
        (lambda L: L.np.linalg.matrix_transpose, (v,)),
        (lambda L: L.np.linalg.outer, (a, v)),
        (lambda L: lambda p: L.np.linalg.tensorinv(p, 0), (t,)),
        (lambda L: lambda p: L.np.linalg.tensorinv(p, 1), (t,)),
        (lambda L: L.np.linalg.tensorsolve, (t, b.T)),
        (lambda L: L.np.linalg.tensorsolve, (t[:, :2], b[:, :2])),
    ]:
        _raises_like_jax(fn, *args)


# ------------------------------------------------- scipy.linalg: eigh, special matrices


def _scipy_cases(dtype: Any) -> list[tuple[str, Fn, tuple[Any, ...]]]:
    rng = np.random.default_rng(13)
    c = rng.standard_normal((2, 3)).astype(dtype)
    r = rng.standard_normal(4).astype(dtype)
    s = rng.standard_normal((3, 3)).astype(dtype)
    sym = s + s.T
    ints = np.arange(1, 5, dtype=np.int32)
    return [
        ("toeplitz", lambda L: L.scipy.toeplitz, (c,)),
        ("toeplitz c r", lambda L: L.scipy.toeplitz, (c, r)),
        ("toeplitz int", lambda L: L.scipy.toeplitz, (ints,)),
        ("toeplitz empty", lambda L: L.scipy.toeplitz, (c[0, :0], r)),
        ("hankel", lambda L: L.scipy.hankel, (c,)),
        ("hankel c r", lambda L: L.scipy.hankel, (c[0], r)),
        ("hankel batches", lambda L: L.scipy.hankel, (c, r)),
        ("circulant", lambda L: L.scipy.circulant, (c,)),
        ("companion", lambda L: L.scipy.companion, (c,)),
        ("companion int", lambda L: L.scipy.companion, (ints,)),
        ("hilbert", lambda L: lambda: L.scipy.hilbert(4), ()),
        ("block_diag", lambda L: L.scipy.block_diag, (c, r, s[0, 0], ints.reshape(2, 2))),
        ("block_diag none", lambda L: L.scipy.block_diag, ()),
        ("eigh", lambda L: L.scipy.eigh, (sym,)),
        ("eigh upper values", lambda L: lambda a: L.scipy.eigh(a, lower=False, eigvals_only=True), (s,)),
        ("leslie", lambda L: L.scipy.leslie, (np.concatenate([c, c[:, :1]], 1), c[0])),
        ("leslie int f", lambda L: L.scipy.leslie, (ints, r[:3])),
        ("fiedler", lambda L: L.scipy.fiedler, (c,)),
        ("fiedler int", lambda L: L.scipy.fiedler, (ints,)),
        ("helmert", lambda L: lambda: L.scipy.helmert(4), ()),
        ("helmert full", lambda L: lambda: L.scipy.helmert(5, full=True), ()),
        ("hadamard", lambda L: lambda: L.scipy.hadamard(8), ()),
        ("hadamard float", lambda L: lambda: L.scipy.hadamard(4, dtype=dtype), ()),
    ]


@pytest.mark.parametrize(("dtype", "x64"), [(np.float32, False), (np.float64, True)])
def test_scipy_special_matrices_and_eigh_match_jax(dtype: Any, x64: bool) -> None:
    with ferrax.enable_x64(x64), jax.enable_x64(x64):
        cases = _scipy_cases(dtype)
        args = [c[2] for c in cases]
        theirs = jax.jit(lambda xs: [fn(JX)(*x) for (_, fn, _), x in zip(cases, xs)])(args)
        compiled = ferrax.jit(lambda xs: [fn(FX)(*x) for (_, fn, _), x in zip(cases, xs)])(args)
        for (name, fn, x), t, k in zip(cases, theirs, compiled, strict=True):
            eager = fn(FX)(*x)
            for e, j, c in zip(_flat(eager), _flat(t), _flat(k), strict=True):
                assert e.dtype == j.dtype == c.dtype and e.shape == j.shape == c.shape, (name, e.shape, j.shape)
                tol = 4 * float(np.finfo(dtype).eps)
                np.testing.assert_allclose(e, j, rtol=tol, atol=tol, err_msg=f"{name} (eager)")
                np.testing.assert_allclose(c, j, rtol=tol, atol=tol, err_msg=f"{name} (compiled)")


def test_scipy_special_matrices_grads_vmap_and_errors() -> None:
    rng = np.random.default_rng(14)
    c = rng.standard_normal(3).astype(np.float32)
    r = rng.standard_normal(4).astype(np.float32)

    def f(L: Lib) -> Callable[..., Any]:
        def g(c: Any, r: Any) -> Any:
            t = L.scipy.toeplitz(c, r) * L.scipy.hankel(c, r)
            return (L.np.sin(t).sum() + L.scipy.circulant(c).sum() ** 2 + L.scipy.companion(r).sum() ** 2
                    + L.scipy.block_diag(c, r).sum() ** 2)

        return g

    for o, t in zip(ferrax.grad(f(FX), (0, 1))(c, r), jax.grad(f(JX), (0, 1))(c, r), strict=True):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5, atol=1e-5)
    batch = rng.standard_normal((3, 4)).astype(np.float32)
    fns: list[Fn] = [lambda L: L.scipy.toeplitz, lambda L: L.scipy.circulant, lambda L: L.scipy.companion, lambda L: L.scipy.hankel]
    for fn in fns:
        ours, theirs = ferrax.vmap(fn(FX), in_axes=1)(batch), jax.vmap(fn(JX), in_axes=1)(batch)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-6)
    _raises_like_jax(lambda L: L.scipy.hankel, np.float32(1))
    _raises_like_jax(lambda L: L.scipy.companion, np.ones(1, np.float32))
    _raises_like_jax(lambda L: L.scipy.block_diag, np.ones((1, 1, 1), np.float32))
    _raises_like_jax(lambda L: lambda a: L.scipy.eigh(a, a), np.eye(2, dtype=np.float32))
    _raises_like_jax(lambda L: lambda a: L.scipy.eigh(a, type=2), np.eye(2, dtype=np.float32))
    _raises_like_jax(lambda L: L.scipy.leslie, np.ones(1, np.float32), np.ones(0, np.float32))
    _raises_like_jax(lambda L: L.scipy.leslie, np.ones(3, np.float32), np.ones(3, np.float32))
    _raises_like_jax(lambda L: L.scipy.helmert, 0)
    _raises_like_jax(lambda L: L.scipy.hadamard, 6)


# ------------------------------------------------------ qr with pivoting, geqp3

PIVOT_SHAPES = [(4, 3), (3, 5), (3, 3), (2, 4, 2), (3, 0), (2, 0, 2), (1, 1)]


@pytest.mark.parametrize(("dtype", "x64"), [(np.float32, False), (np.float64, True)])
def test_pivoted_qr_and_geqp3_bits_match_jax(dtype: Any, x64: bool) -> None:
    rng = np.random.default_rng(15)
    cases: list[tuple[str, Fn, NDArray]] = []

    def lax_qr(full: bool) -> Fn:
        return lambda L: lambda a: L.lax.linalg.qr(a, pivoting=True, full_matrices=full)

    def scipy_qr(mode: str) -> Fn:
        return lambda L: lambda a: L.scipy.qr(a, pivoting=True, mode=mode)

    for shape in PIVOT_SHAPES:
        x = rng.standard_normal(shape).astype(dtype)
        for full in (False, True):
            cases.append((f"lax {shape} {full}", lax_qr(full), x))
        for mode in ("full", "economic", "r"):
            cases.append((f"scipy {shape} {mode}", scipy_qr(mode), x))
    # A rank-deficient matrix: pivoting puts the independent columns first.
    low = (rng.standard_normal((5, 2)) @ rng.standard_normal((2, 4))).astype(dtype)
    cases.append(("lax low rank", lambda L: lambda a: L.lax.linalg.qr(a, pivoting=True, full_matrices=False), low))

    def geqp3(L: Lib) -> Callable[..., Any]:
        fn = L.lax.linalg.geqp3 if L is FX else jax_lax_linalg.geqp3
        return lambda a: fn(a, np.zeros((*a.shape[:-2], a.shape[-1]), np.int32))

    # (Not of empty matrices: jaxlib's kernel can crash on one, ferrax makes no call.)
    for shape in [s for s in PIVOT_SHAPES if 0 not in s]:
        cases.append((f"geqp3 {shape}", geqp3, rng.standard_normal(shape).astype(dtype)))
    with ferrax.enable_x64(x64), jax.enable_x64(x64):
        args = [c[2] for c in cases]
        theirs = jax.jit(lambda xs: [fn(JX)(x) for (_, fn, _), x in zip(cases, xs)])(args)
        compiled = ferrax.jit(lambda xs: [fn(FX)(x) for (_, fn, _), x in zip(cases, xs)])(args)
        for (name, fn, x), t, k in zip(cases, theirs, compiled, strict=True):
            eager = fn(FX)(x)
            assert len(eager) == len(t) == len(k), name
            for e, j, c in zip(_flat(eager), _flat(t), _flat(k), strict=True):
                assert e.dtype == j.dtype == c.dtype and e.shape == j.shape == c.shape, (name, e.shape, j.shape)
                np.testing.assert_array_equal(e, j, err_msg=f"{name} (eager)")
                np.testing.assert_array_equal(c, j, err_msg=f"{name} (compiled)")
    # a[:, p] = q r.
    q, r, p = (np.asarray(v) for v in lax.linalg.qr(low.astype(np.float64), pivoting=True, full_matrices=False))
    np.testing.assert_allclose(low[:, p], q @ r, atol=1e-5)


def test_geqp3_of_empty_matrices_without_a_kernel_call() -> None:
    for shape in [(0, 3), (2, 0, 3), (3, 0)]:
        a = np.ones(shape, np.float32)
        jpvt = np.zeros((*shape[:-2], shape[-1]), np.int32)
        for out in (lax.linalg.geqp3(a, jpvt), ferrax.jit(lax.linalg.geqp3)(a, jpvt)):
            np.testing.assert_array_equal(np.asarray(out[0]), a)
            np.testing.assert_array_equal(np.asarray(out[1]), np.broadcast_to(np.arange(1, shape[-1] + 1, dtype=np.int32), jpvt.shape))
            assert np.asarray(out[2]).shape == (*shape[:-2], 0)


def test_pivoted_qr_grads_jvps_vmap_and_jaxpr_match_jax() -> None:
    rng = np.random.default_rng(16)
    xs = [rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3, 3), (5, 2)]]
    ts = [rng.standard_normal(x.shape).astype(np.float32) for x in xs]

    def run(library: Any, L: Any) -> Callable[..., Any]:
        def all_of(xs: Any, ts: Any) -> Any:
            out = []
            for x, t in zip(xs, ts):
                for full in (False, True):
                    def f(a: Any, full: bool = full) -> Any:
                        return L.linalg.qr(a, pivoting=True, full_matrices=full)

                    out.append(library.grad(lambda a: sum(L_sum(o) for o in f(a)[:2]))(x))
                    out.extend(library.jvp(lambda a: f(a)[:2], (x,), (t,))[1])
            return out

        return all_of

    def L_sum(o: Any) -> Any:
        return (o * o * o).sum()

    theirs, ours, eager = three_ways(run, (jax, jax.lax), (ferrax, lax), xs, ts)
    assert_close_to_jax(theirs, ours, eager, rtol=1e-4, atol=1e-4, scaled=True)
    # The permutation's tangent is float0, as JAX's.
    p_dot = ferrax.jvp(lambda a: lax.linalg.qr(a, pivoting=True)[2], (xs[0],), (ts[0],))[1]
    assert np.asarray(p_dot).dtype == np.asarray(jax.jvp(lambda a: jax.lax.linalg.qr(a, pivoting=True)[2], (xs[0],), (ts[0],))[1]).dtype
    x = rng.standard_normal((3, 4, 3)).astype(np.float32)
    for axis in (0, 1, 2):
        ours_v = ferrax.vmap(lambda a: lax.linalg.qr(a, pivoting=True), in_axes=axis)(x)
        theirs_v = jax.vmap(lambda a: jax.lax.linalg.qr(a, pivoting=True), in_axes=axis)(x)
        for o, t in zip(_flat(ours_v), _flat(theirs_v), strict=True):
            np.testing.assert_array_equal(o, t)
        cols = np.delete(np.array(x.shape), axis)[-1]
        jp = np.zeros(cols, np.int32)
        ours_g = ferrax.vmap(lax.linalg.geqp3, in_axes=(axis, None))(x, jp)
        theirs_g = jax.vmap(jax_lax_linalg.geqp3, in_axes=(axis, None))(x, jp)
        for o, t in zip(_flat(ours_g), _flat(theirs_g), strict=True):
            np.testing.assert_array_equal(o, t)
    a, j = np.ones((2, 4, 3), np.float32), np.zeros((2, 3), np.int32)
    ours_text = str(ferrax.make_jaxpr(lambda a, j: (lax.linalg.geqp3(a, j), lax.linalg.qr(a, pivoting=True, full_matrices=False)))(a, j))
    theirs_text = str(jax.make_jaxpr(lambda a, j: (jax_lax_linalg.geqp3(a, j), jax.lax.linalg.qr(a, pivoting=True, full_matrices=False)))(a, j))
    assert ours_text == theirs_text
    with ferrax.enable_x64(True), jax.enable_x64(True):
        lowered = ferrax.jit(lambda a: lax.linalg.qr(a, pivoting=True)).lower(a.astype(np.float64)).as_text()
        jax_lowered = jax.jit(lambda a: jax.lax.linalg.qr(a, pivoting=True)).lower(a.astype(np.float64)).as_text()
    assert sorted(re.findall(r"lapack_\w+_ffi", lowered)) == sorted(re.findall(r"lapack_\w+_ffi", jax_lowered)) == [
        "lapack_dgeqp3_ffi", "lapack_dorgqr_ffi"]
    assert lowered.count("output_operand_alias<") == jax_lowered.count("output_operand_alias<") == 3


def test_geqp3_errors_match_jax() -> None:
    f32 = np.float32
    bad: list[tuple[Any, ...]] = [
        (np.ones(3, f32), np.zeros(3, np.int32)),
        (np.ones((3, 2), f32), np.zeros(2, f32)),
        (np.ones((3, 2), f32), np.zeros((), np.int32)),
        (np.ones((2, 3, 2), f32), np.zeros(2, np.int32)),
    ]
    for args in bad:
        with pytest.raises(Exception) as theirs:
            jax.jit(jax_lax_linalg.geqp3)(*args)
        with pytest.raises(Exception) as ours:
            lax.linalg.geqp3(*args)
        assert isinstance(ours.value, type(theirs.value)), (args, ours.value, theirs.value)
        assert "test_linalg3.py" in str(ours.value)
    with pytest.raises(ValueError, match="pivots of geqp3.*test_linalg3.py"):
        lax.linalg.geqp3(np.ones((3, 2), f32), np.zeros(3, np.int32))
    with pytest.raises(NotImplementedError, match="geqp3"):
        ferrax.grad(lambda a: lax.linalg.geqp3(a, np.zeros(2, np.int32))[0].sum())(np.eye(2, dtype=f32))
    # SciPy's wrapper starts from free columns: fixed ones are refused eagerly.
    with pytest.raises(NotImplementedError, match="fixed columns.*test_linalg3.py"):
        lax.linalg.geqp3(np.ones((3, 2), f32), np.ones(2, np.int32))


def test_wide_pivoted_qr_jvp_agrees_with_finite_differences() -> None:
    # JAX 0.10.2's rule uses the unpermuted operand's trailing columns here (its jvp is
    # off by order one); ferrax permutes them with the tangent's.
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    with ferrax.enable_x64(True):
        def f(a: Any) -> Any:
            q, r, _ = lax.linalg.qr(a, pivoting=True, full_matrices=False)
            return fnp.concatenate([q, r], axis=1)

        _, d = ferrax.jvp(f, (x,), (t,))
        eps = 1e-6
        fd = (np.asarray(f(x + eps * t)) - np.asarray(f(x - eps * t))) / (2 * eps)
        np.testing.assert_allclose(np.asarray(d), fd, rtol=1e-6, atol=1e-6)
