//! Tests of the reference evaluator (`ferrax_ir::eval`).
//!
//! Expected values are derived in the tests themselves, with plain Rust arithmetic or
//! known identities; one table (float conversions) was generated once with JAX, and the
//! script is in a comment next to it. `every_builtin_has_a_case` fails if a primitive of
//! `Builtin::ALL` has no entry in `CASES`.

use ferrax_ir::eval::{
    allclose, check_close, eval_closed_jaxpr, eval_jaxpr, eval_jaxpr_with, ArrayError, EvalError,
    EvalOptions, HostArray, HostData,
};
use ferrax_ir::{
    AbstractValue, Atom, Builtin, ClosedJaxpr, Const, ConvDimensionNumbers, DType,
    DotDimensionNumbers, ExtensionPrimitive, GatherDimensionNumbers, GatherScatterMode, Jaxpr,
    JaxprBuilder, LitValue, Literal, Param, Params, Primitive, ScatterDimensionNumbers, Shape,
};
use std::collections::HashSet;
use std::sync::Arc;

use DType::{Bool, BF16, F16, F32, F64, I16, I32, I64, I8, U32, U64, U8};

// ----- Helpers -----

fn sh(dims: &[i64]) -> Shape {
    Shape::new(dims).unwrap()
}

fn av(dtype: DType, dims: &[i64]) -> AbstractValue {
    AbstractValue::new(sh(dims), dtype)
}

fn fa(dtype: DType, dims: &[i64], data: &[f64]) -> HostArray {
    HostArray::from_f64(sh(dims), dtype, data.to_vec()).unwrap()
}

fn ia(dtype: DType, dims: &[i64], data: &[i64]) -> HostArray {
    HostArray::from_i64(sh(dims), dtype, data.to_vec()).unwrap()
}

fn ba(dims: &[i64], data: &[bool]) -> HostArray {
    HostArray::from_bool(sh(dims), data.to_vec()).unwrap()
}

fn params(pairs: Vec<(&str, Param)>) -> Params {
    Params::new(pairs)
}

fn none() -> Params {
    Params::empty()
}

fn ints(v: &[i64]) -> Param {
    Param::ints(v)
}

fn closed(j: Jaxpr) -> ClosedJaxpr {
    ClosedJaxpr::new(Arc::new(j), vec![]).unwrap()
}

fn lit(b: &mut JaxprBuilder, value: LitValue, dtype: DType) -> Atom {
    b.literal(Literal {
        value,
        dtype,
        weak_type: false,
    })
}

fn invar(b: &mut JaxprBuilder, aval: AbstractValue) -> Atom {
    Atom::Var(b.add_invar(aval))
}

/// Adds an equation and returns its outputs as atoms.
fn eqn(b: &mut JaxprBuilder, prim: Builtin, ins: Vec<Atom>, p: Params) -> Vec<Atom> {
    b.add_eqn(prim.into(), ins, p)
        .unwrap_or_else(|e| panic!("{}: {e}", prim.name()))
        .into_iter()
        .map(Atom::Var)
        .collect()
}

fn eqn1(b: &mut JaxprBuilder, prim: Builtin, ins: Vec<Atom>, p: Params) -> Atom {
    eqn(b, prim, ins, p)[0]
}

/// The one-equation jaxpr `outs = prim[params] args`, built with the builder (so the
/// shape rule runs), then evaluated.
fn run(prim: Builtin, p: Params, args: &[HostArray]) -> Vec<HostArray> {
    let mut b = JaxprBuilder::new();
    let ins: Vec<Atom> = args.iter().map(|a| invar(&mut b, a.aval())).collect();
    let outs = eqn(&mut b, prim, ins, p);
    let j = b.build(outs).unwrap();
    eval_jaxpr(&j, &[], args).unwrap_or_else(|e| panic!("{}: {e}", prim.name()))
}

fn run1(prim: Builtin, p: Params, args: &[HostArray]) -> HostArray {
    let mut outs = run(prim, p, args);
    assert_eq!(outs.len(), 1);
    outs.remove(0)
}

#[track_caller]
fn assert_close(actual: &HostArray, expected: &HostArray, rtol: f64, atol: f64) {
    if let Err(e) = check_close(actual, expected, rtol, atol) {
        panic!("{e}\n  actual:   {actual:?}\n  expected: {expected:?}");
    }
}

#[track_caller]
fn assert_same(actual: &HostArray, expected: &HostArray) {
    assert_close(actual, expected, 0.0, 0.0);
}

fn floats(a: &HostArray) -> Vec<f64> {
    a.as_f64().expect("a float array").to_vec()
}

// ----- The case table -----

/// One test per built-in, keyed by the primitive. Each function is also a `#[test]`.
const CASES: &[(Builtin, fn())] = &[
    (Builtin::Neg, case_neg),
    (Builtin::Abs, case_abs),
    (Builtin::Sign, case_sign),
    (Builtin::Exp, case_exp),
    (Builtin::Log, case_log),
    (Builtin::Log1p, case_log1p),
    (Builtin::Expm1, case_expm1),
    (Builtin::Sin, case_sin),
    (Builtin::Cos, case_cos),
    (Builtin::Tan, case_tan),
    (Builtin::Tanh, case_tanh),
    (Builtin::Logistic, case_logistic),
    // Special functions and the rest of the trigonometric family (issue 12).
    (Builtin::ErfInv, case_special_functions),
    (Builtin::Erf, case_special_functions),
    (Builtin::Erfc, case_special_functions),
    (Builtin::Lgamma, case_special_functions),
    (Builtin::Digamma, case_special_functions),
    (Builtin::Exp2, case_exp2_cbrt),
    (Builtin::Cbrt, case_exp2_cbrt),
    (Builtin::Asin, case_trigonometric),
    (Builtin::Acos, case_trigonometric),
    (Builtin::Atan, case_trigonometric),
    (Builtin::Sinh, case_trigonometric),
    (Builtin::Cosh, case_trigonometric),
    (Builtin::Asinh, case_trigonometric),
    (Builtin::Acosh, case_trigonometric),
    (Builtin::Atanh, case_trigonometric),
    (Builtin::Atan2, case_atan2),
    (Builtin::IsFinite, case_is_finite),
    (Builtin::Sqrt, case_sqrt),
    (Builtin::Rsqrt, case_rsqrt),
    (Builtin::Square, case_square),
    (Builtin::Floor, case_floor),
    (Builtin::Ceil, case_ceil),
    (Builtin::Round, case_round),
    (Builtin::Not, case_not),
    (Builtin::IntegerPow, case_integer_pow),
    (Builtin::Add, case_add),
    (Builtin::Sub, case_sub),
    (Builtin::Mul, case_mul),
    (Builtin::Div, case_div),
    (Builtin::Rem, case_rem),
    (Builtin::Pow, case_pow),
    (Builtin::Max, case_max),
    (Builtin::Min, case_min),
    (Builtin::And, case_and),
    (Builtin::Or, case_or),
    (Builtin::Xor, case_xor),
    (Builtin::ShiftLeft, case_shifts),
    (Builtin::ShiftRightLogical, case_shifts),
    (Builtin::ShiftRightArithmetic, case_shifts),
    (Builtin::PopulationCount, case_count_bits),
    (Builtin::Clz, case_count_bits),
    (Builtin::BitcastConvertType, case_bitcast_convert_type),
    (Builtin::Threefry2x32, case_threefry2x32),
    (Builtin::Eq, case_comparisons),
    (Builtin::Ne, case_comparisons),
    (Builtin::Lt, case_comparisons),
    (Builtin::Le, case_comparisons),
    (Builtin::Gt, case_comparisons),
    (Builtin::Ge, case_comparisons),
    (Builtin::SelectN, case_select_n),
    (Builtin::Clamp, case_clamp),
    (Builtin::ConvertElementType, case_convert_element_type),
    (Builtin::ReduceSum, case_reduce_sum),
    (Builtin::ReduceMax, case_reduce_max),
    (Builtin::ReduceMin, case_reduce_min),
    (Builtin::ReduceProd, case_reduce_prod),
    (Builtin::Argmax, case_argmax),
    (Builtin::Argmin, case_argmin),
    // The logical reductions, nextafter and reduce_precision (issue 12).
    (Builtin::ReduceAnd, case_logical_reductions),
    (Builtin::ReduceOr, case_logical_reductions),
    (Builtin::ReduceXor, case_logical_reductions),
    (Builtin::Nextafter, case_nextafter),
    (Builtin::Igamma, case_igamma),
    (Builtin::Igammac, case_igamma),
    (Builtin::IgammaGradA, case_igamma),
    (Builtin::ReducePrecision, case_reduce_precision),
    (Builtin::BroadcastInDim, case_broadcast_in_dim),
    (Builtin::Reshape, case_reshape),
    (Builtin::Transpose, case_transpose),
    (Builtin::Squeeze, case_squeeze),
    (Builtin::ExpandDims, case_expand_dims),
    (Builtin::Concatenate, case_concatenate),
    (Builtin::Split, case_split),
    (Builtin::Stack, case_stack),
    (Builtin::Unstack, case_unstack),
    (Builtin::Tile, case_tile),
    (Builtin::Mulhi, case_mulhi),
    (Builtin::OptimizationBarrier, case_optimization_barrier),
    (Builtin::Slice, case_slice),
    (Builtin::DynamicSlice, case_dynamic_slice),
    (Builtin::DynamicUpdateSlice, case_dynamic_update_slice),
    (Builtin::DotGeneral, case_dot_general),
    (Builtin::ConvGeneralDilated, case_conv_general_dilated),
    (Builtin::Iota, case_iota),
    (Builtin::Copy, case_copy),
    (Builtin::Gather, case_gather),
    (Builtin::Scatter, case_scatter),
    (Builtin::ScatterAdd, case_scatter),
    (Builtin::ScatterSub, case_scatter),
    (Builtin::ScatterMul, case_scatter),
    (Builtin::ScatterMin, case_scatter),
    (Builtin::ScatterMax, case_scatter),
    (Builtin::Rev, case_rev),
    (Builtin::Sort, case_sort),
    (Builtin::TopK, case_top_k),
    (Builtin::Cholesky, case_cholesky),
    (Builtin::TriangularSolve, case_triangular_solve),
    (Builtin::Lu, case_lu),
    (Builtin::Eigh, case_eigh),
    (Builtin::Qr, case_qr),
    (Builtin::Svd, case_svd),
    (Builtin::Geqrf, case_geqrf),
    (Builtin::HouseholderProduct, case_householder_product),
    (Builtin::Geqp3, case_geqp3),
    (Builtin::Cumsum, case_cumulative),
    (Builtin::Cumprod, case_cumulative),
    (Builtin::Cummax, case_cumulative),
    (Builtin::Cummin, case_cumulative),
    (Builtin::Cumlogsumexp, case_cumulative),
    // Windowed reductions and the primitives of their derivatives (issue 12).
    (Builtin::ReduceWindowSum, case_windowed),
    (Builtin::ReduceWindowMax, case_windowed),
    (Builtin::ReduceWindowMin, case_windowed),
    (Builtin::ReduceWindow, case_windowed),
    (Builtin::SelectAndGatherAdd, case_windowed),
    (Builtin::SelectAndScatterAdd, case_windowed),
    (Builtin::AddAny, case_add_any),
    (Builtin::Pad, case_pad),
    (Builtin::Jit, case_jit),
    (Builtin::Cond, case_cond),
    (Builtin::While, case_while),
    (Builtin::Scan, case_scan),
    (Builtin::CustomJvpCall, case_calls),
    (Builtin::CustomVjpCall, case_calls),
    (Builtin::Remat, case_calls),
    (Builtin::StopGradient, case_stop_gradient),
    (Builtin::ShardingConstraint, case_sharding_constraint),
    (Builtin::Psum, case_collectives),
    (Builtin::Pmax, case_collectives),
    (Builtin::Pmin, case_collectives),
    (Builtin::Pvary, case_collectives),
    (Builtin::AllGather, case_collectives),
    (Builtin::ReduceScatter, case_collectives),
    (Builtin::Ppermute, case_collectives),
    (Builtin::AllToAll, case_collectives),
    (Builtin::AxisIndex, case_collectives),
    (Builtin::ShardMap, case_collectives),
    (Builtin::DebugCallback, case_callbacks),
    (Builtin::PureCallback, case_callbacks),
    (Builtin::IoCallback, case_callbacks),
    (Builtin::RandomSeed, case_random_seed),
    (Builtin::RandomWrap, case_random_wrap_unwrap_clone),
    (Builtin::RandomUnwrap, case_random_wrap_unwrap_clone),
    (Builtin::RandomClone, case_random_wrap_unwrap_clone),
    (Builtin::RandomSplit, case_random_split),
    (Builtin::RandomFoldIn, case_random_fold_in),
    (Builtin::RandomBits, case_random_bits),
    (Builtin::DebugPrint, case_callbacks),
];

#[test]
fn every_builtin_has_a_case() {
    let covered: HashSet<Builtin> = CASES.iter().map(|&(b, _)| b).collect();
    let missing: Vec<&str> = Builtin::ALL
        .iter()
        .filter(|b| !covered.contains(b))
        .map(|b| b.name())
        .collect();
    assert!(
        missing.is_empty(),
        "built-ins without an eval case: {missing:?}"
    );
}

// ----- Unary -----

/// Checks a float unary primitive on f64 (against the f64 reference, exactly up to
/// rounding noise), on f32 (against the f32 reference, within a few ulps, and the result
/// holding only f32 values), and on bf16 (within bf16 precision).
fn check_unary_float(prim: Builtin, xs: &[f64], r64: fn(f64) -> f64, r32: fn(f32) -> f32) {
    let n = xs.len() as i64;
    let got = run1(prim, none(), &[fa(F64, &[n], xs)]);
    let want: Vec<f64> = xs.iter().map(|&x| r64(x)).collect();
    assert_close(&got, &fa(F64, &[n], &want), 1e-15, 0.0);

    let x32: Vec<f64> = xs.iter().map(|&x| x as f32 as f64).collect();
    let got = run1(prim, none(), &[fa(F32, &[n], &x32)]);
    for &g in &floats(&got) {
        assert!(g.is_nan() || g == (g as f32) as f64, "{g} is not an f32");
    }
    let want: Vec<f64> = x32.iter().map(|&x| r32(x as f32) as f64).collect();
    assert_close(&got, &fa(F32, &[n], &want), 4e-7, 1e-37);

    let xb: Vec<f64> = xs
        .iter()
        .map(|&x| ferrax_ir::eval::round_to_bf16(x))
        .collect();
    let got = run1(prim, none(), &[fa(BF16, &[n], &xb)]);
    let want: Vec<f64> = xb.iter().map(|&x| r64(x)).collect();
    assert_close(
        &got,
        &HostArray {
            shape: sh(&[n]),
            dtype: BF16,
            data: HostData::Float(want),
        },
        4e-3,
        1e-30,
    );
}

#[test]
fn case_neg() {
    assert_same(
        &run1(
            Builtin::Neg,
            none(),
            &[fa(F32, &[3], &[1.5, -0.0, f64::INFINITY])],
        ),
        &fa(F32, &[3], &[-1.5, 0.0, f64::NEG_INFINITY]),
    );
    // i8: -(-128) wraps to -128.
    assert_same(
        &run1(Builtin::Neg, none(), &[ia(I8, &[3], &[-128, 5, 0])]),
        &ia(I8, &[3], &[-128, -5, 0]),
    );
}

#[test]
fn case_abs() {
    assert_same(
        &run1(Builtin::Abs, none(), &[fa(F64, &[3], &[-2.5, 3.0, -0.0])]),
        &fa(F64, &[3], &[2.5, 3.0, 0.0]),
    );
    assert_same(
        &run1(Builtin::Abs, none(), &[ia(I8, &[3], &[-128, -7, 7])]),
        &ia(I8, &[3], &[-128, 7, 7]),
    );
}

#[test]
fn case_sign() {
    let got = run1(
        Builtin::Sign,
        none(),
        &[fa(F64, &[5], &[-3.0, -0.0, 0.0, 2.0, f64::NAN])],
    );
    assert_same(&got, &fa(F64, &[5], &[-1.0, -0.0, 0.0, 1.0, f64::NAN]));
    assert!(floats(&got)[1].is_sign_negative(), "sign(-0.0) is -0.0");
    assert_same(
        &run1(Builtin::Sign, none(), &[ia(I32, &[3], &[-5, 0, 7])]),
        &ia(I32, &[3], &[-1, 0, 1]),
    );
}

const XS: &[f64] = &[-2.5, -1.0, -0.25, 0.0, 0.3, 1.0, 2.0, 7.5];
const POS: &[f64] = &[1e-3, 0.25, 1.0, 2.0, 10.0, 1e10];

#[test]
fn case_exp() {
    check_unary_float(Builtin::Exp, XS, f64::exp, f32::exp);
    let got = run1(
        Builtin::Exp,
        none(),
        &[fa(F32, &[3], &[0.0, 100.0, -1000.0])],
    );
    assert_same(&got, &fa(F32, &[3], &[1.0, f64::INFINITY, 0.0]));
}

#[test]
fn case_log() {
    check_unary_float(Builtin::Log, POS, f64::ln, f32::ln);
    let got = run1(Builtin::Log, none(), &[fa(F64, &[3], &[1.0, 0.0, -1.0])]);
    assert_same(&got, &fa(F64, &[3], &[0.0, f64::NEG_INFINITY, f64::NAN]));
}

#[test]
fn case_log1p() {
    check_unary_float(Builtin::Log1p, POS, f64::ln_1p, f32::ln_1p);
    // Accurate near 0, where log(1 + x) would give 0.
    let got = run1(Builtin::Log1p, none(), &[fa(F64, &[2], &[1e-20, -1.0])]);
    assert_same(&got, &fa(F64, &[2], &[1e-20, f64::NEG_INFINITY]));
}

#[test]
fn case_expm1() {
    check_unary_float(Builtin::Expm1, XS, f64::exp_m1, f32::exp_m1);
    let got = run1(Builtin::Expm1, none(), &[fa(F64, &[1], &[1e-20])]);
    assert_same(&got, &fa(F64, &[1], &[1e-20]));
}

#[test]
fn case_sin() {
    check_unary_float(Builtin::Sin, XS, f64::sin, f32::sin);
    let got = run1(
        Builtin::Sin,
        none(),
        &[fa(F64, &[2], &[std::f64::consts::FRAC_PI_2, 0.0])],
    );
    assert_same(&got, &fa(F64, &[2], &[1.0, 0.0]));
}

#[test]
fn case_cos() {
    check_unary_float(Builtin::Cos, XS, f64::cos, f32::cos);
    let got = run1(
        Builtin::Cos,
        none(),
        &[fa(F64, &[2], &[std::f64::consts::PI, 0.0])],
    );
    assert_same(&got, &fa(F64, &[2], &[-1.0, 1.0]));
}

#[test]
fn case_tan() {
    check_unary_float(Builtin::Tan, XS, f64::tan, f32::tan);
    let got = run1(
        Builtin::Tan,
        none(),
        &[fa(F64, &[1], &[std::f64::consts::FRAC_PI_4])],
    );
    assert_close(&got, &fa(F64, &[1], &[1.0]), 1e-15, 0.0);
}

#[test]
fn case_tanh() {
    check_unary_float(Builtin::Tanh, XS, f64::tanh, f32::tanh);
    let got = run1(Builtin::Tanh, none(), &[fa(F32, &[3], &[0.0, 50.0, -50.0])]);
    assert_same(&got, &fa(F32, &[3], &[0.0, 1.0, -1.0]));
}

#[test]
fn case_logistic() {
    check_unary_float(
        Builtin::Logistic,
        XS,
        |x| 1.0 / (1.0 + (-x).exp()),
        |x| 1.0 / (1.0 + (-x).exp()),
    );
    let got = run1(
        Builtin::Logistic,
        none(),
        &[fa(F32, &[3], &[0.0, -1000.0, 1000.0])],
    );
    assert_same(&got, &fa(F32, &[3], &[0.5, 0.0, 1.0]));
}

/// Values of the special functions, from SciPy 1.17 in double precision
/// (`scipy.special.erf, erfc, erfinv, gammaln, psi`), and XLA's values at the edges.
#[allow(clippy::type_complexity)]
const SPECIAL: &[(Builtin, [f64; 6], [f64; 6])] = &[
    (
        Builtin::Erf,
        [-3.0, -0.7, 0.0, 0.2, 1.5, 4.5],
        [
            -0.9999779095030014,
            -0.6778011938374183,
            0.0,
            0.22270258921047845,
            0.9661051464753108,
            0.9999999998033839,
        ],
    ),
    (
        Builtin::Erfc,
        [-2.0, 0.0, 0.3, 2.0, 6.0, 20.0],
        [
            1.9953222650189528,
            1.0,
            0.6713732405408726,
            0.004677734981047266,
            2.1519736712498913e-17,
            5.395865611607901e-176,
        ],
    ),
    (
        Builtin::ErfInv,
        [-0.999, -0.3, 0.0, 0.1, 0.9, 0.999999],
        [
            -2.326753765513524,
            -0.2724627147267544,
            0.0,
            0.08885599049425769,
            1.1630871536766743,
            3.458910737275499,
        ],
    ),
    (
        Builtin::Lgamma,
        [-2.5, -0.1, 0.1, 1.5, 7.0, 1e5],
        [
            -0.05624371649767401,
            2.368961332728789,
            2.252712651734206,
            -0.12078223763524526,
            6.579251212010101,
            1051287.7089736569,
        ],
    ),
    (
        Builtin::Digamma,
        [-3.5, -0.1, 0.1, 1.461632144968362, 2.0, 1e5],
        [
            1.388870926359529,
            9.24507305005295,
            -10.423754940411076,
            -3.0727905665462925e-16,
            0.42278433509846713,
            11.512920464961896,
        ],
    ),
];

#[test]
fn case_special_functions() {
    for &(prim, xs, want) in SPECIAL {
        let got = run1(prim, none(), &[fa(F64, &[6], &xs)]);
        assert_close(&got, &fa(F64, &[6], &want), 1e-12, 1e-14);
        // f32: the f64 value rounded once.
        let x32: Vec<f64> = xs.iter().map(|&x| x as f32 as f64).collect();
        let got = run1(prim, none(), &[fa(F32, &[6], &x32)]);
        for &g in &floats(&got) {
            assert!(g.is_nan() || g == (g as f32) as f64, "{g} is not an f32");
        }
    }
    // Identities over many points: erf is odd, erf + erfc = 1, erf_inv inverts erf,
    // lgamma(x + 1) = lgamma(x) + ln|x|, digamma(x + 1) = digamma(x) + 1/x.
    let xs: Vec<f64> = (-40..=40).map(|i| i as f64 * 0.0625 + 0.01).collect();
    let n = xs.len() as i64;
    let of = |p: Builtin, v: &[f64]| floats(&run1(p, none(), &[fa(F64, &[n], v)]));
    let neg: Vec<f64> = xs.iter().map(|x| -x).collect();
    let shifted: Vec<f64> = xs.iter().map(|x| x + 1.0).collect();
    let (erf, erf_neg, erfc) = (
        of(Builtin::Erf, &xs),
        of(Builtin::Erf, &neg),
        of(Builtin::Erfc, &xs),
    );
    let back = of(Builtin::ErfInv, &erf);
    let (lg, lg1) = (of(Builtin::Lgamma, &xs), of(Builtin::Lgamma, &shifted));
    let (dg, dg1) = (of(Builtin::Digamma, &xs), of(Builtin::Digamma, &shifted));
    for i in 0..xs.len() {
        let x = xs[i];
        assert!((erf[i] + erf_neg[i]).abs() < 1e-16, "erf({x})");
        assert!((erf[i] + erfc[i] - 1.0).abs() < 1e-15, "erfc({x})");
        assert!(
            (back[i] - x).abs() < 1e-12,
            "erf_inv(erf({x})) = {}",
            back[i]
        );
        assert!((lg1[i] - lg[i] - x.abs().ln()).abs() < 1e-12, "lgamma({x})");
        assert!(
            (dg1[i] - dg[i] - 1.0 / x).abs() < 1e-11 * (1.0 / x).abs().max(1.0),
            "digamma({x})"
        );
    }
    // The edges, as XLA has them: erf_inv(+-1) = +-inf and NaN outside [-1, 1]; lgamma
    // +inf at the poles and at +-inf; digamma NaN at the poles and at -inf.
    let inf = f64::INFINITY;
    let cases: [(Builtin, [f64; 5], [f64; 5]); 5] = [
        (
            Builtin::ErfInv,
            [1.0, -1.0, 1.5, -2.0, f64::NAN],
            [inf, -inf, f64::NAN, f64::NAN, f64::NAN],
        ),
        (Builtin::Lgamma, [0.0, -0.0, -3.0, inf, -inf], [inf; 5]),
        (
            Builtin::Digamma,
            [0.0, -0.0, -3.0, inf, -inf],
            [f64::NAN, f64::NAN, f64::NAN, inf, f64::NAN],
        ),
        (
            Builtin::Erf,
            [inf, -inf, 0.0, -0.0, f64::NAN],
            [1.0, -1.0, 0.0, -0.0, f64::NAN],
        ),
        (
            Builtin::Erfc,
            [inf, -inf, 0.0, 30.0, f64::NAN],
            [0.0, 2.0, 1.0, 0.0, f64::NAN],
        ),
    ];
    for (prim, xs, want) in cases {
        for d in [F32, F64] {
            assert_same(
                &run1(prim, none(), &[fa(d, &[5], &xs)]),
                &fa(d, &[5], &want),
            );
        }
    }
}

#[test]
fn case_exp2_cbrt() {
    check_unary_float(Builtin::Exp2, XS, f64::exp2, f32::exp2);
    check_unary_float(Builtin::Cbrt, XS, f64::cbrt, f32::cbrt);
    let got = run1(
        Builtin::Exp2,
        none(),
        &[fa(F32, &[3], &[10.0, -1.0, 200.0])],
    );
    assert_same(&got, &fa(F32, &[3], &[1024.0, 0.5, f64::INFINITY]));
    let got = run1(Builtin::Cbrt, none(), &[fa(F64, &[3], &[-27.0, 8.0, -0.0])]);
    assert_same(&got, &fa(F64, &[3], &[-3.0, 2.0, -0.0]));
}

/// Inside the domains of the inverse functions (|x| < 1 for asin, acos, atanh).
const UNIT: &[f64] = &[-0.99, -0.5, -0.1, 0.0, 0.3, 0.75, 0.999];

