"""``ferrax.distributed``: several processes computing together, over jaxlib's distributed
runtime, as ``jax.distributed``.

Every process calls :func:`initialize` before its first computation::

    ferrax.distributed.initialize("10.0.0.1:1234", num_processes=2, process_id=0)  # on 0
    ferrax.distributed.initialize("10.0.0.1:1234", num_processes=2, process_id=1)  # on 1

Process 0 starts the coordination service on the address's port; every process connects
to it as a client; the CPU client is then made with every process's devices
(``ferrax.devices()`` lists them all, ``ferrax.local_devices()`` this process's) and
gloo collectives over TCP. A mesh may hold devices of several processes; an array laid
out over it holds only this process's parts (:func:`ferrax.make_array_from_process_local_data`
builds one from each process's data).

Failures are errors, never hangs: a coordinator that cannot be reached within
``initialization_timeout`` seconds is a :class:`DistributedError` naming its address
(and so is a coordinator port already in use on process 0). A process that dies while
another computes with it: an all-gather on the survivor raises a ``RuntimeError`` at
once (gloo sees the connection close); otherwise (an all-reduce waiting for it, or no
computation at all) the coordination service notices the missed heartbeats (at the
latest after ``heartbeat_timeout_seconds``) and jaxlib terminates every other process
with a message naming the dead one ("The following tasks are unhealthy (stopped sending heartbeats):
1"), as under JAX. jaxlib's ``missed_heartbeat_callback`` cannot take a Python function
instead (jaxlib 0.10.2 cannot pass the status to Python: the process aborts with
``std::bad_cast``), so it is left to jaxlib's default. Processes that never join make
``initialize`` end the same way after ``initialization_timeout``.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from ferrax import _config
from ferrax._core import user_location
from ferrax.errors import FerraxError

__all__ = ["DistributedError", "initialize", "is_initialized", "shutdown"]

logger = logging.getLogger(__name__)


class DistributedError(FerraxError, RuntimeError):
    """The distributed runtime failed: the coordinator could not be reached, or not every
    process joined in time. Also a ``RuntimeError``."""


class _State:
    """The process's part of a distributed run (read by the runtime when it makes its
    CPU client: ``client``, ``process_id``, ``num_processes``, ``collectives``)."""

    def __init__(self) -> None:
        self.process_id: int = 0
        self.num_processes: int = 1
        self.service: Any = None
        self.client: Any = None
        self.collectives: Any = None
        self.coordinator_address: str | None = None
        self.partition_index: int | None = None
        self.local_device_ids: list[int] | None = None


global_state = _State()
_atexit_registered: list[bool] = []
_lock = threading.Lock()


def _ompi_env() -> tuple[str | None, int | None, int | None, list[int] | None] | None:
    """Open MPI's launcher (``mpirun``): the coordinator on the launcher's host."""
    import re

    uri = os.environ.get("OMPI_MCA_orte_hnp_uri")
    if uri is None:
        return None
    port = os.environ.get("JAX_COORDINATOR_PORT")
    if not port:
        job = int(uri.split(".", maxsplit=1)[0]) // 2**12
        port = str(job % 2**12 + (65535 - 2**12 + 1))
    m = re.search(r"tcp://(.+?)[,:]|tcp6://\[(.+?)[,\]]", uri)
    if m is None:
        raise RuntimeError("Could not parse coordinator IP address from Open MPI environment.")
    host = next(g for g in m.groups() if g is not None)
    return (
        f"{host}:{port}",
        int(os.environ["OMPI_COMM_WORLD_SIZE"]),
        int(os.environ["OMPI_COMM_WORLD_RANK"]),
        [int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])],
    )


def _slurm_env() -> tuple[str | None, int | None, int | None, list[int] | None] | None:
    """Slurm (``srun``): the coordinator on the step's first node."""
    names = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
    if not all(n in os.environ for n in names):
        return None
    port = os.environ.get("JAX_COORDINATOR_PORT") or str(
        int(os.environ["SLURM_JOB_ID"]) % 2**12 + (65535 - 2**12 + 1)
    )
    nodes = os.environ["SLURM_STEP_NODELIST"]
    cut = next((i for i, ch in enumerate(nodes) if ch in ",["), len(nodes))
    if cut == len(nodes) or nodes[cut] == ",":
        host = nodes[:cut]
    else:
        rest = nodes[cut + 1 :]
        end = next((i for i, ch in enumerate(rest) if ch in ",-"), None)
        host = nodes[:cut] + rest[:end]
    return (
        f"{host}:{port}",
        int(os.environ["SLURM_NTASKS"]),
        int(os.environ["SLURM_PROCID"]),
        [int(os.environ["SLURM_LOCALID"])],
    )


_CLUSTERS = {"ompi": _ompi_env, "slurm": _slurm_env}


