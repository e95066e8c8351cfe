"""``ferrax.scipy.special`` against ``jax.scipy.special``: dtypes and weak types (both x64
modes), values and derivatives at the edges of each domain (in one compilation for
JAX and one for ferrax), and errors.

Cases are written once as ``case(sp, *xs)`` for a module ``sp``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from jax_harness import Case, assert_same_outcome, both_x64, jax_types, outcome, type_of

import ferrax
import ferrax.scipy.special as fsp
from ferrax.tree_util import tree_leaves

jax = pytest.importorskip("jax")
jsp = pytest.importorskip("jax.scipy.special")

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
RTOL = {F32: 1e-5, F64: 1e-13}


UNARY: dict[str, Case] = {
    "expit": lambda sp, x: sp.expit(x),
    "logit": lambda sp, x: sp.logit(x),
    "entr": lambda sp, x: sp.entr(x),
    "gammasgn": lambda sp, x: sp.gammasgn(x),
    "erf": lambda sp, x: sp.erf(x),
    "erfc": lambda sp, x: sp.erfc(x),
    "erfinv": lambda sp, x: sp.erfinv(x),
    "gammaln": lambda sp, x: sp.gammaln(x),
    "digamma": lambda sp, x: sp.digamma(x),
    "gamma": lambda sp, x: sp.gamma(x),
    "factorial": lambda sp, x: sp.factorial(x),
    "ndtr": lambda sp, x: sp.ndtr(x),
}
BINARY: dict[str, Case] = {
    "xlogy": lambda sp, x, y: sp.xlogy(x, y),
    "xlog1py": lambda sp, x, y: sp.xlog1py(x, y),
    "rel_entr": lambda sp, x, y: sp.rel_entr(x, y),
    "kl_div": lambda sp, x, y: sp.kl_div(x, y),
}
REDUCING: dict[str, Case] = {
    "logsumexp": lambda sp, x: sp.logsumexp(x),
    "logsumexp(axis=0, keepdims)": lambda sp, x: sp.logsumexp(x, axis=0, keepdims=True),
    "logsumexp(b, return_sign)": lambda sp, x: sp.logsumexp(x, b=-np.ones(np.shape(x), np.float32), return_sign=True),
    "softmax": lambda sp, x: sp.softmax(x),
    "softmax(axis=-1)": lambda sp, x: sp.softmax(x, axis=-1),
    "log_softmax": lambda sp, x: sp.log_softmax(x),
    "log_softmax(axis=(0,))": lambda sp, x: sp.log_softmax(x, axis=(0,)),
}

OPERANDS: dict[str, Any] = {
    "float": 0.25,
    "int": 2,
    "bool": True,
    "np.float32": np.float32(0.75),
    "f16[3]": np.array([0.1, 0.5, 0.9], np.float16),
    "bf16[3]": np.array([0.1, 0.5, 0.9], ml_dtypes.bfloat16),
    "f32[2,3]": np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], np.float32),
    "f64[3]": np.array([0.1, 0.5, 0.9]),
    "i32[3]": np.array([0, 1, 2], np.int32),
    "i64[3]": np.array([0, 1, 2], np.int64),
    "u8[3]": np.array([0, 1, 2], np.uint8),
    "bool[3]": np.array([True, False, True]),
}
PAIRS = [
    ("float", "float"), ("int", "float"), ("bool", "int"), ("f32[2,3]", "float"),
    ("f16[3]", "float"), ("f16[3]", "bf16[3]"), ("i32[3]", "f32[2,3]"), ("f64[3]", "i64[3]"),
    ("u8[3]", "bool[3]"), ("np.float32", "int"), ("bf16[3]", "i32[3]"),
]


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_types_as_jax(x64: bool) -> None:
    """Every function over every kind of operand (and pairs of them): JAX's dtype, weak
    type and shape, or an error of JAX's class."""
    with both_x64(x64):
        unary = {**UNARY, **REDUCING}
        for kind, x in OPERANDS.items():
            theirs = jax_types(jsp, unary, x)
            for name, case in unary.items():
                assert_same_outcome(outcome(lambda: case(fsp, x)), theirs[name], f"{name} of {kind}")
        for k1, k2 in PAIRS:
            x, y = OPERANDS[k1], OPERANDS[k2]
            theirs = jax_types(jsp, BINARY, x, y)
            for name, case in BINARY.items():
                assert_same_outcome(outcome(lambda: case(fsp, x, y)), theirs[name], f"{name} of {k1}, {k2}")


