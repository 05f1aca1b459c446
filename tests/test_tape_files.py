"""Tape files (``Tape.save`` / ``tg.load_tape``): data only, checked on load, nothing executed."""
import io
import json
import os
import pickle
import zipfile
from collections import namedtuple

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn.functional as F
from tapegrad.replay import tapefile as _tapefile


def rosen(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def classify(W, X, y):
    return F.cross_entropy(X @ W, y) + tg.where(W > 0, W, 0).sum() + X.max(dim=1)[0].sum()


X0 = np.array([0.5, -1.0, 2.0, 0.25, 1.5])


@pytest.fixture
def saved(tmp_path):
    tape = tg.record(rosen, np.zeros(5))
    path = tmp_path / "rosen.tape"
    tape.save(str(path))
    return tape, path


def _rewrite(path, edit_header=None, edit_arrays=None, extra=None):
    """Rewrite the tape file at ``path`` with its header and arrays edited."""
    with zipfile.ZipFile(path) as z:
        header = json.loads(z.read("header.json"))
        arrays = {n: np.load(io.BytesIO(z.read(n + ".npy"))) for n in header["arrays"]}
    if edit_header:
        edit_header(header)
    if edit_arrays:
        edit_arrays(header, arrays)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("header.json", json.dumps(header))
        for n, a in arrays.items():
            bio = io.BytesIO()
            np.lib.format.write_array(bio, a, allow_pickle=True)
            z.writestr(n + ".npy", bio.getvalue())
        for name, data in (extra or {}).items():
            z.writestr(name, data)


def _state_field(header, name):
    for k, v in header["state"]["d"]:
        if k == name:
            return v
    raise KeyError(name)


def _array_of(header, name):
    return _state_field(header, name)["a"]


class _RunsShell:
    """Unpickling it runs a shell command (what a crafted pickle does)."""

    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def test_saved_tape_round_trips(tmp_path):
    tape, path = tg.record(rosen, np.zeros(5)), tmp_path / "r.tape"
    tape.save(str(path))
    assert path.read_bytes()[:4] == b"PK\x03\x04"
    loaded = tg.load_tape(str(path))
    v, g = tape.value_and_grad(X0)
    v2, g2 = loaded.value_and_grad(X0)
    assert v2 == v == 1874.953125
    np.testing.assert_array_equal(g2, g)
    np.testing.assert_array_equal(g2, [249.0, 146.0, 3202.0, -895.25, 287.5])


def test_saved_tape_with_labels_gathers_and_comparisons(tmp_path):
    rng = np.random.default_rng(0)
    W, X, y = rng.standard_normal((4, 3)), rng.standard_normal((6, 4)), np.array([0, 1, 2, 0, 1, 2])
    tape = tg.record(classify, W, X, y)
    path = tmp_path / "c.tape"
    tape.save(str(path))
    loaded = tg.load_tape(str(path))
    W2, X2, y2 = rng.standard_normal((4, 3)), rng.standard_normal((6, 4)), np.array([2, 2, 1, 0, 0, 1])
    (v, g), (v2, g2) = tape.value_and_grad(W2, X2, y2), loaded.value_and_grad(W2, X2, y2)
    # (the loaded tape differentiates with NumPy's reverse, the original maybe with the
    # compiled sweep: the same sums in another order)
    np.testing.assert_allclose(v2, v, rtol=1e-14)
    assert g[2] is None and g2[2] is None       # (the integer labels)
    for a, b in zip(g[:2], g2[:2]):
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)
    with pytest.raises(tg.TapeDivergence):       # the label guard travels with the file
        loaded.value_and_grad(W2, X2, np.array([2, 2, 1, 0, 0, 7]))


def test_saved_tape_with_reshaped_labels(tmp_path):
    """Labels reshaped inside the function (``y.view(-1)``) are an argument of the saved tape too."""
    def f(W, X, y):
        return F.cross_entropy((X @ W).view(-1, 3), y.view(-1))
    rng = np.random.default_rng(2)
    W, X, y = rng.standard_normal((4, 3)), rng.standard_normal((2, 3, 4)), rng.integers(0, 3, (2, 3))
    tape = tg.record(f, W, X, y)
    path = tmp_path / "v.tape"
    tape.save(str(path))
    loaded = tg.load_tape(str(path))
    y2 = rng.integers(0, 3, (2, 3))
    v, g = loaded.value_and_grad(W, X, y2)
    Wt = tg.tensor(W, requires_grad=True)
    want = f(Wt, tg.tensor(X), tg.as_tensor(y2))
    want.backward()
    assert v == pytest.approx(want.item(), rel=1e-14)
    np.testing.assert_allclose(g[0], Wt.grad.numpy(), rtol=1e-13, atol=1e-15)
    with pytest.raises(tg.TapeDivergence):
        loaded.value_and_grad(W, X, np.array([[0, 1, 2], [0, 1, 3]]))


