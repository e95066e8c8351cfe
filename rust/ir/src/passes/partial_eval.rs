//! Partial evaluation: splitting a jaxpr into what can be computed now (from the known
//! inputs) and what must wait for the unknown ones.
//!
//! [`partial_eval`] walks the equations forwards, marking every variable that depends on
//! an unknown input. An equation with no unknown operand is *known*: it goes to the known
//! jaxpr. Any other equation is *unknown* and goes to the unknown jaxpr, except the
//! higher-order ones, which are split themselves:
//! * `jit`: the called jaxpr is partially evaluated; a known `jit` computes its known
//!   outputs and residuals, an unknown `jit` takes those residuals and the unknown
//!   operands. A residual that is a known operand of the call is passed to the unknown
//!   `jit` directly rather than returned by the known one (as JAX forwards it);
//! * `remat2` (a checkpoint) stores no intermediate value: its jaxpr pruned to the known
//!   outputs is inlined in the known jaxpr (as JAX evaluates it), and the unknown
//!   `remat2` (`differentiated=True`) takes the operands, known ones as residuals, and
//!   recomputes what it needs;
//! * `cond` with a known index: every branch is partially evaluated with the same operand
//!   flags, an output unknown in any branch is made unknown in all, and the branches'
//!   residuals are merged into slots (one per residual type and occurrence) so that every
//!   known branch returns the same residual types, zeros in the slots it does not fill;
//!   the unknown `cond` takes the index, the slots and the unknown operands;
//! * `scan`: a carry is unknown if it is unknown on entry or the body makes it unknown
//!   (a fixpoint); the known scan stacks the per-iteration residuals as extra `ys`, which
//!   the unknown scan reads as extra `xs`. A residual that is a known const of the body
//!   is passed to the unknown scan as a const, and one that is a known `xs` element as the
//!   same `xs`, instead of being stacked; one computed from the known consts alone is
//!   computed once before the loop (by a `jit` of the body pruned to it) and passed as a
//!   const;
//! * `while`: a carry is unknown if it is unknown on entry or the body makes it unknown
//!   (a fixpoint, as for `scan`). If the condition depends on an unknown value (or no
//!   carry is known), the whole loop is unknown. Otherwise it is split as JAX splits it:
//!   a known loop runs the known carries alone (its body and condition pruned to them; a
//!   known carry's update depends on known values only, by the fixpoint), giving the
//!   known outputs, and an unknown loop, the original one with every carry and const,
//!   gives the unknown outputs; its known operands (known consts, the known carries'
//!   initial values) are residuals. The loop recomputes the known carries: nothing can be
//!   saved per iteration, as the trip count is not known statically.
//!
//! `custom_jvp_call` and `custom_vjp_call` are never split (their rules see the whole
//! function): like `stop_gradient` and every first-order equation, they are known when
//! all their operands are, else wholly unknown.
//!
//! An equation with an effect (a debug or IO callback, or a call or loop holding one) is
//! kept on its side even when nothing uses its outputs: in the known jaxpr when its
//! operands are known (as JAX runs a callback on primal values in the forward pass), else
//! in the unknown one.
//!
//! The known values an unknown equation uses are the *residuals*: the known jaxpr returns
//! them after its outputs and the unknown jaxpr takes them before its inputs.
//!
//! Sub-jaxprs are partially evaluated on an explicit stack of frames (nesting depth costs
//! heap, not stack), and each (sub-jaxpr, flags) pair is done once however often it is
//! shared; so are the halves built from it (the known and unknown `cond` branches, `scan`
//! and `while` bodies), which the equations sharing it then share.

use super::dce::{dce, widen};
use super::rebuild::Rebuilder;
use super::PassError;
use crate::aval::AbstractValue;
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::jaxpr::{Atom, AvalId, ClosedJaxpr, Jaxpr, LitValue, Literal, VarId};
use crate::params::{Param, Params};
use crate::primitive::{Builtin, Primitive};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// The two halves of a partially evaluated jaxpr (see [`partial_eval`]).
#[derive(Debug)]
pub struct PartialEval {
    /// Known inputs (in order) to known outputs (in order), then the residuals. It has the
    /// original jaxpr's constvars.
    pub known: Jaxpr,
    /// Residuals, then unknown inputs (in order), to unknown outputs (in order). It has no
    /// constvars (constants an unknown equation uses are residuals).
    pub unknown: Jaxpr,
    /// Per output of the original jaxpr: whether it is an output of `unknown`.
    pub out_unknowns: Vec<bool>,
    /// How many residuals `known` returns after its outputs and `unknown` takes first.
    pub num_residuals: usize,
}

/// Partially evaluates `jaxpr` for inputs of which those flagged in `unknowns` are not
/// known yet (one flag per input; constvars are known).
///
/// Returns a `known` jaxpr, taking the known inputs and returning the known outputs then
/// the residuals, and an `unknown` jaxpr, taking the residuals then the unknown inputs and
/// returning the unknown outputs. An output is unknown when it depends on an unknown
/// input, or when it is flagged in `instantiate` (one flag per output): a known output so
/// flagged is returned by the unknown jaxpr (its value as a residual; a literal stays a
/// literal). Residuals are the known values (equation outputs, known inputs, constants)
/// the unknown jaxpr uses, each once. Both jaxprs are free of dead code; `known` keeps
/// the original constvars, `unknown` has none.
///
/// `jit`, `remat2`, `cond`, `scan` and `while` are split as the [module docs](self) describe.
/// Linear in the size of the jaxpr (loops: times the number of carried values, for the
/// fixpoint), with no recursion over nesting depth.
///
/// # Errors
/// [`PassError::FlagCount`] if `unknowns` has not one flag per input or `instantiate`
/// not one per output; [`PassError::IllTyped`] if the pass built an ill-typed equation
/// (a bug).
///
/// # Example
/// ```
/// use ferrax_ir::passes::partial_eval;
/// use ferrax_ir::text::parse_jaxpr;
///
/// // f(x, y) = sin(x) * y with x known and y unknown.
/// let j = parse_jaxpr(
///     "{ lambda ; x:f32[3] y:f32[3]. let s:f32[3] = sin x; z:f32[3] = mul s y in (z, s) }",
/// )
/// .unwrap();
/// let pe = partial_eval(&j, &[false, true], &[false, false]).unwrap();
/// // The known jaxpr computes sin(x): the known output s, then s again as a residual.
/// assert_eq!(pe.known.eqns().len(), 1);
/// assert_eq!(pe.known.outvars().len(), 2);
/// assert_eq!(pe.num_residuals, 1);
/// // The unknown jaxpr takes the residual and y, and multiplies.
/// assert_eq!(pe.unknown.invars().len(), 2);
/// assert_eq!(pe.unknown.eqns()[0].primitive().name(), "mul");
/// assert_eq!(pe.out_unknowns, vec![true, false]);
/// ```
pub fn partial_eval(
    jaxpr: &Jaxpr,
    unknowns: &[bool],
    instantiate: &[bool],
) -> Result<PartialEval, PassError> {
    if unknowns.len() != jaxpr.invars().len() {
        return Err(PassError::FlagCount {
            what: "unknowns",
            expected: jaxpr.invars().len(),
            got: unknowns.len(),
        });
    }
    if instantiate.len() != jaxpr.outvars().len() {
        return Err(PassError::FlagCount {
            what: "instantiate",
            expected: jaxpr.outvars().len(),
            got: instantiate.len(),
        });
    }
    let (fin, dirty) = run(jaxpr, unknowns.to_vec(), instantiate.to_vec())?;
    if dirty {
        prune_deep(fin)
    } else {
        Ok(fin)
    }
}

/// Each frame drops the equations of its own level that nothing needs, but keeps a
/// higher-order equation whole when any of its outputs is needed. When one of them (at
/// any depth) has an output nothing needs, one dead-code pass over both results at the
/// end removes the rest (unused outputs of nested jaxprs, and the residuals only they
/// needed). A jaxpr free of dead code gives results free of it without that pass, whose
/// copies would not keep shared sub-jaxprs shared.
fn prune_deep(pe: PartialEval) -> Result<PartialEval, PassError> {
    let PartialEval {
        known,
        unknown,
        out_unknowns,
        num_residuals: nres,
    } = pe;
    let (u, u_used) = dce(&unknown, &vec![true; unknown.outvars().len()])?;
    let keep_res = u_used[..nres].to_vec();
    let mut want_u = keep_res.clone();
    want_u.resize(u_used.len(), true);
    let unknown = widen(u, &u_used, &want_u, &unknown.in_avals());
    let nk_out = known.outvars().len() - nres;
    let mut used_k = vec![true; nk_out];
    used_k.extend_from_slice(&keep_res);
    let (k, k_used) = dce(&known, &used_k)?;
    let known = widen(k, &k_used, &vec![true; k_used.len()], &known.in_avals());
    Ok(PartialEval {
        known,
        unknown,
        out_unknowns,
        num_residuals: keep_res.iter().filter(|&&k| k).count(),
    })
}

/// A partially evaluated sub-jaxpr, shared between the equations that call it.
struct Sub {
    known: Arc<Jaxpr>,
    unknown: Arc<Jaxpr>,
    out_uk: Vec<bool>,
    res_avals: Vec<AbstractValue>,
    /// Some higher-order equation in it (at any depth) has an output nothing needs.
    dirty: bool,
}

impl Sub {
    fn num_res(&self) -> usize {
        self.res_avals.len()
    }
}

/// What a frame waits for: this sub-jaxpr, partially evaluated with these unknown inputs
/// and instantiated outputs.
type Need<'a> = (&'a Jaxpr, Vec<bool>, Vec<bool>);

