"""``lax.sort``, ``lax.sort_key_val``, ``lax.top_k``, the cumulative primitives (``lax.cumsum``,
``cumprod``, ``cummax``, ``cummin``, ``cumlogsumexp``) and ``ferrax.numpy``'s sort,
argsort, searchsorted and cumulative reductions, against JAX 0.10.2.

Cases are generated over dtypes, shapes (empty and size-1 axes included) and values
with NaNs, signed zeros, infinities and ties. Each table runs eagerly in ferrax (NumPy
rules, no compilation), in one ``ferrax.jit`` (the StableHLO lowering) and in one
``jax.jit`` (the reference): three compilations per table, not one per case. The
derivative and batching rules are checked by the primitive tables
(tests/test_jvp_primitives.py, test_batch_primitives.py, test_jit_primitives.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jlax = pytest.importorskip("jax.lax")

NDArray = np.ndarray[Any, Any]

FLOATS = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
INTS = [np.dtype(t) for t in (np.int8, np.int32, np.uint8, np.uint32)]
EVERY: list[np.dtype[Any]] = [*FLOATS, *INTS, np.dtype(np.bool_)]
SHAPES = [(7,), (3, 6), (4, 1), (1, 5), (0, 3), (2, 0), (2, 3, 4)]


def values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> NDArray:
    """Values with many ties; floats with NaNs (of both signs), signed zeros and
    infinities among them."""
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, 1, 2, 3, info.max - 1], dtype=np.int64)
        return rng.choice(pool, size=shape).astype(dtype)
    pool = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -1.5, 2.0, 0.25])
    x = rng.standard_normal(shape)
    special = rng.random(shape) < 0.5
    return np.where(special, rng.choice(pool, size=shape), x).astype(dtype)


Op = Callable[[Any], Callable[..., Any]]


def via(name: str, *params: Any, pick: int | None = None, **kw: Any) -> Op:
    """The op ``M.name(*operands, *params, **kw)`` for a module ``M`` (``lax`` or
    ``numpy`` of either library), its output ``pick`` if given."""

    def op(M: Any) -> Callable[..., Any]:
        def fn(*xs: Any) -> Any:
            out = getattr(M, name)(*xs, *params, **kw)
            return out if pick is None else out[pick]

        return fn

    return op


def sort_together(dimension: int, num_keys: int) -> Op:
    """``M.sort`` of all the operands as one sequence."""
    return lambda M: lambda *xs: M.sort(xs, dimension=dimension, num_keys=num_keys)


class Case(NamedTuple):
    label: str
    op: Callable[[Any], Callable[..., Any]]  # written once for ferrax.lax and jax.lax
    args: tuple[NDArray, ...]


def sort_cases() -> list[Case]:
    rng = np.random.default_rng(0)
    cases = []
    for dtype in EVERY:
        for shape in SHAPES:
            x = values(rng, shape, dtype)
            for dim in range(len(shape)):
                cases.append(Case(f"{dtype.name}{shape} dim {dim}", via("sort", dimension=dim), (x,)))
    # Several operands: sorted by the first num_keys lexicographically, stable on ties.
    for shape in [(9,), (3, 8), (0, 4), (5, 1)]:
        k1 = values(rng, shape, np.dtype(np.int8))
        k2 = values(rng, shape, np.dtype(np.float32))
        v = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
        for dim in range(len(shape)):
            for keys in (1, 2, 3):
                cases.append(
                    Case(
                        f"3 operands {shape} dim {dim} keys {keys}",
                        sort_together(dim, keys),
                        (k1, k2, v),
                    )
                )
        cases.append(Case(f"key_val {shape}", via("sort_key_val"), (k2, v)))
    for dtype in EVERY:
        x = values(rng, (3, 7), dtype)
        for k, axis in [(0, -1), (3, -1), (7, 1), (2, 0)]:
            cases.append(Case(f"top_k {dtype.name} k={k} axis={axis}", via("top_k", k, axis=axis), (x,)))
    x = values(rng, (4, 6), np.dtype(np.float32))
    cases.append(Case("negative dimension", via("sort", dimension=-2), (x,)))
    cases.append(Case("unstable, no ties", via("sort", is_stable=False), (rng.permutation(12).astype(np.float32),)))
    return cases


CUMULATIVE = ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"]


def cumulative_cases() -> list[Case]:
    # Each case compiles its own reduce_window (about 25 ms): a few layouts per dtype.
    rng = np.random.default_rng(1)
    layouts = [((6,), 0, False), ((3, 5), 1, True), ((0, 2), 0, False), ((1, 2, 3), 0, True), ((2, 3, 2), 1, False)]
    narrow: list[np.dtype[Any]] = [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int8), np.dtype(np.uint32)]
    cases = []
    for name in CUMULATIVE:
        dtypes: list[np.dtype[Any]] = [np.dtype(np.float32), np.dtype(np.float16)] if name == "cumlogsumexp" else narrow
        for dtype in dtypes:
            for shape, axis, reverse in layouts:
                if dtype.kind in "iu" and name in ("cumsum", "cumprod"):
                    x = rng.integers(-3 if dtype.kind == "i" else 0, 4, size=shape).astype(dtype)  # wrapping included
                elif name == "cumprod":
                    x = rng.uniform(0.5, 1.5, size=shape).astype(dtype)
                else:
                    x = values(rng, shape, dtype)
                cases.append(
                    Case(
                        f"{name} {dtype.name}{shape} axis {axis}{' reverse' if reverse else ''}",
                        via(name, axis, reverse),
                        (x,),
                    )
                )
    return cases


def as_host(x: Any) -> NDArray:
    return np.asarray(x)


def flat(out: Any) -> list[NDArray]:
    return [as_host(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def run_table(cases: list[Case]) -> tuple[list[list[NDArray]], list[list[NDArray]], list[list[NDArray]]]:
    """Each case eagerly in ferrax, every case in one ferrax.jit and in one jax.jit."""
    eager = [flat(c.op(lax)(*c.args)) for c in cases]
    fx_fns = [c.op(lax) for c in cases]
    jx_fns = [c.op(jlax) for c in cases]
    argss = [c.args for c in cases]
    staged = ferrax.jit(lambda xs: [f(*a) for f, a in zip(fx_fns, xs)])(argss)
    theirs = jax.jit(lambda xs: [f(*a) for f, a in zip(jx_fns, xs)])(argss)
    return eager, [flat(o) for o in staged], [flat(o) for o in theirs]


def same_bits(actual: NDArray, expected: NDArray, what: str) -> None:
    """Equal values, dtypes and shapes; NaN where JAX has NaN, zeros of JAX's sign."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
        f"{what}: {actual.dtype}{actual.shape}, JAX's {expected.dtype}{expected.shape}"
    )
    if actual.dtype.kind == "f" or actual.dtype == ml_dtypes.bfloat16:
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e), err_msg=what)
        np.testing.assert_array_equal(np.signbit(a) & (a == 0), np.signbit(e) & (e == 0), err_msg=f"{what}: signed zeros")
        np.testing.assert_array_equal(np.nan_to_num(a), np.nan_to_num(e), err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


@pytest.fixture(scope="module")
def sort_table() -> tuple[list[Case], Any]:
    cases = sort_cases()
    return cases, run_table(cases)


def test_sort_matches_jax_eagerly_and_under_jit(sort_table: tuple[list[Case], Any]) -> None:
    cases, (eager, staged, theirs) = sort_table
    assert len(cases) > 100
    for c, e, s, j in zip(cases, eager, staged, theirs, strict=True):
        assert len(e) == len(s) == len(j), c.label
        for i, (ei, si, ji) in enumerate(zip(e, s, j)):
            same_bits(ei, ji, f"{c.label}: eager output {i}")
            same_bits(si, ji, f"{c.label}: jit output {i}")


def test_sort_orders_nans_last_and_zeros_as_equal() -> None:
    # -0.0 and 0.0 tie (a stable sort keeps their order); NaNs of either sign come last.
    x = np.array([np.nan, 0.0, -0.0, -np.inf, -np.nan, 1.0, -0.0], np.float32)
    out = np.asarray(lax.sort(x))
    assert np.isnan(out[-2:]).all() and not np.isnan(out[:-2]).any()
    np.testing.assert_array_equal(np.signbit(out[1:4]), [False, True, True])
    keys, positions = lax.sort_key_val(x, np.arange(7, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(positions), [3, 1, 2, 6, 5, 0, 4])


@pytest.fixture(scope="module")
def cumulative_table() -> tuple[list[Case], Any]:
    cases = cumulative_cases()
    return cases, run_table(cases)


def test_cumulative_reductions_match_jax(cumulative_table: tuple[list[Case], Any]) -> None:
    cases, (eager, staged, theirs) = cumulative_table
    assert len(cases) > 80
    for c, (e,), (s,), (j,) in zip(cases, eager, staged, theirs, strict=True):
        if "cummax" in c.label or "cummin" in c.label or j.dtype.kind in "iu":
            same_bits(e, j, f"{c.label}: eager")
            same_bits(s, j, f"{c.label}: jit")
            continue
        assert e.dtype == s.dtype == j.dtype and e.shape == s.shape == j.shape, c.label
        tol = 1e-5 if j.dtype == np.float32 else 2e-2
        for got, how in ((e, "eager"), (s, "jit")):
            np.testing.assert_allclose(got.astype(np.float64), j.astype(np.float64), rtol=tol, atol=tol, err_msg=f"{c.label}: {how}")


def test_jitted_cumsum_has_jaxs_bits() -> None:
    # The same reduce_window as JAX's, so the same bits (XLA's CPU backend does not sum
    # long windows one element after another: eager NumPy's running sums differ in the
    # last bits there).
    x = np.random.default_rng(2).standard_normal((5, 1000)).astype(np.float32)
    for reverse in (False, True):
        theirs = np.asarray(jax.jit(lambda v: jlax.cumsum(v, 1, reverse))(x))
        np.testing.assert_array_equal(np.asarray(ferrax.jit(lambda v: lax.cumsum(v, 1, reverse))(x)), theirs)
        np.testing.assert_allclose(np.asarray(lax.cumsum(x, 1, reverse)), theirs, rtol=1e-4, atol=1e-4)


def test_jaxprs_are_jaxs() -> None:
    x, i = np.ones((3, 4), np.float32), np.ones((3, 4), np.int32)

    def both(op: Callable[[Any], Callable[..., Any]], *args: NDArray) -> None:
        ours = str(ferrax.make_jaxpr(op(lax))(*args))
        theirs = str(jax.make_jaxpr(op(jlax))(*args))
        # JAX's sort jvp prints its gather's batching dims as NumPy scalars (np.int64(0)).
        assert ours == re.sub(r"np\.int64\((\d+)\)", r"\1", theirs)

    both(lambda L: lambda a, b: L.sort((a, b), dimension=0, num_keys=2, is_stable=False), x, i)
    both(lambda L: lambda a: L.sort(a), x)
    both(lambda L: lambda a: (L.cumsum(a, 1), L.cumprod(a, 0, True), L.cummax(a), L.cummin(a), L.cumlogsumexp(a, 1, True)), x)
    # The sort's tangent: an iota sorted along, then a gather (JAX's rule).
    both(lambda L: lambda a, t: (jax if L is jlax else ferrax).jvp(lambda v: L.sort(v, dimension=1), (a,), (t,)), x, x)
    # cumsum transposes to the cumsum the other way (JAX names the unused forward
    # result `_`, ferrax does not: the equations are compared).
    ours = str(ferrax.make_jaxpr(lambda a: ferrax.vjp(lambda v: lax.cumsum(v, 1), a)[1](a))(x))
    assert re.findall(r"= (cumsum\[.*?\])", ours) == ["cumsum[axis=1 reverse=False]", "cumsum[axis=1 reverse=True]"]


def test_lax_errors_are_jaxs() -> None:
    x = np.ones((3,), np.float32)
    for L in (lax, jlax):
        with pytest.raises(TypeError, match="equal shapes"):
            L.sort((x, np.ones(4, np.float32)))
        with pytest.raises(ValueError, match="num_keys"):
            L.sort((x, x), num_keys=3)
        with pytest.raises(ValueError, match="num_keys"):
            L.sort(x, num_keys=2)
        with pytest.raises(ValueError, match="out of bounds"):
            L.sort(x, dimension=1)
        with pytest.raises(ValueError, match="out of bounds"):
            L.cumsum(x, axis=1)
        with pytest.raises(TypeError):
            L.cumsum(np.ones(3, np.bool_))
        with pytest.raises(ValueError, match="k argument to top_k"):
            L.top_k(x, -1)
        with pytest.raises(ValueError, match="k argument to top_k"):
            L.top_k(x, 4)
    with pytest.raises(TypeError, match="at least one operand") as info:
        lax.sort(())
    assert "test_sorting.py" in str(info.value)


# ------------------------------------------------------------------------ ferrax.numpy

def _np_cases() -> list[tuple[str, Op, tuple[NDArray, ...]]]:
    rng = np.random.default_rng(3)
    x = values(rng, (4, 6), np.dtype(np.float32))
    ties = rng.integers(0, 3, (5, 4)).astype(np.int32)
    cases: list[tuple[str, Op, tuple[NDArray, ...]]] = []
    for axis in (-1, 0, None):
        for arr, name in ((x, "floats"), (ties, "ties")):
            for fname in ("sort", "argsort"):
                cases.append((f"{fname} {name} axis={axis}", via(fname, axis=axis), (arr,)))
                cases.append((f"{fname} {name} descending axis={axis}", via(fname, axis=axis, descending=True), (arr,)))
    cases.append(("argsort dtype", via("argsort", dtype=np.int16), (ties,)))
    cases.append(("lexsort", lambda M: lambda a, b: M.lexsort((a, b)), (ties, ties[::-1].copy())))
    cases.append(("lexsort floats", lambda M: lambda a, b: M.lexsort((a, b), axis=0), (x, np.round(x))))
    sorted_a = np.sort(values(rng, (9,), np.dtype(np.float32)))
    probes = values(rng, (3, 5), np.dtype(np.float32))
    for side in ("left", "right"):
        cases.append((f"searchsorted {side}", via("searchsorted", side=side), (sorted_a, probes)))
        cases.append((f"searchsorted ints {side}", via("searchsorted", side=side), (np.array([0, 1, 1, 3, 5], np.int32), ties)))
    sorter = np.argsort(x[0], kind="stable").astype(np.int32)
    cases.append(("searchsorted sorter", lambda M: lambda a, v, s: M.searchsorted(a, v, sorter=s), (x[0], probes, sorter)))
    nans = np.where(rng.random((3, 4)) < 0.3, np.nan, rng.standard_normal((3, 4))).astype(np.float32)
    small = rng.integers(-3, 4, (3, 4))
    for fname in ("cumsum", "cumprod", "nancumsum", "nancumprod"):
        for ax in (None, 0, 1, -1):
            cases.append((f"{fname} axis={ax}", via(fname, axis=ax), (nans,)))
        for dtype in (np.bool_, np.int8, np.uint8, np.int32):
            cases.append((f"{fname} {np.dtype(dtype).name}", via(fname, axis=1), (small.astype(dtype),)))
        cases.append((f"{fname} dtype=bool", via(fname, axis=0, dtype=bool), (small.astype(np.int32),)))
        cases.append((f"{fname} dtype=float16", via(fname, dtype=np.float16), (small.astype(np.int8),)))
    for fname in ("cumulative_sum", "cumulative_prod"):
        for initial in (False, True):
            cases.append((f"{fname} initial={initial}", via(fname, axis=1, include_initial=initial), (small.astype(np.int8),)))
            cases.append((f"{fname} 1d initial={initial}", via(fname, include_initial=initial), (nans[0],)))
    cases.append(("cumsum scalar", via("cumsum"), (np.asarray(2.0, np.float32),)))
    return cases


def test_numpy_functions_match_jax() -> None:
    cases = _np_cases()
    fns_fx = [op(fnp) for _, op, _ in cases]
    fns_jx = [op(jnp) for _, op, _ in cases]
    argss = [args for _, _, args in cases]
    theirs = jax.jit(lambda xs: [f(*a) for f, a in zip(fns_jx, xs)])(argss)
    staged = ferrax.jit(lambda xs: [f(*a) for f, a in zip(fns_fx, xs)])(argss)
    for (label, _, args), fn, s, j in zip(cases, fns_fx, staged, theirs, strict=True):
        e = fn(*args)
        assert bool(getattr(e, "weak_type", False)) == bool(j.weak_type), f"{label}: weak type"
        for got, how in ((np.asarray(e), "eager"), (np.asarray(s), "jit")):
            want = np.asarray(j)
            assert got.dtype == want.dtype and got.shape == want.shape, f"{label} ({how}): {got.dtype}{got.shape}, JAX's {want.dtype}{want.shape}"
            if got.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{label} ({how})")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{label} ({how})")


def test_numpy_errors_are_jaxs() -> None:
    x = np.ones((2, 3), np.float32)
    for N in (fnp, jnp):
        with pytest.raises(TypeError, match="kind"):
            N.sort(x, kind="stable")
        with pytest.raises(ValueError, match="1-dimensional"):
            N.searchsorted(x, x)
        with pytest.raises(ValueError):
            N.searchsorted(x[0], x, side="middle")
        with pytest.raises(ValueError):
            N.cumulative_sum(x)
    with pytest.raises(np.exceptions.AxisError):
        fnp.cumsum(x, axis=2)
