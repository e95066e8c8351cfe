"""``ferrax.scipy.special``: the special functions of ``jax.scipy.special`` that neural
networks and probability code use, with JAX's dtypes, weak types, values and custom
derivatives.

Integer and bool arguments are computed as floats (``promote_args_inexact``).
``xlogy``, ``xlog1py``, ``logit`` and ``entr`` carry JAX's derivative rules, so that
``xlogy(0, 0)`` is 0 with a finite gradient.
"""

from __future__ import annotations

import numpy as np

from ferrax import lax
from ferrax import numpy as fnp
from ferrax._array import Array
from ferrax._core import user_location
from ferrax._custom_derivatives import custom_jvp
from ferrax.nn.functions import log_softmax as _nn_log_softmax
from ferrax.nn.functions import logsumexp
from ferrax.nn.functions import softmax as _nn_softmax
from ferrax.numpy._promotion import ArrayLike, convert, operand_aval, promote_args_inexact

__all__ = [
    "digamma", "entr", "erf", "erfc", "erfinv", "expit", "factorial", "gamma", "gammaln",
    "gammasgn", "kl_div", "log_softmax", "logit", "logsumexp", "ndtr", "rel_entr", "softmax",
    "xlog1py", "xlogy",
    "gammainc", "gammaincc",
]


def _inexact(name: str, x: ArrayLike) -> Array:
    a: Array = promote_args_inexact(name, x)[0]
    return a


def _is_nan(x: Array) -> Array:
    return lax.ne(x, x)


def erf(x: ArrayLike) -> Array:
    """The error function ``2/sqrt(pi) * integral from 0 to x of exp(-t**2) dt``."""
    return lax.erf(_inexact("erf", x))


def erfc(x: ArrayLike) -> Array:
    """``1 - erf(x)``, accurate where ``erf(x)`` is close to 1."""
    return lax.erfc(_inexact("erfc", x))


def erfinv(x: ArrayLike) -> Array:
    """The inverse of :func:`erf` on ``[-1, 1]`` (``+-inf`` at ``+-1``, NaN outside)."""
    return lax.erf_inv(_inexact("erfinv", x))


def gammaln(x: ArrayLike) -> Array:
    """``log|Gamma(x)|`` (``inf`` at the poles: 0 and the negative integers)."""
    return lax.lgamma(_inexact("gammaln", x))


def digamma(x: ArrayLike) -> Array:
    """The digamma function, the derivative of ``log Gamma(x)``."""
    return lax.digamma(_inexact("digamma", x))


def gammasgn(x: ArrayLike) -> Array:
    """The sign of ``Gamma(x)``: 1 or -1, NaN at the poles (0 has the sign of its zero)."""
    xa = _inexact("gammasgn", x)
    t = xa.dtype.type
    floor_x = lax.floor(xa)
    negative = fnp.less(xa, 0)
    nan = fnp.logical_or(fnp.logical_and(negative, fnp.equal(xa, floor_x)), _is_nan(xa))
    # -0.0: the sign of 1 / x.
    minus_zero = fnp.logical_and(fnp.equal(xa, 0), fnp.less(fnp.divide(1, xa), 0))
    odd = fnp.not_equal(fnp.remainder(floor_x, 2), 0)
    minus = fnp.logical_or(fnp.logical_and(negative, odd), minus_zero)
    return fnp.where(nan, t(np.nan), fnp.where(minus, t(-1.0), t(1.0)))


def gamma(x: ArrayLike) -> Array:
    """The gamma function ``Gamma(x)`` of real ``x``: ``gammasgn(x) * exp(gammaln(x))``."""
    xa = _inexact("gamma", x)
    out: Array = gammasgn(xa) * lax.exp(lax.lgamma(xa))
    return out


def factorial(n: ArrayLike, exact: bool = False) -> Array:
    """``n!`` as ``Gamma(n + 1)`` (0 for negative ``n``); ``exact=True`` is not
    supported, as in JAX."""
    if exact:
        raise NotImplementedError(f"factorial with exact=True, at {user_location()}")
    na = _inexact("factorial", n)
    return fnp.where(fnp.less(na, 0), 0, lax.exp(lax.lgamma(na + 1)))


def ndtr(x: ArrayLike) -> Array:
    """The standard normal distribution function ``(1 + erf(x / sqrt(2))) / 2``, with
    ``erfc`` in the tails; float32 and float64 only, as JAX's."""
    xa = fnp.asarray(x)
    if xa.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(
            f"x.dtype={xa.dtype} is not supported by ndtr (float32 and float64 only), at {user_location()}"
        )
    t = xa.dtype.type
    erf, erfc = lax.erf, lax.erfc
    half_sqrt_2 = t(0.5) * np.sqrt(2.0, dtype=xa.dtype)
    w = xa * half_sqrt_2
    z = lax.abs(w)
    tails = fnp.where(fnp.greater(w, t(0.0)), t(2.0) - erfc(z), erfc(z))
    y = fnp.where(fnp.less(z, half_sqrt_2), t(1.0) + erf(w), tails)
    out: Array = t(0.5) * y
    return out


