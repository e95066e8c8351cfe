//! The parser is strict: every class of malformed text is generated from valid jaxprs
//! (truncations, deleted, duplicated and swapped brackets, bad types, garbage after the jaxpr, ...), and each mutant must fail with a `ParseError`
//! whose line and column are inside the mutant's text.
//!
//! Syntax wins over types: the same mutants made from *ill-typed* jaxprs (an unbound
//! name, a wrong declared type, a name bound twice, all before the mutation) must still
//! fail with a `ParseError`, never with the type error, so text that does not parse
//! never gets the typechecker's verdict.

use ferrax_ir::text::{parse_jaxpr, print_jaxpr, ParseError, ReadError};
use std::path::Path;

/// Valid jaxprs read from the filetest corpus (the input part of each file).
const SOURCES: &[&str] = &[
    "binary",
    "jax_cond",
    "jax_while",
    "jax_scan",
    "jax_shared",
    "jax_dot_general",
    "jax_wrapped_lines",
    "jax_iota",
    "literals",
    "nested_all",
    "one_line",
    "zero_inputs",
];

fn input_of(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/jaxprs")
        .join(format!("{name}.jaxpr"));
    let text = std::fs::read_to_string(&path).expect("a corpus file");
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("; expect:") || line.starts_with("; error:") {
            break;
        }
        if !line.starts_with(";;") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// One token of the text: its byte range and whether it is a word.
#[derive(Clone, Copy, Debug)]
struct Tok {
    start: usize,
    end: usize,
}

const PUNCT: &[u8] = b"{}()[],;=:";

/// A small tokenizer (punctuation, words; whitespace separates), enough to find token
/// boundaries. `.` after a word char is part of the word (`2.0`) as in the parser, but a
/// `.` after a `]` or at a word's start is a token (`f32[3]. let`).
fn tokens(s: &str) -> Vec<Tok> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if PUNCT.contains(&c) || c == b'.' {
            out.push(Tok {
                start: i,
                end: i + 1,
            });
            i += 1;
        } else {
            let start = i;
            while i < b.len() && !b[i].is_ascii_whitespace() && !PUNCT.contains(&b[i]) {
                i += 1;
            }
            out.push(Tok { start, end: i });
        }
    }
    out
}

fn text_of<'s>(s: &'s str, t: &Tok) -> &'s str {
    &s[t.start..t.end]
}

fn is_bracket(s: &str) -> bool {
    matches!(s, "{" | "}" | "(" | ")" | "[" | "]")
}

/// True when the line/column of `e` is inside `text` (the column may be one past the end
/// of its line, where a truncated text ends).
fn inside(text: &str, e: &ParseError) -> bool {
    let lines: Vec<&str> = text.split('\n').collect();
    e.line >= 1
        && e.line <= lines.len()
        && e.column >= 1
        && e.column <= lines[e.line - 1].chars().count() + 1
}

struct Tally {
    checked: usize,
    failures: Vec<String>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            checked: 0,
            failures: Vec::new(),
        }
    }

    /// The mutant must fail with a `ParseError` inside its text.
    fn expect_parse_error(&mut self, class: &str, mutant: &str) {
        self.checked += 1;
        match parse_jaxpr(mutant) {
            Err(ReadError::Parse(e)) if inside(mutant, &e) => {}
            Err(ReadError::Parse(e)) => self.failures.push(format!(
                "[{class}] error position outside the text ({e}):\n{mutant}"
            )),
            Err(e) => self.failures.push(format!(
                "[{class}] reached the typechecker ({e}):\n{mutant}"
            )),
            Ok(j) => self.failures.push(format!(
                "[{class}] parsed, as:\n{}\nfrom:\n{mutant}",
                print_jaxpr(&j)
            )),
        }
    }

    fn finish(self, min_checked: usize) {
        assert!(
            self.failures.is_empty(),
            "{} of {} mutants misbehaved; the first ones:\n{}",
            self.failures.len(),
            self.checked,
            self.failures
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n----\n")
        );
        assert!(
            self.checked >= min_checked,
            "only {} mutants (expected at least {min_checked})",
            self.checked
        );
    }
}

fn splice(s: &str, start: usize, end: usize, with: &str) -> String {
    format!("{}{}{}", &s[..start], with, &s[end..])
}

