//! The jaxpr printer: JAX 0.10's text format and layout.
//!
//! ```text
//! { lambda ; a:f32[4,3]. let b:f32[4,3] = add a 1.0:f32[] in (b,) }
//! { lambda a:f32[8]; b:f32[8] c:f32[]. let
//!     d:f32[8] = mul b a
//!     e:f32[] = reduce_sum[axes=(0,) out_sharding=None] d
//!   in (e,) }
//! ```
//!
//! # Layout
//! JAX prints a jaxpr with a Wadler-Lindig pretty printer at width 80, and so does this
//! printer, with the same document: a *group* is printed flat (its breaks as spaces, or
//! as `; ` between equations) when all of it fits in what is left of the line, otherwise
//! its breaks become newlines (a break's indent is the sum of the *nests* around it);
//! what follows a group does not count. So a jaxpr is one line when that line, ` }`
//! included, is at most 80 characters. The document of a jaxpr:
//! - the jaxpr is a group, nested 2: `{ lambda ` constvar binders `; ` invar binders
//!   `. let`, then (nested 2 more) a break and the equations separated by `; ` breaks,
//!   then a break, `in (` the outputs `)` (`,)` for one), and (outside the nest) ` }`;
//! - a list of variables (binders `a:f32[3]`, or uses) is a group nested 2 whose items
//!   are separated by a space that is a group of its own (lists fill lines); outputs are
//!   separated by `,` and that space;
//! - an equation is its output binders, ` = `, the primitive, its params, a space and its
//!   inputs (so an equation without inputs ends with a space, as in JAX). An equation
//!   with no outputs is printed as JAX prints it, `prim ...` with no `=` (the parser
//!   also reads `= prim ...`);
//! - params are a group: `[`, nested 2, a break `""`, the `k=v` pairs separated by
//!   breaks, then a break `""` and `]`. A jaxpr value is the jaxpr's document; a tuple of
//!   jaxprs is a group `(`, nested 2, a break `""`, the jaxprs separated by breaks, a
//!   break `""`, `)`.
//! - Params are sorted by name (`jit` puts `name` first), and those JAX 0.10 does not
//!   print are left out: `broadcast_in_dim`'s `shape` (the output type has it),
//!   `sharding`, and empty `broadcast_dimensions`; `convert_element_type`'s `sharding`;
//!   `dot_general`'s `out_sharding` and params that are `None`; the float functions'
//!   `accuracy=None`; `scan`'s `linear` when all false and `_split_transpose=False`. The
//!   parser fills in what the rules need.
//! - Past [`MAX_INDENT_DEPTH`] levels of nested jaxprs, nests add no indentation, so the
//!   output stays linear in the size of the jaxpr however deep it nests.
//!
//! # Shared jaxprs
//! A sub-jaxpr held more than once (by identity: the same `Arc<Jaxpr>`) prints once, as
//! JAX 0.10 prints it: `let name = { lambda ... } in` and a line break before the jaxpr,
//! and its name where it is a param (`jaxpr=g`, `branches=(jaxpr jaxpr1)`):
//! ```text
//! let g = { lambda ; a:f32[]. let b:f32[] = sin a in (b,) } in
//! { lambda ; c:f32[]. let
//!     d:f32[] = jit[name=g jaxpr=g] c
//!     e:f32[] = jit[name=g jaxpr=g] d
//!   in (e,) }
//! ```
//! JAX's rule: counting each sub-jaxpr once per path from the printed jaxpr to it (and
//! twice per path for one of more than 10 equations), every one counted twice or more is
//! shared; the shared ones print in breadth-first order of first visit (an equation's
//! jaxprs in the order JAX binds its params: `while`'s `cond_jaxpr` before `body_jaxpr`),
//! so a definition may name one printed after it. Each is named after the `name` param
//! (`<>` stripped: `lambda`) of the first equation holding it that has one, else `jaxpr`
//! (`custom_jvp_call`'s and `custom_vjp_call`'s `name`, which JAX prints but does not
//! hold as a param, names nothing);
//! a repeated name is numbered (`jaxpr`, `jaxpr1`, `jaxpr2`). Two departures keep the
//! text readable back: a name that is not an identifier (or is a keyword, `None`, a
//! dtype) becomes `jaxpr`, and where JAX's numbering would repeat a name (`g1`, then `g`
//! twice) the number goes on. Variables take no name that spells a shared jaxpr's, and
//! `jit` suggests no variable names for a shared jaxpr. The sharing is found on the DAG
//! in linear time (a jaxpr has two paths when it or an ancestor is held twice), so a
//! jaxpr of k levels each calling the one below twice prints in O(k).
//!
//! # Names
//! Variables are named `a`, `b`, ..., `z`, `ba`, ... ([`crate::text::alphabetic_name`]),
//! keywords included, as JAX names them (its 222nd variable is `in`; the parser reads a
//! keyword as a variable where one stands). An output of the printed jaxpr's own
//! equations that nothing uses is `_` and takes no name, as JAX prints it (at the top
//! level only; a `jit` inside passes `_` on to the inner output it names, unless two
//! variables of the inner jaxpr would be `_`: a use of `_` reads as its latest binding,
//! so they take fresh names instead). Names are
//! given in the order JAX gives them: one counter runs through the whole text; a jaxpr names its constvars
//! and invars, then each equation its outputs, then the variables of the jaxprs in that
//! equation's params (in printed order), then nothing new for its inputs. As JAX does for
//! `jit`, the inner jaxpr's invars take the names of the equation's input variables and
//! its output variables those of the equation's outputs (each name once, when the inner
//! variable has none yet; an output's name is given then, before the equation prints).
//!
//! # Cost
//! The document is produced as a stream of tokens by a generator with an explicit stack
//! of jaxprs (no recursion), and formatted as it comes: deciding a group looks ahead at
//! most one line's width, so the tokens buffered at any time are few, and printing is
//! linear in the size of the jaxpr.

use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitValue, Literal, VarId};
use crate::params::Param;
use crate::primitive::{Builtin, Family};
use crate::text::lexer::{is_single_word, quote_into};
use crate::text::python_float_repr;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;

