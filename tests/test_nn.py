"""``ferrax.nn`` against ``jax.nn``: dtypes and weak types, values, derivatives, errors.

Every case is written once as ``case(nn, x)`` for a module ``nn`` (``ferrax.nn`` or
``jax.nn``):

* types: each case over a table of operands (Python scalars, bools, NumPy scalars,
  arrays of every float and several integer dtypes), in both x64 modes: ferrax's
  result has JAX's dtype, weak type and shape (JAX traced with ``eval_shape``, which
  compiles nothing), or both raise, ferrax an instance of JAX's exception class;
* values: all cases at once over edge points (infinities, NaN, the kinks) and random
  points, in float16, bfloat16, float32 and float64: JAX under one ``jit`` per dtype,
  ferrax eagerly and (float32, float64) under one ``jit``;
* derivatives: ``vmap(grad(case))`` over the same points against JAX's (the custom
  rules: ``relu`` at 0, ``relu6`` at 0 and 6, ``softplus`` at infinities), and
  gradients of the softmax family where logits are ``-inf`` or masked out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from jax_harness import TypeOf, both_x64, jax_types, outcome, type_of
from jax_harness import assert_same_outcome as assert_same_outcome_renamed

import ferrax
import ferrax.nn as fnn
import ferrax.numpy as fnp
from ferrax.tree_util import tree_leaves, tree_map

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

Case = Callable[[Any, Any], Any]
F16, BF16, F32, F64 = (np.dtype(d) for d in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64))
RTOL = {F16: 4e-3, BF16: 3e-2, F32: 2e-5, F64: 1e-12}


# --------------------------------------------------------------------------- the cases

# Elementwise activations: name -> case. Each is also differentiated pointwise.
ELEMENTWISE: dict[str, Case] = {
    "relu": lambda nn, x: nn.relu(x),
    "relu6": lambda nn, x: nn.relu6(x),
    "sigmoid": lambda nn, x: nn.sigmoid(x),
    "log_sigmoid": lambda nn, x: nn.log_sigmoid(x),
    "silu": lambda nn, x: nn.silu(x),
    "swish": lambda nn, x: nn.swish(x),
    "softplus": lambda nn, x: nn.softplus(x),
    "soft_sign": lambda nn, x: nn.soft_sign(x),
    "elu": lambda nn, x: nn.elu(x),
    "elu(alpha=0.5)": lambda nn, x: nn.elu(x, 0.5),
    "leaky_relu": lambda nn, x: nn.leaky_relu(x),
    "leaky_relu(0.2)": lambda nn, x: nn.leaky_relu(x, negative_slope=0.2),
    "celu": lambda nn, x: nn.celu(x),
    "celu(alpha=2)": lambda nn, x: nn.celu(x, alpha=2.0),
    "selu": lambda nn, x: nn.selu(x),
    "hard_tanh": lambda nn, x: nn.hard_tanh(x),
    "hard_sigmoid": lambda nn, x: nn.hard_sigmoid(x),
    "hard_silu": lambda nn, x: nn.hard_silu(x),
    "hard_swish": lambda nn, x: nn.hard_swish(x),
    "gelu": lambda nn, x: nn.gelu(x),
    "gelu(approximate=True)": lambda nn, x: nn.gelu(x, approximate=True),
    "identity": lambda nn, x: nn.identity(x),
    "tanh": lambda nn, x: nn.tanh(x),
    "squareplus": lambda nn, x: nn.squareplus(x),
    "squareplus(b=1)": lambda nn, x: nn.squareplus(x, 1.0),
    "sparse_plus": lambda nn, x: nn.sparse_plus(x),
    "sparse_sigmoid": lambda nn, x: nn.sparse_sigmoid(x),
    "mish": lambda nn, x: nn.mish(x),
    "log1mexp": lambda nn, x: nn.log1mexp(x),
    "gelu(approximate=False)": lambda nn, x: nn.gelu(x, approximate=False),
}

# Functions over axes, on a 2-d operand (the masks and scales are fixed arrays).
MASK = np.array([[True, False, True, True, False, True]] * 3 + [[False] * 6])
SCALE = np.linspace(-1.0, 2.0, 24).reshape(4, 6).astype(np.float32)
AXES: dict[str, Case] = {
    "softmax": lambda nn, x: nn.softmax(x),
    "softmax(axis=0)": lambda nn, x: nn.softmax(x, axis=0),
    "softmax(axis=None)": lambda nn, x: nn.softmax(x, axis=None),
    "softmax(axis=(0, 1))": lambda nn, x: nn.softmax(x, axis=(0, 1)),
    "softmax(where)": lambda nn, x: nn.softmax(x, where=MASK),
    "log_softmax": lambda nn, x: nn.log_softmax(x),
    "log_softmax(axis=0)": lambda nn, x: nn.log_softmax(x, axis=0),
    "log_softmax(axis=None)": lambda nn, x: nn.log_softmax(x, axis=None),
    "log_softmax(where)": lambda nn, x: nn.log_softmax(x, where=MASK),
    "logsumexp": lambda nn, x: nn.logsumexp(x),
    "logsumexp(axis=1)": lambda nn, x: nn.logsumexp(x, axis=1),
    "logsumexp(axis=-2, keepdims)": lambda nn, x: nn.logsumexp(x, axis=-2, keepdims=True),
    "logsumexp(b)": lambda nn, x: nn.logsumexp(x, axis=1, b=SCALE.astype(x.dtype)),
    "logsumexp(b, return_sign)": lambda nn, x: nn.logsumexp(x, 0, SCALE.astype(x.dtype), return_sign=True),
    "logsumexp(where)": lambda nn, x: nn.logsumexp(x, axis=1, where=MASK),
    "logmeanexp": lambda nn, x: nn.logmeanexp(x, axis=1),
    "logmeanexp(where)": lambda nn, x: nn.logmeanexp(x, axis=0, where=MASK),
    "standardize": lambda nn, x: nn.standardize(x),
    "standardize(axis=0, stable)": lambda nn, x: nn.standardize(x, axis=0, algorithm="stable"),
    "standardize(axis=None, eps)": lambda nn, x: nn.standardize(x, axis=None, epsilon=0.5),
    "standardize(mean, variance)": lambda nn, x: nn.standardize(x, mean=0.5, variance=x * x + 1),
    "standardize(where)": lambda nn, x: nn.standardize(x, where=MASK),
    "glu": lambda nn, x: nn.glu(x),
    "glu(axis=0)": lambda nn, x: nn.glu(x, axis=0),
}

EDGES = [-np.inf, -100.0, -6.0, -3.0, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 3.0, 6.0, 100.0, np.inf, np.nan]


def points(dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Edge points and random points in [-8, 8], of ``dtype``."""
    rng = np.random.default_rng(0)
    return np.concatenate([EDGES, rng.uniform(-8, 8, 48)]).astype(dtype)


