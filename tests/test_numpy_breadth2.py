"""``ferrax.numpy``'s further everyday names (``ferrax.numpy._breadth2`` and the modules
beside it) against jax.numpy 0.10.2: values, dtypes, weak types (both x64 modes) and
errors.

Each table of cases runs eagerly in ferrax (no compilation) against NumPy's values (or
JAX's layout written in NumPy where the two differ); the cases marked ``jit``, from every
table, run in one ``ferrax.jit`` against one ``jax.jit``; result types are compared with
JAX's by ``jax.eval_shape`` (nothing compiled) in both x64 modes; errors are compared
with JAX's eagerly. Functions whose output size depends on the data run eagerly without
``size=`` and under ``jit`` with it.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax.errors import ConcretizationError
from jax_harness import both_x64, outcome, type_of

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

NDArray = np.ndarray[Any, Any]
A = np.array


class Case(NamedTuple):
    label: str
    op: Callable[..., Any]  # op(M, *args) for M = ferrax.numpy or jax.numpy
    args: tuple[Any, ...] = ()
    ref: Callable[..., Any] | None = None  # NumPy's values: ref(*args); default op(np, *args)
    jit: bool = False  # also compared with JAX under jit (all marked cases in one: compiling costs)


def flat(out: Any) -> list[NDArray]:
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in flat(o)]
    return [np.asarray(out)]


def close(actual: NDArray, expected: NDArray, what: str, same_dtype: bool = True) -> None:
    """Equal shapes (and dtypes if ``same_dtype``), NaN where expected, values equal
    (floats within a few ulps of float32)."""
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    if same_dtype:
        assert actual.dtype == expected.dtype, f"{what}: {actual.dtype}, JAX's {expected.dtype}"
    if actual.dtype.kind in "biu" and expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    else:
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=2e-6, atol=1e-6, err_msg=what)


def sized(parts: Any, size: int, fill: Any = 0) -> tuple[NDArray, ...]:
    """NumPy's data-dependent result cut or padded to ``size`` (JAX's ``size=``)."""
    fills = fill if isinstance(fill, tuple) else (fill,) * len(parts)
    return tuple(np.concatenate([p[:size], np.full(max(size - len(p), 0), f, p.dtype)]) for p, f in zip(parts, fills))


def call_all(M: Any, cases: list[Case], xs: list[list[Any]]) -> list[Any]:
    """Each case's op with its array arguments from ``xs`` (traced under jit) and its
    scalars as they are (weak types kept)."""
    out = []
    for c, arrs in zip(cases, xs):
        it = iter(arrs)
        out.append(c.op(M, *[next(it) if isinstance(a, np.ndarray) else a for a in c.args]))
    return out


def check_table(cases: list[Case]) -> None:
    """Each case eagerly in ferrax against NumPy's values (the cases marked ``jit`` are
    compared with JAX under jit by :func:`test_jitted_cases_match_jax`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for c in cases:
            ours = flat(c.op(fnp, *c.args))
            expected = flat(c.ref(*c.args) if c.ref is not None else c.op(np, *c.args))
            assert len(ours) == len(expected), c.label
            for i, (o, e) in enumerate(zip(ours, expected)):
                close(o, e, f"{c.label}: eager output {i} vs NumPy", same_dtype=False)


def check_jitted(cases: list[Case]) -> None:
    """The cases in one ferrax.jit against the same in one jax.jit (values and dtypes):
    two compilations for the whole table."""
    arrays = [[a for a in c.args if isinstance(a, np.ndarray)] for c in cases]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = [flat(o) for o in jax.jit(lambda xs: call_all(jnp, cases, xs))(arrays)]
        staged = [flat(o) for o in ferrax.jit(lambda xs: call_all(fnp, cases, xs))(arrays)]
    for c, s, j in zip(cases, staged, theirs, strict=True):
        assert len(s) == len(j), c.label
        for i, (si, ji) in enumerate(zip(s, j)):
            close(si, ji, f"{c.label}: jit output {i}")


def check_types(cases: list[Case]) -> None:
    """ferrax's result types (eagerly) are JAX's (``eval_shape``), in both x64 modes."""
    for x64 in (False, True):
        with both_x64(x64):
            for c in cases:
                arrays = [a for a in c.args if isinstance(a, np.ndarray)]

                def traced(*arrs: Any, c: Case = c) -> Any:
                    it = iter(arrs)
                    return c.op(jnp, *[next(it) if isinstance(a, np.ndarray) else a for a in c.args])

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        result = jax.eval_shape(traced, *arrays)
                    except jax.errors.ConcretizationTypeError:
                        continue  # a size from the data (checked eagerly elsewhere)
                    theirs = [type_of(r) for r in jax.tree_util.tree_leaves(result)]
                ours = outcome(functools.partial(c.op, fnp, *c.args))
                assert ours == theirs, (c.label, x64, ours, theirs)


def check_errors(cases: list[Case]) -> None:
    """Each case raises in ferrax an instance of the exception class JAX raises."""
    for c in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                c.op(jnp, *c.args)
            except Exception as e:  # noqa: BLE001 - compared with ferrax's
                theirs: type[BaseException] = type(e)
            else:
                raise AssertionError(f"{c.label}: JAX raised nothing")
            with pytest.raises(theirs):
                c.op(fnp, *c.args)


# ------------------------------------------------------------------- group 1

RNG = np.random.default_rng(0)
F = np.round(RNG.standard_normal((3, 4)), 1).astype(np.float32)
F[0, 1] = 0.0
F[2, 3] = -0.0
I = RNG.integers(-3, 4, size=(3, 4)).astype(np.int32)
B = I > 0
SPECIAL = A([0.0, -0.0, 1.5, -3.25, 1e-30, -7e-20, np.inf, -np.inf, np.nan, 3e38, 1.0, 0.5], np.float32)  # no subnormals: XLA flushes them


def modf_ref(x: NDArray) -> tuple[NDArray, NDArray]:
    # JAX's modf: x - whole, so inf's fractional part is NaN (NumPy's is 0).
    whole = np.where(x >= 0, np.floor(x), np.ceil(x))
    return x - whole, whole


