//! `ferrax-jaxpr`: the IR crate's operations on jaxpr text files.
//!
//! ```text
//! ferrax-jaxpr check FILE            typecheck; print the input and output types
//! ferrax-jaxpr fmt FILE              print in the canonical format
//! ferrax-jaxpr dce FILE [--used 1,0] prune (all outputs used by default)
//! ferrax-jaxpr toposort FILE         reorder equations by demand
//! ferrax-jaxpr transpose FILE --linear 1,0
//!                                    transpose a jaxpr linear in the flagged inputs: the
//!                                    result takes the non-linear inputs, then one
//!                                    cotangent per output, and returns one cotangent per
//!                                    linear input
//! ferrax-jaxpr lower FILE [--name m] lower to a StableHLO module
//! ```
//! `FILE` may be `-` for standard input. Errors go to standard error with exit code 1
//! (2 for bad usage).

use ferrax_ir::lower::stablehlo::lower_jaxpr;
use ferrax_ir::passes::{dce, toposort, transpose};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{typecheck, AbstractValue, Jaxpr};
use std::io::Read;
use std::process::ExitCode;

const USAGE: &str = "usage: ferrax-jaxpr (check|fmt|dce|toposort|transpose|lower) FILE \
                     [--used FLAGS] [--linear FLAGS] [--name NAME]";

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

/// Reads the comma-separated 0/1 flags of `option`, one per jaxpr `what` (`n` of them).
fn flags(option: &str, text: &str, n: usize, what: &str) -> Result<Vec<bool>, String> {
    let v: Vec<bool> = text
        .split(',')
        .map(|f| match f.trim() {
            "1" | "true" => Ok(true),
            "0" | "false" => Ok(false),
            other => Err(format!("{option} takes 0/1 flags, got '{other}'")),
        })
        .collect::<Result<_, _>>()?;
    if v.len() != n {
        return Err(format!(
            "{option} has {} flags but the jaxpr has {n} {what}",
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
    let mut linear: Option<String> = None;
    let mut name = "ferrax".to_owned();
    let mut rest = args[2..].iter();
    while let Some(a) = rest.next() {
        match (a.as_str(), rest.next()) {
            ("--used", Some(v)) => used = Some(v.clone()),
            ("--linear", Some(v)) => linear = Some(v.clone()),
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
                Some(u) => flags("--used", &u, jaxpr.outvars().len(), "outputs").map_err(fail)?,
                None => vec![true; jaxpr.outvars().len()],
            };
            let (pruned, _) = dce(&jaxpr, &used).map_err(|e| fail(e.to_string()))?;
            Ok(print_jaxpr(&pruned))
        }
        "toposort" => Ok(print_jaxpr(&toposort(&jaxpr))),
        "transpose" => {
            let Some(l) = linear else {
                return Err(usage(
                    "transpose needs --linear FLAGS (one 0/1 flag per input)",
                ));
            };
            let linear = flags("--linear", &l, jaxpr.invars().len(), "inputs").map_err(fail)?;
            let t = transpose(&jaxpr, &linear).map_err(|e| fail(e.to_string()))?;
            Ok(print_jaxpr(&t))
        }
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
