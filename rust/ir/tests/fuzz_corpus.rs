//! Replays the fuzz corpora and the minimized crashes through the fuzz targets' checks,
//! so inputs that once broke something keep being tested without cargo-fuzz:
//! `fuzz/corpus/parse/` always (with every prefix of each file), and with the
//! `arbitrary` feature (as `scripts/test.sh` runs it) every target's corpus
//! `fuzz/corpus/TARGET/` and crashes `fuzz/crashes/TARGET/`.

use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::typecheck;
use std::path::{Path, PathBuf};

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

fn fuzz_dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(sub)
}

/// The files of a folder (none if it does not exist), sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

#[test]
fn corpus_replays_cleanly() {
    let dir = fuzz_dir("corpus/parse");
    let mut n = 0;
    for path in files(&dir) {
        let data = std::fs::read(&path).expect("readable file");
        check(&data);
        // Every prefix too: truncation is the commonest malformation.
        for cut in 0..data.len().min(4096) {
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

#[cfg(feature = "arbitrary")]
#[test]
fn every_target_replays_its_corpus_and_crashes() {
    use ferrax_ir::fuzzing::checks::TARGETS;
    let start = std::time::Instant::now();
    for &(name, check) in TARGETS {
        let mut n = 0;
        for sub in ["corpus", "crashes"] {
            for path in files(&fuzz_dir(&format!("{sub}/{name}"))) {
                let data = std::fs::read(&path).expect("readable file");
                let outcome = std::panic::catch_unwind(|| check(&data));
                if let Err(e) = outcome {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    panic!("{name}: {} fails: {msg}", path.display());
                }
                n += 1;
            }
        }
        assert!(n >= 1, "no corpus for the fuzz target {name}");
    }
    assert!(
        start.elapsed().as_secs() < 60,
        "replay took {:?}",
        start.elapsed()
    );
}
