"""Neural-network layers as ``(init_fun, apply_fun)`` pairs, JAX's
``jax.example_libraries.stax`` API over ferrax.

A layer is a pair of functions:

* ``init_fun(rng, input_shape) -> (output_shape, params)`` draws the layer's parameters
  (a pytree) from a PRNG key for inputs of ``input_shape``;
* ``apply_fun(params, inputs, **kwargs) -> outputs`` applies it (``rng=`` a key, for
  ``Dropout``).

Combinators (:func:`serial`, :func:`parallel`, :func:`shape_dependent`) build layers of
layers. The initializers and the key splitting are JAX's, and ``ferrax.random`` draws
JAX's bits, so a network initialized here from a key has the parameters JAX's has::

    init_fun, apply_fun = stax.serial(stax.Dense(512), stax.Relu, stax.Dense(10), stax.LogSoftmax)
    out_shape, params = init_fun(ferrax.random.key(0), (-1, 784))
    logits = apply_fun(params, x)

Not here yet: the convolution and pooling layers (``Conv``, ``GeneralConv``,
``ConvTranspose``, ``MaxPool``, ``SumPool``, ``AvgPool``), which need
``lax.conv_general_dilated`` and ``lax.reduce_window``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ferrax.numpy as jnp
from ferrax import random
from ferrax._user_frames import user_location
from ferrax.nn import elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax, softplus, standardize
from ferrax.nn.initializers import Initializer, glorot_normal, normal, ones, zeros

__all__ = [
    "ApplyFn",
    "BatchNorm",
    "Dense",
    "Dropout",
    "Elu",
    "Exp",
    "FanInConcat",
    "FanInSum",
    "FanOut",
    "Flatten",
    "Gelu",
    "Identity",
    "InitFn",
    "Layer",
    "LeakyRelu",
    "LogSoftmax",
    "Relu",
    "Selu",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
    "elementwise",
    "glorot",
    "logsoftmax",
    "parallel",
    "randn",
    "serial",
    "shape_dependent",
]

InitFn = Callable[[Any, Any], tuple[Any, Any]]
"""``init_fun(rng, input_shape) -> (output_shape, params)``."""
ApplyFn = Callable[..., Any]
"""``apply_fun(params, inputs, **kwargs) -> outputs``."""
Layer = tuple[InitFn, ApplyFn]
"""A layer: its ``(init_fun, apply_fun)`` pair."""

# JAX's older names of these initializers and of log_softmax.
glorot = glorot_normal
randn = normal
logsoftmax = log_softmax


def Dense(out_dim: int, W_init: Initializer = glorot_normal(), b_init: Initializer = normal()) -> Layer:  # noqa: N802, N803
    """A fully-connected layer: ``inputs @ W + b`` with ``W`` of shape ``(in, out_dim)``."""

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        output_shape = tuple(input_shape[:-1]) + (out_dim,)
        k1, k2 = random.split(rng)
        return output_shape, (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        w, b = params
        return jnp.dot(inputs, w) + b

    return init_fun, apply_fun


def BatchNorm(  # noqa: N802
    axis: int | Sequence[int] = (0, 1, 2),
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
    beta_init: Initializer = zeros,
    gamma_init: Initializer = ones,
) -> Layer:
    """Normalizes over ``axis`` (the batch statistics, no running averages), then scales
    by ``gamma`` and shifts by ``beta`` (parameters over the other axes)."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axes)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params: Any, x: Any, **kwargs: Any) -> Any:
        beta, gamma = params
        # The parameters broadcast over the normalized axes.
        expand = tuple(None if i in axes else slice(None) for i in range(np.ndim(x)))
        z = standardize(x, axes, epsilon=epsilon)
        if center and scale:
            return gamma[expand] * z + beta[expand]
        if center:
            return z + beta[expand]
        if scale:
            return gamma[expand] * z
        return z

    return init_fun, apply_fun


def elementwise(fun: Callable[..., Any], **fun_kwargs: Any) -> Layer:
    """A layer without parameters applying ``fun(inputs, **fun_kwargs)``."""

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return fun(inputs, **fun_kwargs)

    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _flatten() -> Layer:
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return jnp.reshape(inputs, (inputs.shape[0], -1))

    return init_fun, apply_fun


Flatten = _flatten()
"""Flattens all axes but the leading (batch) one."""


def _identity() -> Layer:
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return inputs

    return init_fun, apply_fun


Identity = _identity()
"""Returns its inputs."""


def FanOut(num: int) -> Layer:  # noqa: N802
    """Copies its input ``num`` times (a list), e.g. for :func:`parallel`."""

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return [input_shape] * num, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return [inputs] * num

    return init_fun, apply_fun


def _fan_in_sum() -> Layer:
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return input_shape[0], ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return sum(inputs)

    return init_fun, apply_fun


FanInSum = _fan_in_sum()
"""Sums a list of inputs of one shape."""


def FanInConcat(axis: int = -1) -> Layer:  # noqa: N802
    """Concatenates a list of inputs along ``axis``."""

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        first = tuple(input_shape[0])
        ax = axis % len(first)
        size = sum(shape[ax] for shape in input_shape)
        return first[:ax] + (size,) + first[ax + 1 :], ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return jnp.concatenate(inputs, axis)

    return init_fun, apply_fun


def Dropout(rate: float, mode: str = "train") -> Layer:  # noqa: N802
    """In ``mode`` "train", keeps each input with probability ``rate`` (JAX's stax names
    the kept fraction so) and scales the kept ones by ``1 / rate``; otherwise returns the
    inputs. ``apply_fun`` then needs a key: ``apply_fun(params, inputs, rng=key)``."""

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError(
                "Dropout layer requires apply_fun to be called with a PRNG key argument: "
                "instead of `apply_fun(params, inputs)`, call `apply_fun(params, inputs, rng=key)` "
                f"with a PRNG key (e.g. from `ferrax.random.key`), at {user_location()}"
            )
        if mode == "train":
            keep = random.bernoulli(rng, rate, inputs.shape)
            return jnp.where(keep, inputs / rate, 0)
        return inputs

    return init_fun, apply_fun


# ---------------------------------------------------------------------------------------
# Combinators


def serial(*layers: Layer) -> Layer:
    """The layers one after the other; the parameters are the list of theirs. Each layer
    gets its own key, split from the one given (to ``init_fun``, and to ``apply_fun`` as
    ``rng=``)."""
    count = len(layers)
    init_funs = [init for init, _ in layers]
    apply_funs = [apply for _, apply in layers]

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, count) if rng is not None else (None,) * count
        for fun, param, layer_rng in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=layer_rng, **kwargs)
        return inputs

    return init_fun, apply_fun


def parallel(*layers: Layer) -> Layer:
    """The layers side by side: a sequence of inputs (one per layer, e.g. from
    :func:`FanOut`) to the list of their outputs; the parameters are the list of
    theirs. ``init_fun`` returns ``(output_shapes, params)``, each a tuple."""
    count = len(layers)
    init_funs = [init for init, _ in layers]
    apply_funs = [apply for _, apply in layers]

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        rngs = random.split(rng, count)
        pairs = [init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)]
        return tuple(shape for shape, _ in pairs), tuple(param for _, param in pairs)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, count) if rng is not None else (None,) * count
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]

    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[Any], Layer]) -> Layer:
    """A layer made by ``make_layer(input_shape)`` once the input shape is known (at
    ``init_fun``, and from the inputs at ``apply_fun``)."""

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)

    return init_fun, apply_fun
