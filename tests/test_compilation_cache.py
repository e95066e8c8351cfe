"""The persistent compilation cache (``jax_compilation_cache_dir``): a program compiled
once is loaded, in this process or another, instead of compiled; entries that cannot be
used are ignored with a warning; results never change."""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import _compilation_cache as cc
from ferrax.errors import CompilationCacheWarning


def _program(scale: float) -> Any:
    # A new function object each time: nothing is reused from ferrax's in-memory caches,
    # so each jit traces, lowers and compiles (or loads) again.
    def f(x: Any) -> Any:
        for i in range(20):
            x = fnp.sin(x) * scale + i
        return x

    return ferrax.jit(f)


@pytest.fixture
def cache_dir(tmp_path: Path) -> Iterator[Path]:
    cfg = ferrax.config
    before = (cfg.jax_compilation_cache_dir, cfg.jax_persistent_cache_min_compile_time_secs)
    cfg.update("jax_compilation_cache_dir", str(tmp_path))
    cfg.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        yield tmp_path
    finally:
        cfg.update("jax_compilation_cache_dir", before[0])
        cfg.update("jax_persistent_cache_min_compile_time_secs", before[1])


def _entries(d: Path) -> list[str]:
    return sorted(glob.glob(str(d / "*.xla")))


X = np.linspace(-1, 1, 5, dtype=np.float32)


def _expected(scale: float) -> np.ndarray[Any, Any]:
    """The program's result computed without the cache."""
    cfg = ferrax.config
    before = cfg.jax_compilation_cache_dir
    cfg.update("jax_compilation_cache_dir", None)
    try:
        return np.asarray(_program(scale)(X))
    finally:
        cfg.update("jax_compilation_cache_dir", before)


def test_a_program_compiled_once_is_loaded_the_second_time(cache_dir: Path) -> None:
    before = dict(cc.stats)
    first = np.asarray(_program(1.5)(X))
    assert len(_entries(cache_dir)) == 1
    assert (cc.stats["misses"] - before["misses"], cc.stats["writes"] - before["writes"]) == (1, 1)
    second = np.asarray(_program(1.5)(X))
    assert cc.stats["hits"] - before["hits"] == 1 and cc.stats["misses"] - before["misses"] == 1
    np.testing.assert_array_equal(first, second)
    # Another program is another entry.
    np.asarray(_program(2.5)(X))
    assert len(_entries(cache_dir)) == 2


def test_the_key_covers_the_program_options_platform_devices_and_jaxlib() -> None:
    base = ("module {}", b"opts", "cpu", "v1", ["cpu"])
    key = cc.entry_key(*base)
    assert key == cc.entry_key(*base) and len(key) == 64
    for i, other in enumerate(["module { }", b"opts2", "gpu", "v2", ["cpu", "cpu"]]):
        changed = list(base)
        changed[i] = other
        assert cc.entry_key(*changed) != key  # type: ignore[arg-type]


def test_fast_compilations_are_not_stored_by_default(tmp_path: Path) -> None:
    cfg = ferrax.config
    assert cfg.jax_persistent_cache_min_compile_time_secs == 1.0
    cfg.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        np.asarray(_program(3.5)(X))  # compiles in well under a second
    finally:
        cfg.update("jax_compilation_cache_dir", None)
    assert _entries(tmp_path) == []


def _corrupt(kind: str, path: str) -> None:
    data = Path(path).read_bytes()
    if kind == "magic":
        data = b"not an entry" + data[12:]
    elif kind == "truncated":
        data = data[: len(cc._MAGIC) + 5]
    elif kind == "flipped":
        b = bytearray(data)
        b[-50] ^= 0xFF
        data = bytes(b)
    elif kind == "unloadable":  # a sound file whose payload jaxlib cannot load
        payload = b"\x00garbage" * 64
        data = cc._MAGIC + hashlib.sha256(payload).digest() + payload
    elif kind == "empty":
        data = b""
    Path(path).write_bytes(data)


@pytest.mark.parametrize("kind", ["magic", "truncated", "flipped", "unloadable", "empty"])
def test_a_bad_entry_is_ignored_with_a_warning_and_replaced(cache_dir: Path, kind: str) -> None:
    want = _expected(4.5)
    np.asarray(_program(4.5)(X))
    (path,) = _entries(cache_dir)
    _corrupt(kind, path)
    with pytest.warns(CompilationCacheWarning, match="ignoring compilation cache entry"):
        got = np.asarray(_program(4.5)(X))
    np.testing.assert_array_equal(got, want)
    # The program compiled again and its entry was written anew: used without a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(np.asarray(_program(4.5)(X)), want)


def test_a_directory_that_cannot_be_written_warns_and_compiles(cache_dir: Path) -> None:
    blocked = cache_dir / "file"
    blocked.write_text("a file where the directory should be")
    ferrax.config.update("jax_compilation_cache_dir", str(blocked / "sub"))
    with pytest.warns(CompilationCacheWarning, match="could not write"):
        got = np.asarray(_program(5.5)(X))
    np.testing.assert_array_equal(got, _expected(5.5))


def test_programs_with_host_callbacks_are_not_cached(cache_dir: Path) -> None:
    seen: list[Any] = []

    def f(x: Any) -> Any:
        ferrax.debug.callback(lambda v: seen.append(np.asarray(v)), x)
        return x * 2

    np.testing.assert_array_equal(np.asarray(ferrax.jit(f)(X)), X * 2)
    assert len(seen) == 1 and _entries(cache_dir) == []


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="float"):
        ferrax.config.update("jax_persistent_cache_min_compile_time_secs", "1")
    with pytest.raises(ValueError, match="str"):
        ferrax.config.update("jax_compilation_cache_dir", 3)


def test_a_second_process_loads_instead_of_compiling(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import numpy as np, ferrax, ferrax.numpy as fnp
        from ferrax import _compilation_cache as cc

        def mlp(params, x):
            for w, b in params:
                x = fnp.tanh(x @ w + b)
            return fnp.sum(x * x)

        rng = np.random.default_rng(0)
        params = [(rng.normal(size=(16, 16)).astype(np.float32), np.zeros(16, np.float32)) for _ in range(4)]
        x = rng.normal(size=(8, 16)).astype(np.float32)
        g = ferrax.jit(ferrax.grad(mlp))(params, x)
        cfg = ferrax.config  # the settings came from the environment
        print(cc.stats["hits"], cc.stats["misses"], float(np.asarray(g[0][0]).sum()),
              cfg.jax_compilation_cache_dir, cfg.jax_persistent_cache_min_compile_time_secs)
        """
    )
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(tmp_path), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    runs = [
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout.split()
        for _ in range(2)
    ]
    assert runs[0][:2] == ["0", "1"], runs  # compiled and stored
    assert runs[1][:2] == ["1", "0"], runs  # loaded, not compiled
    assert runs[0][2] == runs[1][2]
    assert runs[0][3:] == runs[1][3:] == [str(tmp_path), "0.0"]
    assert len(_entries(tmp_path)) == 1
