//! A mutator making ill-typed variants of a jaxpr, which the typechecker must reject.
//!
//! [`mutate`] copies a jaxpr through [`JaxprBuilder`] (declaring every variable, as a
//! parser would) with one change, then [`JaxprBuilder::build`]s it, which typechecks.
//! Each change makes the jaxpr ill typed: a declared output type that differs from what
//! the rule gives (another dtype or shape), an operand of another type, a param changed
//! to another value of its kind, a required param removed or an unknown one added, a
//! sub-jaxpr swapped for one of another signature, a variable used before its equation
//! or bound twice. For the operand and param changes, the primitive's rule confirms that
//! the change is not harmless (the rule rejects it or gives other output types) before
//! the mutant is made; the other changes are ill typed by construction.

use crate::aval::{AbstractValue, Shape};
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::error::TypeError;
use crate::jaxpr::{Atom, ClosedJaxpr, Jaxpr, LitValue, Literal, VarId};
use crate::params::{GatherScatterMode, Param, Params};
use arbitrary::{Result, Unstructured};
use std::fmt;
use std::sync::Arc;

/// What a mutant changed.
#[derive(Clone, Debug, PartialEq)]
pub enum Mutation {
    /// Equation `eqn` declares output `out` with another type than its rule's.
    OutputType {
        /// The equation.
        eqn: usize,
        /// The output.
        out: usize,
        /// The declared type.
        declared: AbstractValue,
    },
    /// Operand `operand` of equation `eqn` is replaced by a value of another type.
    Operand {
        /// The equation.
        eqn: usize,
        /// The operand.
        operand: usize,
        /// The new operand's type.
        got: AbstractValue,
    },
    /// Param `name` of equation `eqn` is changed, removed or (an unknown name) added.
    Param {
        /// The equation.
        eqn: usize,
        /// The param.
        name: String,
        /// What happened to it.
        change: &'static str,
    },
    /// Equation `eqn` is moved before the equation defining one of its operands.
    UseBeforeDefinition {
        /// The equation (its index in the original).
        eqn: usize,
    },
    /// An output of equation `eqn` is a variable bound before.
    BoundTwice {
        /// The equation.
        eqn: usize,
    },
}

impl fmt::Display for Mutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mutation::OutputType { eqn, out, declared } => {
                write!(f, "equation {eqn} declares output {out} as {declared}")
            }
            Mutation::Operand { eqn, operand, got } => {
                write!(f, "operand {operand} of equation {eqn} replaced by a {got}")
            }
            Mutation::Param { eqn, name, change } => {
                write!(f, "param '{name}' of equation {eqn} {change}")
            }
            Mutation::UseBeforeDefinition { eqn } => {
                write!(f, "equation {eqn} moved before an operand's definition")
            }
            Mutation::BoundTwice { eqn } => write!(f, "equation {eqn} binds a bound variable"),
        }
    }
}

/// An ill-typed variant of a jaxpr: the change, and what building it gave (an error, for
/// a typechecker that does its job).
#[derive(Debug)]
pub struct Mutant {
    /// The change.
    pub mutation: Mutation,
    /// The result of building the changed jaxpr.
    pub result: std::result::Result<Jaxpr, TypeError>,
}

/// One edit applied while copying.
enum Edit {
    OutAval {
        eqn: usize,
        out: usize,
        aval: AbstractValue,
    },
    Operand {
        eqn: usize,
        operand: usize,
        with: Repl,
    },
    Params {
        eqn: usize,
        params: Params,
    },
    Move {
        eqn: usize,
        before: usize,
    },
    Rebind {
        eqn: usize,
        var: VarId,
    },
}

/// A replacement operand: a variable of the original, or a new literal.
#[derive(Clone, Copy)]
enum Repl {
    Var(VarId),
    Lit(Literal),
}

