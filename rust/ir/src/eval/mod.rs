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
//! **A key (`key<fry>`) is one element**: its two `u32` words packed into one `i64` of
//! `HostData::Int` as `(word0 << 32) | word1` (word0 is the first of JAX's
//! `key_data(k)[..., 0:2]`). The structural evaluators (reshape, slices, gather,
//! scatter, select_n, control flow, ...) move keys as they move integers, unchanged;
//! `random_wrap`/`random_unwrap` convert to and from `u32[..., 2]` data, and the random
//! primitives hash the words with threefry2x32 as JAX does (see `random.rs`).
//!
//! Subnormals are kept (IEEE gradual underflow). XLA on CPU flushes `f32`/`bf16`
//! subnormals to zero, so results in the subnormal range can differ from JAX on CPU.
//!
//! Float primitives compute in `f64` and round the result once to the dtype, so `f32`
//! results may differ from XLA's in the last place for transcendental functions; `+ - * /`
//! and `sqrt` are correctly rounded (the `f64` intermediate cannot double-round them).
//! Float reductions, `dot_general` and `conv_general_dilated` accumulate in `f64` in row-major order and round
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
//!   CPU lowering for mixed operand dtypes); so does `conv_general_dilated` (for its
//!   `preferred_element_type`), whose batch groups split the lhs batch as XLA's do: output
//!   feature group `g` reads lhs batch entries `g * (batch / groups) ..`.
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
//! * A `while` whose `cond_jaxpr` returns a batched predicate `bool[s...]` (`s` a prefix
//!   of every carry's shape: JAX's vmap of a loop) runs while any element is true; each
//!   iteration runs the body on the whole carry and keeps the old value of the lanes whose
//!   element was false (JAX's lowering). The condition runs once before the loop and once
//!   after each iteration (JAX's lowering runs it once more in the body).
//!
//! # Control flow and nesting
//! Higher-order primitives (`jit`, `cond`, `while`, `scan`) run their sub-jaxprs on an
//! explicit stack of frames, not by recursion, so arbitrarily deep nesting cannot
//! overflow the native stack (memory grows with the depth, one frame per level).
//!
//! # Limits
//! [`EvalOptions`] bounds the whole run, so a fuzzer can evaluate any well-typed jaxpr
//! without hanging or aborting on an allocation: the total number of loop iterations
//! (`while` bodies plus `scan` steps, nested ones included; 10^6 by default), the element
//! count of every array an equation produces (2^27), the bytes of all values alive at
//! once (1 GiB; a value is freed after its last use, found once per jaxpr, so a long
//! chain holds only what is still to be read) and the work in element operations (10^9;
//! `dot_general` costs M*N*K). Each is checked from the jaxpr's types before an equation
//! runs (or before a loop copies its operands), and exceeding one is an [`EvalError`]
//! naming the limit and the equation.

mod array;
mod bits;
mod conv;
mod igamma;
mod indexing;
mod linalg;
mod numeric;
mod ops;
mod random;
mod sorting;
mod special;
mod spmd;
mod windowed;

pub use array::{allclose, check_close, ArrayError, HostArray, HostData};
pub use numeric::{round_float, round_to_bf16, round_to_f16, wrap_int};

use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitValue, Literal, VarId};
use crate::primitive::{Builtin, Primitive};
use ops::internal;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

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
    /// More loop iterations (`while` bodies and `scan` steps, in total, nested loops
    /// included) than [`EvalOptions::max_loop_iterations`] allows.
    IterationLimit {
        /// The limit.
        limit: u64,
        /// The loop equation about to iterate once more.
        site: Box<EqnSite>,
    },
    /// An equation would produce an array with more elements than
    /// [`EvalOptions::max_array_elements`] allows.
    ArrayTooLarge {
        /// The array's type.
        aval: AbstractValue,
        /// The limit.
        limit: u64,
        /// The equation.
        site: Box<EqnSite>,
    },
    /// The values alive at once would take more bytes than
    /// [`EvalOptions::max_live_bytes`] allows (checked before they are made).
    MemoryLimit {
        /// The limit, in bytes.
        limit: u64,
        /// The bytes that would be alive.
        needed: u64,
        /// The equation that would make the values.
        site: Box<EqnSite>,
    },
    /// The evaluation would do more element operations than [`EvalOptions::max_work`]
    /// allows (checked before the equation runs).
    WorkLimit {
        /// The limit, in element operations.
        limit: u64,
        /// The work done so far plus the equation's.
        needed: u64,
        /// The equation.
        site: Box<EqnSite>,
    },
    /// A program the evaluator cannot run: a collective outside a `shard_map`, control
    /// flow in a `shard_map` body whose predicate or trip count differs between devices
    /// while it holds a collective, a `shard_map` nested in another.
    Unsupported {
        /// What cannot be run, and why.
        what: String,
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
            EvalError::Unsupported { what } => write!(f, "cannot evaluate {what}"),
            EvalError::IterationLimit { limit, site } => {
                write!(
                    f,
                    "more than {limit} loop iterations (the limit max_loop_iterations) at {site}"
                )
            }
            EvalError::ArrayTooLarge { aval, limit, site } => write!(
                f,
                "{site} would make an array of type {aval}, more than {limit} elements \
                 (the limit max_array_elements)"
            ),
            EvalError::MemoryLimit {
                limit,
                needed,
                site,
            } => write!(
                f,
                "{site} would need {needed} bytes alive at once, more than {limit} \
                 (the limit max_live_bytes)"
            ),
            EvalError::WorkLimit {
                limit,
                needed,
                site,
            } => write!(
                f,
                "{site} would bring the work to {needed} element operations, more than \
                 {limit} (the limit max_work)"
            ),
            EvalError::Internal { reason } => write!(f, "internal evaluator error: {reason}"),
        }
    }
}

