//! [`JaxprBuilder`]: the only way to make a [`Jaxpr`].

use crate::aval::AbstractValue;
use crate::error::{Site, TypeError};
use crate::fxhash::FxBuild;
use crate::jaxpr::{Atom, AvalId, Eqn, Jaxpr, LitId, Literal, VarId};
use crate::params::Params;
use crate::primitive::Primitive;
use crate::sharding::AxisEnv;
use crate::typecheck::{self, Parts};
use std::collections::HashMap;

/// Builds a jaxpr: declare constvars and invars, add equations (whose output types come
/// from the primitive's rule), then [`JaxprBuilder::build`] with the outputs, which
/// typechecks the result.
///
/// Equations may also be added with declared output variables made by
/// [`JaxprBuilder::new_var`], in any order; [`JaxprBuilder::build_toposorted`] then
/// orders them (this is how a graph of recipes becomes a jaxpr).
///
/// # Examples
/// ```
/// use ferrax_ir::{AbstractValue, Builtin, DType, JaxprBuilder, Params};
/// let f32_3 = AbstractValue::array(DType::F32, &[3])?;
/// let mut b = JaxprBuilder::new();
/// let k = b.add_constvar(f32_3.clone());
/// let x = b.add_invar(f32_3.clone());
/// // Declared outputs, added consumer first: `z = exp y` before `y = add x k`.
/// let (y, z) = (b.new_var(f32_3.clone()), b.new_var(f32_3));
/// b.add_eqn_with_outvars(Builtin::Exp.into(), vec![y.into()], Params::empty(), vec![z]);
/// b.add_eqn_with_outvars(Builtin::Add.into(), vec![x.into(), k.into()], Params::empty(), vec![y]);
/// assert_eq!(b.num_eqns(), 2);
/// let j = b.build_toposorted(vec![z.into()])?;
/// assert_eq!(
///     j.to_string(),
///     "{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = add b a; d:f32[3] = exp c in (d,) }"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct JaxprBuilder {
    avals: Vec<AbstractValue>,
    aval_ids: HashMap<AbstractValue, AvalId, FxBuild>,
    var_avals: Vec<AvalId>,
    literals: Vec<Literal>,
    constvars: Vec<VarId>,
    invars: Vec<VarId>,
    eqns: Vec<Eqn>,
    env: AxisEnv,
    /// Whether a variable may be unbound or bound out of order: set by the calls that
    /// make or bind variables apart from their equation (`new_var`,
    /// `add_eqn_with_outvars`, `push_*`, `truncate`). While unset every variable was
    /// bound where it was made and every equation checked by `add_eqn`, so `build` has
    /// only the outputs and literals left to check.
    loose: bool,
}

impl JaxprBuilder {
    /// An empty builder, checking collectives in an open axis environment (see
    /// [`AxisEnv`]).
    pub fn new() -> JaxprBuilder {
        JaxprBuilder::default()
    }

    /// An empty builder whose equations see the axes of `env` (a `shard_map` body's
    /// builder: the mesh's axes, closed).
    pub fn with_axis_env(env: AxisEnv) -> JaxprBuilder {
        JaxprBuilder {
            env,
            ..JaxprBuilder::default()
        }
    }

    /// The axis environment the equations are checked in.
    pub fn axis_env(&self) -> &AxisEnv {
        &self.env
    }

    fn intern(&mut self, aval: AbstractValue) -> AvalId {
        if let Some(&id) = self.aval_ids.get(&aval) {
            return id;
        }
        let id = AvalId::from_index(self.avals.len());
        self.avals.push(aval.clone());
        self.aval_ids.insert(aval, id);
        id
    }

    /// A fresh variable of this type, not yet bound: bind it as an equation output with
    /// [`JaxprBuilder::add_eqn_with_outvars`].
    pub fn new_var(&mut self, aval: AbstractValue) -> VarId {
        self.loose = true;
        self.bound_var(aval)
    }

    /// A fresh variable its caller binds at once (an input, a constant, an output of
    /// the equation being added).
    fn bound_var(&mut self, aval: AbstractValue) -> VarId {
        let id = self.intern(aval);
        let v = VarId::from_index(self.var_avals.len());
        self.var_avals.push(id);
        v
    }

    /// Interns a type once and returns its id, for callers that map many variables of
    /// few types (passes copying a jaxpr).
    pub(crate) fn intern_aval(&mut self, aval: &AbstractValue) -> AvalId {
        match self.aval_ids.get(aval) {
            Some(&id) => id,
            None => self.intern(aval.clone()),
        }
    }

    /// Reserves room for this many more variables and equations (passes copying a jaxpr
    /// of known size).
    pub(crate) fn reserve(&mut self, vars: usize, eqns: usize) {
        self.var_avals.reserve(vars);
        self.eqns.reserve(eqns);
    }

    /// A fresh unbound variable of an interned type.
    pub(crate) fn new_var_of(&mut self, aval: AvalId) -> VarId {
        self.loose = true;
        let v = VarId::from_index(self.var_avals.len());
        self.var_avals.push(aval);
        v
    }

