//! A reference evaluator over host arrays.
//!
//! [`eval_jaxpr`] and [`eval_closed_jaxpr`] run a jaxpr on [`HostArray`]s with the
//! semantics of XLA/JAX's `lax` primitives, so tests and fuzzers can check that IR passes
//! preserve meaning without Python or XLA. It aims at correctness and clarity, not speed.
//!
//! # Values
//! A [`HostArray`] stores every integer dtype in `i64` and every float dtype in `f64`
//! (row-major), and every result is rounded or wrapped to its dtype after every
//! primitive: `f32` through `as f32`, `f16` and `bf16` by round-to-nearest-even
//! ([`round_to_f16`], [`round_to_bf16`]), `i8`/`i16`/`i32` by two's complement wrapping,
//! `u8`/`u16`/`u32` modulo 2^n. **`u64` values are stored as their bit patterns in
//! `i64`**: values at or above 2^63 are negative `i64`s; comparisons, `max`/`min`,
//! division, remainder, `argmax`/`argmin`, reductions and conversions treat them as
//! unsigned.
//!
//! Subnormals are kept (IEEE gradual underflow). XLA on CPU flushes `f32`/`bf16`
//! subnormals to zero, so results in the subnormal range can differ from JAX on CPU.
//!
//! Float primitives compute in `f64` and round the result once to the dtype, so `f32`
//! results may differ from XLA's in the last place for transcendental functions; `+ - * /`
//! and `sqrt` are correctly rounded (the `f64` intermediate cannot double-round them).
//! Float reductions and `dot_general` accumulate in `f64` in row-major order and round
//! once (XLA's order and accumulation type are unspecified; compare with a tolerance).
//!
//! # Semantics (XLA's, or JAX's lowering where XLA leaves a choice)
//! * Binary element-wise primitives broadcast a rank-0 operand against the other.
//! * Integer `div` truncates toward zero and `rem` takes the dividend's sign. Division by
//!   zero is not an error: like XLA, `x / 0` is `-1` (all bits set, i.e. the maximum for
//!   unsigned dtypes) and `x % 0` is `x`; `MIN / -1` is `MIN` and `MIN % -1` is 0.
//! * `max`/`min` propagate NaN; `argmax`/`argmin` return the first index of the extreme,
//!   and a NaN counts as the extreme for both (the first NaN wins, as in JAX).
//! * `convert_element_type` from float to integer truncates toward zero and saturates;
//!   NaN becomes 0. Anything to `bool` is `x != 0` (NaN is `true`).
//! * `integer_pow` follows JAX's lowering: square-and-multiply in the dtype (each
//!   product rounded), and for a negative exponent `1 / x^|y|`. (The shape rule rejects
//!   negative powers of integers, as JAX does; were one evaluated, it would use integer
//!   division: `x^-1` is 0 unless `x` is 1 or -1, and `0^-1` is -1.)
//! * `pow` with an integer exponent converts it to the base's float dtype first, as JAX
//!   lowers it. `sign` of an unsigned integer is 0 or 1; `neg` of one wraps.
//! * `dot_general` converts both operands to the result dtype before multiplying (JAX's
//!   CPU lowering for mixed operand dtypes).
//! * `select_n` with an integer predicate out of range, and `cond` with an index out of
//!   range, clamp it into range (`cond` like XLA's `case`; `select_n` like JAX's
//!   lowering; unsigned predicates compare as unsigned). A `bool` predicate picks case 0
//!   for `false` and 1 for `true` (as would a `bool` `cond` index, which the shape rule
//!   now rejects).
//! * `dynamic_slice`/`dynamic_update_slice` clamp each start index to `[0, dim - size]`.
//! * `gather` in modes `CLIP` and `PROMISE_IN_BOUNDS` clamps each start index so the
//!   whole slice is in bounds (XLA); in `FILL_OR_DROP` a slice not wholly in bounds is
//!   `fill_value` throughout (`None`: NaN, the least signed or greatest unsigned integer,
//!   `true`, as JAX picks). The `scatter` family drops an update window not wholly in
//!   bounds (XLA), after clamping its start indices in `CLIP` mode (JAX's lowering);
//!   several updates to one element combine in update order (`scatter`: the last wins;
//!   XLA leaves the order unspecified). With index vectors of length 0, XLA applies only
//!   one of several combining updates to an element; the evaluator combines them all.
//! * Reductions over empty axes give the identity: 0, 1, -inf/+inf, or the dtype's
//!   least/greatest integer (`false`/`true` for `bool` max/min).
//! * `sign(-0.0)` is `-0.0` and `sign(NaN)` is NaN.
//!
//! # Control flow and nesting
//! Higher-order primitives (`jit`, `cond`, `while`, `scan`) run their sub-jaxprs on an
//! explicit stack of frames, not by recursion, so arbitrarily deep nesting cannot
//! overflow the native stack (memory grows with the depth, one frame per level).
//!
//! # Limits
//! [`EvalOptions`] bounds the total number of loop iterations (`while` bodies plus `scan`
//! steps; unlimited by default) and the element count of every array an equation
//! produces (checked from the jaxpr's types before the equation runs; 2^27 by default),
//! so a fuzzer can run arbitrary well-typed jaxprs without hanging or aborting on an
//! allocation.