impl std::error::Error for EvalError {}

/// Resource limits of an evaluation, each `None` for no limit. The defaults let a fuzzer
/// run any well-typed jaxpr: each limit is met in seconds (in a release build) and
/// within about 1 GiB of memory, and exceeding one is an [`EvalError`] naming the limit
/// and the equation, never an abort; every check happens before the values are made.
///
/// # Examples
/// ```
/// use ferrax_ir::eval::{eval_jaxpr_with, EvalError, EvalOptions, HostArray};
/// use ferrax_ir::{text::parse_jaxpr, DType, Shape};
/// // A 64x64 matmul is 64^3 = 262144 multiply-adds.
/// let j = parse_jaxpr(
///     "{ lambda ; a:f32[64,64]. let b:f32[64,64] = dot_general[\
///      dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] a a in (b,) }",
/// )?;
/// let x = HostArray::zeros(Shape::new(&[64, 64])?, DType::F32);
/// let tight = EvalOptions::default().with_max_work(Some(100_000));
/// match eval_jaxpr_with(&j, &[], &[x.clone()], &tight) {
///     Err(EvalError::WorkLimit { limit, needed, site }) => {
///         assert_eq!((limit, needed), (100_000, 262_144));
///         assert_eq!(site.primitive, "dot_general"); // refused before it ran
///     }
///     other => panic!("expected the work limit, got {other:?}"),
/// }
/// let out = eval_jaxpr_with(&j, &[], &[x], &EvalOptions::unlimited())?;
/// assert_eq!(out[0].as_f64().map(|v| v.len()), Some(64 * 64));
/// assert_eq!(
///     EvalOptions::default().max_loop_iterations,
///     Some(EvalOptions::DEFAULT_MAX_LOOP_ITERATIONS)
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalOptions {
    /// The most loop iterations (`while` bodies plus `scan` steps, over the whole
    /// evaluation, nested loops included) before [`EvalError::IterationLimit`].
    /// Default: [`EvalOptions::DEFAULT_MAX_LOOP_ITERATIONS`] (10^6).
    pub max_loop_iterations: Option<u64>,
    /// The most elements of any array an equation produces before
    /// [`EvalError::ArrayTooLarge`]. Default:
    /// [`EvalOptions::DEFAULT_MAX_ARRAY_ELEMENTS`] (2^27).
    pub max_array_elements: Option<u64>,
    /// The most bytes of values alive at once before [`EvalError::MemoryLimit`]: the
    /// arguments, every variable until its last use (each jaxpr's last uses are found
    /// once, so a long chain holds only what is still read), and what loops carry, in
    /// the evaluator's storage (8 bytes per number, 1 per `bool`). Default:
    /// [`EvalOptions::DEFAULT_MAX_LIVE_BYTES`] (1 GiB).
    pub max_live_bytes: Option<u64>,
    /// The most element operations before [`EvalError::WorkLimit`]: each equation costs
    /// the larger of its operands' and its outputs' element counts (at least 1),
    /// `dot_general` its output size times its contracted size (M*N*K for a matmul),
    /// `conv_general_dilated` its output size times the kernel's size over its output
    /// features, and each copy of operands into a sub-jaxpr their element count. Default:
    /// [`EvalOptions::DEFAULT_MAX_WORK`] (10^9).
    pub max_work: Option<u64>,
}

impl EvalOptions {
    /// The default loop iteration limit: 10^6.
    pub const DEFAULT_MAX_LOOP_ITERATIONS: u64 = 1_000_000;
    /// The default element limit: 2^27 elements (1 GiB of `f64`).
    pub const DEFAULT_MAX_ARRAY_ELEMENTS: u64 = 1 << 27;
    /// The default limit on bytes alive at once: 1 GiB.
    pub const DEFAULT_MAX_LIVE_BYTES: u64 = 1 << 30;
    /// The default work limit: 10^9 element operations.
    pub const DEFAULT_MAX_WORK: u64 = 1_000_000_000;

    /// No limits at all (an infinite loop then never returns).
    pub fn unlimited() -> EvalOptions {
        EvalOptions {
            max_loop_iterations: None,
            max_array_elements: None,
            max_live_bytes: None,
            max_work: None,
        }
    }

    /// These options with another loop iteration limit.
    pub fn with_max_loop_iterations(mut self, limit: Option<u64>) -> EvalOptions {
        self.max_loop_iterations = limit;
        self
    }

    /// These options with another element limit.
    pub fn with_max_array_elements(mut self, limit: Option<u64>) -> EvalOptions {
        self.max_array_elements = limit;
        self
    }

    /// These options with another limit on bytes alive at once.
    pub fn with_max_live_bytes(mut self, limit: Option<u64>) -> EvalOptions {
        self.max_live_bytes = limit;
        self
    }

    /// These options with another work limit.
    pub fn with_max_work(mut self, limit: Option<u64>) -> EvalOptions {
        self.max_work = limit;
        self
    }
}

