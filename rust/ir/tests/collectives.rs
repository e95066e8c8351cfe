//! Named mesh axes: sharding annotations (`sharding_constraint`, `@main`'s shardings),
//! and (later in this file) collectives and `shard_map`.

use ferrax_ir::lower::stablehlo::{lower_jaxpr, lower_jaxpr_with, LowerError, LowerOptions};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{Mesh, PartitionSpec};
use std::sync::Arc;

fn spec(entries: &[&[&str]]) -> PartitionSpec {
    PartitionSpec::new(
        entries
            .iter()
            .map(|e| e.iter().map(|n| Arc::from(*n)).collect())
            .collect(),
    )
}

fn mesh22() -> Mesh {
    Mesh::new([("x", 2), ("y", 2)]).unwrap()
}

const CONSTRAINED: &str = "{ lambda ; a:f32[8,8] b:f32[8,8]. let
    c:f32[8,8] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b
    d:f32[8,8] = sharding_constraint[
      mesh=Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))
      spec=P('x',)
    ] c
  in (d,) }";

#[test]
fn main_shardings_and_constraint_lower_as_jax_with_shardy() {
    let j = parse_jaxpr(CONSTRAINED).unwrap();
    let opts = LowerOptions {
        mesh: Some(mesh22()),
        arg_specs: vec![Some(spec(&[&["x"]])), Some(spec(&[&[], &["y"]]))],
        result_specs: vec![Some(spec(&[]))],
        num_partitions: 4,
    };
    let text = lower_jaxpr_with(&j, "jit_g", &opts).unwrap();
    let want_head = "module @jit_g attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {\n  sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n  func.func public @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"y\"}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {\n";
    assert!(text.starts_with(want_head), "{text}");
    assert!(
        text.contains("%1 = sdy.sharding_constraint %0 <@mesh, [{\"x\"}, {}]> : tensor<8x8xf32>\n"),
        "{text}"
    );
    // The same mesh is declared once.
    assert_eq!(text.matches("sdy.mesh").count(), 1, "{text}");
}

#[test]
fn unannotated_lowering_is_unchanged_and_partial_annotations_are_allowed() {
    let j = parse_jaxpr(CONSTRAINED).unwrap();
    let plain = lower_jaxpr_with(
        &j,
        "m",
        &LowerOptions {
            num_partitions: 4,
            ..LowerOptions::default()
        },
    )
    .unwrap();
    assert!(plain.starts_with("module @m attributes {mhlo.num_partitions = 4"));
    let opts = LowerOptions {
        mesh: Some(mesh22()),
        arg_specs: vec![None, Some(spec(&[&["y", "x"]]))],
        result_specs: vec![],
        num_partitions: 4,
    };
    let text = lower_jaxpr_with(&j, "m", &opts).unwrap();
    assert!(text.contains("%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"y\", \"x\"}, {}]>}"), "{text}");
    // Without options, a jaxpr without meshes lowers as before (no attributes).
    let j2 = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }").unwrap();
    assert!(lower_jaxpr(&j2, "m")
        .unwrap()
        .starts_with("module @m {\n  func.func public @main"));
}

