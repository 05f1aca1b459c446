"""What two op modules share to record: the shape family's kinds and its recorder
(``ops/shape.py`` records views, indexing and setitem with it; ``ops/inplace.py``
records the CopySlices of a view's base), and the slot of a view read from its
base's current slot, which the core tape asks for (``tape.view_slot``: the core
knows no op, so this module registers it)."""
import numpy as np

from ..core import tape as _tp
from ..core.tensor import Tensor
from ..core.descriptors import check_indices
from ..core.registry import SHAPE, EntryError, name_id

# The shape family's kernels (``ops/shape.py`` defines their opcodes, ``SHAPE << 6 | kind``).
RESHAPE, STRIDED, GATHER, SETITEM, CAT, SCATTER_ADD, STRIDED_SCATTER = range(7)


def record_shape(kind, x, out, name, words=None, b=None):
    """Record ``out`` computed from tensor ``x`` (and ``b`` for setitem)."""
    out = out if type(out) is np.ndarray else np.asarray(out)
    rg = x._requires_grad or (b is not None and b._requires_grad)
    if not rg or not _tp.state().grad:
        return Tensor._wrap(out)
    if kind >= GATHER:      # (strided descriptors are checked where they are made: ``_view_words``)
        check_words(kind, words, x._data.size, out.size, 0 if b is None else b._data.size)
    T = _tp.current()
    s = -1 if not (x._requires_grad or _tp.recording[0]) else \
        (x._slot if (x._tape_id == T.id and x._slot_version == x._ver[0]) else T.adopt(x))     # (replay needs x)
    sb = -1
    if b is not None:
        sb = b._slot if (b._tape_id == T.id and b._slot_version == b._ver[0]) else T.adopt(b)
    at = -1 if words is None else T.aux_append(words)
    ver = [0]
    o = T.new_slot(SHAPE << 6 | kind, s, sb, -1, at, -1, name_id(name), 0.0, 0.0, out, False, ver)
    t = Tensor._recorded(out, T, o, ver)
    return t


def check_words(kind, words, nx, nout, nb):
    """Raise EntryError unless the parameter words of a gather, scatter or setitem
    entry (input ``nx`` elements, output ``nout``, setitem's value ``nb``) index
    inside those arrays: the compiled reverse indexes by them unchecked.  One pass
    per index array (as unsigned, a negative index is out of range too)."""
    if kind == GATHER:
        _in_range(words, nx, "a gather's index")
    elif kind == SCATTER_ADD:
        _in_range(words, nout, "a scatter's index")
    elif kind == SETITEM:
        r = int(words[0]) if len(words) else -1
        if r < 0 or len(words) != 1 + 2 * r:
            raise EntryError("a setitem's %d parameter words do not hold its %d positions" % (len(words), r))
        _in_range(words[1:1 + r], nout, "a setitem's position")
        _in_range(words[1 + r:], nb, "a setitem's value index")


def _in_range(idx, n, what):
    idx = np.asarray(idx, np.int64)
    if idx.size and idx.view(np.uint64).max() >= n:
        check_indices(idx, n, what)


def _base(t):
    x = t._extra
    return None if x is None else x.base


def region(view, base):
    """Flat indices, in ``base``'s C order, of the elements ``view`` shows."""
    bd, vd = base._data, view._data
    item = bd.itemsize
    off = (vd.__array_interface__["data"][0] - bd.__array_interface__["data"][0]) // item
    lin = np.arange(bd.size, dtype=np.int64)
    return np.lib.stride_tricks.as_strided(lin[off:], shape=vd.shape,
                                           strides=[s // item * 8 for s in vd.strides]).copy()


def view_slot(T, t):
    """A fresh slot for view ``t`` read from its base's current slot."""
    base = _base(t)
    sb = base._slot if (base._tape_id == T.id and base._slot_version == base._ver[0]) else T.adopt(base)
    lin = region(t, base).ravel()
    check_words(GATHER, lin, base._data.size, lin.size, 0)
    at = T.aux_append(lin)
    s = T.new_slot(SHAPE << 6 | GATHER, sb, -1, -1, at, -1, name_id("AsStridedBackward0"), 0.0, 0.0,
                   t._data, False, t._ver)
    t._tape, t._slot, t._tape_id, t._slot_version, t._requires_grad = T, s, T.id, t._ver[0], True
    return s


_tp.view_slot = view_slot