def _detect(
    coordinator_address: str | None,
    num_processes: int | None,
    process_id: int | None,
    local_device_ids: list[int] | None,
    method: str | None,
) -> tuple[str | None, int | None, int | None, list[int] | None]:
    """Fills the unset arguments from a cluster's environment (Open MPI, Slurm), as JAX's
    cluster detection does; other environments are not detected."""
    found = None
    if method is not None:
        detect = _CLUSTERS.get(method)
        if detect is None:
            logger.error(
                "Automatic Distributed initialization can not proceed: %s is not supported "
                "(ferrax detects %s).", method, ", ".join(_CLUSTERS)
            )
        else:
            found = detect()
            if found is None:
                logger.error(
                    "Automatic Distributed initialization can not proceed: %s is supported "
                    "but not functional in this environment.", method
                )
    else:
        for detect in _CLUSTERS.values():
            found = detect()
            if found is not None:
                break
    if found is None:
        return coordinator_address, num_processes, process_id, local_device_ids
    addr, count, pid, local = found
    return (
        coordinator_address if coordinator_address is not None else addr,
        num_processes if num_processes is not None else count,
        process_id if process_id is not None else pid,
        local_device_ids if local_device_ids is not None else local,
    )


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(
            f"coordinator_address should be 'host:port', got {address!r}, at {user_location()}"
        )
    return host.strip("[]") or "localhost", int(port)


def _check_bindable(bind: str) -> None:
    """Raises :class:`DistributedError` when the service's address cannot be bound (a
    port in use): jaxlib's service sometimes crashes the process on it instead of
    raising (seen with jaxlib 0.10.2 under load)."""
    host, port = _split_address(bind)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if host in ("localhost",):
        family = socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host if host != "localhost" else "127.0.0.1", port))
    except OSError as e:
        raise DistributedError(
            f"ferrax.distributed.initialize: process 0 could not start the coordination "
            f"service on {bind}: {e.strerror or e}"
        ) from None


def _wait_for_coordinator(address: str, timeout: float) -> None:
    """Returns once the coordinator's port accepts connections; a
    :class:`DistributedError` naming it after ``timeout`` seconds (jaxlib's client would
    terminate the process instead of raising)."""
    host, port = _split_address(address)
    deadline = time.monotonic() + timeout
    last: OSError | None = None
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(0.05, min(1.0, left))):
                return
        except OSError as e:
            last = e
        if time.monotonic() >= deadline:
            raise DistributedError(
                f"ferrax.distributed.initialize: the coordinator at {address} could not be "
                f"reached within initialization_timeout={timeout:g} s ({last}); process 0 "
                f"starts it: check that it runs and that the address and port are right"
            )
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    local_device_ids: int | Sequence[int] | None = None,
    cluster_detection_method: str | None = None,
    initialization_timeout: int = 300,
    heartbeat_timeout_seconds: int = 100,
    shutdown_timeout_seconds: int = 300,
    coordinator_bind_address: str | None = None,
    slice_index: int | None = None,
    partition_index: int | None = None,
) -> None:
    """Joins this process to a distributed run, as ``jax.distributed.initialize``.

    Call it in every process before any computation (and before ``ferrax.devices()``,
    ``device_put``, ...). ``coordinator_address`` (``host:port``, default
    ``JAX_COORDINATOR_ADDRESS``) is where process 0 starts the coordination service (it
    binds ``coordinator_bind_address``, default ``JAX_COORDINATOR_BIND_ADDRESS`` or
    ``[::]:port``) and every process connects; ``process_id`` numbers the processes
    ``0 .. num_processes - 1``. Under Open MPI's ``mpirun`` or Slurm the unset arguments
    are read from the launcher's environment (``cluster_detection_method="deactivate"``
    turns that off). ``local_device_ids`` (default ``JAX_LOCAL_DEVICE_IDS``) restricts
    accelerators in JAX; CPU devices are not restricted, here as in JAX.

    A coordinator that cannot be reached within ``initialization_timeout`` seconds is a
    :class:`DistributedError`; a process that sends no heartbeat for
    ``heartbeat_timeout_seconds`` stops the others (see the module's documentation).

    Raises RuntimeError if called twice or after the backend started.
    """
    import warnings

    if _config.backend_started:
        raise RuntimeError(
            "ferrax.distributed.initialize() must be called before any ferrax calls that might "
            "initialise the XLA backend. This includes any computation, but also calls to "
            "ferrax.devices, ferrax.device_put, and others."
        )
    if partition_index is None:
        if slice_index is not None:
            warnings.warn(
                "`slice_index` has been deprecated. Please use `partition_index` instead.",
                DeprecationWarning,
                stacklevel=2,
            )
        partition_index = slice_index
    with _lock:
        _initialize(
            coordinator_address, num_processes, process_id, local_device_ids,
            cluster_detection_method, initialization_timeout, coordinator_bind_address,
            heartbeat_timeout_seconds, shutdown_timeout_seconds, partition_index,
        )


