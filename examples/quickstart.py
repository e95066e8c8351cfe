"""ferrax quickstart: trace a small model to a jaxpr, differentiate it, lower it to
StableHLO, train it for a few steps under jit, vectorize it with vmap (per-example
gradients); then work with the IR directly (parse, typecheck, prune, build)."""

import numpy as np

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import core


def predict(params, x):
    """A two-layer MLP."""
    (w1, b1), (w2, b2) = params
    h = fnp.tanh(x @ w1 + b1)
    return h @ w2 + b2


def loss(params, x, y):
    return fnp.mean((predict(params, x) - y) ** 2)


rng = np.random.default_rng(0)
params = [
    (rng.standard_normal((4, 8), dtype=np.float32), np.zeros(8, np.float32)),
    (rng.standard_normal((8, 1), dtype=np.float32), np.zeros(1, np.float32)),
]
x = rng.standard_normal((16, 4), dtype=np.float32)
y = rng.standard_normal((16, 1), dtype=np.float32)

# 1. Trace: the jaxpr of the loss (params flattened into inputs).
print(fx.make_jaxpr(loss)(params, x, y))

# 2. Differentiate: the gradient's jaxpr (the forward pass, then the transposed tangents).
print(fx.make_jaxpr(fx.grad(loss))(params, x, y))

# 3. Lower: the StableHLO module jit compiles.
fast_loss = fx.jit(loss)
print(fast_loss.lower(params, x, y).as_text()[:400], "...")

# 4. Run: compiled with XLA, the result stays on the device until NumPy asks.
value = fast_loss(params, x, y)
print("loss:", float(np.asarray(value)), "(eager:", float(np.asarray(loss(params, x, y))), ")")


# 5. Train: a few steps of gradient descent, each step one compiled jit(grad) call.
@fx.jit
def step(params, x, y):
    grads = fx.grad(loss)(params, x, y)
    return fx.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


for i in range(5):
    params = step(params, x, y)
    print(f"step {i + 1}: loss {float(np.asarray(fast_loss(params, x, y))):.4f}")

# 6. Vectorize: per-example gradients, vmap of grad over the batch (one example each).
per_example = fx.jit(fx.vmap(fx.grad(loss), in_axes=(None, 0, 0)))(params, x[:, None], y[:, None])
print("per-example gradients:", [g.shape for g in fx.tree_util.tree_leaves(per_example)])

# 7. The IR itself: parse JAX's text format, typecheck, prune, print.
jaxpr = core.parse_jaxpr(
    """{ lambda c:f32[8]; x:f32[8] y:f32[]. let
    a:f32[8] = mul x c
    b:f32[8] = add a 2.0:f32[]
    unused:f32[] = sin y
    s:f32[] = reduce_sum[axes=(0,)] b
  in (s, unused) }"""
)
print(core.typecheck(jaxpr))
pruned, used_inputs = core.dce(jaxpr, [True, False])
print("used inputs:", used_inputs)
print(pruned)

# Mistakes are reported at the user's line, or with the equation that caused them.
try:
    fx.make_jaxpr(lambda a, b: a + b)(np.ones(3, np.float32), np.ones(4, np.float32))
except fx.TypeCheckError as e:
    print("TypeCheckError:", str(e).splitlines()[0])
