"""The NumPy breadth of issue 12 (``ferrax.numpy._breadth``) against ``jax.numpy``.

One table of cases, each a function ``call(m, *inputs)`` written once for a NumPy-like
module ``m`` and run with ``ferrax.numpy`` and ``jax.numpy`` eagerly: values, dtypes and
weak types must agree, in JAX's default mode and again with x64 on. Each group of cases
is also run once under one ``ferrax.jit`` (all of the group's cases in one compilation)
and must give the eager values. Bad arguments raise the exception class JAX raises, with
a message naming this file's line.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax.tree_util import tree_leaves

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

Call = Callable[..., Any]

rng = np.random.default_rng(0)
F = rng.normal(size=(3, 4)).astype(np.float32)
G = rng.normal(size=(3, 4)).astype(np.float32)
FP = np.abs(F) + 0.5
FN = F.copy()
FN[0, 1], FN[1, 2], FN[2, 0], FN[2, 3] = np.nan, np.inf, -np.inf, np.nan
ALLNAN = FN.copy()
ALLNAN[1] = np.nan
FZ = np.round(F).astype(np.float32)  # zeros and small integers
I = rng.integers(-5, 6, size=(3, 4)).astype(np.int32)
I2 = rng.integers(-3, 4, size=(3, 4)).astype(np.int32)
IP = np.abs(I) + 1
I8 = rng.integers(-100, 100, size=(4, 4)).astype(np.int8)
U8 = rng.integers(0, 255, size=(5,)).astype(np.uint8)
B = rng.integers(0, 2, size=(3, 4)).astype(np.bool_)
H = (np.abs(F) + 0.5).astype(np.float16)
BF = F.astype(ml_dtypes.bfloat16)
F64 = rng.normal(size=(3, 4))
I64 = rng.integers(-5, 6, size=(3, 4))
V = rng.normal(size=(4,)).astype(np.float32)
W = rng.normal(size=(3,)).astype(np.float32)
V7 = np.arange(7, dtype=np.float32)
T = rng.normal(size=(2, 3, 4)).astype(np.float32)
M = rng.normal(size=(3, 4, 5)).astype(np.float32)
SQ = rng.normal(size=(4, 4)).astype(np.float32)
K2 = rng.normal(size=(2, 2)).astype(np.float32)
WTS = np.abs(rng.normal(size=(4,))).astype(np.float32)
COUNTS = np.array([1, 0, 3, 2], dtype=np.int32)
MASK = F > -0.5


class Static:
    """An input that stays a NumPy value under jit (a shape depends on it)."""

    def __init__(self, value: np.ndarray[Any, Any]) -> None:
        self.value = value


# Each case: (group, id, call, inputs). Inputs are NumPy values and Python scalars.
Case = tuple[str, str, Call, tuple[Any, ...]]
CASES: list[Case] = []


def case(group: str, name: str, call: Call, *inputs: Any) -> None:
    CASES.append((group, name, call, inputs))


# --- value tests
for n, x in [("F", FN), ("I", I), ("B", B), ("H", H), ("py", 2.0), ("F64", F64)]:
    case("tests", f"isnan_{n}", lambda m, x: m.isnan(x), x)
    case("tests", f"isinf_{n}", lambda m, x: m.isinf(x), x)
    case("tests", f"nan_to_num_{n}", lambda m, x: m.nan_to_num(x), x)
case("tests", "isposinf", lambda m, x: m.isposinf(x), FN)
case("tests", "isneginf", lambda m, x: m.isneginf(x), FN)
case("tests", "nan_to_num_args", lambda m, x: m.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0), FN)
case("tests", "nan_to_num_bf16", lambda m, x: m.nan_to_num(x), FN.astype(ml_dtypes.bfloat16))
case("tests", "isclose", lambda m, x, y: m.isclose(x, x + y * 1e-6), F, G)
case("tests", "isclose_far", lambda m, x, y: m.isclose(x, y), F, G)
case("tests", "isclose_nan", lambda m, x: m.isclose(x, x), FN)
case("tests", "isclose_equal_nan", lambda m, x: m.isclose(x, x, equal_nan=True), FN)
case("tests", "isclose_int", lambda m, x, y: m.isclose(x, y, atol=1), I, I2)
case("tests", "isclose_scalar", lambda m, x: m.isclose(x, 1.0, rtol=0.5), F)
case("tests", "isclose_tol", lambda m, x, y: m.isclose(x, y, rtol=0.0, atol=1.5), F, G)
case("tests", "allclose", lambda m, x: m.allclose(x, x + 1e-7), F)
case("tests", "allclose_no", lambda m, x, y: m.allclose(x, y), F, G)
case("tests", "array_equal", lambda m, x: m.array_equal(x, x), F)
case("tests", "array_equal_shape", lambda m, x: m.array_equal(x, x[:2]), F)
case("tests", "array_equal_nan", lambda m, x: m.array_equal(x, x), FN)
case("tests", "array_equal_equal_nan", lambda m, x: m.array_equal(x, x, equal_nan=True), FN)
case("tests", "array_equal_int", lambda m, x, y: m.array_equal(x, y), I, I2)

# --- ufuncs
for n, x in [("F", FP), ("I", IP), ("H", H), ("BF", BF), ("py", 3.0), ("pyint", 8), ("F64", np.abs(F64))]:
    case("ufuncs", f"log2_{n}", lambda m, x: m.log2(x), x)
    case("ufuncs", f"log10_{n}", lambda m, x: m.log10(x), x)
for n, x, y in [("FF", F, G), ("FN", FN, G), ("NN", FN, FN), ("pyF", 1.0, F), ("II", I, I2), ("H", H, 1.0),
                ("F64", F64, 2)]:
    case("ufuncs", f"logaddexp_{n}", lambda m, x, y: m.logaddexp(x, y), x, y)
    case("ufuncs", f"logaddexp2_{n}", lambda m, x, y: m.logaddexp2(x, y), x, y)
    case("ufuncs", f"hypot_{n}", lambda m, x, y: m.hypot(x, y), x, y)
    case("ufuncs", f"heaviside_{n}", lambda m, x, y: m.heaviside(x, y), x, y)
case("ufuncs", "hypot_zero", lambda m, x: m.hypot(x * 0, x * 0), F)
case("ufuncs", "hypot_py", lambda m: m.hypot(3, 4))
case("ufuncs", "heaviside_zero", lambda m, x: m.heaviside(x, 0.5), FZ)
for n, x, y in [("FF", F, G), ("II", I, I2), ("IPy", I, 3), ("pyF", 5.5, F), ("I8", I8, np.int8(7)),
                ("U8", U8, np.uint8(0)), ("FN", FN, G), ("F64", F64, I64)]:
    case("ufuncs", f"fmod_{n}", lambda m, x, y: m.fmod(x, y), x, y)
# Names the package had before (issue 12's list): checked here too.
for n, x, y in [("II", I, I2), ("BB", B, B.T.reshape(3, 4)), ("IB", I, B), ("U8", U8, np.uint8(3)), ("I8py", I8, 3)]:
    for f in ("logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"):
        case("ufuncs", f"{f}_{n}", lambda m, x, y, f=f: getattr(m, f)(x, y), x, y)
for n, x in [("I", I), ("B", B), ("U8", U8), ("F", F)]:
    case("ufuncs", f"logical_not_{n}", lambda m, x: m.logical_not(x), x)
for n, x in [("I", I), ("B", B), ("U8", U8)]:
    case("ufuncs", f"invert_{n}", lambda m, x: m.invert(x), x)
    case("ufuncs", f"bitwise_not_{n}", lambda m, x: m.bitwise_not(x), x)
for n, x, y in [("I", I, IP), ("U8", U8, np.uint8(3)), ("I8py", I8, 2), ("neg", I, I2)]:
    case("ufuncs", f"left_shift_{n}", lambda m, x, y: m.left_shift(x, y), x, y)
    case("ufuncs", f"right_shift_{n}", lambda m, x, y: m.right_shift(x, y), x, y)
for n, x, y in [("FF", F, G), ("II", I, IP), ("IPy", I, 3), ("pyF", 5.5, F), ("U8", U8, np.uint8(7)), ("neg", I, -IP)]:
    case("ufuncs", f"remainder_{n}", lambda m, x, y: m.remainder(x, y), x, y)
    case("ufuncs", f"divmod_{n}", lambda m, x, y: m.divmod(x, y), x, y)
for n, x in [("F", FN), ("I", I), ("py", -2.5)]:
    case("ufuncs", f"trunc_{n}", lambda m, x: m.trunc(x), x)
case("shapes", "swapaxes", lambda m, x: m.swapaxes(x, 0, -1), T)
case("shapes", "flip_axes", lambda m, x: m.flip(x, (0, 2)), T)
case("creation", "full_like", lambda m, x: m.full_like(x, 2.5), I)
case("creation", "full_like_py", lambda m: m.full_like(1.0, 3))
case("creation", "full_like_shape", lambda m, x: m.full_like(x, 7, dtype=np.int8, shape=(2, 2)), F)
case("ufuncs", "bitwise_invert_I", lambda m, x: m.bitwise_invert(x), I)
case("ufuncs", "bitwise_invert_B", lambda m, x: m.bitwise_invert(x), B)
case("ufuncs", "bitwise_invert_U8", lambda m, x: m.bitwise_invert(x), U8)
case("ufuncs", "bitwise_count_I", lambda m, x: m.bitwise_count(x), I)
case("ufuncs", "bitwise_count_U8", lambda m, x: m.bitwise_count(x), U8)
case("ufuncs", "bitwise_count_I8", lambda m, x: m.bitwise_count(x), I8)

# --- creation
case("creation", "empty", lambda m: m.empty((2, 3)))
case("creation", "empty_int", lambda m: m.empty((2,), int))
case("creation", "empty_like", lambda m, x: m.empty_like(x), I)
case("creation", "identity", lambda m: m.identity(3))
case("creation", "identity_int", lambda m: m.identity(3, dtype=np.int8))
case("creation", "tri", lambda m: m.tri(3))
case("creation", "tri_MK", lambda m: m.tri(3, 5, 1))
case("creation", "tri_neg", lambda m: m.tri(4, 2, -1, dtype=int))
for k in (-1, 0, 2):
    case("creation", f"tril_{k}", lambda m, x, k=k: m.tril(x, k), F)
    case("creation", f"triu_{k}", lambda m, x, k=k: m.triu(x, k), I)
case("creation", "tril_3d", lambda m, x: m.tril(x), T)
case("creation", "triu_bool", lambda m, x: m.triu(x), B)
case("creation", "linspace", lambda m: m.linspace(0, 1, 5))
case("creation", "linspace_retstep", lambda m: m.linspace(0.0, 1.0, 5, endpoint=False, retstep=True))
case("creation", "linspace_arrays", lambda m, a, b: m.linspace(a, b, 4, axis=1), V, V + 1)
case("creation", "linspace_axis_neg", lambda m, a: m.linspace(a, 2.0, 3, axis=-1), W)
case("creation", "linspace_int", lambda m: m.linspace(0, 10, 4, dtype=int))
case("creation", "linspace_one", lambda m: m.linspace(2.0, 3.0, 1, retstep=True))
case("creation", "linspace_one_open", lambda m: m.linspace(2.0, 3.0, 1, endpoint=False, retstep=True))
case("creation", "linspace_zero", lambda m: m.linspace(0, 1, 0, retstep=True))
case("creation", "linspace_f16", lambda m, a: m.linspace(a, 1, 3), np.float16(0))
case("creation", "linspace_f64", lambda m, a: m.linspace(a, 1, 3), np.float64(0))
case("creation", "logspace", lambda m: m.logspace(0, 2, 3))
case("creation", "logspace_base", lambda m: m.logspace(0, 3, 4, base=2.0, endpoint=False))
case("creation", "logspace_int", lambda m: m.logspace(0, 2, 3, dtype=np.int32))
case("creation", "logspace_array", lambda m, a: m.logspace(a, 1.0, 3, axis=1), W)
case("creation", "meshgrid", lambda m, a, b: m.meshgrid(a, b), V, W)
case("creation", "meshgrid_ij", lambda m, a, b: m.meshgrid(a, b, indexing="ij"), V, W)
case("creation", "meshgrid_sparse", lambda m, a, b: m.meshgrid(a, b, a, sparse=True), V, W)
case("creation", "meshgrid_one", lambda m, a: m.meshgrid(a), U8)

# --- shapes
case("shapes", "fliplr", lambda m, x: m.fliplr(x), F)
case("shapes", "flipud", lambda m, x: m.flipud(x), T)
case("shapes", "moveaxis", lambda m, x: m.moveaxis(x, 0, -1), T)
case("shapes", "moveaxis_many", lambda m, x: m.moveaxis(x, (0, 1), (2, 0)), T)
case("shapes", "atleast", lambda m, x, y, z: [m.atleast_1d(x), m.atleast_2d(y), m.atleast_3d(z), m.atleast_3d(y)], 2.0, V, F)
case("shapes", "atleast_many", lambda m, x, y: m.atleast_2d(x, y), 1, V)
case("shapes", "hstack_1d", lambda m, x, y: m.hstack([x, y]), V, W)
case("shapes", "hstack_2d", lambda m, x, y: m.hstack([x, y]), F, I)
case("shapes", "hstack_dtype", lambda m, x, y: m.hstack([x, y], dtype=np.float16), V, W)
case("shapes", "vstack", lambda m, x, y: m.vstack([x, y]), V, V)
case("shapes", "vstack_array", lambda m, x: m.vstack(x), F)
case("shapes", "dstack", lambda m, x, y: m.dstack([x, y]), F, G)
case("shapes", "dstack_1d", lambda m, x: m.dstack([x, x]), V)
case("shapes", "column_stack", lambda m, x, y: m.column_stack([x, y]), V, V)
case("shapes", "column_stack_2d", lambda m, x, y: m.column_stack([x, y]), F[:, :1], W)
case("shapes", "split", lambda m, x: m.split(x, 2, axis=1), F)
case("shapes", "split_indices", lambda m, x: m.split(x, [1, 4]), V7)
case("shapes", "split_empty", lambda m, x: m.split(x, [2, 2, 4], axis=1), F)
case("shapes", "array_split", lambda m, x: m.array_split(x, 3), V7)
case("shapes", "array_split_many", lambda m, x: m.array_split(x, 5, axis=0), F)
case("shapes", "tile", lambda m, x: m.tile(x, 2), V)
case("shapes", "tile_2d", lambda m, x: m.tile(x, (2, 1)), F)
case("shapes", "tile_grow", lambda m, x: m.tile(x, (2, 2, 1)), V)
case("shapes", "tile_scalar", lambda m: m.tile(3.0, 2))
case("shapes", "repeat_total", lambda m, x: m.repeat(x, 2, axis=0, total_repeat_length=6), F)
case("shapes", "repeat_total_short", lambda m, x: m.repeat(x, 2, total_repeat_length=5), V)
case("shapes", "repeat_total_long", lambda m, x, c: m.repeat(x, c, total_repeat_length=9), V, COUNTS)
case("shapes", "repeat_total_axis", lambda m, x, c: m.repeat(x, c, axis=1, total_repeat_length=6), F, COUNTS)
case("shapes", "repeat_total_scalar", lambda m: m.repeat(2.0, 3, total_repeat_length=3))
case("shapes", "repeat", lambda m, x, c: m.repeat(x, c, axis=1), I, Static(COUNTS))
for n, s, ax in [("1", 1, None), ("neg", -2, 1), ("pair", (1, 2), (0, 1)), ("big", 10, 0), ("same", 1, (0, 1))]:
    case("shapes", f"roll_{n}", lambda m, x, s=s, ax=ax: m.roll(x, s, ax), F)
case("shapes", "roll_array_shift", lambda m, x: m.roll(x, np.array(3), 1), F)
for k in (0, 1, -1, 5):
    case("shapes", f"diagonal_{k}", lambda m, x, k=k: m.diagonal(x, k), F)
    case("shapes", f"diag_vec_{k}", lambda m, x, k=k: m.diag(x, k), V)
    case("shapes", f"diag_mat_{k}", lambda m, x, k=k: m.diag(x, k), I)
    case("shapes", f"trace_{k}", lambda m, x, k=k: m.trace(x, k), F)
case("shapes", "diagonal_axes", lambda m, x: m.diagonal(x, 1, 2, 0), T)
case("shapes", "diag_py", lambda m, x: m.diag(x), 1.0 * V)
case("shapes", "trace_int8", lambda m, x: m.trace(x), I8)
case("shapes", "trace_bool", lambda m, x: m.trace(x), B)
case("shapes", "trace_axes", lambda m, x: m.trace(x, 0, 2, 1), T)
case("shapes", "trace_dtype", lambda m, x: m.trace(x, dtype=np.float16), I)
case("shapes", "diff", lambda m, x: m.diff(x), V)
case("shapes", "diff_axis0", lambda m, x: m.diff(x, axis=0), I)
case("shapes", "diff_n2", lambda m, x: m.diff(x, n=2), F)
case("shapes", "diff_n0", lambda m, x: m.diff(x, n=0), F)
case("shapes", "diff_bool", lambda m, x: m.diff(x), B)
case("shapes", "diff_pend", lambda m, x: m.diff(x, prepend=0, append=x[:2]), V)
case("shapes", "diff_pend_2d", lambda m, x: m.diff(x, axis=0, prepend=1.0), F)
case("shapes", "diff_u8", lambda m, x: m.diff(x), U8)
case("shapes", "select", lambda m, x, y: m.select([x > 0, x < -1], [x, y], 0), F, I)
case("shapes", "select_default", lambda m, b: m.select([b], [2.0], default=1.0), B)
case("shapes", "select_int", lambda m, x, y: m.select([x, y], [x, y], default=-1), I, I2)
case("shapes", "select_bcast", lambda m, x, v: m.select([x > 0], [v], default=x), F, V)

# --- products
case("products", "outer", lambda m, x, y: m.outer(x, y), V, W)
case("products", "outer_2d", lambda m, x, y: m.outer(x, y), K2, I)
case("products", "outer_py", lambda m, x: m.outer(x, 2.0), I)
case("products", "inner_vec", lambda m, x: m.inner(x, x), V)
case("products", "inner_mat", lambda m, x, y: m.inner(x, y), F, G)
case("products", "inner_int", lambda m, x, y: m.inner(x, y), I, I2)
case("products", "inner_scalar", lambda m, x: m.inner(x, 2.0), F)
case("products", "tensordot", lambda m, x, y: m.tensordot(x, y), T, M)
case("products", "tensordot_1", lambda m, x, y: m.tensordot(x, y, 1), T, SQ)
case("products", "tensordot_0", lambda m, x, y: m.tensordot(x, y, 0), V, W)
case("products", "tensordot_pair", lambda m, x, y: m.tensordot(x, y, ([0], [1])), F, F.T.copy())
case("products", "tensordot_lists", lambda m, x, y: m.tensordot(x, y, ((1, 2), (0, 1))), T, M)
case("products", "tensordot_ints", lambda m, x, y: m.tensordot(x, y, (1, 0)), F, SQ)
case("products", "tensordot_mixed", lambda m, x, y: m.tensordot(x, y), I, F)
case("products", "tensordot_i8", lambda m, x: m.tensordot(x, x, 1), I8)
case("products", "tensordot_preferred", lambda m, x, y: m.tensordot(x, y, 1, preferred_element_type=np.int32), I8, I8)
case("products", "tensordot_preferred_f", lambda m, x, y: m.tensordot(x, y, 1, preferred_element_type=np.float32), H, H.T.copy())
case("products", "inner_preferred", lambda m, x, y: m.inner(x, y, preferred_element_type=np.float32), I, I2)
case("products", "inner_scalar_preferred", lambda m, x: m.inner(x, 2, preferred_element_type=np.float32), I)
case("products", "kron", lambda m, x, y: m.kron(x, y), K2, F)
case("products", "kron_ndims", lambda m, x, y: m.kron(x, y), V, K2)
case("products", "kron_int", lambda m, x, y: m.kron(x, y), I8[:2, :2], U8[:3])

# --- reductions
for n, x in [("F", F), ("I", I), ("B", B), ("H", H)]:
    case("reductions", f"count_nonzero_{n}", lambda m, x: m.count_nonzero(x), x)
    case("reductions", f"count_nonzero_axis_{n}", lambda m, x: m.count_nonzero(x, axis=0, keepdims=True), x)
for n, x in [("F", F), ("I", I), ("H", H), ("BF", BF), ("B", B), ("F64", F64), ("I64", I64)]:
    case("reductions", f"var_{n}", lambda m, x: m.var(x), x)
    case("reductions", f"std_axis_{n}", lambda m, x: m.std(x, axis=1, ddof=1), x)
    case("reductions", f"var_where_{n}", lambda m, x: m.var(x, axis=0, where=MASK, keepdims=True), x)
case("reductions", "var_mean", lambda m, x: m.var(x, axis=1, mean=x.mean(axis=1, keepdims=True) + 0.5), F)
case("reductions", "std_mean_int", lambda m, x: m.std(x, axis=0, mean=x.mean(axis=0, keepdims=True), ddof=1), I)
case("reductions", "nanvar_mean", lambda m, x: m.nanvar(x, axis=1, mean=m.nanmean(x, axis=1, keepdims=True) - 1), FN)
case("reductions", "nanstd_mean", lambda m, x: m.nanstd(x, axis=0, mean=1.0), FN)
case("reductions", "var_correction", lambda m, x: m.var(x, correction=1.5), F)
case("reductions", "var_too_few", lambda m, x: m.var(x, axis=0, ddof=3), F)
case("reductions", "var_where_few", lambda m, x: m.var(x, axis=1, where=x > 1.5, ddof=1), F)
case("reductions", "std_where", lambda m, x: m.std(x, where=MASK), F)
case("reductions", "std_dtype", lambda m, x: m.std(x, axis=0, dtype=np.float16), I)
case("reductions", "var_py", lambda m: m.var(2.0))
case("reductions", "average", lambda m, x: m.average(x), F)
case("reductions", "average_int", lambda m, x: m.average(x, axis=0), I)
case("reductions", "average_weights", lambda m, x, w: m.average(x, axis=1, weights=w), F, WTS)
case("reductions", "average_weights_full", lambda m, x, w: m.average(x, weights=w), F, FP)
case("reductions", "average_returned", lambda m, x: m.average(x, axis=0, returned=True), I)
case("reductions", "average_returned_w", lambda m, x, w: m.average(x, axis=(0, 1), weights=w, returned=True, keepdims=True), F, FP)
case("reductions", "average_weights_axes", lambda m, x, w: m.average(x, axis=(2, 0), weights=w), T, FP[:2].T.copy())
case("reductions", "average_int_weights", lambda m, x, w: m.average(x, axis=1, weights=w), I, COUNTS)
for n, x in [("F", FN), ("I", I), ("ALL", ALLNAN), ("H", FN.astype(np.float16))]:
    case("reductions", f"nansum_{n}", lambda m, x: m.nansum(x), x)
    case("reductions", f"nansum_axis_{n}", lambda m, x: m.nansum(x, axis=0), x)
    case("reductions", f"nanprod_{n}", lambda m, x: m.nanprod(x, axis=1), x)
    case("reductions", f"nanmax_{n}", lambda m, x: m.nanmax(x, axis=1), x)
    case("reductions", f"nanmin_{n}", lambda m, x: m.nanmin(x, axis=1, keepdims=True), x)
    case("reductions", f"nanmean_{n}", lambda m, x: m.nanmean(x, axis=1), x)
    case("reductions", f"nanvar_{n}", lambda m, x: m.nanvar(x, axis=1), x)
    case("reductions", f"nanstd_{n}", lambda m, x: m.nanstd(x, axis=0, ddof=1), x)
    case("reductions", f"nanargmax_{n}", lambda m, x: m.nanargmax(x, axis=1), x)
    case("reductions", f"nanargmin_{n}", lambda m, x: m.nanargmin(x), x)
case("reductions", "nanmax_initial", lambda m, x: m.nanmax(x, axis=1, initial=0.0), ALLNAN)
case("reductions", "nanmin_where", lambda m, x: m.nanmin(x, axis=0, where=MASK, initial=5.0), FN)
case("reductions", "nansum_where", lambda m, x: m.nansum(x, where=MASK, initial=1.0), FN)
case("reductions", "nanmean_where", lambda m, x: m.nanmean(x, axis=1, where=MASK), FN)
case("reductions", "nanargmax_keep", lambda m, x: m.nanargmax(x, axis=0, keepdims=True), FN)
case("reductions", "sum_initial_where", lambda m, x: m.sum(x, axis=1, initial=1.0, where=MASK), F)
case("reductions", "prod_initial_where", lambda m, x: m.prod(x, initial=2, where=MASK), I)
case("reductions", "max_initial_where", lambda m, x: m.max(x, axis=0, initial=-1.0, where=MASK), F)
case("reductions", "min_initial", lambda m, x: m.min(x, initial=0), I)
case("reductions", "mean_where", lambda m, x: m.mean(x, axis=0, where=MASK, keepdims=True), F)

# --- einsum (the path as JAX's opt_einsum picks it, lowered to dot_general)
EINSUMS: list[tuple[str, tuple[Any, ...]]] = [
    ("ij,jk->ik", (F, SQ)), ("ij,jk", (F, SQ)), ("ii", (SQ,)), ("ii->i", (SQ,)), ("ij->ji", (F,)),
    ("i,i", (V, V)), ("i,j->ij", (V, W)), ("bij,bjk->bik", (T, M[:2])), ("...ij,...jk->...ik", (T[:1], M[:, :, :2])),
    ("ij,jk,kl->il", (F, SQ, K2.repeat(2, 0)[:, :1] * np.ones((4, 3), np.float32))),
    ("abc,cd,de,ea->b", (T, SQ, SQ[:, :2], K2)), ("ij,ij->", (F, G)), ("iij,jk->ik", (M[:, :3, :3].copy(), SQ[:3])),
    ("ijk->", (T,)), ("ij,kl->", (F, K2)), ("a,b,c,d,e,f->", tuple(V for _ in range(6))),
    ("ab,bc,cd,de,ef,fg->ag", tuple(SQ for _ in range(6))), ("...i,...i->...", (T, F)), ("i...->...", (T,)),
    ("ij,jk->ik", (I, I8.astype(np.int32))), ("ij,jk->ik", (I8, I8)), ("ij,jk->ik", (H[:, :3], H)), ("ij,j->i", (F, IP[0])),
    ("iji,j->j", (M[:, :3, :3].transpose(1, 0, 2).copy(), W)), ("ab,ab,ab->a", (F, G, FP)), ("ij,jk->ik", (B, B.T.copy())),
    ("i,->i", (V, 2.0)), (",->", (2.0, 3)), ("ij,jk->ik", (F64, F64.T.copy())), ("ij,jk->ik", (BF, BF.T.copy())),
]
for k, (spec, ops) in enumerate(EINSUMS):
    case("einsum", f"einsum{k}", lambda m, *xs, spec=spec: m.einsum(spec, *xs), *ops)
case("einsum", "einsum_interleaved", lambda m, x, y: m.einsum(x, [0, 1], y, [1, 2], [2, 0]), F, SQ)
case("einsum", "einsum_interleaved_implicit", lambda m, x, y: m.einsum(x, [0, Ellipsis], y, [Ellipsis]), F, V)
case("einsum", "einsum_symbols", lambda m, x, y: m.einsum("i%,%k->ki", x, y), F, SQ)
case("einsum", "einsum_preferred", lambda m, x, y: m.einsum("ij,jk", x, y, preferred_element_type=np.float32), I8, I8)
case("einsum", "einsum_unoptimized", lambda m, x, y, z: m.einsum("ij,jk,kl", x, y, z, optimize=False), F, SQ, SQ)
case("einsum", "einsum_greedy", lambda m, x, y, z: m.einsum("ij,jk,kl", x, y, z, optimize="greedy"), F, SQ, SQ)
case("einsum", "einsum_path_given", lambda m, x, y, z: m.einsum("ij,jk,kl", x, y, z, optimize=[(1, 2), (0, 1)]), F, SQ, SQ)

# --- pad (every mode; median in test_numpy_stats.py), piecewise, interp
for mode in ["constant", "edge", "wrap", "reflect", "symmetric", "linear_ramp", "maximum", "minimum", "mean", "empty"]:
    for k, width in enumerate([(2, 3), ((1, 0), (5, 2))]):
        case("pad", f"pad_{mode}_{k}_F", lambda m, x, mode=mode, width=width: m.pad(x, width, mode), F)
    case("pad", f"pad_{mode}_I", lambda m, x, mode=mode: m.pad(x, ((0, 0), (9, 7)), mode), I)
    case("pad", f"pad_{mode}_V", lambda m, x, mode=mode: m.pad(x, 1, mode), V)
case("pad", "pad_constant_value", lambda m, x: m.pad(x, 1, constant_values=3.5), F)
case("pad", "pad_constant_sides", lambda m, x: m.pad(x, ((1, 2), (3, 4)), constant_values=((1, 2), (3, 4))), F)
case("pad", "pad_constant_pair", lambda m, x: m.pad(x, 2, constant_values=(7, -1)), I)
case("pad", "pad_weak", lambda m: m.pad(3.0, 2))
case("pad", "pad_weak_array", lambda m, x: m.pad(x * 1.0, 1, "reflect"), 2.0)
case("pad", "pad_reflect_odd", lambda m, x: m.pad(x, ((4, 9), (1, 2)), "reflect", reflect_type="odd"), F)
case("pad", "pad_symmetric_odd", lambda m, x: m.pad(x, ((4, 9), (1, 2)), "symmetric", reflect_type="odd"), I)
case("pad", "pad_ramp_ends", lambda m, x: m.pad(x, ((2, 3), (1, 4)), "linear_ramp", end_values=((1, 2), (3, 4))), F)
case("pad", "pad_mean_int", lambda m, x: m.pad(x, 2, "mean", stat_length=2), I)
case("pad", "pad_max_lengths", lambda m, x: m.pad(x, ((1, 2), (3, 1)), "maximum", stat_length=((1, 2), (3, 1))), F)
case("pad", "pad_wrap_empty_axis", lambda m, x: m.pad(x, ((0, 0), (2, 1)), "wrap"), np.zeros((0, 3), np.float32))
case("pad", "pad_function", lambda m, x: m.pad(x, 2, lambda v, w, axis, kw: v * 2), F)
case("pad", "piecewise", lambda m, x: m.piecewise(x, [x < 0, x > 1], [lambda v: -v, lambda v: v * 2]), F)
case("pad", "piecewise_consts", lambda m, x: m.piecewise(x, [x < 0, x > 1], [1.5, lambda v: v * 2, 7]), F)
case("pad", "piecewise_int", lambda m, x: m.piecewise(x, [x < 3], [lambda v: v * 2.7, lambda v: -v]), I)
case("pad", "piecewise_args", lambda m, x: m.piecewise(x, [x < 0], [lambda v, a: v + a, 0], 3.0), F)
case("pad", "piecewise_scalar", lambda m: m.piecewise(2.0, [True], [lambda v: v + 1]))
XP = np.array([0, 1, 2.5, 4], np.float32)
FPTS = np.array([1, 3, -1, 2], np.float32)
XS = np.linspace(-1, 5, 13).astype(np.float32)
case("pad", "interp", lambda m, x, a, b: m.interp(x, a, b), XS, XP, FPTS)
case("pad", "interp_sides", lambda m, x, a, b: m.interp(x, a, b, left=-9.0, right=9.0), XS, XP, FPTS)
case("pad", "interp_extrapolate", lambda m, x, a, b: m.interp(x, a, b, left="extrapolate", right="extrapolate"), XS, XP, FPTS)
case("pad", "interp_int", lambda m, a, b: m.interp(2.0, a, b), IP[0], I[0])
case("pad", "interp_repeated", lambda m, x, a, b: m.interp(x, a, b), XP[:2], np.array([1.0, 1.0, 2.0], np.float32), XP[:3])
case("pad", "interp_2d", lambda m, x, a, b: m.interp(x, a, b), F, XP, FPTS)

# --- Python scalars: weak types through every family
WEAK: dict[str, Call] = {
    "logaddexp": lambda m: m.logaddexp(2.0, 3), "hypot": lambda m: m.hypot(2, 3.0), "fmod_I": lambda m: m.fmod(I, 2.5),
    "fmod_py": lambda m: m.fmod(7, 3), "heaviside": lambda m: m.heaviside(2.0, 0.5), "outer": lambda m: m.outer(2.0, V),
    "outer_py": lambda m: m.outer(2.0, 3.0), "kron": lambda m: m.kron(2.0, 3), "tensordot": lambda m: m.tensordot(2.0, 3.0, 0),
    "inner": lambda m: m.inner(2.0, 3.0), "select": lambda m: m.select([True], [2.0], 1.0), "average": lambda m: m.average(2.0),
    "nanmean": lambda m: m.nanmean(2.0), "nansum": lambda m: m.nansum(2.0), "nanmax": lambda m: m.nanmax(2.0),
    "hstack": lambda m: m.hstack([1.0, 2.0]), "vstack": lambda m: m.vstack([1.0, 2]), "tile": lambda m: m.tile(2.0, 3),
    "repeat_total": lambda m: m.repeat(2.0, 3, total_repeat_length=2), "roll": lambda m: m.roll(2.0, 1),
    "diag": lambda m: m.diag(m.ones(3) * 2.0), "tril": lambda m: m.tril(m.full((2, 2), 2.0)),
    "count_nonzero": lambda m: m.count_nonzero(2.0), "var": lambda m: m.var(2.0), "std": lambda m: m.std(3),
    "nan_to_num": lambda m: m.nan_to_num(2.0), "isclose": lambda m: m.isclose(2.0, 2), "logspace": lambda m: m.logspace(0, 1, 3, base=2),
    "meshgrid": lambda m: m.meshgrid(m.full((2,), 2.0), m.full((3,), 1)), "diff": lambda m: m.diff(m.full((3,), 2.0)),
    "trace": lambda m: m.trace(m.full((2, 2), 2.0)), "pad_edge": lambda m: m.pad(m.full((2,), 2.0), 1, "edge"),
    "pad_mean": lambda m: m.pad(m.full((2,), 2.0), 1, "mean"), "pad_ramp": lambda m: m.pad(m.full((2,), 2.0), 1, "linear_ramp"),
    "interp": lambda m: m.interp(1.5, m.full((2,), 1.0) + m.arange(2), m.full((2,), 3.0)),
    "piecewise": lambda m: m.piecewise(2.0, [True], [lambda v: v * 2]), "einsum": lambda m: m.einsum("i,i", m.full((2,), 2.0), m.full((2,), 3.0)),
    "split": lambda m: m.split(m.full((4,), 2.0), 2), "column_stack": lambda m: m.column_stack([m.full((2,), 2.0), m.full((2,), 1.0)]),
    "dstack": lambda m: m.dstack([1.0, 2.0]), "atleast_3d": lambda m: m.atleast_3d(2.0), "log2": lambda m: m.log2(8),
    "bitwise_count": lambda m: m.bitwise_count(7), "bitwise_invert": lambda m: m.bitwise_invert(7), "nanvar": lambda m: m.nanvar(m.full((3,), 2.0)),
}
for name, call in WEAK.items():
    case("weak", name, call)


# ------------------------------------------------------------------------------ helpers


def types(tree: Any) -> list[tuple[np.dtype[Any], bool, tuple[int, ...]]]:
    return [(np.dtype(x.dtype), bool(x.weak_type), tuple(x.shape)) for x in tree_leaves(tree)]


def assert_same_values(ours: Any, theirs: Any) -> None:
    a_leaves, b_leaves = tree_leaves(ours), tree_leaves(theirs)
    assert len(a_leaves) == len(b_leaves)
    for a, b in zip(a_leaves, b_leaves):
        x, y = np.asarray(a), np.asarray(b)
        assert x.shape == y.shape
        if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16:
            tol = {2: 1.6e-2 if x.dtype == ml_dtypes.bfloat16 else 2e-3, 4: 2e-6, 8: 1e-12}[x.dtype.itemsize]
            np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(x, y)


def with_arrays(cases: list[Case], m: Any) -> tuple[Call, list[Any]]:
    """A function of the cases' array inputs (flattened) giving every case's result,
    and those inputs; Python scalars stay Python scalars."""
    flat = [x for _, _, _, xs in cases for x in xs if isinstance(x, np.ndarray)]

    def run(*arrays: Any) -> list[Any]:
        out, i = [], 0
        for _, _, call, xs in cases:
            args = []
            for x in xs:
                if isinstance(x, np.ndarray):
                    args.append(arrays[i])
                    i += 1
                else:
                    args.append(x.value if isinstance(x, Static) else x)
            out.append(call(m, *args))
        return out

    return run, flat


FAST_COMPILE: dict[str, Any] = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
GROUPS = sorted({c[0] for c in CASES})


def has_64bit(inputs: tuple[Any, ...]) -> bool:
    return any(isinstance(x, np.ndarray) and x.dtype.itemsize == 8 for x in inputs)


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("group", GROUPS)
def test_cases_against_jax(group: str, x64: bool) -> None:
    """Every case of the group, eagerly: dtypes, weak types and shapes as jax.numpy's,
    and values (in x64 mode, those of the cases with 64-bit inputs). JAX's results come
    from one jax.jit of the cases (jit keeps weak types), its x64 types from
    jax.eval_shape, to spare compilations."""
    cases = [c for c in CASES if c[0] == group]
    valued = [c for c in cases if not x64 or has_64bit(c[3])]
    with jax.enable_x64(x64):
        run, flat = with_arrays(cases, jnp)
        expected_types = [types(t) for t in jax.eval_shape(run, *flat)]
        run, flat = with_arrays(valued, jnp)
        # Unoptimized machine code: half the compilation time, the same values.
        compiled = jax.jit(run).lower(*flat).compile(compiler_options=FAST_COMPILE)
        values = dict(zip((c[1] for c in valued), compiled(*flat)))
    failures = []
    with ferrax.enable_x64(x64):
        for (_, name, call, inputs), theirs in zip(cases, expected_types):
            try:
                ours = call(fnp, *(x.value if isinstance(x, Static) else x for x in inputs))
                assert types(ours) == theirs, (types(ours), theirs)
                if name in values:
                    assert_same_values(ours, values[name])
            except Exception as e:  # collected: one report for the whole group
                failures.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("group", GROUPS)
def test_group_under_one_jit(group: str) -> None:
    """The group's first case of each function, all in one ferrax.jit: the eager values
    and types."""
    firsts: dict[str, Case] = {}
    for c in CASES:
        if c[0] == group:
            firsts.setdefault(c[1].split("_")[0], c)
    cases = list(firsts.values())
    run, flat = with_arrays(cases, fnp)
    staged = ferrax.jit(run)(*flat)
    eager = run(*flat)
    for (_, name, _, _), s, e in zip(cases, staged, eager):
        assert types(s) == types(e), name
        assert_same_values(s, e)


# ------------------------------------------------------------------------------ errors

ERRORS: list[tuple[str, Call, tuple[Any, ...]]] = [
    ("split_unequal", lambda m, x: m.split(x, 2), (V7,)),
    ("tril_1d", lambda m, x: m.tril(x), (V,)),
    ("triu_0d", lambda m: m.triu(1.0), ()),
    ("fliplr_1d", lambda m, x: m.fliplr(x), (V,)),
    ("diag_3d", lambda m, x: m.diag(x), (T,)),
    ("diagonal_1d", lambda m, x: m.diagonal(x), (V,)),
    ("tensordot_rank", lambda m, x, y: m.tensordot(x, y, 3), (F, G)),
    ("tensordot_lengths", lambda m, x, y: m.tensordot(x, y, ([0, 1], [0])), (F, G)),
    ("tensordot_kind", lambda m, x, y: m.tensordot(x, y, ([0], 1)), (F, G)),
    ("tensordot_axes", lambda m, x, y: m.tensordot(x, y, "x"), (F, G)),
    ("select_lengths", lambda m, b, x: m.select([b], [x, x]), (B, F)),
    ("select_empty", lambda m: m.select([], []), ()),
    ("meshgrid_2d", lambda m, x: m.meshgrid(x), (F,)),
    ("meshgrid_indexing", lambda m, x: m.meshgrid(x, indexing="xx"), (V,)),
    ("diff_scalar", lambda m: m.diff(1.0), ()),
    ("diff_negative", lambda m, x: m.diff(x, n=-1), (V,)),
    ("average_no_axis", lambda m, x, w: m.average(x, weights=w), (F, WTS)),
    ("average_bad_weights", lambda m, x, w: m.average(x, axis=0, weights=w), (F, WTS)),
    ("moveaxis_counts", lambda m, x: m.moveaxis(x, (0, 1), (0,)), (T,)),
    ("moveaxis_range", lambda m, x: m.moveaxis(x, 3, 0), (T,)),
    ("trace_same_axes", lambda m, x: m.trace(x, axis1=1, axis2=-1), (F,)),
    ("linspace_negative", lambda m: m.linspace(0, 1, -1), ()),
    ("var_ddof_and_correction", lambda m, x: m.var(x, ddof=1, correction=1), (F,)),
    ("split_beyond", lambda m, x: m.split(x, [1, 10], axis=1), (F,)),
    ("split_negative_index", lambda m, x: m.split(x, [-3, 5]), (V7,)),
    ("split_axis", lambda m, x: m.split(x, 2, axis=2), (F,)),
    ("roll_axis", lambda m, x: m.roll(x, 1, axis=2), (F,)),
    ("einsum_sizes", lambda m, x, y: m.einsum("ij,jk->ik", x, y), (F, F)),
    ("einsum_count", lambda m, x: m.einsum("ij,jk->ik", x), (F,)),
    ("einsum_output_unknown", lambda m, x: m.einsum("ij->ik", x), (F,)),
    ("einsum_output_twice", lambda m, x: m.einsum("ij->ii", x), (F,)),
    ("einsum_rank", lambda m, x: m.einsum("ijk", x), (F,)),
    ("einsum_character", lambda m, x: m.einsum("i.j", x), (F,)),
    ("pad_mode", lambda m, x: m.pad(x, 1, "nearest"), (F,)),
    ("pad_kwargs", lambda m, x: m.pad(x, 1, "edge", constant_values=1), (F,)),
    ("pad_negative", lambda m, x: m.pad(x, -1), (F,)),
    ("pad_wrap_empty", lambda m, x: m.pad(x, 1, "wrap"), (np.zeros((0, 3), np.float32),)),
    ("pad_stat_zero", lambda m, x: m.pad(x, 1, "mean", stat_length=0), (F,)),
    ("pad_width_shape", lambda m, x: m.pad(x, ((1, 2, 3),)), (F,)),
    ("pad_width_float", lambda m, x: m.pad(x, 1.5), (F,)),
    ("piecewise_counts", lambda m, x: m.piecewise(x, [x < 0], [1, 2, 3]), (F,)),
    ("interp_shapes", lambda m, x: m.interp(x, x, x[:2]), (V,)),
    ("interp_side", lambda m, x: m.interp(x, x, x, left="nearest"), (V,)),
    ("repeat_scalar_counts", lambda m, c: m.repeat(1.0, c, total_repeat_length=4), (COUNTS,)),
]


@pytest.mark.parametrize("name,call,inputs", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_as_jax(name: str, call: Call, inputs: tuple[Any, ...]) -> None:
    """The exception class JAX raises (ours may be a subclass), naming this file."""
    with pytest.raises(Exception) as theirs:
        call(jnp, *inputs)
    with pytest.raises(theirs.type) as ours:
        call(fnp, *inputs)
    assert "test_numpy_breadth.py" in str(ours.value), str(ours.value)


# ----------------------------------------------------------------------- dtype queries

DTYPES: list[Any] = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                     np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64, int, float]


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_promote_types_table(x64: bool) -> None:
    """promote_types over every pair of dtypes (Python int and float weak), as JAX's."""
    for a in DTYPES:
        for b in DTYPES:
            if (a is int or a is float) and (b is int or b is float):
                continue
            if a in (int, float) and b is np.bool_ or b in (int, float) and a is np.bool_:
                continue
            with ferrax.enable_x64(x64):
                ours = fnp.promote_types(a, b)
            with jax.enable_x64(x64):
                theirs = jnp.promote_types(a, b)
            assert ours == theirs, (a, b, ours, theirs)


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_result_type_table(x64: bool) -> None:
    """result_type over pairs of dtypes, Python types and weak scalars, as JAX's."""
    operands: list[Any] = [*DTYPES, 1, 1.0, True, np.float32(1), np.int8(1), np.ones(2, np.int16)]
    for a in operands:
        for b in operands:
            with ferrax.enable_x64(x64), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = fnp.result_type(a, b)
            with jax.enable_x64(x64), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = jnp.result_type(a, b)
            assert ours == theirs, (a, b, ours, theirs)


