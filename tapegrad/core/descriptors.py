"""Helpers shared by the compiled kernels.

Slots: every slot's value and adjoint is a flat float64 array, found through a
locator: ``loc[s] >= 0`` is an offset into an arena (small arrays are packed into
one buffer), ``loc[s] == -2`` means the array lives elsewhere and ``ptr[s]`` holds
its address (large arrays are never copied), ``loc[s] == -1`` means none.

Strided descriptors: broadcasting, reductions and views all map the elements of
one C-ordered array onto another through ``(shape, strides, offset)``, stored in
the tape's integer ``aux`` buffer as ``[ndim, offset, *shape, *strides]``.
"""
import numpy as np

from .._jit import address_as_pointer, jit, numba
from .registry import EntryError


@jit(inline="always")
def slot_addr(loc, ptr, base, s):
    """Address of slot ``s`` (0 when it has no storage here)."""
    if s < 0:
        return np.int64(0)
    l = loc[s]
    if l >= 0:
        return base + 8 * l
    if l == -2:
        return ptr[s]
    return np.int64(0)


@jit(inline="always")
def u64(i):
    """An index known not to be negative: no wraparound test per element."""
    return np.uint64(i)


@jit
def slot_view(loc, ptr, base, s, n):
    """Slot ``s`` (``n`` elements) as an array without a reference count: views are
    made per entry, and reference counting them dominated the sweep's time.
    ``base``: the arena's address."""
    p = base
    if s < 0:
        n = 0
    else:
        l = loc[s]
        if l >= 0:
            p += 8 * l
        elif l == -2:
            p = ptr[s]
        else:
            n = 0
    return numba.carray(address_as_pointer(p), n, np.float64)


@jit(inline="always")
def _carry(idx, shape, strides, last, pos):
    """The odometer step over axes ``last`` .. 0: the next position."""
    d = last
    while d >= 0:
        idx[d] += 1
        pos += strides[d]
        if idx[d] < shape[d]:
            break
        pos -= strides[d] * shape[d]
        idx[d] = 0
        d -= 1
    return pos


