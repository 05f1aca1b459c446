"""tg.save / tg.load: round trips of tensors, containers, nn and optimizer state
dicts (paths and file objects), and the weights-only loader refusing pickled code;
tg.inference_mode."""
import collections
import io
import os
import pickle
import sys
import zipfile

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import serialization


def _roundtrip(obj, **kw):
    buf = io.BytesIO()
    tg.save(obj, buf)
    buf.seek(0)
    return tg.load(buf, **kw)


def _same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, tg.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _same(u, v)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b or (a != a and b != b)


@pytest.mark.parametrize("dt", ["float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"])
def test_tensor_roundtrip_keeps_dtype_shape_values(dt):
    rng = np.random.default_rng(0)
    for shape in [(), (0,), (3,), (2, 3, 4)]:
        a = (rng.standard_normal(shape) * 10).astype(dt)
        t = tg.tensor(a)
        r = _roundtrip(t)
        _same(t, r)
    # a non-contiguous one
    t = tg.tensor(np.arange(12.0).reshape(3, 4).astype(dt)).t()
    _same(t.contiguous() if hasattr(t, "contiguous") else t, _roundtrip(t))


def test_requires_grad_kept_and_loaded_tensors_are_leaves():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3                      # a non-leaf: loaded as a leaf that requires grad
    r = _roundtrip({"x": x, "y": y, "c": tg.ones(2)})
    assert r["x"].requires_grad and r["x"].is_leaf and r["x"].tolist() == [1.0, 2.0]
    assert r["y"].requires_grad and r["y"].is_leaf and r["y"].tolist() == [3.0, 6.0]
    assert not r["c"].requires_grad
    (r["x"] * r["x"]).sum().backward()
    assert r["x"].grad.tolist() == [2.0, 4.0]


def test_containers_numbers_strings():
    obj = {"a": [1, 2.5, "s", None, True, (3, tg.tensor([4.0]))], "b": {"nested": {"t": tg.arange(3)}},
           "bytes": b"\x00\x01", "big": 2 ** 70, "neg": -1.5, "nan": float("nan"), "set": {1, 2},
           "od": collections.OrderedDict([("z", 1), ("a", tg.zeros(2, dtype=tg.int32))]),
           "dtype": tg.float32, "device": tg.device("cpu"), "np": np.arange(4, dtype=np.int16),
           "np_scalar": np.float64(2.5), "complex": 1 + 2j}
    r = _roundtrip(obj)
    _same(obj, r)
    assert r["set"] == {1, 2} and r["dtype"] == tg.float32 and r["device"] == tg.device("cpu")


def test_shared_tensors_load_as_one():
    t = tg.ones(3)
    r = _roundtrip([t, t, {"again": t}])
    assert r[0] is r[1] is r[2]["again"]


def test_paths_and_file_objects(tmp_path):
    obj = {"w": tg.randn(3, 2)}
    p = tmp_path / "model.pt"
    tg.save(obj, p)                     # a pathlib.Path
    _same(obj, tg.load(p))
    tg.save(obj, str(p))                # a str
    _same(obj, tg.load(str(p)))
    with open(p, "wb") as f:            # an open file
        tg.save(obj, f)
    with open(p, "rb") as f:
        _same(obj, tg.load(f))
    # the format: a zip of a pickle and .npy members
    with zipfile.ZipFile(p) as z:
        names = z.namelist()
        assert names[:2] == ["tapegrad.format", "data.pkl"] and names[2].endswith(".npy")
        assert z.read("tapegrad.format") == b"tapegrad-save 1"
        with z.open(names[2]) as m:
            np.testing.assert_array_equal(np.lib.format.read_array(m, allow_pickle=False), obj["w"].numpy())


def test_module_state_dict_roundtrip():
    tg.manual_seed(0)
    net = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 1))
    sd = net.state_dict()
    r = _roundtrip(sd)
    assert isinstance(r, collections.OrderedDict) and list(r) == list(sd)
    other = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 1))
    other.load_state_dict(r)
    x = tg.randn(5, 3)
    np.testing.assert_array_equal(other(x).detach().numpy(), net(x).detach().numpy())
    # parameters themselves stay Parameters
    p = _roundtrip({"w": net[0].weight})["w"]
    assert isinstance(p, tg.nn.Parameter) and p.requires_grad


