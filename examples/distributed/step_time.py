"""One process of the 2-process step-time measurement (``launch.py --step-time`` starts
them): BENCH.md's data-parallel step (mlp(8): 8 layers of W: f32[256,256], b: f32[256],
``h = tanh(h @ W + b)``, mean squared error, ``params - 0.01 * grad``) on a batch of
256 split over the devices of every process, parameters replicated, as
``bench/sharding_bench.py`` times it in one process, with ferrax or with JAX
(``--library``): same XLA, same gloo collectives, so the ratio should be about 1.
"""

import argparse
import gc
import json
import statistics
import time

import numpy as np

DEPTH, WIDTH, BATCH, STEPS = 8, 256, 256, 10


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--library", choices=("ferrax", "jax"), default="ferrax")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    if args.library == "jax":
        import jax as lib
        import jax.numpy as fnp
        from jax import sharding
    else:
        import ferrax as lib
        import ferrax.numpy as fnp
        from ferrax import sharding

    lib.distributed.initialize(args.coordinator, args.num_processes, args.process_id,
                               initialization_timeout=60, heartbeat_timeout_seconds=10)
    me, n = lib.process_index(), lib.process_count()
    mesh = sharding.Mesh(np.array(lib.devices()), ("batch",))
    repl = sharding.NamedSharding(mesh, sharding.PartitionSpec())
    split = sharding.NamedSharding(mesh, sharding.PartitionSpec("batch"))

    def loss(params, x, y):
        h = x
        for w, b in params:
            h = fnp.tanh(h @ w + b)
        return fnp.mean((h - y) ** 2)

    def step(params, x, y):
        grads = lib.grad(loss)(params, x, y)
        return lib.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / 16, np.zeros(WIDTH, np.float32))
              for _ in range(DEPTH)]
    x = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)
    y = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)
    rows = slice(me * BATCH // n, (me + 1) * BATCH // n)
    params = lib.make_array_from_process_local_data(repl, params)
    x = lib.make_array_from_process_local_data(split, x[rows])
    y = lib.make_array_from_process_local_data(split, y[rows])
    jstep = lib.jit(step, in_shardings=(repl, split, split), out_shardings=repl)

    def ready(tree):
        for leaf in lib.tree_util.tree_leaves(tree):
            leaf.block_until_ready()

    params = jstep(params, x, y)  # compile and warm up
    ready(params)
    times = []
    for _ in range(args.reps):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        for _ in range(STEPS):
            params = jstep(params, x, y)
        ready(params)
        times.append((time.perf_counter() - t0) / STEPS)
        gc.enable()
    first = np.asarray(lib.tree_util.tree_leaves(params)[0].addressable_shards[0].data)
    print("RESULT " + json.dumps({
        "process": me, "library": args.library, "median_s": statistics.median(times),
        "min_s": min(times), "checksum": float(first.sum()),
    }), flush=True)
    lib.distributed.shutdown()


if __name__ == "__main__":
    main()
