#![cfg(feature = "serde")]
//! The `serde` feature: round trips through JSON of every jaxpr of the corpora
//! (`tests/jax_corpus/`, `tests/jaxprs/`) and of every param of their equations, of
//! dtypes, shapes, abstract values and literals; and malformed input read as errors.
//!
//! Run with `cargo test -p ferrax-ir --features serde --test serde`.

use ferrax_ir::eval::HostArray;
use ferrax_ir::text::{parse_jaxpr, parse_jaxpr_with, print_jaxpr};
use ferrax_ir::{
    AbstractValue, ClosedJaxpr, Const, DType, ExtensionPrimitive, GatherScatterMode, Jaxpr,
    JaxprBuilder, LitValue, Literal, Mesh, Opaque, Param, Params, PartitionSpec, Registry, Shape,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

// ---------------------------------------------------------------------------------------
// Helpers

fn to_json<T: Serialize + ?Sized>(x: &T) -> String {
    serde_json::to_string(x).unwrap_or_else(|e| panic!("does not serialize: {e}"))
}

fn from_json<T: DeserializeOwned>(s: &str) -> T {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("does not deserialize: {e}\n{s}"))
}

fn round_trip<T: Serialize + DeserializeOwned>(x: &T) -> T {
    from_json(&to_json(x))
}

/// The error message of reading `json` as a `T` (which must fail).
fn json_error<T: DeserializeOwned + std::fmt::Debug>(json: &str) -> String {
    match serde_json::from_str::<T>(json) {
        Ok(v) => panic!("{json} read as {v:?}, expected an error"),
        Err(e) => e.to_string(),
    }
}

/// Any extension primitive the corpus uses: returns its operands' types (`test_ext`) or
/// nothing (`test_effect`), as `tests/filetests.rs` registers them.
struct Ext(&'static str, bool);

impl ExtensionPrimitive for Ext {
    fn name(&self) -> &str {
        self.0
    }
    fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        _params: &Params,
    ) -> Result<Vec<AbstractValue>, String> {
        Ok(if self.1 { inputs.to_vec() } else { Vec::new() })
    }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(Arc::new(Ext("test_ext", true))).unwrap();
    r.register(Arc::new(Ext("test_effect", false))).unwrap();
    r
}

/// The jaxpr text of a corpus file: the text before any `; expect:` / `; error:`
/// directive, `;;` comment lines dropped (the format of `tests/filetests.rs`).
fn input_text(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with(";;") {
            continue;
        }
        if line.starts_with("; error:") || line.trim_end() == "; expect:" {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The valid files of both corpora (names not starting with `err_`), sorted.
fn corpus_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    for dir in ["jax_corpus", "jaxprs"] {
        let dir = root.join(dir);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        files.extend(
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "jaxpr"))
                .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with("err_")),
        );
    }
    files.sort();
    files
}

struct CorpusJaxpr {
    name: String,
    jaxpr: Jaxpr,
    /// It uses extension primitives, so reads back only with a registry.
    extensions: bool,
}

fn corpus() -> Vec<CorpusJaxpr> {
    let reg = registry();
    let files = corpus_files();
    assert!(files.len() >= 300, "only {} corpus files", files.len());
    files
        .iter()
        .map(|path| {
            let name = path.display().to_string();
            let text = input_text(&std::fs::read_to_string(path).unwrap());
            match parse_jaxpr(&text) {
                Ok(jaxpr) => CorpusJaxpr {
                    name,
                    jaxpr,
                    extensions: false,
                },
                Err(plain) => {
                    let jaxpr = parse_jaxpr_with(&text, &reg)
                        .unwrap_or_else(|e| panic!("{name} does not read: {e} ({plain})"));
                    CorpusJaxpr {
                        name,
                        jaxpr,
                        extensions: true,
                    }
                }
            }
        })
        .collect()
}

/// Every equation's params in a jaxpr and its sub-jaxprs (each shared one once).
fn all_params(j: &Jaxpr) -> Vec<(String, Params)> {
    let mut out = Vec::new();
    let mut seen: HashSet<*const Jaxpr> = HashSet::new();
    let mut stack: Vec<&Jaxpr> = vec![j];
    while let Some(j) = stack.pop() {
        for e in j.eqns() {
            out.push((e.primitive().name().to_owned(), e.params().clone()));
            for cj in e.sub_jaxprs() {
                if seen.insert(Arc::as_ptr(cj.jaxpr())) {
                    stack.push(cj.jaxpr());
                }
            }
        }
    }
    out
}

/// Params equal, sub-jaxprs compared by their text (`Param`'s `==` compares sub-jaxprs
/// by identity, which a round trip cannot keep).
fn params_equiv(a: &Params, b: &Params) -> bool {
    a.len() == b.len()
        && a.iter().zip(b.iter()).all(|((na, pa), (nb, pb))| {
            na == nb
                && match (pa, pb) {
                    (Param::Jaxpr(x), Param::Jaxpr(y)) => {
                        print_jaxpr(x.jaxpr()) == print_jaxpr(y.jaxpr())
                    }
                    (Param::Jaxprs(xs), Param::Jaxprs(ys)) => {
                        xs.len() == ys.len()
                            && xs
                                .iter()
                                .zip(ys.iter())
                                .all(|(x, y)| print_jaxpr(x.jaxpr()) == print_jaxpr(y.jaxpr()))
                    }
                    _ => pa == pb,
                }
        })
}

fn has_jaxpr_param(p: &Params) -> bool {
    p.iter()
        .any(|(_, v)| matches!(v, Param::Jaxpr(_) | Param::Jaxprs(_)))
}

// ---------------------------------------------------------------------------------------
// The corpora

#[test]
fn every_corpus_jaxpr_round_trips_through_json() {
    let corpus = corpus();
    let mut with_extensions = Vec::new();
    for c in &corpus {
        let printed = print_jaxpr(&c.jaxpr);
        let json = to_json(&c.jaxpr);
        assert_eq!(
            serde_json::from_str::<String>(&json).unwrap(),
            printed,
            "{}: a jaxpr is written as its text",
            c.name
        );
        if c.extensions {
            // Extension primitives need a registry, which deserializing has not.
            let e = json_error::<Jaxpr>(&json);
            assert!(
                e.contains("the jaxpr text does not read"),
                "{}: {e}",
                c.name
            );
            with_extensions.push(c.name.clone());
            continue;
        }
        let back: Jaxpr = from_json(&json);
        assert_eq!(print_jaxpr(&back), printed, "{}", c.name);
        let closed = ClosedJaxpr::with_unknown_consts(Arc::new(back));
        let again: ClosedJaxpr = round_trip(&closed);
        assert_eq!(print_jaxpr(again.jaxpr()), printed, "{}", c.name);
        assert_eq!(again.consts().len(), c.jaxpr.constvars().len());
        assert!(again.consts().iter().all(|k| k.value().is_none()));
    }
    // Few files use extension primitives; the rest all read back.
    assert!(with_extensions.len() <= 8, "{with_extensions:?}");
}

#[test]
fn every_param_of_the_corpora_round_trips_through_json() {
    let mut count = 0;
    let mut variants: HashSet<&'static str> = HashSet::new();
    for c in corpus() {
        for (prim, params) in all_params(&c.jaxpr) {
            if c.extensions && has_jaxpr_param(&params) {
                continue; // its sub-jaxprs may need the registry
            }
            let json = to_json(&params);
            let back: Params = from_json(&json);
            assert!(
                params_equiv(&params, &back),
                "{}: {prim}'s params differ after a round trip\n{params:?}\n{back:?}\n{json}",
                c.name
            );
            if !has_jaxpr_param(&params) {
                assert_eq!(params, back, "{}: {prim}", c.name);
            }
            // Written again, the same JSON.
            assert_eq!(to_json(&back), json, "{}: {prim}", c.name);
            for (_, p) in params.iter() {
                variants.insert(p.kind_name());
                let one: Param = round_trip(p);
                assert_eq!(to_json(&one), to_json(p), "{}: {prim}", c.name);
            }
            count += 1;
        }
    }
    assert!(count > 1000, "only {count} equations");
    // The corpora exercise most kinds of param.
    for kind in [
        "None",
        "bool",
        "int",
        "float",
        "str",
        "tuple of ints",
        "tuple of bools",
        "dtype",
        "dimension numbers",
        "gather dimension numbers",
        "scatter dimension numbers",
        "gather/scatter mode",
        "conv dimension numbers",
        "padding config",
        "jaxpr",
        "tuple of jaxprs",
        "host object (opaque)",
        "mesh",
        "partition spec",
        "tuple of axis names",
        "tuple of ShapedArrays",
    ] {
        assert!(
            variants.contains(kind),
            "no {kind} param in the corpora: {variants:?}"
        );
    }
}

