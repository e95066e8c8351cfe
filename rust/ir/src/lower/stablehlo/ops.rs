//! Lowering of the first-order built-ins.

use super::text::{bracket_list, float_literal, i64_array, tensor_of, tensor_type, Ssa};
use super::{FuncState, LowerError, Module};
use crate::aval::AbstractValue;
use crate::dtype::{DType, DTypeKind};
use crate::jaxpr::{Eqn, LitValue, Literal};
use crate::params::{DotDimensionNumbers, Param};
use crate::primitive::{Builtin, ConvGeometry, Family};
use std::fmt::Write as _;

/// A literal as a `stablehlo.constant`.
pub(crate) fn literal_constant(m: &mut Module, f: &mut FuncState<'_>, lit: &Literal) -> Ssa {
    let text = scalar_text(lit.value, lit.dtype);
    m.scalar_constant(f, &text, lit.dtype)
}

/// A scalar value's text inside `dense<...>`.
pub(crate) fn scalar_text(v: LitValue, d: DType) -> String {
    match v {
        LitValue::Bool(b) => b.to_string(),
        LitValue::Int(i) if d == DType::U64 => (i as u64).to_string(),
        LitValue::Int(i) if d.is_float() => float_literal(i as f64, d),
        LitValue::Int(i) if d == DType::Bool => (i != 0).to_string(),
        LitValue::Int(i) => i.to_string(),
        LitValue::Float(x) if d.is_float() => float_literal(x, d),
        LitValue::Float(x) if d == DType::Bool => (x != 0.0).to_string(),
        LitValue::Float(x) => (x as i64).to_string(),
    }
}

/// The one op a unary element-wise built-in lowers to whatever its operand's dtype, for
/// the commonest ones (which the fast path writes too); `None` for the others, which
/// [`Module::lower_eqn`] lowers case by case.
pub(super) fn unary_op_name(b: Builtin) -> Option<&'static str> {
    Some(match b {
        Builtin::Neg => "stablehlo.negate",
        Builtin::Abs => "stablehlo.abs",
        Builtin::Exp => "stablehlo.exponential",
        Builtin::Log => "stablehlo.log",
        Builtin::Log1p => "stablehlo.log_plus_one",
        Builtin::Expm1 => "stablehlo.exponential_minus_one",
        Builtin::Sin => "stablehlo.sine",
        Builtin::Cos => "stablehlo.cosine",
        Builtin::Tan => "stablehlo.tan",
        Builtin::Tanh => "stablehlo.tanh",
        Builtin::Logistic => "stablehlo.logistic",
        Builtin::Sqrt => "stablehlo.sqrt",
        Builtin::Rsqrt => "stablehlo.rsqrt",
        Builtin::Floor => "stablehlo.floor",
        Builtin::Ceil => "stablehlo.ceil",
        Builtin::Not => "stablehlo.not",
        _ => return None,
    })
}

/// The one op a binary element-wise built-in lowers to (after broadcasting its
/// operands) whatever their dtype, for the commonest ones (which the fast path writes
/// too); `None` for the others, which [`Module::lower_eqn`] lowers case by case.
pub(super) fn binary_op_name(b: Builtin) -> Option<&'static str> {
    Some(match b {
        Builtin::Add => "stablehlo.add",
        Builtin::Sub => "stablehlo.subtract",
        Builtin::Mul => "stablehlo.multiply",
        Builtin::Div => "stablehlo.divide",
        Builtin::Rem => "stablehlo.remainder",
        Builtin::Max => "stablehlo.maximum",
        Builtin::Min => "stablehlo.minimum",
        Builtin::And => "stablehlo.and",
        Builtin::Or => "stablehlo.or",
        Builtin::Xor => "stablehlo.xor",
        _ => return None,
    })
}

