"""``ferrax._ir.transpose``: the Rust transpose pass from Python.

Each linear jaxpr is read from text, transposed, and both are run with the crate's
reference evaluator; the dot-product identity ``<ct, L(t)> == <L^T(ct), t>`` must hold
(NumPy computes the inner products). Bad arguments raise ``PassError`` with a message
that says what is wrong.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ferrax import PassError, _ir

NDArray = np.ndarray[Any, Any]

# (linear jaxpr text, linear flags)
LINEAR = [
    ("{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = add a b in (c,) }", [True, True]),
    ("{ lambda ; x:f32[2,3] t:f32[2,3]. let c:f32[2,3] = mul x t; d:f32[2,3] = add_any c t in (d,) }", [False, True]),
    ("{ lambda ; t:f32[2,3]. let b:f32[3] = reduce_sum[axes=(0,)] t; c:f32[3] = neg b in (c, b) }", [True]),
    (
        "{ lambda ; a:f32[3,4] t:f32[4,5]. let c:f32[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a t in (c,) }",
        [False, True],
    ),
    (
        "{ lambda ; t:f32[2,3] u:f32[2,4]. let c:f32[2,7] = concatenate[dimension=1] t u; "
        "d:f32[7,2] = transpose[permutation=(1, 0)] c in (d,) }",
        [True, True],
    ),
    # An unused linear input gets a zero cotangent; a non-linear one in the middle.
    ("{ lambda ; t:f32[3] x:f32[3] u:f32[2]. let c:f32[3] = div t x in (c,) }", [True, False, True]),
    # Constants stay constants of the transposed jaxpr.
    ("{ lambda k:f32[3]; t:f32[3]. let c:f32[3] = mul k t in (c,) }", [True]),
]


def _random(aval: _ir.ShapedArray, rng: np.random.Generator, lo: float, hi: float) -> NDArray:
    if aval.dtype.kind in "iu":
        return rng.integers(0, 3, size=aval.shape).astype(aval.dtype)
    if aval.dtype == np.bool_:
        return rng.random(aval.shape) < 0.5
    return rng.uniform(lo, hi, size=aval.shape).astype(aval.dtype)


def _eval(jaxpr: _ir.Jaxpr, consts: list[NDArray], args: list[NDArray]) -> list[NDArray]:
    def host(avals: list[_ir.ShapedArray], xs: list[NDArray]) -> list[tuple[_ir.ShapedArray, list[Any]]]:
        return [(a, x.ravel().tolist()) for a, x in zip(avals, xs)]

    const_avals = [v.aval for v in jaxpr.constvars]
    outs = _ir.reference_eval(jaxpr, host(const_avals, consts), host(jaxpr.in_avals, args))
    return [np.asarray(values, dtype=np.float64).reshape(aval.shape) for aval, values in outs]


def check_dot_product(jaxpr: _ir.Jaxpr, linear: list[bool], seed: int = 0) -> _ir.Jaxpr:
    """Transposes ``jaxpr``, checks the signature and the dot-product identity."""
    tj = _ir.transpose(jaxpr, linear)
    nonlin = [a for a, lin in zip(jaxpr.in_avals, linear) if not lin]
    lin_avals = [a for a, lin in zip(jaxpr.in_avals, linear) if lin]
    assert [(a.shape, a.dtype) for a in tj.in_avals] == [(a.shape, a.dtype) for a in nonlin + jaxpr.out_avals]
    assert [(a.shape, a.dtype) for a in tj.out_avals] == [(a.shape, a.dtype) for a in lin_avals]
    assert len(tj.constvars) == len(jaxpr.constvars)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        consts = [_random(v.aval, rng, 0.5, 1.5) for v in jaxpr.constvars]
        args = [_random(a, rng, -1.0, 1.0) if lin else _random(a, rng, 0.5, 1.5) for a, lin in zip(jaxpr.in_avals, linear)]
        ys = _eval(jaxpr, consts, args)
        cts = [_random(a, rng, -1.0, 1.0) for a in jaxpr.out_avals]
        lhs = sum(float(np.vdot(c, y)) for c, y in zip(cts, ys))
        x_args = [x for x, lin in zip(args, linear) if not lin]
        t_args = [x for x, lin in zip(args, linear) if lin]
        t_cts = _eval(tj, consts, x_args + cts)
        rhs = sum(float(np.vdot(c, t)) for c, t in zip(t_cts, t_args))
        np.testing.assert_allclose(lhs, rhs, rtol=1e-4, atol=1e-4, err_msg=str(tj))
    return tj


@pytest.mark.parametrize(("text", "linear"), LINEAR, ids=range(len(LINEAR)))
def test_dot_product_identity(text: str, linear: list[bool]) -> None:
    check_dot_product(_ir.parse_jaxpr(text), linear)


def test_fan_out_is_summed_with_add_any() -> None:
    j = _ir.parse_jaxpr("{ lambda ; x:f32[3] t:f32[3]. let a:f32[3] = mul x t; b:f32[3] = add a t in (b,) }")
    tj = check_dot_product(j, [False, True])
    assert [e.primitive for e in tj.eqns].count("add_any") == 1, str(tj)


def test_transposed_text_round_trips() -> None:
    tj = _ir.transpose(_ir.parse_jaxpr(LINEAR[1][0]), LINEAR[1][1])
    assert str(_ir.parse_jaxpr(str(tj))) == str(tj)


@pytest.mark.parametrize(
    ("text", "linear", "message"),
    [
        ("{ lambda ; t:f32[3]. let b:f32[3] = neg t in (b,) }", [True, False], "linear has 2 flags but the jaxpr needs 1"),
        ("{ lambda ; t:f32[3]. let b:f32[3] = sin t in (b,) }", [True], "equation 0 (sin) is not linear in its operand 0"),
        (
            "{ lambda ; t:f32[3] u:f32[3]. let b:f32[3] = mul t u in (b,) }",
            [True, True],
            "equation 0 (mul) is not linear in its operand 1",
        ),
    ],
)
def test_bad_arguments_raise_pass_error(text: str, linear: list[bool], message: str) -> None:
    with pytest.raises(PassError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _ir.transpose(_ir.parse_jaxpr(text), linear)
