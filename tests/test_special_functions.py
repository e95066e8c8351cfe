"""The special functions and the rest of the trigonometric family (issue 12) against JAX:
many points (the edges of each domain included) in one compilation per library and
dtype, second derivatives, the jaxpr and the StableHLO operations JAX emits, and errors.

The generated tables check each of these primitives on a dozen values of every dtype
(tests/test_lax.py), their jvp against JAX's and finite differences
(tests/test_jvp_primitives.py), their batching (tests/test_batch_primitives.py), jit
against eager (tests/test_jit_primitives.py) and the ``ferrax.numpy`` functions
(tests/test_numpy.py); this file adds breadth of points and the edges.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

NDArray = np.ndarray[Any, Any]
F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)
INF, NAN = np.inf, np.nan

#: Per function: points across the domain, then its edges (where a value is infinite or
#: NaN, or the function changes form), and a few outside.
_EDGES = [0.0, -0.0, INF, -INF, NAN]
POINTS: dict[str, NDArray] = {
    "erf_inv": np.concatenate([np.linspace(-1, 1, 201), [0.9999, -0.99999, 1e-6, 1.5, -2.0], _EDGES]),
    "erf": np.concatenate([np.linspace(-6, 6, 241), [1e-6, -1e-30, 30.0], _EDGES]),
    "erfc": np.concatenate([np.linspace(-6, 11, 241), [1e-6, 9.9, 30.0], _EDGES]),
    "lgamma": np.concatenate(
        [np.linspace(-6.25, 8.25, 59), np.arange(-5.0, 1.0), np.geomspace(1e-6, 1e6, 40), [1.0, 2.0, 3e38], _EDGES]
    ),
    "digamma": np.concatenate(
        [np.linspace(-6.25, 8.25, 59), np.arange(-5.0, 1.0), np.geomspace(1e-6, 1e6, 40), [1.4616321, 1.0], _EDGES]
    ),
    "exp2": np.concatenate([np.linspace(-130, 130, 261), [0.5, -0.5, 1e-7], _EDGES]),
    "cbrt": np.concatenate([np.linspace(-100, 100, 201), [27.0, -8.0, 1e-30, 3e38], _EDGES]),
    "asin": np.concatenate([np.linspace(-1, 1, 201), [1.0001, -1.5], _EDGES]),
    "acos": np.concatenate([np.linspace(-1, 1, 201), [1.0001, -1.5], _EDGES]),
    "atan": np.concatenate([np.linspace(-50, 50, 201), [1e-30, 1e30], _EDGES]),
    "sinh": np.concatenate([np.linspace(-90, 90, 181), [1e-6, -1e-4, 100.0], _EDGES]),
    "cosh": np.concatenate([np.linspace(-90, 90, 181), [1e-6, -1e-4, 100.0], _EDGES]),
    "asinh": np.concatenate([np.linspace(-50, 50, 201), [1e-30, 1e30, -1e30], _EDGES]),
    "acosh": np.concatenate([np.linspace(1, 50, 197), [0.5, 0.999, 1.0001, 1e30], _EDGES]),
    "atanh": np.concatenate([np.linspace(-1, 1, 201), [0.9999, -1.5, 2.0], _EDGES]),
    "is_finite": np.array([1.0, -2.5, 3e38, 1e-40, *_EDGES]),
}
UNARY = list(POINTS)

#: atan2(y, x) over a grid of both signs, zeros and infinities.
_AXIS = np.array([-INF, -3.0, -1.0, -1e-30, -0.0, 0.0, 1e-30, 0.5, 2.0, INF, NAN])
ATAN2_Y, ATAN2_X = (v.ravel() for v in np.meshgrid(_AXIS, _AXIS))


def _inputs(dtype: np.dtype[Any]) -> dict[str, Any]:
    with np.errstate(over="ignore"):
        args: dict[str, Any] = {name: xs.astype(dtype) for name, xs in POINTS.items()}
        args["atan2"] = (ATAN2_Y.astype(dtype), ATAN2_X.astype(dtype))
    return args


def _all(L: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Every function of ``L`` (``ferrax.lax`` or ``jax.lax``) on its points."""

    def f(args: dict[str, Any]) -> dict[str, Any]:
        out = {name: getattr(L, name)(args[name]) for name in UNARY}
        out["atan2"] = L.atan2(*args["atan2"])
        return out

    return f


_JAX: dict[np.dtype[Any], dict[str, NDArray]] = {}


