"""``ferrax.random``: JAX's PRNG API, with the same bits as JAX 0.10's default PRNG
(threefry2x32, ``jax_threefry_partitionable=True``) for the same keys.

Keys are typed (``key(0)``: a :class:`KeyArray` of dtype ``key<fry>``) or raw
(``PRNGKey(0)``: ``uint32[2]``); every function takes either, and ``split``/``fold_in``
return the kind they were given. Keys pass through ``jit``, ``vmap``, ``lax.scan`` and
``lax.cond``.

Not yet here (ferrax lacks what JAX uses): ``choice`` with ``p=``, ``categorical`` with
``replace=False`` (``lax.top_k``), ``gumbel(mode="highest")`` in float32 (``lax.clz``),
``truncated_normal`` (``erf``, ``nextafter``), ``multivariate_normal`` (linalg), and the
gamma family (``gamma``, ``beta``, ``dirichlet``, ``t``). ``permutation`` sorts by
comparing all pairs (ferrax has no sort primitive yet): quadratic in the axis length.
"""

from ferrax.random._keys import (
    KeyArray,
    KeyDType,
    PRNGKey,
    fold_in,
    key,
    key_data,
    key_dtype,
    key_impl,
    split,
    wrap_key_data,
)
from ferrax.random._samplers import (
    bernoulli,
    bits,
    categorical,
    cauchy,
    choice,
    exponential,
    gumbel,
    laplace,
    logistic,
    normal,
    permutation,
    rademacher,
    randint,
    uniform,
)

__all__ = [
    "KeyArray",
    "KeyDType",
    "PRNGKey",
    "bernoulli",
    "bits",
    "categorical",
    "cauchy",
    "choice",
    "exponential",
    "fold_in",
    "gumbel",
    "key",
    "key_data",
    "key_dtype",
    "key_impl",
    "laplace",
    "logistic",
    "normal",
    "permutation",
    "rademacher",
    "randint",
    "split",
    "uniform",
    "wrap_key_data",
]
