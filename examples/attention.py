"""A causal self-attention block trained with ferrax on a synthetic next-token task.

The model: token and position embeddings, one pre-norm transformer block (layer norm
written out, multi-head causal self-attention with a ``tril`` mask, a residual MLP with
gelu), a final layer norm and a linear read-out to the vocabulary. The task: each
sequence counts modulo the vocabulary size from a random start by a random stride
(``s, s + d, s + 2d, ...``); predicting the next token needs the two before it, so the
model has to attend to the past. Trained with next-token softmax cross-entropy and Adam
(``ferrax.example_libraries.optimizers``).

Run: ``python examples/attention.py`` (a few seconds on a CPU).
"""

import time

import ferrax as fx
import ferrax.numpy as jnp
import ferrax.random as random
from ferrax import nn
from ferrax.example_libraries import optimizers

VOCAB = 32
SEQ = 16
DIM = 64
HEADS = 4
BATCH = 32


def init_params(key):
    """Parameters as a dict of arrays (normal(0.02) weights, unit layer-norm gains)."""
    ks = random.split(key, 8)

    def w(k, shape):
        return 0.02 * random.normal(k, shape, jnp.float32)

    def norm():
        return {"g": jnp.ones(DIM, jnp.float32), "b": jnp.zeros(DIM, jnp.float32)}

    return {
        "embed": w(ks[0], (VOCAB, DIM)),
        "pos": w(ks[1], (SEQ, DIM)),
        "ln1": norm(),
        "qkv": w(ks[2], (DIM, 3 * DIM)),
        "out": w(ks[3], (DIM, DIM)),
        "ln2": norm(),
        "mlp_in": w(ks[4], (DIM, 4 * DIM)),
        "mlp_in_b": jnp.zeros(4 * DIM, jnp.float32),
        "mlp_out": w(ks[5], (4 * DIM, DIM)),
        "mlp_out_b": jnp.zeros(DIM, jnp.float32),
        "ln_f": norm(),
        "unembed": w(ks[6], (DIM, VOCAB)),
    }


def layer_norm(p, x, eps=1e-5):
    """Normalizes the last axis to mean 0 and variance 1, then scales and shifts."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * p["g"] + p["b"]


def causal_attention(params, x):
    """Multi-head self-attention where position t sees positions 0..t only."""
    batch, seq, dim = x.shape
    head = dim // HEADS
    q, k, v = jnp.split(x @ params["qkv"], 3, axis=-1)

    def heads(t):  # [batch, seq, dim] -> [batch, heads, seq, head]
        return t.reshape(batch, seq, HEADS, head).transpose(0, 2, 1, 3)

    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(jnp.float32(head))
    mask = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(mask, scores, -1e9)
    out = nn.softmax(scores, axis=-1) @ v
    return out.transpose(0, 2, 1, 3).reshape(batch, seq, dim) @ params["out"]


def forward(params, tokens):
    """Logits ``f32[batch, seq, VOCAB]`` for each position's next token."""
    x = params["embed"][tokens] + params["pos"]
    x = x + causal_attention(params, layer_norm(params["ln1"], x))
    h = nn.gelu(layer_norm(params["ln2"], x) @ params["mlp_in"] + params["mlp_in_b"])
    x = x + h @ params["mlp_out"] + params["mlp_out_b"]
    return layer_norm(params["ln_f"], x) @ params["unembed"]


def loss(params, tokens):
    """Next-token cross-entropy: positions 0..SEQ-2 predict tokens 1..SEQ-1."""
    logits = forward(params, tokens[:, :-1])
    targets = nn.one_hot(tokens[:, 1:], VOCAB)
    return -jnp.mean(jnp.sum(targets * nn.log_softmax(logits), axis=-1))


def make_batch(key, batch=BATCH):
    """Sequences ``(s + d * t) % VOCAB`` of length SEQ + 1, random s and d in 1..4."""
    k_start, k_stride = random.split(key)
    start = random.randint(k_start, (batch, 1), 0, VOCAB)
    stride = random.randint(k_stride, (batch, 1), 1, 5)
    return (start + stride * jnp.arange(SEQ + 1)) % VOCAB


opt_init, opt_update, get_params = optimizers.adam(3e-3)

loss_and_grad = fx.jit(fx.value_and_grad(loss))


@fx.jit
def train_step(i, opt_state, tokens):
    """Training step ``i``, compiled, on a batch of sequences."""
    value, grads = fx.value_and_grad(loss)(get_params(opt_state), tokens)
    return opt_update(i, grads, opt_state), value


def main(steps=150):
    key = random.key(0)
    k_init, key = random.split(key)
    opt_state = opt_init(init_params(k_init))
    start = time.perf_counter()
    for i in range(steps):
        key, k_batch = random.split(key)
        opt_state, value = train_step(i, opt_state, make_batch(k_batch))
        if i % 25 == 0 or i == steps - 1:
            print(f"step {i:3d}: loss {float(value):.4f}")
    print(f"{steps} steps in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
