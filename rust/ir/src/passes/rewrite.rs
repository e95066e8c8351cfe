//! Pattern matching and term rewriting of jaxprs.
//!
//! A rule reads like an equation of jaxpr text with holes: `?x` matches any operand (a
//! variable or a literal), and a term in parentheses matches a variable computed by
//! such an equation. Rules are named and written one per line:
//!
//! ```text
//! # '#' starts a comment; a line not starting with `name:` continues the rule above
//! mul_one:   mul ?x 1.0 => ?x
//! log_exp:   log (exp ?x) => ?x
//! sub_self:  sub ?x ?x => mul ?x 0.0 if float(?x)
//! same_type: convert_element_type[new_dtype=?t] ?x:?t[*] => ?x
//! square:    integer_pow[y=2] ?x => mul ?x ?x
//! ```
//!
//! What a pattern can say:
//! - `?x` matches any operand; the same hole twice matches the same operand twice.
//! - `?x:f32[3,4]`, `?x:f32[*]` (any shape), `?x:?t[?s]` (holes for the dtype and the
//!   shape, which other places of the rule can use), `?x:_[]` (any scalar) constrain its
//!   type.
//! - `1.0` matches a literal of that value (any dtype), `1.0:f32[]` one of that type.
//! - `prim[name=value ...] args...` matches an equation of `prim`; the params written
//!   must equal the equation's (compared as jaxpr text prints them), params not written
//!   are free, and `name=?p` binds the value.
//! - After `if`, comma-separated conditions: `float(?x)`, `int(?x)`, `bool(?x)`,
//!   `literal(?x)`, `scalar(?x)`, `weak(?x)` (each may follow `not`), `dtype(?x) = f32`,
//!   `rank(?x) = 2`, `shape(?x) = (2, 3)`, `same_type(?x, ?y)`, `?p = value` (each with
//!   `=` or `!=`).
//!
//! The right side is a term over the holes the left side binds (a hole it never binds
//! is refused when the rule is built), literals (`2.0:f32[]`, or untyped to take the
//! dtype of the other operands, weakly typed) and applications of built-in primitives,
//! whose params are written out or taken from holes. A match is replaced only when the
//! right side has the same type as the matched equation's output (dtype, shape and weak
//! type): otherwise the rule does not apply there.
//!
//! [`rewrite`] applies a [`RuleSet`] everywhere (inside `jit`, `cond`, `while`, `scan`,
//! ... bodies too, each shared sub-jaxpr once) until no rule applies, or fails with
//! [`RewriteError::NoFixpoint`] naming the rules that still fire after the iteration
//! bound; then DCE (the inputs stay) and a typecheck. (No toposort is needed: each
//! pass emits a right side where the equation it replaces was, so the order stays a
//! dependency order, and equations the rules did not touch keep their places.) Rules are indexed
//! by the primitive at their root, so a pass costs time linear in the program for a
//! fixed rule set. Equations with effects are never rewritten.

use super::dce::{dce, widen};
use super::PassError;
use crate::aval::AbstractValue;
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitValue, Literal, VarId};
use crate::params::{GatherScatterMode, Param, Params};
use crate::primitive::{Builtin, ParamKind, Primitive};
use crate::text::format_param_flat;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

/// The deepest nesting of parentheses a rule may have.
const MAX_TERM_DEPTH: usize = 64;

// ------------------------------------------------------------------------------ errors

/// A rule (or a rule file) that does not read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleParseError {
    /// The line of the rule (1-based) in its file; 1 for a single rule.
    pub line: usize,
    /// The column (1-based, in bytes) on that line where the problem was found; 0 when
    /// it is not at one place (a duplicate name).
    pub column: usize,
    /// The rule's name, when it was read.
    pub rule: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for RuleParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rule {
            Some(r) => write!(f, "line {}: rule '{}': {}", self.line, r, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

impl std::error::Error for RuleParseError {}

/// Why [`rewrite`] stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RewriteError {
    /// Rules still applied after the iteration bound: they probably undo one another
    /// or grow the program forever.
    NoFixpoint {
        /// The bound.
        iterations: usize,
        /// The rules that fired in the last passes (up to 8).
        rules: Vec<String>,
    },
    /// A rule's right side does not typecheck where its left side matched.
    IllTypedRhs {
        /// The rule.
        rule: String,
        /// The typechecker's message.
        message: String,
    },
    /// A pass that runs after the rewriting failed.
    Pass(PassError),
}

impl fmt::Display for RewriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RewriteError::NoFixpoint { iterations, rules } => write!(
                f,
                "the rules did not reach a fixpoint in {iterations} iterations; still \
                 firing: {}",
                rules.join(", ")
            ),
            RewriteError::IllTypedRhs { rule, message } => {
                write!(
                    f,
                    "rule '{rule}': the right side does not typecheck: {message}"
                )
            }
            RewriteError::Pass(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RewriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RewriteError::Pass(e) => Some(e),
            _ => None,
        }
    }
}

impl From<PassError> for RewriteError {
    fn from(e: PassError) -> RewriteError {
        RewriteError::Pass(e)
    }
}

// ------------------------------------------------------------------------------- rules

/// A pattern on a dtype or a shape: anything, one value, or a hole.
#[derive(Clone, Debug)]
enum Slot<T> {
    Any,
    Exact(T),
    Hole(usize),
}

#[derive(Clone, Debug)]
struct TypePat {
    dtype: Slot<DType>,
    shape: Slot<Vec<i64>>,
}

#[derive(Clone, Debug)]
enum ParamPat {
    /// `name=?p`.
    Hole(usize),
    /// A value, as the printer writes it with spaces removed (left sides).
    Text(String),
    /// A value (right sides).
    Value(Param),
}

#[derive(Clone, Debug)]
enum Term {
    Hole {
        slot: usize,
        ty: Option<TypePat>,
    },
    Lit {
        value: LitValue,
        dtype: Option<DType>,
    },
    App {
        prim: String,
        params: Vec<(String, ParamPat)>,
        args: Vec<Term>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Test {
    Float,
    Int,
    Bool,
    Literal,
    Scalar,
    Weak,
}

#[derive(Clone, Debug)]
enum Cond {
    Is(Test, usize, bool),
    DType(usize, DType, bool),
    Rank(usize, usize, bool),
    Shape(usize, Vec<i64>, bool),
    SameType(usize, usize, bool),
    Param(usize, String, bool),
}

/// One named rule `lhs => rhs if conditions`.
///
/// # Examples
/// ```
/// use ferrax_ir::passes::Rule;
/// let r = Rule::parse("sub_self: sub ?x ?x => mul ?x 0.0 if float(?x)")?;
/// assert_eq!((r.name(), r.root()), ("sub_self", "sub"));
/// assert_eq!(r.to_string(), "sub_self: sub ?x ?x => mul ?x 0.0 if float(?x)");
/// // A right side may only use the holes its left side binds.
/// let e = Rule::parse("bad: neg ?x => ?y").unwrap_err();
/// assert_eq!((e.line, e.rule.as_deref()), (1, Some("bad")));
/// assert!(e.to_string().contains("?y"), "{e}");
/// # Ok::<(), ferrax_ir::passes::RuleParseError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Rule {
    name: String,
    text: String,
    lhs: Term,
    rhs: Term,
    conds: Vec<Cond>,
    holes: Vec<String>,
}

impl Rule {
    /// Reads one rule: `name: lhs => rhs [if conditions]`.
    pub fn parse(text: &str) -> Result<Rule, RuleParseError> {
        parse_rule(text, 1)
    }

