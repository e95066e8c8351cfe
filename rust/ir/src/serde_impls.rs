//! `Serialize` and `Deserialize` for the IR's types and equation params (the `serde`
//! feature).
//!
//! The encoding, type by type (JSON shown; any serde format works):
//! - [`DType`]: its NumPy name, `"float32"`, `"bfloat16"`, `"bool"` (`"key<fry>"` as JAX
//!   spells the key dtype). Read back with [`DType::from_name`], so the short names of
//!   jaxpr types (`"f32"`) are accepted too.
//! - [`Shape`]: the sequence of its dimensions, `[3, 4]`, checked by [`Shape::new`] when
//!   read (a negative dimension or an overflowing product is an error).
//! - [`AbstractValue`]: `{"dtype": "float32", "shape": [3], "weak_type": false}`
//!   (`weak_type` may be left out when read: false).
//! - [`Literal`]: `{"dtype": "uint64", "value": 18446744073709551615, "weak_type": false}`,
//!   the value as its dtype reads it: a bool, an integer (a `u64` literal's number, not
//!   the bits [`LitValue::Int`] holds), or a float. Only well-typed literals
//!   ([`Literal::is_well_typed`]) are written or read.
//! - [`LitValue`] on its own (no dtype to read it by): `{"Bool": true}`, `{"Int": -1}`
//!   (a `u64` value as its bits, as held), `{"Float": 0.5}`.
//! - Floats (of literals and params) that are not finite are written `"nan"`, `"inf"`,
//!   `"-inf"` in human-readable formats (JSON has no number for them); binary formats
//!   keep the `f64`.
//! - [`Jaxpr`]: its jaxpr text ([`print_jaxpr`]), read back with [`parse_jaxpr`], which
//!   typechecks it. The text is the interchange format: it keeps everything a jaxpr
//!   holds (shared sub-jaxprs as `let` bindings, the integers JAX printed as
//!   `np.int64(..)`, ...), and a jaxpr prints the same after a round trip. Only built-in
//!   primitives read back (extension primitives need a registry; see
//!   [`crate::text::parse_jaxpr_with`]).
//! - [`ClosedJaxpr`]: its jaxpr's text; read back with [`ClosedJaxpr::with_unknown_consts`].
//!   The text carries constants' types, not their values, which are host objects (an
//!   embedder's, which the crate does not own, or a [`Const::host`] array): writing a
//!   closed jaxpr (or a jaxpr whose sub-jaxprs are closed) over constants that hold
//!   values ([`Const::value`]) is an error naming the constant, rather than a silent
//!   loss.
//! - [`Params`]: a map from param name to [`Param`], in name order (a name given twice
//!   is an error when read). Whether an integer was printed as a NumPy scalar (a print
//!   hint of params read from text) is not kept: equality ignores it, and a whole
//!   [`Jaxpr`], written as text, keeps it. Params read back equal those written, but
//!   for sub-jaxprs: [`Param`]'s `==` compares them by identity, and each is read back
//!   as a new jaxpr (the same text; jaxprs shared between params are not shared after).
//! - [`Param`]: externally tagged by its variant's name: `"None"`, `{"Int": 3}`,
//!   `{"Ints": [0, 1]}`, `{"DType": "float32"}`, `{"Mode": "CLIP"}`,
//!   `{"DotDims": {"lhs_contracting": [1], "rhs_contracting": [0], "lhs_batch": [],
//!   "rhs_batch": []}}` (and [`GatherDimensionNumbers`], [`ScatterDimensionNumbers`],
//!   [`ConvDimensionNumbers`] as structs of their fields), `{"Padding": [[0, 1, 0]]}`,
//!   `{"Jaxpr": "{ lambda ; ... }"}`, `{"Jaxprs": [...]}`,
//!   `{"Mesh": [["x", 2], ["y", 2]]}` (axes in order, checked by [`Mesh::new`]),
//!   `{"Spec": [[], ["x"], ["x", "y"]]}` (per dimension the mesh axes; none: not split),
//!   `{"Names": ["x"]}`, `{"NameSet": ["x"]}`, `{"Pairs": [[0, 1]]}`,
//!   `{"Avals": [{"dtype": ..., "shape": ..., "weak_type": ...}]}`.
//!   `{"Opaque": "f_jvp"}` is a host object's printed name: the object itself is not
//!   kept, and it reads back as [`Opaque::named`].
//!
//! Nothing here panics on bad input: malformed data is the format's error, with a message.

