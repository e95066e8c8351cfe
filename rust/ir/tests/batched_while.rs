//! `while` with a batched predicate (JAX's vmap of a `while_loop` whose condition depends
//! on batched values): `cond_jaxpr` returns `bool[s...]`, `s` a prefix of every carry's
//! shape; the loop runs while any element is true, and a lane whose element is false
//! keeps its carry.

use ferrax_ir::eval::{eval_jaxpr, eval_jaxpr_with, EvalError, EvalOptions, HostArray};
use ferrax_ir::lower::stablehlo::lower_jaxpr;
use ferrax_ir::passes::{cost_report, dce, partial_eval};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{typecheck, DType, Jaxpr, Shape};
use std::path::Path;

fn corpus_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jax_corpus/vmap_of_while.jaxpr");
    let text = std::fs::read_to_string(path).unwrap();
    text.strip_suffix('\n').unwrap_or(&text).to_owned()
}

fn parse(text: &str) -> Jaxpr {
    parse_jaxpr(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn ints(dims: &[i64], dtype: DType, v: &[i64]) -> HostArray {
    HostArray::from_i64(Shape::new(dims).unwrap(), dtype, v.to_vec()).unwrap()
}

fn i32s(dims: &[i64], v: &[i64]) -> HostArray {
    ints(dims, DType::I32, v)
}

fn values(a: &HostArray) -> Vec<i64> {
    a.as_i64().unwrap().to_vec()
}

/// Collatz steps to reach 1, in plain Rust.
fn collatz_steps(mut n: i64) -> i64 {
    let mut steps = 0;
    while n > 1 {
        n = if n % 2 == 0 { n / 2 } else { 3 * n + 1 };
        steps += 1;
    }
    steps
}

#[test]
fn jax_printed_vmap_of_while_reads_prints_back_and_lowers() {
    let text = corpus_text();
    let j = parse(&text);
    typecheck(&j).unwrap();
    assert_eq!(print_jaxpr(&j), text);
    let hlo = lower_jaxpr(&j, "main").unwrap();
    // The cond region reduces the predicate with `or`; the body selects per lane with the
    // predicate broadcast along the carry's leading dimension.
    assert!(hlo.contains("\"stablehlo.while\""), "{hlo}");
    assert!(hlo.contains("\"stablehlo.or\""), "{hlo}");
    assert!(hlo.contains("\"stablehlo.reduce\""), "{hlo}");
    assert!(
        hlo.contains("broadcast_dimensions = array<i64: 0>} : (tensor<3xi1>) -> tensor<3xi1>"),
        "{hlo}"
    );
    assert!(hlo.matches("\"stablehlo.select\"").count() >= 2, "{hlo}");
}

#[test]
fn collatz_step_counts_per_lane() {
    let j = parse(&corpus_text());
    for input in [[6, 7, 27], [1, 2, 3], [1, 1, 1], [97, 1, 871]] {
        let want: Vec<i64> = input.iter().map(|&n| collatz_steps(n)).collect();
        let out = eval_jaxpr(&j, &[], &[i32s(&[3], &input)]).unwrap();
        assert_eq!(values(&out[0]), want, "input {input:?}");
    }
    assert_eq!(
        [6, 7, 27].map(collatz_steps),
        [8, 16, 111],
        "the plain Rust reference"
    );
}

/// A counter `i32[3]` counting down to 0 and a carry `i32[3,2]` doubled each iteration
/// of its lane: the rows end multiplied by 2^n, n the lane's count.
const LANES: &str = "{ lambda ; a:i32[3] b:i32[3,2]. let
    c:i32[3] d:i32[3,2] = while[
      body_jaxpr={ lambda ; e:i32[3] f:i32[3,2]. let
          g:i32[3] = sub e 1:i32[]
          h:i32[3,2] = mul f 2:i32[]
        in (g, h) }
      body_nconsts=0
      cond_jaxpr={ lambda ; i:i32[3] j:i32[3,2]. let
          k:bool[3] = gt i 0:i32[]
        in (k,) }
      cond_nconsts=0
    ] a b
  in (c, d) }";

#[test]
fn lanes_whose_predicate_is_false_keep_their_carry() {
    let j = parse(LANES);
    assert_eq!(print_jaxpr(&j), LANES);
    let counts = [0, 2, 5];
    let rows = [1, 2, 3, 4, 5, 6];
    let out = eval_jaxpr(&j, &[], &[i32s(&[3], &counts), i32s(&[3, 2], &rows)]).unwrap();
    let mut want = rows.to_vec();
    for (lane, &n) in counts.iter().enumerate() {
        for x in &mut want[2 * lane..2 * lane + 2] {
            *x <<= n;
        }
    }
    assert_eq!(values(&out[0]), vec![0, 0, 0]);
    assert_eq!(values(&out[1]), want);
    assert_eq!(want, vec![1, 2, 12, 16, 160, 192]);
    // A lane starting below zero never runs (a scalar loop would run none too).
    let out = eval_jaxpr(&j, &[], &[i32s(&[3], &[-4, 1, 0]), i32s(&[3, 2], &rows)]).unwrap();
    assert_eq!(values(&out[0]), vec![-4, 0, 0]);
    assert_eq!(values(&out[1]), vec![1, 2, 6, 8, 5, 6]);

    let hlo = lower_jaxpr(&j, "main").unwrap();
    assert!(
        hlo.contains("broadcast_dimensions = array<i64: 0>} : (tensor<3xi1>) -> tensor<3x2xi1>"),
        "{hlo}"
    );
}

/// A predicate of rank 2 over carries of rank 2 and 3, with consts on both sides.
const RANK2: &str = "{ lambda ; a:i32[2,3] b:i32[2,3] c:f32[2,3,4] d:f32[]. let
    e:i32[2,3] f:f32[2,3,4] = while[
      body_jaxpr={ lambda ; g:f32[] h:i32[2,3] i:f32[2,3,4]. let
          j:i32[2,3] = add h 1:i32[]
          k:f32[2,3,4] = add i g
        in (j, k) }
      body_nconsts=1
      cond_jaxpr={ lambda ; l:i32[2,3] m:i32[2,3] n:f32[2,3,4]. let
          o:bool[2,3] = lt m l
        in (o,) }
      cond_nconsts=1
    ] a d b c
  in (e, f) }";

