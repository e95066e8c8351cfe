//! Generates `docs/jaxpr-language.md`, the jaxpr language reference, so that it cannot
//! drift from the crate.
//!
//! The hand-written parts are `docs/jaxpr-language.in.md` (overview, lexical structure,
//! grammar, types, scoping, typing) and `tests/primitive_semantics.txt` (one entry per
//! built-in: what it computes and its typing rule in words, grouped by topic). Everything
//! else comes from the public API of `ferrax-ir`: the list of built-ins
//! ([`Builtin::ALL`]), their families, param schemas ([`Builtin::param_specs`]) and flags,
//! the dtypes, and one example per primitive: the smallest equation using it in the JAX
//! corpus (`tests/jax_corpus`, JAX's own text), else in the JAX-printed shard_maps of
//! `tests/collectives`, else in `tests/jaxprs`, cut out into a jaxpr of its own and
//! printed.
//!
//! The test fails when a built-in has no semantics entry, when an entry names a
//! primitive that does not exist, or when any ```` ```jaxpr ```` block of the document
//! does not parse with [`parse_jaxpr`]. With `FERRAX_BLESS=1` it writes the document;
//! otherwise it asserts the checked-in document is what it generates.

use ferrax_ir::dtype::DType;
use ferrax_ir::primitive::{Builtin, Family, ParamKind};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr, ReadError};
use ferrax_ir::{
    Atom, AxisEnv, ClosedJaxpr, Jaxpr, JaxprBuilder, Param, Params, PartitionSpec, Primitive, VarId,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const HAND_WRITTEN: &str = include_str!("../../../docs/jaxpr-language.in.md");
const SEMANTICS: &str = include_str!("primitive_semantics.txt");

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The typing rule shared by a family, in words. Exhaustive: a new family does not
/// compile until it is described.
fn family_rule(f: Family) -> (&'static str, &'static str) {
    match f {
        Family::UnaryFloat => (
            "unary float",
            "one operand of a float dtype (`f16`, `bf16`, `f32`, `f64`); the result has \
             the operand's type, weak type included.",
        ),
        Family::UnarySigned => (
            "unary signed",
            "one operand of a signed integer or float dtype; the result has the operand's \
             type.",
        ),
        Family::UnaryNumeric => (
            "unary numeric",
            "one operand of any numeric dtype (not `bool`); the result has the operand's \
             type.",
        ),
        Family::UnaryAny => (
            "unary, any dtype",
            "one operand of any dtype, `bool` included; the result has the operand's type.",
        ),
        Family::UnaryBitwise => (
            "unary bitwise",
            "one operand of dtype `bool` or an integer dtype; the result has the operand's \
             type.",
        ),
        Family::UnaryInt => (
            "unary integer",
            "one operand of an integer dtype (signed or unsigned, not `bool`); the result has \
             the operand's type.",
        ),
        Family::BinaryNumeric => (
            "binary numeric",
            "two operands of one numeric dtype (not `bool`) whose shapes are equal, or one of \
             them a scalar, or of equal rank where each differing dimension is 1 in one of \
             them; the result has that dtype and the broadcast shape, and is weakly typed \
             only when both operands are.",
        ),
        Family::BinaryFloat => (
            "binary, float base",
            "a float base and an exponent of the base's dtype or of any integer dtype, their \
             shapes combined as for the binary numeric family; the result has the base's \
             dtype, weakly typed only when both operands are.",
        ),
        Family::BinaryFloatOnly => (
            "binary float",
            "two operands of one float dtype (no promotion), shapes combined as for the \
             binary numeric family; the result has that dtype.",
        ),
        Family::BinaryAny => (
            "binary, any dtype",
            "two operands of one dtype (any, `bool` included), shapes combined as for the \
             binary numeric family; the result has that dtype.",
        ),
        Family::BinaryBitwise => (
            "binary bitwise",
            "two operands of one dtype, `bool` or an integer dtype, shapes combined as for \
             the binary numeric family; the result has that dtype.",
        ),
        Family::BinaryShift => (
            "binary integer",
            "two operands of one integer dtype (not `bool`), shapes combined as for the \
             binary numeric family; the result has that dtype.",
        ),
        Family::Comparison => (
            "comparison",
            "two operands of one dtype (any), shapes combined as for the binary numeric \
             family; the result is `bool` of the broadcast shape, weakly typed only when \
             both operands are.",
        ),
        Family::Special => ("special", ""),
    }
}

/// The order the family rules are listed in.
const FAMILY_ORDER: [Family; 14] = [
    Family::UnaryAny,
    Family::UnaryNumeric,
    Family::UnarySigned,
    Family::UnaryFloat,
    Family::UnaryBitwise,
    Family::UnaryInt,
    Family::BinaryNumeric,
    Family::BinaryAny,
    Family::BinaryFloat,
    Family::BinaryFloatOnly,
    Family::BinaryBitwise,
    Family::BinaryShift,
    Family::Comparison,
    Family::Special,
];

/// How a param of each kind is written. Exhaustive: a new kind does not compile until
/// its syntax is given here.
fn kind_syntax(k: ParamKind) -> &'static str {
    match k {
        ParamKind::Int => "`3`, `-1`, or `np.int64(3)`",
        ParamKind::Bool => "`True` or `False`",
        ParamKind::IntOrBool => "`1` or `True`",
        ParamKind::Str => "a bare word (`fry`, `ge`) or a quoted string (`'x {}'`)",
        ParamKind::OptStr => "a word, a string, or `None`",
        ParamKind::Ints => "`()`, `(1,)`, `(0, 2)`",
        ParamKind::OptInts => "`(0, 1)` or `None`",
        ParamKind::Bools => "`(False, True)`",
        ParamKind::DType => "a NumPy dtype name: `float32`, `int32`, `bool`, ...",
        ParamKind::OptDType => "a NumPy dtype name or `None`",
        ParamKind::DotDims => "`(([1], [0]), ([], []))`: (contracting lhs, rhs), (batch lhs, rhs)",
        ParamKind::Jaxpr => "`{ lambda ... }` inline, or the name of a shared `let` jaxpr",
        ParamKind::Jaxprs => "`( { lambda ... } { lambda ... } )` (jaxprs or shared names)",
        ParamKind::NoneOnly => "`None`",
        ParamKind::GatherDims => {
            "`GatherDimensionNumbers(offset_dims=(...), collapsed_slice_dims=(...), \
             start_index_map=(...), operand_batching_dims=(...), start_indices_batching_dims=(...))`"
        }
        ParamKind::ScatterDims => {
            "`ScatterDimensionNumbers(update_window_dims=(...), inserted_window_dims=(...), \
             scatter_dims_to_operand_dims=(...), operand_batching_dims=(...), \
             scatter_indices_batching_dims=(...))`"
        }
        ParamKind::GatherMode => {
            "`GatherScatterMode.CLIP`, `GatherScatterMode.FILL_OR_DROP` or \
             `GatherScatterMode.PROMISE_IN_BOUNDS`"
        }
        ParamKind::ConvDims => {
            "`ConvDimensionNumbers(lhs_spec=(0, 1, 2, 3), rhs_spec=(...), out_spec=(...))`"
        }
        ParamKind::OptScalar => "`None`, `True`, `0`, `1.5`, `inf`, `nan`",
        ParamKind::OptJaxpr => "a jaxpr (inline or shared) or `None`",
        ParamKind::Opaque => "any value text; kept as written, never interpreted",
        ParamKind::OptOpaque => "any value text, or `None`",
        ParamKind::PaddingConfig => "`((1, 2, 0), (0, 0, 1))`: (low, high, interior) per axis",
        ParamKind::Mesh => "`Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit))`",
        ParamKind::Spec => "`P('x', None)`, `P(('x', 'y'),)`, `P()`",
        ParamKind::Specs => "`(P('x',), P())`",
        ParamKind::AxisNames => "`('x',)`, `('x', 'y')`",
        ParamKind::AxisNameSet => "`frozenset({'x', 'y'})`",
        ParamKind::Pairs => "`((0, 1), (1, 0))`",
        ParamKind::AxisName => "a bare name `x` or a tuple `('x', 'y')`",
        ParamKind::Avals => "`(ShapedArray(float32[3]), ShapedArray(int32[], weak_type=True))`",
    }
}

