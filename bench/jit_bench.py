"""The jit rows of BENCH.md, ferrax against JAX in one run: lowering to StableHLO text
(after tracing), XLA compilation, steady-state compiled run time, and dispatch overhead.

Caches are defeated as BENCH.md asks: a fresh function object (so a fresh trace) per
repetition. Timed regions run with the garbage collector off; medians and spreads of
several repetitions, the systems alternating so they see the same machine noise.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from trace_bench import PROGRAMS  # type: ignore[import-not-found]


def rnn_unrolled(fnp: Any, steps: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """carry h: f32[128], xs: f32[steps,128], W: f32[128,128]; `h = tanh(W @ h + x_t)`
    unrolled in Python (the scan-free rnn); returns `sum(h)`."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((128, 128)) / 16).astype(np.float32)
    xs = rng.standard_normal((steps, 128)).astype(np.float32)

    def f(w: Any, xs: Any, h: Any) -> Any:
        for t in range(steps):
            h = fnp.tanh(w @ h + xs[t])
        return fnp.sum(h)

    return f, (w, xs, np.zeros(128, np.float32))


def _programs() -> dict[str, Callable[[Any, int], tuple[Callable[..., Any], tuple[Any, ...]]]]:
    progs = dict(PROGRAMS)
    progs["rnn"] = rnn_unrolled
    return progs


class _Sys:
    def __init__(self, name: str, fnp: Any, jit: Callable[..., Any], lower_text: Callable[[Any, tuple[Any, ...]], Callable[[], str]], ready: Callable[[Any], Any], put: Callable[[Any], Any]) -> None:
        self.name = name
        self.fnp = fnp
        self.jit = jit
        self.lower_text = lower_text  # (jitted, args) -> thunk doing only the lowering
        self.ready = ready
        self.put = put


def _ferrax() -> _Sys:
    import ferrax
    import ferrax.numpy as fnp

    def lower_text(jf: Any, args: tuple[Any, ...]) -> Callable[[], str]:
        lowered = jf.lower(*args)  # traces (not timed)
        return lowered.as_text  # type: ignore[no-any-return]

    def put(x: Any) -> Any:
        return ferrax.tree_util.tree_map(ferrax.device_put, x)

    return _Sys("ferrax", fnp, ferrax.jit, lower_text, lambda y: y.block_until_ready(), put)


def _jax() -> _Sys | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_platforms", "cpu")

    def lower_text(jf: Any, args: tuple[Any, ...]) -> Callable[[], str]:
        traced = jf.trace(*args)  # traces (not timed)
        return lambda: traced.lower().as_text()  # type: ignore[no-any-return]

    return _Sys("jax", jnp, jax.jit, lower_text, lambda y: y.block_until_ready(), lambda x: jax.tree_util.tree_map(jnp.asarray, x))


def _timed(thunk: Callable[[], Any]) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        thunk()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def _summary(times: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "reps": len(times)}


def _lower_rep(s: _Sys, prog: str, size: int) -> float:
    f, args = _programs()[prog](s.fnp, size)
    return _timed(s.lower_text(s.jit(f), args))


def _compile_rep(s: _Sys, prog: str, size: int) -> float:
    f, args = _programs()[prog](s.fnp, size)
    lowered = s.jit(f).lower(*args)
    return _timed(lowered.compile)


def _run_reps(s: _Sys, prog: str, size: int, reps: int) -> list[float]:
    f, args = _programs()[prog](s.fnp, size)
    jf = s.jit(f)
    dev_args = s.put(args)
    s.ready(jf(*dev_args))  # compile and warm up
    inner = 20
    out = []
    for _ in range(reps):
        def loop() -> None:
            for _ in range(inner):
                y = jf(*dev_args)
            s.ready(y)

        out.append(_timed(loop) / inner)
    return out


