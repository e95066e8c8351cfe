"""Every ``ferrax.lax`` function, table-driven, against ``jax.lax`` and NumPy.

Each case applies one lax function (with its static arguments) to NumPy inputs, with
``ferrax.lax`` and with ``jax.lax`` (on CPU, both in x64 mode when 64-bit types are
involved, both in JAX's default mode otherwise):

* eagerly: the values, dtypes and weak types agree (floats to a tolerance per dtype),
  and where NumPy has the same operation, with NumPy too; or both refuse the dtypes;
* under ``make_jaxpr``: the jaxpr's text parses back and prints identically, it
  typechecks, its output types are JAX's, and its primitives and their parameters are
  the ones JAX records.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ferrax
from ferrax import TypeCheckError, lax
from ferrax._lax import convenience as lax_convenience
from ferrax._lax import convolution as lax_convolution
from ferrax.core import parse_jaxpr, typecheck

jax = pytest.importorskip("jax")

# JAX's results are computed at once for the whole table (jax_result): one worker runs
# the module (pytest-xdist's loadgroup), so they are computed once.
pytestmark = pytest.mark.xdist_group("lax-table")

BOOL = np.dtype(np.bool_)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U16, U32, U64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
F16, F32, F64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
BF16 = np.dtype(ml_dtypes.bfloat16)
SIGNED = [I8, I16, I32, I64]
UNSIGNED = [U8, U16, U32, U64]
INTS = SIGNED + UNSIGNED
FLOATS = [F16, BF16, F32, F64]
NUMERIC = INTS + FLOATS
ALL = [BOOL] + NUMERIC

# Relative tolerances for floats: XLA's and NumPy's math functions differ by a few ulps.
RTOL = {F16: 2e-3, BF16: 1.6e-2, F32: 2e-6, F64: 1e-13}

Call = Callable[..., Any]


@dataclass(frozen=True)
class Case:
    """``call(lax_module, *inputs)``, for ferrax.lax and jax.lax."""

    fn: str
    label: str
    call: Call
    inputs: tuple[Any, ...]
    # NumPy's version of the same computation, where it has one.
    numpy: Call | None = None
    # Extra relative tolerance (transcendental functions near their poles, ...).
    rtol: float = 1.0
    dtypes: tuple[np.dtype[Any], ...] = field(default=())

    @property
    def id(self) -> str:
        return f"{self.fn}-{self.label}"

    @property
    def x64(self) -> bool:
        kinds = [np.asarray(x).dtype for x in self.inputs] + list(self.dtypes)
        return any(d.itemsize == 8 for d in kinds)


# ------------------------------------------------------------------------ input data


def values(d: np.dtype[Any], role: int = 0) -> np.ndarray[Any, Any]:
    """Twelve values of dtype ``d`` with the interesting ones (extremes, zeros, -1,
    inf, NaN); ``role`` 1 is a second operand paired so that divisions meet 0 and -1."""
    if d == BOOL:
        return np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1][role:] + [1, 0][:role], bool)
    if d in FLOATS:
        first = [-2.5, 5.5, -5.5, 1.0, 0.0, np.inf, np.nan, 3.75, -0.0, 100.0, 2.0, -1.0]
        second = [2.0, 2.0, -2.0, 0.0, 0.0, 2.0, 1.0, np.inf, 1.0, 3.0, -0.5, 0.5]
        return np.array(second if role else first, np.float64).astype(d)
    info = np.iinfo(d)
    if d in SIGNED:
        first = [info.min, info.min, -7, -7, 7, 7, -1, 0, 5, info.max, info.max, 3]
        second = [-1, 2, 2, -2, -2, 0, 0, 0, 3, -1, 1, 7]
    else:
        first = [0, 1, 7, 200, info.max, info.max, 5, 3, 9, 100, 2, 250]
        second = [0, 3, 2, 3, 1, 0, 0, 5, 2, 7, 2, 200]
    return np.array(second if role else first, d)


def finite(d: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Twelve values whose sums are exact in every dtype (for reductions and dots)."""
    if d == BOOL:
        return values(d)
    if d in FLOATS:
        v = [-2.5, -1.0, -0.0, 0.5, 1.0, 2.0, 3.75, 0.25, 1.5, -3.0, 4.0, 0.125]
    elif d in SIGNED:
        v = [-2, -1, 0, 5, 1, 2, 3, 0, 1, -3, 4, 7]
    else:
        v = [2, 1, 0, 5, 1, 2, 3, 0, 1, 3, 4, 7]
    return np.array(v, np.float64).astype(d)


def grid(d: np.dtype[Any], shape: tuple[int, ...], nonfinite: bool = False) -> np.ndarray[Any, Any]:
    base = values(d) if nonfinite else finite(d)
    return np.resize(base, shape)


def short(d: np.dtype[Any]) -> str:
    return "bf16" if d == BF16 else d.str[1:].replace("b1", "bool")


# ------------------------------------------------------------------------ the table

CASES: list[Case] = []


def case(fn: str, label: str, call: Call, *inputs: Any, **kw: Any) -> None:
    CASES.append(Case(fn, label, call, tuple(inputs), **kw))


UNARY_NUMPY: dict[str, Call] = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "exp": np.exp, "log": np.log,
    "log1p": np.log1p, "expm1": np.expm1, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "logistic": lambda x: 1 / (1 + np.exp(-x)), "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "square": np.square,
    "bitwise_not": lambda x: ~x,
    "floor": np.floor, "ceil": np.ceil,
}
for fn, ref in UNARY_NUMPY.items():
    for d in ALL:
        case(fn, short(d), lambda L, x, fn=fn: getattr(L, fn)(x), values(d), numpy=ref)

