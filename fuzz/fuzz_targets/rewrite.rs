//! Fuzz target `rewrite`: the algebraic rules rewrite generated jaxprs keeping their types, effects and values.
//! The property is `ferrax_ir::fuzzing::checks::check_rewrite` (which the stable test suite
//! replays on fuzz/corpus/rewrite and fuzz/crashes/rewrite); statistics go to stderr.
#![no_main]

use ferrax_ir::fuzzing::{checks, Stats};
use libfuzzer_sys::fuzz_target;

static STATS: Stats = Stats::new("rewrite", 10_000);

fuzz_target!(|data: &[u8]| {
    let c = checks::check_rewrite(data);
    STATS.record(c.valid, c.findings);
});