enum Step<'a> {
    Need(Need<'a>),
    Done(Box<PartialEval>, bool),
}

type MemoKey = (usize, Vec<bool>, Vec<bool>);

fn run(
    jaxpr: &Jaxpr,
    unknowns: Vec<bool>,
    instantiate: Vec<bool>,
) -> Result<(PartialEval, bool), PassError> {
    let mut memo: HashMap<MemoKey, Rc<Sub>> = HashMap::new();
    let parts: Rc<RefCell<Parts>> = Rc::default();
    let mut stack: Vec<(Frame<'_>, Option<MemoKey>)> = vec![(
        Frame::new(jaxpr, &unknowns, instantiate, Rc::clone(&parts)),
        None,
    )];
    let mut child: Option<Rc<Sub>> = None;
    loop {
        let Some((top, _)) = stack.last_mut() else {
            unreachable!("the stack holds the top frame until it returns");
        };
        match top.step(child.take())? {
            Step::Need((sub, uk, inst)) => {
                let key: MemoKey = (sub as *const Jaxpr as usize, uk, inst);
                if let Some(done) = memo.get(&key) {
                    child = Some(Rc::clone(done));
                    continue;
                }
                let frame = Frame::new(sub, &key.1, key.2.clone(), Rc::clone(&parts));
                stack.push((frame, Some(key)));
            }
            Step::Done(pe, dirty) => {
                let Some((_, key)) = stack.pop() else {
                    unreachable!("a frame returned");
                };
                let Some(key) = key else {
                    return Ok((*pe, dirty));
                };
                let nres = pe.num_residuals;
                let res_avals = pe.unknown.in_avals()[..nres].to_vec();
                let sub = Rc::new(Sub {
                    known: Arc::new(pe.known),
                    unknown: Arc::new(pe.unknown),
                    out_uk: pe.out_unknowns,
                    res_avals,
                    dirty,
                });
                memo.insert(key, Rc::clone(&sub));
                child = Some(sub);
            }
        }
    }
}

/// An operand of an equation the pass makes: a variable (an index into the frame's
/// extended variable space: the source's variables, then new ones) or a literal.
#[derive(Clone, Copy)]
enum X {
    Var(u32),
    Lit(Literal),
}

/// An equation of one of the two results.
enum Item {
    /// A source equation, as it is.
    Src(usize),
    /// A new equation (half of a split higher-order one).
    New {
        prim: Primitive,
        inputs: Vec<X>,
        outs: Vec<u32>,
        params: Params,
    },
}

/// A jaxpr pruned to some outputs, and which of its inputs it still takes.
type Pruned = (Arc<Jaxpr>, Vec<bool>);

/// Half of a split `remat2`: its pruned jaxpr, operands and output variables.
type RematHalf = (Arc<Jaxpr>, Vec<X>, Vec<u32>);

/// A higher-order equation part-way through being split.
enum Pending {
    Jit {
        eqn: usize,
    },
    Cond {
        eqn: usize,
        ops_uk: Vec<bool>,
        results: Vec<Rc<Sub>>,
        /// The joined output flags, once every branch is done once.
        join: Option<Vec<bool>>,
        /// The branch being redone with `join` instantiated.
        redo: usize,
    },
    While {
        eqn: usize,
        /// The carries found unknown so far (the fixpoint's state).
        carry_uk: Vec<bool>,
        /// The body at the fixpoint, once reached (then the condition is asked for).
        body: Option<Rc<Sub>>,
    },
    Scan {
        eqn: usize,
        carry_uk: Vec<bool>,
    },
}

struct Frame<'a> {
    src: &'a Jaxpr,
    instantiate: Vec<bool>,
    /// Per variable of the extended space: depends on an unknown input.
    uk: Vec<bool>,
    /// Types of the new variables (index `src.num_vars() + i`).
    extra: Vec<AbstractValue>,
    /// The equations of both results in order; `true` for the unknown side.
    items: Vec<(bool, Item)>,
    pos: usize,
    pending: Option<Pending>,
    /// A sub-jaxpr used is dirty (see [`Sub::dirty`]).
    dirty: bool,
    /// `remat2` jaxprs pruned to some outputs (by jaxpr and used outputs), so that
    /// equations sharing a jaxpr prune it once and share the result.
    pruned: HashMap<(usize, Vec<bool>), Pruned>,
    /// The split sub-jaxprs already built, shared by every frame.
    parts: Rc<RefCell<Parts>>,
}

/// What the halves of a split `cond`, `scan` or `while` hold, built once per (partially
/// evaluated sub-jaxprs, layout) however many equations share them, so that the results
/// share them too.
#[derive(Default)]
struct Parts {
    /// Per tuple of partially evaluated branches (by address): the known and unknown
    /// branches, and the residual slots.
    cond: HashMap<Vec<usize>, Rc<CondParts>>,
    /// Per partially evaluated body (by address), number of consts and of carries.
    scan: HashMap<(usize, usize, usize), Rc<ScanParts>>,
    /// Per partially evaluated called jaxpr (by address).
    jit: HashMap<usize, Rc<JitParts>>,
    /// Per partially evaluated body (by address) and number of known carries: the known
    /// loop's body, and which of the known body consts it takes.
    while_body: HashMap<(usize, usize), Rc<KnownWhileBody>>,
}

/// The known half of a split `jit`.
struct JitParts {
    /// The known jaxpr without the residuals that are its inputs.
    known: Arc<Jaxpr>,
    /// Per residual: the known input it is, if it is one.
    forwarded: Vec<Option<usize>>,
}

/// The known loop's body, and which known body consts it takes.
type KnownWhileBody = (Arc<Jaxpr>, Vec<bool>);

struct CondParts {
    known: Vec<Arc<Jaxpr>>,
    unknown: Vec<Arc<Jaxpr>>,
    slots: Vec<AbstractValue>,
}

/// Where a residual of a scan body comes from (see [`Frame::split_scan`]).
#[derive(Clone, Copy, PartialEq)]
enum Res {
    Const(usize),
    Xs(usize),
    Hoisted,
    Stacked,
}

struct ScanParts {
    kinds: Vec<Res>,
    known_body: Arc<Jaxpr>,
    /// The body pruned to the hoisted residuals, and which known inputs it takes.
    hoisted: Option<(Arc<Jaxpr>, Vec<bool>)>,
    unknown_body: Arc<Jaxpr>,
}

fn addr<T>(r: &Rc<T>) -> usize {
    Rc::as_ptr(r) as usize
}

fn int_param(params: &Params, name: &str) -> usize {
    match params.get(name) {
        Some(Param::Int(n)) => usize::try_from(*n).unwrap_or(0),
        _ => 0,
    }
}

fn jaxpr_param<'a>(params: &'a Params, name: &str) -> Option<&'a ClosedJaxpr> {
    match params.get(name) {
        Some(Param::Jaxpr(cj)) => Some(cj),
        _ => None,
    }
}

fn count(flags: &[bool]) -> i64 {
    flags.iter().filter(|&&f| f).count() as i64
}

fn closed(j: &Arc<Jaxpr>, like: Option<&ClosedJaxpr>) -> ClosedJaxpr {
    let consts = like.map(|c| c.consts().to_vec()).unwrap_or_default();
    ClosedJaxpr::from_parts(Arc::clone(j), consts)
}

fn ill_typed(eqn: usize, e: impl ToString) -> PassError {
    PassError::IllTyped {
        eqn: Some(eqn),
        message: e.to_string(),
    }
}

/// Zeros of a type: a literal for a scalar, else a `broadcast_in_dim` of one.
fn zeros(b: &mut JaxprBuilder, aval: &AbstractValue, eqn: usize) -> Result<Atom, PassError> {
    let value = match aval.dtype {
        DType::Bool => LitValue::Bool(false),
        d if d.is_int() => LitValue::Int(0),
        _ => LitValue::Float(0.0),
    };
    let lit = b.literal(Literal {
        value,
        dtype: aval.dtype,
        weak_type: aval.weak_type,
    });
    if aval.shape.rank() == 0 {
        return Ok(lit);
    }
    let params = Params::new([
        ("shape", Param::ints(aval.shape.dims())),
        ("broadcast_dimensions", Param::ints(&[])),
    ]);
    let outs = b
        .add_eqn(Builtin::BroadcastInDim.into(), vec![lit], params)
        .map_err(|e| ill_typed(eqn, e))?;
    Ok(Atom::Var(outs[0]))
}