#[test]
fn case_trigonometric() {
    check_unary_float(Builtin::Asin, UNIT, f64::asin, f32::asin);
    check_unary_float(Builtin::Acos, UNIT, f64::acos, f32::acos);
    // Rust's f32 inverse hyperbolics are a few ulps off; the f64 value rounded is the
    // reference.
    check_unary_float(Builtin::Atanh, UNIT, f64::atanh, |x| {
        (x as f64).atanh() as f32
    });
    check_unary_float(Builtin::Atan, XS, f64::atan, f32::atan);
    check_unary_float(Builtin::Sinh, XS, f64::sinh, f32::sinh);
    check_unary_float(Builtin::Cosh, XS, f64::cosh, f32::cosh);
    check_unary_float(Builtin::Asinh, XS, f64::asinh, f32::asinh);
    check_unary_float(
        Builtin::Acosh,
        &[1.0, 1.5, 2.0, 10.0, 1e10],
        f64::acosh,
        f32::acosh,
    );
    // Outside the domains: NaN; at the ends of atanh's: infinities.
    let nan = f64::NAN;
    for (prim, x, want) in [
        (Builtin::Asin, 1.5, nan),
        (Builtin::Acos, -1.5, nan),
        (Builtin::Acosh, 0.5, nan),
        (Builtin::Atanh, 2.0, nan),
        (Builtin::Atanh, 1.0, f64::INFINITY),
        (Builtin::Atanh, -1.0, f64::NEG_INFINITY),
        (Builtin::Sinh, 1000.0, f64::INFINITY),
        (Builtin::Atan, f64::INFINITY, std::f64::consts::FRAC_PI_2),
    ] {
        assert_same(
            &run1(prim, none(), &[fa(F64, &[1], &[x])]),
            &fa(F64, &[1], &[want]),
        );
    }
}

#[test]
fn case_atan2() {
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};
    // Quadrants, the axes and signed zeros (atan2(+-0, -0) = +-pi).
    let got = bin(
        Builtin::Atan2,
        fa(F64, &[6], &[1.0, 1.0, -1.0, 0.0, -0.0, 2.0]),
        fa(F64, &[6], &[1.0, -1.0, -1.0, -0.0, -0.0, 0.0]),
    );
    let want = [
        FRAC_PI_4,
        3.0 * FRAC_PI_4,
        -3.0 * FRAC_PI_4,
        PI,
        -PI,
        FRAC_PI_2,
    ];
    assert_close(&got, &fa(F64, &[6], &want), 1e-15, 0.0);
    // A rank-0 operand broadcasts; f32 rounds.
    let got = bin(
        Builtin::Atan2,
        fa(F32, &[2], &[1.0, -3.0]),
        fa(F32, &[], &[2.0]),
    );
    let want: Vec<f64> = [1f32, -3.0].iter().map(|y| y.atan2(2.0) as f64).collect();
    assert_close(&got, &fa(F32, &[2], &want), 2e-7, 0.0);
}

#[test]
fn case_is_finite() {
    let xs = [1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0, 1e300];
    let got = run1(Builtin::IsFinite, none(), &[fa(F64, &[6], &xs)]);
    assert_same(&got, &ba(&[6], &[true, false, false, false, true, true]));
    // 1e300 overflows f32 on the way in: not finite there.
    let got = run1(Builtin::IsFinite, none(), &[fa(F32, &[6], &xs)]);
    assert_same(&got, &ba(&[6], &[true, false, false, false, true, false]));
}

#[test]
fn case_sqrt() {
    check_unary_float(Builtin::Sqrt, POS, f64::sqrt, f32::sqrt);
    let got = run1(Builtin::Sqrt, none(), &[fa(F32, &[3], &[4.0, -1.0, 2.0])]);
    assert_same(&got, &fa(F32, &[3], &[2.0, f64::NAN, 2f32.sqrt() as f64]));
}

#[test]
fn case_rsqrt() {
    check_unary_float(Builtin::Rsqrt, POS, |x| 1.0 / x.sqrt(), |x| 1.0 / x.sqrt());
    let got = run1(Builtin::Rsqrt, none(), &[fa(F64, &[2], &[4.0, 0.0])]);
    assert_same(&got, &fa(F64, &[2], &[0.5, f64::INFINITY]));
}

/// Half-way points, their neighbours, signed zeros, infinities and NaN.
const ROUNDING: &[f64] = &[
    -2.5, -1.5, -0.5, -0.25, -0.0, 0.0, 0.25, 0.5, 0.75, 1.5, 2.5, 3.49, -7.51, 1e300,
];

#[test]
fn case_floor() {
    check_unary_float(Builtin::Floor, ROUNDING, f64::floor, f32::floor);
    let got = run1(
        Builtin::Floor,
        none(),
        &[fa(F32, &[4], &[-0.5, f64::INFINITY, f64::NAN, -0.0])],
    );
    assert_same(&got, &fa(F32, &[4], &[-1.0, f64::INFINITY, f64::NAN, -0.0]));
}

#[test]
fn case_ceil() {
    check_unary_float(Builtin::Ceil, ROUNDING, f64::ceil, f32::ceil);
    let got = run1(Builtin::Ceil, none(), &[fa(F64, &[3], &[-0.5, 0.5, -1.0])]);
    // ceil(-0.5) is -0.0, as in IEEE.
    assert!(floats(&got)[0] == 0.0 && floats(&got)[0].is_sign_negative());
    assert_same(&got, &fa(F64, &[3], &[-0.0, 1.0, -1.0]));
}

#[test]
fn case_round() {
    let method = |m: i64| params(vec![("rounding_method", Param::Int(m))]);
    let n = ROUNDING.len() as i64;
    let away: Vec<f64> = ROUNDING.iter().map(|x| x.round()).collect();
    let even: Vec<f64> = ROUNDING.iter().map(|x| x.round_ties_even()).collect();
    for (m, want) in [(0, &away), (1, &even)] {
        let got = run1(Builtin::Round, method(m), &[fa(F64, &[n], ROUNDING)]);
        assert_same(&got, &fa(F64, &[n], want));
    }
    let got = run1(
        Builtin::Round,
        method(0),
        &[fa(F32, &[3], &[2.5, -2.5, 0.5])],
    );
    assert_same(&got, &fa(F32, &[3], &[3.0, -3.0, 1.0]));
    let got = run1(
        Builtin::Round,
        method(1),
        &[fa(BF16, &[3], &[2.5, -2.5, 0.5])],
    );
    assert_same(&got, &fa(BF16, &[3], &[2.0, -2.0, 0.0]));
}

#[test]
fn case_square() {
    assert_same(
        &run1(Builtin::Square, none(), &[fa(F32, &[2], &[3.0, -1.5])]),
        &fa(F32, &[2], &[9.0, 2.25]),
    );
    // 12^2 = 144 wraps to -112 in i8; 16^2 = 256 wraps to 0 in u8.
    assert_same(
        &run1(Builtin::Square, none(), &[ia(I8, &[1], &[12])]),
        &ia(I8, &[1], &[-112]),
    );
    assert_same(
        &run1(Builtin::Square, none(), &[ia(U8, &[2], &[16, 15])]),
        &ia(U8, &[2], &[0, 225]),
    );
}

#[test]
fn case_not() {
    assert_same(
        &run1(Builtin::Not, none(), &[ba(&[2], &[true, false])]),
        &ba(&[2], &[false, true]),
    );
    assert_same(
        &run1(Builtin::Not, none(), &[ia(I8, &[3], &[0, -1, 5])]),
        &ia(I8, &[3], &[-1, 0, -6]),
    );
    assert_same(
        &run1(Builtin::Not, none(), &[ia(U8, &[3], &[0, 255, 5])]),
        &ia(U8, &[3], &[255, 0, 250]),
    );
}

#[test]
fn case_count_bits() {
    // Each value's bits as an unsigned number of its width, counted with Rust's own ops.
    let values: [i64; 7] = [0, 1, -1, 5, i64::MIN, i64::MAX, 0x0123_4567_89ab_cdef];
    for d in [I8, I16, I32, I64, U8, DType::U16, U32, U64] {
        let bits = d.size_bytes() as u32 * 8;
        let m = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let x = HostArray::from_u64(sh(&[7]), d, values.iter().map(|&v| v as u64 & m).collect())
            .unwrap();
        let pop = run1(Builtin::PopulationCount, none(), std::slice::from_ref(&x));
        let clz = run1(Builtin::Clz, none(), std::slice::from_ref(&x));
        let want_pop: Vec<i64> = values
            .iter()
            .map(|&v| i64::from((v as u64 & m).count_ones()))
            .collect();
        let want_clz: Vec<i64> = values
            .iter()
            .map(|&v| i64::from((v as u64 & m).leading_zeros() - (64 - bits)))
            .collect();
        assert_same(&pop, &ia(d, &[7], &want_pop));
        assert_same(&clz, &ia(d, &[7], &want_clz));
    }
}

#[test]
fn case_bitcast_convert_type() {
    let to = |d: DType| params(vec![("new_dtype", Param::DType(d))]);
    let bc = |x: HostArray, d: DType| run1(Builtin::BitcastConvertType, to(d), &[x]);
    // Same width: IEEE bit patterns (of f32, f16 and bf16: 1.0, -2.0, the smallest
    // subnormal, infinity).
    assert_same(
        &bc(fa(F32, &[3], &[1.5, -2.0, f64::INFINITY]), I32),
        &ia(
            I32,
            &[3],
            &[0x3FC0_0000, 0xC000_0000_u32 as i32 as i64, 0x7F80_0000],
        ),
    );
    let tiny = 2f64.powi(-24);
    assert_same(
        &bc(fa(F16, &[4], &[1.0, -2.0, tiny, f64::INFINITY]), DType::U16),
        &ia(DType::U16, &[4], &[0x3C00, 0xC000, 0x0001, 0x7C00]),
    );
    assert_same(
        &bc(ia(DType::U16, &[4], &[0x3C00, 0xC000, 0x0001, 0xFC00]), F16),
        &fa(F16, &[4], &[1.0, -2.0, tiny, f64::NEG_INFINITY]),
    );
    assert_same(
        &bc(fa(BF16, &[2], &[1.0, -0.0]), I16),
        &ia(I16, &[2], &[0x3F80, i64::from(0x8000_u16 as i16)]),
    );
    // f16 NaN bits keep their payload and sign through f16.
    let nan = bc(ia(DType::U16, &[1], &[0xFE01]), F16);
    assert_same(&bc(nan, DType::U16), &ia(DType::U16, &[1], &[0xFE01]));
    assert_same(&bc(ia(I8, &[2], &[-1, 5]), U8), &ia(U8, &[2], &[255, 5]));
    assert_same(
        &bc(
            HostArray::from_u64(sh(&[1]), U64, vec![0xBFF0_0000_0000_0000]).unwrap(),
            F64,
        ),
        &fa(F64, &[1], &[-1.0]),
    );
    // Narrowing: least significant part first, in a new trailing dimension.
    assert_same(
        &bc(ia(U32, &[2], &[0x0102_0304, 0xFFFF_0000]), U8),
        &ia(U8, &[2, 4], &[4, 3, 2, 1, 0, 0, 255, 255]),
    );
    assert_same(&bc(ia(I32, &[], &[-2]), I16), &ia(I16, &[2], &[-2, -1]));
    // Widening joins the last dimension back, and round-trips.
    assert_same(
        &bc(ia(U8, &[2, 4], &[4, 3, 2, 1, 0, 0, 255, 255]), U32),
        &ia(U32, &[2], &[0x0102_0304, 0xFFFF_0000]),
    );
    let x = fa(F64, &[3], &[1.0, -3.25e-300, 7.0e300]);
    assert_same(&bc(bc(x.clone(), DType::U16), F64), &x);
    assert_same(&bc(bc(x.clone(), F32), F64), &x);
    // Empty arrays keep their shapes' rule.
    assert_eq!(bc(ia(U32, &[0], &[]), U8).shape, sh(&[0, 4]));
}

#[test]
fn case_threefry2x32() {
    // Random123's known-answer vectors for Threefry-2x32 with 20 rounds (kat_vectors:
    // zeros, all ones, and the digits of pi), one block per element: the keys are
    // arrays here, broadcast against nothing.
    // (key, counts, expected words)
    type Kat = ([u32; 2], [u32; 2], [u32; 2]);
    let kat: [Kat; 3] = [
        ([0, 0], [0, 0], [0x6b20_0159, 0x99ba_4efe]),
        (
            [0xffff_ffff, 0xffff_ffff],
            [0xffff_ffff, 0xffff_ffff],
            [0x1cb9_96fc, 0xbb00_2be7],
        ),
        (
            [0x1319_8a2e, 0x0370_7344],
            [0x243f_6a88, 0x85a3_08d3],
            [0xc492_3a9c, 0x483d_f7a0],
        ),
    ];
    let col = |f: &dyn Fn(&Kat) -> u32| -> HostArray {
        ia(
            U32,
            &[3],
            &kat.iter().map(|k| i64::from(f(k))).collect::<Vec<_>>(),
        )
    };
    let outs = run(
        Builtin::Threefry2x32,
        none(),
        &[
            col(&|k| k.0[0]),
            col(&|k| k.0[1]),
            col(&|k| k.1[0]),
            col(&|k| k.1[1]),
        ],
    );
    assert_same(&outs[0], &col(&|k| k.2[0]));
    assert_same(&outs[1], &col(&|k| k.2[1]));
    // Scalar keys broadcast against counts (as jax.random.bits calls it); JAX 0.10.2
    // gives these for key (0, 0) and counts (i, 0).
    let outs = run(
        Builtin::Threefry2x32,
        none(),
        &[
            ia(U32, &[], &[0]),
            ia(U32, &[], &[0]),
            ia(U32, &[1, 3], &[0, 1, 2]),
            ia(U32, &[1, 1], &[0]),
        ],
    );
    assert_same(
        &outs[0],
        &ia(U32, &[1, 3], &[1_797_259_609, 1_351_547_692, 1_688_610_540]),
    );
    assert_same(
        &outs[1],
        &ia(U32, &[1, 3], &[2_579_123_966, 3_235_790_642, 4_229_293_427]),
    );
}

#[test]
fn case_integer_pow() {
    let y = |v: i64| params(vec![("y", Param::Int(v))]);
    assert_same(
        &run1(
            Builtin::IntegerPow,
            y(3),
            &[fa(F64, &[3], &[2.0, -1.5, 0.0])],
        ),
        &fa(F64, &[3], &[8.0, -3.375, 0.0]),
    );
    // Negative powers of floats are 1 / x^|y|.
    assert_same(
        &run1(
            Builtin::IntegerPow,
            y(-2),
            &[fa(F64, &[3], &[2.0, 0.0, -4.0])],
        ),
        &fa(F64, &[3], &[0.25, f64::INFINITY, 0.0625]),
    );
    // x^0 is 1, NaN and 0 included.
    assert_same(
        &run1(
            Builtin::IntegerPow,
            y(0),
            &[fa(F32, &[2], &[f64::NAN, 0.0])],
        ),
        &fa(F32, &[2], &[1.0, 1.0]),
    );
    assert_same(
        &run1(Builtin::IntegerPow, y(5), &[ia(I32, &[2], &[3, -2])]),
        &ia(I32, &[2], &[243, -32]),
    );
    // 3^5 = 243 wraps to -13 in i8.
    assert_same(
        &run1(Builtin::IntegerPow, y(5), &[ia(I8, &[1], &[3])]),
        &ia(I8, &[1], &[-13]),
    );
    // f32: each product rounds to f32. 1.1f32^2 is rounded before squaring again.
    let x = 1.1f32;
    let x2 = x * x;
    let got = run1(Builtin::IntegerPow, y(4), &[fa(F32, &[1], &[x as f64])]);
    assert_same(&got, &fa(F32, &[1], &[(x2 * x2) as f64]));
}

// ----- Binary -----

fn bin(prim: Builtin, x: HostArray, y: HostArray) -> HostArray {
    run1(prim, none(), &[x, y])
}

#[test]
fn case_add() {
    // f32 rounding: 1 + 1e-8 is 1 in f32.
    assert_same(
        &bin(
            Builtin::Add,
            fa(F32, &[2], &[1.0, 0.5]),
            fa(F32, &[2], &[1e-8, 0.25]),
        ),
        &fa(F32, &[2], &[1.0, 0.75]),
    );
    // In f64 it is not.
    assert_same(
        &bin(Builtin::Add, fa(F64, &[1], &[1.0]), fa(F64, &[1], &[1e-8])),
        &fa(F64, &[1], &[1.0 + 1e-8]),
    );
    // i8 overflow wraps; u8 wraps modulo 256.
    assert_same(
        &bin(
            Builtin::Add,
            ia(I8, &[2], &[100, -100]),
            ia(I8, &[2], &[100, -100]),
        ),
        &ia(I8, &[2], &[-56, 56]),
    );
    assert_same(
        &bin(Builtin::Add, ia(U8, &[1], &[200]), ia(U8, &[1], &[100])),
        &ia(U8, &[1], &[44]),
    );
}

#[test]
fn case_sub() {
    assert_same(
        &bin(Builtin::Sub, ia(U8, &[2], &[0, 10]), ia(U8, &[2], &[1, 3])),
        &ia(U8, &[2], &[255, 7]),
    );
    assert_same(
        &bin(
            Builtin::Sub,
            fa(F64, &[2], &[0.5, 1.0]),
            fa(F64, &[2], &[0.25, f64::INFINITY]),
        ),
        &fa(F64, &[2], &[0.25, f64::NEG_INFINITY]),
    );
    assert_same(
        &bin(
            Builtin::Sub,
            ia(I32, &[1], &[i32::MIN as i64]),
            ia(I32, &[1], &[1]),
        ),
        &ia(I32, &[1], &[i32::MAX as i64]),
    );
}

#[test]
fn case_mul() {
    // 300 * 300 = 90000 wraps to 90000 - 65536 in i16.
    assert_same(
        &bin(Builtin::Mul, ia(I16, &[1], &[300]), ia(I16, &[1], &[300])),
        &ia(I16, &[1], &[90000 - 65536]),
    );
    // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is a tie in f32, rounding to the even 1 + 2^-11.
    let a = 1.0 + 2f64.powi(-12);
    assert_same(
        &bin(Builtin::Mul, fa(F32, &[1], &[a]), fa(F32, &[1], &[a])),
        &fa(F32, &[1], &[1.0 + 2f64.powi(-11)]),
    );
    assert_same(
        &bin(Builtin::Mul, fa(F64, &[1], &[a]), fa(F64, &[1], &[a])),
        &fa(F64, &[1], &[1.0 + 2f64.powi(-11) + 2f64.powi(-24)]),
    );
}

#[test]
fn case_div() {
    let min = i32::MIN as i64;
    // Truncation toward zero; x / 0 = -1; MIN / -1 = MIN (XLA).
    assert_same(
        &bin(
            Builtin::Div,
            ia(I32, &[6], &[7, -7, 7, -7, 5, min]),
            ia(I32, &[6], &[2, 2, -2, -2, 0, -1]),
        ),
        &ia(I32, &[6], &[3, -3, -3, 3, -1, min]),
    );
    // Unsigned: x / 0 is the maximum.
    assert_same(
        &bin(
            Builtin::Div,
            ia(U8, &[2], &[200, 200]),
            ia(U8, &[2], &[0, 7]),
        ),
        &ia(U8, &[2], &[255, 28]),
    );
    // u64 divides as unsigned.
    let got = bin(
        Builtin::Div,
        HostArray::from_u64(sh(&[1]), U64, vec![u64::MAX]).unwrap(),
        HostArray::from_u64(sh(&[1]), U64, vec![2]).unwrap(),
    );
    assert_same(
        &got,
        &HostArray::from_u64(sh(&[1]), U64, vec![u64::MAX / 2]).unwrap(),
    );
    assert_same(
        &bin(
            Builtin::Div,
            fa(F64, &[3], &[1.0, -1.0, 0.0]),
            fa(F64, &[3], &[0.0, 0.0, 0.0]),
        ),
        &fa(F64, &[3], &[f64::INFINITY, f64::NEG_INFINITY, f64::NAN]),
    );
    // f32: 1/3 rounds to f32.
    assert_same(
        &bin(Builtin::Div, fa(F32, &[1], &[1.0]), fa(F32, &[1], &[3.0])),
        &fa(F32, &[1], &[(1.0f32 / 3.0) as f64]),
    );
}

#[test]
fn case_rem() {
    let min = i32::MIN as i64;
    // The dividend's sign; x % 0 = x; MIN % -1 = 0.
    assert_same(
        &bin(
            Builtin::Rem,
            ia(I32, &[6], &[7, -7, 7, -7, 5, min]),
            ia(I32, &[6], &[2, 2, -2, -2, 0, -1]),
        ),
        &ia(I32, &[6], &[1, -1, 1, -1, 5, 0]),
    );
    assert_same(
        &bin(
            Builtin::Rem,
            fa(F64, &[2], &[-5.5, 5.5]),
            fa(F64, &[2], &[2.0, -2.0]),
        ),
        &fa(F64, &[2], &[-1.5, 1.5]),
    );
    assert_same(
        &bin(Builtin::Rem, ia(U8, &[2], &[200, 9]), ia(U8, &[2], &[7, 0])),
        &ia(U8, &[2], &[4, 9]),
    );
}

#[test]
fn case_pow() {
    assert_same(
        &bin(
            Builtin::Pow,
            fa(F64, &[4], &[2.0, 0.0, 4.0, -8.0]),
            fa(F64, &[4], &[10.0, 0.0, 0.5, 1.0 / 3.0]),
        ),
        &fa(F64, &[4], &[1024.0, 1.0, 2.0, f64::NAN]),
    );
    assert_close(
        &bin(Builtin::Pow, fa(F32, &[1], &[3.0]), fa(F32, &[1], &[0.5])),
        &fa(F32, &[1], &[3f32.sqrt() as f64]),
        1.2e-7,
        0.0,
    );
}

#[test]
fn case_max() {
    let nan = f64::NAN;
    assert_same(
        &bin(
            Builtin::Max,
            fa(F64, &[4], &[nan, 1.0, 2.0, -1.0]),
            fa(F64, &[4], &[1.0, nan, 3.0, -2.0]),
        ),
        &fa(F64, &[4], &[nan, nan, 3.0, -1.0]),
    );
    assert_same(
        &bin(Builtin::Max, ia(I8, &[2], &[-5, 3]), ia(I8, &[2], &[2, -7])),
        &ia(I8, &[2], &[2, 3]),
    );
    // u64 compares as unsigned: u64::MAX is stored as -1 but is the largest.
    let big = HostArray::from_u64(sh(&[2]), U64, vec![u64::MAX, 1]).unwrap();
    let small = HostArray::from_u64(sh(&[2]), U64, vec![1, 2]).unwrap();
    assert_same(
        &bin(Builtin::Max, big, small),
        &HostArray::from_u64(sh(&[2]), U64, vec![u64::MAX, 2]).unwrap(),
    );
    assert_same(
        &bin(
            Builtin::Max,
            ba(&[2], &[true, false]),
            ba(&[2], &[false, false]),
        ),
        &ba(&[2], &[true, false]),
    );
}

#[test]
fn case_min() {
    let nan = f64::NAN;
    assert_same(
        &bin(
            Builtin::Min,
            fa(F32, &[3], &[nan, 1.0, 2.0]),
            fa(F32, &[3], &[1.0, nan, 3.0]),
        ),
        &fa(F32, &[3], &[nan, nan, 2.0]),
    );
    let big = HostArray::from_u64(sh(&[1]), U64, vec![1 << 63]).unwrap();
    let small = HostArray::from_u64(sh(&[1]), U64, vec![5]).unwrap();
    assert_same(&bin(Builtin::Min, big, small.clone()), &small);
    assert_same(
        &bin(
            Builtin::Min,
            ba(&[2], &[true, false]),
            ba(&[2], &[true, true]),
        ),
        &ba(&[2], &[true, false]),
    );
}

#[test]
fn case_and() {
    assert_same(
        &bin(
            Builtin::And,
            ba(&[4], &[true, true, false, false]),
            ba(&[4], &[true, false, true, false]),
        ),
        &ba(&[4], &[true, false, false, false]),
    );
    assert_same(
        &bin(
            Builtin::And,
            ia(U8, &[1], &[0b1100]),
            ia(U8, &[1], &[0b1010]),
        ),
        &ia(U8, &[1], &[0b1000]),
    );
    assert_same(
        &bin(Builtin::And, ia(I8, &[1], &[-1]), ia(I8, &[1], &[0x35])),
        &ia(I8, &[1], &[0x35]),
    );
}

#[test]
fn case_or() {
    assert_same(
        &bin(
            Builtin::Or,
            ba(&[4], &[true, true, false, false]),
            ba(&[4], &[true, false, true, false]),
        ),
        &ba(&[4], &[true, true, true, false]),
    );
    assert_same(
        &bin(
            Builtin::Or,
            ia(U8, &[1], &[0b1100]),
            ia(U8, &[1], &[0b1010]),
        ),
        &ia(U8, &[1], &[0b1110]),
    );
}

#[test]
fn case_xor() {
    assert_same(
        &bin(
            Builtin::Xor,
            ba(&[4], &[true, true, false, false]),
            ba(&[4], &[true, false, true, false]),
        ),
        &ba(&[4], &[false, true, true, false]),
    );
    assert_same(
        &bin(
            Builtin::Xor,
            ia(U8, &[2], &[0b1100, 255]),
            ia(U8, &[2], &[0b1010, 1]),
        ),
        &ia(U8, &[2], &[0b0110, 254]),
    );
    assert_same(
        &bin(
            Builtin::Xor,
            ia(I8, &[2], &[-1, -128]),
            ia(I8, &[2], &[0x35, 1]),
        ),
        &ia(I8, &[2], &[!0x35, -127]),
    );
    assert_same(
        &bin(Builtin::Xor, ia(U64, &[1], &[-1]), ia(U64, &[1], &[1])),
        &ia(U64, &[1], &[-2]),
    );
}

/// XLA's shifts on one integer type, computed with the native type: the amount is read
/// as unsigned, and an amount of the width or more shifts every bit out (left and
/// logical give 0, arithmetic gives the sign fill).
macro_rules! shift_reference {
    ($signed:ty, $unsigned:ty) => {
        |prim: Builtin, a: i64, amount: i64| -> i64 {
            let bits = <$unsigned>::BITS;
            let (a, n) = (a as $unsigned, amount as $unsigned);
            let out = n >= bits as $unsigned;
            let n = if out { bits - 1 } else { n as u32 };
            let r: $unsigned = match prim {
                Builtin::ShiftLeft | Builtin::ShiftRightLogical if out => 0,
                Builtin::ShiftLeft => a << n,
                Builtin::ShiftRightLogical => a >> n,
                _ => ((a as $signed) >> n) as $unsigned,
            };
            r as i64
        }
    };
}

