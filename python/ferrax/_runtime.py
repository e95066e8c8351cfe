"""Running compiled programs with jaxlib's XLA client (CPU), without importing ``jax``.

One client per process, made on first use. Arrays live on its device as
:class:`DeviceArray` (a :class:`ferrax.Array`) until NumPy asks for them. See the
project's notes on jaxlib's runtime API for why each call is made the way it is.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax import _ir, dtypes
from ferrax._array import Array
from ferrax._core import ConcreteArray, aval_of, to_numpy
from ferrax.errors import LoweringError

__all__ = ["DeviceArray", "Executable", "compile_stablehlo", "device_put"]

# XLA's C++ logging prints INFO lines (the client's device count, ...) on stderr unless
# told otherwise before jaxlib loads; JAX keeps them off by default in the same way, and
# the environment variable still turns them on (TF_CPP_MIN_LOG_LEVEL=0).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


class _Backend:
    """The CPU client, its device and the sharding every buffer uses."""

    def __init__(self) -> None:
        from jaxlib import xla_client

        xc: Any = xla_client  # jaxlib's stubs lag its runtime API
        self.xc = xc
        self.client: Any = xc.make_cpu_client()
        self.device: Any = self.client.local_devices()[0]
        self.devices = xc.DeviceList((self.device,))
        self.sharding = xc.GSPMDSharding(self.devices, xc.HloSharding.replicate())
        self.semantics = xc.HostBufferSemantics.IMMUTABLE_UNTIL_TRANSFER_COMPLETES
        self.jax_ext: Any = importlib.import_module("jaxlib._jax")

    def put(self, value: np.ndarray[Any, Any], aval: _ir.ShapedArray) -> Any:
        return self.xc.batched_device_put(
            aval, self.sharding, [value], [self.device], True, False, self.semantics, enable_x64=True
        )

    def result_handler(self, aval: _ir.ShapedArray) -> Any:
        return self.xc.array_result_handler(aval, self.sharding, True, _skip_checks=True)


_backend: _Backend | None = None
_backend_lock = threading.Lock()


def backend() -> _Backend:
    """The process's XLA backend, made on first use."""
    global _backend
    if _backend is None:
        with _backend_lock:
            if _backend is None:
                _backend = _Backend()
    return _backend