/// Nesting of jaxprs deeper than this many levels is printed without further indentation.
pub const MAX_INDENT_DEPTH: usize = 32;

/// The line width JAX formats jaxprs to.
const WIDTH: usize = 80;

const UNNAMED: usize = usize::MAX;

/// The name number printed `_`: an output of the printed jaxpr's own equations that
/// nothing uses (see the module docs).
const DROPPED: usize = usize::MAX - 1;

/// Names for the printed jaxpr's variables: its equations' outputs that no equation and
/// no output uses are [`DROPPED`], as JAX prints them (`_`) at the top level only.
fn root_names(j: &Jaxpr) -> Vec<usize> {
    let mut used = vec![false; j.num_vars()];
    let mut mark = |a: &Atom| {
        if let Atom::Var(v) = *a {
            if let Some(u) = used.get_mut(v.index()) {
                *u = true;
            }
        }
    };
    j.outvars().iter().for_each(&mut mark);
    j.eqns()
        .iter()
        .for_each(|e| e.inputs().iter().for_each(&mut mark));
    let mut names = vec![UNNAMED; j.num_vars()];
    for e in j.eqns() {
        for &v in e.outvars() {
            if used.get(v.index()) == Some(&false) {
                names[v.index()] = DROPPED;
            }
        }
    }
    names
}

/// Prints a jaxpr in JAX's text format (see the module docs for the exact layout).
///
/// # Examples
/// ```
/// use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
/// // JAX's layout: a short jaxpr on one line, a long one an equation a line; an output
/// // nothing uses is `_`.
/// let j = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = cos a in (c,) }")?;
/// assert_eq!(print_jaxpr(&j), "{ lambda ; a:f32[3]. let _:f32[3] = sin a; b:f32[3] = cos a in (b,) }");
/// let long = parse_jaxpr(
///     "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = mul a b; d:f32[3] = add c a; \
///      e:f32[3] = sub d b; f:f32[3] = sin e in (f,) }",
/// )?;
/// assert_eq!(
///     print_jaxpr(&long),
///     "{ lambda ; a:f32[3] b:f32[3]. let
///     c:f32[3] = mul a b
///     d:f32[3] = add c a
///     e:f32[3] = sub d b
///     f:f32[3] = sin e
///   in (f,) }"
/// );
/// assert_eq!(parse_jaxpr(&print_jaxpr(&long))?.to_string(), print_jaxpr(&long));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn print_jaxpr(j: &Jaxpr) -> String {
    let mut f = Formatter {
        out: String::with_capacity(64 + 48 * j.eqns().len()),
        col: 0,
        indents: vec![0],
        flat: vec![false],
        queue: VecDeque::new(),
        texts: String::new(),
    };
    let mut g = Generator::new(j);
    f.run(&mut g);
    f.out
}

/// The names [`print_jaxpr`] gives `j`'s own variables, by variable index: `_` for an
/// output nothing uses, `None` for a variable the text does not show. The names run on
/// through the shared jaxprs printed first and the jaxprs nested in params, so these
/// are the names of the printed text exactly (the typechecker's messages use them).
pub(crate) fn printed_names(j: &Jaxpr) -> Vec<Option<String>> {
    let mut g = Generator::new(j);
    let (mut queue, mut texts) = (VecDeque::new(), String::new());
    // The names are given as the tokens are produced: produce them all, laying out none.
    while g.produce(&mut Sink {
        queue: &mut queue,
        texts: &mut texts,
    }) {
        queue.clear();
        texts.clear();
    }
    let names = g.root_names.unwrap_or_default();
    let mut out: Vec<Option<String>> = names
        .iter()
        .map(|&n| {
            (n != UNNAMED).then(|| {
                let mut s = String::new();
                push_name(&mut s, n);
                s
            })
        })
        .collect();
    out.resize(j.num_vars(), None);
    out
}

/// Prints a closed jaxpr (its constants are not printed; its constvars are).
///
/// # Examples
/// ```
/// use ferrax_ir::text::{parse_jaxpr, print_closed_jaxpr};
/// use ferrax_ir::ClosedJaxpr;
/// use std::sync::Arc;
/// let j = parse_jaxpr("{ lambda a:f32[2]; b:f32[2]. let c:f32[2] = add a b in (c,) }")?;
/// let cj = ClosedJaxpr::with_unknown_consts(Arc::new(j));
/// assert_eq!(print_closed_jaxpr(&cj), "{ lambda a:f32[2]; b:f32[2]. let c:f32[2] = add a b in (c,) }");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn print_closed_jaxpr(j: &ClosedJaxpr) -> String {
    print_jaxpr(j.jaxpr())
}

/// A param value that has no nested jaxpr, printed on one line as the printer prints it;
/// `None` for a jaxpr or a non-empty tuple of jaxprs (an empty one prints `()`).
///
/// # Examples
/// ```
/// use ferrax_ir::text::format_param_flat;
/// use ferrax_ir::{DType, Param};
/// assert_eq!(format_param_flat(&Param::ints(&[0, 1])).as_deref(), Some("(0, 1)"));
/// assert_eq!(format_param_flat(&Param::ints(&[2])).as_deref(), Some("(2,)"));
/// assert_eq!(format_param_flat(&Param::DType(DType::F32)).as_deref(), Some("float32"));
/// assert_eq!(format_param_flat(&Param::None).as_deref(), Some("None"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn format_param_flat(p: &Param) -> Option<String> {
    let mut s = String::new();
    write_param_flat(&mut s, p).then_some(s)
}

/// True when JAX 0.10 does not print this param of this primitive (see the module docs).
fn hidden_param(prim: Option<Builtin>, name: &str, value: &Param) -> bool {
    let is_none = matches!(value, Param::None);
    match prim {
        Some(Builtin::BroadcastInDim) => match name {
            "shape" | "sharding" => true,
            "broadcast_dimensions" => match value {
                Param::Ints(v) => v.is_empty(),
                Param::Bools(v) => v.is_empty(),
                _ => false,
            },
            _ => false,
        },
        Some(Builtin::ConvertElementType) => name == "sharding",
        Some(Builtin::DotGeneral) => name == "out_sharding" || is_none,
        Some(Builtin::Scan) => match (name, value) {
            ("linear", Param::Bools(v)) => v.iter().all(|b| !b),
            ("_split_transpose", Param::Bool(b)) => !b,
            _ => false,
        },
        Some(Builtin::CustomJvpCall | Builtin::CustomVjpCall) => {
            name == "num_consts" && matches!(value, Param::Int(0))
        }
        Some(b) if b.family() == Family::UnaryFloat => name == "accuracy" && is_none,
        _ => false,
    }
}

