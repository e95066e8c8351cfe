//! Runs every `tests/jaxprs/*.jaxpr` file (cranelift filetest style).
//!
//! A file holds a jaxpr, then optionally directives, each on a line of its own:
//! - `; expect:` followed by the text the jaxpr must print as (when it differs from the
//!   input, e.g. JAX's one-line jaxprs, which the printer always breaks);
//! - `; error: <substring>` (one or more): the input must fail to read, with an error
//!   message containing each substring (parse errors read `line L, column C: ...`).
//!
//! Lines starting with `;;` are comments; they are blanked (not removed) so that the line
//! numbers of errors are those of the file.
//!
//! With `FERRAX_BLESS=1` in the environment, the `; expect:` section of each valid file
//! whose printed form differs is rewritten (and dropped when the printed form is the
//! input itself); review the diff.
//!
//! For a valid input the driver checks `print(parse(text)) == expected`,
//! `print(parse(print(parse(text)))) == print(parse(text))` and that the jaxpr
//! typechecks. It also checks that the valid files together use every built-in primitive.

use ferrax_ir::text::{parse_jaxpr_with, print_jaxpr};
use ferrax_ir::{
    typecheck, AbstractValue, Builtin, ExtensionPrimitive, Jaxpr, Param, Params, Primitive,
    Registry,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `test_ext`: returns its operands' types (any params accepted).
struct PassThrough;

impl ExtensionPrimitive for PassThrough {
    fn name(&self) -> &str {
        "test_ext"
    }
    fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        _params: &Params,
    ) -> Result<Vec<AbstractValue>, String> {
        Ok(inputs.to_vec())
    }
}

/// `test_effect`: no outputs (an effect), any operands and params.
struct Effect;

impl ExtensionPrimitive for Effect {
    fn name(&self) -> &str {
        "test_effect"
    }
    fn abstract_eval(
        &self,
        _inputs: &[AbstractValue],
        _params: &Params,
    ) -> Result<Vec<AbstractValue>, String> {
        Ok(Vec::new())
    }
}

/// The registry the corpus is read with.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(Arc::new(PassThrough)).unwrap();
    r.register(Arc::new(Effect)).unwrap();
    r
}

struct Case {
    input: String,
    expect: Option<String>,
    errors: Vec<String>,
}

fn split(text: &str) -> Case {
    let mut input = String::new();
    let mut expect: Option<String> = None;
    let mut errors = Vec::new();
    let mut in_expect = false;
    let mut seen_directive = false;
    for line in text.lines() {
        if line.starts_with(";;") {
            if !seen_directive {
                input.push('\n');
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("; error:") {
            errors.push(rest.trim().to_owned());
            seen_directive = true;
            in_expect = false;
            continue;
        }
        if line.trim_end() == "; expect:" {
            expect = Some(String::new());
            seen_directive = true;
            in_expect = true;
            continue;
        }
        if in_expect {
            let e = expect.get_or_insert_with(String::new);
            e.push_str(line);
            e.push('\n');
        } else if !seen_directive {
            input.push_str(line);
            input.push('\n');
        }
    }
    Case {
        input,
        expect,
        errors,
    }
}

/// Every primitive used in a jaxpr and its sub-jaxprs (a worklist, no recursion).
fn collect_primitives(j: &Jaxpr, out: &mut BTreeSet<String>) {
    let mut work: Vec<&Jaxpr> = vec![j];
    while let Some(j) = work.pop() {
        for e in j.eqns() {
            out.insert(e.primitive().name().to_owned());
            for (_, p) in e.params().iter() {
                match p {
                    Param::Jaxpr(cj) => work.push(cj.jaxpr()),
                    Param::Jaxprs(cjs) => work.extend(cjs.iter().map(|c| &**c.jaxpr())),
                    _ => {}
                }
            }
        }
    }
}

fn corpus_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jaxprs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jaxpr"))
        .collect();
    files.sort();
    files
}

/// Rewrites the file's `; expect:` section to `printed` (none when it is the input).
fn bless(path: &Path, text: &str, case: &Case, printed: &str) {
    let input_end = text
        .lines()
        .scan(0usize, |offset, line| {
            let start = *offset;
            *offset += line.len() + 1;
            Some((start, line))
        })
        .find(|(_, line)| line.trim_end() == "; expect:")
        .map_or(text.len(), |(start, _)| start);
    let mut out = text[..input_end].trim_end().to_owned();
    out.push('\n');
    if printed != case.input.trim() {
        out.push_str("; expect:\n");
        out.push_str(printed);
        out.push('\n');
    }
    std::fs::write(path, out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn run_case(
    name: &str,
    case: &Case,
    reg: &Registry,
    used: &mut BTreeSet<String>,
) -> Result<(), String> {
    let parsed = parse_jaxpr_with(&case.input, reg);
    if !case.errors.is_empty() {
        return match parsed {
            Ok(j) => Err(format!("{name}: expected an error, but it parsed as\n{j}")),
            Err(e) => {
                let msg = e.to_string();
                for want in &case.errors {
                    if !msg.contains(want.as_str()) {
                        return Err(format!(
                            "{name}: error message\n  {msg}\ndoes not contain\n  {want}"
                        ));
                    }
                }
                Ok(())
            }
        };
    }
    let j = parsed.map_err(|e| format!("{name}: does not parse: {e}"))?;
    typecheck(&j).map_err(|e| format!("{name}: does not typecheck: {e}"))?;
    collect_primitives(&j, used);
    let printed = print_jaxpr(&j);
    let expected = case.expect.as_deref().unwrap_or(&case.input).trim();
    if printed != expected {
        return Err(format!(
            "{name}: printed form differs from the expected one\n--- printed\n{printed}\n--- expected\n{expected}\n"
        ));
    }
    let again = parse_jaxpr_with(&printed, reg)
        .map_err(|e| format!("{name}: the printed form does not parse: {e}\n{printed}"))?;
    let printed_again = print_jaxpr(&again);
    if printed_again != printed {
        return Err(format!(
            "{name}: printing is not stable\n--- first\n{printed}\n--- second\n{printed_again}\n"
        ));
    }
    Ok(())
}

#[test]
fn corpus() {
    let reg = registry();
    let files = corpus_files();
    assert!(!files.is_empty(), "no .jaxpr files found");
    let mut failures = Vec::new();
    let mut used = BTreeSet::new();
    let (mut valid, mut invalid) = (0, 0);
    for path in &files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let case = split(&text);
        if case.errors.is_empty() {
            valid += 1;
        } else {
            invalid += 1;
        }
        if let Err(f) = run_case(&name, &case, &reg, &mut used) {
            let blessed = std::env::var_os("FERRAX_BLESS").is_some()
                && case.errors.is_empty()
                && f.contains("printed form differs");
            if blessed {
                if let Ok(j) = parse_jaxpr_with(&case.input, &reg) {
                    bless(path, &text, &case, &print_jaxpr(&j));
                    continue;
                }
            }
            failures.push(f);
        }
    }
    let missing: Vec<&str> = Builtin::ALL
        .iter()
        .map(|b| b.name())
        .filter(|n| !used.contains(*n))
        .collect();
    if !missing.is_empty() {
        failures.push(format!(
            "built-in primitives no valid file uses: {missing:?}"
        ));
    }
    for ext in ["test_ext", "test_effect"] {
        if !used.contains(ext) {
            failures.push(format!("no valid file uses the extension primitive {ext}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} files failed ({valid} valid, {invalid} error cases):\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    // Make sure the registry's primitives are the ones the corpus names.
    assert!(matches!(
        reg.lookup("test_ext"),
        Some(Primitive::Extension(_))
    ));
}
