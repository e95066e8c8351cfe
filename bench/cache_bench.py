"""Cold against warm start with the persistent compilation cache (issue 15, item 4),
ferrax against JAX in one run.

Each measurement is a fresh process (``python bench/cache_bench.py --worker SYSTEM
PROGRAM DIR``) that imports the system, points ``jax_compilation_cache_dir`` at ``DIR``
(with ``jax_persistent_cache_min_compile_time_secs`` 0 so that every program is stored,
for both systems) and times the first call of a jitted program from nothing to its
result on the host: trace, lower, compile or load, run. Programs:

- ``chain``: trace_bench's chain(10^4) (``x = sin(x) * 1.5 + x``, 10^4 times, then
  ``sum``), whose XLA compilation dominates a cold start;
- ``mnist_mlp``: one training step of examples/mnist_mlp.py (value_and_grad of the
  784-512-512-10 MLP's loss on a minibatch gathered inside the step, then Adam), ferrax's
  example module against the same program in JAX (bench/examples_bench.py).

Cold: an empty directory (the process compiles and writes the entry). Warm: the same
directory again (the process loads the entry). Reported: the median over the runs, with
the range, and the warm/cold ratio; the warm processes also report whether they loaded
(ferrax's cache statistics, JAX's entry count unchanged).
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAMS = ("chain", "mnist_mlp")
COLD_RUNS = 2
WARM_RUNS = 3


def _mlp_inputs() -> tuple[Any, tuple[Any, ...]]:
    rng = np.random.default_rng(0)
    sizes = (784, 512, 512, 10)
    params = [
        {"w": (rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32), "b": np.zeros(n, np.float32)}
        for m, n in zip(sizes[:-1], sizes[1:])
    ]
    x = rng.normal(size=(4096, 784)).astype(np.float32)
    labels = rng.integers(0, 10, size=4096).astype(np.int32)
    idx = rng.permutation(4096)[:128].astype(np.int32)
    return params, (x, labels, idx)


def worker(system: str, program: str, directory: str) -> dict[str, Any]:
    """One process's first call, timed (runs in the worker process)."""
    sys.path.insert(0, str(ROOT / "bench"))
    if system == "ferrax":
        import ferrax as lib
        import ferrax.numpy as np_mod
        from ferrax import _compilation_cache
    else:
        import jax as lib  # type: ignore[no-redef]
        import jax.numpy as np_mod  # type: ignore[no-redef]

        lib.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    lib.config.update("jax_compilation_cache_dir", directory)
    lib.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if program == "chain":
        import trace_bench

        f, args = trace_bench.chain(np_mod, 10_000)
        step = lib.jit(f)
        call = lambda: step(*args)  # noqa: E731
    else:
        params, (x, labels, idx) = _mlp_inputs()
        if system == "ferrax":
            import examples_bench

            ex = examples_bench.load_example("mnist_mlp")
            state = ex.opt_init(params)
            step = ex.train_step
        else:
            import examples_bench

            prog = examples_bench.jax_programs()["mnist_mlp"]
            state = prog["opt_init"](params)
            step = prog["train_step"]
        call = lambda: step(0, state, x, labels, idx)  # noqa: E731
    start = time.perf_counter()
    out = call()
    lib.tree_util.tree_map(np.asarray, out)
    seconds = time.perf_counter() - start
    loaded = None
    if system == "ferrax":
        loaded = _compilation_cache.stats["hits"] > 0 and _compilation_cache.stats["misses"] == 0
    return {"seconds": seconds, "loaded": loaded}


def _run(system: str, program: str, directory: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", system, program, directory],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _entries(directory: str) -> int:
    return sum(1 for _, _, files in os.walk(directory) for f in files if not f.startswith("."))


def measure(systems: tuple[str, ...] = ("ferrax", "jax")) -> list[dict[str, Any]]:
    """Cold and warm first calls of each program on each system, in one run."""
    rows = []
    for program in PROGRAMS:
        for system in systems:
            cold, warm, loaded = [], [], []
            for _ in range(COLD_RUNS):
                with tempfile.TemporaryDirectory() as d:
                    cold.append(_run(system, program, d)["seconds"])
            with tempfile.TemporaryDirectory() as d:
                _run(system, program, d)  # fills the cache
                n = _entries(d)
                for _ in range(WARM_RUNS):
                    r = _run(system, program, d)
                    warm.append(r["seconds"])
                    # Loaded: ferrax says so; JAX wrote nothing new.
                    loaded.append(r["loaded"] if r["loaded"] is not None else _entries(d) == n)
            rows.append({
                "program": program, "system": system,
                "cold_s": statistics.median(cold), "cold_range": [min(cold), max(cold)],
                "warm_s": statistics.median(warm), "warm_range": [min(warm), max(warm)],
                "warm_loaded": all(loaded),
            })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    by = {(r["program"], r["system"]): r for r in rows}
    lines = [
        "| program | ferrax cold | ferrax warm | warm/cold | JAX cold | JAX warm | ferrax warm / JAX warm |",
        "|---|---|---|---|---|---|---|",
    ]

    def cell(r: dict[str, Any], k: str) -> str:
        lo, hi = r[f"{k}_range"]
        return f"{r[f'{k}_s']:.2f} s ({lo:.2f}-{hi:.2f})"

    for program in PROGRAMS:
        f = by.get((program, "ferrax"))
        j = by.get((program, "jax"))
        if f is None:
            continue
        ratio = f"{f['warm_s'] / f['cold_s']:.2f}x"
        jc = cell(j, "cold") if j else "-"
        jw = cell(j, "warm") if j else "-"
        vs = f"{f['warm_s'] / j['warm_s']:.2f}x" if j else "-"
        lines.append(f"| {program} | {cell(f, 'cold')} | {cell(f, 'warm')} | {ratio} | {jc} | {jw} | {vs} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], sys.argv[3], sys.argv[4])))
    else:
        rows = measure()
        print(table(rows))
        print(json.dumps(rows))
