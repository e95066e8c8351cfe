//! `ferrax-ir`: the typed jaxpr IR of ferrax.
//!
//! A [`Jaxpr`] is a typed, first-order program: constant variables, input variables, a
//! list of equations `outs = primitive[params] inputs`, and outputs. Sub-programs of
//! higher-order primitives (`jit`, `cond`, `while`, `scan`, `custom_jvp_call`,
//! `custom_vjp_call`, `remat2`) are [`ClosedJaxpr`] params.
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
pub mod gen;
pub mod jaxpr;
pub mod lower;
pub mod params;
pub mod passes;
pub mod primitive;
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
