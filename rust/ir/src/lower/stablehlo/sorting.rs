//! Lowering of `sort` (`stablehlo.sort` with JAX's comparator: floats compared in a
//! total order after -0.0 becomes 0.0 and every NaN one NaN, keys lexicographically) and
//! of the cumulative primitives (`stablehlo.reduce_window` over a window as long as the
//! axis, padded before it, or after it when reversed: JAX's CPU lowering).

use super::ops::{compare_attrs, reduction_init};
use super::text::{float_literal, i64_array, tensor_of, tensor_type, write_names, Ssa};
use super::{FuncState, Module};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::primitive::Builtin;
use std::fmt::Write as _;

impl Module {
    /// A sort key in the comparator: floats canonicalized (see the module doc).
    fn sort_key(&mut self, f: &mut FuncState<'_>, x: &Ssa, d: DType) -> Ssa {
        if !d.is_float() {
            return x.clone();
        }
        let t = tensor_of(&[], d);
        let b = tensor_of(&[], DType::Bool);
        let zero = self.scalar_constant(f, &float_literal(0.0, d), d);
        let is_zero = self.op1(
            f,
            "stablehlo.compare",
            &[x, &zero],
            &compare_attrs("EQ", d),
            b.clone(),
        );
        let zero2 = self.scalar_constant(f, &float_literal(0.0, d), d);
        let x = self.op1(f, "stablehlo.select", &[&is_zero, &zero2, x], "", t.clone());
        let is_nan = self.op1(
            f,
            "stablehlo.compare",
            &[&x, &x],
            &compare_attrs("NE", d),
            b,
        );
        let nan = self.scalar_constant(f, &float_literal(f64::NAN, d), d);
        self.op1(f, "stablehlo.select", &[&is_nan, &nan, &x], "", t)
    }

    /// `a < b` and `a == b` of two keys (floats in their total order).
    fn key_compare(&mut self, f: &mut FuncState<'_>, a: &Ssa, b: &Ssa, d: DType, dir: &str) -> Ssa {
        let attrs = if d.is_float() {
            format!(
                "comparison_direction = #stablehlo<comparison_direction {dir}>, compare_type = #stablehlo<comparison_type TOTALORDER>"
            )
        } else {
            compare_attrs(dir, d)
        };
        self.op1(
            f,
            "stablehlo.compare",
            &[a, b],
            &attrs,
            tensor_of(&[], DType::Bool),
        )
    }

    /// `sort[dimension, is_stable, num_keys]` of `inputs`.
    pub(super) fn sort(
        &mut self,
        f: &mut FuncState<'_>,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        dimension: i64,
        is_stable: bool,
        num_keys: usize,
    ) -> Vec<Ssa> {
        let types: Vec<String> = in_avals.iter().map(tensor_type).collect();
        self.out.push_str("    ");
        let results = self.bind_results(f, &types);
        self.out.push_str("\"stablehlo.sort\"(");
        write_names(&mut self.out, inputs.iter().map(|s| s.name.as_str()));
        self.out.push_str(") ({\n    ^bb0(");
        let mut pairs = Vec::with_capacity(in_avals.len());
        for (i, a) in in_avals.iter().enumerate() {
            let t = tensor_of(&[], a.dtype);
            let (x, y) = (f.fresh(), f.fresh());
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(self.out, "{sep}{x}: {t}, {y}: {t}");
            pairs.push((Ssa::new(x, t.clone()), Ssa::new(y, t), a.dtype));
        }
        self.out.push_str("):\n");
        let b = tensor_of(&[], DType::Bool);
        let mut keys = Vec::with_capacity(num_keys);
        for (x, y, d) in pairs.iter().take(num_keys) {
            let kx = self.sort_key(f, x, *d);
            let ky = self.sort_key(f, y, *d);
            keys.push((kx, ky, *d));
        }
        // Lexicographic, built from the last key: lt_i or (eq_i and the rest).
        let mut p: Option<Ssa> = None;
        for (kx, ky, d) in keys.iter().rev() {
            let lt = self.key_compare(f, kx, ky, *d, "LT");
            p = Some(match p {
                None => lt,
                Some(rest) => {
                    let eq = self.key_compare(f, kx, ky, *d, "EQ");
                    let both = self.op1(f, "stablehlo.and", &[&eq, &rest], "", b.clone());
                    self.op1(f, "stablehlo.or", &[&lt, &both], "", b.clone())
                }
            });
        }
        let p = p.map(|s| s.name).unwrap_or_default();
        let _ = write!(
            self.out,
            "      \"stablehlo.return\"({p}) : ({b}) -> ()\n    }}) {{dimension = {dimension} : i64, is_stable = {is_stable}}} : ("
        );
        write_names(&mut self.out, types.iter().map(String::as_str));
        self.out.push_str(") -> ");
        if types.len() == 1 {
            self.out.push_str(&types[0]);
        } else {
            self.out.push('(');
            write_names(&mut self.out, types.iter().map(String::as_str));
            self.out.push(')');
        }
        self.out.push('\n');
        results
    }

