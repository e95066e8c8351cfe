"""Saving and loading programs: :func:`export`, :class:`Exported`, :func:`deserialize`
(public in :mod:`ferrax.export`, whose docstring describes the byte format), and the
:mod:`copyreg` reducers that pickle and deep-copy jaxprs through the same forms.

Jaxpr text holds almost all of a program; what it leaves out is found by reading the
text back and comparing (:func:`_lost_in_text`), and put back after reading
(:func:`_rebuild`): weak types, the constants of nested jaxprs, and params that are
Python objects. Of those, the rules of ``custom_jvp``/``custom_vjp`` calls are traced
into jaxprs of their own; the rest (host callbacks, ...) only pickling can keep, as the
objects themselves.
"""

from __future__ import annotations

import copy
import copyreg
import functools
import io
import itertools
import json
import math
import zipfile
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Final, NamedTuple

import numpy as np

from ferrax import _ir, dtypes
from ferrax._array import type_name
from ferrax._core import ConcreteArray, KeyValue, Tracer, aval_of, extension_named, pack_keys, unpack_keys
from ferrax._interpreters.ad import float0
from ferrax._eval_shape import ShapeDtypeStruct, _aval, _key_data_struct
from ferrax._jit import Jitted, eval_jaxpr, jit_p
from ferrax._staging import trace_to_jaxpr
from ferrax.errors import FerraxError
from ferrax.random._keys import KeyArray
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_map, tree_structure, tree_unflatten

__all__ = [
    "DeserializationError",
    "ExportError",
    "Exported",
    "SERIALIZATION_VERSION",
    "SerializationError",
    "SignatureMismatchError",
    "deserialize",
    "export",
]

SERIALIZATION_VERSION: Final = 1
"""The version of the serialized form this ferrax writes, and the newest it reads."""

_FORMAT: Final = "ferrax.export"
_MANIFEST: Final = "manifest.json"
# Every member's timestamp: the same program serializes to the same bytes.
_DATE_TIME: Final = (1980, 1, 1, 0, 0, 0)


# ----------------------------------------------------------------------------- errors


class ExportError(FerraxError, ValueError):
    """A program cannot be exported, saved, loaded or called as asked (a ``ValueError``,
    as JAX's export errors are). Its subclasses say which."""


class SerializationError(ExportError):
    """An exported program holds something its serialized form cannot: a host callback,
    a parameter that is a Python object, a custom pytree node, a rule that cannot be
    traced. Raised by ``serialize`` (and by pickling a jaxpr), never later by a reader."""


class DeserializationError(ExportError):
    """Bytes that are not a readable export: truncated, corrupted, not an export at all,
    or written by a newer serialization version than this ferrax reads."""


class SignatureMismatchError(ExportError):
    """An exported program was called with arguments of another pytree structure, shape
    or dtype than it was exported for."""


# --------------------------------------------------------------------------- Exported