def group1_cases() -> list[Case]:
    return [
        Case("amax", lambda M, x: M.amax(x, axis=0), (F,)),
        Case("amin keepdims", lambda M, x: M.amin(x, axis=1, keepdims=True), (I,)),
        Case("ptp", lambda M, x: M.ptp(x, axis=1), (F,)),
        Case("ptp all", lambda M, x: M.ptp(x), (I,)),
        Case("nonzero size", lambda M, x: M.nonzero(x, size=5), (I,), lambda x: sized(np.nonzero(x), 5)),
        Case("nonzero size fill", lambda M, x: M.nonzero(x, size=14, fill_value=-1), (I,), lambda x: sized(np.nonzero(x), 14, -1), jit=True),
        Case("nonzero fill tuple", lambda M, x: M.nonzero(x, size=10, fill_value=(7, 8)), (B,), lambda x: sized(np.nonzero(x), 10, (7, 8))),
        Case("flatnonzero", lambda M, x: M.flatnonzero(x, size=6, fill_value=99), (F,), lambda x: sized((np.flatnonzero(x),), 6, 99)),
        Case("argwhere", lambda M, x: M.argwhere(x, size=9), (F,), lambda x: np.stack(sized(np.nonzero(x), 9), axis=1)),
        Case("argwhere 0d", lambda M, x: M.argwhere(x, size=1), (A(3.0, np.float32),), lambda x: np.zeros((1, 0))),
        Case("where one arg", lambda M, x: M.where(x, size=4, fill_value=-2), (I[0],), lambda x: sized(np.nonzero(x), 4, -2)),
        Case("where three", lambda M, c, x: M.where(c, x, 0.5), (B, F)),
        Case("extract", lambda M, c, x: M.extract(c, x, size=7), (B, F), lambda c, x: sized((np.extract(c, x),), 7)),
        Case("compress axis 1", lambda M, c, x: M.compress(c, x, axis=1, size=2, fill_value=9), (A([True, False, True, True]), I), lambda c, x: np.compress(c, x, axis=1)[:, :2]),
        Case("compress none", lambda M, c, x: M.compress(c, x, size=3), (A([1, 0, 1, 1, 0]), F), lambda c, x: np.compress(c, x)),
        Case("append", lambda M, x, y: M.append(x, y), (F, I)),
        Case("append axis", lambda M, x, y: M.append(x, y, axis=0), (F, F[:1])),
        Case("insert scalar", lambda M, x: M.insert(x, 2, 5.5), (F[0],)),
        Case("insert array", lambda M, x, i, v: M.insert(x, i, v), (I[0], A([0, 2, -1]), A([7, 8, 9], np.int32)), jit=True),
        Case("insert slice axis", lambda M, x: M.insert(x, slice(0, 3, 2), 1, axis=1), (I,)),
        Case("insert scalar axis 0", lambda M, x, v: M.insert(x, 1, v, axis=0), (F, A([1.0, 2.0, 3.0, 4.0], np.float32))),
        Case("delete int", lambda M, x: M.delete(x, -1, axis=1), (F,)),
        Case("delete slice", lambda M, x: M.delete(x, slice(None, None, 2)), (I,)),
        Case("delete unique", lambda M, x, i: M.delete(x, i, axis=1, assume_unique_indices=True), (F, A([3, 0])), lambda x, i: np.delete(x, i, axis=1)),
        Case("concat", lambda M, x, y: M.concat([x, y], axis=1), (F, I)),
        Case("concat none", lambda M, x, y: M.concat([x, y], axis=None), (F, I)),
        Case("permute_dims", lambda M, x: M.permute_dims(x, (1, 0)), (F,)),
        Case("matrix_transpose", lambda M, x: M.matrix_transpose(x), (RNG.standard_normal((2, 3, 4)).astype(np.float32),)),
        Case("unstack", lambda M, x: M.unstack(x, axis=1), (F,)),
        Case("broadcast_arrays", lambda M, x, y: M.broadcast_arrays(x, y[:, None], 2.0), (F[0], I[:, 0])),
        Case("copy", lambda M, x: M.copy(x), (F,)),
        Case("reciprocal", lambda M, x: M.reciprocal(x), (SPECIAL,)),
        Case("reciprocal int", lambda M, x: M.reciprocal(x), (A([1, 2, 4], np.int32),), lambda x: 1 / x),
        Case("signbit", lambda M, x: M.signbit(x), (SPECIAL,)),
        Case("signbit int", lambda M, x: M.signbit(x), (I,)),
        Case("signbit bool", lambda M, x: M.signbit(x), (B,)),
        Case("copysign", lambda M, x, y: M.copysign(x, y), (SPECIAL, SPECIAL[::-1].copy())),
        Case("copysign scalar", lambda M, x: M.copysign(2, x), (I,)),
        Case("fabs", lambda M, x: M.fabs(x), (I,)),
        Case("fmax", lambda M, x, y: M.fmax(x, y), (SPECIAL, SPECIAL[::-1].copy())),
        Case("fmin", lambda M, x, y: M.fmin(x, y), (SPECIAL, SPECIAL[::-1].copy())),
        Case("fmax ints", lambda M, x, y: M.fmax(x, y), (I, I.T.reshape(3, 4).copy())),
        Case("float_power", lambda M, x: M.float_power(x, 2), (I,)),
        Case("float_power float", lambda M, x: M.float_power(2.0, x), (F,)),
        Case("frexp", lambda M, x: M.frexp(x), (SPECIAL,), jit=True),
        Case("frexp int", lambda M, x: M.frexp(x), (I,)),
        Case("ldexp", lambda M, x, e: M.ldexp(x, e), (SPECIAL, A([1, -2, 3, 200, 5, -10, 2, 2, 1, 1, -160, 128], np.int32)), jit=True),
        Case("modf", lambda M, x: M.modf(x), (SPECIAL,), modf_ref),
        Case("gcd", lambda M, x, y: M.gcd(x, y), (A([12, 0, -9, 7, 0], np.int32), A([18, 5, 6, -14, 0], np.int32)), jit=True),
        Case("lcm", lambda M, x, y: M.lcm(x, y), (A([4, 0, -6, 7, 0], np.int32), A([6, 3, 4, 5, 0], np.int32))),
        Case("gcd broadcast", lambda M, x: M.gcd(x, 6), (I,)),
        Case("sinc", lambda M, x: M.sinc(x), (A([0.0, 0.5, 1.0, -2.5, 1e-8], np.float32),), jit=True),
        Case("spacing", lambda M, x: M.spacing(x), (SPECIAL,), jit=True),
        Case("spacing float16", lambda M, x: M.spacing(x), (A([0.0, 1.0, -1.0, 65504.0, -2.0, np.nan], np.float16),),
             lambda x: np.nextafter(x, np.float16(np.inf)) - x, jit=True),  # JAX: towards +inf (NumPy: away from 0)
        Case("deg2rad", lambda M, x: M.deg2rad(x), (F,)),
        Case("rad2deg", lambda M, x: M.rad2deg(x), (I,)),
        Case("radians", lambda M, x: M.radians(x), (F,)),
        Case("degrees", lambda M, x: M.degrees(x), (F,)),
    ]


def test_group1_values_match_numpy_eagerly() -> None:
    check_table(group1_cases())