def test_issubdtype_table() -> None:
    """issubdtype of every dtype against NumPy's abstract types and each other."""
    abstract = [np.generic, np.number, np.inexact, np.floating, np.integer, np.signedinteger,
                np.unsignedinteger, np.bool_]
    concrete = [d for d in DTYPES if d not in (int, float)]
    for a in concrete:
        for b in abstract + concrete:
            assert fnp.issubdtype(a, b) == jnp.issubdtype(a, b), (a, b)


def test_finfo_iinfo_and_constants() -> None:
    """finfo/iinfo of every dtype (and of arrays), and the constants, as JAX's."""
    for d in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64):
        ours, theirs = fnp.finfo(d), jnp.finfo(d)
        assert (ours.eps, ours.max, ours.min, ours.tiny, ours.bits) == (theirs.eps, theirs.max, theirs.min, theirs.tiny, theirs.bits)
    assert fnp.finfo(fnp.ones(2)).dtype == np.float32
    assert fnp.finfo(fnp.ones(2, dtype=fnp.bfloat16)).dtype == ml_dtypes.bfloat16
    for d in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32):
        assert (fnp.iinfo(d).min, fnp.iinfo(d).max) == (jnp.iinfo(d).min, jnp.iinfo(d).max)
    assert fnp.iinfo(fnp.arange(3)).max == 2**31 - 1
    for name in ("pi", "e", "inf", "euler_gamma"):
        assert getattr(fnp, name) == getattr(jnp, name) and type(getattr(fnp, name)) is type(getattr(jnp, name))
    assert np.isnan(fnp.nan) and fnp.newaxis is None is jnp.newaxis
    assert fnp.zeros((2, 3))[:, fnp.newaxis].shape == (2, 1, 3)


