//! The jaxpr printer: JAX's current text format, always broken over lines.
//!
//! ```text
//! { lambda a:f32[8]; b:f32[8] c:f32[]. let
//!     d:f32[8] = mul b a
//!     e:f32[8] = add d 2.0:f32[]
//!     f:f32[] = reduce_sum[axes=(0,) out_sharding=None] e
//!   in (f,) }
//! ```
//!
//! # Layout
//! - The header is `{ lambda ` + constvar binders + `; ` + invar binders + `. let`; binders
//!   are `name:type` separated by single spaces.
//! - One equation per line, indented 4 more than its jaxpr's base: output binders, ` = `,
//!   the primitive, `[k=v ...]` (params sorted by name; omitted when there are none), then
//!   each input preceded by a space. An equation with no outputs is printed `= prim ...`
//!   (a leading `=` with nothing before it; JAX prints no `=` at all, which is ambiguous
//!   when equations run on), and the parser reads both forms.
//! - The outputs: `in (a,)` for one, `in (a, b)` for several, `in ()` for none, indented 2
//!   more than the base, followed by ` }`.
//! - An equation with a jaxpr-valued param puts its params one per line, 2 more than the
//!   equation, then `]` and the inputs at the equation's indent. A jaxpr param's value
//!   starts on its param line (`body_jaxpr={ lambda ...`) and its base is that line's
//!   indent; a tuple of jaxprs prints `name=(`, each jaxpr on its own line 2 further in
//!   (that is its base), then `)`. (An empty tuple of jaxprs is printed `()` like any
//!   empty tuple and does not by itself put the params on separate lines.)
//! - Past [`MAX_INDENT_DEPTH`] levels of nesting, nested jaxprs are not indented further,
//!   so the output stays linear in the size of the jaxpr however deep it nests.
//!
//! # Names
//! Variables are named `a`, `b`, ..., `z`, `ba`, ... ([`crate::text::alphabetic_name`]) in
//! the order they are bound: constvars, invars, then each equation's outputs, then the
//! variables of the jaxprs in that equation's params (in param order), and so on. One
//! counter runs through the whole text, so nested jaxprs continue it, except that the
//! jaxpr of a `jit` equation starts again from `a`; after the `jit` equation the counter
//! resumes where it was before it.
//!
//! # Cost
//! One pass over the jaxpr writing into one `String`, with an explicit stack for nested
//! jaxprs (no recursion), and each jaxpr's names in a `Vec` indexed by variable id.

use crate::aval::AbstractValue;
use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitValue, Literal, VarId};
use crate::params::Param;
use crate::primitive::Builtin;
use crate::text::lexer::{is_single_word, quote_into};
use crate::text::python_float_repr;
use std::fmt::Write as _;

/// Nesting deeper than this many levels is printed without further indentation.
pub const MAX_INDENT_DEPTH: usize = 32;

const UNNAMED: usize = usize::MAX;

/// Prints a jaxpr in JAX's text format (see the module docs for the exact layout).
pub fn print_jaxpr(j: &Jaxpr) -> String {
    let mut out = String::with_capacity(64 + 48 * j.eqns().len());
    Printer::default().run(j, &mut out);
    out
}

/// Prints a closed jaxpr (its constants are not printed; its constvars are).
pub fn print_closed_jaxpr(j: &ClosedJaxpr) -> String {
    print_jaxpr(j.jaxpr())
}

/// A param value that has no nested jaxpr, printed on one line as the printer prints it;
/// `None` for a jaxpr or a non-empty tuple of jaxprs (an empty one prints `()`).
pub fn format_param_flat(p: &Param) -> Option<String> {
    let mut s = String::new();
    write_param_flat(&mut s, p).then_some(s)
}

/// One jaxpr being printed.
struct Frame<'j> {
    jaxpr: &'j Jaxpr,
    /// Name number of each variable, [`UNNAMED`] until bound.
    names: Vec<usize>,
    /// Indent of the jaxpr's base: equations at `base + 4`, `in` at `base + 2`.
    base: usize,
    depth: usize,
    /// Next equation to print (or the one whose params are being printed).
    eqn: usize,
    /// Printing the params of equation `eqn` one per line.
    in_params: bool,
    /// Next param of that equation.
    param: usize,
    /// For a tuple of jaxprs: how many of its items have been started.
    sub: usize,
    /// The name counter to restore when this jaxpr is done (a `jit`'s jaxpr).
    restore: Option<usize>,
}

