//! Passes on random generated jaxprs keep them well typed (meaning is checked with the
//! evaluator in `eval_passes.rs`).

use ferrax_ir::gen::{random_jaxpr, RandomOptions};
use ferrax_ir::passes::{dce, toposort};
use ferrax_ir::typecheck;

#[test]
fn random_jaxprs_are_well_typed_and_passes_keep_them_so() {
    for seed in 0..300 {
        let j = random_jaxpr(seed, RandomOptions::default());
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
    let a = random_jaxpr(7, RandomOptions::default());
    let b = random_jaxpr(7, RandomOptions::default());
    assert_eq!(a.eqns().len(), b.eqns().len());
    let names = |j: &ferrax_ir::Jaxpr| -> Vec<String> {
        j.eqns()
            .iter()
            .map(|e| e.primitive().name().to_owned())
            .collect()
    };
    assert_eq!(names(&a), names(&b));
}
