"""``ferrax.scipy.linalg``: JAX's ``jax.scipy.linalg`` on the linear-algebra primitives.

SciPy's conventions as JAX keeps them: ``cholesky`` is upper by default,
``cho_factor``/``lu_factor`` return factors for ``cho_solve``/``lu_solve``, ``lu``
returns ``(p, l, u)`` with ``a = p @ l @ u``, ``solve_triangular``'s ``trans`` is 0/'N',
1/'T' or 2/'C'. ``overwrite_*`` and ``check_finite`` are accepted and ignored (JAX's
arrays are immutable and not checked).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import aval_of, user_location
from ferrax._custom_derivatives import custom_jvp
from ferrax._lax import linalg as lax_linalg
from ferrax.numpy import linalg as np_linalg
from ferrax.numpy._promotion import ArrayLike

__all__ = [
    "cho_factor", "cho_solve", "cholesky", "det", "inv", "lu", "lu_factor", "lu_solve", "qr", "solve", "solve_triangular", "svd",
]


def _fnp() -> Any:
    import ferrax.numpy as fnp

    return fnp


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(aval_of(x).shape)


def cholesky(a: ArrayLike, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The Cholesky factor of each matrix of ``a``: upper ``U`` (``Uᵀ U = a``), or lower
    with ``lower``; only that triangle of ``a`` is read."""
    del overwrite_a, check_finite
    fnp = _fnp()
    (x,) = np_linalg._inexact("cholesky", a)
    if lower:
        return lax_linalg.cholesky(x, symmetrize_input=False)
    out: Array = fnp.swapaxes(lax_linalg.cholesky(fnp.swapaxes(x, -1, -2), symmetrize_input=False), -1, -2)
    return out


def cho_factor(a: ArrayLike, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Array, bool]:
    """``(c, lower)``: the Cholesky factor of ``a`` for :func:`cho_solve`."""
    return cholesky(a, lower=lower), lower


def _as_matrix_rhs(name: str, a: Any, b: Any) -> tuple[Any, bool]:
    """``b`` as a batch of matrices, and whether it was a vector (JAX: ``b.ndim == 1``
    is one vector, and so, with a FutureWarning, is a ``b`` of one dimension less than
    ``a`` ending in ``a``'s size; otherwise ``[..., m, k]``)."""
    fnp = _fnp()
    if len(_shape(b)) == 1:
        return fnp.expand_dims(b, -1), True
    if len(_shape(a)) == len(_shape(b)) + 1 and _shape(a)[-1] == _shape(b)[-1]:
        warnings.warn(
            f"ferrax.scipy.linalg.{name}: batched 1D solves with b.ndim > 1 are deprecated, and in the future will be "
            f"treated as a batched 2D solve. Use {name}(..., b[..., None]).squeeze(-1) to avoid this warning.",
            category=FutureWarning,
            stacklevel=3,
        )
        return fnp.expand_dims(b, -1), True
    return b, False


def _broadcast_batch(a: Any, b: Any) -> tuple[Any, Any]:
    fnp = _fnp()
    batch = fnp.broadcast_shapes(_shape(a)[:-2], _shape(b)[:-2])
    return fnp.broadcast_to(a, (*batch, *_shape(a)[-2:])), fnp.broadcast_to(b, (*batch, *_shape(b)[-2:]))


def cho_solve(c_and_lower: tuple[ArrayLike, bool], b: ArrayLike, overwrite_b: bool = False, check_finite: bool = True) -> Array:
    """The solution of ``a x = b`` from ``cho_factor(a)``."""
    del overwrite_b, check_finite
    c, lower = c_and_lower
    c, y = np_linalg._inexact("cho_solve", c, b)
    y, vector = _as_matrix_rhs("cho_solve", c, y)
    c, y = _broadcast_batch(c, y)
    y = lax_linalg.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=not lower)
    y = lax_linalg.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower)
    out: Array = y[..., 0] if vector else y
    return out


def solve_triangular(
    a: ArrayLike, b: ArrayLike, trans: int | str = 0, lower: bool = False, unit_diagonal: bool = False,
    overwrite_b: bool = False, debug: Any = None, check_finite: bool = True,
) -> Array:
    """The solution of ``op(a) x = b`` with ``a`` triangular (its ``lower`` or upper
    triangle read) and ``op`` the identity (``trans`` 0/'N') or the transpose (1/'T',
    2/'C')."""
    del overwrite_b, debug, check_finite
    if trans in (0, "N"):
        transpose_a = False
    elif trans in (1, "T", 2, "C"):
        transpose_a = True
    else:
        raise ValueError(f"Invalid 'trans' value {trans}, at {user_location()}")
    x, y = np_linalg._inexact("solve_triangular", a, b)
    y, vector = _as_matrix_rhs("solve_triangular", x, y)
    x, y = _broadcast_batch(x, y)
    out = lax_linalg.triangular_solve(
        x, y, left_side=True, lower=lower, transpose_a=transpose_a, unit_diagonal=unit_diagonal
    )
    result: Array = out[..., 0] if vector else out
    return result


def lu_factor(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Array, Array]:
    """``(lu, piv)``: the packed LU factors and the row swaps, for :func:`lu_solve`."""
    del overwrite_a, check_finite
    (x,) = np_linalg._inexact("lu_factor", a)
    out, pivots, _ = lax_linalg.lu(x)
    return out, pivots


