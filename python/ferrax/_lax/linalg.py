"""The linear-algebra primitives (``cholesky``, ``triangular_solve``, ``lu``, ``eigh``, ``qr``,
``svd``, ``geqrf``, ``householder_product``) with JAX
0.10.2's semantics and rules, and ``lax.linalg``'s functions on them.

Compiled code calls jaxlib's LAPACK kernels (the Rust lowering emits JAX's CPU custom
calls); eager code calls the same LAPACK routines through SciPy (jaxlib takes its LAPACK
from SciPy), so both give the same bits. As JAX: ``cholesky`` is NaN where the matrix is
not positive definite, ``lu`` pivots rows (``pivots`` are the row swaps, ``permutation``
the order they make), and half-precision operands are refused (jaxlib has no kernel).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import Primitive, aval_of, user_location
from ferrax._interpreters import ad
from ferrax.errors import DifferentiationError
from ferrax._lax._operands import bind1, scalar

__all__ = [
    "cholesky", "eigh", "lu", "lu_pivots_to_permutation", "qr", "svd", "symmetrize", "triangular_solve", "geqrf",
    "householder_product", "geqp3",
]

NDArray = np.ndarray[Any, Any]


# --------------------------------------------------------------------------- eager rules


def _lapack(name: str, dtype: np.dtype[Any]) -> Any:
    """SciPy's wrapper of the LAPACK (or BLAS) routine ``name`` for ``dtype``."""
    from scipy.linalg import blas, lapack

    module = blas if name == "trsm" else lapack
    return getattr(module, ("d" if dtype == np.float64 else "s") + name)


def _widened(x: NDArray) -> NDArray:
    """``x`` in a dtype LAPACK takes: half precision in float32 (as the lowering does)."""
    x = np.asarray(x)
    return x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)


def _matrices(x: NDArray) -> NDArray:
    """``x`` as a stack of matrices (its batch dimensions flattened; the count given,
    as ``-1`` is ambiguous for empty matrices)."""
    return x.reshape((int(np.prod(x.shape[:-2], dtype=np.int64)), *x.shape[-2:]))


def _cholesky_impl(x: NDArray) -> NDArray:
    dtype = np.asarray(x).dtype
    x = _widened(x)
    potrf = _lapack("potrf", x.dtype)
    out = np.empty_like(_matrices(x))
    for i, m in enumerate(_matrices(x)):
        if m.shape[0] == 0:
            continue
        # clean=0: the strictly upper triangle stays as it was (JAX's kernel aliases it).
        c, info = potrf(m, lower=1, clean=0)
        out[i] = c if info == 0 else np.nan
    return out.reshape(x.shape).astype(dtype)


cholesky_p = Primitive.builtin("cholesky")
cholesky_p.def_impl(_cholesky_impl)


def _triangular_solve_impl(
    a: NDArray, b: NDArray, *, left_side: bool, lower: bool, transpose_a: bool, conjugate_a: bool, unit_diagonal: bool
) -> NDArray:
    dtype = np.asarray(b).dtype
    a, b = _widened(a), _widened(b)
    trsm = _lapack("trsm", b.dtype)
    out = np.empty_like(_matrices(b))
    trans = (2 if conjugate_a else 1) if transpose_a else 0
    for i, (am, bm) in enumerate(zip(_matrices(a), _matrices(b))):
        if bm.size == 0:
            continue
        out[i] = trsm(
            1.0, am, bm, side=0 if left_side else 1, lower=int(lower), trans_a=trans, diag=int(unit_diagonal)
        )
    return out.reshape(b.shape).astype(dtype)


triangular_solve_p = Primitive.builtin("triangular_solve")
triangular_solve_p.def_impl(_triangular_solve_impl)


def _lu_impl(x: NDArray) -> list[NDArray]:
    dtype = np.asarray(x).dtype
    x = _widened(x)
    m, n = x.shape[-2:]
    k = min(m, n)
    getrf = _lapack("getrf", x.dtype)
    mats = _matrices(x)
    lus = np.empty_like(mats)
    pivots = np.zeros((mats.shape[0], k), np.int32)
    perms = np.tile(np.arange(m, dtype=np.int32), (mats.shape[0], 1))
    for i, mat in enumerate(mats):
        if mat.size == 0:
            lus[i] = mat
            continue
        lu, piv, info = getrf(mat)  # SciPy's pivots are 0-based already
        lus[i] = lu if info >= 0 else np.nan
        pivots[i] = piv[:k]
        for j, p in enumerate(pivots[i]):
            perms[i, [j, p]] = perms[i, [p, j]]
    batch = x.shape[:-2]
    return [lus.reshape(x.shape).astype(dtype), pivots.reshape((*batch, k)), perms.reshape((*batch, m))]


lu_p = Primitive.builtin("lu", multiple_results=True)
lu_p.def_impl(_lu_impl)


def _eigh_impl(x: NDArray, *, lower: bool, sort_eigenvalues: bool, subset_by_index: Any, algorithm: Any) -> list[NDArray]:
    dtype = np.asarray(x).dtype
    x = _widened(x)
    syevd = _lapack("syevd", x.dtype)
    n = x.shape[-1]
    mats = _matrices(x)
    vs = np.empty_like(mats)
    ws = np.empty((mats.shape[0], n), x.dtype)
    for i, m in enumerate(mats):
        if n == 0:
            continue
        w, v, info = syevd(m, compute_v=1, lower=int(lower))
        vs[i], ws[i] = (v, w) if info == 0 else (np.nan, np.nan)
    return [vs.reshape(x.shape).astype(dtype), ws.reshape(x.shape[:-1]).astype(dtype)]


eigh_p = Primitive.builtin("eigh", multiple_results=True)
eigh_p.def_impl(_eigh_impl)


