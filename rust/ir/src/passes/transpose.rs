//! Transposition of linear jaxprs (the backward half of reverse-mode autodiff).
//!
//! [`transpose`] takes a jaxpr that is linear in some of its inputs and builds the jaxpr
//! of its transpose: given the non-linear inputs and one cotangent per output, it returns
//! one cotangent per linear input.
//!
//! The pass runs in two sweeps, neither of them recursive:
//! 1. forwards, marking every variable that depends on a linear input; equations that
//!    depend on none are copied into the result (they are evaluated forward, first);
//!    every other equation must be linear in its linear operands and have a rule;
//! 2. backwards over the linear equations, each turning the cotangent of its output into
//!    cotangents of its linear operands.
//!
//! `jit`, `cond` and `scan` transpose their sub-jaxprs with the same pass. Each jaxpr
//! being transposed is a frame of an explicit stack: a frame that meets such an equation
//! in its backward sweep asks for the sub-jaxpr's transpose and resumes with it, so
//! nesting depth costs heap, not stack. A sub-jaxpr shared by several equations (with the
//! same linear flags and symbolic zeros) is transposed once and the result shared.
//!
//! - `jit` stays a `jit` of the transposed jaxpr: it takes the non-linear operands and
//!   the outputs' cotangents and returns the linear operands' cotangents. As in JAX,
//!   symbolic zeros stay out of the call: outputs without a cotangent have no input, and
//!   linear operands the call gives none are not among its outputs (no call at all if
//!   there is nothing to return). `remat2` does the same and becomes
//!   `differentiated=True`.
//! - `custom_jvp_call`, `custom_vjp_call` and `stop_gradient` are not linear (autodiff
//!   replaces them before transposing): a linear operand is a [`PassError::NonLinearUse`].
//! - `cond` (with a non-linear index) stays a `cond` of the transposed branches; they
//!   return a cotangent for each linear operand some branch gives one (zeros in the
//!   branches that do not), and take only the outputs' cotangents that are not zero.
//! - `scan` becomes a scan in the other direction (JAX's `_scan_transpose`): its consts
//!   are the non-linear consts, its carry the linear consts' cotangents (accumulated from
//!   zeros with `add_any`) and the carry's cotangents, its xs the ys' cotangents and the
//!   non-linear xs; it returns the linear xs' cotangents as ys. Every carried value is
//!   taken as linear (a non-linear one, such as a counter used as an index, is refused
//!   where it is used).
//! - `while` is refused ([`PassError::WhileLoop`]): its trip count depends on data.
//!
//! Cotangents are accumulated per variable: the first contribution is kept as it is and
//! each further one (a value used more than once) is added with `add_any`, as JAX does.
//! A variable that receives no cotangent is a symbolic zero: its equation
//! contributes nothing, and a linear input left without one gets zeros made with
//! `broadcast_in_dim` of a `0` literal of its dtype.
//!
//! As in JAX, a non-linear operand of `add`, `sub` or `select_n`'s cases is taken to be
//! zero (the jaxpr is assumed linear, so it must be); it receives no cotangent.

use super::PassError;
use crate::aval::AbstractValue;
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitValue, Literal, VarId};
use crate::params::{
    DotDimensionNumbers, GatherDimensionNumbers, Param, Params, ScatterDimensionNumbers,
};
use crate::primitive::{dilate, select_comparison, Builtin, ExtensionPrimitive, Primitive, Window};
use std::collections::HashMap;
use std::sync::Arc;

mod conv;

/// Transposes `jaxpr`, which is linear in the inputs flagged in `linear` (one flag per
/// input).
///
/// The result takes the non-linear inputs (in order), then one cotangent per output of
/// `jaxpr` (of the output's type), and returns one cotangent per linear input (of that
/// input's type). Constvars are kept as they are. Equations depending only on non-linear
/// values are copied first; the linear ones are transposed in reverse order.
///
/// Rules exist for `add`, `add_any`, `sub`, `neg`, `mul` and `div` by a non-linear operand,
/// `convert_element_type` (between float dtypes), `copy`, `reduce_sum`,
/// `broadcast_in_dim`, `reshape`, `transpose`, `squeeze`, `expand_dims`, `select_n` with
/// a non-linear predicate, `dot_general` with one linear operand, `rev`, `concatenate`,
/// `slice` (to a `pad`, with interior padding for strides), `pad`, `dynamic_slice` and
/// `dynamic_update_slice`, `gather` (to `scatter-add`), `scatter-add` and `scatter-sub`
/// (to `gather`), `scatter-mul` (linear in the operand, or with unique indices in the
/// updates) and `scatter` (unique indices) with non-linear indices, `jit` and `remat2`, `cond`
/// (non-linear index), `scan` (a scan in the other direction) and extension primitives
/// with a transpose rule (a `jit` of the jaxpr the rule returns); the implicit broadcasting of a
/// binary operand (rank 0, or size-1 dimensions) is summed back. Output cotangents that
/// a higher-order equation needs but nobody gives are zeros.
///
/// # Errors
/// [`PassError::FlagCount`] if `linear` has not one flag per input;
/// [`PassError::NonLinearUse`] if a linear value is used non-linearly (`sin` of it, the
/// product of two linear values, a linear divisor or predicate);
/// [`PassError::NoTransposeRule`] for a primitive linear in an operand that has no rule
/// yet (extension primitives; `scatter`, and `scatter-mul` linear in its updates,
/// without `unique_indices=True`, as in JAX);
/// [`PassError::WhileLoop`] for a `while` loop with a linear operand. Errors inside a
/// sub-jaxpr name the equation of the sub-jaxpr.
///
/// # Example
/// ```
/// use ferrax_ir::passes::transpose;
/// use ferrax_ir::text::parse_jaxpr;
///
/// // f(a, t) = a * t + t, linear in t.
/// let j = parse_jaxpr(
///     "{ lambda ; a:f32[3] t:f32[3]. let b:f32[3] = mul a t; c:f32[3] = add b t in (c,) }",
/// )
/// .unwrap();
/// let tj = transpose(&j, &[false, true]).unwrap();
/// // It takes a and the output's cotangent, and returns t's cotangent: ct * a + ct.
/// assert_eq!(tj.invars().len(), 2);
/// assert_eq!(tj.out_avals(), j.in_avals()[1..].to_vec());
/// ```
pub fn transpose(jaxpr: &Jaxpr, linear: &[bool]) -> Result<Jaxpr, PassError> {
    if linear.len() != jaxpr.invars().len() {
        return Err(PassError::FlagCount {
            what: "linear",
            expected: jaxpr.invars().len(),
            got: linear.len(),
        });
    }
    // Keys have no cotangents (JAX's are float0): a key input cannot be linear.
    if let Some(k) =
        (0..linear.len()).find(|&k| linear[k] && jaxpr.var_aval(jaxpr.invars()[k]).dtype.is_key())
    {
        return Err(PassError::Unsupported {
            what: format!("input {k} is a key array, which cannot be linear"),
        });
    }
    // One frame per jaxpr being transposed; a frame that meets a `jit`, `cond` or `scan`
    // asks for its sub-jaxprs and resumes with their transposes, so nesting depth costs
    // heap, not stack. A sub-jaxpr shared by several equations (with the same request)
    // is transposed once.
    let top = Request {
        linear: linear.to_vec(),
        cts: vec![true; jaxpr.outvars().len()],
        drop_zeros: false,
        axes: Vec::new(),
        seeded: Vec::new(),
    };
    let mut memo: HashMap<(*const Jaxpr, Request), Transposed> = HashMap::new();
    let mut stack = vec![Transposer::start(jaxpr, top)?];
    let mut child: Option<Transposed> = None;
    loop {
        let Some(top) = stack.last_mut() else {
            unreachable!("the stack holds the top frame until it returns");
        };
        match top.step(child.take())? {
            Step::Need(sub, request) => {
                let key = (sub as *const Jaxpr, request);
                match memo.get(&key) {
                    Some(done) => child = Some(done.clone()),
                    None => stack.push(Transposer::start(sub, key.1)?),
                }
            }
            Step::Done(jaxpr, present) => {
                let Some(frame) = stack.pop() else {
                    unreachable!("a frame returned");
                };
                if stack.is_empty() {
                    return Ok(jaxpr);
                }
                let result = Transposed {
                    jaxpr: Arc::new(jaxpr),
                    present,
                };
                memo.insert((frame.src as *const Jaxpr, frame.request), result.clone());
                child = Some(result);
            }
        }
    }
}

/// How to transpose a (sub-)jaxpr.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Request {
    /// Per input: linear.
    linear: Vec<bool>,
    /// Per output: whether a cotangent comes in (the others are symbolic zeros, and the
    /// transposed jaxpr has no input for them).
    cts: Vec<bool>,
    /// Whether a linear input that receives no cotangent is left out of the outputs
    /// (instead of getting zeros).
    drop_zeros: bool,
    /// The named axes in scope (a shard_map body's mesh axes), for the collectives the
    /// transpose emits.
    axes: Vec<(Arc<str>, i64)>,
    /// Per input: a linear input whose cotangent starts from a value passed in (an
    /// input of the transposed jaxpr after the outputs' cotangents), contributions added
    /// to it as they come (a scan body's accumulated consts' cotangents, as JAX's).
    seeded: Vec<bool>,
}

/// A transposed sub-jaxpr.
#[derive(Clone)]
struct Transposed {
    jaxpr: Arc<Jaxpr>,
    /// Per linear input: whether the jaxpr returns its cotangent.
    present: Vec<bool>,
}

/// What a frame asks of the driver.
enum Step<'a> {
    /// Transpose this sub-jaxpr so, then resume me with the result.
    Need(&'a Jaxpr, Request),
    /// This frame's transposed jaxpr, and which linear inputs' cotangents it returns.
    Done(Jaxpr, Vec<bool>),
}

/// A higher-order equation waiting for the transposes of its sub-jaxprs.
enum Pending {
    Jit { eqn: usize },
    Cond { eqn: usize, done: Vec<Transposed> },
    Scan { eqn: usize },
    ShardMap { eqn: usize },
}

/// The equation index of what the pass emits for no source equation (the outputs'
/// cotangents and the zeros of unused linear inputs).
const NO_EQN: usize = usize::MAX;

