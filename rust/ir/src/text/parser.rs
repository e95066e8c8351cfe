//! The jaxpr parser: reads what [`crate::text::print_jaxpr`] writes and what JAX prints.
//!
//! # Grammar
//! ```text
//! text    := ('let' WORD '=' jaxpr 'in')* jaxpr        -- JAX's shared jaxprs
//! jaxpr   := '{' 'lambda' binder* [';' binder*] '.' 'let' eqn* 'in' '(' atoms ')' '}'
//! binder  := NAME ':' type                 type := DTYPE '[' [INT (',' INT)*] ']'
//! eqn     := (binder+ '=' | '=' | ) PRIM ['[' (NAME '=' value)* ']'] atom* [';']
//! atom    := NAME | VALUE ':' type         -- a variable use or a scalar literal
//! value   := WORD | STRING | jaxpr | '(' values ')' | '[' values ']'
//!          | WORD '(' [NAME '=' value (',' NAME '=' value)*] ')'   -- a record
//! ```
//! Whitespace (newlines included) separates tokens and is otherwise insignificant, except
//! in two cases where JAX's text is ambiguous and line starts decide: an input list ends
//! at a word followed by `:` (the next equation's binders), unless the word is a literal
//! value (`1.0:f32[]`); the words `inf`, `nan`, `True` and `False` may be either, and at
//! the start of a line they are read as binders when binders and `=` follow (a long
//! equation's inputs wrap onto lines that may start with a literal), as a literal
//! otherwise. An equation with no outputs is written `prim ...` (as JAX and the printer
//! write it), recognised when the word starts a line, names a primitive and is not a
//! variable of the scope (or is followed by `[`); `= prim ...` is read too.
//!
//! Shared jaxprs (`let g = { ... } in`, as JAX prints a jaxpr held more than once) are
//! read once each and every use of the name holds that same jaxpr (the DAG is shared, not
//! copied). A definition may name ones defined after it (JAX prints them breadth-first):
//! the definitions are located first, and one is read where it is first needed, with the
//! jaxprs needing it set aside on an explicit stack. A name is a use of a shared jaxpr in
//! a param that takes a jaxpr (or that the primitive's schema does not know). Errors,
//! each a [`ParseError`] at the name: a name defined twice, an undefined name in a jaxpr
//! param, a shared jaxpr's name as the value of a param that takes no jaxpr (a string
//! param takes any word: `jit[name=g jaxpr=g]`), and a definition that uses itself.
//!
//! Names are identifiers `[A-Za-z_][A-Za-z0-9_]*`. The keywords `lambda`, `let` and `in`
//! are names too where a variable stands, as JAX names its 222nd variable `in`: a word
//! followed by `:` is a binder, and `in` ends an equation list when `(` follows it or
//! no variable `in` is bound (so `add a in` is an operand named `in` where one is bound,
//! and `in (in,)` the outputs). `_` (JAX's
//! dropped output) may be
//! bound any number of times, and a use of `_` means its latest binding. Each jaxpr is a
//! scope of its own: names may repeat across jaxprs and a nested jaxpr does not see the
//! variables of the jaxpr around it.
//!
//! Params are read as generic values, then converted by the primitive's schema
//! ([`Builtin::param_kind`]); a value that does not fit its kind, or a param the
//! primitive does not have, is converted by its syntax alone and left for the
//! typechecker (run by [`JaxprBuilder::build`]) to reject, so there is one place that
//! judges. Extension primitives' params are converted by syntax: `None`, `True`/`False`,
//! integers, floats (`inf`, `nan`), dtype names (`float32`), other words and quoted
//! strings (as strings), jaxprs, and tuples of ints, bools or jaxprs; a tuple of plain
//! words reads as the string of its text (`precision=(Precision.HIGHEST, Precision.HIGHEST)`).
//! A record (a name immediately followed by `(`, then `field=value` pairs) is one of
//! JAX's `GatherDimensionNumbers(offset_dims=(1,), ...)`, `ScatterDimensionNumbers(...)` or
//! `ConvDimensionNumbers(lhs_spec=(0, 1, 2), ...)`,
//! each field a tuple of ints, every field given once; gather's and scatter's `mode` is a
//! word `GatherScatterMode.CLIP` (or `FILL_OR_DROP`, `PROMISE_IN_BOUNDS`).
//! JAX hides `broadcast_in_dim`'s `shape` (the output type has it) and empty
//! `broadcast_dimensions`; they are filled in.
//!
//! # Errors
//! A syntax error anywhere in the text is a [`ParseError`] with its line and column, and
//! it wins over type errors: the first type error met (an unbound or doubly bound name,
//! a jaxpr the typechecker rejects) is kept aside while reading goes on to the end of the
//! text, and is returned as [`ReadError::Type`] only when the whole text is well formed.
//!
//! Float literals are rounded to their dtype (`1e-05:f32[]` reads as the f32 nearest to
//! 1e-05 and prints back as `9.999999747378752e-06:f32[]`, as JAX prints it); an integer
//! literal of a float dtype reads as that float.
//!
//! # Depth and cost
//! Nested jaxprs are parsed with an explicit stack of partially built scopes, never by
//! recursion, so any depth parses in constant stack. Param values nest tuples at most
//! [`MAX_VALUE_DEPTH`] deep. The lexer is streaming (two tokens of lookahead), and names
//! are resolved through one hash map per scope.

use super::lexer::{unquote, Kind, Lexer, Tok};
use crate::aval::{AbstractValue, Shape};
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::error::{Site, TypeError};
use crate::fxhash::FxBuild;
use crate::jaxpr::{Atom, AvalId, ClosedJaxpr, Jaxpr, LitValue, Literal, VarId};
use crate::params::{
    ConvDimensionNumbers, DotDimensionNumbers, GatherDimensionNumbers, GatherScatterMode, Opaque,
    Param, Params, ScatterDimensionNumbers,
};
use crate::primitive::{Builtin, ParamKind, Primitive, Registry};
use crate::sharding::{Mesh, PartitionSpec};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

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
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ParseError {}

/// Why text could not be read as a jaxpr: bad syntax, or a well-formed text whose jaxpr
/// is ill typed (unbound or doubly bound variables, declared types the rules disagree
/// with, unknown params, ...).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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

/// Transparent: the message is the inner error's, and so is the source.
impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Parse(e) => e.source(),
            ReadError::Type(e) => e.source(),
        }
    }
}

impl From<ParseError> for ReadError {
    fn from(e: ParseError) -> ReadError {
        ReadError::Parse(e)
    }
}

impl From<TypeError> for ReadError {
    fn from(e: TypeError) -> ReadError {
        ReadError::Type(e)
    }
}

/// Reads a jaxpr printed by [`crate::text::print_jaxpr`] or by JAX, using built-in
/// primitives only.
///
/// # Examples
/// ```
/// use ferrax_ir::text::{parse_jaxpr, ReadError};
/// // JAX's layout or any other: equations on lines or separated by `;`.
/// let j = parse_jaxpr(
///     "{ lambda ; a:f32[3]. let
///         b:f32[3] = exp a
///       in (b,) }",
/// )?;
/// assert_eq!(j.to_string(), "{ lambda ; a:f32[3]. let b:f32[3] = exp a in (b,) }");
/// // Bad syntax is a `ParseError` at a line and column ...
/// let Err(ReadError::Parse(e)) = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = exp a in (b,)") else {
///     panic!("expected a syntax error")
/// };
/// assert_eq!(e.line, 1);
/// // ... and text that reads but is ill typed a `TypeError`, naming the equation.
/// let Err(ReadError::Type(e)) = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[4] = exp a in (b,) }") else {
///     panic!("expected a type error")
/// };
/// assert!(e.to_string().starts_with("eqn 0 'b:f32[4] = exp a'"), "{e}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn parse_jaxpr(text: &str) -> Result<Jaxpr, ReadError> {
    parse_jaxpr_with(text, &Registry::new())
}

/// Reads a jaxpr whose equations may use the extension primitives of `registry`.
pub fn parse_jaxpr_with(text: &str, registry: &Registry) -> Result<Jaxpr, ReadError> {
    let j = Parser::new(text, registry).run()?;
    // Nested jaxprs are read before the shard_map that binds their axes, so they were
    // checked without its mesh; check them again with it. The environment stays open, so
    // that a shard_map body printed by itself (collectives at its top level) reads back;
    // `typecheck` reports axes no shard_map binds.
    if uses_named_axes(&j) {
        crate::typecheck::typecheck_in(&j, &crate::sharding::AxisEnv::open())
            .map_err(ReadError::Type)?;
    }
    Ok(j)
}

/// True when a collective or a shard_map appears anywhere in the jaxpr.
fn uses_named_axes(j: &Jaxpr) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut work = vec![j];
    while let Some(j) = work.pop() {
        for e in j.eqns() {
            if let Primitive::Builtin(b) = e.primitive() {
                if b.is_collective() || *b == Builtin::ShardMap {
                    return true;
                }
            }
            for (_, p) in e.params().iter() {
                let subs: &[ClosedJaxpr] = match p {
                    Param::Jaxpr(cj) => std::slice::from_ref(cj),
                    Param::Jaxprs(cjs) => cjs,
                    _ => continue,
                };
                for sub in subs {
                    if seen.insert(Arc::as_ptr(sub.jaxpr())) {
                        work.push(sub.jaxpr());
                    }
                }
            }
        }
    }
    false
}

/// Tuples in a param value nest at most this deep.
pub const MAX_VALUE_DEPTH: usize = 16;
/// The most fields a record param value may have (JAX's have five); keeps the check for
/// repeated fields cheap on hostile input.
const MAX_RECORD_FIELDS: usize = 64;

/// A type error inside nested jaxprs is wrapped in [`TypeError::SubJaxpr`] for at most
/// this many enclosing jaxprs (the outermost ones).
pub const MAX_ERROR_NESTING: usize = 32;

/// Longest source line quoted in an equation's [`Site`].
const MAX_SITE_CHARS: usize = 200;

// ---------------------------------------------------------------------------------------
// Word classification, shared with the printer.

fn is_int_word(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
}

fn is_float_word(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    if d == "inf" || d == "nan" {
        return true;
    }
    let b = d.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if digits(&mut i) == 0 {
        return false;
    }
    let mut floaty = false;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        floaty = true;
        digits(&mut i);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        floaty = true;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    floaty && i == b.len()
}

/// True for words that read as numbers: `1`, `-3`, `2.0`, `1e-05`, `inf`, `-inf`, `nan`.
pub(crate) fn is_number_word(s: &str) -> bool {
    is_int_word(s) || is_float_word(s)
}

fn is_literal_word(s: &str) -> bool {
    s == "True" || s == "False" || is_number_word(s)
}

/// `np.int64`, `np.float32`, ...: how JAX prints a NumPy scalar's type in a param.
fn is_numpy_scalar_type(s: &str) -> bool {
    s.strip_prefix("np.").is_some_and(|d| {
        matches!(
            d,
            "int8"
                | "int16"
                | "int32"
                | "int64"
                | "uint8"
                | "uint16"
                | "uint32"
                | "uint64"
                | "float16"
                | "float32"
                | "float64"
        )
    })
}

/// The words of the jaxpr syntax (variable names too, where a variable stands).
const KEYWORDS: [&str; 3] = ["lambda", "let", "in"];

fn is_keyword(s: &str) -> bool {
    KEYWORDS.contains(&s)
}

