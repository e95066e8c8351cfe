"""The compiled core of ferrax (Rust, via PyO3): the jaxpr IR.

Use it through :mod:`ferrax.core` and :mod:`ferrax.errors`. This stub is checked against
the module by ``python -m mypy.stubtest ferrax._ir``.
"""

from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, Self, SupportsIndex, TypeAlias, TypeVar, final

import numpy as np
from typing_extensions import disjoint_base

from ferrax.dtypes import KeyDType

__all__ = [
    "BuilderError",
    "ClosedJaxpr",
    "Dispatcher",
    "ExtensionPrimitive",
    "FerraxError",
    "Jaxpr",
    "JaxprBuilder",
    "JaxprEqn",
    "Literal",
    "LoweringError",
    "ParseError",
    "Params",
    "PassError",
    "RewriteError",
    "RuleSet",
    "ShapedArray",
    "TypeCheckError",
    "Var",
    "abstract_eval",
    "builtin_primitives",
    "consts_to_invars",
    "cost_analysis",
    "dce",
    "equation_costs",
    "hlo_sharding",
    "insert_pvary",
    "lower_to_stablehlo",
    "lower_with_callbacks",
    "parse_jaxpr",
    "partial_eval",
    "random_jaxpr",
    "reference_eval",
    "rewrite",
    "sdy_sharding",
    "set_dispatch_runtime",
    "sharding_tiling",
    "toposort",
    "transpose",
    "typecheck",
]

_T = TypeVar("_T")

# What names a dtype: "float32", "f32", "bfloat16", a numpy.dtype, numpy.float32, float, ...
# or the key dtype (ferrax.dtypes.key_fry, "key<fry>").
_DTypeLike: TypeAlias = str | np.dtype[Any] | type[Any] | KeyDType
# A Python or NumPy scalar.
_Scalar: TypeAlias = bool | int | float | np.bool_ | np.integer[Any] | np.floating[Any]

# ---------------------------------------------------------------------------- errors

class FerraxError(Exception):
    """Base class of every error ferrax raises."""

class TypeCheckError(FerraxError, TypeError):
    """A jaxpr, equation, type or value is not well formed or not well typed (a
    ``TypeError`` too, as JAX's type errors are).

    Raised by the typechecker, by a shape rule refusing an equation (the message names
    the equation), for a variable of another jaxpr, an unknown primitive or dtype, a
    literal out of its dtype's range, and an invalid shape.
    """

    eqn_index: int | None
    """Index of the (top-level) equation at fault, or None."""

class ParseError(FerraxError):
    """Jaxpr text is not syntactically valid."""

    line: int
    """1-based line of the error."""
    column: int
    """1-based column (in characters) of the error."""

class LoweringError(FerraxError):
    """A jaxpr cannot be lowered to StableHLO."""

class PassError(FerraxError):
    """A pass was given arguments that do not fit its jaxpr (e.g. a wrong flag count)."""

class BuilderError(FerraxError):
    """A JaxprBuilder was used after it built its jaxpr, or re-entered while in use."""

class RewriteError(FerraxError):
    """Rewriting did not finish: the rules still applied after the iteration bound, or a
    rule's right side does not typecheck where its left side matched."""

    rules: list[str]
    """The rules firing in the last passes (empty for an ill-typed right side)."""

# ---------------------------------------------------------------------- abstract values

