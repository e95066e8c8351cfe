//! Toposort: order equations so each follows the definitions of its inputs.

use super::rebuild::Rebuilder;
use crate::error::{Site, TypeError};
use crate::jaxpr::{Atom, Eqn, Jaxpr};

const NONE: u32 = u32::MAX;

/// For each variable, the equation that binds it (or `NONE`).
fn producers(num_vars: usize, eqns: &[Eqn]) -> Vec<u32> {
    let mut prod = vec![NONE; num_vars];
    for (i, e) in eqns.iter().enumerate() {
        for &v in e.outvars.iter() {
            if let Some(slot) = prod.get_mut(v.index()) {
                *slot = i as u32;
            }
        }
    }
    prod
}

/// Depth-first post-order over the equations reachable from `roots` (equation indices,
/// visited in the order given): each equation comes after the producers of its inputs.
/// Iterative; a cycle is reported at an equation on it.
pub(crate) fn dfs_order(
    eqns: &[Eqn],
    prod: &[u32],
    roots: impl Iterator<Item = usize>,
    out: &mut Vec<usize>,
    state: &mut [u8],
) -> Result<(), usize> {
    // state: 0 unvisited, 1 on the stack, 2 done.
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for root in roots {
        if state[root] != 0 {
            continue;
        }
        state[root] = 1;
        stack.push((root, 0));
        while let Some(top) = stack.last_mut() {
            let (e, next) = *top;
            let inputs = &eqns[e].inputs;
            if next < inputs.len() {
                top.1 += 1;
                if let Atom::Var(v) = inputs[next] {
                    let p = prod.get(v.index()).copied().unwrap_or(NONE);
                    if p != NONE {
                        let p = p as usize;
                        match state[p] {
                            0 => {
                                state[p] = 1;
                                stack.push((p, 0));
                            }
                            1 => return Err(p),
                            _ => {}
                        }
                    }
                }
            } else {
                state[e] = 2;
                out.push(e);
                stack.pop();
            }
        }
    }
    Ok(())
}

/// An order of `eqns` in which each follows its inputs' producers, as close to the given
/// order as possible (an order that already is one is returned unchanged).
pub(crate) fn insertion_order(
    num_vars: usize,
    eqns: &[Eqn],
    site: impl Fn(usize) -> Site,
) -> Result<Vec<usize>, TypeError> {
    let prod = producers(num_vars, eqns);
    let mut out = Vec::with_capacity(eqns.len());
    let mut state = vec![0u8; eqns.len()];
    dfs_order(eqns, &prod, 0..eqns.len(), &mut out, &mut state)
        .map_err(|e| TypeError::Cycle { site: site(e) })?;
    Ok(out)
}

/// Reorders a jaxpr's equations by demand: first the effectful equations (see
/// [`Eqn::has_effect`]) in their order, then depth-first from the outputs (in output
/// order), each equation placed right after the producers of its inputs; equations no
/// output needs keep their relative order at the end. The result is a valid ordering of
/// the same equations (a canonical schedule, useful after rewrites) in which effectful
/// equations keep their relative order.
///
/// ```
/// use ferrax_ir::{passes::toposort, text::parse_jaxpr};
/// // `d` does not feed the output: it moves after the equations the output needs.
/// let j = parse_jaxpr("{ lambda ; a:f32[]. let d:f32[] = cos a; b:f32[] = sin a; c:f32[] = exp b in (c,) }")?;
/// let sorted = toposort(&j);
/// let names: Vec<&str> = sorted.eqns().iter().map(|e| e.primitive().name()).collect();
/// assert_eq!(names, ["sin", "exp", "cos"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn toposort(jaxpr: &Jaxpr) -> Jaxpr {
    let eqns = jaxpr.eqns();
    let prod = producers(jaxpr.num_vars(), eqns);
    let effects = eqns
        .iter()
        .enumerate()
        .filter(|(_, e)| e.has_effect())
        .map(|(i, _)| i);
    let outputs = jaxpr.outvars().iter().filter_map(|a| match a {
        Atom::Var(v) => {
            let p = prod[v.index()];
            (p != NONE).then_some(p as usize)
        }
        Atom::Lit(_) => None,
    });
    let roots = effects.chain(outputs);
    let mut order = Vec::with_capacity(eqns.len());
    let mut state = vec![0u8; eqns.len()];
    // A built jaxpr has no cycle, so this cannot fail; fall back to the given order.
    if dfs_order(eqns, &prod, roots, &mut order, &mut state).is_err() {
        order.clear();
        state.iter_mut().for_each(|s| *s = 0);
    }
    for (i, s) in state.iter().enumerate() {
        if *s == 0 {
            order.push(i);
        }
    }
    let mut rb = Rebuilder::new(jaxpr);
    for &v in jaxpr.constvars() {
        rb.constvar(v);
    }
    for &v in jaxpr.invars() {
        rb.invar(v);
    }
    for &i in &order {
        rb.eqn(&eqns[i]);
    }
    rb.finish(jaxpr.outvars().iter().copied())
}
