//! A static cost model: the operations a jaxpr performs and the bytes it moves, counted
//! from its types without running it (the FLOPS-estimating interpretation of the mini-JAX
//! notes), as XLA's cost analysis counts the same program before optimization.
//!
//! - **flops**: every elementwise operation counts one per output element, whatever its
//!   dtype (integer, bool and comparison operations included; `copy` and `stop_gradient`
//!   are free); reductions count one per combined element (elements in minus elements
//!   out); `dot_general` a multiply and an add per term; `conv_general_dilated` a multiply
//!   and an add per window tap that lands on the lhs; `integer_pow` its multiplies
//!   (square-and-multiply, plus a division for a negative power); data movement (reshape,
//!   transpose, broadcast, gather, ...) counts none.
//! - **transcendentals**: `exp`, `log`, `log1p`, `expm1`, `sin`, `cos`, `tan`, `tanh`,
//!   `atan`, `sqrt`, `rsqrt`, `cbrt`, `pow`, `atan2` and `erf` count one per element and no
//!   flops; `logistic` one and three flops (JAX lowers it as `neg`, `exp`, `add`, `div`).
//! - **bytes_accessed**: per equation, the bytes of its operands plus those of its outputs
//!   (control-flow and call equations count only what their bodies access); `transpose`
//!   counts none, as XLA counts it (a change of layout), `copy` and `stop_gradient` none.
//!
//! `jit` counts its jaxpr, `scan` `length` times its body, `cond` its most expensive
//! branch. A `while` loop's trip count depends on data: it counts one iteration of its
//! condition and body, and the report says how many such loops there are (with a
//! batched predicate, also what JAX's lowering adds per iteration: the condition again,
//! a `reduce_or` of the predicate and a `select_n` per carry). A `shard_map`
//! counts its body times the number of devices of its mesh (the work of all devices).
//! Collectives' flops: the reducing ones (`psum`, `pmax`, `pmin` and `reduce_scatter` of
//! floats) count one operation per element of their operand on each device (the
//! combining, whatever the group size; a lower bound on a ring's `n - 1` per element).
//!
//! # Deliberate differences from XLA
//!
//! - `scan` counts its body `length` times; XLA counts the `while` loop JAX lowers it to
//!   once (with its counter's increment and comparison).
//! - `cond` counts its costliest branch (by flops, then transcendentals, then bytes),
//!   so that the per-primitive breakdown is one branch's; XLA takes each count's maximum
//!   over the branches separately (flops of one branch with transcendentals of another).
//! - The special functions XLA expands from CHLO (`lgamma`, `digamma`, `erf_inv`, `erfc`,
//!   `igamma`, `igammac`, `igamma_grad_a`, `exp2`, `asin`, `acos`, `sinh`, `cosh`,
//!   `asinh`, `acosh`, `atanh`) count one transcendental per element and no flops; XLA
//!   counts their expansions (lgamma of f32: 53 flops and 4 transcendentals per element).
//!   `nextafter` counts one flop per element (XLA: its expansion, 24).
//! - An implicitly broadcast operand of an elementwise equation (a scalar, or an array
//!   with dimensions of size 1) is read as if broadcast: its bytes count at the output's
//!   size. The `broadcast` (and `reshape`) equations XLA's lowering inserts for it are not
//!   counted: for `x * 1.5` of `f32[128]`, 1,536 bytes where XLA counts 2,052.
//! - The jaxpr is counted as it is (`ferrax.cost_analysis` removes its dead code first, as
//!   JAX's lowering does); JAX's lowering also drops multiplications by a broadcast one
//!   (in the transposes of `grad`), which this model counts.
//! - XLA counts 8 bytes per output of a program with several (the root tuple's table).
//! - The running reductions (`cumsum`, ...) count `n - 1` operations per line of `n`; XLA
//!   on CPU counts the windowed reduction JAX lowers them to (`n(n - 1)/2` windows'
//!   worth, 16,256 flops for a cumsum of `f32[128]` where this model counts 127).
//! - `argmax`/`argmin` count nine operations per combined element of floats, seven of
//!   integers, as XLA counts JAX's variadic-reduce lowering (its bytes are not matched:
//!   XLA also reads an iota of indices). Likewise `logistic`'s flops are its lowering's
//!   but its bytes one equation's (XLA: four operations' and a broadcast's).
//! - `threefry2x32` and the key primitives count no flops (XLA counts threefry's
//!   integer rounds, 43 operations per element); the linear-algebra kernels count
//!   LAPACK's operation counts (XLA sees custom calls and counts none).
//! - Reductions count one element of input bytes for their initial value, as XLA's
//!   `reduce` reads it; the windowed and running reductions and scatters do not.
//!
//! Nested jaxprs are costed once each, bottom-up from an explicit stack; their costs are
//! merged into the parent's per-primitive breakdown, scaled as above.