/// The params an equation prints, in printed order.
fn printed_params(e: &Eqn) -> Vec<(&str, &Param)> {
    let prim = e.primitive().as_builtin();
    let mut v: Vec<(&str, &Param)> = e
        .params()
        .iter()
        .filter(|(n, p)| !hidden_param(prim, n, p))
        .collect();
    if matches!(
        prim,
        Some(Builtin::Jit | Builtin::CustomJvpCall | Builtin::CustomVjpCall)
    ) {
        // JAX moves `name` to the front.
        if let Some(i) = v.iter().position(|(n, _)| *n == "name") {
            let item = v.remove(i);
            v.insert(0, item);
        }
    }
    v
}

// ---------------------------------------------------------------------------------------
// Shared jaxprs.

/// Which sub-jaxprs print once, as `let name = { ... } in` before the jaxpr, and their
/// names (see the module docs).
struct Sharing<'j> {
    /// Index in `lets` of each shared jaxpr, by address.
    index: HashMap<*const Jaxpr, usize>,
    /// The shared jaxprs in printed order, with their names.
    lets: Vec<(String, &'j Jaxpr)>,
    /// Variable name numbers not to use: those spelling a shared jaxpr's name.
    skip: HashSet<usize>,
    /// The names of the shared jaxprs.
    names: HashSet<String>,
}

/// The sub-jaxprs of an equation in the order JAX's params hold them (the order its
/// primitives are bound with): params by name, except that `while` has `cond_jaxpr`
/// before `body_jaxpr`.
fn jax_order_sub_jaxprs(e: &Eqn) -> impl Iterator<Item = &ClosedJaxpr> {
    let is_while = e.primitive().as_builtin() == Some(Builtin::While);
    let first = is_while.then(|| e.params().get("cond_jaxpr")).flatten();
    let rest = e
        .params()
        .iter()
        .filter(move |(n, _)| !(is_while && *n == "cond_jaxpr"))
        .map(|(_, p)| p);
    first.into_iter().chain(rest).flat_map(|p| match p {
        Param::Jaxpr(j) => std::slice::from_ref(j).iter(),
        Param::Jaxprs(js) => js.iter(),
        _ => [].iter(),
    })
}

