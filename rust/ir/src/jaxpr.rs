//! The jaxpr: variables in an arena named by typed indices, equations that own their
//! inputs, outputs and params, and closed jaxprs (a jaxpr plus its constants).
//!
//! Nothing here can be built directly: [`crate::builder::JaxprBuilder`] is the only way
//! to make a [`Jaxpr`], and it typechecks what it builds.

use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::params::{Param, Params};
use crate::primitive::Primitive;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

macro_rules! entity {
    ($(#[$doc:meta])* $name:ident, $sigil:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl $name {
            /// The id at position `index` of its arena.
            ///
            /// # Panics
            /// If `index` does not fit in a `u32` (an arena holds at most `u32::MAX`
            /// entries); [`Self::try_from_index`] returns `None` instead.
            pub fn from_index(index: usize) -> $name {
                $name(u32::try_from(index).expect("arena larger than u32::MAX entries"))
            }
            /// The id at position `index` of its arena, if `index` fits in a `u32`.
            pub fn try_from_index(index: usize) -> Option<$name> {
                u32::try_from(index).ok().map($name)
            }
            /// Position in its arena.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($sigil, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// A variable of one jaxpr (meaningless in another).
    ///
    /// # Examples
    /// ```
    /// use ferrax_ir::{text::parse_jaxpr, VarId};
    /// let j = parse_jaxpr("{ lambda ; a:f32[3] b:i32[]. let c:f32[3] = neg a in (c,) }")?;
    /// let b: VarId = j.invars()[1];
    /// assert_eq!(j.var_aval(b).to_string(), "i32[]");
    /// // An id is an index into its jaxpr's arena, printed `v<index>` outside the text.
    /// assert_eq!(VarId::from_index(b.index()), b);
    /// assert_eq!(VarId::from_index(7).to_string(), "v7");
    /// assert!(j.get_var_aval(VarId::from_index(j.num_vars())).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    VarId,
    "v"
);
entity!(
    /// A literal of one jaxpr.
    LitId,
    "l"
);
entity!(
    /// An equation of one jaxpr, by position.
    EqnId,
    "e"
);
entity!(
    /// An interned abstract value of one jaxpr.
    AvalId,
    "t"
);

/// The value of a scalar literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LitValue {
    /// A boolean.
    Bool(bool),
    /// An integer (any integer dtype). A `u64` value is held as its bits: one above
    /// `i64::MAX` is negative here (as the evaluator holds `u64` data).
    Int(i64),
    /// A float (any float dtype), as written: `0.1:f32[]` keeps the f64 value 0.1, as a
    /// weakly typed Python float does in JAX. Evaluation and lowering round it to the
    /// dtype, so `0.1:f32[]` and `0.10000000149011612:f32[]` compute the same value.
    Float(f64),
}

/// A typed scalar literal such as `2.0:f32[]`.
///
/// # Examples
/// ```
/// use ferrax_ir::{DType, LitValue, Literal};
/// let l = Literal::new(LitValue::Int(-1), DType::I8);
/// assert_eq!((l.to_string(), l.aval().to_string()), ("-1:i8[]".to_owned(), "i8[]".to_owned()));
/// // The value must fit the dtype and be of its kind.
/// assert!(l.is_well_typed());
/// assert!(!Literal::new(LitValue::Int(300), DType::I8).is_well_typed());
/// assert!(!Literal::new(LitValue::Float(1.0), DType::I32).is_well_typed());
/// // A `u64` above `i64::MAX` is held as its bits.
/// assert_eq!(Literal::u64(u64::MAX).value, LitValue::Int(-1));
/// assert_eq!(Literal::u64(u64::MAX).to_string(), "18446744073709551615:u64[]");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Literal {
    /// The value.
    pub value: LitValue,
    /// Its dtype; the value's kind agrees with it (the typechecker checks).
    pub dtype: DType,
    /// Weakly typed (a Python scalar).
    pub weak_type: bool,
}

impl Literal {
    /// A strongly typed literal of this value and dtype (see [`Literal::is_well_typed`]
    /// for the values a dtype admits).
    pub fn new(value: LitValue, dtype: DType) -> Literal {
        Literal {
            value,
            dtype,
            weak_type: false,
        }
    }

