//! Generators of jaxprs of known shape, for benchmarks, tests and fuzzers.
//!
//! Every function here returns an error rather than panicking, whatever its arguments:
//! sizes that are negative or too large to build are a [`GenError`].
//!
//! The generators driven by `arbitrary::Unstructured` (so a fuzzer's mutations steer
//! them), over every built-in primitive and dtype, are in `ferrax_ir::fuzzing` (the
//! `arbitrary` feature).

use crate::aval::{AbstractValue, Shape};
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::error::TypeError;
use crate::jaxpr::{Atom, ClosedJaxpr, Jaxpr, LitValue, Literal};
use crate::params::{Opaque, Param, Params};
use crate::primitive::Builtin;
use std::fmt;
use std::sync::Arc;

/// Why a generator could not make the jaxpr asked for.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum GenError {
    /// An array size is negative or its element count overflows.
    BadSize {
        /// The size asked for.
        size: i64,
    },
    /// A count is above what the generator builds (to bound time and memory).
    TooLarge {
        /// What was counted (`"steps"`, `"depth"`, `"eqns"`, ...).
        what: &'static str,
        /// The value asked for.
        value: usize,
        /// The largest value accepted.
        limit: usize,
    },
    /// The generator built an ill-typed equation (a bug in the generator).
    IllTyped(TypeError),
}

impl fmt::Display for GenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenError::BadSize { size } => write!(f, "array size {size} is not a valid size"),
            GenError::TooLarge { what, value, limit } => {
                write!(f, "{what} = {value} is above the limit {limit}")
            }
            GenError::IllTyped(e) => write!(f, "the generator built an ill-typed jaxpr: {e}"),
        }
    }
}

impl std::error::Error for GenError {}

impl From<TypeError> for GenError {
    fn from(e: TypeError) -> GenError {
        GenError::IllTyped(e)
    }
}

fn at_most(what: &'static str, value: usize, limit: usize) -> Result<(), GenError> {
    if value > limit {
        Err(GenError::TooLarge { what, value, limit })
    } else {
        Ok(())
    }
}

fn vector(size: i64) -> Result<AbstractValue, GenError> {
    let shape = Shape::new(&[size]).map_err(|_| GenError::BadSize { size })?;
    Ok(AbstractValue::new(shape, DType::F32))
}

/// The most steps [`chain`] builds (3 equations each).
pub const MAX_CHAIN_STEPS: usize = 10_000_000;

/// The deepest nest [`nested_jits`] builds.
pub const MAX_NESTED_DEPTH: usize = 10_000_000;

/// BENCH.md's chain program over `x: f32[size]`: `steps` times `x = sin(x) * 1.5 + x`,
/// then `reduce_sum(x)`: `3 * steps + 1` equations.
///
/// # Errors
/// [`GenError::BadSize`] for a negative `size`; [`GenError::TooLarge`] for more than
/// [`MAX_CHAIN_STEPS`] steps.
///
/// ```
/// let j = ferrax_ir::generate::chain(2, 4)?;
/// assert_eq!(j.eqns().len(), 7);
/// assert_eq!(j.to_string().lines().nth(1), Some("    b:f32[4] = sin a"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn chain(steps: usize, size: i64) -> Result<Jaxpr, GenError> {
    at_most("steps", steps, MAX_CHAIN_STEPS)?;
    let mut b = JaxprBuilder::new();
    let mut x = b.add_invar(vector(size)?);
    let apply = |b: &mut JaxprBuilder, p: Builtin, ins: Vec<Atom>, params: Params| {
        b.add_eqn(p.into(), ins, params).map(|outs| outs[0])
    };
    for _ in 0..steps {
        let s = apply(&mut b, Builtin::Sin, vec![Atom::Var(x)], Params::empty())?;
        let c = b.literal(Literal {
            value: LitValue::Float(1.5),
            dtype: DType::F32,
            weak_type: false,
        });
        let m = apply(&mut b, Builtin::Mul, vec![Atom::Var(s), c], Params::empty())?;
        x = apply(
            &mut b,
            Builtin::Add,
            vec![Atom::Var(m), Atom::Var(x)],
            Params::empty(),
        )?;
    }
    let axes = Params::new([("axes", Param::ints(&[0]))]);
    let out = apply(&mut b, Builtin::ReduceSum, vec![Atom::Var(x)], axes)?;
    Ok(b.build(vec![Atom::Var(out)])?)
}

