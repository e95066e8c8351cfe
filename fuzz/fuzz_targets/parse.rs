//! Feeds arbitrary bytes to the jaxpr parser: it must return (a jaxpr or an error) and
//! never panic; whatever it accepts must typecheck and print back to text that parses to
//! the same printed form.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(j) = ferrax_ir::text::parse_jaxpr(text) {
        ferrax_ir::typecheck(&j).expect("parsed jaxprs typecheck");
        let printed = ferrax_ir::text::print_jaxpr(&j);
        let again = ferrax_ir::text::parse_jaxpr(&printed).expect("printed text parses");
        assert_eq!(ferrax_ir::text::print_jaxpr(&again), printed);
    }
});