    /// Declares the next constant variable.
    pub fn add_constvar(&mut self, aval: AbstractValue) -> VarId {
        let v = self.bound_var(aval);
        self.constvars.push(v);
        v
    }

    /// Declares the next input variable.
    pub fn add_invar(&mut self, aval: AbstractValue) -> VarId {
        let v = self.bound_var(aval);
        self.invars.push(v);
        v
    }

    /// Binds an existing unbound variable as the next constvar.
    pub(crate) fn push_constvar(&mut self, v: VarId) {
        self.loose = true;
        self.constvars.push(v);
    }

    /// Binds an existing unbound variable as the next invar.
    pub(crate) fn push_invar(&mut self, v: VarId) {
        self.loose = true;
        self.invars.push(v);
    }

    /// Adds a literal and returns it as an atom.
    pub fn literal(&mut self, lit: Literal) -> Atom {
        let id = LitId::from_index(self.literals.len());
        self.literals.push(lit);
        Atom::Lit(id)
    }

    /// The type of a variable of this builder, if the id is one.
    pub fn var_aval(&self, v: VarId) -> Option<&AbstractValue> {
        self.var_avals
            .get(v.index())
            .map(|id| &self.avals[id.index()])
    }

    /// The type of an atom of this builder, if the id is one.
    pub fn atom_aval(&self, a: Atom) -> Option<AbstractValue> {
        match a {
            Atom::Var(v) => self.var_aval(v).cloned(),
            Atom::Lit(l) => self.literals.get(l.index()).map(Literal::aval),
        }
    }

    /// How far the builder has got (variables, literals, equations): a point
    /// [`JaxprBuilder::truncate`] can return to.
    pub(crate) fn mark(&self) -> (usize, usize, usize) {
        (self.var_avals.len(), self.literals.len(), self.eqns.len())
    }

    /// Forgets the variables, literals and equations added since `mark` (no constvar or
    /// invar may have been added since).
    pub(crate) fn truncate(&mut self, (vars, lits, eqns): (usize, usize, usize)) {
        // Atoms made since `mark` may still be held, and their ids are given out again.
        self.loose = true;
        self.var_avals.truncate(vars);
        self.literals.truncate(lits);
        self.eqns.truncate(eqns);
    }

    /// Number of equations added so far.
    pub fn num_eqns(&self) -> usize {
        self.eqns.len()
    }

    /// Applies a primitive: checks the operands exist, runs the primitive's rule, binds
    /// fresh output variables of the rule's types and returns them.
    pub fn add_eqn(
        &mut self,
        primitive: Primitive,
        inputs: Vec<Atom>,
        params: Params,
    ) -> Result<Vec<VarId>, TypeError> {
        let mut in_avals = Vec::with_capacity(inputs.len());
        for &a in &inputs {
            match self.atom_aval(a) {
                Some(av) => in_avals.push(av),
                None => {
                    return Err(match a {
                        Atom::Var(v) => TypeError::VarOutOfRange {
                            site: self.pending_site(&primitive),
                            var: v.index() as u32,
                            num_vars: self.var_avals.len(),
                        },
                        Atom::Lit(l) => TypeError::LiteralOutOfRange {
                            site: self.pending_site(&primitive),
                            lit: l.index() as u32,
                        },
                    })
                }
            }
        }
        let outs = primitive
            .abstract_eval_in(&in_avals, &params, &self.env)
            .map_err(|error| TypeError::Rule {
                site: self.pending_site(&primitive),
                primitive: primitive.name().to_owned(),
                error,
            })?;
        let outvars: Vec<VarId> = outs.into_iter().map(|av| self.bound_var(av)).collect();
        self.eqns.push(Eqn {
            primitive,
            inputs: inputs.into_boxed_slice(),
            outvars: outvars.clone().into_boxed_slice(),
            params,
        });
        Ok(outvars)
    }

    /// Applies a primitive of one output and returns it: [`JaxprBuilder::add_eqn`] for
    /// the common case, taking variables and literals alike as operands.
    ///
    /// ```
    /// use ferrax_ir::{AbstractValue, Builtin, DType, JaxprBuilder, Literal, Params};
    /// let mut b = JaxprBuilder::new();
    /// let x = b.add_invar(AbstractValue::array(DType::F32, &[3]).unwrap());
    /// let two = b.literal(Literal::f32(2.0).weak());
    /// let y = b.apply(Builtin::Mul, [x.into(), two], Params::empty()).unwrap();
    /// let z = b.apply(Builtin::Sin, [y], Params::empty()).unwrap();
    /// let j = b.build(vec![z.into()]).unwrap();
    /// assert_eq!(
    ///     j.to_string(),
    ///     "{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[]; c:f32[3] = sin b in (c,) }"
    /// );
    /// ```
    ///
    /// # Errors
    /// As [`JaxprBuilder::add_eqn`], and [`TypeError::OutputCount`] (adding nothing) when
    /// the rule gives other than one output.
    pub fn apply<A: Into<Atom>>(
        &mut self,
        primitive: impl Into<Primitive>,
        inputs: impl IntoIterator<Item = A>,
        params: Params,
    ) -> Result<VarId, TypeError> {
        let primitive = primitive.into();
        let inputs: Vec<Atom> = inputs.into_iter().map(Into::into).collect();
        let mark = self.mark();
        let outs = self.add_eqn(primitive.clone(), inputs, params)?;
        match outs[..] {
            [v] => Ok(v),
            _ => {
                self.truncate(mark);
                Err(TypeError::OutputCount {
                    site: self.pending_site(&primitive),
                    primitive: primitive.name().to_owned(),
                    expected: 1,
                    got: outs.len(),
                })
            }
        }
    }

