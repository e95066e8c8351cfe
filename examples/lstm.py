"""An LSTM trained with ferrax, unrolled over time by ``lax.scan``.

The task is synthetic, made with ``ferrax.random``: each input sequence is noise
``x_t ~ N(0, 1)`` and the target at step t is the sum of the last three inputs,
``x_{t-2} + x_{t-1} + x_t``: the network has to remember what it saw. One LSTM layer
(gates ``i, f, g, o`` from one matrix product of ``[x_t, h_{t-1}]``) feeds a linear
read-out at every step; the loss is the mean squared error, trained with Adam from
``ferrax.example_libraries.optimizers``.

Run: ``python examples/lstm.py`` (a few seconds on a CPU).
"""

import time

import ferrax as fx
import ferrax.numpy as jnp
import ferrax.random as random
from ferrax import lax, nn
from ferrax.example_libraries import optimizers

SEQ = 20
BATCH = 64
INPUTS = 1
HIDDEN = 64
WINDOW = 3


def init_params(key):
    """LSTM weights (input and recurrent stacked), forget-gate bias 1, and a read-out."""
    k_x, k_h, k_out = random.split(key, 3)
    scale = 1.0 / HIDDEN**0.5
    bias = jnp.zeros(4 * HIDDEN, jnp.float32).at[HIDDEN : 2 * HIDDEN].set(1.0)
    return {
        "wx": scale * random.normal(k_x, (INPUTS, 4 * HIDDEN), jnp.float32),
        "wh": scale * random.normal(k_h, (HIDDEN, 4 * HIDDEN), jnp.float32),
        "b": bias,
        "w_out": scale * random.normal(k_out, (HIDDEN, 1), jnp.float32),
        "b_out": jnp.zeros(1, jnp.float32),
    }


def lstm_cell(params, carry, x_t):
    """One time step: ``(h, c), x_t -> (h', c'), h'``."""
    h, c = carry
    gates = x_t @ params["wx"] + h @ params["wh"] + params["b"]
    i, f, g, o = jnp.split(gates, 4, axis=-1)
    c = nn.sigmoid(f) * c + nn.sigmoid(i) * jnp.tanh(g)
    h = nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), h


def predict(params, xs):
    """Outputs ``f32[seq, batch, 1]`` for inputs ``f32[seq, batch, INPUTS]`` (time first)."""
    batch = xs.shape[1]
    zeros = jnp.zeros((batch, HIDDEN), jnp.float32)
    _, hs = lax.scan(lambda carry, x_t: lstm_cell(params, carry, x_t), (zeros, zeros), xs)
    return hs @ params["w_out"] + params["b_out"]


def loss(params, xs, ys):
    """Mean squared error over every step of every sequence."""
    return jnp.mean((predict(params, xs) - ys) ** 2)


def make_batch(key, batch=BATCH):
    """Inputs ``f32[SEQ, batch, 1]`` and targets: the sum of the last WINDOW inputs."""
    xs = random.normal(key, (SEQ, batch, INPUTS), jnp.float32)
    padded = jnp.concatenate([jnp.zeros((WINDOW - 1, batch, INPUTS), jnp.float32), xs])
    ys = sum(padded[k : k + SEQ] for k in range(WINDOW))
    return xs, ys


opt_init, opt_update, get_params = optimizers.adam(1e-2)

loss_and_grad = fx.jit(fx.value_and_grad(loss))


@fx.jit
def train_step(i, opt_state, xs, ys):
    """Training step ``i``, compiled (forward scan, its transpose, Adam)."""
    value, grads = fx.value_and_grad(loss)(get_params(opt_state), xs, ys)
    return opt_update(i, grads, opt_state), value


def main(steps=200):
    key = random.key(0)
    k_init, key = random.split(key)
    opt_state = opt_init(init_params(k_init))
    start = time.perf_counter()
    for i in range(steps):
        key, k_batch = random.split(key)
        xs, ys = make_batch(k_batch)
        opt_state, value = train_step(i, opt_state, xs, ys)
        if i % 25 == 0 or i == steps - 1:
            print(f"step {i:3d}: loss {float(value):.4f}")
    print(f"{steps} steps in {time.perf_counter() - start:.1f} s (the targets' variance is 3)")


if __name__ == "__main__":
    main()
