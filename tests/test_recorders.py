"""The elementwise recorders write their tape entries themselves.

``ops/elementwise.py``'s ``_unary_recorder`` and ``_binary_recorder`` are the hot path
of recording, so each writes its entry with ``ENTRY.pack_into`` (``_pack``) and makes
its output tensor field by field, instead of calling ``Tape.new_slot`` and
``Tensor._recorded``: four inlined copies (each recorder's single-number path and its
array path).  This file checks, for every copy and every kind of operation it
records, that the tape it leaves is the tape the general path leaves for the same
operation: the general path here adopts the inputs (``ops.elementwise._slot``,
``Tape.adopt``), keeps the inputs the registry's mask names (``SAVES_BY_RG``),
stores the broadcast words with ``Tape.aux_append`` and appends the entry with
``Tape.new_slot``; its output is ``Tensor._recorded``.  The two runs start from
fresh tapes with the same inputs, and everything is compared: every entry's bytes,
the aux words, the saved values, the versions, the leaves and imports, and the
output tensor's fields.

The only differences allowed are the single-number path's, by design: its output is
a ``NumberTensor`` (a Python float, no array), and a one-element value it would keep
for the reverse pass is not kept in ``Tape.vals``, since it sits in its entry's VAL
field, where the reverse sweep reads single numbers: there the test checks that the
VAL field holds the value the general path keeps."""
import ast
import os
import struct
from typing import Callable, NamedTuple

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import tape as tp
from tapegrad.core.promotion import result_type
from tapegrad.core.registry import SAVES_BY_RG, name_id
from tapegrad.core.tensor import NumberTensor, Tensor
from tapegrad.ops import elementwise as ew

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNARY = ew.UNARY_BY_NAME
BINARY = ew.BINARY_BY_NAME

# The inlined copies of Tape.new_slot in ops/elementwise.py: (recorder factory, branch).
NUMBER, ARRAY = "single-number path", "array path"
COPIES = [("_unary_recorder", NUMBER), ("_unary_recorder", ARRAY),
          ("_binary_recorder", NUMBER), ("_binary_recorder", ARRAY)]


# -- the general path -------------------------------------------------------------------
def general_unary(op, x, p=0.0, q=0.0, name=-1):
    """Record ``op(x, p, q)`` with the general calls."""
    d = x._data
    out = np.asarray(op.forward(d, *(p, q)[:op.nparams]))
    T = tp.current()
    s = ew._slot(T, x)
    keep = SAVES_BY_RG[op.code][1]          # bit 0: x, bit 3: the output
    if keep & 1:
        T.vals[s] = d
    ver = [0]
    o = T.new_slot(op.code, s, -1, -1, -1, -1, name_id(op.grad_fn) if name < 0 else name, p, q, out,
                   bool(keep & 8), ver)
    return Tensor._recorded(out, T, o, ver)


def general_binary(op, a, b, c=None, name=-1):
    """Record ``op(a, b)`` (``where``: ``op(c, a, b)``) with the general calls."""
    ad, bd = a._data, b._data
    if ad.dtype != bd.dtype:
        dt = result_type(ad, bd)
        ad, bd = ad.astype(dt), bd.astype(dt)
    out = np.asarray(op.forward(ad, bd) if c is None else op.forward(c._data, ad, bd))
    T = tp.current()
    ins, arrays = [a, b], [ad, bd]
    if c is not None:
        ins.append(c)
        arrays.append(c._data)
    slots = [ew._slot(T, t) for t in ins]
    keep = SAVES_BY_RG[op.code][int(a._requires_grad) | int(b._requires_grad) << 1]   # bits 0-2: a, b, c; 3: output
    for k, (s, v) in enumerate(zip(slots, arrays)):
        if keep & (1 << k):
            T.vals[s] = v
    words, bits = None, 0
    if any(v.shape != out.shape for v in arrays):
        words, bits = ew._broadcast_plan(out.shape, tuple(arrays))
    at = -1 if words is None else T.aux_append(words)
    ver = [0]
    o = T.new_slot(op.code, slots[0], slots[1], slots[2] if c is not None else -1, at, bits,
                   name_id(op.grad_fn) if name < 0 else name, 0.0, 0.0, out, bool(keep & 8), ver)
    return Tensor._recorded(out, T, o, ver)


