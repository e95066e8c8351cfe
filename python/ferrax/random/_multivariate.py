"""``multivariate_normal`` (JAX's sampler, its three methods) and
``orthogonal``, on ``ferrax.numpy.linalg``."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ferrax import dtypes
from ferrax import numpy as fnp
from ferrax._array import Array
from ferrax._core import aval_of
from ferrax._user_frames import user_location
from ferrax.numpy import linalg as np_linalg
from ferrax.random._keys import check_key
from ferrax.random._samplers import (
    _broadcast_shapes,
    _jax_jit,
    _staging,
    _canonical_shape,
    _check_shape,
    _float_dtype,
    _no_out_sharding,
    normal,
)


def multivariate_normal(
    key: Any,
    mean: Any,
    cov: Any,
    shape: Sequence[int] | None = None,
    dtype: Any = None,
    method: str = "cholesky",
    *,
    out_sharding: Any = None,
) -> Array:
    """Samples of the normal distribution of ``mean`` (``[..., n]``) and covariance
    ``cov`` (``[..., n, n]``, symmetric positive definite): ``mean + L z`` with ``L``
    the Cholesky factor of ``cov`` and ``z`` standard normal of shape ``shape + (n,)``
    (``shape`` by default the broadcast of the batch shapes). ``method`` picks the
    factor as JAX's: ``'cholesky'`` (the default), ``'svd'`` (``U sqrt(S)``) or
    ``'eigh'`` (``V sqrt(W)``; these two accept positive semi-definite ``cov``)."""
    _no_out_sharding("multivariate_normal", out_sharding)
    check_key("multivariate_normal", key)
    m, c = np_linalg._inexact("multivariate_normal", mean, cov)
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError(f"method must be one of {{'svd', 'eigh', 'cholesky'}}, at {user_location()}")
    d = aval_of(m).dtype if dtype is None else dtypes.canonicalize(dtype, "multivariate_normal")
    if not dtypes.is_float(d):
        raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, got {d}, at {user_location()}")
    m_shape, c_shape = tuple(aval_of(m).shape), tuple(aval_of(c).shape)
    if len(m_shape) < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == {len(m_shape)}, at {user_location()}")
    if len(c_shape) < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {len(c_shape)}, at {user_location()}")
    n = m_shape[-1]
    if c_shape[-2:] != (n, n):
        raise ValueError(
            f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, but got cov.shape == {c_shape}., "
            f"at {user_location()}"
        )
    if shape is None:
        out_shape = _broadcast_shapes(m_shape[:-1], c_shape[:-2])
    else:
        out_shape = _canonical_shape(shape)
        _check_shape("normal", out_shape, m_shape[:-1], c_shape[:-2])
    keys, _ = check_key("multivariate_normal", key)
    if _staging():
        staged: Array = _multivariate_normal(keys, m, c, method=method, shape=out_shape, dtype=d)
        return staged
    out: Array = _mvn_values(keys, m, c, out_shape, d, method)
    return out


def _mvn_values(key: Any, m: Any, c: Any, shape: tuple[int, ...], dtype: Any, method: str) -> Any:
    if method == "svd":
        u, s, _ = np_linalg.svd(c)
        factor = u * fnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = np_linalg.eigh(c)
        factor = v * fnp.sqrt(w[..., None, :])
    else:
        factor = np_linalg.cholesky(c)
    samples = normal(key, (*shape, aval_of(m).shape[-1]), dtype)
    return m + fnp.einsum("...ij,...j->...i", factor, samples)


@_jax_jit("shape", "dtype", "method")
def _multivariate_normal(key: Any, mean: Any, cov: Any, shape: tuple[int, ...], dtype: Any, method: str) -> Any:
    # JAX's ``_multivariate_normal``: a jit over the key, the mean and the covariance.
    return _mvn_values(key, mean, cov, shape, dtype, method)


def orthogonal(
    key: Any, n: int, shape: Sequence[int] = (), dtype: Any = None, m: int | None = None, *, out_sharding: Any = None
) -> Array:
    """Matrices (``shape + (n, m)``, ``m = n`` by default) drawn uniformly from the
    orthogonal group (semi-orthogonal when ``n != m``: orthonormal rows if ``n <= m``,
    columns if ``m <= n``), as JAX's: the QR decomposition of a standard normal matrix,
    ``q``'s columns multiplied by the signs of ``r``'s diagonal (Mezzadri 2007)."""
    _no_out_sharding("orthogonal", out_sharding)
    check_key("orthogonal", key)
    rows, cols = operator.index(n), operator.index(n if m is None else m)
    d = _float_dtype("orthogonal", dtype)
    shp = _canonical_shape(shape)
    keys, _ = check_key("orthogonal", key)
    if _staging():
        staged: Array = _orthogonal(keys, n=rows, _m=cols, shape=shp, dtype=d)
        return staged
    out: Array = _orthogonal_values(keys, rows, cols, shp, d)
    return out


def _orthogonal_values(key: Any, n: int, _m: int, shape: tuple[int, ...], dtype: Any) -> Any:
    z = normal(key, (*shape, max(n, _m), min(n, _m)), dtype)
    q, r = np_linalg.qr(z)
    signs = fnp.sign(np_linalg.diagonal(r))
    x = q * fnp.expand_dims(signs, -2)
    return fnp.swapaxes(x, -1, -2) if n < _m else x


@_jax_jit("n", "_m", "shape", "dtype")
def _orthogonal(key: Any, n: int, _m: int, shape: tuple[int, ...], dtype: Any) -> Any:
    # JAX's ``_orthogonal``: a jit over the key.
    return _orthogonal_values(key, n, _m, shape, dtype)
