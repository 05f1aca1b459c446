"""In-place operations and the version counters that keep them honest.

An in-place op computes its result like the out-of-place op (recorded as usual),
writes it into the tensor's storage, bumps the storage's version and moves the
tensor onto the new slot.  Entries that saved the old value notice the version
change at backward and raise PyTorch's error.  When the tensor is a view, its
base moves too (a CopySlices entry), and other views of the base re-derive their
slot from it on their next use (``view_slot``).
"""
import numpy as np

from ..core import tape as _tp
from ..core.dtypes import torch_name
from ._record import SETITEM, _base, record_shape, region, view_slot

LEAF_MSG = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_LEAF_MSG = "a view of a leaf Variable that requires grad is being used in an in-place operation."
NO_GRAD_VIEW_MSG = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that "
    "this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both "
    "the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
    "tracked) or both outside (if you want the inplace to be tracked).")


MULTI_VIEW_MSG = ("Output %d of %s is a view and is being modified inplace. This view is the output of a function "
                  "that returns multiple views. Such functions do not allow the output views to be modified "
                  "inplace. You should replace the inplace operation by an out-of-place one.")


OVERLAP_MSG = ("unsupported operation: more than one element of the written-to tensor refers to a single "
               "memory location. Please clone() the tensor before performing the operation.")


def check_inplace(y, view_op=False):
    """PyTorch's refusals; ``view_op``: the op writes through a view (setitem)."""
    d = y._data
    if not d.flags.writeable:
        if 0 in d.strides and d.size > 1:       # expand / broadcast_to
            raise RuntimeError(OVERLAP_MSG)
        raise RuntimeError("a leaf Variable's memory is read-only here: the tensor's NumPy array is not "
                           "writeable; clone() it before an in-place operation")
    if not _tp.state().grad:
        return
    b = _base(y)
    if b is not None and y._extra.name is not None:
        name = y._extra.name
        if name == "no_grad_view" and b._requires_grad:
            raise RuntimeError(NO_GRAD_VIEW_MSG)
        if type(name) is tuple:     # (output number, op): a piece of split, chunk or unbind
            raise RuntimeError(MULTI_VIEW_MSG % name)
    if y._requires_grad and y._tape is None and b is None:
        raise RuntimeError(VIEW_LEAF_MSG if view_op else LEAF_MSG)
    if b is not None and b._requires_grad and b._tape is None:
        raise RuntimeError(VIEW_LEAF_MSG)


def commit_inplace(y, r):
    """``y``'s storage now holds the new values; ``r`` is the recorded result (None
    when nothing was recorded).  Bump the version and move ``y`` (and its base)."""
    if r is None:
        y._written_()
        return
    _tp.inplace_counter[0] += 1
    y._ver[0] += 1
    T = r._tape
    y._tape, y._slot, y._tape_id, y._requires_grad = T, r._slot, T.id, True
    _set_producer(y._ver, T.field(r._slot, _tp.NAME))
    T.versions[r._slot] = y._ver
    T.set_field(r._slot, _tp.VERSION, y._ver[0])
    y._slot_version = y._ver[0]
    base = _base(y)
    if base is not None:
        reg = region(y, base)
        vmap = np.arange(reg.size, dtype=np.int64)
        words = np.concatenate(([reg.size], reg.ravel(), vmap))
        nb = record_shape(SETITEM, base, base._data.copy(), "CopySlices", words, b=y)
        base._tape, base._slot, base._tape_id, base._requires_grad = T, nb._slot, T.id, True
        T.versions[nb._slot] = base._ver
        T.set_field(nb._slot, _tp.VERSION, base._ver[0])
        base._slot_version = base._ver[0]
        _set_producer(base._ver, T.field(nb._slot, _tp.NAME))
        view_slot(T, y)


def _set_producer(ver, nm):
    """The version counter also names the op that last wrote the storage: PyTorch's
    in-place error names the tensor's current grad_fn, not the one that saved it."""
    if len(ver) == 1:
        ver.append(nm)
    else:
        ver[1] = nm


def _check_cast(src, dst):
    """PyTorch's rule for writing a result of dtype ``src`` into a tensor of dtype
    ``dst``: no floating point into an integer tensor, nothing but bool into bool."""
    if (src.kind == "f" and dst.kind in "biu") or (src.kind != "b" and dst.kind == "b"):
        raise RuntimeError("result type %s can't be cast to the desired output type %s"
                           % (torch_name(src), torch_name(dst)))


def apply(y, result_fn):
    """Run ``result_fn()`` (an out-of-place op on ``y``) and store it into ``y``."""
    check_inplace(y)
    d = y._data
    T0 = _tp.state().tape
    pre_saved = (T0 is not None and y._tape_id == T0.id and 0 <= y._slot < len(T0.vals)
                 and T0.vals[y._slot] is d)
    r = result_fn()
    if r._data.shape != d.shape:
        raise RuntimeError("output with shape %s doesn't match the broadcast shape %s"
                           % (list(d.shape), list(r._data.shape)))
    if r._data.dtype is not d.dtype:
        _check_cast(r._data.dtype, d.dtype)
    T = r._tape
    if (not pre_saved and T is not None and y._tape_id == T.id and 0 <= y._slot < len(T.vals)
            and T.vals[y._slot] is d):
        # the op itself saved the value it is about to overwrite (y.mul_(x)): keep
        # a copy for it; an earlier saver still sees the version change and raises
        T.vals[y._slot] = d.copy()
        T.versions[y._slot] = [T.field(y._slot, _tp.VERSION)]
    np.copyto(d, r._data, casting="unsafe")
    commit_inplace(y, r if r._tape is not None else None)
    return y