    /// `x:f32[]`.
    ///
    /// ```
    /// use ferrax_ir::Literal;
    /// assert_eq!(Literal::f32(1.5).to_string(), "1.5:f32[]");
    /// assert_eq!(Literal::i32(-2).weak().to_string(), "-2:i32[]");
    /// assert!(Literal::i32(-2).weak().weak_type);
    /// ```
    pub fn f32(x: f32) -> Literal {
        Literal::new(LitValue::Float(f64::from(x)), DType::F32)
    }

    /// `x:f64[]`.
    pub fn f64(x: f64) -> Literal {
        Literal::new(LitValue::Float(x), DType::F64)
    }

    /// `x:i32[]`.
    pub fn i32(x: i32) -> Literal {
        Literal::new(LitValue::Int(i64::from(x)), DType::I32)
    }

    /// `x:i64[]`.
    pub fn i64(x: i64) -> Literal {
        Literal::new(LitValue::Int(x), DType::I64)
    }

    /// `x:u32[]`.
    pub fn u32(x: u32) -> Literal {
        Literal::new(LitValue::Int(i64::from(x)), DType::U32)
    }

    /// `x:u64[]` (held as its bits: see [`LitValue::Int`]).
    pub fn u64(x: u64) -> Literal {
        Literal::new(LitValue::Int(x as i64), DType::U64)
    }

    /// `True:bool[]` or `False:bool[]`.
    pub fn bool(b: bool) -> Literal {
        Literal::new(LitValue::Bool(b), DType::Bool)
    }

    /// The same literal, weakly typed (a Python scalar's type, as JAX gives `x * 2.0`).
    pub fn weak(mut self) -> Literal {
        self.weak_type = true;
        self
    }

    /// The literal's abstract value (a scalar).
    pub fn aval(&self) -> AbstractValue {
        AbstractValue::scalar(self.dtype).with_weak_type(self.weak_type)
    }

    /// Whether the value's kind fits the dtype (and the value is in the dtype's range).
    pub fn is_well_typed(&self) -> bool {
        match (self.value, self.dtype) {
            (LitValue::Bool(_), DType::Bool) => true,
            (LitValue::Int(v), d) if d.is_int() => int_in_range(v, d),
            (LitValue::Float(_), d) if d.is_float() => true,
            _ => false,
        }
    }
}

fn int_in_range(v: i64, d: DType) -> bool {
    match d {
        DType::I8 => i8::try_from(v).is_ok(),
        DType::I16 => i16::try_from(v).is_ok(),
        DType::I32 => i32::try_from(v).is_ok(),
        DType::I64 => true,
        DType::U8 => u8::try_from(v).is_ok(),
        DType::U16 => u16::try_from(v).is_ok(),
        DType::U32 => u32::try_from(v).is_ok(),
        // Every bit pattern is a u64 value.
        DType::U64 => true,
        _ => false,
    }
}

/// An equation input or a jaxpr output: a variable or a literal of the same jaxpr.
///
/// # Examples
/// ```
/// use ferrax_ir::{text::parse_jaxpr, Atom, LitValue};
/// let j = parse_jaxpr("{ lambda ; a:i32[]. let b:i32[] = add a 1:i32[] in (b, 7:i32[]) }")?;
/// let [x, one] = j.eqns()[0].inputs() else { unreachable!() };
/// assert_eq!(x.as_var(), Some(j.invars()[0]));
/// assert_eq!(Atom::from(j.invars()[0]), *x);
/// let Atom::Lit(one) = *one else { unreachable!() };
/// assert_eq!(j.literal(one).value, LitValue::Int(1));
/// // An output may be a literal too; every atom has a type.
/// assert_eq!(j.outvars()[1].as_var(), None);
/// assert_eq!(j.atom_aval(j.outvars()[1]).to_string(), "i32[]");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Atom {
    /// A variable.
    Var(VarId),
    /// A literal.
    Lit(LitId),
}

impl fmt::Display for Literal {
    /// As jaxpr text writes it: `2.0:f32[]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::text::format_literal(self))
    }
}

impl From<VarId> for Atom {
    fn from(v: VarId) -> Atom {
        Atom::Var(v)
    }
}

impl From<LitId> for Atom {
    fn from(l: LitId) -> Atom {
        Atom::Lit(l)
    }
}

impl Atom {
    /// The variable, if the atom is one.
    pub fn as_var(self) -> Option<VarId> {
        match self {
            Atom::Var(v) => Some(v),
            Atom::Lit(_) => None,
        }
    }
}

