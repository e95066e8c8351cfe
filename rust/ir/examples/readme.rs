//! The README's Rust example (built by `cargo test`, so it stays correct).

use ferrax_ir::{generate, lower, passes, text, typecheck};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let j = text::parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }")?;
    println!("{}", typecheck(&j)?); // (f32[3],) -> (f32[3],)
    let (pruned, _used_inputs) = passes::dce(&j, &[true])?;
    println!("{}", text::print_jaxpr(&pruned));
    let module = lower::stablehlo::lower_jaxpr(&pruned, "m")?; // StableHLO text
    println!("{module}");
    let random = generate::random_jaxpr(42, generate::RandomOptions::default())?; // for fuzzing
    println!(
        "{} equations, {} flops",
        random.eqns().len(),
        passes::cost(&random).flops
    );
    Ok(())
}
