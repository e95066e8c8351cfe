//! Lowering to StableHLO: a jaxpr becomes an MLIR text module that jaxlib's XLA client
//! compiles as it is.
//!
//! The module has `func.func public @main`, taking the jaxpr's constvars then its invars
//! as arguments (constants are never embedded as text) and returning its outputs. Ops are
//! written in MLIR's generic form (`%3 = "stablehlo.add"(%1, %2) : (...) -> ...`), which
//! is uniform and stable across StableHLO versions.
//!
//! Every sub-jaxpr becomes a private function, emitted once however often it is used:
//! `jit` is a `func.call`; `cond` is a `stablehlo.case` whose branch regions call their
//! branch's function; `while` is a `stablehlo.while` whose regions call the condition and
//! the body; `scan` is a `stablehlo.while` over an index that slices the scanned inputs
//! and updates the stacked outputs around a call of the body. Functions are lowered from
//! a worklist, so nesting depth costs no stack; each is one pass over its equations
//! writing into the module's one buffer.

mod bits;
mod callback;
mod control;
mod fast;
mod igamma;
mod indexing;
mod linalg;
mod ops;
mod random;
mod sorting;
mod spmd;
mod text;
mod windowed;

use crate::jaxpr::{Atom, Jaxpr, VarId};
use crate::params::{Opaque, Params};
use crate::primitive::Primitive;
use crate::sharding::{Mesh, PartitionSpec};
use std::collections::HashMap;
use std::fmt;
use std::fmt::Write as _;
use std::sync::Arc;

pub(crate) use text::{tensor_type, Ssa};

/// Why a jaxpr cannot be lowered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LowerError {
    /// An extension primitive: it has no StableHLO lowering in the crate (the Python front
    /// end lowers extensions by decomposing them into built-ins first).
    Unsupported {
        /// The primitive's name.
        primitive: String,
    },
    /// A nested jaxpr closes over constants; they must be hoisted to the top level first
    /// (only the top-level jaxpr's constvars become arguments of `@main`).
    NestedConstants {
        /// The equation's primitive.
        primitive: String,
        /// How many constants the nested jaxpr has.
        count: usize,
    },
    /// A param the lowering needs is missing or ill formed (the typechecker prevents this
    /// for built jaxprs).
    BadParam {
        /// The primitive.
        primitive: String,
        /// The param.
        param: &'static str,
    },
    /// A mesh has more devices than the module has partitions.
    TooFewPartitions {
        /// The primitive using the mesh.
        primitive: String,
        /// The mesh's device count.
        mesh_size: i64,
        /// The module's partition count.
        num_partitions: u32,
    },
    /// A sharding annotation is not valid for its value.
    BadSharding {
        /// The primitive.
        primitive: String,
        /// What is wrong.
        reason: String,
    },
    /// A collective outside any `shard_map` body, or a `shard_map` inside another.
    NoMesh {
        /// The primitive.
        primitive: String,
    },
    /// The lowering options do not fit the jaxpr (a sharding for each argument and each
    /// result, or none).
    BadOptions {
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerError::Unsupported { primitive } => write!(
                f,
                "primitive '{primitive}' has no StableHLO lowering (define a lowering by decomposition)"
            ),
            LowerError::NestedConstants { primitive, count } => write!(
                f,
                "a jaxpr nested in '{primitive}' closes over {count} constants; hoist them to the top level before lowering"
            ),
            LowerError::BadParam { primitive, param } => {
                write!(f, "'{primitive}' has no valid '{param}' param")
            }
            LowerError::TooFewPartitions {
                primitive,
                mesh_size,
                num_partitions,
            } => write!(
                f,
                "'{primitive}' uses a mesh of {mesh_size} devices but the module is lowered for \
                 {num_partitions} partitions"
            ),
            LowerError::BadSharding { primitive, reason } => {
                write!(f, "'{primitive}': {reason}")
            }
            LowerError::BadOptions { reason } => f.write_str(reason),
            LowerError::NoMesh { primitive } => {
                write!(f, "'{primitive}' needs an enclosing shard_map (and only one)")
            }
        }
    }
}

