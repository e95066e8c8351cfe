//! The transpose pass: each rule, random compositions of them, fan-out, symbolic zeros
//! and the errors, checked with the dot-product test `<ct, L(t)> == <L^T(ct), t>`
//! through the reference evaluator.

mod common_build;

use common_build::*;
use ferrax_ir::eval::{eval_jaxpr, HostArray};
use ferrax_ir::generate::Rng;
use ferrax_ir::passes::{transpose, PassError};
use ferrax_ir::text::parse_jaxpr;
use ferrax_ir::{
    typecheck, AbstractValue, Atom, Builtin, ClosedJaxpr, ConvDimensionNumbers, DType,
    DotDimensionNumbers, ExtensionPrimitive, Jaxpr, JaxprBuilder, Param, Params, Primitive, Shape,
    VarId,
};
use std::sync::Arc;

fn uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A random value of this type: floats in [lo, hi], bools, small integers.
fn random_value(rng: &mut Rng, aval: &AbstractValue, lo: f64, hi: f64) -> HostArray {
    let n = aval.shape.size() as usize;
    let shape = aval.shape.clone();
    match aval.dtype {
        DType::Bool => HostArray::from_bool(shape, (0..n).map(|_| rng.chance(0.5)).collect()),
        d if d.is_int() => {
            HostArray::from_i64(shape, d, (0..n).map(|_| rng.below(3) as i64).collect())
        }
        d => HostArray::from_f64(shape, d, (0..n).map(|_| uniform(rng, lo, hi)).collect()),
    }
    .unwrap()
}

fn inner(a: &HostArray, b: &HostArray) -> f64 {
    assert_eq!(a.aval().shape, b.aval().shape);
    a.to_f64_vec()
        .iter()
        .zip(b.to_f64_vec())
        .map(|(x, y)| x * y)
        .sum()
}

/// Transposes `j` (linear in `linear`), typechecks the result, checks its signature and
/// runs the dot-product test on a few random points.
fn dot_test(j: &Jaxpr, linear: &[bool], seed: u64) -> Jaxpr {
    let tj = transpose(j, linear).unwrap_or_else(|e| panic!("{e}\n{j}"));
    dot_check(j, tj, linear, seed)
}

/// The dot-product test of `tj` as the transpose of `j` (the signature, then random
/// points through the evaluator).
fn dot_check(j: &Jaxpr, tj: Jaxpr, linear: &[bool], seed: u64) -> Jaxpr {
    typecheck(&tj).unwrap();
    let in_avals = j.in_avals();
    let nonlin: Vec<&AbstractValue> = in_avals
        .iter()
        .zip(linear)
        .filter(|(_, &l)| !l)
        .map(|(a, _)| a)
        .collect();
    let lin: Vec<&AbstractValue> = in_avals
        .iter()
        .zip(linear)
        .filter(|(_, &l)| l)
        .map(|(a, _)| a)
        .collect();
    let t_in = tj.in_avals();
    assert_eq!(t_in.len(), nonlin.len() + j.outvars().len());
    for (a, b) in t_in
        .iter()
        .zip(nonlin.iter().copied().chain(&j.out_avals()))
    {
        assert!(a.same_type(b), "{a} vs {b}");
    }
    let t_out = tj.out_avals();
    assert_eq!(t_out.len(), lin.len());
    for (a, b) in t_out.iter().zip(&lin) {
        assert!(a.same_type(b), "{a} vs {b}\n{tj}");
    }
    let mut rng = Rng::new(seed);
    for _ in 0..3 {
        let consts: Vec<HostArray> = j
            .const_avals()
            .iter()
            .map(|a| random_value(&mut rng, a, 0.5, 1.5))
            .collect();
        let mut args = Vec::new();
        let mut nl_args = Vec::new();
        let mut ts = Vec::new();
        for (a, &l) in in_avals.iter().zip(linear) {
            if l {
                let t = random_value(&mut rng, a, -1.0, 1.0);
                ts.push(t.clone());
                args.push(t);
            } else {
                let x = random_value(&mut rng, a, 0.5, 1.5);
                nl_args.push(x.clone());
                args.push(x);
            }
        }
        let ys = eval_jaxpr(j, &consts, &args).unwrap();
        let cts: Vec<HostArray> = j
            .out_avals()
            .iter()
            .map(|a| random_value(&mut rng, a, -1.0, 1.0))
            .collect();
        let lhs: f64 = cts.iter().zip(&ys).map(|(c, y)| inner(c, y)).sum();
        let mut targs = nl_args;
        targs.extend(cts.iter().cloned());
        let tcts = eval_jaxpr(&tj, &consts, &targs).unwrap();
        let rhs: f64 = tcts.iter().zip(&ts).map(|(c, t)| inner(c, t)).sum();
        let scale = 1.0 + lhs.abs().max(rhs.abs());
        assert!(
            (lhs - rhs).abs() <= tolerance(j) * scale,
            "dot-product test failed: {lhs} vs {rhs}\n{j}\n{tj}"
        );
    }
    tj
}

/// Relative tolerance of the dot-product test: half-precision values round the
/// cotangents to 8 (bf16) or 11 (f16) bits.
fn tolerance(j: &Jaxpr) -> f64 {
    let half = j
        .in_avals()
        .iter()
        .chain(&j.out_avals())
        .any(|a| matches!(a.dtype, DType::BF16 | DType::F16));
    if half {
        2e-2
    } else {
        1e-4
    }
}

