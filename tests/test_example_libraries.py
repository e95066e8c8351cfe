"""ferrax.example_libraries.optimizers against jax.example_libraries.optimizers.

Every optimizer of the table runs a few steps on the same parameter pytree and gradients
in both libraries (ferrax eagerly, step indices as Python ints; JAX's steps in one jitted
function, one compilation rather than one per operation and shape): the parameters and
every leaf of the optimizer state agree (float32, to a few ulps). The schedules are compared over a
range of step indices; one jitted run checks the state as a pytree through ``jit`` with
a traced step index (and a schedule), bit for bit with JAX's jitted run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax.example_libraries import optimizers as fo

jax = pytest.importorskip("jax")
jo = pytest.importorskip("jax.example_libraries.optimizers")


def _params() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {
        "w": rng.standard_normal((3, 4)).astype(np.float32),
        "b": [rng.standard_normal(4).astype(np.float32), np.float32(1.5)],
        "t": rng.standard_normal((2, 3, 2)).astype(np.float32),
    }


def _grads(steps: int) -> list[Any]:
    rng = np.random.default_rng(1)
    return [ferrax.tree.map(lambda p: rng.standard_normal(np.shape(p)).astype(np.float32), _params()) for _ in range(steps)]


# (name, positional arguments, keyword arguments): the optimizers and their options.
OPTIMIZERS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("sgd", (0.1,), {}),
    ("momentum", (0.1, 0.9), {}),
    ("nesterov", (0.05, 0.8), {}),
    ("adagrad", (0.1,), {}),
    ("adagrad", (0.1,), {"momentum": 0.5}),
    ("rmsprop", (0.1,), {}),
    ("rmsprop", (0.1,), {"gamma": 0.5, "eps": 1e-4}),
    ("rmsprop_momentum", (0.1,), {}),
    ("adam", (0.1,), {}),
    ("adam", (1e-3,), {"b1": 0.5, "b2": 0.9, "eps": 1e-6}),
    ("adamax", (0.1,), {}),
    ("sm3", (0.1,), {}),
    ("sm3", (0.1,), {"momentum": 0.0}),
]


def _leaves_np(tree: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


# Unoptimized machine code for JAX's reference runs: the same values, half the compile time.
FAST_COMPILE: dict[str, Any] = {"xla_backend_optimization_level": 0}
_JAX_STATES: dict[int, Any] = {}


def _jax_final_states() -> dict[int, Any]:
    """JAX's optimizer state after three steps (indices 0, 1, 2), for every optimizer of
    the table, all in one compilation."""
    if not _JAX_STATES:
        grads = _grads(3)

        def run(params: Any) -> dict[int, Any]:
            out = {}
            for k, (name, args, kwargs) in enumerate(OPTIMIZERS):
                init, update, _ = getattr(jo, name)(*args, **kwargs)
                state = init(params)
                for i, g in enumerate(grads):
                    state = update(i, g, state)
                out[k] = state
            return out

        params = _params()
        _JAX_STATES.update(jax.jit(run).lower(params).compile(FAST_COMPILE)(params))
    return _JAX_STATES


@pytest.mark.parametrize("k", range(len(OPTIMIZERS)), ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(OPTIMIZERS)])
def test_optimizer_steps_match_jax(k: int) -> None:
    name, args, kwargs = OPTIMIZERS[k]
    f_init, f_update, f_params = getattr(fo, name)(*args, **kwargs)
    j_params = getattr(jo, name)(*args, **kwargs)[2]
    params = _params()
    f_state, j_state = f_init(params), _jax_final_states()[k]
    # The state's structure: one per-array state per parameter, as JAX's.
    assert len(f_state.packed_state) == len(j_state.packed_state) == len(ferrax.tree.leaves(params))
    for i, g in enumerate(_grads(3)):
        f_state = f_update(i, g, f_state)
    f_leaves, j_leaves = [np.asarray(x) for x in ferrax.tree.leaves(f_state)], _leaves_np(j_state)
    assert len(f_leaves) == len(j_leaves)
    for a, b in zip(f_leaves, j_leaves):
        # (sm3 keeps each parameter's shape in its state: Python ints, int32 through jit)
        assert a.shape == b.shape and (a.dtype == b.dtype or a.dtype.kind == b.dtype.kind == "i")
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    f_out, j_out = f_params(f_state), j_params(j_state)
    assert ferrax.tree.structure(f_out) == ferrax.tree.structure(params)
    for a, b in zip(ferrax.tree.leaves(f_out), _leaves_np(j_out)):
        assert np.shape(a) == b.shape and np.asarray(a).dtype == b.dtype
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6, atol=1e-7)


def test_jitted_steps_with_traced_index_match_jax_bitwise() -> None:
    """The state through ``jit`` (a pytree in and out), the step index traced, a schedule."""
    schedule = (0.1, 100, 0.5)

    def run(lib: Any, jit: Callable[..., Any]) -> list[np.ndarray]:
        init, update, get_params = lib.adam(lib.exponential_decay(*schedule))
        step = jit(update)
        state = init(_params())
        for i, g in enumerate(_grads(3)):
            state = step(i, g, state)
        return [np.asarray(x) for x in jax.tree.leaves(get_params(state))] + [
            np.asarray(x) for x in (ferrax.tree.leaves(state) if lib is fo else jax.tree.leaves(state))
        ]

    ours, theirs = run(fo, ferrax.jit), run(jo, jax.jit)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


SCHEDULES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("constant", (0.3,), {}),
    ("exponential_decay", (0.1, 10, 0.5), {}),
    ("inverse_time_decay", (0.1, 10, 0.5), {}),
    ("inverse_time_decay", (0.1, 10, 0.5), {"staircase": True}),
    ("polynomial_decay", (0.1, 20, 0.01), {}),
    ("polynomial_decay", (0.1, 20, 0.01), {"power": 2.0}),
    ("piecewise_constant", ([5, 12], [1.0, 0.5, 0.1]), {}),
]


STEPS = np.array([0, 3, 5, 6, 12, 13, 25, 40], np.int32)


def test_schedules_match_jax() -> None:
    """Every schedule at Python int step indices, and (but the constant and piecewise
    ones, which JAX's take scalars only) at an array of them, against JAX's values at
    the same indices (all JAX's in one compilation, by vmap)."""

    def jax_values(steps: Any) -> list[Any]:
        return [jax.vmap(getattr(jo, n)(*a, **kw))(steps) for n, a, kw in SCHEDULES if n != "constant"]

    theirs = iter(jax.jit(jax_values).lower(STEPS).compile(FAST_COMPILE)(STEPS))
    for name, args, kwargs in SCHEDULES:
        ours = getattr(fo, name)(*args, **kwargs)
        if name == "constant":
            assert [ours(int(i)) for i in STEPS] == [getattr(jo, name)(*args)(int(i)) for i in STEPS]
            continue
        expected = np.asarray(next(theirs))
        got = np.array([np.asarray(ours(int(i))) for i in STEPS])
        np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=name)
        if name != "piecewise_constant":
            on_array = np.asarray(ours(fnp.asarray(STEPS)))
            assert on_array.dtype == expected.dtype, name
            np.testing.assert_allclose(on_array, expected, rtol=1e-6, err_msg=name)


def test_make_schedule() -> None:
    assert fo.make_schedule(0.5)(7) == 0.5
    sched = fo.polynomial_decay(1.0, 10, 0.0)
    assert fo.make_schedule(sched) is sched
    with pytest.raises(TypeError, match="step size must be a scalar or a schedule"):
        fo.make_schedule(np.ones(3))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("boundaries", "values", "message"),
    [([[1, 2]], [[1.0, 2.0, 3.0]], "must be sequences"), ([1, 2], [1.0, 2.0], "one shorter")],
)
def test_piecewise_constant_errors(boundaries: Any, values: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        fo.piecewise_constant(boundaries, values)
    assert "test_example_libraries.py" in str(err.value)
    with pytest.raises(ValueError, match=message):
        jo.piecewise_constant(boundaries, values)


def test_l2_norm_and_clip_grads_match_jax() -> None:
    grads = _grads(1)[0]

    def jax_side(g: Any) -> Any:
        return jo.l2_norm(g), [jo.clip_grads(g, m) for m in (0.5, 100.0)]

    j_norm, j_clipped = jax.jit(jax_side).lower(grads).compile(FAST_COMPILE)(grads)
    np.testing.assert_allclose(np.asarray(fo.l2_norm(grads)), np.asarray(j_norm), rtol=1e-6)
    for max_norm, theirs in zip((0.5, 100.0), j_clipped):  # clipped, and left as it is
        ours = fo.clip_grads(grads, max_norm)
        assert ferrax.tree.structure(ours) == ferrax.tree.structure(grads)
        for a, b in zip(ferrax.tree.leaves(ours), _leaves_np(theirs)):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6)
    assert float(fo.l2_norm(fo.clip_grads(grads, 0.5))) == pytest.approx(0.5, rel=1e-5)


