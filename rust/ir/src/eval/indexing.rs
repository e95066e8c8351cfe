//! `gather`, the `scatter` family and `rev` on host arrays, with XLA's semantics and JAX's
//! index modes:
//! - gather: `CLIP` and `PROMISE_IN_BOUNDS` clamp each start index so the whole slice is
//!   in bounds (what XLA does); `FILL_OR_DROP` gives `fill_value` for every element of a
//!   slice not wholly in bounds (`None`: NaN for floats, the least signed and the greatest
//!   unsigned integer, `True` for bool, as JAX's `lax.gather` picks).
//! - scatter: `CLIP` clamps the start indices first (as JAX lowers it); the other modes
//!   drop an update window not wholly in bounds (what XLA does). Updates to one element
//!   combine in update order (XLA leaves the order unspecified).

use super::array::{by_kind, Elem, HostArray, HostData};
use super::numeric::{
    float_to_int, fmax, fmin, int_max, int_min, int_min_max, round_float, wrap_int,
};
use super::ops::{dims_of, for_each_index, internal, param_ints, strides, to_usizes};
use super::EvalError;
use crate::dtype::{DType, DTypeKind};
use crate::params::{GatherScatterMode, Param, Params};
use crate::primitive::Builtin;

type R<T> = Result<T, EvalError>;

fn mode(params: &Params) -> R<GatherScatterMode> {
    match params.get("mode") {
        Some(Param::Mode(m)) => Ok(*m),
        _ => Err(internal("param 'mode' is not a GatherScatterMode")),
    }
}

/// The indices as signed values (`u64` beyond `i64::MAX` saturates), row-major.
fn index_values(indices: &HostArray) -> R<Vec<i64>> {
    let v = indices
        .as_i64()
        .ok_or_else(|| internal("indices are not integers"))?;
    Ok(if indices.dtype == DType::U64 {
        v.iter()
            .map(|&x| if x < 0 { i64::MAX } else { x })
            .collect()
    } else {
        v.to_vec()
    })
}

/// `dims` as positions in `0..rank`.
fn axes(name: &str, dims: &[i64], rank: usize) -> R<Vec<usize>> {
    let out = to_usizes(name, dims)?;
    if out.iter().any(|&d| d >= rank) {
        return Err(internal(format!(
            "{name} {dims:?} out of range for rank {rank}"
        )));
    }
    Ok(out)
}

/// Where the start of a slice or window lands in the operand, before any bounds policy:
/// the index vector at `batch` (an index into the indices' leading dimensions) placed by
/// `index_map`, and the batch position itself on the batching dimensions.
struct Starts<'a> {
    values: &'a [i64],
    ivd_size: usize,
    index_map: &'a [usize],
    operand_batching: &'a [usize],
    indices_batching: &'a [usize],
    batch_strides: Vec<usize>,
}

impl Starts<'_> {
    /// The operand start for the batch multi-index `g` (over the indices' dimensions but
    /// the last), written to `out` (one entry per operand dimension, 0 elsewhere).
    fn at(&self, g: &[usize], out: &mut [i64]) -> R<()> {
        out.iter_mut().for_each(|x| *x = 0);
        let row: usize = g.iter().zip(&self.batch_strides).map(|(i, s)| i * s).sum();
        let base = row * self.ivd_size;
        for (k, &d) in self.index_map.iter().enumerate() {
            *out.get_mut(d)
                .ok_or_else(|| internal("start index dimension"))? = *self
                .values
                .get(base + k)
                .ok_or_else(|| internal("index vector out of range"))?;
        }
        for (&od, &id) in self.operand_batching.iter().zip(self.indices_batching) {
            let gi = *g.get(id).ok_or_else(|| internal("batching dimension"))?;
            *out.get_mut(od)
                .ok_or_else(|| internal("batching dimension"))? = gi as i64;
        }
        Ok(())
    }
}

/// The fill of a `FILL_OR_DROP` gather, in the operand's storage kind.
#[derive(Clone, Copy)]
enum Fill {
    Bool(bool),
    Int(i64),
    Float(f64),
}