def group1_type_cases() -> list[Case]:
    # Python scalars and narrow dtypes: the weak types and dtypes of JAX's promotion.
    h = A([1.5, -2.0], np.float16)
    i8 = A([3, -4], np.int8)
    return [
        *group1_cases(),
        *(Case(f"{n} python float", lambda M, n=n: getattr(M, n)(2.5)) for n in
          ("reciprocal", "signbit", "fabs", "sinc", "deg2rad", "rad2deg", "frexp", "modf", "spacing")),
        *(Case(f"{n} int8", lambda M, x, n=n: getattr(M, n)(x), (i8,)) for n in
          ("reciprocal", "signbit", "fabs", "sinc", "radians", "frexp", "modf", "amax", "ptp", "spacing")),
        *(Case(f"{n} float16", lambda M, x, n=n: getattr(M, n)(x), (h,)) for n in
          ("reciprocal", "signbit", "fabs", "sinc", "degrees", "frexp", "modf")),
        Case("copysign weak", lambda M: M.copysign(2.0, -1)),
        Case("copysign f16", lambda M, x: M.copysign(x, 1.0), (h,)),
        Case("fmax weak", lambda M, x: M.fmax(x, 1.0), (h,)),
        Case("fmin weak scalars", lambda M: M.fmin(1.0, 2)),
        Case("float_power int8", lambda M, x: M.float_power(x, 2), (i8,)),
        Case("float_power weak", lambda M: M.float_power(2, 3)),
        Case("ldexp f16", lambda M, x: M.ldexp(x, 3), (h,)),
        Case("ldexp weak", lambda M: M.ldexp(1.5, 3)),
        Case("gcd int8", lambda M, x: M.gcd(x, 2), (i8,)),
        Case("lcm weak", lambda M: M.lcm(4, 6)),
        Case("ptp weak", lambda M: M.ptp(3.0)),
        Case("append weak", lambda M: M.append(1.0, 2.0)),
        Case("insert weak", lambda M, x: M.insert(x, 0, 1.0), (h,)),
        Case("where weak", lambda M, c: M.where(c, 1.0, 2), (B,)),
        Case("nonzero int64 in", lambda M: M.nonzero(np.arange(4, dtype=np.int64), size=2)),
        Case("broadcast weak", lambda M: M.broadcast_arrays(1.0, A([1, 2], np.int8))),
        Case("unstack weak", lambda M: M.unstack(M.asarray([1.0, 2.0]))),
    ]


def test_group1_types_match_jax_in_both_x64_modes() -> None:
    check_types(group1_type_cases())


def test_group1_errors_match_jax() -> None:
    check_errors([
        Case("nonzero 0d", lambda M: M.nonzero(A(1.0))),
        Case("nonzero fill shape", lambda M: M.nonzero(A([1, 0]), size=3, fill_value=A([1, 2]))),
        Case("where one of x y", lambda M: M.where(A([True]), A([1.0]))),
        Case("where three size", lambda M: M.where(A([True]), 1, 2, size=3)),
        Case("compress 2d condition", lambda M: M.compress(A([[True]]), A([1, 2]))),
        Case("compress out of bounds", lambda M: M.compress(A([True, False, True]), A([1, 2]))),
        Case("compress size too big", lambda M: M.compress(A([True, False]), A([1, 2]), size=3)),
        Case("compress list", lambda M: M.compress([True, False], A([1, 2]))),
        Case("insert 2d obj", lambda M: M.insert(A([1, 2]), A([[0]]), 3)),
        Case("insert float obj", lambda M: M.insert(A([1, 2]), A([0.5]), 3)),
        Case("insert list", lambda M: M.insert(A([1, 2]), [0], 3)),
        Case("delete float obj", lambda M: M.delete(A([1, 2]), A([0.5]))),
        Case("delete bool shape", lambda M: M.delete(A([1, 2]), A([True]))),
        Case("delete out of range", lambda M: M.delete(A([1, 2]), 5)),
        Case("matrix_transpose 1d", lambda M: M.matrix_transpose(A([1, 2]))),
        Case("unstack 0d", lambda M: M.unstack(A(1))),
        Case("ldexp float exponent", lambda M: M.ldexp(A([1.0]), A([2.0]))),
        Case("gcd floats", lambda M: M.gcd(A([1.0]), A([2.0]))),
        Case("lcm floats", lambda M: M.lcm(1.0, 2)),
        Case("ptp out", lambda M: M.ptp(A([1.0]), out=A([0.0]))),
        Case("modf out", lambda M: M.modf(A([1.0]), out=A([0.0]))),
        Case("broadcast_arrays", lambda M: M.broadcast_arrays(A([1, 2]), A([1, 2, 3]))),
    ])


def test_data_dependent_sizes_eagerly_and_their_concretization_errors_under_jit() -> None:
    # Eagerly the sizes come from the data: NumPy's values, JAX's index dtype.
    for x in (F, I, B, A([0, 0]), np.zeros((2, 0), np.float32)):
        for name in ("nonzero", "argwhere", "flatnonzero", "where"):
            ours, expected = flat(getattr(fnp, name)(x)), flat(getattr(np, name)(x))
            assert len(ours) == len(expected), name
            for o, e in zip(ours, expected):
                assert o.dtype == np.int32, name
                close(o, e, f"{name} {x.dtype}{x.shape}", same_dtype=False)
    for x64 in (False, True):
        with both_x64(x64):
            index = np.dtype(np.int64 if x64 else np.int32)
            assert fnp.bincount(A([0, 3])).dtype == index and fnp.bincount(A([0, 3]), A([1.0, 2.0])).dtype == index.str.replace("i", "f")
            assert fnp.trim_zeros(A([0, 1, 0], np.int8)).dtype == np.int8
            assert fnp.choose(A([0, 1]), [A([1, 2], np.int8), 3]).dtype == np.int8
    close(np.asarray(fnp.argwhere(A(3.0))), np.zeros((1, 0), np.int32), "argwhere 0d")
    close(np.asarray(fnp.argwhere(A(0.0))), np.zeros((0, 0), np.int32), "argwhere 0d false")
    close(np.asarray(fnp.extract(B, F)), np.extract(B, F), "extract")
    close(np.asarray(fnp.compress(A([True, False, True]), F, axis=0)), np.compress(A([True, False, True]), F, axis=0), "compress")
    close(np.asarray(fnp.delete(F, A([0, 0, 2]), axis=1)), np.delete(F, A([0, 0, 2]), axis=1), "delete repeated")
    close(np.asarray(fnp.delete(F, A([True, False, True]), axis=0)), np.delete(F, A([True, False, True]), axis=0), "delete mask")
    for f in (fnp.nonzero, fnp.argwhere, fnp.flatnonzero, fnp.where, lambda x: fnp.extract(x, x), lambda x: fnp.compress(x, x)):
        with pytest.raises(ConcretizationError, match="size argument"):
            ferrax.jit(f)(I[0])
    with pytest.raises(ConcretizationError):
        ferrax.jit(lambda i: fnp.delete(F, i, axis=1))(A([0, 1]))
    assert fnp.ndim(F) == 2 and fnp.shape(F) == (3, 4) and fnp.size(F) == 12 and fnp.size(F, 1) == 4
    assert fnp.ndim(fnp.asarray(F)) == jnp.ndim(F) and fnp.shape(1.0) == ()
    for v in (1, 2.5, np.float32(1), A(1.0), A([1.0]), [1], "a", None):
        assert fnp.isscalar(v) == jnp.isscalar(v), v
    assert fnp.isscalar(fnp.asarray(1.0)) and not fnp.isscalar(fnp.asarray([1.0]))