use crate::aval::AbstractValue;
use crate::jaxpr::{ClosedJaxpr, Eqn, Jaxpr};
use crate::params::Param;
use crate::primitive::{Builtin, Family, Primitive};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What [`cost`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Operations that are not transcendental, of every dtype (one iteration of each
    /// `while` loop).
    pub flops: f64,
    /// Transcendental function evaluations, one per element.
    pub transcendentals: f64,
    /// Bytes read and written: each equation's operands plus its outputs.
    pub bytes_accessed: f64,
    /// `while` loops met (their trip counts are not known statically).
    pub while_loops: u64,
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            flops: self.flops + o.flops,
            transcendentals: self.transcendentals + o.transcendentals,
            bytes_accessed: self.bytes_accessed + o.bytes_accessed,
            while_loops: self.while_loops + o.while_loops,
        }
    }
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, o: Cost) {
        *self = *self + o;
    }
}

impl Cost {
    /// The cost `k` times over (the `while` loop count is not scaled: the loops are the
    /// same ones).
    pub fn scaled(self, k: f64) -> Cost {
        Cost {
            flops: k * self.flops,
            transcendentals: k * self.transcendentals,
            bytes_accessed: k * self.bytes_accessed,
            while_loops: self.while_loops,
        }
    }

    fn flops(n: f64) -> Cost {
        Cost {
            flops: n,
            ..Cost::default()
        }
    }

    fn transcendentals(n: f64) -> Cost {
        Cost {
            transcendentals: n,
            ..Cost::default()
        }
    }

    /// The order in which `cond` picks its costliest branch: flops, then
    /// transcendentals, then bytes.
    fn key(&self) -> (f64, f64, f64) {
        (self.flops, self.transcendentals, self.bytes_accessed)
    }
}

/// What [`cost_report`] found: the totals and their split by primitive.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostReport {
    /// The cost of the whole jaxpr.
    pub total: Cost,
    /// The cost of the equations of each primitive, those of nested jaxprs included
    /// (scaled as the totals are; `while_loops` is counted in `total` only). Control-flow
    /// and call primitives, whose cost is their bodies', have no entry of their own.
    pub by_primitive: BTreeMap<String, Cost>,
}

impl CostReport {
    /// Adds `k` times `other`.
    fn add_scaled(&mut self, other: &CostReport, k: f64) {
        self.total += other.total.scaled(k);
        for (name, c) in &other.by_primitive {
            *self.by_primitive.entry(name.clone()).or_default() += c.scaled(k);
        }
    }

    /// Adds one equation's own cost under its primitive's name.
    fn add_own(&mut self, name: &str, c: Cost) {
        self.total += c;
        *self.by_primitive.entry(name.to_owned()).or_default() += c;
    }
}

fn size(a: &AbstractValue) -> f64 {
    a.shape.size() as f64
}

fn bytes(a: &AbstractValue) -> f64 {
    size(a) * a.dtype.size_bytes() as f64
}

fn subs(e: &Eqn) -> Vec<&Arc<Jaxpr>> {
    e.sub_jaxprs().map(ClosedJaxpr::jaxpr).collect()
}

