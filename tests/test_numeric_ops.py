"""``power``, ``floor_divide`` and ``remainder`` against ``jax.numpy`` over every pair of
operand kinds: bools become integers (JAX's numeric promotion), a concrete integer
exponent is ``integer_pow``, a float base keeps an integer exponent array as it is.
Compared: the exception class, or dtype, weak type and values, eagerly and under jit.

Compilations, not the checks, take the time: JAX's outcomes are computed per function in
two ``jax.jit``s (not one compilation, or several eager ones, per case), the eager calls
traced with their operands closed over (as concrete as eagerly: a concrete integer
exponent is still ``integer_pow``), the jitted calls with their operands as arguments;
ferrax's jitted calls likewise in one ``ferrax.jit`` per function. Each case is traced on
its own inside them, its exception caught there."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax as fx
import ferrax.numpy as fnp

OPERANDS: dict[str, Any] = {
    "bool[3]": np.array([True, False, True]),
    "int8[3]": np.array([3, -2, 0], np.int8),
    "uint8[3]": np.array([3, 2, 0], np.uint8),
    "int32[3]": np.array([5, -3, 2], np.int32),
    "float16[3]": np.array([1.5, -2.0, 0.5], np.float16),
    "float32[3]": np.array([2.5, -1.5, 3.0], np.float32),
    "int32[]": np.array(2, np.int32),
    "np.int8": np.int8(2),
    "np.float32": np.float32(1.5),
    "bool": True,
    "int": 3,
    "negative int": -2,
    "float": 0.5,
}
FUNCTIONS = ["power", "floor_divide", "remainder"]


def _outcome(f: Any, x: Any, y: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's and JAX's divide-by-zero notes
        try:
            r = f(x, y)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return type(e)
    return r


def _jitted(b: Any) -> bool:
    """Whether a case is also compared under jit: an array exponent or divisor (as a jit
    argument, a concrete exponent would no longer be concrete)."""
    return not isinstance(b, (bool, int, float, np.generic)) or np.ndim(b) > 0


PAIRS = [(x, y) for x in OPERANDS for y in OPERANDS]
JITTED_PAIRS = [(x, y) for x, y in PAIRS if _jitted(OPERANDS[y])]


def _outcomes(jit: Any, f: Any, pairs: list[tuple[str, str]], *, closed: bool) -> dict[tuple[str, str], Any]:
    """The outcome of ``f(x, y)`` of each pair of operands, all in one ``jit``: the
    operands closed over (as concrete as eagerly) or its arguments."""
    operands = {(x, y): (OPERANDS[x], OPERANDS[y]) for x, y in pairs}
    raised: dict[tuple[str, str], Any] = {}

    def run(ops: dict[tuple[str, str], tuple[Any, Any]]) -> dict[tuple[str, str], Any]:
        out = {}
        for pair in pairs:
            r = _outcome(f, *ops[pair])
            if isinstance(r, type):
                raised[pair] = r
            else:
                out[pair] = r
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = jit(lambda: run(operands))() if closed else jit(run)(operands)
    return {**results, **raised}


@functools.cache
def _jax_outcomes(name: str, jitted: bool) -> dict[tuple[str, str], Any]:
    """JAX's outcome of ``jnp.<name>(x, y)`` for every pair (with ``jitted``, of
    ``jax.jit(jnp.<name>)(x, y)`` for every pair compared under jit)."""
    return _outcomes(jax.jit, getattr(jnp, name), JITTED_PAIRS if jitted else PAIRS, closed=not jitted)


@functools.cache
def _ferrax_jitted(name: str) -> dict[tuple[str, str], Any] | None:
    """ferrax's outcome of ``ferrax.jit(fnp.<name>)(x, y)`` for every pair compared under
    jit; None if the one jit fails (each test then jits its own case)."""
    try:
        return _outcomes(fx.jit, getattr(fnp, name), JITTED_PAIRS, closed=False)
    except Exception:  # noqa: BLE001
        return None


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("y", list(OPERANDS))
@pytest.mark.parametrize("x", list(OPERANDS))
def test_numeric_binary_ops_as_jax_numpy(name: str, x: str, y: str) -> None:
    a, b = OPERANDS[x], OPERANDS[y]
    want = _jax_outcomes(name, False)[x, y]
    got = _outcome(getattr(fnp, name), a, b)
    if isinstance(want, type):
        builtin = next(c for c in want.__mro__ if c.__module__ == "builtins")
        assert isinstance(got, type) and issubclass(got, builtin), (want, got)
        return
    assert not isinstance(got, type), f"ferrax raised {got.__name__}"
    assert got.dtype == want.dtype and got.weak_type == want.weak_type, (got, want)
    if name == "power" and want.dtype.kind in "iu" and np.any(np.asarray(b) < 0):
        return  # an integer to a negative array power: implementation-defined in JAX
    _same_values(got, want)
    if _jitted(b):
        # Both operands as jit arguments (a concrete exponent is no longer concrete).
        ours = _ferrax_jitted(name)
        jitted = ours[x, y] if ours is not None else _outcome(fx.jit(getattr(fnp, name)), a, b)
        jax_jitted = _jax_outcomes(name, True)[x, y]
        if isinstance(jax_jitted, type):
            assert isinstance(jitted, type)
            return
        assert not isinstance(jitted, type), f"ferrax raised {jitted.__name__} under jit"
        assert jitted.dtype == jax_jitted.dtype
        if name == "power" and jitted.dtype.kind in "iu" and np.any(np.asarray(b) < 0):
            return
        _same_values(jitted, jax_jitted)


def _same_values(got: Any, want: Any) -> None:
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype.kind == "f":
        # Eager NumPy and XLA's pow may differ in the last bit.
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=2e-3 if g.dtype == np.float16 else 1e-6)
    else:
        np.testing.assert_array_equal(g, w)