def test_group1_gradients_match_jax() -> None:
    x = A([0.0, 0.5, -1.25, 3.0], np.float32)
    names = ("sinc", "fabs", "reciprocal", "deg2rad")

    def grads(M: Any, vmap: Any, grad: Any, v: Any) -> list[Any]:
        out = [vmap(grad(getattr(M, n)))(v) for n in names]
        return [*out, vmap(grad(lambda u: M.frexp(u)[0]))(v[1:])]

    ours = grads(fnp, ferrax.vmap, ferrax.grad, x)  # eagerly
    theirs = jax.jit(lambda v: grads(jnp, jax.vmap, jax.grad, v))(x)
    for name, o, t in zip([*names, "frexp"], ours, theirs, strict=True):
        close(np.asarray(o), np.asarray(t), f"grad {name}")


# ------------------------------------------------------------------- group 2

F2 = np.round(np.random.default_rng(0).standard_normal((3, 4)), 1).astype(np.float32)
I2 = np.random.default_rng(1).integers(0, 5, size=(3, 4)).astype(np.int32)
BITS = A([[1, 0, 1, 1, 0, 0, 1, 0, 3, 1], [0, 0, 0, 1, -1, 1, 0, 1, 0, 0]], np.int8)
V2 = np.round(np.random.default_rng(2).standard_normal(7), 2).astype(np.float32)


def vmap_of(M: Any) -> Any:
    """The library's vmap (NumPy's reference loops by hand)."""
    return ferrax.vmap if M is fnp else jax.vmap


def put_ref(a: NDArray, ind: NDArray, v: NDArray) -> NDArray:
    out = a.copy()
    np.put(out, ind, v)
    return out


def along_ref(a: NDArray, ind: NDArray, v: Any, axis: int | None) -> NDArray:
    out = a.copy()
    np.put_along_axis(out, ind, v, axis)
    return out


def place_ref(a: NDArray, mask: NDArray, v: NDArray) -> NDArray:
    out = a.copy()
    np.place(out, mask, v)
    return out


def partition_ref(x: NDArray, k: int) -> NDArray:
    # JAX's layout: the k+1 smallest ascending, then the rest descending (two top_k).
    s = np.sort(x, axis=-1)
    return np.concatenate([s[..., : k + 1], s[..., k + 1 :][..., ::-1]], axis=-1)


def argpartition_ref(x: NDArray, k: int) -> NDArray:
    # Distinct values: the k+1 smallest's positions ascending by value, then the other
    # positions in index order (top_k of a 0/1 proxy keeps ties in order).
    def row(v: NDArray) -> NDArray:
        bottom = np.argsort(v, kind="stable")[: k + 1]
        return np.concatenate([bottom, np.setdiff1d(np.arange(v.shape[0]), bottom)])

    return np.apply_along_axis(row, -1, x)


