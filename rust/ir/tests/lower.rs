//! The StableHLO lowering: structure of the text, sharing of sub-jaxprs, depth and size.
//! (Numerical agreement with the reference evaluator is checked from Python, where XLA
//! compiles the text: tests/test_lowering.py.)

use ferrax_ir::generate::{chain, nested_jits, random_jaxpr, RandomOptions};
use ferrax_ir::lower::stablehlo::{lower_jaxpr, LowerError};
use ferrax_ir::text::parse_jaxpr;

#[test]
fn main_takes_constvars_then_invars_and_returns_the_outputs() {
    let j = parse_jaxpr(
        "{ lambda a:f32[8]; b:f32[8] c:f32[]. let\n    d:f32[8] = mul b a\n    e:f32[8] = add d c\n  in (e, c) }",
    )
    .unwrap();
    let text = lower_jaxpr(&j, "m").unwrap();
    assert!(text.starts_with("module @m {\n"), "{text}");
    assert!(
        text.contains("func.func public @main(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>, %arg2: tensor<f32>) -> (tensor<8xf32>, tensor<f32>)"),
        "{text}"
    );
    // The scalar operand is broadcast before the add (StableHLO wants equal shapes).
    assert!(
        text.contains("\"stablehlo.broadcast_in_dim\"(%arg2)"),
        "{text}"
    );
    assert!(text.contains("\"func.return\"("), "{text}");
}

#[test]
fn a_shared_sub_jaxpr_becomes_one_function() {
    let j = parse_jaxpr(
        "{ lambda ; a:f32[3]. let\n    b:f32[3] = jit[name=f jaxpr={ lambda ; x:f32[3]. let y:f32[3] = sin x in (y,) }] a\n  in (b,) }",
    )
    .unwrap();
    let text = lower_jaxpr(&j, "m").unwrap();
    assert_eq!(text.matches("func.func private").count(), 1, "{text}");
    assert!(text.contains("{callee = @f_0}"), "{text}");
}

#[test]
fn nested_constants_are_an_error() {
    let j = parse_jaxpr(
        "{ lambda ; a:f32[3]. let\n    b:f32[3] = jit[name=f jaxpr={ lambda c:f32[3]; x:f32[3]. let y:f32[3] = mul x c in (y,) }] a\n  in (b,) }",
    )
    .unwrap();
    // The parser reads nested constvars as constants of unknown value.
    assert!(matches!(
        lower_jaxpr(&j, "m"),
        Err(LowerError::NestedConstants { count: 1, .. })
    ));
}

#[test]
fn deep_nests_and_long_chains_lower_without_recursion() {
    let nest = nested_jits(100_000).unwrap();
    let text = lower_jaxpr(nest.jaxpr(), "deep").unwrap();
    assert_eq!(text.matches("func.func").count(), 100_000);
    let c = chain(333_333, 128).unwrap();
    let text = lower_jaxpr(&c, "chain").unwrap();
    assert!(text.len() > 1_000_000);
}

#[test]
fn random_jaxprs_lower() {
    for seed in 0..200 {
        let j = random_jaxpr(seed, RandomOptions::default()).unwrap();
        let text = lower_jaxpr(&j, "r").unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(text.matches("func.func public @main").count(), 1);
    }
}

#[test]
fn floor_ceil_and_round_lower_to_their_ops() {
    let j = parse_jaxpr(
        "{ lambda ; a:f32[2]. let b:f32[2] = round[rounding_method=0] a; \
         c:f32[2] = round[rounding_method=1] a; d:f32[2] = floor a; e:f32[2] = ceil a \
         in (b, c, d, e) }",
    )
    .unwrap();
    let text = lower_jaxpr(&j, "m").unwrap();
    for op in [
        "\"stablehlo.round_nearest_afz\"(%arg0)",
        "\"stablehlo.round_nearest_even\"(%arg0)",
        "\"stablehlo.floor\"(%arg0)",
        "\"stablehlo.ceil\"(%arg0)",
    ] {
        assert!(text.contains(op), "{op}\n{text}");
    }
}

