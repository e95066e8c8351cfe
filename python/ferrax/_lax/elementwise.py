"""Elementwise primitives: unary math, binary arithmetic, bitwise logic and shifts,
comparisons, select, clamp, conversion.

The eager rules follow XLA's semantics where NumPy's differ: integer division truncates
toward zero and gives -1 (all ones) for a zero divisor, ``rem`` by zero gives the
dividend, float-to-integer conversion truncates and saturates (NaN becomes 0), shift
amounts are read as unsigned and an amount of the bit width or more shifts every bit
out, and floating-point exceptions produce inf/NaN silently.
"""

from __future__ import annotations

import enum
import builtins
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax import dtypes
from ferrax._array import Array
from ferrax._core import Primitive, Tracer
from ferrax._interpreters import ad
from ferrax._lax._operands import bind1, canonical_dtype, is_array, pair, quiet, scalar, scalar_as

__all__ = [
    "RoundingMethod", "abs", "add", "bitwise_and", "bitwise_not", "bitwise_or",
    "bitwise_xor", "ceil", "clamp", "convert_element_type", "cos", "div", "eq", "exp",
    "expm1", "floor", "ge", "gt", "integer_pow", "le", "log", "log1p", "logistic", "lt",
    "max", "min", "mul", "ne", "neg", "pow", "rem", "round", "rsqrt", "select_n",
    "shift_left", "shift_right_arithmetic", "shift_right_logical", "sign", "sin", "sqrt",
    "square", "sub", "tan", "tanh",
    "mulhi",
]

NDArray = np.ndarray[Any, Any]


def _primitive(name: str, impl: Callable[..., Any]) -> Primitive:
    p = Primitive.builtin(name)
    p.def_impl(impl)
    return p


def _float_unary(name: str, fn: Callable[[NDArray], NDArray], *, accuracy: bool = True) -> Primitive:
    """The primitive ``name`` of one float operand, evaluated eagerly by the NumPy (or
    SciPy) function ``fn`` with NumPy's floating-point warnings off. With ``accuracy`` it
    takes the ``accuracy`` parameter (None by default) that JAX's transcendental
    primitives carry (exp, sin, cbrt, ...; not asin, erf, ...)."""
    if not accuracy:
        return _primitive(name, quiet(fn))

    @quiet
    def impl(x: NDArray, *, accuracy: None = None) -> NDArray:
        return fn(x)

    return _primitive(name, impl)


def _logistic(x: NDArray) -> NDArray:
    return 1 / (1 + np.exp(-x))


def _rsqrt(x: NDArray) -> NDArray:
    return 1 / np.sqrt(x)


def _not(x: NDArray) -> NDArray:
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


neg_p = _primitive("neg", quiet(np.negative))
abs_p = _primitive("abs", np.abs)
sign_p = _primitive("sign", np.sign)
square_p = _primitive("square", quiet(np.square))
not_p = _primitive("not", _not)
exp_p = _float_unary("exp", np.exp)
log_p = _float_unary("log", np.log)
log1p_p = _float_unary("log1p", np.log1p)
expm1_p = _float_unary("expm1", np.expm1)
sin_p = _float_unary("sin", np.sin)
cos_p = _float_unary("cos", np.cos)
tan_p = _float_unary("tan", np.tan)
tanh_p = _float_unary("tanh", np.tanh)
logistic_p = _float_unary("logistic", _logistic)
sqrt_p = _float_unary("sqrt", np.sqrt)
rsqrt_p = _float_unary("rsqrt", _rsqrt)
floor_p = _primitive("floor", np.floor)
ceil_p = _primitive("ceil", np.ceil)


class RoundingMethod(enum.IntEnum):
    """How :func:`round` breaks ties (values half-way between two integers)."""

    AWAY_FROM_ZERO = 0
    """Half-way values go away from zero (0.5 -> 1, -0.5 -> -1)."""

    TO_NEAREST_EVEN = 1
    """Half-way values go to the even neighbour (0.5 -> 0, 1.5 -> 2)."""


@quiet
def _round(x: NDArray, *, rounding_method: int) -> NDArray:
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return np.rint(x)
    # Away from zero: |x| - floor(|x|) is exact, so the tie test is too (|x| + 0.5 would
    # round up the largest float below 0.5).
    a = np.abs(x)
    r = np.floor(a)
    r = np.where(a - r >= 0.5, r + 1, r)
    return np.copysign(r, x).astype(x.dtype)


round_p = _primitive("round", _round)


@quiet
def _integer_pow(x: NDArray, *, y: int) -> NDArray:
    # Square-and-multiply, the products XLA runs for JAX's lowering (np.power rounds
    # once, so float results differed from jit's and JAX's in the last place).
    n = abs(y)
    acc = np.ones_like(x)
    base = x
    first = True
    while n:
        if n & 1:
            acc = base if first else acc * base
            first = False
        n >>= 1
        if n:
            base = base * base
    out = np.asarray(acc, dtype=x.dtype)
    return out if y >= 0 else np.asarray(1 / out, dtype=x.dtype)


integer_pow_p = _primitive("integer_pow", _integer_pow)


