"""Bit-level primitives: ``population_count``, ``clz``, ``bitcast_convert_type`` and
``threefry2x32`` (the block cipher under JAX's default PRNG), and the two float
primitives defined on bit patterns, ``nextafter`` and ``reduce_precision``.

Their eager rules work on bit patterns with NumPy. The bit primitives' results are
integers (or, for a bitcast, bits read as another dtype), so every derivative is zero,
as in JAX; ``reduce_precision`` is linear (JAX's rule: the tangent rounded the same
way) and ``nextafter`` has no derivative (JAX raises ``NotImplementedError``). The eager
``nextafter`` and ``reduce_precision`` give XLA's CPU results bit for bit (see their
rules), so eager, jitted and JAX agree.
"""

from __future__ import annotations

import operator
from typing import Any, SupportsIndex

import ml_dtypes
import numpy as np

from ferrax._array import Array
from ferrax._core import Primitive, Tracer, aval_of, user_location
from ferrax._interpreters import ad
from ferrax.errors import ConcretizationError, DifferentiationError, ShapeError, TypeCheckError
from ferrax._lax._operands import bind1, canonical_dtype, quiet, scalar

__all__ = ["bitcast_convert_type", "clz", "nextafter", "population_count", "reduce_precision", "threefry2x32"]

NDArray = np.ndarray[Any, Any]


def _unsigned(x: NDArray) -> NDArray:
    """The bits of an integer array, as the unsigned dtype of its width."""
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _population_count(x: NDArray) -> NDArray:
    return np.bitwise_count(_unsigned(x)).astype(x.dtype)


def _clz(x: NDArray) -> NDArray:
    u = _unsigned(x)
    width = 8 * x.dtype.itemsize
    # The bit length by halving: at each step, shift off the top half if it is nonzero.
    length = np.zeros(u.shape, np.int64)
    rest = u.copy()
    step = width // 2
    while step:
        high = rest >> u.dtype.type(step)
        moved = high != 0
        length = np.where(moved, length + step, length)
        rest = np.where(moved, high, rest)
        step //= 2
    length = length + (rest != 0)
    out: NDArray = (width - length).astype(x.dtype)
    return out


population_count_p = Primitive.builtin("population_count")
population_count_p.def_impl(_population_count)
clz_p = Primitive.builtin("clz")
clz_p.def_impl(_clz)