impl<'a> Frame<'a> {
    fn new(
        src: &'a Jaxpr,
        unknowns: &[bool],
        instantiate: Vec<bool>,
        parts: Rc<RefCell<Parts>>,
    ) -> Frame<'a> {
        let mut uk = vec![false; src.num_vars()];
        for (&v, &u) in src.invars().iter().zip(unknowns) {
            uk[v.index()] = u;
        }
        Frame {
            src,
            instantiate,
            uk,
            extra: Vec::new(),
            items: Vec::new(),
            pos: 0,
            pending: None,
            dirty: false,
            pruned: HashMap::new(),
            parts,
        }
    }

    fn atom_uk(&self, a: Atom) -> bool {
        match a {
            Atom::Var(v) => self.uk[v.index()],
            Atom::Lit(_) => false,
        }
    }

    fn x(&self, a: Atom) -> X {
        match a {
            Atom::Var(v) => X::Var(v.index() as u32),
            Atom::Lit(l) => X::Lit(*self.src.literal(l)),
        }
    }

    fn new_var(&mut self, aval: AbstractValue) -> u32 {
        let id = (self.uk.len()) as u32;
        self.uk.push(false);
        self.extra.push(aval);
        id
    }

    fn step(&mut self, mut child: Option<Rc<Sub>>) -> Result<Step<'a>, PassError> {
        loop {
            if let Some(p) = self.pending.take() {
                if let Some((p, need)) = self.advance(p, child.take())? {
                    self.pending = Some(p);
                    return Ok(Step::Need(need));
                }
            }
            if self.pos == self.src.eqns().len() {
                return self
                    .finish()
                    .map(|(pe, dirty)| Step::Done(Box::new(pe), dirty));
            }
            let i = self.pos;
            self.pos += 1;
            self.start(i)?;
        }
    }

    fn known_src(&mut self, i: usize) {
        self.items.push((false, Item::Src(i)));
    }

    fn unknown_src(&mut self, i: usize) {
        for &o in self.src.eqns()[i].outvars() {
            self.uk[o.index()] = true;
        }
        self.items.push((true, Item::Src(i)));
    }

    fn start(&mut self, i: usize) -> Result<(), PassError> {
        let src = self.src;
        let e = &src.eqns()[i];
        if !e.inputs().iter().any(|&a| self.atom_uk(a)) {
            match jaxpr_param(e.params(), "jaxpr") {
                // A known checkpoint is inlined too, as JAX evaluates it.
                Some(inner) if e.primitive().as_builtin() == Some(Builtin::Remat) => {
                    let known = vec![false; e.outvars().len()];
                    self.split_remat(i, inner, &known, false)?;
                }
                _ => self.known_src(i),
            }
            return Ok(());
        }
        self.pending = match e.primitive().as_builtin() {
            Some(Builtin::Jit | Builtin::Remat | Builtin::ShardMap)
                if jaxpr_param(e.params(), "jaxpr").is_some() =>
            {
                Some(Pending::Jit { eqn: i })
            }
            Some(Builtin::Cond) if !self.atom_uk(e.inputs()[0]) => Some(Pending::Cond {
                eqn: i,
                ops_uk: e.inputs()[1..].iter().map(|&a| self.atom_uk(a)).collect(),
                results: Vec::new(),
                join: None,
                redo: 0,
            }),
            Some(Builtin::While) => {
                let skip =
                    int_param(e.params(), "cond_nconsts") + int_param(e.params(), "body_nconsts");
                e.inputs().get(skip..).map(|carry| Pending::While {
                    eqn: i,
                    carry_uk: carry.iter().map(|&a| self.atom_uk(a)).collect(),
                    body: None,
                })
            }
            Some(Builtin::Scan) => {
                let nc = int_param(e.params(), "num_consts");
                let ncarry = int_param(e.params(), "num_carry");
                Some(Pending::Scan {
                    eqn: i,
                    carry_uk: e.inputs()[nc..nc + ncarry]
                        .iter()
                        .map(|&a| self.atom_uk(a))
                        .collect(),
                })
            }
            _ => None,
        };
        if self.pending.is_none() {
            self.unknown_src(i);
        }
        Ok(())
    }

    /// Resumes a pending equation; `Some` to wait for another sub-jaxpr.
    #[allow(clippy::type_complexity)]
    fn advance(
        &mut self,
        p: Pending,
        child: Option<Rc<Sub>>,
    ) -> Result<Option<(Pending, Need<'a>)>, PassError> {
        let src = self.src;
        match p {
            Pending::Jit { eqn } => {
                let e = &src.eqns()[eqn];
                let Some(inner) = jaxpr_param(e.params(), "jaxpr") else {
                    self.unknown_src(eqn);
                    return Ok(None);
                };
                let Some(r) = child else {
                    let uk = e.inputs().iter().map(|&a| self.atom_uk(a)).collect();
                    let need = (&**inner.jaxpr(), uk, vec![false; e.outvars().len()]);
                    return Ok(Some((Pending::Jit { eqn }, need)));
                };
                match e.primitive().as_builtin() {
                    Some(Builtin::Remat) => self.split_remat(eqn, inner, &r.out_uk, r.dirty)?,
                    Some(Builtin::ShardMap) => self.split_shard_map(eqn, inner, &r)?,
                    _ => self.split_jit(eqn, inner, &r),
                }
                Ok(None)
            }
            Pending::Cond {
                eqn,
                ops_uk,
                mut results,
                mut join,
                mut redo,
            } => {
                let e = &src.eqns()[eqn];
                let Some(Param::Jaxprs(branches)) = e.params().get("branches") else {
                    self.unknown_src(eqn);
                    return Ok(None);
                };
                let nouts = e.outvars().len();
                match (&join, child) {
                    (None, Some(r)) => results.push(r),
                    (Some(_), Some(r)) => {
                        results[redo] = r;
                        redo += 1;
                    }
                    _ => {}
                }
                if join.is_none() {
                    if results.len() < branches.len() {
                        let need = (
                            &**branches[results.len()].jaxpr(),
                            ops_uk.clone(),
                            vec![false; nouts],
                        );
                        return Ok(Some((
                            Pending::Cond {
                                eqn,
                                ops_uk,
                                results,
                                join,
                                redo,
                            },
                            need,
                        )));
                    }
                    let mut j = vec![false; nouts];
                    for r in &results {
                        for (a, &b) in j.iter_mut().zip(&r.out_uk) {
                            *a |= b;
                        }
                    }
                    join = Some(j);
                }
                let Some(j) = join else {
                    unreachable!("join was just set");
                };
                while redo < results.len() && results[redo].out_uk == j {
                    redo += 1;
                }
                if redo < results.len() {
                    let need = (&**branches[redo].jaxpr(), ops_uk.clone(), j.clone());
                    return Ok(Some((
                        Pending::Cond {
                            eqn,
                            ops_uk,
                            results,
                            join: Some(j),
                            redo,
                        },
                        need,
                    )));
                }
                self.split_cond(eqn, branches, &ops_uk, &results, &j)?;
                Ok(None)
            }
            Pending::While {
                eqn,
                carry_uk,
                body,
            } => self.advance_while(eqn, carry_uk, body, child),
            Pending::Scan { eqn, carry_uk } => self.advance_scan(eqn, carry_uk, child),
        }
    }

    fn split_jit(&mut self, eqn: usize, inner: &ClosedJaxpr, r: &Rc<Sub>) {
        self.dirty |= r.dirty;
        let src = self.src;
        let e = &src.eqns()[eqn];
        let mut known_ins = Vec::new();
        let mut unknown_ins = Vec::new();
        for &a in e.inputs() {
            if self.atom_uk(a) {
                unknown_ins.push(self.x(a));
            } else {
                known_ins.push(self.x(a));
            }
        }
        let mut known_outs = Vec::new();
        let mut unknown_outs = Vec::new();
        for (&o, &u) in e.outvars().iter().zip(&r.out_uk) {
            if u {
                unknown_outs.push(o.index() as u32);
            } else {
                known_outs.push(o.index() as u32);
            }
        }
        let key = addr(r);
        let cached = self.parts.borrow().jit.get(&key).cloned();
        let parts = match cached {
            Some(p) => p,
            None => {
                let p = Rc::new(jit_parts(r));
                self.parts.borrow_mut().jit.insert(key, Rc::clone(&p));
                p
            }
        };
        // A residual that is a known operand of the call is passed to the unknown call
        // as it is; the others are returned by the known call.
        let mut res_ins: Vec<X> = Vec::with_capacity(r.num_res() + unknown_ins.len());
        for (a, fwd) in r.res_avals.iter().zip(&parts.forwarded) {
            match *fwd {
                Some(p) => res_ins.push(known_ins[p]),
                None => {
                    let v = self.new_var(a.clone());
                    known_outs.push(v);
                    res_ins.push(X::Var(v));
                }
            }
        }
        res_ins.extend(unknown_ins);
        for &o in &unknown_outs {
            self.uk[o as usize] = true;
        }
        let prim = e.primitive().clone();
        let known = Item::New {
            prim: prim.clone(),
            inputs: known_ins,
            outs: known_outs,
            params: e
                .params()
                .with("jaxpr", Param::Jaxpr(closed(&parts.known, Some(inner)))),
        };
        let unknown = Item::New {
            prim,
            inputs: res_ins,
            outs: unknown_outs,
            params: e
                .params()
                .with("jaxpr", Param::Jaxpr(closed(&r.unknown, None))),
        };
        self.items.push((false, known));
        self.items.push((true, unknown));
    }

    /// `shard_map`: a known shard_map of the known half of the body and an unknown one of
    /// the unknown half. Each residual (a per-device value of type `S`) leaves the known
    /// body as `[1, *S]` and the known shard_map with a leading axis split over the mesh
    /// axes it varies over (so every distinct per-device value is kept, and it is
    /// replicated over the others), and enters the unknown shard_map the same way.
    fn split_shard_map(
        &mut self,
        eqn: usize,
        inner: &ClosedJaxpr,
        r: &Rc<Sub>,
    ) -> Result<(), PassError> {
        self.dirty |= r.dirty;
        let src = self.src;
        let e = &src.eqns()[eqn];
        let (Some(Param::Mesh(mesh)), Some(Param::Specs(in_specs)), Some(Param::Specs(out_specs))) = (
            e.params().get("mesh"),
            e.params().get("in_specs"),
            e.params().get("out_specs"),
        ) else {
            return Err(ill_typed(eqn, "shard_map without its mesh or specs"));
        };
        // Each residual leaves split over the mesh axes it varies over (inferred on the
        // known half from the known operands' specs), so that transposing the halves
        // sums its cotangent over exactly the axes it is replicated over.
        let nres = r.num_res();
        let known_in_axes: Vec<Vec<Arc<str>>> = e
            .inputs()
            .iter()
            .zip(in_specs.iter())
            .filter(|(&a, _)| !self.atom_uk(a))
            .map(|(_, sp)| sp.all_axes().cloned().collect())
            .collect();
        let all_axes: Vec<Arc<str>> = mesh.axes().iter().map(|(n, _)| n.clone()).collect();
        let res_axes: Vec<Vec<Arc<str>>> =
            match crate::passes::insert_pvary(&r.known, mesh, &known_in_axes, None) {
                Ok((_, outs)) if outs.len() >= nres => outs[outs.len() - nres..].to_vec(),
                _ => vec![all_axes; nres],
            };
        let res_specs: Vec<crate::sharding::PartitionSpec> = res_axes
            .iter()
            .map(|axes| crate::sharding::PartitionSpec::new(vec![axes.clone()]))
            .collect();
        let lead = |a: &AbstractValue| -> Result<AbstractValue, PassError> {
            let mut dims = vec![1];
            dims.extend_from_slice(a.shape.dims());
            let shape = crate::aval::Shape::new(&dims).map_err(|er| ill_typed(eqn, er))?;
            Ok(AbstractValue::new(shape, a.dtype).with_weak_type(a.weak_type))
        };
        // The known body: the known half, then each residual reshaped to [1, *S].
        let known_j = &r.known;
        let nk_out = known_j.outvars().len() - nres;
        let mut kb = JaxprBuilder::new();
        let kins: Vec<Atom> = known_j
            .in_avals()
            .into_iter()
            .map(|a| Atom::Var(kb.add_invar(a)))
            .collect();
        let kouts = kb
            .add_eqn(
                Builtin::Jit.into(),
                kins,
                Params::new([
                    ("jaxpr", Param::Jaxpr(closed(known_j, Some(inner)))),
                    ("name", Param::Str("shard_map_known".into())),
                ]),
            )
            .map_err(|er| ill_typed(eqn, er))?;
        let mut kres: Vec<Atom> = kouts[..nk_out].iter().map(|&v| Atom::Var(v)).collect();
        for (&v, a) in kouts[nk_out..].iter().zip(&r.res_avals) {
            let l = lead(a)?;
            let o = kb
                .add_eqn(
                    Builtin::Reshape.into(),
                    vec![Atom::Var(v)],
                    Params::new([
                        ("new_sizes", Param::ints(l.shape.dims())),
                        ("dimensions", Param::None),
                    ]),
                )
                .map_err(|er| ill_typed(eqn, er))?;
            kres.push(Atom::Var(o[0]));
        }
        let known_body = Arc::new(kb.build(kres).map_err(|er| ill_typed(eqn, er))?);
        // The unknown body: residuals [1, *S] reshaped back, then the unknown half.
        let mut ub = JaxprBuilder::new();
        let mut uins = Vec::new();
        for a in &r.res_avals {
            let v = ub.add_invar(lead(a)?);
            let o = ub
                .add_eqn(
                    Builtin::Reshape.into(),
                    vec![Atom::Var(v)],
                    Params::new([
                        ("new_sizes", Param::ints(a.shape.dims())),
                        ("dimensions", Param::None),
                    ]),
                )
                .map_err(|er| ill_typed(eqn, er))?;
            uins.push(Atom::Var(o[0]));
        }
        for a in r.unknown.in_avals().into_iter().skip(nres) {
            uins.push(Atom::Var(ub.add_invar(a)));
        }
        let uouts = ub
            .add_eqn(
                Builtin::Jit.into(),
                uins,
                Params::new([
                    ("jaxpr", Param::Jaxpr(closed(&r.unknown, None))),
                    ("name", Param::Str("shard_map_unknown".into())),
                ]),
            )
            .map_err(|er| ill_typed(eqn, er))?;
        let unknown_body = Arc::new(
            ub.build(uouts.into_iter().map(Atom::Var).collect())
                .map_err(|er| ill_typed(eqn, er))?,
        );
        // The two shard_maps.
        let mut known_ins = Vec::new();
        let mut known_in_specs = Vec::new();
        let mut unknown_ins = Vec::new();
        let mut unknown_in_specs = Vec::new();
        for (&a, sp) in e.inputs().iter().zip(in_specs.iter()) {
            if self.atom_uk(a) {
                unknown_ins.push(self.x(a));
                unknown_in_specs.push(sp.clone());
            } else {
                known_ins.push(self.x(a));
                known_in_specs.push(sp.clone());
            }
        }
        let mut known_outs = Vec::new();
        let mut known_out_specs = Vec::new();
        let mut unknown_outs = Vec::new();
        let mut unknown_out_specs = Vec::new();
        for ((&o, &u), sp) in e.outvars().iter().zip(&r.out_uk).zip(out_specs.iter()) {
            if u {
                unknown_outs.push(o.index() as u32);
                unknown_out_specs.push(sp.clone());
            } else {
                known_outs.push(o.index() as u32);
                known_out_specs.push(sp.clone());
            }
        }
        let mut res_ins: Vec<X> = Vec::with_capacity(nres + unknown_ins.len());
        let mut res_in_specs = Vec::with_capacity(nres + unknown_ins.len());
        for (a, spec) in r.res_avals.iter().zip(&res_specs) {
            let mut dims = vec![spec.tiles(mesh, 0)];
            dims.extend_from_slice(a.shape.dims());
            let shape = crate::aval::Shape::new(&dims).map_err(|er| ill_typed(eqn, er))?;
            let v = self.new_var(AbstractValue::new(shape, a.dtype).with_weak_type(a.weak_type));
            known_outs.push(v);
            known_out_specs.push(spec.clone());
            res_ins.push(X::Var(v));
            res_in_specs.push(spec.clone());
        }
        res_ins.extend(unknown_ins);
        res_in_specs.extend(unknown_in_specs);
        for &o in &unknown_outs {
            self.uk[o as usize] = true;
        }
        let prim = e.primitive().clone();
        let known = Item::New {
            prim: prim.clone(),
            inputs: known_ins,
            outs: known_outs,
            params: e
                .params()
                .with("jaxpr", Param::Jaxpr(closed(&known_body, None)))
                .with("in_specs", Param::Specs(known_in_specs.into()))
                .with("out_specs", Param::Specs(known_out_specs.into())),
        };
        let unknown = Item::New {
            prim,
            inputs: res_ins,
            outs: unknown_outs,
            params: e
                .params()
                .with("jaxpr", Param::Jaxpr(closed(&unknown_body, None)))
                .with("in_specs", Param::Specs(res_in_specs.into()))
                .with("out_specs", Param::Specs(unknown_out_specs.into())),
        };
        self.items.push((false, known));
        self.items.push((true, unknown));
        Ok(())
    }

    /// `remat2` (a checkpoint) keeps no intermediate value: the known outputs are
    /// computed by the `remat2`'s jaxpr pruned to them, inlined as JAX evaluates it (or a
    /// known `remat2` of it, when its outputs are not distinct variables its equations
    /// define, or it has constants); the unknown `remat2`, marked `differentiated=True`
    /// as JAX marks it, computes the unknown outputs from the operands, known ones
    /// included (those are the residuals), recomputing what it needs. `out_uk` says which
    /// outputs are unknown (`dirty` is the partially evaluated jaxpr's flag).
    fn split_remat(
        &mut self,
        eqn: usize,
        inner: &ClosedJaxpr,
        out_uk: &[bool],
        dirty: bool,
    ) -> Result<(), PassError> {
        self.dirty |= dirty;
        let src = self.src;
        let e = &src.eqns()[eqn];
        let key_of = |used: &[bool]| (Arc::as_ptr(inner.jaxpr()) as usize, used.to_vec());
        for used in [
            out_uk.iter().map(|&u| !u).collect::<Vec<bool>>(),
            out_uk.to_vec(),
        ] {
            if used.contains(&true) && !self.pruned.contains_key(&key_of(&used)) {
                let (pruned, used_ins) = dce(inner.jaxpr(), &used)?;
                self.pruned
                    .insert(key_of(&used), (Arc::new(pruned), used_ins));
            }
        }
        let half = |used_outs: &[bool]| -> Result<RematHalf, PassError> {
            let Some((pruned, used_ins)) = self.pruned.get(&key_of(used_outs)) else {
                return Err(PassError::IllTyped {
                    eqn: Some(eqn),
                    message: "remat2: a pruned jaxpr is missing (internal)".to_owned(),
                });
            };
            let pruned = Arc::clone(pruned);
            let inputs = e
                .inputs()
                .iter()
                .zip(used_ins)
                .filter(|(_, &u)| u)
                .map(|(&a, _)| self.x(a))
                .collect();
            let outs = e
                .outvars()
                .iter()
                .zip(used_outs)
                .filter(|(_, &u)| u)
                .map(|(&o, _)| o.index() as u32)
                .collect();
            Ok((pruned, inputs, outs))
        };
        let known_outs: Vec<bool> = out_uk.iter().map(|&u| !u).collect();
        let known = if known_outs.contains(&true) {
            let (pruned, inputs, outs) = half(&known_outs)?;
            if inputs
                .iter()
                .any(|x| matches!(x, X::Var(v) if self.uk[*v as usize]))
            {
                // The known outputs' pruned jaxpr still reads an unknown operand (a
                // callee kept whole by DCE): the equation stays unknown as it is.
                self.unknown_src(eqn);
                return Ok(());
            }
            Some((pruned, inputs, outs))
        } else {
            None
        };
        let unknown = if out_uk.contains(&true) {
            Some(half(out_uk)?)
        } else {
            None
        };
        if let Some((pruned, inputs, outs)) = known {
            if !self.inline_known(&pruned, &inputs, &outs) {
                let params = e
                    .params()
                    .with("jaxpr", Param::Jaxpr(closed(&pruned, Some(inner))));
                let item = Item::New {
                    prim: e.primitive().clone(),
                    inputs,
                    outs,
                    params,
                };
                self.items.push((false, item));
            }
        }
        if let Some((pruned, inputs, outs)) = unknown {
            for &o in &outs {
                self.uk[o as usize] = true;
            }
            let params = e
                .params()
                .with("jaxpr", Param::Jaxpr(closed(&pruned, Some(inner))))
                .with("differentiated", Param::Bool(true));
            let item = Item::New {
                prim: e.primitive().clone(),
                inputs,
                outs,
                params,
            };
            self.items.push((true, item));
        }
        Ok(())
    }

    /// Adds the equations of `j` (without constvars) to the known side, its invars being
    /// `ins` and its outputs the variables `outs`. Returns false, adding nothing, when an
    /// output is not a variable one of its equations defines or appears twice (a value
    /// passed through has no equation to define it here) or `j` has constvars.
    fn inline_known(&mut self, j: &Jaxpr, ins: &[X], outs: &[u32]) -> bool {
        if !j.constvars().is_empty() || ins.len() != j.invars().len() {
            return false;
        }
        let mut target: Vec<Option<u32>> = vec![None; j.num_vars()];
        let mut is_input = vec![false; j.num_vars()];
        for &v in j.invars() {
            is_input[v.index()] = true;
        }
        for (&a, &o) in j.outvars().iter().zip(outs) {
            match a {
                Atom::Var(v) if !is_input[v.index()] && target[v.index()].is_none() => {
                    target[v.index()] = Some(o);
                }
                _ => return false,
            }
        }
        let mut map: Vec<Option<X>> = vec![None; j.num_vars()];
        for (&v, &x) in j.invars().iter().zip(ins) {
            map[v.index()] = Some(x);
        }
        let mut items = Vec::with_capacity(j.eqns().len());
        for e in j.eqns() {
            let mut inputs = Vec::with_capacity(e.inputs().len());
            for &a in e.inputs() {
                let x = match a {
                    Atom::Var(v) => map[v.index()],
                    Atom::Lit(l) => Some(X::Lit(*j.literal(l))),
                };
                let Some(x) = x else {
                    return false;
                };
                inputs.push(x);
            }
            let mut eqn_outs = Vec::with_capacity(e.outvars().len());
            for &v in e.outvars() {
                let o = match target[v.index()] {
                    Some(o) => o,
                    None => self.new_var(j.var_aval(v).clone()),
                };
                map[v.index()] = Some(X::Var(o));
                eqn_outs.push(o);
            }
            items.push(Item::New {
                prim: e.primitive().clone(),
                inputs,
                outs: eqn_outs,
                params: e.params().clone(),
            });
        }
        self.items
            .extend(items.into_iter().map(|item| (false, item)));
        true
    }

    fn split_cond(
        &mut self,
        eqn: usize,
        branches: &[ClosedJaxpr],
        ops_uk: &[bool],
        results: &[Rc<Sub>],
        join: &[bool],
    ) -> Result<(), PassError> {
        self.dirty |= results.iter().any(|r| r.dirty);
        let src = self.src;
        let e = &src.eqns()[eqn];
        let key: Vec<usize> = results.iter().map(addr).collect();
        let cached = self.parts.borrow().cond.get(&key).cloned();
        let parts = match cached {
            Some(p) => p,
            None => {
                let p = Rc::new(cond_parts(results, join, eqn)?);
                self.parts.borrow_mut().cond.insert(key, Rc::clone(&p));
                p
            }
        };
        let known_branches: Vec<ClosedJaxpr> = parts
            .known
            .iter()
            .zip(branches)
            .map(|(j, b)| closed(j, Some(b)))
            .collect();
        let unknown_branches: Vec<ClosedJaxpr> =
            parts.unknown.iter().map(|j| closed(j, None)).collect();
        let slots = &parts.slots;
        let index = self.x(e.inputs()[0]);
        let mut known_ins = vec![index];
        let mut unknown_ins = vec![index];
        let slot_vars: Vec<u32> = slots.iter().map(|a| self.new_var(a.clone())).collect();
        unknown_ins.extend(slot_vars.iter().map(|&v| X::Var(v)));
        for (&a, &u) in e.inputs()[1..].iter().zip(ops_uk) {
            if u {
                unknown_ins.push(self.x(a));
            } else {
                known_ins.push(self.x(a));
            }
        }
        let mut known_outs = Vec::new();
        let mut unknown_outs = Vec::new();
        for (&o, &u) in e.outvars().iter().zip(join) {
            if u {
                unknown_outs.push(o.index() as u32);
                self.uk[o.index()] = true;
            } else {
                known_outs.push(o.index() as u32);
            }
        }
        known_outs.extend_from_slice(&slot_vars);
        let prim = e.primitive().clone();
        self.items.push((
            false,
            Item::New {
                prim: prim.clone(),
                inputs: known_ins,
                outs: known_outs,
                params: e
                    .params()
                    .with("branches", Param::Jaxprs(Arc::new(known_branches))),
            },
        ));
        self.items.push((
            true,
            Item::New {
                prim,
                inputs: unknown_ins,
                outs: unknown_outs,
                params: e
                    .params()
                    .with("branches", Param::Jaxprs(Arc::new(unknown_branches))),
            },
        ));
        Ok(())
    }

    /// `while`: the unknown carries by a fixpoint through the body; then, if the
    /// condition depends on known values only, a known loop over the known carries and an
    /// unknown loop that is the whole original one (its known operands are residuals).
    #[allow(clippy::type_complexity)]
    fn advance_while(
        &mut self,
        eqn: usize,
        carry_uk: Vec<bool>,
        body: Option<Rc<Sub>>,
        child: Option<Rc<Sub>>,
    ) -> Result<Option<(Pending, Need<'a>)>, PassError> {
        let src = self.src;
        let e = &src.eqns()[eqn];
        let (Some(cond_j), Some(body_j)) = (
            jaxpr_param(e.params(), "cond_jaxpr"),
            jaxpr_param(e.params(), "body_jaxpr"),
        ) else {
            self.unknown_src(eqn);
            return Ok(None);
        };
        let cn = int_param(e.params(), "cond_nconsts");
        let bn = int_param(e.params(), "body_nconsts");
        let flags = |f: &Frame<'_>, consts: std::ops::Range<usize>, carry: &[bool]| {
            let mut v: Vec<bool> = e.inputs()[consts].iter().map(|&a| f.atom_uk(a)).collect();
            v.extend_from_slice(carry);
            v
        };
        let Some(body) = body else {
            let Some(b) = child else {
                let need = (
                    &**body_j.jaxpr(),
                    flags(self, cn..cn + bn, &carry_uk),
                    carry_uk.clone(),
                );
                return Ok(Some((
                    Pending::While {
                        eqn,
                        carry_uk,
                        body: None,
                    },
                    need,
                )));
            };
            let grown: Vec<bool> = carry_uk
                .iter()
                .zip(&b.out_uk)
                .map(|(&a, &b)| a || b)
                .collect();
            let need = if grown == carry_uk {
                (
                    &**cond_j.jaxpr(),
                    flags(self, 0..cn, &carry_uk),
                    vec![false],
                )
            } else {
                (
                    &**body_j.jaxpr(),
                    flags(self, cn..cn + bn, &grown),
                    grown.clone(),
                )
            };
            let body = (grown == carry_uk).then_some(b);
            return Ok(Some((
                Pending::While {
                    eqn,
                    carry_uk: grown,
                    body,
                },
                need,
            )));
        };
        let Some(cond) = child else {
            unreachable!("the condition was asked for");
        };
        let nk_carry = carry_uk.iter().filter(|&&u| !u).count();
        // An unknown condition, or no known carry: the whole loop is unknown.
        if cond.out_uk.first() != Some(&false) || cond.num_res() != 0 || nk_carry == 0 {
            self.unknown_src(eqn);
            return Ok(None);
        }
        self.dirty |= cond.dirty || body.dirty;
        let cond_uk = flags(self, 0..cn, &[]);
        // The body consts the known loop does not take: the unknown ones, and below the
        // known ones only the unknown carries used.
        let mut body_skip = flags(self, cn..cn + bn, &[]);
        // The known loop: the known body returns the known carries, then residuals for
        // the unknown ones, which it no longer computes; the consts only they used go.
        let known_body = if body.num_res() == 0 {
            Arc::clone(&body.known)
        } else {
            let key = (addr(&body), nk_carry);
            let cached = self.parts.borrow().while_body.get(&key).cloned();
            let pruned = match cached {
                Some(p) => p,
                None => {
                    let p = Rc::new(known_while_body(&body, nk_carry)?);
                    self.parts
                        .borrow_mut()
                        .while_body
                        .insert(key, Rc::clone(&p));
                    p
                }
            };
            let mut used_consts = pruned.1.iter();
            for u in body_skip.iter_mut().filter(|u| !**u) {
                *u = !used_consts.next().copied().unwrap_or(true);
            }
            Arc::clone(&pruned.0)
        };
        let mut in_uk = cond_uk.clone();
        in_uk.extend_from_slice(&body_skip);
        in_uk.extend_from_slice(&carry_uk);
        let known_ins: Vec<X> = e
            .inputs()
            .iter()
            .zip(&in_uk)
            .filter(|(_, &u)| !u)
            .map(|(&a, _)| self.x(a))
            .collect();
        let params = Params::new([
            (
                "cond_jaxpr",
                Param::Jaxpr(closed(&cond.known, Some(cond_j))),
            ),
            (
                "body_jaxpr",
                Param::Jaxpr(closed(&known_body, Some(body_j))),
            ),
            ("cond_nconsts", Param::Int(cn as i64 - count(&cond_uk))),
            ("body_nconsts", Param::Int(bn as i64 - count(&body_skip))),
        ]);
        let mut known_outs = Vec::with_capacity(nk_carry);
        let mut unknown_outs = Vec::with_capacity(carry_uk.len());
        for (&o, &u) in e.outvars().iter().zip(&carry_uk) {
            if u {
                self.uk[o.index()] = true;
                unknown_outs.push(o.index() as u32);
            } else {
                known_outs.push(o.index() as u32);
                // The unknown loop computes this carry again, into a variable nothing
                // reads.
                let v = self.new_var(src.var_aval(o).clone());
                self.uk[v as usize] = true;
                unknown_outs.push(v);
            }
        }
        self.items.push((
            false,
            Item::New {
                prim: e.primitive().clone(),
                inputs: known_ins,
                outs: known_outs,
                params,
            },
        ));
        if nk_carry < carry_uk.len() {
            let inputs: Vec<X> = e.inputs().iter().map(|&a| self.x(a)).collect();
            self.items.push((
                true,
                Item::New {
                    prim: e.primitive().clone(),
                    inputs,
                    outs: unknown_outs,
                    params: e.params().clone(),
                },
            ));
        }
        Ok(None)
    }

    #[allow(clippy::type_complexity)]
    fn advance_scan(
        &mut self,
        eqn: usize,
        carry_uk: Vec<bool>,
        child: Option<Rc<Sub>>,
    ) -> Result<Option<(Pending, Need<'a>)>, PassError> {
        let src = self.src;
        let e = &src.eqns()[eqn];
        let Some(body_j) = jaxpr_param(e.params(), "jaxpr") else {
            self.unknown_src(eqn);
            return Ok(None);
        };
        let nc = int_param(e.params(), "num_consts");
        let ncarry = carry_uk.len();
        let nys = e.outvars().len() - ncarry;
        let in_uk = |f: &Frame<'_>, carry_uk: &[bool]| -> Vec<bool> {
            let mut v: Vec<bool> = e.inputs()[..nc].iter().map(|&a| f.atom_uk(a)).collect();
            v.extend_from_slice(carry_uk);
            v.extend(e.inputs()[nc + ncarry..].iter().map(|&a| f.atom_uk(a)));
            v
        };
        let inst = |carry_uk: &[bool]| -> Vec<bool> {
            let mut v = carry_uk.to_vec();
            v.resize(ncarry + nys, false);
            v
        };
        let Some(r) = child else {
            let need = (&**body_j.jaxpr(), in_uk(self, &carry_uk), inst(&carry_uk));
            return Ok(Some((Pending::Scan { eqn, carry_uk }, need)));
        };
        let grown: Vec<bool> = carry_uk
            .iter()
            .zip(&r.out_uk)
            .map(|(&a, &b)| a || b)
            .collect();
        if grown != carry_uk {
            let need = (&**body_j.jaxpr(), in_uk(self, &grown), inst(&grown));
            return Ok(Some((
                Pending::Scan {
                    eqn,
                    carry_uk: grown,
                },
                need,
            )));
        }
        self.split_scan(eqn, body_j, &in_uk(self, &carry_uk), &r)?;
        Ok(None)
    }

    fn split_scan(
        &mut self,
        eqn: usize,
        body_j: &ClosedJaxpr,
        in_uk: &[bool],
        r: &Rc<Sub>,
    ) -> Result<(), PassError> {
        self.dirty |= r.dirty;
        let src = self.src;
        let e = &src.eqns()[eqn];
        let nc = int_param(e.params(), "num_consts");
        let ncarry = int_param(e.params(), "num_carry");
        let length = match e.params().get("length") {
            Some(Param::Int(n)) => *n,
            _ => 0,
        };
        let key = (addr(r), nc, ncarry);
        let cached = self.parts.borrow().scan.get(&key).cloned();
        let parts = match cached {
            Some(p) => p,
            None => {
                let p = Rc::new(scan_parts(r, in_uk, nc, ncarry)?);
                self.parts.borrow_mut().scan.insert(key, Rc::clone(&p));
                p
            }
        };
        let kinds = &parts.kinds;
        // The hoisted residuals: the body pruned to them, called on the known consts.
        let mut hoisted_vars: Vec<u32> = Vec::new();
        if let Some((pruned, used_in)) = &parts.hoisted {
            let inputs: Vec<X> = e
                .inputs()
                .iter()
                .zip(in_uk)
                .filter(|(_, &u)| !u)
                .zip(used_in)
                .filter(|(_, &k)| k)
                .map(|((&a, _), _)| self.x(a))
                .collect();
            hoisted_vars = r
                .res_avals
                .iter()
                .zip(kinds)
                .filter(|(_, &k)| k == Res::Hoisted)
                .map(|(a, _)| self.new_var(a.clone()))
                .collect();
            let params = Params::new([
                ("jaxpr", Param::Jaxpr(closed(pruned, Some(body_j)))),
                ("name", Param::Str("scan_invariants".into())),
            ]);
            self.items.push((
                false,
                Item::New {
                    prim: Builtin::Jit.into(),
                    inputs,
                    outs: hoisted_vars.clone(),
                    params,
                },
            ));
        }
        let mut next_hoisted = hoisted_vars.into_iter();
        let mut known_ins = Vec::new();
        let mut unknown_consts = Vec::new();
        let mut unknown_carry = Vec::new();
        let mut unknown_xs = Vec::new();
        for (i, (&a, &u)) in e.inputs().iter().zip(in_uk).enumerate() {
            if !u {
                known_ins.push(self.x(a));
            } else if i < nc {
                unknown_consts.push(self.x(a));
            } else if i < nc + ncarry {
                unknown_carry.push(self.x(a));
            } else {
                unknown_xs.push(self.x(a));
            }
        }
        let out_uk = &r.out_uk;
        let mut known_outs = Vec::new();
        let mut unknown_outs = Vec::new();
        for (&o, &u) in e.outvars().iter().zip(out_uk) {
            if u {
                unknown_outs.push(o.index() as u32);
                self.uk[o.index()] = true;
            } else {
                known_outs.push(o.index() as u32);
            }
        }
        let mut res_consts = Vec::new();
        let mut res_xs = Vec::new();
        for (a, &k) in r.res_avals.iter().zip(kinds) {
            match k {
                Res::Const(q) => res_consts.push(self.x(e.inputs()[q])),
                Res::Hoisted => {
                    if let Some(v) = next_hoisted.next() {
                        res_consts.push(X::Var(v));
                    }
                }
                Res::Xs(q) => res_xs.push(self.x(e.inputs()[q])),
                Res::Stacked => {
                    let mut dims = vec![length];
                    dims.extend_from_slice(a.shape.dims());
                    let stacked = AbstractValue::new(
                        crate::aval::Shape::new(&dims).unwrap_or_default(),
                        a.dtype,
                    )
                    .with_weak_type(a.weak_type);
                    let v = self.new_var(stacked);
                    known_outs.push(v);
                    res_xs.push(X::Var(v));
                }
            }
        }
        let lin: Option<Vec<bool>> = match e.params().get("linear") {
            Some(Param::Bools(l)) if l.len() == in_uk.len() => Some(l.to_vec()),
            Some(_) => Some(vec![false; in_uk.len()]),
            None => None,
        };
        let nk_consts = (0..nc).filter(|&i| !in_uk[i]).count();
        let nk_carry = (nc..nc + ncarry).filter(|&i| !in_uk[i]).count();
        let mut kparams = e
            .params()
            .with(
                "jaxpr",
                Param::Jaxpr(closed(&parts.known_body, Some(body_j))),
            )
            .with("num_consts", Param::Int(nk_consts as i64))
            .with("num_carry", Param::Int(nk_carry as i64));
        if let Some(l) = &lin {
            let mut kl: Vec<bool> = l
                .iter()
                .zip(in_uk)
                .filter(|(_, &u)| !u)
                .map(|(&b, _)| b)
                .collect();
            kl.resize(known_ins.len(), false);
            kparams = kparams.with("linear", Param::Bools(kl.into()));
        }

        // The unknown scan: consts are the forwarded const residuals then the unknown
        // consts; xs are the stacked or forwarded xs residuals then the unknown xs.
        let nuc = unknown_consts.len();
        let nucarry = unknown_carry.len();
        let mut unknown_ins = res_consts;
        let n_uconsts = unknown_ins.len() + nuc;
        unknown_ins.extend(unknown_consts);
        unknown_ins.extend(unknown_carry);
        let n_res_xs = res_xs.len();
        unknown_ins.extend(res_xs);
        unknown_ins.extend(unknown_xs);
        let mut uparams = e
            .params()
            .with("jaxpr", Param::Jaxpr(closed(&parts.unknown_body, None)))
            .with("num_consts", Param::Int(n_uconsts as i64))
            .with("num_carry", Param::Int(nucarry as i64));
        if let Some(l) = &lin {
            let ul: Vec<bool> = l
                .iter()
                .zip(in_uk)
                .filter(|(_, &u)| u)
                .map(|(&b, _)| b)
                .collect();
            let (lc, rest) = ul.split_at(nuc);
            let (lcarry, lxs) = rest.split_at(nucarry);
            let mut full = vec![false; n_uconsts - nuc];
            full.extend_from_slice(lc);
            full.extend_from_slice(lcarry);
            full.resize(full.len() + n_res_xs, false);
            full.extend_from_slice(lxs);
            uparams = uparams.with("linear", Param::Bools(full.into()));
        }
        let prim = e.primitive().clone();
        self.items.push((
            false,
            Item::New {
                prim: prim.clone(),
                inputs: known_ins,
                outs: known_outs,
                params: kparams,
            },
        ));
        self.items.push((
            true,
            Item::New {
                prim,
                inputs: unknown_ins,
                outs: unknown_outs,
                params: uparams,
            },
        ));
        Ok(())
    }

    /// Splits the frame's items into the two jaxprs, dropping what nothing needs.
    fn finish(&mut self) -> Result<(PartialEval, bool), PassError> {
        let src = self.src;
        let n = self.uk.len();
        let out_uk: Vec<bool> = src
            .outvars()
            .iter()
            .zip(&self.instantiate)
            .map(|(&a, &i)| i || self.atom_uk(a))
            .collect();
        let items = std::mem::take(&mut self.items);
        let ins_of = |item: &Item, f: &mut dyn FnMut(u32)| match item {
            Item::Src(i) => {
                for a in src.eqns()[*i].inputs() {
                    if let Atom::Var(v) = a {
                        f(v.index() as u32);
                    }
                }
            }
            Item::New { inputs, .. } => {
                for x in inputs {
                    if let X::Var(v) = x {
                        f(*v);
                    }
                }
            }
        };
        let any_out = |item: &Item, live: &[bool]| match item {
            Item::Src(i) => src.eqns()[*i].outvars().iter().any(|v| live[v.index()]),
            Item::New { outs, .. } => outs.iter().any(|&v| live[v as usize]),
        };

        // The unknown side, backwards from its outputs; the known values it reaches are
        // the residuals.
        let mut live = vec![false; n];
        for (&a, &u) in src.outvars().iter().zip(&out_uk) {
            if let (Atom::Var(v), true) = (a, u) {
                live[v.index()] = true;
            }
        }
        let mut keep = vec![false; items.len()];
        // An effectful equation is kept on its side whether or not its outputs are used.
        for (k, (unknown, item)) in items.iter().enumerate().rev() {
            if *unknown && (any_out(item, &live) || item_has_effect(src, item)) {
                keep[k] = true;
                self.dirty |= has_prunable_output(src, item, &live);
                ins_of(item, &mut |v| live[v as usize] = true);
            }
        }
        let residuals: Vec<u32> = (0..n as u32)
            .filter(|&v| live[v as usize] && !self.uk[v as usize])
            .collect();
        let mut unknown = Emit::new(src, &self.extra);
        for &r in &residuals {
            let nv = unknown.var(r);
            unknown.out.push_invar(nv);
        }
        for &v in src.invars() {
            if self.uk[v.index()] {
                let nv = unknown.var(v.index() as u32);
                unknown.out.push_invar(nv);
            }
        }
        for (k, (_, item)) in items.iter().enumerate() {
            if keep[k] {
                unknown.item(item);
            }
        }
        let outs: Vec<Atom> = src
            .outvars()
            .iter()
            .zip(&out_uk)
            .filter(|(_, &u)| u)
            .map(|(&a, _)| unknown.src_atom(a))
            .collect();
        let unknown_j = unknown.out.build_trusted(outs);

        // The known side, backwards from its outputs and the residuals.
        live.iter_mut().for_each(|l| *l = false);
        for (&a, &u) in src.outvars().iter().zip(&out_uk) {
            if let (Atom::Var(v), false) = (a, u) {
                live[v.index()] = true;
            }
        }
        for &r in &residuals {
            live[r as usize] = true;
        }
        keep.iter_mut().for_each(|k| *k = false);
        for (k, (unknown, item)) in items.iter().enumerate().rev() {
            if !*unknown && (any_out(item, &live) || item_has_effect(src, item)) {
                keep[k] = true;
                self.dirty |= has_prunable_output(src, item, &live);
                ins_of(item, &mut |v| live[v as usize] = true);
            }
        }
        let mut known = Emit::new(src, &self.extra);
        for &c in src.constvars() {
            let nv = known.var(c.index() as u32);
            known.out.push_constvar(nv);
        }
        for &v in src.invars() {
            if !self.uk[v.index()] {
                let nv = known.var(v.index() as u32);
                known.out.push_invar(nv);
            }
        }
        for (k, (_, item)) in items.iter().enumerate() {
            if keep[k] {
                known.item(item);
            }
        }
        let mut outs: Vec<Atom> = src
            .outvars()
            .iter()
            .zip(&out_uk)
            .filter(|(_, &u)| !u)
            .map(|(&a, _)| known.src_atom(a))
            .collect();
        outs.extend(residuals.iter().map(|&r| Atom::Var(known.var(r))));
        let known_j = known.out.build_trusted(outs);
        Ok((
            PartialEval {
                known: known_j,
                unknown: unknown_j,
                out_unknowns: out_uk,
                num_residuals: residuals.len(),
            },
            self.dirty,
        ))
    }
}

