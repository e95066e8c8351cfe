"""ferrax.interop: JAX's jaxprs into ferrax (``from_jax``) and ferrax's run by JAX
(``to_jax``), checked by round trips (the printed jaxprs, and values against JAX and
NumPy) and by running ferrax's passes and transformations on programs JAX traced."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ferrax
import ferrax.numpy as fnp
import ferrax.random as fr
from ferrax import core, dtypes
from ferrax import lax as flax
from ferrax.interop import InteropError, JaxNotInstalledError, UnsupportedPrimitiveError, from_jax, to_jax

W = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 10
B = np.array([0.1, -0.2, 0.3, 0.0], np.float32)
X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32)
V = np.array([0.5, -1.0, 2.0], np.float32)
I = np.array([3, -7, 12], np.int32)
KEY = jax.random.key(7)


def _text(closed: Any) -> str:
    """A JAX jaxpr's text, NumPy scalars in params as plain numbers (JAX prints some ints
    of ``jnp`` functions' params as ``np.int64(1)``; ferrax keeps them as ints), on one
    line (so that where JAX wraps a long param list does not matter)."""
    text = re.sub(r"np\.\w+\((-?[\w.]+)\)", r"\1", str(closed.jaxpr))
    return re.sub(r"\[ | \]", lambda m: m[0].strip(), re.sub(r"\s+", " ", text))


def _close(got: Any, want: Any) -> None:
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        if jnp.issubdtype(getattr(w, "dtype", np.float32), jax.dtypes.prng_key):
            w = jax.random.key_data(w)
            g = jax.random.key_data(g) if isinstance(g, jax.Array) else fr.key_data(g)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=2e-6)


def _ferrax_fun(closed: core.ClosedJaxpr) -> Callable[..., list[Any]]:
    """The jaxpr as a ferrax function (key arrays in and out as ferrax's KeyArray, the
    jaxpr's values being their one leaf)."""

    def run(*args: Any) -> list[Any]:
        outs = ferrax.eval_jaxpr(closed.jaxpr, closed.consts, *ferrax.tree.leaves(args))
        return [fr.KeyArray(o) if dtypes.is_key(o.dtype) else o for o in outs]

    return run


def _ferrax_args(args: tuple[Any, ...]) -> list[Any]:
    """JAX's arguments as ferrax takes them (keys rewrapped)."""
    out: list[Any] = []
    for a in args:
        if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            out.append(fr.wrap_key_data(np.asarray(jax.random.key_data(a))))
        else:
            out.append(np.asarray(a))
    return out


# --------------------------------------------------------------- programs JAX traces


@jax.custom_jvp
def scaled_sin(x: jax.Array) -> jax.Array:
    return jnp.sin(x)


@scaled_sin.defjvp
def scaled_sin_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
    # Not sin's derivative: the tests see that the user's rule is the one used.
    (x,), (t,) = primals, tangents
    return scaled_sin(x), jnp.cos(x) * t * 3.0


@jax.custom_vjp
def clipped_sin(x: jax.Array) -> jax.Array:
    return jnp.sin(x)


def _clipped_fwd(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    return clipped_sin(x), jnp.cos(x)


def _clipped_bwd(cos_x: jax.Array, ct: jax.Array) -> tuple[jax.Array]:
    return (jnp.clip(cos_x * ct, -0.5, 0.5),)


clipped_sin.defvjp(_clipped_fwd, _clipped_bwd)


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def times(x: jax.Array, n: float) -> jax.Array:
    return x * n


@times.defjvp
def _times_jvp(n: float, primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
    return times(primals[0], n), tangents[0] * n * 10


def mlp(x: jax.Array) -> jax.Array:
    h = jax.nn.relu(x @ W + B)
    return jnp.sum(jnp.tanh(h) ** 2)


def custom_loss(x: jax.Array) -> jax.Array:
    y = scaled_sin(x) + clipped_sin(x) * 2.0 + times(x, 3.0) + jax.nn.gelu(x)
    return jnp.sum(jax.jit(jax.nn.relu)(y) * V)


def ops(x: jax.Array, i: jax.Array) -> tuple[jax.Array, ...]:
    y = jnp.exp(-x) + jnp.log1p(jnp.abs(x)) + x ** 3 + jnp.arctan2(x, 1.5) + jnp.floor(x) + jnp.round(x)
    z = jnp.cumsum(jnp.sort(y, axis=1), axis=0) + jnp.pad(y, ((0, 0), (1, 0)))[:, :3]
    g = z[jnp.array([1, 0])] + z.at[0, 1].add(2.0) + lax.dynamic_slice(z, (i[0] % 2, 0), (2, 3))
    w = lax.reduce_window(g, -jnp.inf, lax.max, (1, 2), (1, 1), "SAME") + jnp.max(g, axis=0)
    ints = (i // 5, i % 5, i << 2, i >> 1, i & 6, i | 1, ~i, -i, jnp.abs(i), i == 3, (i > 0) & (i < 10), jnp.argmax(i))
    return (w, jnp.concatenate([y, z]).T, jnp.where(y > 0, y, 0.5 * y), jnp.linalg.cholesky(x @ x.T + 3 * jnp.eye(2)),
            y.astype(jnp.int32), *ints)


def _ctrl(x: jax.Array) -> tuple[Any, ...]:
    c = lax.cond(x[0] > 0, lambda y: jnp.sin(y) * 2.0, lambda y: y - 1.0, x)
    w = lax.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] * 1.5), (0, x))
    s = lax.scan(lambda carry, y: (carry + y, carry * y), x, jnp.ones((4, 3)))
    return c, w, s, jax.jit(lambda y: jax.jit(jnp.cos)(y) * 2.0)(x)


JAX_PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "mlp": (mlp, (X,)),
    "grad_mlp": (jax.grad(mlp), (X,)),
    "vmap_mlp": (jax.vmap(lambda x: mlp(x[None])), (X,)),
    "control_flow": (_ctrl, (V,)),
    "custom_rules": (custom_loss, (V,)),
    "grad_custom_rules": (jax.grad(custom_loss), (V,)),
    "ops": (ops, (X, I)),
    # A key argument, and a key constant.
    "prng": (lambda k: (jax.random.split(k, 3), jax.random.normal(jax.random.fold_in(k, 7), (3,)) + jax.random.uniform(KEY, (3,))),
             (jax.random.key(42),)),
}


