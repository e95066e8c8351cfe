"""Dtypes and promotion (`ferrax.dtypes`) and the x64 switch (`ferrax.config`), against
JAX's own promotion functions in both of its modes.

Every pair (and triple) of ``(dtype, weak)`` operand types is promoted by ferrax and by
JAX (``lattice_result_type``, the rule of ``jax.numpy``'s operations, and
``jax.dtypes.result_type``), with ``jax_enable_x64`` off and on; the two must agree.
(The ``ferrax.numpy`` functions on values of every kind are compared with ``jax.numpy``
in tests/test_x64.py.)
"""

from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ferrax
from ferrax import _config, dtypes

jax = pytest.importorskip("jax")

BF16 = np.dtype(ml_dtypes.bfloat16)
STRONG = [
    np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64,
    )
] + [BF16]
WIDE = {np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float64)}
MODES = [pytest.param(False, id="x32"), pytest.param(True, id="x64")]

Operand = tuple[np.dtype[Any], bool]


@pytest.fixture(autouse=True)
def default_mode() -> Iterator[None]:
    """Each test starts in JAX's default mode, for both libraries, whatever
    ``JAX_ENABLE_X64`` says (tests of x64 switch it themselves)."""
    with jax.enable_x64(False), ferrax.enable_x64(False):
        yield


def operands(x64: bool) -> list[Operand]:
    """Strong operands of every dtype of the mode, weakly typed ones of every non-bool one."""
    ds = [d for d in STRONG if x64 or d not in WIDE]
    return [(d, False) for d in ds] + [(d, True) for d in ds if d != np.bool_]


def name(op: Operand) -> str:
    d, weak = op
    return ("weak " if weak else "") + str(d)


@contextmanager
def mode(x64: bool) -> Iterator[None]:
    """JAX and ferrax both in the given mode."""
    with jax.enable_x64(x64), ferrax.enable_x64(x64):
        yield


def jax_operand(op: Operand) -> Any:
    """What JAX promotes as this operand type: a dtype, or a weakly typed JAX array."""
    d, weak = op
    if not weak:
        return d
    # JAX has no public way to make a weakly typed array of a given dtype.
    jax_lax_internal = importlib.import_module("jax._src.lax.lax")
    return jax_lax_internal._convert_element_type(np.zeros((), d), d, weak_type=True)


def jax_promote(ops: tuple[Operand, ...]) -> Operand:
    """JAX's rule for its operations (``jax.numpy``'s ``promote_dtypes``)."""
    lattice_result_type = importlib.import_module("jax._src.dtypes").lattice_result_type
    d, weak = lattice_result_type(*(jax_operand(o) for o in ops))
    return np.dtype(d), bool(weak)


def jax_result_type(ops: tuple[Operand, ...]) -> Operand:
    d, weak = jax.dtypes.result_type(*(jax_operand(o) for o in ops), return_weak_type_flag=True)
    return np.dtype(d), bool(weak)


@pytest.mark.parametrize("x64", MODES)
def test_promote_and_result_type_of_pairs_match_jax(x64: bool) -> None:
    with mode(x64):
        ops = operands(x64)
        for a, b in itertools.product(ops, repeat=2):
            assert dtypes.promote([a, b]) == jax_promote((a, b)), (name(a), name(b))
            assert dtypes.result_type([a, b]) == jax_result_type((a, b)), (name(a), name(b))


@pytest.mark.parametrize("x64", MODES)
def test_single_operands_match_jax(x64: bool) -> None:
    with mode(x64):
        for a in operands(x64):
            assert dtypes.promote([a]) == jax_promote((a,)), name(a)
            assert dtypes.result_type([a]) == jax_result_type((a,)), name(a)


@pytest.mark.parametrize("x64", MODES)
def test_triples_match_jax(x64: bool) -> None:
    with mode(x64):
        weak: list[Operand] = [
            (np.dtype(np.int32), True), (np.dtype(np.float32), True), (np.dtype(np.float16), True)
        ]
        ops = [o for o in operands(x64) if not o[1]] + weak
        for triple in itertools.product(ops, repeat=3):
            assert dtypes.promote(list(triple)) == jax_promote(triple), [name(o) for o in triple]


@pytest.mark.parametrize("x64", MODES)
def test_python_scalars_are_jax_weak_types(x64: bool) -> None:
    # A Python int or float is a weak value of the mode's default dtype, as for JAX.
    with mode(x64):
        weak_int = (dtypes.default_int(), True)
        weak_float = (dtypes.default_float(), True)
        for d in STRONG if x64 else [d for d in STRONG if d not in WIDE]:
            for scalar, ours in ((1, weak_int), (1.0, weak_float)):
                want = jax.dtypes.result_type(d, scalar, return_weak_type_flag=True)
                assert dtypes.result_type([(d, False), ours]) == (np.dtype(want[0]), want[1])


