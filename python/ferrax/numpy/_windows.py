"""Window functions of ``jax.numpy`` (issue 12 item 3): ``bartlett``, ``blackman``,
``hamming``, ``hanning``, ``kaiser``, and the modified Bessel function ``i0`` that
``kaiser`` needs. Windows are in the default float dtype (float32, float64 under x64).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.lib._function_base_impl as _np_impl

import ferrax.numpy as fnp
from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import Tracer, user_location
from ferrax._custom_derivatives import custom_jvp
from ferrax.errors import ConcretizationError
from ferrax.numpy._promotion import ArrayLike, convert, promote_args_inexact

__all__ = ["bartlett", "blackman", "hamming", "hanning", "i0", "kaiser"]

# Cephes' Chebyshev coefficients of exp(-x) I0(x) on [0, 8] and of exp(-x) sqrt(x) I0(x)
# on (8, inf), as NumPy's np.i0 holds them.
_I0_SMALL: list[float] = [float(c) for c in _np_impl._i0A]  # type: ignore[attr-defined]
_I0_LARGE: list[float] = [float(c) for c in _np_impl._i0B]  # type: ignore[attr-defined]


def _chebyshev(x: Array, coefficients: list[float]) -> Array:
    """Clenshaw's recurrence for a Chebyshev series at ``x`` (Cephes' ``chbevl``)."""
    d = np.dtype(x.dtype)
    b0 = fnp.full_like(x, coefficients[0])
    b1 = fnp.zeros_like(x)
    b2 = b1
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = lax.add(lax.sub(lax.mul(x, b1), b2), convert(c, d))
    return lax.mul(convert(0.5, d), lax.sub(b0, b2))


def _i0e(x: Array) -> Array:
    """``exp(-|x|) I0(x)`` for ``x >= 0``."""
    d = np.dtype(x.dtype)
    small = _chebyshev(lax.sub(lax.mul(x, convert(0.5, d)), convert(2.0, d)), _I0_SMALL)
    safe = fnp.where(lax.gt(x, convert(8.0, d)), x, convert(8.0, d))
    large = lax.div(_chebyshev(lax.sub(lax.div(convert(32.0, d), safe), convert(2.0, d)), _I0_LARGE), lax.sqrt(safe))
    return fnp.where(lax.le(x, convert(8.0, d)), small, large)


def _i0_of_abs(x: Array) -> Array:
    ax = lax.abs(x)
    return lax.mul(lax.exp(ax), _i0e(ax))


@custom_jvp
def _i0(x: Array) -> Array:
    return _i0_of_abs(x)


@_i0.defjvp
def _i0_jvp(primals: tuple[Array], tangents: tuple[Array]) -> tuple[Array, Array]:
    from ferrax import jvp

    out, tangent = jvp(_i0_of_abs, primals, tangents)
    # I0 is even: its slope at 0 is 0 (|x| has none there).
    return out, fnp.where(lax.eq(primals[0], convert(0, np.dtype(primals[0].dtype))), fnp.zeros_like(tangent), tangent)


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of the first kind of order 0 (floats)."""
    (arr,) = promote_args_inexact("i0", x)
    if not dtypes.is_float(np.dtype(arr.dtype)):
        raise ValueError(f"Unsupported input type to jax.numpy.i0: {arr.dtype}, at {user_location()}")
    result: Array = _i0(arr)
    # The series' constants are strong; JAX's i0 of a weak value is weak.
    return convert(result, np.dtype(arr.dtype), bool(arr.weak_type))


def _length(M: Any, name: str) -> int:
    if isinstance(M, Tracer):
        raise ConcretizationError(
            f"Abstract tracer value encountered where concrete value is expected: the M argument of jnp.{name} "
            f"({M.aval.str_short()}) must be concrete, at {user_location()}"
        )
    return int(M)


def _window(M: Any, name: str) -> tuple[int, Array | None]:
    """The length and the float positions ``0..M-1`` (None when ``M <= 1``: all ones)."""
    n = _length(M, name)
    if n <= 1:
        return n, None
    return n, lax.iota(dtypes.default_float(), n)


def _ones(n: int) -> Array:
    return fnp.ones((max(n, 0),), dtypes.default_float())


def bartlett(M: int) -> Array:
    """The Bartlett (triangular) window of ``M`` points."""
    n, pos = _window(M, "bartlett")
    if pos is None:
        return _ones(n)
    return fnp.subtract(1, fnp.divide(fnp.abs(fnp.subtract(fnp.add(fnp.multiply(2, pos), 1), n)), n - 1))


def blackman(M: int) -> Array:
    """The Blackman window of ``M`` points."""
    n, pos = _window(M, "blackman")
    if pos is None:
        return _ones(n)
    first = fnp.multiply(0.5, fnp.cos(fnp.divide(fnp.multiply(2 * np.pi, pos), n - 1)))
    second = fnp.multiply(0.08, fnp.cos(fnp.divide(fnp.multiply(4 * np.pi, pos), n - 1)))
    return fnp.add(fnp.subtract(0.42, first), second)


def hamming(M: int) -> Array:
    """The Hamming window of ``M`` points."""
    n, pos = _window(M, "hamming")
    if pos is None:
        return _ones(n)
    return fnp.subtract(0.54, fnp.multiply(0.46, fnp.cos(fnp.divide(fnp.multiply(2 * np.pi, pos), n - 1))))


def hanning(M: int) -> Array:
    """The Hann window of ``M`` points."""
    n, pos = _window(M, "hanning")
    if pos is None:
        return _ones(n)
    return fnp.multiply(0.5, fnp.subtract(1, fnp.cos(fnp.divide(fnp.multiply(2 * np.pi, pos), n - 1))))


def kaiser(M: int, beta: ArrayLike) -> Array:
    """The Kaiser window of ``M`` points with shape parameter ``beta``."""
    n, pos = _window(M, "kaiser")
    if pos is None:
        return _ones(n)
    alpha = 0.5 * (n - 1)
    inside = fnp.sqrt(fnp.subtract(1, fnp.power(fnp.divide(fnp.subtract(pos, alpha), alpha), 2)))
    return fnp.divide(i0(fnp.multiply(beta, inside)), i0(beta))

