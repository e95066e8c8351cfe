"""The primitives of custom rules and checkpointing (``custom_jvp_call``,
``custom_vjp_call``, ``remat2``, ``stop_gradient``) as IR objects: their opaque params keep
the Python objects given to them, they print and parse as JAX's jaxprs do, and they run
eagerly, staged and jitted."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax as fx
from ferrax import TypeCheckError, _ir
from ferrax._lax.custom import custom_jvp_call_p, custom_vjp_call_p, remat_p, stop_gradient_p


def f_jvp(primals: Any, tangents: Any) -> Any:
    """A rule with a name."""
    raise AssertionError("not called")


class _Policy:
    """An object without ``__name__``: named by its ``repr``."""

    def __repr__(self) -> str:
        return "DotsSaveable(only_if_no_batch_dims=False)"


def _sin_jaxpr() -> _ir.ClosedJaxpr:
    return fx.make_jaxpr(lambda y: fx.numpy.sin(y))(np.float32(0))


def _jvp_call(rule: Any) -> Any:
    def fun(x: Any) -> Any:
        return custom_jvp_call_p.bind(x, name="f", call_jaxpr=_sin_jaxpr(), jvp=rule, symbolic_zeros=False)[0]

    return fun


@pytest.mark.parametrize(
    ("rule", "printed"),
    [
        (f_jvp, "jvp=f_jvp"),
        (lambda p, t: None, "jvp=<lambda>"),
        (functools.partial(f_jvp, 1), "jvp='functools.partial(<function f_jvp at"),
    ],
    ids=["function", "lambda", "partial"],
)
def test_an_opaque_param_is_the_object_given_and_prints_as_its_name(rule: Any, printed: str) -> None:
    closed = fx.make_jaxpr(_jvp_call(rule))(np.float32(1))
    (eqn,) = closed.jaxpr.eqns
    assert eqn.primitive == "custom_jvp_call"
    assert eqn.params["jvp"] is rule
    assert printed in str(closed)
    # Text read back has the name only: the param comes back as that name.
    back = _ir.parse_jaxpr(str(closed.jaxpr))
    name = printed.split("=", 1)[1].strip("'")
    assert str(back) == str(closed.jaxpr)
    assert back.eqns[0].params["jvp"].startswith(name)


def test_the_custom_calls_print_as_jax_prints_them() -> None:
    @jax.custom_jvp
    def f(x: Any) -> Any:
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(p: Any, t: Any) -> Any:
        return f(p[0]), t[0]

    @jax.custom_vjp
    def g(x: Any) -> Any:
        return jnp.sin(x)

    g.defvjp(lambda x: (g(x), x), lambda r, ct: (ct,))
    policy = jax.checkpoint_policies.dots_saveable

    def k(x: Any, y: Any) -> Any:
        h = jax.checkpoint(lambda z: jnp.sin(jnp.sin(z)), policy=policy)
        return f(x) + g(y) + h(x) + jax.lax.stop_gradient(x)

    expected = str(jax.make_jaxpr(k)(1.0, 2.0))
    sin, sin2 = _sin_jaxpr(), fx.make_jaxpr(lambda z: fx.numpy.sin(fx.numpy.sin(z)))(np.float32(0))

    def ours(x: Any, y: Any) -> Any:
        a = custom_jvp_call_p.bind(x, name="f", call_jaxpr=sin, jvp=f_jvp, symbolic_zeros=False)[0]
        # A jaxpr of its own: one held twice would print once, as `let f = ...` (as JAX's).
        b = custom_vjp_call_p.bind(
            y, name="g", call_jaxpr=_sin_jaxpr(), fwd=lambda: 0, bwd=lambda: 0, symbolic_zeros=False
        )[0]
        ab = a + b
        c = remat_p.bind(x, jaxpr=sin2, differentiated=False, policy=_Policy(), prevent_cse=True)[0]
        abc = ab + c
        return abc + stop_gradient_p.bind(x)

    got = fx.make_jaxpr(ours)(np.float32(1), np.float32(2))
    assert str(got) == expected
    assert str(_ir.parse_jaxpr(expected)) == expected


def test_policy_none_stays_none_and_a_policy_object_is_kept() -> None:
    policy = _Policy()
    for given in (None, policy):
        def fun(x: Any, given: Any = given) -> Any:
            return remat_p.bind(x, jaxpr=_sin_jaxpr(), differentiated=False, policy=given, prevent_cse=True)[0]

        (eqn,) = fx.make_jaxpr(fun)(np.float32(1)).jaxpr.eqns
        assert eqn.params["policy"] is given
        assert eqn.params["differentiated"] is False and eqn.params["prevent_cse"] is True


def everything_saveable(*args: Any, **params: Any) -> bool:
    """A policy named as JAX's ``checkpoint_policies.everything_saveable``."""
    return True


