"""``ferrax.numpy``'s order statistics and set operations (``quantile``, ``percentile``,
``median`` and the ``nan`` forms; ``unique`` and its Array API forms; ``isin``,
``setdiff1d``, ``union1d``, ``intersect1d``, ``setxor1d``), ``searchsorted``'s four
methods, ``interp(period=)``, ``pad(mode="median")`` and ``reshape``/``ravel(order=)``,
against jax.numpy 0.10.2.

Cases are generated over shapes, axes, methods and dtypes, with NaNs, ties, signed
zeros and empty arrays. Each table runs eagerly in ferrax (NumPy rules, no
compilation), in one ``ferrax.jit`` and in one ``jax.jit`` (the reference): three
compilations per table, not one per case. Functions whose result size depends on the
data (``unique`` and the set operations without ``size=``) run eagerly and are compared
with NumPy's (the same values; JAX's index dtype).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import ml_dtypes
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax.errors import ConcretizationError

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

NDArray = np.ndarray[Any, Any]
Op = Callable[[Any], Any]  # written once for ferrax.numpy and jax.numpy: M -> result

METHODS = ["linear", "lower", "higher", "midpoint", "nearest"]
BF16 = np.dtype(ml_dtypes.bfloat16)


class Case(NamedTuple):
    label: str
    op: Callable[..., Any]  # op(M, *args) for M = ferrax.numpy or jax.numpy
    args: tuple[NDArray, ...]


def samples(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, nans: bool = True, infs: bool = True) -> NDArray:
    """Values with many ties; floats with signed zeros and (if asked) infinities and
    NaNs among them."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 5, size=shape).astype(dtype)
    pool = [-0.0, 0.0, 1.5, -1.5, 2.0] + ([np.inf, -np.inf] if infs else []) + ([np.nan] if nans else [])
    x = np.round(rng.standard_normal(shape), 1)
    special = rng.random(shape) < 0.4
    return np.where(special, rng.choice(np.array(pool), size=shape), x).astype(dtype)


def flat(out: Any) -> list[NDArray]:
    """The arrays of a result (tuples, named tuples and lists of them nest)."""
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in flat(o)]
    return [np.asarray(out)]


def run_table(cases: list[Case]) -> tuple[list[list[NDArray]], list[list[NDArray]], list[list[NDArray]]]:
    """Each case eagerly in ferrax, every case in one ferrax.jit and in one jax.jit."""
    eager = [flat(c.op(fnp, *c.args)) for c in cases]
    argss = [c.args for c in cases]
    ops = [c.op for c in cases]
    staged = ferrax.jit(lambda xs: [op(fnp, *a) for op, a in zip(ops, xs)])(argss)
    theirs = jax.jit(lambda xs: [op(jnp, *a) for op, a in zip(ops, xs)])(argss)
    return eager, [flat(o) for o in staged], [flat(o) for o in theirs]