impl std::error::Error for LowerError {}

/// How to lower a jaxpr for several partitions (SPMD, with Shardy): the mesh and the
/// partition spec of each of `@main`'s arguments (constvars, then invars) and results
/// (`None`: unannotated; an empty list: none annotated), and the number of partitions
/// the module is compiled for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// The mesh the argument and result specs refer to (declared as `sdy.mesh @mesh`).
    pub mesh: Option<Mesh>,
    /// One per argument of `@main` (constvars then invars), or empty.
    pub arg_specs: Vec<Option<PartitionSpec>>,
    /// One per result, or empty.
    pub result_specs: Vec<Option<PartitionSpec>>,
    /// The number of partitions (devices) the module runs on.
    pub num_partitions: u32,
}

impl Default for LowerOptions {
    fn default() -> LowerOptions {
        LowerOptions {
            mesh: None,
            arg_specs: Vec::new(),
            result_specs: Vec::new(),
            num_partitions: 1,
        }
    }
}

/// The partitions a jaxpr needs: the most devices of any mesh its `shard_map`s and
/// `sharding_constraint`s use (at any depth), 1 if none.
///
/// # Examples
/// ```
/// use ferrax_ir::{lower::stablehlo::required_partitions, text::parse_jaxpr};
/// let j = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }")?;
/// assert_eq!(required_partitions(&j), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn required_partitions(jaxpr: &Jaxpr) -> u32 {
    let mut most: i64 = 1;
    let mut seen = std::collections::HashSet::new();
    let mut work = vec![jaxpr];
    while let Some(j) = work.pop() {
        for e in j.eqns() {
            if let Some(crate::params::Param::Mesh(m)) = e.params().get("mesh") {
                most = most.max(m.size());
            }
            for sub in e.sub_jaxprs() {
                if seen.insert(Arc::as_ptr(sub.jaxpr())) {
                    work.push(sub.jaxpr());
                }
            }
        }
    }
    u32::try_from(most).unwrap_or(u32::MAX)
}

/// Lowers a jaxpr to a StableHLO module named `module_name`. `@main` takes the constvars
/// (in order) and then the invars.
///
/// ```
/// use ferrax_ir::{lower::stablehlo::lower_jaxpr, text::parse_jaxpr};
/// let j = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }")?;
/// let module = lower_jaxpr(&j, "m")?;
/// assert!(module.starts_with("module @m"));
/// assert!(module.contains("func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>"));
/// assert!(module.contains("stablehlo.sine"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn lower_jaxpr(jaxpr: &Jaxpr, module_name: &str) -> Result<String, LowerError> {
    lower_jaxpr_with(jaxpr, module_name, &LowerOptions::default())
}

/// Lowers a jaxpr as [`lower_jaxpr`] does, for SPMD as JAX 0.10 does with Shardy: each
/// mesh used is declared at module level (`sdy.mesh @mesh = <["x"=2, "y"=2]>`), `@main`'s
/// arguments and results carry `sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>`, and
/// the module gets `mhlo.num_partitions` (with `mhlo.num_replicas = 1`) when it has more
/// than one partition.
///
/// # Examples
/// ```
/// use ferrax_ir::lower::stablehlo::{lower_jaxpr_with, LowerOptions};
/// use ferrax_ir::{text::parse_jaxpr, Mesh, PartitionSpec};
/// let j = parse_jaxpr("{ lambda ; a:f32[4,3]. let b:f32[4,3] = sin a in (b,) }")?;
/// // The argument split by rows over `x` on 2 devices.
/// let options = LowerOptions {
///     mesh: Some(Mesh::new([("x", 2)])?),
///     arg_specs: vec![Some(PartitionSpec::new(vec![vec!["x".into()]]))],
///     num_partitions: 2,
///     ..LowerOptions::default()
/// };
/// let module = lower_jaxpr_with(&j, "m", &options)?;
/// assert!(module.contains(r#"sdy.mesh @mesh = <["x"=2]>"#), "{module}");
/// assert!(module.contains(r#"#sdy.sharding<@mesh, [{"x"}, {}]>"#), "{module}");
/// assert!(module.contains("mhlo.num_partitions = 2"), "{module}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn lower_jaxpr_with(
    jaxpr: &Jaxpr,
    module_name: &str,
    options: &LowerOptions,
) -> Result<String, LowerError> {
    lower_jaxpr_full(jaxpr, module_name, options).map(|(text, _)| text)
}

