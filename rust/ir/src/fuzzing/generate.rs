//! Well-typed random jaxprs over every built-in primitive and dtype, steered by
//! [`Unstructured`] so that a fuzzer's mutations of its input become mutations of the
//! program.
//!
//! The generator keeps, per jaxpr level, a pool of the values defined so far. For each
//! equation it picks a built-in (any of [`Builtin::ALL`]), then operand types and params
//! that the primitive's rule accepts, and takes operands of those types from the pool
//! (preferring recent values, so chains form) or makes them: a value of another dtype
//! converted, or a literal broadcast to the shape. Higher-order primitives get nested
//! levels (`jit`, `remat2`, `custom_jvp_call`, `custom_vjp_call`, `cond` with 1 to 3
//! branches, `while` with a counter that bounds its trip count, `scan`), and a sub-jaxpr
//! made once may be called again (shared sub-jaxprs). The top level has up to
//! [`GenConfig::max_eqns`] equations, at most twice the input's length; once the input
//! is exhausted every choice takes its first option.
//!
//! An equation the rule rejects is not added (it is counted in
//! [`GenReport::rejected`]: a generator bug, or a disagreement to look at), so every
//! generated jaxpr is well typed by construction and [`JaxprBuilder::build`] checks it.

use crate::aval::{AbstractValue, Shape};
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::generate::{custom_jvp_params, custom_vjp_params, remat_params};
use crate::jaxpr::{Atom, ClosedJaxpr, Jaxpr, LitValue, Literal};
use crate::params::{
    ConvDimensionNumbers, DotDimensionNumbers, GatherDimensionNumbers, GatherScatterMode, Param,
    Params, ScatterDimensionNumbers,
};
use crate::primitive::{Builtin, Window};
use arbitrary::{Result, Unstructured};
use std::sync::Arc;

/// Size limits of generated jaxprs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenConfig {
    /// Most equations of the top-level jaxpr (the count is drawn from the input).
    pub max_eqns: usize,
    /// Most equations of a nested jaxpr.
    pub max_nested_eqns: usize,
    /// Most equations over all levels (nested levels stop growing once reached).
    pub max_total_eqns: usize,
    /// How deep higher-order primitives nest (at most 8).
    pub max_depth: usize,
    /// Most inputs of the top-level jaxpr.
    pub max_inputs: usize,
    /// Most dimensions of a generated type.
    pub max_rank: usize,
    /// Largest dimension of a generated type.
    pub max_dim: i64,
    /// Most elements of any value (equations that would make larger ones are skipped).
    pub max_elements: i64,
    /// Most iterations of a `while` loop and longest `scan`.
    pub max_trip_count: i64,
    /// Whether float literals may be infinite or NaN. Off in [`GenConfig::small`] (NaN
    /// would make the evaluating targets' comparisons of values fail), on in
    /// [`GenConfig::large`].
    pub special_floats: bool,
}

impl GenConfig {
    /// Small programs on small arrays: cheap to evaluate with the reference evaluator.
    pub fn small() -> GenConfig {
        GenConfig {
            max_eqns: 24,
            max_nested_eqns: 8,
            max_total_eqns: 300,
            max_depth: 3,
            max_inputs: 4,
            max_rank: 3,
            max_dim: 4,
            max_elements: 256,
            max_trip_count: 3,
            special_floats: false,
        }
    }

    /// Programs of up to thousands of equations (for the passes that do not evaluate).
    pub fn large() -> GenConfig {
        GenConfig {
            max_eqns: 4000,
            max_nested_eqns: 64,
            max_total_eqns: 20_000,
            max_depth: 4,
            max_inputs: 8,
            max_rank: 4,
            max_dim: 5,
            max_elements: 4096,
            max_trip_count: 4,
            special_floats: true,
        }
    }
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig::small()
    }
}

/// What the generator skipped while making a jaxpr.
#[derive(Clone, Debug, Default)]
pub struct GenReport {
    /// Equations the primitive's rule rejected: `primitive: error` (should stay empty).
    pub rejected: Vec<String>,
}

/// A random well-typed jaxpr drawn from `u` (see the [module docs](self)).
///
/// # Errors
/// Only what [`Unstructured`] reports (never for running out of data).
pub fn arbitrary_jaxpr(u: &mut Unstructured<'_>, config: &GenConfig) -> Result<Jaxpr> {
    arbitrary_jaxpr_with_report(u, config).map(|(j, _)| j)
}

/// [`arbitrary_jaxpr`], with what the generator skipped.
///
/// # Errors
/// Only what [`Unstructured`] reports (never for running out of data).
pub fn arbitrary_jaxpr_with_report(
    u: &mut Unstructured<'_>,
    config: &GenConfig,
) -> Result<(Jaxpr, GenReport)> {
    let mut g = Gen {
        u,
        cfg: config.clone(),
        total: 0,
        shared: Vec::new(),
        report: GenReport::default(),
        mesh: None,
        keys_ok: false,
    };
    g.cfg.max_depth = g.cfg.max_depth.min(8);
    g.cfg.max_rank = g.cfg.max_rank.min(8);
    g.cfg.max_dim = g.cfg.max_dim.clamp(1, 1 << 16);
    g.cfg.max_trip_count = g.cfg.max_trip_count.clamp(0, 1 << 16);
    let ninputs = g.u.int_in_range(0..=g.cfg.max_inputs)?;
    let in_avals = (0..ninputs)
        .map(|_| g.any_type())
        .collect::<Result<Vec<_>>>()?;
    // Longer inputs make larger programs (a fuzzer's short inputs stay fast to check).
    let most = g.cfg.max_eqns.min(8 + 2 * g.u.len());
    let neqns = g.u.int_in_range(0..=most)?;
    let nouts = g.u.int_in_range(1..=3)?;
    let j = g.level(&in_avals, Outs::Any(nouts), neqns, 0)?;
    Ok((j, g.report))
}

/// The types a level must return.
enum Outs<'a> {
    /// This many values of any type.
    Any(usize),
    /// Values of exactly these types.
    Exact(&'a [AbstractValue]),
}

/// A jaxpr being built and the values it has defined.
struct Level {
    b: JaxprBuilder,
    pool: Vec<(Atom, AbstractValue)>,
}

struct Gen<'a, 'b> {
    u: &'a mut Unstructured<'b>,
    cfg: GenConfig,
    total: usize,
    shared: Vec<ClosedJaxpr>,
    report: GenReport,
    /// The mesh of the shard_map whose body is being generated (collectives use it).
    mesh: Option<crate::sharding::Mesh>,
    /// Whether pool values of key type may be picked (for the primitives that take keys).
    keys_ok: bool,
}

fn is_numeric(d: DType) -> bool {
    d != DType::Bool
}

fn closed(j: Jaxpr) -> ClosedJaxpr {
    ClosedJaxpr::with_unknown_consts(Arc::new(j))
}

fn aval(dims: &[i64], dtype: DType) -> AbstractValue {
    AbstractValue::new(Shape::new(dims).unwrap_or_default(), dtype)
}

impl Gen<'_, '_> {
    // ---- random choices -------------------------------------------------------------

    fn ratio(&mut self, num: u8, den: u8) -> Result<bool> {
        self.u.ratio(num, den)
    }

    fn dtype_where(&mut self, ok: impl Fn(DType) -> bool) -> Result<DType> {
        let options: Vec<DType> = DType::ALL.iter().copied().filter(|&d| ok(d)).collect();
        // The commonest dtypes first, so an exhausted input gives f32.
        let preferred = [DType::F32, DType::I32, DType::Bool];
        if let Some(&p) = preferred.iter().find(|p| options.contains(p)) {
            if self.ratio(1, 3)? || self.u.is_empty() {
                return Ok(p);
            }
        }
        Ok(*self.u.choose(&options)?)
    }

    fn dim(&mut self) -> Result<i64> {
        let max = self.cfg.max_dim;
        let d = self.u.int_in_range(0..=4 * max)?;
        Ok(if d == 4 * max { 0 } else { 1 + d % max })
    }

    fn dims(&mut self, rank: usize) -> Result<Vec<i64>> {
        (0..rank).map(|_| self.dim()).collect()
    }

    fn shape(&mut self) -> Result<Vec<i64>> {
        let rank = self.u.int_in_range(0..=self.cfg.max_rank)?;
        self.dims(rank)
    }

    fn any_type(&mut self) -> Result<AbstractValue> {
        let dims = self.shape()?;
        let d = self.dtype_where(|_| true)?;
        Ok(self.fit(aval(&dims, d)))
    }

    /// `t`, with its dimensions shrunk until it has at most `max_elements` elements.
    fn fit(&self, t: AbstractValue) -> AbstractValue {
        let mut dims = t.shape.dims().to_vec();
        while dims.iter().product::<i64>() > self.cfg.max_elements {
            if let Some(m) = dims.iter_mut().max() {
                *m /= 2;
            }
        }
        aval(&dims, t.dtype).with_weak_type(t.weak_type)
    }

    fn type_where(&mut self, ok: impl Fn(DType) -> bool) -> Result<AbstractValue> {
        let dims = self.shape()?;
        let d = self.dtype_where(ok)?;
        Ok(self.fit(aval(&dims, d)))
    }

    /// A subset of `0..n` (sorted).
    fn subset(&mut self, n: usize) -> Result<Vec<i64>> {
        let mut out = Vec::new();
        for i in 0..n {
            if self.ratio(1, 2)? {
                out.push(i as i64);
            }
        }
        Ok(out)
    }

    /// A permutation of `0..n`.
    fn permutation(&mut self, n: usize) -> Result<Vec<i64>> {
        let mut p: Vec<i64> = (0..n as i64).collect();
        for i in (1..n).rev() {
            let j = self.u.int_in_range(0..=i)?;
            p.swap(i, j);
        }
        Ok(p)
    }

    fn literal_value(&mut self, dtype: DType) -> Result<LitValue> {
        Ok(match dtype {
            DType::Bool => LitValue::Bool(self.u.arbitrary()?),
            d if d.is_int() => {
                let v: i64 = match self.u.int_in_range(0..=9)? {
                    0..=6 => self.u.int_in_range(-3..=5)?,
                    7 => 0,
                    _ => match d {
                        DType::I8 => i8::MAX as i64,
                        DType::I16 => i16::MIN as i64,
                        DType::I32 => i32::MIN as i64,
                        DType::U8 => u8::MAX as i64,
                        DType::U16 => u16::MAX as i64,
                        DType::U32 => u32::MAX as i64,
                        DType::U64 => i64::MAX,
                        _ => i64::MIN,
                    },
                };
                // Unsigned dtypes hold no negative literal.
                let v = if matches!(d, DType::U8 | DType::U16 | DType::U32 | DType::U64) {
                    v.max(0)
                } else {
                    v
                };
                LitValue::Int(v)
            }
            _ => {
                // Exact values, values no float dtype holds exactly (a literal keeps the
                // value as written and prints it back so), then the special ones: above
                // f16's range, infinite, NaN.
                const FLOATS: [f64; 16] = [
                    1.0,
                    0.5,
                    -1.5,
                    2.0,
                    0.0,
                    -0.0,
                    3.25,
                    0.125,
                    -7.0,
                    0.375,
                    0.1,
                    -2.7,
                    1e-5,
                    1e5,
                    f64::INFINITY,
                    f64::NAN,
                ];
                let n = if self.cfg.special_floats { 16 } else { 13 };
                LitValue::Float(*self.u.choose(&FLOATS[..n])?)
            }
        })
    }

    // ---- values of a level ----------------------------------------------------------

