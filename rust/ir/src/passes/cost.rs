//! A static cost model: the floating-point operations a jaxpr performs, counted from its
//! types without running it (the FLOPS-estimating interpretation of the mini-JAX notes).
//!
//! Elementwise float arithmetic, transcendentals and comparisons count one operation per
//! output element; float reductions count one per combined element; `dot_general` counts
//! a multiply and an add per term, `conv_general_dilated` a multiply and an add per window
//! tap that lands on the lhs (XLA's count); data movement and integer arithmetic count nothing.
//! `jit` counts its jaxpr, `cond` its most expensive branch, `scan` `length` times its
//! body. A `while` loop's trip count depends on data: it counts one iteration of its
//! condition and body, and the report says how many such loops there are.
//!
//! A `shard_map` counts its body times the number of devices of its mesh (the work of
//! all devices). Collectives move data, which the model does not count; the reducing
//! ones (`psum`, `pmax`, `pmin` and `reduce_scatter` of floats) count one operation per
//! element of their operand on each device (the combining, whatever the group size;
//! a lower bound on a ring's `n - 1` per element).
//!
//! Nested jaxprs are costed once each, bottom-up from an explicit stack.

use crate::aval::AbstractValue;
use crate::jaxpr::{ClosedJaxpr, Eqn, Jaxpr};
use crate::params::Param;
use crate::primitive::{Builtin, Family, Primitive};
use std::collections::HashMap;
use std::sync::Arc;

/// What [`cost`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Floating-point operations (one iteration of each `while` loop).
    pub flops: f64,
    /// `while` loops met (their trip counts are not known statically).
    pub while_loops: u64,
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            flops: self.flops + o.flops,
            while_loops: self.while_loops + o.while_loops,
        }
    }
}

fn size(a: &AbstractValue) -> f64 {
    a.shape.size() as f64
}

fn subs(e: &Eqn) -> Vec<&Arc<Jaxpr>> {
    e.sub_jaxprs().map(ClosedJaxpr::jaxpr).collect()
}

/// The cost of one jaxpr (and everything nested in it).
pub fn cost(jaxpr: &Jaxpr) -> Cost {
    // Post-order over distinct nested jaxprs, then one pass per jaxpr.
    let mut done: HashMap<*const Jaxpr, Cost> = HashMap::new();
    let mut stack: Vec<(&Jaxpr, bool)> = vec![(jaxpr, false)];
    while let Some((j, expanded)) = stack.pop() {
        let key: *const Jaxpr = j;
        if done.contains_key(&key) {
            continue;
        }
        if !expanded {
            stack.push((j, true));
            for e in j.eqns() {
                for s in subs(e) {
                    if !done.contains_key(&Arc::as_ptr(s)) {
                        stack.push((s.as_ref(), false));
                    }
                }
            }
            continue;
        }
        let total = j
            .eqns()
            .iter()
            .fold(Cost::default(), |acc, e| acc + eqn_cost(j, e, &done));
        done.insert(key, total);
    }
    done.get(&(jaxpr as *const Jaxpr))
        .copied()
        .unwrap_or_default()
}

