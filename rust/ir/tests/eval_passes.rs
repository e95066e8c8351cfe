//! Passes keep meaning: on random generated jaxprs, DCE and toposort give the same
//! values as the original under the reference evaluator.

use ferrax_ir::eval::{check_close, eval_jaxpr, HostArray};
use ferrax_ir::generate::{random_jaxpr, RandomOptions, Rng};
use ferrax_ir::passes::{dce, toposort};
use ferrax_ir::Jaxpr;

fn random_args(j: &Jaxpr, rng: &mut Rng) -> Vec<HostArray> {
    j.in_avals()
        .into_iter()
        .map(|a| {
            let n = a.shape.size() as usize;
            let data: Vec<f64> = (0..n)
                .map(|_| (rng.below(2001) as f64 - 1000.0) / 250.0)
                .collect();
            HostArray::from_f64(a.shape.clone(), a.dtype, data).unwrap()
        })
        .collect()
}

#[test]
fn dce_and_toposort_preserve_values() {
    for seed in 0..200 {
        let j = random_jaxpr(seed, RandomOptions::default()).unwrap();
        let mut rng = Rng::new(seed ^ 0xABCD);
        let args = random_args(&j, &mut rng);
        let expected = eval_jaxpr(&j, &[], &args).unwrap_or_else(|e| panic!("seed {seed}: {e}"));

        let sorted = toposort(&j);
        let got = eval_jaxpr(&sorted, &[], &args).unwrap();
        for (g, e) in got.iter().zip(&expected) {
            check_close(g, e, 0.0, 0.0).unwrap_or_else(|m| panic!("seed {seed} toposort: {m}"));
        }

        let n = j.outvars().len();
        for mask in 1..(1u32 << n) {
            let used: Vec<bool> = (0..n).map(|i| mask & (1 << i) != 0).collect();
            let (d, used_in) = dce(&j, &used).unwrap();
            let kept_args: Vec<HostArray> = args
                .iter()
                .zip(&used_in)
                .filter(|(_, &u)| u)
                .map(|(a, _)| a.clone())
                .collect();
            let got = eval_jaxpr(&d, &[], &kept_args).unwrap();
            let want: Vec<&HostArray> = expected
                .iter()
                .zip(&used)
                .filter(|(_, &u)| u)
                .map(|(e, _)| e)
                .collect();
            assert_eq!(got.len(), want.len());
            for (g, e) in got.iter().zip(want) {
                check_close(g, e, 0.0, 0.0)
                    .unwrap_or_else(|m| panic!("seed {seed} dce {used:?}: {m}"));
            }
        }
    }
}
