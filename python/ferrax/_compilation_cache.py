"""The persistent compilation cache (JAX's ``jax_compilation_cache_dir``).

With ``ferrax.config.update("jax_compilation_cache_dir", path)`` (or the
``JAX_COMPILATION_CACHE_DIR`` environment variable) every program whose XLA compilation
took at least ``jax_persistent_cache_min_compile_time_secs`` (1 s by default, as in JAX)
is serialized by jaxlib into ``path``; a later compilation of the same program, in this
process or another, loads it instead of compiling.

An entry is keyed by a SHA-256 over everything the executable depends on: the StableHLO
text, the serialized compile options (devices, partitions), the platform and its
version, the device kinds and jaxlib's version (an entry of another jaxlib is never
looked up). A file holds a header naming the format, the digest of its payload and the
payload (jaxlib's serialized executable). A file that cannot be read, whose header or
digest is wrong, or that jaxlib does not load is ignored with a
:class:`CompilationCacheWarning` and the program compiles as if there were no cache;
so does a directory that cannot be written. Entries are written whole (a temporary file
renamed), so a crash or a concurrent writer never leaves half an entry under a key.
Programs calling back to the host (``debug.print``, ``pure_callback``) are not cached:
their callbacks are bound when they compile.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ferrax.errors import CompilationCacheWarning

__all__ = ["CompilationCacheWarning", "compile_cached", "entry_key", "stats"]

_MAGIC = b"ferrax compilation cache entry v1\n"
_DIGEST = 32

# What the cache did in this process: entries loaded (``hits``), programs compiled with
# the cache on (``misses``) and entries written.
stats: dict[str, int] = {"hits": 0, "misses": 0, "writes": 0}


@functools.cache
def _jaxlib_version() -> str:
    from importlib.metadata import version

    return version("jaxlib")


def entry_key(text: str, options: bytes, platform: str, platform_version: str, device_kinds: Sequence[str]) -> str:
    """The key of a program's entry: a hex SHA-256 over the program and everything its
    executable depends on."""
    h = hashlib.sha256()
    for part in (
        b"ferrax-xla-cache-1", _jaxlib_version().encode(), platform.encode(), platform_version.encode(),
        "\0".join(device_kinds).encode(), options, text.encode(),
    ):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _warn(message: str) -> None:
    warnings.warn(message, CompilationCacheWarning, stacklevel=2)


def _read(path: str) -> bytes | None:
    """The payload of the entry at ``path``; None if there is none, or (with a warning)
    if it is unreadable, not an entry or corrupt."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):  # no entry (or no directory) yet
        return None
    except OSError as e:
        _warn(f"ignoring compilation cache entry {path}: it cannot be read ({e})")
        return None
    head = len(_MAGIC) + _DIGEST
    if len(data) < head or not data.startswith(_MAGIC):
        _warn(f"ignoring compilation cache entry {path}: not a ferrax cache entry")
        return None
    payload = data[head:]
    if hashlib.sha256(payload).digest() != data[len(_MAGIC) : head]:
        _warn(f"ignoring compilation cache entry {path}: its contents are corrupt (digest mismatch)")
        return None
    return payload


def _write(directory: str, path: str, payload: bytes) -> None:
    """Writes the entry whole: a temporary file in the directory, then renamed."""
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".entry")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC)
                f.write(hashlib.sha256(payload).digest())
                f.write(payload)
            os.replace(tmp, path)
            stats["writes"] += 1
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as e:
        _warn(f"could not write compilation cache entry {path}: {e}")


def compile_cached(
    directory: str,
    key: str,
    compile: Callable[[], Any],
    serialize: Callable[[Any], bytes],
    load: Callable[[bytes], Any],
    min_compile_secs: float,
) -> Any:
    """The executable of the entry ``key`` in ``directory`` if there is a usable one,
    else ``compile()``'s, stored when compiling took at least ``min_compile_secs``."""
    path = os.path.join(directory, f"{key}.xla")
    payload = _read(path)
    if payload is not None:
        try:
            exe = load(payload)
        except Exception as e:  # a stale or damaged executable: compiled again
            _warn(f"ignoring compilation cache entry {path}: jaxlib cannot load it ({e})")
        else:
            stats["hits"] += 1
            return exe
    stats["misses"] += 1
    start = time.perf_counter()
    exe = compile()
    if time.perf_counter() - start >= min_compile_secs:
        try:
            data = serialize(exe)
        except Exception as e:  # an executable jaxlib cannot serialize stays uncached
            _warn(f"could not serialize the executable for the compilation cache: {e}")
        else:
            _write(directory, path, data)
    return exe
