//! Lowering of `gather`, the `scatter` family and `rev`.
//!
//! XLA's gather clamps start indices and its scatter drops out-of-bounds windows. JAX's
//! modes on top of that are lowered as JAX lowers them: a `FILL_OR_DROP` gather is a
//! gather of the in-bounds case, masked to the fill value where an index vector is out of
//! bounds; a `CLIP` scatter clamps its indices first.

use super::ops::{bad, compare_attrs, physical_dims, reduction_init, scalar_text, with_key_words};
use super::text::{bracket_list, float_literal, i64_array, tensor_of, Ssa};
use super::{FuncState, LowerError, Module};
use crate::aval::AbstractValue;
use crate::dtype::{DType, DTypeKind};
use crate::eval::wrap_int;
use crate::jaxpr::{Eqn, LitValue};
use crate::params::{GatherScatterMode, Param};
use crate::primitive::Builtin;
use std::fmt::Write as _;

/// `name = [..]` for a non-empty list (StableHLO omits empty ones).
fn field(out: &mut Vec<String>, name: &str, xs: &[i64]) {
    if !xs.is_empty() {
        out.push(format!("{name} = {}", bracket_list(xs)));
    }
}

fn mode(e: &Eqn, b: Builtin) -> Result<GatherScatterMode, LowerError> {
    match e.params().get("mode") {
        Some(Param::Mode(m)) => Ok(*m),
        _ => Err(bad(b, "mode")),
    }
}

fn flag(e: &Eqn, name: &str) -> bool {
    matches!(e.params().get(name), Some(Param::Bool(true)))
}

/// The largest value of an integer dtype, as i128.
fn int_max(d: DType) -> i128 {
    match d {
        DType::I8 => i8::MAX.into(),
        DType::I16 => i16::MAX.into(),
        DType::I32 => i32::MAX.into(),
        DType::U8 => u8::MAX.into(),
        DType::U16 => u16::MAX.into(),
        DType::U32 => u32::MAX.into(),
        DType::U64 => u64::MAX.into(),
        _ => i64::MAX.into(),
    }
}

impl Module {
    /// A constant vector of index bounds in the indices' dtype, broadcast along the last
    /// dimension of `indices_dims` (bounds above the dtype's range are capped to it).
    fn index_bounds(
        &mut self,
        f: &mut FuncState<'_>,
        bounds: &[i64],
        d: DType,
        indices_dims: &[i64],
    ) -> Ssa {
        let parts: Vec<String> = bounds
            .iter()
            .map(|&b| i128::from(b).min(int_max(d)).to_string())
            .collect();
        let vty = tensor_of(&[bounds.len() as i64], d);
        let attrs = format!("value = dense<[{}]> : {vty}", parts.join(", "));
        let v = self.op1(f, "stablehlo.constant", &[], &attrs, vty);
        let last = indices_dims.len() as i64 - 1;
        let attrs = format!("broadcast_dimensions = {}", i64_array(&[last]));
        self.op1(
            f,
            "stablehlo.broadcast_in_dim",
            &[&v],
            &attrs,
            tensor_of(indices_dims, d),
        )
    }

    fn splat(&mut self, f: &mut FuncState<'_>, value: &str, d: DType, dims: &[i64]) -> Ssa {
        let c = self.scalar_constant(f, value, d);
        self.broadcast_to(f, c, &AbstractValue::scalar(d), dims)
    }

