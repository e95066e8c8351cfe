"""Data-parallel training of an MLP over 4 CPU devices, with XLA's SPMD partitioner.

The batch is split over the devices of a mesh (axis ``batch``), the parameters are
replicated; ``jit`` with ``in_shardings``/``out_shardings`` compiles one program that
XLA partitions, inserting the all-reduce of the gradients itself. The losses are those
of the same training on one device.

    python examples/data_parallel.py
"""

import os

# Four CPU devices in this process (before ferrax makes its runtime client).
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "4")

import numpy as np  # noqa: E402

import ferrax as fx  # noqa: E402
import ferrax.numpy as fnp  # noqa: E402
from ferrax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


def predict(params, x):
    for w, b in params[:-1]:
        x = fnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss(params, x, y):
    return fnp.mean((predict(params, x) - y) ** 2)


def step(params, x, y):
    value, grads = fx.value_and_grad(loss)(params, x, y)
    return fx.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), value


def init(rng, sizes):
    return [
        (rng.standard_normal((m, n), dtype=np.float32) / np.sqrt(m), np.zeros(n, np.float32))
        for m, n in zip(sizes[:-1], sizes[1:])
    ]


def train(n_devices, steps=5):
    rng = np.random.default_rng(0)
    params = init(rng, [16, 64, 64, 1])
    x = rng.standard_normal((128, 16), dtype=np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)

    mesh = Mesh(np.array(fx.devices()[:n_devices]), ("batch",))
    replicated = NamedSharding(mesh, P())
    batch = NamedSharding(mesh, P("batch"))
    params = fx.device_put(params, replicated)
    x, y = fx.device_put(x, batch), fx.device_put(y, batch)
    jstep = fx.jit(step, in_shardings=(replicated, batch, batch), out_shardings=(replicated, replicated))

    losses = []
    for _ in range(steps):
        params, value = jstep(params, x, y)
        losses.append(float(value))
    return losses, params


if __name__ == "__main__":
    print("devices:", fx.devices())
    losses4, params4 = train(4)
    losses1, _ = train(1)
    print("4 devices:", " ".join(f"{v:.6f}" for v in losses4))
    print("1 device: ", " ".join(f"{v:.6f}" for v in losses1))
    print("parameters stay replicated:", params4[0][0].sharding)
    np.testing.assert_allclose(losses4, losses1, rtol=1e-5)
    print("same losses on 4 devices as on 1")