def _safe_divisor(x: NDArray, y: NDArray) -> tuple[NDArray, NDArray]:
    """A divisor with 1 where XLA defines the result specially (division by zero, and the
    overflowing ``INT_MIN / -1``), and the mask of zero divisors."""
    zero = y == 0
    special = zero
    if x.dtype.kind == "i":
        special = zero | ((x == np.iinfo(x.dtype).min) & (y == -1))
    return np.where(special, y.dtype.type(1), y), zero


@quiet
def _div(x: NDArray, y: NDArray) -> NDArray:
    if x.dtype.kind not in "iu":
        return np.true_divide(x, y)
    safe, zero = _safe_divisor(x, y)
    q = np.floor_divide(x, safe)
    # NumPy floors; XLA truncates toward zero.
    if x.dtype.kind == "i":
        q = q + ((np.remainder(x, safe) != 0) & ((x < 0) != (safe < 0))).astype(x.dtype)
    # x / 0 is -1 for signed integers, all ones for unsigned ones.
    fill = -1 if x.dtype.kind == "i" else np.iinfo(x.dtype).max
    return np.where(zero, x.dtype.type(fill), q)


@quiet
def _rem(x: NDArray, y: NDArray) -> NDArray:
    if x.dtype.kind not in "iu":
        return np.fmod(x, y)
    safe, zero = _safe_divisor(x, y)
    # The sign of the dividend (C's %); x % 0 is x.
    return np.where(zero, x, np.fmod(x, safe))


@quiet
def _pow(x: NDArray, y: NDArray) -> NDArray:
    out: NDArray = np.power(x, y.astype(x.dtype))
    return out


def _and(x: NDArray, y: NDArray) -> NDArray:
    return np.logical_and(x, y) if x.dtype == np.bool_ else np.bitwise_and(x, y)


def _or(x: NDArray, y: NDArray) -> NDArray:
    return np.logical_or(x, y) if x.dtype == np.bool_ else np.bitwise_or(x, y)


def _xor(x: NDArray, y: NDArray) -> NDArray:
    return np.logical_xor(x, y) if x.dtype == np.bool_ else np.bitwise_xor(x, y)


def _shift_operands(x: NDArray, y: NDArray) -> tuple[NDArray, NDArray, NDArray]:
    """``x``'s bits as unsigned, the amount as unsigned (XLA reads it so: a negative
    amount is a huge one), clamped below the width, and the mask of amounts of the
    width or more."""
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    bits = x.dtype.itemsize * 8
    ux = np.asarray(x).view(unsigned)
    amount = np.asarray(y).view(unsigned)
    out = amount >= bits
    return ux, np.where(out, unsigned.type(bits - 1), amount).astype(unsigned), out


def _shift_left(x: NDArray, y: NDArray) -> NDArray:
    ux, n, out = _shift_operands(x, y)
    shifted = np.left_shift(ux, n).astype(ux.dtype)
    return np.where(out, ux.dtype.type(0), shifted).view(x.dtype)


def _shift_right_logical(x: NDArray, y: NDArray) -> NDArray:
    ux, n, out = _shift_operands(x, y)
    return np.where(out, ux.dtype.type(0), np.right_shift(ux, n)).view(x.dtype)


def _shift_right_arithmetic(x: NDArray, y: NDArray) -> NDArray:
    # The sign is the top bit, for unsigned types too: shift the signed view.
    ux, n, _ = _shift_operands(x, y)
    signed = np.dtype(f"i{x.dtype.itemsize}")
    shifted: NDArray = np.right_shift(ux.view(signed), n.view(signed))
    return shifted.view(x.dtype)


def _mulhi(x: NDArray, y: NDArray) -> NDArray:
    # The high half of the double-width product (signed for signed dtypes), computed
    # exactly with Python integers.
    bits = 8 * x.dtype.itemsize
    wide = np.asarray(x.astype(object) * y.astype(object), dtype=object)
    hi = np.asarray(wide >> bits, dtype=object)
    if x.dtype.kind == "u":
        return np.asarray(hi, dtype=np.uint64).astype(x.dtype)
    return np.asarray(hi, dtype=np.int64).astype(x.dtype)


add_p = _primitive("add", quiet(np.add))
# JAX's add_jaxvals_p: sums two cotangents of one type (no broadcasting, no promotion).
add_any_p = _primitive("add_any", quiet(np.add))
sub_p = _primitive("sub", quiet(np.subtract))
mul_p = _primitive("mul", quiet(np.multiply))
div_p = _primitive("div", _div)
rem_p = _primitive("rem", _rem)
pow_p = _primitive("pow", _pow)
max_p = _primitive("max", quiet(np.maximum))
min_p = _primitive("min", quiet(np.minimum))
and_p = _primitive("and", _and)
or_p = _primitive("or", _or)
xor_p = _primitive("xor", _xor)
shift_left_p = _primitive("shift_left", _shift_left)
shift_right_logical_p = _primitive("shift_right_logical", _shift_right_logical)
shift_right_arithmetic_p = _primitive("shift_right_arithmetic", _shift_right_arithmetic)
mulhi_p = _primitive("mulhi", _mulhi)
eq_p = _primitive("eq", quiet(np.equal))
ne_p = _primitive("ne", quiet(np.not_equal))
lt_p = _primitive("lt", quiet(np.less))
le_p = _primitive("le", quiet(np.less_equal))
gt_p = _primitive("gt", quiet(np.greater))
ge_p = _primitive("ge", quiet(np.greater_equal))


