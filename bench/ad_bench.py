"""The autodiff rows of BENCH.md (issue 8), ferrax against JAX in one run.

Rows, and exactly what is timed on each side:

* ``partial_eval`` of chain(10^4)'s JVP jaxpr (``make_jaxpr(lambda x, t: jvp(f, (x,),
  (t,)))``, 7x10^4 equations) with the tangent input unknown and nothing instantiated.
  ferrax: the Rust pass alone, ``ferrax._ir.partial_eval(jaxpr, [False, True], [False,
  False])`` (known and unknown jaxprs built). JAX: ``partial_eval_jaxpr_nounits(closed,
  [False, True], instantiate=False)`` on JAX's own JVP jaxpr of the same program, each
  repetition on a fresh ``ClosedJaxpr`` object (the pass is cached by jaxpr identity).
  Tracing the JVP jaxpr is done once per system and is not timed.
* ``transpose`` of the linear jaxpr of chain(10^4): the unknown jaxpr of the row above
  (10^4 residuals, then the tangent; about 3x10^4 equations), linear in the tangent.
  Both sides produce a jaxpr of the transposed program, taking the residuals and the
  output cotangent and returning the tangent's cotangent. ferrax: the Rust pass alone,
  ``ferrax._ir.transpose(unknown, [False] * residuals + [True])``. JAX:
  ``jax.make_jaxpr(lambda *res, ct: ad.backward_pass(unknown.jaxpr, False, consts,
  [*res, UndefinedPrimal(t)], [ct]))(*residuals, ct)``, i.e. JAX's ``backward_pass``
  staged with ``make_jaxpr`` (abstract residuals, a fresh lambda every repetition), on
  JAX's own unknown jaxpr from the row above.
* ``compile`` and ``run`` of ``jit(grad(f))`` for mlp(64) (gradient with respect to the
  parameters, trace_bench's mlp) and rnn(1000) (``lax.scan`` over 1000 steps, hidden 128,
  ``h = tanh(W @ h + x_t)``, loss ``sum(h)``, gradient with respect to W): XLA compile
  time of the lowered module (tracing and lowering not timed, a fresh function object
  every repetition), and steady-state time per call of the compiled function on
  device-resident arguments (20 calls per timing), as bench/jit_bench.py measures them.

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

from trace_bench import chain, mlp

CHAIN_N = 10_000
RNN_STEPS = 1_000
MLP_DEPTH = 64

# Targets of issue 8 (ferrax's median over JAX's).
TARGETS: dict[str, float] = {"partial_eval": 0.01, "transpose": 0.05, "compile": 1.2, "run": 1.05}


def rnn_scan(fnp: Any, lax: Any, steps: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """carry h: f32[128], xs: f32[steps,128], W: f32[128,128]; ``lax.scan`` of
    ``h = tanh(W @ h + x_t)`` over the steps; returns ``sum(h)``."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((128, 128)) / 16).astype(np.float32)
    xs = rng.standard_normal((steps, 128)).astype(np.float32)

    def f(w: Any, xs: Any, h: Any) -> Any:
        def step(h: Any, x: Any) -> tuple[Any, None]:
            return fnp.tanh(w @ h + x), None

        h, _ = lax.scan(step, h, xs)
        return fnp.sum(h)

    return f, (w, xs, np.zeros(128, np.float32))