def close(actual: NDArray, expected: NDArray, what: str, exact: bool = False) -> None:
    """Same dtype and shape, NaN where JAX has NaN, values equal (within a few ulps of
    the dtype unless ``exact``)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
        f"{what}: {actual.dtype}{actual.shape}, JAX's {expected.dtype}{expected.shape}"
    )
    if actual.dtype.kind not in "fV" and actual.dtype != BF16:
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(e), err_msg=what)
    if exact:
        np.testing.assert_array_equal(np.nan_to_num(a), np.nan_to_num(e), err_msg=what)
    else:
        tol = 1e-6 if actual.dtype in (np.float32, np.float64) else 1e-2
        np.testing.assert_allclose(np.nan_to_num(a), np.nan_to_num(e), rtol=tol, atol=tol, err_msg=what)


def check_table(cases: list[Case], exact: bool = False) -> None:
    eager, staged, theirs = run_table(cases)
    for c, e, s, j in zip(cases, eager, staged, theirs, strict=True):
        assert len(e) == len(s) == len(j), c.label
        for i, (ei, si, ji) in enumerate(zip(e, s, j)):
            close(ei, ji, f"{c.label}: eager output {i}", exact)
            close(si, ji, f"{c.label}: jit output {i}", exact)


# ------------------------------------------------------------------------ quantiles

AXES: dict[tuple[int, ...], list[Any]] = {
    (7,): [None, 0, -1],
    (1, 5): [1, (0, 1)],
    (3, 6): [None, 0, 1, (1, 0)],
    (2, 3, 4): [None, 1, (0, 2), (2,), (0, 1, 2)],
}


def quantile_op(fn: str, q: Any, axis: Any, method: str, keepdims: bool) -> Callable[..., Any]:
    def op(M: Any, x: NDArray) -> Any:
        return getattr(M, fn)(x, q, axis=axis, method=method, keepdims=keepdims)

    return op


def quantile_jit_cases() -> list[Case]:
    # One case per feature (compiling a sort costs): each method, tuple axes, keepdims,
    # NaNs and infinities, the nan forms, percentiles, integer and narrow float inputs.
    rng = np.random.default_rng(0)
    x = samples(rng, (3, 6), np.float32)
    x[1, 2] = np.nan
    x[2] = np.nan  # an all-NaN row: the nan forms give NaN there
    cube = samples(rng, (2, 3, 4), np.float32, nans=False)
    qs = np.array([0.0, 0.25, 0.5, 0.9, 1.0], np.float32)
    return [
        Case("quantile linear", quantile_op("quantile", qs, 1, "linear", False), (x,)),
        Case("quantile nearest", quantile_op("quantile", qs, 1, "nearest", False), (x,)),
        Case("nanquantile lower", quantile_op("nanquantile", qs, 1, "lower", True), (x,)),
        Case("nanquantile higher", quantile_op("nanquantile", qs, 0, "higher", False), (x,)),
        Case("quantile tuple axis keepdims", quantile_op("quantile", 0.3, (0, 2), "linear", True), (cube,)),
        Case("nanquantile tuple axis", quantile_op("nanquantile", qs, (2, 0), "nearest", False), (cube,)),
        Case("percentile ints", lambda M, v: M.percentile(v, np.array([0, 30, 100]), axis=0), (samples(rng, (4, 5), np.int32),)),
        Case("median bfloat16", lambda M, v: M.median(v, axis=0), (samples(rng, (5, 3), BF16),)),
        Case("nanmedian", lambda M, v: M.nanmedian(v, axis=1), (x,)),
        Case("inverted_cdf", quantile_op("nanquantile", qs, 1, "inverted_cdf", True), (x,)),
        Case(
            "inverted_cdf weights",
            lambda M, v, w: M.quantile(v, qs, axis=(2, 0), method="inverted_cdf", weights=w),
            (cube, np.where(cube > 1.9, -1.0, np.abs(cube)).astype(np.float32)),  # negative weights: NaN
        ),
    ]


def test_quantiles_match_jax_eagerly_and_under_jit() -> None:
    check_table(quantile_jit_cases())


def test_quantiles_eagerly_over_every_shape_axis_and_method_match_numpy() -> None:
    # Breadth without compiling: every shape, axis, keepdims and method, NaNs included,
    # against NumPy (which JAX follows, except "nearest" at exact halves, where JAX takes
    # the lower one, and infinities, which NumPy's interpolation turns into NaNs).
    rng = np.random.default_rng(1)
    count = 0
    for shape, axes in AXES.items():
        for x in (samples(rng, shape, np.float32, infs=False), samples(rng, shape, np.int32)):
            if x.dtype.kind == "f":
                x.reshape(-1)[-1] = np.nan
            for axis in axes:
                for keepdims in (False, True):
                    for method in [*METHODS[:4], "inverted_cdf"]:
                        for fn, q in (("quantile", np.array([0.1, 0.5, 0.75], np.float32)), ("nanquantile", 0.3)):
                            ours = np.asarray(getattr(fnp, fn)(x, q, axis=axis, method=method, keepdims=keepdims))
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's all-NaN slices
                                expected = getattr(np, fn)(x.astype(np.float64), q, axis=axis, method=method, keepdims=keepdims)
                            what = f"{fn} {x.dtype}{shape} axis={axis} keepdims={keepdims} {method}"
                            assert ours.dtype == np.float32 and ours.shape == expected.shape, what
                            np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-6, err_msg=what)
                            count += 1
            for fn in ("median", "nanmedian"):
                for axis in axes:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        expected = getattr(np, fn)(x.astype(np.float64), axis=axis)
                    np.testing.assert_allclose(np.asarray(getattr(fnp, fn)(x, axis=axis)), expected, rtol=1e-6, err_msg=f"{fn} {shape} {axis}")
    assert count > 300
    # Weights (inverted_cdf only), of the array's shape or of the reduced axis'.
    x = samples(rng, (4, 6), np.float32, infs=False)
    x[1, 1] = np.nan
    w: NDArray = np.asarray(rng.uniform(0, 2, size=(4, 6)), np.float32)
    for fn in ("quantile", "nanquantile"):
        for axis, weights in ((None, w), (0, w), (1, w[0]), ((0, 1), w)):
            q = np.array([0.0, 0.3, 0.5, 1.0], np.float32)
            ours = np.asarray(getattr(fnp, fn)(x, q, axis=axis, method="inverted_cdf", weights=weights))
            expected = getattr(np, fn)(x, q, axis=axis, method="inverted_cdf", weights=np.broadcast_to(weights, x.shape))
            np.testing.assert_array_equal(ours, expected, err_msg=f"{fn} weights axis={axis}")
    np.testing.assert_allclose(np.asarray(fnp.percentile(x, np.array([0, 40]), axis=0)), np.percentile(x, [0, 40], axis=0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fnp.nanpercentile(x, 40.0, method="lower")), np.nanpercentile(x, 40.0, method="lower"), rtol=1e-6)


def test_quantile_dtypes_and_weak_types_in_both_x64_modes() -> None:
    ops: list[Op] = [
        lambda M: M.median(3.0),
        lambda M: M.quantile(np.arange(5.0), 0.5),
        lambda M: M.quantile(np.arange(5, dtype=np.float16), np.float32(0.5)),
        lambda M: M.nanpercentile(np.arange(5, dtype=np.int8), 50),
    ]
    for x64 in (False, True):
        with jax.enable_x64(x64), ferrax.enable_x64(x64):
            for k, op in enumerate(ops):
                ours, theirs = op(fnp), op(jnp)
                assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type), (x64, k)
                np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)


def test_quantile_gradients_match_jax() -> None:
    x = np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32)
    x[1, 2] = x[1, 3]  # a tie

    def loss(M: Any, a: Any) -> Any:
        return (
            M.median(a, axis=0).sum()
            + (M.quantile(a, np.array([0.1, 0.9], np.float32), axis=1) ** 2).sum()
            + M.nanpercentile(a, 30.0, axis=(0, 1), method="nearest")
        )

    theirs = np.asarray(jax.jit(jax.grad(lambda a: loss(jnp, a)))(x))
    ours = ferrax.jit(ferrax.grad(lambda a: loss(fnp, a)))(x)
    np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-6, atol=1e-6)
    eager = ferrax.grad(lambda a: loss(fnp, a))(x)
    np.testing.assert_allclose(np.asarray(eager), theirs, rtol=1e-6, atol=1e-6)
    assert np.count_nonzero(theirs) > 5


def primitives(jaxpr_text: str) -> list[str]:
    return re.findall(r"= ([a-z_]+)\b", jaxpr_text)


def test_median_stages_jaxs_sort_and_gathers() -> None:
    x = np.ones((4,), np.float32)
    ours = primitives(str(ferrax.make_jaxpr(fnp.median)(x)))
    theirs = primitives(str(jax.make_jaxpr(jnp.median)(x)))
    # JAX wraps its functions in nested jits, computes n - 1 at run time and tests for NaN
    # with reduce_or (ferrax: reduce_max of bools, the same reduction); the rest is equal.
    key = {"sort", "floor", "ceil", "clamp", "gather", "select_n", "add", "mul"}
    assert [p for p in ours if p in key] == [p for p in theirs if p in key]
    assert ours.count("sort") == 1 and ours.count("gather") == 2


# ------------------------------------------------------------------------ unique and sets


def unique_inputs() -> list[tuple[str, NDArray, list[int | None]]]:
    floats = np.array([3, 1, 3, 2, np.nan, np.nan, 1, -0.0, 0.0, np.inf], np.float32)
    rows = np.array([[1, 2, 1], [0, 0, 0], [1, 2, 1], [3, 1, 0]], np.int32)
    return [
        ("floats", floats, [None, 0]),
        ("int rows", rows, [None, 0, 1]),
        ("uint8 3-d", np.random.default_rng(3).integers(0, 3, (2, 3, 2)).astype(np.uint8), [None, 2]),
        ("bools", np.array([True, False, True]), [None]),
        ("empty", np.zeros((0,), np.float32), [None]),
    ]


FLAGS = [(i, v, c) for i in (False, True) for v in (False, True) for c in (False, True)]


def numpy_unique(x: NDArray, flags: tuple[bool, bool, bool], axis: int | None, equal_nan: bool) -> list[NDArray]:
    """NumPy's unique in JAX's layout: the inverse has the input's shape when ``axis`` is
    None; indices of JAX's default int."""
    np_unique: Any = np.unique  # (NumPy's overloads want literal flags)
    out = np_unique(x, *flags, axis=axis, equal_nan=equal_nan)
    outs = list(out) if isinstance(out, tuple) else [out]
    if flags[1] and axis is None:
        at = 2 if flags[0] else 1
        outs[at] = outs[at].reshape(x.shape)
    return [outs[0]] + [o.astype(np.int32) for o in outs[1:]]