#[test]
fn lowering_option_errors() {
    let j = parse_jaxpr(CONSTRAINED).unwrap();
    // A mesh of 4 devices in a module of 1 partition.
    match lower_jaxpr(&j, "m") {
        Err(LowerError::TooFewPartitions {
            mesh_size: 4,
            num_partitions: 1,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let bad = |opts: LowerOptions, needle: &str| {
        let e = lower_jaxpr_with(&j, "m", &opts).unwrap_err();
        assert!(e.to_string().contains(needle), "{e} lacks {needle}");
    };
    bad(
        LowerOptions {
            mesh: Some(mesh22()),
            arg_specs: vec![Some(spec(&[]))],
            num_partitions: 4,
            ..LowerOptions::default()
        },
        "1 argument specs given for 2 arguments",
    );
    bad(
        LowerOptions {
            mesh: None,
            result_specs: vec![Some(spec(&[]))],
            num_partitions: 4,
            ..LowerOptions::default()
        },
        "without a mesh",
    );
    bad(
        LowerOptions {
            mesh: Some(mesh22()),
            result_specs: vec![Some(spec(&[&["z"]]))],
            num_partitions: 4,
            ..LowerOptions::default()
        },
        "result 0 (f32[8,8]): resource axis 'z'",
    );
    bad(
        LowerOptions {
            mesh: Some(mesh22()),
            result_specs: vec![Some(spec(&[]))],
            num_partitions: 2,
            ..LowerOptions::default()
        },
        "mesh of 4 devices but the module is lowered for 2 partitions",
    );
}

#[test]
fn sharding_constraint_round_trips_and_transposes_to_itself() {
    let j = parse_jaxpr(CONSTRAINED).unwrap();
    assert_eq!(
        print_jaxpr(&parse_jaxpr(&print_jaxpr(&j)).unwrap()),
        print_jaxpr(&j)
    );
    let lin = parse_jaxpr(
        "{ lambda ; a:f32[4,2]. let
    b:f32[4,2] = sharding_constraint[
      mesh=Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))
      spec=P('x', 'y')
    ] a
  in (b,) }",
    )
    .unwrap();
    let t = ferrax_ir::passes::transpose(&lin, &[true]).unwrap();
    let text = print_jaxpr(&t);
    assert!(text.contains("sharding_constraint["), "{text}");
    assert!(text.contains("spec=P('x', 'y')"), "{text}");
}

// ---------------------------------------------------------------------------------------
// Collectives and shard_map: text.

/// Jaxprs JAX 0.10.2 printed (`jax.make_jaxpr` of shard_maps with every collective; the
/// probes are in the files' names).
const JAX_PRINTED: [(&str, &str); 4] = [
    (
        "every_collective",
        include_str!("collectives/jax_every_collective.jaxpr"),
    ),
    (
        "untiled_and_multi_axis",
        include_str!("collectives/jax_untiled_and_multi_axis.jaxpr"),
    ),
    (
        "nested_jit_cond",
        include_str!("collectives/jax_nested_jit_cond.jaxpr"),
    ),
    (
        "psum_pmax_pmin",
        include_str!("collectives/jax_psum_pmax_pmin.jaxpr"),
    ),
];

#[test]
fn jax_printed_shard_maps_read_typecheck_and_round_trip() {
    for (name, text) in JAX_PRINTED {
        let j = parse_jaxpr(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        ferrax_ir::typecheck(&j).unwrap_or_else(|e| panic!("{name}: {e}"));
        let printed = print_jaxpr(&j);
        let again = parse_jaxpr(&printed).unwrap_or_else(|e| panic!("{name}: {e}\n{printed}"));
        assert_eq!(print_jaxpr(&again), printed, "{name}");
        // ferrax keeps varying axes as pvary equations, not in types; psum_invariant
        // reads as psum.
        assert!(!printed.contains("{V:"), "{name}: {printed}");
        assert!(!printed.contains("psum_invariant"), "{name}: {printed}");
    }
}

#[test]
fn shard_map_text_keeps_jax_params() {
    let j = parse_jaxpr(JAX_PRINTED[0].1).unwrap();
    let printed = print_jaxpr(&j);
    for needle in [
        "shard_map[",
        "check_vma=True",
        "in_specs=(P('x', 'y'),)",
        "mesh=Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))",
        "newly_manual_axes=frozenset({'x', 'y'})",
        "out_specs=(P('x', 'y'), P('x', 'y'), P('x', 'y'), P('x', 'y'))",
        "psum[axes=('x',)]",
        "ppermute[axis_name=('x',) perm=((0, 1), (1, 0))]",
        "axis_index[axis_name=y]",
        "axis_name=y",
    ] {
        assert!(printed.contains(needle), "{needle} not in\n{printed}");
    }
}

// ---------------------------------------------------------------------------------------
// The pvary insertion pass.

fn names(ns: &[&str]) -> Vec<Arc<str>> {
    ns.iter().map(|n| Arc::from(*n)).collect()
}

#[test]
fn insert_pvary_matches_jax_tracing() {
    // The body of tests/collectives/jax_psum_pmax_pmin.jaxpr as ferrax traces it, before
    // the pass: no pvary.
    let body = parse_jaxpr(
        "{ lambda ; a:f32[2,4] b:f32[]. let
    c:f32[] = convert_element_type[new_dtype=float32 weak_type=False] b
    e:f32[2,4] = mul a c
    f:f32[2,4] = psum[axes=('x',)] e
    g:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] f
    i:f32[2,4] = pmax[axes=('x', 'y') axis_index_groups=None] a
    j:f32[2,4] = psum[axes=('x',)] a
    l:f32[2,4] = pmin[axes=('y',) axis_index_groups=None] j
  in (g, i, l) }",
    )
    .unwrap();
    let mesh = mesh22();
    let (j, outs) = ferrax_ir::passes::insert_pvary(
        &body,
        &mesh,
        &[names(&["x"]), names(&[])],
        Some(&[names(&[]), names(&[]), names(&["y"])]),
    )
    .unwrap();
    // JAX's body, without its {V:...} annotations and with psum_invariant as psum.
    let want = parse_jaxpr(
        "{ lambda ; a:f32[2,4] b:f32[]. let
    c:f32[] = convert_element_type[new_dtype=float32 weak_type=False] b
    d:f32[] = pvary[axes=('x',)] c
    e:f32[2,4] = mul a d
    f:f32[2,4] = psum[axes=('x',)] e
    g:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] f
    h:f32[2,4] = pvary[axes=('y',)] a
    i:f32[2,4] = pmax[axes=('x', 'y') axis_index_groups=None] h
    j:f32[2,4] = psum[axes=('x',)] a
    k:f32[2,4] = pvary[axes=('y',)] j
    l:f32[2,4] = pmin[axes=('y',) axis_index_groups=None] k
    m:f32[2,4] = pvary[axes=('y',)] l
  in (g, i, m) }",
    )
    .unwrap();
    assert_eq!(print_jaxpr(&j), print_jaxpr(&want));
    assert_eq!(outs, vec![names(&[]), names(&[]), names(&["y"])]);
}