def _select_n(which: NDArray, *cases: NDArray) -> NDArray:
    if len(cases) == 1:
        return cases[0]
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0])
    # Out-of-range indices are undefined in XLA; clamp them, as its lowering does.
    return np.choose(np.clip(which, 0, len(cases) - 1), cases)


@quiet
def _clamp(lo: NDArray, x: NDArray, hi: NDArray) -> NDArray:
    return np.minimum(np.maximum(x, lo), hi)


select_n_p = _primitive("select_n", _select_n)
clamp_p = _primitive("clamp", _clamp)


def float_to_int(x: NDArray, dtype: np.dtype[Any]) -> NDArray:
    """XLA's conversion: truncation toward zero, saturating at the integer range, NaN to 0."""
    info = np.iinfo(dtype)
    t = np.trunc(x.astype(np.float64))
    # The bounds, 2**bits or 2**(bits - 1) and its negation, are exact in float64.
    high = t >= float(info.max) + 1.0
    low = t < float(info.min)
    inside = np.where(np.isnan(t) | high | low, 0.0, t).astype(dtype)
    return np.where(high, dtype.type(info.max), np.where(low, dtype.type(info.min), inside))


@quiet
def _convert(x: NDArray, *, new_dtype: np.dtype[Any], weak_type: bool = False, sharding: None = None) -> NDArray:
    new = np.dtype(new_dtype)
    if x.dtype == new:
        return x
    if dtypes.is_float(x.dtype) and dtypes.is_int(new):
        return float_to_int(x, new)
    return x.astype(new)


convert_element_type_p = _primitive("convert_element_type", _convert)


# ---------------------------------------------------------------------------- functions


def neg(x: Any) -> Array:
    """``-x`` (unsigned integers wrap)."""
    return bind1(neg_p, scalar(x))


def abs(x: Any) -> Array:
    """``|x|`` (signed integers and floats)."""
    return bind1(abs_p, scalar(x))


def sign(x: Any) -> Array:
    """-1, 0 or 1 by the sign of ``x`` (NaN stays NaN)."""
    return bind1(sign_p, scalar(x))


def exp(x: Any) -> Array:
    """``e**x``."""
    return bind1(exp_p, scalar(x))


def log(x: Any) -> Array:
    """Natural logarithm."""
    return bind1(log_p, scalar(x))


def log1p(x: Any) -> Array:
    """``log(1 + x)``."""
    return bind1(log1p_p, scalar(x))


def expm1(x: Any) -> Array:
    """``exp(x) - 1``."""
    return bind1(expm1_p, scalar(x))


def sin(x: Any) -> Array:
    """Sine."""
    return bind1(sin_p, scalar(x))


def cos(x: Any) -> Array:
    """Cosine."""
    return bind1(cos_p, scalar(x))


def tan(x: Any) -> Array:
    """Tangent."""
    return bind1(tan_p, scalar(x))


def tanh(x: Any) -> Array:
    """Hyperbolic tangent."""
    return bind1(tanh_p, scalar(x))


def logistic(x: Any) -> Array:
    """``1 / (1 + exp(-x))``."""
    return bind1(logistic_p, scalar(x))


def sqrt(x: Any) -> Array:
    """Square root."""
    return bind1(sqrt_p, scalar(x))


def rsqrt(x: Any) -> Array:
    """``1 / sqrt(x)``."""
    return bind1(rsqrt_p, scalar(x))


def floor(x: Any) -> Array:
    """The largest integer not above ``x`` (floats only)."""
    return bind1(floor_p, scalar(x))


def ceil(x: Any) -> Array:
    """The smallest integer not below ``x`` (floats only)."""
    return bind1(ceil_p, scalar(x))


def round(x: Any, rounding_method: RoundingMethod | int = RoundingMethod.AWAY_FROM_ZERO) -> Array:
    """``x`` rounded to the nearest integer (floats only), half-way values away from zero
    or to the even neighbour as ``rounding_method`` says (a ``RoundingMethod`` or its
    value; another value is a ``ValueError``)."""
    return bind1(round_p, scalar(x), rounding_method=RoundingMethod(rounding_method))


def square(x: Any) -> Array:
    """``x * x``."""
    return bind1(square_p, scalar(x))


def bitwise_not(x: Any) -> Array:
    """Logical not of bools, bitwise not of integers."""
    return bind1(not_p, scalar(x))


def integer_pow(x: Any, y: int) -> Array:
    """``x ** y`` for a Python integer ``y`` (negative only for floats)."""
    return bind1(integer_pow_p, scalar(x), y=int(y))


def add(x: Any, y: Any) -> Array:
    """``x + y`` (operands of one dtype; a Python scalar takes the other's)."""
    return bind1(add_p, *pair(x, y))


def sub(x: Any, y: Any) -> Array:
    """``x - y``."""
    return bind1(sub_p, *pair(x, y))


def mul(x: Any, y: Any) -> Array:
    """``x * y``."""
    return bind1(mul_p, *pair(x, y))


def div(x: Any, y: Any) -> Array:
    """``x / y``; integer division truncates toward zero, and ``x / 0`` is -1
    (all ones for unsigned integers)."""
    return bind1(div_p, *pair(x, y))


def rem(x: Any, y: Any) -> Array:
    """Remainder with the sign of the dividend (C's ``%``, ``fmod``); ``x % 0`` is ``x``
    for integers."""
    return bind1(rem_p, *pair(x, y))


