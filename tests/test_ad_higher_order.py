"""Derivatives of the primitives that hold jaxprs or user rules, checked numerically.

tests/test_jvp_primitives.py covers the first-order primitives of the table; the rest
(calls, control flow, custom rules, ``add_any``) are built from user functions, so each
gets its programs here: ``check_grads`` (finite differences, forward and reverse, to
second order where the primitive allows) in float32 and, in a subprocess, float64. The
table drives the test: a primitive of ``_ir.builtin_primitives()`` that neither file
covers fails ``test_every_primitive_is_covered``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax
from ferrax.test_util import check_grads


class Program(NamedTuple):
    name: str
    fun: Callable[..., Any]
    args: tuple[Any, ...]
    modes: tuple[str, ...] = ("fwd", "rev")
    order: int = 2


def _x(*shape: int, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(np.float32)


@ferrax.custom_jvp
def _softplus(x: Any) -> Any:
    return fnp.log1p(fnp.exp(x))


@_softplus.defjvp
def _softplus_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return _softplus(x), t * lax.logistic(x)


@ferrax.custom_vjp
def _clip_gradient(x: Any) -> Any:
    return fnp.sin(x)


def _clip_fwd(x: Any) -> Any:
    return fnp.sin(x), fnp.cos(x)


def _clip_bwd(c: Any, g: Any) -> Any:
    return (g * c,)


_clip_gradient.defvjp(_clip_fwd, _clip_bwd)

# One or more programs per primitive; each uses the primitive on a path to the output.
PROGRAMS: dict[str, list[Program]] = {
    "jit": [
        Program("jit", lambda x: ferrax.jit(lambda a: fnp.sum(fnp.sin(a) * a))(x), (_x(3),)),
        Program("nested jit", lambda x: ferrax.jit(lambda a: ferrax.jit(fnp.tanh)(a) * a)(x), (_x(4),)),
    ],
    "cond": [
        Program("cond true", lambda x: lax.cond(True, lambda a: fnp.sin(a) * a, lambda a: a * a, x), (_x(3),)),
        Program("cond false", lambda x: lax.cond(False, lambda a: fnp.sin(a) * a, lambda a: a * a * a, x), (_x(3),)),
        Program("switch", lambda x: lax.switch(2, [fnp.sin, fnp.cos, fnp.tanh], x), (_x(3),)),
    ],
    "while": [
        Program(
            "while (forward only)",
            lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, fnp.sin(c[1]) * 1.5), (0, x))[1],
            (_x(3),),
            modes=("fwd",),
        ),
    ],
    "scan": [
        Program("scan", lambda x: lax.scan(lambda c, v: (c * fnp.sin(v), c * v), 1.0, x)[1], (_x(4),)),
        Program("reverse scan", lambda x: lax.scan(lambda c, v: (c + fnp.cos(v) * c, c), x[0], x, reverse=True)[0], (_x(3),)),
        Program("fori_loop", lambda x: lax.fori_loop(0, 3, lambda i, c: fnp.sin(c) * c, x), (_x(3),)),
    ],
    "add_any": [Program("fan-out", lambda x: fnp.sin(x) * x + fnp.cos(x) * x, (_x(3),))],
    "custom_jvp_call": [Program("custom_jvp softplus", lambda x: _softplus(x) * x, (_x(3),))],
    "custom_vjp_call": [Program("custom_vjp", lambda x: fnp.sum(_clip_gradient(x) * x), (_x(3),), modes=("rev",), order=1)],
    "remat2": [
        Program("checkpoint", lambda x: ferrax.checkpoint(lambda a: fnp.sin(fnp.sin(a)) * a)(x), (_x(3),)),
    ],
    "stop_gradient": [
        # The checked function is smooth; stop_gradient's zero derivative is what
        # finite differences see for the stopped part.
        Program("stop_gradient", lambda x: x * x + lax.stop_gradient(x) * 0.0, (_x(3),)),
    ],
    "debug_callback": [
        # A callback sees the primals and changes no derivative.
        Program("debug_callback", lambda x: (ferrax.debug.callback(lambda v: None, x), x * x)[1], (_x(3),)),
    ],
    "debug_print": [
        # A print sees the primals and changes no derivative.
        Program("debug_print", lambda x: (ferrax.debug.print("", skip_format_check=True), x * x)[1], (_x(3),)),
    ],
}


def test_every_primitive_is_covered() -> None:
    from test_jvp_primitives import CASES

    table = set(ferrax._ir.builtin_primitives())
    # pure_callback and io_callback refuse jvp as JAX's do (test_callbacks.py).
    missing = sorted(table - set(CASES) - set(PROGRAMS) - {"pure_callback", "io_callback"})
    assert not missing, f"primitives without derivative checks: {missing}"
    assert not set(PROGRAMS) - table


def _all() -> list[Any]:
    return [pytest.param(p, id=p.name) for progs in PROGRAMS.values() for p in progs]


@pytest.mark.parametrize("prog", _all())
def test_check_grads(prog: Program) -> None:
    check_grads(prog.fun, prog.args, order=prog.order, modes=prog.modes, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("prog", _all())
def test_check_grads_under_jit(prog: Program) -> None:
    # The transformations compose with jit: the derivative of the jitted function.
    check_grads(ferrax.jit(prog.fun), prog.args, order=1, modes=prog.modes, rtol=2e-2, atol=2e-2)


def test_stop_gradient_stops() -> None:
    g = ferrax.grad(lambda x: x * lax.stop_gradient(x))(2.0)
    assert float(np.asarray(g)) == 2.0


def test_float64_in_a_subprocess() -> None:
    # Finite differences are precise in float64: tight tolerances, second order.
    code = """
import numpy as np, ferrax
from ferrax.test_util import check_grads
import test_ad_higher_order as t
for progs in t.PROGRAMS.values():
    for p in progs:
        args = tuple(np.asarray(a, np.float64) for a in p.args)
        check_grads(p.fun, args, order=p.order, modes=p.modes)
print("ok")
"""
    env = dict(os.environ, JAX_ENABLE_X64="1", PYTHONPATH=os.path.dirname(__file__))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_jit_of_jvp_with_an_integer_output_gives_float0() -> None:
    import jax

    x = _x(3)

    def program(m: Any) -> Any:
        return lambda x: m.jvp(lambda x: (x * 2.0, x.astype(np.int32)), (x,), (x,))

    got = ferrax.jit(program(ferrax))(x)
    want = jax.jit(program(jax))(x)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
    assert np.asarray(got[1][1]).dtype == np.dtype([("float0", np.void, 0)])
    np.testing.assert_allclose(np.asarray(got[1][0]), 2 * x)
    # The second call takes the compiled path and puts the float0 leaf back too.
    again = ferrax.jit(program(ferrax))(x)
    assert np.asarray(again[1][1]).dtype == np.asarray(got[1][1]).dtype
