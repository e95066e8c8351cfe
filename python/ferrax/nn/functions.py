"""Activations, the softmax family, ``logsumexp``, ``one_hot`` and ``standardize``, as
``jax.nn`` computes them.

Each function is written with the ``ferrax.numpy`` and ``ferrax.lax`` operations JAX's
own uses, so its dtypes and weak types are JAX's (``relu(2.0)`` is a weak float32,
``relu6`` of an int32 array a weak float32, ``gelu`` always strong) and its values and
derivatives agree. JAX's custom derivatives are kept: ``relu``'s and ``relu6``'s
derivative is 0 at the kinks, ``softplus`` differentiates through a stable
``logaddexp`` rule, and the softmax family subtracts a maximum that gradients do not see
(JAX's default softmax, without ``jax_softmax_custom_jvp``).
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any, Literal, overload

import numpy as np

from ferrax._jit import staged
from ferrax import dtypes, lax
from ferrax._lax.structural import expand_dims_as_jax
from ferrax import numpy as fnp
from ferrax._array import Array
from ferrax._core import Tracer, user_location
from ferrax._custom_derivatives import custom_jvp
from ferrax.errors import ConcretizationError
from ferrax.numpy._promotion import (
    ArrayLike,
    Axis,
    DTypeLike,
    as_array,
    convert,
    operand_aval,
    promote_args_inexact,
)
from ferrax.numpy._shape import normalize_axes, normalize_axis

__all__ = [
    "celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "identity", "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp",
    "logsumexp", "mish", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign",
    "softmax", "softplus", "sparse_plus", "sparse_sigmoid", "squareplus", "standardize",
    "swish", "tanh",
]

tanh = fnp.tanh
"""The hyperbolic tangent (``ferrax.numpy.tanh``, as ``jax.nn.tanh``)."""


# ------------------------------------------------------------------------------ helpers


def _checked(name: str, x: Any) -> Array:
    """``x`` as an array; lists and other non-arrays are a ``TypeError`` naming ``name``
    (JAX's ``ensure_arraylike``)."""
    return as_array(x, name)


def _check_arraylike_or_none(name: str, *xs: Any) -> None:
    for i, x in enumerate(xs):
        if x is not None:
            operand_aval(name, x, i + 1)


def _square(x: ArrayLike) -> Array:
    """``x * x``; bools squared as int32, as ``jax.numpy.square`` does."""
    xa = as_array(x, "square")
    if xa.dtype == np.bool_:
        xa = convert(xa, np.dtype(np.int32))
    return fnp.square(xa)


def _zeros_like(x: Array) -> Array:
    return fnp.zeros_like(x)


def _replace_posinf(x: Array) -> Array:
    """``x`` with ``+inf`` replaced by 0 (the terms of ``logaddexp``'s derivative)."""
    return lax.select_n(lax.eq(x, float("inf")), x, _zeros_like(x))


def _logaddexp_impl(x1: Array, x2: Array) -> Array:
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    # NaN delta: a NaN operand, or infinities of one sign (their sum is the answer).
    nan = lax.ne(delta, delta)
    both = lax.add(x1, x2)
    return lax.select_n(nan, lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta))))), both)


# Named as JAX's custom_jvp function is (the name shows in jaxprs).
_logaddexp_impl.__name__ = _logaddexp_impl.__qualname__ = "logaddexp"
_logaddexp = custom_jvp(_logaddexp_impl)


@_logaddexp.defjvp
def _logaddexp_jvp(primals: tuple[Array, Array], tangents: tuple[Array, Array]) -> tuple[Array, Array]:
    x1, x2 = primals
    t1, t2 = tangents
    out = _logaddexp(x1, x2)
    w1 = lax.exp(lax.sub(_replace_posinf(x1), _replace_posinf(out)))
    w2 = lax.exp(lax.sub(_replace_posinf(x2), _replace_posinf(out)))
    return out, lax.add(lax.mul(t1, w1), lax.mul(t2, w2))


