"""ferrax prints jaxprs as JAX 0.10 does: random programs are traced by JAX, printed by
JAX, read by ``ferrax.core.parse_jaxpr`` and printed again by ferrax, and the two texts
must be identical (layout at width 80, names, params shown and hidden), for programs
that print short and long, nested in ``cond``, ``while_loop``, ``scan`` and ``jit``.
(JAX's dropped outputs, printed ``_``, are named variables in ferrax.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ferrax.core import parse_jaxpr

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax

Fn = Callable[[Any], Any]

# Shape-preserving steps on a float32 array of any shape.
STEPS: list[Fn] = [
    jnp.sin, jnp.cos, jnp.tanh, jnp.exp, jnp.abs,
    lambda x: x * 2.0,
    lambda x: x + 1.0,
    lambda x: x - x.sum(),  # reduce_sum, broadcast of a scalar
    lambda x: lax.convert_element_type(lax.convert_element_type(x, np.int32), np.float32),
    lambda x: x + lax.broadcasted_iota(np.float32, x.shape, x.ndim - 1) if x.ndim else x,
    lambda x: lax.dot_general(x, x, ((tuple(range(x.ndim)), tuple(range(x.ndim))), ((), ()))) * x,
    lambda x: jnp.maximum(x, 0.5),
]

# Ways to wrap a program: as it is, or in a control-flow primitive or a jit.
WRAPS: list[Callable[[Fn], Fn]] = [
    lambda f: f,
    lambda f: (lambda x: lax.cond(x.sum() > 0, f, lambda y: y, x)),
    lambda f: (lambda x: jax.jit(f)(x)),
    lambda f: (lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, f(c[1])), (0, x))[1]),
    lambda f: (lambda x: lax.scan(lambda c, _: (f(c), c.sum()), x, None, length=2)),
    lambda f: (lambda x: lax.fori_loop(0, 2, lambda i, c: f(c), x)),
]


def _programs(count: int) -> list[Any]:
    rng = np.random.default_rng(7)
    out = []
    for k in range(count):
        steps = [STEPS[int(i)] for i in rng.integers(0, len(STEPS), size=int(rng.integers(1, 6)))]
        shape = tuple(int(d) for d in rng.integers(1, 40, size=int(rng.integers(0, 4))))

        def program(x: Any, steps: list[Fn] = steps) -> Any:
            for s in steps:
                x = s(x)
            return x

        wrap = WRAPS[k % len(WRAPS)]
        out.append(pytest.param(wrap(program), shape, id=f"p{k}-{len(steps)}steps-{shape}"))
    return out


@pytest.mark.parametrize(("f", "shape"), _programs(120))
def test_jax_text_prints_back_identically(f: Fn, shape: tuple[int, ...]) -> None:
    text = str(jax.make_jaxpr(f)(np.ones(shape, np.float32)))
    ours = str(parse_jaxpr(text))
    if "_:" in text:
        # JAX's dropped outputs (`_`) are variables like any other in ferrax's IR, so
        # they get names; the rest of the text is JAX's.
        assert str(parse_jaxpr(ours)) == ours
        assert ours.count("\n") == text.count("\n")
        return
    assert ours == text


def test_short_jaxprs_are_one_line_and_long_ones_break() -> None:
    one = str(jax.make_jaxpr(lambda a: jnp.sin(a))(np.ones(3, np.float32)))
    assert "\n" not in one and str(parse_jaxpr(one)) == one
    # 81 characters on one line: JAX breaks it, and so does ferrax.
    long = str(jax.make_jaxpr(lambda a: jnp.expm1(a + 1.0))(np.ones(1, np.float32)))
    assert long.count("\n") == 3 and str(parse_jaxpr(long)) == long


# Shared jaxprs: a jitted function called more than once stages one jaxpr, which both
# JAX and ferrax print once, as `let name = { ... } in` before the jaxpr that uses it.

Api = tuple[Callable[..., Any], Any, Any]  # (jit, numpy, lax)


def _twice_and_once(api: Api) -> Fn:
    jit, np_, _ = api

    def g(x: Any) -> Any:
        return np_.sin(x) * 2.0

    f = jit(g)
    return lambda x: f(f(x)) + f(x)


def _nested(api: Api) -> Fn:
    jit, np_, _ = api
    f = jit(lambda x: np_.cos(x) + 1.0)
    h = jit(lambda x: f(x) * f(x))
    return lambda x: h(x) - h(h(x))


def _doubling(k: int) -> Callable[[Api], Fn]:
    def build(api: Api) -> Fn:
        jit, np_, _ = api
        level = jit(lambda x: np_.tanh(x))
        for _ in range(k):
            level = jit(lambda x, p=level: p(p(x)))
        return level  # type: ignore[no-any-return]

    return build


def _cond_branches(api: Api) -> Fn:
    jit, np_, lax_ = api
    f = jit(lambda x: np_.exp(x) * 3.0)
    # (Different branch functions: JAX traces `cond(p, f, f, x)` once, ferrax twice.)
    return lambda x: lax_.cond(x.sum() > 0, lambda y: f(y) * 2.0, lambda y: f(y) - 1.0, x) + f(x)


def _same_name(api: Api) -> Fn:
    jit, _, _ = api

    def make(c: float) -> Fn:
        def g(x: Any) -> Any:
            return x * c

        return jit(g)  # type: ignore[no-any-return]

    a, b = make(2.0), make(3.0)
    return lambda x: a(a(x)) + b(b(x)) + a(x)


def _eleven_equations(api: Api) -> Fn:
    jit, _, _ = api

    def long(x: Any) -> Any:
        for i in range(11):
            x = x * float(i + 2)
        return x

    return lambda x: jit(long)(x)  # held once, but JAX shares jaxprs of over 10 equations


SHARED_PROGRAMS: list[Any] = [
    pytest.param(_twice_and_once, id="twice-and-once"),
    pytest.param(_nested, id="nested-jits"),
    *[pytest.param(_doubling(k), id=f"doubling-{k}") for k in (1, 2, 5)],
    pytest.param(_cond_branches, id="cond-branches"),
    pytest.param(_same_name, id="same-name"),
    pytest.param(_eleven_equations, id="eleven-equations"),
]


@pytest.mark.parametrize("program", SHARED_PROGRAMS)
@pytest.mark.parametrize("shape", [(), (3,)])
def test_shared_jaxprs_print_as_jax(program: Callable[[Api], Fn], shape: tuple[int, ...]) -> None:
    import ferrax
    import ferrax.numpy as fnp
    from ferrax import lax as flax

    x = np.full(shape, 0.5, np.float32)
    theirs = str(jax.make_jaxpr(program((jax.jit, jnp, lax)))(x))
    ours = str(ferrax.make_jaxpr(program((ferrax.jit, fnp, flax)))(x))
    assert "let " in theirs
    assert ours == theirs
    # The text reads back with its sharing, and prints the same.
    assert str(parse_jaxpr(ours)) == ours