mod array;
mod indexing;
mod numeric;
mod ops;

pub use array::{allclose, check_close, ArrayError, HostArray, HostData};
pub use numeric::{round_float, round_to_bf16, round_to_f16, wrap_int};

use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitValue, Literal};
use crate::primitive::{Builtin, Primitive};
use ops::internal;
use std::borrow::Cow;
use std::fmt;

/// Why a jaxpr could not be evaluated.
#[derive(Clone, Debug, PartialEq)]
pub enum EvalError {
    /// The number of arguments differs from the jaxpr's invars.
    ArgCount {
        /// Invars of the jaxpr.
        expected: usize,
        /// Arguments given.
        got: usize,
    },
    /// An argument's type differs from its invar's.
    ArgType {
        /// Position of the argument.
        index: usize,
        /// The invar's type.
        expected: AbstractValue,
        /// The argument's type.
        got: AbstractValue,
    },
    /// An argument breaks the [`HostArray`] invariants.
    InvalidArg {
        /// Position of the argument.
        index: usize,
        /// What is wrong with it.
        error: ArrayError,
    },
    /// The number of constants given to [`eval_jaxpr`] differs from the constvars.
    ConstCount {
        /// Constvars of the jaxpr.
        expected: usize,
        /// Constants given.
        got: usize,
    },
    /// A constant's type differs from its constvar's.
    ConstType {
        /// Position of the constant (in the jaxpr that declares it, which may be a
        /// sub-jaxpr).
        index: usize,
        /// The constvar's type.
        expected: AbstractValue,
        /// The constant's type.
        got: AbstractValue,
    },
    /// A constant breaks the [`HostArray`] invariants.
    InvalidConst {
        /// Position of the constant.
        index: usize,
        /// What is wrong with it.
        error: ArrayError,
    },
    /// A constant of a closed jaxpr (the root or a sub-jaxpr) has no value, as after
    /// reading text.
    MissingConstValue {
        /// Position of the constant.
        index: usize,
        /// Its type.
        aval: AbstractValue,
    },
    /// A constant of a closed jaxpr holds a value that is not a [`HostArray`].
    ConstNotHostArray {
        /// Position of the constant.
        index: usize,
        /// Its type.
        aval: AbstractValue,
    },
    /// The jaxpr applies an extension primitive, which the evaluator cannot run.
    UnsupportedPrimitive {
        /// Its name.
        name: String,
    },
    /// More loop iterations (`while` bodies and `scan` steps, in total) than
    /// [`EvalOptions::max_loop_iterations`] allows.
    IterationLimit {
        /// The limit.
        limit: u64,
    },
    /// An equation would produce an array with more elements than
    /// [`EvalOptions::max_array_elements`] allows.
    ArrayTooLarge {
        /// The array's type.
        aval: AbstractValue,
        /// The limit.
        limit: u64,
    },
    /// A jaxpr invariant the evaluator relies on does not hold, or the evaluator
    /// computed a value of the wrong type: a bug, never caused by a typechecked jaxpr and
    /// valid inputs.
    Internal {
        /// What went wrong.
        reason: String,
    },
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::ArgCount { expected, got } => {
                write!(
                    f,
                    "the jaxpr takes {expected} arguments but {got} were given"
                )
            }
            EvalError::ArgType {
                index,
                expected,
                got,
            } => write!(
                f,
                "argument {index} has type {got} but the jaxpr expects {expected}"
            ),
            EvalError::InvalidArg { index, error } => write!(f, "argument {index}: {error}"),
            EvalError::ConstCount { expected, got } => write!(
                f,
                "the jaxpr has {expected} constvars but {got} constants were given"
            ),
            EvalError::ConstType {
                index,
                expected,
                got,
            } => write!(
                f,
                "constant {index} has type {got} but its constvar has type {expected}"
            ),
            EvalError::InvalidConst { index, error } => write!(f, "constant {index}: {error}"),
            EvalError::MissingConstValue { index, aval } => {
                write!(f, "constant {index} ({aval}) has no value")
            }
            EvalError::ConstNotHostArray { index, aval } => {
                write!(f, "constant {index} ({aval}) does not hold a HostArray")
            }
            EvalError::UnsupportedPrimitive { name } => {
                write!(f, "cannot evaluate the extension primitive '{name}'")
            }
            EvalError::IterationLimit { limit } => {
                write!(f, "more than {limit} loop iterations")
            }
            EvalError::ArrayTooLarge { aval, limit } => {
                write!(f, "an array of type {aval} has more than {limit} elements")
            }
            EvalError::Internal { reason } => write!(f, "internal evaluator error: {reason}"),
        }
    }
}

