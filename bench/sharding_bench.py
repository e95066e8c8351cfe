"""The data-parallel rows of BENCH.md (issue 11), ferrax against JAX in one run.

One training step of mlp(8) (BENCH.md's MLP: 8 layers of W: f32[256,256], b: f32[256],
``h = tanh(h @ W + b)``, loss ``mean((h - y) ** 2)``) on a batch of 256 examples
(x, y: f32[256,256]), ``params - 0.01 * grad(loss)(params, x, y)``, jitted with
``in_shardings=(replicated, batch split, batch split)`` and ``out_shardings=replicated``
over a mesh of 1, 2 and 4 CPU devices (axis ``batch``): XLA's SPMD partitioner splits
the batch and inserts the all-reduce of the gradients. Timed: the steady-state step on
device-resident arguments laid out as the step expects (5 steps per timing, each step
feeding the next, after a warm-up), the same configuration on both sides (same XLA,
so the ratio should be about 1.0: the target is within 5%). The two systems take turns
timing by timing, the first of each pair alternating, and the ratio is the median of
the per-pair ratios (two timings a few milliseconds apart see the same machine load,
which on 2 shared cores drifts by more than the 5% measured).

The four CPU devices are made by ``XLA_FLAGS=--xla_force_host_platform_device_count=4``,
set here before jaxlib loads (for ferrax and JAX alike). The machine has 2 cores, so
4 devices share them: the absolute step times say nothing about scaling, the ratios do.
The last row runs the same step over 2 processes x 1 device (bench/dp_worker.py, each
system's two workers started together, talking over loopback with gloo; the slower
process's time per repetition; the ratio range there pairs extremes, as the two
systems' workers run at different times).
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

_FLAG = "--xla_force_host_platform_device_count"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_FLAG}=4").strip()

import numpy as np  # noqa: E402

from ad_bench import comparison_table  # noqa: E402

DEPTH = 8
WIDTH = 256
BATCH = 256
DEVICE_COUNTS = (1, 2, 4)
STEPS = 5

TARGETS: dict[str, float | None] = {"data-parallel step": 1.05}


class _Sys:
    """One system: its numpy, jit, grad, tree_util, device_put and sharding classes."""

    def __init__(self, name: str, mod: Any, fnp: Any, sharding: Any) -> None:
        self.name = name
        self.mod = mod
        self.fnp = fnp
        self.sharding = sharding

    def model(self) -> tuple[Callable[..., Any], Any, Any, Any]:
        """The training step of mlp(8) and its data: ``(step, params, x, y)`` as NumPy
        values (the same for every configuration, 1 process or several)."""
        mod, fnp = self.mod, self.fnp

        def loss(params: Any, x: Any, y: Any) -> Any:
            h = x
            for w, b in params:
                h = fnp.tanh(h @ w + b)
            return fnp.mean((h - y) ** 2)

        def step(params: Any, x: Any, y: Any) -> Any:
            grads = mod.grad(loss)(params, x, y)
            return mod.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

        rng = np.random.default_rng(0)
        params = [
            (rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / 16, np.zeros(WIDTH, np.float32))
            for _ in range(DEPTH)
        ]
        x = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)
        y = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)
        return step, params, x, y

    def step_fn(self, n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The jitted step over the first ``n`` devices and its arguments laid out."""
        mod, sh = self.mod, self.sharding
        mesh = sh.Mesh(np.array(mod.devices()[:n]), ("batch",))
        repl = sh.NamedSharding(mesh, sh.PartitionSpec())
        split = sh.NamedSharding(mesh, sh.PartitionSpec("batch"))
        step, params, x, y = self.model()
        jstep = mod.jit(step, in_shardings=(repl, split, split), out_shardings=repl)
        args = (mod.device_put(params, repl), mod.device_put(x, split), mod.device_put(y, split))
        return jstep, args


def _ferrax() -> _Sys:
    import ferrax
    import ferrax.numpy as fnp
    from ferrax import sharding

    return _Sys("ferrax", ferrax, fnp, sharding)


def _jax() -> _Sys | None:
    try:
        import jax
        import jax.numpy as jnp
        from jax import sharding
    except ImportError:
        return None
    return _Sys("jax", jax, jnp, sharding)


def _ready(s: _Sys, tree: Any) -> None:
    for leaf in s.mod.tree_util.tree_leaves(tree):
        leaf.block_until_ready()


def _steps(s: _Sys, jstep: Callable[..., Any], args: tuple[Any, ...]) -> tuple[float, Any]:
    params, x, y = args
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(STEPS):
            params = jstep(params, x, y)
        _ready(s, params)
        dt = time.perf_counter() - t0
    finally:
        gc.enable()
    return dt / STEPS, params


