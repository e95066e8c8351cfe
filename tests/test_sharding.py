"""Devices, meshes and shardings against JAX's, on the four CPU devices tests/conftest.py
asks for: ``ferrax.devices()`` and friends, ``NamedSharding`` layouts (which device holds
which slice, which copy it is, the HloSharding XLA gets), ``device_put`` with a sharding
or a device, and the errors of bad layouts."""

from __future__ import annotations

import itertools
import sys
from typing import Any

import jax
import numpy as np
import pytest
from jax.sharding import Mesh as JMesh
from jax.sharding import NamedSharding as JNamed
from jax.sharding import PartitionSpec as _JP

import ferrax as fx
from ferrax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

P = PartitionSpec


def JP(*entries: Any) -> Any:
    """JAX's PartitionSpec (its constructor is untyped)."""
    return _JP(*entries)  # type: ignore[no-untyped-call]

MESHES: list[tuple[tuple[int, ...], tuple[str, ...]]] = [
    ((4,), ("x",)),
    ((2, 2), ("x", "y")),
    ((1, 4), ("a", "b")),
    ((4, 1), ("a", "b")),
]


def _entries(axes: tuple[str, ...], rank: int) -> list[tuple[Any, ...]]:
    """Every spec of ``rank`` entries over ``axes`` (each axis used at most once, a
    dimension split over none, one or two axes in either order)."""
    choices: list[Any] = [None, *axes, *[c for c in itertools.permutations(axes, 2)]]
    out = []
    for combo in itertools.product(choices, repeat=rank):
        used = [a for e in combo if e is not None for a in ((e,) if isinstance(e, str) else e)]
        if len(used) == len(set(used)):
            out.append(combo)
    return out


def _meshes(shape: tuple[int, ...], names: tuple[str, ...]) -> tuple[Mesh, JMesh]:
    ours = Mesh(np.array(fx.devices()).reshape(shape), names)
    theirs = JMesh(np.array(jax.devices()).reshape(shape), names)
    return ours, theirs


CASES = [
    (shape, names, spec)
    for shape, names in MESHES
    for rank in (1, 2)
    for spec in _entries(names, rank)
]


def test_devices_match_jax() -> None:
    assert [d.id for d in fx.devices()] == [d.id for d in jax.devices()]
    assert fx.device_count() == jax.device_count() == 4
    assert fx.local_device_count() == jax.local_device_count()
    assert [d.id for d in fx.local_devices()] == [d.id for d in jax.local_devices()]
    assert fx.process_index() == jax.process_index() == 0
    assert fx.process_count() == jax.process_count() == 1
    with pytest.raises(RuntimeError):
        fx.devices("gpu")


def test_num_cpu_devices_is_refused_once_running() -> None:
    fx.devices()
    with pytest.raises(RuntimeError, match="before backends are initialized"):
        fx.config.update("jax_num_cpu_devices", 2)


@pytest.mark.parametrize("shape,names,spec", CASES, ids=[f"{s}-{n}-{p}" for s, n, p in CASES])
def test_layout_matches_jax(shape: tuple[int, ...], names: tuple[str, ...], spec: tuple[Any, ...]) -> None:
    mesh, jmesh = _meshes(shape, names)
    ours = NamedSharding(mesh, P(*spec))
    theirs: Any = JNamed(jmesh, JP(*spec))
    gshape = (8, 4)[: len(spec)]
    want = {d.id: idx for d, idx in theirs.devices_indices_map(gshape).items()}
    got = {d.id: idx for d, idx in ours.devices_indices_map(gshape).items()}
    assert got == want
    assert ours.shard_shape(gshape) == theirs.shard_shape(gshape)
    assert ours.is_fully_replicated == theirs.is_fully_replicated
    assert {d.id for d in ours.device_set} == {d.id for d in theirs.device_set}
    assert ours.num_devices == theirs.num_devices
    # The HloSharding XLA gets: the same layout as JAX's (compared by what it means:
    # XLA's own parser reads ours, and both give the same tile of each device).
    from jaxlib import xla_client as xc

    hlo_ours = xc.HloSharding.from_string(ours._hlo_text(len(gshape)))
    hlo_theirs = theirs._to_xla_hlo_sharding(len(gshape))
    assert hlo_ours.is_replicated() == hlo_theirs.is_replicated()
    if not hlo_theirs.is_replicated():
        assert hlo_ours.tile_assignment_dimensions() == hlo_theirs.tile_assignment_dimensions()
        assert hlo_ours.tile_assignment_devices() == hlo_theirs.tile_assignment_devices()
        assert hlo_ours.replicate_on_last_tile_dim() == hlo_theirs.replicate_on_last_tile_dim()
    # device_put lays the value out as JAX does and reads back the same value.
    value = np.arange(np.prod(gshape), dtype=np.float32).reshape(gshape)
    x = fx.device_put(value, ours)
    jx = jax.device_put(value, theirs)
    np.testing.assert_array_equal(np.asarray(x), value)
    assert x.sharding == ours
    assert x.is_fully_replicated == jx.is_fully_replicated
    got_shards = sorted((s.device.id, s.index, s.replica_id) for s in x.addressable_shards)
    want_shards = sorted((s.device.id, s.index, s.replica_id) for s in jx.addressable_shards)
    assert got_shards == want_shards
    for s in x.addressable_shards[:2]:
        np.testing.assert_array_equal(np.asarray(s.data), value[s.index])
        assert s.data.sharding == SingleDeviceSharding(s.device)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.uint8, np.float16, "bfloat16"])
