"""``ferrax.config``: the process's settings, under JAX's names.

``config.update("jax_enable_x64", True)`` switches to JAX's x64 semantics (64-bit values
stay 64-bit; Python scalars and the default dtypes are 64-bit); the ``JAX_ENABLE_X64``
environment variable sets it at import, read as JAX reads it. Reading a setting:
``config.jax_enable_x64`` or ``config.read("jax_enable_x64")``. An unknown name is an
``AttributeError``, as in JAX. ``with ferrax.enable_x64(True):`` switches for a block.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Config", "config", "enable_x64", "x64_enabled"]

_TRUE = ("y", "yes", "t", "true", "on", "1")
_FALSE = ("n", "no", "f", "false", "off", "0")


def _bool_env(name: str, default: bool) -> bool:
    """An environment variable read as JAX reads its boolean ones."""
    value = os.getenv(name, str(default)).lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"invalid truth value {value!r} for environment {name!r}")


# Read on every dtype decision (ferrax.dtypes): a plain module global, not a lookup.
_x64: bool = _bool_env("JAX_ENABLE_X64", False)


# Set by the runtime when it makes its client: settings that shape the client (the CPU
# device count, the distributed runtime) are refused after that, as JAX refuses them.
backend_started: bool = False

# The distributed runtime's state once ``ferrax.distributed.initialize`` ran (its client,
# process id and count, collectives), read by the runtime when it makes its client.
distributed_state: Any = None


def x64_enabled() -> bool:
    """True when 64-bit values stay 64-bit (``jax_enable_x64``)."""
    return _x64


def _check_int(name: str, value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(
            f"new int config value must be None or of type int, got {value!r} of type "
            f"{type(value)} (setting {name})"
        )
    return value


def _float_env(name: str, default: float) -> float:
    value = os.getenv(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"invalid float value {value!r} for environment {name!r}") from None


def _check_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(
            f"new float config value must be of type float, got {value!r} of type {type(value)} (setting {name})"
        )
    return float(value)


def _check_str(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(
            f"new string config value must be None or of type str, got {value!r} of type "
            f"{type(value)} (setting {name})"
        )
    return value


class Config:
    """The settings JAX users know, by JAX's names.

    ``jax_enable_x64`` (bool, default from ``JAX_ENABLE_X64``, else False),
    ``jax_num_cpu_devices`` (int, -1 for the default), ``jax_compilation_cache_dir``
    (str or None, default from ``JAX_COMPILATION_CACHE_DIR``: where compiled programs
    persist, see ``ferrax._compilation_cache``) and
    ``jax_persistent_cache_min_compile_time_secs`` (float, default 1.0 or
    ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``: programs compiling faster are not
    stored).
    """

    def __init__(self) -> None:
        self._num_cpu_devices: int = -1
        self._compilation_cache_dir: str | None = os.getenv("JAX_COMPILATION_CACHE_DIR") or None
        self._min_compile_secs: float = _float_env("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", 1.0)

    def update(self, name: str, value: Any) -> None:
        """Sets the setting ``name`` to ``value``; an unknown name is an ``AttributeError``."""
        global _x64
        if name == "jax_enable_x64":
            _x64 = bool(value)
        elif name == "jax_num_cpu_devices":
            checked = _check_int(name, value)
            if backend_started:
                raise RuntimeError(
                    "jax_num_cpu_devices config should be updated before backends are "
                    "initialized i.e. before any ferrax operation is executed. You should "
                    "initialize this config immediately after `import ferrax`."
                )
            self._num_cpu_devices = -1 if checked is None else checked
        elif name == "jax_compilation_cache_dir":
            self._compilation_cache_dir = _check_str(name, value)
        elif name == "jax_persistent_cache_min_compile_time_secs":
            self._min_compile_secs = _check_float(name, value)
        else:
            raise AttributeError(f"Unrecognized config option: {name}")

    def read(self, name: str) -> Any:
        """The value of the setting ``name``; an unknown name is an ``AttributeError``."""
        if name == "jax_enable_x64":
            return _x64
        if name == "jax_num_cpu_devices":
            return self._num_cpu_devices
        if name == "jax_compilation_cache_dir":
            return self._compilation_cache_dir
        if name == "jax_persistent_cache_min_compile_time_secs":
            return self._min_compile_secs
        raise AttributeError(f"Unrecognized config option: {name}")

    @property
    def values(self) -> dict[str, Any]:
        """Every setting with its value."""
        names = (
            "jax_enable_x64", "jax_num_cpu_devices", "jax_compilation_cache_dir",
            "jax_persistent_cache_min_compile_time_secs",
        )
        return {n: self.read(n) for n in names}

    @property
    def jax_enable_x64(self) -> bool:
        """Whether 64-bit values stay 64-bit (JAX's x64 mode)."""
        return _x64

    @property
    def jax_num_cpu_devices(self) -> int:
        """The number of CPU devices asked for (-1: the runtime's default)."""
        return self._num_cpu_devices

    @property
    def jax_compilation_cache_dir(self) -> str | None:
        """Where compiled programs are cached across processes (None: nowhere)."""
        return self._compilation_cache_dir

    @property
    def jax_persistent_cache_min_compile_time_secs(self) -> float:
        """Programs whose compilation took less are not written to the cache."""
        return self._min_compile_secs

    def __repr__(self) -> str:
        return f"ferrax.config({self.values})"


config = Config()
"""The process's settings (``ferrax.config.update("jax_enable_x64", True)``)."""


@contextmanager
def enable_x64(new_val: bool = True) -> Iterator[None]:
    """``jax_enable_x64`` set to ``new_val`` for the duration of a ``with`` block (as
    ``jax.enable_x64``), restored after it."""
    global _x64
    previous = _x64
    _x64 = bool(new_val)
    try:
        yield
    finally:
        _x64 = previous
