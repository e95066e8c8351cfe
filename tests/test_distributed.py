"""Several processes (``ferrax.distributed``) over jaxlib's distributed runtime.

Each multi-process test starts its processes as subprocesses of this file (run as a
script: ``python tests/test_distributed.py SCENARIO RANK ADDRESS``) on a free loopback
port, every child bounded by a timeout and killed in a ``finally``. The single-process
parts (the array constructors, ``process_allgather``, the argument checks) are compared
with JAX's in this process or in a fresh one.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

# With pytest-xdist, these run one after another on one worker (each starts processes
# of its own and waits on them with timeouts).
pytestmark = pytest.mark.xdist_group("processes")

HERE = os.path.abspath(__file__)
ROWS, COLS = 8, 8
G = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) / 7.0
W = (np.arange(COLS * 3, dtype=np.float32).reshape(COLS, 3) - 10.0) / 5.0

# Specs over a (2, 2) mesh ("p": the two processes, "d": each process's two devices)
# and the block of G each process holds for them (the rows or columns of process r).
CASES: list[tuple[tuple[Any, ...], str]] = [
    ((("p", "d"),), "rows"),
    (("p", "d"), "rows"),
    (("d", "p"), "cols"),
    ((None, ("p", "d")), "cols"),
    (("d",), "all"),
    ((), "all"),
]


def _local_block(kind: str, rank: int) -> np.ndarray[Any, Any]:
    if kind == "rows":
        return G[4 * rank : 4 * rank + 4]
    if kind == "cols":
        return G[:, 4 * rank : 4 * rank + 4]
    return G


# --------------------------------------------------------------------------------------
# The child processes.


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)  # the suite's 4 devices (conftest) are not the children's
    env.pop("JAX_COORDINATOR_ADDRESS", None)
    env["JAX_NUM_CPU_DEVICES"] = "2"
    env["PYTHONUNBUFFERED"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    return env


def _jax() -> Any:
    """``jax``, imported only by the tests that compare with it (never in the children
    that run ferrax, which check that ferrax leaves it unimported)."""
    return importlib.import_module("jax")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Run:
    """What one child did: exit code, output, the RESULT line's JSON, how long it ran."""

    def __init__(self, rc: int | None, out: str, err: str, seconds: float) -> None:
        self.rc = rc
        self.out = out
        self.err = err
        self.seconds = seconds
        lines = [ln[len("RESULT ") :] for ln in out.splitlines() if ln.startswith("RESULT ")]
        self.result: Any = json.loads(lines[-1]) if lines else None

    def __repr__(self) -> str:
        return f"Run(rc={self.rc}, {self.seconds:.1f} s)\n--- stdout\n{self.out[-3000:]}\n--- stderr\n{self.err[-3000:]}"


def _run(scenario: str, ranks: Sequence[int], address: str | None = None, timeout: float = 40.0) -> list[Run]:
    """Runs ``scenario`` in one child per rank, all at once; each is killed if it is not
    done within ``timeout`` seconds."""
    address = address or f"127.0.0.1:{_free_port()}"
    procs: list[subprocess.Popen[str]] = []
    starts: list[float] = []
    runs: list[Run] = []
    try:
        for r in ranks:
            starts.append(time.monotonic())
            procs.append(
                subprocess.Popen(
                    [sys.executable, HERE, scenario, str(r), address],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env(),
                )
            )
        deadline = time.monotonic() + timeout
        for p, t0 in zip(procs, starts):
            try:
                out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                runs.append(Run(None, out, err, time.monotonic() - t0))
                continue
            runs.append(Run(p.returncode, out, err, time.monotonic() - t0))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return runs


def _report(result: Any) -> None:
    print("RESULT " + json.dumps(result), flush=True)


