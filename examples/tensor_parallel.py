"""Tensor-parallel MLP over 4 CPU devices with shard_map: each device holds a slice of
the hidden layer.

The first weight matrix is split by columns and the second by rows along the hidden
dimension (mesh axis ``model``). Inside ``shard_map`` each device computes its part of
the hidden activations and its partial product with the second matrix; ``lax.psum``
adds the partial products over the devices. The gradient flows back through the psum
(its transpose hands every device the whole cotangent). Training gives the losses of the
same MLP on one device.

    python examples/tensor_parallel.py
"""

import os

os.environ.setdefault("JAX_NUM_CPU_DEVICES", "4")

import numpy as np  # noqa: E402

import ferrax as fx  # noqa: E402
import ferrax.numpy as fnp  # noqa: E402
from ferrax import lax  # noqa: E402
from ferrax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


def mlp_local(w1, w2, x):
    """One device's part: its hidden units, then the partial output summed over devices."""
    h = fnp.tanh(x @ w1)  # [batch, hidden / n]
    return lax.psum(h @ w2, "model")  # [batch, out], the same on every device


def mlp_reference(w1, w2, x):
    return fnp.tanh(x @ w1) @ w2


def train(mesh, steps=5):
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((16, 64), dtype=np.float32) / 4
    w2 = rng.standard_normal((64, 1), dtype=np.float32) / 8
    x = rng.standard_normal((32, 16), dtype=np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)

    if mesh is None:
        predict = mlp_reference
    else:
        predict = fx.shard_map(
            mlp_local, mesh=mesh, in_specs=(P(None, "model"), P("model", None), P()), out_specs=P()
        )
        w1 = fx.device_put(w1, NamedSharding(mesh, P(None, "model")))
        w2 = fx.device_put(w2, NamedSharding(mesh, P("model", None)))

    def loss(w1, w2, x, y):
        return fnp.mean((predict(w1, w2, x) - y) ** 2)

    @fx.jit
    def step(w1, w2, x, y):
        value, (g1, g2) = fx.value_and_grad(loss, argnums=(0, 1))(w1, w2, x, y)
        return w1 - 0.1 * g1, w2 - 0.1 * g2, value

    losses = []
    for _ in range(steps):
        w1, w2, value = step(w1, w2, x, y)
        losses.append(float(value))
    return losses, w1


if __name__ == "__main__":
    mesh = Mesh(np.array(fx.devices()), ("model",))
    losses, w1 = train(mesh)
    reference, _ = train(None)
    print("shard_map over 4 devices:", " ".join(f"{v:.6f}" for v in losses))
    print("one device:              ", " ".join(f"{v:.6f}" for v in reference))
    print("w1 stays split by columns:", w1.sharding.spec)
    np.testing.assert_allclose(losses, reference, rtol=1e-5)
    print("same losses")