# Special functions and the rest of the trigonometric family (issue 12): every dtype on
# the common values (inf, NaN, -0.0, and mostly outside the domains of the inverse
# functions), then the floats on points inside the domains and at their edges: the
# ends of erf_inv's (+-1: +-inf) and atanh's, the poles of lgamma (+inf) and digamma
# (NaN). Eagerly ferrax computes in float64 (NumPy and SciPy), XLA in float32 with its
# own approximations: a few ulps apart, more where lgamma is near its zeros at 1 and 2.
SPECIAL_NUMPY: dict[str, Call | None] = {
    "erf_inv": None, "erf": None, "erfc": None, "lgamma": None, "digamma": None,
    "exp2": np.exp2, "cbrt": np.cbrt, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "is_finite": np.isfinite,
}
SPECIAL_POINTS: dict[str, list[float]] = {
    "erf_inv": [-1.0, -0.999, -0.9, -0.5, -1e-3, 0.0, 0.1, 0.3, 0.75, 0.99, 0.9999, 1.0],
    "lgamma": [-3.0, -2.5, -1.0, -0.5, -0.0, 0.0, 1e-3, 0.5, 1.5, 3.0, 10.0, 1e4],
    "digamma": [-3.0, -2.5, -1.0, -0.5, -0.0, 0.0, 1e-3, 0.5, 1.5, 3.0, 10.0, 1e4],
    "asin": [-1.0, -0.9, -0.5, -0.1, 0.0, 0.2, 0.4, 0.6, 0.8, 0.95, 0.999, 1.0],
    "acos": [-1.0, -0.9, -0.5, -0.1, 0.0, 0.2, 0.4, 0.6, 0.8, 0.95, 0.999, 1.0],
    "atanh": [-1.0, -0.9, -0.5, -0.1, 0.0, 0.2, 0.4, 0.6, 0.8, 0.95, 0.999, 1.0],
    "acosh": [0.5, 1.0, 1.001, 1.1, 1.5, 2.0, 3.0, 10.0, 100.0, 1e4, 0.99, 1.25],
    "erf": [-4.0, -2.0, -1.0, -0.5, -1e-4, 0.0, 0.25, 0.75, 1.5, 3.0, 5.0, 10.0],
    "erfc": [-4.0, -2.0, -1.0, -0.5, -1e-4, 0.0, 0.25, 0.75, 1.5, 3.0, 5.0, 9.0],
}
# (One case per function and dtype, the points of both kinds in it: each case is an XLA
# computation in JAX's reference programs, and these expand to large ones.)
for special_name, special_ref in SPECIAL_NUMPY.items():
    for d in ALL:
        xs = values(d)
        if d in FLOATS and special_name in SPECIAL_POINTS:
            xs = np.concatenate([xs, np.array(SPECIAL_POINTS[special_name]).astype(d)])
        case(special_name, short(d), lambda L, x, n=special_name: getattr(L, n)(x), xs, numpy=special_ref, rtol=10.0)
for d in ALL:
    ys, xs = values(d), values(d, 1)
    if d in FLOATS:
        # Signed zeros and infinities in every quadrant.
        ys = np.concatenate([ys, np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.inf, -3.0]).astype(d)])
        xs = np.concatenate([xs, np.array([0.0, 0.0, -0.0, -0.0, -np.inf, np.inf, np.inf, -np.inf, 1.0, -3.0]).astype(d)])
    case("atan2", short(d), lambda L, x, y: L.atan2(x, y), ys, xs, numpy=np.arctan2)

# A sample of dtypes for the variations of a function's static arguments (every dtype
# is tested with one of them): each case JAX computes costs an XLA compilation.
SAMPLE = [BOOL, I8, U32, F32, BF16, F64]


def _round_away(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    a = np.abs(x)
    r = np.floor(a)
    out: np.ndarray[Any, Any] = np.copysign(np.where(a - r >= 0.5, r + 1, r), x).astype(x.dtype)
    return out


# round: both methods (and the default) on every dtype (floats only), on values and on
# their halves (ties).
for d in ALL:
    for label, method, ref in (("", None, _round_away), ("-afz", 0, _round_away), ("-even", 1, np.rint)):
        args = () if method is None else (method,)
        call = lambda L, x, args=args: L.round(x, *args)  # noqa: E731
        case("round", f"{short(d)}{label}", call, values(d), numpy=ref)
        if d in FLOATS:
            halves = (np.arange(-6, 6) + 0.5).astype(d)
            case("round", f"{short(d)}{label}-ties", call, halves, numpy=ref)

for y in (0, 1, 3, -2):
    for d in ALL if y in (3, -2) else SAMPLE:
        case(
            "integer_pow", f"{short(d)}-y{y}", lambda L, x, y=y: L.integer_pow(x, y), values(d),
            numpy=lambda x, y=y: x ** y if y >= 0 else 1 / x ** -y,
        )

BINARY_NUMPY: dict[str, Call | None] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": None, "rem": None,
    "max": np.maximum, "min": np.minimum, "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor, "shift_left": None,
    "shift_right_logical": None, "shift_right_arithmetic": None, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
    "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "pow": np.power,
}
for fn, binary_ref in BINARY_NUMPY.items():
    for d in ALL:
        case(fn, short(d), lambda L, x, y, fn=fn: getattr(L, fn)(x, y), values(d), values(d, 1), numpy=binary_ref)
for d in FLOATS:
    # C's fmod for floats, true division: NumPy agrees.
    case("rem", f"{short(d)}-fmod", lambda L, x, y: L.rem(x, y), values(d), values(d, 1), numpy=np.fmod)
    case("div", f"{short(d)}-true", lambda L, x, y: L.div(x, y), values(d), values(d, 1), numpy=np.true_divide)
    # Integer exponents of every integer dtype.
    for e in INTS:
        small = np.resize(np.array([2, 3, 0, 1, 1, 2, 5, 2, 0, 1, 3, 2] if e in UNSIGNED else [2, 3, 0, -1, 1, -2, 5, 2, 0, 1, 3, 2]), 12).astype(e)
        case("pow", f"{short(d)}^{short(e)}", lambda L, x, y: L.pow(x, y), values(d), small)