def test_optimizer_state_dict_roundtrip():
    tg.manual_seed(1)
    net = tg.nn.Linear(3, 2)
    opt = tg.optim.Adam(net.parameters(), lr=0.01)
    for _ in range(2):
        opt.zero_grad()
        net(tg.randn(4, 3)).pow(2).sum().backward()
        opt.step()
    sd = opt.state_dict()
    r = _roundtrip(sd)
    _same(sd, r)
    net2 = tg.nn.Linear(3, 2)
    net2.load_state_dict(_roundtrip(net.state_dict()))
    opt2 = tg.optim.Adam(net2.parameters(), lr=0.01)
    opt2.load_state_dict(r)
    x = tg.randn(4, 3)
    for o, n in ((opt, net), (opt2, net2)):
        o.zero_grad()
        n(x).pow(2).sum().backward()
        o.step()
    np.testing.assert_array_equal(net.weight.detach().numpy(), net2.weight.detach().numpy())


# -- the weights-only loader ----------------------------------------------------------------------
class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


class _Custom:
    def __init__(self, v):
        self.v = v


def test_a_pickle_that_runs_code_is_refused(tmp_path, monkeypatch):
    called = []
    files = []
    for obj in ({"w": tg.ones(2), "evil": _Evil()}, [_Evil()]):
        buf = io.BytesIO()
        tg.save(obj, buf)
        files.append(buf)
    # (after pickling: the pickle names os.system's own module, posix or nt)
    monkeypatch.setattr(sys.modules[os.system.__module__], "system", lambda cmd: called.append(cmd))
    for buf in files:
        buf.seek(0)
        with pytest.raises(pickle.UnpicklingError, match=r"Weights only load failed: the file names the global "
                                                         r"(posix|os|nt)\.system"):
            tg.load(buf)
        assert called == []
        buf.seek(0)
        tg.load(buf, weights_only=False)        # (trusted: it runs)
        assert called == ["echo pwned > /dev/null"]
        called.clear()


def test_a_plain_pickle_file_is_read_with_the_same_rules(tmp_path, monkeypatch):
    called = []
    p = tmp_path / "evil.pkl"
    p.write_bytes(pickle.dumps(_Evil()))
    monkeypatch.setattr(os, "system", lambda cmd: called.append(cmd))
    with pytest.raises(pickle.UnpicklingError, match="system"):
        tg.load(p)
    assert called == []
    p.write_bytes(pickle.dumps({"a": [1, 2.0, "x"]}))
    assert tg.load(p) == {"a": [1, 2.0, "x"]}


def test_a_zip_with_a_malicious_data_member_is_refused(tmp_path, monkeypatch):
    called = []
    p = tmp_path / "evil.pt"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("tapegrad.format", b"tapegrad-save 1")
        z.writestr("data.pkl", pickle.dumps(_Evil(), 2))
    monkeypatch.setattr(os, "system", lambda cmd: called.append(cmd))
    with pytest.raises(pickle.UnpicklingError, match="system"):
        tg.load(p)
    assert called == []
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("something.else", b"")
    with pytest.raises(RuntimeError, match="not one tg.save wrote"):
        tg.load(p)


def test_objects_of_other_classes_need_weights_only_false():
    buf = io.BytesIO()
    tg.save({"c": _Custom(3)}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="test_save_load._Custom"):
        tg.load(buf)
    buf.seek(0)
    assert tg.load(buf, weights_only=False)["c"].v == 3
    # or allowed one by one
    serialization.add_safe_globals([_Custom])
    try:
        buf.seek(0)
        assert tg.load(buf)["c"].v == 3
        assert _Custom in serialization.get_safe_globals()
    finally:
        serialization._USER_SAFE.clear()


def test_load_arguments():
    buf = io.BytesIO()
    tg.save(tg.ones(2), buf)
    for loc in (None, "cpu", tg.device("cpu")):
        buf.seek(0)
        assert tg.load(buf, map_location=loc).tolist() == [1.0, 1.0]
    buf.seek(0)
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        tg.load(buf, map_location="cuda")