    fn literal(&mut self, lv: &mut Level, dtype: DType) -> Result<Atom> {
        let value = self.literal_value(dtype)?;
        let weak_type = dtype != DType::Bool && self.ratio(1, 8)?;
        Ok(lv.b.literal(Literal {
            value,
            dtype,
            weak_type,
        }))
    }

    /// A recent pool value satisfying `ok`, if any (keys only where the primitive being
    /// generated takes them).
    fn pick_where(
        &mut self,
        lv: &Level,
        ok: impl Fn(&AbstractValue) -> bool,
    ) -> Result<Option<(Atom, AbstractValue)>> {
        let keys_ok = self.keys_ok;
        self.pick_any_where(lv, |t| (keys_ok || !t.dtype.is_key()) && ok(t))
    }

    /// A recent pool value satisfying `ok`, keys included.
    fn pick_any_where(
        &mut self,
        lv: &Level,
        ok: impl Fn(&AbstractValue) -> bool,
    ) -> Result<Option<(Atom, AbstractValue)>> {
        let candidates: Vec<&(Atom, AbstractValue)> =
            lv.pool.iter().filter(|(_, t)| ok(t)).collect();
        if candidates.is_empty() {
            return Ok(None);
        }
        // Recent values first: an exhausted input chains on the last one.
        let back = if self.ratio(3, 4)? {
            self.u.int_in_range(0..=candidates.len().min(4) - 1)?
        } else {
            self.u.int_in_range(0..=candidates.len() - 1)?
        };
        Ok(Some(candidates[candidates.len() - 1 - back].clone()))
    }

    /// An operand satisfying `ok`: from the pool mostly, else a value of the type `make`
    /// draws.
    fn operand(
        &mut self,
        lv: &mut Level,
        ok: impl Fn(&AbstractValue) -> bool,
        make: impl FnOnce(&mut Self) -> Result<AbstractValue>,
    ) -> Result<(Atom, AbstractValue)> {
        if self.ratio(5, 6)? {
            if let Some(found) = self.pick_where(lv, &ok)? {
                return Ok(found);
            }
        }
        let t = make(self)?;
        let a = self.value_of(lv, &t)?;
        Ok((a, t))
    }

    /// An operand of rank 1 or more: one in scope, or a new value (a scalar type made a
    /// vector of `len`).
    fn ranked_operand(&mut self, lv: &mut Level, len: i64) -> Result<(Atom, AbstractValue)> {
        self.operand(
            lv,
            |t| t.shape.rank() > 0,
            |g| {
                let mut t = g.any_type()?;
                if t.shape.rank() == 0 {
                    t = aval(&[len], t.dtype);
                }
                Ok(t)
            },
        )
    }

    /// A value of type `t` (weak type aside): a pool value of that type, a conversion of
    /// one of that shape, or a literal broadcast to the shape.
    fn value_of(&mut self, lv: &mut Level, t: &AbstractValue) -> Result<Atom> {
        if t.dtype.is_key() {
            return self.key_value(lv, t.shape.dims());
        }
        if self.ratio(3, 4)? {
            if let Some((a, _)) = self.pick_where(lv, |u| u.same_type(t))? {
                return Ok(a);
            }
        }
        if self.ratio(1, 2)? {
            if let Some((a, _)) =
                self.pick_where(lv, |u| u.shape == t.shape && !u.dtype.is_key())?
            {
                let params = Params::new([
                    ("new_dtype", Param::DType(t.dtype)),
                    ("weak_type", Param::Bool(false)),
                    ("sharding", Param::None),
                ]);
                if let Some(v) = self.add(lv, Builtin::ConvertElementType, vec![a], params) {
                    return Ok(v[0]);
                }
            }
        }
        let rank = t.shape.rank();
        if rank > 0 && t.dtype != DType::Bool && self.ratio(1, 6)? {
            let dim = self.u.int_in_range(0..=rank - 1)? as i64;
            let params = Params::new([
                ("dtype", Param::DType(t.dtype)),
                ("shape", Param::ints(t.shape.dims())),
                ("dimension", Param::Int(dim)),
                ("sharding", Param::None),
            ]);
            if let Some(v) = self.add(lv, Builtin::Iota, vec![], params) {
                return Ok(v[0]);
            }
        }
        let lit = self.literal(lv, t.dtype)?;
        if rank == 0 {
            return Ok(lit);
        }
        let params = Params::new([
            ("shape", Param::ints(t.shape.dims())),
            ("broadcast_dimensions", Param::ints(&[])),
            ("sharding", Param::None),
        ]);
        match self.add_limited(lv, Builtin::BroadcastInDim, vec![lit], params, false) {
            Some(v) => Ok(v[0]),
            None => Ok(lit),
        }
    }

    /// Adds an equation if its rule accepts it and its outputs are not too large;
    /// returns its outputs as atoms (and adds them to the pool).
    fn add(
        &mut self,
        lv: &mut Level,
        prim: Builtin,
        inputs: Vec<Atom>,
        params: Params,
    ) -> Option<Vec<Atom>> {
        self.add_limited(lv, prim, inputs, params, true)
    }