def logaddexp(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``log(exp(x1) + exp(x2))`` without overflow, with JAX's derivative rule (finite
    where an operand is ``-inf``)."""
    a, b = promote_args_inexact("logaddexp", x1, x2)
    return _logaddexp(a, b)


# ---------------------------------------------------------------------------- activations


def identity(x: ArrayLike) -> Array:
    """``x`` unchanged (as an array)."""
    return _checked("identity", x)


def _relu_max(x: ArrayLike) -> Array:
    return fnp.maximum(x, 0)


# As JAX's: a custom_jvp function `relu` around a jit `relu`.
_relu_max.__name__ = _relu_max.__qualname__ = "relu"
_relu = custom_jvp(staged()(_relu_max))


_relu.defjvps(lambda g, ans, x: lax.select_n(lax.gt(x, convert(0, x.dtype)), _zeros_like(g), g))


def relu(x: ArrayLike) -> Array:
    """``max(x, 0)``; its derivative at 0 is 0 (JAX's custom rule)."""
    operand_aval("maximum", x)
    return _relu(x)


@custom_jvp
def _relu6(x: ArrayLike) -> Array:
    return fnp.minimum(fnp.maximum(x, 0), 6.0)


_relu6.defjvps(
    lambda g, ans, x: lax.select_n(fnp.logical_and(x > 0, x < 6), _zeros_like(g), g)
)


def relu6(x: ArrayLike) -> Array:
    """``min(max(x, 0), 6)``; its derivative is 0 at 0 and at 6 (JAX's custom rule)."""
    operand_aval("maximum", x)
    return _relu6(x)


def squareplus(x: ArrayLike, b: ArrayLike = 4) -> Array:
    """``(x + sqrt(x**2 + b)) / 2``, a smooth ``relu``."""
    xa = _checked("squareplus", x)
    operand_aval("squareplus", b, 1)
    return (xa + fnp.sqrt(_square(xa) + b)) / 2


@staged()
def softplus(x: ArrayLike) -> Array:
    """``log(1 + exp(x))``, computed as ``logaddexp(x, 0)``."""
    return logaddexp(x, 0)


def sparse_plus(x: ArrayLike) -> Array:
    """0 below -1, ``x`` above 1, ``(x + 1)**2 / 4`` between (a sparse ``softplus``)."""
    xa = _checked("sparse_plus", x)
    return fnp.where(xa <= -1.0, 0.0, fnp.where(xa >= 1.0, xa, (xa + 1.0) ** 2 / 4))


def soft_sign(x: ArrayLike) -> Array:
    """``x / (|x| + 1)``."""
    xa = _checked("soft_sign", x)
    return xa / (fnp.abs(xa) + 1)


def sigmoid(x: ArrayLike) -> Array:
    """The logistic function ``1 / (1 + exp(-x))`` (``lax.logistic``: floats only)."""
    return lax.logistic(x)


def sparse_sigmoid(x: ArrayLike) -> Array:
    """``clip(x + 1, 0, 2) / 2``: the derivative of :func:`sparse_plus`."""
    return 0.5 * fnp.clip(fnp.add(x, 1.0), 0.0, 2.0)


@staged()
def silu(x: ArrayLike) -> Array:
    """``x * sigmoid(x)`` (also named :func:`swish`)."""
    xa = _checked("silu", x)
    return xa * sigmoid(xa)


swish = silu


def mish(x: ArrayLike) -> Array:
    """``x * tanh(softplus(x))``."""
    xa = _checked("mish", x)
    return xa * fnp.tanh(softplus(xa))


@staged()
def log_sigmoid(x: ArrayLike) -> Array:
    """``log(sigmoid(x)) = -softplus(-x)``."""
    xa = _checked("log_sigmoid", x)
    return -softplus(-xa)


@staged()
def elu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""
    xa = _checked("elu", x)
    # `xa > 0` twice, in JAX's order (the outer where's first).
    return fnp.where(xa > 0, xa, fnp.multiply(alpha, fnp.expm1(fnp.where(xa > 0, 0.0, xa))))


@staged()
def leaky_relu(x: ArrayLike, negative_slope: ArrayLike = 1e-2) -> Array:
    """``x`` where ``x >= 0``, ``negative_slope * x`` elsewhere."""
    xa = _checked("leaky_relu", x)
    return fnp.where(xa >= 0, xa, fnp.multiply(negative_slope, xa))


def hard_tanh(x: ArrayLike) -> Array:
    """``x`` clipped to ``[-1, 1]``."""
    xa = _checked("hard_tanh", x)
    return fnp.where(xa > 1, 1, fnp.where(xa < -1, -1, xa))


def celu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """``max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1)``: a continuously
    differentiable :func:`elu`."""
    return fnp.maximum(x, 0.0) + fnp.multiply(alpha, fnp.expm1(fnp.minimum(x, 0.0) / alpha))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x: ArrayLike) -> Array:
    """``scale * elu(x, alpha)`` with the self-normalizing constants
    (``alpha = 1.6732632...``, ``scale = 1.0507009...``)."""
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def hard_sigmoid(x: ArrayLike) -> Array:
    """``relu6(x + 3) / 6``."""
    return relu6(fnp.add(x, 3.0)) / 6.0