# Points at the edges of each domain, and random ones.
EDGES = {
    "expit": [-np.inf, -100.0, -1.0, 0.0, 1.0, 100.0, np.inf, np.nan],
    "logit": [-0.5, 0.0, 1e-7, 0.25, 0.5, 0.75, 1.0 - 1e-7, 1.0, 1.5, np.nan],
    "entr": [-1.0, 0.0, 1e-30, 0.5, 1.0, 2.0, np.inf, np.nan],
    "erf": [-np.inf, -4.0, -1.0, 0.0, 1e-3, 1.0, 4.0, np.inf, np.nan],
    "erfc": [-np.inf, -4.0, -1.0, 0.0, 1.0, 4.0, 10.0, np.inf, np.nan],
    "erfinv": [-1.5, -1.0, -0.999, -0.5, 0.0, 0.5, 0.999, 1.0, 1.5, np.nan],
    "gammaln": [-2.5, -2.0, -1.0, -0.5, 0.0, 1e-3, 0.5, 1.0, 2.0, 3.5, 100.0, np.inf],
    # The poles -1, -2 are checked by test_digamma_derivative_at_poles.
    "digamma": [-2.5, -0.5, 0.0, 1e-3, 0.5, 1.0, 2.0, 3.5, 100.0],
    "gammasgn": [-np.inf, -3.5, -3.0, -2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 3.0, np.inf, np.nan],
    "gamma": [-3.5, -3.0, -2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.0, 4.5, 20.0],
    "factorial": [-2.0, -0.5, 0.0, 0.5, 1.0, 3.0, 10.0, 30.0],
    "ndtr": [-np.inf, -40.0, -5.0, -1.0, -0.5, 0.0, 0.5, 1.0, 5.0, np.inf, np.nan],
}
XY = np.array(
    [[0.0, 0.0], [0.0, -1.0], [0.0, np.nan], [0.0, 2.0], [1.0, 0.0], [1.0, -1.0], [2.0, 3.0],
     [-1.5, 0.5], [0.5, -0.5], [3.0, np.inf], [np.nan, 1.0], [1.0, -2.0]]
)


