"""One process of the data-parallel MLP training across processes (start them all with
``python examples/distributed/launch.py``).

Every process joins the run with ``ferrax.distributed.initialize``; the mesh holds the
devices of all processes (axis ``batch``); each process loads only its own rows of the
batch (``make_array_from_process_local_data``), the parameters are replicated, and the
jitted step (``examples/data_parallel.py``'s, compiled for the whole mesh by XLA's SPMD
partitioner) reduces the gradients across processes with gloo collectives over TCP.

    python examples/distributed/train.py --coordinator 127.0.0.1:12345 \\
        --num-processes 2 --process-id 0      # and --process-id 1 in another shell
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import ferrax as fx  # noqa: E402
from data_parallel import init, step  # noqa: E402  (the 1-process example's model)
from ferrax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator", required=True, help="host:port of process 0's coordination service")
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    fx.distributed.initialize(
        args.coordinator, args.num_processes, args.process_id,
        initialization_timeout=60, heartbeat_timeout_seconds=10,
    )
    me, n = fx.process_index(), fx.process_count()

    # The same data and initial parameters as examples/data_parallel.py's train().
    rng = np.random.default_rng(0)
    params = init(rng, [16, 64, 64, 1])
    x = rng.standard_normal((128, 16), dtype=np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)

    mesh = Mesh(np.array(fx.devices()), ("batch",))
    replicated = NamedSharding(mesh, P())
    batch = NamedSharding(mesh, P("batch"))
    # This process's rows only (a real data loader would read just these).
    rows = len(x) // n
    mine = slice(me * rows, (me + 1) * rows)
    x_local = fx.make_array_from_process_local_data(batch, x[mine])
    y_local = fx.make_array_from_process_local_data(batch, y[mine])
    params = fx.make_array_from_process_local_data(replicated, params)
    jstep = fx.jit(step, in_shardings=(replicated, batch, batch), out_shardings=(replicated, replicated))

    losses, times = [], []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        params, value = jstep(params, x_local, y_local)
        losses.append(float(value))
        times.append(time.perf_counter() - t0)
    print("RESULT " + json.dumps({
        "process": me,
        "devices": [d.id for d in fx.local_devices()],
        "losses": losses,
        "step_seconds": times,
    }), flush=True)
    fx.distributed.shutdown()


if __name__ == "__main__":
    main()