/// A host callback a lowered module calls: the `callback` param of its equation, and
/// whether the call passes a token (an ordered callback: the host function gets the
/// token first and returns it first).
#[derive(Clone, Debug, PartialEq)]
pub struct HostCallback {
    /// The equation's `callback` param.
    pub callback: Opaque,
    /// Whether the custom call takes and returns a token (`effect=OrderedDebug`,
    /// `ordered=True`).
    pub token: bool,
    /// For `debug_print` (whose `callback` is then the name `debug_print`): the
    /// equation's params, from which the host formats and prints the line.
    pub print: Option<Params>,
}

/// Lowers a jaxpr as [`lower_jaxpr_with`] does, and returns with the text the host
/// callbacks the module calls (`debug_callback`'s and `pure_callback`'s), in the order of
/// the indices its custom calls name: the module must be compiled with exactly these
/// callbacks (jaxlib's `host_callbacks`).
pub fn lower_jaxpr_full(
    jaxpr: &Jaxpr,
    module_name: &str,
    options: &LowerOptions,
) -> Result<(String, Vec<HostCallback>), LowerError> {
    let n_args = jaxpr.constvars().len() + jaxpr.invars().len();
    let n_results = jaxpr.outvars().len();
    for (what, given, want) in [
        ("argument", options.arg_specs.len(), n_args),
        ("result", options.result_specs.len(), n_results),
    ] {
        if given != 0 && given != want {
            return Err(LowerError::BadOptions {
                reason: format!("{given} {what} specs given for {want} {what}s"),
            });
        }
    }
    if options.num_partitions == 0 {
        return Err(LowerError::BadOptions {
            reason: "num_partitions must be at least 1".to_owned(),
        });
    }
    let mut m = Module::new();
    m.num_partitions = options.num_partitions;
    // About 170 bytes per equation for element-wise chains (a literal operand adds its
    // constant and broadcast lines).
    m.out.reserve(jaxpr.eqns().len() * 192 + 256);
    // The module's header; the meshes' declarations go after it at the end (they are
    // known once everything is lowered), so the text is never copied whole.
    let _ = write!(m.out, "module @{}", sanitize(module_name));
    if options.num_partitions > 1 {
        let _ = write!(
            m.out,
            " attributes {{mhlo.num_partitions = {} : i32, mhlo.num_replicas = 1 : i32}}",
            options.num_partitions
        );
    }
    m.out.push_str(" {\n");
    let head_len = m.out.len();
    let annotated = options
        .arg_specs
        .iter()
        .chain(&options.result_specs)
        .any(|s| s.is_some());
    let mut arg_sh = Vec::new();
    let mut res_sh = Vec::new();
    if annotated {
        let Some(mesh) = &options.mesh else {
            return Err(LowerError::BadOptions {
                reason: "argument or result specs given without a mesh".to_owned(),
            });
        };
        let symbol = m.mesh_symbol(mesh, "lower_to_stablehlo")?;
        let in_avals = jaxpr
            .constvars()
            .iter()
            .chain(jaxpr.invars())
            .map(|&v| jaxpr.var_aval(v).clone());
        for (what, specs, avals, out) in [
            (
                "argument",
                &options.arg_specs,
                in_avals.collect::<Vec<_>>(),
                &mut arg_sh,
            ),
            (
                "result",
                &options.result_specs,
                jaxpr.out_avals(),
                &mut res_sh,
            ),
        ] {
            for (i, spec) in specs.iter().enumerate() {
                out.push(match spec {
                    Some(spec) => {
                        let dims = crate::sharding::sdy_sharding(mesh, spec, avals[i].shape.rank())
                            .map_err(|e| LowerError::BadOptions {
                                reason: format!("{what} {i} ({}): {e}", avals[i]),
                            })?;
                        Some(format!("#sdy.sharding<@{symbol}, {dims}>"))
                    }
                    None => None,
                });
            }
        }
    }
    m.main_shardings = Some((arg_sh, res_sh));
    m.function(jaxpr, "main", true, None)?;
    m.main_shardings = None;
    while let Some((j, name, mesh)) = m.pending.pop() {
        m.function(&j, &name, false, mesh)?;
    }
    m.out.push_str("}\n");
    if !m.meshes.is_empty() {
        let mut decls = String::new();
        for (mesh, symbol) in &m.meshes {
            let _ = writeln!(
                decls,
                "  sdy.mesh @{symbol} = {}",
                crate::sharding::sdy_mesh(mesh)
            );
        }
        m.out.insert_str(head_len, &decls);
    }
    Ok((m.out, m.host_callbacks))
}

/// Makes a name usable as an MLIR symbol (letters, digits, `_`, `.`, `$`).
fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("m_{s}")
    } else {
        s
    }
}

/// `@main`'s argument and result sharding attributes (`None`: unannotated).
type MainShardings = (Vec<Option<String>>, Vec<Option<String>>);

/// The module being written: its buffer, and the sub-jaxprs lowered (or queued) as
/// private functions, by identity.
pub(crate) struct Module {
    pub(crate) out: String,
    functions: HashMap<(*const Jaxpr, *const Mesh), String>,
    pending: Vec<(Arc<Jaxpr>, String, Option<Arc<Mesh>>)>,
    /// The next collective's channel handle.
    pub(crate) next_channel: u64,
    /// The partition count the module is compiled for.
    pub(crate) num_partitions: u32,
    /// While `@main` is written: its argument and result shardings.
    main_shardings: Option<MainShardings>,
    /// The meshes used, each with its `sdy.mesh` symbol, in order of first use.
    pub(crate) meshes: Vec<(Mesh, String)>,
    /// The host callbacks called, by index (`mhlo.backend_config = {index = K}`).
    pub(crate) host_callbacks: Vec<HostCallback>,
    /// Whether each jaxpr seen has an ordered effect, in itself or in a sub-jaxpr (see
    /// [`Module::threads_token`]), by identity.
    ordered: HashMap<*const Jaxpr, bool>,
    /// Whether plain element-wise equations take the fast path (see `fast.rs`; off only
    /// in the tests comparing both paths).
    pub(crate) fast: bool,
}

/// The type of the token ordered effects pass along.
pub(crate) const TOKEN_TYPE: &str = "!stablehlo.token";

/// Whether an equation is an ordered host callback itself (`debug_callback` with
/// `effect=OrderedDebug`, `debug_print` or `io_callback` with `ordered=True`).
fn is_ordered_callback(e: &crate::jaxpr::Eqn) -> bool {
    use crate::params::Param;
    match e.primitive() {
        Primitive::Builtin(crate::primitive::Builtin::DebugCallback) => {
            matches!(e.params().get("effect"), Some(Param::Str(s)) if &**s == "OrderedDebug")
        }
        Primitive::Builtin(
            crate::primitive::Builtin::DebugPrint | crate::primitive::Builtin::IoCallback,
        ) => matches!(e.params().get("ordered"), Some(Param::Bool(true))),
        _ => false,
    }
}

/// The sub-jaxprs of a jaxpr's equations' params.
fn sub_jaxprs(j: &Jaxpr) -> Vec<&Jaxpr> {
    use crate::params::Param;
    let mut out = Vec::new();
    for e in j.eqns() {
        for (_, p) in e.params().iter() {
            match p {
                Param::Jaxpr(cj) => out.push(&**cj.jaxpr()),
                Param::Jaxprs(cjs) => out.extend(cjs.iter().map(|cj| &**cj.jaxpr())),
                _ => {}
            }
        }
    }
    out
}

impl Module {
    fn new() -> Module {
        Module {
            out: String::new(),
            functions: HashMap::new(),
            pending: Vec::new(),
            num_partitions: 1,
            main_shardings: None,
            meshes: Vec::new(),
            next_channel: 1,
            host_callbacks: Vec::new(),
            ordered: HashMap::new(),
            fast: !fast::disabled(),
        }
    }

    /// Whether the function of `root` takes and returns a token, as JAX threads one
    /// through every function with an ordered effect (an ordered host callback in it or
    /// in a sub-jaxpr, at any depth). Memoized by identity; iterative (no recursion a
    /// deep program can overflow); linear in the program's size.
    pub(crate) fn threads_token(&mut self, root: &Jaxpr) -> bool {
        let key = root as *const Jaxpr;
        if let Some(&b) = self.ordered.get(&key) {
            return b;
        }
        let mut stack: Vec<(&Jaxpr, bool)> = vec![(root, false)];
        while let Some((j, expanded)) = stack.pop() {
            let k = j as *const Jaxpr;
            if self.ordered.contains_key(&k) {
                continue;
            }
            let subs = sub_jaxprs(j);
            if expanded {
                let ordered = j.eqns().iter().any(is_ordered_callback)
                    || subs
                        .iter()
                        .any(|s| self.ordered.get(&(*s as *const Jaxpr)) == Some(&true));
                self.ordered.insert(k, ordered);
            } else {
                stack.push((j, true));
                for s in subs {
                    if !self.ordered.contains_key(&(s as *const Jaxpr)) {
                        stack.push((s, false));
                    }
                }
            }
        }
        self.ordered.get(&key) == Some(&true)
    }

    /// The function's current token (its argument, or the last ordered call's), or a
    /// fresh one (`stablehlo.after_all`) in a function that has none.
    pub(crate) fn take_token(&mut self, f: &mut FuncState<'_>) -> Ssa {
        match f.token.take() {
            Some(t) => t,
            None => self
                .op(f, "stablehlo.after_all", &[], "", &[TOKEN_TYPE.to_owned()])
                .remove(0),
        }
    }

    /// The name of the private function for a sub-jaxpr run in the `shard_map` body of
    /// `mesh` (or outside any), queueing it the first time: one function per jaxpr and
    /// mesh, so that collectives in it lower with that mesh's groups.
    pub(crate) fn function_for(
        &mut self,
        j: &Arc<Jaxpr>,
        hint: &str,
        mesh: Option<&Arc<Mesh>>,
    ) -> String {
        let key = (Arc::as_ptr(j), mesh.map_or(std::ptr::null(), Arc::as_ptr));
        if let Some(name) = self.functions.get(&key) {
            return name.clone();
        }
        let name = format!("{}_{}", sanitize(hint), self.functions.len());
        self.functions.insert(key, name.clone());
        self.pending
            .push((Arc::clone(j), name.clone(), mesh.cloned()));
        name
    }