def test_structured_outputs_round_trip(tmp_path):
    tape = tg.record(lambda a: {"s": (a * 2).sum(), "l": [a * 1, 3, "x"]}, np.ones(3))
    path = tmp_path / "s.tape"
    tape.save(str(path))
    out = tg.load_tape(str(path))(np.full(3, 2.0))
    assert out["s"] == 12.0 and out["l"][1:] == [3, "x"]
    np.testing.assert_array_equal(out["l"][0], [2.0, 2.0, 2.0])


def test_a_tape_that_holds_a_user_class_is_not_saved(tmp_path):
    Pair = namedtuple("Pair", "a b")
    tape = tg.record(lambda a: Pair(a.sum(), a * 2), np.ones(3))
    with pytest.raises(ValueError, match="cannot be saved to a file: it holds a type"):
        tape.save(str(tmp_path / "p.tape"))


def test_in_memory_pickle_still_works():
    tape = tg.record(rosen, np.zeros(5))
    assert pickle.loads(pickle.dumps(tape)).value_and_grad(X0)[0] == 1874.953125


def test_crafted_pickle_file_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.tape"
    path.write_bytes(pickle.dumps(_RunsShell("touch %s" % marker), protocol=pickle.HIGHEST_PROTOCOL))
    with pytest.raises(ValueError, match="older tapegrad as a pickle.*record the function again and save"):
        tg.load_tape(str(path))
    assert not marker.exists()
    path.write_bytes(pickle.dumps(_RunsShell("touch %s" % marker), protocol=0))   # (text protocol)
    with pytest.raises(ValueError, match="pickle"):
        tg.load_tape(str(path))
    assert not marker.exists()
    # the check itself is sound: this file does run its command when unpickled
    pickle.loads(path.read_bytes())
    assert marker.exists()


def test_old_format_pickle_of_a_real_tape_is_refused(tmp_path):
    path = tmp_path / "old.tape"
    path.write_bytes(pickle.dumps(tg.record(rosen, np.zeros(3)), protocol=pickle.HIGHEST_PROTOCOL))
    with pytest.raises(ValueError, match=r"written by an older tapegrad as a pickle.*save the tape with this version"):
        tg.load_tape(str(path))


def test_object_array_inside_the_archive_runs_nothing(saved, tmp_path):
    _, path = saved
    marker = tmp_path / "pwned"

    def plant(header, arrays):
        name = _array_of(header, "aux")
        arrays[name] = np.array([_RunsShell("touch %s" % marker)], dtype=object)
    _rewrite(path, edit_arrays=plant)
    with pytest.raises(ValueError, match="array 'a[0-9]+' cannot be read without pickle"):
        tg.load_tape(str(path))
    assert not marker.exists()


def test_truncated_file(saved):
    _, path = saved
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 10):
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match="truncated or corrupt"):
            tg.load_tape(str(path))


def test_not_a_tape_file(tmp_path):
    path = tmp_path / "junk.tape"
    path.write_bytes(b"not a tape at all")
    with pytest.raises(ValueError, match="is not a tapegrad tape file"):
        tg.load_tape(str(path))
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("other.txt", "hello")
    with pytest.raises(ValueError, match="has no header.json"):
        tg.load_tape(str(path))


def test_wrong_format_version(saved):
    _, path = saved
    _rewrite(path, edit_header=lambda h: h.update(format_version=999))
    with pytest.raises(ValueError, match="saved in format 999 .*this tapegrad reads format 2"):
        tg.load_tape(str(path))
    _rewrite(path, edit_header=lambda h: h.update(format="something-else", format_version=2))
    with pytest.raises(ValueError, match="not a tapegrad tape file .format 'something-else'"):
        tg.load_tape(str(path))


def test_unexpected_member(saved):
    _, path = saved
    _rewrite(path, extra={"payload.pkl": b"\x80\x05junk"})
    with pytest.raises(ValueError, match="unexpected member 'payload.pkl'"):
        tg.load_tape(str(path))


