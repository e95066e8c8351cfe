//! Dead-code elimination.
//!
//! Walks the equations backwards keeping those a used output depends on, and those with
//! an effect (see [`Eqn::has_effect`]), which are never dropped. Higher-order
//! equations are pruned inside: a `jit`'s (or `remat2`'s, or `shard_map`'s, whose specs
//! follow) jaxpr loses the outputs nobody
//! uses (`custom_jvp_call` and `custom_vjp_call` are kept whole), `cond`
//! branches lose them too (and keep the union of the inputs any branch needs), `while` and
//! `scan` drop carried values that neither a used output nor the loop condition depends on
//! (found by iterating to a fixpoint, as the carry feeds itself).
//!
//! Nested jaxprs are handled with an explicit stack of frames, one per jaxpr being
//! pruned: a frame that meets a higher-order equation asks for its sub-jaxpr to be pruned
//! and resumes with the result, so nesting depth costs heap, not stack.
//!
//! Results are memoized per sub-jaxpr (by identity) and set of used outputs: a sub-jaxpr
//! held many times (JAX's shared jaxprs, a function called twice at each of k levels) is
//! pruned once per distinct use, so the work is linear in the size of the DAG, and the
//! pruned jaxprs are shared as the originals were.

use super::rebuild::Rebuilder;
use super::PassError;
use crate::aval::AbstractValue;
use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, VarId};
use crate::params::{Param, Params};
use crate::primitive::Builtin;
use std::collections::HashMap;
use std::sync::Arc;

/// Removes the equations no used output depends on, the unused outputs and the unused
/// inputs. `used_outputs` has one flag per output; returns the new jaxpr (its inputs are
/// the used ones, its outputs the used ones; constvars are all kept) and one flag per
/// original input.
///
/// ```
/// use ferrax_ir::{passes::dce, text::parse_jaxpr};
/// let j = parse_jaxpr(
///     "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = sin a; d:f32[3] = cos b in (c, d) }",
/// )?;
/// let (only_c, used_inputs) = dce(&j, &[true, false])?;
/// assert_eq!(only_c.to_string(), "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }");
/// assert_eq!(used_inputs, [true, false]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn dce(jaxpr: &Jaxpr, used_outputs: &[bool]) -> Result<(Jaxpr, Vec<bool>), PassError> {
    if used_outputs.len() != jaxpr.outvars().len() {
        return Err(PassError::FlagCount {
            what: "used_outputs",
            expected: jaxpr.outvars().len(),
            got: used_outputs.len(),
        });
    }
    let mut stack: Vec<Frame<'_>> = vec![Frame::new(jaxpr, used_outputs.to_vec())];
    let mut child: Option<Pruned> = None;
    // Pruned sub-jaxprs, by the source's address and the used outputs asked for.
    let mut memo: HashMap<(*const Jaxpr, Vec<bool>), Pruned> = HashMap::new();
    loop {
        let Some(top) = stack.last_mut() else {
            unreachable!("the stack holds the top frame until it returns");
        };
        match top.step(child.take()) {
            Step::Need(sub, used) => {
                let key = (sub as *const Jaxpr, used);
                if let Some(done) = memo.get(&key) {
                    child = Some(done.clone());
                } else {
                    stack.push(Frame::new(sub, key.1));
                }
            }
            Step::Done((pruned, used_in)) => {
                let Some(frame) = stack.pop() else {
                    unreachable!("the stack holds the frame that returned");
                };
                if stack.is_empty() {
                    return Ok((pruned, used_in));
                }
                let result: Pruned = (Arc::new(pruned), used_in);
                memo.insert(
                    (frame.src as *const Jaxpr, frame.used_outputs),
                    result.clone(),
                );
                child = Some(result);
            }
        }
    }
}

/// A pruned sub-jaxpr and, per original input, whether it is still an input.
type Pruned = (Arc<Jaxpr>, Vec<bool>);

enum Step<'a> {
    /// Prune this sub-jaxpr for these used outputs, then resume me with the result.
    Need(&'a Jaxpr, Vec<bool>),
    /// This frame's result.
    Done((Jaxpr, Vec<bool>)),
}

/// A kept equation: as it was, or rewritten (inputs, outputs and params of the source;
/// boxed, so that the common case stays small).
enum Kept {
    Same(usize),
    New(Box<NewEqn>),
}