def hard_silu(x: ArrayLike) -> Array:
    """``x * hard_sigmoid(x)`` (also named :func:`hard_swish`)."""
    xa = _checked("hard_silu", x)
    return xa * hard_sigmoid(xa)


hard_swish = hard_silu


def gelu(x: ArrayLike, approximate: bool = True) -> Array:
    """The Gaussian error linear unit ``x * Phi(x)``.

    With ``approximate`` (the default), ``Phi`` is the tanh approximation
    ``(1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3))) / 2``; otherwise it is
    ``erfc(-x / sqrt(2)) / 2``. The result is strongly typed, of ``x``'s float dtype.
    """
    xa: Array = promote_args_inexact("gelu", x)[0]
    if approximate:
        c = np.sqrt(2 / np.pi).astype(xa.dtype)
        cdf = 0.5 * (1.0 + fnp.tanh(c * (xa + 0.044715 * (xa**3))))
        return xa * cdf
    sqrt_half = np.sqrt(0.5).astype(xa.dtype)
    out = 0.5 * xa * lax.erfc(-xa * sqrt_half)
    # `array` copies, as JAX's gelu does.
    return fnp.array(out, dtype=xa.dtype)


def glu(x: ArrayLike, axis: int = -1) -> Array:
    """The gated linear unit: ``x`` is split in two halves along ``axis``, ``a`` and
    ``b``, and the result is ``a * sigmoid(b)``. The axis must have an even size."""
    xa = _checked("glu", x)
    dim = normalize_axis(axis, xa.ndim, "glu")
    size = xa.shape[dim]
    if size % 2:
        raise ValueError(f"glu: axis size must be divisible by 2, got {size}, at {user_location()}")
    half = size // 2
    starts = [0] * xa.ndim
    limits = list(xa.shape)
    limits[dim] = half
    x1 = lax.slice(xa, starts, limits)
    starts[dim], limits[dim] = half, size
    x2 = lax.slice(xa, starts, limits)
    return x1 * sigmoid(x2)


# ------------------------------------------------------------------ softmax and logsumexp


@overload
def logsumexp(
    a: ArrayLike,
    axis: Axis = None,
    b: ArrayLike | None = None,
    keepdims: bool = False,
    return_sign: Literal[False] = False,
    where: ArrayLike | None = None,
) -> Array: ...


@overload
def logsumexp(
    a: ArrayLike,
    axis: Axis = None,
    b: ArrayLike | None = None,
    keepdims: bool = False,
    *,
    return_sign: Literal[True],
    where: ArrayLike | None = None,
) -> tuple[Array, Array]: ...


@overload
def logsumexp(
    a: ArrayLike,
    axis: Axis = None,
    b: ArrayLike | None = None,
    keepdims: bool = False,
    return_sign: bool = False,
    where: ArrayLike | None = None,
) -> Array | tuple[Array, Array]: ...