def test_inconsistent_sizes(saved):
    tape, path = saved
    good = path.read_bytes()

    def drop_row(h, arrays):
        name = _array_of(h, "entries")
        arrays[name] = arrays[name][:-1]
    _rewrite(path, edit_arrays=drop_row)
    with pytest.raises(ValueError, match="entries has [0-9]+ rows; the tape has [0-9]+ entries"):
        tg.load_tape(str(path))

    def forward_reference(h, arrays):
        e = arrays[_array_of(h, "entries")]
        last = e.shape[0] - 1
        e[last, 1] = last + 5
    path.write_bytes(good)
    _rewrite(path, edit_arrays=forward_reference)
    with pytest.raises(ValueError, match="entry [0-9]+ reads slot [0-9]+ .an entry reads earlier ones only"):
        tg.load_tape(str(path))

    def bad_size(h, arrays):
        e = arrays[_array_of(h, "entries")]
        e[0, 7] += 3
    path.write_bytes(good)
    _rewrite(path, edit_arrays=bad_size)
    with pytest.raises(ValueError, match="slot 0 has shape .* but [0-9]+ elements"):
        tg.load_tape(str(path))

    def short_saved(h, arrays):
        name = _array_of(h, "saved")
        arrays[name] = arrays[name][:1]
    path.write_bytes(good)
    _rewrite(path, edit_arrays=short_saved)
    with pytest.raises(ValueError, match="saved has 1 rows"):
        tg.load_tape(str(path))

    def bad_arg(h):
        h["state"]["d"] = [[k, (3 if k == "nargs" else v)] for k, v in h["state"]["d"]]
    path.write_bytes(good)
    _rewrite(path, edit_header=bad_arg)
    with pytest.raises(ValueError, match="arg_kinds should list one kind"):
        tg.load_tape(str(path))
    path.write_bytes(good)
    assert tg.load_tape(str(path)).value_and_grad(X0)[0] == tape.value_and_grad(X0)[0]


def test_unknown_function_or_field_refused(tmp_path):
    rng = np.random.default_rng(1)
    W, X, y = rng.standard_normal((4, 3)), rng.standard_normal((6, 4)), np.array([0, 1, 2, 0, 1, 2])
    path = tmp_path / "c.tape"
    tg.record(classify, W, X, y).save(str(path))
    text = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        assert '"fn": "label_flags"' in z.read("header.json").decode()

    def to_system(h):
        h["state"] = json.loads(json.dumps(h["state"]).replace('"fn": "label_flags"', '"fn": "system"'))
    _rewrite(path, edit_header=to_system)
    with pytest.raises(ValueError, match="unknown function 'system'"):
        tg.load_tape(str(path))
    path.write_bytes(text)
    _rewrite(path, edit_header=lambda h: h["state"]["d"].append(["__class__", "os.system"]))
    with pytest.raises(ValueError, match="unexpected fields __class__"):
        tg.load_tape(str(path))


def test_header_never_names_python_objects(tmp_path):
    """The header is plain JSON: no module paths, no pickled bytes."""
    path = tmp_path / "c.tape"
    rng = np.random.default_rng(2)
    tg.record(classify, rng.standard_normal((4, 3)), rng.standard_normal((6, 4)), np.array([0, 1, 2, 0, 1, 2])).save(
        str(path))
    with zipfile.ZipFile(path) as z:
        header = json.loads(z.read("header.json"))
        assert header["format"] == "tapegrad-tape" and header["format_version"] == _tapefile.FORMAT_VERSION == 2
        assert header["tapegrad_version"] == tg.__version__
        for n in header["arrays"]:
            a = np.lib.format.read_array(io.BytesIO(z.read(n + ".npy")), allow_pickle=False)
            assert a.dtype.kind in "biufc"
        assert "tapegrad." not in z.read("header.json").decode()


