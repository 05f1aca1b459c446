"""Loops over index spaces: what the programs generated for one tape are planned with.

Two generators write a Numba program for one tape: ``replay/fuse.py`` (a recorded
tape's values and adjoints, fused into loop nests) and ``autograd/tangent_program.py``
(forward over reverse: tangents, adjoints and their tangents).  Each writes only its
loop bodies; the planning they share is here:

- ``Views``: every view of a tape (a reshape, a strided view, a gather) as its base
  slot and the base's element at each of its elements, views of views chased to the
  base; ``affine`` says whether such an index map is an offset and strides over a
  loop's shape, and ``index`` writes one as an expression of the loop's indices.
- ``nest``: the loop nest over a shape around the lines of one iteration.
- ``ShiftedSums``: additions into one array at the elements ``lo + i .. hi + i`` of
  iteration ``i`` (``x[:-1]`` and ``x[1:]``), carried in locals from one iteration to
  the next instead of adding to memory that the next iteration adds to again.
- ``load``: a program's module, written under the hash of its text where the
  kernels are and compiled by Numba with its disk cache (a later process with the
  same tape loads the machine code); ``in_background`` and ``gil_handed_back``: the
  compile in a thread beside the one that goes on without it.
"""
import contextlib
import hashlib
import os
import sys
import threading

import numpy as np

from ..core.registry import BINARY, BINARY2, UNARY, UNARY2
from ..ops import elementwise as _ew

# the elementwise rows by family, as both generators read an entry's opcode
ELEMENTWISE = {UNARY: _ew.UNARY_OPS, UNARY2: _ew.UNARY_OPS_2, BINARY: _ew.BINARY_OPS, BINARY2: _ew.BINARY_OPS_2}


# -- index maps -----------------------------------------------------------------------
class Views:
    """The views of one tape as index maps into their bases: ``of[s]`` is (base slot,
    flat index into the base of each of ``s``'s elements).  ``size(s)``: slot ``s``'s
    number of elements."""
    __slots__ = ("of", "size")

    def __init__(self, size):
        self.of, self.size = {}, size

    def chase(self, s):
        """(base slot, the base's element at each of ``s``'s elements); a slot that is no view is its own base."""
        got = self.of.get(s)
        return got if got is not None else (s, np.arange(self.size(s), dtype=np.int64))

    def add(self, s, a, m=None):
        """Slot ``s`` views slot ``a``: its element ``k`` is ``a``'s element ``m[k]`` (``m`` None: ``k``)."""
        b, mb = self.chase(a)
        self.of[s] = (b, mb if m is None else mb[m])


def affine(m, shape):
    """``(offset, strides)`` when the flat indices ``m`` over the C-ordered ``shape``
    are an affine function of its multi-index, else None."""
    if m.size == 0:
        return 0, (0,) * len(shape)         # (an empty loop reads nothing)
    off = int(m.reshape(-1)[0])
    strides, grid = [], m.reshape(shape)
    for d, n in enumerate(shape):
        if n == 1:
            strides.append(0)
            continue
        at = [0] * len(shape)
        at[d] = 1
        strides.append(int(grid[tuple(at)]) - off)
    expect = np.full(shape, off, np.int64)
    for d, st in enumerate(strides):
        if st:
            sh = [1] * len(shape)
            sh[d] = shape[d]
            expect = expect + (np.arange(shape[d], dtype=np.int64) * st).reshape(sh)
    return (off, tuple(strides)) if np.array_equal(expect, grid) else None


def index(off, strides, names):
    """The flat index ``off + sum(names[d] * strides[d])`` as source (``names``: the loop's indices)."""
    terms = [str(off)] if off else []
    terms += ["%s * %d" % (v, st) if st != 1 else v for v, st in zip(names, strides) if st]
    return " + ".join(terms) or "0"


def loop_names(nd):
    """The indices of a nest of ``nd`` loops, outermost first."""
    return tuple("i%d" % d for d in range(nd))


def c_strides(shape):
    """The strides (in elements) of a C-ordered array of ``shape``, 0 along an axis of one."""
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc if n != 1 else 0)
        acc *= n
    return tuple(reversed(st))


# -- loop nests -----------------------------------------------------------------------
IND = "    "


def nest(shape, body, pre=(), post=(), names=None, depth=1):
    """The lines of the loop nest over ``shape`` (indices ``names``, default ``i0, i1...``)
    around ``body`` (the lines of one iteration), with ``pre`` and ``post`` before and
    after the innermost loop, at ``depth`` levels of indentation."""
    nd = len(shape)
    names = names or loop_names(nd)
    if nd == 0:
        return [IND * depth + ln for ln in list(pre) + list(body) + list(post)]
    lines = [IND * (depth + d) + "for %s in range(%d):" % (names[d], shape[d]) for d in range(nd - 1)]
    inner = IND * (depth + nd - 1)
    lines += [inner + ln for ln in pre]
    lines.append(inner + "for %s in range(%d):" % (names[-1], shape[-1]))
    return lines + [inner + IND + ln for ln in body] + [inner + ln for ln in post]