def group2_cases() -> list[Case]:
    return [
        Case("bincount", lambda M: M.bincount(A([0,1,1,3,2,1]))),
        Case("bincount w", lambda M: M.bincount(A([0,1,1,3]), A([0.5,1.,2.,1.],np.float32), length=6), ref=lambda: np.bincount(A([0, 1, 1, 3]), A([0.5, 1.0, 2.0, 1.0]), minlength=6)),
        Case("bincount minlength", lambda M: M.bincount(A([0,1,1,3]), minlength=7)),
        Case("digitize", lambda M: M.digitize(V2, A([-1.,0.,0.5,1.],np.float32))),
        Case("digitize right dec", lambda M: M.digitize(V2, A([1.,0.5,0.,-1.],np.float32), right=True)),
        Case("hbe", lambda M: M.histogram_bin_edges(V2, 5)),
        Case("hist", lambda M: M.histogram(V2, 4)),
        Case("hist range w dens", lambda M: M.histogram(V2, 3, range=(-1, 1), weights=np.abs(V2), density=True)),
        Case("hist int", lambda M: M.histogram(I2)),
        Case("hist2d", lambda M: M.histogram2d(V2, V2[::-1].copy(), bins=3)),
        Case("histdd", lambda M: M.histogramdd(F2, bins=(2,3,2,2)), jit=True),
        Case("histdd dens", lambda M: M.histogramdd(F2[:, :2], bins=2, density=True)),
        Case("cov", lambda M: M.cov(F2)),
        Case("cov y rowvar", lambda M: M.cov(F2, F2[::-1].copy(), rowvar=False)),
        Case("cov weights", lambda M: M.cov(F2, fweights=A([1,2,1,3]), aweights=A([0.5,1.,1.,2.],np.float32)), jit=True),
        Case("cov 1d bias", lambda M: M.cov(V2, bias=True)),
        Case("cov int", lambda M: M.cov(I2, ddof=0)),
        Case("corrcoef", lambda M: M.corrcoef(F2)),
        Case("corrcoef 1d", lambda M: M.corrcoef(V2)),
        Case("cross", lambda M: M.cross(F2[:, :3], F2[:, 1:])),
        Case("cross 2", lambda M: M.cross(F2[:, :2], F2[:, 1:3])),
        Case("cross 2-3", lambda M: M.cross(F2[:, :2], F2[:, 1:])),
        Case("cross axis", lambda M: M.cross(F2[:, :3].T.copy(), F2[:, 1:].T.copy(), axis=0)),
        Case("vdot", lambda M: M.vdot(F2, I2)),
        Case("vecdot", lambda M: M.vecdot(F2, F2[0])),
        Case("vecdot axis", lambda M: M.vecdot(F2, I2, axis=0)),
        Case("matvec", lambda M: M.matvec(F2, F2[0])),
        Case("vecmat", lambda M: M.vecmat(F2[:, 0], F2)),
        Case("trapezoid", lambda M: M.trapezoid(F2)),
        Case("trapezoid x", lambda M: M.trapezoid(F2, A([0,1,3,4.],np.float32))),
        Case("trapezoid dx axis", lambda M: M.trapezoid(I2, dx=0.5, axis=0)),
        Case("gradient", lambda M: M.gradient(V2)),
        Case("gradient 2d", lambda M: M.gradient(F2)),
        Case("gradient h", lambda M: M.gradient(F2, 2.0, axis=1)),
        Case("gradient coords", lambda M: M.gradient(V2, A([0,1,3,4,7,8,10.],np.float32)), jit=True),
        Case("ediff1d", lambda M: M.ediff1d(F2, to_begin=A([9]), to_end=A([1.5,2.5]))),
        Case("unwrap", lambda M: M.unwrap(A([0, 3, 6.5, 1, -5, 4],np.float32)), jit=True),
        Case("unwrap int", lambda M: M.unwrap(A([0, 3, 7, 1, 8]), period=6)),
        Case("unwrap discont", lambda M: M.unwrap(F2, discont=1.0, axis=0)),
        Case("rot90", lambda M: M.rot90(F2)),
        Case("rot90 k", lambda M: M.rot90(F2, 3)),
        Case("rot90 2", lambda M: M.rot90(F2, -2, axes=(1, 0))),
        Case("rollaxis", lambda M: M.rollaxis(np.zeros((2,3,4,5)), 3, 1)),
        Case("rollaxis neg", lambda M: M.rollaxis(np.zeros((2,3,4,5)), 0, -1)),
        Case("resize", lambda M: M.resize(V2, (3, 4))),
        Case("resize 0", lambda M: M.resize(V2, 0)),
        Case("trim_zeros", lambda M: M.trim_zeros(A([0,0,1,2,0,3,0]))),
        Case("trim_zeros f", lambda M: M.trim_zeros(A([0,0,1,2,0,3,0]), 'f')),
        Case("hsplit", lambda M: M.hsplit(F2, 2)),
        Case("vsplit", lambda M: M.vsplit(F2, A([1]))),
        Case("dsplit", lambda M: M.dsplit(np.arange(8.).reshape(2,2,2), 2)),
        Case("block", lambda M: M.block([[F2, I2], [I2, F2]])),
        Case("block 1d", lambda M: M.block([V2, 1.0, A([2,3])])),
        Case("block deep", lambda M: M.block([[[F2]], [[F2]]])),
        Case("choose", lambda M: M.choose(A([0,1,2,1]), [A([1,2,3,4]), A([10,20,30,40]), 5])),
        Case("choose wrap", lambda M: M.choose(A([[0,4],[-1,1]]), [F2[:2,:2], I2[:2,:2]], mode='wrap'), jit=True),
        Case("choose clip", lambda M: M.choose(A([0,4,-1]), [A([1.,2,3]), A([4.,5,6])], mode='clip')),
        Case("put", lambda M: M.put(F2, A([0, 5, 11]), A([9., 8.],np.float32), inplace=False), ref=lambda: put_ref(F2, A([0, 5, 11]), A([9.0, 8.0]))),
        Case("put wrap", lambda M: M.put(I2, A([-1, 13]), 7, mode='wrap', inplace=False), ref=lambda: put_ref(I2, A([-1, 13]) % 12, A([7]))),
        Case("put clip", lambda M: M.put(I2, A([-1, 13]), A([1,2]), mode='clip', inplace=False), ref=lambda: put_ref(I2, A([0, 11]), A([1, 2]))),
        Case("put_along_axis", lambda M: M.put_along_axis(F2, A([[0],[1],[3]]), 99., axis=1, inplace=False), ref=lambda: along_ref(F2, A([[0], [1], [3]]), 99.0, 1), jit=True),
        Case("put_along_axis 0", lambda M: M.put_along_axis(I2, A([[2,0,1,0]]), A([[5,6,7,8]]), axis=0, inplace=False), ref=lambda: along_ref(I2, A([[2, 0, 1, 0]]), A([[5, 6, 7, 8]]), 0)),
        Case("put_along_axis none", lambda M: M.put_along_axis(I2, A([0, 5]), 7, axis=None, inplace=False), ref=lambda: along_ref(I2, A([0, 5]), 7, None)),
        Case("place", lambda M: M.place(F2, F2 > 0, A([1., 2.],np.float32), inplace=False), ref=lambda: place_ref(F2, F2 > 0, A([1.0, 2.0], np.float32))),
        Case("diagflat", lambda M: M.diagflat(A([[1,2],[3,4]]))),
        Case("diagflat k", lambda M: M.diagflat(V2[:3], -2)),
        Case("diagflat k+", lambda M: M.diagflat(V2[:3], 1)),
        Case("vander", lambda M: M.vander(V2[:4])),
        Case("vander N inc", lambda M: M.vander(A([1,2,3]), 5, increasing=True)),
        Case("geomspace", lambda M: M.geomspace(1, 1000, 4)),
        Case("geomspace neg", lambda M: M.geomspace(-1., -16., 5, endpoint=False)),
        Case("geomspace arr", lambda M: M.geomspace(A([1.,2.]), A([8., 32.]), 3, axis=1)),
        Case("geomspace int", lambda M: M.geomspace(1, 256, 9, dtype=np.int32), ref=lambda: 2 ** np.arange(9)),  # NumPy: 7, 63, 127 (its float error truncated)
        Case("fromfunction", lambda M: M.fromfunction(lambda i, j: i * 10 + j, (3, 4))),
        Case("fromfunction int", lambda M: M.fromfunction(lambda i, j: i - j, (2, 3), dtype=int)),
        Case("apply_along_axis", lambda M: M.apply_along_axis(lambda v: v.sum() * v[0], 1, F2), jit=True),
        Case("apply_along_axis 0", lambda M: M.apply_along_axis(lambda v: v[::-1] * 2, 0, np.arange(24.).reshape(2,3,4))),
        Case("apply_over_axes", lambda M: M.apply_over_axes(M.sum, np.arange(24.).reshape(2,3,4), [0, 2])),
        Case("vectorize", lambda M: M.vectorize(lambda a, b: a * b + 1)(F2, V2[:4])),
        Case("vectorize sig", lambda M: M.vectorize(lambda a: a.sum(), signature="(n)->()")(F2)),
        Case("vectorize sig2", lambda M: M.vectorize(lambda a, b: a @ b, signature="(n,m),(m)->(n)")(np.ones((2,3,4)), np.ones(4)), jit=True),
        Case("vectorize excluded", lambda M: M.vectorize(lambda a, p: a ** p, excluded={1})(F2, 2)),
        Case("partition", lambda M: M.partition(V2, 3), ref=lambda: partition_ref(V2, 3)),
        Case("partition axis", lambda M: M.partition(F2, 1, axis=0), ref=lambda: np.moveaxis(partition_ref(np.moveaxis(F2, 0, -1), 1), -1, 0)),
        Case("partition uint", lambda M: M.partition(I2.astype(np.uint8), 2), ref=lambda: partition_ref(I2.astype(np.uint8), 2)),
        Case("argpartition", lambda M: M.argpartition(V2, 2), ref=lambda: argpartition_ref(V2, 2)),
        Case("vmap nonzero", lambda M, x: vmap_of(M)(lambda r: M.nonzero(r > 0, size=3, fill_value=-1)[0])(x), (F2,),
             ref=lambda x: np.stack([sized(np.nonzero(r > 0), 3, -1)[0] for r in x]), jit=True),
        Case("vmap gcd", lambda M, x: vmap_of(M)(lambda r: M.gcd(r, 6))(x), (I2,), ref=lambda x: np.gcd(x, 6), jit=True),
        Case("packbits", lambda M: M.packbits(BITS)),
        Case("packbits axis little", lambda M: M.packbits(BITS, axis=1, bitorder="little")),
        Case("packbits bool axis 0", lambda M: M.packbits(BITS > 0, axis=0)),
        Case("unpackbits", lambda M: M.unpackbits(A([7, 200, 3], np.uint8))),
        Case("unpackbits axis count", lambda M: M.unpackbits(A([[7, 200], [1, 2]], np.uint8), axis=0, count=5, bitorder="little")),
        Case("unpackbits pad", lambda M: M.unpackbits(A([7, 200], np.uint8), count=20)),
        Case("argpartition axis", lambda M: M.argpartition(F2, 0, axis=0), ref=lambda: np.moveaxis(argpartition_ref(np.moveaxis(F2, 0, -1), 0), -1, 0)),
    ]


