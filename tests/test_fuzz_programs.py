"""Differential fuzzing of the whole system (issue 10, item 3), with hypothesis.

A program is a list of steps drawn by hypothesis: each step applies one operation of
the table below (elementwise math, broadcasting against a reduction, reductions,
reshape/transpose, matmul, indexing, where, cond, scan, fori_loop, switch) to values
computed before, all float32 arrays of one shape. The table is written once against a
library namespace (``ferrax.numpy``/``ferrax.lax`` or ``jax.numpy``/``jax.lax``), so the
same program runs on both. Checked, per program:

- eager ferrax, ``ferrax.jit`` and JAX agree (values, dtypes, shapes, weak types);
- ``ferrax.grad`` of a scalar loss agrees with ``jax.grad``, eagerly and under jit, and
  ``ferrax.jvp`` with ``jax.jvp``; where JAX is no reference (reverse mode through
  ``while_loop``, which both refuse with a ValueError), forward mode is checked against
  central differences;
- ``ferrax.vmap`` agrees with a Python loop over the batch.

Deterministic (``derandomize=True``, no example database) and bounded
(``max_examples``), so CI runs the same programs every time in well under 90 s;
``FERRAX_FUZZ_EXAMPLES=500 pytest tests/test_fuzz_programs.py`` fuzzes longer, at random.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax

hypothesis = pytest.importorskip("hypothesis")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jlax = pytest.importorskip("jax.lax")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FERRAX = SimpleNamespace(np=fnp, lax=lax, name="ferrax")
JAX = SimpleNamespace(np=jnp, lax=jlax, name="jax")

SHAPES = [(), (3,), (4,), (2, 3), (3, 3), (2, 1, 3)]

Op = Callable[[Any, Any, Any], Any]


def _bounded(L: Any, x: Any) -> Any:
    """Keeps values in a range where every operation is smooth and finite."""
    return L.np.tanh(x) * 2.0


def _matmul(L: Any, a: Any, b: Any) -> Any:
    if a.ndim == 0:
        return a * b
    if a.ndim == 1:
        return a * L.np.dot(a, b)
    if a.ndim == 2:
        # (m, n) @ (n, m) @ (m, n): back to a's shape.
        return L.np.matmul(L.np.matmul(a, b.T), b) * 0.25
    return L.np.matmul(a, L.np.swapaxes(b, -1, -2)) @ b * 0.25


def _reverse(L: Any, a: Any) -> Any:
    return a if a.ndim == 0 else a[::-1]


def _gather(L: Any, a: Any) -> Any:
    if a.ndim == 0:
        return a
    n = a.shape[0]
    perm = np.array([(3 * i + 1) % n for i in range(n)], np.int32)
    return a[perm] + a[-1]


def _transpose_back(L: Any, a: Any) -> Any:
    # transpose then reshape to the original shape: moves elements around.
    return L.np.reshape(L.np.transpose(a), a.shape)


def _reduce_broadcast(reduction: str) -> Op:
    def op(L: Any, a: Any, b: Any) -> Any:
        axis = None if a.ndim == 0 else a.ndim - 1
        return a + getattr(L.np, reduction)(b, axis=axis, keepdims=True) * 0.5

    return op


def _cond(L: Any, a: Any, b: Any) -> Any:
    return L.lax.cond(L.np.sum(b) > 0, lambda u, v: L.np.sin(u) * v, lambda u, v: u - v * 0.5, a, b)


def _switch(L: Any, a: Any, b: Any) -> Any:
    index = L.np.clip(L.np.sum(b).astype(np.int32), 0, 2)
    branches = [lambda u: u * 2.0, lambda u: L.np.cos(u), lambda u: u - 1.0]
    return L.lax.switch(index, branches, a)


def _fori(L: Any, a: Any, b: Any) -> Any:
    return L.lax.fori_loop(0, 3, lambda i, c: c * 0.5 + L.np.sin(c + b), a)


def _while(L: Any, a: Any, b: Any) -> Any:
    # Reverse mode refuses while_loop (JAX's ValueError): forward mode and finite
    # differences check its derivatives instead.
    def body(c: tuple[Any, Any]) -> tuple[Any, Any]:
        return c[0] + 1, c[1] * 0.5 + L.np.sin(c[1] + b)

    return L.lax.while_loop(lambda c: c[0] < 3, body, (0, a))[1]


def _scan(L: Any, a: Any, b: Any) -> Any:
    xs = L.np.stack([b, b * 0.5, -b])

    def body(c: Any, x: Any) -> tuple[Any, Any]:
        c = L.np.tanh(c * x + c)
        return c, c * 2.0

    carry, ys = L.lax.scan(body, a, xs)
    return carry + L.np.sum(ys, axis=0)


# name -> (arity, function of (library, a, b)); unary operations ignore b.
OPS: dict[str, tuple[int, Op]] = {
    "sin": (1, lambda L, a, b: L.np.sin(a)),
    "cos": (1, lambda L, a, b: L.np.cos(a)),
    "tanh": (1, lambda L, a, b: L.np.tanh(a)),
    "exp": (1, lambda L, a, b: L.np.exp(-L.np.square(a))),
    "log1p": (1, lambda L, a, b: L.np.log1p(L.np.square(a))),
    "sqrt": (1, lambda L, a, b: L.np.sqrt(L.np.square(a) + 1.0)),
    "logistic": (1, lambda L, a, b: L.lax.logistic(a)),
    # Special functions (issue 12), on arguments inside their domains.
    "erf": (1, lambda L, a, b: L.lax.erf(a)),
    "erf_inv": (1, lambda L, a, b: L.lax.erf_inv(L.np.tanh(a) * 0.9)),
    "lgamma": (1, lambda L, a, b: L.lax.lgamma(L.np.square(a) + 0.5)),
    "igamma": (2, lambda L, a, b: L.lax.igamma(L.np.square(a) + 0.5, L.np.square(b) + 0.1)),
    "arcsinh": (1, lambda L, a, b: L.np.arcsinh(a)),
    "arctan2": (2, lambda L, a, b: L.np.arctan2(a, L.np.square(b) + 1.0)),
    "neg": (1, lambda L, a, b: -a),
    "scalar": (1, lambda L, a, b: 1.5 * a + 0.25),
    "add": (2, lambda L, a, b: a + b),
    "sub": (2, lambda L, a, b: a - b),
    "mul": (2, lambda L, a, b: a * b),
    "div": (2, lambda L, a, b: a / (1.0 + L.np.square(b))),
    "max": (2, lambda L, a, b: L.np.maximum(a, b + 0.125)),
    "where": (2, lambda L, a, b: L.np.where(a > b, a * 2.0, b)),
    "sum_b": (2, _reduce_broadcast("sum")),
    "mean_b": (2, _reduce_broadcast("mean")),
    "max_b": (2, _reduce_broadcast("max")),
    "matmul": (2, lambda L, a, b: _matmul(L, a, b)),
    "reverse": (1, lambda L, a, b: _reverse(L, a)),
    "gather": (1, lambda L, a, b: _gather(L, a)),
    "transpose": (1, lambda L, a, b: _transpose_back(L, a)),
    "reshape": (1, lambda L, a, b: L.np.reshape(L.np.reshape(a, (-1,)) * 1.0, a.shape)),
    "cond": (2, _cond),
    "switch": (2, _switch),
    "fori_loop": (2, _fori),
    "scan": (2, _scan),
    "while_loop": (2, _while),
    # Mixed dtypes: an int32 operand, a bool operand, Python ints (JAX's promotion).
    "int_mix": (2, lambda L, a, b: a + L.np.floor(b * 2.0).astype(np.int32) * 0.5),
    "bool_mix": (2, lambda L, a, b: a * (a > b) + 0.5 * b),
    "py_int": (1, lambda L, a, b: a * 2 - 1),
}


@dataclass(frozen=True)
class Program:
    """Steps ``(op, i, j)``: value ``n`` of the program is ``op`` applied to values
    ``i`` and ``j`` (indices below ``n``; the inputs come first)."""

    shape: tuple[int, ...]
    n_inputs: int
    steps: tuple[tuple[str, int, int], ...]
    dtype: str = "float32"

    def run(self, L: Any, *xs: Any) -> Any:
        # As library arrays: arithmetic on NumPy inputs would be NumPy's (and
        # jnp.reshape of a NumPy array is a NumPy array in JAX 0.10).
        values = [L.np.asarray(x) for x in xs]
        for name, i, j in self.steps:
            _, op = OPS[name]
            values.append(_bounded(L, op(L, values[i], values[j])))
        # Two outputs: the last value and a reduction of every value.
        return values[-1], sum(L.np.sum(v) for v in values[self.n_inputs :]) * 0.125

    def loss(self, L: Any, *xs: Any) -> Any:
        last, total = self.run(L, *xs)
        return L.np.sum(L.np.sin(last)) + total

    def __repr__(self) -> str:
        return f"Program({self.shape}, {self.n_inputs}, {self.steps}, {self.dtype!r})"


@st.composite
def programs(draw: st.DrawFn) -> Program:
    shape = draw(st.sampled_from(SHAPES))
    n_inputs = draw(st.integers(1, 2))
    n_steps = draw(st.integers(1, 5))
    steps = []
    for k in range(n_steps):
        available = n_inputs + k
        name = draw(st.sampled_from(sorted(OPS)))
        i = draw(st.integers(0, available - 1))
        j = draw(st.integers(0, available - 1)) if OPS[name][0] == 2 else i
        steps.append((name, i, j))
    dtype = draw(st.sampled_from(["float32", "float32", "float16", "bfloat16"]))
    return Program(shape, n_inputs, tuple(steps), dtype)


def _inputs(program: Program, seed: int, batch: tuple[int, ...] = ()) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    dtype = ferrax.dtypes.bfloat16 if program.dtype == "bfloat16" else np.dtype(program.dtype)
    return [rng.uniform(-1.5, 1.5, batch + program.shape).astype(dtype) for _ in range(program.n_inputs)]


# Tolerances (rtol, atol) of values and of derivatives, per input dtype.
TOLERANCE = {"float32": (2e-4, 2e-5, 1e-3, 1e-4), "float16": (2e-2, 2e-2, 5e-2, 5e-2), "bfloat16": (1e-1, 1e-1, 2e-1, 2e-1)}


# FERRAX_FUZZ_EXAMPLES=N: a longer, randomized run (to hunt for bugs, not in CI).
_EXAMPLES = int(os.environ.get("FERRAX_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_EXAMPLES or 25,
    derandomize=not _EXAMPLES,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _close(got: Any, want: Any, what: str, rtol: float = 2e-4, atol: float = 2e-5) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def check_values(program: Program, seed: int = 0) -> None:
    xs = _inputs(program, seed)
    rtol, atol, _, _ = TOLERANCE[program.dtype]
    # Eager against JAX's eager, jit against jax.jit: in low precision the two ways may
    # round differently (and a comparison may then flip).
    want_eager = program.run(JAX, *xs)
    want_jit = jax.jit(lambda *a: program.run(JAX, *a))(*xs)
    eager = program.run(FERRAX, *xs)
    jitted = ferrax.jit(lambda *a: program.run(FERRAX, *a))(*xs)
    for k, (e, j, we, wj) in enumerate(zip(eager, jitted, want_eager, want_jit, strict=True)):
        _close(e, we, f"output {k}, eager vs JAX", rtol, atol)
        _close(j, wj, f"output {k}, jit vs JAX", rtol, atol)
        assert e.weak_type == j.weak_type == wj.weak_type, f"output {k}: weak types"


def check_grad(program: Program, seed: int = 0) -> None:
    xs = _inputs(program, seed)
    argnums = tuple(range(program.n_inputs))
    check_jvp(program, xs)
    if any(name == "while_loop" for name, _, _ in program.steps):
        # JAX is no reference for reverse mode here: both refuse with a ValueError, and
        # forward mode is checked against finite differences.
        with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
            ferrax.grad(lambda *a: program.loss(FERRAX, *a), argnums=argnums)(*xs)
        with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
            jax.grad(lambda *a: program.loss(JAX, *a), argnums=argnums)(*xs)
        if program.dtype == "float32":  # differences in 16 bits are noise
            check_jvp_numerically(program, xs)
        return
    _, _, rtol, atol = TOLERANCE[program.dtype]
    want = jax.grad(lambda *a: program.loss(JAX, *a), argnums=argnums)(*xs)
    eager = ferrax.grad(lambda *a: program.loss(FERRAX, *a), argnums=argnums)(*xs)
    jitted = ferrax.jit(ferrax.grad(lambda *a: program.loss(FERRAX, *a), argnums=argnums))(*xs)
    for k, (e, j, w) in enumerate(zip(eager, jitted, want, strict=True)):
        _close(e, w, f"gradient {k}, eager vs JAX", rtol, atol)
        _close(j, w, f"gradient {k}, jit vs JAX", rtol, atol)


def _directions(xs: list[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(1)
    return [rng.uniform(-1.0, 1.0, x.shape).astype(x.dtype) for x in xs]


def check_jvp(program: Program, xs: list[np.ndarray[Any, Any]]) -> None:
    """Forward mode against ``jax.jvp`` (primal and tangent of the loss)."""
    ts = _directions(xs)
    primal, tangent = ferrax.jvp(lambda *a: program.loss(FERRAX, *a), tuple(xs), tuple(ts))
    want_primal, want_tangent = jax.jvp(lambda *a: program.loss(JAX, *a), tuple(xs), tuple(ts))
    vr, va, dr, da = TOLERANCE[program.dtype]
    _close(primal, want_primal, "jvp primal vs JAX", vr, va)
    _close(tangent, want_tangent, "jvp tangent vs JAX", dr, da)


def check_jvp_numerically(program: Program, xs: list[np.ndarray[Any, Any]]) -> None:
    """Forward mode against central differences of the loss (the float32 program, a
    step of 1e-3: rounding and curvature errors stay well inside the 5% tolerance,
    a wrong derivative rule does not)."""
    ts = _directions(xs)
    _, tangent = ferrax.jvp(lambda *a: program.loss(FERRAX, *a), tuple(xs), tuple(ts))
    eps = 1e-3
    plus = program.loss(FERRAX, *(x + eps * t for x, t in zip(xs, ts)))
    minus = program.loss(FERRAX, *(x - eps * t for x, t in zip(xs, ts)))
    numeric = (float(plus) - float(minus)) / (2 * eps)
    assert abs(float(tangent) - numeric) <= 0.05 * max(1.0, abs(numeric)), (float(tangent), numeric)


def check_vmap(program: Program, seed: int = 0) -> None:
    xs = _inputs(program, seed, batch=(3,))
    batched = ferrax.vmap(lambda *a: program.run(FERRAX, *a))(*xs)
    for lane in range(3):
        one = program.run(FERRAX, *(x[lane] for x in xs))
        for k, (b, o) in enumerate(zip(batched, one, strict=True)):
            _close(np.asarray(b)[lane], o, f"output {k}, lane {lane}, vmap vs loop", *TOLERANCE[program.dtype][:2])


@FUZZ
@given(programs())
def test_eager_jit_and_jax_agree(program: Program) -> None:
    check_values(program)


@FUZZ
@given(programs())
def test_grad_agrees_with_jax(program: Program) -> None:
    check_grad(program)


@FUZZ
@given(programs())
def test_vmap_agrees_with_a_loop(program: Program) -> None:
    check_vmap(program)


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_every_operation_once(name: str, shape: tuple[int, ...]) -> None:
    # Each table entry alone (hypothesis draws combinations; this makes sure none is
    # left out): values, gradients and vmap.
    arity = OPS[name][0]
    program = Program(shape, 2, ((name, 0, 1 if arity == 2 else 0),))
    check_values(program)
    check_grad(program)
    check_vmap(program)
