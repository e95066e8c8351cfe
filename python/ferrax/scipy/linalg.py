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

from ferrax._jit import staged
from ferrax._array import Array
from ferrax._core import aval_of, user_location
from ferrax._custom_derivatives import custom_jvp
from ferrax._lax import linalg as lax_linalg
from ferrax.numpy import linalg as np_linalg
from ferrax.numpy._promotion import ArrayLike

__all__ = [
    "cho_factor", "cho_solve", "cholesky", "det", "inv", "lu", "lu_factor", "lu_solve", "qr", "solve", "solve_triangular", "svd",
    "block_diag", "circulant", "companion", "eigh", "hankel", "hilbert", "toeplitz", "fiedler", "hadamard", "helmert",
    "leslie",
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
    return _solve_triangular(a, b, trans, lower, unit_diagonal)


@staged(static_argnames=("trans", "lower", "unit_diagonal"))
def _solve_triangular(a: ArrayLike, b: ArrayLike, trans: int | str, lower: bool, unit_diagonal: bool) -> Array:
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
) -> tuple[Array, ...]:
    """The QR decomposition of each matrix of ``a`` (``[..., m, n]``) as SciPy's:
    ``(Q, R)`` with ``Q`` square (``mode='full'``) or of ``min(m, n)`` columns
    (``'economic'``), or ``(R,)`` (``'r'``, ``R`` of the full shape); with ``pivoting``
    also the column permutation ``P`` (``a[..., P] = Q R``; ``(R, P)`` for ``'r'``). The
    other arguments are unused (as JAX's)."""
    del overwrite_a, lwork, check_finite
    if mode in ("full", "r"):
        full_matrices = True
    elif mode == "economic":
        full_matrices = False
    else:
        raise ValueError(f"Unsupported QR decomposition mode '{mode}', at {user_location()}")
    (x,) = np_linalg._inexact("qr", a)
    q, r, *p = lax_linalg.qr(x, pivoting=pivoting, full_matrices=full_matrices)
    if mode == "r":
        return (r, *p)
    return (q, r, *p)


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


# ------------------------------------------------------ eigh and the special matrices


def eigh(
    a: ArrayLike,
    b: ArrayLike | None = None,
    lower: bool = True,
    eigvals_only: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    turbo: bool = True,
    eigvals: None = None,
    type: int = 1,
    check_finite: bool = True,
) -> Array | tuple[Array, Array]:
    """The eigenvalues (ascending) and eigenvectors (columns) of each symmetric matrix
    of ``a``, only its ``lower`` (or upper) triangle read: ``(w, v)``, or ``w`` alone with
    ``eigvals_only``. As JAX's, only the standard problem (``b=None``, ``type=1``, every
    eigenvalue)."""
    del overwrite_a, overwrite_b, turbo, check_finite
    if b is not None:
        raise NotImplementedError(f"Only the b=None case of eigh is implemented, at {user_location()}")
    if type != 1:
        raise NotImplementedError(f"Only the type=1 case of eigh is implemented., at {user_location()}")
    if eigvals is not None:
        raise NotImplementedError(f"Only the eigvals=None case of eigh is implemented., at {user_location()}")
    (x,) = np_linalg._inexact("eigh", a)
    v, w = lax_linalg.eigh(x, lower=lower)
    if eigvals_only:
        return w
    return w, v