# Shifts by every amount from -1 to past the width, and the extremes: XLA reads the amount
# as unsigned, and an amount of the width or more shifts every bit out.
SHIFTS = ["shift_left", "shift_right_logical", "shift_right_arithmetic"]
# mulhi over each integer dtype's values paired with each other (extremes included).
for it in INTS:
    vs = values(it)
    case("mulhi", short(it), lambda L, x, y: L.mulhi(x, y), np.repeat(vs, len(vs)), np.tile(vs, len(vs)))
for it in INTS:
    bits = it.itemsize * 8
    info = np.iinfo(it.type)
    amounts = sorted({a for a in [*range(-1, bits + 2), 2 * bits, info.min, info.max] if info.min <= a <= info.max})
    xs = np.resize(values(it), len(amounts))
    for fn in SHIFTS:
        case(fn, f"{short(it)}-amounts", lambda L, x, y, fn=fn: getattr(L, fn)(x, y), xs, np.array(amounts, it))
        if it == I32:  # a Python int is an int32 for jax.lax (ferrax takes x's dtype)
            case(fn, f"{short(it)}-scalar-amount", lambda L, x, fn=fn: getattr(L, fn)(x, 3), values(it))

# select_n: a bool or int32 `which`, array or scalar, over cases of several dtypes.
for d in [F32, I8, BOOL, BF16, U64, F64]:
    a, b, c = grid(d, (2, 3)), np.flip(grid(d, (2, 3))), grid(d, (2, 3), nonfinite=True)
    pred = np.array([[True, False, True], [False, False, True]])
    which = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    case("select_n", f"{short(d)}-bool", lambda L, p, x, y: L.select_n(p, x, y), pred, a, b,
         numpy=lambda p, x, y: np.where(p, y, x))
    case("select_n", f"{short(d)}-int32", lambda L, w, x, y, z: L.select_n(w, x, y, z), which, a, b, c,
         numpy=lambda w, x, y, z: np.choose(w, [x, y, z]))
    case("select_n", f"{short(d)}-scalar", lambda L, p, x, y: L.select_n(p, x, y), np.bool_(True), a, b)
    case("select_n", f"{short(d)}-one", lambda L, w, x: L.select_n(w, x), np.int32(0), a)
    # One case is returned whatever `which` is (JAX: no error, no clamping needed).
    case("select_n", f"{short(d)}-one-true", lambda L, w, x: L.select_n(w, x), np.bool_(True), a)
    case("select_n", f"{short(d)}-one-bools", lambda L, w, x: L.select_n(w, x), pred, a)

# clamp: scalar or array bounds, NaN and out-of-order bounds.
for d in NUMERIC:
    x = values(d)
    lo, hi = np.array(1, d), np.array(7, d)
    case("clamp", f"{short(d)}-scalar", lambda L, lo, x, hi: L.clamp(lo, x, hi), lo, x, hi,
         numpy=lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))
    with np.errstate(invalid="ignore"):
        low, high = np.minimum(values(d, 1), x), np.maximum(values(d, 1), x)
    case("clamp", f"{short(d)}-array", lambda L, lo, x, hi: L.clamp(lo, x, hi), low, x, high)
    case("clamp", f"{short(d)}-crossed", lambda L, lo, x, hi: L.clamp(lo, x, hi), hi, x, lo)

# convert_element_type: every pair, from values with NaN, infinities, out-of-range
# magnitudes, fractions of both signs.
CONVERT_FLOATS = [np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, 255.5, -1.0, 7e4, 1e20, 0.5, -0.5, 1e-3]
for src in ALL:
    with np.errstate(over="ignore"):
        data = np.array(CONVERT_FLOATS).astype(src) if src in FLOATS else values(src)
    for dst in ALL:
        case(
            "convert_element_type", f"{short(src)}->{short(dst)}",
            lambda L, x, dst=dst: L.convert_element_type(x, dst), data, dtypes=(dst,),
        )

# Bits: the counts on every dtype (integers only: the others refused by both); bitcasts
# of the same width, narrower (a trailing axis) and wider (a last axis joined), bool
# refused but to itself. Float operands hold NaN and infinities.
for d in ALL:
    for fn in ("population_count", "clz"):
        case(fn, short(d), lambda L, x, fn=fn: getattr(L, fn)(x), values(d))
BITCASTS: list[tuple[np.dtype[Any], np.dtype[Any], tuple[int, ...]]] = [
    (F32, I32, (12,)), (I32, F32, (12,)), (F16, BF16, (12,)), (BOOL, BOOL, (12,)), (BOOL, U8, (12,)),
    (U8, BOOL, (12,)), (U32, U8, (12,)), (F64, F16, (12,)), (U8, U32, (3, 4)), (I16, F64, (3, 4)), (U8, U16, (3, 4)),
]
for src, dst, shape in BITCASTS:
    case(
        "bitcast_convert_type", f"{short(src)}->{short(dst)}{list(shape)}",
        lambda L, x, dst=dst: L.bitcast_convert_type(x, dst), values(src).reshape(shape), dtypes=(dst,),
    )

# Reductions over several axes, with NaN for max/min; the empty-extent identities.
REDUCTIONS: list[tuple[str, Call]] = [
    ("reduce_sum", np.sum), ("reduce_prod", np.prod), ("reduce_max", np.max), ("reduce_min", np.min)
]
for fn, ref in REDUCTIONS:
    for d in ALL:
        for axes in [(1,)] if d not in SAMPLE else [(0,), (1,), (0, 1), ()]:
            case(fn, f"{short(d)}-{axes}", lambda L, x, fn=fn, axes=axes: getattr(L, fn)(x, axes), grid(d, (3, 4)),
                 numpy=lambda x, ref=ref, axes=axes: ref(x, axis=axes))
        if fn in ("reduce_max", "reduce_min") and d in FLOATS:
            case(fn, f"{short(d)}-nan", lambda L, x, fn=fn: getattr(L, fn)(x, (1,)), grid(d, (3, 4), nonfinite=True),
                 numpy=lambda x, ref=ref: ref(x, axis=1))
        if d in SAMPLE:
            case(fn, f"{short(d)}-empty", lambda L, x, fn=fn: getattr(L, fn)(x, (0,)), np.zeros((0, 3), d))