/// Every mutant of one class, for one source text.
fn mutants(class: &str, src: &str) -> Vec<String> {
    let toks = tokens(src);
    let mut out = Vec::new();
    match class {
        "truncated" => {
            out.push(String::new());
            for t in &toks[..toks.len() - 1] {
                out.push(src[..t.end].to_owned());
            }
        }
        "deleted bracket" | "duplicated bracket" | "swapped bracket" => {
            for t in toks.iter().filter(|t| is_bracket(text_of(src, t))) {
                let b = text_of(src, t);
                let with = match class {
                    "deleted bracket" => String::new(),
                    "duplicated bracket" => format!("{b}{b}"),
                    _ => match b {
                        "(" => "[",
                        "[" => "(",
                        ")" => "]",
                        "]" => ")",
                        "{" => "(",
                        _ => ")",
                    }
                    .to_owned(),
                };
                out.push(splice(src, t.start, t.end, &with));
            }
        }
        "bad type" => {
            // Each `dtype[dims]` type, made malformed.
            for (i, t) in toks.iter().enumerate() {
                if i == 0 || text_of(src, &toks[i - 1]) != ":" {
                    continue;
                }
                let Some(close) = toks[i..].iter().position(|x| text_of(src, x) == "]") else {
                    continue;
                };
                let (start, end) = (t.start, toks[i + close].end);
                let ty = &src[start..end];
                let (dtype, dims) = ty.split_once('[').unwrap_or((ty, "]"));
                let dims = &dims[..dims.len() - 1];
                for bad in [
                    format!("{dtype}[{dims}"),
                    format!("{dtype}[{dims},,]"),
                    format!("{dtype}[,{dims}]"),
                    format!("{dtype}[-1]"),
                    format!("{dtype}[x]"),
                    format!("{dtype}[1.5]"),
                    format!("{dtype}({dims})"),
                    format!("{dtype}x[{dims}]"),
                    format!("[{dims}]"),
                    dtype.to_string(),
                    format!("{dtype}[99999999999999999999]"),
                ] {
                    out.push(splice(src, start, end, &bad));
                }
            }
        }
        "garbage after the jaxpr" => {
            for g in [
                "}",
                " x",
                " {",
                ")",
                " ;",
                " in",
                " 1.0:f32[]",
                " {}",
                "\n\u{1}",
            ] {
                out.push(format!("{}{g}", src.trim_end()));
            }
        }
        "unterminated params" => {
            // Cut right after each param value, or drop a params list's closing `]`
            // together with everything up to the end of its line.
            for t in toks.iter().filter(|t| text_of(src, t) == "]") {
                let line_end = src[t.end..].find('\n').map_or(src.len(), |k| t.end + k);
                out.push(splice(src, t.start, line_end, ""));
            }
            for w in toks.windows(2) {
                if text_of(src, &w[1]) == "=" && text_of(src, &w[0]) != "=" {
                    out.push(src[..w[1].end].to_owned());
                }
            }
        }
        "missing separator" => {
            // `:`, `=`, `.` and `,` replaced by a space one at a time (a space, so that
            // `[2,2]` does not become the valid `[22]`).
            for t in &toks {
                if matches!(text_of(src, t), ":" | "=" | "." | ",") {
                    out.push(splice(src, t.start, t.end, " "));
                }
            }
        }
        _ => panic!("unknown class {class}"),
    }
    out
}

const CLASSES: &[&str] = &[
    "truncated",
    "deleted bracket",
    "duplicated bracket",
    "swapped bracket",
    "bad type",
    "garbage after the jaxpr",
    "unterminated params",
    "missing separator",
];