def _scenario_compute(rank: int, address: str) -> None:
    """2 processes x 2 devices: arrays from process-local data on a mesh over all four
    devices, read back, gathered, and computed on."""
    import ferrax as fx
    from ferrax.experimental import multihost_utils
    from ferrax.sharding import Mesh, NamedSharding, PartitionSpec

    fx.distributed.initialize(address, 2, rank, initialization_timeout=30, heartbeat_timeout_seconds=10)
    out: dict[str, Any] = {
        "initialized": fx.distributed.is_initialized(),
        "devices": [d.id for d in fx.devices()],
        "local": [d.id for d in fx.local_devices()],
        "process_index": fx.process_index(),
        "process_count": fx.process_count(),
        "device_processes": [d.process_index for d in fx.devices()],
    }
    mesh = Mesh(np.array(fx.devices()).reshape(2, 2), ("p", "d"))
    cases = []
    for spec, kind in CASES:
        s = NamedSharding(mesh, PartitionSpec(*spec))
        a = fx.make_array_from_process_local_data(s, _local_block(kind, rank))
        case: dict[str, Any] = {
            "shape": list(a.shape),
            "value": np.asarray(a).tolist(),
            "shards": [[str(sh.index), np.asarray(sh.data).tolist()] for sh in a.addressable_shards],
        }
        # The same array from one single-device array per local device.
        parts = [
            fx.device_put(G[idx], d) for d, idx in s.devices_indices_map(G.shape).items() if d.process_index == rank
        ]
        b = fx.make_array_from_single_device_arrays(G.shape, s, parts)
        case["from_single"] = np.asarray(b).tolist()
        case["allgather"] = multihost_utils.process_allgather(a, tiled=True).tolist()
        # The older pair: each process's local value <-> the global array.
        h = multihost_utils.host_local_array_to_global_array(_local_block(kind, rank), mesh, PartitionSpec(*spec))
        back = multihost_utils.global_array_to_host_local_array(h, mesh, PartitionSpec(*spec))
        case["host_local"] = [list(h.shape), np.asarray(h).tolist(), list(back.shape), np.asarray(back).tolist()]
        case["host_local_devices"] = sorted(d.id for d in back.sharding.device_set)
        # Jitted over the mesh of both processes: XLA's partitioner adds the collectives.
        total = fx.jit(lambda x: (x * x).sum())(a)
        prod = fx.jit(lambda x, w: x @ w)(a, fx.device_put(W, NamedSharding(mesh, PartitionSpec())))
        case["sum"] = float(np.asarray(total))
        case["matmul"] = np.asarray(prod).tolist()
        case["matmul_sharding"] = repr(prod.sharding.spec) if hasattr(prod.sharding, "spec") else None
        cases.append(case)
    out["cases"] = cases
    # Interleaved: the mesh alternates the processes' devices, so process r holds row
    # blocks r and r + 2 of 4; its local data is those blocks, in order.
    devs = fx.devices()
    inter = NamedSharding(Mesh(np.array([devs[0], devs[2], devs[1], devs[3]]), ("x",)), PartitionSpec("x"))
    rows = np.concatenate([G[2 * rank : 2 * rank + 2], G[2 * rank + 4 : 2 * rank + 6]])
    a = fx.make_array_from_process_local_data(inter, rows)
    out["interleaved"] = np.asarray(a).tolist()
    out["interleaved_sum"] = float(np.asarray(fx.jit(lambda x: x.sum(0))(a)).sum())
    try:
        multihost_utils.host_local_array_to_global_array(rows, inter.mesh, PartitionSpec("x"))
    except ValueError as e:
        out["interleaved_host_local"] = str(e)
    # An explicit global shape: this process's rows of a (8, 8) array split over "p".
    s = NamedSharding(mesh, PartitionSpec("p"))
    out["explicit"] = np.asarray(fx.make_array_from_process_local_data(s, G[4 * rank : 4 * rank + 4], (8, 8))).tolist()
    try:
        fx.make_array_from_process_local_data(s, G[:3], (8, 8))
    except ValueError as e:
        out["bad_local"] = str(e)
    try:
        multihost_utils.process_allgather(fx.make_array_from_process_local_data(s, G[4 * rank : 4 * rank + 4]))
    except ValueError as e:
        out["gather_untiled_global"] = str(e)
    out["gather_stacked"] = multihost_utils.process_allgather(np.float32(rank + 0.5)).tolist()
    out["gather_tiled"] = multihost_utils.process_allgather(np.arange(3, dtype=np.int32) + 10 * rank, tiled=True).tolist()
    out["gather_tree"] = {
        k: v.tolist() for k, v in multihost_utils.process_allgather({"a": np.ones(2, np.float32) * rank}).items()
    }
    try:
        multihost_utils.process_allgather(np.zeros(rank + 1, np.float32))
    except ValueError as e:
        out["gather_mismatch"] = str(e)
    out["broadcast"] = {
        k: v.tolist()
        for k, v in multihost_utils.broadcast_one_to_all({"a": np.arange(3, dtype=np.int32) + rank, "b": np.float32(rank)}).items()
    }
    out["broadcast_from_1"] = multihost_utils.broadcast_one_to_all(np.arange(2.0, dtype=np.float32) + rank, is_source=rank == 1).tolist()
    multihost_utils.assert_equal({"same": np.arange(4)}, "equal")
    try:
        multihost_utils.assert_equal(np.arange(4) + rank, "differs")
        out["assert_equal"] = None
    except AssertionError as e:
        out["assert_equal"] = str(e).split(".")[0]
    multihost_utils.sync_global_devices("end")
    out["jax_imported"] = "jax" in sys.modules
    fx.distributed.shutdown()
    out["after_shutdown"] = fx.distributed.is_initialized()
    _report(out)


