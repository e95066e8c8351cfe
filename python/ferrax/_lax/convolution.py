"""``conv_general_dilated`` and its wrappers (``conv``, ``conv_with_general_padding``,
``conv_transpose``), with JAX 0.10's parameters, errors and derivative rules.

The primitive's shape rule, evaluator, lowering, cost and transpose live in Rust
(``rust/ir``); here are the functions users call, the eager implementation (NumPy), the
forward-mode rule (bilinear) and the batching rule (the batch axis folded into the lhs
batch or feature dimension or the rhs output feature dimension, as JAX does).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, NamedTuple, Union

import numpy as np

from ferrax._lax.windowed import _dilate, padtype_to_pads
from ferrax import dtypes
from ferrax._array import Array
from ferrax._core import Primitive, aval_of, user_location
from ferrax._interpreters import ad
from ferrax._lax._operands import bind1, canonical_dtype, quiet, scalar
from ferrax._lax.elementwise import float_to_int

__all__ = [
    "ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated",
    "conv_general_permutations", "conv_transpose", "conv_with_general_padding",
]

NDArray = np.ndarray[Any, Any]


class ConvDimensionNumbers(NamedTuple):
    """Where a convolution's batch, feature and spatial dimensions are (JAX's).

    ``lhs_spec`` and ``out_spec`` list ``(batch, feature, spatial...)`` dimensions,
    ``rhs_spec`` ``(output feature, input feature, spatial...)``.
    """

    lhs_spec: Sequence[int]
    rhs_spec: Sequence[int]
    out_spec: Sequence[int]


ConvGeneralDilatedDimensionNumbers = Union[tuple[str, str, str], ConvDimensionNumbers, None]


def _at() -> str:
    return f", at {user_location()}"


def conv_general_permutations(
    dimension_numbers: tuple[str, str, str],
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The ``(lhs_spec, rhs_spec, out_spec)`` permutations of string dimension numbers
    such as ``('NHWC', 'HWIO', 'NHWC')``: spatial dimensions ordered as in the rhs."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (a, b) in enumerate(charpairs):
        spec = dimension_numbers[i]
        if not spec.count(a) == spec.count(b) == 1:
            raise TypeError(
                f"convolution dimension_numbers[{i}] must contain the characters '{a}' and "
                f"'{b}' exactly once, got {spec}{_at()}."
            )
        if len(spec) != len(set(spec)):
            raise TypeError(
                f"convolution dimension_numbers[{i}] cannot have duplicate characters, "
                f"got {spec}{_at()}."
            )
    if not set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"} == set(out_spec) - {"N", "C"}:
        raise TypeError(
            "convolution dimension_numbers elements must each have the same set of spatial "
            f"characters, got {dimension_numbers}{_at()}."
        )

    def perm(spec: str, pair: tuple[str, str]) -> tuple[int, ...]:
        spatial = [i for i, c in enumerate(spec) if c not in pair]
        if spec is not rhs_spec:
            spatial.sort(key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1]), *spatial)

    return perm(lhs_spec, charpairs[0]), perm(rhs_spec, charpairs[1]), perm(out_spec, charpairs[2])


def conv_dimension_numbers(
    lhs_shape: Sequence[int], rhs_shape: Sequence[int], dimension_numbers: ConvGeneralDilatedDimensionNumbers
) -> ConvDimensionNumbers:
    """``dimension_numbers`` (``None``, three strings, or :class:`ConvDimensionNumbers`)
    as :class:`ConvDimensionNumbers` for operands of these shapes."""
    if isinstance(dimension_numbers, ConvDimensionNumbers) or all(
        hasattr(dimension_numbers, f) for f in ConvDimensionNumbers._fields
    ):
        # Ours, or another library's record of the same fields (JAX's).
        fields = (getattr(dimension_numbers, f) for f in ConvDimensionNumbers._fields)
        return ConvDimensionNumbers(*(tuple(int(d) for d in spec) for spec in fields))
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(
            f"convolution requires lhs and rhs ndim to be equal, got {len(lhs_shape)} and "
            f"{len(rhs_shape)}{_at()}."
        )
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if isinstance(dimension_numbers, (list, tuple)):
        if len(dimension_numbers) != 3:
            raise TypeError(
                f"convolution dimension_numbers list/tuple must be length 3, got "
                f"{len(dimension_numbers)}{_at()}."
            )
        if not all(isinstance(s, str) for s in dimension_numbers):
            raise TypeError(
                "convolution dimension_numbers elements must be strings, got "
                f"{tuple(map(type, dimension_numbers))}{_at()}."
            )
        for i, s in enumerate(dimension_numbers):
            if len(s) != len(lhs_shape):
                raise TypeError(
                    f"convolution dimension_numbers[{i}] must have len equal to the ndim of lhs "
                    f"and rhs, got {len(s)} for lhs and rhs shapes {tuple(lhs_shape)} and "
                    f"{tuple(rhs_shape)}{_at()}."
                )
        specs = (dimension_numbers[0], dimension_numbers[1], dimension_numbers[2])
        return ConvDimensionNumbers(*conv_general_permutations(specs))
    raise TypeError(
        f"convolution dimension_numbers must be tuple/list or None, got {type(dimension_numbers)}{_at()}."
    )


def _precision(precision: Any) -> str | None:
    """JAX's canonical precision, as the string JAX prints:
    ``(Precision.HIGHEST, Precision.HIGHEST)``."""
    if precision is None:
        return None
    names = {"DEFAULT": "DEFAULT", "HIGH": "HIGH", "HIGHEST": "HIGHEST", "FASTEST": "DEFAULT",
             "BFLOAT16": "DEFAULT", "TENSORFLOAT32": "HIGH", "BFLOAT16_3X": "HIGH", "FLOAT32": "HIGHEST"}

    def one(p: Any) -> str:
        key = str(getattr(p, "name", p)).upper().replace("PRECISION.", "")
        if key not in names:
            raise ValueError(f"Unrecognized precision {p!r}{_at()}")
        return names[key]

    if isinstance(precision, (tuple, list)):
        if len(precision) != 2:
            raise ValueError(f"precision should be a pair, got {precision!r}{_at()}")
        a, b = one(precision[0]), one(precision[1])
    else:
        a = b = one(precision)
    return f"(Precision.{a}, Precision.{b})"


def _check_preferred(input_dtype: np.dtype[Any], preferred: np.dtype[Any]) -> None:
    """JAX's ``_validate_preferred_element_type``."""
    if dtypes.is_int(input_dtype) and dtypes.is_float(preferred):
        return
    for is_kind in (dtypes.is_int, dtypes.is_float):
        if is_kind(input_dtype) and not is_kind(preferred):
            raise TypeError(
                "Input type is incompatible with `preferred_element_type`. The compatible "
                "combinations of (input_type, preferred_element_type) are (integral, integral), "
                f"(integral, floating), (floating, floating), (complex, complex{_at()}."
            )
    if np.issubdtype(input_dtype, np.signedinteger) and not np.issubdtype(preferred, np.signedinteger):
        raise TypeError(f"`preferred_element_type` must have the same signedness as the original type{_at()}.")
    if np.dtype(preferred).itemsize < np.dtype(input_dtype).itemsize:
        raise TypeError(f"`preferred_element_type` must not be narrower than the original type{_at()}.")


