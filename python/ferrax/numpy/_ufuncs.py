"""Elementwise functions: arithmetic, math, comparisons, logic, ``where`` and ``clip``.

Each promotes its operands with JAX's rules (:mod:`ferrax.numpy._promotion`), broadcasts
them the NumPy way and applies ``lax`` primitives. Functions that only make sense for
floats (``sin``, ``true_divide``, ...) take integers and bools as float32. Where NumPy's
result is not a single primitive (``floor_divide``, ``remainder``, integer ``power``),
it is composed from primitives the way JAX composes it.
"""

from __future__ import annotations

import operator
from typing import Any

import ml_dtypes
import numpy as np

from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import Tracer, aval_of, user_location
from ferrax._jit import staged
from ferrax._staging import staged_float_unary
from ferrax.numpy._creation import full_like, zeros_like
from ferrax.numpy._promotion import (
    ArrayLike,
    as_array,
    broadcast_error,
    broadcast_operands,
    broadcast_to,
    convert,
    operand_aval,
    promote_args,
    promote_args_inexact,
    promote_dtypes,
)

__all__ = [
    "abs", "absolute", "add", "around", "bitwise_and", "bitwise_left_shift", "bitwise_not",
    "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "cos", "divide", "divmod",
    "equal", "exp", "expm1", "floor", "floor_divide", "greater", "greater_equal", "invert",
    "left_shift", "less", "less_equal", "log", "log1p", "logical_and", "logical_not",
    "logical_or", "logical_xor", "maximum", "minimum", "mod", "multiply", "negative",
    "not_equal", "positive", "pow", "power", "remainder", "right_shift", "rint", "round",
    "sign", "sin", "sqrt", "square", "subtract", "tan", "tanh", "true_divide", "trunc", "where",
    # the inverse and hyperbolic functions, cbrt, exp2, isfinite (issue 12)
    "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh",
    "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cosh", "exp2", "isfinite", "sinh",
    "nextafter",
]


def _dtype(x: Any) -> np.dtype[Any]:
    return aval_of(x).dtype


def _is_bool(x: Any) -> bool:
    return _dtype(x) == np.bool_


def _select(pred: Any, on_false: Any, on_true: Any) -> Array:
    """``select_n(pred, on_false, on_true)`` with the cases (and a non-scalar predicate)
    broadcast to one shape, as ``select_n`` needs."""
    on_false, on_true = promote_dtypes("where", on_false, on_true)
    avals = [aval_of(pred), aval_of(on_false), aval_of(on_true)]
    try:
        shape = tuple(np.broadcast_shapes(*(a.shape for a in avals)))
    except ValueError:
        types = ", ".join(a.str_short() for a in avals)
        raise broadcast_error(f"where: shapes of {types} do not broadcast together") from None
    # Broadcast in JAX's order: the predicate, the true case, the false case.
    if avals[0].shape not in ((), shape):
        pred = broadcast_to(pred, shape)
    if aval_of(on_true).shape != shape:
        on_true = broadcast_to(on_true, shape)
    if aval_of(on_false).shape != shape:
        on_false = broadcast_to(on_false, shape)
    return lax.select_n(pred, on_false, on_true)


def _bools_as_int(xs: list[Any]) -> list[Any]:
    """Promoted operands, made the default integer type if they are bools, as
    ``jax.numpy``'s numeric promotion does (``True // True`` is an int32 1)."""
    if not _is_bool(xs[0]):
        return xs
    default = dtypes.default_int()
    return [convert(v, default) for v in xs]


def _numeric_args(name: str, x: Any, y: Any) -> list[Any]:
    """The operands promoted (as :func:`promote_args`), bools made integers."""
    return _bools_as_int(promote_args(name, x, y))


def _no_bool(name: str, x: Any) -> None:
    if _is_bool(x):
        raise TypeError(f"{name} does not accept bool arrays, at {user_location()}")


# -------------------------------------------------------------------------- arithmetic