@pytest.mark.parametrize("x64", MODES)
def test_promote_is_symmetric_and_strong_joins_associative(x64: bool) -> None:
    with mode(x64):
        ops = operands(x64)
        for a, b in itertools.product(ops, repeat=2):
            assert dtypes.promote([a, b]) == dtypes.promote([b, a])
        # Strong dtypes form a lattice: the join is associative. (With weak operands it
        # is not, in JAX either.)
        strong = [o for o in ops if not o[1]]
        for a, b, c in itertools.product(strong, repeat=3):
            ab = dtypes.promote([a, b])
            if not ab[1]:
                assert dtypes.promote([ab, c]) == dtypes.promote([a, b, c]), (a, b, c)


def test_promote_examples() -> None:
    f16, f32, i8, u8, i32, u32 = (
        np.dtype(t) for t in (np.float16, np.float32, np.int8, np.uint8, np.int32, np.uint32)
    )
    weak_int, weak_float = (i32, True), (f32, True)
    # Weak values take the strong operand's dtype when their kind fits.
    assert dtypes.promote([(i8, False), weak_int]) == (i8, False)
    assert dtypes.promote([(BF16, False), weak_float]) == (BF16, False)
    assert dtypes.promote([(i32, False), weak_float]) == (f32, True)
    # The lattice: mixed signedness widens, f16 and bf16 meet at f32, ints go to floats.
    assert dtypes.promote([(u8, False), (i8, False)]) == (np.dtype(np.int16), False)
    assert dtypes.promote([(f16, False), (BF16, False)]) == (f32, False)
    # Without x64 no 64-bit type is formed: uint32 and int32 meet at int32.
    assert dtypes.promote([(u32, False), (i32, False)]) == (i32, False)
    with ferrax.enable_x64():
        assert dtypes.promote([(u32, False), (i32, False)]) == (np.dtype(np.int64), False)
        assert dtypes.promote([(np.dtype(np.bool_), False), (np.dtype(np.int64), True)]) == (
            np.dtype(np.int64),
            True,
        )
    # Weak values alone keep their dtype in operations; result_type gives the default.
    assert dtypes.promote([(u8, True), (u8, True)]) == (u8, True)
    assert dtypes.result_type([(u8, True), (u8, True)]) == (u32, True)
    # bool is never weak.
    assert dtypes.promote([(np.dtype(np.bool_), True), (np.dtype(np.bool_), True)]) == (
        np.dtype(np.bool_),
        False,
    )


def test_promote_needs_operands() -> None:
    with pytest.raises(ValueError, match="at least one"):
        dtypes.promote([])


def test_to_inexact_is_jaxs() -> None:
    for d in STRONG:
        want = importlib.import_module("jax._src.dtypes").to_inexact_dtype(d)
        assert dtypes.to_inexact(d) == np.dtype(want), d


# ------------------------------------------------------------------ canonicalize


@pytest.mark.parametrize(
    ("like", "want"),
    [
        (float, np.float32),
        (int, np.int32),
        (bool, np.bool_),
        ("bfloat16", BF16),
        ("bf16", BF16),
        (ml_dtypes.bfloat16, BF16),
        ("f2", np.float16),
        (np.uint16, np.uint16),
        (np.dtype("int8"), np.int8),
    ],
)
def test_canonicalize(like: Any, want: Any) -> None:
    assert dtypes.canonicalize(like) == np.dtype(want)


@pytest.mark.parametrize(("wide", "narrow"), [("float64", "float32"), ("int64", "int32"), ("uint64", "uint32")])
def test_64_bit_requests_are_truncated_with_jaxs_warning(wide: str, narrow: str) -> None:
    with pytest.warns(UserWarning, match=f"Explicitly requested dtype {wide} requested in zeros is not available, and will be truncated to dtype {narrow}") as caught:
        assert dtypes.canonicalize(np.dtype(wide), "zeros") == np.dtype(narrow)
    # The warning names the user's line (this file), not ferrax's.
    assert caught[0].filename == __file__
    with ferrax.enable_x64(), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dtypes.canonicalize(wide) == np.dtype(wide)
        assert dtypes.canonicalize(float) == np.float64
        assert dtypes.canonicalize(int) == np.int64


def test_canonical_values_are_silent() -> None:
    for d in STRONG:
        assert dtypes.canonical(d) == {"float64": np.float32, "int64": np.int32, "uint64": np.uint32}.get(d.name, d)
        with ferrax.enable_x64():
            assert dtypes.canonical(d) == d
        assert dtypes.supported(d) == d


@pytest.mark.parametrize("bad", [np.complex64, "complex128", np.str_, object])
def test_canonicalize_rejects_unsupported(bad: Any) -> None:
    with pytest.raises(TypeError, match="not supported"):
        dtypes.canonicalize(bad)


def test_canonicalize_rejects_non_dtypes() -> None:
    with pytest.raises(TypeError, match="not a dtype"):
        dtypes.canonicalize("no such dtype")


