"""The tape of one replay (``ReplayedTape``) and how backward sweeps it (its ``plan``).

``Recording.tape_for`` makes a ``ReplayedTape`` over the replay's entries: sealed
from the start, its entry views made once (the buffer never grows), and, for a
compiled replay over one arena, every value's address (``vaddr``) and what holds
those values (``arena``).  Its ``plan`` is shared by the replays of one recording:

* ``NumbersPlan``: every value is one number in its entry; backward runs the rules
  on numbers (``kernels.sweep.sweep_scalar``) over one adjoint per entry, reused
  from the last such backward when nothing holds it;
* ``ArraysPlan``: every replay of a recording marks and lays out the same way, so
  the marks and the layout are kept per set of roots, with the adjoint arrays of
  the last backward, reused when nothing holds them any more.

The engine (``autograd/engine.py``) knows none of this: it tests ``T.plan`` (None
on a tape recorded eagerly) and calls these methods.
"""
import threading

import numpy as np

from ..core import tape as _tp
from ..autograd import engine as _engine
from ..kernels import sweep as K


class ReplayedTape(_tp.Tape):
    """A sealed tape over the packed entries ``buf`` of one replay (``views``: its
    ``arrays()``), made without ``Tape.__init__``'s buffer and bookkeeping."""
    __slots__ = ("plan", "views", "vaddr", "arena")

    def __init__(self, buf, n, views, plan):
        self.id = next(_tp._ids)
        self.owner = threading.get_ident()
        self.buf, self.n, self.cap, self.limit, self.sealed = buf, n, n, 0, True
        self.elements = self.counted = 0
        self.vals = self.versions = None        # (set by tape_for)
        self.leaves, self.ext, self.imports, self.hooks, self.retained = {}, {}, {}, {}, {}
        self.freed = _tp._NO_FREED
        self.aux, self.aux_len = [], 0
        self.inplace_mark = _tp.inplace_counter[0]
        self.sources = self.nodes = None
        self.plan = plan            # how backward sweeps it (below)
        self.views = views          # (ints, flts) views of the entries
        self.vaddr = None           # a compiled replay's tape: (locators, address of every slot's value)
        self.arena = None           # ... and what holds those values
        _tp._LIVE.add(self)

    def arrays(self):
        return self.views


class _Plan:
    """What both plans do alike: an ordinary sweep, nothing kept (a tape of numbers
    takes it only for what the sweep on numbers does not do), and freeing what a
    non-retained backward consumed."""
    __slots__ = ()

    def prepare(self, T, ints, flts, sizes, slot_seeds, tgt_ids, ext_leads):
        """What ``engine._sweep_tape`` needs before it runs the sweep: (this
        backward's entry of ``ArraysPlan.marks`` or None, process, reach, needval,
        target slots, families, highest root, value storage, adjoint storage,
        touched)."""
        process, reach, needval, tslots, fams = _engine.mark(T, ints, slot_seeds, tgt_ids, ext_leads)
        lay = K.layout(ints, sizes, needval, reach, _engine.BIG)
        return (None, process, reach, needval, tslots, fams, max(slot_seeds), _values(T, flts, lay),
                _engine.adjoints(sizes, lay), lay[6].copy())

    def free(self, T, marks, ints, process, needval):
        """(``marks``: this backward's entry of ``ArraysPlan.marks``, or None.)"""
        memo = marks[4] if marks is not None else None
        if memo is not None and memo[1]:
            # a replay whose every value this backward consumed (known from the first)
            T.freed = memo[0].copy()
            T.vals = [None] * T.n
            T.vaddr = T.arena = None
            return
        if not _engine._free(T, ints, process, needval):
            T.vaddr = T.arena = None
        if marks is not None and memo is None:
            marks[4] = (T.freed.copy(), all(v is None for v in T.vals))


