"""Backward over one or several tapes.

The walk over the tapes is ``walk.over_tapes``; per tape (``_sweep_tape``):
  1. ``walk.mark``: which entries the roots reach (compiled; on a small tape, the
     last result for the same structure, ``_bookkeeping``);
  2. gather the values those entries saved into one arena (large arrays by address);
  3. seed the roots' adjoints, ``run`` the compiled sweep (pausing only for hooks,
     ``walk.at_stop``);
  4. ``walk.hand_off`` the adjoints of leaves to ``.grad``, of EXT entries to their
     older tape, and ``walk.free`` what a non-retained backward consumed.

Until the compiled kernels are loaded, small backward passes are interpreted
instead (``_interpret``): the same walk in NumPy, through the rules the
differentiable reverse uses.  Importing Numba and loading the cached kernels
costs over a second, and compiling them the first time a minute: a script that
takes a few gradients never pays either.  Interpreting stops, and the kernels are
loaded, once interpreting has cost as much time as loading them would; when they
are not in Numba's disk cache yet, they are compiled by a background process
(``tapegrad._background``) and interpreting goes on until they are ready.
"""
import os
import time
import warnings

import numpy as np

from .. import _background
from .. import _jit
from ..core import quiet as _quiet
from ..core import tape as _tp
from ..kernels import sweep as K
from ..core.tensor import Tensor
from . import differentiable, walk
from .walk import free as _free, mark     # (the names the replay-only code of _sweep_tape calls)
from .grad_mode import set_grad_enabled
from ..core.registry import FAMILY_NAMES, FAMILY_RULES, FAMILY_SHIFT, HOST, OP_NAMES

HOST_BIT = 1 << HOST

BIG = 2048              # slots with at least this many elements are passed by address, not copied

_EMPTY_F = np.zeros(1)


_addr = K.address


class _Slots:
    """Locators of flat float64 arrays: ``loc[s] >= 0`` an offset into ``arena``,
    ``-2`` an array of its own (``big[s]``, passed to the sweep by address).
    A backward's adjoints are the adjoint store ``walk`` hands on (``view``, ``big``,
    and below how array adjoints go to targets, hooks and retain_grad)."""
    __slots__ = ("loc", "ptr", "arena", "big")

    def __init__(self, loc, arena):
        self.loc = loc
        self.ptr = np.zeros(len(loc), np.int64)
        self.arena = arena
        self.big = {}

    def add_big(self, s, a):
        self.big[s] = a
        self.ptr[s] = _addr(a)

    def view(self, s, size):
        l = self.loc[s]
        if l >= 0:
            return self.arena[l:l + size]
        if l == -2:
            return self.big[s]
        return None

    @staticmethod
    def target(g, t):
        if t._tape is None and t._extra is not None and t._extra.hooks:
            return walk.hooks_on_array(t._extra.hooks, g, t.shape, t.dtype)._data
        return g.reshape(t.shape).astype(t.dtype)

    @staticmethod
    def hooked(hooks, view, shape, dtype):
        view[:] = walk.hooks_on_array(hooks, view, shape, dtype)._data.reshape(-1)     # the sweep reads it in place
        return view

    @staticmethod
    def retain(t, view):
        g = view.reshape(t.shape).astype(t.dtype)
        x = t._extras()
        # out of place, as PyTorch's retain_grad: an earlier y.grad keeps its value
        x.grad = Tensor._wrap(g) if x.grad is None else Tensor._wrap(x.grad._data + g)


# A backward's bookkeeping on a small tape (which entries it processes, where values
# and adjoints live) depends on the tape's structure, roots and targets alone while
# nothing of the tape was freed or changed in place: it is kept per structure (a
# loop's next backward finds it), as the tangent programs are.
BOOK_ENTRIES = 64       # tapes of up to this many entries ...
BOOK_AUX = 512          # ... and auxiliary words
BOOK_MAX = 256          # structures kept (then forgotten all at once)
_BOOKS = {}


