"""Elementwise primitives: unary math, binary arithmetic, comparisons, select, clamp,
conversion."""

from __future__ import annotations

from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import Primitive
from ferrax._lax._operands import canonical_dtype, pair, scalar

__all__ = [
    "abs", "add", "bitwise_and", "bitwise_not", "bitwise_or", "clamp", "convert_element_type",
    "cos", "div", "eq", "exp", "expm1", "ge", "gt", "integer_pow", "le", "log", "log1p",
    "logistic", "lt", "max", "min", "mul", "ne", "neg", "pow", "rem", "rsqrt", "select_n",
    "sign", "sin", "sqrt", "square", "sub", "tan", "tanh",
]


def _unary(name: str, impl: Any) -> Primitive:
    p = Primitive.builtin(name)
    p.def_impl(impl)
    return p


def _int_aware_sign(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.sign(x)


neg_p = _unary("neg", np.negative)
abs_p = _unary("abs", np.abs)
sign_p = _unary("sign", _int_aware_sign)
exp_p = _unary("exp", np.exp)
log_p = _unary("log", np.log)
log1p_p = _unary("log1p", np.log1p)
expm1_p = _unary("expm1", np.expm1)
sin_p = _unary("sin", np.sin)
cos_p = _unary("cos", np.cos)
tan_p = _unary("tan", np.tan)
tanh_p = _unary("tanh", np.tanh)
logistic_p = _unary("logistic", lambda x: 1 / (1 + np.exp(-x)))
sqrt_p = _unary("sqrt", np.sqrt)
rsqrt_p = _unary("rsqrt", lambda x: 1 / np.sqrt(x))
square_p = _unary("square", np.square)
not_p = _unary("not", lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x))

integer_pow_p = Primitive.builtin("integer_pow")


@integer_pow_p.def_impl
def _integer_pow_impl(x: np.ndarray[Any, Any], *, y: int) -> np.ndarray[Any, Any]:
    if y >= 0:
        return np.power(x, y)
    return 1 / np.power(x, -y)  # type: ignore[no-any-return]