impl Default for EvalOptions {
    fn default() -> EvalOptions {
        EvalOptions {
            max_loop_iterations: Some(EvalOptions::DEFAULT_MAX_LOOP_ITERATIONS),
            max_array_elements: Some(EvalOptions::DEFAULT_MAX_ARRAY_ELEMENTS),
            max_live_bytes: Some(EvalOptions::DEFAULT_MAX_LIVE_BYTES),
            max_work: Some(EvalOptions::DEFAULT_MAX_WORK),
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
///
/// # Examples
/// ```
/// use ferrax_ir::eval::{eval_closed_jaxpr, EvalError, HostArray};
/// use ferrax_ir::{text::parse_jaxpr, ClosedJaxpr, Const, DType, Shape};
/// use std::sync::Arc;
/// let j = Arc::new(parse_jaxpr("{ lambda a:f32[2]; b:f32[2]. let c:f32[2] = add a b in (c,) }")?);
/// let k = HostArray::from_f64(Shape::new(&[2])?, DType::F32, vec![10.0, 20.0])?;
/// let cj = ClosedJaxpr::new(j.clone(), vec![Const::host(k)])?;
/// let x = HostArray::from_f64(Shape::new(&[2])?, DType::F32, vec![1.0, 2.0])?;
/// let out = eval_closed_jaxpr(&cj, &[x.clone()])?;
/// assert_eq!(out[0].as_f64(), Some(&[11.0, 22.0][..]));
/// // A constant with no host value cannot be evaluated.
/// let unknown = ClosedJaxpr::with_unknown_consts(j);
/// assert!(matches!(
///     eval_closed_jaxpr(&unknown, &[x]),
///     Err(EvalError::MissingConstValue { .. })
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
    let mut meter = Meter {
        options,
        iterations: 0,
        work: 0,
        live: 0,
        liveness: HashMap::new(),
    };
    let root = Frame::new(jaxpr, consts, args.to_vec(), &mut meter)?;
    Machine {
        stack: vec![root],
        meter,
    }
    .run()
}

// ----- Resource accounting -----

/// The bytes a value of this type occupies in a [`HostArray`]: 1 per `bool` element, 8
/// per number (every integer is stored as `i64`, every float as `f64`).
fn aval_bytes(aval: &AbstractValue) -> u64 {
    let per = if aval.dtype == DType::Bool { 1 } else { 8 };
    elements(aval).saturating_mul(per)
}

/// The element count of a type (0 for a malformed negative size).
fn elements(aval: &AbstractValue) -> u64 {
    u64::try_from(aval.shape.size()).unwrap_or(0)
}

/// The bytes a [`HostArray`] occupies (as [`aval_bytes`]).
fn array_bytes(x: &HostArray) -> u64 {
    let per = if matches!(x.data, HostData::Bool(_)) {
        1
    } else {
        8
    };
    (x.data.len() as u64).saturating_mul(per)
}

fn arrays_bytes<'x>(xs: impl IntoIterator<Item = &'x HostArray>) -> u64 {
    xs.into_iter()
        .fold(0u64, |acc, x| acc.saturating_add(array_bytes(x)))
}

fn arrays_elements<'x>(xs: impl IntoIterator<Item = &'x HostArray>) -> u64 {
    xs.into_iter()
        .fold(0u64, |acc, x| acc.saturating_add(x.data.len() as u64))
}

/// A limit an operation would exceed (converted to an [`EvalError`] with the equation).
enum Exceeded {
    Iterations { limit: u64 },
    Memory { limit: u64, needed: u64 },
    Work { limit: u64, needed: u64 },
    Array { limit: u64, aval: AbstractValue },
}

impl Exceeded {
    fn at(self, site: EqnSite) -> EvalError {
        let site = Box::new(site);
        match self {
            Exceeded::Iterations { limit } => EvalError::IterationLimit { limit, site },
            Exceeded::Memory { limit, needed } => EvalError::MemoryLimit {
                limit,
                needed,
                site,
            },
            Exceeded::Work { limit, needed } => EvalError::WorkLimit {
                limit,
                needed,
                site,
            },
            Exceeded::Array { limit, aval } => EvalError::ArrayTooLarge { aval, limit, site },
        }
    }
}

/// Which variables each equation of a jaxpr reads for the last time (or defines without
/// any reader), so their values are freed as soon as the equation has run.
struct Liveness {
    /// Variables to free after equation `i`: `frees[starts[i]..starts[i + 1]]`.
    frees: Vec<VarId>,
    starts: Vec<usize>,
    /// Constvars and invars nothing reads: freed as soon as they are bound.
    at_entry: Vec<VarId>,
    /// Per outvar, whether no later outvar is the same variable (so the value can be
    /// moved out instead of copied).
    out_last: Vec<bool>,
}