def test_traced_shifts_and_counts() -> None:
    """roll with a traced shift and repeat with traced counts (total_repeat_length) under
    jit, as JAX's; derivatives of logaddexp2 (JAX's custom rule, finite at -inf) and
    hypot."""
    shifts = np.array([-5, 0, 3, 9], dtype=np.int32)

    def rolls(x: Any, s: Any, c: Any, m: Any) -> Any:
        return [m.roll(x, s[i], axis=1) for i in range(4)] + [m.roll(x, s[:2], (0, 1)), m.repeat(x, c, axis=1, total_repeat_length=7)]

    ours = ferrax.jit(lambda x, s, c: rolls(x, s, c, fnp))(F, shifts, COUNTS)
    theirs = jax.jit(lambda x, s, c: rolls(x, s, c, jnp)).lower(F, shifts, COUNTS).compile(FAST_COMPILE)(F, shifts, COUNTS)
    assert types(ours) == types(theirs)
    assert_same_values(ours, theirs)
    # Batched shifts and counts (vmap), against NumPy row by row.
    rows = np.arange(12, dtype=np.float32).reshape(3, 4)
    by_row = np.array([1, -2, 5], np.int32)
    np.testing.assert_array_equal(ferrax.vmap(lambda r, k: fnp.roll(r, k))(rows, by_row), [np.roll(r, k) for r, k in zip(rows, by_row)])
    counts = np.array([[1, 0, 2, 1], [0, 0, 3, 1], [2, 2, 0, 0]], np.int32)
    # Cut to length, or padded with the axis's last element (JAX's rule).
    expected_rows = [np.concatenate([np.repeat(r, c), np.full(max(0, 5 - c.sum()), r[-1])])[:5] for r, c in zip(rows, counts)]
    np.testing.assert_array_equal(ferrax.vmap(lambda r, c: fnp.repeat(r, c, total_repeat_length=5))(rows, counts), expected_rows)
    # JAX's derivative rules, in closed form (NumPy): finite where an operand is -inf.
    xs = np.array([-np.inf, -1.0, 0.0, 2.0], dtype=np.float32)
    ys = np.array([0.5, -np.inf, 0.0, 3.0], dtype=np.float32)
    with np.errstate(divide="ignore"):
        for f, base in (("logaddexp2", 2.0), ("logaddexp", np.e)):
            out = np.log(base**xs.astype(np.float64) + base**ys.astype(np.float64)) / np.log(base)
            expected = (base ** (xs - out), base ** (ys - out))
            assert_same_values(ferrax.vmap(ferrax.grad(getattr(fnp, f), argnums=(0, 1)))(xs, ys), tuple(e.astype(np.float32) for e in expected))
    a, b = np.array([3.0, -1.0, 0.5, 2.0], np.float32), np.array([4.0, 2.0, -0.25, 3.0], np.float32)
    h = np.hypot(a, b)
    assert_same_values(ferrax.vmap(ferrax.grad(fnp.hypot, argnums=(0, 1)))(a, b), (a / h, b / h))