/// One equation: `outvars = primitive[params] inputs`.
///
/// # Examples
/// ```
/// use ferrax_ir::{text::parse_jaxpr, Builtin};
/// let j = parse_jaxpr(
///     "{ lambda ; a:f32[2,3]. let b:f32[2] = reduce_sum[axes=(1,) out_sharding=None] a; \
///      c:f32[2] = jit[name=g jaxpr={ lambda ; d:f32[2]. let e:f32[2] = exp d in (e,) }] b \
///      in (c,) }",
/// )?;
/// let sum = &j.eqns()[0];
/// assert_eq!(sum.builtin(), Some(Builtin::ReduceSum));
/// assert_eq!(sum.params().get_ints("axes"), Some(&[1][..]));
/// assert_eq!((sum.inputs().len(), sum.outvars().len()), (1, 1));
/// assert!(!sum.has_effect());
/// // Its `Display` shows ids (an equation does not know its jaxpr's names) ...
/// assert_eq!(sum.to_string(), "v1 = reduce_sum[axes=(1,) out_sharding=None] v0");
/// // ... and `Jaxpr::eqn_text` the names of the jaxpr's text.
/// assert_eq!(j.eqn_text(0).as_deref(), Some("b:f32[2] = reduce_sum[axes=(1,) out_sharding=None] a"));
/// // A higher-order equation's bodies are its params.
/// let call = &j.eqns()[1];
/// let body = call.sub_jaxprs().next().expect("jit has a body");
/// assert_eq!(body.jaxpr().eqns()[0].primitive().name(), "exp");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Eqn {
    pub(crate) primitive: Primitive,
    pub(crate) inputs: Box<[Atom]>,
    pub(crate) outvars: Box<[VarId]>,
    pub(crate) params: Params,
}

impl Eqn {
    /// The primitive applied.
    pub fn primitive(&self) -> &Primitive {
        &self.primitive
    }
    /// The operands.
    pub fn inputs(&self) -> &[Atom] {
        &self.inputs
    }
    /// The variables this equation binds.
    pub fn outvars(&self) -> &[VarId] {
        &self.outvars
    }
    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }
    /// The equation's only output.
    ///
    /// # Panics
    /// If it has no output or more than one.
    pub fn outvar(&self) -> VarId {
        match *self.outvars {
            [v] => v,
            ref vs => panic!(
                "{} has {} outputs, not one",
                self.primitive.name(),
                vs.len()
            ),
        }
    }
    /// The built-in primitive applied, if it is one (not an extension).
    pub fn builtin(&self) -> Option<crate::primitive::Builtin> {
        self.primitive.as_builtin()
    }
    /// The sub-jaxprs among the params, in param order.
    pub fn sub_jaxprs(&self) -> impl Iterator<Item = &ClosedJaxpr> {
        self.params
            .iter()
            .flat_map(|(_, p)| -> Box<dyn Iterator<Item = &ClosedJaxpr> + '_> {
                match p {
                    Param::Jaxpr(j) => Box::new(std::iter::once(j)),
                    Param::Jaxprs(js) => Box::new(js.iter()),
                    _ => Box::new(std::iter::empty()),
                }
            })
    }
    /// Whether the equation has an effect (a host callback run for its side effects,
    /// here or in a sub-jaxpr at any depth): passes never drop such an equation, even
    /// when nothing uses its outputs, and keep effectful equations in their order.
    /// Constant time: a jaxpr records whether it has effects when it is built.
    pub fn has_effect(&self) -> bool {
        self.primitive.as_builtin().is_some_and(|b| b.has_effect())
            || self.sub_jaxprs().any(|j| j.jaxpr().has_effects())
    }
}

/// Writes params as an equation's one-line form shows them, `[name=short name=short]`
/// (each value as [`crate::text::format_param_short`] gives it), nothing when there are
/// none: [`Eqn`]'s `Display` and the typechecker's equation lines.
pub(crate) fn write_params_short(w: &mut impl fmt::Write, params: &Params) -> fmt::Result {
    if params.is_empty() {
        return Ok(());
    }
    w.write_char('[')?;
    for (i, (n, p)) in params.iter().enumerate() {
        let sep = if i > 0 { " " } else { "" };
        write!(w, "{sep}{n}={}", crate::text::format_param_short(p))?;
    }
    w.write_char(']')
}

