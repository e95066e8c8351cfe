//! The exceptions of `ferrax._ir`, and the one place where the IR crate's error enums
//! become Python exceptions:
//!
//! - `TypeCheckError` (with `.eqn_index`): the crate's `TypeError` (also when
//!   `parse_jaxpr` finds it: `ReadError::Type`), `ShapeError` and `CloseError`, and bad
//!   values the bindings catch: a variable of another jaxpr, an unknown primitive or
//!   dtype, a literal outside its dtype, a param value of no param kind. An extension
//!   rule's exception becomes its `__cause__`.
//! - `ParseError` (with `.line`, `.column`): `ReadError::Parse`.
//! - `PassError`: the crate's `PassError`.
//! - `BuilderError`: a `JaxprBuilder` used after it built, or re-entered.
//! - `RewriteError` (with `.rules`): `passes::rewrite` found no fixpoint, or a rule's
//!   right side is ill typed; a rule that does not read is a `ParseError`.
//!
//! Arguments of the wrong Python type (a `str` where a `ShapedArray` is expected, ...)
//! raise Python's `TypeError`; an invalid `ExtensionPrimitive` name, `ValueError`.

use crate::primitives::take_rule_exception;
use ferrax_ir::aval::ShapeError;
use ferrax_ir::jaxpr::CloseError;
use ferrax_ir::passes::PassError as IrPassError;
use ferrax_ir::text::ReadError;
use ferrax_ir::{RuleError, Site, TypeError};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    ferrax._ir,
    FerraxError,
    PyException,
    "Base class of every error ferrax raises."
);
create_exception!(
    ferrax._ir,
    TypeCheckError,
    FerraxError,
    "A jaxpr, equation, type or value is not well formed or not well typed. `eqn_index` is \
     the index of the equation at fault when there is one (else None)."
);
create_exception!(
    ferrax._ir,
    ParseError,
    FerraxError,
    "Jaxpr text is not syntactically valid. `line` and `column` (1-based) say where."
);
create_exception!(
    ferrax._ir,
    LoweringError,
    FerraxError,
    "A jaxpr cannot be lowered to StableHLO."
);
create_exception!(
    ferrax._ir,
    PassError,
    FerraxError,
    "A pass was given arguments that do not fit its jaxpr (e.g. the wrong number of flags)."
);
create_exception!(
    ferrax._ir,
    RewriteError,
    FerraxError,
    "Rewriting did not finish: the rules still applied after the iteration bound (`rules` \
     names those firing in the last passes), or a rule's right side does not typecheck \
     where its left side matched."
);
create_exception!(
    ferrax._ir,
    BuilderError,
    FerraxError,
    "A JaxprBuilder was used after it built its jaxpr, or re-entered while in use."
);

/// Adds the exception classes to the module and gives `TypeCheckError` its class-level
/// default `eqn_index = None`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("FerraxError", py.get_type::<FerraxError>())?;
    let type_check = py.get_type::<TypeCheckError>();
    type_check.setattr("eqn_index", py.None())?;
    m.add("TypeCheckError", type_check)?;
    m.add("ParseError", py.get_type::<ParseError>())?;
    m.add("LoweringError", py.get_type::<LoweringError>())?;
    m.add("PassError", py.get_type::<PassError>())?;
    m.add("BuilderError", py.get_type::<BuilderError>())?;
    let rewrite = py.get_type::<RewriteError>();
    rewrite.setattr("rules", pyo3::types::PyList::empty(py))?;
    m.add("RewriteError", rewrite)?;
    Ok(())
}

/// Any error a binding can raise: one of the IR crate's, or an exception already made.
/// Binding functions return `Result<T, Error>`; `?` converts the crate's errors and
/// `PyErr` into it, and pyo3 turns it into the exception when it reaches Python.
pub enum Error {
    /// An ill-formed or ill-typed jaxpr.
    Type(TypeError),
    /// Unreadable jaxpr text.
    Read(ReadError),
    /// Bad arguments to a pass.
    Pass(IrPassError),
    /// An invalid shape.
    Shape(ShapeError),
    /// Constants that do not fit a jaxpr's constvars.
    Close(CloseError),
    /// An exception already made (pyo3's, or one of ours with its message).
    Py(PyErr),
}

/// `Result` of a binding.
pub type Result<T> = std::result::Result<T, Error>;

impl From<TypeError> for Error {
    fn from(e: TypeError) -> Error {
        Error::Type(e)
    }
}

