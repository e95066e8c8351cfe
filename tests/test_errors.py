"""Common mistakes: each raises JAX's exception class (a ferrax error that is an instance
of the builtin class JAX raises), with a message naming this file and the line of the
mistake, and no internal class name.

Each mistake is one line: a function of a namespace ``m`` (ferrax's or JAX's ``numpy``,
``lax``, ``jit``, ``make_jaxpr``) that makes the mistake on that line, so the expected
line is the line of the function itself (``__code__.co_firstlineno``).
"""

from __future__ import annotations

import ast
import os
import re
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import ferrax as fx
import ferrax.core
import ferrax.errors
import ferrax.lax
import ferrax.numpy as fnp
import ferrax.tree_util


class Mistake(NamedTuple):
    name: str
    make: Callable[[Any], Any]
    # JAX's builtin exception class for this mistake.
    expected: type[BaseException]


def _ns(np_: Any, lax: Any, jit: Any, make_jaxpr: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(np=np_, lax=lax, jit=jit, make_jaxpr=make_jaxpr)


FERRAX = _ns(fnp, fx.lax, fx.jit, fx.make_jaxpr)
F3 = np.ones(3, np.float32)
F4 = np.ones(4, np.float32)
F23 = np.ones((2, 3), np.float32)
F45 = np.ones((4, 5), np.float32)
I3 = np.arange(3, dtype=np.int32)


def _kept(store: list[Any], x: Any) -> Any:
    """``x``, also stored in ``store`` (how a traced value escapes its tracing)."""
    store.append(x)
    return x


# fmt: off
MISTAKES: list[Mistake] = [
    Mistake("add of shapes that do not broadcast", lambda m: m.np.asarray(F3) + m.np.asarray(F4), TypeError),
    Mistake("add of shapes that do not broadcast, traced", lambda m: m.make_jaxpr(lambda a, b: a + b)(F3, F4), TypeError),
    Mistake("add of shapes that do not broadcast, jit", lambda m: m.jit(lambda a, b: m.np.add(a, b))(F3, F4), TypeError),
    Mistake("matmul of mismatched inner sizes", lambda m: m.np.asarray(F23) @ m.np.asarray(F45), TypeError),
    Mistake("matmul of mismatched inner sizes, traced", lambda m: m.make_jaxpr(lambda a, b: m.np.matmul(a, b))(F23, F45), TypeError),
    Mistake("dot of mismatched vectors", lambda m: m.np.dot(m.np.asarray(F3), m.np.asarray(F4)), TypeError),
    Mistake("concatenate of different ranks", lambda m: m.np.concatenate([m.np.asarray(F23), m.np.asarray(F3)]), TypeError),
    Mistake("concatenate of different sizes off the axis", lambda m: m.np.concatenate([m.np.asarray(F23), m.np.asarray(F45)], axis=0), TypeError),
    Mistake("concatenate traced", lambda m: m.make_jaxpr(lambda a, b: m.np.concatenate([a, b], axis=1))(F23, F45), TypeError),
    Mistake("reshape to the wrong size", lambda m: m.np.asarray(F23).reshape(4, 2), TypeError),
    Mistake("reshape to the wrong size, traced", lambda m: m.make_jaxpr(lambda a: m.np.reshape(a, (5,)))(F23), TypeError),
    Mistake("Python if on a traced value", lambda m: m.jit(lambda x: 1.0 if x > 0 else 2.0)(1.0), TypeError),
    Mistake("Python while on a traced value", lambda m: m.make_jaxpr(lambda x: [x for _ in range(3) if x])(F3[0]), TypeError),
    Mistake("int() of a traced value", lambda m: m.jit(lambda x: x * int(x))(1.0), TypeError),
    Mistake("float() of a traced value", lambda m: m.make_jaxpr(lambda x: float(x))(1.0), TypeError),
    Mistake("np.asarray of a traced value", lambda m: m.jit(lambda x: np.asarray(x))(F3), TypeError),
    Mistake("fori_loop body changes a strong carry's dtype", lambda m: m.lax.fori_loop(0, 3, lambda i, c: c + 1.5, np.int32(0)), TypeError),
    Mistake("while_loop body changes the carry's shape", lambda m: m.lax.while_loop(lambda c: c[0] < 3, lambda c: m.np.concatenate([c, c]), F3), TypeError),
    Mistake("scan f changes the carry's structure", lambda m: m.lax.scan(lambda c, x: ((c, c), x), 0.0, F3), TypeError),
    Mistake("scan f returns no pair", lambda m: m.lax.scan(lambda c, x: c + x, 0.0, F3), TypeError),
    Mistake("scan over xs of different lengths", lambda m: m.lax.scan(lambda c, x: (c, x), 0.0, (F3, F4)), ValueError),
    Mistake("scan length disagrees with xs", lambda m: m.lax.scan(lambda c, x: (c, x), 0.0, F3, length=4), ValueError),
    Mistake("scan with nothing to scan over", lambda m: m.lax.scan(lambda c, x: (c, x), 0.0, None), ValueError),
    Mistake("cond branches of different output types", lambda m: m.lax.cond(True, lambda x: x, lambda x: x.astype(np.int32), F3), TypeError),
    Mistake("cond branches of different output shapes", lambda m: m.lax.cond(True, lambda x: x, lambda x: x.sum(), F3), TypeError),
    Mistake("cond with a non-scalar predicate", lambda m: m.lax.cond(m.np.asarray(F3) > 0, lambda: 1.0, lambda: 2.0), TypeError),
    Mistake("cond with a complex predicate", lambda m: m.lax.cond(np.complex64(1), lambda: 1.0, lambda: 2.0), TypeError),
    Mistake("switch branches of different structures", lambda m: m.lax.switch(1, [lambda: 1.0, lambda: (1.0, 2.0)]), TypeError),
    Mistake("switch with a float index", lambda m: m.lax.switch(1.0, [lambda: 1.0, lambda: 2.0]), TypeError),
    Mistake("while_loop cond_fun returning a non-boolean", lambda m: m.lax.while_loop(lambda c: c, lambda c: c - 1, 3), TypeError),
    Mistake("fori_loop bounds of different dtypes", lambda m: m.lax.fori_loop(np.int8(0), np.int16(3), lambda i, c: c, 0.0), TypeError),
    Mistake("a string argument to jit", lambda m: m.jit(lambda s: s)("hello"), TypeError),
    Mistake("an unhashable static argument", lambda m: m.jit(lambda n, x: x * n, static_argnums=0)([1, 2], 1.0), ValueError),
    Mistake("a float index", lambda m: m.np.asarray(F3)[1.5], TypeError),
    Mistake("a float index, traced", lambda m: m.make_jaxpr(lambda a: a[1.5])(F3), TypeError),
    Mistake("a static slice larger than the operand", lambda m: m.lax.dynamic_slice(m.np.asarray(F3), (0,), (5,)), TypeError),
    Mistake("too many indices", lambda m: m.np.asarray(F3)[0, 0], IndexError),
    Mistake("an unknown dtype", lambda m: m.np.zeros(3, dtype="float33"), TypeError),
    Mistake("sum over an axis out of range", lambda m: m.np.sum(m.np.asarray(F23), axis=2), ValueError),
    Mistake("max over an axis out of range, traced", lambda m: m.make_jaxpr(lambda a: m.np.max(a, axis=-3))(F23), ValueError),
    Mistake("lax.add of different dtypes", lambda m: m.lax.add(np.float32(1), np.int32(1)), TypeError),
    Mistake("arange with a traced stop", lambda m: m.jit(lambda n: m.np.arange(n))(3), TypeError),
    Mistake("zeros with a traced shape", lambda m: m.jit(lambda n: m.np.zeros(n))(3), TypeError),
    Mistake("item assignment", lambda m: m.np.asarray(F3).__setitem__(0, 1.0), TypeError),
    Mistake("broadcast_to an incompatible shape", lambda m: m.np.broadcast_to(m.np.asarray(F3), (4,)), ValueError),
    Mistake("transpose with a bad permutation", lambda m: m.np.transpose(m.np.asarray(F23), (0, 0)), TypeError),
    Mistake("static_argnums beyond the arguments", lambda m: m.jit(lambda a: a, static_argnums=2)(1.0), ValueError),
    Mistake("an array as a static argument", lambda m: m.jit(lambda a, n: a * n, static_argnums=1)(1.0, m.np.ones(2)), ValueError),
    Mistake("arange with a traced start", lambda m: m.jit(lambda n: m.np.arange(n, 5))(3), TypeError),
    Mistake("stack of different shapes", lambda m: m.np.stack([m.np.asarray(F3), m.np.asarray(F4)]), ValueError),
    Mistake("where of shapes that do not broadcast", lambda m: m.np.where(m.np.asarray(F3) > 0, m.np.asarray(F3), m.np.asarray(F4)), ValueError),
    Mistake("len() of a scalar", lambda m: len(m.np.asarray(1.0)), TypeError),
    Mistake("iterating over a scalar", lambda m: [a for a in m.np.asarray(1.0)], TypeError),
    Mistake("a duplicate axis", lambda m: m.np.mean(m.np.asarray(F23), axis=(0, 0)), ValueError),
    Mistake("expand_dims at an axis out of range", lambda m: m.np.expand_dims(m.np.asarray(F3), 3), ValueError),
    Mistake("lax.slice beyond the operand", lambda m: m.lax.slice(m.np.asarray(F3), (0,), (5,)), TypeError),
    Mistake("reshape with two unknown sizes", lambda m: m.np.asarray(F3).reshape(-1, -1), TypeError),
    Mistake("a float shape", lambda m: m.np.ones(2.5), TypeError),
    Mistake("astype to an unknown dtype", lambda m: m.np.asarray(F3).astype("foo"), TypeError),
    Mistake("a traced value used after its tracing", lambda m: (lambda s: [m.make_jaxpr(lambda a: _kept(s, a))(F3), s[0] + 1])([]), TypeError),
    Mistake("a traced value used after its jit", lambda m: (lambda s: [m.jit(lambda a: _kept(s, a))(F3), m.np.sin(s[0])])([]), TypeError),
    Mistake("a traced value used in another tracing", lambda m: (lambda s: [m.make_jaxpr(lambda a: _kept(s, a))(F3), m.jit(lambda b: b * s[0])(F3)])([]), TypeError),
    Mistake("lax.add of a list", lambda m: m.lax.add([1.0], m.np.asarray(F3)), TypeError),
]
# fmt: on


def _line_of(mistake: Mistake) -> int:
    return mistake.make.__code__.co_firstlineno


def _public_names() -> set[str]:
    names: set[str] = set()
    for module in (fx, ferrax.core, ferrax.errors, ferrax.lax, fnp, ferrax.tree_util):
        names.update(n for n in dir(module) if not n.startswith("_"))
    return names


def _internal_class_names() -> list[str]:
    """Every class the ferrax package defines that is not public API (read from its
    source), plus the internal names of JAX-style systems users must never see."""
    package = os.path.dirname(fx.__file__)
    public = _public_names()
    found = {"JaxprTracer", "DynamicTracer", "ConcreteArray", "MainTrace", "EvalTrace", "StagingTrace"}
    for root, _, files in os.walk(package):
        for file in files:
            if file.endswith(".py"):
                with open(os.path.join(root, file)) as source:
                    tree = ast.parse(source.read())
                found.update(n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef))
    # `Traced` is what `jit(f).trace` returns (public, as JAX's), and how a traced value
    # prints (`Traced(~int32[])`).
    return sorted(n for n in found if (n not in public or n == "ConcreteArray") and n != "Traced")