#[test]
fn case_shifts() {
    type Reference = fn(Builtin, i64, i64) -> i64;
    let types: [(DType, bool, Reference); 8] = [
        (I8, true, shift_reference!(i8, u8)),
        (I16, true, shift_reference!(i16, u16)),
        (I32, true, shift_reference!(i32, u32)),
        (I64, true, shift_reference!(i64, u64)),
        (U8, false, shift_reference!(i8, u8)),
        (U16, false, shift_reference!(i16, u16)),
        (U32, false, shift_reference!(i32, u32)),
        (U64, false, shift_reference!(i64, u64)),
    ];
    let prims = [
        Builtin::ShiftLeft,
        Builtin::ShiftRightLogical,
        Builtin::ShiftRightArithmetic,
    ];
    for (dt, signed, reference) in types {
        let bits = dt.size_bytes() as i64 * 8;
        let wrap = |v: i64| ia(dt, &[1], &[v]).as_i64().unwrap()[0];
        let values: Vec<i64> = [0, 1, -1, 5, -8, 100, i64::MIN, i64::MAX, 1 << (bits - 1)]
            .iter()
            .map(|&v| wrap(v))
            .collect();
        let mut amounts: Vec<i64> = vec![0, 1, 2, bits - 1, bits, bits + 1, 2 * bits, 255];
        if signed {
            amounts.extend([-1, -bits, i64::MIN]);
        } else {
            amounts.push(-1); // all ones
        }
        let amounts: Vec<i64> = amounts.iter().map(|&v| wrap(v)).collect();
        let n = values.len() * amounts.len();
        let xs: Vec<i64> = values
            .iter()
            .flat_map(|&v| std::iter::repeat_n(v, amounts.len()))
            .collect();
        let ys: Vec<i64> = (0..values.len()).flat_map(|_| amounts.clone()).collect();
        for prim in prims {
            let got = bin(prim, ia(dt, &[n as i64], &xs), ia(dt, &[n as i64], &ys));
            let want: Vec<i64> = xs
                .iter()
                .zip(&ys)
                .map(|(&x, &y)| wrap(reference(prim, x, y)))
                .collect();
            assert_same(&got, &ia(dt, &[n as i64], &want));
        }
    }
    // Printed by JAX 0.10.2 (jax.lax under jit) for i8 [-8, -1, 0, 1, 7, 100] shifted by 1,
    // 7, 8 and -1, and u8 [0, 1, 200, 255] shifted arithmetically by 1 and 9.
    let x = ia(I8, &[6], &[-8, -1, 0, 1, 7, 100]);
    let by = |k: i64| ia(I8, &[6], &[k; 6]);
    let cases: [(Builtin, i64, [i64; 6]); 8] = [
        (Builtin::ShiftLeft, 1, [-16, -2, 0, 2, 14, -56]),
        (Builtin::ShiftRightLogical, 1, [124, 127, 0, 0, 3, 50]),
        (Builtin::ShiftRightArithmetic, 1, [-4, -1, 0, 0, 3, 50]),
        (Builtin::ShiftLeft, 7, [0, -128, 0, -128, -128, 0]),
        (Builtin::ShiftRightLogical, 7, [1, 1, 0, 0, 0, 0]),
        (Builtin::ShiftLeft, 8, [0; 6]),
        (Builtin::ShiftRightArithmetic, 8, [-1, -1, 0, 0, 0, 0]),
        (Builtin::ShiftRightArithmetic, -1, [-1, -1, 0, 0, 0, 0]),
    ];
    for (prim, k, want) in cases {
        assert_same(&bin(prim, x.clone(), by(k)), &ia(I8, &[6], &want));
    }
    let u = ia(U8, &[4], &[0, 1, 200, 255]);
    assert_same(
        &bin(
            Builtin::ShiftRightArithmetic,
            u.clone(),
            ia(U8, &[4], &[1; 4]),
        ),
        &ia(U8, &[4], &[0, 0, 228, 255]),
    );
    assert_same(
        &bin(Builtin::ShiftRightArithmetic, u, ia(U8, &[4], &[9; 4])),
        &ia(U8, &[4], &[0, 0, 255, 255]),
    );
}

/// A reference comparison.
type Cmp = fn(&f64, &f64) -> bool;

#[test]
fn case_comparisons() {
    let nan = f64::NAN;
    let x = [1.0, 2.0, 3.0, nan, 0.0];
    let y = [2.0, 2.0, 1.0, nan, -0.0];
    let cmp: [(Builtin, Cmp); 6] = [
        (Builtin::Eq, |a, b| a == b),
        (Builtin::Ne, |a, b| a != b),
        (Builtin::Lt, |a, b| a < b),
        (Builtin::Le, |a, b| a <= b),
        (Builtin::Gt, |a, b| a > b),
        (Builtin::Ge, |a, b| a >= b),
    ];
    for (prim, f) in cmp {
        let want: Vec<bool> = x.iter().zip(&y).map(|(a, b)| f(a, b)).collect();
        assert_same(
            &bin(prim, fa(F32, &[5], &x), fa(F32, &[5], &y)),
            &ba(&[5], &want),
        );
        // Integers, signed and unsigned (u64 values at or above 2^63 compare as large).
        let xi = [-3i64, 5, 7];
        let yi = [2i64, 5, -1];
        let want: Vec<bool> = xi
            .iter()
            .zip(&yi)
            .map(|(a, b)| f(&(*a as f64), &(*b as f64)))
            .collect();
        assert_same(
            &bin(prim, ia(I8, &[3], &xi), ia(I8, &[3], &yi)),
            &ba(&[3], &want),
        );
        let xu = [1u64 << 63, 5, 1];
        let yu = [1u64, 5, u64::MAX];
        let want: Vec<bool> = xu
            .iter()
            .zip(&yu)
            .map(|(a, b)| f(&(*a as f64), &(*b as f64)))
            .collect();
        let u = |v: &[u64]| HostArray::from_u64(sh(&[3]), U64, v.to_vec()).unwrap();
        assert_same(&bin(prim, u(&xu), u(&yu)), &ba(&[3], &want));
        // Booleans: false < true.
        let xb = [false, true, true];
        let yb = [true, true, false];
        let want: Vec<bool> = xb
            .iter()
            .zip(&yb)
            .map(|(a, b)| f(&f64::from(u8::from(*a)), &f64::from(u8::from(*b))))
            .collect();
        assert_same(&bin(prim, ba(&[3], &xb), ba(&[3], &yb)), &ba(&[3], &want));
    }
}

// ----- Selection, conversion -----

#[test]
fn case_select_n() {
    let a = fa(F32, &[3], &[1.0, 2.0, 3.0]);
    let b = fa(F32, &[3], &[10.0, 20.0, 30.0]);
    let c = fa(F32, &[3], &[100.0, 200.0, 300.0]);
    // bool predicate: false picks case 0, true case 1.
    assert_same(
        &run1(
            Builtin::SelectN,
            none(),
            &[ba(&[3], &[true, false, true]), a.clone(), b.clone()],
        ),
        &fa(F32, &[3], &[10.0, 2.0, 30.0]),
    );
    // Scalar predicate.
    assert_same(
        &run1(
            Builtin::SelectN,
            none(),
            &[HostArray::scalar_bool(true), a.clone(), b.clone()],
        ),
        &b,
    );
    // i32 predicate with 3 cases; out of range clamps (JAX's lowering).
    let which = ia(I32, &[3], &[2, 0, 1]);
    assert_same(
        &run1(
            Builtin::SelectN,
            none(),
            &[which, a.clone(), b.clone(), c.clone()],
        ),
        &fa(F32, &[3], &[100.0, 2.0, 30.0]),
    );
    let which = ia(I32, &[3], &[-1, 5, 1]);
    assert_same(
        &run1(Builtin::SelectN, none(), &[which, a, b, c]),
        &fa(F32, &[3], &[1.0, 200.0, 30.0]),
    );
    // One case.
    assert_same(
        &run1(
            Builtin::SelectN,
            none(),
            &[ia(I32, &[], &[3]), ia(I8, &[1], &[4])],
        ),
        &ia(I8, &[1], &[4]),
    );
}

#[test]
fn case_clamp() {
    let nan = f64::NAN;
    let s = |x: f64| HostArray::scalar_f64(F32, x).unwrap();
    assert_same(
        &run1(
            Builtin::Clamp,
            none(),
            &[s(0.0), fa(F32, &[4], &[-1.0, 0.5, 2.0, nan]), s(1.0)],
        ),
        &fa(F32, &[4], &[0.0, 0.5, 1.0, nan]),
    );
    // lo > hi: min(max(x, lo), hi) is hi.
    assert_same(
        &run1(
            Builtin::Clamp,
            none(),
            &[s(5.0), fa(F32, &[2], &[1.0, 7.0]), s(3.0)],
        ),
        &fa(F32, &[2], &[3.0, 3.0]),
    );
    // Array bounds, integers.
    assert_same(
        &run1(
            Builtin::Clamp,
            none(),
            &[
                ia(I32, &[3], &[0, 0, -5]),
                ia(I32, &[3], &[-1, 3, 9]),
                ia(I32, &[3], &[2, 2, 2]),
            ],
        ),
        &ia(I32, &[3], &[0, 2, 2]),
    );
}

/// Expected values generated once with JAX 0.10.2 (x64 enabled) by this script:
/// ```python
/// import jax, numpy as np
/// jax.config.update("jax_enable_x64", True)
/// from jax import lax
/// xs = np.array([1 + 2**-8, 1 + 3 * 2**-8, 65519.0, 65520.0, 2**-25, 3 * 2**-25, 1e-8,
///                -1.0000001, 1.2345678, 1e39, -2**-134, 1.5 * 2**-134, 0.1], np.float64)
/// for dt in (jax.numpy.bfloat16, np.float16):
///     print([float(v) for v in np.asarray(lax.convert_element_type(xs, dt)).astype(np.float64)])
/// ```
/// One entry is replaced: XLA:CPU flushes the bf16 subnormal `1.5 * 2^-134` to 0 (it
/// converts through f32 with flush-to-zero on); IEEE round-to-nearest-even with gradual
/// underflow (what the evaluator and `ml_dtypes` do) gives `2^-133`.
const CONVERT_XS: [f64; 13] = [
    1.0 + 1.0 / 256.0,
    1.0 + 3.0 / 256.0,
    65519.0,
    65520.0,
    2.9802322387695312e-08,
    8.940696716308594e-08,
    1e-8,
    -1.0000001,
    1.2345678,
    1e39,
    -4.591774807899561e-41, // -2^-134
    6.887662211849341e-41,  // 1.5 * 2^-134
    0.1,
];
const CONVERT_BF16: [f64; 13] = [
    1.0,
    1.015625,
    65536.0,
    65536.0,
    2.9802322387695312e-08,
    8.940696716308594e-08,
    1.0011717677116394e-08,
    -1.0,
    1.234375,
    f64::INFINITY,
    -0.0,
    9.183549615799121e-41, // 2^-133; JAX on CPU: 0.0 (flush to zero), see above.
    0.10009765625,
];
const CONVERT_F16: [f64; 13] = [
    1.00390625,
    1.01171875,
    65504.0,
    f64::INFINITY,
    0.0,
    1.1920928955078125e-07,
    0.0,
    -1.0,
    1.234375,
    f64::INFINITY,
    -0.0,
    0.0,
    0.0999755859375,
];

#[test]
fn case_convert_element_type() {
    let to = |d: DType| {
        params(vec![
            ("new_dtype", Param::DType(d)),
            ("weak_type", Param::Bool(false)),
        ])
    };
    let nan = f64::NAN;
    // Float to int: truncation toward zero, saturation, NaN to 0.
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(I32),
            &[fa(F64, &[6], &[nan, 1e10, -1e10, -0.7, 2.9, -2.9])],
        ),
        &ia(I32, &[6], &[0, i32::MAX as i64, i32::MIN as i64, 0, 2, -2]),
    );
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(U8),
            &[fa(F32, &[4], &[300.0, -5.0, 255.9, 1.5])],
        ),
        &ia(U8, &[4], &[255, 0, 255, 1]),
    );
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(U64),
            &[fa(F64, &[3], &[nan, 1e30, -1e30])],
        ),
        &HostArray::from_u64(sh(&[3]), U64, vec![0, u64::MAX, 0]).unwrap(),
    );
    // Int to int wraps.
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(I8),
            &[ia(I32, &[3], &[200, -129, 5])],
        ),
        &ia(I8, &[3], &[-56, 127, 5]),
    );
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(U64),
            &[ia(I64, &[1], &[-1])],
        ),
        &HostArray::from_u64(sh(&[1]), U64, vec![u64::MAX]).unwrap(),
    );
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(I32),
            &[ia(U32, &[1], &[u32::MAX as i64])],
        ),
        &ia(I32, &[1], &[-1]),
    );
    // u64 to float is unsigned.
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(F64),
            &[HostArray::from_u64(sh(&[1]), U64, vec![u64::MAX]).unwrap()],
        ),
        &fa(F64, &[1], &[u64::MAX as f64]),
    );
    // Int to bf16 rounds once: 2^60 + 2^52 + 1 is above the tie 2^60 + 2^52 (through an
    // f64 it would land on the tie and round down).
    let v = (1i64 << 60) + (1i64 << 52) + 1;
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(BF16),
            &[ia(I64, &[1], &[v])],
        ),
        &fa(BF16, &[1], &[2f64.powi(60) + 2f64.powi(53)]),
    );
    // Bool to numbers and numbers to bool (NaN is true).
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(F32),
            &[ba(&[2], &[true, false])],
        ),
        &fa(F32, &[2], &[1.0, 0.0]),
    );
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(Bool),
            &[fa(F32, &[4], &[nan, 0.0, -0.0, 2.0])],
        ),
        &ba(&[4], &[true, false, false, true]),
    );
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(Bool),
            &[ia(I8, &[2], &[0, -3])],
        ),
        &ba(&[2], &[false, true]),
    );
    // f64 to f32 rounds.
    assert_same(
        &run1(
            Builtin::ConvertElementType,
            to(F32),
            &[fa(F64, &[2], &[0.1, 1e300])],
        ),
        &fa(F32, &[2], &[0.1f32 as f64, f64::INFINITY]),
    );
    // f64 to bf16 and f16 (the JAX table).
    for (dt, want) in [(BF16, CONVERT_BF16), (F16, CONVERT_F16)] {
        let got = run1(
            Builtin::ConvertElementType,
            to(dt),
            &[fa(F64, &[13], &CONVERT_XS)],
        );
        let want = HostArray {
            shape: sh(&[13]),
            dtype: dt,
            data: HostData::Float(want.to_vec()),
        };
        assert_same(&got, &want);
        // Signs of zeros too.
        for (g, w) in floats(&got).iter().zip(floats(&want)) {
            assert_eq!(g.is_sign_negative(), w.is_sign_negative(), "{g} vs {w}");
        }
    }
}

// ----- Reductions -----

fn axes(a: &[i64]) -> Params {
    params(vec![("axes", ints(a))])
}

#[test]
fn case_reduce_sum() {
    let x = ia(I32, &[2, 3], &[1, 2, 3, 4, 5, 6]);
    assert_same(
        &run1(Builtin::ReduceSum, axes(&[1]), std::slice::from_ref(&x)),
        &ia(I32, &[2], &[6, 15]),
    );
    assert_same(
        &run1(Builtin::ReduceSum, axes(&[0]), std::slice::from_ref(&x)),
        &ia(I32, &[3], &[5, 7, 9]),
    );
    assert_same(
        &run1(Builtin::ReduceSum, axes(&[0, 1]), std::slice::from_ref(&x)),
        &ia(I32, &[], &[21]),
    );
    assert_same(
        &run1(Builtin::ReduceSum, axes(&[]), std::slice::from_ref(&x)),
        &x,
    );
    // Empty axis: the identity.
    assert_same(
        &run1(
            Builtin::ReduceSum,
            axes(&[0]),
            &[HostArray::zeros(sh(&[0, 3]), F32)],
        ),
        &fa(F32, &[3], &[0.0, 0.0, 0.0]),
    );
    // i8 wraps.
    assert_same(
        &run1(
            Builtin::ReduceSum,
            axes(&[0]),
            &[ia(I8, &[3], &[100, 100, 1])],
        ),
        &ia(I8, &[], &[-55]),
    );
    // Floats round to f32.
    let got = run1(
        Builtin::ReduceSum,
        axes(&[0]),
        &[fa(F32, &[3], &[0.1, 0.2, 0.3])],
    );
    let want = (0.1f32 as f64 + 0.2f32 as f64 + 0.3f32 as f64) as f32 as f64;
    assert_same(&got, &fa(F32, &[], &[want]));
}

#[test]
fn case_reduce_max() {
    let nan = f64::NAN;
    assert_same(
        &run1(
            Builtin::ReduceMax,
            axes(&[1]),
            &[fa(F32, &[2, 3], &[1.0, 5.0, 2.0, 3.0, nan, 4.0])],
        ),
        &fa(F32, &[2], &[5.0, nan]),
    );
    assert_same(
        &run1(
            Builtin::ReduceMax,
            axes(&[0]),
            &[HostArray::zeros(sh(&[0]), F64)],
        ),
        &fa(F64, &[], &[f64::NEG_INFINITY]),
    );
    assert_same(
        &run1(
            Builtin::ReduceMax,
            axes(&[0]),
            &[HostArray::zeros(sh(&[0]), I8)],
        ),
        &ia(I8, &[], &[-128]),
    );
    assert_same(
        &run1(
            Builtin::ReduceMax,
            axes(&[0]),
            &[HostArray::from_u64(sh(&[3]), U64, vec![3, 1 << 63, 7]).unwrap()],
        ),
        &HostArray::from_u64(sh(&[]), U64, vec![1 << 63]).unwrap(),
    );
    assert_same(
        &run1(
            Builtin::ReduceMax,
            axes(&[1]),
            &[ba(&[2, 2], &[false, true, false, false])],
        ),
        &ba(&[2], &[true, false]),
    );
}

#[test]
fn case_reduce_min() {
    assert_same(
        &run1(
            Builtin::ReduceMin,
            axes(&[0]),
            &[ia(I32, &[2, 2], &[4, -1, 2, 3])],
        ),
        &ia(I32, &[2], &[2, -1]),
    );
    assert_same(
        &run1(
            Builtin::ReduceMin,
            axes(&[0]),
            &[HostArray::zeros(sh(&[0, 2]), U32)],
        ),
        &ia(U32, &[2], &[u32::MAX as i64, u32::MAX as i64]),
    );
    assert_same(
        &run1(
            Builtin::ReduceMin,
            axes(&[0]),
            &[HostArray::zeros(sh(&[0]), F32)],
        ),
        &fa(F32, &[], &[f64::INFINITY]),
    );
    assert_same(
        &run1(Builtin::ReduceMin, axes(&[0]), &[ba(&[0], &[])]),
        &ba(&[], &[true]),
    );
}

#[test]
fn case_reduce_prod() {
    assert_same(
        &run1(
            Builtin::ReduceProd,
            axes(&[1]),
            &[fa(F64, &[2, 2], &[2.0, 3.0, -1.0, 0.5])],
        ),
        &fa(F64, &[2], &[6.0, -0.5]),
    );
    assert_same(
        &run1(
            Builtin::ReduceProd,
            axes(&[0]),
            &[HostArray::zeros(sh(&[0]), I32)],
        ),
        &ia(I32, &[], &[1]),
    );
    // 16 * 16 wraps to 0 in u8.
    assert_same(
        &run1(Builtin::ReduceProd, axes(&[0]), &[ia(U8, &[2], &[16, 16])]),
        &ia(U8, &[], &[0]),
    );
}

fn argp(axis: i64, index_dtype: DType) -> Params {
    params(vec![
        ("axes", ints(&[axis])),
        ("index_dtype", Param::DType(index_dtype)),
    ])
}

#[test]
fn case_logical_reductions() {
    let x = ia(I8, &[2, 3], &[0b0110, -1, 0b0011, 0b0101, 0b0100, -128]);
    let reduce =
        |p: Builtin, axes_: &[i64], x: &HostArray| run1(p, axes(axes_), std::slice::from_ref(x));
    assert_same(
        &reduce(Builtin::ReduceAnd, &[1], &x),
        &ia(I8, &[2], &[0b0010, 0]),
    );
    assert_same(
        &reduce(Builtin::ReduceOr, &[0], &x),
        &ia(I8, &[3], &[0b0111, -1, -125]),
    );
    assert_same(
        &reduce(Builtin::ReduceXor, &[0, 1], &x),
        &ia(I8, &[], &[0b0110 ^ -1 ^ 0b0011 ^ 0b0101 ^ 0b0100 ^ -128]),
    );
    // No axes: the operand itself.
    assert_same(&reduce(Builtin::ReduceXor, &[], &x), &x);
    // Unsigned dtypes: and's identity is all ones of the width (u64 as its pattern).
    for (d, ones) in [(U8, 255), (U32, u32::MAX as i64), (U64, -1)] {
        let empty = HostArray::zeros(sh(&[0, 2]), d);
        assert_same(
            &reduce(Builtin::ReduceAnd, &[0], &empty),
            &ia(d, &[2], &[ones; 2]),
        );
        assert_same(
            &reduce(Builtin::ReduceOr, &[0], &empty),
            &ia(d, &[2], &[0; 2]),
        );
        assert_same(
            &reduce(Builtin::ReduceXor, &[0], &empty),
            &ia(d, &[2], &[0; 2]),
        );
    }
    let u = HostArray::from_u64(sh(&[3]), U64, vec![1 << 63, 3, 1 << 63 | 1]).unwrap();
    assert_same(
        &reduce(Builtin::ReduceXor, &[0], &u),
        &HostArray::from_u64(sh(&[]), U64, vec![2]).unwrap(),
    );
    // Booleans: all, any and parity; empty reductions give true, false, false.
    let b = ba(&[2, 3], &[true, true, false, true, true, true]);
    assert_same(
        &reduce(Builtin::ReduceAnd, &[1], &b),
        &ba(&[2], &[false, true]),
    );
    assert_same(
        &reduce(Builtin::ReduceOr, &[0], &b),
        &ba(&[3], &[true, true, true]),
    );
    assert_same(
        &reduce(Builtin::ReduceXor, &[1], &b),
        &ba(&[2], &[false, true]),
    );
    let empty = ba(&[0], &[]);
    assert_same(&reduce(Builtin::ReduceAnd, &[0], &empty), &ba(&[], &[true]));
    assert_same(&reduce(Builtin::ReduceOr, &[0], &empty), &ba(&[], &[false]));
    assert_same(
        &reduce(Builtin::ReduceXor, &[0], &empty),
        &ba(&[], &[false]),
    );
}

/// Bit patterns of `nextafter` and `reduce_precision` computed by JAX 0.10.2 on CPU (the
/// generating script heads the file).
const FLOAT_BITS: &str = include_str!("eval_tables/float_bits.txt");

/// The lines of [`FLOAT_BITS`] whose words start with `head`, as the rest of their
/// words (hex patterns), with the dtype named by the line's second word.
fn float_bits_lines<'a>(
    head: &'a str,
) -> impl Iterator<Item = (DType, Vec<&'a str>, Vec<u64>)> + 'a {
    FLOAT_BITS
        .lines()
        .filter(move |l| l.split_whitespace().next() == Some(head))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let dtype = match words[1] {
                "F16" => F16,
                "BF16" => BF16,
                "F32" => F32,
                _ => F64,
            };
            let (labels, hex): (Vec<&str>, Vec<&str>) = (
                words[2..]
                    .iter()
                    .take_while(|w| !is_pattern(w))
                    .copied()
                    .collect(),
                words[2..]
                    .iter()
                    .skip_while(|w| !is_pattern(w))
                    .copied()
                    .collect(),
            );
            let bits = hex
                .iter()
                .map(|h| u64::from_str_radix(h, 16).unwrap())
                .collect();
            (dtype, labels, bits)
        })
}

/// A hex pattern of the table (labels are words like `vals`, `out`, `in` or small
/// decimal numbers).
fn is_pattern(word: &str) -> bool {
    word.len() >= 4 && word.chars().all(|c| c.is_ascii_hexdigit())
}

/// The unsigned dtype of a float dtype's width.
fn bits_dtype(d: DType) -> DType {
    match d {
        F64 => U64,
        F32 => U32,
        _ => DType::U16,
    }
}

/// Runs `prim[p]` on float operands of `dtype` given as bit patterns and returns the
/// result's patterns (bitcasts in and out, in the evaluated jaxpr).
fn on_bits(prim: Builtin, p: Params, dtype: DType, args: &[Vec<u64>]) -> Vec<u64> {
    let u = bits_dtype(dtype);
    let mut b = JaxprBuilder::new();
    let cast = |to: DType| params(vec![("new_dtype", Param::DType(to))]);
    let ins: Vec<Atom> = args
        .iter()
        .map(|a| {
            let v = invar(&mut b, av(u, &[a.len() as i64]));
            eqn1(&mut b, Builtin::BitcastConvertType, vec![v], cast(dtype))
        })
        .collect();
    let out = eqn1(&mut b, prim, ins, p);
    let out = eqn1(&mut b, Builtin::BitcastConvertType, vec![out], cast(u));
    let j = b.build(vec![out]).unwrap();
    let hosts: Vec<HostArray> = args
        .iter()
        .map(|a| HostArray::from_u64(sh(&[a.len() as i64]), u, a.clone()).unwrap())
        .collect();
    let got = eval_jaxpr(&j, &[], &hosts).unwrap_or_else(|e| panic!("{}: {e}", prim.name()));
    let width = 8 * u.size_bytes() as u32;
    let keep = if width == 64 {
        u64::MAX
    } else {
        (1 << width) - 1
    };
    got[0]
        .as_i64()
        .unwrap()
        .iter()
        .map(|&v| v as u64 & keep)
        .collect()
}

#[test]
fn case_nextafter() {
    // JAX's values over every pair of zeros, subnormals, normals, extremes, infinities
    // and NaN: XLA flushes f32/f64/bf16 subnormals to zero when it compares, f16 not.
    let lines: Vec<_> = float_bits_lines("NEXTAFTER").collect();
    assert_eq!(lines.len(), 8, "two lines per float dtype");
    for pair in lines.chunks(2) {
        let (dtype, vals, want) = (pair[0].0, &pair[0].2, &pair[1].2);
        let xs: Vec<u64> = vals
            .iter()
            .flat_map(|&v| std::iter::repeat_n(v, vals.len()))
            .collect();
        let ys: Vec<u64> = (0..vals.len()).flat_map(|_| vals.iter().copied()).collect();
        let got = on_bits(Builtin::Nextafter, none(), dtype, &[xs.clone(), ys.clone()]);
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert_eq!(
                g, w,
                "nextafter({:#x}, {:#x}) in {dtype}: {g:#x}, JAX's {w:#x}",
                xs[i], ys[i]
            );
        }
    }
    // A scalar broadcast against a vector, in f64 values.
    let got = bin(
        Builtin::Nextafter,
        fa(F64, &[3], &[1.0, 0.0, -2.0]),
        fa(F64, &[], &[0.5]),
    );
    let want = [
        1.0 - f64::EPSILON / 2.0,
        f64::from_bits(1),
        -2.0 + f64::EPSILON,
    ];
    assert_same(&got, &fa(F64, &[3], &want));
}

