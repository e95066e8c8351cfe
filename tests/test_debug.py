"""`ferrax.debug.print` and `ferrax.debug.callback` against `jax.debug` (JAX 0.10.2): the
lines printed eagerly and under vmap, grad, jvp and hessian (same text, same order),
the `debug_print` primitive's jaxpr text (equal to JAX's, and JAX's read back),
what the callback receives (ferrax arrays with their weak types, static leaves as they
are), the two-call forms and the format errors. The same programs inside jit (XLA
calling back into Python) are compared too; tests/test_callbacks.py covers jit, control
flow and the primitive's rules in depth."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
import ferrax.debug
import ferrax.numpy as fnp

LIBS: dict[str, tuple[Any, Any]] = {"ferrax": (ferrax, fnp), "jax": (jax, jnp)}


def _square_printing(lib: Any, fmt: str) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        lib.debug.print(fmt, x)
        return x * x

    return f


# Each program prints through lib.debug eagerly (under transformations but not jit).
PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "scalars": lambda lib, np_: lib.debug.print("a {} b {x} c {}", np_.float32(1), 2, x=3.5),
    "arrays": lambda lib, np_: lib.debug.print("{} and {y}", np_.arange(3), y=np_.ones((2, 2), np_.int8)),
    "64-bit numpy": lambda lib, np_: lib.debug.print("{}", np.float64(1.5)),
    "bfloat16": lambda lib, np_: lib.debug.print("bf {}", np_.ones(2, np_.bfloat16)),
    "pytree": lambda lib, np_: lib.debug.print("tree {}", {"a": np_.ones(2), "b": (1.0, None)}),
    "format spec": lambda lib, np_: lib.debug.print("{:.3f}|{!r}", np_.float32(1 / 3), np_.int32(4)),
    "static leaf": lambda lib, np_: lib.debug.print("{} {}", "text", np_.zeros(())),
    "no args": lambda lib, np_: lib.debug.print("plain text"),
    "no placeholders": lambda lib, np_: lib.debug.print("values:", np_.arange(2), 3, skip_format_check=True),
    "two-call": lambda lib, np_: lib.debug.print(ordered=True)("two {}", np_.arange(2)),
    "vmap": lambda lib, np_: lib.vmap(lambda x, y: lib.debug.print("v {} {}", x, y), in_axes=(0, None))(np_.arange(3), 7),
    "vmap axis 1": lambda lib, np_: lib.vmap(lambda x: lib.debug.print("c {}", x), in_axes=1)(np_.arange(6).reshape(2, 3)),
    "nested vmap": lambda lib, np_: lib.vmap(lib.vmap(lambda x: lib.debug.print("vv {}", x)))(np_.arange(4).reshape(2, 2)),
    "grad": lambda lib, np_: lib.grad(_square_printing(lib, "g {}"))(3.0),
    "jvp": lambda lib, np_: lib.jvp(_square_printing(lib, "t {}"), (3.0,), (1.0,)),
    "vjp": lambda lib, np_: lib.vjp(_square_printing(lib, "r {}"), 2.0),
    "hessian": lambda lib, np_: lib.hessian(_square_printing(lib, "h {}"))(2.0),
    "vmap of grad": lambda lib, np_: lib.vmap(lib.grad(_square_printing(lib, "vg {}")))(np_.arange(2.0)),
    "grad of vmap": lambda lib, np_: lib.grad(lambda x: lib.vmap(_square_printing(lib, "gv {}"))(x).sum())(np_.arange(2.0)),
    "callback": lambda lib, np_: lib.debug.callback(lambda a, b, *, c: print("cb", a, b, c), np_.ones(2), "s", c=np_.int32(1)),
    "callback two-call": lambda lib, np_: lib.debug.callback(ordered=True)(lambda a: print("cb2", a), np_.arange(2)),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_printed_lines_as_jax(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = {}
    for lib_name, (lib, np_) in LIBS.items():
        capsys.readouterr()
        PROGRAMS[name](lib, np_)
        outputs[lib_name] = capsys.readouterr().out
    assert outputs["ferrax"] == outputs["jax"]
    assert outputs["ferrax"]  # something was printed


def test_callback_receives_arrays_with_weak_types_as_jax() -> None:
    seen: dict[str, list[tuple[Any, ...]]] = {"ferrax": [], "jax": []}
    for lib_name, (lib, np_) in LIBS.items():

        def record(*xs: Any, lib_name: str = lib_name) -> None:
            seen[lib_name].append(tuple((type(x).__name__, np.shape(x), str(x.dtype), x.weak_type) for x in xs))

        lib.debug.callback(record, 1.0, 2, np_.ones(3, np_.float16), np.float64(1.0))
        lib.vmap(lambda x: lib.debug.callback(record, x, 1.0))(np_.arange(2))
    # (shape, dtype, weak type) of each argument of each call; the array classes differ.
    assert [[x[1:] for x in call] for call in seen["ferrax"]] == [[x[1:] for x in call] for call in seen["jax"]]
    assert len(seen["ferrax"]) == 3


def test_callback_values_are_ferrax_arrays() -> None:
    got: list[Any] = []
    ferrax.debug.callback(lambda x: got.append(x), np.arange(3))
    assert isinstance(got[0], ferrax.Array) and got[0].tolist() == [0, 1, 2]


FORMAT_ERRORS: list[tuple[Callable[[Any], Any], type[Exception], str]] = [
    (lambda lib: lib.debug.print("{x}"), KeyError, "x"),
    (lambda lib: lib.debug.print("{}"), IndexError, "index out of range"),
    (lambda lib: lib.debug.print("{} {}", 1, 2, 3), ValueError, "Unused positional arguments to `(jax|ferrax).debug.print`: \\[3\\]"),
    (lambda lib: lib.debug.print("{a}", a=1, b=2), ValueError, "Unused keyword arguments to `(jax|ferrax).debug.print`: \\['b'\\]"),
    (lambda lib: lib.debug.print(None, 1), TypeError, "two-call form"),
    (lambda lib: lib.debug.callback(None, 1), TypeError, "two-call form"),
]


@pytest.mark.parametrize("case", range(len(FORMAT_ERRORS)))
def test_errors_as_jax(case: int, capsys: pytest.CaptureFixture[str]) -> None:
    make, error, message = FORMAT_ERRORS[case]
    for lib in (ferrax, jax):
        with pytest.raises(error, match=message):
            make(lib)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("name", ["scalars", "arrays", "pytree", "format spec", "static leaf"])
def test_inside_jit_prints_as_jax(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The arguments become the jitted function's (the static leaf stays static).
    out = {}
    for key, (lib, np_) in LIBS.items():
        lib.block_until_ready(lib.jit(lambda: PROGRAMS[name](lib, np_))())
        out[key] = capsys.readouterr().out
    assert out["jax"] and out["ferrax"] == out["jax"]


def test_module_exports() -> None:
    assert set(ferrax.debug.__all__) <= {n for n in dir(jax.debug) if not n.startswith("_")}
    for name in ferrax.debug.__all__:
        assert getattr(ferrax.debug, name).__doc__
    assert "debug" in ferrax.__all__


# ------------------------------------------------------------- the debug_print primitive


def _print_in_while(lib: Any) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        def body(c: Any) -> Any:
            lib.debug.print("w: {c} (c)", c=c, ordered=True)
            return c + 1

        return lib.lax.while_loop(lambda c: c < 3, body, x)

    return f


def _print_in_scan(lib: Any) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        def body(c: Any, y: Any) -> Any:
            lib.debug.print("{} {}", c, y)
            return c + 1, None

        return lib.lax.scan(body, x, None, length=3)[0]

    return f


def _print_in_cond(lib: Any) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        return lib.lax.cond(x > 0, lambda v: (lib.debug.print("pos {}", v), v)[1], lambda v: -v, x)

    return f


JAXPR_PROGRAMS: dict[str, Callable[[Any], Callable[[Any], Any]]] = {
    "keyword": lambda lib: lambda x: lib.debug.print("x={x}", x=x),
    "positional and literal": lambda lib: lambda x: lib.debug.print("y {} {}", x, 3),
    "static leaf, ordered": lambda lib: lambda x: lib.debug.print("{} {y} {}", x, "hi", y=3.0, ordered=True),
    "no placeholders": lambda lib: lambda x: lib.debug.print("plain"),
    "empty": lambda lib: lambda x: lib.debug.print(""),
    "pytree": lambda lib: lambda x: lib.debug.print("t {}", {"a": x, "b": (x * 2, None, "s")}),
    "partitioned": lambda lib: lambda x: lib.debug.print("p {}", x, partitioned=True),
    "vmap": lambda lib: lambda x: lib.vmap(lambda v: lib.debug.print("v {}", v))(lib.numpy.stack([x, x])),
    "grad": lambda lib: lib.grad(lambda x: (lib.debug.print("g {}", x), x * x)[1]),
    "while": _print_in_while,
    "scan": _print_in_scan,
    "cond": _print_in_cond,
    "jit": lambda lib: lib.jit(lambda x: (lib.debug.print("in jit {}", x), x)[1]),
}


# grad's jaxpr around the print differs from JAX's in ways of its own (how the
# linearized program is cleaned up), not the print's: its lines are compared below.
TEXT_PROGRAMS = [name for name in JAXPR_PROGRAMS if name != "grad"]


@pytest.mark.parametrize("name", TEXT_PROGRAMS)
def test_debug_print_jaxpr_text_equals_jax(name: str) -> None:
    texts = {key: str(lib.make_jaxpr(JAXPR_PROGRAMS[name](lib))(1.5)) for key, (lib, _) in LIBS.items()}
    assert "debug_print[" in texts["jax"]
    assert texts["ferrax"] == texts["jax"]


def test_debug_print_jaxpr_text_with_print_options_equals_jax() -> None:
    # NumPy's print options at the call are params (and format the line).
    with np.printoptions(precision=3, suppress=True, threshold=5):
        texts = {key: str(lib.make_jaxpr(lambda x: lib.debug.print("{}", x))(np.ones(3))) for key, (lib, _) in LIBS.items()}
    assert "('precision', 3)" in texts["jax"]
    assert texts["ferrax"] == texts["jax"]


@pytest.mark.parametrize("name", TEXT_PROGRAMS)
def test_jax_debug_print_text_reads_back(name: str) -> None:
    text = str(jax.make_jaxpr(JAXPR_PROGRAMS[name](jax))(1.5))
    assert str(ferrax._ir.parse_jaxpr(text)) == text


def test_debug_print_fmt_that_does_not_read_raw_is_quoted() -> None:
    # A format with a newline (or surrounding spaces) is quoted so that it reads back.
    for fmt in (" a {} ", "two\nlines {}"):
        text = str(ferrax.make_jaxpr(lambda x, fmt=fmt: ferrax.debug.print(fmt, x))(1.0))
        assert str(ferrax._ir.parse_jaxpr(text)) == text
        assert repr(fmt) in text


def test_debug_print_from_text_cannot_be_compiled() -> None:
    text = str(jax.make_jaxpr(lambda x: jax.debug.print("{}", x))(1.0))
    jaxpr = ferrax._ir.parse_jaxpr(text)
    with pytest.raises(ferrax.errors.LoweringError, match="in_tree"):
        from ferrax._callback import host_callable

        _, callbacks = ferrax._ir.lower_with_callbacks(jaxpr)
        fn = host_callable(*callbacks[0])
        fn(np.float32(1.0))


@pytest.mark.parametrize("name", ["keyword", "positional and literal", "static leaf, ordered", "pytree", "vmap", "grad", "while", "scan", "cond"])
def test_debug_print_lines_under_jit_as_jax(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = {}
    for key, (lib, _) in LIBS.items():
        lib.block_until_ready(lib.jit(JAXPR_PROGRAMS[name](lib))(1.5))
        out[key] = capsys.readouterr().out
    assert out["jax"] and out["ferrax"] == out["jax"]


# ------------------------------------------------------------------- ordered effects


def _ordered_program(lib: Any, io_callback: Any) -> Callable[[Any], Any]:
    """Ordered prints, callbacks and IO callbacks at the top level, in a while body,
    a cond branch, a scan body and a nested jit."""

    def f(x: Any) -> Any:
        lib.debug.print("top {x}", x=x, ordered=True)
        lib.debug.callback(lambda v: print("callback", v), x * 10, ordered=True)

        def body(c: Any) -> Any:
            lib.debug.print("while {}", c, ordered=True)
            return c + 1

        x = lib.lax.while_loop(lambda c: c < 3, body, x)
        x = lib.lax.cond(x > 3, lambda v: (lib.debug.print("cond {}", v, ordered=True), v)[1], lambda v: v - 1, x)

        def scan_body(c: Any, y: Any) -> Any:
            io_callback(lambda a, b: print("io", a, b), None, c, y, ordered=True)
            return c + y, c

        x, _ = lib.lax.scan(scan_body, x, lib.numpy.arange(2.0))
        inner = lib.jit(lambda v: (lib.debug.print("inner {}", v, ordered=True), v * 2)[1])
        return inner(x)

    return f


def test_ordered_effects_run_in_program_order_over_many_calls_as_jax(capsys: pytest.CaptureFixture[str]) -> None:
    import jax.experimental
    import ferrax.experimental

    io = {"ferrax": ferrax.experimental.io_callback, "jax": jax.experimental.io_callback}
    out = {}
    for key, (lib, _) in LIBS.items():
        f = lib.jit(_ordered_program(lib, io[key]))
        results = [f(float(i)) for i in range(12)]  # dispatched without waiting
        lib.block_until_ready(results)
        out[key] = capsys.readouterr().out
    assert out["jax"].count("\n") > 12 * 6
    assert out["ferrax"] == out["jax"]


def test_ordered_prints_of_several_jitted_functions_interleave_in_call_order(capsys: pytest.CaptureFixture[str]) -> None:
    out = {}
    for key, (lib, np_) in LIBS.items():
        f = lib.jit(lambda x: (lib.debug.print("f {}", x, ordered=True), x + 1)[1])
        g = lib.jit(lambda x: (lib.debug.print("g {}", x, ordered=True), x * 2)[1])
        x = np_.float32(0)
        for _ in range(8):
            x = g(f(x))
        lib.block_until_ready(x)
        out[key] = capsys.readouterr().out
    assert out["ferrax"] == out["jax"]
    assert out["ferrax"].splitlines()[:4] == ["f 0.0", "g 1.0", "f 2.0", "g 3.0"]


def test_ordered_lowering_threads_the_token_as_jax() -> None:
    # main takes the token first and returns it first; the loop carries it; the branch
    # with the print takes and returns it; no fresh token is made.
    import jax.experimental
    import ferrax.experimental

    text = {
        "ferrax": ferrax.jit(_ordered_program(ferrax, ferrax.experimental.io_callback)).lower(1.0).as_text(),
        "jax": jax.jit(_ordered_program(jax, jax.experimental.io_callback)).lower(1.0).as_text(),
    }
    for t in text.values():
        main = next(line for line in t.splitlines() if "@main(" in line)
        assert "!stablehlo.token {jax.token = true}" in main.split(") -> (")[0]
        assert main.split(") -> (")[1].startswith("!stablehlo.token {jax.token = true}")
        assert "after_all" not in t and "create_token" not in t
    assert text["ferrax"].count("xla_ffi_python_cpu_callback") == text["jax"].count("xla_ffi_python_cpu_callback")


def test_unordered_program_has_no_token() -> None:
    text = ferrax.jit(lambda x: (ferrax.debug.print("{}", x), x)[1]).lower(1.0).as_text()
    assert "token" not in text
