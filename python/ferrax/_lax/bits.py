"""Bit-level primitives: ``population_count``, ``clz``, ``bitcast_convert_type`` and
``threefry2x32`` (the block cipher under JAX's default PRNG).

Their eager rules work on bit patterns with NumPy; their results are integers (or, for a
bitcast, bits read as another dtype), so every derivative is zero, as in JAX.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import Primitive, aval_of, user_location
from ferrax._interpreters import ad
from ferrax.errors import ShapeError, TypeCheckError
from ferrax._lax._operands import bind1, canonical_dtype, quiet, scalar

__all__ = ["bitcast_convert_type", "clz", "population_count", "threefry2x32"]

NDArray = np.ndarray[Any, Any]


def _unsigned(x: NDArray) -> NDArray:
    """The bits of an integer array, as the unsigned dtype of its width."""
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _population_count(x: NDArray) -> NDArray:
    return np.bitwise_count(_unsigned(x)).astype(x.dtype)


def _clz(x: NDArray) -> NDArray:
    u = _unsigned(x)
    width = 8 * x.dtype.itemsize
    # The bit length by halving: at each step, shift off the top half if it is nonzero.
    length = np.zeros(u.shape, np.int64)
    rest = u.copy()
    step = width // 2
    while step:
        high = rest >> u.dtype.type(step)
        moved = high != 0
        length = np.where(moved, length + step, length)
        rest = np.where(moved, high, rest)
        step //= 2
    length = length + (rest != 0)
    out: NDArray = (width - length).astype(x.dtype)
    return out


population_count_p = Primitive.builtin("population_count")
population_count_p.def_impl(_population_count)
clz_p = Primitive.builtin("clz")
clz_p.def_impl(_clz)


def _bitcast(x: NDArray, *, new_dtype: np.dtype[Any]) -> NDArray:
    new = np.dtype(new_dtype)
    old_size, new_size = x.dtype.itemsize, new.itemsize
    x = np.array(x, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    if old_size == new_size:
        return x.view(new)
    if old_size > new_size:
        # Narrowing: each element's parts in a new trailing axis, least significant first
        # (XLA's order, which is a little-endian host's memory order).
        return x.reshape(*x.shape, 1).view(new).reshape(*x.shape, old_size // new_size)
    widened: NDArray = x.view(new)
    return widened.reshape(x.shape[:-1])


bitcast_convert_type_p = Primitive.builtin("bitcast_convert_type")
bitcast_convert_type_p.def_impl(_bitcast)

# The key schedule's parity constant and the rotations of the 20 rounds (Salmon et al.,
# "Parallel random numbers: as easy as 1, 2, 3", 2011).
_PARITY = np.uint32(0x1BD11BDA)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotate_left(v: NDArray, r: int) -> NDArray:
    return (v << np.uint32(r)) | (v >> np.uint32(32 - r))


@quiet
def _threefry2x32(k0: NDArray, k1: NDArray, x0: NDArray, x1: NDArray) -> tuple[NDArray, NDArray]:
    shape = np.broadcast_shapes(*(np.shape(a) for a in (k0, k1, x0, x1)))
    # Flat arrays (not 0-d), so that uint32 arithmetic wraps without NumPy's scalar warnings.
    k0, k1, x0, x1 = (np.broadcast_to(a, shape).reshape(-1).astype(np.uint32) for a in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    a, b = x0 + ks[0], x1 + ks[1]
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            a = a + b
            b = _rotate_left(b, r) ^ a
        a = a + ks[(group + 1) % 3]
        b = b + ks[(group + 2) % 3] + np.uint32(group + 1)
    return a.reshape(shape), b.reshape(shape)


threefry2x32_p = Primitive.builtin("threefry2x32", multiple_results=True)
threefry2x32_p.def_impl(_threefry2x32)


# ------------------------------------------------------------------------- functions


def population_count(x: Any) -> Array:
    """The number of set bits of each element of an integer array (its dtype out)."""
    return bind1(population_count_p, scalar(x))


def clz(x: Any) -> Array:
    """The number of leading zero bits of each element of an integer array, in its
    dtype's width (its dtype out)."""
    return bind1(clz_p, scalar(x))


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Array:
    """The bits of ``operand`` read as ``new_dtype`` (``stablehlo.bitcast_convert``).

    Widths equal: the operand's shape. A narrower ``new_dtype`` adds a trailing axis of
    the widths' ratio (least significant part first); a wider one takes an operand whose
    last axis is that ratio (a scalar counts as 1) and removes it. ``bool`` converts only
    to itself. The result is never weakly typed.
    """
    dtype = canonical_dtype(new_dtype, "bitcast_convert_type")
    x = scalar(operand)
    aval = aval_of(x)
    old_bits, new_bits = 8 * aval.dtype.itemsize, 8 * dtype.itemsize
    if (aval.dtype == np.bool_ or dtype == np.bool_) and aval.dtype != dtype:
        raise TypeCheckError(
            "lax.bitcast_convert_type does not support bool values unless the operand and "
            f"destination types match: got operand dtype={aval.dtype}, new_dtype={dtype}, "
            f"at {user_location()}"
        )
    if old_bits < new_bits:
        last = aval.shape[-1] if aval.shape else 1
        if last * old_bits != new_bits:
            raise ShapeError(
                f"lax.bitcast_convert_type: converting an array of shape {tuple(aval.shape)} "
                f"from {aval.dtype} ({old_bits} bits) to {dtype} ({new_bits} bits) needs a "
                f"last axis of {new_bits // old_bits}, got {last}, at {user_location()}"
            )
    return bind1(bitcast_convert_type_p, x, new_dtype=dtype)


