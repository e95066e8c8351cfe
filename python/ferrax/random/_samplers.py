"""Samplers: JAX 0.10's algorithms mapping threefry bits to values, step for step.

Traced (``make_jaxpr``, under ``jit``), a sampler is what JAX's is: its nested jits over
the key (``_uniform`` taking the key and the bounds with ``random_bits`` inside,
``_normal`` around ``_normal_real``, ``_truncated_normal``, ``_bernoulli``, ``_gumbel``,
``_randint``, ``_shuffle``, ...; shape and dtype static), so the jaxprs read as JAX's.

Called eagerly, the random bits are drawn where the key is first (integer work is exact
everywhere, so threefry never compiles), and the floating-point steps run as one
``ferrax.jit`` computation cached per (shape, dtype), with the same operations as JAX's
(XLA simplifies by the form of the arithmetic): the values are the same bits as JAX's
either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax import _core, dtypes, lax
from ferrax import numpy as fnp
from ferrax._array import Array
from ferrax._core import Tracer, aval_of, to_numpy
from ferrax._custom_derivatives import custom_jvp
from ferrax._jit import jit
from ferrax._lax._operands import bind1
from ferrax._lax.structural import expand_dims_as_jax, reshape_p
from ferrax._user_frames import user_location
from ferrax.random._keys import UINT_DTYPES, check_key, random_bits_data, split_data

__all__ = [
    "bernoulli",
    "beta",
    "bits",
    "categorical",
    "cauchy",
    "choice",
    "dirichlet",
    "exponential",
    "gamma",
    "gumbel",
    "laplace",
    "logistic",
    "loggamma",
    "normal",
    "permutation",
    "rademacher",
    "randint",
    "t",
    "truncated_normal",
    "uniform",
]

Shape = Sequence[int]


# --- argument checks ------------------------------------------------------------------


def _canonical_shape(shape: Any) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        out = tuple(
            int(d) if isinstance(d, (int, np.integer)) and not isinstance(d, bool) else _bad(d)
            for d in dims
        )
    except TypeError:
        raise TypeError(
            "Shapes must be 1D sequences of concrete values of integer type, got "
            f"{shape!r}, at {user_location()}"
        ) from None
    if any(d < 0 for d in out):
        # JAX's error where it checks (its broadcasts; uniform fails later, in MLIR).
        raise TypeError(
            "Only non-negative indices are allowed when broadcasting static shapes, but got "
            f"shape {out}, at {user_location()}"
        )
    return out


def _bad(d: Any) -> int:
    raise TypeError(d)


def _np_shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if isinstance(x, Array) else tuple(np.shape(x))


def _broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(
            f"Incompatible shapes for broadcasting: shapes={list(shapes)}, at {user_location()}"
        ) from None


def _check_shape(name: str, shape: tuple[int, ...], *param_shapes: tuple[int, ...]) -> None:
    if param_shapes:
        got = _broadcast_shapes(shape, *param_shapes)
        if got != shape:
            raise ValueError(
                f"{name} parameter shapes must be broadcast-compatible with shape argument, "
                "and the result of broadcasting the shapes must equal the shape argument, "
                f"but got result {got} for shape argument {shape}, at {user_location()}"
            )


def _float_dtype(name: str, dtype: Any, *, allow_complex: bool = False) -> np.dtype[Any]:
    d = dtypes.canonicalize(float if dtype is None else dtype, name)
    if not dtypes.is_float(d):
        kind = "a float or complex dtype" if allow_complex else "a float dtype"
        raise ValueError(f"dtype argument to `{name}` must be {kind}, got {d}, at {user_location()}")
    return d


def _no_out_sharding(name: str, out_sharding: Any) -> None:
    # JAX's samplers take out_sharding (explicit-sharding mode); ferrax accepts the
    # keyword for the same signatures, without a layout yet.
    if out_sharding is not None:
        raise NotImplementedError(
            f"{name}: out_sharding is not supported by ferrax.random yet (lay the result "
            f"out with ferrax.lax.with_sharding_constraint), at {user_location()}"
        )


class _FInfo:
    """The few float constants the samplers use, for every float dtype (bfloat16 too)."""

    def __init__(self, dtype: np.dtype[Any]) -> None:
        if dtype == dtypes.bfloat16:
            self.bits, self.nmant, self.tiny = 16, 7, 2.0**-126
        else:
            fi = np.finfo(dtype)
            self.bits, self.nmant, self.tiny = int(fi.bits), int(fi.nmant), float(fi.tiny)
        self.eps = 2.0**-self.nmant
        self.epsneg = 2.0 ** -(self.nmant + 1)


def _const(value: float, dtype: np.dtype[Any]) -> Any:
    return np.array(value, dtype)


def _check_bound_shape(xs: tuple[int, ...], shape: tuple[int, ...]) -> None:
    # JAX pads a bound's rank to len(shape), then relies on size-1 broadcasting: its
    # errors come from the ops that meet the shapes first (max for the rank, mul for
    # the sizes).
    if len(xs) > len(shape):
        ranks = sorted({len(shape), len(xs)})
        raise TypeError(
            f"max: arrays must have the same number of dimensions, got {{{ranks[0]}, {ranks[-1]}}}, "
            f"at {user_location()}"
        )
    padded = (1,) * (len(shape) - len(xs)) + xs
    if any(p not in (1, s) for p, s in zip(padded, shape)):
        raise TypeError(
            f"mul got incompatible shapes for broadcasting: {shape}, {xs}, at {user_location()}"
        )


def _broadcast_to_shape(x: Any, shape: tuple[int, ...]) -> Any:
    xs = _np_shape(x)
    _check_bound_shape(xs, shape)
    return fnp.broadcast_to(x, shape) if xs != shape else x


# --- bits and uniform -------------------------------------------------------------------


def bits(key: Any, shape: Shape = (), dtype: Any = None, *, out_sharding: Any = None) -> Array:
    """Uniform random bits as unsigned integers (``dtype`` uint32 by default, uint64
    with x64)."""
    _no_out_sharding("bits", out_sharding)
    data, _ = check_key("bits", key)
    d = dtypes.default_uint() if dtype is None else dtypes.canonicalize(dtype, "bits")
    if d.kind != "u":
        raise ValueError(
            f"dtype argument to `bits` must be an unsigned int dtype, got {d}, at {user_location()}"
        )
    out: Array = random_bits_data(data, d.itemsize * 8, _canonical_shape(shape))
    return out


def _raw_bits(data: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """The random bits ``uniform`` draws for ``dtype``: computed where the key is (eagerly
    for a concrete key: integer work is exact everywhere), outside the compiled float
    work."""
    fi = _FInfo(dtype)
    return random_bits_data(data, 8 if fi.nmant < 8 else fi.bits, shape)


def _uniform_values(
    raw: Any, minval: Any, maxval: Any, shape: tuple[int, ...], dtype: np.dtype[Any]
) -> Any:
    fi = _FInfo(dtype)
    minval = _broadcast_to_shape(lax.convert_element_type(minval, dtype), shape)
    maxval = _broadcast_to_shape(lax.convert_element_type(maxval, dtype), shape)
    rng_bits = 8 if fi.nmant < 8 else fi.bits
    uint = UINT_DTYPES[fi.bits]
    if rng_bits != fi.bits:
        raw = lax.convert_element_type(raw, uint)
    mantissa = lax.shift_right_logical(raw, np.array(rng_bits - fi.nmant, uint))
    floats = lax.sub(_one_plus_mantissa(mantissa, dtype), _const(1.0, dtype))
    span = lax.sub(maxval, minval)
    return lax.max(minval, lax.add(lax.mul(floats, span), minval))


def _one_plus_mantissa(mantissa: Any, dtype: np.dtype[Any]) -> Any:
    # The float 1.m: the exponent bits of 1.0 set over the random mantissa, as JAX does
    # (XLA simplifies the arithmetic that follows by its shape, so the same ops matter).
    uint = mantissa.dtype
    one_bits = np.array(1.0, dtype).view(uint)
    return lax.bitcast_convert_type(lax.bitwise_or(mantissa, one_bits), dtype)


_uniform_jit = jit(_uniform_values, static_argnums=(3, 4))


def _jax_jit(*static_argnames: str) -> Callable[[Callable[..., Any]], Any]:
    """JAX's ``@jit`` on its samplers: under a trace a call is a nested ``jit`` equation
    named as the function (traced once per signature), eagerly a compiled computation
    (so the values are XLA's, as JAX's); ``static_argnames`` are held static."""

    def wrap(fun: Callable[..., Any]) -> Any:
        return jit(fun, static_argnames=static_argnames)

    return wrap


def _staging() -> bool:
    """Whether a staging trace is active (``make_jaxpr``, an outer ``jit``): then the
    samplers are JAX's nested jits over keys. Called eagerly (also under an eager
    ``vmap`` or ``grad``) they draw the bits first, where the key is (integer work is
    exact everywhere, so threefry never compiles), and run the float steps, the same
    operations, as one compiled computation per signature: the same values."""
    return bool(_core._state.dynamic)


def _reshape_as_jax(x: Any, shape: tuple[int, ...]) -> Any:
    # JAX's lax.reshape: the same shape is returned as it is, but a scalar is reshaped.
    if not shape and not _np_shape(x):
        return bind1(reshape_p, x, new_sizes=(), dimensions=None, sharding=None)
    return lax.reshape(x, shape)


@_jax_jit("shape", "dtype")
def _uniform(key: Any, minval: Any, maxval: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """JAX's ``_uniform``: the bounds padded to the rank of ``shape``, the random bits
    drawn inside, the float ``1.m`` of their top mantissa bits moved to the range."""
    if not dtypes.is_float(dtype):
        raise TypeError(f"uniform only accepts floating point dtypes, at {user_location()}")
    fi = _FInfo(dtype)
    minval = lax.convert_element_type(minval, dtype)
    maxval = lax.convert_element_type(maxval, dtype)
    _check_bound_shape(_np_shape(minval), shape)
    _check_bound_shape(_np_shape(maxval), shape)
    minval = lax.broadcast_to_rank(minval, len(shape))
    maxval = lax.broadcast_to_rank(maxval, len(shape))
    rng_bits = 8 if fi.nmant < 8 else fi.bits
    raw = random_bits_data(key, rng_bits, shape)
    uint = UINT_DTYPES[fi.bits]
    if rng_bits != fi.bits:
        raw = lax.convert_element_type(raw, uint)
    mantissa = lax.shift_right_logical(raw, np.array(rng_bits - fi.nmant, uint))
    floats = lax.sub(_one_plus_mantissa(mantissa, dtype), _const(1.0, dtype))
    scaled = lax.add(lax.mul(floats, lax.sub(maxval, minval)), minval)
    return lax.max(minval, _reshape_as_jax(scaled, shape))


def uniform(
    key: Any,
    shape: Shape = (),
    dtype: Any = None,
    minval: Any = 0.0,
    maxval: Any = 1.0,
    *,
    out_sharding: Any = None,
) -> Array:
    """Uniform random values in ``[minval, maxval)`` (float32 by default, float64 with
    x64)."""
    _no_out_sharding("uniform", out_sharding)
    data, _ = check_key("uniform", key)
    d = _float_dtype("uniform", dtype)
    shp = _canonical_shape(shape)
    if not _staging():
        eager: Array = _uniform_jit(_raw_bits(data, shp, d), minval, maxval, shp, d)
        return eager
    out: Array = _uniform_keys(data, shp, d, minval, maxval)
    return out


def _uniform_keys(
    keys: Any, shape: tuple[int, ...], dtype: np.dtype[Any], minval: Any = 0.0, maxval: Any = 1.0
) -> Any:
    """``uniform`` on checked typed keys (``key<fry>``), as JAX's samplers call it."""
    return _uniform(keys, minval, maxval, shape=shape, dtype=dtype)


