"""Dtypes and promotion (`ferrax.dtypes`), checked against JAX's own promotion in x64 mode.

Every pair (and triple) of ``(dtype, weak)`` operand types is promoted by ferrax and by
``jax.dtypes.result_type`` with ``jax_enable_x64`` on; the only difference allowed is the
documented one: weakly typed results take JAX's 32-bit defaults.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from ferrax import dtypes

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

Operand = tuple[np.dtype[Any], bool]
# Strong operands of every dtype, weakly typed ones of every non-bool dtype.
OPERANDS: list[Operand] = [(d, False) for d in STRONG] + [(d, True) for d in STRONG if d != np.bool_]
WEAK_INT: Operand = (np.dtype(np.int32), True)
WEAK_FLOAT: Operand = (np.dtype(np.float32), True)


def name(op: Operand) -> str:
    d, weak = op
    return ("weak " if weak else "") + str(d)


@contextmanager
def x64() -> Iterator[None]:
    with jax.enable_x64(True):
        yield


def jax_operand(op: Operand) -> Any:
    """What JAX promotes as this operand type: a dtype, or a weakly typed JAX array."""
    d, weak = op
    if not weak:
        return d
    # JAX has no public way to make a weakly typed array of a given dtype.
    jax_lax_internal = importlib.import_module("jax._src.lax.lax")
    return jax_lax_internal._convert_element_type(np.zeros((), d), d, weak_type=True)


# The deliberate difference: a weakly typed result has JAX's default dtype without x64.
WEAK_DEFAULTS = {"i": np.dtype(np.int32), "u": np.dtype(np.uint32), "f": np.dtype(np.float32)}


def expected(ops: tuple[Operand, ...]) -> Operand:
    with x64():
        d, weak = jax.dtypes.result_type(*(jax_operand(o) for o in ops), return_weak_type_flag=True)
    d = np.dtype(d)
    if weak:
        assert d in (np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float64)), d
        d = WEAK_DEFAULTS[d.kind]
    return d, bool(weak)


@pytest.mark.parametrize("a", OPERANDS, ids=name)
def test_promote_pairs_match_jax_x64(a: Operand) -> None:
    for b in OPERANDS:
        assert dtypes.promote([a, b]) == expected((a, b)), (name(a), name(b))


def test_promote_single_operands_match_jax_x64() -> None:
    for a in OPERANDS:
        assert dtypes.promote([a]) == expected((a,)), name(a)


def test_promote_triples_match_jax_x64() -> None:
    ops = [(d, False) for d in STRONG] + [WEAK_INT, WEAK_FLOAT, (np.dtype(np.float16), True)]
    for triple in itertools.product(ops, repeat=3):
        assert dtypes.promote(list(triple)) == expected(triple), [name(o) for o in triple]


def test_python_scalars_are_jax_weak_types() -> None:
    # ferrax's weak int32/float32 are what JAX makes of Python ints and floats.
    for d in STRONG:
        with x64():
            for scalar, ours in ((1, WEAK_INT), (1.0, WEAK_FLOAT)):
                jd, jweak = jax.dtypes.result_type(d, scalar, return_weak_type_flag=True)
                got = dtypes.promote([(d, False), ours])
                if jweak:
                    assert got == (WEAK_DEFAULTS[np.dtype(jd).kind], True)
                else:
                    assert got == (np.dtype(jd), False)


def test_promote_is_symmetric_and_strong_joins_associative() -> None:
    for a, b in itertools.product(OPERANDS, repeat=2):
        assert dtypes.promote([a, b]) == dtypes.promote([b, a])
    # Strong dtypes form a lattice: the join is associative. (With weak operands it is
    # not, in JAX either: a weak intermediate result is canonicalized to a default.)
    strong = [(d, False) for d in STRONG]
    for a, b, c in itertools.product(strong, repeat=3):
        ab = dtypes.promote([a, b])
        if not ab[1]:
            assert dtypes.promote([ab, c]) == dtypes.promote([a, b, c]), (a, b, c)


# ------------------------------------------------------------ documented differences


def test_weak_results_take_32_bit_defaults() -> None:
    # JAX with x64: int64 / float64. Without x64 (JAX's default): the same as ferrax.
    b = np.dtype(np.bool_)
    assert dtypes.promote([(b, False), WEAK_INT]) == (np.dtype(np.int32), True)
    assert dtypes.promote([(b, False), WEAK_FLOAT]) == (np.dtype(np.float32), True)
    assert dtypes.promote([(np.dtype(np.int64), False), WEAK_FLOAT]) == (np.dtype(np.float32), True)
    # uint64 and a signed integer meet at the weak float type.
    u64, i8 = np.dtype(np.uint64), np.dtype(np.int8)
    assert dtypes.promote([(u64, False), (i8, False)]) == (np.dtype(np.float32), True)
    # A weak value alone is canonicalized to its kind's default, as JAX does.
    assert dtypes.promote([(np.dtype(np.float16), True)]) == (np.dtype(np.float32), True)
    assert dtypes.promote([(np.dtype(np.uint8), True)]) == (np.dtype(np.uint32), True)


def test_promote_examples() -> None:
    f16, f32, i8, u8, i32 = (np.dtype(t) for t in (np.float16, np.float32, np.int8, np.uint8, np.int32))
    # Weak values take the strong operand's dtype when their kind fits.
    assert dtypes.promote([(i8, False), WEAK_INT]) == (i8, False)
    assert dtypes.promote([(BF16, False), WEAK_FLOAT]) == (BF16, False)
    assert dtypes.promote([(i32, False), WEAK_FLOAT]) == (np.dtype(np.float32), True)
    # The lattice: mixed signedness widens, f16 and bf16 meet at f32, ints go to floats.
    assert dtypes.promote([(u8, False), (i8, False)]) == (np.dtype(np.int16), False)
    assert dtypes.promote([(f16, False), (BF16, False)]) == (f32, False)
    assert dtypes.promote([(np.dtype(np.int64), False), (f16, False)]) == (f16, False)
    # bool is never weak.
    assert dtypes.promote([(np.dtype(np.bool_), True), (np.dtype(np.bool_), True)]) == (
        np.dtype(np.bool_),
        False,
    )


def test_promote_needs_operands() -> None:
    with pytest.raises(ValueError, match="at least one"):
        dtypes.promote([])


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
        ("float64", np.float64),
        ("f2", np.float16),
        (np.uint16, np.uint16),
        (np.dtype("int8"), np.int8),
    ],
)
def test_canonicalize(like: Any, want: Any) -> None:
    assert dtypes.canonicalize(like) == np.dtype(want)


@pytest.mark.parametrize("bad", [np.complex64, "complex128", np.str_, object])
def test_canonicalize_rejects_unsupported(bad: Any) -> None:
    with pytest.raises(TypeError, match="not supported"):
        dtypes.canonicalize(bad)


def test_canonicalize_rejects_non_dtypes() -> None:
    with pytest.raises(TypeError, match="not a dtype"):
        dtypes.canonicalize("no such dtype")


def test_kinds() -> None:
    for d in STRONG:
        assert dtypes.is_float(d) == (d.kind == "f" or d == BF16)
        assert dtypes.is_int(d) == (d.kind in "iu")
        assert dtypes.kind_rank(d) == (0 if d == np.bool_ else 2 if dtypes.is_float(d) else 1)
    assert dtypes.default_int == np.int32
    assert dtypes.default_float == np.float32
    assert dtypes.bfloat16 == BF16
