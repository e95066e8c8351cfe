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

import ferrax as fx
from ferrax import PassError, _ir
from ferrax._runtime import buffer_of, compile_stablehlo

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
    # jit: stays a call of the transposed jaxpr.
    (
        "{ lambda ; x:f32[3] t:f32[3]. let a:f32[3] b:f32[3] = jit[jaxpr={ lambda ; c:f32[3] d:f32[3]. "
        "let e:f32[3] = mul c d; f:f32[3] = neg d in (e, f) } name=f] x t in (a,) }",
        [False, True],
    ),
    # cond: a non-linear index, a branch that leaves one linear operand unused.
    (
        "{ lambda ; p:i32[] t:f32[3] u:f32[3]. let a:f32[3] = cond[branches=("
        "{ lambda ; c:f32[3] d:f32[3]. let e:f32[3] = neg c in (e,) } "
        "{ lambda ; f:f32[3] g:f32[3]. let h:f32[3] = sub f g in (h,) })] p t u in (a,) }",
        [False, True, True],
    ),
    # scan: a non-linear const, a linear const, a linear carry, linear xs, non-linear xs.
    (
        "{ lambda ; w:f32[3] k:f32[3] c0:f32[3] xs:f32[4,3] rs:f32[4,3]. let "
        "cf:f32[3] ys:f32[4,3] = scan[jaxpr={ lambda ; a:f32[3] b:f32[3] c:f32[3] x:f32[3] r:f32[3]. let "
        "d:f32[3] = mul a c; e:f32[3] = add d x; f:f32[3] = add e b; g:f32[3] = mul r f in (f, g) } "
        "length=4 num_carry=1 num_consts=2 reverse=False unroll=1] w k c0 xs rs in (cf, ys) }",
        [False, True, True, True, False],
    ),
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


_NO_CONSTS = [c for c in LINEAR if "lambda ;" in c[0]]


@pytest.mark.parametrize(("text", "linear"), _NO_CONSTS, ids=range(len(_NO_CONSTS)))
def test_transposed_jaxprs_compile_and_agree_with_the_reference(text: str, linear: list[bool]) -> None:
    """The transposed jaxpr lowered to StableHLO and run by XLA gives the reference's values."""
    tj = _ir.transpose(_ir.parse_jaxpr(text), linear)
    rng = np.random.default_rng(1)
    args = [_random(a, rng, -1.0, 1.0) for a in tj.in_avals]
    exe = compile_stablehlo(_ir.lower_to_stablehlo(tj, "transposed"), tj.out_avals)
    got = [np.asarray(o) for o in exe([buffer_of(x, a) for x, a in zip(args, tj.in_avals)])]
    want = _eval(tj, [], args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("text", "linear"), LINEAR, ids=range(len(LINEAR)))
def test_transposed_jaxprs_run_eagerly(text: str, linear: list[bool]) -> None:
    """ferrax.eval_jaxpr (each primitive's NumPy implementation: add_any, a reversed
    scan, cond, ...) gives the reference evaluator's values for the transposed jaxpr."""
    tj = _ir.transpose(_ir.parse_jaxpr(text), linear)
    rng = np.random.default_rng(2)
    consts = [_random(v.aval, rng, 0.5, 1.5) for v in tj.constvars]
    args = [_random(a, rng, -1.0, 1.0) for a in tj.in_avals]
    got = fx.eval_jaxpr(tj, consts, *args)
    want = _eval(tj, consts, args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g).astype(np.float64), w, rtol=1e-5, atol=1e-5)


def test_pad_and_strided_slice_transpose_into_each_other() -> None:
    pad = "{ lambda ; a:f32[2,3] v:f32[]. let b:f32[3,5] = pad[padding_config=((1, -1, 1), (0, 2, 0))] a v in (b,) }"
    tj = check_dot_product(_ir.parse_jaxpr(pad), [True, True])
    assert [e.primitive for e in tj.eqns][:2] == ["pad", "slice"]
    sl = "{ lambda ; a:f32[7,5]. let b:f32[3,2] = slice[limit_indices=(7, 5) start_indices=(1, 0) strides=(2, 3)] a in (b,) }"
    tj = check_dot_product(_ir.parse_jaxpr(sl), [True])
    ((eqn,),) = [tj.eqns]
    assert eqn.primitive == "pad" and eqn.params["padding_config"] == ((1, 1, 1), (0, 1, 2))


