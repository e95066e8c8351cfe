// Shared helpers for building test jaxprs (included with `mod common_build;`).
#![allow(dead_code)]

use ferrax_ir::eval::HostArray;
use ferrax_ir::generate::Rng;
use ferrax_ir::{
    AbstractValue, Atom, Builtin, ClosedJaxpr, DType, Jaxpr, JaxprBuilder, LitValue, Literal,
    Param, Params, Shape, VarId,
};
use std::sync::Arc;

pub fn f32s(dims: &[i64]) -> AbstractValue {
    AbstractValue::new(Shape::new(dims).unwrap(), DType::F32)
}

pub fn i32s(dims: &[i64]) -> AbstractValue {
    AbstractValue::new(Shape::new(dims).unwrap(), DType::I32)
}

pub fn lit_f32(b: &mut JaxprBuilder, x: f64) -> Atom {
    b.literal(Literal {
        value: LitValue::Float(x),
        dtype: DType::F32,
        weak_type: false,
    })
}

pub fn lit_i32(b: &mut JaxprBuilder, x: i64) -> Atom {
    b.literal(Literal {
        value: LitValue::Int(x),
        dtype: DType::I32,
        weak_type: false,
    })
}

pub fn op(b: &mut JaxprBuilder, prim: Builtin, inputs: &[Atom]) -> VarId {
    b.add_eqn(prim.into(), inputs.to_vec(), Params::empty())
        .unwrap()[0]
}

pub fn op_p(b: &mut JaxprBuilder, prim: Builtin, inputs: &[Atom], params: Params) -> Vec<VarId> {
    b.add_eqn(prim.into(), inputs.to_vec(), params).unwrap()
}

pub fn v(x: VarId) -> Atom {
    Atom::Var(x)
}

pub fn close(j: Jaxpr) -> ClosedJaxpr {
    ClosedJaxpr::new(Arc::new(j), vec![]).unwrap()
}

/// BENCH.md's chain: `x = sin(x) * 1.5 + x`, n times, then `sum(x)` (3n+1 equations).
pub fn chain(n: usize, size: i64) -> Jaxpr {
    let mut b = JaxprBuilder::new();
    let mut x = b.add_invar(f32s(&[size]));
    for _ in 0..n {
        let s = op(&mut b, Builtin::Sin, &[v(x)]);
        let c = lit_f32(&mut b, 1.5);
        let m = op(&mut b, Builtin::Mul, &[v(s), c]);
        x = op(&mut b, Builtin::Add, &[v(m), v(x)]);
    }
    let out = op_p(
        &mut b,
        Builtin::ReduceSum,
        &[v(x)],
        Params::new([("axes", Param::ints(&[0]))]),
    )[0];
    b.build(vec![v(out)]).unwrap()
}

/// `depth` nested `jit` equations: each jaxpr applies `sin` and then the next one.
pub fn nested_jits(depth: usize) -> ClosedJaxpr {
    let mut inner: Option<ClosedJaxpr> = None;
    for _ in 0..depth {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(f32s(&[3]));
        let mut y = op(&mut b, Builtin::Sin, &[v(x)]);
        if let Some(j) = inner.take() {
            y = op_p(
                &mut b,
                Builtin::Jit,
                &[v(y)],
                Params::new([("jaxpr", Param::Jaxpr(j)), ("name", Param::Str("f".into()))]),
            )[0];
        }
        inner = Some(close(b.build(vec![v(y)]).unwrap()));
    }
    inner.expect("depth >= 1")
}

/// A random value of a type: bools, small integers (-1 to 3), floats in [-4, 4].
pub fn random_value(a: &AbstractValue, rng: &mut Rng) -> HostArray {
    let n = a.shape.size() as usize;
    match a.dtype {
        DType::Bool => {
            HostArray::from_bool(a.shape.clone(), (0..n).map(|_| rng.chance(0.5)).collect())
                .unwrap()
        }
        d if d.is_int() => HostArray::from_i64(
            a.shape.clone(),
            d,
            (0..n).map(|_| rng.below(5) as i64 - 1).collect(),
        )
        .unwrap(),
        d => HostArray::from_f64(
            a.shape.clone(),
            d,
            (0..n)
                .map(|_| (rng.below(2001) as f64 - 1000.0) / 250.0)
                .collect(),
        )
        .unwrap(),
    }
}
