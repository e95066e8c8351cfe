//! `sort` and the cumulative primitives (`cumsum`, `cumprod`, `cummax`, `cummin`,
//! `cumlogsumexp`): both work line by line along one axis.

use super::array::{HostArray, HostData};
use super::numeric::{fmax, fmin, int_cmp, int_max, int_min, round_float, wrap_int};
use super::ops::{dims_of, for_each_index, gather, internal, strides};
use super::EvalError;
use crate::dtype::DType;
use crate::primitive::Builtin;
use std::cmp::Ordering;

type R<T> = Result<T, EvalError>;

/// The row-major position of the first element of every line along `axis`, the line
/// length and the stride between its elements.
fn lines(x: &HostArray, axis: i64) -> R<(Vec<usize>, usize, usize)> {
    let dims = dims_of(&x.shape);
    let a = usize::try_from(axis)
        .ok()
        .filter(|&a| a < dims.len())
        .ok_or_else(|| internal(format!("axis {axis} is out of range for {}", x.shape)))?;
    let st = strides(&dims);
    let n = dims[a];
    let mut outer = dims.clone();
    outer[a] = 1;
    let mut starts = Vec::new();
    if n > 0 {
        for_each_index(&outer, |idx| {
            starts.push(idx.iter().zip(&st).map(|(i, s)| i * s).sum());
        });
    }
    Ok((starts, n, st[a]))
}

/// The sort comparator's key order: floats with -0.0 as 0.0 and every NaN as one NaN,
/// after +inf (JAX's total order), unsigned 64-bit integers by their bits.
fn key_order(x: &HostArray, p: usize, q: usize) -> Ordering {
    fn canonical(v: f64) -> f64 {
        if v == 0.0 {
            0.0
        } else if v.is_nan() {
            f64::NAN
        } else {
            v
        }
    }
    match &x.data {
        HostData::Bool(v) => v[p].cmp(&v[q]),
        HostData::Int(v) => int_cmp(x.dtype, v[p], v[q]),
        HostData::Float(v) => canonical(v[p]).total_cmp(&canonical(v[q])),
    }
}

/// `sort`: every operand permuted along `dimension` as the first `num_keys` sort
/// lexicographically (stably: an unstable sort may order ties any way).
pub(super) fn sort(ins: &[&HostArray], dimension: i64, num_keys: i64) -> R<Vec<HostArray>> {
    let first = ins
        .first()
        .ok_or_else(|| internal("sort without operands"))?;
    let keys = ins
        .get(..usize::try_from(num_keys).unwrap_or(0))
        .filter(|k| !k.is_empty())
        .ok_or_else(|| internal(format!("num_keys {num_keys} is out of range")))?;
    if ins.iter().any(|a| a.shape != first.shape) {
        return Err(internal("sort operands of different shapes"));
    }
    let (starts, n, stride) = lines(first, dimension)?;
    let mut positions: Vec<usize> = (0..first.len()).collect();
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for base in starts {
        order.clear();
        order.extend((0..n).map(|k| base + k * stride));
        order.sort_by(|&p, &q| {
            keys.iter()
                .map(|k| key_order(k, p, q))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        });
        for (k, &p) in order.iter().enumerate() {
            positions[base + k * stride] = p;
        }
    }
    ins.iter()
        .map(|x| {
            Ok(HostArray {
                shape: x.shape.clone(),
                dtype: x.dtype,
                data: gather(x, &positions)?,
            })
        })
        .collect()
}