def test_a_policy_prints_as_jax_prints_it_with_the_address_masked() -> None:
    def ours(x: Any) -> Any:
        jaxpr = _sin_jaxpr()
        return remat_p.bind(x, jaxpr=jaxpr, differentiated=False, policy=everything_saveable, prevent_cse=True)[0]

    expected = str(jax.make_jaxpr(jax.checkpoint(jnp.sin, policy=jax.checkpoint_policies.everything_saveable))(1.0))
    got = fx.make_jaxpr(ours)(np.float32(1))
    assert "policy=<function everything_saveable at 0xXXXX" in str(got)
    assert str(got) == expected
    (eqn,) = got.jaxpr.eqns
    assert eqn.params["policy"] is everything_saveable
    # JAX's text reads back: the policy is its printed name.
    back = _ir.parse_jaxpr(expected)
    assert str(back) == expected
    assert back.eqns[0].params["policy"] == expected.split("policy=")[1].split("\n")[0]


def test_a_rule_must_be_given() -> None:
    with pytest.raises(TypeCheckError, match="param 'jvp' must be a host object"):
        fx.make_jaxpr(_jvp_call(None))(np.float32(1))
    with pytest.raises(TypeCheckError, match="missing param 'fwd'"):
        fx.make_jaxpr(
            lambda x: custom_vjp_call_p.bind(x, name="g", call_jaxpr=_sin_jaxpr(), bwd=f_jvp, symbolic_zeros=False)
        )(np.float32(1))


