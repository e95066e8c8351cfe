//! Fuzz target `partial_eval`: partial_eval then recombination gives the original outputs for random unknown masks.
//! The property is `ferrax_ir::fuzzing::checks::check_partial_eval` (which the stable test suite
//! replays on fuzz/corpus/partial_eval and fuzz/artifacts/partial_eval); statistics go to stderr.
#![no_main]

use ferrax_ir::fuzzing::{checks, Stats};
use libfuzzer_sys::fuzz_target;

static STATS: Stats = Stats::new("partial_eval", 10_000);

fuzz_target!(|data: &[u8]| {
    let c = checks::check_partial_eval(data);
    STATS.record(c.valid, c.findings);
});
