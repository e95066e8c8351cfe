"""bench/plot.py draws the scaling section's JSON (bench/results/scaling.json) as a PNG,
and the committed JSON has what the plot reads.

matplotlib comes with requirements-dev.txt (and the ``bench`` and ``test`` extras); the
tests skip only where it is not installed.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# What bench/plot.py reads from each row.
ROW_KEYS = {"metric", "system", "eqns", "us_per_eqn", "us_per_eqn_min", "us_per_eqn_max"}


def _row(metric: str, system: str, n: int, us: float) -> dict[str, Any]:
    return {
        "metric": metric, "system": system, "n": n, "eqns": 3 * n + 1,
        "us_per_eqn": us, "us_per_eqn_min": us * 0.9, "us_per_eqn_max": us * 1.2,
    }


def test_plot_writes_a_png(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("matplotlib")
    rows = [
        _row(metric, system, n, us * (2.0 if system == "jax" else 1.0))
        for metric, us in (("trace", 2.0), ("grad_trace", 15.0), ("lower", 0.3))
        for system in ("ferrax", "jax")
        for n in (100, 1_000)
    ]
    rows += [_row("parse", "ferrax", n, 0.45) for n in (100, 1_000, 10_000)]
    data = {"meta": {"jax": "0.10.2", "note": "a test"}, "rows": rows}
    src = tmp_path / "scaling.json"
    src.write_text(json.dumps(data))
    out = tmp_path / "scaling.png"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "plot.py"), "--json", str(src), "--out", str(out)],
        check=True, capture_output=True, text=True, timeout=120,
    )
    assert out.read_bytes()[:8] == PNG_SIGNATURE


def test_committed_scaling_json_has_what_the_plot_reads() -> None:
    data = json.loads((ROOT / "bench" / "results" / "scaling.json").read_text())
    rows = data["rows"]
    assert rows and all(ROW_KEYS <= row.keys() for row in rows)
    # Both systems, the three Python-side metrics for each, and the Rust passes.
    pairs = {(r["metric"], r["system"]) for r in rows}
    for metric in ("trace", "grad_trace", "lower"):
        assert {(metric, "ferrax"), (metric, "jax")} <= pairs
    assert {(op, "ferrax") for op in ("parse", "typecheck", "dce", "toposort")} <= pairs
    assert (ROOT / "bench" / "results" / "scaling.png").read_bytes()[:8] == PNG_SIGNATURE