# The logical reductions (issue 12): every dtype (floats refused by both), several axes
# on a sample, and the empty-extent identities (all ones, zero).
LOGICAL_REDUCTIONS: list[tuple[str, np.ufunc]] = [
    ("reduce_and", np.bitwise_and), ("reduce_or", np.bitwise_or), ("reduce_xor", np.bitwise_xor)
]
for fn, ufunc in LOGICAL_REDUCTIONS:
    for d in ALL:
        for axes in [(1,)] if d not in SAMPLE else [(0,), (1,), (0, 1), ()]:
            case(fn, f"{short(d)}-{axes}", lambda L, x, fn=fn, axes=axes: getattr(L, fn)(x, axes),
                 values(d).reshape(3, 4), numpy=lambda x, u=ufunc, axes=axes: u.reduce(x, axis=axes))
        if d in SAMPLE:
            case(fn, f"{short(d)}-empty", lambda L, x, fn=fn: getattr(L, fn)(x, (0,)), np.zeros((0, 3), d))

# nextafter (every dtype: floats only, in both) and reduce_precision (formats narrower
# and wider than the dtype's) on values with zeros, infinities and NaN; bit for bit, with
# subnormals, in test_logical_and_precision.py.
for d in ALL:
    case("nextafter", short(d), lambda L, x, y: L.nextafter(x, y), values(d), values(d, 1),
         numpy=np.nextafter if d in FLOATS else None)
    for fmt in [(5, 10)] if d not in SAMPLE else [(5, 10), (8, 7), (2, 1), (20, 60)]:
        case("reduce_precision", f"{short(d)}-{fmt}", lambda L, x, fmt=fmt: L.reduce_precision(x, *fmt), values(d))

# The incomplete gamma primitives (every dtype: floats only, in both): magnitudes of the
# usual values (both the series and the continued fraction) and the values themselves
# (negatives, infinities, NaN: JAX's edge values). Eager computes in float64, JAX in
# float32 for float32 and narrower: a few float32 ulps apart (bit for bit under jit in
# test_igamma.py).
for fn in ["igamma", "igammac", "igamma_grad_a"]:
    for d in ALL:
        a, x = values(d), values(d, 1)
        if d in FLOATS:
            a = np.concatenate([np.abs(a), a, np.array([0.5, 20.0, 0.1]).astype(d)])
            x = np.concatenate([np.abs(x), x, np.array([0.25, 18.0, 3.0]).astype(d)])
        case(fn, short(d), lambda L, a, x, fn=fn: getattr(L, fn)(a, x), a, x, rtol=100.0)

ARG_REDUCTIONS: list[tuple[str, Call]] = [("argmax", np.argmax), ("argmin", np.argmin)]
for fn, ref in ARG_REDUCTIONS:
    for d in ALL:
        for axis, index_dtype in [(1, I32)] if d not in SAMPLE else [(0, I32), (1, U8)]:
            case(fn, f"{short(d)}-axis{axis}-{short(index_dtype)}",
                 lambda L, x, fn=fn, axis=axis, i=index_dtype: getattr(L, fn)(x, axis, i),
                 grid(d, (3, 4), nonfinite=True), numpy=lambda x, ref=ref, axis=axis: ref(x, axis=axis))
        # Ties go to the first; NaN wins over everything.
        ties = np.array([1, 3, 3, 0, 3], d) if d != BOOL else np.array([0, 1, 1, 0, 1], bool)
        case(fn, f"{short(d)}-ties", lambda L, x, fn=fn: getattr(L, fn)(x, 0, np.int32), ties)

