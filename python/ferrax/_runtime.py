"""Running compiled programs with jaxlib's XLA client (CPU), without importing ``jax``.

One client per process, made on first use. Arrays live on its device as
:class:`DeviceArray` (a :class:`ferrax.Array`) until NumPy asks for them. See the
project's notes on jaxlib's runtime API for why each call is made the way it is.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

import numpy as np

from ferrax import _config, _ir, dtypes
from ferrax._array import Array
from ferrax._core import ConcreteArray, aval_of, pack_keys, physical_aval, to_numpy, unpack_keys, user_location
from ferrax.errors import LoweringError, ShardingError
from ferrax.sharding import Mesh, PositionalSharding, Sharding, SingleDeviceSharding, named_from_hlo

__all__ = ["DeviceArray", "Executable", "block_until_ready", "compile_stablehlo", "device_get", "device_put"]

T = TypeVar("T")

# XLA's C++ logging prints INFO lines (the client's device count, ...) on stderr unless
# told otherwise before jaxlib loads; JAX keeps them off by default in the same way, and
# the environment variable still turns them on (TF_CPP_MIN_LOG_LEVEL=0).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


class _Backend:
    """The CPU client with its devices, and the jaxlib objects every transfer uses."""

    def __init__(self) -> None:
        from jaxlib import xla_client

        from ferrax import _config

        xc: Any = xla_client  # jaxlib's stubs lag its runtime API
        self.xc = xc
        self.jax_ext: Any = importlib.import_module("jaxlib._jax")
        n = _config.config.jax_num_cpu_devices
        if n < 0:
            env = os.environ.get("JAX_NUM_CPU_DEVICES")
            n = int(env) if env else -1
        kwargs: dict[str, Any] = {}
        if n >= 0:
            kwargs["num_devices"] = n
        dist = _config.distributed_state
        if dist is not None:
            kwargs.update(
                distributed_client=dist.client,
                node_id=dist.process_id,
                num_nodes=dist.num_processes,
                collectives=dist.collectives,
            )
        self.client: Any = xc.make_cpu_client(**kwargs)
        _config.backend_started = True
        self.process_index: int = int(self.client.process_index())
        self.all_devices: list[Any] = list(self.client.devices())
        self.local: list[Any] = list(self.client.local_devices())
        self.device: Any = self.local[0]
        self.devices = xc.DeviceList((self.device,))
        self.sharding = xc.GSPMDSharding(self.devices, xc.HloSharding.replicate())
        self.semantics = xc.HostBufferSemantics.IMMUTABLE_UNTIL_TRANSFER_COMPLETES
        self._xshardings: dict[tuple[Any, int], Any] = {}

    def put(self, value: np.ndarray[Any, Any], aval: _ir.ShapedArray) -> Any:
        return self.xc.batched_device_put(
            aval, self.sharding, [value], [self.device], True, False, self.semantics, enable_x64=True
        )

    def result_handler(self, aval: _ir.ShapedArray, xsharding: Any = None) -> Any:
        return self.xc.array_result_handler(
            aval, self.sharding if xsharding is None else xsharding, True, _skip_checks=True
        )

    def xsharding(self, sharding: Sharding, rank: int) -> Any:
        """jaxlib's sharding object for ``sharding`` on arrays of rank ``rank``."""
        key = (sharding, rank)
        found = self._xshardings.get(key)
        if found is None:
            devices = self.xc.DeviceList(sharding._device_assignment)
            hlo = self.xc.HloSharding.from_string(sharding._hlo_text(rank))
            found = self._xshardings[key] = self.xc.GSPMDSharding(devices, hlo)
        return found

    def put_sharded(self, value: np.ndarray[Any, Any], aval: _ir.ShapedArray, sharding: Sharding) -> Any:
        """``value`` laid out as ``sharding`` says: each addressable device gets its part.

        Each part is put on its device alone and the parts are joined into one array
        (jaxlib's batched put of a layout with copies calls a hook only ``jax`` installs)."""
        index = sharding.devices_indices_map(value.shape)
        devices = [d for d in sharding._device_assignment if d.process_index == self.process_index]
        if len(sharding._device_assignment) == 1:
            return self.xc.batched_device_put(
                aval, self.single(devices[0]), [value], devices, True, False, self.semantics,
                enable_x64=True,
            )
        parts = []
        for d in devices:
            part = np.ascontiguousarray(value[index[d]])
            part_aval = _ir.ShapedArray(part.shape, aval.dtype, aval.weak_type)
            parts.append(
                self.xc.batched_device_put(
                    part_aval, self.single(d), [part], [d], True, False, self.semantics, enable_x64=True
                )
            )
        return self.jax_ext.ArrayImpl(aval, self.xsharding(sharding, value.ndim), parts, True, True)

    def single(self, device: Any) -> Any:
        """jaxlib's sharding of one device."""
        key = (device.id, -1)
        found = self._xshardings.get(key)
        if found is None:
            found = self._xshardings[key] = self.xc.GSPMDSharding(
                self.xc.DeviceList((device,)), self.xc.HloSharding.replicate()
            )
        return found


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

    __slots__ = ("_buffer", "_aval", "_host", "_sharding")

    def __init__(self, buffer: Any, aval: _ir.ShapedArray, sharding: Sharding | None = None) -> None:
        self._buffer = buffer
        self._aval = aval
        self._host: np.ndarray[Any, Any] | None = None
        # None: on the default device, not committed to it (as JAX's uncommitted arrays).
        self._sharding = sharding

    @property
    def _value(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        if self._host is None:
            s = self._sharding
            if s is None or s.num_devices == 1 or (
                s.is_fully_replicated_for(len(self._aval.shape)) and self._aval.dtype != dtypes.bfloat16
            ):
                self._host = _to_host(self._buffer, physical_aval(self._aval))
            else:
                self._host = _gathered_to_host(self._buffer, physical_aval(self._aval), s)
            if dtypes.is_key(self._aval.dtype):
                self._host = pack_keys(self._host)
        return self._host

    @property
    def sharding(self) -> Sharding:
        """How the array is laid out over devices."""
        s = self._sharding
        return SingleDeviceSharding(backend().device) if s is None else s

    @property
    def committed(self) -> bool:
        """Whether the array was placed on its devices on purpose (``device_put`` with a
        device or sharding, or a result of such arrays): jit keeps it there."""
        return self._sharding is not None

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every device holds the whole array."""
        return self.sharding.is_fully_replicated_for(len(self._aval.shape))

    @property
    def addressable_shards(self) -> list[Shard]:
        """This process's parts of the array, one per device, in the sharding's order."""
        s = self.sharding
        index = s.devices_indices_map(self._aval.shape)
        replica = s._replica_ids(len(self._aval.shape))
        me = backend().process_index
        return [Shard(d, index[d], replica[d], self) for d in s._device_assignment if d.process_index == me]

    def devices(self) -> set[Any]:
        """The devices holding the array."""
        return self.sharding.device_set

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


class Shard:
    """One device's part of an array (``Array.addressable_shards``), as JAX's ``Shard``:
    the device, the index of the part in the whole array, which copy it is, and the
    part as an array on that device (``.data``)."""

    __slots__ = ("device", "index", "replica_id", "_array", "_data")

    def __init__(self, device: Any, index: tuple[slice, ...], replica_id: int, array: DeviceArray) -> None:
        self.device = device
        self.index = index
        self.replica_id = replica_id
        self._array = array
        self._data: DeviceArray | None = None

    @property
    def data(self) -> DeviceArray:
        """The part, on its device."""
        if self._data is None:
            part = np.ascontiguousarray(np.asarray(self._array)[self.index])
            aval = _ir.ShapedArray(part.shape, self._array._aval.dtype, self._array._aval.weak_type)
            sharding = SingleDeviceSharding(self.device)
            self._data = DeviceArray(backend().put_sharded(part, aval, sharding), aval, sharding)
        return self._data

    def __repr__(self) -> str:
        return f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id})"


_gather_programs: dict[tuple[Any, ...], Executable] = {}


def _gathered_to_host(buffer: Any, aval: _ir.ShapedArray, sharding: Sharding) -> np.ndarray[Any, Any]:
    """A split array's value: XLA gathers the parts on every device (a compiled identity
    whose result is replicated, cached per type and layout), then the first device's copy
    is read zero-copy. bf16 is read as its bits."""
    rank = len(aval.shape)
    key = (aval.shape, aval.dtype, sharding, rank)
    exe = _gather_programs.get(key)
    bf16 = aval.dtype == dtypes.bfloat16
    if exe is None:
        tiles, order, copies = sharding._tiling(rank)
        names = [f"d{i}" for i in range(rank)] + ["copies"]
        sizes = tiles + [copies]
        mesh_axes = ", ".join(f'"{n}"={k}' for n, k in zip(names, sizes))
        ids = "" if order == sorted(order) else f", device_ids=[{', '.join(map(str, order))}]"
        split = ", ".join(f'{{"{names[i]}"}}' if tiles[i] > 1 else "{}" for i in range(rank))
        whole = ", ".join("{}" for _ in range(rank))
        shape = "x".join(str(d) for d in aval.shape)
        el = _ir.ShapedArray((), aval.dtype).str_short()[:-2]
        ty = f"tensor<{shape + 'x' if shape else ''}{_MLIR_ELEMENT.get(el, el)}>"
        ty_out = ty.replace("bf16>", "ui16>") if bf16 else ty
        body = f'    %0 = "stablehlo.bitcast_convert"(%a) : ({ty}) -> {ty_out}\n' if bf16 else ""
        result = "%0" if bf16 else "%a"
        n = sharding.num_devices
        text = (
            f"module @gather attributes {{mhlo.num_partitions = {n} : i32, mhlo.num_replicas = 1 : i32}} {{\n"
            f"  sdy.mesh @mesh = <[{mesh_axes}]{ids}>\n"
            f"  func.func public @main(%a: {ty} {{sdy.sharding = #sdy.sharding<@mesh, [{split}]>}}) -> "
            f"({ty_out} {{sdy.sharding = #sdy.sharding<@mesh, [{whole}]>}}) {{\n"
            f"{body}    return {result} : {ty_out}\n  }}\n}}\n"
        )
        out_aval = _ir.ShapedArray(aval.shape, np.uint16) if bf16 else aval
        exe = compile_stablehlo(text, [out_aval], devices=sharding._device_assignment)
        _gather_programs[key] = exe
    (whole_buf,) = exe.execute_buffers([buffer])
    out = np.from_dlpack(_DLPackView(whole_buf))
    return out.view(dtypes.bfloat16) if bf16 else out


_MLIR_ELEMENT = {"bool": "i1", "u8": "ui8", "u16": "ui16", "u32": "ui32", "u64": "ui64"}


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


@overload
def device_put(x: Array | np.ndarray[Any, Any] | np.generic | float | int | bool, device: Any = None) -> Array: ...
@overload
def device_put(x: T, device: Any = None) -> T: ...
def device_put(x: Any, device: Any = None) -> Any:
    """``x`` (an array-like, or a pytree of them) on a device, as :class:`ferrax.Array`s.

    ``device`` is None (the default device; the array is not committed to it), a device
    (``ferrax.devices()[1]``), or a :class:`~ferrax.sharding.Sharding` laying the array
    out over several devices (a pytree of shardings for a pytree of values).
    """
    from ferrax.tree_util import tree_flatten, tree_unflatten

    if isinstance(x, DeviceArray) and device is None:
        return x
    if isinstance(x, (DeviceArray, np.ndarray, np.generic, int, float, bool, complex)) or hasattr(x, "__array__"):
        return _device_put_one(x, device)
    leaves, tree = tree_flatten(x)
    if device is None or isinstance(device, Sharding) or not _is_tree_of_targets(device):
        return tree_unflatten(tree, [_device_put_one(v, device) for v in leaves])
    targets, target_tree = tree_flatten(device, is_leaf=lambda t: t is None or isinstance(t, Sharding))
    if target_tree != tree:
        raise ValueError(
            f"device_put: the tree of devices/shardings {target_tree} does not match the tree of values {tree}"
        )
    return tree_unflatten(tree, [_device_put_one(v, t) for v, t in zip(leaves, targets)])


def device_get(x: Any) -> Any:
    """``x`` (a pytree) with each array leaf copied to the host as a NumPy array (what
    its ``__array__`` gives); tracers and leaves that are not arrays are left as they
    are."""
    from ferrax._core import Tracer
    from ferrax.tree_util import tree_map

    def get(leaf: Any) -> Any:
        if isinstance(leaf, Tracer):
            return leaf
        to_array = getattr(leaf, "__array__", None)
        return leaf if to_array is None else to_array()

    return tree_map(get, x)


def block_until_ready(x: T) -> T:
    """Waits until every array in the pytree ``x`` is computed; returns ``x``."""
    from ferrax.tree_util import tree_leaves

    for leaf in tree_leaves(x):
        wait = getattr(leaf, "block_until_ready", None)
        if wait is not None:
            wait()
    return x


def _is_tree_of_targets(device: Any) -> bool:
    return isinstance(device, (tuple, list, dict))


def _device_put_one(x: Any, device: Any) -> DeviceArray:
    if device is None:
        if isinstance(x, DeviceArray):
            return x
        aval = aval_of(x)
        return DeviceArray(_put(to_numpy(x), aval), aval)
    sharding = device if isinstance(device, Sharding) else SingleDeviceSharding(_check_device(device))
    if isinstance(x, DeviceArray):
        if x._sharding == sharding:
            return x
        aval = x._aval
        value = np.asarray(x)
    else:
        aval = aval_of(x)
        value = to_numpy(x)
        if not dtypes.is_key(aval.dtype) and value.dtype != aval.dtype:
            value = value.astype(aval.dtype)
    if dtypes.is_key(aval.dtype):
        if len(sharding._device_assignment) != 1:
            raise NotImplementedError(
                f"device_put of PRNG key arrays over several devices is not supported yet, at {user_location()}"
            )
        buffer = backend().xc.batched_device_put(
            physical_aval(aval), backend().single(sharding._device_assignment[0]),
            [np.ascontiguousarray(unpack_keys(value))], list(sharding._device_assignment), True, False,
            backend().semantics, enable_x64=True,
        )
        return DeviceArray(buffer, aval, sharding)
    try:
        buffer = backend().put_sharded(np.asarray(value, order="C"), aval, sharding)
    except ShardingError as e:
        raise ShardingError(f"One of device_put args is incompatible with its sharding annotation {sharding!r}: {e}") from None
    return DeviceArray(buffer, aval, sharding)


def _check_device(device: Any) -> Any:
    be = backend()
    if not any(device is d or (hasattr(device, "id") and d.id == device.id) for d in be.all_devices):
        raise ValueError(f"device_put: {device!r} is not a device of this process's backend ({be.all_devices})")
    return device


def _put(value: np.ndarray[Any, Any], aval: _ir.ShapedArray) -> Any:
    if dtypes.is_key(aval.dtype):
        # A key array goes to the device as its data (JAX's physical layout).
        return backend().put(np.ascontiguousarray(unpack_keys(value)), physical_aval(aval))
    if value.dtype != aval.dtype:
        value = value.astype(aval.dtype)
    return backend().put(np.ascontiguousarray(value), aval)


def buffer_of(x: Any, aval: _ir.ShapedArray) -> Any:
    """A device buffer holding ``x`` with type ``aval`` (no copy for device arrays)."""
    if isinstance(x, DeviceArray):
        return x._buffer
    if dtypes.is_key(aval.dtype):
        # Packed keys (uint64 words) as they are: not canonicalized to 32 bits.
        return _put(np.asarray(x._value if isinstance(x, ConcreteArray) else x, dtype=np.uint64), aval)
    return _put(to_numpy(x), aval)


_LOCATION = re.compile(r":(\d+):(\d+): error: (.*)")


class Executable:
    """A compiled program: call it with device buffers, get device buffers back.

    A program compiled for several devices (``devices``, in partition order) returns
    arrays laid out as XLA's partitioner chose (``out_shardings``), spelled as
    :class:`NamedSharding` of ``mesh`` when one spells it."""

    __slots__ = ("_exe", "out_avals", "_handlers", "text", "out_shardings", "_devices", "ordered")

    def __init__(
        self, exe: Any, out_avals: Sequence[_ir.ShapedArray], text: str,
        devices: Sequence[Any] | None = None, mesh: Mesh | None = None,
    ) -> None:
        self._exe = exe
        self.out_avals = list(out_avals)
        be = backend()
        self.text = text
        self._devices = devices
        # A program with ordered effects takes the runtime token first and returns the
        # next one first (see ``_run``).
        self.ordered = _TOKEN_MARK in text
        token_handlers = [be.result_handler(_TOKEN_AVAL)] if self.ordered else []
        if devices is None:
            self.out_shardings: list[Sharding | None] = [None] * len(self.out_avals)
            self._handlers = token_handlers + [be.result_handler(physical_aval(a)) for a in self.out_avals]
            return
        # None when the program was not partitioned (one device): every result whole.
        protos = exe.get_output_shardings() or [None] * (len(self.out_avals) + len(token_handlers))
        protos = protos[len(token_handlers):]
        self.out_shardings = []
        self._handlers = []
        for aval, proto in zip(self.out_avals, protos):
            rank = len(aval.shape)
            text = "{replicated}" if proto is None else str(be.xc.HloSharding.from_proto(proto))
            sharding = sharding_from_hlo(text, rank, devices, mesh)
            self.out_shardings.append(sharding)
            if dtypes.is_key(aval.dtype):
                # A key array's data has one more (whole) axis than the keys.
                self._handlers.append(be.result_handler(physical_aval(aval), be.xsharding(sharding, rank + 1)))
            else:
                self._handlers.append(be.result_handler(aval, be.xsharding(sharding, rank)))
        self._handlers = token_handlers + self._handlers

    def parameter_shardings(self, ranks: Sequence[int], mesh: Mesh | None) -> list[Sharding]:
        """The layout XLA expects of each argument (of these ranks), for a program
        compiled for several devices."""
        assert self._devices is not None
        be = backend()
        protos = self._exe.get_parameter_shardings() or [None] * (len(ranks) + self.ordered)
        protos = protos[int(self.ordered):]
        return [
            sharding_from_hlo(
                "{replicated}" if proto is None else str(be.xc.HloSharding.from_proto(proto)), rank, self._devices, mesh
            )
            for proto, rank in zip(protos, ranks)
        ]

    def _run(self, buffers: Sequence[Any]) -> list[Any]:
        if not self.ordered:
            return self._exe.execute_sharded(list(buffers)).consume_with_handlers(self._handlers)  # type: ignore[no-any-return]
        # Ordered effects: the token the previous ordered run returned goes in, so XLA
        # runs this program's ordered callbacks after that run's (as JAX's runtime
        # tokens); the one returned is kept for the next run.
        global _runtime_token
        with _token_lock:
            token = _runtime_token
            if token is None:
                token = backend().put(np.zeros(0, np.bool_), _TOKEN_AVAL)
            outs = self._exe.execute_sharded([token, *buffers]).consume_with_handlers(self._handlers)
            _runtime_token = outs[0]
        return outs[1:]  # type: ignore[no-any-return]

    def hit_path(self) -> tuple[Any, Any, list[Any], list[_ir.ShapedArray]] | None:
        """What jit's hit path (``ferrax._ir.Dispatcher``) calls to run this program as
        :meth:`__call__` does: jaxlib's bound ``execute_sharded``, its
        ``ExecuteResults.consume_with_handlers``, the result handlers and the outputs'
        types. None for programs it does not run: ordered effects (the runtime token)
        and programs compiled for other devices than the default one."""
        if self.ordered or self._devices is not None:
            return None
        consume = backend().jax_ext.ExecuteResults.consume_with_handlers
        return self._exe.execute_sharded, consume, self._handlers, self.out_avals

    def execute_buffers(self, buffers: Sequence[Any]) -> list[Any]:
        """Runs on device buffers; returns device buffers."""
        return self._run(buffers)

    def __call__(self, buffers: list[Any]) -> list[DeviceArray]:
        outs = self._run(buffers)
        return [DeviceArray(b, a, s) for b, a, s in zip(outs, self.out_avals, self.out_shardings)]


# The runtime token of ordered effects: what the last program with ordered effects
# returned (a device buffer XLA orders the next such program after), as JAX's
# ``runtime_tokens``; None before the first.
_TOKEN_MARK = "!stablehlo.token {jax.token = true}"
_TOKEN_AVAL = _ir.ShapedArray((0,), np.dtype(np.bool_))
_runtime_token: Any = None
_token_lock = threading.Lock()


_HLO_TILED = re.compile(r"\{devices=\[([\d,]+)\]([^ }]*)( last_tile_dim_replicate)?\}")
_HLO_IOTA = re.compile(r"<=\[([\d,]+)\](?:T\(([\d,]+)\))?")


def sharding_from_hlo(text: str, rank: int, devices: Sequence[Any], mesh: Mesh | None) -> Sharding:
    """The layout an HloSharding text describes over ``devices`` (partition order): a
    :class:`NamedSharding` of ``mesh`` when one spells it."""
    n = len(devices)
    if text in ("{replicated}", "") or text.startswith("{maximal"):
        tiles, order, copies = [1] * rank, list(range(n)), n
    else:
        m = _HLO_TILED.fullmatch(text)
        if m is None:
            raise LoweringError(f"XLA chose a layout ferrax cannot read: {text}")
        dims = [int(d) for d in m.group(1).split(",")]
        ids_text = m.group(2)
        if ids_text.startswith("<="):
            im = _HLO_IOTA.fullmatch(ids_text)
            if im is None:
                raise LoweringError(f"XLA chose a layout ferrax cannot read: {text}")
            reshape = [int(d) for d in im.group(1).split(",")]
            ids = np.arange(math.prod(reshape)).reshape(reshape)
            if im.group(2):
                ids = ids.transpose([int(p) for p in im.group(2).split(",")])
            order = [int(i) for i in ids.reshape(-1)]
        else:
            order = [int(i) for i in ids_text.split(",")]
        if m.group(3):
            tiles, copies = dims[:-1], dims[-1]
        else:
            tiles, copies = dims, 1
    if mesh is not None and len(tiles) == rank:
        named = named_from_hlo(mesh, rank, tiles, order, copies)
        if named is not None:
            return named
    if n == 1:
        return SingleDeviceSharding(devices[0])
    return PositionalSharding(devices, text, tiles, order, copies)


def compile_stablehlo(
    text: str, out_avals: Sequence[_ir.ShapedArray], devices: Sequence[Any] | None = None,
    mesh: Mesh | None = None, host_callbacks: Sequence[Callable[..., Any]] = (),
) -> Executable:
    """Compiles a StableHLO module; a module XLA refuses is a :class:`LoweringError`
    quoting the offending line, and so is one nested too deeply for XLA to compile
    (see :func:`nesting_depth`). With ``devices`` (in partition order: several, or one
    that is not the default), the module is partitioned over them by XLA's SPMD
    partitioner (Shardy), as its arguments' and results' annotations ask."""
    depth = nesting_depth(text)
    if depth > MAX_NESTING_DEPTH:
        raise LoweringError(
            f"the program nests control flow and calls {depth} levels deep (cond, while_loop, "
            f"fori_loop, scan and jit inside one another); XLA's compiler recurses once per "
            f"level on a fixed stack and crashes the process beyond about 190, so ferrax "
            f"refuses more than {MAX_NESTING_DEPTH}: flatten the nesting (one loop over a "
            "stacked operand, lax.switch instead of nested conds)"
        )
    _check_host_callbacks(text, len(host_callbacks))
    be = backend()
    if "@lapack_" in text or '"lapack_' in text:
        _register_lapack(be)
    options = be.xc.CompileOptions()
    device_list = be.devices
    if devices is not None:
        n = len(devices)
        device_list = be.xc.DeviceList(tuple(devices))
        options.num_replicas = 1
        options.num_partitions = n
        build = options.executable_build_options
        build.use_spmd_partitioning = n > 1
        build.use_shardy_partitioner = True
        options.device_assignment = be.xc.DeviceAssignment.create(
            np.array([d.id for d in devices], dtype=np.int32).reshape(1, n)
        )
    try:
        if host_callbacks:
            # jaxlib takes host callbacks only with a parsed module (see _mlir_module);
            # such programs are not cached (their callbacks are bound here).
            exe = be.client.compile_and_load(
                _mlir_module(text), device_list, options, host_callbacks=list(host_callbacks)
            )
        elif _config.config.jax_compilation_cache_dir:
            exe = _compile_cached(be, text, device_list, options)
        else:
            exe = be.client.compile_and_load(text, device_list, options)
    except RuntimeError as e:
        raise LoweringError(_describe_compile_error(str(e), text)) from None
    return Executable(exe, out_avals, text, devices, mesh)


def _compile_cached(be: Any, text: str, device_list: Any, options: Any) -> Any:
    """``compile_and_load`` through the persistent compilation cache."""
    from ferrax import _compilation_cache

    cfg = _config.config
    directory = cfg.jax_compilation_cache_dir
    assert directory is not None
    kinds = [d.device_kind for d in device_list]
    key = _compilation_cache.entry_key(
        text, options.SerializeAsString(), be.client.platform, be.client.platform_version, kinds
    )
    return _compilation_cache.compile_cached(
        directory, key,
        compile=lambda: be.client.compile_and_load(text, device_list, options),
        serialize=lambda exe: exe.serialize(),
        load=lambda data: be.client.deserialize_executable(data, device_list, options),
        min_compile_secs=cfg.jax_persistent_cache_min_compile_time_secs,
    )


_MLIR_CONTEXT: Any = None
_CALLBACK_INDEX = re.compile(r"xla_ffi_python_cpu_callback.*?\{index = (\d+) : ui64\}")


def _check_host_callbacks(text: str, given: int) -> None:
    """Refuses a module whose host-callback custom calls name an index beyond the
    callbacks given: XLA would call a function that does not exist (and crash)."""
    if "xla_ffi_python_cpu_callback" not in text:
        return
    needed = max(int(m.group(1)) for m in _CALLBACK_INDEX.finditer(text)) + 1 if _CALLBACK_INDEX.search(text) else 1
    if needed > given:
        raise LoweringError(
            f"the module calls host callback {needed - 1} (debug.print, pure_callback, ...) but "
            f"{given} host callbacks were given: lower it with _ir.lower_with_callbacks and "
            "compile it with those"
        )


def _mlir_module(text: str) -> Any:
    """The module text parsed by jaxlib's MLIR (StableHLO, CHLO, MHLO and Shardy
    dialects registered), the form jaxlib's compiler takes with host callbacks (the
    custom calls of ``debug_callback`` and ``pure_callback`` name them by index)."""
    global _MLIR_CONTEXT
    from jaxlib.mlir import ir
    from jaxlib.mlir._mlir_libs import _chlo, _jax_mlir_ext, _mlirHlo, _sdy, _stablehlo

    if _MLIR_CONTEXT is None:
        context = ir.Context()
        registry = ir.DialectRegistry()
        _jax_mlir_ext.register_dialects(registry)
        context.append_dialect_registry(registry)
        context.load_all_available_dialects()
        _stablehlo.register_dialect(context)
        _chlo.register_dialect(context)
        _mlirHlo.register_mhlo_dialect(context)
        _sdy.register_dialect(context)
        _MLIR_CONTEXT = context
    with _MLIR_CONTEXT:
        try:
            return ir.Module.parse(text)
        except Exception as e:  # jaxlib's MLIRError, with the diagnostics
            raise LoweringError(f"XLA could not parse the lowered module: {e}") from None


_lapack_registered = threading.Event()


def _register_lapack(be: _Backend) -> None:
    """Registers jaxlib's LAPACK FFI kernels (``lapack_spotrf_ffi``, ...) with the CPU
    client, once, as JAX does at import: ``initialize()`` fills jaxlib's table of LAPACK
    routines from SciPy's (``scipy.linalg.cython_lapack``), so eager code calling SciPy's
    LAPACK and compiled code run the same routines."""
    if _lapack_registered.is_set():
        return
    with _backend_lock:
        if _lapack_registered.is_set():
            return
        lapack: Any = importlib.import_module("jaxlib.cpu._lapack")
        lapack.initialize()
        for name, target in lapack.registrations().items():
            be.xc.register_custom_call_target(name, target, platform="cpu", api_version=1)
        _lapack_registered.set()


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