fn is_ident(s: &str) -> bool {
    let b = s.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return false,
    }
    b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn parse_float_word(s: &str) -> f64 {
    let (neg, d) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let v = match d {
        "inf" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => d.parse::<f64>().unwrap_or(f64::NAN),
    };
    if neg {
        -v
    } else {
        v
    }
}

/// A dtype from its short name (fast path) or any name [`DType::from_name`] reads.
#[inline]
fn dtype_of(s: &str) -> Option<DType> {
    match s {
        "f32" => Some(DType::F32),
        "i32" => Some(DType::I32),
        "bool" => Some(DType::Bool),
        "f64" => Some(DType::F64),
        "i64" => Some(DType::I64),
        _ => DType::from_name(s),
    }
}

/// A hasher for keys that are already well-distributed `u64`s (packed names).
#[derive(Default)]
struct U64Hasher(u64);

impl Hasher for U64Hasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// The variables of one scope by name. The printer's (and JAX's) names, `a` to `z`, `ba`
/// and on (see [`crate::text::alphabetic_name`]), are numbers in base 26: those go in a
/// table indexed by the number, grown as bindings come (sequential names stay
/// sequential in memory, and no hashing). Other names of up to 8 bytes are packed into a
/// `u64` key (identifiers have no NUL byte, so packing is one-to-one); longer ones go by
/// string. A canonical name whose number is far beyond the table (more than twice its
/// length) goes in the packed map, so a lookup that misses the table tries the maps too.
#[derive(Default)]
struct Names<'a> {
    dense: Vec<u32>,
    short: HashMap<u64, VarId, BuildHasherDefault<U64Hasher>>,
    long: HashMap<&'a str, VarId, FxBuild>,
}

/// No variable in [`Names::dense`].
const UNBOUND: u32 = u32::MAX;

#[inline]
fn pack(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() > 8 {
        return None;
    }
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    Some(u64::from_le_bytes(w))
}

/// The number of a name [`crate::text::alphabetic_name`] writes (lowercase letters, no
/// leading `a` but in `a` itself), if it is one, of at most 6 letters.
#[inline]
fn alphabetic_index(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 6 || (b.len() > 1 && b[0] == b'a') {
        return None;
    }
    let mut n = 0usize;
    for &c in b {
        if !c.is_ascii_lowercase() {
            return None;
        }
        n = n * 26 + usize::from(c - b'a');
    }
    Some(n)
}

impl<'a> Names<'a> {
    #[inline]
    fn get(&self, name: &str) -> Option<VarId> {
        if let Some(n) = alphabetic_index(name) {
            match self.dense.get(n) {
                Some(&v) if v != UNBOUND => return Some(VarId::from_index(v as usize)),
                _ if self.short.is_empty() => return None,
                _ => {}
            }
        }
        self.get_hashed(name)
    }

    #[inline]
    fn get_hashed(&self, name: &str) -> Option<VarId> {
        match pack(name) {
            Some(k) => {
                if self.short.is_empty() {
                    return None;
                }
                self.short.get(&k).copied()
            }
            None => self.long.get(name).copied(),
        }
    }

    #[inline]
    fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Binds `name`; false (changing nothing) when it is already bound.
    #[inline]
    fn insert_new(&mut self, name: &'a str, v: VarId) -> bool {
        if let Some(n) = alphabetic_index(name).filter(|_| v.index() < UNBOUND as usize) {
            if n < self.dense.len() {
                if self.dense[n] != UNBOUND || self.get_hashed(name).is_some() {
                    return false;
                }
                self.dense[n] = v.index() as u32;
                return true;
            }
            if n <= 2 * self.dense.len() + 64 {
                if self.get_hashed(name).is_some() {
                    return false;
                }
                self.dense.resize(n + 1, UNBOUND);
                self.dense[n] = v.index() as u32;
                return true;
            }
        }
        match pack(name) {
            Some(k) => match self.short.entry(k) {
                Entry::Vacant(e) => {
                    e.insert(v);
                    true
                }
                Entry::Occupied(_) => false,
            },
            None => match self.long.entry(name) {
                Entry::Vacant(e) => {
                    e.insert(v);
                    true
                }
                Entry::Occupied(_) => false,
            },
        }
    }
}

// ---------------------------------------------------------------------------------------
// Parser state.

/// A param value as written, before conversion.
enum Val<'a> {
    Word(Tok<'a>),
    Str(String),
    Jaxpr(ClosedJaxpr),
    Seq {
        items: Vec<Val<'a>>,
        bracket: bool,
        open: Tok<'a>,
    },
    /// `Name(field=value, ...)`: a Python record as JAX prints it
    /// (`GatherDimensionNumbers(offset_dims=(1,), ...)`).
    Record {
        name: Tok<'a>,
        fields: Vec<(Tok<'a>, Val<'a>)>,
        /// The record's source text, name to `)` (an opaque param's name).
        text: &'a str,
    },
    /// A value of a syntax of its own, read whole: `Mesh(...)`, `P(...)`,
    /// `frozenset({...})`.
    Param(Param),
}

/// An open `(` or `[` in a param value, or the `(` of a record.
struct Container<'a> {
    open: Tok<'a>,
    items: Vec<Val<'a>>,
    bracket: bool,
    after_comma: bool,
    /// For a record: its name, the field names read so far (one per item) and the field
    /// whose value comes next.
    record: Option<Tok<'a>>,
    field_names: Vec<Tok<'a>>,
    pending_field: Option<Tok<'a>>,
}

/// An equation's output variables (most have one).
type OutVars<'a> = smallvec::SmallVec<[(VarId, Tok<'a>); 1]>;

/// The equation being read.
struct PendingEqn<'a> {
    prim: Primitive,
    builtin: Option<Builtin>,
    outvars: OutVars<'a>,
    params: Vec<(&'a str, Param)>,
    /// Reading params (between `[` and `]`).
    in_params: bool,
    /// The param whose value is being read.
    current: Option<Tok<'a>>,
    containers: Vec<Container<'a>>,
    /// The value tokens of the current param written `np.int64(n)`, with their dtypes.
    numpy_toks: Vec<(usize, DType)>,
    /// `(param, index, dtype)` for the params read so far (see [`Params::with_numpy_ints`]).
    numpy_ints: Vec<(&'a str, usize, DType)>,
}

/// A jaxpr being read.
#[derive(Default)]
struct Scope<'a> {
    b: JaxprBuilder,
    names: Names<'a>,
    /// The types read most recently, by their text (see [`Parser::cached_type`]).
    types: Vec<CachedType<'a>>,
    /// The literal types read most recently, by their text, with their dtypes.
    lit_types: Vec<(&'a str, DType)>,
    underscore: Option<VarId>,
    header_done: bool,
    eqn: Option<PendingEqn<'a>>,
    eqn_index: usize,
    eqn_start: usize,
}

/// A type read before: its text (`f32[3,4]`) and its interned id in the scope's builder.
#[derive(Clone, Copy)]
struct CachedType<'a> {
    text: &'a str,
    id: AvalId,
}

/// How many types [`Scope::types`] remembers.
const TYPE_CACHE: usize = 8;

/// Why [`Parser::params`] stopped.
enum ParamStop<'a> {
    /// At `]`.
    Done,
    /// At a nested jaxpr's `{`.
    Open,
    /// At a word naming a shared jaxpr not read yet.
    Need(Tok<'a>),
}

enum Step<'a> {
    /// A `{` was read in a param value: start a nested jaxpr.
    Open,
    /// A param value names a shared jaxpr defined later in the text (this word): read
    /// that one first, then come back to this word.
    Need(Tok<'a>),
    /// The jaxpr of the top scope is complete.
    Close(Jaxpr),
}

/// Where a `let` definition's jaxpr is and whether it has been read.
struct LetDef<'a> {
    name: Tok<'a>,
    /// The lexer just after the definition's `{`, and just after its `}`.
    body: Lexer<'a>,
    end: Lexer<'a>,
    state: LetState,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LetState {
    Pending,
    Building,
    Built,
}

/// A jaxpr whose reading waits for a shared jaxpr it names (defined later in the text).
struct Suspended<'a> {
    lx: Lexer<'a>,
    cur: Tok<'a>,
    nxt: Tok<'a>,
    scopes: Vec<Scope<'a>>,
    /// The shared jaxpr being read meanwhile.
    name: &'a str,
}

struct Parser<'a, 'r> {
    lx: Lexer<'a>,
    cur: Tok<'a>,
    nxt: Tok<'a>,
    registry: &'r Registry,
    scopes: Vec<Scope<'a>>,
    shared: HashMap<&'a str, ClosedJaxpr>,
    /// Every `let` definition of the text (found before reading), by name.
    lets: HashMap<&'a str, LetDef<'a>>,
    suspended: Vec<Suspended<'a>>,
    /// Reused for the inputs of each equation.
    inputs: Vec<Atom>,
    /// The first type error met (wrapped in the sites of its enclosing jaxprs). Reading
    /// goes on to the end of the text, so that a syntax error anywhere is reported
    /// instead: text that does not parse never reaches the typechecker's verdict.
    deferred: Option<TypeError>,
}

fn perr(t: &Tok<'_>, message: String) -> ReadError {
    ReadError::Parse(ParseError {
        line: t.line,
        column: t.col,
        message,
    })
}

fn expected(t: &Tok<'_>, what: &str) -> ReadError {
    perr(t, format!("expected {what}, found {}", t.describe()))
}

impl<'a, 'r> Parser<'a, 'r> {
    fn new(text: &'a str, registry: &'r Registry) -> Parser<'a, 'r> {
        let mut lx = Lexer::new(text);
        let cur = lx.next_token();
        let nxt = lx.next_token();
        Parser {
            lx,
            cur,
            nxt,
            registry,
            scopes: Vec::new(),
            shared: HashMap::new(),
            lets: HashMap::new(),
            suspended: Vec::new(),
            inputs: Vec::new(),
            deferred: None,
        }
    }

    #[inline]
    fn bump(&mut self) {
        self.cur = self.nxt;
        self.nxt = self.lx.next_token();
    }

