"""The regularized incomplete gamma family: ``igamma`` (``P(a, x)``), ``igammac``
(``Q(a, x) = 1 - P(a, x)``), ``igamma_grad_a`` (``dP/da``), and ``random_gamma_grad``
(the derivative of a ``Gamma(a, 1)`` sample ``x`` in ``a``, holding its CDF fixed).

The first three are built-in primitives with JAX's names (shape rule, evaluator and the
lowering in Rust: JAX's series and continued fraction, op for op, so compiled values are
its bits). Here are their eager rules (the same algorithm in NumPy, in float64 and
rounded to the operands' dtype), their derivatives (JAX's: ``dP/da`` is
``igamma_grad_a``, ``dP/dx`` the gamma density; ``igammac``'s their negations;
``igamma_grad_a`` has none, as in JAX) and batching. ``random_gamma_grad`` is no
primitive in JAX 0.10.2: it traces into its series and continued fraction (two while
loops), and so it does here, op for op as JAX, so its jaxpr is JAX's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import user_location
from ferrax.errors import DifferentiationError
from ferrax._interpreters import ad
from ferrax._lax._operands import bind1, quiet, scalar
from ferrax._lax.elementwise import (
    _elementwise_batch,
    _out_shaped,
    _primitive,
    add,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    div,
    eq,
    exp,
    gt,
    le,
    log,
    lt,
    mul,
    ne,
    neg,
    select_n,
    sub,
)

__all__ = ["igamma", "igamma_grad_a", "igammac", "random_gamma_grad"]

NDArray = np.ndarray[Any, Any]

#: The most terms of the eager series (it converges in a few hundred where used); the
#: continued fraction stops at 2000 steps, as JAX's.
_SERIES_CAP = 100_000
_FRACTION_CAP = 2000


def _special() -> Any:
    import importlib

    return importlib.import_module("scipy.special")


def _lgamma(x: NDArray) -> NDArray:
    out: NDArray = np.where(x == -np.inf, np.inf, _special().gammaln(x))
    return out


def _digamma(x: NDArray) -> NDArray:
    out: NDArray = np.where(x == 0, np.nan, _special().psi(x))
    return out


def _series(ax: NDArray, x: NDArray, a: NDArray, enabled: NDArray, derivative: bool) -> NDArray:
    """The series of ``P(a, x)`` (or its derivative in ``a``) where ``enabled``, each
    element frozen once converged, as JAX's loop."""
    eps = np.finfo(np.float64).eps
    r, c, ans = a.copy(), np.ones_like(a), np.ones_like(a)
    dc_da, dans_da = np.zeros_like(a), np.zeros_like(a)
    on = enabled.copy()
    steps = 0
    while on.any() and steps < _SERIES_CAP:
        steps += 1
        r_n = r + 1
        dc_n = dc_da * (x / r_n) - (c * x) / (r_n * r_n)
        dans_n = dans_da + dc_n
        c_n = c * (x / r_n)
        ans_n = ans + c_n
        more = np.abs(dc_n / dans_n) > eps if derivative else c_n / ans_n > eps
        r, c, ans = np.where(on, r_n, r), np.where(on, c_n, c), np.where(on, ans_n, ans)
        dc_da, dans_da = np.where(on, dc_n, dc_da), np.where(on, dans_n, dans_da)
        on = on & more
    if not derivative:
        out: NDArray = ans * ax / a
        return out
    dlogax_da = np.log(x) - _digamma(a + 1)
    out = ax * (ans * dlogax_da + dans_da) / a
    return out