/// The cost of one jaxpr (and everything nested in it).
///
/// ```
/// use ferrax_ir::{passes::cost, text::parse_jaxpr};
/// let j = parse_jaxpr("{ lambda ; a:f32[8]. let b:f32[8] = sin a; c:f32[8] = mul b a in (c,) }")?;
/// let c = cost(&j);
/// assert_eq!((c.flops, c.transcendentals), (8.0, 8.0)); // the mul's 8, sin's 8
/// assert_eq!(c.bytes_accessed, 4.0 * (8.0 + 8.0) + 4.0 * (8.0 + 8.0 + 8.0)); // f32s read and written
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn cost(jaxpr: &Jaxpr) -> Cost {
    cost_report(jaxpr).total
}

/// The cost of one jaxpr (and everything nested in it), with its split by primitive.
///
/// # Examples
/// ```
/// use ferrax_ir::{passes::cost_report, text::parse_jaxpr};
/// let j = parse_jaxpr(
///     "{ lambda ; a:f32[8]. let b:f32[8] = jit[name=f jaxpr={ lambda ; c:f32[8]. let \
///      d:f32[8] = sin c in (d,) }] a; e:f32[8] = mul b a in (e,) }",
/// )?;
/// let r = cost_report(&j);
/// // A call costs what its body does, under the body's primitives; `jit` has no entry.
/// let names: Vec<&str> = r.by_primitive.keys().map(String::as_str).collect();
/// assert_eq!(names, ["mul", "sin"]);
/// assert_eq!(r.by_primitive["sin"].transcendentals, 8.0);
/// assert_eq!(r.by_primitive["mul"].flops, r.total.flops);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn cost_report(jaxpr: &Jaxpr) -> CostReport {
    let done = nested_reports(jaxpr);
    let mut report = CostReport::default();
    for e in jaxpr.eqns() {
        report.add_scaled(&eqn_report(jaxpr, e, &done), 1.0);
    }
    report
}

/// The report of each top-level equation of `jaxpr`, in order (nested jaxprs costed once
/// each): what a caller costing some equations differently (by running them) adds up.
///
/// # Examples
/// ```
/// use ferrax_ir::passes::{cost, equation_reports};
/// use ferrax_ir::text::parse_jaxpr;
/// let j = parse_jaxpr("{ lambda ; a:f32[8]. let b:f32[8] = sin a; c:f32[8] = mul b a in (c,) }")?;
/// let reports = equation_reports(&j);
/// assert_eq!(reports.len(), 2);
/// assert_eq!((reports[0].total.transcendentals, reports[1].total.flops), (8.0, 8.0));
/// // Together they are the whole jaxpr's cost.
/// let sum = reports[0].total.bytes_accessed + reports[1].total.bytes_accessed;
/// assert_eq!(sum, cost(&j).bytes_accessed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn equation_reports(jaxpr: &Jaxpr) -> Vec<CostReport> {
    let done = nested_reports(jaxpr);
    jaxpr
        .eqns()
        .iter()
        .map(|e| eqn_report(jaxpr, e, &done))
        .collect()
}

type Done = HashMap<*const Jaxpr, CostReport>;

/// The reports of the distinct jaxprs nested in `jaxpr` (at any depth), post-order from
/// an explicit stack.
fn nested_reports(jaxpr: &Jaxpr) -> Done {
    let mut done: Done = HashMap::new();
    let mut stack: Vec<(&Jaxpr, bool)> = jaxpr
        .eqns()
        .iter()
        .flat_map(subs)
        .map(|s| (s.as_ref(), false))
        .collect();
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
        let mut total = CostReport::default();
        for e in j.eqns() {
            total.add_scaled(&eqn_report(j, e, &done), 1.0);
        }
        done.insert(key, total);
    }
    done
}