def _check_shapes(
    lhs: Sequence[int], rhs: Sequence[int], dn: ConvDimensionNumbers, window_strides: Sequence[int],
    padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int], rhs_dilation: Sequence[int],
    feature_group_count: int, batch_group_count: int,
) -> None:
    """JAX's shape-rule checks, raising JAX's exceptions (the Rust rule repeats them)."""
    if len(lhs) != len(rhs):
        raise ValueError(
            "conv_general_dilated lhs and rhs must have the same number of dimensions, but got "
            f"{tuple(lhs)} and {tuple(rhs)}{_at()}."
        )
    for name, spec in zip(("lhs_spec", "rhs_spec", "out_spec"), dn):
        if sorted(spec) != list(range(len(lhs))):
            raise ValueError(
                f"conv_general_dilated dimension_numbers.{name} must be a permutation of "
                f"range({len(lhs)}), got {tuple(spec)}{_at()}."
            )
    if not feature_group_count > 0:
        raise ValueError(
            f"conv_general_dilated feature_group_count must be a positive integer, got {feature_group_count}{_at()}."
        )
    lhs_features = lhs[dn.lhs_spec[1]]
    quot, rem = divmod(lhs_features, feature_group_count)
    if rem:
        raise ValueError(
            "conv_general_dilated feature_group_count must divide lhs feature dimension size, "
            f"but {feature_group_count} does not divide {lhs_features}{_at()}."
        )
    if quot != rhs[dn.rhs_spec[1]]:
        raise ValueError(
            "conv_general_dilated lhs feature dimension size divided by feature_group_count must "
            "equal the rhs input feature dimension size, but "
            f"{lhs_features} // {feature_group_count} != {rhs[dn.rhs_spec[1]]}{_at()}."
        )
    out_features = rhs[dn.rhs_spec[0]]
    if out_features % feature_group_count:
        raise ValueError(
            "conv_general_dilated rhs output feature dimension size must be a multiple of "
            f"feature_group_count, but {out_features} is not a multiple of {feature_group_count}{_at()}."
        )
    if not batch_group_count > 0:
        raise ValueError(
            f"conv_general_dilated batch_group_count must be a positive integer, got {batch_group_count}{_at()}."
        )
    lhs_batch = lhs[dn.lhs_spec[0]]
    if batch_group_count > 1 and lhs_batch % batch_group_count:
        raise ValueError(
            "conv_general_dilated batch_group_count must divide lhs batch dimension size, but "
            f"{batch_group_count} does not divide {lhs_batch}{_at()}."
        )
    if out_features % batch_group_count:
        raise ValueError(
            "conv_general_dilated rhs output feature dimension size must be a multiple of "
            f"batch_group_count, but {out_features} is not a multiple of {batch_group_count}{_at()}."
        )
    if batch_group_count > 1 and feature_group_count > 1:
        raise ValueError(
            "At most one of batch_group_count and feature_group_count may be > 1, got "
            f"batch_group_count={batch_group_count} and feature_group_count={feature_group_count}{_at()}"
        )
    n = len(lhs) - 2
    if n != len(window_strides):
        raise ValueError(
            "conv_general_dilated window and window_strides must have the same number of "
            f"dimensions, but got {n} and {len(window_strides)}{_at()}"
        )
    for dil in (lhs_dilation, rhs_dilation):
        if len(dil) != n:
            raise ValueError(f"conv_general_dilated: dilation {tuple(dil)} must have {n} entries{_at()}")
        if not all(d > 0 for d in dil):
            raise TypeError(f"All dilations must be positive, got {tuple(dil)}{_at()}.")
    if not all(s > 0 for s in window_strides):
        raise ValueError(f"conv_general_dilated: window_strides must be positive, got {tuple(window_strides)}{_at()}")
    if len(padding) != n:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {n}, got {len(padding)}{_at()}.")
    in_sizes = [lhs[d] for d in dn.lhs_spec[2:]]
    for size, by, (lo, hi) in zip(in_sizes, lhs_dilation, padding):
        if _dilate(size, by) + lo + hi < 0:
            raise ValueError(
                "Negative padding is larger than the size of the corresponding dimension: got "
                f"padding={tuple(tuple(p) for p in padding)} for lhs_shape[2:]={tuple(in_sizes)}{_at()}"
            )