def padded_unique(x: NDArray, flags: tuple[bool, bool, bool], axis: int | None, equal_nan: bool, size: int, fill: Any) -> list[NDArray]:
    """JAX's unique with ``size``: the first ``size`` values (and first indices and
    counts), padded with ``fill_value`` (default the smallest value), the first index and
    zero counts; the inverse is unchanged."""
    outs = numpy_unique(x, flags, axis, equal_nan)
    ax = 0 if axis is None else axis
    values = np.moveaxis(outs[0], ax, 0)
    n = values.shape[0]
    pad = np.full((max(size - n, 0), *values.shape[1:]), fill, values.dtype) if fill is not None else np.repeat(values[:1], max(size - n, 0), 0)
    result = [np.moveaxis(np.concatenate([values[:size], pad]), 0, ax)]
    rest = outs[1:]
    if flags[0]:
        index = rest.pop(0)
        result.append(np.concatenate([index[:size], np.full(max(size - n, 0), index[0], np.int32)]))
    if flags[1]:
        result.append(rest.pop(0))
    if flags[2]:
        result.append(np.concatenate([rest.pop(0)[:size], np.zeros(max(size - n, 0), np.int32)]))
    return result


def test_unique_eagerly_matches_numpy() -> None:
    count = 0
    for name, x, axes in unique_inputs():
        for axis in axes:
            for flags in FLAGS:
                for equal_nan in (True, False):
                    if axis is not None and x.dtype.kind == "f" and not equal_nan:
                        continue  # NumPy's unique along an axis always merges NaN rows
                    for size, fill in ((None, None), (2, None), (12, None), (12, 9)):
                        if not x.size and size is not None:
                            continue  # JAX needs a fill value: in the error table
                        got = flat(fnp.unique(x, *flags, axis, equal_nan=equal_nan, size=size, fill_value=fill))
                        if size is None:
                            expected = numpy_unique(x, flags, axis, equal_nan)
                        else:
                            expected = padded_unique(x, flags, axis, equal_nan, size, fill)
                        assert len(got) == len(expected)
                        for i, (o, e) in enumerate(zip(got, expected)):
                            what = f"unique {name} axis={axis} flags={flags} equal_nan={equal_nan} size={size} fill={fill}: output {i}"
                            assert o.dtype == e.dtype and o.shape == e.shape, what
                            np.testing.assert_array_equal(o, e, err_msg=what)
                        count += 1
    assert count > 300
    values, indices, inverse, counts = fnp.unique_all(np.array([2.0, np.nan, 2.0, np.nan], np.float32))
    np.testing.assert_array_equal(np.asarray(values), [2.0, np.nan, np.nan])  # NaNs distinct
    np.testing.assert_array_equal(np.asarray(counts), [2, 1, 1])
    np.testing.assert_array_equal(np.asarray(inverse), [0, 1, 0, 2])
    np.testing.assert_array_equal(np.asarray(indices), [0, 1, 3])


