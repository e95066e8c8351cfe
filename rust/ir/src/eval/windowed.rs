//! The windowed reductions (`reduce_window_sum`, `reduce_window_max`,
//! `reduce_window_min`, `reduce_window`) and the primitives of their derivatives
//! (`select_and_gather_add`, `select_and_scatter_add`).
//!
//! Every window is read in row-major order of its positions; a position in the padding
//! or between dilated operand elements holds the reduction's initial value. XLA leaves
//! the order of a window's reduction unspecified, so a reducer that is not associative
//! and commutative, or ties between maxima, may give XLA another result.

use super::array::{HostArray, HostData};
use super::numeric::{fmax, fmin, int_cmp, int_max, int_min, int_min_max, round_float, wrap_int};
use super::ops::{dims_of, for_each_index, internal, shape_of, strides};
use super::EvalError;
use crate::dtype::DType;
use crate::jaxpr::{Atom, ClosedJaxpr};
use crate::params::{Param, Params};
use crate::primitive::{Builtin, Primitive, Window};
use std::cmp::Ordering;

type R<T> = Result<T, EvalError>;

/// The window params of an equation (checked by the shape rule already).
fn window(prim: Builtin, params: &Params, rank: usize) -> R<Window> {
    Window::from_params(prim, params, rank).map_err(|e| internal(e.to_string()))
}

/// The output dimensions and, per output element then window position (row-major),
/// the row-major position of the operand element there (`None` in padding or between
/// dilated elements).
fn positions(w: &Window, xd: &[usize]) -> R<(Vec<usize>, Vec<Option<usize>>)> {
    let in_dims: Vec<i64> = xd.iter().map(|&d| d as i64).collect();
    let out = w
        .out_dims(&in_dims)
        .map_err(|e| internal(e.to_string()))?
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| internal("negative window output size")))
        .collect::<R<Vec<usize>>>()?;
    let wd: Vec<usize> = w.dims.iter().map(|&d| d.max(0) as usize).collect();
    let xs = strides(xd);
    let mut pos = Vec::new();
    for_each_index(&out, |o| {
        for_each_index(&wd, |k| {
            let mut p = Some(0usize);
            for a in 0..xd.len() {
                // Exact in i128: every factor is below 2^63.
                let q = o[a] as i128 * w.strides[a] as i128
                    + k[a] as i128 * w.window_dilation[a] as i128
                    - w.padding[a].0 as i128;
                let bd = w.base_dilation[a] as i128;
                if q < 0 || q % bd != 0 || q / bd >= xd[a] as i128 {
                    p = None;
                    break;
                }
                p = p.map(|p| p + (q / bd) as usize * xs[a]);
            }
            pos.push(p);
        });
    });
    Ok((out, pos))
}

/// `reduce_window_sum`, `reduce_window_max`, `reduce_window_min` of `x`.
pub(super) fn reduce_window_monoid(prim: Builtin, x: &HostArray, params: &Params) -> R<HostArray> {
    let xd = dims_of(&x.shape);
    let w = window(prim, params, xd.len())?;
    let (out, pos) = positions(&w, &xd)?;
    let n = w.size() as usize;
    let d = x.dtype;
    let data = match &x.data {
        HostData::Float(v) => HostData::Float(
            pos.chunks(n.max(1))
                .map(|win| {
                    let vals = win.iter().map(|p| p.map(|p| v[p]));
                    let r = match prim {
                        Builtin::ReduceWindowSum => vals.map(|x| x.unwrap_or(0.0)).sum(),
                        Builtin::ReduceWindowMax => vals.fold(f64::NEG_INFINITY, |a, x| {
                            fmax(a, x.unwrap_or(f64::NEG_INFINITY))
                        }),
                        _ => vals.fold(f64::INFINITY, |a, x| fmin(a, x.unwrap_or(f64::INFINITY))),
                    };
                    round_float(d, r)
                })
                .collect(),
        ),
        HostData::Int(v) => {
            let (lo, hi) = int_min_max(d);
            HostData::Int(
                pos.chunks(n.max(1))
                    .map(|win| {
                        let vals = win.iter().map(|p| p.map(|p| v[p]));
                        match prim {
                            Builtin::ReduceWindowSum => {
                                wrap_int(d, vals.fold(0i64, |a, x| a.wrapping_add(x.unwrap_or(0))))
                            }
                            Builtin::ReduceWindowMax => {
                                vals.fold(lo, |a, x| int_max(d, a, x.unwrap_or(lo)))
                            }
                            _ => vals.fold(hi, |a, x| int_min(d, a, x.unwrap_or(hi))),
                        }
                    })
                    .collect(),
            )
        }
        HostData::Bool(v) => HostData::Bool(
            pos.chunks(n.max(1))
                .map(|win| {
                    let mut vals = win.iter().map(|p| p.map(|p| v[p]));
                    match prim {
                        Builtin::ReduceWindowMax => vals.any(|x| x == Some(true)),
                        Builtin::ReduceWindowMin => vals.all(|x| x != Some(false)),
                        _ => false,
                    }
                })
                .collect(),
        ),
    };
    if prim == Builtin::ReduceWindowSum && matches!(x.data, HostData::Bool(_)) {
        return Err(internal("reduce_window_sum of bool"));
    }
    Ok(HostArray {
        shape: shape_of(&out)?,
        dtype: d,
        data,
    })
}