    /// `top_k[axis, k]`: a stable sort of `(x, iota)` along `axis`, greater first in the
    /// total order (XLA's TopK: +NaN first, -0.0 after 0.0, -NaN last), cut to `k`.
    pub(super) fn top_k(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        aval: &AbstractValue,
        axis: usize,
        k: i64,
    ) -> Vec<Ssa> {
        let dims = aval.shape.dims();
        let d = aval.dtype;
        let idx_ty = tensor_of(dims, DType::I32);
        let iota = self.op1(
            f,
            "stablehlo.iota",
            &[],
            &format!("iota_dimension = {axis} : i64"),
            idx_ty.clone(),
        );
        let types = [tensor_type(aval), idx_ty];
        self.out.push_str("    ");
        let sorted = self.bind_results(f, &types);
        let (a, b, i, j) = (f.fresh(), f.fresh(), f.fresh(), f.fresh());
        let t = tensor_of(&[], d);
        let it = tensor_of(&[], DType::I32);
        let _ = writeln!(
            self.out,
            "\"stablehlo.sort\"({}, {}) ({{\n    ^bb0({a}: {t}, {b}: {t}, {i}: {it}, {j}: {it}):",
            x.name, iota.name
        );
        let (a, b) = (Ssa::new(a, t.clone()), Ssa::new(b, t));
        let gt = self.key_compare(f, &a, &b, d, "GT");
        let _ = writeln!(
            self.out,
            "      \"stablehlo.return\"({}) : ({}) -> ()\n    }}) {{dimension = {axis} : i64, is_stable = true}} : ({}, {}) -> ({}, {})",
            gt.name,
            tensor_of(&[], DType::Bool),
            types[0],
            types[1],
            types[0],
            types[1]
        );
        let starts = vec![0i64; dims.len()];
        let mut limits = dims.to_vec();
        if let Some(l) = limits.get_mut(axis) {
            *l = k;
        }
        let ones = vec![1i64; dims.len()];
        let attrs = format!(
            "start_indices = {}, limit_indices = {}, strides = {}",
            i64_array(&starts),
            i64_array(&limits),
            i64_array(&ones)
        );
        sorted
            .iter()
            .zip([d, DType::I32])
            .map(|(s, dt)| self.op1(f, "stablehlo.slice", &[s], &attrs, tensor_of(&limits, dt)))
            .collect()
    }

