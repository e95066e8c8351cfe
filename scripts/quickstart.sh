#!/usr/bin/env bash
# Installs ferrax from this checkout (building the Rust extension) and runs the quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
python -m pip install -q --disable-pip-version-check --no-build-isolation -e .
python examples/quickstart.py