/// An ill-typed variant of `jaxpr` chosen by `u` (see the [module docs](self)), or `None`
/// when the jaxpr has no equation to change or the changes tried were harmless.
///
/// # Errors
/// Only what [`Unstructured`] reports.
pub fn mutate(jaxpr: &Jaxpr, u: &mut Unstructured<'_>) -> Result<Option<Mutant>> {
    let n = jaxpr.eqns().len();
    if n == 0 {
        return Ok(None);
    }
    for _ in 0..8 {
        let eqn = u.int_in_range(0..=n - 1)?;
        let e = &jaxpr.eqns()[eqn];
        let found = match u.int_in_range(0..=5)? {
            0 if !e.outvars().is_empty() => {
                let out = u.int_in_range(0..=e.outvars().len() - 1)?;
                let t = jaxpr.var_aval(e.outvars()[out]);
                let declared = other_type(u, t)?;
                Some((
                    Mutation::OutputType {
                        eqn,
                        out,
                        declared: declared.clone(),
                    },
                    Edit::OutAval {
                        eqn,
                        out,
                        aval: declared,
                    },
                ))
            }
            1 if !e.inputs().is_empty() => operand_edit(jaxpr, u, eqn)?,
            2 => param_edit(jaxpr, u, eqn)?,
            3 => {
                // The earliest equation defining one of this equation's operands.
                let defs: Vec<usize> = e
                    .inputs()
                    .iter()
                    .filter_map(|a| match a {
                        Atom::Var(v) => defining_eqn(jaxpr, *v, eqn),
                        Atom::Lit(_) => None,
                    })
                    .collect();
                defs.iter().min().map(|&before| {
                    (
                        Mutation::UseBeforeDefinition { eqn },
                        Edit::Move { eqn, before },
                    )
                })
            }
            4 if !e.outvars().is_empty() => {
                // Bind an output to an earlier-bound variable (an invar or an output of an
                // earlier equation).
                let earlier: Vec<VarId> = jaxpr
                    .constvars()
                    .iter()
                    .chain(jaxpr.invars())
                    .chain(jaxpr.eqns()[..eqn].iter().flat_map(|e| e.outvars()))
                    .copied()
                    .collect();
                if earlier.is_empty() {
                    None
                } else {
                    let var = *u.choose(&earlier)?;
                    Some((Mutation::BoundTwice { eqn }, Edit::Rebind { eqn, var }))
                }
            }
            _ => {
                // Remove a required param or add an unknown one.
                let prim = e.primitive();
                let required = prim
                    .as_builtin()
                    .map(|b| {
                        b.param_specs()
                            .iter()
                            .filter(|s| s.required)
                            .map(|s| s.name)
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default();
                if !required.is_empty() && u.ratio(1, 2)? {
                    let name = *u.choose(&required)?;
                    let params = Params::new(
                        e.params()
                            .iter()
                            .filter(|(k, _)| *k != name)
                            .map(|(k, v)| (k.to_string(), v.clone())),
                    );
                    Some((
                        Mutation::Param {
                            eqn,
                            name: name.into(),
                            change: "removed",
                        },
                        Edit::Params { eqn, params },
                    ))
                } else {
                    let params = e.params().with("no_such_param", Param::Int(1));
                    Some((
                        Mutation::Param {
                            eqn,
                            name: "no_such_param".into(),
                            change: "added",
                        },
                        Edit::Params { eqn, params },
                    ))
                }
            }
        };
        if let Some((mutation, edit)) = found {
            let result = rebuild(jaxpr, &edit);
            return Ok(Some(Mutant { mutation, result }));
        }
    }
    Ok(None)
}

fn defining_eqn(j: &Jaxpr, v: VarId, upto: usize) -> Option<usize> {
    j.eqns()[..upto]
        .iter()
        .position(|e| e.outvars().contains(&v))
}

/// A type differing from `t` in dtype or shape.
fn other_type(u: &mut Unstructured<'_>, t: &AbstractValue) -> Result<AbstractValue> {
    let mut dims = t.shape.dims().to_vec();
    match u.int_in_range(0..=3)? {
        0 => {
            let others: Vec<DType> = DType::ALL
                .iter()
                .copied()
                .filter(|&d| d != t.dtype)
                .collect();
            let d = *u.choose(&others)?;
            return Ok(AbstractValue::new(t.shape.clone(), d));
        }
        1 => dims.push(u.int_in_range(0..=3)?),
        2 if !dims.is_empty() => {
            dims.pop();
        }
        _ if !dims.is_empty() => {
            let i = u.int_in_range(0..=dims.len() - 1)?;
            dims[i] += 1;
        }
        _ => dims.push(2),
    }
    Ok(AbstractValue::new(
        Shape::new(&dims).unwrap_or_default(),
        t.dtype,
    ))
}

/// Whether the rule rejects `e` with these operand types and params, or types its
/// outputs otherwise than the original does.
fn rule_disagrees(j: &Jaxpr, eqn: usize, ins: &[AbstractValue], params: &Params) -> bool {
    let e = &j.eqns()[eqn];
    match e.primitive().abstract_eval(ins, params) {
        Err(_) => true,
        Ok(outs) => {
            outs.len() != e.outvars().len()
                || outs
                    .iter()
                    .zip(e.outvars())
                    .any(|(o, &v)| !o.same_type(j.var_aval(v)))
        }
    }
}

fn operand_edit(
    j: &Jaxpr,
    u: &mut Unstructured<'_>,
    eqn: usize,
) -> Result<Option<(Mutation, Edit)>> {
    let e = &j.eqns()[eqn];
    let operand = u.int_in_range(0..=e.inputs().len() - 1)?;
    let mut ins: Vec<AbstractValue> = e.inputs().iter().map(|&a| j.atom_aval(a)).collect();
    let current = ins[operand].clone();
    // Another in-scope variable of another type, or a literal of another dtype.
    let in_scope: Vec<VarId> = j
        .constvars()
        .iter()
        .chain(j.invars())
        .chain(j.eqns()[..eqn].iter().flat_map(|e| e.outvars()))
        .copied()
        .filter(|&v| !j.var_aval(v).same_type(&current))
        .collect();
    let with = if !in_scope.is_empty() && u.ratio(2, 3)? {
        Repl::Var(*u.choose(&in_scope)?)
    } else {
        let others: Vec<DType> = DType::ALL
            .iter()
            .copied()
            .filter(|&d| d != current.dtype || current.shape.rank() != 0)
            .collect();
        let dtype = *u.choose(&others)?;
        let value = match dtype {
            DType::Bool => LitValue::Bool(true),
            d if d.is_int() => LitValue::Int(1),
            _ => LitValue::Float(1.0),
        };
        Repl::Lit(Literal {
            value,
            dtype,
            weak_type: false,
        })
    };
    let got = match with {
        Repl::Var(v) => j.var_aval(v).clone(),
        Repl::Lit(l) => l.aval(),
    };
    ins[operand] = got.clone();
    if !rule_disagrees(j, eqn, &ins, e.params()) {
        return Ok(None);
    }
    Ok(Some((
        Mutation::Operand { eqn, operand, got },
        Edit::Operand { eqn, operand, with },
    )))
}

/// Another value of the same kind as `p` (`None` when there is none to make).
fn other_param(u: &mut Unstructured<'_>, p: &Param, j: &Jaxpr) -> Result<Option<Param>> {
    Ok(Some(match p {
        Param::Bool(b) => Param::Bool(!b),
        Param::Int(i) => Param::Int(i.wrapping_add(*u.choose(&[1i64, -1, 2, -5, 1 << 40])?)),
        Param::Ints(v) => {
            let mut v = v.to_vec();
            match u.int_in_range(0..=2)? {
                0 if !v.is_empty() => {
                    let i = u.int_in_range(0..=v.len() - 1)?;
                    v[i] = v[i].wrapping_add(*u.choose(&[1i64, -1, 7, -100])?);
                }
                1 if !v.is_empty() => {
                    v.pop();
                }
                _ => v.push(u.int_in_range(-1..=4)?),
            }
            Param::ints(&v)
        }
        Param::DType(d) => {
            let others: Vec<DType> = DType::ALL.iter().copied().filter(|x| x != d).collect();
            Param::DType(*u.choose(&others)?)
        }
        Param::Mode(m) => {
            let others: Vec<GatherScatterMode> = GatherScatterMode::ALL
                .iter()
                .copied()
                .filter(|x| x != m)
                .collect();
            Param::Mode(*u.choose(&others)?)
        }
        Param::Jaxpr(cj) => {
            // A sub-jaxpr of another signature: another one of this jaxpr, or this one
            // with its last input dropped.
            let others: Vec<&ClosedJaxpr> = j
                .eqns()
                .iter()
                .flat_map(|e| e.sub_jaxprs())
                .filter(|o| !o.ptr_eq(cj))
                .collect();
            if !others.is_empty() && u.ratio(1, 2)? {
                Param::Jaxpr((*u.choose(&others)?).clone())
            } else {
                match drop_last_input(cj) {
                    Some(d) => Param::Jaxpr(d),
                    None => return Ok(None),
                }
            }
        }
        Param::Jaxprs(bs) if !bs.is_empty() => {
            let mut bs = bs.as_ref().clone();
            let i = u.int_in_range(0..=bs.len() - 1)?;
            match drop_last_input(&bs[i]) {
                Some(d) => bs[i] = d,
                None => {
                    bs.remove(i);
                }
            }
            Param::Jaxprs(Arc::new(bs))
        }
        Param::Bools(v) => {
            let mut v = v.to_vec();
            v.push(false);
            Param::Bools(v.into())
        }
        _ => return Ok(None),
    }))
}

/// `cj` without its last input (uses of it become a literal of its dtype); `None` when
/// it has no input or the result does not build.
fn drop_last_input(cj: &ClosedJaxpr) -> Option<ClosedJaxpr> {
    let j = cj.jaxpr();
    let last = *j.invars().last()?;
    let t = j.var_aval(last).clone();
    // Replace it by a constvar of the same type: the signature loses the input.
    let mut b = JaxprBuilder::new();
    let mut map: Vec<Option<Atom>> = vec![None; j.num_vars()];
    for &v in j.constvars() {
        map[v.index()] = Some(Atom::Var(b.add_constvar(j.var_aval(v).clone())));
    }
    map[last.index()] = Some(Atom::Var(b.add_constvar(t)));
    for &v in &j.invars()[..j.invars().len() - 1] {
        map[v.index()] = Some(Atom::Var(b.add_invar(j.var_aval(v).clone())));
    }
    let lits: Vec<Atom> = j.literals().iter().map(|l| b.literal(*l)).collect();
    let atom = |map: &[Option<Atom>], a: Atom| match a {
        Atom::Var(v) => map.get(v.index()).copied().flatten(),
        Atom::Lit(l) => lits.get(l.index()).copied(),
    };
    for e in j.eqns() {
        let ins: Option<Vec<Atom>> = e.inputs().iter().map(|&a| atom(&map, a)).collect();
        let outs: Vec<VarId> = e
            .outvars()
            .iter()
            .map(|&v| b.new_var(j.var_aval(v).clone()))
            .collect();
        for (&o, &n) in e.outvars().iter().zip(&outs) {
            map[o.index()] = Some(Atom::Var(n));
        }
        b.add_eqn_with_outvars(e.primitive().clone(), ins?, e.params().clone(), outs);
    }
    let outs: Option<Vec<Atom>> = j.outvars().iter().map(|&a| atom(&map, a)).collect();
    let nj = b.build(outs?).ok()?;
    Some(ClosedJaxpr::with_unknown_consts(Arc::new(nj)))
}

fn param_edit(j: &Jaxpr, u: &mut Unstructured<'_>, eqn: usize) -> Result<Option<(Mutation, Edit)>> {
    let e = &j.eqns()[eqn];
    let names: Vec<(String, Param)> = e
        .params()
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    let (name, value) = u.choose(&names)?.clone();
    let Some(new) = other_param(u, &value, j)? else {
        return Ok(None);
    };
    let params = e.params().with(&name, new);
    let ins: Vec<AbstractValue> = e.inputs().iter().map(|&a| j.atom_aval(a)).collect();
    if !rule_disagrees(j, eqn, &ins, &params) {
        return Ok(None);
    }
    Ok(Some((
        Mutation::Param {
            eqn,
            name,
            change: "changed",
        },
        Edit::Params { eqn, params },
    )))
}

/// Copies `j` with the edit applied, declaring every variable, and builds it.
fn rebuild(j: &Jaxpr, edit: &Edit) -> std::result::Result<Jaxpr, TypeError> {
    let (mut b, mut map) = super::builder_with_inputs(j);
    let lits: Vec<Atom> = j.literals().iter().map(|l| b.literal(*l)).collect();
    // Every equation's outputs are declared first (so a moved equation's operands exist).
    let mut outs: Vec<Vec<VarId>> = Vec::with_capacity(j.eqns().len());
    for (i, e) in j.eqns().iter().enumerate() {
        let mut o = Vec::with_capacity(e.outvars().len());
        for (k, &v) in e.outvars().iter().enumerate() {
            let nv = match edit {
                Edit::OutAval { eqn, out, aval } if *eqn == i && *out == k => {
                    b.new_var(aval.clone())
                }
                Edit::Rebind { eqn, var } if *eqn == i && k == 0 => {
                    map[var.index()].unwrap_or_else(|| b.new_var(j.var_aval(v).clone()))
                }
                _ => b.new_var(j.var_aval(v).clone()),
            };
            if map[v.index()].is_none() {
                map[v.index()] = Some(nv);
            }
            o.push(nv);
        }
        outs.push(o);
    }
    let atom = |b: &mut JaxprBuilder, a: Atom| -> Atom {
        match a {
            Atom::Var(v) => Atom::Var(map[v.index()].unwrap_or(v)),
            Atom::Lit(l) => lits.get(l.index()).copied().unwrap_or_else(|| {
                b.literal(Literal {
                    value: LitValue::Int(0),
                    dtype: DType::I32,
                    weak_type: false,
                })
            }),
        }
    };
    let mut order: Vec<usize> = (0..j.eqns().len()).collect();
    if let Edit::Move { eqn, before } = *edit {
        order.remove(eqn);
        order.insert(before, eqn);
    }
    for i in order {
        let e = &j.eqns()[i];
        let mut ins: Vec<Atom> = e.inputs().iter().map(|&a| atom(&mut b, a)).collect();
        let mut params = e.params().clone();
        match edit {
            Edit::Operand { eqn, operand, with } if *eqn == i => {
                ins[*operand] = match *with {
                    Repl::Var(v) => atom(&mut b, Atom::Var(v)),
                    Repl::Lit(l) => b.literal(l),
                };
            }
            Edit::Params { eqn, params: p } if *eqn == i => params = p.clone(),
            _ => {}
        }
        b.add_eqn_with_outvars(e.primitive().clone(), ins, params, outs[i].clone());
    }
    let outvars: Vec<Atom> = j.outvars().iter().map(|&a| atom(&mut b, a)).collect();
    b.build(outvars)
}