STRUCTURAL_DTYPES = [F32, BOOL, BF16, U64]
for d in STRUCTURAL_DTYPES:
    s = short(d)
    v3, m34 = grid(d, (3,)), grid(d, (3, 4))
    case("broadcast_in_dim", f"{s}-lead", lambda L, x: L.broadcast_in_dim(x, (2, 3), (1,)), v3,
         numpy=lambda x: np.broadcast_to(x, (2, 3)))
    case("broadcast_in_dim", f"{s}-trail", lambda L, x: L.broadcast_in_dim(x, (3, 2), (0,)), v3)
    case("broadcast_in_dim", f"{s}-scalar", lambda L, x: L.broadcast_in_dim(x, (2, 2), ()), v3[0])
    case("broadcast_in_dim", f"{s}-same", lambda L, x: L.broadcast_in_dim(x, (3, 4), (0, 1)), m34)
    case("reshape", f"{s}", lambda L, x: L.reshape(x, (4, 3)), m34, numpy=lambda x: x.reshape(4, 3))
    case("reshape", f"{s}-dims", lambda L, x: L.reshape(x, (2, 6), (1, 0)), m34, numpy=lambda x: x.T.reshape(2, 6))
    case("reshape", f"{s}-flat", lambda L, x: L.reshape(x, (12,)), m34)
    case("reshape", f"{s}-same", lambda L, x: L.reshape(x, (3, 4)), m34)
    case("transpose", f"{s}", lambda L, x: L.transpose(x, (2, 0, 1)), grid(d, (2, 3, 4)),
         numpy=lambda x: np.transpose(x, (2, 0, 1)))
    case("transpose", f"{s}-identity", lambda L, x: L.transpose(x, (0, 1)), m34)
    case("squeeze", f"{s}", lambda L, x: L.squeeze(x, (0, 2)), grid(d, (1, 3, 1)), numpy=lambda x: x.reshape(3))
    case("squeeze", f"{s}-negative", lambda L, x: L.squeeze(x, (-1,)), grid(d, (3, 1)))
    case("squeeze", f"{s}-none", lambda L, x: L.squeeze(x, ()), m34)
    case("expand_dims", f"{s}", lambda L, x: L.expand_dims(x, (0, 2)), m34, numpy=lambda x: x[None, :, None])
    case("expand_dims", f"{s}-negative", lambda L, x: L.expand_dims(x, (-1,)), v3)
    case("concatenate", f"{s}", lambda L, x, y: L.concatenate([x, y], 0), m34, grid(d, (1, 4)),
         numpy=lambda x, y: np.concatenate([x, y]))
    case("concatenate", f"{s}-axis1", lambda L, x: L.concatenate([x, x, x], 1), m34)
    case("concatenate", f"{s}-one", lambda L, x: L.concatenate([x], 0), m34)
    # (The pieces joined again in reverse order: one array to compare.)
    case("split", f"{s}", lambda L, x: L.concatenate(L.split(x, (1, 0, 3), 1)[::-1], 1), m34,
         numpy=lambda x: np.concatenate([x[:, 1:], x[:, 1:1], x[:, :1]], 1))
    case("split", f"{s}-negative-axis", lambda L, x: L.concatenate(L.split(x, (2, 1), -2)[::-1], 0), m34)
    case("stack", f"{s}", lambda L, x: L.stack([x, x], 1), m34, numpy=lambda x: np.stack([x, x], 1))
    case("stack", f"{s}-negative-axis", lambda L, x: L.stack([x, x, x], -1), m34)
    case("stack", f"{s}-scalars", lambda L, x, y: L.stack([x, y]), v3[0], v3[1])
    case("unstack", f"{s}", lambda L, x: L.stack(L.unstack(x, 1)[::-1], 0), m34,
         numpy=lambda x: np.stack([x[:, i] for i in range(x.shape[1])][::-1], 0))
    case("unstack", f"{s}-negative-axis", lambda L, x: L.unstack(x, -2)[1], m34)
    case("tile", f"{s}", lambda L, x: L.tile(x, (2, 3)), m34, numpy=lambda x: np.tile(x, (2, 3)))
    case("tile", f"{s}-zero", lambda L, x: L.tile(x, (0,)), v3)
    case("optimization_barrier", f"{s}", lambda L, x: L.optimization_barrier({"a": (x,)})["a"][0], m34,
         numpy=lambda x: x)
    case("slice", f"{s}", lambda L, x: L.slice(x, (0, 1), (3, 4)), m34, numpy=lambda x: x[0:3, 1:4])
    case("slice", f"{s}-strides", lambda L, x: L.slice(x, (0, 1), (3, 4), (2, 2)), m34, numpy=lambda x: x[0:3:2, 1:4:2])
    pv = v3[1]
    case("pad", f"{s}", lambda L, x, v: L.pad(x, v, ((1, 2, 0), (0, 1, 0))), m34, pv,
         numpy=lambda x, v: np.pad(x, ((1, 2), (0, 1)), constant_values=v))
    case("pad", f"{s}-interior-negative", lambda L, x, v: L.pad(x, v, ((1, -1, 1), (-2, 2, 2))), m34, pv)
    case("pad", f"{s}-crop", lambda L, x, v: L.pad(x, v, ((-1, -2, 0), (0, -4, 0))), m34, pv)
    case("pad", f"{s}-scalar", lambda L, x, v: L.pad(x, v, ()), pv, pv)
    # A Python int takes its own dtype: fine for int32 only, a dtype mismatch otherwise.
    case("pad", f"{s}-python-int", lambda L, x: L.pad(x, 0, ((0, 1, 1), (1, 0, 0))), m34)
    for starts in [(1, 2), (-1, 0), (5, -9), (2, 3)] if d == F32 else [(-1, 3)]:
        label = f"{s}-{starts}".replace(" ", "")
        case("dynamic_slice", label, lambda L, x, st=starts: L.dynamic_slice(x, st, (2, 2)), m34)
        case("dynamic_slice", f"{label}-traced", lambda L, x, i, j: L.dynamic_slice(x, (i, j), (2, 2)),
             m34, np.int32(starts[0]), np.int32(starts[1]))
        case("dynamic_update_slice", label, lambda L, x, u, st=starts: L.dynamic_update_slice(x, u, st), m34, grid(d, (2, 2), True))
        case("dynamic_update_slice", f"{label}-traced",
             lambda L, x, u, i, j: L.dynamic_update_slice(x, u, (i, j)), m34, grid(d, (2, 2), True), np.int32(starts[0]), np.int32(starts[1]))
    case("dynamic_slice", f"{s}-uint-index", lambda L, x, i: L.dynamic_slice(x, (i, np.uint8(1)), (1, 3)), m34, np.uint8(2))
    case("stop_gradient", s, lambda L, x: L.stop_gradient(x), m34, numpy=lambda x: x)

for d in ALL:
    case("iota", short(d), lambda L, d=d: L.iota(d, 5), dtypes=(d,), numpy=lambda d=d: np.arange(5).astype(d))
    case("broadcasted_iota", short(d), lambda L, d=d: L.broadcasted_iota(d, (2, 3), 1), dtypes=(d,))
    case("broadcasted_iota", f"{short(d)}-dim0", lambda L, d=d: L.broadcasted_iota(d, (4, 2), 0), dtypes=(d,))

MATMUL = (((1,), (0,)), ((), ()))
BATCHED = (((2,), (1,)), ((0,), (0,)))
for d in ALL:
    s = short(d)
    case("dot_general", f"{s}-matmul", lambda L, x, y: L.dot_general(x, y, MATMUL), grid(d, (2, 3)), grid(d, (3, 4)),
         numpy=None if d == BOOL else lambda x, y: (x.astype(np.float64) @ y.astype(np.float64)).astype(x.dtype))
    case("dot_general", f"{s}-batched", lambda L, x, y: L.dot_general(x, y, BATCHED), grid(d, (2, 2, 3)), grid(d, (2, 3, 4)))
    case("dot_general", f"{s}-vector", lambda L, x, y: L.dot_general(x, y, (((0,), (0,)), ((), ()))), finite(d), finite(d)[::-1].copy())
    case("dot_general", f"{s}-outer", lambda L, x, y: L.dot_general(x, y, (((), ()), ((), ()))), grid(d, (3,)), grid(d, (2,)))