class Exported:
    """A program exported by :func:`export` or read by :func:`deserialize` (JAX's
    ``jax.export.Exported``).

    ``in_tree`` is the structure of ``(args, kwargs)`` (static arguments excluded),
    ``in_avals`` the types of its leaves; ``out_tree`` and ``out_avals`` describe the
    result. :meth:`call` runs it; :meth:`serialize` saves it.
    """

    __slots__ = ("_fun_name", "_in_tree", "_in_avals", "_out_tree", "_out_avals", "_jaxpr", "_call_jaxpr")

    def __init__(
        self,
        fun_name: str,
        in_tree: PyTreeDef,
        in_avals: Sequence[_ir.ShapedArray],
        out_tree: PyTreeDef,
        out_avals: Sequence[_ir.ShapedArray],
        jaxpr: _ir.ClosedJaxpr,
    ) -> None:
        self._fun_name = fun_name
        self._in_tree = in_tree
        self._in_avals = tuple(in_avals)
        self._out_tree = out_tree
        self._out_avals = tuple(out_avals)
        self._jaxpr = jaxpr

        # Called, the program is one jit equation (its constants as leading operands):
        # eagerly XLA compiles it once (or, for primitives XLA lacks, eval_jaxpr runs it);
        # under jit, grad and vmap it transforms as any jitted call does.
        self._call_jaxpr = _ir.ClosedJaxpr(_ir.consts_to_invars(jaxpr.jaxpr), [])

    @property
    def fun_name(self) -> str:
        """The exported function's name."""
        return self._fun_name

    @property
    def in_tree(self) -> PyTreeDef:
        """The pytree structure of the arguments, ``(args, kwargs)``."""
        return self._in_tree

    @property
    def in_avals(self) -> tuple[_ir.ShapedArray, ...]:
        """The types of the argument leaves."""
        return self._in_avals

    @property
    def out_tree(self) -> PyTreeDef:
        """The pytree structure of the result."""
        return self._out_tree

    @property
    def out_avals(self) -> tuple[_ir.ShapedArray, ...]:
        """The types of the result's leaves."""
        return self._out_avals

    @property
    def jaxpr(self) -> _ir.ClosedJaxpr:
        """The program: its inputs are the argument leaves, its outputs the result's."""
        return self._jaxpr

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the program on arguments of the structure and types it was exported for
        (else :class:`SignatureMismatchError`), eagerly or under any transformation."""
        flat, tree = tree_flatten((args, kwargs))
        if tree != self._in_tree:
            raise SignatureMismatchError(
                f"{self._fun_name} was exported for arguments of structure {self._in_tree}, "
                f"called with {tree}"
            )
        for i, (x, want) in enumerate(zip(flat, self._in_avals)):
            try:
                got = aval_of(x)
            except TypeError:
                raise SignatureMismatchError(
                    f"argument leaf {i} of {self._fun_name}, of type {type_name(x)}, is not an array"
                ) from None
            if got.shape != want.shape or got.dtype != want.dtype:
                raise SignatureMismatchError(
                    f"argument leaf {i} of {self._fun_name} has type {got.str_short()}, but the "
                    f"program was exported for {want.str_short()}"
                )
        outs = jit_p.bind(*self._jaxpr.consts, *flat, jaxpr=self._call_jaxpr, name=self._fun_name)
        return tree_unflatten(self._out_tree, outs)

    def serialize(self) -> bytearray:
        """The program as bytes (see :mod:`ferrax.export` for the format), for
        :func:`deserialize`. Raises :class:`SerializationError` for what the format
        cannot hold."""
        writer = _Writer(keep_opaque=False)
        program = writer.add_jaxpr(self._jaxpr.jaxpr, self._jaxpr.consts)
        manifest = {
            "format": _FORMAT,
            "version": SERIALIZATION_VERSION,
            "fun_name": self._fun_name,
            "in_tree": _tree_to_json(self._in_tree, "argument"),
            "out_tree": _tree_to_json(self._out_tree, "result"),
            "in_avals": [_aval_to_json(a) for a in self._in_avals],
            "out_avals": [_aval_to_json(a) for a in self._out_avals],
            "program": program,
            **writer.records(),
        }
        return _pack(manifest, writer.arrays)

    def __reduce__(self) -> tuple[Callable[[bytes], Exported], tuple[bytes]]:
        return deserialize, (bytes(self.serialize()),)

    def __repr__(self) -> str:
        ins = ", ".join(a.str_short() for a in self._in_avals)
        outs = ", ".join(a.str_short() for a in self._out_avals)
        return f"Exported({self._fun_name}: ({ins}) -> ({outs}))"


def export(fun_jit: Jitted[Any, Any]) -> Callable[..., Exported]:
    """``export(jit(f))(*args, **kwargs)``: ``f`` traced for these arguments (arrays or
    :class:`~ferrax.ShapeDtypeStruct`; the jitted function's static arguments as
    values) into an :class:`Exported`, as ``jax.export.export``."""
    if not isinstance(fun_jit, Jitted):
        raise ExportError(
            f"export takes a function wrapped in ferrax.jit, got {fun_jit!r:.60} of type "
            f"{type_name(fun_jit)}"
        )

    def do_export(*args: Any, **kwargs: Any) -> Exported:
        is_struct = lambda x: isinstance(x, (KeyArray, ShapeDtypeStruct))  # noqa: E731
        args, kwargs = tree_map(_key_data_struct, (args, kwargs), is_leaf=is_struct)
        flat, in_tree, _, rebuild = fun_jit._signature.split(tuple(args), dict(kwargs))
        avals = [_aval(x, i) for i, x in enumerate(flat)]
        fun = rebuild(fun_jit._fun)
        trees: list[PyTreeDef] = []

        def flat_fun(*a: Any) -> list[Any]:
            leaves, tree = tree_flatten(fun(*a))
            trees.append(tree)
            for leaf in leaves:
                if isinstance(leaf, np.ndarray) and leaf.dtype == float0:
                    raise ExportError(
                        f"{fun_jit._name} returns a float0 value (the tangent of an integer): "
                        "exported programs return arrays only"
                    )
            return leaves

        closed, _ = trace_to_jaxpr(flat_fun, avals, in_tree)
        sharded = sorted({e.primitive for e in _eqns_in(closed.jaxpr) if "mesh" in e.params})
        if sharded:
            # Their meshes are not part of an Exported (nor of its bytes), and the program
            # would not compile without them.
            raise ExportError(
                f"{fun_jit._name} lays values out over devices ({', '.join(sharded)}): programs "
                "over a mesh cannot be exported yet"
            )
        return Exported(fun_jit._name, in_tree, avals, trees[0], closed.out_avals, closed)

    return do_export


def deserialize(blob: bytes | bytearray | memoryview) -> Exported:
    """The :class:`Exported` that :meth:`Exported.serialize` wrote as ``blob``.

    Raises :class:`DeserializationError` for bytes that are not a complete export, and
    for an export of a newer serialization version than :data:`SERIALIZATION_VERSION`.
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise DeserializationError(f"deserialize takes bytes, got {type_name(blob)}")
    manifest, arrays = _unpack(bytes(blob))
    try:
        reader = _Reader(manifest, arrays, [])
        program = reader.closed_jaxpr(_index(manifest["program"], len(manifest["jaxprs"])))
        loaded = reader.load_all()
        fun_name = manifest["fun_name"]
        in_tree = _tree_from_json(manifest["in_tree"])
        out_tree = _tree_from_json(manifest["out_tree"])
        in_avals = [_aval_from_json(a) for a in manifest["in_avals"]]
        out_avals = [_aval_from_json(a) for a in manifest["out_avals"]]
        if not isinstance(fun_name, str):
            raise _Malformed("fun_name is not a string")
        if program.in_avals != in_avals or program.out_avals != out_avals:
            raise _Malformed("the program's types are not the declared in_avals and out_avals")
        if in_tree.num_leaves != len(in_avals) or out_tree.num_leaves != len(out_avals):
            raise _Malformed("a pytree structure's leaves do not match its avals")
        for eqn in (e for closed in loaded for e in _eqns_in(closed.jaxpr)):
            for name in _RULE_PARAMS.get(eqn.primitive, ()):
                if not isinstance(eqn.params[name], _SerializedRule):
                    raise _Malformed(f"a {eqn.primitive} equation has no rule record for its {name}")
    except DeserializationError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure to read the bytes is a bad file
        raise DeserializationError(f"not a readable ferrax export: {_describe(e)}") from e
    return Exported(fun_name, in_tree, in_avals, out_tree, out_avals, program)


class _Malformed(Exception):
    """A manifest that is well-formed JSON but not a well-formed export (internal)."""


