//! Fuzz target `typecheck`: typecheck accepts every generated jaxpr and rejects every ill-typed mutant.
//! The property is `ferrax_ir::fuzzing::checks::check_typecheck` (which the stable test suite
//! replays on fuzz/corpus/typecheck and fuzz/artifacts/typecheck); statistics go to stderr.
#![no_main]

use ferrax_ir::fuzzing::{checks, Stats};
use libfuzzer_sys::fuzz_target;

static STATS: Stats = Stats::new("typecheck", 10_000);

fuzz_target!(|data: &[u8]| {
    let c = checks::check_typecheck(data);
    STATS.record(c.valid, c.findings);
});
