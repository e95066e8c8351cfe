"""One process of the 2-process data-parallel benchmark (started by sharding_bench.py).

Runs sharding_bench's training step (mlp(8), batch 256) with the batch split over the
devices of all processes and the parameters replicated, in ferrax or in JAX (the same
configuration: jaxlib's distributed runtime, gloo collectives over loopback), and prints
one JSON line ``RESULT {...}`` with the per-step times of each repetition.

    python bench/dp_worker.py --system ferrax --coordinator 127.0.0.1:PORT \\
        --num-processes 2 --process-id 0 [--devices 1] [--reps 5] [--steps 10]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from typing import Any

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", choices=["ferrax", "jax"], required=True)
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--devices", type=int, default=1, help="CPU devices per process")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"

    mod: Any
    if args.system == "ferrax":
        import ferrax as mod
        import ferrax.numpy as fnp
        from ferrax import sharding
    else:
        import jax as mod
        import jax.numpy as fnp
        from jax import sharding

        mod.config.update("jax_cpu_collectives_implementation", "gloo")
    mod.distributed.initialize(args.coordinator, args.num_processes, args.process_id, initialization_timeout=60)
    import sharding_bench as sb

    mesh = sharding.Mesh(np.array(mod.devices()), ("batch",))
    repl = sharding.NamedSharding(mesh, sharding.PartitionSpec())
    split = sharding.NamedSharding(mesh, sharding.PartitionSpec("batch"))

    system = sb._Sys(args.system, mod, fnp, sharding)
    step, params, x, y = system.model()
    rows = sb.BATCH // args.num_processes
    mine = slice(args.process_id * rows, (args.process_id + 1) * rows)
    xs = mod.make_array_from_process_local_data(split, x[mine])
    ys = mod.make_array_from_process_local_data(split, y[mine])
    ps = mod.tree_util.tree_map(lambda a: mod.make_array_from_process_local_data(repl, a), params)
    jstep = mod.jit(step, in_shardings=(repl, split, split), out_shardings=repl)

    def ready(tree: Any) -> None:
        for leaf in mod.tree_util.tree_leaves(tree):
            leaf.block_until_ready()

    ready(jstep(ps, xs, ys))  # compile and warm up
    times = []
    for _ in range(args.reps):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        p = ps
        for _ in range(args.steps):
            p = jstep(p, xs, ys)
        ready(p)
        times.append((time.perf_counter() - t0) / args.steps)
        gc.enable()
    first = np.asarray(mod.tree_util.tree_leaves(p)[0].addressable_shards[0].data)
    print("RESULT " + json.dumps({"process": args.process_id, "step_s": times, "checksum": float(first.sum())}), flush=True)
    mod.distributed.shutdown()


if __name__ == "__main__":
    main()
