"""``ferrax.lax``: one function per built-in primitive, with JAX's names and parameters,
plus structured control flow (coming with the control-flow primitives).

As in JAX, ``lax`` does not promote dtypes: the operands of a binary function have one
dtype, and the results and their weak types are JAX's (each function is tested against
``jax.lax``, eagerly and staged). Eager evaluation follows XLA's semantics: integer
division truncates, float-to-integer conversion saturates, floating-point exceptions give
inf and NaN silently. Functions that would be the identity (``reshape`` to the same
shape, ``convert_element_type`` to the same type, ...) return their operand, recording no
equation, as JAX's do.

Deliberate differences from ``jax.lax``:

* A Python scalar operand takes the other operand's dtype when that dtype's kind (bool,
  integer, float) is at least the scalar's: ``lax.mul(x_f16, 2.0)`` and
  ``lax.add(x_i8, 1)`` work (JAX requires the scalar's default dtype to match). A float
  scalar with an integer array is still an error, never a silent truncation.
* ``expand_dims`` is a primitive of its own (JAX records a ``broadcast_in_dim``).
* ``convert_element_type`` takes ``weak_type``; ``dot_general``'s ``precision`` is
  recorded as a string.
* ``dynamic_slice`` and ``dynamic_update_slice`` convert start indices of several
  integer dtypes to int32 (JAX refuses them).
"""

from __future__ import annotations

from typing import Any

from ferrax._array import Array
from ferrax._core import ConcreteArray, to_numpy
from ferrax._lax._operands import scalar
from ferrax._lax.bits import bitcast_convert_type, clz, population_count
from ferrax._lax.convenience import (
    associative_scan,
    batch_matmul,
    broadcast,
    broadcast_shapes,
    broadcast_to_rank,
    collapse,
    dot,
    dynamic_update_index_in_dim,
    dynamic_update_slice_in_dim,
    full,
    full_like,
    index_in_dim,
    map,
    reciprocal,
    slice_in_dim,
)
from ferrax._lax.sorting import cumlogsumexp, cummax, cummin, cumprod, cumsum, sort, sort_key_val, top_k
from ferrax._lax.custom import stop_gradient
from ferrax._lax.layout import with_sharding_constraint
from ferrax._lax.control import cond, fori_loop, scan, switch, while_loop
from ferrax._lax.special import (
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    cbrt,
    cosh,
    digamma,
    erf,
    erf_inv,
    erfc,
    exp2,
    is_finite,
    lgamma,
    sinh,
)
from ferrax._lax.elementwise import (
    abs,
    add,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    ceil,
    clamp,
    convert_element_type,
    cos,
    div,
    eq,
    exp,
    expm1,
    floor,
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
    round,
    RoundingMethod,
    rsqrt,
    select_n,
    shift_left,
    shift_right_arithmetic,
    shift_right_logical,
    sign,
    sin,
    sqrt,
    square,
    sub,
    tan,
    tanh,
)
from ferrax._lax.parallel import (
    all_gather,
    all_to_all,
    axis_index,
    axis_size,
    pcast,
    pmax,
    pmean,
    pmin,
    ppermute,
    pshuffle,
    psum,
    psum_scatter,
    pvary,
)
from ferrax._lax.reductions import argmax, argmin, reduce_max, reduce_min, reduce_prod, reduce_sum
from ferrax._lax.slicing import (
    GatherDimensionNumbers,
    GatherScatterMode,
    ScatterDimensionNumbers,
    gather,
    rev,
    scatter,
    scatter_add,
    scatter_max,
    scatter_min,
    scatter_mul,
    scatter_sub,
)
from ferrax._lax.elementwise import mulhi
from ferrax._lax.structural import optimization_barrier, stack, tile, unstack
from ferrax._lax.structural import (
    broadcast_in_dim,
    broadcasted_iota,
    concatenate,
    dot_general,
    dynamic_index_in_dim,
    dynamic_slice,
    dynamic_slice_in_dim,
    dynamic_update_slice,
    expand_dims,
    iota,
    pad,
    reshape,
    slice,
    split,
    squeeze,
    transpose,
)

__all__ = [
    "cond",
    "fori_loop",
    "scan",
    "switch",
    "while_loop",
    "RoundingMethod", "abs", "add", "argmax", "argmin", "bitwise_and", "bitwise_not",
    "bitwise_or", "bitwise_xor", "broadcast_in_dim", "broadcasted_iota", "ceil", "clamp",
    "concatenate", "convert_element_type", "cos", "div", "dot_general", "dynamic_slice",
    "dynamic_update_slice", "eq", "exp", "expand_dims", "expm1", "floor", "ge", "gt",
    "integer_pow", "iota", "le", "log", "log1p", "logistic", "lt", "max", "min", "mul", "ne",
    "neg", "pad", "pow", "reduce_max", "reduce_min", "reduce_prod", "reduce_sum", "rem",
    "reshape", "round", "rsqrt", "select_n", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "sign", "sin",
    "slice", "split", "sqrt", "square", "squeeze", "stop_gradient", "sub", "tan", "tanh", "transpose",
    # special functions and the rest of the trigonometric family
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cosh", "digamma",
    "erf", "erf_inv", "erfc", "exp2", "is_finite", "lgamma", "sinh",
    # indexing with computed positions
    "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather", "rev",
    "scatter", "scatter_add", "scatter_max", "scatter_min", "scatter_mul", "scatter_sub",
    # dynamic_slice along one axis
    "dynamic_index_in_dim", "dynamic_slice_in_dim",
    # collectives over named axes (vmap's axis_name, shard_map's mesh axes)
    "all_gather", "all_to_all", "axis_index", "axis_size", "pcast", "pmax", "pmean", "pmin",
    "ppermute", "pshuffle", "psum", "psum_scatter", "pvary",
    # layout over devices
    "with_sharding_constraint",
    # bits
    "bitcast_convert_type", "clz", "population_count",
    # compositions of primitives
    "associative_scan", "batch_matmul", "broadcast", "broadcast_shapes", "broadcast_to_rank",
    "collapse", "dot", "dynamic_update_index_in_dim", "dynamic_update_slice_in_dim", "full",
    "full_like", "index_in_dim", "map", "reciprocal", "slice_in_dim",
    # sorting and cumulative reductions
    "cumlogsumexp", "cummax", "cummin", "cumprod", "cumsum", "sort", "sort_key_val", "top_k",
    # stacking, tiling, the integer high product and the optimization barrier
    "mulhi", "optimization_barrier", "stack", "tile", "unstack",
]