def _fraction(ax: NDArray, x: NDArray, a: NDArray, enabled: NDArray, derivative: bool) -> NDArray:
    """The continued fraction of ``Q(a, x)`` (or its derivative in ``a``) where
    ``enabled``, with the convergents rescaled past ``1 / eps``, as JAX's loop."""
    eps = np.finfo(np.float64).eps
    y = 1 - a
    z = x + y + 1
    pkm2, qkm2, pkm1 = np.ones_like(x), x.copy(), x + 1
    qkm1 = z * x
    ans = pkm1 / qkm1
    t = np.ones_like(x)
    dpkm2, dqkm2, dpkm1, dqkm1 = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x), -x
    dans = (dpkm1 - ans * dqkm1) / qkm1
    on = enabled.copy()
    c = 0.0
    while on.any() and c < _FRACTION_CAP:
        c += 1
        y_n, z_n = y + 1, z + 2
        yc = y_n * c
        pk = pkm1 * z_n - pkm2 * yc
        qk = qkm1 * z_n - qkm2 * yc
        nz = qk != 0
        r = pk / qk
        t_n = np.where(nz, np.abs((ans - r) / r), 1.0)
        ans_n = np.where(nz, r, ans)
        dpk = dpkm1 * z_n - pkm1 - dpkm2 * yc + pkm2 * c
        dqk = dqkm1 * z_n - qkm1 - dqkm2 * yc + qkm2 * c
        dans_n = np.where(nz, (dpk - ans_n * dqk) / qk, dans)
        change = np.where(nz, np.abs(dans_n - dans), 1.0)
        n_pkm2, n_pkm1, n_qkm2, n_qkm1 = pkm1, pk, qkm1, qk
        n_dpkm2, n_dqkm2, n_dpkm1, n_dqkm1 = dpkm1, dqkm1, dpk, dqk
        scale = np.where(np.abs(pk) > 1 / eps, eps, 1.0)
        n_pkm2, n_pkm1, n_qkm2, n_qkm1 = n_pkm2 * scale, n_pkm1 * scale, n_qkm2 * scale, n_qkm1 * scale
        n_dpkm2, n_dqkm2 = n_dpkm2 * scale, n_dqkm2 * scale
        n_dpkm1, n_dqkm1 = n_dpkm1 * scale, n_dqkm1 * scale
        more = change > eps if derivative else t_n > eps
        ans, t = np.where(on, ans_n, ans), np.where(on, t_n, t)
        y, z = np.where(on, y_n, y), np.where(on, z_n, z)
        pkm2, pkm1 = np.where(on, n_pkm2, pkm2), np.where(on, n_pkm1, pkm1)
        qkm2, qkm1 = np.where(on, n_qkm2, qkm2), np.where(on, n_qkm1, qkm1)
        dpkm2, dqkm2 = np.where(on, n_dpkm2, dpkm2), np.where(on, n_dqkm2, dqkm2)
        dpkm1, dqkm1 = np.where(on, n_dpkm1, dpkm1), np.where(on, n_dqkm1, dqkm1)
        dans = np.where(on, dans_n, dans)
        on = on & more
    if not derivative:
        out: NDArray = ans * ax
        return out
    dlogax_da = np.log(x) - _digamma(a)
    out = ax * (ans * dlogax_da + dans)
    return out


def _prepare(a: NDArray, x: NDArray) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """The operands broadcast in float64, ``x^a e^-x / Gamma(a)`` and where its log is
    below ``-log(max)`` (JAX computes nothing there)."""
    a64, x64 = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    a64, x64 = a64.copy(), x64.copy()
    log_ax = a64 * np.log(x64) - x64 - _lgamma(a64)
    underflow = log_ax < -np.log(np.finfo(np.float64).max)
    return a64, x64, np.exp(log_ax), underflow


@quiet
def _igamma(a: NDArray, x: NDArray) -> NDArray:
    a64, x64, ax, underflow = _prepare(a, x)
    is_nan = np.isnan(a64) | np.isnan(x64)
    x_inf, x0 = x64 == np.inf, x64 == 0
    domain = (x64 < 0) | (a64 < 0) | ((a64 == 0) & x0) | is_nan
    use_fraction = (x64 >= 1) & (x64 > a64)
    enabled = ~(x0 | domain | underflow | x_inf)
    out = np.where(
        use_fraction,
        1 - _fraction(ax, x64, a64, enabled & use_fraction, False),
        _series(ax, x64, a64, enabled & ~use_fraction, False),
    )
    out = np.where(x0, 0.0, out)
    out = np.where(x_inf, 1.0, out)
    out = np.where(domain, np.nan, out)
    return out.astype(np.result_type(a, x))


@quiet
def _igammac(a: NDArray, x: NDArray) -> NDArray:
    a64, x64, ax, underflow = _prepare(a, x)
    is_nan = np.isnan(a64) | np.isnan(x64)
    a0, x_inf = a64 == 0, x64 == np.inf
    domain = (x64 < 0) | (a64 < 0) | (a0 & (x64 == 0)) | is_nan
    use_series = (x64 < 1) | (x64 < a64)
    enabled = ~(domain | underflow | x_inf | a0)
    out = np.where(
        use_series,
        1 - _series(ax, x64, a64, enabled & use_series, False),
        _fraction(ax, x64, a64, enabled & ~use_series, False),
    )
    out = np.where(x_inf | a0, 0.0, out)
    out = np.where(domain, np.nan, out)
    return out.astype(np.result_type(a, x))