/// `top_k`: the `k` largest elements along `axis`, largest first, in XLA's total order
/// (+NaN above +inf, -0.0 below 0.0, -NaN below -inf; ties by position), and their
/// positions (`i32`).
pub(super) fn top_k(x: &HostArray, axis: i64, k: i64) -> R<Vec<HostArray>> {
    let (starts, n, stride) = lines(x, axis)?;
    let k = usize::try_from(k)
        .ok()
        .filter(|&k| k <= n)
        .ok_or_else(|| internal(format!("top_k's k {k} is out of range")))?;
    let a = usize::try_from(axis).map_err(|_| internal("negative axis"))?;
    let mut dims = dims_of(&x.shape);
    let Some(d) = dims.get_mut(a) else {
        return Err(internal("top_k's axis is out of range"));
    };
    *d = k;
    let out_strides = strides(&dims);
    let out_stride = out_strides[a];
    let total: usize = dims.iter().product();
    let mut positions = vec![0usize; total];
    let mut index = vec![0i64; total];
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for &base in &starts {
        order.clear();
        order.extend(0..n);
        let greater = |p: usize, q: usize| -> Ordering {
            let (p, q) = (base + p * stride, base + q * stride);
            match &x.data {
                HostData::Bool(v) => v[q].cmp(&v[p]),
                HostData::Int(v) => int_cmp(x.dtype, v[q], v[p]),
                HostData::Float(v) => v[q].total_cmp(&v[p]),
            }
        };
        order.sort_by(|&p, &q| greater(p, q));
        // The line's first output position: the same multi-index with a size-k axis.
        let inner = stride;
        let out_base = (base / (inner * n)) * (inner * k) + base % inner;
        for (j, &p) in order.iter().take(k).enumerate() {
            positions[out_base + j * out_stride] = base + p * stride;
            index[out_base + j * out_stride] = p as i64;
        }
    }
    let shape = super::ops::shape_of(&dims)?;
    Ok(vec![
        HostArray {
            shape: shape.clone(),
            dtype: x.dtype,
            data: gather(x, &positions)?,
        },
        HostArray {
            shape,
            dtype: DType::I32,
            data: HostData::Int(index),
        },
    ])
}

fn logaddexp(a: f64, b: f64) -> f64 {
    let d = a - b;
    if d.is_nan() {
        a + b // both infinite of one sign (or a NaN): their sum
    } else {
        fmax(a, b) + (-d.abs()).exp().ln_1p()
    }
}

fn combine_float(prim: Builtin, d: DType, a: f64, b: f64) -> f64 {
    let v = match prim {
        Builtin::Cumsum => a + b,
        Builtin::Cumprod => a * b,
        Builtin::Cummax => fmax(a, b),
        Builtin::Cummin => fmin(a, b),
        _ => logaddexp(a, b),
    };
    round_float(d, v)
}

fn combine_int(prim: Builtin, d: DType, a: i64, b: i64) -> i64 {
    match prim {
        Builtin::Cumsum => wrap_int(d, a.wrapping_add(b)),
        Builtin::Cumprod => wrap_int(d, a.wrapping_mul(b)),
        Builtin::Cummax => int_max(d, a, b),
        _ => int_min(d, a, b),
    }
}

/// A cumulative primitive along `axis`, from the last element back when `reverse`.
pub(super) fn cumulative(prim: Builtin, x: &HostArray, axis: i64, reverse: bool) -> R<HostArray> {
    let (starts, n, stride) = lines(x, axis)?;
    let order = |base: usize| -> Vec<usize> {
        let mut ps: Vec<usize> = (0..n).map(|k| base + k * stride).collect();
        if reverse {
            ps.reverse();
        }
        ps
    };
    let d = x.dtype;
    let data = match &x.data {
        HostData::Float(v) => {
            let mut out = v.clone();
            for &base in &starts {
                let ps = order(base);
                for w in ps.windows(2) {
                    out[w[1]] = combine_float(prim, d, out[w[0]], v[w[1]]);
                }
            }
            HostData::Float(out)
        }
        HostData::Int(v) if prim != Builtin::Cumlogsumexp => {
            let mut out = v.clone();
            for &base in &starts {
                let ps = order(base);
                for w in ps.windows(2) {
                    out[w[1]] = combine_int(prim, d, out[w[0]], v[w[1]]);
                }
            }
            HostData::Int(out)
        }
        _ => {
            return Err(internal(format!(
                "{} does not apply to dtype {d}",
                prim.name()
            )))
        }
    };
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: d,
        data,
    })
}