    pub(super) fn lower_gather(
        &mut self,
        f: &mut FuncState<'_>,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        out: &AbstractValue,
    ) -> Result<Vec<Ssa>, LowerError> {
        let b = Builtin::Gather;
        let dn = match e.params().get("dimension_numbers") {
            Some(Param::GatherDims(d)) => d,
            _ => return Err(bad(b, "dimension_numbers")),
        };
        let sizes = match e.params().get("slice_sizes") {
            Some(Param::Ints(v)) => v.to_vec(),
            _ => return Err(bad(b, "slice_sizes")),
        };
        // Keys: the words' trailing dimension is one more offset dimension, taken whole.
        let offset_dims = with_key_words(out, &dn.offset_dims, out.shape.rank() as i64);
        let (Some(operand), Some(indices)) = (in_avals.first(), in_avals.get(1)) else {
            return Err(bad(b, "operands"));
        };
        let out_ty = tensor_of(out.shape.dims(), out.dtype);
        if out.shape.size() == 0 {
            let zero = if out.dtype.is_key() {
                "0".to_owned()
            } else {
                reduction_init(Builtin::ReduceSum, out.dtype)
            };
            return Ok(vec![self.splat(f, &zero, out.dtype, out.shape.dims())]);
        }
        let idims = indices.shape.dims();
        let ivd = idims.len() as i64 - 1;
        let mut fields = Vec::new();
        field(&mut fields, "offset_dims", &offset_dims);
        field(
            &mut fields,
            "collapsed_slice_dims",
            &dn.collapsed_slice_dims,
        );
        field(
            &mut fields,
            "operand_batching_dims",
            &dn.operand_batching_dims,
        );
        field(
            &mut fields,
            "start_indices_batching_dims",
            &dn.start_indices_batching_dims,
        );
        field(&mut fields, "start_index_map", &dn.start_index_map);
        fields.push(format!("index_vector_dim = {ivd}"));
        let attrs = format!(
            "dimension_numbers = #stablehlo.gather<{}>, indices_are_sorted = {}, slice_sizes = {}",
            fields.join(", "),
            flag(e, "indices_are_sorted"),
            i64_array(&with_key_words(operand, &sizes, 2))
        );
        let gathered = self.op1(
            f,
            "stablehlo.gather",
            &[&inputs[0], &inputs[1]],
            &attrs,
            out_ty.clone(),
        );
        if mode(e, b)? != GatherScatterMode::FillOrDrop {
            return Ok(vec![gathered]);
        }
        // FILL_OR_DROP: keep a slice where 0 <= index <= dim - size for every component.
        let di = indices.dtype;
        let bounds: Vec<i64> = dn
            .start_index_map
            .iter()
            .map(|&d| {
                let d = d as usize;
                operand.shape.dims()[d] - sizes[d]
            })
            .collect();
        let ub = self.index_bounds(f, &bounds, di, idims);
        let zero = self.splat(f, "0", di, idims);
        let bool_ty = tensor_of(idims, DType::Bool);
        let ge = self.op1(
            f,
            "stablehlo.compare",
            &[&inputs[1], &zero],
            &compare_attrs("GE", di),
            bool_ty.clone(),
        );
        let le = self.op1(
            f,
            "stablehlo.compare",
            &[&inputs[1], &ub],
            &compare_attrs("LE", di),
            bool_ty.clone(),
        );
        let ok = self.op1(f, "stablehlo.and", &[&ge, &le], "", bool_ty);
        let batch_dims = &idims[..idims.len() - 1];
        let all_ty = tensor_of(batch_dims, DType::Bool);
        let init = self.scalar_constant(f, "true", DType::Bool);
        let all = self.reduce(f, &ok, &init, &[ivd], "stablehlo.and", DType::Bool, all_ty);
        let batch_in_out: Vec<i64> = (0..out.shape.rank() as i64)
            .filter(|i| !dn.offset_dims.contains(i))
            .collect();
        let attrs = format!("broadcast_dimensions = {}", i64_array(&batch_in_out));
        let mask = self.op1(
            f,
            "stablehlo.broadcast_in_dim",
            &[&all],
            &attrs,
            tensor_of(&physical_dims(out), DType::Bool),
        );
        let fill = fill_text(e.params().get("fill_value"), out.dtype);
        let fill = self.splat(f, &fill, out.dtype, out.shape.dims());
        Ok(vec![self.op1(
            f,
            "stablehlo.select",
            &[&mask, &gathered, &fill],
            "",
            out_ty,
        )])
    }