impl std::error::Error for EvalError {}

/// Resource limits of an evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalOptions {
    /// The most loop iterations (`while` bodies plus `scan` steps, over the whole
    /// evaluation) before [`EvalError::IterationLimit`]; `None` for no limit.
    pub max_loop_iterations: Option<u64>,
    /// The most elements of any array an equation produces before
    /// [`EvalError::ArrayTooLarge`]; `None` for no limit.
    pub max_array_elements: Option<u64>,
}

impl EvalOptions {
    /// The default element limit: 2^27 elements (1 GiB of `f64`).
    pub const DEFAULT_MAX_ARRAY_ELEMENTS: u64 = 1 << 27;
}

impl Default for EvalOptions {
    fn default() -> EvalOptions {
        EvalOptions {
            max_loop_iterations: None,
            max_array_elements: Some(EvalOptions::DEFAULT_MAX_ARRAY_ELEMENTS),
        }
    }
}

type R<T> = Result<T, EvalError>;

/// Evaluates a jaxpr on constants (one per constvar) and arguments (one per invar), with
/// the default [`EvalOptions`].
pub fn eval_jaxpr(
    jaxpr: &Jaxpr,
    consts: &[HostArray],
    args: &[HostArray],
) -> Result<Vec<HostArray>, EvalError> {
    eval_jaxpr_with(jaxpr, consts, args, &EvalOptions::default())
}

/// Evaluates a closed jaxpr on arguments, its constants being the [`HostArray`]s its
/// [`crate::Const`]s hold, with the default [`EvalOptions`].
pub fn eval_closed_jaxpr(
    cj: &ClosedJaxpr,
    args: &[HostArray],
) -> Result<Vec<HostArray>, EvalError> {
    eval_closed_jaxpr_with(cj, args, &EvalOptions::default())
}