SET_A = np.array([5, 1, 3, 3, 7, 9, -2], np.int32)
SET_B = np.array([3, 4, 9, 9, 0, -2], np.int32)
SET_F = np.array([0.5, np.nan, -0.0, 2.0, 0.5], np.float32)
SET_G = np.array([0.0, 2.0, 8.0, np.nan], np.float32)
SET_PAIRS = [
    ("ints", SET_A, SET_B), ("floats", SET_F, SET_G), ("disjoint", SET_A[:2], SET_B[1:3]),
    ("one empty", SET_A, SET_B[:0]), ("both empty", SET_A[:0], SET_B[:0]), ("2-d", SET_A.reshape(7, 1), SET_B.reshape(2, 3)),
]


def test_unique_and_set_operations_with_size_match_jax_eagerly_and_under_jit() -> None:
    x = unique_inputs()[0][1]
    rows = unique_inputs()[1][1]
    cases = [
        Case("unique all flags", lambda M, v: M.unique(v, True, True, True, size=6), (x,)),
        Case("unique rows, NaNs apart", lambda M, v, r: (M.unique(r, True, True, True, axis=0, size=4, fill_value=5), M.unique_all(v, size=12)), (x, rows)),
        Case("unique empty", lambda M, v: M.unique(v, True, True, True, size=3, fill_value=1), (np.zeros(0, np.float32),)),
        Case("setdiff1d, union1d", lambda M, a, b: (M.setdiff1d(a, b, size=4), M.union1d(a, b, size=9, fill_value=-1)), (SET_F, SET_G)),
        Case("intersect1d", lambda M, a, b: M.intersect1d(a, b, return_indices=True, size=3), (SET_A, SET_B)),
        Case("setxor1d", lambda M, a, b: M.setxor1d(a, b, size=8), (SET_A, SET_B)),
        Case("isin sort", lambda M, a, b: M.isin(a.reshape(-1, 1), b, invert=True, method="sort"), (SET_F, SET_G)),
    ]
    check_table(cases, exact=True)


