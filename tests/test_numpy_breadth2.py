"""``ferrax.numpy``'s further everyday names (``ferrax.numpy._breadth2`` and the modules
beside it) against jax.numpy 0.10.2: values, dtypes, weak types (both x64 modes) and
errors.

Each table of cases runs eagerly in ferrax (no compilation), in one ``ferrax.jit`` and
in one ``jax.jit`` (the reference); result types are compared with JAX's by
``jax.eval_shape`` (nothing compiled) in both x64 modes; errors are compared with JAX's
eagerly. Functions whose output size depends on the data run eagerly without ``size=``
and under ``jit`` with it.
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
    jit: bool = False  # also compared with JAX under one jit per table (compiling costs)


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
    """Each case eagerly in ferrax against NumPy's values, and the cases marked ``jit``
    in one ferrax.jit against the same in one jax.jit (values and dtypes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for c in cases:
            ours = flat(c.op(fnp, *c.args))
            expected = flat(c.ref(*c.args) if c.ref is not None else c.op(np, *c.args))
            assert len(ours) == len(expected), c.label
            for i, (o, e) in enumerate(zip(ours, expected)):
                close(o, e, f"{c.label}: eager output {i} vs NumPy", same_dtype=False)
        staged_cases = [c for c in cases if c.jit]
        arrays = [[a for a in c.args if isinstance(a, np.ndarray)] for c in staged_cases]
        theirs = [flat(o) for o in jax.jit(lambda xs: call_all(jnp, staged_cases, xs))(arrays)]
        staged = [flat(o) for o in ferrax.jit(lambda xs: call_all(fnp, staged_cases, xs))(arrays)]
    for c, s, j in zip(staged_cases, staged, theirs, strict=True):
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
                    theirs = [type_of(r) for r in jax.tree_util.tree_leaves(jax.eval_shape(traced, *arrays))]
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
        Case("deg2rad", lambda M, x: M.deg2rad(x), (F,)),
        Case("rad2deg", lambda M, x: M.rad2deg(x), (I,)),
        Case("radians", lambda M, x: M.radians(x), (F,)),
        Case("degrees", lambda M, x: M.degrees(x), (F,)),
    ]


def test_group1_values_match_jax_eagerly_and_under_jit() -> None:
    check_table(group1_cases())


def group1_type_cases() -> list[Case]:
    # Python scalars and narrow dtypes: the weak types and dtypes of JAX's promotion.
    h = A([1.5, -2.0], np.float16)
    i8 = A([3, -4], np.int8)
    return [
        *group1_cases(),
        *(Case(f"{n} python float", lambda M, n=n: getattr(M, n)(2.5)) for n in
          ("reciprocal", "signbit", "fabs", "sinc", "deg2rad", "rad2deg", "frexp", "modf")),
        *(Case(f"{n} int8", lambda M, x, n=n: getattr(M, n)(x), (i8,)) for n in
          ("reciprocal", "signbit", "fabs", "sinc", "radians", "frexp", "modf", "amax", "ptp")),
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
