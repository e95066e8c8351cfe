//! Fuzz target `dce_toposort`: DCE and toposort (of shuffled equations) keep the outputs' values under the reference evaluator.
//! The property is `ferrax_ir::fuzzing::checks::check_dce_toposort` (which the stable test suite
//! replays on fuzz/corpus/dce_toposort and fuzz/artifacts/dce_toposort); statistics go to stderr.
#![no_main]

use ferrax_ir::fuzzing::{checks, Stats};
use libfuzzer_sys::fuzz_target;

static STATS: Stats = Stats::new("dce_toposort", 10_000);

fuzz_target!(|data: &[u8]| {
    let c = checks::check_dce_toposort(data);
    STATS.record(c.valid, c.findings);
});