#[test]
fn insert_pvary_goes_through_calls_and_control_flow() {
    // A psum inside a jit makes its output invariant; cond branches agree; a scan carry
    // that meets a varying value is widened from the start.
    let body = parse_jaxpr(
        "{ lambda ; a:f32[2] b:f32[] p:i32[] s:f32[3]. let
    c:f32[2] = jit[
      name=f
      jaxpr={ lambda ; d:f32[2]. let e:f32[2] = psum[axes=('y',)] d in (e,) }
    ] a
    f:f32[2] = cond[
      branches=(
        { lambda ; g:f32[2] h:f32[]. let in (g,) }
        { lambda ; i:f32[2] j:f32[]. let k:f32[2] = mul i j in (k,) }
      )
    ] p c b
    l:f32[] m:f32[3] = scan[
      _split_transpose=False
      jaxpr={ lambda ; n:f32[] o:f32[]. let q:f32[] = add n o in (q, n) }
      length=3
      linear=(False, False)
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] b s
  in (c, f, l, m) }",
    )
    .unwrap();
    let mesh = mesh22();
    let (j, outs) = ferrax_ir::passes::insert_pvary(
        &body,
        &mesh,
        &[names(&["x", "y"]), names(&[]), names(&[]), names(&["x"])],
        None,
    )
    .unwrap();
    ferrax_ir::typecheck_in(&j, &ferrax_ir::AxisEnv::of([("x", 2), ("y", 2)])).unwrap();
    assert_eq!(
        outs,
        vec![names(&["x"]), names(&["x"]), names(&["x"]), names(&["x"])],
        "{}",
        print_jaxpr(&j)
    );
    let text = print_jaxpr(&j);
    // The cond's second branch multiplies by an invariant b: b is pvary'd inside; the
    // scan's initial carry b is pvary'd before the scan.
    assert!(text.contains("pvary[axes=('x',)] j"), "{text}");
    assert_eq!(text.matches("pvary[axes=('x',)] b").count(), 1, "{text}");
}

// ---------------------------------------------------------------------------------------
// Transpose, DCE: checked through the reference evaluator.

use ferrax_ir::eval::{eval_jaxpr, HostArray};

