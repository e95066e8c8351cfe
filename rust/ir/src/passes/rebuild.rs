//! Copying parts of a jaxpr into a fresh, compact one: the tool passes use to emit their
//! results. Variables are renumbered densely in the order they are first met; avals and
//! literals are carried over.

use crate::aval::AbstractValue;
use crate::builder::JaxprBuilder;
use crate::jaxpr::{Atom, AvalId, Eqn, Jaxpr, VarId};
use crate::params::Params;

const UNMAPPED: u32 = u32::MAX;

/// Copies variables, literals and equations of `src` into a new builder.
pub(crate) struct Rebuilder<'a> {
    src: &'a Jaxpr,
    map: Vec<u32>,
    aval_map: Vec<u32>,
    pub(crate) out: JaxprBuilder,
}

impl<'a> Rebuilder<'a> {
    pub(crate) fn new(src: &'a Jaxpr) -> Rebuilder<'a> {
        let mut out = JaxprBuilder::new();
        // A copy is usually about the size of its source (passes that grow a jaxpr a lot
        // grow these as any builder does).
        out.reserve(src.num_vars(), src.eqns().len());
        Rebuilder {
            src,
            map: vec![UNMAPPED; src.num_vars()],
            aval_map: vec![UNMAPPED; src.avals.len()],
            out,
        }
    }

    /// A rebuilder holding a copy of all of `src`: its constvars, invars and equations
    /// (the outputs are the caller's, given to [`Rebuilder::finish`]).
    pub(crate) fn copy_of(src: &'a Jaxpr) -> Rebuilder<'a> {
        let mut rb = Rebuilder::new(src);
        for &v in src.constvars() {
            rb.constvar(v);
        }
        for &v in src.invars() {
            rb.invar(v);
        }
        for e in src.eqns() {
            rb.eqn(e);
        }
        rb
    }

    fn var(&mut self, v: VarId) -> VarId {
        let slot = self.map[v.index()];
        if slot != UNMAPPED {
            return VarId::from_index(slot as usize);
        }
        let a = self.src.var_avals[v.index()].index();
        let id = match self.aval_map[a] {
            UNMAPPED => {
                let id = self.out.intern_aval(&self.src.avals[a]);
                self.aval_map[a] = id.index() as u32;
                id
            }
            known => AvalId::from_index(known as usize),
        };
        let nv = self.out.new_var_of(id);
        self.map[v.index()] = nv.index() as u32;
        nv
    }

    /// The new atom for an atom of the source.
    pub(crate) fn atom(&mut self, a: Atom) -> Atom {
        match a {
            Atom::Var(v) => Atom::Var(self.var(v)),
            Atom::Lit(l) => self.out.literal(*self.src.literal(l)),
        }
    }

    /// Binds the new counterpart of a source constvar as a constvar.
    pub(crate) fn constvar(&mut self, v: VarId) {
        let nv = self.var(v);
        self.out.push_constvar(nv);
    }

    /// Binds the new counterpart of a source invar as an invar.
    pub(crate) fn invar(&mut self, v: VarId) {
        let nv = self.var(v);
        self.out.push_invar(nv);
    }

    /// Adds a fresh invar of the given type (one the source does not have).
    pub(crate) fn fresh_invar(&mut self, aval: AbstractValue) {
        self.out.add_invar(aval);
    }

    /// Copies an equation of the source as it is.
    pub(crate) fn eqn(&mut self, e: &Eqn) {
        self.eqn_with(
            e,
            e.inputs.iter().copied(),
            e.outvars.iter().copied(),
            e.params.clone(),
        );
    }

    /// Copies an equation with other inputs, outputs and params (all from the source).
    pub(crate) fn eqn_with(
        &mut self,
        e: &Eqn,
        inputs: impl Iterator<Item = Atom>,
        outvars: impl Iterator<Item = VarId>,
        params: Params,
    ) {
        let inputs: Vec<Atom> = inputs.map(|a| self.atom(a)).collect();
        let outvars: Vec<VarId> = outvars.map(|v| self.var(v)).collect();
        self.out
            .add_eqn_with_outvars(e.primitive.clone(), inputs, params, outvars);
    }

    /// Finishes with these source outputs. Passes only make well-typed jaxprs from
    /// well-typed ones, so the check runs in debug builds only.
    pub(crate) fn finish(mut self, outvars: impl Iterator<Item = Atom>) -> Jaxpr {
        let outs: Vec<Atom> = outvars.map(|a| self.atom(a)).collect();
        self.out.build_trusted(outs)
    }
}