impl<'j> Frame<'j> {
    fn new(jaxpr: &'j Jaxpr, base: usize, depth: usize, restore: Option<usize>) -> Frame<'j> {
        Frame {
            jaxpr,
            names: vec![UNNAMED; jaxpr.num_vars()],
            base,
            depth,
            eqn: 0,
            in_params: false,
            param: 0,
            sub: 0,
            restore,
        }
    }
}

#[derive(Default)]
struct Printer {
    counter: usize,
}

impl Printer {
    fn run(&mut self, top: &Jaxpr, out: &mut String) {
        let mut stack: Vec<Frame<'_>> = vec![Frame::new(top, 0, 0, None)];
        self.header(&mut stack[0], out);
        while let Some(f) = stack.last_mut() {
            let j = f.jaxpr;
            if f.in_params {
                if let Some(child) = self.params(f, out) {
                    stack.push(child);
                    let last = stack.len() - 1;
                    self.header(&mut stack[last], out);
                }
                continue;
            }
            if let Some(e) = j.eqns().get(f.eqn) {
                self.eqn_head(f, e, out);
                if has_jaxpr_param(e) {
                    out.push_str("[\n");
                    f.in_params = true;
                    f.param = 0;
                    f.sub = 0;
                } else {
                    write_params_inline(out, e);
                    self.inputs(f, e, out);
                    out.push('\n');
                    f.eqn += 1;
                }
                continue;
            }
            // Done with this jaxpr: its outputs, then back to the parent.
            indent(out, f.base + 2);
            out.push_str("in (");
            let outs = j.outvars();
            for (i, &a) in outs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                self.atom(f, a, out);
            }
            out.push_str(if outs.len() == 1 { ",) }" } else { ") }" });
            if let Some(c) = f.restore {
                self.counter = c;
            }
            stack.pop();
            if !stack.is_empty() {
                out.push('\n');
            }
        }
    }

    /// `{ lambda consts; invars. let` and a newline.
    fn header(&mut self, f: &mut Frame<'_>, out: &mut String) {
        let j = f.jaxpr;
        out.push_str("{ lambda ");
        for (i, &v) in j.constvars().iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            self.binder(f, v, out);
        }
        out.push_str("; ");
        for (i, &v) in j.invars().iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            self.binder(f, v, out);
        }
        out.push_str(". let\n");
    }

    /// Indent, output binders, ` = ` (or `= ` with no outputs), primitive name.
    fn eqn_head(&mut self, f: &mut Frame<'_>, e: &Eqn, out: &mut String) {
        indent(out, f.base + 4);
        for (i, &v) in e.outvars().iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            self.binder(f, v, out);
        }
        out.push_str(if e.outvars().is_empty() { "= " } else { " = " });
        out.push_str(e.primitive().name());
    }

    fn inputs(&mut self, f: &mut Frame<'_>, e: &Eqn, out: &mut String) {
        for &a in e.inputs() {
            out.push(' ');
            self.atom(f, a, out);
        }
    }

    /// Continues the one-per-line params of the current equation of `f`. Returns a frame
    /// to print next when it reaches a nested jaxpr; otherwise finishes the equation.
    fn params<'j>(&mut self, f: &mut Frame<'j>, out: &mut String) -> Option<Frame<'j>> {
        let j: &'j Jaxpr = f.jaxpr;
        let e: &'j Eqn = &j.eqns()[f.eqn];
        let eqn_indent = f.base + 4;
        let p_indent = eqn_indent + 2;
        let child_depth = f.depth + 1;
        let child_base = |wanted: usize| {
            if child_depth > MAX_INDENT_DEPTH {
                f.base
            } else {
                wanted
            }
        };
        for (name, value) in e.params().iter().skip(f.param) {
            match value {
                Param::Jaxpr(cj) => {
                    indent(out, p_indent);
                    out.push_str(name);
                    out.push('=');
                    f.param += 1;
                    let restore = (e.primitive().as_builtin() == Some(Builtin::Jit))
                        .then(|| std::mem::replace(&mut self.counter, 0));
                    return Some(Frame::new(
                        cj.jaxpr(),
                        child_base(p_indent),
                        child_depth,
                        restore,
                    ));
                }
                Param::Jaxprs(list) => {
                    if f.sub == 0 {
                        indent(out, p_indent);
                        out.push_str(name);
                        out.push_str("=(");
                        if list.is_empty() {
                            out.push_str(")\n");
                            f.param += 1;
                            continue;
                        }
                        out.push('\n');
                    }
                    if let Some(cj) = list.get(f.sub) {
                        f.sub += 1;
                        let base = child_base(p_indent + 2);
                        indent(out, base);
                        return Some(Frame::new(cj.jaxpr(), base, child_depth, None));
                    }
                    indent(out, p_indent);
                    out.push_str(")\n");
                    f.sub = 0;
                    f.param += 1;
                }
                flat => {
                    indent(out, p_indent);
                    out.push_str(name);
                    out.push('=');
                    write_param_flat(out, flat);
                    out.push('\n');
                    f.param += 1;
                }
            }
        }
        indent(out, eqn_indent);
        out.push(']');
        self.inputs(f, e, out);
        out.push('\n');
        f.in_params = false;
        f.param = 0;
        f.sub = 0;
        f.eqn += 1;
        None
    }

    fn name_of(&mut self, f: &mut Frame<'_>, v: VarId) -> usize {
        match f.names.get_mut(v.index()) {
            Some(slot) => {
                if *slot == UNNAMED {
                    *slot = self.counter;
                    self.counter += 1;
                }
                *slot
            }
            // Not a variable of this jaxpr (cannot happen in a built jaxpr).
            None => {
                let n = self.counter;
                self.counter += 1;
                n
            }
        }
    }

    fn binder(&mut self, f: &mut Frame<'_>, v: VarId, out: &mut String) {
        let n = self.name_of(f, v);
        push_name(out, n);
        out.push(':');
        match f.names.get(v.index()) {
            Some(_) => push_aval(out, f.jaxpr.var_aval(v)),
            None => out.push_str("?[]"),
        }
    }

    fn atom(&mut self, f: &mut Frame<'_>, a: Atom, out: &mut String) {
        match a {
            Atom::Var(v) => {
                let n = self.name_of(f, v);
                push_name(out, n);
            }
            Atom::Lit(l) => match f.jaxpr.literals().get(l.index()) {
                Some(lit) => push_literal(out, lit),
                None => out.push('?'),
            },
        }
    }
}

