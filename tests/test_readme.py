"""The README's self-contained examples (a ```python block followed by "prints" and the
output block) run as written and print what the README shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

EXAMPLE = re.compile(r"```python\n(?P<code>(?:(?!```).)*)```\n\nprints\n\n```\n(?P<out>(?:(?!```).)*)```", re.S)


def examples() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    return [(m["code"], m["out"]) for m in EXAMPLE.finditer(text)]


def test_the_readme_has_checked_examples() -> None:
    assert len(examples()) >= 1


@pytest.mark.parametrize("code, out", examples(), ids=lambda s: s.splitlines()[0][:40] if "\n" in s else s[:40])
def test_example_prints_what_the_readme_shows(code: str, out: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == out
