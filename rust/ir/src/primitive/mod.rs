//! The primitive catalogue: a closed enum of built-ins, each with its parameter schema and
//! shape/dtype rule, plus a trait for extension primitives defined elsewhere (from Python).

mod rules;

use crate::aval::AbstractValue;
use crate::jaxpr::ClosedJaxpr;
use crate::params::Params;
use crate::sharding::AxisEnv;
use std::fmt;
use std::sync::Arc;

pub(crate) use rules::unshard_aval;
pub use rules::RuleError;
pub use rules::{conv_dilate_dim, ConvGeometry};
pub(crate) use rules::{dilate, select_comparison, Window};

/// The kind of value a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// An integer.
    Int,
    /// A boolean.
    Bool,
    /// An integer or a boolean (`scan`'s `unroll`).
    IntOrBool,
    /// A string.
    Str,
    /// A string or `None` (`precision`).
    OptStr,
    /// A tuple of integers.
    Ints,
    /// A tuple of integers or `None`.
    OptInts,
    /// A tuple of booleans.
    Bools,
    /// A dtype.
    DType,
    /// A dtype or `None`.
    OptDType,
    /// `dot_general` dimension numbers.
    DotDims,
    /// A closed jaxpr.
    Jaxpr,
    /// A tuple of closed jaxprs.
    Jaxprs,
    /// Only `None` (JAX's sharding-style params, accepted so JAX's text reads).
    NoneOnly,
    /// `gather`'s dimension numbers.
    GatherDims,
    /// `scatter`'s dimension numbers.
    ScatterDims,
    /// A `GatherScatterMode`.
    GatherMode,
    /// `conv_general_dilated`'s `ConvDimensionNumbers`.
    ConvDims,
    /// A Python scalar (bool, int or float) or `None` (`gather`'s `fill_value`).
    OptScalar,
    /// A jaxpr or `None` (`scatter`'s `update_jaxpr`).
    OptJaxpr,
    /// A host value the IR carries but does not interpret (`custom_jvp_call`'s `jvp`).
    Opaque,
    /// An opaque host value or `None` (`remat2`'s `policy`).
    OptOpaque,
    /// A tuple of `(low, high, interior)` triples (`pad`'s `padding_config`).
    PaddingConfig,
    /// A mesh (`Mesh('x': 2, axis_types=(Auto,))`).
    Mesh,
    /// One partition spec (`P('x', None)`).
    Spec,
    /// A tuple of partition specs.
    Specs,
    /// A tuple of axis names (`('x', 'y')`).
    AxisNames,
    /// A set of axis names (`frozenset({'x', 'y'})`).
    AxisNameSet,
    /// A tuple of int pairs (`((0, 1), (1, 0))`).
    Pairs,
    /// One axis name (a bare word, `axis_name=y`) or a tuple of names.
    AxisName,
    /// A tuple of abstract values, printed as JAX prints them
    /// (`(ShapedArray(float32[3]), ShapedArray(int32[]))`: `pure_callback`'s
    /// `result_avals`).
    Avals,
}

impl fmt::Display for ParamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            ParamKind::Int => "int",
            ParamKind::Bool => "bool",
            ParamKind::IntOrBool => "int or bool",
            ParamKind::Str => "str",
            ParamKind::OptStr => "str or None",
            ParamKind::Ints => "tuple of ints",
            ParamKind::OptInts => "tuple of ints or None",
            ParamKind::Bools => "tuple of bools",
            ParamKind::DType => "dtype",
            ParamKind::OptDType => "dtype or None",
            ParamKind::DotDims => "dimension numbers",
            ParamKind::Jaxpr => "jaxpr",
            ParamKind::Jaxprs => "tuple of jaxprs",
            ParamKind::NoneOnly => "None",
            ParamKind::GatherDims => "GatherDimensionNumbers",
            ParamKind::ScatterDims => "ScatterDimensionNumbers",
            ParamKind::GatherMode => "GatherScatterMode",
            ParamKind::ConvDims => "ConvDimensionNumbers",
            ParamKind::OptScalar => "scalar or None",
            ParamKind::OptJaxpr => "jaxpr or None",
            ParamKind::Opaque => "host object (opaque)",
            ParamKind::OptOpaque => "host object (opaque) or None",
            ParamKind::PaddingConfig => "tuple of (low, high, interior) triples",
            ParamKind::Mesh => "mesh",
            ParamKind::Spec => "partition spec",
            ParamKind::Specs => "tuple of partition specs",
            ParamKind::AxisNames => "tuple of axis names",
            ParamKind::AxisNameSet => "set of axis names",
            ParamKind::Pairs => "tuple of int pairs",
            ParamKind::AxisName => "axis name or tuple of axis names",
            ParamKind::Avals => "tuple of ShapedArrays",
        };
        f.write_str(s)
    }
}

/// One entry of a primitive's parameter schema.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    /// The name (JAX's).
    pub name: &'static str,
    /// The kind of value.
    pub kind: ParamKind,
    /// Whether an equation must carry it.
    pub required: bool,
}

const fn req(name: &'static str, kind: ParamKind) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        required: true,
    }
}

const fn opt(name: &'static str, kind: ParamKind) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        required: false,
    }
}

