"""``ferrax.numpy``: a NumPy-compatible subset with JAX's semantics.

Broadcasting follows NumPy; dtype promotion follows JAX: Python scalars are weakly typed
(``x_f32 * 2.0`` stays float32, ``int8_array + 1`` stays int8), Python floats default
to float32 and ints to int32, NumPy values keep their dtype (float64 stays float64).
Results are :class:`ferrax.Array`; under a transformation they are traced, and each
function stages the primitives JAX's function would where ferrax has them.

Shapes that do not fit together (broadcasting, ``reshape``, ``concatenate``, ``dot``,
``.at[...]`` values) raise :class:`ferrax.TypeCheckError` naming the user's line.
Indexing is NumPy's, as ``jax.numpy`` does it (see :mod:`ferrax.numpy._indexing`).

The package also implements the operators of :class:`ferrax.Array`.
"""

import sys

import numpy as _np

from ferrax import _array
from ferrax._array import Array
from ferrax.numpy._creation import (
    arange,
    array,
    asarray,
    astype,
    eye,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from ferrax.numpy._indexing import getitem, index_apply, index_update, take, take_along_axis
from ferrax.numpy._products import dot, matmul
from ferrax.numpy._promotion import ArrayLike, broadcast_shapes, broadcast_to, result_type
from ferrax.numpy._reductions import all, any, argmax, argmin, max, mean, min, prod, sum
from ferrax.numpy._shape import (
    concatenate,
    expand_dims,
    ravel,
    reshape,
    squeeze,
    stack,
    swapaxes,
    transpose,
)
from ferrax.numpy._ufuncs import (
    abs,
    absolute,
    add,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    clip,
    cos,
    divide,
    equal,
    exp,
    expm1,
    floor_divide,
    greater,
    greater_equal,
    invert,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    mod,
    multiply,
    negative,
    not_equal,
    positive,
    pow,
    power,
    remainder,
    sign,
    sin,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    where,
)
from ferrax.dtypes import bfloat16 as _bfloat16_dtype

ndarray = Array
"""The array type (:class:`ferrax.Array`), under NumPy's name."""

# Scalar types naming dtypes, as ``jnp.float32``: pass them as ``dtype=`` arguments.
bool_ = _np.bool_
int8 = _np.int8
int16 = _np.int16
int32 = _np.int32
int64 = _np.int64
uint8 = _np.uint8
uint16 = _np.uint16
uint32 = _np.uint32
uint64 = _np.uint64
float16 = _np.float16
float32 = _np.float32
float64 = _np.float64
bfloat16 = _bfloat16_dtype.type

__all__ = [
    # types
    "Array", "ArrayLike", "ndarray",
    "bfloat16", "bool_", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    # creation
    "arange", "array", "asarray", "astype", "eye", "full", "full_like", "linspace", "ones",
    "ones_like", "zeros", "zeros_like",
    # promotion and broadcasting
    "broadcast_shapes", "broadcast_to", "result_type",
    # elementwise
    "abs", "absolute", "add", "bitwise_and", "bitwise_not", "bitwise_or", "clip", "cos",
    "divide", "equal", "exp", "expm1", "floor_divide", "greater", "greater_equal", "invert",
    "less", "less_equal", "log", "log1p", "logical_and", "logical_not", "logical_or",
    "maximum", "minimum", "mod", "multiply", "negative", "not_equal", "positive", "pow",
    "power", "remainder", "sign", "sin", "sqrt", "square", "subtract", "tan", "tanh",
    "true_divide", "where",
    # reductions
    "all", "any", "argmax", "argmin", "max", "mean", "min", "prod", "sum",
    # shapes
    "concatenate", "expand_dims", "ravel", "reshape", "squeeze", "stack", "swapaxes",
    "transpose",
    # products
    "dot", "matmul",
    # indexing (Array.__getitem__ and Array.at)
    "getitem", "index_apply", "index_update", "take", "take_along_axis",
]

# The operators of ferrax.Array are implemented by this module (which imports _array,
# so _array cannot import it).
setattr(_array, "_fnp", sys.modules[__name__])
