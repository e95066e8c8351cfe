"""More of JAX 0.10's samplers, step for step (the same bits as ``jax.random`` for the
same keys): distributions built on ``uniform``, ``normal``, ``exponential`` and
``gamma`` (lognormal, maxwell, rayleigh, pareto, weibull_min, wald, triangular,
generalized_normal, chisquare, f, ball), and the discrete ones (geometric, poisson by
Knuth's method and Hörmann's transformed rejection, binomial by inversion and BTRS,
multinomial by a scan of binomials).

As in :mod:`ferrax.random._samplers`, traced, the float samplers are JAX's nested jits
over the key (``_pareto``, ``_maxwell``, ``_wald``, ...; ``lognormal`` and ``triangular``
inline, as JAX's ``inline=True`` jits); eagerly the random bits are drawn where the key
is and the floating-point work runs as one ``ferrax.jit`` computation per (shape,
dtype), with the operations of JAX's (XLA simplifies by the form of the arithmetic). The samplers whose
draws loop (poisson, binomial, multinomial, the gamma family) split their keys inside
the computation, as JAX does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ferrax import dtypes, lax
from ferrax import numpy as fnp
from ferrax._array import Array
from ferrax._jit import jit
from ferrax._user_frames import user_location
from ferrax.random._keys import check_key, random_bits_data, split_data
from ferrax.random._samplers import (
    Shape,
    _jax_jit,
    _convert_as_jax,
    _staging,
    exponential,
    normal,
    rademacher,
    uniform,
    _broadcast_shapes,
    _canonical_shape,
    _check_shape,
    _const,
    _exponential_impl,
    _float_dtype,
    _gamma_values,
    _no_out_sharding,
    _normal_impl,
    _np_shape,
    _rademacher_impl,
    _raw_bits,
    _uniform_values,
)

__all__ = [
    "ball",
    "binomial",
    "chisquare",
    "double_sided_maxwell",
    "f",
    "generalized_normal",
    "geometric",
    "lognormal",
    "maxwell",
    "multinomial",
    "pareto",
    "poisson",
    "rayleigh",
    "triangular",
    "wald",
    "weibull_min",
]


# --- argument checks, as JAX's ------------------------------------------------------------


def _shape_from_params(name: str, shape: Shape | None, *params: Any) -> tuple[int, ...]:
    """``shape`` (checked against the parameters' shapes), or their broadcast shape."""
    param_shapes = [_np_shape(p) for p in params]
    if shape is None:
        return _broadcast_shapes(*param_shapes) if param_shapes else ()
    shp = _canonical_shape(shape)
    _check_shape(name, shp, *param_shapes)
    return shp


def _check_arraylike(name: str, *args: Any) -> None:
    for i, a in enumerate(args):
        if not (isinstance(a, (Array, np.ndarray, np.generic)) or isinstance(a, (bool, int, float, complex))):
            raise TypeError(
                f"{name} requires ndarray or scalar arguments, got {type(a)} at position {i}, "
                f"at {user_location()}"
            )


def _check_safe_to_cast(name: str, dtype: np.dtype[Any], *args: Any) -> None:
    """JAX's check that the parameters convert to ``dtype`` without loss under its
    promotion rules (weakly typed scalars always do)."""
    for a in args:
        _check_arraylike(name, a)
        av_dtype, weak = _dtype_and_weak(a)
        if av_dtype == dtype:
            continue
        if dtypes.result_type([(av_dtype, weak), (dtype, False)])[0] != dtype:
            raise ValueError(
                f"In arguments to {name}, cannot safely cast argument of type {av_dtype} "
                f"to {dtype}, at {user_location()}"
            )


def _dtype_and_weak(x: Any) -> tuple[np.dtype[Any], bool]:
    from ferrax.numpy._promotion import operand_aval

    av = operand_aval("random", x)
    return np.dtype(av.dtype), bool(av.weak_type)


def _int_dtype(name: str, dtype: Any, check: bool = True) -> np.dtype[Any]:
    d = dtypes.canonicalize(int if dtype is None else dtype, name)
    if check and not dtypes.is_int(d):
        raise ValueError(f"dtype argument to `{name}` must be an int dtype, got {d}, at {user_location()}")
    return d


def _uniform01(raw: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    return _uniform_values(raw, _const(0.0, dtype), _const(1.0, dtype), shape, dtype)


def _uniform_from_key(data: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    return _uniform01(_raw_bits(data, shape, dtype), shape, dtype)


def _select(pred: Any, on_true: Any, on_false: Any) -> Any:
    return lax.select_n(pred, on_false, on_true)


# --- float samplers from uniform and normal -------------------------------------------------


def _lognormal_impl(raw: Any, sigma: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    sigma = lax.convert_element_type(sigma, dtype)
    return lax.exp(_normal_impl(raw, shape, dtype) * sigma)


_lognormal_jit = jit(_lognormal_impl, static_argnums=(2, 3))


def _lognormal(key: Any, sigma: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    # JAX's jit of it is inline=True: traced as its equations.
    sigma = _convert_as_jax(sigma, dtype)
    return lax.exp(normal(key, shape, dtype) * sigma)


def lognormal(
    key: Any,
    sigma: Any = np.float32(1),
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Log-normal random values: ``exp(sigma * normal)``."""
    _no_out_sharding("lognormal", out_sharding)
    data, _ = check_key("lognormal", key)
    d = _float_dtype("lognormal", dtype, allow_complex=True)
    shp = _shape_from_params("lognormal", shape, sigma)
    _check_safe_to_cast("lognormal", d, sigma)
    if _staging():
        staged: Array = _lognormal(data, sigma, shp, d)
        return staged
    out: Array = _lognormal_jit(_raw_bits(data, shp, d), sigma, shp, d)
    return out


def _maxwell_impl(raw: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    # The norm of three normals (jax.numpy.linalg.norm's ops: x*x, sum, sqrt).
    x = _normal_impl(raw, (*shape, 3), dtype)
    return lax.sqrt(fnp.sum(lax.mul(x, x), axis=-1))


_maxwell_jit = jit(_maxwell_impl, static_argnums=(1, 2))


@_jax_jit("shape", "dtype", "out_sharding")
def _maxwell(key: Any, shape: tuple[int, ...], dtype: np.dtype[Any], out_sharding: Any) -> Any:
    return fnp.linalg.norm(normal(key, (*shape, 3), dtype), axis=-1)


def maxwell(key: Any, shape: Shape = (), dtype: Any = None, *, out_sharding: Any = None) -> Array:
    """Maxwell random values: the norm of three standard normals."""
    _no_out_sharding("maxwell", out_sharding)
    data, _ = check_key("maxwell", key)
    d = _float_dtype("maxwell", dtype)
    shp = _canonical_shape(shape)
    if _staging():
        staged: Array = _maxwell(data, shp, d, None)
        return staged
    out: Array = _maxwell_jit(_raw_bits(data, (*shp, 3), d), shp, d)
    return out


def _double_sided_maxwell_impl(
    raw_m: Any, raw_r: Any, loc: Any, scale: Any, shape: tuple[int, ...], dtype: np.dtype[Any]
) -> Any:
    m = _maxwell_impl(raw_m, shape, dtype)
    sign = _rademacher_impl(raw_r, shape, dtype)
    return sign * m * scale + loc


_double_sided_maxwell_jit = jit(_double_sided_maxwell_impl, static_argnums=(4, 5))


@_jax_jit("shape", "dtype")
def _double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    params_shape = _broadcast_shapes(_np_shape(loc), _np_shape(scale))
    if not shape:
        shape = params_shape
    shape = shape + params_shape
    maxwell_key, rademacher_key = split_data(key, (2,))
    m = maxwell(maxwell_key, shape=shape, dtype=dtype)
    sign = rademacher(rademacher_key, shape=shape, dtype=dtype)
    return sign * m * scale + loc


def double_sided_maxwell(
    key: Any, loc: Any, scale: Any, shape: Shape = (), dtype: Any = None
) -> Array:
    """Double-sided Maxwell random values: a Maxwell draw with a random sign, scaled
    and shifted. As JAX's, the result's shape is ``shape`` (the parameters' broadcast
    shape if empty) followed by the parameters' broadcast shape."""
    data, _ = check_key("double_sided_maxwell", key)
    d = _float_dtype("double_sided_maxwell", dtype)
    shp = _canonical_shape(shape)
    if _staging():
        staged: Array = _double_sided_maxwell(data, loc, scale, shp, d)
        return staged
    params_shape = _broadcast_shapes(_np_shape(loc), _np_shape(scale))
    if not shp:
        shp = params_shape
    shp = shp + params_shape
    keys = split_data(data, (2,))
    raw_m = _raw_bits(keys[0], (*shp, 3), d)
    raw_r = _raw_bits(keys[1], shp, dtypes.default_float())
    out: Array = _double_sided_maxwell_jit(raw_m, raw_r, loc, scale, shp, d)
    return out


def _rayleigh_impl(raw: Any, scale: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    u = _uniform01(raw, shape, dtype)
    scale = fnp.broadcast_to(fnp.astype(scale, dtype), shape)
    sqrt_u = lax.sqrt(lax.mul(lax.log(u), fnp.full((), -2, dtype)))
    return lax.mul(scale, sqrt_u)


_rayleigh_jit = jit(_rayleigh_impl, static_argnums=(2, 3))


@_jax_jit("shape", "dtype")
def _rayleigh(key: Any, scale: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    u = uniform(key, shape, dtype)
    scale = fnp.broadcast_to(fnp.astype(scale, dtype), shape)
    sqrt_u = lax.sqrt(lax.mul(lax.log(u), np.array(-2, dtype)))
    return lax.mul(scale, sqrt_u)


def rayleigh(
    key: Any,
    scale: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Rayleigh random values with the given ``scale``."""
    _no_out_sharding("rayleigh", out_sharding)
    data, _ = check_key("rayleigh", key)
    d = _float_dtype("rayleigh", dtype)
    shp = _shape_from_params("rayleigh", shape, scale)
    _check_safe_to_cast("rayleigh", d, scale)
    if _staging():
        staged: Array = _rayleigh(data, scale, shp, d)
        return staged
    out: Array = _rayleigh_jit(_raw_bits(data, shp, d), scale, shp, d)
    return out


def _pareto_impl(raw: Any, b: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    b = lax.convert_element_type(b, dtype)
    return lax.exp(_exponential_impl(raw, shape, dtype) / b)


_pareto_jit = jit(_pareto_impl, static_argnums=(2, 3))


@_jax_jit("shape", "dtype")
def _pareto(key: Any, b: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    b = lax.convert_element_type(b, dtype)
    return lax.exp(exponential(key, shape, dtype) / b)


def pareto(
    key: Any,
    b: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Pareto random values with shape parameter ``b`` (on ``[1, inf)``)."""
    _no_out_sharding("pareto", out_sharding)
    data, _ = check_key("pareto", key)
    d = _float_dtype("pareto", dtype)
    shp = _shape_from_params("pareto", shape, b)
    _check_safe_to_cast("pareto", d, b)
    if _staging():
        staged: Array = _pareto(data, b, shape=shp, dtype=d)
        return staged
    out: Array = _pareto_jit(_raw_bits(data, shp, d), b, shp, d)
    return out


def _weibull_min_impl(
    raw: Any, scale: Any, concentration: Any, shape: tuple[int, ...], dtype: np.dtype[Any]
) -> Any:
    u = _uniform_values(raw, np.int32(0), np.int32(1), shape, dtype)
    return fnp.power(-fnp.log1p(-u), 1.0 / concentration) * scale


_weibull_min_jit = jit(_weibull_min_impl, static_argnums=(3, 4))


@_jax_jit("shape", "dtype")
def _weibull_min(key: Any, scale: Any, concentration: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    u = uniform(key=key, shape=shape, minval=0, maxval=1, dtype=dtype)
    # The inverse of the Weibull CDF.
    return fnp.power(-fnp.log1p(-u), 1.0 / concentration) * scale


def weibull_min(
    key: Any, scale: Any, concentration: Any, shape: Shape = (), dtype: Any = None
) -> Array:
    """Weibull random values (the inverse of the minimum-Weibull CDF at a uniform draw);
    the parameters broadcast against ``shape`` and may widen the dtype, as JAX's."""
    data, _ = check_key("weibull_min", key)
    d = _float_dtype("weibull_min", dtype)
    shp = _canonical_shape(shape)
    if _staging():
        staged: Array = _weibull_min(data, scale, concentration, shp, d)
        return staged
    out: Array = _weibull_min_jit(_raw_bits(data, shp, d), scale, concentration, shp, d)
    return out


def _wald_from_draws(mean: Any, v: Any, z: Any) -> Any:
    """Wald values of ``mean`` (already of the result's shape and dtype) from standard
    normal draws ``v`` and uniform ones ``z`` in ``[0, 1)``: JAX's transform, which both
    the eager and the traced path apply."""
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return _select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def _wald_impl(raw_n: Any, raw_u: Any, mean: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    mean = fnp.broadcast_to(fnp.astype(mean, dtype), shape)
    v = _normal_impl(raw_n, shape, dtype)
    z = _uniform01(raw_u, shape, dtype)
    return _wald_from_draws(mean, v, z)


_wald_jit = jit(_wald_impl, static_argnums=(3, 4))


@_jax_jit("shape", "dtype")
def _wald(key: Any, mean: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    k1, k2 = split_data(key, (2,))
    mean = fnp.broadcast_to(fnp.astype(mean, dtype), shape)
    v = normal(k1, shape, dtype)
    z = uniform(k2, shape, dtype)
    return _wald_from_draws(mean, v, z)


def wald(
    key: Any,
    mean: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Wald (inverse Gaussian) random values with the given ``mean``."""
    _no_out_sharding("wald", out_sharding)
    data, _ = check_key("wald", key)
    d = _float_dtype("wald", dtype)
    shp = _shape_from_params("wald", shape, mean)
    _check_safe_to_cast("wald", d, mean)
    if _staging():
        staged: Array = _wald(data, mean, shape=shp, dtype=d)
        return staged
    keys = split_data(data, (2,))
    out: Array = _wald_jit(_raw_bits(keys[0], shp, d), _raw_bits(keys[1], shp, d), mean, shp, d)
    return out


def _triangular_impl(
    raw: Any, left: Any, mode: Any, right: Any, shape: tuple[int, ...], dtype: np.dtype[Any]
) -> Any:
    left = fnp.broadcast_to(lax.convert_element_type(left, dtype), shape)
    right = fnp.broadcast_to(lax.convert_element_type(right, dtype), shape)
    mode = fnp.broadcast_to(lax.convert_element_type(mode, dtype), shape)
    fc = (mode - left) / (right - left)
    u = _uniform01(raw, shape, dtype)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return _select(u < fc, out1, out2)


_triangular_jit = jit(_triangular_impl, static_argnums=(4, 5))


def _triangular(key: Any, left: Any, mode: Any, right: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    # JAX's jit of it is inline=True: traced as its equations.
    left = fnp.broadcast_to(_convert_as_jax(left, dtype), shape)
    right = fnp.broadcast_to(_convert_as_jax(right, dtype), shape)
    mode = fnp.broadcast_to(_convert_as_jax(mode, dtype), shape)
    fc = (mode - left) / (right - left)
    u = uniform(key, shape, dtype)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return _select(u < fc, out1, out2)


def triangular(
    key: Any,
    left: Any,
    mode: Any,
    right: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Triangular random values on ``[left, right]`` with its peak at ``mode``."""
    _no_out_sharding("triangular", out_sharding)
    data, _ = check_key("triangular", key)
    d = _float_dtype("triangular", dtype)
    shp = _shape_from_params("triangular", shape, left, mode, right)
    _check_safe_to_cast("triangular", d, left, mode, right)
    if _staging():
        staged: Array = _triangular(data, left, mode, right, shp, d)
        return staged
    out: Array = _triangular_jit(_raw_bits(data, shp, d), left, mode, right, shp, d)
    return out


def _geometric_impl(raw: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    u = _uniform01(raw, shape, p.dtype)
    u = fnp.where(u == 0, 1, u)
    log_u = lax.log(u)
    log_one_minus_p = fnp.broadcast_to(lax.log1p(-p), shape)
    g = lax.floor(lax.div(log_u, log_one_minus_p)) + 1
    return fnp.astype(g, dtype)


_geometric_jit = jit(_geometric_impl, static_argnums=(2, 3))


@_jax_jit("shape", "dtype", "out_sharding")
def _geometric(key: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype[Any], out_sharding: Any) -> Any:
    (p,) = _promote_inexact(p)
    u = uniform(key, shape, p.dtype)
    # u = 0 maps to 1 (no inf in log u), as JAX's.
    u = fnp.where(u == 0, 1, u)
    log_u = lax.log(u)
    log_one_minus_p = fnp.broadcast_to(lax.log1p(-p), shape)
    g = lax.floor(lax.div(log_u, log_one_minus_p)) + 1
    return fnp.astype(g, dtype)


def geometric(
    key: Any,
    p: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Geometric random values: the number of Bernoulli(``p``) trials to the first
    success (int32 by default, int64 with x64)."""
    _no_out_sharding("geometric", out_sharding)
    data, _ = check_key("geometric", key)
    d = _int_dtype("geometric", dtype)
    shp = _shape_from_params("geometric", shape, p)
    _check_arraylike("geometric", p)
    if _staging():
        staged: Array = _geometric(data, p, shp, d, None)
        return staged
    (p_arr,) = _promote_inexact(p)
    out: Array = _geometric_jit(_raw_bits(data, shp, p_arr.dtype), p_arr, shp, d)
    return out


def _promote_inexact(*args: Any) -> list[Any]:
    """JAX's ``promote_dtypes_inexact``: the arguments in their common inexact dtype,
    weakly typed if they all are."""
    from ferrax.numpy._promotion import convert, operand_aval

    avals = [operand_aval("random", a, i) for i, a in enumerate(args)]
    dtype, weak = dtypes.promote([(a.dtype, a.weak_type) for a in avals])
    dtype = dtypes.to_inexact(dtype)
    return [convert(a, dtype, weak) for a in args]


# --- samplers built on gamma --------------------------------------------------------------


def _gamma_full(data: Any, a: Any, shape: tuple[int, ...], dtype: np.dtype[Any], log_space: bool) -> Any:
    """``gamma``/``loggamma`` of ``a`` over ``shape`` (JAX's ``_gamma``: convert, then
    broadcast)."""
    a = lax.convert_element_type(a, dtype)
    if tuple(a.shape) != shape:
        a = fnp.broadcast_to(a, shape)
    return _gamma_values(data, a, log_space)


def _chisquare_values(data: Any, df: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    df = lax.convert_element_type(df, dtype)
    two = _const(2, dtype)
    half_df = lax.div(df, two)
    log_g = _gamma_full(data, half_df, shape, dtype, True)
    return lax.mul(lax.exp(log_g), two)


_chisquare_jit = jit(_chisquare_values, static_argnums=(2, 3))


def chisquare(
    key: Any,
    df: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Chi-square random values with ``df`` degrees of freedom (twice a gamma draw,
    computed in log space as JAX's)."""
    _no_out_sharding("chisquare", out_sharding)
    data, _ = check_key("chisquare", key)
    d = _float_dtype("chisquare", dtype)
    shp = _shape_from_params("chisquare", shape, df)
    _check_safe_to_cast("chisquare", d, df)
    out: Array = _chisquare_jit(data, df, shp, d)
    return out


def _f_impl(data: Any, dfnum: Any, dfden: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    dfden = lax.convert_element_type(dfden, dtype)
    dfnum = lax.convert_element_type(dfnum, dtype)
    keys = split_data(data, (2,))
    chi2_dfn = _chisquare_values(keys[1], dfnum, shape, dtype)
    chi2_dfd = _chisquare_values(keys[0], dfden, shape, dtype)
    return lax.div(lax.div(chi2_dfn, dfnum), lax.div(chi2_dfd, dfden))


_f_jit = jit(_f_impl, static_argnums=(3, 4))


def f(
    key: Any,
    dfnum: Any,
    dfden: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """F-distribution random values: the ratio of two chi-square draws, each divided by
    its degrees of freedom."""
    _no_out_sharding("f", out_sharding)
    data, _ = check_key("f", key)
    d = _float_dtype("f", dtype)
    shp = _shape_from_params("f", shape, dfnum, dfden)
    _check_safe_to_cast("f", d, dfnum, dfden)
    out: Array = _f_jit(data, dfnum, dfden, shp, d)
    return out


def _generalized_normal_values(data: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    keys = split_data(data, (2,))
    g = _gamma_full(keys[0], 1 / p, shape, dtype, False)
    r = _rademacher_impl(_raw_bits(keys[1], shape, dtypes.default_float()), shape, dtype)
    return r * g ** (1 / p)


_generalized_normal_jit = jit(_generalized_normal_values, static_argnums=(2, 3))


def _gamma_checks(dtype: Any, shape: tuple[int, ...], p: Any) -> np.dtype[Any]:
    # generalized_normal draws gamma(1 / p, shape): gamma's checks and messages.
    d = _float_dtype("gamma", dtype)
    _check_shape("gamma", shape, _np_shape(p))
    return d


def generalized_normal(
    key: Any,
    p: float,
    shape: Shape = (),
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Generalized normal random values with exponent ``p`` (``p = 2`` a normal scaled
    by ``1/sqrt(2)``, ``p = 1`` a Laplace)."""
    shp = _canonical_shape(shape)
    data, _ = check_key("generalized_normal", key)
    _no_out_sharding("generalized_normal", out_sharding)
    d = _gamma_checks(dtype, shp, p)
    out: Array = _generalized_normal_jit(data, p, shp, d)
    return out


def _ball_impl(data: Any, p: Any, d: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    keys = split_data(data, (2,))
    g = _generalized_normal_values(keys[0], p, (*shape, d), dtype)
    e = _exponential_impl(_raw_bits(keys[1], shape, dtype), shape, dtype)
    return g / ((fnp.sum(fnp.abs(g) ** p, axis=-1) + e) ** (1 / p))[..., None]


_ball_jit = jit(_ball_impl, static_argnums=(2, 3, 4))


def ball(
    key: Any,
    d: int,
    p: float = 2,
    shape: Shape = (),
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Random points in the unit ``p``-norm ball of dimension ``d`` (shape
    ``(*shape, d)``), uniformly distributed."""
    shp = _canonical_shape(shape)
    data, _ = check_key("ball", key)
    try:
        dim = int(d.__index__())
    except (AttributeError, TypeError):
        raise TypeError(
            f"ball: d must be a concrete integer, got {d!r}, at {user_location()}"
        ) from None
    _no_out_sharding("ball", out_sharding)
    dt = _gamma_checks(dtype, (*shp, dim), p)
    out: Array = _ball_jit(data, p, dim, shp, dt)
    return out


# --- discrete samplers -------------------------------------------------------------------


def _poisson_knuth(data: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype[Any], max_iters: Any) -> Any:
    # Knuth: count uniform draws until their product falls below exp(-lam).
    f32 = np.dtype(np.float32)

    def body_fn(carry: Any) -> Any:
        i, k, rng, log_prod = carry
        keys = split_data(rng, (2,))
        k = _select(log_prod > -lam, k + 1, k)
        u = _uniform_from_key(keys[1], shape, f32)
        return i + 1, k, keys[0], log_prod + lax.log(u)

    def cond_fn(carry: Any) -> Any:
        i, log_prod = carry[0], carry[3]
        return fnp.logical_and(fnp.any(log_prod > -lam), i < max_iters)

    k_init = fnp.zeros(shape, dtype)
    log_rate_init = fnp.zeros(shape, f32)
    k = lax.while_loop(cond_fn, body_fn, (0, k_init, data, log_rate_init))[1]
    return fnp.astype(k - 1, dtype)


def _poisson_rejection(data: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype[Any], max_iters: Any) -> Any:
    # Hörmann's transformed rejection (PTRS), with JAX's constants and keys.
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body_fn(carry: Any) -> Any:
        i, k_out, accepted, rng = carry
        keys = split_data(rng, (3,))
        u = _uniform_from_key(keys[1], shape, lam.dtype) - 0.5
        v = _uniform_from_key(keys[2], shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept2 = s <= t
        accept = accept1 | (~reject & accept2)
        k_out = _select(accept, k, k_out)
        accepted = accepted | accept
        return i + 1, k_out, accepted, keys[0]

    def cond_fn(carry: Any) -> Any:
        i, _, accepted, _ = carry
        return fnp.logical_and(fnp.any(~accepted), i < max_iters)

    k_init = fnp.full(shape, -1, lam.dtype)
    accepted = fnp.zeros(shape, np.bool_)
    k = lax.while_loop(cond_fn, body_fn, (0, k_init, accepted, data))[1]
    return fnp.astype(k, dtype)


def _poisson_impl(data: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    # Knuth below 10 (and for NaN), transformed rejection above, as JAX, NumPy and TF.
    use_knuth = lax.ne(lam, lam) | (lam < 10)
    lam_knuth = _select(use_knuth, lam, fnp.zeros_like(lam))
    lam_rejection = _select(use_knuth, fnp.full_like(lam, 1e5), lam)
    max_iters = dtype.type(np.iinfo(dtype).max)
    result = _select(
        use_knuth,
        _poisson_knuth(data, lam_knuth, shape, dtype, max_iters),
        _poisson_rejection(data, lam_rejection, shape, dtype, max_iters),
    )
    return _select(lam == 0, fnp.zeros_like(result), result)


_poisson_jit = jit(_poisson_impl, static_argnums=(2, 3))


def poisson(
    key: Any,
    lam: Any,
    shape: Shape | None = None,
    dtype: Any = None,
    *,
    out_sharding: Any = None,
) -> Array:
    """Poisson random values with rate ``lam`` (int32 by default, int64 with x64); ``lam``
    is broadcast to ``shape`` and sampled in float32, as JAX's."""
    _no_out_sharding("poisson", out_sharding)
    data, _ = check_key("poisson", key)
    d = _int_dtype("poisson", dtype, check=False)
    if not dtypes.is_int(d):
        raise ValueError(f"Invalid integer data type {d.name!r}, at {user_location()}")
    shp = _np_shape(lam) if shape is None else _canonical_shape(shape)
    lam_shape = _np_shape(lam)
    padded = (1,) * (len(shp) - len(lam_shape)) + lam_shape
    if len(lam_shape) > len(shp) or any(a not in (1, b) for a, b in zip(padded, shp)):
        lam_dtype, _ = _dtype_and_weak(lam)
        raise ValueError(
            f"Incompatible types for broadcasting: input type={lam_dtype.name}{list(lam_shape)} "
            f"and requested type={lam_dtype.name}{list(shp)}, at {user_location()}"
        )
    lam_arr = lax.convert_element_type(fnp.broadcast_to(lam, shp), np.float32)
    out: Array = _poisson_jit(data, lam_arr, shp, d)
    return out


_STIRLING_TAIL = [
    0.0810614667953272,
    0.0413406959554092,
    0.0276779256849983,
    0.02079067210376509,
    0.0166446911898211,
    0.0138761288230707,
    0.0118967099458917,
    0.0104112652619720,
    0.00925546218271273,
    0.00833056343336287,
]


def _stirling_approx_tail(k: Any) -> Any:
    # The tail of Stirling's approximation of log(k!): a table up to 9, the series above
    # (evaluated at the clamped k, as JAX's).
    table = fnp.asarray(np.array(_STIRLING_TAIL, k.dtype))
    use_tail_values = k <= 9
    k = lax.clamp(_const(0.0, k.dtype), k, _const(9.0, k.dtype))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    k = fnp.floor(k)
    return _select(use_tail_values, table[fnp.astype(k, np.int32)], approx)


def _binomial_inversion(
    data: Any, count: Any, prob: Any, shape: tuple[int, ...], dtype: np.dtype[Any], max_iters: Any
) -> Any:
    log1minusprob = fnp.log1p(-prob)

    def body_fn(carry: Any) -> Any:
        i, num_geom, geom_sum, rng = carry
        keys = split_data(rng, (2,))
        num_geom_out = _select(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform_from_key(keys[0], shape, prob.dtype)
        geom = fnp.ceil(fnp.log(u) / log1minusprob)
        return i + 1, num_geom_out, geom_sum + geom, keys[1]

    def cond_fn(carry: Any) -> Any:
        i, geom_sum = carry[0], carry[2]
        return fnp.logical_and(fnp.any(geom_sum <= count), i < max_iters)

    init = fnp.zeros(shape, prob.dtype)
    k = lax.while_loop(cond_fn, body_fn, (0, init, init, data))[1]
    return fnp.astype(k - 1, dtype)


def _btrs(
    data: Any, count: Any, prob: Any, shape: tuple[int, ...], dtype: np.dtype[Any], max_iters: Any
) -> Any:
    # Hörmann's transformed rejection with squeeze (BTRS), with JAX's constants and keys.
    stddev = fnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = fnp.floor((count + 1) * prob)

    def body_fn(carry: Any) -> Any:
        i, k_out, accepted, rng = carry
        keys = split_data(rng, (3,))
        u = _uniform_from_key(keys[1], shape, prob.dtype)
        v = _uniform_from_key(keys[2], shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - fnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = fnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = fnp.log(v * alpha / (a / (us * us) + b))
        ub = (
            (m + 0.5) * fnp.log((m + 1) / (r * (count - m + 1)))
            + (count + 1) * fnp.log((count - m + 1) / (count - k + 1))
            + (k + 0.5) * fnp.log(r * (count - k + 1) / (k + 1))
            + _stirling_approx_tail(m)
            + _stirling_approx_tail(count - m)
            - _stirling_approx_tail(k)
            - _stirling_approx_tail(count - k)
        )
        accept2 = v <= ub
        accept = accept1 | (~reject & accept2)
        k_out = _select(accept, k, k_out)
        accepted = accepted | accept
        return i + 1, k_out, accepted, keys[0]

    def cond_fn(carry: Any) -> Any:
        i, accepted = carry[0], carry[2]
        return fnp.logical_and(fnp.any(~accepted), i < max_iters)

    k_init = fnp.full(shape, -1, prob.dtype)
    carry = (0, k_init, fnp.zeros(shape, np.bool_), data)
    return fnp.astype(lax.while_loop(cond_fn, body_fn, carry)[1], dtype)


def _binomial_values(data: Any, count: Any, prob: Any, shape: tuple[int, ...] | None, dtype: np.dtype[Any]) -> Any:
    # Inversion when n * min(p, 1 - p) <= 10, BTRS above, as TensorFlow's and JAX's.
    if shape is None:
        shape = _broadcast_shapes(_np_shape(count), _np_shape(prob))
    else:
        _check_shape("binomial", shape, _np_shape(count), _np_shape(prob))
    (prob,) = _promote_inexact(prob)
    count = lax.convert_element_type(count, prob.dtype)
    count = fnp.broadcast_to(count, shape)
    prob = fnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = _select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = lax.ne(count, count) | (count < 0.0)
    count_inf = fnp.isinf(count)
    q_is_nan = lax.ne(q, q)
    q_l_0 = q < 0.0
    q = _select(q_is_nan | q_l_0, fnp.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = fnp.floor(count)
    count_inv = _select(use_inversion, count, fnp.full_like(count, 0.0))
    count_btrs = _select(use_inversion, fnp.full_like(count, 1e4), count)
    q_btrs = _select(use_inversion, fnp.full_like(q, 0.5), q)
    max_iters = dtype.type(np.finfo(dtype).max) if dtype != dtypes.bfloat16 else dtype.type(3.3895e38)
    samples = _select(
        use_inversion,
        _binomial_inversion(data, count_inv, q, shape, dtype, max_iters),
        _btrs(data, count_btrs, q_btrs, shape, dtype, max_iters),
    )
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = _select(invalid, fnp.full_like(samples, np.nan, dtype), samples)
    samples = _select(count_inf & (~invalid), fnp.full_like(samples, np.inf, dtype), samples)
    return _select(
        p_lt_half | count_nan_or_neg | q_is_nan | count_inf,
        samples,
        fnp.astype(count, dtype) - samples,
    )


_binomial_jit = jit(_binomial_values, static_argnums=(3, 4))


def binomial(key: Any, n: Any, p: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Binomial random values (as floats: ``dtype`` float32 by default, float64 with
    x64) for ``n`` trials of probability ``p``; NaN for a negative or NaN ``n`` or a
    NaN or negative ``p``, as JAX's."""
    data, _ = check_key("binomial", key)
    _check_arraylike("binomial", n, p)
    d = _float_dtype("binomial", dtype)
    shp = None if shape is None else _canonical_shape(shape)
    out: Array = _binomial_jit(data, n, p, shp, d)
    return out


def _multinomial_impl(data: Any, n: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    n = fnp.broadcast_to(n, shape[:-1])
    p = fnp.broadcast_to(p, shape)

    def step(remainder: Any, ratio_key: Any) -> tuple[Any, Any]:
        ratio, k = ratio_key
        count = _binomial_values(k, remainder, fnp.clip(ratio, 0, 1), None, remainder.dtype)
        return remainder - count, count

    p = fnp.moveaxis(p, -1, 0)
    remaining_probs = lax.cumsum(p, 0, reverse=True)
    ratios = p / fnp.where(remaining_probs == 0, 1, remaining_probs)
    keys = split_data(data, (ratios.shape[0],))
    _, counts = lax.scan(step, n, (ratios, keys))
    return fnp.astype(fnp.moveaxis(counts, 0, -1), dtype)


_multinomial_jit = jit(_multinomial_impl, static_argnums=(3, 4))


def multinomial(
    key: Any,
    n: Any,
    p: Any,
    *,
    shape: Shape | None = None,
    dtype: Any = None,
    unroll: int | bool = 1,
) -> Array:
    """Multinomial counts of ``n`` draws over the categories of ``p``'s last axis (a
    scan of binomials over the categories, as JAX's). ``unroll`` is accepted for JAX's
    signature; the values do not depend on it."""
    data, _ = check_key("multinomial", key)
    _check_arraylike("multinomial", n, p)
    n_arr, p_arr = _promote_inexact(n, p)
    shp = tuple(p_arr.shape) if shape is None else _canonical_shape(shape)
    d = dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype, "multinomial")
    out: Array = _multinomial_jit(data, n_arr, p_arr, shp, d)
    return out