/// `depth` nested `jit` equations over `x: f32[3]` (at least one level): each level
/// applies `sin` and then calls the level below it.
///
/// # Errors
/// [`GenError::TooLarge`] for a depth above [`MAX_NESTED_DEPTH`].
///
/// # Examples
/// ```
/// use ferrax_ir::generate::nested_jits;
/// let cj = nested_jits(3)?;
/// // Three levels: each holds one `jit` but the innermost.
/// let (mut levels, mut j) = (1, cj.jaxpr().clone());
/// while let Some(inner) = j.eqns().iter().find_map(|e| e.sub_jaxprs().next().cloned()) {
///     levels += 1;
///     j = inner.jaxpr().clone();
/// }
/// assert_eq!(levels, 3);
/// ferrax_ir::typecheck(cj.jaxpr())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn nested_jits(depth: usize) -> Result<ClosedJaxpr, GenError> {
    at_most("depth", depth, MAX_NESTED_DEPTH)?;
    let mut inner: Option<ClosedJaxpr> = None;
    for _ in 0..depth.max(1) {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(vector(3)?);
        let mut y = b.add_eqn(Builtin::Sin.into(), vec![Atom::Var(x)], Params::empty())?[0];
        if let Some(j) = inner.take() {
            let params =
                Params::new([("jaxpr", Param::Jaxpr(j)), ("name", Param::Str("f".into()))]);
            y = b.add_eqn(Builtin::Jit.into(), vec![Atom::Var(y)], params)?[0];
        }
        let j = b.build(vec![Atom::Var(y)])?;
        inner = Some(ClosedJaxpr::with_unknown_consts(Arc::new(j)));
    }
    inner.ok_or(GenError::TooLarge {
        what: "depth",
        value: depth,
        limit: MAX_NESTED_DEPTH,
    })
}

/// `remat2`'s params for this jaxpr (no policy, `prevent_cse=True`).
pub fn remat_params(jaxpr: Param, differentiated: bool) -> Params {
    Params::new([
        ("jaxpr", jaxpr),
        ("differentiated", Param::Bool(differentiated)),
        ("policy", Param::None),
        ("prevent_cse", Param::Bool(true)),
    ])
}

/// `custom_jvp_call`'s params for this jaxpr, the rule an opaque value named
/// `{name}_jvp`.
pub fn custom_jvp_params(call_jaxpr: Param, name: &str) -> Params {
    Params::new([
        ("name", Param::Str(name.into())),
        ("call_jaxpr", call_jaxpr),
        ("jvp", Param::Opaque(Opaque::named(&format!("{name}_jvp")))),
        ("symbolic_zeros", Param::Bool(false)),
    ])
}

/// `custom_vjp_call`'s params for this jaxpr, the rules opaque values named
/// `{name}_fwd` and `{name}_bwd`.
pub fn custom_vjp_params(call_jaxpr: Param, name: &str) -> Params {
    Params::new([
        ("name", Param::Str(name.into())),
        ("bwd", Param::Opaque(Opaque::named(&format!("{name}_bwd")))),
        ("call_jaxpr", call_jaxpr),
        ("fwd", Param::Opaque(Opaque::named(&format!("{name}_fwd")))),
        ("symbolic_zeros", Param::Bool(false)),
    ])
}

