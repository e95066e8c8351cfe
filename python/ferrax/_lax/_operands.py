"""Reading ``lax`` operands: arrays pass through; Python scalars take a dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from ferrax import dtypes
from ferrax._core import ConcreteArray, Tracer, aval_of


def is_array(x: Any) -> bool:
    """True for ferrax arrays and NumPy arrays/scalars (not Python scalars)."""
    return isinstance(x, (Tracer, ConcreteArray, np.ndarray, np.generic))


def scalar_as(x: Any, like: Any) -> Any:
    """A Python scalar as a weakly typed scalar of ``like``'s dtype; others unchanged.

    This is how ``lax`` takes ``lax.add(x, 1.0)``: the scalar adopts ``x``'s dtype.
    """
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        dtype = aval_of(like).dtype if is_array(like) else aval_of(x).dtype
        return ConcreteArray(np.asarray(x, dtype=dtype), True)
    return x


def pair(x: Any, y: Any) -> tuple[Any, Any]:
    """Two binary operands with Python scalars typed after the other operand."""
    return scalar_as(x, y), scalar_as(y, x)


def scalar(x: Any) -> Any:
    """A Python scalar as a weakly typed array of its default dtype."""
    return scalar_as(x, x)


def dtype_of(x: Any) -> np.dtype[Any]:
    """The ferrax dtype of any operand."""
    return aval_of(x).dtype


def canonical_dtype(d: Any) -> np.dtype[Any]:
    """A dtype-like as a NumPy dtype ferrax supports."""
    return dtypes.canonicalize(d)