def _scenario_unreachable(rank: int, address: str) -> None:
    """Nobody listens at ``address``: initialize fails within its timeout."""
    import ferrax as fx

    t0 = time.monotonic()
    try:
        fx.distributed.initialize(address, 2, rank, initialization_timeout=2)
    except fx.distributed.DistributedError as e:
        _report({"error": str(e), "type": type(e).__name__, "runtime": isinstance(e, RuntimeError),
                 "seconds": time.monotonic() - t0})
        return
    _report({"error": None})


def _scenario_port_taken(rank: int, address: str) -> None:
    """Another program listens on the coordinator's port: process 0 cannot start the
    service."""
    import ferrax as fx

    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::", 0))
        s.listen()
        port = s.getsockname()[1]
        try:
            fx.distributed.initialize(f"127.0.0.1:{port}", 2, 0, initialization_timeout=5)
        except fx.distributed.DistributedError as e:
            _report({"error": str(e), "port": port, "initialized": fx.distributed.is_initialized()})


def _scenario_alone(rank: int, address: str) -> None:
    """Process 0 of 2 starts the service, but process 1 never comes."""
    import ferrax as fx

    fx.distributed.initialize(address, 2, rank, initialization_timeout=1)
    _report({"joined": True})


def _scenario_die(rank: int, address: str) -> None:
    """Process 1 dies after a first computation; process 0 waits in Python."""
    import ferrax as fx
    from ferrax.sharding import Mesh, NamedSharding, PartitionSpec

    fx.distributed.initialize(address, 2, rank, initialization_timeout=30, heartbeat_timeout_seconds=2)
    mesh = Mesh(np.array(fx.devices()), ("x",))
    a = fx.make_array_from_process_local_data(NamedSharding(mesh, PartitionSpec("x")), G[4 * rank : 4 * rank + 4])
    print("first", float(np.asarray(a).sum()), flush=True)
    if rank == 1:
        os._exit(3)
    for _ in range(300):
        time.sleep(0.1)
    _report({"survived": True})


def _die_in_collective(rank: int, address: str, computation: str) -> None:
    """Process 1 dies while process 0 keeps computing with it."""
    import ferrax as fx
    from ferrax.sharding import Mesh, NamedSharding, PartitionSpec

    fx.distributed.initialize(address, 2, rank, initialization_timeout=30, heartbeat_timeout_seconds=2)
    mesh = Mesh(np.array(fx.devices()), ("x",))
    s = NamedSharding(mesh, PartitionSpec("x"))
    total = fx.jit(lambda x: x.sum())
    for i in range(10_000):
        a = fx.make_array_from_process_local_data(s, G[4 * rank : 4 * rank + 4])
        try:
            np.asarray(a) if computation == "gather" else float(total(a))
        except RuntimeError as e:
            _report({"step": i, "error": str(e)})
            # Leave without waiting for the dead process at shutdown.
            os._exit(0)
        if rank == 1 and i == 5:
            os._exit(3)
    _report({"error": None})


def _scenario_die_in_gather(rank: int, address: str) -> None:
    _die_in_collective(rank, address, "gather")


def _scenario_die_in_jit_sum(rank: int, address: str) -> None:
    _die_in_collective(rank, address, "jit_sum")