/// A small deterministic random number generator (xorshift64*), so generated programs
/// are reproducible from a seed without dependencies.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (any value; 0 is remapped).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// Options of [`random_jaxpr`].
#[derive(Clone, Copy, Debug)]
pub struct RandomOptions {
    /// Equations per jaxpr level (about).
    pub eqns: usize,
    /// How deep `jit`/`cond`/`while`/`scan` may nest.
    pub max_depth: usize,
    /// Number of inputs.
    pub inputs: usize,
}

impl RandomOptions {
    /// The most equations per level [`random_jaxpr`] accepts.
    pub const MAX_EQNS: usize = 100_000;
    /// The deepest nesting [`random_jaxpr`] accepts.
    pub const MAX_DEPTH: usize = 32;
    /// The most inputs [`random_jaxpr`] accepts.
    pub const MAX_INPUTS: usize = 10_000;
    /// The most equations [`random_jaxpr`] makes over all levels: once reached, no more
    /// nested jaxprs are started (so deep options stay bounded in time and memory).
    pub const MAX_TOTAL_EQNS: usize = 1_000_000;
}

impl Default for RandomOptions {
    fn default() -> RandomOptions {
        RandomOptions {
            eqns: 12,
            max_depth: 2,
            inputs: 3,
        }
    }
}

const SHAPES: [&[i64]; 3] = [&[], &[3], &[2, 3]];

fn f32_of(dims: &[i64]) -> AbstractValue {
    AbstractValue::new(Shape::new(dims).unwrap_or_default(), DType::F32)
}

/// A random well-typed f32 jaxpr: elementwise math, literals, comparisons with
/// `select_n`, reductions, broadcasts, `stop_gradient`, and nested calls (`jit`,
/// `remat2`, `custom_jvp_call`, `custom_vjp_call`), `cond`, `while` and `scan`
/// equations; some equations are dead. The same seed gives the same jaxpr. Values stay
/// bounded (sin, tanh, logistic, ...), so evaluating it gives finite numbers.
///
/// # Errors
/// [`GenError::TooLarge`] when an option is above its limit ([`RandomOptions::MAX_EQNS`],
/// [`RandomOptions::MAX_DEPTH`], [`RandomOptions::MAX_INPUTS`]); over all levels at most
/// about [`RandomOptions::MAX_TOTAL_EQNS`] equations are made.
///
/// # Examples
/// ```
/// use ferrax_ir::generate::{random_jaxpr, RandomOptions};
/// let opts = RandomOptions { eqns: 20, ..RandomOptions::default() };
/// let j = random_jaxpr(7, opts)?;
/// assert_eq!(j.invars().len(), 3);
/// ferrax_ir::typecheck(&j)?;
/// // The same seed, the same jaxpr.
/// assert_eq!(random_jaxpr(7, opts)?.to_string(), j.to_string());
/// assert!(random_jaxpr(7, RandomOptions { max_depth: 1000, ..opts }).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn random_jaxpr(seed: u64, opts: RandomOptions) -> Result<Jaxpr, GenError> {
    at_most("eqns", opts.eqns, RandomOptions::MAX_EQNS)?;
    at_most("max_depth", opts.max_depth, RandomOptions::MAX_DEPTH)?;
    at_most("inputs", opts.inputs, RandomOptions::MAX_INPUTS)?;
    let mut rng = Rng::new(seed);
    let in_avals: Vec<AbstractValue> = (0..opts.inputs.max(1))
        .map(|_| f32_of(SHAPES[rng.below(SHAPES.len())]))
        .collect();
    let nouts = 1 + rng.below(3);
    let mut budget = RandomOptions::MAX_TOTAL_EQNS;
    random_level(&mut rng, &in_avals, None, nouts, opts, 0, &mut budget)
}