@quiet
def _igamma_grad_a(a: NDArray, x: NDArray) -> NDArray:
    a64, x64, ax, underflow = _prepare(a, x)
    is_nan = np.isnan(a64) | np.isnan(x64)
    x0 = x64 == 0
    domain = (x64 < 0) | (a64 <= 0)
    use_fraction = (x64 > 1) & (x64 > a64)
    enabled = ~(x0 | domain | underflow | is_nan)
    out = np.where(
        use_fraction,
        -_fraction(ax, x64, a64, enabled & use_fraction, True),
        _series(ax, x64, a64, enabled & ~use_fraction, True),
    )
    out = np.where(x0, 0.0, out)
    out = np.where(domain | is_nan, np.nan, out)
    return out.astype(np.result_type(a, x))


igamma_p = _primitive("igamma", _igamma)
igammac_p = _primitive("igammac", _igammac)
igamma_grad_a_p = _primitive("igamma_grad_a", _igamma_grad_a)


# ---------------------------------------------------------------------------- functions


def igamma(a: Any, x: Any) -> Array:
    """The regularized lower incomplete gamma function ``P(a, x)`` (operands of one
    float dtype; Python scalars take the default float type, as in JAX: use
    ``ferrax.scipy.special.gammainc`` to promote); NaN for ``a < 0``, ``x < 0`` or
    ``a = x = 0``."""
    return bind1(igamma_p, scalar(a), scalar(x))


def igammac(a: Any, x: Any) -> Array:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    return bind1(igammac_p, scalar(a), scalar(x))


def igamma_grad_a(a: Any, x: Any) -> Array:
    """``dP(a, x)/da``, the derivative of :func:`igamma` in its first operand (it has no
    derivative of its own, as in JAX)."""
    return bind1(igamma_grad_a_p, scalar(a), scalar(x))


# ---------------------------------------------------------------------- random_gamma_grad
# As JAX 0.10.2 traces it (jax/_src/lax/special.py): operands broadcast to one shape and
# float16/bfloat16 computed in float32; a continued fraction where x > 1 and x > a, the
# series elsewhere, each a while loop over the whole array that freezes an element once
# its derivative has converged.


def _any(p: Any) -> Any:
    from ferrax._lax.reductions import reduce_or

    return reduce_or(p, tuple(range(np.ndim(p) if isinstance(p, np.ndarray) else len(p.shape))))


def _k(value: float, like: Any) -> Any:
    """``value`` as a weakly typed scalar of ``like``'s dtype (JAX's ``_const``)."""
    from ferrax._lax._operands import scalar_as

    return scalar_as(value, like)


def _strong(value: float, like: Any) -> Any:
    """``value`` as a rank-0 array of ``like``'s dtype (JAX's ``_const`` of a NumPy
    dtype: not weakly typed)."""
    from ferrax._core import ConcreteArray, aval_of

    return ConcreteArray(np.asarray(value, aval_of(like).dtype), False)


def _sample_series(x: Any, a: Any, enabled: Any, eps: float) -> Any:
    from ferrax._core import aval_of
    from ferrax._lax.control import while_loop
    from ferrax._lax.elementwise import convert_element_type
    from ferrax._lax.special import digamma

    def body(vals: Any) -> Any:
        on, r, c, ans, x, dc_da, dans_da = vals
        r = add(r, _k(1.0, r))
        dc_da = sub(mul(dc_da, div(x, r)), div(mul(c, x), mul(r, r)))
        dans_da = add(dans_da, dc_da)
        c = mul(c, div(x, r))
        ans = add(ans, c)
        # JAX compares with a NumPy float32 through `>`, which makes a weak operand strong.
        change = _abs(div(dc_da, dans_da))
        if aval_of(change).weak_type:
            change = convert_element_type(change, aval_of(change).dtype)
        more = bitwise_and(on, gt(change, _strong(eps, change)))
        return (
            more,
            select_n(on, vals[1], r),
            select_n(on, vals[2], c),
            select_n(on, vals[3], ans),
            select_n(on, vals[4], x),
            select_n(on, vals[5], dc_da),
            select_n(on, vals[6], dans_da),
        )

    init = (enabled, a, _fill(a, 1), _fill(a, 1), x, _fill(a, 0), _fill(a, 0))
    vals = while_loop(lambda v: _any(v[0]), body, init)
    ans, dans_da = vals[3], vals[6]
    dlogax_da = sub(log(x), digamma(add(a, _k(1.0, a))))
    return div(mul(neg(add(dans_da, mul(ans, dlogax_da))), x), a)