/// A `let` name as the parser reads it back: an identifier that is not a keyword,
/// `None`/`True`/`False` or a dtype name.
fn is_let_name(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(c0) = chars.next() else {
        return false;
    };
    (c0.is_ascii_alphabetic() || c0 == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(s, "in" | "let" | "None" | "True" | "False")
        && crate::dtype::DType::from_name(s).is_none()
}

/// The name number whose alphabetic name is `s`, for lowercase names that short.
fn alphabetic_index(s: &str) -> Option<usize> {
    if s.is_empty() || s.len() > 12 || !s.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    // `a` is the zero digit, except that a name has no leading zeros beyond `a` itself.
    if s.len() > 1 && s.starts_with('a') {
        return None;
    }
    Some(s.bytes().fold(0usize, |n, b| n * 26 + (b - b'a') as usize))
}

impl<'j> Sharing<'j> {
    /// JAX's choice: counting each sub-jaxpr once per path from the top jaxpr to it (and
    /// twice per path for one of more than 10 equations), those counted more than once are
    /// shared; they print in breadth-first order of first visit, each named after the
    /// `name` param of the first equation (breadth-first) that holds it (`<lambda>` as
    /// `lambda`), else `jaxpr`, a repeated name numbered `name1`, `name2`, ...
    /// Computed on the DAG, in time linear in its size: a jaxpr has two paths or more
    /// exactly when it or one of its ancestors is held twice or more.
    fn of(root: &'j Jaxpr) -> Sharing<'j> {
        let mut ids: HashMap<*const Jaxpr, usize> = HashMap::new();
        let mut nodes: Vec<&'j Jaxpr> = vec![root];
        let mut held: Vec<u32> = vec![0];
        let mut names: Vec<Option<&'j str>> = vec![None];
        let mut children: Vec<Vec<usize>> = vec![Vec::new()];
        ids.insert(root as *const Jaxpr, 0);
        let mut next = 0;
        while let Some(&j) = nodes.get(next) {
            let mut kids = Vec::new();
            for e in j.eqns() {
                // `custom_jvp_call`'s and `custom_vjp_call`'s `name` is printed, not a
                // param JAX holds: it names nothing.
                let custom = matches!(
                    e.primitive().as_builtin(),
                    Some(Builtin::CustomJvpCall | Builtin::CustomVjpCall)
                );
                let name = match e.params().get("name") {
                    Some(Param::Str(s)) if !custom => {
                        Some(s.trim_matches(|c| c == '<' || c == '>'))
                    }
                    _ => None,
                };
                for cj in jax_order_sub_jaxprs(e) {
                    let sub: &'j Jaxpr = cj.jaxpr();
                    let id = *ids.entry(sub as *const Jaxpr).or_insert_with(|| {
                        nodes.push(sub);
                        held.push(0);
                        names.push(None);
                        children.push(Vec::new());
                        nodes.len() - 1
                    });
                    held[id] = held[id].saturating_add(1);
                    if names[id].is_none() {
                        names[id] = name;
                    }
                    kids.push(id);
                }
            }
            children[next] = kids;
            next += 1;
        }
        // Two paths or more: held twice, or below one that is.
        let mut multi: Vec<bool> = held.iter().map(|&h| h >= 2).collect();
        let mut todo: Vec<usize> = (0..nodes.len()).filter(|&i| multi[i]).collect();
        while let Some(i) = todo.pop() {
            for &c in &children[i] {
                if !multi[c] {
                    multi[c] = true;
                    todo.push(c);
                }
            }
        }
        let mut sharing = Sharing {
            index: HashMap::new(),
            lets: Vec::new(),
            skip: HashSet::new(),
            names: HashSet::new(),
        };
        let mut counts: HashMap<String, usize> = HashMap::new();
        for (i, &j) in nodes.iter().enumerate().skip(1) {
            if !(multi[i] || j.eqns().len() > 10) {
                continue;
            }
            let base = names[i].filter(|n| is_let_name(n)).unwrap_or("jaxpr");
            let count = counts.get(base).copied().unwrap_or(0);
            *counts.entry(base.to_owned()).or_insert(0) += 1;
            let mut name = base.to_owned();
            if count > 0 {
                name = format!("{base}{count}");
                *counts.entry(name.clone()).or_insert(0) += 1;
            }
            // JAX's numbering can repeat a name (`g1`, then `g` twice); ferrax numbers
            // on until the name is new, so that the text reads back.
            let mut k = count;
            while sharing.names.contains(&name) {
                k += 1;
                name = format!("{base}{k}");
                *counts.entry(name.clone()).or_insert(0) += 1;
            }
            sharing.names.insert(name.clone());
            if let Some(n) = alphabetic_index(&name) {
                sharing.skip.insert(n);
            }
            sharing.index.insert(j as *const Jaxpr, sharing.lets.len());
            sharing.lets.push((name, j));
        }
        sharing
    }
}

// ---------------------------------------------------------------------------------------
// The document, as a token stream.

/// Where a text token's characters are.
#[derive(Clone, Copy)]
enum Text {
    Static(&'static str),
    /// A range of the formatter's text buffer.
    Owned(u32, u32),
}

#[derive(Clone, Copy)]
enum Tok {
    Text(Text),
    /// A break: its text when flat, else a newline and the indent.
    Brk(&'static str),
    /// Starts a group.
    Open,
    /// Ends a group.
    Close,
    /// Adds to the indent until the matching `Unnest`.
    Nest(u8),
    Unnest,
}

/// Where the generator writes tokens.
struct Sink<'a> {
    queue: &'a mut VecDeque<Tok>,
    texts: &'a mut String,
}

impl Sink<'_> {
    #[inline]
    fn push(&mut self, t: Tok) {
        self.queue.push_back(t);
    }

    #[inline]
    fn text(&mut self, s: &'static str) {
        self.queue.push_back(Tok::Text(Text::Static(s)));
    }

    /// A text token written by `write` into the text buffer.
    #[inline]
    fn owned(&mut self, write: impl FnOnce(&mut String)) {
        let start = self.texts.len();
        write(self.texts);
        let end = self.texts.len();
        self.queue
            .push_back(Tok::Text(Text::Owned(start as u32, (end - start) as u32)));
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Header,
    Eqns,
    Params,
    Done,
}

/// One jaxpr being printed.
struct Frame<'j> {
    jaxpr: &'j Jaxpr,
    /// Name number of each variable, [`UNNAMED`] until named.
    names: Vec<usize>,
    depth: usize,
    phase: Phase,
    /// Next equation (or the one whose params are being printed).
    eqn: usize,
    /// The printed params of that equation.
    params: Vec<(&'j str, &'j Param)>,
    /// Next param, and whether its `name=` is out already.
    param: usize,
    param_started: bool,
    /// For a tuple of jaxprs: how many of its items have been started.
    sub: usize,
    /// Names suggested for the variables of the equation's `jit` jaxpr.
    jit_names: Option<Vec<usize>>,
}

impl<'j> Frame<'j> {
    fn new(jaxpr: &'j Jaxpr, depth: usize, names: Option<Vec<usize>>) -> Frame<'j> {
        Frame {
            jaxpr,
            names: names.unwrap_or_else(|| vec![UNNAMED; jaxpr.num_vars()]),
            depth,
            phase: Phase::Header,
            eqn: 0,
            params: Vec::new(),
            param: 0,
            param_started: false,
            sub: 0,
            jit_names: None,
        }
    }

    /// A nest of `n`, or of 0 past the indentation depth limit.
    fn nest(&self, n: u8) -> Tok {
        Tok::Nest(if self.depth > MAX_INDENT_DEPTH { 0 } else { n })
    }
}

/// Produces the document's tokens, a piece at a time.
struct Generator<'j> {
    stack: Vec<Frame<'j>>,
    counter: usize,
    done: bool,
    /// The jaxpr printed after the shared ones (taken when its frame is pushed).
    root: Option<&'j Jaxpr>,
    /// The next shared jaxpr to print as `let name = ... in`.
    next_let: usize,
    /// The frame at the bottom of the stack is a shared jaxpr's.
    in_let: bool,
    sharing: Sharing<'j>,
    /// The root frame's names, kept when it is done (for [`printed_names`]).
    root_names: Option<Vec<usize>>,
}

impl<'j> Generator<'j> {
    /// A generator of `root`'s text (its shared jaxprs first), nothing produced yet.
    fn new(root: &'j Jaxpr) -> Self {
        Generator {
            stack: Vec::new(),
            counter: 0,
            done: false,
            root: Some(root),
            next_let: 0,
            in_let: false,
            sharing: Sharing::of(root),
            root_names: None,
        }
    }

    /// Pops the top frame, keeping the root's names.
    fn pop_frame(&mut self) {
        if let Some(f) = self.stack.pop() {
            if self.stack.is_empty() && !self.in_let {
                self.root_names = Some(f.names);
            }
        }
    }

    fn fresh(&mut self) -> usize {
        loop {
            let n = self.counter;
            self.counter = n + 1;
            if !self.sharing.skip.contains(&n) {
                return n;
            }
        }
    }

    /// The `let` name of a shared jaxpr, `None` for one printed inline.
    fn shared_name(&self, j: &Jaxpr) -> Option<&str> {
        let i = *self.sharing.index.get(&(j as *const Jaxpr))?;
        self.sharing.lets.get(i).map(|(n, _)| n.as_str())
    }

    /// The name number of `v` in `names` (named now if it has none).
    fn name_in(&mut self, names: &mut [usize], v: VarId) -> usize {
        match names.get(v.index()).copied() {
            Some(UNNAMED) => {
                let n = self.fresh();
                names[v.index()] = n;
                n
            }
            Some(n) => n,
            // Not a variable of this jaxpr (cannot happen in a built jaxpr).
            None => self.fresh(),
        }
    }

    fn name_of(&mut self, fi: usize, v: VarId) -> usize {
        let mut names = std::mem::take(&mut self.stack[fi].names);
        let n = self.name_in(&mut names, v);
        self.stack[fi].names = names;
        n
    }

    /// Binders `a:f32[3] b:i32[]`, as a variable list.
    fn binders(&mut self, fi: usize, vars: &[VarId], sink: &mut Sink<'_>) {
        let f = &self.stack[fi];
        let (open, j) = (f.nest(2), f.jaxpr);
        sink.push(open);
        sink.push(Tok::Open);
        for (i, &v) in vars.iter().enumerate() {
            if i > 0 {
                sink.push(Tok::Open);
                sink.push(Tok::Brk(" "));
                sink.push(Tok::Close);
            }
            let n = self.name_of(fi, v);
            let known = v.index() < j.num_vars();
            sink.owned(|s| {
                push_name(s, n);
                s.push(':');
                if known {
                    push_aval(s, j.var_aval(v));
                } else {
                    s.push_str("?[]");
                }
            });
        }
        sink.push(Tok::Close);
        sink.push(Tok::Unnest);
    }

    /// Uses of atoms, as a variable list separated by `sep`.
    fn atoms(&mut self, fi: usize, atoms: &[Atom], sep: &'static str, sink: &mut Sink<'_>) {
        let f = &self.stack[fi];
        let (open, j) = (f.nest(2), f.jaxpr);
        sink.push(open);
        sink.push(Tok::Open);
        for (i, &a) in atoms.iter().enumerate() {
            if i > 0 {
                if !sep.is_empty() {
                    sink.text(sep);
                }
                sink.push(Tok::Open);
                sink.push(Tok::Brk(" "));
                sink.push(Tok::Close);
            }
            match a {
                Atom::Var(v) => {
                    let n = self.name_of(fi, v);
                    sink.owned(|s| push_name(s, n));
                }
                Atom::Lit(l) => match j.literals().get(l.index()) {
                    Some(lit) => sink.owned(|s| push_literal(s, lit)),
                    None => sink.text("?"),
                },
            }
        }
        sink.push(Tok::Close);
        sink.push(Tok::Unnest);
    }

    /// JAX's names for a `jit` equation's jaxpr: its invars named as the equation's
    /// input variables, its output variables as the equation's outputs.
    fn suggest_jit_names(&mut self, fi: usize, e: &'j Eqn) -> Option<Vec<usize>> {
        let Some(Param::Jaxpr(cj)) = e.params().get("jaxpr") else {
            return None;
        };
        let inner: &'j Jaxpr = cj.jaxpr();
        if self.shared_name(inner).is_some() {
            // JAX suggests no names for a shared jaxpr (it is printed already).
            return None;
        }
        let mut names = vec![UNNAMED; inner.num_vars()];
        if inner.invars().len() == e.inputs().len() {
            let mut used: Vec<VarId> = Vec::new();
            for (&iv, &outer) in inner.invars().iter().zip(e.inputs()) {
                if let Atom::Var(ov) = outer {
                    if !used.contains(&ov) && names.get(iv.index()) == Some(&UNNAMED) {
                        used.push(ov);
                        names[iv.index()] = self.name_of(fi, ov);
                    }
                }
            }
        }
        if inner.outvars().len() == e.outvars().len() {
            let mut used: Vec<VarId> = Vec::new();
            for (&ia, &ov) in inner.outvars().iter().zip(e.outvars()) {
                if let Atom::Var(iv) = ia {
                    if !used.contains(&ov) && names.get(iv.index()) == Some(&UNNAMED) {
                        used.push(ov);
                        names[iv.index()] = self.name_of(fi, ov);
                    }
                }
            }
        }
        // `_` passes on as JAX passes it, but a use of `_` reads back as its latest
        // binding: two variables of one jaxpr named `_` would be ambiguous, so then
        // neither is (each takes a fresh name).
        if names.iter().filter(|&&n| n == DROPPED).count() > 1 {
            for n in names.iter_mut().filter(|n| **n == DROPPED) {
                *n = UNNAMED;
            }
        }
        Some(names)
    }

    /// Produces the next piece of the document; false when there is no more.
    fn produce(&mut self, sink: &mut Sink<'_>) -> bool {
        if self.done {
            return false;
        }
        let Some(fi) = self.stack.len().checked_sub(1) else {
            // The shared jaxprs first, each `let name = { ... } in` and a line break,
            // then the jaxpr itself.
            if let Some(&(ref name, j)) = self.sharing.lets.get(self.next_let) {
                self.next_let += 1;
                sink.text("let ");
                sink.owned(|s| s.push_str(name));
                sink.text(" = ");
                self.stack.push(Frame::new(j, 0, None));
                self.in_let = true;
                return true;
            }
            if let Some(j) = self.root.take() {
                self.stack.push(Frame::new(j, 0, Some(root_names(j))));
                self.in_let = false;
                return true;
            }
            self.done = true;
            return false;
        };
        let j: &'j Jaxpr = self.stack[fi].jaxpr;
        match self.stack[fi].phase {
            Phase::Header => {
                sink.push(Tok::Open);
                sink.push(self.stack[fi].nest(2));
                sink.text("{ lambda ");
                self.binders(fi, j.constvars(), sink);
                sink.text("; ");
                self.binders(fi, j.invars(), sink);
                sink.text(". let");
                sink.push(self.stack[fi].nest(2));
                sink.push(Tok::Brk(" "));
                self.stack[fi].phase = Phase::Eqns;
            }
            Phase::Eqns => {
                let k = self.stack[fi].eqn;
                let Some(e) = j.eqns().get(k) else {
                    sink.push(Tok::Unnest);
                    sink.push(Tok::Brk(" "));
                    sink.text("in (");
                    self.atoms(fi, j.outvars(), ",", sink);
                    sink.text(if j.outvars().len() == 1 { ",)" } else { ")" });
                    sink.push(Tok::Unnest);
                    sink.text(" }");
                    sink.push(Tok::Close);
                    self.stack[fi].phase = Phase::Done;
                    self.pop_frame();
                    if self.stack.is_empty() && self.in_let {
                        sink.text(" in");
                        sink.push(Tok::Brk(" "));
                    }
                    return true;
                };
                if k > 0 {
                    sink.push(Tok::Brk("; "));
                }
                if e.primitive().as_builtin() == Some(Builtin::Jit) {
                    let names = self.suggest_jit_names(fi, e);
                    self.stack[fi].jit_names = names;
                }
                // An equation with no outputs (a debug callback) is its primitive alone,
                // as JAX prints it.
                if !e.outvars().is_empty() {
                    self.binders(fi, e.outvars(), sink);
                    sink.text(" = ");
                }
                sink.owned(|s| s.push_str(e.primitive().name()));
                let params = printed_params(e);
                if params.is_empty() {
                    self.eqn_inputs(fi, e, sink);
                } else {
                    let f = &mut self.stack[fi];
                    sink.push(Tok::Open);
                    sink.push(f.nest(2));
                    sink.text("[");
                    sink.push(Tok::Brk(""));
                    f.params = params;
                    f.param = 0;
                    f.param_started = false;
                    f.sub = 0;
                    f.phase = Phase::Params;
                }
            }
            Phase::Params => self.params(fi, sink),
            Phase::Done => self.pop_frame(),
        }
        true
    }

    /// ` ` and the inputs; the equation is done.
    fn eqn_inputs(&mut self, fi: usize, e: &'j Eqn, sink: &mut Sink<'_>) {
        sink.text(" ");
        self.atoms(fi, e.inputs(), "", sink);
        let f = &mut self.stack[fi];
        f.eqn += 1;
        f.phase = Phase::Eqns;
        f.jit_names = None;
    }

    /// Continues the params of the current equation; pushes a frame at a nested jaxpr.
    fn params(&mut self, fi: usize, sink: &mut Sink<'_>) {
        let j: &'j Jaxpr = self.stack[fi].jaxpr;
        let e: &'j Eqn = &j.eqns()[self.stack[fi].eqn];
        loop {
            let f = &mut self.stack[fi];
            let Some(&(name, value)) = f.params.get(f.param) else {
                sink.push(Tok::Unnest);
                sink.push(Tok::Brk(""));
                sink.text("]");
                sink.push(Tok::Close);
                self.eqn_inputs(fi, e, sink);
                return;
            };
            if !f.param_started {
                if f.param > 0 {
                    sink.push(Tok::Brk(" "));
                }
                sink.owned(|s| {
                    s.push_str(name);
                    s.push('=');
                });
                f.param_started = true;
            }
            let child_depth = f.depth + 1;
            match value {
                Param::Jaxpr(cj) => {
                    f.param += 1;
                    f.param_started = false;
                    let names = if name == "jaxpr" {
                        f.jit_names.take()
                    } else {
                        None
                    };
                    if let Some(n) = self.shared_name(cj.jaxpr()) {
                        sink.owned(|s| s.push_str(n));
                        continue;
                    }
                    self.stack.push(Frame::new(cj.jaxpr(), child_depth, names));
                    return;
                }
                Param::Jaxprs(list) if !list.is_empty() => {
                    if f.sub == 0 {
                        sink.push(Tok::Open);
                        sink.push(f.nest(2));
                        sink.text("(");
                        sink.push(Tok::Brk(""));
                    }
                    if let Some(cj) = list.get(f.sub) {
                        if f.sub > 0 {
                            sink.push(Tok::Brk(" "));
                        }
                        f.sub += 1;
                        if let Some(n) = self.shared_name(cj.jaxpr()) {
                            sink.owned(|s| s.push_str(n));
                            continue;
                        }
                        self.stack.push(Frame::new(cj.jaxpr(), child_depth, None));
                        return;
                    }
                    sink.push(Tok::Unnest);
                    sink.push(Tok::Brk(""));
                    sink.text(")");
                    sink.push(Tok::Close);
                    f.sub = 0;
                    f.param += 1;
                    f.param_started = false;
                }
                flat if e.primitive().as_builtin()
                    == Some(crate::primitive::Builtin::DebugPrint)
                    && matches!(name, "fmt" | "in_tree" | "np_printoptions" | "static_args") =>
                {
                    // As JAX prints them: the format string and the host values' Python
                    // text, unquoted (the parser reads them back by position).
                    sink.owned(|s| match flat {
                        Param::Str(fmt) if name == "fmt" && !raw_fmt_reads_back(fmt) => {
                            quote_into(s, fmt)
                        }
                        Param::Str(w) => s.push_str(w),
                        Param::Opaque(o) if name != "fmt" && raw_value_reads_back(o.name()) => {
                            s.push_str(o.name())
                        }
                        other => {
                            write_param_flat(s, other);
                        }
                    });
                    f.param += 1;
                    f.param_started = false;
                }
                flat => {
                    // A word naming a shared jaxpr reads back as that jaxpr where the
                    // schema does not say the param is a string: quote it there.
                    let word = match flat {
                        Param::Str(w) => Some(&**w),
                        Param::Opaque(o) => Some(o.name()),
                        _ => None,
                    };
                    let takes_words = e
                        .primitive()
                        .as_builtin()
                        .and_then(|b| b.param_kind(name))
                        .is_some();
                    let quote =
                        !takes_words && word.is_some_and(|w| self.sharing.names.contains(w));
                    let params = e.params();
                    sink.owned(|s| match word {
                        Some(w) if quote => quote_into(s, w),
                        _ if params.has_numpy_ints(name) => {
                            write_param_marked(s, flat, &|i| params.numpy_int(name, i));
                        }
                        _ => {
                            write_param_flat(s, flat);
                        }
                    });
                    f.param += 1;
                    f.param_started = false;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Formatting (Lindig's "strictly pretty", streaming).

struct Formatter {
    out: String,
    /// Column of the output's current line, in characters.
    col: usize,
    /// The indent of each open nest (the first is the top level's 0).
    indents: Vec<usize>,
    /// Whether each open group is flat (the first is the top level, not flat).
    flat: Vec<bool>,
    queue: VecDeque<Tok>,
    texts: String,
}

impl Formatter {
    fn text_of(&self, t: Text) -> &str {
        match t {
            Text::Static(s) => s,
            Text::Owned(start, len) => self
                .texts
                .get(start as usize..start as usize + len as usize)
                .unwrap_or(""),
        }
    }

    fn width_of(&self, t: Text) -> usize {
        let s = self.text_of(t);
        if s.is_ascii() {
            s.len()
        } else {
            s.chars().count()
        }
    }

    fn run(&mut self, g: &mut Generator<'_>) {
        loop {
            if self.queue.is_empty() {
                // Nothing is buffered: the text buffer can start over.
                self.texts.clear();
                let mut sink = Sink {
                    queue: &mut self.queue,
                    texts: &mut self.texts,
                };
                if !g.produce(&mut sink) {
                    return;
                }
                continue;
            }
            let Some(tok) = self.queue.pop_front() else {
                continue;
            };
            let flat = self.flat.last().copied().unwrap_or(false);
            match tok {
                Tok::Text(t) => {
                    let w = self.width_of(t);
                    let Formatter { out, texts, .. } = self;
                    let s = match t {
                        Text::Static(s) => s,
                        Text::Owned(start, len) => texts
                            .get(start as usize..start as usize + len as usize)
                            .unwrap_or(""),
                    };
                    out.push_str(s);
                    self.col += w;
                }
                Tok::Brk(s) if flat => {
                    self.out.push_str(s);
                    self.col += s.len();
                }
                Tok::Brk(_) => {
                    let indent = self.indents.last().copied().unwrap_or(0);
                    self.out.push('\n');
                    push_spaces(&mut self.out, indent);
                    self.col = indent;
                }
                Tok::Nest(n) => {
                    let indent = self.indents.last().copied().unwrap_or(0);
                    self.indents.push(indent + n as usize);
                }
                Tok::Unnest => {
                    if self.indents.len() > 1 {
                        self.indents.pop();
                    }
                }
                Tok::Open => {
                    let fits = flat || self.fits(g, WIDTH.saturating_sub(self.col));
                    self.flat.push(fits);
                }
                Tok::Close => {
                    if self.flat.len() > 1 {
                        self.flat.pop();
                    }
                }
            }
        }
    }

    /// Whether the group whose `Open` was just taken from the queue fits in `room`
    /// characters when flat (only the group counts, not what follows it).
    fn fits(&mut self, g: &mut Generator<'_>, room: usize) -> bool {
        let mut left = room as isize;
        let mut depth = 0usize;
        let mut i = 0;
        loop {
            if i == self.queue.len() {
                let mut sink = Sink {
                    queue: &mut self.queue,
                    texts: &mut self.texts,
                };
                if !g.produce(&mut sink) {
                    return true;
                }
                continue;
            }
            match self.queue[i] {
                Tok::Text(t) => left -= self.width_of(t) as isize,
                Tok::Brk(s) => left -= s.len() as isize,
                Tok::Open => depth += 1,
                Tok::Close if depth == 0 => return left >= 0,
                Tok::Close => depth -= 1,
                Tok::Nest(_) | Tok::Unnest => {}
            }
            if left < 0 {
                return false;
            }
            i += 1;
        }
    }
}

const SPACES: &str = "                                                                ";

fn push_spaces(out: &mut String, mut n: usize) {
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// Writes the `n`-th alphabetic name (as [`crate::text::alphabetic_name`]).
#[inline]
pub(crate) fn push_name(out: &mut String, mut n: usize) {
    if n == DROPPED {
        out.push('_');
        return;
    }
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
        LitValue::Int(i) if lit.dtype == DType::U64 => {
            let _ = write!(out, "{}", i as u64);
        }
        LitValue::Int(i) => push_i64(out, i),
        LitValue::Float(x) => out.push_str(&python_float_repr(x)),
    }
    out.push(':');
    out.push_str(lit.dtype.short_name());
    out.push_str("[]");
}

/// Writes a param value that has no jaxpr; returns false (writing nothing) for jaxprs.
fn write_param_flat(out: &mut String, p: &Param) -> bool {
    write_param_marked(out, p, &|_| None)
}

/// An integer of a param: `np.int64(3)` where JAX printed it so, else `3`.
fn push_param_int(out: &mut String, x: i64, numpy: Option<DType>) {
    match numpy {
        Some(d) => {
            out.push_str("np.");
            out.push_str(d.numpy_name());
            out.push('(');
            push_i64(out, x);
            out.push(')');
        }
        None => push_i64(out, x),
    }
}

/// [`write_param_flat`], with `numpy(i)` the NumPy dtype the `i`-th integer of the
/// value was printed with, if any ([`Params::numpy_int`]).
fn write_param_marked(out: &mut String, p: &Param, numpy: &dyn Fn(usize) -> Option<DType>) -> bool {
    match p {
        Param::None => out.push_str("None"),
        Param::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Param::Int(i) => push_param_int(out, *i, numpy(0)),
        Param::Float(x) => out.push_str(&python_float_repr(*x)),
        Param::Str(s) => write_str_param(out, s),
        Param::Ints(v) => {
            out.push('(');
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_param_int(out, *x, numpy(i));
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
        Param::ConvDims(d) => {
            let _ = write!(out, "{d}");
        }
        // JAX prints the config as a tuple of tuples: ((1, -1, 1), (0, 2, 0)).
        Param::Padding(c) => {
            out.push('(');
            for (i, (lo, hi, interior)) in c.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                for (k, x) in [lo, hi, interior].into_iter().enumerate() {
                    out.push_str(if k == 0 { "(" } else { ", " });
                    push_param_int(out, *x, numpy(3 * i + k));
                }
                out.push(')');
            }
            out.push_str(if c.len() == 1 { ",)" } else { ")" });
        }
        Param::Jaxprs(js) if js.is_empty() => out.push_str("()"),
        Param::Jaxpr(_) | Param::Jaxprs(_) => return false,
        Param::Opaque(o) => write_opaque_param(out, o.name()),
        Param::Mesh(m) => {
            let _ = write!(out, "{m}");
        }
        Param::Spec(p) => {
            let _ = write!(out, "{p}");
        }
        Param::Specs(ps) => {
            out.push('(');
            for (i, p) in ps.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{p}");
            }
            out.push_str(if ps.len() == 1 { ",)" } else { ")" });
        }
        Param::Names(ns) => {
            out.push('(');
            for (i, n) in ns.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&crate::sharding::quote(n));
            }
            out.push_str(if ns.len() == 1 { ",)" } else { ")" });
        }
        // JAX prints an empty frozenset as `frozenset({})` too.
        Param::NameSet(ns) => {
            out.push_str("frozenset({");
            for (i, n) in ns.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&crate::sharding::quote(n));
            }
            out.push_str("})");
        }
        Param::Pairs(ps) => {
            out.push('(');
            for (i, (a, b)) in ps.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "({a}, {b})");
            }
            out.push_str(if ps.len() == 1 { ",)" } else { ")" });
        }
        // As JAX prints `pure_callback`'s `result_avals`:
        // `(ShapedArray(float32[3]), ShapedArray(int32[], weak_type=True))`.
        Param::Avals(avals) => {
            out.push('(');
            for (i, a) in avals.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "ShapedArray({}{}", a.dtype.numpy_name(), a.shape);
                out.push_str(if a.weak_type {
                    ", weak_type=True)"
                } else {
                    ")"
                });
            }
            out.push_str(if avals.len() == 1 { ",)" } else { ")" });
        }
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

/// Whether `debug_print`'s format string printed as it is reads back (the parser takes
/// the text up to ` has_placeholders=`, trimmed): otherwise it is quoted.
fn raw_fmt_reads_back(fmt: &str) -> bool {
    fmt.trim() == fmt
        && !fmt.starts_with(['\'', '"'])
        && !fmt.contains(['\n', '\r'])
        && !fmt.contains("has_placeholders=")
}

/// Whether a `debug_print` host value's text (`PyTreeDef(...)`, a tuple) reads back as
/// one value: a `PyTreeDef(` or `(` whose brackets balance, closing at its end, with
/// quotes closed.
fn raw_value_reads_back(s: &str) -> bool {
    if !(s.starts_with("PyTreeDef(") || s.starts_with('(')) || !s.ends_with(')') {
        return false;
    }
    let mut depth = 0i64;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 && i + 1 != s.len() {
                    return false;
                }
                if depth < 0 {
                    return false;
                }
            }
            '\n' | '\r' => return false,
            _ => {}
        }
    }
    depth == 0 && quote.is_none()
}