def _bitcast(x: NDArray, *, new_dtype: np.dtype[Any]) -> NDArray:
    new = np.dtype(new_dtype)
    old_size, new_size = x.dtype.itemsize, new.itemsize
    x = np.array(x, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    if old_size == new_size:
        return x.view(new)
    if old_size > new_size:
        # Narrowing: each element's parts in a new trailing axis, least significant first
        # (XLA's order, which is a little-endian host's memory order).
        return x.reshape(*x.shape, 1).view(new).reshape(*x.shape, old_size // new_size)
    widened: NDArray = x.view(new)
    return widened.reshape(x.shape[:-1])


bitcast_convert_type_p = Primitive.builtin("bitcast_convert_type")
bitcast_convert_type_p.def_impl(_bitcast)

# The key schedule's parity constant and the rotations of the 20 rounds (Salmon et al.,
# "Parallel random numbers: as easy as 1, 2, 3", 2011).
_PARITY = np.uint32(0x1BD11BDA)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotate_left(v: NDArray, r: int) -> NDArray:
    return (v << np.uint32(r)) | (v >> np.uint32(32 - r))


@quiet
def _threefry2x32(k0: NDArray, k1: NDArray, x0: NDArray, x1: NDArray) -> tuple[NDArray, NDArray]:
    shape = np.broadcast_shapes(*(np.shape(a) for a in (k0, k1, x0, x1)))
    # Flat arrays (not 0-d), so that uint32 arithmetic wraps without NumPy's scalar warnings.
    k0, k1, x0, x1 = (np.broadcast_to(a, shape).reshape(-1).astype(np.uint32) for a in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    a, b = x0 + ks[0], x1 + ks[1]
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            a = a + b
            b = _rotate_left(b, r) ^ a
        a = a + ks[(group + 1) % 3]
        b = b + ks[(group + 2) % 3] + np.uint32(group + 1)
    return a.reshape(shape), b.reshape(shape)


threefry2x32_p = Primitive.builtin("threefry2x32", multiple_results=True)
threefry2x32_p.def_impl(_threefry2x32)


# ------------------------------------------------------- floats as bit patterns (issue 12)


class _Format:
    """A float dtype's bit fields, as unsigned values of its width."""

    def __init__(self, dtype: np.dtype[Any]) -> None:
        info = ml_dtypes.finfo(dtype)  # type: ignore[no-untyped-call]
        self.uint = np.dtype(f"u{dtype.itemsize}")
        self.exponent_bits, self.mantissa_bits = int(info.nexp), int(info.nmant)
        self.sign = self.uint.type(1 << (8 * dtype.itemsize - 1))
        self.magnitude = self.uint.type((1 << (8 * dtype.itemsize - 1)) - 1)
        self.exponent = self.uint.type(((1 << self.exponent_bits) - 1) << self.mantissa_bits)
        # The quiet NaN XLA produces: positive, only the quiet bit in the mantissa.
        self.nan = self.uint.type(int(self.exponent) | (1 << (self.mantissa_bits - 1)))

    def u(self, value: int) -> Any:
        return self.uint.type(value)


@quiet
def _nextafter(x: NDArray, y: NDArray) -> NDArray:
    """XLA's CPU ``nextafter``, bit for bit: NaN if either operand is (the canonical
    quiet NaN), ``y`` if they compare equal (so ``nextafter(0.0, -0.0)`` is ``-0.0``), the
    smallest subnormal of ``y``'s sign from a zero, else ``x`` stepped one ulp towards
    ``y``. XLA compares with subnormals flushed to zero in float32, float64 and bfloat16
    (computed in float32): two operands that are each zero or subnormal are equal there;
    float16 compares exactly."""
    shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    x, y = np.broadcast_arrays(np.atleast_1d(x), np.atleast_1d(y))
    f = _Format(x.dtype)
    a, b = x.view(f.uint), y.view(f.uint)
    ma, mb = a & f.magnitude, b & f.magnitude
    nan = (ma > f.exponent) | (mb > f.exponent)
    equal = (a == b) | ((ma == 0) & (mb == 0))
    if x.dtype != np.float16:
        equal |= ((a & f.exponent) == 0) & ((b & f.exponent) == 0)
    # Patterns of one sign are ordered as their magnitudes.
    away_from_zero = ((a & f.sign) == (b & f.sign)) & (mb > ma)
    out = np.where(away_from_zero, a + f.u(1), a - f.u(1))
    out = np.where(ma == 0, (b & f.sign) | f.u(1), out)
    out = np.where(equal, b, out)
    out = np.where(nan, f.nan, out).astype(f.uint)
    result: NDArray = out.view(x.dtype).reshape(shape)
    return result


@quiet
def _reduce_precision(x: NDArray, *, exponent_bits: int, mantissa_bits: int) -> NDArray:
    """XLA's ``reduce_precision``, bit for bit: the mantissa rounded to nearest even at
    ``mantissa_bits`` (a carry may raise the exponent, up to an infinity), then exponents
    above the narrow format's range become infinities and those at or below its smallest
    normal exponent zeros (no subnormals), signs kept. A NaN stays the same NaN, but in
    bfloat16, which XLA computes in float32, becomes the quiet NaN of its sign (unless
    the format holds float32's, where XLA drops the operation)."""
    x = np.asarray(x)
    shape = x.shape
    x = np.atleast_1d(x)
    f = _Format(x.dtype)
    v = x.view(f.uint).copy()
    if mantissa_bits < f.mantissa_bits:
        shift = f.u(f.mantissa_bits - mantissa_bits)
        last = f.u(1) << shift
        v = v + ((last >> f.u(1)) - f.u(1) + ((v & last) >> shift))
        v = v & ~(last - f.u(1))
    if exponent_bits < f.exponent_bits:
        bias = (1 << (f.exponent_bits - 1)) - 1
        reduced = (1 << (exponent_bits - 1)) - 1
        e = v & f.exponent
        zero = v & f.sign
        v = np.where(e > f.u((bias + reduced) << f.mantissa_bits), zero | f.exponent, v)
        v = np.where(e <= f.u((bias - reduced) << f.mantissa_bits), zero, v)
    bits = x.view(f.uint)
    nan = (bits & f.magnitude) > f.exponent
    through_f32 = x.dtype == ml_dtypes.bfloat16 and (exponent_bits < 8 or mantissa_bits < 23)
    kept = (bits & f.sign) | f.nan if through_f32 else bits
    out: NDArray = np.where(nan, kept, v).astype(f.uint).view(x.dtype).reshape(shape)
    return out


nextafter_p = Primitive.builtin("nextafter")
nextafter_p.def_impl(_nextafter)
reduce_precision_p = Primitive.builtin("reduce_precision")
reduce_precision_p.def_impl(_reduce_precision)


# ------------------------------------------------------------------------- functions


def population_count(x: Any) -> Array:
    """The number of set bits of each element of an integer array (its dtype out)."""
    return bind1(population_count_p, scalar(x))


def clz(x: Any) -> Array:
    """The number of leading zero bits of each element of an integer array, in its
    dtype's width (its dtype out)."""
    return bind1(clz_p, scalar(x))


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Array:
    """The bits of ``operand`` read as ``new_dtype`` (``stablehlo.bitcast_convert``).

    Widths equal: the operand's shape. A narrower ``new_dtype`` adds a trailing axis of
    the widths' ratio (least significant part first); a wider one takes an operand whose
    last axis is that ratio (a scalar counts as 1) and removes it. ``bool`` converts only
    to itself. The result is never weakly typed.
    """
    dtype = canonical_dtype(new_dtype, "bitcast_convert_type")
    x = scalar(operand)
    aval = aval_of(x)
    old_bits, new_bits = 8 * aval.dtype.itemsize, 8 * dtype.itemsize
    if (aval.dtype == np.bool_ or dtype == np.bool_) and aval.dtype != dtype:
        raise TypeCheckError(
            "lax.bitcast_convert_type does not support bool values unless the operand and "
            f"destination types match: got operand dtype={aval.dtype}, new_dtype={dtype}, "
            f"at {user_location()}"
        )
    if old_bits < new_bits:
        last = aval.shape[-1] if aval.shape else 1
        if last * old_bits != new_bits:
            raise ShapeError(
                f"lax.bitcast_convert_type: converting an array of shape {tuple(aval.shape)} "
                f"from {aval.dtype} ({old_bits} bits) to {dtype} ({new_bits} bits) needs a "
                f"last axis of {new_bits // old_bits}, got {last}, at {user_location()}"
            )
    return bind1(bitcast_convert_type_p, x, new_dtype=dtype)


def threefry2x32(k1: Any, k2: Any, x1: Any, x2: Any) -> tuple[Array, Array]:
    """The Threefry-2x32 block cipher (20 rounds) of the counts ``(x1, x2)`` under the
    key ``(k1, k2)``, elementwise: four ``uint32`` arrays that broadcast together (scalars,
    and size-1 axes of arrays of one rank), two ``uint32`` arrays out. The primitive
    under JAX's default PRNG (``jax._src.random.threefry2x32``)."""
    y1, y2 = threefry2x32_p.bind(*(scalar(a) for a in (k1, k2, x1, x2)))
    return y1, y2


def nextafter(x1: Any, x2: Any) -> Array:
    """The float next to ``x1`` in the direction of ``x2``, elementwise (operands of one
    float dtype; Python scalars take the default float type, as in JAX: use
    ``ferrax.numpy.nextafter`` to promote). ``x2`` where they are equal, NaN where
    either is. As XLA on CPU: subnormal operands compare as zero (float16's excepted),
    so ``nextafter(0.0, 1.0)`` is the smallest subnormal but ``nextafter`` of two
    subnormals is the second. Not differentiable (as in JAX)."""
    return bind1(nextafter_p, scalar(x1), scalar(x2))


def _concrete_bits(value: Any, what: str) -> int:
    if isinstance(value, Tracer):
        raise ConcretizationError(
            f"{what} of lax.reduce_precision must be a concrete integer, got a traced value, "
            f"at {user_location()}"
        )
    return operator.index(value)


def reduce_precision(operand: Any, exponent_bits: SupportsIndex, mantissa_bits: SupportsIndex) -> Array:
    """``operand`` rounded to the float format of ``exponent_bits`` and
    ``mantissa_bits`` and back to its dtype (XLA's ``ReducePrecision``): the mantissa to
    nearest even, out-of-range exponents to infinities, values below the format's
    smallest normal to zeros; NaN stays NaN. Floats only; the counts are integers known
    while tracing (``operator.index``: ``exponent_bits`` at least 1, ``mantissa_bits`` at
    least 0, as JAX checks).
    ``reduce_precision(x, 5, 10)`` rounds as float16 does (without its subnormals),
    ``reduce_precision(x, 8, 7)`` as bfloat16."""
    e = _concrete_bits(exponent_bits, "exponent_bits")
    m = _concrete_bits(mantissa_bits, "mantissa_bits")
    if e < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got {e}, at {user_location()}")
    if m < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be non-negative; got {m}, at {user_location()}")
    return bind1(reduce_precision_p, scalar(operand), exponent_bits=e, mantissa_bits=m)


# -------------------------------------------------------------------------- derivatives


def _zero_jvp(primitive: Primitive) -> None:
    """Integer results (or bits read as floats, as JAX has it): zero tangents."""

    def rule(primals: Any, tangents: Any, **params: Any) -> tuple[Any, Any]:
        out = primitive.bind(*primals, **params)
        if primitive.multiple_results:
            return out, [ad.Zero(aval_of(o)) for o in out]
        return out, ad.Zero(aval_of(out))

    primitive.def_jvp(rule)


for _p in (population_count_p, clz_p, bitcast_convert_type_p, threefry2x32_p):
    _zero_jvp(_p)


def _nextafter_jvp(primals: Any, tangents: Any) -> Any:
    # JAX 0.10 defines no derivative for nextafter: differentiating it is an error there
    # too (operands without a tangent, e.g. behind stop_gradient, never get here).
    raise DifferentiationError(f"Differentiation rule for 'nextafter' not implemented, at {user_location()}")


nextafter_p.def_jvp(_nextafter_jvp)
# JAX's rule: linear, the tangent rounded the same way (and so is the cotangent).
ad.deflinear(reduce_precision_p)


# ----------------------------------------------------------------------------- batching


def _bitcast_batch(vals: Any, dims: Any, *, axis_size: int, new_dtype: Any) -> tuple[Any, int]:
    from ferrax._interpreters import batching

    (x,), (d,) = vals, dims
    # A bitcast to a wider dtype consumes the last axis (a narrower one appends one): a
    # batch axis there moves to the front first.
    if d == x.ndim - 1 and np.dtype(new_dtype).itemsize != x.dtype.itemsize:
        x, d = batching.moveaxis(x, d, 0), 0
    return bind1(bitcast_convert_type_p, x, new_dtype=new_dtype), d


def _threefry_batch(vals: Any, dims: Any, *, axis_size: int) -> tuple[list[Any], list[int]]:
    """Broadcasting operands: batch axes to the front; an unbatched array gets a leading
    axis of 1, and a batched scalar element size-1 axes up to the others' rank (an
    unbatched scalar broadcasts as it is)."""
    from ferrax._interpreters import batching
    from ferrax._lax.structural import reshape

    rank = max(v.ndim - (d is not None) for v, d in zip(vals, dims))
    args = []
    for v, d in zip(vals, dims):
        if d is None:
            args.append(v if v.ndim == 0 else reshape(v, (1, *v.shape)))
            continue
        v = batching.moveaxis(v, d, 0)
        if v.ndim - 1 < rank:
            v = reshape(v, (axis_size, *([1] * rank)))
        args.append(v)
    return list(threefry2x32_p.bind(*args)), [0, 0]


def _install_batching() -> None:
    from ferrax._interpreters import batching

    batching.defvectorized(population_count_p)
    batching.defvectorized(clz_p)
    bitcast_convert_type_p.def_batch(_bitcast_batch)
    threefry2x32_p.def_batch(_threefry_batch)
    batching.defvectorized(reduce_precision_p)
    from ferrax._lax.elementwise import _elementwise_batch

    _elementwise_batch(nextafter_p, True)


_install_batching()
