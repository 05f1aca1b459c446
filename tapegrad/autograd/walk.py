"""What both backward passes share: the walk over the tapes and its bookkeeping.

A backward, compiled (``engine``) or differentiable/interpreted (``differentiable``):
  for every tape that got gradient, newest first (``over_tapes``, ``tape_order``),
    1. ``mark`` the entries the roots reach, after checking that nothing they need
       was freed or changed in place;
    2. sweep them from the newest to the oldest (what differs: the compiled ``run``
       on flat float64 arrays, or each op's differentiable rule on flat tensors),
       stopping at the slots with hooks or retain_grad (``at_stop``);
    3. ``hand_off`` the adjoints of targets to the results, of leaves to ``.grad``
       (once every tape went through, so a failing tape leaves ``.grad`` untouched),
       of EXT entries (tensors imported from an older tape) to that tape;
    4. ``free`` what a backward without retain_graph consumed.

Steps 2 and 3 take the sweep's adjoint store ``A``, array or tensor adjoints alike:
  A.view(s, size)      the finished flat adjoint of the reached slot ``s``
  A.big                the slots whose adjoint is an array of its own (may become .grad uncopied)
  A.target(g, t)       ``g`` as the gradient of the target ``t`` (its shape and dtype;
                       a leaf target's hooks run on it)
  A.hooked(hooks, g, shape, dtype)   the flat adjoint once a non-leaf's hooks ran on ``g``
  A.retain(t, g)       ``t.grad`` += ``g`` (retain_grad: out of place, as PyTorch)
"""
import threading
import weakref

import numpy as np

from .. import _jit
from ..core import tape as _tp
from ..kernels import sweep as K
from ..core.registry import CHECK_TAPES, CONST, EXT, GRAD_FN_NAMES, LEAF, META_END, check_entries
from ..ops.shape import VARIADIC
from ..core.dtypes import tensor_type_name
from ..core.tensor import Tensor

SECOND_TIME = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
    "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
    "or if you need to access saved tensors after calling backward.")

_EMPTY_I = np.zeros(0, np.int64)


def over_tapes(seeds, sweep_tape, to_leaf, retain, targets, accumulate, *extra):
    """Differentiate from ``seeds``, [(root tensor, flat seed)], over every tape they
    reach: ``sweep_tape(T, slot_seeds, retain, tgt_ids, results, accumulate, pending,
    ext_leads, leaf_grads, *extra)`` runs steps 1-4 on tape ``T``, then ``to_leaf(leaf,
    g, owned)`` adds each leaf's gradient to its ``.grad``.  ``targets``: the tensors whose
    gradient to return (``grad``/``inputs=``), or None for all leaves.  Returns
    {id(target): gradient} (None without targets)."""
    pending = {}        # tape -> {slot: [adjoints]}, the gradient still to sweep
    for t, g in seeds:
        pending.setdefault(t._tape, {}).setdefault(t._slot, []).append(g)
    results = {} if targets is not None else None
    tgt_ids = None if targets is None else {id(t): t for t in targets}
    leaf_grads = []
    for T in tape_order(list(pending)):
        slot_seeds = pending.pop(T, None)
        if slot_seeds:
            if CHECK_TAPES[0]:
                _check_new_entries(T)
            # with targets, gradient leaves through EXT entries only if a target may
            # lie on another tape
            ext_leads = tgt_ids is not None and any(t._tape is not T for t in tgt_ids.values())
            sweep_tape(T, slot_seeds, retain, tgt_ids, results, accumulate, pending, ext_leads, leaf_grads, *extra)
    for leaf, g, owned in leaf_grads:
        to_leaf(leaf, g, owned)
    return results


def tape_order(roots):
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