def padded(values: NDArray, size: int, fill: Any) -> NDArray:
    out = np.full(size, fill, values.dtype)
    out[: min(size, values.size)] = values[:size]
    return out


def test_set_operations_eagerly_match_numpy() -> None:
    count = 0
    for name, a, b in SET_PAIRS:
        for fn in ("setdiff1d", "union1d", "intersect1d", "setxor1d"):
            expected = getattr(np, fn)(a, b)
            for size, fill in ((None, None), (3, None), (9, None), (9, -1)):
                if fn == "union1d" and not expected.size and size and fill is None:
                    continue  # JAX's unique of nothing needs a fill value: in the error table
                got = np.asarray(getattr(fnp, fn)(a, b, size=size, fill_value=fill))
                if size is None:
                    want = expected
                elif fill is not None:
                    want = padded(expected, size, fill)
                elif fn in ("setdiff1d", "union1d"):  # 0, or the smallest value
                    want = padded(expected, size, expected[0] if expected.size and fn == "union1d" else 0)
                else:  # the smallest value (JAX's min of the max-padded values: NaN if any)
                    want = padded(expected, size, 0)
                    shown = np.arange(size) < expected.size
                    want = np.where(shown, want, want.max())
                    want = np.where(shown, want, want.min())
                what = f"{fn} {name} size={size} fill={fill}"
                assert got.dtype == want.dtype, what
                np.testing.assert_array_equal(got, want, err_msg=what)
                count += 1
            if fn != "union1d":
                ua, ub = np.unique(a), np.unique(b)
                np.testing.assert_array_equal(np.asarray(getattr(fnp, fn)(ua, ub, True)), getattr(np, fn)(ua, ub, True), err_msg=fn)
        for assume in (False, True):
            x, y = (np.unique(a), np.unique(b)) if assume else (a, b)
            expected_i = np.intersect1d(x, y, assume, return_indices=True)
            for o, e in zip(flat(fnp.intersect1d(x, y, assume, return_indices=True)), expected_i):
                np.testing.assert_array_equal(o, e, err_msg=f"intersect1d indices {name}")
            if x.size and y.size:
                fills = (expected_i[0][0] if expected_i[0].size else 0, x.size, y.size)
                for o, e, f in zip(flat(fnp.intersect1d(x, y, assume, return_indices=True, size=9)), expected_i, fills):
                    np.testing.assert_array_equal(o, padded(e.astype(o.dtype), 9, f), err_msg=f"intersect1d indices size {name}")
        for method in ("auto", "compare_all", "binary_search", "sort"):
            for invert in (False, True):
                got = np.asarray(fnp.isin(a, b, invert=invert, method=method))
                np.testing.assert_array_equal(got, np.isin(a, b, invert=invert), err_msg=f"isin {name} {method}")
    assert count > 80