def _scenario_checks(rank: int, address: str) -> None:
    """initialize's argument checks, second call and call after the backend started, in
    a fresh process, for ``ferrax`` (rank 0) or ``jax`` (rank 1)."""
    if rank == 0:
        import ferrax as lib

        dist: Any = lib.distributed
    else:
        lib = _jax()
        dist = lib.distributed
    out: dict[str, Any] = {}
    bad: list[tuple[str, dict[str, Any]]] = [
        ("no_address", dict(num_processes=1, process_id=0)),
        ("no_count", dict(coordinator_address=address, process_id=0)),
        ("no_id", dict(coordinator_address=address, num_processes=1)),
        ("id_type", dict(coordinator_address=address, num_processes=2, process_id="0")),
        ("count_type", dict(coordinator_address=address, num_processes=2.0, process_id=0)),
        ("id_range", dict(coordinator_address=address, num_processes=2, process_id=2)),
        ("id_negative", dict(coordinator_address=address, num_processes=2, process_id=-1)),
    ]
    for name, kwargs in bad:
        try:
            dist.initialize(cluster_detection_method="deactivate", **kwargs)
            out[name] = None
        except Exception as e:
            out[name] = [type(e).__name__, str(e)]
    out["initialized_before"] = dist.is_initialized()
    # The address from the environment, as JAX reads it.
    os.environ["JAX_COORDINATOR_ADDRESS"] = address
    dist.initialize(num_processes=1, process_id=0, initialization_timeout=10)
    out["initialized"] = dist.is_initialized()
    try:
        dist.initialize(address, 1, 0)
        out["second"] = None
    except Exception as e:
        out["second"] = [type(e).__name__, str(e)]
    out["devices"] = len(lib.devices())
    try:
        dist.initialize(address, 1, 0)
        out["after_backend"] = None
    except Exception as e:
        out["after_backend"] = [type(e).__name__, str(e).replace("JAX", "ferrax").replace("jax.", "ferrax.")]
    dist.shutdown()
    out["initialized_after"] = dist.is_initialized()
    _report(out)


SCENARIOS = {
    "compute": _scenario_compute,
    "unreachable": _scenario_unreachable,
    "alone": _scenario_alone,
    "port_taken": _scenario_port_taken,
    "die": _scenario_die,
    "die_in_gather": _scenario_die_in_gather,
    "die_in_jit_sum": _scenario_die_in_jit_sum,
    "checks": _scenario_checks,
}


# --------------------------------------------------------------------------------------
# The tests.


@pytest.fixture(scope="module")
def compute_runs() -> list[Run]:
    runs = _run("compute", [0, 1], timeout=50)
    for r in runs:
        assert r.rc == 0 and r.result is not None, r
    return runs


def _one_process_results() -> list[dict[str, Any]]:
    """The same computations in this process, on its four devices."""
    import ferrax as fx
    from ferrax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(fx.devices()[:4]).reshape(2, 2), ("p", "d"))
    out = []
    for spec, _ in CASES:
        a = fx.device_put(G, NamedSharding(mesh, PartitionSpec(*spec)))
        out.append({
            "value": np.asarray(a),
            "shards": {str(sh.index): np.asarray(sh.data) for sh in a.addressable_shards},
        })
    return out


def test_two_processes_see_every_device(compute_runs: list[Run]) -> None:
    for rank, run in enumerate(compute_runs):
        res = run.result
        assert res["initialized"] and not res["after_shutdown"]
        assert res["process_index"] == rank and res["process_count"] == 2
        assert res["devices"] == [0, 1, 2048, 2049]
        assert res["device_processes"] == [0, 0, 1, 1]
        assert res["local"] == res["devices"][2 * rank : 2 * rank + 2]
        assert res["jax_imported"] is False


def test_process_local_data_makes_the_global_array(compute_runs: list[Run]) -> None:
    """Each process gives its block; the array read back on either process is the
    global one, each local shard holds its slice, and the 1-process layout agrees."""
    single = _one_process_results()
    for rank, run in enumerate(compute_runs):
        for (spec, kind), case, one in zip(CASES, run.result["cases"], single):
            assert case["shape"] == [ROWS, COLS], (spec, kind)
            np.testing.assert_array_equal(np.array(case["value"], np.float32), G, err_msg=str(spec))
            np.testing.assert_array_equal(np.array(case["value"], np.float32), one["value"])
            np.testing.assert_array_equal(np.array(case["from_single"], np.float32), G, err_msg=str(spec))
            np.testing.assert_array_equal(np.array(case["allgather"], np.float32), G, err_msg=str(spec))
            shape, value, back_shape, back = case["host_local"]
            block = _local_block(kind, rank)
            assert shape == [ROWS, COLS] and back_shape == list(block.shape), spec
            np.testing.assert_array_equal(np.array(value, np.float32), G, err_msg=str(spec))
            np.testing.assert_array_equal(np.array(back, np.float32), block, err_msg=str(spec))
            assert case["host_local_devices"] == [2048 * rank, 2048 * rank + 1], spec
            for index, data in case["shards"]:
                np.testing.assert_array_equal(np.array(data, np.float32), G[eval(index)], err_msg=str(spec))
            # The shards this process holds are those of its devices in the 1-process layout.
            assert len(case["shards"]) == 2