def test_group2_values_match_numpy_eagerly() -> None:
    check_table(group2_cases())


def test_group2_types_match_jax_in_both_x64_modes() -> None:
    extra = [
        Case("histogram weak", lambda M: M.histogram(A([1, 2, 3]), 2, weights=A([1, 2, 3]))),
        Case("cov f16", lambda M: M.cov(A([[1, 2, 4]], np.float16))),
        Case("trapezoid weak", lambda M: M.trapezoid(A([1, 2, 3], np.int8), dx=2)),
        Case("geomspace weak", lambda M: M.geomspace(1.0, 8.0, 4)),
        Case("vander int8", lambda M: M.vander(A([1, 2], np.int8))),
        Case("unwrap weak", lambda M: M.unwrap(A([0.0, 7.0], np.float16))),
        Case("choose weak", lambda M: M.choose(A([0, 1]), [1.0, A([2, 3], np.int8)], mode="clip")),
        Case("bincount bool", lambda M: M.bincount(A([True, False, True]), length=3)),
        Case("digitize int64", lambda M: M.digitize(np.arange(3, dtype=np.int64), A([0.5, 1.5]))),
        Case("vdot weak", lambda M: M.vdot(1.0, 2)),
        Case("gradient f16", lambda M: M.gradient(A([1, 2, 4], np.float16))),
        Case("ediff1d to_begin", lambda M: M.ediff1d(A([1, 2, 4], np.int8), to_begin=300)),
    ]
    check_types(group2_cases() + extra)


def fill_ref(a: NDArray, v: Any) -> NDArray:
    out = a.copy()
    np.fill_diagonal(out, v)
    return out


def index_trick_cases() -> list[Case]:
    return [
        Case("mgrid", lambda M: M.mgrid[0:3, 0:4:2]),
        Case("mgrid complex step", lambda M: M.mgrid[0:1:5j]),
        Case("mgrid mixed", lambda M: M.mgrid[0:1:3j, 0:3]),
        Case("ogrid", lambda M: M.ogrid[0:3, 1:4]),
        Case("r_", lambda M: M.r_[1:4, 0, A([7, 8])]),
        Case("r_ float", lambda M: M.r_[A([1.5]), 2, 0:1:3j]),
        Case("r_ ndmin", lambda M: M.r_["0,2", A([1, 2]), A([3, 4])]),
        Case("r_ trans1d", lambda M: M.r_["1,2,0", A([1, 2]), A([3, 4])]),
        Case("r_ row", lambda M: M.r_["r", A([1, 2]), A([3, 4])]),
        Case("c_", lambda M: M.c_[A([1, 2]), A([3.0, 4.0], np.float32)]),
        Case("c_ 2d", lambda M: M.c_[A([[1, 2]]), A([[3, 4]]), 5, 6]),
        Case("ix_", lambda M: M.ix_(A([0, 2]), A([1, 2, 3], np.int8))),
        Case("indices", lambda M: M.indices((2, 3))),
        Case("indices sparse", lambda M: M.indices((2, 3), dtype=np.int8, sparse=True)),
        Case("diag_indices", lambda M: M.diag_indices(3, 3)),
        Case("diag_indices_from", lambda M: M.diag_indices_from(np.ones((2, 2)))),
        Case("tril_indices", lambda M: M.tril_indices(4, 1, 3)),
        Case("triu_indices", lambda M: M.triu_indices(3, -1, 5)),
        Case("tril_indices_from", lambda M: M.tril_indices_from(np.ones((3, 5)), -1)),
        Case("triu_indices_from", lambda M: M.triu_indices_from(np.ones((4, 2)))),
        Case("mask_indices", lambda M: M.mask_indices(3, M.triu, 1)),
        Case("ravel_multi_index", lambda M: M.ravel_multi_index((A([0, 1, 2]), A([3, 0, 1])), (3, 4))),
        Case("ravel_multi_index wrap F", lambda M: M.ravel_multi_index((A([0, 5, 2]), A([3, 0, -1])), (3, 4), mode="wrap", order="F")),
        Case("ravel_multi_index clip", lambda M: M.ravel_multi_index((A([0, 5, -2]), A([3, 0, 9])), (3, 4), mode="clip")),
        Case("unravel_index", lambda M: M.unravel_index(A([0, 5, 11]), (3, 4))),
        Case("unravel_index scalar", lambda M: M.unravel_index(7, (3, 4))),
        Case("fill_diagonal", lambda M: M.fill_diagonal(np.zeros((3, 4), np.float32), A([1, 2]), inplace=False), ref=lambda: fill_ref(np.zeros((3, 4)), A([1, 2]))),
        Case("fill_diagonal 3d", lambda M: M.fill_diagonal(np.zeros((3, 3, 3), np.int32), 5, inplace=False), ref=lambda: fill_ref(np.zeros((3, 3, 3)), 5)),
    ]


def test_index_tricks_match_numpy_and_jax_types() -> None:
    cases = index_trick_cases()
    check_table(cases)
    # Out of range, JAX clips (NumPy raises); from -12 up, negative indices count from the end.
    rows, cols = fnp.unravel_index(A([13, -3, -1, -12, -13]), (3, 4))
    close(np.asarray(rows), A([2, 2, 2, 0, 0], np.int32), "unravel_index clipped rows")
    close(np.asarray(cols), A([3, 1, 3, 0, 0], np.int32), "unravel_index clipped columns")
    check_types(cases)
    assert fnp.s_[1:2, ::3] == (slice(1, 2), slice(None, None, 3)) and fnp.index_exp[1] == (1,)