def _initialize(
    coordinator_address: str | None,
    num_processes: int | None,
    process_id: int | None,
    local_device_ids: int | Sequence[int] | None,
    cluster_detection_method: str | None,
    initialization_timeout: int,
    coordinator_bind_address: str | None,
    heartbeat_timeout_seconds: int,
    shutdown_timeout_seconds: int,
    partition_index: int | None,
) -> None:
    state = global_state
    coordinator_address = coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    ids: list[int] | None = [local_device_ids] if isinstance(local_device_ids, int) else (
        None if local_device_ids is None else list(local_device_ids)
    )
    if ids is None and (env_ids := os.environ.get("JAX_LOCAL_DEVICE_IDS")):
        ids = [int(i) for i in env_ids.split(",")]
    if cluster_detection_method != "deactivate" and None in (coordinator_address, num_processes, process_id, ids):
        coordinator_address, num_processes, process_id, ids = _detect(
            coordinator_address, num_processes, process_id, ids, cluster_detection_method
        )
    if coordinator_address is None:
        raise ValueError("coordinator_address should be defined.")
    if num_processes is None:
        raise ValueError("Number of processes must be defined.")
    if process_id is None:
        raise ValueError("The process id of the current process must be defined.")
    if not isinstance(process_id, int):
        raise TypeError(
            "process_id must be a nonnegative int. "
            f"Got process_id={process_id} of type {type(process_id)}."
        )
    if not isinstance(num_processes, int):
        raise TypeError(
            "num_processes must be a positive int. "
            f"Got num_processes={num_processes} of type {type(num_processes)}."
        )
    if not 0 <= process_id < num_processes:
        raise ValueError(
            "process_id and num_processes must be nonnegative, with process_id < num_processes. "
            f"Got process_id={process_id}, num_processes={num_processes}."
        )
    _, port = _split_address(coordinator_address)
    bind = coordinator_bind_address or os.environ.get("JAX_COORDINATOR_BIND_ADDRESS", f"[::]:{port}")

    jax_ext: Any = importlib.import_module("jaxlib._jax")
    if process_id == 0:
        if state.service is not None:
            raise RuntimeError("distributed.initialize should only be called once.")
        logger.info("Starting the distributed service on %s", bind)
        _check_bindable(bind)
        try:
            state.service = jax_ext.get_distributed_runtime_service(
                bind,
                num_processes,
                heartbeat_timeout=heartbeat_timeout_seconds,
                shutdown_timeout=shutdown_timeout_seconds,
            )
        except RuntimeError as e:
            raise DistributedError(
                f"ferrax.distributed.initialize: process 0 could not start the coordination "
                f"service on {bind}: {e}"
            ) from None
    if state.client is not None:
        raise RuntimeError("distributed.initialize should only be called once.")
    state.process_id = process_id
    state.num_processes = num_processes
    state.coordinator_address = coordinator_address
    state.local_device_ids = ids
    try:
        if process_id != 0:
            _wait_for_coordinator(coordinator_address, float(initialization_timeout))
        client = jax_ext.get_distributed_runtime_client(
            coordinator_address,
            process_id,
            init_timeout=initialization_timeout,
            heartbeat_timeout=heartbeat_timeout_seconds,
            shutdown_timeout=shutdown_timeout_seconds,
            use_compression=True,
        )
        logger.info("Connecting to the distributed service on %s", coordinator_address)
        with _JoinWatch(coordinator_address, process_id, num_processes, initialization_timeout):
            client.connect()
    except BaseException:
        if state.service is not None:
            state.service.shutdown()
            state.service = None
        raise
    state.client = client
    if not _atexit_registered:
        # The client must go before the service: a service gone first makes the
        # client's next heartbeat fail, and jaxlib terminates the process for it.
        atexit.register(shutdown)
        _atexit_registered.append(True)
    state.collectives = jax_ext.make_gloo_tcp_collectives(distributed_client=client)
    if partition_index is None:
        env_index = os.environ.get("JAX_PARTITION_INDEX")
        if env_index is not None:
            partition_index = int(env_index)
    state.partition_index = partition_index
    _config.distributed_state = state


class _JoinWatch:
    """While ``connect`` waits for every process to register: if it outlasts the
    timeout, jaxlib terminates the process; say first, on stderr, what was awaited."""

    def __init__(self, address: str, process_id: int, num_processes: int, timeout: float) -> None:
        self._message = (
            f"ferrax.distributed.initialize: process {process_id} connected to the coordinator "
            f"at {address}, but not all {num_processes} processes joined within "
            f"initialization_timeout={timeout:g} s; jaxlib stops this process"
        )
        self._timer = threading.Timer(max(0.0, timeout - 0.5), self._say)
        self._timer.daemon = True

    def _say(self) -> None:
        import sys

        print(self._message, file=sys.stderr, flush=True)

    def __enter__(self) -> None:
        self._timer.start()

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def is_initialized() -> bool:
    """Whether :func:`initialize` ran (and :func:`shutdown` did not since)."""
    return global_state.client is not None


def shutdown() -> None:
    """Leaves the distributed run: disconnects this process's client and, on process 0,
    stops the coordination service (after every process disconnected, or
    ``shutdown_timeout_seconds``). Does nothing if the distributed system is not running."""
    state = global_state
    with _lock:
        if state.client is not None:
            state.client.shutdown()
            state.client = None
        if state.service is not None:
            state.service.shutdown()
            state.service = None
