"""A small CNN trained with ferrax on MNIST-shaped synthetic images.

Two 3x3 convolutions (``lax.conv_general_dilated``, NHWC images and HWIO kernels), each
followed by relu and 2x2 pooling (max pooling, then average pooling, with
``lax.reduce_window``), then a dense layer to 10 logits. The data are synthetic: 28x28x1
"images" drawn from a normal distribution, labelled by a fixed random teacher (a linear
map of the image averaged over 4x4 blocks), so there is something to learn. Trained with softmax cross-entropy
and Adam from ``ferrax.example_libraries.optimizers``.

Run: ``python examples/cnn.py`` (under a minute on a CPU).
"""

import time

import ferrax as fx
import ferrax.numpy as jnp
import ferrax.random as random
from ferrax import lax, nn
from ferrax.example_libraries import optimizers

NUM_EXAMPLES = 2048
BATCH = 64
CLASSES = 10
DIMS = ("NHWC", "HWIO", "NHWC")


def init_cnn(key):
    """Kernels (He-normal) and biases of the two convolutions and the dense layer."""
    k1, k2, k3 = random.split(key, 3)
    he = nn.initializers.he_normal()
    return {
        "conv1": {"w": he(k1, (3, 3, 1, 16), jnp.float32), "b": jnp.zeros(16, jnp.float32)},
        "conv2": {"w": he(k2, (3, 3, 16, 32), jnp.float32), "b": jnp.zeros(32, jnp.float32)},
        "dense": {"w": he(k3, (7 * 7 * 32, CLASSES), jnp.float32), "b": jnp.zeros(CLASSES, jnp.float32)},
    }


def conv(layer, x):
    """A 3x3 convolution with 'SAME' padding, stride 1, plus the bias."""
    y = lax.conv_general_dilated(x, layer["w"], (1, 1), "SAME", dimension_numbers=DIMS)
    return y + layer["b"]


def max_pool(x):
    """2x2 max pooling, stride 2."""
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def avg_pool(x):
    """2x2 average pooling, stride 2."""
    return lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0


def predict(params, images):
    """Logits ``f32[n, 10]`` of images ``f32[n, 28, 28, 1]``."""
    x = max_pool(nn.relu(conv(params["conv1"], images)))
    x = avg_pool(nn.relu(conv(params["conv2"], x)))
    x = x.reshape(x.shape[0], -1)
    return x @ params["dense"]["w"] + params["dense"]["b"]


def loss(params, images, labels):
    """Mean softmax cross-entropy of the logits against one-hot labels."""
    logits = predict(params, images)
    return -jnp.mean(jnp.sum(nn.one_hot(labels, CLASSES) * nn.log_softmax(logits), axis=-1))


def make_data(key, num=NUM_EXAMPLES):
    """Images ``f32[num, 28, 28, 1]`` and labels ``i32[num]``: a random linear teacher of
    the images' 4x4-averaged pixels (so coarse shapes decide the class)."""
    k_teacher, k_x = random.split(key)
    images = random.normal(k_x, (num, 28, 28, 1), jnp.float32)
    coarse = lax.reduce_window(images, 0.0, lax.add, (1, 4, 4, 1), (1, 4, 4, 1), "VALID") / 16.0
    teacher = random.normal(k_teacher, (7 * 7, CLASSES), jnp.float32)
    labels = jnp.argmax(coarse.reshape(num, -1) @ teacher, axis=-1)
    return images, labels


opt_init, opt_update, get_params = optimizers.adam(3e-3)

loss_and_grad = fx.jit(fx.value_and_grad(loss))


@fx.jit
def train_step(i, opt_state, images, labels, idx):
    """Step ``i``, compiled, on the minibatch ``images[idx], labels[idx]`` (a gather)."""
    value, grads = fx.value_and_grad(loss)(get_params(opt_state), images[idx], labels[idx])
    return opt_update(i, grads, opt_state), value


def main(epochs=3):
    key = random.key(0)
    k_data, k_init, key = random.split(key, 3)
    images, labels = make_data(k_data)
    opt_state = opt_init(init_cnn(k_init))
    steps_per_epoch = NUM_EXAMPLES // BATCH
    start = time.perf_counter()
    for epoch in range(epochs):
        key, k_perm = random.split(key)
        perm = random.permutation(k_perm, NUM_EXAMPLES)
        losses = []
        for i in range(steps_per_epoch):
            idx = perm[i * BATCH : (i + 1) * BATCH]
            opt_state, value = train_step(epoch * steps_per_epoch + i, opt_state, images, labels, idx)
            losses.append(float(value))
        accuracy = float(jnp.mean(jnp.argmax(predict(get_params(opt_state), images), axis=-1) == labels))
        print(
            f"epoch {epoch}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
            f"mean {sum(losses) / len(losses):.4f}, train accuracy {accuracy:.3f}"
        )
    print(f"{epochs * steps_per_epoch} steps in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
