"""The examples that train (examples/mnist_mlp.py, cnn.py, attention.py, lstm.py; issue 12 item 7).

Each example is imported as a module (its ``main`` does not run) and checked against the
same program written with JAX (bench/examples_bench.py's ``jax_programs``): for the same
parameters and batch, the jitted ``value_and_grad`` of the loss gives the same loss and
the same gradient for every parameter; and 20 of the example's jitted training steps
(value_and_grad, then Adam from ferrax.example_libraries.optimizers, tested against JAX's
in tests/test_optimizers.py) lower the loss.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import ferrax

pytest.importorskip("jax")

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _load_bench() -> ModuleType:
    """bench/examples_bench.py (not a package: loaded from its path)."""
    if "examples_bench" in sys.modules:
        return sys.modules["examples_bench"]
    spec = importlib.util.spec_from_file_location("examples_bench", ROOT / "bench" / "examples_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["examples_bench"] = module
    spec.loader.exec_module(module)
    return module


examples_bench = _load_bench()

EXAMPLES = list(examples_bench.EXAMPLES)


@pytest.fixture(scope="module")
def jax_programs() -> dict[str, dict[str, Any]]:
    programs: dict[str, dict[str, Any]] = examples_bench.jax_programs()
    return programs


def _example(name: str) -> ModuleType:
    module: ModuleType = examples_bench.load_example(name)
    return module


def _loss_batch(name: str, batch: tuple[Any, ...]) -> tuple[Any, ...]:
    """The loss's arguments after the parameters: the MLP's step gathers its minibatch
    ``x[idx], labels[idx]``, its loss takes the gathered arrays."""
    if name in ("mnist_mlp", "cnn"):
        x, labels, idx = batch
        return (x[idx], labels[idx])
    return batch


@pytest.mark.parametrize("name", EXAMPLES)
def test_loss_and_gradients_match_jax(name: str, jax_programs: dict[str, dict[str, Any]]) -> None:
    params, batch = examples_bench.example_inputs(name)
    args = _loss_batch(name, batch)
    value, grads = _example(name).loss_and_grad(params, *args)
    jvalue, jgrads = jax_programs[name]["loss_and_grad"](params, *args)
    assert np.asarray(value).dtype == np.float32
    np.testing.assert_allclose(np.asarray(value), np.asarray(jvalue), rtol=1e-4)
    leaves, tree = ferrax.tree.flatten(grads)
    jleaves = ferrax.tree.leaves(ferrax.tree.map(np.asarray, jgrads))
    assert tree == ferrax.tree.structure(params)
    assert len(leaves) == len(jleaves)
    for path_leaf, g, jg in zip(ferrax.tree.leaves_with_path(params), leaves, jleaves):
        g = np.asarray(g)
        assert g.shape == jg.shape and g.dtype == jg.dtype, path_leaf[0]
        # rtol 1e-4, with an absolute floor at 1e-4 of the leaf's scale (entries near
        # zero are sums of cancelling float32 terms).
        scale = float(np.max(np.abs(jg))) or 1.0
        np.testing.assert_allclose(g, jg, rtol=1e-4, atol=1e-4 * scale, err_msg=ferrax.tree_util.keystr(path_leaf[0]))


@pytest.mark.parametrize("name", EXAMPLES)
def test_twenty_steps_lower_the_loss(name: str) -> None:
    ex = _example(name)
    params, batch = examples_bench.example_inputs(name, seed=1)
    opt_state = ex.opt_init(params)
    losses: list[float] = []
    for i in range(20):
        opt_state, value = ex.train_step(i, opt_state, *batch)
        losses.append(float(value))
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0], losses
    new_params = ex.get_params(opt_state)
    assert ferrax.tree.structure(new_params) == ferrax.tree.structure(params)
    assert not np.allclose(np.asarray(ferrax.tree.leaves(new_params)[0]), ferrax.tree.leaves(params)[0])


@pytest.mark.parametrize(("name", "kwargs"), [("mnist_mlp", {"epochs": 2}), ("cnn", {"epochs": 2}), ("attention", {"steps": 30}), ("lstm", {"steps": 30})])
def test_main_runs_and_prints_falling_loss(name: str, kwargs: dict[str, int], capsys: pytest.CaptureFixture[str]) -> None:
    """The script's own loop (shortened), as `python examples/NAME.py` runs it."""
    _example(name).main(**kwargs)
    out = capsys.readouterr().out
    losses = [float(word) for line in out.splitlines() for prev, word in zip(line.split(), line.split()[1:]) if prev == "loss"]
    assert len(losses) >= 2, out
    assert losses[-1] < losses[0], out