def _describe(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _weak_site(data: Any) -> _WeakSite:
    if not isinstance(data, list) or len(data) != 3 or data[0] not in ("var", "lit", "out"):
        raise _Malformed(f"bad weak type site {data!r:.80}")
    return (data[0], _index(data[1], 2**62), _index(data[2], 2**62))


def _index(value: Any, size: int) -> int:
    if type(value) is not int or not 0 <= value < size:
        raise _Malformed(f"index {value!r} out of range (0..{size - 1})")
    return value


# ------------------------------------------------------------------- the container


def _pack(manifest: dict[str, Any], arrays: Sequence[np.ndarray[Any, Any]]) -> bytearray:
    """The zip archive of a manifest and its constants."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(zipfile.ZipInfo(_MANIFEST, _DATE_TIME), json.dumps(manifest, indent=1))
        for i, array in enumerate(arrays):
            data = io.BytesIO()
            np.lib.format.write_array(data, array, allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"consts/{i}.npy", _DATE_TIME), data.getvalue())
    return bytearray(buffer.getvalue())


def _unpack(blob: bytes) -> tuple[dict[str, Any], list[np.ndarray[Any, Any]]]:
    """The manifest and constants of an archive, its version checked first."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(blob))
    except zipfile.BadZipFile:
        raise DeserializationError(
            f"not a ferrax export: the {len(blob)} bytes are not a complete zip archive "
            "(truncated or corrupted)"
        ) from None
    except Exception as e:  # noqa: BLE001 - a corrupted directory fails in many ways
        raise DeserializationError(f"not a readable ferrax export: {_describe(e)}") from e
    try:
        with archive:
            if _MANIFEST not in archive.namelist():
                raise DeserializationError(f"not a ferrax export: the archive has no {_MANIFEST}")
            manifest = json.loads(archive.read(_MANIFEST).decode("utf-8"))
            if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
                raise DeserializationError(f"not a ferrax export: {_MANIFEST} does not say format {_FORMAT!r}")
            version = manifest.get("version")
            if type(version) is not int or version < 1:
                raise DeserializationError(f"not a ferrax export: bad version {version!r}")
            if version > SERIALIZATION_VERSION:
                raise DeserializationError(
                    f"the export has serialization version {version}, newer than version "
                    f"{SERIALIZATION_VERSION}, the newest this ferrax reads: load it with a newer ferrax"
                )
            consts = manifest.get("consts")
            if not isinstance(consts, list):
                raise DeserializationError("not a readable ferrax export: consts is not a list")
            arrays = [_read_npy(archive.read(f"consts/{i}.npy"), i) for i in range(len(consts))]
    except DeserializationError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure to read the bytes is a bad file
        raise DeserializationError(f"not a readable ferrax export: {_describe(e)}") from e
    return manifest, arrays


def _read_npy(data: bytes, index: int) -> np.ndarray[Any, Any]:
    """The array of a ``.npy`` member, its size checked against its header before
    anything is allocated."""
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
    else:
        raise _Malformed(f"consts/{index}.npy has .npy version {version}")
    if dtype.hasobject:
        raise _Malformed(f"consts/{index}.npy holds Python objects")
    body = data[stream.tell() :]
    if len(body) != math.prod(shape) * dtype.itemsize:
        raise _Malformed(f"consts/{index}.npy has {len(body)} bytes of data for {dtype}{list(shape)}")
    return np.frombuffer(body, dtype).reshape(shape, order="F" if fortran else "C")


# ------------------------------------------------------------------ avals and trees


def _aval_to_json(aval: _ir.ShapedArray) -> dict[str, Any]:
    return {"shape": list(aval.shape), "dtype": aval.dtype.name, "weak_type": aval.weak_type}


def _aval_from_json(data: Any) -> _ir.ShapedArray:
    if not isinstance(data, dict) or set(data) != {"shape", "dtype", "weak_type"}:
        raise _Malformed(f"an aval is not {{shape, dtype, weak_type}}: {data!r:.80}")
    shape, dtype, weak = data["shape"], data["dtype"], data["weak_type"]
    if not isinstance(shape, list) or any(type(d) is not int or d < 0 for d in shape):
        raise _Malformed(f"bad shape {shape!r:.80}")
    if not isinstance(dtype, str) or type(weak) is not bool:
        raise _Malformed(f"bad dtype or weak type in {data!r:.80}")
    return _ir.ShapedArray(shape, dtype, weak)


class _Hole:
    """The leaves of a pytree whose structure is being written or read."""


_HOLE = _Hole()


def _tree_to_json(tree: PyTreeDef, what: str) -> Any:
    """The JSON form of a structure of tuples, lists, dicts, None and key arrays."""
    return _node_to_json(tree_unflatten(tree, [_HOLE] * tree.num_leaves), what)


def _node_to_json(x: Any, what: str) -> Any:
    if x is _HOLE:
        return "*"
    if x is None:
        return None
    t = type(x)
    if t is tuple or t is list:
        return {t.__name__: [_node_to_json(c, what) for c in x]}
    if t is dict:
        for k in x:
            if type(k) is not str and type(k) is not int:
                raise SerializationError(
                    f"the {what} pytree has a dict key {k!r:.40} of type {type_name(k)}: serialized "
                    "dict keys are strings or integers"
                )
        return {"dict": [[k, _node_to_json(x[k], what)] for k in sorted(x)]}
    if t is KeyArray:
        return {"key_array": _node_to_json(x._keys, what)}
    raise SerializationError(
        f"the {what} pytree has a node of type {type_name(x)}: serialized pytrees are made of "
        "tuples, lists, dicts, None and PRNG key arrays (convert it to one of those first)"
    )


def _tree_from_json(data: Any) -> PyTreeDef:
    return tree_structure(_node_from_json(data))


def _node_from_json(data: Any) -> Any:
    if data == "*":
        return _HOLE
    if data is None:
        return None
    if not isinstance(data, dict) or len(data) != 1:
        raise _Malformed(f"bad pytree node {data!r:.80}")
    (kind, children), = data.items()
    if kind == "key_array":
        return KeyArray._wrap(_node_from_json(children))
    if not isinstance(children, list):
        raise _Malformed(f"bad pytree node {data!r:.80}")
    if kind == "tuple":
        return tuple(_node_from_json(c) for c in children)
    if kind == "list":
        return [_node_from_json(c) for c in children]
    if kind == "dict":
        out: dict[str | int, Any] = {}
        for item in children:
            if not isinstance(item, list) or len(item) != 2 or type(item[0]) not in (str, int) or item[0] in out:
                raise _Malformed(f"bad dict entry {item!r:.80}")
            out[item[0]] = _node_from_json(item[1])
        return out
    raise _Malformed(f"unknown pytree node kind {kind!r:.40}")


# ------------------------------------------------------------------------ constants


def _stored_array(value: Any, aval: _ir.ShapedArray) -> np.ndarray[Any, Any]:
    """A constant of type ``aval`` as it is stored: bfloat16 as its bits, keys as their
    ``uint32[..., 2]`` data."""
    if isinstance(value, Tracer):
        raise SerializationError(
            f"a constant of type {aval.str_short()} is a traced value: export the function "
            "outside of other transformations"
        )
    host = value._value if isinstance(value, ConcreteArray) else np.asarray(value)
    if tuple(host.shape) != aval.shape:
        raise SerializationError(f"a constant of shape {host.shape} does not have its type {aval.str_short()}")
    if dtypes.is_key(aval.dtype):
        return unpack_keys(np.asarray(host, dtype=np.uint64))
    if aval.dtype == dtypes.bfloat16:
        return np.ascontiguousarray(host, dtype=dtypes.bfloat16).view(np.uint16)
    return np.ascontiguousarray(host, dtype=aval.dtype)


def _loaded_const(stored: np.ndarray[Any, Any], aval: _ir.ShapedArray) -> ConcreteArray:
    """The constant a stored array is (the inverse of :func:`_stored_array`)."""
    want_shape: tuple[int, ...] = aval.shape
    want_dtype: np.dtype[Any] = aval.dtype
    if dtypes.is_key(aval.dtype):
        want_shape, want_dtype = (*aval.shape, 2), np.dtype(np.uint32)
    elif aval.dtype == dtypes.bfloat16:
        want_dtype = np.dtype(np.uint16)
    if tuple(stored.shape) != want_shape or stored.dtype != want_dtype:
        raise _Malformed(f"a stored {stored.dtype}{list(stored.shape)} constant is not of type {aval.str_short()}")
    if dtypes.is_key(aval.dtype):
        return KeyValue(pack_keys(stored))
    if aval.dtype == dtypes.bfloat16:
        stored = stored.view(dtypes.bfloat16)
    return ConcreteArray(stored, aval.weak_type)


# ------------------------------------------------- what jaxpr text leaves out


def _sub_jaxprs(value: Any) -> list[_ir.ClosedJaxpr] | None:
    """The jaxprs a param holds (a jaxpr, or a tuple of them), or None."""
    if isinstance(value, _ir.ClosedJaxpr):
        return [value]
    if isinstance(value, tuple) and value and all(isinstance(v, _ir.ClosedJaxpr) for v in value):
        return list(value)
    return None


def _same(a: Any, b: Any) -> bool:
    """Whether two param values (other than jaxprs) are the same value of the same type."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and a != a:
        return bool(b != b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values without a truth value of == are not the same
        return False


def _is_plain(value: Any) -> bool:
    """Whether a param value is data (not a Python object that means something else)."""
    if isinstance(value, (tuple, frozenset)):
        return all(_is_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, np.dtype)) or dtypes.is_key(value)


class _LostParam(NamedTuple):
    """A param that reading a jaxpr's text back does not give (equation ``number`` in
    pre-order): not printed at all, or printed as something else."""

    number: int
    eqn: _ir.JaxprEqn
    name: str
    value: Any
    printed: bool


# Where a jaxpr has a weak type, which its text does not show (as JAX's does not):
# ("var", jaxpr number, position among the constvars then the invars), ("lit", equation
# number, operand position), ("out", jaxpr number, output position); jaxprs and equations
# numbered in pre-order (a jaxpr, its equations, each followed by the jaxprs in its
# params, by param name). The other types follow from these by the primitives' rules.
_WeakSite = tuple[str, int, int]


class _Lost(NamedTuple):
    """What reading a jaxpr's text back does not give: params, the nested closed
    jaxprs that have constants (by equation number, param and position), weak types."""

    params: list[_LostParam]
    nested: list[tuple[int, str, int, _ir.ClosedJaxpr]]
    weak: list[_WeakSite]


class _Fixes(NamedTuple):
    """What to put back into a jaxpr read from text (see :func:`_rebuild`)."""

    params: Mapping[int, Mapping[str, Any]]
    nested: Mapping[tuple[int, str, int], Sequence[Any]]
    weak: frozenset[_WeakSite]

    def needed(self) -> bool:
        return bool(self.params or self.nested or self.weak)


def _lost_in_text(original: _ir.Jaxpr, parsed: _ir.Jaxpr) -> _Lost:
    """Compares a jaxpr with its text read back, equation by equation."""
    lost = _Lost([], [], [])
    jaxpr_numbers = itertools.count()
    numbers = itertools.count()

    def differs(what: str) -> SerializationError:
        return SerializationError(
            f"the jaxpr does not survive its text form ({what}); this is a bug in ferrax's "
            "printer or parser"
        )

    def same_atoms(kind: str, number: int, xs: Sequence[_ir.Var | _ir.Literal], ys: Sequence[_ir.Var | _ir.Literal]) -> bool:
        for i, (x, y) in enumerate(zip(xs, ys)):
            if isinstance(x, _ir.Literal):
                if not isinstance(y, _ir.Literal) or x.aval.dtype != y.aval.dtype or not _same(x.val, y.val):
                    return False
                if x.aval.weak_type:
                    lost.weak.append((kind, number, i))
        return len(xs) == len(ys)

    def walk(a: _ir.Jaxpr, b: _ir.Jaxpr) -> None:
        jn = next(jaxpr_numbers)
        lost.weak.extend(("var", jn, i) for i, v in enumerate([*a.constvars, *a.invars]) if v.aval.weak_type)
        if len(a.eqns) != len(b.eqns) or not same_atoms("out", jn, a.outvars, b.outvars):
            raise differs("a jaxpr's equations or outputs")
        for ea, eb in zip(a.eqns, b.eqns):
            n = next(numbers)
            if ea.primitive != eb.primitive or not same_atoms("lit", n, ea.inputs, eb.inputs):
                raise differs(f"equation {n}, {ea.primitive}")
            pa, pb = ea.params, eb.params
            for name in sorted(pa):
                subs = _sub_jaxprs(pa[name])
                if subs is None:
                    if name not in pb or not _same(pa[name], pb[name]):
                        lost.params.append(_LostParam(n, ea, name, pa[name], name in pb))
                    continue
                parsed_subs = _sub_jaxprs(pb.get(name))
                if parsed_subs is None or len(parsed_subs) != len(subs):
                    raise differs(f"param {name} of equation {n}, {ea.primitive}")
                for k, (sa, sb) in enumerate(zip(subs, parsed_subs)):
                    if sa.consts and all(c is not None for c in sa.consts):
                        lost.nested.append((n, name, k, sa))
                    walk(sa.jaxpr, sb.jaxpr)

    walk(original, parsed)
    return lost


def _rebuild(parsed: _ir.Jaxpr, fixes: _Fixes, extensions: Mapping[str, _ir.ExtensionPrimitive]) -> _ir.Jaxpr:
    """``parsed`` with what its text lost put back, numbered as :func:`_lost_in_text`
    numbers it."""
    jaxpr_numbers = itertools.count()
    numbers = itertools.count()
    weak = fixes.weak

    def build(jaxpr: _ir.Jaxpr) -> _ir.Jaxpr:
        jn = next(jaxpr_numbers)
        builder = _ir.JaxprBuilder()
        env: dict[_ir.Var, _ir.Var] = {}
        for i, v in enumerate([*jaxpr.constvars, *jaxpr.invars]):
            aval = v.aval.update(weak_type=True) if ("var", jn, i) in weak else v.aval
            env[v] = builder.add_constvar(aval) if i < len(jaxpr.constvars) else builder.add_invar(aval)

        def read(kind: str, number: int, atoms: Sequence[_ir.Var | _ir.Literal]) -> list[_ir.Var | _ir.Literal]:
            return [
                builder.literal(a.val, a.aval.dtype, (kind, number, i) in weak) if isinstance(a, _ir.Literal) else env[a]
                for i, a in enumerate(atoms)
            ]

        for eqn in jaxpr.eqns:
            n = next(numbers)
            params = dict(eqn.params)
            for name in sorted(params):
                subs = _sub_jaxprs(params[name])
                if subs is None:
                    continue
                rebuilt = [
                    _ir.ClosedJaxpr(build(s.jaxpr), fixes.nested.get((n, name, k), s.consts))
                    for k, s in enumerate(subs)
                ]
                params[name] = rebuilt[0] if isinstance(params[name], _ir.ClosedJaxpr) else tuple(rebuilt)
            params.update(fixes.params.get(n, {}))
            primitive = extensions.get(eqn.primitive, eqn.primitive)
            outs = builder.add_eqn(primitive, read("lit", n, eqn.inputs), params)
            env.update(zip(eqn.outvars, outs))
        return builder.build(read("out", jn, jaxpr.outvars))

    return build(parsed)


def _eqns_in(jaxpr: _ir.Jaxpr) -> list[_ir.JaxprEqn]:
    """The equations of a jaxpr and of its nested jaxprs."""
    found: list[_ir.JaxprEqn] = []
    pending = [jaxpr]
    while pending:
        j = pending.pop()
        for eqn in j.eqns:
            found.append(eqn)
            for value in eqn.params.values():
                pending.extend(s.jaxpr for s in _sub_jaxprs(value) or ())
    return found


def _primitives_in(jaxpr: _ir.Jaxpr) -> set[str]:
    """The names of the primitives a jaxpr and its nested jaxprs use."""
    return {eqn.primitive for eqn in _eqns_in(jaxpr)}


@functools.cache
def _builtin_names() -> frozenset[str]:
    return frozenset(_ir.builtin_primitives())


def _extension_objects(names: Sequence[str], error: type[ExportError]) -> dict[str, _ir.ExtensionPrimitive]:
    """The extension primitives of these names (jaxprs and their text name them), as
    defined in this process (else ``error``)."""
    objects = {}
    for name in names:
        primitive = extension_named(name)
        if primitive is None:
            raise error(
                f"the jaxpr uses the primitive {name}, which is not defined in this process "
                "(import the module that defines it first)"
            )
        ir_primitive = primitive.ir_primitive()
        assert isinstance(ir_primitive, _ir.ExtensionPrimitive)
        objects[name] = ir_primitive
    return objects


# ------------------------------------------------------------- custom rules


class _SerializedRule:
    """A ``custom_jvp`` rule or ``custom_vjp`` ``fwd``/``bwd`` read back: its traced jaxpr
    run by :func:`ferrax.eval_jaxpr`, with the calling convention of the param it fills
    (``jvp(primals, tangents) -> (primal_outs, tangent_outs)``, ``fwd(*primals) ->
    (outs, residuals)``, ``bwd(residuals, cotangents) -> input cotangents``)."""

    __slots__ = ("kind", "count", "__name__", "_resolve", "_closed")

    def __init__(self, kind: str, count: int, name: str, resolve: Callable[[], _ir.ClosedJaxpr]) -> None:
        self.kind = kind
        self.count = count
        self.__name__ = name
        self._resolve = resolve
        self._closed: _ir.ClosedJaxpr | None = None

    @property
    def closed(self) -> _ir.ClosedJaxpr:
        """The rule's jaxpr (read on first use: rules may refer to themselves)."""
        if self._closed is None:
            self._closed = self._resolve()
        return self._closed

    def _eval(self, *args: Any) -> list[Any]:
        closed = self.closed
        return eval_jaxpr(closed.jaxpr, closed.consts, *args)

    def __call__(self, *args: Any) -> Any:
        if self.kind == "jvp":
            primals, tangents = args
            outs = self._eval(*primals, *tangents)
            return outs[: self.count], outs[self.count :]
        if self.kind == "vjp_fwd":
            outs = self._eval(*args)
            return outs[: self.count], outs[self.count :]
        residuals, cotangents = args
        return self._eval(*residuals, *cotangents)