fn parse(text: &str) -> Jaxpr {
    parse_jaxpr(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn prims(j: &Jaxpr) -> Vec<&str> {
    j.eqns().iter().map(|e| e.primitive().name()).collect()
}

/// One small linear jaxpr per rule: (text, linear flags).
const RULES: &[(&str, &[bool])] = &[
    (
        "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = add a b in (c,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[2,3] b:f32[2,3]. let c:f32[2,3] = add_any a b in (c,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = sub a b in (c,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[2,3]. let c:f32[2,3] = neg a in (c,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,3] b:f32[2,3]. let c:f32[2,3] = mul a b in (c,) }",
        &[false, true],
    ),
    (
        "{ lambda ; a:f32[2,3] b:f32[2,3]. let c:f32[2,3] = mul b a in (c,) }",
        &[false, true],
    ),
    (
        "{ lambda ; a:f32[2,3]. let c:f32[2,3] = mul a 3.0:f32[] in (c,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,3] b:f32[2,3]. let c:f32[2,3] = div b a in (c,) }",
        &[false, true],
    ),
    (
        "{ lambda ; a:f32[2,3]. let b:f64[2,3] = convert_element_type[new_dtype=float64 weak_type=False] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,3]. let b:f32[2,3] = copy a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,3,4]. let b:f32[3] = reduce_sum[axes=(0, 2)] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,3]. let b:f32[] = reduce_sum[axes=(0, 1)] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[3]. let b:f32[2,3,4] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 3, 4) sharding=None] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[1,3]. let b:f32[2,4,3] = broadcast_in_dim[broadcast_dimensions=(1, 2) shape=(2, 4, 3) sharding=None] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[]. let b:f32[2,3] = broadcast_in_dim[broadcast_dimensions=() shape=(2, 3) sharding=None] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,6]. let b:f32[3,4] = reshape[dimensions=None new_sizes=(3, 4) sharding=None] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,6]. let b:f32[3,4] = reshape[dimensions=(1, 0) new_sizes=(3, 4) sharding=None] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,3,4]. let b:f32[4,2,3] = transpose[permutation=(2, 0, 1)] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,1,3,1]. let b:f32[2,3] = squeeze[dimensions=(3, 1)] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,3]. let b:f32[1,2,3,1] = expand_dims[dimensions=(0, 3)] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; p:bool[2,3] a:f32[2,3] b:f32[2,3]. let c:f32[2,3] = select_n p a b in (c,) }",
        &[false, true, true],
    ),
    (
        "{ lambda ; p:i32[] a:f32[2,3] b:f32[2,3] c:f32[2,3]. let d:f32[2,3] = select_n p a b c in (d,) }",
        &[false, true, false, true],
    ),
    (
        "{ lambda ; a:f32[3,4] b:f32[4,5]. let c:f32[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b in (c,) }",
        &[true, false],
    ),
    (
        "{ lambda ; a:f32[3,4] b:f32[4,5]. let c:f32[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b in (c,) }",
        &[false, true],
    ),
    (
        "{ lambda ; c:f32[2,3,4] d:f32[2,4,5]. let h:f32[2,3,5] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] c d in (h,) }",
        &[true, false],
    ),
    (
        "{ lambda ; c:f32[2,3,4] d:f32[2,4,5]. let h:f32[2,3,5] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] c d in (h,) }",
        &[false, true],
    ),
    (
        "{ lambda ; c:f32[4,2,3,5] d:f32[3,6,2,4]. let h:f32[2,5,6] = dot_general[dimension_numbers=(([0, 2], [3, 0]), ([1], [2]))] c d in (h,) }",
        &[true, false],
    ),
    (
        "{ lambda ; c:f32[4,2,3,5] d:f32[3,6,2,4]. let h:f32[2,5,6] = dot_general[dimension_numbers=(([0, 2], [3, 0]), ([1], [2]))] c d in (h,) }",
        &[false, true],
    ),
    (
        "{ lambda ; a:f32[3] b:f32[4]. let c:f32[3,4] = dot_general[dimension_numbers=(([], []), ([], []))] a b in (c,) }",
        &[false, true],
    ),
    (
        "{ lambda ; a:f32[4,5]. let b:f32[4,5] = rev[dimensions=(1, 0)] a in (b,) }",
        &[true],
    ),
    // JAX's rule: the cotangent rounded the same way (linear up to that rounding).
    (
        "{ lambda ; a:f32[4,5] k:f32[]. let b:f32[4,5] = mul a k \
         c:f32[4,5] = reduce_precision[exponent_bits=8 mantissa_bits=20] b in (c,) }",
        &[true, false],
    ),
    (
        "{ lambda ; a:f32[2,3] b:f32[2,4] c:f32[2,1]. let d:f32[2,8] = concatenate[dimension=1] a b c in (d,) }",
        &[true, true, true],
    ),
    (
        "{ lambda ; a:f32[4,5]. let b:f32[2,3] = slice[limit_indices=(3, 5) start_indices=(1, 2) strides=None] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[4,5]. let b:f32[2,3] = slice[limit_indices=(3, 5) start_indices=(1, 2) strides=(1, 1)] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[7,5]. let b:f32[3,2] = slice[limit_indices=(7, 5) start_indices=(1, 0) strides=(2, 3)] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[6,5]. let b:f32[2,1] = slice[limit_indices=(5, 2) start_indices=(1, 1) strides=(3, 2)] a in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,3] v:f32[]. let b:f32[3,5] = pad[padding_config=((1, -1, 1), (0, 2, 0))] a v in (b,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[2,3]. let b:f32[3,5] = pad[padding_config=((-1, 0, 2), (2, -2, 1))] a 0.0:f32[] in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; v:f32[]. let a:f32[4] = broadcast_in_dim[broadcast_dimensions=() shape=(4,) sharding=None] 0.0:f32[]; b:f32[9] = pad[padding_config=((2, 3, 0),)] a v in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[2,0] v:f32[]. let b:f32[0,1] = pad[padding_config=((-1, -1, 0), (1, 0, 3))] a v in (b,) }",
        &[true, true],
    ),
    (
        "{ lambda ; v:f32[]. let b:f32[] = pad[padding_config=()] v v in (b,) }",
        &[true],
    ),
    (
        "{ lambda ; a:f32[4,5] i:i32[] j:i32[]. let b:f32[3,3] = dynamic_slice[slice_sizes=(3, 3)] a i j in (b,) }",
        &[true, false, false],
    ),
    (
        "{ lambda ; a:f32[4,5] u:f32[3,2] i:i32[] j:i32[]. let b:f32[4,5] = dynamic_update_slice a u i j in (b,) }",
        &[true, true, false, false],
    ),
    (
        "{ lambda ; a:f32[3,4] b:i32[2,1]. let c:f32[2,4] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) mode=GatherScatterMode.CLIP slice_sizes=(1, 4)] a b in (c,) }",
        &[true, false],
    ),
    (
        "{ lambda ; a:f32[5,4] b:i32[3,1]. let c:f32[3,2,3] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) mode=GatherScatterMode.FILL_OR_DROP fill_value=None slice_sizes=(2, 3)] a b in (c,) }",
        &[true, false],
    ),
    (
        "{ lambda ; a:f32[2,3,4] b:i32[2,1]. let c:f32[2,4] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(1,), operand_batching_dims=(0,), start_indices_batching_dims=(0,)) mode=GatherScatterMode.CLIP slice_sizes=(1, 1, 4)] a b in (c,) }",
        &[true, false],
    ),
    (
        "{ lambda ; a:f32[4,3] b:i32[2,1] c:f32[2,3]. let d:f32[4,3] = scatter-add[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) mode=GatherScatterMode.FILL_OR_DROP] a b c in (d,) }",
        &[true, false, true],
    ),
    (
        "{ lambda ; a:f32[5,4] k:i32[3,2] f:f32[3]. let s:f32[5,4] = scatter-add[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1), scatter_dims_to_operand_dims=(0, 1), operand_batching_dims=(), scatter_indices_batching_dims=()) indices_are_sorted=False mode=GatherScatterMode.CLIP unique_indices=False update_consts=() update_jaxpr=None] a k f in (s,) }",
        &[true, false, true],
    ),
    (
        "{ lambda ; a:f32[4,3] b:f32[3,3]. let i:i32[3,1] = iota[dimension=0 dtype=int32 shape=(3, 1) sharding=None]; k:i32[3,1] = mul i 2:i32[]; d:f32[4,3] = scatter[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) mode=GatherScatterMode.FILL_OR_DROP unique_indices=True] a k b in (d,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[4,3] b:f32[3,3]. let i:i32[3,1] = iota[dimension=0 dtype=int32 shape=(3, 1) sharding=None]; k:i32[3,1] = mul i 2:i32[]; d:f32[4,3] = scatter[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) mode=GatherScatterMode.CLIP unique_indices=True] a k b in (d,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[4,3] b:f32[3,3]. let i:i32[3,1] = iota[dimension=0 dtype=int32 shape=(3, 1) sharding=None]; k:i32[3,1] = mul i 1:i32[]; d:f32[4,3] = scatter-sub[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) mode=GatherScatterMode.FILL_OR_DROP] a k b in (d,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[4,3] b:f32[3,3]. let i:i32[3,1] = iota[dimension=0 dtype=int32 shape=(3, 1) sharding=None]; k:i32[3,1] = mul i 0:i32[]; d:f32[4,3] = scatter-sub[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) mode=GatherScatterMode.CLIP] a k b in (d,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[4,3] b:f32[3,3]. let i:i32[3,1] = iota[dimension=0 dtype=int32 shape=(3, 1) sharding=None]; k:i32[3,1] = mul i 0:i32[]; d:f32[4,3] = scatter-mul[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) mode=GatherScatterMode.CLIP] a k b in (d,) }",
        &[true, false],
    ),
    (
        "{ lambda ; a:f32[4,3] b:f32[3,3]. let i:i32[3,1] = iota[dimension=0 dtype=int32 shape=(3, 1) sharding=None]; k:i32[3,1] = mul i 2:i32[]; d:f32[4,3] = scatter-mul[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) mode=GatherScatterMode.FILL_OR_DROP unique_indices=True] a k b in (d,) }",
        &[true, false],
    ),
    // Linear in the updates, the map is affine (x outside the windows): its linear part
    // is the difference with the updates zero.
    (
        "{ lambda ; a:f32[4,3] b:f32[3,3]. let i:i32[3,1] = iota[dimension=0 dtype=int32 shape=(3, 1) sharding=None]; k:i32[3,1] = mul i 2:i32[]; d:f32[4,3] = scatter-mul[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) mode=GatherScatterMode.FILL_OR_DROP unique_indices=True] a k b; z:f32[3,3] = broadcast_in_dim[broadcast_dimensions=() shape=(3, 3) sharding=None] 0.0:f32[]; e:f32[4,3] = scatter-mul[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) mode=GatherScatterMode.FILL_OR_DROP unique_indices=True] a k z; f:f32[4,3] = sub d e in (f,) }",
        &[false, true],
    ),
    // Mixed dtypes: the cotangent comes back in each operand's dtype.
    (
        "{ lambda ; a:f32[3,4] b:f64[4,5]. let c:f64[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b in (c,) }",
        &[true, false],
    ),
    (
        "{ lambda ; a:bf16[3,4] b:bf16[4,5]. let c:f32[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] a b in (c,) }",
        &[false, true],
    ),
    (
        "{ lambda ; e:i8[4] f:i8[4]. let k:i32[] = dot_general[dimension_numbers=(([0], [0]), ([], [])) preferred_element_type=int32] e f in (k,) }",
        &[true, false],
    ),
    // Implicit broadcasting of binary operands: size-1 dimensions and rank 0.
    (
        "{ lambda ; a:f32[1,3] b:f32[4,3]. let c:f32[4,3] = add a b in (c,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[4,1] b:f32[1,3]. let c:f32[4,3] = sub a b in (c,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[] b:f32[4,3]. let c:f32[4,3] = add b a in (c,) }",
        &[true, true],
    ),
    (
        "{ lambda ; a:f32[4,3] b:f32[1,3]. let c:f32[4,3] = mul a b in (c,) }",
        &[false, true],
    ),
    (
        "{ lambda ; a:f32[4,3] b:f32[]. let c:f32[4,3] = mul a b in (c,) }",
        &[false, true],
    ),
    (
        "{ lambda ; a:f32[1,3] b:f32[4,1]. let c:f32[4,3] = div a b in (c,) }",
        &[true, false],
    ),
    (
        "{ lambda ; a:f32[4,3] b:f32[]. let c:f32[4,3] = mul b a in (c,) }",
        &[true, false],
    ),
];

#[test]
fn every_rule_passes_the_dot_product_test() {
    for (k, (text, linear)) in RULES.iter().enumerate() {
        dot_test(&parse(text), linear, k as u64);
    }
}

#[test]
fn forward_equations_are_copied_and_constvars_kept() {
    // exp depends only on the non-linear input: evaluated forward in the transpose.
    let j = parse(
        "{ lambda a:f32[3]; x:f32[3] t:f32[3]. let e:f32[3] = exp x; f:f32[3] = mul e a; \
         g:f32[3] = mul t f in (g,) }",
    );
    let tj = dot_test(&j, &[false, true], 7);
    assert_eq!(tj.constvars().len(), 1);
    assert_eq!(prims(&tj), vec!["exp", "mul", "mul"]);
}

#[test]
fn fan_out_is_summed_once_per_extra_use() {
    let j = parse(
        "{ lambda ; x:f32[3] t:f32[3]. let a:f32[3] = mul x t; b:f32[3] = neg t; \
         c:f32[3] = add a b; d:f32[3] = add c t in (d,) }",
    );
    let tj = dot_test(&j, &[false, true], 3);
    // t is used 3 times: 2 add_any accumulate its cotangent (and no plain add).
    let count = |name: &str| prims(&tj).iter().filter(|&&p| p == name).count();
    assert_eq!((count("add_any"), count("add")), (2, 0), "{tj}");
}

#[test]
fn reduce_precision_transposes_to_itself() {
    // JAX's rule: the cotangent rounded to the same format (linear only up to that
    // rounding, so no dot-product test at 2 mantissa bits: RULES has one at 20).
    let j = parse(
        "{ lambda ; t:f32[3]. let b:f32[3] = reduce_precision[exponent_bits=5 mantissa_bits=2] t \
         in (b,) }",
    );
    let tj = transpose(&j, &[true]).unwrap();
    typecheck(&tj).unwrap();
    assert_eq!(prims(&tj), ["reduce_precision"], "{tj}");
    let p = tj.eqns()[0].params();
    assert_eq!(p.get("exponent_bits"), Some(&Param::Int(5)));
    assert_eq!(p.get("mantissa_bits"), Some(&Param::Int(2)));
}

#[test]
fn unused_linear_inputs_get_zeros() {
    let j = parse("{ lambda ; t:f32[2,3] u:i32[4] s:f32[2]. let b:f32[2,3] = neg t in (b,) }");
    let tj = dot_test(&j, &[true, true, true], 5);
    assert_eq!(tj.out_avals()[1], i32s(&[4]));
    let mut rng = Rng::new(1);
    let ct = random_value(&mut rng, &f32s(&[2, 3]), -1.0, 1.0);
    let outs = eval_jaxpr(&tj, &[], &[ct]).unwrap();
    assert_eq!(outs[1].to_f64_vec(), vec![0.0; 4]);
    assert_eq!(outs[2].to_f64_vec(), vec![0.0; 2]);
}

#[test]
fn outputs_without_cotangent_paths_and_literal_outputs() {
    // One output does not depend on t (a literal), one is t itself.
    let j = parse("{ lambda ; t:f32[3]. let  in (1.0:f32[], t) }");
    let tj = transpose(&j, &[true]).unwrap();
    typecheck(&tj).unwrap();
    assert_eq!(tj.in_avals(), vec![f32s(&[]), f32s(&[3])]);
    assert!(tj.eqns().is_empty());
}

#[test]
fn no_linear_inputs() {
    let j = parse("{ lambda ; x:f32[3]. let y:f32[3] = sin x in (y,) }");
    let tj = transpose(&j, &[false]).unwrap();
    assert!(tj.outvars().is_empty());
    assert_eq!(tj.in_avals().len(), 2);
}

/// A random chain of the rules over a linear input, with fan-out (earlier linear values
/// added back in) and a second linear input.
fn random_chain(seed: u64, steps: usize) -> (Jaxpr, Vec<bool>) {
    let mut rng = Rng::new(seed);
    let mut b = JaxprBuilder::new();
    let mut linear = Vec::new();
    let lin_invar = |b: &mut JaxprBuilder, linear: &mut Vec<bool>, av, l| {
        linear.push(l);
        b.add_invar(av)
    };
    let shape0 = [2i64, 3];
    let mut x = lin_invar(&mut b, &mut linear, f32s(&shape0), true);
    let second = lin_invar(&mut b, &mut linear, f32s(&shape0), true);
    let mut seen: Vec<VarId> = vec![x];
    let mut second_used = false;
    for _ in 0..steps {
        let av = b.var_aval(x).unwrap().clone();
        let dims = av.shape.dims().to_vec();
        let rank = dims.len();
        let p = |pairs: Vec<(&str, Param)>| Params::new(pairs);
        x = match rng.below(15) {
            0 => op(&mut b, Builtin::Neg, &[v(x)]),
            1 => {
                let c = lin_invar(&mut b, &mut linear, av.clone(), false);
                if rng.chance(0.5) {
                    op(&mut b, Builtin::Mul, &[v(c), v(x)])
                } else {
                    op(&mut b, Builtin::Div, &[v(x), v(c)])
                }
            }
            2 => {
                // Fan-out: add an earlier linear value of the same shape (or `second`).
                let same: Vec<VarId> = seen
                    .iter()
                    .copied()
                    .filter(|&s| b.var_aval(s).unwrap().shape == av.shape)
                    .collect();
                let o = if !second_used && dims == shape0 {
                    second_used = true;
                    second
                } else {
                    same[rng.below(same.len())]
                };
                let prim = if rng.chance(0.5) {
                    Builtin::Add
                } else {
                    Builtin::Sub
                };
                op(&mut b, prim, &[v(x), v(o)])
            }
            3 if rank >= 1 => {
                let axis = rng.below(rank) as i64;
                op_p(
                    &mut b,
                    Builtin::ReduceSum,
                    &[v(x)],
                    p(vec![("axes", Param::ints(&[axis]))]),
                )[0]
            }
            4 if rank < 3 => {
                let mut shape = vec![2i64];
                shape.extend(&dims);
                let bd: Vec<i64> = (1..=rank as i64).collect();
                op_p(
                    &mut b,
                    Builtin::BroadcastInDim,
                    &[v(x)],
                    p(vec![
                        ("shape", Param::ints(&shape)),
                        ("broadcast_dimensions", Param::ints(&bd)),
                    ]),
                )[0]
            }
            5 if rank >= 2 => {
                let perm: Vec<i64> = (0..rank as i64).rev().collect();
                op_p(
                    &mut b,
                    Builtin::Transpose,
                    &[v(x)],
                    p(vec![("permutation", Param::ints(&perm))]),
                )[0]
            }
            6 => {
                let n: i64 = dims.iter().product();
                op_p(
                    &mut b,
                    Builtin::Reshape,
                    &[v(x)],
                    p(vec![("new_sizes", Param::ints(&[n]))]),
                )[0]
            }
            7 => {
                let e = op_p(
                    &mut b,
                    Builtin::ExpandDims,
                    &[v(x)],
                    p(vec![("dimensions", Param::ints(&[0]))]),
                )[0];
                // Stretch the new size-1 dimension by an implicit broadcast.
                let mut big = vec![3i64];
                big.extend(&dims);
                let c = lin_invar(&mut b, &mut linear, f32s(&big), false);
                let m = op(&mut b, Builtin::Mul, &[v(e), v(c)]);
                let s = op_p(
                    &mut b,
                    Builtin::ReduceSum,
                    &[v(m)],
                    p(vec![("axes", Param::ints(&[0]))]),
                )[0];
                let e2 = op_p(
                    &mut b,
                    Builtin::ExpandDims,
                    &[v(s)],
                    p(vec![("dimensions", Param::ints(&[rank as i64]))]),
                )[0];
                op_p(
                    &mut b,
                    Builtin::Squeeze,
                    &[v(e2)],
                    p(vec![("dimensions", Param::ints(&[rank as i64]))]),
                )[0]
            }
            8 => {
                let up = op_p(
                    &mut b,
                    Builtin::ConvertElementType,
                    &[v(x)],
                    p(vec![("new_dtype", Param::DType(DType::F64))]),
                )[0];
                op_p(
                    &mut b,
                    Builtin::ConvertElementType,
                    &[v(up)],
                    p(vec![("new_dtype", Param::DType(DType::F32))]),
                )[0]
            }
            9 => {
                let pav = AbstractValue::new(av.shape.clone(), DType::Bool);
                let pred = lin_invar(&mut b, &mut linear, pav, false);
                let other = seen[rng.below(seen.len())];
                let other = if b.var_aval(other).unwrap().shape == av.shape {
                    other
                } else {
                    op(&mut b, Builtin::Neg, &[v(x)])
                };
                op(&mut b, Builtin::SelectN, &[v(pred), v(x), v(other)])
            }
            10 if rank >= 1 => {
                let last = dims[rank - 1];
                let w = lin_invar(&mut b, &mut linear, f32s(&[last, 2]), false);
                let dn = DotDimensionNumbers {
                    lhs_contracting: vec![rank as i64 - 1],
                    rhs_contracting: vec![0],
                    lhs_batch: vec![],
                    rhs_batch: vec![],
                };
                let (lhs, rhs) = if rng.chance(0.5) {
                    (v(x), v(w))
                } else {
                    (v(w), v(x))
                };
                let dn = if lhs == v(x) {
                    dn
                } else {
                    DotDimensionNumbers {
                        lhs_contracting: vec![0],
                        rhs_contracting: vec![rank as i64 - 1],
                        lhs_batch: vec![],
                        rhs_batch: vec![],
                    }
                };
                op_p(
                    &mut b,
                    Builtin::DotGeneral,
                    &[lhs, rhs],
                    p(vec![("dimension_numbers", Param::DotDims(Arc::new(dn)))]),
                )[0]
            }
            11 => {
                // Implicit broadcast against a scalar non-linear operand.
                let c = lin_invar(&mut b, &mut linear, f32s(&[]), false);
                op(&mut b, Builtin::Mul, &[v(x), v(c)])
            }
            12 if rank >= 1 => {
                // rev, concatenate with itself (fan-out), a dynamic window back to the
                // shape, then a static slice of all of it.
                let r = op_p(
                    &mut b,
                    Builtin::Rev,
                    &[v(x)],
                    p(vec![("dimensions", Param::ints(&[0]))]),
                )[0];
                let c = op_p(
                    &mut b,
                    Builtin::Concatenate,
                    &[v(r), v(x)],
                    p(vec![("dimension", Param::Int(0))]),
                )[0];
                let mut idx = vec![v(c)];
                for _ in 0..rank {
                    idx.push(v(lin_invar(&mut b, &mut linear, i32s(&[]), false)));
                }
                let w = op_p(
                    &mut b,
                    Builtin::DynamicSlice,
                    &idx,
                    p(vec![("slice_sizes", Param::ints(&dims))]),
                )[0];
                let zeros = vec![0i64; rank];
                op_p(
                    &mut b,
                    Builtin::Slice,
                    &[v(w)],
                    p(vec![
                        ("start_indices", Param::ints(&zeros)),
                        ("limit_indices", Param::ints(&dims)),
                    ]),
                )[0]
            }
            13 if rank >= 1 => {
                // Pad with interior padding and cropping, then a strided slice back.
                let d = dims[0];
                let mut config = vec![(0i64, 0i64, 0i64); rank];
                config[0] = (-1, 2, 1);
                // (A non-linear padding value would make the chain affine.)
                let pv = lin_invar(&mut b, &mut linear, f32s(&[]), true);
                let padded = op_p(
                    &mut b,
                    Builtin::Pad,
                    &[v(x), v(pv)],
                    p(vec![("padding_config", Param::Padding(config.into()))]),
                )[0];
                let pd = b.var_aval(padded).unwrap().shape.dims().to_vec();
                let mut start = vec![0i64; rank];
                let mut strides = vec![1i64; rank];
                start[0] = 1;
                strides[0] = 2;
                let mut limit = pd.clone();
                limit[0] = 2 * d;
                op_p(
                    &mut b,
                    Builtin::Slice,
                    &[v(padded)],
                    p(vec![
                        ("start_indices", Param::ints(&start)),
                        ("limit_indices", Param::ints(&limit)),
                        ("strides", Param::ints(&strides)),
                    ]),
                )[0]
            }
            _ => op(&mut b, Builtin::Copy, &[v(x)]),
        };
        seen.push(x);
    }
    let outs = if rng.chance(0.5) {
        vec![Atom::Var(x), Atom::Var(seen[rng.below(seen.len())])]
    } else {
        vec![Atom::Var(x)]
    };
    (b.build(outs).unwrap(), linear)
}

#[test]
fn random_chains_pass_the_dot_product_test() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..60 {
        let (j, linear) = random_chain(seed, 4 + (seed as usize % 9));
        dot_test(&j, &linear, 1000 + seed);
        seen.extend(prims(&j).into_iter().map(str::to_owned));
    }
    // The chains exercise every rule.
    for p in [
        "neg",
        "mul",
        "div",
        "add",
        "sub",
        "reduce_sum",
        "broadcast_in_dim",
        "transpose",
        "reshape",
        "expand_dims",
        "squeeze",
        "convert_element_type",
        "select_n",
        "dot_general",
        "copy",
        "rev",
        "concatenate",
        "dynamic_slice",
        "slice",
        "pad",
    ] {
        assert!(seen.contains(p), "no random chain uses {p}");
    }
}

#[test]
fn long_chain_is_linear_and_not_recursive() {
    let n = 20_000;
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[4]));
    let mut t = b.add_invar(f32s(&[4]));
    for _ in 0..n {
        let m = op(&mut b, Builtin::Mul, &[v(x), v(t)]);
        t = op(&mut b, Builtin::Add, &[v(m), v(t)]);
    }
    let j = b.build(vec![v(t)]).unwrap();
    let tj = transpose(&j, &[false, true]).unwrap();
    // Per step: a mul for the product's cotangent and an add_any for the fan-out of t.
    assert_eq!(tj.eqns().len(), 2 * n);
    let counts = |name: &str| prims(&tj).iter().filter(|&&p| p == name).count();
    assert_eq!((counts("mul"), counts("add_any")), (n, n));
}

