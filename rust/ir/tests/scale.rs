//! The sizes the IR promises to handle, on the default 2 MiB test-thread stack: a chain of
//! 10^6 equations and a nest of 100,000 sub-jaxprs each go through typecheck, print,
//! parse and DCE (and are dropped) without overflowing the stack.

use ferrax_ir::generate::{chain, nested_jits};
use ferrax_ir::passes::dce;
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::typecheck;

#[test]
fn a_million_equation_chain() {
    let j = chain(333_333, 4).unwrap();
    assert_eq!(j.eqns().len(), 1_000_000);
    typecheck(&j).unwrap();
    let text = print_jaxpr(&j);
    let back = parse_jaxpr(&text).unwrap();
    assert_eq!(back.eqns().len(), j.eqns().len());
    let (d, used) = dce(&back, &[true]).unwrap();
    assert_eq!(used, vec![true]);
    assert_eq!(d.eqns().len(), 1_000_000);
}

#[test]
fn a_hundred_thousand_nested_jaxprs() {
    let j = nested_jits(100_000).unwrap();
    typecheck(j.jaxpr()).unwrap();
    let text = print_jaxpr(j.jaxpr());
    let back = parse_jaxpr(&text).unwrap();
    typecheck(&back).unwrap();
    assert_eq!(print_jaxpr(&back), text);
    let (d, _) = dce(&back, &[true]).unwrap();
    assert_eq!(d.eqns().len(), 2);
}
