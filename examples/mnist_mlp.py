"""An MNIST-shaped classifier trained with ferrax: a 784 -> 512 -> 512 -> 10 MLP.

The data are synthetic, made with ``ferrax.random``: 28x28 "images" drawn from a normal
distribution, labelled by a fixed random teacher network (so there is something to learn
and the loss can go down). The model is trained with softmax cross-entropy on one-hot
labels, on minibatches gathered from the data set by indexing with a random permutation
inside the compiled step, and an Adam update written over pytrees with ``ferrax.tree.map``.

(A small CNN is left out: it needs ``lax.conv_general_dilated`` and pooling by
``lax.reduce_window``, which ferrax does not have yet.)

Run: ``python examples/mnist_mlp.py`` (a few seconds on a CPU).
"""

import time

import ferrax as fx
import ferrax.numpy as jnp
import ferrax.random as random
from ferrax import nn, tree

SIZES = (784, 512, 512, 10)
NUM_EXAMPLES = 4096
BATCH = 128


def init_mlp(key, sizes=SIZES):
    """One ``{"w", "b"}`` dict per layer: Glorot-uniform weights, zero biases."""
    keys = random.split(key, len(sizes) - 1)
    init = nn.initializers.glorot_uniform()
    return [
        {"w": init(k, (m, n), jnp.float32), "b": jnp.zeros(n, jnp.float32)}
        for k, m, n in zip(keys, sizes[:-1], sizes[1:])
    ]


def predict(params, x):
    """Logits of the MLP: relu between layers, none after the last."""
    for layer in params[:-1]:
        x = nn.relu(x @ layer["w"] + layer["b"])
    last = params[-1]
    return x @ last["w"] + last["b"]


def loss(params, x, labels):
    """Mean softmax cross-entropy of the logits against one-hot labels."""
    logits = predict(params, x)
    targets = nn.one_hot(labels, SIZES[-1])
    return -jnp.mean(jnp.sum(targets * nn.log_softmax(logits), axis=-1))


def make_data(key, num=NUM_EXAMPLES):
    """Inputs ``f32[num, 784]`` and their labels ``i32[num]`` from a random teacher."""
    k_teacher, k_x = random.split(key)
    teacher = init_mlp(k_teacher, (784, 64, 10))
    x = random.normal(k_x, (num, 784), jnp.float32)
    labels = jnp.argmax(predict(teacher, x), axis=-1)
    return x, labels


def adam_init(params):
    """Adam's state: the step count and the first and second moments (zeros)."""
    zeros = tree.map(jnp.zeros_like, params)
    return {"count": jnp.zeros((), jnp.int32), "mu": zeros, "nu": zeros}


def adam_update(params, grads, state, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    """One Adam step over any pytree of parameters; returns ``(params, state)``."""
    count = state["count"] + 1
    mu = tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["mu"], grads)
    nu = tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["nu"], grads)
    t = count.astype(jnp.float32)
    step = lr * jnp.sqrt(1 - b2**t) / (1 - b1**t)
    params = tree.map(lambda p, m, v: p - step * m / (jnp.sqrt(v) + eps), params, mu, nu)
    return params, {"count": count, "mu": mu, "nu": nu}


loss_and_grad = fx.jit(fx.value_and_grad(loss))


@fx.jit
def train_step(params, opt_state, x, labels, idx):
    """One compiled step on the minibatch ``x[idx], labels[idx]`` (a gather)."""
    value, grads = fx.value_and_grad(loss)(params, x[idx], labels[idx])
    params, opt_state = adam_update(params, grads, opt_state)
    return params, opt_state, value


def main(epochs=3):
    key = random.key(0)
    k_data, k_init, key = random.split(key, 3)
    x, labels = make_data(k_data)
    params = init_mlp(k_init)
    opt_state = adam_init(params)
    start = time.perf_counter()
    for epoch in range(epochs):
        key, k_perm = random.split(key)
        perm = random.permutation(k_perm, NUM_EXAMPLES)
        losses = []
        for i in range(NUM_EXAMPLES // BATCH):
            idx = perm[i * BATCH : (i + 1) * BATCH]
            params, opt_state, value = train_step(params, opt_state, x, labels, idx)
            losses.append(float(value))
        accuracy = float(jnp.mean(jnp.argmax(predict(params, x), axis=-1) == labels))
        print(
            f"epoch {epoch}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
            f"mean {sum(losses) / len(losses):.4f}, train accuracy {accuracy:.3f}"
        )
    print(f"{epochs * (NUM_EXAMPLES // BATCH)} steps in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