class _Sys:
    """One system: its modules, and how to split and transpose a JVP jaxpr."""

    def __init__(self, name: str, fnp: Any, lax: Any, jit: Callable[..., Any], grad: Callable[..., Any], tree_util: Any, device_put: Callable[[Any], Any]) -> None:
        self.name = name
        self.fnp = fnp
        self.lax = lax
        self.jit = jit
        self.grad = grad
        self.leaves: Callable[[Any], list[Any]] = tree_util.tree_leaves
        self.put: Callable[[Any], Any] = lambda x: tree_util.tree_map(device_put, x)
        # Filled by the system's prepare(): the JVP jaxpr of chain and its linear part.
        self.jvp_eqns = 0
        self.linear_eqns = 0
        self.pe_thunk: Callable[[], Callable[[], Any]] | None = None
        self.transpose_thunk: Callable[[], Callable[[], Any]] | None = None

    def program(self, prog: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """A fresh ``grad`` of the program (a new function object every call)."""
        if prog == "mlp":
            f, args = mlp(self.fnp, MLP_DEPTH)
        else:
            f, args = rnn_scan(self.fnp, self.lax, RNN_STEPS)
        return self.grad(f), args


def _ferrax() -> _Sys:
    import ferrax
    import ferrax.numpy as fnp
    from ferrax import _ir

    s = _Sys("ferrax", fnp, ferrax.lax, ferrax.jit, ferrax.grad, ferrax.tree_util, ferrax.device_put)
    f, (x,) = chain(fnp, CHAIN_N)
    jaxpr = ferrax.make_jaxpr(lambda x, t: ferrax.jvp(f, (x,), (t,)))(x, x).jaxpr
    known, unknown, out_unknowns, n_res = _ir.partial_eval(jaxpr, [False, True], [False, False])
    assert out_unknowns == [False, True], out_unknowns
    s.jvp_eqns = len(jaxpr.eqns)
    s.linear_eqns = len(unknown.eqns)
    linear = [False] * n_res + [True]
    # The Rust passes cache nothing: the same jaxpr serves every repetition.
    s.pe_thunk = lambda: lambda: _ir.partial_eval(jaxpr, [False, True], [False, False])
    s.transpose_thunk = lambda: lambda: _ir.transpose(unknown, linear)
    return s


def _jax() -> _Sys | None:
    try:
        import jax
        import jax.numpy as jnp
        from jax._src import core
        from jax._src.interpreters import ad
        from jax._src.interpreters import partial_eval as pe
    except ImportError:
        return None
    jax.config.update("jax_platforms", "cpu")  # type: ignore[no-untyped-call]
    s = _Sys("jax", jnp, jax.lax, jax.jit, jax.grad, jax.tree_util, jax.device_put)
    f, (x,) = chain(jnp, CHAIN_N)
    closed = jax.make_jaxpr(lambda x, t: jax.jvp(f, (x,), (t,)))(x, x)
    known, unknown, out_unknowns, res_avals = pe.partial_eval_jaxpr_nounits(closed, [False, True], False)
    assert out_unknowns == [False, True], out_unknowns
    s.jvp_eqns = len(closed.jaxpr.eqns)
    s.linear_eqns = len(unknown.jaxpr.eqns)
    n_res = len(res_avals)
    t_aval = unknown.in_avals[n_res]
    ct_aval = unknown.out_avals[0]

    def fresh_pe() -> Callable[[], Any]:
        # partial_eval_jaxpr_nounits is cached by ClosedJaxpr identity: a fresh one.
        c = core.ClosedJaxpr(closed.jaxpr.replace(), closed.consts)
        return lambda: pe.partial_eval_jaxpr_nounits(c, [False, True], False)

    def fresh_transpose() -> Callable[[], Any]:
        lin = unknown.jaxpr.replace()

        def backward(*args: Any) -> Any:
            *res, ct = args
            return ad.backward_pass(lin, False, unknown.consts, [*res, ad.UndefinedPrimal(t_aval)], [ct])[-1]  # type: ignore[no-untyped-call]

        avals = (*res_avals, ct_aval)
        args = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]  # type: ignore[no-untyped-call]
        return lambda: jax.make_jaxpr(backward)(*args)

    s.pe_thunk = fresh_pe
    s.transpose_thunk = fresh_transpose
    return s


def _timed(thunk: Callable[[], Any]) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = thunk()
        dt = time.perf_counter() - t0
    finally:
        gc.enable()
    del out
    return dt


def _compile_rep(s: _Sys, prog: str) -> float:
    g, args = s.program(prog)
    lowered = s.jit(g).lower(*args)  # traces and lowers (not timed)
    return _timed(lowered.compile)


def _run_reps(s: _Sys, prog: str, reps: int, inner: int = 20) -> list[float]:
    g, args = s.program(prog)
    jg = s.jit(g)
    dev_args = s.put(args)

    def ready(y: Any) -> None:
        for leaf in s.leaves(y):
            leaf.block_until_ready()

    ready(jg(*dev_args))  # compile and warm up
    out = []
    for _ in range(reps):
        def loop() -> None:
            for _ in range(inner):
                y = jg(*dev_args)
            ready(y)

        out.append(_timed(loop) / inner)
    return out


