"""The `trace` rows of BENCH.md: `make_jaxpr(f)(x)` in ferrax and in JAX, side by side.

Programs (float32): chain(n), mlp(depth), wide(k). Each repetition builds a fresh
function object from a factory (JAX caches traces by function identity), runs with the
garbage collector off (as `timeit` does) after a collection, and the two systems
alternate repetition by repetition so that both see the same machine noise.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# (program, size, repetitions). Sizes follow BENCH.md.
CASES: list[tuple[str, int, int]] = [
    ("chain", 100, 21),
    ("chain", 1_000, 11),
    ("chain", 10_000, 5),
    ("mlp", 8, 11),
    ("mlp", 64, 7),
    ("wide", 1_000, 11),
    ("wide", 10_000, 5),
    ("grad_chain", 1_000, 7),
    ("grad_chain", 10_000, 3),
    ("grad_mlp", 8, 7),
    ("grad_mlp", 64, 5),
]


# ---------------------------------------------------------------------------- programs
# Each factory takes the numpy module (ferrax.numpy or jax.numpy) and a size and returns
# (a fresh function, its arguments). The functions are written once for both systems.


def chain(fnp: Any, n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """x: f32[128]; n times `x = sin(x) * 1.5 + x`; returns `sum(x)`."""

    def f(x: Any) -> Any:
        for _ in range(n):
            x = fnp.sin(x) * 1.5 + x
        return fnp.sum(x)

    return f, (np.zeros(128, np.float32),)


_MLP_PARAMS: dict[int, list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]] = {}


def mlp(fnp: Any, depth: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """depth pairs (W: f32[256,256], b: f32[256]); x: f32[64,256];
    `h = tanh(h @ W + b)` per layer; returns `sum(h * h)`."""
    if depth not in _MLP_PARAMS:
        rng = np.random.default_rng(0)
        _MLP_PARAMS[depth] = [
            (
                rng.standard_normal((256, 256), dtype=np.float32),
                rng.standard_normal(256, dtype=np.float32),
            )
            for _ in range(depth)
        ]

    def f(params: Any, x: Any) -> Any:
        h = x
        for w, b in params:
            h = fnp.tanh(h @ w + b)
        return fnp.sum(h * h)

    return f, (_MLP_PARAMS[depth], np.zeros((64, 256), np.float32))


def wide(fnp: Any, k: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """x: f32[128]; k independent `sin(x * c_i)` terms (c_i Python floats), summed."""
    cs = [1.0 + i / k for i in range(k)]

    def f(x: Any) -> Any:
        acc = fnp.sin(x * cs[0])
        for c in cs[1:]:
            acc = acc + fnp.sin(x * c)
        return acc

    return f, (np.zeros(128, np.float32),)


PROGRAMS: dict[str, Callable[[Any, int], tuple[Callable[..., Any], tuple[Any, ...]]]] = {
    "chain": chain,
    "mlp": mlp,
    "wide": wide,
}


# ------------------------------------------------------------------------------ systems


@dataclass
class System:
    """How to trace with one system: its numpy module, make_jaxpr, and an equation count."""

    name: str
    numpy: Any
    make_jaxpr: Callable[..., Any]
    count_eqns: Callable[[Any], int]
    grad: Callable[..., Any]


def ferrax_system() -> System:
    import ferrax
    import ferrax.numpy as fnp

    return System("ferrax", fnp, ferrax.make_jaxpr, lambda cj: len(cj.jaxpr.eqns), ferrax.grad)


def jax_system() -> System | None:
    """JAX on CPU, or None when it is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_platforms", "cpu")
    return System("jax", jnp, jax.make_jaxpr, lambda cj: len(cj.jaxpr.eqns), jax.grad)


# ------------------------------------------------------------------------------- timing


@dataclass
class Timing:
    """Seconds per repetition of one system on one case, or the error that stopped it."""

    times: list[float] = field(default_factory=list)
    eqns: int | None = None
    error: str | None = None

    def summary(self) -> dict[str, Any]:
        if self.error is not None or not self.times:
            return {"error": self.error or "no runs"}
        med = statistics.median(self.times)
        out: dict[str, Any] = {
            "runs": len(self.times),
            "median_s": med,
            "min_s": min(self.times),
            "max_s": max(self.times),
            "eqns": self.eqns,
        }
        if self.eqns:
            out["us_per_eqn"] = med / self.eqns * 1e6
        return out