impl Liveness {
    /// One forward pass over the equations, then a counting sort of the free points.
    fn of(j: &Jaxpr) -> Liveness {
        const KEPT: usize = usize::MAX;
        let n = j.num_vars();
        // The last equation reading each variable; KEPT for the jaxpr's outputs.
        let mut last: Vec<Option<usize>> = vec![None; n];
        for (i, e) in j.eqns().iter().enumerate() {
            for a in e.inputs() {
                if let Atom::Var(v) = a {
                    if let Some(slot) = last.get_mut(v.index()) {
                        *slot = Some(i);
                    }
                }
            }
        }
        let mut out_last = vec![true; j.outvars().len()];
        let mut seen = vec![false; n];
        for (k, a) in j.outvars().iter().enumerate().rev() {
            if let Atom::Var(v) = a {
                if let Some(slot) = last.get_mut(v.index()) {
                    *slot = Some(KEPT);
                }
                if let Some(s) = seen.get_mut(v.index()) {
                    out_last[k] = !*s;
                    *s = true;
                }
            }
        }
        let read_point = |v: VarId| last.get(v.index()).copied().flatten();
        let mut at_entry = Vec::new();
        for &v in j.constvars().iter().chain(j.invars()) {
            if read_point(v).is_none() {
                at_entry.push(v);
            }
        }
        // (equation, variable) pairs: after which equation each variable dies.
        let mut points: Vec<(usize, VarId)> = Vec::new();
        let defined = j.constvars().iter().chain(j.invars()).map(|&v| (None, v));
        let made = j
            .eqns()
            .iter()
            .enumerate()
            .flat_map(|(i, e)| e.outvars().iter().map(move |&v| (Some(i), v)));
        for (def, v) in defined.chain(made) {
            match (read_point(v), def) {
                (Some(KEPT), _) | (None, None) => {}
                (Some(i), _) => points.push((i, v)),
                (None, Some(i)) => points.push((i, v)),
            }
        }
        let m = j.eqns().len();
        let mut starts = vec![0usize; m + 1];
        for &(i, _) in &points {
            if i < m {
                starts[i + 1] += 1;
            }
        }
        for i in 0..m {
            starts[i + 1] += starts[i];
        }
        let mut fill = starts.clone();
        let mut frees = vec![VarId::from_index(0); starts[m]];
        for (i, v) in points {
            if i < m {
                frees[fill[i]] = v;
                fill[i] += 1;
            }
        }
        Liveness {
            frees,
            starts,
            at_entry,
            out_last,
        }
    }