/// Checks that equation `index` is linear in its linear operands and has a rule.
fn check_linear(src: &Jaxpr, index: usize, e: &Eqn, lin_ops: &[bool]) -> Result<(), PassError> {
    let name = e.primitive().name().to_owned();
    let non_linear = |operand: usize| PassError::NonLinearUse {
        primitive: name.clone(),
        eqn: index,
        operand,
    };
    let first_lin = lin_ops.iter().position(|&l| l).unwrap_or(0);
    // Booleans and PRNG keys cannot be summed: a linear bool or key is used non-linearly
    // wherever it is used (in JAX their tangents are float0 zeros).
    if let Some(k) = (0..lin_ops.len()).find(|&k| {
        let d = src.atom_aval(e.inputs()[k]).dtype;
        lin_ops[k] && (d == DType::Bool || d.is_key())
    }) {
        return Err(non_linear(k));
    }
    let p = match e.primitive() {
        &Primitive::Builtin(p) => p,
        Primitive::Extension(x) if x.has_transpose_rule() => return Ok(()),
        Primitive::Extension(_) => {
            return Err(PassError::NoTransposeRule {
                primitive: name,
                eqn: index,
            })
        }
    };
    use Builtin::*;
    match p {
        Add | AddAny | Sub | Neg | Copy | ReduceSum | BroadcastInDim | Reshape | Transpose
        | Squeeze | ExpandDims | Rev | Concatenate | Split | ShardingConstraint => Ok(()),
        Stack | Unstack | Tile | OptimizationBarrier => Ok(()),
        Cumsum => Ok(()),
        // Linear in the source/tangents; the operand only chooses positions.
        ReduceWindowSum => Ok(()),
        SelectAndGatherAdd | SelectAndScatterAdd if lin_ops[1] => Err(non_linear(1)),
        SelectAndGatherAdd | SelectAndScatterAdd => Ok(()),
        ReducePrecision => Ok(()),
        Psum | Pvary | AllGather | ReduceScatter | Ppermute | AllToAll | ShardMap => Ok(()),
        Slice | Pad => Ok(()),
        Jit | Remat | Scan => Ok(()),
        Cond if lin_ops[0] => Err(non_linear(0)),
        Cond => Ok(()),
        While => Err(PassError::WhileLoop { eqn: index }),
        Gather | ScatterAdd | ScatterSub | ScatterMul | Scatter if lin_ops[1] => Err(non_linear(1)),
        Gather | ScatterAdd | ScatterSub => Ok(()),
        ScatterMul if lin_ops[0] && lin_ops[2] => Err(non_linear(2)),
        // As JAX: the updates' cotangent needs each window written once.
        Scatter | ScatterMul if !unique_indices(e) && (p == Scatter || lin_ops[2]) => {
            Err(PassError::NoTransposeRule {
                primitive: format!("{name} without unique_indices"),
                eqn: index,
            })
        }
        Scatter | ScatterMul => Ok(()),
        DynamicSlice | DynamicUpdateSlice => {
            let first_index = if p == DynamicSlice { 1 } else { 2 };
            match (first_index..lin_ops.len()).find(|&k| lin_ops[k]) {
                Some(k) => Err(non_linear(k)),
                None => Ok(()),
            }
        }
        // Bilinear: linear in one operand at a time.
        Mul | DotGeneral | ConvGeneralDilated if lin_ops[0] && lin_ops[1] => Err(non_linear(1)),
        Mul | DotGeneral | ConvGeneralDilated => Ok(()),
        Div if lin_ops[1] => Err(non_linear(1)),
        // As JAX: linear in `b`, not in the matrix `a`.
        TriangularSolve if lin_ops[0] => Err(non_linear(0)),
        TriangularSolve => Ok(()),
        SelectN if lin_ops[0] => Err(non_linear(0)),
        Div | SelectN => Ok(()),
        ConvertElementType => {
            let from = src.atom_aval(e.inputs()[0]).dtype;
            let to = src.var_aval(e.outvars()[0]).dtype;
            if from.is_float() && to.is_float() {
                Ok(())
            } else {
                Err(non_linear(0))
            }
        }
        _ => Err(non_linear(first_lin)),
    }
}

struct Transposer<'a> {
    src: &'a Jaxpr,
    /// What to make of `src`.
    request: Request,
    out: JaxprBuilder,
    /// Per source variable: depends on a linear input.
    is_lin: Vec<bool>,
    /// Per non-linear source variable: its copy in the result.
    fwd: Vec<Option<VarId>>,
    /// Per linear source variable: its accumulated cotangent in the result.
    ct: Vec<Option<VarId>>,
    /// The equations with a linear operand, in order.
    linear_eqns: Vec<usize>,
    /// How many of `linear_eqns` the backward sweep has still to visit.
    pos: usize,
    /// The higher-order equation being transposed.
    pending: Option<Pending>,
}

fn ints(params: &Params, name: &str) -> Vec<i64> {
    match params.get(name) {
        Some(Param::Ints(v)) => v.to_vec(),
        _ => Vec::new(),
    }
}

fn params<const N: usize>(pairs: [(&str, Param); N]) -> Params {
    Params::new(pairs)
}

/// `{ lambda ; a:T[] b:T[]. let c:T[] = add a b in (c,) }`, the `update_jaxpr` JAX's
/// scatter-add holds, made once per dtype and shared (as JAX caches it), so that the
/// scatter-adds of one program print one `let` jaxpr. None for a dtype `add` refuses.
fn add_combiner(dtype: DType) -> Option<ClosedJaxpr> {
    thread_local! {
        static COMBINERS: std::cell::RefCell<HashMap<DType, ClosedJaxpr>> =
            std::cell::RefCell::new(HashMap::new());
    }
    COMBINERS.with(|cache| {
        if let Some(j) = cache.borrow().get(&dtype) {
            return Some(j.clone());
        }
        let mut b = JaxprBuilder::new();
        let aval = AbstractValue::array(dtype, &[]).ok()?;
        let x = b.add_invar(aval.clone());
        let y = b.add_invar(aval);
        let z = b.apply(Builtin::Add, [x, y], Params::empty()).ok()?;
        let jaxpr = b.build(vec![Atom::Var(z)]).ok()?;
        let closed = ClosedJaxpr::new(Arc::new(jaxpr), Vec::new()).ok()?;
        cache.borrow_mut().insert(dtype, closed.clone());
        Some(closed)
    })
}

fn inverse_perm(perm: &[i64]) -> Vec<i64> {
    let mut inv = vec![0i64; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as i64;
    }
    inv
}

impl<'a> Transposer<'a> {
    /// Sets up the frame of `jaxpr` and runs the forward sweep: copies the equations that
    /// depend on no linear input, checks the others, and seeds the outputs' cotangents.
    fn start(jaxpr: &'a Jaxpr, request: Request) -> Result<Transposer<'a>, PassError> {
        let env = crate::sharding::AxisEnv::open();
        let env = if request.axes.is_empty() {
            env
        } else {
            crate::sharding::Mesh::new(request.axes.iter().map(|(n, s)| (n.as_ref(), *s)))
                .map(|m| env.with_mesh(&m))
                .unwrap_or_default()
        };
        let mut t = Transposer {
            src: jaxpr,
            request,
            out: JaxprBuilder::with_axis_env(env),
            is_lin: vec![false; jaxpr.num_vars()],
            fwd: vec![None; jaxpr.num_vars()],
            ct: vec![None; jaxpr.num_vars()],
            linear_eqns: Vec::new(),
            pos: 0,
            pending: None,
        };
        for &c in jaxpr.constvars() {
            let nv = t.out.add_constvar(jaxpr.var_aval(c).clone());
            t.fwd[c.index()] = Some(nv);
        }
        for (k, &v) in jaxpr.invars().iter().enumerate() {
            if t.request.linear[k] {
                t.is_lin[v.index()] = true;
            } else {
                let nv = t.out.add_invar(jaxpr.var_aval(v).clone());
                t.fwd[v.index()] = Some(nv);
            }
        }
        let ct_ins: Vec<Option<VarId>> = jaxpr
            .out_avals()
            .into_iter()
            .zip(t.request.cts.clone())
            .map(|(av, given)| given.then(|| t.out.add_invar(av)))
            .collect();
        for (i, e) in jaxpr.eqns().iter().enumerate() {
            let lin_ops: Vec<bool> = e.inputs().iter().map(|&a| t.atom_is_lin(a)).collect();
            if lin_ops.iter().any(|&l| l) {
                check_linear(jaxpr, i, e, &lin_ops)?;
                for &o in e.outvars() {
                    t.is_lin[o.index()] = true;
                }
                t.linear_eqns.push(i);
            } else {
                let inputs: Vec<Atom> = e.inputs().iter().map(|&a| t.fwd_atom(a)).collect();
                let outs = t.emit(i, e.primitive().clone(), inputs, e.params().clone())?;
                for (&o, n) in e.outvars().iter().zip(outs) {
                    t.fwd[o.index()] = Some(n);
                }
            }
        }
        for (k, &v) in jaxpr.invars().iter().enumerate() {
            if t.request.seeded.get(k) == Some(&true) {
                t.ct[v.index()] = Some(t.out.add_invar(jaxpr.var_aval(v).clone()));
            }
        }
        for (&o, &g) in jaxpr.outvars().iter().zip(&ct_ins) {
            if let (Atom::Var(v), Some(g)) = (o, g) {
                if t.is_lin[v.index()] {
                    t.accumulate(NO_EQN, v, g)?;
                }
            }
        }
        t.pos = t.linear_eqns.len();
        Ok(t)
    }

    /// Runs the backward sweep until it needs a sub-jaxpr transposed, or is done.
    fn step(&mut self, mut child: Option<Transposed>) -> Result<Step<'a>, PassError> {
        let src = self.src;
        loop {
            if let Some(p) = self.pending.take() {
                if let Some((p, sub, flags)) = self.advance(p, child.take())? {
                    self.pending = Some(p);
                    return Ok(Step::Need(sub, flags));
                }
            }
            if self.pos == 0 {
                return self.finish().map(|(j, present)| Step::Done(j, present));
            }
            self.pos -= 1;
            let i = self.linear_eqns[self.pos];
            let e = &src.eqns()[i];
            // An equation whose outputs all have zero cotangents contributes nothing.
            let Some(g) = e.outvars().iter().find_map(|o| self.ct[o.index()]) else {
                continue;
            };
            match e.primitive() {
                Primitive::Builtin(Builtin::Jit | Builtin::Remat) => {
                    self.pending = Some(Pending::Jit { eqn: i })
                }
                Primitive::Builtin(Builtin::Cond) => {
                    self.pending = Some(Pending::Cond {
                        eqn: i,
                        done: Vec::new(),
                    })
                }
                Primitive::Builtin(Builtin::Scan) => self.pending = Some(Pending::Scan { eqn: i }),
                Primitive::Builtin(Builtin::ShardMap) => {
                    self.pending = Some(Pending::ShardMap { eqn: i })
                }
                Primitive::Extension(x) => self.transpose_extension(i, e, x.as_ref())?,
                _ => self.transpose_eqn(i, e, g)?,
            }
        }
    }

