//! The typechecker. It checks in two steps per equation, as the crate docs describe:
//! first that every id is in range and every variable bound once and before use, then that
//! the primitive's rule accepts the operand types and params and gives the declared
//! output types.

use crate::aval::AbstractValue;
use crate::error::{Site, TypeError};
use crate::jaxpr::{
    join_avals, write_params_short, Atom, AvalId, ClosedJaxpr, Eqn, Jaxpr, Literal, VarId,
};
use crate::params::Param;
use crate::primitive::{Builtin, Primitive, RuleError};
use crate::sharding::AxisEnv;
use crate::text::format_literal;
use std::collections::HashSet;
use std::sync::Arc;

/// The pieces of a jaxpr, before or after it is built.
pub(crate) struct Parts<'a> {
    pub avals: &'a [AbstractValue],
    pub var_avals: &'a [AvalId],
    pub literals: &'a [Literal],
    pub constvars: &'a [VarId],
    pub invars: &'a [VarId],
    pub eqns: &'a [Eqn],
    pub outvars: &'a [Atom],
    jaxpr: &'a Jaxpr,
}

impl<'a> Parts<'a> {
    pub fn of(j: &'a Jaxpr) -> Parts<'a> {
        Parts {
            avals: &j.avals,
            var_avals: &j.var_avals,
            literals: &j.literals,
            constvars: &j.constvars,
            invars: &j.invars,
            eqns: &j.eqns,
            outvars: &j.outvars,
            jaxpr: j,
        }
    }

    fn aval(&self, v: VarId) -> &AbstractValue {
        &self.avals[self.var_avals[v.index()].index()]
    }

    /// Names for the error messages: those of the printed text (`_` for an output
    /// nothing uses), so a name in a message is the name in `print_jaxpr`'s text;
    /// anything the text does not name by its id.
    fn names(&self) -> Vec<Option<String>> {
        crate::text::printed_names(self.jaxpr)
    }

    fn var_name(&self, names: &[Option<String>], v: VarId) -> String {
        names
            .get(v.index())
            .and_then(|n| n.clone())
            .unwrap_or_else(|| format!("{v}"))
    }

    /// One equation printed on a line, nested jaxprs shown as `{...}`.
    pub(crate) fn eqn_line(&self, index: usize) -> String {
        let names = self.names();
        let e = &self.eqns[index];
        let mut s = String::new();
        for (i, &v) in e.outvars.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(&self.var_name(&names, v));
            if v.index() < self.var_avals.len() {
                s.push(':');
                s.push_str(&self.aval(v).to_string());
            }
        }
        s.push_str(" = ");
        s.push_str(e.primitive.name());
        // Writing to a `String` cannot fail.
        let _ = write_params_short(&mut s, &e.params);
        for &a in e.inputs.iter() {
            s.push(' ');
            match a {
                Atom::Var(v) => s.push_str(&self.var_name(&names, v)),
                Atom::Lit(l) => match self.literals.get(l.index()) {
                    Some(lit) => s.push_str(&format_literal(lit)),
                    None => s.push_str(&format!("{l}")),
                },
            }
        }
        s
    }

    fn site(&self, index: usize) -> Site {
        Site::Eqn {
            index,
            line: self.eqn_line(index),
        }
    }
}