def _qr_impl(x: NDArray, *, full_matrices: bool, pivoting: bool, use_magma: Any) -> list[NDArray]:
    """``geqrf`` (``geqp3`` with ``pivoting``) then ``orgqr`` (as JAX's CPU lowering:
    the factor sliced to ``m x m`` for a wide matrix, padded with zero columns for a full
    ``q`` of a tall one), ``r`` the upper triangle of the factor, the pivots 0-based;
    workspaces as LAPACK's queries ask."""
    dtype = np.asarray(x).dtype
    x = _widened(x)
    m, n = x.shape[-2:]
    k = m if full_matrices else min(m, n)
    mats = _matrices(x)
    qs = np.zeros((mats.shape[0], m, k), x.dtype)
    rs = np.zeros((mats.shape[0], k, n), x.dtype)
    ps = np.zeros((mats.shape[0], n), np.int32)
    geqrf, orgqr = _lapack("geqrf", x.dtype), _lapack("orgqr", x.dtype)
    for i, a in enumerate(mats):
        if m == 0 or n == 0:
            qs[i] = np.eye(m, k, dtype=x.dtype)
            continue
        if pivoting:
            geqp3 = _lapack("geqp3", x.dtype)
            work = geqp3(a, lwork=-1)[3][0]
            r, jpvt, tau, _, _ = geqp3(a, lwork=max(int(work), 3 * n + 1))
            ps[i] = jpvt - 1
        else:
            work = geqrf(a, lwork=-1)[2][0]  # LAPACK's workspace query
            r, tau, _, _ = geqrf(a, lwork=max(int(work), n, 1))
        if m < n:
            q_in = r[:, :m]
        elif full_matrices and m > n:
            q_in = np.pad(r, ((0, 0), (0, m - n)))
        else:
            q_in = r
        work = orgqr(q_in, tau, lwork=-1)[1][0]
        q, _, _ = orgqr(q_in, tau, lwork=max(int(work), q_in.shape[1], 1))
        qs[i] = q
        rs[i] = np.triu(r[:n, :n] if (not full_matrices and m > n) else r)
    batch = x.shape[:-2]
    outs = [qs.reshape((*batch, m, k)).astype(dtype), rs.reshape((*batch, k, n)).astype(dtype)]
    if pivoting:
        outs.append(ps.reshape((*batch, n)))
    return outs


qr_p = Primitive.builtin("qr", multiple_results=True)
qr_p.def_impl(_qr_impl)


def _svd_impl(x: NDArray, *, full_matrices: bool, compute_uv: bool, subset_by_index: Any, algorithm: Any) -> list[NDArray]:
    """``gesdd`` (vectors full, reduced or none, as jaxlib's kernel is asked), NaN where
    it fails; an empty matrix gives no values and identity ``u``/``vt``, as JAX."""
    dtype = np.asarray(x).dtype
    x = _widened(x)
    m, n = x.shape[-2:]
    k = min(m, n)
    uc, vr = (m, n) if full_matrices else (k, k)
    mats = x.reshape((int(np.prod(x.shape[:-2])), m, n))
    ss = np.zeros((mats.shape[0], k), x.dtype)
    us = np.tile(np.eye(m, uc, dtype=x.dtype), (mats.shape[0], 1, 1))
    vts = np.tile(np.eye(vr, n, dtype=x.dtype), (mats.shape[0], 1, 1))
    gesdd = _lapack("gesdd", x.dtype)
    for i, a in enumerate(mats):
        if k == 0:
            continue
        work = _lapack("gesdd_lwork", x.dtype)(m, n, compute_uv=int(compute_uv), full_matrices=int(full_matrices))[0]
        u, s, vt, info = gesdd(a, compute_uv=int(compute_uv), full_matrices=int(full_matrices), lwork=max(int(work), 1))
        if info != 0:
            ss[i], us[i], vts[i] = np.nan, np.nan, np.nan
            continue
        ss[i] = s
        if compute_uv:
            us[i], vts[i] = u, vt
    batch = x.shape[:-2]
    out = [ss.reshape((*batch, k)).astype(dtype)]
    if compute_uv:
        out += [us.reshape((*batch, m, uc)).astype(dtype), vts.reshape((*batch, vr, n)).astype(dtype)]
    return out


svd_p = Primitive.builtin("svd", multiple_results=True)
svd_p.def_impl(_svd_impl)


def _geqrf_impl(x: NDArray) -> list[NDArray]:
    """LAPACK's ``geqrf`` per matrix, with its workspace query (the kernel jaxlib's
    ``geqrf`` calls); an empty matrix is returned as it is, with no scales."""
    dtype = np.asarray(x).dtype
    x = _widened(x)
    m, n = x.shape[-2:]
    mats = _matrices(x)
    packed = np.array(mats, copy=True)
    taus = np.zeros((mats.shape[0], min(m, n)), x.dtype)
    if m and n:
        geqrf = _lapack("geqrf", x.dtype)
        for i, a in enumerate(mats):
            work = geqrf(a, lwork=-1)[2][0]
            packed[i], taus[i], _, _ = geqrf(a, lwork=max(int(work), n, 1))
    batch = x.shape[:-2]
    return [packed.reshape(x.shape).astype(dtype), taus.reshape((*batch, min(m, n))).astype(dtype)]


geqrf_p = Primitive.builtin("geqrf", multiple_results=True)
geqrf_p.def_impl(_geqrf_impl)


def _householder_product_impl(a: NDArray, taus: NDArray) -> NDArray:
    """LAPACK's ``orgqr`` per matrix, with its workspace query (jaxlib's kernel); with
    no reflections, the identity's columns."""
    dtype = np.asarray(a).dtype
    a, taus = _widened(a), _widened(taus)
    m, n = a.shape[-2:]
    k = taus.shape[-1]
    mats = _matrices(a)
    ts = taus.reshape((mats.shape[0], k))
    out = np.zeros(mats.shape, a.dtype)
    orgqr = _lapack("orgqr", a.dtype)
    for i, mat in enumerate(mats):
        if k == 0 or n == 0:
            out[i] = np.eye(m, n, dtype=a.dtype)
            continue
        work = orgqr(mat, ts[i], lwork=-1)[1][0]
        out[i], _, _ = orgqr(mat, ts[i], lwork=max(int(work), n, 1))
    return out.reshape(a.shape).astype(dtype)


householder_product_p = Primitive.builtin("householder_product")
householder_product_p.def_impl(_householder_product_impl)


