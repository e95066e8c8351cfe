//! Random jaxprs linear in some of their inputs, for the transpose pass.
//!
//! A chain of linear steps on `f32` values: `neg`, `copy`, products and quotients by
//! non-linear inputs (with implicit broadcasting of scalars), sums and differences of
//! linear values (fan-out), `reduce_sum`, `broadcast_in_dim`, `transpose`, `reshape`,
//! `expand_dims` and `squeeze`, conversions through `f64`, `select_n` on a non-linear
//! predicate, `dot_general` with a non-linear operand, `rev`, `concatenate`, `slice`,
//! `pad` with a linear padding value, `dynamic_slice` and `dynamic_update_slice` at
//! non-linear indices, `gather`, `scatter-add`, `conv_general_dilated` with a non-linear
//! kernel or lhs (feature or batch groups), and linear steps inside `jit`, `remat2`
//! and `cond` (on a non-linear index).

use crate::aval::{AbstractValue, Shape};
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::generate::remat_params;
use crate::jaxpr::{Atom, ClosedJaxpr, Jaxpr, LitValue, Literal, VarId};
use crate::params::{
    ConvDimensionNumbers, DotDimensionNumbers, GatherDimensionNumbers, GatherScatterMode, Param,
    Params, ScatterDimensionNumbers,
};
use crate::primitive::Builtin;
use arbitrary::{Result, Unstructured};
use std::sync::Arc;

/// A jaxpr linear in the inputs flagged in `linear`.
#[derive(Debug)]
pub struct LinearJaxpr {
    /// The jaxpr.
    pub jaxpr: Jaxpr,
    /// One flag per input: whether the jaxpr is linear in it.
    pub linear: Vec<bool>,
}

fn f32s(dims: &[i64]) -> AbstractValue {
    AbstractValue::new(Shape::new(dims).unwrap_or_default(), DType::F32)
}

struct Chain {
    b: JaxprBuilder,
    linear: Vec<bool>,
    /// Linear values made so far.
    seen: Vec<VarId>,
}

impl Chain {
    fn input(&mut self, t: AbstractValue, linear: bool) -> VarId {
        self.linear.push(linear);
        self.b.add_invar(t)
    }

    fn op(&mut self, p: Builtin, ins: &[VarId], params: Params) -> Option<VarId> {
        let ins = ins.iter().map(|&v| Atom::Var(v)).collect();
        self.b.add_eqn(p.into(), ins, params).ok().map(|o| o[0])
    }

    fn dims(&self, v: VarId) -> Vec<i64> {
        self.b
            .var_aval(v)
            .map(|t| t.shape.dims().to_vec())
            .unwrap_or_default()
    }
}

/// A one-step linear sub-jaxpr over `t`: `neg`, or a product by a literal.
fn linear_sub(u: &mut Unstructured<'_>, t: &AbstractValue) -> Result<Option<ClosedJaxpr>> {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(t.clone());
    let y = if u.ratio(1, 2)? {
        b.add_eqn(Builtin::Neg.into(), vec![Atom::Var(x)], Params::empty())
    } else {
        let c = b.literal(Literal {
            value: LitValue::Float(*u.choose(&[2.0, -0.5, 3.0])?),
            dtype: DType::F32,
            weak_type: false,
        });
        b.add_eqn(Builtin::Mul.into(), vec![Atom::Var(x), c], Params::empty())
    };
    let Ok(y) = y else { return Ok(None) };
    Ok(b.build(vec![Atom::Var(y[0])])
        .ok()
        .map(|j| ClosedJaxpr::with_unknown_consts(Arc::new(j))))
}

