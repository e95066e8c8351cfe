//! The corpus of jaxprs printed by JAX 0.10.2 (`tests/jax_corpus/*.jaxpr`, written by
//! `scripts/jax_corpus.py`, which `tests/test_jax_corpus.py` checks against JAX itself):
//! every file parses, typechecks, prints back byte for byte and lowers to StableHLO.

use ferrax_ir::lower::stablehlo::lower_jaxpr;
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use std::path::Path;

/// Files that do not read back yet, each with why (asserted exactly).
const KNOWN: &[(&str, &str)] = &[];

#[test]
fn every_jax_printed_jaxpr_parses_typechecks_prints_back_and_lowers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jax_corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jaxpr"))
        .collect();
    files.sort();
    assert!(files.len() >= 100, "only {} files", files.len());
    let mut failures = Vec::new();
    let mut known_ok = Vec::new();
    for path in &files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let problem = match parse_jaxpr(text) {
            Err(e) => Some(format!("does not read: {e}")),
            Ok(j) => {
                let back = print_jaxpr(&j);
                if back != text {
                    let line = text
                        .lines()
                        .zip(back.lines())
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    Some(format!(
                        "prints back differently from line {}: JAX {:?}, ferrax {:?}",
                        line + 1,
                        text.lines().nth(line),
                        back.lines().nth(line)
                    ))
                } else {
                    lower_jaxpr(&j, "main")
                        .err()
                        .map(|e| format!("does not lower: {e}"))
                }
            }
        };
        let known = KNOWN.iter().any(|(k, _)| *k == name);
        match (problem, known) {
            (Some(p), false) => failures.push(format!("{name}: {p}")),
            (None, true) => known_ok.push(name),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        known_ok.is_empty(),
        "now read back (remove from KNOWN): {known_ok:?}"
    );
}