def _captured_key(x: Any) -> Hashable:
    """What a rule's closure captured, as part of the rule's identity: data by value,
    other objects by identity (kept alive by the caller)."""
    if isinstance(x, (list, tuple)):
        return tuple(_captured_key(v) for v in x)
    if isinstance(x, _ir.ClosedJaxpr):
        return ("jaxpr", str(x.jaxpr), tuple(id(c) for c in x.consts))
    if x is None or isinstance(x, (bool, int, float, str, PyTreeDef)):
        return (type(x).__name__, x)  # True and 1 are different arguments
    return ("object", id(x))


def _rule_key(functions: Sequence[Any], avals: Sequence[_ir.ShapedArray]) -> Hashable:
    """The identity of the rule functions of one custom call: their code and what they
    captured. ``custom_jvp`` makes a new closure per call, so a rule that calls its own
    function (``relu``'s calls ``relu``) would otherwise be traced without end."""
    parts: list[Hashable] = [tuple(avals)]
    for f in functions:
        code = getattr(f, "__code__", None)
        parts.append(("code", id(code)) if code is not None else ("object", id(f)))
        for cell in getattr(f, "__closure__", None) or ():
            try:
                parts.append(_captured_key(cell.cell_contents))
            except ValueError:  # a cell not yet bound
                parts.append(("unbound",))
    return tuple(parts)