def logsumexp(
    a: ArrayLike,
    axis: Axis = None,
    b: ArrayLike | None = None,
    keepdims: bool = False,
    return_sign: bool = False,
    where: ArrayLike | None = None,
) -> Array | tuple[Array, Array]:
    """``log(sum(b * exp(a)))`` over ``axis`` (all axes by default), without overflow.

    The maximum subtracted for stability is invisible to gradients (and replaced by 0
    where it is infinite, so ``logsumexp`` of only ``-inf`` is ``-inf``). With ``b``,
    a negative sum gives NaN, or with ``return_sign`` the pair ``(log|sum|, sign)``.
    ``where`` masks elements out. Integers and bools are computed as floats.
    """
    if where is not None:
        a = fnp.where(where, a, 0)
    if b is not None:
        a_arr, b_arr = promote_args_inexact("logsumexp", a, b)
        a_arr = fnp.where(fnp.not_equal(b_arr, 0), a_arr, -np.inf)
    else:
        (a_arr,) = promote_args_inexact("logsumexp", a)
        b_arr = a_arr
    dims = normalize_axes(axis, a_arr.ndim, "logsumexp")
    amax = fnp.max(a_arr, axis=dims, keepdims=keepdims, where=where, initial=-np.inf)
    amax = lax.stop_gradient(lax.select_n(lax.is_finite(amax), _zeros_like(amax), amax))
    amax_with_dims = amax if keepdims else expand_dims_as_jax(amax, sorted(dims))
    exp_a = lax.exp(lax.sub(a_arr, convert(amax_with_dims, a_arr.dtype)))
    if b is not None:
        exp_a = lax.mul(exp_a, b_arr)
    sumexp = fnp.sum(exp_a, axis=dims, keepdims=keepdims, where=where)
    sign = lax.sign(sumexp)
    sumexp = lax.abs(sumexp)
    out = lax.add(lax.log(sumexp), convert(amax, sumexp.dtype))
    if return_sign:
        return out, sign
    if b is not None:
        out = fnp.where(lax.lt(sign, convert(0, sign.dtype)), convert(np.nan, out.dtype), out)
    return out


