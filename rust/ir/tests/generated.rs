//! Passes on random generated jaxprs keep them well typed (meaning is checked with the
//! evaluator in `eval_passes.rs`).

use ferrax_ir::generate::{random_jaxpr, RandomOptions};
use ferrax_ir::passes::{dce, toposort};
use ferrax_ir::typecheck;

#[test]
fn random_jaxprs_are_well_typed_and_passes_keep_them_so() {
    for seed in 0..300 {
        let j = random_jaxpr(seed, RandomOptions::default()).unwrap();
        typecheck(&j).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let n = j.outvars().len();
        for mask in 0..(1u32 << n) {
            let used: Vec<bool> = (0..n).map(|i| mask & (1 << i) != 0).collect();
            let (d, used_in) = dce(&j, &used).unwrap();
            typecheck(&d).unwrap_or_else(|e| panic!("seed {seed} dce {used:?}: {e}"));
            assert_eq!(used_in.len(), j.invars().len());
            assert!(d.eqns().len() <= j.eqns().len());
        }
        let t = toposort(&j);
        typecheck(&t).unwrap_or_else(|e| panic!("seed {seed} toposort: {e}"));
        assert_eq!(t.eqns().len(), j.eqns().len());
    }
}

#[test]
fn generation_is_deterministic() {
    let a = random_jaxpr(7, RandomOptions::default()).unwrap();
    let b = random_jaxpr(7, RandomOptions::default()).unwrap();
    assert_eq!(a.eqns().len(), b.eqns().len());
    let names = |j: &ferrax_ir::Jaxpr| -> Vec<String> {
        j.eqns()
            .iter()
            .map(|e| e.primitive().name().to_owned())
            .collect()
    };
    assert_eq!(names(&a), names(&b));
}

#[test]
fn generators_return_errors_instead_of_panicking() {
    use ferrax_ir::generate::{chain, nested_jits, GenError};
    // Found by probing (issue 10): a negative size and huge sizes panicked.
    assert_eq!(chain(3, -1).unwrap_err(), GenError::BadSize { size: -1 });
    assert!(matches!(
        chain(usize::MAX, 4),
        Err(GenError::TooLarge { what: "steps", .. })
    ));
    assert!(matches!(
        nested_jits(usize::MAX),
        Err(GenError::TooLarge { what: "depth", .. })
    ));
    for opts in [
        RandomOptions {
            eqns: usize::MAX,
            ..RandomOptions::default()
        },
        RandomOptions {
            max_depth: usize::MAX,
            ..RandomOptions::default()
        },
        RandomOptions {
            inputs: usize::MAX,
            ..RandomOptions::default()
        },
    ] {
        assert!(
            matches!(random_jaxpr(1, opts), Err(GenError::TooLarge { .. })),
            "{opts:?}"
        );
    }
    // Zero sizes are fine.
    assert_eq!(chain(0, 0).unwrap().eqns().len(), 1);
    assert!(random_jaxpr(
        1,
        RandomOptions {
            eqns: 0,
            max_depth: 0,
            inputs: 0
        }
    )
    .is_ok());
}

#[test]
fn deep_random_options_stay_bounded() {
    // Nesting multiplies the equation count per level; the total budget stops it.
    let opts = RandomOptions {
        eqns: 40,
        max_depth: RandomOptions::MAX_DEPTH,
        inputs: 3,
    };
    let t = std::time::Instant::now();
    let j = random_jaxpr(5, opts).unwrap();
    typecheck(&j).unwrap();
    assert!(t.elapsed().as_secs() < 30, "took {:?}", t.elapsed());
}
