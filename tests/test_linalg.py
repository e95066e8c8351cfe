"""Linear algebra (issue 12, item 5): ``ferrax.lax.linalg``, ``ferrax.numpy.linalg``,
``ferrax.scipy.linalg`` against JAX 0.10.2.

Cases are generated over a table of functions (written once for both libraries) and
operands (batched or not, float32, and float64 under x64). Checked:

- eager values, dtypes and shapes equal JAX's (to a tolerance: eager ferrax calls SciPy's
  LAPACK, which jaxlib's kernels also use, so most are exact);
- compiled: one ``ferrax.jit`` over every case gives the same bits as one ``jax.jit``
  (both call jaxlib's LAPACK kernels, with the same custom calls);
- gradients (``grad``, eager and jitted) and ``vmap`` equal JAX's;
- the jaxprs of the primitives print as JAX's; the lowered module calls the LAPACK
  targets JAX's does;
- bad operands raise JAX's exception types.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
import ferrax.scipy.linalg as fsl
from ferrax import lax

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


def _spd(rng: np.random.Generator, shape: tuple[int, ...]) -> NDArray:
    x = rng.standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def _square(rng: np.random.Generator, shape: tuple[int, ...]) -> NDArray:
    n = shape[-1]
    return rng.standard_normal(shape) + 2.0 * np.eye(n)


class Case(NamedTuple):
    name: str
    fn: Callable[[Lib], Callable[..., Any]]
    args: tuple[NDArray, ...]
    grad: bool = True  # differentiable (a scalar loss of its float outputs)


def _tsolve(flags: dict[str, bool]) -> Callable[[Lib], Callable[..., Any]]:
    return lambda L: lambda a, b: L.lax.linalg.triangular_solve(a, b, **flags)


def _norm(ord_: Any, axis: Any, keepdims: bool) -> Callable[[Lib], Callable[..., Any]]:
    return lambda L: lambda x: L.np.linalg.norm(x, ord=ord_, axis=axis, keepdims=keepdims)


def _cases(dtype: Any, shapes: tuple[tuple[int, ...], ...] = ((2, 4, 4),), small: bool = True) -> list[Case]:
    """The table: every function over matrices (batches) of ``shapes``, and with
    ``small`` the cheap cases (determinants of small matrices, norms, multi_dot).
    (Compiling is what costs time here, about 0.1 s a LAPACK call: few shapes.)"""
    rng = np.random.default_rng(7)
    cs: list[Case] = []

    def add(name: str, fn: Callable[[Lib], Callable[..., Any]], *args: NDArray, grad: bool = True) -> None:
        cs.append(Case(name, fn, tuple(a.astype(dtype) for a in args), grad))

    for shape in shapes:
        s = f"{shape}"
        add(f"cholesky{s}", lambda L: L.lax.linalg.cholesky, _spd(rng, shape))
        add(f"np.cholesky{s}", lambda L: lambda x: L.np.linalg.cholesky(x, upper=True), _spd(rng, shape))
        add(f"lu{s}", lambda L: lambda x: L.lax.linalg.lu(x)[0], _square(rng, shape))
        add(f"lu-pivots{s}", lambda L: lambda x: L.lax.linalg.lu(x)[1:], _square(rng, shape), grad=False)
        add(f"det{s}", lambda L: L.np.linalg.det, _square(rng, shape))
        add(f"slogdet{s}", lambda L: lambda x: L.np.linalg.slogdet(x)[1], _square(rng, shape))
        add(f"slogdet-sign{s}", lambda L: lambda x: L.np.linalg.slogdet(x)[0], _square(rng, shape), grad=False)
        add(f"inv{s}", lambda L: L.np.linalg.inv, _square(rng, shape))
        add(f"solve{s}", lambda L: L.np.linalg.solve, _square(rng, shape), rng.standard_normal((*shape[:-1], 2)))
        add(f"solve-vector{s}", lambda L: L.np.linalg.solve, _square(rng, shape), rng.standard_normal(shape[-1:]))
        for flags in [
            dict(left_side=True, lower=True),
            dict(left_side=True, lower=False, transpose_a=True),
            dict(left_side=False, lower=True, unit_diagonal=True),
            dict(left_side=False, lower=False, transpose_a=True),
        ]:
            b = rng.standard_normal((*shape[:-1], 2) if flags["left_side"] else (*shape[:-2], 2, shape[-1]))
            add(f"triangular_solve{s}{sorted(flags.items())}", _tsolve(flags), _square(rng, shape), b)
        add(f"eigh-values{s}", lambda L: lambda x: L.np.linalg.eigh(x)[0], _spd(rng, shape))
        add(f"eigh-vectors{s}", lambda L: lambda x: L.np.linalg.eigh(x, UPLO="U", symmetrize_input=False)[1] ** 2,
            _spd(rng, shape))
        add(f"eigvalsh{s}", lambda L: L.np.linalg.eigvalsh, _spd(rng, shape))
        add(f"lax.eigh{s}", lambda L: lambda x: L.lax.linalg.eigh(x)[1], _spd(rng, shape))
        add(f"norm-fro{s}", lambda L: lambda x: L.np.linalg.norm(x, axis=(-2, -1)), rng.standard_normal(shape))
        add(f"matrix_power{s}", lambda L: lambda x: L.np.linalg.matrix_power(x, 5), _square(rng, shape) / 3)
        add(f"matrix_power-neg{s}", lambda L: lambda x: L.np.linalg.matrix_power(x, -2), _square(rng, shape))
        # scipy.linalg
        add(f"scipy.cholesky{s}", lambda L: L.scipy.cholesky, _spd(rng, shape))
        add(f"scipy.cholesky-lower{s}", lambda L: lambda x: L.scipy.cholesky(x, lower=True), _spd(rng, shape))
        add(f"scipy.solve_triangular{s}",
            lambda L: lambda a, b: L.scipy.solve_triangular(a, b, trans=1, lower=True), _square(rng, shape),
            rng.standard_normal((*shape[:-1], 2)))
        add(f"scipy.det{s}", lambda L: L.scipy.det, _square(rng, shape))
        add(f"scipy.inv{s}", lambda L: L.scipy.inv, _square(rng, shape))
        add(f"scipy.solve{s}", lambda L: L.scipy.solve, _square(rng, shape), rng.standard_normal((*shape[:-1], 3)))
        add(f"scipy.solve-pos{s}", lambda L: lambda a, b: L.scipy.solve(a, b, assume_a="pos"), _spd(rng, shape),
            rng.standard_normal((*shape[:-1], 3)))
        add(f"scipy.cho_solve{s}",
            lambda L: lambda a, b: L.scipy.cho_solve(L.scipy.cho_factor(a), b), _spd(rng, shape),
            rng.standard_normal((*shape[:-1], 2)))
        add(f"scipy.lu_solve{s}",
            lambda L: lambda a, b: L.scipy.lu_solve(L.scipy.lu_factor(a), b), _square(rng, shape),
            rng.standard_normal((*shape[:-1], 2)))
        if len(shape) == 2:  # JAX's scipy.linalg.lu takes one matrix (ferrax's batches)
            add(f"scipy.lu-p{s}", lambda L: lambda a: L.scipy.lu(a)[0], _square(rng, shape), grad=False)
            add(f"scipy.lu-l{s}", lambda L: lambda a: L.scipy.lu(a)[1], _square(rng, shape))
            add(f"scipy.lu-u{s}", lambda L: lambda a: L.scipy.lu(a)[2], _square(rng, shape))
            add(f"scipy.lu-permute_l{s}", lambda L: lambda a: L.scipy.lu(a, permute_l=True)[0], _square(rng, shape))
    if not small:
        return cs
    for n in (1, 2, 5):
        add(f"det{n}", lambda L: L.np.linalg.det, _square(rng, (2, n, n)))
        add(f"slogdet{n}", lambda L: lambda x: L.np.linalg.slogdet(x)[1], _square(rng, (2, n, n)))
    for ord_ in [None, 1, -1, np.inf, -np.inf, "fro"]:
        add(f"norm-matrix-{ord_}", _norm(ord_, (0, 2), True), rng.standard_normal((3, 2, 4)))
    for ord_ in [None, 0, 1, 2, 3, 0.5, np.inf, -np.inf]:
        add(f"norm-vector-{ord_}", _norm(ord_, 1, False), rng.standard_normal((3, 4)), grad=ord_ != 0)
    add("norm-all", lambda L: L.np.linalg.norm, rng.standard_normal((2, 3, 4)))
    add("multi_dot", lambda L: lambda *xs: L.np.linalg.multi_dot(xs), rng.standard_normal(4), rng.standard_normal((4, 3)),
        rng.standard_normal((3, 5)), rng.standard_normal((5, 2)))
    return cs


MODES = [pytest.param(np.float32, False, id="float32"), pytest.param(np.float64, True, id="float64")]


def _flat(out: Any) -> list[NDArray]:
    if isinstance(out, (tuple, list)):
        return [np.asarray(o) for o in out]
    return [np.asarray(out)]


def _tolerance(dtype: Any) -> float:
    return 2e-5 if dtype == np.float32 else 1e-12


@pytest.mark.parametrize(("dtype", "x64"), MODES)
def test_values_match_jax_eagerly_and_compiled_bits_match(dtype: Any, x64: bool) -> None:
    cases = _cases(dtype) if dtype == np.float32 else _cases(dtype, ((3, 3),), small=False)
    with ferrax.enable_x64(x64), jax.enable_x64(x64):
        with warnings.catch_warnings():
            # JAX 0.10.2's own scipy.linalg.solve(assume_a="pos") warns from inside (its
            # custom_linear_solve calls cho_solve on a batch of vectors).
            warnings.simplefilter("ignore", FutureWarning)
            theirs = jax.jit(lambda argss: [c.fn(JX)(*a) for c, a in zip(cases, argss)])([c.args for c in cases])
        compiled = ferrax.jit(lambda argss: [c.fn(FX)(*a) for c, a in zip(cases, argss)])([c.args for c in cases])
        for c, t, comp in zip(cases, theirs, compiled, strict=True):
            eager = c.fn(FX)(*c.args)
            for e, j, k in zip(_flat(eager), _flat(t), _flat(comp), strict=True):
                assert e.dtype == j.dtype and e.shape == j.shape, (c.name, e.dtype, j.dtype, e.shape, j.shape)
                tol = _tolerance(dtype) * max(1.0, float(np.max(np.abs(j), initial=0)))
                np.testing.assert_allclose(e, j, rtol=tol, atol=tol, err_msg=c.name)
                # Compiled: the same LAPACK kernels as JAX's, the same bits.
                np.testing.assert_array_equal(k, j, err_msg=f"{c.name} (compiled)")


def _loss(f: Callable[..., Any], L: Any) -> Callable[..., Any]:
    def loss(*args: Any) -> Any:
        outs = f(*args)
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        return sum(L.sum(L.sin(o)) for o in outs)

    return loss


def _grads(c: Case, lib: Lib, library: Any, L: Any) -> Callable[..., Any]:
    return library.grad(_loss(c.fn(lib), L), argnums=tuple(range(len(c.args))))  # type: ignore[no-any-return]


def test_gradients_match_jax() -> None:
    chosen = ("cholesky", "np.cholesky", "lu", "det", "eigh-values", "eigh-vectors", "slogdet", "inv", "solve", "scipy.cho_solve", "scipy.solve-pos",
              "scipy.lu_solve", "scipy.lu-l", "det1", "det2", "det5", "multi_dot")
    cases = [c for c in _cases(np.float32, ((3, 3),)) if c.grad and c.name.split("(")[0] in chosen]
    cases += [c for c in _cases(np.float32, ((3, 3),), small=False) if c.name.startswith("triangular_solve")][:2]
    argss = [c.args for c in cases]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # JAX's own (see above)
        theirs = jax.jit(lambda xs: [_grads(c, JX, jax, jnp)(*a) for c, a in zip(cases, xs)])(argss)
    staged = ferrax.jit(lambda xs: [_grads(c, FX, ferrax, fnp)(*a) for c, a in zip(cases, xs)])(argss)
    for c, j, s in zip(cases, theirs, staged, strict=True):
        eager = _grads(c, FX, ferrax, fnp)(*c.args)
        for gi, ji, si in zip(eager, j, s, strict=True):
            scale = max(1.0, float(np.max(np.abs(np.asarray(ji)))))
            np.testing.assert_allclose(np.asarray(si), np.asarray(ji), rtol=2e-4, atol=2e-4 * scale, err_msg=c.name)
            np.testing.assert_allclose(np.asarray(gi), np.asarray(si), rtol=2e-4, atol=2e-4 * scale, err_msg=f"{c.name} eager")


def test_vmap_matches_jax() -> None:
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((3, 4, 4)) + 2 * np.eye(4)).astype(np.float32)
    b = rng.standard_normal((3, 4, 2)).astype(np.float32)
    spd = _spd(rng, (3, 4, 4)).astype(np.float32)
    checks: list[tuple[Callable[[Lib], Callable[..., Any]], tuple[Any, ...], Any]] = [
        (lambda L: L.lax.linalg.cholesky, (spd,), 0),
        (lambda L: lambda x: L.lax.linalg.lu(x), (a,), 1),
        (lambda L: lambda x, y: L.lax.linalg.triangular_solve(x, y, left_side=True, lower=True), (a, np.moveaxis(b, 0, 2)), (0, 2)),
        (lambda L: lambda x, y: L.lax.linalg.triangular_solve(x, y, left_side=True), (a[0], b), (None, 0)),
        (lambda L: lambda x, y: L.lax.linalg.triangular_solve(x, y, transpose_a=True), (a[0], np.swapaxes(b, 1, 2)), (None, 1)),
        (lambda L: L.np.linalg.solve, (a, b), 0),
        (lambda L: L.np.linalg.det, (np.moveaxis(a, 0, 2),), 2),
        (lambda L: L.np.linalg.inv, (a,), 0),
    ]
    for fn, args, axes in checks:
        ours = ferrax.vmap(fn(FX), in_axes=axes)(*args)
        theirs = jax.vmap(fn(JX), in_axes=axes)(*args)
        for o, t in zip(_flat(ours), _flat(theirs), strict=True):
            assert o.dtype == t.dtype and o.shape == t.shape
            np.testing.assert_allclose(o, t, rtol=1e-5, atol=1e-5)


def test_jaxprs_print_as_jax() -> None:
    a, b = np.ones((2, 3, 3), np.float32), np.ones((2, 4, 3), np.float32)

    def f(L: Any) -> Callable[..., Any]:
        return lambda x, y: (
            L.linalg.triangular_solve(x, y, left_side=False, lower=True, transpose_a=True, unit_diagonal=True),
            *L.linalg.lu(y),
        )

    assert str(ferrax.make_jaxpr(f(lax))(a, b)) == str(jax.make_jaxpr(f(jax.lax))(a, b))
    ours = str(ferrax.make_jaxpr(lax.linalg.cholesky)(a))
    theirs = str(jax.make_jaxpr(jax.lax.linalg.cholesky)(a))
    assert [ln for ln in ours.splitlines() if "cholesky" in ln] == [ln for ln in theirs.splitlines() if "cholesky" in ln]


def test_lowering_calls_jaxlib_lapack_targets() -> None:
    import re

    a, b = np.ones((2, 3, 3), np.float64), np.ones((2, 3, 4), np.float64)

    def f(L: Any) -> Callable[..., Any]:
        return lambda x, y: (L.linalg.cholesky(x), L.linalg.triangular_solve(x, y, left_side=True), L.linalg.lu(y))

    def targets(text: str) -> list[str]:
        return sorted(re.findall(r"lapack_\w+_ffi", text))

    with ferrax.enable_x64(True), jax.enable_x64(True):
        ours = ferrax.jit(f(lax)).lower(a, b).as_text()
        theirs = jax.jit(f(jax.lax)).lower(a, b).as_text()
    assert targets(ours) == targets(theirs) == ["lapack_dgetrf_ffi", "lapack_dpotrf_ffi", "lapack_dtrsm_ffi"]
    assert "num_batch_dims = \"1\"" in ours


def _raises_like_jax(fn: Callable[[Lib], Callable[..., Any]], *args: Any) -> None:
    with pytest.raises(Exception) as theirs:
        fn(JX)(*args)
    with pytest.raises(Exception) as ours:
        fn(FX)(*args)
    assert type(ours.value) is type(theirs.value) or isinstance(ours.value, type(theirs.value)), (ours.value, theirs.value)
    assert "test_linalg.py" in str(ours.value)  # the user's line


def test_errors_match_jax() -> None:
    f32 = np.float32
    _raises_like_jax(lambda L: L.lax.linalg.cholesky, np.ones((2, 3), f32))
    _raises_like_jax(lambda L: L.lax.linalg.cholesky, np.ones(3, f32))
    _raises_like_jax(lambda L: lambda x: L.lax.linalg.cholesky(x, symmetrize_input=False), np.ones((3, 3), np.int32))
    _raises_like_jax(lambda L: L.lax.linalg.lu, np.ones(3, f32))
    _raises_like_jax(lambda L: lambda a, b: L.lax.linalg.triangular_solve(a, b, left_side=True), np.ones((3, 3), f32),
                     np.ones((2, 3), f32))
    _raises_like_jax(lambda L: lambda a, b: L.lax.linalg.triangular_solve(a, b), np.ones((3, 4), f32), np.ones((3, 3), f32))
    _raises_like_jax(lambda L: lambda a, b: L.lax.linalg.triangular_solve(a, b), np.ones((3, 3), f32),
                     np.ones((3, 3), np.float16))
    _raises_like_jax(lambda L: L.np.linalg.det, np.ones((2, 3), f32))
    _raises_like_jax(lambda L: L.np.linalg.slogdet, np.ones(3, f32))
    _raises_like_jax(lambda L: L.np.linalg.inv, np.ones((2, 3), f32))
    _raises_like_jax(lambda L: L.np.linalg.solve, np.ones(3, f32), np.ones(3, f32))
    _raises_like_jax(lambda L: L.np.linalg.solve, np.ones((2, 3, 3), f32), np.ones((2, 3), f32))
    _raises_like_jax(lambda L: lambda x: L.np.linalg.norm(x, ord="inf", axis=0), np.ones(3, f32))
    _raises_like_jax(lambda L: lambda x: L.np.linalg.norm(x, ord=3, axis=(0, 1)), np.ones((3, 3), f32))
    _raises_like_jax(lambda L: lambda x: L.np.linalg.norm(x, axis=(0, 1, 2)), np.ones((3, 3, 3), f32))
    _raises_like_jax(lambda L: lambda x: L.np.linalg.matrix_power(x, 2), np.ones((2, 3), f32))
    # JAX refuses half precision where it lowers (no LAPACK kernel): NotImplementedError.
    _raises_like_jax(lambda L: L.lax.linalg.lu, np.ones((3, 3), np.float16))


def test_failures_are_nan_as_jax() -> None:
    # Not positive definite: cholesky's factor is NaN; a singular matrix's LU is finite.
    x = np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)
    expected = np.asarray(jax.lax.linalg.cholesky(x))  # NaN on and below the diagonal
    assert np.isnan(expected[np.tril_indices(2)]).all()
    np.testing.assert_array_equal(np.asarray(lax.linalg.cholesky(x)), expected)
    np.testing.assert_array_equal(np.asarray(ferrax.jit(lax.linalg.cholesky)(x)), expected)
    s = np.ones((3, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(fnp.linalg.det(s)), np.asarray(jnp.linalg.det(s)))
    sign, logdet = fnp.linalg.slogdet(np.ones((4, 4), np.float32))
    assert float(sign) == 0.0 and float(logdet) == -np.inf


def test_multivariate_normal_matches_jax() -> None:
    rng = np.random.default_rng(5)
    mean = rng.standard_normal(3).astype(np.float32)
    cov = _spd(rng, (3, 3)).astype(np.float32)
    key = 7
    ours = ferrax.random.multivariate_normal(ferrax.random.key(key), mean, cov, (4,))
    theirs = jax.random.multivariate_normal(jax.random.key(key), mean, cov, (4,))
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)


def test_lu_pivots_to_permutation_matches_jax() -> None:
    p = np.array([[2, 2, 3], [1, 2, 0]], np.int32)
    np.testing.assert_array_equal(
        np.asarray(lax.linalg.lu_pivots_to_permutation(p, 4)), np.asarray(jax.lax.linalg.lu_pivots_to_permutation(p, 4))
    )
