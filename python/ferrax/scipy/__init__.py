"""``ferrax.scipy``: the parts of ``jax.scipy`` ferrax has (:mod:`ferrax.scipy.special`)."""

from ferrax.scipy import special

__all__ = ["special"]
