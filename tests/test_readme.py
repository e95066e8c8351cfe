"""The README's self-contained examples (a ```python block followed by "prints" and the
output block) run as written and print what the README shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

EXAMPLE = re.compile(
    r"```python\n(?P<code>(?:(?!```).)*)```\n\nprints\n\n```(?:text)?\n(?P<out>(?:(?!```).)*)```", re.S
)


def examples() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    return [(m["code"], m["out"]) for m in EXAMPLE.finditer(text)]


SAVE_LOAD = re.compile(
    r"```python\n(?P<save># save\.py\n(?:(?!```).)*)```\n\n```python\n(?P<load># load\.py(?:(?!```).)*)```"
    r"\n\nprint\n\n```\n(?P<out1>(?:(?!```).)*)```\n\nand\n\n```\n(?P<out2>(?:(?!```).)*)```",
    re.S,
)


def test_the_readme_has_checked_examples() -> None:
    assert len(examples()) >= 1


def test_saving_and_loading_in_two_processes(tmp_path: Path) -> None:
    m = SAVE_LOAD.search((ROOT / "README.md").read_text())
    assert m is not None
    for script, out in (("save", "out1"), ("load", "out2")):
        (tmp_path / f"{script}.py").write_text(m[script])
        done = subprocess.run(
            [sys.executable, f"{script}.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout == m[out]


@pytest.mark.parametrize("code, out", examples(), ids=lambda s: s.splitlines()[0][:40] if "\n" in s else s[:40])
def test_example_prints_what_the_readme_shows(code: str, out: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == out


def _rust_blocks() -> list[str]:
    return re.findall(r"```rust\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_the_rust_examples_are_built_and_run() -> None:
    """The README's Rust program is rust/ir/examples/readme.rs (which `cargo test`
    builds; formatting aside), and its builder fragment is a doctest of the crate guide
    (lib.rs), line for line."""
    program, fragment = _rust_blocks()[:2]
    example = (ROOT / "rust/ir/examples/readme.rs").read_text()
    code = example[example.index("use ferrax_ir") :]
    assert re.sub(r"\s+", "", program) == re.sub(r"\s+", "", code)
    guide = "\n".join(
        line.removeprefix("//! ").removeprefix("//!")
        for line in (ROOT / "rust/ir/src/lib.rs").read_text().splitlines()
        if line.startswith("//!")
    )
    assert fragment.strip() in guide
