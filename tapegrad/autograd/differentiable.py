"""The differentiable reverse pass (``create_graph=True``).

The same walk as the compiled sweep (``walk``), in Python: the reached entries
from the newest to the oldest, each one's reverse rule applied with tapegrad's own
operations (every op family's ``differentiable_reverse``, next to its compiled kernel),
so the gradient is itself recorded (on a new tape) and can be differentiated
again, to any order.  Adjoints are flat tensors, like the compiled kernels' slots;
the values an entry saved come in as flat tensors tied to their slot, so
differentiating through them reaches the original graph.
"""
import warnings

import numpy as np

from ..core import quiet as _quiet
from ..core import tape as _tp
from ..core.descriptors import strided_map_np
from ..ops import elementwise as _ew
from ..ops import shape as _sh
from ..core.registry import CONST, FAMILY_RULES, GRAD_FN_NAMES, LEAF, family, index, name_id
from ..core.tensor import Tensor
from . import walk
from .grad_mode import set_grad_enabled

REFERENCE_CYCLE = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter and its "
    "gradient which can cause a memory leak. We recommend using autograd.grad when creating the graph to "
    "avoid this. If you have to use this function, make sure to reset the .grad fields of your parameters "
    "to None after use to break the cycle and avoid the leak.")

_OP, _SIZE, _VERSION, _F0, _F1, _VAL = _tp.OP, _tp.SIZE, _tp.VERSION, _tp.F0, _tp.F1, _tp.VAL


class _Context:
    """What an op's ``differentiable_reverse`` may ask about the tape being walked."""
    __slots__ = ("T", "ints", "flts", "aux", "reach", "_values", "_maps")

    def __init__(self, T, ints, flts, reach):
        self.T, self.ints, self.flts, self.reach = T, ints, flts, reach
        self.aux = walk.aux_array(T)
        self._values, self._maps = {}, {}

    def size(self, s):
        return int(self.ints[s, _SIZE])

    def needs(self, s):
        """Whether input slot ``s`` gets a gradient in this backward."""
        return s >= 0 and self.reach[s] != 0 and self.ints[s, _OP] != CONST

    def strided_map(self, at):
        m = self._maps.get(at)
        if m is None:
            m = self._maps[at] = strided_map_np(self.aux, at)
        return m

    def value(self, s, compute=None):
        """Slot ``s``'s value as a flat tensor that stands for the slot: operations
        on it are recorded as depending on the original entry.  ``compute``: how to
        recompute a value the entry did not keep."""
        t = self._values.get(s)
        if t is not None:
            return t
        T = self.T
        op = self.ints[s, _OP]
        if op == LEAF:
            t = T.leaves[s].reshape(-1)
        else:
            v = T.vals[s]
            if v is None:
                if compute is not None:
                    v = compute()
                elif self.ints[s, _SIZE] == 1:
                    v = np.array([self.flts[s, _VAL]])
                else:
                    raise RuntimeError(walk.SECOND_TIME)
            v = np.ascontiguousarray(v).reshape(-1)
            if op == CONST:
                t = Tensor._wrap(v)
            else:
                t = Tensor._recorded(v, T, s, T.versions[s])
                t._slot_version = int(self.ints[s, _VERSION])
        self._values[s] = t
        return t


expand_adjoint = _sh.expand_adjoint     # (the op rules and the walk use the one in ops/shape.py)


def as_shape(t, shape):
    """``t`` with another shape of the same size.  A recorded tensor is flat in its
    slot anyway, so this is an alias of the same slot (no entry: the gradient keeps
    the grad_fn of the op that made it, as in PyTorch)."""
    if t.shape == shape:
        return t
    if t._tape is None:
        return t.reshape(shape)
    a = Tensor._recorded(t._data.reshape(shape), t._tape, t._slot, t._ver)
    a._slot_version = t._slot_version
    return a


def graph_seeds(outputs, grads):
    """Flat seed tensors: the user's gradients (differentiated through when they
    require grad), ones for implicit ones; None where an output gets none."""
    seeds = []
    for out, g in zip(outputs, grads):
        if isinstance(g, Tensor):
            seeds.append(as_shape(g, (g.numel(),)))
        elif out.requires_grad:
            seeds.append(Tensor._wrap(np.ones(out.numel(), out.dtype)))
        else:
            seeds.append(None)
    return seeds


def run_backward(seeds, retain_graph, targets=None, accumulate=True, record=True, check=False):
    """Like ``engine.run_backward``, recording the gradient computation (``record``;
    else computing it with grad mode off), and with ``check`` (anomaly mode)
    raising at the first entry whose gradient holds NaN or inf.
    ``seeds``: list of (root tensor, flat seed Tensor).  Returns {id(target): Tensor}."""
    # The gradient is recorded on the roots' tape when it can be continued, so a
    # later backward through it is one sweep over one tape; else on a new tape.
    roots = {t._tape for t, _ in seeds}
    if record and len(roots) == 1:
        _tp.resume(roots.pop())
    else:
        _tp.rotate()
    with set_grad_enabled(bool(record)), _quiet.ALL():     # (as engine.run_backward)
        return walk.over_tapes(seeds, _walk, accumulate_grad if record else _accumulate_unrecorded,
                               retain_graph, targets, accumulate, record, check)


def _accumulate_unrecorded(leaf, g, owned):
    walk.accumulate_array(leaf, g._data.reshape(-1), False)


def _sum(gs):
    total = gs[0]
    for g in gs[1:]:
        total = total + g
    return total