def test_unpack_and_pack_optimizer_state() -> None:
    init, update, get_params = fo.momentum(0.1, 0.9)
    state = update(0, _grads(1)[0], init(_params()))
    marked = fo.unpack_optimizer_state(state)
    # The parameters' structure, a JoinPoint (holding that parameter's state) per leaf.
    assert isinstance(marked, dict) and set(marked) == {"w", "b", "t"}
    assert isinstance(marked["w"], fo.JoinPoint) and len(marked["w"].subtree) == 2
    again = fo.pack_optimizer_state(marked)
    assert again.tree_def == state.tree_def and again.subtree_defs == state.subtree_defs
    for a, b in zip(ferrax.tree.leaves(again), ferrax.tree.leaves(state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(ferrax.tree.leaves(get_params(again)), ferrax.tree.leaves(get_params(state))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(TypeError, match="every leaf must be a JoinPoint"):
        fo.pack_optimizer_state({"w": np.ones(2)})


def test_gradient_tree_mismatch_is_type_error() -> None:
    init, update, _ = fo.adam(0.1)
    state = init(_params())
    with pytest.raises(TypeError, match="did not match the parameter tree structure") as err:
        update(0, [np.ones(3, np.float32)], state)
    assert "test_example_libraries.py" in str(err.value)
    j_init, j_update, _ = jo.adam(0.1)
    with pytest.raises(TypeError):
        j_update(0, [np.ones(3, np.float32)], j_init(_params()))


def test_optimizer_is_a_named_triple() -> None:
    opt = fo.sgd(0.1)
    assert isinstance(opt, fo.Optimizer)
    assert opt.init_fn is opt[0] and opt.update_fn is opt[1] and opt.params_fn is opt[2]
    state = opt.init_fn({"a": np.float32(1.0)})
    assert isinstance(state, fo.OptimizerState)
    assert float(opt.params_fn(opt.update_fn(0, {"a": np.float32(2.0)}, state))["a"]) == pytest.approx(0.8)


# ------------------------------------------------------------------------------ stax

js = pytest.importorskip("jax.example_libraries.stax")


def _network(s: Any) -> Any:
    """Every layer and combinator of stax (but the convolutions and pooling) in one net."""
    return s.serial(
        s.Flatten,
        s.Dense(8, W_init=s.glorot()),
        s.Relu,
        s.FanOut(2),
        s.parallel(s.serial(s.Dense(8), s.Tanh), s.Identity),
        s.FanInSum,
        s.shape_dependent(lambda shape: s.Dense(shape[-1] - 2)),
        s.Gelu,
        s.FanOut(3),
        s.parallel(s.Sigmoid, s.Elu, s.serial(s.Softplus, s.LeakyRelu, s.Selu)),
        s.FanInConcat(),
        s.BatchNorm(axis=(0,)),
        s.Dropout(0.75),
        s.Dense(4, W_init=s.randn(0.5), b_init=s.randn(0.1)),
        s.Exp,
        s.Softmax,
        s.LogSoftmax,
    )


def test_stax_network_matches_jax() -> None:
    """The same key gives the same parameters (to a few ulps: the random bits,
    initializers and key splits are JAX's); the forward pass (dropout with a key) is
    JAX's to float32 tolerance."""
    from ferrax.example_libraries import stax as fs

    x = np.random.default_rng(2).standard_normal((5, 3, 1)).astype(np.float32)
    f_init, f_apply = _network(fs)
    j_init, j_apply = _network(js)
    f_shape, f_params = f_init(ferrax.random.key(0), (-1, 3, 1))
    j_shapes: list[Any] = []

    def j_run(key: Any, v: Any, dropout_key: Any) -> Any:
        # JAX's init and forward pass in one compilation (the shape taken from the trace).
        shape, p = j_init(key, (-1, 3, 1))
        j_shapes.append(shape)
        return p, j_apply(p, v, rng=dropout_key)

    j_args = (jax.random.key(0), x, jax.random.key(1))
    # Compiled without LLVM's optimizations: the same values, in half the time.
    j_params, theirs = jax.jit(j_run).lower(*j_args).compile({"xla_backend_optimization_level": 0})(*j_args)
    theirs = np.asarray(theirs)
    assert f_shape == j_shapes[0] == (-1, 4)
    f_leaves, j_leaves = ferrax.tree.leaves(f_params), _leaves_np(j_params)
    assert len(f_leaves) == len(j_leaves) == 10  # four Dense (w, b), BatchNorm (beta, gamma)
    for a, b in zip(f_leaves, j_leaves):  # (JAX's jitted: XLA's fused scaling, ulps apart)
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6, atol=0)
    # Eagerly (test_stax_trains_with_optimizers jits a stax network): float32 rounding
    # differences, amplified by BatchNorm's division by the batch's deviation.
    ours = np.asarray(f_apply(f_params, x, rng=ferrax.random.key(1)))
    assert ours.shape == theirs.shape == (5, 4) and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=2e-4, atol=2e-4)


def test_stax_dropout_needs_a_key() -> None:
    from ferrax.example_libraries import stax as fs

    _, apply = fs.Dropout(0.5)
    with pytest.raises(ValueError, match="requires apply_fun to be called with a PRNG key") as err:
        apply((), np.ones(3, np.float32))
    assert "test_example_libraries.py" in str(err.value)
    # Outside training the inputs pass unchanged (a key is still required, as in JAX).
    _, eval_apply = fs.Dropout(0.5, mode="test")
    out = eval_apply((), np.ones(3, np.float32), rng=ferrax.random.key(0))
    np.testing.assert_array_equal(np.asarray(out), np.ones(3))
    with pytest.raises(ValueError):
        js.Dropout(0.5, mode="test")[1]((), np.ones(3, np.float32))


def test_stax_trains_with_optimizers() -> None:
    """The two libraries together, as JAX's MNIST example uses them: a few jitted Adam
    steps on a stax MLP lower the loss."""
    from ferrax.example_libraries import stax as fs

    init, apply = fs.serial(fs.Dense(16), fs.Relu, fs.Dense(3), fs.LogSoftmax)
    _, params = init(ferrax.random.key(0), (-1, 4))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    labels = np.eye(3, dtype=np.float32)[(x[:, 0] > 0).astype(int) + (x[:, 1] > 0).astype(int)]
    opt_init, opt_update, get_params = fo.adam(0.05)

    def loss(p: Any) -> Any:
        return -fnp.mean(fnp.sum(apply(p, x) * labels, axis=-1))

    @ferrax.jit
    def step(i: Any, state: Any) -> Any:
        value, grads = ferrax.value_and_grad(loss)(get_params(state))
        return opt_update(i, grads, state), value

    state = opt_init(params)
    losses = []
    for i in range(15):
        state, value = step(i, state)
        losses.append(float(value))
    assert losses[-1] < 0.5 * losses[0], losses