def _jax_values(dtype: np.dtype[Any]) -> dict[str, NDArray]:
    """JAX's values on every function's points, in one compilation per dtype."""
    if dtype not in _JAX:
        out = jax.jit(_all(jax.lax))(_inputs(dtype))
        _JAX[dtype] = {k: np.asarray(v) for k, v in out.items()}
    return _JAX[dtype]


def _assert_matches(got: NDArray, want: NDArray, rtol: float, atol: float, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if got.dtype == np.bool_:
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    # Infinities and NaNs exactly where JAX has them, with their signs.
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{what}: NaNs")
    finite = np.isfinite(w)
    np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)], err_msg=f"{what}: infinities")
    np.testing.assert_allclose(g[finite], w[finite], rtol=rtol, atol=atol, err_msg=what)


# (float16 as bfloat16: XLA computes both in float32; tests/test_jit_primitives.py runs
# each function in every float dtype.)
@pytest.mark.parametrize("dtype", [F32, BF16], ids=lambda d: d.name)
def test_jitted_values_are_jaxs(dtype: np.dtype[Any]) -> None:
    # ferrax emits the operations JAX emits (CHLO's erf_inv, lgamma, digamma, ...), which
    # jaxlib's compiler expands the same way: the same values (bit for bit on the
    # machines tried; an ulp allowed, for code generated differently in other fusions).
    got = ferrax.jit(_all(lax))(_inputs(dtype))
    want = _jax_values(dtype)
    assert set(got) == set(want)
    ulp = 2.0**-23 if dtype == F32 else 2.0**-7  # float32, bfloat16
    for name in want:
        _assert_matches(np.asarray(got[name]), want[name], ulp, 0.0, name)


# Where the eager values (float64 math, rounded once) and XLA's float32 approximations
# part: a few ulps, more where the function is near a zero (lgamma at 1 and 2, digamma
# at 1.46) or steep (erf_inv near +-1, lgamma and digamma near their poles).
EAGER_TOLERANCE: dict[str, tuple[float, float]] = {
    "erf_inv": (2e-5, 1e-6), "lgamma": (1e-5, 2e-6), "digamma": (2e-5, 1e-5),
}


def test_eager_values_match_jax() -> None:
    args = _inputs(F32)
    want = _jax_values(F32)
    for name in UNARY:
        rtol, atol = EAGER_TOLERANCE.get(name, (4e-6, 1e-37))
        _assert_matches(np.asarray(getattr(lax, name)(args[name])), want[name], rtol, atol, name)
    _assert_matches(np.asarray(lax.atan2(*args["atan2"])), want["atan2"], 4e-6, 0.0, "atan2")


def test_the_edges() -> None:
    # The values issue 12 names, eagerly and jitted: erf_inv(+-1) = +-inf; lgamma +inf at
    # the poles; digamma NaN at 0 and the negative integers; NaN outside the domains.
    cases: dict[str, tuple[list[float], list[float]]] = {
        "erf_inv": ([1.0, -1.0, 1.5, -1.0001, NAN], [INF, -INF, NAN, NAN, NAN]),
        "lgamma": ([0.0, -0.0, -1.0, -7.0, -INF, INF], [INF] * 6),
        "digamma": ([0.0, -0.0, -1.0, -7.0, -INF, INF], [NAN, NAN, NAN, NAN, NAN, INF]),
        "asin": ([1.5, -1.5], [NAN, NAN]),
        "acos": ([1.5, -2.0], [NAN, NAN]),
        "acosh": ([0.5, -1.0, 1.0], [NAN, NAN, 0.0]),
        "atanh": ([1.0, -1.0, 1.5], [INF, -INF, NAN]),
        "erfc": ([-INF, INF, 0.0], [2.0, 0.0, 1.0]),
        "is_finite": ([INF, -INF, NAN, 0.0], [False, False, False, True]),
    }
    for name, (xs, ys) in cases.items():
        x = np.array(xs, np.float32)
        want = np.array(ys, np.bool_ if name == "is_finite" else np.float32)
        for how, f in (("eager", getattr(lax, name)), ("jit", ferrax.jit(getattr(lax, name)))):
            np.testing.assert_array_equal(np.asarray(f(x)), want, err_msg=f"{name} {how}")