#[test]
fn case_reduce_precision() {
    // JAX's values on zeros, infinities, f16 and bf16 extremes, subnormals and random
    // patterns, to a few (exponent, mantissa) formats, wider ones included.
    let mut inputs: Option<(DType, Vec<u64>)> = None;
    let mut checked = 0;
    for (dtype, labels, bits) in float_bits_lines("RP") {
        if labels == ["in"] {
            inputs = Some((dtype, bits));
            continue;
        }
        let (in_dtype, xs) = inputs.as_ref().expect("an RP in line first");
        assert_eq!(*in_dtype, dtype);
        let e: i64 = labels[0].parse().unwrap();
        let m: i64 = labels[1].parse().unwrap();
        let p = params(vec![
            ("exponent_bits", Param::Int(e)),
            ("mantissa_bits", Param::Int(m)),
        ]);
        let got = on_bits(Builtin::ReducePrecision, p, dtype, std::slice::from_ref(xs));
        for (i, (&g, &w)) in got.iter().zip(&bits).enumerate() {
            assert_eq!(
                g, w,
                "reduce_precision({:#x}, {e}, {m}) in {dtype}: {g:#x}, JAX's {w:#x}",
                xs[i]
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 24, "six formats for each of four dtypes");
    // NaN stays NaN, even with no mantissa bits left (XLA keeps it; bf16's is quieted).
    let rp = |e: i64, m: i64| {
        params(vec![
            ("exponent_bits", Param::Int(e)),
            ("mantissa_bits", Param::Int(m)),
        ])
    };
    // (Quiet NaNs: the evaluator's f64 storage quiets signalling ones.)
    let nans = vec![0x7fc0_0001, 0xffc0_0100, 0x7fc0_0000];
    let got = on_bits(
        Builtin::ReducePrecision,
        rp(2, 0),
        F32,
        std::slice::from_ref(&nans),
    );
    assert_eq!(got, nans);
    let got = on_bits(
        Builtin::ReducePrecision,
        rp(5, 3),
        BF16,
        &[vec![0xffe1, 0x7fc1]],
    );
    assert_eq!(got, [0xffc0, 0x7fc0]);
    // (A format holding f32's: XLA drops the operation, the NaN is kept.)
    let got = on_bits(
        Builtin::ReducePrecision,
        rp(8, 23),
        BF16,
        &[vec![0xffe1, 0x7fc1]],
    );
    assert_eq!(got, [0xffe1, 0x7fc1]);
    let got = on_bits(
        Builtin::ReducePrecision,
        rp(5, 0),
        F16,
        &[vec![0xfe01, 0x7e10]],
    );
    assert_eq!(got, [0xfe01, 0x7e10]);
}

#[test]
fn case_argmax() {
    let x = fa(F32, &[2, 3], &[1.0, 5.0, 5.0, 7.0, 2.0, 7.0]);
    // The first index of the maximum.
    assert_same(
        &run1(Builtin::Argmax, argp(1, I32), std::slice::from_ref(&x)),
        &ia(I32, &[2], &[1, 0]),
    );
    assert_same(
        &run1(Builtin::Argmax, argp(0, I8), &[x]),
        &ia(I8, &[3], &[1, 0, 1]),
    );
    // NaN counts as the maximum; the first NaN wins.
    let nan = f64::NAN;
    assert_same(
        &run1(
            Builtin::Argmax,
            argp(0, I32),
            &[fa(F64, &[4], &[1.0, nan, 5.0, nan])],
        ),
        &ia(I32, &[], &[1]),
    );
    assert_same(
        &run1(
            Builtin::Argmax,
            argp(0, I32),
            &[HostArray::from_u64(sh(&[3]), U64, vec![5, u64::MAX, 7]).unwrap()],
        ),
        &ia(I32, &[], &[1]),
    );
}

#[test]
fn case_argmin() {
    assert_same(
        &run1(Builtin::Argmin, argp(0, I32), &[ia(I32, &[3], &[3, 1, 1])]),
        &ia(I32, &[], &[1]),
    );
    let nan = f64::NAN;
    assert_same(
        &run1(
            Builtin::Argmin,
            argp(0, I64),
            &[fa(F32, &[4], &[1.0, nan, 0.0, nan])],
        ),
        &ia(I64, &[], &[1]),
    );
    assert_same(
        &run1(
            Builtin::Argmin,
            argp(1, U8),
            &[ia(I8, &[2, 2], &[4, -3, -8, 0])],
        ),
        &ia(U8, &[2], &[1, 0]),
    );
}

// ----- Shapes -----

/// Row-major position of a multi-index.
fn pos(dims: &[i64], idx: &[i64]) -> usize {
    let mut p = 0i64;
    for (d, i) in dims.iter().zip(idx) {
        p = p * d + i;
    }
    p as usize
}

#[test]
fn case_broadcast_in_dim() {
    let bp = |shape: &[i64], bd: &[i64]| {
        params(vec![
            ("shape", ints(shape)),
            ("broadcast_dimensions", ints(bd)),
            ("sharding", Param::None),
        ])
    };
    assert_same(
        &run1(
            Builtin::BroadcastInDim,
            bp(&[2, 3], &[1]),
            &[ia(I32, &[3], &[1, 2, 3])],
        ),
        &ia(I32, &[2, 3], &[1, 2, 3, 1, 2, 3]),
    );
    assert_same(
        &run1(
            Builtin::BroadcastInDim,
            bp(&[2, 3], &[0]),
            &[ia(I32, &[2], &[1, 2])],
        ),
        &ia(I32, &[2, 3], &[1, 1, 1, 2, 2, 2]),
    );
    // A size-1 dimension broadcasts.
    assert_same(
        &run1(
            Builtin::BroadcastInDim,
            bp(&[3, 2], &[0, 1]),
            &[fa(F32, &[3, 1], &[1.0, 2.0, 3.0])],
        ),
        &fa(F32, &[3, 2], &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0]),
    );
    assert_same(
        &run1(
            Builtin::BroadcastInDim,
            bp(&[2, 2], &[]),
            &[ba(&[], &[true])],
        ),
        &ba(&[2, 2], &[true; 4]),
    );
}

#[test]
fn case_reshape() {
    let x = ia(I32, &[2, 3], &[0, 1, 2, 3, 4, 5]);
    let rp = |sizes: &[i64], dims: Param| {
        params(vec![
            ("new_sizes", ints(sizes)),
            ("dimensions", dims),
            ("sharding", Param::None),
        ])
    };
    assert_same(
        &run1(
            Builtin::Reshape,
            rp(&[3, 2], Param::None),
            std::slice::from_ref(&x),
        ),
        &ia(I32, &[3, 2], &[0, 1, 2, 3, 4, 5]),
    );
    assert_same(
        &run1(
            Builtin::Reshape,
            rp(&[6], Param::None),
            std::slice::from_ref(&x),
        ),
        &ia(I32, &[6], &[0, 1, 2, 3, 4, 5]),
    );
    // With `dimensions`, the operand is transposed first (checked against JAX:
    // lax.reshape(arange(6).reshape(2, 3), (3, 2), dimensions=(1, 0)) = [[0,3],[1,4],[2,5]]).
    assert_same(
        &run1(Builtin::Reshape, rp(&[3, 2], ints(&[1, 0])), &[x]),
        &ia(I32, &[3, 2], &[0, 3, 1, 4, 2, 5]),
    );
}

#[test]
fn case_transpose() {
    let dims = [2i64, 3, 4];
    let data: Vec<i64> = (0..24).collect();
    let x = ia(I32, &dims, &data);
    let perm = [2i64, 0, 1];
    let out_dims = [4i64, 2, 3];
    let mut want = vec![0i64; 24];
    for a in 0..4 {
        for b in 0..2 {
            for c in 0..3 {
                // out[a, b, c] = x[b, c, a]
                want[pos(&out_dims, &[a, b, c])] = data[pos(&dims, &[b, c, a])];
            }
        }
    }
    assert_same(
        &run1(
            Builtin::Transpose,
            params(vec![("permutation", ints(&perm))]),
            &[x],
        ),
        &ia(I32, &out_dims, &want),
    );
}

#[test]
fn case_squeeze() {
    assert_same(
        &run1(
            Builtin::Squeeze,
            params(vec![("dimensions", ints(&[0, 2]))]),
            &[fa(F32, &[1, 3, 1], &[1.0, 2.0, 3.0])],
        ),
        &fa(F32, &[3], &[1.0, 2.0, 3.0]),
    );
}

#[test]
fn case_expand_dims() {
    assert_same(
        &run1(
            Builtin::ExpandDims,
            params(vec![("dimensions", ints(&[0, 2]))]),
            &[ia(I8, &[3], &[1, 2, 3])],
        ),
        &ia(I8, &[1, 3, 1], &[1, 2, 3]),
    );
}

#[test]
fn case_concatenate() {
    let a = ia(I32, &[2, 1], &[1, 2]);
    let b = ia(I32, &[2, 2], &[3, 4, 5, 6]);
    assert_same(
        &run1(
            Builtin::Concatenate,
            params(vec![("dimension", Param::Int(1))]),
            &[a.clone(), b],
        ),
        &ia(I32, &[2, 3], &[1, 3, 4, 2, 5, 6]),
    );
    assert_same(
        &run1(
            Builtin::Concatenate,
            params(vec![("dimension", Param::Int(0))]),
            &[a.clone(), a],
        ),
        &ia(I32, &[4, 1], &[1, 2, 1, 2]),
    );
}

#[test]
fn case_stack() {
    let x = ia(I32, &[2, 2], &[0, 1, 2, 3]);
    let y = ia(I32, &[2, 2], &[4, 5, 6, 7]);
    let along = |axis: i64| params(vec![("axis", Param::Int(axis))]);
    let both = [x.clone(), y.clone()];
    let s0 = run1(Builtin::Stack, along(0), &both);
    assert_same(&s0, &ia(I32, &[2, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7]));
    let s1 = run1(Builtin::Stack, along(1), &both);
    assert_same(&s1, &ia(I32, &[2, 2, 2], &[0, 1, 4, 5, 2, 3, 6, 7]));
    let s2 = run1(Builtin::Stack, along(2), &both);
    assert_same(&s2, &ia(I32, &[2, 2, 2], &[0, 4, 1, 5, 2, 6, 3, 7]));
    // Scalars make a vector; one operand gains an axis of size 1.
    let v = run1(
        Builtin::Stack,
        along(0),
        &[fa(F32, &[], &[1.5]), fa(F32, &[], &[2.5])],
    );
    assert_same(&v, &fa(F32, &[2], &[1.5, 2.5]));
    assert_same(
        &run1(Builtin::Stack, along(1), &[x]),
        &ia(I32, &[2, 1, 2], &[0, 1, 2, 3]),
    );
}

#[test]
fn case_unstack() {
    let x = ia(I32, &[2, 3], &[0, 1, 2, 3, 4, 5]);
    let along = |axis: i64| params(vec![("axis", Param::Int(axis))]);
    let rows = run(Builtin::Unstack, along(0), std::slice::from_ref(&x));
    assert_eq!(rows.len(), 2);
    assert_same(&rows[1], &ia(I32, &[3], &[3, 4, 5]));
    let cols = run(Builtin::Unstack, along(1), std::slice::from_ref(&x));
    assert_eq!(cols.len(), 3);
    assert_same(&cols[0], &ia(I32, &[2], &[0, 3]));
    assert_same(&cols[2], &ia(I32, &[2], &[2, 5]));
    // The inverse of stack.
    let back = run1(Builtin::Stack, along(1), &cols);
    assert_same(&back, &x);
    assert!(run(Builtin::Unstack, along(0), &[ia(I32, &[0, 2], &[])]).is_empty());
}

#[test]
fn case_tile() {
    let x = ia(I32, &[2, 2], &[1, 2, 3, 4]);
    let reps = |r: &[i64]| params(vec![("reps", ints(r))]);
    let t = run1(Builtin::Tile, reps(&[2, 3]), std::slice::from_ref(&x));
    #[rustfmt::skip]
    let want = [
        1, 2, 1, 2, 1, 2,
        3, 4, 3, 4, 3, 4,
        1, 2, 1, 2, 1, 2,
        3, 4, 3, 4, 3, 4,
    ];
    assert_same(&t, &ia(I32, &[4, 6], &want));
    let none = run1(Builtin::Tile, reps(&[0, 1]), std::slice::from_ref(&x));
    assert_same(&none, &ia(I32, &[0, 2], &[]));
    let s = run1(Builtin::Tile, reps(&[]), &[fa(F32, &[], &[2.0])]);
    assert_same(&s, &fa(F32, &[], &[2.0]));
}

#[test]
fn case_mulhi() {
    // Against the double-width product in i128/u128, over values near every edge.
    type Reference = fn(i64, i64) -> i64;
    macro_rules! reference {
        ($t:ty, $wide:ty, $bits:expr) => {
            |x: i64, y: i64| ((((x as $t) as $wide) * ((y as $t) as $wide)) >> $bits) as $t as i64
        };
    }
    let types: [(DType, Reference); 8] = [
        (I8, reference!(i8, i128, 8)),
        (I16, reference!(i16, i128, 16)),
        (I32, reference!(i32, i128, 32)),
        (I64, reference!(i64, i128, 64)),
        (U8, reference!(u8, u128, 8)),
        (DType::U16, reference!(u16, u128, 16)),
        (U32, reference!(u32, u128, 32)),
        (U64, reference!(u64, u128, 64)),
    ];
    for (dt, reference) in types {
        let bits = dt.size_bytes() as i64 * 8;
        let wrap = |v: i64| ia(dt, &[1], &[v]).as_i64().unwrap()[0];
        let values: Vec<i64> = [
            0,
            1,
            -1,
            2,
            -2,
            3,
            100,
            -77,
            i64::MIN,
            i64::MAX,
            i64::MIN >> (64 - bits),
            !(i64::MIN >> (64 - bits)),
            0x5a5a_5a5a_5a5a_5a5a,
        ]
        .iter()
        .map(|&v| wrap(v))
        .collect();
        let xs: Vec<i64> = values
            .iter()
            .flat_map(|&v| std::iter::repeat_n(v, values.len()))
            .collect();
        let ys: Vec<i64> = (0..values.len()).flat_map(|_| values.clone()).collect();
        let n = xs.len() as i64;
        let got = bin(Builtin::Mulhi, ia(dt, &[n], &xs), ia(dt, &[n], &ys));
        let want: Vec<i64> = xs
            .iter()
            .zip(&ys)
            .map(|(&x, &y)| wrap(reference(x, y)))
            .collect();
        assert_same(&got, &ia(dt, &[n], &want));
    }
}

#[test]
fn case_optimization_barrier() {
    let x = fa(F32, &[2], &[1.0, -2.0]);
    let k = ia(I32, &[], &[7]);
    let outs = run(
        Builtin::OptimizationBarrier,
        Params::empty(),
        &[x.clone(), k.clone()],
    );
    assert_eq!(outs.len(), 2);
    assert_same(&outs[0], &x);
    assert_same(&outs[1], &k);
    assert!(run(Builtin::OptimizationBarrier, Params::empty(), &[]).is_empty());
}

#[test]
fn case_split() {
    let x = ia(I32, &[2, 5], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let p = params(vec![("sizes", ints(&[2, 0, 3])), ("axis", Param::Int(1))]);
    let outs = run(Builtin::Split, p, std::slice::from_ref(&x));
    assert_eq!(outs.len(), 3);
    assert_same(&outs[0], &ia(I32, &[2, 2], &[0, 1, 5, 6]));
    assert_same(&outs[1], &ia(I32, &[2, 0], &[]));
    assert_same(&outs[2], &ia(I32, &[2, 3], &[2, 3, 4, 7, 8, 9]));
    let p = params(vec![("sizes", ints(&[1, 1])), ("axis", Param::Int(0))]);
    let outs = run(Builtin::Split, p, &[x]);
    assert_same(&outs[1], &ia(I32, &[1, 5], &[5, 6, 7, 8, 9]));
}

#[test]
fn case_slice() {
    let data: Vec<i64> = (0..20).collect();
    let x = ia(I32, &[4, 5], &data);
    let p = params(vec![
        ("start_indices", ints(&[1, 0])),
        ("limit_indices", ints(&[4, 5])),
        ("strides", ints(&[2, 2])),
    ]);
    // Rows 1, 3; columns 0, 2, 4.
    assert_same(
        &run1(Builtin::Slice, p, std::slice::from_ref(&x)),
        &ia(I32, &[2, 3], &[5, 7, 9, 15, 17, 19]),
    );
    let p = params(vec![
        ("start_indices", ints(&[2, 1])),
        ("limit_indices", ints(&[3, 3])),
        ("strides", Param::None),
    ]);
    assert_same(&run1(Builtin::Slice, p, &[x]), &ia(I32, &[1, 2], &[11, 12]));
}

#[test]
fn case_dynamic_slice() {
    let data: Vec<i64> = (0..10).collect();
    let x = ia(I64, &[10], &data);
    let p = || params(vec![("slice_sizes", ints(&[4]))]);
    let at = |i: i64| ia(I32, &[], &[i]);
    assert_same(
        &run1(Builtin::DynamicSlice, p(), &[x.clone(), at(3)]),
        &ia(I64, &[4], &[3, 4, 5, 6]),
    );
    // Start indices clamp to [0, dim - size] (XLA), no wrapping of negative indices.
    assert_same(
        &run1(Builtin::DynamicSlice, p(), &[x.clone(), at(-3)]),
        &ia(I64, &[4], &[0, 1, 2, 3]),
    );
    assert_same(
        &run1(Builtin::DynamicSlice, p(), &[x, at(9)]),
        &ia(I64, &[4], &[6, 7, 8, 9]),
    );
    // 2-D, with u64 indices, one of them huge (clamped to the end).
    let x = ia(I32, &[3, 3], &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
    let p = params(vec![("slice_sizes", ints(&[2, 2]))]);
    let big = HostArray::from_u64(sh(&[]), U64, vec![u64::MAX]).unwrap();
    assert_same(
        &run1(
            Builtin::DynamicSlice,
            p,
            &[x, HostArray::from_u64(sh(&[]), U64, vec![0]).unwrap(), big],
        ),
        &ia(I32, &[2, 2], &[1, 2, 4, 5]),
    );
}

fn gather_params(
    offset: &[i64],
    collapsed: &[i64],
    map: &[i64],
    sizes: &[i64],
    mode: GatherScatterMode,
    fill: Param,
) -> Params {
    params(vec![
        (
            "dimension_numbers",
            Param::GatherDims(Arc::new(GatherDimensionNumbers {
                offset_dims: offset.to_vec(),
                collapsed_slice_dims: collapsed.to_vec(),
                start_index_map: map.to_vec(),
                ..Default::default()
            })),
        ),
        ("slice_sizes", ints(sizes)),
        ("mode", Param::Mode(mode)),
        ("fill_value", fill),
    ])
}

#[test]
fn case_gather() {
    use GatherScatterMode::{Clip, FillOrDrop, PromiseInBounds};
    // x[i] on rows of a 3x2 matrix; row 3 and row -1 are out of bounds.
    let x = ia(I32, &[3, 2], &[0, 1, 10, 11, 20, 21]);
    let rows = ia(I32, &[4, 1], &[2, 0, 3, -1]);
    let p = |m| gather_params(&[1], &[0], &[0], &[1, 2], m, Param::None);
    // CLIP and PROMISE_IN_BOUNDS clamp the start (XLA).
    let clamped = ia(I32, &[4, 2], &[20, 21, 0, 1, 20, 21, 0, 1]);
    assert_same(
        &run1(Builtin::Gather, p(Clip), &[x.clone(), rows.clone()]),
        &clamped,
    );
    assert_same(
        &run1(
            Builtin::Gather,
            p(PromiseInBounds),
            &[x.clone(), rows.clone()],
        ),
        &clamped,
    );
    // FILL_OR_DROP: JAX's default fill for int32 is its minimum.
    let m = i64::from(i32::MIN);
    assert_same(
        &run1(Builtin::Gather, p(FillOrDrop), &[x.clone(), rows.clone()]),
        &ia(I32, &[4, 2], &[20, 21, 0, 1, m, m, m, m]),
    );
    // A window of 2 rows starting at row 2 is out of bounds as a whole: filled (given
    // fill value), or clamped to start at row 1.
    let starts = ia(I32, &[2, 1], &[0, 2]);
    let pw = |mode| gather_params(&[1, 2], &[], &[0], &[2, 2], mode, Param::Int(-7));
    assert_same(
        &run1(
            Builtin::Gather,
            pw(FillOrDrop),
            &[x.clone(), starts.clone()],
        ),
        &ia(I32, &[2, 2, 2], &[0, 1, 10, 11, -7, -7, -7, -7]),
    );
    assert_same(
        &run1(Builtin::Gather, pw(Clip), &[x.clone(), starts]),
        &ia(I32, &[2, 2, 2], &[0, 1, 10, 11, 10, 11, 20, 21]),
    );
    // Points (both dims collapsed), the index vector mapping (col, row); float NaN fill.
    let xf = fa(F32, &[3, 2], &[0.0, 1.0, 10.0, 11.0, 20.0, 21.0]);
    let pts = ia(I64, &[3, 2], &[1, 2, 0, 0, 2, 0]);
    let pp = gather_params(&[], &[0, 1], &[1, 0], &[1, 1], FillOrDrop, Param::None);
    let got = run1(Builtin::Gather, pp, &[xf.clone(), pts]);
    let v = floats(&got);
    assert_eq!((v[0], v[1]), (21.0, 0.0));
    assert!(v[2].is_nan());
    // Batching dims (take_along_axis): row b takes column idx[b, j].
    let pb = params(vec![
        (
            "dimension_numbers",
            Param::GatherDims(Arc::new(GatherDimensionNumbers {
                offset_dims: vec![],
                collapsed_slice_dims: vec![1],
                start_index_map: vec![1],
                operand_batching_dims: vec![0],
                start_indices_batching_dims: vec![0],
            })),
        ),
        ("slice_sizes", ints(&[1, 1])),
        ("mode", Param::Mode(Clip)),
    ]);
    let idx = ia(U8, &[3, 2, 1], &[1, 0, 0, 0, 1, 1]);
    assert_same(
        &run1(Builtin::Gather, pb, &[xf, idx]),
        &fa(F32, &[3, 2], &[1.0, 0.0, 10.0, 10.0, 21.0, 21.0]),
    );
    // Bool operand, default fill True; empty indices give an empty result.
    let xb = ba(&[2, 2], &[false, false, true, false]);
    let pbool = gather_params(&[1], &[0], &[0], &[1, 2], FillOrDrop, Param::None);
    assert_same(
        &run1(
            Builtin::Gather,
            pbool.clone(),
            &[xb.clone(), ia(I32, &[2, 1], &[1, 5])],
        ),
        &ba(&[2, 2], &[true, false, true, true]),
    );
    assert_same(
        &run1(Builtin::Gather, pbool, &[xb, ia(I32, &[0, 1], &[])]),
        &ba(&[0, 2], &[]),
    );
}

fn scatter_params(
    window: &[i64],
    inserted: &[i64],
    map: &[i64],
    mode: GatherScatterMode,
) -> Params {
    params(vec![
        (
            "dimension_numbers",
            Param::ScatterDims(Arc::new(ScatterDimensionNumbers {
                update_window_dims: window.to_vec(),
                inserted_window_dims: inserted.to_vec(),
                scatter_dims_to_operand_dims: map.to_vec(),
                ..Default::default()
            })),
        ),
        ("mode", Param::Mode(mode)),
        ("update_consts", ints(&[])),
    ])
}

#[test]
fn case_scatter() {
    use GatherScatterMode::{Clip, FillOrDrop, PromiseInBounds};
    let x = ia(I32, &[5], &[1, 2, 3, 4, 5]);
    // Element updates at 1, 1 (a duplicate), 4, 7 (out of bounds) and -1.
    let at = ia(I32, &[5, 1], &[1, 1, 4, 7, -1]);
    let u = ia(I32, &[5], &[10, 20, 30, 40, 50]);
    let p = |mode| scatter_params(&[], &[0], &[0], mode);
    let run_s = |prim, mode| run1(prim, p(mode), &[x.clone(), at.clone(), u.clone()]);
    // Out-of-bounds updates are dropped (FILL_OR_DROP, and XLA for PROMISE_IN_BOUNDS);
    // duplicates combine.
    for mode in [FillOrDrop, PromiseInBounds] {
        assert_same(
            &run_s(Builtin::ScatterAdd, mode),
            &ia(I32, &[5], &[1, 32, 3, 4, 35]),
        );
        assert_same(
            &run_s(Builtin::ScatterSub, mode),
            &ia(I32, &[5], &[1, -28, 3, 4, -25]),
        );
        assert_same(
            &run_s(Builtin::ScatterMul, mode),
            &ia(I32, &[5], &[1, 400, 3, 4, 150]),
        );
        assert_same(
            &run_s(Builtin::ScatterMin, mode),
            &ia(I32, &[5], &[1, 2, 3, 4, 5]),
        );
        assert_same(
            &run_s(Builtin::ScatterMax, mode),
            &ia(I32, &[5], &[1, 20, 3, 4, 30]),
        );
    }
    // CLIP: 7 lands on 4 and -1 on 0.
    assert_same(
        &run_s(Builtin::ScatterAdd, Clip),
        &ia(I32, &[5], &[51, 32, 3, 4, 75]),
    );
    // `scatter` with unique indices.
    let uniq = ia(I32, &[2, 1], &[3, 0]);
    assert_same(
        &run1(
            Builtin::Scatter,
            p(FillOrDrop),
            &[x.clone(), uniq, ia(I32, &[2], &[-3, -9])],
        ),
        &ia(I32, &[5], &[-9, 2, 3, -3, 5]),
    );
    // A window of 2 starting at 4 is dropped whole, or clamped to start at 3.
    let w = |mode| scatter_params(&[1], &[], &[0], mode);
    let starts = ia(I32, &[2, 1], &[0, 4]);
    let wu = ia(I32, &[2, 2], &[100, 200, 300, 400]);
    assert_same(
        &run1(
            Builtin::Scatter,
            w(FillOrDrop),
            &[x.clone(), starts.clone(), wu.clone()],
        ),
        &ia(I32, &[5], &[100, 200, 3, 4, 5]),
    );
    assert_same(
        &run1(Builtin::Scatter, w(Clip), &[x, starts, wu]),
        &ia(I32, &[5], &[100, 200, 3, 300, 400]),
    );
    // Floats (rounded to f32) and bools (min is and, max is or).
    let xf = fa(F32, &[2], &[1.0, 2.0]);
    let at2 = ia(U8, &[2, 1], &[0, 0]);
    assert_same(
        &run1(
            Builtin::ScatterAdd,
            p(FillOrDrop),
            &[xf.clone(), at2.clone(), fa(F32, &[2], &[0.1, 0.2])],
        ),
        &fa(F32, &[2], &[((1.0f32 + 0.1f32) + 0.2f32) as f64, 2.0]),
    );
    let xb = ba(&[2], &[true, false]);
    let ub = ba(&[2], &[false, true]);
    let at3 = ia(I32, &[2, 1], &[0, 1]);
    assert_same(
        &run1(
            Builtin::ScatterMin,
            p(Clip),
            &[xb.clone(), at3.clone(), ub.clone()],
        ),
        &ba(&[2], &[false, false]),
    );
    assert_same(
        &run1(Builtin::ScatterMax, p(Clip), &[xb, at3, ub]),
        &ba(&[2], &[true, true]),
    );
}

#[test]
fn case_rev() {
    let x = ia(I32, &[2, 3], &[0, 1, 2, 3, 4, 5]);
    let r = |dims: &[i64]| {
        run1(
            Builtin::Rev,
            params(vec![("dimensions", ints(dims))]),
            std::slice::from_ref(&x),
        )
    };
    assert_same(&r(&[1]), &ia(I32, &[2, 3], &[2, 1, 0, 5, 4, 3]));
    assert_same(&r(&[0]), &ia(I32, &[2, 3], &[3, 4, 5, 0, 1, 2]));
    assert_same(&r(&[0, 1]), &ia(I32, &[2, 3], &[5, 4, 3, 2, 1, 0]));
    assert_same(&r(&[]), &x);
}

#[test]
fn case_sort() {
    let sort = |dim: i64, keys: i64, args: &[HostArray]| {
        run(
            Builtin::Sort,
            params(vec![
                ("dimension", Param::Int(dim)),
                ("is_stable", Param::Bool(true)),
                ("num_keys", Param::Int(keys)),
            ]),
            args,
        )
    };
    // Floats: -0.0 ties with 0.0 (stable: their order kept), NaNs last, after +inf.
    let nan = f64::NAN;
    let x = fa(F32, &[6], &[nan, 0.0, -0.0, f64::INFINITY, -1.0, -nan]);
    let pos = ia(I32, &[6], &[0, 1, 2, 3, 4, 5]);
    let out = sort(0, 1, &[x, pos]);
    assert_same(&out[1], &ia(I32, &[6], &[4, 1, 2, 3, 0, 5]));
    assert_same(
        &out[0],
        &fa(F32, &[6], &[-1.0, 0.0, -0.0, f64::INFINITY, nan, nan]),
    );
    // Two keys lexicographically, along either dimension; unsigned 64-bit by their bits.
    let k1 = ia(I32, &[2, 3], &[1, 0, 1, 2, 2, 0]);
    let k2 = ia(U64, &[2, 3], &[5, 7, -1, 0, 1, 3]);
    let out = sort(1, 2, &[k1.clone(), k2.clone()]);
    assert_same(&out[0], &ia(I32, &[2, 3], &[0, 1, 1, 0, 2, 2]));
    assert_same(&out[1], &ia(U64, &[2, 3], &[7, 5, -1, 3, 0, 1]));
    let out = sort(0, 1, &[k1, k2]);
    assert_same(&out[0], &ia(I32, &[2, 3], &[1, 0, 0, 2, 2, 1]));
    assert_same(&out[1], &ia(U64, &[2, 3], &[5, 7, 3, 0, 1, -1]));
    // Bools, and an empty axis.
    let out = sort(0, 1, &[ba(&[3], &[true, false, true])]);
    assert_same(&out[0], &ba(&[3], &[false, true, true]));
    let empty = fa(F32, &[2, 0], &[]);
    assert_same(&sort(1, 1, std::slice::from_ref(&empty))[0], &empty);
}

#[test]
fn case_cholesky() {
    // The lower factor, the operand's upper triangle kept above it (LAPACK's potrf).
    let x = fa(F64, &[2, 2, 2], &[4.0, 7.0, 2.0, 5.0, 1.0, 2.0, 2.0, 1.0]);
    let out = run1(Builtin::Cholesky, none(), &[x]);
    let nan = f64::NAN;
    // The second matrix is not positive definite: all NaN.
    assert_same(
        &out,
        &fa(F64, &[2, 2, 2], &[2.0, 7.0, 1.0, 2.0, nan, nan, nan, nan]),
    );
    let empty = fa(F32, &[0, 0], &[]);
    assert_same(
        &run1(Builtin::Cholesky, none(), std::slice::from_ref(&empty)),
        &empty,
    );
}

#[test]
fn case_triangular_solve() {
    let solve = |flags: [bool; 4], a: &HostArray, b: &HostArray| {
        let [left_side, lower, transpose_a, unit_diagonal] = flags;
        let p = params(vec![
            ("left_side", Param::Bool(left_side)),
            ("lower", Param::Bool(lower)),
            ("transpose_a", Param::Bool(transpose_a)),
            ("conjugate_a", Param::Bool(false)),
            ("unit_diagonal", Param::Bool(unit_diagonal)),
        ]);
        run1(Builtin::TriangularSolve, p, &[a.clone(), b.clone()])
    };
    // The upper triangle (100) is never read when `lower`.
    let a = fa(F64, &[2, 2], &[2.0, 100.0, 1.0, 4.0]);
    let col = |x: f64, y: f64| fa(F64, &[2, 1], &[x, y]);
    assert_same(
        &solve([true, true, false, false], &a, &col(2.0, 9.0)),
        &col(1.0, 2.0),
    );
    // Aᵀ x = b with Aᵀ upper.
    assert_same(
        &solve([true, true, true, false], &a, &col(4.0, 8.0)),
        &col(1.0, 2.0),
    );
    // A unit diagonal: [[1, 0], [1, 1]].
    assert_same(
        &solve([true, true, false, true], &a, &col(2.0, 9.0)),
        &col(2.0, 7.0),
    );
    // x A = b (a row), and x Aᵀ = b.
    let row = |x: f64, y: f64| fa(F64, &[1, 2], &[x, y]);
    assert_same(
        &solve([false, true, false, false], &a, &row(2.0, 8.0)),
        &row(0.0, 2.0),
    );
    assert_same(
        &solve([false, true, true, false], &a, &row(2.0, 9.0)),
        &row(1.0, 2.0),
    );
    // Upper: the lower triangle (100) is never read.
    let u = fa(F64, &[2, 2], &[2.0, 1.0, 100.0, 4.0]);
    assert_same(
        &solve([true, false, false, false], &u, &col(4.0, 8.0)),
        &col(1.0, 2.0),
    );
}

#[test]
fn case_eigh() {
    let eigh = |lower: bool, x: &HostArray| {
        let p = params(vec![
            ("lower", Param::Bool(lower)),
            ("sort_eigenvalues", Param::Bool(true)),
            ("subset_by_index", Param::None),
            ("algorithm", Param::None),
        ]);
        run(Builtin::Eigh, p, std::slice::from_ref(x))
    };
    // [[2, 1], [1, 2]]: eigenvalues 1 and 3, eigenvectors (1, -1) and (1, 1) / sqrt 2
    // (up to sign); the other triangle (100) is never read.
    let x = fa(F64, &[1, 2, 2], &[2.0, 100.0, 1.0, 2.0]);
    let out = eigh(true, &x);
    assert_close(&out[1], &fa(F64, &[1, 2], &[1.0, 3.0]), 1e-12, 1e-12);
    let v = floats(&out[0]);
    let h = std::f64::consts::FRAC_1_SQRT_2;
    assert!(
        (v[0].abs() - h).abs() < 1e-12 && (v[2] + v[0]).abs() < 1e-12,
        "{v:?}"
    );
    assert!(
        (v[1].abs() - h).abs() < 1e-12 && (v[3] - v[1]).abs() < 1e-12,
        "{v:?}"
    );
    let upper = fa(F64, &[2, 2], &[5.0, 0.0, 100.0, -1.0]);
    assert_close(
        &eigh(false, &upper)[1],
        &fa(F64, &[2], &[-1.0, 5.0]),
        1e-12,
        1e-12,
    );
    // A 3x3 one: V diag(w) Vᵀ rebuilds it.
    let m = [4.0, 1.0, -2.0, 1.0, 3.0, 0.5, -2.0, 0.5, 1.0];
    let out = eigh(true, &fa(F64, &[3, 3], &m));
    let (v, w) = (floats(&out[0]), floats(&out[1]));
    assert!(w[0] <= w[1] && w[1] <= w[2]);
    for i in 0..3 {
        for j in 0..3 {
            let r: f64 = (0..3).map(|k| v[i * 3 + k] * w[k] * v[j * 3 + k]).sum();
            assert!((r - m[i * 3 + j]).abs() < 1e-10, "{i} {j}: {r}");
        }
    }
}

#[test]
fn case_svd() {
    let svd = |full: bool, uv: bool, x: &HostArray| {
        let p = params(vec![
            ("full_matrices", Param::Bool(full)),
            ("compute_uv", Param::Bool(uv)),
            ("subset_by_index", Param::None),
            ("algorithm", Param::None),
        ]);
        run(Builtin::Svd, p, std::slice::from_ref(x))
    };
    // Tall, wide and rank-deficient: descending values (NumPy's), u diag(s) vt rebuilds
    // the matrix, u and vt orthonormal (full ones completed).
    let cases: [(usize, usize, Vec<f64>, Vec<f64>); 3] = [
        (
            3,
            2,
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            vec![9.525518091565107, 0.5143005806586441],
        ),
        (
            2,
            3,
            vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0],
            vec![9.525518091565107, 0.5143005806586441],
        ),
        (2, 2, vec![1.0, 2.0, 2.0, 4.0], vec![5.0, 0.0]),
    ];
    for (m, n, a, s) in cases {
        let x = fa(F64, &[m as i64, n as i64], &a);
        let k = m.min(n);
        let values = svd(true, false, &x);
        assert_close(&values[0], &fa(F64, &[k as i64], &s), 1e-12, 1e-12);
        for full in [false, true] {
            let out = svd(full, true, &x);
            let (uc, vr) = if full { (m, n) } else { (k, k) };
            let (sv, u, vt) = (floats(&out[0]), floats(&out[1]), floats(&out[2]));
            for i in 0..m {
                for j in 0..n {
                    let r: f64 = (0..k).map(|l| u[i * uc + l] * sv[l] * vt[l * n + j]).sum();
                    assert!((r - a[i * n + j]).abs() < 1e-12, "{m}x{n} {i} {j}: {r}");
                }
            }
            for (mat, rows, cols, by_column) in [(u, m, uc, true), (vt, vr, n, false)] {
                let count = if by_column { cols } else { rows };
                for p in 0..count {
                    for q in 0..count {
                        let len = if by_column { rows } else { cols };
                        let d: f64 = (0..len)
                            .map(|i| {
                                if by_column {
                                    mat[i * cols + p] * mat[i * cols + q]
                                } else {
                                    mat[p * cols + i] * mat[q * cols + i]
                                }
                            })
                            .sum();
                        let want = if p == q { 1.0 } else { 0.0 };
                        assert!((d - want).abs() < 1e-12, "{m}x{n} full={full} {p} {q}: {d}");
                    }
                }
            }
        }
    }
    // Empty: no values, identity vectors.
    let out = svd(true, true, &fa(F32, &[0, 2], &[]));
    assert_close(&out[2], &fa(F32, &[2, 2], &[1.0, 0.0, 0.0, 1.0]), 0.0, 0.0);
}

#[test]
fn case_qr() {
    let qr = |full: bool, x: &HostArray| {
        let p = params(vec![
            ("full_matrices", Param::Bool(full)),
            ("pivoting", Param::Bool(false)),
            ("use_magma", Param::None),
        ]);
        run(Builtin::Qr, p, std::slice::from_ref(x))
    };
    // LAPACK's factors (NumPy's qr, mode 'complete'): r's diagonal negative here.
    let x = fa(F64, &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let q = [
        -0.16903085094570325,
        0.8970852271450607,
        0.4082482904638627,
        -0.50709255283711,
        0.27602622373694136,
        -0.8164965809277263,
        -0.8451542547285166,
        -0.34503277967117696,
        0.40824829046386313,
    ];
    let r = [
        -5.916079783099616,
        -7.437357441610946,
        0.0,
        0.828078671210825,
    ];
    let out = qr(true, &x);
    assert_close(&out[0], &fa(F64, &[3, 3], &q), 1e-12, 1e-12);
    let mut r_full = r.to_vec();
    r_full.extend([0.0, 0.0]);
    assert_close(&out[1], &fa(F64, &[3, 2], &r_full), 1e-12, 1e-12);
    let out = qr(false, &x);
    let q_thin: Vec<f64> = (0..3).flat_map(|i| [q[i * 3], q[i * 3 + 1]]).collect();
    assert_close(&out[0], &fa(F64, &[3, 2], &q_thin), 1e-12, 1e-12);
    assert_close(&out[1], &fa(F64, &[2, 2], &r), 1e-12, 1e-12);
    // A zero column below the diagonal: no reflection (q the identity).
    let wide = fa(F64, &[1, 2, 3], &[0.0, 2.0, 1.0, 0.0, 4.0, 3.0]);
    let out = qr(false, &wide);
    assert_close(
        &out[0],
        &fa(F64, &[1, 2, 2], &[1.0, 0.0, 0.0, 1.0]),
        0.0,
        0.0,
    );
    assert_close(&out[1], &wide, 0.0, 0.0);
    // Empty: the identity's columns and no r.
    let out = qr(true, &fa(F32, &[2, 0], &[]));
    assert_close(&out[0], &fa(F32, &[2, 2], &[1.0, 0.0, 0.0, 1.0]), 0.0, 0.0);
}

#[test]
fn case_geqrf() {
    // LAPACK's dgeqrf (SciPy's lapack.dgeqrf): r above the diagonal, the vectors below.
    let x = fa(F64, &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = run(Builtin::Geqrf, none(), &[x]);
    let packed = [
        -5.916079783099616,
        -7.437357441610946,
        0.4337717455676132,
        0.828078671210825,
        0.7229529092793553,
        0.8926238280228976,
    ];
    assert_close(&out[0], &fa(F64, &[3, 2], &packed), 1e-12, 1e-12);
    assert_close(
        &out[1],
        &fa(F64, &[2], &[1.1690308509457032, 1.1131040011646904]),
        1e-12,
        1e-12,
    );
    // Batched and wide; a zero column below the diagonal makes no reflection (tau 0).
    let wide = fa(F32, &[1, 2, 3], &[0.0, 2.0, 1.0, 0.0, 4.0, 3.0]);
    let out = run(Builtin::Geqrf, none(), std::slice::from_ref(&wide));
    assert_close(&out[0], &wide, 0.0, 0.0);
    assert_close(&out[1], &fa(F32, &[1, 2], &[0.0, 0.0]), 0.0, 0.0);
    // Empty: no scales.
    let out = run(Builtin::Geqrf, none(), &[fa(F32, &[0, 3], &[])]);
    assert_eq!(out[1].shape.dims(), &[0]);
}

#[test]
fn case_geqp3() {
    // LAPACK's dgeqp3 (SciPy's lapack.dgeqp3): the larger second column first.
    let x = fa(F64, &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let magma = params(vec![("use_magma", Param::None)]);
    let out = run(
        Builtin::Geqp3,
        magma.clone(),
        &[x.clone(), ia(I32, &[2], &[0, 0])],
    );
    let packed = [
        -7.483314773547883,
        -5.879747322073337,
        0.42179344411906794,
        -0.6546536707079759,
        0.632690166178602,
        0.8597677535291114,
    ];
    assert_close(&out[0], &fa(F64, &[3, 2], &packed), 1e-12, 1e-12);
    assert_same(&out[1], &ia(I32, &[2], &[2, 1]));
    assert_close(
        &out[2],
        &fa(F64, &[2], &[1.2672612419124243, 1.1499536117281512]),
        1e-12,
        1e-12,
    );
    // A fixed first column stays first: geqrf's factors, pivots in order.
    let out = run(Builtin::Geqp3, magma, &[x.clone(), ia(I32, &[2], &[1, 0])]);
    let plain = run(Builtin::Geqrf, none(), std::slice::from_ref(&x));
    assert_close(&out[0], &plain[0], 1e-12, 1e-12);
    assert_same(&out[1], &ia(I32, &[2], &[1, 2]));
    // qr with pivoting: q and r of the permuted columns, the permutation 0-based.
    let p = params(vec![
        ("full_matrices", Param::Bool(false)),
        ("pivoting", Param::Bool(true)),
        ("use_magma", Param::None),
    ]);
    let out = run(Builtin::Qr, p, &[x]);
    let q = [
        -0.2672612419124243,
        0.8728715609439696,
        -0.5345224838248488,
        0.21821789023599258,
        -0.8017837257372732,
        -0.43643578047198484,
    ];
    assert_close(&out[0], &fa(F64, &[3, 2], &q), 1e-12, 1e-12);
    let r = [
        -7.483314773547883,
        -5.879747322073337,
        0.0,
        -0.6546536707079759,
    ];
    assert_close(&out[1], &fa(F64, &[2, 2], &r), 1e-12, 1e-12);
    assert_same(&out[2], &ia(I32, &[2], &[1, 0]));
}

#[test]
fn case_householder_product() {
    // LAPACK's dorgqr of dgeqrf's factors: q's thin columns; with one reflection, H_0's.
    let packed = fa(
        F64,
        &[3, 2],
        &[
            -5.916079783099616,
            -7.437357441610946,
            0.4337717455676132,
            0.828078671210825,
            0.7229529092793553,
            0.8926238280228976,
        ],
    );
    let taus = fa(F64, &[2], &[1.1690308509457032, 1.1131040011646904]);
    let out = run(Builtin::HouseholderProduct, none(), &[packed.clone(), taus]);
    let q = [
        -0.16903085094570325,
        0.8970852271450607,
        -0.50709255283711,
        0.27602622373694136,
        -0.8451542547285166,
        -0.34503277967117696,
    ];
    assert_close(&out[0], &fa(F64, &[3, 2], &q), 1e-12, 1e-12);
    let one = fa(F64, &[1], &[1.1690308509457032]);
    let out = run(Builtin::HouseholderProduct, none(), &[packed, one]);
    let q1 = [
        -0.16903085094570325,
        -0.50709255283711,
        -0.50709255283711,
        0.7800375781915097,
        -0.8451542547285166,
        -0.36660403634748384,
    ];
    assert_close(&out[0], &fa(F64, &[3, 2], &q1), 1e-12, 1e-12);
    // No reflections: the identity's columns.
    let out = run(
        Builtin::HouseholderProduct,
        none(),
        &[fa(F32, &[2, 2], &[5.0, 6.0, 7.0, 8.0]), fa(F32, &[0], &[])],
    );
    assert_close(&out[0], &fa(F32, &[2, 2], &[1.0, 0.0, 0.0, 1.0]), 0.0, 0.0);
}

#[test]
fn case_lu() {
    let x = fa(F64, &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let out = run(Builtin::Lu, none(), &[x]);
    let l = 1.0 / 3.0;
    assert_same(&out[0], &fa(F64, &[2, 2], &[3.0, 4.0, l, 2.0 - l * 4.0]));
    assert_same(&out[1], &ia(I32, &[2], &[1, 1]));
    assert_same(&out[2], &ia(I32, &[2], &[1, 0]));
    // Wide and batched: two swaps per matrix, the permutation they make.
    let x = fa(
        F32,
        &[1, 3, 4],
        &[0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 4.0, 0.0, 0.0, 2.0],
    );
    let out = run(Builtin::Lu, none(), &[x]);
    assert_same(&out[1], &ia(I32, &[1, 3], &[2, 2, 2]));
    assert_same(&out[2], &ia(I32, &[1, 3], &[2, 0, 1]));
    assert_same(
        &out[0],
        &fa(
            F32,
            &[1, 3, 4],
            &[4.0, 0.0, 0.0, 2.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 2.0, 0.0],
        ),
    );
}

#[test]
fn case_top_k() {
    let top = |axis: i64, k: i64, x: &HostArray| {
        run(
            Builtin::TopK,
            params(vec![("axis", Param::Int(axis)), ("k", Param::Int(k))]),
            std::slice::from_ref(x),
        )
    };
    // XLA's total order, greater first: +NaN, ..., 0.0, -0.0, -inf, -NaN; ties by position.
    let nan = f64::NAN;
    let x = fa(
        F32,
        &[7],
        &[-0.0, 0.0, -nan, 1.0, nan, f64::NEG_INFINITY, 1.0],
    );
    let out = top(0, 7, &x);
    assert_same(&out[1], &ia(I32, &[7], &[4, 3, 6, 1, 0, 5, 2]));
    let out = top(0, 2, &x);
    assert_same(&out[0], &fa(F32, &[2], &[nan, 1.0]));
    // Along the first axis of a matrix, unsigned by value.
    let m = ia(U8, &[3, 2], &[1, 200, 7, 3, 7, 255]);
    let out = top(0, 2, &m);
    assert_same(&out[0], &ia(U8, &[2, 2], &[7, 255, 7, 200]));
    assert_same(&out[1], &ia(I32, &[2, 2], &[1, 2, 2, 0]));
    let out = top(1, 0, &m);
    assert_same(&out[0], &ia(U8, &[3, 0], &[]));
}

#[test]
fn case_cumulative() {
    let cum = |prim: Builtin, axis: i64, reverse: bool, x: &HostArray| {
        run1(
            prim,
            params(vec![
                ("axis", Param::Int(axis)),
                ("reverse", Param::Bool(reverse)),
            ]),
            std::slice::from_ref(x),
        )
    };
    let x = ia(I8, &[2, 3], &[1, 2, 3, 100, 100, -4]);
    assert_same(
        &cum(Builtin::Cumsum, 1, false, &x),
        &ia(I8, &[2, 3], &[1, 3, 6, 100, -56, -60]),
    );
    assert_same(
        &cum(Builtin::Cumsum, 1, true, &x),
        &ia(I8, &[2, 3], &[6, 5, 3, -60, 96, -4]),
    );
    assert_same(
        &cum(Builtin::Cumprod, 0, false, &x),
        &ia(I8, &[2, 3], &[1, 2, 3, 100, -56, -12]),
    );
    assert_same(
        &cum(Builtin::Cummax, 1, false, &x),
        &ia(I8, &[2, 3], &[1, 2, 3, 100, 100, 100]),
    );
    assert_same(
        &cum(Builtin::Cummin, 1, true, &x),
        &ia(I8, &[2, 3], &[1, 2, 3, -4, -4, -4]),
    );
    let nan = f64::NAN;
    let f = fa(F32, &[4], &[1.0, nan, 0.5, 2.0]);
    assert_same(
        &cum(Builtin::Cummax, 0, false, &f),
        &fa(F32, &[4], &[1.0, nan, nan, nan]),
    );
    let g = fa(F32, &[3], &[0.0, f64::NEG_INFINITY, 0.0]);
    let l2 = 2f64.ln();
    assert_close(
        &cum(Builtin::Cumlogsumexp, 0, false, &g),
        &fa(F32, &[3], &[0.0, 0.0, l2]),
        1e-6,
        1e-6,
    );
    let ninf = fa(F32, &[2], &[f64::NEG_INFINITY, f64::NEG_INFINITY]);
    assert_same(&cum(Builtin::Cumlogsumexp, 0, true, &ninf), &ninf);
    let empty = fa(F32, &[0, 2], &[]);
    assert_same(&cum(Builtin::Cumsum, 0, false, &empty), &empty);
}

#[test]
fn case_pad() {
    let x = ia(I32, &[2, 3], &[1, 2, 3, 4, 5, 6]);
    let v = ia(I32, &[], &[0]);
    let p = |config: Vec<(i64, i64, i64)>, x: &HostArray| {
        run1(
            Builtin::Pad,
            params(vec![("padding_config", Param::Padding(config.into()))]),
            &[x.clone(), v.clone()],
        )
    };
    // Low and high padding, and interior padding between neighbours.
    assert_same(
        &p(vec![(1, 0, 0), (0, 1, 1)], &x),
        &ia(
            I32,
            &[3, 6],
            &[0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0],
        ),
    );
    // Negative padding crops (after interior padding): JAX's lax.pad gives
    // [[0 0 0 0 0] [0 1 2 0 0] [0 0 0 0 0]] for ((1, -1, 1), (0, 2, 0)) of arange(6).
    let a = ia(I32, &[2, 3], &[0, 1, 2, 3, 4, 5]);
    assert_same(
        &p(vec![(1, -1, 1), (0, 2, 0)], &a),
        &ia(I32, &[3, 5], &[0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0]),
    );
    assert_same(
        &p(vec![(-1, 0, 0), (-1, -1, 0)], &x),
        &ia(I32, &[1, 1], &[5]),
    );
    // Everything cropped, a scalar, a float padding value.
    assert_same(&p(vec![(-2, 0, 0), (0, 0, 0)], &x), &ia(I32, &[0, 3], &[]));
    assert_same(&p(vec![], &v), &v);
    assert_same(
        &run1(
            Builtin::Pad,
            params(vec![(
                "padding_config",
                Param::Padding(vec![(1, 1, 0)].into()),
            )]),
            &[fa(F32, &[1], &[2.0]), fa(F32, &[], &[-0.5])],
        ),
        &fa(F32, &[3], &[-0.5, 2.0, -0.5]),
    );
}

#[test]
fn case_add_any() {
    // Elementwise addition, rounded to the dtype and wrapping for integers, as `add`.
    assert_same(
        &bin(
            Builtin::AddAny,
            fa(F32, &[2, 2], &[1.0, 0.5, -2.0, 3.0]),
            fa(F32, &[2, 2], &[1e-8, 0.25, 2.0, 0.5]),
        ),
        &fa(F32, &[2, 2], &[1.0, 0.75, 0.0, 3.5]),
    );
    assert_same(
        &bin(
            Builtin::AddAny,
            ia(I8, &[2], &[100, 1]),
            ia(I8, &[2], &[100, 2]),
        ),
        &ia(I8, &[2], &[-56, 3]),
    );
    assert_same(
        &bin(
            Builtin::AddAny,
            fa(F64, &[], &[1.5]),
            fa(F64, &[], &[-0.25]),
        ),
        &fa(F64, &[], &[1.25]),
    );
}

#[test]
fn case_dynamic_update_slice() {
    let x = ia(I64, &[6], &[0, 1, 2, 3, 4, 5]);
    let u = ia(I64, &[2], &[-1, -2]);
    let at = |i: i64| ia(I32, &[], &[i]);
    assert_same(
        &run1(
            Builtin::DynamicUpdateSlice,
            none(),
            &[x.clone(), u.clone(), at(1)],
        ),
        &ia(I64, &[6], &[0, -1, -2, 3, 4, 5]),
    );
    assert_same(
        &run1(
            Builtin::DynamicUpdateSlice,
            none(),
            &[x.clone(), u.clone(), at(100)],
        ),
        &ia(I64, &[6], &[0, 1, 2, 3, -1, -2]),
    );
    assert_same(
        &run1(Builtin::DynamicUpdateSlice, none(), &[x, u, at(-7)]),
        &ia(I64, &[6], &[-1, -2, 2, 3, 4, 5]),
    );
    let x = fa(F32, &[2, 3], &[0.0; 6]);
    let u = fa(F32, &[1, 2], &[1.0, 2.0]);
    assert_same(
        &run1(Builtin::DynamicUpdateSlice, none(), &[x, u, at(1), at(1)]),
        &fa(F32, &[2, 3], &[0.0, 0.0, 0.0, 0.0, 1.0, 2.0]),
    );
}

fn dot_params(lc: &[i64], rc: &[i64], lb: &[i64], rb: &[i64], pref: Param) -> Params {
    params(vec![
        (
            "dimension_numbers",
            Param::DotDims(Arc::new(DotDimensionNumbers {
                lhs_contracting: lc.to_vec(),
                rhs_contracting: rc.to_vec(),
                lhs_batch: lb.to_vec(),
                rhs_batch: rb.to_vec(),
            })),
        ),
        ("precision", Param::None),
        ("preferred_element_type", pref),
    ])
}

#[test]
fn case_dot_general() {
    // Matrix product [2,3] x [3,2], computed naively.
    let a: Vec<f64> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b: Vec<f64> = vec![0.5, -1.0, 2.0, 0.0, -3.0, 1.5];
    let mut want = vec![0.0; 4];
    for i in 0..2 {
        for j in 0..2 {
            for k in 0..3 {
                want[i * 2 + j] += a[i * 3 + k] * b[k * 2 + j];
            }
        }
    }
    let got = run1(
        Builtin::DotGeneral,
        dot_params(&[1], &[0], &[], &[], Param::None),
        &[fa(F64, &[2, 3], &a), fa(F64, &[3, 2], &b)],
    );
    assert_same(&got, &fa(F64, &[2, 2], &want));

    // Batched, contracting the lhs's axis 2 with the rhs's axis 1: [2,2,3] x [2,3,1].
    let l: Vec<f64> = (0..12).map(|v| v as f64).collect();
    let r: Vec<f64> = (0..6).map(|v| (v as f64) - 2.0).collect();
    let mut want = vec![0.0; 4];
    for bt in 0..2 {
        for i in 0..2 {
            for k in 0..3 {
                want[bt * 2 + i] += l[pos(&[2, 2, 3], &[bt as i64, i as i64, k])]
                    * r[pos(&[2, 3, 1], &[bt as i64, k, 0])];
            }
        }
    }
    let got = run1(
        Builtin::DotGeneral,
        dot_params(&[2], &[1], &[0], &[0], Param::None),
        &[fa(F32, &[2, 2, 3], &l), fa(F32, &[2, 3, 1], &r)],
    );
    assert_same(&got, &fa(F32, &[2, 2, 1], &want));

    // Outer product (no contraction).
    let got = run1(
        Builtin::DotGeneral,
        dot_params(&[], &[], &[], &[], Param::None),
        &[ia(I32, &[2], &[2, 3]), ia(I32, &[3], &[1, 10, 100])],
    );
    assert_same(&got, &ia(I32, &[2, 3], &[2, 20, 200, 3, 30, 300]));

    // i8 inputs: without preferred_element_type the sum wraps in i8; with i32 it does not.
    let x = ia(I8, &[2], &[100, 100]);
    let got = run1(
        Builtin::DotGeneral,
        dot_params(&[0], &[0], &[], &[], Param::None),
        &[x.clone(), x.clone()],
    );
    assert_same(&got, &ia(I8, &[], &[20000i64 as i8 as i64]));
    let got = run1(
        Builtin::DotGeneral,
        dot_params(&[0], &[0], &[], &[], Param::DType(I32)),
        &[x.clone(), x],
    );
    assert_same(&got, &ia(I32, &[], &[20000]));
}

#[test]
fn case_iota() {
    let p = |dt: DType, shape: &[i64], dim: i64| {
        params(vec![
            ("dtype", Param::DType(dt)),
            ("shape", ints(shape)),
            ("dimension", Param::Int(dim)),
            ("sharding", Param::None),
        ])
    };
    assert_same(
        &run1(Builtin::Iota, p(I32, &[2, 3], 1), &[]),
        &ia(I32, &[2, 3], &[0, 1, 2, 0, 1, 2]),
    );
    assert_same(
        &run1(Builtin::Iota, p(F32, &[2, 3], 0), &[]),
        &fa(F32, &[2, 3], &[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]),
    );
    // Values beyond the dtype wrap (u8) or round (bf16: 257 is not a bf16).
    let got = run1(Builtin::Iota, p(U8, &[258], 0), &[]);
    assert_eq!(&got.as_i64().unwrap()[255..], &[255, 0, 1]);
    let got = run1(Builtin::Iota, p(BF16, &[258], 0), &[]);
    assert_eq!(&floats(&got)[256..], &[256.0, 256.0]);
}

#[test]
fn case_copy() {
    let x = fa(BF16, &[2], &[1.5, -2.0]);
    assert_same(&run1(Builtin::Copy, none(), std::slice::from_ref(&x)), &x);
    let x = ia(U8, &[1], &[255]);
    assert_same(&run1(Builtin::Copy, none(), std::slice::from_ref(&x)), &x);
}

// ----- Dtype combinations beyond one dtype per primitive -----

#[test]
fn pow_with_integer_exponent() {
    // The exponent is converted to the base's dtype (JAX's lowering); checked against JAX:
    // lax.pow(f32[2, 2, 0, -2], i32[3, -1, -1, 3]) = [8, 0.5, inf, -8].
    assert_same(
        &bin(
            Builtin::Pow,
            fa(F32, &[4], &[2.0, 2.0, 0.0, -2.0]),
            ia(I32, &[4], &[3, -1, -1, 3]),
        ),
        &fa(F32, &[4], &[8.0, 0.5, f64::INFINITY, -8.0]),
    );
    // 70000 is inf in f16, so 2^70000 is inf; a u8 exponent; a scalar exponent.
    assert_same(
        &bin(Builtin::Pow, fa(F16, &[1], &[2.0]), ia(I32, &[1], &[70000])),
        &fa(F16, &[1], &[f64::INFINITY]),
    );
    assert_same(
        &bin(Builtin::Pow, fa(F64, &[2], &[3.0, 0.5]), ia(U8, &[], &[2])),
        &fa(F64, &[2], &[9.0, 0.25]),
    );
}

#[test]
fn unsigned_neg_and_sign() {
    // JAX: neg wraps, sign is 0 or 1.
    assert_same(
        &run1(Builtin::Neg, none(), &[ia(U8, &[3], &[0, 1, 255])]),
        &ia(U8, &[3], &[0, 255, 1]),
    );
    assert_same(
        &run1(Builtin::Sign, none(), &[ia(U8, &[3], &[0, 5, 255])]),
        &ia(U8, &[3], &[0, 1, 1]),
    );
    let u = |v: Vec<u64>| HostArray::from_u64(sh(&[2]), U64, v).unwrap();
    assert_same(
        &run1(Builtin::Sign, none(), &[u(vec![u64::MAX, 0])]),
        &u(vec![1, 0]),
    );
    assert_same(
        &run1(Builtin::Neg, none(), &[u(vec![1, 0])]),
        &u(vec![u64::MAX, 0]),
    );
}

#[test]
fn bool_copy_clamp_argmax() {
    let x = ba(&[3], &[true, false, true]);
    assert_same(&run1(Builtin::Copy, none(), std::slice::from_ref(&x)), &x);
    let f = HostArray::scalar_bool(false);
    let t = HostArray::scalar_bool(true);
    assert_same(
        &run1(Builtin::Clamp, none(), &[f.clone(), x.clone(), t.clone()]),
        &x,
    );
    assert_same(
        &run1(Builtin::Clamp, none(), &[t, x.clone(), f]),
        &ba(&[3], &[false; 3]),
    );
    assert_same(
        &run1(
            Builtin::Argmax,
            argp(0, I32),
            &[ba(&[3], &[false, true, true])],
        ),
        &ia(I32, &[], &[1]),
    );
    assert_same(
        &run1(Builtin::Argmin, argp(0, I32), std::slice::from_ref(&x)),
        &ia(I32, &[], &[1]),
    );
}

#[test]
fn dot_general_mixed_dtypes() {
    let dn = || dot_params(&[0], &[0], &[], &[], Param::None);
    // i8 . f32 -> f32 (checked against JAX: 1 * 1.5 + 2 * 2.5 = 6.5).
    assert_same(
        &run1(
            Builtin::DotGeneral,
            dn(),
            &[ia(I8, &[2], &[1, 2]), fa(F32, &[2], &[1.5, 2.5])],
        ),
        &fa(F32, &[], &[6.5]),
    );
    // i8 . i32 -> i32: the i8 operand is widened, nothing wraps.
    assert_same(
        &run1(
            Builtin::DotGeneral,
            dn(),
            &[ia(I8, &[2], &[100, 100]), ia(I32, &[2], &[100, 100])],
        ),
        &ia(I32, &[], &[20000]),
    );
    // bool . bool -> bool: any(l & r).
    assert_same(
        &run1(
            Builtin::DotGeneral,
            dn(),
            &[ba(&[2], &[true, false]), ba(&[2], &[false, true])],
        ),
        &ba(&[], &[false]),
    );
    assert_same(
        &run1(
            Builtin::DotGeneral,
            dn(),
            &[ba(&[2], &[true, false]), ba(&[2], &[true, true])],
        ),
        &ba(&[], &[true]),
    );
    // bf16 . bf16 with f32 accumulation: products are exact in f32.
    let a = 1.0 + 1.0 / 128.0;
    assert_same(
        &run1(
            Builtin::DotGeneral,
            dot_params(&[0], &[0], &[], &[], Param::DType(F32)),
            &[fa(BF16, &[1], &[a]), fa(BF16, &[1], &[a])],
        ),
        &fa(F32, &[], &[a * a]),
    );
}

#[test]
fn empty_dot_general_with_a_huge_contraction() {
    // [0, 2^40] . [2^40, 0]: an empty result, computed without touching 2^40 offsets.
    let big = 1i64 << 40;
    let got = run1(
        Builtin::DotGeneral,
        dot_params(&[1], &[0], &[], &[], Param::None),
        &[
            HostArray::zeros(sh(&[0, big]), F32),
            HostArray::zeros(sh(&[big, 0]), F32),
        ],
    );
    assert_same(&got, &HostArray::zeros(sh(&[0, 0]), F32));
    // [2, 0] . [0, 3]: an empty contraction sums to zero.
    let got = run1(
        Builtin::DotGeneral,
        dot_params(&[1], &[0], &[], &[], Param::None),
        &[
            HostArray::zeros(sh(&[2, 0]), I32),
            HostArray::zeros(sh(&[0, 3]), I32),
        ],
    );
    assert_same(&got, &ia(I32, &[2, 3], &[0; 6]));
}

#[test]
fn select_n_unsigned_predicate() {
    let cases = [ia(I8, &[3], &[1, 2, 3]), ia(I8, &[3], &[10, 20, 30])];
    let which = ia(U32, &[3], &[0, u32::MAX as i64, 1]);
    assert_same(
        &run1(
            Builtin::SelectN,
            none(),
            &[which, cases[0].clone(), cases[1].clone()],
        ),
        &ia(I8, &[3], &[1, 20, 30]),
    );
    let which = HostArray::from_u64(sh(&[3]), U64, vec![u64::MAX, 0, 1]).unwrap();
    assert_same(
        &run1(
            Builtin::SelectN,
            none(),
            &[which, cases[0].clone(), cases[1].clone()],
        ),
        &ia(I8, &[3], &[10, 2, 30]),
    );
}

// ----- Higher-order -----

fn host_const(a: HostArray) -> Const {
    Const::new(a.aval(), Arc::new(a))
}

#[test]
fn case_jit() {
    // inner(x) = x * c + 1 with a constant c closed over.
    let mut b = JaxprBuilder::new();
    let c = Atom::Var(b.add_constvar(av(F32, &[2])));
    let x = invar(&mut b, av(F32, &[2]));
    let m = eqn1(&mut b, Builtin::Mul, vec![x, c], none());
    let one = lit(&mut b, LitValue::Float(1.0), F32);
    let y = eqn1(&mut b, Builtin::Add, vec![m, one], none());
    let inner = ClosedJaxpr::new(
        Arc::new(b.build(vec![y, x]).unwrap()),
        vec![host_const(fa(F32, &[2], &[2.0, -3.0]))],
    )
    .unwrap();

    let mut b = JaxprBuilder::new();
    let x = invar(&mut b, av(F32, &[2]));
    let outs = eqn(
        &mut b,
        Builtin::Jit,
        vec![x],
        params(vec![
            ("jaxpr", Param::Jaxpr(inner)),
            ("name", Param::Str("inner".into())),
        ]),
    );
    let j = b.build(outs).unwrap();
    let got = eval_jaxpr(&j, &[], &[fa(F32, &[2], &[0.5, 1.0])]).unwrap();
    assert_same(&got[0], &fa(F32, &[2], &[2.0, -2.0]));
    assert_same(&got[1], &fa(F32, &[2], &[0.5, 1.0]));
}

#[test]
fn case_calls() {
    // custom_jvp_call, custom_vjp_call and remat2 evaluate as calls of their jaxpr (the
    // rules and the policy play no part): inner(x) = (x * c + 1, x) with a constant c.
    let mut b = JaxprBuilder::new();
    let c = Atom::Var(b.add_constvar(av(F32, &[2])));
    let x = invar(&mut b, av(F32, &[2]));
    let m = eqn1(&mut b, Builtin::Mul, vec![x, c], none());
    let one = lit(&mut b, LitValue::Float(1.0), F32);
    let y = eqn1(&mut b, Builtin::Add, vec![m, one], none());
    let inner = Param::Jaxpr(
        ClosedJaxpr::new(
            Arc::new(b.build(vec![y, x]).unwrap()),
            vec![host_const(fa(F32, &[2], &[2.0, -3.0]))],
        )
        .unwrap(),
    );
    for (prim, ps) in [
        (
            Builtin::CustomJvpCall,
            ferrax_ir::generate::custom_jvp_params(inner.clone(), "f"),
        ),
        (
            Builtin::CustomVjpCall,
            ferrax_ir::generate::custom_vjp_params(inner.clone(), "f"),
        ),
        (
            Builtin::Remat,
            ferrax_ir::generate::remat_params(inner.clone(), false),
        ),
    ] {
        let mut b = JaxprBuilder::new();
        let x = invar(&mut b, av(F32, &[2]));
        let outs = eqn(&mut b, prim, vec![x], ps);
        let j = b.build(outs).unwrap();
        let got = eval_jaxpr(&j, &[], &[fa(F32, &[2], &[0.5, 1.0])]).unwrap();
        assert_same(&got[0], &fa(F32, &[2], &[2.0, -2.0]));
        assert_same(&got[1], &fa(F32, &[2], &[0.5, 1.0]));
    }
}

#[test]
fn case_callbacks() {
    // The evaluator cannot call the host: a debug callback does nothing (the values
    // around it are computed as usual), a pure callback is refused as unsupported.
    let j = ferrax_ir::text::parse_jaxpr(
        "{ lambda ; a:f32[2]. let
    debug_callback[callback=cb effect=Debug partitioned=False] a
    b:f32[2] = mul a a
  in (b,) }",
    )
    .unwrap();
    let outs = eval_jaxpr(&j, &[], &[fa(F32, &[2], &[1.5, -2.0])]).unwrap();
    assert_same(&outs[0], &fa(F32, &[2], &[2.25, 4.0]));
    // A print (JAX's text) does nothing here either.
    let j = ferrax_ir::text::parse_jaxpr(
        "{ lambda ; a:f32[2]. let
    debug_print[
      fmt=a={a} and {}
      has_placeholders=True
      in_tree=PyTreeDef(((*,), {'a': *}))
      logging_record=None
      np_printoptions=(('edgeitems', 3), ('precision', 8))
      ordered=True
      partitioned=False
      static_args=((0, 'hi'),)
    ] a
    b:f32[2] = mul a a
  in (b,) }",
    )
    .unwrap();
    let outs = eval_jaxpr(&j, &[], &[fa(F32, &[2], &[1.5, -2.0])]).unwrap();
    assert_same(&outs[0], &fa(F32, &[2], &[2.25, 4.0]));
    let j = ferrax_ir::text::parse_jaxpr(
        "{ lambda ; a:f32[2]. let
    b:f32[2] = pure_callback[
      callback=cb
      result_avals=(ShapedArray(float32[2]),)
      sharding=None
      vmap_method=None
    ] a
  in (b,) }",
    )
    .unwrap();
    let err = eval_jaxpr(&j, &[], &[fa(F32, &[2], &[1.5, -2.0])]).unwrap_err();
    assert!(matches!(err, EvalError::Unsupported { .. }), "{err:?}");
    let j = ferrax_ir::text::parse_jaxpr(
        "{ lambda ; a:f32[2]. let
    b:f32[2] = io_callback[callback=cb ordered=False result_avals=(ShapedArray(float32[2]),)] a
  in (b,) }",
    )
    .unwrap();
    let err = eval_jaxpr(&j, &[], &[fa(F32, &[2], &[1.5, -2.0])]).unwrap_err();
    assert!(matches!(err, EvalError::Unsupported { .. }), "{err:?}");
}

#[test]
fn case_stop_gradient() {
    // The identity, on every kind of dtype.
    for x in [
        fa(F32, &[2], &[1.5, -2.0]),
        fa(BF16, &[], &[0.25]),
        ia(I32, &[3], &[1, -7, 9]),
        ia(U8, &[1], &[255]),
    ] {
        assert_same(
            &run1(Builtin::StopGradient, none(), std::slice::from_ref(&x)),
            &x,
        );
    }
}

#[test]
fn case_sharding_constraint() {
    // The identity: a layout hint only.
    let mesh = ferrax_ir::Mesh::new([("x", 2), ("y", 2)]).unwrap();
    let spec = ferrax_ir::PartitionSpec::new(vec![vec!["x".into()]]);
    let p = Params::new([
        ("mesh", Param::Mesh(Arc::new(mesh))),
        ("spec", Param::Spec(Arc::new(spec))),
    ]);
    let x = fa(F32, &[2, 2], &[1.5, -2.0, 3.0, 4.0]);
    assert_same(
        &run1(Builtin::ShardingConstraint, p, std::slice::from_ref(&x)),
        &x,
    );
}

/// Every collective in a shard_map over a mesh of two devices: device 0 holds [0, 1] of
/// the input [0, 1, 2, 3] and device 1 holds [2, 3]. The expectations are derived by hand.
#[test]
fn case_collectives() {
    let text = "{ lambda ; a:f32[4]. let
    b:f32[2] c:f32[2] d:f32[2] e:f32[4] f:f32[2] g:f32[4] h:f32[4] i:i32[2] j:f32[2,4] = shard_map[
      in_specs=(P('x',),)
      jaxpr={ lambda ; k:f32[2]. let
          l:f32[2] = psum[axes=('x',)] k
          m:f32[2] = pmax[axes=('x',)] k
          n:f32[2] = pmin[axes=('x',) axis_index_groups=None] k
          o:f32[2] = pvary[axes=('x',)] l
          p:f32[4] = all_gather[all_gather_dimension=0 axis_name=('x',) axis_size=2 tiled=True] k
          q:f32[1] = reduce_scatter[axis_name=('x',) axis_size=2 scatter_dimension=0 tiled=True] k
          r:f32[2] = ppermute[axis_name=('x',) perm=((0, 1), (1, 0))] k
          s:f32[2] = all_to_all[axis_name=x concat_axis=0 split_axis=0 tiled=True] k
          t:i32[] = axis_index[axis_name=x]
          u:i32[1] = broadcast_in_dim[broadcast_dimensions=() shape=(1,)] t
          v:f32[2,2] = all_gather[all_gather_dimension=0 axis_name=('x',) axis_size=2 tiled=False] k
        in (l, m, n, p, q, r, s, u, v) }
      mesh=Mesh('x': 2, axis_types=(Auto,))
      out_specs=(P(), P(), P(), P(), P('x',), P('x',), P('x',), P('x',), P(None, 'x'))
    ] a
  in (b, c, d, e, f, g, h, i, j) }";
    let j = ferrax_ir::text::parse_jaxpr(text).unwrap();
    let outs = eval_jaxpr(&j, &[], &[fa(F32, &[4], &[0.0, 1.0, 2.0, 3.0])]).unwrap();
    let want = [
        fa(F32, &[2], &[2.0, 4.0]),
        fa(F32, &[2], &[2.0, 3.0]),
        fa(F32, &[2], &[0.0, 1.0]),
        fa(F32, &[4], &[0.0, 1.0, 2.0, 3.0]),
        fa(F32, &[2], &[2.0, 4.0]),
        fa(F32, &[4], &[2.0, 3.0, 0.0, 1.0]),
        fa(F32, &[4], &[0.0, 2.0, 1.0, 3.0]),
        ia(I32, &[2], &[0, 1]),
        fa(F32, &[2, 4], &[0.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0, 3.0]),
    ];
    // reduce_scatter gives each device one sum ([2] on device 0, [4] on device 1), laid
    // out by P('x') as [2, 4].
    assert_eq!(outs.len(), want.len());
    for (o, w) in outs.iter().zip(&want) {
        assert_same(o, w);
    }
}

/// A branch `x -> x * k`.
fn times(k: f64) -> ClosedJaxpr {
    let mut b = JaxprBuilder::new();
    let x = invar(&mut b, av(F32, &[]));
    let kk = lit(&mut b, LitValue::Float(k), F32);
    let y = eqn1(&mut b, Builtin::Mul, vec![x, kk], none());
    closed(b.build(vec![y]).unwrap())
}

#[test]
fn case_cond() {
    let branches = || Param::Jaxprs(Arc::new(vec![times(1.0), times(10.0), times(100.0)]));
    let build = |index_dtype: DType| {
        let mut b = JaxprBuilder::new();
        let i = invar(&mut b, av(index_dtype, &[]));
        let x = invar(&mut b, av(F32, &[]));
        let outs = eqn(
            &mut b,
            Builtin::Cond,
            vec![i, x],
            params(vec![("branches", branches())]),
        );
        b.build(outs).unwrap()
    };
    let j = build(I32);
    let x = fa(F32, &[], &[2.0]);
    // Out-of-range indices clamp (XLA's case).
    for (i, want) in [(-5, 2.0), (0, 2.0), (1, 20.0), (2, 200.0), (7, 200.0)] {
        let got = eval_jaxpr(&j, &[], &[ia(I32, &[], &[i]), x.clone()]).unwrap();
        assert_same(&got[0], &fa(F32, &[], &[want]));
    }
}

/// `while i < n: i += step; acc *= 2` with `n` the cond's const and `step` the body's.
#[test]
fn case_while() {
    let cond = {
        let mut b = JaxprBuilder::new();
        let n = invar(&mut b, av(I32, &[]));
        let i = invar(&mut b, av(I32, &[]));
        let _acc = invar(&mut b, av(F64, &[]));
        let lt = eqn1(&mut b, Builtin::Lt, vec![i, n], none());
        closed(b.build(vec![lt]).unwrap())
    };
    let body = {
        let mut b = JaxprBuilder::new();
        let step = invar(&mut b, av(I32, &[]));
        let i = invar(&mut b, av(I32, &[]));
        let acc = invar(&mut b, av(F64, &[]));
        let i2 = eqn1(&mut b, Builtin::Add, vec![i, step], none());
        let two = lit(&mut b, LitValue::Float(2.0), F64);
        let acc2 = eqn1(&mut b, Builtin::Mul, vec![acc, two], none());
        closed(b.build(vec![i2, acc2]).unwrap())
    };
    let mut b = JaxprBuilder::new();
    let n = invar(&mut b, av(I32, &[]));
    let step = invar(&mut b, av(I32, &[]));
    let i = invar(&mut b, av(I32, &[]));
    let acc = invar(&mut b, av(F64, &[]));
    let outs = eqn(
        &mut b,
        Builtin::While,
        vec![n, step, i, acc],
        params(vec![
            ("cond_jaxpr", Param::Jaxpr(cond)),
            ("body_jaxpr", Param::Jaxpr(body)),
            ("cond_nconsts", Param::Int(1)),
            ("body_nconsts", Param::Int(1)),
        ]),
    );
    let j = b.build(outs).unwrap();
    for (n, step, i0) in [(10, 3, 0), (0, 1, 0), (5, 1, 7), (7, 2, -3)] {
        // The reference loop.
        let (mut i, mut acc) = (i0, 1.0f64);
        while i < n {
            i += step;
            acc *= 2.0;
        }
        let got = eval_jaxpr(
            &j,
            &[],
            &[
                ia(I32, &[], &[n]),
                ia(I32, &[], &[step]),
                ia(I32, &[], &[i0]),
                fa(F64, &[], &[1.0]),
            ],
        )
        .unwrap();
        assert_same(&got[0], &ia(I32, &[], &[i]));
        assert_same(&got[1], &fa(F64, &[], &[acc]));
    }
}

fn scan_params(
    body: ClosedJaxpr,
    length: i64,
    reverse: bool,
    num_consts: i64,
    num_carry: i64,
) -> Params {
    params(vec![
        ("jaxpr", Param::Jaxpr(body)),
        ("length", Param::Int(length)),
        ("reverse", Param::Bool(reverse)),
        ("num_consts", Param::Int(num_consts)),
        ("num_carry", Param::Int(num_carry)),
        ("unroll", Param::Int(1)),
        ("_split_transpose", Param::Bool(false)),
    ])
}

/// Scan body: consts (scale), carry (acc, count), x (f32[2]) and w (i32) ->
/// carry (acc + scale * sum(x), count + w), ys (acc', x * scale).
fn scan_body() -> ClosedJaxpr {
    let mut b = JaxprBuilder::new();
    let scale = invar(&mut b, av(F32, &[]));
    let acc = invar(&mut b, av(F32, &[]));
    let count = invar(&mut b, av(I32, &[]));
    let x = invar(&mut b, av(F32, &[2]));
    let w = invar(&mut b, av(I32, &[]));
    let s = eqn1(&mut b, Builtin::ReduceSum, vec![x], axes(&[0]));
    let ss = eqn1(&mut b, Builtin::Mul, vec![s, scale], none());
    let acc2 = eqn1(&mut b, Builtin::Add, vec![acc, ss], none());
    let count2 = eqn1(&mut b, Builtin::Add, vec![count, w], none());
    let xs = eqn1(&mut b, Builtin::Mul, vec![x, scale], none());
    closed(b.build(vec![acc2, count2, acc2, xs]).unwrap())
}

fn scan_jaxpr(length: i64, reverse: bool) -> Jaxpr {
    let mut b = JaxprBuilder::new();
    let scale = invar(&mut b, av(F32, &[]));
    let acc = invar(&mut b, av(F32, &[]));
    let count = invar(&mut b, av(I32, &[]));
    let xs = invar(&mut b, av(F32, &[length, 2]));
    let ws = invar(&mut b, av(I32, &[length]));
    let outs = eqn(
        &mut b,
        Builtin::Scan,
        vec![scale, acc, count, xs, ws],
        scan_params(scan_body(), length, reverse, 1, 2),
    );
    b.build(outs).unwrap()
}

#[test]
fn case_scan() {
    let xs: Vec<f64> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let ws: Vec<i64> = vec![1, 10, 100, 1000];
    for reverse in [false, true] {
        let j = scan_jaxpr(4, reverse);
        let got = eval_jaxpr(
            &j,
            &[],
            &[
                fa(F32, &[], &[0.5]),
                fa(F32, &[], &[100.0]),
                ia(I32, &[], &[0]),
                fa(F32, &[4, 2], &xs),
                ia(I32, &[4], &ws),
            ],
        )
        .unwrap();
        // The reference loop; a reverse scan visits 3, 2, 1, 0 and stores ys at the
        // same indices.
        let order: Vec<usize> = if reverse {
            vec![3, 2, 1, 0]
        } else {
            vec![0, 1, 2, 3]
        };
        let (mut acc, mut count) = (100.0f64, 0i64);
        let mut ys_acc = vec![0.0; 4];
        let mut ys_x = vec![0.0; 8];
        for &i in &order {
            acc += 0.5 * (xs[2 * i] + xs[2 * i + 1]);
            count += ws[i];
            ys_acc[i] = acc;
            ys_x[2 * i] = xs[2 * i] * 0.5;
            ys_x[2 * i + 1] = xs[2 * i + 1] * 0.5;
        }
        assert_eq!(got.len(), 4);
        assert_same(&got[0], &fa(F32, &[], &[acc]));
        assert_same(&got[1], &ia(I32, &[], &[count]));
        assert_same(&got[2], &fa(F32, &[4], &ys_acc));
        assert_same(&got[3], &fa(F32, &[4, 2], &ys_x));
    }
    // Length 0: the carry passes through and the ys are empty.
    let j = scan_jaxpr(0, false);
    let got = eval_jaxpr(
        &j,
        &[],
        &[
            fa(F32, &[], &[0.5]),
            fa(F32, &[], &[3.0]),
            ia(I32, &[], &[4]),
            HostArray::zeros(sh(&[0, 2]), F32),
            HostArray::zeros(sh(&[0]), I32),
        ],
    )
    .unwrap();
    assert_same(&got[0], &fa(F32, &[], &[3.0]));
    assert_same(&got[1], &ia(I32, &[], &[4]));
    assert_same(&got[2], &HostArray::zeros(sh(&[0]), F32));
    assert_same(&got[3], &HostArray::zeros(sh(&[0, 2]), F32));

    // No xs at all: a counter carried `length` times.
    let body = {
        let mut b = JaxprBuilder::new();
        let c = invar(&mut b, av(I8, &[]));
        let one = lit(&mut b, LitValue::Int(1), I8);
        let c2 = eqn1(&mut b, Builtin::Add, vec![c, one], none());
        closed(b.build(vec![c2]).unwrap())
    };
    let mut b = JaxprBuilder::new();
    let c = invar(&mut b, av(I8, &[]));
    let outs = eqn(
        &mut b,
        Builtin::Scan,
        vec![c],
        scan_params(body, 300, false, 0, 1),
    );
    let j = b.build(outs).unwrap();
    let got = eval_jaxpr(&j, &[], &[ia(I8, &[], &[0])]).unwrap();
    assert_same(&got[0], &ia(I8, &[], &[300i64 as i8 as i64]));
}

/// A scan inside a while inside a cond:
/// ```text
/// f(idx, n, xs: f32[4]) = cond(idx,
///     branch 0: (sum(xs), xs),
///     branch 1: while i < n: (acc, ys) = scan(acc, xs, carry acc -> acc + x, ys acc');
///               returns (acc, ys))
/// ```
#[test]
fn nested_scan_in_while_in_cond() {
    // scan body: carry acc, x -> (acc + x, acc + x)
    let scan_body = {
        let mut b = JaxprBuilder::new();
        let acc = invar(&mut b, av(F32, &[]));
        let x = invar(&mut b, av(F32, &[]));
        let s = eqn1(&mut b, Builtin::Add, vec![acc, x], none());
        closed(b.build(vec![s, s]).unwrap())
    };
    // while cond: consts n; carry (i, acc, ys)
    let cond = {
        let mut b = JaxprBuilder::new();
        let n = invar(&mut b, av(I32, &[]));
        let i = invar(&mut b, av(I32, &[]));
        let _acc = invar(&mut b, av(F32, &[]));
        let _ys = invar(&mut b, av(F32, &[4]));
        let lt = eqn1(&mut b, Builtin::Lt, vec![i, n], none());
        closed(b.build(vec![lt]).unwrap())
    };
    // while body: consts xs; carry (i, acc, ys)
    let body = {
        let mut b = JaxprBuilder::new();
        let xs = invar(&mut b, av(F32, &[4]));
        let i = invar(&mut b, av(I32, &[]));
        let acc = invar(&mut b, av(F32, &[]));
        let _ys = invar(&mut b, av(F32, &[4]));
        let one = lit(&mut b, LitValue::Int(1), I32);
        let i2 = eqn1(&mut b, Builtin::Add, vec![i, one], none());
        let outs = eqn(
            &mut b,
            Builtin::Scan,
            vec![acc, xs],
            scan_params(scan_body, 4, false, 0, 1),
        );
        closed(b.build(vec![i2, outs[0], outs[1]]).unwrap())
    };
    let branch0 = {
        let mut b = JaxprBuilder::new();
        let _n = invar(&mut b, av(I32, &[]));
        let xs = invar(&mut b, av(F32, &[4]));
        let s = eqn1(&mut b, Builtin::ReduceSum, vec![xs], axes(&[0]));
        closed(b.build(vec![s, xs]).unwrap())
    };
    let branch1 = {
        let mut b = JaxprBuilder::new();
        let n = invar(&mut b, av(I32, &[]));
        let xs = invar(&mut b, av(F32, &[4]));
        let zero_i = lit(&mut b, LitValue::Int(0), I32);
        let zero_f = lit(&mut b, LitValue::Float(0.0), F32);
        let ys0 = eqn1(
            &mut b,
            Builtin::BroadcastInDim,
            vec![zero_f],
            params(vec![
                ("shape", ints(&[4])),
                ("broadcast_dimensions", ints(&[])),
            ]),
        );
        let outs = eqn(
            &mut b,
            Builtin::While,
            vec![n, xs, zero_i, zero_f, ys0],
            params(vec![
                ("cond_jaxpr", Param::Jaxpr(cond)),
                ("body_jaxpr", Param::Jaxpr(body)),
                ("cond_nconsts", Param::Int(1)),
                ("body_nconsts", Param::Int(1)),
            ]),
        );
        closed(b.build(vec![outs[1], outs[2]]).unwrap())
    };
    let mut b = JaxprBuilder::new();
    let idx = invar(&mut b, av(I32, &[]));
    let n = invar(&mut b, av(I32, &[]));
    let xs = invar(&mut b, av(F32, &[4]));
    let outs = eqn(
        &mut b,
        Builtin::Cond,
        vec![idx, n, xs],
        params(vec![(
            "branches",
            Param::Jaxprs(Arc::new(vec![branch0, branch1])),
        )]),
    );
    let j = b.build(outs).unwrap();

    let xs: Vec<f64> = vec![1.0, 2.0, 3.0, 4.0];
    for (idx, n) in [(0i64, 3i64), (1, 0), (1, 1), (1, 3)] {
        let (acc, ys) = if idx == 0 {
            (xs.iter().sum::<f64>(), xs.clone())
        } else {
            let (mut acc, mut ys) = (0.0, vec![0.0; 4]);
            for _ in 0..n {
                for (k, x) in xs.iter().enumerate() {
                    acc += x;
                    ys[k] = acc;
                }
            }
            (acc, ys)
        };
        let got = eval_jaxpr(
            &j,
            &[],
            &[ia(I32, &[], &[idx]), ia(I32, &[], &[n]), fa(F32, &[4], &xs)],
        )
        .unwrap();
        assert_same(&got[0], &fa(F32, &[], &[acc]));
        assert_same(&got[1], &fa(F32, &[4], &ys));
    }
}

/// 30,000 nested `jit`s on a 2 MiB test thread: the explicit frame stack does not overflow
/// (an evaluator recursing per level would).
#[test]
fn deep_nesting_does_not_overflow() {
    let depth = 30_000;
    let mut inner = {
        let mut b = JaxprBuilder::new();
        let x = invar(&mut b, av(I32, &[]));
        let one = lit(&mut b, LitValue::Int(1), I32);
        let y = eqn1(&mut b, Builtin::Add, vec![x, one], none());
        closed(b.build(vec![y]).unwrap())
    };
    for _ in 1..depth {
        let mut b = JaxprBuilder::new();
        let x = invar(&mut b, av(I32, &[]));
        let one = lit(&mut b, LitValue::Int(1), I32);
        let y = eqn1(
            &mut b,
            Builtin::Jit,
            vec![x],
            params(vec![("jaxpr", Param::Jaxpr(inner))]),
        );
        let z = eqn1(&mut b, Builtin::Add, vec![y, one], none());
        inner = closed(b.build(vec![z]).unwrap());
    }
    let got = eval_closed_jaxpr(&inner, &[ia(I32, &[], &[0])]).unwrap();
    assert_same(&got[0], &ia(I32, &[], &[depth as i64]));
}

// ----- Dtype wrapping, rounding and broadcasting -----

#[test]
fn dtype_wrapping_and_rounding() {
    // i8 overflow wraps.
    assert_same(
        &bin(
            Builtin::Mul,
            ia(I8, &[2], &[64, -128]),
            ia(I8, &[2], &[2, -1]),
        ),
        &ia(I8, &[2], &[-128, -128]),
    );
    // u8 and u16 wrap modulo 2^n, u32 too.
    assert_same(
        &bin(Builtin::Sub, ia(U8, &[1], &[3]), ia(U8, &[1], &[5])),
        &ia(U8, &[1], &[254]),
    );
    assert_same(
        &bin(
            Builtin::Add,
            ia(U32, &[1], &[u32::MAX as i64]),
            ia(U32, &[1], &[2]),
        ),
        &ia(U32, &[1], &[1]),
    );
    // u64 wraps modulo 2^64 (bit patterns).
    assert_same(
        &bin(
            Builtin::Add,
            HostArray::from_u64(sh(&[1]), U64, vec![u64::MAX]).unwrap(),
            HostArray::from_u64(sh(&[1]), U64, vec![3]).unwrap(),
        ),
        &HostArray::from_u64(sh(&[1]), U64, vec![2]).unwrap(),
    );
    // f32 rounding: 16777216 + 1 = 16777216 in f32.
    assert_same(
        &bin(
            Builtin::Add,
            fa(F32, &[1], &[16777216.0]),
            fa(F32, &[1], &[1.0]),
        ),
        &fa(F32, &[1], &[16777216.0]),
    );
    // bf16: 1 + 2^-8 is a tie, rounding to the even 1; 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
    assert_same(
        &bin(
            Builtin::Add,
            fa(BF16, &[2], &[1.0, 1.0]),
            fa(BF16, &[2], &[1.0 / 256.0, 3.0 / 256.0]),
        ),
        &fa(BF16, &[2], &[1.0, 1.015625]),
    );
    // f16: 60000 + 10000 overflows to inf; 2048 + 1 = 2048.
    assert_same(
        &bin(
            Builtin::Add,
            fa(F16, &[2], &[60000.0, 2048.0]),
            fa(F16, &[2], &[10000.0, 1.0]),
        ),
        &fa(F16, &[2], &[f64::INFINITY, 2048.0]),
    );
    // Constructors round and wrap.
    assert_eq!(fa(F32, &[1], &[0.1]).as_f64().unwrap(), &[0.1f32 as f64]);
    assert_eq!(ia(I8, &[1], &[200]).as_i64().unwrap(), &[-56]);
    assert_eq!(ia(U16, &[1], &[-1]).as_i64().unwrap(), &[65535]);
    assert_eq!(
        fa(BF16, &[1], &[1.0 + 1.0 / 256.0]).as_f64().unwrap(),
        &[1.0]
    );
}

use DType::U16;

#[test]
fn scalar_operands_broadcast() {
    let x = fa(F32, &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let s = HostArray::scalar_f64(F32, 10.0).unwrap();
    assert_same(
        &bin(Builtin::Add, x.clone(), s.clone()),
        &fa(F32, &[2, 2], &[11.0, 12.0, 13.0, 14.0]),
    );
    assert_same(
        &bin(Builtin::Sub, s.clone(), x.clone()),
        &fa(F32, &[2, 2], &[9.0, 8.0, 7.0, 6.0]),
    );
    assert_same(
        &bin(
            Builtin::Lt,
            x.clone(),
            HostArray::scalar_f64(F32, 2.5).unwrap(),
        ),
        &ba(&[2, 2], &[true, true, false, false]),
    );
    assert_same(&bin(Builtin::Mul, s.clone(), s), &fa(F32, &[], &[100.0]));
    // A literal operand.
    let mut b = JaxprBuilder::new();
    let v = invar(&mut b, av(I32, &[3]));
    let k = lit(&mut b, LitValue::Int(7), I32);
    let y = eqn1(&mut b, Builtin::Rem, vec![k, v], none());
    let j = b.build(vec![y]).unwrap();
    let got = eval_jaxpr(&j, &[], &[ia(I32, &[3], &[2, 3, -4])]).unwrap();
    assert_same(&got[0], &ia(I32, &[3], &[1, 1, 3]));
    // A scalar against an empty array.
    assert_same(
        &bin(
            Builtin::Add,
            HostArray::zeros(sh(&[0]), F32),
            HostArray::scalar_f64(F32, 1.0).unwrap(),
        ),
        &HostArray::zeros(sh(&[0]), F32),
    );
}

#[test]
fn size_one_dimensions_broadcast() {
    // JAX 0.10's rank-equal broadcasting: [2,1] - [1,3] is [2,3], each element
    // x[i,0] - y[0,j] (values derived by hand from that formula).
    let x = fa(F32, &[2, 1], &[10.0, 20.0]);
    let y = fa(F32, &[1, 3], &[1.0, 2.0, 3.0]);
    assert_same(
        &bin(Builtin::Sub, x.clone(), y.clone()),
        &fa(F32, &[2, 3], &[9.0, 8.0, 7.0, 19.0, 18.0, 17.0]),
    );
    assert_same(
        &bin(Builtin::Sub, y, x),
        &fa(F32, &[2, 3], &[-9.0, -8.0, -7.0, -19.0, -18.0, -17.0]),
    );
    // Against a full operand, and in a comparison.
    let full = ia(I32, &[2, 2], &[1, 2, 3, 4]);
    let row = ia(I32, &[1, 2], &[2, 2]);
    assert_same(
        &bin(Builtin::Mul, full.clone(), row.clone()),
        &ia(I32, &[2, 2], &[2, 4, 6, 8]),
    );
    assert_same(
        &bin(Builtin::Ge, full, row),
        &ba(&[2, 2], &[false, true, true, true]),
    );
    // A size-1 dimension against a 0-sized one.
    assert_same(
        &bin(
            Builtin::Add,
            fa(F32, &[1, 2], &[1.0, 2.0]),
            HostArray::zeros(sh(&[0, 2]), F32),
        ),
        &HostArray::zeros(sh(&[0, 2]), F32),
    );
}

#[test]
fn literal_outputs_and_passthrough() {
    let mut b = JaxprBuilder::new();
    let x = invar(&mut b, av(U8, &[2]));
    let k = lit(&mut b, LitValue::Float(0.1), F32);
    let j = b.build(vec![x, k, x]).unwrap();
    let got = eval_jaxpr(&j, &[], &[ia(U8, &[2], &[1, 2])]).unwrap();
    assert_same(&got[0], &ia(U8, &[2], &[1, 2]));
    assert_same(&got[1], &fa(F32, &[], &[0.1f32 as f64]));
    assert_same(&got[2], &ia(U8, &[2], &[1, 2]));
}

// ----- Errors -----

fn add_jaxpr() -> Jaxpr {
    let mut b = JaxprBuilder::new();
    let x = invar(&mut b, av(F32, &[2]));
    let y = invar(&mut b, av(F32, &[2]));
    let z = eqn1(&mut b, Builtin::Add, vec![x, y], none());
    b.build(vec![z]).unwrap()
}

#[test]
fn error_arg_count() {
    let j = add_jaxpr();
    let e = eval_jaxpr(&j, &[], &[fa(F32, &[2], &[1.0, 2.0])]).unwrap_err();
    assert_eq!(
        e,
        EvalError::ArgCount {
            expected: 2,
            got: 1
        }
    );
}

#[test]
fn error_arg_type() {
    let j = add_jaxpr();
    let e = eval_jaxpr(
        &j,
        &[],
        &[fa(F32, &[2], &[1.0, 2.0]), fa(F64, &[2], &[1.0, 2.0])],
    )
    .unwrap_err();
    assert_eq!(
        e,
        EvalError::ArgType {
            index: 1,
            expected: av(F32, &[2]),
            got: av(F64, &[2])
        }
    );
    let e = eval_jaxpr(
        &j,
        &[],
        &[fa(F32, &[3], &[1.0, 2.0, 3.0]), fa(F32, &[2], &[1.0, 2.0])],
    )
    .unwrap_err();
    assert_eq!(
        e,
        EvalError::ArgType {
            index: 0,
            expected: av(F32, &[2]),
            got: av(F32, &[3])
        }
    );
    assert!(e.to_string().contains("argument 0"), "{e}");
}

#[test]
fn error_invalid_arg() {
    let j = add_jaxpr();
    let ok = fa(F32, &[2], &[1.0, 2.0]);
    // Wrong length.
    let short = HostArray {
        shape: sh(&[2]),
        dtype: F32,
        data: HostData::Float(vec![1.0]),
    };
    let e = eval_jaxpr(&j, &[], &[ok.clone(), short]).unwrap_err();
    assert_eq!(
        e,
        EvalError::InvalidArg {
            index: 1,
            error: ArrayError::Length {
                shape: sh(&[2]),
                got: 1
            }
        }
    );
    // Wrong kind.
    let ints = HostArray {
        shape: sh(&[2]),
        dtype: F32,
        data: HostData::Int(vec![1, 2]),
    };
    let e = eval_jaxpr(&j, &[], &[ints, ok.clone()]).unwrap_err();
    assert_eq!(
        e,
        EvalError::InvalidArg {
            index: 0,
            error: ArrayError::Kind {
                dtype: F32,
                got: "int"
            }
        }
    );
    // A value not in the dtype (0.1 is not an f32).
    let off = HostArray {
        shape: sh(&[2]),
        dtype: F32,
        data: HostData::Float(vec![1.0, 0.1]),
    };
    let e = eval_jaxpr(&j, &[], &[ok, off]).unwrap_err();
    assert_eq!(
        e,
        EvalError::InvalidArg {
            index: 1,
            error: ArrayError::NotInDType {
                dtype: F32,
                position: 1
            }
        }
    );
}

fn const_jaxpr() -> Jaxpr {
    let mut b = JaxprBuilder::new();
    let c = Atom::Var(b.add_constvar(av(I8, &[2])));
    let x = invar(&mut b, av(I8, &[2]));
    let z = eqn1(&mut b, Builtin::Add, vec![c, x], none());
    b.build(vec![z]).unwrap()
}

#[test]
fn error_const_count_and_type() {
    let j = const_jaxpr();
    let x = ia(I8, &[2], &[1, 2]);
    let e = eval_jaxpr(&j, &[], std::slice::from_ref(&x)).unwrap_err();
    assert_eq!(
        e,
        EvalError::ConstCount {
            expected: 1,
            got: 0
        }
    );
    let e = eval_jaxpr(&j, &[ia(I16, &[2], &[1, 2])], std::slice::from_ref(&x)).unwrap_err();
    assert_eq!(
        e,
        EvalError::ConstType {
            index: 0,
            expected: av(I8, &[2]),
            got: av(I16, &[2])
        }
    );
    // Through a closed jaxpr: the Const's declared type fits but its value does not.
    let bad = Const::new(av(I8, &[2]), Arc::new(ia(I8, &[3], &[1, 2, 3])));
    let cj = ClosedJaxpr::new(Arc::new(const_jaxpr()), vec![bad]).unwrap();
    let e = eval_closed_jaxpr(&cj, std::slice::from_ref(&x)).unwrap_err();
    assert_eq!(
        e,
        EvalError::ConstType {
            index: 0,
            expected: av(I8, &[2]),
            got: av(I8, &[3])
        }
    );
    // And it works with the right constants.
    let got = eval_jaxpr(&j, &[ia(I8, &[2], &[127, 0])], &[x]).unwrap();
    assert_same(&got[0], &ia(I8, &[2], &[-128, 2]));
}

#[test]
fn error_invalid_const() {
    let j = const_jaxpr();
    let bad = HostArray {
        shape: sh(&[2]),
        dtype: I8,
        data: HostData::Int(vec![1, 300]),
    };
    let e = eval_jaxpr(&j, &[bad], &[ia(I8, &[2], &[1, 2])]).unwrap_err();
    assert_eq!(
        e,
        EvalError::InvalidConst {
            index: 0,
            error: ArrayError::NotInDType {
                dtype: I8,
                position: 1
            }
        }
    );
}

#[test]
fn error_missing_const_value() {
    let cj = ClosedJaxpr::with_unknown_consts(Arc::new(const_jaxpr()));
    let e = eval_closed_jaxpr(&cj, &[ia(I8, &[2], &[1, 2])]).unwrap_err();
    assert_eq!(
        e,
        EvalError::MissingConstValue {
            index: 0,
            aval: av(I8, &[2])
        }
    );
    // Also when the constant belongs to a sub-jaxpr.
    let mut b = JaxprBuilder::new();
    let x = invar(&mut b, av(I8, &[2]));
    let y = eqn1(
        &mut b,
        Builtin::Jit,
        vec![x],
        params(vec![("jaxpr", Param::Jaxpr(cj))]),
    );
    let j = b.build(vec![y]).unwrap();
    let e = eval_jaxpr(&j, &[], &[ia(I8, &[2], &[1, 2])]).unwrap_err();
    assert_eq!(
        e,
        EvalError::MissingConstValue {
            index: 0,
            aval: av(I8, &[2])
        }
    );
}

#[test]
fn error_const_not_host_array() {
    let c = Const::new(av(I8, &[2]), Arc::new(vec![1i8, 2]));
    let cj = ClosedJaxpr::new(Arc::new(const_jaxpr()), vec![c]).unwrap();
    let e = eval_closed_jaxpr(&cj, &[ia(I8, &[2], &[1, 2])]).unwrap_err();
    assert_eq!(
        e,
        EvalError::ConstNotHostArray {
            index: 0,
            aval: av(I8, &[2])
        }
    );
}

struct Twice;

impl ExtensionPrimitive for Twice {
    fn name(&self) -> &str {
        "twice"
    }
    fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        _: &Params,
    ) -> Result<Vec<AbstractValue>, String> {
        Ok(inputs.to_vec())
    }
}

#[test]
fn error_unsupported_primitive() {
    let mut b = JaxprBuilder::new();
    let x = invar(&mut b, av(F32, &[]));
    let outs = b
        .add_eqn(Primitive::Extension(Arc::new(Twice)), vec![x], none())
        .unwrap();
    let j = b.build(vec![Atom::Var(outs[0])]).unwrap();
    let e = eval_jaxpr(&j, &[], &[fa(F32, &[], &[1.0])]).unwrap_err();
    assert_eq!(
        e,
        EvalError::UnsupportedPrimitive {
            name: "twice".into()
        }
    );
}

#[test]
fn error_iteration_limit() {
    // while True: i += 1 (i wraps around forever).
    let cond = {
        let mut b = JaxprBuilder::new();
        let _i = invar(&mut b, av(I32, &[]));
        let t = lit(&mut b, LitValue::Bool(true), Bool);
        closed(b.build(vec![t]).unwrap())
    };
    let body = {
        let mut b = JaxprBuilder::new();
        let i = invar(&mut b, av(I32, &[]));
        let one = lit(&mut b, LitValue::Int(1), I32);
        let y = eqn1(&mut b, Builtin::Add, vec![i, one], none());
        closed(b.build(vec![y]).unwrap())
    };
    let mut b = JaxprBuilder::new();
    let i = invar(&mut b, av(I32, &[]));
    let outs = eqn(
        &mut b,
        Builtin::While,
        vec![i],
        params(vec![
            ("cond_jaxpr", Param::Jaxpr(cond)),
            ("body_jaxpr", Param::Jaxpr(body)),
            ("cond_nconsts", Param::Int(0)),
            ("body_nconsts", Param::Int(0)),
        ]),
    );
    let j = b.build(outs).unwrap();
    let opts = EvalOptions {
        max_loop_iterations: Some(100),
        ..EvalOptions::default()
    };
    let e = eval_jaxpr_with(&j, &[], &[ia(I32, &[], &[0])], &opts).unwrap_err();
    assert!(
        matches!(&e, EvalError::IterationLimit { limit: 100, site } if site.index == 0 && site.primitive == "while"),
        "{e:?}"
    );
    // Scan steps count too.
    let j = scan_jaxpr(4, false);
    let args = [
        fa(F32, &[], &[0.5]),
        fa(F32, &[], &[0.0]),
        ia(I32, &[], &[0]),
        HostArray::zeros(sh(&[4, 2]), F32),
        HostArray::zeros(sh(&[4]), I32),
    ];
    let opts = EvalOptions {
        max_loop_iterations: Some(3),
        ..EvalOptions::default()
    };
    assert!(matches!(
        eval_jaxpr_with(&j, &[], &args, &opts).unwrap_err(),
        EvalError::IterationLimit { limit: 3, site } if site.primitive == "scan"
    ));
    let opts = EvalOptions {
        max_loop_iterations: Some(4),
        ..EvalOptions::default()
    };
    assert!(eval_jaxpr_with(&j, &[], &args, &opts).is_ok());
}

#[test]
fn error_array_too_large() {
    let mut b = JaxprBuilder::new();
    let y = eqn1(
        &mut b,
        Builtin::Iota,
        vec![],
        params(vec![
            ("dtype", Param::DType(F32)),
            ("shape", ints(&[1 << 20, 1 << 20])),
            ("dimension", Param::Int(0)),
        ]),
    );
    let j = b.build(vec![y]).unwrap();
    let e = eval_jaxpr(&j, &[], &[]).unwrap_err();
    assert!(
        matches!(
            &e,
            EvalError::ArrayTooLarge { aval, limit: EvalOptions::DEFAULT_MAX_ARRAY_ELEMENTS, site }
                if *aval == av(F32, &[1 << 20, 1 << 20]) && site.index == 0 && site.primitive == "iota"
        ),
        "{e:?}"
    );
    let opts = EvalOptions {
        max_array_elements: Some(5),
        ..EvalOptions::default()
    };
    let e = eval_jaxpr_with(
        &add_jaxpr(),
        &[],
        &[fa(F32, &[2], &[1.0, 2.0]), fa(F32, &[2], &[1.0, 2.0])],
        &opts,
    );
    assert!(e.is_ok());
    let j = {
        let mut b = JaxprBuilder::new();
        let y = eqn1(
            &mut b,
            Builtin::Iota,
            vec![],
            params(vec![
                ("dtype", Param::DType(I32)),
                ("shape", ints(&[6])),
                ("dimension", Param::Int(0)),
            ]),
        );
        b.build(vec![y]).unwrap()
    };
    assert!(matches!(
        eval_jaxpr_with(&j, &[], &[], &opts),
        Err(EvalError::ArrayTooLarge { limit: 5, .. })
    ));
}

// `EvalError::Internal` reports a broken jaxpr invariant or an evaluator bug; no
// typechecked jaxpr with valid inputs can produce it, so no test triggers it.

// ----- HostArray -----

#[test]
fn host_array_constructors_and_comparison() {
    assert_eq!(
        HostArray::from_f64(sh(&[3]), F32, vec![1.0]).unwrap_err(),
        ArrayError::Length {
            shape: sh(&[3]),
            got: 1
        }
    );
    assert_eq!(
        HostArray::from_f64(sh(&[1]), I32, vec![1.0]).unwrap_err(),
        ArrayError::Kind {
            dtype: I32,
            got: "float"
        }
    );
    assert_eq!(
        HostArray::from_i64(sh(&[1]), Bool, vec![1]).unwrap_err(),
        ArrayError::Kind {
            dtype: Bool,
            got: "int"
        }
    );
    assert!(HostArray::scalar(F64, LitValue::Bool(true)).is_err());
    assert_eq!(HostArray::zeros(sh(&[2, 0]), F32).len(), 0);
    assert_eq!(
        HostArray::zeros(sh(&[2]), Bool).as_bool().unwrap(),
        &[false, false]
    );
    let u = HostArray::from_u64(sh(&[1]), U64, vec![u64::MAX]).unwrap();
    assert_eq!(u.as_i64().unwrap(), &[-1]);
    assert_eq!(u.to_f64_vec(), vec![u64::MAX as f64]);
    assert_eq!(u.aval(), av(U64, &[1]));

    let a = fa(F64, &[3], &[1.0, f64::NAN, f64::INFINITY]);
    let b = fa(F64, &[3], &[1.0 + 1e-9, f64::NAN, f64::INFINITY]);
    assert!(allclose(&a, &b, 1e-6, 0.0));
    assert!(!allclose(&a, &b, 1e-12, 0.0));
    assert!(!allclose(
        &a,
        &fa(F64, &[3], &[1.0, 0.0, f64::INFINITY]),
        1.0,
        1.0
    ));
    assert!(!allclose(
        &a,
        &fa(F32, &[3], &[1.0, f64::NAN, f64::INFINITY]),
        1.0,
        1.0
    ));
    assert!(!allclose(
        &ia(I32, &[1], &[1]),
        &ia(I32, &[1], &[2]),
        1.0,
        1.0
    ));
    assert!(check_close(&a, &fa(F64, &[2], &[1.0, 2.0]), 0.0, 0.0).is_err());
}

// ----- Windowed reductions (values from JAX 0.10.2) -----

fn window_params(
    dims: &[i64],
    strides: &[i64],
    padding: &[(i64, i64)],
    dilations: Option<(&[i64], &[i64])>,
) -> Vec<(&'static str, Param)> {
    let mut p = vec![
        ("window_dimensions", ints(dims)),
        ("window_strides", ints(strides)),
        ("padding", Param::Pairs(padding.to_vec().into())),
    ];
    if let Some((base, window)) = dilations {
        p.push(("base_dilation", ints(base)));
        p.push(("window_dilation", ints(window)));
    }
    p
}

#[test]
fn case_windowed() {
    let xv = [
        3.0, -1.0, 4.0, 1.0, -5.0, 9.0, 2.0, -6.0, 5.0, 3.0, 5.0, -8.0, 9.0, 7.0, -9.0, 3.0, 2.0,
        -3.0, 8.0, 4.0,
    ];
    let x = fa(F32, &[4, 5], &xv);
    // Both dilations, padding and strides at once.
    let dilated = || {
        window_params(
            &[2, 3],
            &[1, 2],
            &[(1, 0), (0, 1)],
            Some((&[2, 1], &[1, 2])),
        )
    };
    let cases = [
        (
            Builtin::ReduceWindowSum,
            [2.0, 2.0, 6.0, 6.0, 5.0, 5.0, 4.0],
        ),
        (
            Builtin::ReduceWindowMax,
            [4.0, 4.0, 9.0, 9.0, 9.0, 9.0, 4.0],
        ),
        (
            Builtin::ReduceWindowMin,
            [-5.0, -5.0, -6.0, -6.0, -9.0, -9.0, -3.0],
        ),
    ];
    for (prim, want) in cases {
        let out = run1(prim, params(dilated()), std::slice::from_ref(&x));
        assert_same(&out, &fa(F32, &[7, 1], &want));
    }
    // Integers: padding holds the least i32.
    let xi = ia(I32, &[4, 5], &xv.map(|v| v as i64));
    let p = window_params(
        &[3, 2],
        &[2, 2],
        &[(1, 1), (1, 0)],
        Some((&[1, 1], &[1, 1])),
    );
    let out = run1(
        Builtin::ReduceWindowMax,
        params(p),
        std::slice::from_ref(&xi),
    );
    assert_same(&out, &ia(I32, &[2, 3], &[9, 4, 5, 9, 9, 8]));
    // select_and_gather_add: the tangent at each window's max (0 where that is padding).
    let t = fa(F32, &[4, 5], &(0..20).map(f64::from).collect::<Vec<_>>());
    let mut p = window_params(
        &[2, 2],
        &[2, 2],
        &[(1, 0), (0, 1)],
        Some((&[1, 1], &[1, 1])),
    );
    p.push(("select_prim", Param::Str("ge".into())));
    let out = run1(
        Builtin::SelectAndGatherAdd,
        params(p),
        &[t.clone(), x.clone()],
    );
    assert_same(&out, &fa(F32, &[2, 3], &[0.0, 2.0, 4.0, 5.0, 12.0, 9.0]));
    let mut p = dilated();
    p.push(("select_prim", Param::Str("le".into())));
    let out = run1(Builtin::SelectAndGatherAdd, params(p), &[t, x.clone()]);
    assert_same(
        &out,
        &fa(F32, &[7, 1], &[4.0, 4.0, 7.0, 7.0, 14.0, 14.0, 17.0]),
    );
    // select_and_scatter_add: each source element lands on its window's max (min).
    let mut p = window_params(&[2, 2], &[2, 2], &[(1, 0), (0, 1)], None);
    p.push(("select_prim", Param::Str("ge".into())));
    let src = fa(F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = run1(Builtin::SelectAndScatterAdd, params(p), &[src, x.clone()]);
    let mut want = [0.0; 20];
    for (i, v) in [(0, 1.0), (2, 2.0), (4, 3.0), (5, 4.0), (9, 6.0), (12, 5.0)] {
        want[i] = v;
    }
    assert_same(&out, &fa(F32, &[4, 5], &want));
    let mut p = window_params(&[3, 3], &[2, 2], &[(1, 0), (0, 0)], None);
    p.push(("select_prim", Param::Str("le".into())));
    let src = fa(F32, &[2, 2], &[1.0, 2.0, 4.0, 5.0]);
    let out = run1(Builtin::SelectAndScatterAdd, params(p), &[src, x.clone()]);
    let mut want = [0.0; 20];
    for (i, v) in [(7, 3.0), (11, 4.0), (14, 5.0)] {
        want[i] = v;
    }
    assert_same(&out, &fa(F32, &[4, 5], &want));
    // The generic reduce_window: a product of floats and a sum of ints, together.
    let mut b = JaxprBuilder::new();
    let ins: Vec<Atom> = [F32, I32, F32, I32]
        .iter()
        .map(|&d| invar(&mut b, av(d, &[])))
        .collect();
    let prod = eqn1(&mut b, Builtin::Mul, vec![ins[0], ins[2]], none());
    let sum = eqn1(&mut b, Builtin::Add, vec![ins[1], ins[3]], none());
    let reducer = closed(b.build(vec![prod, sum]).unwrap());
    let mut p = window_params(
        &[2, 2],
        &[1, 2],
        &[(0, 1), (1, 0)],
        Some((&[1, 1], &[1, 1])),
    );
    p.push(("jaxpr", Param::Jaxpr(reducer)));
    p.push(("consts", ints(&[])));
    let one = fa(F32, &[], &[1.0]);
    let zero = ia(I32, &[], &[0]);
    let out = run(Builtin::ReduceWindow, params(p), &[x, xi, one, zero]);
    assert_same(
        &out[0],
        &fa(
            F32,
            &[4, 3],
            &[
                27.0, 48.0, -75.0, 45.0, 864.0, -945.0, 15.0, 432.0, -2016.0, 3.0, -6.0, 32.0,
            ],
        ),
    );
    assert_same(
        &out[1],
        &ia(I32, &[4, 3], &[12, -1, 4, 14, -3, 6, 8, 0, 10, 3, -1, 12]),
    );
}

// ----- conv_general_dilated -----

/// One convolution and its result, computed by JAX 0.10.2 on int64 operands
/// `lhs = arange % 7 - 3`, `rhs = arange % 5 - 2` (reshaped), by this script:
///
/// ```python
/// import jax, jax.numpy as jnp, numpy as np; from jax import lax
/// jax.config.update("jax_enable_x64", True)
/// l = (np.arange(np.prod(ls)) % 7 - 3).reshape(ls); r = (np.arange(np.prod(rs)) % 5 - 2).reshape(rs)
/// out = lax.conv_general_dilated(jnp.asarray(l), jnp.asarray(r), strides, padding,
///                                lhs_dilation, rhs_dilation, dn, fgc, bgc)
/// ```
struct ConvCase {
    lhs: &'static [i64],
    rhs: &'static [i64],
    strides: &'static [i64],
    padding: &'static [(i64, i64)],
    lhs_dilation: &'static [i64],
    rhs_dilation: &'static [i64],
    specs: [&'static [i64]; 3],
    groups: (i64, i64),
    out: &'static [i64],
    want: &'static [i64],
}

const CONV_CASES: &[ConvCase] = &[
    // 1d_groups_dilations
    ConvCase {
        lhs: &[2, 4, 7],
        rhs: &[6, 2, 3],
        strides: &[2],
        padding: &[(2, 1)],
        lhs_dilation: &[2],
        rhs_dilation: &[2],
        specs: [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]],
        groups: (2, 1),
        out: &[2, 6, 6],
        want: &[
            1, 3, 1, -1, -3, -5, 6, 1, 0, -1, -2, -3, -4, 4, 4, 4, 4, 4, -4, -3, -2, -1, 0, 1, 1,
            -5, -3, -1, 1, 3, 1, 3, 1, -1, -3, -5, 1, 3, 1, -1, -3, -5, 6, 1, 0, -1, -2, -3, -4, 4,
            4, 4, 4, 4, -4, -3, -2, -1, 0, 1, 1, -5, -3, -1, 1, 3, 1, 3, 1, -1, -3, -5,
        ],
    },
    // 2d_nhwc_hwio
    ConvCase {
        lhs: &[1, 5, 4, 2],
        rhs: &[2, 3, 2, 3],
        strides: &[1, 2],
        padding: &[(1, 0), (0, 1)],
        lhs_dilation: &[1, 1],
        rhs_dilation: &[1, 2],
        specs: [&[0, 3, 1, 2], &[3, 2, 0, 1], &[0, 3, 1, 2]],
        groups: (1, 1),
        out: &[1, 5, 1, 3],
        want: &[1, -6, 7, 10, -10, 10, 12, -17, -6, -14, 11, 6, -5, 11, -3],
    },
    // 1d_batch_groups_negative_pad
    ConvCase {
        lhs: &[4, 2, 6],
        rhs: &[6, 2, 2],
        strides: &[1],
        padding: &[(-1, 1)],
        lhs_dilation: &[1],
        rhs_dilation: &[1],
        specs: [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]],
        groups: (1, 2),
        out: &[2, 6, 5],
        want: &[
            3, 1, -1, -3, -4, 1, 0, -1, -2, 3, 4, 4, 4, 4, 0, 0, 1, -5, 10, -6, 1, 3, 5, 0, -1, -3,
            -5, 0, 5, 4, 0, 5, 3, 1, 0, 10, -5, 1, 0, 1, -10, -10, 4, 4, 2, -2, -1, 0, 1, 4, -3,
            -1, 1, 3, -1, 1, -1, -3, -5, -6,
        ],
    },
    // 3d_strided
    ConvCase {
        lhs: &[1, 2, 3, 4, 3],
        rhs: &[2, 2, 2, 2, 1],
        strides: &[2, 1, 2],
        padding: &[(0, 1), (1, 1), (0, 0)],
        lhs_dilation: &[1, 2, 1],
        rhs_dilation: &[1, 1, 1],
        specs: [&[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4]],
        groups: (1, 1),
        out: &[1, 2, 2, 8, 2],
        want: &[
            9, -2, -1, 4, -4, -8, 3, 1, 4, 7, -14, 5, -2, -6, 4, 2, -2, -8, 2, 2, 3, 4, -12, 2, 1,
            -5, 2, 2, -8, 7, 2, 2, -16, 5, -1, 1, 5, 5, 2, 4, -2, -2, 5, -14, 5, 5, 1, 3, 1, 7, 0,
            2, 3, -5, 3, -2, -2, 4, -1, 1, 7, -8, 2, -3,
        ],
    },
    // 0d
    ConvCase {
        lhs: &[2, 3],
        rhs: &[4, 3],
        strides: &[],
        padding: &[],
        lhs_dilation: &[],
        rhs_dilation: &[],
        specs: [&[0, 1], &[0, 1], &[0, 1]],
        groups: (1, 1),
        out: &[2, 4],
        want: &[8, -5, 2, -1, -1, -2, 2, -4],
    },
];

fn conv_params(c: &ConvCase, preferred: Param) -> Params {
    params(vec![
        ("window_strides", ints(c.strides)),
        ("padding", Param::Pairs(c.padding.into())),
        ("lhs_dilation", ints(c.lhs_dilation)),
        ("rhs_dilation", ints(c.rhs_dilation)),
        (
            "dimension_numbers",
            Param::ConvDims(Arc::new(ConvDimensionNumbers {
                lhs_spec: c.specs[0].to_vec(),
                rhs_spec: c.specs[1].to_vec(),
                out_spec: c.specs[2].to_vec(),
            })),
        ),
        ("feature_group_count", Param::Int(c.groups.0)),
        ("batch_group_count", Param::Int(c.groups.1)),
        ("precision", Param::None),
        ("preferred_element_type", preferred),
        ("out_sharding", Param::None),
    ])
}

fn conv_operand(dims: &[i64], modulus: i64, shift: i64) -> Vec<i64> {
    let n: i64 = dims.iter().product();
    (0..n).map(|i| i % modulus - shift).collect()
}

#[test]
fn case_conv_general_dilated() {
    for c in CONV_CASES {
        let l = conv_operand(c.lhs, 7, 3);
        let r = conv_operand(c.rhs, 5, 2);
        // Integer-valued floats are exact in every dtype here; ints likewise.
        for dt in [F64, F32, F16, BF16] {
            let lf: Vec<f64> = l.iter().map(|&v| v as f64).collect();
            let rf: Vec<f64> = r.iter().map(|&v| v as f64).collect();
            let want: Vec<f64> = c.want.iter().map(|&v| v as f64).collect();
            let got = run1(
                Builtin::ConvGeneralDilated,
                conv_params(c, Param::None),
                &[fa(dt, c.lhs, &lf), fa(dt, c.rhs, &rf)],
            );
            assert_same(&got, &fa(dt, c.out, &want));
        }
        for dt in [I64, I32, I16] {
            let got = run1(
                Builtin::ConvGeneralDilated,
                conv_params(c, Param::None),
                &[ia(dt, c.lhs, &l), ia(dt, c.rhs, &r)],
            );
            assert_same(&got, &ia(dt, c.out, c.want));
        }
    }
    // i8 products wrap in i8 unless a preferred element type widens them.
    let c = &CONV_CASES[4];
    let l: Vec<i64> = vec![100; 6];
    let r: Vec<i64> = vec![1, 1, 1, 2, 2, 2, -1, 0, 0, 0, 0, 0];
    let got = run1(
        Builtin::ConvGeneralDilated,
        conv_params(c, Param::None),
        &[ia(I8, c.lhs, &l), ia(I8, c.rhs, &r)],
    );
    let wide = [300, 600, -100, 0, 300, 600, -100, 0];
    let wrapped: Vec<i64> = wide.iter().map(|&v: &i64| v as i8 as i64).collect();
    assert_same(&got, &ia(I8, c.out, &wrapped));
    let got = run1(
        Builtin::ConvGeneralDilated,
        conv_params(c, Param::DType(I32)),
        &[ia(I8, c.lhs, &l), ia(I8, c.rhs, &r)],
    );
    assert_same(&got, &ia(I32, c.out, &wide));
    // bool: OR of ANDs.
    let got = run1(
        Builtin::ConvGeneralDilated,
        conv_params(c, Param::None),
        &[
            ba(c.lhs, &[true, false, false, false, false, false]),
            ba(
                c.rhs,
                &[
                    true, false, false, false, true, false, false, false, false, true, true, true,
                ],
            ),
        ],
    );
    assert_same(
        &got,
        &ba(
            c.out,
            &[true, false, false, true, false, false, false, false],
        ),
    );
}

#[test]
fn conv_general_dilated_respects_the_work_limit() {
    // 64 outputs x 64 input features x 64 taps = 2^18 multiply-adds.
    let c = ConvCase {
        lhs: &[1, 64, 127],
        rhs: &[64, 64, 64],
        strides: &[1],
        padding: &[(0, 0)],
        lhs_dilation: &[1],
        rhs_dilation: &[1],
        specs: [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]],
        groups: (1, 1),
        out: &[1, 64, 64],
        want: &[],
    };
    let mut b = JaxprBuilder::new();
    let x = invar(&mut b, av(F32, c.lhs));
    let w = invar(&mut b, av(F32, c.rhs));
    let outs = eqn(
        &mut b,
        Builtin::ConvGeneralDilated,
        vec![x, w],
        conv_params(&c, Param::None),
    );
    let j = b.build(outs).unwrap();
    let args = [
        fa(F32, c.lhs, &vec![1.0; 64 * 127]),
        fa(F32, c.rhs, &vec![1.0; 64 * 64 * 64]),
    ];
    let tight = EvalOptions {
        max_work: Some(1 << 17),
        ..EvalOptions::default()
    };
    assert!(matches!(
        eval_jaxpr_with(&j, &[], &args, &tight),
        Err(EvalError::WorkLimit { .. })
    ));
    let out = eval_jaxpr(&j, &[], &args).unwrap();
    assert_same(&out[0], &fa(F32, c.out, &vec![4096.0; 64 * 64]));
}