@jit
def strided_map(aux, at):
    """Flat source index of every element of the descriptor ``aux[at:]``."""
    nd = aux[at]
    offset = aux[at + 1]
    shape = aux[at + 2:at + 2 + nd]
    strides = aux[at + 2 + nd:at + 2 + 2 * nd]
    n = 1
    for d in range(nd):
        n *= shape[d]
    out = np.empty(n, np.int64)
    if n == 0:
        return out
    if nd == 0:
        out[0] = offset
        return out
    # the last axis in a plain loop, the carry over the outer axes once per row
    inner = shape[nd - 1]
    istr = strides[nd - 1]
    idx = np.zeros(nd, np.int64)
    pos = offset
    j = 0
    for _ in range(n // inner):
        row = out[j:j + inner]
        for k in range(inner):
            row[k] = pos + k * istr
        j += inner
        pos = _carry(idx, shape, strides, nd - 2, pos)
    return out


@jit
def row_starts(aux, at):
    """For the descriptor ``aux[at:]``: the source index of the first element of
    every row (last axis), and the row's length and stride; a 0-d descriptor is
    one row of one element."""
    nd = aux[at]
    if nd == 0:
        return np.full(1, aux[at + 1], np.int64), 1, 0
    outer = np.empty(2 * nd, np.int64)         # the descriptor without its last axis
    outer[0] = nd - 1
    outer[1] = aux[at + 1]
    for d in range(nd - 1):
        outer[2 + d] = aux[at + 2 + d]
        outer[1 + nd + d] = aux[at + 2 + nd + d]
    return strided_map(outer, 0), aux[at + 1 + nd], aux[at + 1 + 2 * nd]


@jit(inline="always")
def coalesced(aux, at):
    """(ndim, shape, strides) of the descriptor at ``aux[at:]`` with its axes of
    length 1 dropped and each pair of adjacent axes that walks as one merged (the
    same elements in the same order), padded in front to at least two axes."""
    nd = aux[at]
    shape = np.ones(max(nd, 2), np.int64)
    strides = np.zeros(max(nd, 2), np.int64)
    m = 0
    for d in range(nd):
        s, st = aux[at + 2 + d], aux[at + 2 + nd + d]
        if s == 1:
            continue
        if m > 0 and strides[m - 1] == st * s:
            shape[m - 1] *= s
            strides[m - 1] = st
        else:
            shape[m] = s
            strides[m] = st
            m += 1
    if m < 2:
        shape[1], strides[1] = (shape[0], strides[0]) if m == 1 else (1, 0)
        shape[0], strides[0] = 1, 0
        m = 2
    return m, shape, strides


@jit
def strided_scatter_add(dst, src, aux, at, scale=1.0):
    """``dst[map[j]] += scale * src[j]`` for the descriptor at ``aux[at:]``, walking
    its last two (coalesced) axes in loops instead of materialising the map.  Each
    element of ``dst`` receives its terms in the order of ``j``, whatever the loop:
    a short last axis after a broadcast one (the adjoint of ``x[:, None, :]``
    broadcast, rows of 3) is summed with the broadcast axis innermost, in a register."""
    n = src.size
    if n == 0:
        return
    nd, shape, strides = coalesced(aux, at)
    rows, inner = shape[nd - 2], shape[nd - 1]
    rstr, istr = strides[nd - 2], strides[nd - 1]
    idx = np.zeros(nd, np.int64)
    pos = aux[at + 1]
    j = 0
    for o in range(n // (rows * inner)):
        if rstr == 0 and istr != 0 and inner <= 8:
            for k in range(inner):
                p = pos + k * istr
                acc = dst[p]
                q = j + k
                for r in range(rows):
                    acc += scale * src[q]
                    q += inner
                dst[p] = acc
            j += rows * inner
        elif istr == 1:     # (slices first: indexing from 0 lets the loop vectorise)
            p2 = pos
            for r in range(rows):
                d = dst[p2:p2 + inner]
                s = src[j:j + inner]
                for k in range(inner):
                    d[k] += scale * s[k]
                j += inner
                p2 += rstr
        else:
            p2 = pos
            for r in range(rows):
                p = p2
                for k in range(inner):
                    dst[p] += scale * src[j]
                    j += 1
                    p += istr
                p2 += rstr
        pos = _carry(idx, shape, strides, nd - 3, pos)


def strided_map_np(aux, at):
    """``strided_map`` for Python callers, in NumPy: no Numba needed, and as fast."""
    nd = int(aux[at])
    m = np.array(aux[at + 1], np.int64)
    for d in range(nd):
        m = m[..., None] + np.arange(aux[at + 2 + d], dtype=np.int64) * aux[at + 2 + nd + d]
    return m.reshape(-1)


def descriptor(shape, strides, offset=0):
    """The aux words of a strided descriptor (Python side)."""
    return [len(shape), offset, *shape, *strides]


def c_strides(shape):
    st, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        st[d] = acc
        acc *= shape[d]
    return st


def broadcast_strides(in_shape, out_shape):
    """Element strides that read an ``in_shape`` array broadcast to ``out_shape``."""
    nd = len(out_shape)
    cs = c_strides(in_shape)
    off = nd - len(in_shape)
    st = [0] * nd
    for d in range(len(in_shape)):
        if in_shape[d] != 1:
            st[off + d] = cs[d]
    return st


@jit
def strided_gather_add(dst, src, aux, at):
    """``dst[j] += src[map[j]]`` for the descriptor at ``aux[at:]`` (the transpose
    of ``strided_scatter_add``; also sum's reverse, the group descriptor mapping
    each input element to its sum), its last two (coalesced) axes in loops."""
    n = dst.size
    if n == 0:
        return
    nd, shape, strides = coalesced(aux, at)
    rows, inner = shape[nd - 2], shape[nd - 1]
    rstr, istr = strides[nd - 2], strides[nd - 1]
    idx = np.zeros(nd, np.int64)
    pos = aux[at + 1]
    j = 0
    for o in range(n // (rows * inner)):
        p2 = pos
        if istr == 1:
            for r in range(rows):
                d = dst[j:j + inner]
                s = src[p2:p2 + inner]
                for k in range(inner):
                    d[k] += s[k]
                j += inner
                p2 += rstr
        elif istr == 0:
            for r in range(rows):
                v = src[p2]
                for k in range(inner):
                    dst[j + k] += v
                j += inner
                p2 += rstr
        else:
            for r in range(rows):
                p = p2
                for k in range(inner):
                    dst[j] += src[p]
                    j += 1
                    p += istr
                p2 += rstr
        pos = _carry(idx, shape, strides, nd - 3, pos)


# -- checks: what compiled code indexes without bounds checks lies inside its arrays --
# The kernels above read and write ``dst[pos]`` for every position a descriptor or an
# index array gives, unchecked.  So every descriptor and index array is checked once,
# where it is made (``ops/shape.py``'s views, the shape family's recorder, a tape file
# on load: ``FamilyRules.check_entries``), and a wrong one raises ``EntryError`` there.
# The checks take arrays of entries at a time: a tape file of 10^5 entries is checked
# in a few NumPy passes.  Positions are computed in float64: exact below 2**53, and any
# larger one lies outside every array anyway.
MAX_NDIM = 64           # NumPy's limit


def refuse(ok, es, message):
    """Raise EntryError for the first entry ``es[i]`` whose ``ok[i]`` is False, with
    ``message(i)``."""
    if not ok.all():
        i = int(np.argmin(ok))
        raise EntryError(message(i), entry=int(es[i]))


def descriptor_spans(aux, ats, es):
    """(element count, lowest, highest flat index), float64 arrays, of the descriptors
    at ``aux[ats]`` (of entries ``es``); EntryError when one is malformed."""
    ats = np.asarray(ats, np.int64)
    size = len(aux)
    refuse((ats >= 0) & (ats + 2 <= size), es, lambda i: "a descriptor at word %d of %d" % (ats[i], size))
    if not ats.size:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    nd = aux[ats]
    refuse((nd >= 0) & (nd <= MAX_NDIM) & (ats + 2 + 2 * nd <= size), es,
           lambda i: "a descriptor of %d dimensions at word %d of %d" % (nd[i], ats[i], size))
    count = np.ones(ats.size)
    lo = aux[ats + 1].astype(np.float64)
    hi = lo.copy()
    for d in range(int(nd.max())):
        has = nd > d
        n = np.where(has, aux[np.where(has, ats + 2 + d, 0)], 1).astype(np.float64)
        st = np.where(has, aux[np.where(has, ats + 2 + nd + d, 0)], 0).astype(np.float64)
        refuse(n >= 0, es, lambda i: "a descriptor with a dimension of size %d" % n[i])
        count *= n
        reach = (n - 1) * st
        hi += np.maximum(reach, 0.0)
        lo += np.minimum(reach, 0.0)
    return count, lo, hi


def check_descriptors(aux, ats, bases, counts, es, what="a view"):
    """Raise EntryError unless each descriptor at ``aux[ats]`` reaches only elements
    ``0 .. bases - 1`` and has ``counts`` elements (None: any number)."""
    count, lo, hi = descriptor_spans(aux, ats, es)
    if counts is not None:
        counts = np.broadcast_to(counts, count.shape)
        refuse(count == counts, es, lambda i: "%s's descriptor has %d elements where %d are expected"
               % (what, count[i], counts[i]))
    bases = np.broadcast_to(bases, count.shape)
    refuse((count == 0) | ((lo >= 0) & (hi < bases)), es,
           lambda i: "%s's descriptor reaches elements %d to %d of an array of %d" % (what, lo[i], hi[i], bases[i]))
    return count


def check_descriptor(aux, at, base_size, count=None, what="a view"):
    """``check_descriptors`` of one descriptor (a view made while recording); returns
    its number of elements."""
    return int(check_descriptors(np.asarray(aux, np.int64), [at], [base_size], None if count is None else [count],
                                 [-1], what)[0])


def check_indices(idx, size, what="an index"):
    """Raise EntryError unless every element of the integer array ``idx`` is in ``0 .. size - 1``."""
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise EntryError("%s reaches elements %d to %d of an array of %d" % (what, int(idx.min()), int(idx.max()), size))


def aux_words(aux, at, count, what="an entry"):
    """``aux[at:at + count]``, EntryError when it lies outside ``aux``."""
    if count < 0 or not 0 <= at or at + count > len(aux):
        raise EntryError("%s's %d parameter words at word %d lie outside the %d words" % (what, count, at, len(aux)))
    return aux[at:at + count]