/// A kept equation rewritten: its source equation, and its new inputs, outputs and
/// params (all of the source).
struct NewEqn {
    eqn: usize,
    inputs: Vec<Atom>,
    outvars: Vec<VarId>,
    params: Params,
}

impl Kept {
    fn new(eqn: usize, inputs: Vec<Atom>, outvars: Vec<VarId>, params: Params) -> Kept {
        Kept::New(Box::new(NewEqn {
            eqn,
            inputs,
            outvars,
            params,
        }))
    }
}

/// A higher-order equation part-way through being pruned.
enum Pending {
    Jit {
        eqn: usize,
        used_outs: Vec<bool>,
    },
    Cond {
        eqn: usize,
        used_outs: Vec<bool>,
        done: Vec<Pruned>,
    },
    While {
        eqn: usize,
        used_carry: Vec<bool>,
        cond: Option<Pruned>,
    },
    Scan {
        eqn: usize,
        used_carry: Vec<bool>,
        used_ys: Vec<bool>,
    },
}

enum Progress<'a> {
    Need(Pending, &'a Jaxpr, Vec<bool>),
    Finished(Kept),
}

struct Frame<'a> {
    src: &'a Jaxpr,
    used_outputs: Vec<bool>,
    live: Vec<bool>,
    pos: usize,
    kept: Vec<Kept>,
    pending: Option<Pending>,
}

fn filter<T: Copy>(items: &[T], keep: &[bool]) -> Vec<T> {
    items
        .iter()
        .zip(keep)
        .filter(|(_, &k)| k)
        .map(|(&x, _)| x)
        .collect()
}

fn count(flags: &[bool]) -> i64 {
    flags.iter().filter(|&&f| f).count() as i64
}

fn or(a: &[bool], b: &[bool]) -> Vec<bool> {
    a.iter().zip(b).map(|(&x, &y)| x || y).collect()
}

fn sub_jaxpr<'a>(e: &'a Eqn, name: &str) -> Option<&'a ClosedJaxpr> {
    match e.params.get(name) {
        Some(Param::Jaxpr(cj)) => Some(cj),
        _ => None,
    }
}

fn int_param(e: &Eqn, name: &str) -> usize {
    match e.params.get(name) {
        Some(Param::Int(n)) => usize::try_from(*n).unwrap_or(0),
        _ => 0,
    }
}

/// Closes a pruned jaxpr over the constants of the one it came from (constvars are kept).
fn reclose(pruned: Arc<Jaxpr>, like: &ClosedJaxpr) -> ClosedJaxpr {
    ClosedJaxpr::from_parts(pruned, like.consts().to_vec())
}

/// Gives a pruned jaxpr back some inputs: `had` says which original inputs it kept, `want`
/// which it must take (a superset); the others come back as unused inputs.
pub(super) fn widen(pruned: Jaxpr, had: &[bool], want: &[bool], orig: &[AbstractValue]) -> Jaxpr {
    if had == want {
        return pruned;
    }
    rebuild_widened(&pruned, had, want, orig)
}

/// [`widen`] of a shared pruned jaxpr: the same one when nothing changes.
fn widen_arc(
    pruned: Arc<Jaxpr>,
    had: &[bool],
    want: &[bool],
    orig: &[AbstractValue],
) -> Arc<Jaxpr> {
    if had == want {
        return pruned;
    }
    Arc::new(rebuild_widened(&pruned, had, want, orig))
}

fn rebuild_widened(pruned: &Jaxpr, had: &[bool], want: &[bool], orig: &[AbstractValue]) -> Jaxpr {
    let mut rb = Rebuilder::new(pruned);
    for &v in pruned.constvars() {
        rb.constvar(v);
    }
    let mut next = pruned.invars().iter();
    for (i, (&h, &w)) in had.iter().zip(want).enumerate() {
        if h {
            if let Some(&v) = next.next() {
                if w {
                    rb.invar(v);
                }
            }
        } else if w {
            rb.fresh_invar(orig[i].clone());
        }
    }
    for e in pruned.eqns() {
        rb.eqn(e);
    }
    rb.finish(pruned.outvars().iter().copied())
}

