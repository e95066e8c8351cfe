//! `ferrax-jaxpr`: the IR crate's operations on jaxpr text files.
//!
//! ```text
//! ferrax-jaxpr check FILE            typecheck; print the input and output types
//! ferrax-jaxpr fmt FILE              print in the canonical format
//! ferrax-jaxpr dce FILE [--used 1,0] prune (all outputs used by default)
//! ferrax-jaxpr toposort FILE         reorder equations by demand
//! ferrax-jaxpr lower FILE [--name m] lower to a StableHLO module
//! ```
//! `FILE` may be `-` for standard input. Errors go to standard error with exit code 1
//! (2 for bad usage).

use ferrax_ir::lower::stablehlo::lower_jaxpr;
use ferrax_ir::passes::{dce, toposort};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{typecheck, AbstractValue, Jaxpr};
use std::io::Read;
use std::process::ExitCode;

const USAGE: &str =
    "usage: ferrax-jaxpr (check|fmt|dce|toposort|lower) FILE [--used FLAGS] [--name NAME]";

fn read(path: &str) -> Result<String, String> {
    if path == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
    }
}

fn types(avals: &[AbstractValue]) -> String {
    let v: Vec<String> = avals.iter().map(|a| a.to_string()).collect();
    format!("({})", v.join(", "))
}

fn flags(text: &str, n: usize) -> Result<Vec<bool>, String> {
    let v: Vec<bool> = text
        .split(',')
        .map(|f| match f.trim() {
            "1" | "true" => Ok(true),
            "0" | "false" => Ok(false),
            other => Err(format!("--used takes 0/1 flags, got '{other}'")),
        })
        .collect::<Result<_, _>>()?;
    if v.len() != n {
        return Err(format!(
            "--used has {} flags but the jaxpr has {n} outputs",
            v.len()
        ));
    }
    Ok(v)
}

fn run(args: &[String]) -> Result<String, (u8, String)> {
    let usage = |m: &str| (2u8, format!("{m}\n{USAGE}"));
    let (cmd, path) = match args {
        [cmd, path, ..] => (cmd.as_str(), path.as_str()),
        _ => return Err(usage("missing arguments")),
    };
    let mut used: Option<String> = None;
    let mut name = "ferrax".to_owned();
    let mut rest = args[2..].iter();
    while let Some(a) = rest.next() {
        match (a.as_str(), rest.next()) {
            ("--used", Some(v)) => used = Some(v.clone()),
            ("--name", Some(v)) => name = v.clone(),
            _ => return Err(usage(&format!("unexpected argument '{a}'"))),
        }
    }
    let fail = |e: String| (1u8, e);
    let text = read(path).map_err(fail)?;
    let jaxpr: Jaxpr = parse_jaxpr(&text).map_err(|e| fail(e.to_string()))?;
    match cmd {
        "check" => {
            let (ins, outs) = typecheck(&jaxpr).map_err(|e| fail(e.to_string()))?;
            Ok(format!("ok: {} -> {}\n", types(&ins), types(&outs)))
        }
        "fmt" => Ok(print_jaxpr(&jaxpr)),
        "dce" => {
            let used = match used {
                Some(u) => flags(&u, jaxpr.outvars().len()).map_err(fail)?,
                None => vec![true; jaxpr.outvars().len()],
            };
            let (pruned, _) = dce(&jaxpr, &used).map_err(|e| fail(e.to_string()))?;
            Ok(print_jaxpr(&pruned))
        }
        "toposort" => Ok(print_jaxpr(&toposort(&jaxpr))),
        "lower" => lower_jaxpr(&jaxpr, &name).map_err(|e| fail(e.to_string())),
        other => Err(usage(&format!("unknown command '{other}'"))),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(out) => {
            print!("{out}");
            if !out.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        Err((code, message)) => {
            eprintln!("ferrax-jaxpr: {message}");
            ExitCode::from(code)
        }
    }
}
