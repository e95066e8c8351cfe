"""Host callbacks inside traced and compiled code: ``ferrax.debug.print`` and
``ferrax.debug.callback`` (the ``debug_callback`` primitive) and ``ferrax.pure_callback``,
against JAX 0.10.2: the lines printed (and their order) under jit, control flow, grad
and vmap, the jaxpr text, the effect DCE respects, the lowering, and the errors.

Every case program is written once over a namespace of JAX-like functions and run with
JAX and with ferrax; the standard output of both is captured and compared.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import core

J = SimpleNamespace(
    jit=jax.jit, grad=jax.grad, vmap=jax.vmap, debug=jax.debug, lax=jax.lax, np=jnp, block=jax.block_until_ready,
    make_jaxpr=jax.make_jaxpr, pure_callback=jax.pure_callback, SDS=jax.ShapeDtypeStruct, checkpoint=jax.checkpoint,
)
F = SimpleNamespace(
    jit=fx.jit, grad=fx.grad, vmap=fx.vmap, debug=fx.debug, lax=fx.lax, np=fnp, block=fx.block_until_ready,
    make_jaxpr=fx.make_jaxpr, pure_callback=fx.pure_callback, SDS=fx.ShapeDtypeStruct, checkpoint=fx.checkpoint,
)


# ------------------------------------------------------------------ printed lines


def _two_prints(m: Any) -> Any:
    def f(x: Any) -> Any:
        m.debug.print("x={x}", x=x)
        y = x * 2
        m.debug.print("y={} and {}", y, 3)
        return y + 1

    return m.jit(f)(m.np.arange(3.0))


def _cond(m: Any) -> Any:
    def f(x: Any) -> Any:
        def yes(v: Any) -> Any:
            m.debug.print("yes {}", v)
            return v + 1

        def no(v: Any) -> Any:
            m.debug.print("no {}", v)
            return v - 1

        return m.lax.cond(x[0] > 0, yes, no, x) + m.lax.cond(x[0] < 0, yes, no, x)

    return m.jit(f)(m.np.ones(2))


def _scan(m: Any) -> Any:
    def f(xs: Any) -> Any:
        def body(c: Any, x: Any) -> Any:
            m.debug.print("carry {} x {}", c, x)
            return c + x, c * x

        return m.lax.scan(body, 0.5, xs)

    return m.jit(f)(m.np.arange(4.0))


def _while(m: Any) -> Any:
    def f(n: Any) -> Any:
        def body(c: Any) -> Any:
            m.debug.print("i={i} acc={a}", i=c[0], a=c[1])
            return c[0] + 1, c[1] * 2

        return m.lax.while_loop(lambda c: c[0] < n, body, (0, 1.0))

    return m.jit(f)(3)


def _grad_of_jit(m: Any) -> Any:
    def f(x: Any) -> Any:
        m.debug.print("primal {}", x)
        return m.np.sin(x) * x

    jitted = m.jit(f)
    return m.grad(lambda x: jitted(x).sum())(m.np.array([0.5, 1.0]))


def _jit_of_grad(m: Any) -> Any:
    def f(x: Any) -> Any:
        m.debug.print("inside grad {}", x)
        return (x * x).sum()

    return m.jit(m.grad(f))(m.np.array([1.0, 2.0]))


def _vmap_of_jit(m: Any) -> Any:
    def f(x: Any, y: Any) -> Any:
        m.debug.print("lane {} with {}", x, y)
        return x * y

    return m.vmap(m.jit(f), in_axes=(1, None))(m.np.arange(6.0).reshape(2, 3), 7.0)


def _ordered(m: Any) -> Any:
    # Ordered callbacks run in program order. (Where unordered ones run relative to them
    # is up to XLA's schedule: JAX's, with its token, runs them after; ferrax's in
    # program order. Not compared.)
    def f(x: Any) -> Any:
        m.debug.print("first {}", x, ordered=True)
        m.debug.callback(lambda v: print("second", v), x + 1, ordered=True)
        m.debug.print("third {}", x + 2, ordered=True)
        return x

    return m.jit(f)(m.np.float32(1.5))


def _callback(m: Any) -> Any:
    def show(a: Any, tag: str, b: Any = None) -> None:
        print("callback", tag, a, b["k"], b["s"])

    def f(x: Any) -> Any:
        m.debug.callback(show, x, "tag", b={"k": x * 3, "s": "static"})
        return x

    return m.jit(f)(m.np.arange(2, dtype=m.np.int32))


def _eager_control_flow(m: Any) -> Any:
    # Not jitted: the bodies are traced, the control flow runs eagerly.
    def body(c: Any, x: Any) -> Any:
        m.debug.print("eager scan {} {}", c, x)
        return c + x, None

    out = m.lax.scan(body, 0, m.np.arange(3))
    m.lax.cond(True, lambda: m.debug.print("eager cond"), lambda: None)
    m.lax.fori_loop(0, 2, lambda i, c: (m.debug.print("fori {}", i), c)[1], 0)
    return out


def _fori_in_jit(m: Any) -> Any:
    def f(x: Any) -> Any:
        def body(i: Any, c: Any) -> Any:
            m.debug.print("step {} {}", i, c)
            return c * x

        return m.lax.fori_loop(0, 3, body, 1.0)

    return m.jit(f)(2.0)


def _nested_jit(m: Any) -> Any:
    inner = m.jit(lambda x: (m.debug.print("inner {}", x), x + 1)[1])
    return m.jit(lambda x: inner(inner(x)))(1.0)


def _grad_of_checkpoint(m: Any) -> Any:
    # The checkpointed body runs again in the backward pass: printed twice, as JAX's.
    f = m.checkpoint(lambda x: (m.debug.print("remat {}", x), m.np.sin(x))[1])
    return m.grad(lambda x: f(x) * 2)(1.0)


def _grad_of_scan(m: Any) -> Any:
    def f(x: Any) -> Any:
        return m.lax.scan(lambda c, y: (m.debug.print("gs {} {}", c, y), (c * y, None))[1], 1.0, x)[0]

    return m.grad(f)(m.np.arange(1.0, 4.0))


CASES: dict[str, Callable[[Any], Any]] = {
    "nested_jit": _nested_jit,
    "grad_of_checkpoint": _grad_of_checkpoint,
    "grad_of_scan": _grad_of_scan,
    "two_prints": _two_prints,
    "cond": _cond,
    "scan": _scan,
    "while": _while,
    "grad_of_jit": _grad_of_jit,
    "jit_of_grad": _jit_of_grad,
    "vmap_of_jit": _vmap_of_jit,
    "ordered": _ordered,
    "callback": _callback,
    "eager_control_flow": _eager_control_flow,
    "fori_in_jit": _fori_in_jit,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_printed_lines_equal_jax(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    case = CASES[name]
    want_value = J.block(case(J))
    want = capsys.readouterr().out
    got_value = F.block(case(F))
    got = capsys.readouterr().out
    assert want, "the JAX program printed nothing"
    assert got == want
    leaves_f = jax.tree_util.tree_leaves(jax.tree_util.tree_map(np.asarray, got_value))
    leaves_j = jax.tree_util.tree_leaves(jax.tree_util.tree_map(np.asarray, want_value))
    assert len(leaves_f) == len(leaves_j)
    for a, b in zip(leaves_f, leaves_j):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_compiled_program_calls_back_each_run(capsys: pytest.CaptureFixture[str]) -> None:
    # One compilation, the callback runs at every call (nothing is cached as a value).
    f = fx.jit(lambda x: (fx.debug.print("run {}", x), x)[1])
    for i in range(3):
        fx.block_until_ready(f(fnp.float32(i)))
    assert capsys.readouterr().out == "run 0.0\nrun 1.0\nrun 2.0\n"


def test_callback_values_are_ferrax_arrays_as_jax_gives_jax_arrays() -> None:
    seen: list[Any] = []
    fx.block_until_ready(fx.jit(lambda x, y: (fx.debug.callback(lambda *a: seen.extend(a), x, y), x)[1])(
        fnp.arange(3), 2.0))
    fx.debug.callback(lambda *a: seen.extend(a), fnp.arange(3), 2.0)
    assert all(isinstance(a, fx.Array) for a in seen)
    # As in JAX: a weak operand is weak eagerly, not in the compiled program.
    assert [a.weak_type for a in seen] == [False, False, False, True]
    assert [str(a.dtype) for a in seen] == ["int32", "float32", "int32", "float32"]


# --------------------------------------------------------------------- jaxpr text


def _shown(*a: Any) -> None:
    pass


def _doubled(a: Any) -> Any:
    return np.asarray(a) * 2


def test_debug_callback_jaxpr_text_equals_jax() -> None:
    def prog(m: Any) -> Callable[[Any], Any]:
        def f(x: Any) -> Any:
            m.debug.callback(_shown, x, 1.0)
            m.debug.callback(_shown, x * 2, ordered=True)
            return x

        return f

    x = np.arange(3, dtype=np.float32)
    assert str(F.make_jaxpr(prog(F))(x)) == str(J.make_jaxpr(prog(J))(x))
    # Under vmap: one callback per lane, each on its slice (JAX's slice and squeeze).
    xs = np.ones((2, 3), np.float32)
    assert str(F.make_jaxpr(F.vmap(prog(F)))(xs)) == str(J.make_jaxpr(J.vmap(prog(J)))(xs))
    # Under jvp the callback sees the primal only.
    def sq(m: Any) -> Callable[[Any], Any]:
        return lambda x: (m.debug.callback(_shown, x), x * x)[1]

    want = str(J.make_jaxpr(lambda x, t: jax.jvp(sq(J), (x,), (t,)))(x, x))
    assert str(F.make_jaxpr(lambda x, t: fx.jvp(sq(F), (x,), (t,)))(x, x)) == want


def test_pure_callback_jaxpr_text_equals_jax() -> None:
    def prog(m: Any, vmap_method: str | None = None) -> Callable[[Any], Any]:
        def f(x: Any) -> Any:
            return m.pure_callback(_doubled, m.SDS(x.shape, x.dtype), x, vmap_method=vmap_method)

        return f

    x = np.arange(3, dtype=np.float32)
    assert str(F.make_jaxpr(prog(F))(x)) == str(J.make_jaxpr(prog(J))(x))
    xs = np.ones((2, 3), np.float32)
    for method in ("sequential", "expand_dims", "broadcast_all"):
        want = str(J.make_jaxpr(J.vmap(prog(J, method)))(xs))
        assert str(F.make_jaxpr(F.vmap(prog(F, method)))(xs)) == want, method


def test_jaxpr_text_reads_back() -> None:
    def f(x: Any) -> Any:
        fx.debug.print("{}", x)
        return fx.pure_callback(_doubled, fx.ShapeDtypeStruct((3,), np.float32), x)

    text = str(fx.make_jaxpr(f)(np.ones(3, np.float32)))
    assert str(core.parse_jaxpr(text)) == text
    # Read back, the callbacks are names only: such a jaxpr cannot be compiled (nor a
    # module that calls callbacks it is not given: XLA would crash).
    with pytest.raises(fx.LoweringError, match="no Python function"):
        fx.jit(lambda x: fx.eval_jaxpr(core.parse_jaxpr(text), [], x))(np.ones(3, np.float32))
    from ferrax import _ir
    from ferrax._runtime import compile_stablehlo

    jaxpr = core.parse_jaxpr(text)
    with pytest.raises(fx.LoweringError, match="calls host callback 1 .* 0 host callbacks were given"):
        compile_stablehlo(_ir.lower_to_stablehlo(jaxpr), jaxpr.out_avals)


# ------------------------------------------------------------- effects and passes


def test_dce_keeps_debug_callbacks_and_drops_unused_pure_callbacks() -> None:
    def f(x: Any) -> Any:
        fx.debug.print("{}", x)
        fx.pure_callback(_doubled, fx.ShapeDtypeStruct((3,), np.float32), x)
        fx.lax.cond(x[0] > 0, lambda: fx.debug.print("in cond"), lambda: None)
        return x * 2

    jaxpr = fx.make_jaxpr(f)(np.ones(3, np.float32)).jaxpr
    pruned, used = core.dce(jaxpr, [True])
    names = [e.primitive for e in pruned.eqns]
    assert names[0] == "debug_print" and names[-1] == "mul" and (
        "pure_callback" not in names and names.count("debug_print") == 1 and "cond" in names
    )
    assert used == [True]
    assert "pure_callback" in [e.primitive for e in jaxpr.eqns]


def test_lowering_is_jaxlibs_cpu_callback() -> None:
    def f(x: Any) -> Any:
        fx.debug.print("{}", x)
        return fx.pure_callback(_doubled, fx.ShapeDtypeStruct((3,), np.float32), x)

    text = fx.jit(f).lower(np.ones(3, np.float32)).as_text()
    calls = [line for line in text.splitlines() if "custom_call" in line]
    assert len(calls) == 2
    assert all('"xla_ffi_python_cpu_callback"' in c for c in calls)
    assert "has_side_effect = true" in calls[0] and "{index = 0 : ui64}" in calls[0]
    assert "has_side_effect" not in calls[1] and "{index = 1 : ui64}" in calls[1]
    # Ordered callbacks pass a token from one to the next (as JAX's), so XLA keeps them
    # in order; the host function gets and returns it (None in Python). The token is
    # main's first argument and first result, as JAX's.
    ordered = fx.jit(lambda x: [fx.debug.print("{}", x, ordered=True) for _ in range(2)] and x).lower(1.0).as_text()
    calls = [line for line in ordered.splitlines() if "custom_call" in line]
    assert len(calls) == 2 and all("(!stablehlo.token, tensor<f32>) -> !stablehlo.token" in c for c in calls)
    assert "stablehlo.after_all" not in ordered
    assert "@main(%token: !stablehlo.token {jax.token = true}, %arg0: tensor<f32>) -> (!stablehlo.token {jax.token = true}, tensor<f32>)" in ordered
    want = jax.jit(lambda x: [jax.debug.print("{}", x, ordered=True) for _ in range(2)] and x).lower(1.0).as_text()
    assert "@main(%arg0: !stablehlo.token {jax.token = true}, %arg1: tensor<f32>) -> (!stablehlo.token {jax.token = true}" in want


# ------------------------------------------------------------------ pure_callback


def test_pure_callback_values_eager_jit_and_pytrees() -> None:
    def f(m: Any, x: Any) -> Any:
        def host(d: Any) -> Any:
            return {"twice": np.asarray(d["a"]) * 2, "n": np.int32(d["a"].shape[0]) + d["k"]}

        shapes = {"twice": m.SDS(x.shape, x.dtype), "n": m.SDS((), np.int32)}
        return m.pure_callback(host, shapes, {"a": x, "k": 3})

    x = np.arange(3, dtype=np.float32)
    want = f(J, x)
    for got in (f(F, x), fx.jit(lambda x: f(F, x))(x)):
        assert sorted(got) == ["n", "twice"]
        np.testing.assert_array_equal(np.asarray(got["twice"]), np.asarray(want["twice"]))
        assert int(got["n"]) == int(want["n"])
        assert got["n"].dtype == want["n"].dtype


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all"])
def test_pure_callback_vmap_methods_call_as_jax(method: str) -> None:
    def run(m: Any) -> tuple[Any, list[tuple[tuple[int, ...], tuple[int, ...]]]]:
        seen: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

        def host(a: Any, b: Any) -> Any:
            seen.append((np.shape(a), np.shape(b)))
            return np.asarray(a) + np.asarray(b)

        def f(a: Any, b: Any) -> Any:
            return m.pure_callback(host, m.SDS(np.broadcast_shapes(a.shape, b.shape), a.dtype), a, b, vmap_method=method)

        out = m.vmap(f, in_axes=(0, None))(np.arange(6.0, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32))
        return out, seen

    (want, want_seen), (got, got_seen) = run(J), run(F)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert got_seen == want_seen


def test_pure_callback_errors_as_jax() -> None:
    x = np.ones(3, np.float32)
    wrong_shape = lambda a: np.zeros(4, np.float32)  # noqa: E731
    wrong_dtype = lambda a: np.zeros(3, np.int32)  # noqa: E731
    for fun, message in ((wrong_shape, r"Incorrect output shape for return value #0: Expected: \(3,\), Actual: \(4,\)"),
                         (wrong_dtype, "Incorrect output dtype for return value #0: Expected: float32, Actual: int32")):
        for m in (J, F):
            def g(x: Any) -> Any:
                return m.pure_callback(fun, m.SDS((3,), np.float32), x)

            for run in (g, m.jit(g)):
                with pytest.raises(RuntimeError, match=message):
                    m.block(run(x))
    identity = lambda a: a  # noqa: E731
    for m in (J, F):
        with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
            m.grad(lambda x: m.pure_callback(identity, m.SDS((), np.float32), x))(1.0)
        with pytest.raises(NotImplementedError, match="vmap_method=None"):
            m.vmap(lambda x: m.pure_callback(identity, m.SDS((), np.float32), x))(x)
        with pytest.raises(ValueError, match="vmap_method must be"):
            m.pure_callback(identity, m.SDS((), np.float32), 1.0, vmap_method="parallel")


# -------------------------------------------------------------------- io_callback


def test_io_callback_as_jax() -> None:
    from jax.experimental import io_callback as jax_io

    from ferrax.experimental import io_callback as fx_io

    def run(m: Any, io: Any) -> tuple[Any, list[str]]:
        log: list[str] = []

        def record(a: Any) -> Any:
            log.append(f"got {np.asarray(a)}")
            return np.asarray(a) * 2

        def unused(a: Any) -> Any:
            log.append(f"unused {np.asarray(a)}")
            return np.float32(0)

        def f(x: Any) -> Any:
            y = io(record, m.SDS(x.shape, x.dtype), x)
            io(lambda a: log.append(f"ordered {np.asarray(a)}"), None, y, ordered=True)
            io(unused, m.SDS((), np.float32), x[0])
            return y

        out = m.block(m.jit(f)(np.arange(3, dtype=np.float32)))
        batched = m.block(m.vmap(lambda x: io(record, m.SDS(x.shape, x.dtype), x))(np.ones((2, 2), np.float32)))
        return (out, batched), log

    (want, want_log), (got, got_log) = run(J, jax_io), run(F, fx_io)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert sorted(got_log) == sorted(want_log) and "unused 0.0" in got_log
    # The jaxpr as JAX's; an unused io_callback is kept by DCE (it has an effect).
    def g(m: Any, io: Any) -> Callable[[Any], Any]:
        return lambda x: io(_doubled, m.SDS(x.shape, x.dtype), x, ordered=True)

    x = np.ones(3, np.float32)
    jaxpr = fx.make_jaxpr(g(F, fx_io))(x)
    assert str(jaxpr) == str(J.make_jaxpr(g(J, jax_io))(x))
    assert [e.primitive for e in core.dce(jaxpr.jaxpr, [False])[0].eqns] == ["io_callback"]
    for m, io in ((J, jax_io), (F, fx_io)):
        with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
            m.vmap(g(m, io))(np.ones((2, 3), np.float32))
        with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
            m.grad(lambda x: io(lambda a: a, m.SDS((), np.float32), x))(1.0)


def test_an_exception_in_a_compiled_callback_is_jaxlibs_runtime_error() -> None:
    def bad(x: Any) -> None:
        raise ZeroDivisionError("boom")

    for m in (J, F):
        with pytest.raises(RuntimeError, match="CpuCallback error calling callback(.|\n)*ZeroDivisionError: boom") as info:
            m.block(m.jit(lambda x: (m.debug.callback(bad, x), x)[1])(1.0))
        assert type(info.value).__name__ == "JaxRuntimeError"
    # Eagerly the callback's own exception propagates, as in JAX.
    for m in (J, F):
        with pytest.raises(ZeroDivisionError):
            m.debug.callback(bad, 1.0)