/// An opaque param: its name as it is (`f_jvp`, `<lambda>`,
/// `DotsSaveable(only_if_no_batch_dims=False)`) when the parser reads that text back as
/// one value, otherwise quoted Python-style.
fn write_opaque_param(out: &mut String, name: &str) {
    if (is_single_word(name) && name != "None")
        || is_word_seq(name)
        || is_simple_record(name)
        || is_angle_span(name)
        || is_flat_callback(name)
    {
        out.push_str(name);
    } else {
        quote_into(out, name);
    }
}

/// True for `pure_callback`'s callback as JAX prints it,
/// `_FlatCallback(callback_func=<function f at 0xXXXXXXXXXXXX>, in_tree=PyTreeDef((*,)))`,
/// which the parser reads as one record (the tree's text whole).
fn is_flat_callback(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("_FlatCallback(callback_func=") else {
        return false;
    };
    let Some((func, tree)) = rest.split_once(", in_tree=") else {
        return false;
    };
    let Some(tree) = tree.strip_suffix(')') else {
        return false;
    };
    if !is_angle_span(func) || !tree.starts_with("PyTreeDef(") || !tree.ends_with(')') {
        return false;
    }
    // The tree's brackets balance (closing at its end), and it holds only what the
    // lexer reads as tokens: no quotes (dict keys are quoted, so such trees are written
    // quoted whole), no line breaks.
    let mut depth = 0i64;
    for (i, c) in tree.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 && i + 1 != tree.len() {
                    return false;
                }
                if depth < 0 {
                    return false;
                }
            }
            '\'' | '"' | '\n' | '\r' => return false,
            _ => {}
        }
    }
    depth == 0
}