// ----- Typed PRNG keys -----
//
// Expected words printed by JAX 0.10.2 (JAX_ENABLE_X64=1) with jax._src.random.prng's
// primitives on impl = jax.random.key(0)._impl, e.g.
// `jax.random.key_data(P.random_split(P.random_wrap(d, impl=impl), (3,)))`.

/// A key from its two words, as the evaluator stores it (`(w0 << 32) | w1`).
fn key_word(w0: u32, w1: u32) -> i64 {
    ((u64::from(w0) << 32) | u64::from(w1)) as i64
}

fn key_array(dims: &[i64], words: &[u32]) -> HostArray {
    let packed: Vec<i64> = words.chunks(2).map(|w| key_word(w[0], w[1])).collect();
    ia(DType::KeyFry, dims, &packed)
}

fn fry() -> Params {
    params(vec![("impl", Param::Str("fry".into()))])
}

/// `[[0, 42], [7, 0xdeadbeef]]` as keys.
fn two_keys() -> HostArray {
    key_array(&[2], &[0, 42, 7, 0xdead_beef])
}

#[test]
fn case_random_seed() {
    let cases: [(DType, Vec<i64>, Vec<u32>); 4] = [
        (I32, vec![0, -1, 5], vec![0, 0, 0, 0xffff_ffff, 0, 5]),
        (
            I64,
            vec![-1, (1 << 40) + 3],
            vec![0xffff_ffff, 0xffff_ffff, 0x100, 3],
        ),
        (I8, vec![-1], vec![0, 0xffff_ffff]),
        (U64, vec![(1u64 << 63) as i64 + 5], vec![0x8000_0000, 5]),
    ];
    for (dtype, seeds, words) in cases {
        let n = seeds.len() as i64;
        let got = run1(Builtin::RandomSeed, fry(), &[ia(dtype, &[n], &seeds)]);
        assert_same(&got, &key_array(&[n], &words));
    }
}

