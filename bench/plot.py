"""Draws bench/results/scaling.json (``python bench/run.py --section scaling``) as a PNG:
time per equation against program size, both log scales, one colour per metric, ferrax
solid and JAX dashed on the same axes; the points are medians (the min-max of the runs
is in scaling.md: on this shared machine single runs of other people's work stretch it
far more than the differences between sizes, so bands would hide the lines).

Usage: python bench/plot.py [--json bench/results/scaling.json] [--out bench/results/scaling.png]

Needs matplotlib (the ``bench`` extra: ``pip install -e .[bench]``); draws with the Agg
backend, so no display is needed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any

RESULTS = pathlib.Path(__file__).resolve().parent / "results"

# Metric -> (legend label, colour). The Rust passes exist for ferrax only.
STYLE: dict[str, tuple[str, str]] = {
    "trace": ("trace: make_jaxpr(f)", "tab:blue"),
    "grad_trace": ("grad trace: make_jaxpr(grad(f))", "tab:orange"),
    "lower": ("lower to StableHLO text", "tab:green"),
    "parse": ("Rust parse (ferrax only)", "tab:red"),
    "typecheck": ("Rust typecheck (ferrax only)", "tab:purple"),
    "dce": ("Rust DCE (ferrax only)", "tab:brown"),
    "toposort": ("Rust toposort (ferrax only)", "tab:pink"),
}


def plot(data: dict[str, Any], out: pathlib.Path) -> None:
    """Writes the figure of ``data`` (the JSON of the scaling section) to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    rows: list[dict[str, Any]] = data["rows"]
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=110)
    for metric, (label, colour) in STYLE.items():
        for system, dashes in (("ferrax", "-"), ("jax", "--")):
            pts = sorted((r for r in rows if r["metric"] == metric and r["system"] == system), key=lambda r: r["eqns"])
            if not pts:
                continue
            xs = [r["eqns"] for r in pts]
            ax.plot(xs, [r["us_per_eqn"] for r in pts], dashes, color=colour, marker="o", markersize=4, linewidth=1.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    # Plain numbers on the time axis (0.1, 1, 10 us), powers of ten on the size axis.
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("program size: equations of chain(n) (3n+1)")
    ax.set_ylabel("wall time per equation of chain(n) (microseconds)")
    meta = data.get("meta", {})
    peer = f"JAX {meta['jax']}" if meta.get("jax") else "no JAX"
    ax.set_title(f"Cost per equation against program size: ferrax (solid) and {peer} (dashed)")
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.12)
    # One legend entry per metric present (colour), and two for the systems (line style).
    present = {r["metric"] for r in rows}
    handles = [Line2D([], [], color=c, marker="o", markersize=4, label=lbl) for m, (lbl, c) in STYLE.items() if m in present]
    handles.append(Line2D([], [], color="black", linestyle="-", label="ferrax"))
    if any(r["system"] == "jax" for r in rows):
        handles.append(Line2D([], [], color="black", linestyle="--", label="JAX"))
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    note = meta.get("note")
    if note:
        fig.text(0.01, 0.01, note, fontsize=7.5, color="0.35", wrap=True)
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))
    fig.savefig(out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=str(RESULTS / "scaling.json"))
    parser.add_argument("--out", default=str(RESULTS / "scaling.png"))
    args = parser.parse_args(argv)
    plot(json.loads(pathlib.Path(args.json).read_text()), pathlib.Path(args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