def block_diag(*arrs: ArrayLike) -> Array:
    """The block-diagonal matrix of the arguments (scalars and vectors as one row), in
    their common dtype; ``(1, 0)`` of zeros for none."""
    fnp = _fnp()
    from ferrax import lax
    from ferrax.numpy._promotion import promote_dtypes

    if len(arrs) == 0:
        arrs = (fnp.zeros((1, 0)),)
    promoted = promote_dtypes("block_diag", *arrs)
    for i, a in enumerate(promoted):
        if fnp.ndim(a) > 2:
            raise ValueError(
                f"Arguments to jax.scipy.linalg.block_diag must have at most 2 dimensions, got {a} at argument {i}., "
                f"at {user_location()}"
            )
    mats = [fnp.atleast_2d(a) for a in promoted]
    dtype = aval_of(mats[0]).dtype
    total = sum(_shape(m)[1] for m in mats)
    blocks, col = [], 0
    for m in mats:
        cols = _shape(m)[1]
        blocks.append(lax.pad(m, np.zeros((), dtype), ((0, 0, 0), (col, total - cols - col, 0))))
        col += cols
    out: Array = fnp.concatenate(blocks, axis=0)
    return out


def _by_index(signature: str, body: Any) -> Any:
    """``body`` (of one vector, or two) over the batch dimensions, as JAX's vectorize."""
    return _fnp().vectorize(body, signature=signature)


def toeplitz(c: ArrayLike, r: ArrayLike | None = None) -> Array:
    """The Toeplitz matrix of first column ``c`` and first row ``r`` (``c`` by default;
    ``r[0]`` ignored), for each vector of the batches of ``c`` and ``r``."""
    fnp = _fnp()
    cc = fnp.atleast_1d(fnp.asarray(c))
    rr = cc if r is None else fnp.atleast_1d(fnp.asarray(r))  # (real: its own conjugate)

    def one(cv: Any, rv: Any) -> Any:
        m, n = _shape(cv)[0], _shape(rv)[0]
        dtype = fnp.promote_types(aval_of(cv).dtype, aval_of(rv).dtype)
        if m == 0 or n == 0:
            return fnp.zeros((m, n), dtype)
        # Element (i, j) is c[i - j] below the diagonal, r[j - i] above.
        elems = fnp.concatenate((cv[::-1], rv[1:])).astype(dtype)
        idx = m - 1 - fnp.arange(m)[:, None] + fnp.arange(n)[None, :]
        return elems[idx]

    out: Array = _by_index("(m),(n)->(m,n)", one)(cc, rr)
    return out


def hankel(c: ArrayLike, r: ArrayLike | None = None) -> Array:
    """The Hankel matrix of first column ``c`` and last row ``r`` (zeros by default;
    ``r[0]`` ignored), for each vector of the batches of ``c`` and ``r``."""
    fnp = _fnp()
    cc = fnp.asarray(c)
    rr = fnp.zeros_like(cc) if r is None else fnp.asarray(r)
    if fnp.ndim(cc) == 0:
        raise ValueError(f"hankel: c must be at least 1-dimensional, got a scalar., at {user_location()}")
    if fnp.ndim(rr) == 0:
        raise ValueError(f"hankel: r must be at least 1-dimensional, got a scalar., at {user_location()}")

    def one(cv: Any, rv: Any) -> Any:
        m, n = _shape(cv)[0], _shape(rv)[0]
        dtype = fnp.result_type(cv, rv)
        if m == 0 or n == 0:
            return fnp.zeros((m, n), dtype)
        elems = fnp.concatenate((cv, rv[1:])).astype(dtype)
        return elems[fnp.arange(m)[:, None] + fnp.arange(n)[None, :]]

    out: Array = _by_index("(m),(n)->(m,n)", one)(cc, rr)
    return out


def circulant(c: ArrayLike) -> Array:
    """The circulant matrix of first column ``c`` (each vector of its batch)."""
    fnp = _fnp()

    def one(cv: Any) -> Any:
        n = _shape(cv)[0]
        return cv[(fnp.arange(n)[:, None] - fnp.arange(n)[None, :]) % n]

    out: Array = _by_index("(n)->(n,n)", one)(fnp.atleast_1d(fnp.asarray(c)))
    return out


