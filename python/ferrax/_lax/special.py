"""Special functions and the rest of the trigonometric family: ``erf_inv``, ``erf``,
``erfc``, ``lgamma``, ``digamma``, ``exp2``, ``cbrt``, ``asin``, ``acos``, ``atan``,
``sinh``, ``cosh``, ``asinh``, ``acosh``, ``atanh``, ``atan2`` and ``is_finite``.

Each is a built-in primitive with JAX's name (its shape rule, evaluator and lowering are
in Rust); here are its eager implementation (NumPy, or SciPy's special functions for the
five that NumPy lacks: SciPy comes with jaxlib), its derivative (JAX's formulas) and its
batching rule. Eagerly, the values at the edges are XLA's: ``erf_inv(+-1)`` is ``+-inf``,
``lgamma`` is ``+inf`` at the poles and at ``-inf``, ``digamma`` is NaN at zero, at the
negative integers and at ``-inf``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import ConcreteArray, aval_of
from ferrax._interpreters import ad
from ferrax._lax._operands import bind1, pair, quiet, scalar, scalar_as
from ferrax._lax.elementwise import (
    _elementwise_batch,
    _float_unary,
    _out_shaped,
    _primitive,
    _zero_rule,
    add,
    bitwise_and,
    convert_element_type,
    div,
    eq,
    exp,
    floor,
    integer_pow,
    le,
    lt,
    mul,
    neg,
    rsqrt,
    select_n,
    sin,
    square,
    sub,
)

__all__ = [
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cosh", "digamma",
    "erf", "erf_inv", "erfc", "exp2", "is_finite", "lgamma", "sinh",
]

NDArray = np.ndarray[Any, Any]


def _in_float64(fn: Callable[[NDArray], NDArray]) -> Callable[[NDArray], NDArray]:
    """``fn`` evaluated in float64 and rounded back to the operand's dtype (SciPy has no
    float16 or bfloat16 loops)."""

    def wrapped(x: NDArray) -> NDArray:
        out: NDArray = np.asarray(fn(np.asarray(x, np.float64))).astype(x.dtype)
        return out

    return wrapped


def _scipy_special() -> Any:
    # Imported on first use: SciPy takes a while to import, and only these need it (it has
    # no type stubs: the module is Any here).
    return importlib.import_module("scipy.special")


def _scipy(name: str) -> Callable[[NDArray], NDArray]:
    """SciPy's special function ``name``, looked up when first called."""

    def fn(x: NDArray) -> NDArray:
        out: NDArray = getattr(_scipy_special(), name)(x)
        return out

    return fn


def _lgamma(x: NDArray) -> NDArray:
    # XLA: +inf at -inf too (SciPy says -inf there).
    out: NDArray = np.where(x == -np.inf, np.inf, _scipy_special().gammaln(x))
    return out


def _digamma(x: NDArray) -> NDArray:
    # XLA: NaN at zero (SciPy says -inf or +inf by its sign), as at the other poles.
    out: NDArray = np.where(x == 0, np.nan, _scipy_special().psi(x))
    return out


def _exp2(x: NDArray) -> NDArray:
    # As XLA computes it (JAX lowers exp2 so): exp(ln 2 * x) in x's dtype, whose rounding
    # shows in float16 and bfloat16 (exp2(100) in bfloat16 is 9.26e29, not 2**100).
    out: NDArray = np.exp(np.asarray(math.log(2.0), x.dtype) * x)
    return out


# Registered as elementwise.py's float primitives are; JAX's exp2 and cbrt carry the
# `accuracy` parameter, the others do not.
erf_inv_p = _float_unary("erf_inv", _in_float64(_scipy("erfinv")), accuracy=False)
erf_p = _float_unary("erf", _in_float64(_scipy("erf")), accuracy=False)
erfc_p = _float_unary("erfc", _in_float64(_scipy("erfc")), accuracy=False)
lgamma_p = _float_unary("lgamma", _in_float64(_lgamma), accuracy=False)
digamma_p = _float_unary("digamma", _in_float64(_digamma), accuracy=False)
exp2_p = _float_unary("exp2", _exp2)
cbrt_p = _float_unary("cbrt", np.cbrt)
asin_p = _float_unary("asin", np.arcsin, accuracy=False)
acos_p = _float_unary("acos", np.arccos, accuracy=False)
atan_p = _float_unary("atan", np.arctan, accuracy=False)
sinh_p = _float_unary("sinh", np.sinh, accuracy=False)
cosh_p = _float_unary("cosh", np.cosh, accuracy=False)
asinh_p = _float_unary("asinh", np.arcsinh, accuracy=False)
acosh_p = _float_unary("acosh", np.arccosh, accuracy=False)
atanh_p = _float_unary("atanh", np.arctanh, accuracy=False)
atan2_p = _primitive("atan2", quiet(np.arctan2))
is_finite_p = _primitive("is_finite", np.isfinite)