@pytest.mark.parametrize("name", JAX_PROGRAMS)
def test_jax_to_ferrax_to_jax(name: str) -> None:
    fn, args = JAX_PROGRAMS[name]
    traced = jax.make_jaxpr(fn)(*args)
    converted = from_jax(traced)
    core.typecheck(converted.jaxpr)
    # ferrax's rules give JAX's types, weak types included.
    assert [(a.str_short(), a.weak_type) for a in converted.out_avals] == [
        (a.str_short(short_dtypes=True), a.weak_type) for a in traced.out_avals
    ]
    # Back in JAX: the same equations, params and shared jaxprs (the same text), so the
    # same values.
    assert _text(jax.make_jaxpr(to_jax(converted))(*args)) == _text(traced)
    # ferrax runs it (compiled by XLA through ferrax's lowering) to JAX's values.
    want = jax.jit(fn)(*args)
    _close(ferrax.jit(_ferrax_fun(converted))(*_ferrax_args(args)), jax.tree.leaves(want))


def test_values_against_numpy() -> None:
    def f(x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ W + B).sum(axis=0)

    converted = from_jax(jax.make_jaxpr(f)(X))
    want = np.tanh(X.astype(np.float64) @ W + B).sum(axis=0)
    np.testing.assert_allclose(np.asarray(_ferrax_fun(converted)(X)[0]), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(to_jax(converted)(X)[0]), want, rtol=1e-6)
    # An open Jaxpr will do when it has no constvars.
    open_jaxpr = from_jax(jax.make_jaxpr(jnp.tanh)(X).jaxpr)
    np.testing.assert_allclose(np.asarray(_ferrax_fun(open_jaxpr)(X)[0]), np.tanh(X), rtol=1e-6)
    with pytest.raises(InteropError, match="this Jaxpr has constvars but no constants"):
        from_jax(jax.make_jaxpr(f)(X).jaxpr)


