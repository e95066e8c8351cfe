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
from ferrax._lax.bits import nextafter, reduce_precision
from ferrax._lax.reductions import reduce_and, reduce_or, reduce_xor
from ferrax._lax.convenience import broadcast_like, empty, index_take
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
from ferrax._lax.windowed import (
    padtype_to_pads,
    reduce_window,
    reduce_window_max_p,
    reduce_window_min_p,
    reduce_window_p,
    reduce_window_shape_tuple,
    reduce_window_sum_p,
    select_and_gather_add_p,
    select_and_scatter_add_p,
)
from ferrax._lax import linalg  # ``lax.linalg.cholesky`` & co., as JAX's ``jax.lax.linalg``
from ferrax._lax.custom import stop_gradient
from ferrax._lax.convolution import (
    ConvDimensionNumbers,
    conv,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_general_permutations,
    conv_transpose,
    conv_with_general_padding,
)
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
    # convolutions
    "ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated",
    "conv_general_permutations", "conv_transpose", "conv_with_general_padding",
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
    # the logical reductions; floats as bit patterns
    "nextafter", "reduce_and", "reduce_or", "reduce_precision", "reduce_xor",
    # compositions of primitives
    "associative_scan", "batch_matmul", "broadcast", "broadcast_shapes", "broadcast_to_rank",
    "collapse", "dot", "dynamic_update_index_in_dim", "dynamic_update_slice_in_dim", "full",
    "full_like", "index_in_dim", "map", "reciprocal", "slice_in_dim",
    # sorting and cumulative reductions
    "cumlogsumexp", "cummax", "cummin", "cumprod", "cumsum", "sort", "sort_key_val", "top_k",
    # windowed reductions (pooling) and their derivatives' primitives
    "padtype_to_pads", "reduce_window", "reduce_window_max_p", "reduce_window_min_p",
    "reduce_window_p", "reduce_window_shape_tuple", "reduce_window_sum_p",
    "select_and_gather_add_p", "select_and_scatter_add_p",
    # linear algebra (a namespace, as JAX's)
    "linalg",
    # stacking, tiling, the integer high product and the optimization barrier
    "mulhi", "optimization_barrier", "stack", "tile", "unstack",
    # JAX's small helpers (compositions)
    "broadcast_like", "empty", "index_take",
    # the incomplete gamma family
    "igamma", "igamma_grad_a", "igammac", "random_gamma_grad",
]