def max(x: Any, y: Any) -> Array:
    """Elementwise maximum (NaN if either is NaN)."""
    return bind1(max_p, *pair(x, y))


def min(x: Any, y: Any) -> Array:
    """Elementwise minimum (NaN if either is NaN)."""
    return bind1(min_p, *pair(x, y))


def bitwise_and(x: Any, y: Any) -> Array:
    """Logical and of bools, bitwise and of integers."""
    return bind1(and_p, *pair(x, y))


def bitwise_or(x: Any, y: Any) -> Array:
    """Logical or of bools, bitwise or of integers."""
    return bind1(or_p, *pair(x, y))


def bitwise_xor(x: Any, y: Any) -> Array:
    """Logical xor of bools, bitwise xor of integers."""
    return bind1(xor_p, *pair(x, y))


def shift_left(x: Any, y: Any) -> Array:
    """``x << y`` for integers; an amount ``y`` outside ``[0, bits)`` (read as unsigned,
    so negative ones too) gives 0."""
    return bind1(shift_left_p, *pair(x, y))


def shift_right_logical(x: Any, y: Any) -> Array:
    """``x >> y`` shifting in zeros; an amount ``y`` outside ``[0, bits)`` (read as
    unsigned) gives 0."""
    return bind1(shift_right_logical_p, *pair(x, y))


def shift_right_arithmetic(x: Any, y: Any) -> Array:
    """``x >> y`` shifting in copies of the top (sign) bit, for unsigned integers too; an
    amount ``y`` outside ``[0, bits)`` (read as unsigned) gives all sign bits."""
    return bind1(shift_right_arithmetic_p, *pair(x, y))


def mulhi(x: Any, y: Any) -> Array:
    """The high half of the double-width product ``x * y`` of two integers of one dtype
    (signed for signed dtypes): ``(x * y) >> bits`` computed without overflow."""
    return bind1(mulhi_p, *pair(x, y))


def eq(x: Any, y: Any) -> Array:
    """``x == y``."""
    return bind1(eq_p, *pair(x, y))


def ne(x: Any, y: Any) -> Array:
    """``x != y``."""
    return bind1(ne_p, *pair(x, y))


def lt(x: Any, y: Any) -> Array:
    """``x < y``."""
    return bind1(lt_p, *pair(x, y))


def le(x: Any, y: Any) -> Array:
    """``x <= y``."""
    return bind1(le_p, *pair(x, y))


def gt(x: Any, y: Any) -> Array:
    """``x > y``."""
    return bind1(gt_p, *pair(x, y))


def ge(x: Any, y: Any) -> Array:
    """``x >= y``."""
    return bind1(ge_p, *pair(x, y))


def pow(x: Any, y: Any) -> Array:
    """``x ** y`` for a float ``x`` and a float exponent of its dtype or an integer one
    (a Python int exponent stays an integer)."""
    if isinstance(y, int) and not isinstance(y, bool):
        return bind1(pow_p, scalar(x), scalar(y))
    return bind1(pow_p, *pair(x, y))


def _first_array(*xs: Any) -> Any:
    return next((x for x in xs if is_array(x)), None)


def select_n(which: Any, *cases: Any) -> Array:
    """``cases[which]`` elementwise: a bool ``which`` picks ``cases[1]`` where true, an
    int32 one indexes the cases. ``which`` is a scalar or has the cases' shape."""
    if not cases:
        raise TypeError("select_n needs at least one case")
    like = _first_array(*cases)
    return bind1(select_n_p, scalar(which), *[scalar_as(c, like) for c in cases])


def clamp(min: Any, x: Any, max: Any) -> Array:
    """``x`` limited to ``[min, max]`` (``min(max(x, min), max)``); ``min`` and ``max`` are
    scalars or have ``x``'s shape."""
    like = _first_array(x, min, max)
    return bind1(clamp_p, scalar_as(min, like), scalar_as(x, like), scalar_as(max, like))


def convert_element_type(operand: Any, new_dtype: Any, weak_type: bool = False) -> Array:
    """``operand`` converted to ``new_dtype``: float to integer truncates toward zero and
    saturates (NaN to 0), integers wrap, anything to bool is ``!= 0``. A ferrax array
    already of that dtype and weak type is returned as it is (no equation)."""
    dtype = canonical_dtype(new_dtype, "convert_element_type")
    x = scalar(operand)
    if isinstance(x, Array) and x.dtype == dtype and x.weak_type == bool(weak_type):
        return x
    return bind1(convert_element_type_p, x, new_dtype=dtype, weak_type=bool(weak_type))


# -------------------------------------------------------------------------- derivatives
# Forward-mode rules (``ferrax._interpreters.ad``), written with the functions above so
# that they differentiate again (higher orders) and stage like user code. A rule's
# tangent has the primal output's shape: an operand broadcast by the primitive (a
# scalar, or size-1 axes) has its tangent broadcast too.