/// One equation's report: its own cost, or its bodies' for control flow and calls.
fn eqn_report(j: &Jaxpr, e: &Eqn, done: &Done) -> CostReport {
    let empty = CostReport::default();
    let sub = |name: &str| -> &CostReport {
        match e.params().get(name) {
            Some(Param::Jaxpr(cj)) => done.get(&Arc::as_ptr(cj.jaxpr())).unwrap_or(&empty),
            _ => &empty,
        }
    };
    let mut r = CostReport::default();
    let name = e.primitive().name();
    let Primitive::Builtin(b) = e.primitive() else {
        r.add_own(name, Cost::default());
        return r;
    };
    match b {
        Builtin::Jit | Builtin::Remat => r.add_scaled(sub("jaxpr"), 1.0),
        Builtin::CustomJvpCall | Builtin::CustomVjpCall => r.add_scaled(sub("call_jaxpr"), 1.0),
        Builtin::ShardMap => {
            let devices = match e.params().get("mesh") {
                Some(Param::Mesh(m)) => m.size() as f64,
                _ => 1.0,
            };
            r.add_scaled(sub("jaxpr"), devices);
        }
        Builtin::Cond => {
            if let Some(Param::Jaxprs(brs)) = e.params().get("branches") {
                let best = brs
                    .iter()
                    .map(|cj| done.get(&Arc::as_ptr(cj.jaxpr())).unwrap_or(&empty))
                    .fold(&empty, |best, c| {
                        if c.total.key() > best.total.key() {
                            c
                        } else {
                            best
                        }
                    });
                r.add_scaled(best, 1.0);
            }
        }
        Builtin::While => {
            r.add_scaled(sub("cond_jaxpr"), 1.0);
            r.add_scaled(sub("body_jaxpr"), 1.0);
            r.total.while_loops += 1;
            batched_while_cost(&mut r, e, sub("cond_jaxpr"));
        }
        Builtin::Scan => {
            let n = match e.params().get("length") {
                Some(Param::Int(n)) => *n as f64,
                _ => 0.0,
            };
            r.add_scaled(sub("jaxpr"), n);
        }
        _ => r.add_own(name, eqn_cost(j, e, *b, done)),
    }
    r
}

/// The extra work of one iteration of a `while` with a batched predicate, as JAX lowers
/// it: the condition's `reduce_or` of the predicate, the condition again in the body (on
/// the old carry), and a `select_n` per carry (the broadcast of the predicate is free).
fn batched_while_cost(r: &mut CostReport, e: &Eqn, cond: &CostReport) {
    let Some(Param::Jaxpr(cj)) = e.params().get("cond_jaxpr") else {
        return;
    };
    let Some(pred) = cj.out_avals().pop().filter(|p| p.shape.rank() > 0) else {
        return;
    };
    r.add_scaled(cond, 1.0);
    r.add_own(
        "reduce_or",
        Cost {
            flops: (size(&pred) - 1.0).max(0.0),
            bytes_accessed: bytes(&pred) + 2.0,
            ..Cost::default()
        },
    );
    // The carries: the condition's last inputs (one per output of the loop).
    let ins = cj.in_avals();
    for c in &ins[ins.len().saturating_sub(e.outvars().len())..] {
        r.add_own(
            "select_n",
            Cost {
                flops: size(c),
                bytes_accessed: size(c) + 3.0 * bytes(c),
                ..Cost::default()
            },
        );
    }
}

/// Whether `b` is elementwise: one operation per output element.
fn is_elementwise(b: Builtin) -> bool {
    !matches!(b.family(), Family::Special)
        || matches!(
            b,
            Builtin::Round
                | Builtin::IsFinite
                | Builtin::ReducePrecision
                | Builtin::AddAny
                | Builtin::ConvertElementType
                | Builtin::BitcastConvertType
                | Builtin::SelectN
                | Builtin::Clamp
                | Builtin::IntegerPow
        )
}

/// One transcendental per element and no flops (the functions XLA has as instructions,
/// and those it expands from CHLO, counted as one: see the module docs).
fn is_transcendental(b: Builtin) -> bool {
    use Builtin::*;
    matches!(
        b,
        Exp | Log
            | Log1p
            | Expm1
            | Sin
            | Cos
            | Tan
            | Tanh
            | Atan
            | Sqrt
            | Rsqrt
            | Cbrt
            | Pow
            | Atan2
            | Erf
            | ErfInv
            | Erfc
            | Lgamma
            | Digamma
            | Igamma
            | Igammac
            | IgammaGradA
            | Exp2
            | Asin
            | Acos
            | Sinh
            | Cosh
            | Asinh
            | Acosh
            | Atanh
    )
}