# The params of custom calls that hold their differentiation rules.
_RULE_PARAMS: Final = {"custom_jvp_call": ("jvp",), "custom_vjp_call": ("fwd", "bwd")}
_MAX_RULE_DEPTH: Final = 24


def _trace_flat(fun: Callable[..., Sequence[Any]], avals: Sequence[_ir.ShapedArray], what: str) -> _ir.ClosedJaxpr:
    """``fun`` (positional arrays to a flat list) traced into a closed jaxpr."""
    tree = tree_structure(tuple(range(len(avals))))
    try:
        closed, _ = trace_to_jaxpr(lambda *xs: list(fun(*xs)), avals, tree)
    except Exception as e:  # noqa: BLE001 - any failure of the user's rule is reported
        raise SerializationError(f"{what} cannot be traced into a jaxpr: {_describe(e)}") from e
    return closed


# ---------------------------------------------------------------------- writer


class _Writer:
    """Turns closed jaxprs into the manifest's records and the constants' arrays,
    tracing the custom rules their equations carry.

    With ``keep_opaque`` (pickling), params that neither text nor a traced rule can
    hold are kept as Python objects in :attr:`opaque`; without it they are refused.
    """

    def __init__(self, keep_opaque: bool) -> None:
        self.keep_opaque = keep_opaque
        self.jaxprs: list[dict[str, Any]] = []
        self.rules: list[dict[str, Any]] = []
        self.consts: list[dict[str, Any]] = []
        self.arrays: list[np.ndarray[Any, Any]] = []
        # (jaxpr index, equation number, param name, value)
        self.opaque: list[tuple[int, int, str, Any]] = []
        self.extensions: list[str] = []
        self._rule_indices: dict[Hashable, tuple[int, ...]] = {}
        # Objects whose ids are in rule keys, kept alive so the ids stay theirs.
        self._alive: list[Any] = []
        self._depth = 0

    def records(self) -> dict[str, Any]:
        """The manifest's entries for what was added."""
        return {"jaxprs": self.jaxprs, "rules": self.rules, "consts": self.consts}

    def add_const(self, value: Any, aval: _ir.ShapedArray) -> int:
        self.arrays.append(_stored_array(value, aval))
        self.consts.append(_aval_to_json(aval))
        return len(self.arrays) - 1

    def add_jaxpr(self, jaxpr: _ir.Jaxpr, consts: Sequence[Any] | None) -> int:
        """Adds a jaxpr (with its constants, if known); returns its index."""
        index = len(self.jaxprs)
        self.jaxprs.append({})
        primitives = _primitives_in(jaxpr)
        names = sorted(primitives - _builtin_names())
        if not self.keep_opaque:
            if primitives & _CALLBACKS:
                raise SerializationError(
                    f"the program calls back into Python ({', '.join(sorted(primitives & _CALLBACKS))}: "
                    "debug.print, debug.callback, pure_callback or io_callback): host callbacks "
                    "cannot be serialized"
                )
            if names:
                raise SerializationError(
                    f"the program uses {', '.join(names)}, a primitive defined in Python: its "
                    "rules cannot be serialized"
                )
        self.extensions.extend(n for n in names if n not in self.extensions)
        text = str(jaxpr)
        extensions = list(_extension_objects(names, SerializationError).values())
        try:
            parsed = _ir.parse_jaxpr(text, extensions=extensions)
        except FerraxError as e:
            raise SerializationError(
                f"the jaxpr's text does not read back ({_describe(e)}); this is a bug in ferrax's "
                "printer or parser"
            ) from e
        lost = _lost_in_text(jaxpr, parsed)
        rules: list[list[Any]] = []
        for param in lost.params:
            rule = self._rule(param.eqn, param.name, param.value)
            if rule is not None:
                rules.append([param.number, param.name, rule])
            elif self.keep_opaque:
                self.opaque.append((index, param.number, param.name, param.value))
            elif param.printed or not _is_plain(param.value):
                raise _unserializable(param.eqn, param.name, param.value)
            # Else a plain param the text leaves out (a default, or a hint such as scan's
            # `linear`): the jaxpr read back has the text's reading of it.
        record: dict[str, Any] = {"text": text, "rules": rules, "weak": [list(w) for w in lost.weak]}
        record["consts"] = None if consts is None else [
            self.add_const(c, v.aval) for c, v in zip(consts, jaxpr.constvars)
        ]
        record["nested_consts"] = [
            [n, name, k, [self.add_const(c, v.aval) for c, v in zip(sub.consts, sub.jaxpr.constvars)]]
            for n, name, k, sub in lost.nested
        ]
        self.jaxprs[index] = record
        return index

    def _rule(self, eqn: _ir.JaxprEqn, name: str, value: Any) -> int | None:
        """The index of the rule record for a custom call's rule param, or None when the
        param is not one."""
        if isinstance(value, _SerializedRule):
            return self._loaded_rule(value)
        if (eqn.primitive, name) == ("custom_jvp_call", "jvp"):
            return self._jvp_rule(eqn, value)
        if eqn.primitive == "custom_vjp_call" and name in ("fwd", "bwd"):
            fwd, bwd = self._vjp_rules(eqn)
            return fwd if name == "fwd" else bwd
        return None

    def _reserve(self, key: Hashable, count: int) -> tuple[tuple[int, ...], bool]:
        """The indices of ``count`` rule records for ``key``, and whether they are new."""
        known = self._rule_indices.get(key)
        if known is not None:
            return known, False
        indices = tuple(range(len(self.rules), len(self.rules) + count))
        self.rules.extend({} for _ in indices)
        self._rule_indices[key] = indices
        return indices, True

    def _loaded_rule(self, rule: _SerializedRule) -> int:
        self._alive.append(rule)
        (index,), new = self._reserve(("loaded", id(rule)), 1)
        if new:
            closed = rule.closed
            jaxpr = self._nested(lambda: self.add_jaxpr(closed.jaxpr, closed.consts), rule.__name__)
            self.rules[index] = {"kind": rule.kind, "name": rule.__name__, "jaxpr": jaxpr, "count": rule.count}
        return index

    def _nested(self, add: Callable[[], int], name: str) -> int:
        """``add()``, one rule level deeper (refused past a depth that only rules that
        never close reach)."""
        if self._depth >= _MAX_RULE_DEPTH:
            raise SerializationError(
                f"the differentiation rules nest deeper than {_MAX_RULE_DEPTH} levels at {name} "
                "(a rule that makes new rules for itself at each level)"
            )
        self._depth += 1
        try:
            return add()
        finally:
            self._depth -= 1

    def _jvp_rule(self, eqn: _ir.JaxprEqn, jvp: Any) -> int:
        call = eqn.params["call_jaxpr"]
        num_consts = eqn.params.get("num_consts", 0)
        avals = call.in_avals[num_consts:]
        n = len(avals)
        self._alive.append(jvp)
        (index,), new = self._reserve(("jvp", _rule_key([jvp], avals)), 1)
        if new:
            fun_name = eqn.params.get("name", "?")

            def both(*xs: Any) -> list[Any]:
                primal_outs, tangent_outs = jvp(list(xs[:n]), list(xs[n:]))
                return [*primal_outs, *tangent_outs]

            what = f"the custom_jvp rule of {fun_name}"
            closed = _trace_flat(both, [*avals, *avals], what)
            jaxpr = self._nested(lambda: self.add_jaxpr(closed.jaxpr, closed.consts), fun_name)
            self.rules[index] = {
                "kind": "jvp", "name": getattr(jvp, "__name__", "jvp"), "jaxpr": jaxpr,
                "count": len(call.out_avals),
            }
        return index

    def _vjp_rules(self, eqn: _ir.JaxprEqn) -> tuple[int, int]:
        params = eqn.params
        fwd, bwd, call = params["fwd"], params["bwd"], params["call_jaxpr"]
        if isinstance(fwd, _SerializedRule) and isinstance(bwd, _SerializedRule):
            return self._loaded_rule(fwd), self._loaded_rule(bwd)
        avals = call.in_avals[params.get("num_consts", 0) :]
        n_out = len(call.out_avals)
        self._alive.extend([fwd, bwd])
        (i_fwd, i_bwd), new = self._reserve(("vjp", _rule_key([fwd, bwd], avals)), 2)
        if not new:
            return i_fwd, i_bwd
        fun_name = params.get("name", "?")
        res_trees: list[PyTreeDef] = []

        def forward(*primals: Any) -> list[Any]:
            outs, res = fwd(*primals)
            leaves, tree = tree_flatten(res)
            res_trees.append(tree)
            return [*outs, *leaves]

        closed_fwd = _trace_flat(forward, avals, f"the custom_vjp fwd rule of {fun_name}")
        res_avals = closed_fwd.out_avals[n_out:]
        n_res = len(res_avals)

        def backward(*xs: Any) -> list[Any]:
            return list(bwd(tree_unflatten(res_trees[0], list(xs[:n_res])), list(xs[n_res:])))

        ct_avals = [a.update(weak_type=False) for a in call.out_avals]
        closed_bwd = _trace_flat(backward, [*res_avals, *ct_avals], f"the custom_vjp bwd rule of {fun_name}")
        j_fwd = self._nested(lambda: self.add_jaxpr(closed_fwd.jaxpr, closed_fwd.consts), fun_name)
        j_bwd = self._nested(lambda: self.add_jaxpr(closed_bwd.jaxpr, closed_bwd.consts), fun_name)
        self.rules[i_fwd] = {"kind": "vjp_fwd", "name": getattr(fwd, "__name__", "fwd"), "jaxpr": j_fwd, "count": n_out}
        self.rules[i_bwd] = {"kind": "vjp_bwd", "name": getattr(bwd, "__name__", "bwd"), "jaxpr": j_bwd, "count": n_res}
        return i_fwd, i_bwd


