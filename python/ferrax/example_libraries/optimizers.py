"""Optimizers as ``(init_fun, update_fun, get_params)`` triples, JAX's
``jax.example_libraries.optimizers`` API over ferrax arrays.

An optimizer is written for one array (``init(x0) -> state``, ``update(i, g, state) ->
state``, ``get_params(state) -> x``, the state any pytree) and lifted to pytrees of
parameters by :func:`optimizer`. The lifted state is an :class:`OptimizerState`, a
pytree whose leaves are the per-array states' leaves, so it can be passed through
``jit``, ``grad`` and ``vmap``::

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    opt_state = opt_init(params)

    @ferrax.jit
    def step(i, opt_state, batch):
        value, grads = ferrax.value_and_grad(loss)(get_params(opt_state), batch)
        return opt_update(i, grads, opt_state), value

``update_fun``'s step index ``i`` (a Python int or an integer array, traced under
``jit``) feeds the step-size schedule and Adam's bias correction. The arithmetic is
JAX's, operation for operation, so both libraries give the same values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

import ferrax.numpy as jnp
from ferrax import tree_util
from ferrax._array import Array
from ferrax._user_frames import user_location
from ferrax.tree_util import PyTreeDef

__all__ = [
    "InitFn",
    "JoinPoint",
    "Optimizer",
    "OptimizerState",
    "ParamsFn",
    "Schedule",
    "UpdateFn",
    "adagrad",
    "adam",
    "adamax",
    "clip_grads",
    "constant",
    "exponential_decay",
    "inverse_time_decay",
    "l2_norm",
    "make_schedule",
    "momentum",
    "nesterov",
    "optimizer",
    "pack_optimizer_state",
    "piecewise_constant",
    "polynomial_decay",
    "rmsprop",
    "rmsprop_momentum",
    "sgd",
    "sm3",
    "unpack_optimizer_state",
]

Params = Any
"""A pytree of parameter arrays."""
Step = Any
"""A step index: a Python int or an integer scalar array."""


class OptimizerState(NamedTuple):
    """The state of a pytree optimizer: for each parameter array (in flattening order)
    the leaves of its per-array state, the parameters' structure, and the structure of
    each per-array state. A pytree whose leaves are the per-array states' leaves."""

    packed_state: tuple[list[Any], ...]
    tree_def: PyTreeDef
    subtree_defs: tuple[PyTreeDef, ...]


def _flatten_state(state: OptimizerState) -> tuple[tuple[Any, ...], tuple[PyTreeDef, tuple[PyTreeDef, ...]]]:
    return (state.packed_state,), (state.tree_def, state.subtree_defs)


def _unflatten_state(aux: Any, children: Any) -> OptimizerState:
    (packed,) = children
    tree_def, subtree_defs = aux
    return OptimizerState(packed, tree_def, subtree_defs)


tree_util.register_pytree_node(OptimizerState, _flatten_state, _unflatten_state)

InitFn = Callable[[Params], OptimizerState]
"""``init_fun(params) -> opt_state``."""
UpdateFn = Callable[[Step, Params, OptimizerState], OptimizerState]
"""``update_fun(step, grads, opt_state) -> opt_state``."""
ParamsFn = Callable[[OptimizerState], Params]
"""``get_params(opt_state) -> params``."""
Schedule = Callable[[Step], Any]
"""A step size as a function of the step index."""


class Optimizer(NamedTuple):
    """The ``(init_fun, update_fun, get_params)`` triple of a pytree optimizer."""

    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


ArrayTriple = tuple[Callable[[Any], Any], Callable[[Step, Any, Any], Any], Callable[[Any], Any]]