def test_float64_jit_agrees_with_eager() -> None:
    # x64: XLA's float64 expansions against SciPy's and NumPy's float64 values.
    with ferrax.enable_x64(True):
        args = _inputs(np.dtype(np.float64))
        got = ferrax.jit(_all(lax))(args)
        for name in UNARY:
            eager = np.asarray(getattr(lax, name)(args[name]))
            _assert_matches(np.asarray(got[name]), eager, 1e-12, 1e-14, name)
        _assert_matches(np.asarray(got["atan2"]), np.asarray(lax.atan2(*args["atan2"])), 1e-15, 0.0, "atan2")


def _second_derivatives(lib: Any, L: Any) -> Callable[..., Any]:
    """``f''`` of each function at its points (vmapped), in one program."""

    def d2(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return lib.vmap(lib.grad(lib.grad(f)))  # type: ignore[no-any-return]

    def run(points: dict[str, Any]) -> dict[str, Any]:
        fns: dict[str, Callable[[Any], Any]] = {
            "erf_inv": L.erf_inv, "erf": L.erf, "lgamma": L.lgamma, "digamma": L.digamma, "cbrt": L.cbrt,
            "asin": L.asin, "acosh": L.acosh, "atanh": L.atanh,
            "atan2_y": lambda y: L.atan2(y, np.float32(-1.5)), "atan2_x": lambda x: L.atan2(np.float32(0.7), x),
        }
        return {name: d2(f)(points[name]) for name, f in fns.items()}

    return run


def test_second_derivatives_match_jax() -> None:
    # lgamma'' is digamma' (trigamma, which ferrax composes from primitives where JAX
    # binds polygamma), digamma'' its derivative; negative points take the reflection.
    # (The others' second derivatives are first derivatives of functions checked
    # here or in tests/test_jvp_primitives.py's second-order check_grads.)
    points = {
        "erf_inv": [-0.9, -0.3, 0.2, 0.7], "erf": [-1.5, 0.1, 0.8, 2.0],
        "lgamma": [-2.5, -0.4, 0.3, 1.7, 6.5, 40.0], "digamma": [-1.5, -0.3, 0.6, 2.2, 9.0, 30.0],
        "cbrt": [-8.0, -0.5, 2.0], "asin": [-0.7, 0.2, 0.9], "acosh": [1.2, 2.0, 5.0], "atanh": [-0.8, 0.1, 0.6],
        "atan2_y": [-2.0, 0.3, 1.0], "atan2_x": [-2.0, 0.5, 3.0],
    }
    args = {k: np.array(v, np.float32) for k, v in points.items()}
    got = ferrax.jit(_second_derivatives(ferrax, lax))(args)
    want = jax.jit(_second_derivatives(jax, jax.lax))(args)
    for name in points:
        np.testing.assert_allclose(np.asarray(got[name]), np.asarray(want[name]), rtol=2e-4, atol=1e-5, err_msg=name)


def _both(f: Callable[..., Any], *args: Any) -> tuple[str, str]:
    return str(ferrax.make_jaxpr(f)(*args)), str(jax.make_jaxpr(f)(*args))


def test_jaxprs_are_jaxs() -> None:
    def lax_fns(L: Any) -> Callable[..., Any]:
        def f(x: Any, y: Any, h: Any) -> Any:
            return (
                L.erf_inv(x), L.erf(x), L.erfc(h), L.lgamma(x), L.digamma(y), L.exp2(x), L.cbrt(h), L.asin(x),
                L.acos(x), L.atan(y), L.sinh(x), L.cosh(h), L.asinh(x), L.acosh(y), L.atanh(x), L.atan2(x, y),
                L.atan2(x, 2.0), L.is_finite(y), L.is_finite(h),
            )

        return f

    x, y, h = np.zeros(3, np.float32), np.float32(0.5), np.zeros((2, 2), np.float16)
    ours, theirs = str(ferrax.make_jaxpr(lax_fns(lax))(x, y, h)), str(jax.make_jaxpr(lax_fns(jax.lax))(x, y, h))
    assert ours == theirs

    def numpy_fns(np_: Any) -> Callable[..., Any]:
        def f(i: Any, b: Any, x: Any) -> Any:
            return (
                np_.isfinite(i), np_.isfinite(b), np_.isfinite(x), np_.arctan2(i, x), np_.arctan2(i, 2),
                np_.cbrt(i), np_.exp2(b), np_.arcsinh(x), np_.atan2(x, x),
            )

        return f

    # (Not arccosh: jax.numpy's is a jit of its own, recorded as a `jit` equation;
    # ferrax.numpy's functions record their primitives directly.)
    i, b = np.arange(3, dtype=np.int32), np.array([True, False, True])
    ours, theirs = str(ferrax.make_jaxpr(numpy_fns(fnp))(i, b, x)), str(jax.make_jaxpr(numpy_fns(jnp))(i, b, x))
    assert ours == theirs


def _ops(text: str) -> set[str]:
    """The operations of a StableHLO module (generic or pretty form)."""
    return set(re.findall(r'"?((?:chlo|stablehlo)\.[a-z_0-9]+)', text))


def test_lowered_operations_are_jaxs() -> None:
    x = np.linspace(0.1, 0.9, 4).astype(np.float32)

    def f(L: Any) -> Callable[[Any], Any]:
        return lambda v: (*[getattr(L, name)(v) for name in UNARY], L.atan2(v, v))

    ours = _ops(ferrax.jit(f(lax)).lower(x).as_text())
    theirs = _ops(jax.jit(f(jax.lax)).lower(x).as_text())
    assert ours == theirs
    assert {"chlo.erf_inv", "chlo.lgamma", "chlo.digamma", "stablehlo.atan2", "stablehlo.is_finite"} <= ours


def test_the_numpy_functions_promote_as_jax() -> None:
    # Values, dtypes and weak types (tests/test_numpy.py compares more operand kinds).
    operands: list[Any] = [2, 0.5, True, np.int8(3), np.arange(3, dtype=np.uint8), np.array([0.5, 2.0], np.float16)]
    names = ["arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "cbrt", "exp2", "isfinite",
             "asin", "acos", "atan", "asinh", "acosh", "atanh"]
    for name in names:
        for x in operands:
            got = getattr(fnp, name)(x)
            want = jax.eval_shape(getattr(jnp, name), x)
            assert (got.dtype, got.weak_type, got.shape) == (want.dtype, want.weak_type, want.shape), (name, x)
            with np.errstate(all="ignore"):
                ref = getattr(np, name)(np.asarray(x, np.float64) if name != "isfinite" else np.asarray(x))
            np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=2e-3, err_msg=f"{name}({x!r})")
    pairs: list[tuple[Any, Any]] = [(1, 2.0), (np.int8(3), np.uint8(2)), (np.float16(1.0), 3), (True, np.float32(-1.0))]
    for x, y in pairs:
        got, want = fnp.arctan2(x, y), jax.eval_shape(jnp.arctan2, x, y)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type), (x, y)
        np.testing.assert_allclose(float(got), np.arctan2(float(x), float(y)), rtol=2e-3)


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.erf(np.arange(3, dtype=np.int32)),
        lambda L: L.lgamma(np.array([True])),
        lambda L: L.is_finite(np.arange(3)),
        lambda L: L.atan2(np.zeros(2, np.float16), np.zeros(2, np.float32)),
        lambda L: L.atan2(np.zeros(2, np.int32), np.zeros(2, np.int32)),
        lambda L: L.acosh(np.uint8(2)),
    ],
    ids=["erf-int", "lgamma-bool", "is_finite-int", "atan2-mixed", "atan2-int", "acosh-uint"],
)
def test_bad_dtypes_are_type_errors_at_the_users_line(call: Callable[[Any], Any]) -> None:
    with pytest.raises(TypeError):
        call(jax.lax)
    with pytest.raises(ferrax.TypeCheckError, match=r"expected a float dtype|differ") as info:
        call(lax)
    assert isinstance(info.value, TypeError)
    assert "test_special_functions.py" in str(info.value)
    # Staged too.
    with pytest.raises(ferrax.TypeCheckError, match="test_special_functions.py"):
        ferrax.jit(lambda: call(lax))()


def test_derivatives_at_the_poles_are_jaxs() -> None:
    # digamma' (trigamma) is +inf at zero and the negative integers, lgamma' (digamma)
    # NaN there, as JAX's polygamma and digamma; eagerly and jitted.
    x = np.array([0.0, -0.0, -1.0, -3.0, 1e-3, -2.5], np.float32)
    for f, jf in ((lax.digamma, jax.lax.digamma), (lax.lgamma, jax.lax.lgamma)):
        want = np.asarray(jax.jit(jax.vmap(jax.grad(jf)))(x))
        eager = np.asarray(ferrax.vmap(ferrax.grad(f))(x))
        jitted = np.asarray(ferrax.jit(ferrax.vmap(ferrax.grad(f)))(x))
        for got in (eager, jitted):
            _assert_matches(got, want, 1e-4, 0.0, f"{f.__name__}'")