def _geqp3_impl(a: NDArray, jpvt: NDArray, *, use_magma: Any) -> list[NDArray]:
    """LAPACK's ``geqp3`` per matrix, with its workspace query (jaxlib's kernel). SciPy's
    wrapper starts from free columns only: nonzero ``jpvt`` entries (fixed columns) are
    refused eagerly."""
    if np.any(np.asarray(jpvt) != 0):
        raise NotImplementedError(f"geqp3 with fixed columns (nonzero jpvt) is not supported eagerly, at {user_location()}")
    dtype = np.asarray(a).dtype
    x = _widened(a)
    m, n = x.shape[-2:]
    mats = _matrices(x)
    packed = np.array(mats, copy=True)
    perms = np.zeros((mats.shape[0], n), np.asarray(jpvt).dtype)
    taus = np.zeros((mats.shape[0], min(m, n)), x.dtype)
    if m and n:
        geqp3 = _lapack("geqp3", x.dtype)
        for i, mat in enumerate(mats):
            work = geqp3(mat, lwork=-1)[3][0]
            packed[i], perms[i], taus[i], _, _ = geqp3(mat, lwork=max(int(work), 3 * n + 1))
    else:
        perms[:] = np.arange(1, n + 1)
    batch = x.shape[:-2]
    return [packed.reshape(x.shape).astype(dtype), perms.reshape((*batch, n)), taus.reshape((*batch, min(m, n))).astype(dtype)]


geqp3_p = Primitive.builtin("geqp3", multiple_results=True)
geqp3_p.def_impl(_geqp3_impl)


# ------------------------------------------------------------------------- functions


def _T(x: Any) -> Any:
    from ferrax._lax.structural import transpose

    r = len(aval_of(x).shape)
    return transpose(x, (*range(r - 2), r - 1, r - 2))


def _tri_mask(x: Any, k: int, lower: bool) -> Any:
    """``x`` with the elements above diagonal ``k`` (``lower``) or below it zeroed,
    by JAX's equations (an iota comparison and a select)."""
    from ferrax._lax.elementwise import add, ge, select_n
    from ferrax._lax.structural import broadcast_in_dim, broadcasted_iota

    shape = tuple(aval_of(x).shape)
    n, m = shape[-2:]
    rows = add(broadcasted_iota(np.int32, (n, m), 0), np.int32(k if lower else k - 1))
    mask = ge(rows, broadcasted_iota(np.int32, (n, m), 1))
    if len(shape) > 2:
        mask = broadcast_in_dim(mask, shape, (len(shape) - 2, len(shape) - 1))
    zero = broadcast_in_dim(np.zeros((), aval_of(x).dtype), shape, ())
    return select_n(mask, zero, x) if lower else select_n(mask, x, zero)


def _tril(x: Any, k: int = 0) -> Any:
    return _tri_mask(x, k, True)


def _triu(x: Any, k: int = 0) -> Any:
    return _tri_mask(x, k, False)


def symmetrize(x: Any) -> Array:
    """``(x + xᵀ) / 2`` over the last two axes (a true division: integers become
    floats, as JAX's)."""
    import ferrax.numpy as fnp

    x = scalar(x)
    out: Array = fnp.true_divide(x + _T(x), 2)
    return out


def _check(name: str, x: Any, position: int = 0) -> Any:
    """JAX's checks of a linear-algebra operand: a float array of rank 2 or more; and
    jaxlib's: float32 or float64 (JAX raises this when lowering)."""
    x = scalar(x)
    aval = aval_of(x)
    d = np.dtype(aval.dtype)
    if d.kind != "f" and d.name != "bfloat16":
        raise TypeError(
            f"{name} does not accept dtype {d.name} at position {position}. Accepted dtypes at position "
            f"{position} are subtypes of floating, complexfloating., at {user_location()}"
        )
    if len(aval.shape) < 2:
        raise TypeError(
            f"Input {position} to {name} must have rank at least 2, but got shape={tuple(aval.shape)}, at {user_location()}"
        )
    if d not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise NotImplementedError(f"Unsupported dtype {d.name}: jaxlib's LAPACK kernels take float32 and float64, at {user_location()}")
    return x


def cholesky(x: Any, *, symmetrize_input: bool = True) -> Array:
    """The lower Cholesky factor ``L`` (``L Lᵀ = x``) of each matrix in ``x``
    (``[..., n, n]``, symmetric positive definite); NaN where the factorization fails.
    With ``symmetrize_input``, ``(x + xᵀ) / 2`` is factored (a true division, as JAX's:
    integers become floats), else only ``x``'s lower triangle is read."""
    x = scalar(x)
    shape = tuple(aval_of(x).shape)
    if symmetrize_input and len(shape) >= 2:
        if shape[-1] != shape[-2]:  # JAX fails in the symmetrization first
            transposed = (*shape[:-2], shape[-1], shape[-2])
            raise TypeError(f"add got incompatible shapes for broadcasting: {shape}, {transposed}., at {user_location()}")
        x = symmetrize(x)
    x = _check("cholesky", x)
    shape = tuple(aval_of(x).shape)
    if shape[-1] != shape[-2]:
        raise ValueError(f"The input to cholesky must be a square matrix. Got shape {shape[-2:]}., at {user_location()}")
    out: Array = _tril(bind1(cholesky_p, x))
    return out


