//! The jaxpr parser (placeholder until the full parser lands).

use crate::error::TypeError;
use crate::jaxpr::Jaxpr;
use crate::primitive::Registry;
use std::fmt;

/// A syntax error in jaxpr text, at a 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// What was expected and what was found.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Why text could not be read as a jaxpr: bad syntax, or a well-formed text whose jaxpr
/// is ill typed (unbound or doubly bound variables, declared types the rules disagree
/// with, unknown params, ...).
#[derive(Clone, Debug, PartialEq)]
pub enum ReadError {
    /// Bad syntax.
    Parse(ParseError),
    /// The jaxpr read is not well formed or well typed.
    Type(TypeError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Parse(e) => e.fmt(f),
            ReadError::Type(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads a jaxpr printed by [`crate::text::print_jaxpr`] or by JAX, using built-in
/// primitives only.
pub fn parse_jaxpr(text: &str) -> Result<Jaxpr, ReadError> {
    parse_jaxpr_with(text, &Registry::new())
}

/// Reads a jaxpr whose equations may use the extension primitives of `registry`.
pub fn parse_jaxpr_with(_text: &str, _registry: &Registry) -> Result<Jaxpr, ReadError> {
    Err(ReadError::Parse(ParseError {
        line: 1,
        column: 1,
        message: "the parser is not written yet".to_owned(),
    }))
}