/// Types joined by `, ` (`f32[3], i32[]`): [`Jaxpr`]'s `Debug` and
/// [`crate::typecheck::JaxprType`]'s `Display`.
pub(crate) fn join_avals(avals: &[AbstractValue]) -> String {
    avals
        .iter()
        .map(AbstractValue::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The equation on one line, its variables and literals by id (`v2 = add v0 l0`) and
/// nested jaxprs as `{...}`: an equation does not know its jaxpr's names or literals.
/// [`Jaxpr::eqn_text`] prints one with the names the jaxpr's text gives.
impl fmt::Display for Eqn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.outvars.iter().enumerate() {
            write!(f, "{}{v}", if i > 0 { " " } else { "" })?;
        }
        if !self.outvars.is_empty() {
            f.write_str(" = ")?;
        }
        f.write_str(self.primitive.name())?;
        write_params_short(f, &self.params)?;
        for a in self.inputs.iter() {
            match a {
                Atom::Var(v) => write!(f, " {v}")?,
                Atom::Lit(l) => write!(f, " {l}")?,
            }
        }
        Ok(())
    }
}

/// A typed, immutable jaxpr. See the crate docs for the invariants every `Jaxpr` holds.
///
/// ```
/// use ferrax_ir::{text::parse_jaxpr, Atom};
/// let j = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) }")?;
/// let e = &j.eqns()[0];
/// assert_eq!(e.primitive().name(), "mul");
/// let Atom::Lit(two) = e.inputs()[1] else { unreachable!() };
/// assert_eq!(j.literal(two).to_string(), "2.0:f32[]");
/// assert_eq!(j.var_aval(e.outvar()).to_string(), "f32[3]");
/// assert_eq!(j.eqn_text(0).as_deref(), Some("b:f32[3] = mul a 2.0:f32[]"));
/// assert_eq!(format!("{j:?}"), "Jaxpr { consts: [], ins: [f32[3]], outs: [f32[3]], eqns: 1 }");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Jaxpr {
    pub(crate) avals: Box<[AbstractValue]>,
    pub(crate) var_avals: Box<[AvalId]>,
    pub(crate) literals: Box<[Literal]>,
    pub(crate) constvars: Box<[VarId]>,
    pub(crate) invars: Box<[VarId]>,
    pub(crate) eqns: Box<[Eqn]>,
    pub(crate) outvars: Box<[Atom]>,
    /// Whether some equation has an effect (see [`Eqn::has_effect`]).
    pub(crate) effects: bool,
}