/// Checks one level of a jaxpr where the axes of `env` are in scope.
pub(crate) fn check_parts_in(p: &Parts<'_>, env: &AxisEnv) -> Result<(), TypeError> {
    let num_vars = p.var_avals.len();
    let mut bound = vec![false; num_vars];
    let name_of = |v: VarId| p.var_name(&p.names(), v);

    for &v in p.constvars.iter().chain(p.invars) {
        let Some(slot) = bound.get_mut(v.index()) else {
            return Err(TypeError::VarOutOfRange {
                site: Site::Binders,
                var: v.index() as u32,
                num_vars,
            });
        };
        if *slot {
            return Err(TypeError::DoubleBinding {
                site: Site::Binders,
                var: name_of(v),
            });
        }
        *slot = true;
    }

    let mut in_avals: Vec<AbstractValue> = Vec::new();
    for (i, e) in p.eqns.iter().enumerate() {
        // Step 1: ids and binding.
        in_avals.clear();
        for &a in e.inputs.iter() {
            match a {
                Atom::Var(v) => match bound.get(v.index()) {
                    None => {
                        return Err(TypeError::VarOutOfRange {
                            site: p.site(i),
                            var: v.index() as u32,
                            num_vars,
                        })
                    }
                    Some(false) => {
                        return Err(TypeError::Unbound {
                            site: p.site(i),
                            var: name_of(v),
                        })
                    }
                    Some(true) => in_avals.push(p.aval(v).clone()),
                },
                Atom::Lit(l) => match p.literals.get(l.index()) {
                    None => {
                        return Err(TypeError::LiteralOutOfRange {
                            site: p.site(i),
                            lit: l.index() as u32,
                        })
                    }
                    Some(lit) => {
                        if !lit.is_well_typed() {
                            return Err(TypeError::BadLiteral {
                                site: p.site(i),
                                literal: format_literal(lit),
                            });
                        }
                        in_avals.push(lit.aval());
                    }
                },
            }
        }
        for &v in e.outvars.iter() {
            if v.index() >= num_vars {
                return Err(TypeError::VarOutOfRange {
                    site: p.site(i),
                    var: v.index() as u32,
                    num_vars,
                });
            }
        }
        // Step 2: types.
        let inferred = match e.primitive.abstract_eval_in(&in_avals, &e.params, env) {
            Ok(t) => t,
            // An open environment does not know the axis: trust the declared types.
            Err(RuleError::AxisSizeUnknown { .. }) if env.is_open() => {
                e.outvars.iter().map(|&v| p.aval(v).clone()).collect()
            }
            Err(error) => {
                return Err(TypeError::Rule {
                    site: p.site(i),
                    primitive: e.primitive.name().to_owned(),
                    error,
                })
            }
        };
        let matches = inferred.len() == e.outvars.len()
            && inferred
                .iter()
                .zip(e.outvars.iter())
                .all(|(t, &v)| t.same_type(p.aval(v)));
        if !matches {
            return Err(TypeError::OutTypes {
                site: p.site(i),
                declared: e.outvars.iter().map(|&v| p.aval(v).clone()).collect(),
                inferred,
            });
        }
        for &v in e.outvars.iter() {
            if bound[v.index()] {
                return Err(TypeError::DoubleBinding {
                    site: p.site(i),
                    var: name_of(v),
                });
            }
            bound[v.index()] = true;
        }
    }

    for &a in p.outvars {
        match a {
            Atom::Var(v) => match bound.get(v.index()) {
                None => {
                    return Err(TypeError::VarOutOfRange {
                        site: Site::Outputs,
                        var: v.index() as u32,
                        num_vars,
                    })
                }
                Some(false) => {
                    return Err(TypeError::Unbound {
                        site: Site::Outputs,
                        var: name_of(v),
                    })
                }
                Some(true) => {}
            },
            Atom::Lit(l) => match p.literals.get(l.index()) {
                None => {
                    return Err(TypeError::LiteralOutOfRange {
                        site: Site::Outputs,
                        lit: l.index() as u32,
                    })
                }
                Some(lit) if !lit.is_well_typed() => {
                    return Err(TypeError::BadLiteral {
                        site: Site::Outputs,
                        literal: format_literal(lit),
                    })
                }
                Some(_) => {}
            },
        }
    }
    Ok(())
}

/// A jaxpr's type: what it takes (its constants, then its inputs) and what it returns.
///
/// # Examples
/// ```
/// use ferrax_ir::{text::parse_jaxpr, typecheck, AbstractValue, DType};
/// let j = parse_jaxpr("{ lambda a:f32[2]; b:i32[]. let c:f32[2] = mul a 2.0:f32[] in (c, b) }")?;
/// let t = typecheck(&j)?;
/// assert_eq!(t.const_avals, [AbstractValue::array(DType::F32, &[2])?]);
/// assert_eq!(t.in_avals, [AbstractValue::scalar(DType::I32)]);
/// assert_eq!(t.out_avals, j.out_avals());
/// assert_eq!(t.to_string(), "[f32[2]] (i32[],) -> (f32[2], i32[])");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JaxprType {
    /// The constvars' types.
    pub const_avals: Vec<AbstractValue>,
    /// The invars' types.
    pub in_avals: Vec<AbstractValue>,
    /// The outputs' types.
    pub out_avals: Vec<AbstractValue>,
}

