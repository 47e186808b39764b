"""refimpl.save / refimpl.load against torch's own checkpoints, both ways."""

from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest

import refimpl as r

torch = pytest.importorskip("torch")


def _torch_bytes(obj) -> io.BytesIO:
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return buf


def _refimpl_bytes(obj) -> io.BytesIO:
    buf = io.BytesIO()
    r.save(obj, buf)
    buf.seek(0)
    return buf


def _same(a, b) -> None:
    """A refimpl tensor and a torch tensor with equal values, dtype, shape and strides."""
    assert str(a.dtype) == str(b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    assert tuple(a.stride()) == tuple(b.stride())
    assert a.storage_offset() == b.storage_offset()
    av = np.asarray(a.float().cpu()._np if a.dtype is r.bfloat16 else a.cpu()._np)
    bv = (b.float() if b.dtype is torch.bfloat16 else b).cpu().numpy()
    np.testing.assert_array_equal(av, bv)


DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool", "complex64", "complex128"]


@pytest.mark.parametrize("name", DTYPES)
def test_torch_file_loads_in_refimpl_every_dtype(name):
    x = (torch.arange(24) % 5).to(getattr(torch, name)).reshape(2, 3, 4)
    got = r.load(_torch_bytes(x))
    assert isinstance(got, r.Tensor)
    _same(got, x)


@pytest.mark.parametrize("name", DTYPES)
def test_refimpl_file_loads_in_torch_every_dtype(name):
    x = (r.arange(24) % 5).to(getattr(r, name)).reshape(2, 3, 4)
    got = torch.load(_refimpl_bytes(x))
    _same(x, got)


def test_views_keep_sharing_one_storage_torch_to_refimpl():
    # the seed test_serialization_array_with_storage: a tensor and views of its storage
    base = torch.randn(5, 5)
    obj = [base, base[1:3], base.t(), base[:, 2], base.view(25)[7:]]
    got = r.load(_torch_bytes(obj))
    for g, w in zip(got, obj):
        _same(g, w)
    storage = got[0].untyped_storage()
    assert all(g.untyped_storage() is storage for g in got)
    got[1].fill_(7.0)  # aliasing: writing a view shows through the base
    assert float(got[0][1, 0]) == 7.0
    assert float(got[4][0]) == float(got[0][1, 2])


def test_views_keep_sharing_one_storage_refimpl_to_torch():
    base = r.randn(5, 5)
    obj = [base, base[1:3], base.t(), base[:, 2]]
    got = torch.load(_refimpl_bytes(obj))
    for g, w in zip(got, obj):
        _same(w, g)
    ptr = got[0].untyped_storage().data_ptr()
    assert all(g.untyped_storage().data_ptr() == ptr for g in got)
    got[1].fill_(7.0)
    assert got[0][1, 0].item() == 7.0


def test_state_dict_round_trips_as_ordered_dict():
    sd = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4)).state_dict()
    got = r.load(_torch_bytes(sd))
    assert type(got) is collections.OrderedDict
    assert list(got) == list(sd)
    for k in sd:
        _same(got[k], sd[k])
    back = torch.load(_refimpl_bytes(got))
    assert type(back) is collections.OrderedDict
    for k in sd:
        assert torch.equal(back[k], sd[k])


def test_parameters_and_requires_grad():
    p = torch.nn.Parameter(torch.ones(3))
    got = r.load(_torch_bytes({"p": p, "g": torch.zeros(2, requires_grad=True)}))
    assert got["p"].requires_grad and got["g"].requires_grad
    x = r.ones(2).requires_grad_()
    assert torch.load(_refimpl_bytes(x)).requires_grad


def test_scalars_dtypes_devices_and_containers():
    obj = {"dt": torch.bfloat16, "dev": torch.device("cpu"), "t": (1, 2.5, "s", b"xy", None),
           "set": {1, 2}, "z": torch.tensor(3)}
    got = r.load(_torch_bytes(obj))
    assert got["dt"] is r.bfloat16 and got["dev"] == r.device("cpu")
    assert got["t"] == (1, 2.5, "s", b"xy", None) and got["set"] == {1, 2}
    assert got["z"].shape == () and int(got["z"]) == 3
    back = torch.load(_refimpl_bytes({"dt": r.float16, "dev": r.device("cpu")}))
    assert back == {"dt": torch.float16, "dev": torch.device("cpu")}


def test_layout_matches_torch():
    names = zipfile.ZipFile(_refimpl_bytes([r.ones(2), r.zeros(3)])).namelist()
    assert names[0] == "archive/data.pkl"
    for rec in ("archive/byteorder", "archive/version", "archive/data/0", "archive/data/1",
                "archive/.format_version", "archive/.storage_alignment"):
        assert rec in names
    z = zipfile.ZipFile(_refimpl_bytes(r.ones(2)))
    assert z.read("archive/version") == b"3\n"
    assert z.read("archive/byteorder") == b"little"
    # payloads are 64-byte aligned, as torch writes them (mmap loading relies on it)
    info = z.getinfo("archive/data/0")
    raw = _refimpl_bytes(r.ones(2)).getvalue()
    name_len = int.from_bytes(raw[info.header_offset + 26: info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28: info.header_offset + 30], "little")
    assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0