# -- 1. mark ---------------------------------------------------------------------------
def mark(T, ints, slot_seeds, tgt_ids, ext_leads, targets=None):
    """Which entries this backward runs (see ``kernels.sweep.mark``), after the
    checks that it can: nothing it needs was freed or changed in place.
    Returns (process, reach, needval, {target slot: [tensors]}, mask of the families
    of the entries to process).  ``targets``: ``target_slots``' result, when known."""
    n = T.n
    freed = T.freed
    if freed.size < n:
        if freed.size:
            freed = np.zeros(max(n, 2 * freed.size, 256), np.uint8)    # room to grow: no copy per backward
            freed[:T.freed.size] = T.freed
            T.freed = freed
        else:           # nothing freed yet (``free`` makes the tape its own array)
            freed = zeros_u8(n)
    roots = np.fromiter(slot_seeds.keys(), np.int64, len(slot_seeds))
    tslots, targets, lo = target_slots(T, tgt_ids, ext_leads) if targets is None else targets

    # (the bookkeeping kernels run as Python until the compiled kernels are loaded)
    k = K.mark if _jit.READY[0] else K.mark.py_func
    process, reach, needval, err, fams = k(ints, aux_array(T), K.SAVES_TABLE, freed, roots, targets,
                                           tgt_ids is not None, ext_leads, lo)
    if err >= 0:
        raise RuntimeError(SECOND_TIME)
    if _tp.inplace_counter[0] != T.inplace_mark:
        versions, vnum = T.versions, ints[:, _tp.VERSION]
        for s in np.flatnonzero(needval).tolist():
            if versions[s][0] != vnum[s]:
                raise _version_error(T, s, ints)
    return process, reach, needval, tslots, fams


def _version_error(T, s, ints):
    op = ints[s, _tp.OP]
    ver = T.versions[s]
    arr = T.vals[s]
    if arr is None:     # a single number kept in its entry (a replayed tape): the tensor's shape if known
        leaf = T.leaves.get(s)
        arr = leaf._data if leaf is not None else np.zeros(1)
    desc = "[tapegrad.%s [%s]]" % (tensor_type_name(arr.dtype), ", ".join(map(str, arr.shape)))
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


def target_slots(T, tgt_ids, ext_leads):
    """({target slot on tape ``T``: [tensors]}, those slots as an array, the lowest slot
    from which gradient may lead to a target: below it nothing does)."""
    tslots = {}
    if tgt_ids is not None:
        slots_of = None         # id(leaf) -> its slots here: a leaf has several after an in-place change, or
        for tid, t in tgt_ids.items():      # when threads took turns with it (Tape.adopt): every one counts
            if t._tape is T:
                tslots.setdefault(t._slot, []).append(t)
            elif t._tape is None:
                if slots_of is None:
                    slots_of = {}
                    for s, leaf in T.leaves.items():
                        slots_of.setdefault(id(leaf), []).append(s)
                for s in slots_of.get(id(t), ()):
                    tslots.setdefault(s, []).append(t)
    targets = np.fromiter(tslots.keys(), np.int64, len(tslots)) if tslots else _EMPTY_I
    # (the lowest target, or EXT entry when gradient may leave through one)
    lo = 0
    if tgt_ids is not None:
        lo = min(tslots) if tslots else T.n
        if ext_leads and T.ext:
            lo = min(lo, min(T.ext))
    return tslots, targets, lo


# -- 2. the stops of the sweep ---------------------------------------------------------
def at_stop(T, s, g, A):
    """Hooks and retain_grad of the non-leaf at slot ``s``, on its finished flat
    adjoint ``g``; returns the adjoint the sweep goes on with."""
    hooks, shape, dtype = T.hooks.get(s, (None, None, None))
    ref = T.retained.get(s)
    t = ref() if ref is not None else None
    if hooks:
        g = A.hooked(hooks, g, shape, dtype)
    if t is not None:
        A.retain(t, g)
    return g


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
                               % (name, tensor_type_name(gt.dtype), tensor_type_name(r.dtype)))
        gt = r
    return gt


def hooks_on_array(hooks, g, shape, dtype):
    """Apply tensor hooks to the array adjoint ``g``; returns the final gradient Tensor.
    They get a copy: a hook may change it in place, and ``g`` may be shared (an
    interpreted backward's adjoints are, see ``differentiable._private``)."""
    return apply_hooks(hooks, Tensor._wrap(np.array(g.reshape(shape), dtype=dtype)))


