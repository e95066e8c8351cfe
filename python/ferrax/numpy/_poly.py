"""Polynomials of ``jax.numpy`` (issue 12 item 3): ``poly`` (from 1-d roots),
``polyval`` (Horner's rule in one ``lax.scan``, as JAX), ``polyadd``, ``polysub``,
``polymul``, ``polyder``, ``polyint`` and ``polydiv``; coefficients highest power first.
``polyfit`` (least squares, as JAX's: weights, ``full`` and ``cov``); ``roots``
(eigenvalues of a nonsymmetric matrix) and ``poly`` of a matrix are not here yet.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

import ferrax.numpy as fnp
from ferrax import lax
from ferrax._array import Array
from ferrax._core import Tracer, user_location
from ferrax.errors import ConcretizationError
from ferrax.numpy._breadth import _promote_inexact
from ferrax.numpy._promotion import ArrayLike, as_array, promote_dtypes

__all__ = ["poly", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul", "polysub", "polyval"]


def _static_order(m: Any, name: str) -> int:
    if isinstance(m, Tracer):
        raise ConcretizationError(
            f"Abstract tracer value encountered where concrete value is expected: the 'm' argument of jnp.{name} "
            f"({m.aval.str_short()}) must be concrete, at {user_location()}"
        )
    return operator.index(m)


def _full_convolution(a: Array, b: Array) -> Array:
    """The full 1-d convolution of ``a`` and ``b``: every product ``a[i] b[j]`` added
    at ``i + j``."""
    n, m = a.shape[0], b.shape[0]
    products = fnp.multiply(a[:, None], b[None, :])
    positions = fnp.add(fnp.arange(n)[:, None], fnp.arange(m)[None, :])
    return fnp.zeros(n + m - 1, products.dtype).at[fnp.ravel(positions)].add(fnp.ravel(products))


def poly(seq_of_zeros: ArrayLike) -> Array:
    """The coefficients of the monic polynomial with the given (1-d) roots."""
    (zeros,) = _promote_inexact("poly", as_array(seq_of_zeros, "poly"))
    zeros = fnp.atleast_1d(zeros)
    if zeros.ndim == 2 and zeros.shape[0] == zeros.shape[1] and zeros.shape[0] != 0:
        raise NotImplementedError(f"poly of a square matrix needs eigvals (ferrax.numpy.linalg), at {user_location()}")
    if zeros.ndim != 1:
        raise ValueError(f"input must be 1d or non-empty square 2d array, at {user_location()}")
    d = zeros.dtype
    if zeros.shape[0] == 0:
        return fnp.ones((), dtype=d)
    a = fnp.ones((1,), dtype=d)
    for k in range(zeros.shape[0]):
        a = _full_convolution(a, fnp.stack([fnp.ones((), dtype=d), fnp.negative(zeros[k])]))
    return a


def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Array:
    """The polynomial ``p`` (coefficients along its first axis) at ``x``, by Horner's
    rule in one ``lax.scan``."""
    pa, xa = promote_dtypes("polyval", as_array(p, "polyval"), as_array(x, "polyval", 1))
    shape = fnp.broadcast_shapes(pa.shape[1:], xa.shape)
    y = lax.full_like(xa, 0, shape=shape)  # x's dtype and weak type

    def step(acc: Array, coefficient: Array) -> tuple[Array, None]:
        return fnp.add(fnp.multiply(acc, xa), coefficient), None

    result: Array = lax.scan(step, y, pa)[0]  # (unroll is a scheduling hint ferrax's scan has no use for)
    return result


def polyadd(a1: ArrayLike, a2: ArrayLike) -> Array:
    """The sum of two polynomials (the shorter one added to the end of the longer)."""
    x: Array
    y: Array
    x, y = promote_dtypes("polyadd", as_array(a1, "polyadd"), as_array(a2, "polyadd", 1))
    if y.shape[0] <= x.shape[0]:
        return x.at[-y.shape[0]:].add(y)
    return y.at[-x.shape[0]:].add(x)


def polysub(a1: ArrayLike, a2: ArrayLike) -> Array:
    """The difference of two polynomials."""
    x, y = promote_dtypes("polysub", as_array(a1, "polysub"), as_array(a2, "polysub", 1))
    return polyadd(x, fnp.negative(y))


def polymul(a1: ArrayLike, a2: ArrayLike, *, trim_leading_zeros: bool = False) -> Array:
    """The product of two polynomials (their coefficients' full convolution)."""
    x, y = _promote_inexact("polymul", as_array(a1, "polymul"), as_array(a2, "polymul", 1))
    if trim_leading_zeros and (x.shape[0] > 1 or y.shape[0] > 1):
        x, y = fnp.trim_zeros(x, trim="f"), fnp.trim_zeros(y, trim="f")
    if x.shape[0] == 0:
        x = fnp.zeros(1, dtype=y.dtype)
    if y.shape[0] == 0:
        y = fnp.zeros(1, dtype=x.dtype)
    return _full_convolution(x, y)


def polyder(p: ArrayLike, m: int = 1) -> Array:
    """The ``m``-th derivative of the polynomial ``p``."""
    pa = as_array(p, "polyder")
    m = _static_order(m, "polyder")
    (pa,) = _promote_inexact("polyder", pa)
    if m < 0:
        raise ValueError(f"Order of derivative must be positive, at {user_location()}")
    if m == 0:
        return pa
    grid = fnp.subtract(fnp.arange(m, pa.shape[0], dtype=pa.dtype)[None, :], fnp.arange(m, dtype=pa.dtype)[:, None])
    coefficients = fnp.prod(grid, 0)
    return fnp.multiply(pa[:-m], coefficients[::-1])


def polyint(p: ArrayLike, m: int = 1, k: int | ArrayLike | None = None) -> Array:
    """The ``m``-th antiderivative of ``p``, with integration constants ``k`` (a
    scalar or one per integration)."""
    m = _static_order(m, "polyint")
    pa, ka = _promote_inexact("polyint", as_array(p, "polyint"), as_array(0 if k is None else k, "polyint", 2))
    if m < 0:
        raise ValueError(f"Order of integral must be positive (see polyder), at {user_location()}")
    ka = fnp.atleast_1d(ka)
    if ka.shape[0] == 1:
        ka = fnp.full((m,), ka[0])
    if ka.shape != (m,):
        raise ValueError(f"k must be a scalar or a rank-1 array of length 1 or m, at {user_location()}")
    if m == 0:
        return pa
    grid = fnp.subtract(fnp.arange(pa.shape[0] + m, dtype=pa.dtype)[None, :], fnp.arange(m, dtype=pa.dtype)[:, None])
    coefficients = fnp.prod(fnp.maximum(1, grid), 0)[::-1]
    return fnp.true_divide(fnp.concatenate([pa, ka]), coefficients)


def polydiv(u: ArrayLike, v: ArrayLike, *, trim_leading_zeros: bool = False) -> tuple[Array, Array]:
    """The quotient and remainder of polynomial division ``u / v`` (the remainder as
    long as ``u`` unless ``trim_leading_zeros``)."""
    num, den = _promote_inexact("polydiv", as_array(u, "polydiv"), as_array(v, "polydiv", 1))
    m, n = num.shape[0] - 1, den.shape[0] - 1
    scale = fnp.divide(1.0, den[0])
    q = fnp.zeros(max(m - n + 1, 1), dtype=num.dtype)
    for k in range(0, m - n + 1):
        d = fnp.multiply(scale, num[k])
        q = q.at[k].set(d)
        num = num.at[k : k + n + 1].add(fnp.negative(fnp.multiply(d, den)))
    if trim_leading_zeros:
        tol = float(np.sqrt(fnp.finfo(num.dtype).eps))
        host = np.asarray(num)
        keep = np.flatnonzero(np.abs(host) >= tol)
        num = num[int(keep[0]) if keep.size else num.shape[0]:]
    return q, num


def polyfit(
    x: ArrayLike,
    y: ArrayLike,
    deg: int,
    rcond: float | None = None,
    full: bool = False,
    w: ArrayLike | None = None,
    cov: bool | str = False,
) -> Array | tuple[Array, ...]:
    """The least-squares polynomial of degree ``deg`` through the points ``(x, y)``
    (``y`` one column of values or several), coefficients highest power first, as JAX's:
    the Vandermonde system weighted by ``w``, its columns scaled to unit norm, solved by
    :func:`ferrax.numpy.linalg.lstsq` with ``rcond`` (by default ``len(x)`` epsilons).
    With ``full`` also the residuals, rank, singular values and ``rcond``; with ``cov``
    (and not ``full``) also the coefficients' covariance (scaled by the residuals per
    degree of freedom unless ``cov='unscaled'``)."""
    from ferrax.numpy import linalg

    x_arr, y_arr = as_array(x, "polyfit", 0), as_array(y, "polyfit", 1)
    deg_value: Any = deg
    if isinstance(deg_value, Tracer):
        raise ConcretizationError(
            f"Abstract tracer value encountered where concrete value is expected: deg must be int, at {user_location()}"
        )
    deg = operator.index(deg_value)
    order = deg + 1
    if deg < 0:
        raise ValueError(f"expected deg >= 0, at {user_location()}")
    if x_arr.ndim != 1:
        raise TypeError(f"expected 1D vector for x, at {user_location()}")
    if x_arr.size == 0:
        raise TypeError(f"expected non-empty vector for x, at {user_location()}")
    if y_arr.ndim < 1 or y_arr.ndim > 2:
        raise TypeError(f"expected 1D or 2D array for y, at {user_location()}")
    if x_arr.shape[0] != y_arr.shape[0]:
        raise TypeError(f"expected x and y to have same length, at {user_location()}")
    if rcond is None:
        if not np.issubdtype(np.dtype(x_arr.dtype), np.inexact):  # (NumPy's finfo refuses it in JAX)
            raise ValueError(f"data type {np.dtype(x_arr.dtype)!r} not inexact, at {user_location()}")
        rcond = x_arr.shape[0] * float(np.finfo(x_arr.dtype).eps)
    rcond = float(rcond)
    lhs = fnp.vander(x_arr, order)
    rhs = y_arr
    if w is not None:
        (w_arr,) = _promote_inexact("polyfit", w)
        if w_arr.ndim != 1:
            raise TypeError(f"expected a 1-d array for weights, at {user_location()}")
        if w_arr.shape[0] != y_arr.shape[0]:
            raise TypeError(f"expected w and y to have the same length, at {user_location()}")
        lhs = lhs * w_arr[:, None]
        rhs = rhs * (w_arr[:, None] if rhs.ndim == 2 else w_arr)
    scale = fnp.sqrt((lhs * lhs).sum(axis=0))
    lhs = lhs / scale[None, :]
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = (c.T / scale[None, :]).T if c.ndim > 1 else c / scale
    if full:
        return c, resids, rank, s, fnp.asarray(rcond)
    if cov:
        vbase = linalg.inv(fnp.dot(lhs.T, lhs))
        vbase = vbase / fnp.outer(scale, scale)
        if cov == "unscaled":
            fac: Any = fnp.array(1.0)
        else:
            if x_arr.shape[0] <= order:
                raise ValueError(
                    f"the number of data points must exceed order to scale the covariance matrix, at {user_location()}"
                )
            fac = resids / (x_arr.shape[0] - order)
        if y_arr.ndim == 1:
            return c, vbase * fnp.atleast_1d(fac)[None]
        return c, vbase[:, :, None] * fnp.atleast_1d(fac)[None, None, :]
    return c