impl Jaxpr {
    /// Whether some equation has an effect (a host callback for its side effects, at
    /// any depth): see [`Eqn::has_effect`].
    pub fn has_effects(&self) -> bool {
        self.effects
    }
    /// The constant variables (bound to the constants of a [`ClosedJaxpr`]).
    pub fn constvars(&self) -> &[VarId] {
        &self.constvars
    }
    /// The input variables.
    pub fn invars(&self) -> &[VarId] {
        &self.invars
    }
    /// The equations, in an order where each follows the definitions of its inputs.
    pub fn eqns(&self) -> &[Eqn] {
        &self.eqns
    }
    /// Equation `index` on one line, with the names and types the jaxpr's text gives
    /// (`c:f32[3] = add a 1.0:f32[]`, nested jaxprs as `{...}`); `None` past the end.
    /// Linear in the jaxpr's size (it names the variables first).
    pub fn eqn_text(&self, index: usize) -> Option<String> {
        (index < self.eqns.len()).then(|| crate::typecheck::Parts::of(self).eqn_line(index))
    }
    /// The outputs.
    pub fn outvars(&self) -> &[Atom] {
        &self.outvars
    }
    /// Number of variables in the arena.
    pub fn num_vars(&self) -> usize {
        self.var_avals.len()
    }
    /// The type of a variable of this jaxpr. Every id the jaxpr holds (its invars,
    /// constvars, equation inputs and outputs, outvars) is one; for an id from elsewhere,
    /// use [`Jaxpr::get_var_aval`].
    ///
    /// # Panics
    /// If `var` is out of range for this jaxpr's variables (`var.index() >=
    /// self.num_vars()`), as an id made by another jaxpr or builder may be. An id of
    /// another jaxpr that happens to be in range is not detected: it names a variable of
    /// this one (ids are only meaningful in the jaxpr that made them).
    pub fn var_aval(&self, var: VarId) -> &AbstractValue {
        &self.avals[self.var_avals[var.index()].index()]
    }
    /// The type of a variable of this jaxpr, or `None` if `var` is out of range (an id
    /// from another jaxpr may also be in range: ids carry no jaxpr identity).
    pub fn get_var_aval(&self, var: VarId) -> Option<&AbstractValue> {
        self.var_avals
            .get(var.index())
            .and_then(|id| self.avals.get(id.index()))
    }
    /// Whether `var` is in range for this jaxpr's variables.
    pub fn has_var(&self, var: VarId) -> bool {
        var.index() < self.var_avals.len()
    }
    /// A literal of this jaxpr.
    ///
    /// # Panics
    /// If `lit` is out of range for this jaxpr's literals (`lit.index() >=
    /// self.literals().len()`); [`Jaxpr::get_literal`] returns `None` instead.
    pub fn literal(&self, lit: LitId) -> &Literal {
        &self.literals[lit.index()]
    }
    /// A literal of this jaxpr, or `None` if `lit` is out of range.
    pub fn get_literal(&self, lit: LitId) -> Option<&Literal> {
        self.literals.get(lit.index())
    }
    /// All literals of this jaxpr.
    pub fn literals(&self) -> &[Literal] {
        &self.literals
    }
    /// The type of an atom of this jaxpr.
    ///
    /// # Panics
    /// If the atom's variable or literal id is out of range for this jaxpr (see
    /// [`Jaxpr::var_aval`] and [`Jaxpr::literal`]); [`Jaxpr::get_atom_aval`] returns
    /// `None` instead.
    pub fn atom_aval(&self, atom: Atom) -> AbstractValue {
        match atom {
            Atom::Var(v) => self.var_aval(v).clone(),
            Atom::Lit(l) => self.literal(l).aval(),
        }
    }
    /// The type of an atom of this jaxpr, or `None` if its id is out of range.
    pub fn get_atom_aval(&self, atom: Atom) -> Option<AbstractValue> {
        match atom {
            Atom::Var(v) => self.get_var_aval(v).cloned(),
            Atom::Lit(l) => self.get_literal(l).map(Literal::aval),
        }
    }
    /// The types of the constant variables.
    pub fn const_avals(&self) -> Vec<AbstractValue> {
        self.constvars
            .iter()
            .map(|&v| self.var_aval(v).clone())
            .collect()
    }
    /// The types of the inputs.
    pub fn in_avals(&self) -> Vec<AbstractValue> {
        self.invars
            .iter()
            .map(|&v| self.var_aval(v).clone())
            .collect()
    }
    /// The types of the outputs.
    pub fn out_avals(&self) -> Vec<AbstractValue> {
        self.outvars.iter().map(|&a| self.atom_aval(a)).collect()
    }
    /// Approximate heap and inline bytes this jaxpr holds (not counting shared sub-jaxprs
    /// and constants, nor allocator overhead).
    pub fn approx_bytes(&self) -> usize {
        use std::mem::size_of;
        let mut n = size_of::<Jaxpr>();
        n += self.avals.len() * size_of::<AbstractValue>();
        n += self.var_avals.len() * size_of::<AvalId>();
        n += self.literals.len() * size_of::<Literal>();
        n += (self.constvars.len() + self.invars.len()) * size_of::<VarId>();
        n += self.outvars.len() * size_of::<Atom>();
        for e in self.eqns.iter() {
            n += size_of::<Eqn>();
            n += e.inputs.len() * size_of::<Atom>();
            n += e.outvars.len() * size_of::<VarId>();
            n += e.params.len() * size_of::<(crate::params::ParamName, Param)>();
        }
        n
    }
}

/// A summary: the input and output types and the number of equations (the text is
/// [`fmt::Display`]'s).
impl fmt::Debug for Jaxpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Jaxpr {{ consts: [{}], ins: [{}], outs: [{}], eqns: {} }}",
            join_avals(&self.const_avals()),
            join_avals(&self.in_avals()),
            join_avals(&self.out_avals()),
            self.eqns.len()
        )
    }
}

impl fmt::Display for Jaxpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::text::print_jaxpr(self))
    }
}

// Dropping a deeply nested jaxpr recursively would overflow the stack: take the
// sub-jaxprs this is the last owner of and drop them from a worklist instead.
impl Drop for Jaxpr {
    fn drop(&mut self) {
        let mut pending: Vec<Jaxpr> = Vec::new();
        take_owned_subjaxprs(&mut self.eqns, &mut pending);
        while let Some(mut j) = pending.pop() {
            take_owned_subjaxprs(&mut j.eqns, &mut pending);
            // `j` drops here with no sub-jaxpr it solely owns left.
        }
    }
}