def companion(a: ArrayLike) -> Array:
    """The companion matrix of the polynomial of coefficients ``a`` (highest power
    first; each vector of its batch): ``-a[1:] / a[0]`` on the first row, ones below the
    diagonal."""
    fnp = _fnp()
    (x,) = np_linalg._inexact("companion", a)
    x = fnp.atleast_1d(x)
    if _shape(x)[-1] < 2:
        raise ValueError(f"The length of `a` along the last axis must be at least 2; got shape {_shape(x)}., at {user_location()}")

    def one(av: Any) -> Any:
        first = -av[1:] / av[0]
        m = _shape(av)[0] - 1
        return fnp.eye(m, m, k=-1, dtype=aval_of(first).dtype).at[0].set(first)

    out: Array = _by_index("(n)->(m,m)", one)(x)
    return out


def hilbert(n: int) -> Array:
    """The ``n x n`` Hilbert matrix, ``1 / (i + j + 1)``."""
    from ferrax import lax

    a = lax.broadcasted_iota(float, (n, 1), 0)
    out: Array = 1 / (a + a.T + 1)
    return out


def leslie(f: ArrayLike, s: ArrayLike) -> Array:
    """The Leslie matrix of fecundities ``f`` (its first row) and survival rates ``s``
    (below the diagonal), for each pair of vectors of their batches."""
    fnp = _fnp()
    from ferrax.numpy._promotion import promote_dtypes

    fa, sa = fnp.atleast_1d(fnp.asarray(f)), fnp.atleast_1d(fnp.asarray(s))
    if _shape(fa)[-1] < 2:
        raise ValueError(f"The length of f along the last axis must be at least 2; got shape {_shape(fa)}., at {user_location()}")
    if _shape(sa)[-1] != _shape(fa)[-1] - 1:
        raise ValueError(
            "Incorrect lengths for f and s. The length of s along the last axis must be one less than the length of "
            f"f; got f shape {_shape(fa)} and s shape {_shape(sa)}., at {user_location()}"
        )

    def one(fv: Any, sv: Any) -> Any:
        fv, sv = promote_dtypes("leslie", fv, sv)
        return fnp.diag(sv, k=-1).at[0].set(fv)

    out: Array = _by_index("(n),(m)->(n,n)", one)(fa, sa)
    return out


def fiedler(a: ArrayLike) -> Array:
    """The Fiedler matrix ``|a[i] - a[j]|`` of each vector of ``a``'s batch."""
    fnp = _fnp()
    arr = fnp.atleast_1d(fnp.asarray(a))
    out: Array = fnp.abs(arr[..., None] - arr[..., None, :])
    return out


def helmert(n: int, full: bool = False) -> Array:
    """The Helmert matrix of order ``n`` (its ``n - 1`` contrast rows, and the constant
    first row with ``full``), in the default float dtype."""
    fnp = _fnp()
    from ferrax import dtypes as fdtypes

    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}., at {user_location()}")
    i = fnp.arange(n - 1)[:, None]
    j = fnp.arange(n)[None, :]
    k = i + 1
    k_f = k.astype(fdtypes.default_float())
    denom = fnp.sqrt(k_f * (k_f + 1))
    h = fnp.where(j <= i, 1.0 / denom, fnp.where(j == k, -k_f / denom, fnp.zeros_like(denom)))
    if full:
        first = fnp.full((1, n), 1.0 / np.sqrt(n), dtype=aval_of(h).dtype)
        h = fnp.concatenate([first, h], axis=0)
    out: Array = h
    return out


def hadamard(n: int, dtype: Any = int) -> Array:
    """The ``n x n`` Hadamard matrix (Sylvester's construction; ``n`` a power of 2)."""
    import math

    fnp = _fnp()
    if n < 1 or not math.log2(n).is_integer():
        raise ValueError(f"n must be a positive power of 2; got {n}., at {user_location()}")
    h = fnp.ones((1, 1), dtype=dtype)
    for _ in range(int(math.log2(n))):
        h = fnp.block([[h, h], [h, -h]])
    out: Array = h
    return out