# -- 3. hand-off -----------------------------------------------------------------------
def hand_off(T, reach, tslots, sizes, A, tgt_ids, results, accumulate, pending, ext_leads, leaf_grads):
    """The adjoints of the reached targets into ``results``, of the leaves to
    ``leaf_grads`` (with ``accumulate`` and no targets), of the EXT entries to the
    ``pending`` gradient of the tape they import from."""
    n = reach.size      # (a recorded walk may have added slots to T: they are not part of this backward)
    if tgt_ids is not None:
        for s, ts in tslots.items():
            if reach[s]:
                g = A.view(s, sizes[s])
                for t in ts:
                    gt = A.target(g, t)
                    prev = results.get(id(t))
                    results[id(t)] = gt if prev is None else prev + gt
    elif accumulate:
        for s, leaf in T.leaves.items():
            if s < n and reach[s]:
                leaf_grads.append((leaf, A.view(s, sizes[s]), s in A.big))
    for s, (older, slot) in T.ext.items():
        if s < n and reach[s] and (tgt_ids is None or ext_leads):
            pending.setdefault(older, {}).setdefault(slot, []).append(A.view(s, sizes[s]))


# TAPEGRAD_CHECK_TAPES: how far each tape's entries were checked.  An entry is checked once,
# before the first backward that sweeps it (later writes to a tape's entries set versions,
# or make an entry a constant or an import, which index nothing); checking the whole tape
# at every backward made gradcheck's retained backward per output quadratic.
_CHECKED = weakref.WeakKeyDictionary()


def _check_new_entries(T):
    n = T.n
    start = _CHECKED.get(T, 0)
    if start < n:
        check_entries(T.arrays()[0], T.aux_array(), start)
        _CHECKED[T] = n


ACCUMULATING = threading.RLock()      # (a leaf's .grad written by one thread at a time: NumPy's add
                                      # releases the GIL on large arrays)


def accumulate_array(leaf, g, owned):
    """``leaf.grad`` += the flat array ``g``, in place (``owned``: ``g`` is an array
    nobody else holds, which may become ``.grad`` without a copy); then the leaf's
    post-accumulate hooks."""
    x = leaf._extra
    if x is None:
        with ACCUMULATING:
            x = leaf._extras()
    d = leaf._data
    if x.hooks:
        g = hooks_on_array(x.hooks, g, d.shape, d.dtype)._data
    else:
        g = g.reshape(d.shape)
    with ACCUMULATING:     # (backward passes of several threads into one leaf: none lost)
        if x.grad is None:
            if owned and g.dtype == d.dtype:     # (==: an array made by compiled code has a dtype object of its own)
                x.grad = Tensor._wrap(g)             # a fresh array nobody else holds: no copy
            else:
                x.grad = Tensor._wrap(np.array(g, dtype=d.dtype))
        else:
            gd = x.grad._data
            np.add(gd, g, out=gd, casting="unsafe")
    if x.post_hooks:
        for h in list(x.post_hooks):
            h(leaf)


# -- 4. free ---------------------------------------------------------------------------
def free(T, ints, process, read):
    """Free what this backward consumed (see ``kernels.sweep.free_saved``);
    ``read``: mask of the slots whose values it used.  Returns whether the tape
    still keeps a value."""
    n = ints.shape[0]
    if T.freed.size < n:        # (``mark`` leaves a tape that had nothing freed without its own array)
        freed = np.zeros(n, np.uint8)
        freed[:T.freed.size] = T.freed
        T.freed = freed
    k = K.free_saved if _jit.READY[0] else K.free_saved.py_func
    live, drop = k(ints, K.SAVES_TABLE, process, T.freed, read)
    if not live:
        T.vals = [None] * len(T.vals)
        return False
    vals = T.vals
    for s in drop.tolist():
        vals[s] = None
    return True


# -- the entry, as both walks read it ----------------------------------------------------
def aux_array(T):
    """The tape's aux words as one array (``Tape.aux_array``)."""
    return T.aux_array()


def entry_inputs(row, aux):
    """The input slots of the entry ``row`` (its int fields), by position: a, b, c
    (-1: none), or for a ``VARIADIC`` entry the list it keeps in ``aux`` (-1: an
    input that needs no gradient)."""
    if row[_tp.C] == VARIADIC:
        at = row[_tp.AUX]
        return aux[at + 1:at + 1 + aux[at]].tolist()
    return [int(row[_tp.A]), int(row[_tp.B]), int(row[_tp.C])]


_ZEROS_U8 = [np.zeros(1024, np.uint8)]


def zeros_u8(n):
    """A shared all-zero uint8 array of at least ``n`` entries, for arguments the
    kernels only read (no stops for ``run``; nothing freed yet for ``mark``)."""
    z = _ZEROS_U8[0]
    if z.size < n:
        z = _ZEROS_U8[0] = np.zeros(2 * n, np.uint8)
    return z