fn err(text: &str, linear: &[bool]) -> PassError {
    transpose(&parse(text), linear).unwrap_err()
}

#[test]
fn wrong_flag_count_is_an_error() {
    assert_eq!(
        err("{ lambda ; t:f32[3]. let b:f32[3] = neg t in (b,) }", &[]),
        PassError::FlagCount {
            what: "linear",
            expected: 1,
            got: 0
        }
    );
}

#[test]
fn non_linear_uses_are_errors() {
    let cases: &[(&str, &[bool], &str, usize, usize)] = &[
        (
            "{ lambda ; t:f32[3]. let b:f32[3] = sin t in (b,) }",
            &[true],
            "sin",
            0,
            0,
        ),
        (
            "{ lambda ; t:f32[3] u:f32[3]. let b:f32[3] = neg u; c:f32[3] = mul t b in (c,) }",
            &[true, true],
            "mul",
            1,
            1,
        ),
        (
            "{ lambda ; x:f32[3] t:f32[3]. let c:f32[3] = div x t in (c,) }",
            &[false, true],
            "div",
            0,
            1,
        ),
        (
            "{ lambda ; p:bool[3] t:f32[3]. let q:bool[3] = gt t 0.0:f32[]; c:f32[3] = select_n q t t in (c,) }",
            &[false, true],
            "gt",
            0,
            0,
        ),
        (
            "{ lambda ; t:f32[3]. let c:i32[3] = convert_element_type[new_dtype=int32 weak_type=False] t in (c,) }",
            &[true],
            "convert_element_type",
            0,
            0,
        ),
        (
            "{ lambda ; a:f32[3,4] b:f32[4,5]. let c:f32[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b in (c,) }",
            &[true, true],
            "dot_general",
            0,
            1,
        ),
    ];
    for &(text, linear, prim, eqn, operand) in cases {
        let e = err(text, linear);
        assert_eq!(
            e,
            PassError::NonLinearUse {
                primitive: prim.to_owned(),
                eqn,
                operand
            },
            "{text}"
        );
        assert!(e.to_string().contains(prim), "{e}");
    }
}