    /// The rule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The primitive at the root of the left side.
    pub fn root(&self) -> &str {
        match &self.lhs {
            Term::App { prim, .. } => prim,
            _ => "",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.text)
    }
}

/// Rules indexed by the primitive at the root of their left side.
///
/// # Examples
/// ```
/// use ferrax_ir::passes::rewrite::{rewrite, Rule, RuleSet, DEFAULT_MAX_ITERATIONS};
/// use ferrax_ir::text::parse_jaxpr;
/// let mut rules = RuleSet::parse(
///     "# a rule file: one rule per line, `#` comments
///      log_exp: log (exp ?x) => ?x
///      square:  integer_pow[y=2] ?x
///                 => mul ?x ?x   # a line not starting `name:` continues the rule",
/// )?;
/// rules.push(Rule::parse("neg_neg: neg (neg ?x) => ?x")?)?;
/// assert_eq!(rules.len(), 3);
/// assert_eq!(rules.rules()[1].root(), "integer_pow");
/// // Names are unique.
/// assert!(rules.push(Rule::parse("square: mul ?x 1.0 => ?x")?).is_err());
///
/// let j = parse_jaxpr(
///     "{ lambda ; a:f32[3]. let b:f32[3] = exp a; c:f32[3] = log b; \
///      d:f32[3] = integer_pow[y=2] c in (d,) }",
/// )?;
/// let out = rewrite(&j, &rules, DEFAULT_MAX_ITERATIONS)?;
/// assert_eq!(out.jaxpr.to_string(), "{ lambda ; a:f32[3]. let b:f32[3] = mul a a in (b,) }");
/// assert_eq!(out.fired, [1, 1, 0]); // log_exp once, square once, neg_neg never
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    by_root: HashMap<String, Vec<usize>>,
}

impl RuleSet {
    /// A rule set of these rules, tried in this order where several match.
    pub fn new(rules: Vec<Rule>) -> Result<RuleSet, RuleParseError> {
        let mut set = RuleSet::default();
        for r in rules {
            set.push(r)?;
        }
        Ok(set)
    }

    /// Reads a rule file: each rule starts on a line with its name and ':' (other lines
    /// continue the rule above), `#` starts a comment, names are unique.
    pub fn parse(text: &str) -> Result<RuleSet, RuleParseError> {
        let mut set = RuleSet::default();
        // The rule being gathered: its text, and where each of its lines starts in it
        // (offset, line number, indentation), to report an error where it is.
        let mut pending: Option<Gathered> = None;
        let finish = |set: &mut RuleSet, (t, lines): Gathered| {
            let first = lines[0].1;
            let rule = parse_rule(&t, first).map_err(|e| {
                let at = e.column.saturating_sub(1);
                let &(start, line, indent) = lines
                    .iter()
                    .rev()
                    .find(|(start, _, _)| *start <= at)
                    .unwrap_or(&lines[0]);
                RuleParseError {
                    line,
                    column: if e.column == 0 {
                        0
                    } else {
                        at - start + 1 + indent
                    },
                    ..e
                }
            })?;
            set.push(rule)
                .map_err(|e| RuleParseError { line: first, ..e })
        };
        for (i, raw) in text.lines().enumerate() {
            let line = strip_comment(raw);
            if line.trim().is_empty() {
                continue;
            }
            if !starts_rule(line) {
                if let Some((t, lines)) = pending.as_mut() {
                    t.push(' ');
                    lines.push((t.len(), i + 1, indent(line)));
                    t.push_str(line.trim());
                    continue;
                }
            }
            if let Some(p) = pending.take() {
                finish(&mut set, p)?;
            }
            pending = Some((line.trim().to_owned(), vec![(0, i + 1, indent(line))]));
        }
        if let Some(p) = pending {
            finish(&mut set, p)?;
        }
        Ok(set)
    }

    /// Adds a rule (its name must be new).
    pub fn push(&mut self, rule: Rule) -> Result<(), RuleParseError> {
        if self.rules.iter().any(|r| r.name == rule.name) {
            return Err(RuleParseError {
                line: 1,
                column: 0,
                rule: Some(rule.name.clone()),
                message: "a rule of this name is already in the set".into(),
            });
        }
        self.by_root
            .entry(rule.root().to_owned())
            .or_default()
            .push(self.rules.len());
        self.rules.push(rule);
        Ok(())
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// Algebraic simplifications that hold for every value of their type (no NaN or
/// infinity caveats beyond what JAX's own simplifications make), as a rule file.
pub const ALGEBRAIC_RULES: &str = "\
# x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1
add_zero:      add ?x 0 => ?x
zero_add:      add 0 ?x => ?x
sub_zero:      sub ?x 0 => ?x
mul_one:       mul ?x 1 => ?x
one_mul:       mul 1 ?x => ?x
div_one:       div ?x 1 => ?x
# involutions and inverses
neg_neg:       neg (neg ?x) => ?x
not_not:       not (not ?x) => ?x
log_exp:       log (exp ?x) => ?x
sub_neg:       sub ?x (neg ?y) => add ?x ?y
add_neg:       add ?x (neg ?y) => sub ?x ?y
# conversions and reshapes that change nothing
convert_same:  convert_element_type[new_dtype=?t] ?x:?t[*] => ?x if not weak(?x)
# powers
pow_one:       integer_pow[y=1] ?x => ?x
pow_two:       integer_pow[y=2] ?x => mul ?x ?x
";

/// A rule's text gathered from its lines, and where each line starts in it: (offset,
/// line number, indentation).
type Gathered = (String, Vec<(usize, usize, usize)>);

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Whether a line starts a rule (`name:`); other lines continue the rule above.
fn starts_rule(line: &str) -> bool {
    let t = line.trim_start();
    let n = t
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
        .map_or(t.len(), |(i, _)| i);
    n > 0 && t[n..].trim_start().starts_with(':')
}

fn strip_comment(line: &str) -> &str {
    let mut quote = false;
    for (i, c) in line.char_indices() {
        match c {
            '\'' => quote = !quote,
            '#' if !quote => return &line[..i],
            _ => {}
        }
    }
    line
}

// ------------------------------------------------------------------------ rule reading

struct Reader<'a> {
    s: &'a str,
    pos: usize,
    line: usize,
    name: Option<String>,
    holes: Vec<String>,
    /// While reading the right side: holes must exist already.
    rhs: bool,
}

impl<'a> Reader<'a> {
    fn err(&self, message: impl Into<String>) -> RuleParseError {
        RuleParseError {
            line: self.line,
            column: self.pos + 1,
            rule: self.name.clone(),
            message: message.into(),
        }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn skip_ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.rest().chars().next()
    }

    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &str) -> Result<(), RuleParseError> {
        if self.eat(tok) {
            Ok(())
        } else {
            Err(self.err(format!("expected '{tok}' at {}", self.near())))
        }
    }

    fn near(&self) -> String {
        let r = self.rest().trim_start();
        if r.is_empty() {
            "the end".into()
        } else {
            let t: String = r.chars().take(16).collect();
            format!("'{t}'")
        }
    }

