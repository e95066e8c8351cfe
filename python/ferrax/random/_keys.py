"""PRNG keys and the threefry2x32 key operations (seed, split, fold_in, random bits).

Keys are typed as JAX 0.10 types them: an array of dtype ``key<fry>``, on which JAX's key
primitives apply (``random_seed``, ``random_split``, ``random_fold_in``, ``random_bits``,
``random_wrap``/``random_unwrap``: ferrax._lax.prng), so jaxprs of ferrax.random programs
read as JAX's. JAX 0.10's default PRNG is threefry2x32 with
``jax_threefry_partitionable=True``: the counters hashed by ``split`` and ``random_bits``
are a 64-bit iota over the output shape, given to threefry as its high and low 32-bit
halves; ``fold_in`` hashes the counter pair ``(0, data)``. Everything is integer
arithmetic, so eager (NumPy) and compiled results are the same bits as JAX's.

A typed key array (``key(0)``) is a :class:`KeyArray`: a pytree with one leaf of dtype
``key<fry>``, so it passes through ``jit``, ``vmap``, ``scan`` and ``cond``. A raw key
(``PRNGKey(0)``, ``uint32[2]``) is accepted wherever a key is, as in JAX (wrapped into a
typed key by ``random_wrap`` first).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ferrax import dtypes, lax
from ferrax import numpy as fnp
from ferrax._array import Array
from ferrax._core import ConcreteArray, KeyValue, Tracer, to_numpy, trace_state, unpack_keys
from ferrax._lax.prng import random_bits, random_clone, random_fold_in, random_seed, random_split, random_unwrap, random_wrap
from ferrax.dtypes import KeyDType, is_key, key_fry
from ferrax._user_frames import user_location
from ferrax.tree_util import register_pytree_node

__all__ = [
    "KeyArray",
    "KeyDType",
    "PRNGKey",
    "check_key",
    "clone",
    "fold_in",
    "fold_in_data",
    "key",
    "key_data",
    "key_dtype",
    "key_impl",
    "random_bits_data",
    "split",
    "split_data",
    "wrap_key_data",
]

_U32 = np.dtype(np.uint32)
_IMPL_NAME = "threefry2x32"
_IMPL_TAG = "fry"

UINT_DTYPES: dict[int, np.dtype[Any]] = {
    8: np.dtype(np.uint8),
    16: np.dtype(np.uint16),
    32: np.dtype(np.uint32),
    64: np.dtype(np.uint64),
}

_KEY_DTYPE = key_fry


def _shape_of(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(x)) if not isinstance(x, Array) else tuple(x.shape)


def _dtype_of(x: Any) -> np.dtype[Any]:
    return x.dtype if isinstance(x, Array) else np.asarray(x).dtype


def _known(*xs: Any) -> bool:
    # Known values (not staged, not tracers): key layout changes are done with NumPy.
    return not trace_state().dynamic and not any(isinstance(x, Tracer) for x in xs)


def _check_key_data(data: Any) -> None:
    # The checks and messages of JAX's ``_check_prng_key_data``.
    if not all(hasattr(data, a) for a in ("ndim", "shape", "dtype")):
        raise TypeError(
            "invalid PRNG key data: expected key_data to have ndim, shape, and dtype "
            f"attributes. Got {data!r}, at {user_location()}"
        )
    shape = tuple(data.shape)
    if len(shape) < 1:
        raise TypeError(
            f"invalid PRNG key data: expected key_data.ndim >= 1; got ndim={len(shape)}, "
            f"at {user_location()}"
        )
    if shape[-1:] != (2,):
        raise TypeError(
            "invalid PRNG key data: expected key_data.shape to end with (2,); got "
            f"shape={shape} for impl={_IMPL_NAME}, at {user_location()}"
        )
    if np.dtype(data.dtype) != _U32:
        raise TypeError(
            "invalid PRNG key data: expected key_data.dtype = uint32; got "
            f"dtype={data.dtype}, at {user_location()}"
        )


class KeyArray:
    """An array of threefry2x32 PRNG keys (JAX's typed keys, dtype ``key<fry>``).

    It holds one array of dtype ``key<fry>`` (the keys as the jaxpr types them: JAX's
    ``random_seed``, ``random_split``, ... apply to it), and is a pytree with that array as
    its one leaf, so it passes through ``jit``, ``vmap``, ``lax.scan`` and ``lax.cond``,
    and jaxprs show ``key<fry>[...]`` variables as JAX's do. It supports indexing,
    ``reshape``, ``ravel``, ``flatten``, ``squeeze``, ``transpose``/``T``, ``len``,
    iteration and ``==``/``!=``; no arithmetic. :func:`ferrax.random.key_data` gives its
    ``uint32[..., 2]`` data.
    """

    __slots__ = ("_keys",)
    _keys: Any
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, keys: Any) -> None:
        if not is_key(getattr(keys, "dtype", None)):
            raise TypeError(
                f"KeyArray takes an array of dtype key<fry>, got {type(keys).__name__}; "
                f"use ferrax.random.wrap_key_data for uint32 key data, at {user_location()}"
            )
        self._keys = keys

    @classmethod
    def _wrap(cls, keys: Any) -> KeyArray:
        # No checks: pytree unflattening passes whatever leaves a transformation has
        # (tracers, in_axes specs, placeholders).
        out = object.__new__(cls)
        out._keys = keys
        return out

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the key array."""
        return tuple(self._keys.shape)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of keys."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> KeyDType:
        """``key<fry>``."""
        return _KEY_DTYPE

    @property
    def itemsize(self) -> int:
        """Bytes per key."""
        return _KEY_DTYPE.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of all keys."""
        return self.size * self.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Iterator[KeyArray]:
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        if isinstance(self._keys, Tracer):
            # As JAX's key arrays: iterated as their key<fry> array (one `index_in_dim`
            # per row, a slice with unit strides, then a squeeze).
            return (KeyArray._wrap(k) for k in self._keys)
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self) -> bool:
        raise TypeError("key array cannot be converted to boolean.")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        raise TypeError(
            "an array of PRNG keys cannot be converted to a NumPy array; use "
            f"ferrax.random.key_data(keys) for the underlying integers, at {user_location()}"
        )

    def _layout(self, numpy_op: Any, traced_op: Any) -> KeyArray:
        # A change of layout: on the packed keys with NumPy when they are known, else
        # the structural primitive on the key array (as JAX applies it).
        keys = self._keys
        if _known(keys) and isinstance(keys, ConcreteArray):
            return KeyArray._wrap(KeyValue(np.array(numpy_op(to_numpy(keys)), dtype=np.uint64)))
        return KeyArray._wrap(traced_op(keys))

    def __getitem__(self, index: Any) -> KeyArray:
        idx = index if isinstance(index, tuple) else (index,)
        if any(isinstance(i, Array) for i in idx):
            return KeyArray._wrap(self._keys[index])
        return self._layout(lambda v: v[index], lambda k: k[index])

    def reshape(self, *shape: Any) -> KeyArray:
        """The keys in a new shape (``-1`` allowed)."""
        dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        n = self.size
        known = [int(d) for d in dims if int(d) != -1]
        out = tuple(
            n // max(int(np.prod(known, dtype=np.int64)), 1) if int(d) == -1 else int(d)
            for d in dims
        )
        if int(np.prod(out, dtype=np.int64)) != n:
            raise TypeError(
                f"cannot reshape a key array of shape {self.shape} into shape {dims}, "
                f"at {user_location()}"
            )
        return self._layout(lambda v: v.reshape(out), lambda k: lax.reshape(k, out))

    def ravel(self) -> KeyArray:
        """The keys as a 1-D array."""
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis: int | Sequence[int] | None = None) -> KeyArray:
        """The keys without axes of length 1."""
        shape = self.shape
        if axis is None:
            axes = tuple(i for i, d in enumerate(shape) if d == 1)
        else:
            axes = tuple(a % len(shape) for a in ((axis,) if isinstance(axis, int) else axis))
        if not axes:
            return self
        return self._layout(lambda v: np.squeeze(v, axes), lambda k: lax.squeeze(k, axes))

    def transpose(self, *axes: Any) -> KeyArray:
        """The keys with their axes permuted (reversed by default)."""
        nd = self.ndim
        if not axes or axes == (None,):
            perm = tuple(reversed(range(nd)))
        elif len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            perm = tuple(int(a) % nd for a in axes[0])
        else:
            perm = tuple(int(a) % nd for a in axes)
        return self._layout(lambda v: np.transpose(v, perm), lambda k: lax.transpose(k, perm))

    @property
    def T(self) -> KeyArray:
        """The keys with their axes reversed."""
        return self.transpose()

    def _equal(self, other: object) -> Any:
        if not isinstance(other, KeyArray):
            raise TypeError(
                f"cannot compare a key array with {type(other).__name__}, at {user_location()}"
            )
        return fnp.all(fnp.equal(random_unwrap(self._keys), random_unwrap(other._keys)), axis=-1)

    def __eq__(self, other: object) -> Any:
        return self._equal(other)

    def __ne__(self, other: object) -> Any:
        return fnp.logical_not(self._equal(other))

    def block_until_ready(self) -> KeyArray:
        """Waits for the keys to be computed; returns the keys."""
        wait = getattr(self._keys, "block_until_ready", None)
        if wait is not None:
            wait()
        return self

    def __repr__(self) -> str:
        keys = self._keys
        if isinstance(keys, ConcreteArray):
            body = str(unpack_keys(to_numpy(keys)))
        else:
            body = repr(keys)
        return f"Array({self.shape}, dtype={self.dtype.name}) overlaying:\n{body}"

    __str__ = __repr__


register_pytree_node(
    KeyArray,
    lambda k: ((k._keys,), None),
    lambda _aux, children: KeyArray._wrap(list(children)[0]),
)


def check_key(name: str, key: Any, *, allow_batched: bool = False) -> tuple[Any, bool]:
    """The typed keys (an array of dtype ``key<fry>``) of a typed or raw key, and whether
    it was typed (a raw key, ``uint32[..., 2]``, is wrapped: JAX's ``random_wrap``).

    Raises JAX's errors: ``TypeError`` for what is not a key, ``ValueError`` for a key
    array where one key is expected (unless ``allow_batched``)."""
    if isinstance(key, KeyArray):
        keys, typed = key._keys, True
    elif isinstance(key, Array) and is_key(key.dtype):
        # The key<fry> array a typed key holds (as JAX's samplers pass keys to each
        # other inside their jits).
        keys, typed = key, True
    elif isinstance(key, (Array, np.ndarray)):
        _check_key_data(key)
        keys, typed = random_wrap(key if isinstance(key, Array) else fnp.asarray(key)), False
    else:
        raise TypeError(f"unexpected PRNG key type {type(key)}, at {user_location()}")
    if not allow_batched and len(_shape_of(keys)) != 0:
        raise ValueError(
            f"{name} accepts a single key, but was given a key array of shape "
            f"{_shape_of(keys)} != (). Use ferrax.vmap for batching, at {user_location()}"
        )
    return keys, typed


# --- the key operations on typed keys -----------------------------------------------------


def _check_size(shape: tuple[int, ...]) -> None:
    if int(np.prod(shape, dtype=np.int64)) >= 2**32:
        raise NotImplementedError(
            f"random arrays of 2**32 elements or more are not supported, at {user_location()}"
        )


def split_data(keys: Any, shape: tuple[int, ...]) -> Any:
    """``key<fry>[*shape]``: the keys split from one key (JAX's ``random_split``)."""
    _check_size(shape)
    return random_split(keys, shape)


def fold_in_data(keys: Any, msg: Any) -> Any:
    """The key with the uint32 scalar ``msg`` folded in (JAX's ``random_fold_in``)."""
    return random_fold_in(keys, msg)


def random_bits_data(keys: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """``uint{bit_width}[*shape]`` random bits from one key (JAX's ``random_bits``)."""
    _check_size(shape)
    return random_bits(keys, bit_width, shape)


# --- the public key functions -------------------------------------------------------------


def _check_impl(impl: Any, name: str) -> None:
    if impl is None or impl == _IMPL_NAME or isinstance(impl, KeyDType):
        return
    if isinstance(impl, str):
        raise ValueError(
            f'unrecognized PRNG implementation "{impl}". Did you mean one of: '
            f'"{_IMPL_NAME}"? (ferrax has threefry2x32 only), at {user_location()}'
        )
    raise TypeError(
        f"unrecognized type {type(impl)} for specifying PRNG implementation in {name}, "
        f"at {user_location()}"
    )


def _seed_array(ctor: str, seed: Any) -> Any:
    if isinstance(seed, KeyArray):
        raise TypeError(f"{ctor} accepts a scalar seed, but was given a PRNG key, at {user_location()}")
    if np.ndim(seed) if not isinstance(seed, Array) else seed.ndim:
        raise TypeError(
            f"{ctor} accepts a scalar seed, but was given an array of shape "
            f"{_shape_of(seed)} != (). Use ferrax.vmap for batching, at {user_location()}"
        )
    if isinstance(seed, (bool, int)):
        # JAX makes a Python int an int64 first, then (without x64) wraps it to int32.
        try:
            wide = np.int64(int(seed))
        except OverflowError:
            raise OverflowError(
                f"Python int {seed} too large to convert to int64, at {user_location()}"
            ) from None
        return fnp.asarray(wide if dtypes.x64_enabled() else wide.astype(np.int32))
    arr = seed if isinstance(seed, Array) else fnp.asarray(seed)
    if not dtypes.is_int(arr.dtype):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}, at {user_location()}")
    return arr


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """A typed PRNG key (dtype ``key<fry>``, shape ``()``) from an integer seed: its
    high and low 32-bit words."""
    if dtype is not None:
        if impl is not None:
            raise ValueError(
                f"Cannot specify both `impl` and `dtype` arguments to ferrax.random.key, "
                f"at {user_location()}"
            )
        impl = dtype
    _check_impl(impl, "key")
    return KeyArray._wrap(random_seed(_seed_array("key", seed)))


def PRNGKey(seed: Any, *, impl: Any = None) -> Array:
    """A raw PRNG key (``uint32[2]``) from an integer seed: the data of ``key(seed)``."""
    _check_impl(impl, "PRNGKey")
    return random_unwrap(random_seed(_seed_array("PRNGKey", seed)))


def _rewrap(typed: bool, keys: Any) -> Any:
    return KeyArray._wrap(keys) if typed else random_unwrap(keys)


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys (an int or a shape) from one key, on new leading axes; typed keys
    give typed keys, raw keys raw ones."""
    data, typed = check_key("split", key)
    shape = tuple(num) if isinstance(num, Sequence) else (num,)
    dims = []
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(
                f"split: num must be an int or a tuple of ints, got {num!r}, at {user_location()}"
            )
        if d < 0:
            raise ValueError(f"split: num must be nonnegative, got {num!r}, at {user_location()}")
        dims.append(int(d))
    return _rewrap(typed, split_data(data, tuple(dims)))


def fold_in(key: Any, data: Any) -> Any:
    """A new key from a key and a 32-bit integer (``data``, converted to uint32)."""
    key_data_, typed = check_key("fold_in", key)
    if (data.ndim if isinstance(data, Array) else np.ndim(data)):
        raise TypeError(
            "fold_in accepts a scalar, but was given an array of shape "
            f"{_shape_of(data)} != (). Use ferrax.vmap for batching, at {user_location()}"
        )
    if isinstance(data, (bool, int)) and not 0 <= int(data) < 2**32:
        raise OverflowError(f"Python integer {data} out of bounds for uint32, at {user_location()}")
    msg = fnp.asarray(data, dtype=_U32) if not isinstance(data, Array) else data
    if msg.dtype != _U32:
        msg = lax.convert_element_type(msg, _U32)
    return _rewrap(typed, fold_in_data(key_data_, msg))


def key_data(keys: Any) -> Array:
    """The ``uint32[..., 2]`` data of a key array (raw keys are returned as they are)."""
    if not isinstance(keys, KeyArray):
        check_key("key_data", keys, allow_batched=True)
        return keys if isinstance(keys, Array) else fnp.asarray(keys)
    return random_unwrap(keys._keys)


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """The typed key array whose data is ``key_bits_array`` (``uint32[..., 2]``)."""
    if dtype is not None:
        if impl is not None:
            raise ValueError(
                "Cannot specify both `impl` and `dtype` arguments to "
                f"ferrax.random.wrap_key_data, at {user_location()}"
            )
        impl = dtype
    _check_impl(impl, "wrap_key_data")
    _check_key_data(key_bits_array)
    data = key_bits_array if isinstance(key_bits_array, Array) else fnp.asarray(key_bits_array)
    return KeyArray._wrap(random_wrap(data))


def key_impl(keys: Any) -> str:
    """The name of the keys' PRNG implementation: ``"threefry2x32"``."""
    check_key("key_impl", keys, allow_batched=True)
    return _IMPL_NAME


def clone(key: Any) -> Any:
    """The same key (JAX's ``clone`` marks a key as reusable for its key-reuse checker,
    which ferrax does not have)."""
    keys, typed = check_key("clone", key, allow_batched=True)
    return _rewrap(typed, random_clone(keys))


def key_dtype(impl_spec: Any = None) -> KeyDType:
    """The dtype of typed keys (``key<fry>``)."""
    _check_impl(impl_spec, "key_dtype")
    return _KEY_DTYPE
