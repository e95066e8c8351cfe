#!/usr/bin/env bash
# Runs every test (inside the active virtual environment, or .venv, made if missing):
# installs the project with its test dependencies (building the Rust
# extension), then the Rust tests, clippy, rustfmt, pytest (stubtest included; two
# worker processes; mypy --strict runs there too, in tests/test_stubs.py).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_env.sh

echo "== install"
python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
python -m pip install -q --disable-pip-version-check --no-build-isolation -e .

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --features ferrax-ir/arbitrary,ferrax-ir/serde -q -- -D warnings
echo "== cargo test (ferrax-ir with the fuzz corpora replayed, ferrax-cli)"
cargo test -p ferrax-ir -p ferrax-cli --features ferrax-ir/arbitrary,ferrax-ir/serde -q
echo "== the ferrax-ir tour (examples/rust/ir-tour: the public API only)"
cargo run -q -p ferrax-ir-tour > /dev/null
echo "== cargo doc (ferrax-ir)"
RUSTDOCFLAGS="-D warnings" cargo doc -p ferrax-ir --features arbitrary,serde --no-deps -q
echo "== pytest"
# Two worker processes (pytest-xdist; FERRAX_TEST_WORKERS=0 runs in this process): the
# multi-process tests stay together on one worker (their xdist_group).
python -m pytest -q -n "${FERRAX_TEST_WORKERS:-2}" --dist loadgroup
