"""Issue 15's scaling figures: cost per equation against program size, ferrax and JAX.

The program is BENCH.md's chain(n) (x: f32[128]; n times ``x = sin(x) * 1.5 + x``;
``sum(x)``: 3n+1 equations), over a sweep of n. Metrics, each divided by the equations
of chain(n) itself (so the grad trace too is per equation of the program differentiated;
its own jaxpr has about 7n):

* ``trace``: ``make_jaxpr(f)(x)`` and ``grad_trace``: ``make_jaxpr(grad(f))(x)``, timed
  by bench/trace_bench.py's ``run_trace`` (a fresh function object every repetition, GC
  off in the timed region, the systems alternating repetition by repetition);
* ``lower``: the lowering to StableHLO text alone, after tracing (ferrax:
  ``jit(f).lower(x)`` untimed, then ``.as_text()`` timed; JAX:
  ``jax.jit(f).trace(x)`` untimed, then ``.lower().as_text()`` timed), by
  bench/jit_bench.py's ``_lower_rep``;
* the Rust passes ``parse``, ``typecheck``, ``dce`` and ``toposort`` (ferrax only, JAX
  has no counterpart run on its own), from the release binary ``ferrax-bench-ir``
  (bench/run.py's ``run_ir``) at the same equation counts, 3n+1.

JAX's sizes stop at ``jax_max_n`` (10^4 by default: JAX's grad trace of chain(10^4)
already takes 4-7 s a repetition on this 2-core machine, 10^5 would take minutes);
ferrax's Python rows stop at ``ferrax_max_n`` (10^5) and the Rust passes go to 10^6.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import jit_bench
import trace_bench

# chain(n) sizes of the Python-side rows, with repetitions (scaled by reps_scale, min 3).
PY_SIZES: list[tuple[int, int]] = [(100, 11), (1_000, 9), (10_000, 5), (100_000, 5)]
# chain(n) sizes of the Rust passes (the binary chooses its repetitions: 11, or 5 at 10^6
# equations and more).
RUST_SIZES: list[int] = [100, 1_000, 10_000, 100_000, 1_000_000]
RUST_OPS: list[str] = ["parse", "typecheck", "dce", "toposort"]
# The metrics in the order they are plotted and tabled.
METRICS: list[str] = ["trace", "grad_trace", "lower", *RUST_OPS]


def chain_eqns(n: int) -> int:
    """Equations of chain(n): sin, mul, add per step, then the sum."""
    return 3 * n + 1


def _row(metric: str, system: str, n: int, eqns: int, med: float, lo: float, hi: float, runs: int) -> dict[str, Any]:
    """One JSON row: seconds (median, min, max) and the same per equation of chain(n)."""
    return {
        "metric": metric,
        "system": system,
        "n": n,
        "eqns": eqns,
        "runs": runs,
        "median_s": med,
        "min_s": lo,
        "max_s": hi,
        "us_per_eqn": med / eqns * 1e6,
        "us_per_eqn_min": lo / eqns * 1e6,
        "us_per_eqn_max": hi / eqns * 1e6,
    }


def run_python_rows(
    use_jax: bool = True,
    reps_scale: float = 1.0,
    jax_max_n: int = 10_000,
    ferrax_max_n: int = 100_000,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """trace, grad_trace and lower rows of every size for ferrax (and JAX up to
    ``jax_max_n``)."""
    ferrax_trace = trace_bench.ferrax_system()
    jax_trace = trace_bench.jax_system() if use_jax else None
    ferrax_lower = jit_bench._ferrax()
    jax_lower = jit_bench._jax() if jax_trace is not None else None
    rows: list[dict[str, Any]] = []
    for n, base_reps in PY_SIZES:
        if n > ferrax_max_n:
            continue
        reps = max(3, round(base_reps * reps_scale))
        with_jax = jax_trace is not None and n <= jax_max_n
        trace_systems = [ferrax_trace, *([jax_trace] if with_jax and jax_trace else [])]
        lower_systems = [ferrax_lower, *([jax_lower] if with_jax and jax_lower else [])]
        # Trace and grad trace: trace_bench's own loop (alternating, fresh functions).
        traced = trace_bench.run_trace(trace_systems, cases=[("chain", n, reps), ("grad_chain", n, reps)])
        program_eqns: dict[str, int] = {}
        for case in traced:
            metric = "grad_trace" if case["program"] == "grad_chain" else "trace"
            for s in trace_systems:
                summary = case[s.name]
                if "error" in summary:
                    if progress is not None:
                        progress(f"{metric} {s.name} chain({n}): {summary['error']}")
                    continue
                if metric == "trace":
                    program_eqns[s.name] = summary["eqns"]
                eqns = program_eqns.get(s.name, chain_eqns(n))
                row = _row(metric, s.name, n, eqns, summary["median_s"], summary["min_s"], summary["max_s"], summary["runs"])
                row["out_eqns"] = summary["eqns"]  # the traced jaxpr's own (grad: ~7n)
                rows.append(row)
                _report(progress, row)
        # Lowering alone, after tracing: jit_bench's repetition, systems alternating.
        lower_times: dict[str, list[float]] = {ls.name: [] for ls in lower_systems}
        for rep in range(reps):
            order = lower_systems if rep % 2 == 0 else lower_systems[::-1]
            for ls in order:
                lower_times[ls.name].append(jit_bench._lower_rep(ls, "chain", n))
        for name, times in lower_times.items():
            eqns = program_eqns.get(name, chain_eqns(n))
            row = _row("lower", name, n, eqns, statistics.median(times), min(times), max(times), len(times))
            rows.append(row)
            _report(progress, row)
    return rows


def rust_rows(ir_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Rust passes' rows from ``ferrax-bench-ir``'s JSON lines (run at 3n+1 equations)."""
    rows = []
    for r in ir_rows:
        if r["op"] not in RUST_OPS:
            continue
        eqns = int(r["eqns"])
        # The binary reports ns per equation (median, min, max) of its 11 runs (5 at 10^6
        # equations and more); its median in seconds is rounded to 1 us, so use the former.
        per = eqns * 1e-9
        reps = 5 if eqns >= 1_000_000 else 11
        rows.append(
            _row(r["op"], "ferrax", (eqns - 1) // 3, eqns, r["ns_per_eqn"] * per, r["ns_per_eqn_min"] * per, r["ns_per_eqn_max"] * per, reps)
        )
    return rows


def _report(progress: Callable[[str], None] | None, row: dict[str, Any]) -> None:
    if progress is not None:
        progress(
            f"{row['metric']:10s} {row['system']:6s} chain({row['n']}) {row['eqns']:>9,} eqns: "
            f"{row['median_s'] * 1e3:10.2f} ms, {row['us_per_eqn']:8.3f} us/eqn"
        )


def _size_label(n: int) -> str:
    exp = len(str(n)) - 1
    return f"10^{exp}" if n == 10**exp else str(n)


def scaling_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one line per (metric, system), one column per chain(n): microseconds per
    equation of chain(n), median (min-max); then ferrax over JAX where both ran."""
    sizes = sorted({r["n"] for r in rows})
    head = "| metric | system | " + " | ".join(f"chain({_size_label(n)}), {chain_eqns(n):,} eqns" for n in sizes) + " |"
    lines = [head, "|---|---|" + "---|" * len(sizes)]
    index = {(r["metric"], r["system"], r["n"]): r for r in rows}
    systems = [s for s in ("ferrax", "jax") if any(r["system"] == s for r in rows)]
    for metric in METRICS:
        for system in systems:
            if not any(k[0] == metric and k[1] == system for k in index):
                continue
            cells = []
            for n in sizes:
                r = index.get((metric, system, n))
                cells.append(
                    f"{_us(r['us_per_eqn'])} ({_us(r['us_per_eqn_min'])}-{_us(r['us_per_eqn_max'])})" if r else "-"
                )
            label = "JAX" if system == "jax" else system
            lines.append(f"| {metric.replace('_', ' ')} | {label} | " + " | ".join(cells) + " |")
        if "jax" in systems and any(k[0] == metric and k[1] == "jax" for k in index):
            cells = []
            for n in sizes:
                f, j = index.get((metric, "ferrax", n)), index.get((metric, "jax", n))
                cells.append(f"**{f['median_s'] / j['median_s']:.3f}**" if f and j else "-")
            lines.append(f"| {metric.replace('_', ' ')} | ferrax / JAX | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _us(x: float) -> str:
    """Microseconds with three significant digits (ns below 1 us)."""
    if x < 1.0:
        return f"{x * 1e3:.0f} ns"
    return f"{x:.3g} us"