/// One primitive's hand-written entry.
struct Entry {
    topic: String,
    text: String,
}

/// Reads `primitive_semantics.txt`: `## Topic` lines, then entries `name: text` with
/// indented continuation lines; `#` lines (one hash) are comments.
fn read_semantics() -> (Vec<String>, BTreeMap<String, Entry>) {
    let mut topics = Vec::new();
    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut current: Option<String> = None;
    for (i, line) in SEMANTICS.lines().enumerate() {
        if let Some(t) = line.strip_prefix("## ") {
            topics.push(t.trim().to_owned());
            current = None;
        } else if line.starts_with('#') || line.trim().is_empty() {
            continue;
        } else if line.starts_with(' ') {
            match &current {
                Some(name) => {
                    let e = entries.get_mut(name).expect("current entry");
                    e.text.push(' ');
                    e.text.push_str(line.trim());
                }
                None => problems.push(format!("line {}: continuation of nothing", i + 1)),
            }
        } else if let Some((name, text)) = line.split_once(": ") {
            let name = name.trim().to_owned();
            let Some(topic) = topics.last() else {
                problems.push(format!("line {}: entry before any ## topic", i + 1));
                continue;
            };
            if entries.contains_key(&name) {
                problems.push(format!("line {}: `{name}` described twice", i + 1));
            }
            entries.insert(
                name.clone(),
                Entry {
                    topic: topic.clone(),
                    text: text.trim().to_owned(),
                },
            );
            current = Some(name);
        } else {
            problems.push(format!("line {}: not `name: text`: {line:?}", i + 1));
        }
    }
    for name in entries.keys() {
        if Builtin::from_name(name).is_none() {
            problems.push(format!(
                "primitive_semantics.txt describes `{name}`, which is not a built-in"
            ));
        }
    }
    for b in Builtin::ALL {
        if !entries.contains_key(b.name()) {
            problems.push(format!(
                "primitive_semantics.txt has no entry for the built-in `{}`",
                b.name()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "primitive_semantics.txt:\n{}",
        problems.join("\n")
    );
    (topics, entries)
}

/// A real equation using a primitive, cut out into a jaxpr of its own.
struct Example {
    text: String,
    source: String,
}

/// `eqn` of `j` alone, built by `b`: its input variables become the invars, its outputs
/// the outputs.
fn single_eqn(mut b: JaxprBuilder, j: &Jaxpr, eqn_index: usize) -> Option<Jaxpr> {
    let eqn = &j.eqns()[eqn_index];
    let mut vars: HashMap<VarId, VarId> = HashMap::new();
    let mut inputs = Vec::new();
    for &a in eqn.inputs() {
        inputs.push(match a {
            Atom::Var(v) => {
                let nv = *vars
                    .entry(v)
                    .or_insert_with(|| b.add_invar(j.var_aval(v).clone()));
                Atom::Var(nv)
            }
            Atom::Lit(l) => b.literal(*j.literal(l)),
        });
    }
    let outs = b
        .add_eqn(eqn.primitive().clone(), inputs, eqn.params().clone())
        .ok()?;
    b.build(outs.into_iter().map(Atom::Var).collect()).ok()
}

/// The printed text of `j`, if it reads back.
fn example_text(j: &Jaxpr) -> Option<String> {
    let text = print_jaxpr(j);
    parse_jaxpr(&text).ok()?;
    Some(text)
}

/// `eqn` of `j` alone in a jaxpr of its own.
fn standalone(j: &Jaxpr, eqn_index: usize) -> Option<String> {
    example_text(&single_eqn(JaxprBuilder::new(), j, eqn_index)?)
}

/// `eqn` of the `shard_map` body `j` alone in a `shard_map` of the same mesh (and other
/// params) as the one around it (`params`), its operands and results replicated.
fn standalone_in_shard_map(j: &Jaxpr, eqn_index: usize, params: &Params) -> Option<String> {
    let Some(Param::Mesh(mesh)) = params.get("mesh") else {
        return None;
    };
    let env = AxisEnv::of(mesh.axes().iter().map(|(n, s)| (n.clone(), *s)));
    let body = Arc::new(single_eqn(JaxprBuilder::with_axis_env(env), j, eqn_index)?);
    let replicated =
        |n: usize| Param::Specs(vec![PartitionSpec::replicated(); n].into_iter().collect());
    let params = params
        .with("in_specs", replicated(body.invars().len()))
        .with("out_specs", replicated(body.outvars().len()))
        .with(
            "jaxpr",
            Param::Jaxpr(ClosedJaxpr::new(body.clone(), Vec::new()).ok()?),
        );
    let mut b = JaxprBuilder::new();
    let inputs: Vec<Atom> = body
        .in_avals()
        .into_iter()
        .map(|a| Atom::Var(b.add_invar(a)))
        .collect();
    let outs = b
        .add_eqn(Primitive::Builtin(Builtin::ShardMap), inputs, params)
        .ok()?;
    example_text(&b.build(outs.into_iter().map(Atom::Var).collect()).ok()?)
}

/// Reads a test file's jaxpr: drops `;;` comments and the `; expect:` section.
fn jaxpr_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("; expect") {
            break;
        }
        if line.starts_with(';') {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn jaxpr_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jaxpr"))
        .collect();
    files.sort();
    files
}

/// For each built-in, the shortest standalone equation using it, from the JAX corpus
/// first, then from `tests/collectives`, then from `tests/jaxprs`.
fn find_examples() -> BTreeMap<&'static str, Example> {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut best: BTreeMap<&'static str, Example> = BTreeMap::new();
    for dir in ["jax_corpus", "collectives", "jaxprs"] {
        let mut found: BTreeMap<&'static str, Example> = BTreeMap::new();
        for path in jaxpr_files(&tests.join(dir)) {
            let Ok(top) = parse_jaxpr(&jaxpr_text(&path)) else {
                continue;
            };
            let source = format!(
                "rust/ir/tests/{dir}/{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            );
            // Every equation, with the index of the top-level equation holding it and the
            // params of the innermost shard_map around it.
            type Item = (Arc<Jaxpr>, Option<usize>, Option<Params>);
            let top = Arc::new(top);
            let mut stack: Vec<Item> = vec![(top.clone(), None, None)];
            while let Some((j, top_index, shard_map)) = stack.pop() {
                for (i, eqn) in j.eqns().iter().enumerate() {
                    let holder = top_index.unwrap_or(i);
                    let Some(b) = eqn.primitive().as_builtin() else {
                        continue;
                    };
                    let inner_map = if b == Builtin::ShardMap {
                        Some(eqn.params().clone())
                    } else {
                        shard_map.clone()
                    };
                    for sub in eqn.sub_jaxprs() {
                        stack.push((sub.jaxpr().clone(), Some(holder), inner_map.clone()));
                    }
                    // A collective that needs its axes' sizes gets a shard_map of its
                    // own; failing that, the top-level equation around it is shown.
                    let text = standalone(&j, i)
                        .or_else(|| {
                            let params = shard_map.as_ref()?;
                            standalone_in_shard_map(&j, i, params)
                        })
                        .or_else(|| top_index.and_then(|t| standalone(&top, t)));
                    let Some(text) = text else { continue };
                    let key = (text.lines().count(), text.len());
                    let better = found
                        .get(b.name())
                        .is_none_or(|e| key < (e.text.lines().count(), e.text.len()));
                    if better {
                        found.insert(
                            b.name(),
                            Example {
                                text,
                                source: source.clone(),
                            },
                        );
                    }
                }
            }
        }
        for (k, v) in found {
            best.entry(k).or_insert(v);
        }
    }
    best
}

fn anchor(name: &str) -> String {
    format!("prim-{}", name.replace(['-', '_'], "-"))
}

fn dtype_table() -> String {
    let mut s = String::new();
    s.push_str("| type name | param (NumPy) name | class | bytes |\n|---|---|---|---|\n");
    for &d in DType::ALL.iter().chain(std::iter::once(&DType::KEY_FRY)) {
        let class = if d.is_key() {
            "PRNG key"
        } else if d == DType::Bool {
            "boolean"
        } else if d.is_float() {
            "float"
        } else if d.is_signed() {
            "signed integer"
        } else {
            "unsigned integer"
        };
        let _ = writeln!(
            s,
            "| `{}` | `{}` | {} | {} |",
            d.short_name(),
            d.numpy_name(),
            class,
            d.size_bytes()
        );
    }
    s
}

fn param_kind_table() -> String {
    let mut kinds: Vec<ParamKind> = Vec::new();
    for b in Builtin::ALL {
        for spec in b.param_specs() {
            if !kinds.contains(&spec.kind) {
                kinds.push(spec.kind);
            }
        }
    }
    let mut rows: Vec<(String, &str)> = kinds
        .iter()
        .map(|&k| (k.to_string(), kind_syntax(k)))
        .collect();
    rows.sort();
    let mut s = String::from("| kind | written as |\n|---|---|\n");
    for (k, syn) in rows {
        let _ = writeln!(s, "| {k} | {syn} |");
    }
    s
}

fn flags(b: Builtin) -> Vec<&'static str> {
    let mut f = Vec::new();
    if b.is_higher_order() {
        f.push("higher-order (params hold jaxprs)");
    }
    if b.takes_keys() {
        f.push("takes `key<fry>` operands");
    }
    if b.has_effect() {
        f.push("has an effect (never dropped or reordered)");
    }
    if b.is_collective() {
        f.push("collective (needs an enclosing `shard_map`)");
    }
    f
}

fn primitives_section() -> String {
    let (topics, entries) = read_semantics();
    let examples = find_examples();
    let mut s = String::new();

    // Index.
    let _ = writeln!(
        s,
        "ferrax knows {} built-in primitives. Each section below gives the primitive's \
         family (the shared typing rule it follows, if any), its params as the schema \
         declares them, its properties, what it computes and how it is typed, and an \
         example: the smallest equation using it in JAX's own printed output \
         (`rust/ir/tests/jax_corpus`, then `rust/ir/tests/collectives`), or failing that \
         in ferrax's test files (`rust/ir/tests/jaxprs`), cut out into a jaxpr of its own \
         and printed by ferrax (which prints as JAX does).\n",
        Builtin::ALL.len()
    );
    for topic in &topics {
        let mut names: Vec<&String> = entries
            .iter()
            .filter(|(_, e)| &e.topic == topic)
            .map(|(n, _)| n)
            .collect();
        names.sort();
        let links: Vec<String> = names
            .iter()
            .map(|n| format!("[`{n}`](#{})", anchor(n)))
            .collect();
        let _ = writeln!(s, "- **{topic}**: {}", links.join(", "));
    }
    s.push('\n');

    let _ = writeln!(s, "### Family rules\n");
    let _ = writeln!(
        s,
        "Most elementwise primitives share a typing rule by family; a primitive of the \
         `special` family has a rule of its own, given in its section.\n"
    );
    for b in Builtin::ALL {
        assert!(
            FAMILY_ORDER.contains(&b.family()),
            "add {:?} (the family of `{}`) to FAMILY_ORDER",
            b.family(),
            b.name()
        );
    }
    for f in FAMILY_ORDER {
        let (name, rule) = family_rule(f);
        if !rule.is_empty() {
            let _ = writeln!(s, "- **{name}**: {rule}");
        }
    }
    s.push('\n');

    for topic in &topics {
        let _ = writeln!(s, "### {topic}\n");
        let mut names: Vec<&String> = entries
            .iter()
            .filter(|(_, e)| &e.topic == topic)
            .map(|(n, _)| n)
            .collect();
        names.sort();
        for name in names {
            let b = Builtin::from_name(name).expect("checked");
            let e = &entries[name.as_str()];
            let _ = writeln!(s, "<a id=\"{}\"></a>\n#### `{name}`\n", anchor(name));
            let (fam, _) = family_rule(b.family());
            let _ = writeln!(s, "- family: {fam}");
            if b.param_specs().is_empty() {
                let _ = writeln!(s, "- params: none");
            } else {
                let _ = writeln!(s, "- params:");
                for spec in b.param_specs() {
                    let _ = writeln!(
                        s,
                        "  - `{}`: {}{}",
                        spec.name,
                        spec.kind,
                        if spec.required { "" } else { " (optional)" }
                    );
                }
            }
            let fl = flags(b);
            if !fl.is_empty() {
                let _ = writeln!(s, "- {}", fl.join("; "));
            }
            let _ = writeln!(s, "\n{}\n", e.text);
            match examples.get(name.as_str()) {
                Some(ex) => {
                    let _ = writeln!(
                        s,
                        "Example (from `{}`):\n\n```jaxpr\n{}\n```\n",
                        ex.source,
                        ex.text.trim_end()
                    );
                }
                None => {
                    let _ = writeln!(s, "No example in the corpus or test files yet.\n");
                }
            }
        }
    }
    s
}

fn generate() -> String {
    let mut doc = String::from(
        "<!-- Generated by rust/ir/tests/language_reference.rs from docs/jaxpr-language.in.md, \
         rust/ir/tests/primitive_semantics.txt and the ferrax-ir catalogue. Do not edit: \
         edit those and rerun with FERRAX_BLESS=1. -->\n\n",
    );
    let body = HAND_WRITTEN
        .replace("{{DTYPES}}", dtype_table().trim_end())
        .replace("{{PARAM_KINDS}}", param_kind_table().trim_end())
        .replace("{{NUM_PRIMITIVES}}", &Builtin::ALL.len().to_string())
        .replace("{{PRIMITIVES}}", primitives_section().trim_end());
    doc.push_str(&body);
    if !doc.ends_with('\n') {
        doc.push('\n');
    }
    doc
}

/// The code blocks of a markdown text tagged `tag` (```` ```jaxpr ````), with their
/// 1-based first lines.
fn jaxpr_blocks(doc: &str, tag: &str) -> Vec<(usize, String)> {
    let fence = format!("```{tag}");
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in doc.lines().enumerate() {
        match &mut current {
            None if line.trim() == fence => current = Some((i + 2, String::new())),
            None => {}
            Some(_) if line.trim() == "```" => blocks.extend(current.take()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    assert!(current.is_none(), "an unterminated ```jaxpr block");
    blocks
}

#[test]
fn language_reference_is_current() {
    let doc = generate();

    // Every example reads back: the grammar's examples and the primitives' alike.
    let mut failures = Vec::new();
    for (line, block) in jaxpr_blocks(&doc, "jaxpr") {
        if let Err(e) = parse_jaxpr(&block) {
            failures.push(format!("line {line} of the document: {e}\n{block}"));
        }
    }
    // The ill-typed examples are well formed and rejected by the typechecker.
    for (line, block) in jaxpr_blocks(&doc, "jaxpr-ill-typed") {
        let read = parse_jaxpr(&block);
        if matches!(read, Err(ReadError::Type(_))) {
            continue;
        }
        failures.push(match read {
            Ok(_) => {
                format!("line {line} of the document: an ill-typed example is accepted\n{block}")
            }
            Err(e) => format!("line {line} of the document: not a type error: {e}\n{block}"),
        });
    }
    // The syntax-error examples are rejected by the parser itself.
    for (line, block) in jaxpr_blocks(&doc, "jaxpr-syntax-error") {
        if !matches!(parse_jaxpr(&block), Err(ReadError::Parse(_))) {
            failures.push(format!(
                "line {line} of the document: a syntax-error example is not one\n{block}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "jaxpr blocks of docs/jaxpr-language.md that do not parse:\n{}",
        failures.join("\n")
    );

    // Every primitive named in backquotes in the hand-written text exists.
    let param_names: BTreeSet<&str> = Builtin::ALL
        .iter()
        .flat_map(|b| b.param_specs().iter().map(|s| s.name))
        .collect();
    let mut unknown = BTreeSet::new();
    let texts = [SEMANTICS, HAND_WRITTEN];
    for part in texts.iter().flat_map(|t| t.split('`').skip(1).step_by(2)) {
        let looks_like_prim = part.starts_with(|c: char| c.is_ascii_lowercase())
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
            && part.contains(['_', '-']);
        if looks_like_prim
            && Builtin::from_name(part).is_none()
            && !param_names.contains(part)
            && !KNOWN_NON_PRIMITIVES.contains(&part)
        {
            unknown.insert(part.to_owned());
        }
    }
    assert!(
        unknown.is_empty(),
        "primitive_semantics.txt or docs/jaxpr-language.in.md name these in backquotes, \
         which are not built-ins (add them to KNOWN_NON_PRIMITIVES if they are params or \
         other words): {unknown:?}"
    );

    let path = repo_root().join("docs/jaxpr-language.md");
    if std::env::var_os("FERRAX_BLESS").is_some() {
        std::fs::write(&path, &doc).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == doc,
        "docs/jaxpr-language.md is not what rust/ir/tests/language_reference.rs generates; \
         rerun with FERRAX_BLESS=1 (cargo test -p ferrax-ir --test language_reference) and \
         review the diff"
    );
}

/// Words of `primitive_semantics.txt` and `jaxpr-language.in.md` in backquotes that look
/// like primitive names but are not (param names of any built-in are recognised without being listed here).
const KNOWN_NON_PRIMITIVES: &[&str] = &[
    // The crate.
    "ferrax-ir",
    // JAX's names, mentioned for readers who know them.
    "add_jaxvals",
    "avg_pool",
    "psum_invariant",
    // Fields of the gather, scatter and convolution dimension numbers.
    "collapsed_slice_dims",
    "inserted_window_dims",
    "offset_dims",
    "out_spec",
    "start_index_map",
    "update_window_dims",
];