def test_loaded_tapes_replay_bounds_checked(tmp_path):
    """A loaded tape replays with NumPy's bounds-checked passes, or with the compiled ones
    when trusted; an index a crafted file holds (here a gather's) is refused on load,
    trusted or not, before anything replays it."""
    idx = np.array([0, 2, 3])
    tape = tg.record(lambda x: (x[idx] * x[idx]).sum(), np.arange(5.0))
    path = tmp_path / "g.tape"
    tape.save(str(path))
    loaded = tg.load_tape(str(path))
    x = np.array([1.0, -2.0, 3.0, 0.5, 4.0])
    v, g = loaded.value_and_grad(x)
    assert v == 1.0 + 9.0 + 0.25
    np.testing.assert_array_equal(g, [2.0, 0.0, 6.0, 1.0, 0.0])
    assert tg.load_tape(str(path), trusted=True).value_and_grad(x)[0] == v

    def huge_index(row, aux, at):
        assert aux[at + 2] == 3
        aux[at + 2] = 10 ** 9           # (the gather's flat index of x[3])
    _rewrite(path, edit_arrays=_entry_editor("gather", huge_index))
    for trusted in (False, True):
        with pytest.raises(ValueError, match=r"entry \d+ \(gather\): a gather's index reaches elements 0 to "
                                             r"1000000000 of an array of 5"):
            tg.load_tape(str(path), trusted=trusted)


def _entry_editor(op_name, edit):
    """An ``edit_arrays`` for ``_rewrite``: ``edit(row, aux, at)`` on the first entry of
    op ``op_name`` (its int64 fields, the aux words, its AUX offset)."""
    def editor(h, arrays):
        entries, aux = arrays[_array_of(h, "entries")], arrays[_array_of(h, "aux")]
        code = next(c for c, n in _state_field(h, "op_names") if n == op_name)
        row = entries[np.flatnonzero(entries[:, 0] == code)[0]]
        edit(row, aux, int(row[4]))
    return editor


def _more(row, aux, at, k, by):
    aux[at + k] += by


# (function, example input, op, edit, what the loader says): each edit makes a compiled
# kernel index outside an array unless the loader refuses it
_W = np.arange(6.0).reshape(2, 3)
CRAFTED = [
    ("view offset", lambda x: x[1:].sum(), np.arange(4.0), "strided", lambda r, a, at: _more(r, a, at, 1, 10 ** 6),
     "descriptor reaches elements"),
    ("view stride", lambda x: x.t().sum(), _W, "strided", lambda r, a, at: _more(r, a, at, 4, 7),
     "descriptor reaches elements"),
    ("view size", lambda x: x.flip(0).sum(), np.arange(4.0), "strided", lambda r, a, at: _more(r, a, at, 2, 2 ** 40),
     "descriptor has"),
    ("negative gather", lambda x: x[np.array([0, 2])].sum(), np.arange(4.0), "gather",
     lambda r, a, at: a.__setitem__(at, -1), "index reaches elements -1"),
    ("reduction groups", lambda x: x.sum(1).prod(), _W, "sum", lambda r, a, at: _more(r, a, at, 1, 5),
     "the groups's descriptor reaches"),
    ("reduction group count", lambda x: x.softmax(1).sum(), _W, "softmax", lambda r, a, at: r.__setitem__(5, 1),
     "the groups's descriptor reaches elements 0 to 1 of an array of 1"),
    ("broadcast", lambda x: (x * np.arange(3.0)).sum(), _W, "mul", lambda r, a, at: _more(r, a, at, 4 + 2 + 2, 3),
     "broadcast's descriptor"),
    ("unary size", lambda x: x.sin().sum(), np.arange(4.0), "sin", lambda r, a, at: r.__setitem__(7, 40),
     "for an output of 40"),
    ("matmul batch", lambda x: (x @ x.t()).sum(), _W, "matmul", lambda r, a, at: _more(r, a, at, 4, 3),
     "a batch index of A"),
    ("cat offset", lambda x: tg.cat([x, x * 2]).sum(), np.arange(3.0), "cat", lambda r, a, at: _more(r, a, at, 6, 2),
     "does not fit rows"),
    ("setitem position", lambda x: _setitem(x), np.arange(4.0), "setitem", lambda r, a, at: _more(r, a, at, 1, 99),
     "a setitem's position reaches"),
    ("host shapes", lambda x: tg.linalg.solve(x, x.sum(1)).sum(), np.eye(2) + 1, "linalg_solve",
     lambda r, a, at: _more(r, a, at, 4, 1), "described as of shape"),
    ("claimed size", lambda x: (x * 2).sum(), np.arange(4.0), "sum", lambda r, a, at: r.__setitem__(7, 2 ** 36),
     "groups of an input of 4 elements for an output of 68719476736"),
    ("claimed size past the limit", lambda x: (x * 2).sum(), np.arange(4.0), "sum",
     lambda r, a, at: r.__setitem__(7, 2 ** 40), "elements in all"),
]


