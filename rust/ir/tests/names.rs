//! Parameter names and extension primitive names: no name is leaked, and every name the
//! crate accepts prints as text that parses back.

use ferrax_ir::params::{intern_name, known_name_count};
use ferrax_ir::text::parse_jaxpr;
use ferrax_ir::Builtin;

#[test]
fn the_catalogue_names_are_shared_and_others_owned() {
    for b in Builtin::ALL {
        for spec in b.param_specs() {
            let n = intern_name(spec.name);
            assert!(n.is_known(), "{}", spec.name);
            assert_eq!(n.as_str(), spec.name);
        }
    }
    for name in ["not_a_param", "axes2", "", "x y"] {
        let n = intern_name(name);
        assert!(!n.is_known(), "{name}");
        assert_eq!(&*n, name);
    }
    assert_eq!(intern_name("axes"), intern_name("axes"));
    assert!(intern_name("axes") < intern_name("not_a_param"));
}

/// Text with distinct unknown param names is rejected, and reading it leaves the table of
/// shared names as it was (it used to intern, and leak, every name it read).
#[test]
fn rejected_param_names_do_not_grow_the_name_table() {
    let before = known_name_count();
    for i in 0..100_000 {
        let text =
            format!("{{ lambda ; a:f32[3]. let b:f32[3] = sin[unknown_param_{i}=1] a in (b,) }}");
        let err = parse_jaxpr(&text).expect_err("an unknown param is an error");
        if i == 0 {
            assert!(err.to_string().contains("unknown_param_0"), "{err}");
        }
    }
    assert_eq!(known_name_count(), before);
}