def test_kinds_and_defaults() -> None:
    for d in STRONG:
        assert dtypes.is_float(d) == (d.kind == "f" or d == BF16)
        assert dtypes.is_int(d) == (d.kind in "iu")
        assert dtypes.kind_rank(d) == (0 if d == np.bool_ else 2 if dtypes.is_float(d) else 1)
    defaults = [dtypes.default_int(), dtypes.default_uint(), dtypes.default_float()]
    assert defaults == [np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.float32)]
    with ferrax.enable_x64():
        assert dtypes.x64_enabled()
        defaults = [dtypes.default_int(), dtypes.default_uint(), dtypes.default_float()]
        assert defaults == [np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float64)]
    assert not dtypes.x64_enabled()
    assert dtypes.bfloat16 == BF16


# ------------------------------------------------------------------------ config


def test_config_update_and_read() -> None:
    cfg = ferrax.config
    assert cfg.read("jax_enable_x64") is False
    try:
        cfg.update("jax_enable_x64", True)
        assert cfg.read("jax_enable_x64") is True and dtypes.default_float() == np.float64
    finally:
        cfg.update("jax_enable_x64", False)
    assert dtypes.default_float() == np.float32
    before = (cfg.jax_num_cpu_devices, cfg.jax_compilation_cache_dir)
    assert before == (-1, None)
    try:
        cfg.update("jax_compilation_cache_dir", "/tmp/ferrax-cache")
        assert cfg.values == {
            "jax_enable_x64": False,
            "jax_num_cpu_devices": -1,
            "jax_compilation_cache_dir": "/tmp/ferrax-cache",
            "jax_persistent_cache_min_compile_time_secs": 1.0,
        }
        # Wrong types are refused as JAX refuses them.
        with pytest.raises(ValueError, match="int"):
            cfg.update("jax_num_cpu_devices", "4")
        with pytest.raises(ValueError, match="str"):
            cfg.update("jax_compilation_cache_dir", 3)
        # The device count shapes the runtime's client: once it runs, JAX's RuntimeError.
        ferrax.devices()
        with pytest.raises(RuntimeError, match="before backends are initialized"):
            cfg.update("jax_num_cpu_devices", 4)
    finally:
        cfg.update("jax_compilation_cache_dir", None)
    assert (cfg.jax_num_cpu_devices, cfg.jax_compilation_cache_dir) == before


def test_num_cpu_devices_before_the_first_computation() -> None:
    import subprocess
    import sys

    code = (
        "import os; os.environ.pop('XLA_FLAGS', None)\n"
        "import ferrax, numpy as np\n"
        "ferrax.config.update('jax_num_cpu_devices', 3)\n"
        "assert ferrax.config.values['jax_num_cpu_devices'] == 3\n"
        "assert ferrax.device_count() == 3, ferrax.devices()\n"
        "assert float(ferrax.jit(lambda a: a * 2.0)(np.float32(1.5))) == 3.0\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env=env)


def test_unknown_config_names_are_attribute_errors_as_in_jax() -> None:
    for cfg in (ferrax.config, jax.config):
        with pytest.raises(AttributeError, match="Unrecognized config option: jax_no_such"):
            cfg.update("jax_no_such", 1)
        with pytest.raises(AttributeError):
            getattr(cfg, "jax_no_such")
    with pytest.raises(AttributeError, match="Unrecognized config option"):
        ferrax.config.read("jax_no_such")


def test_enable_x64_context_restores() -> None:
    read = ferrax.config.read
    with ferrax.enable_x64(True):
        assert read("jax_enable_x64")
        with ferrax.enable_x64(False):
            assert not read("jax_enable_x64")
        assert read("jax_enable_x64")
    assert not read("jax_enable_x64")


@pytest.mark.parametrize(
    ("value", "want"),
    [("1", True), ("true", True), ("True", True), ("yes", True), ("on", True),
     ("0", False), ("false", False), ("off", False), ("n", False)],
)
def test_environment_variable_reads_as_jaxs(value: str, want: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAX_ENABLE_X64", value)
    assert _config._bool_env("JAX_ENABLE_X64", False) is want
    monkeypatch.delenv("JAX_ENABLE_X64")
    assert _config._bool_env("JAX_ENABLE_X64", False) is False


def test_environment_variable_at_import() -> None:
    code = "import ferrax, ferrax.numpy as fnp; print(ferrax.config.jax_enable_x64, fnp.arange(3).dtype, fnp.asarray(1.5).dtype)"
    outs = []
    for value in ("true", "0", "maybe"):
        env = dict(os.environ, JAX_ENABLE_X64=value)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        outs.append((done.returncode, done.stdout.strip(), done.stderr.strip().splitlines()[-1:]))
    assert outs[0][:2] == (0, "True int64 float64")
    assert outs[1][:2] == (0, "False int32 float32")
    # As JAX: a value that is not a truth value is an error at import.
    assert outs[2][0] != 0 and "invalid truth value 'maybe'" in outs[2][2][0]