def triangular_solve(
    a: Any,
    b: Any,
    *,
    left_side: bool = False,
    lower: bool = False,
    transpose_a: bool = False,
    conjugate_a: bool = False,
    unit_diagonal: bool = False,
) -> Array:
    """Solves ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` for ``x``, where ``a``
    (``[..., m, m]``) is read as lower or upper triangular (with a unit diagonal if
    ``unit_diagonal``) and ``op`` transposes it if ``transpose_a``; ``b`` is
    ``[..., m, n]`` (left side) or ``[..., n, m]``, or one dimension less (a vector)."""
    from ferrax._lax.structural import expand_dims_as_jax, squeeze

    a = _check("triangular_solve", a, 0)
    b = scalar(b)
    a_shape, b_shape = tuple(aval_of(a).shape), tuple(aval_of(b).shape)
    singleton = len(b_shape) == len(a_shape) - 1
    if singleton:
        b = expand_dims_as_jax(b, (len(b_shape) if left_side else len(b_shape) - 1,))
    if aval_of(a).dtype != aval_of(b).dtype:
        raise TypeError(
            "lax.triangular_solve requires arguments to have the same dtypes, got "
            f"{np.dtype(aval_of(a).dtype).name}, {np.dtype(aval_of(b).dtype).name}, at {user_location()}"
        )
    b = _check("triangular_solve", b, 1)
    b_shape = tuple(aval_of(b).shape)
    if len(a_shape) != len(b_shape):
        raise TypeError(
            "All inputs to triangular_solve must have the same number of batch dimensions, but got "
            f"{[len(a_shape) - 2, len(b_shape) - 2]} batch dimensions for the inputs., at {user_location()}"
        )
    if a_shape[-1] != a_shape[-2]:
        raise ValueError(
            f"The first input to triangular_solve must be a square matrix. Got shape {a_shape[-2:]}., at {user_location()}"
        )
    common = b_shape[-2] if left_side else b_shape[-1]
    if a_shape[-1] != common or a_shape[:-2] != b_shape[:-2]:
        raise ValueError(
            f"Incompatible shapes for arguments to triangular_solve: {a_shape} and {b_shape}., at {user_location()}"
        )
    out = bind1(
        triangular_solve_p,
        a,
        b,
        left_side=bool(left_side),
        lower=bool(lower),
        transpose_a=bool(transpose_a),
        conjugate_a=False,  # real matrices only: conjugation is the identity (as JAX drops it)
        unit_diagonal=bool(unit_diagonal),
    )
    if singleton:
        out = squeeze(out, (len(b_shape) - 1 if left_side else len(b_shape) - 2,))
    return out


def lu(x: Any) -> tuple[Array, Array, Array]:
    """The LU decomposition with partial pivoting of each matrix in ``x``
    (``[..., m, n]``): ``(lu, pivots, permutation)`` with ``L`` (unit diagonal, not
    stored) below ``lu``'s diagonal and ``U`` on and above it, ``pivots`` the row
    swapped with each row in turn (``int32[..., min(m, n)]``) and ``permutation`` the
    order of rows they make (``int32[..., m]``): ``x[..., permutation, :] = L U``."""
    x = _check("lu", x)
    out, pivots, perm = lu_p.bind(x)
    return out, pivots, perm


def eigh(
    x: Any,
    *,
    lower: bool = True,
    symmetrize_input: bool = True,
    sort_eigenvalues: bool = True,
    subset_by_index: tuple[int, int] | None = None,
    implementation: Any = None,
) -> tuple[Array, Array]:
    """The eigendecomposition of each symmetric matrix of ``x`` (``[..., n, n]``):
    ``(v, w)``, the eigenvectors (columns of ``v``) and the eigenvalues in ascending
    order. With ``symmetrize_input``, ``(x + xᵀ) / 2`` is decomposed, else only the
    ``lower`` (or upper) triangle is read. ``subset_by_index`` and ``implementation``
    only as None (as JAX's CPU backend)."""
    x = scalar(x)
    shape = tuple(aval_of(x).shape)
    if symmetrize_input and len(shape) >= 2:
        if shape[-1] != shape[-2]:
            transposed = (*shape[:-2], shape[-1], shape[-2])
            raise TypeError(f"add got incompatible shapes for broadcasting: {shape}, {transposed}., at {user_location()}")
        x = symmetrize(x)
    x = _check("eigh", x)
    shape = tuple(aval_of(x).shape)
    if shape[-1] != shape[-2]:
        raise ValueError(
            f"Argument to symmetric eigendecomposition must have shape [..., n, n], got shape {shape[-2:]}, "
            f"at {user_location()}"
        )
    if subset_by_index is not None and tuple(subset_by_index) != (0, shape[-1]):
        raise NotImplementedError(f"subset_by_index not supported on CPU and GPU, at {user_location()}")
    if implementation is not None:
        raise NotImplementedError(f"eigh's implementation={implementation!r} is not supported on CPU, at {user_location()}")
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues), subset_by_index=None, algorithm=None)
    return v, w


def qr(
    x: Any, *, pivoting: bool = False, full_matrices: bool = True, use_magma: bool | None = None
) -> tuple[Array, ...]:
    """The QR decomposition of each matrix of ``x`` (``[..., m, n]``): ``(q, r)``, ``q``
    with orthonormal columns (``[..., m, k]``) and ``r`` upper triangular
    (``[..., k, n]``), ``k = m`` with ``full_matrices``, else ``min(m, n)``; signs as
    LAPACK's (``r``'s diagonal may be negative). With ``pivoting``, LAPACK's column
    pivoting (``geqp3``) and a third output, the permutation ``p`` (``x[..., p] = q r``)."""
    x = _check("qr", x)
    outs = qr_p.bind(x, full_matrices=bool(full_matrices), pivoting=bool(pivoting), use_magma=use_magma)
    return tuple(outs)


def svd(
    x: Any,
    *,
    full_matrices: bool = True,
    compute_uv: bool = True,
    subset_by_index: tuple[int, int] | None = None,
    algorithm: Any = None,
) -> Any:
    """The singular value decomposition of each matrix of ``x`` (``[..., m, n]``):
    ``(u, s, vt)`` with ``x = u diag(s) vt`` and ``s`` descending (``k = min(m, n)``
    values; ``u`` ``[..., m, m]`` and ``vt`` ``[..., n, n]`` with ``full_matrices``,
    else ``[..., m, k]`` and ``[..., k, n]``), or ``s`` alone without ``compute_uv``.
    ``subset_by_index`` only as the whole range and ``algorithm`` only as None (as JAX's
    CPU backend)."""
    x = _check("svd", x)
    k = min(aval_of(x).shape[-2:])
    if subset_by_index is not None and tuple(subset_by_index) != (0, k):
        raise NotImplementedError(f"subset_by_index not implemented for CPU and GPU, at {user_location()}")
    if algorithm is not None:
        raise NotImplementedError(f"svd's algorithm={algorithm!r} is not supported, at {user_location()}")
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv), subset_by_index=None, algorithm=None)
    if compute_uv:
        s, u, vt = outs
        return u, s, vt
    return outs[0]


def geqrf(x: Any) -> tuple[Array, Array]:
    """LAPACK's QR factors of each matrix of ``x`` (``[..., m, n]``): ``(a, taus)``, ``r``
    on and above ``a``'s diagonal, the Householder vectors below it (their leading 1s
    implicit) and their scales ``taus`` (``[..., min(m, n)]``), as JAX's ``geqrf``. Not
    differentiable (nor is JAX's)."""
    x = _check("geqrf", x)
    a, taus = geqrf_p.bind(x)
    return a, taus