INTERNAL = re.compile(r"\b(?:" + "|".join(_internal_class_names()) + r")\b|(?<![\w.])_[A-Z]\w+")


def _raised(f: Callable[[], Any]) -> BaseException:
    try:
        f()
    except Exception as e:  # noqa: BLE001 - the point is to look at what was raised
        return e
    raise AssertionError("no exception was raised")


def test_the_list_is_long_enough() -> None:
    assert len(MISTAKES) >= 30
    assert len({m.name for m in MISTAKES}) == len(MISTAKES)
    assert len({_line_of(m) for m in MISTAKES}) == len(MISTAKES)


def test_internal_names_are_found() -> None:
    # The regex would catch the names it must.
    for name in ("JaxprTracer", "ConcreteArray", "_IndexUpdateRef", "MainTrace", "StagingTrace"):
        assert INTERNAL.search(f"a {name} object")
    assert not INTERNAL.search("ferrax.Array has no attribute 'foo'; f32[3] at x.py:3")


# Mistakes ferrax does not report yet, and why.
NOT_YET: dict[str, str] = {}


@pytest.mark.parametrize(
    "mistake",
    [
        pytest.param(m, id=m.name, marks=[pytest.mark.xfail(reason=NOT_YET[m.name], strict=True)] if m.name in NOT_YET else [])
        for m in MISTAKES
    ],
)
def test_mistake(mistake: Mistake) -> None:
    e = _raised(lambda: mistake.make(FERRAX))
    assert isinstance(e, mistake.expected), f"{type(e).__name__}: {e}"
    message = str(e)
    where = f"{os.path.basename(__file__)}:{_line_of(mistake)}"
    assert where in message, message
    bad = INTERNAL.search(message)
    assert bad is None, f"internal name {bad.group(0)!r} in: {message}"


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_jax_raises_the_same_class(mistake: Mistake) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    e = _raised(lambda: mistake.make(_ns(jnp, jax.lax, jax.jit, jax.make_jaxpr)))
    assert isinstance(e, mistake.expected), f"JAX raised {type(e).__name__}: {e}"