/// `select_n` with one case is that case whatever the predicate (JAX 0.10.2: `select_n(True, x)`
/// is `x`, and its lowering returns the case untouched); the typechecker, the evaluator
/// and the lowering agree.
#[test]
fn select_n_with_one_case_is_the_case() {
    use ferrax_ir::eval::{eval_jaxpr, HostArray};
    use ferrax_ir::{typecheck, DType, Shape};
    for which in ["bool[]", "bool[3]", "i32[]", "u8[3]"] {
        let text =
            format!("{{ lambda ; p:{which} a:f32[3]. let b:f32[3] = select_n p a in (b,) }}");
        let j = parse_jaxpr(&text).unwrap();
        typecheck(&j).unwrap_or_else(|e| panic!("{which}: {e}"));
        let lowered = lower_jaxpr(&j, "m").unwrap();
        assert!(lowered.contains("\"func.return\"(%arg1)"), "{lowered}");
        assert!(!lowered.contains("stablehlo.select"), "{lowered}");
        let p_aval = j.var_aval(j.invars()[0]);
        let dims = p_aval.shape.dims().to_vec();
        let n = dims.iter().product::<i64>() as usize;
        let a = HostArray::from_f64(Shape::new(&[3]).unwrap(), DType::F32, vec![1.0, 2.0, 3.0])
            .unwrap();
        let shape = Shape::new(&dims).unwrap();
        let preds = if p_aval.dtype == DType::Bool {
            vec![HostArray::from_bool(shape, vec![true; n]).unwrap()]
        } else {
            vec![
                HostArray::from_i64(shape.clone(), p_aval.dtype, vec![7; n]).unwrap(),
                HostArray::from_i64(shape, p_aval.dtype, vec![0; n]).unwrap(),
            ]
        };
        for p in preds {
            let out =
                eval_jaxpr(&j, &[], &[p, a.clone()]).unwrap_or_else(|e| panic!("{which}: {e}"));
            assert_eq!(out, vec![a.clone()], "{which}");
        }
    }
}

/// Keys are their data in the module: `key<fry>[3]` is `tensor<3x2xui32>` in `@main`'s
/// signature and in control flow; `random_wrap`/`random_unwrap` are the identity; the
/// structural ops take the words' trailing dimension in their attributes. (The bits are
/// compared with JAX's through XLA in tests/test_keys_ir.py.)
#[test]
fn keys_lower_as_their_u32_data() {
    let j = parse_jaxpr(
        "{ lambda ; a:u32[3,2] b:i32[]. let\n    c:key<fry>[3] = random_wrap[impl=fry] a\n    \
         d:key<fry>[2,3] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 3) sharding=None] c\n    \
         e:key<fry>[3,2] = transpose[permutation=(1, 0)] d\n    \
         f:key<fry>[1,2] = dynamic_slice[slice_sizes=(1, 2)] e b 0:i32[]\n    \
         g:u32[3,2] = random_unwrap c\n  in (f, g) }",
    )
    .unwrap();
    let text = lower_jaxpr(&j, "m").unwrap();
    for piece in [
        "func.func public @main(%arg0: tensor<3x2xui32>, %arg1: tensor<i32>) -> (tensor<1x2x2xui32>, tensor<3x2xui32>)",
        "{broadcast_dimensions = array<i64: 1, 2>} : (tensor<3x2xui32>) -> tensor<2x3x2xui32>",
        "{permutation = array<i64: 1, 0, 2>} : (tensor<2x3x2xui32>) -> tensor<3x2x2xui32>",
        "{slice_sizes = array<i64: 1, 2, 2>}",
        "\"func.return\"(%",
    ] {
        assert!(text.contains(piece), "{piece}\n{text}");
    }
    // random_unwrap returns random_wrap's operand itself.
    assert!(
        text.contains(", %arg0) : (tensor<1x2x2xui32>, tensor<3x2xui32>) -> ()"),
        "{text}"
    );
}

#[test]
fn igamma_family_lowers_to_jaxs_two_loops() {
    // JAX's expansion: a continued fraction and a series, each a stablehlo.while, with
    // lgamma for the prefactor (and digamma for the derivative in a); f16 computed in
    // f32 and converted back; no func.call (the loops' regions are written inline and
    // capture nothing from above).
    for (prim, digamma) in [
        ("igamma", false),
        ("igammac", false),
        ("igamma_grad_a", true),
    ] {
        let j = parse_jaxpr(&format!(
            "{{ lambda ; a:f16[3] b:f16[]. let c:f16[3] = {prim} a b in (c,) }}"
        ))
        .unwrap();
        let text = lower_jaxpr(&j, "m").unwrap();
        assert_eq!(
            text.matches("\"stablehlo.while\"").count(),
            2,
            "{prim}:\n{text}"
        );
        assert_eq!(text.matches("\"chlo.lgamma\"").count(), 1, "{prim}");
        assert_eq!(text.contains("\"chlo.digamma\""), digamma, "{prim}");
        assert!(!text.contains("func.call"), "{prim}");
        assert!(text.contains("(tensor<3xf16>) -> tensor<3xf32>"), "{prim}");
        assert!(text.contains("(tensor<3xf32>) -> tensor<3xf16>"), "{prim}");
    }
}