for lhs, rhs in [(F32, I32), (I8, U8), (F16, BF16), (BOOL, I32), (F32, BOOL), (U32, I64), (I32, F64)]:
    case("dot_general", f"{short(lhs)}x{short(rhs)}", lambda L, x, y: L.dot_general(x, y, MATMUL),
         grid(lhs, (2, 3)), grid(rhs, (3, 4)))
for d, p in [(I8, I32), (F32, F16), (F32, F64), (BOOL, I32), (I32, I8), (F32, I32), (U8, I8), (BF16, F32)]:
    case("dot_general", f"{short(d)}-pref-{short(p)}",
         lambda L, x, y, p=p: L.dot_general(x, y, MATMUL, preferred_element_type=p), grid(d, (2, 3)), grid(d, (3, 4)), dtypes=(p,))


# Control flow takes functions, not arrays: tested in test_control_flow.py.
CONTROL_FLOW = {"cond", "switch", "while_loop", "fori_loop", "scan"}
# Gather, scatter and rev (and their parameter types): tested in test_gather_scatter.py.
SLICING = {
    "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather", "rev",
    "scatter", "scatter_add", "scatter_max", "scatter_min", "scatter_mul", "scatter_sub",
}


# Parameter types, not functions (round's method is tested with round).
PARAM_TYPES = {"RoundingMethod"}


# dynamic_slice along one axis (a dynamic_slice): tested in test_vmap_indexing.py.
IN_DIM = {"dynamic_index_in_dim", "dynamic_slice_in_dim"}


# Layouts over devices and collectives over named axes: tested on several devices in
# test_sharded_jit.py (with_sharding_constraint), test_collectives.py (under vmap's
# axis_name) and test_shard_map.py (under shard_map).
DEVICES = {
    "with_sharding_constraint", "all_gather", "all_to_all", "axis_index", "axis_size", "pcast",
    "pmax", "pmean", "pmin", "ppermute", "pshuffle", "psum", "psum_scatter", "pvary",
}


# Compositions of primitives (slice_in_dim, map, associative_scan, ...): tested in
# test_lax_convenience.py.
COMPOSITIONS = set(lax_convenience.__all__)
# Sorting and the cumulative reductions: tested in test_sorting.py.
SORTING = {"cumlogsumexp", "cummax", "cummin", "cumprod", "cumsum", "sort", "sort_key_val", "top_k"}
# Windowed reductions (pooling), their derivatives' primitives and padding helpers:
# tested in test_windowed.py.
# random_gamma_grad traces into JAX's while loops (no primitive): its jaxpr, values and
# errors are tested in test_igamma.py.
TRACED_LOOPS = {"random_gamma_grad"}
WINDOWED = {
    "padtype_to_pads", "reduce_window", "reduce_window_max_p", "reduce_window_min_p", "reduce_window_p",
    "reduce_window_shape_tuple", "reduce_window_sum_p", "select_and_gather_add_p", "select_and_scatter_add_p",
}
# Convolutions (conv_general_dilated, its wrappers and parameter helpers): tested in test_conv.py.
CONVOLUTION = set(lax_convolution.__all__)
# The linear-algebra namespace (lax.linalg): tested in test_linalg.py.
LINALG = {"linalg"}


# The primitive objects (``add_p``, ...): tested in test_lax_primitives.py.
PRIMITIVE_OBJECTS = {n for n in lax.__all__ if n.endswith("_p")}


def test_table_covers_every_lax_function() -> None:
    assert {c.fn for c in CASES} == (
        set(lax.__all__) - CONTROL_FLOW - SLICING - PARAM_TYPES - IN_DIM - DEVICES - COMPOSITIONS - SORTING - WINDOWED
        - CONVOLUTION - LINALG
        - PRIMITIVE_OBJECTS - TRACED_LOOPS
    )
    assert len({c.id for c in CASES}) == len(CASES)


# ---------------------------------------------------------------------- comparisons


@contextmanager
def jax_mode(x64: bool) -> Iterator[None]:
    with jax.enable_x64(x64):
        yield


@pytest.fixture(autouse=True)
def ferrax_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """ferrax runs a case in the mode JAX runs it (x64 when it has 64-bit values)."""
    callspec = getattr(request.node, "callspec", None)
    c = callspec.params.get("c") if callspec is not None else None
    with ferrax.enable_x64(isinstance(c, Case) and c.x64):
        yield


def run_jax(c: Case) -> Any:
    with jax_mode(c.x64):
        return c.call(jax.lax, *c.inputs)


def compute_jax_results() -> dict[str, tuple[Any, Exception | None]]:
    """JAX's result (or refusal) for every case.

    Applying each primitive eagerly would compile one XLA computation per case, which
    is most of this file's time; instead the refusals are found by abstract evaluation
    and the rest are computed by a few jitted functions. (Each output is one
    lax function of the inputs, computed by the same XLA operations as eagerly.)
    """
    results: dict[str, tuple[Any, Exception | None]] = {}
    for x64 in (False, True):
        accepted = []
        with jax_mode(x64):
            for c in CASES:
                if c.x64 != x64:
                    continue
                try:
                    jax.eval_shape(lambda *xs, c=c: c.call(jax.lax, *xs), *c.inputs)
                except (TypeError, ValueError) as e:
                    results[c.id] = (None, e)
                else:
                    accepted.append(c)

            # In chunks: XLA's compile time grows faster than the computation's size.
            for start in range(0, len(accepted), CHUNK):
                chunk = accepted[start : start + CHUNK]

                def computation(args: list[tuple[Any, ...]], chunk: list[Case] = chunk) -> list[Any]:
                    return [c.call(jax.lax, *a) for c, a in zip(chunk, args)]

                outs = jax.jit(computation)([c.inputs for c in chunk])
                for c, out in zip(chunk, outs):
                    results[c.id] = (out, None)
    return results


