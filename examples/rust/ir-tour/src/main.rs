//! A tour of `ferrax-ir` as a Rust tool uses it, through its public API only:
//! build an MLP layer and a scan with a cond inside, walk them and count their
//! primitives, transform them (DCE, transpose), print and parse their text, lower them
//! to StableHLO and evaluate them with the reference evaluator.
//!
//! Run it with `cargo run -p ferrax-ir-tour`; it checks what it computes and exits
//! with an error if anything disagrees.

use ferrax_ir::eval::{eval_jaxpr, HostArray};
use ferrax_ir::lower::stablehlo::lower_jaxpr;
use ferrax_ir::passes::{dce, transpose};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{
    typecheck, AbstractValue, Builtin, ClosedJaxpr, DType, Jaxpr, JaxprBuilder, Literal, Param,
    Params, Shape,
};
use std::collections::BTreeMap;
use std::error::Error;
use std::sync::Arc;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

fn f32s(dims: &[i64]) -> Result<AbstractValue> {
    Ok(AbstractValue::array(DType::F32, dims)?)
}

/// `relu(x @ w + b)` and its sum: `x: f32[4,3]`, `w: f32[3,5]`, `b: f32[5]`.
fn mlp_layer() -> Result<Jaxpr> {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[4, 3])?);
    let w = b.add_invar(f32s(&[3, 5])?);
    let bias = b.add_invar(f32s(&[5])?);
    let dot = Params::new([("dimension_numbers", Param::dot_dims(&[1], &[0], &[], &[]))]);
    let h = b.apply(Builtin::DotGeneral, [x, w], dot)?;
    let bcast = Params::new([
        ("shape", Param::ints(&[4, 5])),
        ("broadcast_dimensions", Param::ints(&[1])),
    ]);
    let bias = b.apply(Builtin::BroadcastInDim, [bias], bcast)?;
    let h = b.apply(Builtin::Add, [h, bias], Params::empty())?;
    let zero = b.literal(Literal::f32(0.0).weak());
    let y = b.apply(Builtin::Max, [h.into(), zero], Params::empty())?;
    let sum = Params::new([("axes", Param::ints(&[0, 1]))]);
    let loss = b.apply(Builtin::ReduceSum, [y], sum)?;
    Ok(b.build(vec![y.into(), loss.into()])?)
}

/// A cond branch: `c - x` or `c + x` on scalars.
fn branch(prim: Builtin) -> Result<ClosedJaxpr> {
    let mut b = JaxprBuilder::new();
    let c = b.add_invar(f32s(&[])?);
    let x = b.add_invar(f32s(&[])?);
    let out = b.apply(prim, [c, x], Params::empty())?;
    Ok(ClosedJaxpr::new(
        Arc::new(b.build(vec![out.into()])?),
        vec![],
    )?)
}

/// `scan` over `xs: f32[n]` with carry `c: f32[]`: each step adds `|x|` to the carry
/// through a cond (`x > 0` picks `c + x`, else `c - x`) and emits the new carry.
fn scan_with_cond(n: i64) -> Result<Jaxpr> {
    let mut body = JaxprBuilder::new();
    let c = body.add_invar(f32s(&[])?);
    let x = body.add_invar(f32s(&[])?);
    let zero = body.literal(Literal::f32(0.0).weak());
    let positive = body.apply(Builtin::Gt, [x.into(), zero], Params::empty())?;
    let to_i32 = Params::new([
        ("new_dtype", Param::DType(DType::I32)),
        ("weak_type", Param::Bool(false)),
    ]);
    let index = body.apply(Builtin::ConvertElementType, [positive], to_i32)?;
    let branches = Param::Jaxprs(Arc::new(vec![branch(Builtin::Sub)?, branch(Builtin::Add)?]));
    let next = body.apply(
        Builtin::Cond,
        [index, c, x],
        Params::new([("branches", branches)]),
    )?;
    let body = body.build(vec![next.into(), next.into()])?;

    let mut b = JaxprBuilder::new();
    let init = b.add_invar(f32s(&[])?);
    let xs = b.add_invar(f32s(&[n])?);
    let params = Params::new([
        (
            "jaxpr",
            Param::Jaxpr(ClosedJaxpr::new(Arc::new(body), vec![])?),
        ),
        ("length", Param::Int(n)),
        ("reverse", Param::Bool(false)),
        ("num_consts", Param::Int(0)),
        ("num_carry", Param::Int(1)),
    ]);
    let outs = b.add_eqn(Builtin::Scan.into(), vec![init.into(), xs.into()], params)?;
    Ok(b.build(outs.into_iter().map(Into::into).collect())?)
}