/// Deterministic values in [-1, 1).
fn values(seed: u64, aval: &ferrax_ir::AbstractValue) -> HostArray {
    let n = aval.shape.size() as usize;
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let data: Vec<f64> = (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect();
    HostArray::from_f64(aval.shape.clone(), aval.dtype, data).unwrap()
}

fn dot(a: &HostArray, b: &HostArray) -> f64 {
    a.to_f64_vec()
        .iter()
        .zip(b.to_f64_vec())
        .map(|(x, y)| x * y)
        .sum()
}

/// A linear shard_map using every linear collective; its outputs' specs cover the axes
/// they vary over.
const LINEAR_SHARD_MAP: &str = "{ lambda ; a:f32[8,8] w:f32[4,4]. let
    e:f32[4,16] f:f32[2,16] g:f32[4,4,8] h:f32[16,4] = shard_map[
      in_specs=(P('x', 'y'), P())
      jaxpr={ lambda ; a:f32[4,4] w:f32[4,4]. let
          b:f32[8,4] = all_gather[all_gather_dimension=0 axis_name=('y',) axis_size=2 tiled=True] a
          c:f32[4,4] = reduce_scatter[axis_name=('y',) axis_size=2 scatter_dimension=0 tiled=True] b
          d:f32[4,4] = ppermute[axis_name=('x',) perm=((0, 1), (1, 0))] c
          e:f32[2,8] = all_to_all[axis_name=y concat_axis=1 split_axis=0 tiled=True] d
          f:f32[2,8] = psum[axes=('x',)] e
          g:f32[2,4,4] = all_gather[all_gather_dimension=0 axis_name=('x',) axis_size=2 tiled=False] a
          h:f32[4,4] = pvary[axes=('x', 'y')] w
          i:f32[4,4] = reduce_scatter[axis_name=('x',) axis_size=2 scatter_dimension=0 tiled=False] g
          j:f32[4,4] = add h i
        in (e, f, g, j) }
      mesh=Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))
      out_specs=(P('x', 'y'), P(None, 'y'), P('x', None, 'y'), P(('x', 'y'),))
    ] a w
  in (e, f, g, h) }";

#[test]
fn shard_map_transpose_is_the_adjoint() {
    let j = parse_jaxpr(LINEAR_SHARD_MAP).unwrap_or_else(|e| panic!("{e}"));
    ferrax_ir::typecheck(&j).unwrap();
    let t = ferrax_ir::passes::transpose(&j, &[true, true]).unwrap();
    ferrax_ir::typecheck(&t).unwrap_or_else(|e| panic!("{e}\n{}", print_jaxpr(&t)));
    let text = print_jaxpr(&t);
    for needle in [
        "pvary[axes=('x',)]",
        "psum[axes=('x', 'y')]",
        "perm=((1, 0), (0, 1))",
    ] {
        assert!(text.contains(needle), "{needle} not in\n{text}");
    }
    for seed in 0..3 {
        let xs: Vec<HostArray> = j
            .in_avals()
            .iter()
            .enumerate()
            .map(|(k, a)| values(seed * 10 + k as u64, a))
            .collect();
        let ys: Vec<HostArray> = j
            .out_avals()
            .iter()
            .enumerate()
            .map(|(k, a)| values(seed * 10 + 5 + k as u64, a))
            .collect();
        let fx = eval_jaxpr(&j, &[], &xs).unwrap();
        let ty = eval_jaxpr(&t, &[], &ys).unwrap();
        let lhs: f64 = fx.iter().zip(&ys).map(|(a, b)| dot(a, b)).sum();
        let rhs: f64 = xs.iter().zip(&ty).map(|(a, b)| dot(a, b)).sum();
        assert!(
            (lhs - rhs).abs() < 1e-4 * (1.0 + lhs.abs()),
            "{lhs} vs {rhs}\n{text}"
        );
    }
}

#[test]
fn shard_map_dce_drops_unused_outputs_and_inputs_and_keeps_values() {
    let j = parse_jaxpr(LINEAR_SHARD_MAP).unwrap();
    // Keep only output 1 (f = psum of the all_to_all chain of a): w is dropped.
    let (d, used_in) = ferrax_ir::passes::dce(&j, &[false, true, false, false]).unwrap();
    assert_eq!(used_in, vec![true, false]);
    ferrax_ir::typecheck(&d).unwrap();
    let text = print_jaxpr(&d);
    assert!(text.contains("in_specs=(P('x', 'y'),)"), "{text}");
    assert!(text.contains("out_specs=(P(None, 'y'),)"), "{text}");
    assert!(!text.contains("pvary"), "{text}");
    let xs: Vec<HostArray> = j
        .in_avals()
        .iter()
        .enumerate()
        .map(|(k, a)| values(k as u64, a))
        .collect();
    let full = eval_jaxpr(&j, &[], &xs).unwrap();
    let pruned = eval_jaxpr(&d, &[], &xs[..1]).unwrap();
    assert_eq!(pruned.len(), 1);
    assert_eq!(pruned[0].to_f64_vec(), full[1].to_f64_vec());
}