    fn after(&self, eqn: usize) -> &[VarId] {
        match (self.starts.get(eqn), self.starts.get(eqn + 1)) {
            (Some(&a), Some(&b)) => self.frees.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// What one evaluation has used so far, against its [`EvalOptions`].
struct Meter<'o> {
    options: &'o EvalOptions,
    iterations: u64,
    work: u64,
    /// Bytes of every value held: variables bound in the frames' environments and the
    /// values loops keep between iterations.
    live: u64,
    /// Per jaxpr (by address; every jaxpr outlives the evaluation), its last uses.
    liveness: HashMap<*const Jaxpr, Rc<Liveness>>,
}

impl Meter<'_> {
    fn liveness(&mut self, j: &Jaxpr) -> Rc<Liveness> {
        Rc::clone(
            self.liveness
                .entry(j as *const Jaxpr)
                .or_insert_with(|| Rc::new(Liveness::of(j))),
        )
    }

    /// Admits new values of `bytes` bytes (checked against the bytes alive, not yet
    /// counted: they are when bound) and `work` element operations (counted now).
    fn admit(&mut self, bytes: u64, work: u64) -> Result<(), Exceeded> {
        if let Some(limit) = self.options.max_live_bytes {
            let needed = self.live.saturating_add(bytes);
            if needed > limit {
                return Err(Exceeded::Memory { limit, needed });
            }
        }
        let needed = self.work.saturating_add(work.max(1));
        if let Some(limit) = self.options.max_work {
            if needed > limit {
                return Err(Exceeded::Work { limit, needed });
            }
        }
        self.work = needed;
        Ok(())
    }

    /// Counts one loop iteration against the limit.
    fn tick(&mut self) -> Result<(), Exceeded> {
        self.iterations += 1;
        match self.options.max_loop_iterations {
            Some(limit) if self.iterations > limit => Err(Exceeded::Iterations { limit }),
            _ => Ok(()),
        }
    }

    fn hold(&mut self, bytes: u64) {
        self.live = self.live.saturating_add(bytes);
    }

    fn release(&mut self, bytes: u64) {
        self.live = self.live.saturating_sub(bytes);
    }
}

/// The element operations an equation costs, from its types: `dot_general` the output
/// size times the contracted size (M*N*K for a matmul), `conv_general_dilated` the
/// output size times the kernel's size per output feature, every other primitive the larger
/// of its operands' and its outputs' element counts, and at least 1. Higher-order
/// equations cost 1 here; their sub-jaxprs' equations and the copies of their operands
/// are counted as they run.
fn eqn_work(jaxpr: &Jaxpr, eqn: &Eqn) -> u64 {
    let aval_of = |a: &Atom| -> Option<AbstractValue> {
        match a {
            Atom::Var(v) => Some(jaxpr.var_aval(*v).clone()),
            Atom::Lit(_) => None,
        }
    };
    let outs = eqn.outvars().iter().fold(0u64, |acc, &v| {
        acc.saturating_add(elements(jaxpr.var_aval(v)))
    });
    match eqn.primitive() {
        Primitive::Builtin(b) if b.is_higher_order() => 1,
        // Every output element reads a whole window (the generic reducer runs once per
        // position, each run costing its equations).
        Primitive::Builtin(
            b @ (Builtin::ReduceWindowSum
            | Builtin::ReduceWindowMax
            | Builtin::ReduceWindowMin
            | Builtin::ReduceWindow
            | Builtin::SelectAndGatherAdd
            | Builtin::SelectAndScatterAdd),
        ) => {
            let rank = eqn
                .inputs()
                .first()
                .and_then(aval_of)
                .map_or(0, |a| a.shape.rank());
            let window = crate::primitive::Window::from_params(*b, eqn.params(), rank)
                .map_or(1, |w| w.size());
            let per = match eqn.params().get("jaxpr") {
                Some(crate::params::Param::Jaxpr(j)) => j.jaxpr().eqns().len() as u64 + 1,
                _ => 1,
            };
            let reads = match b {
                // One window per source element.
                Builtin::SelectAndScatterAdd => eqn
                    .inputs()
                    .first()
                    .and_then(aval_of)
                    .map_or(1, |a| elements(&a)),
                _ => outs,
            };
            reads
                .saturating_mul(window)
                .saturating_mul(per)
                .saturating_add(outs)
                .max(1)
        }
        Primitive::Builtin(Builtin::DotGeneral) => {
            let contracted = match (eqn.params().get("dimension_numbers"), eqn.inputs().first()) {
                (Some(crate::params::Param::DotDims(d)), Some(lhs)) => {
                    let dims = aval_of(lhs)
                        .map(|a| a.shape.dims().to_vec())
                        .unwrap_or_default();
                    d.lhs_contracting.iter().fold(1u64, |acc, &k| {
                        let size = usize::try_from(k)
                            .ok()
                            .and_then(|k| dims.get(k))
                            .map_or(1, |&n| u64::try_from(n).unwrap_or(0));
                        acc.saturating_mul(size)
                    })
                }
                _ => 1,
            };
            outs.saturating_mul(contracted.max(1)).max(1)
        }
        // Each output element sums (input features of its group) x (kernel window)
        // products: the kernel's size over its output features.
        Primitive::Builtin(Builtin::ConvGeneralDilated) => {
            let per_out = match (eqn.params().get("dimension_numbers"), eqn.inputs().get(1)) {
                (Some(crate::params::Param::ConvDims(d)), Some(rhs)) => aval_of(rhs)
                    .and_then(|a| {
                        let o = usize::try_from(*d.rhs_spec.first()?).ok()?;
                        let o = u64::try_from(*a.shape.dims().get(o)?).ok()?;
                        elements(&a).checked_div(o)
                    })
                    .unwrap_or(1),
                _ => 1,
            };
            outs.saturating_mul(per_out.max(1)).max(1)
        }
        _ => {
            let ins = eqn.inputs().iter().fold(0u64, |acc, a| {
                acc.saturating_add(aval_of(a).map_or(1, |x| elements(&x)))
            });
            ins.max(outs).max(1)
        }
    }
}

/// Checks an equation against the limits before it runs (from the jaxpr's types, so
/// nothing is allocated first): the element count of each output, the bytes alive once
/// its outputs exist, and the work it costs.
fn admit_eqn(jaxpr: &Jaxpr, eqn: &Eqn, meter: &mut Meter<'_>) -> Result<(), Exceeded> {
    let mut bytes = 0u64;
    for &v in eqn.outvars() {
        let aval = jaxpr.var_aval(v);
        if let Some(limit) = meter.options.max_array_elements {
            if elements(aval) > limit {
                return Err(Exceeded::Array {
                    limit,
                    aval: aval.clone(),
                });
            }
        }
        bytes = bytes.saturating_add(aval_bytes(aval));
    }
    meter.admit(bytes, eqn_work(jaxpr, eqn))
}

/// One jaxpr being evaluated: its environment and the next equation.
struct Frame<'a> {
    jaxpr: &'a Jaxpr,
    /// The value of each variable, by id; `None` until bound and after its last use.
    env: Vec<Option<HostArray>>,
    /// The next equation to run (or the higher-order one waiting for a child frame).
    pc: usize,
    /// Set while the equation at `pc` waits for the frame above this one.
    pending: Option<Pending<'a>>,
    liveness: Rc<Liveness>,
    /// Bytes of the values in `env`.
    bytes: u64,
    /// Bytes of the values `pending` holds.
    held: u64,
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
    /// The loop state (with a scalar predicate, empty while the body runs: the body frame
    /// holds it; with a batched one, kept for the lanes whose predicate is false).
    carry: Vec<HostArray>,
    /// A batched predicate's value on `carry` while the body runs.
    pred: Option<HostArray>,
    /// Whether the child frame is the body (else the condition).
    in_body: bool,
}

impl WhileState<'_> {
    fn bytes(&self) -> u64 {
        arrays_bytes(
            self.cond_consts
                .iter()
                .chain(&self.body_consts)
                .chain(&self.carry)
                .chain(&self.pred),
        )
    }
}

/// A batched `while` step (JAX's lowering): each carry takes the body's value `new`
/// where the predicate `pred` (of a shape prefixing the carry's) holds, and keeps
/// `old` elsewhere.
fn select_lanes(pred: &[bool], new: HostArray, old: &HostArray) -> R<HostArray> {
    let lanes = pred.len();
    if lanes == 0 || new.len() != old.len() || new.len() % lanes != 0 || new.dtype != old.dtype {
        return Err(internal(
            "a batched while's predicate does not fit its carry",
        ));
    }
    let inner = new.len() / lanes;
    fn pick<T: Copy>(pred: &[bool], inner: usize, new: &mut [T], old: &[T]) {
        for ((n, o), &p) in new
            .chunks_mut(inner.max(1))
            .zip(old.chunks(inner.max(1)))
            .zip(pred)
        {
            if !p {
                n.copy_from_slice(o);
            }
        }
    }
    let mut new = new;
    if inner > 0 {
        match (&mut new.data, &old.data) {
            (HostData::Bool(n), HostData::Bool(o)) => pick(pred, inner, n, o),
            (HostData::Int(n), HostData::Int(o)) => pick(pred, inner, n, o),
            (HostData::Float(n), HostData::Float(o)) => pick(pred, inner, n, o),
            _ => return Err(internal("a batched while's carry changed kind")),
        }
    }
    Ok(new)
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
    /// Bytes of `consts` and `xs`.
    fixed_bytes: u64,
    /// Bytes of `ys`.
    ys_bytes: u64,
}

