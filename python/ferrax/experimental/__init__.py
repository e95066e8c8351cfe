"""``ferrax.experimental``: APIs JAX keeps under ``jax.experimental``, at the same names
(``ferrax.experimental.multihost_utils``, ``ferrax.experimental.io_callback``)."""

from ferrax._callback import io_callback

__all__ = ["io_callback"]
