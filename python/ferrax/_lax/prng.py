"""The PRNG key primitives of JAX's typed keys (dtype ``key<fry>``): ``random_seed``,
``random_wrap``, ``random_unwrap``, ``random_bits``, ``random_split``, ``random_fold_in``
and ``random_clone``, with JAX 0.10's names, params and meaning.

A key array ``key<fry>[s]`` holds threefry2x32 keys; its data is ``uint32[s, 2]``. The
eager rules here compute on keys packed one ``uint64`` per key (the high word first, see
:class:`ferrax._core.KeyValue`), as the Rust reference evaluator does. The hashing is
JAX's partitionable threefry (``jax_threefry_partitionable=True``, JAX 0.10's default):
``random_split`` and ``random_bits`` hash a 64-bit iota over the requested shape as the
counter pair (high word, low word), ``random_fold_in`` the pair ``(0, msg)``. None of them
has a derivative (keys and bits are not differentiable: zero tangents) or a transpose.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import Primitive, aval_of, pack_keys, unpack_keys
from ferrax._interpreters import ad
from ferrax._lax.bits import _threefry2x32
from ferrax._lax._operands import bind1

__all__ = [
    "random_bits",
    "random_clone",
    "random_fold_in",
    "random_seed",
    "random_split",
    "random_unwrap",
    "random_wrap",
]

NDArray = np.ndarray[Any, Any]
_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)
_UINT: dict[int, np.dtype[Any]] = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: _U64}

#: The one PRNG implementation ferrax has, by JAX's tag.
IMPL = "fry"

random_seed_p = Primitive.builtin("random_seed")
random_wrap_p = Primitive.builtin("random_wrap")
random_unwrap_p = Primitive.builtin("random_unwrap")
random_bits_p = Primitive.builtin("random_bits")
random_split_p = Primitive.builtin("random_split")
random_fold_in_p = Primitive.builtin("random_fold_in")
random_clone_p = Primitive.builtin("random_clone")


# ------------------------------------------------------------------------- eager rules


def _words(keys: NDArray) -> tuple[NDArray, NDArray]:
    keys = np.asarray(keys, dtype=_U64)
    return (keys >> np.uint64(32)).astype(_U32), (keys & np.uint64(0xFFFFFFFF)).astype(_U32)


def _hash_iota(keys: NDArray, shape: tuple[int, ...]) -> tuple[NDArray, NDArray]:
    """threefry2x32 of every key with the counters of a 64-bit iota over ``shape``:
    two ``uint32[*keys.shape, *shape]``."""
    k0, k1 = _words(keys)
    n = int(np.prod(shape, dtype=np.int64))
    iota = np.arange(n, dtype=_U64).reshape(shape)
    hi = (iota >> np.uint64(32)).astype(_U32)
    lo = (iota & np.uint64(0xFFFFFFFF)).astype(_U32)
    extra = (1,) * len(shape)
    k0 = k0.reshape(k0.shape + extra)
    k1 = k1.reshape(k1.shape + extra)
    return _threefry2x32(k0, k1, hi, lo)


def _random_seed(seeds: NDArray, *, impl: Any) -> NDArray:
    seeds = np.asarray(seeds)
    if seeds.dtype.itemsize > 4:
        # The high word by a logical shift of the bits (JAX's shift_right_logical).
        high = (seeds.view(np.dtype(f"u{seeds.dtype.itemsize}")) >> np.uint64(32)).astype(_U32)
    else:
        high = np.zeros(seeds.shape, _U32)
    low = seeds.astype(np.int64).astype(_U64) & np.uint64(0xFFFFFFFF) if seeds.dtype.kind != "b" else seeds.astype(_U64)
    return (high.astype(_U64) << np.uint64(32)) | low.astype(_U64)


def _random_bits(keys: NDArray, *, bit_width: int, shape: tuple[int, ...]) -> NDArray:
    b1, b2 = _hash_iota(keys, tuple(shape))
    dtype = _UINT[bit_width]
    if bit_width == 64:
        return (b1.astype(_U64) << np.uint64(32)) | b2.astype(_U64)
    return (b1 ^ b2).astype(dtype)


def _random_split(keys: NDArray, *, shape: tuple[int, ...]) -> NDArray:
    b1, b2 = _hash_iota(keys, tuple(shape))
    return (b1.astype(_U64) << np.uint64(32)) | b2.astype(_U64)


def _random_fold_in(keys: NDArray, msgs: NDArray) -> NDArray:
    keys = np.asarray(keys, dtype=_U64)
    k0, k1 = _words(keys)
    msgs = np.broadcast_to(np.asarray(msgs, dtype=_U32), keys.shape)
    b1, b2 = _threefry2x32(k0, k1, np.zeros(keys.shape, _U32), msgs)
    return (b1.astype(_U64) << np.uint64(32)) | b2.astype(_U64)


random_seed_p.def_impl(_random_seed)
random_wrap_p.def_impl(lambda data, *, impl: pack_keys(data))
random_unwrap_p.def_impl(lambda keys: unpack_keys(keys))
random_bits_p.def_impl(_random_bits)
random_split_p.def_impl(_random_split)
random_fold_in_p.def_impl(_random_fold_in)
random_clone_p.def_impl(lambda keys: np.asarray(keys, dtype=_U64).copy())


# ------------------------------------------------------------------------------ binders


def random_seed(seeds: Any, impl: str = IMPL) -> Array:
    """Keys from integer seeds (any integer dtype, any shape): JAX's ``random_seed``."""
    return bind1(random_seed_p, seeds, impl=impl)