/// The identity of a reduction, as constant text for dtype `d`.
pub(super) fn reduction_init(b: Builtin, d: DType) -> String {
    let (int_min, int_max): (i128, i128) = match d {
        DType::I8 => (i8::MIN as i128, i8::MAX as i128),
        DType::I16 => (i16::MIN as i128, i16::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        DType::U8 => (0, u8::MAX as i128),
        DType::U16 => (0, u16::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::U64 => (0, u64::MAX as i128),
        _ => (0, 1),
    };
    match (b, d.kind()) {
        (Builtin::ReduceSum, DTypeKind::Bool) => "false".into(),
        (Builtin::ReduceProd, DTypeKind::Bool) => "true".into(),
        (Builtin::ReduceSum, DTypeKind::Float) => float_literal(0.0, d),
        (Builtin::ReduceProd, DTypeKind::Float) => float_literal(1.0, d),
        (Builtin::ReduceSum, _) => "0".into(),
        (Builtin::ReduceProd, _) => "1".into(),
        (Builtin::ReduceMax | Builtin::Argmax, DTypeKind::Float) => {
            float_literal(f64::NEG_INFINITY, d)
        }
        (Builtin::ReduceMin | Builtin::Argmin, DTypeKind::Float) => float_literal(f64::INFINITY, d),
        // The logical reductions: all ones for and, zero for or and xor.
        (Builtin::ReduceAnd, DTypeKind::Bool) => "true".into(),
        (Builtin::ReduceAnd, DTypeKind::SignedInt) => "-1".into(),
        (Builtin::ReduceAnd, _) => int_max.to_string(),
        (Builtin::ReduceOr | Builtin::ReduceXor, DTypeKind::Bool) => "false".into(),
        (Builtin::ReduceOr | Builtin::ReduceXor, _) => "0".into(),
        (Builtin::ReduceMax | Builtin::Argmax, DTypeKind::Bool) => "false".into(),
        (Builtin::ReduceMin | Builtin::Argmin, DTypeKind::Bool) => "true".into(),
        (Builtin::ReduceMax | Builtin::Argmax, _) => int_min.to_string(),
        (_, _) => int_max.to_string(),
    }
}

fn compare_type(d: DType) -> &'static str {
    match d.kind() {
        DTypeKind::Float => "FLOAT",
        DTypeKind::SignedInt => "SIGNED",
        DTypeKind::UnsignedInt | DTypeKind::Bool | DTypeKind::Key => "UNSIGNED",
    }
}

pub(super) fn compare_attrs(direction: &str, d: DType) -> String {
    format!(
        "comparison_direction = #stablehlo<comparison_direction {direction}>, compare_type = #stablehlo<comparison_type {}>",
        compare_type(d)
    )
}

pub(super) fn bad(b: Builtin, param: &'static str) -> LowerError {
    LowerError::BadParam {
        primitive: b.name().to_owned(),
        param,
    }
}

fn ints<'a>(e: &'a Eqn, b: Builtin, name: &'static str) -> Result<&'a [i64], LowerError> {
    match e.params().get(name) {
        Some(Param::Ints(v)) => Ok(v),
        Some(Param::Bools(v)) if v.is_empty() => Ok(&[]),
        _ => Err(bad(b, name)),
    }
}

impl Module {
    /// Broadcasts an operand of an element-wise op to the result's shape `dims`
    /// (binary primitives accept a rank-0 operand, or one of the result's rank whose
    /// dimensions are each the result's or 1; StableHLO wants equal shapes).
    pub(crate) fn broadcast_to(
        &mut self,
        f: &mut FuncState<'_>,
        x: Ssa,
        from: &AbstractValue,
        dims: &[i64],
    ) -> Ssa {
        if from.shape.dims() == dims {
            return x;
        }
        let ty = tensor_of(dims, from.dtype);
        // A scalar maps to no dimension; a rank-equal operand maps dimension i to i
        // (broadcast_in_dim stretches its size-1 dimensions).
        let mapped: Vec<i64> = (0..from.shape.rank() as i64).collect();
        // A key's words map to the result's trailing dimension of 2.
        let mapped = with_key_words(from, &mapped, dims.len() as i64);
        let attrs = format!("broadcast_dimensions = {}", i64_array(&mapped));
        self.op1(f, "stablehlo.broadcast_in_dim", &[&x], &attrs, ty)
    }

    /// Lowers one equation; returns the SSA values of its outputs.
    pub(crate) fn lower_eqn(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
    ) -> Result<Vec<Ssa>, LowerError> {
        let j = f.jaxpr;
        let in_avals: Vec<AbstractValue> = e.inputs().iter().map(|&a| j.atom_aval(a)).collect();
        let out_avals: Vec<AbstractValue> =
            e.outvars().iter().map(|&v| j.var_aval(v).clone()).collect();
        let inputs: Vec<Ssa> = e.inputs().iter().map(|&a| f.atom(self, a)).collect();
        let out_ty = out_avals.first().map(tensor_type).unwrap_or_default();
        let unary = |name: &str| -> String { name.to_owned() };
        let name = match b.family() {
            family if family.is_unary() => {
                let op = match b {
                    Builtin::Sign if in_avals[0].dtype.kind() == DTypeKind::UnsignedInt => {
                        // StableHLO's sign takes signless integers: sign = (x != 0).
                        let d = in_avals[0].dtype;
                        let dims = in_avals[0].shape.dims().to_vec();
                        let zero = self.scalar_constant(f, "0", d);
                        let zero = self.broadcast_to(f, zero, &AbstractValue::scalar(d), &dims);
                        let attrs = compare_attrs("NE", d);
                        let nz = self.op1(
                            f,
                            "stablehlo.compare",
                            &[&inputs[0], &zero],
                            &attrs,
                            tensor_of(&dims, DType::Bool),
                        );
                        return Ok(vec![self.op1(f, "stablehlo.convert", &[&nz], "", out_ty)]);
                    }
                    Builtin::Sign => "stablehlo.sign",
                    Builtin::PopulationCount => "stablehlo.popcnt",
                    Builtin::Clz => "stablehlo.count_leading_zeros",
                    // As JAX 0.10 lowers them: CHLO where it uses CHLO (jaxlib's compiler
                    // expands those ops itself), `exp2` as `exp(x * ln 2)`.
                    Builtin::ErfInv => "chlo.erf_inv",
                    Builtin::Erf => "chlo.erf",
                    Builtin::Erfc => "chlo.erfc",
                    Builtin::Lgamma => "chlo.lgamma",
                    Builtin::Digamma => "chlo.digamma",
                    Builtin::Cbrt => "stablehlo.cbrt",
                    Builtin::Asin => "chlo.asin",
                    Builtin::Acos => "chlo.acos",
                    Builtin::Atan => "chlo.atan",
                    Builtin::Sinh => "chlo.sinh",
                    Builtin::Cosh => "chlo.cosh",
                    Builtin::Asinh => "chlo.asinh",
                    Builtin::Acosh => "chlo.acosh",
                    Builtin::Atanh => "chlo.atanh",
                    Builtin::Exp2 => {
                        let d = in_avals[0].dtype;
                        let dims = in_avals[0].shape.dims().to_vec();
                        let ln2 = self.scalar_constant(f, "0.69314718055994529", d);
                        let ln2 = self.broadcast_to(f, ln2, &AbstractValue::scalar(d), &dims);
                        let scaled = self.op1(
                            f,
                            "stablehlo.multiply",
                            &[&ln2, &inputs[0]],
                            "",
                            out_ty.clone(),
                        );
                        return Ok(vec![self.op1(
                            f,
                            "stablehlo.exponential",
                            &[&scaled],
                            "",
                            out_ty,
                        )]);
                    }
                    Builtin::Square => {
                        let x = &inputs[0];
                        return Ok(vec![self.op1(f, "stablehlo.multiply", &[x, x], "", out_ty)]);
                    }
                    Builtin::Copy | Builtin::StopGradient => return Ok(vec![inputs[0].clone()]),
                    // neg, exp, sin, ...: one op whatever the dtype.
                    _ => unary_op_name(b).ok_or_else(|| LowerError::Unsupported {
                        primitive: b.name().to_owned(),
                    })?,
                };
                unary(op)
            }
            family if family.is_binary() => {
                let op = match b {
                    Builtin::Pow => "stablehlo.power",
                    Builtin::Atan2 => "stablehlo.atan2",
                    // As JAX lowers it (XLA expands it on the operands' bits).
                    Builtin::Nextafter => "chlo.next_after",
                    Builtin::Igamma | Builtin::Igammac | Builtin::IgammaGradA => {
                        let dims = out_avals[0].shape.dims().to_vec();
                        let out = out_avals[0].dtype;
                        return Ok(vec![self.lower_igamma(f, b, &inputs, &in_avals, &dims, out)]);
                    }
                    Builtin::ShiftLeft => "stablehlo.shift_left",
                    Builtin::ShiftRightLogical => "stablehlo.shift_right_logical",
                    Builtin::ShiftRightArithmetic => "stablehlo.shift_right_arithmetic",
                    Builtin::Mulhi => "chlo.mulhi",
                    // add, mul, max, ...: one op whatever the dtype.
                    _ => binary_op_name(b).ok_or_else(|| LowerError::Unsupported {
                        primitive: b.name().to_owned(),
                    })?,
                };
                let dims = out_avals[0].shape.dims().to_vec();
                let mut x = self.broadcast_to(f, inputs[0].clone(), &in_avals[0], &dims);
                let mut y = self.broadcast_to(f, inputs[1].clone(), &in_avals[1], &dims);
                if b == Builtin::Pow && in_avals[1].dtype != in_avals[0].dtype {
                    // An integer exponent: converted to the base's dtype.
                    y = self.op1(
                        f,
                        "stablehlo.convert",
                        &[&y],
                        "",
                        tensor_of(&dims, in_avals[0].dtype),
                    );
                }
                if b == Builtin::Pow && in_avals[0].dtype != out_avals[0].dtype {
                    x = self.op1(f, "stablehlo.convert", &[&x], "", out_ty.clone());
                }
                return Ok(vec![self.op1(f, op, &[&x, &y], "", out_ty)]);
            }
            Family::Comparison => {
                let dir = match b {
                    Builtin::Eq => "EQ",
                    Builtin::Ne => "NE",
                    Builtin::Lt => "LT",
                    Builtin::Le => "LE",
                    Builtin::Gt => "GT",
                    _ => "GE",
                };
                let dims = out_avals[0].shape.dims().to_vec();
                let x = self.broadcast_to(f, inputs[0].clone(), &in_avals[0], &dims);
                let y = self.broadcast_to(f, inputs[1].clone(), &in_avals[1], &dims);
                let attrs = compare_attrs(dir, in_avals[0].dtype);
                if in_avals[0].dtype.is_key() {
                    // Keys (eq, ne): the words compared, then all equal (any differs).
                    let words = tensor_of(&[dims.as_slice(), &[2]].concat(), DType::Bool);
                    let c = self.op1(f, "stablehlo.compare", &[&x, &y], &attrs, words);
                    let (combine, init) = if b == Builtin::Eq {
                        ("stablehlo.and", "true")
                    } else {
                        ("stablehlo.or", "false")
                    };
                    let init = self.scalar_constant(f, init, DType::Bool);
                    let axis = [dims.len() as i64];
                    return Ok(vec![self.reduce(
                        f,
                        &c,
                        &init,
                        &axis,
                        combine,
                        DType::Bool,
                        out_ty,
                    )]);
                }
                return Ok(vec![self.op1(
                    f,
                    "stablehlo.compare",
                    &[&x, &y],
                    &attrs,
                    out_ty,
                )]);
            }
            Family::Special => return self.lower_special(f, b, e, &inputs, &in_avals, &out_avals),
            // Every family is unary, binary, a comparison or special (a test checks it).
            _ => {
                return Err(LowerError::Unsupported {
                    primitive: b.name().to_owned(),
                })
            }
        };
        Ok(vec![self.op1(f, &name, &[&inputs[0]], "", out_ty)])
    }

    fn lower_special(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        out_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let out_ty = out_avals.first().map(tensor_type).unwrap_or_default();
        let one = |r: Ssa| Ok(vec![r]);
        match b {
            Builtin::IntegerPow => {
                let y = match e.params().get("y") {
                    Some(Param::Int(y)) => *y,
                    _ => return Err(bad(b, "y")),
                };
                one(self.integer_pow(f, &inputs[0], &in_avals[0], y))
            }
            Builtin::IsFinite => one(self.op1(f, "stablehlo.is_finite", &[&inputs[0]], "", out_ty)),
            Builtin::Round => {
                let op = match e.params().get("rounding_method") {
                    Some(Param::Int(0)) => "stablehlo.round_nearest_afz",
                    Some(Param::Int(1)) => "stablehlo.round_nearest_even",
                    _ => return Err(bad(b, "rounding_method")),
                };
                one(self.op1(f, op, &[&inputs[0]], "", out_ty))
            }
            Builtin::SelectN => {
                // Keys select whole: the predicate broadcast over the key words too.
                let dims = physical_dims(&out_avals[0]);
                let which_aval = &in_avals[0];
                let which = self.broadcast_to(f, inputs[0].clone(), which_aval, &dims);
                let cases = &inputs[1..];
                if cases.len() == 1 {
                    return one(cases[0].clone());
                }
                let pred_ty = tensor_of(&dims, DType::Bool);
                // Case i wins where which >= i (clamping, as XLA's select_n lowering does).
                let mut acc = cases[0].clone();
                for (i, c) in cases.iter().enumerate().skip(1) {
                    let pred = if which_aval.dtype == DType::Bool {
                        which.clone()
                    } else {
                        let k = self.scalar_constant(f, &i.to_string(), which_aval.dtype);
                        let kb = self.broadcast_to(
                            f,
                            k,
                            &AbstractValue::scalar(which_aval.dtype),
                            &dims,
                        );
                        let attrs = compare_attrs("GE", which_aval.dtype);
                        self.op1(
                            f,
                            "stablehlo.compare",
                            &[&which, &kb],
                            &attrs,
                            pred_ty.clone(),
                        )
                    };
                    acc = self.op1(f, "stablehlo.select", &[&pred, c, &acc], "", out_ty.clone());
                }
                one(acc)
            }
            Builtin::Clamp => one(self.op1(
                f,
                "stablehlo.clamp",
                &[&inputs[0], &inputs[1], &inputs[2]],
                "",
                out_ty,
            )),
            Builtin::BitcastConvertType => {
                one(self.op1(f, "stablehlo.bitcast_convert", &[&inputs[0]], "", out_ty))
            }
            Builtin::Threefry2x32 => {
                let dims = out_avals[0].shape.dims().to_vec();
                Ok(self.threefry2x32(f, inputs, in_avals, &dims))
            }
            Builtin::ConvertElementType => {
                if in_avals[0].dtype == out_avals[0].dtype {
                    return one(inputs[0].clone());
                }
                one(self.op1(f, "stablehlo.convert", &[&inputs[0]], "", out_ty))
            }
            Builtin::ReduceSum | Builtin::ReduceMax | Builtin::ReduceMin | Builtin::ReduceProd => {
                let axes = ints(e, b, "axes")?;
                let d = in_avals[0].dtype;
                let combine = match b {
                    Builtin::ReduceSum if d == DType::Bool => "stablehlo.or",
                    Builtin::ReduceProd if d == DType::Bool => "stablehlo.and",
                    Builtin::ReduceSum => "stablehlo.add",
                    Builtin::ReduceProd => "stablehlo.multiply",
                    Builtin::ReduceMax => "stablehlo.maximum",
                    _ => "stablehlo.minimum",
                };
                let init = self.scalar_constant(f, &reduction_init(b, d), d);
                one(self.reduce(f, &inputs[0], &init, axes, combine, d, out_ty))
            }
            Builtin::ReduceAnd | Builtin::ReduceOr | Builtin::ReduceXor => {
                let axes = ints(e, b, "axes")?;
                let d = in_avals[0].dtype;
                let combine = match b {
                    Builtin::ReduceAnd => "stablehlo.and",
                    Builtin::ReduceOr => "stablehlo.or",
                    _ => "stablehlo.xor",
                };
                let init = self.scalar_constant(f, &reduction_init(b, d), d);
                one(self.reduce(f, &inputs[0], &init, axes, combine, d, out_ty))
            }
            Builtin::ReducePrecision => {
                let bits = |name| match e.params().get(name) {
                    Some(Param::Int(v)) => i32::try_from(*v).map_err(|_| bad(b, name)),
                    _ => Err(bad(b, name)),
                };
                let attrs = format!(
                    "exponent_bits = {} : i32, mantissa_bits = {} : i32",
                    bits("exponent_bits")?,
                    bits("mantissa_bits")?
                );
                one(self.op1(
                    f,
                    "stablehlo.reduce_precision",
                    &[&inputs[0]],
                    &attrs,
                    out_ty,
                ))
            }
            Builtin::Argmax | Builtin::Argmin => {
                let axes = ints(e, b, "axes")?;
                one(self.argminmax(f, b, &inputs[0], &in_avals[0], axes[0], &out_avals[0]))
            }
            Builtin::BroadcastInDim => {
                let dims = ints(e, b, "broadcast_dimensions")?;
                let dims = with_key_words(&out_avals[0], dims, out_avals[0].shape.rank() as i64);
                let attrs = format!("broadcast_dimensions = {}", i64_array(&dims));
                one(self.op1(
                    f,
                    "stablehlo.broadcast_in_dim",
                    &[&inputs[0]],
                    &attrs,
                    out_ty,
                ))
            }
            Builtin::Reshape => {
                let mut x = inputs[0].clone();
                if let Some(Param::Ints(perm)) = e.params().get("dimensions") {
                    let src = in_avals[0].shape.dims();
                    let dims: Vec<i64> = perm.iter().map(|&p| src[p as usize]).collect();
                    let perm = with_key_words(&in_avals[0], perm, src.len() as i64);
                    let attrs = format!("permutation = {}", i64_array(&perm));
                    x = self.op1(
                        f,
                        "stablehlo.transpose",
                        &[&x],
                        &attrs,
                        tensor_of(&dims, in_avals[0].dtype),
                    );
                }
                one(self.op1(f, "stablehlo.reshape", &[&x], "", out_ty))
            }
            Builtin::Squeeze | Builtin::ExpandDims => {
                one(self.op1(f, "stablehlo.reshape", &[&inputs[0]], "", out_ty))
            }
            Builtin::Transpose => {
                let perm = ints(e, b, "permutation")?;
                let perm = with_key_words(&in_avals[0], perm, in_avals[0].shape.rank() as i64);
                let attrs = format!("permutation = {}", i64_array(&perm));
                one(self.op1(f, "stablehlo.transpose", &[&inputs[0]], &attrs, out_ty))
            }
            Builtin::Concatenate => {
                let dim = match e.params().get("dimension") {
                    Some(Param::Int(d)) => *d,
                    _ => return Err(bad(b, "dimension")),
                };
                let refs: Vec<&Ssa> = inputs.iter().collect();
                let attrs = format!("dimension = {dim} : i64");
                one(self.op1(f, "stablehlo.concatenate", &refs, &attrs, out_ty))
            }
            Builtin::Slice => {
                let start = ints(e, b, "start_indices")?;
                let limit = ints(e, b, "limit_indices")?;
                let strides: Vec<i64> = match e.params().get("strides") {
                    Some(Param::Ints(s)) => s.to_vec(),
                    _ => vec![1; start.len()],
                };
                let x = &in_avals[0];
                let attrs = format!(
                    "start_indices = {}, limit_indices = {}, strides = {}",
                    i64_array(&with_key_words(x, start, 0)),
                    i64_array(&with_key_words(x, limit, 2)),
                    i64_array(&with_key_words(x, &strides, 1))
                );
                one(self.op1(f, "stablehlo.slice", &[&inputs[0]], &attrs, out_ty))
            }
            Builtin::Stack => {
                // As JAX: each operand broadcast to a size-1 axis at `axis`, then joined by
                // a tree of concatenates of at most 16 operands each.
                let axis = match e.params().get("axis") {
                    Some(Param::Int(a)) => usize::try_from(*a).map_err(|_| bad(b, "axis"))?,
                    _ => return Err(bad(b, "axis")),
                };
                let x = &in_avals[0];
                let rank = x.shape.rank();
                if axis > rank {
                    return Err(bad(b, "axis"));
                }
                let mut one_dims = x.shape.dims().to_vec();
                one_dims.insert(axis, 1);
                let bdims: Vec<i64> = (0..=rank as i64).filter(|&i| i != axis as i64).collect();
                let attrs = format!("broadcast_dimensions = {}", i64_array(&bdims));
                let mut parts: Vec<(Ssa, i64)> = inputs
                    .iter()
                    .map(|s| {
                        let t = tensor_of(&one_dims, x.dtype);
                        (
                            self.op1(f, "stablehlo.broadcast_in_dim", &[s], &attrs, t),
                            1,
                        )
                    })
                    .collect();
                let cat = format!("dimension = {axis} : i64");
                while parts.len() > 1 {
                    let mut next = Vec::with_capacity(parts.len().div_ceil(16));
                    for chunk in parts.chunks(16) {
                        let size: i64 = chunk.iter().map(|(_, n)| n).sum();
                        let mut dims = one_dims.clone();
                        dims[axis] = size;
                        let refs: Vec<&Ssa> = chunk.iter().map(|(s, _)| s).collect();
                        let t = tensor_of(&dims, x.dtype);
                        next.push((self.op1(f, "stablehlo.concatenate", &refs, &cat, t), size));
                    }
                    parts = next;
                }
                let (out, _) = parts.pop().ok_or_else(|| bad(b, "operands"))?;
                one(out)
            }
            Builtin::Unstack => {
                // As JAX: per result, a slice of size 1 along `axis` and a reshape.
                let axis = match e.params().get("axis") {
                    Some(Param::Int(a)) => usize::try_from(*a).map_err(|_| bad(b, "axis"))?,
                    _ => return Err(bad(b, "axis")),
                };
                let dims = in_avals[0].shape.dims();
                if axis >= dims.len() {
                    return Err(bad(b, "axis"));
                }
                let mut start = vec![0i64; dims.len()];
                let mut limit = dims.to_vec();
                let strides = vec![1i64; dims.len()];
                let mut piece = dims.to_vec();
                piece[axis] = 1;
                let mut outs = Vec::with_capacity(out_avals.len());
                for out in out_avals {
                    limit[axis] = start[axis] + 1;
                    let attrs = format!(
                        "start_indices = {}, limit_indices = {}, strides = {}",
                        i64_array(&start),
                        i64_array(&limit),
                        i64_array(&strides)
                    );
                    let t = tensor_of(&piece, in_avals[0].dtype);
                    let s = self.op1(f, "stablehlo.slice", &[&inputs[0]], &attrs, t);
                    outs.push(self.op1(f, "stablehlo.reshape", &[&s], "", tensor_type(out)));
                    start[axis] = limit[axis];
                }
                Ok(outs)
            }
            Builtin::Tile => {
                // As JAX: reshape to (1, d0, 1, d1, ...), broadcast to (r0, d0, r1, d1,
                // ...), reshape to (r0 * d0, r1 * d1, ...).
                let reps = ints(e, b, "reps")?;
                let x = &in_avals[0];
                let dims = x.shape.dims();
                if reps.len() != dims.len() {
                    return Err(bad(b, "reps"));
                }
                let ones: Vec<i64> = dims.iter().flat_map(|&d| [1, d]).collect();
                let wide: Vec<i64> = reps.iter().zip(dims).flat_map(|(&r, &d)| [r, d]).collect();
                let all: Vec<i64> = (0..wide.len() as i64).collect();
                let r = self.op1(
                    f,
                    "stablehlo.reshape",
                    &[&inputs[0]],
                    "",
                    tensor_of(&ones, x.dtype),
                );
                let attrs = format!("broadcast_dimensions = {}", i64_array(&all));
                let w = self.op1(
                    f,
                    "stablehlo.broadcast_in_dim",
                    &[&r],
                    &attrs,
                    tensor_of(&wide, x.dtype),
                );
                one(self.op1(f, "stablehlo.reshape", &[&w], "", out_ty))
            }
            Builtin::OptimizationBarrier => {
                if inputs.is_empty() {
                    return Ok(vec![]);
                }
                let refs: Vec<&Ssa> = inputs.iter().collect();
                let types: Vec<String> = out_avals.iter().map(tensor_type).collect();
                Ok(self.op(f, "stablehlo.optimization_barrier", &refs, "", &types))
            }
            Builtin::Split => {
                // One stablehlo.slice per piece, as JAX lowers it.
                let axis = match e.params().get("axis") {
                    Some(Param::Int(a)) => usize::try_from(*a).map_err(|_| bad(b, "axis"))?,
                    _ => return Err(bad(b, "axis")),
                };
                let dims = in_avals[0].shape.dims();
                let mut start = vec![0i64; dims.len()];
                let mut limit = dims.to_vec();
                let strides = vec![1i64; dims.len()];
                let mut outs = Vec::with_capacity(out_avals.len());
                for out in out_avals {
                    let size = *out.shape.dims().get(axis).ok_or_else(|| bad(b, "axis"))?;
                    limit[axis] = start[axis] + size;
                    let attrs = format!(
                        "start_indices = {}, limit_indices = {}, strides = {}",
                        i64_array(&start),
                        i64_array(&limit),
                        i64_array(&strides)
                    );
                    outs.push(self.op1(
                        f,
                        "stablehlo.slice",
                        &[&inputs[0]],
                        &attrs,
                        tensor_type(out),
                    ));
                    start[axis] = limit[axis];
                }
                Ok(outs)
            }
            Builtin::DynamicSlice => {
                let sizes = ints(e, b, "slice_sizes")?;
                let sizes = with_key_words(&in_avals[0], sizes, 2);
                let zero = self.key_word_index(f, &in_avals[0], &in_avals[1..]);
                let mut refs: Vec<&Ssa> = inputs.iter().collect();
                refs.extend(zero.as_ref());
                let attrs = format!("slice_sizes = {}", i64_array(&sizes));
                one(self.op1(f, "stablehlo.dynamic_slice", &refs, &attrs, out_ty))
            }
            Builtin::DynamicUpdateSlice => {
                let zero = self.key_word_index(f, &in_avals[0], &in_avals[2..]);
                let mut refs: Vec<&Ssa> = inputs.iter().collect();
                refs.extend(zero.as_ref());
                one(self.op1(f, "stablehlo.dynamic_update_slice", &refs, "", out_ty))
            }
            Builtin::DotGeneral => {
                let dn: &DotDimensionNumbers = match e.params().get("dimension_numbers") {
                    Some(Param::DotDims(d)) => d,
                    _ => return Err(bad(b, "dimension_numbers")),
                };
                let od = out_avals[0].dtype;
                let mut l = inputs[0].clone();
                let mut r = inputs[1].clone();
                if in_avals[0].dtype != od {
                    l = self.op1(
                        f,
                        "stablehlo.convert",
                        &[&l],
                        "",
                        tensor_of(in_avals[0].shape.dims(), od),
                    );
                }
                if in_avals[1].dtype != od {
                    r = self.op1(
                        f,
                        "stablehlo.convert",
                        &[&r],
                        "",
                        tensor_of(in_avals[1].shape.dims(), od),
                    );
                }
                let attrs = format!(
                    "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {}, rhs_batching_dimensions = {}, lhs_contracting_dimensions = {}, rhs_contracting_dimensions = {}>",
                    bracket_list(&dn.lhs_batch),
                    bracket_list(&dn.rhs_batch),
                    bracket_list(&dn.lhs_contracting),
                    bracket_list(&dn.rhs_contracting)
                );
                one(self.op1(f, "stablehlo.dot_general", &[&l, &r], &attrs, out_ty))
            }
            Builtin::ConvGeneralDilated => {
                let g = ConvGeometry::from_params(e.params())
                    .map_err(|_| bad(b, "dimension_numbers"))?;
                let attrs = conv_attrs(&g, e.params().get("precision"));
                let refs = [&inputs[0], &inputs[1]];
                one(self.op1(f, "stablehlo.convolution", &refs, &attrs, out_ty))
            }
            Builtin::Iota => {
                let dim = match e.params().get("dimension") {
                    Some(Param::Int(d)) => *d,
                    _ => return Err(bad(b, "dimension")),
                };
                let attrs = format!("iota_dimension = {dim} : i64");
                one(self.op1(f, "stablehlo.iota", &[], &attrs, out_ty))
            }
            Builtin::Gather => self.lower_gather(f, e, inputs, in_avals, &out_avals[0]),
            Builtin::RandomSeed
            | Builtin::RandomWrap
            | Builtin::RandomUnwrap
            | Builtin::RandomBits
            | Builtin::RandomSplit
            | Builtin::RandomFoldIn
            | Builtin::RandomClone => self.lower_random(f, b, e, inputs, in_avals, &out_avals[0]),
            Builtin::Scatter
            | Builtin::ScatterAdd
            | Builtin::ScatterSub
            | Builtin::ScatterMul
            | Builtin::ScatterMin
            | Builtin::ScatterMax => self.lower_scatter(f, b, e, inputs, in_avals),
            // Operands of one type: a plain add, no broadcasting.
            Builtin::AddAny => {
                one(self.op1(f, "stablehlo.add", &[&inputs[0], &inputs[1]], "", out_ty))
            }
            Builtin::ShardingConstraint => {
                let (mesh, symbol) = self.eqn_mesh(e, b)?;
                let Some(Param::Spec(spec)) = e.params().get("spec") else {
                    return Err(bad(b, "spec"));
                };
                let sh = self.sdy_sharding(&symbol, mesh, spec, in_avals[0].shape.rank(), b)?;
                let r = f.fresh();
                let _ = writeln!(
                    self.out,
                    "    {r} = sdy.sharding_constraint {} {sh} : {out_ty}",
                    inputs[0].name
                );
                one(Ssa::new(r, out_ty))
            }
            Builtin::Pad => {
                let config: &[(i64, i64, i64)] = match e.params().get("padding_config") {
                    Some(Param::Padding(c)) => c,
                    _ => return Err(bad(b, "padding_config")),
                };
                let part =
                    |k: usize| -> Vec<i64> { config.iter().map(|t| [t.0, t.1, t.2][k]).collect() };
                let attrs = format!(
                    "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
                    i64_array(&part(0)),
                    i64_array(&part(1)),
                    i64_array(&part(2))
                );
                one(self.op1(
                    f,
                    "stablehlo.pad",
                    &[&inputs[0], &inputs[1]],
                    &attrs,
                    out_ty,
                ))
            }
            Builtin::ReduceWindowSum
            | Builtin::ReduceWindowMax
            | Builtin::ReduceWindowMin
            | Builtin::ReduceWindow
            | Builtin::SelectAndGatherAdd
            | Builtin::SelectAndScatterAdd => {
                self.lower_windowed(f, b, e, inputs, in_avals, out_avals)
            }
            Builtin::Rev => {
                let dims = ints(e, b, "dimensions")?;
                let attrs = format!("dimensions = {}", i64_array(dims));
                one(self.op1(f, "stablehlo.reverse", &[&inputs[0]], &attrs, out_ty))
            }
            Builtin::Sort => {
                let (Some(Param::Int(dim)), Some(Param::Bool(stable)), Some(Param::Int(keys))) = (
                    e.params().get("dimension"),
                    e.params().get("is_stable"),
                    e.params().get("num_keys"),
                ) else {
                    return Err(bad(b, "dimension"));
                };
                let keys = usize::try_from(*keys).map_err(|_| bad(b, "num_keys"))?;
                Ok(self.sort(f, inputs, in_avals, *dim, *stable, keys))
            }
            Builtin::TopK => {
                let (Some(Param::Int(axis)), Some(Param::Int(k))) =
                    (e.params().get("axis"), e.params().get("k"))
                else {
                    return Err(bad(b, "k"));
                };
                let axis = usize::try_from(*axis).map_err(|_| bad(b, "axis"))?;
                Ok(self.top_k(f, &inputs[0], &in_avals[0], axis, *k))
            }
            Builtin::Cholesky => self.lower_cholesky(f, &inputs[0], &in_avals[0]),
            Builtin::TriangularSolve => {
                let flag = |name: &str| matches!(e.params().get(name), Some(Param::Bool(true)));
                let flags = [
                    flag("left_side"),
                    flag("lower"),
                    flag("transpose_a"),
                    flag("conjugate_a"),
                    flag("unit_diagonal"),
                ];
                self.lower_triangular_solve(
                    f,
                    &inputs[0],
                    &inputs[1],
                    [&in_avals[0], &in_avals[1]],
                    flags,
                )
            }
            Builtin::Lu => self.lower_lu(f, &inputs[0], &in_avals[0], out_avals),
            Builtin::Eigh => {
                let lower = matches!(e.params().get("lower"), Some(Param::Bool(true)));
                self.lower_eigh(f, &inputs[0], &in_avals[0], lower)
            }
            Builtin::Svd => {
                let flag = |k: &str| matches!(e.params().get(k), Some(Param::Bool(true)));
                let (full, uv) = (flag("full_matrices"), flag("compute_uv"));
                self.lower_svd(f, &inputs[0], &in_avals[0], full, uv)
            }
            Builtin::Qr => {
                let flag = |k: &str| matches!(e.params().get(k), Some(Param::Bool(true)));
                let (full, pivoting) = (flag("full_matrices"), flag("pivoting"));
                self.lower_qr(f, &inputs[0], &in_avals[0], full, pivoting)
            }
            Builtin::Geqp3 => {
                self.lower_geqp3(f, &inputs[0], &inputs[1], &in_avals[0], &in_avals[1])
            }
            Builtin::Geqrf => self.lower_geqrf(f, &inputs[0], &in_avals[0]),
            Builtin::HouseholderProduct => self.lower_householder_product(
                f,
                &inputs[0],
                &inputs[1],
                &in_avals[0],
                &in_avals[1],
            ),
            Builtin::Cumsum
            | Builtin::Cumprod
            | Builtin::Cummax
            | Builtin::Cummin
            | Builtin::Cumlogsumexp => {
                let (Some(Param::Int(axis)), Some(Param::Bool(reverse))) =
                    (e.params().get("axis"), e.params().get("reverse"))
                else {
                    return Err(bad(b, "axis"));
                };
                let axis = usize::try_from(*axis).map_err(|_| bad(b, "axis"))?;
                one(self.cumulative(f, b, &inputs[0], &in_avals[0], axis, *reverse))
            }
            Builtin::Jit | Builtin::CustomJvpCall | Builtin::CustomVjpCall | Builtin::Remat => {
                self.lower_call(f, b, e, inputs, out_avals)
            }
            Builtin::DebugCallback
            | Builtin::PureCallback
            | Builtin::IoCallback
            | Builtin::DebugPrint => {
                let types: Vec<String> = out_avals.iter().map(tensor_type).collect();
                self.lower_callback(f, b, e, inputs, &types)
            }
            Builtin::Cond => self.lower_cond(f, e, inputs, in_avals, out_avals),
            Builtin::While => self.lower_while(f, e, inputs, in_avals),
            Builtin::Scan => self.lower_scan(f, e, inputs, in_avals, out_avals),
            Builtin::ShardMap => self.lower_shard_map(f, e, inputs, in_avals, out_avals),
            Builtin::Psum
            | Builtin::Pmax
            | Builtin::Pmin
            | Builtin::Pvary
            | Builtin::AllGather
            | Builtin::ReduceScatter
            | Builtin::Ppermute
            | Builtin::AllToAll
            | Builtin::AxisIndex => self.lower_collective(f, b, e, inputs, in_avals, out_avals),
            _ => Err(LowerError::Unsupported {
                primitive: b.name().to_owned(),
            }),
        }
    }

    /// `x ** y` by square-and-multiply (`1 / x ** -y` for negative `y`).
    fn integer_pow(&mut self, f: &mut FuncState<'_>, x: &Ssa, aval: &AbstractValue, y: i64) -> Ssa {
        let ty = tensor_type(aval);
        let dims = aval.shape.dims().to_vec();
        let one_text = if aval.dtype.is_float() {
            float_literal(1.0, aval.dtype)
        } else {
            "1".to_owned()
        };
        let mut n = y.unsigned_abs();
        let mut result: Option<Ssa> = None;
        let mut base = x.clone();
        while n > 0 {
            if n & 1 == 1 {
                result = Some(match result {
                    None => base.clone(),
                    Some(r) => self.op1(f, "stablehlo.multiply", &[&r, &base], "", ty.clone()),
                });
            }
            n >>= 1;
            if n > 0 {
                base = self.op1(f, "stablehlo.multiply", &[&base, &base], "", ty.clone());
            }
        }
        let result = match result {
            Some(r) => r,
            None => {
                let c = self.scalar_constant(f, &one_text, aval.dtype);
                self.broadcast_to(f, c, &AbstractValue::scalar(aval.dtype), &dims)
            }
        };
        if y < 0 {
            let c = self.scalar_constant(f, &one_text, aval.dtype);
            let c = self.broadcast_to(f, c, &AbstractValue::scalar(aval.dtype), &dims);
            return self.op1(f, "stablehlo.divide", &[&c, &result], "", ty);
        }
        result
    }

    /// A one-operand `stablehlo.reduce` with a combining op in its region.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reduce(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        init: &Ssa,
        axes: &[i64],
        combine: &str,
        d: DType,
        out_ty: String,
    ) -> Ssa {
        let r = f.fresh();
        let (a, c) = (f.fresh(), f.fresh());
        let s = f.fresh();
        let st = tensor_of(&[], d);
        let out = &mut self.out;
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "    {r} = \"stablehlo.reduce\"({}, {}) ({{\n    ^bb0({a}: {st}, {c}: {st}):\n      {s} = \"{combine}\"({a}, {c}) : ({st}, {st}) -> {st}\n      \"stablehlo.return\"({s}) : ({st}) -> ()\n    }}) {{dimensions = {}}} : ({}, {}) -> {out_ty}",
            x.name,
            init.name,
            i64_array(axes),
            x.ty,
            init.ty
        );
        Ssa::new(r, out_ty)
    }

    /// argmax/argmin: a two-operand reduce over (values, indices) that keeps the first
    /// index of the extreme value, NaN counting as the extreme (as JAX's lowering).
    fn argminmax(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        x: &Ssa,
        aval: &AbstractValue,
        axis: i64,
        out: &AbstractValue,
    ) -> Ssa {
        let d = aval.dtype;
        let idx_d = out.dtype;
        let idx_ty = tensor_of(aval.shape.dims(), idx_d);
        let attrs = format!("iota_dimension = {axis} : i64");
        let iota = self.op1(f, "stablehlo.iota", &[], &attrs, idx_ty.clone());
        let init_v = self.scalar_constant(f, &reduction_init(b, d), d);
        let init_i = self.scalar_constant(f, "0", idx_d);
        let vt = tensor_of(&[], d);
        let it = tensor_of(&[], idx_d);
        let bt = tensor_of(&[], DType::Bool);
        let r = f.fresh();
        let (av, ai, bv, bi) = (f.fresh(), f.fresh(), f.fresh(), f.fresh());
        let dir = if b == Builtin::Argmax { "GT" } else { "LT" };
        let cmp_v = compare_attrs(dir, d);
        let ne_v = compare_attrs("NE", d);
        let eq_v = compare_attrs("EQ", d);
        let lt_i = compare_attrs("LT", idx_d);
        let t: Vec<String> = (0..8).map(|_| f.fresh()).collect();
        let out_ty = tensor_type(out);
        let val_out_ty = tensor_of(out.shape.dims(), d);
        use std::fmt::Write as _;
        let _ = write!(
            self.out,
            "    {r}:2 = \"stablehlo.reduce\"({}, {}, {}, {}) ({{\n    ^bb0({av}: {vt}, {ai}: {it}, {bv}: {vt}, {bi}: {it}):\n\
             \x20     {t0} = \"stablehlo.compare\"({av}, {bv}) {{{cmp_v}}} : ({vt}, {vt}) -> {bt}\n\
             \x20     {t1} = \"stablehlo.compare\"({av}, {av}) {{{ne_v}}} : ({vt}, {vt}) -> {bt}\n\
             \x20     {t2} = \"stablehlo.or\"({t0}, {t1}) : ({bt}, {bt}) -> {bt}\n\
             \x20     {t3} = \"stablehlo.compare\"({av}, {bv}) {{{eq_v}}} : ({vt}, {vt}) -> {bt}\n\
             \x20     {t4} = \"stablehlo.compare\"({ai}, {bi}) {{{lt_i}}} : ({it}, {it}) -> {bt}\n\
             \x20     {t5} = \"stablehlo.and\"({t3}, {t4}) : ({bt}, {bt}) -> {bt}\n\
             \x20     {t6} = \"stablehlo.or\"({t2}, {t5}) : ({bt}, {bt}) -> {bt}\n\
             \x20     {t7} = \"stablehlo.select\"({t2}, {av}, {bv}) : ({bt}, {vt}, {vt}) -> {vt}\n\
             \x20     {t8} = \"stablehlo.select\"({t6}, {ai}, {bi}) : ({bt}, {it}, {it}) -> {it}\n\
             \x20     \"stablehlo.return\"({t7}, {t8}) : ({vt}, {it}) -> ()\n\
             \x20   }}) {{dimensions = {}}} : ({}, {}, {}, {}) -> ({val_out_ty}, {out_ty})\n",
            x.name,
            iota.name,
            init_v.name,
            init_i.name,
            i64_array(&[axis]),
            x.ty,
            idx_ty,
            vt,
            it,
            t0 = t[0],
            t1 = t[1],
            t2 = t[2],
            t3 = t[3],
            t4 = t[4],
            t5 = t[5],
            t6 = t[6],
            t7 = t[7],
            t8 = f.fresh(),
        );
        Ssa::new(format!("{r}#1"), out_ty)
    }
}

