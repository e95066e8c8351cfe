//! Fuzz target `transpose`: the transpose of a random linear jaxpr passes the dot-product test.
//! The property is `ferrax_ir::fuzzing::checks::check_transpose` (which the stable test suite
//! replays on fuzz/corpus/transpose and fuzz/artifacts/transpose); statistics go to stderr.
#![no_main]

use ferrax_ir::fuzzing::{checks, Stats};
use libfuzzer_sys::fuzz_target;

static STATS: Stats = Stats::new("transpose", 10_000);

fuzz_target!(|data: &[u8]| {
    let c = checks::check_transpose(data);
    STATS.record(c.valid, c.findings);
});