# -- the cases ------------------------------------------------------------------------
def leaf(v, dtype=np.float64):
    return tg.tensor(np.asarray(v, dtype), requires_grad=True)


def const(v, dtype=np.float64):
    return tg.tensor(np.asarray(v, dtype))


def number(v):
    """A NumberTensor on the current tape (made by the single-number path of mul_s)."""
    t = UNARY["mul_s"].record(leaf(v), 1.0)
    assert type(t) is NumberTensor and t._f is not None
    return t


def on_tape(v, dtype=np.float64):
    """An intermediate array tensor already on the current tape."""
    t = UNARY["copy"].record(leaf(v, dtype))
    assert type(t) is Tensor and t._tape is tp.state().tape
    return t


def changed_in_place(v):
    """An intermediate whose version moved after its slot was made (adopt refreshes it)."""
    t = on_tape(v)
    with tg.no_grad():
        t.add_(1.0)
    assert t._slot_version != t._ver[0]
    return t


def from_older_tape(make, v):
    """An intermediate of an older tape (adopt imports it as an EXT entry)."""
    t = make(v)
    tp.rotate()
    return t


def full_but(free, *make):
    """Fill the current tape with constants until ``free`` entries are left, then make
    the inputs: adopting them takes the last free entries, so the op's own entry
    needs the buffer grown."""
    def build():
        T = tp.current()
        while T.n < T.cap - free:
            T.adopt(const(0.0))
        assert T.room() and T.limit == T.cap
        return tuple(f() for f in make)
    return build


class Case(NamedTuple):
    id: str
    copy: tuple            # which entry of COPIES it exercises
    op: object             # the row of UNARY_OPS / BINARY_OPS
    build: Callable        # the inputs, made on the fresh current tape
    args: tuple = ()       # unary: (p, q); binary: (c,) made by build instead
    name: int = -1


def U(id, branch, op, build, p=0.0, q=0.0, name=-1):
    return Case(id, ("_unary_recorder", branch), UNARY[op], build, (p, q), name)


def B(id, branch, op, build, name=-1):
    return Case(id, ("_binary_recorder", branch), BINARY[op], build, (), name)