use crate::aval::{AbstractValue, Shape};
use crate::dtype::DType;
use crate::jaxpr::{ClosedJaxpr, Jaxpr, LitValue, Literal};
use crate::params::{
    ConvDimensionNumbers, DotDimensionNumbers, GatherDimensionNumbers, GatherScatterMode, Opaque,
    PadDim, Param, Params, ScatterDimensionNumbers,
};
use crate::sharding::{Mesh, PartitionSpec};
use crate::text::{parse_jaxpr, print_jaxpr};
#[cfg(doc)]
use crate::Const;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, SerializeMap, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------
// DType, Shape, AbstractValue

impl Serialize for DType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.numpy_name())
    }
}

impl<'de> Deserialize<'de> for DType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DType, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DType;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a dtype name (\"float32\", \"int32\", \"bool\", \"key<fry>\", ...)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DType, E> {
                DType::from_name(v).ok_or_else(|| E::custom(format!("unknown dtype {v:?}")))
            }
        }
        d.deserialize_str(V)
    }
}

impl Serialize for Shape {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.dims().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Shape, D::Error> {
        let dims = Vec::<i64>::deserialize(d)?;
        Shape::new(&dims).map_err(|e| de::Error::custom(format!("not a shape: {e}")))
    }
}

#[derive(Serialize)]
#[serde(rename = "AbstractValue")]
struct AvalOut<'a> {
    dtype: DType,
    shape: &'a Shape,
    weak_type: bool,
}

#[derive(Deserialize)]
#[serde(rename = "AbstractValue", deny_unknown_fields)]
struct AvalIn {
    dtype: DType,
    shape: Shape,
    #[serde(default)]
    weak_type: bool,
}

impl Serialize for AbstractValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        AvalOut {
            dtype: self.dtype,
            shape: &self.shape,
            weak_type: self.weak_type,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for AbstractValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AbstractValue, D::Error> {
        let a = AvalIn::deserialize(d)?;
        Ok(AbstractValue::new(a.shape, a.dtype).with_weak_type(a.weak_type))
    }
}

// ---------------------------------------------------------------------------------------
// Floats, literals

/// An `f64` as written here: non-finite values as `"nan"`, `"inf"`, `"-inf"` in
/// human-readable formats. Read back from a float, an integer or one of those strings.
#[derive(Clone, Copy)]
struct Float(f64);

fn non_finite_name(x: f64) -> Option<&'static str> {
    if x.is_nan() {
        Some("nan")
    } else if x == f64::INFINITY {
        Some("inf")
    } else if x == f64::NEG_INFINITY {
        Some("-inf")
    } else {
        None
    }
}