def _setitem(x):
    y = x * 1.0
    y[1] = x[0] * 3
    return y.sum()


@pytest.mark.parametrize("what, fn, x0, op, edit, message", CRAFTED, ids=[c[0] for c in CRAFTED])
def test_crafted_entries_are_refused_on_load(tmp_path, what, fn, x0, op, edit, message):
    """Every family's parameter words and sizes are checked when a file is loaded
    (``FamilyRules.check_entry``), trusted or not: a crafted or damaged tape is refused
    before a kernel could read or write outside an array."""
    path = tmp_path / "t.tape"
    tape = tg.record(fn, x0)
    tape.save(str(path))
    v, g = tg.load_tape(str(path), trusted=True).value_and_grad(x0)
    assert v == tape.value_and_grad(x0)[0]
    _rewrite(path, edit_arrays=_entry_editor(op, edit))
    for trusted in (False, True):
        with pytest.raises(ValueError, match=message):
            tg.load_tape(str(path), trusted=trusted)


def test_saved_tape_keeps_its_view_links(tmp_path):
    # an entry that views its input (W.t()) shares the input's version counter on replay;
    # the pairs travel in the file and are checked like every other slot reference
    tape = tg.record(lambda x, W: (x @ W.t()).sum(), np.ones((2, 3)), np.full((4, 3), 0.5))
    assert tape._R.view_links               # (the transpose views W)
    path = tmp_path / "v.tape"
    tape.save(str(path))
    loaded = tg.load_tape(str(path))
    assert loaded._R.view_links == tape._R.view_links
    v, (gx, gW) = loaded.value_and_grad(np.ones((2, 3)), np.full((4, 3), 0.5))
    assert v == 12.0
    np.testing.assert_array_equal(gx, np.full((2, 3), 2.0))
    np.testing.assert_array_equal(gW, np.full((4, 3), 2.0))


def test_array_declaring_more_than_its_member_holds_allocates_nothing(saved):
    # a crafted .npy header declaring 10**13 float64s in a few bytes: refused before
    # read_array would allocate them (a MemoryError, or gigabytes really allocated)
    _, path = saved
    with zipfile.ZipFile(path) as z:
        header = json.loads(z.read("header.json"))
        members = {n: z.read(n) for n in z.namelist()}
    name = header["arrays"][0] + ".npy"
    bio = io.BytesIO()
    np.lib.format.write_array_header_1_0(bio, {"descr": "<f8", "fortran_order": False, "shape": (10 ** 13,)})
    members[name] = bio.getvalue() + b"\0" * 16
    with zipfile.ZipFile(path, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    with pytest.raises(ValueError, match="declares 80000000000000 bytes but its member holds"):
        tg.load_tape(str(path))


def test_save_replaces_the_file_whole(saved, tmp_path):
    tape, path = saved
    before = path.read_bytes()
    tape.save(str(path))                # (written beside it, then renamed over it)
    assert path.read_bytes()[:4] == b"PK\x03\x04" and len(path.read_bytes()) == len(before)
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def _set_state_field(header, name, value):
    for item in header["state"]["d"]:
        if item[0] == name:
            item[1] = value
            return
    raise KeyError(name)


def test_opcodes_are_read_by_name(saved):
    # a file written when the ops had other numbers (a row or a host op added since renumbers
    # the later ones) loads with each op's number of today, found by its name
    tape, path = saved
    shift = 1000

    def renumber(h, arrays):
        e = arrays[_array_of(h, "entries")]
        e[:, 0] += shift
        _set_state_field(h, "op_names", [[c + shift, n] for c, n in _state_field(h, "op_names")])
    _rewrite(path, edit_arrays=renumber)
    loaded = tg.load_tape(str(path))
    v, g = loaded.value_and_grad(X0)
    assert v == 1874.953125
    np.testing.assert_array_equal(g, [249.0, 146.0, 3202.0, -895.25, 287.5])


def test_an_op_this_version_lacks_is_named(saved):
    tape, path = saved

    def rename(h):
        names = _state_field(h, "op_names")
        names[-1][1] = "an_op_from_the_future"
        _set_state_field(h, "op_names", names)
    _rewrite(path, edit_header=rename)
    with pytest.raises(ValueError, match="uses the operation 'an_op_from_the_future', which this version"):
        tg.load_tape(str(path))