def optimizer(opt_maker: Callable[..., ArrayTriple]) -> Callable[..., Optimizer]:
    """Decorator: lifts a maker of a one-array ``(init, update, get_params)`` triple to a
    maker of an :class:`Optimizer` over pytrees of parameters.

    ``init(x0)`` returns the state of one array (any pytree), ``update(i, g, state)``
    the next state, ``get_params(state)`` the array. The lifted functions apply them to
    every leaf of the parameters and keep the states in an :class:`OptimizerState`.
    """

    @functools.wraps(opt_maker)
    def tree_opt_maker(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        def tree_init(x0_tree: Params) -> OptimizerState:
            x0_flat, tree = tree_util.tree_flatten(x0_tree)
            flat_states = [tree_util.tree_flatten(init(x0)) for x0 in x0_flat]
            return OptimizerState(
                tuple(leaves for leaves, _ in flat_states), tree, tuple(d for _, d in flat_states)
            )

        def tree_update(i: Step, grad_tree: Params, opt_state: OptimizerState) -> OptimizerState:
            states_flat, tree, subtrees = opt_state
            grad_flat, grad_def = tree_util.tree_flatten(grad_tree)
            if grad_def != tree:
                raise TypeError(
                    "optimizer update function was passed a gradient tree that did not match "
                    f"the parameter tree structure with which it was initialized: parameter "
                    f"tree {tree} and grad tree {grad_def}, at {user_location()}"
                )
            new_leaves: list[list[Any]] = []
            for g, subtree, leaves in zip(grad_flat, subtrees, states_flat, strict=True):
                new_state = update(i, g, tree_util.tree_unflatten(subtree, leaves))
                leaves2, subtree2 = tree_util.tree_flatten(new_state)
                if subtree2 != subtree:
                    raise TypeError(
                        "optimizer update function produced an output structure that did not "
                        f"match its input structure: input {subtree} and output {subtree2}, "
                        f"at {user_location()}"
                    )
                new_leaves.append(leaves2)
            return OptimizerState(tuple(new_leaves), tree, subtrees)

        def tree_get_params(opt_state: OptimizerState) -> Params:
            states_flat, tree, subtrees = opt_state
            params = [
                get_params(tree_util.tree_unflatten(subtree, leaves))
                for subtree, leaves in zip(subtrees, states_flat, strict=True)
            ]
            return tree_util.tree_unflatten(tree, params)

        for lifted, one in ((tree_init, init), (tree_update, update), (tree_get_params, get_params)):
            lifted.__doc__ = one.__doc__
        return Optimizer(tree_init, tree_update, tree_get_params)

    return tree_opt_maker


# ---------------------------------------------------------------------------------------
# Optimizers


@optimizer
def sgd(step_size: float | Schedule) -> ArrayTriple:
    """Stochastic gradient descent: ``x - step_size(i) * g``.

    ``step_size`` is a positive scalar or a schedule (step index -> scalar).
    """
    lr = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0

    def update(i: Step, g: Any, x: Any) -> Any:
        return x - lr(i) * g

    def get_params(x: Any) -> Any:
        return x

    return init, update, get_params


@optimizer
def momentum(step_size: float | Schedule, mass: float) -> ArrayTriple:
    """SGD with momentum: ``v = mass * v + g``, ``x - step_size(i) * v``."""
    lr = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, velocity = state
        velocity = mass * velocity + g
        return x - lr(i) * velocity, velocity

    return init, update, _first


@optimizer
def nesterov(step_size: float | Schedule, mass: float) -> ArrayTriple:
    """SGD with Nesterov momentum: ``v = mass * v + g``, ``x - step_size(i) * (mass * v + g)``."""
    lr = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, velocity = state
        velocity = mass * velocity + g
        return x - lr(i) * (mass * velocity + g), velocity

    return init, update, _first


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9) -> ArrayTriple:
    """Adagrad (Duchi et al. 2011) with momentum on the scaled gradient."""
    lr = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        inv_root = jnp.where(g_sq > 0, 1.0 / jnp.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * inv_root) + momentum * m
        return x - lr(i) * m, g_sq, m

    return init, update, _first


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8) -> ArrayTriple:
    """RMSProp: a running mean of squared gradients (decay ``gamma``) scales each step."""
    lr = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, avg_sq = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        return x - lr(i) * g / jnp.sqrt(avg_sq + eps), avg_sq

    return init, update, _first


@optimizer
def rmsprop_momentum(
    step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8, momentum: float = 0.9
) -> ArrayTriple:
    """RMSProp with momentum on the scaled steps."""
    lr = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + lr(i) * g / jnp.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom

    return init, update, _first


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> ArrayTriple:
    """Adam (Kingma and Ba 2015): moment estimates with decay rates ``b1`` and ``b2``,
    bias-corrected with the step index (``i = 0`` is the first step)."""
    lr = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        v_hat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - lr(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v

    return init, update, _first


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> ArrayTriple:
    """AdaMax: Adam with the infinity norm in place of the second moment."""
    lr = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (lr(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))) * m / (u + eps)
        return x, m, u

    return init, update, _first


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9) -> ArrayTriple:
    """SM3 (Anil et al. 2019): one accumulator per axis instead of one per entry."""
    lr = make_schedule(step_size)

    def along(ndim: int, v: Any, axis: int) -> Any:
        # v (the accumulator of one axis) as an array of rank ndim, broadcast on the others.
        index: list[Any] = [None] * ndim
        index[axis : axis + 1] = [slice(None)]  # (a scalar's one accumulator: rank 1)
        return v[tuple(index)]

    def init(x0: Any) -> Any:
        shape = np.shape(x0)
        x = jnp.atleast_1d(x0)
        return x, jnp.zeros_like(x), [jnp.zeros(n, dtype=x.dtype) for n in x.shape], shape

    def update(i: Step, g: Any, state: Any) -> Any:
        x, m, vs, shape = state
        accum = functools.reduce(jnp.minimum, [along(g.ndim, v, a) for a, v in enumerate(vs)]) + jnp.square(g)
        inv_root = jnp.where(accum > 0, 1.0 / jnp.sqrt(accum), 0)
        m = (1.0 - momentum) * (g * inv_root) + momentum * m
        x = x - lr(i) * m
        others = range(x.ndim)
        vs = [accum.max(tuple(a for a in others if a != j)) for j in range(x.ndim)]
        return x, m, vs, shape

    def get_params(state: Any) -> Any:
        x, _, _, shape = state
        return x.reshape(shape)

    return init, update, get_params