/// [`eval_jaxpr`] with explicit limits.
pub fn eval_jaxpr_with(
    jaxpr: &Jaxpr,
    consts: &[HostArray],
    args: &[HostArray],
    options: &EvalOptions,
) -> Result<Vec<HostArray>, EvalError> {
    let constvars = jaxpr.constvars();
    if consts.len() != constvars.len() {
        return Err(EvalError::ConstCount {
            expected: constvars.len(),
            got: consts.len(),
        });
    }
    for (index, (c, &v)) in consts.iter().zip(constvars).enumerate() {
        check_value(c, jaxpr.var_aval(v), index, Role::Const)?;
    }
    run(jaxpr, consts.to_vec(), args, options)
}

/// [`eval_closed_jaxpr`] with explicit limits.
pub fn eval_closed_jaxpr_with(
    cj: &ClosedJaxpr,
    args: &[HostArray],
    options: &EvalOptions,
) -> Result<Vec<HostArray>, EvalError> {
    let consts = closed_consts(cj)?;
    run(cj.jaxpr(), consts, args, options)
}

#[derive(Clone, Copy)]
enum Role {
    Arg,
    Const,
}

/// Checks a given value against its binder's type.
fn check_value(value: &HostArray, expected: &AbstractValue, index: usize, role: Role) -> R<()> {
    if let Err(error) = value.validate() {
        return Err(match role {
            Role::Arg => EvalError::InvalidArg { index, error },
            Role::Const => EvalError::InvalidConst { index, error },
        });
    }
    let got = value.aval();
    if !got.same_type(expected) {
        let expected = expected.clone();
        return Err(match role {
            Role::Arg => EvalError::ArgType {
                index,
                expected,
                got,
            },
            Role::Const => EvalError::ConstType {
                index,
                expected,
                got,
            },
        });
    }
    Ok(())
}

/// The values of a closed jaxpr's constants, checked against its constvars.
fn closed_consts(cj: &ClosedJaxpr) -> R<Vec<HostArray>> {
    let jaxpr = cj.jaxpr();
    let mut out = Vec::with_capacity(cj.consts().len());
    if cj.consts().len() != jaxpr.constvars().len() {
        return Err(EvalError::ConstCount {
            expected: jaxpr.constvars().len(),
            got: cj.consts().len(),
        });
    }
    for (index, (c, &v)) in cj.consts().iter().zip(jaxpr.constvars()).enumerate() {
        let aval = c.aval().clone();
        let Some(value) = c.value() else {
            return Err(EvalError::MissingConstValue { index, aval });
        };
        let Some(array) = value.downcast_ref::<HostArray>() else {
            return Err(EvalError::ConstNotHostArray { index, aval });
        };
        check_value(array, jaxpr.var_aval(v), index, Role::Const)?;
        out.push(array.clone());
    }
    Ok(out)
}

fn run(
    jaxpr: &Jaxpr,
    consts: Vec<HostArray>,
    args: &[HostArray],
    options: &EvalOptions,
) -> R<Vec<HostArray>> {
    let invars = jaxpr.invars();
    if args.len() != invars.len() {
        return Err(EvalError::ArgCount {
            expected: invars.len(),
            got: args.len(),
        });
    }
    for (index, (a, &v)) in args.iter().zip(invars).enumerate() {
        check_value(a, jaxpr.var_aval(v), index, Role::Arg)?;
    }
    let root = Frame::new(jaxpr, consts, args.to_vec())?;
    Machine {
        stack: vec![root],
        iterations: 0,
        options,
    }
    .run()
}

/// One jaxpr being evaluated: its environment and the next equation.
struct Frame<'a> {
    jaxpr: &'a Jaxpr,
    /// The value of each variable, by id; `None` until bound.
    env: Vec<Option<HostArray>>,
    /// The next equation to run (or the higher-order one waiting for a child frame).
    pc: usize,
    /// Set while the equation at `pc` waits for the frame above this one.
    pending: Option<Pending<'a>>,
}

