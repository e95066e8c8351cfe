"""The vmap rows of BENCH.md (issue 9), ferrax against JAX in one run.

Rows, and exactly what is timed on each side:

* ``trace`` of ``vmap(chain(n))``, batch 8: ``make_jaxpr(vmap(f))(xs)`` with ``f`` the
  chain of trace_bench.py (``x = sin(x) * 1.5 + x`` n times, then ``sum``) and ``xs``
  f32[8,128] (the vmapped argument has a leading axis of 8), n = 10^3 and 10^4; a fresh
  function object every repetition (JAX caches traces by function identity).
* per-example gradients of mlp(8): ``jit(vmap(grad(loss), in_axes=(None, 0, 0)))`` with
  trace_bench's mlp (8 layers of W: f32[256,256], b: f32[256], ``h = tanh(h @ W + b)``)
  and ``loss(params, x, y) = sum((mlp(params, x) - y) ** 2)`` for one example (x, y:
  f32[256]); the parameters are shared (in_axes None), a batch of 64 examples is mapped
  (xs, ys: f32[64,256]). Three figures:
  - ``trace``: ``make_jaxpr`` of the vmapped gradient (fresh function object every run);
  - ``compile``: XLA compile of the lowered module (tracing and lowering not timed);
  - ``run``: steady-state time per call of the compiled function on device-resident
    arguments (20 calls per timing, after a warm-up call).

Timed regions run with the garbage collector off (after a collection); the systems
alternate repetition by repetition so both see the same machine noise. JAX is optional:
without it the rows carry ferrax's figures alone.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ad_bench import comparison_table
from trace_bench import chain, mlp

BATCH = 8
CHAIN_SIZES = (1_000, 10_000)
MLP_DEPTH = 8
EXAMPLES = 64

# Targets of issue 9 (ferrax's median over JAX's); None: reported, no target.
TARGETS: dict[tuple[str, str], float | None] = {
    ("trace", "vmap chain"): 0.1,
    ("trace", "per-example grads"): None,
    ("compile", "per-example grads"): 1.2,
    ("run", "per-example grads"): 1.05,
}


class _Sys:
    """One system's modules and transformations."""

    def __init__(self, name: str, fnp: Any, make_jaxpr: Callable[..., Any], vmap: Callable[..., Any], grad: Callable[..., Any], jit: Callable[..., Any], tree_util: Any, device_put: Callable[[Any], Any]) -> None:
        self.name = name
        self.fnp = fnp
        self.make_jaxpr = make_jaxpr
        self.vmap = vmap
        self.grad = grad
        self.jit = jit
        self.leaves: Callable[[Any], list[Any]] = tree_util.tree_leaves
        self.put: Callable[[Any], Any] = lambda x: tree_util.tree_map(device_put, x)

    def vmap_chain(self, n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """A fresh ``vmap(chain(n))`` and its batched argument, f32[8,128]."""
        f, _ = chain(self.fnp, n)
        return self.vmap(f), (np.zeros((BATCH, 128), np.float32),)

    def per_example_grads(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """A fresh ``vmap(grad(loss), in_axes=(None, 0, 0))`` of mlp(8) and its
        arguments (shared parameters, 64 examples)."""
        params = mlp(self.fnp, MLP_DEPTH)[1][0]
        fnp = self.fnp

        def loss(params: Any, x: Any, y: Any) -> Any:
            h = x
            for w, b in params:
                h = fnp.tanh(h @ w + b)
            return fnp.sum((h - y) ** 2)

        rng = np.random.default_rng(1)
        xs = rng.standard_normal((EXAMPLES, 256), dtype=np.float32)
        ys = rng.standard_normal((EXAMPLES, 256), dtype=np.float32)
        return self.vmap(self.grad(loss), in_axes=(None, 0, 0)), (params, xs, ys)


def _ferrax() -> _Sys:
    import ferrax
    import ferrax.numpy as fnp

    return _Sys("ferrax", fnp, ferrax.make_jaxpr, ferrax.vmap, ferrax.grad, ferrax.jit, ferrax.tree_util, ferrax.device_put)


def _jax() -> _Sys | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_platforms", "cpu")  # type: ignore[no-untyped-call]
    return _Sys("jax", jnp, jax.make_jaxpr, jax.vmap, jax.grad, jax.jit, jax.tree_util, jax.device_put)


def _timed(thunk: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = thunk()
        dt = time.perf_counter() - t0
    finally:
        gc.enable()
    return dt, out


def _trace_rep(s: _Sys, make: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]) -> tuple[float, int]:
    f, args = make()
    dt, closed = _timed(lambda: s.make_jaxpr(f)(*args))
    return dt, len(closed.jaxpr.eqns)


def _compile_rep(s: _Sys) -> float:
    f, args = s.per_example_grads()
    lowered = s.jit(f).lower(*args)  # traces and lowers (not timed)
    return _timed(lowered.compile)[0]


def _run_reps(s: _Sys, reps: int, inner: int = 20) -> list[float]:
    f, args = s.per_example_grads()
    jf = s.jit(f)
    dev_args = s.put(args)

    def ready(y: Any) -> None:
        for leaf in s.leaves(y):
            leaf.block_until_ready()

    ready(jf(*dev_args))  # compile and warm up
    out = []
    for _ in range(reps):
        def loop() -> None:
            for _ in range(inner):
                y = jf(*dev_args)
            ready(y)

        out.append(_timed(loop)[0] / inner)
    return out


def _check_agree(systems: list[_Sys]) -> None:
    """Both systems compute the same per-example gradients (a benchmark of a wrong
    program would mean nothing)."""
    if len(systems) < 2:
        return
    outs = []
    for s in systems:
        f, args = s.per_example_grads()
        outs.append([np.asarray(x) for x in s.leaves(s.jit(f)(*args))])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3)


def run_vmap(use_jax: bool = True, reps_scale: float = 1.0, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Runs every vmap row; returns JSON-able rows with both systems' figures (ferrax's
    alone when JAX is not installed or ``use_jax`` is false)."""
    peer = _jax() if use_jax else None
    systems = [s for s in (_ferrax(), peer) if s is not None]
    _check_agree(systems)
    rows: list[dict[str, Any]] = []

    def reps_of(n: int) -> int:
        return max(3, round(n * reps_scale))

    def row(metric: str, kind: str, case: str, per: dict[str, list[float]], eqns: dict[str, int] | None = None) -> None:
        r: dict[str, Any] = {"metric": metric, "case": case, "target": TARGETS[(metric, kind)]}
        for name, ts in per.items():
            r[name] = {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts), "reps": len(ts)}
            if eqns is not None:
                r[name]["eqns"] = eqns[name]
        if "ferrax" in per and "jax" in per:
            r["ratio"] = r["ferrax"]["median_s"] / r["jax"]["median_s"]
            pairs = [a / b for a, b in zip(per["ferrax"], per["jax"])]
            r["ratio_min"], r["ratio_max"] = min(pairs), max(pairs)
        rows.append(r)
        if progress is not None:
            progress(
                f"{metric:8s} {case:28s} "
                + "  ".join(f"{n} {v['median_s'] * 1e3:.3f} ms" for n, v in r.items() if isinstance(v, dict))
                + (f"  ratio {r['ratio']:.4f}" if "ratio" in r else "")
            )

    # Warm-up (imports, first-call initialization) of every program, not timed.
    for s in systems:
        _trace_rep(s, lambda: s.vmap_chain(4))
        _trace_rep(s, s.per_example_grads)

    for n, reps in zip(CHAIN_SIZES, (11, 5)):
        per: dict[str, list[float]] = {s.name: [] for s in systems}
        counts: dict[str, int] = {}
        for _ in range(reps_of(reps)):
            for s in systems:
                dt, counts[s.name] = _trace_rep(s, lambda: s.vmap_chain(n))
                per[s.name].append(dt)
        exp = len(str(n)) - 1
        row("trace", "vmap chain", f"vmap chain(10^{exp}), batch {BATCH}", per, counts)

    case = f"per-example grads mlp({MLP_DEPTH}), {EXAMPLES} examples"
    per = {s.name: [] for s in systems}
    counts = {}
    for _ in range(reps_of(11)):
        for s in systems:
            dt, counts[s.name] = _trace_rep(s, s.per_example_grads)
            per[s.name].append(dt)
    row("trace", "per-example grads", case, per, counts)

    per = {s.name: [] for s in systems}
    for _ in range(reps_of(5)):
        for s in systems:
            per[s.name].append(_compile_rep(s))
    row("compile", "per-example grads", case, per)

    per = {s.name: [] for s in systems}
    for _ in range(reps_of(7)):
        for s in systems:
            per[s.name].extend(_run_reps(s, 3))
    row("run", "per-example grads", case, per)
    return rows


def vmap_table(rows: list[dict[str, Any]]) -> str:
    """The vmap section's table (ad_bench's layout, microseconds per equation)."""
    return comparison_table(rows, "us", 3)


if __name__ == "__main__":
    # The same as `python bench/run.py --section vmap` (results and header included).
    import pathlib
    import sys

    from run import section_vmap

    section_vmap(pathlib.Path(__file__).resolve().parent / "results", 1.0, "--no-jax" not in sys.argv)