def test_einsum_paths_and_jaxpr() -> None:
    """einsum_path gives JAX's (opt_einsum's) path, optimal up to four operands and
    greedy beyond; einsum stages JAX's jaxpr, character for character (its dot_generals,
    transposes, diagonal masks and sums)."""
    for spec, ops in EINSUMS:
        if len(ops) > 1 and all(isinstance(x, np.ndarray) for x in ops):
            assert fnp.einsum_path(spec, *ops)[0] == jnp.einsum_path(spec, *ops)[0], spec
    assert fnp.einsum_path("ij,jk,kl", F, SQ, SQ, optimize=True)[0] == jnp.einsum_path("ij,jk,kl", F, SQ, SQ, optimize=True)[0]
    for spec, ops in EINSUMS:
        if all(isinstance(x, np.ndarray) for x in ops) and ops[0].dtype != np.bool_:
            ours = str(ferrax.make_jaxpr(lambda *xs: fnp.einsum(spec, *xs))(*ops))
            theirs = str(jax.make_jaxpr(lambda *xs: jnp.einsum(spec, *xs))(*ops))
            assert ours == theirs, (spec, ours, theirs)


def test_pad_reflect_type_refused() -> None:
    """An unknown reflect_type is a ValueError naming the user's line (JAX's is a bare
    AssertionError)."""
    with pytest.raises(ValueError, match="test_numpy_breadth.py"):
        fnp.pad(F, 1, "reflect", reflect_type="bad")