/// `stablehlo.convolution`'s attributes as JAX writes them: the dimension numbers
/// (`[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`: each operand dimension named batch,
/// feature or its spatial position), the window (strides, padding, both dilations, no
/// reversal), the group counts and a precision per operand.
fn conv_attrs(g: &ConvGeometry<'_>, precision: Option<&Param>) -> String {
    fn layout(spec: &[i64], first: &str, second: &str) -> String {
        let mut names = vec![String::new(); spec.len()];
        for (i, &d) in spec.iter().enumerate() {
            if let Some(slot) = usize::try_from(d).ok().and_then(|d| names.get_mut(d)) {
                *slot = match i {
                    0 => first.to_owned(),
                    1 => second.to_owned(),
                    _ => (i - 2).to_string(),
                };
            }
        }
        format!("[{}]", names.join(", "))
    }
    let n = g.spatial();
    let padding = if n == 0 {
        "dense<> : tensor<0x2xi64>".to_owned()
    } else {
        let rows: Vec<String> = g
            .padding
            .iter()
            .map(|(lo, hi)| format!("[{lo}, {hi}]"))
            .collect();
        format!("dense<[{}]> : tensor<{n}x2xi64>", rows.join(", "))
    };
    let reversal = if n == 0 {
        "array<i1>".to_owned()
    } else {
        format!("array<i1: {}>", vec!["false"; n].join(", "))
    };
    // JAX's `Precision` per operand: `None` is DEFAULT for both; a printed pair such as
    // `(Precision.HIGHEST, Precision.DEFAULT)` names each operand's.
    let mut levels: Vec<&str> = Vec::new();
    if let Some(Param::Str(s)) = precision {
        for part in s.split(|c: char| !c.is_ascii_alphanumeric() && c != '_') {
            match part.to_ascii_uppercase().as_str() {
                "HIGHEST" => levels.push("HIGHEST"),
                "HIGH" | "BF16_BF16_F32_X3" => levels.push("HIGH"),
                "DEFAULT" | "FASTEST" => levels.push("DEFAULT"),
                _ => {}
            }
        }
    }
    let (pl, pr) = match levels.as_slice() {
        [a, b, ..] => (*a, *b),
        [a] => (*a, *a),
        [] => ("DEFAULT", "DEFAULT"),
    };
    format!(
        "batch_group_count = {} : i64, dimension_numbers = #stablehlo.conv<{}x{}->{}>, \
         feature_group_count = {} : i64, lhs_dilation = {}, padding = {padding}, \
         precision_config = [#stablehlo<precision {pl}>, #stablehlo<precision {pr}>], \
         rhs_dilation = {}, window_reversal = {reversal}, window_strides = {}",
        g.batch_group_count,
        layout(&g.dn.lhs_spec, "b", "f"),
        layout(&g.dn.rhs_spec, "o", "i"),
        layout(&g.dn.out_spec, "b", "f"),
        g.feature_group_count,
        i64_array(g.lhs_dilation),
        i64_array(g.rhs_dilation),
        i64_array(g.window_strides),
    )
}

/// The dimensions of a value as the lowered module holds it: a key array's with the
/// trailing dimension of its two words.
pub(super) fn physical_dims(a: &AbstractValue) -> Vec<i64> {
    let mut dims = a.shape.dims().to_vec();
    if a.dtype.is_key() {
        dims.push(2);
    }
    dims
}

/// An attribute list of one entry per dimension of `a`, with `word` appended for the
/// key words' trailing dimension when `a` is a key array.
pub(super) fn with_key_words(a: &AbstractValue, v: &[i64], word: i64) -> Vec<i64> {
    let mut out = v.to_vec();
    if a.dtype.is_key() {
        out.push(word);
    }
    out
}

impl Module {
    /// For a key operand of a dynamic slice or update: the start index of the key words'
    /// dimension (a zero of the other indices' dtype, `i32` if there are none).
    pub(super) fn key_word_index(
        &mut self,
        f: &mut FuncState<'_>,
        operand: &AbstractValue,
        indices: &[AbstractValue],
    ) -> Option<Ssa> {
        if !operand.dtype.is_key() {
            return None;
        }
        let d = indices.first().map_or(DType::I32, |i| i.dtype);
        Some(self.scalar_constant(f, "0", d))
    }
}