class _Adjoints:
    """The walk's adjoints, flat tensors by slot (``adj``), as ``walk``'s adjoint
    store.  Several slots may share one (``a + b`` hands the same one to both), and
    one element may stand for all of a slot's (``expand_adjoint``)."""
    __slots__ = ("adj", "record")
    big = ()            # (no adjoint is an array of its own)

    def __init__(self, adj, record):
        self.adj, self.record = adj, record

    def view(self, s, size):
        g = self.adj.get(s)
        if g is None:
            # a reached slot that nothing flowed into (only through empty tensors)
            # gets zeros, as from the compiled sweep and PyTorch, not none
            return Tensor._wrap(np.zeros(size))
        return expand_adjoint(g, size)

    def target(self, g, t):
        gt = as_shape(g, t.shape)
        if t._tape is None and t._extra is not None and t._extra.hooks:
            gt = walk.apply_hooks(t._extra.hooks, gt if self.record else _private(gt))
        if gt.dtype != t.dtype:
            gt = gt.to(t.dtype)
        return gt

    def hooked(self, hooks, g, shape, dtype):
        if not self.record:
            g = _private(g)
        return as_shape(walk.apply_hooks(hooks, as_shape(g, shape)), (g.numel(),))

    def retain(self, t, g):
        x = t._extras()
        gt = as_shape(g, t.shape)
        if x.grad is None:
            x.grad = _COPY(gt, name=_CLONE_NAME) if gt.requires_grad else Tensor._wrap(gt._data.copy())
        else:
            x.grad = x.grad + gt


def _walk(T, slot_seeds, retain, tgt_ids, results, accumulate, pending, ext_leads, leaf_grads, record, check):
    """Steps 1-4 of ``walk`` on tape ``T``, the sweep in Python."""
    ints, flts = T.arrays()
    process, reach, needval, tslots, _ = walk.mark(T, ints, slot_seeds, tgt_ids, ext_leads)
    # (the walk may append to T: the views stay valid, as the tape grows into a new buffer)
    ctx = _Context(T, ints, flts, reach)
    adj = {s: _sum(gs) for s, gs in slot_seeds.items()}
    A = _Adjoints(adj, record)
    order = np.flatnonzero(process)[::-1]
    stops = T.hooks or T.retained
    for s, row, (f0, f1) in zip(order.tolist(), ints[order].tolist(), flts[order][:, _F0:_F1 + 1].tolist()):
        g = adj.get(s)
        if g is None:
            continue
        if stops and (s in T.hooks or s in T.retained):
            g = adj[s] = walk.at_stop(T, s, expand_adjoint(g, ctx.size(s)), A)
        code = row[_OP]
        rules = FAMILY_RULES[family(code)]
        if rules.expands_adjoint and g.numel() != row[_SIZE]:     # (it indexes the adjoint: all elements explicit)
            g = expand_adjoint(g, row[_SIZE])
        parts = rules.differentiable_reverse(ctx, s, index(code), row, f0, f1, g)
        for i, r in parts:
            if check:
                _check_finite(T, s, row, i, r)
            prev = adj.get(i)
            adj[i] = r if prev is None else prev + r
    walk.hand_off(T, reach, tslots, ints[:, _SIZE], A, tgt_ids, results, accumulate, pending, ext_leads, leaf_grads)
    if not retain:
        # with the entries the walk recorded (create_graph): the gradient's graph keeps the
        # values it reads, as PyTorch's new graph holds its own (it read freed memory)
        now = T.arrays()[0]
        grown = now.shape[0] - ints.shape[0]
        if grown:
            process = np.concatenate([process, np.zeros(grown, process.dtype)])
            needval = np.concatenate([needval, np.zeros(grown, needval.dtype)])
        walk.free(T, now, process, needval)


def _check_finite(T, s, row, i, r):
    """Anomaly mode: entry ``s`` gave input slot ``i`` the gradient ``r``."""
    d = r._data
    if d.dtype.kind != "f" or np.isfinite(d).all():
        return
    what = "nan" if np.isnan(d).any() else "inf"
    k = walk.entry_inputs(row, walk.aux_array(T)).index(i)
    name = GRAD_FN_NAMES[row[_tp.NAME]]
    where = T.source(s)
    raise RuntimeError("Function '%s' returned %s values in its %dth output.%s"
                       % (name, what, k, "" if where is None else
                          " The operation that caused it was recorded at:\n  File " + where))


def _private(g):
    """``g`` in memory of its own.  Without ``record``, hooks may change the gradient
    they get in place (as on the compiled path, where every slot has its own adjoint),
    but here adjoints are shared (``a + b`` hands the same one to both) or broadcast
    views of one element (``expand_adjoint``)."""
    return Tensor._wrap(np.array(g._data))


_COPY = _ew.UNARY_BY_NAME["copy"].record
_COPY_NAME = name_id("CopyBackwards")
_CLONE_NAME = name_id("CloneBackward0")


def accumulate_grad(leaf, g, owned=False):
    """``leaf.grad`` += g, out of place and recorded (PyTorch's AccumulateGrad in
    grad mode: the first gradient is a copy with grad_fn CopyBackwards)."""
    with walk.ACCUMULATING:
        x = leaf._extras()
    g = as_shape(g, leaf.shape)
    if g.dtype != leaf.dtype:
        g = g.to(leaf.dtype)
    if x.hooks:
        g = walk.apply_hooks(x.hooks, g)
    with walk.ACCUMULATING:     # (as walk.accumulate_array: several threads' backward into one leaf)
        if x.grad is None:
            x.grad = _COPY(g, name=_COPY_NAME) if g.requires_grad else Tensor._wrap(np.array(g._data))
        else:
            x.grad = x.grad + g
    if x.post_hooks:
        for h in list(x.post_hooks):
            h(leaf)


def warn_reference_cycle():
    warnings.warn(REFERENCE_CYCLE, UserWarning, stacklevel=4)
