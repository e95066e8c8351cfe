#!/usr/bin/env bash
# Installs ferrax from this checkout (building the Rust extension) into the active virtual
# environment, or into .venv (made if missing), and runs the quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_env.sh
python -m pip install -q --disable-pip-version-check "maturin>=1.9,<2"
python -m pip install -q --disable-pip-version-check --no-build-isolation -e .
python examples/quickstart.py