#[test]
fn shard_map_cost_counts_every_device() {
    let j = parse_jaxpr(
        "{ lambda ; a:f32[8]. let
    b:f32[2] = shard_map[
      in_specs=(P('x',),)
      jaxpr={ lambda ; c:f32[2]. let d:f32[2] = sin c; e:f32[2] = psum[axes=('x',)] d in (e,) }
      mesh=Mesh('x': 4, axis_types=(Auto,))
      out_specs=(P(),)
    ] a
  in (b,) }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Per device: 2 transcendentals for sin, 2 flops for the psum's combining; 4 devices.
    let c = ferrax_ir::passes::cost(&j);
    assert_eq!((c.flops, c.transcendentals), (8.0, 8.0));
}

#[test]
fn shard_map_partial_eval_splits_and_keeps_values() {
    let j = parse_jaxpr(
        "{ lambda ; a:f32[4,4] w:f32[]. let
    d:f32[2,4] e:f32[4,4] = shard_map[
      in_specs=(P('x', 'y'), P())
      jaxpr={ lambda ; a:f32[2,2] w:f32[]. let
          b:f32[2,2] = sin a
          c:f32[2,2] = psum[axes=('x',)] b
          v:f32[] = pvary[axes=('y',)] w
          d:f32[2,2] = mul c v
          e:f32[2,2] = cos a
        in (d, e) }
      mesh=Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))
      out_specs=(P(None, 'y'), P('x', 'y'))
    ] a w
  in (d, e) }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let pe = ferrax_ir::passes::partial_eval(&j, &[false, true], &[false, false]).unwrap();
    ferrax_ir::typecheck(&pe.known).unwrap_or_else(|e| panic!("{e}\n{}", print_jaxpr(&pe.known)));
    ferrax_ir::typecheck(&pe.unknown)
        .unwrap_or_else(|e| panic!("{e}\n{}", print_jaxpr(&pe.unknown)));
    assert_eq!(pe.out_unknowns, vec![true, false]);
    assert_eq!(pe.num_residuals, 1);
    let known_text = print_jaxpr(&pe.known);
    // The residual (psum's result over x, per device f32[2,2], varying over y only)
    // leaves with a leading axis split over y.
    assert!(known_text.contains("f32[2,2,2]"), "{known_text}");
    assert!(known_text.contains("P('y',)"), "{known_text}");
    let a = values(1, &j.in_avals()[0]);
    let w = values(2, &j.in_avals()[1]);
    let full = eval_jaxpr(&j, &[], &[a.clone(), w.clone()]).unwrap();
    let known = eval_jaxpr(&pe.known, &[], &[a]).unwrap();
    assert_eq!(known.len(), 2);
    assert_eq!(known[0].to_f64_vec(), full[1].to_f64_vec());
    let unknown = eval_jaxpr(&pe.unknown, &[], &[known[1].clone(), w]).unwrap();
    assert_eq!(unknown[0].to_f64_vec(), full[0].to_f64_vec());
}

// ---------------------------------------------------------------------------------------
// Errors: unbound axes, devices that disagree, meshes too large.

