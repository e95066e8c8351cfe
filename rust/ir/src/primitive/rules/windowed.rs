//! Shape rules of the windowed reductions (`reduce_window_sum`, `reduce_window_max`,
//! `reduce_window_min`, the generic `reduce_window`) and of the primitives of their
//! derivatives (`select_and_gather_add`, `select_and_scatter_add`), as JAX 0.10.2's.

use super::{arity, bad, jaxpr, operands, shape, types_list, Rule, RuleError};
use crate::aval::{AbstractValue, ShapeError};
use crate::dtype::DType;
use crate::params::{Param, Params};
use crate::primitive::Builtin;

/// The window params of an equation, checked against the operand's rank: every list
/// has one entry per dimension, window sizes and strides are positive, dilations are
/// positive (all 1 for `select_and_scatter_add`, which has none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    /// `window_dimensions`.
    pub dims: Vec<i64>,
    /// `window_strides`.
    pub strides: Vec<i64>,
    /// `padding`: `(low, high)` per dimension (either may be negative).
    pub padding: Vec<(i64, i64)>,
    /// `base_dilation`.
    pub base_dilation: Vec<i64>,
    /// `window_dilation`.
    pub window_dilation: Vec<i64>,
}

fn list<'a>(params: &'a Params, name: &'static str) -> Result<&'a [i64], RuleError> {
    match params.get(name) {
        Some(Param::Ints(v)) => Ok(v),
        Some(Param::Bools(v)) if v.is_empty() => Ok(&[]),
        _ => Err(RuleError::MissingParam { name }),
    }
}

fn tuple(v: &[i64]) -> String {
    let parts: Vec<String> = v.iter().map(i64::to_string).collect();
    if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    }
}

/// `1 + dilation * (d - 1)` for `d > 0`, else 0 (JAX's `dilate_dim`), exact in i128.
pub(crate) fn dilate(d: i128, dilation: i128) -> i128 {
    if d <= 0 {
        0
    } else {
        1 + dilation * (d - 1)
    }
}

impl Window {
    /// Reads and checks the window params of `prim` for an operand of rank `rank`.
    pub(crate) fn from_params(
        prim: Builtin,
        params: &Params,
        rank: usize,
    ) -> Result<Window, RuleError> {
        let name = prim.name();
        let dims = list(params, "window_dimensions")?;
        let strides = list(params, "window_strides")?;
        let padding: Vec<(i64, i64)> = match params.get("padding") {
            Some(Param::Pairs(p)) => p.to_vec(),
            _ => return Err(RuleError::MissingParam { name: "padding" }),
        };
        let has_dilation = prim != Builtin::SelectAndScatterAdd;
        let (base, wdil) = if has_dilation {
            (
                list(params, "base_dilation")?.to_vec(),
                list(params, "window_dilation")?.to_vec(),
            )
        } else {
            (vec![1; dims.len()], vec![1; dims.len()])
        };
        if dims.len() != rank {
            return Err(bad(
                "window_dimensions",
                format!(
                    "{name} got the wrong number of window_dimensions for the operand: \
                     {} for rank {rank}",
                    tuple(dims)
                ),
            ));
        }
        let lists: [(&str, &[i64]); 3] = [
            ("window_strides", strides),
            ("base_dilation", &base),
            ("window_dilation", &wdil),
        ];
        for (pname, v) in lists {
            if v.len() != rank {
                return Err(bad(
                    pname,
                    format!(
                        "{name} got inconsistent {pname} and window_dimensions: got \
                         {pname} {} and window_dimensions {}",
                        tuple(v),
                        tuple(dims)
                    ),
                ));
            }
        }
        if padding.len() != rank {
            return Err(bad(
                "padding",
                format!(
                    "{name} got {} padding pairs for an operand of rank {rank}",
                    padding.len()
                ),
            ));
        }
        let positive: [(&str, &[i64]); 4] = [
            ("window_dimensions", dims),
            ("window_strides", strides),
            ("base_dilation", &base),
            ("window_dilation", &wdil),
        ];
        for (pname, v) in positive {
            if v.iter().any(|&x| x < 1) {
                return Err(bad(
                    pname,
                    format!(
                        "{name} {pname} must have every element be strictly positive, got {}",
                        tuple(v)
                    ),
                ));
            }
        }
        Ok(Window {
            dims: dims.to_vec(),
            strides: strides.to_vec(),
            padding,
            base_dilation: base,
            window_dilation: wdil,
        })
    }

