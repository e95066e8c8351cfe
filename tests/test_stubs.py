"""The hand-written stub of the compiled module agrees with it, and the package and the
tests pass `mypy --strict` (which also checks the `assert_type`s of test_typing.py)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_stubtest() -> None:
    # Checks the importable `ferrax._ir` against the stub python/ferrax/_ir.pyi (found
    # through `mypy_path` in pyproject.toml).
    result = run("mypy.stubtest", "--mypy-config-file", "pyproject.toml", "ferrax._ir")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict() -> None:
    # The configuration (strict, files python/ and tests/) is in pyproject.toml.
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