fn take_owned_subjaxprs(eqns: &mut Box<[Eqn]>, out: &mut Vec<Jaxpr>) {
    for eqn in eqns.iter_mut() {
        if !eqn
            .params
            .iter()
            .any(|(_, p)| matches!(p, Param::Jaxpr(_) | Param::Jaxprs(_)))
        {
            continue;
        }
        let params = std::mem::take(&mut eqn.params);
        for (_, p) in params.into_pairs() {
            match p {
                Param::Jaxpr(cj) => cj.release_into(out),
                Param::Jaxprs(list) => {
                    if let Ok(list) = Arc::try_unwrap(list) {
                        // An `Arc<[T]>` that is uniquely owned: move the items out.
                        for cj in list {
                            cj.release_into(out);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// A constant of a [`ClosedJaxpr`]: its type and, usually, its value.
///
/// The crate's own value type is [`crate::eval::HostArray`] ([`Const::host`],
/// [`Const::host_value`]): the evaluator reads it, and a Rust tool building closed
/// jaxprs uses it. An embedder may hold its own objects instead ([`Const::new`]; the
/// Python bindings keep their arrays so), which the crate passes along without reading.
/// A constant read from text has a type but no value ([`Const::unknown`]).
///
/// ```
/// use ferrax_ir::eval::HostArray;
/// use ferrax_ir::{Const, DType, Shape};
/// let c = Const::host(HostArray::from_f64(Shape::new(&[2])?, DType::F32, vec![1.0, 2.0])?);
/// assert_eq!(c.aval().to_string(), "f32[2]");
/// assert_eq!(c.host_value().and_then(|a| a.as_f64()), Some(&[1.0, 2.0][..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Const {
    aval: AbstractValue,
    value: Option<Arc<dyn Any + Send + Sync>>,
}

impl Const {
    /// A constant holding a host array (its type is the array's).
    pub fn host(array: crate::eval::HostArray) -> Const {
        Const {
            aval: AbstractValue::new(array.shape.clone(), array.dtype),
            value: Some(Arc::new(array)),
        }
    }

    /// The value as a host array, if it is one ([`Const::host`]).
    pub fn host_value(&self) -> Option<&crate::eval::HostArray> {
        self.value.as_ref()?.downcast_ref()
    }

    /// A constant with a value of the embedder's own type (see the type's docs).
    pub fn new(aval: AbstractValue, value: Arc<dyn Any + Send + Sync>) -> Const {
        Const {
            aval,
            value: Some(value),
        }
    }
    /// A constant whose value is unknown (read from text).
    pub fn unknown(aval: AbstractValue) -> Const {
        Const { aval, value: None }
    }
    /// Its type.
    pub fn aval(&self) -> &AbstractValue {
        &self.aval
    }
    /// Its value, if known.
    pub fn value(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        self.value.as_ref()
    }
}

impl fmt::Debug for Const {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Const({})", self.aval)
    }
}

/// A jaxpr with values for its constant variables. Cheap to clone (shared).
///
/// ```
/// use std::sync::Arc;
/// use ferrax_ir::eval::{eval_closed_jaxpr, HostArray};
/// use ferrax_ir::{text::parse_jaxpr, ClosedJaxpr, Const, DType, Shape};
/// let j = parse_jaxpr("{ lambda a:f32[2]; b:f32[2]. let c:f32[2] = add a b in (c,) }")?;
/// let shape = Shape::new(&[2])?;
/// let bias = Const::host(HostArray::from_f64(shape.clone(), DType::F32, vec![10.0, 20.0])?);
/// let closed = ClosedJaxpr::new(Arc::new(j), vec![bias])?;
/// let x = HostArray::from_f64(shape, DType::F32, vec![1.0, 2.0])?;
/// let out = eval_closed_jaxpr(&closed, &[x])?;
/// assert_eq!(out[0].as_f64(), Some(&[11.0, 22.0][..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClosedJaxpr {
    jaxpr: Arc<Jaxpr>,
    consts: Arc<[Const]>,
}

/// Why a jaxpr and constants do not make a closed jaxpr.
///
/// # Examples
/// ```
/// use ferrax_ir::jaxpr::CloseError;
/// use ferrax_ir::{text::parse_jaxpr, AbstractValue, ClosedJaxpr, Const, DType};
/// use std::sync::Arc;
/// let j = Arc::new(parse_jaxpr("{ lambda a:f32[2]; . let  in (a,) }")?);
/// let e = ClosedJaxpr::new(j.clone(), vec![]).unwrap_err();
/// assert_eq!(e, CloseError::Count { expected: 1, got: 0 });
/// let wrong = Const::unknown(AbstractValue::array(DType::I32, &[2])?);
/// assert!(matches!(ClosedJaxpr::new(j, vec![wrong]), Err(CloseError::Type { index: 0, .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseError {
    /// The number of constants differs from the number of constvars.
    Count {
        /// Constvars of the jaxpr.
        expected: usize,
        /// Constants given.
        got: usize,
    },
    /// A constant's type differs from its constvar's.
    Type {
        /// Position of the constant.
        index: usize,
        /// The constvar's type.
        expected: AbstractValue,
        /// The constant's type.
        got: AbstractValue,
    },
}

impl fmt::Display for CloseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseError::Count { expected, got } => {
                write!(
                    f,
                    "the jaxpr has {expected} constvars but {got} constants were given"
                )
            }
            CloseError::Type {
                index,
                expected,
                got,
            } => write!(
                f,
                "constant {index} has type {got} but its constvar has type {expected}"
            ),
        }
    }
}