#[test]
fn rank_two_predicate_with_consts() {
    let j = parse(RANK2);
    assert_eq!(print_jaxpr(&j), RANK2);
    let limits = [3, 0, 1, 2, 5, 4];
    let start = [0; 6];
    let xs: Vec<f64> = (0..24).map(f64::from).collect();
    let out = eval_jaxpr(
        &j,
        &[],
        &[
            i32s(&[2, 3], &limits),
            i32s(&[2, 3], &start),
            HostArray::from_f64(Shape::new(&[2, 3, 4]).unwrap(), DType::F32, xs.clone()).unwrap(),
            HostArray::from_f64(Shape::new(&[]).unwrap(), DType::F32, vec![0.5]).unwrap(),
        ],
    )
    .unwrap();
    assert_eq!(values(&out[0]), limits.to_vec());
    let want: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(k, x)| x + 0.5 * limits[k / 4] as f64)
        .collect();
    assert_eq!(out[1].as_f64().unwrap(), &want[..]);
    let hlo = lower_jaxpr(&j, "main").unwrap();
    assert!(hlo.contains("dimensions = array<i64: 0, 1>"), "{hlo}");
    assert!(
        hlo.contains(
            "broadcast_dimensions = array<i64: 0, 1>} : (tensor<2x3xi1>) -> tensor<2x3x4xi1>"
        ),
        "{hlo}"
    );
}