macro_rules! specs {
    ($($spec:expr),* $(,)?) => {{
        const SPECS: &[ParamSpec] = &[$($spec),*];
        SPECS
    }};
}

macro_rules! builtins {
    ($($variant:ident => $name:literal,)*) => {
        /// A built-in primitive.
        ///
        /// ```
        /// use ferrax_ir::Builtin;
        /// let b = Builtin::from_name("reduce_sum").unwrap();
        /// assert_eq!(b.name(), "reduce_sum");
        /// let required: Vec<&str> =
        ///     b.param_specs().iter().filter(|s| s.required).map(|s| s.name).collect();
        /// assert_eq!(required, ["axes"]);
        /// assert!(Builtin::ALL.len() > 150);
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Builtin {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl Builtin {
            /// Every built-in.
            pub const ALL: &'static [Builtin] = &[$(Builtin::$variant,)*];

            /// The name used in jaxpr text (JAX's).
            pub fn name(self) -> &'static str {
                match self {
                    $(Builtin::$variant => $name,)*
                }
            }

            /// The built-in with this name.
            pub fn from_name(name: &str) -> Option<Builtin> {
                match name {
                    $($name => Some(Builtin::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

builtins! {
    Neg => "neg",
    Abs => "abs",
    Sign => "sign",
    Exp => "exp",
    Log => "log",
    Log1p => "log1p",
    Expm1 => "expm1",
    Floor => "floor",
    Ceil => "ceil",
    Round => "round",
    Sin => "sin",
    Cos => "cos",
    Tan => "tan",
    Tanh => "tanh",
    Logistic => "logistic",
    Sqrt => "sqrt",
    Rsqrt => "rsqrt",
    // Special functions and the rest of the trigonometric family (issue 12).
    ErfInv => "erf_inv",
    Erf => "erf",
    Erfc => "erfc",
    Lgamma => "lgamma",
    Digamma => "digamma",
    Exp2 => "exp2",
    Cbrt => "cbrt",
    Asin => "asin",
    Acos => "acos",
    Atan => "atan",
    Sinh => "sinh",
    Cosh => "cosh",
    Asinh => "asinh",
    Acosh => "acosh",
    Atanh => "atanh",
    Atan2 => "atan2",
    IsFinite => "is_finite",
    Square => "square",
    Not => "not",
    IntegerPow => "integer_pow",
    Add => "add",
    Sub => "sub",
    Mul => "mul",
    Div => "div",
    Rem => "rem",
    Pow => "pow",
    Max => "max",
    Min => "min",
    And => "and",
    Or => "or",
    Xor => "xor",
    ShiftLeft => "shift_left",
    ShiftRightLogical => "shift_right_logical",
    ShiftRightArithmetic => "shift_right_arithmetic",
    PopulationCount => "population_count",
    Clz => "clz",
    BitcastConvertType => "bitcast_convert_type",
    Threefry2x32 => "threefry2x32",
    Eq => "eq",
    Ne => "ne",
    Lt => "lt",
    Le => "le",
    Gt => "gt",
    Ge => "ge",
    SelectN => "select_n",
    Clamp => "clamp",
    ConvertElementType => "convert_element_type",
    ReduceSum => "reduce_sum",
    ReduceMax => "reduce_max",
    ReduceMin => "reduce_min",
    ReduceProd => "reduce_prod",
    Argmax => "argmax",
    Argmin => "argmin",
    // The logical reductions, nextafter and reduce_precision (issue 12).
    ReduceAnd => "reduce_and",
    ReduceOr => "reduce_or",
    ReduceXor => "reduce_xor",
    Nextafter => "nextafter",
    ReducePrecision => "reduce_precision",
    BroadcastInDim => "broadcast_in_dim",
    Reshape => "reshape",
    Transpose => "transpose",
    Squeeze => "squeeze",
    ExpandDims => "expand_dims",
    Concatenate => "concatenate",
    Split => "split",
    // Issue 12 (JAX 0.10's own primitives for jnp.stack, lax.unstack, jnp.tile, the
    // integer high product and the optimization barrier).
    Stack => "stack",
    Unstack => "unstack",
    Tile => "tile",
    Mulhi => "mulhi",
    OptimizationBarrier => "optimization_barrier",
    Slice => "slice",
    DynamicSlice => "dynamic_slice",
    DynamicUpdateSlice => "dynamic_update_slice",
    DotGeneral => "dot_general",
    ConvGeneralDilated => "conv_general_dilated",
    Iota => "iota",
    Copy => "copy",
    Gather => "gather",
    Scatter => "scatter",
    ScatterAdd => "scatter-add",
    ScatterSub => "scatter-sub",
    ScatterMul => "scatter-mul",
    ScatterMin => "scatter-min",
    ScatterMax => "scatter-max",
    Rev => "rev",
    Sort => "sort",
    Cumsum => "cumsum",
    Cumprod => "cumprod",
    Cummax => "cummax",
    Cummin => "cummin",
    Cumlogsumexp => "cumlogsumexp",
    TopK => "top_k",
    // Windowed reductions (pooling) and the primitives of their derivatives (issue 12).
    ReduceWindowSum => "reduce_window_sum",
    ReduceWindowMax => "reduce_window_max",
    ReduceWindowMin => "reduce_window_min",
    ReduceWindow => "reduce_window",
    SelectAndGatherAdd => "select_and_gather_add",
    SelectAndScatterAdd => "select_and_scatter_add",
    // Linear algebra (issue 12 item 5): JAX's CPU lowering calls jaxlib's LAPACK kernels.
    Cholesky => "cholesky",
    TriangularSolve => "triangular_solve",
    Lu => "lu",
    Eigh => "eigh",
    Qr => "qr",
    Svd => "svd",
    Geqrf => "geqrf",
    HouseholderProduct => "householder_product",
    Geqp3 => "geqp3",
    AddAny => "add_any",
    Pad => "pad",
    Jit => "jit",
    Cond => "cond",
    While => "while",
    Scan => "scan",
    CustomJvpCall => "custom_jvp_call",
    CustomVjpCall => "custom_vjp_call",
    Remat => "remat2",
    StopGradient => "stop_gradient",
    ShardingConstraint => "sharding_constraint",
    Psum => "psum",
    Pmax => "pmax",
    Pmin => "pmin",
    Pvary => "pvary",
    AllGather => "all_gather",
    ReduceScatter => "reduce_scatter",
    Ppermute => "ppermute",
    AllToAll => "all_to_all",
    AxisIndex => "axis_index",
    ShardMap => "shard_map",
    // Host callbacks (issue 12): calls into Python from compiled code.
    DebugCallback => "debug_callback",
    PureCallback => "pure_callback",
    IoCallback => "io_callback",
    // Typed PRNG keys (`key<fry>`): JAX 0.10's key primitives, threefry2x32 only.
    RandomSeed => "random_seed",
    RandomWrap => "random_wrap",
    RandomUnwrap => "random_unwrap",
    RandomBits => "random_bits",
    RandomSplit => "random_split",
    RandomFoldIn => "random_fold_in",
    RandomClone => "random_clone",
    // JAX's own primitive for `jax.debug.print` (its format and print options as params).
    DebugPrint => "debug_print",
    // The incomplete gamma family (brief G): JAX lowers these through its own series and
    // continued fractions (see lower/stablehlo/igamma.rs).
    Igamma => "igamma",
    Igammac => "igammac",
    IgammaGradA => "igamma_grad_a",
}

/// Families of built-ins that share a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// One operand, same type out; float operands only.
    UnaryFloat,
    /// One operand, same type out; signed ints and floats.
    UnarySigned,
    /// One operand, same type out; any numeric dtype.
    UnaryNumeric,
    /// One operand, same type out; any dtype.
    UnaryAny,
    /// One operand, same type out; bool or integer.
    UnaryBitwise,
    /// One operand, same type out; integer only (`population_count`, `clz`).
    UnaryInt,
    /// Two operands of one type, same type out; numeric.
    BinaryNumeric,
    /// Two operands, the first's type out: a float base and an exponent of the same
    /// float dtype or of any integer dtype (`pow`, as JAX has it).
    BinaryFloat,
    /// Two operands of one float type, same type out (`atan2`).
    BinaryFloatOnly,
    /// Two operands of one type, same type out; any dtype.
    BinaryAny,
    /// Two operands of one type, same type out; bool or integer.
    BinaryBitwise,
    /// Two operands of one type, same type out; integer only (the shifts: an amount
    /// outside `0..bits`, read as unsigned, shifts everything out; and `mulhi`).
    BinaryShift,
    /// Two operands of one type, `bool` out.
    Comparison,
    /// Everything else: a rule of its own.
    Special,
}

impl Family {
    /// The element-wise families of one operand, same type out (`Unary*`).
    pub fn is_unary(self) -> bool {
        matches!(
            self,
            Family::UnaryFloat
                | Family::UnarySigned
                | Family::UnaryNumeric
                | Family::UnaryBitwise
                | Family::UnaryInt
                | Family::UnaryAny
        )
    }

    /// The element-wise families of two operands, the first's type out (`Binary*`;
    /// not `Comparison`).
    pub fn is_binary(self) -> bool {
        matches!(
            self,
            Family::BinaryNumeric
                | Family::BinaryFloat
                | Family::BinaryFloatOnly
                | Family::BinaryAny
                | Family::BinaryBitwise
                | Family::BinaryShift
        )
    }
}

impl Builtin {
    /// The family whose rule this built-in follows.
    pub fn family(self) -> Family {
        use Builtin::*;
        match self {
            Exp | Log | Log1p | Expm1 | Sin | Cos | Tan | Tanh | Logistic | Sqrt | Rsqrt
            | Floor | Ceil => Family::UnaryFloat,
            ErfInv | Erf | Erfc | Lgamma | Digamma | Exp2 | Cbrt | Asin | Acos | Atan | Sinh
            | Cosh | Asinh | Acosh | Atanh => Family::UnaryFloat,
            Atan2 => Family::BinaryFloatOnly,
            // JAX: two operands of one float dtype (`lax.nextafter` does not promote).
            Nextafter => Family::BinaryFloatOnly,
            // JAX: `standard_naryop([_float, _float])`, as atan2.
            Igamma | Igammac | IgammaGradA => Family::BinaryFloatOnly,
            // JAX: `abs` takes signed ints and floats; `neg` and `sign` take any number
            // (unsigned ones wrap); `copy` and `stop_gradient` take anything, `bool`
            // included.
            Abs => Family::UnarySigned,
            Neg | Sign | Square => Family::UnaryNumeric,
            Copy | StopGradient => Family::UnaryAny,
            Not => Family::UnaryBitwise,
            PopulationCount | Clz => Family::UnaryInt,
            Add | Sub | Mul | Div | Rem => Family::BinaryNumeric,
            Pow => Family::BinaryFloat,
            Max | Min => Family::BinaryAny,
            And | Or | Xor => Family::BinaryBitwise,
            ShiftLeft | ShiftRightLogical | ShiftRightArithmetic => Family::BinaryShift,
            Mulhi => Family::BinaryShift,
            Eq | Ne | Lt | Le | Gt | Ge => Family::Comparison,
            _ => Family::Special,
        }
    }

    /// True for the scatter family (`scatter`, `scatter-add`, ...).
    pub fn is_scatter(self) -> bool {
        use Builtin::*;
        matches!(
            self,
            Scatter | ScatterAdd | ScatterSub | ScatterMul | ScatterMin | ScatterMax
        )
    }

    /// True for the primitives that take key (`key<fry>`) operands: the random ones, and
    /// the structural and control-flow ones JAX 0.10 binds on key arrays (each moves
    /// whole keys). Every other primitive's rule refuses keys.
    pub fn takes_keys(self) -> bool {
        use Builtin::*;
        matches!(
            self,
            RandomBits
                | RandomSplit
                | RandomFoldIn
                | RandomClone
                | RandomUnwrap
                | Reshape
                | BroadcastInDim
                | Squeeze
                | ExpandDims
                | Transpose
                | Rev
                | Slice
                | DynamicSlice
                | DynamicUpdateSlice
                | Gather
                | Scatter
                | Concatenate
                | SelectN
                | Copy
                | OptimizationBarrier
                | Jit
                | Cond
                | While
                | Scan
                | CustomJvpCall
                | CustomVjpCall
                | Remat
                | StopGradient
                | ShardMap
                | Eq
                | Ne
        )
    }

    /// True for primitives whose params hold sub-jaxprs.
    pub fn is_higher_order(self) -> bool {
        matches!(
            self,
            Builtin::Jit
                | Builtin::Cond
                | Builtin::While
                | Builtin::Scan
                | Builtin::CustomJvpCall
                | Builtin::CustomVjpCall
                | Builtin::Remat
                | Builtin::ShardMap
        )
    }

    /// True for primitives whose equations have an effect of their own (a call into the
    /// host for its side effects): passes never drop them, and keep their relative order.
    /// An equation whose sub-jaxprs have such equations has the effect too (see
    /// [`Eqn::has_effect`](crate::jaxpr::Eqn::has_effect)).
    pub fn has_effect(self) -> bool {
        matches!(
            self,
            Builtin::DebugCallback | Builtin::IoCallback | Builtin::DebugPrint
        )
    }

    /// True for the collectives: primitives that name mesh axes and so need an
    /// enclosing `shard_map` (or an open axis environment) to be checked.
    pub fn is_collective(self) -> bool {
        use Builtin::*;
        matches!(
            self,
            Psum | Pmax
                | Pmin
                | Pvary
                | AllGather
                | ReduceScatter
                | Ppermute
                | AllToAll
                | AxisIndex
        )
    }

    /// True for the primitives that call one sub-jaxpr on their operands and return its
    /// outputs (`jit`, `custom_jvp_call`, `custom_vjp_call`, `remat2`), with the param
    /// that holds it.
    pub fn call_jaxpr_param(self) -> Option<&'static str> {
        match self {
            Builtin::Jit | Builtin::Remat => Some("jaxpr"),
            Builtin::CustomJvpCall | Builtin::CustomVjpCall => Some("call_jaxpr"),
            _ => None,
        }
    }

    /// The parameter schema (JAX's names). Params not listed are rejected.
    pub fn param_specs(self) -> &'static [ParamSpec] {
        use Builtin::*;
        use ParamKind as K;
        match self {
            Exp | Log | Log1p | Expm1 | Sin | Cos | Tan | Tanh | Logistic | Sqrt | Rsqrt => {
                specs![opt("accuracy", K::NoneOnly)]
            }
            // JAX 0.10: of the new unary functions, only these two carry `accuracy`.
            Exp2 | Cbrt => specs![opt("accuracy", K::NoneOnly)],
            IntegerPow => specs![req("y", K::Int)],
            BitcastConvertType => specs![req("new_dtype", K::DType)],
            // JAX's `RoundingMethod`: 0 away from zero, 1 to nearest even.
            Round => specs![req("rounding_method", K::Int)],
            ConvertElementType => specs![
                req("new_dtype", K::DType),
                opt("weak_type", K::Bool),
                opt("sharding", K::NoneOnly),
            ],
            ReduceSum | ReduceMax | ReduceMin | ReduceProd => {
                specs![req("axes", K::Ints), opt("out_sharding", K::NoneOnly)]
            }
            Argmax | Argmin => specs![req("axes", K::Ints), req("index_dtype", K::DType)],
            // JAX 0.10: the logical reductions carry no `out_sharding`.
            ReduceAnd | ReduceOr | ReduceXor => specs![req("axes", K::Ints)],
            ReducePrecision => specs![req("exponent_bits", K::Int), req("mantissa_bits", K::Int)],
            BroadcastInDim => specs![
                req("shape", K::Ints),
                req("broadcast_dimensions", K::Ints),
                opt("sharding", K::NoneOnly),
            ],
            Reshape => specs![
                req("new_sizes", K::Ints),
                opt("dimensions", K::OptInts),
                opt("sharding", K::NoneOnly),
            ],
            Transpose => specs![req("permutation", K::Ints)],
            Squeeze | ExpandDims => specs![req("dimensions", K::Ints)],
            Concatenate => specs![req("dimension", K::Int)],
            Split => specs![req("sizes", K::Ints), req("axis", K::Int)],
            Stack | Unstack => specs![req("axis", K::Int)],
            Tile => specs![req("reps", K::Ints)],
            Slice => specs![
                req("start_indices", K::Ints),
                req("limit_indices", K::Ints),
                opt("strides", K::OptInts),
            ],
            DynamicSlice => specs![req("slice_sizes", K::Ints)],
            DotGeneral => specs![
                req("dimension_numbers", K::DotDims),
                opt("precision", K::OptStr),
                opt("preferred_element_type", K::OptDType),
                opt("out_sharding", K::NoneOnly),
            ],
            ConvGeneralDilated => specs![
                req("window_strides", K::Ints),
                req("padding", K::Pairs),
                req("lhs_dilation", K::Ints),
                req("rhs_dilation", K::Ints),
                req("dimension_numbers", K::ConvDims),
                req("feature_group_count", K::Int),
                req("batch_group_count", K::Int),
                opt("precision", K::OptStr),
                opt("preferred_element_type", K::OptDType),
                opt("out_sharding", K::NoneOnly),
            ],
            Iota => specs![
                req("dtype", K::DType),
                req("shape", K::Ints),
                req("dimension", K::Int),
                opt("sharding", K::NoneOnly),
            ],
            Gather => specs![
                req("dimension_numbers", K::GatherDims),
                req("slice_sizes", K::Ints),
                req("mode", K::GatherMode),
                opt("indices_are_sorted", K::Bool),
                opt("unique_indices", K::Bool),
                opt("fill_value", K::OptScalar),
            ],
            Scatter | ScatterAdd | ScatterSub | ScatterMul | ScatterMin | ScatterMax => specs![
                req("dimension_numbers", K::ScatterDims),
                req("mode", K::GatherMode),
                opt("indices_are_sorted", K::Bool),
                opt("unique_indices", K::Bool),
                opt("update_jaxpr", K::OptJaxpr),
                opt("update_consts", K::Ints),
            ],
            Rev => specs![req("dimensions", K::Ints)],
            Sort => specs![
                req("dimension", K::Int),
                req("is_stable", K::Bool),
                req("num_keys", K::Int),
            ],
            Cumsum | Cumprod | Cummax | Cummin | Cumlogsumexp => {
                specs![req("axis", K::Int), req("reverse", K::Bool)]
            }
            TopK => specs![req("axis", K::Int), req("k", K::Int)],
            ReduceWindowSum | ReduceWindowMax | ReduceWindowMin => specs![
                req("base_dilation", K::Ints),
                req("padding", K::Pairs),
                req("window_dilation", K::Ints),
                req("window_dimensions", K::Ints),
                req("window_strides", K::Ints),
            ],
            // JAX's `consts` hold the reducer's constants; ferrax's reducers close over
            // none (the rule wants an empty tuple).
            ReduceWindow => specs![
                req("base_dilation", K::Ints),
                req("consts", K::Ints),
                req("jaxpr", K::Jaxpr),
                req("padding", K::Pairs),
                req("window_dilation", K::Ints),
                req("window_dimensions", K::Ints),
                req("window_strides", K::Ints),
            ],
            // `select_prim` is the comparison choosing a window's element: `ge` for a
            // max, `le` for a min (JAX prints the primitive's name).
            SelectAndGatherAdd => specs![
                req("base_dilation", K::Ints),
                req("padding", K::Pairs),
                req("select_prim", K::Str),
                req("window_dilation", K::Ints),
                req("window_dimensions", K::Ints),
                req("window_strides", K::Ints),
            ],
            SelectAndScatterAdd => specs![
                req("padding", K::Pairs),
                req("select_prim", K::Str),
                req("window_dimensions", K::Ints),
                req("window_strides", K::Ints),
            ],
            TriangularSolve => specs![
                req("left_side", K::Bool),
                req("lower", K::Bool),
                req("transpose_a", K::Bool),
                req("conjugate_a", K::Bool),
                req("unit_diagonal", K::Bool),
            ],
            Eigh => specs![
                req("lower", K::Bool),
                req("sort_eigenvalues", K::Bool),
                opt("subset_by_index", K::NoneOnly),
                opt("algorithm", K::NoneOnly),
            ],
            Qr => specs![
                req("full_matrices", K::Bool),
                req("pivoting", K::Bool),
                opt("use_magma", K::NoneOnly),
            ],
            Geqp3 => specs![opt("use_magma", K::NoneOnly)],
            Svd => specs![
                req("full_matrices", K::Bool),
                req("compute_uv", K::Bool),
                opt("subset_by_index", K::NoneOnly),
                opt("algorithm", K::NoneOnly),
            ],
            ShardingConstraint => specs![req("mesh", K::Mesh), req("spec", K::Spec)],
            Psum | Pmax | Pmin => specs![
                req("axes", K::AxisNames),
                opt("axis_index_groups", K::NoneOnly),
            ],
            Pvary => specs![req("axes", K::AxisNames)],
            AllGather => specs![
                req("all_gather_dimension", K::Int),
                req("axis_name", K::AxisName),
                req("axis_size", K::Int),
                req("tiled", K::Bool),
                opt("axis_index_groups", K::NoneOnly),
            ],
            ReduceScatter => specs![
                req("axis_name", K::AxisName),
                req("axis_size", K::Int),
                req("scatter_dimension", K::Int),
                req("tiled", K::Bool),
                opt("axis_index_groups", K::NoneOnly),
            ],
            Ppermute => specs![req("axis_name", K::AxisName), req("perm", K::Pairs)],
            AllToAll => specs![
                req("axis_name", K::AxisName),
                req("split_axis", K::Int),
                req("concat_axis", K::Int),
                opt("tiled", K::Bool),
                opt("axis_index_groups", K::NoneOnly),
            ],
            AxisIndex => specs![req("axis_name", K::AxisName)],
            ShardMap => specs![
                req("jaxpr", K::Jaxpr),
                req("mesh", K::Mesh),
                req("in_specs", K::Specs),
                req("out_specs", K::Specs),
                opt("check_vma", K::Bool),
                opt("newly_manual_axes", K::AxisNameSet),
            ],
            Pad => specs![req("padding_config", K::PaddingConfig)],
            // `impl` is the key implementation's tag as JAX prints it: `fry` only.
            RandomSeed | RandomWrap => specs![req("impl", K::Str)],
            RandomBits => specs![req("bit_width", K::Int), req("shape", K::Ints)],
            RandomSplit => specs![req("shape", K::Ints)],
            // JAX's `effect` is `Debug` or `OrderedDebug`.
            DebugCallback => specs![
                req("callback", K::Opaque),
                req("effect", K::Str),
                opt("partitioned", K::Bool),
            ],
            PureCallback => specs![
                req("callback", K::Opaque),
                req("result_avals", K::Avals),
                opt("sharding", K::NoneOnly),
                opt("vmap_method", K::OptStr),
            ],
            IoCallback => specs![
                req("callback", K::Opaque),
                req("ordered", K::Bool),
                req("result_avals", K::Avals),
                opt("sharding", K::NoneOnly),
            ],
            // `in_tree` (a PyTreeDef), `np_printoptions` (NumPy's print options as a
            // tuple of pairs) and `static_args` (the tree's non-array leaves as
            // `(index, value)` pairs) are host values, printed and read as JAX writes them.
            DebugPrint => specs![
                req("fmt", K::Str),
                req("has_placeholders", K::Bool),
                req("in_tree", K::Opaque),
                opt("logging_record", K::NoneOnly),
                req("np_printoptions", K::Opaque),
                req("ordered", K::Bool),
                opt("partitioned", K::Bool),
                req("static_args", K::Opaque),
            ],
            Jit => specs![req("jaxpr", K::Jaxpr), opt("name", K::Str)],
            Cond => specs![req("branches", K::Jaxprs)],
            CustomJvpCall => specs![
                req("name", K::Str),
                req("call_jaxpr", K::Jaxpr),
                req("jvp", K::Opaque),
                req("symbolic_zeros", K::Bool),
                opt("num_consts", K::Int),
            ],
            CustomVjpCall => specs![
                req("name", K::Str),
                req("bwd", K::Opaque),
                req("call_jaxpr", K::Jaxpr),
                req("fwd", K::Opaque),
                req("symbolic_zeros", K::Bool),
                opt("num_consts", K::Int),
            ],
            Remat => specs![
                req("differentiated", K::Bool),
                req("jaxpr", K::Jaxpr),
                req("policy", K::OptOpaque),
                req("prevent_cse", K::Bool),
            ],
            While => specs![
                req("cond_jaxpr", K::Jaxpr),
                req("body_jaxpr", K::Jaxpr),
                req("cond_nconsts", K::Int),
                req("body_nconsts", K::Int),
            ],
            Scan => specs![
                req("jaxpr", K::Jaxpr),
                req("length", K::Int),
                req("reverse", K::Bool),
                req("num_consts", K::Int),
                req("num_carry", K::Int),
                opt("linear", K::Bools),
                opt("unroll", K::IntOrBool),
                opt("_split_transpose", K::Bool),
            ],
            _ => specs![],
        }
    }

    /// The kind of the named parameter, if this primitive has it.
    pub fn param_kind(self, name: &str) -> Option<ParamKind> {
        self.param_specs()
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.kind)
    }

    /// The shape/dtype rule: checks the params against the schema and the operand types,
    /// and returns the output types.
    pub fn abstract_eval(
        self,
        inputs: &[AbstractValue],
        params: &Params,
    ) -> Result<Vec<AbstractValue>, RuleError> {
        self.abstract_eval_in(inputs, params, &AxisEnv::open())
    }

    /// The shape/dtype rule where the named axes of `env` are in scope (collectives
    /// look their axes up there; see [`AxisEnv`]).
    pub fn abstract_eval_in(
        self,
        inputs: &[AbstractValue],
        params: &Params,
        env: &AxisEnv,
    ) -> Result<Vec<AbstractValue>, RuleError> {
        rules::check_params(self, params)?;
        rules::abstract_eval(self, inputs, params, env)
    }
}

/// A primitive defined outside the catalogue (from Python): it supplies its own rule.
///
/// ```
/// use std::sync::Arc;
/// use ferrax_ir::{text::parse_jaxpr_with, AbstractValue, ExtensionPrimitive, Params, Registry};
/// /// `my_identity`: returns its operand's type.
/// struct MyIdentity;
/// impl ExtensionPrimitive for MyIdentity {
///     fn name(&self) -> &str {
///         "my_identity"
///     }
///     fn abstract_eval(&self, ins: &[AbstractValue], _: &Params) -> Result<Vec<AbstractValue>, String> {
///         match ins {
///             [x] => Ok(vec![x.clone()]),
///             _ => Err(format!("takes one operand, got {}", ins.len())),
///         }
///     }
/// }
/// let mut registry = Registry::new();
/// registry.register(Arc::new(MyIdentity))?;
/// let text = "{ lambda ; a:f32[3]. let b:f32[3] = my_identity a in (b,) }";
/// assert_eq!(parse_jaxpr_with(text, &registry)?.to_string(), text);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait ExtensionPrimitive: Send + Sync {
    /// The name printed in jaxpr text.
    fn name(&self) -> &str;
    /// The shape/dtype rule. An `Err` is reported as a rule failure of the equation.
    fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        params: &Params,
    ) -> Result<Vec<AbstractValue>, String>;

    /// Whether [`transpose`](Self::transpose) is defined: without it, the transpose
    /// pass reports an equation linear in an operand as having no rule.
    fn has_transpose_rule(&self) -> bool {
        false
    }

    /// Whether the transpose pass copies the equations of the rule's jaxpr into its
    /// result (as JAX runs a `custom_vjp`'s backward function in place) instead of
    /// calling it as a `jit` named `transpose(<name>)`. False by default.
    fn inline_transpose(&self) -> bool {
        false
    }

    /// The transpose rule: for operands of types `inputs`, of which those flagged in
    /// `linear` are linear, and these params, a closed jaxpr taking the non-linear
    /// operands (in order) then one cotangent per output, and returning one cotangent per
    /// linear operand (of its type). The transpose pass calls it as a `jit` named
    /// `transpose(<name>)`. An `Err` is reported as the rule's failure.
    fn transpose(
        &self,
        inputs: &[AbstractValue],
        linear: &[bool],
        params: &Params,
    ) -> Result<ClosedJaxpr, String> {
        let _ = (inputs, linear, params);
        Err(format!("{} has no transpose rule", self.name()))
    }
}

/// A primitive: a built-in or an extension.
///
/// # Examples
/// ```
/// use ferrax_ir::{AbstractValue, Builtin, DType, Param, Params, Primitive};
/// let p: Primitive = Builtin::ReduceMax.into();
/// assert_eq!((p.name(), p.as_builtin()), ("reduce_max", Some(Builtin::ReduceMax)));
/// // Its rule: the output types for operand types and params.
/// let x = AbstractValue::array(DType::F32, &[4, 5])?;
/// let params = Params::new([("axes", Param::ints(&[0])), ("out_sharding", Param::None)]);
/// assert_eq!(p.abstract_eval(&[x.clone()], &params)?, [AbstractValue::array(DType::F32, &[5])?]);
/// // A missing param is the rule's error.
/// assert!(p.abstract_eval(&[x], &Params::empty()).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub enum Primitive {
    /// One of the catalogue.
    Builtin(Builtin),
    /// Defined outside the crate.
    Extension(Arc<dyn ExtensionPrimitive>),
}