def _bookkeeping(T, ints, sizes, slot_seeds, tgt_ids, ext_leads):
    """``walk.mark``'s results, and the layout of the values and adjoints
    (``kernels.sweep.layout``), of this backward: (process, reach, needval, target
    slots, families, layout, host: the processed host entries, or None without any).
    The arrays may be shared: read them only."""
    key = targets = None
    if T.n <= BOOK_ENTRIES and T.aux_len <= BOOK_AUX and T.intact():
        targets = walk.target_slots(T, tgt_ids, ext_leads)
        key = (ints[:, :_tp.VERSION].tobytes(), T.aux_array().tobytes(), tuple(slot_seeds), tuple(targets[0]),
               tgt_ids is not None, ext_leads, targets[2])
        got = _BOOKS.get(key)
        if got is not None:
            process, reach, needval, fams, lay, host = got
            return process, reach, needval, targets[0], fams, lay, host
    process, reach, needval, tslots, fams = mark(T, ints, slot_seeds, tgt_ids, ext_leads, targets)
    lay = K.layout(ints, sizes, needval, reach, BIG)
    host = _host_entries(ints, process) if fams & HOST_BIT else None
    if key is not None:
        if len(_BOOKS) >= BOOK_MAX:
            _BOOKS.clear()
        _BOOKS[key] = (process, reach, needval, fams, lay, host)
    return process, reach, needval, tslots, fams, lay, host


def _host_entries(ints, process):
    """1 at the processed entries of host ops (their reverse runs in Python), else 0."""
    return process * ((ints[:, _tp.OP] >> FAMILY_SHIFT) == HOST)


def values(T, flts, lay):
    """The saved values of tape ``T`` as the sweep reads them, laid out by ``lay``."""
    vloc, vsmall, vbig = lay[0], lay[1], lay[2]
    vals = T.vals
    if vsmall.size:
        parts = [flts[:, _tp.VAL]] + [vals[s] for s in vsmall.tolist()]
        if any(v is None for v in parts):   # (a value freed under an entry that reads it: never garbage)
            raise RuntimeError(walk.SECOND_TIME)
        arena = np.concatenate(parts, axis=None, dtype=np.float64, casting="unsafe")
    else:
        arena = np.array(flts[:, _tp.VAL])
    V = _Slots(vloc, arena)
    for s in vbig.tolist():
        v = vals[s]
        if v is None:
            raise RuntimeError(walk.SECOND_TIME)
        if v.dtype != np.float64 or not v.flags.c_contiguous:
            v = np.ascontiguousarray(v, dtype=np.float64)
        V.add_big(s, v.reshape(-1))
    return V


# The big adjoints of earlier backward passes, by (size, k-th of that size in its
# backward): taken again where nothing holds them (``take_spare``: not a leaf's .grad,
# a returned gradient, a hook's argument).  An array of a few MB is otherwise mapped
# fresh from the OS and page-faulted in at every backward (a tenth of a small
# transformer's training step).  Cleared past SPARE_BYTES.
_SPARE = {}
_SPARE_BYTES = [0]
SPARE_BYTES = 1 << 30


def adjoints(sizes, lay):
    """Adjoint storage laid out by ``lay`` (the big ones maybe an earlier backward's:
    the sweep zeroes an adjoint only where it must add)."""
    aloc, asize, abig = lay[3], lay[4], lay[5]
    A = _Slots(aloc, np.zeros(asize))
    big, ptr = A.big, A.ptr
    nth = {}
    for s in abig.tolist():
        n = int(sizes[s])
        key = (n, nth.get(n, 0))
        nth[n] = key[1] + 1
        if key not in _SPARE:
            _SPARE_BYTES[0] += 8 * n
        a = big[s] = _SPARE[key] = _tp.take_spare(_SPARE, key, np.empty, n)
        ptr[s] = _addr(a)
    if _SPARE_BYTES[0] > SPARE_BYTES:
        _SPARE.clear()
        _SPARE_BYTES[0] = 0
    return A


PROFILERS = []          # active tg.profile() blocks (tapegrad/profile.py); empty: no cost but this check


def run_backward(seeds, retain_graph, targets=None, accumulate=True):
    # (a reverse rule's inf and nan without NumPy's warnings, as PyTorch's: core/quiet.py)
    token = _quiet.ignoring(_quiet.IGNORE)
    try:
        if PROFILERS:
            return PROFILERS[-1].backward(_run_backward, seeds, retain_graph, targets, accumulate)
        return _run_backward(seeds, retain_graph, targets, accumulate)
    finally:
        _quiet.restore(token)


