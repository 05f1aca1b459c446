"""The flat Wengert tape: recording, slots, versions, freeing.

Every recorded operation appends one entry: seven integers (opcode, input slots
a/b/c, two integer parameters, grad_fn name id) to ``ints`` and two floats to
``flts``.  Entry ``s`` produces slot ``s``; ``sizes[s]`` is its element count and
``vals[s]`` the array the reverse pass needs from it (None when no entry reads
it).  Variable-length parameters (shapes, strides, index arrays) go to ``aux``.

Tapes are per thread and short-lived: after a backward the thread starts a new
tape, and a tape is freed by reference counting once no tensor recorded on it is
alive (tensors hold their tape; a tape holds only arrays, its leaves, and the
tensors of older tapes it imported).  A tensor from an older tape used in a new
operation is imported as an ``EXT`` entry; backward hands its adjoint on to the
older tape, so graphs spanning several tapes differentiate as one.
"""
import itertools
import threading
from array import array

import numpy as np

from .ops.registry import CONST, EXT, LEAF

_ids = itertools.count(1)
_tls = threading.local()

# Bumped by every in-place operation (also under no_grad): a tape whose mark is
# older than the counter must check the versions of the values it saved.
inplace_counter = [0]

ROTATE_ENTRIES = 1 << 18    # start a new tape past this many entries


def is_grad_enabled():
    try:
        return _tls.grad
    except AttributeError:
        _tls.grad = True
        return True


def _set_grad_enabled(mode):
    _tls.grad = bool(mode)


def current():
    """This thread's recording tape (created on first use)."""
    try:
        t = _tls.tape
    except AttributeError:
        t = None
    if t is None or len(t.sizes) >= ROTATE_ENTRIES:
        t = _tls.tape = Tape()
    return t


def rotate():
    """Start a new tape for the next operations (called after each backward)."""
    _tls.tape = None


class Tape:
    __slots__ = ("id", "ints", "flts", "sizes", "vals", "vobj", "vnum", "leaves", "ext",
                 "imports", "hooks", "retained", "freed", "aux", "aux_len", "inplace_mark",
                 "sources", "nodes", "__weakref__")

    NINT, NFLT = 7, 2

    def __init__(self):
        self.id = next(_ids)
        self.ints = array("q")
        self.flts = array("d")
        self.sizes = array("q")
        self.vals = []          # slot -> ndarray or None
        self.vobj = []          # slot -> the version counter of the tensor it came from
        self.vnum = array("q")  # slot -> that counter's value when the slot was made
        self.leaves = {}        # slot -> leaf Tensor (gradients accumulate into it)
        self.ext = {}           # slot -> Tensor of an older tape
        self.imports = {}       # id(tensor) -> slot, for EXT entries
        self.hooks = {}         # slot -> list of hooks of a non-leaf tensor
        self.retained = {}      # slot -> weakref of a tensor that called retain_grad()
        self.freed = np.zeros(0, np.uint8)
        self.aux = []           # chunks of int64 words; see aux_append
        self.aux_len = 0
        self.inplace_mark = inplace_counter[0]
        self.sources = None     # slot -> user source line (anomaly mode; later issue)
        self.nodes = None       # slot -> grad_fn Node (weak), so grad_fn is the same object each time

    def __len__(self):
        return len(self.sizes)

    # -- recording ------------------------------------------------------------
    def aux_append(self, words):
        """Store variable-length integer parameters; returns their offset."""
        at = self.aux_len
        w = np.asarray(words, dtype=np.int64).ravel()
        self.aux.append(w)
        self.aux_len += w.size
        return at

    def new_slot(self, code, a, b, c, i0, i1, nm, f0, f1, size, value, ver):
        s = len(self.sizes)
        self.ints.extend((code, a, b, c, i0, i1, nm))
        self.flts.extend((f0, f1))
        self.sizes.append(size)
        self.vals.append(value)
        self.vobj.append(ver)
        self.vnum.append(ver[0])
        return s

    def adopt(self, t):
        """The slot of tensor ``t`` on this tape, making one when needed."""
        ver = t._ver
        if t._tape is None:                       # a leaf or a constant
            code = LEAF if t._rg else CONST
            s = self.new_slot(code, -1, -1, -1, -1, -1, -1, 0.0, 0.0, t._data.size, t._data, ver)
            if t._rg:
                self.leaves[s] = t
            t._tid, t._slot, t._sver = self.id, s, ver[0]
            return s
        if t._tape is self:                       # changed in place under no_grad
            return self._refresh(t)
        key = id(t)
        s = self.imports.get(key)
        if s is not None and self.vnum[s] == ver[0]:
            return s
        s = self.new_slot(EXT, -1, -1, -1, -1, -1, -1, 0.0, 0.0, t._data.size, t._data, ver)
        self.ext[s] = t
        self.imports[key] = s
        return s

    def _refresh(self, t):
        """A fresh slot for a non-leaf whose version moved without a recorded op:
        an identity entry, so later saves get the current version."""
        from .ops.elementwise import UNARY_BY_NAME
        op = UNARY_BY_NAME["copy"]
        s = self.new_slot(op.code, t._slot, -1, -1, -1, -1, self._name_of(t._slot),
                          0.0, 0.0, t._data.size, None, t._ver)
        t._slot, t._sver = s, t._ver[0]
        return s

    def _name_of(self, s):
        return self.ints[s * 7 + 6]

    # -- inspection -----------------------------------------------------------
    def entries(self):
        """The tape as NumPy arrays (a copy): opcode, a, b, c, i0, i1, name, f0, f1, size."""
        n = len(self.sizes)
        ints = np.frombuffer(self.ints, dtype=np.int64).reshape(n, 7).copy() if n else np.zeros((0, 7), np.int64)
        flts = np.frombuffer(self.flts, dtype=np.float64).reshape(n, 2).copy() if n else np.zeros((0, 2))
        return {"op": ints[:, 0], "a": ints[:, 1], "b": ints[:, 2], "c": ints[:, 3],
                "i0": ints[:, 4], "i1": ints[:, 5], "name": ints[:, 6],
                "f0": flts[:, 0], "f1": flts[:, 1],
                "size": np.frombuffer(self.sizes, dtype=np.int64).copy() if n else np.zeros(0, np.int64)}

    def __repr__(self):
        return f"<tapegrad.Tape id={self.id} entries={len(self)}>"