/// `(f32[3], i32[]) -> (f32[3],)`, constants first as `[f32[2]] ...` when there are any.
impl std::fmt::Display for JaxprType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |vs: &[AbstractValue]| {
            let comma = if vs.len() == 1 { "," } else { "" };
            format!("({}{comma})", join_avals(vs))
        };
        if !self.const_avals.is_empty() {
            write!(f, "[{}] ", join_avals(&self.const_avals))?;
        }
        write!(f, "{} -> {}", list(&self.in_avals), list(&self.out_avals))
    }
}

/// Typechecks a jaxpr and every jaxpr nested in it (each distinct one once, from a
/// worklist, so depth costs no stack). Returns its type.
///
/// ```
/// use ferrax_ir::{text::parse_jaxpr, typecheck};
/// let j = parse_jaxpr("{ lambda ; a:f32[3] b:i32[]. let c:f32[3] = sin a in (c,) }").unwrap();
/// assert_eq!(typecheck(&j).unwrap().to_string(), "(f32[3], i32[]) -> (f32[3],)");
/// ```
///
/// An error names the equation and its variables as the printed text does (an output
/// nothing uses is `_`); see [`TypeError`].
///
/// No named axis is in scope at the top: a collective must sit in a `shard_map` body
/// (which binds its mesh's axes), else it is an unbound axis name.
pub fn typecheck(jaxpr: &Jaxpr) -> Result<JaxprType, TypeError> {
    typecheck_in(jaxpr, &AxisEnv::closed())
}

/// Typechecks a jaxpr where the axes of `env` are in scope (a `shard_map` body traced
/// on its own: the mesh's axes). [`AxisEnv`] has an example.
pub fn typecheck_in(jaxpr: &Jaxpr, env: &AxisEnv) -> Result<JaxprType, TypeError> {
    struct Frame<'a> {
        parent: Option<usize>,
        holder: &'a Jaxpr,
        eqn: usize,
        param: &'a str,
    }
    let mut frames: Vec<Frame<'_>> = Vec::new();
    let mut seen: HashSet<*const Jaxpr> = HashSet::new();
    let mut work: Vec<(Option<usize>, &Jaxpr, Arc<AxisEnv>)> =
        vec![(None, jaxpr, Arc::new(env.clone()))];
    while let Some((frame, j, env)) = work.pop() {
        if let Err(error) = check_parts_in(&Parts::of(j), &env) {
            let mut err = error;
            let mut at = frame;
            while let Some(f) = at {
                let fr = &frames[f];
                err = TypeError::SubJaxpr {
                    site: Parts::of(fr.holder).site(fr.eqn),
                    param: fr.param.to_owned(),
                    error: Box::new(err),
                };
                at = fr.parent;
            }
            return Err(err);
        }
        for (i, e) in j.eqns.iter().enumerate() {
            // A shard_map's body sees its mesh's axes.
            let body_env = match (&e.primitive, e.params.get("mesh")) {
                (Primitive::Builtin(Builtin::ShardMap), Some(Param::Mesh(m))) => {
                    Some(Arc::new(env.with_mesh(m)))
                }
                _ => None,
            };
            for (name, p) in e.params.iter() {
                let subs: &[ClosedJaxpr] = match p {
                    Param::Jaxpr(cj) => std::slice::from_ref(cj),
                    Param::Jaxprs(cjs) => cjs,
                    _ => continue,
                };
                for sub in subs {
                    if seen.insert(Arc::as_ptr(sub.jaxpr())) {
                        frames.push(Frame {
                            parent: frame,
                            holder: j,
                            eqn: i,
                            param: name,
                        });
                        let sub_env = match (&body_env, name) {
                            (Some(b), "jaxpr") => Arc::clone(b),
                            _ => Arc::clone(&env),
                        };
                        work.push((Some(frames.len() - 1), sub.jaxpr(), sub_env));
                    }
                }
            }
        }
    }
    Ok(JaxprType {
        const_avals: jaxpr.const_avals(),
        in_avals: jaxpr.in_avals(),
        out_avals: jaxpr.out_avals(),
    })
}