def test_jitted_computation_equals_one_process(compute_runs: list[Run]) -> None:
    import ferrax as fx

    from ferrax.sharding import Mesh, NamedSharding, PartitionSpec

    sum_one = float(np.asarray(fx.jit(lambda x: (x * x).sum())(G)))
    mm_one = np.asarray(fx.jit(lambda x, w: x @ w)(G, W))
    mesh = Mesh(np.array(fx.devices()[:4]).reshape(2, 2), ("p", "d"))
    for run in compute_runs:
        for (spec, _), case in zip(CASES, run.result["cases"]):
            np.testing.assert_allclose(case["sum"], sum_one, rtol=1e-6)
            np.testing.assert_allclose(np.array(case["matmul"], np.float32), mm_one, rtol=1e-6)
            # The result is laid out as the same program lays it out in one process.
            a = fx.device_put(G, NamedSharding(mesh, PartitionSpec(*spec)))
            w = fx.device_put(W, NamedSharding(mesh, PartitionSpec()))
            assert case["matmul_sharding"] == repr(fx.jit(lambda x, w: x @ w)(a, w).sharding.spec), spec


def test_interleaved_process_blocks(compute_runs: list[Run]) -> None:
    for run in compute_runs:
        np.testing.assert_array_equal(np.array(run.result["interleaved"], np.float32), G)
        np.testing.assert_allclose(run.result["interleaved_sum"], G.sum(), rtol=1e-6)
        # The older host-local API needs each process's devices to form a block of the mesh.
        assert run.result["interleaved_host_local"] == (
            "When passing host local inputs to pjit, devices connected to a single host must "
            "form a contiguous subcube of the global device mesh"
        )


def test_explicit_global_shape_and_bad_local_data(compute_runs: list[Run]) -> None:
    for run in compute_runs:
        np.testing.assert_array_equal(np.array(run.result["explicit"], np.float32), G)
        assert run.result["bad_local"] == (
            "Invalid host data, each dimension should match either global or process shape. "
            "In dimension 0, the process data has 3 elements. Process addresses 4 elements "
            "and global_shape=(8, 8)."
        )


def test_process_allgather_across_processes(compute_runs: list[Run]) -> None:
    for run in compute_runs:
        res = run.result
        assert res["gather_stacked"] == [0.5, 1.5]
        assert res["broadcast"] == {"a": [0, 1, 2], "b": 0.0}
        assert res["broadcast_from_1"] == [1.0, 2.0]
        assert res["assert_equal"] == "differs"
        assert res["gather_untiled_global"] == (
            "Gathering global non-fully-addressable arrays only supports tiled=True"
        )
        assert res["gather_tiled"] == [0, 1, 2, 10, 11, 12]
        assert res["gather_tree"] == {"a": [[0.0, 0.0], [1.0, 1.0]]}
    for rank, run in enumerate(compute_runs):
        other = 1 - rank
        assert run.result["gather_mismatch"].startswith(
            f"ferrax.process_allgather: the processes disagree: process {rank} has (1, {rank + 1}):float32, "
            f"process {other} has (1, {other + 1}):float32"
        ), run.result["gather_mismatch"]


def test_unreachable_coordinator_is_an_error_naming_it() -> None:
    address = f"127.0.0.1:{_free_port()}"  # nothing listens there
    (run,) = _run("unreachable", [1], address=address, timeout=30)
    assert run.rc == 0 and run.result is not None, run
    res = run.result
    assert res["type"] == "DistributedError" and res["runtime"]
    assert address in res["error"] and "initialization_timeout=2" in res["error"]
    assert 1.5 < res["seconds"] < 10


def test_coordinator_port_in_use_is_an_error() -> None:
    (run,) = _run("port_taken", [0], timeout=30)
    assert run.rc == 0 and run.result is not None, run
    res = run.result
    assert not res["initialized"]
    assert res["error"].startswith(
        f"ferrax.distributed.initialize: process 0 could not start the coordination service on [::]:{res['port']}"
    ), res