def _first(state: Any) -> Any:
    """The parameters of a ``(x, ...)`` state."""
    return state[0]


# ---------------------------------------------------------------------------------------
# Step-size schedules


def constant(step_size: Any) -> Schedule:
    """The schedule ``i -> step_size``."""

    def schedule(i: Step) -> Any:
        return step_size

    return schedule


def exponential_decay(step_size: Any, decay_steps: Any, decay_rate: Any) -> Schedule:
    """The schedule ``i -> step_size * decay_rate ** (i / decay_steps)``."""

    def schedule(i: Step) -> Any:
        return step_size * decay_rate ** (i / decay_steps)

    return schedule


def inverse_time_decay(step_size: Any, decay_steps: Any, decay_rate: Any, staircase: bool = False) -> Schedule:
    """The schedule ``i -> step_size / (1 + decay_rate * i / decay_steps)`` (with
    ``floor(i / decay_steps)`` when ``staircase``)."""
    if staircase:

        def schedule(i: Step) -> Any:
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))

    else:

        def schedule(i: Step) -> Any:
            return step_size / (1 + decay_rate * i / decay_steps)

    return schedule


def polynomial_decay(step_size: Any, decay_steps: Any, final_step_size: Any, power: float = 1.0) -> Schedule:
    """The schedule from ``step_size`` at step 0 to ``final_step_size`` at ``decay_steps``
    (and after) along ``(1 - i / decay_steps) ** power``."""

    def schedule(step_num: Step) -> Any:
        step_num = jnp.minimum(step_num, decay_steps)
        mult = (1 - step_num / decay_steps) ** power
        return mult * (step_size - final_step_size) + final_step_size

    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """The schedule ``values[k]`` for ``boundaries[k-1] < i <= boundaries[k]`` (one more
    value than boundaries)."""
    bounds = jnp.array(boundaries)
    vals = jnp.array(values)
    if not bounds.ndim == vals.ndim == 1:
        raise ValueError(f"boundaries and values must be sequences, at {user_location()}")
    if bounds.shape[0] != vals.shape[0] - 1:
        raise ValueError(f"boundaries length must be one shorter than values length, at {user_location()}")

    def schedule(i: Step) -> Any:
        return vals[jnp.sum(i > bounds)]

    return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """A schedule as it is, a scalar as the constant schedule; anything else is a
    TypeError."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if np.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(
        f"a step size must be a scalar or a schedule (a callable), got "
        f"{type(scalar_or_schedule).__name__} of shape {np.shape(scalar_or_schedule)}, at {user_location()}"
    )


# ---------------------------------------------------------------------------------------
# Utilities


def l2_norm(tree: Any) -> Array:
    """The l2 norm of all the leaves of a pytree of arrays taken together."""
    leaves = tree_util.tree_leaves(tree)
    # vdot(x, x) of a real array: the dot product of the flattened array with itself.
    return jnp.sqrt(sum(jnp.dot(jnp.ravel(x), jnp.ravel(x)) for x in leaves))


def clip_grads(grad_tree: Any, max_norm: Any) -> Any:
    """The gradients scaled down, all by one factor, so their :func:`l2_norm` is at most
    ``max_norm``."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """A leaf of :func:`unpack_optimizer_state`'s result: one parameter's state (a
    pytree), where the parameter tree joins the state trees."""

    def __init__(self, subtree: Any) -> None:
        self.subtree = subtree

    def __iter__(self) -> Iterator[Any]:
        yield self.subtree


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """The state as the parameters' pytree with a :class:`JoinPoint` (holding that
    parameter's state) at each leaf: plain containers, for serialization."""
    states_flat, tree_def, subtree_defs = opt_state
    subtrees = [tree_util.tree_unflatten(d, leaves) for d, leaves in zip(subtree_defs, states_flat, strict=True)]
    return tree_util.tree_unflatten(tree_def, [JoinPoint(s) for s in subtrees])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of :func:`unpack_optimizer_state`."""
    sentinels, tree_def = tree_util.tree_flatten(marked_pytree)
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise TypeError(
            f"pack_optimizer_state: every leaf must be a JoinPoint (as unpack_optimizer_state "
            f"makes), at {user_location()}"
        )
    flat = [tree_util.tree_flatten(s.subtree) for s in sentinels]
    return OptimizerState(tuple(leaves for leaves, _ in flat), tree_def, tuple(d for _, d in flat))
