//! Fuzz target `lower`: lowering to StableHLO never panics and emits text for every generated jaxpr.
//! The property is `ferrax_ir::fuzzing::checks::check_lower` (which the stable test suite
//! replays on fuzz/corpus/lower and fuzz/artifacts/lower); statistics go to stderr.
#![no_main]

use ferrax_ir::fuzzing::{checks, Stats};
use libfuzzer_sys::fuzz_target;

static STATS: Stats = Stats::new("lower", 10_000);

fuzz_target!(|data: &[u8]| {
    let c = checks::check_lower(data);
    STATS.record(c.valid, c.findings);
});