fn non_finite_value(name: &str) -> Option<f64> {
    match name {
        "nan" | "NaN" => Some(f64::NAN),
        "inf" | "+inf" | "Infinity" => Some(f64::INFINITY),
        "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

impl Serialize for Float {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match non_finite_name(self.0) {
            Some(name) if s.is_human_readable() => s.serialize_str(name),
            _ => s.serialize_f64(self.0),
        }
    }
}

struct FloatVisitor;

impl Visitor<'_> for FloatVisitor {
    type Value = Float;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a float (or \"nan\", \"inf\", \"-inf\")")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Float, E> {
        Ok(Float(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Float, E> {
        Ok(Float(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Float, E> {
        Ok(Float(v as f64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Float, E> {
        non_finite_value(v)
            .map(Float)
            .ok_or_else(|| E::custom(format!("not a float: {v:?}")))
    }
}

impl<'de> Deserialize<'de> for Float {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Float, D::Error> {
        if d.is_human_readable() {
            d.deserialize_any(FloatVisitor)
        } else {
            d.deserialize_f64(FloatVisitor)
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename = "LitValue")]
enum LitValueRepr {
    Bool(bool),
    Int(i64),
    Float(Float),
}

impl Serialize for LitValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            LitValue::Bool(b) => LitValueRepr::Bool(b),
            LitValue::Int(i) => LitValueRepr::Int(i),
            LitValue::Float(x) => LitValueRepr::Float(Float(x)),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for LitValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<LitValue, D::Error> {
        Ok(match LitValueRepr::deserialize(d)? {
            LitValueRepr::Bool(b) => LitValue::Bool(b),
            LitValueRepr::Int(i) => LitValue::Int(i),
            LitValueRepr::Float(x) => LitValue::Float(x.0),
        })
    }
}

/// A literal's value as its dtype writes it (a `u64` literal as its number).
struct LitValueOut(LitValue, DType);

impl Serialize for LitValueOut {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            LitValue::Bool(b) => s.serialize_bool(b),
            LitValue::Int(i) if self.1 == DType::U64 => s.serialize_u64(i as u64),
            LitValue::Int(i) => s.serialize_i64(i),
            LitValue::Float(x) => Float(x).serialize(s),
        }
    }
}

/// A scalar read without knowing its dtype yet (a map whose `value` comes before its
/// `dtype`; such formats describe themselves).
enum AnyScalar {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
}

impl<'de> Deserialize<'de> for AnyScalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AnyScalar, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = AnyScalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a bool, an integer or a float")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<AnyScalar, E> {
                Ok(AnyScalar::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<AnyScalar, E> {
                Ok(AnyScalar::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<AnyScalar, E> {
                Ok(AnyScalar::UInt(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<AnyScalar, E> {
                Ok(AnyScalar::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<AnyScalar, E> {
                non_finite_value(v)
                    .map(AnyScalar::Float)
                    .ok_or_else(|| E::custom(format!("not a literal value: {v:?}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// The value of a literal of dtype `dtype`: a bool, an integer in the dtype's range (a
/// `u64` as its number) or a float.
fn scalar_value<E: de::Error>(v: AnyScalar, dtype: DType) -> Result<LitValue, E> {
    let value = match (v, dtype) {
        (AnyScalar::Bool(b), DType::Bool) => LitValue::Bool(b),
        (AnyScalar::Int(i), DType::U64) => {
            return Err(E::custom(format!("{i} is out of range for uint64")))
        }
        (AnyScalar::Int(i), d) if d.is_int() => LitValue::Int(i),
        (AnyScalar::UInt(u), DType::U64) => LitValue::Int(u as i64),
        (AnyScalar::UInt(u), d) if d.is_int() => LitValue::Int(
            i64::try_from(u)
                .map_err(|_| E::custom(format!("{u} is out of range for {}", d.numpy_name())))?,
        ),
        (AnyScalar::Float(x), d) if d.is_float() => LitValue::Float(x),
        (AnyScalar::Int(i), d) if d.is_float() => LitValue::Float(i as f64),
        (AnyScalar::UInt(u), d) if d.is_float() => LitValue::Float(u as f64),
        (_, d) => {
            return Err(E::custom(format!(
                "the value does not fit a literal of dtype {}",
                d.numpy_name()
            )))
        }
    };
    Ok(value)
}

/// Reads a literal's value knowing its dtype (binary formats need the type to read).
struct ValueSeed(DType);

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = AnyScalar;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<AnyScalar, D::Error> {
        if d.is_human_readable() {
            // Self-describing: read any scalar, checked against the dtype after.
            return AnyScalar::deserialize(d);
        }
        Ok(match self.0 {
            DType::Bool => AnyScalar::Bool(bool::deserialize(d)?),
            DType::U64 => AnyScalar::UInt(u64::deserialize(d)?),
            t if t.is_int() => AnyScalar::Int(i64::deserialize(d)?),
            t if t.is_float() => AnyScalar::Float(Float::deserialize(d)?.0),
            t => {
                return Err(de::Error::custom(format!(
                    "there are no literals of dtype {}",
                    t.numpy_name()
                )))
            }
        })
    }
}

const LITERAL_FIELDS: &[&str] = &["dtype", "value", "weak_type"];

fn checked_literal<E: de::Error>(l: Literal) -> Result<Literal, E> {
    if l.is_well_typed() {
        Ok(l)
    } else {
        Err(E::custom(format!(
            "the value is out of range for a literal of dtype {}",
            l.dtype.numpy_name()
        )))
    }
}

impl Serialize for Literal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.is_well_typed() {
            return Err(ser::Error::custom(format!(
                "cannot serialize literal {:?}: its value does not fit its dtype",
                self
            )));
        }
        let mut st = s.serialize_struct("Literal", 3)?;
        st.serialize_field("dtype", &self.dtype)?;
        st.serialize_field("value", &LitValueOut(self.value, self.dtype))?;
        st.serialize_field("weak_type", &self.weak_type)?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for Literal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Literal, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Literal;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a literal: {dtype, value, weak_type}")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Literal, A::Error> {
                let dtype: DType = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let value = seq
                    .next_element_seed(ValueSeed(dtype))?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                let weak_type: bool = seq.next_element()?.unwrap_or(false);
                let value = scalar_value(value, dtype)?;
                checked_literal(Literal {
                    value,
                    dtype,
                    weak_type,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Literal, A::Error> {
                let mut dtype: Option<DType> = None;
                let mut value: Option<AnyScalar> = None;
                let mut weak_type: Option<bool> = None;
                while let Some(key) = map.next_key::<LiteralField>()? {
                    match key {
                        LiteralField::DType => {
                            if dtype.is_some() {
                                return Err(de::Error::duplicate_field("dtype"));
                            }
                            dtype = Some(map.next_value()?);
                        }
                        LiteralField::Value => {
                            if value.is_some() {
                                return Err(de::Error::duplicate_field("value"));
                            }
                            value = Some(match dtype {
                                Some(t) => map.next_value_seed(ValueSeed(t))?,
                                None => map.next_value()?,
                            });
                        }
                        LiteralField::WeakType => {
                            if weak_type.is_some() {
                                return Err(de::Error::duplicate_field("weak_type"));
                            }
                            weak_type = Some(map.next_value()?);
                        }
                    }
                }
                let dtype = dtype.ok_or_else(|| de::Error::missing_field("dtype"))?;
                let value = value.ok_or_else(|| de::Error::missing_field("value"))?;
                let value = scalar_value(value, dtype)?;
                checked_literal(Literal {
                    value,
                    dtype,
                    weak_type: weak_type.unwrap_or(false),
                })
            }
        }
        d.deserialize_struct("Literal", LITERAL_FIELDS, V)
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum LiteralField {
    #[serde(rename = "dtype")]
    DType,
    Value,
    WeakType,
}

// ---------------------------------------------------------------------------------------
// Jaxprs

/// Refuses a jaxpr any of whose closed sub-jaxprs (at any depth, each shared one looked
/// at once) has a constant holding a value: the text keeps constants' types only.
fn check_no_const_values(root: &Jaxpr, closed: Option<&ClosedJaxpr>) -> Result<(), String> {
    let why = |where_: &str, i: usize, c: &crate::jaxpr::Const| {
        let what = if c.host_value().is_some() {
            "a host array"
        } else {
            "an embedder's host object, which the IR does not own"
        };
        format!(
            "cannot serialize {where_}: its constant {i} ({}) holds a value ({what}), and \
             the jaxpr text carries only the constants' types",
            c.aval()
        )
    };
    if let Some(cj) = closed {
        if let Some((i, c)) = cj
            .consts()
            .iter()
            .enumerate()
            .find(|(_, c)| c.value().is_some())
        {
            return Err(why("a closed jaxpr", i, c));
        }
    }
    let mut seen: HashSet<*const Jaxpr> = HashSet::new();
    let mut stack: Vec<&Jaxpr> = vec![root];
    while let Some(j) = stack.pop() {
        for e in j.eqns() {
            for cj in e.sub_jaxprs() {
                if !seen.insert(Arc::as_ptr(cj.jaxpr())) {
                    continue;
                }
                if let Some((i, c)) = cj
                    .consts()
                    .iter()
                    .enumerate()
                    .find(|(_, c)| c.value().is_some())
                {
                    return Err(why(
                        &format!("a sub-jaxpr of {}", e.primitive().name()),
                        i,
                        c,
                    ));
                }
                stack.push(cj.jaxpr());
            }
        }
    }
    Ok(())
}

impl Serialize for Jaxpr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        check_no_const_values(self, None).map_err(ser::Error::custom)?;
        s.serialize_str(&print_jaxpr(self))
    }
}

struct JaxprTextVisitor;

impl Visitor<'_> for JaxprTextVisitor {
    type Value = Jaxpr;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("jaxpr text")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Jaxpr, E> {
        parse_jaxpr(v).map_err(|e| E::custom(format!("the jaxpr text does not read: {e}")))
    }
}

impl<'de> Deserialize<'de> for Jaxpr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Jaxpr, D::Error> {
        d.deserialize_str(JaxprTextVisitor)
    }
}

impl Serialize for ClosedJaxpr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        check_no_const_values(self.jaxpr(), Some(self)).map_err(ser::Error::custom)?;
        s.serialize_str(&print_jaxpr(self.jaxpr()))
    }
}

impl<'de> Deserialize<'de> for ClosedJaxpr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ClosedJaxpr, D::Error> {
        let j = d.deserialize_str(JaxprTextVisitor)?;
        Ok(ClosedJaxpr::with_unknown_consts(Arc::new(j)))
    }
}

// ---------------------------------------------------------------------------------------
// Param's nested types

#[derive(Serialize)]
#[serde(rename = "DotDimensionNumbers")]
struct DotOut<'a> {
    lhs_contracting: &'a [i64],
    rhs_contracting: &'a [i64],
    lhs_batch: &'a [i64],
    rhs_batch: &'a [i64],
}

#[derive(Deserialize)]
#[serde(rename = "DotDimensionNumbers", deny_unknown_fields)]
struct DotIn {
    lhs_contracting: Vec<i64>,
    rhs_contracting: Vec<i64>,
    lhs_batch: Vec<i64>,
    rhs_batch: Vec<i64>,
}

impl Serialize for DotDimensionNumbers {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        DotOut {
            lhs_contracting: &self.lhs_contracting,
            rhs_contracting: &self.rhs_contracting,
            lhs_batch: &self.lhs_batch,
            rhs_batch: &self.rhs_batch,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for DotDimensionNumbers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DotDimensionNumbers, D::Error> {
        let x = DotIn::deserialize(d)?;
        Ok(DotDimensionNumbers {
            lhs_contracting: x.lhs_contracting,
            rhs_contracting: x.rhs_contracting,
            lhs_batch: x.lhs_batch,
            rhs_batch: x.rhs_batch,
        })
    }
}

#[derive(Serialize)]
#[serde(rename = "GatherDimensionNumbers")]
struct GatherOut<'a> {
    offset_dims: &'a [i64],
    collapsed_slice_dims: &'a [i64],
    start_index_map: &'a [i64],
    operand_batching_dims: &'a [i64],
    start_indices_batching_dims: &'a [i64],
}

#[derive(Deserialize)]
#[serde(rename = "GatherDimensionNumbers", deny_unknown_fields)]
struct GatherIn {
    offset_dims: Vec<i64>,
    collapsed_slice_dims: Vec<i64>,
    start_index_map: Vec<i64>,
    operand_batching_dims: Vec<i64>,
    start_indices_batching_dims: Vec<i64>,
}

impl Serialize for GatherDimensionNumbers {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        GatherOut {
            offset_dims: &self.offset_dims,
            collapsed_slice_dims: &self.collapsed_slice_dims,
            start_index_map: &self.start_index_map,
            operand_batching_dims: &self.operand_batching_dims,
            start_indices_batching_dims: &self.start_indices_batching_dims,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for GatherDimensionNumbers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<GatherDimensionNumbers, D::Error> {
        let x = GatherIn::deserialize(d)?;
        Ok(GatherDimensionNumbers {
            offset_dims: x.offset_dims,
            collapsed_slice_dims: x.collapsed_slice_dims,
            start_index_map: x.start_index_map,
            operand_batching_dims: x.operand_batching_dims,
            start_indices_batching_dims: x.start_indices_batching_dims,
        })
    }
}

#[derive(Serialize)]
#[serde(rename = "ScatterDimensionNumbers")]
struct ScatterOut<'a> {
    update_window_dims: &'a [i64],
    inserted_window_dims: &'a [i64],
    scatter_dims_to_operand_dims: &'a [i64],
    operand_batching_dims: &'a [i64],
    scatter_indices_batching_dims: &'a [i64],
}

#[derive(Deserialize)]
#[serde(rename = "ScatterDimensionNumbers", deny_unknown_fields)]
struct ScatterIn {
    update_window_dims: Vec<i64>,
    inserted_window_dims: Vec<i64>,
    scatter_dims_to_operand_dims: Vec<i64>,
    operand_batching_dims: Vec<i64>,
    scatter_indices_batching_dims: Vec<i64>,
}

impl Serialize for ScatterDimensionNumbers {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ScatterOut {
            update_window_dims: &self.update_window_dims,
            inserted_window_dims: &self.inserted_window_dims,
            scatter_dims_to_operand_dims: &self.scatter_dims_to_operand_dims,
            operand_batching_dims: &self.operand_batching_dims,
            scatter_indices_batching_dims: &self.scatter_indices_batching_dims,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for ScatterDimensionNumbers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ScatterDimensionNumbers, D::Error> {
        let x = ScatterIn::deserialize(d)?;
        Ok(ScatterDimensionNumbers {
            update_window_dims: x.update_window_dims,
            inserted_window_dims: x.inserted_window_dims,
            scatter_dims_to_operand_dims: x.scatter_dims_to_operand_dims,
            operand_batching_dims: x.operand_batching_dims,
            scatter_indices_batching_dims: x.scatter_indices_batching_dims,
        })
    }
}

#[derive(Serialize)]
#[serde(rename = "ConvDimensionNumbers")]
struct ConvOut<'a> {
    lhs_spec: &'a [i64],
    rhs_spec: &'a [i64],
    out_spec: &'a [i64],
}

#[derive(Deserialize)]
#[serde(rename = "ConvDimensionNumbers", deny_unknown_fields)]
struct ConvIn {
    lhs_spec: Vec<i64>,
    rhs_spec: Vec<i64>,
    out_spec: Vec<i64>,
}

impl Serialize for ConvDimensionNumbers {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ConvOut {
            lhs_spec: &self.lhs_spec,
            rhs_spec: &self.rhs_spec,
            out_spec: &self.out_spec,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for ConvDimensionNumbers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ConvDimensionNumbers, D::Error> {
        let x = ConvIn::deserialize(d)?;
        Ok(ConvDimensionNumbers {
            lhs_spec: x.lhs_spec,
            rhs_spec: x.rhs_spec,
            out_spec: x.out_spec,
        })
    }
}

impl Serialize for GatherScatterMode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.jax_name())
    }
}

impl<'de> Deserialize<'de> for GatherScatterMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<GatherScatterMode, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = GatherScatterMode;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a gather/scatter mode (\"CLIP\", \"FILL_OR_DROP\", \"PROMISE_IN_BOUNDS\")",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<GatherScatterMode, E> {
                GatherScatterMode::from_name(v)
                    .ok_or_else(|| E::custom(format!("unknown gather/scatter mode {v:?}")))
            }
        }
        d.deserialize_str(V)
    }
}

impl Serialize for Mesh {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.axes().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Mesh {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Mesh, D::Error> {
        let axes = Vec::<(Arc<str>, i64)>::deserialize(d)?;
        Mesh::new(axes).map_err(|e| de::Error::custom(format!("not a mesh: {e}")))
    }
}

impl Serialize for PartitionSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.entries().serialize(s)
    }
}

impl<'de> Deserialize<'de> for PartitionSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PartitionSpec, D::Error> {
        Ok(PartitionSpec::new(Vec::<Vec<Arc<str>>>::deserialize(d)?))
    }
}

/// An opaque host value, written as its printed name.
impl Serialize for Opaque {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// An opaque value with the name read and no object ([`Opaque::named`]).
impl<'de> Deserialize<'de> for Opaque {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Opaque, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Opaque;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the name of a host object")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Opaque, E> {
                Ok(Opaque::named(v))
            }
        }
        d.deserialize_str(V)
    }
}

// ---------------------------------------------------------------------------------------
// Param, Params

#[derive(Serialize)]
#[serde(rename = "Param")]
enum ParamOut<'a> {
    None,
    Bool(bool),
    Int(i64),
    Float(Float),
    Str(&'a str),
    Ints(&'a [i64]),
    Bools(&'a [bool]),
    DType(DType),
    DotDims(&'a DotDimensionNumbers),
    GatherDims(&'a GatherDimensionNumbers),
    ScatterDims(&'a ScatterDimensionNumbers),
    Mode(GatherScatterMode),
    ConvDims(&'a ConvDimensionNumbers),
    Padding(&'a [PadDim]),
    Jaxpr(&'a ClosedJaxpr),
    Jaxprs(&'a [ClosedJaxpr]),
    Opaque(&'a Opaque),
    Mesh(&'a Mesh),
    Spec(&'a PartitionSpec),
    Specs(&'a [PartitionSpec]),
    Names(&'a [Arc<str>]),
    NameSet(&'a [Arc<str>]),
    Pairs(&'a [(i64, i64)]),
    Avals(&'a [AbstractValue]),
}

#[derive(Deserialize)]
#[serde(rename = "Param")]
enum ParamIn {
    None,
    Bool(bool),
    Int(i64),
    Float(Float),
    Str(Arc<str>),
    Ints(Vec<i64>),
    Bools(Vec<bool>),
    DType(DType),
    DotDims(DotDimensionNumbers),
    GatherDims(GatherDimensionNumbers),
    ScatterDims(ScatterDimensionNumbers),
    Mode(GatherScatterMode),
    ConvDims(ConvDimensionNumbers),
    Padding(Vec<PadDim>),
    Jaxpr(ClosedJaxpr),
    Jaxprs(Vec<ClosedJaxpr>),
    Opaque(Opaque),
    Mesh(Mesh),
    Spec(PartitionSpec),
    Specs(Vec<PartitionSpec>),
    Names(Vec<Arc<str>>),
    NameSet(Vec<Arc<str>>),
    Pairs(Vec<(i64, i64)>),
    Avals(Vec<AbstractValue>),
}

impl Serialize for Param {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Param::None => ParamOut::None,
            Param::Bool(b) => ParamOut::Bool(*b),
            Param::Int(i) => ParamOut::Int(*i),
            Param::Float(x) => ParamOut::Float(Float(*x)),
            Param::Str(v) => ParamOut::Str(v),
            Param::Ints(v) => ParamOut::Ints(v),
            Param::Bools(v) => ParamOut::Bools(v),
            Param::DType(t) => ParamOut::DType(*t),
            Param::DotDims(v) => ParamOut::DotDims(v),
            Param::GatherDims(v) => ParamOut::GatherDims(v),
            Param::ScatterDims(v) => ParamOut::ScatterDims(v),
            Param::Mode(m) => ParamOut::Mode(*m),
            Param::ConvDims(v) => ParamOut::ConvDims(v),
            Param::Padding(v) => ParamOut::Padding(v),
            Param::Jaxpr(j) => ParamOut::Jaxpr(j),
            Param::Jaxprs(js) => ParamOut::Jaxprs(js),
            Param::Opaque(o) => ParamOut::Opaque(o),
            Param::Mesh(m) => ParamOut::Mesh(m),
            Param::Spec(p) => ParamOut::Spec(p),
            Param::Specs(v) => ParamOut::Specs(v),
            Param::Names(v) => ParamOut::Names(v),
            Param::NameSet(v) => ParamOut::NameSet(v),
            Param::Pairs(v) => ParamOut::Pairs(v),
            Param::Avals(v) => ParamOut::Avals(v),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Param {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Param, D::Error> {
        Ok(match ParamIn::deserialize(d)? {
            ParamIn::None => Param::None,
            ParamIn::Bool(b) => Param::Bool(b),
            ParamIn::Int(i) => Param::Int(i),
            ParamIn::Float(x) => Param::Float(x.0),
            ParamIn::Str(v) => Param::Str(v),
            ParamIn::Ints(v) => Param::Ints(v.into()),
            ParamIn::Bools(v) => Param::Bools(v.into()),
            ParamIn::DType(t) => Param::DType(t),
            ParamIn::DotDims(v) => Param::DotDims(Arc::new(v)),
            ParamIn::GatherDims(v) => Param::GatherDims(Arc::new(v)),
            ParamIn::ScatterDims(v) => Param::ScatterDims(Arc::new(v)),
            ParamIn::Mode(m) => Param::Mode(m),
            ParamIn::ConvDims(v) => Param::ConvDims(Arc::new(v)),
            ParamIn::Padding(v) => Param::Padding(v.into()),
            ParamIn::Jaxpr(j) => Param::Jaxpr(j),
            ParamIn::Jaxprs(js) => Param::Jaxprs(Arc::new(js)),
            ParamIn::Opaque(o) => Param::Opaque(o),
            ParamIn::Mesh(m) => Param::Mesh(Arc::new(m)),
            ParamIn::Spec(p) => Param::Spec(Arc::new(p)),
            ParamIn::Specs(v) => Param::Specs(v.into()),
            ParamIn::Names(v) => Param::Names(v.into()),
            ParamIn::NameSet(v) => Param::NameSet(v.into()),
            ParamIn::Pairs(v) => Param::Pairs(v.into()),
            ParamIn::Avals(v) => Param::Avals(v.into()),
        })
    }
}

impl Serialize for Params {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (name, value) in self.iter() {
            m.serialize_entry(name, value)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Params, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Params;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from param names to params")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params, A::Error> {
                let mut pairs: Vec<(String, Param)> = Vec::new();
                let mut names: HashSet<String> = HashSet::new();
                while let Some((name, value)) = map.next_entry::<String, Param>()? {
                    if !names.insert(name.clone()) {
                        return Err(de::Error::custom(format!("param {name:?} is given twice")));
                    }
                    pairs.push((name, value));
                }
                Ok(Params::new(pairs))
            }
        }
        d.deserialize_map(V)
    }
}