def test_a_process_that_never_joins_stops_the_others() -> None:
    """Process 1 never starts: process 0's initialize does not wait forever; jaxlib stops
    the process after initialization_timeout (a few seconds of RPC deadline later),
    after ferrax said on stderr what it was waiting for."""
    address = f"127.0.0.1:{_free_port()}"
    (run,) = _run("alone", [0], address=address, timeout=30)
    assert run.rc not in (0, None) and run.result is None, run
    assert f"coordinator at {address}, but not all 2 processes joined within initialization_timeout=1 s" in run.err
    assert "Terminating process" in run.err and run.seconds < 20, run


def test_a_dead_process_stops_the_others_naming_it() -> None:
    """Process 1 dies; process 0, waiting in Python, is stopped by jaxlib (as under JAX)
    once the coordination service misses process 1's heartbeats (2 s here), with a
    message naming process 1 (task 1), not left hanging."""
    runs = _run("die", [0, 1], timeout=40)
    zero, one = runs
    assert one.rc == 3, one
    assert zero.rc not in (0, None) and zero.result is None, zero
    assert "stopped sending heartbeats" in zero.err and "heartbeats):\n1\n" in zero.err, zero
    assert zero.seconds < 25, zero


@pytest.mark.parametrize("computation", ["gather", "jit_sum"])
def test_a_process_dying_in_a_collective_stops_the_others(computation: str) -> None:
    """Process 1 dies while process 0 computes with it. Either gloo sees the connection
    close and process 0's computation raises a RuntimeError at once (seen for the
    all-gather that reads an array back), or the collective waits and jaxlib stops
    process 0 after the heartbeat timeout naming process 1 (seen for a jitted
    all-reduce): never a hang."""
    runs = _run(f"die_in_{computation}", [0, 1], timeout=40)
    zero, one = runs
    assert one.rc == 3, one
    assert zero.rc is not None and zero.seconds < 25, zero
    if zero.rc == 0:
        assert zero.result is not None and "Gloo" in zero.result["error"], zero
        assert zero.result["step"] <= 7, zero
    else:
        assert zero.result is None and "heartbeats):\n1\n" in zero.err, zero


def test_initialize_checks_as_jax() -> None:
    """The same argument checks, messages and refusals as jax.distributed.initialize (each
    library in a fresh process, one process over loopback)."""
    # One after the other, each on its own port: both are one-process coordinators, and
    # two of them on one address at once collide (jaxlib aborts the second).
    (mine,) = _run("checks", [0], timeout=60)
    (theirs,) = _run("checks", [1], timeout=60)
    assert mine.rc == 0 and mine.result is not None, mine
    assert theirs.rc == 0 and theirs.result is not None, theirs
    for key, value in theirs.result.items():
        assert mine.result[key] == value, (key, mine.result[key], value)
    assert mine.result["second"] == ["RuntimeError", "distributed.initialize should only be called once."]
    assert mine.result["after_backend"][0] == "RuntimeError"


def test_initialize_after_the_backend_started_is_refused() -> None:
    import ferrax as fx

    fx.devices()
    with pytest.raises(RuntimeError, match="must be called before any ferrax calls"):
        fx.distributed.initialize("127.0.0.1:1", 2, 0)
    assert not fx.distributed.is_initialized()