/// What a higher-order equation does with its child frame's outputs.
enum Pending<'a> {
    /// `jit` or `cond`: they are the equation's outputs.
    Call,
    /// A `while` loop in progress.
    While(WhileState<'a>),
    /// A `scan` in progress.
    Scan(ScanState<'a>),
}

struct WhileState<'a> {
    cond: &'a ClosedJaxpr,
    body: &'a ClosedJaxpr,
    cond_consts: Vec<HostArray>,
    body_consts: Vec<HostArray>,
    /// The loop state (empty while the body runs: the body frame holds it).
    carry: Vec<HostArray>,
    /// Whether the child frame is the body (else the condition).
    in_body: bool,
}

struct ScanState<'a> {
    body: &'a ClosedJaxpr,
    consts: Vec<HostArray>,
    /// The carry (empty while a step runs).
    carry: Vec<HostArray>,
    xs: Vec<HostArray>,
    /// Per stacked output, its slices in the order the steps produced them.
    ys: Vec<Vec<HostArray>>,
    length: usize,
    reverse: bool,
    num_carry: usize,
    /// Steps finished.
    done: usize,
}

impl<'a> Frame<'a> {
    /// A frame with its constvars and invars bound (their types are checked: a mismatch
    /// here is an internal error, the caller having checked user inputs already).
    fn new(jaxpr: &'a Jaxpr, consts: Vec<HostArray>, args: Vec<HostArray>) -> R<Frame<'a>> {
        let mut frame = Frame {
            jaxpr,
            env: vec![None; jaxpr.num_vars()],
            pc: 0,
            pending: None,
        };
        let (cv, iv) = (jaxpr.constvars(), jaxpr.invars());
        if consts.len() != cv.len() || args.len() != iv.len() {
            return Err(internal(format!(
                "a frame given {} constants and {} arguments for {} constvars and {} invars",
                consts.len(),
                args.len(),
                cv.len(),
                iv.len()
            )));
        }
        for (&v, value) in cv.iter().chain(iv).zip(consts.into_iter().chain(args)) {
            frame.bind(v, value)?;
        }
        Ok(frame)
    }

    /// A frame running a sub-jaxpr on these arguments.
    fn closed(cj: &'a ClosedJaxpr, args: Vec<HostArray>) -> R<Frame<'a>> {
        let consts = closed_consts(cj)?;
        Frame::new(cj.jaxpr(), consts, args)
    }

    fn bind(&mut self, v: crate::jaxpr::VarId, value: HostArray) -> R<()> {
        let expected = self.jaxpr.var_aval(v);
        value
            .validate()
            .map_err(|e| internal(format!("a computed value is malformed: {e}")))?;
        if !value.aval().same_type(expected) {
            return Err(internal(format!(
                "a value of type {} bound to a variable of type {expected}",
                value.aval()
            )));
        }
        let slot = self
            .env
            .get_mut(v.index())
            .ok_or_else(|| internal(format!("variable {v} is out of range")))?;
        *slot = Some(value);
        Ok(())
    }

    fn read(&self, atom: Atom) -> R<Cow<'_, HostArray>> {
        match atom {
            Atom::Var(v) => self
                .env
                .get(v.index())
                .and_then(Option::as_ref)
                .map(Cow::Borrowed)
                .ok_or_else(|| internal(format!("variable {v} is read before it is bound"))),
            Atom::Lit(l) => {
                let lit = self
                    .jaxpr
                    .literals()
                    .get(l.index())
                    .ok_or_else(|| internal(format!("literal {l} is out of range")))?;
                literal_array(lit).map(Cow::Owned)
            }
        }
    }

    fn read_owned(&self, atoms: &[Atom]) -> R<Vec<HostArray>> {
        atoms
            .iter()
            .map(|&a| self.read(a).map(Cow::into_owned))
            .collect()
    }

    /// Binds the outputs of the equation at `pc` and moves past it.
    fn finish_eqn(&mut self, outs: Vec<HostArray>) -> R<()> {
        let eqn = self.current()?;
        if outs.len() != eqn.outvars().len() {
            return Err(internal(format!(
                "{} produced {} outputs for {} outvars",
                eqn.primitive().name(),
                outs.len(),
                eqn.outvars().len()
            )));
        }
        for (&v, value) in eqn.outvars().iter().zip(outs) {
            self.bind(v, value)?;
        }
        self.pc += 1;
        Ok(())
    }

    fn current(&self) -> R<&'a Eqn> {
        let jaxpr: &'a Jaxpr = self.jaxpr;
        jaxpr
            .eqns()
            .get(self.pc)
            .ok_or_else(|| internal("no current equation"))
    }