impl Primitive {
    /// The name printed in jaxpr text.
    pub fn name(&self) -> &str {
        match self {
            Primitive::Builtin(b) => b.name(),
            Primitive::Extension(e) => e.name(),
        }
    }

    /// The built-in, if this is one.
    pub fn as_builtin(&self) -> Option<Builtin> {
        match self {
            Primitive::Builtin(b) => Some(*b),
            Primitive::Extension(_) => None,
        }
    }

    /// The output types for these operand types and params.
    pub fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        params: &Params,
    ) -> Result<Vec<AbstractValue>, RuleError> {
        self.abstract_eval_in(inputs, params, &AxisEnv::open())
    }

    /// The output types where the named axes of `env` are in scope.
    pub fn abstract_eval_in(
        &self,
        inputs: &[AbstractValue],
        params: &Params,
        env: &AxisEnv,
    ) -> Result<Vec<AbstractValue>, RuleError> {
        match self {
            Primitive::Builtin(b) => b.abstract_eval_in(inputs, params, env),
            Primitive::Extension(e) => {
                // A name text cannot hold would print a jaxpr that does not read back.
                let names = std::iter::once(check_primitive_name(e.name()))
                    .chain(params.iter().map(|(n, _)| check_param_name(n)));
                for check in names {
                    check.map_err(|err| RuleError::Extension {
                        message: err.to_string(),
                    })?;
                }
                e.abstract_eval(inputs, params)
                    .map_err(|message| RuleError::Extension { message })
            }
        }
    }
}