fn fill_value(dtype: DType, p: Option<&Param>) -> Fill {
    let as_f64 = |p: &Param| match p {
        Param::Bool(b) => f64::from(u8::from(*b)),
        Param::Int(i) => *i as f64,
        Param::Float(x) => *x,
        _ => 0.0,
    };
    if dtype.is_key() {
        // JAX gathers the keys' u32 words: the fill (the greatest u32 by default) goes
        // into each word of a key.
        let word = match p {
            Some(Param::Int(i)) => *i as u32,
            Some(Param::Bool(b)) => u32::from(*b),
            Some(Param::Float(x)) => *x as u32,
            _ => u32::MAX,
        };
        return Fill::Int(((u64::from(word) << 32) | u64::from(word)) as i64);
    }
    match (dtype.kind(), p) {
        (_, None | Some(Param::None)) => match dtype.kind() {
            DTypeKind::Float => Fill::Float(f64::NAN),
            DTypeKind::SignedInt => Fill::Int(int_min_max(dtype).0),
            DTypeKind::UnsignedInt => Fill::Int(int_min_max(dtype).1),
            DTypeKind::Bool => Fill::Bool(true),
            DTypeKind::Key => Fill::Int(-1),
        },
        (DTypeKind::Float, Some(p)) => Fill::Float(round_float(dtype, as_f64(p))),
        (DTypeKind::Bool, Some(p)) => Fill::Bool(as_f64(p) != 0.0),
        (_, Some(Param::Int(i))) => Fill::Int(wrap_int(dtype, *i)),
        (_, Some(Param::Bool(b))) => Fill::Int(i64::from(*b)),
        (_, Some(p)) => Fill::Int(wrap_int(dtype, float_to_int(as_f64(p), dtype))),
    }
}

trait FillElem: Elem {
    fn fill(f: Fill) -> Self;
}

impl FillElem for bool {
    fn fill(f: Fill) -> bool {
        matches!(f, Fill::Bool(true))
    }
}

impl FillElem for i64 {
    fn fill(f: Fill) -> i64 {
        match f {
            Fill::Int(i) => i,
            _ => 0,
        }
    }
}

impl FillElem for f64 {
    fn fill(f: Fill) -> f64 {
        match f {
            Fill::Float(x) => x,
            _ => 0.0,
        }
    }
}

fn take_or_fill<T: FillElem>(
    src: &HostData,
    positions: &[Option<usize>],
    fill: Fill,
) -> R<HostData> {
    let s = T::slice(src).ok_or_else(|| internal("gather operand kind"))?;
    let f = T::fill(fill);
    positions
        .iter()
        .map(|p| match p {
            Some(p) => s
                .get(*p)
                .copied()
                .ok_or_else(|| internal(format!("gather position {p} out of range"))),
            None => Ok(f),
        })
        .collect::<R<Vec<T>>>()
        .map(T::data)
}