def test_torch_refuses_the_same_pickle():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save([_Evil()], buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(buf)
    buf = io.BytesIO()
    tg.save([_Evil()], buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        tg.load(buf)


# -- crafted files: what a weights-only load refuses -------------------------------------------------------
def _archive(data, arrays=(), extra=()):
    """A tapegrad archive whose data.pkl is ``data`` and whose members are ``arrays``
    ((name, bytes) pairs) and ``extra``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("tapegrad.format", b"tapegrad-save 1")
        z.writestr("data.pkl", data)
        for name, b in list(arrays) + list(extra):
            z.writestr(name, b)
    buf.seek(0)
    return buf


def _saved_members(obj):
    buf = io.BytesIO()
    tg.save(obj, buf)
    buf.seek(0)
    with zipfile.ZipFile(buf) as z:
        return {n: z.read(n) for n in z.namelist()}


def _npy(arr):
    b = io.BytesIO()
    np.lib.format.write_array(b, arr, allow_pickle=False)
    return b.getvalue()


# (None, {"__init__": 0}) set, by pickle's BUILD, on the class tg.device: 80 bytes
BUILD_ON_DEVICE = b"\x80\x02ctapegrad.core.tensor\ndevice\nN}X\x08\x00\x00\x00__init__K\x00s\x86b."


def test_weights_only_none_is_the_safe_default():
    buf = io.BytesIO()
    tg.save({"c": collections.Counter("ab")}, buf)
    for wo in (None, True):
        buf.seek(0)
        with pytest.raises(pickle.UnpicklingError, match="the global collections.Counter"):
            tg.load(buf, weights_only=wo)
    buf.seek(0)
    assert tg.load(buf, weights_only=False)["c"] == collections.Counter("ab")


def test_build_on_a_class_is_refused_and_the_class_is_intact(tmp_path):
    p = tmp_path / "device.pt"
    for path, data in ((p, BUILD_ON_DEVICE), (tmp_path / "device_zip.pt", None)):
        if data is None:
            path.write_bytes(_archive(BUILD_ON_DEVICE).getvalue())
        else:
            path.write_bytes(data)
        with pytest.raises(pickle.UnpicklingError, match=r"sets the state of a type object \(pickle's BUILD\)"):
            tg.load(path)
        assert callable(tg.device.__init__) and tg.device("cpu").type == "cpu"
        assert tg.ones(2, device=tg.device("cpu")).tolist() == [1.0, 1.0]


def test_build_cannot_set_a_loaded_tensors_fields():
    m = _saved_members(tg.ones(3))
    data = m["data.pkl"]
    assert data.endswith(b".")
    crafted = data[:-1] + b"N}(X\x08\x00\x00\x00_tape_idK\x05X\x05\x00\x00\x00_slotK\x03u\x86b."
    buf = _archive(crafted, [(n, b) for n, b in m.items() if n.startswith("arrays/")])
    with pytest.raises(pickle.UnpicklingError, match=r"sets the state of a Tensor object"):
        tg.load(buf)
    buf.seek(0)
    t = tg.load(buf, weights_only=False)        # (trusted: pickle does what the file says)
    assert t._tape_id == 5


def test_build_of_allowed_classes_sets_public_attributes_only():
    serialization.add_safe_globals([_Custom])
    try:
        assert _roundtrip({"c": _Custom(3)})["c"].v == 3
        m = _saved_members(_Custom(1))
        data = m["data.pkl"]
        evil = data.replace(b"X\x01\x00\x00\x00v", b"X\x01\x00\x00\x00_")
        assert evil != data
        with pytest.raises(pickle.UnpicklingError, match="sets private or non-string attributes of a _Custom"):
            tg.load(_archive(evil))
        od = pickle.dumps(collections.OrderedDict(a=1), 2)
        od_build = od[:-1] + b"}X\x01\x00\x00\x00xK\x01sb."      # (an OrderedDict's attributes: a state_dict's _metadata)
        assert tg.load(io.BytesIO(od_build)).x == 1
        od_class = od[:-1] + b"}X\t\x00\x00\x00__class__K\x01sb."
        with pytest.raises(pickle.UnpicklingError, match="sets the state of a OrderedDict object"):
            tg.load(io.BytesIO(od_class))
    finally:
        serialization._USER_SAFE.clear()


@pytest.mark.parametrize("case", ["missing", "not_an_array_member", "huge_header", "short_member", "object_dtype",
                                  "not_npy", "truncated_pickle", "truncated_zip", "garbage_pickle"])
def test_malformed_archives_are_a_clear_error(case):
    m = _saved_members({"w": tg.ones(4), "b": tg.zeros(2)})
    arrays = {n: b for n, b in m.items() if n.startswith("arrays/")}
    data = m["data.pkl"]
    if case == "missing":
        del arrays["arrays/1.npy"]
        match = r"refers to the member 'arrays/1.npy', which the archive does not have"
    elif case == "not_an_array_member":
        data = data.replace(b"arrays/1.npy", b"../etc/passw")
        match = r"which is not an array member"
    elif case == "huge_header":       # (a header claiming 2**40 elements: refused before any allocation)
        arrays["arrays/0.npy"] = _npy(np.zeros(4)).replace(b"(4,), ", b"(1099511627776,), ", 1)
        match = r"is not a valid array: its header \(shape \(1099511627776,\)"
    elif case == "short_member":
        arrays["arrays/0.npy"] = arrays["arrays/0.npy"][:-8]
        match = r"is not a valid array: its header"
    elif case == "object_dtype":
        arrays["arrays/0.npy"] = arrays["arrays/0.npy"].replace(b"'<f8'", b"'|O' ")
        match = r"is not a valid array"
    elif case == "not_npy":
        arrays["arrays/0.npy"] = b"not an array at all"
        match = r"is not a valid array"
    elif case == "truncated_pickle":
        data = data[:len(data) // 2]
        match = r"is damaged \(EOFError|pickle data was truncated"
    elif case == "garbage_pickle":
        data = b"\x80\x02\xff\xfe"
        match = r"is damaged \(KeyError: 255\)"
    buf = _archive(data, arrays.items())
    if case == "truncated_zip":
        buf = io.BytesIO(buf.getvalue()[:-30])
        match = r"damaged zip archive|is damaged|an unknown persistent id"      # (no zip: read as a pickle)
    with pytest.raises(pickle.UnpicklingError, match=match) as got:
        tg.load(buf)
    assert type(got.value) is pickle.UnpicklingError


# -- tg.inference_mode ----------------------------------------------------------------------------------
def test_inference_mode_context_manager():
    w = tg.ones(2, requires_grad=True)
    assert not tg.is_inference_mode_enabled()
    with tg.inference_mode():
        assert tg.is_inference_mode_enabled() and not tg.is_grad_enabled()
        x = tg.ones(2)
        y = w * 2
        with tg.inference_mode(False):
            assert not tg.is_inference_mode_enabled() and tg.is_grad_enabled()
            z = tg.ones(1)
        assert tg.is_inference_mode_enabled()
    assert not tg.is_inference_mode_enabled() and tg.is_grad_enabled()
    assert x.is_inference() and y.is_inference() and not z.is_inference() and not w.is_inference()
    assert not y.requires_grad and y.grad_fn is None and y.tolist() == [2.0, 2.0]
    assert not tg.ones(1).is_inference()
    with tg.no_grad():
        assert not tg.ones(1).is_inference()
    assert tg._tape.recording[0] == 0       # (nothing left counted)


def test_inference_mode_decorator_and_exceptions():
    @tg.inference_mode
    def f():
        return tg.is_inference_mode_enabled(), tg.is_grad_enabled()

    @tg.inference_mode()
    def g():
        return tg.is_inference_mode_enabled()

    @tg.inference_mode(mode=False)
    def h():
        return tg.is_inference_mode_enabled()
    assert f() == (True, False) and g() is True and h() is False
    with pytest.raises(ValueError):
        with tg.inference_mode():
            raise ValueError
    assert not tg.is_inference_mode_enabled() and tg.is_grad_enabled()


def test_inference_mode_as_pytorch():
    torch = pytest.importorskip("torch")
    for m in (torch, tg):
        res = []
        w = m.ones(2, requires_grad=True)
        with m.no_grad():
            with m.inference_mode(False):
                res.append((m.is_grad_enabled(), m.is_inference_mode_enabled()))
        with m.inference_mode():
            res.append((m.is_grad_enabled(), m.is_inference_mode_enabled()))
            u = w * 2
            v = m.zeros(1)
        res.append((u.requires_grad, u.is_inference(), v.is_inference(), w.is_inference()))
        if m is torch:
            expected = res
        else:
            assert res == expected