# The primitive objects (JAX's ``lax.*_p`` names), the same objects ferrax's rules use.
from ferrax._lax.bits import (  # noqa: E402
    bitcast_convert_type_p,
    clz_p,
    population_count_p,
)
from ferrax._lax.control import (  # noqa: E402
    cond_p,
    scan_p,
    while_p,
)
from ferrax._lax.custom import (  # noqa: E402
    stop_gradient_p,
)
from ferrax._lax.elementwise import (  # noqa: E402
    abs_p,
    add_p,
    and_p,
    ceil_p,
    clamp_p,
    convert_element_type_p,
    cos_p,
    div_p,
    eq_p,
    exp_p,
    expm1_p,
    floor_p,
    ge_p,
    gt_p,
    integer_pow_p,
    le_p,
    log1p_p,
    log_p,
    logistic_p,
    lt_p,
    max_p,
    min_p,
    mul_p,
    mulhi_p,
    ne_p,
    neg_p,
    not_p,
    or_p,
    pow_p,
    rem_p,
    round_p,
    rsqrt_p,
    select_n_p,
    shift_left_p,
    shift_right_arithmetic_p,
    shift_right_logical_p,
    sign_p,
    sin_p,
    sqrt_p,
    square_p,
    sub_p,
    tan_p,
    tanh_p,
    xor_p,
)
from ferrax._lax.layout import (  # noqa: E402
    sharding_constraint_p,
)
from ferrax._lax.parallel import (  # noqa: E402
    all_gather_p,
    all_to_all_p,
    axis_index_p,
    pmax_p,
    pmin_p,
    ppermute_p,
    psum_p,
)
from ferrax._lax.reductions import (  # noqa: E402
    argmax_p,
    argmin_p,
    reduce_max_p,
    reduce_min_p,
    reduce_prod_p,
    reduce_sum_p,
)
from ferrax._lax.slicing import (  # noqa: E402
    gather_p,
    rev_p,
    scatter_add_p,
    scatter_max_p,
    scatter_min_p,
    scatter_mul_p,
    scatter_p,
    scatter_sub_p,
)
from ferrax._lax.sorting import (  # noqa: E402
    cumlogsumexp_p,
    cummax_p,
    cummin_p,
    cumprod_p,
    cumsum_p,
    sort_p,
    top_k_p,
)
from ferrax._lax.special import (  # noqa: E402
    acos_p,
    acosh_p,
    asin_p,
    asinh_p,
    atan2_p,
    atan_p,
    atanh_p,
    cbrt_p,
    cosh_p,
    digamma_p,
    erf_inv_p,
    erf_p,
    erfc_p,
    exp2_p,
    is_finite_p,
    lgamma_p,
    sinh_p,
)
from ferrax._lax.structural import (  # noqa: E402
    broadcast_in_dim_p,
    concatenate_p,
    copy_p,
    dot_general_p,
    dynamic_slice_p,
    dynamic_update_slice_p,
    iota_p,
    optimization_barrier_p,
    pad_p,
    reshape_p,
    slice_p,
    split_p,
    squeeze_p,
    stack_p,
    tile_p,
    transpose_p,
    unstack_p,
)
__all__ += [
    "abs_p", "acos_p", "acosh_p", "add_p", "all_gather_p", "all_to_all_p", "and_p", "argmax_p",
    "argmin_p", "asin_p", "asinh_p", "atan2_p", "atan_p", "atanh_p", "axis_index_p",
    "bitcast_convert_type_p", "broadcast_in_dim_p", "cbrt_p", "ceil_p", "clamp_p", "clz_p",
    "concatenate_p", "cond_p", "convert_element_type_p", "copy_p", "cos_p", "cosh_p",
    "cumlogsumexp_p", "cummax_p", "cummin_p", "cumprod_p", "cumsum_p", "digamma_p", "div_p",
    "dot_general_p", "dynamic_slice_p", "dynamic_update_slice_p", "eq_p", "erf_inv_p", "erf_p",
    "erfc_p", "exp2_p", "exp_p", "expm1_p", "floor_p", "gather_p", "ge_p", "gt_p",
    "integer_pow_p", "iota_p", "is_finite_p", "le_p", "lgamma_p", "log1p_p", "log_p",
    "logistic_p", "lt_p", "max_p", "min_p", "mul_p", "mulhi_p", "ne_p", "neg_p", "not_p",
    "optimization_barrier_p", "or_p", "pad_p", "pmax_p", "pmin_p", "population_count_p",
    "pow_p", "ppermute_p", "psum_p", "reduce_max_p", "reduce_min_p", "reduce_prod_p",
    "reduce_sum_p", "rem_p", "reshape_p", "rev_p", "round_p", "rsqrt_p", "scan_p",
    "scatter_add_p", "scatter_max_p", "scatter_min_p", "scatter_mul_p", "scatter_p",
    "scatter_sub_p", "select_n_p", "sharding_constraint_p", "shift_left_p",
    "shift_right_arithmetic_p", "shift_right_logical_p", "sign_p", "sin_p", "sinh_p", "slice_p",
    "sort_p", "split_p", "sqrt_p", "square_p", "squeeze_p", "stack_p", "stop_gradient_p",
    "sub_p", "tan_p", "tanh_p", "tile_p", "top_k_p", "transpose_p", "unstack_p", "while_p",
    "xor_p",
    # the primitives of the logical reductions, nextafter, reduce_precision, convolution
    "conv_general_dilated_p", "nextafter_p", "reduce_and_p", "reduce_or_p", "reduce_precision_p",
    "reduce_xor_p",
    # the incomplete gamma family
    "igamma_grad_a_p", "igamma_p", "igammac_p",
]
from ferrax._lax.bits import nextafter_p, reduce_precision_p  # noqa: E402
from ferrax._lax.convolution import conv_general_dilated_p  # noqa: E402
from ferrax._lax.reductions import reduce_and_p, reduce_or_p, reduce_xor_p  # noqa: E402
from ferrax._lax.igamma import igamma, igamma_grad_a, igammac, random_gamma_grad  # noqa: E402
from ferrax._lax.igamma import igamma_grad_a_p, igamma_p, igammac_p  # noqa: E402