impl ScanState<'_> {
    fn bytes(&self) -> u64 {
        self.fixed_bytes
            .saturating_add(self.ys_bytes)
            .saturating_add(arrays_bytes(&self.carry))
    }
}

/// Where a limit was exceeded: the equation about to run (or the loop about to iterate).
#[derive(Clone, Debug, PartialEq)]
pub struct EqnSite {
    /// How deep the jaxpr holding the equation is nested: 0 for the jaxpr evaluated,
    /// 1 for a sub-jaxpr of one of its equations, and so on.
    pub depth: usize,
    /// The equation's position in its jaxpr.
    pub index: usize,
    /// The equation's primitive.
    pub primitive: String,
    /// The types of the equation's outputs.
    pub outputs: Vec<AbstractValue>,
}

impl fmt::Display for EqnSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "equation {} (", self.index)?;
        for (i, a) in self.outputs.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{a}")?;
        }
        if !self.outputs.is_empty() {
            f.write_str(" = ")?;
        }
        write!(f, "{})", self.primitive)?;
        match self.depth {
            0 => Ok(()),
            d => write!(f, " of a sub-jaxpr nested {d} deep"),
        }
    }
}

impl<'a> Frame<'a> {
    /// A frame with its constvars and invars bound (their types are checked: a mismatch
    /// here is an internal error, the caller having checked user inputs already).
    fn new(
        jaxpr: &'a Jaxpr,
        consts: Vec<HostArray>,
        args: Vec<HostArray>,
        meter: &mut Meter<'_>,
    ) -> R<Frame<'a>> {
        let mut frame = Frame {
            jaxpr,
            env: vec![None; jaxpr.num_vars()],
            pc: 0,
            pending: None,
            liveness: meter.liveness(jaxpr),
            bytes: 0,
            held: 0,
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
            frame.bind(v, value, meter)?;
        }
        let liveness = Rc::clone(&frame.liveness);
        for &v in &liveness.at_entry {
            frame.free(v, meter);
        }
        Ok(frame)
    }

    /// A frame running a sub-jaxpr on these arguments.
    fn closed(cj: &'a ClosedJaxpr, args: Vec<HostArray>, meter: &mut Meter<'_>) -> R<Frame<'a>> {
        let consts = closed_consts(cj)?;
        Frame::new(cj.jaxpr(), consts, args, meter)
    }

    fn bind(&mut self, v: VarId, value: HostArray, meter: &mut Meter<'_>) -> R<()> {
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
        let added = array_bytes(&value);
        if let Some(old) = slot.replace(value) {
            let gone = array_bytes(&old);
            self.bytes = self.bytes.saturating_sub(gone);
            meter.release(gone);
        }
        self.bytes = self.bytes.saturating_add(added);
        meter.hold(added);
        Ok(())
    }

    /// Drops a variable's value (after its last use).
    fn free(&mut self, v: VarId, meter: &mut Meter<'_>) {
        if let Some(old) = self.env.get_mut(v.index()).and_then(Option::take) {
            let gone = array_bytes(&old);
            self.bytes = self.bytes.saturating_sub(gone);
            meter.release(gone);
        }
    }

    /// Records the bytes the pending equation's state now holds.
    fn set_held(&mut self, bytes: u64, meter: &mut Meter<'_>) {
        meter.release(self.held);
        meter.hold(bytes);
        self.held = bytes;
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

    /// Copies of the values of `atoms`, admitted against the limits before they are
    /// made.
    fn read_owned(&self, atoms: &[Atom], meter: &mut Meter<'_>, depth: usize) -> R<Vec<HostArray>> {
        let values = atoms.iter().map(|&a| self.read(a)).collect::<R<Vec<_>>>()?;
        let refs = values.iter().map(|c| c.as_ref());
        let (bytes, elems) = (arrays_bytes(refs.clone()), arrays_elements(refs));
        meter
            .admit(bytes, elems)
            .map_err(|ex| ex.at(self.site(depth)))?;
        Ok(values.into_iter().map(Cow::into_owned).collect())
    }

    /// Binds the outputs of the equation at `pc`, frees the values it read for the last
    /// time, and moves past it.
    fn finish_eqn(&mut self, outs: Vec<HostArray>, meter: &mut Meter<'_>) -> R<()> {
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
            self.bind(v, value, meter)?;
        }
        let liveness = Rc::clone(&self.liveness);
        for &v in liveness.after(self.pc) {
            self.free(v, meter);
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

    /// The equation at `pc`, for an error.
    fn site(&self, depth: usize) -> EqnSite {
        let eqn = self.jaxpr.eqns().get(self.pc);
        EqnSite {
            depth,
            index: self.pc,
            primitive: eqn.map_or_else(String::new, |e| e.primitive().name().to_owned()),
            outputs: eqn.map_or_else(Vec::new, |e| {
                e.outvars()
                    .iter()
                    .map(|&v| self.jaxpr.var_aval(v).clone())
                    .collect()
            }),
        }
    }

    /// The jaxpr's outputs, moved out of the environment (copied only when a variable is
    /// an output twice).
    fn take_outputs(&mut self, meter: &mut Meter<'_>) -> R<Vec<HostArray>> {
        let liveness = Rc::clone(&self.liveness);
        let outvars = self.jaxpr.outvars();
        let mut outs = Vec::with_capacity(outvars.len());
        for (k, &a) in outvars.iter().enumerate() {
            let last = liveness.out_last.get(k).copied().unwrap_or(false);
            match a {
                Atom::Var(v) if last => {
                    let value = self
                        .env
                        .get_mut(v.index())
                        .and_then(Option::take)
                        .ok_or_else(|| {
                            internal(format!("variable {v} is read before it is bound"))
                        })?;
                    let gone = array_bytes(&value);
                    self.bytes = self.bytes.saturating_sub(gone);
                    meter.release(gone);
                    outs.push(value);
                }
                _ => outs.push(self.read(a)?.into_owned()),
            }
        }
        Ok(outs)
    }
}

pub(super) fn literal_array(lit: &Literal) -> R<HostArray> {
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
    meter: Meter<'o>,
}

impl<'a> Machine<'a, '_> {
    fn run(mut self) -> R<Vec<HostArray>> {
        loop {
            let depth = self.stack.len().saturating_sub(1);
            let Some(top) = self.stack.last_mut() else {
                return Err(internal("empty frame stack"));
            };
            if top.pc == top.jaxpr.eqns().len() {
                let outs = top.take_outputs(&mut self.meter)?;
                if let Some(done) = self.stack.pop() {
                    self.meter.release(done.bytes.saturating_add(done.held));
                }
                let Some(parent) = self.stack.last_mut() else {
                    return Ok(outs);
                };
                let next = resume(parent, outs, &mut self.meter, depth.saturating_sub(1))?;
                self.stack.extend(next);
                continue;
            }
            let eqn = top.current()?;
            admit_eqn(top.jaxpr, eqn, &mut self.meter).map_err(|ex| ex.at(top.site(depth)))?;
            let next = match eqn.primitive() {
                Primitive::Extension(e) => {
                    return Err(EvalError::UnsupportedPrimitive {
                        name: e.name().to_owned(),
                    })
                }
                Primitive::Builtin(b) if b.is_higher_order() => {
                    start(top, *b, eqn, &mut self.meter, depth)?
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
                    top.finish_eqn(outs, &mut self.meter)?;
                    None
                }
            };
            self.stack.extend(next);
        }
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

/// Copies of `values`, admitted against the limits before they are made.
fn copies<'x>(
    values: impl IntoIterator<Item = &'x HostArray> + Clone,
    frame: &Frame<'_>,
    meter: &mut Meter<'_>,
    depth: usize,
) -> R<Vec<HostArray>> {
    let (bytes, elems) = (
        arrays_bytes(values.clone()),
        arrays_elements(values.clone()),
    );
    meter
        .admit(bytes, elems)
        .map_err(|ex| ex.at(frame.site(depth)))?;
    Ok(values.into_iter().cloned().collect())
}

/// Starts a higher-order equation: returns the child frame to run, or `None` if the
/// equation finished at once (a `scan` of length 0).
fn start<'a>(
    frame: &mut Frame<'a>,
    prim: Builtin,
    eqn: &'a Eqn,
    meter: &mut Meter<'_>,
    depth: usize,
) -> R<Option<Frame<'a>>> {
    let params = eqn.params();
    let ins = frame.read_owned(eqn.inputs(), meter, depth)?;
    match prim {
        Builtin::ShardMap => {
            let outs = spmd::eval_shard_map(eqn, ins, meter.options)?;
            frame.finish_eqn(outs, meter)?;
            Ok(None)
        }
        Builtin::Jit | Builtin::CustomJvpCall | Builtin::CustomVjpCall | Builtin::Remat => {
            let name = prim.call_jaxpr_param().unwrap_or("jaxpr");
            let child = Frame::closed(ops::param_jaxpr(params, name)?, ins, meter)?;
            frame.pending = Some(Pending::Call);
            Ok(Some(child))
        }
        Builtin::Cond => {
            let branches = ops::param_jaxprs(params, "branches")?;
            let (index, operands) = split_front(ins, 1)?;
            let k = branch_index(&index[0], branches.len())?;
            let child = Frame::closed(&branches[k], operands, meter)?;
            frame.pending = Some(Pending::Call);
            Ok(Some(child))
        }
        Builtin::While => {
            let cond = ops::param_jaxpr(params, "cond_jaxpr")?;
            let body = ops::param_jaxpr(params, "body_jaxpr")?;
            let (cond_consts, rest) = split_front(ins, ops::param_count(params, "cond_nconsts")?)?;
            let (body_consts, carry) =
                split_front(rest, ops::param_count(params, "body_nconsts")?)?;
            let st = WhileState {
                cond,
                body,
                cond_consts,
                body_consts,
                carry,
                pred: None,
                in_body: false,
            };
            frame.set_held(st.bytes(), meter);
            let args = copies(st.cond_consts.iter().chain(&st.carry), frame, meter, depth)?;
            let child = Frame::closed(cond, args, meter)?;
            frame.pending = Some(Pending::While(st));
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
            let fixed_bytes = arrays_bytes(consts.iter().chain(&xs));
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
                fixed_bytes,
                ys_bytes: 0,
            };
            frame.set_held(state.bytes(), meter);
            if length == 0 {
                let outs = state.finish(frame, meter, depth)?;
                frame.set_held(0, meter);
                frame.finish_eqn(outs, meter)?;
                return Ok(None);
            }
            meter.tick().map_err(|ex| ex.at(frame.site(depth)))?;
            let child = state.step_frame(frame, meter, depth)?;
            frame.set_held(state.bytes(), meter);
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
    meter: &mut Meter<'_>,
    depth: usize,
) -> R<Option<Frame<'a>>> {
    let pending = frame
        .pending
        .take()
        .ok_or_else(|| internal("a frame finished with no equation waiting for it"))?;
    match pending {
        Pending::Call => {
            frame.finish_eqn(outs, meter)?;
            Ok(None)
        }
        Pending::While(mut st) => {
            if st.in_body {
                st.carry = match st.pred.take() {
                    None => outs,
                    Some(pred) => {
                        let p = pred
                            .as_bool()
                            .ok_or_else(|| internal("while's cond_jaxpr did not return bools"))?;
                        if outs.len() != st.carry.len() {
                            return Err(internal("while's body returned the wrong carry count"));
                        }
                        let old = std::mem::take(&mut st.carry);
                        outs.into_iter()
                            .zip(&old)
                            .map(|(new, old)| select_lanes(p, new, old))
                            .collect::<R<Vec<_>>>()?
                    }
                };
                frame.set_held(st.bytes(), meter);
                let args = copies(st.cond_consts.iter().chain(&st.carry), frame, meter, depth)?;
                let child = Frame::closed(st.cond, args, meter)?;
                st.in_body = false;
                frame.pending = Some(Pending::While(st));
                return Ok(Some(child));
            }
            let mut outs = outs;
            let pred = match (outs.len(), outs.first()) {
                (1, Some(p)) if p.as_bool().is_some() => outs.remove(0),
                _ => return Err(internal("while's cond_jaxpr did not return one bool")),
            };
            // A batched predicate (JAX's vmap of a loop): the loop runs while any lane's
            // is true.
            let batched = pred.shape.rank() > 0;
            let go = pred.as_bool().is_some_and(|p| p.iter().any(|&b| b));
            if !go {
                frame.set_held(0, meter);
                frame.finish_eqn(st.carry, meter)?;
                return Ok(None);
            }
            meter.tick().map_err(|ex| ex.at(frame.site(depth)))?;
            let carry = if batched {
                // The old carry stays for the lanes whose predicate is false.
                st.pred = Some(pred);
                frame.set_held(st.bytes(), meter);
                copies(&st.carry, frame, meter, depth)?
            } else {
                let carry = std::mem::take(&mut st.carry);
                frame.set_held(st.bytes(), meter);
                carry
            };
            let mut args = copies(&st.body_consts, frame, meter, depth)?;
            args.extend(carry);
            let child = Frame::closed(st.body, args, meter)?;
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
            st.ys_bytes = st.ys_bytes.saturating_add(arrays_bytes(&ys));
            for (acc, y) in st.ys.iter_mut().zip(ys) {
                acc.push(y);
            }
            st.done += 1;
            frame.set_held(st.bytes(), meter);
            if st.done < st.length {
                meter.tick().map_err(|ex| ex.at(frame.site(depth)))?;
                let child = st.step_frame(frame, meter, depth)?;
                frame.set_held(st.bytes(), meter);
                frame.pending = Some(Pending::Scan(st));
                return Ok(Some(child));
            }
            let outs = st.finish(frame, meter, depth)?;
            frame.set_held(0, meter);
            frame.finish_eqn(outs, meter)?;
            Ok(None)
        }
    }
}