def householder_product(a: Any, taus: Any) -> Array:
    """The product of the Householder reflections whose vectors are below the diagonal
    of each matrix of ``a`` (``[..., m, n]``, ``m >= n``) and whose scales are ``taus``
    (``[..., k]``, ``k <= n``): its first ``n`` columns, orthonormal (LAPACK's
    ``orgqr``, as JAX's). Not differentiable (nor is JAX's)."""
    a = _check("householder_product", a)
    taus = scalar(taus)
    t_aval, a_aval = aval_of(taus), aval_of(a)
    if np.dtype(t_aval.dtype).kind != "f":
        raise TypeError(
            f"householder_product does not accept dtype {np.dtype(t_aval.dtype).name} at position 1. Accepted dtypes at "
            f"position 1 are subtypes of floating, complexfloating., at {user_location()}"
        )
    if np.dtype(t_aval.dtype) != np.dtype(a_aval.dtype):
        raise TypeError(
            f"householder_product requires arguments to have the same dtypes, got {np.dtype(a_aval.dtype).name}, "
            f"{np.dtype(t_aval.dtype).name}., at {user_location()}"
        )
    a_shape, t_shape = tuple(a_aval.shape), tuple(t_aval.shape)
    _check_batch_vectors("householder_product", a_shape, t_shape)
    if a_shape[:-2] != t_shape[:-1]:
        raise ValueError(
            f"The inputs to householder_product must have the same batch dimensions, got shapes {a_shape} and "
            f"{t_shape}., at {user_location()}"
        )
    m, n = a_shape[-2:]
    if m < n:
        raise ValueError(
            f"The first argument to householder_product must have at least as many rows as columns, got shape "
            f"{(m, n)}, at {user_location()}"
        )
    if t_shape[-1] > min(m, n):
        raise ValueError(
            "The second argument to householder_product must not have more rows than the minimum of the first "
            f"argument's rows and columns., at {user_location()}"
        )
    return bind1(householder_product_p, a, taus)


def _check_batch_vectors(name: str, a_shape: tuple[int, ...], v_shape: tuple[int, ...]) -> None:
    """JAX's checks of a vector operand (input 1) beside a batch of matrices: rank at
    least 1 and as many batch dimensions."""
    if len(v_shape) < 1:
        raise TypeError(f"Input 1 to {name} must have rank at least 1, but got shape={v_shape}, at {user_location()}")
    if len(a_shape) - 2 != len(v_shape) - 1:
        raise TypeError(
            f"All inputs to {name} must have the same number of batch dimensions, but got "
            f"{[len(a_shape) - 2, len(v_shape) - 1]} batch dimensions for the inputs., at {user_location()}"
        )


def geqp3(a: Any, jpvt: Any, *, use_magma: bool | None = None) -> tuple[Array, Array, Array]:
    """LAPACK's column-pivoted QR factors of each matrix of ``a`` (``[..., m, n]``):
    ``(a, jpvt, taus)`` packed as :func:`geqrf`'s, the permutation 1-based (``jpvt``'s
    dtype; nonzero entries of the given ``jpvt`` mark columns moved to the front
    first), as JAX's ``geqp3``. Not differentiable (nor is JAX's)."""
    a = _check("geqp3", a)
    jpvt = scalar(jpvt)
    j_aval = aval_of(jpvt)
    if np.dtype(j_aval.dtype).kind not in "iu":
        raise TypeError(
            f"geqp3 does not accept dtype {np.dtype(j_aval.dtype).name} at position 1. Accepted dtypes at position 1 "
            f"are subtypes of integer., at {user_location()}"
        )
    a_shape, j_shape = tuple(aval_of(a).shape), tuple(j_aval.shape)
    _check_batch_vectors("geqp3", a_shape, j_shape)
    if j_shape != (*a_shape[:-2], a_shape[-1]):
        raise ValueError(
            f"The pivots of geqp3 must have shape [..., n] for the matrix's batch dims and columns, got shapes "
            f"{a_shape} and {j_shape}., at {user_location()}"
        )
    out, perm, taus = geqp3_p.bind(a, jpvt, use_magma=use_magma)
    return out, perm, taus


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Array:
    """The permutation of ``0..permutation_size`` made by swapping entry ``i`` with
    entry ``pivots[..., i]`` for each ``i`` in turn (``int32``)."""
    from ferrax._lax.control import fori_loop
    from ferrax._lax.elementwise import convert_element_type, eq, select_n
    from ferrax._lax.reductions import reduce_sum
    from ferrax._lax.structural import broadcast_in_dim, broadcasted_iota, dynamic_index_in_dim

    p = scalar(pivots)
    shape = tuple(aval_of(p).shape)
    if not shape:
        raise ValueError(f"Argument to lu_pivots_to_permutation must have rank >= 1, got shape {shape}, at {user_location()}")
    *batch, k = shape
    size = int(permutation_size)
    if size < k:
        raise ValueError(
            f"Output permutation size {size} has to exceed the trailing dimension of the pivots. Got pivots size {k}, "
            f"at {user_location()}"
        )
    out_shape = (*batch, size)
    rank = len(out_shape)
    iota = broadcasted_iota(np.int32, out_shape, rank - 1)

    def swap(i: Any, perm: Any) -> Any:
        i = convert_element_type(i, np.int32)  # the loop index is int64 under x64
        at = broadcast_in_dim(dynamic_index_in_dim(p, i, rank - 1, keepdims=False), out_shape, tuple(range(rank - 1)))
        is_p = eq(iota, at)
        zero = broadcast_in_dim(np.int32(0), out_shape, ())
        perm_p = broadcast_in_dim(reduce_sum(select_n(is_p, zero, perm), (rank - 1,)), out_shape, tuple(range(rank - 1)))
        perm_i = broadcast_in_dim(dynamic_index_in_dim(perm, i, rank - 1, keepdims=False), out_shape, tuple(range(rank - 1)))
        swapped = select_n(is_p, perm, perm_i)
        return select_n(eq(iota, broadcast_in_dim(i, out_shape, ())), swapped, perm_p)

    out: Array = fori_loop(0, k, swap, iota)
    return out