@final
class ShapedArray:
    """The abstract value of an array: shape, dtype and weak type.

    ``dtype`` is a NumPy dtype, a NumPy scalar type or a name (``"float32"``, ``"f32"``,
    ``"bfloat16"``), or the key dtype ``ferrax.dtypes.key_fry`` (``"key<fry>"``), which
    ``dtype`` gives back for key arrays. A negative dimension, an element count past int64 or a dtype the IR
    lacks is a :class:`TypeCheckError`. Equal when shape, dtype and weak type are.
    """

    def __new__(
        cls, shape: Sequence[SupportsIndex], dtype: _DTypeLike, weak_type: bool = False
    ) -> Self: ...
    @property
    def shape(self) -> tuple[int, ...]:
        """The dimensions."""
    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type (bfloat16 is ``ml_dtypes.bfloat16``'s dtype)."""
    @property
    def weak_type(self) -> bool:
        """Whether the value is weakly typed (came from a Python scalar)."""
    @property
    def ndim(self) -> int:
        """Number of dimensions."""
    @property
    def size(self) -> int:
        """Number of elements."""
    def update(
        self,
        *,
        shape: Sequence[SupportsIndex] | None = None,
        dtype: _DTypeLike | None = None,
        weak_type: bool | None = None,
    ) -> ShapedArray:
        """The same abstract value with the given fields replaced."""
    def str_short(self) -> str:
        """The short form used in jaxpr text, e.g. ``f32[3,4]``."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

# ------------------------------------------------------------------------------ jaxprs

@final
class Var:
    """A variable of one jaxpr (or builder); meaningless in another.

    Equal to the same variable of the same jaxpr only.
    """

    @property
    def aval(self) -> ShapedArray:
        """The variable's type."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Literal:
    """A scalar constant written inline in a jaxpr (``2.0:f32[]``).

    A value: equal to literals of the same value, dtype and weak type.
    """

    @property
    def val(self) -> bool | int | float:
        """The value."""
    @property
    def aval(self) -> ShapedArray:
        """The literal's type (a scalar)."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class JaxprEqn:
    """One equation of a jaxpr: ``outvars = primitive[params] inputs``."""

    @property
    def primitive(self) -> str:
        """The primitive's name."""
    @property
    def inputs(self) -> list[Var | Literal]:
        """The operands."""
    @property
    def outvars(self) -> list[Var]:
        """The variables the equation binds."""
    @property
    def params(self) -> dict[str, Any]:
        """The parameters as Python values.

        ``None``, ``bool``, ``int``, ``float``, ``str``, tuples of ints or bools,
        ``numpy.dtype``, ``ClosedJaxpr``, tuples of ``ClosedJaxpr``, ``dot_general``'s
        dimension numbers as ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``,
        and ``pad``'s ``padding_config`` as a tuple of ``(low, high, interior)`` triples.
        Opaque params (``custom_jvp_call``'s ``jvp``, ``custom_vjp_call``'s ``fwd`` and
        ``bwd``, ``remat2``'s ``policy``) are the very objects given when the equation was
        made, or their names (``str``) when it was read from text.
        """

@final
class Jaxpr:
    """A typed, immutable jaxpr; ``str()`` prints it in JAX's text format.

    Made by :class:`JaxprBuilder`, :func:`parse_jaxpr` or a pass. Equal only to itself.
    """

    @property
    def constvars(self) -> list[Var]:
        """The constant variables."""
    @property
    def invars(self) -> list[Var]:
        """The input variables."""
    @property
    def outvars(self) -> list[Var | Literal]:
        """The outputs."""
    @property
    def eqns(self) -> list[JaxprEqn]:
        """The equations, each after the definitions of its inputs."""
    @property
    def in_avals(self) -> list[ShapedArray]:
        """The input types."""
    @property
    def out_avals(self) -> list[ShapedArray]:
        """The output types."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class ClosedJaxpr:
    """A jaxpr with one constant per constvar.

    The constants are arbitrary objects (NumPy arrays), held by reference and returned as
    given; each takes its constvar's type. A wrong count is a :class:`TypeCheckError`.
    """

    def __new__(cls, jaxpr: Jaxpr, consts: Sequence[object]) -> Self: ...
    @property
    def jaxpr(self) -> Jaxpr:
        """The jaxpr."""
    @property
    def consts(self) -> list[Any]:
        """The constants (None where unknown, as in a jaxpr read from text)."""
    @property
    def in_avals(self) -> list[ShapedArray]:
        """The input types (constvars excluded)."""
    @property
    def out_avals(self) -> list[ShapedArray]:
        """The output types."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

# ------------------------------------------------------------------ building jaxprs

@final
class ExtensionPrimitive:
    """A primitive defined from Python, with its shape rule as a callable.

    ``abstract_eval(avals, params)`` returns the outputs' types; an exception it raises
    becomes a :class:`TypeCheckError` of the equation carrying the exception's type name
    and message. ``name`` must be an identifier (an ASCII letter or ``_``, then ASCII
    letters, digits and ``_``), not a keyword of jaxpr text (``lambda``, ``let``, ``in``)
    and not a built-in's name (else ``ValueError``), so that every jaxpr using the
    primitive prints as text that parses back; its equations' param names must be
    identifiers too (else :class:`TypeCheckError`).

    ``transpose(avals, linear, params)``, if given, is the transpose rule: it gets the
    operands' types, one flag per operand saying whether it is linear, and the params,
    and returns a :class:`ClosedJaxpr` taking the non-linear operands (in order) then one
    cotangent per output, and returning one cotangent per linear operand. The transpose
    pass calls it as a ``jit`` named ``transpose(<name>)`` (with ``inline_transpose``, it
    copies its equations in place instead); an exception it raises (or a jaxpr of the
    wrong signature) becomes a :class:`PassError` carrying its message.
    """

    def __new__(
        cls,
        name: str,
        abstract_eval: Callable[[list[ShapedArray], dict[str, Any]], Sequence[ShapedArray]],
        transpose: Callable[[list[ShapedArray], list[bool], dict[str, Any]], ClosedJaxpr]
        | None = None,
        inline_transpose: bool = False,
    ) -> Self: ...
    @property
    def name(self) -> str:
        """The name printed in jaxpr text."""
    @property
    def abstract_eval(
        self,
    ) -> Callable[[list[ShapedArray], dict[str, Any]], Sequence[ShapedArray]]:
        """The shape rule."""
    @property
    def transpose(
        self,
    ) -> Callable[[list[ShapedArray], list[bool], dict[str, Any]], ClosedJaxpr] | None:
        """The transpose rule, or ``None``."""
    @property
    def inline_transpose(self) -> bool:
        """Whether the transpose pass copies the rule's equations in place instead of
        calling them as a ``jit`` named ``transpose(<name>)``."""

@final
class Params:
    """A primitive's params converted from Python once, for equations that reuse them
    (given to :class:`JaxprBuilder` in place of a dict). Given to an equation of another
    primitive, a :class:`TypeCheckError`."""

    def __new__(cls, primitive: str | ExtensionPrimitive, params: Mapping[str, object]) -> Params: ...
    @property
    def primitive(self) -> str:
        """The primitive's name."""
    def to_dict(self) -> dict[str, Any]:
        """The params as a dict, as :attr:`JaxprEqn.params` gives them."""

@final
class JaxprBuilder:
    """Builds one jaxpr, equation by equation.

    Variables it makes belong to it: passing one of another builder or of a built jaxpr is
    a :class:`TypeCheckError`. After :meth:`build` (successful or not) any further call
    raises :class:`BuilderError`.
    """

    def __new__(cls, axis_env: Mapping[str, int] | None = None) -> Self:
        """A builder; ``axis_env`` (axis name to size: the enclosing shard_maps' mesh
        axes, for a shard_map body) makes collectives naming other axes a
        :class:`TypeCheckError`. Without it collectives are checked leniently (their
        axes are not looked up; ``all_to_all`` needs its axes' sizes, so give them)."""
    def add_constvar(self, aval: ShapedArray) -> Var:
        """Declares the next constant variable."""
    def add_invar(self, aval: ShapedArray) -> Var:
        """Declares the next input variable."""
    def new_var(self, aval: ShapedArray) -> Var:
        """A fresh, unbound variable, for :meth:`add_eqn_with_outvars`."""
    def literal(
        self, value: _Scalar, dtype: _DTypeLike, weak_type: bool = False
    ) -> Literal:
        """A scalar literal; the value must fit the dtype (else :class:`TypeCheckError`)."""
    def add_eqn(
        self,
        primitive: str | ExtensionPrimitive,
        inputs: Sequence[Var | Literal],
        params: Mapping[str, object] | Params,
    ) -> list[Var]:
        """Applies a primitive; returns its fresh output variables, typed by its rule.

        Params of built-ins are read by their schema kind (``axes=[0]`` is a tuple of
        ints, ``new_dtype=np.float32`` a dtype). A rule failure, an unknown primitive or
        param, or a param of the wrong kind is a :class:`TypeCheckError`.
        """
    def add_eqn_typed(
        self,
        primitive: str | ExtensionPrimitive,
        inputs: Sequence[Var | Literal],
        params: Mapping[str, object] | Params,
    ) -> list[tuple[Var, ShapedArray]]:
        """:meth:`add_eqn` for tracing: a ``(var, aval)`` pair per output, where ``aval``
        is one shared object per type for this builder (the one given to
        :meth:`add_invar`/:meth:`add_constvar` for that type, if any), so equal types are
        identical objects."""
    def add_eqn_traced(
        self,
        primitive: str | ExtensionPrimitive,
        inputs: Sequence[Any],
        params: Mapping[str, object] | Params,
        make: type[_T],
        trace: object,
    ) -> list[_T]:
        """:meth:`add_eqn_typed` for tracers: each input is a :class:`Var`, a
        :class:`Literal` or an object whose ``atom`` attribute is one; each output is a
        new instance of ``make``, made without calling its ``__init__``, with its
        attributes ``_trace``, ``atom`` and ``aval`` set to ``trace``, the output variable
        and its shared :class:`ShapedArray`."""
    def add_eqn_traced_one(
        self,
        primitive: str | ExtensionPrimitive,
        inputs: Sequence[Any],
        params: Mapping[str, object] | Params,
        make: type[_T],
        trace: object,
    ) -> _T:
        """:meth:`add_eqn_traced` of a primitive with one output: returns that output's
        tracer itself. A primitive with another number of outputs is a ``TypeError``
        (after its equation is recorded)."""
    def stage_args(self, args: object, make: type[object], trace: object, x64: bool) -> Any | None:
        """Declares an input variable per leaf of the pytree ``args`` and returns the
        same tree with a tracer (made as :meth:`add_eqn_traced` makes them) in place of
        each leaf: leaves in ``tree_flatten``'s order, dicts rebuilt in sorted key
        order. Leaves are typed as ``aval_of`` types them in the mode ``x64``. None, with
        nothing declared, when ``args`` holds anything but tuples, lists, dicts with str
        keys, None, NumPy arrays of IR dtypes and Python scalars."""
    def inline_traced(self, jaxpr: Jaxpr, inputs: Sequence[Any], make: type[_T], trace: object) -> list[_T]:
        """Records the equations of ``jaxpr`` (no constvars) applied to ``inputs`` (one
        per invar: tracers, :class:`Var` or :class:`Literal`) in one call; returns one
        tracer per output, made as :meth:`add_eqn_traced` makes them."""
    def add_eqn_with_outvars(
        self,
        primitive: str | ExtensionPrimitive,
        inputs: Sequence[Var | Literal],
        params: Mapping[str, object] | Params,
        outvars: Sequence[Var],
    ) -> None:
        """Adds an equation binding variables made by :meth:`new_var`; checked at build."""
    def build(self, outvars: Sequence[Var | Literal]) -> Jaxpr:
        """Finishes the jaxpr, typechecked: equations added with :meth:`add_eqn` (or
        :meth:`add_eqn_traced`) were checked as they were added, leaving the outputs and
        literals; a builder that used :meth:`new_var` is checked whole."""
    def build_toposorted(self, outvars: Sequence[Var | Literal]) -> Jaxpr:
        """Orders the equations by dependency, then builds (a cycle is a TypeCheckError)."""

# ---------------------------------------------------------------------------- functions

def parse_jaxpr(
    text: str, *, extensions: Sequence[ExtensionPrimitive] | None = None
) -> Jaxpr:
    """Reads a jaxpr from text, the inverse of ``str()``.

    Bad syntax is a :class:`ParseError` (with ``line`` and ``column``); a text that parses
    but is ill formed or ill typed is a :class:`TypeCheckError`.
    """

def typecheck(
    jaxpr: Jaxpr, axis_env: Mapping[str, int] | None = None
) -> tuple[list[ShapedArray], list[ShapedArray]]:
    """Typechecks a jaxpr (and its sub-jaxprs); returns its input and output types.

    ``axis_env`` (axis name to size) puts named axes in scope, for a shard_map body
    checked by itself; without it a collective outside every shard_map is a
    :class:`TypeCheckError` ("Found an unbound axis name: x"). A shard_map binds its
    mesh's axes for its body.
    """

def dce(jaxpr: Jaxpr, used_outputs: Sequence[bool]) -> tuple[Jaxpr, list[bool]]:
    """Dead-code elimination; returns the new jaxpr and which inputs it kept.

    A flag count different from the number of outputs is a :class:`PassError`.
    """

def toposort(jaxpr: Jaxpr) -> Jaxpr:
    """Reorders the equations by demand from the outputs."""

def transpose(jaxpr: Jaxpr, linear: Sequence[bool]) -> Jaxpr:
    """The transpose of a jaxpr linear in the inputs flagged in ``linear``.

    The result takes the non-linear inputs (in order), then one cotangent per output,
    and returns one cotangent per linear input. A wrong flag count, a non-linear use of
    a linear value or a primitive without a transpose rule is a :class:`PassError`.
    """

def abstract_eval(
    primitive: str | ExtensionPrimitive,
    avals: Sequence[ShapedArray],
    params: Mapping[str, object],
    axis_env: Mapping[str, int] | None = None,
) -> list[ShapedArray]:
    """The output types of a primitive applied to operands of these types.

    The same rule the builder runs; a failure is a :class:`TypeCheckError` naming the
    primitive and what mismatched. ``axis_env`` maps the named axes in scope (the
    enclosing shard_maps' mesh axes) to their sizes; a collective naming another axis
    is a :class:`TypeCheckError` ("Found an unbound axis name: z"). ``None``: no axis is
    in scope.
    """

def builtin_primitives() -> list[str]:
    """The names of the built-in primitives of the Rust catalogue."""

def lower_to_stablehlo(
    jaxpr: Jaxpr,
    module_name: str = "ferrax",
    *,
    mesh: Sequence[tuple[str, int]] | None = None,
    arg_specs: Sequence[Sequence[str | Sequence[str] | None] | None] | None = None,
    result_specs: Sequence[Sequence[str | Sequence[str] | None] | None] | None = None,
    num_partitions: int | None = None,
) -> str:
    """The jaxpr as a StableHLO text module; ``@main`` takes the constvars, then the invars.

    For SPMD, as JAX 0.10 lowers with Shardy: ``mesh`` (``(("x", 2), ("y", 2))``, or an
    object with ``axis_names`` and ``axis_sizes``) is declared as ``sdy.mesh @mesh``;
    ``arg_specs`` (one per argument of ``@main``: constvars then invars) and
    ``result_specs`` (one per output), each a partition spec (a tuple of entries:
    ``None``, an axis name or a tuple of names) or ``None``, become ``sdy.sharding``
    attributes; ``num_partitions`` (default: the largest size of ``mesh`` and of the
    meshes of the jaxpr's ``shard_map``/``sharding_constraint`` equations, else 1) > 1 adds
    ``mhlo.num_partitions`` and ``mhlo.num_replicas = 1``. Devices are numbered row-major
    over the mesh axes. A mesh param (``sharding_constraint``, ``shard_map``) with more
    devices than ``num_partitions``, or specs that do not fit, is a
    :class:`LoweringError`; a malformed mesh or spec is a ``ValueError``.

    An extension primitive or a nested jaxpr with constants is a :class:`LoweringError`.
    """

def lower_with_callbacks(jaxpr: Jaxpr, module_name: str = "ferrax") -> tuple[str, list[tuple[Any, bool]]]:
    """The jaxpr lowered as by :func:`lower_to_stablehlo` (one device), with the host
    callbacks its custom calls name by index (``debug_callback``'s and
    ``pure_callback``'s ``callback`` params, in index order; for ``debug_print`` a dict
    of its params), each with whether its call
    passes a token (an ordered callback: the host function takes the token first and
    returns it first): the module must be compiled with exactly these callbacks. A
    callback read from text is its name, a ``str``.
    """

def insert_pvary(
    jaxpr: Jaxpr,
    mesh: Sequence[tuple[str, int]],
    in_axes: Sequence[Sequence[str]],
    out_axes: Sequence[Sequence[str]] | None = None,
) -> tuple[Jaxpr, list[list[str]]]:
    """A shard_map body with ``pvary`` equations inserted where JAX's tracing inserts them.

    ``in_axes`` gives, per input, the mesh axes it varies over (its in_spec's axes).
    Returns the new body and, per output, the axes it varies over (mesh order). With
    ``out_axes`` (per output, its out_spec's axes) an output varying over fewer of them
    gets a ``pvary`` to them; the caller checks that no output varies over an axis its
    out_spec does not name (JAX's error). Operands of one equation are made to vary
    over the union of their axes; ``psum``/``pmax``/``pmin`` get their operand
    ``pvary``'d over their axes first; calls, ``cond``, ``while`` and ``scan`` are
    inferred through their jaxprs. A wrong number of axes lists is a :class:`PassError`.
    """

def sdy_sharding(
    axis_names: Sequence[str],
    axis_sizes: Sequence[int],
    spec: Sequence[str | Sequence[str] | None],
    rank: int,
) -> str:
    """The Shardy dimension shardings (``[{"x"}, {}]``) of a rank-``rank`` array laid out by
    ``spec`` on the mesh of these axes.

    Each ``spec`` entry is ``None``, an axis name or a sequence of names (``{"x", "y"}``).
    An unknown axis, an axis used twice or a sharded dimension past ``rank`` (trailing
    ``None`` entries are fine, as in JAX) raises ``ValueError``.

    Params of the sharding primitives, as the bindings give and take them: a mesh as
    ``(("x", 2), ("y", 2))`` (or any object with ``axis_names`` and ``axis_sizes``); a
    partition spec as a tuple of entries (``None``, a name, or a tuple of names; any
    iterable of such entries is accepted); a tuple of specs; axis names as a tuple of
    ``str`` (one ``str`` is accepted); a set of names as a ``frozenset`` of ``str``; a
    permutation as a tuple of ``(int, int)`` pairs.
    """

def hlo_sharding(
    axis_names: Sequence[str],
    axis_sizes: Sequence[int],
    spec: Sequence[str | Sequence[str] | None],
    rank: int,
) -> str:
    """The GSPMD sharding text of a rank-``rank`` array laid out by ``spec`` on a mesh.

    ``{replicated}`` or ``{devices=[t0,...(,k)]ID,ID,...( last_tile_dim_replicate)}`` with
    an explicit list of partition ids (devices numbered row-major over the mesh axes), as
    ``str(NamedSharding(mesh, spec)._to_xla_hlo_sharding(rank))`` in explicit form. Errors
    as :func:`sdy_sharding`.
    """

def sharding_tiling(
    axis_names: Sequence[str],
    axis_sizes: Sequence[int],
    spec: Sequence[str | Sequence[str] | None],
    rank: int,
) -> tuple[list[int], list[int], int]:
    """How a rank-``rank`` array laid out by ``spec`` on a mesh is cut: ``(tiles per
    dimension, partition of each piece row-major over [tiles..., copies], copies)``
    (partitions numbered row-major over the mesh axes). Errors as :func:`sdy_sharding`.
    """

def consts_to_invars(jaxpr: Jaxpr) -> Jaxpr:
    """The same jaxpr with its constvars turned into leading inputs (closure conversion)."""

def random_jaxpr(seed: int, *, eqns: int = 12, max_depth: int = 2, inputs: int = 3) -> Jaxpr:
    """A random well-typed f32 jaxpr (with nested jit/cond/while/scan); seeded."""

def reference_eval(
    jaxpr: Jaxpr,
    consts: Sequence[tuple[ShapedArray, Sequence[bool | int | float]]],
    args: Sequence[tuple[ShapedArray, Sequence[bool | int | float]]],
) -> list[tuple[ShapedArray, list[Any]]]:
    """Runs the crate's reference evaluator; arrays as ``(aval, flat row-major values)``."""

def cost_analysis(jaxpr: Jaxpr) -> dict[str, Any]:
    """``{"flops", "transcendentals", "bytes_accessed", "while_loops", "by_primitive"}``:
    the static cost counted from the types, one iteration per ``while`` loop (their trip
    counts depend on data); ``by_primitive`` maps each primitive's name to its
    ``{"flops", "transcendentals", "bytes_accessed"}``."""

def equation_costs(jaxpr: Jaxpr) -> list[dict[str, Any]]:
    """The static cost of each top-level equation, in order, as :func:`cost_analysis`
    reports a jaxpr's."""

@final
class RuleSet:
    """Named rewrite rules read from text (``name: lhs => rhs [if conditions]``, one per
    line; see ``ferrax.rewrite``). Unreadable rules are a ``ParseError``."""

    def __new__(cls, text: str) -> Self: ...
    @staticmethod
    def algebraic() -> RuleSet:
        """The built-in algebraic simplifications."""
    @property
    def names(self) -> list[str]:
        """The rules' names, in order."""
    def __len__(self) -> int: ...
    def __add__(self, other: RuleSet, /) -> RuleSet: ...
    def __radd__(self, other: RuleSet, /) -> RuleSet: ...

@disjoint_base
class Dispatcher:
    """jit's hit path, the base class of ``ferrax._jit.Jitted``: a call whose signature
    was registered (device arrays in tuples, lists, dicts and None, on the default
    device, in the same x64 mode, no staging trace active) runs its executable here;
    any other call goes to the subclass's ``_call(args, kwargs)``."""

    def __new__(cls, *_args: Any, **_kwargs: Any) -> Self: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Runs a registered signature, or ``self._call(args, kwargs)``."""
    def _register(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        flat: list[Any],
        *,
        x64: bool,
        consts: Sequence[Any],
        program: tuple[Any, Any, Any, Sequence[Any]],
        out_template: Any,
        unflatten: Callable[[list[Any]], Any],
    ) -> bool:
        """Registers the signature of a call just run on the default device (``flat``:
        its leaves in the Python path's order; ``program``: ``(execute_sharded,
        consume_with_handlers, handlers, out_avals)``; ``out_template``: the output tree
        with leaf indices as leaves, else ``unflatten(results)`` builds it). Returns
        whether the hit path takes such calls."""
    def _hit_until(self, step: int, *args: Any, **kwargs: Any) -> Any:
        """The hit path up to step ``step`` (0 enter, 1 trace state and x64, 2 flatten,
        3 match, 4 ``execute_sharded``, 5 ``consume_with_handlers``, 6 wrap: the whole
        call), for timing each; a miss is a ``RuntimeError``."""
    def _hit_path_size(self) -> int:
        """How many signatures the hit path holds."""

def set_dispatch_runtime(*, device_array: type[Any], config: ModuleType, trace_state: Any) -> None:
    """Tells the hit path which class is the device array, which module holds the x64
    flag (``_x64``) and what the (thread-local) trace state is (its ``dynamic`` stack).
    Called once, by ``ferrax._jit``."""

def rewrite(jaxpr: Jaxpr, rules: RuleSet, max_iterations: int = 100) -> tuple[Jaxpr, dict[str, int], int]:
    """Applies the rules everywhere until none applies; returns the rewritten jaxpr (dead
    equations removed, every input kept, typechecked), how many times each rule applied
    and how many passes changed something. No fixpoint within ``max_iterations`` passes,
    or an ill-typed right side, is a ``RewriteError``."""

def partial_eval(
    jaxpr: Jaxpr, unknowns: Sequence[bool], instantiate: Sequence[bool]
) -> tuple[Jaxpr, Jaxpr, list[bool], int]:
    """Splits ``jaxpr`` for inputs of which those flagged in ``unknowns`` are unknown.

    Returns ``(known, unknown, out_unknowns, num_residuals)``: ``known`` takes the known
    inputs and returns the known outputs, then the residuals; ``unknown`` takes the
    residuals, then the unknown inputs, and returns the unknown outputs; ``out_unknowns``
    flags the outputs ``unknown`` returns (those depending on an unknown input, and those
    flagged in ``instantiate``). A wrong flag count is a :class:`PassError`.
    """