/// The bytes one leaf equation reads and writes: its operands (an implicitly broadcast
/// operand of an elementwise equation, a scalar or one with dimensions of size 1, read at
/// the output's size) and outputs. `transpose` moves none: XLA makes it a change of
/// layout.
fn eqn_bytes(b: Builtin, ins: &[AbstractValue], outs: &[AbstractValue]) -> f64 {
    if matches!(
        b,
        Builtin::Copy | Builtin::StopGradient | Builtin::Transpose
    ) {
        return 0.0;
    }
    let out_size = outs.first().map_or(0.0, size);
    let read: f64 = ins
        .iter()
        .map(|a| {
            if is_elementwise(b) && size(a) != out_size {
                out_size * a.dtype.size_bytes() as f64
            } else {
                bytes(a)
            }
        })
        .sum();
    let init = if is_reduction(b) {
        outs.first().map_or(0.0, |o| o.dtype.size_bytes() as f64)
    } else {
        0.0
    };
    read + init + outs.iter().map(bytes).sum::<f64>()
}

/// The own cost of an equation that is not control flow or a call.
fn eqn_cost(j: &Jaxpr, e: &Eqn, b: Builtin, done: &Done) -> Cost {
    let ins: Vec<AbstractValue> = e.inputs().iter().map(|&a| j.atom_aval(a)).collect();
    let outs: Vec<AbstractValue> = e.outvars().iter().map(|&v| j.var_aval(v).clone()).collect();
    let mut c = eqn_ops(j, e, b, &ins, &outs, done);
    c.bytes_accessed = eqn_bytes(b, &ins, &outs);
    c
}