def add(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x + y`` (logical or for bools)."""
    a, b = promote_args("add", x, y)
    if _is_bool(a):
        return lax.bitwise_or(a, b)
    return lax.add(a, b)


def subtract(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x - y``."""
    a, b = promote_args("subtract", x, y)
    _no_bool("subtract", a)
    return lax.sub(a, b)


def multiply(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x * y`` (logical and for bools)."""
    a, b = promote_args("multiply", x, y)
    if _is_bool(a):
        return lax.bitwise_and(a, b)
    return lax.mul(a, b)


def true_divide(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x / y``; integers and bools divide as float32."""
    a, b = promote_args_inexact("true_divide", x, y)
    return lax.div(a, b)


def divide(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x / y``: :func:`true_divide`."""
    return true_divide(x, y)


@staged()
def floor_divide(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x // y``: the quotient rounded toward minus infinity, as NumPy.

    For floats it is NumPy's ``(x - x % y) / y`` rounded to the nearest integer, which is
    exact where ``floor(x / y)`` is not (``1.0 // 0.1`` is 9).
    """
    a, b = _numeric_args("floor_divide", x, y)
    dtype = _dtype(a)
    if dtype.kind == "u":
        return lax.div(a, b)
    if dtypes.is_int(dtype):
        q = lax.div(a, b)
        fix = lax.bitwise_and(lax.ne(lax.sign(a), lax.sign(b)), lax.ne(lax.rem(a, b), 0))
        return _where(fix, lax.sub(q, 1), q)
    mod = lax.rem(a, b)
    q = lax.div(_select(lax.eq(b, 0.0), lax.sub(a, mod), a), b)
    fix = lax.bitwise_and(lax.ne(mod, 0.0), lax.ne(lax.sign(b), lax.sign(mod)))
    q = _select(fix, q, lax.sub(q, 1.0))
    # q is within an ulp or so of an integer: rounded to it (as JAX, away from zero), so
    # the derivative is zero.
    return lax.round(q, lax.RoundingMethod.AWAY_FROM_ZERO)


@staged()
def remainder(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x % y``, with the sign of ``y`` (NumPy's); an integer ``x % 0`` is 0."""
    a, b = _numeric_args("remainder", x, y)
    dtype = _dtype(a)
    if dtypes.is_int(dtype):
        # lax.rem by 0 is x; NumPy's (and JAX's) integer remainder by 0 is 0. (A one of
        # b's own type: a weakly typed int8 b stays int8.)
        b = _where(lax.eq(b, 0), full_like(b, 1), b)
    r = lax.rem(a, b)
    if dtype.kind == "u":
        return r
    zero = 0.0 if dtypes.is_float(dtype) else 0
    nonzero = lax.ne(r, zero)
    fix = lax.bitwise_and(lax.ne(lax.lt(r, zero), lax.lt(b, zero)), nonzero)
    return _select(fix, r, lax.add(r, b))


def mod(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x % y``: :func:`remainder`."""
    return remainder(x, y)


@staged()
def divmod(x: ArrayLike, y: ArrayLike, /) -> tuple[Array, Array]:
    """``(x // y, x % y)``: :func:`floor_divide` and :func:`remainder`."""
    return floor_divide(x, y), remainder(x, y)


def _round_half_even(q: Array) -> Array:
    """``q`` (a float) rounded to the nearest integer, halves to the even one."""
    return lax.round(q, lax.RoundingMethod.TO_NEAREST_EVEN)


def floor(x: ArrayLike, /) -> Array:
    """The largest integer not above ``x``, in ``x``'s dtype (integers and bools are
    returned as they are)."""
    a = as_array(x, "floor")
    if not dtypes.is_float(a.dtype):
        return a
    return lax.floor(a)


def ceil(x: ArrayLike, /) -> Array:
    """The smallest integer not below ``x``, in ``x``'s dtype (integers and bools are
    returned as they are)."""
    a = as_array(x, "ceil")
    if not dtypes.is_float(a.dtype):
        return a
    return lax.ceil(a)


@staged()
def trunc(x: ArrayLike) -> Array:
    """``x`` rounded toward zero, in ``x``'s dtype (integers and bools are returned as
    they are)."""
    a = as_array(x, "trunc")
    if not dtypes.is_float(a.dtype):
        return a
    return _where(lax.lt(a, 0.0), lax.ceil(a), lax.floor(a))


def rint(x: ArrayLike, /) -> Array:
    """``x`` rounded to the nearest integer, halves to the even one; integers and bools
    become the default float dtype (strongly typed), as in JAX."""
    a = as_array(x, "rint")
    if not dtypes.is_float(a.dtype):
        return lax.convert_element_type(a, dtypes.default_float())
    return _round_half_even(a)


@staged(static_argnames=("decimals",))
def round(a: ArrayLike, decimals: int = 0, out: None = None) -> Array:
    """``a`` rounded to ``decimals`` decimals, halves to even (NumPy's and JAX's rule).

    Integers are returned as they are (``decimals`` must then be at least 0), bools
    refused (as JAX does);
    ``decimals != 0`` scales by ``10**decimals``, rounds and scales back (float16 in
    float32), as JAX does.
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to ferrax.numpy.round is not supported")
    x = as_array(a, "round")
    decimals = operator.index(decimals)
    dtype = x.dtype
    if dtype == np.bool_:
        raise TypeError(f"round does not accept bool arrays, at {user_location()}")
    if not dtypes.is_float(dtype):
        if decimals < 0:
            raise NotImplementedError(f"round of integers with decimals < 0, at {user_location()}")
        return x
    if decimals == 0:
        return _round_half_even(x)
    finfo: Any = ml_dtypes.finfo  # untyped in ml_dtypes
    if decimals > np.log10(float(finfo(dtype).max)):
        # Rounding past the type's precision changes nothing.
        return x
    wide = dtype == np.float16
    y = lax.convert_element_type(x, np.float32) if wide else x
    # The scale is a constant of y's dtype: strongly typed, so the result is too, except
    # for a weak 0-d operand (where JAX's constant keeps the weak type).
    factor = convert(10.0**decimals, y.dtype, x.weak_type and x.ndim == 0)
    out_ = lax.div(_round_half_even(lax.mul(y, factor)), factor)
    return lax.convert_element_type(out_, dtype) if wide else out_


def around(a: ArrayLike, decimals: int = 0, out: None = None) -> Array:
    """:func:`round` under NumPy's other name."""
    return round(a, decimals, out)


def power(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x ** y``, as ``jax.numpy`` computes it.

    A concrete integer exponent (a Python or NumPy int, or a known 0-d integer array) is
    ``integer_pow`` of ``x`` (bools made integers); an integer base (or bool, made the
    default integer) with an integer exponent array is computed by repeated squaring (6
    rounds, as JAX: exponents past 63 overflow any integer dtype anyway unless
    ``|x| <= 1``), ``x ** -n`` the truncated integer result (0, or ±1 for ``x`` = ±1); a
    float base with an integer exponent array is ``pow`` of the two as they are (the base's
    dtype, strongly typed unless both are weak); other operands are promoted, then ``pow``.
    """
    if not isinstance(y, Tracer):
        try:
            exponent = operator.index(y)  # type: ignore[arg-type]
        except TypeError:
            pass
        else:
            (a,) = _numeric_args("power", x, x)[:1]
            if exponent < 0 and not dtypes.is_float(_dtype(a)):
                raise TypeError(
                    f"power: integers cannot be raised to negative integer powers ({exponent}), "
                    f"at {user_location()}"
                )
            return lax.integer_pow(as_array(a, "power"), exponent)
    a, b = _numeric_args("power", x, y)
    if not dtypes.is_float(_dtype(a)):
        return _integer_power(a, b)
    xa, ya = operand_aval("power", x), operand_aval("power", y, 1)
    if dtypes.is_float(xa.dtype) and dtypes.is_int(ya.dtype):
        base, exponent_array = broadcast_operands("power", [as_array(x, "power"), as_array(y, "power", 1)], [xa, ya])
        return lax.pow(base, exponent_array)
    return lax.pow(a, b)


def _integer_power(x: Any, y: Any) -> Array:
    shape = tuple(np.broadcast_shapes(aval_of(x).shape, aval_of(y).shape))
    # The result is strongly typed, as JAX's (its accumulator starts as a strong array).
    x = convert(x, _dtype(x), False)
    base = x if aval_of(x).shape == shape else broadcast_to(x, shape)
    signed = _dtype(y).kind == "i"
    e = lax.abs(y) if signed else y
    one, zero = full_like(base, 1), zeros_like(base)
    # 0 ** e is 0 for e != 0, whatever bits of e the rounds below look at.
    acc = _select(lax.bitwise_and(lax.eq(base, 0), lax.ne(e, 0)), one, zero)
    for _ in range(6):
        acc = _select(lax.ne(lax.bitwise_and(e, 1), 0), acc, lax.mul(acc, base))
        base = lax.mul(base, base)
        e = lax.div(e, 2)
    if signed:
        # x ** -n truncates 1 / x**n: 0 unless |x| == 1, where it is x**n.
        keep = lax.bitwise_or(lax.ge(y, 0), lax.eq(lax.abs(x), 1))
        acc = _select(keep, zero, acc)
    return acc


def pow(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x ** y``: :func:`power`."""
    return power(x, y)


def negative(x: ArrayLike, /) -> Array:
    """``-x`` (unsigned integers wrap around)."""
    a = as_array(x, "negative")
    _no_bool("negative", a)
    return lax.neg(a)


def positive(x: ArrayLike, /) -> Array:
    """``+x``: ``x`` as an array."""
    return as_array(x, "positive")


def abs(x: ArrayLike, /) -> Array:
    """``|x|`` (unsigned integers and bools are returned as they are)."""
    a = as_array(x, "abs")
    if a.dtype.kind in "ub":
        return a
    return lax.abs(a)


def absolute(x: ArrayLike, /) -> Array:
    """``|x|``: :func:`abs`."""
    return abs(x)


def sign(x: ArrayLike, /) -> Array:
    """-1, 0 or 1 by the sign of ``x`` (NaN for NaN)."""
    a = as_array(x, "sign")
    _no_bool("sign", a)
    return lax.sign(a)


def square(x: ArrayLike, /) -> Array:
    """``x * x`` (bools as the default int, as JAX's numeric promotion)."""
    return lax.square(*_bools_as_int([as_array(x, "square")]))


def maximum(x: ArrayLike, y: ArrayLike, /) -> Array:
    """The elementwise maximum (NaN if either is NaN)."""
    return lax.max(*promote_args("maximum", x, y))


def minimum(x: ArrayLike, y: ArrayLike, /) -> Array:
    """The elementwise minimum (NaN if either is NaN)."""
    return lax.min(*promote_args("minimum", x, y))


# -------------------------------------------------------------------------------- math


def _inexact(name: str, x: Any) -> Any:
    if isinstance(x, Array) and dtypes.is_float(x.dtype):
        # One floating operand: promotion leaves it as it is.
        return x
    (a,) = promote_args_inexact(name, x)
    return a


@staged_float_unary(lax.exp_p)
def exp(x: ArrayLike, /) -> Array:
    """``e ** x``."""
    return lax.exp(_inexact("exp", x))


@staged_float_unary(lax.expm1_p)
def expm1(x: ArrayLike, /) -> Array:
    """``e ** x - 1``, accurate near 0."""
    return lax.expm1(_inexact("expm1", x))


@staged_float_unary(lax.log_p)
def log(x: ArrayLike, /) -> Array:
    """The natural logarithm."""
    return lax.log(_inexact("log", x))


@staged_float_unary(lax.log1p_p)
def log1p(x: ArrayLike, /) -> Array:
    """``log(1 + x)``, accurate near 0."""
    return lax.log1p(_inexact("log1p", x))


@staged_float_unary(lax.sin_p)
def sin(x: ArrayLike, /) -> Array:
    """Sine."""
    return lax.sin(_inexact("sin", x))


@staged_float_unary(lax.cos_p)
def cos(x: ArrayLike, /) -> Array:
    """Cosine."""
    return lax.cos(_inexact("cos", x))


@staged_float_unary(lax.tan_p)
def tan(x: ArrayLike, /) -> Array:
    """Tangent."""
    return lax.tan(_inexact("tan", x))


@staged_float_unary(lax.tanh_p)
def tanh(x: ArrayLike, /) -> Array:
    """Hyperbolic tangent."""
    return lax.tanh(_inexact("tanh", x))


@staged_float_unary(lax.sqrt_p)
def sqrt(x: ArrayLike, /) -> Array:
    """The square root (NaN for negative numbers)."""
    return lax.sqrt(_inexact("sqrt", x))


# The inverse and hyperbolic functions, cbrt, exp2 and isfinite, with NumPy 2's short
# names as aliases (as jax.numpy has them).


@staged_float_unary(lax.asin_p)
def arcsin(x: ArrayLike, /) -> Array:
    """Arc sine, in ``[-pi/2, pi/2]`` (NaN outside ``[-1, 1]``)."""
    return lax.asin(_inexact("arcsin", x))


@staged_float_unary(lax.acos_p)
def arccos(x: ArrayLike, /) -> Array:
    """Arc cosine, in ``[0, pi]`` (NaN outside ``[-1, 1]``)."""
    return lax.acos(_inexact("arccos", x))


@staged_float_unary(lax.atan_p)
def arctan(x: ArrayLike, /) -> Array:
    """Arc tangent, in ``(-pi/2, pi/2)``."""
    return lax.atan(_inexact("arctan", x))


def arctan2(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The angle of the point ``(x2, x1)``, in ``[-pi, pi]``, with the quadrant from the
    signs of both; integers and bools as float32."""
    a, b = promote_args_inexact("arctan2", x1, x2)
    return lax.atan2(a, b)


def nextafter(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The float next to ``x1`` towards ``x2`` (``lax.nextafter`` after promotion to a
    common float dtype; integers and bools as float32)."""
    a, b = promote_args_inexact("nextafter", x1, x2)
    return lax.nextafter(a, b)


@staged_float_unary(lax.sinh_p)
def sinh(x: ArrayLike, /) -> Array:
    """Hyperbolic sine."""
    return lax.sinh(_inexact("sinh", x))


@staged_float_unary(lax.cosh_p)
def cosh(x: ArrayLike, /) -> Array:
    """Hyperbolic cosine."""
    return lax.cosh(_inexact("cosh", x))


@staged_float_unary(lax.asinh_p)
def arcsinh(x: ArrayLike, /) -> Array:
    """Inverse hyperbolic sine."""
    return lax.asinh(_inexact("arcsinh", x))


@staged_float_unary(lax.acosh_p)
def arccosh(x: ArrayLike, /) -> Array:
    """Inverse hyperbolic cosine (NaN below 1)."""
    return lax.acosh(_inexact("arccosh", x))


@staged_float_unary(lax.atanh_p)
def arctanh(x: ArrayLike, /) -> Array:
    """Inverse hyperbolic tangent (``+-inf`` at ``+-1``, NaN beyond)."""
    return lax.atanh(_inexact("arctanh", x))


@staged_float_unary(lax.cbrt_p)
def cbrt(x: ArrayLike, /) -> Array:
    """The real cube root."""
    return lax.cbrt(_inexact("cbrt", x))


@staged_float_unary(lax.exp2_p)
def exp2(x: ArrayLike, /) -> Array:
    """``2 ** x``."""
    return lax.exp2(_inexact("exp2", x))


def isfinite(x: ArrayLike, /) -> Array:
    """Whether each element is neither infinite nor NaN: ``True`` everywhere for
    integers and bools (as ``jax.numpy``: a constant, no primitive)."""
    aval = operand_aval("isfinite", x, 0)
    if dtypes.is_float(aval.dtype):
        return lax.is_finite(x)
    return full_like(x, True, dtype=np.bool_)


asin = arcsin
acos = arccos
atan = arctan
atan2 = arctan2
asinh = arcsinh
acosh = arccosh
atanh = arctanh


# ------------------------------------------------------------------------- comparisons


def equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x == y``."""
    return lax.eq(*promote_args("equal", x, y))


def not_equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x != y``."""
    return lax.ne(*promote_args("not_equal", x, y))


def less(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x < y``."""
    return lax.lt(*promote_args("less", x, y))


def less_equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x <= y``."""
    return lax.le(*promote_args("less_equal", x, y))


def greater(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x > y``."""
    return lax.gt(*promote_args("greater", x, y))


def greater_equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x >= y``."""
    return lax.ge(*promote_args("greater_equal", x, y))


# ------------------------------------------------------------------------------- logic


def _as_bool(name: str, x: Any, position: int = 0) -> Any:
    """A truth value: bools as they are, other values compared with 0."""
    if isinstance(x, bool):
        return x
    if operand_aval(name, x, position).dtype == np.bool_:
        return x
    return not_equal(x, 0)


def _truth_values(name: str, x: Any, y: Any) -> list[Any]:
    """Both operands as truth values, broadcast. They are bools already: promoting them
    would make weak bools (comparisons of Python scalars) strong, unlike JAX."""
    a, b = _as_bool(name, x), _as_bool(name, y, 1)
    avals = [operand_aval(name, a, 0), operand_aval(name, b, 1)]
    return broadcast_operands(name, [a, b], avals)


def logical_and(x: ArrayLike, y: ArrayLike, /) -> Array:
    """Elementwise ``x and y`` of the truth values (nonzero is true)."""
    return lax.bitwise_and(*_truth_values("logical_and", x, y))


def logical_or(x: ArrayLike, y: ArrayLike, /) -> Array:
    """Elementwise ``x or y`` of the truth values (nonzero is true)."""
    return lax.bitwise_or(*_truth_values("logical_or", x, y))


def logical_xor(x: ArrayLike, y: ArrayLike, /) -> Array:
    """Elementwise ``x != y`` of the truth values (nonzero is true)."""
    return lax.bitwise_xor(*_truth_values("logical_xor", x, y))


def logical_not(x: ArrayLike, /) -> Array:
    """Elementwise ``not x`` of the truth values (nonzero is true)."""
    return lax.bitwise_not(as_array(_as_bool("logical_not", x), "logical_not"))


def _integral(name: str, *args: Any) -> list[Any]:
    xs = promote_args(name, *args)
    if dtypes.is_float(_dtype(xs[0])):
        raise TypeError(f"{name} takes integers and bools, not {_dtype(xs[0])}, at {user_location()}")
    return xs


def bitwise_and(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x & y``: bitwise and of integers, logical and of bools."""
    return lax.bitwise_and(*_integral("bitwise_and", x, y))


def bitwise_or(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x | y``: bitwise or of integers, logical or of bools."""
    return lax.bitwise_or(*_integral("bitwise_or", x, y))


def bitwise_xor(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x ^ y``: bitwise xor of integers, logical xor of bools."""
    return lax.bitwise_xor(*_integral("bitwise_xor", x, y))


def _shift_operands(name: str, x: Any, y: Any) -> list[Any]:
    """Integer operands of one dtype, as jax.numpy shifts them: bools become the default
    integer; floats are refused."""
    return _bools_as_int(_integral(name, x, y))


def left_shift(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x << y`` for integers (bools shift as the default integer); a shift by the bit
    width or more, or by a negative amount, gives 0."""
    return lax.shift_left(*_shift_operands("left_shift", x, y))


def right_shift(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``x >> y``: arithmetic (sign-filling) for signed integers, logical for unsigned
    ones; a shift by the bit width or more, or by a negative amount, gives the sign
    fill (0 for non-negative values)."""
    a, b = _shift_operands("right_shift", x, y)
    if np.dtype(_dtype(a)).kind == "u":
        return lax.shift_right_logical(a, b)
    return lax.shift_right_arithmetic(a, b)


def bitwise_left_shift(x: ArrayLike, y: ArrayLike, /) -> Array:
    """:func:`left_shift` (NumPy 2's name)."""
    return left_shift(x, y)


def bitwise_right_shift(x: ArrayLike, y: ArrayLike, /) -> Array:
    """:func:`right_shift` (NumPy 2's name)."""
    return right_shift(x, y)


def bitwise_not(x: ArrayLike, /) -> Array:
    """``~x``: bitwise not of integers, logical not of bools."""
    (a,) = _integral("bitwise_not", x)
    return lax.bitwise_not(as_array(a, "bitwise_not"))


def invert(x: ArrayLike, /) -> Array:
    """``~x``: :func:`bitwise_not`."""
    return bitwise_not(x)


# --------------------------------------------------------------------------- selection


def where(condition: ArrayLike, x: ArrayLike | None = None, y: ArrayLike | None = None, /) -> Array:
    """``x`` where ``condition`` is true (nonzero), else ``y``: ``select_n(condition, y, x)``.

    All three broadcast together; ``x`` and ``y`` are promoted. The one-argument form
    (NumPy's ``nonzero``) has a data-dependent shape and is not supported.
    """
    if x is None or y is None:
        raise ValueError(
            "where needs both x and y: where(condition) alone (nonzero) has a shape that "
            f"depends on the data, at {user_location()}"
        )
    return _where(condition, x, y)


@staged()
def _where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Array:
    pred = _as_bool("where", condition)
    a, b = promote_dtypes("where", x, y)
    return _select(pred, b, a)


@staged()
def clip(a: ArrayLike, /, min: ArrayLike | None = None, max: ArrayLike | None = None) -> Array:
    """``a`` limited to ``[min, max]`` (either bound may be None): ``maximum(min, a)``,
    then ``minimum(max, ...)``; the bounds take part in dtype promotion."""
    out: Any = a
    if min is not None:
        out = maximum(min, out)
    if max is not None:
        out = minimum(max, out)
    return as_array(out, "clip")

