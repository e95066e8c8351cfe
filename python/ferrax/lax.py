"""``ferrax.lax``: one function per built-in primitive, with JAX's names and parameters,
plus structured control flow (coming with the control-flow primitives).

``lax`` does not promote dtypes: both operands of a binary function have one dtype, except
that a Python scalar takes the other operand's dtype (``lax.mul(x, 2.0)``).
"""

from __future__ import annotations

from typing import Any

from ferrax._array import Array
from ferrax._lax.elementwise import (
    abs,
    add,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    clamp,
    convert_element_type,
    cos,
    div,
    eq,
    exp,
    expm1,
    ge,
    gt,
    integer_pow,
    le,
    log,
    log1p,
    logistic,
    lt,
    max,
    min,
    mul,
    ne,
    neg,
    pow,
    rem,
    rsqrt,
    select_n,
    sign,
    sin,
    sqrt,
    square,
    sub,
    tan,
    tanh,
)
from ferrax._lax.reductions import argmax, argmin, reduce_max, reduce_min, reduce_prod, reduce_sum
from ferrax._lax.structural import (
    broadcast_in_dim,
    broadcasted_iota,
    concatenate,
    dot_general,
    dynamic_slice,
    dynamic_update_slice,
    expand_dims,
    iota,
    reshape,
    slice,
    squeeze,
    transpose,
)

__all__ = [
    "abs", "add", "argmax", "argmin", "bitwise_and", "bitwise_not", "bitwise_or",
    "broadcast_in_dim", "broadcasted_iota", "clamp", "concatenate", "convert_element_type",
    "cos", "div", "dot_general", "dynamic_slice", "dynamic_update_slice", "eq", "exp",
    "expand_dims", "expm1", "ge", "gt", "integer_pow", "iota", "le", "log", "log1p",
    "logistic", "lt", "max", "min", "mul", "ne", "neg", "pow", "reduce_max", "reduce_min",
    "reduce_prod", "reduce_sum", "rem", "reshape", "rsqrt", "select_n", "sign", "sin",
    "slice", "sqrt", "square", "squeeze", "stop_gradient", "sub", "tan", "tanh", "transpose",
]


def stop_gradient(x: Any) -> Array:
    """``x``, as a constant for differentiation (the identity until autodiff lands)."""
    from ferrax._lax._operands import scalar

    value = scalar(x)
    if isinstance(value, Array):
        return value
    from ferrax._core import ConcreteArray, to_numpy

    return ConcreteArray(to_numpy(value))
