"""jit: compiled results, the trace cache, nesting, lowering and the device arrays."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import lax


def chain(x: Any) -> Any:
    for _ in range(5):
        x = fnp.sin(x) * 1.5 + x
    return fnp.sum(x)


def test_jit_matches_eager() -> None:
    x = np.linspace(0.1, 1, 16, dtype=np.float32)
    got = fx.jit(chain)(x)
    assert isinstance(got, fx.Array)
    assert got.dtype == np.float32 and got.shape == ()
    np.testing.assert_allclose(np.asarray(got), np.asarray(chain(x)), rtol=1e-5)


def test_a_new_trace_only_for_a_new_signature() -> None:
    traces: list[int] = []

    def f(x: Any, y: Any) -> Any:
        traces.append(1)
        return x * y + 1.0

    jf = fx.jit(f)
    a = np.ones(3, np.float32)
    jf(a, a)
    jf(a + 1, a * 2)
    assert len(traces) == 1
    jf(np.ones(4, np.float32), np.ones(4, np.float32))  # new shape
    assert len(traces) == 2
    jf(a.astype(np.float16), a.astype(np.float16))  # new dtype
    assert len(traces) == 3
    jf(a.astype(np.float64), a.astype(np.float64))  # float32 without x64, as in JAX
    assert len(traces) == 3
    jf(a, 2.0)  # a weakly typed Python scalar: another signature
    jf(a, 3.0)
    assert len(traces) == 4
    jf(a, np.float32(2.0))  # a strong scalar is not the weak one
    assert len(traces) == 5
    assert jf._cache_size() == 5


def test_static_arguments_and_pytree_structure_key_the_cache() -> None:
    traces: list[int] = []

    def f(x: Any, n: int) -> Any:
        traces.append(n)
        for _ in range(n):
            x = x + 1.0
        return x

    jf = fx.jit(f, static_argnums=1)
    x = np.zeros(2, np.float32)
    np.testing.assert_array_equal(np.asarray(jf(x, 3)), [3.0, 3.0])
    np.testing.assert_array_equal(np.asarray(jf(x, 3)), [3.0, 3.0])
    np.testing.assert_array_equal(np.asarray(jf(x, 2)), [2.0, 2.0])
    assert traces == [3, 2]

    g = fx.jit(lambda t: t[0] + t[1])
    g((x, x))
    g([x, x])
    assert g._cache_size() == 2

    with pytest.raises(ValueError, match="not hashable"):  # as JAX
        jf(x, [1])  # type: ignore[arg-type]

    h = fx.jit(lambda x, *, k: x * k, static_argnames="k")
    np.testing.assert_array_equal(np.asarray(h(x + 1, k=4)), [4.0, 4.0])


def test_two_functions_never_share_an_executable() -> None:
    x = np.ones(3, np.float32)
    f = fx.jit(lambda x: x + 1.0)
    g = fx.jit(lambda x: x + 2.0)
    np.testing.assert_array_equal(np.asarray(f(x)), [2.0] * 3)
    np.testing.assert_array_equal(np.asarray(g(x)), [3.0] * 3)


def test_nested_jit_stays_a_call() -> None:
    inner = fx.jit(fnp.sin)
    outer = fx.jit(lambda x: inner(x) * 2.0)
    x = np.linspace(0, 1, 4, dtype=np.float32)
    closed = fx.make_jaxpr(outer)(x)
    (eqn,) = closed.jaxpr.eqns
    assert eqn.primitive == "jit"
    (inner_eqn, _) = eqn.params["jaxpr"].jaxpr.eqns
    assert inner_eqn.primitive == "jit" and inner_eqn.params["name"] == "sin"
    text = outer.lower(x).as_text()
    assert '"func.call"' in text and "func.func private @sin_" in text
    np.testing.assert_allclose(np.asarray(outer(x)), np.sin(x) * 2.0, rtol=1e-6)


def test_lower_compile_and_trace() -> None:
    x = np.ones((2, 3), np.float32)
    jf = fx.jit(lambda x: fnp.sum(x * 2.0))
    lowered = jf.lower(x)
    text = lowered.as_text()
    assert text.startswith("module @jit__lambda_")
    assert "func.func public @main(%arg0: tensor<2x3xf32>) -> (tensor<f32>)" in text
    compiled = lowered.compile()
    assert float(np.asarray(compiled(x))) == 12.0
    assert str(jf.trace(x).jaxpr) == str(fx.make_jaxpr(lambda x: fnp.sum(x * 2.0))(x))


def test_closed_over_arrays_are_passed_as_arguments() -> None:
    c = np.arange(4, dtype=np.float32)
    jf = fx.jit(lambda x: x * c + 1.0)
    text = jf.lower(np.ones(4, np.float32)).as_text()
    # The constant is @main's first argument, not text.
    assert "func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>)" in text
    assert "dense<[" not in text
    np.testing.assert_array_equal(np.asarray(jf(np.ones(4, np.float32))), c + 1.0)


def test_device_arrays_stay_on_device_between_calls() -> None:
    jf = fx.jit(lambda x: x * 2.0)
    y = jf(np.ones(3, np.float32))
    z = jf(y)
    assert y._host is None  # never brought to the host
    np.testing.assert_array_equal(np.asarray(z), [4.0] * 3)
    assert z.shape == (3,) and z.dtype == np.float32
    assert "Array([4., 4., 4.]" in repr(z)
    d = fx.device_put(np.arange(3, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(fx.jit(lambda a: a + 1)(d)), [1, 2, 3])
    # Eager operations accept device arrays.
    np.testing.assert_array_equal(np.asarray(fnp.sin(z)), np.sin(np.asarray(z)))


def test_eval_jaxpr_of_a_jaxpr_with_calls() -> None:
    x = np.linspace(0, 1, 3, dtype=np.float32)
    closed = fx.make_jaxpr(fx.jit(lambda x: fx.jit(fnp.cos)(x) + x))(x)
    (out,) = fx.eval_jaxpr(closed.jaxpr, closed.consts, x)
    np.testing.assert_allclose(np.asarray(out), np.cos(x) + x, rtol=1e-6)
    # Under make_jaxpr, evaluating re-stages the equations.
    again = fx.make_jaxpr(lambda x: fx.eval_jaxpr(closed.jaxpr, closed.consts, x)[0])(x)
    assert str(again) == str(closed)


def test_jit_output_dtypes_follow_the_jaxpr() -> None:
    jf = fx.jit(lambda x: (x > 0, x.astype(np.int32), x * 2))
    b, i, f = jf(np.array([-1.5, 2.5], np.float32))
    assert b.dtype == np.bool_ and i.dtype == np.int32 and f.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(b), [False, True])
    np.testing.assert_array_equal(np.asarray(i), [-1, 2])


def test_bfloat16_results_come_back_to_the_host() -> None:
    import ml_dtypes

    x = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
    y = fx.jit(lambda x: x * 2)(x)
    assert y.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(y).astype(np.float32), [3.0, -4.0])


def test_importing_and_using_ferrax_leaves_jax_out() -> None:
    code = (
        "import sys, numpy as np, ferrax as fx, ferrax.numpy as fnp\n"
        "f = fx.jit(lambda x: fnp.sum(fnp.sin(x)))\n"
        "print(float(np.asarray(f(np.ones(3, np.float32)))))\n"
        "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if m.startswith('jax'))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_lax_functions_under_jit() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = fx.jit(lambda x: lax.dot_general(x, lax.transpose(x, (1, 0)), (((1,), (0,)), ((), ()))))
    np.testing.assert_allclose(np.asarray(f(x)), x @ x.T)


def test_the_fast_path_never_confuses_argument_structures() -> None:
    def f(*args: Any) -> Any:
        # A different computation for one tuple argument than for two arrays.
        if len(args) == 1:
            a, b = args[0]
            return a - b
        return args[0] + args[1]

    jf = fx.jit(f)
    a = fx.device_put(np.full(2, 5.0, np.float32))
    b = fx.device_put(np.full(2, 3.0, np.float32))
    np.testing.assert_array_equal(np.asarray(jf((a, b))), [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(jf(a, b)), [8.0, 8.0])
    np.testing.assert_array_equal(np.asarray(jf((a, b))), [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(jf(a, b)), [8.0, 8.0])


def test_a_jit_equation_left_by_a_transformation_runs_compiled() -> None:
    """What vmap, jvp and reverse mode leave of a jitted call runs through XLA, as JAX
    runs a pjit equation: the values are bit-identical to JAX's (XLA's transcendental
    functions, not NumPy's), and the new but equal jaxprs made on every call compile once."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    from ferrax import _jit

    x = np.linspace(-2.0, 3.0, 33, dtype=np.float32)

    def f(v: Any) -> Any:
        return fnp.sum(fnp.tanh(fnp.exp(v) * fnp.sin(v)))

    def jf(v: Any) -> Any:
        return jnp.sum(jnp.tanh(jnp.exp(v) * jnp.sin(v)))

    ours = [np.asarray(fx.grad(fx.jit(f))(x)) for _ in range(3)]
    theirs = np.asarray(jax.grad(jax.jit(jf))(x))
    for g in ours:
        np.testing.assert_array_equal(g, theirs)
    before = len(_jit._eager_executables)
    np.asarray(fx.grad(fx.jit(f))(x))
    assert len(_jit._eager_executables) == before  # the same texts: no new compilation

    batched = fx.vmap(fx.jit(lambda v: fnp.log1p(fnp.exp(v)) ** 3))(x.reshape(3, 11))
    assert isinstance(batched, fx.Array)
    np.testing.assert_array_equal(
        np.asarray(batched), np.asarray(jax.vmap(jax.jit(lambda v: jnp.log1p(jnp.exp(v)) ** 3))(x.reshape(3, 11)))
    )