def logmeanexp(
    x: ArrayLike, axis: Axis = None, where: ArrayLike | None = None, keepdims: bool = False
) -> Array:
    """``logsumexp(x) - log(n)``, ``n`` the number of elements reduced (those where
    ``where`` is true)."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    xa = _checked("logmeanexp", x)
    if where is None:
        dims = normalize_axes(axis, xa.ndim, "logmeanexp")
        count = 1
        for d in dims:
            count *= xa.shape[d]
        n: Array = fnp.full(lse.shape, count, dtype=lse.dtype)
    else:
        mask = fnp.broadcast_to(fnp.not_equal(where, False), xa.shape)
        n = fnp.sum(mask, axis=axis, keepdims=keepdims, dtype=lse.dtype)
    return lse - fnp.log(n)


@staged(static_argnames=("axis",))
def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """``x - logsumexp(x)`` along ``axis`` (an int, several, or ``None`` for all), the
    elements where ``where`` is false left out (and given ``-inf``)."""
    xa = _checked("log_softmax", x)
    x_max = fnp.max(xa, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = xa if where is None else fnp.where(where, xa, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_logsumexp = fnp.log(fnp.sum(fnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_logsumexp
    if where is not None:
        return fnp.where(where, result, -np.inf)
    return result


def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """``exp(x) / sum(exp(x))`` along ``axis`` (an int, several, or ``None`` for all),
    computed after subtracting the maximum (which gradients do not see); elements where
    ``where`` is false are left out and given 0. A ``+inf`` input makes the result NaN."""
    xa = _checked("softmax", x)
    x_max = fnp.max(xa, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = xa if where is None else fnp.where(where, xa, -np.inf)
    unnormalized = fnp.exp(x_safe - lax.stop_gradient(x_max))
    result = unnormalized / fnp.sum(unnormalized, axis, where=where, keepdims=True)
    if where is not None:
        result = fnp.where(where, result, 0)
    return result


def standardize(
    x: ArrayLike,
    axis: Axis = -1,
    mean: ArrayLike | None = None,
    variance: ArrayLike | None = None,
    epsilon: ArrayLike = 1e-5,
    where: ArrayLike | None = None,
    *,
    algorithm: str = "fast",
) -> Array:
    """``(x - mean) / sqrt(variance + epsilon)``, the mean and variance over ``axis``
    (of the elements where ``where`` is true) unless given.

    ``algorithm="fast"`` (the default) takes the variance as ``mean(x**2) - mean(x)**2``
    clipped at 0; ``"stable"`` as ``mean((x - mean(x))**2)``.
    """
    xa = _checked("standardize", x)
    _check_arraylike_or_none("standardize", mean, variance, where)
    if mean is None:
        mean = fnp.mean(xa, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = fnp.mean(_square(fnp.subtract(xa, mean)), axis, keepdims=True, where=where)
        elif algorithm == "fast":
            variance = fnp.mean(_square(xa), axis, keepdims=True, where=where) - _square(mean)
            # mean(x**2) - mean(x)**2 can round below 0.
            variance = fnp.clip(variance, 0)
        else:
            raise ValueError(
                f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable', at {user_location()}"
            )
    return fnp.subtract(xa, mean) * lax.rsqrt(fnp.add(variance, epsilon))


def one_hot(
    x: Any, num_classes: int, *, dtype: DTypeLike | None = None, axis: int | str = -1
) -> Array:
    """``x``'s indices as one-hot vectors of length ``num_classes`` along a new axis
    ``axis`` (the last by default): 1 at the index, 0 elsewhere; indices outside
    ``[0, num_classes)`` give all zeros. ``dtype`` defaults to the default float.

    ``axis`` may also name a ``vmap``/``shard_map`` axis, whose size must be
    ``num_classes``: each member compares ``x`` with its own index.
    """
    given: object = num_classes
    if isinstance(given, Tracer):
        raise ConcretizationError(
            f"one_hot: num_classes must be a concrete integer, but it is traced "
            f"({given.aval.str_short()}), at {user_location()}. The error arose in the "
            "argument `num_classes`: pass it as a Python int (static_argnums)."
        )
    try:
        n = operator.index(num_classes)
    except TypeError:
        raise TypeError(
            f"one_hot: num_classes must be an integer, got {num_classes!r}, at {user_location()}"
        ) from None
    xa = fnp.asarray(x)
    if not dtypes.is_int(xa.dtype):
        warnings.warn(
            f"ferrax.nn.one_hot input should be integer-typed; got dtype={xa.dtype}",
            DeprecationWarning,
            stacklevel=2,
        )
    out_dtype = dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype, "one_hot")
    if not isinstance(axis, (int, np.integer)):
        size = lax.axis_size(axis)
        if n != size:
            raise ValueError(
                f"Expected num_classes to match the size of axis {axis}, but {n} != {size}, "
                f"at {user_location()}"
            )
        return fnp.astype(fnp.equal(xa, lax.axis_index(axis)), out_dtype)
    return _one_hot(xa, n, dtype=out_dtype, axis=axis)


@staged(static_argnames=("num_classes", "dtype", "axis"))
def _one_hot(xa: Array, num_classes: int, *, dtype: np.dtype[Any], axis: int) -> Array:
    n, out_dtype = num_classes, dtype
    out_axis = normalize_axis(axis, xa.ndim + 1, "one_hot")
    lhs = expand_dims_as_jax(xa, (out_axis,))
    rhs_shape = [1] * xa.ndim
    rhs_shape.insert(out_axis, n)
    rhs = lax.broadcasted_iota(xa.dtype, rhs_shape, out_axis)
    return fnp.astype(fnp.equal(lhs, rhs), out_dtype)


@custom_jvp
def _log1mexp(x: Array) -> Array:
    c = float(np.log(2.0))
    return fnp.where(fnp.less(x, c), fnp.log(-fnp.expm1(-x)), fnp.log1p(-fnp.exp(-x)))


_log1mexp.defjvps(lambda g, ans, x: g / fnp.expm1(x))


def log1mexp(x: ArrayLike) -> Array:
    """``log(1 - exp(-x))``, accurate for small and large ``x`` (undefined below 0)."""
    return _log1mexp(_checked("log1mexp", x))


# ---------------------------------------------------------------------------- attention


def _as_4d(t: ArrayLike) -> Array:
    """``t`` with leading size-1 axes up to rank 4."""
    x = fnp.asarray(t)
    if x.ndim < 4:
        x = fnp.reshape(x, (1,) * (4 - x.ndim) + x.shape)
    return x


def _check_attention_operand(
    t: Array | None, shape: Sequence[int], dtype: np.dtype[Any] | None, name: str
) -> None:
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}, at {user_location()}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {t.dtype}, at {user_location()}")
    if any(want != -1 and got != want for got, want in zip(t.shape, shape)):
        raise ValueError(f"{name} shape should be {list(shape)}: but got {t.shape}, at {user_location()}")


def _grouped(t: Array | None, heads: int, groups: int) -> Array | None:
    """A ``(B, N, T, S)`` bias or mask as ``(B, K, G, T, S)`` (N = K G heads), or with
    size-1 head axes if it has one head."""
    if t is None:
        return None
    b, n, rows, cols = t.shape
    if n == 1:
        return fnp.reshape(t, (b, 1, 1, rows, cols))
    if n != heads * groups:
        raise ValueError(
            f"a bias or mask has {n} heads, but the query has {heads * groups}, at {user_location()}"
        )
    return fnp.reshape(t, (b, heads, groups, rows, cols))


def dot_product_attention(
    query: ArrayLike,
    key: ArrayLike,
    value: ArrayLike,
    bias: ArrayLike | None = None,
    mask: ArrayLike | None = None,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    query_seq_lengths: ArrayLike | None = None,
    key_value_seq_lengths: ArrayLike | None = None,
    local_window_size: int | tuple[int, int] | None = None,
    implementation: Literal["xla", "cudnn"] | None = None,
    return_residual: bool = False,
) -> Array | tuple[Array, Array]:
    """Scaled dot-product attention, ``softmax(scale * Q K^T + bias) V``, over arrays of
    shape ``(B, T, N, H)`` (query) and ``(B, S, K, H)`` (key and value); the batch axis
    may be left out. ``N`` must be a multiple of ``K`` (grouped-query attention).

    ``mask`` (bool, broadcastable to ``(B, N, T, S)``), ``is_causal``, the sequence
    lengths and ``local_window_size`` (``(left, right)``, or one int for both) leave
    positions out; their logits become a large negative number. The softmax is computed
    in float32 at least (JAX's XLA implementation, the only one here: ``"cudnn"`` is a
    ``ValueError``). ``return_residual`` also returns the log-sum-exp of each query's
    logits, of shape ``(B, T, N)``, without gradient.
    """
    output_shape = fnp.asarray(query).shape
    q, k, v = _as_4d(query), _as_4d(key), _as_4d(value)
    bias_arr = None if bias is None else _as_4d(bias)
    mask_arr = None if mask is None else _as_4d(mask)
    q_len = None if query_seq_lengths is None else fnp.asarray(query_seq_lengths)
    kv_len = None if key_value_seq_lengths is None else fnp.asarray(key_value_seq_lengths)
    window = (local_window_size, local_window_size) if isinstance(local_window_size, int) else local_window_size
    b, s, heads, h = k.shape
    _check_attention_operand(v, [b, s, heads, h], k.dtype, "value")
    _check_attention_operand(q, [b, -1, -1, h], k.dtype, "query")
    _check_attention_operand(mask_arr, [-1] * 4, np.dtype(np.bool_), "mask")
    _check_attention_operand(bias_arr, [-1] * 4, None, "bias")
    _check_attention_operand(q_len, [b], np.dtype(np.int32), "query_seq_lengths")
    _check_attention_operand(kv_len, [b], np.dtype(np.int32), "key_value_seq_lengths")
    if q.shape[-2] % heads != 0:
        raise ValueError(
            f"The number of query heads must be a multiple of key/value heads, but got "
            f"{q.shape[-2]} vs {heads}, at {user_location()}"
        )
    if implementation not in (None, "xla"):
        raise ValueError(
            f"Unsupported implementation option: {implementation} (ferrax has the XLA "
            f"implementation only), at {user_location()}"
        )
    scale_val = (1.0 / np.sqrt(h)) if scale is None else scale
    t, n = q.shape[1], q.shape[2]
    groups = n // heads

    # Logits (B, K, G, T, S), in at least float32.
    logits_dtype = dtypes.result_type([(q.dtype, False), (np.dtype(np.float32), False)])[0]
    qg = fnp.reshape(q, (b, t, heads, groups, h))
    logits = lax.dot_general(qg, k, (((4,), (3,)), ((0, 2), (0, 2))), preferred_element_type=logits_dtype)
    logits = lax.transpose(logits, (0, 1, 3, 2, 4))  # (B, K, T, G, S) -> (B, K, G, T, S)
    logits = logits * fnp.array(scale_val, dtype=logits.dtype)
    grouped_bias = _grouped(bias_arr, heads, groups)
    if grouped_bias is not None:
        logits = fnp.astype(logits + grouped_bias, logits.dtype)

    keep: Array | None = _grouped(mask_arr, heads, groups)
    rows = lax.broadcasted_iota(np.int32, (t, s), 0)
    cols = lax.broadcasted_iota(np.int32, (t, s), 1)
    extra: list[Array] = []
    if is_causal:
        extra.append(fnp.less_equal(cols, rows))
    if window is not None:
        left, right = window
        extra.append(fnp.logical_and(fnp.greater_equal(rows, cols - right), fnp.less_equal(rows, cols + left)))
    for m in extra:
        keep = m if keep is None else fnp.logical_and(keep, m)
    if q_len is not None or kv_len is not None:
        padding: Any = True
        if q_len is not None:
            padding = fnp.less(rows[None], q_len[:, None, None])
        if kv_len is not None:
            padding = fnp.logical_and(padding, fnp.less(cols[None], kv_len[:, None, None]))
        padding = fnp.reshape(padding, (b, 1, 1, t, s))
        keep = padding if keep is None else fnp.logical_and(keep, padding)
    if keep is not None:
        large_negative = -0.7 * min(float(np.finfo(logits.dtype).max), float(np.finfo(np.float32).max))
        keep = fnp.broadcast_to(keep, logits.shape)
        logits = fnp.where(keep, logits, fnp.array(large_negative, dtype=logits.dtype))

    padded = fnp.astype(logits, np.float32)
    probs = fnp.astype(softmax(padded, axis=-1), k.dtype)
    encoded = lax.dot_general(probs, v, (((4,), (1,)), ((0, 1), (0, 2))))  # (B, K, G, T, H)
    encoded = fnp.reshape(lax.transpose(encoded, (0, 3, 1, 2, 4)), (b, t, n, h))
    if q_len is not None:
        valid = fnp.less(lax.broadcasted_iota(np.int32, (1, t), 1), q_len[:, None])
        encoded = encoded * fnp.astype(valid[:, :, None, None], encoded.dtype)
    out = fnp.reshape(encoded, output_shape)
    if not return_residual:
        return out
    lse = fnp.astype(logsumexp(padded, axis=-1), k.dtype)  # (B, K, G, T)
    lse = fnp.reshape(lax.transpose(lse, (0, 3, 1, 2)), (b, t, n))
    return out, fnp.reshape(lax.stop_gradient(lse), output_shape[:-1])