/// A random jaxpr linear in the inputs it flags, of up to `max_steps` linear steps.
///
/// # Errors
/// Only what [`Unstructured`] reports.
pub fn arbitrary_linear_jaxpr(u: &mut Unstructured<'_>, max_steps: usize) -> Result<LinearJaxpr> {
    let mut c = Chain {
        b: JaxprBuilder::new(),
        linear: Vec::new(),
        seen: Vec::new(),
    };
    let rank = u.int_in_range(0..=3)?;
    let dims0: Vec<i64> = (0..rank)
        .map(|_| u.int_in_range(1..=3))
        .collect::<Result<_>>()?;
    let mut x = c.input(f32s(&dims0), true);
    c.seen.push(x);
    let steps = u.int_in_range(1..=max_steps.max(1))?;
    for _ in 0..steps {
        let dims = c.dims(x);
        let rank = dims.len();
        let p = |pairs: Vec<(&str, Param)>| Params::new(pairs);
        let next = match u.int_in_range(0..=19)? {
            0 => c.op(Builtin::Neg, &[x], Params::empty()),
            1 => {
                let k = c.input(f32s(if u.ratio(1, 3)? { &[] } else { &dims }), false);
                if u.ratio(1, 2)? {
                    c.op(Builtin::Mul, &[k, x], Params::empty())
                } else {
                    c.op(Builtin::Div, &[x, k], Params::empty())
                }
            }
            2 => {
                // Fan-out: combine with an earlier linear value of the same shape, or a
                // new linear input.
                let same: Vec<VarId> = c
                    .seen
                    .iter()
                    .copied()
                    .filter(|&s| c.dims(s) == dims)
                    .collect();
                let o = if u.ratio(1, 3)? || same.is_empty() {
                    c.input(f32s(&dims), true)
                } else {
                    *u.choose(&same)?
                };
                let prim = *u.choose(&[Builtin::Add, Builtin::Sub, Builtin::AddAny])?;
                c.op(prim, &[x, o], Params::empty())
            }
            3 if rank >= 1 => {
                let axis = u.int_in_range(0..=rank - 1)? as i64;
                c.op(
                    Builtin::ReduceSum,
                    &[x],
                    p(vec![("axes", Param::ints(&[axis]))]),
                )
            }
            4 if rank < 3 => {
                let mut shape = vec![u.int_in_range(1..=3)?];
                shape.extend(&dims);
                let bd: Vec<i64> = (1..=rank as i64).collect();
                c.op(
                    Builtin::BroadcastInDim,
                    &[x],
                    p(vec![
                        ("shape", Param::ints(&shape)),
                        ("broadcast_dimensions", Param::ints(&bd)),
                        ("sharding", Param::None),
                    ]),
                )
            }
            5 if rank >= 2 => {
                let perm: Vec<i64> = (0..rank as i64).rev().collect();
                c.op(
                    Builtin::Transpose,
                    &[x],
                    p(vec![("permutation", Param::ints(&perm))]),
                )
            }
            6 => {
                let n: i64 = dims.iter().product();
                c.op(
                    Builtin::Reshape,
                    &[x],
                    p(vec![
                        ("new_sizes", Param::ints(&[n])),
                        ("dimensions", Param::None),
                    ]),
                )
            }
            7 => {
                let e = c.op(
                    Builtin::ExpandDims,
                    &[x],
                    p(vec![("dimensions", Param::ints(&[0]))]),
                );
                e.and_then(|e| {
                    c.op(
                        Builtin::Squeeze,
                        &[e],
                        p(vec![("dimensions", Param::ints(&[0]))]),
                    )
                })
            }
            8 => {
                let conv = |d| {
                    p(vec![
                        ("new_dtype", Param::DType(d)),
                        ("weak_type", Param::Bool(false)),
                        ("sharding", Param::None),
                    ])
                };
                c.op(Builtin::ConvertElementType, &[x], conv(DType::F64))
                    .and_then(|up| c.op(Builtin::ConvertElementType, &[up], conv(DType::F32)))
            }
            9 => {
                let pred = c.input(
                    AbstractValue::new(Shape::new(&dims).unwrap_or_default(), DType::Bool),
                    false,
                );
                let other = c.op(Builtin::Neg, &[x], Params::empty());
                other.and_then(|o| {
                    let (a, b) = if u.ratio(1, 2).unwrap_or(false) {
                        (x, o)
                    } else {
                        (o, x)
                    };
                    c.op(Builtin::SelectN, &[pred, a, b], Params::empty())
                })
            }
            10 if rank >= 1 => {
                let last = dims[rank - 1];
                let w = c.input(f32s(&[last, 2]), false);
                let (l, r, dn) = if u.ratio(1, 2)? {
                    (
                        x,
                        w,
                        DotDimensionNumbers {
                            lhs_contracting: vec![rank as i64 - 1],
                            rhs_contracting: vec![0],
                            lhs_batch: vec![],
                            rhs_batch: vec![],
                        },
                    )
                } else {
                    (
                        w,
                        x,
                        DotDimensionNumbers {
                            lhs_contracting: vec![0],
                            rhs_contracting: vec![rank as i64 - 1],
                            lhs_batch: vec![],
                            rhs_batch: vec![],
                        },
                    )
                };
                c.op(
                    Builtin::DotGeneral,
                    &[l, r],
                    p(vec![
                        ("dimension_numbers", Param::DotDims(Arc::new(dn))),
                        ("precision", Param::None),
                        ("preferred_element_type", Param::DType(DType::F32)),
                    ]),
                )
            }
            11 if rank >= 1 => {
                let axes: Vec<i64> = (0..rank as i64)
                    .filter(|_| u.ratio(1, 2).unwrap_or(false))
                    .collect();
                c.op(
                    Builtin::Rev,
                    &[x],
                    p(vec![("dimensions", Param::ints(&axes))]),
                )
            }
            12 if rank >= 1 => {
                let d = u.int_in_range(0..=rank - 1)?;
                let mut od = dims.clone();
                od[d] = u.int_in_range(0..=2)?;
                let other = c.input(f32s(&od), true);
                let (a, b) = if u.ratio(1, 2)? {
                    (x, other)
                } else {
                    (other, x)
                };
                c.op(
                    Builtin::Concatenate,
                    &[a, b],
                    p(vec![("dimension", Param::Int(d as i64))]),
                )
            }
            13 if rank >= 1 => {
                let (mut s, mut l, mut st) = (vec![], vec![], vec![]);
                for &n in &dims {
                    let a = u.int_in_range(0..=n)?;
                    s.push(a);
                    l.push(u.int_in_range(a..=n)?);
                    st.push(u.int_in_range(1..=2)?);
                }
                c.op(
                    Builtin::Slice,
                    &[x],
                    p(vec![
                        ("start_indices", Param::ints(&s)),
                        ("limit_indices", Param::ints(&l)),
                        ("strides", Param::ints(&st)),
                    ]),
                )
            }
            14 => {
                let mut config = Vec::new();
                for &n in &dims {
                    let lo = u.int_in_range(-1..=2)?;
                    let hi = u.int_in_range(-1..=2)?;
                    let int = u.int_in_range(0..=1)?;
                    let out = lo + hi + n + (n - 1).max(0) * int;
                    config.push(if out >= 0 { (lo, hi, int) } else { (0, 0, 0) });
                }
                let pv = c.input(f32s(&[]), true);
                c.op(
                    Builtin::Pad,
                    &[x, pv],
                    p(vec![("padding_config", Param::Padding(config.into()))]),
                )
            }
            15 if rank >= 1 => {
                let idx: Vec<VarId> = (0..rank)
                    .map(|_| c.input(AbstractValue::scalar(DType::I32), false))
                    .collect();
                let sizes: Vec<i64> = dims
                    .iter()
                    .map(|&n| u.int_in_range(0..=n))
                    .collect::<Result<_>>()?;
                if u.ratio(1, 2)? {
                    let mut ins = vec![x];
                    ins.extend(&idx);
                    c.op(
                        Builtin::DynamicSlice,
                        &ins,
                        p(vec![("slice_sizes", Param::ints(&sizes))]),
                    )
                } else {
                    let upd = c.input(f32s(&sizes), true);
                    let mut ins = vec![x, upd];
                    ins.extend(&idx);
                    c.op(Builtin::DynamicUpdateSlice, &ins, Params::empty())
                }
            }
            // (A scatter into an empty axis has no valid transpose, in JAX too: a
            // finding reported to the transpose pass's owner.)
            16 if rank >= 1 && dims[rank - 1] > 0 => {
                // gather along the last axis at non-linear indices, or a scatter-add of
                // linear updates into x.
                let last = rank - 1;
                let k = u.int_in_range(0..=3)?;
                let idx = c.input(
                    AbstractValue::new(Shape::new(&[k, 1]).unwrap_or_default(), DType::I32),
                    false,
                );
                let window: Vec<i64> = (0..last as i64).collect();
                // Not PROMISE_IN_BOUNDS: the indices may be out of bounds, where gather
                // clamps and scatter drops (undefined behaviour in XLA), so a transpose
                // cannot match.
                let mode = *u.choose(&[GatherScatterMode::Clip, GatherScatterMode::FillOrDrop])?;
                let mut sizes = dims.clone();
                sizes[last] = 1;
                if u.ratio(1, 2)? {
                    let dn = GatherDimensionNumbers {
                        offset_dims: window,
                        collapsed_slice_dims: vec![last as i64],
                        start_index_map: vec![last as i64],
                        ..Default::default()
                    };
                    c.op(
                        Builtin::Gather,
                        &[x, idx],
                        p(vec![
                            ("dimension_numbers", Param::GatherDims(Arc::new(dn))),
                            // Zero (None would fill with NaN: not linear).
                            ("fill_value", Param::Float(0.0)),
                            ("indices_are_sorted", Param::Bool(false)),
                            ("mode", Param::Mode(mode)),
                            ("slice_sizes", Param::ints(&sizes)),
                            ("unique_indices", Param::Bool(false)),
                        ]),
                    )
                } else {
                    let mut ud = dims[..last].to_vec();
                    ud.push(k);
                    let upd = c.input(f32s(&ud), true);
                    let dn = ScatterDimensionNumbers {
                        update_window_dims: window,
                        inserted_window_dims: vec![last as i64],
                        scatter_dims_to_operand_dims: vec![last as i64],
                        ..Default::default()
                    };
                    c.op(
                        Builtin::ScatterAdd,
                        &[x, idx, upd],
                        p(vec![
                            ("dimension_numbers", Param::ScatterDims(Arc::new(dn))),
                            ("indices_are_sorted", Param::Bool(false)),
                            ("mode", Param::Mode(mode)),
                            ("unique_indices", Param::Bool(false)),
                            ("update_consts", Param::ints(&[])),
                            ("update_jaxpr", Param::None),
                        ]),
                    )
                }
            }
            17 | 18 => {
                let t = f32s(&dims);
                match linear_sub(u, &t)? {
                    None => None,
                    Some(sub) if u.ratio(1, 2)? => {
                        let params = if u.ratio(1, 2)? {
                            remat_params(Param::Jaxpr(sub), u.ratio(1, 2)?)
                        } else {
                            Params::new([
                                ("jaxpr", Param::Jaxpr(sub)),
                                ("name", Param::Str("lin".into())),
                            ])
                        };
                        let prim = if params.get("prevent_cse").is_some() {
                            Builtin::Remat
                        } else {
                            Builtin::Jit
                        };
                        c.op(prim, &[x], params)
                    }
                    Some(sub) => {
                        let other = linear_sub(u, &t)?.unwrap_or_else(|| sub.clone());
                        let index = c.input(AbstractValue::scalar(DType::I32), false);
                        c.op(
                            Builtin::Cond,
                            &[index, x],
                            p(vec![(
                                "branches",
                                Param::Jaxprs(Arc::new(vec![sub, other])),
                            )]),
                        )
                    }
                }
            }
            19 if rank >= 2 => {
                // A convolution with a non-linear kernel (x the lhs: batch, features,
                // spatial...) or a non-linear lhs (x the kernel: out, in, spatial...).
                let n = rank - 2;
                let mut geometry = Vec::new();
                for _ in 0..n {
                    geometry.push([
                        u.int_in_range(1..=2i64)?,
                        u.int_in_range(0..=1i64)?,
                        u.int_in_range(0..=1i64)?,
                        u.int_in_range(1..=2i64)?,
                        u.int_in_range(1..=2i64)?,
                    ]);
                }
                let column = |k: usize| -> Vec<i64> { geometry.iter().map(|g| g[k]).collect() };
                let padding: Vec<(i64, i64)> = geometry.iter().map(|g| (g[1], g[2])).collect();
                let grouped = u.ratio(1, 2)?;
                let (ins, fgc, bgc) = if u.ratio(1, 2)? {
                    let fgc = if grouped && dims[1] > 0 { dims[1] } else { 1 };
                    let out = fgc * u.int_in_range(1..=2i64)?;
                    let mut kd = vec![out, dims[1] / fgc];
                    for _ in 0..n {
                        kd.push(u.int_in_range(1..=2i64)?);
                    }
                    let w = c.input(f32s(&kd), false);
                    (vec![x, w], fgc, 1)
                } else {
                    let bgc = if grouped && dims[0] > 0 { dims[0] } else { 1 };
                    let mut ld = vec![bgc * u.int_in_range(1..=2i64)?, dims[1]];
                    for _ in 0..n {
                        ld.push(u.int_in_range(1..=4i64)?);
                    }
                    let l = c.input(f32s(&ld), false);
                    (vec![l, x], 1, bgc)
                };
                let iota: Vec<i64> = (0..rank as i64).collect();
                c.op(
                    Builtin::ConvGeneralDilated,
                    &ins,
                    p(vec![
                        ("window_strides", Param::ints(&column(0))),
                        ("padding", Param::Pairs(padding.into())),
                        ("lhs_dilation", Param::ints(&column(3))),
                        ("rhs_dilation", Param::ints(&column(4))),
                        (
                            "dimension_numbers",
                            Param::ConvDims(Arc::new(ConvDimensionNumbers {
                                lhs_spec: iota.clone(),
                                rhs_spec: iota.clone(),
                                out_spec: iota,
                            })),
                        ),
                        ("feature_group_count", Param::Int(fgc)),
                        ("batch_group_count", Param::Int(bgc)),
                        ("precision", Param::None),
                        ("preferred_element_type", Param::None),
                        ("out_sharding", Param::None),
                    ]),
                )
            }
            _ => c.op(Builtin::Copy, &[x], Params::empty()),
        };
        if let Some(n) = next {
            // Keep values small so evaluation stays cheap.
            if c.b.var_aval(n).is_some_and(|t| t.shape.size() <= 512) {
                x = n;
                c.seen.push(x);
            }
        }
    }
    let mut outs = vec![Atom::Var(x)];
    if u.ratio(1, 2)? {
        outs.push(Atom::Var(*u.choose(&c.seen)?));
    }
    let jaxpr =
        c.b.build(outs)
            .map_err(|_| arbitrary::Error::IncorrectFormat)?;
    Ok(LinearJaxpr {
        jaxpr,
        linear: c.linear,
    })
}