def run_ad(use_jax: bool = True, reps_scale: float = 1.0, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Runs every autodiff row; returns JSON-able rows with both systems' figures
    (ferrax's alone when JAX is not installed or ``use_jax`` is false)."""
    peer = _jax() if use_jax else None
    systems = [s for s in (_ferrax(), peer) if s is not None]
    rows: list[dict[str, Any]] = []

    def reps_of(n: int) -> int:
        return max(3, round(n * reps_scale))

    def row(metric: str, case: str, per: dict[str, list[float]], eqns: dict[str, int] | None = None) -> None:
        r: dict[str, Any] = {"metric": metric, "case": case, "target": TARGETS[metric]}
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
                f"{metric:12s} {case:16s} "
                + "  ".join(f"{n} {v['median_s'] * 1e3:.3f} ms" for n, v in r.items() if isinstance(v, dict))
                + (f"  ratio {r['ratio']:.4f}" if "ratio" in r else "")
            )

    for metric, case, reps in [("partial_eval", f"jvp chain({CHAIN_N})", 5), ("transpose", f"linear chain({CHAIN_N})", 5)]:
        per: dict[str, list[float]] = {s.name: [] for s in systems}
        for _ in range(reps_of(reps)):
            for s in systems:
                make = s.pe_thunk if metric == "partial_eval" else s.transpose_thunk
                assert make is not None
                per[s.name].append(_timed(make()))
        counts = {s.name: s.jvp_eqns if metric == "partial_eval" else s.linear_eqns for s in systems}
        row(metric, case, per, counts)

    cases = [("mlp", f"grad mlp({MLP_DEPTH})"), ("rnn", f"grad rnn({RNN_STEPS})")]
    for prog, case in cases:
        per = {s.name: [] for s in systems}
        for _ in range(reps_of(3)):
            for s in systems:
                per[s.name].append(_compile_rep(s, prog))
        row("compile", case, per)

    for prog, case in cases:
        per = {s.name: [] for s in systems}
        for _ in range(reps_of(3)):
            for s in systems:
                per[s.name].extend(_run_reps(s, prog, 3))
        row("run", case, per)
    return rows


def _fmt(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def comparison_table(rows: list[dict[str, Any]], per_eqn: str = "ns", digits: int = 4) -> str:
    """Markdown: one line per (metric, case), both systems (median, min-max, and time per
    equation in ``per_eqn`` units, "ns" or "us", where equations are counted), the ratio
    (per-repetition range, ``digits`` decimals) and the target."""
    scale = 1e9 if per_eqn == "ns" else 1e6
    lines = [
        "| metric | case | eqns | ferrax | JAX | ferrax / JAX | target |",
        "|---|---|---|---|---|---|---|",
    ]

    def cell(r: dict[str, Any], name: str) -> str:
        v = r.get(name)
        if not isinstance(v, dict):
            return "n/a"
        text = f"{_fmt(v['median_s'])} ({_fmt(v['min_s'])}-{_fmt(v['max_s'])})"
        if v.get("eqns"):
            text += f", {v['median_s'] / v['eqns'] * scale:,.{0 if per_eqn == 'ns' else 1}f} {per_eqn}/eqn"
        return text

    for r in rows:
        fe = r.get("ferrax", {}).get("eqns")
        je = r.get("jax", {}).get("eqns")
        eqns = f"{fe:,}" if fe else "-"
        if fe and je and fe != je:
            eqns += f" (JAX {je:,})"
        ratio = f"**{r['ratio']:.{digits}f}** ({r['ratio_min']:.{digits}f}-{r['ratio_max']:.{digits}f})" if "ratio" in r else "-"
        target = f"<= {r['target']}" if r.get("target") is not None else "-"
        lines.append(f"| {r['metric']} | {r['case']} | {eqns} | {cell(r, 'ferrax')} | {cell(r, 'jax')} | {ratio} | {target} |")
    return "\n".join(lines)


def ad_table(rows: list[dict[str, Any]]) -> str:
    """The ad section's table (see :func:`comparison_table`)."""
    return comparison_table(rows, "ns", 4)


if __name__ == "__main__":
    # The same as `python bench/run.py --section ad` (results and header included).
    import pathlib
    import sys

    from run import section_ad

    section_ad(pathlib.Path(__file__).resolve().parent / "results", 1.0, "--no-jax" not in sys.argv)