# -------------------------------------------------------------------------- derivatives


def _matmul(x: Any, y: Any) -> Any:
    from ferrax._lax.convenience import batch_matmul, dot

    if len(aval_of(x).shape) == 2:
        return dot(x, y, precision="highest")
    return batch_matmul(x, y, precision="highest")


def _eye(dtype: Any, n: int, m: int | None = None, offset: int = 0) -> Any:
    from ferrax._lax.elementwise import add, convert_element_type, eq
    from ferrax._lax.structural import broadcasted_iota

    m = n if m is None else m
    rows = add(broadcasted_iota(np.int32, (n, m), 0), np.int32(offset))
    return convert_element_type(eq(rows, broadcasted_iota(np.int32, (n, m), 1)), dtype)


def _cholesky_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """JAX's rule (Murray 2016): with ``L`` the factor, ``L̇ = L Φ(L⁻¹ Ȧ L⁻ᵀ)`` where
    ``Φ`` takes the lower triangle with the diagonal halved; the primal is ``tril(L)``."""
    from ferrax._lax.elementwise import add, div
    from ferrax._lax.structural import broadcast_in_dim

    (x,), (t,) = primals, tangents
    L = _tril(bind1(cholesky_p, x))
    if type(t) is ad.Zero:
        return L, ad.Zero(aval_of(L))
    shape = tuple(aval_of(x).shape)
    dtype = aval_of(x).dtype
    n = shape[-1]
    halves = add(np.ones((), dtype), _eye(dtype, n))
    halves = broadcast_in_dim(halves, shape, (len(shape) - 2, len(shape) - 1))

    def phi(m: Any) -> Any:
        return div(_tril(m), halves)

    tmp = triangular_solve(L, t, left_side=False, transpose_a=True, conjugate_a=True, lower=True)
    inner = triangular_solve(L, tmp, left_side=True, transpose_a=False, lower=True)
    return L, _matmul(L, phi(inner))


cholesky_p.def_jvp(_cholesky_jvp)


def _triangular_solve_jvp_a(
    g_a: Any, ans: Any, a: Any, b: Any, *, left_side: bool, lower: bool, transpose_a: bool, conjugate_a: bool,
    unit_diagonal: bool,
) -> Any:
    """JAX's rule: ``-A⁻¹ ∂A X`` (left side) or ``-X ∂A A⁻¹``, ordered by cost."""
    from ferrax._lax.elementwise import neg

    m, n = aval_of(b).shape[-2:]
    k = 1 if unit_diagonal else 0
    g = _tril(g_a, -k) if lower else _triu(g_a, k)
    g = neg(g)
    g = _T(g) if transpose_a else g
    flags = dict(left_side=left_side, lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a,
                 unit_diagonal=unit_diagonal)

    def a_inverse(rhs: Any) -> Any:
        return bind1(triangular_solve_p, a, rhs, **flags)

    if left_side:
        return a_inverse(_matmul(g, ans)) if m > n else _matmul(a_inverse(g), ans)
    return a_inverse(_matmul(ans, g)) if m < n else _matmul(ans, a_inverse(g))


def _triangular_solve_jvp_b(g_b: Any, ans: Any, a: Any, b: Any, **flags: Any) -> Any:
    return bind1(triangular_solve_p, a, g_b, **flags)


ad.defjvp(triangular_solve_p, _triangular_solve_jvp_a, _triangular_solve_jvp_b)