    pub(super) fn lower_scatter(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let dn = match e.params().get("dimension_numbers") {
            Some(Param::ScatterDims(d)) => d,
            _ => return Err(bad(b, "dimension_numbers")),
        };
        let (Some(operand), Some(indices), Some(updates)) =
            (in_avals.first(), in_avals.get(1), in_avals.get(2))
        else {
            return Err(bad(b, "operands"));
        };
        let idims = indices.shape.dims();
        let ivd = idims.len() as i64 - 1;
        let mut idx = inputs[1].clone();
        if mode(e, b)? == GatherScatterMode::Clip {
            // Clamp each index vector so its whole window is in bounds (JAX's lowering).
            let rank = operand.shape.rank() as i64;
            let window_operand_dims = (0..rank).filter(|d| {
                !dn.inserted_window_dims.contains(d) && !dn.operand_batching_dims.contains(d)
            });
            let mut window = vec![1i64; operand.shape.rank()];
            for (od, &uw) in window_operand_dims.zip(&dn.update_window_dims) {
                window[od as usize] = updates.shape.dims()[uw as usize];
            }
            let bounds: Vec<i64> = dn
                .scatter_dims_to_operand_dims
                .iter()
                .map(|&d| operand.shape.dims()[d as usize] - window[d as usize])
                .collect();
            let di = indices.dtype;
            let ub = self.index_bounds(f, &bounds, di, idims);
            let zero = self.scalar_constant(f, "0", di);
            idx = self.op1(
                f,
                "stablehlo.clamp",
                &[&zero, &idx, &ub],
                "",
                tensor_of(idims, di),
            );
        }
        let mut fields = Vec::new();
        // Keys: the words' trailing dimension is one more window dimension of the updates.
        let update_window_dims =
            with_key_words(updates, &dn.update_window_dims, updates.shape.rank() as i64);
        field(&mut fields, "update_window_dims", &update_window_dims);
        field(
            &mut fields,
            "inserted_window_dims",
            &dn.inserted_window_dims,
        );
        field(
            &mut fields,
            "input_batching_dims",
            &dn.operand_batching_dims,
        );
        field(
            &mut fields,
            "scatter_indices_batching_dims",
            &dn.scatter_indices_batching_dims,
        );
        field(
            &mut fields,
            "scatter_dims_to_operand_dims",
            &dn.scatter_dims_to_operand_dims,
        );
        fields.push(format!("index_vector_dim = {ivd}"));
        let d = operand.dtype;
        let combine = match (b, d.kind()) {
            (Builtin::Scatter, _) => None,
            (Builtin::ScatterAdd, _) => Some("stablehlo.add"),
            (Builtin::ScatterSub, _) => Some("stablehlo.subtract"),
            (Builtin::ScatterMul, _) => Some("stablehlo.multiply"),
            (Builtin::ScatterMin, DTypeKind::Bool) => Some("stablehlo.and"),
            (Builtin::ScatterMax, DTypeKind::Bool) => Some("stablehlo.or"),
            (Builtin::ScatterMin, _) => Some("stablehlo.minimum"),
            (Builtin::ScatterMax, _) => Some("stablehlo.maximum"),
            _ => return Err(bad(b, "primitive")),
        };
        let out_ty = tensor_of(operand.shape.dims(), d);
        let r = f.fresh();
        let (x, u) = (f.fresh(), f.fresh());
        // The region combines elements: a key's words one by one.
        let st = tensor_of(&[], if d.is_key() { DType::U32 } else { d });
        let body = match combine {
            Some(op) => {
                let s = f.fresh();
                format!(
                    "      {s} = \"{op}\"({x}, {u}) : ({st}, {st}) -> {st}\n      \"stablehlo.return\"({s}) : ({st}) -> ()\n"
                )
            }
            None => format!("      \"stablehlo.return\"({u}) : ({st}) -> ()\n"),
        };
        let _ = writeln!(
            self.out,
            "    {r} = \"stablehlo.scatter\"({}, {}, {}) ({{\n    ^bb0({x}: {st}, {u}: {st}):\n{body}    }}) {{indices_are_sorted = {}, scatter_dimension_numbers = #stablehlo.scatter<{}>, unique_indices = {}}} : ({}, {}, {}) -> {out_ty}",
            inputs[0].name,
            idx.name,
            inputs[2].name,
            flag(e, "indices_are_sorted"),
            fields.join(", "),
            flag(e, "unique_indices"),
            inputs[0].ty,
            idx.ty,
            inputs[2].ty,
        );
        Ok(vec![Ssa::new(r, out_ty)])
    }
}

/// The fill value's text for `dense<...>` in dtype `d`: the param, or JAX's default for
/// `None` (NaN, the least signed or greatest unsigned integer, `true`).
fn fill_text(p: Option<&Param>, d: DType) -> String {
    let v = match p {
        Some(Param::Bool(x)) => LitValue::Bool(*x),
        Some(Param::Int(i)) => LitValue::Int(*i),
        Some(Param::Float(x)) => LitValue::Float(*x),
        _ => {
            return match d.kind() {
                DTypeKind::Float => float_literal(f64::NAN, d),
                DTypeKind::Bool => "true".to_owned(),
                DTypeKind::SignedInt => reduction_init(Builtin::ReduceMax, d),
                DTypeKind::UnsignedInt => reduction_init(Builtin::ReduceMin, d),
                // Each key word filled with the greatest u32, as JAX's u32 words are.
                DTypeKind::Key => u32::MAX.to_string(),
            };
        }
    };
    match (v, d.kind()) {
        // A key's words take the fill as u32s (the evaluator's rule).
        (LitValue::Int(i), DTypeKind::Key) => (i as u32).to_string(),
        (LitValue::Float(x), DTypeKind::Key) => (x as u32).to_string(),
        (LitValue::Bool(x), DTypeKind::Float) => float_literal(f64::from(u8::from(x)), d),
        (LitValue::Bool(x), DTypeKind::Bool) => x.to_string(),
        (LitValue::Bool(x), _) => u8::from(x).to_string(),
        // An integer fill wraps to the dtype, as the reference evaluator does.
        (LitValue::Int(i), DTypeKind::SignedInt | DTypeKind::UnsignedInt) => {
            scalar_text(LitValue::Int(wrap_int(d, i)), d)
        }
        // A float fill of an integer dtype truncates and saturates (NaN is 0), as the
        // reference evaluator converts it.
        (LitValue::Float(x), DTypeKind::SignedInt | DTypeKind::UnsignedInt) => match d {
            DType::I8 => (x as i8).to_string(),
            DType::I16 => (x as i16).to_string(),
            DType::I32 => (x as i32).to_string(),
            DType::U8 => (x as u8).to_string(),
            DType::U16 => (x as u16).to_string(),
            DType::U32 => (x as u32).to_string(),
            DType::U64 => (x as u64).to_string(),
            _ => (x as i64).to_string(),
        },
        (v, _) => scalar_text(v, d),
    }
}
