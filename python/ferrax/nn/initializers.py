"""``ferrax.nn.initializers``: the weight initializers of ``jax.nn.initializers``.

An initializer is called as ``init(key, shape, dtype=None)`` and returns an array of
``shape`` (of ``dtype``, the default float dtype if ``None``) drawn with
:mod:`ferrax.random`, so for the same key it gives JAX's values. The variance-scaling
family (``glorot``/``xavier``, ``he``/``kaiming``, ``lecun``) computes the fans from
the shape as JAX does: the receptive field is the product of the axes that are neither
``in_axis``, ``out_axis`` nor ``batch_axis``.

``orthogonal`` and ``delta_orthogonal`` are missing: they need a QR decomposition,
which ferrax's linalg does not have yet.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from ferrax import dtypes
from ferrax import numpy as fnp
from ferrax._array import Array
from ferrax._core import user_location
from ferrax.numpy._promotion import ArrayLike, DTypeLike, Shape

__all__ = [
    "Initializer", "constant", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
    "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones",
    "orthogonal", "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform",
    "zeros",
]

Axes = int | Sequence[int]


@runtime_checkable
class Initializer(Protocol):
    """What the functions of this module build: ``init(key, shape, dtype=None)``."""

    def __call__(self, key: Any, shape: Shape, dtype: DTypeLike | None = None, out_sharding: Any = None) -> Array:
        """An array of ``shape`` and ``dtype`` (the default float dtype if ``None``)."""
        ...


def _random() -> ModuleType:
    """:mod:`ferrax.random`, imported when an initializer first draws."""
    try:
        return importlib.import_module("ferrax.random")
    except ImportError:
        raise NotImplementedError(
            f"this initializer draws random numbers, and this build of ferrax has no "
            f"ferrax.random, at {user_location()}"
        ) from None


def _dtype(dtype: DTypeLike | None) -> np.dtype[Any]:
    return dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype, "initializer")


def _no_sharding(out_sharding: Any) -> None:
    if out_sharding is not None:
        raise NotImplementedError(
            f"initializers do not take out_sharding yet (shard the result with "
            f"ferrax.lax.with_sharding_constraint or device_put), at {user_location()}"
        )


def _shape(shape: Shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def zeros(key: Any, shape: Shape, dtype: DTypeLike | None = None, out_sharding: Any = None) -> Array:
    """An initializer (and its result): zeros of ``shape`` (``key`` is unused)."""
    _no_sharding(out_sharding)
    return fnp.zeros(shape, _dtype(dtype))


def ones(key: Any, shape: Shape, dtype: DTypeLike | None = None, out_sharding: Any = None) -> Array:
    """An initializer (and its result): ones of ``shape`` (``key`` is unused)."""
    _no_sharding(out_sharding)
    return fnp.ones(shape, _dtype(dtype))


def constant(value: ArrayLike, dtype: DTypeLike | None = None) -> Initializer:
    """An initializer filling the shape with ``value``."""
    default = dtype

    def init(key: Any, shape: Shape, dtype: DTypeLike | None = default, out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding)
        return fnp.full(shape, value, dtype=_dtype(dtype))

    return init


def uniform(scale: ArrayLike = 1e-2, dtype: DTypeLike | None = None) -> Initializer:
    """An initializer drawing uniformly from ``[0, scale)``."""
    default = dtype

    def init(key: Any, shape: Shape, dtype: DTypeLike | None = default, out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding)
        d = _dtype(dtype)
        out: Array = _random().uniform(key, shape, d) * fnp.array(scale, d)
        return out

    return init


def normal(stddev: ArrayLike = 1e-2, dtype: DTypeLike | None = None) -> Initializer:
    """An initializer drawing from a normal distribution of mean 0 and ``stddev``."""
    default = dtype

    def init(key: Any, shape: Shape, dtype: DTypeLike | None = default, out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding)
        d = _dtype(dtype)
        out: Array = _random().normal(key, shape, d) * fnp.array(stddev, d)
        return out

    return init


def truncated_normal(
    stddev: ArrayLike = 1e-2, dtype: DTypeLike | None = None, lower: ArrayLike = -2.0, upper: ArrayLike = 2.0
) -> Initializer:
    """An initializer drawing from a standard normal truncated to ``[lower, upper]``,
    times ``stddev`` (so the standard deviation is somewhat below ``stddev``)."""
    default = dtype

    def init(key: Any, shape: Shape, dtype: DTypeLike | None = default, out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding)
        d = _dtype(dtype)
        out: Array = _random().truncated_normal(key, lower, upper, shape, d) * fnp.array(stddev, d)
        return out

    return init


def _size(shape: tuple[int, ...], axes: Axes) -> int:
    if isinstance(axes, (int, np.integer)):
        return shape[axes]
    return math.prod(shape[i] for i in axes)


def compute_fans(
    shape: Sequence[int], in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = ()
) -> tuple[float, float]:
    """``(fan_in, fan_out)`` of a weights array of ``shape``: the sizes of ``in_axis``
    and ``out_axis`` times the receptive field (the other axes but ``batch_axis``)."""
    dims = tuple(shape)
    if isinstance(in_axis, int) and in_axis == -2 and len(dims) <= 1:
        raise ValueError(
            f"Can't compute input and output sizes of a {len(dims)}-dimensional weights tensor "
            f"with default in_axis. Must be at least 2D or specify in_axis explicitly, at {user_location()}"
        )
    try:
        in_size, out_size, batch_size = (_size(dims, a) for a in (in_axis, out_axis, batch_axis))
    except IndexError:
        raise IndexError(
            f"the axes in_axis={in_axis}, out_axis={out_axis}, batch_axis={batch_axis} do not all "
            f"exist in a weights shape {list(dims)}, at {user_location()}"
        ) from None
    receptive_field = math.prod(dims) / in_size / out_size / batch_size
    return in_size * receptive_field, out_size * receptive_field


def variance_scaling(
    scale: float,
    mode: Literal["fan_in", "fan_out", "fan_avg", "fan_geo_avg"],
    distribution: Literal["truncated_normal", "normal", "uniform"],
    in_axis: Axes = -2,
    out_axis: Axes = -1,
    batch_axis: Axes = (),
    dtype: DTypeLike | None = None,
) -> Initializer:
    """An initializer whose draws have variance ``scale / n``, ``n`` the fan in, fan
    out, their mean or their geometric mean (``mode``), from a normal, a normal
    truncated at two standard deviations (rescaled to keep the variance), or a uniform
    distribution on ``[-sqrt(3 variance), sqrt(3 variance))``."""
    default = dtype

    def init(key: Any, shape: Shape, dtype: DTypeLike | None = default, out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding)
        dims = _shape(shape)
        d = _dtype(dtype)
        fan_in, fan_out = compute_fans(dims, in_axis, out_axis, batch_axis)
        if mode == "fan_in":
            denominator = fan_in
        elif mode == "fan_out":
            denominator = fan_out
        elif mode == "fan_avg":
            denominator = (fan_in + fan_out) / 2
        elif mode == "fan_geo_avg":
            denominator = (fan_in * fan_out) ** 0.5
        else:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}, at {user_location()}")
        variance = fnp.array(scale / denominator, dtype=d)
        random = _random()
        out: Array
        if distribution == "truncated_normal":
            # The standard deviation of a standard normal truncated to [-2, 2].
            stddev = fnp.sqrt(variance) / fnp.array(0.87962566103423978, d)
            out = random.truncated_normal(key, -2, 2, dims, d) * stddev
        elif distribution == "normal":
            out = random.normal(key, dims, d) * fnp.sqrt(variance)
        elif distribution == "uniform":
            out = random.uniform(key, dims, d, -1) * fnp.sqrt(3 * variance)
        else:
            raise ValueError(
                f"invalid distribution for variance scaling initializer: {distribution}, at {user_location()}"
            )
        return out

    return init


def orthogonal(scale: ArrayLike = 1.0, column_axis: int = -1, dtype: DTypeLike | None = None) -> Initializer:
    """An initializer of (semi-)orthogonal matrices times ``scale``: the ``column_axis``
    of the shape holds the columns, the other axes flattened into the rows; orthonormal
    rows or columns, whichever are fewer (``random.orthogonal``'s draw)."""
    default = dtype

    def init(key: Any, shape: Shape, dtype: DTypeLike | None = default, out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding)
        dims = _shape(shape)
        d = _dtype(dtype)
        if len(dims) < 2:
            raise ValueError(f"orthogonal initializer requires at least a 2D shape, at {user_location()}")
        if any(n == 0 for n in dims):
            return fnp.zeros(dims, d)
        cols = dims[column_axis]
        rows = math.prod(dims) // cols
        q = _random().orthogonal(key, rows, (), d, cols)
        q = fnp.reshape(q, (*np.delete(np.array(dims), column_axis).tolist(), cols))
        q = fnp.moveaxis(q, -1, column_axis)
        out: Array = fnp.array(scale, d) * q
        return out

    return init


def glorot_uniform(
    in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: DTypeLike | None = None
) -> Initializer:
    """Glorot (Xavier) uniform: ``variance_scaling(1.0, "fan_avg", "uniform")``."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(
    in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: DTypeLike | None = None
) -> Initializer:
    """Glorot (Xavier) normal: ``variance_scaling(1.0, "fan_avg", "truncated_normal")``."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def lecun_uniform(
    in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: DTypeLike | None = None
) -> Initializer:
    """LeCun uniform: ``variance_scaling(1.0, "fan_in", "uniform")``."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(
    in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: DTypeLike | None = None
) -> Initializer:
    """LeCun normal: ``variance_scaling(1.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def he_uniform(
    in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: DTypeLike | None = None
) -> Initializer:
    """He (Kaiming) uniform: ``variance_scaling(2.0, "fan_in", "uniform")``."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(
    in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: DTypeLike | None = None
) -> Initializer:
    """He (Kaiming) normal: ``variance_scaling(2.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal
