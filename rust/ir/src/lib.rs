//! `ferrax-ir`: the typed jaxpr IR of ferrax.
//!
//! A [`Jaxpr`] is a typed, first-order program: constant variables, input variables, a
//! list of equations `outs = primitive[params] inputs`, and outputs. Sub-programs of
//! higher-order primitives (`jit`, `cond`, `while`, `scan`, `custom_jvp_call`,
//! `custom_vjp_call`, `remat2`) are [`ClosedJaxpr`] params.
//!
//! # Guide
//!
//! ## Reading and printing
//! [`text::parse_jaxpr`] reads the text JAX prints (`print(jax.make_jaxpr(f)(x))`),
//! typechecking it; [`text::print_jaxpr`] (or `Display`) writes it back as JAX would.
//! The language is specified in `docs/jaxpr-language.md`.
//! ```
//! use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
//! let text = "{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = mul b 2.0:f32[] in (c,) }";
//! let j = parse_jaxpr(text)?;
//! assert_eq!(print_jaxpr(&j), text);
//! assert_eq!(ferrax_ir::typecheck(&j)?.to_string(), "(f32[3],) -> (f32[3],)");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Building
//! A [`JaxprBuilder`] is the only way to make a [`Jaxpr`]: declare the inputs, apply
//! primitives (each equation's output types come from its primitive's rule, so a
//! mistake is an error where it is made), then build with the outputs.
//! ```
//! use ferrax_ir::{AbstractValue, Builtin, DType, JaxprBuilder, Literal, Param, Params};
//! let mut b = JaxprBuilder::new();
//! let x = b.add_invar(AbstractValue::array(DType::F32, &[8, 3])?);
//! let w = b.add_invar(AbstractValue::array(DType::F32, &[3, 4])?);
//! let dims = Params::new([("dimension_numbers", Param::dot_dims(&[1], &[0], &[], &[]))]);
//! let h = b.apply(Builtin::DotGeneral, [x, w], dims)?;
//! let zero = b.literal(Literal::f32(0.0).weak());
//! let y = b.apply(Builtin::Max, [h.into(), zero], Params::empty())?;
//! let j = b.build(vec![y.into()])?;
//! assert_eq!(j.out_avals(), [AbstractValue::array(DType::F32, &[8, 4])?]);
//! // A rule refuses what JAX refuses, naming the equation:
//! let mut b = JaxprBuilder::new();
//! let x = b.add_invar(AbstractValue::array(DType::F32, &[3])?);
//! let i = b.add_invar(AbstractValue::array(DType::I32, &[3])?);
//! let e = b.apply(Builtin::Add, [x, i], Params::empty()).unwrap_err();
//! assert!(e.to_string().contains("add"), "{e}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Walking
//! Equations are in dependency order; sub-jaxprs (of `jit`, `cond`, `while`, `scan`,
//! ...) are params, reached with [`Eqn::sub_jaxprs`]. Walk nested jaxprs with a stack,
//! not recursion, and a jaxpr of any depth is fine.
//! ```
//! use ferrax_ir::{text::parse_jaxpr, Jaxpr};
//! let j = parse_jaxpr("{ lambda ; a:f32[]. let b:f32[] = jit[name=f jaxpr={ lambda ; c:f32[]. let d:f32[] = sin c; e:f32[] = sin d in (e,) }] a in (b,) }")?;
//! let mut sines = 0;
//! let mut stack: Vec<&Jaxpr> = vec![&j];
//! while let Some(j) = stack.pop() {
//!     for e in j.eqns() {
//!         sines += usize::from(e.primitive().name() == "sin");
//!         stack.extend(e.sub_jaxprs().map(|cj| &**cj.jaxpr()));
//!     }
//! }
//! assert_eq!(sines, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Transforming
//! [`passes`] build new jaxprs from old ones: dead-code elimination, toposort,
//! partial evaluation, transposition (reverse mode's second half), rewriting by rules,
//! and the cost model.
//! ```
//! use ferrax_ir::{passes, text::parse_jaxpr};
//! let j = parse_jaxpr("{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = mul a b; d:f32[3] = sin b in (c, d) }")?;
//! let (pruned, used_inputs) = passes::dce(&j, &[true, false])?;
//! assert_eq!(pruned.eqns().len(), 1);
//! assert_eq!(used_inputs, [true, true]);
//! // `mul a b` is linear in `a`: its transpose maps a cotangent of `c` to one of `a`.
//! let linear = parse_jaxpr("{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = mul a b in (c,) }")?;
//! let t = passes::transpose(&linear, &[true, false])?;
//! assert_eq!(t.to_string(), "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = mul b a in (c,) }");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Partial evaluation
//! [`passes::partial_eval()`] splits a jaxpr for inputs some of which are not known yet:
//! its [`PartialEval`](passes::PartialEval) holds a `known` jaxpr (known inputs to known
//! outputs, then `num_residuals` residuals) to run now and an `unknown` one (residuals,
//! then unknown inputs, to unknown outputs) to run later; `out_unknowns` says which
//! outputs are whose. Running the halves in turn gives what the whole jaxpr gives:
//! ```
//! use ferrax_ir::eval::{eval_jaxpr, HostArray};
//! use ferrax_ir::{passes, text::parse_jaxpr, DType, Shape};
//! // f(x, y) = (sin(x) * y, cos(x)) with x known now and y later.
//! let j = parse_jaxpr(
//!     "{ lambda ; a:f32[2] b:f32[2]. let c:f32[2] = sin a; d:f32[2] = mul c b; \
//!      e:f32[2] = cos a in (d, e) }",
//! )?;
//! let pe: passes::PartialEval = passes::partial_eval(&j, &[false, true], &[false, false])?;
//! assert_eq!(pe.out_unknowns, [true, false]); // d waits for y; e is known now
//! assert_eq!(pe.num_residuals, 1); // sin(x), which the unknown half multiplies by y
//! assert_eq!(pe.unknown.to_string(), "{ lambda ; a:f32[2] b:f32[2]. let c:f32[2] = mul a b in (c,) }");
//!
//! let arr = |v: Vec<f64>| HostArray::from_f64(Shape::new(&[2]).unwrap(), DType::F32, v).unwrap();
//! let (x, y) = (arr(vec![0.5, 1.0]), arr(vec![2.0, 3.0]));
//! let known_out = eval_jaxpr(&pe.known, &[], &[x.clone()])?; // [e, residual]
//! let (known, residuals) = known_out.split_at(known_out.len() - pe.num_residuals);
//! let unknown_args: Vec<HostArray> = residuals.iter().cloned().chain([y.clone()]).collect();
//! let unknown = eval_jaxpr(&pe.unknown, &[], &unknown_args)?; // [d]
//! let whole = eval_jaxpr(&j, &[], &[x, y])?;
//! assert_eq!((&unknown[0], &known[0]), (&whole[0], &whole[1]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Lowering and evaluating
//! [`lower::stablehlo`] emits the StableHLO text XLA compiles (JAX's lowering, as
//! jaxlib's compiler takes it); [`eval`] is a reference evaluator on host arrays.
//! ```
//! use ferrax_ir::eval::{eval_jaxpr, HostArray};
//! use ferrax_ir::{lower::stablehlo::lower_jaxpr, text::parse_jaxpr, DType, Shape};
//! let j = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = mul a a in (b,) }")?;
//! assert!(lower_jaxpr(&j, "square")?.contains("stablehlo.multiply"));
//! let x = HostArray::from_f64(Shape::new(&[3])?, DType::F32, vec![1.0, 2.0, 3.0])?;
//! let out = eval_jaxpr(&j, &[], &[x])?;
//! assert_eq!(out[0].as_f64(), Some(&[1.0, 4.0, 9.0][..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A whole program using only the public API is `examples/rust/ir-tour` in the
//! repository.
//!
//! # Serde
//! With the `serde` feature, the IR's types and equation params implement `Serialize`
//! and `Deserialize`. A [`Jaxpr`] (and a [`ClosedJaxpr`], a sub-jaxpr param) is written
//! as its jaxpr text and read back with [`text::parse_jaxpr`], which typechecks it: the
//! text is the interchange format, and a jaxpr prints the same after a round trip.
//! The text carries constants' types only (their values are host objects, most of them
//! the embedder's), so a closed jaxpr whose constants hold values is refused, and one
//! read back has [`Const::unknown`] constants.
//! A [`DType`] is its NumPy name (`"float32"`, `"key<fry>"`), a [`Shape`] its dimensions
//! (checked when read), an [`AbstractValue`] `{"dtype", "shape", "weak_type"}`, a
//! [`Literal`] `{"dtype", "value", "weak_type"}` with the value as its dtype reads it (a
//! `u64` as its number). [`Params`] are a map from name to [`Param`], and a `Param` is
//! tagged by its variant (`{"Ints": [0, 1]}`, `{"DType": "int32"}`, `"None"`); an
//! [`Opaque`] host object is written as its name and reads back as [`Opaque::named`] (the
//! object itself is not kept). Malformed input is a serde error, never a panic. The
//! encoding of every type is described in the crate's `src/serde_impls.rs`.
//!
//! # Invariants
//! Every [`Jaxpr`] holds these; the builder checks them and every pass relies on them:
//! 1. Every variable id and literal id in it indexes its own arenas (ids are only
//!    meaningful in the jaxpr that made them).
//! 2. Every variable is bound exactly once: as a constvar, an invar, or an equation
//!    output; and it is bound before it is used (equations are in dependency order).
//! 3. Each equation's params fit its primitive's schema, and its output types equal
//!    what the primitive's rule gives for its operand types and params.
//! 4. Literals are scalars whose value fits their dtype (there are no key literals).
//! 5. Sub-jaxprs satisfy all of this themselves; a built jaxpr is never changed (passes
//!    build new ones), so sharing one through an `Arc` is safe.
//!
//! # PRNG keys
//! `key<fry>` ([`DType::KeyFry`], JAX's typed threefry keys) is a dtype apart from the
//! numeric ones ([`DType::ALL`]): keys are made by `random_seed`/`random_wrap`, consumed by
//! `random_bits`/`random_split`/`random_fold_in`/`random_unwrap`, and pass through the
//! structural and control-flow primitives JAX allows on them
//! ([`Builtin::takes_keys`](primitive::Builtin::takes_keys)); every other rule refuses
//! them. The evaluator holds one key per element; the lowering holds a key array as its
//! `u32` data with a trailing dimension of 2, as JAX does.
//!
//! # Named axes
//! Collectives (`psum`, `all_gather`, ...) name mesh axes that an enclosing `shard_map`
//! binds for its body ([`sharding::AxisEnv`]; [`typecheck()`] starts with none in scope).
//! A `shard_map` body keeps JAX 0.10's varying-manual-axes semantics with explicit `pvary`
//! equations ([`passes::insert_pvary`]), not in its types. Partition ids are the mesh's
//! devices numbered row-major over its axes.
//!
//! Nothing in the crate recurses over the depth of nesting or the length of a chain: a
//! jaxpr with a million equations or a hundred thousand nested sub-jaxprs can be checked,
//! printed, parsed, transformed and dropped without overflowing the stack. (Two bounded
//! exceptions: [`passes::insert_pvary`] and the lockstep evaluation of a `shard_map`
//! body recurse into sub-jaxprs, refusing with an error past a fixed depth.)