CLUSTER_ENVS: list[dict[str, str]] = [
    {  # Slurm, one node
        "SLURM_JOB_ID": "123456", "SLURM_STEP_NODELIST": "node001", "SLURM_NTASKS": "4",
        "SLURM_PROCID": "2", "SLURM_LOCALID": "0",
    },
    {  # Slurm, a range of nodes
        "SLURM_JOB_ID": "77", "SLURM_STEP_NODELIST": "gpu[003-007,012],cpu1", "SLURM_NTASKS": "8",
        "SLURM_PROCID": "5", "SLURM_LOCALID": "1",
    },
    {  # Slurm, with the coordinator's port given
        "SLURM_JOB_ID": "77", "SLURM_STEP_NODELIST": "a,b", "SLURM_NTASKS": "2",
        "SLURM_PROCID": "1", "SLURM_LOCALID": "0", "JAX_COORDINATOR_PORT": "4242",
    },
    {  # Open MPI
        "OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.96.0.1,10.148.0.1,10.108.0.1:34911",
        "OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    },
]


@pytest.mark.parametrize("env", CLUSTER_ENVS, ids=["slurm", "slurm-range", "slurm-port", "ompi"])
@pytest.mark.parametrize("given", [(None, None, None, None), ("h:1", 2, 1, [0])])
def test_cluster_detection_as_jax(env: dict[str, str], given: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """Under Slurm's or Open MPI's launcher, the unset arguments come from the
    environment as JAX's cluster detection reads them."""
    from ferrax import distributed

    for name in [n for n in os.environ if n.startswith(("SLURM_", "OMPI_", "JAX_COORDINATOR"))]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    clusters = importlib.import_module("jax._src.clusters")
    theirs = clusters.ClusterEnv.auto_detect_unset_distributed_params(*given, None, 300)
    address, count, pid, local = given
    mine = distributed._detect(address, count, pid, local, None)
    assert mine == (theirs[0], theirs[1], theirs[2], None if theirs[3] is None else list(theirs[3]))


# Single process: the constructors and process_allgather against JAX's.


def _jax_mesh() -> Any:
    jax = _jax()
    return jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("p", "d"))


def _fx_mesh() -> Any:
    import ferrax as fx
    from ferrax.sharding import Mesh

    return Mesh(np.array(fx.devices()[:4]).reshape(2, 2), ("p", "d"))


@pytest.mark.parametrize("spec", [c[0] for c in CASES])
def test_one_process_constructors_as_jax(spec: tuple[Any, ...]) -> None:
    import ferrax as fx
    from ferrax.sharding import NamedSharding, PartitionSpec

    jax = _jax()
    js = jax.sharding.NamedSharding(_jax_mesh(), jax.sharding.PartitionSpec(*spec))
    fs = NamedSharding(_fx_mesh(), PartitionSpec(*spec))
    ja = jax.make_array_from_process_local_data(js, G)
    fa = fx.make_array_from_process_local_data(fs, G)
    np.testing.assert_array_equal(np.asarray(fa), np.asarray(ja))
    assert fa.sharding == fs and fa.dtype == ja.dtype
    assert [str(s.index) for s in fa.addressable_shards] == [str(s.index) for s in ja.addressable_shards]
    jparts = [jax.device_put(G[i], d) for d, i in js.addressable_devices_indices_map(G.shape).items()]
    fparts = [fx.device_put(G[i], d) for d, i in fs.devices_indices_map(G.shape).items()]
    jb = jax.make_array_from_single_device_arrays(G.shape, js, jparts)
    fb = fx.make_array_from_single_device_arrays(G.shape, fs, fparts[::-1])  # any order
    np.testing.assert_array_equal(np.asarray(fb), np.asarray(jb))
    for sh in fb.addressable_shards:
        np.testing.assert_array_equal(np.asarray(sh.data), G[sh.index])


def _error(f: Any) -> tuple[str, str]:
    try:
        f()
    except Exception as e:
        return type(e).__name__, str(e).replace("jax.", "ferrax.")
    return "no error", ""


def test_one_process_constructor_errors_as_jax() -> None:
    import ferrax as fx
    from ferrax.sharding import NamedSharding, PartitionSpec

    jax = _jax()
    js = jax.sharding.NamedSharding(_jax_mesh(), jax.sharding.PartitionSpec("p"))
    fs = NamedSharding(_fx_mesh(), PartitionSpec("p"))
    assert _error(lambda: fx.make_array_from_process_local_data(fs, G, (16, 8))) == _error(
        lambda: jax.make_array_from_process_local_data(js, G, (16, 8))
    )
    jparts = [jax.device_put(G[i], d) for d, i in js.addressable_devices_indices_map(G.shape).items()]
    fparts = [fx.device_put(G[i], d) for d, i in fs.devices_indices_map(G.shape).items()]
    cases: list[tuple[Any, Any]] = [
        (lambda p: p[:3], G.shape),  # too few arrays
        (lambda p: p[:3] + p[:1], G.shape),  # one device twice
        (lambda p: p, (16, 8)),  # shard shapes that do not match
        (lambda p: [], G.shape),  # no arrays, no dtype
    ]
    for pick, shape in cases:
        mine = _error(lambda: fx.make_array_from_single_device_arrays(shape, fs, pick(fparts)))
        theirs = _error(lambda: jax.make_array_from_single_device_arrays(shape, js, pick(jparts)))
        assert mine[0] == theirs[0], (mine, theirs)
        if "Shape of Array" not in theirs[1]:  # the sharding's repr differs
            assert mine[1] == theirs[1], (mine, theirs)
    mine = _error(lambda: fx.make_array_from_single_device_arrays(G.shape, fs, fparts, dtype=np.int32))
    theirs = _error(lambda: jax.make_array_from_single_device_arrays(G.shape, js, jparts, dtype=np.int32))
    assert mine == theirs
    # Arrays on another device than their sharding's.
    other = NamedSharding(_fx_mesh(), PartitionSpec(None, "p"))
    with pytest.raises(TypeError, match="must be a ferrax.sharding.Sharding"):
        fx.make_array_from_process_local_data(other.spec, G)


@pytest.mark.parametrize("tiled", [False, True])
@pytest.mark.parametrize("value", [np.float32(2.5), np.arange(6, dtype=np.int32).reshape(2, 3), 3])
def test_one_process_allgather_as_jax(value: Any, tiled: bool) -> None:
    from ferrax.experimental import multihost_utils as fmu

    jmu = importlib.import_module("jax.experimental.multihost_utils")

    mine = fmu.process_allgather({"v": value, "w": [value]}, tiled=tiled)
    theirs = jmu.process_allgather({"v": value, "w": [value]}, tiled=tiled)
    for m, t in ((mine["v"], theirs["v"]), (mine["w"][0], theirs["w"][0])):
        assert isinstance(m, np.ndarray)
        assert m.shape == t.shape and m.dtype == t.dtype, (m, t)
        np.testing.assert_array_equal(m, t)


def test_example_launcher_trains_across_two_processes() -> None:
    """examples/distributed/launch.py: one command starts 2 processes training the MLP
    data-parallel; their losses equal the 1-device run's (the launcher checks it)."""
    launcher = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "distributed", "launch.py")
    p = subprocess.Popen(
        [sys.executable, launcher, "--steps", "3", "--timeout", "100"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env(),
    )
    try:
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, (out, err[-3000:])
    lines = out.splitlines()
    losses = [ln.split(":")[1].split("(")[0].split() for ln in lines if ln.startswith("process ")]
    assert len(losses) == 2 and losses[0] == losses[1] and len(losses[0]) == 3, out
    assert "same losses on 2 processes x 2 devices as on 1 device" in out


@pytest.mark.parametrize("spec", [c[0] for c in CASES])
def test_one_process_host_local_global_as_jax(spec: tuple[Any, ...]) -> None:
    """With one process the local mesh is the whole mesh: the global array is the local
    value laid out by the spec, and back."""
    from ferrax.experimental import multihost_utils as fmu
    from ferrax.sharding import PartitionSpec

    jax = _jax()
    jmu = importlib.import_module("jax.experimental.multihost_utils")
    mine = fmu.host_local_array_to_global_array({"g": G}, _fx_mesh(), PartitionSpec(*spec))["g"]
    theirs = jmu.host_local_array_to_global_array({"g": G}, _jax_mesh(), jax.sharding.PartitionSpec(*spec))["g"]
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    assert [str(s.index) for s in mine.addressable_shards] == [str(s.index) for s in theirs.addressable_shards]
    back = fmu.global_array_to_host_local_array(mine, _fx_mesh(), PartitionSpec(*spec))
    np.testing.assert_array_equal(np.asarray(back), G)
    with pytest.raises(ValueError, match="`None` is not a valid input to the pspecs argument"):
        fmu.host_local_array_to_global_array(G, _fx_mesh(), None)


@pytest.mark.parametrize("value", [np.float32(2.5), np.arange(6, dtype=np.int32).reshape(2, 3), np.array([True, False])])
def test_one_process_broadcast_and_assert_equal_as_jax(value: Any) -> None:
    from ferrax.experimental import multihost_utils as fmu

    jmu = importlib.import_module("jax.experimental.multihost_utils")
    for source in (None, True, False):
        mine = fmu.broadcast_one_to_all({"v": value}, is_source=source)["v"]
        theirs = jmu.broadcast_one_to_all({"v": value}, is_source=source)["v"]
        assert isinstance(mine, np.ndarray) and mine.dtype == theirs.dtype and mine.shape == theirs.shape
        np.testing.assert_array_equal(mine, theirs)
    fmu.assert_equal({"v": value}, "one process")
    jmu.assert_equal({"v": value}, "one process")


def _worker_main(argv: list[str]) -> None:
    scenario, rank, address = argv[1], int(argv[2]), argv[3]
    SCENARIOS[scenario](rank, address)


if __name__ == "__main__":
    _worker_main(sys.argv)