def _dtype(x: Any) -> Any:
    from ferrax._core import aval_of

    return aval_of(x).dtype


def _fill(like: Any, value: float) -> Any:
    """``value`` in an array of ``like``'s shape and dtype (JAX's ``full_like``: a literal
    when rank 0, else a ``broadcast_in_dim`` of one)."""
    from ferrax._core import ConcreteArray, aval_of
    from ferrax._lax.structural import broadcast_in_dim

    aval = aval_of(like)
    fill = ConcreteArray(np.full((), value, aval.dtype), aval.weak_type)
    return fill if aval.shape == () else broadcast_in_dim(fill, aval.shape, ())


def _abs(x: Any) -> Any:
    from ferrax._lax.elementwise import abs as abs_

    return abs_(x)


def _sample_fraction(x: Any, a: Any, enabled: Any, eps: float) -> Any:
    from ferrax._lax.control import while_loop
    from ferrax._lax.convenience import reciprocal
    from ferrax._lax.special import digamma

    def cond(vals: Any) -> Any:
        return bitwise_and(lt(vals[5], _strong(2000.0, vals[5])), _any(vals[0]))

    def body(vals: Any) -> Any:
        (on, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
        c = add(c, _strong(1.0, c))
        y = add(y, _strong(1.0, y))
        z = add(z, _strong(2.0, z))
        yc = mul(y, c)
        pk = sub(mul(pkm1, z), mul(pkm2, yc))
        qk = sub(mul(qkm1, z), mul(qkm2, yc))
        qk_nonzero = ne(qk, _strong(0.0, qk))
        r = div(pk, qk)
        rel = _abs(div(sub(ans, r), r))
        t = select_n(qk_nonzero, _fill(r, 1), rel)
        ans = select_n(qk_nonzero, ans, r)
        dpk_da = add(sub(sub(mul(dpkm1_da, z), pkm1), mul(dpkm2_da, yc)), mul(pkm2, c))
        dqk_da = add(sub(sub(mul(dqkm1_da, z), qkm1), mul(dqkm2_da, yc)), mul(qkm2, c))
        dans_da_new = select_n(qk_nonzero, dans_da, div(sub(dpk_da, mul(ans, dqk_da)), qk))
        change = _abs(sub(dans_da_new, dans_da))
        grad_change = select_n(qk_nonzero, _fill(dans_da, 1), change)
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = dpkm1_da, dqkm1_da, dpk_da, dqk_da
        rescale = gt(_abs(pk), reciprocal(_strong(eps, pk)))

        def scaled(v: Any) -> Any:
            return select_n(rescale, v, mul(v, _strong(eps, v)))

        pkm2, pkm1, qkm2, qkm1 = scaled(pkm2), scaled(pkm1), scaled(qkm2), scaled(qkm1)
        dpkm2_da, dqkm2_da = scaled(dpkm2_da), scaled(dqkm2_da)
        dpkm1_da, dqkm1_da = scaled(dpkm1_da), scaled(dqkm1_da)
        more = bitwise_and(on, gt(grad_change, _strong(eps, grad_change)))
        return (
            more,
            select_n(on, vals[1], ans),
            select_n(on, vals[2], t),
            select_n(on, vals[3], y),
            select_n(on, vals[4], z),
            c,
            select_n(on, vals[6], pkm1),
            select_n(on, vals[7], qkm1),
            select_n(on, vals[8], pkm2),
            select_n(on, vals[9], qkm2),
            select_n(on, vals[10], dpkm2_da),
            select_n(on, vals[11], dqkm2_da),
            select_n(on, vals[12], dpkm1_da),
            select_n(on, vals[13], dqkm1_da),
            select_n(on, vals[14], dans_da_new),
        )

    y = sub(_strong(1.0, a), a)
    z = add(add(x, y), _strong(1.0, x))
    c = _strong(0.0, x)
    pkm2 = _fill(x, 1)
    qkm2 = x
    pkm1 = add(x, _strong(1.0, x))
    qkm1 = mul(z, x)
    ans = div(pkm1, qkm1)
    t = _fill(x, 1)
    dpkm2_da = _fill(x, 0)
    dqkm2_da = _fill(x, 0)
    dpkm1_da = _fill(x, 0)
    dqkm1_da = neg(x)
    dans_da = div(sub(dpkm1_da, mul(ans, dqkm1_da)), qkm1)
    init = (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da)
    vals = while_loop(cond, body, init)
    ans, dans_da = vals[1], vals[14]
    dlogax_da = sub(log(x), digamma(a))
    return neg(mul(add(dans_da, mul(ans, dlogax_da)), x))


def random_gamma_grad(a: Any, x: Any) -> Array:
    """The derivative in ``a`` of a sample ``x`` of ``Gamma(a, 1)`` (``-dP(a, x)/da``
    over the density at ``x``), as JAX computes it to differentiate ``random.gamma``:
    traced into a series and a continued fraction, no primitive of its own."""
    from ferrax._core import aval_of
    from ferrax._lax.convenience import broadcast_shapes
    from ferrax._lax.elementwise import convert_element_type
    from ferrax._lax.special import lgamma
    from ferrax._lax.structural import broadcast_in_dim

    a, x = scalar(a), scalar(x)
    shape = broadcast_shapes(aval_of(a).shape, aval_of(x).shape)
    a = broadcast_in_dim(a, shape, list(range(len(aval_of(a).shape))))
    x = broadcast_in_dim(x, shape, list(range(len(aval_of(x).shape))))
    a_dtype = aval_of(a).dtype
    upcast = a_dtype in (np.dtype(np.float16), np.dtype("bfloat16"))
    if upcast:
        a = convert_element_type(a, np.float32)
        x = convert_element_type(x, np.float32)
    dtype = aval_of(a).dtype
    is_nan = bitwise_or(ne(a, a), ne(x, x))
    x_is_zero = eq(x, _fill(x, 0))
    domain_error = bitwise_or(lt(x, _fill(x, 0)), le(a, _fill(a, 0)))
    use_igammac = bitwise_and(gt(x, _fill(x, 1)), gt(x, a))
    ax = sub(sub(mul(a, log(x)), x), lgamma(a))  # (log rejects non-float operands, as JAX's)
    finfo = np.finfo(dtype)
    underflow = lt(ax, neg(log(_strong(float(finfo.max), a))))
    exp(ax)  # JAX computes the factor and leaves it unused here (its jaxpr has the eqn)
    enabled = bitwise_not(bitwise_or(bitwise_or(bitwise_or(x_is_zero, domain_error), underflow), is_nan))
    eps = float(finfo.eps)
    from_fraction = neg(_sample_fraction(x, a, bitwise_and(enabled, use_igammac), eps))
    from_series = _sample_series(x, a, bitwise_and(enabled, bitwise_not(use_igammac)), eps)
    out = select_n(use_igammac, from_series, from_fraction)
    out = select_n(x_is_zero, out, _fill(out, 0))
    out = select_n(bitwise_or(domain_error, is_nan), out, _fill(a, float("nan")))
    if upcast:
        out = convert_element_type(out, a_dtype)
    return out


# ---------------------------------------------------------------------------- derivatives
# JAX's formulas (jax/_src/lax/special.py): d/da through igamma_grad_a, d/dx the density.


def _density(a: Any, x: Any) -> Any:
    """``exp(-x + (a - 1) log x - lgamma a)``, the gamma density at ``x``."""
    from ferrax._lax.special import lgamma

    return exp(sub(add(neg(x), mul(sub(a, _one(a)), log(x))), lgamma(a)))


def _one(like: Any) -> Any:
    from ferrax._lax._operands import scalar_as

    return scalar_as(1.0, like)


ad.defjvp(
    igamma_p,
    lambda g, ans, a, x: _out_shaped(mul(g, igamma_grad_a(a, x)), ans),
    lambda g, ans, a, x: _out_shaped(mul(g, _density(a, x)), ans),
)
ad.defjvp(
    igammac_p,
    lambda g, ans, a, x: _out_shaped(neg(mul(g, igamma_grad_a(a, x))), ans),
    lambda g, ans, a, x: _out_shaped(neg(mul(g, _density(a, x))), ans),
)



def _igamma_grad_a_jvp(primals: Any, tangents: Any) -> Any:
    # JAX 0.10 defines no derivative for igamma_grad_a: differentiating it is an error
    # there too (operands without a tangent never get here).
    raise DifferentiationError(f"Differentiation rule for 'igamma_grad_a' not implemented, at {user_location()}")


igamma_grad_a_p.def_jvp(_igamma_grad_a_jvp)

# ---------------------------------------------------------------------------- batching


def _install_batching() -> None:
    for p in (igamma_p, igammac_p, igamma_grad_a_p):
        _elementwise_batch(p, True)


_install_batching()