#[test]
fn case_random_wrap_unwrap_clone() {
    let data = ia(U32, &[2, 2], &[0, 42, 7, 0xdead_beef]);
    let keys = run1(Builtin::RandomWrap, fry(), std::slice::from_ref(&data));
    assert_same(&keys, &two_keys());
    assert_same(
        &run1(Builtin::RandomClone, none(), std::slice::from_ref(&keys)),
        &keys,
    );
    assert_same(&run1(Builtin::RandomUnwrap, none(), &[keys]), &data);
}

#[test]
fn case_random_split() {
    let got = run1(
        Builtin::RandomSplit,
        params(vec![("shape", ints(&[3]))]),
        &[two_keys()],
    );
    let want = [
        0x6d3e_048f,
        0x1022_172d,
        0x03d7_b32d,
        0xadd0_83f4,
        0x92fb_20ea,
        0x0f38_d913,
        0x1089_df83,
        0x216e_df90,
        0xdf93_3d0b,
        0xea38_b303,
        0xe7ee_18d0,
        0x23bf_d145,
    ];
    assert_same(&got, &key_array(&[2, 3], &want));
    // An empty shape hashes counter 0 only.
    let got = run1(
        Builtin::RandomSplit,
        params(vec![("shape", ints(&[]))]),
        &[two_keys()],
    );
    let want = [0x6d3e_048f, 0x1022_172d, 0x1089_df83, 0x216e_df90];
    assert_same(&got, &key_array(&[2], &want));
}

