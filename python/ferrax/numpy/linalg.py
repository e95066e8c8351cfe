"""``ferrax.numpy.linalg``: JAX's ``jax.numpy.linalg`` on the linear-algebra primitives
(LAPACK on CPU through jaxlib's kernels, as JAX computes them).

The functions follow JAX 0.10.2: integer operands are promoted to the default float
dtype, leading dimensions are batch dimensions, ``det`` of 2x2 and 3x3 matrices is the
explicit formula and otherwise the LU decomposition's, ``solve`` factors ``a`` once
(its derivative solves with the same factors), and errors are JAX's ``ValueError``s.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ferrax._jit import staged
from ferrax._array import Array
from ferrax._core import aval_of, user_location
from ferrax._custom_derivatives import custom_jvp
from ferrax._lax import linalg as lax_linalg
from ferrax import dtypes
from ferrax.numpy._promotion import ArrayLike, convert, operand_aval

__all__ = [
    "EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cond", "lstsq", "matrix_rank", "pinv", "svd", "svdvals", "det", "eigh", "eigvalsh", "inv", "matrix_norm", "matrix_power", "multi_dot", "norm", "slogdet",
    "qr", "solve", "vector_norm",
    "cross", "diagonal", "matmul", "matrix_transpose", "outer", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot",
]


class SlogdetResult(NamedTuple):
    """The result of :func:`slogdet`: the determinant is ``sign * exp(logabsdet)``."""

    sign: Array
    logabsdet: Array


class EighResult(NamedTuple):
    """The result of :func:`eigh`: ``a @ eigenvectors = eigenvectors * eigenvalues``."""

    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    """The result of :func:`qr`: ``a = Q @ R``."""

    Q: Array
    R: Array


class SVDResult(NamedTuple):
    """The result of :func:`svd`: ``a = U @ (S[..., None, :] * Vh)`` (reduced)."""

    U: Array
    S: Array
    Vh: Array


def _fnp() -> Any:
    import ferrax.numpy as fnp

    return fnp


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(aval_of(x).shape)


def _inexact(name: str, *xs: ArrayLike) -> list[Any]:
    """The operands in their common dtype, integers and bools promoted to a float
    (JAX's ``promote_dtypes_inexact``); shapes unchanged."""
    avals = [operand_aval(name, x, i) for i, x in enumerate(xs)]
    dtype, weak = dtypes.promote([(a.dtype, a.weak_type) for a in avals])
    dtype = dtypes.to_inexact(dtype)
    return [convert(x, dtype, weak) for x in xs]


def _square(name: str, a: Any, message: str) -> None:
    s = _shape(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ValueError(f"{message.format(s)}, at {user_location()}")


def _mT(x: Any) -> Any:
    return _fnp().swapaxes(x, -1, -2)


@staged(static_argnames=("upper", "symmetrize_input"))
def cholesky(a: ArrayLike, *, upper: bool = False, symmetrize_input: bool = True) -> Array:
    """The Cholesky factor of each matrix of ``a`` (``[..., n, n]``, symmetric positive
    definite): lower ``L`` with ``L Lᵀ = a``, or upper ``U = Lᵀ`` with ``upper``; NaN
    where the factorization fails."""
    (x,) = _inexact("cholesky", a)
    L = lax_linalg.cholesky(x, symmetrize_input=symmetrize_input)
    out: Array = _mT(L) if upper else L
    return out


def _uplo_lower(uplo: str | None) -> bool:
    if uplo is None or uplo == "L":
        return True
    if uplo == "U":
        return False
    raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {uplo}, at {user_location()}")


@staged(static_argnames=("UPLO", "symmetrize_input"))
def eigh(a: ArrayLike, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """The eigenvalues (ascending) and eigenvectors (columns) of each symmetric matrix
    of ``a`` (``[..., n, n]``). With ``symmetrize_input``, ``(a + aᵀ) / 2`` is
    decomposed, else only the ``UPLO`` triangle (``'L'``, the default, or ``'U'``)."""
    lower = _uplo_lower(UPLO)
    (x,) = _inexact("eigh", a)
    v, w = lax_linalg.eigh(x, lower=lower, symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a: ArrayLike, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Array:
    """The eigenvalues (ascending) of each symmetric matrix of ``a``."""
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


@staged(static_argnames=("mode",))
def qr(a: ArrayLike, mode: str = "reduced") -> Array | QRResult:
    """The QR decomposition of each matrix of ``a`` (``[..., m, n]``): ``(Q, R)`` with
    ``k = min(m, n)`` columns of ``Q`` (``mode='reduced'``, or its alias ``'full'``) or
    ``m`` (``'complete'``), or ``R`` alone (``'r'``, of the reduced shape as JAX's);
    signs as LAPACK's; or with ``'raw'`` LAPACK's packed factors transposed and the
    reflections' scales (``geqrf``'s, as NumPy's and JAX's)."""
    (x,) = _inexact("jnp.linalg.qr", a)
    if mode == "raw":
        packed, taus = lax_linalg.geqrf(x)
        return QRResult(_mT(packed), taus)
    if mode in ("reduced", "r", "full"):
        full_matrices = False
    elif mode == "complete":
        full_matrices = True
    else:
        raise ValueError(f"Unsupported QR decomposition mode '{mode}', at {user_location()}")
    q, r = lax_linalg.qr(x, full_matrices=full_matrices)
    if mode == "r":
        return r
    return QRResult(q, r)


@staged(static_argnames=("full_matrices", "compute_uv", "hermitian", "subset_by_index"))
def svd(
    a: ArrayLike,
    full_matrices: bool = True,
    compute_uv: bool = True,
    hermitian: bool = False,
    subset_by_index: tuple[int, int] | None = None,
) -> Array | SVDResult:
    """The singular value decomposition of each matrix of ``a`` (``[..., m, n]``):
    ``(U, S, Vh)`` (``S`` descending; ``U`` and ``Vh`` square with ``full_matrices``),
    or ``S`` alone without ``compute_uv``; signs as LAPACK's. With ``hermitian`` the
    matrices are taken as symmetric and decomposed by ``eigh`` as JAX's: ``S`` the
    eigenvalues' magnitudes (descending), ``U`` the eigenvectors in that order and
    ``Vh`` their transposes times the eigenvalues' signs."""
    (x,) = _inexact("jnp.linalg.svd", a)
    if hermitian:
        return _svd_hermitian(x, compute_uv, subset_by_index)
    if compute_uv:
        u, s, vh = lax_linalg.svd(x, full_matrices=full_matrices, compute_uv=True, subset_by_index=subset_by_index)
        return SVDResult(u, s, vh)
    out: Array = lax_linalg.svd(x, full_matrices=full_matrices, compute_uv=False, subset_by_index=subset_by_index)
    return out


def _svd_hermitian(x: Any, compute_uv: bool, subset_by_index: tuple[int, int] | None) -> Array | SVDResult:
    from ferrax import lax

    vectors, values = lax_linalg.eigh(x, subset_by_index=subset_by_index)
    s = lax.abs(values)
    last = len(_shape(s)) - 1
    if not compute_uv:
        out: Array = lax.rev(lax.sort(s, dimension=-1), dimensions=[last])
        return out
    sign = lax.sign(values)
    # (JAX's int_dtype_for_dim: uint32 for every size an array can have here.)
    idxs = lax.broadcasted_iota(np.dtype(np.uint32), _shape(s), last)
    s, idxs, sign = lax.sort((s, idxs, sign), dimension=-1, num_keys=1)
    s, idxs, sign = (lax.rev(t, dimensions=[last]) for t in (s, idxs, sign))
    u = _fnp().take_along_axis(vectors, idxs[..., None, :], axis=-1)
    vh = _mT(u * sign[..., None, :].astype(aval_of(u).dtype))
    return SVDResult(u, s, vh)


def svdvals(x: ArrayLike, /) -> Array:
    """The singular values (descending) of each matrix of ``x``."""
    (a,) = _inexact("jnp.linalg.svdvals", x)
    out: Array = lax_linalg.svd(a, compute_uv=False)
    return out


def matrix_rank(M: ArrayLike, rtol: ArrayLike | None = None, *, hermitian: bool = False, tol: ArrayLike | None = None) -> Array:
    """The number of singular values of each matrix of ``M`` above ``rtol`` (by default
    the largest one times ``max(m, n)`` times the dtype's epsilon); for fewer than two
    dimensions, whether any element is nonzero. ``tol`` is JAX's deprecated alias."""
    fnp = _fnp()
    if tol is not None:
        rtol = tol if rtol is None else rtol
    (x,) = _inexact("matrix_rank", M)
    if len(_shape(x)) < 2:
        out: Array = fnp.any(x != 0).astype(np.int32)
        return out
    s: Any = svd(x, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        d = aval_of(s).dtype
        rtol = fnp.max(s, axis=-1) * np.array(max(_shape(x)[-2:]), d) * np.array(np.finfo(d).eps, d)
    limit = fnp.expand_dims(rtol, fnp.ndim(rtol))
    out = fnp.sum(s > limit, axis=-1)
    return out


def cond(x: ArrayLike, p: Any = None) -> Array:
    """The condition number of each matrix of ``x`` in the ``p`` norm (``None`` or
    ``2``: the ratio of the extreme singular values; ``-2`` its inverse; others by the
    norms of the matrix and its inverse); inf where it is NaN but ``x`` has no NaN."""
    fnp = _fnp()
    (arr,) = _inexact("cond", x)
    shape = _shape(arr)
    if len(shape) < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got arr.shape={shape}, at {user_location()}")
    if shape[-1] == 0 or shape[-2] == 0:
        raise ValueError(f"jnp.linalg.cond: input array must not be empty; got arr.shape={shape}, at {user_location()}")
    if p is None or (not isinstance(p, str) and p == 2):
        s = svdvals(arr)
        out: Array = s[..., 0] / s[..., -1]
        return out
    if not isinstance(p, str) and p == -2:
        s = svdvals(arr)
        r = s[..., -1] / s[..., 0]
    else:
        if shape[-2] != shape[-1]:
            raise ValueError(f"jnp.linalg.cond: for p={p!r}, array must be square; got arr.shape={shape}, at {user_location()}")
        r = norm(arr, ord=p, axis=(-2, -1)) * norm(inv(arr), ord=p, axis=(-2, -1))
    out = fnp.where(fnp.isnan(r) & ~fnp.any(fnp.isnan(arr), axis=(-2, -1)), np.inf, r)
    return out


def _pinv_plain(arr: Any, rtol: Any, hermitian: bool) -> Any:
    fnp = _fnp()
    shape = _shape(arr)
    m, n = shape[-2:]
    if m == 0 or n == 0:
        return fnp.zeros((*shape[:-2], n, m), aval_of(arr).dtype)
    d = aval_of(arr).dtype
    if rtol is None:
        rtol = 10.0 * max(m, n) * fnp.array(np.finfo(d).eps)
    rtol = fnp.asarray(rtol)
    if hermitian:
        u, s, vh = _svd_hermitian(arr, True, None)
    else:
        u, s, vh = lax_linalg.svd(arr, full_matrices=False)
    rtol = fnp.expand_dims(rtol[..., None], tuple(range(fnp.ndim(s) - fnp.ndim(rtol) - 1)))
    cutoff = rtol * s[..., 0:1]
    s = fnp.where(s > cutoff, s, np.inf).astype(d)
    res = fnp.matmul(_mT(vh), fnp.divide(_mT(u), s[..., None]))
    return res.astype(d)


def pinv(a: ArrayLike, rtol: ArrayLike | None = None, hermitian: bool = False, *, rcond: ArrayLike | None = None) -> Array:
    """The Moore-Penrose pseudo-inverse of each matrix of ``a`` (``[..., m, n]`` to
    ``[..., n, m]``) by the SVD, singular values at most ``rtol`` (by default ``10
    max(m, n)`` epsilons) times the largest dropped; differentiated by Golub and
    Pereyra's formula, as JAX's. With ``hermitian`` the SVD is ``svd(hermitian=True)``'s
    (of the symmetrized matrix)."""
    if rcond is not None:
        if rtol is not None:
            raise ValueError(f"pinv: only one of rtol and rcond may be specified., at {user_location()}")
        rtol = rcond
    (arr,) = _inexact("jnp.linalg.pinv", a)
    if len(_shape(arr)) < 2:
        # (JAX fails unpacking the shape: a ValueError too.)
        raise ValueError(f"pinv needs an array of at least 2 dimensions, got shape {_shape(arr)}, at {user_location()}")

    @custom_jvp
    def f(x: Any) -> Any:
        return _pinv_plain(x, rtol, hermitian)

    @f.defjvp
    def f_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (x_dot,) = primals, tangents
        mm = _fnp().matmul
        p = _pinv_plain(x, rtol, hermitian)
        if hermitian:
            # (svd(hermitian=True) reads the symmetrized matrix: so does the derivative.)
            x, x_dot = lax_linalg.symmetrize(x), lax_linalg.symmetrize(x_dot)
        m, n = _shape(x)[-2:]
        if m >= n:
            s_ = mm(mm(p, _mT(p)), _mT(x_dot))
            t_ = mm(mm(_mT(x_dot), _mT(p)), p)
            p_dot = -mm(mm(p, x_dot), p) + s_ - mm(mm(s_, x), p) + t_ - mm(mm(p, x), t_)
        else:
            s_ = mm(p, mm(_mT(p), _mT(x_dot)))
            t_ = mm(_mT(x_dot), mm(_mT(p), p))
            p_dot = -mm(p, mm(x_dot, p)) + s_ - mm(s_, mm(x, p)) + t_ - mm(p, mm(x, t_))
        return p, p_dot

    out: Array = f(arr)
    return out


def lstsq(a: ArrayLike, b: ArrayLike, rcond: float | None = None, *, numpy_resid: bool = False) -> tuple[Array, Array, Array, Array]:
    """The least-squares solution of ``a x = b`` (``a`` ``[m, n]``, ``b`` ``[m]`` or
    ``[m, k]``) by the SVD, as JAX's: ``(x, residuals, rank, s)``, singular values
    below ``rcond`` (by default ``max(m, n)`` epsilons) times the largest dropped; the
    residuals always computed unless ``numpy_resid`` (then empty where NumPy's are, which
    needs concrete values)."""
    fnp = _fnp()
    x_a, x_b = _inexact("lstsq", a, b)
    sa, sb = _shape(x_a), _shape(x_b)
    if sa[0] != sb[0]:
        raise ValueError(f"Leading dimensions of input arrays must match, at {user_location()}")
    b_orig_ndim = len(sb)
    if b_orig_ndim == 1:
        x_b = x_b[:, None]
    if len(sa) != 2:
        raise TypeError(f"{len(sa)}-dimensional array given. Array must be two-dimensional, at {user_location()}")
    if len(_shape(x_b)) != 2:
        raise TypeError(f"{len(sb)}-dimensional array given. Array must be one or two-dimensional, at {user_location()}")
    m, n = sa
    d = aval_of(x_a).dtype
    if m * n == 0:
        sv: Any = fnp.zeros((0,), d)
        rank: Any = fnp.array(0, dtype=int)
        x: Any = fnp.zeros((n, *_shape(x_b)[1:]), d)
    else:
        cut: Any = float(np.finfo(d).eps) * max(n, m) if rcond is None else fnp.where(fnp.asarray(rcond) < 0, np.finfo(d).eps, rcond)
        u, sv, vt = lax_linalg.svd(x_a, full_matrices=False)
        mask = (sv > 0) & (sv >= fnp.asarray(cut, dtype=d) * sv[0])
        rank = fnp.sum(mask)
        safe_s = fnp.where(mask, sv, 1).astype(d)
        s_inv = fnp.where(mask, 1 / safe_s, 0)[:, None]
        utb = fnp.matmul(_mT(u), x_b)
        x = fnp.matmul(_mT(vt), s_inv * utb)
    if numpy_resid and (int(rank) < n or m <= n):
        resid: Any = fnp.asarray([], dtype=d)
    else:
        resid = norm(x_b - fnp.matmul(x_a, x), axis=0) ** 2
    if b_orig_ndim == 1:
        x = fnp.ravel(x)
    return x, resid, rank, sv


def _svd_norm(v: Any, ord: Any, axes: tuple[int, int], keepdims: bool) -> Array:
    """``norm``'s 2, -2 and nuclear matrix norms: the largest, smallest or summed
    singular values of the matrices over ``axes``."""
    fnp = _fnp()
    x = fnp.moveaxis(v, axes, (-2, -1))
    s = svd(x, compute_uv=False)
    if ord == 2:
        y = fnp.max(s, axis=-1, initial=0)
    elif ord == -2:
        y = fnp.min(s, axis=-1)
    else:
        y = fnp.sum(s, axis=-1)
    if keepdims:
        y = fnp.expand_dims(y, axes)
    out: Array = y
    return out


# ------------------------------------------------------------------------- solving


def _lu_solve(lu: Any, permutation: Any, b: Any, trans: int = 0) -> Any:
    """``a⁻¹ b`` (``trans=0``) or ``a⁻ᵀ b`` from ``a``'s LU factors (``b`` a matrix
    batch with ``lu``'s batch dimensions)."""
    fnp = _fnp()
    if trans == 0:
        rows = fnp.broadcast_to(fnp.expand_dims(permutation, -1), _shape(b))
        x = fnp.take_along_axis(b, rows, axis=-2)
        x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
        return lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    x = lax_linalg.triangular_solve(lu, b, left_side=True, lower=False, transpose_a=True)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
    inverse = fnp.argsort(permutation, axis=-1)
    return fnp.take_along_axis(x, fnp.broadcast_to(fnp.expand_dims(inverse, -1), _shape(x)), axis=-2)


def _solve_plain(a: Any, b: Any) -> Any:
    """``a⁻¹ b`` by the primitives alone: linear in ``b``, so tangent rules use it (a
    nested custom derivative there could not be transposed)."""
    lu, _, permutation = lax_linalg.lu(a)
    return _lu_solve(lu, permutation, b)


@custom_jvp
def _solve_matrix(a: Any, b: Any) -> Any:
    return _solve_plain(a, b)


@_solve_matrix.defjvp
def _solve_matrix_jvp(primals: Any, tangents: Any) -> Any:
    """``ẋ = a⁻¹ (ḃ - ȧ x)``, solved with the primal's LU factors (as JAX's
    ``custom_linear_solve`` does)."""
    (a, b), (da, db) = primals, tangents
    fnp = _fnp()
    lu, _, permutation = lax_linalg.lu(a)
    x = _lu_solve(lu, permutation, b)
    return x, _lu_solve(lu, permutation, db - fnp.matmul(da, x))


def solve(a: ArrayLike, b: ArrayLike) -> Array:
    """The solution ``x`` of ``a x = b`` for each square matrix of ``a``
    (``[..., m, m]``); ``b`` is a vector (``[m]``) or a batch of matrices
    (``[..., m, n]``), batch dimensions broadcasting."""
    fnp = _fnp()
    x, y = _inexact("solve", a, b)
    a_shape, b_shape = _shape(x), _shape(y)
    if len(a_shape) < 2:
        raise ValueError(f"left hand array must be at least two dimensional; got a.shape={a_shape}, at {user_location()}")
    if len(b_shape) > 1 and len(a_shape) == len(b_shape) + 1 and a_shape[-1] == b_shape[-1] and a_shape[-1] != b_shape[-2]:
        raise ValueError(
            f"Invalid shapes for solve: {a_shape}, {b_shape}. Prior to JAX v0.5.0, this would have been treated as a "
            f"batched 1-dimensional solve. To recover this behavior, use solve(a, b[..., None]).squeeze(-1)., "
            f"at {user_location()}"
        )
    vector = len(b_shape) == 1
    if vector:
        y = fnp.expand_dims(y, -1)
        b_shape = _shape(y)
    m = a_shape[-1]
    if a_shape[-2] != m or b_shape[-2] != m:
        raise ValueError(
            f"solve: a must be [..., m, m] and b [..., m] or [..., m, n]; got a={a_shape}, b={b_shape}, at {user_location()}"
        )
    batch = fnp.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    x = fnp.broadcast_to(x, (*batch, m, m))
    y = fnp.broadcast_to(y, (*batch, *b_shape[-2:]))
    out = _solve_matrix(x, y)
    result: Array = out[..., 0] if vector else out
    return result


def inv(a: ArrayLike) -> Array:
    """The inverse of each square matrix of ``a`` (``[..., n, n]``), by
    :func:`solve` against the identity."""
    fnp = _fnp()
    (x,) = _inexact("inv", a)
    s = _shape(x)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ValueError(f"Argument to inv must have shape [..., n, n], got {s}., at {user_location()}")
    eye = fnp.broadcast_to(fnp.eye(s[-1], dtype=aval_of(x).dtype), s)
    return solve(x, eye)


# -------------------------------------------------------------------- determinants


def _swap_count(pivots: Any) -> Any:
    """How many rows the pivots swap (each swap flips the determinant's sign)."""
    fnp = _fnp()
    n = _shape(pivots)[-1]
    return fnp.count_nonzero(pivots != fnp.arange(n, dtype=np.int32), axis=-1)


def _slogdet_from_lu(a: Any) -> tuple[Any, Any]:
    fnp = _fnp()
    dtype = aval_of(a).dtype
    lu, pivots, _ = lax_linalg.lu(a)
    diag = fnp.diagonal(lu, axis1=-2, axis2=-1)
    is_zero = fnp.any(diag == fnp.array(0, dtype=dtype), axis=-1)
    parity = _swap_count(pivots) + fnp.count_nonzero(diag < 0, axis=-1)
    sign = fnp.where(is_zero, fnp.array(0, dtype=dtype), fnp.array(-2 * (parity % 2) + 1, dtype=dtype))
    logdet = fnp.where(is_zero, fnp.array(-np.inf, dtype=dtype), fnp.sum(fnp.log(fnp.abs(diag)).astype(dtype), axis=-1))
    return sign, logdet


@custom_jvp
def _slogdet_lu(a: Any) -> tuple[Any, Any]:
    return _slogdet_from_lu(a)


@_slogdet_lu.defjvp
def _slogdet_lu_jvp(primals: Any, tangents: Any) -> Any:
    """JAX's rule: ``d log|det a| = trace(a⁻¹ ȧ)``; the sign's tangent is zero."""
    fnp = _fnp()
    (x,), (g,) = primals, tangents
    sign, ans = _slogdet_from_lu(x)
    ans_dot = fnp.trace(_solve_plain(x, g), axis1=-1, axis2=-2)
    return (sign, ans), (fnp.zeros_like(sign), ans_dot)


def _small_det(a: Any) -> Any:
    n = _shape(a)[-1]
    def e(i: int, j: int) -> Any:
        return a[..., i, j]

    if n == 1:
        return e(0, 0)
    return e(0, 0) * e(1, 1) - e(0, 1) * e(1, 0)


@custom_jvp
def _slogdet_small(a: Any) -> tuple[Any, Any]:
    fnp = _fnp()
    d = _small_det(a)
    return fnp.sign(d), fnp.log(fnp.abs(d))


@_slogdet_small.defjvp
def _slogdet_small_jvp(primals: Any, tangents: Any) -> Any:
    fnp = _fnp()
    (x,), (g,) = primals, tangents
    sign, ans = _slogdet_small(x)
    if _shape(x)[-1] == 1:
        ans_dot = g[..., 0, 0] / x[..., 0, 0]
    else:
        def e(m: Any, i: int, j: int) -> Any:
            return m[..., i, j]

        det = _small_det(x)
        ans_dot = (
            e(g, 0, 0) * e(x, 1, 1) - e(g, 0, 1) * e(x, 1, 0) - e(g, 1, 0) * e(x, 0, 1) + e(g, 1, 1) * e(x, 0, 0)
        ) / det
    return (sign, ans), (fnp.zeros_like(sign), ans_dot)


@custom_jvp
def _slogdet_qr(a: Any) -> tuple[Any, Any]:
    fnp = _fnp()
    n = _shape(a)[-1]
    packed, taus = lax_linalg.geqrf(a)
    diag = fnp.diagonal(packed, axis1=-2, axis2=-1)
    logdet = fnp.sum(fnp.log(fnp.abs(diag)), axis=-1)
    sign_diag = fnp.prod(fnp.sign(diag), axis=-1)
    # Each nontrivial reflection (tau != 0) has determinant -1 (the last one, of a 1x1
    # block, is trivial).
    sign_taus = fnp.prod(fnp.where(taus[..., : n - 1] != 0, -1, 1), axis=-1).astype(aval_of(sign_diag).dtype)
    return sign_diag * sign_taus, logdet


@_slogdet_qr.defjvp
def _slogdet_qr_jvp(primals: Any, tangents: Any) -> Any:
    """As the LU method's: ``d log|det a| = trace(a⁻¹ ȧ)``, the sign's tangent zero, and
    (as JAX's) the primal by the default method, not by QR."""
    fnp = _fnp()
    (x,), (g,) = primals, tangents
    if _shape(x)[-1] in (1, 2):
        d = _small_det(x)
        sign, ans = fnp.sign(d), fnp.log(fnp.abs(d))
    else:
        sign, ans = _slogdet_from_lu(x)
    ans_dot = fnp.trace(_solve_plain(x, g), axis1=-1, axis2=-2)
    return (sign, ans), (fnp.zeros_like(sign), ans_dot)


def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    """The sign and the natural logarithm of the absolute value of the determinant of
    each square matrix of ``a`` (``[..., n, n]``): ``(sign, logabsdet)``. ``method``
    ``'lu'`` (the default) or ``'qr'`` (from ``geqrf``: ``r``'s diagonal, and a sign
    flip per reflection)."""
    (x,) = _inexact("slogdet", a)
    _square("slogdet", x, "Argument to slogdet() must have shape [..., n, n], got {}")
    if method == "qr":
        sign, logdet = _slogdet_qr(x)
    elif method in (None, "lu"):
        n = _shape(x)[-1]
        sign, logdet = _slogdet_small(x) if n in (1, 2) else _slogdet_lu(x)
    else:
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' (`None`), and 'qr'., at {user_location()}")
    return SlogdetResult(sign, logdet)


def _det_3x3(a: Any) -> Any:
    def e(i: int, j: int) -> Any:
        return a[..., i, j]

    return (
        e(0, 0) * e(1, 1) * e(2, 2) + e(0, 1) * e(1, 2) * e(2, 0) + e(0, 2) * e(1, 0) * e(2, 1)
        - e(0, 2) * e(1, 1) * e(2, 0) - e(0, 0) * e(1, 2) * e(2, 1) - e(0, 1) * e(1, 0) * e(2, 2)
    )


@custom_jvp
def _det_lu(a: Any) -> Any:
    fnp = _fnp()
    sign, logdet = _slogdet_from_lu(a)
    return sign * fnp.exp(logdet).astype(aval_of(sign).dtype)


def _cofactor_solve(a: Any, b: Any) -> tuple[Any, Any]:
    """``(det a, adj(a) b)``, defined for singular ``a`` too (JAX's ``_cofactor_solve``):
    from ``a = p l u``, ``det(a) a⁻¹ b = u⁻¹ (det(a) l⁻¹ pᵀ b)`` except in the last row,
    where dividing by ``u[n-1, n-1]`` and multiplying by it cancel: that corner is set to
    the reciprocal of the other pivots' product, which keeps a rank ``n-1`` matrix's
    adjugate exact. Below rank ``n-1`` the adjugate is zero (found where a solve with
    the modified ``u`` is not finite). Linear in ``b``."""
    fnp = _fnp()
    n = _shape(a)[-1]
    if n == 1:
        return a[..., 0, 0], b
    dtype = aval_of(a).dtype
    lu, pivots, permutation = lax_linalg.lu(a)
    batch = tuple(np.broadcast_shapes(_shape(lu)[:-2], _shape(b)[:-2]))
    x = fnp.broadcast_to(b, (*batch, *_shape(b)[-2:]))
    lu = fnp.broadcast_to(lu, (*batch, n, n))
    diag = fnp.diagonal(lu, axis1=-2, axis2=-1)
    sign = fnp.asarray(-2 * (_swap_count(pivots) % 2) + 1, dtype=dtype)
    partial_det = fnp.cumprod(diag, axis=-1) * sign[..., None]
    lu = lu.at[..., -1, -1].set(1.0 / partial_det[..., -2])
    permutation = fnp.broadcast_to(permutation, (*batch, n))
    from ferrax import lax

    iotas = fnp.ix_(*(lax.iota(np.int32, k) for k in (*batch, 1)))
    d = fnp.ones(_shape(x)[:-1], aval_of(x).dtype)
    d = lax_linalg.triangular_solve(lu, d, left_side=True, lower=False)
    d = fnp.any(fnp.logical_or(fnp.isnan(d), fnp.isinf(d)), axis=-1)
    d = fnp.tile(d[..., None, None], fnp.ndim(d) * (1,) + _shape(x)[-2:])
    x = fnp.where(d, fnp.zeros_like(x), x)
    x = x[(*iotas[:-1], permutation, slice(None))]
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = fnp.concatenate((x[..., :-1, :] * partial_det[..., -1, None, None], x[..., -1:, :]), axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    x = fnp.where(d, fnp.zeros_like(x), x)
    return partial_det[..., -1], x


@_det_lu.defjvp
def _det_lu_jvp(primals: Any, tangents: Any) -> Any:
    """``d det a = trace(adj(a) ȧ)`` by the cofactor solve, as JAX's: right at singular
    matrices too (``det a · trace(a⁻¹ ȧ)`` is NaN there)."""
    fnp = _fnp()
    (x,), (g,) = primals, tangents
    y, z = _cofactor_solve(x, g)
    return y, fnp.trace(z, axis1=-1, axis2=-2)


def det(a: ArrayLike) -> Array:
    """The determinant of each square matrix of ``a`` (``[..., n, n]``): the explicit
    formula for 2x2 and 3x3 matrices, the LU decomposition's otherwise."""
    (x,) = _inexact("det", a)
    _square("det", x, "Argument to _det() must have shape [..., n, n], got {}")
    n = _shape(x)[-1]
    out: Array
    if n == 2:
        out = _small_det(x)
    elif n == 3:
        out = _det_3x3(x)
    else:
        out = _det_lu(x)
    return out


# --------------------------------------------------------------------------- norms


def _axes(x: Any, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    ndim = len(_shape(x))
    if axis is None:
        return tuple(range(ndim))
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in items:
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of bounds for array of dimension {ndim}, at {user_location()}")
        out.append(a % ndim)
    return tuple(out)


def vector_norm(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, ord: Any = 2) -> Array:
    """The vector ``ord``-norm over ``axis`` (all axes, flattened, by default): 2 (the
    default), ``inf``/``-inf`` (largest/smallest magnitude), 0 (the count of nonzeros),
    or any other power ``(Σ |x|^ord)^(1/ord)``."""
    fnp = _fnp()
    (v,) = _inexact("vector_norm", x)
    ax = None if axis is None else _axes(v, axis)
    out: Array
    if ord is None or (not isinstance(ord, str) and ord == 2):
        out = fnp.sqrt(fnp.sum(v * v, axis=ax, keepdims=keepdims))
    elif isinstance(ord, str):
        msg = f"Invalid order '{ord}' for vector norm."
        if ord == "inf":
            msg += "Use 'jax.numpy.inf' instead."
        if ord == "-inf":
            msg += "Use '-jax.numpy.inf' instead."
        raise ValueError(f"{msg}, at {user_location()}")
    elif ord == np.inf:
        out = fnp.max(fnp.abs(v), axis=ax, keepdims=keepdims, initial=0)
    elif ord == -np.inf:
        out = fnp.min(fnp.abs(v), axis=ax, keepdims=keepdims)
    elif ord == 0:
        out = fnp.sum(v != 0, axis=ax, keepdims=keepdims, dtype=aval_of(v).dtype)
    elif ord == 1:
        out = fnp.sum(fnp.abs(v), axis=ax, keepdims=keepdims)
    else:
        dtype = aval_of(v).dtype
        p = fnp.array(ord, dtype=dtype)
        out = fnp.power(fnp.sum(fnp.power(fnp.abs(v), p), axis=ax, keepdims=keepdims), fnp.array(1.0 / ord, dtype=dtype))
    return out


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: Any = "fro") -> Array:
    """The matrix ``ord``-norm of each matrix of ``x`` (its last two axes)."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


@staged(static_argnames=("ord", "axis", "keepdims"))
def norm(x: ArrayLike, ord: int | float | str | None = None, axis: None | tuple[int, ...] | int = None, keepdims: bool = False) -> Array:
    """The norm of ``x`` (JAX's ``jnp.linalg.norm``): over one axis a vector norm (see
    :func:`vector_norm`), over two a matrix norm (``'fro'``/None the Frobenius norm,
    ``1``/``-1`` the largest/smallest column sum of magnitudes, ``inf``/``-inf`` the
    row sums'); with ``axis`` None and ``ord`` None, the 2-norm of ``x`` flattened."""
    fnp = _fnp()
    (v,) = _inexact("norm", x)
    ndim = len(_shape(v))
    if axis is None:
        if ord is None:
            out: Array = fnp.sqrt(fnp.sum(v * v, keepdims=keepdims))
            return out
        axes = tuple(range(ndim))
    else:
        axes = _axes(v, axis)
    if len(axes) == 1:
        return vector_norm(v, ord=2 if ord is None else ord, axis=axes, keepdims=keepdims)
    if len(axes) != 2:
        raise ValueError(
            f"Improper number of axes for norm: axis={axes}. Pass one axis to compute a vector-norm, or two axes to "
            f"compute a matrix-norm., at {user_location()}"
        )
    row, col = axes
    absx = fnp.abs(v)
    if ord is None or ord in ("f", "fro"):
        return fnp.sqrt(fnp.sum(v * v, axis=axes, keepdims=keepdims))  # type: ignore[no-any-return]
    if isinstance(ord, str):
        if ord == "nuc":
            return _svd_norm(v, ord, axes, keepdims)
        raise ValueError(f"Invalid order '{ord}' for matrix norm., at {user_location()}")
    if ord in (1, -1):
        if not keepdims and col > row:
            col -= 1
        sums = fnp.sum(absx, axis=row, keepdims=keepdims)
        if ord == 1:
            return fnp.max(sums, axis=col, keepdims=keepdims, initial=0)  # type: ignore[no-any-return]
        return fnp.min(sums, axis=col, keepdims=keepdims)  # type: ignore[no-any-return]
    if ord in (np.inf, -np.inf):
        if not keepdims and row > col:
            row -= 1
        sums = fnp.sum(absx, axis=col, keepdims=keepdims)
        if ord == np.inf:
            return fnp.max(sums, axis=row, keepdims=keepdims, initial=0)  # type: ignore[no-any-return]
        return fnp.min(sums, axis=row, keepdims=keepdims)  # type: ignore[no-any-return]
    if ord in (2, -2):
        return _svd_norm(v, ord, axes, keepdims)
    raise ValueError(f"Invalid order '{ord}' for matrix norm., at {user_location()}")


# ------------------------------------------------------------------------ products


@staged(static_argnames=("n",))
def matrix_power(a: ArrayLike, n: int) -> Array:
    """``a`` (``[..., m, m]``) raised to the integer power ``n`` by repeated squaring
    (``n = 0`` the identity, ``n < 0`` powers of the inverse)."""
    fnp = _fnp()
    x = fnp.asarray(a)  # as JAX: integer matrices stay integer
    s = _shape(x)
    if len(s) < 2:
        raise TypeError(f"{len(s)}-dimensional array given. Array must be at least two-dimensional, at {user_location()}")
    if s[-2] != s[-1]:
        raise TypeError(f"Last 2 dimensions of the array must be square, at {user_location()}")
    try:
        n = operator.index(n)
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n}, at {user_location()}") from err
    if n == 0:
        out: Array = fnp.broadcast_to(fnp.eye(s[-1], dtype=aval_of(x).dtype), s)
        return out
    if n < 0:
        x = inv(x)
        n = -n
    if n == 1:
        return x  # type: ignore[no-any-return]
    if n == 2:
        return x @ x  # type: ignore[no-any-return]
    if n == 3:
        return (x @ x) @ x  # type: ignore[no-any-return]
    z: Any = None
    result: Any = None
    while n > 0:
        z = x if z is None else (z @ z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else (result @ z)
    return result  # type: ignore[no-any-return]


def multi_dot(arrays: Sequence[ArrayLike], *, precision: Any = None) -> Array:
    """The product of a chain of matrices (the first and last may be vectors), in the
    cheapest order (one ``einsum`` with its contraction-path optimization, as JAX)."""
    fnp = _fnp()
    xs = [fnp.asarray(a) for a in arrays]
    if len(xs) < 2:
        raise ValueError(f"Expecting at least two arrays., at {user_location()}")
    if len(xs) == 2:
        return fnp.dot(xs[0], xs[1])  # type: ignore[no-any-return]
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if len(xs) + 1 > len(letters):
        raise ValueError(f"multi_dot of more than {len(letters) - 1} arrays, at {user_location()}")
    terms = []
    for i, x in enumerate(xs):
        nd = len(_shape(x))
        first, last = i == 0, i == len(xs) - 1
        if (first or last) and nd == 1:
            terms.append(letters[i + 1] if first else letters[i])
        elif nd == 2:
            terms.append(letters[i] + letters[i + 1])
        else:
            raise ValueError(f"{nd}-dimensional array given. Array must be two-dimensional, at {user_location()}")
    out_terms = ("" if len(_shape(xs[0])) == 1 else letters[0]) + ("" if len(_shape(xs[-1])) == 1 else letters[len(xs)])
    return fnp.einsum(",".join(terms) + "->" + out_terms, *xs, optimize="auto")  # type: ignore[no-any-return]


# ------------------------------------------------- the array API's names, tensor solves


def cross(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Array:
    """The cross product of the 3-vectors of ``x1`` and ``x2`` along ``axis`` (the array
    API's ``linalg.cross``: both must have size 3 there)."""
    fnp = _fnp()
    s1, s2 = _shape(fnp.asarray(x1)), _shape(fnp.asarray(x2))
    if s1[axis] != 3 or s2[axis] != 3:
        raise ValueError(
            "Both input arrays must be (arrays of) 3-dimensional vectors, but they have "
            f"x1.shape[axis]={s1[axis]} and x2.shape[axis]={s2[axis]}, at {user_location()}"
        )
    out: Array = fnp.cross(x1, x2, axis=axis)
    return out


def diagonal(x: ArrayLike, /, *, offset: int = 0) -> Array:
    """The diagonals of the matrices of ``x`` (its last two axes)."""
    out: Array = _fnp().diagonal(x, offset=offset, axis1=-2, axis2=-1)
    return out


def matmul(x1: ArrayLike, x2: ArrayLike, /, *, precision: Any = None, preferred_element_type: Any = None) -> Array:
    """``x1 @ x2`` (``numpy.matmul``'s broadcasting), accumulated in
    ``preferred_element_type`` if given; ``precision`` has no effect on CPU."""
    fnp = _fnp()
    del precision
    if preferred_element_type is None:
        out: Array = fnp.matmul(x1, x2)
        return out
    a, b = fnp.asarray(x1), fnp.asarray(x2)
    left = "...ij" if fnp.ndim(a) >= 2 else "j"
    right = "...jk" if fnp.ndim(b) >= 2 else "j"
    result = "..." + ("i" if fnp.ndim(a) >= 2 else "") + ("k" if fnp.ndim(b) >= 2 else "")
    out = fnp.einsum(f"{left},{right}->{result}", a, b, preferred_element_type=preferred_element_type)
    return out


def matrix_transpose(x: ArrayLike, /) -> Array:
    """``x`` with its last two axes swapped."""
    from ferrax import lax

    ndim = len(aval_of(_fnp().asarray(x)).shape)
    if ndim < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions; got ndim={ndim}, at {user_location()}")
    out: Array = lax.transpose(x, (*range(ndim - 2), ndim - 1, ndim - 2))
    return out


def outer(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The outer product of two vectors."""
    fnp = _fnp()
    a, b = fnp.asarray(x1), fnp.asarray(x2)
    if fnp.ndim(a) != 1 or fnp.ndim(b) != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={fnp.ndim(a)} x2.ndim={fnp.ndim(b)}, at {user_location()}")
    out: Array = a[:, None] * b[None, :]
    return out


def tensordot(x1: ArrayLike, x2: ArrayLike, /, *, axes: Any = 2, precision: Any = None, preferred_element_type: Any = None) -> Array:
    """``numpy.tensordot`` (the array API's keyword form)."""
    out: Array = _fnp().tensordot(x1, x2, axes, precision=precision, preferred_element_type=preferred_element_type)
    return out


def trace(x: ArrayLike, /, *, offset: int = 0, dtype: Any = None) -> Array:
    """The traces of the matrices of ``x`` (its last two axes)."""
    out: Array = _fnp().trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)
    return out


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None, preferred_element_type: Any = None) -> Array:
    """The dot products of the vectors of ``x1`` and ``x2`` along ``axis``."""
    out: Array = _fnp().vecdot(x1, x2, axis=axis, precision=precision, preferred_element_type=preferred_element_type)
    return out


def tensorinv(a: ArrayLike, ind: int = 2) -> Array:
    """The inverse of ``a`` as an operator from its last axes to its first ``ind``
    ones (``tensordot(tensorinv(a), a, ind)`` is the identity), as NumPy's."""
    fnp = _fnp()
    arr = fnp.asarray(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got ind={ind}, at {user_location()}")
    shape = _shape(arr)
    contracting, batch = shape[:ind], shape[ind:]
    rows, cols = int(np.prod(contracting, dtype=np.int64)), int(np.prod(batch, dtype=np.int64))
    if rows != cols:
        raise ValueError(
            "tensorinv is only possible when the product of the first `ind` dimensions equals that of the "
            f"remaining dimensions. got arr.shape={shape} with ind={ind}., at {user_location()}"
        )
    out: Array = inv(arr.reshape((rows, cols))).reshape((*batch, *contracting))
    return out


def tensorsolve(a: ArrayLike, b: ArrayLike, axes: tuple[int, ...] | None = None) -> Array:
    """``x`` with ``tensordot(a, x, x.ndim) == b`` (``axes`` of ``a`` moved to the end
    first), as NumPy's."""
    fnp = _fnp()
    arr, rhs = fnp.asarray(a), fnp.asarray(b)
    if axes is not None:
        arr = fnp.moveaxis(arr, axes, len(axes) * (fnp.ndim(arr) - 1,))
    sa, sb = _shape(arr), _shape(rhs)
    out_shape = sa[len(sb):]
    if sa[: len(sb)] != sb:
        raise ValueError(
            f"After moving axes to end, leading shape of a must match shape of b. got a.shape={sa}, b.shape={sb}, "
            f"at {user_location()}"
        )
    size = int(np.prod(sb, dtype=np.int64))
    if size != int(np.prod(out_shape, dtype=np.int64)):
        raise ValueError(
            f"Input arrays must have prod(a.shape[:b.ndim]) == prod(a.shape[b.ndim:]); got a.shape={sa}, "
            f"b.ndim={len(sb)}., at {user_location()}"
        )
    out: Array = solve(arr.reshape((size, size)), fnp.ravel(rhs)).reshape(out_shape)
    return out