fn eqn_cost(j: &Jaxpr, e: &Eqn, done: &HashMap<*const Jaxpr, Cost>) -> Cost {
    let Primitive::Builtin(b) = e.primitive() else {
        return Cost::default();
    };
    let sub = |name: &str| -> Cost {
        match e.params().get(name) {
            Some(Param::Jaxpr(cj)) => done
                .get(&Arc::as_ptr(cj.jaxpr()))
                .copied()
                .unwrap_or_default(),
            _ => Cost::default(),
        }
    };
    let ins: Vec<AbstractValue> = e.inputs().iter().map(|&a| j.atom_aval(a)).collect();
    let out = e.outvars().first().map(|&v| j.var_aval(v).clone());
    let float_in = ins.first().is_some_and(|a| a.dtype.is_float());
    let flops = |n: f64| Cost {
        flops: n,
        while_loops: 0,
    };
    match b.family() {
        Family::UnaryFloat
        | Family::UnarySigned
        | Family::UnaryNumeric
        | Family::BinaryNumeric
        | Family::BinaryFloat
        | Family::BinaryFloatOnly
        | Family::BinaryAny
        | Family::Comparison
            if float_in && *b != Builtin::Copy =>
        {
            flops(out.as_ref().map_or(0.0, size))
        }
        Family::Special => match b {
            Builtin::IntegerPow if float_in => {
                let y = match e.params().get("y") {
                    Some(Param::Int(y)) => y.unsigned_abs(),
                    _ => 0,
                };
                // Square-and-multiply: squarings plus extra multiplies (plus a division
                // for negative powers, counted as one).
                let steps = if y == 0 {
                    0
                } else {
                    63 - y.leading_zeros() as u64 + y.count_ones() as u64 - 1
                };
                flops(out.as_ref().map_or(0.0, size) * steps.max(1) as f64)
            }
            Builtin::Clamp if ins.get(1).is_some_and(|a| a.dtype.is_float()) => {
                flops(2.0 * out.as_ref().map_or(0.0, size))
            }
            Builtin::ReduceSum | Builtin::ReduceMax | Builtin::ReduceMin | Builtin::ReduceProd
                if float_in =>
            {
                flops(size(&ins[0]) - out.as_ref().map_or(0.0, size))
            }
            Builtin::Argmax | Builtin::Argmin if float_in => flops(size(&ins[0])),
            // A running combination: one operation per element after the first of each
            // line (sort and top_k compare and move data: no flops).
            Builtin::Cumsum
            | Builtin::Cumprod
            | Builtin::Cummax
            | Builtin::Cummin
            | Builtin::Cumlogsumexp
                if float_in =>
            {
                let n = match e.params().get("axis") {
                    Some(Param::Int(a)) => {
                        ins[0].shape.dims().get(*a as usize).copied().unwrap_or(0)
                    }
                    _ => 0,
                };
                let total = size(&ins[0]);
                flops(if n > 0 { total - total / n as f64 } else { 0.0 })
            }
            // A windowed reduction combines each window's elements: window size - 1
            // operations per output element (times the reducer's: a comparison and two
            // selects for `select_and_gather_add`'s pairs, as XLA counts its lowering); a
            // select-and-scatter compares across each source element's window and adds
            // the element once.
            Builtin::ReduceWindowSum
            | Builtin::ReduceWindowMax
            | Builtin::ReduceWindowMin
            | Builtin::SelectAndGatherAdd
                if out.as_ref().is_some_and(|o| o.dtype.is_float()) =>
            {
                let window = window_size(*b, e, ins.first().map_or(0, |a| a.shape.rank()));
                let per = if *b == Builtin::SelectAndGatherAdd {
                    3.0
                } else {
                    1.0
                };
                flops(out.as_ref().map_or(0.0, size) * (window - 1.0).max(0.0) * per)
            }
            Builtin::ReduceWindow => {
                let window = window_size(*b, e, ins.first().map_or(0, |a| a.shape.rank()));
                let per = sub("jaxpr").flops;
                flops(out.as_ref().map_or(0.0, size) * (window - 1.0).max(0.0) * per)
            }
            Builtin::SelectAndScatterAdd if float_in => {
                let window = window_size(*b, e, ins.first().map_or(0, |a| a.shape.rank()));
                let n = size(&ins[0]);
                flops(n * (window - 1.0).max(0.0) + n)
            }
            Builtin::Round | Builtin::IsFinite if float_in => flops(out.as_ref().map_or(0.0, size)),
            // A rounding per element, as `round` (nextafter counts as a binary float op;
            // the logical reductions are integer work, free as the other bit operations).
            Builtin::ReducePrecision if float_in => flops(out.as_ref().map_or(0.0, size)),
            Builtin::AddAny if float_in => flops(out.as_ref().map_or(0.0, size)),
            Builtin::DotGeneral => {
                let contracted: f64 = match e.params().get("dimension_numbers") {
                    Some(Param::DotDims(dn)) => dn
                        .lhs_contracting
                        .iter()
                        .map(|&d| ins[0].shape.dims().get(d as usize).copied().unwrap_or(1) as f64)
                        .product(),
                    _ => 1.0,
                };
                let is_float = out.as_ref().is_some_and(|o| o.dtype.is_float());
                if is_float {
                    flops(2.0 * out.as_ref().map_or(0.0, size) * contracted)
                } else {
                    Cost::default()
                }
            }
            // XLA's count: a multiply and an add per window tap that lands on the lhs (taps
            // on padding or on the lhs dilation's holes are free).
            Builtin::ConvGeneralDilated => {
                let (Some(o), Some(l), Some(r)) = (out.as_ref(), ins.first(), ins.get(1)) else {
                    return Cost::default();
                };
                match crate::primitive::ConvGeometry::from_params(e.params()) {
                    Ok(g) if o.dtype.is_float() => {
                        flops(2.0 * g.multiply_adds(l.shape.dims(), r.shape.dims(), o.shape.dims()))
                    }
                    _ => Cost::default(),
                }
            }
            // The linear-algebra kernels, by LAPACK's operation counts per matrix of the
            // batch: potrf n³/3, trsm m²n (m the triangular side), getrf k²(max(m, n) - k/3),
            // syevd 9n³, geqrf and orgqr (householder_product) 2k²(max(m, n) - k/3) each, gesdd about
            // 4k²(max(m, n)) + 8k³ (bidiagonalization and divide and conquer).
            Builtin::Cholesky
            | Builtin::TriangularSolve
            | Builtin::Lu
            | Builtin::Eigh
            | Builtin::Qr
            | Builtin::Svd
            | Builtin::Geqrf
            | Builtin::HouseholderProduct
            | Builtin::Geqp3 => {
                let dims = ins
                    .first()
                    .map(|a| a.shape.dims().to_vec())
                    .unwrap_or_default();
                let r = dims.len();
                if r < 2 {
                    return Cost::default();
                }
                let (m, n) = (dims[r - 2] as f64, dims[r - 1] as f64);
                let batch: f64 = dims[..r - 2].iter().map(|&d| d as f64).product();
                let per = match b {
                    Builtin::Cholesky => n * n * n / 3.0,
                    // syevd with eigenvectors: about 9n³ (tridiagonalization, divide and
                    // conquer, back-transformation).
                    Builtin::Eigh => 9.0 * n * n * n,
                    Builtin::Svd => {
                        let k = m.min(n);
                        4.0 * k * k * m.max(n) + 8.0 * k * k * k
                    }
                    Builtin::Qr => {
                        let k = m.min(n);
                        4.0 * k * k * (m.max(n) - k / 3.0)
                    }
                    Builtin::Geqrf | Builtin::HouseholderProduct | Builtin::Geqp3 => {
                        let k = m.min(n);
                        2.0 * k * k * (m.max(n) - k / 3.0)
                    }
                    Builtin::TriangularSolve => {
                        let bsize = ins.get(1).map_or(0.0, size) / batch.max(1.0);
                        n * bsize
                    }
                    _ => {
                        let k = m.min(n);
                        k * k * (m.max(n) - k / 3.0)
                    }
                };
                flops(batch * per)
            }
            // Gather, scatter, rev and pad move data; a combining scatter does one operation
            // per update element.
            Builtin::ScatterAdd
            | Builtin::ScatterSub
            | Builtin::ScatterMul
            | Builtin::ScatterMin
            | Builtin::ScatterMax
                if float_in =>
            {
                flops(ins.get(2).map_or(0.0, size))
            }
            Builtin::Jit | Builtin::Remat => sub("jaxpr"),
            Builtin::ShardMap => {
                let devices = match e.params().get("mesh") {
                    Some(Param::Mesh(m)) => m.size() as f64,
                    _ => 1.0,
                };
                let c = sub("jaxpr");
                Cost {
                    flops: devices * c.flops,
                    while_loops: c.while_loops,
                }
            }
            Builtin::Psum | Builtin::Pmax | Builtin::Pmin | Builtin::ReduceScatter if float_in => {
                flops(ins.first().map_or(0.0, size))
            }
            Builtin::CustomJvpCall | Builtin::CustomVjpCall => sub("call_jaxpr"),
            Builtin::Cond => match e.params().get("branches") {
                Some(Param::Jaxprs(brs)) => brs
                    .iter()
                    .map(|cj| {
                        done.get(&Arc::as_ptr(cj.jaxpr()))
                            .copied()
                            .unwrap_or_default()
                    })
                    .fold(
                        Cost::default(),
                        |best, c| if c.flops > best.flops { c } else { best },
                    ),
                _ => Cost::default(),
            },
            // Integer arithmetic (threefry2x32's rounds: 43 operations per element as
            // XLA's cost analysis counts them) and reading bits as another dtype: free
            // in this model of floating-point operations, as population_count and clz.
            Builtin::Threefry2x32 | Builtin::BitcastConvertType => Cost::default(),
            // The key primitives: threefry's integer rounds, or moving key words.
            Builtin::RandomSeed
            | Builtin::RandomWrap
            | Builtin::RandomUnwrap
            | Builtin::RandomBits
            | Builtin::RandomSplit
            | Builtin::RandomFoldIn
            | Builtin::RandomClone => Cost::default(),
            Builtin::While => {
                let c = sub("cond_jaxpr") + sub("body_jaxpr");
                Cost {
                    flops: c.flops,
                    while_loops: c.while_loops + 1,
                }
            }
            Builtin::Scan => {
                let n = match e.params().get("length") {
                    Some(Param::Int(n)) => *n as f64,
                    _ => 0.0,
                };
                let c = sub("jaxpr");
                Cost {
                    flops: n * c.flops,
                    while_loops: c.while_loops,
                }
            }
            _ => Cost::default(),
        },
        _ => Cost::default(),
    }
}

/// The element count of a windowed equation's window (1 if its params are malformed).
fn window_size(b: Builtin, e: &crate::jaxpr::Eqn, rank: usize) -> f64 {
    crate::primitive::Window::from_params(b, e.params(), rank).map_or(1.0, |w| w.size() as f64)
}
