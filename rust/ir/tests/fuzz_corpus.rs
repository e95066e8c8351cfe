//! Replays the fuzz corpus (`fuzz/corpus/parse/`) through the checks of the `parse` fuzz
//! target, so inputs that once broke the parser keep being tested without cargo-fuzz.

use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::typecheck;
use std::path::Path;

/// The `parse` target's property: never panic; what parses typechecks and round-trips.
fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(j) = parse_jaxpr(text) {
        typecheck(&j).expect("parsed jaxprs typecheck");
        let printed = print_jaxpr(&j);
        let again = parse_jaxpr(&printed).expect("printed text parses");
        assert_eq!(print_jaxpr(&again), printed);
    }
}

#[test]
fn corpus_replays_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/parse");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus folder exists") {
        let path = entry.expect("readable entry").path();
        let data = std::fs::read(&path).expect("readable file");
        check(&data);
        // Every prefix too: truncation is the commonest malformation.
        for cut in 0..data.len() {
            check(&data[..cut]);
        }
        n += 1;
    }
    assert!(
        n >= 5,
        "expected the seed corpus, found {n} files in {}",
        dir.display()
    );
}