/// One level: inputs of the given types; if `out_avals` is given, the outputs have those
/// types, otherwise `nouts` outputs of any type.
fn random_level(
    rng: &mut Rng,
    in_avals: &[AbstractValue],
    out_avals: Option<&[AbstractValue]>,
    nouts: usize,
    opts: RandomOptions,
    depth: usize,
    budget: &mut usize,
) -> Result<Jaxpr, GenError> {
    let mut b = JaxprBuilder::new();
    let mut pool: Vec<(Atom, AbstractValue)> = in_avals
        .iter()
        .map(|a| (Atom::Var(b.add_invar(a.clone())), a.clone()))
        .collect();
    let neqns = 1 + rng.below(opts.eqns.max(1) * 2);
    for _ in 0..neqns {
        *budget = budget.saturating_sub(1);
        let mut failure = None;
        if let Some(new) = random_eqn(rng, &mut b, &pool, opts, depth, budget, &mut failure) {
            pool.extend(new);
        }
        if let Some(e) = failure {
            return Err(e);
        }
    }
    let outs: Vec<Atom> = match out_avals {
        Some(want) => want
            .iter()
            .map(|t| {
                let candidates: Vec<Atom> = pool
                    .iter()
                    .filter(|(_, a)| a.same_type(t))
                    .map(|(x, _)| *x)
                    .collect();
                if candidates.is_empty() {
                    // Make one: broadcast a scalar literal.
                    let lit = b.literal(Literal {
                        value: LitValue::Float(0.5),
                        dtype: DType::F32,
                        weak_type: false,
                    });
                    broadcast_to(&mut b, lit, t)
                } else {
                    Ok(candidates[rng.below(candidates.len())])
                }
            })
            .collect::<Result<_, _>>()?,
        None => (0..nouts)
            .map(|_| pool[pool.len() - 1 - rng.below(pool.len().min(4))].0)
            .collect(),
    };
    Ok(b.build(outs)?)
}

/// Broadcasts a scalar `x` (or a trailing-aligned lower-rank one) to type `t`.
fn broadcast_to(b: &mut JaxprBuilder, x: Atom, t: &AbstractValue) -> Result<Atom, TypeError> {
    let rank = b.atom_aval(x).map_or(0, |a| a.shape.rank());
    if rank >= t.shape.rank() {
        return Ok(x);
    }
    let dims: Vec<i64> = (t.shape.rank() - rank..t.shape.rank())
        .map(|d| d as i64)
        .collect();
    let params = Params::new([
        ("shape", Param::ints(t.shape.dims())),
        ("broadcast_dimensions", Param::ints(&dims)),
    ]);
    Ok(Atom::Var(
        b.add_eqn(Builtin::BroadcastInDim.into(), vec![x], params)?[0],
    ))
}

/// Whether `t` and `u` are operands of a binary primitive by JAX 0.10's implicit
/// broadcasting: one dtype, equal ranks, each dimension equal or one of them 1.
fn size_one_partner(t: &AbstractValue, u: &AbstractValue) -> bool {
    t.dtype == u.dtype
        && t.shape.rank() == u.shape.rank()
        && t.shape
            .dims()
            .iter()
            .zip(u.shape.dims())
            .all(|(&a, &b)| a == b || a == 1 || b == 1)
}

