"""Products: ``dot`` and ``matmul`` (the ``@`` operator), as ``dot_general``.

Operands are promoted to one dtype, which is also the ``preferred_element_type``.
``matmul`` broadcasts batch dimensions: an operand without them is contracted as it is
(``x @ w`` for a batch of ``x`` is one ``dot_general`` with no batch dimensions, as in
JAX); batch dimensions on both sides are broadcast to one shape and become
``dot_general``'s batch dimensions.
"""

from __future__ import annotations

from typing import Any

from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import aval_of
from ferrax._staging import _staged_product
from ferrax.numpy._promotion import (
    ArrayLike,
    as_array,
    broadcast_shapes,
    broadcast_to,
    convert,
    operand_aval,
    shape_error,
)
from ferrax.numpy._shape import transpose
from ferrax.numpy._ufuncs import multiply

__all__ = ["dot", "matmul"]


def _operands(name: str, a: ArrayLike, b: ArrayLike) -> tuple[Array, Array]:
    # As JAX's dot: the operands' result_type, so a weakly typed result has its kind's
    # default dtype (two weak int8 vectors give a weak int32).
    avals = [operand_aval(name, a, 0), operand_aval(name, b, 1)]
    dtype, weak = dtypes.result_type([(v.dtype, v.weak_type) for v in avals])
    return as_array(convert(a, dtype, weak), name, 0), as_array(convert(b, dtype, weak), name, 1)


def _dot_general(x: Array, y: Array, contract: tuple[int, int], batch: int = 0) -> Array:
    dims = ((contract[0],), (contract[1],)), (tuple(range(batch)), tuple(range(batch)))
    return lax.dot_general(x, y, dims, preferred_element_type=x.dtype)


def _check_contraction(name: str, x: Array, y: Array, xc: int, yc: int) -> None:
    if x.shape[xc] != y.shape[yc]:
        raise shape_error(
            f"{name}: cannot contract dimension {xc} of {aval_of(x).str_short()} with "
            f"dimension {yc} of {aval_of(y).str_short()} (sizes {x.shape[xc]} and {y.shape[yc]})"
        )


def dot(a: ArrayLike, b: ArrayLike) -> Array:
    """NumPy's ``dot``: the product of scalars, the inner product of vectors, and otherwise
    the sum over the last axis of ``a`` and the second-to-last of ``b`` (the only one if
    ``b`` is a vector)."""
    staged = _staged_product(a, b)
    if staged is not None:
        return staged
    x, y = _operands("dot", a, b)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    xc, yc = x.ndim - 1, (0 if y.ndim == 1 else y.ndim - 2)
    _check_contraction("dot", x, y, xc, yc)
    return _dot_general(x, y, (xc, yc))


def matmul(a: ArrayLike, b: ArrayLike) -> Array:
    """``a @ b``: matrix products over the last two axes, broadcasting the others
    (batch) axes; a vector operand is a row (``a``) or column (``b``) whose axis is then
    dropped. Scalars are refused, as in NumPy."""
    staged = _staged_product(a, b)
    return matmul_general(a, b) if staged is None else staged


def matmul_general(a: ArrayLike, b: ArrayLike) -> Array:
    """:func:`matmul` without its staged fast path (which the caller tried)."""
    x, y = _operands("matmul", a, b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("matmul: operands must not be scalars (use multiply or *)")
    xc, yc = x.ndim - 1, (0 if y.ndim == 1 else y.ndim - 2)
    _check_contraction("matmul", x, y, xc, yc)
    x_batch, y_batch = x.shape[:-2], y.shape[:-2]
    if not y_batch:
        # (..., n, k) @ (k, m) or (k,): the result's axes are x's then y's free ones.
        return _dot_general(x, y, (xc, yc))
    if not x_batch:
        out = _dot_general(x, y, (xc, yc))
        if x.ndim == 1:
            return out
        # (n, batch..., m) -> (batch..., n, m)
        nb = len(y_batch)
        return transpose(out, (*range(1, nb + 1), 0, nb + 1))
    batch = broadcast_shapes(x_batch, y_batch)
    x = _broadcast_batch(x, batch)
    y = _broadcast_batch(y, batch)
    nb = len(batch)
    return _dot_general(x, y, (nb + 1, nb), nb)


def _broadcast_batch(x: Array, batch: tuple[int, ...]) -> Any:
    shape = (*batch, *x.shape[-2:])
    return x if x.shape == shape else broadcast_to(x, shape)