    /// The window's element count (saturating).
    pub(crate) fn size(&self) -> u64 {
        self.dims
            .iter()
            .fold(1u64, |acc, &d| acc.saturating_mul(d.max(0) as u64))
    }

    /// The output dimensions for an operand of dimensions `in_dims`: the dilated and
    /// padded operand's size, less the dilated window, over the stride, plus one (0 if
    /// the window does not fit). Exact: overflow is an error.
    pub(crate) fn out_dims(&self, in_dims: &[i64]) -> Result<Vec<i64>, RuleError> {
        let mut out = Vec::with_capacity(in_dims.len());
        for (a, &d) in in_dims.iter().enumerate() {
            let (lo, hi) = self.padding[a];
            // |values| < 2^63, so every product below stays under 2^127.
            let padded = dilate(d as i128, self.base_dilation[a] as i128) + lo as i128 + hi as i128;
            let window = dilate(self.dims[a] as i128, self.window_dilation[a] as i128);
            let n = if padded < window {
                0
            } else {
                (padded - window) / self.strides[a] as i128 + 1
            };
            out.push(i64::try_from(n).map_err(|_| RuleError::Shape(ShapeError::Overflow))?);
        }
        Ok(out)
    }
}

/// The comparison a `select_prim` param names: `ge` or `le`.
pub(crate) fn select_comparison(params: &Params) -> Result<Builtin, RuleError> {
    match params.get("select_prim") {
        Some(Param::Str(s)) if &**s == "ge" => Ok(Builtin::Ge),
        Some(Param::Str(s)) if &**s == "le" => Ok(Builtin::Le),
        Some(Param::Str(s)) => Err(bad(
            "select_prim",
            format!("must be ge or le (a max or a min), got {s}"),
        )),
        _ => Err(RuleError::MissingParam {
            name: "select_prim",
        }),
    }
}

/// `reduce_window_sum` (numbers), `reduce_window_max` and `reduce_window_min` (any
/// dtype): the operand's dtype and weak type, the windowed shape.
pub(super) fn reduce_window_monoid(
    prim: Builtin,
    inputs: &[AbstractValue],
    params: &Params,
) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    if prim == Builtin::ReduceWindowSum && x.dtype == DType::Bool {
        return Err(RuleError::DType {
            operand: 0,
            got: x.dtype,
            expected: "a number dtype".into(),
        });
    }
    let w = Window::from_params(prim, params, x.shape.rank())?;
    let dims = w.out_dims(x.shape.dims())?;
    Ok(vec![
        AbstractValue::new(shape(&dims)?, x.dtype).with_weak_type(x.weak_type)
    ])
}

