//! Fuzz target `print_parse`: print then parse is the identity on generated jaxprs (up to thousands of equations).
//! The property is `ferrax_ir::fuzzing::checks::check_print_parse` (which the stable test suite
//! replays on fuzz/corpus/print_parse and fuzz/artifacts/print_parse); statistics go to stderr.
#![no_main]

use ferrax_ir::fuzzing::{checks, Stats};
use libfuzzer_sys::fuzz_target;

static STATS: Stats = Stats::new("print_parse", 10_000);

fuzz_target!(|data: &[u8]| {
    let c = checks::check_print_parse(data);
    STATS.record(c.valid, c.findings);
});