def _out_shaped(t: Any, ans: Any) -> Any:
    """A tangent broadcast to the output's shape (operands broadcast implicitly)."""
    # (Shapes read from the avals of tracers: their properties cost calls.)
    shape = ans.aval.shape if isinstance(ans, Tracer) else ans.shape
    if (t.aval.shape if isinstance(t, Tracer) else t.shape) == shape:
        return t
    from ferrax._lax.structural import broadcast_in_dim

    dims: Sequence[int] = ()
    if t.ndim == len(shape):
        # Size-1 axes stretched: drop them, then broadcast.
        from ferrax._lax.structural import reshape

        keep = [i for i, n in enumerate(t.shape) if n == shape[i]]
        t = reshape(t, [t.shape[i] for i in keep])
        dims = keep
    return broadcast_in_dim(t, shape, tuple(dims))


def _filled(aval: Any, value: int) -> Any:
    """An array of ``aval``'s type (``x.aval`` or an array itself) holding ``value``."""
    from ferrax._core import ConcreteArray
    from ferrax._lax.structural import broadcast_in_dim

    scalar_value = ConcreteArray(np.full((), value, aval.dtype), aval.weak_type)
    return scalar_value if aval.shape == () else broadcast_in_dim(scalar_value, aval.shape, ())


def _zeros(aval: Any) -> Any:
    return _filled(aval, 0)


def _zero_rule(primitive: Primitive) -> None:
    """A primitive whose output has a zero derivative everywhere it has one."""

    def rule(primals: Any, tangents: Any, **params: Any) -> tuple[Any, Any]:
        ans = primitive.bind(*primals, **params)
        return ans, ad.Zero(ans.aval)

    primitive.def_jvp(rule)


def _one(x: Any) -> Any:
    return scalar_as(1, x)


# The rules' products and sums of a tangent ``t`` and a primal (always an array): bound
# at once when the tangent is an array too, as lax.mul/add bind them; a Python scalar
# tangent (from jvp's arguments) first takes the other operand's dtype, as lax does.


def _mul_t(t: Any, y: Any) -> Any:
    """``lax.mul(t, y)``."""
    return mul_p.bind(t, y) if isinstance(t, Array) else mul(t, y)


def _t_mul(x: Any, t: Any) -> Any:
    """``lax.mul(x, t)``."""
    return mul_p.bind(x, t) if isinstance(t, Array) else mul(x, t)


ad.register_tangent_ops(lambda a, b: bind1(add_any_p, a, b), _zeros)
ad.deflinear(add_any_p)

ad.deflinear(neg_p)
_zero_rule(sign_p)
ad.defjvp(abs_p, lambda g, ans, x: select_n(ge(x, scalar_as(0, x)), neg(g), g))
ad.defjvp(exp_p, lambda g, ans, x, **_: _mul_t(g, ans))
ad.defjvp(log_p, lambda g, ans, x, **_: div(g, x))
ad.defjvp(log1p_p, lambda g, ans, x, **_: div(g, add(x, _one(x))))
ad.defjvp(expm1_p, lambda g, ans, x, **_: mul(g, add(ans, _one(x))))
ad.defjvp(sin_p, lambda g, ans, x, **_: _mul_t(g, cos_p.bind(x)))
ad.defjvp(cos_p, lambda g, ans, x, **_: neg_p.bind(_mul_t(g, sin_p.bind(x))))
ad.defjvp(tan_p, lambda g, ans, x, **_: mul(g, add(_one(x), square(ans))))
ad.defjvp(tanh_p, lambda g, ans, x, **_: mul_p.bind(add(g, _mul_t(g, ans)), sub(_one(x), ans)))
ad.defjvp(logistic_p, lambda g, ans, x, **_: mul(g, mul(ans, sub(_one(x), ans))))
ad.defjvp(sqrt_p, lambda g, ans, x, **_: div(g, mul(scalar_as(2, x), ans)))
ad.defjvp(rsqrt_p, lambda g, ans, x, **_: mul(g, mul(scalar_as(-0.5, x), div(ans, x))))
ad.defjvp(square_p, lambda g, ans, x: mul(g, mul(scalar_as(2, x), x)))
_zero_rule(not_p)
_zero_rule(floor_p)
_zero_rule(ceil_p)
_zero_rule(round_p)


def _integer_pow_jvp(g: Any, ans: Any, x: Any, *, y: int) -> Any:
    if y == 0:
        return ad.Zero(ans.aval)
    # x**1 is x itself (as JAX stages it: no integer_pow[y=1]).
    jac = scalar_as(y, x) if y == 1 else mul(scalar_as(y, x), x if y == 2 else integer_pow(x, y - 1))
    return mul(g, jac)


ad.defjvp(integer_pow_p, _integer_pow_jvp)


def _add_jvp(primals: Any, tangents: Any, *, negate: bool = False) -> tuple[Any, Any]:
    x, y = primals
    tx, ty = tangents
    prim = sub_p if negate else add_p
    ans = prim.bind(x, y)
    if type(ty) is ad.Zero:
        return ans, _out_shaped(tx, ans)
    if type(tx) is ad.Zero:
        return ans, _out_shaped(neg(ty) if negate else ty, ans)
    return ans, prim.bind(tx, ty)