# ------------------------------------------------------------------ ferrax's passes


def test_ferrax_grad_of_jax_program_is_jaxs_grad() -> None:
    # relu, gelu (custom_jvp inside), the user's custom_jvp (with nondiff_argnums) and
    # custom_vjp differentiate by the users' rules, in ferrax as in JAX.
    converted = from_jax(jax.make_jaxpr(custom_loss)(V))
    loss = lambda x: _ferrax_fun(converted)(x)[0]  # noqa: E731
    want = jax.jit(jax.grad(custom_loss))(V)
    _close(ferrax.grad(loss)(V), want)
    _close(ferrax.jit(ferrax.grad(loss))(V), want)
    batch = np.stack([V, -V])
    _close(ferrax.jit(ferrax.vmap(ferrax.grad(loss)))(batch), jax.jit(jax.vmap(jax.grad(custom_loss)))(batch))
    # Forward mode through the custom_jvp rules (JAX's custom_vjp refuses jvp, as ferrax's).
    no_vjp = lambda x: jnp.sum(scaled_sin(x) + times(x, 2.0))  # noqa: E731
    forward = from_jax(jax.make_jaxpr(no_vjp)(V))
    ones = np.ones(3, np.float32)
    _, tangent = ferrax.jit(lambda x, t: ferrax.jvp(lambda y: _ferrax_fun(forward)(y)[0], (x,), (t,)))(V, ones)
    _close(tangent, jax.jit(lambda x, t: jax.jvp(no_vjp, (x,), (t,)))(V, ones)[1])


