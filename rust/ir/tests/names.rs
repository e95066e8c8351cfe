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

/// An extension primitive that returns its operands' types.
struct Ext(String);

impl ferrax_ir::ExtensionPrimitive for Ext {
    fn name(&self) -> &str {
        &self.0
    }
    fn abstract_eval(
        &self,
        inputs: &[ferrax_ir::AbstractValue],
        _: &ferrax_ir::Params,
    ) -> Result<Vec<ferrax_ir::AbstractValue>, String> {
        Ok(inputs.to_vec())
    }
}

/// Candidate names: fixed ones (keywords, built-ins, punctuation) and every string of up
/// to two characters over an alphabet of letters, digits and the characters the text
/// gives a meaning to.
fn candidates() -> Vec<String> {
    let mut names: Vec<String> = [
        "",
        "p",
        "my_prim",
        "_",
        "__",
        "_x1",
        "X",
        "a1b2",
        "lambda",
        "let",
        "in",
        "True",
        "False",
        "None",
        "inf",
        "nan",
        "add",
        "scatter-add",
        "sin",
        "my prim",
        "a-b",
        "a.b",
        "1a",
        "-a",
        "a=b",
        "a[0]",
        "a:b",
        "a;b",
        "a,b",
        "{a}",
        "(a)",
        "'a'",
        "\"a\"",
        "é",
        "a\u{0}",
        "a\n",
        "a\t",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let alphabet = [
        'a', 'Z', '_', '0', '9', '-', '.', '=', ':', ';', ',', '[', ']', '{', '}', '(', ')', '\'',
        '"', ' ', '<', '>', '*', 'é',
    ];
    for &c in &alphabet {
        names.push(c.to_string());
        for &d in &alphabet {
            names.push(format!("{c}{d}"));
        }
    }
    names
}

/// Builds `b = <prim>[<param>=1] a` and checks that the printed text parses back to the
/// same text.
fn roundtrip(prim_name: &str, param_name: &str) -> Result<(), String> {
    use ferrax_ir::text::{parse_jaxpr_with, print_jaxpr};
    use ferrax_ir::{AbstractValue, Atom, DType, JaxprBuilder, Param, Params, Registry, Shape};
    let ext: Arc<dyn ferrax_ir::ExtensionPrimitive> = Arc::new(Ext(prim_name.to_owned()));
    let mut reg = Registry::new();
    reg.register(Arc::clone(&ext)).map_err(|e| e.to_string())?;
    let mut b = JaxprBuilder::new();
    let a = b.add_invar(AbstractValue::new(Shape::new(&[2]).unwrap(), DType::F32));
    let outs = b
        .add_eqn(
            ferrax_ir::Primitive::Extension(ext),
            vec![Atom::Var(a)],
            Params::new([(param_name, Param::Int(1))]),
        )
        .map_err(|e| e.to_string())?;
    let j = b
        .build(outs.into_iter().map(Atom::Var).collect())
        .map_err(|e| e.to_string())?;
    let text = print_jaxpr(&j);
    let back = parse_jaxpr_with(&text, &reg)
        .unwrap_or_else(|e| panic!("{prim_name:?}/{param_name:?}: {e}\n{text}"));
    assert_eq!(print_jaxpr(&back), text);
    Ok(())
}

use std::sync::Arc;

#[test]
fn every_accepted_name_prints_and_parses_back() {
    use ferrax_ir::primitive::{check_param_name, check_primitive_name};
    let names = candidates();
    let mut accepted = 0;
    for name in &names {
        match check_primitive_name(name) {
            Ok(()) => {
                accepted += 1;
                roundtrip(name, "k").unwrap_or_else(|e| panic!("{name:?}: {e}"));
            }
            Err(err) => {
                // Rejected where a jaxpr is made, and by the registry, with the reason.
                let message = roundtrip(name, "k").unwrap_err();
                assert_eq!(message, err.to_string());
            }
        }
        match check_param_name(name) {
            Ok(()) => roundtrip("ext", name).unwrap_or_else(|e| panic!("{name:?}: {e}")),
            Err(err) => {
                let message = roundtrip("ext", name).unwrap_err();
                assert!(message.contains(&err.to_string()), "{message}");
            }
        }
    }
    assert!(accepted >= 20, "{accepted}");
    for bad in [
        "",
        "my prim",
        "1a",
        "a-b",
        "scatter-add",
        "let",
        "lambda",
        "in",
        "add",
        "é",
    ] {
        assert!(check_primitive_name(bad).is_err(), "{bad:?}");
    }
    for good in ["p", "_", "my_prim", "X9", "_split_transpose"] {
        assert!(check_primitive_name(good).is_ok(), "{good:?}");
        assert!(check_param_name(good).is_ok(), "{good:?}");
    }
    // Built-ins' names and keywords are fine as param names (`lambda=<lambda>` is in
    // the corpus); punctuation is not.
    for good in ["add", "lambda", "let", "in"] {
        assert!(check_param_name(good).is_ok(), "{good:?}");
    }
    for bad in ["", "k=1", "a b", "1k", "a-b"] {
        assert!(check_param_name(bad).is_err(), "{bad:?}");
    }
}