/// How many times each primitive occurs, nested jaxprs included (an explicit stack: no
/// recursion over the nesting depth).
fn count_primitives(j: &Jaxpr) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    let mut stack = vec![j];
    while let Some(j) = stack.pop() {
        for e in j.eqns() {
            *counts.entry(e.primitive().name().to_owned()).or_insert(0) += 1;
            stack.extend(e.sub_jaxprs().map(|cj| &**cj.jaxpr()));
        }
    }
    counts
}

fn check(ok: bool, what: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(format!("check failed: {what}").into())
    }
}

fn main() -> Result<()> {
    // 1. Build, print, typecheck.
    let mlp = mlp_layer()?;
    println!("MLP layer:\n{mlp}\n");
    println!("its type: {}\n", typecheck(&mlp)?);

    let scan = scan_with_cond(4)?;
    println!("scan with a cond inside:\n{scan}\n");

    // 2. Walk: count the primitives, nested jaxprs included.
    let counts = count_primitives(&scan);
    println!("primitives of the scan: {counts:?}\n");
    check(
        counts.get("cond") == Some(&1) && counts.get("add") == Some(&1),
        "counts",
    )?;

    // 3. Text: what is printed parses back to the same jaxpr.
    for j in [&mlp, &scan] {
        let text = print_jaxpr(j);
        check(print_jaxpr(&parse_jaxpr(&text)?) == text, "text round trip")?;
    }

    // 4. Transform: keep only the loss (DCE), and transpose a linear map.
    let (loss_only, used_inputs) = dce(&mlp, &[false, true])?;
    println!(
        "DCE keeping the loss ({} of {} equations):\n{loss_only}\n",
        loss_only.eqns().len(),
        mlp.eqns().len()
    );
    check(used_inputs == [true, true, true], "DCE keeps the inputs")?;
    let linear = parse_jaxpr(
        "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = mul a 2.0:f32[]; d:f32[3] = mul c b in (d,) }",
    )?;
    let t = transpose(&linear, &[true, false])?;
    println!("transposed in its first input:\n{t}\n");

    // 5. Lower to StableHLO text (what XLA compiles).
    let hlo = lower_jaxpr(&scan, "scan_with_cond")?;
    println!(
        "StableHLO of the scan ({} lines), first lines:",
        hlo.lines().count()
    );
    for line in hlo.lines().take(4) {
        println!("  {line}");
    }
    check(
        hlo.contains("stablehlo.while") && hlo.contains("stablehlo.case"),
        "lowering",
    )?;

    // 6. Evaluate with the reference evaluator, against values computed here.
    let xs = [1.5f32, -2.0, 0.25, -4.0];
    let out = eval_jaxpr(
        &scan,
        &[],
        &[
            HostArray::scalar_f64(DType::F32, 10.0)?,
            HostArray::from_f64(
                Shape::new(&[4])?,
                DType::F32,
                xs.iter().map(|&x| f64::from(x)).collect(),
            )?,
        ],
    )?;
    let mut carry = 10.0f32;
    let mut want = Vec::new();
    for x in xs {
        carry = if x > 0.0 { carry + x } else { carry - x };
        want.push(f64::from(carry));
    }
    println!(
        "scan evaluated: carry {:?}, ys {:?}",
        out[0].as_f64(),
        out[1].as_f64()
    );
    check(
        out[0].as_f64() == Some(&[f64::from(carry)][..]),
        "final carry",
    )?;
    check(out[1].as_f64() == Some(&want[..]), "emitted carries")?;
    println!("\nall checks passed");
    Ok(())
}
