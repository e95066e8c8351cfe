"""``ferrax.scipy``: the parts of ``jax.scipy`` ferrax has (:mod:`ferrax.scipy.special`,
:mod:`ferrax.scipy.linalg`)."""

from ferrax.scipy import linalg, special

__all__ = ["linalg", "special"]
