"""What a newcomer meets: a normal run prints nothing on stderr (XLA's C++ INFO logging
is off, as in JAX), and jaxlib, which jit needs, is a runtime dependency."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROGRAM = """
import numpy as np
import ferrax as fx
import ferrax.numpy as fnp
f = fx.jit(lambda x: fnp.tanh(x) * 2.0 + 1.0)
print(np.asarray(f(np.arange(3, dtype=np.float32))).tolist())
"""


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_a_jitted_program_prints_nothing_on_stderr() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = _run(env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith("[1.0, 2.52")


def test_xla_logging_can_still_be_turned_on() -> None:
    # The default is only a default: TF_CPP_MIN_LOG_LEVEL=0 shows XLA's INFO lines again.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0")
    done = _run(env)
    assert done.returncode == 0, done.stderr
    assert "PjRt" in done.stderr


def test_jaxlib_is_a_runtime_dependency_and_jax_is_not() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip() for d in project["dependencies"]}
    assert {"numpy", "ml_dtypes", "jaxlib"} <= names
    assert "jax" not in names