def matrix(dtype: np.dtype[Any], seed: int = 1) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).uniform(-4, 4, (4, 6)).astype(dtype)


# ------------------------------------------------------------------------------ checks


def assert_close(ours: Any, theirs: Any, dtype: np.dtype[Any], what: str, scale: Any = 0.0) -> None:
    """Equal to a tolerance of ``dtype``, relative to the expected value plus ``scale``
    (the magnitude of what cancelled, e.g. the input); NaNs and infinities must match."""
    a, e = np.asarray(ours).astype(np.float64), np.asarray(theirs).astype(np.float64)
    assert a.shape == e.shape, (what, a.shape, e.shape)
    tol = RTOL[dtype]
    with np.errstate(invalid="ignore"):
        ok = (a == e) | (np.isnan(a) & np.isnan(e)) | (np.abs(a - e) <= tol * (1 + np.abs(e) + scale))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, f"{what}: at {bad[:5]}, {a.ravel()[bad[:5]]} != {e.ravel()[bad[:5]]}"


# JAX raises an AssertionError for an odd glu axis; ferrax a ValueError.
JAX_TO_FERRAX: dict[type[BaseException], type[BaseException]] = {AssertionError: ValueError}


def assert_same_outcome(ours: list[TypeOf] | Exception, theirs: list[TypeOf] | Exception, what: str) -> None:
    assert_same_outcome_renamed(ours, theirs, what, JAX_TO_FERRAX)


OPERANDS: dict[str, Any] = {
    "float": 2.5,
    "int": 2,
    "bool": True,
    "np.float32": np.float32(-1.5),
    "f16[5]": np.linspace(-2, 2, 5).astype(np.float16),
    "bf16[5]": np.linspace(-2, 2, 5).astype(ml_dtypes.bfloat16),
    "f32[2,4]": matrix(F32)[:2, :4],
    "f64[4]": np.linspace(-3, 3, 4),
    "i32[4]": np.array([-2, 0, 3, 7], np.int32),
    "i64[4]": np.array([-2, 0, 3, 7], np.int64),
    "u8[3]": np.array([0, 3, 200], np.uint8),
    "bool[3]": np.array([True, False, True]),
}


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_types_as_jax(x64: bool) -> None:
    """Every case, over every kind of operand: JAX's dtype, weak type and shape, or an
    error of JAX's class."""
    cases = {
        **{k: v for k, v in ELEMENTWISE.items() if k not in ALIASES},
        **{k: v for k, v in AXES.items() if k in ("softmax", "log_softmax", "logsumexp", "logmeanexp", "standardize", "glu")},
    }
    with both_x64(x64):
        for kind, x in OPERANDS.items():
            theirs = jax_types(jax.nn, cases, x)
            for name, case in cases.items():
                ours = outcome(lambda: case(fnn, x))
                assert_same_outcome(ours, theirs[name], f"{name} of {kind}")