class _DLPackView:
    """Hands a device buffer to ``np.from_dlpack`` (CPU, zero copy, read only)."""

    __slots__ = ("_buffer",)

    def __init__(self, buffer: Any) -> None:
        self._buffer = buffer

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return backend().jax_ext.buffer_to_dlpack_managed_tensor(self._buffer)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class DeviceArray(ConcreteArray):
    """An array on the XLA device: what jitted functions return.

    NumPy conversion (``np.asarray``) copies nothing on CPU; the host value is cached.
    Passing it to another jitted function keeps it on the device.
    """

    __slots__ = ("_buffer", "_aval", "_host")

    def __init__(self, buffer: Any, aval: _ir.ShapedArray) -> None:
        self._buffer = buffer
        self._aval = aval
        self._host: np.ndarray[Any, Any] | None = None

    @property
    def _value(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        if self._host is None:
            self._host = _to_host(self._buffer, self._aval)
        return self._host

    @property
    def _weak(self) -> bool:  # type: ignore[override]
        return self._aval.weak_type

    @property
    def aval(self) -> _ir.ShapedArray:
        return self._aval

    @property
    def shape(self) -> tuple[int, ...]:
        return self._aval.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._aval.dtype

    @property
    def weak_type(self) -> bool:
        return self._aval.weak_type

    def block_until_ready(self) -> DeviceArray:
        """Waits until the value is computed; returns the array."""
        self._buffer.block_until_ready()
        return self


def _to_host(buffer: Any, aval: _ir.ShapedArray) -> np.ndarray[Any, Any]:
    if aval.dtype == dtypes.bfloat16:
        # DLPack has no bfloat16: view the bits as uint16 through a tiny program.
        return _bf16_to_host(buffer, aval)
    out = np.from_dlpack(_DLPackView(buffer))
    return out


def _bf16_to_host(buffer: Any, aval: _ir.ShapedArray) -> np.ndarray[Any, Any]:
    shape = "x".join(str(d) for d in aval.shape)
    ty_in = f"tensor<{shape + 'x' if shape else ''}bf16>"
    ty_out = f"tensor<{shape + 'x' if shape else ''}ui16>"
    text = (
        "module @bf16_bits {\n"
        f"  func.func public @main(%a: {ty_in}) -> ({ty_out}) {{\n"
        f'    %0 = "stablehlo.bitcast_convert"(%a) : ({ty_in}) -> {ty_out}\n'
        f'    "func.return"(%0) : ({ty_out}) -> ()\n'
        "  }\n}\n"
    )
    exe = compile_stablehlo(text, [_ir.ShapedArray(aval.shape, np.uint16)])
    (bits,) = exe.execute_buffers([buffer])
    return np.from_dlpack(_DLPackView(bits)).view(dtypes.bfloat16)


def device_put(x: Any) -> Array:
    """``x`` (an array-like) on the device, as a :class:`ferrax.Array`."""
    if isinstance(x, DeviceArray):
        return x
    # NumPy values and Python scalars are typed as JAX types them (float64 is float32
    # without x64).
    aval = aval_of(x)
    return DeviceArray(_put(to_numpy(x), aval), aval)


def _put(value: np.ndarray[Any, Any], aval: _ir.ShapedArray) -> Any:
    if value.dtype != aval.dtype:
        value = value.astype(aval.dtype)
    return backend().put(np.ascontiguousarray(value), aval)


def buffer_of(x: Any, aval: _ir.ShapedArray) -> Any:
    """A device buffer holding ``x`` with type ``aval`` (no copy for device arrays)."""
    if isinstance(x, DeviceArray):
        return x._buffer
    return _put(to_numpy(x), aval)


_LOCATION = re.compile(r":(\d+):(\d+): error: (.*)")


class Executable:
    """A compiled program: call it with device buffers, get device buffers back."""

    __slots__ = ("_exe", "out_avals", "_handlers", "text")

    def __init__(self, exe: Any, out_avals: Sequence[_ir.ShapedArray], text: str) -> None:
        self._exe = exe
        self.out_avals = list(out_avals)
        be = backend()
        self._handlers = [be.result_handler(a) for a in self.out_avals]
        self.text = text

    def execute_buffers(self, buffers: Sequence[Any]) -> list[Any]:
        """Runs on device buffers; returns device buffers."""
        return self._exe.execute_sharded(list(buffers)).consume_with_handlers(self._handlers)  # type: ignore[no-any-return]

    def __call__(self, buffers: list[Any]) -> list[DeviceArray]:
        outs = self._exe.execute_sharded(buffers).consume_with_handlers(self._handlers)
        return [DeviceArray(b, a) for b, a in zip(outs, self.out_avals)]


def compile_stablehlo(text: str, out_avals: Sequence[_ir.ShapedArray]) -> Executable:
    """Compiles a StableHLO module; a module XLA refuses is a :class:`LoweringError`
    quoting the offending line, and so is one nested too deeply for XLA to compile
    (see :func:`nesting_depth`)."""
    depth = nesting_depth(text)
    if depth > MAX_NESTING_DEPTH:
        raise LoweringError(
            f"the program nests control flow and calls {depth} levels deep (cond, while_loop, "
            f"fori_loop, scan and jit inside one another); XLA's compiler recurses once per "
            f"level on a fixed stack and crashes the process beyond about 190, so ferrax "
            f"refuses more than {MAX_NESTING_DEPTH}: flatten the nesting (one loop over a "
            "stacked operand, lax.switch instead of nested conds)"
        )
    be = backend()
    try:
        exe = be.client.compile_and_load(text, be.devices, be.xc.CompileOptions())
    except RuntimeError as e:
        raise LoweringError(_describe_compile_error(str(e), text)) from None
    return Executable(exe, out_avals, text)


def _describe_compile_error(message: str, text: str) -> str:
    m = _LOCATION.search(message)
    if m is None:
        return f"XLA could not compile the lowered module: {message.strip()}"
    line_no = int(m.group(1))
    lines = text.splitlines()
    line = lines[line_no - 1].strip() if 0 < line_no <= len(lines) else "?"
    return f"XLA could not compile the lowered module: {m.group(3).strip()}\n  at line {line_no}: {line}"


# XLA's StableHLO-to-HLO conversion recurses once per nested region and per call, on the
# stack of a compiler thread of fixed size: nesting 96 conds, loops or scans (192 levels
# as counted below) or 200 jit calls overflows it and kills the process (jaxlib 0.10.2;
# JAX's own lowering, with regions and no calls, crashes at 300 nested conds). A module
# deeper than this is refused with a LoweringError instead.
MAX_NESTING_DEPTH = 128

_FUNC_LINE = re.compile(r"\s*func\.func (?:public |private )?@([^(\s]+)\(")
_CALLEE = re.compile(r"callee = @([^}\s,]+)")


def nesting_depth(text: str) -> int:
    """How deeply a lowered module nests: the longest chain of regions (case, while,
    reduce bodies) and calls from ``@main``, each counting one level.

    Read from the text ferrax's lowering prints: a region opens and closes on lines of
    its own, attribute braces are balanced within a line."""
    own: dict[str, int] = {}
    calls: dict[str, list[tuple[int, str]]] = {}
    current: str | None = None
    depth = 0
    for line in text.splitlines():
        m = _FUNC_LINE.match(line)
        if m is not None:
            current = m.group(1)
            own[current] = 0
            calls[current] = []
            depth = 0
            continue
        if current is None:
            continue
        depth += line.count("{") - line.count("}")
        if depth > own[current]:
            own[current] = depth
        if "func.call" in line:
            c = _CALLEE.search(line)
            if c is not None:
                calls[current].append((depth, c.group(1)))
    # Depth of each function, callees first (an explicit stack: chains of calls may be
    # longer than Python's recursion limit).
    total: dict[str, int] = {}
    for root in own:
        stack = [root]
        while stack:
            name = stack[-1]
            if name in total:
                stack.pop()
                continue
            pending = [c for _, c in calls.get(name, ()) if c not in total and c in own and c != name]
            if pending:
                stack.extend(pending)
                continue
            total[name] = max(
                [own[name]] + [d + 1 + total.get(c, 0) for d, c in calls.get(name, ()) if c in total]
            )
            stack.pop()
    return max(total.values(), default=0)