    fn outputs(&self) -> R<Vec<HostArray>> {
        self.read_owned(self.jaxpr.outvars())
    }
}

fn literal_array(lit: &Literal) -> R<HostArray> {
    let ok = match (lit.value, lit.dtype) {
        (LitValue::Bool(_), DType::Bool) => true,
        (LitValue::Int(_), d) => d.is_int(),
        (LitValue::Float(_), d) => d.is_float(),
        _ => false,
    };
    if !ok {
        return Err(internal(format!("literal {lit:?} does not fit its dtype")));
    }
    HostArray::scalar(lit.dtype, lit.value).map_err(|e| internal(format!("literal: {e}")))
}

/// The evaluation: a stack of frames, the innermost on top.
struct Machine<'a, 'o> {
    stack: Vec<Frame<'a>>,
    iterations: u64,
    options: &'o EvalOptions,
}

impl<'a> Machine<'a, '_> {
    fn run(mut self) -> R<Vec<HostArray>> {
        loop {
            let Some(top) = self.stack.last_mut() else {
                return Err(internal("empty frame stack"));
            };
            if top.pc == top.jaxpr.eqns().len() {
                let outs = top.outputs()?;
                self.stack.pop();
                let Some(parent) = self.stack.last_mut() else {
                    return Ok(outs);
                };
                let next = resume(parent, outs, &mut self.iterations, self.options)?;
                self.stack.extend(next);
                continue;
            }
            let eqn = top.current()?;
            check_sizes(top.jaxpr, eqn, self.options)?;
            let next = match eqn.primitive() {
                Primitive::Extension(e) => {
                    return Err(EvalError::UnsupportedPrimitive {
                        name: e.name().to_owned(),
                    })
                }
                Primitive::Builtin(b) if b.is_higher_order() => {
                    start(top, *b, eqn, &mut self.iterations, self.options)?
                }
                Primitive::Builtin(b) => {
                    let outs = {
                        let ins = eqn
                            .inputs()
                            .iter()
                            .map(|&a| top.read(a))
                            .collect::<R<Vec<_>>>()?;
                        let refs: Vec<&HostArray> = ins.iter().map(|c| c.as_ref()).collect();
                        ops::apply(*b, &refs, eqn.params())?
                    };
                    top.finish_eqn(outs)?;
                    None
                }
            };
            self.stack.extend(next);
        }
    }
}

/// Fails if an output of the equation would exceed the element limit.
fn check_sizes(jaxpr: &Jaxpr, eqn: &Eqn, options: &EvalOptions) -> R<()> {
    let Some(limit) = options.max_array_elements else {
        return Ok(());
    };
    for &v in eqn.outvars() {
        let aval = jaxpr.var_aval(v);
        if aval.shape.size() as u64 > limit {
            return Err(EvalError::ArrayTooLarge {
                aval: aval.clone(),
                limit,
            });
        }
    }
    Ok(())
}

/// Counts one loop iteration against the limit.
fn tick(iterations: &mut u64, options: &EvalOptions) -> R<()> {
    *iterations += 1;
    match options.max_loop_iterations {
        Some(limit) if *iterations > limit => Err(EvalError::IterationLimit { limit }),
        _ => Ok(()),
    }
}