    /// Adds an equation binding variables made by [`JaxprBuilder::new_var`]. Nothing is
    /// checked until [`JaxprBuilder::build`], which compares the variables' types with the
    /// rule's.
    pub fn add_eqn_with_outvars(
        &mut self,
        primitive: Primitive,
        inputs: Vec<Atom>,
        params: Params,
        outvars: Vec<VarId>,
    ) {
        self.loose = true;
        self.eqns.push(Eqn {
            primitive,
            inputs: inputs.into_boxed_slice(),
            outvars: outvars.into_boxed_slice(),
            params,
        });
    }

    fn pending_site(&self, primitive: &Primitive) -> Site {
        Site::Eqn {
            index: self.eqns.len(),
            line: format!("{} ...", primitive.name()),
        }
    }

    /// Finishes the jaxpr with these outputs, typechecked (sub-jaxprs were checked when
    /// they were built). Equations added with [`JaxprBuilder::add_eqn`] were checked as
    /// they were added, which leaves the outputs and literals; a builder that made or
    /// bound variables apart from their equations ([`JaxprBuilder::new_var`],
    /// [`JaxprBuilder::add_eqn_with_outvars`]) is checked whole.
    ///
    /// # Errors
    /// A [`TypeError`] for the first ill-typed part (as [`crate::typecheck()`] reports it).
    pub fn build(self, outvars: Vec<Atom>) -> Result<Jaxpr, TypeError> {
        // Built equation by equation with `add_eqn` (tracing): each equation was checked
        // as it was added and every variable bound where it was made, so only the
        // outputs and the literals are left; anything else is checked whole (which also
        // gives the exact error).
        let checked = !self.loose
            && self.literals.iter().all(Literal::is_well_typed)
            && outvars.iter().all(|&a| match a {
                Atom::Var(v) => v.index() < self.var_avals.len(),
                Atom::Lit(l) => l.index() < self.literals.len(),
            });
        let jaxpr = Jaxpr {
            avals: self.avals.into_boxed_slice(),
            var_avals: self.var_avals.into_boxed_slice(),
            literals: self.literals.into_boxed_slice(),
            constvars: self.constvars.into_boxed_slice(),
            invars: self.invars.into_boxed_slice(),
            effects: self.eqns.iter().any(Eqn::has_effect),
            eqns: self.eqns.into_boxed_slice(),
            outvars: outvars.into_boxed_slice(),
        };
        if !checked {
            typecheck::check_parts_in(&Parts::of(&jaxpr), &self.env)?;
        } else {
            #[cfg(debug_assertions)]
            if let Err(e) = typecheck::check_parts_in(&Parts::of(&jaxpr), &self.env) {
                panic!("a jaxpr built equation by equation is ill-typed: {e}");
            }
        }
        Ok(jaxpr)
    }

    /// Finishes a jaxpr that a pass made from a well-typed one: checked in debug builds
    /// only (passes preserve types by construction; their tests run debug builds).
    pub(crate) fn build_trusted(self, outvars: Vec<Atom>) -> Jaxpr {
        let jaxpr = Jaxpr {
            avals: self.avals.into_boxed_slice(),
            var_avals: self.var_avals.into_boxed_slice(),
            literals: self.literals.into_boxed_slice(),
            constvars: self.constvars.into_boxed_slice(),
            invars: self.invars.into_boxed_slice(),
            effects: self.eqns.iter().any(Eqn::has_effect),
            eqns: self.eqns.into_boxed_slice(),
            outvars: outvars.into_boxed_slice(),
        };
        #[cfg(debug_assertions)]
        if let Err(e) = typecheck::check_parts_in(&Parts::of(&jaxpr), &self.env) {
            panic!("a pass produced an ill-typed jaxpr: {e}");
        }
        jaxpr
    }

    /// Orders the equations so each follows the definitions of its inputs (keeping the
    /// given order where it already is one), then builds. A dependency cycle is an error.
    pub fn build_toposorted(mut self, outvars: Vec<Atom>) -> Result<Jaxpr, TypeError> {
        let order =
            crate::passes::toposort::insertion_order(self.var_avals.len(), &self.eqns, |i| {
                Site::Eqn {
                    index: i,
                    line: format!("{} ...", self.eqns[i].primitive.name()),
                }
            })?;
        let mut slots: Vec<Option<Eqn>> = std::mem::take(&mut self.eqns)
            .into_iter()
            .map(Some)
            .collect();
        self.eqns = order.into_iter().filter_map(|i| slots[i].take()).collect();
        self.build(outvars)
    }
}