/// Keys carried by a batched loop: each lane folds `1` into its key `n` times.
const KEYS: &str = "{ lambda ; a:u32[3,2] b:i32[3]. let
    c:key<fry>[3] = random_wrap[impl=fry] a
    d:i32[3] e:key<fry>[3] = while[
      body_jaxpr={ lambda ; f:i32[3] g:key<fry>[3]. let
          h:i32[3] = sub f 1:i32[]
          i:key<fry>[3] = random_fold_in g 1:u32[]
        in (h, i) }
      body_nconsts=0
      cond_jaxpr={ lambda ; j:i32[3] k:key<fry>[3]. let
          l:bool[3] = gt j 0:i32[]
        in (l,) }
      cond_nconsts=0
    ] b c
    m:u32[3,2] = random_unwrap e
  in (m,) }";

/// The same loop on one lane (a scalar predicate).
const KEY_LANE: &str = "{ lambda ; a:u32[2] b:i32[]. let
    c:key<fry>[] = random_wrap[impl=fry] a
    d:i32[] e:key<fry>[] = while[
      body_jaxpr={ lambda ; f:i32[] g:key<fry>[]. let
          h:i32[] = sub f 1:i32[]
          i:key<fry>[] = random_fold_in g 1:u32[]
        in (h, i) }
      body_nconsts=0
      cond_jaxpr={ lambda ; j:i32[] k:key<fry>[]. let
          l:bool[] = gt j 0:i32[]
        in (l,) }
      cond_nconsts=0
    ] b c
    m:u32[2] = random_unwrap e
  in (m,) }";

#[test]
fn keys_as_carries_match_one_loop_per_lane() {
    let j = parse(KEYS);
    let lane = parse(KEY_LANE);
    let data = [0, 1, 7, 42, 0xdead_beef, 3];
    let counts = [2, 0, 3];
    let out = eval_jaxpr(
        &j,
        &[],
        &[ints(&[3, 2], DType::U32, &data), i32s(&[3], &counts)],
    )
    .unwrap();
    let mut want = Vec::new();
    for k in 0..3 {
        let o = eval_jaxpr(
            &lane,
            &[],
            &[
                ints(&[2], DType::U32, &data[2 * k..2 * k + 2]),
                i32s(&[], &[counts[k]]),
            ],
        )
        .unwrap();
        want.extend(values(&o[0]));
    }
    assert_eq!(values(&out[0]), want);
    // As JAX computes it: `jax.vmap` of the loop on `jax.random.wrap_key_data(data)`.
    assert_eq!(
        want,
        vec![2215249346, 143550061, 7, 42, 2921736043, 2890680030]
    );
    assert_eq!(
        &want[2..4],
        &data[2..4],
        "a lane that never runs keeps its key"
    );
    assert_ne!(&want[..2], &data[..2]);
    let hlo = lower_jaxpr(&j, "main").unwrap();
    assert!(
        hlo.contains("broadcast_dimensions = array<i64: 0>} : (tensor<3xi1>) -> tensor<3x2xi1>"),
        "{hlo}"
    );
    assert!(
        hlo.contains("\"stablehlo.select\"(") && hlo.contains("tensor<3x2xui32>"),
        "{hlo}"
    );
}

#[test]
fn a_predicate_shape_not_prefixing_every_carry_is_refused() {
    let cases = [
        (
            "{ lambda ; a:i32[3] b:i32[2]. let
    c:i32[3] d:i32[2] = while[
      body_jaxpr={ lambda ; e:i32[3] f:i32[2]. let  in (e, f) }
      body_nconsts=0
      cond_jaxpr={ lambda ; i:i32[3] j:i32[2]. let
          k:bool[3] = gt i 0:i32[]
        in (k,) }
      cond_nconsts=0
    ] a b
  in (c, d) }"
                .to_owned(),
            "carry i32[2] does not start with it",
        ),
        (
            "{ lambda ; a:i32[3,2]. let
    c:i32[3,2] = while[
      body_jaxpr={ lambda ; e:i32[3,2]. let  in (e,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; i:i32[3,2]. let
          k:bool[3,2,1] = broadcast_in_dim[broadcast_dimensions=() shape=(3, 2, 1) sharding=None] True:bool[]
        in (k,) }
      cond_nconsts=0
    ] a
  in (c,) }"
                .to_owned(),
            "returns (bool[3,2,1]), a batched predicate whose shape [3, 2, 1] is not a prefix",
        ),
        (
            "{ lambda ; a:i32[3]. let
    c:i32[3] = while[
      body_jaxpr={ lambda ; e:i32[3]. let  in (e,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; i:i32[3]. let  in (i,) }
      cond_nconsts=0
    ] a
  in (c,) }"
                .to_owned(),
            "cond_jaxpr must return one bool[] (or a batched bool[s...]) but returns (i32[3])",
        ),
    ];
    for (text, want) in &cases {
        let err = parse_jaxpr(text).expect_err("must not read").to_string();
        assert!(err.contains(want), "{err}\n{text}");
    }
}