def test_paths(tmp_path):
    path = tmp_path / "x.pt"
    r.save({"a": r.arange(4)}, path)
    assert torch.equal(torch.load(path)["a"], torch.arange(4))
    torch.save({"b": torch.arange(3)}, str(path))
    assert r.load(str(path))["b"].tolist() == [0, 1, 2]


def test_same_storage_as_two_dtypes_is_refused_as_torch():
    x = r.zeros(4)
    with pytest.raises(RuntimeError, match="view the same data as different types"):
        r.save([x, x.view(r.int32)], io.BytesIO())


def _as_cuda_checkpoint(buf: io.BytesIO) -> io.BytesIO:
    """torch's checkpoint with every storage's location rewritten to 'cuda:0'.

    A GPU-less machine cannot run torch.save on a CUDA tensor; the file it would write
    differs from a CPU one only in the location string of the persistent ids.
    """
    src = zipfile.ZipFile(buf)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("data.pkl"):
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
            dst.writestr(info.filename, data)
    out.seek(0)
    return out


def test_cuda_checkpoint_needs_map_location_on_a_cpu_machine():
    if r.cuda.is_available():
        pytest.skip("the CPU-only message needs a machine without a GPU")
    base = torch.arange(6.0)
    raw = _torch_bytes([base, base[2:]]).getvalue()
    msg = "Attempting to deserialize object on a CUDA device"
    with pytest.raises(RuntimeError, match=msg):
        torch.load(_as_cuda_checkpoint(io.BytesIO(raw)))
    with pytest.raises(RuntimeError, match=msg):
        r.load(_as_cuda_checkpoint(io.BytesIO(raw)))
    for loc in ("cpu", r.device("cpu"), {"cuda:0": "cpu"}, lambda storage, loc: storage):
        got = r.load(_as_cuda_checkpoint(io.BytesIO(raw)), map_location=loc)
        assert got[0].device == r.device("cpu")
        assert got[1].untyped_storage() is got[0].untyped_storage()
        assert got[1].tolist() == [2.0, 3.0, 4.0, 5.0]


def test_map_location_callable_sees_the_saved_location():
    seen = []

    def where(storage, location):
        seen.append(location)
        # None: restore where it was saved

    got = r.load(_torch_bytes(torch.ones(2)), map_location=where)
    assert seen == ["cpu"] and got.tolist() == [1.0, 1.0]


@pytest.mark.skipif(not r.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_tensors_round_trip_on_a_gpu():
    x = r.arange(6.0, device="cuda").reshape(2, 3)
    buf = _refimpl_bytes([x, x[1]])
    got = r.load(buf)
    assert got[0].device == r.device("cuda:0") and got[1].untyped_storage() is got[0].untyped_storage()
    buf.seek(0)
    cpu = r.load(buf, map_location="cpu")
    assert cpu[1].tolist() == [3.0, 4.0, 5.0]
    if torch.cuda.is_available():
        buf.seek(0)
        t = torch.load(buf)
        assert t[0].is_cuda and t[1].tolist() == [3.0, 4.0, 5.0]


class _Hostile:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_hostile_pickle_raises_and_executes_nothing(tmp_path):
    marker = tmp_path / "pwned"
    raw = _torch_bytes({"x": torch.ones(1), "evil": _Hostile(str(marker))}).getvalue()
    with pytest.raises(pickle.UnpicklingError) as ours:
        r.load(io.BytesIO(raw))
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError) as theirs:
        torch.load(io.BytesIO(raw))
    assert not marker.exists()
    for e in (ours.value, theirs.value):
        assert str(e).startswith("Weights only load failed.")
        assert f"GLOBAL {os.system.__module__}.system" in str(e)
        assert "is blocked" in str(e)
    # the same file through a hostile refimpl writer: refimpl.save pickles it the same way
    with pytest.raises(pickle.UnpicklingError):
        r.load(_refimpl_bytes([_Hostile(str(marker))]))
    assert not marker.exists()


class Point:
    """A plain user class: refused by weights_only, loaded when the user opts out."""

    def __init__(self, x: int) -> None:
        self.x = x


def test_unknown_global_is_refused_by_default_and_loaded_on_opt_out():
    raw = _torch_bytes(Point(3)).getvalue()
    with pytest.raises(pickle.UnpicklingError, match="was not an allowed global by default"):
        r.load(io.BytesIO(raw))
    assert r.load(io.BytesIO(raw), weights_only=False).x == 3
    assert torch.load(_refimpl_bytes(Point(4)), weights_only=False).x == 4


def test_non_zip_file_is_refused_clearly():
    with pytest.raises(NotImplementedError, match="legacy"):
        r.load(io.BytesIO(b"\x80\x02not a zip"))