def test_operands_must_match_the_called_jaxpr() -> None:
    with pytest.raises(TypeCheckError, match="differ from the jaxpr's input types"):
        fx.make_jaxpr(_jvp_call(f_jvp))(np.ones(3, np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_stop_gradient_is_the_identity_eager_staged_and_jitted(dtype: Any) -> None:
    x = np.array([[1, 0, 3]], dtype)
    def fun(v: Any) -> Any:
        return stop_gradient_p.bind(v)

    (eqn,) = fx.make_jaxpr(fun)(x).jaxpr.eqns
    assert eqn.primitive == "stop_gradient" and eqn.params == {}
    for out in (fun(x), fx.jit(fun)(x)):
        np.testing.assert_array_equal(np.asarray(out), x)
        assert np.asarray(out).dtype == x.dtype


def test_the_calls_run_their_jaxpr_eagerly_and_jitted_without_calling_the_rules() -> None:
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    inner = fx.make_jaxpr(lambda y: (fx.numpy.sin(y) * 2, y + 1))(x)
    funs: list[Callable[[Any], Any]] = [
        lambda v: custom_jvp_call_p.bind(v, name="f", call_jaxpr=inner, jvp=f_jvp, symbolic_zeros=False),
        lambda v: custom_vjp_call_p.bind(v, name="f", call_jaxpr=inner, fwd=f_jvp, bwd=f_jvp, symbolic_zeros=True),
        lambda v: remat_p.bind(v, jaxpr=inner, differentiated=False, policy=None, prevent_cse=True),
    ]
    want = [np.sin(x) * 2, x + 1]
    for fun in funs:
        for outs in (fun(x), fx.jit(fun)(x)):
            assert len(outs) == 2
            for o, w in zip(outs, want):
                np.testing.assert_allclose(np.asarray(o), w, rtol=1e-6)


def _jvp_of_checkpoint(fun: Callable[..., Any], *args: float) -> Any:
    """JAX's jaxpr of ``jvp(checkpoint(fun))`` at ``args`` (primals, then tangents)."""
    n = len(args)
    return jax.make_jaxpr(lambda *xs: jax.jvp(jax.checkpoint(fun), xs[:n], xs[n:]))(*args, *args)


_CHECKPOINTED: dict[str, tuple[Callable[..., Any], tuple[float, ...]]] = {
    "sin_sin": (lambda x: jnp.sin(jnp.sin(x)), (1.0,)),
    "two_outputs": (lambda x, y: (jnp.tanh(x) * y, jnp.cos(y)), (0.5, 2.0)),
    "passthrough": (lambda x, y: (x, jnp.sin(x) * y), (0.5, 2.0)),
}


@pytest.mark.parametrize("name", sorted(_CHECKPOINTED))
def test_remat_partial_eval_matches_jax(name: str) -> None:
    """The Rust split of a checkpointed JVP prints as JAX's ``partial_eval_jaxpr_nounits``
    (known part inlined, one differentiated remat2 recomputing from the known operands),
    for every mask of unknown inputs. (A known output that passes an operand through
    keeps the known part a remat2, which JAX inlines: only the split is compared then.)"""
    from jax._src.interpreters import partial_eval as jax_pe

    fun, args = _CHECKPOINTED[name]
    closed = _jvp_of_checkpoint(fun, *args)
    ours = _ir.parse_jaxpr(str(closed.jaxpr))
    n = len(closed.jaxpr.invars)
    for mask in range(1 << n):
        unknowns = [bool(mask >> i & 1) for i in range(n)]
        j_known, j_unknown, j_out_uk, j_res = jax_pe.partial_eval_jaxpr_nounits(closed, unknowns, False)
        known, unknown, out_uk, n_res = _ir.partial_eval(ours, unknowns, [False] * len(ours.outvars))
        assert out_uk == j_out_uk, unknowns
        assert n_res == len(j_res), unknowns
        if name == "passthrough" and "remat2" in str(known):
            continue
        # JAX's text read and printed back by ferrax (JAX lifts long jaxprs into `let`).
        assert str(known) == str(_ir.parse_jaxpr(str(j_known.jaxpr))), unknowns
        assert str(unknown) == str(_ir.parse_jaxpr(str(j_unknown.jaxpr))), unknowns


def _scaled_vjp(custom_vjp: Any) -> Any:
    """``x * y`` with a deliberately wrong backward rule (10y, 100x), so the values show
    the rule ran."""

    def product(x: Any, y: Any) -> Any:
        return x * y

    f = custom_vjp(product)

    def fwd(x: Any, y: Any) -> Any:
        return x * y, (x, y)

    def bwd(res: Any, g: Any) -> Any:
        x, y = res
        return g * y * 10.0, g * x * 100.0

    f.defvjp(fwd, bwd)
    return f


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
def test_custom_vjp_differentiated_in_some_of_its_inputs_matches_jax(argnums: Any) -> None:
    # The tangents of the inputs not differentiated are known zeros: the backward pass
    # returns cotangents for the others only (this used to be a ReverseModeError).
    f, jf = _scaled_vjp(fx.custom_vjp), _scaled_vjp(jax.custom_vjp)
    for grad, jit in ((fx.grad, lambda g: g), (fx.grad, fx.jit)):
        got = jit(grad(f, argnums=argnums))(np.float32(2.0), np.float32(3.0))
        want = jax.grad(jf, argnums=argnums)(np.float32(2.0), np.float32(3.0))
        np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    x = np.arange(1.0, 4.0, dtype=np.float32)
    np.testing.assert_allclose(
        fx.vmap(fx.grad(lambda a: f(a, np.float32(3.0)) + f(np.float32(2.0), a)))(x),
        jax.vmap(jax.grad(lambda a: jf(a, np.float32(3.0)) + jf(np.float32(2.0), a)))(x),
    )