#[test]
fn case_random_fold_in() {
    let msgs = ia(U32, &[2], &[0, 0xffff_ffff]);
    let got = run1(Builtin::RandomFoldIn, none(), &[two_keys(), msgs]);
    let want = [0x6d3e_048f, 0x1022_172d, 0x7f8e_0f3e, 0xce89_e4a9];
    assert_same(&got, &key_array(&[2], &want));
    let got = run1(
        Builtin::RandomFoldIn,
        none(),
        &[two_keys(), ia(U32, &[], &[3])],
    );
    let want = [0xbad5_6946, 0x354b_a891, 0x6356_b461, 0x7b39_6f1e];
    assert_same(&got, &key_array(&[2], &want));
}

#[test]
fn case_random_bits() {
    let cases: [(i64, DType, [u64; 4]); 4] = [
        (8, U8, [0xa2, 0xd9, 0x13, 0x08]),
        (16, DType::U16, [0x13a2, 0x30d9, 0x0013, 0x8e08]),
        (
            32,
            U32,
            [0x7d1c_13a2, 0xae07_30d9, 0x31e7_0013, 0x35ab_8e08],
        ),
        (
            64,
            U64,
            [
                0x6d3e_048f_1022_172d,
                0x03d7_b32d_add0_83f4,
                0x1089_df83_216e_df90,
                0xdf93_3d0b_ea38_b303,
            ],
        ),
    ];
    for (width, dtype, want) in cases {
        let got = run1(
            Builtin::RandomBits,
            params(vec![
                ("bit_width", Param::Int(width)),
                ("shape", ints(&[2])),
            ]),
            &[two_keys()],
        );
        let want = HostArray::from_u64(sh(&[2, 2]), dtype, want.to_vec()).unwrap();
        assert_same(&got, &want);
    }
}