impl From<ReadError> for Error {
    fn from(e: ReadError) -> Error {
        Error::Read(e)
    }
}

impl From<IrPassError> for Error {
    fn from(e: IrPassError) -> Error {
        Error::Pass(e)
    }
}

impl From<ShapeError> for Error {
    fn from(e: ShapeError) -> Error {
        Error::Shape(e)
    }
}

impl From<CloseError> for Error {
    fn from(e: CloseError) -> Error {
        Error::Close(e)
    }
}

impl From<ferrax_ir::lower::stablehlo::LowerError> for Error {
    fn from(e: ferrax_ir::lower::stablehlo::LowerError) -> Error {
        Error::Py(LoweringError::new_err(e.to_string()))
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Error {
        Error::Py(e)
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::Type(e) => Python::attach(|py| type_check_error(py, &e)),
            Error::Read(ReadError::Parse(e)) => Python::attach(|py| {
                let err = ParseError::new_err(e.to_string());
                let value = err.value(py);
                // Setting attributes on a fresh exception instance cannot fail in practice;
                // if it did, the exception would still carry its message.
                let _ = value.setattr("line", e.line);
                let _ = value.setattr("column", e.column);
                err
            }),
            Error::Read(ReadError::Type(e)) => Python::attach(|py| type_check_error(py, &e)),
            Error::Read(e) => TypeCheckError::new_err(e.to_string()),
            Error::Pass(e) => Python::attach(|py| pass_error(py, &e)),
            Error::Shape(e) => TypeCheckError::new_err(format!("invalid shape: {e}")),
            Error::Close(e) => TypeCheckError::new_err(e.to_string()),
            Error::Py(e) => e,
        }
    }
}

/// A `TypeCheckError` with the message of `e`, `.eqn_index` set to the index of the
/// top-level equation at fault, and, when an extension primitive's rule raised, that
/// exception as `__cause__`.
fn type_check_error(py: Python<'_>, e: &TypeError) -> PyErr {
    let err = TypeCheckError::new_err(e.to_string());
    if let Some(index) = eqn_index(e) {
        let _ = err.value(py).setattr("eqn_index", index);
    }
    if let Some(cause) = extension_message(e).and_then(take_rule_exception) {
        err.set_cause(py, Some(cause));
    }
    err
}

/// A `PassError` with the message of `e`, and, when an extension primitive's transpose
/// rule raised, that exception as `__cause__`.
fn pass_error(py: Python<'_>, e: &IrPassError) -> PyErr {
    let err = PassError::new_err(e.to_string());
    if let IrPassError::TransposeRule { message, .. } = e {
        if let Some(cause) = take_rule_exception(message) {
            err.set_cause(py, Some(cause));
        }
    }
    err
}

/// The message of the extension rule failure behind `e`, if that is what it is.
fn extension_message(mut e: &TypeError) -> Option<&str> {
    loop {
        match e {
            TypeError::Rule {
                error: RuleError::Extension { message },
                ..
            } => return Some(message),
            TypeError::SubJaxpr { error, .. } => e = error,
            _ => return None,
        }
    }
}

/// The index of the equation an error is at, if it is at one.
fn eqn_index(e: &TypeError) -> Option<usize> {
    let site = match e {
        TypeError::VarOutOfRange { site, .. }
        | TypeError::LiteralOutOfRange { site, .. }
        | TypeError::Unbound { site, .. }
        | TypeError::DoubleBinding { site, .. }
        | TypeError::BadLiteral { site, .. }
        | TypeError::Rule { site, .. }
        | TypeError::OutTypes { site, .. }
        | TypeError::OutputCount { site, .. }
        | TypeError::Cycle { site }
        | TypeError::SubJaxpr { site, .. } => site,
        #[allow(unreachable_patterns)] // Variants the crate may add later.
        _ => return None,
    };
    match site {
        Site::Eqn { index, .. } => Some(*index),
        _ => None,
    }
}

/// A `TypeCheckError` with this message (a bad value detected in the bindings).
pub fn type_check(message: impl Into<String>) -> Error {
    Error::Py(TypeCheckError::new_err(message.into()))
}

/// A `BuilderError` with this message.
pub fn builder(message: impl Into<String>) -> Error {
    Error::Py(BuilderError::new_err(message.into()))
}

/// A Python `ValueError` (an invalid mesh or partition spec).
pub fn value_error(message: impl Into<String>) -> Error {
    Error::Py(pyo3::exceptions::PyValueError::new_err(message.into()))
}