/// Splits off the first `n` values.
fn split_front(mut v: Vec<HostArray>, n: usize) -> R<(Vec<HostArray>, Vec<HostArray>)> {
    if n > v.len() {
        return Err(internal(format!("{n} leading operands of {}", v.len())));
    }
    let rest = v.split_off(n);
    Ok((v, rest))
}

/// The branch a `cond` index picks: an integer clamped into range, or `false`/`true` as
/// 0/1.
fn branch_index(index: &HostArray, n: usize) -> R<usize> {
    let last = n
        .checked_sub(1)
        .ok_or_else(|| internal("cond without branches"))?;
    match (&index.data, index.dtype) {
        (HostData::Bool(v), _) if v.len() == 1 => Ok(usize::from(v[0]).min(last)),
        (HostData::Int(v), DType::U64) if v.len() == 1 && v[0] < 0 => Ok(last),
        (HostData::Int(v), _) if v.len() == 1 => {
            Ok(usize::try_from(v[0].max(0)).unwrap_or(usize::MAX).min(last))
        }
        _ => Err(internal("the cond index is not an integer or bool scalar")),
    }
}

/// Starts a higher-order equation: returns the child frame to run, or `None` if the
/// equation finished at once (a `scan` of length 0).
fn start<'a>(
    frame: &mut Frame<'a>,
    prim: Builtin,
    eqn: &'a Eqn,
    iterations: &mut u64,
    options: &EvalOptions,
) -> R<Option<Frame<'a>>> {
    let params = eqn.params();
    let ins = frame.read_owned(eqn.inputs())?;
    match prim {
        Builtin::Jit | Builtin::CustomJvpCall | Builtin::CustomVjpCall | Builtin::Remat => {
            let name = prim.call_jaxpr_param().unwrap_or("jaxpr");
            let child = Frame::closed(ops::param_jaxpr(params, name)?, ins)?;
            frame.pending = Some(Pending::Call);
            Ok(Some(child))
        }
        Builtin::Cond => {
            let branches = ops::param_jaxprs(params, "branches")?;
            let (index, operands) = split_front(ins, 1)?;
            let k = branch_index(&index[0], branches.len())?;
            let child = Frame::closed(&branches[k], operands)?;
            frame.pending = Some(Pending::Call);
            Ok(Some(child))
        }
        Builtin::While => {
            let cond = ops::param_jaxpr(params, "cond_jaxpr")?;
            let body = ops::param_jaxpr(params, "body_jaxpr")?;
            let (cond_consts, rest) = split_front(ins, ops::param_count(params, "cond_nconsts")?)?;
            let (body_consts, carry) =
                split_front(rest, ops::param_count(params, "body_nconsts")?)?;
            let child = Frame::closed(cond, cond_consts.iter().chain(&carry).cloned().collect())?;
            frame.pending = Some(Pending::While(WhileState {
                cond,
                body,
                cond_consts,
                body_consts,
                carry,
                in_body: false,
            }));
            Ok(Some(child))
        }
        Builtin::Scan => {
            let body = ops::param_jaxpr(params, "jaxpr")?;
            let length = ops::param_count(params, "length")?;
            let reverse = ops::param_bool(params, "reverse")?;
            let (consts, rest) = split_front(ins, ops::param_count(params, "num_consts")?)?;
            let num_carry = ops::param_count(params, "num_carry")?;
            let (carry, xs) = split_front(rest, num_carry)?;
            let num_ys = eqn
                .outvars()
                .len()
                .checked_sub(num_carry)
                .ok_or_else(|| internal("scan has fewer outputs than carries"))?;
            let mut state = ScanState {
                body,
                consts,
                carry,
                xs,
                ys: vec![Vec::new(); num_ys],
                length,
                reverse,
                num_carry,
                done: 0,
            };
            if length == 0 {
                let outs = state.finish(frame)?;
                frame.finish_eqn(outs)?;
                return Ok(None);
            }
            tick(iterations, options)?;
            let child = state.step_frame()?;
            frame.pending = Some(Pending::Scan(state));
            Ok(Some(child))
        }
        _ => Err(internal(format!("{} is not higher-order", prim.name()))),
    }
}