# Cases whose types are those of another case (the type test skips them).
ALIASES = ("swish", "hard_swish", "gelu(approximate=True)", "leaky_relu(0.2)", "squareplus(b=1)")
# Cases with custom derivative rules or kinks: their derivatives are also jitted.
KINKED = ("relu", "relu6", "softplus", "log_sigmoid", "hard_tanh", "hard_silu", "elu", "celu", "log1mexp")


def jax_compiled(f: Callable[..., Any], *args: Any) -> Any:
    """``jax.jit(f)(*args)``, compiled without LLVM's optimizations (the values are the
    same; the compilation is twice as fast)."""
    return jax.jit(f).lower(*args).compile({"xla_backend_optimization_level": 0})(*args)


def _all_cases(nn: Any, cases: dict[str, Case], x: Any) -> dict[str, Any]:
    return {name: case(nn, x) for name, case in cases.items()}


def _pointwise_grads(nn: Any, vmap: Any, grad: Any, xs: Any, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    return {
        name: vmap(grad(lambda x, c=case: c(nn, x)))(xs)
        for name, case in ELEMENTWISE.items()
        if only is None or name in only
    }


def _everything(
    nn: Any, vmap: Any, grad: Any, xs: Any, m: Any, only: tuple[str, ...] | None = None
) -> tuple[Any, Any, Any]:
    """Every case's values at the points ``xs`` and on the matrix ``m``, and the
    pointwise derivatives at ``xs`` (of the cases ``only``, if given)."""
    return _all_cases(nn, ELEMENTWISE, xs), _all_cases(nn, AXES, m), _pointwise_grads(nn, vmap, grad, xs, only)


def assert_all_close(
    ours: Any, theirs: Any, dtype: np.dtype[Any], how: str, check_types: bool = True, scales: Any = (0.0,) * 3
) -> None:
    for group_ours, group_theirs, scale in zip(ours, theirs, scales):
        assert group_ours.keys() == group_theirs.keys()
        for name in group_ours:
            for o, t in zip(tree_leaves(group_ours[name]), tree_leaves(group_theirs[name]), strict=True):
                if check_types:
                    assert type_of(o) == type_of(t), (how, name)
                assert_close(o, t, dtype, f"{how} {name}", scale if o.shape == np.shape(scale) else 0.0)


def test_values_and_derivatives_as_jax_x32() -> None:
    """All cases' values at edge and random points (float32, and float16 and bfloat16
    against JAX's float32 values at the same points), and their pointwise derivatives
    (JAX's custom rules included: relu at 0, relu6 at 0 and 6, softplus at infinities),
    eagerly, against JAX's jitted ones; and jitted (values, and the derivatives of the
    cases with kinks or custom rules): one compilation for JAX, one for ferrax.
    """
    low = [F32, F16, BF16]
    xs = np.stack([points(F32).astype(d).astype(F32) for d in low])
    ms = np.stack([matrix(F32).astype(d).astype(F32) for d in low])
    with both_x64(False):
        values = jax.vmap(lambda xs, m: _everything(jax.nn, jax.vmap, jax.grad, xs, m)[:2])
        theirs = jax_compiled(
            lambda xs, ms: (values(xs, ms), _everything(jax.nn, jax.vmap, jax.grad, xs[0], ms[0])[2]), xs, ms
        )
        for i, d in enumerate(low):
            ours = _everything(fnn, ferrax.vmap, ferrax.grad, xs[i].astype(d), ms[i].astype(d))
            reference = tree_map(lambda t: t[i], theirs[0])
            # JAX's float32 results at the low-precision points: no type check for those,
            # and errors relative to the inputs too (squareplus(-100) cancels in float16).
            scales = (np.abs(xs[i]), 4.0) if d != F32 else (0.0, 0.0)
            assert_all_close(ours[:2], reference, d, f"eager {d}", check_types=d == F32, scales=scales)
            if d == F32:
                assert_all_close(ours[2:], theirs[1:], d, "eager grad")
        jitted = ferrax.jit(lambda xs, m: _everything(fnn, ferrax.vmap, ferrax.grad, xs, m, KINKED))(xs[0], ms[0])
        assert_all_close(jitted[:2], tree_map(lambda t: t[0], theirs[0]), F32, "jit")
        assert_all_close(jitted[2:], ({k: theirs[1][k] for k in KINKED},), F32, "jit grad")


def test_values_and_derivatives_as_jax_x64() -> None:
    """The same in float64 with x64 on, eagerly, against JAX's jitted values (the
    derivatives of the cases with kinks or custom rules)."""
    xs, m = points(F64), matrix(F64)
    with both_x64(True):
        theirs = jax_compiled(lambda xs, m: _everything(jax.nn, jax.vmap, jax.grad, xs, m, KINKED), xs, m)
        ours = _everything(fnn, ferrax.vmap, ferrax.grad, xs, m, KINKED)
        assert_all_close(ours, theirs, F64, "eager x64")


def test_relu_derivative_is_zero_at_kinks() -> None:
    """The custom rules themselves: relu'(0) = 0, relu6'(0) = relu6'(6) = 0, by jvp and
    by grad (a max-based derivative would give 0.5 or 1)."""
    assert float(ferrax.grad(fnn.relu)(0.0)) == 0.0
    assert float(ferrax.grad(fnn.relu)(1e-30)) == 1.0
    _, t = ferrax.jvp(fnn.relu6, (fnp.array([0.0, 6.0, 3.0]),), (fnp.ones(3),))
    np.testing.assert_array_equal(np.asarray(t), [0.0, 0.0, 1.0])
    assert float(ferrax.grad(fnn.hard_sigmoid)(-3.0)) == 0.0


# Reductions differentiated at hard points: logits of -inf, masked-out elements, all
# -inf rows. Each case is differentiated as sum(weights * f(x)).
NEG_INF_LOGITS = np.array(
    [[0.5, -np.inf, 2.0, -1.0], [-np.inf, -np.inf, -np.inf, -np.inf], [3.0, 1.0, -np.inf, 0.0]], np.float32
)
ROW_MASK = np.array([[True, True, False, True], [True, False, True, True], [False, False, False, False]])
B_WITH_ZEROS = np.array([[1.0, 0.0, 2.0, 0.5], [0.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.0, 2.0]], np.float32)
HARD: dict[str, Case] = {
    "softmax(-inf)": lambda nn, x: nn.softmax(x[::2]),
    "softmax(all -inf row)": lambda nn, x: nn.softmax(x),
    "softmax(where)": lambda nn, x: nn.softmax(x, where=ROW_MASK),
    "log_softmax(-inf)": lambda nn, x: nn.log_softmax(x[::2]),
    "log_softmax(where)": lambda nn, x: nn.log_softmax(x[::2], where=ROW_MASK[::2]),
    "logsumexp(-inf)": lambda nn, x: nn.logsumexp(x[::2], axis=1),
    "logsumexp(all -inf row)": lambda nn, x: nn.logsumexp(x, axis=1),
    "logsumexp(where)": lambda nn, x: nn.logsumexp(x, axis=1, where=ROW_MASK),
    "logsumexp(b with zeros)": lambda nn, x: nn.logsumexp(x, axis=0, b=B_WITH_ZEROS),
    "standardize(where)": lambda nn, x: nn.standardize(nn.relu(x[::2]) + B_WITH_ZEROS[::2], where=ROW_MASK[::2]),
}


def weights(shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    n = int(np.prod(shape))
    return np.linspace(0.5, 2.0, n).reshape(shape).astype(np.float32)


# Also differentiated under ferrax.jit.
JITTED_HARD = ("softmax(all -inf row)", "log_softmax(where)", "logsumexp(all -inf row)")


def _hard_grads(nn: Any, grad: Any, x: Any, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    def loss(case: Case) -> Callable[[Any], Any]:
        def f(x: Any) -> Any:
            y = case(nn, x)
            return (y * weights(y.shape)).sum()

        return f

    return {
        name: (case(nn, x), grad(loss(case))(x)) for name, case in HARD.items() if only is None or name in only
    }


def test_softmax_family_derivatives_at_infinities() -> None:
    """Values and gradients of the softmax family where logits are -inf, rows are all
    -inf, or elements are masked out, as JAX's (finite where JAX's are); eagerly, and
    a few under jit."""
    x = NEG_INF_LOGITS
    theirs = jax_compiled(lambda x: _hard_grads(jax.nn, jax.grad, x), x)
    eager = _hard_grads(fnn, ferrax.grad, x)
    jitted = ferrax.jit(lambda x: _hard_grads(fnn, ferrax.grad, x, JITTED_HARD))(x)
    assert eager.keys() == theirs.keys()
    for how, ours in (("eager", eager), ("jit", jitted)):
        for name in ours:
            for what, o, t in zip(("value", "grad"), ours[name], theirs[name], strict=True):
                assert_close(o, t, F32, f"{how} {what} {name}")


# ----------------------------------------------------------------------------- one_hot

ONE_HOT: dict[str, Case] = {
    "default": lambda nn, x: nn.one_hot(x, 5),
    "axis=0": lambda nn, x: nn.one_hot(x, 4, axis=0),
    "axis=1": lambda nn, x: nn.one_hot(x, 3, axis=1),
    "axis=-2": lambda nn, x: nn.one_hot(x, 3, axis=-2),
    "int8": lambda nn, x: nn.one_hot(x, 5, dtype=np.int8),
    "bool": lambda nn, x: nn.one_hot(x, 5, dtype=np.bool_),
    "float16": lambda nn, x: nn.one_hot(x, 5, dtype=np.float16),
    "bfloat16": lambda nn, x: nn.one_hot(x, 2, dtype=ml_dtypes.bfloat16),
    "uint8 classes 0": lambda nn, x: nn.one_hot(x, 0, dtype=np.uint8),
}
INDICES: dict[str, Any] = {
    "i32[2,3]": np.array([[0, 4, -1], [5, 2, 3]], np.int32),
    "u8[4]": np.array([0, 1, 2, 255], np.uint8),
    "i64[3]": np.array([3, -7, 1], np.int64),
    "int": 2,
}


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_one_hot_as_jax(x64: bool) -> None:
    """Values (out-of-range indices give zero rows), dtypes and shapes as JAX's, for
    every index dtype, class count, dtype and axis (JAX's values in one compilation)."""
    with both_x64(x64):
        combos = [(name, kind) for name in ONE_HOT for kind in INDICES]
        ours = {c: outcome(lambda: ONE_HOT[c[0]](fnn, INDICES[c[1]])) for c in combos}
        theirs = {c: outcome(lambda: jax.eval_shape(lambda: ONE_HOT[c[0]](jax.nn, INDICES[c[1]]))) for c in combos}
        for c in combos:
            assert_same_outcome(ours[c], theirs[c], f"one_hot {c}")
        ok = [c for c in combos if not isinstance(theirs[c], BaseException)]
        values = jax_compiled(lambda: [ONE_HOT[name](jax.nn, INDICES[kind]) for name, kind in ok])
        for c, v in zip(ok, values, strict=True):
            np.testing.assert_array_equal(np.asarray(ONE_HOT[c[0]](fnn, INDICES[c[1]])), np.asarray(v), str(c))


def test_one_hot_under_transformations() -> None:
    """one_hot under jit and vmap, and over a vmap axis name (each member compares the
    indices with its own position), as JAX's."""
    x = np.array([[0, 2, 1], [1, 1, 0]], np.int32)
    ours = ferrax.jit(lambda x: fnn.one_hot(x, 3))(x)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(jax.nn.one_hot(x, 3)))
    named = ferrax.vmap(lambda i: fnn.one_hot(i, 2, axis="b"), axis_name="b")(x)
    theirs = jax.vmap(lambda i: jax.nn.one_hot(i, 2, axis="b"), axis_name="b")(x)
    assert type_of(named) == type_of(theirs)
    np.testing.assert_array_equal(np.asarray(named), np.asarray(theirs))
    with pytest.raises(ValueError, match="num_classes"):
        ferrax.vmap(lambda i: fnn.one_hot(i, 3, axis="b"), axis_name="b")(x)


# ------------------------------------------------------------------------------ errors

ERRORS: dict[str, Case] = {
    "softmax of a scalar": lambda nn, x: nn.softmax(1.0),
    "softmax axis out of range": lambda nn, x: nn.softmax(x, axis=2),
    "log_softmax repeated axis": lambda nn, x: nn.log_softmax(x, axis=(0, 0)),
    "logsumexp of a list": lambda nn, x: nn.logsumexp([1.0, 2.0]),
    "logsumexp axis out of range": lambda nn, x: nn.logsumexp(x, axis=-3),
    "relu of a list": lambda nn, x: nn.relu([1.0]),
    "relu6 of a list": lambda nn, x: nn.relu6([1.0]),
    "gelu of a list": lambda nn, x: nn.gelu([1.0]),
    "elu of a string": lambda nn, x: nn.elu("x"),
    "sigmoid of integers": lambda nn, x: nn.sigmoid(np.arange(3)),
    "glu of an odd axis": lambda nn, x: nn.glu(x[:, :3]),
    "glu axis out of range": lambda nn, x: nn.glu(x, axis=4),
    "standardize unknown algorithm": lambda nn, x: nn.standardize(x, algorithm="slow"),
    "standardize mean as a list": lambda nn, x: nn.standardize(x, mean=[0.0]),
    "one_hot axis out of range": lambda nn, x: nn.one_hot(np.arange(3), 3, axis=2),
    "one_hot num_classes not an int": lambda nn, x: nn.one_hot(np.arange(3), 2.5),
    "softmax shape mismatch of where": lambda nn, x: nn.softmax(x, where=np.ones(5, bool)),
}


def test_errors_as_jax() -> None:
    """Bad arguments raise JAX's exception class (a ValueError where JAX asserts), with
    a message that names the user's line."""
    x = matrix(F32)
    for name, case in ERRORS.items():
        theirs = outcome(lambda: case(jax.nn, x))
        assert isinstance(theirs, BaseException), name
        with pytest.raises(JAX_TO_FERRAX.get(type(theirs), type(theirs))) as info:
            case(fnn, x)
        assert "test_nn.py" in str(info.value), (name, str(info.value))


def test_traced_num_classes_and_float_indices() -> None:
    """A traced num_classes is a ConcretizationError (JAX's ConcretizationTypeError is
    a TypeError too); float indices warn as JAX does (a DeprecationWarning)."""
    with pytest.raises(ferrax.ConcretizationError, match="num_classes"):
        ferrax.jit(lambda n: fnn.one_hot(np.arange(3), n))(3)
    with pytest.warns(DeprecationWarning, match="integer-typed"):
        out = fnn.one_hot(np.array([0.0, 1.7]), 2)
    np.testing.assert_array_equal(np.asarray(out), [[1.0, 0.0], [0.0, 0.0]])


# ------------------------------------------------------------------------ initializers

INITIALIZERS: dict[str, Callable[[Any], Any]] = {
    "zeros": lambda init: init.zeros,
    "ones": lambda init: init.ones,
    "constant": lambda init: init.constant(-0.5),
    "constant(int)": lambda init: init.constant(3, dtype=np.int32),
    "uniform": lambda init: init.uniform(),
    "normal(0.5)": lambda init: init.normal(stddev=0.5),
    "glorot_uniform": lambda init: init.glorot_uniform(),
    "he_uniform": lambda init: init.he_uniform(),
    "kaiming_uniform(batch_axis=0)": lambda init: init.kaiming_uniform(batch_axis=0),
    "lecun_uniform": lambda init: init.lecun_uniform(in_axis=(0,), out_axis=-1),
    "variance_scaling(fan_out, normal)": lambda init: init.variance_scaling(0.3, "fan_out", "normal"),
    "variance_scaling(fan_geo_avg, uniform)": lambda init: init.variance_scaling(2.0, "fan_geo_avg", "uniform"),
}
TRUNCATED: dict[str, Callable[[Any], Any]] = {
    "truncated_normal": lambda init: init.truncated_normal(),
    "truncated_normal(1, -1, 3)": lambda init: init.truncated_normal(1.0, lower=-1.0, upper=3.0),
    "glorot_normal": lambda init: init.glorot_normal(),
    "he_normal": lambda init: init.he_normal(),
    "lecun_normal": lambda init: init.lecun_normal(),
    "variance_scaling(fan_avg, truncated_normal)": lambda init: init.variance_scaling(1.5, "fan_avg", "truncated_normal"),
}
INIT_SHAPES = [(3, 4), (2, 3, 5)]
# A few initializers for the other dtypes (the dtype handling is shared by all).
FEW = ("constant", "uniform", "normal(0.5)", "glorot_uniform", "truncated_normal", "he_normal")
ALL_INITIALIZERS = list(INITIALIZERS) + list(TRUNCATED)


def _initialized(init: Any, random: Any, seed: Any, dtype: Any, cases: dict[str, Callable[[Any], Any]]) -> dict[str, Any]:
    """Each case drawn with its own key (the seed's key folded with the case's index), in
    one of the shapes."""
    out = {}
    for name, make in cases.items():
        i = ALL_INITIALIZERS.index(name)
        out[name] = make(init)(random.fold_in(random.key(seed), i), INIT_SHAPES[i % len(INIT_SHAPES)], dtype)
    return out


@pytest.mark.parametrize("dtype", [None, F16, BF16, F64], ids=["default", "float16", "bfloat16", "float64"])
def test_initializers_as_jax(dtype: Any) -> None:
    """Every initializer (a few for the non-default dtypes): JAX's bits for the same key
    (the same draws, scaled alike), dtypes and weak types, eagerly; the default dtype
    also under jit."""
    random = pytest.importorskip("ferrax.random")
    import ferrax.nn.initializers as finit
    import jax.nn.initializers as jinit

    cases = dict(INITIALIZERS)
    cases.update(TRUNCATED)
    if dtype is not None:
        cases = {k: v for k, v in cases.items() if k in FEW}
    with both_x64(dtype == F64):
        theirs = jax_compiled(lambda seed: _initialized(jinit, jax.random, seed, dtype, cases), np.uint32(7))
        eager = _initialized(finit, random, np.uint32(7), dtype, cases)
        runs = [("eager", eager)]
        assert eager.keys() == theirs.keys()
        if dtype is None:
            few = {k: v for k, v in cases.items() if k in FEW}
            jitted = ferrax.jit(lambda s: _initialized(finit, random, s, dtype, few))(np.uint32(7))
            runs.append(("jit", jitted))
        for how, ours in runs:
            assert ours.keys() <= theirs.keys()
            for name in ours:
                want = theirs[name]
                assert type_of(ours[name]) == type_of(want), (how, name)
                tol = RTOL.get(np.dtype(want.dtype), 0.0) / 4
                np.testing.assert_allclose(
                    np.asarray(ours[name]).astype(np.float64), np.asarray(want).astype(np.float64),
                    rtol=tol, atol=tol, err_msg=f"{how} {name}",
                )


def test_initializer_errors_as_jax() -> None:
    """Fans of a 1-d shape, unknown modes and distributions, axes outside the shape:
    JAX's exception classes, naming the user's line."""
    random = pytest.importorskip("ferrax.random")
    import ferrax.nn.initializers as finit
    import jax.nn.initializers as jinit

    bad: dict[str, Callable[[Any, Any], Any]] = {
        "1-d shape": lambda init, key: init.glorot_uniform()(key, (5,)),
        "mode": lambda init, key: init.variance_scaling(1.0, "fan_max", "normal")(key, (2, 2)),
        "distribution": lambda init, key: init.variance_scaling(1.0, "fan_in", "cauchy")(key, (2, 2)),
        "in_axis": lambda init, key: init.lecun_uniform(in_axis=3)(key, (2, 2)),
    }
    for name, call in bad.items():
        theirs = outcome(lambda: call(jinit, jax.random.key(0)))
        assert isinstance(theirs, BaseException), name
        with pytest.raises(type(theirs)) as info:
            call(finit, random.key(0))
        assert "test_nn.py" in str(info.value), (name, str(info.value))
    assert isinstance(finit.he_normal(), finit.Initializer)
    assert finit.xavier_uniform is finit.glorot_uniform and finit.xavier_normal is finit.glorot_normal
    assert finit.kaiming_uniform is finit.he_uniform and finit.kaiming_normal is finit.he_normal
    np.testing.assert_array_equal(np.asarray(finit.ones(None, (2,))), [1.0, 1.0])


# --------------------------------------------------------------------------- attention

_rng = np.random.default_rng(5)
B, T, S, N, K, H = 2, 5, 6, 4, 2, 3
Q, KEY, V = (_rng.standard_normal(s).astype(np.float32) for s in ((B, T, N, H), (B, S, K, H), (B, S, K, H)))
BIAS = _rng.standard_normal((B, N, T, S)).astype(np.float32)
BIAS_1 = _rng.standard_normal((1, 1, T, S)).astype(np.float32)
ATT_MASK = _rng.integers(0, 2, (B, 1, T, S)).astype(bool)
ATTENTION: dict[str, Callable[[Any, Any, Any, Any], Any]] = {
    "plain": lambda nn, q, k, v: nn.dot_product_attention(q, k, v),
    "bias": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, BIAS),
    "one-head bias, mask, scale": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, BIAS_1, ATT_MASK, scale=0.3),
    "causal": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, is_causal=True),
    "window": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, local_window_size=(1, 2)),
    "window 1, causal": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, local_window_size=1, is_causal=True),
    "sequence lengths": lambda nn, q, k, v: nn.dot_product_attention(
        q, k, v, query_seq_lengths=np.array([3, 5], np.int32), key_value_seq_lengths=np.array([6, 2], np.int32)
    ),
    "residual": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, mask=ATT_MASK, return_residual=True),
    "unbatched": lambda nn, q, k, v: nn.dot_product_attention(q[0], k[0], v[0], is_causal=True),
}
# Half-precision operands: JAX's jitted attention fails on CPU for them (it asks for the
# F16_F16_F32 dot algorithm, which XLA's CPU backend refuses; eagerly JAX falls back), so
# ferrax's values are compared with JAX's at the same points in float32, and the types
# with JAX's traced ones.
LOW_ATTENTION: dict[str, Callable[[Any, Any, Any, Any], Any]] = {
    "float16": lambda nn, q, k, v: nn.dot_product_attention(q, k, v),
    "bfloat16": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, is_causal=True),
}


