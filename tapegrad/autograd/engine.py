"""Backward over one or several tapes.

The whole idea, per tape (``_sweep_tape``):
  1. ``mark``: which entries the roots reach (compiled);
  2. gather the values those entries saved into one arena (large arrays by address);
  3. seed the roots' adjoints, ``run`` the compiled sweep (pausing only for hooks);
  4. hand the adjoints of leaves to ``.grad``, of EXT entries to their older tape,
     and free what a non-retained backward consumed.
Tapes are processed newest first, since a newer tape only ever refers to older ones.

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
from .. import tape as _tp
from ..kernels import sweep as K
from ..ops.registry import CONST, EXT, GRAD_FN_NAMES, LEAF, META_END
from ..tensor import Tensor, _TYPE_NAME

BIG = 2048              # slots with at least this many elements are passed by address, not copied

SECOND_TIME = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
    "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
    "or if you need to access saved tensors after calling backward.")

_EMPTY_I = np.zeros(0, np.int64)


_addr = K.address


class _Slots:
    """Locators of flat float64 arrays: ``loc[s] >= 0`` an offset into ``arena``,
    ``-2`` an array of its own (``big[s]``, passed to the sweep by address)."""
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


def _storage(T, ints, sizes, flts, needval, reach):
    """The value and adjoint storage of one backward (see ``kernels.sweep.layout``)."""
    lay = K.layout(ints, sizes, needval, reach, BIG)
    return values(T, flts, lay), adjoints(sizes, lay), lay[6].copy()


def values(T, flts, lay):
    """The saved values of tape ``T`` as the sweep reads them, laid out by ``lay``."""
    vloc, vsmall, vbig = lay[0], lay[1], lay[2]
    vals = T.vals
    parts = [flts[:, _tp.VAL]]
    if vsmall.size:
        parts += [vals[s] for s in vsmall.tolist()]
    V = _Slots(vloc, np.concatenate(parts, axis=None, dtype=np.float64, casting="unsafe"))
    for s in vbig.tolist():
        v = vals[s]
        if v.dtype != np.float64 or not v.flags.c_contiguous:
            v = np.ascontiguousarray(v, dtype=np.float64)
        V.add_big(s, v.reshape(-1))
    return V


def adjoints(sizes, lay):
    """Fresh adjoint storage laid out by ``lay``."""
    aloc, asize, abig = lay[3], lay[4], lay[5]
    A = _Slots(aloc, np.zeros(asize))
    big, ptr = A.big, A.ptr
    for s in abig.tolist():
        a = big[s] = np.empty(int(sizes[s]))    # zeroed by the sweep only if it must add
        ptr[s] = _addr(a)
    return A


def _version_error(T, s, ints):
    op = ints[s, _tp.OP]
    ver = T.vobj[s]
    arr = T.vals[s]
    if arr is None:     # a single number kept in its entry (a replayed tape): the tensor's shape if known
        leaf = T.leaves.get(s)
        arr = leaf._data if leaf is not None else np.zeros(1)
    desc = "[tapegrad.%s [%s]]" % (_TYPE_NAME.get(arr.dtype, arr.dtype.name), ", ".join(map(str, arr.shape)))
    # PyTorch names the producer when it saved its own output (Exp, Sigmoid), and
    # otherwise the tensor's current grad_fn (CopySlices after y[0] = ...)
    own = op >= META_END and K.SAVES_TABLE[op, 3] & 8
    if op in (LEAF, CONST, EXT) and len(ver) == 1:
        where = ""
    else:
        name = GRAD_FN_NAMES[ver[1] if (len(ver) > 1 and not own) else ints[s, _tp.NAME]]
        if name == "CopySlices":
            name = "torch::autograd::CopySlices"
        where = ", which is output 0 of %s," % (name[:-len("Backward0")] if name.endswith("Backward0") else name)
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "%s%s is at version %d; expected version %d instead. Hint: enable anomaly detection to find the "
        "operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True)."
        % (desc, where, ver[0], T.field(s, _tp.VERSION)))


def _run_hooks(hooks, g, shape, dtype):
    """Apply tensor hooks in registration order; returns the final gradient Tensor.
    They get a copy: a hook may change it in place, and ``g`` may be shared (an
    interpreted backward's adjoints are, see ``differentiable._private``)."""
    return apply_hooks(hooks, Tensor._wrap(np.array(g.reshape(shape), dtype=dtype)))


def apply_hooks(hooks, gt):
    """Apply tensor hooks in registration order to the gradient tensor ``gt``."""
    for h in list(hooks):
        r = h(gt)
        if r is None:
            continue
        if not isinstance(r, Tensor):
            raise TypeError("expected Variable, but hook returned '%s'" % type(r).__name__)
        name = getattr(h, "__name__", type(h).__name__)
        if r.shape != gt.shape:
            raise RuntimeError("hook '%s' has changed the size of value" % name)
        if r.dtype != gt.dtype:
            raise RuntimeError("hook '%s' has changed the type of value (was tapegrad.%s got tapegrad.%s)"
                               % (name, _TYPE_NAME.get(gt.dtype, gt.dtype.name), _TYPE_NAME.get(r.dtype, r.dtype.name)))
        gt = r
    return gt


PROFILERS = []          # active tg.profile() blocks (tapegrad/profile.py); empty: no cost but this check


def run_backward(seeds, retain_graph, targets=None, accumulate=True):
    if PROFILERS:
        return PROFILERS[-1].backward(_run_backward, seeds, retain_graph, targets, accumulate)
    return _run_backward(seeds, retain_graph, targets, accumulate)


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
    from . import differentiable
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


def _kernel(k):
    """Kernel ``k`` compiled once the kernels are loaded, else its Python function
    (the bookkeeping kernels ``mark`` and ``free_saved`` run either way)."""
    return k if _jit.READY[0] else k.py_func


def _run_backward(seeds, retain_graph, targets=None, accumulate=True):
    """Differentiate.  ``seeds``: list of (non-leaf tensor, float64 seed array).
    ``targets``: tensors whose gradient to return (``grad``/``inputs=``), or None
    for all leaves.  Returns {id(target): ndarray or None} when targets are given."""
    if (not _jit.READY[0] or INTERPRET[0] == "always") and _interpretable(seeds):
        return _interpret(seeds, retain_graph, targets, accumulate)
    _tp.rotate()        # anything recorded from here on (hooks) goes to a new tape
    pending = {}
    for t, g in seeds:
        pending.setdefault(t._tape, {}).setdefault(t._slot, []).append(g)
    results = {} if targets is not None else None
    tgt_ids = None if targets is None else {id(t): t for t in targets}
    leaf_grads = []     # applied once every tape went through: a failing tape leaves .grad untouched
    for T in _tape_order(list(pending)):
        slot_seeds = pending.pop(T, None)
        if slot_seeds:
            # with targets, gradient leaves through EXT entries only if a target may
            # lie on another tape
            ext_leads = tgt_ids is not None and any(t._tape is not T for t in tgt_ids.values())
            _sweep_tape(T, slot_seeds, retain_graph, tgt_ids, results, accumulate, pending, ext_leads, leaf_grads)
    for leaf, g, owned in leaf_grads:
        _accumulate(leaf, g, owned)
    return results


def _tape_order(roots):
    """Tapes reachable from ``roots`` through EXT links, each before every tape it
    imports from (so a tape is swept once, after all its gradient has arrived).
    Tapes of one thread only import from older ones; across threads the links
    decide."""
    if len(roots) == 1 and not roots[0].ext:
        return roots
    WHITE, GRAY, BLACK = 0, 1, 2
    color, post = {}, []
    for r in roots:
        if color.get(r.id, WHITE) != WHITE:
            continue
        stack = [(r, iter({id(o): o for o, _ in r.ext.values()}.values()))]
        color[r.id] = GRAY
        while stack:
            T, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[T.id] = BLACK
                post.append(T)
                stack.pop()
            elif color.get(nxt.id, WHITE) == WHITE:
                color[nxt.id] = GRAY
                stack.append((nxt, iter({id(o): o for o, _ in nxt.ext.values()}.values())))
            elif color[nxt.id] == GRAY:
                raise RuntimeError("tapegrad: this graph links the tapes of two threads in both directions; "
                                   "compute it in one thread")
    return post[::-1]


def mark(T, ints, slot_seeds, tgt_ids, ext_leads):
    """Which entries this backward runs (see ``kernels.sweep.mark``), after the
    checks that it can: nothing it needs was freed or changed in place.
    Returns (process, reach, needval, {target slot: [tensors]}, mask of the families
    of the entries to process)."""
    n = T.n
    freed = T.freed
    if freed.size < n:
        if freed.size:
            freed = np.zeros(max(n, 2 * freed.size, 256), np.uint8)    # room to grow: no copy per backward
            freed[:T.freed.size] = T.freed
            T.freed = freed
        else:           # nothing freed yet (``_free`` makes the tape its own array)
            freed = _zeros_u8(n)
    roots = np.fromiter(slot_seeds.keys(), np.int64, len(slot_seeds))

    # target slots on this tape
    tslots = {}
    if tgt_ids is not None:
        for tid, t in tgt_ids.items():
            if t._tape is T:
                tslots.setdefault(t._slot, []).append(t)
            elif t._tape is None:
                for s, leaf in T.leaves.items():
                    if leaf is t:
                        tslots.setdefault(s, []).append(t)
    targets = np.fromiter(tslots.keys(), np.int64, len(tslots)) if tslots else _EMPTY_I

    process, reach, needval, err, fams = _kernel(K.mark)(ints, _aux(T), K.SAVES_TABLE, freed, roots, targets,
                                                   tgt_ids is not None, ext_leads)
    if err >= 0:
        raise RuntimeError(SECOND_TIME)
    if _tp.inplace_counter[0] != T.inplace_mark:
        vobj, vnum = T.vobj, ints[:, _tp.VERSION]
        for s in np.flatnonzero(needval).tolist():
            if vobj[s][0] != vnum[s]:
                raise _version_error(T, s, ints)
    return process, reach, needval, tslots, fams


def _sweep_tape(T, slot_seeds, retain, tgt_ids, results, accumulate, pending, ext_leads, leaf_grads):
    plan = T.plan       # how a replayed tape is swept (tapegrad.replay.replayed); None on a recorded tape
    if plan is not None and plan.sweep_numbers(T, slot_seeds, retain, tgt_ids, accumulate, pending, leaf_grads):
        return
    n = T.n
    ints, flts = T.arrays()
    sizes = ints[:, _tp.SIZE]
    if plan is None:
        process, reach, needval, tslots, fams = mark(T, ints, slot_seeds, tgt_ids, ext_leads)
        hi = max(slot_seeds)
        V, A, touched = _storage(T, ints, sizes, flts, needval, reach)
    else:
        marks, process, reach, needval, tslots, fams, hi, V, A, touched = plan.prepare(
            T, ints, flts, sizes, slot_seeds, tgt_ids, ext_leads)
    for s, gs in slot_seeds.items():
        view = A.view(s, sizes[s])
        view[:] = gs[0].reshape(-1)
        touched[s] = 1
        for g in gs[1:]:
            view += g.reshape(-1)

    # slots where control returns to Python: hooks and retain_grad on non-leaves
    if T.hooks or T.retained:
        stops = np.zeros(n, np.uint8)
        for s, h in T.hooks.items():
            if h[0]:
                stops[s] = 1
        for s in T.retained:
            stops[s] = 1
    else:
        stops = _zeros_u8(n)
    aux = _aux(T)
    run = K.run_for(fams)       # compiled for the families this backward uses
    e = run(ints, flts, sizes, process, reach, stops, touched, V.loc, V.ptr, V.arena, A.loc, A.ptr,
            A.arena, aux, hi, -1)
    while e >= 0:
        _at_stop(T, e, A.view(e, sizes[e]))
        e = run(ints, flts, sizes, process, reach, stops, touched, V.loc, V.ptr, V.arena, A.loc, A.ptr,
                A.arena, aux, e, e)
    for s in A.big:
        if not touched[s]:          # reached, but nothing was written (cannot happen today)
            A.big[s][:] = 0.0

    # results: targets, leaves, and EXT entries (handed to their older tape)
    if tgt_ids is not None:
        for s, ts in tslots.items():
            if not reach[s]:
                continue
            g = A.view(s, sizes[s])
            for t in ts:
                if t._tape is None and t._x is not None and t._x.hooks:
                    gt = _run_hooks(t._x.hooks, g, t.shape, t.dtype)._data
                else:
                    gt = g.reshape(t.shape)
                prev = results.get(id(t))
                results[id(t)] = gt.astype(t.dtype) if prev is None else prev + gt
    if accumulate and tgt_ids is None:
        for s, leaf in T.leaves.items():
            if reach[s]:
                leaf_grads.append((leaf, A.view(s, sizes[s]), s in A.big))
    for s, (older, slot) in T.ext.items():
        if reach[s] and (tgt_ids is None or ext_leads):
            pending.setdefault(older, {}).setdefault(slot, []).append(A.view(s, sizes[s]))

    if not retain:
        if plan is None:
            _free(T, ints, process, needval)
        else:
            plan.free(T, marks, ints, process, needval)
    del ints, flts, sizes


_ZEROS_U8 = [np.zeros(1024, np.uint8)]


def _zeros_u8(n):
    """A shared all-zero uint8 array of at least ``n`` entries, for arguments the
    kernels only read (no stops for ``run``; nothing freed yet for ``mark``)."""
    z = _ZEROS_U8[0]
    if z.size < n:
        z = _ZEROS_U8[0] = np.zeros(2 * n, np.uint8)
    return z


def _aux(T):
    if len(T.aux) > 1:
        T.aux = [np.concatenate(T.aux)]
    return T.aux[0] if T.aux else _EMPTY_I


def _at_stop(T, s, view):
    """Run the hooks of slot ``s`` on its finished adjoint; store retain_grad's copy."""
    hooks, shape, dtype = T.hooks.get(s, (None, None, None))
    ref = T.retained.get(s)
    t = ref() if ref is not None else None
    if hooks:
        gt = _run_hooks(hooks, view, shape, dtype)
        view[:] = gt._data.reshape(-1)
    if t is not None:
        g = view.reshape(t.shape).astype(t.dtype)
        x = t._extra()
        # out of place, as PyTorch's retain_grad: an earlier y.grad keeps its value
        x.grad = Tensor._wrap(g) if x.grad is None else Tensor._wrap(x.grad._data + g)


def _accumulate(leaf, g, owned):
    x = leaf._x
    if x is None:
        x = leaf._extra()
    d = leaf._data
    if x.hooks:
        g = _run_hooks(x.hooks, g, d.shape, d.dtype)._data
    else:
        g = g.reshape(d.shape)
    if x.grad is None:
        if owned and g.dtype is d.dtype:
            x.grad = Tensor._wrap(g)             # a fresh array nobody else holds: no copy
        else:
            x.grad = Tensor._wrap(np.array(g, dtype=d.dtype))
    else:
        gd = x.grad._data
        np.add(gd, g, out=gd, casting="unsafe")
    if x.post_hooks:
        for h in list(x.post_hooks):
            h(leaf)


def _free(T, ints, process, read):
    """Free what this backward consumed (see ``kernels.sweep.free_saved``);
    ``read``: mask of the slots whose values it used.  Returns whether the tape
    still keeps a value."""
    n = ints.shape[0]
    if T.freed.size < n:        # (``mark`` leaves a tape that had nothing freed without its own array)
        freed = np.zeros(n, np.uint8)
        freed[:T.freed.size] = T.freed
        T.freed = freed
    live, drop = _kernel(K.free_saved)(ints, K.SAVES_TABLE, process, T.freed, read)
    if not live:
        T.vals = [None] * len(T.vals)
        return False
    vals = T.vals
    for s in drop.tolist():
        vals[s] = None
    return True
