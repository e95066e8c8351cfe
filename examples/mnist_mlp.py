"""An MNIST-shaped classifier trained with ferrax: a 784 -> 512 -> 512 -> 10 MLP.

The data are synthetic, made with ``ferrax.random``: 28x28 "images" drawn from a normal
distribution, labelled by a fixed random teacher network (so there is something to learn
and the loss can go down). The model is trained with softmax cross-entropy on one-hot
labels, on minibatches gathered from the data set by indexing with a random permutation
inside the compiled step, and Adam from ``ferrax.example_libraries.optimizers``.

(A small CNN is left out: it needs ``lax.conv_general_dilated`` and pooling by
``lax.reduce_window``, which ferrax does not have yet.)

Run: ``python examples/mnist_mlp.py`` (a few seconds on a CPU).
"""

import time

import ferrax as fx
import ferrax.numpy as jnp
import ferrax.random as random
from ferrax import nn
from ferrax.example_libraries import optimizers

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


opt_init, opt_update, get_params = optimizers.adam(1e-3)

loss_and_grad = fx.jit(fx.value_and_grad(loss))


@fx.jit
def train_step(i, opt_state, x, labels, idx):
    """Step ``i``, compiled, on the minibatch ``x[idx], labels[idx]`` (a gather)."""
    value, grads = fx.value_and_grad(loss)(get_params(opt_state), x[idx], labels[idx])
    return opt_update(i, grads, opt_state), value


def main(epochs=3):
    key = random.key(0)
    k_data, k_init, key = random.split(key, 3)
    x, labels = make_data(k_data)
    opt_state = opt_init(init_mlp(k_init))
    steps_per_epoch = NUM_EXAMPLES // BATCH
    start = time.perf_counter()
    for epoch in range(epochs):
        key, k_perm = random.split(key)
        perm = random.permutation(k_perm, NUM_EXAMPLES)
        losses = []
        for i in range(steps_per_epoch):
            idx = perm[i * BATCH : (i + 1) * BATCH]
            step = epoch * steps_per_epoch + i
            opt_state, value = train_step(step, opt_state, x, labels, idx)
            losses.append(float(value))
        params = get_params(opt_state)
        accuracy = float(jnp.mean(jnp.argmax(predict(params, x), axis=-1) == labels))
        print(
            f"epoch {epoch}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
            f"mean {sum(losses) / len(losses):.4f}, train accuracy {accuracy:.3f}"
        )
    print(f"{epochs * (NUM_EXAMPLES // BATCH)} steps in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