    /// [`Gen::add`], with the size limit only if `limited` (a value an equation needs
    /// is made whatever its size).
    fn add_limited(
        &mut self,
        lv: &mut Level,
        prim: Builtin,
        inputs: Vec<Atom>,
        params: Params,
        limited: bool,
    ) -> Option<Vec<Atom>> {
        let in_avals: Option<Vec<AbstractValue>> =
            inputs.iter().map(|&a| lv.b.atom_aval(a)).collect();
        let in_avals = in_avals?;
        match prim.abstract_eval_in(&in_avals, &params, &self.axis_env()) {
            Err(e) => {
                self.report.rejected.push(format!(
                    "{}: {e} (operands {})",
                    prim.name(),
                    in_avals
                        .iter()
                        .map(|a| a.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                return None;
            }
            Ok(outs) if limited && outs.iter().any(|o| o.shape.size() > self.cfg.max_elements) => {
                return None
            }
            Ok(_) => {}
        }
        match lv.b.add_eqn(prim.into(), inputs, params) {
            Ok(outs) => {
                self.total += 1;
                let atoms: Vec<Atom> = outs.iter().map(|&v| Atom::Var(v)).collect();
                for &v in &outs {
                    if let Some(t) = lv.b.var_aval(v) {
                        lv.pool.push((Atom::Var(v), t.clone()));
                    }
                }
                Some(atoms)
            }
            Err(e) => {
                self.report
                    .rejected
                    .push(format!("{}: builder: {e}", prim.name()));
                None
            }
        }
    }

    // ---- levels ---------------------------------------------------------------------

    /// The named axes in scope: the mesh of the shard_map body being generated.
    fn axis_env(&self) -> crate::sharding::AxisEnv {
        match &self.mesh {
            Some(m) => crate::sharding::AxisEnv::closed().with_mesh(m),
            None => crate::sharding::AxisEnv::closed(),
        }
    }

    fn new_level(&self, in_avals: &[AbstractValue]) -> Level {
        let mut b = JaxprBuilder::with_axis_env(self.axis_env());
        let pool = in_avals
            .iter()
            .map(|t| (Atom::Var(b.add_invar(t.clone())), t.clone()))
            .collect();
        Level { b, pool }
    }

    fn fill(&mut self, lv: &mut Level, neqns: usize, depth: usize) -> Result<()> {
        for _ in 0..neqns {
            if self.total >= self.cfg.max_total_eqns && depth > 0 {
                break;
            }
            self.eqn(lv, depth)?;
        }
        Ok(())
    }

    fn finish(&mut self, mut lv: Level, outs: Outs<'_>) -> Result<Jaxpr> {
        let atoms: Vec<Atom> = match outs {
            Outs::Exact(types) => types
                .iter()
                .map(|t| self.value_of(&mut lv, t))
                .collect::<Result<_>>()?,
            Outs::Any(n) => {
                let mut atoms = Vec::with_capacity(n);
                for _ in 0..n {
                    match self.pick_where(&lv, |_| true)? {
                        Some((a, _)) => atoms.push(a),
                        None => {
                            let d = self.dtype_where(|_| true)?;
                            atoms.push(self.literal(&mut lv, d)?);
                        }
                    }
                }
                atoms
            }
        };
        lv.b.build(atoms)
            .map_err(|_| arbitrary::Error::IncorrectFormat)
    }

    fn level(
        &mut self,
        in_avals: &[AbstractValue],
        outs: Outs<'_>,
        neqns: usize,
        depth: usize,
    ) -> Result<Jaxpr> {
        let mut lv = self.new_level(in_avals);
        self.fill(&mut lv, neqns, depth)?;
        self.finish(lv, outs)
    }

    fn nested(
        &mut self,
        in_avals: &[AbstractValue],
        outs: Outs<'_>,
        depth: usize,
    ) -> Result<ClosedJaxpr> {
        let n = self.u.int_in_range(0..=self.cfg.max_nested_eqns)?;
        let j = self.level(in_avals, outs, n, depth + 1)?;
        let cj = closed(j);
        // A jaxpr of a shard_map body may hold collectives: it is not shared elsewhere.
        if self.shared.len() < 64 && self.mesh.is_none() {
            self.shared.push(cj.clone());
        }
        Ok(cj)
    }

    fn can_nest(&self, depth: usize) -> bool {
        depth < self.cfg.max_depth && self.total < self.cfg.max_total_eqns
    }

    /// 0 to `max` operands of any type from the pool.
    fn some_operands(&mut self, lv: &Level, max: usize) -> Result<Vec<(Atom, AbstractValue)>> {
        let n = self.u.int_in_range(0..=max)?;
        let mut out = Vec::new();
        for _ in 0..n {
            if let Some(x) = self.pick_where(lv, |_| true)? {
                out.push(x);
            }
        }
        Ok(out)
    }

    // ---- equations ------------------------------------------------------------------

    fn eqn(&mut self, lv: &mut Level, depth: usize) -> Result<()> {
        // In a shard_map body, a third of the equations are collectives.
        const COLLECTIVES: [Builtin; 9] = [
            Builtin::Psum,
            Builtin::Pmax,
            Builtin::Pmin,
            Builtin::Pvary,
            Builtin::AllGather,
            Builtin::ReduceScatter,
            Builtin::Ppermute,
            Builtin::AllToAll,
            Builtin::AxisIndex,
        ];
        let prim = if self.mesh.is_some() && self.ratio(1, 3)? {
            *self.u.choose(&COLLECTIVES)?
        } else {
            *self.u.choose(Builtin::ALL)?
        };
        // Key values reach only the primitives that take keys (nested levels restore it).
        let saved = std::mem::replace(&mut self.keys_ok, prim.takes_keys());
        let out = self.eqn_of(lv, depth, prim);
        self.keys_ok = saved;
        out
    }

    /// An equation of `prim` (see [`Gen::eqn`]).
    fn eqn_of(&mut self, lv: &mut Level, depth: usize, prim: Builtin) -> Result<()> {
        use Builtin::*;
        let none = Params::empty();
        match prim {
            Exp | Log | Log1p | Expm1 | Sin | Cos | Tan | Tanh | Logistic | Sqrt | Rsqrt => {
                let (x, _) = self.operand(
                    lv,
                    |t| t.dtype.is_float(),
                    |g| g.type_where(DType::is_float),
                )?;
                let params = if self.ratio(1, 4)? {
                    Params::new([("accuracy", Param::None)])
                } else {
                    none
                };
                self.add(lv, prim, vec![x], params);
            }
            // Special functions and the rest of the trigonometric family (issue 12).
            ErfInv | Erf | Erfc | Lgamma | Digamma | Exp2 | Cbrt | Asin | Acos | Atan | Sinh
            | Cosh | Asinh | Acosh | Atanh => {
                let (x, _) = self.operand(
                    lv,
                    |t| t.dtype.is_float(),
                    |g| g.type_where(DType::is_float),
                )?;
                let params = if matches!(prim, Exp2 | Cbrt) && self.ratio(1, 4)? {
                    Params::new([("accuracy", Param::None)])
                } else {
                    none
                };
                self.add(lv, prim, vec![x], params);
            }
            Atan2 => self.binary(lv, prim, DType::is_float)?,
            IsFinite => {
                let (x, _) = self.operand(
                    lv,
                    |t| t.dtype.is_float(),
                    |g| g.type_where(DType::is_float),
                )?;
                self.add(lv, prim, vec![x], none);
            }
            Floor | Ceil => {
                let (x, _) = self.operand(
                    lv,
                    |t| t.dtype.is_float(),
                    |g| g.type_where(DType::is_float),
                )?;
                self.add(lv, prim, vec![x], none);
            }
            Round => {
                let (x, _) = self.operand(
                    lv,
                    |t| t.dtype.is_float(),
                    |g| g.type_where(DType::is_float),
                )?;
                let m = self.u.int_in_range(0..=1)?;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("rounding_method", Param::Int(m))]),
                );
            }
            Abs => {
                let (x, _) = self.operand(
                    lv,
                    |t| t.dtype.is_signed(),
                    |g| g.type_where(DType::is_signed),
                )?;
                self.add(lv, prim, vec![x], none);
            }
            Neg | Sign | Square => {
                let (x, _) =
                    self.operand(lv, |t| is_numeric(t.dtype), |g| g.type_where(is_numeric))?;
                self.add(lv, prim, vec![x], none);
            }
            Copy | StopGradient => {
                let (x, _) = self.operand(lv, |_| true, |g| g.any_type())?;
                self.add(lv, prim, vec![x], none);
            }
            // A debug callback (the evaluator's no-op) on any value: an effect the passes
            // must keep. Pure and IO callbacks are not generated: only the host can
            // compute their results, and the checks evaluate the jaxprs.
            DebugCallback => {
                let (x, _) = self.operand(lv, |_| true, |g| g.any_type())?;
                let effect = if self.ratio(1, 2)? {
                    "Debug"
                } else {
                    "OrderedDebug"
                };
                let params = Params::new([
                    (
                        "callback",
                        Param::Opaque(crate::params::Opaque::named("cb")),
                    ),
                    ("effect", Param::Str(effect.into())),
                    ("partitioned", Param::Bool(false)),
                ]);
                self.add(lv, prim, vec![x], params);
            }
            // A print of one value (the evaluator's no-op, as a debug callback's), with
            // JAX's params as it prints them: an effect the passes must keep.
            DebugPrint => {
                let (x, _) = self.operand(lv, |_| true, |g| g.any_type())?;
                let ordered = self.ratio(1, 2)?;
                let named = |s: &str| Param::Opaque(crate::params::Opaque::named(s));
                let params = Params::new([
                    ("fmt", Param::Str("x={x} (f)".into())),
                    ("has_placeholders", Param::Bool(true)),
                    ("in_tree", named("PyTreeDef(((), {'x': *}))")),
                    ("logging_record", Param::None),
                    (
                        "np_printoptions",
                        named("(('edgeitems', 3), ('precision', 8), ('formatter', None))"),
                    ),
                    ("ordered", Param::Bool(ordered)),
                    ("partitioned", Param::Bool(false)),
                    ("static_args", named("()")),
                ]);
                self.add(lv, prim, vec![x], params);
            }
            PureCallback | IoCallback => {}
            // Collectives only in a shard_map body; shard_maps not nested in one another.
            Psum | Pmax | Pmin | Pvary | AllGather | ReduceScatter | Ppermute | AllToAll
            | AxisIndex => {
                if let Some(mesh) = self.mesh.clone() {
                    self.collective(lv, prim, &mesh)?;
                }
            }
            ShardMap => {
                if self.mesh.is_none() && self.can_nest(depth) {
                    self.shard_map(lv, depth)?;
                }
            }
            ShardingConstraint => {
                // A one-device mesh, so that every target (lowering included) takes it.
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let rank = xt.shape.rank();
                let mut entries = vec![Vec::new(); rank];
                if rank > 0 && self.ratio(1, 2)? {
                    let d = self.u.int_in_range(0..=rank - 1)?;
                    entries[d].push(std::sync::Arc::from("x"));
                }
                let mesh = crate::sharding::Mesh::new([("x", 1)]).unwrap_or_default();
                let params = Params::new([
                    ("mesh", Param::Mesh(std::sync::Arc::new(mesh))),
                    (
                        "spec",
                        Param::Spec(std::sync::Arc::new(crate::sharding::PartitionSpec::new(
                            entries,
                        ))),
                    ),
                ]);
                self.add(lv, prim, vec![x], params);
            }
            Not => {
                let (x, _) = self.operand(
                    lv,
                    |t| !t.dtype.is_float(),
                    |g| g.type_where(|d| !d.is_float()),
                )?;
                self.add(lv, prim, vec![x], none);
            }
            IntegerPow => {
                let (x, xt) =
                    self.operand(lv, |t| is_numeric(t.dtype), |g| g.type_where(is_numeric))?;
                let lo = if xt.dtype.is_float() { -3 } else { 0 };
                let y = self.u.int_in_range(lo..=4)?;
                self.add(lv, prim, vec![x], Params::new([("y", Param::Int(y))]));
            }
            Add | Sub | Mul | Div | Rem => self.binary(lv, prim, is_numeric)?,
            Max | Min | Eq | Ne | Lt | Le | Gt | Ge => self.binary(lv, prim, |_| true)?,
            And | Or | Xor => self.binary(lv, prim, |d| !d.is_float())?,
            ShiftLeft | ShiftRightLogical | ShiftRightArithmetic => {
                self.binary(lv, prim, DType::is_int)?
            }
            Mulhi => self.binary(lv, prim, DType::is_int)?,
            PopulationCount | Clz => {
                let (x, _) =
                    self.operand(lv, |t| t.dtype.is_int(), |g| g.type_where(DType::is_int))?;
                self.add(lv, prim, vec![x], none);
            }
            BitcastConvertType => self.bitcast_convert_type(lv)?,
            Threefry2x32 => self.threefry2x32(lv)?,
            RandomSeed | RandomWrap | RandomUnwrap | RandomBits | RandomSplit | RandomFoldIn
            | RandomClone => self.random(lv, prim)?,
            Pow => {
                let (x, xt) = self.operand(
                    lv,
                    |t| t.dtype.is_float(),
                    |g| g.type_where(DType::is_float),
                )?;
                let ydtype = if self.ratio(1, 2)? {
                    xt.dtype
                } else {
                    self.dtype_where(DType::is_int)?
                };
                let ydims: Vec<i64> = if self.ratio(1, 4)? {
                    vec![]
                } else {
                    xt.shape.dims().to_vec()
                };
                let y = self.value_of(lv, &aval(&ydims, ydtype))?;
                self.add(lv, prim, vec![x, y], none);
            }
            AddAny => {
                let (x, xt) =
                    self.operand(lv, |t| is_numeric(t.dtype), |g| g.type_where(is_numeric))?;
                let y = self.value_of(lv, &xt)?;
                self.add(lv, prim, vec![x, y], none);
            }
            SelectN => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let ncases = self.u.int_in_range(1..=3)?;
                let mut cases = vec![x];
                for _ in 1..ncases {
                    cases.push(self.value_of(lv, &xt)?);
                }
                // A bool predicate takes one or two cases (one: the case, whatever the
                // predicate, as in JAX).
                let pdtype = if ncases <= 2 && self.ratio(1, 2)? {
                    DType::Bool
                } else {
                    self.dtype_where(DType::is_int)?
                };
                let pdims: Vec<i64> = if self.ratio(1, 2)? {
                    vec![]
                } else {
                    xt.shape.dims().to_vec()
                };
                let p = self.value_of(lv, &aval(&pdims, pdtype))?;
                let mut ins = vec![p];
                ins.extend(cases);
                self.add(lv, prim, ins, none);
            }
            Clamp => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let bound = |g: &mut Self, lv: &mut Level| -> Result<Atom> {
                    let dims: Vec<i64> = if g.ratio(1, 2)? {
                        vec![]
                    } else {
                        xt.shape.dims().to_vec()
                    };
                    g.value_of(lv, &aval(&dims, xt.dtype))
                };
                let lo = bound(self, lv)?;
                let hi = bound(self, lv)?;
                self.add(lv, prim, vec![lo, x, hi], none);
            }
            ConvertElementType => {
                let (x, _) = self.operand(lv, |_| true, |g| g.any_type())?;
                let d = self.dtype_where(|_| true)?;
                let weak = d != DType::Bool && self.ratio(1, 8)?;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([
                        ("new_dtype", Param::DType(d)),
                        ("weak_type", Param::Bool(weak)),
                        ("sharding", Param::None),
                    ]),
                );
            }
            ReduceSum | ReduceProd | ReduceMax | ReduceMin => {
                let numeric = matches!(prim, ReduceSum | ReduceProd);
                let (x, xt) = self.operand(
                    lv,
                    |t| !numeric || is_numeric(t.dtype),
                    |g| g.type_where(|d| !numeric || is_numeric(d)),
                )?;
                let axes = self.subset(xt.shape.rank())?;
                let mut params = vec![("axes", Param::ints(&axes))];
                if self.ratio(1, 2)? {
                    params.push(("out_sharding", Param::None));
                }
                self.add(lv, prim, vec![x], Params::new(params));
            }
            // The logical reductions (issue 12): bool or integer operands.
            ReduceAnd | ReduceOr | ReduceXor => {
                let (x, xt) = self.operand(
                    lv,
                    |t| !t.dtype.is_float(),
                    |g| g.type_where(|d| !d.is_float()),
                )?;
                let axes = self.subset(xt.shape.rank())?;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("axes", Param::ints(&axes))]),
                );
            }
            Nextafter => self.binary(lv, prim, DType::is_float)?,
            Igamma | Igammac | IgammaGradA => self.binary(lv, prim, DType::is_float)?,
            ReducePrecision => {
                let (x, _) = self.operand(
                    lv,
                    |t| t.dtype.is_float(),
                    |g| g.type_where(DType::is_float),
                )?;
                let e = self.u.int_in_range(1..=12)?;
                let m = self.u.int_in_range(0..=54)?;
                let params = Params::new([
                    ("exponent_bits", Param::Int(e)),
                    ("mantissa_bits", Param::Int(m)),
                ]);
                self.add(lv, prim, vec![x], params);
            }
            Argmax | Argmin => {
                let ok = |t: &AbstractValue| t.shape.dims().iter().any(|&d| d > 0);
                let (x, xt) = self.operand(lv, ok, |g| {
                    let mut t = g.any_type()?;
                    if !ok(&t) {
                        t = aval(&[2], t.dtype);
                    }
                    Ok(t)
                })?;
                let axes: Vec<usize> = (0..xt.shape.rank())
                    .filter(|&i| xt.shape.dims()[i] > 0)
                    .collect();
                let axis = *self.u.choose(&axes)? as i64;
                let index_dtype = self.dtype_where(DType::is_int)?;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([
                        ("axes", Param::ints(&[axis])),
                        ("index_dtype", Param::DType(index_dtype)),
                    ]),
                );
            }
            BroadcastInDim => {
                let max_rank = self.cfg.max_rank;
                let (x, xt) = self.operand(lv, |t| t.shape.rank() < max_rank, |g| g.any_type())?;
                let r = xt.shape.rank();
                let extra = self.u.int_in_range(0..=max_rank.saturating_sub(r))?;
                let out_rank = r + extra;
                // Where the operand's dimensions go: a sorted choice of r of out_rank.
                let mut positions: Vec<i64> = (0..out_rank as i64).collect();
                while positions.len() > r {
                    let i = self.u.int_in_range(0..=positions.len() - 1)?;
                    positions.remove(i);
                }
                let mut out = self.dims(out_rank)?;
                for (i, &p) in positions.iter().enumerate() {
                    let d = xt.shape.dims()[i];
                    if d != 1 || self.ratio(1, 2)? {
                        out[p as usize] = d;
                    }
                }
                let mut params = vec![
                    ("shape", Param::ints(&out)),
                    ("broadcast_dimensions", Param::ints(&positions)),
                ];
                if self.ratio(1, 2)? {
                    params.push(("sharding", Param::None));
                }
                self.add(lv, prim, vec![x], Params::new(params));
            }
            Reshape => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let dims = xt.shape.dims().to_vec();
                let n: i64 = dims.iter().product();
                let new: Vec<i64> = match self.u.int_in_range(0..=4)? {
                    0 => vec![n],
                    1 => dims.iter().rev().copied().collect(),
                    2 => {
                        let mut d = dims.clone();
                        let at = self.u.int_in_range(0..=d.len())?;
                        d.insert(at, 1);
                        d
                    }
                    3 => dims.iter().copied().filter(|&d| d != 1).collect(),
                    _ if dims.len() >= 2 => {
                        let at = self.u.int_in_range(0..=dims.len() - 2)?;
                        let mut d = dims.clone();
                        let merged = d[at] * d[at + 1];
                        d.splice(at..at + 2, [merged]);
                        d
                    }
                    _ if n % 2 == 0 && n > 0 => vec![2, n / 2],
                    _ => vec![n, 1],
                };
                let mut params = vec![
                    ("new_sizes", Param::ints(&new)),
                    ("dimensions", Param::None),
                ];
                if self.ratio(1, 2)? {
                    params.push(("sharding", Param::None));
                }
                self.add(lv, prim, vec![x], Params::new(params));
            }
            Transpose => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let perm = self.permutation(xt.shape.rank())?;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("permutation", Param::ints(&perm))]),
                );
            }
            Squeeze => {
                let ok = |t: &AbstractValue| t.shape.dims().contains(&1);
                let (x, xt) = self.operand(lv, ok, |g| {
                    let t = g.any_type()?;
                    let mut dims = t.shape.dims().to_vec();
                    let at = g.u.int_in_range(0..=dims.len())?;
                    dims.insert(at, 1);
                    Ok(g.fit(aval(&dims, t.dtype)))
                })?;
                let ones: Vec<i64> = (0..xt.shape.rank())
                    .filter(|&i| xt.shape.dims()[i] == 1)
                    .map(|i| i as i64)
                    .collect();
                let mut dims = Vec::new();
                for &o in &ones {
                    if dims.is_empty() || self.ratio(1, 2)? {
                        dims.push(o);
                    }
                }
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("dimensions", Param::ints(&dims))]),
                );
            }
            ExpandDims => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let k = self.u.int_in_range(1..=2)?;
                let out_rank = xt.shape.rank() + k;
                let mut positions: Vec<i64> = (0..out_rank as i64).collect();
                while positions.len() > k {
                    let i = self.u.int_in_range(0..=positions.len() - 1)?;
                    positions.remove(i);
                }
                if self.ratio(1, 4)? {
                    positions.reverse();
                }
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("dimensions", Param::ints(&positions))]),
                );
            }
            Concatenate => {
                let (x, xt) = self.ranked_operand(lv, 2)?;
                let d = self.u.int_in_range(0..=xt.shape.rank() - 1)?;
                let n = self.u.int_in_range(1..=3)?;
                let mut ins = vec![x];
                for _ in 1..n {
                    let mut dims = xt.shape.dims().to_vec();
                    dims[d] = self.dim()?;
                    ins.push(self.value_of(lv, &aval(&dims, xt.dtype))?);
                }
                self.add(
                    lv,
                    prim,
                    ins,
                    Params::new([("dimension", Param::Int(d as i64))]),
                );
            }
            Stack => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let d = self.u.int_in_range(0..=xt.shape.rank())?;
                let n = self.u.int_in_range(1..=3)?;
                let mut ins = vec![x];
                for _ in 1..n {
                    ins.push(self.value_of(lv, &xt)?);
                }
                self.add(lv, prim, ins, Params::new([("axis", Param::Int(d as i64))]));
            }
            Unstack => {
                let (x, xt) = self.ranked_operand(lv, 3)?;
                let d = self.u.int_in_range(0..=xt.shape.rank() - 1)?;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("axis", Param::Int(d as i64))]),
                );
            }
            Tile => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let mut reps = Vec::with_capacity(xt.shape.rank());
                for _ in 0..xt.shape.rank() {
                    reps.push(self.u.int_in_range(0..=3)?);
                }
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("reps", Param::ints(&reps))]),
                );
            }
            OptimizationBarrier => {
                let n = self.u.int_in_range(0..=3)?;
                let mut ins = Vec::with_capacity(n);
                for _ in 0..n {
                    ins.push(self.operand(lv, |_| true, |g| g.any_type())?.0);
                }
                self.add(lv, prim, ins, none);
            }
            Split => {
                let (x, xt) = self.ranked_operand(lv, 3)?;
                let d = self.u.int_in_range(0..=xt.shape.rank() - 1)?;
                let mut left = xt.shape.dims()[d];
                let mut sizes = Vec::new();
                while left > 0 && sizes.len() < 3 {
                    let s = self.u.int_in_range(0..=left)?;
                    sizes.push(s);
                    left -= s;
                }
                sizes.push(left);
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([
                        ("sizes", Param::ints(&sizes)),
                        ("axis", Param::Int(d as i64)),
                    ]),
                );
            }
            Slice => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let (mut start, mut limit, mut strides) = (vec![], vec![], vec![]);
                for &n in xt.shape.dims() {
                    let s = self.u.int_in_range(0..=n)?;
                    let l = self.u.int_in_range(s..=n)?;
                    start.push(s);
                    limit.push(if self.ratio(1, 2)? { n } else { l });
                    strides.push(self.u.int_in_range(1..=3)?);
                }
                let strides = if self.ratio(1, 2)? {
                    Param::None
                } else {
                    Param::ints(&strides)
                };
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([
                        ("start_indices", Param::ints(&start)),
                        ("limit_indices", Param::ints(&limit)),
                        ("strides", strides),
                    ]),
                );
            }
            DynamicSlice | DynamicUpdateSlice => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let mut sizes = Vec::new();
                for &n in xt.shape.dims() {
                    sizes.push(self.u.int_in_range(0..=n)?);
                }
                let idx_dtype = self.dtype_where(DType::is_int)?;
                let mut ins = vec![x];
                let params = if prim == DynamicSlice {
                    Params::new([("slice_sizes", Param::ints(&sizes))])
                } else {
                    ins.push(self.value_of(lv, &aval(&sizes, xt.dtype))?);
                    Params::empty()
                };
                for _ in 0..xt.shape.rank() {
                    ins.push(self.value_of(lv, &AbstractValue::scalar(idx_dtype))?);
                }
                self.add(lv, prim, ins, params);
            }
            DotGeneral => self.dot_general(lv)?,
            ConvGeneralDilated => self.conv_general_dilated(lv)?,
            Iota => {
                let t = self.type_where(is_numeric)?;
                let mut dims = t.shape.dims().to_vec();
                if dims.is_empty() {
                    dims.push(self.dim()?);
                }
                let dim = self.u.int_in_range(0..=dims.len() - 1)? as i64;
                self.add(
                    lv,
                    prim,
                    vec![],
                    Params::new([
                        ("dtype", Param::DType(t.dtype)),
                        ("shape", Param::ints(&dims)),
                        ("dimension", Param::Int(dim)),
                        ("sharding", Param::None),
                    ]),
                );
            }
            Gather | Scatter | ScatterAdd | ScatterSub | ScatterMul | ScatterMin | ScatterMax => {
                self.gather_scatter(lv, prim)?
            }
            Sort => {
                let ranked = |t: &AbstractValue| t.shape.rank() > 0;
                let (x, xt) = self.operand(lv, ranked, |g| {
                    let t = g.any_type()?;
                    Ok(if t.shape.rank() > 0 {
                        t
                    } else {
                        aval(&[3], t.dtype)
                    })
                })?;
                let mut ins = vec![x];
                if self.ratio(1, 2)? {
                    let other = aval(xt.shape.dims(), self.dtype_where(|_| true)?);
                    ins.push(self.value_of(lv, &other)?);
                }
                let dim = self.u.int_in_range(0..=xt.shape.rank() as i64 - 1)?;
                let keys = self.u.int_in_range(1..=ins.len() as i64)?;
                let stable = self.ratio(1, 2)?;
                self.add(
                    lv,
                    prim,
                    ins,
                    Params::new([
                        ("dimension", Param::Int(dim)),
                        ("is_stable", Param::Bool(stable)),
                        ("num_keys", Param::Int(keys)),
                    ]),
                );
            }
            TopK => {
                let ranked = |t: &AbstractValue| t.shape.rank() > 0;
                let (x, xt) = self.operand(lv, ranked, |g| {
                    let t = g.any_type()?;
                    Ok(if t.shape.rank() > 0 {
                        t
                    } else {
                        aval(&[3], t.dtype)
                    })
                })?;
                let axis = self.u.int_in_range(0..=xt.shape.rank() as i64 - 1)?;
                let n = xt.shape.dims()[axis as usize];
                let k = self.u.int_in_range(0..=n)?;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("axis", Param::Int(axis)), ("k", Param::Int(k))]),
                );
            }
            Cholesky | TriangularSolve | Lu | Eigh | Qr | Svd | Geqrf | HouseholderProduct
            | Geqp3 => {
                // A float matrix (square but for lu's, qr's, svd's and geqrf's; at least as
                // tall as wide for householder_product's), batched or not, kept small.
                let square = !matches!(prim, Lu | Qr | Svd | Geqrf | HouseholderProduct | Geqp3);
                let tall = prim == HouseholderProduct;
                let ok = move |t: &AbstractValue| {
                    let d = t.shape.dims();
                    let r = d.len();
                    t.dtype.is_float()
                        && r >= 2
                        && (!square || d[r - 2] == d[r - 1])
                        && (!tall || d[r - 2] >= d[r - 1])
                };
                let (a, at) = self.operand(lv, ok, |g| {
                    let d = g.dtype_where(|d| d.is_float())?;
                    let mut dims = Vec::new();
                    if g.ratio(1, 3)? {
                        dims.push(g.u.int_in_range(0..=2)?);
                    }
                    let m = g.u.int_in_range(0..=3)?;
                    let n = if square {
                        m
                    } else if tall {
                        g.u.int_in_range(0..=m)?
                    } else {
                        g.u.int_in_range(0..=3)?
                    };
                    dims.extend([m, n]);
                    Ok(aval(&dims, d))
                })?;
                let mut ins = vec![a];
                let mut params = Params::empty();
                if prim == TriangularSolve {
                    let r = at.shape.rank();
                    let n = at.shape.dims()[r - 1];
                    let left_side = self.ratio(1, 2)?;
                    let k = self.u.int_in_range(0..=3)?;
                    let mut dims = at.shape.dims()[..r - 2].to_vec();
                    dims.extend(if left_side { [n, k] } else { [k, n] });
                    ins.push(self.value_of(lv, &aval(&dims, at.dtype))?);
                    let mut flags = vec![("left_side", Param::Bool(left_side))];
                    for name in ["lower", "transpose_a", "conjugate_a", "unit_diagonal"] {
                        flags.push((name, Param::Bool(self.ratio(1, 2)?)));
                    }
                    params = Params::new(flags);
                }
                if prim == Geqp3 {
                    // The pivots: zeros (free columns) or any marks (fixed ones).
                    let r = at.shape.rank();
                    let mut dims = at.shape.dims()[..r - 1].to_vec();
                    dims.pop();
                    dims.push(at.shape.dims()[r - 1]);
                    ins.push(self.value_of(lv, &aval(&dims, DType::I32))?);
                    params = Params::new([("use_magma", Param::None)]);
                }
                if prim == HouseholderProduct {
                    // The scales of at most n reflections.
                    let r = at.shape.rank();
                    let n = at.shape.dims()[r - 1];
                    let mut dims = at.shape.dims()[..r - 2].to_vec();
                    dims.push(self.u.int_in_range(0..=n)?);
                    ins.push(self.value_of(lv, &aval(&dims, at.dtype))?);
                }
                if prim == Svd {
                    params = Params::new([
                        ("full_matrices", Param::Bool(self.ratio(1, 2)?)),
                        ("compute_uv", Param::Bool(self.ratio(1, 2)?)),
                        ("subset_by_index", Param::None),
                        ("algorithm", Param::None),
                    ]);
                }
                if prim == Qr {
                    params = Params::new([
                        ("full_matrices", Param::Bool(self.ratio(1, 2)?)),
                        ("pivoting", Param::Bool(self.ratio(1, 2)?)),
                        ("use_magma", Param::None),
                    ]);
                }
                if prim == Eigh {
                    params = Params::new([
                        ("lower", Param::Bool(self.ratio(1, 2)?)),
                        ("sort_eigenvalues", Param::Bool(true)),
                        ("subset_by_index", Param::None),
                        ("algorithm", Param::None),
                    ]);
                }
                self.add(lv, prim, ins, params);
            }
            Cumsum | Cumprod | Cummax | Cummin | Cumlogsumexp => {
                let float = prim == Cumlogsumexp;
                let ok = move |t: &AbstractValue| {
                    t.shape.rank() > 0
                        && if float {
                            t.dtype.is_float()
                        } else {
                            t.dtype != DType::Bool
                        }
                };
                let (x, xt) = self.operand(lv, ok, |g| {
                    let d = g.dtype_where(|d| {
                        if float {
                            d.is_float()
                        } else {
                            d != DType::Bool
                        }
                    })?;
                    Ok(aval(&[3, 2], d))
                })?;
                let axis = self.u.int_in_range(0..=xt.shape.rank() as i64 - 1)?;
                let reverse = self.ratio(1, 2)?;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([
                        ("axis", Param::Int(axis)),
                        ("reverse", Param::Bool(reverse)),
                    ]),
                );
            }
            ReduceWindowSum | ReduceWindowMax | ReduceWindowMin | ReduceWindow
            | SelectAndGatherAdd | SelectAndScatterAdd => self.windowed(lv, prim)?,
            Rev => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let dims = self.subset(xt.shape.rank())?;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("dimensions", Param::ints(&dims))]),
                );
            }
            Pad => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let v = self.value_of(lv, &AbstractValue::scalar(xt.dtype))?;
                let mut config = Vec::new();
                for &d in xt.shape.dims() {
                    let lo = self.u.int_in_range(-2..=2)?;
                    let hi = self.u.int_in_range(-2..=2)?;
                    let interior = self.u.int_in_range(0..=2)?;
                    let out = lo + hi + d + (d - 1).max(0) * interior;
                    config.push(if out >= 0 {
                        (lo, hi, interior)
                    } else {
                        (0, 0, 0)
                    });
                }
                self.add(
                    lv,
                    prim,
                    vec![x, v],
                    Params::new([("padding_config", Param::Padding(config.into()))]),
                );
            }
            Jit | Remat | CustomJvpCall | CustomVjpCall => {
                if self.can_nest(depth) {
                    self.call(lv, prim, depth)?;
                }
            }
            Cond => {
                if self.can_nest(depth) {
                    self.cond(lv, depth)?;
                }
            }
            While => {
                if self.can_nest(depth) {
                    self.while_loop(lv, depth)?;
                }
            }
            Scan => {
                if self.can_nest(depth) {
                    self.scan(lv, depth)?;
                }
            }
        }
        Ok(())
    }

    /// Some axes of the mesh (at least one), in a random order.
    fn some_axes(&mut self, mesh: &crate::sharding::Mesh) -> Result<Vec<Arc<str>>> {
        let mut names: Vec<Arc<str>> = Vec::new();
        for (n, _) in mesh.axes() {
            if self.ratio(1, 2)? {
                names.push(n.clone());
            }
        }
        if names.is_empty() {
            let k = self
                .u
                .int_in_range(0..=mesh.axes().len().saturating_sub(1))?;
            if let Some((n, _)) = mesh.axes().get(k) {
                names.push(n.clone());
            }
        }
        if names.len() > 1 && self.ratio(1, 2)? {
            names.reverse();
        }
        Ok(names)
    }

    /// A collective over axes of the body's mesh.
    fn collective(
        &mut self,
        lv: &mut Level,
        prim: Builtin,
        mesh: &crate::sharding::Mesh,
    ) -> Result<()> {
        use Builtin::*;
        let axes = self.some_axes(mesh)?;
        let n: i64 = axes
            .iter()
            .map(|a| mesh.axis_size(a).unwrap_or(1))
            .product();
        let names = Param::Names(axes.clone().into());
        match prim {
            AxisIndex => {
                self.add(lv, prim, vec![], Params::new([("axis_name", names)]));
            }
            Psum | Pmax | Pmin | Pvary => {
                let (x, _) = if prim == Pvary {
                    self.operand(lv, |_| true, |g| g.any_type())?
                } else {
                    self.operand(lv, |t| is_numeric(t.dtype), |g| g.type_where(is_numeric))?
                };
                self.add(lv, prim, vec![x], Params::new([("axes", names)]));
            }
            Ppermute => {
                let (x, _) = self.operand(lv, |_| true, |g| g.any_type())?;
                let shift = self.u.int_in_range(0..=n.max(1) - 1)?;
                let perm: Vec<(i64, i64)> = (0..n)
                    .filter(|_| self.u.ratio(3, 4).unwrap_or(true))
                    .map(|i| (i, (i + shift) % n))
                    .collect();
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([("axis_name", names), ("perm", Param::Pairs(perm.into()))]),
                );
            }
            AllGather => {
                let (x, xt) = self.operand(lv, |_| true, |g| g.any_type())?;
                let tiled = xt.shape.rank() > 0 && self.ratio(1, 2)?;
                let top = if tiled {
                    xt.shape.rank() - 1
                } else {
                    xt.shape.rank()
                };
                let d = self.u.int_in_range(0..=top)? as i64;
                self.add(
                    lv,
                    prim,
                    vec![x],
                    Params::new([
                        ("all_gather_dimension", Param::Int(d)),
                        ("axis_name", names),
                        ("axis_size", Param::Int(n)),
                        ("tiled", Param::Bool(tiled)),
                    ]),
                );
            }
            ReduceScatter | AllToAll => {
                let ok = move |t: &AbstractValue| {
                    is_numeric(t.dtype) && t.shape.dims().iter().any(|&d| d % n == 0)
                };
                let Some((x, xt)) = self.pick_where(lv, ok)? else {
                    return Ok(());
                };
                let dims: Vec<usize> = (0..xt.shape.rank())
                    .filter(|&k| xt.shape.dims()[k] % n == 0)
                    .collect();
                let d = dims[self.u.int_in_range(0..=dims.len() - 1)?] as i64;
                if prim == ReduceScatter {
                    let tiled = !(xt.shape.dims()[d as usize] == n && self.ratio(1, 2)?);
                    self.add(
                        lv,
                        prim,
                        vec![x],
                        Params::new([
                            ("scatter_dimension", Param::Int(d)),
                            ("axis_name", names),
                            ("axis_size", Param::Int(n)),
                            ("tiled", Param::Bool(tiled)),
                        ]),
                    );
                } else {
                    let c = self.u.int_in_range(0..=xt.shape.rank() - 1)? as i64;
                    self.add(
                        lv,
                        prim,
                        vec![x],
                        Params::new([
                            ("axis_name", names),
                            ("split_axis", Param::Int(d)),
                            ("concat_axis", Param::Int(c)),
                            ("tiled", Param::Bool(true)),
                        ]),
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A shard_map over a small mesh (axes of size 1 or 2) on operands of the pool,
    /// each split by a random spec; its body (collectives included) gets its pvary
    /// equations from [`crate::passes::insert_pvary`], and each output's out_spec puts
    /// the axes it varies over on its first dimension.
    fn shard_map(&mut self, lv: &mut Level, depth: usize) -> Result<()> {
        let mut axes = vec![("x", 1 + self.u.int_in_range(0..=1)? as i64)];
        if self.ratio(1, 2)? {
            axes.push(("y", 1 + self.u.int_in_range(0..=1)? as i64));
        }
        let Ok(mesh) = crate::sharding::Mesh::new(axes) else {
            return Ok(());
        };
        let nin = self.u.int_in_range(1..=2)?;
        let mut ins = Vec::new();
        let mut specs = Vec::new();
        let mut locals = Vec::new();
        let mut in_axes = Vec::new();
        for _ in 0..nin {
            let Some((a, t)) = self.pick_where(lv, |_| true)? else {
                break;
            };
            let rank = t.shape.rank();
            let mut dims = t.shape.dims().to_vec();
            let mut entries: Vec<Vec<Arc<str>>> = vec![Vec::new(); rank];
            let mut used = Vec::new();
            for (name, size) in mesh.axes() {
                if rank > 0 && self.ratio(1, 2)? {
                    let d = self.u.int_in_range(0..=rank - 1)?;
                    if dims[d] % size == 0 {
                        dims[d] /= size;
                        entries[d].push(name.clone());
                        used.push(name.clone());
                    }
                }
            }
            ins.push(a);
            specs.push(crate::sharding::PartitionSpec::new(entries));
            locals.push(aval(&dims, t.dtype).with_weak_type(t.weak_type));
            in_axes.push(used);
        }
        if ins.is_empty() {
            return Ok(());
        }
        let nout = self.u.int_in_range(1..=2)?;
        let n = self.u.int_in_range(0..=self.cfg.max_nested_eqns)?;
        let saved = self.mesh.replace(mesh.clone());
        let body = self.level(&locals, Outs::Any(nout), n, depth + 1);
        self.mesh = saved;
        let body = body?;
        let Ok((body, out_axes)) = crate::passes::insert_pvary(&body, &mesh, &in_axes, None) else {
            return Ok(());
        };
        let mut out_specs = Vec::new();
        for (t, axes) in body.out_avals().iter().zip(out_axes) {
            if axes.is_empty() {
                out_specs.push(crate::sharding::PartitionSpec::replicated());
            } else if t.shape.rank() > 0 {
                out_specs.push(crate::sharding::PartitionSpec::new(vec![axes]));
            } else {
                return Ok(());
            }
        }
        let params = Params::new([
            ("jaxpr", Param::Jaxpr(closed(body))),
            ("mesh", Param::Mesh(Arc::new(mesh))),
            ("in_specs", Param::Specs(specs.into())),
            ("out_specs", Param::Specs(out_specs.into())),
            ("check_vma", Param::Bool(true)),
        ]);
        self.add(lv, Builtin::ShardMap, ins, params);
        Ok(())
    }

    /// A binary element-wise equation on operands whose dtype satisfies `ok`: equal
    /// types, a scalar partner, or a partner with size-1 dimensions.
    fn binary(&mut self, lv: &mut Level, prim: Builtin, ok: fn(DType) -> bool) -> Result<()> {
        let (x, xt) = self.operand(lv, |t| ok(t.dtype), |g| g.type_where(ok))?;
        let ydims: Vec<i64> = match self.u.int_in_range(0..=5)? {
            0 => vec![],
            1 => xt
                .shape
                .dims()
                .iter()
                .map(|&d| {
                    if d > 0 && self.u.ratio(1, 2).unwrap_or(false) {
                        1
                    } else {
                        d
                    }
                })
                .collect(),
            _ => xt.shape.dims().to_vec(),
        };
        let y = self.value_of(lv, &aval(&ydims, xt.dtype))?;
        let ins = if self.ratio(1, 2)? {
            vec![x, y]
        } else {
            vec![y, x]
        };
        self.add(lv, prim, ins, Params::empty());
        Ok(())
    }

    /// `bitcast_convert_type` to a dtype of any width but `bool`'s: a narrower one adds a
    /// trailing dimension; a wider one takes an operand whose last dimension is the ratio.
    fn bitcast_convert_type(&mut self, lv: &mut Level) -> Result<()> {
        let not_bool = |d: DType| d != DType::Bool;
        let new = self.dtype_where(not_bool)?;
        let (x, _) = self.operand(
            lv,
            |t| {
                let (old, new) = (t.dtype.size_bytes(), new.size_bytes());
                t.dtype != DType::Bool
                    && (old >= new || t.shape.dims().last() == Some(&((new / old) as i64)))
            },
            |g| {
                let d = g.dtype_where(not_bool)?;
                let dims = g.shape()?;
                let mut dims = g.fit(aval(&dims, d)).shape.dims().to_vec();
                if d.size_bytes() < new.size_bytes() {
                    dims.push((new.size_bytes() / d.size_bytes()) as i64);
                }
                Ok(aval(&dims, d))
            },
        )?;
        self.add(
            lv,
            Builtin::BitcastConvertType,
            vec![x],
            Params::new([("new_dtype", Param::DType(new))]),
        );
        Ok(())
    }

    /// Keys of shape `dims`: a pool value of that type, or keys made by `random_seed` of
    /// integer seeds or `random_wrap` of `u32` data.
    fn key_value(&mut self, lv: &mut Level, dims: &[i64]) -> Result<Atom> {
        let t = aval(dims, DType::KeyFry);
        if self.ratio(3, 4)? {
            if let Some((a, _)) = self.pick_any_where(lv, |u| u.same_type(&t))? {
                return Ok(a);
            }
        }
        let fry = Params::new([("impl", Param::Str("fry".into()))]);
        let made = if self.ratio(1, 2)? {
            let mut data = dims.to_vec();
            data.push(2);
            let x = self.value_of(lv, &aval(&data, DType::U32))?;
            self.add_limited(lv, Builtin::RandomWrap, vec![x], fry, false)
        } else {
            let d = self.dtype_where(DType::is_int)?;
            let x = self.value_of(lv, &aval(dims, d))?;
            self.add_limited(lv, Builtin::RandomSeed, vec![x], fry, false)
        };
        made.map(|v| v[0]).ok_or(arbitrary::Error::IncorrectFormat)
    }

    /// A key operand: a pool key mostly, else new keys of a drawn shape.
    fn key_operand(&mut self, lv: &mut Level) -> Result<(Atom, AbstractValue)> {
        if self.ratio(3, 4)? {
            if let Some(found) = self.pick_any_where(lv, |t| t.dtype.is_key())? {
                return Ok(found);
            }
        }
        let drawn = self.shape()?;
        let dims = self.fit(aval(&drawn, DType::KeyFry)).shape;
        let a = self.key_value(lv, dims.dims())?;
        Ok((a, aval(dims.dims(), DType::KeyFry)))
    }

    /// The typed-key primitives: seeds and data made into keys, keys consumed.
    fn random(&mut self, lv: &mut Level, prim: Builtin) -> Result<()> {
        use Builtin::*;
        match prim {
            RandomSeed | RandomWrap => {
                let dims = self.shape()?;
                let dims = self.fit(aval(&dims, DType::KeyFry)).shape;
                self.key_value(lv, dims.dims())?;
            }
            RandomUnwrap | RandomClone => {
                let (k, _) = self.key_operand(lv)?;
                self.add(lv, prim, vec![k], Params::empty());
            }
            RandomBits | RandomSplit => {
                let (k, _) = self.key_operand(lv)?;
                let rank = self.u.int_in_range(0..=2)?;
                let dims = self.dims(rank)?;
                let mut params = vec![("shape", Param::ints(&dims))];
                if prim == RandomBits {
                    let w = *self.u.choose(&[8i64, 16, 32, 64])?;
                    params.push(("bit_width", Param::Int(w)));
                }
                self.add(lv, prim, vec![k], Params::new(params));
            }
            RandomFoldIn => {
                let (k, kt) = self.key_operand(lv)?;
                let dims: Vec<i64> = if self.ratio(1, 2)? {
                    vec![]
                } else {
                    kt.shape.dims().to_vec()
                };
                let d = self.dtype_where(DType::is_int)?;
                let m = self.value_of(lv, &aval(&dims, d))?;
                self.add(lv, prim, vec![k, m], Params::empty());
            }
            _ => {}
        }
        Ok(())
    }

    /// `threefry2x32` of `u32` counts, with keys of the counts' shape or scalars.
    fn threefry2x32(&mut self, lv: &mut Level) -> Result<()> {
        let u32s = |d: DType| d == DType::U32;
        let (x0, xt) = self.operand(lv, |t| u32s(t.dtype), |g| g.type_where(u32s))?;
        let mut ins = Vec::with_capacity(4);
        for _ in 0..3 {
            let dims: Vec<i64> = if self.ratio(1, 2)? {
                vec![]
            } else {
                xt.shape.dims().to_vec()
            };
            ins.push(self.value_of(lv, &aval(&dims, DType::U32))?);
        }
        ins.insert(2, x0);
        self.add(lv, Builtin::Threefry2x32, ins, Params::empty());
        Ok(())
    }

    fn dot_general(&mut self, lv: &mut Level) -> Result<()> {
        let nb = self.u.int_in_range(0..=1)?;
        let nc = self.u.int_in_range(0..=2)?;
        let nlf = self.u.int_in_range(0..=1)?;
        let nrf = self.u.int_in_range(0..=1)?;
        let batch = self.dims(nb)?;
        let contract = self.dims(nc)?;
        let lfree = self.dims(nlf)?;
        let rfree = self.dims(nrf)?;
        // Axis roles: 0 batch, 1 contracting, 2 free; laid out in a random order.
        let side = |g: &mut Self, free: &[i64]| -> Result<(Vec<i64>, Vec<i64>, Vec<i64>)> {
            let mut axes: Vec<(u8, usize)> = (0..nb)
                .map(|i| (0, i))
                .chain((0..nc).map(|i| (1, i)))
                .chain((0..free.len()).map(|i| (2, i)))
                .collect();
            let perm = g.permutation(axes.len())?;
            axes = perm.iter().map(|&p| axes[p as usize]).collect();
            let dims: Vec<i64> = axes
                .iter()
                .map(|&(role, i)| match role {
                    0 => batch[i],
                    1 => contract[i],
                    _ => free[i],
                })
                .collect();
            let pos = |role: u8| -> Vec<i64> {
                let mut v: Vec<(usize, i64)> = axes
                    .iter()
                    .enumerate()
                    .filter(|(_, &(r, _))| r == role)
                    .map(|(p, &(_, i))| (i, p as i64))
                    .collect();
                v.sort();
                v.into_iter().map(|(_, p)| p).collect()
            };
            Ok((dims, pos(0), pos(1)))
        };
        let (ldims, lb, lc) = side(self, &lfree)?;
        let (rdims, rb, rc) = side(self, &rfree)?;
        let ldtype = self.dtype_where(is_numeric)?;
        let rdtype = if self.ratio(3, 4)? {
            ldtype
        } else {
            self.dtype_where(is_numeric)?
        };
        let l = self.value_of(lv, &aval(&ldims, ldtype))?;
        let r = self.value_of(lv, &aval(&rdims, rdtype))?;
        let dn = DotDimensionNumbers {
            lhs_contracting: lc,
            rhs_contracting: rc,
            lhs_batch: lb,
            rhs_batch: rb,
        };
        let preferred = if self.ratio(1, 2)? {
            Param::None
        } else {
            // The operands' common dtype, as JAX records it.
            let la = aval(&[], ldtype);
            let ra = aval(&[], rdtype);
            let probe = Params::new([(
                "dimension_numbers",
                Param::DotDims(Arc::new(DotDimensionNumbers::default())),
            )]);
            match Builtin::DotGeneral.abstract_eval(&[la, ra], &probe) {
                Ok(o) => Param::DType(o[0].dtype),
                Err(_) => Param::None,
            }
        };
        self.add(
            lv,
            Builtin::DotGeneral,
            vec![l, r],
            Params::new([
                ("dimension_numbers", Param::DotDims(Arc::new(dn))),
                ("precision", Param::None),
                ("preferred_element_type", preferred),
            ]),
        );
        Ok(())
    }

    /// `conv_general_dilated` of 0 to 2 spatial dimensions in random layouts, with
    /// strides, padding (negative included), both dilations and feature or batch groups.
    fn conv_general_dilated(&mut self, lv: &mut Level) -> Result<()> {
        let n = self.u.int_in_range(0..=2usize)?;
        let groups = self.u.int_in_range(1..=3i64)?;
        let (fgc, bgc) = match self.u.int_in_range(0..=2u8)? {
            0 => (1, 1),
            1 => (groups, 1),
            _ => (1, groups),
        };
        let small = |g: &mut Self| g.u.int_in_range(1..=2i64);
        let batch = bgc * small(self)?;
        let in_features = fgc * small(self)?;
        let out_features = fgc * bgc * small(self)?;
        let mut strides = Vec::new();
        let mut padding = Vec::new();
        let mut lhs_dilation = Vec::new();
        let mut rhs_dilation = Vec::new();
        let mut sizes = Vec::new();
        let mut kernel = Vec::new();
        for _ in 0..n {
            let size = self.dim()?;
            let ld = self.u.int_in_range(1..=2i64)?;
            let (lo, hi) = (
                self.u.int_in_range(-1..=2i64)?,
                self.u.int_in_range(-1..=2i64)?,
            );
            // The padded size may not be negative.
            let dilated = if size == 0 { 0 } else { 1 + ld * (size - 1) };
            let (lo, hi) = if dilated + lo + hi < 0 {
                (0, 0)
            } else {
                (lo, hi)
            };
            sizes.push(size);
            kernel.push(self.u.int_in_range(1..=3i64)?);
            strides.push(self.u.int_in_range(1..=3i64)?);
            padding.push((lo, hi));
            lhs_dilation.push(ld);
            rhs_dilation.push(self.u.int_in_range(1..=2i64)?);
        }
        let rank = n + 2;
        let specs = [
            self.permutation(rank)?,
            self.permutation(rank)?,
            self.permutation(rank)?,
        ];
        let place = |spec: &[i64], canonical: &[i64]| -> Vec<i64> {
            let mut dims = vec![0; rank];
            for (i, &d) in spec.iter().enumerate() {
                dims[d as usize] = canonical[i];
            }
            dims
        };
        let lhs_dims = place(&specs[0], &[&[batch, in_features][..], &sizes].concat());
        let rhs_dims = place(
            &specs[1],
            &[&[out_features, in_features / fgc][..], &kernel].concat(),
        );
        let dtype = self.dtype_where(|_| true)?;
        let preferred = if dtype == DType::F16 && self.ratio(1, 2)? {
            Param::DType(DType::F32)
        } else {
            Param::None
        };
        let l = self.value_of(lv, &aval(&lhs_dims, dtype))?;
        let r = self.value_of(lv, &aval(&rhs_dims, dtype))?;
        let [lhs_spec, rhs_spec, out_spec] = specs;
        self.add(
            lv,
            Builtin::ConvGeneralDilated,
            vec![l, r],
            Params::new([
                ("window_strides", Param::ints(&strides)),
                ("padding", Param::Pairs(padding.into())),
                ("lhs_dilation", Param::ints(&lhs_dilation)),
                ("rhs_dilation", Param::ints(&rhs_dilation)),
                (
                    "dimension_numbers",
                    Param::ConvDims(Arc::new(ConvDimensionNumbers {
                        lhs_spec,
                        rhs_spec,
                        out_spec,
                    })),
                ),
                ("feature_group_count", Param::Int(fgc)),
                ("batch_group_count", Param::Int(bgc)),
                ("precision", Param::None),
                ("preferred_element_type", preferred),
                ("out_sharding", Param::None),
            ]),
        );
        Ok(())
    }

    /// `gather`, or a scatter, of slices along one axis at `k` indices (some out of
    /// bounds), in a random mode.
    fn gather_scatter(&mut self, lv: &mut Level, prim: Builtin) -> Result<()> {
        let numeric = matches!(
            prim,
            Builtin::ScatterAdd | Builtin::ScatterSub | Builtin::ScatterMul
        );
        let okd = move |d: DType| !numeric || is_numeric(d);
        let ok = move |t: &AbstractValue| okd(t.dtype) && t.shape.dims().iter().any(|&d| d > 0);
        let (x, xt) = self.operand(lv, ok, |g| {
            let mut t = g.type_where(okd)?;
            if !ok(&t) {
                t = aval(&[3], t.dtype);
            }
            Ok(t)
        })?;
        let rank = xt.shape.rank();
        let axes: Vec<usize> = (0..rank).filter(|&i| xt.shape.dims()[i] > 0).collect();
        let a = *self.u.choose(&axes)?;
        let k = self.dim()?;
        let idx_dtype = self.dtype_where(DType::is_int)?;
        let idx = self.value_of(lv, &aval(&[k, 1], idx_dtype))?;
        // The batch dimension (of size k) goes at `bpos` among the window dimensions.
        let bpos = self.u.int_in_range(0..=rank - 1)?;
        let window: Vec<i64> = (0..rank as i64).filter(|&p| p != bpos as i64).collect();
        let mut sizes = Vec::with_capacity(rank);
        for (i, &d) in xt.shape.dims().iter().enumerate() {
            sizes.push(if i == a {
                1
            } else if self.ratio(3, 4)? {
                d
            } else {
                self.u.int_in_range(0..=d)?
            });
        }
        let mut out_dims: Vec<i64> = sizes
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != a)
            .map(|(_, &s)| s)
            .collect();
        out_dims.insert(bpos, k);
        if out_dims.iter().product::<i64>() > self.cfg.max_elements {
            return Ok(());
        }
        let mode = *self.u.choose(&GatherScatterMode::ALL)?;
        let sorted = Param::Bool(false);
        let unique = Param::Bool(false);
        if prim == Builtin::Gather {
            let dn = GatherDimensionNumbers {
                offset_dims: window,
                collapsed_slice_dims: vec![a as i64],
                start_index_map: vec![a as i64],
                ..Default::default()
            };
            self.add(
                lv,
                prim,
                vec![x, idx],
                Params::new([
                    ("dimension_numbers", Param::GatherDims(Arc::new(dn))),
                    ("fill_value", Param::None),
                    ("indices_are_sorted", sorted),
                    ("mode", Param::Mode(mode)),
                    ("slice_sizes", Param::ints(&sizes)),
                    ("unique_indices", unique),
                ]),
            );
        } else {
            let updates = self.value_of(lv, &aval(&out_dims, xt.dtype))?;
            let dn = ScatterDimensionNumbers {
                update_window_dims: window,
                inserted_window_dims: vec![a as i64],
                scatter_dims_to_operand_dims: vec![a as i64],
                ..Default::default()
            };
            self.add(
                lv,
                prim,
                vec![x, idx, updates],
                Params::new([
                    ("dimension_numbers", Param::ScatterDims(Arc::new(dn))),
                    ("indices_are_sorted", sorted),
                    ("mode", Param::Mode(mode)),
                    ("unique_indices", unique),
                    ("update_consts", Param::ints(&[])),
                    ("update_jaxpr", Param::None),
                ]),
            );
        }
        Ok(())
    }

    /// Window params for an operand of dimensions `dims`: small windows, strides,
    /// paddings (negative ones only if `negative`) and dilations.
    fn window_params(&mut self, dims: &[i64], negative: bool, dilated: bool) -> Result<Window> {
        let mut w = Window {
            dims: Vec::new(),
            strides: Vec::new(),
            padding: Vec::new(),
            base_dilation: Vec::new(),
            window_dilation: Vec::new(),
        };
        let low = if negative { -1 } else { 0 };
        for _ in dims {
            w.dims.push(self.u.int_in_range(1..=3)?);
            w.strides.push(self.u.int_in_range(1..=2)?);
            w.padding
                .push((self.u.int_in_range(low..=1)?, self.u.int_in_range(low..=2)?));
            let (bd, wd) = if dilated {
                (self.u.int_in_range(1..=2)?, self.u.int_in_range(1..=2)?)
            } else {
                (1, 1)
            };
            w.base_dilation.push(bd);
            w.window_dilation.push(wd);
        }
        Ok(w)
    }

    /// One of the windowed reductions or the primitives of their derivatives.
    fn windowed(&mut self, lv: &mut Level, prim: Builtin) -> Result<()> {
        use Builtin::*;
        let float = matches!(prim, SelectAndGatherAdd);
        let numeric = matches!(prim, ReduceWindowSum | SelectAndScatterAdd);
        let ok = move |t: &AbstractValue| {
            (!float || t.dtype.is_float()) && (!numeric || t.dtype != DType::Bool)
        };
        let (x, xt) = self.operand(lv, ok, |g| {
            let d =
                g.dtype_where(|d| (!float || d.is_float()) && (!numeric || d != DType::Bool))?;
            Ok(aval(&[4, 3], d))
        })?;
        let d = xt.dtype;
        let w = self.window_params(
            xt.shape.dims(),
            prim != SelectAndScatterAdd,
            prim != SelectAndScatterAdd,
        )?;
        let Ok(out) = w.out_dims(xt.shape.dims()) else {
            return Ok(());
        };
        let common = [
            ("padding", Param::Pairs(w.padding.clone().into())),
            ("window_dimensions", Param::ints(&w.dims)),
            ("window_strides", Param::ints(&w.strides)),
        ];
        let dilations = [
            ("base_dilation", Param::ints(&w.base_dilation)),
            ("window_dilation", Param::ints(&w.window_dilation)),
        ];
        let select = Param::Str(if self.ratio(1, 2)? { "ge" } else { "le" }.into());
        match prim {
            ReduceWindowSum | ReduceWindowMax | ReduceWindowMin => {
                let params = Params::new(common.into_iter().chain(dilations));
                self.add(lv, prim, vec![x], params);
            }
            ReduceWindow => {
                // A reducer of scalars: a max, a sum or a product.
                let combine = *self.u.choose(&[Max, Add, Mul])?;
                let combine = if d == DType::Bool && combine != Max {
                    Max
                } else {
                    combine
                };
                let mut b = JaxprBuilder::new();
                let s = AbstractValue::scalar(d);
                let (p, q) = (b.add_invar(s.clone()), b.add_invar(s));
                let Ok(r) = b.add_eqn(
                    combine.into(),
                    vec![Atom::Var(p), Atom::Var(q)],
                    Params::empty(),
                ) else {
                    return Ok(());
                };
                let Ok(j) = b.build(vec![Atom::Var(r[0])]) else {
                    return Ok(());
                };
                let Ok(j) = ClosedJaxpr::new(Arc::new(j), Vec::new()) else {
                    return Ok(());
                };
                let init = self.value_of(lv, &AbstractValue::scalar(d))?;
                let params = Params::new(
                    common
                        .into_iter()
                        .chain(dilations)
                        .chain([("consts", Param::ints(&[])), ("jaxpr", Param::Jaxpr(j))]),
                );
                self.add(lv, prim, vec![x, init], params);
            }
            SelectAndGatherAdd => {
                let t = self.value_of(lv, &xt)?;
                let params = Params::new(
                    common
                        .into_iter()
                        .chain(dilations)
                        .chain([("select_prim", select)]),
                );
                self.add(lv, prim, vec![t, x], params);
            }
            _ => {
                let source = self.value_of(lv, &aval(&out, d))?;
                let params = Params::new(common.into_iter().chain([("select_prim", select)]));
                self.add(lv, prim, vec![source, x], params);
            }
        }
        Ok(())
    }

    /// A shared sub-jaxpr taking exactly these types, if one was made.
    fn shared_with(&mut self, ins: Option<&[AbstractValue]>) -> Result<Option<ClosedJaxpr>> {
        let fits: Vec<&ClosedJaxpr> = self
            .shared
            .iter()
            .filter(|j| {
                ins.is_none_or(|ins| {
                    let jin = j.in_avals();
                    jin.len() == ins.len() && jin.iter().zip(ins).all(|(a, b)| a.same_type(b))
                })
            })
            .collect();
        if fits.is_empty() {
            return Ok(None);
        }
        let i = self.u.choose_index(fits.len())?;
        Ok(Some(fits[i].clone()))
    }

    fn call(&mut self, lv: &mut Level, prim: Builtin, depth: usize) -> Result<()> {
        let (sub, args) = match self.ratio(1, 3)? {
            true => match self.shared_with(None)? {
                // Only jit takes keys of the call primitives.
                Some(sub)
                    if !prim.takes_keys() && sub.in_avals().iter().any(|t| t.dtype.is_key()) =>
                {
                    return Ok(())
                }
                Some(sub) => {
                    let args = sub
                        .in_avals()
                        .iter()
                        .map(|t| self.value_of(lv, t))
                        .collect::<Result<Vec<_>>>()?;
                    (sub, args)
                }
                None => return Ok(()),
            },
            false => {
                let ops = self.some_operands(lv, 3)?;
                let avals: Vec<AbstractValue> = ops.iter().map(|(_, t)| t.clone()).collect();
                let nouts = self.u.int_in_range(0..=2)?;
                let sub = self.nested(&avals, Outs::Any(nouts), depth)?;
                (sub, ops.into_iter().map(|(a, _)| a).collect())
            }
        };
        let j = Param::Jaxpr(sub);
        let params = match prim {
            Builtin::Remat => remat_params(j, self.ratio(1, 2)?),
            Builtin::CustomJvpCall => custom_jvp_params(j, "f"),
            Builtin::CustomVjpCall => custom_vjp_params(j, "f"),
            _ => Params::new([("jaxpr", j), ("name", Param::Str("f".into()))]),
        };
        self.add(lv, prim, args, params);
        Ok(())
    }

    fn cond(&mut self, lv: &mut Level, depth: usize) -> Result<()> {
        let index = self.value_of(lv, &AbstractValue::scalar(DType::I32))?;
        let ops = self.some_operands(lv, 3)?;
        let in_avals: Vec<AbstractValue> = ops.iter().map(|(_, t)| t.clone()).collect();
        let nouts = self.u.int_in_range(0..=2)?;
        let mut out_avals = Vec::with_capacity(nouts);
        for _ in 0..nouts {
            out_avals.push(if !in_avals.is_empty() && self.ratio(1, 2)? {
                self.u.choose(&in_avals)?.clone().with_weak_type(false)
            } else {
                self.any_type()?
            });
        }
        let nbranches = self.u.int_in_range(1..=3)?;
        let mut branches = Vec::with_capacity(nbranches);
        for _ in 0..nbranches {
            let reuse = self.shared_with(Some(&in_avals))?.filter(|j| {
                let o = j.out_avals();
                o.len() == out_avals.len() && o.iter().zip(&out_avals).all(|(a, b)| a.same_type(b))
            });
            branches.push(match reuse {
                Some(j) if self.ratio(1, 2)? => j,
                _ => self.nested(&in_avals, Outs::Exact(&out_avals), depth)?,
            });
        }
        let mut ins = vec![index];
        ins.extend(ops.into_iter().map(|(a, _)| a));
        self.add(
            lv,
            Builtin::Cond,
            ins,
            Params::new([("branches", Param::Jaxprs(Arc::new(branches)))]),
        );
        Ok(())
    }

    /// A `while` whose first carry is an `i32` counter from `start` to at most `limit`
    /// (so the trip count is at most `max_trip_count`), with other carries and consts.
    fn while_loop(&mut self, lv: &mut Level, depth: usize) -> Result<()> {
        if self.ratio(1, 4)? {
            return self.batched_while_loop(lv, depth);
        }
        let limit = self.u.int_in_range(0..=self.cfg.max_trip_count)?;
        let start = self.u.int_in_range(0..=limit)?;
        let cond_consts = self.some_operands(lv, 1)?;
        let body_consts = self.some_operands(lv, 2)?;
        let carries = self.some_operands(lv, 2)?;
        let i32s = AbstractValue::scalar(DType::I32);
        let types = |v: &[(Atom, AbstractValue)]| -> Vec<AbstractValue> {
            v.iter().map(|(_, t)| t.clone()).collect()
        };
        let carry_types: Vec<AbstractValue> = std::iter::once(i32s.clone())
            .chain(types(&carries))
            .collect();
        let lit = |b: &mut JaxprBuilder, v: i64| {
            b.literal(Literal {
                value: LitValue::Int(v),
                dtype: DType::I32,
                weak_type: false,
            })
        };
        // cond: counter < limit, sometimes and-ed with a bool of the level.
        let cond_in: Vec<AbstractValue> = types(&cond_consts)
            .into_iter()
            .chain(carry_types.iter().cloned())
            .collect();
        let mut cl = self.new_level(&cond_in);
        let counter = cl.pool[cond_consts.len()].0;
        let limit_atom = lit(&mut cl.b, limit);
        let Some(lt) = self.add(
            &mut cl,
            Builtin::Lt,
            vec![counter, limit_atom],
            Params::empty(),
        ) else {
            return Ok(());
        };
        let mut pred = lt[0];
        if self.ratio(1, 3)? {
            let n = self.u.int_in_range(0..=3)?;
            self.fill(&mut cl, n, depth + 1)?;
            let other = self.value_of(&mut cl, &AbstractValue::scalar(DType::Bool))?;
            if let Some(a) = self.add(&mut cl, Builtin::And, vec![pred, other], Params::empty()) {
                pred = a[0];
            }
        }
        let Ok(cond_j) = cl.b.build(vec![pred]) else {
            return Ok(());
        };
        // body: counter + 1, then the other carries from a random level.
        let Some(body_j) = self.while_body(&body_consts, &carry_types, depth)? else {
            return Ok(());
        };
        let init = lit(&mut lv.b, start);
        let mut ins: Vec<Atom> = cond_consts.iter().map(|(a, _)| *a).collect();
        ins.extend(body_consts.iter().map(|(a, _)| *a));
        ins.push(init);
        ins.extend(carries.iter().map(|(a, _)| *a));
        self.add(
            lv,
            Builtin::While,
            ins,
            Params::new([
                ("body_jaxpr", Param::Jaxpr(closed(body_j))),
                ("body_nconsts", Param::Int(body_consts.len() as i64)),
                ("cond_jaxpr", Param::Jaxpr(closed(cond_j))),
                ("cond_nconsts", Param::Int(cond_consts.len() as i64)),
            ]),
        );
        Ok(())
    }

    /// A `while` with a batched predicate (JAX's vmap of a loop): its first carry is an
    /// `i32[n]` counter per lane, clamped into `0..=limit` on entry and counting up to
    /// `limit` (so at most `max_trip_count` iterations), its predicate `bool[n]` (the
    /// counters below the limit, sometimes and-ed with a `bool[n]` of the level), and its
    /// other carries arrays of leading dimension `n`.
    /// A `while` body over `body_consts` and carries of `carry_types` (the first an i32
    /// counter, of any shape): the counter plus one, then each other carry taken from a
    /// random level of `depth + 1`. `None` when the body does not build.
    fn while_body(
        &mut self,
        body_consts: &[(Atom, AbstractValue)],
        carry_types: &[AbstractValue],
        depth: usize,
    ) -> Result<Option<Jaxpr>> {
        let body_in: Vec<AbstractValue> = body_consts
            .iter()
            .map(|(_, t)| t.clone())
            .chain(carry_types.iter().cloned())
            .collect();
        let mut bl = self.new_level(&body_in);
        let counter = bl.pool[body_consts.len()].0;
        let one = bl.b.literal(Literal::i32(1));
        let Some(next) = self.add(&mut bl, Builtin::Add, vec![counter, one], Params::empty())
        else {
            return Ok(None);
        };
        let n = self.u.int_in_range(0..=self.cfg.max_nested_eqns)?;
        self.fill(&mut bl, n, depth + 1)?;
        let mut outs = vec![next[0]];
        for t in &carry_types[1..] {
            outs.push(self.value_of(&mut bl, t)?);
        }
        Ok(bl.b.build(outs).ok())
    }

    fn batched_while_loop(&mut self, lv: &mut Level, depth: usize) -> Result<()> {
        let lanes = self.u.int_in_range(1..=3)?;
        let limit = self.u.int_in_range(0..=self.cfg.max_trip_count)?;
        let cond_consts = self.some_operands(lv, 1)?;
        let body_consts = self.some_operands(lv, 2)?;
        let counter_t = aval(&[lanes], DType::I32);
        let mut carry_types = vec![counter_t.clone()];
        for _ in 0..self.u.int_in_range(0..=2)? {
            let t = self.any_type()?;
            let mut dims = vec![lanes];
            dims.extend_from_slice(t.shape.dims());
            let t = self.fit(aval(&dims, t.dtype));
            if t.shape.dims().first() == Some(&lanes) {
                carry_types.push(t);
            }
        }
        let lit = |b: &mut JaxprBuilder, v: i64| {
            b.literal(Literal {
                value: LitValue::Int(v),
                dtype: DType::I32,
                weak_type: false,
            })
        };
        let types = |v: &[(Atom, AbstractValue)]| -> Vec<AbstractValue> {
            v.iter().map(|(_, t)| t.clone()).collect()
        };
        // cond: counter < limit per lane, sometimes and-ed with a bool[lanes].
        let cond_in: Vec<AbstractValue> = types(&cond_consts)
            .into_iter()
            .chain(carry_types.iter().cloned())
            .collect();
        let mut cl = self.new_level(&cond_in);
        let counter = cl.pool[cond_consts.len()].0;
        let limit_atom = lit(&mut cl.b, limit);
        let Some(lt) = self.add(
            &mut cl,
            Builtin::Lt,
            vec![counter, limit_atom],
            Params::empty(),
        ) else {
            return Ok(());
        };
        let mut pred = lt[0];
        if self.ratio(1, 3)? {
            let n = self.u.int_in_range(0..=3)?;
            self.fill(&mut cl, n, depth + 1)?;
            let other = self.value_of(&mut cl, &aval(&[lanes], DType::Bool))?;
            if let Some(a) = self.add(&mut cl, Builtin::And, vec![pred, other], Params::empty()) {
                pred = a[0];
            }
        }
        let Ok(cond_j) = cl.b.build(vec![pred]) else {
            return Ok(());
        };
        // body: counter + 1, then the other carries from a random level.
        let Some(body_j) = self.while_body(&body_consts, &carry_types, depth)? else {
            return Ok(());
        };
        // The initial counters: any i32[lanes] clamped into 0..=limit.
        let raw = self.value_of(lv, &counter_t)?;
        let (lo, hi) = (lit(&mut lv.b, 0), lit(&mut lv.b, limit));
        let Some(init) = self.add_limited(
            lv,
            Builtin::Clamp,
            vec![lo, raw, hi],
            Params::empty(),
            false,
        ) else {
            return Ok(());
        };
        let mut ins: Vec<Atom> = cond_consts.iter().map(|(a, _)| *a).collect();
        ins.extend(body_consts.iter().map(|(a, _)| *a));
        ins.push(init[0]);
        for t in &carry_types[1..] {
            ins.push(self.value_of(lv, t)?);
        }
        self.add(
            lv,
            Builtin::While,
            ins,
            Params::new([
                ("body_jaxpr", Param::Jaxpr(closed(body_j))),
                ("body_nconsts", Param::Int(body_consts.len() as i64)),
                ("cond_jaxpr", Param::Jaxpr(closed(cond_j))),
                ("cond_nconsts", Param::Int(cond_consts.len() as i64)),
            ]),
        );
        Ok(())
    }

    fn scan(&mut self, lv: &mut Level, depth: usize) -> Result<()> {
        let length = self.u.int_in_range(0..=self.cfg.max_trip_count)?;
        let consts = self.some_operands(lv, 2)?;
        let carries = self.some_operands(lv, 2)?;
        let nxs = self.u.int_in_range(0..=2)?;
        let mut xs = Vec::with_capacity(nxs);
        let mut x_slices = Vec::with_capacity(nxs);
        for _ in 0..nxs {
            let t = self.any_type()?;
            let mut dims = vec![length];
            dims.extend_from_slice(t.shape.dims());
            let full = self.fit(aval(&dims, t.dtype));
            if full.shape.dims()[0] != length {
                continue;
            }
            xs.push(self.value_of(lv, &full)?);
            x_slices.push(aval(&full.shape.dims()[1..], t.dtype));
        }
        let carry_types: Vec<AbstractValue> = carries
            .iter()
            .map(|(_, t)| t.clone().with_weak_type(false))
            .collect();
        let mut body_in: Vec<AbstractValue> = consts.iter().map(|(_, t)| t.clone()).collect();
        body_in.extend(carry_types.iter().cloned());
        body_in.extend(x_slices);
        let nys = self.u.int_in_range(0..=2)?;
        let mut outs = carry_types.clone();
        for _ in 0..nys {
            outs.push(self.any_type()?);
        }
        let body = self.nested(&body_in, Outs::Exact(&outs), depth)?;
        let mut ins: Vec<Atom> = consts.iter().map(|(a, _)| *a).collect();
        ins.extend(carries.iter().map(|(a, _)| *a));
        let n = ins.len() + xs.len();
        ins.extend(xs);
        let reverse = self.ratio(1, 2)?;
        self.add(
            lv,
            Builtin::Scan,
            ins,
            Params::new([
                ("_split_transpose", Param::Bool(false)),
                ("jaxpr", Param::Jaxpr(body)),
                ("length", Param::Int(length)),
                ("linear", Param::Bools(vec![false; n].into())),
                ("num_carry", Param::Int(carries.len() as i64)),
                ("num_consts", Param::Int(consts.len() as i64)),
                ("reverse", Param::Bool(reverse)),
                ("unroll", Param::Int(1)),
            ]),
        );
        Ok(())
    }
}