def domain(name: str, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(len(name))
    lo, hi = {"logit": (0.0, 1.0), "entr": (0.0, 3.0), "erfinv": (-1.0, 1.0)}.get(name, (-5.0, 5.0))
    return np.concatenate([EDGES[name], rng.uniform(lo, hi, 24)]).astype(dtype)


def _everything(sp: Any, vmap: Any, grad: Any, points: dict[str, Any], xy: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, case in UNARY.items():
        x = points[name]
        out[name] = (case(sp, x), vmap(grad(lambda v, c=case: c(sp, v)))(x))
    for name, case in BINARY.items():
        x, y = xy[:, 0], xy[:, 1]
        out[name] = (case(sp, x, y), vmap(grad(lambda a, b, c=case: c(sp, a, b), argnums=(0, 1)))(x, y))
    return out


# Tolerance factors: ferrax's trigamma (digamma's derivative) is a series with the
# reflection pi**2 / sin(pi x)**2 below 1/2, within 3e-5 (float32) and 3e-11 (float64)
# of JAX's polygamma(1, x) near the poles.
LOOSE = {"digamma grad": 2e4}


def assert_close(ours: Any, theirs: Any, dtype: np.dtype[Any], what: str, loose: float = 1.0) -> None:
    a, e = np.asarray(ours).astype(np.float64), np.asarray(theirs).astype(np.float64)
    assert a.shape == e.shape, what
    tol = RTOL[dtype] * (loose if dtype == F64 else loose ** 0.25)
    np.testing.assert_allclose(a, e, rtol=tol, atol=tol, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_values_and_derivatives_as_jax(dtype: np.dtype[Any]) -> None:
    """Values and derivatives at the edges of each domain (logit at 0 and 1, entr at 0
    and below, xlogy and xlog1py where x is 0), eager and (float32) jitted, against JAX's
    jitted ones: xlogy(0, 0) is 0, its custom derivative JAX's."""
    points = {name: domain(name, dtype) for name in UNARY}
    xy = XY.astype(dtype)
    with both_x64(dtype == F64):
        theirs = jax.jit(lambda p, xy: _everything(jsp, jax.vmap, jax.grad, p, xy))(points, xy)
        runs = [("eager", _everything(fsp, ferrax.vmap, ferrax.grad, points, xy))]
        if dtype == F32:
            jitted = ferrax.jit(lambda p, xy: _everything(fsp, ferrax.vmap, ferrax.grad, p, xy))(points, xy)
            runs.append(("jit", jitted))
        for how, ours in runs:
            for name in theirs:
                leaves = zip(tree_leaves(ours[name]), tree_leaves(theirs[name]), strict=True)
                for i, (o, t) in enumerate(leaves):
                    part = " grad" if i else ""
                    assert type_of(o) == type_of(t), (how, name)
                    assert_close(o, t, dtype, f"{how} {name}{part}", LOOSE.get(name + part, 1.0))


def test_reductions_as_jax() -> None:
    """logsumexp (b, return_sign, keepdims), softmax and log_softmax over all axes by
    default (SciPy's convention), eagerly, against JAX's (jitted)."""
    x = np.random.default_rng(3).uniform(-3, 3, (3, 4)).astype(np.float32)
    all_theirs = jax.jit(lambda x: {name: case(jsp, x) for name, case in REDUCING.items()})(x)
    for name, case in REDUCING.items():
        ours, theirs = tree_leaves(case(fsp, x)), tree_leaves(all_theirs[name])
        for o, t in zip(ours, theirs, strict=True):
            assert type_of(o) == type_of(t), name
            np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=2e-6, atol=2e-6, err_msg=name)


ERRORS: dict[str, Case] = {
    "expit of a list": lambda sp: sp.expit([1.0]),
    "xlogy of a list": lambda sp: sp.xlogy(1.0, [1.0]),
    "xlog1py shapes": lambda sp: sp.xlog1py(np.ones(2), np.ones(3)),
    "logit of a string": lambda sp: sp.logit("a"),
    "softmax axis out of range": lambda sp: sp.softmax(np.ones(3), axis=1),
    "logsumexp b shape": lambda sp: sp.logsumexp(np.ones(3), b=np.ones(2)),
}


def test_errors_as_jax() -> None:
    """Bad arguments raise JAX's exception class, naming the user's line."""
    for name, case in ERRORS.items():
        theirs = outcome(lambda: case(jsp))
        assert isinstance(theirs, BaseException), name
        with pytest.raises(type(theirs)) as info:
            case(fsp)
        assert "test_scipy_special.py" in str(info.value), (name, str(info.value))


def test_digamma_at_poles() -> None:
    """digamma is NaN at the negative integers and its derivative (trigamma) infinite,
    as JAX's; the derivative at 0 is infinite too."""
    x = np.array([-3.0, -2.0, -1.0, 0.0], np.float32)
    values = np.asarray(fsp.digamma(x))
    np.testing.assert_array_equal(values, np.asarray(jsp.digamma(x)))
    grads = np.asarray(ferrax.vmap(ferrax.grad(fsp.digamma))(x))
    assert np.isposinf(grads[-1])
    np.testing.assert_array_equal(grads, np.asarray(jax.vmap(jax.grad(jsp.digamma))(x)))
