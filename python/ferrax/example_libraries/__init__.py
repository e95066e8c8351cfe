"""Small libraries written on ferrax, as JAX's ``jax.example_libraries``:
:mod:`~ferrax.example_libraries.optimizers` (``(init_fun, update_fun, get_params)``
triples) and :mod:`~ferrax.example_libraries.stax` (neural-network layers as
``(init_fun, apply_fun)`` pairs)."""

from ferrax.example_libraries import optimizers, stax

__all__ = ["optimizers", "stax"]
