"""``ferrax.random``: JAX's PRNG API, with the same bits as JAX 0.10's default PRNG
(threefry2x32, ``jax_threefry_partitionable=True``) for the same keys.

Keys are typed (``key(0)``: a :class:`KeyArray` of dtype ``key<fry>``) or raw
(``PRNGKey(0)``: ``uint32[2]``); every function takes either, and ``split``/``fold_in``
return the kind they were given. Keys pass through ``jit``, ``vmap``, ``lax.scan`` and
``lax.cond``.

Signatures are JAX's; ``out_sharding`` is accepted but only as ``None`` so far.
``multivariate_normal`` takes ``method='cholesky'`` (its default) only. ``truncated_normal``
needs ``ferrax.lax.erf``. The gamma family (``gamma``, ``loggamma``, ``beta``,
``dirichlet``, ``t``) samples as JAX does but has no derivative with respect to its
parameters yet. ``permutation`` sorts with NumPy when its key is known, with
``lax.sort_key_val`` when traced (by comparing all pairs in builds without it);
``choice(replace=False)`` with ``p`` and ``categorical(replace=False)`` take the top k
by comparing all pairs, as ferrax has no ``lax.top_k`` yet (quadratic in the axis
length; the same results as JAX's).
"""

from ferrax.random._keys import (
    KeyArray,
    KeyDType,
    PRNGKey,
    clone,
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
    beta,
    bits,
    categorical,
    cauchy,
    choice,
    dirichlet,
    exponential,
    gamma,
    gumbel,
    laplace,
    logistic,
    loggamma,
    normal,
    permutation,
    rademacher,
    randint,
    t,
    truncated_normal,
    uniform,
)
from ferrax.random._multivariate import multivariate_normal

__all__ = [
    "KeyArray",
    "KeyDType",
    "PRNGKey",
    "bernoulli",
    "beta",
    "bits",
    "categorical",
    "cauchy",
    "choice",
    "clone",
    "dirichlet",
    "exponential",
    "fold_in",
    "gamma",
    "gumbel",
    "key",
    "key_data",
    "key_dtype",
    "key_impl",
    "laplace",
    "logistic",
    "loggamma",
    "multivariate_normal",
    "normal",
    "permutation",
    "rademacher",
    "randint",
    "split",
    "t",
    "truncated_normal",
    "uniform",
    "wrap_key_data",
]
