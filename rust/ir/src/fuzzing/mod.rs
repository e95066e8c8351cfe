//! Fuzzing support (the `arbitrary` feature): generators of random jaxprs driven by
//! [`arbitrary::Unstructured`], a mutator making ill-typed variants, random linear
//! jaxprs for transposition, and the check functions of the cargo-fuzz targets in
//! `fuzz/` (which `rust/ir/tests/fuzz_corpus.rs` also runs on the checked-in corpora, so
//! a crash found once stays fixed without cargo-fuzz).
//!
//! From another crate (with `ferrax-ir = { ..., features = ["arbitrary"] }`):
//! ```
//! use arbitrary::Unstructured;
//! use ferrax_ir::fuzzing::{arbitrary_jaxpr, GenConfig};
//!
//! let bytes = [7u8; 64]; // a fuzzer's input
//! let j = arbitrary_jaxpr(&mut Unstructured::new(&bytes), &GenConfig::small()).unwrap();
//! ferrax_ir::typecheck(&j).unwrap();
//! ```

pub mod checks;
pub mod generate;
pub mod linear;
pub mod mutate;
pub mod stats;

pub use arbitrary;
pub use generate::{arbitrary_jaxpr, arbitrary_jaxpr_with_report, GenConfig, GenReport};
pub use linear::{arbitrary_linear_jaxpr, LinearJaxpr};
pub use mutate::{mutate, Mutant, Mutation};
pub use stats::Stats;

/// A builder holding `j`'s constants and inputs (same types, same order), and the map
/// from `j`'s variables to the builder's (filled for those; `None` elsewhere), for the
/// checks and the mutator that copy a jaxpr with changes.
pub(crate) fn builder_with_inputs(
    j: &crate::jaxpr::Jaxpr,
) -> (
    crate::builder::JaxprBuilder,
    Vec<Option<crate::jaxpr::VarId>>,
) {
    let mut b = crate::builder::JaxprBuilder::new();
    let mut map = vec![None; j.num_vars()];
    for &v in j.constvars() {
        map[v.index()] = Some(b.add_constvar(j.var_aval(v).clone()));
    }
    for &v in j.invars() {
        map[v.index()] = Some(b.add_invar(j.var_aval(v).clone()));
    }
    (b, map)
}