def expit(x: ArrayLike) -> Array:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return lax.logistic(_inexact("expit", x))


@custom_jvp
def _logit(x: Array) -> Array:
    return lax.log(lax.div(x, lax.sub(1.0, x)))


_logit.defjvps(lambda g, ans, x: lax.div(g, lax.mul(x, lax.sub(1.0, x))))


def logit(x: ArrayLike) -> Array:
    """``log(p / (1 - p))``, the inverse of :func:`expit`; its derivative is
    ``1 / (p (1 - p))``."""
    return _logit(_inexact("logit", x))


@custom_jvp
def _xlogy(x: Array, y: Array) -> Array:
    keep = fnp.logical_or(fnp.not_equal(x, 0.0), _is_nan(y))
    return fnp.where(keep, lax.mul(x, lax.log(y)), fnp.zeros_like(x))


@_xlogy.defjvp
def _xlogy_jvp(primals: tuple[Array, Array], tangents: tuple[Array, Array]) -> tuple[Array, Array]:
    x, y = primals
    x_dot, y_dot = tangents
    out = _xlogy(x, y)
    return out, fnp.astype(x_dot * lax.log(y) + y_dot * x / y, out.dtype)


def xlogy(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log(y)``, 0 where ``x`` is 0 (unless ``y`` is NaN), with JAX's derivative
    rule (defined at ``(0, 0)``)."""
    operand_aval("xlogy", y, 1)
    xa, ya = promote_args_inexact("xlogy", x, y)
    return _xlogy(xa, ya)


@custom_jvp
def _xlog1py(x: Array, y: Array) -> Array:
    keep = fnp.logical_or(fnp.not_equal(x, 0.0), _is_nan(y))
    return fnp.where(keep, lax.mul(x, lax.log1p(y)), fnp.zeros_like(x))


@_xlog1py.defjvp
def _xlog1py_jvp(primals: tuple[Array, Array], tangents: tuple[Array, Array]) -> tuple[Array, Array]:
    x, y = primals
    x_dot, y_dot = tangents
    out = _xlog1py(x, y)
    return out, fnp.astype(x_dot * lax.log1p(y) + y_dot * x / (1 + y), out.dtype)


def xlog1py(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log(1 + y)``, 0 where ``x`` is 0 (unless ``y`` is NaN), with JAX's
    derivative rule (defined at ``(0, -1)``)."""
    operand_aval("xlog1py", y, 1)
    xa, ya = promote_args_inexact("xlog1py", x, y)
    return _xlog1py(xa, ya)


@custom_jvp
def _xlogx(x: Array) -> Array:
    return _xlogy(x, x)


_xlogx.defjvps(lambda g, ans, x: g * (lax.log(x) + 1))


def entr(x: ArrayLike) -> Array:
    """The entropy term: ``-x log(x)`` for ``x > 0``, 0 at 0, ``-inf`` below."""
    xa = _inexact("entr", x)
    negative = lax.lt(xa, convert(0, xa.dtype))
    return lax.select_n(negative, lax.neg(_xlogx(xa)), fnp.full_like(xa, -np.inf))


def rel_entr(p: ArrayLike, q: ArrayLike) -> Array:
    """The relative entropy term: ``p log(p / q)`` where both are positive, 0 where
    ``p`` is 0 and ``q >= 0``, ``inf`` elsewhere."""
    pa, qa = promote_args_inexact("rel_entr", p, q)
    zero = convert(0, pa.dtype, pa.weak_type)
    both_positive = lax.bitwise_and(lax.gt(pa, zero), lax.gt(qa, zero))
    p_zero = lax.bitwise_and(lax.eq(pa, zero), lax.ge(qa, zero))
    safe_p = fnp.where(both_positive, pa, 1)
    safe_q = fnp.where(both_positive, qa, 1)
    value = lax.sub(_xlogx(safe_p), _xlogy(*promote_args_inexact("rel_entr", safe_p, safe_q)))
    return fnp.where(both_positive, value, fnp.where(p_zero, zero, np.inf))


def kl_div(p: ArrayLike, q: ArrayLike) -> Array:
    """The Kullback-Leibler divergence term ``rel_entr(p, q) - p + q``."""
    pa, qa = promote_args_inexact("kl_div", p, q)
    out: Array = rel_entr(pa, qa) - pa + qa
    return out


def softmax(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """``exp(x) / sum(exp(x))`` over ``axis`` (all axes by default, as SciPy's)."""
    return _nn_softmax(x, axis=axis)


def log_softmax(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """``x - logsumexp(x)`` over ``axis`` (all axes by default, as SciPy's)."""
    return _nn_log_softmax(x, axis=axis)


def gammainc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized lower incomplete gamma function ``P(a, x) = gamma(a, x) / Gamma(a)``
    (``lax.igamma`` of the operands promoted to one inexact dtype)."""
    aa, xa = promote_args_inexact("gammainc", a, x)
    return lax.igamma(aa, xa)


def gammaincc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``
    (``lax.igammac`` of the operands promoted to one inexact dtype)."""
    aa, xa = promote_args_inexact("gammaincc", a, x)
    return lax.igammac(aa, xa)