#[test]
fn unbound_axes_are_type_errors() {
    // At the top level (parse reads a body printed alone; typecheck refuses it).
    let j =
        parse_jaxpr("{ lambda ; a:f32[2]. let b:f32[2] = psum[axes=('x',)] a in (b,) }").unwrap();
    let e = ferrax_ir::typecheck(&j).unwrap_err().to_string();
    assert!(e.contains("Found an unbound axis name: x"), "{e}");
    // In a shard_map whose mesh lacks the axis (nested in a jit of the body).
    let text = "{ lambda ; a:f32[2]. let
    b:f32[2] = shard_map[
      in_specs=(P(),)
      jaxpr={ lambda ; c:f32[2]. let
          d:f32[2] = jit[
            name=f
            jaxpr={ lambda ; e:f32[2]. let f:f32[2] = psum[axes=('z',)] e in (f,) }
          ] c
        in (d,) }
      mesh=Mesh('x': 2, axis_types=(Auto,))
      out_specs=(P(),)
    ] a
  in (b,) }";
    let e = match parse_jaxpr(text) {
        Ok(j) => ferrax_ir::typecheck(&j).unwrap_err().to_string(),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("Found an unbound axis name: z"), "{e}");
    // all_to_all's sizes come from the mesh even in a body read before its shard_map.
    let bad = "{ lambda ; a:f32[4]. let
    b:f32[4] = shard_map[
      in_specs=(P(),)
      jaxpr={ lambda ; c:f32[4]. let
          d:f32[2] = all_to_all[axis_name=x concat_axis=0 split_axis=0 tiled=True] c
        in (d,) }
      mesh=Mesh('x': 2, axis_types=(Auto,))
      out_specs=(P('x',),)
    ] a
  in (b,) }";
    let e = parse_jaxpr(bad).unwrap_err().to_string();
    assert!(e.contains("differ from the rule's (f32[4])"), "{e}");
}

#[test]
fn divergent_control_flow_with_collectives_is_an_eval_error() {
    // The cond index is the device's axis_index: devices take different branches.
    let text = "{ lambda ; a:f32[2]. let
    b:f32[2] = shard_map[
      in_specs=(P('x',),)
      jaxpr={ lambda ; c:f32[1]. let
          i:i32[] = axis_index[axis_name=x]
          d:f32[1] = cond[
            branches=(
              { lambda ; e:f32[1]. let f:f32[1] = psum[axes=('x',)] e in (f,) }
              { lambda ; g:f32[1]. let in (g,) }
            )
          ] i c
        in (d,) }
      mesh=Mesh('x': 2, axis_types=(Auto,))
      out_specs=(P('x',),)
    ] a
  in (b,) }";
    let j = parse_jaxpr(text).unwrap_or_else(|e| panic!("{e}"));
    let x = HostArray::from_f64(
        j.in_avals()[0].shape.clone(),
        ferrax_ir::DType::F32,
        vec![1.0, 2.0],
    )
    .unwrap();
    let e = eval_jaxpr(&j, &[], std::slice::from_ref(&x)).unwrap_err();
    assert!(
        matches!(e, ferrax_ir::eval::EvalError::Unsupported { .. }),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("index that differs between devices"),
        "{e}"
    );
    // The same cond without a collective runs device by device.
    let ok = text.replace("f:f32[1] = psum[axes=('x',)] e", "f:f32[1] = neg e");
    let j = parse_jaxpr(&ok).unwrap();
    let out = eval_jaxpr(&j, &[], &[x]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![-1.0, 2.0]);
}

// ---------------------------------------------------------------------------------------
// Lowering text.