def threefry2x32(k1: Any, k2: Any, x1: Any, x2: Any) -> tuple[Array, Array]:
    """The Threefry-2x32 block cipher (20 rounds) of the counts ``(x1, x2)`` under the
    key ``(k1, k2)``, elementwise: four ``uint32`` arrays that broadcast together (scalars,
    and size-1 axes of arrays of one rank), two ``uint32`` arrays out. The primitive
    under JAX's default PRNG (``jax._src.random.threefry2x32``)."""
    y1, y2 = threefry2x32_p.bind(*(scalar(a) for a in (k1, k2, x1, x2)))
    return y1, y2


# -------------------------------------------------------------------------- derivatives


def _zero_jvp(primitive: Primitive) -> None:
    """Integer results (or bits read as floats, as JAX has it): zero tangents."""

    def rule(primals: Any, tangents: Any, **params: Any) -> tuple[Any, Any]:
        out = primitive.bind(*primals, **params)
        if primitive.multiple_results:
            return out, [ad.Zero(aval_of(o)) for o in out]
        return out, ad.Zero(aval_of(out))

    primitive.def_jvp(rule)


for _p in (population_count_p, clz_p, bitcast_convert_type_p, threefry2x32_p):
    _zero_jvp(_p)


# ----------------------------------------------------------------------------- batching


def _bitcast_batch(vals: Any, dims: Any, *, axis_size: int, new_dtype: Any) -> tuple[Any, int]:
    from ferrax._interpreters import batching

    (x,), (d,) = vals, dims
    # A bitcast to a wider dtype consumes the last axis (a narrower one appends one): a
    # batch axis there moves to the front first.
    if d == x.ndim - 1 and np.dtype(new_dtype).itemsize != x.dtype.itemsize:
        x, d = batching.moveaxis(x, d, 0), 0
    return bind1(bitcast_convert_type_p, x, new_dtype=new_dtype), d


def _threefry_batch(vals: Any, dims: Any, *, axis_size: int) -> tuple[list[Any], list[int]]:
    """Broadcasting operands: batch axes to the front; an unbatched array gets a leading
    axis of 1, and a batched scalar element size-1 axes up to the others' rank (an
    unbatched scalar broadcasts as it is)."""
    from ferrax._interpreters import batching
    from ferrax._lax.structural import reshape

    rank = max(v.ndim - (d is not None) for v, d in zip(vals, dims))
    args = []
    for v, d in zip(vals, dims):
        if d is None:
            args.append(v if v.ndim == 0 else reshape(v, (1, *v.shape)))
            continue
        v = batching.moveaxis(v, d, 0)
        if v.ndim - 1 < rank:
            v = reshape(v, (axis_size, *([1] * rank)))
        args.append(v)
    return list(threefry2x32_p.bind(*args)), [0, 0]


def _install_batching() -> None:
    from ferrax._interpreters import batching

    batching.defvectorized(population_count_p)
    batching.defvectorized(clz_p)
    bitcast_convert_type_p.def_batch(_bitcast_batch)
    threefry2x32_p.def_batch(_threefry_batch)


_install_batching()