#[test]
fn a_non_prefix_predicate_names_both_shapes() {
    let text = "{ lambda ; a:i32[3,2]. let
    c:i32[3,2] = while[
      body_jaxpr={ lambda ; e:i32[3,2]. let  in (e,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; i:i32[3,2]. let
          k:i32[2] = reduce_sum[axes=(0,) out_sharding=None] i
          l:bool[2] = gt k 0:i32[]
        in (l,) }
      cond_nconsts=0
    ] a
  in (c,) }";
    let err = parse_jaxpr(text).expect_err("must not read").to_string();
    assert!(err.contains("bool[2]"), "{err}");
    assert!(err.contains("carry i32[3,2]"), "{err}");
    assert!(err.contains("not a prefix"), "{err}");
}

#[test]
fn the_iteration_limit_holds() {
    let j = parse(&LANES.replace("sub e 1:i32[]", "add e 1:i32[]"));
    let opts = EvalOptions {
        max_loop_iterations: Some(50),
        ..EvalOptions::default()
    };
    let err = eval_jaxpr_with(
        &j,
        &[],
        &[i32s(&[3], &[0, 1, 0]), i32s(&[3, 2], &[0; 6])],
        &opts,
    )
    .unwrap_err();
    assert!(matches!(err, EvalError::IterationLimit { .. }), "{err}");
}

#[test]
fn dce_drops_an_unused_carry_and_keeps_the_lanes() {
    let j = parse(LANES);
    let (pruned, _) = dce(&j, &[false, true]).unwrap();
    typecheck(&pruned).unwrap();
    let args = [i32s(&[3], &[3, 0, 1]), i32s(&[3, 2], &[1, 2, 3, 4, 5, 6])];
    let full = eval_jaxpr(&j, &[], &args).unwrap();
    let pruned_out = eval_jaxpr(&pruned, &[], &args).unwrap();
    assert_eq!(values(&pruned_out[0]), values(&full[1]));
    // The counter is read by the condition: it stays a carry.
    let text = print_jaxpr(&pruned);
    assert!(text.contains("bool[3] = gt"), "{text}");
}

#[test]
fn partial_eval_splits_a_batched_loop_correctly() {
    // The counter known, the doubled carry unknown: the known loop runs the counter
    // alone (its lanes as in the full loop); the unknown loop is the whole loop.
    let j = parse(LANES);
    let pe = partial_eval(&j, &[false, true], &[false, false]).unwrap();
    typecheck(&pe.known).unwrap();
    typecheck(&pe.unknown).unwrap();
    let counts = i32s(&[3], &[3, 0, 1]);
    let rows = i32s(&[3, 2], &[1, 2, 3, 4, 5, 6]);
    let full = eval_jaxpr(&j, &[], &[counts.clone(), rows.clone()]).unwrap();
    let known = eval_jaxpr(&pe.known, &[], &[counts]).unwrap();
    let n_known = pe.out_unknowns.iter().filter(|&&u| !u).count();
    let mut unknown_args: Vec<HostArray> = known[n_known..].to_vec();
    unknown_args.push(rows);
    let unknown = eval_jaxpr(&pe.unknown, &[], &unknown_args).unwrap();
    let (mut k, mut u) = (known[..n_known].iter(), unknown.iter());
    for (i, &is_unknown) in pe.out_unknowns.iter().enumerate() {
        let got = if is_unknown { u.next() } else { k.next() }.unwrap();
        assert_eq!(values(got), values(&full[i]), "output {i}");
    }
}

