"""The everyday NumPy names JAX programs use beyond the core subset: tests of values
(``isnan``, ``isclose``), triangles and diagonals, splitting, tiling and rolling,
stacking, products (``outer``, ``inner``, ``tensordot``, ``kron``), more ufuncs
(``log2``, ``hypot``, ``fmod``, ...), the ``nan*`` reductions, ``average``, ``var``/``std``
with ``where=``, ``linspace(retstep=)``, ``logspace``, dtype queries and constants.

Each function is composed from ``lax`` primitives and the package's core functions the
way ``jax.numpy`` composes it, so dtypes and weak types follow JAX's (both x64 modes):
results that JAX computes through its promotion keep a Python scalar's weak type, and
comparisons, counts and indices are strongly typed.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any, Literal, overload

import ml_dtypes
import numpy as np

from ferrax._jit import staged
from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import ConcreteArray, Tracer, aval_of, user_location
from ferrax._custom_derivatives import custom_jvp
from ferrax.numpy import _creation, _reductions, _shape, _ufuncs
from ferrax.numpy._promotion import (
    ArrayLike,
    Axis,
    DTypeLike,
    Shape,
    as_array,
    broadcast_shapes,
    broadcast_to,
    convert,
    operand_aval,
    promote_args,
    promote_args_inexact,
    promote_dtypes,
)
from ferrax.numpy._shape import normalize_axes, normalize_axis

__all__ = [
    "allclose", "array_equal", "array_split", "atleast_1d", "atleast_2d",
    "atleast_3d", "average", "bitwise_count", "bitwise_invert", "column_stack", "count_nonzero",
    "diag", "diagonal", "diff", "dstack", "e", "empty", "empty_like", "euler_gamma", "finfo",
    "fliplr", "flipud", "fmod", "heaviside", "hstack", "hypot", "identity", "iinfo", "inf",
    "inner", "isclose", "isinf", "isnan", "isneginf", "isposinf", "issubdtype", "kron",
    "linspace", "log10", "log2", "logaddexp", "logaddexp2", "logspace", "meshgrid", "moveaxis",
    "nan", "nan_to_num", "nanargmax", "nanargmin", "nanmax", "nanmean", "nanmin", "nanprod",
    "nanstd", "nansum", "nanvar", "newaxis", "outer", "pi", "piecewise", "interp", "promote_types", "repeat", "roll",
    "select", "split", "std", "tensordot", "tile", "trace", "tri", "tril", "triu", "var",
    "vstack",
]

# ---------------------------------------------------------------------------- constants

pi: float = math.pi
"""The ratio of a circle's circumference to its diameter (a Python float, as JAX's)."""
e: float = math.e
"""Euler's number (a Python float)."""
inf: float = math.inf
"""Positive infinity (a Python float)."""
nan: float = math.nan
"""Not a number (a Python float)."""
euler_gamma: float = 0.5772156649015329
"""The Euler-Mascheroni constant (a Python float)."""
newaxis: None = None
"""``None``, to insert an axis when indexing (``x[:, newaxis]``)."""



def _dtype_of(x: Any) -> Any:
    """An array's dtype; anything else as it is (a dtype-like)."""
    return x.dtype if isinstance(x, (Array, np.ndarray, np.generic)) else x


def finfo(dtype: DTypeLike | Array) -> ml_dtypes.finfo:
    """Machine limits of a floating dtype, or of an array's (``ml_dtypes.finfo``, as
    ``jax.numpy.finfo``; bfloat16 included): ``eps``, ``max``, ``min``, ``tiny``, ..."""
    return ml_dtypes.finfo(_dtype_of(dtype))  # type: ignore[no-untyped-call]


def iinfo(int_type: DTypeLike | Array) -> ml_dtypes.iinfo:
    """Machine limits of an integer dtype, or of an array's (``ml_dtypes.iinfo``, as
    ``jax.numpy.iinfo``): ``min``, ``max``, ``bits``."""
    return ml_dtypes.iinfo(_dtype_of(int_type))  # type: ignore[no-untyped-call]


# ------------------------------------------------------------------------------ helpers


def _is_float(x: Array) -> bool:
    return dtypes.is_float(x.dtype)


def _const(x: Array, value: Any) -> Array:
    """``value`` as a scalar of ``x``'s dtype, strongly typed."""
    return convert(value, x.dtype, False)


def _finite(x: Array) -> Array:
    """Whether each element of a float array is finite: ``|x| < inf`` (false for NaN)."""
    return lax.lt(lax.abs(x), _const(x, np.inf))


def _promote_inexact(name: str, *args: Any) -> list[Array]:
    """The operands in their promoted inexact dtype (JAX's ``promote_dtypes_inexact``),
    shapes unchanged."""
    avals = [operand_aval(name, x, i) for i, x in enumerate(args)]
    d, weak = dtypes.promote([(v.dtype, v.weak_type) for v in avals])
    return [as_array(convert(x, dtypes.to_inexact(d), weak), name, i) for i, x in enumerate(args)]


def _no_out(name: str, out: object) -> None:
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to {name} is not supported, at {user_location()}")


def _static_int(x: Any, name: str, what: str) -> int:
    if isinstance(x, Tracer):
        from ferrax.errors import ConcretizationError

        raise ConcretizationError(
            f"{name}: {what} must be a concrete integer, but it is traced "
            f"({x.aval.str_short()}), at {user_location()}"
        )
    return operator.index(x)


# ------------------------------------------------------------------------ value tests


def isnan(x: ArrayLike, /) -> Array:
    """Whether each element is NaN (``x != x``; never for integers and bools)."""
    a = as_array(x, "isnan")
    return lax.ne(a, a)


def isinf(x: ArrayLike, /) -> Array:
    """Whether each element is positive or negative infinity."""
    a = as_array(x, "isinf")
    if not _is_float(a):
        return _creation.zeros_like(a, dtype=np.bool_)
    return lax.eq(lax.abs(a), _const(a, np.inf))


def _signed_inf(name: str, x: ArrayLike, value: float) -> Array:
    a = as_array(x, name)
    if not _is_float(a):
        return _creation.zeros_like(a, dtype=np.bool_)
    return lax.eq(a, _const(a, value))


def isposinf(x: ArrayLike, /, out: None = None) -> Array:
    """Whether each element is positive infinity."""
    _no_out("isposinf", out)
    return _signed_inf("isposinf", x, np.inf)


def isneginf(x: ArrayLike, /, out: None = None) -> Array:
    """Whether each element is negative infinity."""
    _no_out("isneginf", out)
    return _signed_inf("isneginf", x, -np.inf)


@staged()
def nan_to_num(
    x: ArrayLike,
    copy: bool = True,
    nan: ArrayLike = 0.0,
    posinf: ArrayLike | None = None,
    neginf: ArrayLike | None = None,
) -> Array:
    """``x`` with NaN replaced by ``nan``, infinities by ``posinf``/``neginf`` (the
    dtype's largest and smallest finite values by default); integers unchanged."""
    del copy
    a = as_array(x, "nan_to_num")
    if not _is_float(a):
        return a
    info = finfo(a.dtype)
    high = info.max if posinf is None else posinf
    low = info.min if neginf is None else neginf
    out = _ufuncs.where(isnan(a), convert(nan, a.dtype), a)
    out = _ufuncs.where(isposinf(out), convert(high, a.dtype), out)
    return _ufuncs.where(isneginf(out), convert(low, a.dtype), out)


def isclose(
    a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08, equal_nan: bool = False
) -> Array:
    """Whether ``|a - b| <= atol + rtol * |b|`` elementwise (equal infinities are close;
    NaNs only with ``equal_nan``). Integers are compared as floats."""
    x, y = promote_args_inexact("isclose", a, b)
    rt = convert(rtol, x.dtype, False)
    at = convert(atol, x.dtype, False)
    in_range = lax.le(lax.abs(lax.sub(x, y)), lax.add(at, lax.mul(rt, lax.abs(y))))
    out = _ufuncs.logical_or(lax.eq(x, y), _ufuncs.logical_and(_finite(y), in_range))
    if equal_nan:
        out = _ufuncs.logical_or(out, _ufuncs.logical_and(isnan(x), isnan(y)))
    return out