def test_data_dependent_sizes_need_size_under_jit() -> None:
    x = np.array([3, 1, 3], np.int32)
    needs_size: list[Op] = [
        lambda M: lambda v: M.unique(v),
        lambda M: lambda v: M.unique_counts(v),
        lambda M: lambda v: M.setdiff1d(v, v),
        lambda M: lambda v: M.union1d(v, v),
        lambda M: lambda v: M.setxor1d(v, v),
    ]
    for op in needs_size:
        with pytest.raises(TypeError) as theirs:
            jax.jit(op(jnp))(x)
        with pytest.raises(ConcretizationError, match="size") as ours:
            ferrax.jit(op(fnp))(x)
        assert isinstance(ours.value, TypeError) and "ConcretizationTypeError" in type(theirs.value).__name__
        assert os.path.basename(__file__) in str(ours.value)
    # A traced size is refused as JAX refuses it.
    with pytest.raises(ConcretizationError):
        ferrax.jit(lambda v, n: fnp.unique(v, size=n))(x, 2)


# ------------------------------------------------------------------------ searchsorted, interp, pad, reshape

SEARCH_METHODS = ["scan", "scan_unrolled", "sort", "compare_all"]


def test_searchsorted_eagerly_matches_numpy() -> None:
    # NumPy's order is the sort's: NaNs last, -0.0 equal to 0.0.
    rng = np.random.default_rng(4)
    count = 0
    for dtype in (np.float32, np.float16, BF16, np.int32, np.uint8, np.int8):
        for n in (0, 1, 2, 5, 16, 33):
            a = np.sort(samples(rng, (n,), dtype).astype(np.float32)).astype(dtype)
            for v in (samples(rng, (9,), dtype), samples(rng, (2, 3), dtype), samples(rng, (), dtype)):
                for side in ("left", "right"):
                    want = np.searchsorted(a.astype(np.float32), v.astype(np.float32), side).astype(np.int32)
                    for method in SEARCH_METHODS:
                        got = np.asarray(fnp.searchsorted(a, v, side, method=method))
                        what = f"{np.dtype(dtype).name}[{n}] v{v.shape} {side} {method}"
                        assert got.dtype == np.int32 and got.shape == np.shape(want), what
                        np.testing.assert_array_equal(got, want, err_msg=what)
                        count += 1
    assert count > 800
    a = np.array([3.0, 1.0, 2.0, 2.0], np.float32)
    order = np.argsort(a, kind="stable")
    np.testing.assert_array_equal(np.asarray(fnp.searchsorted(a, np.arange(5.0), sorter=order)), np.searchsorted(a, np.arange(5.0), sorter=order))


def test_searchsorted_matches_jax_under_jit() -> None:
    rng = np.random.default_rng(5)
    a = np.sort(samples(rng, (13,), np.float32))
    v = samples(rng, (3, 4), np.float32)
    cases = [Case(f"{side} {m}", lambda M, a, v, s=side, m=m: M.searchsorted(a, v, s, method=m), (a, v)) for side, m in zip(("left", "right", "right", "left"), SEARCH_METHODS)]
    cases.append(Case("int8 scan", lambda M, a: M.searchsorted(a, 2), (np.arange(-3, 5, dtype=np.int8),)))
    cases.append(Case("empty", lambda M, a, v: M.searchsorted(a, v), (a[:0], v)))
    check_table(cases, exact=True)


def test_searchsorted_scan_is_a_binary_search() -> None:
    args = (np.arange(1000.0, dtype=np.float32), np.ones(3, np.float32))
    jaxpr = str(ferrax.make_jaxpr(lambda a, v: fnp.searchsorted(a, v))(*args))
    theirs = str(jax.make_jaxpr(lambda a, v: jnp.searchsorted(a, v))(*args))
    assert "scan[" in jaxpr and "length=10" in jaxpr and "u32[3]" in jaxpr
    assert "f32[3,1000]" not in jaxpr and "f32[1000,3]" not in jaxpr  # no comparison of every pair
    # JAX's scan: the same length, carries, consts and body gather (JAX compares with
    # its total-order le_to primitive, ferrax with le and NaN tests).
    for param in ("length", "num_carry", "num_consts", "unroll"):
        assert re.findall(rf"{param}=(\d+)", jaxpr) == re.findall(rf"{param}=(\d+)", theirs), param
    assert jaxpr.count("mode=GatherScatterMode.CLIP") == theirs.count("mode=GatherScatterMode.CLIP") == 1
    unrolled = str(ferrax.make_jaxpr(lambda a, v: fnp.searchsorted(a, v, method="scan_unrolled"))(np.arange(7.0), 1.0))
    assert "scan[" not in unrolled and unrolled.count("gather[") == 3


