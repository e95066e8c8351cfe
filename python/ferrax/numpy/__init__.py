"""``ferrax.numpy``: a NumPy-compatible subset with JAX's semantics.

Broadcasting follows NumPy; dtype promotion follows JAX: Python scalars are weakly typed
(``x_f32 * 2.0`` stays float32, ``int8_array + 1`` stays int8), Python floats default
to float32 and ints to int32, and 64-bit NumPy values become 32-bit, as in JAX's default
mode; with ``ferrax.config.update("jax_enable_x64", True)`` the defaults are 64-bit and
64-bit values stay 64-bit (see :mod:`ferrax.dtypes`).
Results are :class:`ferrax.Array`; under a transformation they are traced, and each
function stages the primitives JAX's function would where ferrax has them.

Shapes that do not fit together (broadcasting, ``reshape``, ``concatenate``, ``dot``,
``.at[...]`` values) raise :class:`ferrax.TypeCheckError` naming the user's line.
Indexing is NumPy's, as ``jax.numpy`` does it (see :mod:`ferrax.numpy._indexing`).

The package also implements the operators of :class:`ferrax.Array`.
"""

import sys

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
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from ferrax.numpy._indexing import getitem, index_apply, index_update, take, take_along_axis
from ferrax.numpy._products import dot, matmul
from ferrax.numpy._promotion import ArrayLike, broadcast_shapes, broadcast_to, result_type
from ferrax.numpy._reductions import all, any, argmax, argmin, max, mean, min, prod, sum
from ferrax.numpy._scalar_types import (
    bfloat16,
    bool_,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ferrax.numpy._sorting import (
    argsort,
    cumprod,
    cumsum,
    cumulative_prod,
    cumulative_sum,
    lexsort,
    nancumprod,
    nancumsum,
    searchsorted,
    sort,
)
from ferrax.numpy._shape import (
    concatenate,
    expand_dims,
    flip,
    ravel,
    reshape,
    squeeze,
    stack,
    unstack,
    swapaxes,
    transpose,
)
from ferrax.numpy._ufuncs import (
    abs,
    absolute,
    add,
    around,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    clip,
    cos,
    divide,
    divmod,
    equal,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    invert,
    left_shift,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
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
    right_shift,
    rint,
    round,
    sign,
    sin,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    trunc,
    where,
    # the inverse and hyperbolic functions, cbrt, exp2, isfinite (issue 12)
    acos,
    acosh,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    cbrt,
    cosh,
    exp2,
    isfinite,
    sinh,
)
from ferrax.numpy._ufuncs import nextafter

# NumPy breadth (issue 12 item 3): ferrax.numpy._breadth; linspace, repeat, std and var
# there extend the core ones (retstep/axis, total_repeat_length, where=).
from ferrax.numpy._breadth import (
    allclose, array_equal, array_split, atleast_1d, atleast_2d, atleast_3d, average,
    bitwise_count, bitwise_invert, column_stack, count_nonzero, diag, diagonal, diff, dstack,
    e, empty, empty_like, euler_gamma, finfo, fliplr, flipud, fmod, heaviside, hstack, hypot,
    identity, iinfo, inf, inner, isclose, isinf, isnan, isneginf, isposinf, issubdtype, kron,
    linspace, log10, log2, logaddexp, logaddexp2, logspace, meshgrid, moveaxis, nan,
    nan_to_num, nanargmax, nanargmin, nanmax, nanmean, nanmin, nanprod, nanstd, nansum, nanvar,
    newaxis, outer, pi, promote_types, repeat, roll, select, split, std, tensordot, tile,
    trace, tri, tril, triu, var, vstack,
)
from ferrax.numpy._breadth import interp, piecewise
from ferrax.numpy._einsum import einsum, einsum_path
from ferrax.numpy._convolve import convolve, correlate
from ferrax.numpy._pad import pad

# Order statistics and set operations (issue 12 item 3): ferrax.numpy._stats.
from ferrax.numpy._stats import (
    intersect1d, isin, median, nanmedian, nanpercentile, nanquantile, percentile, quantile,
    setdiff1d, setxor1d, union1d, unique, unique_all, unique_counts, unique_inverse,
    unique_values,
)

ndarray = Array
"""The array type (:class:`ferrax.Array`), under NumPy's name."""


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
    "abs", "absolute", "add", "around", "bitwise_and", "bitwise_left_shift", "bitwise_not",
    "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "cos", "divide", "divmod",
    "equal", "exp", "expm1", "floor", "floor_divide", "greater", "greater_equal", "invert",
    "left_shift", "less", "less_equal", "log", "log1p", "logical_and", "logical_not",
    "logical_or", "logical_xor", "maximum", "minimum", "mod", "multiply", "negative",
    "not_equal", "positive", "pow", "power", "remainder", "right_shift", "rint", "round",
    "sign", "sin", "sqrt", "square", "subtract", "tan", "tanh", "true_divide", "trunc", "where",
    "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh",
    "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cosh", "exp2", "isfinite", "sinh",
    "nextafter",
    # reductions
    "all", "any", "argmax", "argmin", "max", "mean", "min", "prod", "std", "sum", "var",
    # sorting and cumulative reductions
    "argsort", "cumprod", "cumsum", "cumulative_prod", "cumulative_sum", "lexsort", "nancumprod",
    "nancumsum", "searchsorted", "sort",
    # shapes
    "concatenate", "expand_dims", "flip", "ravel", "repeat", "reshape", "squeeze", "stack",
    "swapaxes", "transpose", "unstack",
    # products
    "dot", "matmul",
    # indexing (Array.__getitem__ and Array.at)
    "getitem", "index_apply", "index_update", "take", "take_along_axis",
    # breadth (issue 12)
    "allclose", "array_equal", "array_split", "atleast_1d", "atleast_2d", "atleast_3d",
    "average", "bitwise_count", "bitwise_invert", "column_stack", "count_nonzero", "diag",
    "diagonal", "diff", "dstack", "e", "empty", "empty_like", "euler_gamma", "finfo",
    "fliplr", "flipud", "fmod", "heaviside", "hstack", "hypot", "identity", "iinfo", "inf",
    "inner", "isclose", "isinf", "isnan", "isneginf", "isposinf", "issubdtype", "kron",
    "log10", "log2", "logaddexp", "logaddexp2", "logspace", "meshgrid", "moveaxis", "nan",
    "nan_to_num", "nanargmax", "nanargmin", "nanmax", "nanmean", "nanmin", "nanprod",
    "nanstd", "nansum", "nanvar", "newaxis", "outer", "pi", "promote_types", "roll",
    "select", "split", "tensordot", "tile", "trace", "tri", "tril", "triu", "vstack",
    "einsum", "einsum_path", "interp", "pad", "piecewise",
    # order statistics and set operations (issue 12)
    "intersect1d", "isin", "median", "nanmedian", "nanpercentile", "nanquantile", "percentile",
    "quantile", "setdiff1d", "setxor1d", "union1d", "unique", "unique_all", "unique_counts",
    "unique_inverse", "unique_values",
]