# -- the shifted sums -----------------------------------------------------------------
class ShiftedSums:
    """Additions into arrays at the element ``shift`` steps after iteration ``i``'s (for
    ``x[:-1]`` and ``x[1:]`` read at ``i``: shifts 0 and 1), each in a local of the
    iteration (``u<array>_<shift>_<k>``, each name assigned once: Numba's SSA pass is
    then quick).  An array added to at shifts ``lo..hi`` has its element at ``lo``
    complete at the end of iteration ``i``: written then; the sums at ``lo + 1 .. hi``
    wait in locals carried to the next iteration (``k<array>_<d>``), the last of them
    written after the innermost loop.  Added in memory instead, each element would
    depend on the previous iteration's store, which keeps LLVM from vectorizing the
    loop; a buffer per shift would cost a pass each to zero and to add in.

    ``index(array, shift, last)``: the index expression of ``array``'s element
    ``shift`` steps after the iteration's (``last`` None), or at the innermost index
    ``last``.  ``in_order``: each element's sum starts from the array's value and
    takes the additions one by one in the order they come, bitwise one ``+=`` per
    addition (nothing else in the loop may touch the array); else the additions of
    one iteration are summed first and their sum added into the array (which other
    additions in the loop may share)."""

    def __init__(self, index, in_order):
        self.index, self.in_order = index, in_order
        self.sums = {}          # array -> {shift: [the name of its sum so far, additions]}

    def add(self, array, shift, term):
        """The line that adds ``term`` into ``array`` ``shift`` steps after the iteration's element."""
        got = self.sums.setdefault(array, {}).setdefault(shift, [None, 0])
        got[1] += 1
        name = "u%s_%d_%d" % (array, shift, got[1])
        prev = got[0] if got[0] is not None else ("w%s_%d" % (array, shift) if self.in_order else None)
        got[0] = name
        return "%s = %s" % (name, term if prev is None else "%s + %s" % (prev, term))

    def carry(self, n):
        """The lines that carry the sums of a loop of ``n`` iterations: (before the
        innermost loop, at the start of an iteration, at its end, after the loop)."""
        pre, start, end, post = [], [], [], []
        for array, sums in self.sums.items():
            lo, hi = min(sums), max(sums)
            carry = ["k%s_%d" % (array, d) for d in range(hi - lo)]
            if n == 0:          # (no iteration: nothing to read or write, every name defined)
                pre += ["%s = 0.0" % c for c in carry]
                pre += ["w%s_%d = 0.0" % (array, s) for s in sums if self.in_order]
                continue
            at = self.index
            if self.in_order:
                pre += ["%s = %s[%s]" % (c, array, at(array, lo + d, 0)) for d, c in enumerate(carry)]
                now = {}
                for s in range(lo, hi + 1):
                    before = carry[s - lo] if s < hi else "%s[%s]" % (array, at(array, hi, None))
                    if s in sums:
                        start.append("w%s_%d = %s" % (array, s, before))
                        now[s] = sums[s][0]
                    else:
                        now[s] = before
                end.append("%s[%s] = %s" % (array, at(array, lo, None), now[lo]))
                end += ["%s = %s" % (c, now[lo + d + 1]) for d, c in enumerate(carry)]
                post += ["%s[%s] = %s" % (array, at(array, lo + d, n), c) for d, c in enumerate(carry)]
                continue
            pre += ["%s = 0.0" % c for c in carry]
            done = " + ".join(t for t in (carry[0] if carry else None, sums[lo][0]) if t is not None)
            end.append("%s[%s] += %s" % (array, at(array, lo, None), done))
            for d, c in enumerate(carry):
                nxt, own = carry[d + 1] if d + 1 < len(carry) else None, sums.get(lo + d + 1)
                end.append("%s = %s" % (c, " + ".join(t for t in (nxt, own and own[0]) if t) or "0.0"))
                post.append("%s[%s] += %s" % (array, at(array, lo + d, n), c))
        return pre, start, end, post


# -- compiling ------------------------------------------------------------------------
# TAPEGRAD_BOUNDSCHECK_PROGRAMS=1: generated programs compile with Numba's bounds checks
# (an index outside its array raises IndexError instead of touching memory outside it).
# The test suite sets it, so every program a test generates is checked where it runs;
# their source differs by this flag, so checked and unchecked programs are cached apart.
BOUNDSCHECK = os.environ.get("TAPEGRAD_BOUNDSCHECK_PROGRAMS", "") == "1"


def decorator():
    """The decorator line of a generated program's compiled functions."""
    return '@jit(cache=True, error_model="numpy"%s)' % (", boundscheck=True" if BOUNDSCHECK else "")


def load(prefix, source):
    """The module of a program's ``source`` (its header included), written once as
    ``<prefix>_<hash of the text>.py`` where the kernels are and imported once per process."""
    from . import codegen
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    return codegen.load_tape_module(prefix, digest, source)


def from_cache(dispatcher):
    """Whether Numba loaded ``dispatcher``'s last compiled signature from its disk cache."""
    stats = getattr(dispatcher, "stats", None)
    return bool(stats is not None and stats.cache_hits)


def in_background(name, build):
    """Run ``build()`` in a daemon thread called ``name`` (what waits for it finds it by name)."""
    thread = threading.Thread(target=build, name=name, daemon=True)
    thread.start()
    return thread


SWITCH_S = 0.0005           # the interpreter's switch interval while a build runs beside the replays
_SWITCHING = [0, None]      # (builds running, the interval before the first)
_SWITCHING_LOCK = threading.Lock()


@contextlib.contextmanager
def gil_handed_back():
    """A background build's span, with the interpreter's switch interval shortened to
    ``SWITCH_S``: Numba's compiler is Python and holds the GIL, and a thread that
    released it in a NumPy call waits up to the interval (5 ms) to get it back, at each
    call (a replay of many NumPy calls took twice as long).  The interval before is put
    back when the last build ends."""
    with _SWITCHING_LOCK:
        if _SWITCHING[0] == 0:
            _SWITCHING[1] = sys.getswitchinterval()
            sys.setswitchinterval(min(_SWITCHING[1], SWITCH_S))
        _SWITCHING[0] += 1
    try:
        yield
    finally:
        with _SWITCHING_LOCK:
            _SWITCHING[0] -= 1
            if _SWITCHING[0] == 0:
                sys.setswitchinterval(_SWITCHING[1])