#[test]
fn sources_are_valid() {
    for name in SOURCES {
        let src = input_of(name);
        parse_jaxpr(&src).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn empty_and_blank_texts() {
    let mut tally = Tally::new();
    for t in [
        "", " ", "\n\n", "\t \n ", ";", "{}", "{ }", "()", "let", "lambda", "in",
    ] {
        tally.expect_parse_error("empty", t);
    }
    tally.finish(11);
}

/// The keywords name variables where a variable stands, as JAX names its 222nd variable
/// `in`: every variable of every source renamed to each keyword reads as the same jaxpr.
#[test]
fn keywords_name_variables() {
    let mut checked = 0;
    for name in SOURCES {
        let src = input_of(name);
        let want = print_jaxpr(&parse_jaxpr(&src).unwrap());
        let toks = tokens(&src);
        let mut names: Vec<&str> = Vec::new();
        for w in toks.windows(2) {
            let (a, b) = (text_of(&src, &w[0]), text_of(&src, &w[1]));
            let lit = a.starts_with(|c: char| c.is_ascii_digit() || c == '-')
                || matches!(a, "True" | "False" | "inf" | "nan" | "_");
            if b == ":" && !lit && !names.contains(&a) {
                names.push(a);
            }
        }
        for (i, var) in names.iter().enumerate() {
            let kw = ["lambda", "let", "in"][i % 3];
            let mut m = src.clone();
            for t in toks.iter().rev().filter(|t| text_of(&src, t) == *var) {
                m = splice(&m, t.start, t.end, kw);
            }
            let got = parse_jaxpr(&m).map(|j| print_jaxpr(&j));
            assert_eq!(
                got.as_deref(),
                Ok(want.as_str()),
                "{name}: {var} renamed {kw}:\n{m}"
            );
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} renamings");
}

/// The example and its neighbours: `in` closes the equations before `(`, or
/// where no variable `in` is bound.
#[test]
fn keywords_where_no_variable_stands() {
    let mut tally = Tally::new();
    for t in [
        "{ lambda ; a:f32[]. let b:f32[] = sin a in d,) }",
        "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) } in",
        "{ lambda ; a:f32[]. let b:f32[] = sin a in }",
        "{ let ; a:f32[]. let b:f32[] = sin a in (b,) }",
        "{ lambda ; a:f32[] in. let in (a,) }",
        "{ lambda ; a:f32[]. in (a,) }",
    ] {
        tally.expect_parse_error("keyword", t);
    }
    tally.finish(6);
    // Keywords as names of unbound variables: type errors naming them.
    for (t, var) in [
        (
            "{ lambda ; a:f32[]. let b:f32[] = sin a in\n  (in,) }",
            "in",
        ),
        (
            "{ lambda ; a:f32[]. let b:f32[] = sin lambda in (b,) }",
            "lambda",
        ),
        (
            "{ lambda ; a:f32[]. let b:f32[] = add a let in (b,) }",
            "let",
        ),
    ] {
        match parse_jaxpr(t) {
            Err(ReadError::Type(e)) => assert!(e.to_string().contains(&format!("'{var}'")), "{e}"),
            other => panic!("{t}: {:?}", other.map(|j| print_jaxpr(&j))),
        }
    }
}

#[test]
fn every_class_of_mutant_is_a_parse_error() {
    for class in CLASSES {
        let mut tally = Tally::new();
        for name in SOURCES {
            for m in mutants(class, &input_of(name)) {
                tally.expect_parse_error(class, &m);
            }
        }
        tally.finish(SOURCES.len());
    }
}

/// The text made ill typed near its start, in three ways; each version must fail with a
/// type error as it is.
fn ill_typed(src: &str) -> Vec<String> {
    let toks = tokens(src);
    let mut out = Vec::new();
    // The first use of an input in an equation: an unbound name instead.
    let eq = toks.iter().position(|t| text_of(src, t) == "=");
    if let Some(i) = eq {
        if let Some(u) = toks[i + 1..]
            .windows(2)
            .find(|w| {
                let a = text_of(src, &w[0]);
                a.chars().all(|c| c.is_ascii_lowercase()) && !matches!(text_of(src, &w[1]), "[")
            })
            .and_then(|w| {
                let a = text_of(src, &w[0]);
                (a.len() <= 2).then_some(w[0])
            })
        {
            out.push(splice(src, u.start, u.end, "unbound_name"));
        }
    }
    // The first declared dtype after `let`: another one.
    if let Some(l) = toks.iter().position(|t| text_of(src, t) == "let") {
        // A binder's type, not a literal's: `name : dtype`.
        if let Some(t) = (l + 2..toks.len())
            .find(|&k| {
                matches!(text_of(src, &toks[k]), "f32" | "i32" | "bool")
                    && text_of(src, &toks[k - 1]) == ":"
                    && text_of(src, &toks[k - 2]).starts_with(|c: char| c.is_ascii_lowercase())
                    && !matches!(text_of(src, &toks[k - 2]), "inf" | "nan")
            })
            .map(|k| toks[k])
        {
            let other = if text_of(src, &t) == "f16" {
                "f32"
            } else {
                "f16"
            };
            out.push(splice(src, t.start, t.end, other));
        }
    }
    out
}

#[test]
fn syntax_errors_win_over_earlier_type_errors() {
    let mut sources = Vec::new();
    for name in SOURCES {
        for bad in ill_typed(&input_of(name)) {
            match parse_jaxpr(&bad) {
                Err(ReadError::Type(_)) => sources.push(bad),
                other => panic!(
                    "{name}: the ill-typed version should be a type error, got {:?}:\n{bad}",
                    other.map(|j| print_jaxpr(&j))
                ),
            }
        }
    }
    // And a name bound twice at the very start.
    sources.push(
        "{ lambda ; a:f32[] a:f32[]. let\n    b:f32[] = sin a\n    c:f32[] = cos b\n  in (c,) }\n"
            .to_owned(),
    );
    assert!(sources.len() >= SOURCES.len());
    for class in [
        "truncated",
        "deleted bracket",
        "duplicated bracket",
        "garbage after the jaxpr",
    ] {
        let mut tally = Tally::new();
        for src in &sources {
            // Only mutations after the type error: those are the ones a parser that
            // typechecks as it goes would report as type errors.
            let first_bad = ["unbound_name", "f16", " a:f32[]. "]
                .iter()
                .filter_map(|m| src.find(m))
                .min()
                .unwrap_or(0);
            for m in mutants(class, src) {
                let diverges = m
                    .bytes()
                    .zip(src.bytes())
                    .position(|(x, y)| x != y)
                    .unwrap_or(m.len().min(src.len()));
                if diverges > first_bad + 12 || class == "garbage after the jaxpr" {
                    tally.expect_parse_error(class, &m);
                }
            }
        }
        tally.finish(sources.len());
    }
}