/// A `rev`, `gather` or combining scatter on `x` (rank >= 1) that keeps its type (the
/// generator's other cases expect the pool's few shapes): a gather takes `n` slices along
/// the last axis (of size `n`) at indices made from a pool value of shape `[n]` converted
/// to `int32` (so some fall out of bounds), in a random mode; a scatter puts such
/// gathered slices back. Returns the primitive, its operands and its params (helper
/// equations are added to `b`).
fn indexing(
    b: &mut JaxprBuilder,
    rng: &mut Rng,
    pool: &[(Atom, AbstractValue)],
    (x, xt): (Atom, &AbstractValue),
) -> Option<(Builtin, Vec<Atom>, Params)> {
    use crate::params::{GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers};
    let rank = xt.shape.rank();
    if rng.chance(0.15) {
        let dims = Param::ints(&[rng.below(rank) as i64]);
        return Some((Builtin::Rev, vec![x], Params::new([("dimensions", dims)])));
    }
    if rng.chance(0.15) {
        // A pad that keeps the shape along one axis: a shift by one (padding on one side,
        // cropping the other), or interior padding with the excess cropped.
        let axis = rng.below(rank);
        let d = xt.shape.dims()[axis];
        let mut config = vec![(0i64, 0i64, 0i64); rank];
        config[axis] = match rng.below(4) {
            0 => (1, -1, 0),
            1 => (-1, 1, 0),
            2 if d >= 2 => (-(d - 1), 0, 1),
            _ => (0, 0, 0),
        };
        let value = b.literal(Literal {
            value: if xt.dtype.is_float() {
                LitValue::Float(0.5)
            } else {
                LitValue::Int(1)
            },
            dtype: xt.dtype,
            weak_type: false,
        });
        let params = Params::new([("padding_config", Param::Padding(config.into()))]);
        return Some((Builtin::Pad, vec![x, value], params));
    }
    let last = rank - 1;
    let n = xt.shape.dims()[last];
    let vectors: Vec<Atom> = pool
        .iter()
        .filter(|(_, t)| t.shape.dims() == [n])
        .map(|(a, _)| *a)
        .collect();
    if vectors.is_empty() {
        return None;
    }
    let y = vectors[rng.below(vectors.len())];
    let one = |b: &mut JaxprBuilder, p: Builtin, ins: Vec<Atom>, params: Params| {
        b.add_eqn(p.into(), ins, params)
            .ok()
            .and_then(|o| o.first().copied())
            .map(Atom::Var)
    };
    let yi = one(
        b,
        Builtin::ConvertElementType,
        vec![y],
        Params::new([
            ("new_dtype", Param::DType(DType::I32)),
            ("weak_type", Param::Bool(false)),
        ]),
    )?;
    let idx = one(
        b,
        Builtin::Reshape,
        vec![yi],
        Params::new([
            ("new_sizes", Param::ints(&[n, 1])),
            ("dimensions", Param::None),
        ]),
    )?;
    let mode = GatherScatterMode::ALL[rng.below(3)];
    let window: Vec<i64> = (0..last as i64).collect();
    let mut sizes = xt.shape.dims().to_vec();
    sizes[last] = 1;
    let gather_params = Params::new([
        (
            "dimension_numbers",
            Param::GatherDims(Arc::new(GatherDimensionNumbers {
                offset_dims: window.clone(),
                collapsed_slice_dims: vec![last as i64],
                start_index_map: vec![last as i64],
                ..Default::default()
            })),
        ),
        ("slice_sizes", Param::ints(&sizes)),
        ("mode", Param::Mode(mode)),
        // Zero, not NaN: NaN would make later comparisons diverge between backends.
        ("fill_value", Param::Float(0.0)),
    ]);
    if rng.chance(0.5) {
        return Some((Builtin::Gather, vec![x, idx], gather_params));
    }
    // Combining scatters of gathered slices (duplicates combine alike in any order,
    // unlike `scatter`'s).
    let slices = one(b, Builtin::Gather, vec![x, idx], gather_params)?;
    const SCATTERS: [Builtin; 3] = [
        Builtin::ScatterAdd,
        Builtin::ScatterMax,
        Builtin::ScatterMin,
    ];
    let params = Params::new([
        (
            "dimension_numbers",
            Param::ScatterDims(Arc::new(ScatterDimensionNumbers {
                update_window_dims: window,
                inserted_window_dims: vec![last as i64],
                scatter_dims_to_operand_dims: vec![last as i64],
                ..Default::default()
            })),
        ),
        ("mode", Param::Mode(mode)),
    ]);
    Some((SCATTERS[rng.below(3)], vec![x, idx, slices], params))
}

fn pick(rng: &mut Rng, pool: &[(Atom, AbstractValue)]) -> (Atom, AbstractValue) {
    // Prefer recent values so chains form, but reach back sometimes.
    let i = if rng.chance(0.6) {
        pool.len() - 1 - rng.below(pool.len().min(3))
    } else {
        rng.below(pool.len())
    };
    pool[i].clone()
}