SUB_NM, RSUB_NM = name_id("SubBackward0"), name_id("RsubBackward0")
CASES = [
    # unary, single number
    U("neg-0d-leaf", NUMBER, "neg", lambda: (leaf(1.25),)),
    U("sqrt-keeps-output", NUMBER, "sqrt", lambda: (leaf(2.0),)),
    U("sin-keeps-number-input", NUMBER, "sin", lambda: (number(0.7),)),
    U("sin-keeps-(1,)-input", NUMBER, "sin", lambda: (leaf([0.7]),)),
    U("mul_s-p", NUMBER, "mul_s", lambda: (number(3.0),), p=0.5),
    U("add_s-int-p-named-sub", NUMBER, "add_s", lambda: (leaf(3.0),), p=-2, name=SUB_NM),
    U("rsub_s-p", NUMBER, "rsub_s", lambda: (leaf(0.25),), p=3.0),
    U("cos-older-tape", NUMBER, "cos", lambda: (from_older_tape(on_tape, 0.3),)),
    U("sin-keeps-number-from-older-tape", NUMBER, "sin", lambda: (from_older_tape(number, 0.3),)),
    U("neg-grows-buffer", NUMBER, "neg", full_but(1, lambda: leaf(1.5))),
    # unary, arrays
    U("exp-keeps-output", ARRAY, "exp", lambda: (leaf([0.1, -0.2, 0.3]),)),
    U("log-keeps-input", ARRAY, "log", lambda: (leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),)),
    U("neg-keeps-nothing", ARRAY, "neg", lambda: (leaf([1.0, -2.0]),)),
    U("clamp-p-q", ARRAY, "clamp", lambda: (leaf([-1.0, -0.25, 0.25, 1.0]),), p=-0.5, q=0.5),
    U("mul_s-float32", ARRAY, "mul_s", lambda: (leaf([1.0, 2.0, 3.0], np.float32),), p=0.1),
    U("add_s-named-sub", ARRAY, "add_s", lambda: (leaf([1.0, 2.0]),), p=-2, name=SUB_NM),
    U("pow_s-on-tape", ARRAY, "pow_s", lambda: (on_tape([1.5, -0.5]),), p=3),
    U("sqrt-of-negative-number-goes-numpy", ARRAY, "sqrt", lambda: (leaf(-1.0),)),
    U("exp-0d-no-number-forward", ARRAY, "exp", lambda: (leaf(0.5),)),
    U("sin-0d-float32", ARRAY, "sin", lambda: (leaf(0.5, np.float32),)),
    U("tanh-changed-in-place", ARRAY, "tanh", lambda: (changed_in_place([0.1, 0.2]),)),
    U("sigmoid-older-tape", ARRAY, "sigmoid", lambda: (from_older_tape(on_tape, [0.1, 0.2]),)),
    U("exp-grows-buffer", ARRAY, "exp", full_but(1, lambda: leaf([1.0, 2.0]))),
    # binary, single numbers
    B("add-0d-leaves", NUMBER, "add", lambda: (leaf(1.0), leaf(2.5))),
    B("mul-keeps-const-b", NUMBER, "mul", lambda: (leaf(1.5), const(4.0))),
    B("mul-keeps-leaf-a", NUMBER, "mul", lambda: (const(1.5), leaf(4.0))),
    B("mul-keeps-numbers", NUMBER, "mul", lambda: (number(1.5), number(-3.0))),
    B("div-(1,)-shapes", NUMBER, "div", lambda: (leaf([3.0]), leaf([2.0]))),
    B("sub-number-and-leaf", NUMBER, "sub", lambda: (number(1.0), leaf(0.25))),
    B("sub-named-rsub", NUMBER, "sub", lambda: (leaf(1.0), leaf(0.25)), name=RSUB_NM),
    B("add-older-tape", NUMBER, "add", lambda: (from_older_tape(on_tape, 1.0), leaf(2.0))),
    B("add-grows-buffer", NUMBER, "add", full_but(2, lambda: leaf(1.0), lambda: leaf(2.0))),
    # binary, arrays
    B("add-same-shape", ARRAY, "add", lambda: (leaf([1.0, 2.0, 3.0]), leaf([4.0, 5.0, 6.0]))),
    B("mul-keeps-b", ARRAY, "mul", lambda: (leaf([[1.0, 2.0, 3.0]] * 2), const([[4.0, 5.0, 6.0]] * 2))),
    B("mul-keeps-a", ARRAY, "mul", lambda: (const([1.0, 2.0]), leaf([3.0, 4.0]))),
    B("pow-keeps-a-b-output", ARRAY, "pow", lambda: (leaf([1.5, 2.0]), leaf([2.0, 0.5]))),
    B("mul-broadcast-aux-words", ARRAY, "mul",
      lambda: (leaf(np.arange(12.0).reshape(3, 4)), leaf([1.0, 2.0, 3.0, 4.0]))),
    B("add-scalar-broadcast-bits", ARRAY, "add", lambda: (leaf(np.arange(12.0).reshape(3, 4)), leaf(2.0))),
    B("mul-(1,)-with-0d", ARRAY, "mul", lambda: (leaf([2.0]), leaf(3.0))),
    B("mul-float32-with-0d-float64", ARRAY, "mul", lambda: (leaf([1.0, 2.0], np.float32), leaf(3.0))),
    B("div-float32", ARRAY, "div", lambda: (leaf([1.0, 2.0], np.float32), leaf([3.0, 4.0], np.float32))),
    B("div-by-zero-number-goes-numpy", ARRAY, "div", lambda: (leaf(1.0), leaf(0.0))),
    B("atan2-0d-no-number-forward", ARRAY, "atan2", lambda: (leaf(1.0), leaf(2.0))),
    B("maximum-on-tape", ARRAY, "maximum", lambda: (on_tape([1.0, 5.0]), leaf([2.0, 5.0]))),
    B("sub-named-rsub", ARRAY, "sub", lambda: (leaf([1.0, 2.0]), leaf([0.5, 0.5])), name=RSUB_NM),
    B("where", ARRAY, "where", lambda: (leaf([1.0, 2.0]), leaf([3.0, 4.0]), const([True, False], np.bool_))),
    B("where-0d", ARRAY, "where", lambda: (leaf(1.0), leaf(2.0), const(True, np.bool_))),
    B("where-broadcast-c-aux-words", ARRAY, "where",
      lambda: (leaf(np.arange(6.0).reshape(2, 3)), const([[1.0, 2.0, 3.0]] * 2),
               const([[True], [False]], np.bool_))),
    B("where-scalar-b", ARRAY, "where", lambda: (leaf([1.0, 2.0]), leaf(0.0), const([True, False], np.bool_))),
    B("add-older-tape", ARRAY, "add", lambda: (from_older_tape(on_tape, [1.0, 2.0]), leaf([3.0, 4.0]))),
    B("mul-grows-buffer", ARRAY, "mul", full_but(2, lambda: leaf([1.0, 2.0]), lambda: leaf([3.0, 4.0]))),
]