def test_group2_errors_match_jax() -> None:
    check_errors([
        Case("bincount float", lambda M: M.bincount(A([1.0]))),
        Case("bincount 2d", lambda M: M.bincount(A([[1]]))),
        Case("bincount weights", lambda M: M.bincount(A([1, 2]), A([1.0]))),
        Case("digitize 2d bins", lambda M: M.digitize(A([1.0]), A([[1.0]]))),
        Case("histogram weights", lambda M: M.histogram(A([1.0, 2.0]), weights=A([1.0]))),
        Case("histogram range", lambda M: M.histogram(A([1.0, 2.0]), range=(0.0, 1.0, 2.0))),
        Case("histogramdd bins", lambda M: M.histogramdd(np.ones((3, 2)), bins=[2, 3, 4])),
        Case("cov 3d", lambda M: M.cov(np.ones((2, 2, 2)))),
        Case("cov fweights float", lambda M: M.cov(np.ones((2, 3)), fweights=A([1.0, 2.0, 3.0]))),
        Case("cov fweights count", lambda M: M.cov(np.ones((2, 3)), fweights=A([1, 2]))),
        Case("cross dims", lambda M: M.cross(A([1.0, 2.0, 3.0, 4.0]), A([1.0, 2.0, 3.0, 4.0]))),
        Case("vecdot axes", lambda M: M.vecdot(np.ones(3), np.ones(4))),
        Case("gradient small", lambda M: M.gradient(A([1.0]))),
        Case("gradient spacing count", lambda M: M.gradient(np.ones((3, 3)), 1.0, 2.0, 3.0)),
        Case("gradient edge_order", lambda M: M.gradient(np.ones(3), edge_order=1)),
        Case("rot90 1d", lambda M: M.rot90(np.ones(3))),
        Case("rot90 same axes", lambda M: M.rot90(np.ones((2, 2)), axes=(1, 1))),
        Case("rollaxis start", lambda M: M.rollaxis(np.ones((2, 2)), 0, 5)),
        Case("resize negative", lambda M: M.resize(np.ones(3), (-1, 2))),
        Case("vsplit 0d", lambda M: M.vsplit(A(1.0), 2)),
        Case("dsplit 2d", lambda M: M.dsplit(np.ones((2, 2)), 2)),
        Case("block tuple", lambda M: M.block((np.ones(2), np.ones(2)))),
        Case("block empty", lambda M: M.block([])),
        Case("block depths", lambda M: M.block([[np.ones(2)], np.ones(2)])),
        Case("choose float", lambda M: M.choose(A([0.0]), [A([1])])),
        Case("choose range", lambda M: M.choose(A([2]), [A([1]), A([2])])),
        Case("choose mode", lambda M: M.choose(A([0]), [A([1])], mode="bad")),
        Case("put inplace", lambda M: M.put(np.ones(3), A([0]), 1.0)),
        Case("put raise", lambda M: M.put(np.ones(3), A([0]), 1.0, mode="raise", inplace=False)),
        Case("put_along_axis inplace", lambda M: M.put_along_axis(np.ones(3), A([0]), 1.0, axis=0)),
        Case("put_along_axis ndim", lambda M: M.put_along_axis(np.ones((3, 3)), A([0]), 1.0, axis=0, inplace=False)),
        Case("place sizes", lambda M: M.place(np.ones(3), A([True]), A([1.0]), inplace=False)),
        Case("place empty vals", lambda M: M.place(np.ones(2), A([True, False]), np.ones(0), inplace=False)),
        Case("vander 2d", lambda M: M.vander(np.ones((2, 2)))),
        Case("vander N", lambda M: M.vander(np.ones(2), -1)),
        Case("ix_ 2d", lambda M: M.ix_(np.ones((2, 2), np.int32))),
        Case("ix_ bool", lambda M: M.ix_(A([True, False]))),
        Case("diag_indices negative", lambda M: M.diag_indices(-1)),
        Case("tril_indices_from 1d", lambda M: M.tril_indices_from(np.ones(3))),
        Case("ravel_multi_index range", lambda M: M.ravel_multi_index((A([3]), A([0])), (3, 4))),
        Case("ravel_multi_index float", lambda M: M.ravel_multi_index((A([1.0]), A([0])), (3, 4), mode="clip")),
        Case("ravel_multi_index mode", lambda M: M.ravel_multi_index((A([1]), A([0])), (3, 4), mode="bad")),
        Case("fill_diagonal inplace", lambda M: M.fill_diagonal(np.ones((2, 2)), 0.0)),
        Case("fill_diagonal shape", lambda M: M.fill_diagonal(np.ones((2, 3, 2)), 0.0, inplace=False)),
        Case("r_ directive", lambda M: M.r_["x", A([1])]),
        Case("packbits float", lambda M: M.packbits(A([1.0]))),
        Case("vectorize excluded", lambda M: M.vectorize(abs, excluded={1.5})),
        Case("vectorize negative", lambda M: M.vectorize(abs, excluded={-1})),
        Case("vectorize core sizes", lambda M: M.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(np.ones(2), np.ones(3))),
        Case("vectorize core rank", lambda M: M.vectorize(lambda a: a, signature="(n,m)->(n)")(np.ones(2))),
        Case("vectorize arguments", lambda M: M.vectorize(lambda a, b: a, signature="(n),(n)->()")(np.ones(2))),
        Case("packbits order", lambda M: M.packbits(A([1]), bitorder="middle")),
        Case("unpackbits int8", lambda M: M.unpackbits(A([1], np.int8))),
    ])


# ------------------------------------------------------------------- group 3

P3 = A([1.0, -2.0, 3.5], np.float32)
Q3 = A([2.0, 0.5], np.float32)
U3 = A([1.0, -3.0, -2.0, 4.0], np.float32)


def polydiv_ref(u: NDArray, v: NDArray) -> tuple[NDArray, NDArray]:
    # JAX's remainder keeps u's length (NumPy's trims it).
    q, r = np.polydiv(u, v)
    return q, np.concatenate([np.zeros(u.shape[0] - r.shape[0]), r])