_CALLBACKS: Final = frozenset({"debug_callback", "pure_callback", "io_callback", "debug_print"})


def _unserializable(eqn: _ir.JaxprEqn, name: str, value: Any) -> SerializationError:
    if callable(value):
        held = f"a Python function ({getattr(value, '__name__', type_name(value))})"
    else:
        held = f"a Python object of type {type_name(value)}"
    return SerializationError(
        f"param {name} of a {eqn.primitive} equation holds {held}, which cannot be serialized"
    )


# ---------------------------------------------------------------------- reader


class _Reader:
    """Reads the closed jaxprs of a manifest (and, for pickles, the params kept as
    Python objects), each once."""

    def __init__(
        self, manifest: Mapping[str, Any], arrays: Sequence[np.ndarray[Any, Any]],
        opaque: Sequence[tuple[int, int, str, Any]],
    ) -> None:
        self._records = manifest["jaxprs"]
        self._rule_records = manifest["rules"]
        const_avals = [_aval_from_json(a) for a in manifest["consts"]]
        if not isinstance(self._records, list) or not isinstance(self._rule_records, list):
            raise _Malformed("jaxprs or rules is not a list")
        self._consts = [_loaded_const(a, aval) for a, aval in zip(arrays, const_avals, strict=True)]
        self._extensions = _extension_objects(manifest.get("extensions", []), DeserializationError)
        self._opaque: dict[int, dict[int, dict[str, Any]]] = {}
        for j, n, name, value in opaque:
            self._opaque.setdefault(j, {}).setdefault(n, {})[name] = value
        self._closed: dict[int, _ir.ClosedJaxpr] = {}
        self._rules: dict[int, _SerializedRule] = {}

    def load_all(self) -> list[_ir.ClosedJaxpr]:
        """Reads every jaxpr (a rule's is otherwise read when first used)."""
        return [self.closed_jaxpr(j) for j in range(len(self._records))]

    def const(self, i: Any) -> ConcreteArray:
        return self._consts[_index(i, len(self._consts))]

    def closed_jaxpr(self, j: int) -> _ir.ClosedJaxpr:
        closed = self._closed.get(j)
        if closed is not None:
            return closed
        record = self._records[j]
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise _Malformed(f"jaxpr {j} is not a record with a text")
        parsed = _ir.parse_jaxpr(record["text"], extensions=list(self._extensions.values()))
        params: dict[int, dict[str, Any]] = {n: dict(p) for n, p in self._opaque.get(j, {}).items()}
        for n, name, r in record["rules"]:
            params.setdefault(n, {})[name] = self.rule(r)
        nested = {
            (n, name, k): [self.const(i) for i in consts] for n, name, k, consts in record["nested_consts"]
        }
        weak = frozenset(_weak_site(w) for w in record["weak"])
        fixes = _Fixes(params, nested, weak)
        jaxpr = _rebuild(parsed, fixes, self._extensions) if fixes.needed() else parsed
        consts = record["consts"]
        if consts is None:
            closed = _ir.ClosedJaxpr(jaxpr, [None] * len(jaxpr.constvars))
        else:
            values = [self.const(i) for i in consts]
            if [v.aval for v in values] != [v.aval for v in jaxpr.constvars]:
                raise _Malformed(f"the constants of jaxpr {j} are not of its constvars' types")
            closed = _ir.ClosedJaxpr(jaxpr, values)
        self._closed[j] = closed
        return closed

    def rule(self, r: Any) -> _SerializedRule:
        """The rule record ``r`` as the param value it fills."""
        r = _index(r, len(self._rule_records))
        rule = self._rules.get(r)
        if rule is None:
            record = self._rule_records[r]
            kind, name, count = record["kind"], record["name"], record["count"]
            j = _index(record["jaxpr"], len(self._records))
            if kind not in ("jvp", "vjp_fwd", "vjp_bwd") or not isinstance(name, str) or type(count) is not int:
                raise _Malformed(f"bad rule record {record!r:.80}")
            rule = self._rules[r] = _SerializedRule(kind, count, name, lambda: self.closed_jaxpr(j))
        return rule