impl<'a> Frame<'a> {
    fn new(src: &'a Jaxpr, used_outputs: Vec<bool>) -> Frame<'a> {
        let mut live = vec![false; src.num_vars()];
        for (a, &u) in src.outvars().iter().zip(&used_outputs) {
            if let (Atom::Var(v), true) = (a, u) {
                live[v.index()] = true;
            }
        }
        Frame {
            src,
            used_outputs,
            live,
            pos: src.eqns().len(),
            // Most equations of a large jaxpr are usually kept.
            kept: Vec::with_capacity(src.eqns().len()),
            pending: None,
        }
    }

    fn step(&mut self, mut child: Option<Pruned>) -> Step<'a> {
        let src = self.src;
        loop {
            if let Some(p) = self.pending.take() {
                match self.advance(p, child.take()) {
                    Progress::Need(p, sub, used) => {
                        self.pending = Some(p);
                        return Step::Need(sub, used);
                    }
                    Progress::Finished(k) => self.keep(k),
                }
            }
            if self.pos == 0 {
                return Step::Done(self.finish());
            }
            self.pos -= 1;
            let i = self.pos;
            let e = &src.eqns()[i];
            let live = &self.live;
            // An effectful equation (a debug callback, or a call or loop holding one) is
            // kept for its effect even when nothing uses its outputs.
            if !e.outvars.iter().any(|v| live[v.index()]) && !e.has_effect() {
                continue;
            }
            let builtin = e.primitive.as_builtin();
            if !matches!(
                builtin,
                Some(
                    Builtin::Jit
                        | Builtin::Remat
                        | Builtin::ShardMap
                        | Builtin::Cond
                        | Builtin::While
                        | Builtin::Scan
                )
            ) {
                self.keep(Kept::Same(i));
                continue;
            }
            let used_outs: Vec<bool> = e.outvars.iter().map(|v| live[v.index()]).collect();
            self.pending = match builtin {
                // `remat2` is a call like `jit`; `custom_jvp_call` and `custom_vjp_call`
                // are kept whole (their rules see the whole function).
                // A shard_map is pruned as a call; its specs follow its inputs and outputs.
                Some(Builtin::Jit | Builtin::Remat | Builtin::ShardMap)
                    if sub_jaxpr(e, "jaxpr").is_some() =>
                {
                    Some(Pending::Jit { eqn: i, used_outs })
                }
                Some(Builtin::Cond) => Some(Pending::Cond {
                    eqn: i,
                    used_outs,
                    done: Vec::new(),
                }),
                Some(Builtin::While) => Some(Pending::While {
                    eqn: i,
                    used_carry: used_outs,
                    cond: None,
                }),
                Some(Builtin::Scan) => {
                    let ncarry = int_param(e, "num_carry");
                    Some(Pending::Scan {
                        eqn: i,
                        used_carry: used_outs[..ncarry].to_vec(),
                        used_ys: used_outs[ncarry..].to_vec(),
                    })
                }
                _ => {
                    self.keep(Kept::Same(i));
                    None
                }
            };
        }
    }

    fn keep(&mut self, k: Kept) {
        let src = self.src;
        let inputs: &[Atom] = match &k {
            Kept::Same(i) => &src.eqns()[*i].inputs,
            Kept::New(n) => &n.inputs,
        };
        for a in inputs {
            if let Atom::Var(v) = a {
                self.live[v.index()] = true;
            }
        }
        self.kept.push(k);
    }

