//! Times the IR crate's operations on chain jaxprs (BENCH.md), rewriting included, and prints one JSON object
//! per (operation, size) on stdout: median and spread of several runs, per equation.
//!
//! Usage: `ferrax-bench-ir [--sizes 1000,10000,100000,1000000] [--reps N] [--ops parse,lower]`
//! (`--ops`: only these rows; `--cpu`: the thread's CPU time instead of wall time, for a
//! loaded machine).

use ferrax_ir::lower::stablehlo::lower_jaxpr;
use ferrax_ir::passes::rewrite::{rewrite, RuleSet, ALGEBRAIC_RULES};
use ferrax_ir::passes::{dce, partial_eval, toposort};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{
    generate, typecheck, Atom, Builtin, DType, Jaxpr, JaxprBuilder, LitValue, Literal, Params,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::Instant;

/// Counts live heap bytes, to measure the memory a built jaxpr holds.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The shape of the JVP of the chain: primal `x` and tangent `t` over `f32[size]`, each
/// step `x = sin(x) * 1.5 + x` and `t = t * cos(x) * 1.5 + t` (7 equations), then the
/// sums of both. Partially evaluated with `t` unknown, the primal half is known.
fn jvp_chain(steps: usize, size: i64) -> Jaxpr {
    let mut b = JaxprBuilder::new();
    let aval = ferrax_ir::AbstractValue::new(
        ferrax_ir::Shape::new(&[size]).expect("a valid shape"),
        DType::F32,
    );
    let mut x = Atom::Var(b.add_invar(aval.clone()));
    let mut t = Atom::Var(b.add_invar(aval));
    let op = |b: &mut JaxprBuilder, p: Builtin, ins: Vec<Atom>| {
        Atom::Var(
            b.add_eqn(p.into(), ins, Params::empty())
                .expect("well typed")[0],
        )
    };
    for _ in 0..steps {
        let k = b.literal(Literal {
            value: LitValue::Float(1.5),
            dtype: DType::F32,
            weak_type: false,
        });
        let s = op(&mut b, Builtin::Sin, vec![x]);
        let c = op(&mut b, Builtin::Cos, vec![x]);
        let m = op(&mut b, Builtin::Mul, vec![s, k]);
        let tc = op(&mut b, Builtin::Mul, vec![t, c]);
        let tm = op(&mut b, Builtin::Mul, vec![tc, k]);
        x = op(&mut b, Builtin::Add, vec![m, x]);
        t = op(&mut b, Builtin::Add, vec![tm, t]);
    }
    let axes = Params::new([("axes", ferrax_ir::Param::ints(&[0]))]);
    let sx = b
        .add_eqn(Builtin::ReduceSum.into(), vec![x], axes.clone())
        .expect("sum")[0];
    let st = b
        .add_eqn(Builtin::ReduceSum.into(), vec![t], axes)
        .expect("sum")[0];
    b.build(vec![Atom::Var(sx), Atom::Var(st)])
        .expect("well typed")
}

fn median_and_spread(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

fn report(op: &str, eqns: usize, times: Vec<f64>) {
    let (med, lo, hi) = median_and_spread(times);
    let per = |t: f64| t * 1e9 / eqns as f64;
    println!(
        "{{\"op\": \"{op}\", \"eqns\": {eqns}, \"median_s\": {med:.6}, \"ns_per_eqn\": {:.1}, \"ns_per_eqn_min\": {:.1}, \"ns_per_eqn_max\": {:.1}}}",
        per(med),
        per(lo),
        per(hi)
    );
}

/// Whether [`time`] measures the thread's CPU time instead of wall time (`--cpu`).
static CPU_TIME: AtomicBool = AtomicBool::new(false);

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
}

/// The CPU time this thread has run, in seconds (Linux's `CLOCK_THREAD_CPUTIME_ID`): on
/// a loaded machine, the time the work took without the time others held the core.
fn thread_cpu_seconds() -> f64 {
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn time<T>(reps: usize, mut f: impl FnMut() -> T) -> Vec<f64> {
    let cpu = CPU_TIME.load(Ordering::Relaxed);
    (0..reps)
        .map(|_| {
            let (t, c) = (Instant::now(), thread_cpu_seconds());
            let r = f();
            let dt = if cpu {
                thread_cpu_seconds() - c
            } else {
                t.elapsed().as_secs_f64()
            };
            drop(black_box(r));
            dt
        })
        .collect()
}

fn main() {
    let mut sizes: Vec<usize> = vec![1_000, 10_000, 100_000, 1_000_000];
    let mut reps_override: Option<usize> = None;
    let mut ops: Option<Vec<String>> = None;
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--sizes" if i + 1 < args.len() => {
                sizes = args[i + 1]
                    .split(',')
                    .filter_map(|s| s.trim().parse().ok())
                    .collect();
                i += 1;
            }
            "--ops" if i + 1 < args.len() => {
                ops = Some(
                    args[i + 1]
                        .split(',')
                        .map(|s| s.trim().to_owned())
                        .collect(),
                );
                i += 1;
            }
            "--cpu" => CPU_TIME.store(true, Ordering::Relaxed),
            "--reps" if i + 1 < args.len() => {
                reps_override = args[i + 1].parse().ok();
                i += 1;
            }
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2);
            }
        }
        i += 1;
    }
    let want = |op: &str| ops.as_ref().is_none_or(|o| o.iter().any(|x| x == op));
    for &target in &sizes {
        let steps = (target.saturating_sub(1) / 3).max(1);
        let reps = reps_override.unwrap_or(if target >= 1_000_000 { 5 } else { 11 });
        let before = LIVE.load(Ordering::Relaxed);
        let j: Jaxpr = generate::chain(steps, 128).expect("the chain fits the generator's limits");
        let bytes = LIVE.load(Ordering::Relaxed) - before;
        let eqns = j.eqns().len();
        if want("memory") {
            println!(
                "{{\"op\": \"memory\", \"eqns\": {eqns}, \"bytes_per_eqn\": {:.1}}}",
                bytes as f64 / eqns as f64
            );
        }
        if want("build") {
            report(
                "build",
                eqns,
                time(reps, || generate::chain(steps, 128).map(|_| ())),
            );
        }
        if want("typecheck") {
            report("typecheck", eqns, time(reps, || typecheck(&j).map(|_| ())));
        }
        if want("print") {
            report("print", eqns, time(reps, || print_jaxpr(&j)));
        }
        if want("parse") {
            let text = print_jaxpr(&j);
            match parse_jaxpr(&text) {
                Ok(_) => report("parse", eqns, time(reps, || parse_jaxpr(&text))),
                Err(e) => eprintln!("parse failed on the chain of {eqns}: {e}"),
            }
        }
        // Lowering the chain to StableHLO text (the module `jit` compiles).
        if want("lower") {
            report(
                "lower",
                eqns,
                time(reps, || lower_jaxpr(&j, "chain").expect("the chain lowers")),
            );
        }
        if want("dce") {
            report("dce", eqns, time(reps, || dce(&j, &[true])));
        }
        if want("toposort") {
            report("toposort", eqns, time(reps, || toposort(&j)));
        }
        // The algebraic rule set: its rules rooted at `add` and `mul` are tried at two
        // equations of each step and match none (a pass, then DCE and typecheck).
        if want("rewrite") {
            let algebraic = RuleSet::parse(ALGEBRAIC_RULES).expect("the built-in rules read");
            report(
                "rewrite",
                eqns,
                time(reps, || rewrite(&j, &algebraic, 100).expect("a fixpoint")),
            );
        }
        // A rule firing at every step (`sin(x) * 1.5` becomes `s + s * 0.5`): two passes.
        if want("rewrite_firing") {
            let firing = RuleSet::parse("r: mul ?x 1.5 => add ?x (mul ?x 0.5)").expect("reads");
            report(
                "rewrite_firing",
                eqns,
                time(reps, || rewrite(&j, &firing, 100).expect("a fixpoint")),
            );
        }
        if want("partial_eval") {
            let jvp = jvp_chain((target / 7).max(1), 128);
            report(
                "partial_eval",
                jvp.eqns().len(),
                time(reps, || partial_eval(&jvp, &[false, true], &[false, false])),
            );
        }
    }
}