impl std::error::Error for CloseError {}

impl ClosedJaxpr {
    /// Closes a jaxpr over constants, one per constvar, of the constvars' types.
    pub fn new(jaxpr: Arc<Jaxpr>, consts: Vec<Const>) -> Result<ClosedJaxpr, CloseError> {
        if consts.len() != jaxpr.constvars.len() {
            return Err(CloseError::Count {
                expected: jaxpr.constvars.len(),
                got: consts.len(),
            });
        }
        for (index, (c, &v)) in consts.iter().zip(jaxpr.constvars.iter()).enumerate() {
            let expected = jaxpr.var_aval(v);
            if !expected.same_type(&c.aval) {
                return Err(CloseError::Type {
                    index,
                    expected: expected.clone(),
                    got: c.aval.clone(),
                });
            }
        }
        Ok(ClosedJaxpr {
            jaxpr,
            consts: consts.into(),
        })
    }

    /// Closes a jaxpr whose constant values are unknown (each constvar gets
    /// [`Const::unknown`]); used for jaxprs read from text.
    pub fn with_unknown_consts(jaxpr: Arc<Jaxpr>) -> ClosedJaxpr {
        let consts: Vec<Const> = jaxpr
            .constvars
            .iter()
            .map(|&v| Const::unknown(jaxpr.var_aval(v).clone()))
            .collect();
        ClosedJaxpr {
            jaxpr,
            consts: consts.into(),
        }
    }

    /// Closes a jaxpr whose constvars are known to match `consts` (passes keep
    /// constvars as they are).
    pub(crate) fn from_parts(jaxpr: Arc<Jaxpr>, consts: Vec<Const>) -> ClosedJaxpr {
        debug_assert_eq!(jaxpr.constvars.len(), consts.len());
        ClosedJaxpr {
            jaxpr,
            consts: consts.into(),
        }
    }

    /// The jaxpr.
    pub fn jaxpr(&self) -> &Arc<Jaxpr> {
        &self.jaxpr
    }
    /// The constants, one per constvar.
    pub fn consts(&self) -> &[Const] {
        &self.consts
    }
    /// Input types (constvars excluded).
    pub fn in_avals(&self) -> Vec<AbstractValue> {
        self.jaxpr.in_avals()
    }
    /// Output types.
    pub fn out_avals(&self) -> Vec<AbstractValue> {
        self.jaxpr.out_avals()
    }
    /// True when both share the same jaxpr and constants.
    pub fn ptr_eq(&self, other: &ClosedJaxpr) -> bool {
        Arc::ptr_eq(&self.jaxpr, &other.jaxpr) && Arc::ptr_eq(&self.consts, &other.consts)
    }

    fn release_into(self, out: &mut Vec<Jaxpr>) {
        if let Ok(j) = Arc::try_unwrap(self.jaxpr) {
            out.push(j);
        }
    }
}

impl fmt::Display for ClosedJaxpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::text::print_jaxpr(&self.jaxpr))
    }
}
