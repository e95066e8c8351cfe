//! `conv_general_dilated` on host arrays: direct loops over the output, the input
//! features of its group and the kernel window (XLA's semantics: the lhs dilated by
//! `lhs_dilation` and padded, the kernel dilated by `rhs_dilation`, windows every
//! `window_strides`; feature groups split the lhs features and the kernel's output
//! features, batch groups split the lhs batch and the kernel's output features).
//!
//! Both operands are converted to the result dtype first (as `dot_general`); floats
//! accumulate in `f64` and are rounded once, integers wrap, `bool` is OR of ANDs.

use super::array::{HostArray, HostData};
use super::numeric::{round_float, wrap_int};
use super::ops::{convert, dims_of, for_each_index, internal, shape_of, strides};
use super::EvalError;
use crate::params::{Param, Params};
use crate::primitive::ConvGeometry;

type R<T> = Result<T, EvalError>;

/// The operands' layout, read once: everything the loops need.
struct Plan {
    out_dims: Vec<usize>,
    /// The output's dimensions in (batch, feature, spatial...) order.
    out_trans: Vec<usize>,
    /// The output's row-major strides, in (batch, feature, spatial...) order.
    out_strides: Vec<usize>,
    /// The lhs's strides and sizes in (batch, feature, spatial...) order.
    lhs_strides: Vec<usize>,
    lhs_sizes: Vec<usize>,
    /// The rhs's strides in (out feature, in feature, spatial...) order.
    rhs_strides: Vec<usize>,
    /// The kernel window: each position's spatial index and rhs offset.
    window: Vec<(Vec<usize>, usize)>,
    in_group: usize,
    feat_per_fgroup: usize,
    feat_per_bgroup: usize,
    batch_per_group: usize,
}

fn plan(lhs: &[usize], rhs: &[usize], g: &ConvGeometry<'_>) -> R<Plan> {
    let to_usize = |xs: &[i64]| -> R<Vec<usize>> {
        xs.iter()
            .map(|&x| usize::try_from(x).map_err(|_| internal("negative conv param")))
            .collect()
    };
    let (ls, rs, os) = (
        to_usize(&g.dn.lhs_spec)?,
        to_usize(&g.dn.rhs_spec)?,
        to_usize(&g.dn.out_spec)?,
    );
    let out_i64 = g
        .out_dims(
            &lhs.iter().map(|&d| d as i64).collect::<Vec<_>>(),
            &rhs.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        )
        .map_err(|e| internal(format!("conv_general_dilated: {e}")))?;
    let out_dims: Vec<usize> = out_i64.iter().map(|&d| d as usize).collect();
    let (lst, rst, ost) = (strides(lhs), strides(rhs), strides(&out_dims));
    let n = g.spatial();
    let kernel: Vec<usize> = (0..n).map(|d| rhs[rs[d + 2]]).collect();
    let mut window: Vec<(Vec<usize>, usize)> = Vec::new();
    // Only when some output element sums a product: the window's size is then within
    // the evaluator's work limit (an input feature count of 0 leaves the kernel's
    // spatial sizes unbounded).
    let some_products = rhs[rs[1]] > 0 && !out_dims.contains(&0);
    for_each_index(if some_products { &kernel[..] } else { &[0] }, |k| {
        let off = k.iter().enumerate().map(|(d, &x)| x * rst[rs[d + 2]]).sum();
        window.push((k.to_vec(), off));
    });
    let out_features = rhs[rs[0]];
    let fgc = g.feature_group_count.max(1) as usize;
    let bgc = g.batch_group_count.max(1) as usize;
    Ok(Plan {
        out_trans: os.iter().map(|&a| out_dims[a]).collect(),
        out_strides: os.iter().map(|&a| ost[a]).collect(),
        lhs_strides: ls.iter().map(|&a| lst[a]).collect(),
        lhs_sizes: ls.iter().map(|&a| lhs[a]).collect(),
        rhs_strides: rs.iter().map(|&a| rst[a]).collect(),
        window,
        in_group: rhs[rs[1]],
        feat_per_fgroup: out_features / fgc,
        feat_per_bgroup: out_features / bgc,
        batch_per_group: lhs[ls[0]] / bgc,
        out_dims,
    })
}

