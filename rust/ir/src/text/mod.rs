//! Jaxpr text: the printer and the parser of JAX's current jaxpr format.
//!
//! [`print_jaxpr`] writes what JAX 0.10 prints (its layout at width 80: short jaxprs and
//! params on one line, long ones broken; the params JAX shows; see the printer's docs)
//! and [`parse_jaxpr`] / [`parse_jaxpr_with`] read it back, along with other layouts of
//! the same text (`;`-separated or broken equations, wrapped lines, `broadcast_in_dim`'s
//! `shape` given or implied, `let name = { ... } in` shared jaxprs). The parser is
//! strict: malformed text is a [`ParseError`] with its
//! line and column even when the text also has type errors. Neither recurses over
//! nesting depth.

mod lexer;
mod parser;
mod printer;

pub use parser::{
    parse_jaxpr, parse_jaxpr_with, ParseError, ReadError, MAX_ERROR_NESTING, MAX_VALUE_DEPTH,
};
pub(crate) use printer::printed_names;
pub use printer::{format_param_flat, print_closed_jaxpr, print_jaxpr, MAX_INDENT_DEPTH};

use crate::dtype::DType;
use crate::jaxpr::{LitValue, Literal};
use crate::params::Param;

/// The printed name of the `n`-th variable: `a`..`z`, then `ba`, `bb`, ... (base 26 with
/// `a` as the zero digit, as JAX names them).
pub fn alphabetic_name(mut n: usize) -> String {
    let mut digits: Vec<u8> = Vec::new();
    loop {
        digits.push(b'a' + (n % 26) as u8);
        n /= 26;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// Formats a float the way Python's `repr` does: the shortest text that reads back to
/// the same value, in exponent form when the exponent is below -4 or at least 16.
pub fn python_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // `{:e}` gives the shortest round-trip digits: "d.ddde-5".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        // Positional: place the point after exp+1 digits.
        let point = exp + 1;
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            let (a, b) = digits.split_at(point as usize);
            format!("{a}.{b}")
        };
        format!("{sign}{body}")
    } else {
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exp.abs())
    }
}

/// The printed value of a literal, without its type: `2.0`, `1`, `True`.
pub fn format_literal_value(lit: &Literal) -> String {
    match lit.value {
        LitValue::Bool(b) => if b { "True" } else { "False" }.to_owned(),
        LitValue::Int(i) if lit.dtype == DType::U64 => (i as u64).to_string(),
        LitValue::Int(i) => i.to_string(),
        LitValue::Float(f) => python_float_repr(f),
    }
}

/// A literal as jaxpr text prints it: `2.0:f32[]`.
pub fn format_literal(lit: &Literal) -> String {
    format!("{}:{}[]", format_literal_value(lit), lit.dtype)
}

/// A param value on one line, nested jaxprs elided as `{...}` (for error messages).
pub fn format_param_short(p: &Param) -> String {
    match p {
        Param::Jaxpr(_) => "{...}".to_owned(),
        Param::Jaxprs(js) => format!("({})", vec!["{...}"; js.len()].join(" ")),
        other => printer::format_param_flat(other).unwrap_or_default(),
    }
}