/// `gather`.
pub(super) fn gather(operand: &HostArray, indices: &HostArray, params: &Params) -> R<HostArray> {
    let dn = match params.get("dimension_numbers") {
        Some(Param::GatherDims(d)) => d,
        _ => return Err(internal("param 'dimension_numbers' is not gather's")),
    };
    let mode = mode(params)?;
    let od = dims_of(&operand.shape);
    let idims = dims_of(&indices.shape);
    let rank = od.len();
    let Some((&ivd_size, batch_dims)) = idims.split_last() else {
        return Err(internal("gather indices of rank 0"));
    };
    let sizes = to_usizes("slice_sizes", param_ints(params, "slice_sizes")?)?;
    if sizes.len() != rank {
        return Err(internal("slice_sizes do not fit the operand"));
    }
    let index_map = axes("start_index_map", &dn.start_index_map, rank)?;
    let collapsed = axes("collapsed_slice_dims", &dn.collapsed_slice_dims, rank)?;
    let obatch = axes("operand_batching_dims", &dn.operand_batching_dims, rank)?;
    let ibatch = axes(
        "start_indices_batching_dims",
        &dn.start_indices_batching_dims,
        batch_dims.len(),
    )?;
    let offset_dims = to_usizes("offset_dims", &dn.offset_dims)?;
    let out_rank = offset_dims.len() + batch_dims.len();
    // The operand dimension of each offset output dimension, in order.
    let window_dims: Vec<usize> = (0..rank)
        .filter(|d| !collapsed.contains(d) && !obatch.contains(d))
        .collect();
    if window_dims.len() != offset_dims.len() || offset_dims.iter().any(|&d| d >= out_rank) {
        return Err(internal("gather offset_dims do not fit"));
    }
    let mut out_dims = Vec::with_capacity(out_rank);
    let (mut w, mut b) = (window_dims.iter(), batch_dims.iter());
    for i in 0..out_rank {
        let next = if offset_dims.contains(&i) {
            w.next().map(|&d| sizes[d])
        } else {
            b.next().copied()
        };
        out_dims.push(next.ok_or_else(|| internal("gather output rank"))?);
    }
    if out_dims.iter().all(|&d| d > 0) && sizes.iter().zip(&od).any(|(s, d)| s > d) {
        // JAX's rule lets this through when the indices are empty; XLA refuses it.
        return Err(internal(format!(
            "gather slice sizes {sizes:?} exceed the operand's dimensions {od:?}"
        )));
    }
    let values = index_values(indices)?;
    let starts = Starts {
        values: &values,
        ivd_size,
        index_map: &index_map,
        operand_batching: &obatch,
        indices_batching: &ibatch,
        batch_strides: strides(batch_dims),
    };
    let os = strides(&od);
    let mut start = vec![0i64; rank];
    let mut g = Vec::with_capacity(batch_dims.len());
    let mut positions: Vec<Option<usize>> = Vec::with_capacity(out_dims.iter().product::<usize>());
    let mut failure: Option<EvalError> = None;
    for_each_index(&out_dims, |o| {
        if failure.is_some() {
            return;
        }
        g.clear();
        g.extend(
            (0..out_rank)
                .filter(|i| !offset_dims.contains(i))
                .map(|i| o[i]),
        );
        if let Err(e) = starts.at(&g, &mut start) {
            failure = Some(e);
            return;
        }
        let mut in_bounds = true;
        let mut pos = 0usize;
        let mut offsets = offset_dims.iter().map(|&i| o[i]);
        let mut next_offset = |d: usize| {
            if window_dims.contains(&d) {
                offsets.next().unwrap_or(0)
            } else {
                0
            }
        };
        for d in 0..rank {
            let hi = od[d] as i64 - sizes[d] as i64;
            let s = start[d];
            let s = if index_map.contains(&d) {
                if s < 0 || s > hi {
                    in_bounds = false;
                }
                s.clamp(0, hi.max(0))
            } else {
                s
            };
            pos += (s as usize + next_offset(d)) * os[d];
        }
        positions.push(if mode == GatherScatterMode::FillOrDrop && !in_bounds {
            None
        } else {
            Some(pos)
        });
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let fill = fill_value(operand.dtype, params.get("fill_value"));
    let data = by_kind!(&operand.data, take_or_fill(&operand.data, &positions, fill))?;
    Ok(HostArray {
        shape: super::ops::shape_of(&out_dims)?,
        dtype: operand.dtype,
        data,
    })
}

/// Combines an operand element with an update, as the scatter primitive does.
fn combiner(prim: Builtin, dtype: DType) -> R<Combine> {
    use Builtin::*;
    Ok(match dtype.kind() {
        DTypeKind::Float => Combine::Float(match prim {
            Scatter => |_, u| u,
            ScatterAdd => |a, u| a + u,
            ScatterSub => |a, u| a - u,
            ScatterMul => |a, u| a * u,
            ScatterMin => fmin,
            ScatterMax => fmax,
            _ => return Err(internal("not a scatter")),
        }),
        DTypeKind::SignedInt | DTypeKind::UnsignedInt => Combine::Int(match prim {
            Scatter => |_, _, u| u,
            ScatterAdd => |_, a, u| a.wrapping_add(u),
            ScatterSub => |_, a, u| a.wrapping_sub(u),
            ScatterMul => |_, a, u| a.wrapping_mul(u),
            ScatterMin => int_min,
            ScatterMax => int_max,
            _ => return Err(internal("not a scatter")),
        }),
        // Keys are only ever overwritten (the shape rule refuses the combining scatters).
        DTypeKind::Key => Combine::Int(match prim {
            Scatter => |_, _, u| u,
            _ => return Err(internal(format!("{} of keys", prim.name()))),
        }),
        DTypeKind::Bool => Combine::Bool(match prim {
            Scatter => |_, u| u,
            ScatterMin => |a, u| a & u,
            ScatterMax => |a, u| a | u,
            _ => return Err(internal(format!("{} of bool", prim.name()))),
        }),
    })
}

#[derive(Clone, Copy)]
enum Combine {
    Float(fn(f64, f64) -> f64),
    Int(fn(DType, i64, i64) -> i64),
    Bool(fn(bool, bool) -> bool),
}

/// The scatter family.
pub(super) fn scatter(
    prim: Builtin,
    operand: &HostArray,
    indices: &HostArray,
    updates: &HostArray,
    params: &Params,
) -> R<HostArray> {
    let dn = match params.get("dimension_numbers") {
        Some(Param::ScatterDims(d)) => d,
        _ => return Err(internal("param 'dimension_numbers' is not scatter's")),
    };
    let mode = mode(params)?;
    let od = dims_of(&operand.shape);
    let idims = dims_of(&indices.shape);
    let ud = dims_of(&updates.shape);
    let rank = od.len();
    let Some((&ivd_size, batch_dims)) = idims.split_last() else {
        return Err(internal("scatter indices of rank 0"));
    };
    let index_map = axes(
        "scatter_dims_to_operand_dims",
        &dn.scatter_dims_to_operand_dims,
        rank,
    )?;
    let inserted = axes("inserted_window_dims", &dn.inserted_window_dims, rank)?;
    let obatch = axes("operand_batching_dims", &dn.operand_batching_dims, rank)?;
    let ibatch = axes(
        "scatter_indices_batching_dims",
        &dn.scatter_indices_batching_dims,
        batch_dims.len(),
    )?;
    let uwd = axes("update_window_dims", &dn.update_window_dims, ud.len())?;
    let window_dims: Vec<usize> = (0..rank)
        .filter(|d| !inserted.contains(d) && !obatch.contains(d))
        .collect();
    if window_dims.len() != uwd.len() {
        return Err(internal("scatter windows do not fit"));
    }
    // Window size per operand dimension.
    let mut window = vec![1usize; rank];
    for (&d, &u) in window_dims.iter().zip(&uwd) {
        window[d] = ud[u];
    }
    let values = index_values(indices)?;
    let starts = Starts {
        values: &values,
        ivd_size,
        index_map: &index_map,
        operand_batching: &obatch,
        indices_batching: &ibatch,
        batch_strides: strides(batch_dims),
    };
    let os = strides(&od);
    let mut start = vec![0i64; rank];
    let mut g = Vec::with_capacity(batch_dims.len());
    // (operand position, update position) pairs in update order.
    let mut pairs: Vec<(usize, usize)> = Vec::with_capacity(updates.len());
    let mut failure: Option<EvalError> = None;
    let mut u_pos = 0usize;
    for_each_index(&ud, |u| {
        let here = u_pos;
        u_pos += 1;
        if failure.is_some() {
            return;
        }
        g.clear();
        g.extend((0..ud.len()).filter(|i| !uwd.contains(i)).map(|i| u[i]));
        if let Err(e) = starts.at(&g, &mut start) {
            failure = Some(e);
            return;
        }
        let mut wins = uwd.iter().map(|&i| u[i]);
        let mut pos = 0usize;
        for d in 0..rank {
            let hi = od[d] as i64 - window[d] as i64;
            let mut s = start[d];
            if mode == GatherScatterMode::Clip && index_map.contains(&d) {
                s = s.clamp(0, hi.max(0));
            }
            if s < 0 || s > hi {
                return; // The whole window is dropped.
            }
            let off = if window_dims.contains(&d) {
                wins.next().unwrap_or(0)
            } else {
                0
            };
            pos += (s as usize + off) * os[d];
        }
        pairs.push((pos, here));
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let dt = operand.dtype;
    let data = match (combiner(prim, dt)?, &operand.data, &updates.data) {
        (Combine::Float(f), HostData::Float(x), HostData::Float(v)) => {
            HostData::Float(apply_pairs(x, v, &pairs, |a, u| round_float(dt, f(a, u)))?)
        }
        (Combine::Int(f), HostData::Int(x), HostData::Int(v)) => {
            HostData::Int(apply_pairs(x, v, &pairs, |a, u| wrap_int(dt, f(dt, a, u)))?)
        }
        (Combine::Bool(f), HostData::Bool(x), HostData::Bool(v)) => {
            HostData::Bool(apply_pairs(x, v, &pairs, f)?)
        }
        _ => return Err(internal("scatter operands differ in kind")),
    };
    Ok(HostArray {
        shape: operand.shape.clone(),
        dtype: dt,
        data,
    })
}

fn apply_pairs<T: Copy>(
    x: &[T],
    v: &[T],
    pairs: &[(usize, usize)],
    f: impl Fn(T, T) -> T,
) -> R<Vec<T>> {
    let mut out = x.to_vec();
    for &(p, u) in pairs {
        let upd = *v.get(u).ok_or_else(|| internal("update position"))?;
        let slot = out.get_mut(p).ok_or_else(|| internal("scatter position"))?;
        *slot = f(*slot, upd);
    }
    Ok(out)
}

/// `rev`: reverses the order of elements along `dimensions`.
pub(super) fn rev(x: &HostArray, dimensions: &[i64]) -> R<HostArray> {
    let xd = dims_of(&x.shape);
    let dims = axes("dimensions", dimensions, xd.len())?;
    let xs = strides(&xd);
    let mut positions = Vec::with_capacity(x.len());
    for_each_index(&xd, |o| {
        let p = (0..o.len())
            .map(|a| {
                let i = if dims.contains(&a) {
                    xd[a] - 1 - o[a]
                } else {
                    o[a]
                };
                i * xs[a]
            })
            .sum();
        positions.push(p);
    });
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: x.dtype,
        data: super::ops::gather(x, &positions)?,
    })
}
