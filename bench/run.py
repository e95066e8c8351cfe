"""Runs ferrax's benchmarks and writes a markdown table and JSON (see shared BENCH.md).

Sections:
  ir   Rust timings of the IR crate on chain jaxprs (build, typecheck, print, parse,
       DCE, toposort, memory), from the release binary `ferrax-bench-ir`.

Usage: python bench/run.py [--sizes 1000,10000,100000,1000000] [--out bench/results]
JAX is optional: sections that compare against it print ferrax's figures alone when it
is not installed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import subprocess
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Targets from the issues, in nanoseconds per equation (bytes for memory).
IR_TARGETS: dict[str, float] = {
    "typecheck": 1000.0,
    "dce": 1000.0,
    "toposort": 1000.0,
    "print": 2000.0,
    "parse": 2000.0,
    "memory": 256.0,
}


def run_ir(sizes: str) -> list[dict[str, Any]]:
    """Builds and runs the Rust benchmark binary; returns its JSON rows."""
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "ferrax-ir", "--bin", "ferrax-bench-ir"],
        cwd=ROOT,
        check=True,
    )
    out = subprocess.run(
        [str(ROOT / "target" / "release" / "ferrax-bench-ir"), "--sizes", sizes],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    if out.stderr.strip():
        print(out.stderr, file=sys.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def ir_table(rows: list[dict[str, Any]]) -> str:
    """One row per operation, one column per size: ns per equation (median, min-max)."""
    sizes = sorted({int(r["eqns"]) for r in rows})
    ops = ["build", "typecheck", "print", "parse", "dce", "toposort", "memory"]
    head = "| operation | " + " | ".join(f"{s:,} eqns" for s in sizes) + " | target |"
    sep = "|---" * (len(sizes) + 2) + "|"
    lines = [head, sep]
    for op in ops:
        cells = []
        for s in sizes:
            match = [r for r in rows if r["op"] == op and int(r["eqns"]) == s]
            if not match:
                cells.append("n/a")
            elif op == "memory":
                cells.append(f"{match[0]['bytes_per_eqn']:.0f} B/eqn")
            else:
                r = match[0]
                cells.append(
                    f"{r['ns_per_eqn']:.0f} ns ({r['ns_per_eqn_min']:.0f}-{r['ns_per_eqn_max']:.0f})"
                )
        target = IR_TARGETS.get(op)
        unit = "B/eqn" if op == "memory" else "ns/eqn"
        lines.append(
            f"| {op} | " + " | ".join(cells) + f" | {'< %.0f %s' % (target, unit) if target else '-'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    rows = run_ir(args.sizes)
    table = ir_table(rows)
    header = (
        f"Machine: {platform.machine()}, {platform.system()}, Python {platform.python_version()}. "
        "Median of 5 runs (10^6) or 11 runs (smaller), min-max in parentheses; "
        "chain jaxprs of BENCH.md, x: f32[128]."
    )
    (out_dir / "ir.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out_dir / "ir.md").write_text(header + "\n\n" + table + "\n")
    print(header)
    print()
    print(table)


if __name__ == "__main__":
    main()