def test_fan_out_is_summed_with_add_any() -> None:
    j = _ir.parse_jaxpr("{ lambda ; x:f32[3] t:f32[3]. let a:f32[3] = mul x t; b:f32[3] = add a t in (b,) }")
    tj = check_dot_product(j, [False, True])
    assert [e.primitive for e in tj.eqns].count("add_any") == 1, str(tj)


def test_scan_transposes_to_a_reversed_scan() -> None:
    tj = _ir.transpose(_ir.parse_jaxpr(LINEAR[-1][0]), LINEAR[-1][1])
    (scan,) = [e for e in tj.eqns if e.primitive == "scan"]
    assert scan.params["reverse"] is True
    # consts: w; carry: k's and the carry's cotangents; xs: the ys' cotangents and rs.
    assert (scan.params["num_consts"], scan.params["num_carry"]) == (1, 2)


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
        (
            "{ lambda ; t:f32[3]. let a:i32[] b:f32[3] = while[body_jaxpr={ lambda ; c:i32[] d:f32[3]. let "
            "e:i32[] = add c 1:i32[]; f:f32[3] = neg d in (e, f) } body_nconsts=0 cond_jaxpr={ lambda ; "
            "g:i32[] h:f32[3]. let i:bool[] = lt g 3:i32[] in (i,) } cond_nconsts=0] 0:i32[] t in (b,) }",
            [True],
            "equation 0 (while) carries a linear value: reverse-mode differentiation does not work for "
            "lax.while_loop or lax.fori_loop with dynamic start/stop values; use lax.scan, or fori_loop "
            "with static",
        ),
    ],
)
def test_bad_arguments_raise_pass_error(text: str, linear: list[bool], message: str) -> None:
    with pytest.raises(PassError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _ir.transpose(_ir.parse_jaxpr(text), linear)


_COMPARED = {"reduce_sum": ("axes", "out_sharding"), "dot_general": ("dimension_numbers", "preferred_element_type")}


def _sum_and_product_params(eqns: Any) -> list[tuple[str, dict[str, str]]]:
    """The reduce_sum and dot_general equations' params (as text; a missing one as
    "absent"), in order."""
    return [
        (str(e.primitive), {k: str(e.params.get(k, "absent")) for k in _COMPARED[str(e.primitive)]})
        for e in eqns
        if str(e.primitive) in _COMPARED
    ]


@pytest.mark.parametrize(
    ("label", "make", "shapes", "dtype"),
    [
        ("matmul", lambda L: lambda a, b: (a @ b).sum(), [(2, 3), (3, 4)], "float32"),
        ("broadcast", lambda L: lambda a, b: (a + b).sum(), [(), (3,)], "float32"),
        (
            "bf16 into f32",
            lambda L: lambda a, b: L.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=np.float32).sum(),
            [(2, 3), (3, 4)],
            "bfloat16",
        ),
    ],
)
def test_transposed_equations_carry_jax_params(label: str, make: Any, shapes: Any, dtype: str) -> None:
    # The transpose's reduce_sum has out_sharding=None and its dot_general the forward's
    # preferred_element_type, as JAX's gradient jaxprs have.
    import jax
    import ml_dtypes

    d = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    args = [np.ones(s, d) for s in shapes]
    ours = fx.make_jaxpr(fx.grad(make(fx)))(*args)
    theirs = jax.make_jaxpr(jax.grad(make(jax)))(*args)
    expected = _sum_and_product_params(theirs.jaxpr.eqns)
    assert _sum_and_product_params(ours.jaxpr.eqns) == expected
    assert len(expected) >= 2
