//! Fuzz target `parse`: arbitrary text into the parser: a jaxpr or a ParseError, never a panic; what parses typechecks and round-trips.
//! The property is `ferrax_ir::fuzzing::checks::check_parse` (which the stable test suite
//! replays on fuzz/corpus/parse and fuzz/artifacts/parse); statistics go to stderr.
#![no_main]

use ferrax_ir::fuzzing::{checks, Stats};
use libfuzzer_sys::fuzz_target;

static STATS: Stats = Stats::new("parse", 10_000);

fuzz_target!(|data: &[u8]| {
    let c = checks::check_parse(data);
    STATS.record(c.valid, c.findings);
});