def run(case, general):
    """Record ``case`` on a fresh tape, by its recorder or by the general path:
    (the tape, the inputs, which inputs were single numbers (NumberTensor), the output)."""
    tp.rotate()
    ins = case.build()
    numbers = [type(t) is NumberTensor and t._f is not None for t in ins]
    with np.errstate(divide="ignore", invalid="ignore"):        # (sqrt(-1), 1 / 0: NumPy's warnings)
        if case.copy[0] == "_unary_recorder":
            (x,) = ins
            p, q = case.args
            out = general_unary(case.op, x, p, q, case.name) if general else case.op.record(x, p, q, case.name)
        else:
            a, b, c = ins if len(ins) == 3 else ins + (None,)
            out = general_binary(case.op, a, b, c, case.name) if general else case.op.record(a, b, c, case.name)
    T = tp.state().tape
    assert out._tape is T
    return T, ins, numbers, out


def _float_bits(v):
    return struct.pack("d", v)


def _same_array(u, v):
    return u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes()


def position(ins, t):
    return next((k for k, u in enumerate(ins) if u is t), "other")


def owner(T, ins, out):
    """What each of T's version lists belongs to: an input (by position), the output, or another tensor."""
    ids = {id(t._ver): k for k, t in enumerate(ins)}
    ids[id(out._ver)] = "out"
    return [ids.get(id(v), "other") for v in T.versions]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-%s" % ("number" if c.copy[1] == NUMBER else "array", c.id))
def test_the_recorder_writes_what_the_general_path_writes(case):
    T, ins, numbers, out = run(case, general=False)
    # the recorder took the branch this case is about (a NumberTensor only comes from the number path)
    assert type(out) is (NumberTensor if case.copy[1] == NUMBER else Tensor)
    G, gins, _, gout = run(case, general=True)
    assert type(gout) is Tensor

    # the entries, all of them (the inputs' and the op's), byte for byte
    assert (T.n, T.cap, len(T.buf)) == (G.n, G.cap, len(G.buf))
    ti, tf = T.arrays()
    gi, gf = G.arrays()
    for s in range(T.n):
        assert ti[s, :9].tolist() == gi[s, :9].tolist(), "entry %d's int fields" % s
        assert [_float_bits(v) for v in tf[s, 9:]] == [_float_bits(v) for v in gf[s, 9:]], "entry %d's floats" % s
    assert bytes(T.buf[:T.n * tp.ESIZE]) == bytes(G.buf[:G.n * tp.ESIZE])
    assert T.aux_len == G.aux_len
    assert T.aux_array().tolist() == G.aux_array().tolist()
    # the tape's bookkeeping of its entries
    assert (T.limit, T.counted, T.elements, T.sealed) == (G.limit, G.counted, G.elements, G.sealed)
    assert [v[0] for v in T.versions] == [v[0] for v in G.versions]
    assert owner(T, ins, out) == owner(G, gins, gout)
    assert {s: position(ins, t) for s, t in T.leaves.items()} == {s: position(gins, t) for s, t in G.leaves.items()}
    assert {s: sl for s, (_, sl) in T.ext.items()} == {s: sl for s, (_, sl) in G.ext.items()}
    assert list(T.imports.values()) == list(G.imports.values())

    # the saved values; the number path keeps a one-element value in the entry (VAL) instead
    o = out._slot
    in_entry = set()
    if case.copy[1] == NUMBER:
        in_entry = {int(ti[o, tp.A + k]) for k, n in enumerate(numbers) if n} | {o}     # (A, B: the inputs' slots)
    assert len(T.vals) == len(G.vals) == T.n
    for s, (v, g) in enumerate(zip(T.vals, G.vals)):
        if s in in_entry and g is not None:
            assert v is None, "slot %d: the number path keeps no array" % s
            assert g.size == 1 and _float_bits(tf[s, tp.VAL]) == _float_bits(g.item())
        elif g is None:
            assert v is None, "slot %d is kept by the recorder only" % s
        else:
            assert v is not None and _same_array(v, g), "slot %d's saved value" % s
    if T.vals[o] is not None:
        assert T.vals[o] is out._data

    # the output tensor
    assert (out.shape, out.dtype, out.requires_grad, out._requires_grad) == \
           (gout.shape, gout.dtype, gout.requires_grad, gout._requires_grad)
    assert (out._slot, out._slot_version, out._extra) == (gout._slot, gout._slot_version, gout._extra) \
        == (T.n - 1, 0, None)
    assert out._tape_id == T.id and gout._tape_id == G.id
    assert out._ver is T.versions[o] and out._ver == [0]
    if type(out) is NumberTensor:
        assert out._f is not None and _float_bits(out._f) == _float_bits(gout._data.item())
        assert out._shp == gout._data.shape
    assert _same_array(np.asarray(out._data), gout._data)