    /// A word: letters, digits, `_`, `-`, `.`, `<`, `>` (`scatter-add`, `key<fry>`).
    fn word(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let r = self.rest();
        let n = r
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || "_-.<>+".contains(c)))
            .map_or(r.len(), |(i, _)| i);
        if n == 0 {
            return None;
        }
        self.pos += n;
        Some(&r[..n])
    }

    fn is_word_at_keyword(&mut self, kw: &str) -> bool {
        self.skip_ws();
        let r = self.rest();
        r.starts_with(kw)
            && !r[kw.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    }

    /// `?name`: the hole's slot (new on the left side, known on the right).
    fn hole(&mut self) -> Result<usize, RuleParseError> {
        self.expect("?")?;
        let r = self.rest();
        let n = r
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(r.len(), |(i, _)| i);
        if n == 0 {
            return Err(self.err("expected a hole name after '?'"));
        }
        let name = &r[..n];
        self.pos += n;
        if let Some(i) = self.holes.iter().position(|h| h == name) {
            return Ok(i);
        }
        if self.rhs {
            return Err(self.err(format!(
                "the right side or a condition uses ?{name}, which the left side never binds"
            )));
        }
        self.holes.push(name.to_owned());
        Ok(self.holes.len() - 1)
    }

    fn dtype(&mut self) -> Result<DType, RuleParseError> {
        let w = self.word().unwrap_or("");
        dtype_named(w).ok_or_else(|| self.err(format!("unknown dtype '{w}'")))
    }

    /// `[3,4]`, `[]`, `[*]` or `[?s]`.
    fn shape_pat(&mut self) -> Result<Slot<Vec<i64>>, RuleParseError> {
        self.expect("[")?;
        if self.eat("*") {
            self.expect("]")?;
            return Ok(Slot::Any);
        }
        if self.peek() == Some('?') {
            let s = self.hole()?;
            self.expect("]")?;
            return Ok(Slot::Hole(s));
        }
        let dims = self.ints_until("]")?;
        Ok(Slot::Exact(dims))
    }

    fn ints_until(&mut self, close: &str) -> Result<Vec<i64>, RuleParseError> {
        let mut dims = Vec::new();
        loop {
            if self.eat(close) {
                return Ok(dims);
            }
            let w = self.word().unwrap_or("");
            let d: i64 = w
                .parse()
                .map_err(|_| self.err(format!("expected an integer, found '{w}'")))?;
            dims.push(d);
            if !self.eat(",") {
                self.expect(close)?;
                return Ok(dims);
            }
        }
    }

    /// `:f32[3]`, `:?t[*]`, `:_[]` after a hole.
    fn type_pat(&mut self) -> Result<TypePat, RuleParseError> {
        let dtype = if self.peek() == Some('?') {
            Slot::Hole(self.hole()?)
        } else if self.eat("_") {
            Slot::Any
        } else {
            Slot::Exact(self.dtype()?)
        };
        let shape = self.shape_pat()?;
        Ok(TypePat { dtype, shape })
    }

    fn literal(&mut self, w: &str) -> Result<Term, RuleParseError> {
        let value = literal_value(w).ok_or_else(|| {
            self.err(format!(
                "'{w}' is not an operand: write a hole (?x), a literal, or an application in parentheses"
            ))
        })?;
        let mut dtype = None;
        if self.eat(":") {
            let d = self.dtype()?;
            self.expect("[")?;
            self.expect("]")?;
            let lit = Literal {
                value: fit_value(value, d).ok_or_else(|| {
                    self.err(format!("the literal {w} does not fit the dtype {d}"))
                })?,
                dtype: d,
                weak_type: false,
            };
            if !lit.is_well_typed() {
                return Err(self.err(format!("the literal {w} does not fit the dtype {d}")));
            }
            dtype = Some(d);
        }
        Ok(Term::Lit { value, dtype })
    }

    fn operand(&mut self, depth: usize) -> Result<Term, RuleParseError> {
        match self.peek() {
            Some('?') => {
                let slot = self.hole()?;
                let ty = if self.rest().starts_with(':') {
                    self.pos += 1;
                    Some(self.type_pat()?)
                } else {
                    None
                };
                if ty.is_some() && self.rhs {
                    return Err(self.err("types are written on the left side only"));
                }
                Ok(Term::Hole { slot, ty })
            }
            Some('(') => {
                self.pos += 1;
                if depth >= MAX_TERM_DEPTH {
                    return Err(self.err(format!("terms nest more than {MAX_TERM_DEPTH} deep")));
                }
                let t = self.term(depth + 1)?;
                self.expect(")")?;
                Ok(t)
            }
            _ => {
                let w = self
                    .word()
                    .ok_or_else(|| self.err(format!("expected an operand at {}", self.near())))?;
                self.literal(w)
            }
        }
    }

    /// A hole, a literal, or `prim[params] operands...`.
    fn term(&mut self, depth: usize) -> Result<Term, RuleParseError> {
        match self.peek() {
            Some('?') | Some('(') => return self.operand(depth),
            _ => {}
        }
        let start = self.pos;
        let w = self
            .word()
            .ok_or_else(|| self.err(format!("expected a term at {}", self.near())))?;
        if literal_value(w).is_some() {
            self.pos = start;
            return self.operand(depth);
        }
        let prim = w.to_owned();
        let builtin = Builtin::from_name(&prim);
        if self.rhs && builtin.is_none() {
            return Err(self.err(format!(
                "the right side applies '{prim}', which is not a built-in primitive"
            )));
        }
        let mut params = Vec::new();
        if self.rest().starts_with('[') {
            self.pos += 1;
            loop {
                if self.eat("]") {
                    break;
                }
                let name = self
                    .word()
                    .ok_or_else(|| self.err(format!("expected a param name at {}", self.near())))?
                    .to_owned();
                self.expect("=")?;
                let p = if self.peek() == Some('?') {
                    ParamPat::Hole(self.hole()?)
                } else {
                    let raw = self.raw_value()?;
                    let kind = builtin.and_then(|b| b.param_kind(&name));
                    match param_value(kind, &raw) {
                        Ok(v) => ParamPat::Value(v),
                        Err(m) if self.rhs => {
                            return Err(self.err(format!("param '{name}' of {prim}: {m}")))
                        }
                        // Compared as the printer writes the equation's value.
                        Err(_) => {
                            ParamPat::Text(raw.chars().filter(|c| !c.is_whitespace()).collect())
                        }
                    }
                };
                if params.iter().any(|(n, _)| *n == name) {
                    return Err(self.err(format!("param '{name}' is given twice")));
                }
                params.push((name, p));
                self.eat(",");
            }
        }
        let mut args = Vec::new();
        loop {
            match self.peek() {
                None | Some(')') | Some(',') => break,
                _ if self.rest().starts_with("=>") || self.is_word_at_keyword("if") => break,
                _ => args.push(self.operand(depth)?),
            }
        }
        Ok(Term::App { prim, params, args })
    }

    /// A param value's text: up to a space, ',' or ']' outside brackets and quotes.
    fn raw_value(&mut self) -> Result<String, RuleParseError> {
        self.skip_ws();
        let r = self.rest();
        let mut open: Vec<char> = Vec::new();
        let mut quote = false;
        let mut end = r.len();
        for (i, c) in r.char_indices() {
            if quote {
                if c == '\'' {
                    quote = false;
                }
                continue;
            }
            match c {
                '\'' => quote = true,
                '(' => open.push(')'),
                '[' => open.push(']'),
                '{' => open.push('}'),
                ')' | ']' | '}' if !open.is_empty() => {
                    let want = open.pop();
                    if want != Some(c) {
                        return Err(self.err("a param value is not closed"));
                    }
                }
                ']' | ')' => {
                    end = i;
                    break;
                }
                ',' if open.is_empty() => {
                    end = i;
                    break;
                }
                c if c.is_whitespace() && open.is_empty() => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        if quote || !open.is_empty() {
            return Err(self.err("a param value is not closed"));
        }
        if end == 0 {
            return Err(self.err(format!("expected a param value at {}", self.near())));
        }
        self.pos += end;
        Ok(r[..end].to_owned())
    }

    fn cond(&mut self) -> Result<Cond, RuleParseError> {
        let negated = self.is_word_at_keyword("not");
        if negated {
            self.pos += 3;
        }
        if self.peek() == Some('?') {
            if negated {
                return Err(self.err("write '?p != value' rather than 'not ?p = value'"));
            }
            let s = self.hole()?;
            let ne = self.eq_or_ne()?;
            let raw = self.raw_value()?;
            let text = match dtype_named(&raw) {
                Some(d) => d.numpy_name().to_owned(),
                None => raw.chars().filter(|c| !c.is_whitespace()).collect(),
            };
            return Ok(Cond::Param(s, text, ne));
        }
        let f = self
            .word()
            .ok_or_else(|| self.err(format!("expected a condition at {}", self.near())))?;
        self.expect("(")?;
        let a = self.hole()?;
        let test = match f {
            "float" => Some(Test::Float),
            "int" => Some(Test::Int),
            "bool" => Some(Test::Bool),
            "literal" => Some(Test::Literal),
            "scalar" => Some(Test::Scalar),
            "weak" => Some(Test::Weak),
            _ => None,
        };
        if let Some(t) = test {
            self.expect(")")?;
            return Ok(Cond::Is(t, a, negated));
        }
        if f == "same_type" {
            self.expect(",")?;
            let b = self.hole()?;
            self.expect(")")?;
            return Ok(Cond::SameType(a, b, negated));
        }
        if negated {
            return Err(self.err(format!(
                "'not' applies to tests such as float(?x), not to {f}: use '!='"
            )));
        }
        if !matches!(f, "dtype" | "rank" | "shape") {
            return Err(self.err(format!(
                "unknown condition '{f}' (float, int, bool, literal, scalar, weak, dtype, \
                 rank, shape, same_type)"
            )));
        }
        self.expect(")")?;
        let ne = self.eq_or_ne()?;
        match f {
            "dtype" => Ok(Cond::DType(a, self.dtype()?, ne)),
            "rank" => {
                let w = self.word().unwrap_or("");
                let r = w
                    .parse()
                    .map_err(|_| self.err(format!("expected a rank, found '{w}'")))?;
                Ok(Cond::Rank(a, r, ne))
            }
            "shape" => {
                self.expect("(")?;
                Ok(Cond::Shape(a, self.ints_until(")")?, ne))
            }
            _ => Err(self.err(format!(
                "unknown condition '{f}' (float, int, bool, literal, scalar, weak, dtype, \
                 rank, shape, same_type)"
            ))),
        }
    }

    fn eq_or_ne(&mut self) -> Result<bool, RuleParseError> {
        if self.eat("!=") {
            Ok(true)
        } else if self.eat("=") {
            Ok(false)
        } else {
            Err(self.err(format!("expected '=' or '!=' at {}", self.near())))
        }
    }
}

fn parse_rule(text: &str, line: usize) -> Result<Rule, RuleParseError> {
    let mut r = Reader {
        s: text,
        pos: 0,
        line,
        name: None,
        holes: Vec::new(),
        rhs: false,
    };
    // `name:` first.
    let name = match r.word() {
        Some(w) if r.rest().starts_with(':') => {
            r.pos += 1;
            w.to_owned()
        }
        _ => return Err(r.err("a rule starts with its name and ':' (name: lhs => rhs)")),
    };
    r.name = Some(name.clone());
    let body_start = r.pos;
    let lhs = r.term(0)?;
    if !matches!(lhs, Term::App { .. }) {
        return Err(
            r.err("the left side must be an application (prim ...), not a hole or a literal")
        );
    }
    r.expect("=>")?;
    r.rhs = true;
    let rhs = r.term(0)?;
    let mut conds = Vec::new();
    if r.is_word_at_keyword("if") {
        r.pos += 2;
        loop {
            conds.push(r.cond()?);
            if !r.eat(",") {
                break;
            }
        }
    }
    if r.peek().is_some() {
        return Err(r.err(format!("unexpected {} after the rule", r.near())));
    }
    check_rhs_literals(&rhs).map_err(|m| r.err(m))?;
    Ok(Rule {
        name,
        text: text[body_start..].trim().to_owned(),
        lhs,
        rhs,
        conds,
        holes: r.holes,
    })
}

/// An untyped literal on the right side takes its dtype from the other operands of its
/// application: one with none has to be typed.
fn check_rhs_literals(t: &Term) -> Result<(), String> {
    let mut stack = vec![t];
    while let Some(t) = stack.pop() {
        match t {
            Term::Lit { dtype: None, .. } => {
                return Err("an untyped literal on the right side must be an operand next to others: write its type (2.0:f32[])".into())
            }
            Term::App { args, .. } => {
                let typed = args
                    .iter()
                    .any(|a| !matches!(a, Term::Lit { dtype: None, .. }));
                for a in args {
                    if let Term::Lit { dtype: None, .. } = a {
                        if !typed {
                            return Err("an application's untyped literals need a typed operand beside them: write the literal's type (2.0:f32[])".into());
                        }
                    } else {
                        stack.push(a);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn dtype_named(w: &str) -> Option<DType> {
    match w {
        "f32" => Some(DType::F32),
        "f64" => Some(DType::F64),
        "i32" => Some(DType::I32),
        "i64" => Some(DType::I64),
        "bool" => Some(DType::Bool),
        _ => DType::from_name(w),
    }
}

fn literal_value(w: &str) -> Option<LitValue> {
    match w {
        "True" => return Some(LitValue::Bool(true)),
        "False" => return Some(LitValue::Bool(false)),
        "inf" => return Some(LitValue::Float(f64::INFINITY)),
        "-inf" => return Some(LitValue::Float(f64::NEG_INFINITY)),
        "nan" => return Some(LitValue::Float(f64::NAN)),
        _ => {}
    }
    if !w.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.') {
        return None;
    }
    if let Ok(i) = w.parse::<i64>() {
        return Some(LitValue::Int(i));
    }
    w.parse::<f64>().ok().map(LitValue::Float)
}

/// The value in the kind its dtype takes (`1` as `1.0` for a float dtype).
fn fit_value(v: LitValue, d: DType) -> Option<LitValue> {
    match (v, d) {
        (LitValue::Bool(b), DType::Bool) => Some(LitValue::Bool(b)),
        (LitValue::Int(i), d) if d.is_float() => Some(LitValue::Float(i as f64)),
        (LitValue::Int(i), d) if d.is_int() => Some(LitValue::Int(i)),
        (LitValue::Float(f), d) if d.is_float() => Some(LitValue::Float(f)),
        (LitValue::Float(f), d) if d.is_int() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
            Some(LitValue::Int(f as i64))
        }
        _ => None,
    }
}

fn same_number(a: LitValue, b: LitValue) -> bool {
    match (a, b) {
        (LitValue::Bool(x), LitValue::Bool(y)) => x == y,
        (LitValue::Bool(_), _) | (_, LitValue::Bool(_)) => false,
        (LitValue::Int(x), LitValue::Int(y)) => x == y,
        (x, y) => {
            let f = |v: LitValue| match v {
                LitValue::Int(i) => i as f64,
                LitValue::Float(f) => f,
                LitValue::Bool(_) => f64::NAN,
            };
            let (x, y) = (f(x), f(y));
            x == y || (x.is_nan() && y.is_nan())
        }
    }
}

/// A right side's param value written out, read as the param's kind takes it.
fn param_value(kind: Option<ParamKind>, raw: &str) -> Result<Param, String> {
    let raw = raw.trim();
    let kind = kind.ok_or("the primitive has no such param")?;
    let ints = |s: &str| -> Option<Vec<i64>> {
        let inner = s.strip_prefix('(')?.strip_suffix(')')?;
        inner
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().ok())
            .collect()
    };
    let string = |s: &str| -> String {
        s.strip_prefix('\'')
            .and_then(|s| s.strip_suffix('\''))
            .unwrap_or(s)
            .to_owned()
    };
    let bad = || format!("'{raw}' is not a {kind}");
    Ok(match kind {
        ParamKind::Int => Param::Int(raw.parse().map_err(|_| bad())?),
        ParamKind::Bool => match raw {
            "True" => Param::Bool(true),
            "False" => Param::Bool(false),
            _ => return Err(bad()),
        },
        ParamKind::IntOrBool => match raw {
            "True" => Param::Bool(true),
            "False" => Param::Bool(false),
            _ => Param::Int(raw.parse().map_err(|_| bad())?),
        },
        ParamKind::Str => Param::Str(string(raw).into()),
        ParamKind::OptStr | ParamKind::NoneOnly | ParamKind::OptOpaque | ParamKind::OptJaxpr
            if raw == "None" =>
        {
            Param::None
        }
        ParamKind::OptStr => Param::Str(string(raw).into()),
        ParamKind::OptInts if raw == "None" => Param::None,
        ParamKind::Ints | ParamKind::OptInts | ParamKind::AxisNames if raw.starts_with('(') => {
            Param::ints(&ints(raw).ok_or_else(bad)?)
        }
        ParamKind::Bools => {
            let inner = raw
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(bad)?;
            let v: Option<Vec<bool>> = inner
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| match p {
                    "True" => Some(true),
                    "False" => Some(false),
                    _ => None,
                })
                .collect();
            Param::Bools(v.ok_or_else(bad)?.into())
        }
        ParamKind::DType | ParamKind::OptDType => match raw {
            "None" if kind == ParamKind::OptDType => Param::None,
            _ => Param::DType(dtype_named(raw).ok_or_else(bad)?),
        },
        ParamKind::GatherMode => Param::Mode(
            GatherScatterMode::from_name(raw.trim_start_matches("GatherScatterMode."))
                .ok_or_else(bad)?,
        ),
        ParamKind::OptScalar => match literal_value(raw) {
            Some(LitValue::Bool(b)) => Param::Bool(b),
            Some(LitValue::Int(i)) => Param::Int(i),
            Some(LitValue::Float(f)) => Param::Float(f),
            None if raw == "None" => Param::None,
            None => return Err(bad()),
        },
        _ => {
            return Err(format!(
                "a {kind} cannot be written on the right side: bind it with a hole on the left (name=?p)"
            ))
        }
    })
}

// ---------------------------------------------------------------------------- matching

/// What a hole holds.
#[derive(Clone, Debug)]
enum Bound {
    Atom(Atom),
    Param(Param),
    DType(DType),
    Shape(Vec<i64>),
}

/// The equations emitted so far into the jaxpr being built: what matching needs of
/// them (the primitive, the inputs, the params, the number of outputs).
struct Emitted<'s> {
    prim: Primitive,
    inputs: std::ops::Range<usize>,
    params: ParamsRef<'s>,
    outs: usize,
}

enum ParamsRef<'s> {
    Src(&'s Params),
    Own(Params),
}

impl ParamsRef<'_> {
    fn get(&self) -> &Params {
        match self {
            ParamsRef::Src(p) => p,
            ParamsRef::Own(p) => p,
        }
    }
}

/// The lengths of a [`Pass`]'s tables at one point.
struct Mark {
    builder: (usize, usize, usize),
    lits: usize,
    def: usize,
    eqns: usize,
    inputs: usize,
}

/// One jaxpr being rebuilt with the rules applied.
struct Pass<'s, 'r> {
    rules: &'r RuleSet,
    b: JaxprBuilder,
    /// The literals added to `b`, by id.
    lits: Vec<Literal>,
    /// Per new variable: the index in `eqns` of its equation, or `NONE`.
    def: Vec<u32>,
    eqns: Vec<Emitted<'s>>,
    /// The inputs of `eqns`, end to end.
    inputs: Vec<Atom>,
    fired: &'r mut [u64],
}

const NONE: u32 = u32::MAX;

impl<'s, 'r> Pass<'s, 'r> {
    fn aval(&self, a: Atom) -> AbstractValue {
        match a {
            Atom::Var(v) => {
                self.b.var_aval(v).cloned().unwrap_or_else(|| {
                    unreachable!("variables of the jaxpr being built have types")
                })
            }
            Atom::Lit(l) => self.lits[l.index()].aval(),
        }
    }

    fn literal(&mut self, lit: Literal) -> Atom {
        self.lits.push(lit);
        self.b.literal(lit)
    }

    fn new_var(&mut self, aval: AbstractValue) -> VarId {
        let v = self.b.new_var(aval);
        self.def.push(NONE);
        v
    }

    fn emit(
        &mut self,
        prim: Primitive,
        inputs: Vec<Atom>,
        params: ParamsRef<'s>,
        outvars: Vec<VarId>,
    ) {
        let owned = params.get().clone();
        self.record(prim.clone(), &inputs, params, &outvars);
        self.b.add_eqn_with_outvars(prim, inputs, owned, outvars);
    }

    /// Notes an equation added to the builder (its outputs already bound there), for
    /// matching later equations against it.
    fn record(
        &mut self,
        prim: Primitive,
        inputs: &[Atom],
        params: ParamsRef<'s>,
        outvars: &[VarId],
    ) {
        let start = self.inputs.len();
        self.inputs.extend_from_slice(inputs);
        if let Some(last) = outvars.iter().map(|o| o.index()).max() {
            if self.def.len() <= last {
                self.def.resize(last + 1, NONE);
            }
        }
        let k = self.eqns.len() as u32;
        for &o in outvars {
            self.def[o.index()] = k;
        }
        self.eqns.push(Emitted {
            prim,
            inputs: start..self.inputs.len(),
            params,
            outs: outvars.len(),
        });
    }

    fn mark(&self) -> Mark {
        Mark {
            builder: self.b.mark(),
            lits: self.lits.len(),
            def: self.def.len(),
            eqns: self.eqns.len(),
            inputs: self.inputs.len(),
        }
    }

    fn truncate(&mut self, m: &Mark) {
        self.b.truncate(m.builder);
        self.lits.truncate(m.lits);
        self.def.truncate(m.def);
        self.eqns.truncate(m.eqns);
        self.inputs.truncate(m.inputs);
    }

    /// Tries the rules rooted at this (already mapped) equation; the atom replacing its
    /// output when one applies.
    fn try_rules(
        &mut self,
        prim: &str,
        inputs: &[Atom],
        params: &Params,
        out: &AbstractValue,
    ) -> Result<Option<Atom>, RewriteError> {
        let Some(cands) = self.rules.by_root.get(prim) else {
            return Ok(None);
        };
        for &ri in cands {
            let rule = &self.rules.rules[ri];
            let mut bound: Vec<Option<Bound>> = vec![None; rule.holes.len()];
            if !self.match_root(rule, inputs, params, &mut bound) {
                continue;
            }
            if !rule.conds.iter().all(|c| self.holds(c, &bound)) {
                continue;
            }
            // What a right side that does not apply emitted is taken back.
            let mark = self.mark();
            let Some(atom) = self.build_rhs(rule, &bound)? else {
                self.truncate(&mark);
                continue;
            };
            if self.aval(atom) != *out {
                self.truncate(&mark);
                continue;
            }
            self.fired[ri] += 1;
            return Ok(Some(atom));
        }
        Ok(None)
    }

    fn match_root(
        &self,
        rule: &Rule,
        inputs: &[Atom],
        params: &Params,
        bound: &mut [Option<Bound>],
    ) -> bool {
        let Term::App {
            params: pp, args, ..
        } = &rule.lhs
        else {
            return false;
        };
        if !match_params(pp, params, bound) || args.len() != inputs.len() {
            return false;
        }
        let mut stack: Vec<(&Term, Atom)> = args.iter().zip(inputs.iter().copied()).collect();
        while let Some((t, a)) = stack.pop() {
            match t {
                Term::Hole { slot, ty } => {
                    if let Some(ty) = ty {
                        let av = self.aval(a);
                        if !match_type(ty, &av, bound) {
                            return false;
                        }
                    }
                    match &bound[*slot] {
                        None => bound[*slot] = Some(Bound::Atom(a)),
                        Some(Bound::Atom(b)) => {
                            if !self.same_atom(*b, a) {
                                return false;
                            }
                        }
                        Some(_) => return false,
                    }
                }
                Term::Lit { value, dtype } => {
                    let Atom::Lit(l) = a else { return false };
                    let lit = &self.lits[l.index()];
                    if dtype.is_some_and(|d| d != lit.dtype) || !same_number(*value, lit.value) {
                        return false;
                    }
                }
                Term::App {
                    prim, params, args, ..
                } => {
                    let Atom::Var(v) = a else { return false };
                    let k = self.def[v.index()];
                    if k == NONE {
                        return false;
                    }
                    let e = &self.eqns[k as usize];
                    if e.outs != 1 || e.prim.name() != prim || e.inputs.len() != args.len() {
                        return false;
                    }
                    if !match_params(params, e.params.get(), bound) {
                        return false;
                    }
                    let ins = &self.inputs[e.inputs.clone()];
                    stack.extend(args.iter().zip(ins.iter().copied()));
                }
            }
        }
        true
    }

    fn same_atom(&self, a: Atom, b: Atom) -> bool {
        match (a, b) {
            (Atom::Var(x), Atom::Var(y)) => x == y,
            (Atom::Lit(x), Atom::Lit(y)) => {
                let (x, y) = (&self.lits[x.index()], &self.lits[y.index()]);
                x.dtype == y.dtype && x.weak_type == y.weak_type && same_number(x.value, y.value)
            }
            _ => false,
        }
    }

    fn holds(&self, c: &Cond, bound: &[Option<Bound>]) -> bool {
        let atom = |s: usize| match &bound[s] {
            Some(Bound::Atom(a)) => Some(*a),
            _ => None,
        };
        let aval = |s: usize| atom(s).map(|a| self.aval(a));
        match c {
            Cond::Is(t, s, neg) => {
                let yes = match (t, atom(*s)) {
                    (Test::Literal, Some(a)) => matches!(a, Atom::Lit(_)),
                    (_, Some(a)) => {
                        let av = self.aval(a);
                        match t {
                            Test::Float => av.dtype.is_float(),
                            Test::Int => av.dtype.is_int(),
                            Test::Bool => av.dtype == DType::Bool,
                            Test::Scalar => av.shape.rank() == 0,
                            Test::Weak => av.weak_type,
                            Test::Literal => false,
                        }
                    }
                    (_, None) => return false,
                };
                yes != *neg
            }
            Cond::DType(s, d, ne) => aval(*s).is_some_and(|av| (av.dtype == *d) != *ne),
            Cond::Rank(s, r, ne) => aval(*s).is_some_and(|av| (av.shape.rank() == *r) != *ne),
            Cond::Shape(s, dims, ne) => {
                aval(*s).is_some_and(|av| (av.shape.dims() == dims.as_slice()) != *ne)
            }
            Cond::SameType(a, b, neg) => match (aval(*a), aval(*b)) {
                (Some(x), Some(y)) => x.same_type(&y) != *neg,
                _ => false,
            },
            Cond::Param(s, text, ne) => {
                let have = match &bound[*s] {
                    Some(Bound::Param(p)) => format_param_flat(p),
                    Some(Bound::DType(d)) => Some(d.numpy_name().to_owned()),
                    Some(Bound::Shape(dims)) => format_param_flat(&Param::ints(dims)),
                    _ => None,
                };
                have.is_some_and(|h| {
                    let h: String = h.chars().filter(|c| !c.is_whitespace()).collect();
                    (h == *text) != *ne
                })
            }
        }
    }

    /// Emits the right side; `None` when a hole it uses holds the wrong kind of thing.
    fn build_rhs(
        &mut self,
        rule: &Rule,
        bound: &[Option<Bound>],
    ) -> Result<Option<Atom>, RewriteError> {
        // Post-order over the term: (term, children done).
        let mut stack: Vec<(&Term, bool)> = vec![(&rule.rhs, false)];
        let mut vals: Vec<Option<Atom>> = Vec::new();
        while let Some((t, done)) = stack.pop() {
            match t {
                Term::Hole { slot, .. } => match &bound[*slot] {
                    Some(Bound::Atom(a)) => vals.push(Some(*a)),
                    _ => return Ok(None),
                },
                Term::Lit { value, dtype } => {
                    // Untyped: a placeholder the application fills in.
                    match dtype {
                        Some(d) => {
                            let Some(v) = fit_value(*value, *d) else {
                                return Ok(None);
                            };
                            let a = self.literal(Literal {
                                value: v,
                                dtype: *d,
                                weak_type: false,
                            });
                            vals.push(Some(a));
                        }
                        None => vals.push(None),
                    }
                }
                Term::App { prim, params, args } if done => {
                    let mut ins: Vec<Option<Atom>> = vals.split_off(vals.len() - args.len());
                    // Untyped literals: weakly typed, in the dtype of a typed operand.
                    if ins.iter().any(Option::is_none) {
                        let Some(d) = ins.iter().flatten().next().map(|&a| self.aval(a).dtype)
                        else {
                            return Ok(None);
                        };
                        for (slot, arg) in ins.iter_mut().zip(args) {
                            if slot.is_none() {
                                let Term::Lit { value, .. } = arg else {
                                    return Ok(None);
                                };
                                let Some(v) = fit_value(*value, d) else {
                                    return Ok(None);
                                };
                                *slot = Some(self.literal(Literal {
                                    value: v,
                                    dtype: d,
                                    weak_type: true,
                                }));
                            }
                        }
                    }
                    let ins: Vec<Atom> = ins.into_iter().flatten().collect();
                    let mut ps = Vec::with_capacity(params.len());
                    for (name, p) in params {
                        let v = match p {
                            ParamPat::Value(v) => v.clone(),
                            ParamPat::Hole(s) => match &bound[*s] {
                                Some(Bound::Param(v)) => v.clone(),
                                Some(Bound::DType(d)) => Param::DType(*d),
                                Some(Bound::Shape(dims)) => Param::ints(dims),
                                _ => return Ok(None),
                            },
                            ParamPat::Text(_) => return Ok(None),
                        };
                        ps.push((name.as_str(), v));
                    }
                    let params = Params::new(ps);
                    let Some(builtin) = Builtin::from_name(prim) else {
                        return Ok(None);
                    };
                    let prim: Primitive = builtin.into();
                    let outs = self
                        .b
                        .add_eqn(prim.clone(), ins.clone(), params.clone())
                        .map_err(|e| RewriteError::IllTypedRhs {
                            rule: rule.name.clone(),
                            message: e.to_string(),
                        })?;
                    self.record(prim, &ins, ParamsRef::Own(params), &outs);
                    if outs.len() != 1 {
                        return Ok(None);
                    }
                    vals.push(Some(Atom::Var(outs[0])));
                }
                Term::App { args, .. } => {
                    stack.push((t, true));
                    for a in args.iter().rev() {
                        stack.push((a, false));
                    }
                }
            }
        }
        Ok(vals.pop().flatten())
    }
}

fn match_params(pats: &[(String, ParamPat)], params: &Params, bound: &mut [Option<Bound>]) -> bool {
    for (name, pat) in pats {
        let Some(have) = params.get(name) else {
            return false;
        };
        match pat {
            ParamPat::Text(t) => {
                let Some(s) = format_param_flat(have) else {
                    return false;
                };
                if !s.chars().filter(|c| !c.is_whitespace()).eq(t.chars()) {
                    return false;
                }
            }
            ParamPat::Hole(slot) => match &bound[*slot] {
                None => bound[*slot] = Some(Bound::Param(have.clone())),
                Some(Bound::Param(p)) => {
                    if p != have {
                        return false;
                    }
                }
                Some(Bound::DType(d)) => {
                    if !matches!(have, Param::DType(h) if h == d) {
                        return false;
                    }
                }
                Some(Bound::Shape(dims)) => {
                    if !matches!(have, Param::Ints(h) if **h == **dims) {
                        return false;
                    }
                }
                Some(Bound::Atom(_)) => return false,
            },
            ParamPat::Value(v) => {
                if v != have {
                    return false;
                }
            }
        }
    }
    true
}

fn match_type(ty: &TypePat, av: &AbstractValue, bound: &mut [Option<Bound>]) -> bool {
    match &ty.dtype {
        Slot::Any => {}
        Slot::Exact(d) => {
            if *d != av.dtype {
                return false;
            }
        }
        Slot::Hole(s) => match &bound[*s] {
            None => bound[*s] = Some(Bound::DType(av.dtype)),
            Some(Bound::DType(d)) => {
                if *d != av.dtype {
                    return false;
                }
            }
            Some(Bound::Param(Param::DType(d))) => {
                if *d != av.dtype {
                    return false;
                }
            }
            Some(_) => return false,
        },
    }
    match &ty.shape {
        Slot::Any => true,
        Slot::Exact(dims) => av.shape.dims() == dims.as_slice(),
        Slot::Hole(s) => match &bound[*s] {
            None => {
                bound[*s] = Some(Bound::Shape(av.shape.dims().to_vec()));
                true
            }
            Some(Bound::Shape(dims)) => av.shape.dims() == dims.as_slice(),
            Some(Bound::Param(Param::Ints(dims))) => av.shape.dims() == &**dims,
            Some(_) => false,
        },
    }
}

// ------------------------------------------------------------------------------ passes

/// What [`rewrite`] made (see [`RuleSet`] for an example).
#[derive(Debug)]
#[non_exhaustive]
pub struct Rewritten {
    /// The rewritten jaxpr (same inputs and output types).
    pub jaxpr: Jaxpr,
    /// How many times each rule applied, in the rule set's order.
    pub fired: Vec<u64>,
    /// How many passes over the program changed something.
    pub iterations: usize,
}

/// How many of the last passes [`RewriteError::NoFixpoint`] names the rules of.
const RECENT_PASSES: usize = 8;

/// The default bound on passes for [`rewrite`].
pub const DEFAULT_MAX_ITERATIONS: usize = 100;

/// Applies the rules everywhere until none applies (at most `max_iterations` passes
/// that change something), then removes dead equations (keeping every input) and
/// typechecks. (Rewritten equations are emitted in dependency order: no toposort.)
///
/// # Examples
/// ```
/// use ferrax_ir::passes::rewrite::{rewrite, RewriteError, RuleSet, ALGEBRAIC_RULES};
/// use ferrax_ir::text::parse_jaxpr;
/// let algebra = RuleSet::parse(ALGEBRAIC_RULES)?;
/// // Inside a `jit` body too: `x * 1 + 0` is `x`.
/// let j = parse_jaxpr(
///     "{ lambda ; a:f32[3]. let b:f32[3] = jit[name=f jaxpr={ lambda ; c:f32[3]. let \
///      d:f32[3] = mul c 1.0:f32[]; e:f32[3] = add d 0.0:f32[] in (e,) }] a in (b,) }",
/// )?;
/// let out = rewrite(&j, &algebra, 10)?;
/// let body = out.jaxpr.eqns()[0].sub_jaxprs().next().unwrap().jaxpr().clone();
/// assert_eq!(body.to_string(), "{ lambda ; a:f32[3]. let  in (a,) }"); // no equations left
/// assert_eq!(out.fired.iter().sum::<u64>(), 2);
///
/// // Rules that undo one another never reach a fixpoint.
/// let cycle = RuleSet::parse("there: neg ?x => sub 0.0 ?x\nback: sub 0.0 ?x => neg ?x")?;
/// let j = parse_jaxpr("{ lambda ; a:f32[]. let b:f32[] = neg a in (b,) }")?;
/// let e = rewrite(&j, &cycle, 10).unwrap_err();
/// assert!(matches!(e, RewriteError::NoFixpoint { iterations: 10, .. }), "{e}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn rewrite(
    jaxpr: &Jaxpr,
    rules: &RuleSet,
    max_iterations: usize,
) -> Result<Rewritten, RewriteError> {
    let mut fired = vec![0u64; rules.len()];
    // The rules that fired in each of the last few passes (a cycle of rules shows in
    // them all).
    let mut recent: std::collections::VecDeque<Vec<u64>> = Default::default();
    let mut current: Option<Jaxpr> = None;
    let mut iterations = 0;
    loop {
        let src = current.as_ref().unwrap_or(jaxpr);
        let mut now = vec![0u64; rules.len()];
        let next = pass(src, rules, &mut now)?;
        let Some(next) = next else { break };
        if iterations == max_iterations {
            recent.push_back(now);
            let names = rules
                .rules
                .iter()
                .enumerate()
                .filter(|(i, _)| recent.iter().any(|n| n[*i] > 0))
                .map(|(_, r)| r.name.clone())
                .collect();
            return Err(RewriteError::NoFixpoint {
                iterations: max_iterations,
                rules: names,
            });
        }
        for (f, n) in fired.iter_mut().zip(&now) {
            *f += n;
        }
        if recent.len() == RECENT_PASSES {
            recent.pop_front();
        }
        recent.push_back(now);
        iterations += 1;
        current = Some(next);
    }
    // Equations are emitted in dependency order already: no toposort is needed.
    let rewritten = current.as_ref().unwrap_or(jaxpr);
    let (pruned, used_in) = dce(rewritten, &vec![true; rewritten.outvars().len()])?;
    let all = vec![true; used_in.len()];
    let out = widen(pruned, &used_in, &all, &rewritten.in_avals());
    crate::typecheck(&out).map_err(|e| PassError::IllTyped {
        eqn: None,
        message: e.to_string(),
    })?;
    Ok(Rewritten {
        jaxpr: out,
        fired,
        iterations,
    })
}

/// One pass over the jaxpr and every sub-jaxpr (each shared one once, innermost first,
/// with no recursion); `None` when no rule applied anywhere.
fn pass(root: &Jaxpr, rules: &RuleSet, fired: &mut [u64]) -> Result<Option<Jaxpr>, RewriteError> {
    // Post-order over the distinct sub-jaxprs.
    let mut order: Vec<&Jaxpr> = Vec::new();
    let mut seen: HashSet<*const Jaxpr> = HashSet::new();
    let mut stack: Vec<(&Jaxpr, bool)> = vec![(root, false)];
    while let Some((j, expanded)) = stack.pop() {
        if expanded {
            order.push(j);
            continue;
        }
        if !seen.insert(j as *const Jaxpr) {
            continue;
        }
        stack.push((j, true));
        for e in j.eqns() {
            for sub in e.sub_jaxprs() {
                stack.push((sub.jaxpr(), false));
            }
        }
    }
    // The rewritten version of each sub-jaxpr that changed.
    let mut new: HashMap<*const Jaxpr, Arc<Jaxpr>> = HashMap::new();
    let mut top = None;
    for j in order {
        if let Some(out) = pass_one(j, rules, fired, &new)? {
            if std::ptr::eq(j, root) {
                top = Some(out);
            } else {
                new.insert(j as *const Jaxpr, Arc::new(out));
            }
        }
    }
    // A changed sub-jaxpr changes the equations holding it, up to the root.
    Ok(top)
}

/// The params of an equation with its changed sub-jaxprs replaced; `None` if none
/// changed.
fn new_params(e: &Eqn, new: &HashMap<*const Jaxpr, Arc<Jaxpr>>) -> Option<Params> {
    if new.is_empty() || e.sub_jaxprs().next().is_none() {
        return None;
    }
    let swap = |cj: &ClosedJaxpr| -> Option<ClosedJaxpr> {
        new.get(&(&**cj.jaxpr() as *const Jaxpr))
            .map(|j| ClosedJaxpr::from_parts(Arc::clone(j), cj.consts().to_vec()))
    };
    let mut changed = false;
    let pairs: Vec<(&str, Param)> = e
        .params()
        .iter()
        .map(|(n, p)| {
            let p = match p {
                Param::Jaxpr(cj) => match swap(cj) {
                    Some(c) => {
                        changed = true;
                        Param::Jaxpr(c)
                    }
                    None => p.clone(),
                },
                Param::Jaxprs(cjs) => {
                    let swapped: Vec<ClosedJaxpr> = cjs
                        .iter()
                        .map(|cj| {
                            swap(cj)
                                .inspect(|_| changed = true)
                                .unwrap_or_else(|| cj.clone())
                        })
                        .collect();
                    Param::Jaxprs(Arc::new(swapped))
                }
                other => other.clone(),
            };
            (n, p)
        })
        .collect();
    changed.then(|| Params::new(pairs))
}

/// Rebuilds one jaxpr with the rules applied at each equation, in order (a rewrite's
/// result is seen by the equations after it); `None` if nothing changed.
fn pass_one(
    src: &Jaxpr,
    rules: &RuleSet,
    fired: &mut [u64],
    new: &HashMap<*const Jaxpr, Arc<Jaxpr>>,
) -> Result<Option<Jaxpr>, RewriteError> {
    let mut p = Pass {
        rules,
        b: JaxprBuilder::new(),
        lits: Vec::new(),
        def: Vec::new(),
        eqns: Vec::with_capacity(src.eqns().len()),
        inputs: Vec::new(),
        fired,
    };
    let mut changed = false;
    let mut map: Vec<Option<Atom>> = vec![None; src.num_vars()];
    for &v in src.constvars() {
        let nv = p.b.add_constvar(src.var_aval(v).clone());
        p.def.push(NONE);
        map[v.index()] = Some(Atom::Var(nv));
    }
    for &v in src.invars() {
        let nv = p.b.add_invar(src.var_aval(v).clone());
        p.def.push(NONE);
        map[v.index()] = Some(Atom::Var(nv));
    }
    let read = |p: &mut Pass<'_, '_>, map: &[Option<Atom>], a: Atom| -> Atom {
        match a {
            Atom::Var(v) => map[v.index()]
                .unwrap_or_else(|| unreachable!("a well-typed jaxpr binds before it uses")),
            Atom::Lit(l) => p.literal(*src.literal(l)),
        }
    };
    for e in src.eqns() {
        let inputs: Vec<Atom> = e.inputs().iter().map(|&a| read(&mut p, &map, a)).collect();
        let swapped = new_params(e, new);
        changed |= swapped.is_some();
        if e.outvars().len() == 1 && !e.has_effect() {
            let out = src.var_aval(e.outvars()[0]);
            let params = swapped.as_ref().unwrap_or(e.params());
            if let Some(atom) = p.try_rules(e.primitive().name(), &inputs, params, out)? {
                map[e.outvars()[0].index()] = Some(atom);
                changed = true;
                continue;
            }
        }
        let outvars: Vec<VarId> = e
            .outvars()
            .iter()
            .map(|&v| {
                let nv = p.new_var(src.var_aval(v).clone());
                map[v.index()] = Some(Atom::Var(nv));
                nv
            })
            .collect();
        let params = match swapped {
            Some(ps) => ParamsRef::Own(ps),
            None => ParamsRef::Src(e.params()),
        };
        p.emit(e.primitive().clone(), inputs, params, outvars);
    }
    if !changed {
        return Ok(None);
    }
    let outs: Vec<Atom> = src
        .outvars()
        .iter()
        .map(|&a| read(&mut p, &map, a))
        .collect();
    Ok(Some(p.b.build_trusted(outs)))
}