/// Whether a kept equation has an output nothing needs that [`dce`] would remove from
/// inside it: any output of `jit` and `cond`, the `ys` of `scan` (carried values are
/// needed by the loop itself).
/// Whether an item has an effect (see [`Eqn::has_effect`](crate::jaxpr::Eqn::has_effect)):
/// it is kept even when nothing uses its outputs.
fn item_has_effect(src: &Jaxpr, item: &Item) -> bool {
    match item {
        Item::Src(i) => src.eqns()[*i].has_effect(),
        Item::New { prim, params, .. } => {
            prim.as_builtin().is_some_and(Builtin::has_effect)
                || params.iter().any(|(_, p)| match p {
                    Param::Jaxpr(cj) => cj.jaxpr().has_effects(),
                    Param::Jaxprs(cjs) => cjs.iter().any(|cj| cj.jaxpr().has_effects()),
                    _ => false,
                })
        }
    }
}

fn has_prunable_output(src: &Jaxpr, item: &Item, live: &[bool]) -> bool {
    let (prim, params, outs): (&Primitive, &Params, Vec<u32>) = match item {
        Item::Src(i) => {
            let e = &src.eqns()[*i];
            let outs = e.outvars().iter().map(|v| v.index() as u32).collect();
            (e.primitive(), e.params(), outs)
        }
        Item::New {
            prim, params, outs, ..
        } => (prim, params, outs.clone()),
    };
    let from = match prim.as_builtin() {
        Some(Builtin::Jit | Builtin::Cond | Builtin::Remat) => 0,
        Some(Builtin::Scan) => int_param(params, "num_carry"),
        _ => return false,
    };
    outs.get(from..)
        .is_some_and(|o| o.iter().any(|&v| !live[v as usize]))
}