/// Gives a finished child frame's outputs to the equation waiting for them: returns the
/// next child frame to run, or `None` if the equation is done.
fn resume<'a>(
    frame: &mut Frame<'a>,
    outs: Vec<HostArray>,
    iterations: &mut u64,
    options: &EvalOptions,
) -> R<Option<Frame<'a>>> {
    let pending = frame
        .pending
        .take()
        .ok_or_else(|| internal("a frame finished with no equation waiting for it"))?;
    match pending {
        Pending::Call => {
            frame.finish_eqn(outs)?;
            Ok(None)
        }
        Pending::While(mut st) => {
            if st.in_body {
                st.carry = outs;
                let args = st.cond_consts.iter().chain(&st.carry).cloned().collect();
                let child = Frame::closed(st.cond, args)?;
                st.in_body = false;
                frame.pending = Some(Pending::While(st));
                return Ok(Some(child));
            }
            let go = match outs.first().and_then(HostArray::as_bool) {
                Some(&[b]) => b,
                _ => return Err(internal("while's cond_jaxpr did not return one bool")),
            };
            if !go {
                frame.finish_eqn(st.carry)?;
                return Ok(None);
            }
            tick(iterations, options)?;
            let carry = std::mem::take(&mut st.carry);
            let args = st.body_consts.iter().cloned().chain(carry).collect();
            let child = Frame::closed(st.body, args)?;
            st.in_body = true;
            frame.pending = Some(Pending::While(st));
            Ok(Some(child))
        }
        Pending::Scan(mut st) => {
            let (carry, ys) = split_front(outs, st.num_carry)?;
            if ys.len() != st.ys.len() {
                return Err(internal("scan body returned the wrong number of outputs"));
            }
            st.carry = carry;
            for (acc, y) in st.ys.iter_mut().zip(ys) {
                acc.push(y);
            }
            st.done += 1;
            if st.done < st.length {
                tick(iterations, options)?;
                let child = st.step_frame()?;
                frame.pending = Some(Pending::Scan(st));
                return Ok(Some(child));
            }
            let outs = st.finish(frame)?;
            frame.finish_eqn(outs)?;
            Ok(None)
        }
    }
}

impl<'a> ScanState<'a> {
    /// The frame for the next step: consts, carry, and slice `i` of every `xs`, where
    /// `i` counts up from 0 or, for a reverse scan, down from `length - 1`.
    fn step_frame(&mut self) -> R<Frame<'a>> {
        let i = if self.reverse {
            self.length - 1 - self.done
        } else {
            self.done
        };
        let mut args = self.consts.clone();
        args.append(&mut self.carry);
        for x in &self.xs {
            args.push(ops::index_leading(x, i)?);
        }
        Frame::closed(self.body, args)
    }

    /// The scan's outputs: the final carry, then every `ys` stacked along a new leading
    /// axis with the slice of step index `i` at position `i`.
    fn finish(mut self, frame: &Frame<'a>) -> R<Vec<HostArray>> {
        let eqn = frame.current()?;
        let y_vars = eqn.outvars().get(self.num_carry..).unwrap_or(&[]);
        let mut outs = std::mem::take(&mut self.carry);
        for (mut parts, &v) in self.ys.into_iter().zip(y_vars) {
            if self.reverse {
                parts.reverse();
            }
            let aval = frame.jaxpr.var_aval(v);
            outs.push(ops::stack(&parts, aval.shape.clone(), aval.dtype)?);
        }
        Ok(outs)
    }
}