/// The identity of `select_prim` (`ge`: -inf or the least integer; `le`: the greatest).
fn select_identity(ge: bool, d: DType) -> Scalar {
    if d.is_float() {
        Scalar::Float(if ge { f64::NEG_INFINITY } else { f64::INFINITY })
    } else if d == DType::Bool {
        Scalar::Bool(!ge)
    } else {
        let (lo, hi) = int_min_max(d);
        Scalar::Int(if ge { lo } else { hi })
    }
}

#[derive(Clone, Copy)]
enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

fn scalar_at(x: &HostArray, p: Option<usize>, otherwise: Scalar) -> Scalar {
    match (p, &x.data) {
        (None, _) => otherwise,
        (Some(p), HostData::Bool(v)) => Scalar::Bool(v[p]),
        (Some(p), HostData::Int(v)) => Scalar::Int(v[p]),
        (Some(p), HostData::Float(v)) => Scalar::Float(v[p]),
    }
}

/// `a >= b` (`ge`) or `a <= b` (`le`), as XLA compares (false with a NaN).
fn selects(ge: bool, d: DType, a: Scalar, b: Scalar) -> bool {
    let ord = match (a, b) {
        (Scalar::Float(a), Scalar::Float(b)) => a.partial_cmp(&b),
        (Scalar::Int(a), Scalar::Int(b)) => Some(int_cmp(d, a, b)),
        (Scalar::Bool(a), Scalar::Bool(b)) => Some(a.cmp(&b)),
        _ => None,
    };
    match ord {
        Some(Ordering::Equal) => true,
        Some(Ordering::Greater) => ge,
        Some(Ordering::Less) => !ge,
        None => false,
    }
}

/// The window position each window's selection picks: starting from the first, a later
/// position replaces the pick unless `select(pick, later)` holds.
fn picks(ge: bool, x: &HostArray, pos: &[Option<usize>], n: usize, pad: Scalar) -> Vec<usize> {
    pos.chunks(n.max(1))
        .map(|win| {
            let mut best = 0usize;
            let mut best_v = scalar_at(x, win.first().copied().flatten(), pad);
            for (k, &p) in win.iter().enumerate().skip(1) {
                let v = scalar_at(x, p, pad);
                if !selects(ge, x.dtype, best_v, v) {
                    best = k;
                    best_v = v;
                }
            }
            best
        })
        .collect()
}

/// `select_and_gather_add(t, x)`: per window, the tangent where the operand has its
/// max (`ge`) or min (`le`); 0 when that is padding.
pub(super) fn select_and_gather_add(t: &HostArray, x: &HostArray, params: &Params) -> R<HostArray> {
    let ge = select_comparison(params)?;
    let xd = dims_of(&x.shape);
    let w = window(Builtin::SelectAndGatherAdd, params, xd.len())?;
    let (out, pos) = positions(&w, &xd)?;
    let n = w.size() as usize;
    let chosen = picks(ge, x, &pos, n, select_identity(ge, x.dtype));
    let HostData::Float(tv) = &t.data else {
        return Err(internal("select_and_gather_add of non-float tangents"));
    };
    let data = chosen
        .iter()
        .enumerate()
        .map(|(i, &k)| pos[i * n + k].map_or(0.0, |p| tv[p]))
        .collect();
    Ok(HostArray {
        shape: shape_of(&out)?,
        dtype: t.dtype,
        data: HostData::Float(data),
    })
}

fn select_comparison(params: &Params) -> R<bool> {
    match crate::primitive::select_comparison(params) {
        Ok(b) => Ok(b == Builtin::Ge),
        Err(e) => Err(internal(e.to_string())),
    }
}

/// `select_and_scatter_add(s, x)`: zeros of the operand's shape, each source element
/// added where its window of the operand has its max (`ge`) or min (`le`) (nothing
/// when that is padding; `or` for bool).
pub(super) fn select_and_scatter_add(
    s: &HostArray,
    x: &HostArray,
    params: &Params,
) -> R<HostArray> {
    let ge = select_comparison(params)?;
    let xd = dims_of(&x.shape);
    let w = window(Builtin::SelectAndScatterAdd, params, xd.len())?;
    let (_, pos) = positions(&w, &xd)?;
    let n = w.size() as usize;
    let chosen = picks(ge, x, &pos, n, select_identity(ge, x.dtype));
    let size = x.len();
    let targets = chosen.iter().enumerate().map(|(i, &k)| pos[i * n + k]);
    let data = match &s.data {
        HostData::Float(v) => {
            let mut out = vec![0.0; size];
            for (t, &g) in targets.zip(v) {
                if let Some(p) = t {
                    out[p] += g;
                }
            }
            HostData::Float(out.into_iter().map(|z| round_float(s.dtype, z)).collect())
        }
        HostData::Int(v) => {
            let mut out = vec![0i64; size];
            for (t, &g) in targets.zip(v) {
                if let Some(p) = t {
                    out[p] = wrap_int(s.dtype, out[p].wrapping_add(g));
                }
            }
            HostData::Int(out)
        }
        HostData::Bool(v) => {
            let mut out = vec![false; size];
            for (t, &g) in targets.zip(v) {
                if let Some(p) = t {
                    out[p] |= g;
                }
            }
            HostData::Bool(out)
        }
    };
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: s.dtype,
        data,
    })
}