/// A copy of `j` with other outputs (atoms of `j`).
fn with_outputs(j: &Jaxpr, outs: Vec<Atom>) -> Jaxpr {
    Rebuilder::copy_of(j).finish(outs.into_iter())
}

/// The known half of a split `jit`: residuals that are known inputs are not returned
/// (the caller passes its operands on instead).
fn jit_parts(r: &Sub) -> JitParts {
    let known = &r.known;
    let nk_out = known.outvars().len() - r.num_res();
    let mut pos: HashMap<VarId, usize> = HashMap::new();
    for (p, &v) in known.invars().iter().enumerate() {
        pos.insert(v, p);
    }
    let forwarded: Vec<Option<usize>> = known.outvars()[nk_out..]
        .iter()
        .map(|a| match a {
            Atom::Var(v) => pos.get(v).copied(),
            Atom::Lit(_) => None,
        })
        .collect();
    let known = if forwarded.iter().all(Option::is_none) {
        Arc::clone(known)
    } else {
        let mut outs = known.outvars()[..nk_out].to_vec();
        outs.extend(
            known.outvars()[nk_out..]
                .iter()
                .zip(&forwarded)
                .filter(|(_, f)| f.is_none())
                .map(|(&a, _)| a),
        );
        Arc::new(with_outputs(known, outs))
    };
    JitParts { known, forwarded }
}