#[test]
fn cost_counts_the_select_and_the_reduction() {
    let j = parse(LANES);
    let r = cost_report(&j);
    assert_eq!(r.total.while_loops, 1);
    // One iteration: the body's sub and mul (3 + 6), the condition twice (3 + 3), the
    // reduce_or (2), the selects (3 + 6).
    assert_eq!(r.total.flops, 26.0, "{r:?}");
    assert_eq!(r.by_primitive["select_n"].flops, 9.0);
    assert_eq!(r.by_primitive["reduce_or"].flops, 2.0);
    assert_eq!(r.by_primitive["gt"].flops, 6.0);
}

/// A batched loop whose condition (and body) call an ordered host callback.
const ORDERED: &str = "{ lambda ; a:i32[3]. let
    b:i32[3] = while[
      body_jaxpr={ lambda ; c:i32[3]. let
          d:i32[3] = sub c 1:i32[]
          io_callback[
            callback=_FlatCallback(callback_func=<function f.<locals>.<lambda> at 0xXXXXXXXXXXXX>, in_tree=PyTreeDef(((*,), {})))
            ordered=True
            result_avals=()
            sharding=None
          ] d
        in (d,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; e:i32[3]. let
          io_callback[
            callback=_FlatCallback(callback_func=<function f.<locals>.<lambda> at 0xXXXXXXXXXXXX>, in_tree=PyTreeDef(((*,), {})))
            ordered=True
            result_avals=()
            sharding=None
          ] e
          f:bool[3] = gt e 0:i32[]
        in (f,) }
      cond_nconsts=0
    ] a
  in (b,) }";

#[test]
fn an_ordered_effect_in_the_condition_carries_the_predicate() {
    let j = parse(ORDERED);
    let hlo = lower_jaxpr(&j, "main").unwrap();
    // The loop state: the token, the predicate, the carry.
    let state = "(!stablehlo.token, tensor<3xi1>, tensor<3xi32>) -> (!stablehlo.token, tensor<3xi1>, tensor<3xi32>)";
    assert!(hlo.contains(state), "{hlo}");
    assert!(hlo.contains("\"stablehlo.or\""), "{hlo}");
    assert!(hlo.contains("\"stablehlo.select\""), "{hlo}");
}

#[test]
fn a_batched_loop_in_a_shard_map_body_runs_in_lockstep() {
    // Each device's block is [0, 1]: lane 0 runs two iterations, lane 1 one (both devices
    // alike), and each iteration sums the carry over the devices; lane 1 keeps the value
    // of its single iteration.
    let text = "{ lambda ; a:f32[4]. let
    b:f32[4] = shard_map[
      in_specs=(P('x',),)
      jaxpr={ lambda ; c:f32[2]. let
          d:i32[2] = convert_element_type[new_dtype=int32 weak_type=False] c
          e:i32[2] f:f32[2] = while[
            body_jaxpr={ lambda ; g:i32[2] h:f32[2]. let
                i:i32[2] = add g 1:i32[]
                k:f32[2] = psum[axes=('x',)] h
              in (i, k) }
            body_nconsts=0
            cond_jaxpr={ lambda ; l:i32[2] m:f32[2]. let
                n:bool[2] = lt l 2:i32[]
              in (n,) }
            cond_nconsts=0
          ] d c
        in (f,) }
      mesh=Mesh('x': 2, axis_types=(Auto,))
      out_specs=(P('x',),)
    ] a
  in (b,) }";
    let j = parse(text);
    let x = HostArray::from_f64(
        Shape::new(&[4]).unwrap(),
        DType::F32,
        vec![0.0, 1.0, 0.0, 1.0],
    )
    .unwrap();
    let out = eval_jaxpr(&j, &[], &[x]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![0.0, 2.0, 0.0, 2.0]);
}