#[test]
fn collectives_lower_as_jax_with_shardy() {
    let j = parse_jaxpr(JAX_PRINTED[0].1).unwrap();
    let text = lower_jaxpr_with(
        &j,
        "jit_f",
        &LowerOptions {
            num_partitions: 4,
            ..LowerOptions::default()
        },
    )
    .unwrap();
    for needle in [
        "module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {",
        "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>",
        "sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{\"x\"}, {\"y\"}]>] out_shardings=[<@mesh, [{\"x\"}, {\"y\"}]>, <@mesh, [{\"x\"}, {\"y\"}]>, <@mesh, [{\"x\"}, {\"y\"}]>, <@mesh, [{\"x\"}, {\"y\"}]>] manual_axes={\"x\", \"y\"}",
        "\"stablehlo.all_reduce\"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}>",
        "\"stablehlo.all_gather\"(%arg0) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> : (tensor<4x4xf32>) -> tensor<8x4xf32>",
        "source_target_pairs = dense<[[0, 2], [2, 0], [1, 3], [3, 1]]> : tensor<4x2xi64>",
        "\"stablehlo.partition_id\"()",
        "scatter_dimension = 0 : i64, use_global_device_ids}>",
        "concat_dimension = 1 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}>",
        "sdy.return",
    ] {
        assert!(text.contains(needle), "{needle}\nnot in\n{text}");
    }
    // A mesh larger than the module's partitions; a collective outside any shard_map.
    match lower_jaxpr(&j, "m") {
        Err(LowerError::TooFewPartitions { mesh_size: 4, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(ferrax_ir::lower::stablehlo::required_partitions(&j), 4);
    let top =
        parse_jaxpr("{ lambda ; a:f32[2]. let b:f32[2] = psum[axes=('x',)] a in (b,) }").unwrap();
    assert!(matches!(
        lower_jaxpr(&top, "m"),
        Err(LowerError::NoMesh { .. })
    ));
}

#[test]
fn collectives_in_nested_calls_get_the_mesh() {
    // The jit in the body is lowered once per mesh, with the body's groups.
    let j = parse_jaxpr(JAX_PRINTED[2].1).unwrap();
    let text = lower_jaxpr_with(
        &j,
        "m",
        &LowerOptions {
            num_partitions: 4,
            ..LowerOptions::default()
        },
    )
    .unwrap();
    assert!(
        text.contains("replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>"),
        "{text}"
    );
    assert_eq!(text.matches("func.func private").count(), 4, "{text}");
}

#[test]
fn lockstep_scan_of_length_zero_stacks_typed_empty_outputs() {
    // Found by the generators: a scan holding a collective, of length 0, in a body.
    let j = parse_jaxpr(
        "{ lambda ; a:f32[2]. let
    b:i16[0,3] c:f32[2] = shard_map[
      in_specs=(P('x',),)
      jaxpr={ lambda ; d:f32[1]. let
          e:f32[1] f:i16[0,3] = scan[
            jaxpr={ lambda ; g:f32[1]. let
                h:f32[1] = pvary[axes=('x',)] g
                i:i16[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,)] 4:i16[]
              in (h, i) }
            length=0
            num_carry=1
            num_consts=0
            reverse=True
          ] d
        in (f, e) }
      mesh=Mesh('x': 2, axis_types=(Auto,))
      out_specs=(P(), P('x',))
    ] a
  in (b, c) }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let x = values(3, &j.in_avals()[0]);
    let out = eval_jaxpr(&j, &[], std::slice::from_ref(&x)).unwrap();
    assert_eq!(out[0].aval(), j.out_avals()[0]);
    assert_eq!(out[1].to_f64_vec(), x.to_f64_vec());
}

#[test]
fn while_loops_holding_collectives_run_in_lockstep_or_stop() {
    // Each device counts up to a bound; a psum runs every iteration. With the bound the
    // same everywhere the loop runs in lockstep; with the device's axis_index in it, the
    // trip counts differ and the evaluation stops.
    let text = |bound: &str| {
        format!(
            "{{ lambda ; a:f32[2]. let
    b:f32[2] = shard_map[
      in_specs=(P('x',),)
      jaxpr={{ lambda ; c:f32[1]. let
          i:i32[] = axis_index[axis_name=x]
          n:i32[] = {bound}
          d:i32[] e:f32[1] = while[
            body_jaxpr={{ lambda ; f:i32[] g:f32[1]. let
                h:i32[] = add f 1:i32[]
                k:f32[1] = psum[axes=('x',)] g
              in (h, k) }}
            body_nconsts=0
            cond_jaxpr={{ lambda ; m:i32[] o:i32[] p:f32[1]. let q:bool[] = lt o m in (q,) }}
            cond_nconsts=1
          ] n 0:i32[] c
        in (e,) }}
      mesh=Mesh('x': 2, axis_types=(Auto,))
      out_specs=(P('x',),)
    ] a
  in (b,) }}"
        )
    };
    let same = parse_jaxpr(&text("add 0:i32[] 2:i32[]")).unwrap_or_else(|e| panic!("{e}"));
    let x = HostArray::from_f64(
        same.in_avals()[0].shape.clone(),
        ferrax_ir::DType::F32,
        vec![1.0, 2.0],
    )
    .unwrap();
    // Two psums over two devices: 1 + 2 = 3, then 3 + 3 = 6 on each.
    let out = eval_jaxpr(&same, &[], std::slice::from_ref(&x)).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![6.0, 6.0]);
    let differ = parse_jaxpr(&text("add i 1:i32[]")).unwrap();
    let e = eval_jaxpr(&differ, &[], &[x]).unwrap_err();
    assert!(
        e.to_string().contains("trip count differs between devices"),
        "{e}"
    );
}