/// The bodies of the two scans of a split `scan` (see [`Frame::split_scan`]).
fn scan_parts(r: &Sub, in_uk: &[bool], nc: usize, ncarry: usize) -> Result<ScanParts, PassError> {
    let nres = r.num_res();
    let known = &r.known;
    let nk_out = known.outvars().len() - nres;
    // Where each residual comes from: a known const or xs input of the body is
    // forwarded from the scan's operand; one computed from the consts alone is
    // computed once, before the loop; anything else is stacked. A body with effects
    // hoists nothing: the pruned copy would keep (and repeat) its effectful equations,
    // with whatever per-iteration inputs they read.
    let known_inputs: Vec<usize> = (0..in_uk.len()).filter(|&i| !in_uk[i]).collect();
    let mut invar_pos: HashMap<VarId, usize> = HashMap::new();
    for (p, &v) in known.invars().iter().enumerate() {
        invar_pos.insert(v, known_inputs[p]);
    }
    let nk_consts = (0..nc).filter(|&i| !in_uk[i]).count();
    let effects = known.has_effects();
    let mut invariant = vec![false; known.num_vars()];
    for &v in known.constvars().iter().chain(&known.invars()[..nk_consts]) {
        invariant[v.index()] = true;
    }
    for be in known.eqns() {
        let inv = be.inputs().iter().all(|a| match a {
            Atom::Var(v) => invariant[v.index()],
            Atom::Lit(_) => true,
        });
        if inv {
            for o in be.outvars() {
                invariant[o.index()] = true;
            }
        }
    }
    let kinds: Vec<Res> = known.outvars()[nk_out..]
        .iter()
        .map(|a| match a {
            Atom::Var(v) => match invar_pos.get(v) {
                Some(&q) if q < nc => Res::Const(q),
                Some(&q) if q >= nc + ncarry => Res::Xs(q),
                Some(_) => Res::Stacked,
                None if invariant[v.index()] && !effects => Res::Hoisted,
                None => Res::Stacked,
            },
            Atom::Lit(_) => Res::Stacked,
        })
        .collect();

    // The known scan: its body returns the stacked residuals as extra ys.
    let mut outs: Vec<Atom> = known.outvars()[..nk_out].to_vec();
    outs.extend(
        known.outvars()[nk_out..]
            .iter()
            .zip(&kinds)
            .filter(|(_, &k)| k == Res::Stacked)
            .map(|(&a, _)| a),
    );
    let hoisted: Vec<bool> = kinds.iter().map(|&k| k == Res::Hoisted).collect();
    let known_body = if hoisted.contains(&true) {
        // What only the hoisted residuals needed is dead in the loop now.
        let all = vec![true; known.invars().len()];
        let mut used = vec![true; nk_out];
        used.extend(kinds.iter().map(|&k| k == Res::Stacked));
        let (pruned, used_in) = dce(known, &used)?;
        widen(pruned, &used_in, &all, &known.in_avals())
    } else {
        with_outputs(known, outs)
    };
    let hoisted_parts = if hoisted.contains(&true) {
        let mut used = vec![false; nk_out];
        used.extend_from_slice(&hoisted);
        let (pruned, used_in) = dce(known, &used)?;
        Some((Arc::new(pruned), used_in))
    } else {
        None
    };
    // The unknown scan: consts are the forwarded const residuals then the unknown
    // consts; xs are the stacked or forwarded xs residuals then the unknown xs.
    let unknown = &r.unknown;
    let uin = unknown.invars();
    let mut rb = Rebuilder::new(unknown);
    for &v in unknown.constvars() {
        rb.constvar(v);
    }
    let nuc = count(&in_uk[..nc]) as usize;
    let nucarry = count(&in_uk[nc..nc + ncarry]) as usize;
    for (j, &k) in kinds.iter().enumerate() {
        if matches!(k, Res::Const(_) | Res::Hoisted) {
            rb.invar(uin[j]);
        }
    }
    for &v in &uin[nres..nres + nuc + nucarry] {
        rb.invar(v);
    }
    for (j, &k) in kinds.iter().enumerate() {
        if !matches!(k, Res::Const(_) | Res::Hoisted) {
            rb.invar(uin[j]);
        }
    }
    for &v in &uin[nres + nuc + nucarry..] {
        rb.invar(v);
    }
    for eq in unknown.eqns() {
        rb.eqn(eq);
    }
    let unknown_body = rb.finish(unknown.outvars().iter().copied());
    Ok(ScanParts {
        kinds,
        known_body: Arc::new(known_body),
        hoisted: hoisted_parts,
        unknown_body: Arc::new(unknown_body),
    })
}