    /// Writes one function: its signature, its equations, its return.
    fn function(
        &mut self,
        j: &Jaxpr,
        name: &str,
        public: bool,
        mesh: Option<Arc<Mesh>>,
    ) -> Result<(), LowerError> {
        let mut f = FuncState::new(j);
        f.mesh = mesh;
        let (arg_sh, res_sh) = self.main_shardings.take().unwrap_or_default();
        let annotate = |ty: &str, sh: Option<&Option<String>>| match sh {
            Some(Some(s)) => format!("{ty} {{sdy.sharding = {s}}}"),
            _ => ty.to_owned(),
        };
        let params: Vec<String> = j
            .constvars()
            .iter()
            .chain(j.invars())
            .enumerate()
            .map(|(i, &v)| {
                let arg = Ssa::new(format!("%arg{i}"), tensor_type(j.var_aval(v)));
                let s = annotate(&format!("{}: {}", arg.name, arg.ty), arg_sh.get(i));
                f.bind(v, arg);
                s
            })
            .collect();
        let mut results: Vec<String> = j.out_avals().iter().map(tensor_type).collect();
        let mut result_decls: Vec<String> = results
            .iter()
            .enumerate()
            .map(|(i, t)| annotate(t, res_sh.get(i)))
            .collect();
        // A function with an ordered effect takes the token first and returns it first
        // (`@main`'s marked `jax.token`, as JAX's: the runtime passes the token of the
        // previous call and keeps the one returned).
        let threaded = self.threads_token(j);
        let mut params = params;
        if threaded {
            let mark = if public { " {jax.token = true}" } else { "" };
            params.insert(0, format!("%token: {TOKEN_TYPE}{mark}"));
            result_decls.insert(0, format!("{TOKEN_TYPE}{mark}"));
            results.insert(0, TOKEN_TYPE.to_owned());
            f.token = Some(Ssa::new("%token".to_owned(), TOKEN_TYPE.to_owned()));
        }
        let _ = writeln!(
            self.out,
            "  func.func {}@{}({}) -> ({}) {{",
            if public { "public " } else { "private " },
            name,
            params.join(", "),
            result_decls.join(", ")
        );
        for e in j.eqns() {
            if let Primitive::Builtin(b) = e.primitive() {
                if self.lower_plain_elementwise(&mut f, *b, e) {
                    continue;
                }
            }
            let outs = match e.primitive() {
                Primitive::Builtin(b) => self.lower_eqn(&mut f, *b, e)?,
                Primitive::Extension(x) => {
                    return Err(LowerError::Unsupported {
                        primitive: x.name().to_owned(),
                    })
                }
            };
            for (&v, s) in e.outvars().iter().zip(outs) {
                f.bind(v, s);
            }
        }
        let mut outs: Vec<Ssa> = j.outvars().iter().map(|&a| f.atom(self, a)).collect();
        if threaded {
            let token = self.take_token(&mut f);
            outs.insert(0, token);
        }
        let names: Vec<&str> = outs.iter().map(|s| s.name.as_str()).collect();
        let _ = writeln!(
            self.out,
            "    \"func.return\"({}) : ({}) -> ()",
            names.join(", "),
            results.join(", ")
        );
        self.out.push_str("  }\n");
        Ok(())
    }
}

/// The SSA value of a jaxpr variable.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// Not bound (yet).
    Unbound,
    /// A value with its name and type.
    Ssa(Ssa),
    /// `%n`, of the variable's own type (what the plain element-wise fast path binds:
    /// no string made).
    Plain(u32),
}

/// Per-function state: the SSA value of each jaxpr variable, and a counter for fresh
/// values.
pub(crate) struct FuncState<'j> {
    pub(crate) jaxpr: &'j Jaxpr,
    values: Vec<Value>,
    /// The tensor type of each of the jaxpr's interned avals, formatted when first
    /// needed (see [`FuncState::aval_type`]).
    types: Vec<Option<Box<str>>>,
    next: u32,
    /// The mesh of the `shard_map` body this function runs in (collectives need it).
    pub(crate) mesh: Option<Arc<Mesh>>,
    /// The token the last ordered host callback of this function returned (the next one
    /// takes it, so that XLA runs them in order).
    pub(crate) token: Option<Ssa>,
}

