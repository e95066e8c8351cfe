//! The fuzzing generators (feature `arbitrary`): generated jaxprs cover every built-in
//! primitive and dtype, with nesting, sharing and thousands of equations; the generator's
//! rules never reject an equation; and every fuzz target's check holds on a batch of
//! pseudo-random inputs (a short fuzzing run inside `cargo test`).
#![cfg(feature = "arbitrary")]

use ferrax_ir::fuzzing::arbitrary::Unstructured;
use ferrax_ir::fuzzing::checks::TARGETS;
use ferrax_ir::fuzzing::{arbitrary_jaxpr_with_report, mutate, GenConfig};
use ferrax_ir::generate::Rng;
use ferrax_ir::{typecheck, Builtin, DType, Jaxpr};
use std::collections::BTreeSet;

fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

static SHARED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Every primitive and dtype of a jaxpr and its sub-jaxprs (without recursion); counts
/// sub-jaxprs met more than once in `SHARED`.
fn walk(j: &Jaxpr, prims: &mut BTreeSet<String>, dtypes: &mut BTreeSet<DType>) -> usize {
    let mut subs: Vec<std::sync::Arc<Jaxpr>> = Vec::new();
    let mut stack: Vec<&Jaxpr> = vec![j];
    let mut eqns = 0;
    let mut seen_ptrs = BTreeSet::new();
    let mut next = 0;
    loop {
        let j: &Jaxpr = match stack.pop() {
            Some(j) => j,
            None if next < subs.len() => {
                next += 1;
                &subs[next - 1]
            }
            None => break,
        };
        let mut found = Vec::new();
        for e in j.eqns() {
            eqns += 1;
            prims.insert(e.primitive().name().to_owned());
            for &v in e.outvars() {
                dtypes.insert(j.var_aval(v).dtype);
            }
            for s in e.sub_jaxprs() {
                if seen_ptrs.insert(std::sync::Arc::as_ptr(s.jaxpr()) as usize) {
                    found.push(s.jaxpr().clone());
                } else {
                    SHARED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        subs.extend(found);
    }
    eqns
}

#[test]
fn generated_jaxprs_cover_every_primitive_and_dtype() {
    let mut prims = BTreeSet::new();
    let mut dtypes = BTreeSet::new();
    let mut rejected = Vec::new();
    let mut max_eqns = 0;
    // Enough seeds that every one of the ~250 primitives is drawn (collectives only inside
    // the one shard_map in ten).
    for seed in 0..1000 {
        let data = bytes(seed, 2000);
        let mut u = Unstructured::new(&data);
        let (j, report) = arbitrary_jaxpr_with_report(&mut u, &GenConfig::small()).unwrap();
        typecheck(&j).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{j}"));
        max_eqns = max_eqns.max(walk(&j, &mut prims, &mut dtypes));
        rejected.extend(report.rejected);
    }
    assert!(
        rejected.is_empty(),
        "the rules rejected {} generated equations, e.g. {:?}",
        rejected.len(),
        &rejected[..rejected.len().min(10)]
    );
    // Pure and IO callbacks are not generated: only the host computes their results,
    // and the targets evaluate the jaxprs (tests/callbacks.rs checks their passes).
    let missing: Vec<&str> = Builtin::ALL
        .iter()
        .map(|b| b.name())
        .filter(|n| !prims.contains(*n) && !matches!(*n, "pure_callback" | "io_callback"))
        .collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
    let missing: Vec<DType> = DType::ALL
        .iter()
        .copied()
        .filter(|d| !dtypes.contains(d))
        .collect();
    assert!(missing.is_empty(), "no value of dtype {missing:?}");
    assert!(max_eqns > 20, "largest jaxpr has {max_eqns} equations");
    let shared = SHARED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(shared >= 10, "only {shared} sub-jaxprs were shared");
}

#[test]
fn large_configs_reach_thousands_of_equations() {
    let mut most = 0;
    for seed in 0..20 {
        let data = bytes(seed, 4096);
        let mut u = Unstructured::new(&data);
        let (j, report) = arbitrary_jaxpr_with_report(&mut u, &GenConfig::large()).unwrap();
        assert!(report.rejected.is_empty(), "{:?}", report.rejected);
        typecheck(&j).unwrap();
        let (mut p, mut d) = (BTreeSet::new(), BTreeSet::new());
        most = most.max(walk(&j, &mut p, &mut d));
    }
    assert!(most >= 1000, "largest generated jaxpr has {most} equations");
    // An exhausted input still gives a well-typed program (every choice its first option).
    let mut u = Unstructured::new(&[0xff, 0xff]);
    let (j, _) = arbitrary_jaxpr_with_report(&mut u, &GenConfig::large()).unwrap();
    typecheck(&j).unwrap();
}

#[test]
fn mutants_are_rejected() {
    let mut kinds = BTreeSet::new();
    for seed in 0..300 {
        let data = bytes(seed, 1500);
        let mut u = Unstructured::new(&data);
        let (j, _) = arbitrary_jaxpr_with_report(&mut u, &GenConfig::small()).unwrap();
        for _ in 0..4 {
            if let Ok(Some(m)) = mutate(&j, &mut u) {
                let kind = format!("{:?}", m.mutation);
                kinds.insert(kind.split([' ', '{']).next().unwrap_or("").to_owned());
                assert!(m.result.is_err(), "accepted mutant {}\n{j}", m.mutation);
            }
        }
    }
    assert!(kinds.len() >= 5, "mutation kinds made: {kinds:?}");
}

#[test]
fn every_target_holds_on_random_inputs() {
    for &(name, check) in TARGETS {
        let mut valid = 0;
        let n = if matches!(name, "print_parse" | "lower") {
            30
        } else {
            150
        };
        for seed in 0..n {
            let data = bytes(seed * 7919 + 1, 64 + (seed as usize * 37) % 1500);
            if check(&data).valid {
                valid += 1;
            }
        }
        if name != "parse" {
            assert!(
                valid * 2 > n,
                "{name}: only {valid} of {n} inputs were valid"
            );
        }
    }
}

#[test]
fn checked_in_inputs_generate_without_rejections() {
    // Soft findings of the fuzzers (an equation the generator made that its rule
    // rejected) stay fixed: fuzz/crashes/typecheck/generator_* and every corpus file.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut n = 0;
    for sub in ["corpus", "crashes"] {
        let Ok(targets) = std::fs::read_dir(root.join(sub)) else {
            continue;
        };
        for t in targets.flatten() {
            if t.file_name() == "parse" || t.file_name() == "transpose" {
                continue;
            }
            for f in std::fs::read_dir(t.path()).into_iter().flatten().flatten() {
                let data = std::fs::read(f.path()).unwrap();
                for config in [GenConfig::small(), GenConfig::large()] {
                    let mut u = Unstructured::new(&data);
                    let (_, report) = arbitrary_jaxpr_with_report(&mut u, &config).unwrap();
                    assert!(
                        report.rejected.is_empty(),
                        "{}: {:?}",
                        f.path().display(),
                        report.rejected
                    );
                }
                n += 1;
            }
        }
    }
    assert!(n > 0);
}