/// The body of the known loop of a split `while`: the known body returning the known
/// carries only, without the consts only the residuals needed (and which known consts it
/// still takes).
fn known_while_body(body: &Sub, nk_carry: usize) -> Result<KnownWhileBody, PassError> {
    let mut used = vec![true; nk_carry];
    used.resize(nk_carry + body.num_res(), false);
    let (pruned, used_in) = dce(&body.known, &used)?;
    let nk_consts = used_in.len() - nk_carry;
    let mut want = used_in[..nk_consts].to_vec();
    want.resize(used_in.len(), true);
    let j = widen(pruned, &used_in, &want, &body.known.in_avals());
    Ok((Arc::new(j), used_in[..nk_consts].to_vec()))
}

/// The known and unknown branches of a split `cond` (see [`Frame::split_cond`]).
fn cond_parts(results: &[Rc<Sub>], join: &[bool], eqn: usize) -> Result<CondParts, PassError> {
    // Residual slots: the n-th residual of a type in a branch goes to the n-th slot of
    // that type.
    let mut slots: Vec<AbstractValue> = Vec::new();
    let mut by_type: HashMap<AbstractValue, Vec<usize>> = HashMap::new();
    let mut slot_of: Vec<Vec<usize>> = Vec::with_capacity(results.len());
    for r in results {
        let mut seen: HashMap<AbstractValue, usize> = HashMap::new();
        let mut mine = Vec::with_capacity(r.num_res());
        for a in &r.res_avals {
            let key = a.clone().with_weak_type(false);
            let n = seen.entry(key.clone()).or_insert(0);
            let list = by_type.entry(key).or_default();
            if *n == list.len() {
                list.push(slots.len());
                slots.push(a.clone());
            }
            mine.push(list[*n]);
            *n += 1;
        }
        slot_of.push(mine);
    }
    let nk_out = join.iter().filter(|&&u| !u).count();
    let mut known = Vec::with_capacity(results.len());
    let mut unknown = Vec::with_capacity(results.len());
    for (r, mine) in results.iter().zip(&slot_of) {
        known.push(Arc::new(known_branch(&r.known, nk_out, mine, &slots, eqn)?));
        unknown.push(Arc::new(unknown_branch(
            &r.unknown,
            r.num_res(),
            mine,
            &slots,
        )));
    }
    Ok(CondParts {
        known,
        unknown,
        slots,
    })
}