impl<'a> ScanState<'a> {
    /// The frame for the next step: consts, carry, and slice `i` of every `xs`, where
    /// `i` counts up from 0 or, for a reverse scan, down from `length - 1`.
    fn step_frame(
        &mut self,
        frame: &Frame<'_>,
        meter: &mut Meter<'_>,
        depth: usize,
    ) -> R<Frame<'a>> {
        let i = if self.reverse {
            self.length - 1 - self.done
        } else {
            self.done
        };
        let slice_bytes = self.xs.iter().fold(0u64, |acc, x| {
            acc.saturating_add(array_bytes(x) / self.length.max(1) as u64)
        });
        meter
            .admit(slice_bytes, slice_bytes)
            .map_err(|ex| ex.at(frame.site(depth)))?;
        let mut args = copies(&self.consts, frame, meter, depth)?;
        args.append(&mut self.carry);
        for x in &self.xs {
            args.push(ops::index_leading(x, i)?);
        }
        Frame::closed(self.body, args, meter)
    }

    /// The scan's outputs: the final carry, then every `ys` stacked along a new leading
    /// axis with the slice of step index `i` at position `i`.
    fn finish(
        mut self,
        frame: &Frame<'a>,
        meter: &mut Meter<'_>,
        depth: usize,
    ) -> R<Vec<HostArray>> {
        let eqn = frame.current()?;
        let y_vars = eqn.outvars().get(self.num_carry..).unwrap_or(&[]);
        let stacked: u64 = y_vars.iter().fold(0u64, |acc, &v| {
            acc.saturating_add(aval_bytes(frame.jaxpr.var_aval(v)))
        });
        meter
            .admit(stacked, stacked)
            .map_err(|ex| ex.at(frame.site(depth)))?;
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