impl From<Builtin> for Primitive {
    fn from(b: Builtin) -> Primitive {
        Primitive::Builtin(b)
    }
}

impl PartialEq for Primitive {
    fn eq(&self, other: &Primitive) -> bool {
        match (self, other) {
            (Primitive::Builtin(a), Primitive::Builtin(b)) => a == b,
            (Primitive::Extension(a), Primitive::Extension(b)) => {
                std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
            }
            _ => false,
        }
    }
}

impl fmt::Debug for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a name cannot name an extension primitive or a parameter: jaxpr text printed with
/// it would not read back.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// Not an identifier: an ASCII letter or `_`, then ASCII letters, digits and `_`.
    NotIdentifier {
        /// What was named.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// A keyword of the text format (`lambda`, `let`, `in`), as an extension
    /// primitive's name: today's parser reads one in a primitive's place, but keywords
    /// delimit jaxprs (and shared sub-jaxprs' `let` definitions), so primitive names
    /// keep clear of them. Param names may be keywords (`lambda=<lambda>` reads back).
    Reserved {
        /// The name.
        name: String,
    },
    /// A built-in primitive's name (for an extension primitive).
    Builtin {
        /// The name.
        name: String,
    },
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::NotIdentifier { what, name } => write!(
                f,
                "{what} name must be an identifier (an ASCII letter or '_', then letters, \
                 digits and '_'), got {name:?}"
            ),
            NameError::Reserved { name } => {
                write!(f, "a primitive's name {name:?} is a keyword of jaxpr text")
            }
            NameError::Builtin { name } => {
                write!(f, "'{name}' is the name of a built-in primitive")
            }
        }
    }
}