# More everyday names (issue 12 item 3): ferrax.numpy._breadth2; its where adds the
# one-argument form with size= to the core one.
from ferrax.numpy._breadth2 import (
    amax, amin, append, argwhere, broadcast_arrays, compress, concat, copy, copysign, deg2rad,
    degrees, delete, extract, fabs, flatnonzero, float_power, fmax, fmin, frexp, gcd, insert,
    isscalar, lcm, ldexp, matrix_transpose, modf, ndim, nonzero, permute_dims, ptp, rad2deg,
    radians, reciprocal, shape, signbit, sinc, size, where,
    apply_along_axis, apply_over_axes, argpartition, bincount, block, choose, corrcoef, cov,
    cross, diagflat, digitize, dsplit, ediff1d, fromfunction, geomspace, gradient, histogram,
    histogram2d, histogram_bin_edges, histogramdd, hsplit, matvec, partition, place, put,
    put_along_axis, resize, rollaxis, rot90, trapezoid, trim_zeros, unwrap, vander, vdot,
    vecdot, vecmat, vectorize, vsplit, packbits, unpackbits, spacing,
)
from ferrax.numpy._index_tricks import (
    c_, diag_indices, diag_indices_from, fill_diagonal, index_exp, indices, ix_, mask_indices,
    mgrid, ogrid, r_, ravel_multi_index, s_, tril_indices, tril_indices_from, triu_indices,
    triu_indices_from, unravel_index,
)
from ferrax.numpy._poly import poly, polyadd, polyder, polydiv, polyfit, polyint, polymul, polysub, polyval
from ferrax.numpy._types_io import (
    array_equiv, array_repr, array_str, bool, can_cast, character, complexfloating, double, dtype,
    flexible, float_, floating, from_dlpack, frombuffer, fromfile, fromiter, fromstring, generic,
    get_printoptions, inexact, int_, integer, iscomplex, iscomplexobj, isdtype, isreal, isrealobj,
    iterable, load, number, printoptions, save, savez, set_printoptions, signedinteger, single, uint,
    unsignedinteger,
)
from ferrax.numpy._windows import bartlett, blackman, hamming, hanning, i0, kaiser
__all__ += [
    "amax", "amin", "append", "argwhere", "broadcast_arrays", "compress", "concat", "copy",
    "copysign", "deg2rad", "degrees", "delete", "extract", "fabs", "flatnonzero", "float_power",
    "fmax", "fmin", "frexp", "gcd", "insert", "isscalar", "lcm", "ldexp", "matrix_transpose",
    "modf", "ndim", "nonzero", "permute_dims", "ptp", "rad2deg", "radians", "reciprocal",
    "shape", "signbit", "sinc", "size",
    "apply_along_axis", "apply_over_axes", "argpartition", "bincount", "block", "choose",
    "corrcoef", "cov", "cross", "diagflat", "digitize", "dsplit", "ediff1d", "fromfunction",
    "geomspace", "gradient", "histogram", "histogram2d", "histogram_bin_edges", "histogramdd",
    "hsplit", "matvec", "partition", "place", "put", "put_along_axis", "resize", "rollaxis",
    "rot90", "trapezoid", "trim_zeros", "unwrap", "vander", "vdot", "vecdot", "vecmat",
    "vectorize", "vsplit", "packbits", "unpackbits", "spacing",
    "c_", "diag_indices", "diag_indices_from", "fill_diagonal", "index_exp", "indices", "ix_",
    "mask_indices", "mgrid", "ogrid", "r_", "ravel_multi_index", "s_", "tril_indices",
    "tril_indices_from", "triu_indices", "triu_indices_from", "unravel_index",
    "poly", "polyadd", "polyder", "polydiv", "polyint", "polymul", "polysub", "polyval", "polyfit",
    "array_equiv", "array_repr", "array_str", "bool", "can_cast", "character", "complexfloating",
    "double", "dtype", "flexible", "float_", "floating", "from_dlpack", "frombuffer", "fromfile",
    "fromiter", "fromstring", "generic", "get_printoptions", "inexact", "int_", "integer",
    "iscomplex", "iscomplexobj", "isdtype", "isreal", "isrealobj", "iterable", "load", "number",
    "printoptions", "save", "savez", "set_printoptions", "signedinteger", "single", "uint",
    "unsignedinteger",
    "bartlett", "blackman", "hamming", "hanning", "i0", "kaiser",
    # convolutions of 1-D arrays (conv_general_dilated)
    "convolve", "correlate",
    # submodules
    "linalg",
]

# The operators of ferrax.Array are implemented by this module (which imports _array,
# so _array cannot import it).
setattr(_array, "_fnp", sys.modules[__name__])

# ``ferrax.numpy.linalg`` (JAX's ``jax.numpy.linalg``): a submodule, imported last as it
# uses this namespace.
from ferrax.numpy import linalg as linalg  # noqa: E402