pub mod aval;
pub mod builder;
pub mod dtype;
pub mod error;
pub mod eval;
#[cfg(feature = "arbitrary")]
pub mod fuzzing;
pub mod fxhash;
pub mod generate;
pub mod jaxpr;
pub mod lower;
pub mod params;
pub mod passes;
pub mod primitive;
#[cfg(feature = "serde")]
mod serde_impls;
pub mod sharding;
pub mod text;
pub mod typecheck;

pub use aval::{AbstractValue, Shape, ShapeError};
pub use builder::JaxprBuilder;
pub use dtype::DType;
pub use error::{Site, TypeError};
pub use jaxpr::{Atom, ClosedJaxpr, Const, Eqn, EqnId, Jaxpr, LitId, LitValue, Literal, VarId};
pub use params::{
    ConvDimensionNumbers, DotDimensionNumbers, GatherDimensionNumbers, GatherScatterMode, Opaque,
    Param, Params, ScatterDimensionNumbers,
};
pub use primitive::{
    Builtin, ExtensionPrimitive, NameError, ParamKind, Primitive, Registry, RuleError,
};
pub use sharding::{
    hlo_sharding, sdy_sharding, tiling, AxisEnv, Mesh, PartitionSpec, ShardingError, Tiling,
};
pub use typecheck::{typecheck, typecheck_in, JaxprType};