impl std::error::Error for NameError {}

/// The keywords of jaxpr text.
const RESERVED: [&str; 3] = ["lambda", "let", "in"];

fn check_identifier(name: &str, what: &'static str) -> Result<(), NameError> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(NameError::NotIdentifier {
            what,
            name: name.to_owned(),
        })
    }
}

/// Checks that `name` can name an extension primitive: an identifier (an ASCII letter
/// or `_`, then ASCII letters, digits and `_`), not a keyword of the text format
/// (`lambda`, `let`, `in`) and not a built-in's name, so that every jaxpr using it prints as text that parses
/// back.
pub fn check_primitive_name(name: &str) -> Result<(), NameError> {
    check_identifier(name, "a primitive's")?;
    if RESERVED.contains(&name) {
        return Err(NameError::Reserved {
            name: name.to_owned(),
        });
    }
    if Builtin::from_name(name).is_some() {
        return Err(NameError::Builtin {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Checks that `name` can name a parameter of an extension primitive's equation: an
/// identifier (as [`check_primitive_name`]; keywords are fine here).
pub fn check_param_name(name: &str) -> Result<(), NameError> {
    check_identifier(name, "a parameter's")
}

/// A set of extension primitives by name, so text that uses them can be read back.
///
/// # Examples
/// ```
/// use ferrax_ir::{Builtin, NameError, Primitive, Registry};
/// let registry = Registry::new();
/// assert_eq!(registry.lookup("sin"), Some(Primitive::Builtin(Builtin::Sin)));
/// assert_eq!(registry.lookup("my_op"), None); // not registered
/// // Names must be ones jaxpr text can hold and no built-in's.
/// assert!(matches!(ferrax_ir::primitive::check_primitive_name("let"), Err(NameError::Reserved { .. })));
/// assert!(matches!(ferrax_ir::primitive::check_primitive_name("sin"), Err(NameError::Builtin { .. })));
/// assert!(ferrax_ir::primitive::check_primitive_name("my_op").is_ok());
/// ```
/// [`ExtensionPrimitive`] registers one and reads text using it.
#[derive(Clone, Default)]
pub struct Registry {
    extensions: std::collections::HashMap<String, Arc<dyn ExtensionPrimitive>>,
}

impl Registry {
    /// An empty registry (built-ins only).
    pub fn new() -> Registry {
        Registry::default()
    }
    /// Adds an extension primitive; a later one with the same name replaces it. Fails,
    /// adding nothing, if its name is not one text can hold ([`check_primitive_name`]).
    pub fn register(&mut self, prim: Arc<dyn ExtensionPrimitive>) -> Result<(), NameError> {
        check_primitive_name(prim.name())?;
        self.extensions.insert(prim.name().to_owned(), prim);
        Ok(())
    }
    /// Finds a primitive by name: built-ins first, then extensions.
    pub fn lookup(&self, name: &str) -> Option<Primitive> {
        if let Some(b) = Builtin::from_name(name) {
            return Some(Primitive::Builtin(b));
        }
        // JAX 0.10 prints a psum in a shard_map body checked for varying axes as
        // `psum_invariant` (psum whose operand varies and result does not): ferrax's
        // psum, which keeps varying axes as explicit pvary equations.
        if name == "psum_invariant" {
            return Some(Primitive::Builtin(Builtin::Psum));
        }
        self.extensions
            .get(name)
            .map(|e| Primitive::Extension(Arc::clone(e)))
    }
}