    fn advance(&self, p: Pending, child: Option<Pruned>) -> Progress<'a> {
        let src = self.src;
        match p {
            Pending::Jit { eqn, used_outs } => {
                let e = &src.eqns()[eqn];
                let Some(inner) = sub_jaxpr(e, "jaxpr") else {
                    return Progress::Finished(Kept::Same(eqn));
                };
                match child {
                    None => Progress::Need(
                        Pending::Jit {
                            eqn,
                            used_outs: used_outs.clone(),
                        },
                        inner.jaxpr(),
                        used_outs,
                    ),
                    Some((pruned, used_in)) => {
                        let mut params =
                            e.params.with("jaxpr", Param::Jaxpr(reclose(pruned, inner)));
                        for (name, used) in [("in_specs", &used_in), ("out_specs", &used_outs)] {
                            if let Some(Param::Specs(specs)) = e.params.get(name) {
                                let kept: Vec<_> = specs
                                    .iter()
                                    .zip(used.iter())
                                    .filter(|(_, &u)| u)
                                    .map(|(sp, _)| sp.clone())
                                    .collect();
                                params = params.with(name, Param::Specs(kept.into()));
                            }
                        }
                        Progress::Finished(Kept::new(
                            eqn,
                            filter(&e.inputs, &used_in),
                            filter(&e.outvars, &used_outs),
                            params,
                        ))
                    }
                }
            }
            Pending::Cond {
                eqn,
                used_outs,
                mut done,
            } => {
                let e = &src.eqns()[eqn];
                let branches: &[ClosedJaxpr] = match e.params.get("branches") {
                    Some(Param::Jaxprs(b)) => b,
                    _ => return Progress::Finished(Kept::Same(eqn)),
                };
                if let Some(r) = child {
                    done.push(r);
                }
                if done.len() < branches.len() {
                    let next = branches[done.len()].jaxpr();
                    let used = used_outs.clone();
                    return Progress::Need(
                        Pending::Cond {
                            eqn,
                            used_outs,
                            done,
                        },
                        next,
                        used,
                    );
                }
                let nops = e.inputs.len() - 1;
                let union = done
                    .iter()
                    .fold(vec![false; nops], |acc, (_, used)| or(&acc, used));
                let new_branches: Vec<ClosedJaxpr> = done
                    .into_iter()
                    .zip(branches)
                    .map(|((pruned, used), b)| {
                        reclose(widen_arc(pruned, &used, &union, &b.in_avals()), b)
                    })
                    .collect();
                let mut keep_in = vec![true];
                keep_in.extend_from_slice(&union);
                Progress::Finished(Kept::new(
                    eqn,
                    filter(&e.inputs, &keep_in),
                    filter(&e.outvars, &used_outs),
                    e.params
                        .with("branches", Param::Jaxprs(Arc::new(new_branches))),
                ))
            }
            Pending::While {
                eqn,
                used_carry,
                cond,
            } => self.advance_while(eqn, used_carry, cond, child),
            Pending::Scan {
                eqn,
                used_carry,
                used_ys,
            } => self.advance_scan(eqn, used_carry, used_ys, child),
        }
    }

    fn advance_while(
        &self,
        eqn: usize,
        mut used_carry: Vec<bool>,
        cond: Option<Pruned>,
        child: Option<Pruned>,
    ) -> Progress<'a> {
        let e = &self.src.eqns()[eqn];
        let (Some(cond_j), Some(body_j)) = (sub_jaxpr(e, "cond_jaxpr"), sub_jaxpr(e, "body_jaxpr"))
        else {
            return Progress::Finished(Kept::Same(eqn));
        };
        let cn = int_param(e, "cond_nconsts");
        let bn = int_param(e, "body_nconsts");
        let Some(cond) = cond else {
            // First prune the condition: every carried value it reads is needed.
            return match child {
                None => Progress::Need(
                    Pending::While {
                        eqn,
                        used_carry,
                        cond: None,
                    },
                    cond_j.jaxpr(),
                    vec![true],
                ),
                Some(c) => {
                    let used_carry = or(&used_carry, &c.1[cn..]);
                    let used = used_carry.clone();
                    Progress::Need(
                        Pending::While {
                            eqn,
                            used_carry,
                            cond: Some(c),
                        },
                        body_j.jaxpr(),
                        used,
                    )
                }
            };
        };
        let Some((body, body_used)) = child else {
            let used = used_carry.clone();
            return Progress::Need(
                Pending::While {
                    eqn,
                    used_carry,
                    cond: Some(cond),
                },
                body_j.jaxpr(),
                used,
            );
        };
        let grown = or(&used_carry, &body_used[bn..]);
        if grown != used_carry {
            used_carry = grown;
            let used = used_carry.clone();
            return Progress::Need(
                Pending::While {
                    eqn,
                    used_carry,
                    cond: Some(cond),
                },
                body_j.jaxpr(),
                used,
            );
        }
        let (cond_pruned, cond_used) = cond;
        let mut cond_want = cond_used[..cn].to_vec();
        cond_want.extend_from_slice(&used_carry);
        let mut body_want = body_used[..bn].to_vec();
        body_want.extend_from_slice(&used_carry);
        let new_cond = widen_arc(cond_pruned, &cond_used, &cond_want, &cond_j.in_avals());
        let new_body = widen_arc(body, &body_used, &body_want, &body_j.in_avals());
        let mut keep_in = cond_used[..cn].to_vec();
        keep_in.extend_from_slice(&body_used[..bn]);
        keep_in.extend_from_slice(&used_carry);
        let params = Params::new([
            ("cond_jaxpr", Param::Jaxpr(reclose(new_cond, cond_j))),
            ("body_jaxpr", Param::Jaxpr(reclose(new_body, body_j))),
            ("cond_nconsts", Param::Int(count(&cond_used[..cn]))),
            ("body_nconsts", Param::Int(count(&body_used[..bn]))),
        ]);
        Progress::Finished(Kept::new(
            eqn,
            filter(&e.inputs, &keep_in),
            filter(&e.outvars, &used_carry),
            params,
        ))
    }

    fn advance_scan(
        &self,
        eqn: usize,
        used_carry: Vec<bool>,
        used_ys: Vec<bool>,
        child: Option<Pruned>,
    ) -> Progress<'a> {
        let e = &self.src.eqns()[eqn];
        let Some(body_j) = sub_jaxpr(e, "jaxpr") else {
            return Progress::Finished(Kept::Same(eqn));
        };
        let nc = int_param(e, "num_consts");
        let ncarry = used_carry.len();
        let outs_wanted =
            |carry: &[bool]| -> Vec<bool> { carry.iter().chain(&used_ys).copied().collect() };
        let Some((body, body_used)) = child else {
            let used = outs_wanted(&used_carry);
            return Progress::Need(
                Pending::Scan {
                    eqn,
                    used_carry,
                    used_ys,
                },
                body_j.jaxpr(),
                used,
            );
        };
        let grown = or(&used_carry, &body_used[nc..nc + ncarry]);
        if grown != used_carry {
            let used = outs_wanted(&grown);
            return Progress::Need(
                Pending::Scan {
                    eqn,
                    used_carry: grown,
                    used_ys,
                },
                body_j.jaxpr(),
                used,
            );
        }
        let mut keep_in = body_used[..nc].to_vec();
        keep_in.extend_from_slice(&used_carry);
        keep_in.extend_from_slice(&body_used[nc + ncarry..]);
        let new_body = widen_arc(body, &body_used, &keep_in, &body_j.in_avals());
        let mut params = e
            .params
            .with("jaxpr", Param::Jaxpr(reclose(new_body, body_j)))
            .with("num_consts", Param::Int(count(&body_used[..nc])))
            .with("num_carry", Param::Int(count(&used_carry)));
        if let Some(Param::Bools(lin)) = e.params.get("linear") {
            params = params.with("linear", Param::Bools(filter(lin, &keep_in).into()));
        }
        Progress::Finished(Kept::new(
            eqn,
            filter(&e.inputs, &keep_in),
            filter(&e.outvars, &outs_wanted(&used_carry)),
            params,
        ))
    }

    fn finish(&mut self) -> (Jaxpr, Vec<bool>) {
        let src = self.src;
        let used_inputs: Vec<bool> = src.invars().iter().map(|v| self.live[v.index()]).collect();
        let mut rb = Rebuilder::new(src);
        for &v in src.constvars() {
            rb.constvar(v);
        }
        for (&v, &u) in src.invars().iter().zip(&used_inputs) {
            if u {
                rb.invar(v);
            }
        }
        for k in std::mem::take(&mut self.kept).into_iter().rev() {
            match k {
                Kept::Same(i) => rb.eqn(&src.eqns()[i]),
                Kept::New(n) => {
                    let NewEqn {
                        eqn,
                        inputs,
                        outvars,
                        params,
                    } = *n;
                    rb.eqn_with(
                        &src.eqns()[eqn],
                        inputs.into_iter(),
                        outvars.into_iter(),
                        params,
                    );
                }
            }
        }
        let outs = filter(src.outvars(), &self.used_outputs);
        (rb.finish(outs.into_iter()), used_inputs)
    }
}
