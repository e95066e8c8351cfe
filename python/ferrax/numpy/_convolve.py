"""``convolve`` and ``correlate`` of one-dimensional arrays, as JAX computes them: one
``conv_general_dilated`` of the longer operand with the (flipped, for ``convolve``)
shorter one, in the promoted inexact dtype (or the promoted dtype when
``preferred_element_type`` is given)."""

from __future__ import annotations

from typing import Any

from ferrax._jit import staged
from ferrax import dtypes
from ferrax._array import Array
from ferrax._core import user_location
from ferrax._lax import convolution
from ferrax.numpy._shape import flip
from ferrax.numpy._promotion import ArrayLike, DTypeLike, convert, operand_aval

__all__ = ["convolve", "correlate"]


@staged(static_argnames=("mode", "op", "precision", "preferred_element_type"))
def _conv(x: ArrayLike, y: ArrayLike, mode: str, op: str, precision: Any, preferred_element_type: DTypeLike | None) -> Array:
    ax, ay = operand_aval(op, x, 0), operand_aval(op, y, 1)
    if len(ax.shape) != 1 or len(ay.shape) != 1:
        raise ValueError(f"{op}() only support 1-dimensional inputs, at {user_location()}.")
    dtype, weak = dtypes.promote([(ax.dtype, ax.weak_type), (ay.dtype, ay.weak_type)])
    if preferred_element_type is None:
        dtype = dtypes.to_inexact(dtype)
    a, v = convert(x, dtype, weak), convert(y, dtype, weak)
    if ax.shape[0] == 0 or ay.shape[0] == 0:
        raise ValueError(
            f"{op}: inputs cannot be empty, got shapes {tuple(ax.shape)} and {tuple(ay.shape)}, at {user_location()}."
        )
    reverse_out = False
    if len(a.shape) and a.shape[0] < v.shape[0]:
        a, v = v, a
        reverse_out = op == "correlate"
    if op == "convolve":
        v = flip(v, 0)
    n = v.shape[0]
    if mode == "valid":
        padding = [(0, 0)]
    elif mode == "same":
        padding = [(n // 2, n - n // 2 - 1)]
    elif mode == "full":
        padding = [(n - 1, n - 1)]
    else:
        raise ValueError(f"mode must be one of ['full', 'same', 'valid'], at {user_location()}")
    out = convolution.conv_general_dilated(
        a[None, None, :], v[None, None, :], (1,), padding,
        precision=precision, preferred_element_type=preferred_element_type,
    )
    result: Array = out[0, 0, ::-1] if reverse_out else out[0, 0, :]
    return result


@staged(static_argnames=("mode", "precision", "preferred_element_type"))
def convolve(
    a: ArrayLike, v: ArrayLike, mode: str = "full", *, precision: Any = None,
    preferred_element_type: DTypeLike | None = None,
) -> Array:
    """The discrete convolution of two one-dimensional arrays (``numpy.convolve``):
    ``mode`` ``'full'`` (every overlap), ``'same'`` (the longer operand's length) or
    ``'valid'`` (full overlaps only)."""
    return _conv(a, v, mode, "convolve", precision, preferred_element_type)


def correlate(
    a: ArrayLike, v: ArrayLike, mode: str = "valid", *, precision: Any = None,
    preferred_element_type: DTypeLike | None = None,
) -> Array:
    """The cross-correlation of two one-dimensional arrays (``numpy.correlate``), in
    ``mode`` ``'valid'`` (default), ``'same'`` or ``'full'``."""
    return _conv(a, v, mode, "correlate", precision, preferred_element_type)