def random_wrap(data: Any, impl: str = IMPL) -> Array:
    """The keys whose data is ``data`` (``uint32[..., 2]``)."""
    return bind1(random_wrap_p, data, impl=impl)


def random_unwrap(keys: Any) -> Array:
    """The data of a key array, ``uint32[..., 2]``."""
    return bind1(random_unwrap_p, keys)


def random_bits(keys: Any, bit_width: int, shape: tuple[int, ...]) -> Array:
    """``uint{bit_width}[*keys.shape, *shape]``: random bits from each key."""
    return bind1(random_bits_p, keys, bit_width=int(bit_width), shape=tuple(int(d) for d in shape))


def random_split(keys: Any, shape: tuple[int, ...]) -> Array:
    """``key<fry>[*keys.shape, *shape]``: new keys split from each key."""
    return bind1(random_split_p, keys, shape=tuple(int(d) for d in shape))


def random_fold_in(keys: Any, msgs: Any) -> Array:
    """Each key with a ``uint32`` message folded in."""
    return bind1(random_fold_in_p, keys, msgs)


def random_clone(keys: Any) -> Array:
    """The same keys (JAX marks them reusable for its key-reuse checker)."""
    return bind1(random_clone_p, keys)


# --------------------------------------------------------------------------- derivatives


def _zero_jvp(primitive: Primitive) -> None:
    """Keys and random bits have no derivative: zero tangents, as JAX."""

    def rule(primals: Any, tangents: Any, **params: Any) -> tuple[Any, Any]:
        out = primitive.bind(*primals, **params)
        return out, ad.Zero(aval_of(out))

    primitive.def_jvp(rule)


for _p in (random_seed_p, random_wrap_p, random_unwrap_p, random_bits_p, random_split_p, random_fold_in_p, random_clone_p):
    _zero_jvp(_p)


# ----------------------------------------------------------------------------- batching


def _to_front(x: Any, d: int | None, size: int) -> Any:
    """``x`` with its batch axis first (an unbatched ``x`` broadcast along a new one)."""
    from ferrax._interpreters import batching
    from ferrax._lax.structural import broadcast_in_dim

    if d is None:
        return broadcast_in_dim(x, (size, *x.shape), tuple(range(1, x.ndim + 1)))
    return batching.moveaxis(x, d, 0)


def _keys_first(primitive: Primitive) -> None:
    # Batch axis first; the key axes lead the result.
    def rule(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> tuple[Any, int]:
        (x,), (d,) = vals, dims
        return primitive.bind(_to_front(x, d, axis_size), **params), 0

    primitive.def_batch(rule)


def _fold_in_batch(vals: Any, dims: Any, *, axis_size: int) -> tuple[Any, int]:
    keys, msgs = vals
    dk, dm = dims
    return random_fold_in_p.bind(_to_front(keys, dk, axis_size), _to_front(msgs, dm, axis_size)), 0


def _wrap_batch(vals: Any, dims: Any, *, axis_size: int, impl: Any) -> tuple[Any, int]:
    from ferrax._interpreters import batching

    (x,), (d,) = vals, dims
    if d == x.ndim - 1:
        # The words' axis must stay last: a batch axis there moves to the front (JAX's rule).
        x, d = batching.moveaxis(x, d, 0), 0
    return random_wrap_p.bind(x, impl=impl), d


def _install_batching() -> None:
    from ferrax._interpreters import batching

    batching.defvectorized(random_seed_p)
    batching.defvectorized(random_unwrap_p)
    batching.defvectorized(random_clone_p)
    random_wrap_p.def_batch(_wrap_batch)
    _keys_first(random_bits_p)
    _keys_first(random_split_p)
    random_fold_in_p.def_batch(_fold_in_batch)


_install_batching()