class ArraysPlan(_Plan):
    """How backward sweeps the replayed tapes of arrays of one recording: ``marks``
    {roots: [process, reach, needval, layout, what a non-retained backward frees
    (set by the first), spare adjoints, highest root, families]}."""
    __slots__ = ("marks",)

    def __init__(self):
        self.marks = {}

    def sweep_own(self, T, slot_seeds, retain, tgt_ids, accumulate, pending, leaf_grads):
        """A plan's own sweep of ``T`` (True when it ran), before the ordinary one: none here."""
        return False

    def prepare(self, T, ints, flts, sizes, slot_seeds, tgt_ids, ext_leads):
        """(As ``_Plan.prepare``, with the marks and layout of earlier replays.)"""
        if tgt_ids is None and not T.hooks and not T.retained and T.intact():
            # every replay of a recording marks and lays out the same way
            key = tuple(slot_seeds)
            marks = self.marks.get(key)
            if marks is None:
                process, reach, needval, tslots, fams = _engine.mark(T, ints, slot_seeds, tgt_ids, ext_leads)
                marks = self.marks[key] = [process, reach, needval,
                                           K.layout(ints, sizes, needval, reach, _engine.BIG), None, {}, max(key),
                                           fams]
            process, reach, needval, lay, _, spare, hi, fams = marks
            V = _values(T, flts, lay)
            A = _spare_adjoints(lay, sizes, spare)
            return marks, process, reach, needval, {}, fams, hi, V, A, lay[6].copy()
        return _Plan.prepare(self, T, ints, flts, sizes, slot_seeds, tgt_ids, ext_leads)


class NumbersPlan(_Plan):
    """How backward sweeps the replayed tapes of single numbers of one recording:
    on numbers when it can (one root, no hooks or targets), else as any tape."""
    __slots__ = ("spare",)

    def __init__(self):
        self.spare = {}         # "numbers": (adjoints, reach marks) of the last sweep on numbers

    def sweep_own(self, T, slot_seeds, retain, tgt_ids, accumulate, pending, leaf_grads):
        """Sweep ``T`` on numbers (``sweep_scalar``) and return True, or False when
        it needs the ordinary sweep."""
        if not (tgt_ids is None and accumulate and len(slot_seeds) == 1 and not T.hooks and not T.retained
                and T.intact()):
            return False
        n = T.n
        ints, flts = T.views
        # the last sweep's adjoints and reach marks when nothing holds them (``reach``
        # becomes the tape's ``freed``: free once that tape is gone; one pair, one
        # check).  No large
        # allocation: after other code freed many small blocks, the first one pays
        # for glibc consolidating them all (hundreds of us after a PyTorch step).
        adj, reach = self.spare["numbers"] = _tp.take_spare(self.spare, "numbers", _new_numbers, n)
        adj.fill(0.0)
        reach.fill(0)
        (s, gs), = slot_seeds.items()
        for g in gs:
            adj[s] += g.reshape(-1)[0]
        reach[s] = 1
        K.sweep_scalar(ints, flts, adj, reach, s)
        for s, leaf in T.leaves.items():
            if reach[s]:
                leaf_grads.append((leaf, adj[s:s + 1].copy(), True))
        for s, (older, slot) in T.ext.items():
            if reach[s]:
                pending.setdefault(older, {}).setdefault(slot, []).append(adj[s:s + 1].copy())
        if not retain:
            T.freed = reach         # a second backward through what this one used: PyTorch's error
        return True



_NO_ARENA = np.zeros(1)     # (the sweep reads a compiled replay's values by address only)


def _values(T, flts, lay):
    """The value storage of a backward of a replayed tape: a compiled replay's
    values are all in place, read by address."""
    if T.vaddr is None:
        return _engine.values(T, flts, lay)
    V = _engine._Slots.__new__(_engine._Slots)
    V.loc, V.ptr = T.vaddr
    V.arena, V.big = _NO_ARENA, None
    return V


def _spare_adjoints(lay, sizes, spare):
    """The adjoint storage of a backward by a plan: last time's adjoint arrays
    where nothing holds them (``take_spare``): the small adjoints' arena, the big
    adjoints' addresses with the dict of their arrays (one pair, so a thread never
    gets addresses of another's arrays), and each big adjoint (a leaf's becomes
    its .grad: held)."""
    aloc, asize, abig = lay[3], lay[4], lay[5]
    a = _tp.take_spare(spare, "arena", np.empty, asize)
    a.fill(0.0)
    spare["arena"] = a
    ptr, old = _tp.take_spare(spare, "big", _new_big_adjoints, len(aloc))
    A = _engine._Slots.__new__(_engine._Slots)
    A.loc, A.ptr, A.arena, big = aloc, ptr, a, {}
    A.big = big
    for s in abig.tolist():
        big[s] = _tp.take_spare(old, s, _new_big_adjoint, ptr, s, sizes)
    spare["big"] = (ptr, dict(big))
    return A


def _new_numbers(n):
    return np.empty(n), np.empty(n, np.uint8)


def _new_big_adjoints(n):
    return np.zeros(n, np.int64), {}


def _new_big_adjoint(ptr, s, sizes):
    a = np.empty(int(sizes[s]))
    ptr[s] = K.address(a)
    return a
