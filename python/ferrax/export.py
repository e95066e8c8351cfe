"""Saving and loading programs, as ``jax.export``.

``export(jit(f))(*args)`` traces ``f`` for these arguments (arrays or
:class:`~ferrax.ShapeDtypeStruct`) into an :class:`Exported`: the closed jaxpr, its
constants, and the pytree structures and types of the inputs and outputs.
``Exported.serialize()`` gives its bytes, and :func:`deserialize` reads them back in a
process that need not have ``f``'s source: ``Exported.call`` runs the program as one
jit equation, so it runs eagerly and under ``jit``, ``grad``, ``vmap`` and the rest.
``custom_jvp``/``custom_vjp`` rules are saved too (traced into jaxprs); host callbacks,
params that are Python objects, primitives defined in Python and pytree nodes other
than tuples, lists, dicts, None and key arrays are refused by ``serialize`` with a
:class:`SerializationError`; programs over a mesh (``shard_map``, sharding constraints)
by ``export``, as their meshes are not saved.

The bytes are a zip archive in NumPy's ``.npz`` layout (``numpy.load`` opens it):

- ``manifest.json``, a JSON object: ``"format": "ferrax.export"``; ``"version"``, an
  integer (:data:`SERIALIZATION_VERSION` when written; :func:`deserialize` refuses a
  newer one); ``"fun_name"``; ``"in_tree"`` and ``"out_tree"``, pytree structures
  (``"*"`` a leaf, ``null`` None, ``{"tuple": [...]}``, ``{"list": [...]}``,
  ``{"dict": [[key, child], ...]}`` with string or integer keys in sorted order,
  ``{"key_array": child}`` a ``ferrax.random`` key array); ``"in_avals"`` and
  ``"out_avals"``, lists of ``{"shape": [2, 3], "dtype": "bfloat16", "weak_type":
  false}``; ``"jaxprs"``, closed jaxprs, and ``"program"`` the index of the exported one;
  ``"rules"``; ``"consts"``, the constants' avals.
- ``consts/<i>.npy``: constant ``i``. A bfloat16 constant is stored as its bits
  (``uint16``), a PRNG key array as its ``uint32[..., 2]`` data, other dtypes as
  themselves.

A jaxpr record is ``{"text": <jaxpr text, read by ferrax.core.parse_jaxpr>, "consts":
[constant indices], "weak": [...], "rules": [[eqn, param, rule], ...],
"nested_consts": [[eqn, param, position, [constant indices]], ...]}``: what the text
does not say. Jaxprs are numbered in pre-order, and so are equations (a jaxpr, then
each equation followed by the jaxprs in its params, by param name); ``weak`` lists the
weak types (``["var", jaxpr, i]`` for the ``i``-th constvar-then-invar, ``["lit", eqn,
i]`` for a literal operand, ``["out", jaxpr, i]`` for a literal output), ``rules`` the
params filled by a rule record, ``nested_consts`` the constants of nested closed
jaxprs. A rule record is ``{"kind", "name", "jaxpr", "count"}``, a differentiation rule
traced into a jaxpr: ``"jvp"`` (a ``custom_jvp`` rule: primals then tangents to primal
then tangent outputs, ``count`` primal outputs), ``"vjp_fwd"`` (primals to outputs then
residuals, ``count`` outputs) or ``"vjp_bwd"`` (residuals then output cotangents to the
inputs' cotangents, ``count`` residuals). A rule's jaxpr may name its own rule (``relu``'s
rule calls ``relu``).
"""

from ferrax._export import (
    SERIALIZATION_VERSION,
    DeserializationError,
    ExportError,
    Exported,
    SerializationError,
    SignatureMismatchError,
    deserialize,
    export,
)

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