    /// Moves a higher-order equation on: asks for the next sub-jaxpr's transpose, or
    /// emits the transposed equation once all are there.
    #[allow(clippy::type_complexity)]
    fn advance(
        &mut self,
        p: Pending,
        child: Option<Transposed>,
    ) -> Result<Option<(Pending, &'a Jaxpr, Request)>, PassError> {
        let src = self.src;
        match p {
            Pending::Jit { eqn } => {
                let e = &src.eqns()[eqn];
                let inner = sub_jaxpr(e, "jaxpr")?;
                let Some(t) = child else {
                    // As JAX: zero cotangents are not passed in, zero results not out.
                    let request = Request {
                        linear: self.lin_flags(e.inputs()),
                        cts: self.has_ct(e.outvars()),
                        drop_zeros: true,
                        axes: self.request.axes.clone(),
                        seeded: Vec::new(),
                    };
                    return Ok(Some((p, inner.jaxpr(), request)));
                };
                self.emit_jit(eqn, e, inner, t)?;
            }
            Pending::ShardMap { eqn } => {
                let e = &src.eqns()[eqn];
                let inner = sub_jaxpr(e, "jaxpr")?;
                let Some(t) = child else {
                    let mut axes = self.request.axes.clone();
                    if let Some(Param::Mesh(m)) = e.params().get("mesh") {
                        axes.extend(m.axes().iter().cloned());
                    }
                    let request = Request {
                        linear: self.lin_flags(e.inputs()),
                        cts: self.has_ct(e.outvars()),
                        drop_zeros: true,
                        axes,
                        seeded: Vec::new(),
                    };
                    return Ok(Some((p, inner.jaxpr(), request)));
                };
                self.emit_shard_map(eqn, e, inner, t)?;
            }
            Pending::Cond { eqn, mut done } => {
                let e = &src.eqns()[eqn];
                let Some(Param::Jaxprs(branches)) = e.params().get("branches") else {
                    unreachable!("the typechecker requires cond's branches");
                };
                done.extend(child);
                if done.len() < branches.len() {
                    let next: &'a Jaxpr = branches[done.len()].jaxpr();
                    let request = Request {
                        linear: self.lin_flags(&e.inputs()[1..]),
                        cts: self.has_ct(e.outvars()),
                        drop_zeros: true,
                        axes: self.request.axes.clone(),
                        seeded: Vec::new(),
                    };
                    return Ok(Some((Pending::Cond { eqn, done }, next, request)));
                }
                self.emit_cond(eqn, e, branches, done)?;
            }
            Pending::Scan { eqn } => {
                let e = &src.eqns()[eqn];
                let body = sub_jaxpr(e, "jaxpr")?;
                let Some(t) = child else {
                    // The carries' cotangents flow round the loop: all are instantiated;
                    // the ys' zero cotangents stay out (as in JAX).
                    let nc = int_param(e, "num_consts");
                    let mut seeded = self.lin_flags(e.inputs());
                    for f in seeded.iter_mut().skip(nc) {
                        *f = false;
                    }
                    let request = Request {
                        linear: self.scan_body_flags(e),
                        cts: self.scan_body_cts(e),
                        drop_zeros: false,
                        axes: self.request.axes.clone(),
                        seeded,
                    };
                    return Ok(Some((p, body.jaxpr(), request)));
                };
                self.emit_scan(eqn, e, body, &t.jaxpr)?;
            }
        }
        Ok(None)
    }

    /// The result: one cotangent per linear input (zeros where none arrived, or nothing
    /// if the request drops zeros), and which linear inputs have one.
    fn finish(&mut self) -> Result<(Jaxpr, Vec<bool>), PassError> {
        let src = self.src;
        let mut outs: Vec<Atom> = Vec::new();
        let mut present = Vec::new();
        for (k, &v) in src.invars().iter().enumerate() {
            if !self.request.linear[k] {
                continue;
            }
            let g = match self.ct[v.index()] {
                Some(g) => g,
                None if self.request.drop_zeros => {
                    present.push(false);
                    continue;
                }
                None => self.zeros_var(NO_EQN, src.var_aval(v))?,
            };
            present.push(true);
            outs.push(Atom::Var(g));
        }
        let out = std::mem::take(&mut self.out);
        let j = out.build(outs).map_err(|e| PassError::IllTyped {
            eqn: None,
            message: e.to_string(),
        })?;
        Ok((j, present))
    }

    /// Per variable: whether it has a cotangent.
    fn has_ct(&self, vars: &[VarId]) -> Vec<bool> {
        vars.iter().map(|v| self.ct[v.index()].is_some()).collect()
    }

    /// The cotangents of these variables that are not symbolic zeros, in order.
    fn present_cts(&self, vars: &[VarId]) -> Vec<Atom> {
        vars.iter()
            .filter_map(|v| self.ct[v.index()].map(Atom::Var))
            .collect()
    }

    /// Gives the linear operands flagged in `present` (one flag per linear operand) their
    /// cotangents from `cts`, in order.
    fn give_present(
        &mut self,
        eqn: usize,
        ops: &[Atom],
        present: &[bool],
        cts: &[VarId],
    ) -> Result<(), PassError> {
        let lin: Vec<Atom> = ops
            .iter()
            .copied()
            .filter(|&a| self.atom_is_lin(a))
            .collect();
        let mut cts = cts.iter();
        for (a, &p) in lin.into_iter().zip(present) {
            if p {
                let Some(&g) = cts.next() else {
                    unreachable!("one result per present cotangent");
                };
                self.give(eqn, a, g)?;
            }
        }
        Ok(())
    }

    fn lin_flags(&self, atoms: &[Atom]) -> Vec<bool> {
        atoms.iter().map(|&a| self.atom_is_lin(a)).collect()
    }

    /// The cotangent of a linear source variable, zeros if it has none.
    fn ct_or_zeros(&mut self, eqn: usize, v: VarId) -> Result<Atom, PassError> {
        match self.ct[v.index()] {
            Some(g) => Ok(Atom::Var(g)),
            None => self.zeros(eqn, self.src.var_aval(v)),
        }
    }

    /// The non-linear operands of an equation, in order, as atoms of the result.
    fn non_linear_operands(&mut self, ops: &[Atom]) -> Vec<Atom> {
        let mut out = Vec::new();
        for &a in ops {
            if !self.atom_is_lin(a) {
                out.push(self.fwd_atom(a));
            }
        }
        out
    }

    /// Gives each linear operand its cotangent from `cts` (one per linear operand).
    fn give_linear(
        &mut self,
        eqn: usize,
        ops: &[Atom],
        cts: impl IntoIterator<Item = VarId>,
    ) -> Result<(), PassError> {
        let lin: Vec<Atom> = ops
            .iter()
            .copied()
            .filter(|&a| self.atom_is_lin(a))
            .collect();
        for (a, g) in lin.into_iter().zip(cts) {
            self.give(eqn, a, g)?;
        }
        Ok(())
    }

    /// `jit`: a call of the transposed jaxpr, on the non-linear operands and the
    /// outputs' non-zero cotangents, returning the linear operands' non-zero cotangents
    /// (no call at all if there are none). `remat2` the same, marked
    /// `differentiated=True` (as JAX marks the backward pass of a checkpoint).
    fn emit_jit(
        &mut self,
        i: usize,
        e: &Eqn,
        inner: &ClosedJaxpr,
        t: Transposed,
    ) -> Result<(), PassError> {
        if !t.present.iter().any(|&p| p) {
            return Ok(());
        }
        let mut operands = self.non_linear_operands(e.inputs());
        operands.extend(self.present_cts(e.outvars()));
        let mut params = e.params().with(
            "jaxpr",
            Param::Jaxpr(ClosedJaxpr::from_parts(t.jaxpr, inner.consts().to_vec())),
        );
        if e.primitive().as_builtin() == Some(Builtin::Remat) {
            params = params.with("differentiated", Param::Bool(true));
        }
        let outs = self.emit(i, e.primitive().clone(), operands, params)?;
        self.give_present(i, e.inputs(), &t.present, &outs)
    }

    /// `shard_map`: a shard_map of the transposed body, on the non-linear operands (with
    /// their in_specs) and the outputs' non-zero cotangents (with the out_specs), returning
    /// the linear operands' non-zero cotangents (with their in_specs). The body's
    /// explicit pvary equations make this local: psum's transpose is pvary, pvary's psum.
    fn emit_shard_map(
        &mut self,
        i: usize,
        e: &Eqn,
        inner: &ClosedJaxpr,
        t: Transposed,
    ) -> Result<(), PassError> {
        if !t.present.iter().any(|&p| p) {
            return Ok(());
        }
        let (Some(Param::Specs(in_specs)), Some(Param::Specs(out_specs))) =
            (e.params().get("in_specs"), e.params().get("out_specs"))
        else {
            return Err(PassError::IllTyped {
                eqn: Some(i),
                message: "shard_map without its specs".to_owned(),
            });
        };
        let lin = self.lin_flags(e.inputs());
        let mut new_in: Vec<crate::sharding::PartitionSpec> = Vec::new();
        for (k, sp) in in_specs.iter().enumerate() {
            if !lin[k] {
                new_in.push(sp.clone());
            }
        }
        for (k, sp) in out_specs.iter().enumerate() {
            if self.ct[e.outvars()[k].index()].is_some() {
                new_in.push(sp.clone());
            }
        }
        let lin_specs = in_specs
            .iter()
            .zip(&lin)
            .filter(|(_, &l)| l)
            .map(|(s, _)| s);
        let new_out: Vec<crate::sharding::PartitionSpec> = lin_specs
            .zip(&t.present)
            .filter(|(_, &p)| p)
            .map(|(s, _)| s.clone())
            .collect();
        let mut operands = self.non_linear_operands(e.inputs());
        operands.extend(self.present_cts(e.outvars()));
        let params = e
            .params()
            .with(
                "jaxpr",
                Param::Jaxpr(ClosedJaxpr::from_parts(t.jaxpr, inner.consts().to_vec())),
            )
            .with("in_specs", Param::Specs(new_in.into()))
            .with("out_specs", Param::Specs(new_out.into()));
        let outs = self.emit(i, e.primitive().clone(), operands, params)?;
        self.give_present(i, e.inputs(), &t.present, &outs)
    }

    /// An extension primitive: its rule's jaxpr, called as a `jit` named
    /// `transpose(<name>)` on the non-linear operands and every output's cotangent (zeros
    /// where none arrived), returns the linear operands' cotangents.
    fn transpose_extension(
        &mut self,
        i: usize,
        e: &Eqn,
        x: &dyn ExtensionPrimitive,
    ) -> Result<(), PassError> {
        let src = self.src;
        let rule_error = |message: String| PassError::TransposeRule {
            primitive: x.name().to_owned(),
            eqn: i,
            message,
        };
        let avals: Vec<AbstractValue> = e.inputs().iter().map(|&a| src.atom_aval(a)).collect();
        let linear = self.lin_flags(e.inputs());
        let t = x
            .transpose(&avals, &linear, e.params())
            .map_err(rule_error)?;
        let mut expected_in: Vec<AbstractValue> = avals
            .iter()
            .zip(&linear)
            .filter(|(_, &l)| !l)
            .map(|(a, _)| a.clone())
            .collect();
        expected_in.extend(e.outvars().iter().map(|&o| src.var_aval(o).clone()));
        let expected_out: Vec<AbstractValue> = avals
            .iter()
            .zip(&linear)
            .filter(|(_, &l)| l)
            .map(|(a, _)| a.clone())
            .collect();
        let (got_in, got_out) = (t.in_avals(), t.out_avals());
        if !same_types(&got_in, &expected_in) || !same_types(&got_out, &expected_out) {
            return Err(rule_error(format!(
                "it returned a jaxpr of type {} -> {}, but the transpose must take the \
                 non-linear operands then one cotangent per output, {}, and return one \
                 cotangent per linear operand, {}",
                types_list(&got_in),
                types_list(&got_out),
                types_list(&expected_in),
                types_list(&expected_out)
            )));
        }
        let mut operands = self.non_linear_operands(e.inputs());
        for &o in e.outvars() {
            operands.push(self.ct_or_zeros(i, o)?);
        }
        let all_vars = t
            .jaxpr()
            .outvars()
            .iter()
            .all(|a| matches!(a, Atom::Var(_)));
        if x.inline_transpose() && t.consts().is_empty() && all_vars {
            // The rule's equations in place, as JAX runs a custom_vjp's bwd.
            let outs = inline(&mut self.out, t.jaxpr(), &[], &operands).map_err(rule_error)?;
            let vars = outs.into_iter().filter_map(|a| match a {
                Atom::Var(v) => Some(v),
                Atom::Lit(_) => None,
            });
            let vars: Vec<VarId> = vars.collect();
            return self.give_linear(i, e.inputs(), vars);
        }
        let params = Params::new([
            ("jaxpr", Param::Jaxpr(t)),
            (
                "name",
                Param::Str(Arc::from(format!("transpose({})", x.name()))),
            ),
        ]);
        let outs = self.emit(i, Primitive::Builtin(Builtin::Jit), operands, params)?;
        self.give_linear(i, e.inputs(), outs)
    }

