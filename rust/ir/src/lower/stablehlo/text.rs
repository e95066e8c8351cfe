//! Writing StableHLO text: types, constants and ops in MLIR's generic form.

use super::{FuncState, Module};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use std::fmt::Write as _;

/// An SSA value and its type, as they appear in the text.
#[derive(Clone, Debug)]
pub(crate) struct Ssa {
    pub(crate) name: String,
    pub(crate) ty: String,
}

impl Ssa {
    pub(crate) fn new(name: String, ty: String) -> Ssa {
        Ssa { name, ty }
    }
}

/// The element type: `f32`, `i1` for bool, `ui8` for unsigned.
pub(crate) fn element_type(d: DType) -> &'static str {
    match d {
        DType::Bool => "i1",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 => "ui8",
        DType::U16 => "ui16",
        DType::U32 => "ui32",
        DType::U64 => "ui64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F32 => "f32",
        DType::F64 => "f64",
        // A key is two words: `tensor_of` adds their trailing dimension.
        DType::KeyFry => "ui32",
    }
}

/// A tensor type from dimensions and dtype: `tensor<3x4xf32>`, `tensor<f32>`.
pub(crate) fn tensor_of(dims: &[i64], d: DType) -> String {
    let mut s = String::with_capacity(16);
    s.push_str("tensor<");
    for dim in dims {
        let _ = write!(s, "{dim}x");
    }
    if d.is_key() {
        // JAX's physical layout of `key<fry>[s...]`: `tensor<s...x2xui32>`.
        s.push_str("2x");
    }
    s.push_str(element_type(d));
    s.push('>');
    s
}

/// The tensor type of an abstract value.
pub(crate) fn tensor_type(a: &AbstractValue) -> String {
    tensor_of(a.shape.dims(), a.dtype)
}

/// `array<i64: 1, 2>` (or `array<i64>` when empty), for dense integer-array attributes.
pub(crate) fn i64_array(xs: &[i64]) -> String {
    if xs.is_empty() {
        return "array<i64>".to_owned();
    }
    let parts: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    format!("array<i64: {}>", parts.join(", "))
}

/// `[1, 2]`, for dimension lists inside structured attributes.
pub(crate) fn bracket_list(xs: &[i64]) -> String {
    let parts: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// The text of a float for a `dense<...>` attribute of dtype `d`: hexadecimal bits for
/// the non-finite and for f32/f64 (exact), a decimal with a point otherwise.
pub(crate) fn float_literal(x: f64, d: DType) -> String {
    match d {
        DType::F32 => format!("0x{:08X}", (x as f32).to_bits()),
        DType::F64 => format!("0x{:016X}", x.to_bits()),
        _ => {
            // A literal keeps its value as written: round it here, so a value beyond
            // the dtype's range becomes infinity as XLA would make it.
            let x = crate::eval::round_float(d, x);
            if x.is_nan() {
                return if d == DType::F16 { "0x7E00" } else { "0x7FC0" }.to_owned();
            }
            if x.is_infinite() {
                let bits = match (d, x > 0.0) {
                    (DType::F16, true) => "0x7C00",
                    (DType::F16, false) => "0xFC00",
                    (_, true) => "0x7F80",
                    (_, false) => "0xFF80",
                };
                return bits.to_owned();
            }
            let s = format!("{x:e}");
            match s.split_once('e') {
                Some((m, e)) if !m.contains('.') => format!("{m}.0e{e}"),
                _ => s,
            }
        }
    }
}

impl Module {
    /// Writes `results = "name"(operands) {attrs} : (operand types) -> result types` and
    /// returns the results.
    pub(crate) fn op(
        &mut self,
        f: &mut FuncState<'_>,
        name: &str,
        operands: &[&Ssa],
        attrs: &str,
        result_types: &[String],
    ) -> Vec<Ssa> {
        self.out.push_str("    ");
        let results = self.bind_results(f, result_types);
        let out = &mut self.out;
        let _ = write!(out, "\"{name}\"(");
        write_names(out, operands.iter().map(|s| s.name.as_str()));
        out.push(')');
        if !attrs.is_empty() {
            let _ = write!(out, " {{{attrs}}}");
        }
        out.push_str(" : (");
        write_names(out, operands.iter().map(|s| s.ty.as_str()));
        out.push_str(") -> ");
        write_result_types(out, result_types);
        out.push('\n');
        results
    }

    /// Writes the left-hand side of an op with these result types (`%7 = `, `%7:2 = `, or
    /// nothing) and returns the results (`%7`, or `%7#0`, `%7#1`).
    pub(crate) fn bind_results(
        &mut self,
        f: &mut FuncState<'_>,
        result_types: &[String],
    ) -> Vec<Ssa> {
        match result_types.len() {
            0 => Vec::new(),
            1 => {
                let n = f.fresh();
                let _ = write!(self.out, "{n} = ");
                vec![Ssa::new(n, result_types[0].clone())]
            }
            k => {
                let n = f.fresh();
                let _ = write!(self.out, "{n}:{k} = ");
                result_types
                    .iter()
                    .enumerate()
                    .map(|(i, t)| Ssa::new(format!("{n}#{i}"), t.clone()))
                    .collect()
            }
        }
    }

    /// One result of `op`.
    pub(crate) fn op1(
        &mut self,
        f: &mut FuncState<'_>,
        name: &str,
        operands: &[&Ssa],
        attrs: &str,
        result_type: String,
    ) -> Ssa {
        let mut r = self.op(f, name, operands, attrs, &[result_type]);
        r.pop()
            .unwrap_or_else(|| Ssa::new(String::new(), String::new()))
    }

    /// A `stablehlo.constant` of a scalar value written as its `dense<...>` text.
    pub(crate) fn scalar_constant(&mut self, f: &mut FuncState<'_>, value: &str, d: DType) -> Ssa {
        let ty = tensor_of(&[], d);
        let attrs = format!("value = dense<{value}> : {ty}");
        self.op1(f, "stablehlo.constant", &[], &attrs, ty)
    }
}

pub(crate) fn write_names<'a>(out: &mut String, names: impl Iterator<Item = &'a str>) {
    for (i, n) in names.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(n);
    }
}

pub(crate) fn write_result_types(out: &mut String, types: &[String]) {
    if types.len() == 1 {
        out.push_str(&types[0]);
    } else {
        out.push('(');
        write_names(out, types.iter().map(|s| s.as_str()));
        out.push(')');
    }
}