/// `reduce_window`: operands of one shape, then one scalar init value per operand of
/// its dtype; `jaxpr` maps (accumulators, elements) to accumulators, all scalars of the
/// operands' dtypes; `consts` is empty. Out: the operands' dtypes, windowed shape.
pub(super) fn reduce_window(inputs: &[AbstractValue], params: &Params) -> Rule {
    if inputs.is_empty() || inputs.len() % 2 != 0 {
        return Err(RuleError::Arity {
            expected: "an even number (at least 2) of".into(),
            got: inputs.len(),
        });
    }
    if let Some(Param::Ints(c)) = params.get("consts") {
        if !c.is_empty() {
            return Err(bad(
                "consts",
                "must be empty (the reducer closes over nothing)",
            ));
        }
    }
    let n = inputs.len() / 2;
    let (ops, inits) = inputs.split_at(n);
    if ops.iter().zip(inits).any(|(o, i)| o.dtype != i.dtype) {
        let od: Vec<String> = ops.iter().map(|a| a.dtype.to_string()).collect();
        let id: Vec<String> = inits.iter().map(|a| a.dtype.to_string()).collect();
        return Err(operands(format!(
            "reduce_window got inconsistent dtypes for operands and init_values: got \
             operand dtypes [{}] and init_value dtypes [{}]",
            od.join(", "),
            id.join(", ")
        )));
    }
    if let Some(i) = inits.iter().find(|a| a.shape.rank() != 0) {
        return Err(operands(format!(
            "reduce_window expected init_values to be scalars but got {i}"
        )));
    }
    if let Some(o) = ops.iter().find(|o| o.shape != ops[0].shape) {
        return Err(operands(format!(
            "reduce_window operands must have one shape, got {} and {}",
            ops[0].shape, o.shape
        )));
    }
    let j = jaxpr(params, "jaxpr")?;
    let scalars: Vec<AbstractValue> = ops.iter().map(|o| AbstractValue::scalar(o.dtype)).collect();
    let want_in: Vec<AbstractValue> = scalars.iter().chain(&scalars).cloned().collect();
    let fits = |got: &[AbstractValue], want: &[AbstractValue]| {
        got.len() == want.len()
            && got
                .iter()
                .zip(want)
                .all(|(g, w)| g.shape == w.shape && g.dtype == w.dtype)
    };
    let (ins, outs) = (j.in_avals(), j.out_avals());
    if !fits(&ins, &want_in) || !fits(&outs, &scalars) {
        return Err(RuleError::SubJaxpr {
            reason: format!(
                "reduce_window's jaxpr must map {} to {}; it maps {} to {}",
                types_list(&want_in),
                types_list(&scalars),
                types_list(&ins),
                types_list(&outs)
            ),
        });
    }
    let w = Window::from_params(Builtin::ReduceWindow, params, ops[0].shape.rank())?;
    let dims = shape(&w.out_dims(ops[0].shape.dims())?)?;
    Ok(ops
        .iter()
        .map(|o| AbstractValue::new(dims.clone(), o.dtype))
        .collect())
}

/// `select_and_gather_add(tangents, operand)`: two floats of one type; the tangent of
/// each window's max (`ge`) or min (`le`) element, windowed shape.
pub(super) fn select_and_gather_add(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 2)?;
    let (t, x) = (&inputs[0], &inputs[1]);
    if t.shape != x.shape {
        return Err(operands(format!(
            "select_and_gather_add tangents and operand shapes must match, got {} and {}",
            t.shape, x.shape
        )));
    }
    if !x.dtype.is_float() {
        return Err(RuleError::DType {
            operand: 1,
            got: x.dtype,
            expected: "a float dtype".into(),
        });
    }
    if t.dtype != x.dtype {
        return Err(operands(format!(
            "select_and_gather_add tangents and operand dtypes must match, got {} and {}",
            t.dtype, x.dtype
        )));
    }
    select_comparison(params)?;
    let w = Window::from_params(Builtin::SelectAndGatherAdd, params, x.shape.rank())?;
    let dims = w.out_dims(x.shape.dims())?;
    Ok(vec![
        AbstractValue::new(shape(&dims)?, t.dtype).with_weak_type(t.weak_type && x.weak_type)
    ])
}

/// `select_and_scatter_add(source, operand)`: each source element added where its
/// window of the operand has its max (`ge`) or min (`le`); the source is the windowed
/// shape of the operand; out: the operand's shape, the source's dtype.
pub(super) fn select_and_scatter_add(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 2)?;
    let (s, x) = (&inputs[0], &inputs[1]);
    if s.dtype != x.dtype {
        return Err(operands(format!(
            "select_and_scatter_add source and operand dtypes must match, got {} and {}",
            s.dtype, x.dtype
        )));
    }
    select_comparison(params)?;
    let w = Window::from_params(Builtin::SelectAndScatterAdd, params, x.shape.rank())?;
    // JAX pads the operand and slices the result back: a negative padding has no slice.
    if w.padding.iter().any(|&(lo, hi)| lo < 0 || hi < 0) {
        return Err(bad(
            "padding",
            "select_and_scatter_add needs nonnegative padding",
        ));
    }
    let dims = w.out_dims(x.shape.dims())?;
    if s.shape.dims() != dims.as_slice() {
        return Err(operands(format!(
            "source {s} must have the operand's windowed type {}",
            AbstractValue::new(shape(&dims)?, s.dtype)
        )));
    }
    Ok(vec![
        AbstractValue::new(x.shape.clone(), s.dtype).with_weak_type(s.weak_type && x.weak_type)
    ])
}