fn closed(j: Jaxpr) -> ClosedJaxpr {
    ClosedJaxpr::with_unknown_consts(Arc::new(j))
}

fn random_eqn(
    rng: &mut Rng,
    b: &mut JaxprBuilder,
    pool: &[(Atom, AbstractValue)],
    opts: RandomOptions,
    depth: usize,
    budget: &mut usize,
    failure: &mut Option<GenError>,
) -> Option<Vec<(Atom, AbstractValue)>> {
    let has_budget = *budget > 0;
    // A nested level's error (a generator bug) is reported through `failure`.
    let mut level = |rng: &mut Rng,
                     ins: &[AbstractValue],
                     outs: Option<&[AbstractValue]>,
                     nouts: usize|
     -> Option<Jaxpr> {
        match random_level(rng, ins, outs, nouts, opts, depth + 1, budget) {
            Ok(j) => Some(j),
            Err(e) => {
                *failure = Some(e);
                None
            }
        }
    };
    let (x, xt) = pick(rng, pool);
    let apply = |b: &mut JaxprBuilder, p: Builtin, ins: Vec<Atom>, params: Params| {
        b.add_eqn(p.into(), ins, params).ok().map(|outs| {
            outs.into_iter()
                .map(|v| {
                    (
                        Atom::Var(v),
                        b.var_aval(v).cloned().unwrap_or_else(|| f32_of(&[])),
                    )
                })
                .collect::<Vec<_>>()
        })
    };
    let nested = depth < opts.max_depth && has_budget;
    match rng.below(if nested { 12 } else { 8 }) {
        0 | 1 => {
            const UNARY: [Builtin; 14] = [
                Builtin::Sin,
                Builtin::Cos,
                Builtin::Tanh,
                Builtin::Neg,
                Builtin::Abs,
                Builtin::Logistic,
                Builtin::Square,
                Builtin::StopGradient,
                Builtin::Floor,
                Builtin::Ceil,
                Builtin::Round,
                // Total, well-conditioned special functions (issue 12).
                Builtin::Erf,
                Builtin::Atan,
                Builtin::Asinh,
            ];
            let p = UNARY[rng.below(UNARY.len())];
            let params = if p == Builtin::Round {
                Params::new([("rounding_method", Param::Int(rng.below(2) as i64))])
            } else {
                Params::empty()
            };
            apply(b, p, vec![x], params)
        }
        2 | 3 => {
            const BINARY: [Builtin; 6] = [
                Builtin::Add,
                Builtin::Sub,
                Builtin::Mul,
                Builtin::Max,
                Builtin::Min,
                Builtin::AddAny,
            ];
            let partners: Vec<Atom> = pool
                .iter()
                .filter(|(_, t)| {
                    t.same_type(&xt) || t.shape.rank() == 0 || size_one_partner(t, &xt)
                })
                .map(|(a, _)| *a)
                .collect();
            let y = if rng.chance(0.3) || partners.is_empty() {
                b.literal(Literal {
                    value: LitValue::Float((rng.below(7) as f64 - 3.0) * 0.5),
                    dtype: DType::F32,
                    weak_type: false,
                })
            } else {
                partners[rng.below(partners.len())]
            };
            let (l, r) = if rng.chance(0.5) { (x, y) } else { (y, x) };
            let mut op = BINARY[rng.below(BINARY.len())];
            // `add_any` takes two operands of one type only (no implicit broadcasting).
            let type_of = |b: &JaxprBuilder, a: Atom| match a {
                Atom::Var(v) => b.var_aval(v).cloned(),
                Atom::Lit(_) => Some(f32_of(&[])),
            };
            if op == Builtin::AddAny {
                let (lt, rt) = (type_of(b, l), type_of(b, r));
                let same = matches!((lt, rt), (Some(p), Some(q)) if p.shape == q.shape && p.dtype == q.dtype);
                if !same {
                    op = Builtin::Add;
                }
            }
            apply(b, op, vec![l, r], Params::empty())
        }
        4 if xt.shape.rank() > 0 && rng.chance(0.5) => {
            indexing(b, rng, pool, (x, &xt)).and_then(|(p, ins, params)| apply(b, p, ins, params))
        }
        4 => {
            if xt.shape.rank() == 0 {
                return None;
            }
            let axes = Params::new([("axes", Param::ints(&[rng.below(xt.shape.rank()) as i64]))]);
            let op = if rng.chance(0.5) {
                Builtin::ReduceSum
            } else {
                Builtin::ReduceMax
            };
            apply(b, op, vec![x], axes)
        }
        5 => {
            // Broadcast to a larger shape.
            let (shape, dims): (&[i64], &[i64]) = match xt.shape.dims() {
                [] => (&[3], &[]),
                [3] => (&[2, 3], &[1]),
                _ => return None,
            };
            let params = Params::new([
                ("shape", Param::ints(shape)),
                ("broadcast_dimensions", Param::ints(dims)),
            ]);
            apply(b, Builtin::BroadcastInDim, vec![x], params)
        }
        6 | 7 => {
            // select_n(x > y, x, y) for y of x's type.
            let same: Vec<Atom> = pool
                .iter()
                .filter(|(_, t)| t.same_type(&xt))
                .map(|(a, _)| *a)
                .collect();
            let y = same[rng.below(same.len())];
            let p = apply(b, Builtin::Gt, vec![x, y], Params::empty())?;
            apply(b, Builtin::SelectN, vec![p[0].0, x, y], Params::empty())
        }
        8 => {
            let args: Vec<(Atom, AbstractValue)> =
                (0..1 + rng.below(2)).map(|_| pick(rng, pool)).collect();
            let avals: Vec<AbstractValue> = args.iter().map(|(_, t)| t.clone()).collect();
            let nouts = 1 + rng.below(2);
            let inner = Param::Jaxpr(closed(level(rng, &avals, None, nouts)?));
            // A call: `jit` mostly, sometimes one of the calls autodiff makes (the
            // custom rules are opaque names here).
            let (prim, params) = match rng.below(8) {
                0 => (Builtin::Remat, remat_params(inner, rng.chance(0.5))),
                1 => (Builtin::CustomJvpCall, custom_jvp_params(inner, "inner")),
                2 => (Builtin::CustomVjpCall, custom_vjp_params(inner, "inner")),
                _ => (
                    Builtin::Jit,
                    Params::new([("jaxpr", inner), ("name", Param::Str("inner".into()))]),
                ),
            };
            apply(b, prim, args.into_iter().map(|(a, _)| a).collect(), params)
        }
        9 => {
            // cond on a comparison of two scalars (or a reduced value).
            let scalars: Vec<Atom> = pool
                .iter()
                .filter(|(_, t)| t.shape.rank() == 0)
                .map(|(a, _)| *a)
                .collect();
            if scalars.is_empty() {
                return None;
            }
            let s = scalars[rng.below(scalars.len())];
            let zero = b.literal(Literal {
                value: LitValue::Float(0.0),
                dtype: DType::F32,
                weak_type: false,
            });
            let pred = apply(b, Builtin::Gt, vec![s, zero], Params::empty())?;
            let idx = apply(
                b,
                Builtin::ConvertElementType,
                vec![pred[0].0],
                Params::new([
                    ("new_dtype", Param::DType(DType::I32)),
                    ("weak_type", Param::Bool(false)),
                ]),
            )?;
            let args: Vec<(Atom, AbstractValue)> =
                (0..1 + rng.below(2)).map(|_| pick(rng, pool)).collect();
            let avals: Vec<AbstractValue> = args.iter().map(|(_, t)| t.clone()).collect();
            let out_t: Vec<AbstractValue> = vec![avals[rng.below(avals.len())].clone()];
            let branches: Vec<ClosedJaxpr> = (0..2)
                .map(|_| level(rng, &avals, Some(&out_t), 1).map(closed))
                .collect::<Option<_>>()?;
            let mut ins = vec![idx[0].0];
            ins.extend(args.into_iter().map(|(a, _)| a));
            apply(
                b,
                Builtin::Cond,
                ins,
                Params::new([("branches", Param::Jaxprs(Arc::new(branches)))]),
            )
        }
        10 => {
            // while: carry (counter: i32, x); runs 3 times.
            let mut cb = JaxprBuilder::new();
            let ci = cb.add_invar(AbstractValue::scalar(DType::I32));
            cb.add_invar(xt.clone());
            let three = cb.literal(Literal {
                value: LitValue::Int(3),
                dtype: DType::I32,
                weak_type: false,
            });
            let lt = cb
                .add_eqn(
                    Builtin::Lt.into(),
                    vec![Atom::Var(ci), three],
                    Params::empty(),
                )
                .ok()?[0];
            let cond = closed(cb.build(vec![Atom::Var(lt)]).ok()?);
            let body_inner = level(
                rng,
                std::slice::from_ref(&xt),
                Some(std::slice::from_ref(&xt)),
                1,
            )?;
            let mut bb = JaxprBuilder::new();
            let bi = bb.add_invar(AbstractValue::scalar(DType::I32));
            let bx = bb.add_invar(xt.clone());
            let one = bb.literal(Literal {
                value: LitValue::Int(1),
                dtype: DType::I32,
                weak_type: false,
            });
            let i2 = bb
                .add_eqn(
                    Builtin::Add.into(),
                    vec![Atom::Var(bi), one],
                    Params::empty(),
                )
                .ok()?[0];
            let y = bb
                .add_eqn(
                    Builtin::Jit.into(),
                    vec![Atom::Var(bx)],
                    Params::new([
                        ("jaxpr", Param::Jaxpr(closed(body_inner))),
                        ("name", Param::Str("body".into())),
                    ]),
                )
                .ok()?[0];
            let body = closed(bb.build(vec![Atom::Var(i2), Atom::Var(y)]).ok()?);
            let zero = b.literal(Literal {
                value: LitValue::Int(0),
                dtype: DType::I32,
                weak_type: false,
            });
            let outs = apply(
                b,
                Builtin::While,
                vec![zero, x],
                Params::new([
                    ("cond_jaxpr", Param::Jaxpr(cond)),
                    ("body_jaxpr", Param::Jaxpr(body)),
                    ("cond_nconsts", Param::Int(0)),
                    ("body_nconsts", Param::Int(0)),
                ]),
            )?;
            Some(outs[1..].to_vec())
        }
        _ => {
            // scan over the leading axis of a rank-2 value, carrying a rank-1 one.
            let xs: Vec<Atom> = pool
                .iter()
                .filter(|(_, t)| t.shape.dims() == [2, 3])
                .map(|(a, _)| *a)
                .collect();
            if xs.is_empty() {
                return None;
            }
            let xs = xs[rng.below(xs.len())];
            let row = f32_of(&[3]);
            let carry0 = if xt.shape.dims() == [2, 3] {
                // Reduce first to get a row.
                apply(
                    b,
                    Builtin::ReduceSum,
                    vec![x],
                    Params::new([("axes", Param::ints(&[0]))]),
                )?[0]
                    .0
            } else {
                broadcast_to(b, x, &row).ok()?
            };
            let body = level(
                rng,
                &[row.clone(), row.clone()],
                Some(&[row.clone(), row.clone()]),
                2,
            )?;
            apply(
                b,
                Builtin::Scan,
                vec![carry0, xs],
                Params::new([
                    ("jaxpr", Param::Jaxpr(closed(body))),
                    ("length", Param::Int(2)),
                    ("reverse", Param::Bool(rng.chance(0.5))),
                    ("num_consts", Param::Int(0)),
                    ("num_carry", Param::Int(1)),
                    ("linear", Param::Bools(Arc::from([false, false]))),
                ]),
            )
        }
    }
}