def group3_cases() -> list[Case]:
    windows = [
        Case(f"{name} {m}", lambda M, name=name, m=m: getattr(M, name)(m))
        for name in ("bartlett", "blackman", "hamming", "hanning") for m in (0, 1, 2, 7)
    ]
    return [
        *windows,
        Case("kaiser", lambda M: M.kaiser(12, 14.0)),
        Case("kaiser small", lambda M: M.kaiser(5, 0.5)),
        Case("kaiser 1", lambda M: M.kaiser(1, 3.0)),
        Case("i0", lambda M, x: M.i0(x), (A([0.0, 0.5, -3.0, 8.0, 9.5, 30.0, -80.0], np.float32),), jit=True),
        Case("i0 int", lambda M, x: M.i0(x), (A([0, 1, 2], np.int32),)),
        Case("poly", lambda M, r: M.poly(r), (A([1.0, 2.0, -3.0], np.float32),), jit=True),
        Case("poly int", lambda M: M.poly(A([1, 2]))),
        Case("poly empty", lambda M: M.poly(np.zeros(0, np.float32))),
        Case("polyval", lambda M, p, x: M.polyval(p, x), (P3, A([0.0, 1.0, 2.5], np.float32)), jit=True),
        Case("polyval weak", lambda M, p: M.polyval(p, 2.0), (P3,)),
        Case("polyval int", lambda M: M.polyval(A([1, 2, 3]), 2)),
        Case("polyval 2d", lambda M, p, x: M.polyval(p, x), (np.arange(6, dtype=np.float32).reshape(3, 2), A([1.0, 2.0], np.float32))),
        Case("polyadd", lambda M, p, q: M.polyadd(p, q), (P3, Q3)),
        Case("polysub", lambda M, p, q: M.polysub(p, q), (Q3, P3)),
        Case("polymul", lambda M, p, q: M.polymul(p, q), (P3, Q3), jit=True),
        Case("polymul int", lambda M: M.polymul(A([1, 2]), A([3, 4, 5]))),
        Case("polymul trim", lambda M: M.polymul(A([0.0, 0.0, 1.0, 2.0]), A([0.0, 3.0]), trim_leading_zeros=True), ref=lambda: np.polymul(A([1.0, 2.0]), A([3.0]))),
        Case("polyder", lambda M, p: M.polyder(p), (P3,)),
        Case("polyder 2", lambda M: M.polyder(A([1, 2, 3, 4]), 2)),
        Case("polyder 0", lambda M, p: M.polyder(p, 0), (P3,)),
        Case("polyint", lambda M, p: M.polyint(p), (P3,)),
        Case("polyint k", lambda M, p, k: M.polyint(p, 2, k), (P3, A([1.0, 2.0], np.float32))),
        Case("polyint scalar k", lambda M, p: M.polyint(p, 3, 1.5), (P3,)),
        Case("polydiv", lambda M, u, v: M.polydiv(u, v), (U3, Q3), polydiv_ref, jit=True),
        Case("polydiv trim", lambda M, u, v: M.polydiv(u, v, trim_leading_zeros=True), (U3, Q3), np.polydiv),
        Case("iscomplex", lambda M, x: M.iscomplex(x), (P3,)),
        Case("isreal", lambda M: M.isreal(2.0)),
        Case("array_equiv", lambda M, x: M.array_equiv(x, M.tile(x, (2, 1))), (P3,)),
        Case("array_equiv differ", lambda M, x: M.array_equiv(x, x + 1), (P3,)),
    ]


def test_group3_values_match_numpy_eagerly() -> None:
    check_table(group3_cases())


def test_jitted_cases_match_jax() -> None:
    # One compilation per library for the marked cases of every group.
    check_jitted([c for c in group1_cases() + group2_cases() + group3_cases() if c.jit])


def test_group3_types_match_jax_in_both_x64_modes() -> None:
    check_types([
        *group3_cases(),
        Case("i0 f16", lambda M: M.i0(A([1.0], np.float16))),
        Case("i0 weak", lambda M: M.i0(1.0)),
        Case("i0 bool", lambda M: M.i0(A([True]))),
        Case("kaiser int beta", lambda M: M.kaiser(4, 2)),
        Case("polyadd weak", lambda M: M.polyadd(A([1, 2], np.int8), A([3]))),
        Case("polyval int8 weak", lambda M: M.polyval(A([1, 2], np.int8), 3)),
        Case("polyint int8", lambda M: M.polyint(A([1, 2], np.int8))),
        Case("polydiv f16", lambda M: M.polydiv(A([1.0, 2.0], np.float16), A([1.0], np.float16))),
        Case("int_", lambda M: M.int_(3.7)),
        Case("double", lambda M: M.double(3)),
        Case("single", lambda M: M.single(3)),
        Case("float_", lambda M: M.float_(A([1], np.int8))),
        Case("uint", lambda M: M.uint(3)),
        Case("bool", lambda M: M.bool(A([0, 2]))),
    ])


def test_type_names_dtype_queries_printing_and_io_are_jaxs(tmp_path: Any) -> None:
    for name in ("generic", "number", "integer", "signedinteger", "unsignedinteger", "inexact", "floating",
                 "complexfloating", "character", "flexible", "dtype", "can_cast", "array_repr", "array_str",
                 "save", "savez"):
        assert getattr(fnp, name) is getattr(jnp, name), name
    for name in ("bool", "double", "single", "float_", "int_", "uint"):
        assert np.dtype(getattr(fnp, name)) == np.dtype(getattr(jnp, name)), name
    assert fnp.issubdtype(fnp.float32, fnp.floating) and fnp.issubdtype(fnp.int_, fnp.signedinteger)
    assert isinstance(np.float32(1), fnp.floating) and not fnp.issubdtype(fnp.uint, fnp.signedinteger)
    kinds: list[Any] = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
                        "complex floating", "numeric", np.int8, ("bool", "real floating")]
    for d in ("bool", "int8", "int64", "uint32", "bfloat16", "float16", "float64", "complex64", "int4", "float8_e4m3fn"):
        for k in kinds:
            assert fnp.isdtype(getattr(jnp, d), k) == jnp.isdtype(getattr(jnp, d), k), (d, k)
    for v in (1j, np.complex64(1), 1.0, None, "a", A([1.0]), A([1j]), fnp.ones(2), [1j]):
        assert fnp.iscomplexobj(v) == jnp.iscomplexobj(v) and fnp.isrealobj(v) == jnp.isrealobj(v), v
    with fnp.printoptions(precision=2):
        assert fnp.get_printoptions()["precision"] == 2 == jnp.get_printoptions()["precision"]
    assert fnp.get_printoptions() == np.get_printoptions()
    for it in (1, [1], A(1), A([1]), fnp.ones(2), "ab"):
        assert fnp.iterable(it) == jnp.iterable(it), it
    x = A([1.5, -2.0], np.float32)
    fnp.save(tmp_path / "x.npy", fnp.asarray(x))
    loaded = fnp.load(tmp_path / "x.npy")
    assert isinstance(loaded, fnp.ndarray) and loaded.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(loaded), x)
    assert fnp.frombuffer(x.tobytes(), dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(np.asarray(fnp.frombuffer(x.tobytes(), dtype=np.float32)), x)
    np.testing.assert_array_equal(np.asarray(fnp.fromstring("1 2 3", sep=" ")), np.asarray(jnp.fromstring("1 2 3", sep=" ")))
    np.testing.assert_array_equal(np.asarray(fnp.from_dlpack(x)), x)
    check_errors([
        Case("fromiter", lambda M: M.fromiter(iter([1]), dtype=np.float32)),
        Case("fromfile", lambda M: M.fromfile("x")),
        Case("isdtype kind", lambda M: M.isdtype(np.float32, "reals")),
        Case("isdtype kind type", lambda M: M.isdtype(np.float32, 3.5)),
        Case("polyder negative", lambda M: M.polyder(P3, -1)),
        Case("polyint negative", lambda M: M.polyint(P3, -1)),
        Case("polyint k", lambda M: M.polyint(P3, 2, A([1.0, 2.0, 3.0]))),
        Case("poly 2d", lambda M: M.poly(np.ones((2, 3)))),
        Case("array_equiv shapes", lambda M: M.array_equiv(P3, Q3)),  # JAX: TypeError (NumPy: False)
    ])