def lu_solve(lu_and_piv: tuple[ArrayLike, ArrayLike], b: ArrayLike, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Array:
    """The solution of ``a x = b`` (``trans`` 0) or ``aᵀ x = b`` (1 or 2) from
    ``lu_factor(a)``."""
    del overwrite_b, check_finite
    if trans not in (0, 1, 2):
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}, at {user_location()}")
    factors, pivots = lu_and_piv
    x, y = np_linalg._inexact("lu_solve", factors, b)
    m = _shape(x)[-2]
    perm = lax_linalg.lu_pivots_to_permutation(pivots, m)
    y, vector = _as_matrix_rhs("lu_solve", x, y)
    x, y = _broadcast_batch(x, y)
    perm = _fnp().broadcast_to(perm, (*_shape(x)[:-2], m))
    out = np_linalg._lu_solve(x, perm, y, trans=0 if trans == 0 else 1)
    result: Array = out[..., 0] if vector else out
    return result


def lu(a: ArrayLike, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``(p, l, u)`` with ``a = p @ l @ u`` (``p`` a permutation matrix, ``l`` unit
    lower triangular, ``u`` upper triangular); ``(p @ l, u)`` with ``permute_l``."""
    del overwrite_a, check_finite
    fnp = _fnp()
    (x,) = np_linalg._inexact("lu", a)
    out, _, permutation = lax_linalg.lu(x)
    dtype = aval_of(x).dtype
    m, n = _shape(x)[-2:]
    k = min(m, n)
    p = (fnp.expand_dims(permutation, -2) == fnp.arange(m, dtype=np.int32)[:, None]).astype(dtype)
    l_ = fnp.tril(out, -1)[..., :, :k] + fnp.eye(m, k, dtype=dtype)
    u = fnp.triu(out)[..., :k, :]
    if permute_l:
        return fnp.matmul(p, l_), u
    return p, l_, u


def qr(
    a: ArrayLike, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
    check_finite: bool = True,
) -> tuple[Array] | tuple[Array, Array]:
    """The QR decomposition of each matrix of ``a`` (``[..., m, n]``) as SciPy's:
    ``(Q, R)`` with ``Q`` square (``mode='full'``) or of ``min(m, n)`` columns
    (``'economic'``), or ``(R,)`` (``'r'``, ``R`` of the full shape). Column pivoting is
    not supported; the other arguments are unused (as JAX's)."""
    del overwrite_a, lwork, check_finite
    if mode in ("full", "r"):
        full_matrices = True
    elif mode == "economic":
        full_matrices = False
    else:
        raise ValueError(f"Unsupported QR decomposition mode '{mode}', at {user_location()}")
    (x,) = np_linalg._inexact("qr", a)
    q, r = lax_linalg.qr(x, pivoting=pivoting, full_matrices=full_matrices)
    if mode == "r":
        return (r,)
    return q, r


def svd(
    a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
    check_finite: bool = True, lapack_driver: str = "gesdd",
) -> Array | tuple[Array, Array, Array]:
    """The singular value decomposition as SciPy's: ``(U, s, Vh)``, or ``s`` alone
    without ``compute_uv``; the other arguments are unused (as JAX's)."""
    del overwrite_a, check_finite, lapack_driver
    (x,) = np_linalg._inexact("svd", a)
    out = np_linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if isinstance(out, tuple) else out  # type: ignore[return-value]


def det(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The determinant of each square matrix of ``a`` (as :func:`ferrax.numpy.linalg.det`)."""
    del overwrite_a, check_finite
    return np_linalg.det(a)


def inv(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The inverse of each square matrix of ``a`` (as :func:`ferrax.numpy.linalg.inv`)."""
    del overwrite_a, check_finite
    return np_linalg.inv(a)


def solve(a: ArrayLike, b: ArrayLike, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Array:
    """The solution of ``a x = b``: by LU (as :func:`ferrax.numpy.linalg.solve`), or by
    Cholesky with ``assume_a='pos'`` (``a`` symmetric positive definite, its ``lower``
    or upper triangle read)."""
    del overwrite_a, overwrite_b, debug, check_finite
    if assume_a != "pos":
        return np_linalg.solve(a, b)
    x, y = np_linalg._inexact("solve", a, b)
    y, vector = _as_matrix_rhs("solve", x, y)
    x, y = _broadcast_batch(x, y)
    out = _solve_pos(x, y, lower)
    result: Array = out[..., 0] if vector else out
    return result


def _cho_solve_plain(c: Any, b: Any, lower: bool) -> Any:
    b = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower)
    return lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=lower)


def _solve_pos_impl(a: Any, b: Any, lower: bool) -> Any:
    return _cho_solve_plain(cholesky(a, lower=lower), b, lower)


def _solve_pos_jvp(lower: bool, primals: Any, tangents: Any) -> Any:
    """``ẋ = a⁻¹ (ḃ - ȧ x)`` with the primal's Cholesky factor (as JAX's
    ``custom_linear_solve``: ``ȧ`` counts whole, not one triangle)."""
    (a, b), (da, db) = primals, tangents
    c = cholesky(a, lower=lower)
    x = _cho_solve_plain(c, b, lower)
    return x, _cho_solve_plain(c, db - _fnp().matmul(da, x), lower)


_solve_pos = custom_jvp(_solve_pos_impl, nondiff_argnums=(2,))
_solve_pos.defjvp(_solve_pos_jvp)