    /// A cumulative primitive of `x` along `axis`.
    pub(super) fn cumulative(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        x: &Ssa,
        aval: &AbstractValue,
        axis: usize,
        reverse: bool,
    ) -> Ssa {
        let dims = aval.shape.dims();
        let n = dims.get(axis).copied().unwrap_or(0);
        if n <= 1 {
            return x.clone(); // nothing to combine
        }
        let d = aval.dtype;
        let init = match b {
            Builtin::Cumsum => reduction_init(Builtin::ReduceSum, d),
            Builtin::Cumprod => reduction_init(Builtin::ReduceProd, d),
            Builtin::Cummax => reduction_init(Builtin::ReduceMax, d),
            Builtin::Cummin => reduction_init(Builtin::ReduceMin, d),
            _ => float_literal(f64::NEG_INFINITY, d),
        };
        let init = self.scalar_constant(f, &init, d);
        let t = tensor_of(&[], d);
        let out_ty = tensor_type(aval);
        self.out.push_str("    ");
        let r = self.bind_results(f, std::slice::from_ref(&out_ty));
        let (a, c) = (f.fresh(), f.fresh());
        let _ = writeln!(
            self.out,
            "\"stablehlo.reduce_window\"({}, {}) ({{\n    ^bb0({a}: {t}, {c}: {t}):",
            x.name, init.name
        );
        let (a, c) = (Ssa::new(a, t.clone()), Ssa::new(c, t.clone()));
        let v = match b {
            Builtin::Cumsum => self.op1(f, "stablehlo.add", &[&a, &c], "", t.clone()),
            Builtin::Cumprod => self.op1(f, "stablehlo.multiply", &[&a, &c], "", t.clone()),
            Builtin::Cummax => self.op1(f, "stablehlo.maximum", &[&a, &c], "", t.clone()),
            Builtin::Cummin => self.op1(f, "stablehlo.minimum", &[&a, &c], "", t.clone()),
            _ => {
                // logaddexp(a, c) = max + log1p(exp(-|a - c|)), or a + c where a - c is
                // NaN (two infinities of one sign, or a NaN).
                let bt = tensor_of(&[], DType::Bool);
                let m = self.op1(f, "stablehlo.maximum", &[&a, &c], "", t.clone());
                let diff = self.op1(f, "stablehlo.subtract", &[&a, &c], "", t.clone());
                let nan = self.op1(
                    f,
                    "stablehlo.compare",
                    &[&diff, &diff],
                    &compare_attrs("NE", d),
                    bt,
                );
                let sum = self.op1(f, "stablehlo.add", &[&a, &c], "", t.clone());
                let abs = self.op1(f, "stablehlo.abs", &[&diff], "", t.clone());
                let neg = self.op1(f, "stablehlo.negate", &[&abs], "", t.clone());
                let exp = self.op1(f, "stablehlo.exponential", &[&neg], "", t.clone());
                let log = self.op1(f, "stablehlo.log_plus_one", &[&exp], "", t.clone());
                let v = self.op1(f, "stablehlo.add", &[&m, &log], "", t.clone());
                self.op1(f, "stablehlo.select", &[&nan, &sum, &v], "", t.clone())
            }
        };
        let rank = dims.len();
        let window: Vec<i64> = (0..rank).map(|i| if i == axis { n } else { 1 }).collect();
        let ones = vec![1i64; rank];
        let pads: Vec<String> = (0..rank)
            .map(|i| match (i == axis, reverse) {
                (false, _) => "[0, 0]".to_owned(),
                (true, false) => format!("[{}, 0]", n - 1),
                (true, true) => format!("[0, {}]", n - 1),
            })
            .collect();
        let _ = writeln!(
            self.out,
            "      \"stablehlo.return\"({}) : ({t}) -> ()\n    }}) {{window_dimensions = {}, window_strides = {}, base_dilations = {}, window_dilations = {}, padding = dense<[{}]> : tensor<{rank}x2xi64>}} : ({}, {t}) -> {out_ty}",
            v.name,
            i64_array(&window),
            i64_array(&ones),
            i64_array(&ones),
            i64_array(&ones),
            pads.join(", "),
            x.ty,
        );
        r.into_iter().next().unwrap_or_else(|| x.clone())
    }
}