def conv_general_dilated(
    lhs: Any,
    rhs: Any,
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: ConvGeneralDilatedDimensionNumbers = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Array:
    """General n-dimensional convolution with strides, padding and dilations (XLA's Conv).

    ``lhs`` is ``(batch, feature, spatial...)`` and ``rhs`` ``(out feature, in feature,
    spatial...)`` in the layout ``dimension_numbers`` gives (``None`` for ``NCHW``/
    ``OIHW``/``NCHW``, three strings such as ``('NHWC', 'HWIO', 'NHWC')``, or a
    :class:`ConvDimensionNumbers`). ``padding`` is ``'SAME'``, ``'SAME_LOWER'``,
    ``'VALID'`` or ``(low, high)`` pairs; ``lhs_dilation`` (transposed convolution) and
    ``rhs_dilation`` (atrous convolution) default to 1; ``feature_group_count`` and
    ``batch_group_count`` split the features or the batch into groups.
    """
    x, w = scalar(lhs), scalar(rhs)
    lshape, rshape = tuple(aval_of(x).shape), tuple(aval_of(w).shape)
    dn = conv_dimension_numbers(lshape, rshape, dimension_numbers)
    n = len(rshape) - 2
    if lhs_dilation is None:
        lhs_dil: tuple[int, ...] = (1,) * (len(lshape) - 2)
    else:
        lhs_dil = tuple(operator.index(d) for d in lhs_dilation)
        if isinstance(padding, str) and any(d != 1 for d in lhs_dil):
            raise ValueError(
                "String padding is not implemented for transposed convolution using this op. "
                "Please either exactly specify the required padding or use conv_transpose"
                f"{_at()}."
            )
    rhs_dil = (1,) * n if rhs_dilation is None else tuple(operator.index(d) for d in rhs_dilation)
    strides = tuple(operator.index(s) for s in window_strides)
    if isinstance(padding, str):
        if len(dn.rhs_spec) != len(rshape) or len(dn.lhs_spec) != len(lshape):
            raise ValueError(f"conv_general_dilated: dimension_numbers do not fit the operands{_at()}")
        kernel = [_dilate(rshape[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dil)]
        pads = padtype_to_pads([lshape[d] for d in dn.lhs_spec[2:]], kernel, strides, padding)
    else:
        try:
            pads = [(operator.index(lo), operator.index(hi)) for lo, hi in padding]
        except (ValueError, TypeError) as e:
            raise ValueError(
                "padding argument to conv_general_dilated should be a string or a sequence of "
                f"(low, high) pairs, got {padding}{_at()}"
            ) from e
    fgc, bgc = operator.index(feature_group_count), operator.index(batch_group_count)
    _check_shapes(lshape, rshape, dn, strides, pads, lhs_dil, rhs_dil, fgc, bgc)
    ldt, rdt = aval_of(x).dtype, aval_of(w).dtype
    if ldt != rdt:
        raise TypeError(
            f"lax.conv_general_dilated requires arguments to have the same dtypes, got {ldt}, {rdt}{_at()}."
        )
    preferred = None
    if preferred_element_type is not None:
        preferred = canonical_dtype(preferred_element_type, "conv_general_dilated")
        _check_preferred(ldt, preferred)
    return bind1(
        conv_general_dilated_p, x, w, window_strides=strides, padding=tuple(pads),
        lhs_dilation=lhs_dil, rhs_dilation=rhs_dil, dimension_numbers=dn,
        feature_group_count=fgc, batch_group_count=bgc, precision=_precision(precision),
        preferred_element_type=preferred, out_sharding=None,
    )


def conv(
    lhs: Any, rhs: Any, window_strides: Sequence[int], padding: str,
    precision: Any = None, preferred_element_type: Any = None,
) -> Array:
    """``conv_general_dilated`` in the ``NCHW``/``OIHW`` layout, without dilation."""
    return conv_general_dilated(
        lhs, rhs, window_strides, padding, precision=precision, preferred_element_type=preferred_element_type
    )


def conv_with_general_padding(
    lhs: Any, rhs: Any, window_strides: Sequence[int], padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None, rhs_dilation: Sequence[int] | None,
    precision: Any = None, preferred_element_type: Any = None,
) -> Array:
    """``conv_general_dilated`` in the ``NCHW``/``OIHW`` layout, with dilations."""
    return conv_general_dilated(
        lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
        precision=precision, preferred_element_type=preferred_element_type,
    )


def _conv_transpose_padding(k: int, s: int, padding: str | tuple[int, int]) -> tuple[int, int]:
    """The ``(before, after)`` padding of one dimension of a transposed convolution."""
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else -(-pad_len // 2)
    elif padding == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        pad_a, pad_len = pads[0], sum(pads)
    else:
        raise ValueError(f"Invalid padding mode: {padding}{_at()}")
    return pad_a, pad_len - pad_a


def conv_transpose(
    lhs: Any,
    rhs: Any,
    strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: ConvGeneralDilatedDimensionNumbers = None,
    transpose_kernel: bool = False,
    precision: Any = None,
    preferred_element_type: Any = None,
    use_consistent_padding: bool = False,
) -> Array:
    """A fractionally strided convolution (the "transposed convolution" of Keras'
    ``Conv2DTranspose`` when ``transpose_kernel``), in TensorFlow's ``NHWC``/``HWIO``
    layout by default; ``padding`` as JAX reads it."""
    from ferrax._lax.slicing import rev
    from ferrax._lax.structural import transpose

    x, w = scalar(lhs), scalar(rhs)
    lshape, rshape = tuple(aval_of(x).shape), tuple(aval_of(w).shape)
    if not (len(lshape) == len(rshape) and len(lshape) >= 2):
        raise ValueError(f"conv_transpose: lhs and rhs must have one rank of at least 2{_at()}")
    ndims = len(lshape)
    if dimension_numbers is None:
        defaults = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                    5: ("NHWDC", "HWDIO", "NHWDC")}
        if ndims not in defaults:
            raise ValueError(f"No 4+ dimensional dimension_number defaults{_at()}.")
        dimension_numbers = defaults[ndims]
    dn = conv_dimension_numbers(lshape, rshape, dimension_numbers)
    k_sdims = [rshape[d] for d in dn.rhs_spec[2:]]
    rhs_dil = (1,) * (ndims - 2) if rhs_dilation is None else tuple(rhs_dilation)
    pads: str | Sequence[tuple[int, int]]
    if use_consistent_padding or (isinstance(padding, str) and padding in {"SAME", "VALID"}):
        effective = [_dilate(k, r) for k, r in zip(k_sdims, rhs_dil)]
        per_dim = [padding] * len(strides) if isinstance(padding, str) else [tuple(p) for p in padding]
        pads = [_conv_transpose_padding(k, int(s), p) for k, s, p in zip(effective, strides, per_dim)]  # type: ignore[arg-type]
    else:
        pads = padding
    if transpose_kernel:
        w = rev(w, tuple(dn.rhs_spec[2:]))
        perm = list(range(ndims))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        w = transpose(w, perm)
    return conv_general_dilated(
        x, w, (1,) * (ndims - 2), pads, tuple(strides), rhs_dil, dn,
        precision=precision, preferred_element_type=preferred_element_type,
    )


# ------------------------------------------------------------------------- the primitive

conv_general_dilated_p = Primitive.builtin("conv_general_dilated")


def _dn_of(dn: Any) -> ConvDimensionNumbers:
    if isinstance(dn, dict):
        return ConvDimensionNumbers(dn["lhs_spec"], dn["rhs_spec"], dn["out_spec"])
    return ConvDimensionNumbers(tuple(dn.lhs_spec), tuple(dn.rhs_spec), tuple(dn.out_spec))


def _accumulator(d: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype to sum products in: floats at least float32, bool as int32."""
    if d == np.bool_:
        return np.dtype(np.int32)
    if dtypes.is_float(d) and d.itemsize < 4:
        return np.dtype(np.float32)
    return d


@conv_general_dilated_p.def_impl
@quiet
def _conv_general_dilated_impl(
    lhs: NDArray,
    rhs: NDArray,
    *,
    window_strides: tuple[int, ...],
    padding: tuple[tuple[int, int], ...],
    lhs_dilation: tuple[int, ...],
    rhs_dilation: tuple[int, ...],
    dimension_numbers: Any,
    feature_group_count: int,
    batch_group_count: int,
    precision: Any = None,
    preferred_element_type: Any = None,
    out_sharding: None = None,
) -> Any:
    dn = _dn_of(dimension_numbers)
    out_dtype = np.dtype(lhs.dtype if preferred_element_type is None else preferred_element_type)
    acc = _accumulator(out_dtype)
    # Canonical layouts: lhs (N, C, spatial...), rhs (O, I, kernel...).
    x = np.transpose(lhs, dn.lhs_spec).astype(acc)
    w = np.transpose(rhs, dn.rhs_spec).astype(acc)
    n = x.ndim - 2
    # The lhs dilated (holes of zeros), then padded (negative padding crops).
    if any(d > 1 for d in lhs_dilation):
        shape = (*x.shape[:2], *(_dilate(s, d) for s, d in zip(x.shape[2:], lhs_dilation)))
        dilated = np.zeros(shape, acc)
        dilated[(slice(None), slice(None), *(slice(None, None, d) for d in lhs_dilation))] = x
        x = dilated
    x = np.pad(x, [(0, 0), (0, 0), *((max(lo, 0), max(hi, 0)) for lo, hi in padding)])
    x = x[(slice(None), slice(None), *(slice(max(-lo, 0), x.shape[2 + i] - max(-hi, 0)) for i, (lo, hi) in enumerate(padding)))]
    kernel = w.shape[2:]
    out_sp = [
        max(0, (p - _dilate(k, r)) // s + 1)
        for p, k, r, s in zip(x.shape[2:], kernel, rhs_dilation, window_strides)
    ]
    g, b = feature_group_count, batch_group_count
    batch, feats = x.shape[0], x.shape[1]
    o_count, i_count = w.shape[0], w.shape[1]
    out = np.zeros((batch // b, b, g, o_count // (b * g), *out_sp), acc)
    xs = x.reshape(b, batch // b, g, feats // g, *x.shape[2:])
    ws = w.reshape(b, g, o_count // (b * g), i_count, *kernel)
    if all(s > 0 for s in out_sp) and out.size:
        for k in np.ndindex(*kernel):
            window = tuple(
                slice(ki * r, ki * r + (o - 1) * s + 1, s)
                for ki, r, s, o in zip(k, rhs_dilation, window_strides, out_sp)
            )
            taps = xs[(slice(None),) * 4 + window]
            out += np.einsum("bngc...,bgoc->nbgo...", taps, ws[(slice(None),) * 4 + k])
    out = out.reshape(batch // b, o_count, *out_sp)
    out = np.transpose(out, np.argsort(dn.out_spec))
    if out_dtype == np.bool_:
        return out != 0
    if dtypes.is_int(out_dtype) and dtypes.is_float(acc):
        return float_to_int(out, out_dtype)
    return out.astype(out_dtype)


# Bilinear: d conv(x, y) = conv(dx, y) + conv(x, dy), with the same parameters.
ad.defjvp(
    conv_general_dilated_p,
    lambda g, ans, x, y, **params: bind1(conv_general_dilated_p, g, y, **params),
    lambda g, ans, x, y, **params: bind1(conv_general_dilated_p, x, g, **params),
)


# ---------------------------------------------------------------------------- batching


def _reshape_axis_into(src: int, dst: int, x: Any) -> Any:
    """Axis ``src`` merged into axis ``dst`` (numbered once ``src`` is removed) as its
    major part (JAX's ``_reshape_axis_into``)."""
    from ferrax._lax.structural import reshape

    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    shape = [d for i, d in enumerate(x.shape) if i != src]
    shape[dst] *= x.shape[src]
    return reshape(x, shape, None if perm == sorted(perm) else perm)


def _reshape_axis_out_of(src: int, size: int, x: Any) -> Any:
    """Axis ``src`` split into ``(size, rest)`` (JAX's ``_reshape_axis_out_of``)."""
    from ferrax._lax.structural import reshape

    shape = list(x.shape)
    shape[src:src + 1] = [size, shape[src] // size]
    return reshape(x, shape)


def _out_shape(lhs: Sequence[int], rhs: Sequence[int], dn: ConvDimensionNumbers, params: Any) -> tuple[int, ...]:
    """The output shape of a convolution of operands of these shapes."""
    canon = [lhs[dn.lhs_spec[0]] // params["batch_group_count"], rhs[dn.rhs_spec[0]]]
    for i in range(len(lhs) - 2):
        size = _dilate(lhs[dn.lhs_spec[i + 2]], params["lhs_dilation"][i]) + sum(params["padding"][i])
        window = _dilate(rhs[dn.rhs_spec[i + 2]], params["rhs_dilation"][i])
        canon.append(max(0, (size - window) // params["window_strides"][i] + 1))
    out = [0] * len(lhs)
    for i, d in enumerate(dn.out_spec):
        out[d] = canon[i]
    return tuple(out)


def _conv_batch_rule(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> Any:
    from ferrax._lax.convenience import full

    lhs, rhs = vals
    lb, rb = dims
    dn = _dn_of(params["dimension_numbers"])
    lhs_spec, rhs_spec, out_spec = dn
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]

    def bind(x: Any, w: Any, **changes: Any) -> Any:
        return bind1(conv_general_dilated_p, x, w, **{**params, "dimension_numbers": dn, **changes})

    if axis_size == 0:
        # Reshapes cannot fold an empty batch axis; the result is empty anyway.
        shape = list(aval_of(lhs).shape)
        if lb is not None:
            shape.pop(lb)
        wshape = list(aval_of(rhs).shape)
        if rb is not None:
            wshape.pop(rb)
        out_shape = _out_shape(shape, wshape, dn, params)
        dtype = params["preferred_element_type"] or aval_of(lhs).dtype
        return full((0, *out_shape), 0, dtype), 0
    if lb is not None and rb is not None:
        if bgc > 1:
            new_lhs = _reshape_axis_into(lb, lhs_spec[0], lhs)
            bgc *= axis_size
        else:
            new_lhs = _reshape_axis_into(lb, lhs_spec[1], lhs)
            fgc *= axis_size
        new_rhs = _reshape_axis_into(rb, rhs_spec[0], rhs)
        out = bind(new_lhs, new_rhs, feature_group_count=fgc, batch_group_count=bgc)
        return _reshape_axis_out_of(out_spec[1], axis_size, out), out_spec[1]
    if lb is not None:
        if bgc == 1:
            new_lhs = _reshape_axis_into(lb, lhs_spec[0], lhs)
        else:
            new_lhs = _reshape_axis_out_of(lhs_spec[0] + int(lb <= lhs_spec[0]), bgc, lhs)
            new_lhs = _reshape_axis_into(lb + int(lhs_spec[0] < lb), lhs_spec[0] + 1, new_lhs)
            new_lhs = _reshape_axis_into(lhs_spec[0], lhs_spec[0], new_lhs)
        out = bind(new_lhs, rhs)
        return _reshape_axis_out_of(out_spec[0], axis_size, out), out_spec[0]
    if fgc == 1 and bgc == 1:
        new_rhs = _reshape_axis_into(rb, rhs_spec[0], rhs)
        out = bind(lhs, new_rhs)
        return _reshape_axis_out_of(out_spec[1], axis_size, out), out_spec[1]
    # Groups stay outermost in the output features: factor them out of the kernel's
    # output features, fold the batch axis in after them, and undo that on the output.
    groups = fgc if fgc > 1 else bgc
    new_rhs = _reshape_axis_out_of(rhs_spec[0] + int(rb <= rhs_spec[0]), groups, rhs)
    new_rhs = _reshape_axis_into(rb + int(rhs_spec[0] < rb), rhs_spec[0] + 1, new_rhs)
    new_rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[0], new_rhs)
    out = bind(lhs, new_rhs)
    out = _reshape_axis_out_of(out_spec[1], groups, out)
    out = _reshape_axis_out_of(out_spec[1] + 1, axis_size, out)
    out = _reshape_axis_into(out_spec[1], out_spec[1] + 1, out)
    return out, out_spec[1]


conv_general_dilated_p.def_batch(_conv_batch_rule)