GRAD_CASES: list[Call] = [
    lambda m, a, b: m.einsum("ij,jk->ik", a, b).sum() + m.einsum("ij,j,ii->i", a[:, :3], np.arange(3), b[:3, :3]).sum(),
    lambda m, a, b: m.var(a, axis=0, where=np.arange(12).reshape(3, 4) % 3 != 0).sum() + m.std(b),
    lambda m, a, b: (m.pad(a, ((2, 3), (4, 1)), "reflect", reflect_type="odd") ** 2).sum() + m.pad(b, 2, "mean").sum(),
    lambda m, a, b: m.tensordot(a, b, 1).sum() + m.inner(a, a).sum() + m.outer(a[0], b[0]).sum(),
    lambda m, a, b: m.hypot(a, a + 1).sum() + m.logaddexp2(a, b[:3, :4]).sum() + m.log2(m.abs(a) + 1).sum(),
    lambda m, a, b: m.nanvar(m.where(a > 1, m.nan, a)) + m.nanmean(m.where(a > 1, m.nan, a)),
    lambda m, a, b: m.average(a, axis=1, weights=b[:, 0] ** 2).sum(),
    lambda m, a, b: m.interp(a, np.array([-1, 0, 1, 2.0], np.float32), b[:, 1]).sum(),
    lambda m, a, b: (m.roll(a, 1, 0) * m.tril(a)).sum() + m.trace(b) + m.diagonal(b).sum() + m.kron(a[:2, :2], b[:2, :2]).sum(),
    lambda m, a, b: (m.diff(a, axis=0) ** 2).sum() + m.tile(a, 2).sum() + m.select([a > 0], [a * a], 1.0).sum(),
]


def test_grads_and_vmap() -> None:
    """Derivatives of the new functions composed from primitives against finite
    differences (in float64, forward and reverse), and vmap against a loop."""
    from ferrax.test_util import check_grads

    b = rng.normal(size=(4, 5))

    def total(a: Any, b: Any) -> Any:
        return sum(f(fnp, a, b) for f in GRAD_CASES)

    with ferrax.enable_x64(True):
        check_grads(total, (F.astype(np.float64), b), order=1)
    stacked = np.stack([F, 2 * F])
    b32 = b.astype(np.float32)
    batched = ferrax.vmap(lambda a: [f(fnp, a, b32) for f in GRAD_CASES])(stacked)
    for i, row in enumerate(stacked):
        assert_same_values([x[i] for x in batched], [f(fnp, row, b32) for f in GRAD_CASES])