/// A known `cond` branch returning its known outputs, then every residual slot: its own
/// residuals where they go, zeros elsewhere.
fn known_branch(
    known: &Jaxpr,
    nk_out: usize,
    slot_of: &[usize],
    slots: &[AbstractValue],
    eqn: usize,
) -> Result<Jaxpr, PassError> {
    let mut rb = Rebuilder::copy_of(known);
    let mut outs: Vec<Atom> = known.outvars()[..nk_out]
        .iter()
        .map(|&a| rb.atom(a))
        .collect();
    let mut filled: Vec<Option<Atom>> = vec![None; slots.len()];
    for (j, &s) in slot_of.iter().enumerate() {
        filled[s] = Some(rb.atom(known.outvars()[nk_out + j]));
    }
    for (s, f) in filled.into_iter().enumerate() {
        outs.push(match f {
            Some(a) => a,
            None => zeros(&mut rb.out, &slots[s], eqn)?,
        });
    }
    Ok(rb.out.build_trusted(outs))
}

/// An unknown `cond` branch taking every residual slot (ignoring those of the other
/// branches), then the unknown operands.
fn unknown_branch(
    unknown: &Jaxpr,
    nres: usize,
    slot_of: &[usize],
    slots: &[AbstractValue],
) -> Jaxpr {
    let mut rb = Rebuilder::new(unknown);
    for &v in unknown.constvars() {
        rb.constvar(v);
    }
    let mut by_slot: Vec<Option<VarId>> = vec![None; slots.len()];
    for (j, &s) in slot_of.iter().enumerate() {
        by_slot[s] = Some(unknown.invars()[j]);
    }
    for (s, v) in by_slot.into_iter().enumerate() {
        match v {
            Some(v) => rb.invar(v),
            None => rb.fresh_invar(slots[s].clone()),
        }
    }
    for &v in &unknown.invars()[nres..] {
        rb.invar(v);
    }
    for e in unknown.eqns() {
        rb.eqn(e);
    }
    rb.finish(unknown.outvars().iter().copied())
}

const UNMAPPED: u32 = u32::MAX;

/// Emits one of the two results: maps the frame's extended variables to new ones.
struct Emit<'s> {
    src: &'s Jaxpr,
    extra: &'s [AbstractValue],
    map: Vec<u32>,
    aval_map: Vec<u32>,
    out: JaxprBuilder,
}

impl<'s> Emit<'s> {
    fn new(src: &'s Jaxpr, extra: &'s [AbstractValue]) -> Emit<'s> {
        Emit {
            src,
            extra,
            map: vec![UNMAPPED; src.num_vars() + extra.len()],
            aval_map: vec![UNMAPPED; src.avals.len()],
            out: JaxprBuilder::new(),
        }
    }

    fn var(&mut self, x: u32) -> VarId {
        let slot = self.map[x as usize];
        if slot != UNMAPPED {
            return VarId::from_index(slot as usize);
        }
        let n = self.src.num_vars();
        let id = if (x as usize) < n {
            let a = self.src.var_avals[x as usize].index();
            match self.aval_map[a] {
                UNMAPPED => {
                    let id = self.out.intern_aval(&self.src.avals[a]);
                    self.aval_map[a] = id.index() as u32;
                    id
                }
                known => AvalId::from_index(known as usize),
            }
        } else {
            self.out.intern_aval(&self.extra[x as usize - n])
        };
        let nv = self.out.new_var_of(id);
        self.map[x as usize] = nv.index() as u32;
        nv
    }

    fn src_atom(&mut self, a: Atom) -> Atom {
        match a {
            Atom::Var(v) => Atom::Var(self.var(v.index() as u32)),
            Atom::Lit(l) => self.out.literal(*self.src.literal(l)),
        }
    }

    fn x(&mut self, x: X) -> Atom {
        match x {
            X::Var(v) => Atom::Var(self.var(v)),
            X::Lit(l) => self.out.literal(l),
        }
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Src(i) => {
                let e = &self.src.eqns()[*i];
                let inputs: Vec<Atom> = e.inputs().iter().map(|&a| self.src_atom(a)).collect();
                let outs: Vec<VarId> = e
                    .outvars()
                    .iter()
                    .map(|v| self.var(v.index() as u32))
                    .collect();
                self.out.add_eqn_with_outvars(
                    e.primitive().clone(),
                    inputs,
                    e.params().clone(),
                    outs,
                );
            }
            Item::New {
                prim,
                inputs,
                outs,
                params,
            } => {
                let inputs: Vec<Atom> = inputs.iter().map(|&x| self.x(x)).collect();
                let outs: Vec<VarId> = outs.iter().map(|&v| self.var(v)).collect();
                self.out
                    .add_eqn_with_outvars(prim.clone(), inputs, params.clone(), outs);
            }
        }
    }
}