# ---------------------------------------------------------------------------- functions


def erf_inv(x: Any) -> Array:
    """The inverse error function: ``erf_inv(erf(x)) = x``; ``+-inf`` at ``+-1`` and NaN
    outside ``[-1, 1]`` (floats only)."""
    return bind1(erf_inv_p, scalar(x))


def erf(x: Any) -> Array:
    """The error function ``2/sqrt(pi) * integral from 0 to x of exp(-t**2)``."""
    return bind1(erf_p, scalar(x))


def erfc(x: Any) -> Array:
    """The complementary error function ``1 - erf(x)``, accurate where it is tiny."""
    return bind1(erfc_p, scalar(x))


def lgamma(x: Any) -> Array:
    """``log |Gamma(x)|``; ``+inf`` at zero and the negative integers."""
    return bind1(lgamma_p, scalar(x))


def digamma(x: Any) -> Array:
    """The digamma function, the derivative of ``lgamma``; NaN at zero and the negative
    integers."""
    return bind1(digamma_p, scalar(x))


def exp2(x: Any) -> Array:
    """``2**x``."""
    return bind1(exp2_p, scalar(x))


def cbrt(x: Any) -> Array:
    """The real cube root (negative for negative ``x``)."""
    return bind1(cbrt_p, scalar(x))


def asin(x: Any) -> Array:
    """Arc sine, in ``[-pi/2, pi/2]``; NaN outside ``[-1, 1]``."""
    return bind1(asin_p, scalar(x))


def acos(x: Any) -> Array:
    """Arc cosine, in ``[0, pi]``; NaN outside ``[-1, 1]``."""
    return bind1(acos_p, scalar(x))


def atan(x: Any) -> Array:
    """Arc tangent, in ``(-pi/2, pi/2)``."""
    return bind1(atan_p, scalar(x))


def sinh(x: Any) -> Array:
    """Hyperbolic sine."""
    return bind1(sinh_p, scalar(x))


def cosh(x: Any) -> Array:
    """Hyperbolic cosine."""
    return bind1(cosh_p, scalar(x))


def asinh(x: Any) -> Array:
    """Inverse hyperbolic sine."""
    return bind1(asinh_p, scalar(x))


def acosh(x: Any) -> Array:
    """Inverse hyperbolic cosine; NaN below 1."""
    return bind1(acosh_p, scalar(x))


def atanh(x: Any) -> Array:
    """Inverse hyperbolic tangent; ``+-inf`` at ``+-1``, NaN beyond."""
    return bind1(atanh_p, scalar(x))


def atan2(x: Any, y: Any) -> Array:
    """The angle of the point ``(y, x)``: ``atan(x / y)`` in the quadrant the signs of
    ``x`` and ``y`` give, in ``[-pi, pi]`` (operands of one float dtype)."""
    return bind1(atan2_p, *pair(x, y))


def is_finite(x: Any) -> Array:
    """Whether ``x`` is neither infinite nor NaN (floats only; a bool array)."""
    return bind1(is_finite_p, scalar(x))


# ---------------------------------------------------------------------------- derivatives
# JAX's formulas (jax/_src/lax/lax.py and special.py).


def _const(value: float, like: Any) -> Any:
    return scalar_as(value, like)