def allclose(
    a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08, equal_nan: bool = False
) -> Array:
    """Whether every pair of elements is :func:`isclose` (a bool scalar array)."""
    return _reductions.all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Array:
    """Whether the arrays have one shape and equal elements (NaNs equal if
    ``equal_nan``); a bool scalar array, false for different shapes."""
    x, y = as_array(a1, "array_equal", 0), as_array(a2, "array_equal", 1)
    if x.shape != y.shape:
        return convert(False, np.dtype(np.bool_))
    eq = _ufuncs.equal(x, y)
    if equal_nan:
        eq = _ufuncs.logical_or(eq, _ufuncs.logical_and(isnan(x), isnan(y)))
    return _reductions.all(eq)


# ----------------------------------------------------------------------------- ufuncs


def log2(x: ArrayLike, /) -> Array:
    """The base-2 logarithm (``log(x) / log(2)``)."""
    (a,) = promote_args_inexact("log2", x)
    return lax.div(lax.log(a), lax.log(convert(2, a.dtype, False)))


def log10(x: ArrayLike, /) -> Array:
    """The base-10 logarithm (``log(x) * (1 / log(10))``)."""
    (a,) = promote_args_inexact("log10", x)
    return lax.mul(lax.log(a), convert(0.4342944819032518, a.dtype, False))


def logaddexp(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``log(exp(x1) + exp(x2))`` without overflow, with JAX's derivative (finite where
    an operand is ``-inf``)."""
    from ferrax.nn import functions  # ferrax.nn is built on this package

    return functions.logaddexp(x1, x2)


def _logaddexp2_impl(a: Array, b: Array) -> Array:
    amax = lax.max(a, b)
    delta = lax.sub(a, b)
    ln2 = convert(math.log(2.0), a.dtype, False)
    tail = lax.mul(lax.div(convert(1.0, a.dtype, False), ln2), lax.log1p(lax.exp(lax.mul(lax.neg(lax.abs(delta)), ln2))))
    return lax.select_n(lax.ne(delta, delta), lax.add(amax, tail), lax.add(a, b))


def _logaddexp2_jvp(primals: tuple[Array, Array], tangents: tuple[Array, Array]) -> tuple[Array, Array]:
    a, b = primals
    ta, tb = tangents
    out = _logaddexp2(a, b)
    ln2 = convert(math.log(2.0), a.dtype, False)

    def finite(v: Array) -> Array:
        # +inf taken as 0, as JAX's rule does.
        return _ufuncs.where(isposinf(v), convert(0, v.dtype), v)

    def weight(v: Array) -> Array:
        return lax.exp(lax.mul(lax.sub(finite(v), finite(out)), ln2))

    return out, lax.add(lax.mul(ta, weight(a)), lax.mul(tb, weight(b)))


_logaddexp2 = custom_jvp(_logaddexp2_impl)
_logaddexp2.defjvp(_logaddexp2_jvp)


def logaddexp2(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``log2(2**x1 + 2**x2)`` without overflow."""
    a, b = promote_args_inexact("logaddexp2", x1, x2)
    out: Array = _logaddexp2(a, b)
    return out