CHUNK = 64


_JAX_RESULTS: dict[str, tuple[Any, Exception | None]] = {}


def jax_result(c: Case) -> tuple[Any, Exception | None]:
    if not _JAX_RESULTS:
        _JAX_RESULTS.update(compute_jax_results())
    return _JAX_RESULTS[c.id]


def assert_values_equal(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], rtol: float) -> None:
    assert got.shape == want.shape
    if got.dtype in FLOATS:
        g, w = got.astype(np.float64), want.astype(np.float64)
        tol = RTOL[got.dtype] * rtol
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_eager_matches_jax(c: Case) -> None:
    want, jax_error = jax_result(c)
    if jax_error is not None:
        # JAX refuses these dtypes (or parameters): so does ferrax, with its rule's error.
        with pytest.raises(TypeCheckError):
            c.call(lax, *c.inputs)
        return
    got = c.call(lax, *c.inputs)
    assert isinstance(got, ferrax.Array)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.weak_type == want.weak_type
    assert_values_equal(np.asarray(got), np.asarray(want), c.rtol)


NUMPY_CASES = [c for c in CASES if c.numpy is not None]


@pytest.mark.parametrize("c", NUMPY_CASES, ids=lambda c: c.id)
def test_eager_matches_numpy(c: Case) -> None:
    assert c.numpy is not None
    if jax_result(c)[1] is not None:
        return
    got = c.call(lax, *c.inputs)
    with np.errstate(all="ignore"):
        want = np.asarray(c.numpy(*c.inputs)).astype(got.dtype)
    # NumPy's result dtypes differ (it widens integer sums, computes bool arithmetic...):
    # the dtypes are checked against JAX's, the values against NumPy's, in ferrax's dtype.
    assert_values_equal(np.asarray(got), want, c.rtol * 4)


# JAX records these as other primitives: ferrax's expand_dims is a primitive of its own
# (JAX's is a broadcast_in_dim).
JAX_PRIMITIVE = {"expand_dims": "broadcast_in_dim"}


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_make_jaxpr_matches_jax(c: Case) -> None:
    if jax_result(c)[1] is not None:
        with pytest.raises(TypeCheckError, match=r"test_lax\.py:\d+"):
            ferrax.make_jaxpr(lambda *xs: c.call(lax, *xs))(*c.inputs)
        return
    closed = ferrax.make_jaxpr(lambda *xs: c.call(lax, *xs))(*c.inputs)
    text = str(closed.jaxpr)
    assert str(parse_jaxpr(text)) == text
    in_avals, out_avals = typecheck(closed.jaxpr)
    assert out_avals == closed.out_avals

    with jax_mode(c.x64):
        jclosed = jax.make_jaxpr(lambda *xs: c.call(jax.lax, *xs))(*c.inputs)
    ours = [(a.shape, a.dtype, a.weak_type) for a in closed.out_avals]
    theirs = [(tuple(a.shape), np.dtype(a.dtype), a.weak_type) for a in jclosed.out_avals]
    assert ours == theirs
    assert [(a.shape, a.dtype) for a in closed.in_avals] == [
        (tuple(a.shape), np.dtype(a.dtype)) for a in jclosed.in_avals
    ]

    jeqns = list(jclosed.jaxpr.eqns)
    assert [JAX_PRIMITIVE.get(e.primitive, e.primitive) for e in closed.jaxpr.eqns] == [
        e.primitive.name for e in jeqns
    ]
    for eqn, jeqn in zip(closed.jaxpr.eqns, jeqns):
        if eqn.primitive in JAX_PRIMITIVE:
            continue
        theirs_params = jeqn.params
        for k, v in eqn.params.items():
            if k == "precision":
                continue
            assert k in theirs_params, (eqn.primitive, k)
            assert v == theirs_params[k], (eqn.primitive, k, v, theirs_params[k])


BITWISE_CASES = [c for c in CASES if c.fn in ("bitwise_xor", *SHIFTS)]


