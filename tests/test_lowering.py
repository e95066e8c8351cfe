"""Differential tests of the StableHLO lowering: jaxprs lowered by Rust, compiled and run
by XLA (jaxlib), against the IR crate's reference evaluator."""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np
import pytest

from ferrax import LoweringError, _ir, dtypes
from ferrax._runtime import buffer_of, compile_stablehlo

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "rust" / "ir" / "tests" / "jaxprs"


# Key arrays (key<fry>) are their uint32[..., 2] data on XLA's side; the reference
# evaluator holds a key as one integer, (word0 << 32) | word1.


def _physical(aval: _ir.ShapedArray) -> _ir.ShapedArray:
    if aval.dtype == dtypes.key_fry:
        return _ir.ShapedArray((*aval.shape, 2), np.uint32)
    return aval


def _to_reference(aval: _ir.ShapedArray, x: np.ndarray[Any, Any]) -> list[Any]:
    if aval.dtype == dtypes.key_fry:
        w = x.astype(np.uint64).reshape(-1, 2)
        packed: list[Any] = ((w[:, 0] << np.uint64(32)) | w[:, 1]).view(np.int64).tolist()
        return packed
    values: list[Any] = x.ravel().tolist()
    return values


def _from_reference(aval: _ir.ShapedArray, values: list[Any]) -> np.ndarray[Any, Any]:
    if aval.dtype == dtypes.key_fry:
        v = np.asarray(values, dtype=np.int64).view(np.uint64)
        words = np.stack([(v >> np.uint64(32)).astype(np.uint32), v.astype(np.uint32)], axis=-1)
        return words.reshape((*aval.shape, 2))
    if aval.dtype == np.uint64:
        # uint64 values come back as the int64s of their bit patterns.
        return np.asarray(values, dtype=np.int64).astype(np.uint64).reshape(aval.shape)
    return np.asarray(values, dtype=aval.dtype).reshape(aval.shape)


def _random_value(aval: _ir.ShapedArray, rng: np.random.Generator) -> np.ndarray[Any, Any]:
    aval = _physical(aval)
    shape = aval.shape
    if aval.dtype == np.bool_:
        return rng.random(shape) < 0.5
    if aval.dtype.kind in "iu":
        return rng.integers(0, 5, size=shape).astype(aval.dtype)
    return rng.uniform(-2.0, 2.0, size=shape).astype(aval.dtype)


def _reference(jaxpr: _ir.Jaxpr, args: list[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    ref_in = [(a, _to_reference(a, x)) for a, x in zip(jaxpr.in_avals, args)]
    return [_from_reference(aval, values) for aval, values in _ir.reference_eval(jaxpr, [], ref_in)]


def _run_both(jaxpr: _ir.Jaxpr, rng: np.random.Generator) -> tuple[list[np.ndarray[Any, Any]], list[np.ndarray[Any, Any]]]:
    args = [_random_value(a, rng) for a in jaxpr.in_avals]
    text = _ir.lower_to_stablehlo(jaxpr, "test")
    exe = compile_stablehlo(text, [_physical(a) for a in jaxpr.out_avals])
    got = [np.asarray(o) for o in exe([buffer_of(x, _physical(a)) for x, a in zip(args, jaxpr.in_avals)])]
    return got, _reference(jaxpr, args)


def _close(got: list[np.ndarray[Any, Any]], want: list[np.ndarray[Any, Any]]) -> bool:
    try:
        _assert_close(got, want, "")
    except AssertionError:
        return False
    return True


def _assert_close(got: list[np.ndarray[Any, Any]], want: list[np.ndarray[Any, Any]], what: str) -> None:
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what} output {i}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4, err_msg=f"{what} output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {i}")


@pytest.mark.parametrize("seed", range(120))
def test_random_jaxprs_lower_and_match_the_reference(seed: int) -> None:
    jaxpr = _ir.random_jaxpr(seed)
    got, want = _run_both(jaxpr, np.random.default_rng(seed))
    if not _close(got, want) and _ill_conditioned(jaxpr, seed):
        # Where the program amplifies the last-bit differences of XLA's and the
        # evaluator's transcendental functions (x -> -x*x iterated, then sin...), XLA's
        # result must still be the program's value at inputs within a few ulps: between
        # the reference's values at nearby inputs (the function is continuous there).
        refs = [want] + [_reference(jaxpr, _nudged(jaxpr, seed, k)) for k in _NUDGES]
        for i, g in enumerate(got):
            if g.dtype.kind != "f":
                continue
            lo = np.min([r[i] for r in refs], axis=0)
            hi = np.max([r[i] for r in refs], axis=0)
            assert np.all((g >= lo - 2e-4) & (g <= hi + 2e-4)), f"seed {seed} output {i}: {g} not in [{lo}, {hi}]"
        return
    _assert_close(got, want, f"seed {seed}\n{jaxpr}")