def test_split_arrays_read_back_every_dtype(dtype: Any) -> None:
    import ml_dtypes

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    mesh = Mesh(np.array(fx.devices()).reshape(2, 2), ("x", "y"))
    value = (np.arange(16) % 3).astype(dt).reshape(4, 4)
    for spec in (P("x"), P(None, "y"), P("y", "x"), P()):
        x = fx.device_put(value, NamedSharding(mesh, spec))
        got = np.asarray(x)
        assert got.dtype == dt
        np.testing.assert_array_equal(got.astype(np.float32), value.astype(np.float32))


def test_device_put_to_a_device_and_trees() -> None:
    dev = fx.devices()[2]
    x = fx.device_put(np.float32(3.0), dev)
    assert x.shape == () and float(x) == 3.0
    assert x.sharding == SingleDeviceSharding(dev)
    assert x.committed
    assert not fx.device_put(1.0).committed
    mesh = Mesh(np.array(fx.devices()), ("x",))
    tree: Any = {"a": np.ones((4, 2), np.float32), "b": [np.zeros(8, np.float32)]}
    out = fx.device_put(tree, NamedSharding(mesh, P("x")))
    assert out["a"].sharding.spec == P("x")
    assert out["b"][0].sharding == NamedSharding(mesh, P("x"))
    pair: Any = (np.ones(4), np.ones(4))
    out2 = fx.device_put(pair, (NamedSharding(mesh, P("x")), NamedSharding(mesh, P())))
    assert out2[0].sharding.spec == P("x") and out2[1].is_fully_replicated


def test_mesh_and_spec_match_jax() -> None:
    mesh, jmesh = _meshes((2, 2), ("x", "y"))
    assert repr(mesh) == repr(jmesh)
    assert str(mesh) == str(jmesh)
    assert dict(mesh.shape) == dict(jmesh.shape)
    assert mesh.size == jmesh.size and mesh.axis_names == jmesh.axis_names
    np.testing.assert_array_equal(mesh.device_ids, jmesh.device_ids)
    for spec in [(), ("x",), ("x", None), (None, ("x", "y")), (("x",),)]:
        assert repr(P(*spec)) == repr(JP(*spec))
    assert P("x") != P("x", None) and JP("x") != JP("x", None)
    assert NamedSharding(mesh, P("x")) == NamedSharding(mesh, P("x", None))
    m2 = fx.make_mesh((2, 2), ("x", "y"))
    assert m2.shape == mesh.shape and [d.id for d in m2.devices.flat] == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        fx.make_mesh((3,), ("x",))


def _raises_like(ours: Any, theirs: Any) -> str:
    with pytest.raises(Exception) as jerr:
        theirs()
    with pytest.raises(fx.FerraxError) as err:
        ours()
    assert isinstance(err.value, ValueError)
    return f"{jerr.value}\n{err.value}"


def test_bad_layouts_are_refused_as_jax_refuses_them() -> None:
    mesh, jmesh = _meshes((2, 2), ("x", "y"))
    msgs = _raises_like(
        lambda: fx.device_put(np.arange(6.0), NamedSharding(mesh, P(("x", "y")))),
        lambda: jax.device_put(np.arange(6.0), JNamed(jmesh, JP(("x", "y")))),
    )
    assert msgs.count("should evenly divide the shape") == 2
    msgs = _raises_like(lambda: NamedSharding(mesh, P("z")), lambda: JNamed(jmesh, JP("z")))
    assert msgs.count("is not found in mesh") == 2
    msgs = _raises_like(lambda: NamedSharding(mesh, P("x", "x")), lambda: JNamed(jmesh, JP("x", "x")))
    assert msgs.count("duplicate entries for `x`") == 2
    msgs = _raises_like(
        lambda: fx.device_put(np.arange(4.0), NamedSharding(mesh, P("x", "y"))),
        lambda: jax.device_put(np.arange(4.0), JNamed(jmesh, JP("x", "y"))),
    )
    assert msgs.count("is only valid for values of rank at least 2") == 2


def test_no_jax_import() -> None:
    import subprocess

    code = (
        "import sys, numpy as np, ferrax as fx\n"
        "from ferrax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
        "m = Mesh(np.array(fx.devices()).reshape(2, 2), ('x', 'y'))\n"
        "x = fx.device_put(np.arange(8.0).reshape(4, 2), NamedSharding(m, P('x')))\n"
        "assert np.asarray(x).sum() == 28.0\n"
        "assert [s.data for s in x.addressable_shards]\n"
        "assert 'jax' not in sys.modules, 'jax was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