def test_interp_period_pad_median_and_orders_eagerly_match_numpy() -> None:
    rng = np.random.default_rng(6)
    x = rng.uniform(-400, 400, 40).astype(np.float32)
    for xp in (np.array([190, -190, 350, -350, 0, 10], np.float32), np.array([5.0, 95.0], np.float32), rng.uniform(-720, 720, 9).astype(np.float32)):
        fp = rng.standard_normal(xp.shape).astype(np.float32)
        for period in (360.0, -360.0, np.float32(90.0))[: 2 if xp.size == 6 else 3]:  # no ties modulo the period
            got = np.asarray(fnp.interp(x, xp, fp, period=period))
            np.testing.assert_allclose(got, np.interp(x, xp, fp, period=period), rtol=1e-4, atol=1e-4, err_msg=f"{xp} {period}")
    for m in (np.arange(12, dtype=np.float32).reshape(3, 4) ** 2 % 7, np.array([[1, 2, 8], [4, 4, 9]], np.int32), np.arange(5, dtype=np.uint8)):
        for width in (1, ((2, 0),) * m.ndim, ((1, 3),) * m.ndim):
            for stat_length in (None, 1, 2, ((1, 2),) * m.ndim):
                got = np.asarray(fnp.pad(m, width, "median", stat_length=stat_length))
                want = np.pad(m, width, "median", stat_length=stat_length)
                assert got.dtype == want.dtype or (want.dtype == np.int64 and got.dtype == np.int32)
                np.testing.assert_array_equal(got, want, err_msg=f"pad median {m.dtype} {width} {stat_length}")
    big = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    for shape in ((4, 30), (120,), (6, -1), (2, 2, 3, 2, 5), (5, 4, 3, 2), (-1, 2, 3)):
        for order in ("C", "F"):
            np.testing.assert_array_equal(np.asarray(fnp.reshape(big, shape, order=order)), np.reshape(big, shape, order=order))
            np.testing.assert_array_equal(np.asarray(fnp.asarray(big).reshape(shape, order=order)), big.reshape(shape, order=order))
    orders: tuple[Literal["C", "F"], ...] = ("C", "F")
    for order in orders:
        np.testing.assert_array_equal(np.asarray(fnp.ravel(big, order)), np.ravel(big, order))
        np.testing.assert_array_equal(np.asarray(fnp.asarray(big).flatten(order)), big.flatten(order))


def test_interp_pad_and_reshape_match_jax_under_jit() -> None:
    x = np.linspace(-400, 400, 25).astype(np.float32)
    xp = np.array([190, -190, 350, -350, 0, 10], np.float32)
    fp = np.arange(6, dtype=np.float32)
    m = (np.arange(12, dtype=np.float32).reshape(3, 4) ** 2) % 7
    big = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cases = [
        Case("interp period", lambda M, x, xp, fp: M.interp(x, xp, fp, period=360.0), (x, xp, fp)),
        Case("interp period ints", lambda M, x, xp: M.interp(x, xp, xp * 2, period=7), (np.arange(-3, 9, dtype=np.int32), np.array([1, 5, 2], np.int32))),
        Case("pad median", lambda M, m: M.pad(m, ((1, 2), (2, 1)), "median", stat_length=((1, 2), (3, 1))), (m,)),
        Case("pad median ints", lambda M, m: M.pad(m, 2, "median"), (np.array([[1, 2, 8], [4, 4, 9]], np.int32),)),
        Case("pad median nan", lambda M, m: M.pad(m, 1, "median"), (np.array([1.0, np.nan, 3.0], np.float32),)),
        Case("reshape F", lambda M, v: (M.reshape(v, (4, 6), order="F"), M.asarray(v).reshape(6, -1, order="F")), (big,)),
        Case("ravel F", lambda M, v: (M.ravel(v, order="F"), M.asarray(v).flatten("F"), M.asarray(v).ravel("C")), (big,)),
    ]
    check_table(cases)