_NUDGES = (1e-7, -1e-7, 1e-6, -1e-6, 5e-6, -5e-6)


def _nudged(jaxpr: _ir.Jaxpr, seed: int, k: float) -> list[np.ndarray[Any, Any]]:
    """The test's inputs for ``seed``, the float ones scaled by ``1 + k``."""
    args = [_random_value(a, np.random.default_rng(seed)) for a in jaxpr.in_avals]
    return [x * np.asarray(1 + k, x.dtype) if x.dtype.kind == "f" else x for x in args]


def _ill_conditioned(jaxpr: _ir.Jaxpr, seed: int) -> bool:
    """Whether inputs 1e-7 apart (about one float32 ulp) give references further apart
    than the test's tolerance."""
    a = _reference(jaxpr, _nudged(jaxpr, seed, 1e-7))
    b = _reference(jaxpr, _nudged(jaxpr, seed, -1e-7))
    return not _close(a, b)


# Extension primitives of the Rust test driver; they have no lowering.
# Extension primitives, and host callbacks (read from text they have no Python function:
# compiling them is refused, see test_callbacks.py).
_EXTENSIONS = ("test_ext", "test_effect", "_callback[", "debug_print[")


def _corpus() -> list[pathlib.Path]:
    return sorted(
        p
        for p in CORPUS.glob("*.jaxpr")
        if not p.name.startswith("err_") and not any(x in p.read_text() for x in _EXTENSIONS)
    )


def _read(path: pathlib.Path) -> str:
    text = path.read_text().split("; expect:")[0]
    # `;;` comment lines are blanked, as the Rust filetest driver does.
    return "\n".join("" if line.startswith(";;") else line for line in text.splitlines())


# Outputs defined only up to the sign of each vector (eigenvectors, singular vectors:
# LAPACK and the reference evaluator's Jacobi iterations may pick either sign), by
# corpus file: compared by magnitude.
SIGN_FREE_OUTPUTS = {"jax_eigh": {0}, "jax_svd": {1, 2}}


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.stem)
def test_corpus_jaxprs_lower_and_match_the_reference(path: pathlib.Path) -> None:
    jaxpr = _ir.parse_jaxpr(_read(path))
    if jaxpr.constvars:
        jaxpr = _ir.consts_to_invars(jaxpr)
    try:
        got, want = _run_both(jaxpr, np.random.default_rng(0))
    except LoweringError as e:
        assert "closes over" in str(e), str(e)
        return
    sign_free = SIGN_FREE_OUTPUTS.get(path.stem, set())
    got = [np.abs(g) if i in sign_free else g for i, g in enumerate(got)]
    want = [np.abs(w) if i in sign_free else w for i, w in enumerate(want)]
    _assert_close(got, want, path.name)


def test_refused_module_is_a_lowering_error_quoting_the_line() -> None:
    text = 'module @bad {\n  func.func public @main(%a: tensor<3xf32>) -> (tensor<3xf32>) {\n    %0 = "stablehlo.sine"(%a) : (tensor<4xf32>) -> tensor<3xf32>\n    "func.return"(%0) : (tensor<3xf32>) -> ()\n  }\n}\n'
    with pytest.raises(LoweringError, match=r"line 3"):
        compile_stablehlo(text, [_ir.ShapedArray((3,), np.float32)])


def test_extension_primitives_do_not_lower() -> None:
    ext = _ir.ExtensionPrimitive("my_ext_op", lambda avals, params: list(avals))
    b = _ir.JaxprBuilder()
    x = b.add_invar(_ir.ShapedArray((3,), np.float32))
    (y,) = b.add_eqn(ext, [x], {})
    with pytest.raises(LoweringError, match="my_ext_op"):
        _ir.lower_to_stablehlo(b.build([y]))