    /// `cond`: the same index picks among the transposed branches, which all take the
    /// non-linear operands and the outputs' non-zero cotangents and return a cotangent for
    /// each linear operand some branch gives one (zeros from the branches that do not).
    fn emit_cond(
        &mut self,
        i: usize,
        e: &Eqn,
        branches: &[ClosedJaxpr],
        done: Vec<Transposed>,
    ) -> Result<(), PassError> {
        let ops = &e.inputs()[1..];
        let n_lin = done.first().map_or(0, |t| t.present.len());
        let union: Vec<bool> = (0..n_lin)
            .map(|k| done.iter().any(|t| t.present[k]))
            .collect();
        if !union.iter().any(|&p| p) {
            return Ok(());
        }
        let lin_avals: Vec<AbstractValue> = ops
            .iter()
            .filter(|&&a| self.atom_is_lin(a))
            .map(|&a| self.src.atom_aval(a))
            .collect();
        let mut new_branches = Vec::with_capacity(done.len());
        for (t, b) in done.into_iter().zip(branches) {
            let j = if t.present == union {
                t.jaxpr
            } else {
                Arc::new(
                    with_zero_outputs(&t, &union, &lin_avals).map_err(|message| {
                        PassError::IllTyped {
                            eqn: Some(i),
                            message,
                        }
                    })?,
                )
            };
            new_branches.push(ClosedJaxpr::from_parts(j, b.consts().to_vec()));
        }
        let mut operands = vec![self.fwd_atom(e.inputs()[0])];
        operands.extend(self.non_linear_operands(ops));
        operands.extend(self.present_cts(e.outvars()));
        let params = e
            .params()
            .with("branches", Param::Jaxprs(Arc::new(new_branches)));
        let outs = self.emit(i, e.primitive().clone(), operands, params)?;
        self.give_present(i, ops, &union, &outs)
    }

    /// A `scan` body's linear flags: the consts' and xs' own, and every carry linear (a
    /// carried value is a cotangent carry of the transposed scan; a non-linear one, such
    /// as a loop counter used as an index, is refused where it is used).
    fn scan_body_flags(&self, e: &Eqn) -> Vec<bool> {
        let nc = int_param(e, "num_consts");
        let ncarry = int_param(e, "num_carry");
        let mut flags = self.lin_flags(e.inputs());
        for f in flags.iter_mut().skip(nc).take(ncarry) {
            *f = true;
        }
        flags
    }

    /// Which outputs of a `scan` body get a cotangent: every carry, and the ys that have
    /// one.
    fn scan_body_cts(&self, e: &Eqn) -> Vec<bool> {
        let ncarry = int_param(e, "num_carry");
        let mut cts = vec![true; ncarry];
        cts.extend(self.has_ct(&e.outvars()[ncarry..]));
        cts
    }

    /// `scan`: a scan in the other direction. Its consts are the non-linear consts; its
    /// carry the linear consts' accumulated cotangents (from zeros) and the carry's
    /// cotangents (from those of the final carry); its xs the cotangents of the ys (those
    /// that are not zero) and the non-linear xs; its ys the cotangents of the linear xs.
    fn emit_scan(
        &mut self,
        i: usize,
        e: &Eqn,
        body: &ClosedJaxpr,
        t: &Jaxpr,
    ) -> Result<(), PassError> {
        let src = self.src;
        let nc = int_param(e, "num_consts");
        let ncarry = int_param(e, "num_carry");
        let flags = self.scan_body_flags(e);
        let ins = e.inputs();
        let (consts, rest) = ins.split_at(nc);
        let (carry, xs) = rest.split_at(ncarry);
        let (const_lin, xs_lin) = (&flags[..nc], &flags[nc + ncarry..]);
        let body_in = body.jaxpr().in_avals();
        let body_out = body.jaxpr().out_avals();
        let pick = |avals: &[AbstractValue], lin: &[bool], want: bool| -> Vec<AbstractValue> {
            avals
                .iter()
                .zip(lin)
                .filter(|(_, &l)| l == want)
                .map(|(a, _)| a.clone())
                .collect()
        };
        let nlc_avals = pick(&body_in[..nc], const_lin, false);
        let lc_avals = pick(&body_in[..nc], const_lin, true);
        let carry_avals = body_in[nc..nc + ncarry].to_vec();
        let ys_given = self.scan_body_cts(e);
        let ys_avals = pick(&body_out[ncarry..], &ys_given[ncarry..], true);
        let nlx_avals = pick(&body_in[nc + ncarry..], xs_lin, false);

        // The new body: (nlc; acc, ct_carry; ct_ys, nlx) -> (acc + d_lc, d_carry; d_lx).
        let mut b = JaxprBuilder::new();
        let tconsts: Vec<Atom> = t
            .constvars()
            .iter()
            .map(|&c| Atom::Var(b.add_constvar(t.var_aval(c).clone())))
            .collect();
        let fresh = |b: &mut JaxprBuilder, avals: &[AbstractValue]| -> Vec<Atom> {
            avals
                .iter()
                .map(|a| Atom::Var(b.add_invar(a.clone())))
                .collect()
        };
        let nlc = fresh(&mut b, &nlc_avals);
        let acc = fresh(&mut b, &lc_avals);
        let ct_carry = fresh(&mut b, &carry_avals);
        let ct_ys = fresh(&mut b, &ys_avals);
        let nlx = fresh(&mut b, &nlx_avals);
        // The body's transpose adds the linear consts' cotangents to the accumulators as
        // they come (JAX's order).
        let mut args = nlc;
        args.extend(nlx);
        args.extend(ct_carry);
        args.extend(ct_ys);
        args.extend(acc);
        let new_outs =
            inline(&mut b, t, &tconsts, &args).map_err(|message| PassError::IllTyped {
                eqn: Some(i),
                message,
            })?;
        let new_body = b.build(new_outs).map_err(|err| PassError::IllTyped {
            eqn: Some(i),
            message: err.to_string(),
        })?;

        // The operands of the new scan.
        let mut operands = self.non_linear_operands(consts);
        for &a in consts {
            if self.atom_is_lin(a) {
                let z = self.zeros(i, &src.atom_aval(a))?;
                operands.push(z);
            }
        }
        for &o in &e.outvars()[..ncarry] {
            operands.push(self.ct_or_zeros(i, o)?);
        }
        operands.extend(self.present_cts(&e.outvars()[ncarry..]));
        operands.extend(self.non_linear_operands(xs));
        let n_ops = operands.len();
        let reverse = matches!(e.params().get("reverse"), Some(Param::Bool(true)));
        let mut params = e
            .params()
            .with(
                "jaxpr",
                Param::Jaxpr(ClosedJaxpr::from_parts(
                    Arc::new(new_body),
                    body.consts().to_vec(),
                )),
            )
            .with("reverse", Param::Bool(!reverse))
            .with("num_consts", Param::Int(nlc_avals.len() as i64))
            .with("num_carry", Param::Int((lc_avals.len() + ncarry) as i64));
        if e.params().get("linear").is_some() {
            params = params.with("linear", Param::Bools(vec![false; n_ops].into()));
        }
        let outs = self.emit(i, e.primitive().clone(), operands, params)?;
        let (d_consts, rest) = outs.split_at(lc_avals.len());
        let (d_carry, d_xs) = rest.split_at(ncarry);
        self.give_linear(i, consts, d_consts.iter().copied())?;
        for (&a, &g) in carry.iter().zip(d_carry) {
            self.give(i, a, g)?;
        }
        self.give_linear(i, xs, d_xs.iter().copied())
    }
}

fn unique_indices(e: &Eqn) -> bool {
    matches!(e.params().get("unique_indices"), Some(Param::Bool(true)))
}

fn sub_jaxpr<'e>(e: &'e Eqn, name: &str) -> Result<&'e ClosedJaxpr, PassError> {
    match e.params().get(name) {
        Some(Param::Jaxpr(cj)) => Ok(cj),
        _ => unreachable!("the typechecker requires the {name} param"),
    }
}

fn int_param(e: &Eqn, name: &str) -> usize {
    match e.params().get(name) {
        Some(&Param::Int(n)) => usize::try_from(n).unwrap_or(0),
        _ => 0,
    }
}

/// A transposed branch returning the cotangents flagged in `want` (a superset of those
/// it has): zeros for the others.
fn with_zero_outputs(
    t: &Transposed,
    want: &[bool],
    avals: &[AbstractValue],
) -> Result<Jaxpr, String> {
    let j = &t.jaxpr;
    let mut b = JaxprBuilder::new();
    let consts: Vec<Atom> = j
        .constvars()
        .iter()
        .map(|&c| Atom::Var(b.add_constvar(j.var_aval(c).clone())))
        .collect();
    let args: Vec<Atom> = j
        .invars()
        .iter()
        .map(|&v| Atom::Var(b.add_invar(j.var_aval(v).clone())))
        .collect();
    let mut have = inline(&mut b, j, &consts, &args)?.into_iter();
    let mut outs = Vec::new();
    for ((&p, &w), aval) in t.present.iter().zip(want).zip(avals) {
        if p {
            outs.extend(have.next());
        } else if w {
            let zero = b.literal(Literal {
                value: zero_value(aval.dtype),
                dtype: aval.dtype,
                weak_type: false,
            });
            let z = b
                .add_eqn(
                    Builtin::BroadcastInDim.into(),
                    vec![zero],
                    Params::new([
                        ("shape", Param::ints(aval.shape.dims())),
                        ("broadcast_dimensions", Param::ints(&[])),
                    ]),
                )
                .map_err(|e| e.to_string())?;
            outs.push(Atom::Var(z[0]));
        }
    }
    b.build(outs).map_err(|e| e.to_string())
}

fn zero_value(dtype: DType) -> LitValue {
    match dtype {
        DType::Bool => LitValue::Bool(false),
        d if d.is_int() => LitValue::Int(0),
        _ => LitValue::Float(0.0),
    }
}

/// Copies the equations of `j` into `b`, its constvars and invars bound to `consts` and
/// `args` (atoms of `b`); returns its outputs as atoms of `b`.
fn inline(
    b: &mut JaxprBuilder,
    j: &Jaxpr,
    consts: &[Atom],
    args: &[Atom],
) -> Result<Vec<Atom>, String> {
    let mut map: Vec<Option<Atom>> = vec![None; j.num_vars()];
    for (&v, &a) in j
        .constvars()
        .iter()
        .zip(consts)
        .chain(j.invars().iter().zip(args))
    {
        map[v.index()] = Some(a);
    }
    let atom = |map: &[Option<Atom>], b: &mut JaxprBuilder, a: Atom| -> Atom {
        match a {
            Atom::Var(v) => map[v.index()].expect("a well-typed jaxpr defines before use"),
            Atom::Lit(l) => b.literal(*j.literal(l)),
        }
    };
    for e in j.eqns() {
        let inputs: Vec<Atom> = e.inputs().iter().map(|&a| atom(&map, b, a)).collect();
        let outs = b
            .add_eqn(e.primitive().clone(), inputs, e.params().clone())
            .map_err(|err| err.to_string())?;
        for (&o, n) in e.outvars().iter().zip(outs) {
            map[o.index()] = Some(Atom::Var(n));
        }
    }
    Ok(j.outvars().iter().map(|&a| atom(&map, b, a)).collect())
}

