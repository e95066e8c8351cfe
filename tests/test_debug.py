"""`ferrax.debug.print` and `ferrax.debug.callback` against `jax.debug` (JAX 0.10.2): the
lines printed eagerly and under vmap, grad, jvp and hessian (same text, same order),
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