def test_every_copy_has_cases():
    assert sorted({c.copy for c in CASES}) == sorted(COPIES)


# -- no copy left unchecked ----------------------------------------------------------
def _pack_call_sites(path):
    """The calls of ``_pack`` (or any ``pack_into``) in ``path``: (top-level function,
    branch), the branch being the single-number path inside ``if number is not None``."""
    tree = ast.parse(open(path).read())
    sites = []

    def walk(node, top, branch):
        for ch in ast.iter_child_nodes(node):
            t, b = top, branch
            if isinstance(ch, ast.FunctionDef) and top is None:
                t = ch.name
            if isinstance(ch, ast.If) and "number is not None" in ast.unparse(ch.test):
                # (the test itself and the else branch are not the number path)
                for x in ch.body:
                    walk_one(x, t, NUMBER)
                for x in ch.orelse:
                    walk_one(x, t, b)
                continue
            if isinstance(ch, ast.Call):
                f = ch.func
                if (isinstance(f, ast.Name) and f.id == "_pack") or \
                        (isinstance(f, ast.Attribute) and f.attr == "pack_into"):
                    sites.append((t, b, ch.lineno))
            walk(ch, t, b)

    def walk_one(x, top, branch):
        wrapper = ast.Module(body=[x], type_ignores=[])
        walk(wrapper, top, branch)

    walk(tree, None, ARRAY)
    return sites


def test_the_checked_copies_are_all_the_inlined_entry_writes():
    """A new ``_pack(`` in elementwise.py (or one moved to another branch) fails here
    until it has cases above."""
    sites = _pack_call_sites(os.path.join(ROOT, "tapegrad", "ops", "elementwise.py"))
    assert len(sites) == len(COPIES) == 4, sites
    assert sorted((t, b) for t, b, _ in sites) == sorted(COPIES), sites
    # and no other module packs entries itself: only Tape.new_slot (and set_field's one word)
    for dirpath, _, files in os.walk(os.path.join(ROOT, "tapegrad")):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(dirpath, f)
                rel = os.path.relpath(p, ROOT)
                text = open(p).read()
                if rel == os.path.join("tapegrad", "core", "tape.py"):
                    assert text.count("ENTRY.pack_into(") == 1 and text.count("pack_into(") == 2
                elif rel == os.path.join("tapegrad", "ops", "elementwise.py"):
                    assert text.count("pack_into") == 1          # the alias _pack = _tp.ENTRY.pack_into
                else:
                    assert "pack_into" not in text and "_pack(" not in text, rel