def run_sharding(use_jax: bool = True, reps_scale: float = 1.0, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The data-parallel step on 1, 2 and 4 devices; JSON-able rows."""
    peer = _jax() if use_jax else None
    systems = [s for s in (_ferrax(), peer) if s is not None]
    rows: list[dict[str, Any]] = []
    reps = max(6, round(40 * reps_scale))
    for n in DEVICE_COUNTS:
        prepared = {s.name: s.step_fn(n) for s in systems}
        finals: dict[str, Any] = {}
        for s in systems:  # compile and warm up; both compute the same step
            jstep, args = prepared[s.name]
            out = jstep(*args)
            _ready(s, out)
            finals[s.name] = [np.asarray(a) for a in s.mod.tree_util.tree_leaves(out)]
        if len(systems) == 2:
            for a, b in zip(finals["ferrax"], finals["jax"]):
                np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4)
        per: dict[str, list[float]] = {s.name: [] for s in systems}
        for i in range(reps):
            for s in systems if i % 2 == 0 else systems[::-1]:
                jstep, args = prepared[s.name]
                per[s.name].append(_steps(s, jstep, args)[0])
        r: dict[str, Any] = {"metric": "data-parallel step", "case": f"mlp(8), batch 256, {n} device{'s' if n > 1 else ''}", "target": TARGETS["data-parallel step"]}
        for name, ts in per.items():
            r[name] = {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts), "reps": len(ts)}
        if "ferrax" in per and "jax" in per:
            pairs = sorted(a / b for a, b in zip(per["ferrax"], per["jax"]))
            r["ratio"] = statistics.median(pairs)
            # The middle half of the per-pair ratios: the extremes of 2 shared cores say little.
            r["ratio_min"], r["ratio_max"] = pairs[len(pairs) // 4], pairs[(3 * len(pairs)) // 4]
        rows.append(r)
        if progress is not None:
            progress(
                f"{r['case']:36s} "
                + "  ".join(f"{k} {v['median_s'] * 1e3:.3f} ms" for k, v in r.items() if isinstance(v, dict))
                + (f"  ratio {r['ratio']:.4f}" if "ratio" in r else "")
            )
    rows.append(run_two_processes(use_jax, reps, progress))
    return rows


def _two_processes(system: str, reps: int, timeout: float = 300.0) -> tuple[list[float], float]:
    """The step time of ``system`` over 2 processes x 1 device (bench/dp_worker.py):
    per repetition the slower process's; and a checksum of the trained parameters."""
    import json
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    here = os.path.dirname(os.path.abspath(__file__))
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.join(here, "dp_worker.py"), "--system", system, "--coordinator",
             f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i), "--reps", str(reps), "--steps", str(STEPS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for i in range(2)
    ]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
            if p.returncode != 0 or not lines:
                raise RuntimeError(f"{system} worker failed (exit {p.returncode}):\n{err[-2000:]}")
            results.append(json.loads(lines[-1][len("RESULT "):]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    per_rep = [max(r["step_s"][i] for r in results) for i in range(reps)]
    return per_rep, results[0]["checksum"]


def run_two_processes(use_jax: bool, reps: int, progress: Callable[[str], None] | None) -> dict[str, Any]:
    """The 2-process row: each system's workers in turn (two rounds, alternating)."""
    systems = ["ferrax"] + (["jax"] if use_jax and _jax() is not None else [])
    per: dict[str, list[float]] = {s: [] for s in systems}
    sums: dict[str, float] = {}
    rounds: dict[str, list[float]] = {s: [] for s in systems}
    for i in range(4):  # ferrax, jax, jax, ferrax, ferrax, jax, jax, ferrax
        for s in systems if i % 2 == 0 else systems[::-1]:
            times, sums[s] = _two_processes(s, max(4, reps // 2))
            per[s] += times
            rounds[s].append(statistics.median(times))
    if len(sums) == 2:
        np.testing.assert_allclose(sums["ferrax"], sums["jax"], rtol=2e-3)
    r: dict[str, Any] = {"metric": "data-parallel step", "case": "mlp(8), batch 256, 2 processes x 1 device", "target": TARGETS["data-parallel step"]}
    for name, ts in per.items():
        r[name] = {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts), "reps": len(ts)}
    if "jax" in per:
        r["ratio"] = r["ferrax"]["median_s"] / r["jax"]["median_s"]
        # The range of the ratios of round medians (each ferrax round against the JAX
        # round next to it in time).
        by_round = [a / b for a, b in zip(rounds["ferrax"], rounds["jax"])]
        r["ratio_min"], r["ratio_max"] = min(by_round), max(by_round)
    if progress is not None:
        progress(f"{r['case']:36s} " + "  ".join(f"{k} {v['median_s'] * 1e3:.3f} ms" for k, v in r.items() if isinstance(v, dict)))
    return r


def sharding_table(rows: list[dict[str, Any]]) -> str:
    """The section's table (ad_bench's layout)."""
    return comparison_table(rows, "us", 3)


if __name__ == "__main__":
    # The same as `python bench/run.py --section sharding` (results and header included).
    import pathlib
    import sys

    from run import section_sharding

    section_sharding(pathlib.Path(__file__).resolve().parent / "results", 1.0, "--no-jax" not in sys.argv)
