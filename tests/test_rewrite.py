"""``ferrax.rewrite``: rules over jaxprs from Python; the rewritten function eagerly and
under jit, grad and vmap, against NumPy and JAX computing the rewritten formula."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax
from ferrax.errors import FerraxError, ParseError, RewriteError
from ferrax.rewrite import ALGEBRAIC, RuleSet, rewrite, rewrite_jaxpr, rules

# A rational approximation of tanh (Lambert's continued fraction, cut after three
# terms): x (27 + x^2) / (27 + 9 x^2), good to a few 1e-3 for |x| < 1.5.
TANH_PADE = """
tanh_pade: tanh ?x => div (mul ?x (add 27.0 (mul ?x ?x))) (add 27.0 (mul 9.0 (mul ?x ?x)))
"""


def pade_jax(x: Any) -> Any:
    return x * (27.0 + x * x) / (27.0 + 9.0 * (x * x))


def model(w: Any, x: Any) -> Any:
    return fnp.sum(fnp.tanh(x @ w))


def model_jax_pade(w: Any, x: Any) -> Any:
    return jnp.sum(pade_jax(x @ w))


def primitives(closed: Any) -> list[str]:
    return [e.primitive for e in closed.jaxpr.eqns]


W = np.linspace(-0.5, 0.5, 12, dtype=np.float32).reshape(4, 3)
X = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4)


def test_tanh_becomes_a_custom_approximation_eagerly_and_under_jit_grad_vmap() -> None:
    approx = rewrite(model, TANH_PADE)
    jaxpr = ferrax.make_jaxpr(approx)(W, X)
    assert "tanh" not in str(jaxpr) and "div" in str(jaxpr), str(jaxpr)
    want = model_jax_pade(W, X)
    np.testing.assert_allclose(approx(W, X), want, rtol=1e-6)
    np.testing.assert_allclose(ferrax.jit(approx)(W, X), want, rtol=1e-6)
    # The approximation is not tanh: a few 1e-3 away per element (six of them summed).
    exact = np.sum(np.tanh(X @ W))
    assert 1e-4 < abs(float(approx(W, X)) - exact) < 5e-2
    # grad differentiates the rewritten program (JAX differentiates the same formula).
    np.testing.assert_allclose(ferrax.grad(approx)(W, X), jax.grad(model_jax_pade)(W, X), rtol=1e-5, atol=1e-6)
    # vmap over a batch of inputs.
    xs = np.stack([X, 2 * X, -X])
    np.testing.assert_allclose(
        ferrax.vmap(approx, in_axes=(None, 0))(W, xs),
        jax.vmap(model_jax_pade, in_axes=(None, 0))(W, xs),
        rtol=1e-5,
    )


def test_oryx_examples_exp_to_log_and_add_to_sub() -> None:
    # The oryx seed's examples, through ferrax.
    def f(x: Any) -> Any:
        return fnp.exp(x) + 1.0

    g = rewrite(f, "exp_to_log: exp ?x => log ?x")
    assert float(g(1.0)) == 1.0
    np.testing.assert_allclose(g(np.float32(2.0)), jnp.log(np.float32(2.0)) + 1.0)
    h = rewrite(lambda a, b: a + b, "add_to_sub: add ?a ?b => sub ?a ?b")
    np.testing.assert_allclose(h(np.float32(5.0), np.float32(3.0)), 2.0)


def test_algebraic_rules_simplify_a_traced_program() -> None:
    def f(x: Any, y: Any) -> Any:
        z = fnp.log(fnp.exp(-(-x))) * 1.0 + 0.0
        return lax.integer_pow(z, 2) - (-y)

    x = np.linspace(0.1, 1.0, 5, dtype=np.float32)
    y = np.float32(0.5)
    closed = ferrax.make_jaxpr(f)(x, y)
    simpler = rewrite_jaxpr(closed, ALGEBRAIC)
    assert primitives(simpler) == ["mul", "add"], str(simpler)
    np.testing.assert_allclose(ferrax.eval_jaxpr(simpler.jaxpr, simpler.consts, x, y)[0], x * x + y, rtol=1e-6)
    np.testing.assert_allclose(rewrite(f, ALGEBRAIC)(x, y), x * x + y, rtol=1e-6)


def test_rules_reach_into_control_flow_and_keep_constants() -> None:
    table = np.arange(3, dtype=np.float32)

    def f(x: Any) -> Any:
        def body(c: Any, t: Any) -> Any:
            return c + fnp.log(fnp.exp(t)) * 1.0, -(-t)

        c, ys = lax.scan(body, x, table)
        return lax.cond(c > 0, lambda v: v * 1.0, lambda v: -(-v), c), ys

    closed = ferrax.make_jaxpr(f)(np.float32(1.0))
    simpler = rewrite_jaxpr(closed, ALGEBRAIC)
    text = str(simpler)
    for gone in ("exp", "log", "neg"):
        assert gone not in text, text
    assert len(simpler.consts) == len(closed.consts)
    got = ferrax.eval_jaxpr(simpler.jaxpr, simpler.consts, np.float32(1.0))
    want = ferrax.eval_jaxpr(closed.jaxpr, closed.consts, np.float32(1.0))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_pytrees_in_and_out() -> None:
    def f(p: dict[str, Any]) -> dict[str, Any]:
        return {"y": fnp.exp(p["a"]) * 1.0, "z": (p["b"] + 0.0,)}

    p = {"a": np.float32(0.0), "b": np.ones(2, np.float32)}
    out = rewrite(f, ALGEBRAIC)(p)
    assert set(out) == {"y", "z"} and isinstance(out["z"], tuple)
    np.testing.assert_allclose(out["y"], 1.0)
    np.testing.assert_allclose(out["z"][0], [1.0, 1.0])


def test_rule_sets_combine_and_describe_themselves() -> None:
    mine = rules("exp_log: exp ?x => log ?x\nsq: integer_pow[y=2] ?x => mul ?x ?x")
    both = ALGEBRAIC + rules("extra: sin ?x => cos ?x")
    assert mine.names == ["exp_log", "sq"] and len(mine) == 2
    assert both.names[-1] == "extra" and len(both) == len(ALGEBRAIC) + 1
    assert "exp_log: exp ?x => log ?x" in str(mine)
    with pytest.raises(ParseError, match="already"):
        _ = ALGEBRAIC + ALGEBRAIC


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("r: neg ?x => ?y", 1, "never binds"),
        ("a: neg ?x => ?x\n# fine\nb neg ?x => ?x", 3, "unexpected 'b neg"),
        ("r: reduce_sum[axes=(0,] ?x => ?x", 1, "not closed"),
        ("r: neg ?x:f99[] => ?x", 1, "unknown dtype"),
    ],
)
def test_bad_rules_are_parse_errors_with_a_line(text: str, line: int, message: str) -> None:
    with pytest.raises(ParseError, match=message) as info:
        RuleSet(text)
    assert info.value.line == line
    assert "\n" not in str(info.value)
    assert isinstance(info.value, FerraxError)


def test_rules_that_loop_raise_naming_them() -> None:
    looping = rules("a: exp ?x => log ?x\nb: log ?x => exp ?x")
    with pytest.raises(RewriteError, match="fixpoint") as info:
        rewrite(fnp.exp, looping, max_iterations=5)(np.float32(1.0))
    assert info.value.rules == ["a", "b"]
    # A right side that does not typecheck where it matched.
    bad = rules("r: neg ?x => reduce_sum[axes=(5,)] ?x")
    with pytest.raises(RewriteError, match="right side does not typecheck"):
        rewrite(lambda x: -x, bad)(np.ones(3, np.float32))


def test_wrong_arguments() -> None:
    with pytest.raises(TypeError, match="ClosedJaxpr"):
        rewrite_jaxpr("not a jaxpr", ALGEBRAIC)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="RuleSet"):
        rewrite(fnp.exp, 3)  # type: ignore[arg-type]