def _time_once(system: System, program: str, size: int) -> tuple[float, Any]:
    # A fresh function object (and fresh jaxpr) every repetition defeats trace caches.
    # `grad_P`: the gradient of program P (with respect to its first argument), traced.
    differentiate = program.startswith("grad_")
    f, args = PROGRAMS[program.removeprefix("grad_")](system.numpy, size)
    if differentiate:
        f = system.grad(f)
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        closed = system.make_jaxpr(f)(*args)
        t1 = time.perf_counter()
    finally:
        gc.enable()
    return t1 - t0, closed


def _run_rep(system: System, program: str, size: int, timing: Timing) -> None:
    if timing.error is not None:
        return
    try:
        dt, closed = _time_once(system, program, size)
    except Exception as e:  # noqa: BLE001 - a failing row is reported, not fatal
        timing.error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
        return
    timing.times.append(dt)
    if timing.eqns is None:
        timing.eqns = system.count_eqns(closed)
    del closed


def run_trace(
    systems: list[System],
    cases: list[tuple[str, int, int]] = CASES,
    rep_scale: float = 1.0,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Times every case on every system, alternating systems repetition by repetition."""
    # Warm up each system and program once (imports, first-call initialization).
    for system in systems:
        for program in [*PROGRAMS, *(f"grad_{p}" for p in PROGRAMS)]:
            try:
                _time_once(system, program, 4)
            except Exception:  # noqa: BLE001 - reported when the case itself runs
                pass
    rows: list[dict[str, Any]] = []
    for program, size, reps in cases:
        reps = max(3, round(reps * rep_scale))
        timings = {s.name: Timing() for s in systems}
        for _ in range(reps):
            for system in systems:
                _run_rep(system, program, size, timings[system.name])
        row: dict[str, Any] = {"program": program, "size": size}
        for name, t in timings.items():
            row[name] = t.summary()
        f, j = timings.get("ferrax"), timings.get("jax")
        if f and j and f.times and j.times and f.error is None and j.error is None:
            row["ratio"] = statistics.median(f.times) / statistics.median(j.times)
            # Paired ratios (same repetition index) give the spread of the ratio.
            pairs = [a / b for a, b in zip(f.times, j.times)]
            row["ratio_min"] = min(pairs)
            row["ratio_max"] = max(pairs)
        rows.append(row)
        if progress is not None:
            progress(_row_line(row))
    return rows


# ------------------------------------------------------------------------------- tables


def _case_name(program: str, size: int) -> str:
    if program.startswith("grad_"):
        return "grad " + _case_name(program.removeprefix("grad_"), size)
    if program == "mlp":
        return f"mlp(depth {size})"
    exp = len(str(size)) - 1
    return f"{program}(10^{exp})" if size == 10**exp else f"{program}({size})"


def _fmt_time(s: float) -> str:
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def _cell(summary: dict[str, Any]) -> str:
    if "error" in summary:
        return f"error ({summary['error'][:60]})"
    text = f"{_fmt_time(summary['median_s'])} ({_fmt_time(summary['min_s'])}-{_fmt_time(summary['max_s'])})"
    if "us_per_eqn" in summary:
        text += f", {summary['us_per_eqn']:.1f} us/eqn"
    return text


def _row_line(row: dict[str, Any]) -> str:
    parts = [_case_name(row["program"], row["size"])]
    for name in ("ferrax", "jax"):
        if name in row:
            parts.append(f"{name} {_cell(row[name])}")
    if "ratio" in row:
        parts.append(f"ratio {row['ratio']:.3f}")
    return "; ".join(parts)


def trace_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one row per case; ferrax, JAX (median, min-max, per equation), ratio."""
    has_jax = any("jax" in r for r in rows)
    head = "| program | eqns | ferrax |"
    sep = "|---|---|---|"
    if has_jax:
        head += " JAX | ferrax / JAX |"
        sep += "---|---|"
    lines = [head, sep]
    for r in rows:
        eqns = r["ferrax"].get("eqns")
        jeqns = r.get("jax", {}).get("eqns")
        eq = f"{eqns:,}" if eqns else "-"
        if jeqns and eqns and jeqns != eqns:
            eq += f" (JAX {jeqns:,})"
        line = f"| {_case_name(r['program'], r['size'])} | {eq} | {_cell(r['ferrax'])} |"
        if has_jax:
            ratio = (
                f"**{r['ratio']:.3f}** ({r['ratio_min']:.3f}-{r['ratio_max']:.3f})"
                if "ratio" in r
                else "n/a"
            )
            line += f" {_cell(r['jax'])} | {ratio} |"
        lines.append(line)
    return "\n".join(lines)
