"""Mistakes with the differentiation API: each raises the exception class JAX raises
(ferrax's error is an instance of that builtin class), with a message naming this file
and the line of the mistake, and no internal class name.

As in tests/test_errors.py, each mistake is one line: a function of a namespace ``m``
(ferrax's or JAX's ``numpy``, ``lax``, ``jit`` and differentiation functions) making the
mistake on that line, so the expected line is the function's own.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import ferrax as fx
import ferrax.numpy as fnp
from test_errors import INTERNAL, _raised


class Mistake(NamedTuple):
    name: str
    make: Callable[[Any], Any]
    # JAX's builtin exception class for this mistake.
    expected: type[BaseException]


def _ns(np_: Any, lax_: Any, api: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        np=np_,
        lax=lax_,
        jit=api.jit,
        grad=api.grad,
        value_and_grad=api.value_and_grad,
        vjp=api.vjp,
        jvp=api.jvp,
        linearize=api.linearize,
        custom_vjp=api.custom_vjp,
        custom_jvp=api.custom_jvp,
    )


FERRAX = _ns(fnp, fx.lax, fx)
F3 = np.linspace(0.5, 1.5, 3, dtype=np.float32)
F4 = np.ones(4, np.float32)
H3 = F3.astype(np.float16)
I3 = np.arange(3, dtype=np.int32)


def _while(m: Any, x: Any) -> Any:
    return m.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)


def _custom_vjp(m: Any, bwd: Callable[[Any, Any], Any]) -> Any:
    """``x * 2`` as a custom_vjp function with the backward rule ``bwd``."""
    f = m.custom_vjp(lambda x: x * 2.0)
    f.defvjp(lambda x: (x * 2.0, None), bwd)
    return f


def _custom_jvp(m: Any, rule: Callable[[Any, Any], Any] | None) -> Any:
    """``x * 2`` as a custom_jvp function with the JVP rule ``rule`` (none if None)."""
    f = m.custom_jvp(lambda x: x * 2.0)
    if rule is not None:
        f.defjvp(rule)
    return f


# fmt: off
MISTAKES: list[Mistake] = [
    Mistake("grad of a non-scalar output", lambda m: m.grad(lambda x: x * 2.0)(F3), TypeError),
    Mistake("grad of a 1-element vector output", lambda m: m.grad(lambda x: x[:1] * 2.0)(F3), TypeError),
    Mistake("grad of a tuple output", lambda m: m.grad(lambda x: (x * 2.0, x))(1.0), TypeError),
    Mistake("grad of an integer input", lambda m: m.grad(lambda x: x * 2)(3), TypeError),
    Mistake("grad of an integer array input", lambda m: m.grad(lambda x: m.np.sum(x * 2.0))(I3), TypeError),
    Mistake("grad of a boolean input", lambda m: m.grad(lambda x: m.np.sum(m.np.where(x, 1.0, 2.0)))(F3 > 1), TypeError),
    Mistake("grad of an integer input by argnums", lambda m: m.grad(lambda x, i: x * i, argnums=1)(1.0, 2), TypeError),
    Mistake("grad of an integer leaf in a pytree", lambda m: m.grad(lambda d: d["x"] * d["n"])({"x": 1.0, "n": 2}), TypeError),
    Mistake("grad of an integer output", lambda m: m.grad(lambda x: m.np.argmax(x))(F3), TypeError),
    Mistake("grad of a boolean output", lambda m: m.grad(lambda x: m.np.sum(x) > 1.0)(F3), TypeError),
    Mistake("value_and_grad of a non-scalar output", lambda m: m.value_and_grad(lambda x: m.np.sin(x))(F3), TypeError),
    Mistake("vjp_fn with a cotangent of the wrong shape", lambda m: m.vjp(lambda x: x * 2.0, F3)[1](F4), ValueError),
    Mistake("vjp_fn with a cotangent of the wrong dtype", lambda m: m.vjp(lambda x: x * 2.0, F3)[1](H3), ValueError),
    Mistake("vjp_fn with an integer cotangent", lambda m: m.vjp(lambda x: x * 2.0, F3)[1](I3), ValueError),
    Mistake("vjp_fn with a scalar cotangent for a vector", lambda m: m.vjp(lambda x: m.np.sin(x), F3)[1](1.0), ValueError),
    Mistake("vjp_fn with a cotangent of the wrong tree", lambda m: m.vjp(lambda x: (x, x * 2.0), F3)[1](F3), ValueError),
    Mistake("vjp_fn with a list for a tuple", lambda m: m.vjp(lambda x: (x, x * 2.0), F3)[1]([F3, F3]), ValueError),
    Mistake("vjp_fn with a dict of other keys", lambda m: m.vjp(lambda x: {"a": x}, F3)[1]({"b": F3}), ValueError),
    Mistake("jvp with mismatched trees", lambda m: m.jvp(lambda x, y: x * y, (F3, F3), (F3,)), TypeError),
    Mistake("jvp with a dict tangent of other keys", lambda m: m.jvp(lambda d: d["a"], ({"a": F3},), ({"b": F3},)), TypeError),
    Mistake("jvp with a tangent of another dtype", lambda m: m.jvp(lambda x: x * 2.0, (F3,), (H3,)), TypeError),
    Mistake("jvp with a float tangent for an integer primal", lambda m: m.jvp(lambda x: x * 2, (I3,), (F3,)), TypeError),
    Mistake("jvp with a tangent of another shape", lambda m: m.jvp(lambda x: x * 2.0, (F3,), (F4,)), ValueError),
    Mistake("jvp with non-tuple primals", lambda m: m.jvp(lambda x: x * 2.0, F3, (F3,)), TypeError),
    Mistake("jvp with non-tuple tangents", lambda m: m.jvp(lambda x: x * 2.0, (F3,), F3), TypeError),
    Mistake("linearized function given a tangent of another shape", lambda m: m.linearize(lambda x: x * 2.0, F3)[1](F4), ValueError),
    Mistake("grad with has_aux, no pair returned", lambda m: m.grad(lambda x: x * 2.0, has_aux=True)(1.0), TypeError),
    Mistake("grad with has_aux, a triple returned", lambda m: m.grad(lambda x: (x, x, x), has_aux=True)(1.0), TypeError),
    Mistake("value_and_grad with has_aux, no pair returned", lambda m: m.value_and_grad(lambda x: m.np.sum(x), has_aux=True)(F3), TypeError),
    Mistake("vjp with has_aux, no pair returned", lambda m: m.vjp(lambda x: x * 2.0, F3, has_aux=True), TypeError),
    Mistake("jvp with has_aux, no pair returned", lambda m: m.jvp(lambda x: x * 2.0, (F3,), (F3,), has_aux=True), TypeError),
    Mistake("argnums beyond the arguments", lambda m: m.grad(lambda x: x * 2.0, argnums=1)(1.0), TypeError),
    Mistake("argnums tuple beyond the arguments", lambda m: m.grad(lambda x, y: x * y, argnums=(0, 3))(1.0, 2.0), TypeError),
    Mistake("negative argnums beyond the arguments", lambda m: m.value_and_grad(lambda x: x * 2.0, argnums=-2)(1.0), ValueError),
    Mistake("negative argnums in a tuple beyond the arguments", lambda m: m.grad(lambda x, y: x * y, argnums=(0, -3))(1.0, 2.0), ValueError),
    Mistake("grad of a function returning None", lambda m: m.grad(lambda x: None)(1.0), TypeError),
    Mistake("grad of a string argument", lambda m: m.grad(lambda x: 1.0)("a"), TypeError),
    Mistake("grad with argnums of the wrong type", lambda m: m.grad(lambda x: x * 2.0, argnums=0.5)(1.0), TypeError),
    Mistake("grad of something not callable", lambda m: m.grad(3), TypeError),
    Mistake("jvp of something not callable", lambda m: m.jvp(3, (1.0,), (1.0,)), TypeError),
    Mistake("jvp with a list of tangents for a tuple of primals", lambda m: m.jvp(lambda x, y: x * y, (1.0, 2.0), [1.0, 1.0]), TypeError),
    Mistake("jvp with an integer tangent for an integer primal", lambda m: m.jvp(lambda x: x * 2, (I3,), (I3,)), TypeError),
    Mistake("vjp_fn called with two cotangents", lambda m: m.vjp(lambda x: x * 2.0, 1.0)[1](1.0, 2.0), TypeError),
    Mistake("linearized function given a tangent of another dtype", lambda m: m.linearize(lambda x: x * 2.0, F3)[1](H3), ValueError),
    Mistake("linearized function given two tangents for one primal", lambda m: m.linearize(lambda x: x * 2.0, F3)[1](F3, F3), TypeError),
    Mistake("custom_vjp bwd returning a bare cotangent", lambda m: m.grad(_custom_vjp(m, lambda r, g: g))(1.0), TypeError),
    Mistake("custom_vjp bwd returning too many cotangents", lambda m: m.grad(_custom_vjp(m, lambda r, g: (g, g)))(1.0), TypeError),
    Mistake("custom_vjp bwd returning a cotangent of the wrong shape", lambda m: m.grad(_custom_vjp(m, lambda r, g: (m.np.ones(3),)))(1.0), ValueError),
    Mistake("jvp of a custom_vjp function", lambda m: m.jvp(_custom_vjp(m, lambda r, g: (g,)), (1.0,), (1.0,)), TypeError),
    Mistake("custom_vjp fwd returning no pair", lambda m: (lambda f: (f.defvjp(lambda x: x, lambda r, g: (g,)), m.grad(f)(1.0)))(m.custom_vjp(lambda x: x * 2.0)), TypeError),
    Mistake("custom_jvp rule returning a tangent of the wrong shape", lambda m: m.jvp(_custom_jvp(m, lambda p, t: (p[0] * 2.0, m.np.ones(3))), (1.0,), (1.0,)), TypeError),
    Mistake("custom_jvp rule returning a tangent of the wrong dtype", lambda m: m.jvp(_custom_jvp(m, lambda p, t: (p[0] * 2.0, m.np.ones((), np.float16))), (1.0,), (1.0,)), TypeError),
    Mistake("custom_jvp rule returning no pair", lambda m: m.jvp(_custom_jvp(m, lambda p, t: p[0] * 2.0), (1.0,), (1.0,)), TypeError),
    Mistake("custom_jvp rule returning primal and tangent of different trees", lambda m: m.jvp(_custom_jvp(m, lambda p, t: ((p[0], p[0]), t[0])), (1.0,), (1.0,)), TypeError),
    Mistake("custom_jvp function differentiated without a rule", lambda m: m.grad(_custom_jvp(m, None))(1.0), AttributeError),
    Mistake("grad through while_loop", lambda m: m.grad(lambda x: _while(m, x))(1.0), ValueError),
    Mistake("vjp through while_loop in jit", lambda m: m.vjp(m.jit(lambda x: _while(m, x) * 3.0), 1.0)[1](1.0), ValueError),
    Mistake("grad through fori_loop with traced bounds", lambda m: m.grad(m.jit(lambda x, n: m.lax.fori_loop(0, n, lambda i, c: c * x, 1.0)))(2.0, 3), ValueError),
]
# fmt: on


def _line_of(mistake: Mistake) -> int:
    return mistake.make.__code__.co_firstlineno


def test_the_list_is_distinct() -> None:
    assert len(MISTAKES) >= 30
    assert len({m.name for m in MISTAKES}) == len(MISTAKES)
    assert len({_line_of(m) for m in MISTAKES}) == len(MISTAKES)


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_mistake(mistake: Mistake) -> None:
    e = _raised(lambda: mistake.make(FERRAX))
    assert isinstance(e, mistake.expected), f"{type(e).__name__}: {e}"
    assert isinstance(e, fx.FerraxError) or type(e) is mistake.expected, f"{type(e).__name__}: {e}"
    message = str(e)
    where = f"{os.path.basename(__file__)}:{_line_of(mistake)}"
    assert where in message, message
    bad = INTERNAL.search(message)
    assert bad is None, f"internal name {bad.group(0)!r} in: {message}"


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_jax_raises_the_same_class(mistake: Mistake) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    e = _raised(lambda: mistake.make(_ns(jnp, jax.lax, jax)))
    assert isinstance(e, mistake.expected), f"JAX raised {type(e).__name__}: {e}"


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.grad(lambda x: _while(m, x))(1.0),
        lambda m: m.vjp(m.jit(lambda x: _while(m, x) * 3.0), 1.0)[1](1.0),
    ],
    ids=["grad", "vjp of jit"],
)
def test_reverse_mode_through_while_loop_says_what_to_use(make: Callable[[Any], Any]) -> None:
    e = _raised(lambda: make(FERRAX))
    assert isinstance(e, fx.FerraxError) and isinstance(e, ValueError), f"{type(e).__name__}: {e}"
    message = str(e)
    assert "while_loop" in message and "scan" in message and "fori_loop" in message, message
    assert "static" in message, message


def test_forward_mode_through_while_loop_works() -> None:
    # The same loop the reverse-mode mistakes use is fine forward.
    out, t = fx.jvp(lambda x: _while(FERRAX, x), (1.0,), (np.float32(1.0),))
    assert float(np.asarray(out)) == 16.0 and float(np.asarray(t)) == 16.0