def test_reshape_in_fortran_order_stages_jaxs_jaxpr() -> None:
    x = np.ones((2, 3, 4), np.float32)
    ours = str(ferrax.make_jaxpr(lambda v: fnp.reshape(v, (4, 6), order="F"))(x))
    theirs = str(jax.make_jaxpr(lambda v: jnp.reshape(v, (4, 6), order="F"))(x))
    assert ours == theirs


# ------------------------------------------------------------------------ errors

X = np.arange(12.0, dtype=np.float32).reshape(3, 4)
I5 = np.arange(5, dtype=np.int32)

ERRORS: list[tuple[str, Op]] = [
    ("method", lambda M: M.quantile(M.asarray(X), 0.5, method="foo")),
    ("weights with linear", lambda M: M.quantile(M.asarray(X), 0.5, weights=M.asarray(X))),
    ("weights axis None", lambda M: M.nanquantile(M.asarray(X), 0.5, method="inverted_cdf", weights=M.asarray(X[0]))),
    ("weights shape", lambda M: M.percentile(M.asarray(X), 5, axis=0, method="inverted_cdf", weights=M.asarray(X[0]))),
    ("q rank", lambda M: M.quantile(M.asarray(X), np.ones((2, 2), np.float32))),
    ("integer q", lambda M: M.quantile(M.asarray(X), 1)),
    ("overwrite_input", lambda M: M.quantile(M.asarray(X), 0.5, overwrite_input=True)),
    ("median out", lambda M: M.median(M.asarray(X), out=np.zeros(()))),
    ("nanquantile out", lambda M: M.nanquantile(M.asarray(X), 0.5, out=np.zeros(()))),
    ("axis", lambda M: M.quantile(M.asarray(X), 0.5, axis=2)),
    ("negative axis", lambda M: M.nanmedian(M.asarray(X), axis=(0, -3))),
    ("repeated axis", lambda M: M.quantile(M.asarray(X), 0.5, axis=(0, 0))),
    ("empty axis", lambda M: M.quantile(M.zeros((0, 3)), 0.5, axis=0)),
    ("nan empty axis", lambda M: M.nanquantile(M.zeros((0, 3)), 0.5, axis=0)),
    ("intersect1d indices of one empty", lambda M: M.intersect1d(M.arange(3), M.arange(0), return_indices=True, size=4)),
    ("unique empty no fill", lambda M: M.unique(M.zeros(0), size=3)),
    ("union1d empty no fill", lambda M: M.union1d(M.zeros(0), M.zeros(0), size=3)),
    ("unique axis", lambda M: M.unique(M.asarray(X), axis=2)),
    ("unique float size", lambda M: M.unique(M.asarray(X), size=2.5)),
    ("searchsorted 2-d", lambda M: M.searchsorted(M.asarray(X), 1.0)),
    ("searchsorted side", lambda M: M.searchsorted(M.asarray(I5), 1, side="middle")),
    ("searchsorted method", lambda M: M.searchsorted(M.asarray(I5), 1, method="bisect")),
    ("interp period", lambda M: M.interp(M.asarray(X[0]), M.asarray(X[0]), M.asarray(X[0]), period=np.ones(2))),
    ("isin method", lambda M: M.isin(M.asarray(I5), M.asarray(I5), method="hash")),
    ("reshape order A", lambda M: M.reshape(M.asarray(X), (12,), order="A")),
    ("method reshape order A", lambda M: M.asarray(X).reshape(12, order="A")),
    ("reshape order K", lambda M: M.asarray(X).reshape(12, order="K")),
    ("ravel order K", lambda M: M.ravel(M.asarray(X), order="K")),
    ("pad median kwargs", lambda M: M.pad(M.asarray(X), 1, mode="median", constant_values=2)),
    ("pad median stat_length", lambda M: M.pad(M.asarray(X), 1, mode="median", stat_length=0)),
]


@pytest.mark.parametrize("name,op", ERRORS, ids=[n for n, _ in ERRORS])
def test_errors_are_jaxs(name: str, op: Op) -> None:
    with pytest.raises(Exception) as theirs:
        op(jnp)
    with pytest.raises(Exception) as ours:
        op(fnp)
    assert isinstance(ours.value, type(theirs.value)), (name, ours.value, theirs.value)
    assert os.path.basename(__file__) in str(ours.value), name