/// The flops and transcendentals of a leaf equation.
fn eqn_ops(
    _j: &Jaxpr,
    e: &Eqn,
    b: Builtin,
    ins: &[AbstractValue],
    outs: &[AbstractValue],
    done: &Done,
) -> Cost {
    let out = outs.first();
    let n_out = out.map_or(0.0, size);
    let float_in = ins.first().is_some_and(|a| a.dtype.is_float());
    let reducer_flops = |name: &str| -> f64 {
        match e.params().get(name) {
            Some(Param::Jaxpr(cj)) => done
                .get(&Arc::as_ptr(cj.jaxpr()))
                .map_or(0.0, |r| r.total.flops),
            _ => 0.0,
        }
    };
    if matches!(b, Builtin::Copy | Builtin::StopGradient) {
        return Cost::default();
    }
    if is_transcendental(b) {
        return Cost::transcendentals(n_out);
    }
    if b == Builtin::Logistic {
        // JAX's lowering: 1 / (1 + exp(-x)).
        return Cost {
            flops: 3.0 * n_out,
            transcendentals: n_out,
            ..Cost::default()
        };
    }
    if b == Builtin::IntegerPow {
        let y = match e.params().get("y") {
            Some(Param::Int(y)) => *y,
            _ => 0,
        };
        let m = y.unsigned_abs();
        // Square-and-multiply: squarings plus extra multiplies, plus a division for a
        // negative power.
        let steps = if m == 0 {
            0
        } else {
            63 - m.leading_zeros() as u64 + m.count_ones() as u64 - 1
        } + u64::from(y < 0);
        return Cost::flops(n_out * steps as f64);
    }
    if is_elementwise(b) {
        return Cost::flops(n_out);
    }
    if is_reduction(b) {
        return Cost::flops(size(&ins[0]) - n_out);
    }
    match b {
        // JAX lowers them as a variadic reduce of (value, index) pairs, whose comparator
        // XLA counts as nine operations per combination of floats (NaN checks
        // included), seven of integers.
        Builtin::Argmax | Builtin::Argmin => {
            let per = if float_in { 9.0 } else { 7.0 };
            Cost::flops(per * (size(&ins[0]) - n_out))
        }
        // A running combination: one operation per element after the first of each
        // line (sort and top_k compare and move data: no flops).
        Builtin::Cumsum
        | Builtin::Cumprod
        | Builtin::Cummax
        | Builtin::Cummin
        | Builtin::Cumlogsumexp => {
            let n = match e.params().get("axis") {
                Some(Param::Int(a)) => ins[0].shape.dims().get(*a as usize).copied().unwrap_or(0),
                _ => 0,
            };
            let total = size(&ins[0]);
            Cost::flops(if n > 0 { total - total / n as f64 } else { 0.0 })
        }
        // A windowed reduction combines each window's elements: window size - 1
        // operations per output element (times the reducer's: a comparison and two
        // selects for `select_and_gather_add`'s pairs, as XLA counts its lowering); a
        // select-and-scatter compares across each source element's window and adds
        // the element once.
        Builtin::ReduceWindowSum
        | Builtin::ReduceWindowMax
        | Builtin::ReduceWindowMin
        | Builtin::SelectAndGatherAdd => {
            let window = window_size(b, e, ins.first().map_or(0, |a| a.shape.rank()));
            let per = if b == Builtin::SelectAndGatherAdd {
                3.0
            } else {
                1.0
            };
            Cost::flops(n_out * (window - 1.0).max(0.0) * per)
        }
        Builtin::ReduceWindow => {
            let window = window_size(b, e, ins.first().map_or(0, |a| a.shape.rank()));
            Cost::flops(n_out * (window - 1.0).max(0.0) * reducer_flops("jaxpr"))
        }
        Builtin::SelectAndScatterAdd => {
            let window = window_size(b, e, ins.first().map_or(0, |a| a.shape.rank()));
            let n = size(&ins[0]);
            Cost::flops(n * (window - 1.0).max(0.0) + n)
        }
        Builtin::DotGeneral => {
            let contracted: f64 = match e.params().get("dimension_numbers") {
                Some(Param::DotDims(dn)) => dn
                    .lhs_contracting
                    .iter()
                    .map(|&d| ins[0].shape.dims().get(d as usize).copied().unwrap_or(1) as f64)
                    .product(),
                _ => 1.0,
            };
            Cost::flops(2.0 * n_out * contracted)
        }
        // XLA's count: a multiply and an add per window tap that lands on the lhs (taps
        // on padding or on the lhs dilation's holes are free).
        Builtin::ConvGeneralDilated => {
            let (Some(o), Some(l), Some(r)) = (out, ins.first(), ins.get(1)) else {
                return Cost::default();
            };
            match crate::primitive::ConvGeometry::from_params(e.params()) {
                Ok(g) => Cost::flops(
                    2.0 * g.multiply_adds(l.shape.dims(), r.shape.dims(), o.shape.dims()),
                ),
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
            Cost::flops(batch * per)
        }
        // Gather, scatter, rev and pad move data; a combining scatter does one operation
        // per update element.
        Builtin::ScatterAdd
        | Builtin::ScatterSub
        | Builtin::ScatterMul
        | Builtin::ScatterMin
        | Builtin::ScatterMax => Cost::flops(ins.get(2).map_or(0.0, size)),
        Builtin::Psum | Builtin::Pmax | Builtin::Pmin | Builtin::ReduceScatter if float_in => {
            Cost::flops(ins.first().map_or(0.0, size))
        }
        // Everything else moves data, or is integer work this model leaves out
        // (threefry's rounds, the key primitives; see the module docs).
        _ => Cost::default(),
    }
}

/// The element count of a windowed equation's window (1 if its params are malformed).
fn window_size(b: Builtin, e: &crate::jaxpr::Eqn, rank: usize) -> f64 {
    crate::primitive::Window::from_params(b, e.params(), rank).map_or(1.0, |w| w.size() as f64)
}

/// The reductions over axes (`reduce_sum`, ..., `reduce_xor`): one operation per element
/// combined, and an initial value read.
fn is_reduction(b: Builtin) -> bool {
    matches!(
        b,
        Builtin::ReduceSum
            | Builtin::ReduceMax
            | Builtin::ReduceMin
            | Builtin::ReduceProd
            | Builtin::ReduceAnd
            | Builtin::ReduceOr
            | Builtin::ReduceXor
    )
}