/// True when the equation's params go one per line: some param holds a jaxpr. (An empty
/// tuple of jaxprs prints `()` like an empty tuple of ints, on one line.)
fn has_jaxpr_param(e: &Eqn) -> bool {
    e.params().iter().any(|(_, p)| match p {
        // Gather and scatter dimension numbers alone are wider than JAX's line: JAX
        // breaks their params one per line too.
        Param::Jaxpr(_) | Param::GatherDims(_) | Param::ScatterDims(_) => true,
        Param::Jaxprs(js) => !js.is_empty(),
        _ => false,
    })
}

fn write_params_inline(out: &mut String, e: &Eqn) {
    if e.params().is_empty() {
        return;
    }
    out.push('[');
    for (i, (name, value)) in e.params().iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(name);
        out.push('=');
        write_param_flat(out, value);
    }
    out.push(']');
}

const SPACES: &str = "                                                                ";

fn indent(out: &mut String, mut n: usize) {
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// Writes the `n`-th alphabetic name (as [`crate::text::alphabetic_name`]).
#[inline]
pub(crate) fn push_name(out: &mut String, mut n: usize) {
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'a' + (n % 26) as u8;
        n /= 26;
        if n == 0 || i == 0 {
            break;
        }
    }
    for &b in &buf[i..] {
        out.push(b as char);
    }
}

#[inline]
pub(crate) fn push_i64(out: &mut String, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        out.push('-');
    }
    for &b in &buf[i..] {
        out.push(b as char);
    }
}

/// `f32[3,4]` (the `AbstractValue` display form, without going through `fmt`).
pub(crate) fn push_aval(out: &mut String, a: &AbstractValue) {
    out.push_str(a.dtype.short_name());
    out.push('[');
    for (i, &d) in a.shape.dims().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_i64(out, d);
    }
    out.push(']');
}

/// `2.0:f32[]` (as [`crate::text::format_literal`]).
pub(crate) fn push_literal(out: &mut String, lit: &Literal) {
    match lit.value {
        LitValue::Bool(b) => out.push_str(if b { "True" } else { "False" }),
        LitValue::Int(i) => push_i64(out, i),
        LitValue::Float(x) => out.push_str(&python_float_repr(x)),
    }
    out.push(':');
    out.push_str(lit.dtype.short_name());
    out.push_str("[]");
}

/// Writes a param value that has no jaxpr; returns false (writing nothing) for jaxprs.
fn write_param_flat(out: &mut String, p: &Param) -> bool {
    match p {
        Param::None => out.push_str("None"),
        Param::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Param::Int(i) => push_i64(out, *i),
        Param::Float(x) => out.push_str(&python_float_repr(*x)),
        Param::Str(s) => write_str_param(out, s),
        Param::Ints(v) => {
            out.push('(');
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_i64(out, *x);
            }
            out.push_str(if v.len() == 1 { ",)" } else { ")" });
        }
        Param::Bools(v) => {
            out.push('(');
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(if *x { "True" } else { "False" });
            }
            out.push_str(if v.len() == 1 { ",)" } else { ")" });
        }
        Param::DType(d) => out.push_str(d.numpy_name()),
        Param::DotDims(d) => {
            let _ = write!(out, "{d}");
        }
        Param::GatherDims(d) => {
            let _ = write!(out, "{d}");
        }
        Param::ScatterDims(d) => {
            let _ = write!(out, "{d}");
        }
        Param::Mode(m) => {
            let _ = write!(out, "{m}");
        }
        Param::Jaxprs(js) if js.is_empty() => out.push_str("()"),
        Param::Jaxpr(_) | Param::Jaxprs(_) => return false,
    }
    true
}

