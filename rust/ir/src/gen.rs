//! Generators of jaxprs of known shape, for benchmarks, tests and fuzzers.

use crate::aval::{AbstractValue, Shape};
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::jaxpr::{Atom, ClosedJaxpr, Jaxpr, LitValue, Literal};
use crate::params::{Param, Params};
use crate::primitive::Builtin;
use std::sync::Arc;

fn vector(size: i64) -> AbstractValue {
    AbstractValue::new(Shape::new(&[size]).unwrap_or_default(), DType::F32)
}

/// BENCH.md's chain program over `x: f32[size]`: `steps` times `x = sin(x) * 1.5 + x`,
/// then `reduce_sum(x)`: `3 * steps + 1` equations.
pub fn chain(steps: usize, size: i64) -> Jaxpr {
    let mut b = JaxprBuilder::new();
    let mut x = b.add_invar(vector(size));
    let apply = |b: &mut JaxprBuilder, p: Builtin, ins: Vec<Atom>, params: Params| {
        b.add_eqn(p.into(), ins, params)
            .map(|outs| outs[0])
            .expect("chain equations are well typed")
    };
    for _ in 0..steps {
        let s = apply(&mut b, Builtin::Sin, vec![Atom::Var(x)], Params::empty());
        let c = b.literal(Literal {
            value: LitValue::Float(1.5),
            dtype: DType::F32,
            weak_type: false,
        });
        let m = apply(&mut b, Builtin::Mul, vec![Atom::Var(s), c], Params::empty());
        x = apply(&mut b, Builtin::Add, vec![Atom::Var(m), Atom::Var(x)], Params::empty());
    }
    let axes = Params::new([("axes", Param::ints(&[0]))]);
    let out = apply(&mut b, Builtin::ReduceSum, vec![Atom::Var(x)], axes);
    b.build(vec![Atom::Var(out)])
        .expect("the chain is well typed")
}

/// `depth` nested `jit` equations over `x: f32[3]`: each level applies `sin` and then calls
/// the level below it.
pub fn nested_jits(depth: usize) -> ClosedJaxpr {
    let mut inner: Option<ClosedJaxpr> = None;
    for _ in 0..depth.max(1) {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(vector(3));
        let mut y = b
            .add_eqn(Builtin::Sin.into(), vec![Atom::Var(x)], Params::empty())
            .expect("sin of f32[3]")[0];
        if let Some(j) = inner.take() {
            let params = Params::new([
                ("jaxpr", Param::Jaxpr(j)),
                ("name", Param::Str("f".into())),
            ]);
            y = b
                .add_eqn(Builtin::Jit.into(), vec![Atom::Var(y)], params)
                .expect("the nested jaxpr takes f32[3]")[0];
        }
        let j = b.build(vec![Atom::Var(y)]).expect("well typed");
        inner = Some(ClosedJaxpr::with_unknown_consts(Arc::new(j)));
    }
    inner.unwrap_or_else(|| unreachable!("depth.max(1) >= 1"))
}