add_p.def_jvp(_add_jvp)
sub_p.def_jvp(lambda primals, tangents: _add_jvp(primals, tangents, negate=True))
ad.defjvp(mul_p, lambda g, ans, x, y: _out_shaped(_mul_t(g, y), ans), lambda g, ans, x, y: _out_shaped(_t_mul(x, g), ans))
ad.defjvp(
    div_p,
    lambda g, ans, x, y: _out_shaped(div(g, y), ans),
    lambda g, ans, x, y: _out_shaped(mul(mul(neg(g), x), integer_pow(y, -2)), ans),
)
# rem(x, y) = x - y * trunc(x / y): d/dy is -trunc(x / y) = (rem - x) / y.
ad.defjvp(
    rem_p,
    lambda g, ans, x, y: _out_shaped(g, ans),
    lambda g, ans, x, y: _out_shaped(mul(g, div(sub(ans, x), y)), ans),
)


def _pow_jvp_x(g: Any, ans: Any, x: Any, y: Any) -> Any:
    zero = scalar_as(0, y)
    if dtypes.is_int(y.dtype):
        ym1 = sub(y, scalar_as(1, y))
        jac = select_n(_out_shaped(eq(y, zero), ans), mul(convert_element_type(y, x.dtype), pow(x, ym1)), _zeros(ans.aval))
    else:
        jac = select_n(_out_shaped(eq(y, zero), ans), mul(y, pow(x, sub(y, _one(y)))), _zeros(ans.aval))
    return mul(_out_shaped(g, ans), jac)


def _pow_jvp_y(g: Any, ans: Any, x: Any, y: Any) -> Any:
    # log(x) * x**y, with log(1) where x is 0 (the derivative there is 0, not NaN).
    safe_x = select_n(eq(x, scalar_as(0, x)), x, _ones_like(x))
    return mul(_out_shaped(g, ans), mul(log(safe_x), ans))


def _ones_like(x: Any) -> Any:
    return _filled(x, 1)


ad.defjvp(pow_p, _pow_jvp_x, _pow_jvp_y)


def _balanced(x: Any, z: Any, y: Any) -> Any:
    """1 where ``x`` is the extremum ``z`` alone, 1/2 where ``y`` ties with it, else 0
    (the derivative of max/min at a tie is split evenly), computed as JAX's
    ``_balanced_eq``: ``(x == z ? 1 : 0) / (y == z ? 2 : 1)``."""
    is_x = eq(x, z)
    ones, zeros = _ones_like(z), _zeros(z.aval)
    chosen = select_n(is_x, zeros, ones)
    is_y = eq(y, z)
    twos, ones = _filled(z, 2), _ones_like(z)
    return div(chosen, select_n(is_y, ones, twos))


ad.defjvp(
    max_p,
    lambda g, ans, x, y: mul(_out_shaped(g, ans), _balanced(x, ans, y)),
    lambda g, ans, x, y: mul(_out_shaped(g, ans), _balanced(y, ans, x)),
)
ad.defjvp(
    min_p,
    lambda g, ans, x, y: mul(_out_shaped(g, ans), _balanced(x, ans, y)),
    lambda g, ans, x, y: mul(_out_shaped(g, ans), _balanced(y, ans, x)),
)
for _p in (and_p, or_p, xor_p, shift_left_p, shift_right_logical_p, shift_right_arithmetic_p,
           eq_p, ne_p, lt_p, le_p, gt_p, ge_p, mulhi_p):
    _zero_rule(_p)


def _select_n_jvp(primals: Any, tangents: Any) -> tuple[Any, Any]:
    which, *cases = primals
    ans = bind1(select_n_p, which, *cases)
    return ans, bind1(select_n_p, which, *[ad.instantiate(t) for t in tangents[1:]])


select_n_p.def_jvp(_select_n_jvp)


def _clamp_jvp(primals: Any, tangents: Any) -> tuple[Any, Any]:
    lo, x, hi = primals
    tlo, tx, thi = tangents
    ans: Any = bind1(clamp_p, lo, x, hi)
    # As JAX's rule: each part's predicate, its zeros, its select; then their sum.
    parts = []
    if type(tlo) is not ad.Zero:
        which = bitwise_and(gt(lo, x), lt(lo, hi))
        parts.append(select_n(which, _zeros(ans.aval), _out_shaped(tlo, ans)))
    if type(tx) is not ad.Zero:
        which = bitwise_and(gt(x, lo), lt(x, hi))
        parts.append(select_n(which, _zeros(ans.aval), tx))
    if type(thi) is not ad.Zero:
        which = lt(hi, x)
        parts.append(select_n(which, _zeros(ans.aval), _out_shaped(thi, ans)))
    out: Any = ad.Zero(ans.aval)
    for part in parts:
        out = ad.add_tangents(out, part)
    return ans, out


clamp_p.def_jvp(_clamp_jvp)


def _convert_jvp(g: Any, ans: Any, x: Any, *, new_dtype: Any, weak_type: bool = False, sharding: None = None) -> Any:
    if not ad.is_differentiable(np.dtype(new_dtype)):
        return ad.Zero(ans.aval)
    return bind1(convert_element_type_p, g, new_dtype=new_dtype, weak_type=weak_type)


ad.defjvp(convert_element_type_p, _convert_jvp)


# ------------------------------------------ operator fast paths (forward mode, vmap)
# ``x * 1.5`` and ``x + y`` on JVP or batch tracers, where ferrax.numpy would bind the
# primitive to the operands unchanged (float32 operands of one shape, or a Python scalar
# that becomes a weakly typed float32), skip its promotion and go straight to the trace.
# Anything else goes the general way (the Array operator, through ferrax.numpy).