#[test]
fn scatter_mul_and_scatter_refusals() {
    let text = |extra: &str| {
        format!(
            "{{ lambda ; a:f32[4,3] k:i32[3,1] b:f32[3,3]. let d:f32[4,3] = scatter-mul[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) \
             mode=GatherScatterMode.CLIP{extra}] a k b in (d,) }}"
        )
    };
    // A product of two linear values.
    assert_eq!(
        err(&text(" unique_indices=True"), &[true, false, true]),
        PassError::NonLinearUse {
            primitive: "scatter-mul".to_owned(),
            eqn: 0,
            operand: 2
        }
    );
    // The updates' cotangent needs unique indices (as JAX).
    let e = err(&text(""), &[false, false, true]);
    assert_eq!(
        e,
        PassError::NoTransposeRule {
            primitive: "scatter-mul without unique_indices".to_owned(),
            eqn: 0
        }
    );
    // Linear in the operand only, any indices do.
    transpose(&parse(&text("")), &[true, false, false]).unwrap();
}

#[test]
fn dropped_scatter_windows_have_zero_cotangents() {
    // Index 5 is out of bounds for 4 rows: FILL_OR_DROP drops that update window, so its
    // cotangent is 0 (not the NaN a FILL_OR_DROP gather fills with by default).
    let text = "{ lambda ; a:f32[4,3] b:f32[2,3]. let i:i32[2,1] = iota[dimension=0 dtype=int32 \
                shape=(2, 1) sharding=None]; k:i32[2,1] = mul i 5:i32[]; \
                d:f32[4,3] = scatter-add[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), \
                inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), \
                scatter_indices_batching_dims=()) mode=GatherScatterMode.FILL_OR_DROP] a k b in (d,) }";
    let j = parse(text);
    let tj = dot_test(&j, &[true, true], 31);
    let gather = tj
        .eqns()
        .iter()
        .find(|e| e.primitive().name() == "gather")
        .unwrap();
    assert_eq!(gather.params().get("fill_value"), Some(&Param::Int(0)));
    let ct = HostArray::from_f64(Shape::new(&[4, 3]).unwrap(), DType::F32, vec![1.0; 12]).unwrap();
    let outs = eval_jaxpr(&tj, &[], &[ct]).unwrap();
    assert_eq!(outs[1].to_f64_vec(), vec![1.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn linear_booleans_are_used_non_linearly() {
    let e = err(
        "{ lambda ; p:bool[3] q:bool[3]. let c:bool[6] = concatenate[dimension=0] p q in (c,) }",
        &[true, false],
    );
    assert_eq!(
        e,
        PassError::NonLinearUse {
            primitive: "concatenate".to_owned(),
            eqn: 0,
            operand: 0
        }
    );
    // An unused linear bool gets a zero (false) cotangent.
    let tj = transpose(
        &parse("{ lambda ; p:bool[3] t:f32[3]. let c:f32[3] = neg t in (c,) }"),
        &[true, true],
    )
    .unwrap();
    assert_eq!(tj.out_avals()[0].dtype, DType::Bool);
}

#[test]
fn select_n_with_a_linear_predicate_is_an_error() {
    let e = err(
        "{ lambda ; p:i32[] t:f32[3]. let c:f32[3] = select_n p t t in (c,) }",
        &[true, true],
    );
    assert_eq!(
        e,
        PassError::NonLinearUse {
            primitive: "select_n".to_owned(),
            eqn: 0,
            operand: 0
        }
    );
}

#[test]
fn primitives_without_a_rule_are_errors() {
    let e = err(
        "{ lambda ; x:f32[3] a:f32[4,3] b:i32[2,1] c:f32[2,3]. let y:f32[3] = neg x; \
         d:f32[4,3] = scatter[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), \
         inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), \
         scatter_indices_batching_dims=()) mode=GatherScatterMode.FILL_OR_DROP] a b c in (d,) }",
        &[false, true, false, true],
    );
    assert_eq!(
        e,
        PassError::NoTransposeRule {
            primitive: "scatter without unique_indices".to_owned(),
            eqn: 1
        }
    );
    let msg = e.to_string();
    assert!(
        msg.contains("scatter") && msg.contains("equation 1"),
        "{msg}"
    );
}

#[test]
fn linear_indices_are_errors() {
    let e = err(
        "{ lambda ; a:f32[3,4] b:i32[2,1]. let c:f32[2,4] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) mode=GatherScatterMode.CLIP slice_sizes=(1, 4)] a b in (c,) }",
        &[true, true],
    );
    assert_eq!(
        e,
        PassError::NonLinearUse {
            primitive: "gather".to_owned(),
            eqn: 0,
            operand: 1
        }
    );
    let e = err(
        "{ lambda ; a:f32[4] i:i32[]. let b:f32[2] = dynamic_slice[slice_sizes=(2,)] a i in (b,) }",
        &[true, true],
    );
    assert_eq!(
        e,
        PassError::NonLinearUse {
            primitive: "dynamic_slice".to_owned(),
            eqn: 0,
            operand: 1
        }
    );
    let e = err(
        "{ lambda ; a:f32[4] u:f32[2] i:i32[]. let b:f32[4] = dynamic_update_slice a u i in (b,) }",
        &[false, false, true],
    );
    assert_eq!(
        e,
        PassError::NonLinearUse {
            primitive: "dynamic_update_slice".to_owned(),
            eqn: 0,
            operand: 2
        }
    );
}

#[test]
fn weak_typed_cotangents() {
    let j = parse("{ lambda ; t:f32[3]. let b:f32[3] = mul t 2.0:f32[] in (b,) }");
    let tj = dot_test(&j, &[true], 2);
    assert_eq!(tj.out_avals()[0].shape, Shape::new(&[3]).unwrap());
}

/// `test_ext`: returns its operand's type.
struct PassThrough;

impl ExtensionPrimitive for PassThrough {
    fn name(&self) -> &str {
        "test_ext"
    }
    fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        _params: &Params,
    ) -> Result<Vec<AbstractValue>, String> {
        Ok(inputs.to_vec())
    }
}

#[test]
fn extension_primitives_have_no_rule_yet() {
    let mut b = JaxprBuilder::new();
    let t = b.add_invar(f32s(&[3]));
    let n = op(&mut b, Builtin::Neg, &[v(t)]);
    let e = b
        .add_eqn(
            Primitive::Extension(Arc::new(PassThrough)),
            vec![v(n)],
            Params::empty(),
        )
        .unwrap()[0];
    let j = b.build(vec![v(e)]).unwrap();
    assert_eq!(
        transpose(&j, &[true]).unwrap_err(),
        PassError::NoTransposeRule {
            primitive: "test_ext".to_owned(),
            eqn: 1
        }
    );
    // Applied to non-linear values only, it is copied forward.
    let tj = transpose(&j, &[false]).unwrap();
    assert_eq!(prims(&tj), vec!["neg", "test_ext"]);
}

/// `test_lin(x, t) = (x * t, 2 * t)`, linear in `t`, with a transpose rule (for `t`
/// linear and `x` not): `(x, c0, c1) -> x * c0 + 2 * c1`. `bad` makes the rule return a
/// jaxpr of the wrong signature.
struct LinWithRule {
    bad: bool,
}

impl LinWithRule {
    /// The forward definition, as a jaxpr (what the evaluator runs for it).
    fn definition(a: &AbstractValue) -> ClosedJaxpr {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(a.clone());
        let t = b.add_invar(a.clone());
        let m = op(&mut b, Builtin::Mul, &[v(x), v(t)]);
        let two = lit_f32(&mut b, 2.0);
        let d = op(&mut b, Builtin::Mul, &[two, v(t)]);
        close(b.build(vec![v(m), v(d)]).unwrap())
    }
}

impl ExtensionPrimitive for LinWithRule {
    fn name(&self) -> &str {
        "test_lin"
    }
    fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        _params: &Params,
    ) -> Result<Vec<AbstractValue>, String> {
        Ok(vec![inputs[1].clone(), inputs[1].clone()])
    }
    fn has_transpose_rule(&self) -> bool {
        true
    }
    fn transpose(
        &self,
        inputs: &[AbstractValue],
        linear: &[bool],
        _params: &Params,
    ) -> Result<ClosedJaxpr, String> {
        if linear != [false, true] {
            return Err("test_lin is linear in t only".to_owned());
        }
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(inputs[0].clone());
        let c0 = b.add_invar(inputs[1].clone());
        let c1 = b.add_invar(inputs[1].clone());
        let m = op(&mut b, Builtin::Mul, &[v(x), v(c0)]);
        let two = lit_f32(&mut b, 2.0);
        let d = op(&mut b, Builtin::Mul, &[two, v(c1)]);
        let r = op(&mut b, Builtin::Add, &[v(m), v(d)]);
        let outs = if self.bad {
            vec![v(r), v(r)]
        } else {
            vec![v(r)]
        };
        Ok(close(b.build(outs).unwrap()))
    }
}

/// `neg t` then the extension (or, with `ext` `None`, a `jit` of its definition) on
/// `(x, neg t)`; `both` uses both outputs (else only the first).
fn lin_program(ext: Option<Arc<LinWithRule>>, both: bool) -> Jaxpr {
    let a = f32s(&[3]);
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(a.clone());
    let t = b.add_invar(a.clone());
    let n = op(&mut b, Builtin::Neg, &[v(t)]);
    let (prim, params) = match ext {
        Some(e) => (Primitive::Extension(e), Params::empty()),
        None => (
            Primitive::Builtin(Builtin::Jit),
            Params::new([("jaxpr", Param::Jaxpr(LinWithRule::definition(&a)))]),
        ),
    };
    let outs = b.add_eqn(prim, vec![v(x), v(n)], params).unwrap();
    let y = if both {
        op(&mut b, Builtin::Add, &[v(outs[0]), v(outs[1])])
    } else {
        outs[0]
    };
    b.build(vec![v(y)]).unwrap()
}

#[test]
fn extension_transpose_rules_pass_the_dot_product_test() {
    for (seed, both) in [(1, true), (2, false)] {
        let j = lin_program(Some(Arc::new(LinWithRule { bad: false })), both);
        let tj = transpose(&j, &[false, true]).unwrap_or_else(|e| panic!("{e}\n{j}"));
        // The rule's jaxpr is called as a jit named after the primitive, with zeros
        // for the output nobody uses.
        let calls: Vec<&ferrax_ir::Eqn> = tj
            .eqns()
            .iter()
            .filter(|e| e.primitive().name() == "jit")
            .collect();
        assert_eq!(calls.len(), 1, "{tj}");
        assert_eq!(
            calls[0].params().get("name"),
            Some(&Param::Str(Arc::from("transpose(test_lin)")))
        );
        assert_eq!(prims(&tj).contains(&"broadcast_in_dim"), !both, "{tj}");
        // The forward values come from the same program with the definition inlined.
        let reference = lin_program(None, both);
        dot_check(&reference, tj, &[false, true], seed);
    }
    // Not linear in the extension's operands: copied forward, the rule is not called.
    let j = lin_program(Some(Arc::new(LinWithRule { bad: true })), true);
    let tj = transpose(&j, &[false, false]).unwrap();
    assert_eq!(prims(&tj), vec!["neg", "test_lin", "add"]);
}

#[test]
fn extension_transpose_rule_errors() {
    let j = lin_program(Some(Arc::new(LinWithRule { bad: false })), true);
    // Linear in both operands: the rule refuses, and its message is carried.
    assert_eq!(
        transpose(&j, &[true, true]).unwrap_err(),
        PassError::TransposeRule {
            primitive: "test_lin".to_owned(),
            eqn: 1,
            message: "test_lin is linear in t only".to_owned(),
        }
    );
    // A jaxpr of the wrong signature is the rule's error too, naming both signatures.
    let j = lin_program(Some(Arc::new(LinWithRule { bad: true })), true);
    let e = transpose(&j, &[false, true]).unwrap_err();
    let PassError::TransposeRule {
        message, eqn: 1, ..
    } = &e
    else {
        panic!("{e:?}");
    };
    assert!(
        message.contains("(f32[3], f32[3])") && message.contains("(f32[3])"),
        "{message}"
    );
    assert!(
        e.to_string()
            .contains("the transpose rule of test_lin failed"),
        "{e}"
    );
}

// ----- Higher-order primitives -----

/// `(text, linear flags)` of linear jaxprs with `jit`, `cond` and `scan`.
const HIGHER_ORDER: &[(&str, &[bool])] = &[
    // jit: one output has no cotangent use downstream (zeros go in), one operand is
    // non-linear, one linear operand is passed twice.
    (
        "{ lambda ; x:f32[3] t:f32[3]. let a:f32[3] b:f32[3] c:f32[3] = jit[jaxpr={ lambda ; \
         c:f32[3] d:f32[3] e:f32[3]. let f:f32[3] = mul c d; g:f32[3] = neg e; h:f32[3] = add d e \
         in (f, g, h) } name=f] x t t; i:f32[3] = add a c in (i,) }",
        &[false, true],
    ),
    // jit in jit.
    (
        "{ lambda ; x:f32[2,3] t:f32[2,3]. let a:f32[3] = jit[jaxpr={ lambda ; c:f32[2,3] \
         d:f32[2,3]. let e:f32[2,3] = jit[jaxpr={ lambda ; f:f32[2,3] g:f32[2,3]. let \
         h:f32[2,3] = div g f in (h,) } name=inner] c d; i:f32[3] = reduce_sum[axes=(0,)] e \
         in (i,) } name=outer] x t in (a,) }",
        &[false, true],
    ),
    // cond: branch 0 does not use u (its cotangent is zeros there); the index and x are
    // non-linear.
    (
        "{ lambda ; p:i32[] x:f32[3] t:f32[3] u:f32[3]. let a:f32[3] b:f32[3] = cond[branches=(\
         { lambda ; c:f32[3] d:f32[3] e:f32[3]. let f:f32[3] = mul c d in (f, d) } \
         { lambda ; g:f32[3] h:f32[3] i:f32[3]. let j:f32[3] = neg i; k:f32[3] = add h i \
         in (j, k) })] p x t u in (a, b) }",
        &[false, false, true, true],
    ),
    // cond with three branches, one returning its operand unchanged.
    (
        "{ lambda ; p:i32[] t:f32[2]. let a:f32[2] = cond[branches=(\
         { lambda ; c:f32[2]. let d:f32[2] = neg c in (d,) } \
         { lambda ; e:f32[2]. let  in (e,) } \
         { lambda ; f:f32[2]. let g:f32[2] = mul f 3.0:f32[] in (g,) })] p t in (a,) }",
        &[false, true],
    ),
    // scan: a non-linear const w, a linear const k, a linear carry, linear xs and
    // non-linear xs r.
    (
        "{ lambda ; w:f32[3] k:f32[3] c0:f32[3] xs:f32[4,3] rs:f32[4,3]. let \
         cf:f32[3] ys:f32[4,3] = scan[jaxpr={ lambda ; a:f32[3] b:f32[3] c:f32[3] x:f32[3] \
         r:f32[3]. let d:f32[3] = mul a c; e:f32[3] = add d x; f:f32[3] = add e b; \
         g:f32[3] = mul r f in (f, g) } length=4 linear=(False, False, False, False, False) \
         num_carry=1 num_consts=2 reverse=False unroll=1 _split_transpose=False] w k c0 xs rs \
         in (cf, ys) }",
        &[false, true, true, true, false],
    ),
    // The same in reverse, with the carry's final value unused.
    (
        "{ lambda ; w:f32[3] k:f32[3] c0:f32[3] xs:f32[4,3] rs:f32[4,3]. let \
         cf:f32[3] ys:f32[4,3] = scan[jaxpr={ lambda ; a:f32[3] b:f32[3] c:f32[3] x:f32[3] \
         r:f32[3]. let d:f32[3] = mul a c; e:f32[3] = add d x; f:f32[3] = add e b; \
         g:f32[3] = mul r f in (f, g) } length=4 num_carry=1 num_consts=2 reverse=True \
         unroll=1] w k c0 xs rs in (ys,) }",
        &[false, true, true, true, false],
    ),
    // Two carries that swap (with a scale), no xs, no ys; an RNN-like step with a matrix.
    (
        "{ lambda ; m:f32[2,2] h0:f32[2] g0:f32[2]. let h:f32[2] g:f32[2] = scan[jaxpr={ lambda ; \
         a:f32[2,2] b:f32[2] c:f32[2]. let d:f32[2] = dot_general[dimension_numbers=(([1], [0]), \
         ([], []))] a b; e:f32[2] = mul c 0.5:f32[] in (e, d) } length=3 num_carry=2 \
         num_consts=1 reverse=False unroll=1] m h0 g0 in (h, g) }",
        &[false, true, true],
    ),
    // A linear xs only (a cumulative sum), and zero-length scans.
    (
        "{ lambda ; c0:f32[] xs:f32[5]. let c:f32[] ys:f32[5] = scan[jaxpr={ lambda ; a:f32[] \
         b:f32[]. let d:f32[] = add a b in (d, d) } length=5 num_carry=1 num_consts=0 \
         reverse=False unroll=1] c0 xs in (c, ys) }",
        &[true, true],
    ),
    (
        "{ lambda ; c0:f32[] xs:f32[0]. let c:f32[] ys:f32[0] = scan[jaxpr={ lambda ; a:f32[] \
         b:f32[]. let d:f32[] = add a b in (d, d) } length=0 num_carry=1 num_consts=0 \
         reverse=False unroll=1] c0 xs in (c, ys) }",
        &[true, true],
    ),
    // scan in cond in jit, with a non-linear value computed forward inside.
    (
        "{ lambda ; p:i32[] x:f32[3] t:f32[3]. let a:f32[3] = jit[jaxpr={ lambda ; q:i32[] \
         y:f32[3] u:f32[3]. let b:f32[3] = cond[branches=(\
         { lambda ; c:f32[3] d:f32[3]. let e:f32[3] = neg d in (e,) } \
         { lambda ; f:f32[3] g:f32[3]. let h:f32[3] = sin f; i:f32[3] j:f32[2,3] = scan[\
         jaxpr={ lambda ; k:f32[3] l:f32[3]. let m:f32[3] = mul k l in (m, l) } length=2 \
         num_carry=1 num_consts=1 reverse=False unroll=1] h g in (i,) })] q y u in (b,) } \
         name=f] p x t in (a,) }",
        &[false, false, true],
    ),
];

#[test]
fn higher_order_rules_pass_the_dot_product_test() {
    for (k, &(text, linear)) in HIGHER_ORDER.iter().enumerate() {
        let j = parse(text);
        let tj = dot_test(&j, linear, 300 + k as u64);
        // The transposed jaxpr reads back as itself.
        let printed = ferrax_ir::text::print_jaxpr(&tj);
        assert_eq!(
            ferrax_ir::text::print_jaxpr(&parse(&printed)),
            printed,
            "{printed}"
        );
    }
}

#[test]
fn transposed_control_flow_keeps_its_shape() {
    // jit stays a jit of the transposed jaxpr (its name kept). As in JAX, the output
    // nobody uses has a symbolic zero cotangent: the call takes x and the two others.
    let tj = transpose(&parse(HIGHER_ORDER[0].0), HIGHER_ORDER[0].1).unwrap();
    assert_eq!(prims(&tj), vec!["jit", "add_any"]);
    let p = tj.eqns()[0].params();
    assert_eq!(p.get("name"), Some(&Param::Str("f".into())));
    assert_eq!(tj.eqns()[0].inputs().len(), 3);
    assert_eq!(tj.eqns()[0].outvars().len(), 2);
    // cond stays a cond with as many branches, returning one cotangent per linear operand.
    let tj = transpose(&parse(HIGHER_ORDER[2].0), HIGHER_ORDER[2].1).unwrap();
    assert_eq!(prims(&tj), vec!["cond"]);
    let Some(Param::Jaxprs(brs)) = tj.eqns()[0].params().get("branches") else {
        panic!("{tj}");
    };
    assert_eq!(brs.len(), 2);
    assert_eq!(tj.eqns()[0].outvars().len(), 2);
    // scan runs the other way, the linear const's cotangent a carry.
    let tj = transpose(&parse(HIGHER_ORDER[4].0), HIGHER_ORDER[4].1).unwrap();
    assert_eq!(prims(&tj), vec!["broadcast_in_dim", "scan"]);
    let p = tj.eqns()[1].params();
    assert_eq!(p.get("reverse"), Some(&Param::Bool(true)));
    assert_eq!(p.get("num_consts"), Some(&Param::Int(1)));
    assert_eq!(p.get("num_carry"), Some(&Param::Int(2)));
    assert_eq!(p.get("length"), Some(&Param::Int(4)));
    let tj = transpose(&parse(HIGHER_ORDER[5].0), HIGHER_ORDER[5].1).unwrap();
    let scan = tj.eqns().iter().find(|e| e.primitive().name() == "scan");
    assert_eq!(
        scan.unwrap().params().get("reverse"),
        Some(&Param::Bool(false))
    );
}

#[test]
fn symbolic_zeros_stay_out_of_calls_and_branches() {
    // A jit whose linear operand u gets no cotangent returns none for it; its transpose
    // takes only the output's cotangent that is not zero.
    let text = "{ lambda ; t:f32[3] u:f32[3]. let a:f32[3] b:f32[3] = jit[jaxpr={ lambda ; \
                c:f32[3] d:f32[3]. let e:f32[3] = neg c; f:f32[3] = neg d in (e, f) } name=g] t u \
                in (a,) }";
    let tj = dot_test(&parse(text), &[true, true], 21);
    // The jit returns t's cotangent only; u's zeros are made outside it.
    assert_eq!(prims(&tj), vec!["jit", "broadcast_in_dim"]);
    let jit = &tj.eqns()[0];
    assert_eq!((jit.inputs().len(), jit.outvars().len()), (1, 1));
    // No cotangent reaches the call at all: no call.
    let text = "{ lambda ; t:f32[3]. let a:f32[3] = jit[jaxpr={ lambda ; c:f32[3]. let \
                e:f32[3] = neg c in (e,) } name=g] t; b:f32[3] = neg t in (b,) }";
    let tj = dot_test(&parse(text), &[true], 22);
    assert_eq!(prims(&tj), vec!["neg"]);
    // cond: a branch without a cotangent for u gets zeros inside it; an operand no branch
    // gives a cotangent (v) is not an output of the cond.
    let text = "{ lambda ; p:i32[] t:f32[3] u:f32[3] v:f32[3]. let a:f32[3] = cond[branches=(\
                { lambda ; c:f32[3] d:f32[3] e:f32[3]. let f:f32[3] = neg c in (f,) } \
                { lambda ; g:f32[3] h:f32[3] i:f32[3]. let j:f32[3] = sub g h in (j,) })] \
                p t u v in (a,) }";
    let tj = dot_test(&parse(text), &[false, true, true, true], 23);
    let cond = tj
        .eqns()
        .iter()
        .find(|e| e.primitive().name() == "cond")
        .unwrap();
    assert_eq!(cond.outvars().len(), 2, "{tj}");
    let Some(Param::Jaxprs(brs)) = cond.params().get("branches") else {
        panic!("{tj}");
    };
    assert!(prims(brs[0].jaxpr()).contains(&"broadcast_in_dim"), "{tj}");
    assert!(!prims(brs[1].jaxpr()).contains(&"broadcast_in_dim"), "{tj}");
    // scan: the ys nobody uses have no cotangent xs in the transposed scan; its carry
    // is there (instantiated).
    let text = "{ lambda ; c0:f32[] xs:f32[5]. let c:f32[] ys:f32[5] = scan[jaxpr={ lambda ; \
                a:f32[] b:f32[]. let d:f32[] = add a b in (d, d) } length=5 num_carry=1 \
                num_consts=0 reverse=False unroll=1] c0 xs in (c,) }";
    let tj = dot_test(&parse(text), &[true, true], 24);
    assert_eq!(prims(&tj), vec!["scan"]);
    assert_eq!(tj.eqns()[0].inputs().len(), 1, "{tj}");
    assert_eq!(tj.eqns()[0].outvars().len(), 2, "{tj}");
}

#[test]
fn shared_sub_jaxprs_are_transposed_once() {
    // Two jit equations (and a cond's two branches) share one jaxpr.
    let mut ib = JaxprBuilder::new();
    let a = ib.add_invar(f32s(&[3]));
    let n = op(&mut ib, Builtin::Neg, &[v(a)]);
    let inner = close(ib.build(vec![v(n)]).unwrap());
    let call = Params::new([
        ("jaxpr", Param::Jaxpr(inner.clone())),
        ("name", Param::Str("f".into())),
    ]);
    let mut b = JaxprBuilder::new();
    let p = b.add_invar(i32s(&[]));
    let t = b.add_invar(f32s(&[3]));
    let x = op_p(&mut b, Builtin::Jit, &[v(t)], call.clone())[0];
    let y = op_p(&mut b, Builtin::Jit, &[v(x)], call)[0];
    let branches = Param::Jaxprs(Arc::new(vec![inner.clone(), inner]));
    let z = op_p(
        &mut b,
        Builtin::Cond,
        &[v(p), v(y)],
        Params::new([("branches", branches)]),
    )[0];
    let j = b.build(vec![v(z)]).unwrap();
    let tj = dot_test(&j, &[false, true], 11);
    let subs: Vec<&Arc<Jaxpr>> = tj
        .eqns()
        .iter()
        .flat_map(|e| e.sub_jaxprs())
        .map(|cj| cj.jaxpr())
        .collect();
    assert_eq!(subs.len(), 4, "{tj}");
    for s in &subs[1..] {
        assert!(Arc::ptr_eq(subs[0], s), "{tj}");
    }
}

#[test]
fn deep_nests_transpose_without_recursion() {
    let depth = 20_000;
    let mut inner: Option<ferrax_ir::ClosedJaxpr> = None;
    for _ in 0..depth {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(f32s(&[2]));
        let mut y = op(&mut b, Builtin::Neg, &[v(x)]);
        if let Some(j) = inner.take() {
            y = op_p(
                &mut b,
                Builtin::Jit,
                &[v(y)],
                Params::new([("jaxpr", Param::Jaxpr(j)), ("name", Param::Str("f".into()))]),
            )[0];
        }
        inner = Some(close(b.build(vec![v(y)]).unwrap()));
    }
    let j = inner.unwrap();
    let tj = transpose(j.jaxpr(), &[true]).unwrap();
    // Walk down the transposed nest: a jit, then a neg, at every level but the last.
    let mut level: Arc<Jaxpr> = Arc::new(tj);
    for d in 0..depth {
        let names = prims(&level);
        if d + 1 == depth {
            assert_eq!(names, vec!["neg"]);
            break;
        }
        assert_eq!(names, vec!["jit", "neg"], "level {d}");
        let Some(Param::Jaxpr(next)) = level.eqns()[0].params().get("jaxpr") else {
            panic!("level {d}");
        };
        level = next.jaxpr().clone();
    }
}

/// Puts a random chain inside a `jit`, a `cond` (both branches the chain) or a `scan`
/// (its linear inputs scanned over, its non-linear ones consts).
fn wrapped(j: Jaxpr, linear: &[bool], kind: u64) -> (Jaxpr, Vec<bool>) {
    let avals = j.in_avals();
    let inner = close(j);
    let mut b = JaxprBuilder::new();
    let mut flags = Vec::new();
    let outs = match kind {
        0 => {
            let args: Vec<Atom> = avals.into_iter().map(|a| v(b.add_invar(a))).collect();
            flags.extend_from_slice(linear);
            let p = Params::new([
                ("jaxpr", Param::Jaxpr(inner)),
                ("name", Param::Str("chain".into())),
            ]);
            op_p(&mut b, Builtin::Jit, &args, p)
        }
        1 => {
            let mut args = vec![v(b.add_invar(i32s(&[])))];
            flags.push(false);
            args.extend(avals.into_iter().map(|a| v(b.add_invar(a))));
            flags.extend_from_slice(linear);
            let branches = Param::Jaxprs(Arc::new(vec![inner.clone(), inner]));
            op_p(
                &mut b,
                Builtin::Cond,
                &args,
                Params::new([("branches", branches)]),
            )
        }
        _ => {
            // The body takes the chain's inputs in their order: non-linear ones as consts
            // need them first, so the body is the chain with its inputs permuted.
            let order: Vec<usize> = (0..avals.len())
                .filter(|&k| !linear[k])
                .chain((0..avals.len()).filter(|&k| linear[k]))
                .collect();
            let mut bb = JaxprBuilder::new();
            let mut slot: Vec<Option<Atom>> = vec![None; avals.len()];
            for &k in &order {
                slot[k] = Some(v(bb.add_invar(avals[k].clone())));
            }
            let args: Vec<Atom> = slot.into_iter().map(Option::unwrap).collect();
            let p = Params::new([
                ("jaxpr", Param::Jaxpr(inner)),
                ("name", Param::Str("chain".into())),
            ]);
            let o = op_p(&mut bb, Builtin::Jit, &args, p);
            let body = close(bb.build(o.into_iter().map(v).collect()).unwrap());
            let mut ops = Vec::new();
            for &k in &order {
                let a = &avals[k];
                if linear[k] {
                    let mut dims = vec![2i64];
                    dims.extend(a.shape.dims());
                    let stacked = AbstractValue::new(Shape::new(&dims).unwrap(), a.dtype);
                    ops.push(v(b.add_invar(stacked)));
                } else {
                    ops.push(v(b.add_invar(a.clone())));
                }
                flags.push(linear[k]);
            }
            let nc = linear.iter().filter(|&&l| !l).count() as i64;
            let p = Params::new([
                ("jaxpr", Param::Jaxpr(body)),
                ("length", Param::Int(2)),
                ("reverse", Param::Bool(kind == 3)),
                ("num_consts", Param::Int(nc)),
                ("num_carry", Param::Int(0)),
            ]);
            op_p(&mut b, Builtin::Scan, &ops, p)
        }
    };
    (b.build(outs.into_iter().map(v).collect()).unwrap(), flags)
}

#[test]
fn random_chains_in_control_flow_pass_the_dot_product_test() {
    for seed in 0..40 {
        let (j, linear) = random_chain(seed, 3 + (seed as usize % 7));
        let (w, flags) = wrapped(j, &linear, seed % 4);
        dot_test(&w, &flags, 2000 + seed);
    }
}

#[test]
fn while_loops_are_refused_with_advice() {
    let text = "{ lambda ; x:f32[3] t:f32[3]. let n:f32[3] = neg x; a:i32[] b:f32[3] = while[\
                body_jaxpr={ lambda ; c:i32[] d:f32[3]. let e:i32[] = add c 1:i32[]; \
                f:f32[3] = neg d in (e, f) } body_nconsts=0 \
                cond_jaxpr={ lambda ; g:i32[] h:f32[3]. let i:bool[] = lt g 3:i32[] in (i,) } \
                cond_nconsts=0] 0:i32[] t in (b,) }";
    let e = err(text, &[false, true]);
    assert_eq!(e, PassError::WhileLoop { eqn: 1 });
    let msg = e.to_string();
    for part in [
        "equation 1 (while)",
        "reverse-mode differentiation does not work for lax.while_loop",
        "lax.scan",
        "fori_loop with static",
    ] {
        assert!(msg.contains(part), "{msg}");
    }
    // A while loop over non-linear values only is copied forward.
    let tj = transpose(&parse(text), &[true, false]).unwrap();
    assert!(prims(&tj).contains(&"while"), "{tj}");
}

#[test]
fn control_flow_errors_name_the_equation() {
    // A linear cond index.
    let text = "{ lambda ; t:i32[] u:f32[3]. let a:f32[3] = cond[branches=(\
                { lambda ; c:f32[3]. let  in (c,) } { lambda ; d:f32[3]. let  in (d,) })] t u \
                in (a,) }";
    assert_eq!(
        err(text, &[true, true]),
        PassError::NonLinearUse {
            primitive: "cond".to_owned(),
            eqn: 0,
            operand: 0
        }
    );
    // A non-linear use inside a scan body (the carry used as a divisor).
    let text = "{ lambda ; c0:f32[] xs:f32[3]. let c:f32[] = scan[jaxpr={ lambda ; a:f32[] \
                b:f32[]. let d:f32[] = div b a in (d,) } length=3 num_carry=1 num_consts=0 \
                reverse=False unroll=1] c0 xs in (c,) }";
    assert_eq!(
        err(text, &[true, false]),
        PassError::NonLinearUse {
            primitive: "div".to_owned(),
            eqn: 0,
            operand: 1
        }
    );
}

/// Every valid jaxpr of the text corpus, with each input linear in turn and with all of
/// them linear: the pass returns a well-typed jaxpr or an error, never panics.
#[test]
fn corpus_jaxprs_transpose_or_fail_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jaxprs");
    let (mut ok, mut failed) = (0, 0);
    let mut bad = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // The jaxpr is what precedes the first directive.
        let body: String = text
            .lines()
            .filter(|l| !l.starts_with(";;"))
            .take_while(|l| !l.starts_with("; "))
            .collect::<Vec<_>>()
            .join("\n");
        let Ok(j) = parse_jaxpr(&body) else {
            continue;
        };
        let n = j.invars().len();
        let mut patterns: Vec<Vec<bool>> =
            (0..n).map(|k| (0..n).map(|i| i == k).collect()).collect();
        patterns.push(vec![true; n]);
        for linear in patterns {
            match transpose(&j, &linear) {
                Ok(tj) => {
                    typecheck(&tj).unwrap_or_else(|e| panic!("{}: {e}\n{tj}", path.display()));
                    ok += 1;
                }
                Err(e) => {
                    if matches!(e, PassError::IllTyped { .. }) {
                        bad.push(format!("{} {linear:?}: {e}", path.display()));
                    }
                    failed += 1;
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(ok > 20 && failed > 20, "{ok} transposed, {failed} refused");
}

/// The generator's random programs (nested jit, cond, while, scan, gather, scatter, pad,
/// ...) with random linear flags: a well-typed transpose or a clean refusal.
#[test]
fn random_programs_transpose_or_fail_cleanly() {
    use ferrax_ir::generate::{random_jaxpr, RandomOptions};
    let mut rng = Rng::new(99);
    let (mut ok, mut refused) = (0, 0);
    for seed in 0..300 {
        let opts = RandomOptions {
            eqns: 10,
            max_depth: 2,
            inputs: 3,
        };
        let j = random_jaxpr(seed, opts).unwrap();
        let linear: Vec<bool> = j.invars().iter().map(|_| rng.chance(0.5)).collect();
        match transpose(&j, &linear) {
            Ok(tj) => {
                typecheck(&tj).unwrap_or_else(|e| panic!("{e}\n{j}\n{tj}"));
                ok += 1;
            }
            Err(e) => {
                assert!(
                    !matches!(e, PassError::IllTyped { .. }),
                    "{e}\n{linear:?}\n{j}"
                );
                refused += 1;
            }
        }
    }
    assert!(
        ok > 10 && refused > 10,
        "{ok} transposed, {refused} refused"
    );
}

/// The transpose's reduce_sum and dot_general carry the params JAX's have (the forward
/// equations Python builds have them too, so gradient jaxprs print uniformly).
#[test]
fn new_equations_carry_jax_params() {
    // An implicitly broadcast scalar operand is summed back.
    let j = parse("{ lambda ; t:f32[] u:f32[3]. let b:f32[3] = add t u in (b,) }");
    let tj = dot_test(&j, &[true, true], 5);
    let sums: Vec<&ferrax_ir::Eqn> = tj
        .eqns()
        .iter()
        .filter(|e| e.primitive().name() == "reduce_sum")
        .collect();
    assert_eq!(sums.len(), 1, "{tj}");
    assert_eq!(sums[0].params().get("out_sharding"), Some(&Param::None));
    // dot_general's preferred element type is the forward output's dtype.
    let j = parse(
        "{ lambda ; a:bf16[2,3] t:bf16[3,4]. let c:f32[2,4] = dot_general[\
         dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] a t in (c,) }",
    );
    let tj = dot_test(&j, &[false, true], 6);
    let dots: Vec<&ferrax_ir::Eqn> = tj
        .eqns()
        .iter()
        .filter(|e| e.primitive().name() == "dot_general")
        .collect();
    assert_eq!(dots.len(), 1, "{tj}");
    assert_eq!(
        dots[0].params().get("preferred_element_type"),
        Some(&Param::DType(DType::F32))
    );
    assert!(prims(&tj).contains(&"convert_element_type"), "{tj}");
}

/// A fuzzing finding (fuzz/findings): a scatter-add into an operand with an axis of size
/// 0 drops every update, so the updates' cotangent is zero; the transpose built an
/// ill-typed gather (a window larger than the operand) instead.
#[test]
fn scatter_into_an_empty_axis_transposes_to_zero() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/findings/transpose_scatter_add_into_empty_axis.jaxpr"
    ))
    .unwrap();
    let j = parse(&text);
    let tj = dot_test(&j, &[true, false, true], 7);
    assert!(!prims(&tj).contains(&"gather"), "{tj}");
}