# The cases also run under ferrax.jit (with the gradient).
JITTED_ATTENTION = ("one-head bias, mask, scale", "sequence lengths", "residual", "bfloat16")


def _attention_all(
    nn: Any, grad: Any, q: Any, k: Any, v: Any, only: tuple[str, ...] | None = None
) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    def loss(q: Any, k: Any, v: Any) -> Any:
        return (nn.dot_product_attention(q, k, v, BIAS, is_causal=True) ** 2).sum()

    low: dict[str, Any] = {}
    for (name, case), d in zip(LOW_ATTENTION.items(), (F16, BF16)):
        if only is not None and name not in only:
            continue
        # ferrax in the low dtype, JAX in float32 at the same points.
        ops = [a.astype(d) if nn is fnn else a.astype(d).astype(F32) for a in (q, k, v)]
        low[name] = case(nn, *ops)
    values = {name: case(nn, q, k, v) for name, case in ATTENTION.items() if only is None or name in only}
    return values, grad(loss, argnums=(0, 1, 2))(q, k, v), low


def test_dot_product_attention_as_jax() -> None:
    """Grouped-query attention with biases, masks, causal and windowed masks, sequence
    lengths, the residual, unbatched and half-precision operands, and its gradient:
    JAX's values and types, eagerly and jitted."""
    theirs = jax_compiled(lambda q, k, v: _attention_all(jax.nn, jax.grad, q, k, v), Q, KEY, V)
    eager = _attention_all(fnn, ferrax.grad, Q, KEY, V)
    jitted = ferrax.jit(lambda q, k, v: _attention_all(fnn, ferrax.grad, q, k, v, JITTED_ATTENTION))(Q, KEY, V)
    for how, ours in (("eager", eager), ("jit", jitted)):
        for name in ours[0]:
            for o, t in zip(tree_leaves(ours[0][name]), tree_leaves(theirs[0][name]), strict=True):
                assert type_of(o) == type_of(t), (how, name)
                assert_close(o, t, np.dtype(t.dtype), f"{how} {name}")
        for o, t in zip(ours[1], theirs[1], strict=True):
            assert_close(o, t, F32, f"{how} grad")
        for (name, case), d in zip(LOW_ATTENTION.items(), (F16, BF16)):
            if name not in ours[2]:
                continue
            want = jax.eval_shape(lambda q, k, v: case(jax.nn, q, k, v), *(a.astype(d) for a in (Q, KEY, V)))
            assert type_of(ours[2][name]) == type_of(want), (how, name)
            assert_close(ours[2][name], theirs[2][name], d, f"{how} {name}")


