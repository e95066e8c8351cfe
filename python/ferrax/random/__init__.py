"""``ferrax.random``: JAX's PRNG API, with the same bits as JAX 0.10's default PRNG
(threefry2x32, ``jax_threefry_partitionable=True``) for the same keys.

Keys are typed (``key(0)``: a :class:`KeyArray` of dtype ``key<fry>``) or raw
(``PRNGKey(0)``: ``uint32[2]``); every function takes either, and ``split``/``fold_in``
return the kind they were given. Keys pass through ``jit``, ``vmap``, ``lax.scan`` and
``lax.cond``. In jaxprs, keys are ``key<fry>`` arrays and the key operations are JAX's
primitives (``random_seed``, ``random_wrap``/``random_unwrap``, ``random_split``,
``random_fold_in``, ``random_bits``): ``make_jaxpr`` of a sampler reads as JAX's.

Signatures are JAX's; ``out_sharding`` is accepted but only as ``None`` so far.
Every sampler of ``jax.random`` is here,
also ``lognormal``, ``maxwell``, ``double_sided_maxwell``, ``rayleigh``, ``pareto``,
``weibull_min``, ``wald``, ``triangular``, ``geometric``, ``chisquare``, ``f``,
``generalized_normal``, ``ball``, ``poisson`` (Knuth's method and transformed rejection,
as JAX), ``binomial`` (inversion and BTRS) and ``multinomial``; ``lognormal`` takes no
complex dtype yet.
``multivariate_normal`` takes JAX's three methods (``'cholesky'``, ``'svd'``, ``'eigh'``).
The gamma family (``gamma``, ``loggamma``, ``beta``, ``dirichlet``, ``t``, ``chisquare``,
``f``) samples as JAX does and differentiates with respect to its shape parameters as JAX
does (implicitly, through ``lax.random_gamma_grad``).
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
from ferrax.random._distributions import (
    ball,
    binomial,
    chisquare,
    double_sided_maxwell,
    f,
    generalized_normal,
    geometric,
    lognormal,
    maxwell,
    multinomial,
    pareto,
    poisson,
    rayleigh,
    triangular,
    wald,
    weibull_min,
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
from ferrax.random._multivariate import multivariate_normal, orthogonal

__all__ = [
    "KeyArray",
    "KeyDType",
    "PRNGKey",
    "ball",
    "bernoulli",
    "beta",
    "binomial",
    "bits",
    "categorical",
    "cauchy",
    "chisquare",
    "choice",
    "clone",
    "dirichlet",
    "double_sided_maxwell",
    "exponential",
    "f",
    "fold_in",
    "gamma",
    "generalized_normal",
    "geometric",
    "gumbel",
    "key",
    "key_data",
    "key_dtype",
    "key_impl",
    "laplace",
    "loggamma",
    "logistic",
    "lognormal",
    "maxwell",
    "multinomial",
    "multivariate_normal",
    "normal",
    "orthogonal",
    "pareto",
    "permutation",
    "poisson",
    "rademacher",
    "randint",
    "rayleigh",
    "split",
    "t",
    "triangular",
    "truncated_normal",
    "uniform",
    "wald",
    "weibull_min",
    "wrap_key_data",
]