def dispatch_case(s: _Sys, case: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A jitted function and its device arguments for a dispatch row: ``"one"``, ``x +
    1.0`` on one f32[3]; ``"pytree"``, ten f32[3] in a dict, one added to each (a dict
    of ten back)."""
    if case == "one":
        return s.jit(lambda x: x + 1.0), (s.put(np.ones(3, np.float32)),)
    tree = {f"w{i}": np.full(3, i, np.float32) for i in range(10)}
    return s.jit(lambda d: {k: v + 1.0 for k, v in d.items()}), (s.put(tree),)


def _dispatch(s: _Sys, case: str, calls: int, reps: int) -> list[float]:
    jf, args = dispatch_case(s, case)
    s.ready(one_leaf(jf(*args)))
    out = []
    for _ in range(reps):
        def loop() -> None:
            for _ in range(calls):
                jf(*args)

        out.append(_timed(loop) / calls)
    return out


def one_leaf(out: Any) -> Any:
    """One array of a call's output (to wait on)."""
    return next(iter(out.values())) if isinstance(out, dict) else out


def run_jit(quick: bool = False, use_jax: bool = True) -> list[dict[str, Any]]:
    """Runs every jit row; returns JSON-able rows with both systems' figures (ferrax's
    alone when JAX is not installed or ``use_jax`` is false)."""
    systems = _systems(use_jax)
    rows: list[dict[str, Any]] = []

    def row(metric: str, case: str, per: dict[str, list[float]]) -> None:
        rows.append(_row(metric, case, per))

    for prog, size, reps in [("chain", 10_000, 3 if quick else 5), ("mlp", 64, 5)]:
        per: dict[str, list[float]] = {s.name: [] for s in systems}
        for _ in range(reps):
            for s in systems:
                per[s.name].append(_lower_rep(s, prog, size))
        row("lower", f"{prog}({size})", per)

    for prog, size, reps in [("chain", 100, 3), ("mlp", 8, 3)]:
        per = {s.name: [] for s in systems}
        for _ in range(reps):
            for s in systems:
                per[s.name].append(_compile_rep(s, prog, size))
        row("compile", f"{prog}({size})", per)

    for prog, size in [("chain", 1_000), ("mlp", 8), ("mlp", 64), ("rnn", 100)]:
        per = {s.name: [] for s in systems}
        for _ in range(3):
            for s in systems:
                per[s.name].extend(_run_reps(s, prog, size, 3))
        row("run", f"{prog}({size})", per)

    rows += dispatch_rows(systems, quick)
    return rows


def _systems(use_jax: bool) -> list[_Sys]:
    peer = _jax() if use_jax else None
    return [s for s in (_ferrax(), peer) if s is not None]


def _row(metric: str, case: str, per: dict[str, list[float]]) -> dict[str, Any]:
    r: dict[str, Any] = {"metric": metric, "case": case}
    for name, ts in per.items():
        r[name] = _summary(ts)
    if "ferrax" in per and "jax" in per:
        r["ratio"] = r["ferrax"]["median_s"] / r["jax"]["median_s"]
    print(f"{metric:8s} {case:16s} " + "  ".join(f"{n} {v['median_s'] * 1e3:.4f} ms" for n, v in r.items() if isinstance(v, dict)) + (f"  ratio {r['ratio']:.3f}" if "ratio" in r else ""), flush=True)
    return r


def dispatch_rows(systems: list[_Sys], quick: bool = False) -> list[dict[str, Any]]:
    """The per-call time of a jitted call whose signature is compiled (dispatch),
    ferrax and JAX alternating, eleven loops of 10,000 calls each (a fresh jitted
    function each loop). A loop takes about 50 ms, so the machine's noise moves single
    loops by 10% and more: eleven make the median steadier than five did."""
    rows = []
    for case, label in [("one", "x + 1.0, f32[3]"), ("pytree", "10 args in a dict")]:
        per: dict[str, list[float]] = {s.name: [] for s in systems}
        for _ in range(11):
            for s in systems:
                per[s.name].extend(_dispatch(s, case, 10_000 if not quick else 2_000, 1))
        rows.append(_row("dispatch", label, per))
    return rows


def jit_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one line per (metric, case), both systems and the ratio."""
    lines = ["| metric | case | ferrax | JAX | ferrax / JAX |", "|---|---|---|---|---|"]

    def cell(r: dict[str, Any], name: str) -> str:
        v = r.get(name)
        if not isinstance(v, dict):
            return "n/a"
        scale, unit = (1e6, "us") if v["median_s"] < 1e-3 else ((1e3, "ms") if v["median_s"] < 1 else (1, "s"))
        return f"{v['median_s'] * scale:.1f} {unit} ({v['min_s'] * scale:.1f}-{v['max_s'] * scale:.1f})"

    for r in rows:
        ratio = f"{r['ratio']:.3f}" if "ratio" in r else "-"
        lines.append(f"| {r['metric']} | {r['case']} | {cell(r, 'ferrax')} | {cell(r, 'jax')} | {ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import pathlib
    import sys

    if "--dispatch" in sys.argv:  # the dispatch rows alone, printed
        print(jit_table(dispatch_rows(_systems(True), quick="--quick" in sys.argv)))
        sys.exit(0)
    rows = run_jit(quick="--quick" in sys.argv)
    out = pathlib.Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "jit.json").write_text(json.dumps(rows, indent=1) + "\n")
    table = jit_table(rows)
    (out / "jit.md").write_text(table + "\n")
    print(table)
