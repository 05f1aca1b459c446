"""The memory of ``tg.tensor``'s large copies, handed out again once nothing uses it.

A new array of tens of megabytes is fresh mmap'd memory: each of its pages faults
and is zeroed by the kernel at its first write, which costs two to three times the
copy itself (51 MB: about 10 ms, against 3.5 ms into memory already mapped).  A
loop that wraps a new batch of the same size at every step (``tg.tensor(X)``)
would pay that at every step.  So a copy of at least ``RECYCLE_FROM`` bytes goes
into a buffer kept here, and a later copy of the same size reuses a buffer once
nothing refers to it: every NumPy view of a buffer, however made, holds a
reference to the buffer itself (a view's ``.base`` is the array owning the
memory), so the buffer's reference count tells whether anything (a tensor, a
tape's saved value, an array the user holds) still uses it.

What this keeps in memory: at most ``KEEP`` buffers, ``KEEP_BYTES`` in all, the
least recently used given up first; ``release()`` (``tg.memory_stats()`` shows the
bytes) frees the idle ones.
"""
import sys
import threading

import numpy as np

RECYCLE_FROM = 16 << 20     # smaller ones come from malloc's own reused memory, no faults
KEEP = 4
KEEP_BYTES = 1 << 30

_LOCK = threading.Lock()
_KEPT = []                  # buffers (1-d uint8 arrays), the most recently handed out last


def _unused(kept, i):
    """Whether nothing but the list refers to ``kept[i]``."""
    return sys.getrefcount(kept[i]) == _IDLE


def _idle_count():
    """The reference count ``_unused`` sees of a listed buffer nothing else refers to
    (measured the same way, so that it holds on any CPython)."""
    probe = [np.empty(1, np.uint8)]
    return sys.getrefcount(probe[0])


_IDLE = _idle_count()


def copy_of(data, dtype):
    """A C-contiguous copy of ndarray ``data`` (cast to ``dtype`` when given, as
    ``np.array(data, dtype)`` does), in a recycled buffer; None when ``data`` is too
    small or too large for one (the caller copies as usual)."""
    dt = data.dtype if dtype is None else dtype
    nbytes = data.size * dt.itemsize
    if nbytes < RECYCLE_FROM or nbytes > KEEP_BYTES:
        return None
    with _LOCK:
        buf = None
        for i in range(len(_KEPT)):
            if _KEPT[i].size == nbytes and _unused(_KEPT, i):
                buf = _KEPT.pop(i)
                break
        if buf is None:
            buf = np.empty(nbytes, np.uint8)
            while _KEPT and (len(_KEPT) >= KEEP or sum(b.size for b in _KEPT) + nbytes > KEEP_BYTES):
                _KEPT.pop(_oldest_idle())
        _KEPT.append(buf)
        out = buf.view(dt).reshape(data.shape)      # (taken inside the lock: no other thread sees it idle)
    np.copyto(out, data, casting="unsafe")
    return out


def _oldest_idle():
    for i in range(len(_KEPT)):
        if _unused(_KEPT, i):
            return i
    return 0        # all in use: the oldest is no longer kept (its memory goes with its last user)


def release():
    """Free the kept buffers nothing uses; the bytes freed."""
    with _LOCK:
        idle = [i for i in range(len(_KEPT)) if _unused(_KEPT, i)]
        freed = sum(_KEPT[i].size for i in idle)
        for i in reversed(idle):
            del _KEPT[i]
    return freed


def stats():
    """Bytes kept, and of them the bytes nothing uses."""
    with _LOCK:
        kept = sum(b.size for b in _KEPT)
        idle = sum(_KEPT[i].size for i in range(len(_KEPT)) if _unused(_KEPT, i))
    return kept, idle