def test_ferrax_grad_through_int_operands_and_symbolic_zeros() -> None:
    @jax.custom_jvp
    def h(x: jax.Array, i: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jnp.sin(x) * i, i + 1

    @h.defjvp
    def _(p: tuple[jax.Array, jax.Array], t: tuple[jax.Array, Any]) -> tuple[Any, Any]:
        return h(*p), (jnp.cos(p[0]) * t[0] * p[1] * 2, t[1])

    @jax.custom_jvp
    def k(x: jax.Array, y: jax.Array) -> jax.Array:
        return x * y

    @partial(k.defjvp, symbolic_zeros=True)
    def _(p: tuple[jax.Array, jax.Array], t: tuple[Any, Any]) -> tuple[Any, Any]:
        zero = jax.custom_derivatives.SymbolicZero
        tx = 0.0 if type(t[0]) is zero else t[0] * p[1] * 4
        return k(*p), tx + (0.0 if type(t[1]) is zero else t[1] * p[0] * 4)

    @jax.custom_vjp
    def v(x: jax.Array, i: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jnp.sin(x) * i, i * 2

    v.defvjp(lambda x, i: (v(x, i), (x, i)), lambda r, ct: (jnp.cos(r[0]) * ct[0] * r[1] * 7, None))

    def f(x: jax.Array, i: jax.Array) -> jax.Array:
        a, j = h(x, i)
        b, j2 = v(x, i)
        return jnp.sum(a + b + k(x, 3.0)) + (j + j2).sum().astype(jnp.float32) * 0.0

    converted = from_jax(jax.make_jaxpr(f)(V, I))
    want = jax.jit(jax.grad(f))(V, I)
    _close(ferrax.jit(ferrax.grad(lambda x, i: _ferrax_fun(converted)(x, i)[0]))(V, I), want)
    back = to_jax(converted)
    _close(jax.jit(jax.grad(lambda x, i: back(x, i)[0]))(V, I), want)


def test_dce_and_typecheck_on_jax_program() -> None:
    def f(x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jnp.sin(x) * 2.0, jnp.cos(y) @ W

    converted = from_jax(jax.make_jaxpr(f)(V, X))
    assert core.typecheck(converted.jaxpr) == (converted.in_avals, converted.out_avals)
    assert [a.str_short() for a in converted.in_avals] == ["f32[3]", "f32[2,3]"]
    pruned, used = core.dce(converted.jaxpr, [True, False])
    assert used == [True, False]
    assert [e.primitive for e in pruned.eqns] == ["sin", "mul"]
    _close(ferrax.eval_jaxpr(pruned, converted.consts, V), [np.sin(V) * 2])


def test_nested_constants_are_hoisted() -> None:
    c = jnp.array([1.0, 2.0, 3.0])
    n = np.array([4.0, 5.0, 6.0], np.float32)

    def f(x: jax.Array) -> tuple[Any, ...]:
        branch = lax.cond(x[0] > 0, lambda y: jax.jit(lambda z: z * c)(y), lambda y: jax.jit(lambda z: z + n)(y), x)
        loop = lax.while_loop(lambda s: s[0] < 10.0, lambda s: jax.jit(lambda z: z * n)(s), x)
        scanned = lax.scan(lambda s, y: (jax.jit(lambda z: z * c)(s) + y, s), x, jnp.ones((2, 3)))
        return branch, loop, scanned, jax.checkpoint(lambda y: jax.jit(lambda z: jnp.sin(z) * c)(y))(x)

    traced = jax.make_jaxpr(f)(V)
    converted = from_jax(traced)
    # JAX keeps an inner jit's constants in its jaxpr; ferrax, as its own tracing does,
    # makes them constants of the outermost jaxpr passed down as operands.
    assert len(converted.consts) == 5  # cond: 2, while, scan, checkpoint: 1 each
    assert not any(e.params["jaxpr"].consts for e in converted.jaxpr.eqns if e.primitive == "jit")
    cond_eqn = next(e for e in converted.jaxpr.eqns if e.primitive == "cond")
    assert [len(b.jaxpr.invars) for b in cond_eqn.params["branches"]] == [3, 3]
    want = jax.jit(f)(V)
    _close(ferrax.jit(_ferrax_fun(converted))(V), jax.tree.leaves(want))
    back = to_jax(converted)
    _close(back(V), jax.tree.leaves(want))
    assert str(from_jax(jax.make_jaxpr(back)(V)).jaxpr) == str(converted.jaxpr)


def test_jax_empty_is_a_zero() -> None:
    # JAX's reverse mode of cond fills residuals a branch does not make with `empty2`, a
    # primitive ferrax lacks: it arrives as a zero.
    def f(x: jax.Array) -> Any:
        return lax.cond(x[0] > 0, jnp.sin, jnp.cos, x).sum()

    converted = from_jax(jax.make_jaxpr(jax.grad(f))(V))
    branches = next(e for e in converted.jaxpr.eqns if e.primitive == "cond").params["branches"]
    assert ":f32[] = broadcast_in_dim 0.0:f32[]" in str(branches[0])
    _close(ferrax.jit(_ferrax_fun(converted))(V), [jax.jit(jax.grad(f))(V)])


def test_shared_jaxprs_stay_shared() -> None:
    inner = jax.jit(lambda y: jnp.sin(y) * 2.0)

    def f(x: jax.Array) -> Any:
        return inner(x) + inner(inner(x))

    traced = jax.make_jaxpr(f)(V)
    converted = from_jax(traced)
    jits = [e.params["jaxpr"] for e in converted.jaxpr.eqns if e.primitive == "jit"]
    assert len(jits) == 3 and jits[0] == jits[1] == jits[2]
    # Printed once, as JAX prints it: `let lambda = { ... } in { ... jaxpr=lambda ... }`.
    assert str(converted) == str(traced)
    assert str(jax.make_jaxpr(to_jax(converted))(V)) == str(traced)


# ------------------------------------------------------- programs ferrax traces


@ferrax.custom_jvp
def fx_scaled_sin(x: Any) -> Any:
    return fnp.sin(x)


@fx_scaled_sin.defjvp
def _fx_scaled_sin_jvp(primals: Any, tangents: Any) -> tuple[Any, Any]:
    return fx_scaled_sin(primals[0]), fnp.cos(primals[0]) * tangents[0] * 3.0


@ferrax.custom_vjp
def fx_clipped_sin(x: Any) -> Any:
    return fnp.sin(x)


def _fx_fwd(x: Any) -> tuple[Any, Any]:
    return fx_clipped_sin(x), (fnp.cos(x), None)


def _fx_bwd(res: Any, ct: Any) -> tuple[Any]:
    return (fnp.clip(res[0] * ct, -0.5, 0.5),)


fx_clipped_sin.defvjp(_fx_fwd, _fx_bwd)


def fx_mlp(x: Any) -> Any:
    return fnp.sum(fnp.tanh(ferrax.nn.relu(x @ W + B)) ** 2)


def fx_custom_loss(x: Any) -> Any:
    return fnp.sum((fx_scaled_sin(x) + fx_clipped_sin(x) * 2.0 + ferrax.nn.relu(x)) * V)


FERRAX_PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "mlp": (fx_mlp, (X,)),
    "grad_mlp": (ferrax.grad(fx_mlp), (X,)),
    "custom_rules": (fx_custom_loss, (V,)),
    "control_flow": (
        lambda x: (
            flax.cond(x[0] > 0, lambda y: y * 2.0, lambda y: y - 1.0, x),
            flax.while_loop(lambda c: c[0] < 10.0, lambda c: c * 2.0, x),
            flax.scan(lambda c, y: (c + y, c * y), x, np.ones((2, 3), np.float32)),
            ferrax.jit(lambda y: y * W[0, :3])(x),
            ferrax.checkpoint(lambda y: fnp.sin(fnp.sin(y)))(x),
        ),
        (V,),
    ),
    "ints": (lambda a, b: (a // b, a % b, a << 1, a & b, ~a, a > b, fnp.where(a > b, a, b)), (I, np.abs(I) + 1)),
    "vmap": (ferrax.vmap(lambda x: fnp.dot(x, W)), (X,)),
}


@pytest.mark.parametrize("name", FERRAX_PROGRAMS)
def test_ferrax_to_jax_to_ferrax(name: str) -> None:
    fn, args = FERRAX_PROGRAMS[name]
    traced = ferrax.make_jaxpr(fn)(*args)
    in_jax = to_jax(traced)
    assert str(from_jax(jax.make_jaxpr(in_jax)(*args)).jaxpr) == str(traced.jaxpr)
    _close(jax.jit(in_jax)(*args), jax.tree.leaves(ferrax.jit(fn)(*args)))


def test_ferrax_prng_program_in_jax() -> None:
    # Values only: ferrax's normal converts a literal to its own type, which JAX's
    # tracing folds away, so the jaxpr coming back is shorter.
    def f(k: Any) -> Any:
        return fr.normal(fr.split(k)[1], (3,)), fr.fold_in(k, 3)

    def in_jax(k: jax.Array) -> tuple[list[Any], list[Any]]:
        want = [jax.random.normal(jax.random.split(k)[1], (3,)), jax.random.fold_in(k, 3)]
        return to_jax(ferrax.make_jaxpr(f)(fr.key(1)))(k), want

    got, want = jax.jit(in_jax)(jax.random.key(1))  # compiled once for both
    _close(got, want)


def test_jax_transformations_of_ferrax_program() -> None:
    # ferrax's custom rules (traced by ferrax when JAX needs them) are what JAX
    # differentiates with, eagerly, under jit and under vmap.
    in_jax = to_jax(ferrax.make_jaxpr(fx_custom_loss)(V))
    loss = lambda x: in_jax(x)[0]  # noqa: E731
    want = ferrax.jit(ferrax.grad(fx_custom_loss))(V)
    _close(jax.grad(loss)(V), want)
    _close(jax.jit(jax.grad(loss))(V), want)
    _close(jax.jit(jax.vmap(jax.grad(loss)))(jnp.stack([V, V])), np.stack([want, want]))
    text = str(jax.make_jaxpr(loss)(V))
    assert "jvp=_fx_scaled_sin_jvp" in text and "fwd=_fx_fwd" in text and "bwd=_fx_bwd" in text


# ------------------------------------------------------------------------ refusals


def test_unsupported_jax_primitive_is_named() -> None:
    with pytest.raises(UnsupportedPrimitiveError, match="'approx_top_k' is a JAX primitive ferrax does not have") as e:
        from_jax(jax.make_jaxpr(lambda x: lax.approx_max_k(x, 2))(jnp.ones(8)))
    assert e.value.primitive == "approx_top_k"
    with pytest.raises(UnsupportedPrimitiveError, match="'debug_print' is a host callback"):
        from_jax(jax.make_jaxpr(lambda x: jax.debug.print("{}", x))(V))
    assert issubclass(UnsupportedPrimitiveError, ferrax.FerraxError)


def test_bad_inputs() -> None:
    with pytest.raises(InteropError, match=r"JAX type complex64\[3\] has no ferrax counterpart \(its dtype\)"):
        from_jax(jax.make_jaxpr(lambda x: x * 2)(jnp.ones(3, jnp.complex64)))
    with pytest.raises(InteropError, match="from_jax takes JAX's ClosedJaxpr"):
        from_jax(ferrax.make_jaxpr(fnp.sin)(V))
    with pytest.raises(InteropError, match="to_jax takes a ferrax ClosedJaxpr"):
        to_jax(jax.make_jaxpr(jnp.sin)(V))  # type: ignore[arg-type]
    run = to_jax(ferrax.make_jaxpr(lambda x: x * 2.0)(V))
    with pytest.raises(InteropError, match="the jaxpr takes 1 arguments, got 2"):
        run(V, V)
    with pytest.raises(InteropError, match=r"argument 0 is f32\[2,3\], the jaxpr takes f32\[3\]"):
        run(X)


def test_to_jax_refusals() -> None:
    read = core.parse_jaxpr("{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = add a b in (c,) }")
    with pytest.raises(InteropError, match=r"a constant of type f32\[3\] has no value"):
        to_jax(core.ClosedJaxpr(read, [None]))
    ext = core.ExtensionPrimitive("my_double", lambda avals, params: avals)
    b = core.JaxprBuilder()
    x = b.add_invar(core.ShapedArray((3,), np.float32))
    with pytest.raises(UnsupportedPrimitiveError, match="'my_double' has no JAX primitive of that name"):
        to_jax(core.ClosedJaxpr(b.build(b.add_eqn(ext, [x], {})), []))
    # A custom_jvp_call read from text has its rule's name only: it runs, but JAX
    # cannot differentiate it.
    text = """{ lambda ; a:f32[3]. let
        b:f32[3] = custom_jvp_call[name=f call_jaxpr={ lambda ; c:f32[3]. let d:f32[3] = sin c in (d,) }
          jvp=f_jvp symbolic_zeros=False] a
      in (b,) }"""
    run = to_jax(core.ClosedJaxpr(core.parse_jaxpr(text), []))
    _close(run(V), [np.sin(V)])
    with pytest.raises(InteropError, match="custom_jvp_call 'f' was read from text"):
        jax.grad(lambda x: run(x)[0].sum())(V)


def test_without_jax(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(JaxNotInstalledError, match="ferrax.interop needs jax"):
        from_jax(object())
    with pytest.raises(ImportError):
        to_jax(ferrax.make_jaxpr(lambda x: x)(V))


def test_importing_interop_does_not_import_jax() -> None:
    code = "import sys, ferrax.interop; assert 'jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
