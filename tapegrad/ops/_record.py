"""What two op modules share to record: the shape family's kinds and its recorder
(``ops/shape.py`` records views, indexing and setitem with it; ``ops/inplace.py``
records the CopySlices of a view's base), and the slot of a view read from its
base's current slot, which the core tape asks for (``tape.view_slot``: the core
knows no op, so this module registers it)."""
import numpy as np

from ..core import tape as _tp
from ..core.tensor import Tensor
from ..core.registry import SHAPE, name_id

# The shape family's kernels (``ops/shape.py`` defines their opcodes, ``SHAPE << 6 | kind``).
RESHAPE, STRIDED, GATHER, SETITEM, CAT, SCATTER_ADD, STRIDED_SCATTER = range(7)


def record_shape(kind, x, out, name, words=None, b=None):
    """Record ``out`` computed from tensor ``x`` (and ``b`` for setitem)."""
    out = out if type(out) is np.ndarray else np.asarray(out)
    rg = x._requires_grad or (b is not None and b._requires_grad)
    if not rg or not _tp.state().grad:
        return Tensor._wrap(out)
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
    at = T.aux_append(region(t, base).ravel())
    s = T.new_slot(SHAPE << 6 | GATHER, sb, -1, -1, at, -1, name_id("AsStridedBackward0"), 0.0, 0.0,
                   t._data, False, t._ver)
    t._tape, t._slot, t._tape_id, t._slot_version, t._requires_grad = T, s, T.id, t._ver[0], True
    return s


_tp.view_slot = view_slot