def _trigamma(x: Any) -> Any:
    """``polygamma(1, x)``, the derivative of ``digamma``, from primitives ferrax has:
    the recurrence ``psi1(z) = 1/z**2 + psi1(z + 1)`` up to ``z + 6``, then the
    asymptotic series; below 1/2 the reflection ``psi1(x) + psi1(1 - x) =
    pi**2 / sin(pi x)**2``. Computed in float32 at least (as XLA's polygamma)."""
    dtype = x.dtype
    wide = dtype if dtype.itemsize >= 4 else np.dtype(np.float32)
    v = convert_element_type(x, wide)
    reflect = lt(v, _const(0.5, v))
    z = select_n(reflect, v, sub(_const(1.0, v), v))
    acc = integer_pow(z, -2)
    for k in range(1, 6):
        acc = add(acc, integer_pow(add(z, _const(float(k), z)), -2))
    w = add(z, _const(6.0, z))
    r = div(_const(1.0, w), w)
    r2 = square(r)
    # 1/w + 1/(2w^2) + 1/(6w^3) - 1/(30w^5) + 1/(42w^7) - 1/(30w^9)
    poly = sub(_const(1.0 / 42.0, r2), mul(r2, _const(1.0 / 30.0, r2)))
    poly = sub(_const(1.0 / 30.0, r2), mul(r2, poly))
    poly = add(_const(1.0 / 6.0, r2), mul(neg(r2), poly))
    series = add(r, mul(r2, add(_const(0.5, r), mul(r, poly))))
    psi1 = add(acc, series)
    s = sin(mul(_const(math.pi, v), v))
    reflected = sub(div(_const(math.pi**2, v), square(s)), psi1)
    out = select_n(reflect, psi1, reflected)
    # +inf at the poles, as JAX's polygamma (sin(pi x) is not exactly 0 there in floats).
    pole = bitwise_and(le(v, _const(0.0, v)), eq(v, floor(v)))
    out = select_n(pole, out, _full(out, math.inf))
    return convert_element_type(out, dtype)


def _full(like: Any, value: float) -> Any:
    """``value`` in an array of ``like``'s shape and dtype."""
    from ferrax._lax.structural import broadcast_in_dim

    aval = aval_of(like)
    scalar_value = ConcreteArray(np.full((), value, aval.dtype), False)
    return scalar_value if aval.shape == () else broadcast_in_dim(scalar_value, aval.shape, ())


ad.defjvp(erf_p, lambda g, ans, x: mul(_const(2.0 / math.sqrt(math.pi), x), mul(g, exp(neg(square(x))))))
ad.defjvp(erfc_p, lambda g, ans, x: mul(_const(-2.0 / math.sqrt(math.pi), x), mul(g, exp(neg(square(x))))))
ad.defjvp(erf_inv_p, lambda g, ans, x: mul(_const(math.sqrt(math.pi) / 2.0, x), mul(g, exp(square(ans)))))
ad.defjvp(lgamma_p, lambda g, ans, x: mul(g, digamma(x)))
ad.defjvp(digamma_p, lambda g, ans, x: mul(g, _trigamma(x)))
ad.defjvp(exp2_p, lambda g, ans, x, **_: mul(_const(math.log(2.0), x), mul(g, ans)))
ad.defjvp(cbrt_p, lambda g, ans, x, **_: mul(g, mul(_const(1.0 / 3.0, x), integer_pow(ans, -2))))
ad.defjvp(asin_p, lambda g, ans, x: mul(g, rsqrt(sub(_const(1.0, x), square(x)))))
ad.defjvp(acos_p, lambda g, ans, x: mul(g, neg(rsqrt(sub(_const(1.0, x), square(x))))))
ad.defjvp(atan_p, lambda g, ans, x: div(g, add(_const(1.0, x), square(x))))
ad.defjvp(sinh_p, lambda g, ans, x: mul(g, cosh(x)))
ad.defjvp(cosh_p, lambda g, ans, x: mul(g, sinh(x)))
ad.defjvp(asinh_p, lambda g, ans, x: mul(g, rsqrt(add(square(x), _const(1.0, x)))))
ad.defjvp(acosh_p, lambda g, ans, x: mul(g, rsqrt(sub(square(x), _const(1.0, x)))))
ad.defjvp(
    atanh_p,
    lambda g, ans, x: mul(div(_const(1.0, x), add(_const(1.0, x), x)), div(g, sub(_const(1.0, x), x))),
)
ad.defjvp(
    atan2_p,
    lambda g, ans, x, y: _out_shaped(mul(g, div(y, add(square(x), square(y)))), ans),
    lambda g, ans, x, y: _out_shaped(mul(g, div(neg(x), add(square(x), square(y)))), ans),
)
_zero_rule(is_finite_p)


# ---------------------------------------------------------------------------- batching


def _install_batching() -> None:
    from ferrax._interpreters import batching

    for p in (erf_inv_p, erf_p, erfc_p, lgamma_p, digamma_p, exp2_p, cbrt_p, asin_p, acos_p, atan_p,
              sinh_p, cosh_p, asinh_p, acosh_p, atanh_p, is_finite_p):
        batching.defvectorized(p)
    _elementwise_batch(atan2_p, True)


_install_batching()