_F32 = np.dtype(np.float32)
_F32_MAX = float(np.finfo(np.float32).max)


# (Python scalar, weak type) -> the float32 constant it becomes next to a float32 value
# of that weak type, and its symbolic zero tangent. Zero is not cached: 0.0 and -0.0 are
# equal keys.
_f32_constants: dict[tuple[float, bool], tuple[Any, ad.Zero]] = {}


def _f32_constant(value: float, weak: bool) -> tuple[Any, ad.Zero]:
    from ferrax._core import ConcreteArray

    # Weakly typed only next to a weakly typed value, as ferrax.numpy's promotion makes
    # it (a strong literal is then written as JAX writes it).
    const = ConcreteArray(np.asarray(value, _F32), weak)
    entry = (const, ad.Zero(const.aval))
    if value:
        if len(_f32_constants) >= 4096:
            _f32_constants.clear()
        _f32_constants[value, weak] = entry
    return entry


def _constant_tangent(primitive: Primitive, reflected: bool) -> Callable[[Any, Any], Any] | None:
    """The output tangent the JVP rule of ``x <op> c`` (``c <op> x`` if ``reflected``)
    gives for an array tangent ``t`` of ``x``, ``c`` a scalar constant of ``x``'s dtype (so
    the tangent has the output's shape): ``fn(t, c)``; None where the rule does more
    (``c / x``). tests/test_grad_fast_paths.py compares it with the rules."""
    if primitive is add_p or (primitive is sub_p and not reflected):
        return lambda t, c: t
    if primitive is sub_p:
        return lambda t, c: neg_p.bind(t)
    if primitive is mul_p:
        return (lambda t, c: mul_p.bind(c, t)) if reflected else (lambda t, c: mul_p.bind(t, c))
    if primitive is div_p and not reflected:
        return lambda t, c: div_p.bind(t, c)
    return None


def _fast_operator(
    tracer_type: type[Any], primitive: Primitive, reflected: bool, general: Callable[[Any, Any], Array]
) -> Callable[[Any, Any], Array]:
    from ferrax._core import _state

    from ferrax._staging import JaxprTracer

    jvp = tracer_type is ad.JVPTracer
    constant_tangent = _constant_tangent(primitive, reflected)
    staged_operator = getattr(JaxprTracer, general.__name__)
    # Two JVP tracers added or subtracted, both tangents nonzero: _add_jvp's result.
    tangents_combine = primitive is add_p or primitive is sub_p

    def operator(self: Any, other: Any) -> Array:
        trace = self._trace
        aval = self.aval
        dynamic = _state.dynamic
        dtype = aval.dtype
        if (dtype is _F32 or dtype == _F32) and not (dynamic and dynamic[-1].level > trace.main.level):
            t = type(other)
            operand: Any = None
            if t is float or (t is int and -(2**24) <= other <= 2**24):
                weak = aval.weak_type
                const, zero = _f32_constants.get((other, weak)) or _f32_constant(other, weak)
                if jvp:
                    tangent = self.tangent
                    zero_tangent = type(tangent) is ad.Zero
                    # (A Python scalar tangent is typed by lax, in the rule.)
                    if constant_tangent is not None and (zero_tangent or isinstance(tangent, Array)):
                        # What the trace and the rule give, at once. A primal of the
                        # innermost staging trace: its own operator stages the same
                        # equation with the literal it caches (float32, in range; a weak
                        # one not with x64, where it leaves the scalar to promotion).
                        primal = self.primal
                        if (
                            type(primal) is JaxprTracer
                            and primal._trace.main.innermost_dynamic
                            and -_F32_MAX <= other <= _F32_MAX
                            and not (weak and dtypes.x64_enabled())
                        ):
                            ans: Any = staged_operator(primal, other)
                        else:
                            ans = primitive.bind(const, primal) if reflected else primitive.bind(primal, const)
                        ans_aval = ans.aval
                        if zero_tangent:
                            return ad.JVPTracer(trace, ans, ad.Zero(ans_aval), ans_aval)
                        return ad.JVPTracer(trace, ans, constant_tangent(tangent, const), ans_aval)
                    # The constant's pair (const, zero) straight to the rule, as the
                    # trace would apply the primitive to it as a JVP tracer.
                    if reflected:
                        primals, tangents = [const, self.primal], [zero, tangent]
                    else:
                        primals, tangents = [self.primal, const], [tangent, zero]
                    result: Array = trace.apply(primitive, primals, tangents, not zero_tangent, {})[0]
                    return result
                operand = trace.pure(const)
            elif t is tracer_type and other._trace is trace:
                o = other.aval
                if o.dtype == _F32 and o.shape == aval.shape and o.weak_type == aval.weak_type:
                    if jvp:
                        # The two pairs straight to the rule (as process_primitive would).
                        t1, t2 = (other.tangent, self.tangent) if reflected else (self.tangent, other.tangent)
                        primals = [other.primal, self.primal] if reflected else [self.primal, other.primal]
                        if tangents_combine and type(t1) is not ad.Zero and type(t2) is not ad.Zero:
                            # What the trace and _add_jvp give, at once.
                            ans = primitive.bind(*primals)
                            return ad.JVPTracer(trace, ans, primitive.bind(t1, t2), ans.aval)
                        nonzero = type(t1) is not ad.Zero or type(t2) is not ad.Zero
                        pair_result: Array = trace.apply(primitive, primals, [t1, t2], nonzero, {})[0]
                        return pair_result
                    operand = other
            if operand is not None:
                args = [operand, self] if reflected else [self, operand]
                out: Array = trace.process_primitive(primitive, args, {})[0]
                return out
        return general(self, other)

    operator.__name__ = operator.__qualname__ = general.__name__
    operator.__doc__ = general.__doc__
    return operator