#[test]
fn numpy_int_hints_survive_a_jaxpr_round_trip() {
    let text = "{ lambda ; a:f32[3] b:f32[]. let\n    c:f32[3] = broadcast_in_dim[\n      broadcast_dimensions=()\n      shape=(np.int64(3),)\n      sharding=None\n    ] b\n    d:f32[3] = add a c\n  in (d,) }";
    let j = parse_jaxpr(text).unwrap();
    let back: Jaxpr = round_trip(&j);
    assert_eq!(print_jaxpr(&back), print_jaxpr(&j));
}

// ---------------------------------------------------------------------------------------
// Every kind of param, built

#[test]
fn every_kind_of_param_round_trips() {
    let sub = parse_jaxpr("{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }").unwrap();
    let sub = ClosedJaxpr::with_unknown_consts(Arc::new(sub));
    let params = Params::new([
        ("none", Param::None),
        ("bool", Param::Bool(true)),
        ("int", Param::Int(i64::MIN)),
        ("float", Param::Float(0.1)),
        ("neg_zero", Param::Float(-0.0)),
        ("inf", Param::Float(f64::INFINITY)),
        ("neg_inf", Param::Float(f64::NEG_INFINITY)),
        ("str", Param::str("a \"quoted\" name\n")),
        ("ints", Param::ints(&[0, -1, i64::MAX])),
        ("bools", Param::Bools(Arc::from(&[true, false][..]))),
        ("dtype", Param::DType(DType::BF16)),
        ("key", Param::DType(DType::KeyFry)),
        ("dot", Param::dot_dims(&[1], &[0], &[], &[])),
        (
            "gather",
            Param::GatherDims(Arc::new(ferrax_ir::GatherDimensionNumbers::from_fields([
                vec![1],
                vec![0],
                vec![0],
                vec![],
                vec![],
            ]))),
        ),
        (
            "scatter",
            Param::ScatterDims(Arc::new(ferrax_ir::ScatterDimensionNumbers::from_fields([
                vec![],
                vec![0],
                vec![0],
                vec![1],
                vec![0],
            ]))),
        ),
        ("mode", Param::Mode(GatherScatterMode::FillOrDrop)),
        (
            "conv",
            Param::ConvDims(Arc::new(ferrax_ir::ConvDimensionNumbers::identity(4))),
        ),
        (
            "padding",
            Param::Padding(Arc::from(&[(0, 1, 2), (-1, 0, 0)][..])),
        ),
        ("jaxpr", Param::Jaxpr(sub.clone())),
        ("jaxprs", Param::Jaxprs(Arc::new(vec![sub.clone(), sub]))),
        ("opaque", Param::Opaque(Opaque::named("<lambda>"))),
        (
            "mesh",
            Param::Mesh(Arc::new(Mesh::new([("x", 2), ("y", 4)]).unwrap())),
        ),
        (
            "spec",
            Param::Spec(Arc::new(PartitionSpec::new(vec![
                vec![],
                vec!["x".into()],
                vec!["x".into(), "y".into()],
            ]))),
        ),
        (
            "specs",
            Param::Specs(Arc::from(
                &[
                    PartitionSpec::replicated(),
                    PartitionSpec::new(vec![vec!["y".into()]]),
                ][..],
            )),
        ),
        ("names", Param::names(&["x", "y"])),
        ("name_set", Param::NameSet(Arc::from(&[Arc::from("y")][..]))),
        ("pairs", Param::Pairs(Arc::from(&[(0, 1), (1, 0)][..]))),
        (
            "avals",
            Param::Avals(Arc::from(
                &[
                    AbstractValue::array(DType::F32, &[3]).unwrap(),
                    AbstractValue::scalar(DType::KeyFry).with_weak_type(true),
                ][..],
            )),
        ),
    ]);
    let json = to_json(&params);
    let back: Params = from_json(&json);
    assert!(params_equiv(&params, &back), "{json}");
    assert_eq!(to_json(&back), json);
    // A NaN reads back as a NaN.
    let nan: Param = round_trip(&Param::Float(f64::NAN));
    assert!(matches!(nan, Param::Float(x) if x.is_nan()));
    // The encoding, as documented.
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["none"], "None");
    assert_eq!(value["int"]["Int"], i64::MIN);
    assert_eq!(value["inf"]["Float"], "inf");
    assert_eq!(value["dtype"]["DType"], "bfloat16");
    assert_eq!(value["key"]["DType"], "key<fry>");
    assert_eq!(value["mode"]["Mode"], "FILL_OR_DROP");
    assert_eq!(value["dot"]["DotDims"]["lhs_contracting"][0], 1);
    assert_eq!(value["mesh"]["Mesh"][1][0], "y");
    assert_eq!(value["mesh"]["Mesh"][1][1], 4);
    assert_eq!(value["spec"]["Spec"][2][1], "y");
    assert_eq!(value["opaque"]["Opaque"], "<lambda>");
    assert_eq!(
        value["jaxpr"]["Jaxpr"],
        "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }"
    );
    assert_eq!(value["avals"]["Avals"][1]["dtype"], "key<fry>");
    assert_eq!(value["avals"]["Avals"][1]["weak_type"], true);
}

