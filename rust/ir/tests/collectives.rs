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