def _install_fast_operators() -> None:
    from ferrax._interpreters.batching import BatchTracer

    for tracer_type in (ad.JVPTracer, BatchTracer):
        for name, prim in (("add", add_p), ("sub", sub_p), ("mul", mul_p), ("truediv", div_p)):
            setattr(tracer_type, f"__{name}__", _fast_operator(tracer_type, prim, False, getattr(Array, f"__{name}__")))
            setattr(tracer_type, f"__r{name}__", _fast_operator(tracer_type, prim, True, getattr(Array, f"__r{name}__")))


_install_fast_operators()


# ---------------------------------------------------------------------------- batching
# Rules for ``vmap`` (``ferrax._interpreters.batching``): the batch axis goes first. An
# unbatched operand of rank 0 stays a scalar; others get a leading axis of size 1 where
# the primitive broadcasts size-1 axes (binary arithmetic, comparisons), or are broadcast
# to the full batch where it does not (select_n, clamp, add_any), except where the
# primitive takes a scalar in place of an array (``scalar_ok``: select_n's predicate,
# clamp's bounds).


def _elementwise_batch(primitive: Primitive, size_one: bool, scalar_ok: tuple[int, ...] = ()) -> None:
    from ferrax._interpreters import batching
    from ferrax._lax.structural import broadcast_in_dim

    def rule(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> tuple[Any, int]:
        # Fast path: every batched operand of one shape with its batch axis at one place,
        # the others scalars the primitive takes as they are: applied unchanged.
        at: int | None = None
        shape: Any = None
        for k, (v, d) in enumerate(zip(vals, dims)):
            if d is None:
                if (size_one or k in scalar_ok) and not v.shape:
                    continue
                break
            if at is None:
                at, shape = d, v.shape
            elif d != at or v.shape != shape:
                break
        else:
            assert at is not None
            return primitive.bind(*vals, **params), at
        if size_one:
            # JAX's broadcast_batcher: every non-scalar operand gets its batch axis in
            # front (a size-1 one inserted by broadcast_in_dim where unbatched), then
            # batched operands of lower rank get trailing size-1 axes (expand_dims, a
            # broadcast_in_dim); the primitive broadcasts the size-1 axes.
            fronted = [
                v if not v.shape else broadcast_in_dim(v, (1, *v.shape), tuple(np.arange(1, len(v.shape) + 1)))
                if d is None else batching.moveaxis(v, d, 0)
                for v, d in zip(vals, dims)
            ]
            nd = builtins.max(len(v.shape) for v in fronted)
            lifted = [
                v if d is None or len(v.shape) == nd
                else broadcast_in_dim(v, (*v.shape, *([1] * (nd - len(v.shape)))), tuple(range(len(v.shape))))
                for v, d in zip(fronted, dims)
            ]
            return primitive.bind(*lifted, **params), 0
        elem_shapes = [
            tuple(v.shape) if d is None else tuple(v.shape[:d] + v.shape[d + 1 :]) for v, d in zip(vals, dims)
        ]
        out_shape = builtins.max(elem_shapes, key=len)
        for s in elem_shapes:
            if len(s) == len(out_shape):
                out_shape = tuple(a if a != 1 else b for a, b in zip(out_shape, s))
        args = []
        # Operands broadcast in full (primitives that take no size-1 axes).
        for k, (v, d, s) in enumerate(zip(vals, dims, elem_shapes)):
            if d is None and s == () and k in scalar_ok:
                args.append(v)
                continue
            if d is None:
                args.append(broadcast_in_dim(v, (axis_size, *out_shape), tuple(range(1, len(s) + 1))))
                continue
            v = batching.moveaxis(v, d, 0)
            full = (axis_size, *out_shape)
            args.append(v if tuple(v.shape) == full else broadcast_in_dim(v, full, (0, *range(1 + len(out_shape) - len(s), 1 + len(out_shape)))))
        return primitive.bind(*args, **params), 0

    primitive.def_batch(rule)


def _install_batching() -> None:
    from ferrax._interpreters import batching

    for p in (floor_p, ceil_p, round_p, neg_p, abs_p, sign_p, square_p, not_p, exp_p, log_p, log1p_p, expm1_p, sin_p, cos_p, tan_p,
              tanh_p, logistic_p, sqrt_p, rsqrt_p, integer_pow_p, convert_element_type_p):
        batching.defvectorized(p)
    for p in (add_p, sub_p, mul_p, div_p, rem_p, pow_p, max_p, min_p, and_p, or_p, xor_p, shift_left_p,
              shift_right_logical_p, shift_right_arithmetic_p, eq_p, ne_p, lt_p, le_p, gt_p, ge_p,
              mulhi_p):
        _elementwise_batch(p, True)
    _elementwise_batch(select_n_p, False, (0,))
    _elementwise_batch(clamp_p, False, (0, 2))
    _elementwise_batch(add_any_p, False)


_install_batching()