#[test]
fn an_opaque_host_object_is_written_as_its_name() {
    let with_object = Opaque::with_object("f_jvp", 0x1234, Arc::new(17u32));
    let json = to_json(&Param::Opaque(with_object.clone()));
    assert_eq!(json, r#"{"Opaque":"f_jvp"}"#);
    let back: Param = from_json(&json);
    // The object is not kept: it reads back as a name.
    assert_eq!(back, Param::Opaque(Opaque::named("f_jvp")));
    assert_ne!(back, Param::Opaque(with_object));
}

#[test]
fn constants_holding_values_are_not_serialized() {
    let j = parse_jaxpr("{ lambda a:f32[]; b:f32[]. let c:f32[] = add a b in (c,) }").unwrap();
    let j = Arc::new(j);
    let aval = AbstractValue::scalar(DType::F32);
    let valued = ClosedJaxpr::new(
        Arc::clone(&j),
        vec![Const::new(aval.clone(), Arc::new(2.0f32))],
    )
    .unwrap();
    let e = serde_json::to_string(&valued).unwrap_err().to_string();
    assert!(e.contains("holds a value"), "{e}");
    assert!(e.contains("host object"), "{e}");
    let array = HostArray::from_f64(Shape::scalar(), DType::F32, vec![2.0]).unwrap();
    let hosted = ClosedJaxpr::new(Arc::clone(&j), vec![Const::host(array)]).unwrap();
    let e = serde_json::to_string(&hosted).unwrap_err().to_string();
    assert!(
        e.contains("constant 0 (f32[]) holds a value (a host array)"),
        "{e}"
    );
    // In a param too.
    let e = serde_json::to_string(&Params::new([("jaxpr", Param::Jaxpr(valued.clone()))]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds a value"), "{e}");
    // Unknown constants (as read from text) are fine, and read back unknown.
    let unknown = ClosedJaxpr::new(j, vec![Const::unknown(aval)]).unwrap();
    let back: ClosedJaxpr = round_trip(&unknown);
    assert_eq!(back.consts().len(), 1);
    assert!(back.consts()[0].value().is_none());
    assert_eq!(back.consts()[0].aval(), unknown.consts()[0].aval());

    // A jaxpr whose sub-jaxpr is closed over a value is refused as well (its text would
    // lose the value); over unknown constants it round trips.
    let jit_of = |cj: ClosedJaxpr| {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(AbstractValue::scalar(DType::F32));
        let params = Params::new([("jaxpr", Param::Jaxpr(cj)), ("name", Param::str("f"))]);
        let y = b.apply(ferrax_ir::Builtin::Jit, [x], params).unwrap();
        b.build(vec![y.into()]).unwrap()
    };
    let e = serde_json::to_string(&jit_of(valued))
        .unwrap_err()
        .to_string();
    assert!(e.contains("a sub-jaxpr of jit"), "{e}");
    assert!(e.contains("holds a value"), "{e}");
    let ok = jit_of(unknown);
    let back: Jaxpr = round_trip(&ok);
    assert_eq!(print_jaxpr(&back), print_jaxpr(&ok));
}

// ---------------------------------------------------------------------------------------
// DType, Shape, AbstractValue, Literal

#[test]
fn dtypes_round_trip_as_numpy_names() {
    for d in DType::ALL.into_iter().chain([DType::KEY_FRY]) {
        let json = to_json(&d);
        assert_eq!(json, format!("\"{}\"", d.numpy_name()));
        assert_eq!(round_trip(&d), d);
        // The short name of jaxpr types reads too.
        assert_eq!(from_json::<DType>(&format!("\"{}\"", d.short_name())), d);
    }
    assert_eq!(to_json(&DType::F32), "\"float32\"");
    assert_eq!(to_json(&DType::KeyFry), "\"key<fry>\"");
}

#[test]
fn shapes_and_abstract_values_round_trip() {
    for dims in [
        &[][..],
        &[0],
        &[3, 4],
        &[1, 0, 7],
        &[i64::MAX],
        &[0, i64::MAX],
    ] {
        let s = Shape::new(dims).unwrap();
        assert_eq!(to_json(&s), to_json(dims));
        assert_eq!(round_trip(&s), s);
        for d in DType::ALL.into_iter().chain([DType::KEY_FRY]) {
            for weak in [false, true] {
                let a = AbstractValue::new(s.clone(), d).with_weak_type(weak);
                assert_eq!(round_trip(&a), a);
            }
        }
    }
    let a = AbstractValue::array(DType::F32, &[3]).unwrap();
    assert_eq!(
        to_json(&a),
        r#"{"dtype":"float32","shape":[3],"weak_type":false}"#
    );
    // Fields in any order; weak_type may be left out.
    let b: AbstractValue = from_json(r#"{"shape":[3],"dtype":"f32"}"#);
    assert_eq!(b, a);
}

#[test]
fn literals_round_trip() {
    let lits = [
        Literal::bool(true),
        Literal::bool(false).weak(),
        Literal::i32(-7),
        Literal::i32(i32::MIN).weak(),
        Literal::i64(i64::MIN),
        Literal::i64(i64::MAX),
        Literal::u32(u32::MAX),
        Literal::u64(0),
        Literal::u64(i64::MAX as u64),
        Literal::u64(i64::MAX as u64 + 1),
        Literal::u64(u64::MAX),
        Literal::new(LitValue::Int(-128), DType::I8),
        Literal::new(LitValue::Int(255), DType::U8),
        Literal::f32(1.5),
        Literal::f32(0.1).weak(),
        Literal::f64(-0.0),
        Literal::f64(f64::INFINITY),
        Literal::f64(f64::NEG_INFINITY),
        Literal::new(LitValue::Float(1e300), DType::F64),
        Literal::new(LitValue::Float(65504.0), DType::F16),
        Literal::new(LitValue::Float(3.0), DType::BF16),
    ];
    for l in lits {
        let back: Literal = round_trip(&l);
        assert_eq!(back, l, "{}", to_json(&l));
        assert_eq!(back.value, l.value);
        if let LitValue::Float(x) = l.value {
            assert!(
                matches!(back.value, LitValue::Float(y) if y.to_bits() == x.to_bits()),
                "{}",
                to_json(&l)
            );
        }
        let v: LitValue = round_trip(&l.value);
        assert_eq!(v, l.value);
    }
    // A u64 literal is written as its number, not its bits.
    assert_eq!(
        to_json(&Literal::u64(u64::MAX)),
        r#"{"dtype":"uint64","value":18446744073709551615,"weak_type":false}"#
    );
    assert_eq!(
        from_json::<Literal>(r#"{"value":9223372036854775808,"dtype":"uint64"}"#),
        Literal::u64(1 << 63)
    );
    // NaN.
    let nan: Literal = round_trip(&Literal::f32(f32::NAN));
    assert!(matches!(nan.value, LitValue::Float(x) if x.is_nan()));
    assert_eq!(
        to_json(&Literal::f64(f64::NAN)),
        r#"{"dtype":"float64","value":"nan","weak_type":false}"#
    );
    // The value before the dtype, an integer for a float dtype.
    assert_eq!(
        from_json::<Literal>(r#"{"value":2,"weak_type":true,"dtype":"float32"}"#),
        Literal::f32(2.0).weak()
    );
    // As a sequence in field order.
    assert_eq!(
        from_json::<Literal>(r#"["int8",-5,false]"#),
        Literal::new(LitValue::Int(-5), DType::I8)
    );
}

// ---------------------------------------------------------------------------------------
// Malformed input

#[test]
fn malformed_input_is_an_error() {
    // Shapes.
    let e = json_error::<Shape>("[3, -1]");
    assert!(e.contains("dimension 1 is negative (-1)"), "{e}");
    let e = json_error::<Shape>(&format!("[{}, 2, 0]", i64::MAX));
    assert!(e.contains("overflows"), "{e}");
    json_error::<Shape>("[1.5]");
    json_error::<Shape>("3");
    let e = json_error::<AbstractValue>(r#"{"dtype":"float32","shape":[-2],"weak_type":false}"#);
    assert!(e.contains("negative"), "{e}");
    // Dtypes.
    let e = json_error::<DType>("\"float33\"");
    assert!(e.contains("unknown dtype \"float33\""), "{e}");
    json_error::<DType>("3");
    let e = json_error::<AbstractValue>(r#"{"dtype":"cplx","shape":[]}"#);
    assert!(e.contains("unknown dtype"), "{e}");
    json_error::<AbstractValue>(r#"{"dtype":"float32"}"#);
    json_error::<AbstractValue>(r#"{"dtype":"float32","shape":[],"extra":1}"#);
    // Jaxpr text.
    let e = json_error::<Jaxpr>(r#""{ lambda ; a:f32[]. let b:f32[] = sin in (b,) }""#);
    assert!(e.contains("the jaxpr text does not read"), "{e}");
    let e = json_error::<Jaxpr>(r#""{ lambda ; a:f32[]. let b:i32[] = sin a in (b,) }""#);
    assert!(e.contains("the jaxpr text does not read"), "{e}");
    json_error::<Jaxpr>("\"\"");
    json_error::<Jaxpr>("17");
    json_error::<ClosedJaxpr>(r#""{ lambda""#);
    // Params.
    let e = json_error::<Param>(r#"{"Complex":[1,2]}"#);
    assert!(e.contains("unknown variant `Complex`"), "{e}");
    let e = json_error::<Params>(r#"{"axes":{"Tuple":[1]}}"#);
    assert!(e.contains("unknown variant `Tuple`"), "{e}");
    json_error::<Param>(r#""Unknown""#);
    json_error::<Param>(r#"{"Int":"3"}"#);
    json_error::<Param>(r#"{"Int":1.5}"#);
    json_error::<Param>(r#"{"Float":"one"}"#);
    json_error::<Param>(r#"{"Ints":[1,2],"Int":3}"#);
    let e = json_error::<Params>(r#"{"axes":{"Ints":[1]},"axes":{"Ints":[2]}}"#);
    assert!(e.contains("given twice"), "{e}");
    let e = json_error::<Param>(r#"{"Mode":"WRAP"}"#);
    assert!(e.contains("unknown gather/scatter mode"), "{e}");
    let e = json_error::<Param>(r#"{"Mesh":[["x",2],["x",2]]}"#);
    assert!(e.contains("not a mesh"), "{e}");
    let e = json_error::<Param>(r#"{"Mesh":[["x",0]]}"#);
    assert!(e.contains("not a mesh"), "{e}");
    json_error::<Param>(r#"{"DotDims":{"lhs_contracting":[1]}}"#);
    json_error::<Param>(r#"{"ConvDims":{"lhs_spec":[],"rhs_spec":[],"out_spec":[],"batch":[]}}"#);
    json_error::<Param>(r#"{"Padding":[[0,1]]}"#);
    json_error::<Param>(r#"{"Jaxpr":"not a jaxpr"}"#);
    json_error::<Param>(r#"{"Avals":[{"dtype":"float32","shape":[-1]}]}"#);
    json_error::<Params>(r#"[["axes",{"Ints":[1]}]]"#);
    // Literals.
    let e = json_error::<Literal>(r#"{"dtype":"int8","value":300}"#);
    assert!(e.contains("out of range"), "{e}");
    let e = json_error::<Literal>(r#"{"dtype":"uint64","value":-1}"#);
    assert!(e.contains("-1 is out of range for uint64"), "{e}");
    let e = json_error::<Literal>(r#"{"value":-1,"dtype":"uint64"}"#);
    assert!(e.contains("-1 is out of range for uint64"), "{e}");
    let e = json_error::<Literal>(r#"{"dtype":"int64","value":18446744073709551615}"#);
    assert!(e.contains("out of range"), "{e}");
    json_error::<Literal>(r#"{"dtype":"bool","value":1}"#);
    json_error::<Literal>(r#"{"dtype":"int32","value":1.5}"#);
    json_error::<Literal>(r#"{"dtype":"float32","value":true}"#);
    json_error::<Literal>(r#"{"dtype":"key<fry>","value":0}"#);
    json_error::<Literal>(r#"{"value":0}"#);
    json_error::<Literal>(r#"{"dtype":"int32"}"#);
    json_error::<Literal>(r#"{"dtype":"int32","value":1,"dtype":"int8"}"#);
    json_error::<Literal>(r#"{"dtype":"int32","value":1,"colour":"red"}"#);
    json_error::<Literal>(r#"["int8",300]"#);
    json_error::<LitValue>(r#"{"Str":"x"}"#);
    // An ill-typed literal is not written.
    let bad = Literal::new(LitValue::Int(300), DType::I8);
    assert!(serde_json::to_string(&bad).is_err());
}

/// Mutated JSON (bytes dropped, replaced, duplicated) is read as a value or refused,
/// never a panic.
#[test]
fn mutated_json_never_panics() {
    let corpus = corpus();
    let mut samples: Vec<String> = Vec::new();
    for c in corpus.iter().filter(|c| !c.extensions).take(40) {
        samples.push(to_json(&c.jaxpr));
        for (_, p) in all_params(&c.jaxpr).into_iter().take(5) {
            samples.push(to_json(&p));
        }
    }
    samples.push(to_json(&Literal::u64(u64::MAX)));
    samples.push(to_json(&AbstractValue::array(DType::F32, &[3, 4]).unwrap()));
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet = b"{}[]\",:-0123456789aeflnrstuxE. ";
    for s in &samples {
        let bytes = s.as_bytes();
        for _ in 0..30 {
            let mut m = bytes.to_vec();
            for _ in 0..(1 + next() % 3) {
                if m.is_empty() {
                    break;
                }
                let i = (next() as usize) % m.len();
                match next() % 3 {
                    0 => {
                        m.remove(i);
                    }
                    1 => m[i] = alphabet[(next() as usize) % alphabet.len()],
                    _ => {
                        let b = m[i];
                        m.insert(i, b);
                    }
                }
            }
            let _ = serde_json::from_slice::<Jaxpr>(&m);
            let _ = serde_json::from_slice::<Params>(&m);
            let _ = serde_json::from_slice::<Literal>(&m);
            let _ = serde_json::from_slice::<AbstractValue>(&m);
        }
    }
}
