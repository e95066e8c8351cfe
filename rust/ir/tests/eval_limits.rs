//! The reference evaluator's whole-run limits ([`EvalOptions`]): bytes alive at once,
//! work and loop iterations. Each case of issue 10 stops with its limit's error, at the
//! equation that would exceed it, before anything large is allocated; a smaller case (or
//! a larger limit) passes.

use ferrax_ir::eval::{eval_jaxpr, eval_jaxpr_with, EvalError, EvalOptions, HostArray};
use ferrax_ir::text::parse_jaxpr;
use ferrax_ir::{DType, Jaxpr, Shape};
use std::time::{Duration, Instant};

fn parse(text: &str) -> Jaxpr {
    parse_jaxpr(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn f32_scalar(x: f64) -> HostArray {
    HostArray::scalar_f64(DType::F32, x).unwrap()
}

fn i32_scalar(x: i64) -> HostArray {
    HostArray::from_i64(Shape::scalar(), DType::I32, vec![x]).unwrap()
}

/// `count` broadcasts of a scalar to `n` elements, all of them outputs (so all alive).
fn broadcasts(count: usize, n: u64) -> Jaxpr {
    let mut text = String::from("{ lambda ; a:f32[]. let\n");
    let mut outs = Vec::new();
    for i in 0..count {
        text.push_str(&format!(
            "  b{i}:f32[{n}] = broadcast_in_dim[broadcast_dimensions=() shape=({n},) sharding=None] a\n"
        ));
        outs.push(format!("b{i}"));
    }
    text.push_str(&format!("in ({},) }}", outs.join(", ")));
    parse(&text)
}

/// A broadcast to `n` elements, then a chain of `count` adds, each reading only the
/// previous one.
fn add_chain(count: usize, n: u64) -> Jaxpr {
    let mut text = format!(
        "{{ lambda ; a:f32[]. let\n  c0:f32[{n}] = broadcast_in_dim[broadcast_dimensions=() shape=({n},) sharding=None] a\n"
    );
    for i in 1..=count {
        text.push_str(&format!("  c{i}:f32[{n}] = add c{} a\n", i - 1));
    }
    text.push_str(&format!("in (c{count},) }}"));
    parse(&text)
}

fn assert_quick(start: Instant) {
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn many_large_broadcasts_hit_the_memory_limit_before_allocating() {
    // Issue 10: 40 broadcasts of 2^27 elements would need 40 GiB. Each output is 1 GiB in
    // the evaluator's storage: the first one already exceeds the default 1 GiB.
    let start = Instant::now();
    let e = eval_jaxpr(&broadcasts(40, 1 << 27), &[], &[f32_scalar(1.0)]).unwrap_err();
    match &e {
        EvalError::MemoryLimit {
            limit,
            needed,
            site,
        } => {
            assert_eq!(*limit, EvalOptions::DEFAULT_MAX_LIVE_BYTES);
            assert_eq!(*needed, 8 + (8 << 27));
            assert_eq!((site.depth, site.index), (0, 0));
            assert_eq!(site.primitive, "broadcast_in_dim");
        }
        _ => panic!("{e:?}"),
    }
    let message = e.to_string();
    assert!(message.contains("max_live_bytes"), "{message}");
    assert!(message.contains("equation 0"), "{message}");
    // 2^24 elements (128 MiB each): 7 fit in 1 GiB with the argument, the 8th does not.
    let e = eval_jaxpr(&broadcasts(40, 1 << 24), &[], &[f32_scalar(1.0)]).unwrap_err();
    assert!(
        matches!(&e, EvalError::MemoryLimit { site, .. } if site.index == 7),
        "{e:?}"
    );
    assert_quick(start);
    // Small enough: all 40 are computed.
    let outs = eval_jaxpr(&broadcasts(40, 1 << 10), &[], &[f32_scalar(2.0)]).unwrap();
    assert_eq!(outs.len(), 40);
    assert_eq!(outs[39].as_f64(), Some(&[2.0; 1 << 10][..]));
    // And a limit a little larger than the need lets the same program through.
    let opts = EvalOptions::default().with_max_live_bytes(Some(40 * 8 * 1024 + 8));
    assert!(eval_jaxpr_with(&broadcasts(40, 1 << 10), &[], &[f32_scalar(2.0)], &opts).is_ok());
    let opts = EvalOptions::default().with_max_live_bytes(Some(40 * 8 * 1024 + 7));
    assert!(matches!(
        eval_jaxpr_with(&broadcasts(40, 1 << 10), &[], &[f32_scalar(2.0)], &opts),
        Err(EvalError::MemoryLimit { site, .. }) if site.index == 39
    ));
}

#[test]
fn values_are_freed_after_their_last_use() {
    // 40 chained adds of 2^16 elements (512 KiB each): 20 MiB were every value kept, but
    // at most two are alive at once.
    let j = add_chain(40, 1 << 16);
    let each = 8u64 << 16;
    let opts = EvalOptions::default().with_max_live_bytes(Some(2 * each + 8));
    let outs = eval_jaxpr_with(&j, &[], &[f32_scalar(1.0)], &opts).unwrap();
    assert_eq!(outs[0].as_f64().map(|v| v[0]), Some(41.0));
    // With room for one value less, the first add cannot run.
    let opts = EvalOptions::default().with_max_live_bytes(Some(2 * each + 7));
    let e = eval_jaxpr_with(&j, &[], &[f32_scalar(1.0)], &opts).unwrap_err();
    assert!(
        matches!(&e, EvalError::MemoryLimit { site, needed, .. } if site.index == 1 && *needed == 2 * each + 8),
        "{e:?}"
    );
    // A value nothing reads is freed at once: ten unused broadcasts need room for one.
    let mut text = String::from("{ lambda ; a:f32[]. let\n");
    for i in 0..10 {
        text.push_str(&format!(
            "  d{i}:f32[1024] = broadcast_in_dim[broadcast_dimensions=() shape=(1024,) sharding=None] a\n"
        ));
    }
    text.push_str("in (a,) }");
    let opts = EvalOptions::default().with_max_live_bytes(Some(8 * 1024 + 8));
    assert!(eval_jaxpr_with(&parse(&text), &[], &[f32_scalar(1.0)], &opts).is_ok());
}

fn matmul(n: u64) -> Jaxpr {
    parse(&format!(
        "{{ lambda ; a:f32[]. let\n  \
         x:f32[{n},{n}] = broadcast_in_dim[broadcast_dimensions=() shape=({n}, {n}) sharding=None] a\n  \
         y:f32[{n},{n}] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] x x\n\
         in (y,) }}"
    ))
}

#[test]
fn a_large_matmul_hits_the_work_limit_before_running() {
    // Issue 10: a 4096x4096 matmul (6.9e10 multiply-adds) took over a minute.
    let start = Instant::now();
    let n = 4096u64;
    let e = eval_jaxpr(&matmul(n), &[], &[f32_scalar(1.0)]).unwrap_err();
    match &e {
        EvalError::WorkLimit {
            limit,
            needed,
            site,
        } => {
            assert_eq!(*limit, EvalOptions::DEFAULT_MAX_WORK);
            assert_eq!(*needed, n * n + n * n * n);
            assert_eq!((site.index, site.primitive.as_str()), (1, "dot_general"));
        }
        _ => panic!("{e:?}"),
    }
    assert!(e.to_string().contains("max_work"), "{e}");
    assert_quick(start);
    // 64x64: 262,144 multiply-adds, well inside the default.
    let out = eval_jaxpr(&matmul(64), &[], &[f32_scalar(0.5)]).unwrap();
    assert_eq!(out[0].as_f64().map(|v| v[0]), Some(16.0));
    // The work limit counts M*N*K: exactly enough passes, one less fails at the dot.
    let need = 64 * 64 + 64 * 64 * 64;
    let opts = EvalOptions::default().with_max_work(Some(need));
    assert!(eval_jaxpr_with(&matmul(64), &[], &[f32_scalar(0.5)], &opts).is_ok());
    let opts = EvalOptions::default().with_max_work(Some(need - 1));
    assert!(matches!(
        eval_jaxpr_with(&matmul(64), &[], &[f32_scalar(0.5)], &opts),
        Err(EvalError::WorkLimit { site, .. }) if site.index == 1
    ));
}

/// `while i < bound: i += 1`, or with `bound` None `while True`.
fn counting_loop(bound: Option<i64>) -> Jaxpr {
    let cond = match bound {
        Some(b) => format!("{{ lambda ; i:i32[]. let c:bool[] = lt i {b}:i32[] in (c,) }}"),
        None => "{ lambda ; i:i32[]. let c:bool[] = ne i -1:i32[] in (c,) }".to_owned(),
    };
    parse(&format!(
        "{{ lambda ; a:i32[]. let\n  b:i32[] = while[\n    \
         body_jaxpr={{ lambda ; i:i32[]. let j:i32[] = add i 1:i32[] in (j,) }}\n    \
         body_nconsts=0\n    cond_jaxpr={cond}\n    cond_nconsts=0\n  ] a\nin (b,) }}"
    ))
}

#[test]
fn an_endless_while_loop_hits_the_default_iteration_limit() {
    // Issue 10: `while` had no default bound.
    let start = Instant::now();
    let e = eval_jaxpr(&counting_loop(None), &[], &[i32_scalar(0)]).unwrap_err();
    match &e {
        EvalError::IterationLimit { limit, site } => {
            assert_eq!(*limit, EvalOptions::DEFAULT_MAX_LOOP_ITERATIONS);
            assert_eq!(
                (site.depth, site.index, site.primitive.as_str()),
                (0, 0, "while")
            );
        }
        _ => panic!("{e:?}"),
    }
    assert!(e.to_string().contains("max_loop_iterations"), "{e}");
    assert_quick(start);
    // A finite loop under the limit runs to the end.
    let out = eval_jaxpr(&counting_loop(Some(1000)), &[], &[i32_scalar(0)]).unwrap();
    assert_eq!(out[0], i32_scalar(1000));
    let opts = EvalOptions::default().with_max_loop_iterations(Some(1000));
    assert!(eval_jaxpr_with(&counting_loop(Some(1000)), &[], &[i32_scalar(0)], &opts).is_ok());
    let opts = EvalOptions::default().with_max_loop_iterations(Some(999));
    assert!(matches!(
        eval_jaxpr_with(&counting_loop(Some(1000)), &[], &[i32_scalar(0)], &opts),
        Err(EvalError::IterationLimit { limit: 999, .. })
    ));
}

#[test]
fn nested_loop_iterations_count_toward_one_limit() {
    // An outer loop of 10 iterations, each running an inner loop of 10: 110 in all.
    let j = parse(
        "{ lambda ; a:i32[]. let\n  b:i32[] = while[\n    \
         body_jaxpr={ lambda ; i:i32[]. let\n      \
           z:i32[] = while[\n        \
             body_jaxpr={ lambda ; k:i32[]. let l:i32[] = add k 1:i32[] in (l,) }\n        \
             body_nconsts=0\n        \
             cond_jaxpr={ lambda ; k:i32[]. let c:bool[] = lt k 10:i32[] in (c,) }\n        \
             cond_nconsts=0\n      ] 0:i32[]\n      \
           j:i32[] = add i 1:i32[]\n    in (j,) }\n    \
         body_nconsts=0\n    \
         cond_jaxpr={ lambda ; i:i32[]. let c:bool[] = lt i 10:i32[] in (c,) }\n    \
         cond_nconsts=0\n  ] a\nin (b,) }",
    );
    let opts = EvalOptions::default().with_max_loop_iterations(Some(110));
    assert_eq!(
        eval_jaxpr_with(&j, &[], &[i32_scalar(0)], &opts).unwrap(),
        vec![i32_scalar(10)]
    );
    // Iterations in order: outer 1, inner 2..=11, outer 12, ..., outer 100, inner
    // 101..=110.
    let opts = EvalOptions::default().with_max_loop_iterations(Some(44));
    let e = eval_jaxpr_with(&j, &[], &[i32_scalar(0)], &opts).unwrap_err();
    // The 45th is the outer loop's fifth.
    assert!(
        matches!(&e, EvalError::IterationLimit { limit: 44, site } if site.depth == 0),
        "{e:?}"
    );
    let opts = EvalOptions::default().with_max_loop_iterations(Some(109));
    let e = eval_jaxpr_with(&j, &[], &[i32_scalar(0)], &opts).unwrap_err();
    // The 110th is the inner loop's (in the outer loop's body, one level down).
    assert!(
        matches!(&e, EvalError::IterationLimit { limit: 109, site } if site.depth == 1 && site.index == 0),
        "{e:?}"
    );
    assert!(e.to_string().contains("nested 1 deep"), "{e}");
}

#[test]
fn no_limits_means_none_is_checked() {
    let opts = EvalOptions::unlimited();
    let out = eval_jaxpr_with(&counting_loop(Some(10)), &[], &[i32_scalar(0)], &opts).unwrap();
    assert_eq!(out[0], i32_scalar(10));
    assert_eq!(opts.max_work, None);
    assert_eq!(EvalOptions::default().max_live_bytes, Some(1 << 30));
}