impl Transposer<'_> {
    fn atom_is_lin(&self, a: Atom) -> bool {
        match a {
            Atom::Var(v) => self.is_lin[v.index()],
            Atom::Lit(_) => false,
        }
    }

    /// The result's atom for a non-linear source atom.
    fn fwd_atom(&mut self, a: Atom) -> Atom {
        match a {
            Atom::Var(v) => Atom::Var(
                self.fwd[v.index()].expect("non-linear variables are copied before their uses"),
            ),
            Atom::Lit(l) => self.out.literal(*self.src.literal(l)),
        }
    }

    fn aval(&self, v: VarId) -> AbstractValue {
        self.out
            .var_aval(v)
            .cloned()
            .expect("variables of the result's builder")
    }

    fn emit(
        &mut self,
        eqn: usize,
        prim: Primitive,
        inputs: Vec<Atom>,
        params: Params,
    ) -> Result<Vec<VarId>, PassError> {
        self.out
            .add_eqn(prim, inputs, params)
            .map_err(|e| PassError::IllTyped {
                eqn: (eqn != NO_EQN).then_some(eqn),
                message: e.to_string(),
            })
    }

    fn emit1(
        &mut self,
        eqn: usize,
        prim: Builtin,
        inputs: Vec<Atom>,
        params: Params,
    ) -> Result<VarId, PassError> {
        Ok(self.emit(eqn, Primitive::Builtin(prim), inputs, params)?[0])
    }

    fn accumulate(&mut self, eqn: usize, v: VarId, g: VarId) -> Result<(), PassError> {
        let slot = &mut self.ct[v.index()];
        match *slot {
            None => *slot = Some(g),
            Some(prev) => {
                let sum = self.emit1(
                    eqn,
                    Builtin::AddAny,
                    vec![Atom::Var(prev), Atom::Var(g)],
                    Params::empty(),
                )?;
                self.ct[v.index()] = Some(sum);
            }
        }
        Ok(())
    }

    /// Adds `g` to the cotangent of operand `a` if it is linear.
    fn give(&mut self, eqn: usize, a: Atom, g: VarId) -> Result<(), PassError> {
        match a {
            Atom::Var(v) if self.is_lin[v.index()] => self.accumulate(eqn, v, g),
            _ => Ok(()),
        }
    }

    /// Zeros of type `aval`, as JAX instantiates a zero cotangent: the literal `0` for a
    /// scalar, else a broadcast of it.
    fn zeros(&mut self, eqn: usize, aval: &AbstractValue) -> Result<Atom, PassError> {
        if aval.shape.rank() == 0 {
            return Ok(self.out.literal(Literal {
                value: zero_value(aval.dtype),
                dtype: aval.dtype,
                weak_type: aval.weak_type,
            }));
        }
        self.zeros_var(eqn, aval).map(Atom::Var)
    }

    /// Zeros of type `aval` as a variable: a broadcast of the literal `0`.
    fn zeros_var(&mut self, eqn: usize, aval: &AbstractValue) -> Result<VarId, PassError> {
        let zero = self.out.literal(Literal {
            value: zero_value(aval.dtype),
            dtype: aval.dtype,
            // A zero cotangent has its input's type, weak type included (JAX's).
            weak_type: aval.weak_type,
        });
        self.emit1(
            eqn,
            Builtin::BroadcastInDim,
            vec![zero],
            params([
                ("shape", Param::ints(aval.shape.dims())),
                ("broadcast_dimensions", Param::ints(&[])),
            ]),
        )
    }

    /// Sums `g` back to the shape of an operand that was broadcast implicitly (rank 0,
    /// or size-1 dimensions of an operand of equal rank).
    fn unbroadcast(
        &mut self,
        eqn: usize,
        g: VarId,
        target: &AbstractValue,
    ) -> Result<VarId, PassError> {
        let gav = self.aval(g);
        if gav.shape == target.shape {
            return Ok(g);
        }
        let gd = gav.shape.dims();
        let axes: Vec<i64> = if target.shape.rank() == 0 {
            (0..gd.len() as i64).collect()
        } else {
            target
                .shape
                .dims()
                .iter()
                .zip(gd)
                .enumerate()
                .filter(|(_, (&t, &s))| t != s)
                .map(|(i, _)| i as i64)
                .collect()
        };
        let summed = self.emit1(
            eqn,
            Builtin::ReduceSum,
            vec![Atom::Var(g)],
            params([("axes", Param::ints(&axes)), ("out_sharding", Param::None)]),
        )?;
        if target.shape.rank() == 0 {
            return Ok(summed);
        }
        self.reshape(eqn, summed, target.shape.dims())
    }

    /// `g` reshaped to `dims` (as JAX's `lax.reshape`, no equation when a non-scalar
    /// already has that shape).
    fn reshape(&mut self, eqn: usize, g: VarId, dims: &[i64]) -> Result<VarId, PassError> {
        let shape = self.aval(g).shape;
        if !dims.is_empty() && shape.dims() == dims {
            return Ok(g);
        }
        self.emit1(
            eqn,
            Builtin::Reshape,
            vec![Atom::Var(g)],
            params([
                ("new_sizes", Param::ints(dims)),
                ("dimensions", Param::None),
                ("sharding", Param::None),
            ]),
        )
    }

    fn transpose_eqn(&mut self, i: usize, e: &Eqn, g: VarId) -> Result<(), PassError> {
        let src = self.src;
        let ins = e.inputs();
        let in_aval = |k: usize| src.atom_aval(ins[k]);
        let &Primitive::Builtin(p) = e.primitive() else {
            unreachable!("check_linear refuses extension primitives");
        };
        let gv = Atom::Var(g);
        use Builtin::*;
        match p {
            Add | Sub => {
                for (k, &a) in ins.iter().enumerate() {
                    if !self.atom_is_lin(a) {
                        continue;
                    }
                    let mut gk = g;
                    if k == 1 && p == Sub {
                        gk = self.emit1(i, Neg, vec![gv], Params::empty())?;
                    }
                    let gk = self.unbroadcast(i, gk, &in_aval(k))?;
                    self.give(i, a, gk)?;
                }
            }
            AddAny => {
                self.give(i, ins[0], g)?;
                self.give(i, ins[1], g)?;
            }
            Neg => {
                let n = self.emit1(i, Neg, vec![gv], Params::empty())?;
                self.give(i, ins[0], n)?;
            }
            Copy => self.give(i, ins[0], g)?,
            // psum's transpose is pvary (the identity on data) and pvary's is psum: the
            // shard_map body's explicit pvary equations keep this local.
            Psum => {
                let axes = e
                    .params()
                    .get("axes")
                    .cloned()
                    .unwrap_or(Param::Names(Arc::from(vec![])));
                let c = self.emit1(i, Pvary, vec![gv], params([("axes", axes)]))?;
                self.give(i, ins[0], c)?;
            }
            Pvary => {
                let axes = e
                    .params()
                    .get("axes")
                    .cloned()
                    .unwrap_or(Param::Names(Arc::from(vec![])));
                let c = self.emit1(i, Psum, vec![gv], params([("axes", axes)]))?;
                self.give(i, ins[0], c)?;
            }
            AllGather | ReduceScatter => {
                let ps = e.params();
                let get = |n: &str| ps.get(n).cloned().unwrap_or(Param::None);
                let (prim, dim_name, dim) = if p == AllGather {
                    (
                        ReduceScatter,
                        "scatter_dimension",
                        get("all_gather_dimension"),
                    )
                } else {
                    (AllGather, "all_gather_dimension", get("scatter_dimension"))
                };
                let c = self.emit1(
                    i,
                    prim,
                    vec![gv],
                    params([
                        ("axis_name", get("axis_name")),
                        ("axis_size", get("axis_size")),
                        ("tiled", get("tiled")),
                        (dim_name, dim),
                    ]),
                )?;
                self.give(i, ins[0], c)?;
            }
            Ppermute => {
                let inverse: Vec<(i64, i64)> = match e.params().get("perm") {
                    Some(Param::Pairs(ps)) => ps.iter().map(|&(a, b)| (b, a)).collect(),
                    _ => Vec::new(),
                };
                let c = self.emit1(
                    i,
                    Ppermute,
                    vec![gv],
                    e.params().with("perm", Param::Pairs(inverse.into())),
                )?;
                self.give(i, ins[0], c)?;
            }
            AllToAll => {
                let ps = e.params();
                let get = |n: &str| ps.get(n).cloned().unwrap_or(Param::Int(0));
                let c = self.emit1(
                    i,
                    AllToAll,
                    vec![gv],
                    ps.with("split_axis", get("concat_axis"))
                        .with("concat_axis", get("split_axis")),
                )?;
                self.give(i, ins[0], c)?;
            }
            // The cotangent is laid out as the value was.
            ShardingConstraint => {
                let c = self.emit1(i, ShardingConstraint, vec![gv], e.params().clone())?;
                self.give(i, ins[0], c)?;
            }
            TriangularSolve => {
                // As JAX: the same solve with `a` transposed the other way.
                let a = self.fwd_atom(ins[0]);
                let flipped = !matches!(e.params().get("transpose_a"), Some(Param::Bool(true)));
                let c = self.emit1(
                    i,
                    TriangularSolve,
                    vec![a, gv],
                    e.params().with("transpose_a", Param::Bool(flipped)),
                )?;
                self.give(i, ins[1], c)?;
            }
            Mul | Div => {
                // As JAX: the cotangent takes the linear operand's place (`div`'s linear
                // operand is its dividend).
                let k = if self.atom_is_lin(ins[0]) { 0 } else { 1 };
                let other = self.fwd_atom(ins[1 - k]);
                let operands = if k == 0 {
                    vec![gv, other]
                } else {
                    vec![other, gv]
                };
                let scaled = self.emit1(i, p, operands, Params::empty())?;
                let gk = self.unbroadcast(i, scaled, &in_aval(k))?;
                self.give(i, ins[k], gk)?;
            }
            ConvertElementType => {
                let x = in_aval(0);
                let c = self.emit1(
                    i,
                    ConvertElementType,
                    vec![gv],
                    params([
                        ("new_dtype", Param::DType(x.dtype)),
                        ("weak_type", Param::Bool(x.weak_type)),
                        ("sharding", Param::None),
                    ]),
                )?;
                self.give(i, ins[0], c)?;
            }
            ReduceSum => {
                // As JAX: the cotangent broadcast back along the summed axes, its
                // broadcast_dimensions NumPy integers (`np.delete` of an `np.arange`); no
                // equation when no axis was summed (an identity broadcast is not staged).
                let x = in_aval(0);
                let axes = ints(e.params(), "axes");
                let kept = axes_not_in(x.shape.rank(), &[&axes]);
                let b = if kept.len() == x.shape.rank() {
                    g
                } else {
                    let ps = params([
                        ("shape", Param::ints(x.shape.dims())),
                        ("broadcast_dimensions", Param::ints(&kept)),
                        ("sharding", Param::None),
                    ])
                    .with_numpy_ints(
                        (0..kept.len()).map(|k| ("broadcast_dimensions", k, DType::I64)),
                    );
                    self.emit1(i, BroadcastInDim, vec![gv], ps)?
                };
                self.give(i, ins[0], b)?;
            }
            BroadcastInDim => {
                // As JAX: the cotangent summed over every axis but those the operand's
                // dimensions of size other than 1 went to, and the operand's size-1
                // dimensions put back with a broadcast_in_dim. (No axis to sum is an
                // identity broadcast, which JAX does not stage.)
                let x = in_aval(0);
                let out_rank = src.var_aval(e.outvars()[0]).shape.rank();
                let bdims = ints(e.params(), "broadcast_dimensions");
                let xd = x.shape.dims();
                let unit: Vec<i64> = (0..xd.len() as i64)
                    .filter(|&k| xd[k as usize] == 1)
                    .collect();
                let kept_out: Vec<i64> = bdims
                    .iter()
                    .zip(xd)
                    .filter(|&(_, &d)| d != 1)
                    .map(|(&b, _)| b)
                    .collect();
                let axes = axes_not_in(out_rank, &[&kept_out]);
                if axes.is_empty() {
                    self.give(i, ins[0], g)?;
                    return Ok(());
                }
                let mut r = self.emit1(
                    i,
                    ReduceSum,
                    vec![gv],
                    params([("axes", Param::ints(&axes)), ("out_sharding", Param::None)]),
                )?;
                if !unit.is_empty() {
                    let put_back = axes_not_in(xd.len(), &[&unit]);
                    r = self.emit1(
                        i,
                        BroadcastInDim,
                        vec![Atom::Var(r)],
                        params([
                            ("shape", Param::ints(xd)),
                            ("broadcast_dimensions", Param::ints(&put_back)),
                            ("sharding", Param::None),
                        ]),
                    )?;
                }
                self.give(i, ins[0], r)?;
            }
            Reshape => {
                let x = in_aval(0);
                let r = match e.params().get("dimensions") {
                    Some(Param::Ints(perm)) => {
                        let permuted: Vec<i64> =
                            perm.iter().map(|&d| x.shape.dims()[d as usize]).collect();
                        let r = self.reshape(i, g, &permuted)?;
                        let inverse = inverse_perm(perm);
                        if inverse.iter().enumerate().all(|(k, &d)| d == k as i64) {
                            r
                        } else {
                            self.emit1(
                                i,
                                Transpose,
                                vec![Atom::Var(r)],
                                params([("permutation", Param::ints(&inverse))]),
                            )?
                        }
                    }
                    _ => self.reshape(i, g, x.shape.dims())?,
                };
                self.give(i, ins[0], r)?;
            }
            Transpose => {
                let perm = ints(e.params(), "permutation");
                let r = self.emit1(
                    i,
                    Transpose,
                    vec![gv],
                    params([("permutation", Param::ints(&inverse_perm(&perm)))]),
                )?;
                self.give(i, ins[0], r)?;
            }
            Squeeze => {
                let x = in_aval(0);
                let mut dims = ints(e.params(), "dimensions");
                dims.sort_unstable();
                dims.dedup();
                // As JAX: the squeezed dimensions put back by a broadcast_in_dim.
                let r = if dims.is_empty() {
                    g
                } else {
                    let kept = axes_not_in(x.shape.rank(), &[&dims]);
                    self.emit1(
                        i,
                        BroadcastInDim,
                        vec![gv],
                        params([
                            ("shape", Param::ints(x.shape.dims())),
                            ("broadcast_dimensions", Param::ints(&kept)),
                            ("sharding", Param::None),
                        ]),
                    )?
                };
                debug_assert_eq!(self.aval(r).shape, x.shape);
                self.give(i, ins[0], r)?;
            }
            ExpandDims => {
                let dims = ints(e.params(), "dimensions");
                let r = if dims.is_empty() {
                    g
                } else {
                    self.emit1(
                        i,
                        Squeeze,
                        vec![gv],
                        params([("dimensions", Param::ints(&dims))]),
                    )?
                };
                self.give(i, ins[0], r)?;
            }
            SelectN => {
                // As JAX: zeros like the cotangent (a literal for a scalar), then per
                // linear case the cotangent selected where the case was. A boolean
                // predicate selects between the two directly; an integer one is compared
                // with the case's index first (`select_n (eq p k) zeros ct`).
                let pred = self.fwd_atom(ins[0]);
                let case_aval = self.aval(g);
                let zero = self.zeros(i, &case_aval)?;
                let pred_dtype = src.atom_aval(ins[0]).dtype;
                let mut cts = Vec::new();
                for (k, &case) in ins.iter().enumerate().skip(1) {
                    if !self.atom_is_lin(case) {
                        continue;
                    }
                    let r = if pred_dtype == DType::Bool && ins.len() == 3 {
                        let cases = if k == 1 {
                            vec![pred, gv, zero]
                        } else {
                            vec![pred, zero, gv]
                        };
                        self.emit1(i, SelectN, cases, Params::empty())?
                    } else {
                        let index = self.out.literal(Literal {
                            value: LitValue::Int(k as i64 - 1),
                            dtype: pred_dtype,
                            weak_type: false,
                        });
                        let is_k = self.emit1(i, Eq, vec![pred, index], Params::empty())?;
                        self.emit1(i, SelectN, vec![Atom::Var(is_k), zero, gv], Params::empty())?
                    };
                    cts.push((case, r));
                }
                for (case, r) in cts {
                    self.give(i, case, r)?;
                }
            }
            DotGeneral => self.dot_general(i, e, g)?,
            ConvGeneralDilated => self.conv_general_dilated(i, e, g)?,
            Gather => {
                let Some(Param::GatherDims(dn)) = e.params().get("dimension_numbers") else {
                    unreachable!("the typechecker requires gather's dimension numbers");
                };
                let sdn = ScatterDimensionNumbers {
                    update_window_dims: dn.offset_dims.clone(),
                    inserted_window_dims: dn.collapsed_slice_dims.clone(),
                    scatter_dims_to_operand_dims: dn.start_index_map.clone(),
                    operand_batching_dims: dn.operand_batching_dims.clone(),
                    scatter_indices_batching_dims: dn.start_indices_batching_dims.clone(),
                };
                let x = in_aval(0);
                let zeros = self.zeros(i, &x)?;
                let indices = self.fwd_atom(ins[1]);
                let mut ps = vec![("dimension_numbers", Param::ScatterDims(Arc::new(sdn)))];
                for name in ["mode", "indices_are_sorted", "unique_indices"] {
                    if let Some(v) = e.params().get(name) {
                        ps.push((name, v.clone()));
                    }
                }
                // JAX's scatter-add holds its combining function (shared per dtype).
                if let Some(j) = add_combiner(x.dtype) {
                    ps.push(("update_consts", Param::Ints(Arc::from(Vec::new()))));
                    ps.push(("update_jaxpr", Param::Jaxpr(j)));
                }
                let r = self.emit1(i, ScatterAdd, vec![zeros, indices, gv], Params::new(ps))?;
                self.give(i, ins[0], r)?;
            }
            ScatterAdd | ScatterSub => {
                self.give(i, ins[0], g)?;
                if self.atom_is_lin(ins[2]) {
                    let mut r = self.gather_windows(i, e, gv)?;
                    if p == ScatterSub {
                        r = self.emit1(i, Neg, vec![Atom::Var(r)], Params::empty())?;
                    }
                    self.give(i, ins[2], r)?;
                }
            }
            ScatterMul => {
                // Linear in the operand or (with unique indices) in the updates, never both.
                let indices = self.fwd_atom(ins[1]);
                if self.atom_is_lin(ins[0]) {
                    let u = self.fwd_atom(ins[2]);
                    let r = self.emit1(i, ScatterMul, vec![gv, indices, u], e.params().clone())?;
                    self.give(i, ins[0], r)?;
                } else {
                    let x = self.fwd_atom(ins[0]);
                    let m = self.emit1(i, Mul, vec![gv, x], Params::empty())?;
                    let r = self.gather_windows(i, e, Atom::Var(m))?;
                    self.give(i, ins[2], r)?;
                }
            }
            Scatter => {
                // Unique indices: the written windows get the updates' cotangents, the
                // operand the rest (its written windows zeroed).
                let indices = self.fwd_atom(ins[1]);
                if self.atom_is_lin(ins[0]) {
                    let zeros = self.zeros(i, &in_aval(2))?;
                    let r = self.emit1(i, Scatter, vec![gv, indices, zeros], e.params().clone())?;
                    self.give(i, ins[0], r)?;
                }
                if self.atom_is_lin(ins[2]) {
                    let r = self.gather_windows(i, e, gv)?;
                    self.give(i, ins[2], r)?;
                }
            }
            Rev => {
                let r = self.emit1(i, Rev, vec![gv], e.params().clone())?;
                self.give(i, ins[0], r)?;
            }
            // JAX's rule: the cotangent rounded the same way.
            ReducePrecision => {
                let r = self.emit1(i, ReducePrecision, vec![gv], e.params().clone())?;
                self.give(i, ins[0], r)?;
            }
            Cumsum => {
                // A running sum's transpose is the running sum the other way (JAX's).
                let reverse = matches!(e.params().get("reverse"), Some(Param::Bool(true)));
                let params = e.params().with("reverse", Param::Bool(!reverse));
                let r = self.emit1(i, Cumsum, vec![gv], params)?;
                self.give(i, ins[0], r)?;
            }
            ReduceWindowSum => self.transpose_reduce_window_sum(i, e, g)?,
            SelectAndGatherAdd => self.transpose_select_and_gather_add(i, e, g)?,
            SelectAndScatterAdd => {
                // JAX's: the cotangent gathered from each window's selected position.
                let x = self.fwd_atom(ins[1]);
                let rank = in_aval(1).shape.rank();
                let ones = Param::ints(&vec![1; rank]);
                let p = e
                    .params()
                    .with("base_dilation", ones.clone())
                    .with("window_dilation", ones);
                let r = self.emit1(i, SelectAndGatherAdd, vec![gv, x], p)?;
                self.give(i, ins[0], r)?;
            }
            Concatenate => {
                // As JAX: the cotangent split into one piece per operand (the pieces of
                // non-linear operands unused).
                let d = match e.params().get("dimension") {
                    Some(&Param::Int(d)) => d,
                    _ => unreachable!("the typechecker requires concatenate's dimension"),
                };
                let sizes: Vec<i64> = (0..ins.len())
                    .map(|k| in_aval(k).shape.dims()[d as usize])
                    .collect();
                let pieces = self.emit(
                    i,
                    Primitive::Builtin(Split),
                    vec![gv],
                    params([("sizes", Param::ints(&sizes)), ("axis", Param::Int(d))]),
                )?;
                for (&a, c) in ins.iter().zip(pieces) {
                    self.give(i, a, c)?;
                }
            }
            Stack => {
                // As JAX: the cotangent unstacked along the stacked axis.
                if ins.iter().any(|&a| self.atom_is_lin(a)) {
                    let pieces =
                        self.emit(i, Primitive::Builtin(Unstack), vec![gv], e.params().clone())?;
                    for (&a, c) in ins.iter().zip(pieces) {
                        self.give(i, a, c)?;
                    }
                }
            }
            Unstack => {
                // As JAX: the results' cotangents (zeros where none) stacked again.
                if self.atom_is_lin(ins[0]) {
                    let mut parts = Vec::with_capacity(e.outvars().len());
                    for &o in e.outvars() {
                        let c = self.ct_or_zeros(i, o)?;
                        parts.push(c);
                    }
                    let r = self.emit1(i, Stack, parts, e.params().clone())?;
                    self.give(i, ins[0], r)?;
                }
            }
            Tile => {
                // As JAX: the cotangent viewed as (r0, d0, r1, d1, ...) and summed over
                // the repeats.
                let x = in_aval(0);
                let reps = ints(e.params(), "reps");
                let wide: Vec<i64> = reps
                    .iter()
                    .zip(x.shape.dims())
                    .flat_map(|(&r, &d)| [r, d])
                    .collect();
                let w = self.emit1(
                    i,
                    Reshape,
                    vec![gv],
                    params([
                        ("new_sizes", Param::ints(&wide)),
                        ("dimensions", Param::None),
                        ("sharding", Param::None),
                    ]),
                )?;
                let axes: Vec<i64> = (0..x.shape.rank() as i64).map(|k| 2 * k).collect();
                let r = self.emit1(
                    i,
                    ReduceSum,
                    vec![Atom::Var(w)],
                    params([("axes", Param::ints(&axes)), ("out_sharding", Param::None)]),
                )?;
                self.give(i, ins[0], r)?;
            }
            OptimizationBarrier => {
                // As JAX: every result's cotangent (zeros where none) through a barrier.
                let mut cts = Vec::with_capacity(e.outvars().len());
                for &o in e.outvars() {
                    let c = self.ct_or_zeros(i, o)?;
                    cts.push(c);
                }
                let outs = self.emit(
                    i,
                    Primitive::Builtin(OptimizationBarrier),
                    cts,
                    Params::empty(),
                )?;
                for (&a, c) in ins.iter().zip(outs) {
                    self.give(i, a, c)?;
                }
            }
            Split => {
                // The pieces' cotangents joined again (zeros for pieces without one).
                let axis = match e.params().get("axis") {
                    Some(&Param::Int(a)) => a,
                    _ => unreachable!("the typechecker requires split's axis"),
                };
                if self.atom_is_lin(ins[0]) {
                    let mut parts = Vec::with_capacity(e.outvars().len());
                    for &o in e.outvars() {
                        let c = self.ct_or_zeros(i, o)?;
                        parts.push(c);
                    }
                    let r = self.emit1(
                        i,
                        Concatenate,
                        parts,
                        params([("dimension", Param::Int(axis))]),
                    )?;
                    self.give(i, ins[0], r)?;
                }
            }
            Slice => {
                // As JAX: zeros padded around (and, for strides, between) the cotangent.
                let x = in_aval(0);
                let start = ints(e.params(), "start_indices");
                let strides = match e.params().get("strides") {
                    Some(Param::Ints(s)) => s.to_vec(),
                    _ => vec![1; start.len()],
                };
                let strided = strides.iter().any(|&s| s != 1);
                let gd = self.aval(g).shape.dims().to_vec();
                let config: Vec<(i64, i64, i64)> = (0..start.len())
                    .map(|a| {
                        let reach = if gd[a] == 0 {
                            0
                        } else {
                            1 + (gd[a] - 1) * strides[a]
                        };
                        let high = x.shape.dims()[a] - start[a] - reach;
                        (start[a], high, strides[a] - 1)
                    })
                    .collect();
                // JAX computes the high padding (and, for strides, the interior) with
                // NumPy: those print as `np.int64(n)`; the low padding is the slice's
                // start index as it was.
                let mut marks = Vec::new();
                for a in 0..start.len() {
                    if let Some(d) = e.params().numpy_int("start_indices", a) {
                        marks.push((3 * a, d));
                    }
                    marks.push((3 * a + 1, DType::I64));
                    if strided {
                        marks.push((3 * a + 2, DType::I64));
                    }
                }
                let r = self.pad_with_zero(i, g, config, &marks)?;
                self.give(i, ins[0], r)?;
            }
            Pad => self.transpose_pad(i, e, g)?,
            DynamicSlice => {
                // dynamic_slice and dynamic_update_slice clamp the start indices alike.
                let x = in_aval(0);
                let mut operands = vec![self.zeros(i, &x)?, gv];
                for &a in &ins[1..] {
                    operands.push(self.fwd_atom(a));
                }
                let r = self.emit1(i, DynamicUpdateSlice, operands, Params::empty())?;
                self.give(i, ins[0], r)?;
            }
            DynamicUpdateSlice => {
                let idx: Vec<Atom> = ins[2..].iter().map(|&a| self.fwd_atom(a)).collect();
                if self.atom_is_lin(ins[0]) {
                    let u = in_aval(1);
                    let mut operands = vec![gv, self.zeros(i, &u)?];
                    operands.extend(idx.iter().copied());
                    let r = self.emit1(i, DynamicUpdateSlice, operands, Params::empty())?;
                    self.give(i, ins[0], r)?;
                }
                if self.atom_is_lin(ins[1]) {
                    let u = in_aval(1);
                    let mut operands = vec![gv];
                    operands.extend(idx.iter().copied());
                    let r = self.emit1(
                        i,
                        DynamicSlice,
                        operands,
                        params([("slice_sizes", Param::ints(u.shape.dims()))]),
                    )?;
                    self.give(i, ins[1], r)?;
                }
            }
            _ => unreachable!("check_linear admits only primitives with a rule"),
        }
        Ok(())
    }

    /// The update windows of scatter equation `e` read out of `t` (of the operand's type):
    /// the gather with the scatter's dimension numbers, mode and index flags, and a fill of
    /// 0 for windows out of bounds (a scatter drops those; the default fill of a
    /// `FILL_OR_DROP` gather is NaN), as JAX transposes a scatter.
    fn gather_windows(&mut self, i: usize, e: &Eqn, t: Atom) -> Result<VarId, PassError> {
        let Some(Param::ScatterDims(dn)) = e.params().get("dimension_numbers") else {
            unreachable!("the typechecker requires scatter's dimension numbers");
        };
        let x = self.src.atom_aval(e.inputs()[0]);
        let u = self.src.atom_aval(e.inputs()[2]);
        let mut window = dn.update_window_dims.iter();
        let not_window = axes_mask(
            x.shape.rank(),
            &[&dn.inserted_window_dims, &dn.operand_batching_dims],
        );
        let slice_sizes: Vec<i64> = not_window
            .iter()
            .map(|&skip| {
                if skip {
                    1
                } else {
                    window.next().map_or(1, |&w| u.shape.dims()[w as usize])
                }
            })
            .collect();
        if slice_sizes.iter().zip(x.shape.dims()).any(|(s, d)| s > d) {
            // No window fits in the operand (an axis of size 0): the scatter drops every
            // update, whose cotangent is zero. (The gather would be ill-typed.)
            return self.zeros_var(i, &u);
        }
        let gdn = GatherDimensionNumbers {
            offset_dims: dn.update_window_dims.clone(),
            collapsed_slice_dims: dn.inserted_window_dims.clone(),
            start_index_map: dn.scatter_dims_to_operand_dims.clone(),
            operand_batching_dims: dn.operand_batching_dims.clone(),
            start_indices_batching_dims: dn.scatter_indices_batching_dims.clone(),
        };
        let indices = self.fwd_atom(e.inputs()[1]);
        let mut ps = vec![
            ("dimension_numbers", Param::GatherDims(Arc::new(gdn))),
            ("slice_sizes", Param::ints(&slice_sizes)),
            ("fill_value", Param::Int(0)),
        ];
        for name in ["mode", "indices_are_sorted", "unique_indices"] {
            if let Some(v) = e.params().get(name) {
                ps.push((name, v.clone()));
            }
        }
        self.emit1(i, Builtin::Gather, vec![t, indices], Params::new(ps))
    }

    /// `pad` of `g` with a zero of its dtype.
    fn pad_with_zero(
        &mut self,
        i: usize,
        g: VarId,
        config: Vec<(i64, i64, i64)>,
        numpy_ints: &[(usize, DType)],
    ) -> Result<VarId, PassError> {
        let dtype = self.aval(g).dtype;
        let zero = self.out.literal(Literal {
            value: if dtype.is_float() {
                LitValue::Float(0.0)
            } else {
                LitValue::Int(0)
            },
            dtype,
            weak_type: false,
        });
        self.emit1(
            i,
            Builtin::Pad,
            vec![Atom::Var(g), zero],
            params([("padding_config", Param::Padding(config.into()))])
                .with_numpy_ints(numpy_ints.iter().map(|&(k, d)| ("padding_config", k, d))),
        )
    }

    /// `pad`: the operand's cotangent is the cotangent with the padding cut off (negative
    /// padding undone first) and the interior dropped by a strided slice; the padding
    /// value's is the sum of the rest, `sum(ct) - sum(operand's cotangent)`.
    fn transpose_pad(&mut self, i: usize, e: &Eqn, g: VarId) -> Result<(), PassError> {
        let ins = e.inputs();
        let config: Vec<(i64, i64, i64)> = match e.params().get("padding_config") {
            Some(Param::Padding(c)) => c.to_vec(),
            _ => unreachable!("the typechecker requires pad's padding_config"),
        };
        // Both steps even where one is the identity: the equations JAX makes.
        let mut undo: Vec<(i64, i64, i64)> = Vec::with_capacity(config.len());
        for &(lo, hi, _) in &config {
            let (Some(nlo), Some(nhi)) = (lo.checked_neg(), hi.checked_neg()) else {
                return Err(rule_error(
                    Builtin::Pad,
                    i,
                    format!(
                        "the padding ({lo}, {hi}) cannot be undone: its negation does not \
                         fit in i64"
                    ),
                ));
            };
            undo.push((nlo, nhi, 0));
        }
        // An undo whose size overflows is the pad rule's error, reported by `emit`.
        // JAX computes the undoing config, the slice's start indices and its strides with
        // NumPy: they print as `np.int64(n)`.
        let all_numpy: Vec<(usize, DType)> = (0..3 * undo.len()).map(|k| (k, DType::I64)).collect();
        let unpadded = self.pad_with_zero(i, g, undo, &all_numpy)?;
        let dims = self.aval(unpadded).shape.dims().to_vec();
        // Saturating is exact: a stride of i64::MAX or more takes one element of any
        // dimension (at most i64::MAX).
        let strides: Vec<i64> = config
            .iter()
            .map(|&(_, _, interior)| interior.saturating_add(1))
            .collect();
        let t_op = self.emit1(
            i,
            Builtin::Slice,
            vec![Atom::Var(unpadded)],
            params([
                ("start_indices", Param::ints(&vec![0; dims.len()])),
                ("limit_indices", Param::ints(&dims)),
                ("strides", Param::ints(&strides)),
            ])
            .with_numpy_ints(
                (0..dims.len())
                    .flat_map(|k| [("start_indices", k, DType::I64), ("strides", k, DType::I64)]),
            ),
        )?;
        self.give(i, ins[0], t_op)?;
        if self.atom_is_lin(ins[1]) {
            let total = |t: &mut Self, v: VarId| -> Result<VarId, PassError> {
                let rank = t.aval(v).shape.rank() as i64;
                if rank == 0 {
                    return Ok(v);
                }
                let axes: Vec<i64> = (0..rank).collect();
                t.emit1(
                    i,
                    Builtin::ReduceSum,
                    vec![Atom::Var(v)],
                    params([("axes", Param::ints(&axes)), ("out_sharding", Param::None)]),
                )
            };
            let all = total(self, g)?;
            let inner = total(self, t_op)?;
            let r = self.emit1(
                i,
                Builtin::Sub,
                vec![Atom::Var(all), Atom::Var(inner)],
                Params::empty(),
            )?;
            self.give(i, ins[1], r)?;
        }
        Ok(())
    }

    /// The type of operand `operand` of a windowed equation and its window (the params
    /// the typechecker accepted).
    fn window_of(
        &self,
        i: usize,
        e: &Eqn,
        b: Builtin,
        operand: usize,
    ) -> Result<(AbstractValue, Window), PassError> {
        let x = self.src.atom_aval(e.inputs()[operand]);
        let w = Window::from_params(b, e.params(), x.shape.rank())
            .map_err(|err| rule_error(b, i, err.to_string()))?;
        Ok((x, w))
    }

    /// `reduce_window_sum` (JAX's rule): the cotangent padded as a convolution's input
    /// gradient (low `dilated window - low padding - 1`, strides as interior padding),
    /// then summed over windows with the base dilation as strides.
    fn transpose_reduce_window_sum(
        &mut self,
        i: usize,
        e: &Eqn,
        g: VarId,
    ) -> Result<(), PassError> {
        let ins = e.inputs();
        let (x, w) = self.window_of(i, e, Builtin::ReduceWindowSum, 0)?;
        let rank = x.shape.rank();
        let fail = |message: String| rule_error(Builtin::ReduceWindowSum, i, message);
        let out = self.aval(g).shape.dims().to_vec();
        let mut config = Vec::with_capacity(rank);
        for (a, &outa) in out.iter().enumerate() {
            // Exact in i128: every value is below 2^63 in size.
            let base = dilate(x.shape.dims()[a] as i128, w.base_dilation[a] as i128);
            let win = dilate(w.dims[a] as i128, w.window_dilation[a] as i128);
            let outd = dilate(outa as i128, w.strides[a] as i128);
            let before = win - w.padding[a].0 as i128 - 1;
            let after = base + win - 1 - outd - before;
            let fit = |v: i128| {
                i64::try_from(v).map_err(|_| fail(format!("padding {v} does not fit in i64")))
            };
            config.push((fit(before)?, fit(after)?, w.strides[a] - 1));
        }
        // The padding JAX computes with NumPy (the interior, from the strides, is not).
        let marks: Vec<(usize, DType)> = (0..rank)
            .flat_map(|a| [(3 * a, DType::I64), (3 * a + 1, DType::I64)])
            .collect();
        let padded = self.pad_with_zero(i, g, config, &marks)?;
        let ones = Param::ints(&vec![1; rank]);
        let p = params([
            ("base_dilation", ones),
            ("padding", Param::Pairs(vec![(0, 0); rank].into())),
            ("window_dilation", Param::ints(&w.window_dilation)),
            ("window_dimensions", Param::ints(&w.dims)),
            ("window_strides", Param::ints(&w.base_dilation)),
        ]);
        let r = self.emit1(i, Builtin::ReduceWindowSum, vec![Atom::Var(padded)], p)?;
        self.give(i, ins[0], r)
    }

    /// `select_and_gather_add` (JAX's rule): the cotangent scattered to each window's
    /// selected position (`select_and_scatter_add`); with base dilation the operand is
    /// first padded between its elements with the selection's identity, and the result
    /// strided back. Window dilation has no rule (as in JAX).
    fn transpose_select_and_gather_add(
        &mut self,
        i: usize,
        e: &Eqn,
        g: VarId,
    ) -> Result<(), PassError> {
        let ins = e.inputs();
        let (x, w) = self.window_of(i, e, Builtin::SelectAndGatherAdd, 1)?;
        let rank = x.shape.rank();
        let fail = |message: String| rule_error(Builtin::SelectAndGatherAdd, i, message);
        if w.window_dilation.iter().any(|&d| d != 1) {
            return Err(fail(format!(
                "VJP not implemented for select_and_gather (MaxPool) with window dilation, \
                 got window_dilation={:?}",
                w.window_dilation
            )));
        }
        let ge = select_comparison(e.params()).map_err(|err| fail(err.to_string()))? == Builtin::Ge;
        let mut operand = self.fwd_atom(ins[1]);
        let dilated = w.base_dilation.iter().any(|&d| d != 1);
        if dilated {
            let identity = self.out.literal(Literal {
                value: LitValue::Float(if ge { f64::NEG_INFINITY } else { f64::INFINITY }),
                dtype: x.dtype,
                weak_type: false,
            });
            let config: Vec<(i64, i64, i64)> =
                w.base_dilation.iter().map(|&d| (0, 0, d - 1)).collect();
            let padded = self.emit1(
                i,
                Builtin::Pad,
                vec![operand, identity],
                params([("padding_config", Param::Padding(config.into()))]),
            )?;
            operand = Atom::Var(padded);
        }
        let p = params([
            ("padding", Param::Pairs(w.padding.clone().into())),
            (
                "select_prim",
                e.params()
                    .get("select_prim")
                    .cloned()
                    .unwrap_or(Param::None),
            ),
            ("window_dimensions", Param::ints(&w.dims)),
            ("window_strides", Param::ints(&w.strides)),
        ]);
        let mut r = self.emit1(
            i,
            Builtin::SelectAndScatterAdd,
            vec![Atom::Var(g), operand],
            p,
        )?;
        if dilated {
            let dims = self.aval(r).shape.dims().to_vec();
            r = self.emit1(
                i,
                Builtin::Slice,
                vec![Atom::Var(r)],
                params([
                    ("limit_indices", Param::ints(&dims)),
                    ("start_indices", Param::ints(&vec![0; rank])),
                    ("strides", Param::ints(&w.base_dilation)),
                ]),
            )?;
        }
        self.give(i, ins[0], r)
    }

    fn dot_general(&mut self, i: usize, e: &Eqn, g: VarId) -> Result<(), PassError> {
        let src = self.src;
        let ins = e.inputs();
        let Some(Param::DotDims(dn)) = e.params().get("dimension_numbers") else {
            unreachable!("the typechecker requires dot_general's dimension numbers");
        };
        let lin_is_lhs = self.atom_is_lin(ins[0]);
        let (lin, oth) = if lin_is_lhs { (0, 1) } else { (1, 0) };
        let (l_batch, l_con, o_batch, o_con) = if lin_is_lhs {
            (
                &dn.lhs_batch,
                &dn.lhs_contracting,
                &dn.rhs_batch,
                &dn.rhs_contracting,
            )
        } else {
            (
                &dn.rhs_batch,
                &dn.rhs_contracting,
                &dn.lhs_batch,
                &dn.lhs_contracting,
            )
        };
        let l_aval = src.atom_aval(ins[lin]);
        let o_aval = src.atom_aval(ins[oth]);
        let free = |rank: usize, batch: &[i64], con: &[i64]| -> Vec<i64> {
            axes_not_in(rank, &[batch, con])
        };
        let l_free = free(l_aval.shape.rank(), l_batch, l_con);
        let o_free = free(o_aval.shape.rank(), o_batch, o_con);
        let nb = l_batch.len() as i64;
        // Positions of the other operand's free dimensions in the output (and so in g).
        let o_start = if lin_is_lhs {
            nb + l_free.len() as i64
        } else {
            nb
        };
        let g_con: Vec<i64> = (o_start..o_start + o_free.len() as i64).collect();
        let ct_dn = DotDimensionNumbers {
            lhs_contracting: g_con,
            rhs_contracting: o_free.clone(),
            lhs_batch: (0..nb).collect(),
            rhs_batch: o_batch.clone(),
        };
        let other = self.fwd_atom(ins[oth]);
        // As JAX: the forward equation's preferred element type, which is the output's
        // (and so the cotangent's) dtype.
        let preferred = self.aval(g).dtype;
        let r = self.emit1(
            i,
            Builtin::DotGeneral,
            vec![Atom::Var(g), other],
            params([
                ("dimension_numbers", Param::DotDims(Arc::new(ct_dn))),
                ("precision", Param::None),
                ("preferred_element_type", Param::DType(preferred)),
            ]),
        )?;
        // The product is in the wider of the two dtypes; bring it to the operand's (a
        // preferred element type could not narrow an integer product).
        let r = if self.aval(r).dtype == l_aval.dtype {
            r
        } else {
            self.emit1(
                i,
                Builtin::ConvertElementType,
                vec![Atom::Var(r)],
                params([
                    ("new_dtype", Param::DType(l_aval.dtype)),
                    ("weak_type", Param::Bool(l_aval.weak_type)),
                    ("sharding", Param::None),
                ]),
            )?
        };
        // The result's axes, as axes of the linear operand: its batch axes, its free
        // axes, then its contracting axes in the order of the other operand's axes.
        let mut o_con_sorted: Vec<(i64, i64)> = o_con
            .iter()
            .zip(l_con.iter())
            .map(|(&o, &l)| (o, l))
            .collect();
        o_con_sorted.sort_unstable();
        let src_axes: Vec<i64> = l_batch
            .iter()
            .copied()
            .chain(l_free.iter().copied())
            .chain(o_con_sorted.iter().map(|&(_, l)| l))
            .collect();
        let perm = inverse_perm(&src_axes);
        let identity = perm.iter().enumerate().all(|(k, &p)| p == k as i64);
        let r = if identity {
            r
        } else {
            self.emit1(
                i,
                Builtin::Transpose,
                vec![Atom::Var(r)],
                params([("permutation", Param::ints(&perm))]),
            )?
        };
        self.give(i, ins[lin], r)
    }
}