def _lu_jvp_one(lu_: Any, a_dot: Any, permutation: Any) -> Any:
    """JAX's rule for one matrix (De Hoog, Anderssen and Lukas): with ``F = L⁻¹ Ȧ_P
    U⁻¹``, ``L̇ = L tril(F, -1)`` and ``U̇ = triu(F) U``; the tangent is ``L̇ + U̇``."""
    from ferrax._lax.elementwise import add
    from ferrax._lax.structural import pad, slice
    from ferrax.numpy import take

    m, n = aval_of(a_dot).shape
    dtype = aval_of(a_dot).dtype
    k = min(m, n)
    zero = np.zeros((), dtype)
    l = pad(_tril(slice(lu_, (0, 0), (m, k)), -1), zero, ((0, 0, 0), (0, m - k, 0)))
    l = add(l, _eye(dtype, m))
    u_eye = pad(_eye(dtype, n - k), zero, ((k, 0, 0), (k, 0, 0)))
    u = add(pad(_triu(slice(lu_, (0, 0), (k, n))), zero, ((0, n - k, 0), (0, 0, 0))), u_eye)
    la = triangular_solve(l, take(a_dot, permutation, axis=0), left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(u, la, left_side=False, lower=False)
    return add(_matmul(l, _tril(lau, -1)), _matmul(_triu(lau), u))


def _lu_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    from ferrax._vmap import vmap

    (x,), (t,) = primals, tangents
    out, pivots, perm = lu_p.bind(x)
    zeros = [ad.Zero(aval_of(pivots)), ad.Zero(aval_of(perm))]
    if type(t) is ad.Zero:
        return [out, pivots, perm], [ad.Zero(aval_of(out)), *zeros]
    fn: Any = _lu_jvp_one
    for _ in aval_of(x).shape[:-2]:
        fn = vmap(fn)
    return [out, pivots, perm], [fn(out, t, perm), *zeros]


lu_p.def_jvp(_lu_jvp)


def _eigh_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    """JAX's rule (non-degenerate perturbation theory): with ``Vᵀ Ȧ V = M``,
    ``ẇ = diag(M)`` and ``V̇ = V (F ∘ M)``, ``F[i, j] = 1 / (w[j] - w[i])`` off the
    diagonal, 0 on it."""
    from ferrax._lax.elementwise import add, integer_pow, mul, sub
    from ferrax._lax.structural import broadcast_in_dim

    (a,), (a_dot,) = primals, tangents
    v, w = eigh_p.bind(symmetrize(a), **params)
    if type(a_dot) is ad.Zero:
        return [v, w], [ad.Zero(aval_of(v)), ad.Zero(aval_of(w))]
    shape = tuple(aval_of(a).shape)
    r = len(shape)
    n = shape[-1]
    eye = broadcast_in_dim(_eye(aval_of(a).dtype, n), shape, (r - 2, r - 1))
    w_row = broadcast_in_dim(w, shape, (*range(r - 2), r - 1))
    w_col = broadcast_in_dim(w, shape, (*range(r - 2), r - 2))
    f = sub(integer_pow(add(eye, sub(w_row, w_col)), -1), eye)
    m = _matmul(_matmul(_T(v), a_dot), v)
    dv = _matmul(v, mul(f, m))
    dw = _diagonal(m)
    return [v, w], [dv, dw]


def _diagonal(x: Any) -> Any:
    from ferrax._lax.reductions import reduce_sum
    from ferrax._lax.elementwise import mul
    from ferrax._lax.structural import broadcast_in_dim

    shape = tuple(aval_of(x).shape)
    r = len(shape)
    eye = broadcast_in_dim(_eye(aval_of(x).dtype, shape[-1]), shape, (r - 2, r - 1))
    return reduce_sum(mul(x, eye), (r - 1,))


eigh_p.def_jvp(_eigh_jvp)


def _thin_qr_jvp(q: Any, r: Any, dx: Any) -> tuple[Any, Any]:
    """JAX's rule for ``m >= n`` (Townsend): with ``C = qᵀ ẋ r⁻¹`` and ``Ω`` the
    skew-symmetric ``tril(C, -1) - tril(C, -1)ᵀ``, ``q̇ = q (Ω - C) + ẋ r⁻¹`` and
    ``ṙ = (C - Ω) r``."""
    from ferrax._lax.elementwise import sub

    dx_rinv = triangular_solve(r, dx)
    qt_dx_rinv = _matmul(_T(q), dx_rinv)
    lower = _tril(qt_dx_rinv, -1)
    do = sub(lower, _T(lower))
    dq = _matmul(q, sub(do, qt_dx_rinv)) + dx_rinv
    dr = _matmul(sub(qt_dx_rinv, do), r)
    return dq, dr


def _qr_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    """JAX's rule: the thin rule on the leading square block of a wide matrix (the rest
    of ``ṙ`` as ``q̇ᵀ x₂ + qᵀ ẋ₂``); for a full ``q`` of a tall matrix, the extra
    columns by Roberts and Roberts' equations (arXiv:2409.13374, eqs. 32-33)."""
    from ferrax._lax.elementwise import add, sub
    from ferrax._lax.convenience import slice_in_dim
    from ferrax._lax.structural import broadcast_in_dim, concatenate

    (x,), (dx,) = primals, tangents
    q, r, *p = qr_p.bind(x, **params)
    # The permutation's tangent: float0 zeros.
    extra = [ad.Zero(aval_of(p[0]))] if p else []
    if type(dx) is ad.Zero:
        return [q, r, *p], [ad.Zero(aval_of(q)), ad.Zero(aval_of(r)), *extra]
    if p:  # x[..., p] = q r: the operand's and tangent's columns permuted the same way
        from ferrax.numpy import take_along_axis

        dx = take_along_axis(dx, p[0][..., None, :], axis=-1)
        # (JAX 0.10.2 permutes only the tangent, so its wide pivoted rule uses the
        # unpermuted x₂ and disagrees with finite differences; this one does not.)
        x = take_along_axis(x, p[0][..., None, :], axis=-1)
    shape = tuple(aval_of(x).shape)
    dtype = aval_of(x).dtype
    rank = len(shape)
    m, n = shape[-2:]
    if m < n:
        x2 = slice_in_dim(x, m, n, axis=rank - 1)
        dx1 = slice_in_dim(dx, 0, m, axis=rank - 1)
        dx2 = slice_in_dim(dx, m, n, axis=rank - 1)
        r1 = slice_in_dim(r, 0, m, axis=rank - 1)
        dq, dr1 = _thin_qr_jvp(q, r1, dx1)
        dr2 = add(_matmul(_T(dq), x2), _matmul(_T(q), dx2))
        return [q, r, *p], [dq, concatenate([dr1, dr2], rank - 1), *extra]
    full = params["full_matrices"]
    q_mn = slice_in_dim(q, 0, n, axis=rank - 1) if full else q
    r_nn = slice_in_dim(r, 0, n, axis=rank - 2) if full else r
    dq_mn, dr_nn = _thin_qr_jvp(q_mn, r_nn, dx)
    if not full or m == n:
        return [q, r, *p], [dq_mn, dr_nn, *extra]
    from ferrax.numpy.linalg import _lu_solve

    q_nn = slice_in_dim(q_mn, 0, n, axis=rank - 2)
    q_pn = slice_in_dim(q_mn, n, m, axis=rank - 2)
    q_mp = slice_in_dim(q, n, m, axis=rank - 1)
    dq_nn = slice_in_dim(dq_mn, 0, n, axis=rank - 2)
    dq_pn = slice_in_dim(dq_mn, n, m, axis=rank - 2)
    eye = broadcast_in_dim(_eye(dtype, n), tuple(aval_of(q_nn).shape), (rank - 2, rank - 1))
    lu_, _, perm = lu(sub(q_nn, eye))
    z_pn_t = _lu_solve(lu_, perm, _T(q_pn), trans=1)
    z_pn = _T(z_pn_t)
    dq_mp = sub(
        _matmul(dq_mn, z_pn_t),
        _matmul(add(q_mn, _matmul(q_mp, z_pn)), _T(sub(dq_pn, _matmul(z_pn, dq_nn)))),
    )
    dq = concatenate([dq_mn, dq_mp], rank - 1)
    zeros = broadcast_in_dim(np.zeros((), dtype), (*shape[:-2], m - n, n), ())
    dr = concatenate([dr_nn, zeros], rank - 2)
    return [q, r, *p], [dq, dr, *extra]


qr_p.def_jvp(_qr_jvp)


def _svd_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    """JAX's rule (Townsend's): with ``dS = uᵀ ȧ v``, ``ṡ = diag(dS)``; ``u̇``/``v̇``
    by ``F[i, j] = 1 / (s[j]² - s[i]²)`` (0 on the diagonal), plus the parts outside
    ``u``'s (tall) or ``v``'s (wide) span. Full non-square ``u``/``v`` are refused, as
    JAX's."""
    from ferrax._lax.elementwise import add, div, eq, mul, sub, convert_element_type
    from ferrax._lax.structural import broadcast_in_dim

    (a,), (da,) = primals, tangents
    full, compute_uv = params["full_matrices"], params["compute_uv"]
    shape = tuple(aval_of(a).shape)
    m, n = shape[-2:]
    if compute_uv and full and m != n:
        raise NotImplementedError(f"Singular value decomposition JVP not implemented for full matrices, at {user_location()}")
    s, u, vt = svd_p.bind(a, **{**params, "full_matrices": False, "compute_uv": True})
    primal_out = [s, u, vt] if compute_uv else [s]
    if type(da) is ad.Zero:
        return primal_out, [ad.Zero(aval_of(o)) for o in primal_out]
    dtype = aval_of(a).dtype
    r = len(shape)
    k = min(m, n)
    ut, v = _T(u), _T(vt)
    ds_mat = _matmul(_matmul(ut, da), v)
    ds = _diagonal(ds_mat)
    if not compute_uv:
        return primal_out, [ds]
    kk = (*shape[:-2], k, k)
    s_row = broadcast_in_dim(s, kk, (*range(r - 2), r - 1))  # s[..., None, :]
    s_col = broadcast_in_dim(s, kk, (*range(r - 2), r - 2))
    s_diffs = mul(add(s_row, s_col), sub(s_row, s_col))
    eye = broadcast_in_dim(_eye(dtype, k), kk, (r - 2, r - 1))
    one = np.ones((), dtype)
    F = sub(div(broadcast_in_dim(one, kk, ()), add(s_diffs, eye)), eye)
    dss = mul(s_row, ds_mat)
    sds = mul(s_col, ds_mat)
    s_zeros = convert_element_type(eq(s, broadcast_in_dim(np.zeros((), dtype), tuple(aval_of(s).shape), ())), dtype)
    s_inv = sub(div(broadcast_in_dim(one, tuple(aval_of(s).shape), ()), add(s, s_zeros)), s_zeros)
    s_inv_mat = mul(eye, broadcast_in_dim(s_inv, kk, (*range(r - 2), r - 1)))
    half = broadcast_in_dim(np.array(0.5, dtype), kk, ())
    dudv_diag = mul(mul(half, sub(ds_mat, _T(ds_mat))), s_inv_mat)
    du = _matmul(u, add(mul(F, add(dss, _T(dss))), dudv_diag))
    dv = _matmul(v, mul(F, add(sds, _T(sds))))
    if m > n:
        dav = _matmul(da, v)
        du = add(du, div(sub(dav, _matmul(u, _matmul(ut, dav))), broadcast_in_dim(s, (*shape[:-2], m, k), (*range(r - 2), r - 1))))
    if n > m:
        dahu = _matmul(_T(da), u)
        dv = add(dv, div(sub(dahu, _matmul(v, _matmul(vt, dahu))), broadcast_in_dim(s, (*shape[:-2], n, k), (*range(r - 2), r - 1))))
    return primal_out, [ds, du, _T(dv)]


svd_p.def_jvp(_svd_jvp)


def _no_derivative(name: str) -> Any:
    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> Any:
        # JAX 0.10 defines no derivative for geqrf and householder_product (jnp's qr and
        # slogdet differentiate through their own rules): an error there too.
        raise DifferentiationError(f"Differentiation rule for '{name}' not implemented, at {user_location()}")

    return rule


geqrf_p.def_jvp(_no_derivative("geqrf"))
geqp3_p.def_jvp(_no_derivative("geqp3"))
householder_product_p.def_jvp(_no_derivative("householder_product"))


# ----------------------------------------------------------------------------- batching


def _install_batching() -> None:
    from ferrax._interpreters import batching
    from ferrax._lax.structural import reshape

    def leading(prim: Primitive) -> None:
        # The leading dimensions are batch dimensions: the vmapped one goes first.
        def rule(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> Any:
            (x,), (d,) = vals, dims
            out = prim.bind(batching.moveaxis(x, d, 0), **params)
            return (list(out), [0] * len(out)) if prim.multiple_results else (out, 0)

        prim.def_batch(rule)

    leading(cholesky_p)
    leading(lu_p)
    leading(eigh_p)
    leading(qr_p)
    leading(svd_p)
    leading(geqrf_p)

    def householder_rule(vals: Any, dims: Any, *, axis_size: int) -> Any:
        (a, taus), (da, dt) = vals, dims
        a = batching.bdim_at_front(a, da, axis_size)
        taus = batching.bdim_at_front(taus, dt, axis_size)
        return bind1(householder_product_p, a, taus), 0

    householder_product_p.def_batch(householder_rule)

    def geqp3_rule(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> Any:
        (a, jpvt), (da, dj) = vals, dims
        a = batching.bdim_at_front(a, da, axis_size)
        jpvt = batching.bdim_at_front(jpvt, dj, axis_size)
        return list(geqp3_p.bind(a, jpvt, **params)), [0, 0, 0]

    geqp3_p.def_batch(geqp3_rule)

    def solve_rule(vals: Any, dims: Any, *, axis_size: int, **flags: Any) -> Any:
        """JAX's rule: an unbatched ``a`` solves for the batch of ``b`` at once (folded
        into ``b``'s columns on the left side, its rows on the right); else both batch
        axes go first."""
        (a, b), (da, db) = vals, dims
        if da is None:
            shape = tuple(aval_of(b).shape)
            if flags["left_side"]:
                y = batching.moveaxis(b, db, len(shape) - 1)
                ys = tuple(aval_of(y).shape)
                flat = reshape(y, (*ys[:-2], ys[-2] * ys[-1]))
                out_dim = len(shape) - 1
            else:
                y = batching.moveaxis(b, db, len(shape) - 2)
                ys = tuple(aval_of(y).shape)
                flat = reshape(y, (*ys[:-3], ys[-3] * ys[-2], ys[-1]))
                out_dim = len(shape) - 2
            out = bind1(triangular_solve_p, a, flat, **flags)
            return reshape(out, ys), out_dim
        a = batching.bdim_at_front(a, da, axis_size)
        b = batching.bdim_at_front(b, db, axis_size)
        return bind1(triangular_solve_p, a, b, **flags), 0

    triangular_solve_p.def_batch(solve_rule)


_install_batching()