@pytest.mark.parametrize("c", BITWISE_CASES, ids=lambda c: c.id)
def test_bitwise_under_jit_matches_jax(c: Case) -> None:
    """XLA's shift semantics (out-of-range and negative amounts) compiled by ferrax: the
    same values as jax.lax's."""
    want, jax_error = jax_result(c)
    if jax_error is not None:
        with pytest.raises(TypeCheckError):
            ferrax.jit(lambda *xs: c.call(lax, *xs))(*c.inputs)
        return
    got = ferrax.jit(lambda *xs: c.call(lax, *xs))(*c.inputs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# ------------------------------------------------------------- Python scalars


def test_python_scalars_take_the_other_operands_dtype() -> None:
    x = np.array([1.0, 2.0], np.float16)
    # JAX's lax refuses this (2.0 is a float32); ferrax's lax types the scalar after x.
    y = lax.add(x, 2.0)
    assert y.dtype == F16 and not y.weak_type
    assert lax.mul(np.array([3], np.int8), 2).dtype == I8
    assert lax.max(np.array([1.5], np.float32), 2).dtype == F32
    j = ferrax.make_jaxpr(lambda a: lax.mul(a, 2))(np.zeros(3, np.int8))
    assert "mul a 2:i8[]" in str(j)


def test_python_scalars_alone_are_weak_like_jax() -> None:
    for got, want in [
        (lax.add(1, 2), jax.lax.add(1, 2)),
        (lax.exp(1.0), jax.lax.exp(1.0)),
        (lax.neg(1), jax.lax.neg(1)),
        (lax.pow(2.0, 3), jax.lax.pow(2.0, 3)),
        (lax.convert_element_type(2.7, np.int32), jax.lax.convert_element_type(2.7, np.int32)),
    ]:
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
        assert_values_equal(np.asarray(got), np.asarray(want), 1.0)


def test_python_bool_is_not_weak() -> None:
    out = lax.select_n(True, np.zeros(2, np.float32), np.ones(2, np.float32))
    assert out.tolist() == [1.0, 1.0]
    j = ferrax.make_jaxpr(lambda a: lax.select_n(True, a, a))(np.zeros(2, np.int8))
    assert "select_n True:bool[] a a" in str(j)
    assert lax.bitwise_and(np.array([True, False]), True).dtype == BOOL


def test_python_scalar_of_a_higher_kind_is_an_error() -> None:
    # An int array plus 1.5 is not truncated: the float32 scalar mismatches, as in JAX.
    with pytest.raises(TypeCheckError, match="int32"):
        lax.add(np.array([1, 2], np.int32), 1.5)
    with pytest.raises(TypeCheckError):
        lax.add(np.array([True]), 1)
    with pytest.raises(OverflowError):
        lax.add(np.array([1], np.uint8), 300)


def test_pow_keeps_an_int_exponent() -> None:
    j = ferrax.make_jaxpr(lambda a: lax.pow(a, 3))(np.ones(2, np.float16))
    assert "pow a 3:i32[]" in str(j)
    np.testing.assert_array_equal(np.asarray(lax.pow(np.array([2.0], np.float16), -1)), [0.5])


# ---------------------------------------------------------------- XLA semantics


def test_integer_division_semantics() -> None:
    # Truncation toward zero; x / 0 is -1 (all ones unsigned); INT_MIN / -1 wraps.
    i32min = np.iinfo(np.int32).min
    x = np.array([7, -7, 7, -7, 5, i32min, i32min], np.int32)
    y = np.array([2, 2, -2, -2, 0, -1, 2], np.int32)
    assert lax.div(x, y).tolist() == [3, -3, -3, 3, -1, i32min, i32min // 2]
    assert lax.rem(x, y).tolist() == [1, -1, 1, -1, 5, 0, 0]
    u = np.array([7, 200, 5], np.uint64)
    v = np.array([2, 3, 0], np.uint64)
    with ferrax.enable_x64():
        assert lax.div(u, v).tolist() == [3, 66, 2**64 - 1]
        assert lax.rem(u, v).tolist() == [1, 2, 5]
    # Without x64 (the default) they are uint32 values.
    assert lax.div(u, v).tolist() == [3, 66, 2**32 - 1]


def test_float_to_int_conversion_saturates() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, 2147483520.0], np.float32)
    got = lax.convert_element_type(x, np.int32).tolist()
    assert got == [0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 2, -2, 2147483520]
    assert lax.convert_element_type(x, np.uint8).tolist() == [0, 255, 0, 255, 0, 2, 0, 255]
    big = np.array([1e19, -1e19, 9.3e18, np.nan], np.float64)
    with ferrax.enable_x64():
        assert lax.convert_element_type(big, np.int64).tolist() == [2**63 - 1, -(2**63), 2**63 - 1, 0]
        assert lax.convert_element_type(big, np.uint64).tolist() == [10**19, 0, 9300000000000000000, 0]


def test_argmax_prefers_nan_and_the_first_tie() -> None:
    x = np.array([1.0, np.nan, 3.0, np.nan, 3.0], np.float32)
    assert int(lax.argmax(x, 0, np.int32)) == 1
    assert int(lax.argmin(x, 0, np.int32)) == 1
    assert int(lax.argmax(np.array([1, 3, 3]), 0, np.int32)) == 1


def test_overflow_is_silent() -> None:
    # XLA's results, without NumPy's RuntimeWarnings (which pytest turns into errors).
    big = np.array([3e38, -3e38], np.float32)
    assert lax.mul(big, big).tolist() == [math.inf, math.inf]
    assert np.isnan(np.asarray(lax.sub(lax.mul(big, big), lax.mul(big, big)))).all()
    assert lax.exp(np.array([1000.0], np.float32)).tolist() == [math.inf]
    assert lax.logistic(np.array([-1000.0, 1000.0], np.float32)).tolist() == [0.0, 1.0]
    assert lax.convert_element_type(np.array([1e300]), np.float32).tolist() == [math.inf]


def test_shortcuts_return_the_operand() -> None:
    x = lax.add(np.ones((2, 3), np.float32), 0.0)
    assert lax.convert_element_type(x, np.float32) is x
    assert lax.reshape(x, (2, 3)) is x
    assert lax.transpose(x, (0, 1)) is x
    assert lax.broadcast_in_dim(x, (2, 3), (0, 1)) is x
    assert lax.squeeze(x, ()) is x
    assert lax.concatenate([x], 1) is x


# ------------------------------------------------------------------------ errors


def test_rule_errors_name_the_user_line() -> None:
    with pytest.raises(TypeCheckError, match=r"test_lax\.py:\d+"):
        lax.add(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeCheckError, match=r"(?s)narrower.*test_lax\.py:\d+"):
        ferrax.make_jaxpr(
            lambda a: lax.dot_general(a, a, (((0,), (0,)), ((), ())), preferred_element_type=np.int8)
        )(np.ones(3, np.int32))


def test_bad_axes_are_value_errors() -> None:
    with pytest.raises(ValueError, match="repeated axis"):
        lax.expand_dims(np.ones(3), (0, 0))
    with pytest.raises(ValueError, match="out of range"):
        lax.squeeze(np.ones((1, 3)), (2,))
    with pytest.raises(TypeError, match="start indices"):
        lax.dynamic_slice(np.ones((3, 3)), (1,), (1, 1))
    with pytest.raises(TypeError, match="integers"):
        lax.dynamic_slice(np.ones(3), (np.float32(1),), (1,))