def test_dot_product_attention_errors_as_jax() -> None:
    """Operands that do not fit raise JAX's ValueError, naming the user's line."""
    bad: dict[str, Callable[[Any], Any]] = {
        "value dtype": lambda nn: nn.dot_product_attention(Q, KEY, V.astype(np.float16)),
        "query head size": lambda nn: nn.dot_product_attention(Q[..., :2], KEY, V),
        "heads not a multiple": lambda nn: nn.dot_product_attention(Q[:, :, :3], KEY, V),
        "float mask": lambda nn: nn.dot_product_attention(Q, KEY, V, mask=ATT_MASK.astype(np.float32)),
        "int64 lengths": lambda nn: nn.dot_product_attention(Q, KEY, V, query_seq_lengths=np.array([1, 2], np.int8)),
        "lengths shape": lambda nn: nn.dot_product_attention(Q, KEY, V, key_value_seq_lengths=np.array([1, 2, 3], np.int32)),
        "implementation": lambda nn: nn.dot_product_attention(Q, KEY, V, implementation="tpu"),
    }
    for name, call in bad.items():
        theirs = outcome(lambda: call(jax.nn))
        assert isinstance(theirs, ValueError), (name, theirs)
        with pytest.raises(ValueError) as info:
            call(fnn)
        assert "test_nn.py" in str(info.value), (name, str(info.value))