    /// A value word that opens more `<` than it closes (`<function f at 0xXXXX>`, as JAX
    /// prints a Python function as a param) runs on over the following words of its line
    /// until its angle brackets balance: the span is one word. Leaves `cur` on its last
    /// word.
    fn angle_span(&mut self, t: Tok<'a>) -> Tok<'a> {
        let mut depth = angle_depth(t.text);
        if !t.text.starts_with('<') || depth <= 0 {
            return t;
        }
        let mut end = t.start + t.text.len();
        while depth > 0 && self.nxt.kind == Kind::Word && !self.nxt.line_start {
            self.bump();
            depth += angle_depth(self.cur.text);
            end = self.cur.start + self.cur.text.len();
        }
        match self.lx.source().get(t.start..end) {
            Some(text) => Tok { text, ..t },
            None => t,
        }
    }

    /// The word `t` and the parenthesized text after it, up to the `)` that balances
    /// its `(` (any tokens inside, braces included), as one word. Leaves `cur` on the
    /// closing `)`.
    fn balanced_span(&mut self, t: Tok<'a>) -> Result<Tok<'a>, ReadError> {
        let mut depth = 0usize;
        loop {
            self.bump();
            let c = self.cur;
            match c.kind {
                Kind::LParen | Kind::LBracket | Kind::LBrace => depth += 1,
                Kind::RParen | Kind::RBracket | Kind::RBrace => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                Kind::Eof => return Err(expected(&c, "')' closing the PyTreeDef")),
                _ => {}
            }
        }
        let end = self.cur.start + self.cur.text.len();
        Ok(match self.lx.source().get(t.start..end) {
            Some(text) => Tok { text, ..t },
            None => t,
        })
    }

    /// The `(` at `t` and the text after it up to the `)` that balances it, as one
    /// word. Leaves `cur` on the closing `)`.
    fn paren_span(&mut self, t: Tok<'a>) -> Result<Tok<'a>, ReadError> {
        let mut depth = 1usize;
        loop {
            self.bump();
            let c = self.cur;
            match c.kind {
                Kind::LParen | Kind::LBracket | Kind::LBrace => depth += 1,
                Kind::RParen | Kind::RBracket | Kind::RBrace => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                Kind::Eof => return Err(expected(&c, "')' closing the tuple")),
                _ => {}
            }
        }
        let end = self.cur.start + self.cur.text.len();
        Ok(match self.lx.source().get(t.start..end) {
            Some(text) => Tok { text, ..t },
            None => t,
        })
    }

    /// `debug_print`'s format string as JAX prints it, unquoted (`fmt=x={x}`,
    /// `fmt=y {} {}`): the text after the `=` at `eq` up to the next param,
    /// `has_placeholders=` after a space (JAX prints params sorted by name), trimmed.
    /// Leaves `cur` on that param's name.
    fn raw_fmt(&mut self, eq: &Tok<'a>) -> Result<String, ReadError> {
        const NEXT: &str = "has_placeholders=";
        let source = self.lx.source();
        let start = (eq.start + 1).min(source.len());
        let rest = source.get(start..).unwrap_or("");
        let mut from = 0;
        let end = loop {
            let Some(i) = rest.get(from..).and_then(|r| r.find(NEXT)) else {
                return Err(perr(
                    eq,
                    "debug_print's fmt must be followed by has_placeholders=".to_owned(),
                ));
            };
            let at = from + i;
            if at > 0 && rest.as_bytes()[at - 1].is_ascii_whitespace() {
                break start + at;
            }
            from = at + NEXT.len();
        };
        let text = source.get(start..end).unwrap_or("").trim();
        let mut lx = Lexer::after(source, eq);
        lx.skip_raw_to(end);
        self.seek(lx);
        Ok(text.to_owned())
    }

    fn expect(&mut self, kind: Kind, what: &str) -> Result<Tok<'a>, ReadError> {
        if self.cur.kind == kind {
            let t = self.cur;
            self.bump();
            Ok(t)
        } else {
            Err(expected(&self.cur, what))
        }
    }

    fn expect_word(&mut self, word: &str, what: &str) -> Result<(), ReadError> {
        if self.cur.is_word(word) {
            self.bump();
            Ok(())
        } else {
            Err(expected(&self.cur, what))
        }
    }

    /// Positions the parser just after where `lx` is.
    fn seek(&mut self, lx: Lexer<'a>) {
        self.lx = lx;
        self.cur = self.lx.next_token();
        self.nxt = self.lx.next_token();
    }

    /// Finds the `let name = { ... } in` definitions at the start of the text (their
    /// jaxprs may name ones defined after them, as JAX prints them in breadth-first
    /// order). Stops quietly at anything else: reading reports it in its place.
    fn prescan(&mut self) {
        let mut lx = Lexer::new(self.lx.source());
        loop {
            if !lx.next_token().is_word("let") {
                return;
            }
            let name = lx.next_token();
            if name.kind != Kind::Word
                || lx.next_token().kind != Kind::Eq
                || lx.next_token().kind != Kind::LBrace
            {
                return;
            }
            let body = lx.clone();
            let mut depth = 1usize;
            while depth > 0 {
                match lx.next_token().kind {
                    Kind::LBrace => depth += 1,
                    Kind::RBrace => depth -= 1,
                    Kind::Eof | Kind::Bad(_) => return,
                    _ => {}
                }
            }
            let end = lx.clone();
            self.lets.entry(name.text).or_insert(LetDef {
                name,
                body,
                end,
                state: LetState::Pending,
            });
            if !lx.next_token().is_word("in") {
                return;
            }
        }
    }

    fn run(mut self) -> Result<Jaxpr, ReadError> {
        // JAX prints jaxprs used more than once first: `let name = { ... } in`.
        self.prescan();
        while self.cur.is_word("let") && self.nxt.kind == Kind::Word {
            self.bump();
            let name = self.cur;
            self.bump();
            self.expect(Kind::Eq, "'=' after the name of a shared jaxpr")?;
            self.expect(Kind::LBrace, "'{' (a jaxpr)")?;
            let (state, end) = match self.lets.get(name.text) {
                Some(d) if d.name.start != name.start => {
                    return Err(perr(
                        &name,
                        format!(
                            "shared jaxpr '{}' is defined twice (first on line {}, column {})",
                            name.text, d.name.line, d.name.col
                        ),
                    ))
                }
                Some(d) => (d.state, Some(d.end.clone())),
                None => (LetState::Pending, None),
            };
            match (state, end) {
                // Read already, where an earlier jaxpr named it.
                (LetState::Built, Some(end)) => self.seek(end),
                _ => {
                    let body = self.lx.clone();
                    self.lets.insert(
                        name.text,
                        LetDef {
                            name,
                            end: body.clone(),
                            body,
                            state: LetState::Building,
                        },
                    );
                    let j = self.parse_nested_root()?;
                    let cj = ClosedJaxpr::with_unknown_consts(Arc::new(j));
                    self.shared.insert(name.text, cj);
                    if let Some(d) = self.lets.get_mut(name.text) {
                        d.state = LetState::Built;
                    }
                }
            }
            self.expect_word("in", "'in' after a shared jaxpr")?;
        }
        self.expect(Kind::LBrace, "'{' (the start of a jaxpr)")?;
        let j = self.parse_nested_root()?;
        if self.cur.kind != Kind::Eof {
            return Err(expected(&self.cur, "the end of the input after the jaxpr"));
        }
        // The whole text is well formed: now the first type error, if any, counts.
        match self.deferred.take() {
            Some(te) => Err(ReadError::Type(te)),
            None => Ok(j),
        }
    }

    /// Reads one jaxpr whose `{` was consumed, with everything nested in it, and the
    /// shared jaxprs it names that are defined after it (each read once, where first
    /// needed, with the reading of the jaxprs that need it set aside meanwhile).
    fn parse_nested_root(&mut self) -> Result<Jaxpr, ReadError> {
        self.scopes.clear();
        let mut root = Scope::default();
        let src = self.lx.source();
        if self.lets.is_empty() && src.len() > 1 << 16 {
            // A large text of one jaxpr: about an equation a line (JAX's layout and the
            // printer's), so the builder's equations and variables are not regrown.
            let lines = src.bytes().filter(|&b| b == b'\n').count();
            root.b.reserve(lines, lines);
        }
        self.scopes.push(root);
        let base = self.suspended.len();
        loop {
            let step = match self.step() {
                Ok(s) => s,
                Err(e) => {
                    let e = self.fail(e);
                    self.suspended.truncate(base);
                    return Err(e);
                }
            };
            match step {
                Step::Open => self.scopes.push(Scope::default()),
                Step::Need(t) => {
                    let Some(d) = self.lets.get_mut(t.text) else {
                        return Err(self.fail(expected(&t, "a shared jaxpr")));
                    };
                    d.state = LetState::Building;
                    let body = d.body.clone();
                    let saved = Suspended {
                        lx: self.lx.clone(),
                        cur: self.cur,
                        nxt: self.nxt,
                        scopes: std::mem::take(&mut self.scopes),
                        name: t.text,
                    };
                    self.suspended.push(saved);
                    self.seek(body);
                    self.scopes.push(Scope::default());
                }
                Step::Close(j) => {
                    self.scopes.pop();
                    if self.scopes.is_empty() {
                        if self.suspended.len() > base {
                            if let Some(s) = self.suspended.pop() {
                                let cj = ClosedJaxpr::with_unknown_consts(Arc::new(j));
                                self.shared.insert(s.name, cj);
                                if let Some(d) = self.lets.get_mut(s.name) {
                                    d.state = LetState::Built;
                                }
                                self.lx = s.lx;
                                self.cur = s.cur;
                                self.nxt = s.nxt;
                                self.scopes = s.scopes;
                                continue;
                            }
                        }
                        return Ok(j);
                    }
                    let cj = ClosedJaxpr::with_unknown_consts(Arc::new(j));
                    if let Err(e) = self.deliver(Val::Jaxpr(cj)) {
                        return Err(self.fail(e));
                    }
                }
            }
        }
    }

    /// Drops the scopes after an error (type errors are deferred, never returned here,
    /// but one would be wrapped like a deferred one).
    fn fail(&mut self, e: ReadError) -> ReadError {
        let e = match e {
            ReadError::Type(te) => ReadError::Type(self.wrap(te)),
            parse => parse,
        };
        self.scopes.clear();
        e
    }

    /// Keeps the first type error (wrapped in the sites of the jaxprs around the top
    /// scope) and lets reading go on: a syntax error later in the text wins over it.
    fn defer(&mut self, te: TypeError) {
        if self.deferred.is_none() {
            let te = self.wrap(te);
            self.deferred = Some(te);
        }
    }

    /// Wraps a type error of the top scope in the sites of the scopes around it.
    fn wrap(&self, mut te: TypeError) -> TypeError {
        let enclosing = self.scopes.len().saturating_sub(1);
        for i in (0..enclosing.min(MAX_ERROR_NESTING)).rev() {
            let s = &self.scopes[i];
            let param = s
                .eqn
                .as_ref()
                .and_then(|p| p.current.map(|t| t.text.to_owned()))
                .unwrap_or_default();
            te = TypeError::SubJaxpr {
                site: Site::Eqn {
                    index: s.eqn_index,
                    line: self.source_line(s.eqn_start),
                },
                param,
                error: Box::new(te),
            };
        }
        te
    }

    /// The source line holding byte `offset`, trimmed (and shortened when very long).
    fn source_line(&self, offset: usize) -> String {
        let src = self.lx.source();
        let bytes = src.as_bytes();
        let offset = offset.min(bytes.len());
        let start = bytes[..offset]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let end = bytes[offset..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| offset + i);
        let line = src.get(start..end).unwrap_or("").trim();
        if line.chars().count() > MAX_SITE_CHARS {
            let mut s: String = line.chars().take(MAX_SITE_CHARS).collect();
            s.push_str(" ...");
            s
        } else {
            line.to_owned()
        }
    }

    fn eqn_site(&self, si: usize) -> Site {
        let s = &self.scopes[si];
        Site::Eqn {
            index: s.eqn_index,
            line: self.source_line(s.eqn_start),
        }
    }

    /// Runs the top scope until it needs a nested scope or is complete.
    fn step(&mut self) -> Result<Step<'a>, ReadError> {
        let si = self.scopes.len() - 1;
        if !self.scopes[si].header_done {
            self.header(si)?;
        }
        loop {
            if let Some(pe) = &self.scopes[si].eqn {
                if pe.in_params {
                    match self.params(si)? {
                        ParamStop::Done => {}
                        ParamStop::Open => return Ok(Step::Open),
                        ParamStop::Need(t) => return Ok(Step::Need(t)),
                    }
                }
                self.finish_eqn(si)?;
                continue;
            }
            while self.cur.kind == Kind::Semi {
                self.bump();
            }
            if self.cur.is_word("in") && self.nxt.kind != Kind::Colon {
                if self.nxt.kind != Kind::LParen {
                    return Err(expected(&self.nxt, "'(' after 'in'"));
                }
                return self.close(si).map(Step::Close);
            }
            self.start_eqn(si)?;
        }
    }

    /// `lambda consts ; invars . let`
    fn header(&mut self, si: usize) -> Result<(), ReadError> {
        self.expect_word("lambda", "'lambda'")?;
        let first = self.binders()?;
        let (consts, invars) = if self.cur.kind == Kind::Semi {
            self.bump();
            (first, self.binders()?)
        } else {
            (Vec::new(), first)
        };
        self.expect(Kind::Dot, "'.' after the input variables")?;
        self.expect_word("let", "'let'")?;
        for (t, aval) in consts {
            let v = self.scopes[si].b.add_constvar(aval);
            self.bind(si, t, v, || Site::Binders)?;
        }
        for (t, aval) in invars {
            let v = self.scopes[si].b.add_invar(aval);
            self.bind(si, t, v, || Site::Binders)?;
        }
        self.scopes[si].header_done = true;
        Ok(())
    }

    /// `name:type` while the next tokens look like one.
    fn binders(&mut self) -> Result<Vec<(Tok<'a>, AbstractValue)>, ReadError> {
        let mut v = Vec::new();
        while self.cur.kind == Kind::Word && self.nxt.kind == Kind::Colon {
            v.push(self.binder()?);
        }
        if self.cur.kind == Kind::Word && !matches!(self.cur.text, "let" | "in") {
            return Err(expected(
                &self.nxt,
                &format!("':' and a type after variable {}", self.cur.describe()),
            ));
        }
        Ok(v)
    }

    fn binder(&mut self) -> Result<(Tok<'a>, AbstractValue), ReadError> {
        let t = self.cur;
        if !is_ident(t.text) {
            return Err(expected(&t, "a variable name"));
        }
        self.bump();
        self.expect(Kind::Colon, "':' after a variable name")?;
        let aval = self.parse_type()?;
        Ok((t, aval))
    }

    /// `f32[3,4]`
    fn parse_type(&mut self) -> Result<AbstractValue, ReadError> {
        let t = self.cur;
        if t.kind != Kind::Word {
            return Err(expected(&t, "a type like f32[3]"));
        }
        let Some(dtype) = dtype_of(t.text) else {
            if let Some(tag) = t
                .text
                .strip_prefix("key<")
                .and_then(|s| s.strip_suffix('>'))
            {
                return Err(perr(
                    &t,
                    format!(
                        "PRNG key implementation '{tag}' ({}) is not supported: ferrax has \
                         threefry2x32 keys (key<fry>) only",
                        t.describe()
                    ),
                ));
            }
            return Err(perr(&t, format!("unknown dtype {}", t.describe())));
        };
        self.bump();
        self.expect(Kind::LBracket, "'[' after the dtype")?;
        let mut dims: smallvec::SmallVec<[i64; 4]> = smallvec::SmallVec::new();
        if self.cur.kind != Kind::RBracket {
            loop {
                let d = self.cur;
                if d.kind != Kind::Word || !is_int_word(d.text) {
                    return Err(expected(&d, "a dimension size"));
                }
                let Ok(n) = d.text.parse::<i64>() else {
                    return Err(perr(
                        &d,
                        format!("dimension {} overflows i64", d.describe()),
                    ));
                };
                dims.push(n);
                self.bump();
                if self.cur.kind == Kind::Comma {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        self.expect(Kind::RBracket, "',' or ']' in a shape")?;
        // JAX 0.10 prints the varying manual axes of a value in a shard_map body after
        // its type (`f32[4]{V:x}`, `f32[4]{V:(x,y)}`). ferrax keeps them as explicit
        // `pvary` equations instead, so the annotation is read and dropped.
        if self.cur.kind == Kind::LBrace && self.nxt.is_word("V") {
            self.bump();
            self.bump();
            self.expect(Kind::Colon, "':' after V in a type's varying axes")?;
            loop {
                let t = self.cur;
                match t.kind {
                    Kind::RBrace => {
                        self.bump();
                        break;
                    }
                    Kind::Word | Kind::Comma | Kind::LParen | Kind::RParen => self.bump(),
                    _ => return Err(expected(&t, "axis names and '}' in a type's varying axes")),
                }
            }
        }
        match Shape::new(&dims) {
            Ok(shape) => Ok(AbstractValue::new(shape, dtype)),
            Err(e) => Err(perr(&t, format!("bad shape {:?}: {e}", dims.as_slice()))),
        }
    }

    /// The text of the type at `cur` when it is written plainly, `DTYPE[d,d,...]` with
    /// no space and no varying-axes annotation after it (the printer's form), with the
    /// byte offset of its `]`.
    #[inline]
    fn plain_type_span(&self) -> Option<(&'a str, usize)> {
        let t = &self.cur;
        if t.kind != Kind::Word || self.nxt.kind != Kind::LBracket {
            return None;
        }
        let src = self.lx.source();
        let bytes = src.as_bytes();
        let open = t.start + t.text.len();
        if bytes.get(open) != Some(&b'[') {
            return None;
        }
        let mut i = open + 1;
        let limit = (open + 64).min(bytes.len());
        while i < limit && (bytes[i].is_ascii_digit() || bytes[i] == b',') {
            i += 1;
        }
        if i >= limit || bytes[i] != b']' || bytes.get(i + 1) == Some(&b'{') {
            return None;
        }
        Some((src.get(t.start..=i)?, i))
    }

    /// A type at `cur` that the scope read before with the same text: skips its tokens
    /// and returns it. Reading a type is a pure function of its tokens, and a plain
    /// type's tokens are a function of its text, so the text decides.
    #[inline]
    fn cached_type(&mut self, si: usize) -> Option<CachedType<'a>> {
        let (text, close) = self.plain_type_span()?;
        let hit = *self.scopes[si].types.iter().find(|c| c.text == text)?;
        self.skip_plain_type(close);
        Some(hit)
    }

    /// Moves past a plain type at `cur` whose `]` is at byte `close` (see
    /// [`Parser::plain_type_span`]).
    fn skip_plain_type(&mut self, close: usize) {
        // The span is ASCII with no newline: `]` is on `cur`'s line.
        let bracket = Tok {
            kind: Kind::RBracket,
            text: "]",
            start: close,
            line: self.cur.line,
            col: self.cur.col + (close - self.cur.start),
            line_start: false,
        };
        let lx = Lexer::after(self.lx.source(), &bracket);
        self.seek(lx);
    }

    /// Reads the type at `cur`, through the scope's cache of recent types.
    fn scope_type(&mut self, si: usize) -> Result<CachedType<'a>, ReadError> {
        if let Some(c) = self.cached_type(si) {
            return Ok(c);
        }
        let span = self.plain_type_span().map(|(text, _)| text);
        let aval = self.parse_type()?;
        let scope = &mut self.scopes[si];
        let c = CachedType {
            text: span.unwrap_or(""),
            id: scope.b.intern_aval(&aval),
        };
        if span.is_some() {
            if scope.types.len() < TYPE_CACHE {
                scope.types.push(c);
            } else {
                // Replace the oldest.
                scope.types.rotate_left(1);
                scope.types[TYPE_CACHE - 1] = c;
            }
        }
        Ok(c)
    }

    /// The scalar type of a literal at `cur` (its dtype), through the scope's cache of
    /// literal types (kept apart from [`Scope::types`]: a literal's type is not interned).
    fn literal_type(&mut self, si: usize) -> Result<DType, ReadError> {
        if let Some((text, close)) = self.plain_type_span() {
            if let Some(&(_, d)) = self.scopes[si].lit_types.iter().find(|(t, _)| *t == text) {
                self.skip_plain_type(close);
                return Ok(d);
            }
        }
        let span = self.plain_type_span().map(|(text, _)| text);
        let tt = self.cur;
        let aval = self.parse_type()?;
        if aval.shape.rank() != 0 {
            return Err(perr(
                &tt,
                format!("expected a scalar type for a literal, found {aval}"),
            ));
        }
        if let Some(text) = span {
            let cache = &mut self.scopes[si].lit_types;
            if cache.len() >= TYPE_CACHE {
                cache.remove(0);
            }
            cache.push((text, aval.dtype));
        }
        Ok(aval.dtype)
    }

    /// `name:type` of an equation's output: the name's token and the type's id.
    fn eqn_binder(&mut self, si: usize) -> Result<(Tok<'a>, AvalId), ReadError> {
        let t = self.cur;
        if !is_ident(t.text) {
            return Err(expected(&t, "a variable name"));
        }
        self.bump();
        self.expect(Kind::Colon, "':' after a variable name")?;
        let ty = self.scope_type(si)?;
        Ok((t, ty.id))
    }

    fn bind(
        &mut self,
        si: usize,
        t: Tok<'a>,
        v: VarId,
        site: impl FnOnce() -> Site,
    ) -> Result<(), ReadError> {
        let scope = &mut self.scopes[si];
        if t.text == "_" {
            scope.underscore = Some(v);
            return Ok(());
        }
        if !scope.names.insert_new(t.text, v) {
            self.defer(TypeError::DoubleBinding {
                site: site(),
                var: t.text.to_owned(),
            });
        }
        Ok(())
    }

    /// The variable a use names. An unbound one is a deferred type error and stands for
    /// a fresh variable meanwhile.
    fn use_var(&mut self, si: usize, t: &Tok<'a>, in_eqn: bool) -> Result<VarId, ReadError> {
        if !is_ident(t.text) {
            return Err(expected(t, "a variable name or a literal like 1.0:f32[]"));
        }
        let scope = &self.scopes[si];
        let found = if t.text == "_" {
            scope.underscore
        } else {
            scope.names.get(t.text)
        };
        if let Some(v) = found {
            return Ok(v);
        }
        let site = if in_eqn {
            self.eqn_site(si)
        } else {
            Site::Outputs
        };
        self.defer(TypeError::Unbound {
            site,
            var: t.text.to_owned(),
        });
        Ok(self.scopes[si].b.new_var(AbstractValue::scalar(DType::F32)))
    }

    /// A literal `value:dtype[]` at the current token.
    fn literal(&mut self, si: usize) -> Result<Literal, ReadError> {
        let vt = self.cur;
        self.bump();
        self.expect(Kind::Colon, "':' after a literal value")?;
        let dtype = self.literal_type(si)?;
        let s = vt.text;
        let value = if s == "True" || s == "False" {
            LitValue::Bool(s == "True")
        } else if is_int_word(s) {
            // A u64 above i64::MAX is held as its bits (see `LitValue::Int`).
            let parsed = s.parse::<i64>().ok().or_else(|| {
                (dtype == DType::U64)
                    .then(|| s.parse::<u64>().ok().map(|u| u as i64))
                    .flatten()
            });
            let Some(i) = parsed else {
                return Err(perr(
                    &vt,
                    format!(
                        "integer literal {} overflows {}",
                        vt.describe(),
                        if dtype == DType::U64 { "u64" } else { "i64" }
                    ),
                ));
            };
            if dtype.is_float() {
                LitValue::Float(i as f64)
            } else {
                LitValue::Int(i)
            }
        } else if is_float_word(s) {
            LitValue::Float(parse_float_word(s))
        } else {
            return Err(expected(&vt, "a literal value (a number, True or False)"));
        };
        Ok(Literal {
            value,
            dtype,
            weak_type: false,
        })
    }

    /// Binders, `=` and the primitive; then either `[` (params follow) or the inputs.
    fn start_eqn(&mut self, si: usize) -> Result<(), ReadError> {
        let first = self.cur;
        self.scopes[si].eqn_start = first.start;
        let mut outvars: OutVars<'a> = OutVars::new();
        if first.kind == Kind::Eq {
            self.bump();
        } else if first.kind == Kind::Word && self.nxt.kind == Kind::Colon {
            while self.cur.kind == Kind::Word && self.nxt.kind == Kind::Colon {
                let (t, id) = self.eqn_binder(si)?;
                let v = self.scopes[si].b.new_var_of(id);
                outvars.push((v, t));
            }
            self.expect(Kind::Eq, "'=' or another output variable")?;
        } else if first.kind != Kind::Word || is_keyword(first.text) {
            return Err(expected(&first, "an equation or 'in'"));
        }
        let pt = self.cur;
        if pt.kind != Kind::Word {
            return Err(expected(&pt, "a primitive name"));
        }
        let Some(prim) = self.registry.lookup(pt.text) else {
            return Err(perr(&pt, format!("unknown primitive '{}'", pt.text)));
        };
        self.bump();
        let in_params = self.cur.kind == Kind::LBracket;
        if in_params {
            self.bump();
        }
        self.scopes[si].eqn = Some(PendingEqn {
            builtin: prim.as_builtin(),
            prim,
            outvars,
            params: Vec::new(),
            in_params,
            current: None,
            containers: Vec::new(),
            numpy_toks: Vec::new(),
            numpy_ints: Vec::new(),
        });
        Ok(())
    }

    /// Reads params until `]`, until a nested jaxpr opens, or until a word names a
    /// shared jaxpr not read yet.
    fn params(&mut self, si: usize) -> Result<ParamStop<'a>, ReadError> {
        loop {
            let Some(pe) = self.scopes[si].eqn.as_mut() else {
                return Ok(ParamStop::Done);
            };
            let t = self.cur;
            if pe.current.is_none() {
                match t.kind {
                    Kind::RBracket => {
                        pe.in_params = false;
                        self.bump();
                        return Ok(ParamStop::Done);
                    }
                    Kind::Word => {
                        let raw_fmt = pe.builtin == Some(Builtin::DebugPrint) && t.text == "fmt";
                        pe.current = Some(t);
                        self.bump();
                        let eq = self.expect(Kind::Eq, "'=' after a param name")?;
                        let source = self.lx.source();
                        if raw_fmt
                            && !source
                                .get(eq.start + 1..)
                                .is_some_and(|r| r.starts_with('\''))
                        {
                            let fmt = self.raw_fmt(&eq)?;
                            self.deliver(Val::Str(fmt))?;
                        }
                        continue;
                    }
                    _ => return Err(expected(&t, "a param name or ']'")),
                }
            }
            // Items of a tuple are separated by commas, except that jaxprs (inline or
            // shared ones by name) follow one another with just a space, as JAX prints
            // `branches=(...)`.
            if let Some(c) = pe.containers.last() {
                let starts_value = matches!(
                    t.kind,
                    Kind::LBrace | Kind::LParen | Kind::LBracket | Kind::Word | Kind::Str
                );
                // In a param that takes jaxprs, any name is taken for one (an undefined
                // one is reported as such).
                let jaxprs_param = matches!(
                    (pe.builtin, pe.current),
                    (Some(b), Some(p)) if b.param_kind(p.text) == Some(ParamKind::Jaxprs)
                );
                let jaxpr_follows = t.kind == Kind::LBrace
                    || (t.kind == Kind::Word
                        && (self.shared.contains_key(t.text)
                            || self.lets.contains_key(t.text)
                            || (jaxprs_param && is_ident(t.text))));
                let after_jaxpr = c.items.last().is_some_and(|v| {
                    is_jaxpr_like(v, &self.shared)
                        || (jaxprs_param && matches!(v, Val::Word(w) if is_ident(w.text)))
                });
                let separated = c.items.is_empty() || c.after_comma;
                let jaxprs_in_a_row = jaxpr_follows && after_jaxpr;
                if starts_value && !separated && !jaxprs_in_a_row {
                    let want = if c.bracket { "']'" } else { "')'" };
                    return Err(expected(&t, &format!("',' or {want}")));
                }
            }
            match t.kind {
                Kind::LBrace => {
                    self.bump();
                    return Ok(ParamStop::Open);
                }
                Kind::LParen
                    if pe.containers.is_empty()
                        && pe.builtin == Some(Builtin::DebugPrint)
                        && pe.current.is_some_and(|c| {
                            matches!(c.text, "np_printoptions" | "static_args")
                        }) =>
                {
                    // `debug_print`'s print options and static arguments, Python
                    // tuples as JAX prints them: one word, their text.
                    let word = self.paren_span(t)?;
                    self.bump();
                    self.deliver(Val::Word(word))?;
                }
                Kind::LParen | Kind::LBracket => {
                    if pe.containers.len() >= MAX_VALUE_DEPTH {
                        return Err(perr(&t, "param value nested too deeply".to_owned()));
                    }
                    pe.containers.push(Container {
                        open: t,
                        items: Vec::new(),
                        bracket: t.kind == Kind::LBracket,
                        after_comma: false,
                        record: None,
                        field_names: Vec::new(),
                        pending_field: None,
                    });
                    self.bump();
                }
                Kind::RParen | Kind::RBracket => {
                    let closes_bracket = t.kind == Kind::RBracket;
                    match pe.containers.pop() {
                        Some(c) if c.record.is_some() && !closes_bracket => {
                            if let Some(f) = c.pending_field {
                                return Err(expected(
                                    &t,
                                    &format!("a value for field '{}'", f.text),
                                ));
                            }
                            if c.after_comma {
                                return Err(expected(&t, "a field name"));
                            }
                            self.bump();
                            let name = c.record.unwrap_or(c.open);
                            let text = self
                                .lx
                                .source()
                                .get(name.start..t.start + t.text.len())
                                .unwrap_or(name.text);
                            self.deliver(Val::Record {
                                name,
                                fields: c.field_names.into_iter().zip(c.items).collect(),
                                text,
                            })?;
                        }
                        Some(c)
                            if !c.bracket
                                && c.record.is_none()
                                && c.items.len() == 1
                                && !c.after_comma
                                && !is_jaxpr_like(&c.items[0], &self.shared) =>
                        {
                            return Err(expected(
                                &t,
                                "',' before ')' (a one-element tuple is written (x,))",
                            ));
                        }
                        Some(c) if c.bracket == closes_bracket => {
                            self.bump();
                            self.deliver(Val::Seq {
                                items: c.items,
                                bracket: c.bracket,
                                open: c.open,
                            })?;
                        }
                        Some(c) => {
                            let want = if c.bracket { "']'" } else { "')'" };
                            return Err(expected(&t, &format!("a value, ',' or {want}")));
                        }
                        None => return Err(expected(&t, "a param value")),
                    }
                }
                Kind::Comma => match pe.containers.last_mut() {
                    Some(c) if !c.items.is_empty() && !c.after_comma => {
                        c.after_comma = true;
                        self.bump();
                    }
                    _ => return Err(expected(&t, "a param value")),
                },
                Kind::Word
                    if t.text == "PyTreeDef"
                        && self.nxt.kind == Kind::LParen
                        && self.nxt.start == t.start + t.text.len() =>
                {
                    // A pytree's structure (in `pure_callback`'s callback, as JAX prints
                    // it: `PyTreeDef(((*,), {'k': *}))`): one word, its text.
                    let word = self.balanced_span(t)?;
                    self.bump();
                    self.deliver(Val::Word(word))?;
                }
                Kind::Word
                    if self.nxt.kind == Kind::LParen
                        && self.nxt.start == t.start + t.text.len()
                        && matches!(t.text, "Mesh" | "P" | "frozenset" | "ShapedArray")
                        && matches!(
                            (pe.builtin, pe.current),
                            (Some(b), Some(p)) if matches!(
                                b.param_kind(p.text),
                                Some(ParamKind::Mesh | ParamKind::Spec | ParamKind::Specs
                                    | ParamKind::AxisNameSet | ParamKind::Avals)
                            )
                        ) =>
                {
                    let p = match t.text {
                        "Mesh" => Param::Mesh(Arc::new(self.mesh_value()?)),
                        "P" => Param::Spec(Arc::new(self.spec_value()?)),
                        "ShapedArray" => Param::Avals(Arc::new([self.shaped_array_value()?])),
                        _ => Param::NameSet(self.name_set_value()?.into()),
                    };
                    self.deliver(Val::Param(p))?;
                }
                Kind::Word
                    if is_numpy_scalar_type(t.text)
                        && self.nxt.kind == Kind::LParen
                        && self.nxt.start == t.start + t.text.len() =>
                {
                    // `np.int64(1)`: a NumPy scalar, as JAX 0.10 prints some ints in
                    // params (`pad`'s `padding_config`): the number it holds.
                    self.bump();
                    self.bump();
                    let v = self.cur;
                    if v.kind != Kind::Word || !is_number_word(v.text) {
                        return Err(expected(&v, &format!("a number in {}(...)", t.text)));
                    }
                    self.bump();
                    self.expect(Kind::RParen, "')' after the number")?;
                    if let Some(d) = DType::from_name(&t.text[3..]).filter(|d| d.is_int()) {
                        if let Some(pe) = self.scopes.last_mut().and_then(|s| s.eqn.as_mut()) {
                            pe.numpy_toks.push((v.start, d));
                        }
                    }
                    self.deliver(Val::Word(v))?;
                }
                Kind::Word
                    if self.nxt.kind == Kind::LParen
                        && self.nxt.start == t.start + t.text.len() =>
                {
                    // `Name(`: a record.
                    if pe.containers.len() >= MAX_VALUE_DEPTH {
                        return Err(perr(&t, "param value nested too deeply".to_owned()));
                    }
                    let open = self.nxt;
                    pe.containers.push(Container {
                        open,
                        items: Vec::new(),
                        bracket: false,
                        after_comma: false,
                        record: Some(t),
                        field_names: Vec::new(),
                        pending_field: None,
                    });
                    self.bump();
                    self.bump();
                }
                Kind::Word
                    if matches!(
                        pe.containers.last(),
                        Some(c) if c.record.is_some() && c.pending_field.is_none()
                    ) =>
                {
                    // A field name of a record, then `=`.
                    let Some(c) = pe.containers.last_mut() else {
                        return Err(expected(&t, "a field name"));
                    };
                    if !c.items.is_empty() && !c.after_comma {
                        return Err(expected(&t, "',' or ')'"));
                    }
                    if c.field_names.len() >= MAX_RECORD_FIELDS {
                        return Err(perr(&t, "too many fields in a record".to_owned()));
                    }
                    if c.field_names.iter().any(|f| f.text == t.text) {
                        return Err(perr(&t, format!("field '{}' is given twice", t.text)));
                    }
                    c.pending_field = Some(t);
                    self.bump();
                    self.expect(Kind::Eq, "'=' after a field name")?;
                }
                Kind::Word => {
                    if self.names_pending_let(si, &t)? {
                        return Ok(ParamStop::Need(t));
                    }
                    let t = self.angle_span(t);
                    self.bump();
                    self.deliver(Val::Word(t))?;
                }
                Kind::Str => {
                    let Some(s) = unquote(t.text) else {
                        return Err(perr(&t, format!("bad escape in string {}", t.describe())));
                    };
                    self.bump();
                    self.deliver(Val::Str(s))?;
                }
                _ => return Err(expected(&t, "a param value")),
            }
        }
    }

    /// A quoted name (`'x'`) at the current token.
    fn quoted_name(&mut self) -> Result<Arc<str>, ReadError> {
        let t = self.cur;
        if t.kind != Kind::Str {
            return Err(expected(&t, "a quoted axis name"));
        }
        let Some(s) = unquote(t.text) else {
            return Err(perr(&t, format!("bad escape in string {}", t.describe())));
        };
        self.bump();
        Ok(Arc::from(s.as_str()))
    }

    /// `Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))` or `Mesh()`, from the word `Mesh`.
    fn mesh_value(&mut self) -> Result<Mesh, ReadError> {
        let start = self.cur;
        self.bump();
        self.expect(Kind::LParen, "'(' after Mesh")?;
        let mut axes: Vec<(Arc<str>, i64)> = Vec::new();
        let mut types: Option<Vec<Tok<'a>>> = None;
        while self.cur.kind != Kind::RParen {
            if self.cur.is_word("axis_types") && types.is_none() {
                self.bump();
                self.expect(Kind::Eq, "'=' after axis_types")?;
                self.expect(Kind::LParen, "'(' of the axis types")?;
                let mut ts = Vec::new();
                while self.cur.kind == Kind::Word {
                    ts.push(self.cur);
                    self.bump();
                    if self.cur.kind != Kind::Comma {
                        break;
                    }
                    self.bump();
                }
                self.expect(Kind::RParen, "')' after the axis types")?;
                types = Some(ts);
            } else {
                let name = self.quoted_name()?;
                self.expect(Kind::Colon, "':' after a mesh axis name")?;
                let n = self.cur;
                let size = match as_int(&Val::Word(n))? {
                    Some(i) if n.kind == Kind::Word => i,
                    _ => return Err(expected(&n, "a mesh axis size")),
                };
                self.bump();
                axes.push((name, size));
            }
            if self.cur.kind == Kind::Comma {
                self.bump();
            } else {
                break;
            }
        }
        self.expect(Kind::RParen, "',' or ')' in a mesh")?;
        if let Some(ts) = &types {
            if ts.len() != axes.len() {
                return Err(perr(
                    &start,
                    format!(
                        "the mesh has {} axes but {} axis types",
                        axes.len(),
                        ts.len()
                    ),
                ));
            }
            if let Some(t) = ts.iter().find(|t| t.text != "Auto") {
                return Err(perr(
                    t,
                    format!("unsupported mesh axis type {} (only Auto)", t.describe()),
                ));
            }
        }
        Mesh::new(axes).map_err(|e| perr(&start, format!("bad mesh: {e}")))
    }

    /// `P('x', None, ('y', 'z'))`, from the word `P`.
    fn spec_value(&mut self) -> Result<PartitionSpec, ReadError> {
        self.bump();
        self.expect(Kind::LParen, "'(' after P")?;
        let mut entries: Vec<Vec<Arc<str>>> = Vec::new();
        while self.cur.kind != Kind::RParen {
            let t = self.cur;
            match t.kind {
                Kind::Word if t.text == "None" => {
                    self.bump();
                    entries.push(Vec::new());
                }
                Kind::Str => entries.push(vec![self.quoted_name()?]),
                Kind::LParen => {
                    self.bump();
                    let mut names = Vec::new();
                    while self.cur.kind == Kind::Str {
                        names.push(self.quoted_name()?);
                        if self.cur.kind != Kind::Comma {
                            break;
                        }
                        self.bump();
                    }
                    self.expect(Kind::RParen, "',' or ')' in a partition spec entry")?;
                    entries.push(names);
                }
                _ => return Err(expected(&t, "None, an axis name or a tuple of axis names")),
            }
            if self.cur.kind == Kind::Comma {
                self.bump();
            } else {
                break;
            }
        }
        self.expect(Kind::RParen, "',' or ')' in a partition spec")?;
        Ok(PartitionSpec::new(entries))
    }

    /// `ShapedArray(float32[3])` or `ShapedArray(float32[], weak_type=True)`, from the
    /// word.
    fn shaped_array_value(&mut self) -> Result<AbstractValue, ReadError> {
        self.bump();
        self.expect(Kind::LParen, "'(' after ShapedArray")?;
        let mut aval = self.parse_type()?;
        if self.cur.kind == Kind::Comma {
            self.bump();
            let t = self.cur;
            if !t.is_word("weak_type") {
                return Err(expected(&t, "weak_type=True or ')'"));
            }
            self.bump();
            self.expect(Kind::Eq, "'=' after weak_type")?;
            let v = self.cur;
            aval.weak_type = match v.text {
                "True" if v.kind == Kind::Word => true,
                "False" if v.kind == Kind::Word => false,
                _ => return Err(expected(&v, "True or False")),
            };
            self.bump();
        }
        self.expect(Kind::RParen, "')' after a ShapedArray")?;
        Ok(aval)
    }

    /// `frozenset({'x', 'y'})` (or `frozenset({})`, `frozenset()`), from the word.
    fn name_set_value(&mut self) -> Result<Vec<Arc<str>>, ReadError> {
        self.bump();
        self.expect(Kind::LParen, "'(' after frozenset")?;
        let mut names = Vec::new();
        if self.cur.kind == Kind::LBrace {
            self.bump();
            while self.cur.kind == Kind::Str {
                names.push(self.quoted_name()?);
                if self.cur.kind != Kind::Comma {
                    break;
                }
                self.bump();
            }
            self.expect(Kind::RBrace, "',' or '}' in a set")?;
        }
        self.expect(Kind::RParen, "')' after a set")?;
        Ok(names)
    }

    /// True when the word `t`, in the param value being read, names a shared jaxpr that
    /// is defined later and not read yet (a param that takes a jaxpr, or one the schema
    /// does not know). A shared jaxpr named inside its own definition is an error: the
    /// text cannot describe such a cycle.
    fn names_pending_let(&self, si: usize, t: &Tok<'a>) -> Result<bool, ReadError> {
        let Some(d) = self.lets.get(t.text) else {
            return Ok(false);
        };
        let Some(pe) = self.scopes.get(si).and_then(|s| s.eqn.as_ref()) else {
            return Ok(false);
        };
        if pe.containers.len() > 1 || pe.containers.iter().any(|c| c.record.is_some()) {
            return Ok(false);
        }
        let takes_jaxpr = match (pe.builtin, pe.current) {
            (Some(b), Some(p)) => matches!(
                b.param_kind(p.text),
                None | Some(ParamKind::Jaxpr | ParamKind::Jaxprs | ParamKind::OptJaxpr)
            ),
            _ => true,
        };
        if !takes_jaxpr {
            return Ok(false);
        }
        match d.state {
            LetState::Pending => Ok(true),
            LetState::Built => Ok(false),
            LetState::Building => Err(perr(
                t,
                format!(
                    "shared jaxpr '{}' is used inside its own definition (line {}, column {})",
                    t.text, d.name.line, d.name.col
                ),
            )),
        }
    }

    /// Hands a complete value to the top scope's pending param.
    fn deliver(&mut self, val: Val<'a>) -> Result<(), ReadError> {
        let shared = &self.shared;
        let Some(pe) = self.scopes.last_mut().and_then(|s| s.eqn.as_mut()) else {
            return Err(expected(
                &self.cur,
                "a jaxpr in a param (internal parser state)",
            ));
        };
        if let Some(c) = pe.containers.last_mut() {
            if c.record.is_some() {
                let Some(f) = c.pending_field.take() else {
                    return Err(expected(&self.cur, "a field name"));
                };
                c.field_names.push(f);
            }
            c.items.push(val);
            c.after_comma = false;
            return Ok(());
        }
        let Some(name) = pe.current.take() else {
            return Err(expected(&self.cur, "a param name"));
        };
        if pe.params.iter().any(|(n, _)| *n == name.text) {
            return Err(perr(&name, format!("param '{}' is given twice", name.text)));
        }
        let kind = pe.builtin.and_then(|b| b.param_kind(name.text));
        if let Some(k) = kind {
            check_shared_names(k, &val, &name, pe.prim.name(), shared, &self.lets)?;
        }
        if !pe.numpy_toks.is_empty() {
            let toks = std::mem::take(&mut pe.numpy_toks);
            for (i, start) in word_starts(&val).into_iter().enumerate() {
                if let Some(&(_, d)) = toks.iter().find(|(s, _)| *s == start) {
                    pe.numpy_ints.push((name.text, i, d));
                }
            }
        }
        let p = convert(kind, val, shared)?;
        pe.params.push((name.text, p));
        Ok(())
    }

    /// Reads the inputs of the pending equation and adds it to the scope.
    fn finish_eqn(&mut self, si: usize) -> Result<(), ReadError> {
        let mut inputs = std::mem::take(&mut self.inputs);
        inputs.clear();
        let r = self.read_inputs(si, &mut inputs);
        let exact = inputs.to_vec();
        self.inputs = inputs;
        r?;
        self.add_pending(si, exact)
    }

    /// Whether `cur` (a word followed by `:`) starts the binders of an equation: one or
    /// more `NAME:type`, then `=`, on one line. Decides a literal word at a line start (`False:bool[]`
    /// on a wrapped line of inputs, or `nan:f32[] = ...` binding a variable named `nan`)
    /// by what follows it, looking ahead on a copy of the lexer.
    fn binders_follow(&self) -> bool {
        let mut lx = self.lx.clone();
        let mut toks = [self.cur, self.nxt]
            .into_iter()
            .chain(std::iter::from_fn(move || Some(lx.next_token())));
        if toks.next().map(|t| t.kind) != Some(Kind::Word) {
            return false;
        }
        // An equation's binders and its `=` are on one line: a token starting another
        // line ends the look (as if it were the end of the text).
        let mut kind = move || match toks.next() {
            Some(t) if !t.line_start => t.kind,
            _ => Kind::Eof,
        };
        loop {
            // The rest of a binder, NAME read: ':' DTYPE '[' (INT | ',')* ']'.
            if kind() != Kind::Colon || kind() != Kind::Word || kind() != Kind::LBracket {
                return false;
            }
            loop {
                match kind() {
                    Kind::RBracket => break,
                    Kind::Word | Kind::Comma => {}
                    _ => return false,
                }
            }
            match kind() {
                Kind::Eq => return true,
                Kind::Word => {} // The next binder's NAME.
                _ => return false,
            }
        }
    }

    fn read_inputs(&mut self, si: usize, inputs: &mut Vec<Atom>) -> Result<(), ReadError> {
        loop {
            let t = self.cur;
            if t.kind != Kind::Word {
                break;
            }
            if self.nxt.kind == Kind::Colon {
                if is_literal_word(t.text)
                    && !(is_ident(t.text) && t.line_start && self.binders_follow())
                {
                    let lit = self.literal(si)?;
                    inputs.push(self.scopes[si].b.literal(lit));
                    continue;
                }
                break; // The next equation's binders.
            }
            if t.text == "in"
                && (self.nxt.kind == Kind::LParen || !self.scopes[si].names.contains("in"))
            {
                break; // The outputs follow (or a misplaced `in` the caller reports).
            }
            if t.line_start
                && (self.nxt.kind == Kind::LBracket || !self.scopes[si].names.contains(t.text))
                && self.registry.lookup(t.text).is_some()
            {
                break; // JAX's form of an equation with no outputs.
            }
            let v = self.use_var(si, &t, true)?;
            inputs.push(Atom::Var(v));
            self.bump();
        }
        Ok(())
    }

    /// Adds the pending equation with these inputs and binds its outputs.
    fn add_pending(&mut self, si: usize, inputs: Vec<Atom>) -> Result<(), ReadError> {
        let Some(pe) = self.scopes[si].eqn.take() else {
            return Ok(());
        };
        let PendingEqn {
            prim,
            builtin,
            outvars,
            mut params,
            numpy_ints,
            ..
        } = pe;
        let scope = &mut self.scopes[si];
        if builtin == Some(Builtin::BroadcastInDim) && outvars.len() == 1 {
            // JAX hides these: the shape is the output's, and empty dimensions are omitted.
            if !params.iter().any(|(n, _)| *n == "shape") {
                if let Some(aval) = scope.b.var_aval(outvars[0].0) {
                    params.push(("shape", Param::ints(aval.shape.dims())));
                }
            }
            if !params.iter().any(|(n, _)| *n == "broadcast_dimensions") {
                params.push(("broadcast_dimensions", Param::ints(&[])));
            }
        }
        let ids: Vec<VarId> = outvars.iter().map(|(v, _)| *v).collect();
        scope.b.add_eqn_with_outvars(
            prim,
            inputs,
            Params::new(params).with_numpy_ints(numpy_ints),
            ids,
        );
        for (v, t) in outvars {
            if t.text == "_" {
                self.scopes[si].underscore = Some(v);
            } else if !self.scopes[si].names.insert_new(t.text, v) {
                let site = self.eqn_site(si);
                self.defer(TypeError::DoubleBinding {
                    site,
                    var: t.text.to_owned(),
                });
            }
        }
        self.scopes[si].eqn_index += 1;
        Ok(())
    }

    /// `in ( atoms ) }` and the build of the scope's jaxpr.
    fn close(&mut self, si: usize) -> Result<Jaxpr, ReadError> {
        self.bump(); // in
        self.expect(Kind::LParen, "'(' after 'in'")?;
        let mut outs: Vec<Atom> = Vec::new();
        let mut trailing_comma = false;
        loop {
            let t = self.cur;
            match t.kind {
                Kind::RParen => {
                    if outs.len() == 1 && !trailing_comma {
                        return Err(expected(&t, "',' before ')' (one output is written (a,))"));
                    }
                    self.bump();
                    break;
                }
                Kind::Word if self.nxt.kind == Kind::Colon => {
                    if !is_literal_word(t.text) {
                        return Err(expected(&t, "an output variable or a literal value"));
                    }
                    let lit = self.literal(si)?;
                    outs.push(self.scopes[si].b.literal(lit));
                }
                Kind::Word => {
                    let v = self.use_var(si, &t, false)?;
                    outs.push(Atom::Var(v));
                    self.bump();
                }
                _ => return Err(expected(&t, "an output variable, a literal or ')'")),
            }
            match self.cur.kind {
                Kind::Comma => {
                    trailing_comma = true;
                    self.bump();
                }
                Kind::RParen => trailing_comma = false,
                _ => return Err(expected(&self.cur, "',' or ')' in the outputs")),
            }
        }
        self.expect(Kind::RBrace, "'}' at the end of the jaxpr")?;
        let b = std::mem::take(&mut self.scopes[si].b);
        match b.build(outs) {
            Ok(j) => Ok(j),
            Err(te) => {
                // Reading goes on with an empty jaxpr in its place.
                self.defer(te);
                JaxprBuilder::new()
                    .build(Vec::new())
                    .map_err(ReadError::Type)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Param values.

type Shared<'a> = HashMap<&'a str, ClosedJaxpr>;

/// For a param of a known kind: a name in a jaxpr param must be a shared jaxpr's (else
/// the name is undefined), and a shared jaxpr's name is no value of a param that takes
/// no jaxpr (a string param takes any word, `name=f` included).
fn check_shared_names(
    kind: ParamKind,
    v: &Val<'_>,
    param: &Tok<'_>,
    prim: &str,
    shared: &Shared<'_>,
    lets: &HashMap<&str, LetDef<'_>>,
) -> Result<(), ReadError> {
    use ParamKind as K;
    if matches!(kind, K::Jaxpr | K::Jaxprs | K::OptJaxpr) {
        let words: &[Val<'_>] = match v {
            Val::Seq { items, .. } if kind == K::Jaxprs => items,
            other => std::slice::from_ref(other),
        };
        for w in words {
            if let Val::Word(t) = w {
                if is_ident(t.text)
                    && !matches!(t.text, "None" | "True" | "False")
                    && !shared.contains_key(t.text)
                {
                    return Err(perr(
                        t,
                        format!(
                            "undefined shared jaxpr '{}': param '{}' of {prim} takes a jaxpr, \
                             written inline or named by a `let {} = {{ ... }} in` before the \
                             jaxpr",
                            t.text, param.text, t.text
                        ),
                    ));
                }
            }
        }
        return Ok(());
    }
    if let Val::Word(t) = v {
        let is_shared = shared.contains_key(t.text) || lets.contains_key(t.text);
        if is_shared && by_kind(kind, v, shared)?.is_none() {
            return Err(perr(
                t,
                format!(
                    "'{}' names a shared jaxpr, but param '{}' of {prim} takes {}, not a jaxpr",
                    t.text, param.text, kind
                ),
            ));
        }
    }
    Ok(())
}

/// True for a jaxpr value: inline, or the name of a shared one.
fn is_jaxpr_like(v: &Val<'_>, shared: &Shared<'_>) -> bool {
    match v {
        Val::Jaxpr(_) => true,
        Val::Word(t) => shared.contains_key(t.text),
        _ => false,
    }
}

fn word<'v>(v: &'v Val<'_>) -> Option<&'v str> {
    match v {
        Val::Word(t) => Some(t.text),
        _ => None,
    }
}

fn as_int(v: &Val<'_>) -> Result<Option<i64>, ReadError> {
    match v {
        Val::Word(t) if is_int_word(t.text) => match t.text.parse::<i64>() {
            Ok(i) => Ok(Some(i)),
            Err(_) => Err(perr(t, format!("integer {} overflows i64", t.describe()))),
        },
        _ => Ok(None),
    }
}

fn as_bool(v: &Val<'_>) -> Option<bool> {
    match word(v) {
        Some("True") => Some(true),
        Some("False") => Some(false),
        _ => None,
    }
}

fn is_none(v: &Val<'_>) -> bool {
    word(v) == Some("None")
}

fn seq<'v, 'a>(v: &'v Val<'a>) -> Option<&'v [Val<'a>]> {
    match v {
        Val::Seq { items, .. } => Some(items),
        _ => None,
    }
}

fn as_ints(v: &Val<'_>) -> Result<Option<Vec<i64>>, ReadError> {
    let Some(items) = seq(v) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        match as_int(it)? {
            Some(i) => out.push(i),
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

fn as_bools(v: &Val<'_>) -> Option<Vec<bool>> {
    seq(v)?.iter().map(as_bool).collect()
}

fn as_dtype(v: &Val<'_>) -> Option<DType> {
    word(v).and_then(DType::from_name)
}

fn as_jaxpr(v: &Val<'_>, shared: &Shared<'_>) -> Option<ClosedJaxpr> {
    match v {
        Val::Jaxpr(cj) => Some(cj.clone()),
        Val::Word(t) => shared.get(t.text).cloned(),
        _ => None,
    }
}

fn as_jaxprs(v: &Val<'_>, shared: &Shared<'_>) -> Option<Vec<ClosedJaxpr>> {
    seq(v)?.iter().map(|x| as_jaxpr(x, shared)).collect()
}

/// `pad`'s config: a tuple of `(low, high, interior)` triples.
fn as_padding(v: &Val<'_>) -> Result<Option<Vec<crate::params::PadDim>>, ReadError> {
    let Some(items) = seq(v) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        match as_ints(it)?.as_deref() {
            Some(&[lo, hi, interior]) => out.push((lo, hi, interior)),
            _ => return Ok(None),
        }
    }
    Ok(Some(out))
}

fn as_dotdims(v: &Val<'_>) -> Result<Option<DotDimensionNumbers>, ReadError> {
    type Pair = Option<(Vec<i64>, Vec<i64>)>;
    let pair = |v: &Val<'_>| -> Result<Pair, ReadError> {
        match seq(v) {
            Some([a, b]) => Ok(as_ints(a)?.zip(as_ints(b)?)),
            _ => Ok(None),
        }
    };
    let Some([c, b]) = seq(v) else {
        return Ok(None);
    };
    let (Some((lc, rc)), Some((lb, rb))) = (pair(c)?, pair(b)?) else {
        return Ok(None);
    };
    Ok(Some(DotDimensionNumbers {
        lhs_contracting: lc,
        rhs_contracting: rc,
        lhs_batch: lb,
        rhs_batch: rb,
    }))
}

/// A word read as a string: anything but `None`, `True`, `False` and numbers.
fn is_string_word(s: &str) -> bool {
    !matches!(s, "None" | "True" | "False") && !is_number_word(s)
}

/// A string value: a string word, a quoted string, or a tuple/list of plain words (read
/// as its canonical text).
fn as_str(v: &Val<'_>) -> Option<Arc<str>> {
    match v {
        Val::Word(t) if is_string_word(t.text) => Some(Arc::from(t.text)),
        Val::Str(s) => Some(Arc::from(s.as_str())),
        Val::Seq { items, bracket, .. } => word_seq_text(items, *bracket).map(Arc::from),
        _ => None,
    }
}

/// How many more `<` than `>` a word has.
pub(crate) fn angle_depth(s: &str) -> i64 {
    s.bytes().fold(0, |d, b| match b {
        b'<' => d + 1,
        b'>' => d - 1,
        _ => d,
    })
}

/// `(A, B)`, `(A,)`, `[A, B]` for a non-empty sequence of plain words.
fn word_seq_text(items: &[Val<'_>], bracket: bool) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let mut s = String::from(if bracket { "[" } else { "(" });
    for (i, it) in items.iter().enumerate() {
        let w = word(it)?;
        if !crate::text::printer::is_plain_word(w) {
            return None;
        }
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(w);
    }
    if !bracket && items.len() == 1 {
        s.push(',');
    }
    s.push(if bracket { ']' } else { ')' });
    Some(s)
}

/// Converts a value by the schema's kind; `None` when it does not fit.
fn by_kind(kind: ParamKind, v: &Val<'_>, shared: &Shared<'_>) -> Result<Option<Param>, ReadError> {
    use ParamKind as K;
    Ok(match kind {
        K::Int => as_int(v)?.map(Param::Int),
        K::Bool => as_bool(v).map(Param::Bool),
        K::IntOrBool => match as_int(v)? {
            Some(i) => Some(Param::Int(i)),
            None => as_bool(v).map(Param::Bool),
        },
        K::Str => as_str(v).map(Param::Str),
        K::OptStr if is_none(v) => Some(Param::None),
        K::OptStr => as_str(v).map(Param::Str),
        K::Ints => as_ints(v)?.map(|x| Param::Ints(x.into())),
        K::OptInts if is_none(v) => Some(Param::None),
        K::OptInts => as_ints(v)?.map(|x| Param::Ints(x.into())),
        K::Bools => as_bools(v).map(|x| Param::Bools(x.into())),
        K::DType => as_dtype(v).map(Param::DType),
        K::OptDType if is_none(v) => Some(Param::None),
        K::OptDType => as_dtype(v).map(Param::DType),
        K::DotDims => as_dotdims(v)?.map(|d| Param::DotDims(Arc::new(d))),
        K::Jaxpr => as_jaxpr(v, shared).map(Param::Jaxpr),
        K::Jaxprs => as_jaxprs(v, shared).map(|x| Param::Jaxprs(Arc::new(x))),
        K::NoneOnly => is_none(v).then_some(Param::None),
        K::GatherDims => as_record(v, "GatherDimensionNumbers", &GatherDimensionNumbers::FIELDS)?
            .map(|f| Param::GatherDims(Arc::new(GatherDimensionNumbers::from_fields(f)))),
        K::ScatterDims => as_record(
            v,
            "ScatterDimensionNumbers",
            &ScatterDimensionNumbers::FIELDS,
        )?
        .map(|f| Param::ScatterDims(Arc::new(ScatterDimensionNumbers::from_fields(f)))),
        K::ConvDims => as_record(v, "ConvDimensionNumbers", &ConvDimensionNumbers::FIELDS)?
            .map(|f| Param::ConvDims(Arc::new(ConvDimensionNumbers::from_fields(f)))),
        K::GatherMode => word(v)
            .and_then(GatherScatterMode::from_name)
            .map(Param::Mode),
        K::OptScalar => match v {
            Val::Word(t) if t.text == "None" => Some(Param::None),
            Val::Word(t) if t.text == "True" || t.text == "False" => {
                Some(Param::Bool(t.text == "True"))
            }
            Val::Word(t) if is_int_word(t.text) => as_int(v)?.map(Param::Int),
            Val::Word(t) if is_float_word(t.text) => Some(Param::Float(parse_float_word(t.text))),
            _ => None,
        },
        K::OptJaxpr if is_none(v) => Some(Param::None),
        K::OptJaxpr => as_jaxpr(v, shared).map(Param::Jaxpr),
        K::PaddingConfig => as_padding(v)?.map(|c| Param::Padding(c.into())),
        K::OptOpaque if is_none(v) => Some(Param::None),
        K::Opaque | K::OptOpaque => as_opaque(v).map(Param::Opaque),
        K::Mesh => match v {
            Val::Param(p @ Param::Mesh(_)) => Some(p.clone()),
            _ => None,
        },
        K::Spec => match v {
            Val::Param(p @ Param::Spec(_)) => Some(p.clone()),
            _ => None,
        },
        K::AxisNameSet => match v {
            Val::Param(p @ Param::NameSet(_)) => Some(p.clone()),
            _ => None,
        },
        K::Specs => seq(v).and_then(|items| {
            items
                .iter()
                .map(|it| match it {
                    Val::Param(Param::Spec(p)) => Some((**p).clone()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(|ps| Param::Specs(ps.into()))
        }),
        K::AxisName => match v {
            Val::Seq { .. } => by_kind(K::AxisNames, v, shared)?,
            _ => as_str(v).map(Param::Str),
        },
        K::AxisNames => seq(v).and_then(|items| {
            items
                .iter()
                .map(|it| match it {
                    Val::Str(s) => Some(Arc::from(s.as_str())),
                    _ => None,
                })
                .collect::<Option<Vec<Arc<str>>>>()
                .map(|ns| Param::Names(ns.into()))
        }),
        K::Avals => seq(v).and_then(|items| {
            items
                .iter()
                .map(|it| match it {
                    Val::Param(Param::Avals(a)) if a.len() == 1 => Some(a[0].clone()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(|avals| Param::Avals(avals.into()))
        }),
        K::Pairs => match seq(v) {
            Some(items) => {
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    match as_ints(it)?.as_deref() {
                        Some(&[a, b]) => out.push((a, b)),
                        _ => return Ok(None),
                    }
                }
                Some(Param::Pairs(out.into()))
            }
            None => None,
        },
    })
}

/// An opaque value named by the text: a word other than `None` (`f_jvp`, `<lambda>`), a
/// quoted string, a record (`DotsSaveable(only_if_no_batch_dims=False)`) or a tuple of
/// words. It holds no object.
fn as_opaque(v: &Val<'_>) -> Option<Opaque> {
    match v {
        Val::Word(t) if t.text != "None" => Some(Opaque::named(t.text)),
        Val::Str(s) => Some(Opaque::named(s)),
        Val::Record { text, .. } => Some(Opaque::named(text)),
        Val::Seq { items, bracket, .. } => {
            word_seq_text(items, *bracket).map(|s| Opaque::named(&s))
        }
        _ => None,
    }
}

/// The five int-tuple fields of a dimension-numbers record, in `names` order; `None` if
/// the value is not that record. A field missing, unknown or not a tuple of ints is an
/// error naming it.
fn as_record<const N: usize>(
    v: &Val<'_>,
    record: &str,
    names: &[&str; N],
) -> Result<Option<[Vec<i64>; N]>, ReadError> {
    let Val::Record { name, fields, .. } = v else {
        return Ok(None);
    };
    if name.text != record {
        return Ok(None);
    }
    let mut out: [Option<Vec<i64>>; N] = std::array::from_fn(|_| None);
    for (field, value) in fields {
        let Some(i) = names.iter().position(|n| *n == field.text) else {
            return Err(perr(
                field,
                format!("{record} has no field '{}'", field.text),
            ));
        };
        match as_ints(value)? {
            Some(xs) => out[i] = Some(xs),
            None => {
                return Err(perr(
                    field,
                    format!("{record} field '{}' must be a tuple of ints", field.text),
                ))
            }
        }
    }
    let mut result: [Vec<i64>; N] = std::array::from_fn(|_| Vec::new());
    for (i, slot) in out.into_iter().enumerate() {
        match slot {
            Some(xs) => result[i] = xs,
            None => {
                return Err(perr(
                    name,
                    format!("{record} is missing field '{}'", names[i]),
                ))
            }
        }
    }
    Ok(Some(result))
}

/// Converts a value by its syntax alone.
fn by_syntax(v: Val<'_>, shared: &Shared<'_>) -> Result<Param, ReadError> {
    match v {
        Val::Word(t) => Ok(match t.text {
            "None" => Param::None,
            "True" => Param::Bool(true),
            "False" => Param::Bool(false),
            s if is_int_word(s) => Param::Int(as_int(&Val::Word(t))?.unwrap_or(0)),
            s if is_float_word(s) => Param::Float(parse_float_word(s)),
            s => match (DType::from_name(s), shared.get(s)) {
                (Some(d), _) => Param::DType(d),
                (None, Some(cj)) => Param::Jaxpr(cj.clone()),
                (None, None) => Param::Str(Arc::from(s)),
            },
        }),
        Val::Str(s) => Ok(Param::Str(Arc::from(s.as_str()))),
        Val::Param(p) => Ok(p),
        Val::Jaxpr(cj) => Ok(Param::Jaxpr(cj)),
        Val::Record { name, .. } => {
            if let Some(f) = as_record(
                &v,
                "GatherDimensionNumbers",
                &GatherDimensionNumbers::FIELDS,
            )? {
                return Ok(Param::GatherDims(Arc::new(
                    GatherDimensionNumbers::from_fields(f),
                )));
            }
            if let Some(f) = as_record(
                &v,
                "ScatterDimensionNumbers",
                &ScatterDimensionNumbers::FIELDS,
            )? {
                return Ok(Param::ScatterDims(Arc::new(
                    ScatterDimensionNumbers::from_fields(f),
                )));
            }
            if let Some(f) = as_record(&v, "ConvDimensionNumbers", &ConvDimensionNumbers::FIELDS)? {
                return Ok(Param::ConvDims(Arc::new(
                    ConvDimensionNumbers::from_fields(f),
                )));
            }
            Err(perr(
                &name,
                format!(
                    "unsupported param value: a record {}(...) (only GatherDimensionNumbers, \
                     ScatterDimensionNumbers and ConvDimensionNumbers are known)",
                    name.text
                ),
            ))
        }
        Val::Seq {
            ref items,
            bracket,
            open,
        } => {
            if let Some(x) = as_ints(&v)? {
                return Ok(Param::Ints(x.into()));
            }
            if let Some(x) = as_bools(&v) {
                return Ok(Param::Bools(x.into()));
            }
            if let Some(x) = as_jaxprs(&v, shared) {
                return Ok(Param::Jaxprs(Arc::new(x)));
            }
            if let Some(d) = as_dotdims(&v)? {
                return Ok(Param::DotDims(Arc::new(d)));
            }
            if let Some(s) = word_seq_text(items, bracket) {
                return Ok(Param::Str(Arc::from(s)));
            }
            Err(perr(
                &open,
                "unsupported param value: expected a tuple of ints, of bools, of jaxprs or of \
                 words, or dimension numbers"
                    .to_owned(),
            ))
        }
    }
}

/// The source offsets of a value's words, in order (its integers, for the kinds that
/// hold integers). Values nest at most [`MAX_VALUE_DEPTH`] deep.
fn word_starts(v: &Val<'_>) -> Vec<usize> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Val::Word(t) => out.push(t.start),
            Val::Seq { items, .. } => stack.extend(items.iter().rev()),
            Val::Record { fields, .. } => stack.extend(fields.iter().rev().map(|(_, v)| v)),
            Val::Str(_) | Val::Jaxpr(_) | Val::Param(_) => {}
        }
    }
    out
}

fn convert(kind: Option<ParamKind>, v: Val<'_>, shared: &Shared<'_>) -> Result<Param, ReadError> {
    if let Some(k) = kind {
        if let Some(p) = by_kind(k, &v, shared)? {
            return Ok(p);
        }
    }
    by_syntax(v, shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_words() {
        for s in [
            "1",
            "-3",
            "0",
            "2.0",
            "1e-05",
            "9.999999747378752e-06",
            "1e+20",
            "inf",
            "-inf",
            "nan",
            "1.",
            "-0.0",
        ] {
            assert!(is_number_word(s), "{s}");
        }
        for s in [
            "", "-", "a", "1e", "1.0.0", "e5", ".5", "1x", "infinity", "--1", "True",
        ] {
            assert!(!is_number_word(s), "{s}");
        }
    }

    #[test]
    fn rounding() {
        assert_eq!(crate::eval::round_float(DType::F32, 1e-5), 1e-5f32 as f64);
        assert_eq!(
            crate::eval::round_float(DType::BF16, 1.0 / 3.0),
            0.333984375
        );
        assert_eq!(crate::eval::round_float(DType::F16, 65504.0), 65504.0);
        assert_eq!(crate::eval::round_float(DType::F16, 65520.0), f64::INFINITY);
        assert_eq!(crate::eval::round_float(DType::F16, 1e-8), 0.0);
        assert_eq!(crate::eval::round_float(DType::F16, 6e-8), 2f64.powi(-24));
        assert_eq!(
            crate::eval::round_float(DType::F16, -1.0009765625),
            -1.0009765625
        );
        assert_eq!(crate::eval::round_float(DType::F16, 1.00048828125), 1.0);
    }
}