/// True for words separated by single spaces, the first opening with `<`, whose angle
/// brackets balance only at the end (`<function f at 0xXXXXXXXXXXXX>`): the parser reads
/// such a span as one value.
fn is_angle_span(s: &str) -> bool {
    use crate::text::parser::angle_depth;
    if !s.starts_with('<') || !s.contains(' ') {
        return false;
    }
    let words: Vec<&str> = s.split(' ').collect();
    let mut depth = 0;
    for (i, w) in words.iter().enumerate() {
        if !is_single_word(w) {
            return false;
        }
        depth += angle_depth(w);
        let last = i + 1 == words.len();
        if (depth <= 0) != last {
            return false;
        }
    }
    depth == 0
}

/// True for `Name(field=value, ...)` whose name, fields and values are single words (a
/// record as JAX prints a checkpoint policy: `DotsSaveable(only_if_no_batch_dims=False)`).
fn is_simple_record(s: &str) -> bool {
    let Some((name, rest)) = s.split_once('(') else {
        return false;
    };
    let Some(inner) = rest.strip_suffix(')') else {
        return false;
    };
    if !is_single_word(name) || name.contains('=') {
        return false;
    }
    inner.is_empty()
        || inner.split(", ").all(|field| {
            field.split_once('=').is_some_and(|(k, v)| {
                is_single_word(k) && !k.contains('=') && is_single_word(v) && !v.contains('=')
            })
        })
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
        for dims in [&[][..], &[3], &[0, 1, 9223372036854775807]] {
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