/// Random window params for an operand of dimensions `dims` (no dilation if not
/// `dilated`).
fn random_window(rng: &mut Rng, dims: &[i64], dilated: bool) -> Vec<(&'static str, Param)> {
    let pick = |rng: &mut Rng, lo: i64, hi: i64| lo + rng.below((hi - lo + 1) as usize) as i64;
    let mut wd = Vec::new();
    let mut ws = Vec::new();
    let mut pad = Vec::new();
    let mut bd = Vec::new();
    let mut wdil = Vec::new();
    for _ in dims {
        wd.push(pick(rng, 1, 3));
        ws.push(pick(rng, 1, 3));
        pad.push((pick(rng, 0, 2), pick(rng, 0, 2)));
        bd.push(if dilated { pick(rng, 1, 2) } else { 1 });
        wdil.push(if dilated { pick(rng, 1, 2) } else { 1 });
    }
    let mut p = vec![
        ("window_dimensions", Param::ints(&wd)),
        ("window_strides", Param::ints(&ws)),
        ("padding", Param::Pairs(pad.into())),
    ];
    if dilated {
        p.push(("base_dilation", Param::ints(&bd)));
        p.push(("window_dilation", Param::ints(&wdil)));
    }
    p
}

/// `reduce_window_sum` (with both dilations), `select_and_gather_add` (base dilation:
/// JAX has no rule for window dilation) and `select_and_scatter_add` over random windows
/// of random operands: each transpose passes the dot-product test in the linear operand.
#[test]
fn windowed_rules_pass_the_dot_product_test() {
    let mut rng = Rng::new(12);
    let mut checked = [0usize; 3];
    for case in 0..90u64 {
        let rank = 1 + rng.below(3);
        let dims: Vec<i64> = (0..rank).map(|_| 1 + rng.below(5) as i64).collect();
        let x = AbstractValue::new(Shape::new(&dims).unwrap(), DType::F32);
        let kind = (case % 3) as usize;
        let mut b = JaxprBuilder::new();
        let built = match kind {
            0 => {
                let a = b.add_invar(x.clone());
                let p = Params::new(random_window(&mut rng, &dims, true));
                b.add_eqn(Builtin::ReduceWindowSum.into(), vec![Atom::Var(a)], p)
                    .map(|o| (o, vec![true]))
            }
            1 => {
                let t = b.add_invar(x.clone());
                let a = b.add_invar(x.clone());
                let mut p = random_window(&mut rng, &dims, true);
                for entry in p.iter_mut().filter(|e| e.0 == "window_dilation") {
                    entry.1 = Param::ints(&vec![1; rank]);
                }
                let sel = if rng.chance(0.5) { "ge" } else { "le" };
                p.push(("select_prim", Param::Str(Arc::from(sel))));
                b.add_eqn(
                    Builtin::SelectAndGatherAdd.into(),
                    vec![Atom::Var(t), Atom::Var(a)],
                    Params::new(p),
                )
                .map(|o| (o, vec![true, false]))
            }
            _ => {
                let window = random_window(&mut rng, &dims, false);
                // The source has the windowed shape: ask reduce_window_max for it.
                let probe = Params::new(window.clone())
                    .with("base_dilation", Param::ints(&vec![1; rank]))
                    .with("window_dilation", Param::ints(&vec![1; rank]));
                let out = Builtin::ReduceWindowMax
                    .abstract_eval(std::slice::from_ref(&x), &probe)
                    .unwrap();
                let sel = if rng.chance(0.5) { "ge" } else { "le" };
                let p = Params::new(window).with("select_prim", Param::Str(Arc::from(sel)));
                let s = b.add_invar(out[0].clone());
                let a = b.add_invar(x.clone());
                b.add_eqn(
                    Builtin::SelectAndScatterAdd.into(),
                    vec![Atom::Var(s), Atom::Var(a)],
                    p,
                )
                .map(|o| (o, vec![true, false]))
            }
        };
        let (outs, linear) = built.unwrap();
        let j = b.build(vec![Atom::Var(outs[0])]).unwrap();
        if j.out_avals()[0].shape.size() == 0 {
            continue;
        }
        dot_test(&j, &linear, case);
        checked[kind] += 1;
    }
    assert!(checked.iter().all(|&n| n >= 10), "{checked:?}");
}