@staged()
def hypot(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``sqrt(x1**2 + x2**2)`` without overflow (infinite if either leg is)."""
    a, b = promote_args_inexact("hypot", x1, x2)
    a, b = lax.abs(a), lax.abs(b)
    inf_either = _ufuncs.logical_or(isposinf(a), isposinf(b))
    hi, lo = _ufuncs.maximum(a, b), _ufuncs.minimum(a, b)
    # `hi == 0` twice, as JAX writes it.
    zero = _ufuncs.equal(hi, 0)
    safe = _ufuncs.where(_ufuncs.equal(hi, 0), _creation.ones_like(hi), hi)
    out = _ufuncs.where(zero, hi, hi * lax.sqrt(1 + lax.square(lax.div(lo, safe))))
    return _ufuncs.where(inf_either, convert(np.inf, out.dtype, aval_of(out).weak_type), out)


def fmod(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The remainder of ``x1 / x2`` with the sign of ``x1`` (C's ``fmod``: ``lax.rem``);
    an integer division by zero gives 0 as JAX's does."""
    a, b = promote_args("fmod", x1, x2)
    if a.dtype == np.bool_:
        a, b = (convert(v, dtypes.default_int()) for v in (a, b))
    if dtypes.is_int(a.dtype):
        b = _ufuncs.where(_ufuncs.equal(b, 0), _creation.ones_like(b), b)
    return lax.rem(a, b)


def heaviside(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The step function: 0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where it is 0
    (NaN stays NaN)."""
    a, b = promote_args_inexact("heaviside", x1, x2)
    weak = aval_of(a).weak_type
    zero, one = convert(0, a.dtype, weak), convert(1, a.dtype, weak)
    at_zero = _ufuncs.where(isnan(a), a, b)
    return _ufuncs.where(lax.lt(a, zero), zero, _ufuncs.where(lax.gt(a, zero), one, at_zero))


def bitwise_invert(x: ArrayLike, /) -> Array:
    """The bitwise NOT of integers, logical NOT of bools (the Array API's name of
    :func:`invert`)."""
    return _ufuncs.invert(x)


def bitwise_count(x: ArrayLike, /) -> Array:
    """The number of set bits of ``|x|``, as uint8."""
    a = as_array(x, "bitwise_count")
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"bitwise_count takes integers, got {a.dtype}, at {user_location()}")
    return convert(lax.population_count(lax.abs(a) if a.dtype.kind == "i" else a), np.dtype(np.uint8))


# ------------------------------------------------------------------------------- dtypes


def _lattice_node(d: DTypeLike) -> str:
    if d is int:
        return "i*"
    if d is float:
        return "f*"
    t = dtypes.supported(d)
    return "bfloat16" if t == dtypes.bfloat16 else t.name


def promote_types(a: DTypeLike, b: DTypeLike) -> np.dtype[Any]:
    """The dtype JAX's promotion lattice gives values of dtypes ``a`` and ``b`` (Python
    ``int`` and ``float`` are weak: ``promote_types(np.uint8, int)`` is uint8). The
    result is not truncated to 32 bits without x64, as in JAX."""
    join = dtypes._JOIN_X64 if dtypes.x64_enabled() else dtypes._JOIN_X32
    node = join[_lattice_node(a), _lattice_node(b)]
    return {"i*": np.dtype(np.int64), "f*": np.dtype(np.float64)}.get(node) or dtypes._NODE_DTYPE[node]


_ABSTRACT = (np.generic, np.number, np.inexact, np.floating, np.integer, np.signedinteger,
             np.unsignedinteger, np.bool_)


def issubdtype(arg1: DTypeLike, arg2: DTypeLike) -> bool:
    """Whether dtype ``arg1`` is ``arg2`` or below it in NumPy's hierarchy
    (``np.floating``, ``np.integer``, ...); bfloat16 counts as a floating type."""
    d1 = dtypes.bfloat16 if arg1 == "bfloat16" else np.dtype(arg1)
    if d1 == dtypes.bfloat16:
        if isinstance(arg2, type) and arg2 in _ABSTRACT:
            return arg2 in (np.generic, np.number, np.inexact, np.floating)
        return bool(arg2 == "bfloat16" or np.dtype(arg2) == dtypes.bfloat16)
    if not (isinstance(arg2, type) and arg2 in _ABSTRACT):
        if arg2 == "bfloat16" or (not isinstance(arg2, str) and arg2 is ml_dtypes.bfloat16):
            return False
    return bool(np.issubdtype(d1, arg2))


# ----------------------------------------------------------------------------- creation


def empty(shape: Shape, dtype: DTypeLike | None = None) -> Array:
    """An array of ``shape`` (zeros, as JAX's: XLA has no uninitialized memory)."""
    return _creation.zeros(shape, dtype)


def empty_like(prototype: ArrayLike, dtype: DTypeLike | None = None, shape: Shape | None = None) -> Array:
    """An array of ``prototype``'s shape and dtype (zeros, as JAX's)."""
    return _creation.zeros_like(prototype, dtype, shape)


def identity(n: int, dtype: DTypeLike | None = None) -> Array:
    """The ``n`` x ``n`` identity matrix (of the default float dtype unless ``dtype``)."""
    return _creation.eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike | None = None) -> Array:
    """An ``N`` x ``M`` array with ones at and below diagonal ``k`` (float32 unless
    ``dtype`` is given, in both x64 modes, as JAX's)."""
    rows = operator.index(N)
    cols = rows if M is None else operator.index(M)
    want = np.dtype(np.float32) if dtype is None else dtypes.canonicalize(dtype, "tri")
    if rows < 0 or cols < 0:
        raise ValueError(f"tri: negative dimensions are not allowed, at {user_location()}")
    # JAX's lax._tri: iotas of int32 (int64 for a dimension past int32, or an offset
    # whose dtype's range exceeds int32's), `iota0 + k >= iota1`.
    shift, offset_dtype = _creation.diagonal_offset(k, "tri")
    index = np.dtype(np.int64 if builtins.max(rows, cols) > np.iinfo(np.int32).max else np.int32)
    wide, narrow = np.iinfo(offset_dtype.name), np.iinfo(index.name)
    if wide.min < narrow.min or wide.max > narrow.max:
        index = dtypes.canonical(np.dtype(np.int64))
    i = lax.add(lax.broadcasted_iota(index, (rows, cols), 0), ConcreteArray(np.asarray(shift, index), False))
    mask = lax.ge(i, lax.broadcasted_iota(index, (rows, cols), 1))
    return convert(mask, want)


def _triangle(name: str, m: ArrayLike, k: int, lower: bool) -> Array:
    x = as_array(m, name)
    if x.ndim < 2:
        raise ValueError(f"Argument to {name} must be at least 2D (got shape {list(x.shape)}), at {user_location()}")
    rows, cols = x.shape[-2:]
    mask = tri(rows, cols, k if lower else k - 1, dtype=np.bool_)
    which = lax.broadcast_in_dim(mask, x.shape, (x.ndim - 2, x.ndim - 1))
    zeros = _creation.zeros_like(x)
    return lax.select_n(which, zeros, x) if lower else lax.select_n(which, x, zeros)


@staged(static_argnames=("k",))
def tril(m: ArrayLike, k: int = 0) -> Array:
    """``m`` with the elements above diagonal ``k`` of its last two axes zeroed."""
    return _triangle("tril", m, k, True)


@staged(static_argnames=("k",))
def triu(m: ArrayLike, k: int = 0) -> Array:
    """``m`` with the elements below diagonal ``k`` of its last two axes zeroed."""
    return _triangle("triu", m, k, False)


def _linspace_dtype(name: str, start: ArrayLike, stop: ArrayLike, dtype: DTypeLike | None) -> np.dtype[Any]:
    if dtype is not None:
        return dtypes.canonicalize(dtype, name)
    avals = [operand_aval(name, start, 0), operand_aval(name, stop, 1)]
    d, _ = dtypes.result_type([(v.dtype, v.weak_type) for v in avals])
    return dtypes.to_inexact(d)


@overload
def linspace(
    start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
    retstep: Literal[False] = False, dtype: DTypeLike | None = None, axis: int = 0,
) -> Array: ...
@overload
def linspace(
    start: ArrayLike, stop: ArrayLike, num: int, endpoint: bool, retstep: Literal[True],
    dtype: DTypeLike | None = None, axis: int = 0,
) -> tuple[Array, Array]: ...
@overload
def linspace(
    start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, *,
    retstep: Literal[True], dtype: DTypeLike | None = None, axis: int = 0,
) -> tuple[Array, Array]: ...
def linspace(
    start: ArrayLike,
    stop: ArrayLike,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: DTypeLike | None = None,
    axis: int = 0,
) -> Array | tuple[Array, Array]:
    """``num`` evenly spaced values from ``start`` to ``stop`` (included if
    ``endpoint``), along a new axis ``axis`` when ``start``/``stop`` are arrays; with
    ``retstep``, also the spacing. ``start * (1 - t) + stop * t`` for ``t = i / div``, as
    JAX computes it; integer dtypes take the floor."""
    n = _static_int(num, "linspace", "num")
    ax = _static_int(axis, "linspace", "axis")
    if n < 0:
        raise ValueError(f"Number of samples, {n}, must be non-negative, at {user_location()}")
    return _linspace(start, stop, n, endpoint, retstep, dtype, ax)


@staged(static_argnames=("num", "endpoint", "retstep", "dtype", "axis"))
def _linspace(
    start: ArrayLike, stop: ArrayLike, num: int, endpoint: bool, retstep: bool, dtype: DTypeLike | None, axis: int,
) -> Array | tuple[Array, Array]:
    n, ax = num, axis
    want = _linspace_dtype("linspace", start, stop, dtype)
    compute = dtypes.to_inexact(want)
    lo = convert(start, compute)
    hi = convert(stop, compute)
    bounds = list(broadcast_shapes(lo.shape, hi.shape))
    lo, hi = broadcast_to(lo, bounds), broadcast_to(hi, bounds)
    ax = len(bounds) + ax + 1 if ax < 0 else ax
    with_axis = bounds[:ax] + [1] + bounds[ax:]
    div = n - 1 if endpoint else n
    if n > 1:
        delta = lax.div(lax.sub(hi, lo), convert(div, compute))
        iota_shape = [1] * len(with_axis)
        iota_shape[ax] = div
        step = _shape.reshape(lax.div(lax.iota(compute, div), convert(div, compute)), iota_shape)
        # In JAX's order: each bound reshaped where it is used.
        low_part = _ufuncs.multiply(_shape.reshape(lo, with_axis), _ufuncs.subtract(1, step))
        out = _ufuncs.add(low_part, _ufuncs.multiply(_shape.reshape(hi, with_axis), step))
        if endpoint:
            out = lax.concatenate([out, _shape.insert_axes(hi, (ax,))], ax)
    elif n == 1:
        delta = convert(np.nan, compute) if endpoint else lax.sub(hi, lo)
        out = _shape.reshape(lo, with_axis)
    else:
        delta = convert(np.nan, compute)
        empty_shape = bounds[:ax] + [0] + bounds[ax:]
        out = _creation.zeros(empty_shape, compute)
    if dtypes.is_int(want) and _is_float(out):
        out = lax.floor(out)
    result = convert(out, want)
    return (result, delta) if retstep else result


def logspace(
    start: ArrayLike,
    stop: ArrayLike,
    num: int = 50,
    endpoint: bool = True,
    base: ArrayLike = 10.0,
    dtype: DTypeLike | None = None,
    axis: int = 0,
) -> Array:
    """``base ** linspace(start, stop, num)``."""
    want = _linspace_dtype("logspace", start, stop, dtype)
    compute = dtypes.to_inexact(want)
    lin = linspace(convert(start, compute), convert(stop, compute), num, endpoint=endpoint, axis=axis)
    return convert(_ufuncs.power(base, lin), want)


def meshgrid(*xi: ArrayLike, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list[Array]:
    """Coordinate arrays from 1-D coordinate vectors: ``indexing='xy'`` (Cartesian, the
    first two axes swapped) or ``'ij'`` (matrix); ``sparse`` keeps size-1 axes."""
    args = [as_array(x, "meshgrid", i) for i, x in enumerate(xi)]
    if not copy:
        raise ValueError(f"ferrax.numpy.meshgrid only supports copy=True, at {user_location()}")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}, at {user_location()}")
    if builtins.any(a.ndim != 1 for a in args):
        raise ValueError(
            f"Arguments to meshgrid must be 1D, got shapes {[list(a.shape) for a in args]}, at {user_location()}"
        )
    if indexing == "xy" and len(args) >= 2:
        args[0], args[1] = args[1], args[0]
    shape = [1 if sparse else a.shape[0] for a in args]
    out = []
    for i, a in enumerate(args):
        dims = [*shape[:i], a.shape[0], *shape[i + 1 :]] if sparse else shape
        out.append(lax.broadcast_in_dim(a, dims, (i,)))
    if indexing == "xy" and len(args) >= 2:
        out[0], out[1] = out[1], out[0]
    return out


# ------------------------------------------------------------------------------ shapes


def fliplr(m: ArrayLike) -> Array:
    """``m`` reversed along axis 1 (it needs at least two axes)."""
    x = as_array(m, "fliplr")
    if x.ndim < 2:
        raise ValueError(f"fliplr requires an array of at least 2 dimensions (got shape {list(x.shape)}), at {user_location()}")
    return _shape.flip(x, 1)


def flipud(m: ArrayLike) -> Array:
    """``m`` reversed along axis 0 (it needs at least one axis)."""
    x = as_array(m, "flipud")
    if x.ndim < 1:
        raise ValueError(f"flipud requires an array of at least 1 dimension, at {user_location()}")
    return _shape.flip(x, 0)


def moveaxis(a: ArrayLike, source: int | Sequence[int], destination: int | Sequence[int]) -> Array:
    """``a`` with axes ``source`` moved to positions ``destination``, the others in
    their order."""
    x = as_array(a, "moveaxis")
    src = normalize_axes(source, x.ndim, "moveaxis")
    dst = normalize_axes(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError(
            f"Inconsistent number of elements: {len(src)} vs {len(dst)}, at {user_location()}"
        )
    perm = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return _shape.transpose(x, perm)


@overload
def atleast_1d(arys: ArrayLike, /) -> Array: ...
@overload
def atleast_1d(*arys: ArrayLike) -> list[Array]: ...
def atleast_1d(*arys: ArrayLike) -> Array | list[Array]:
    """Each array with at least one axis (a list for several, one array for one)."""
    out = [_shape.reshape(x, (1,)) if x.ndim == 0 else x for x in (as_array(a, "atleast_1d", i) for i, a in enumerate(arys))]
    return out[0] if len(out) == 1 else out


@overload
def atleast_2d(arys: ArrayLike, /) -> Array: ...
@overload
def atleast_2d(*arys: ArrayLike) -> list[Array]: ...
def atleast_2d(*arys: ArrayLike) -> Array | list[Array]:
    """Each array with at least two axes (leading size-1 axes added)."""
    out = []
    for i, a in enumerate(arys):
        x = as_array(a, "atleast_2d", i)
        out.append(_shape.reshape(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x)
    return out[0] if len(out) == 1 else out


@overload
def atleast_3d(arys: ArrayLike, /) -> Array: ...
@overload
def atleast_3d(*arys: ArrayLike) -> list[Array]: ...
def atleast_3d(*arys: ArrayLike) -> Array | list[Array]:
    """Each array with at least three axes: ``(1, 1, 1)`` for a scalar, ``(1, n, 1)``
    for a vector, ``(m, n, 1)`` for a matrix."""
    out = []
    for i, a in enumerate(arys):
        x = as_array(a, "atleast_3d", i)
        if x.ndim == 0:
            x = _shape.reshape(x, (1, 1, 1))
        elif x.ndim == 1:
            x = _shape.reshape(x, (1, x.shape[0], 1))
        elif x.ndim == 2:
            x = _shape.reshape(x, (*x.shape, 1))
        out.append(x)
    return out[0] if len(out) == 1 else out


def _sequence(name: str, tup: Any) -> list[Array]:
    if isinstance(tup, (Array, np.ndarray)):
        x = as_array(tup, name)
        rest = x.shape[1:]
        return [_shape.reshape(lax.slice(x, (i,) + (0,) * len(rest), (i + 1, *rest)), rest) for i in range(x.shape[0])]
    if not isinstance(tup, (list, tuple)) or not tup:
        raise ValueError(f"{name} needs a non-empty sequence of arrays, at {user_location()}")
    return [as_array(a, name, i) for i, a in enumerate(tup)]


def _join(xs: list[Array], axis: int, dtype: DTypeLike | None, name: str) -> Array:
    if dtype is not None:
        want = dtypes.canonicalize(dtype, name)
        xs = [convert(x, want) for x in xs]
    return _shape.concatenate(xs, axis)


def hstack(tup: Sequence[ArrayLike] | Array, dtype: DTypeLike | None = None) -> Array:
    """The arrays joined column-wise: along axis 0 for vectors, axis 1 otherwise."""
    xs = [atleast_1d(x) for x in _sequence("hstack", tup)]
    return _join(xs, 0 if xs[0].ndim == 1 else 1, dtype, "hstack")


def vstack(tup: Sequence[ArrayLike] | Array, dtype: DTypeLike | None = None) -> Array:
    """The arrays joined row-wise (vectors become rows)."""
    return _join([atleast_2d(x) for x in _sequence("vstack", tup)], 0, dtype, "vstack")


def dstack(tup: Sequence[ArrayLike] | Array, dtype: DTypeLike | None = None) -> Array:
    """The arrays joined along a third axis (see :func:`atleast_3d`)."""
    return _join([atleast_3d(x) for x in _sequence("dstack", tup)], 2, dtype, "dstack")


def column_stack(tup: Sequence[ArrayLike] | Array) -> Array:
    """Vectors as the columns of a matrix (matrices joined along axis 1)."""
    xs = [_shape.transpose(atleast_2d(x)) if x.ndim < 2 else x for x in _sequence("column_stack", tup)]
    return _shape.concatenate(xs, 1)


def _split(
    name: str, ary: ArrayLike, indices_or_sections: int | Sequence[int] | ArrayLike, axis: int
) -> list[Array]:
    x = as_array(ary, name)
    dim = normalize_axis(_static_int(axis, name, "axis"), x.ndim, name)
    size = x.shape[dim]
    sections: Any = indices_or_sections
    if isinstance(sections, (list, tuple)) or (isinstance(sections, (np.ndarray, Array)) and np.ndim(sections) > 0):
        cuts = [0] + [_static_int(i, name, "an index") for i in sections] + [size]
        sizes = [hi - lo for lo, hi in zip(cuts, cuts[1:])]
        if builtins.any(s < 0 for s in sizes):
            # As JAX: indices in increasing order, within the axis (no negative ones).
            raise ValueError(f"Sizes passed to split must be nonnegative, got {sizes}, at {user_location()}")
    else:
        count = _static_int(sections, name, "the number of sections")
        if count <= 0:
            raise ValueError(f"{name}: number of sections must be larger than 0, at {user_location()}")
        part, rest = divmod(size, count)
        if rest and name == "split":
            raise ValueError(f"array split does not result in an equal division: rest is {rest}, at {user_location()}")
        sizes = [part + 1] * rest + [part] * (count - rest)
    # One split equation, as JAX (its transpose is one concatenate), its sizes NumPy
    # integers as JAX's are.
    return lax.split(x, [np.int64(s) for s in sizes], dim)


def split(ary: ArrayLike, indices_or_sections: int | Sequence[int] | ArrayLike, axis: int = 0) -> list[Array]:
    """``ary`` cut along ``axis`` into equal sections (an int that must divide the axis)
    or at the given indices."""
    return _split("split", ary, indices_or_sections, axis)


def array_split(ary: ArrayLike, indices_or_sections: int | Sequence[int] | ArrayLike, axis: int = 0) -> list[Array]:
    """As :func:`split`, with sections that need not be equal (the first ones one
    element longer)."""
    return _split("array_split", ary, indices_or_sections, axis)


def tile(A: ArrayLike, reps: int | Sequence[int]) -> Array:
    """``A`` repeated ``reps`` times along each axis (leading axes added as needed)."""
    x = as_array(A, "tile")
    counts = (operator.index(reps),) if isinstance(reps, (int, np.integer)) else tuple(operator.index(r) for r in reps)
    counts = (1,) * (x.ndim - len(counts)) + counts
    if len(counts) > x.ndim:
        # As JAX: the new leading axes by broadcast_in_dim, then one tile equation.
        k = len(counts) - x.ndim
        x = lax.broadcast_in_dim(x, (1,) * k + x.shape, tuple(range(k, k + x.ndim)))
    return lax.tile(x, counts)


def repeat(
    a: ArrayLike,
    repeats: ArrayLike,
    axis: int | None = None,
    *,
    total_repeat_length: int | None = None,
) -> Array:
    """Each element of ``a`` repeated ``repeats`` times along ``axis`` (of the flattened
    array by default). With ``total_repeat_length`` the result has that length (cut
    short, or padded by repeating the last element) and ``repeats`` may be traced."""
    if total_repeat_length is None:
        return _shape.repeat(a, repeats, axis)
    total = _static_int(total_repeat_length, "repeat", "total_repeat_length")
    x = as_array(a, "repeat")
    if axis is None:
        x = _shape.ravel(x)
        axis = 0
    if x.ndim == 0:
        if np.shape(repeats) in ((), (1,)):
            return _creation.full((total,), x)
        raise ValueError(
            "`repeat` with a scalar parameter `a` is only implemented for scalar values of the "
            f"parameter `repeats`, at {user_location()}"
        )
    dim = normalize_axis(axis, x.ndim, "repeat")
    n = x.shape[dim]
    if total == 0:
        start = [0] * x.ndim
        limit = list(x.shape)
        limit[dim] = 0
        return lax.slice(x, start, limit)
    if n == 0:
        return x
    if isinstance(repeats, Tracer):
        counts = broadcast_to(_shape.ravel(convert(repeats, np.dtype(np.int32))), (n,))
        # starts[i] = counts[0] + ... + counts[i-1]; output p takes the last block
        # starting at or before p.
        lower = tri(n, n, -1, dtype=np.int32)
        starts = _reductions.sum(_ufuncs.multiply(lower, counts), axis=1)
        p = lax.iota(np.int32, total)
        started = lax.le(_shape.insert_axes(starts, (0,)), _shape.insert_axes(p, (1,)))
        index = lax.sub(_reductions.sum(started, axis=1, dtype=np.int32), convert(1, np.dtype(np.int32)))
        return _take(x, index, dim)
    if np.size(repeats) not in (1, n):
        raise ValueError(
            f"repeat: {np.size(repeats)} repeat counts for an axis of length {n}, at {user_location()}"
        )
    counts_np = np.broadcast_to(np.ravel(np.asarray(repeats)), (n,))
    starts_np = np.concatenate([[0], np.cumsum(counts_np)[:-1]])
    index_np = (np.searchsorted(starts_np, np.arange(total), side="right") - 1).astype(np.int32)
    return _take(x, convert(index_np, np.dtype(np.int32)), dim)


def _take(x: Array, index: Array, dim: int) -> Array:
    from ferrax.numpy._indexing import take

    return take(x, index, axis=dim)


def roll(a: ArrayLike, shift: ArrayLike | Sequence[int], axis: int | Sequence[int] | None = None) -> Array:
    """``a`` with its elements shifted by ``shift`` along ``axis`` (of the flattened
    array by default), wrapping around; the shift may be traced."""
    x = as_array(a, "roll")
    if axis is None:
        return _shape.reshape(roll(_shape.ravel(x), shift, 0), x.shape)
    axes = normalize_axes(axis, x.ndim, "roll") if isinstance(axis, (int, np.integer)) else tuple(
        normalize_axis(i, x.ndim, "roll") for i in axis
    )
    if isinstance(shift, Tracer):
        s = shift
        if len(broadcast_shapes(np.shape(s), (len(axes),) if len(axes) > 1 else ())) > 1:
            raise ValueError(f"'shift' and 'axis' arguments to roll must be scalars or 1D arrays, at {user_location()}")
        shifts = [s] if s.ndim == 0 else [lax.reshape(lax.slice(s, (i,), (i + 1,)), ()) for i in range(s.shape[0])]
        if len(shifts) == 1 and len(axes) > 1:
            shifts = shifts * len(axes)
        if len(axes) == 1 and len(shifts) > 1:
            axes = axes * len(shifts)
        for sh, ax in zip(shifts, axes):
            size = convert(x.shape[ax], np.dtype(np.int32))
            off = _ufuncs.remainder(convert(sh, np.dtype(np.int32)), lax.max(size, convert(1, np.dtype(np.int32))))
            doubled = lax.concatenate([x, x], ax)
            x = lax.dynamic_slice_in_dim(doubled, lax.sub(size, off), x.shape[ax], ax)
        return x
    static = np.atleast_1d(np.asarray(shift))
    if static.ndim > 1:
        raise ValueError(f"'shift' and 'axis' arguments to roll must be scalars or 1D arrays, at {user_location()}")
    return _roll_static(x, tuple(int(v) for v in static), tuple(axes))


@staged(static_argnames=("shift", "axis"))
def _roll_static(x: Array, shift: tuple[int, ...], axis: tuple[int, ...]) -> Array:
    for ax_np, sh_np in zip(*np.broadcast_arrays(np.asarray(axis), np.asarray(shift))):
        d, step = int(ax_np), int(sh_np)
        length = x.shape[d]
        if length == 0:
            continue
        cut = -step % length
        # Both slices even when one is empty, as JAX's.
        head_start, head_limit = [0] * x.ndim, list(x.shape)
        tail_start, tail_limit = [0] * x.ndim, list(x.shape)
        head_start[d] = cut
        tail_limit[d] = cut
        unit = (1,) * x.ndim
        x = lax.concatenate([lax.slice(x, head_start, head_limit, unit), lax.slice(x, tail_start, tail_limit, unit)], d)
    return x


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """The diagonal ``offset`` of the matrices on axes ``axis1`` and ``axis2``, as the
    last axis of the result (a gather, as JAX's)."""
    x = as_array(a, "diagonal")
    if x.ndim < 2:
        raise ValueError(f"diagonal requires an array of at least two dimensions, at {user_location()}")
    k = _static_int(offset, "diagonal", "offset")
    i1, i2 = normalize_axis(axis1, x.ndim, "diagonal"), normalize_axis(axis2, x.ndim, "diagonal")
    if i1 == i2:
        raise ValueError(f"axis1 and axis2 cannot be the same, at {user_location()}")
    rows, cols = x.shape[i1], x.shape[i2]
    y = moveaxis(x, (i1, i2), (-2, -1))
    size = builtins.max(0, builtins.min(rows + builtins.min(k, 0), cols - builtins.max(k, 0)))
    i = np.arange(size, dtype=np.int32)
    j = np.arange(builtins.abs(k), builtins.abs(k) + size, dtype=np.int32)
    rows_idx, cols_idx = (i, j) if k >= 0 else (j, i)
    out: Array = y[(Ellipsis, rows_idx, cols_idx)]
    return out


def diag(v: ArrayLike, k: int = 0) -> Array:
    """For a vector, the square matrix with ``v`` on diagonal ``k``; for a matrix, its
    diagonal ``k``."""
    x = as_array(v, "diag")
    k = operator.index(k)
    if x.ndim == 1:
        n = x.shape[0] + builtins.abs(k)
        zero = convert(0, x.dtype, aval_of(x).weak_type)
        padded = lax.pad(x, zero, ((builtins.max(0, -k), builtins.max(0, k), 0),))
        mask = _creation.eye(n, k=k, dtype=np.bool_)
        return _ufuncs.where(mask, _shape.insert_axes(padded, (1,)), zero)
    if x.ndim == 2:
        return diagonal(x, offset=k)
    raise ValueError(f"diag input must be 1d or 2d (got shape {list(x.shape)}), at {user_location()}")


@staged(static_argnames=("offset", "axis1", "axis2", "dtype"))
def trace(
    a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: DTypeLike | None = None, out: None = None
) -> Array:
    """The sum along diagonal ``offset`` of the matrices on axes ``axis1``/``axis2``
    (dtypes as :func:`sum`)."""
    _no_out("trace", out)
    x = as_array(a, "trace")
    i1, i2 = normalize_axis(axis1, x.ndim, "trace"), normalize_axis(axis2, x.ndim, "trace")
    if i1 == i2:
        raise ValueError(f"axis1 and axis2 can not be same. axis1={axis1} and axis2={axis2}, at {user_location()}")
    want = None if dtype is None else dtypes.canonicalize(dtype, "trace")
    y = moveaxis(x, (i1, i2), (-2, -1))
    mask = _creation.eye(x.shape[i1], x.shape[i2], k=offset, dtype=np.bool_)
    y = _ufuncs.where(mask, y, _creation.zeros_like(y))
    return _reductions.sum(y, axis=(-2, -1), dtype=want)


@staged(static_argnames=("n", "axis"))
def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: ArrayLike | None = None, append: ArrayLike | None = None) -> Array:
    """The ``n``-th differences along ``axis`` (``a[1:] - a[:-1]``, ``!=`` for bools),
    after ``prepend``/``append`` are joined on."""
    x = as_array(a, "diff")
    count = _static_int(n, "diff", "'n' argument")
    if count == 0:
        return x
    if count < 0:
        raise ValueError(f"order must be non-negative but got {count}, at {user_location()}")
    if x.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional, at {user_location()}")
    dim = normalize_axis(_static_int(axis, "diff", "'axis' argument"), x.ndim, "diff")
    parts: list[ArrayLike] = []
    for extra, front in ((prepend, True), (append, False)):
        if extra is None:
            continue
        e_ = as_array(extra, "diff")
        if e_.ndim == 0:
            shape = list(x.shape)
            shape[dim] = 1
            e_ = broadcast_to(e_, shape)
        parts.insert(0, e_) if front else parts.append(e_)
    if parts:
        idx = 1 if prepend is not None else 0
        parts.insert(idx, x)
        x = _shape.concatenate(parts, dim)
    for _ in range(count):
        length = x.shape[dim]
        hi_start, hi_limit = [0] * x.ndim, list(x.shape)
        lo_start, lo_limit = [0] * x.ndim, list(x.shape)
        hi_start[dim] = builtins.min(1, length)
        lo_limit[dim] = builtins.max(length - 1, 0)
        later, earlier = lax.slice(x, hi_start, hi_limit), lax.slice(x, lo_start, lo_limit)
        x = _ufuncs.not_equal(later, earlier) if x.dtype == np.bool_ else _ufuncs.subtract(later, earlier)
    return x


def select(condlist: Sequence[ArrayLike], choicelist: Sequence[ArrayLike], default: ArrayLike = 0) -> Array:
    """Elementwise, the choice of the first true condition (``default`` where none is)."""
    if len(condlist) != len(choicelist):
        raise ValueError(
            f"condlist must have length equal to choicelist ({len(condlist)} vs {len(choicelist)}), at {user_location()}"
        )
    if len(condlist) == 0:
        raise ValueError(f"condlist must be non-empty, at {user_location()}")
    conds = [as_array(c, "select", i) for i, c in enumerate(condlist)]
    choices = promote_dtypes("select", default, *choicelist)
    shape = broadcast_shapes(*(c.shape for c in conds), *(np.shape(c) for c in choices))
    out = broadcast_to(choices[0], shape)
    for cond, choice in reversed(list(zip(conds, choices[1:]))):
        which = broadcast_to(_ufuncs.not_equal(cond, False) if cond.dtype != np.bool_ else cond, shape)
        out = lax.select_n(which, out, broadcast_to(choice, shape))
    return out


# ---------------------------------------------------------------------------- products


def _result(
    a: ArrayLike, b: ArrayLike, name: str, preferred: DTypeLike | None
) -> tuple[Array, Array, np.dtype[Any], bool]:
    """The operands in their result type and the output's dtype and weak type (the
    operands' ``result_type``, or ``preferred``, strongly typed)."""
    avals = [operand_aval(name, a, 0), operand_aval(name, b, 1)]
    d, weak = dtypes.result_type([(v.dtype, v.weak_type) for v in avals])
    x, y = as_array(convert(a, d, weak), name, 0), as_array(convert(b, d, weak), name, 1)
    if preferred is not None:
        d, weak = dtypes.canonicalize(preferred, name), False
    return x, y, d, weak


def outer(a: ArrayLike, b: ArrayLike, out: None = None) -> Array:
    """The outer product of the flattened arrays: ``a[i] * b[j]``."""
    x, y = promote_dtypes("outer", a, b)
    return _ufuncs.multiply(_shape.insert_axes(_shape.ravel(x), (1,)), _shape.insert_axes(_shape.ravel(y), (0,)))


def tensordot(
    a: ArrayLike,
    b: ArrayLike,
    axes: int | Sequence[int] | Sequence[Sequence[int]] = 2,
    *,
    precision: Any = None,
    preferred_element_type: DTypeLike | None = None,
) -> Array:
    """The sum of products over ``axes``: the last ``axes`` of ``a`` with the first of
    ``b`` for an int, or the listed pairs (one ``dot_general``, accumulating in
    ``preferred_element_type`` if given)."""
    x, y, d, weak = _result(a, b, "tensordot", preferred_element_type)
    if isinstance(axes, (int, np.integer)):
        k = operator.index(axes)
        if k > builtins.min(x.ndim, y.ndim):
            raise TypeError(
                f"Number of tensordot axes (axes {k}) exceeds input ranks ({x.shape} and {y.shape}), at {user_location()}"
            )
        contract = (tuple(range(x.ndim - k, x.ndim)), tuple(range(k)))
    elif isinstance(axes, (tuple, list)) and len(axes) == 2:
        ax1, ax2 = axes
        if isinstance(ax1, (int, np.integer)) and isinstance(ax2, (int, np.integer)):
            contract = ((normalize_axis(int(ax1), x.ndim, "tensordot"),), (normalize_axis(int(ax2), y.ndim, "tensordot"),))
        elif isinstance(ax1, (tuple, list)) and isinstance(ax2, (tuple, list)):
            if len(ax1) != len(ax2):
                raise TypeError(
                    f"tensordot requires axes lists to have equal length, got {ax1} and {ax2}, at {user_location()}"
                )
            contract = (
                tuple(normalize_axis(i, x.ndim, "tensordot") for i in ax1),
                tuple(normalize_axis(i, y.ndim, "tensordot") for i in ax2),
            )
        else:
            raise TypeError(
                "tensordot requires both axes lists to be either ints, tuples or lists, "
                f"got {ax1} and {ax2}, at {user_location()}"
            )
    else:
        raise TypeError(
            "tensordot axes argument must be an int, a pair of ints, or a pair of lists/tuples of ints, "
            f"at {user_location()}"
        )
    for i, j in zip(*contract):
        if x.shape[i] != y.shape[j]:
            raise TypeError(
                f"tensordot: cannot contract axis {i} of shape {list(x.shape)} with axis {j} of shape "
                f"{list(y.shape)}, at {user_location()}"
            )
    out = lax.dot_general(x, y, (contract, ((), ())), precision, preferred_element_type=d)
    return convert(out, d, weak)


def inner(
    a: ArrayLike, b: ArrayLike, *, precision: Any = None, preferred_element_type: DTypeLike | None = None
) -> Array:
    """The sum of products over the last axes (a product for a scalar operand)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        if preferred_element_type is not None:
            want = dtypes.canonicalize(preferred_element_type, "inner")
            a, b = convert(a, want), convert(b, want)
        return _ufuncs.multiply(a, b)
    return tensordot(a, b, (-1, -1), precision=precision, preferred_element_type=preferred_element_type)


def kron(a: ArrayLike, b: ArrayLike) -> Array:
    """The Kronecker product: blocks ``a[i, j] * b``."""
    x, y = (as_array(v, "kron", i) for i, v in enumerate(promote_dtypes("kron", a, b)))
    if x.ndim < y.ndim:
        x = _shape.reshape(x, (1,) * (y.ndim - x.ndim) + x.shape)
    elif y.ndim < x.ndim:
        y = _shape.reshape(y, (1,) * (x.ndim - y.ndim) + y.shape)
    xs = _shape.insert_axes(x, tuple(range(1, 2 * x.ndim, 2)))
    ys = _shape.insert_axes(y, tuple(range(0, 2 * y.ndim, 2)))
    return _shape.reshape(_ufuncs.multiply(xs, ys), tuple(p * q for p, q in zip(x.shape, y.shape)))


# -------------------------------------------------------------------------- reductions


def count_nonzero(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """The number of nonzero (true) elements over ``axis``, as the default int."""
    x = as_array(a, "count_nonzero")
    return _reductions.sum(lax.ne(x, _const(x, 0)), axis=axis, dtype=dtypes.default_int(), keepdims=keepdims)


def _count(x: Array, axes: tuple[int, ...], where: ArrayLike | None, dtype: np.dtype[Any], keepdims: bool) -> Array:
    if where is None:
        n = 1
        for i in axes:
            n *= x.shape[i]
        out = convert(n, dtype)
        if keepdims:
            out = broadcast_to(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
        return out
    mask = broadcast_to(_ufuncs.not_equal(where, False), x.shape)
    return _reductions.sum(mask, axis=axes, dtype=dtype, keepdims=keepdims)


def _var_dtypes(d: np.dtype[Any], dtype: DTypeLike | None, name: str) -> tuple[np.dtype[Any], np.dtype[Any]]:
    """(computation, result) dtypes of ``var``/``std``, as JAX's ``_var_promote_types``."""
    if dtype is None:
        result = dtypes.to_inexact(d)
    else:
        result = dtypes.canonicalize(dtype, name)
        if not dtypes.is_float(result):
            raise ValueError(f"{name}: dtype must be a floating dtype, got {result}, at {user_location()}")
    compute = dtypes.to_inexact(result if dtype is not None else d)
    if compute in (np.dtype(np.float16), dtypes.bfloat16):
        compute = np.dtype(np.float32)
    return compute, result


def var(
    a: ArrayLike,
    axis: Axis = None,
    dtype: DTypeLike | None = None,
    out: None = None,
    ddof: int = 0,
    keepdims: bool = False,
    *,
    where: ArrayLike | None = None,
    mean: ArrayLike | None = None,
    correction: int | float | None = None,
) -> Array:
    """The variance over ``axis`` of the elements where ``where`` is true: the mean
    squared deviation (from ``mean`` if given, with the reduced axes kept), divided by
    the count less ``correction`` (``ddof``); NaN where that is not positive."""
    if correction is None:
        correction = ddof
    elif ddof != 0:
        raise ValueError(f"ddof and correction can't be provided simultaneously, at {user_location()}")
    return _var(a, _static_axis(axis), dtype, out, correction, keepdims, where=where, mean=mean)


def _static_axis(axis: Axis) -> Axis:
    """``axis`` as a jit's static argument: a list as a tuple."""
    return tuple(axis) if isinstance(axis, list) else axis


@staged(static_argnames=("axis", "dtype", "keepdims"))
def _var(
    a: ArrayLike, axis: Axis, dtype: DTypeLike | None, out: None, correction: int | float, keepdims: bool, *,
    where: ArrayLike | None, mean: ArrayLike | None,
) -> Array:
    x = as_array(a, "var")
    axes = normalize_axes(axis, x.ndim, "var")
    compute, result = _var_dtypes(x.dtype, dtype, "var")
    xc = convert(x, compute)
    center = _reductions.mean(xc, axes, keepdims=True, where=where) if mean is None else convert(mean, compute)
    centered = lax.square(_ufuncs.subtract(xc, center))
    # Without `where` the count is a scalar, as in JAX.
    count = _count(xc, axes, where, compute, keepdims and where is not None)
    normalizer = lax.sub(count, convert(correction, compute))
    total = _reductions.sum(centered, axes, dtype=compute, keepdims=keepdims, where=where)
    value = convert(lax.div(total, normalizer), result)
    return _ufuncs.where(lax.gt(normalizer, convert(0, compute)), value, np.nan)


def std(
    a: ArrayLike,
    axis: Axis = None,
    dtype: DTypeLike | None = None,
    out: None = None,
    ddof: int = 0,
    keepdims: bool = False,
    *,
    where: ArrayLike | None = None,
    mean: ArrayLike | None = None,
    correction: int | float | None = None,
) -> Array:
    """The standard deviation: the square root of :func:`var`."""
    if correction is None:
        correction = ddof
    elif ddof != 0:
        raise ValueError(f"ddof and correction can't be provided simultaneously, at {user_location()}")
    return _std(a, _static_axis(axis), dtype, out, correction, keepdims, where=where, mean=mean)


@staged(static_argnames=("axis", "dtype", "keepdims"))
def _std(
    a: ArrayLike, axis: Axis, dtype: DTypeLike | None, out: None, correction: int | float, keepdims: bool, *,
    where: ArrayLike | None, mean: ArrayLike | None,
) -> Array:
    return lax.sqrt(var(a, axis, dtype, None, 0, keepdims, where=where, mean=mean, correction=correction))


@overload
def average(
    a: ArrayLike, axis: Axis = None, weights: ArrayLike | None = None, returned: Literal[False] = False,
    keepdims: bool = False,
) -> Array: ...
@overload
def average(
    a: ArrayLike, axis: Axis = None, weights: ArrayLike | None = None, *, returned: Literal[True],
    keepdims: bool = False,
) -> tuple[Array, Array]: ...
@overload
def average(
    a: ArrayLike, axis: Axis = None, weights: ArrayLike | None = None, returned: bool = False,
    keepdims: bool = False,
) -> Array | tuple[Array, Array]: ...
def average(
    a: ArrayLike,
    axis: Axis = None,
    weights: ArrayLike | None = None,
    returned: bool = False,
    keepdims: bool = False,
) -> Array | tuple[Array, Array]:
    """The mean over ``axis`` weighted by ``weights`` (of ``a``'s shape, or of the
    reduced axes'); with ``returned``, also the sum of the weights."""
    x0 = as_array(a, "average")
    axes = normalize_axes(axis, x0.ndim, "average")
    if weights is None:
        (x,) = promote_args_inexact("average", x0)
        avg = _reductions.mean(x, axis=axis, keepdims=keepdims)
        n = 1
        for i in axes:
            n *= x.shape[i]
        weights_sum = convert(n, avg.dtype)
    else:
        x, w = _promote_inexact("average", x0, weights)
        if x.shape != w.shape:
            if axis is None:
                raise ValueError(f"Axis must be specified when shapes of a and weights differ, at {user_location()}")
            if w.shape != tuple(x.shape[i] for i in axes):
                raise ValueError(
                    f"Shape of weights must be consistent with shape of a along specified axis, at {user_location()}"
                )
            order = np.argsort(axes)
            w = _shape.transpose(w, [int(i) for i in order]) if len(axes) > 1 else w
            w = _shape.reshape(w, tuple(d if i in axes else 1 for i, d in enumerate(x.shape)))
        weights_sum = _reductions.sum(w, axis=axis, keepdims=keepdims)
        avg = _ufuncs.true_divide(_reductions.sum(_ufuncs.multiply(x, w), axis=axis, keepdims=keepdims), weights_sum)
    if returned:
        if avg.shape != weights_sum.shape:
            weights_sum = broadcast_to(weights_sum, avg.shape)
        return avg, weights_sum
    return avg


def _nan_reduction(
    name: str, reduction: Any, init: float, nan_if_all_nan: bool, a: ArrayLike, axis: Axis, keepdims: bool,
    where: ArrayLike | None, **kwargs: Any,
) -> Array:
    x = as_array(a, name)
    if not _is_float(x):
        return reduction(x, axis=axis, keepdims=keepdims, where=where, **kwargs)  # type: ignore[no-any-return]
    filled = _ufuncs.where(isnan(x), _const(x, init), x)
    out: Array = reduction(filled, axis=axis, keepdims=keepdims, where=where, **kwargs)
    if nan_if_all_nan:
        return _ufuncs.where(_reductions.all(isnan(x), axis=axis, keepdims=keepdims), _const(x, np.nan), out)
    return out


def nansum(
    a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None, keepdims: bool = False,
    initial: ArrayLike | None = None, where: ArrayLike | None = None,
) -> Array:
    """:func:`sum` with NaNs counted as zero."""
    return _nan_reduction("nansum", _reductions.sum, 0, False, a, axis, keepdims, where, dtype=dtype, initial=initial)


def nanprod(
    a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None, keepdims: bool = False,
    initial: ArrayLike | None = None, where: ArrayLike | None = None,
) -> Array:
    """:func:`prod` with NaNs counted as one."""
    return _nan_reduction("nanprod", _reductions.prod, 1, False, a, axis, keepdims, where, dtype=dtype, initial=initial)


def nanmax(
    a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
    initial: ArrayLike | None = None, where: ArrayLike | None = None,
) -> Array:
    """:func:`max` ignoring NaNs (NaN where every element is NaN and there is no
    ``initial``)."""
    return _nan_reduction("nanmax", _reductions.max, -np.inf, initial is None, a, axis, keepdims, where, initial=initial)


def nanmin(
    a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
    initial: ArrayLike | None = None, where: ArrayLike | None = None,
) -> Array:
    """:func:`min` ignoring NaNs (NaN where every element is NaN and there is no
    ``initial``)."""
    return _nan_reduction("nanmin", _reductions.min, np.inf, initial is None, a, axis, keepdims, where, initial=initial)


def nanmean(
    a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None, keepdims: bool = False,
    where: ArrayLike | None = None,
) -> Array:
    """:func:`mean` of the elements that are not NaN (NaN if there are none)."""
    x = as_array(a, "nanmean")
    if not _is_float(x):
        return _reductions.mean(x, axis, dtype, keepdims=keepdims, where=where)
    want = dtypes.to_inexact(x.dtype) if dtype is None else dtypes.canonicalize(dtype, "mean")
    present = lax.bitwise_not(isnan(x))
    count = _reductions.sum(present, axis=axis, dtype=want, keepdims=keepdims, where=where)
    return lax.div(nansum(x, axis, dtype=want, keepdims=keepdims, where=where), count)


def nanvar(
    a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None, ddof: int = 0,
    keepdims: bool = False, where: ArrayLike | None = None, mean: ArrayLike | None = None,
) -> Array:
    """:func:`var` of the elements that are not NaN (about ``mean`` if given)."""
    x = as_array(a, "nanvar")
    compute, result = _var_dtypes(x.dtype, dtype, "nanvar")
    xc = convert(x, compute)
    if mean is None:
        center = broadcast_to(nanmean(xc, axis, dtype=compute, keepdims=True, where=where), xc.shape)
    else:
        center = broadcast_to(convert(mean, compute), xc.shape)
    missing = isnan(xc)
    centered = lax.square(_ufuncs.where(missing, _const(xc, 0), lax.sub(xc, center)))
    normalizer = _ufuncs.subtract(_reductions.sum(lax.bitwise_not(missing), axis=axis, keepdims=keepdims, where=where), ddof)
    empty_ = lax.le(normalizer, _const(normalizer, 0))
    total = _reductions.sum(centered, axis, keepdims=keepdims, where=where)
    total = _ufuncs.where(empty_, _const(total, np.nan), total)
    divisor = _ufuncs.where(empty_, _const(normalizer, 1), normalizer)
    return convert(lax.div(total, convert(divisor, total.dtype)), result)


def nanstd(
    a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None, ddof: int = 0,
    keepdims: bool = False, where: ArrayLike | None = None, mean: ArrayLike | None = None,
) -> Array:
    """:func:`std` of the elements that are not NaN."""
    return lax.sqrt(nanvar(a, axis, dtype, None, ddof, keepdims, where, mean))


def _nanarg(name: str, fill: float, reduce: Any, a: ArrayLike, axis: int | None, keepdims: bool) -> Array:
    x = as_array(a, name)
    if not _is_float(x):
        return reduce(x, axis, keepdims=keepdims)  # type: ignore[no-any-return]
    missing = isnan(x)
    out = reduce(_ufuncs.where(missing, _const(x, fill), x), axis, keepdims=keepdims)
    return _ufuncs.where(_reductions.all(missing, axis=axis, keepdims=keepdims), -1, out)


def nanargmax(a: ArrayLike, axis: int | None = None, out: None = None, keepdims: bool | None = None) -> Array:
    """:func:`argmax` ignoring NaNs (-1 where every element is NaN)."""
    return _nanarg("nanargmax", -np.inf, _reductions.argmax, a, axis, bool(keepdims))


def nanargmin(a: ArrayLike, axis: int | None = None, out: None = None, keepdims: bool | None = None) -> Array:
    """:func:`argmin` ignoring NaNs (-1 where every element is NaN)."""
    return _nanarg("nanargmin", np.inf, _reductions.argmin, a, axis, bool(keepdims))



# ------------------------------------------------------------------ piecewise, interp


def piecewise(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Array:
    """``funclist[k](x)`` where ``condlist[k]`` is true (the last true condition wins),
    elsewhere ``funclist[len(condlist)]`` if given, else 0; constants stand for
    functions returning them. Each function sees one element at a time (a ``switch``
    vectorized with ``vmap``); results take ``x``'s dtype."""
    from ferrax import vmap

    a = as_array(x, "piecewise")
    conds = list(condlist) if isinstance(condlist, (list, tuple)) else [condlist[i] for i in range(np.shape(condlist)[0])]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        funcs = [funclist[-1], *funclist[:-1]]
    elif nf == nc:
        funcs = [0, *funclist]
    else:
        raise ValueError(
            f"with {nc} condition(s), either {nc} or {nc + 1} functions are expected; got {nf}, at {user_location()}"
        )
    index = convert(0, dtypes.default_int())
    for k, c in enumerate(conds):
        index = _ufuncs.where(convert(c, np.dtype(np.bool_)), convert(k + 1, dtypes.default_int()), index)
    shape = broadcast_shapes(a.shape, index.shape)
    flat_x = _shape.ravel(broadcast_to(a, shape))
    flat_i = _shape.ravel(broadcast_to(index, shape))
    dtype = a.dtype

    def branch(f: Any) -> Any:
        if callable(f):
            return lambda v: convert(as_array(f(v, *args, **kw)), dtype)
        return lambda v: convert(f, dtype)

    branches = [branch(f) for f in funcs]
    out = vmap(lambda i, v: lax.switch(i, branches, v))(flat_i, flat_x)
    return _shape.reshape(out, shape)


def interp(
    x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike | str | None = None,
    right: ArrayLike | str | None = None, period: ArrayLike | None = None,
) -> Array:
    """Linear interpolation of the points ``(xp, fp)`` (``xp`` increasing) at ``x``;
    ``fp[0]``/``fp[-1]`` (or ``left``/``right``, or ``'extrapolate'``) outside. With
    ``period``, ``x`` and ``xp`` are angles modulo ``period`` (``xp`` in any order)."""
    xa, xpa, fpa = as_array(x, "interp", 0), as_array(xp, "interp", 1), as_array(fp, "interp", 2)
    if xpa.shape != fpa.shape or xpa.ndim != 1:
        raise ValueError(f"xp and fp must be one-dimensional arrays of equal size, at {user_location()}")
    xv, xpv = _promote_inexact("interp", xa, xpa)
    (fpv,) = _promote_inexact("interp", fpa)
    extrapolate = []
    for name, side in (("left", left), ("right", right)):
        if isinstance(side, str) and side != "extrapolate":
            raise ValueError(
                f"the only valid string value of `{name}` is 'extrapolate', but got: {side!r}, at {user_location()}"
            )
        extrapolate.append(isinstance(side, str))
    if period is not None:
        if np.ndim(period) != 0:
            raise ValueError(f"period must be a scalar; got {period}, at {user_location()}")
        span = _ufuncs.abs(period)
        xv, xpv = _ufuncs.remainder(xv, span), _ufuncs.remainder(xpv, span)
        xpv, fpv = lax.sort_key_val(xpv, fpv)
        end = xpv.shape[0]
        xpv = _shape.concatenate([
            _ufuncs.subtract(lax.slice(xpv, (end - 1,), (end,)), span), xpv, _ufuncs.add(lax.slice(xpv, (0,), (1,)), span)
        ])
        fpv = _shape.concatenate([lax.slice(fpv, (end - 1,), (end,)), fpv, lax.slice(fpv, (0,), (1,))])
    from ferrax.numpy._sorting import searchsorted

    n = xpv.shape[0]
    count = searchsorted(xpv, xv, side="right")
    i = _ufuncs.clip(count, 1, builtins.max(n - 1, 1))
    from ferrax.numpy._indexing import take

    def at(v: Array, idx: Array) -> Array:
        return take(v, idx, mode="clip")

    im1 = _ufuncs.subtract(i, 1)
    df = _ufuncs.subtract(at(fpv, i), at(fpv, im1))
    dx = _ufuncs.subtract(at(xpv, i), at(xpv, im1))
    delta = _ufuncs.subtract(xv, at(xpv, im1))
    epsilon = np.spacing(finfo(xpv.dtype).eps)
    dx0 = _ufuncs.less_equal(lax.abs(dx), convert(epsilon, dx.dtype))
    slope = _ufuncs.true_divide(delta, _ufuncs.where(dx0, 1, dx))
    f = _ufuncs.where(dx0, at(fpv, im1), _ufuncs.add(at(fpv, im1), _ufuncs.multiply(slope, df)))
    first, last = _shape.reshape(lax.slice(fpv, (0,), (1,)), ()), _shape.reshape(lax.slice(fpv, (n - 1,), (n,)), ())
    x_first, x_last = _shape.reshape(lax.slice(xpv, (0,), (1,)), ()), _shape.reshape(lax.slice(xpv, (n - 1,), (n,)), ())
    if not extrapolate[0] and period is None:
        f = _ufuncs.where(_ufuncs.less(xv, x_first), first if left is None else left, f)  # type: ignore[arg-type]
    if not extrapolate[1] and period is None:
        f = _ufuncs.where(_ufuncs.greater(xv, x_last), last if right is None else right, f)  # type: ignore[arg-type]
    return f