def _int_div(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if x.dtype.kind in "iu":
        # Truncation toward zero, as lax.div (NumPy's // floors).
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.abs(x) // np.where(y == 0, 1, np.abs(y))
        return np.where(y == 0, -1, np.where((x < 0) != (y < 0), -q, q)).astype(x.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(x, y)  # type: ignore[no-any-return]


def _rem(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    with np.errstate(divide="ignore", invalid="ignore"):
        if x.dtype.kind in "iu":
            return np.where(y == 0, x, np.fmod(x, np.where(y == 0, 1, y)))
        return np.fmod(x, y)  # type: ignore[no-any-return]


def _pow(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.power(x, y.astype(x.dtype))  # type: ignore[no-any-return]


def _binary(name: str, impl: Any) -> Primitive:
    p = Primitive.builtin(name)
    p.def_impl(impl)
    return p


add_p = _binary("add", np.add)
sub_p = _binary("sub", np.subtract)
mul_p = _binary("mul", np.multiply)
div_p = _binary("div", _int_div)
rem_p = _binary("rem", _rem)
pow_p = _binary("pow", _pow)
max_p = _binary("max", np.maximum)
min_p = _binary("min", np.minimum)
and_p = _binary("and", lambda x, y: np.logical_and(x, y) if x.dtype == np.bool_ else np.bitwise_and(x, y))
or_p = _binary("or", lambda x, y: np.logical_or(x, y) if x.dtype == np.bool_ else np.bitwise_or(x, y))
eq_p = _binary("eq", np.equal)
ne_p = _binary("ne", np.not_equal)
lt_p = _binary("lt", np.less)
le_p = _binary("le", np.less_equal)
gt_p = _binary("gt", np.greater)
ge_p = _binary("ge", np.greater_equal)

select_n_p = Primitive.builtin("select_n")


@select_n_p.def_impl
def _select_n_impl(which: np.ndarray[Any, Any], *cases: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    index = np.clip(which.astype(np.int64), 0, len(cases) - 1)
    shape = np.broadcast_shapes(which.shape, *(c.shape for c in cases))
    return np.choose(np.broadcast_to(index, shape), [np.broadcast_to(c, shape) for c in cases])  # type: ignore[no-any-return]


clamp_p = Primitive.builtin("clamp")
clamp_p.def_impl(lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))

convert_element_type_p = Primitive.builtin("convert_element_type")


@convert_element_type_p.def_impl
def _convert_impl(x: np.ndarray[Any, Any], *, new_dtype: np.dtype[Any], weak_type: bool = False) -> np.ndarray[Any, Any]:
    if x.dtype.kind == "f" and np.dtype(new_dtype).kind in "iu":
        # Truncate toward zero and saturate, NaN to 0 (XLA's conversion).
        info = np.iinfo(new_dtype)
        with np.errstate(invalid="ignore"):
            clipped = np.clip(np.nan_to_num(np.trunc(x), nan=0.0), info.min, info.max)
        return clipped.astype(new_dtype)
    return x.astype(new_dtype)


# ---------------------------------------------------------------------------- functions


def neg(x: Any) -> Array:
    """``-x``."""
    return neg_p.bind(scalar(x))  # type: ignore[no-any-return]


def abs(x: Any) -> Array:
    """``|x|``."""
    return abs_p.bind(scalar(x))  # type: ignore[no-any-return]


def sign(x: Any) -> Array:
    """-1, 0 or 1 by the sign of ``x``."""
    return sign_p.bind(scalar(x))  # type: ignore[no-any-return]


def exp(x: Any) -> Array:
    """``e**x``."""
    return exp_p.bind(scalar(x))  # type: ignore[no-any-return]


def log(x: Any) -> Array:
    """Natural logarithm."""
    return log_p.bind(scalar(x))  # type: ignore[no-any-return]


def log1p(x: Any) -> Array:
    """``log(1 + x)``."""
    return log1p_p.bind(scalar(x))  # type: ignore[no-any-return]


def expm1(x: Any) -> Array:
    """``exp(x) - 1``."""
    return expm1_p.bind(scalar(x))  # type: ignore[no-any-return]


def sin(x: Any) -> Array:
    """Sine."""
    return sin_p.bind(scalar(x))  # type: ignore[no-any-return]


def cos(x: Any) -> Array:
    """Cosine."""
    return cos_p.bind(scalar(x))  # type: ignore[no-any-return]


def tan(x: Any) -> Array:
    """Tangent."""
    return tan_p.bind(scalar(x))  # type: ignore[no-any-return]


def tanh(x: Any) -> Array:
    """Hyperbolic tangent."""
    return tanh_p.bind(scalar(x))  # type: ignore[no-any-return]


def logistic(x: Any) -> Array:
    """``1 / (1 + exp(-x))``."""
    return logistic_p.bind(scalar(x))  # type: ignore[no-any-return]


def sqrt(x: Any) -> Array:
    """Square root."""
    return sqrt_p.bind(scalar(x))  # type: ignore[no-any-return]


def rsqrt(x: Any) -> Array:
    """``1 / sqrt(x)``."""
    return rsqrt_p.bind(scalar(x))  # type: ignore[no-any-return]


def square(x: Any) -> Array:
    """``x * x``."""
    return square_p.bind(scalar(x))  # type: ignore[no-any-return]


def bitwise_not(x: Any) -> Array:
    """Logical not of bools, bitwise not of integers."""
    return not_p.bind(scalar(x))  # type: ignore[no-any-return]


def integer_pow(x: Any, y: int) -> Array:
    """``x ** y`` for a Python integer ``y``."""
    return integer_pow_p.bind(scalar(x), y=int(y))  # type: ignore[no-any-return]


def add(x: Any, y: Any) -> Array:
    """``x + y`` (operands of one dtype; a Python scalar takes the other's)."""
    return add_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def sub(x: Any, y: Any) -> Array:
    """``x - y``."""
    return sub_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def mul(x: Any, y: Any) -> Array:
    """``x * y``."""
    return mul_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def div(x: Any, y: Any) -> Array:
    """``x / y``; integer division truncates toward zero."""
    return div_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def rem(x: Any, y: Any) -> Array:
    """Remainder with the sign of the dividend (C's ``%``)."""
    return rem_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def pow(x: Any, y: Any) -> Array:
    """``x ** y`` for float ``x``."""
    return pow_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def max(x: Any, y: Any) -> Array:
    """Elementwise maximum."""
    return max_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def min(x: Any, y: Any) -> Array:
    """Elementwise minimum."""
    return min_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def bitwise_and(x: Any, y: Any) -> Array:
    """Logical and of bools, bitwise and of integers."""
    return and_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def bitwise_or(x: Any, y: Any) -> Array:
    """Logical or of bools, bitwise or of integers."""
    return or_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def eq(x: Any, y: Any) -> Array:
    """``x == y``."""
    return eq_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def ne(x: Any, y: Any) -> Array:
    """``x != y``."""
    return ne_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def lt(x: Any, y: Any) -> Array:
    """``x < y``."""
    return lt_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def le(x: Any, y: Any) -> Array:
    """``x <= y``."""
    return le_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def gt(x: Any, y: Any) -> Array:
    """``x > y``."""
    return gt_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def ge(x: Any, y: Any) -> Array:
    """``x >= y``."""
    return ge_p.bind(*pair(x, y))  # type: ignore[no-any-return]


def select_n(which: Any, *cases: Any) -> Array:
    """``cases[which]`` elementwise (a bool ``which`` picks between two cases)."""
    return select_n_p.bind(scalar(which), *cases)  # type: ignore[no-any-return]


def clamp(min: Any, x: Any, max: Any) -> Array:
    """``x`` limited to ``[min, max]``."""
    lo, v = pair(min, x)
    hi, _ = pair(max, x)
    return clamp_p.bind(lo, v, hi)  # type: ignore[no-any-return]


def convert_element_type(operand: Any, new_dtype: Any, weak_type: bool = False) -> Array:
    """``operand`` converted to ``new_dtype``."""
    return convert_element_type_p.bind(  # type: ignore[no-any-return]
        scalar(operand), new_dtype=canonical_dtype(new_dtype), weak_type=bool(weak_type)
    )
