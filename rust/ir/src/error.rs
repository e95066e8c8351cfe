//! The error values of the typechecker and the builder.

use crate::aval::AbstractValue;
use crate::primitive::RuleError;
use std::fmt;

/// Where in a jaxpr an error is: the equation's index and its printed line (nested
/// jaxprs are shown as `{...}`), or a place outside the equations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Site {
    /// Equation `index`, printed as `line`.
    Eqn {
        /// Position in the jaxpr's equations.
        index: usize,
        /// The equation, printed on one line.
        line: String,
    },
    /// The jaxpr's constvars or invars.
    Binders,
    /// The jaxpr's outputs.
    Outputs,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Eqn { index, line } => write!(f, "eqn {index} '{line}'"),
            Site::Binders => f.write_str("binders"),
            Site::Outputs => f.write_str("outputs"),
        }
    }
}

/// Why a jaxpr is not well formed or not well typed.
///
/// [`std::error::Error::source`] chains to the cause: a primitive's [`RuleError`], or the
/// error inside a sub-jaxpr (whose message this one's also includes).
///
/// A [`Site::Eqn`] names the equation and its variables as the printed jaxpr text does
/// (an output nothing uses is `_`).
///
/// # Examples
/// ```
/// use ferrax_ir::{AbstractValue, Builtin, DType, JaxprBuilder, Params, Site, TypeError};
/// use std::error::Error as _;
/// // `sin a` declared with the wrong output type fails when the jaxpr is built.
/// let mut b = JaxprBuilder::new();
/// let a = b.add_invar(AbstractValue::array(DType::F32, &[3])?);
/// let out = b.new_var(AbstractValue::array(DType::F32, &[4])?);
/// b.add_eqn_with_outvars(Builtin::Sin.into(), vec![a.into()], Params::empty(), vec![out]);
/// let e = b.build(vec![out.into()]).unwrap_err();
/// let TypeError::OutTypes { site, .. } = &e else { panic!("{e:?}") };
/// assert_eq!(site, &Site::Eqn { index: 0, line: "b:f32[4] = sin a".into() });
/// assert_eq!(
///     e.to_string(),
///     "eqn 0 'b:f32[4] = sin a': declared output types (f32[4]) differ from the rule's (f32[3])"
/// );
/// // A rule's refusal chains to the primitive's `RuleError`.
/// let mut b = JaxprBuilder::new();
/// let x = b.add_invar(AbstractValue::array(DType::F32, &[3])?);
/// let i = b.add_invar(AbstractValue::array(DType::I32, &[3])?);
/// let e = b.apply(Builtin::Mul, [x, i], Params::empty()).unwrap_err();
/// assert!(matches!(e, TypeError::Rule { ref primitive, .. } if primitive == "mul"));
/// assert!(e.source().is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TypeError {
    /// A variable id outside the jaxpr's arena (an id from another jaxpr).
    VarOutOfRange {
        /// Where.
        site: Site,
        /// The id.
        var: u32,
        /// The arena's size.
        num_vars: usize,
    },
    /// A literal id outside the jaxpr's literal table.
    LiteralOutOfRange {
        /// Where.
        site: Site,
        /// The id.
        lit: u32,
    },
    /// A variable used before it is bound (or never bound).
    Unbound {
        /// Where.
        site: Site,
        /// The variable's printed name.
        var: String,
    },
    /// A variable bound twice.
    DoubleBinding {
        /// Where the second binding is.
        site: Site,
        /// The variable's printed name.
        var: String,
    },
    /// A literal whose value does not fit its dtype.
    BadLiteral {
        /// Where.
        site: Site,
        /// The literal, printed.
        literal: String,
    },
    /// The primitive's rule rejects the operands or params.
    Rule {
        /// Where.
        site: Site,
        /// The primitive's name.
        primitive: String,
        /// What the rule said.
        error: RuleError,
    },
    /// The declared output types differ from what the rule gives.
    OutTypes {
        /// Where.
        site: Site,
        /// Types the equation declares.
        declared: Vec<AbstractValue>,
        /// Types the rule gives.
        inferred: Vec<AbstractValue>,
    },
    /// The equations' dependencies form a cycle (toposort).
    Cycle {
        /// An equation on the cycle.
        site: Site,
    },
    /// An equation has another number of outputs than its caller asked for
    /// ([`crate::JaxprBuilder::apply`] asks for one).
    OutputCount {
        /// Where.
        site: Site,
        /// The primitive's name.
        primitive: String,
        /// The number asked for.
        expected: usize,
        /// The number the rule gives.
        got: usize,
    },
    /// A sub-jaxpr is ill typed.
    SubJaxpr {
        /// The equation holding it.
        site: Site,
        /// Its param name.
        param: String,
        /// The error inside.
        error: Box<TypeError>,
    },
}

fn list(avals: &[AbstractValue]) -> String {
    let v: Vec<String> = avals.iter().map(|a| a.to_string()).collect();
    format!("({})", v.join(", "))
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeError::VarOutOfRange {
                site,
                var,
                num_vars,
            } => write!(
                f,
                "{site}: variable id {var} is not one of this jaxpr's {num_vars} variables"
            ),
            TypeError::LiteralOutOfRange { site, lit } => {
                write!(f, "{site}: literal id {lit} is not one of this jaxpr's")
            }
            TypeError::Unbound { site, var } => {
                write!(f, "{site}: variable '{var}' is used before it is bound")
            }
            TypeError::DoubleBinding { site, var } => {
                write!(f, "{site}: variable '{var}' is bound twice")
            }
            TypeError::BadLiteral { site, literal } => {
                write!(f, "{site}: literal {literal} does not fit its dtype")
            }
            TypeError::Rule {
                site,
                primitive,
                error,
            } => write!(f, "{site}: {primitive} {error}"),
            TypeError::OutTypes {
                site,
                declared,
                inferred,
            } => write!(
                f,
                "{site}: declared output types {} differ from the rule's {}",
                list(declared),
                list(inferred)
            ),
            TypeError::Cycle { site } => {
                write!(f, "{site}: the equations' dependencies form a cycle")
            }
            TypeError::OutputCount {
                site,
                primitive,
                expected,
                got,
            } => write!(
                f,
                "{site}: {primitive} has {got} outputs here, not {expected}"
            ),
            TypeError::SubJaxpr { site, param, error } => {
                write!(f, "{site}: in param '{param}': {error}")
            }
        }
    }
}

impl std::error::Error for TypeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TypeError::Rule { error, .. } => Some(error),
            TypeError::SubJaxpr { error, .. } => Some(&**error),
            _ => None,
        }
    }
}