impl<'j> FuncState<'j> {
    fn new(jaxpr: &'j Jaxpr) -> FuncState<'j> {
        FuncState {
            jaxpr,
            values: vec![Value::Unbound; jaxpr.num_vars()],
            types: vec![None; jaxpr.avals.len()],
            next: 0,
            mesh: None,
            token: None,
        }
    }

    fn bind(&mut self, v: VarId, s: Ssa) {
        self.values[v.index()] = Value::Ssa(s);
    }

    /// Binds `v` to the plain SSA value `%n` of `v`'s own type.
    pub(crate) fn bind_plain(&mut self, v: VarId, n: u32) {
        self.values[v.index()] = Value::Plain(n);
    }

    /// The value bound to `v`, if any.
    pub(crate) fn value(&self, v: VarId) -> &Value {
        self.values.get(v.index()).unwrap_or(&Value::Unbound)
    }

    /// The next fresh SSA number (taking it).
    pub(crate) fn fresh_number(&mut self) -> u32 {
        let n = self.next;
        self.next += 1;
        n
    }

    /// The tensor type of a variable's aval, formatted once per aval.
    pub(crate) fn var_type(&mut self, v: VarId) -> &str {
        let id = self.jaxpr.var_avals[v.index()].index();
        let jaxpr = self.jaxpr;
        self.types[id].get_or_insert_with(|| tensor_type(&jaxpr.avals[id]).into_boxed_str())
    }

    /// A fresh SSA name.
    pub(crate) fn fresh(&mut self) -> String {
        let n = self.next;
        self.next += 1;
        format!("%{n}")
    }

    /// The SSA value of an atom: a variable's, or a constant emitted for a literal.
    pub(crate) fn atom(&mut self, m: &mut Module, a: Atom) -> Ssa {
        match a {
            Atom::Var(v) => match &self.values[v.index()] {
                Value::Ssa(s) => s.clone(),
                Value::Plain(n) => {
                    let name = format!("%{n}");
                    Ssa::new(name, self.var_type(v).to_owned())
                }
                // Unreachable for built jaxprs (every use follows its binding).
                Value::Unbound => Ssa::new(
                    format!("%undefined_{}", v.index()),
                    tensor_type(self.jaxpr.var_aval(v)),
                ),
            },
            Atom::Lit(l) => {
                let lit = *self.jaxpr.literal(l);
                ops::literal_constant(m, self, &lit)
            }
        }
    }
}

impl Module {
    /// The `sdy.mesh` symbol of a mesh (declared once per distinct mesh: `mesh`,
    /// `mesh_1`, ...), checked against the module's partitions.
    pub(crate) fn mesh_symbol(&mut self, mesh: &Mesh, user: &str) -> Result<String, LowerError> {
        if mesh.size() > i64::from(self.num_partitions) {
            return Err(LowerError::TooFewPartitions {
                primitive: user.to_owned(),
                mesh_size: mesh.size(),
                num_partitions: self.num_partitions,
            });
        }
        if let Some((_, s)) = self.meshes.iter().find(|(m, _)| m == mesh) {
            return Ok(s.clone());
        }
        let symbol = match self.meshes.len() {
            0 => "mesh".to_owned(),
            n => format!("mesh_{n}"),
        };
        self.meshes.push((mesh.clone(), symbol.clone()));
        Ok(symbol)
    }

    /// The mesh of an equation's `mesh` param and its symbol.
    pub(crate) fn eqn_mesh<'e>(
        &mut self,
        e: &'e crate::jaxpr::Eqn,
        b: crate::primitive::Builtin,
    ) -> Result<(&'e Mesh, String), LowerError> {
        let Some(crate::params::Param::Mesh(mesh)) = e.params().get("mesh") else {
            return Err(LowerError::BadParam {
                primitive: b.name().to_owned(),
                param: "mesh",
            });
        };
        let symbol = self.mesh_symbol(mesh, b.name())?;
        Ok((mesh, symbol))
    }

    /// The Shardy sharding (`<@mesh, [{"x"}, {}]>`) of a spec on a mesh for a value of
    /// rank `rank`.
    pub(crate) fn sdy_sharding(
        &self,
        symbol: &str,
        mesh: &Mesh,
        spec: &PartitionSpec,
        rank: usize,
        b: crate::primitive::Builtin,
    ) -> Result<String, LowerError> {
        let dims = crate::sharding::sdy_sharding(mesh, spec, rank).map_err(|err| {
            LowerError::BadSharding {
                primitive: b.name().to_owned(),
                reason: err.to_string(),
            }
        })?;
        Ok(format!("<@{symbol}, {dims}>"))
    }
}