# --- integers ---------------------------------------------------------------------------


def _iinfo(d: np.dtype[Any]) -> np.iinfo[Any]:
    return np.iinfo(d)


def _convert_and_clip_integer(val: Any, dtype: np.dtype[Any]) -> Any:
    # ``val`` in ``dtype``, clipped to the range of both types rather than wrapped.
    vd = val.dtype
    lo_int = max(int(_iinfo(dtype).min), int(_iinfo(vd).min))
    hi_int = min(int(_iinfo(dtype).max), int(_iinfo(vd).max))
    # Constants like ``val``: Python ints next to a weakly typed value (JAX's lax._const).
    weak = bool(aval_of(val).weak_type)
    lo: Any = lo_int if weak else np.array(lo_int, vd)
    hi: Any = hi_int if weak else np.array(hi_int, vd)
    return fnp.astype(fnp.clip(val, lo, hi), dtype)


def _randint_bounds(minval: Any, maxval: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """``randint``'s bounds, checked to broadcast to ``shape``, as integer arrays (the
    default int where they are not integers), as both its eager and traced paths take
    them."""
    _check_shape("randint", shape, _np_shape(minval), _np_shape(maxval))
    minval = fnp.asarray(minval)
    maxval = fnp.asarray(maxval)
    if not dtypes.is_int(minval.dtype):
        minval = fnp.astype(minval, dtypes.default_int())
    if not dtypes.is_int(maxval.dtype):
        maxval = fnp.astype(maxval, dtypes.default_int())
    return minval, maxval


def _randint_values(
    data: Any, minval: Any, maxval: Any, shape: tuple[int, ...], dtype: np.dtype[Any]
) -> Any:
    minval, maxval = _randint_bounds(minval, maxval, shape)
    top = _convert_and_clip_integer(fnp.asarray(np.array(_iinfo(dtype).max, dtype)), maxval.dtype)
    maxval_out_of_range = lax.gt(maxval, lax.broadcast_in_dim(top, _np_shape(maxval), ()))
    minval = _convert_and_clip_integer(minval, dtype)
    maxval = _convert_and_clip_integer(maxval, dtype)
    minval = fnp.broadcast_to(minval, shape)
    maxval = fnp.broadcast_to(maxval, shape)
    maxval_out_of_range = fnp.broadcast_to(maxval_out_of_range, shape)
    nbits = _iinfo(dtype).bits
    k1, k2 = split_data(data, (2,))  # unpacked, as JAX's `k1, k2 = _split(key)`
    higher = random_bits_data(k1, nbits, shape)
    lower = random_bits_data(k2, nbits, shape)
    unsigned = UINT_DTYPES[nbits]
    span = lax.convert_element_type(lax.sub(maxval, minval), unsigned)
    one = fnp.ones(shape, unsigned)
    # maxval <= minval gives minval; a maxval beyond the dtype's range one more value.
    span = lax.select_n(lax.le(maxval, minval), span, one)
    span = lax.select_n(
        fnp.logical_and(maxval_out_of_range, lax.gt(maxval, minval)), span, lax.add(span, one)
    )
    multiplier = lax.rem(fnp.full(shape, 2 ** (nbits // 2), unsigned), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), multiplier), lax.rem(lower, span))
    offset = lax.rem(offset, span)
    return lax.add(minval, lax.convert_element_type(offset, dtype))


@_jax_jit("shape", "dtype")
def _randint(key: Any, minval: Any, maxval: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    # Twice the dtype's bits per value, reduced modulo the span (JAX's algorithm, with
    # its small bias when the span is not a power of 2).
    minval, maxval = _randint_bounds(minval, maxval, shape)
    # Where maxval is beyond the dtype's range (randint(key, shape, 0, 256, uint8)).
    top = _convert_and_clip_integer(fnp.asarray(np.array(_iinfo(dtype).max, dtype)), maxval.dtype)
    maxval_out_of_range = lax.gt(maxval, top)
    minval = _convert_and_clip_integer(minval, dtype)
    maxval = _convert_and_clip_integer(maxval, dtype)
    minval = lax.broadcast_to_rank(minval, len(shape))
    maxval = lax.broadcast_to_rank(maxval, len(shape))
    nbits = _iinfo(dtype).bits
    k1, k2 = split_data(key, (2,))
    higher = random_bits_data(k1, nbits, shape)
    lower = random_bits_data(k2, nbits, shape)
    unsigned = UINT_DTYPES[nbits]
    span = lax.convert_element_type(maxval - minval, unsigned)
    # maxval <= minval gives minval; a maxval beyond the dtype's range one more value.
    span = lax.select_n(maxval <= minval, span, lax.full_like(span, 1))
    span = lax.select_n(maxval_out_of_range & (maxval > minval), span, lax.add(span, np.array(1, unsigned)))
    multiplier = lax.rem(np.array(2 ** (nbits // 2), unsigned), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), multiplier), lax.rem(lower, span))
    offset = lax.rem(offset, span)
    return lax.add(minval, lax.convert_element_type(offset, dtype))


def _as_int32(v: Any) -> Any:
    if isinstance(v, (bool, int, float, np.ndarray, np.generic)):
        return np.asarray(v).astype(np.int32)
    return fnp.astype(fnp.asarray(v), np.int32)


def randint(
    key: Any, shape: Shape, minval: Any, maxval: Any, dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Uniform random integers in ``[minval, maxval)`` (int32 by default, int64 with
    x64), by JAX's algorithm (so with its small modulo bias)."""
    _no_out_sharding("randint", out_sharding)
    data, _ = check_key("randint", key)
    d = dtypes.canonicalize(int if dtype is None else dtype, "randint")
    if not dtypes.is_int(d):
        raise TypeError(f"randint only accepts integer dtypes, got {d}, at {user_location()}")
    shp = _canonical_shape(shape)
    info = _iinfo(d)
    sampling = d
    if info.bits < 32:
        # Sampled in 32 bits to avoid bias, as JAX does.
        sampling = np.dtype(np.int32)
        if not _staging():
            minval = fnp.clip(fnp.astype(fnp.asarray(minval), sampling), int(info.min), int(info.max))
            maxval = fnp.clip(
                fnp.astype(fnp.asarray(maxval), sampling), int(info.min), int(info.max) + 1
            )
        else:
            # As JAX's ``asarray(v).astype('int32').clip(lo, hi)``: a known bound converts
            # to a constant; the method passes the bounds by keyword.
            minval = fnp.clip(_as_int32(minval), min=int(info.min), max=int(info.max))
            maxval = fnp.clip(_as_int32(maxval), min=int(info.min), max=int(info.max) + 1)
    if not _staging():
        eager: Array = fnp.astype(_randint_values(data, minval, maxval, shp, sampling), d)
        return eager
    out: Array = fnp.astype(_randint(data, minval, maxval, shape=shp, dtype=sampling), d)
    return out


# --- normal and friends ------------------------------------------------------------------

def _normal_impl(raw: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    fi = _FInfo(dtype)
    lo = _const(-1.0 + fi.epsneg, dtype)  # nextafter(-1, 0)
    u = _uniform_values(raw, lo, _const(1.0, dtype), shape, dtype)
    return lax.mul(fnp.full(shape, math.sqrt(2), dtype), lax.erf_inv(u))


_normal_jit = jit(_normal_impl, static_argnums=(1, 2))


@_jax_jit("shape", "dtype")
def _normal(key: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    # JAX's ``_normal``: complex dtypes would split the key here; ferrax has real ones.
    return _normal_real(key, shape, dtype)


@_jax_jit("shape", "dtype")
def _normal_real(key: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    fi = _FInfo(dtype)
    lo = _const(-1.0 + fi.epsneg, dtype)  # nextafter(-1, 0)
    u = _uniform_keys(key, shape, dtype, lo, _const(1.0, dtype))
    return lax.mul(_const(math.sqrt(2), dtype), lax.erf_inv(u))


def normal(key: Any, shape: Shape = (), dtype: Any = None, *, out_sharding: Any = None) -> Array:
    """Standard normal random values (float32 by default, float64 with x64)."""
    _no_out_sharding("normal", out_sharding)
    data, _ = check_key("normal", key)
    d = _float_dtype("normal", dtype, allow_complex=True)
    shp = _canonical_shape(shape)
    if not _staging():
        eager: Array = _normal_jit(_raw_bits(data, shp, d), shp, d)
        return eager
    out: Array = _normal(data, shape=shp, dtype=d)
    return out


def _nextafter_inf(x: Any, up: bool) -> Any:
    """``nextafter(x, +inf)`` (``up``) or ``nextafter(x, -inf)``, on the bits, as XLA
    expands chlo.next_after."""
    dtype = x.dtype
    ints = np.dtype(f"i{dtype.itemsize}")
    shape = _np_shape(x)
    nbits = 8 * dtype.itemsize
    sign_mask = np.array(-(2 ** (nbits - 1)), ints)
    abs_mask = np.array(2 ** (nbits - 1) - 1, ints)
    inf_bits = np.array(np.inf, dtype).view(ints)
    nan_bits = np.array(np.nan, dtype).view(ints)

    def full(v: Any) -> Any:
        return fnp.full(shape, v, ints)

    xi = lax.bitcast_convert_type(x, ints)
    x_abs = lax.bitwise_and(xi, full(abs_mask))
    negative = lax.ne(lax.bitwise_and(xi, full(sign_mask)), full(0))
    away = fnp.logical_or(lax.gt(x_abs, full(inf_bits)), negative if up else fnp.logical_not(negative))
    step = lax.select_n(away, full(1), full(-1))
    result = lax.add(xi, step)
    smallest = full(1) if up else lax.bitwise_or(full(sign_mask), full(1))
    result = lax.select_n(lax.eq(x_abs, full(0)), result, smallest)
    target = np.inf if up else -np.inf
    result = lax.select_n(lax.eq(x, fnp.full(shape, target, dtype)), result, full(np.array(target, dtype).view(ints)))
    result = lax.select_n(lax.ne(x, x), result, full(nan_bits))
    return lax.bitcast_convert_type(result, dtype)


def _truncated_normal_impl(
    raw: Any, lower: Any, upper: Any, shape: tuple[int, ...], dtype: np.dtype[Any]
) -> Any:
    sqrt2 = _const(math.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = lax.erf(lax.div(lower, fnp.full(_np_shape(lower), sqrt2, dtype)))
    b = lax.erf(lax.div(upper, fnp.full(_np_shape(upper), sqrt2, dtype)))
    u = _uniform_values(raw, a, b, shape, dtype)
    out = lax.mul(fnp.full(shape, sqrt2, dtype), lax.erf_inv(u))
    lo = fnp.broadcast_to(_nextafter_inf(lax.stop_gradient(lower), True), shape)
    hi = fnp.broadcast_to(_nextafter_inf(lax.stop_gradient(upper), False), shape)
    return lax.min(hi, lax.max(lo, out))


_truncated_normal_jit = jit(_truncated_normal_impl, static_argnums=(3, 4))


@_jax_jit("shape", "dtype")
def _truncated_normal(
    key: Any, lower: Any, upper: Any, shape: tuple[int, ...] | None, dtype: np.dtype[Any]
) -> Any:
    if shape is None:
        shape = _broadcast_shapes(_np_shape(lower), _np_shape(upper))
    else:
        _check_shape("truncated_normal", shape, _np_shape(lower), _np_shape(upper))
    sqrt2 = _const(math.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = lax.erf(lax.div(lower, sqrt2))
    b = lax.erf(lax.div(upper, sqrt2))
    u = _uniform_keys(key, shape, dtype, a, b)
    out = lax.mul(sqrt2, lax.erf_inv(u))
    # Clamped to the open interval (lower, upper), as JAX's.
    lo = lax.nextafter(lax.stop_gradient(lower), _const(np.inf, dtype))
    hi = lax.nextafter(lax.stop_gradient(upper), _const(-np.inf, dtype))
    return fnp.clip(out, lo, hi)


def truncated_normal(
    key: Any, lower: Any, upper: Any, shape: Shape | None = None, dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Standard normal values truncated to ``(lower, upper)`` (by inverting the normal
    CDF on a uniform draw between ``erf`` of the bounds, as JAX)."""
    _no_out_sharding("truncated_normal", out_sharding)
    shp = None if shape is None else _canonical_shape(shape)
    data, _ = check_key("truncated_normal", key)
    d = _float_dtype("truncated_normal", dtype)
    if not _staging():
        if shp is None:
            shp = _broadcast_shapes(_np_shape(lower), _np_shape(upper))
        else:
            _check_shape("truncated_normal", shp, _np_shape(lower), _np_shape(upper))
        eager: Array = _truncated_normal_jit(_raw_bits(data, shp, d), lower, upper, shp, d)
        return eager
    out: Array = _truncated_normal(data, lower, upper, shape=shp, dtype=d)
    return out


def _bernoulli_impl(raw: Any, p: Any, shape: tuple[int, ...], mode: str) -> Any:
    dtype = p.dtype
    p = fnp.broadcast_to(p, shape)
    if mode == "high":
        u = _uniform_values(raw, _const(0.0, dtype), _const(1.0, dtype), (2, *shape), dtype)
        u1, u2 = u[0], u[1]
        u2 = lax.mul(u2, fnp.full(shape, 2.0 ** -_FInfo(dtype).nmant, dtype))
        return lax.lt(u2, lax.sub(p, u1))
    u = _uniform_values(raw, _const(0.0, dtype), _const(1.0, dtype), shape, dtype)
    return lax.lt(u, p)


_bernoulli_jit = jit(_bernoulli_impl, static_argnums=(2, 3))


@_jax_jit("shape", "mode")
def _bernoulli(key: Any, p: Any, shape: tuple[int, ...] | None, mode: str) -> Any:
    if shape is None:
        shape = _np_shape(p)
    else:
        _check_shape("bernoulli", shape, _np_shape(p))
    dtype = p.dtype
    if mode == "high":
        u1, u2 = _uniform_keys(key, (2, *shape), dtype)
        # The resolution of the uniform draws is 2 ** -nmant.
        u2 = u2 * (2.0 ** -_FInfo(dtype).nmant)
        return u2 < p - u1
    return _uniform_keys(key, shape, dtype) < p


def bernoulli(
    key: Any,
    p: Any = 0.5,
    shape: Shape | None = None,
    mode: str = "low",
    *,
    out_sharding: Any = None,
) -> Array:
    """Bernoulli random booleans, true with probability ``p`` (float; broadcast to
    ``shape``, whose default is ``p``'s shape)."""
    _no_out_sharding("bernoulli", out_sharding)
    shp = None if shape is None else _canonical_shape(shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low', at {user_location()}")
    data, _ = check_key("bernoulli", key)
    p_dtype = fnp.asarray(p).dtype if not isinstance(p, Array) else p.dtype
    if not dtypes.is_float(p_dtype):
        raise TypeError(
            f"bernoulli probability `p` must have a floating dtype, got {p_dtype}, "
            f"at {user_location()}"
        )
    if not _staging():
        p_eager = fnp.asarray(p)
        if shp is None:
            shp = _np_shape(p_eager)
        else:
            _check_shape("bernoulli", shp, _np_shape(p_eager))
        raw = _raw_bits(data, (2, *shp) if mode == "high" else shp, p_eager.dtype)
        eager: Array = _bernoulli_jit(raw, p_eager, shp, mode)
        return eager
    staged_out: Array = _bernoulli_keys(data, p, shp, mode, p_dtype)
    return staged_out


def _bernoulli_keys(
    keys: Any, p: Any, shape: tuple[int, ...] | None, mode: str = "low", p_dtype: Any = None
) -> Any:
    """``bernoulli`` on checked typed keys, as JAX's samplers call it."""
    if p_dtype is None:
        p_dtype = fnp.asarray(p).dtype if not isinstance(p, Array) else p.dtype
    return _bernoulli(keys, _convert_as_jax(p, p_dtype), shape=shape, mode=mode)


def _convert_as_jax(x: Any, dtype: np.dtype[Any]) -> Any:
    """JAX's ``lax.convert_element_type``: a Python or NumPy scalar converts to a
    constant (no equation), anything else as ferrax's."""
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return np.asarray(x, dtype=dtype)
    return lax.convert_element_type(x, dtype)


def _simple_sampler(name: str, dtype: Any, shape: Shape) -> tuple[tuple[int, ...], np.dtype[Any]]:
    return _canonical_shape(shape), _float_dtype(name, dtype)


def _sample(
    name: str, impl: Any, staged: Any, key: Any, shape: Shape, dtype: Any, out_sharding: Any
) -> Array:
    """A sampler of floats: traced, JAX's jit over the key ``staged(key, shape,
    dtype)``; eagerly ``impl(bits, shape, dtype)`` (jitted) on the key's raw bits."""
    _no_out_sharding(name, out_sharding)
    data, _ = check_key(name, key)
    shp, d = _simple_sampler(name, dtype, shape)
    if _staging():
        staged_out: Array = staged(data, shape=shp, dtype=d)
        return staged_out
    out: Array = impl(_raw_bits(data, shp, d), shp, d)
    return out


def _exponential_impl(raw: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    u = _uniform_values(raw, _const(0.0, dtype), _const(1.0, dtype), shape, dtype)
    return lax.neg(lax.log1p(lax.neg(u)))


_exponential_jit = jit(_exponential_impl, static_argnums=(1, 2))


@_jax_jit("shape", "dtype")
def _exponential(key: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    u = _uniform_keys(key, shape, dtype)
    # 1 - u moves the domain of log to (0, 1].
    return lax.neg(lax.log1p(lax.neg(u)))


def exponential(
    key: Any,
    shape: Shape = (),
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Standard exponential random values."""
    return _sample("exponential", _exponential_jit, _exponential, key, shape, dtype, out_sharding)


def _laplace_impl(raw: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    lo = _const(-1.0 + _FInfo(dtype).epsneg, dtype)
    u = _uniform_values(raw, lo, _const(1.0, dtype), shape, dtype)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


_laplace_jit = jit(_laplace_impl, static_argnums=(1, 2))


@_jax_jit("shape", "dtype")
def _laplace(key: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    u = _uniform_keys(key, shape, dtype, _const(-1.0 + _FInfo(dtype).epsneg, dtype), 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def laplace(key: Any, shape: Shape = (), dtype: Any = None, *, out_sharding: Any = None) -> Array:
    """Standard Laplace random values."""
    return _sample("laplace", _laplace_jit, _laplace, key, shape, dtype, out_sharding)


def _logistic_impl(raw: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    lo = _const(_FInfo(dtype).tiny, dtype)
    x = _uniform_values(raw, lo, _const(1.0, dtype), shape, dtype)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


_logistic_jit = jit(_logistic_impl, static_argnums=(1, 2))


@_jax_jit("shape", "dtype")
def _logistic(key: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    x = _uniform_keys(key, shape, dtype, _const(_FInfo(dtype).tiny, dtype), 1.0)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def logistic(key: Any, shape: Shape = (), dtype: Any = None, *, out_sharding: Any = None) -> Array:
    """Standard logistic random values."""
    return _sample("logistic", _logistic_jit, _logistic, key, shape, dtype, out_sharding)


def _cauchy_impl(raw: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    lo = _const(_FInfo(dtype).eps, dtype)
    u = _uniform_values(raw, lo, _const(1.0, dtype), shape, dtype)
    pi = fnp.full(shape, np.pi, dtype)
    return lax.tan(lax.mul(pi, lax.sub(u, fnp.full(shape, 0.5, dtype))))


_cauchy_jit = jit(_cauchy_impl, static_argnums=(1, 2))


@_jax_jit("shape", "dtype")
def _cauchy(key: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    u = _uniform_keys(key, shape, dtype, _const(_FInfo(dtype).eps, dtype), 1.0)
    pi = _const(np.pi, dtype)
    return lax.tan(lax.mul(pi, lax.sub(u, _const(0.5, dtype))))


def cauchy(key: Any, shape: Shape = (), dtype: Any = None, *, out_sharding: Any = None) -> Array:
    """Standard Cauchy random values."""
    return _sample("cauchy", _cauchy_jit, _cauchy, key, shape, dtype, out_sharding)


def _gumbel_values(raw: Any, shape: tuple[int, ...], dtype: np.dtype[Any], mode: str) -> Any:
    fi = _FInfo(dtype)
    if mode == "low":
        u = _uniform_values(raw, _const(fi.tiny, dtype), _const(1.0, dtype), shape, dtype)
        return lax.neg(lax.log(lax.neg(lax.log(u))))
    if mode == "highest" and dtype == np.dtype(np.float32):
        return _gumbel_highest_f32(raw, shape)
    both = _uniform_values(raw, _const(0.0, dtype), _const(1.0, dtype), (2, *shape), dtype)
    high, low = both[0], both[1]
    x = lax.select_n(
        lax.ge(high, fnp.full(shape, 0.5, dtype)),
        lax.add(
            lax.add(high, lax.mul(fnp.full(shape, 2.0**-fi.nmant, dtype), low)),
            fnp.full(shape, fi.tiny, dtype),
        ),
        high,
    )
    return lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x)))))


def _safe_int_to_float(hi: Any, lo: Any) -> Any:
    # The 64-bit fixed-point fraction hi:lo as a float32 in (0, 1), keeping the leading
    # bits whatever the number of leading zeros (JAX's _safe_int_to_float).
    shape = _np_shape(hi)

    def full(v: int) -> Any:
        return fnp.full(shape, np.array(v, np.uint32), np.uint32)

    hiclz, loclz = lax.clz(hi), lax.clz(lo)
    hi_all_zero = lax.eq(hiclz, full(32))
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hiclz),
        lax.select_n(hi_all_zero, lax.shift_right_logical(lo, lax.sub(full(32), hiclz)), lax.shift_left(lo, loclz)),
    )
    mantissa = lax.shift_right_logical(mantissa, full(32 - 23 - 1))
    mantissa = lax.bitwise_and(mantissa, full((1 << 23) - 1))
    zeros = lax.select_n(hi_all_zero, hiclz, lax.add(full(32), loclz))
    exp = lax.shift_left(lax.sub(full(126), zeros), full(23))
    exp = lax.bitwise_and(exp, full((1 << 30) - (1 << 22)))
    return lax.bitcast_convert_type(lax.bitwise_or(exp, mantissa), np.float32)


def _gumbel_highest_f32(raw: Any, shape: tuple[int, ...]) -> Any:
    neg = lax.bitwise_not(raw)
    lo_bits = neg[1]
    carry = fnp.astype(lax.eq(lo_bits, fnp.full(shape, np.array(0xFFFFFFFF, np.uint32), np.uint32)), np.uint32)
    neg = lax.add(neg, fnp.stack([carry, fnp.ones(shape, np.uint32)]))
    flip = lax.lt(raw[0], fnp.full(shape, np.array(1 << 31, np.uint32), np.uint32))
    hi = lax.select_n(flip, neg[0], raw[0])
    lo = lax.select_n(flip, neg[1], raw[1])
    x = _safe_int_to_float(hi, lo)
    one_minus = lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x)))))
    direct = lax.neg(lax.log(lax.neg(lax.log(x))))
    return lax.select_n(flip, direct, one_minus)


_gumbel_jit = jit(_gumbel_values, static_argnums=(1, 2, 3))


def _safe_int_to_float_as_jax(both: Any) -> Any:
    # The 64-bit fixed-point fractions both[0]:both[1] as float32s in (0, 1), keeping the
    # leading bits whatever the number of leading zeros (JAX's _safe_int_to_float).
    u32 = np.uint32
    hiclz, loclz = lax.clz(both)
    hi, lo = both
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hiclz),
        fnp.where(hiclz == 32, lax.shift_left(lo, loclz), lax.shift_right_logical(lo, 32 - hiclz)),
    )
    mantissa = lax.shift_right_logical(mantissa, np.array(32 - 23 - 1, u32))
    mantissa = lax.bitwise_and(mantissa, np.array((1 << 23) - 1, u32))
    exp = lax.shift_left(126 - fnp.where(hiclz == 32, 32 + loclz, hiclz), np.array(23, u32))
    exp = lax.bitwise_and(exp, np.array((1 << 30) - (1 << 22), u32))
    return lax.bitcast_convert_type(lax.bitwise_or(exp, mantissa), np.float32)


@_jax_jit("shape", "dtype", "mode")
def _gumbel(key: Any, shape: tuple[int, ...], dtype: np.dtype[Any], mode: str) -> Any:
    fi = _FInfo(dtype)
    if mode == "highest" and dtype == np.dtype(np.float32):
        u32 = np.uint32
        bits_ = random_bits_data(key, 32, (2, *shape))
        neg = lax.bitwise_not(bits_)
        lo_bits = neg[1]
        # 1 - bits in 64-bit fixed point.
        neg = neg + fnp.array([lo_bits == np.array(0xFFFFFFFF, u32), fnp.ones_like(lo_bits)], dtype=u32)
        flip_mask = bits_[0] < np.array(1 << 31, u32)
        x = _safe_int_to_float_as_jax(fnp.where(flip_mask, bits_, neg))
        # log1p for (0, 0.5), log for [0.5, 1).
        return fnp.where(flip_mask, -fnp.log(-fnp.log1p(-x)), -fnp.log(-fnp.log(x)))
    if mode in ("high", "highest"):
        high, low = _uniform(key, minval=0.0, maxval=1.0, shape=(2, *shape), dtype=dtype)
        x = fnp.where(high >= 0.5, high, high + 2.0**-fi.nmant * low + _const(fi.tiny, dtype))
        return -fnp.log(-fnp.log1p(-x))
    u = _uniform(key, minval=_const(fi.tiny, dtype), maxval=1.0, shape=shape, dtype=dtype)
    return -fnp.log(-fnp.log(u))


def _gumbel_bits_shape(shape: tuple[int, ...], dtype: np.dtype[Any], mode: str) -> tuple[int, ...]:
    return shape if mode == "low" else (2, *shape)


def _gumbel_mode(mode: str | None) -> str:
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}, at {user_location()}")
    return mode


def gumbel(
    key: Any,
    shape: Shape = (),
    dtype: Any = None,
    mode: str | None = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Standard Gumbel random values (``mode`` "low", "high" or "highest" as JAX's:
    more random bits for a wider range)."""
    _no_out_sharding("gumbel", out_sharding)
    data, _ = check_key("gumbel", key)
    shp, d = _simple_sampler("gumbel", dtype, shape)
    m = _gumbel_mode(mode)
    if not _staging():
        eager: Array = _gumbel_jit(_raw_bits(data, _gumbel_bits_shape(shp, d, m), d), shp, d, m)
        return eager
    out: Array = _gumbel(data, shape=shp, dtype=d, mode=m)
    return out


def _rademacher_impl(raw: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    f = dtypes.default_float()
    u = _uniform_values(raw, _const(0.0, f), _const(1.0, f), shape, f)
    b = fnp.astype(lax.lt(u, fnp.full(shape, 0.5, f)), dtype)
    return fnp.astype(2 * b - 1, dtype)


_rademacher_jit = jit(_rademacher_impl, static_argnums=(1, 2))


@_jax_jit("shape", "dtype", "out_sharding")
def _rademacher(key: Any, shape: tuple[int, ...], dtype: np.dtype[Any], out_sharding: Any) -> Any:
    b = fnp.astype(_bernoulli_keys(key, 0.5, shape), dtype)
    return fnp.astype(2 * b - 1, dtype)


def rademacher(
    key: Any,
    shape: Shape = (),
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Random -1 and 1 with equal probability (int32 by default, int64 with x64)."""
    _no_out_sharding("rademacher", out_sharding)
    data, _ = check_key("rademacher", key)
    d = dtypes.canonicalize(int if dtype is None else dtype, "rademacher")
    shp = _canonical_shape(shape)
    if _staging():
        staged_out: Array = _rademacher(data, shp, d, None)
        return staged_out
    raw = _raw_bits(data, shp, dtypes.default_float())
    out: Array = _rademacher_jit(raw, shp, d)
    return out


def _categorical_gumbel_shape(
    logits_shape: tuple[int, ...], shape: tuple[int, ...], axis: int
) -> tuple[int, ...]:
    # The prefix of ``shape`` beyond the batch shape, then the batch shape with the
    # logits' axis put back.
    nd = len(logits_shape)
    prefix = shape[: len(shape) - (nd - 1)]
    ax = axis - nd if axis >= 0 else axis
    rest = list(shape[len(shape) - (nd - 1):])
    rest.insert(ax % nd, logits_shape[ax])
    return (*prefix, *rest)


def _categorical_impl(raw: Any, logits: Any, shape: tuple[int, ...], axis: int, mode: str) -> Any:
    nd = logits.ndim
    gshape = _categorical_gumbel_shape(tuple(logits.shape), shape, axis)
    n_prefix = len(gshape) - nd
    g = _gumbel_values(raw, gshape, logits.dtype, mode)
    expanded = fnp.expand_dims(logits, tuple(range(n_prefix))) if n_prefix else logits
    return fnp.argmax(lax.add(g, fnp.broadcast_to(expanded, g.shape)), axis=axis - nd if axis >= 0 else axis)


_categorical_jit = jit(_categorical_impl, static_argnums=(2, 3, 4))


def _categorical_top_k_impl(
    raw: Any, logits: Any, shape: tuple[int, ...], axis: int, k: int, mode: str
) -> Any:
    shifted = lax.add(logits, _gumbel_values(raw, tuple(logits.shape), logits.dtype, mode))
    nd_in = shifted.ndim
    moved = fnp.transpose(shifted, (*(i for i in range(nd_in) if i != axis), axis))
    indices = _top_k_indices(moved, k)  # batch + (k,)
    # The k draws lead: the sample axes first, then the batch axes.
    nd = indices.ndim
    indices = fnp.transpose(indices, (nd - 1, *range(nd - 1)))
    return fnp.reshape(fnp.astype(indices, dtypes.default_int()), shape)


_categorical_top_k_jit = jit(_categorical_top_k_impl, static_argnums=(2, 3, 4, 5))


def categorical(
    key: Any,
    logits: Any,
    axis: int = -1,
    shape: Shape | None = None,
    replace: bool = True,
    mode: str | None = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Samples from categorical distributions given by unnormalized log probabilities
    along ``axis`` (the Gumbel-max trick, as JAX)."""
    _no_out_sharding("categorical", out_sharding)
    data, _ = check_key("categorical", key)
    logits_arr = fnp.asarray(logits)
    nd = logits_arr.ndim
    if not -nd <= axis < nd:
        raise ValueError(f"axis {axis} is out of bounds for logits of rank {nd}, at {user_location()}")
    batch_shape = tuple(d for i, d in enumerate(logits_arr.shape) if i != axis % nd)
    if shape is None:
        shp = batch_shape
    else:
        shp = _canonical_shape(shape)
        _check_shape("categorical", shp, batch_shape)
    m = _gumbel_mode(mode)
    if not _staging():
        return _categorical_eager(data, logits_arr, shp, batch_shape, axis, replace, m)
    dtype = logits_arr.dtype
    prefix = shp[: len(shp) - len(batch_shape)]
    if replace:
        gshape = _categorical_gumbel_shape(tuple(logits_arr.shape), shp, axis)
        g = _gumbel(data, shape=gshape, dtype=dtype, mode=m)
        expanded = expand_dims_as_jax(logits_arr, tuple(range(len(prefix)))) if prefix else logits_arr
        out: Array = fnp.argmax(g + expanded, axis=axis - nd if axis >= 0 else axis)
        return out
    shifted = logits_arr + _gumbel(data, shape=tuple(logits_arr.shape), dtype=dtype, mode=m)
    k = int(np.prod(prefix, dtype=np.int64))
    if k > logits_arr.shape[axis]:
        raise ValueError(
            f"Number of samples without replacement ({k}) cannot exceed number of "
            f"categories ({logits_arr.shape[axis]}), at {user_location()}"
        )
    indices = lax.top_k(fnp.moveaxis(shifted, axis, -1), k)[1]  # batch + (k,)
    # The k draws lead: the sample axes first, then the batch axes.
    ind_nd = indices.ndim
    out_nr: Array = lax.reshape(indices, shp, (ind_nd - 1, *range(ind_nd - 1)))
    return out_nr


def _categorical_eager(
    data: Any, logits_arr: Any, shp: tuple[int, ...], batch_shape: tuple[int, ...], axis: int, replace: bool, m: str
) -> Array:
    nd = logits_arr.ndim
    if not replace:
        k = int(np.prod(shp[: len(shp) - len(batch_shape)], dtype=np.int64))
        if k > logits_arr.shape[axis]:
            raise ValueError(
                f"Number of samples without replacement ({k}) cannot exceed number of "
                f"categories ({logits_arr.shape[axis]}), at {user_location()}"
            )
        lshape = tuple(logits_arr.shape)
        raw = _raw_bits(data, _gumbel_bits_shape(lshape, logits_arr.dtype, m), logits_arr.dtype)
        out_nr: Array = _categorical_top_k_jit(raw, logits_arr, shp, axis % nd, k, m)
        return out_nr
    gshape = _categorical_gumbel_shape(logits_arr.shape, shp, axis)
    raw = _raw_bits(data, _gumbel_bits_shape(gshape, logits_arr.dtype, m), logits_arr.dtype)
    out: Array = _categorical_jit(raw, logits_arr, shp, axis, m)
    return out


# --- top_k and cumsum -----------------------------------------------------------------------


def _top_k_indices(x: Any, k: int) -> Any:
    """The indices of the ``k`` largest entries along the last axis (``lax.top_k``'s:
    largest first, the lower index first among equals)."""
    return lax.top_k(x, k)[1]


def _cumsum(x: Any) -> Any:
    return lax.cumsum(x, 0)


# --- permutations --------------------------------------------------------------------------


def _sort_along_last(sort_keys: Any, values: Any) -> Any:
    # A stable sort of ``values`` by ``sort_keys`` along the last axis (lax.sort_key_val's
    # result); known keys are sorted by NumPy.
    if not isinstance(sort_keys, Tracer):
        order = np.argsort(to_numpy(sort_keys), axis=-1, kind="stable").astype(np.int32)
        return fnp.take_along_axis(values, fnp.asarray(order), axis=-1)
    return lax.sort_key_val(sort_keys, values, -1)[1]


def _shuffle_eager(data: Any, x: Any, axis: int) -> Any:
    size = int(np.prod(x.shape, dtype=np.int64))
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = split_data(data, (2,))
        data, sub = keys[0], keys[1]
        sort_keys = random_bits_data(sub, 32, tuple(x.shape))
        moved_keys = fnp.swapaxes(sort_keys, axis, -1)
        moved = fnp.swapaxes(x, axis, -1)
        x = fnp.swapaxes(_sort_along_last(moved_keys, moved), axis, -1)
    return x


@_jax_jit("axis")
def _shuffle(key: Any, x: Any, axis: int) -> Any:
    # Sorts by fresh 32-bit random keys, as many rounds as make collisions unlikely
    # (JAX's heuristic, from TensorFlow's).
    size = int(np.prod(x.shape, dtype=np.int64))
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        key, subkey = split_data(key, (2,))
        sort_keys = random_bits_data(subkey, 32, tuple(x.shape))
        x = lax.sort_key_val(sort_keys, x, axis)[1]
    return x


def permutation(
    key: Any,
    x: Any,
    axis: int = 0,
    independent: bool = False,
    *,
    out_sharding: Any = None,
) -> Array:
    """A random permutation of ``arange(x)`` (an int ``x``) or of ``x``'s entries along
    ``axis`` (each slice independently if ``independent``), the same as JAX's."""
    _no_out_sharding("permutation", out_sharding)
    data, _ = check_key("permutation", key)
    arr = fnp.asarray(x)
    nd = max(arr.ndim, 1)
    if not -nd <= axis < nd:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {nd}, at {user_location()}")
    axis = axis % nd
    shuffle = _shuffle if _staging() else _shuffle_eager
    if arr.ndim == 0:
        if not dtypes.is_int(arr.dtype):
            raise TypeError(f"x must be an integer or at least 1-dimensional, at {user_location()}")
        out: Array = shuffle(data, fnp.arange(int(arr)), axis)
        return out
    if independent or arr.ndim == 1:
        out = shuffle(data, arr, axis)
        return out
    ind = shuffle(data, fnp.arange(arr.shape[axis]), 0)
    out = fnp.take(arr, ind, axis, unique_indices=True)
    return out


def _choice_p_impl(raw: Any, p: Any, shape: tuple[int, ...]) -> Any:
    dtype = p.dtype
    p_cuml = _cumsum(p)
    u = _uniform_values(raw, _const(0.0, dtype), _const(1.0, dtype), shape, dtype)
    r = lax.mul(fnp.full(shape, p_cuml[-1], dtype), lax.sub(fnp.ones(shape, dtype), u))
    # searchsorted (side="left"): how many cumulative sums are below r.
    below = lax.lt(fnp.broadcast_to(p_cuml, (*shape, p.shape[0])), fnp.expand_dims(r, -1))
    return fnp.astype(fnp.sum(fnp.astype(below, np.int32), axis=-1), dtypes.default_int())


_choice_p_jit = jit(_choice_p_impl, static_argnums=(2,))


def _choice_top_k_impl(raw: Any, p: Any, k: int, mode: str) -> Any:
    g = lax.add(_gumbel_values(raw, tuple(p.shape), p.dtype, mode), lax.log(p))
    return fnp.astype(_top_k_indices(g, k), dtypes.default_int())


_choice_top_k_jit = jit(_choice_top_k_impl, static_argnums=(2, 3))


def choice(
    key: Any,
    a: Any,
    shape: Shape = (),
    replace: bool = True,
    p: Any = None,
    axis: int = 0,
    mode: str | None = None,
) -> Array:
    """A random sample from ``a``'s entries along ``axis`` (or from ``arange(a)``), with
    or without replacement, uniformly or with the probabilities ``p``."""
    data, _ = check_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(
            f"shape argument of ferrax.random.choice must be a sequence, got {shape}, "
            f"at {user_location()}"
        )
    shp = _canonical_shape(shape)
    arr = fnp.asarray(a)
    if arr.ndim == 0:
        n_inputs = int(arr)
    else:
        if not -arr.ndim <= axis < arr.ndim:
            raise ValueError(f"axis {axis} is out of bounds, at {user_location()}")
        axis = axis % arr.ndim
        n_inputs = arr.shape[axis]
    n_draws = int(np.prod(shp, dtype=np.int64))
    if n_draws == 0:
        out: Array = fnp.zeros(shp, arr.dtype)
        return out
    if n_inputs <= 0:
        raise ValueError(f"a must be greater than 0 unless no samples are taken, at {user_location()}")
    if not replace and n_draws > n_inputs:
        raise ValueError(
            f"Cannot take a larger sample (size {n_draws}) than population (size {n_inputs}) "
            f"when 'replace=False', at {user_location()}"
        )
    if p is not None:
        p_arr = fnp.asarray(p)
        if not dtypes.is_float(p_arr.dtype):
            p_arr = fnp.astype(p_arr, dtypes.default_float())
        if _np_shape(p_arr) != (n_inputs,):
            raise ValueError(
                "p must be None or a 1D vector with the same size as a.shape[axis]. "
                f"p has shape {_np_shape(p_arr)} and a.shape[axis] is {n_inputs}, "
                f"at {user_location()}"
            )
        pd = p_arr.dtype
        if _staging():
            # JAX's steps: a cumsum and a searchsorted, or gumbel's top k.
            if replace:
                p_cuml = fnp.cumsum(p_arr)
                r = p_cuml[-1] * (1 - _uniform_keys(data, shp, pd))
                ind = fnp.astype(fnp.searchsorted(p_cuml, r), dtypes.default_int())
            else:
                g = gumbel(key, (n_inputs,), dtype=pd, mode=mode) + fnp.log(p_arr)
                ind = fnp.astype(lax.top_k(g, n_draws)[1], dtypes.default_int())
        elif replace:
            ind = _choice_p_jit(_raw_bits(data, shp, pd), p_arr, shp)
        else:
            m = _gumbel_mode(mode)
            raw = _raw_bits(data, _gumbel_bits_shape((n_inputs,), pd, m), pd)
            ind = _choice_top_k_jit(raw, p_arr, n_draws, m)
        result = ind if arr.ndim == 0 else fnp.take(arr, ind, axis)
    elif replace:
        ind = randint(key, shp, 0, n_inputs)
        result = ind if arr.ndim == 0 else fnp.take(arr, ind, axis)
    else:
        perm = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)
        index = (slice(None),) * axis + (slice(n_draws),)
        result = perm[index]
    final = shp if arr.ndim == 0 else (*arr.shape[:axis], *shp, *arr.shape[axis + 1:])
    out = fnp.reshape(result, final)
    return out


# --- the gamma family ------------------------------------------------------------------


def _scalar_normal(data: Any, dtype: np.dtype[Any]) -> Any:
    return _normal_impl(_raw_bits(data, (), dtype), (), dtype)


def _scalar_uniform(data: Any, dtype: np.dtype[Any]) -> Any:
    return _uniform_values(_raw_bits(data, (), dtype), _const(0.0, dtype), _const(1.0, dtype), (), dtype)


def _gamma_one(data: Any, alpha: Any, log_space: bool) -> Any:
    # Marsaglia and Tsang's method, with JAX's keys, loops and boost for alpha < 1.
    dtype = alpha.dtype

    def c(v: float) -> Any:
        return fnp.full((), v, dtype)

    zero, one, minus_one = c(0.0), c(1.0), c(-1.0)
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select_n(boost_mask, lax.add(alpha, one), alpha)
    d = lax.sub(alpha, c(1.0 / 3.0))
    cc = lax.div(c(1.0 / 3.0), lax.sqrt(d))

    def cond_fn(state: Any) -> Any:
        _, x, v, u = state
        return fnp.logical_and(
            lax.ge(u, lax.sub(one, lax.mul(c(0.0331), lax.mul(x, x)))),
            lax.ge(
                lax.log(u),
                lax.add(lax.mul(x, c(0.5)), lax.mul(d, lax.add(lax.sub(one, v), lax.log(v)))),
            ),
        )

    def next_xv(state: Any) -> Any:
        k = split_data(state[0], (2,))
        x = _scalar_normal(k[1], dtype)
        return k[0], x, lax.add(one, lax.mul(x, cc))

    def body_fn(state: Any) -> Any:
        k = split_data(state[0], (3,))
        _, x, v = lax.while_loop(lambda s: lax.le(s[2], zero), next_xv, (k[1], zero, minus_one))
        big_x = lax.mul(x, x)
        big_v = lax.mul(lax.mul(v, v), v)
        u = _scalar_uniform(k[2], dtype)
        return k[0], big_x, big_v, u

    keys = split_data(data, (2,))
    _, _, v, _ = lax.while_loop(cond_fn, body_fn, (keys[0], zero, one, c(2.0)))
    if log_space:
        u = _scalar_uniform(keys[1], dtype)
        log_samples = lax.neg(lax.neg(lax.log1p(lax.neg(u))))
        log_boost = lax.select_n(
            fnp.logical_or(boost_mask, lax.eq(log_samples, zero)),
            lax.mul(log_samples, lax.div(one, alpha_orig)),
            zero,
        )
        return lax.add(lax.add(lax.log(d), lax.log(v)), log_boost)
    samples = lax.sub(one, _scalar_uniform(keys[1], dtype))
    boost = lax.select_n(boost_mask, lax.pow(samples, lax.div(one, alpha_orig)), one)
    return lax.mul(lax.mul(d, v), boost)


def _gamma_sampled(log_space: bool, data: Any, a: Any) -> Any:
    from ferrax._vmap import vmap

    shape = tuple(a.shape)
    n = int(np.prod(shape, dtype=np.int64))
    keys = split_data(data, (n,))
    samples = vmap(lambda k, al: _gamma_one(k, al, log_space))(keys, fnp.reshape(a, (n,)))
    return fnp.reshape(samples, shape)


def _gamma_grad(sample: Any, a: Any, log_space: bool) -> Any:
    """The derivative of each gamma draw in its shape parameter, holding its CDF fixed
    (implicit differentiation, as JAX's ``_gamma_grad``): ``lax.random_gamma_grad`` of
    each (shape, draw) pair, mapped over the flattened arrays as JAX maps on CPU; for a
    draw in log space, divided by the draw (``d log g = dg / g``; a draw that underflows
    to 0 counts as the smallest normal, as in JAX)."""
    samples = fnp.reshape(sample, (-1,))
    alphas = fnp.reshape(a, (-1,))
    if log_space:
        samples = lax.exp(samples)
        tiny = fnp.full_like(samples, np.finfo(samples.dtype).tiny)
        samples = lax.select_n(lax.eq(samples, fnp.zeros_like(samples)), samples, tiny)

        def grad_one(args: Any) -> Any:
            alpha, s = args
            return lax.div(lax.random_gamma_grad(alpha, s), s)

    else:

        def grad_one(args: Any) -> Any:
            return lax.random_gamma_grad(*args)

    grads = lax.map(grad_one, (alphas, samples))
    return fnp.reshape(grads, tuple(a.shape))


def _gamma_values_jvp(log_space: bool, primals: Any, tangents: Any) -> Any:
    data, a = primals
    a_dot = tangents[1]
    ans = _gamma_differentiable(log_space, data, a)
    return ans, lax.mul(a_dot, _gamma_grad(ans, a, log_space))


#: The gamma sampler, differentiable in its shape parameter as JAX's ``random_gamma``
#: primitive is (its jvp: the tangent times :func:`_gamma_grad`).
_gamma_differentiable: Any = custom_jvp(_gamma_sampled, nondiff_argnums=(0,))
_gamma_differentiable.defjvp(_gamma_values_jvp)


def _gamma_values(data: Any, a: Any, log_space: bool) -> Any:
    return _gamma_differentiable(log_space, data, a)


def _gamma_impl(data: Any, a: Any, shape: tuple[int, ...], dtype: np.dtype[Any], log_space: bool) -> Any:
    a = lax.convert_element_type(a, dtype)
    if tuple(a.shape) != shape:
        a = fnp.broadcast_to(a, shape)
    return _gamma_values(data, a, log_space)


_gamma_jit = jit(_gamma_impl, static_argnums=(2, 3, 4))


def _sample_with_params(
    name: str,
    impl: Any,
    key: Any,
    params: tuple[Any, ...],
    shape: Shape | None,
    dtype: Any,
    out_sharding: Any,
    *,
    static: tuple[Any, ...] = (),
    jax_name: str | None = None,
    batch_shape: Any = None,
) -> Array:
    """A sampler of floats with parameters: ``impl(key_data, *params, shape, dtype,
    *static)``, jitted. ``shape`` defaults to the parameters' broadcast shape and must
    otherwise be broadcast-compatible with them (``batch_shape(param)``: the part of a
    parameter's shape that broadcasts, all of it by default). ``jax_name`` is the name
    JAX's messages use when it is not the function's own."""
    _no_out_sharding(name, out_sharding)
    data, _ = check_key(name, key)
    d = _float_dtype(jax_name or name, dtype)
    param_shapes = [_np_shape(p) if batch_shape is None else batch_shape(p) for p in params]
    if shape is None:
        shp = _broadcast_shapes(*param_shapes)
    else:
        shp = _canonical_shape(shape)
        _check_shape(jax_name or name, shp, *param_shapes)
    out: Array = impl(data, *params, shp, d, *static)
    return out


def gamma(
    key: Any,
    a: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Gamma random values with shape parameter ``a`` (Marsaglia and Tsang, as JAX),
    differentiable with respect to ``a`` as JAX's (implicitly, through
    ``lax.random_gamma_grad``)."""
    return _sample_with_params("gamma", _gamma_jit, key, (a,), shape, dtype, out_sharding, static=(False,))


def loggamma(
    key: Any,
    a: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """The log of gamma random values, computed in log space (accurate for small ``a``)."""
    return _sample_with_params(
        "loggamma", _gamma_jit, key, (a,), shape, dtype, out_sharding, static=(True,), jax_name="gamma"
    )


def _beta_impl(data: Any, a: Any, b: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    keys = split_data(data, (2,))
    a = fnp.broadcast_to(lax.convert_element_type(a, dtype), shape)
    b = fnp.broadcast_to(lax.convert_element_type(b, dtype), shape)
    log_a = _gamma_values(keys[0], a, True)
    log_b = _gamma_values(keys[1], b, True)
    log_max = lax.max(log_a, log_b)
    ga = lax.exp(lax.sub(log_a, log_max))
    gb = lax.exp(lax.sub(log_b, log_max))
    return lax.div(ga, lax.add(ga, gb))


_beta_jit = jit(_beta_impl, static_argnums=(3, 4))


def beta(
    key: Any,
    a: Any,
    b: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Beta random values with parameters ``a`` and ``b``."""
    return _sample_with_params("beta", _beta_jit, key, (a, b), shape, dtype, out_sharding)


def _dirichlet_impl(data: Any, alpha: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    alpha = lax.convert_element_type(alpha, dtype)
    full = (*shape, alpha.shape[-1])
    logs = _gamma_values(data, fnp.broadcast_to(alpha, full), True)
    # softmax over the last axis, as jax.nn.softmax computes it.
    shifted = lax.sub(logs, fnp.broadcast_to(fnp.max(logs, axis=-1, keepdims=True), full))
    unnormalized = lax.exp(shifted)
    total = fnp.broadcast_to(fnp.sum(unnormalized, axis=-1, keepdims=True), full)
    return lax.div(unnormalized, total)


_dirichlet_jit = jit(_dirichlet_impl, static_argnums=(2, 3))


def dirichlet(
    key: Any,
    alpha: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Dirichlet random vectors with concentrations ``alpha`` (its last axis)."""
    return _sample_with_params(
        "dirichlet", _dirichlet_jit, key, (alpha,), shape, dtype, out_sharding, batch_shape=_dirichlet_batch_shape
    )


def _dirichlet_batch_shape(alpha: Any) -> tuple[int, ...]:
    """The shape of ``alpha`` but its last axis (the concentrations of one draw)."""
    ashape = _np_shape(alpha)
    if len(ashape) < 1:
        raise ValueError(
            f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {len(ashape)}, at {user_location()}"
        )
    return ashape[:-1]


def _t_impl(data: Any, df: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    df = lax.convert_element_type(df, dtype)
    keys = split_data(data, (2,))
    n = _normal_impl(_raw_bits(keys[0], shape, dtype), shape, dtype)
    half_df = lax.div(fnp.broadcast_to(df, shape), fnp.full(shape, 2.0, dtype))
    g = _gamma_values(keys[1], half_df, False)
    return lax.mul(n, lax.sqrt(lax.div(half_df, g)))


_t_jit = jit(_t_impl, static_argnums=(2, 3))


def t(
    key: Any,
    df: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Student's t random values with ``df`` degrees of freedom."""
    return _sample_with_params("t", _t_jit, key, (df,), shape, dtype, out_sharding)