# ------------------------------------------------------------- pickle and deepcopy


class _PortableJaxpr:
    """A jaxpr in the form pickle and deepcopy take it: pickled as the manifest form
    (text, constants, traced rules) plus the params that are Python objects; deep-copied
    by reading its text back with the lost params (the same objects) put back."""

    __slots__ = ("jaxpr",)

    def __init__(self, jaxpr: _ir.Jaxpr) -> None:
        self.jaxpr = jaxpr

    def unwrap(self) -> _ir.Jaxpr:
        return self.jaxpr

    def __deepcopy__(self, memo: dict[int, Any]) -> _PortableJaxpr:
        jaxpr = self.jaxpr
        extensions = _extension_objects(sorted(_primitives_in(jaxpr) - _builtin_names()), SerializationError)
        parsed = _ir.parse_jaxpr(str(jaxpr), extensions=list(extensions.values()))
        lost = _lost_in_text(jaxpr, parsed)
        params: dict[int, dict[str, Any]] = {}
        for p in lost.params:
            params.setdefault(p.number, {})[p.name] = p.value
        nested = {(n, name, k): copy.deepcopy(list(sub.consts), memo) for n, name, k, sub in lost.nested}
        fixes = _Fixes(params, nested, frozenset(lost.weak))
        return _PortableJaxpr(_rebuild(parsed, fixes, extensions) if fixes.needed() else parsed)

    def __reduce__(self) -> tuple[Any, ...]:
        writer = _Writer(keep_opaque=True)
        writer.add_jaxpr(self.jaxpr, None)
        manifest = {**writer.records(), "extensions": writer.extensions}
        return _load_portable, (manifest, writer.arrays, writer.opaque)