/// A string param: bare when the parser reads the bare text back as this same string
/// (`name=sin`, `name=<lambda>`, `precision=(Precision.HIGHEST, Precision.HIGHEST)`),
/// otherwise quoted Python-style (`name='1'`, `name='float32'`, `name='a b'`).
fn write_str_param(out: &mut String, s: &str) {
    if is_plain_word(s) || is_word_seq(s) {
        out.push_str(s);
    } else {
        quote_into(out, s);
    }
}

/// True for a word the parser takes as a string value: one word token that is not
/// `None`/`True`/`False`, a number, or a dtype name.
pub(crate) fn is_plain_word(s: &str) -> bool {
    is_single_word(s)
        && !matches!(s, "None" | "True" | "False")
        && !crate::text::parser::is_number_word(s)
        && crate::dtype::DType::from_name(s).is_none()
}

/// True for the canonical text of a tuple or list of plain words: `(A, B)`, `(A,)`,
/// `[A, B]`, `[A]` (the parser reads such a value as this string).
pub(crate) fn is_word_seq(s: &str) -> bool {
    let (inner, tuple) = if let Some(i) = s.strip_prefix('(').and_then(|x| x.strip_suffix(')')) {
        (i, true)
    } else if let Some(i) = s.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
        (i, false)
    } else {
        return false;
    };
    if inner.is_empty() {
        return false;
    }
    if tuple && !inner.contains(", ") {
        return inner.strip_suffix(',').is_some_and(is_plain_word);
    }
    inner.split(", ").all(is_plain_word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn names_match_alphabetic_name() {
        for n in [0usize, 1, 25, 26, 27, 675, 676, 701, 702, 123_456_789] {
            let mut s = String::new();
            push_name(&mut s, n);
            assert_eq!(s, crate::text::alphabetic_name(n));
        }
    }

    #[test]
    fn ints() {
        for v in [0i64, 7, -7, 1234567890, i64::MIN, i64::MAX] {
            let mut s = String::new();
            push_i64(&mut s, v);
            assert_eq!(s, v.to_string());
        }
    }

    #[test]
    fn fast_writers_match_display() {
        use crate::dtype::DType;
        use crate::jaxpr::{LitValue, Literal};
        let lits = [
            (LitValue::Bool(true), DType::Bool),
            (LitValue::Int(-3), DType::I32),
            (LitValue::Int(i64::MIN), DType::I64),
            (LitValue::Float(2.0), DType::F32),
            (LitValue::Float(1e-5), DType::F64),
            (LitValue::Float(f64::NAN), DType::F16),
        ];
        for (value, dtype) in lits {
            let lit = Literal {
                value,
                dtype,
                weak_type: false,
            };
            let mut s = String::new();
            push_literal(&mut s, &lit);
            assert_eq!(s, crate::text::format_literal(&lit));
        }
        for dims in [&[][..], &[3], &[0, 4, 9223372036854775807]] {
            let a = AbstractValue::new(crate::aval::Shape::new(dims).unwrap(), DType::BF16);
            let mut s = String::new();
            push_aval(&mut s, &a);
            assert_eq!(s, a.to_string());
        }
    }

    #[test]
    fn flat_params() {
        let f = |p: Param| format_param_flat(&p).unwrap();
        assert_eq!(f(Param::ints(&[0])), "(0,)");
        assert_eq!(f(Param::ints(&[1, 2])), "(1, 2)");
        assert_eq!(f(Param::ints(&[])), "()");
        assert_eq!(
            f(Param::Bools(Arc::from(vec![false, true]))),
            "(False, True)"
        );
        assert_eq!(f(Param::Str(Arc::from("sin"))), "sin");
        assert_eq!(f(Param::Str(Arc::from("<lambda>"))), "<lambda>");
        assert_eq!(f(Param::Str(Arc::from("1"))), "'1'");
        assert_eq!(f(Param::Str(Arc::from("float32"))), "'float32'");
        assert_eq!(f(Param::Str(Arc::from(""))), "''");
        assert_eq!(
            f(Param::Str(Arc::from(
                "(Precision.HIGHEST, Precision.HIGHEST)"
            ))),
            "(Precision.HIGHEST, Precision.HIGHEST)"
        );
        assert_eq!(f(Param::DType(crate::DType::F32)), "float32");
        assert_eq!(f(Param::Float(1e-5)), "1e-05");
        assert_eq!(f(Param::None), "None");
    }
}