# "auto": interpret small backward passes until the kernels are worth loading;
# "always": interpret whatever the size (tests); "never": always the compiled sweep
INTERPRET = [os.environ.get("TAPEGRAD_INTERPRET", "auto")]
_background.INTERPRET = INTERPRET     # (read by its deferring(): the engine's mode, one list)
if INTERPRET[0] not in ("auto", "always", "never"):
    warnings.warn("TAPEGRAD_INTERPRET=%r is not one of auto, always, never: using auto" % INTERPRET[0],
                  RuntimeWarning, stacklevel=2)
    INTERPRET[0] = "auto"
INTERPRET_BUDGET_S = 1.0        # about what importing Numba and loading the cached kernels costs
INTERPRET_MAX_ENTRIES = 4096    # longer tapes: the kernels at once
_interpreted_s = [0.0]


def _interpretable(seeds):
    """(Called only while the kernels are not loaded, or in "always" mode.)"""
    mode = INTERPRET[0]
    if mode == "always":
        return True
    if mode == "never" or _tp.state().rec is not None:
        return False
    if (_interpreted_s[0] < INTERPRET_BUDGET_S
            and sum({id(t._tape): t._tape.n for t, _ in seeds}.values()) <= INTERPRET_MAX_ENTRIES):
        return True
    # the kernels are worth having: interpret on while they are compiled, or loaded, in the background
    return not _background.request()


def _interpret(seeds, retain_graph, targets, accumulate):
    """``_run_backward`` by the differentiable reverse with grad mode off."""
    t0 = time.perf_counter()
    try:
        # (copies, as the sweep's arena: a hook may change its gradient in place)
        flat = [(t, Tensor._wrap(np.array(g, np.float64).reshape(-1))) for t, g in seeds]
        res = differentiable.run_backward(flat, retain_graph, targets, accumulate, record=False)
    finally:
        _interpreted_s[0] += time.perf_counter() - t0
    if targets is None:
        return None
    return {k: g._data for k, g in res.items()}


def _run_backward(seeds, retain_graph, targets=None, accumulate=True):
    """Differentiate.  ``seeds``: list of (non-leaf tensor, float64 seed array).
    ``targets``: tensors whose gradient to return (``grad``/``inputs=``), or None
    for all leaves.  Returns {id(target): ndarray or None} when targets are given."""
    if (not _jit.READY[0] or INTERPRET[0] == "always") and _interpretable(seeds):
        return _interpret(seeds, retain_graph, targets, accumulate)
    _tp.rotate()        # anything recorded from here on (hooks) goes to a new tape
    return walk.over_tapes(seeds, _sweep_tape, walk.accumulate_array, retain_graph, targets, accumulate)