/// The transposes are JAX's equations: a padded cotangent summed over windows; a
/// select_and_scatter_add between a pad and a strided slice for a base-dilated
/// select_and_gather_add; a select_and_gather_add without dilation for a
/// select_and_scatter_add. Window dilation in select_and_gather_add has no rule (JAX's
/// NotImplementedError).
#[test]
fn windowed_transposes_are_jax_s() {
    let sum = parse(
        "{ lambda ; a:f32[2,6,6,3]. let b:f32[2,3,3,3] = reduce_window_sum[\
         base_dilation=(1, 1, 1, 1) padding=((0, 0), (0, 0), (0, 0), (0, 0)) \
         window_dilation=(1, 1, 1, 1) window_dimensions=(1, 2, 2, 1) \
         window_strides=(1, 2, 2, 1)] a in (b,) }",
    );
    let t = transpose(&sum, &[true]).unwrap();
    assert_eq!(prims(&t), ["pad", "reduce_window_sum"]);
    let text = t.to_string();
    assert!(
        // JAX computes the low and high padding with NumPy.
        text.contains(
            "padding_config=((np.int64(0), np.int64(0), 0), (np.int64(1), np.int64(1), 1), \
             (np.int64(1), np.int64(1), 1), (np.int64(0), np.int64(0), 0))"
        ),
        "{text}"
    );
    assert!(text.contains("window_strides=(1, 1, 1, 1)"), "{text}");
    let gather = parse(
        "{ lambda ; t:f32[2,6,3] a:f32[2,6,3]. let b:f32[2,11,3] = select_and_gather_add[\
         base_dilation=(1, 2, 1) padding=((0, 0), (1, 1), (0, 0)) select_prim=le \
         window_dilation=(1, 1, 1) window_dimensions=(1, 3, 1) \
         window_strides=(1, 1, 1)] t a in (b,) }",
    );
    let t = transpose(&gather, &[true, false]).unwrap();
    assert_eq!(prims(&t), ["pad", "select_and_scatter_add", "slice"]);
    let text = t.to_string();
    assert!(
        text.contains("padding_config=((0, 0, 0), (0, 0, 1), (0, 0, 0))"),
        "{text}"
    );
    assert!(text.contains("inf:f32[]"), "{text}");
    assert!(text.contains("strides=(1, 2, 1)"), "{text}");
    let scatter = parse(
        "{ lambda ; s:f32[1,2] a:f32[2,4]. let b:f32[2,4] = select_and_scatter_add[\
         padding=((0, 0), (0, 0)) select_prim=ge window_dimensions=(2, 2) \
         window_strides=(2, 2)] s a in (b,) }",
    );
    let t = transpose(&scatter, &[true, false]).unwrap();
    assert_eq!(prims(&t), ["select_and_gather_add"]);
    assert!(t.to_string().contains("base_dilation=(1, 1)"), "{t}");
    let dilated = parse(
        "{ lambda ; t:f32[5] a:f32[5]. let b:f32[3] = select_and_gather_add[\
         base_dilation=(1,) padding=((0, 0),) select_prim=ge window_dilation=(2,) \
         window_dimensions=(2,) window_strides=(1,)] t a in (b,) }",
    );
    match transpose(&dilated, &[true, false]) {
        Err(PassError::TransposeRule { message, .. }) => {
            assert!(message.contains("window dilation"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // The operand that picks positions is not linear.
    assert!(matches!(
        transpose(&scatter, &[false, true]),
        Err(PassError::NonLinearUse { operand: 1, .. })
    ));
}

/// One convolution: lhs and rhs shapes, strides, padding, lhs and rhs dilation, specs,
/// (feature, batch) groups, and whether the result is `preferred_element_type=f32` of
/// f16 operands.
type ConvCase = (
    &'static [i64],
    &'static [i64],
    &'static [i64],
    &'static [(i64, i64)],
    &'static [i64],
    &'static [i64],
    [&'static [i64]; 3],
    (i64, i64),
    bool,
);

const ID3: [&[i64]; 3] = [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]];
const ID4: [&[i64]; 3] = [&[0, 1, 2, 3], &[0, 1, 2, 3], &[0, 1, 2, 3]];
const NHWC: [&[i64]; 3] = [&[0, 3, 1, 2], &[3, 2, 0, 1], &[0, 3, 1, 2]];

const CONV_TRANSPOSE_CASES: &[ConvCase] = &[
    // Plain, then each feature of the geometry.
    (
        &[2, 3, 6],
        &[4, 3, 3],
        &[1],
        &[(0, 0)],
        &[1],
        &[1],
        ID3,
        (1, 1),
        false,
    ),
    (
        &[2, 3, 7],
        &[4, 3, 3],
        &[3],
        &[(2, 1)],
        &[1],
        &[1],
        ID3,
        (1, 1),
        false,
    ),
    (
        &[2, 3, 6],
        &[4, 3, 2],
        &[2],
        &[(-1, 2)],
        &[2],
        &[1],
        ID3,
        (1, 1),
        false,
    ),
    (
        &[1, 2, 9],
        &[2, 2, 3],
        &[2],
        &[(1, 1)],
        &[1],
        &[3],
        ID3,
        (1, 1),
        false,
    ),
    // Feature groups, batch groups.
    (
        &[2, 4, 7],
        &[6, 2, 3],
        &[2],
        &[(2, 1)],
        &[2],
        &[2],
        ID3,
        (2, 1),
        false,
    ),
    (
        &[2, 6, 5, 5],
        &[6, 1, 3, 3],
        &[1, 2],
        &[(1, 1), (0, 1)],
        &[1, 1],
        &[1, 1],
        ID4,
        (6, 1),
        false,
    ),
    (
        &[4, 2, 6],
        &[6, 2, 2],
        &[1],
        &[(-1, 1)],
        &[1],
        &[1],
        ID3,
        (1, 2),
        false,
    ),
    (
        &[6, 2, 5],
        &[3, 2, 2],
        &[2],
        &[(0, 1)],
        &[1],
        &[1],
        ID3,
        (1, 3),
        false,
    ),
    // Layouts, several spatial dimensions, no spatial dimension.
    (
        &[1, 5, 4, 2],
        &[2, 3, 2, 3],
        &[1, 2],
        &[(1, 0), (0, 1)],
        &[1, 1],
        &[1, 2],
        NHWC,
        (1, 1),
        false,
    ),
    (
        &[2, 6, 5, 4],
        &[2, 2, 2, 4],
        &[2, 1],
        &[(0, 1), (1, 1)],
        &[1, 2],
        &[1, 1],
        NHWC,
        (2, 1),
        false,
    ),
    (
        &[1, 2, 3, 4, 3],
        &[2, 2, 2, 2, 1],
        &[2, 1, 2],
        &[(0, 1), (1, 1), (0, 0)],
        &[1, 2, 1],
        &[1, 1, 1],
        [&[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4]],
        (1, 1),
        false,
    ),
    (
        &[2, 3],
        &[4, 3],
        &[],
        &[],
        &[],
        &[],
        [&[0, 1], &[0, 1], &[0, 1]],
        (1, 1),
        false,
    ),
    (
        &[3, 4],
        &[3, 4],
        &[],
        &[],
        &[],
        &[],
        [&[1, 0], &[1, 0], &[0, 1]],
        (1, 2),
        false,
    ),
    // Half-precision operands with a float32 result (converts on both sides).
    (
        &[2, 4, 6],
        &[4, 2, 3],
        &[2],
        &[(1, 1)],
        &[1],
        &[1],
        ID3,
        (2, 1),
        true,
    ),
];

fn conv_jaxpr(c: &ConvCase) -> Jaxpr {
    let &(l, r, st, pad, ld, rd, specs, (fgc, bgc), half) = c;
    let dt = if half { DType::F16 } else { DType::F32 };
    let mut b = JaxprBuilder::new();
    let x = Atom::Var(b.add_invar(AbstractValue::new(Shape::new(l).unwrap(), dt)));
    let w = Atom::Var(b.add_invar(AbstractValue::new(Shape::new(r).unwrap(), dt)));
    let p = Params::new([
        ("window_strides", Param::ints(st)),
        ("padding", Param::Pairs(pad.into())),
        ("lhs_dilation", Param::ints(ld)),
        ("rhs_dilation", Param::ints(rd)),
        (
            "dimension_numbers",
            Param::ConvDims(Arc::new(ConvDimensionNumbers {
                lhs_spec: specs[0].to_vec(),
                rhs_spec: specs[1].to_vec(),
                out_spec: specs[2].to_vec(),
            })),
        ),
        ("feature_group_count", Param::Int(fgc)),
        ("batch_group_count", Param::Int(bgc)),
        ("precision", Param::None),
        (
            "preferred_element_type",
            if half {
                Param::DType(DType::F32)
            } else {
                Param::None
            },
        ),
        ("out_sharding", Param::None),
    ]);
    let out = b
        .add_eqn(Builtin::ConvGeneralDilated.into(), vec![x, w], p)
        .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    b.build(out.into_iter().map(Atom::Var).collect()).unwrap()
}

#[test]
fn conv_transposes_pass_the_dot_product_test() {
    for (k, c) in CONV_TRANSPOSE_CASES.iter().enumerate() {
        let j = conv_jaxpr(c);
        for (side, linear) in [[true, false], [false, true]].iter().enumerate() {
            let tj = dot_test(&j, linear, (2 * k + side) as u64);
            // A transpose of a convolution is a convolution (plus reshapes, a reversal and
            // converts around it).
            assert!(prims(&tj).contains(&"conv_general_dilated"), "{}", tj);
        }
    }
}

#[test]
fn conv_transpose_matches_jax_structure() {
    // JAX 0.10.2's grad of a SAME 3x3 convolution: the rhs cotangent is a convolution of
    // the lhs with the cotangent, roles swapped in every spec; the lhs cotangent a
    // convolution of the cotangent with the reversed kernel.
    let j = conv_jaxpr(&(
        &[2, 3, 8, 8],
        &[4, 3, 3, 3],
        &[1, 1],
        &[(1, 1), (1, 1)],
        &[1, 1],
        &[1, 1],
        ID4,
        (1, 1),
        false,
    ));
    let t_rhs = transpose(&j, &[false, true]).unwrap();
    let text = ferrax_ir::text::print_jaxpr(&t_rhs);
    assert!(text.contains("dimension_numbers=ConvDimensionNumbers(lhs_spec=(1, 0, 2, 3), rhs_spec=(1, 0, 2, 3), out_spec=(1, 0, 2, 3))"), "{text}");
    assert!(text.contains("padding=((1, 1), (1, 1))"), "{text}");
    let t_lhs = transpose(&j, &[true, false]).unwrap();
    assert_eq!(prims(&t_lhs), ["rev", "conv_general_dilated"]);
    let text = ferrax_ir::text::print_jaxpr(&t_lhs);
    assert!(text.contains("rev[dimensions=(2, 3)]"), "{text}");
    assert!(text.contains("dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 1, 2, 3), rhs_spec=(1, 0, 2, 3), out_spec=(0, 1, 2, 3))"), "{text}");
}

/// Keys are never linear: a linear key input is refused cleanly (never an ill-typed
/// zero cotangent of keys), whether it is used or not.
#[test]
fn linear_keys_are_refused_cleanly() {
    for text in [
        "{ lambda ; a:key<fry>[2] b:f32[]. let c:f32[] = mul b 2.0:f32[] in (c,) }",
        "{ lambda ; a:key<fry>[2] b:f32[]. let c:key<fry>[2] = rev[dimensions=(0,)] a in (c, b) }",
    ] {
        let j = parse_jaxpr(text).unwrap();
        match transpose(&j, &[true, true]) {
            Ok(tj) => drop(typecheck(&tj).unwrap()),
            Err(e) => assert!(!matches!(e, PassError::IllTyped { .. }), "{text}: {e}"),
        }
    }
}