/// The axes of `0..rank` named in any of `sets` (entries out of range ignored), as a
/// mask: linear in the rank, where `contains` in a loop would be quadratic.
fn axes_mask(rank: usize, sets: &[&[i64]]) -> Vec<bool> {
    let mut m = vec![false; rank];
    for &a in sets.iter().flat_map(|s| s.iter()) {
        if let Some(slot) = usize::try_from(a).ok().and_then(|i| m.get_mut(i)) {
            *slot = true;
        }
    }
    m
}

/// The axes of `0..rank` named in none of `sets`, in order.
fn axes_not_in(rank: usize, sets: &[&[i64]]) -> Vec<i64> {
    axes_mask(rank, sets)
        .iter()
        .enumerate()
        .filter(|(_, &named)| !named)
        .map(|(a, _)| a as i64)
        .collect()
}

/// Whether two type lists agree (shape and dtype, the weak type aside).
fn same_types(a: &[AbstractValue], b: &[AbstractValue]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_type(y))
}

fn types_list(avals: &[AbstractValue]) -> String {
    let parts: Vec<String> = avals.iter().map(|a| a.to_string()).collect();
    format!("({})", parts.join(", "))
}

/// A transpose rule's failure at equation `eqn` of the built-in `b`.
fn rule_error(b: Builtin, eqn: usize, message: String) -> PassError {
    PassError::TransposeRule {
        primitive: b.name().to_owned(),
        eqn,
        message,
    }
}