/// The sums of products, one per output element in the output's row-major order.
fn run<T: Copy>(
    a: &[T],
    b: &[T],
    plan: &Plan,
    g: &ConvGeometry<'_>,
    zero: T,
    mul_add: impl Fn(T, T, T) -> T,
) -> R<Vec<T>> {
    let total: usize = plan.out_dims.iter().product();
    let mut out = vec![zero; total];
    let n = g.spatial();
    let (lst, rst) = (&plan.lhs_strides, &plan.rhs_strides);
    let mut bad = false;
    for_each_index(&plan.out_trans, |o| {
        let (batch, f) = (o[0], o[1]);
        let fg = f.checked_div(plan.feat_per_fgroup).unwrap_or(0);
        let bg = f.checked_div(plan.feat_per_bgroup).unwrap_or(0);
        let lb = bg * plan.batch_per_group + batch;
        let mut acc = zero;
        for (k, koff) in &plan.window {
            // The lhs spatial offset, or none when the tap falls on padding or on a hole
            // of the lhs dilation.
            let mut loff = 0usize;
            let mut inside = true;
            for d in 0..n {
                let pos = (o[d + 2] as i64)
                    .saturating_mul(g.window_strides[d])
                    .saturating_add((k[d] as i64).saturating_mul(g.rhs_dilation[d]))
                    .saturating_sub(g.padding[d].0);
                let dil = g.lhs_dilation[d];
                if pos < 0 || pos % dil != 0 || (pos / dil) as usize >= plan.lhs_sizes[d + 2] {
                    inside = false;
                    break;
                }
                loff += (pos / dil) as usize * lst[d + 2];
            }
            if !inside {
                continue;
            }
            for i in 0..plan.in_group {
                let c = fg * plan.in_group + i;
                let l = lb * lst[0] + c * lst[1] + loff;
                let r = f * rst[0] + i * rst[1] + koff;
                match (a.get(l), b.get(r)) {
                    (Some(&p), Some(&q)) => acc = mul_add(acc, p, q),
                    _ => bad = true,
                }
            }
        }
        let off: usize = o.iter().zip(&plan.out_strides).map(|(&x, &s)| x * s).sum();
        match out.get_mut(off) {
            Some(slot) => *slot = acc,
            None => bad = true,
        }
    });
    if bad {
        return Err(internal("conv_general_dilated position out of range"));
    }
    Ok(out)
}

/// `conv_general_dilated` of two operands the typechecker accepted.
pub(super) fn conv_general_dilated(l: &HostArray, r: &HostArray, params: &Params) -> R<HostArray> {
    let g = ConvGeometry::from_params(params)
        .map_err(|e| internal(format!("conv_general_dilated: {e}")))?;
    let dt = match params.get("preferred_element_type") {
        Some(Param::DType(d)) => *d,
        _ => l.dtype,
    };
    let l = convert(l, dt)?;
    let r = convert(r, dt)?;
    let plan = plan(&dims_of(&l.shape), &dims_of(&r.shape), &g)?;
    let data = match (&l.data, &r.data) {
        (HostData::Float(a), HostData::Float(b)) => HostData::Float(
            run(a, b, &plan, &g, 0.0, |s, p, q| s + p * q)?
                .into_iter()
                .map(|s| round_float(dt, s))
                .collect(),
        ),
        (HostData::Int(a), HostData::Int(b)) => HostData::Int(
            run(a, b, &plan, &g, 0, |s, p, q| {
                s.wrapping_add(p.wrapping_mul(q))
            })?
            .into_iter()
            .map(|s| wrap_int(dt, s))
            .collect(),
        ),
        (HostData::Bool(a), HostData::Bool(b)) => {
            HostData::Bool(run(a, b, &plan, &g, false, |s, p, q| s | (p & q))?)
        }
        _ => return Err(internal("conv_general_dilated operands differ in kind")),
    };
    Ok(HostArray {
        shape: shape_of(&plan.out_dims)?,
        dtype: dt,
        data,
    })
}
