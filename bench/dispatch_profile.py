"""What each microsecond of a jitted call is: ferrax's hit path (``ferrax._ir.Dispatcher``,
Rust) timed step by step, next to jaxlib's two calls made alone and JAX's whole call.

A step's time is the hit path run up to its end (``Dispatcher._hit_until(step, ...)``)
minus the path run up to the step before, so each includes freeing what it made (the
results of ``execute_sharded`` when nothing consumes them, the arrays of the last step).
The first row, "enter and leave", is the call from a Python loop into the extension and
back. Statements are timed with ``timeit`` (no lambda around them, the garbage collector
off), every statement once per round, rounds alternating; each statement's fastest round
is kept (the machine is shared: the least disturbed round is the cost).

    python bench/dispatch_profile.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import sys
import timeit
from typing import Any

from ferrax.tree_util import tree_flatten
from jit_bench import _ferrax, _jax, dispatch_case  # type: ignore[import-not-found]

STEPS = [
    "enter and leave (Python call into the extension)",
    "trace state and x64 flag",
    "flatten the arguments, read their slots",
    "find the signature",
    "argument list + jaxlib execute_sharded",
    "jaxlib consume_with_handlers",
    "DeviceArrays and the output tree",
]


def profile(case: str, calls: int, rounds: int) -> dict[str, float]:
    """Microseconds per call of each statement (fastest round), for one dispatch case."""
    jf, args = dispatch_case(_ferrax(), case)
    jf(*args)
    jf(*args)
    assert jf._hit_path_size() == 1, "the call is not on the hit path"
    (entry,) = jf._cache.values()
    execute, consume, handlers, _ = entry.executable.hit_path()
    buffers = list(entry.const_buffers) + [x._buffer for x in tree_flatten(args)[0]]
    jax_sys = _jax()
    assert jax_sys is not None, "JAX is needed for the comparison"
    jj, jargs = dispatch_case(jax_sys, case)
    jj(*jargs)
    env = {"jf": jf, "args": args, "execute": execute, "consume": consume, "handlers": handlers,
           "buffers": buffers, "jj": jj, "jargs": jargs}
    stmts = {"loop": "pass", "ferrax": "jf(*args)", "jax": "jj(*jargs)",
             "execute_sharded": "execute(buffers)",
             "execute_sharded + consume": "consume(execute(buffers), handlers)"}
    stmts.update({f"step {i}": f"jf._hit_until({i}, *args)" for i in range(len(STEPS))})
    times: dict[str, list[float]] = {k: [] for k in stmts}
    timers = {k: timeit.Timer(s, globals=env) for k, s in stmts.items()}
    for _ in range(rounds):
        for k, t in timers.items():
            times[k].append(t.timeit(calls) / calls * 1e6)
    return {k: min(v) for k, v in times.items()}


def table(results: dict[str, dict[str, float]]) -> str:
    """Markdown: the steps' times and the comparisons, one column per case."""
    cases = list(results)
    lines = ["| us per call | " + " | ".join(cases) + " |", "|---|" + "---:|" * len(cases)]

    def line(label: str, values: list[float]) -> None:
        lines.append(f"| {label} | " + " | ".join(f"{v:.2f}" for v in values) + " |")

    for i, name in enumerate(STEPS):
        prev = "loop" if i == 0 else f"step {i - 1}"
        line(f"{i}. {name}", [r[f"step {i}"] - r[prev] for r in results.values()])
    line("**ferrax hit path, steps 0-6**", [r["step 6"] - r["loop"] for r in results.values()])
    line("ferrax `jf(*args)` as called", [r["ferrax"] - r["loop"] for r in results.values()])
    line("jaxlib alone: `execute_sharded`", [r["execute_sharded"] - r["loop"] for r in results.values()])
    line("jaxlib alone: + `consume_with_handlers`", [r["execute_sharded + consume"] - r["loop"] for r in results.values()])
    line("jaxlib's two calls: in the hit path (steps 4-5) less alone",
         [(r["step 5"] - r["step 3"]) - (r["execute_sharded + consume"] - r["loop"]) for r in results.values()])
    line("JAX `jj(*args)`", [r["jax"] - r["loop"] for r in results.values()])
    lines.append("| ferrax / JAX | " + " | ".join(f"{(r['ferrax'] - r['loop']) / (r['jax'] - r['loop']):.3f}" for r in results.values()) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    calls = int(argv[argv.index("--calls") + 1]) if "--calls" in argv else 20_000
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 7
    results = {
        "x + 1.0, f32[3]": profile("one", calls, rounds),
        "10 args in a dict": profile("pytree", calls, rounds),
    }
    print(table(results))


if __name__ == "__main__":
    main(sys.argv)