/// Runs a reducer (a jaxpr of scalars, first-order built-ins only) on scalars.
fn run_reducer(j: &ClosedJaxpr, args: Vec<HostArray>) -> R<Vec<HostArray>> {
    let jaxpr = j.jaxpr();
    let mut env: Vec<Option<HostArray>> = vec![None; jaxpr.num_vars()];
    for (&v, a) in jaxpr.invars().iter().zip(args) {
        env[v.index()] = Some(a);
    }
    let read = |env: &[Option<HostArray>], a: Atom| -> R<HostArray> {
        match a {
            Atom::Var(v) => env
                .get(v.index())
                .cloned()
                .flatten()
                .ok_or_else(|| internal(format!("reducer variable {v} is unbound"))),
            Atom::Lit(l) => super::literal_array(jaxpr.literal(l)),
        }
    };
    for e in jaxpr.eqns() {
        let b = match e.primitive() {
            Primitive::Builtin(b) if !b.is_higher_order() && *b != Builtin::ReduceWindow => *b,
            p => {
                return Err(EvalError::UnsupportedPrimitive {
                    name: format!("{} inside a reduce_window reducer", p.name()),
                })
            }
        };
        let ins = e
            .inputs()
            .iter()
            .map(|&a| read(&env, a))
            .collect::<R<Vec<_>>>()?;
        let refs: Vec<&HostArray> = ins.iter().collect();
        let outs = super::ops::apply(b, &refs, e.params())?;
        for (&v, o) in e.outvars().iter().zip(outs) {
            env[v.index()] = Some(o);
        }
    }
    jaxpr.outvars().iter().map(|&a| read(&env, a)).collect()
}

fn element(x: &HostArray, p: usize) -> R<HostArray> {
    let data = match &x.data {
        HostData::Bool(v) => HostData::Bool(vec![v[p]]),
        HostData::Int(v) => HostData::Int(vec![v[p]]),
        HostData::Float(v) => HostData::Float(vec![v[p]]),
    };
    Ok(HostArray {
        shape: shape_of(&[])?,
        dtype: x.dtype,
        data,
    })
}

/// `reduce_window`: per window, the accumulators start at the init values and take
/// each position's elements in turn through the reducer (`jaxpr(acc..., elem...)`).
pub(super) fn reduce_window(ins: &[&HostArray], params: &Params) -> R<Vec<HostArray>> {
    let n = ins.len() / 2;
    let (ops, inits) = ins.split_at(n);
    let first = ops
        .first()
        .ok_or_else(|| internal("reduce_window without operands"))?;
    let j = match params.get("jaxpr") {
        Some(Param::Jaxpr(j)) => j,
        _ => return Err(internal("param 'jaxpr' is missing")),
    };
    let xd = dims_of(&first.shape);
    let w = window(Builtin::ReduceWindow, params, xd.len())?;
    let (out, pos) = positions(&w, &xd)?;
    let size = w.size() as usize;
    let mut results: Vec<Vec<HostArray>> = vec![Vec::new(); n];
    for win in pos.chunks(size.max(1)) {
        let mut acc: Vec<HostArray> = inits.iter().map(|&i| i.clone()).collect();
        for &p in win {
            let elems = match p {
                Some(p) => ops.iter().map(|x| element(x, p)).collect::<R<Vec<_>>>()?,
                None => inits.iter().map(|&i| i.clone()).collect(),
            };
            let args: Vec<HostArray> = acc.into_iter().chain(elems).collect();
            acc = run_reducer(j, args)?;
        }
        for (r, a) in results.iter_mut().zip(acc) {
            r.push(a);
        }
    }
    let shape = shape_of(&out)?;
    results
        .into_iter()
        .zip(ops)
        .map(|(vals, x)| {
            let data = match &x.data {
                HostData::Bool(_) => HostData::Bool(
                    vals.iter()
                        .map(|v| v.as_bool().map(|s| s[0]))
                        .collect::<Option<_>>()
                        .ok_or_else(|| internal("reducer result kind"))?,
                ),
                HostData::Int(_) => HostData::Int(
                    vals.iter()
                        .map(|v| v.as_i64().map(|s| s[0]))
                        .collect::<Option<_>>()
                        .ok_or_else(|| internal("reducer result kind"))?,
                ),
                HostData::Float(_) => HostData::Float(
                    vals.iter()
                        .map(|v| v.as_f64().map(|s| s[0]))
                        .collect::<Option<_>>()
                        .ok_or_else(|| internal("reducer result kind"))?,
                ),
            };
            Ok(HostArray {
                shape: shape.clone(),
                dtype: x.dtype,
                data,
            })
        })
        .collect()
}