def _load_portable(
    manifest: dict[str, Any], arrays: list[np.ndarray[Any, Any]], opaque: list[tuple[int, int, str, Any]]
) -> _PortableJaxpr:
    reader = _Reader(manifest, arrays, opaque)
    closed = reader.closed_jaxpr(0)
    reader.load_all()
    return _PortableJaxpr(closed.jaxpr)


def _reduce_jaxpr(jaxpr: _ir.Jaxpr) -> tuple[Callable[[_PortableJaxpr], _ir.Jaxpr], tuple[_PortableJaxpr]]:
    return _PortableJaxpr.unwrap, (_PortableJaxpr(jaxpr),)


def _closed_jaxpr(jaxpr: _ir.Jaxpr, consts: list[Any]) -> _ir.ClosedJaxpr:
    # A pickled key array comes back as its packed words (an Array of uint64): typed
    # again here by its constvar.
    typed = [
        KeyValue(np.asarray(c, dtype=np.uint64)) if dtypes.is_key(v.aval.dtype) and not isinstance(c, KeyValue) and c is not None else c
        for c, v in zip(consts, jaxpr.constvars)
    ]
    return _ir.ClosedJaxpr(jaxpr, typed)


def _reduce_closed_jaxpr(closed: _ir.ClosedJaxpr) -> tuple[Callable[..., _ir.ClosedJaxpr], tuple[_ir.Jaxpr, list[Any]]]:
    return _closed_jaxpr, (closed.jaxpr, list(closed.consts))


def _reduce_shaped_array(aval: _ir.ShapedArray) -> tuple[type[_ir.ShapedArray], tuple[tuple[int, ...], str, bool]]:
    return _ir.ShapedArray, (aval.shape, aval.dtype.name, aval.weak_type)


copyreg.pickle(_ir.Jaxpr, _reduce_jaxpr)
copyreg.pickle(_ir.ClosedJaxpr, _reduce_closed_jaxpr)
copyreg.pickle(_ir.ShapedArray, _reduce_shaped_array)