#[test]
fn case_igamma() {
    // JAX 0.10.2's values in float64 (jax_enable_x64), the edges included: a = 0, x = 0,
    // x = inf, a < 0 and NaN.
    let a = [0.5, 1.0, 2.5, 3.0, 0.1, 10.0, 4.0, 0.0, 2.0, 2.0, -1.0, 1.0];
    let x = [
        0.3,
        2.0,
        1.5,
        7.0,
        0.05,
        9.0,
        30.0,
        2.0,
        0.0,
        f64::INFINITY,
        1.0,
        f64::NAN,
    ];
    let nan = f64::NAN;
    let p = [
        0.561421973919,
        0.8646647167633873,
        0.30001416412137233,
        0.9703638361194782,
        0.7755386354510305,
        0.41259175566805856,
        0.9999999995338968,
        1.0,
        0.0,
        1.0,
        nan,
        nan,
    ];
    let q = [
        0.43857802608100005,
        0.1353352832366127,
        0.6999858358786277,
        0.02963616388052181,
        0.22446136454896948,
        0.5874082443319415,
        4.661032000779303e-10,
        0.0,
        1.0,
        0.0,
        nan,
        nan,
    ];
    let dp = [
        -0.770570351375352,
        -0.22082542621185935,
        -0.2521754004236276,
        -0.03499641585220028,
        -2.0264226621003973,
        -0.12703651192426801,
        -1.0163789369274939e-09,
        nan,
        0.0,
        nan,
        nan,
        nan,
    ];
    for (prim, want) in [
        (Builtin::Igamma, p),
        (Builtin::Igammac, q),
        (Builtin::IgammaGradA, dp),
    ] {
        let got = bin(prim, fa(F64, &[12], &a), fa(F64, &[12], &x));
        assert_close(&got, &fa(F64, &[12], &want), 1e-12, 1e-300);
    }
    // A rank-0 operand broadcasts; f32 rounds.
    let got = bin(
        Builtin::Igamma,
        fa(F32, &[2], &[1.0, 3.0]),
        fa(F32, &[], &[2.0]),
    );
    let want = [
        (1.0 - (-2.0f64).exp()) as f32 as f64,
        0.323_323_583_816_936_6_f64 as f32 as f64,
    ];
    assert_close(&got, &fa(F32, &[2], &want), 0.0, 0.0);
}
