//! A snapshot of ferrax-ir's public API (`tests/public_api.txt`), so that a change to it
//! is seen in review: every `pub` item of `src/` (functions with their signatures,
//! types, traits, constants, modules, re-exports, public fields, enum variants and
//! the `#[non_exhaustive]` marks), one per line, by file. A change fails this test; rerun
//! it with `FERRAX_BLESS=1` to accept it, and say in the commit whether it breaks users.
//!
//! This reads the source text (stable Rust has no rustdoc JSON): items made by macros
//! appear as the macro's own text, and `pub(crate)` items are left out.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "bin") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The public items of one file's text, each on one line.
fn items(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_tests = false;
    let mut pending: Option<String> = None;
    let mut enum_depth: Option<usize> = None;
    let mut depth = 0usize;
    let mut non_exhaustive = false;
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with("#[cfg(test)]") {
            in_tests = true;
        }
        if in_tests {
            continue;
        }
        if let Some(p) = pending.as_mut() {
            p.push(' ');
            p.push_str(line);
            if line.ends_with('{') || line.ends_with(';') || line.starts_with("where") {
                let p = pending.take().unwrap();
                out.push(clean(&p));
            }
        } else if line.starts_with("#[non_exhaustive]") {
            non_exhaustive = true;
        } else if line.starts_with("pub ") && !line.starts_with("pub(") {
            let mark = if non_exhaustive {
                "#[non_exhaustive] "
            } else {
                ""
            };
            let item = format!("{mark}{line}");
            if line.starts_with("pub enum") {
                enum_depth = Some(depth + 1);
            }
            let done = line.ends_with('{')
                || line.ends_with(';')
                || line.ends_with(',')
                || line.ends_with('}');
            if done {
                out.push(clean(&item));
            } else {
                pending = Some(item);
            }
            non_exhaustive = false;
        } else if enum_depth == Some(depth)
            && !line.starts_with("//")
            && !line.starts_with("#[")
            && line.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        {
            // A variant of a public enum.
            out.push(format!("  variant {}", clean(line)));
        } else if !line.starts_with("#[") && !line.starts_with("//") {
            non_exhaustive = false;
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if enum_depth.is_some_and(|d| depth < d) {
            enum_depth = None;
        }
    }
    out
}

fn clean(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.trim_end_matches(['{', ',', ' ']).to_owned()
}

#[test]
fn public_api_is_the_snapshot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut snapshot = String::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let items = items(&text);
        if items.is_empty() {
            continue;
        }
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        snapshot.push_str(&format!("# {}\n", rel.replace('\\', "/")));
        for i in items {
            snapshot.push_str(&i);
            snapshot.push('\n');
        }
    }
    let path = root.join("tests/public_api.txt");
    if std::env::var_os("FERRAX_BLESS").is_some() {
        std::fs::write(&path, &snapshot).unwrap();
        return;
    }
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    if old != snapshot {
        let first = old
            .lines()
            .zip(snapshot.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(old.lines().count().min(snapshot.lines().count()));
        panic!(
            "ferrax-ir's public API changed (first difference at line {}: was {:?}, now {:?}); \
             if intended, rerun with FERRAX_BLESS=1 and review tests/public_api.txt",
            first + 1,
            old.lines().nth(first),
            snapshot.lines().nth(first)
        );
    }
}