def _sweep_tape(T, slot_seeds, retain, tgt_ids, results, accumulate, pending, ext_leads, leaf_grads):
    plan = T.plan       # how a replayed tape is swept (tapegrad.replay.replayed); None on a recorded tape
    if plan is not None and plan.sweep_own(T, slot_seeds, retain, tgt_ids, accumulate, pending, leaf_grads):
        return
    n = T.n
    ints, flts = T.arrays()
    sizes = ints[:, _tp.SIZE]
    if plan is None:
        process, reach, needval, tslots, fams, lay, host = _bookkeeping(T, ints, sizes, slot_seeds, tgt_ids,
                                                                         ext_leads)
        hi = max(slot_seeds)
        V, A, touched = values(T, flts, lay), adjoints(sizes, lay), lay[6].copy()
    else:
        marks, process, reach, needval, tslots, fams, hi, V, A, touched = plan.prepare(
            T, ints, flts, sizes, slot_seeds, tgt_ids, ext_leads)
        host = _host_entries(ints, process) if fams & HOST_BIT else None
    for s, gs in slot_seeds.items():
        view = A.view(s, sizes[s])
        view[:] = gs[0].reshape(-1)
        touched[s] = 1
        for g in gs[1:]:
            view += g.reshape(-1)

    # slots where control returns to Python: hooks and retain_grad on non-leaves, and
    # the entries of host ops (their reverse runs in Python: ``_host_reverse``)
    fams &= ~HOST_BIT
    if T.hooks or T.retained:
        stops = np.zeros(n, np.uint8) if host is None else host.copy()
        for s, h in T.hooks.items():
            if h[0]:
                stops[s] = 1
        for s in T.retained:
            stops[s] = 1
    else:
        stops = walk.zeros_u8(n) if host is None else host
    aux = walk.aux_array(T)
    if host is not None and not fams:
        # host entries only: the whole sweep is Python's (no compiled variant needed)
        ctx = None
        for e in np.flatnonzero(stops & reach)[::-1].tolist():
            if e > hi:
                continue
            walk.at_stop(T, e, A.view(e, sizes[e]), A)
            if host[e]:
                ctx = _host_reverse(T, e, ints, flts, reach, A, touched, sizes, ctx)
    else:
        run = K.run_for(fams)       # compiled for the families this backward uses
        e = run(ints, flts, sizes, process, reach, stops, touched, V.loc, V.ptr, V.arena, A.loc, A.ptr,
                A.arena, aux, hi, -1, K.ENTRIES)
        ctx = None
        only_host_stops = not (T.hooks or T.retained)
        while e >= 0:
            walk.at_stop(T, e, A.view(e, sizes[e]), A)
            if host is not None and host[e]:
                ctx = _host_reverse(T, e, ints, flts, reach, A, touched, sizes, ctx)
            if only_host_stops and not process[:e].any():
                break           # (nothing left to sweep below a host entry: no call to resume)
            e = run(ints, flts, sizes, process, reach, stops, touched, V.loc, V.ptr, V.arena, A.loc, A.ptr,
                    A.arena, aux, e, e, K.ENTRIES)
        if e < -1:
            raise missing_kernel(ints, -2 - e)
    for s in A.big:
        if not touched[s]:          # reached, but nothing was written (a host entry whose adjoint was never written)
            A.big[s][:] = 0.0

    walk.hand_off(T, reach, tslots, sizes, A, tgt_ids, results, accumulate, pending, ext_leads, leaf_grads)

    if not retain:
        if plan is None:
            _free(T, ints, process, needval)
        else:
            plan.free(T, marks, ints, process, needval)
    del ints, flts, sizes


def missing_kernel(ints, e):
    """The error for entry ``e``, whose family kernel has no branch for its op (the
    loud default of ``reduce_reverse``, ``shape_reverse``, ``linalg_reverse``)."""
    code = int(ints[e, _tp.OP])
    return RuntimeError("tapegrad: the compiled reverse has no branch for the op %r (opcode %d, kernel %d of the %s "
                        "family's kernel, entry %d): add it to the family kernel (docs/adding-an-op.md)"
                        % (OP_NAMES[code], code, code & K.INDEX_MASK, FAMILY_NAMES[code >> FAMILY_SHIFT], e))


def _host_reverse(T, e, ints, flts, reach, A, touched, sizes, ctx):
    """At the stop of host entry ``e``: its input adjoints by the op's reverse on arrays,
    or its differentiable one (``ops/host.py``) with grad mode off, added into the
    adjoint store ``A`` (an adjoint ``touched`` 0 was never written: overwritten,
    then marked written, as the sweep's ``fresh`` bookkeeping expects).  Returns the
    context of slot values, made at the first host entry of the backward."""
    if not touched[e]:
        return ctx          # no gradient reached it: nothing to add
    row = ints[e].tolist()
    k = row[_tp.OP] & K.INDEX_MASK
    rules = FAMILY_RULES[HOST]
    g = A.view(e, sizes[e])
    parts = rules.array_reverse(T, e, k, row, g)
    fresh = parts is not None       # (new arrays: one may become the adjoint itself)
    if parts is None:
        if ctx is None:
            ctx = differentiable._Context(T, ints, flts, reach)
        with set_grad_enabled(False):
            parts = [(i, r._data) for i, r in rules.differentiable_reverse(
                ctx, e, k, row, flts[e, _tp.F0], flts[e, _tp.F1], Tensor._const(g))]
    for i, r in parts:
        view = A.view(i, sizes[i])
        if view is None:
            continue
        d = r.reshape(-1)
        if touched[i]:
            view += d
        else:
            if fresh and i in A.big and d.dtype == np.float64 and d.flags.c_contiguous and d.size == view.size:
                A.add_big(i, d)
            else:
                view[:] = d
            touched[i] = 1
    return ctx
