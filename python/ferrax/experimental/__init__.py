"""``ferrax.experimental``: APIs JAX keeps under ``jax.experimental``, at the same names
(``ferrax.experimental.multihost_utils``)."""
