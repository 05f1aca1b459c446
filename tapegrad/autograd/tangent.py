"""Forward mode and second order on a recorded tape, K directions at once.

``tangents`` walks a tape forward from seeded slots, each entry's tangent from its
inputs' by its family's ``tangent`` rule (``core.registry.FamilyRules``): a
Jacobian-vector product for K vectors in one pass.  ``reverse`` walks it back
with a batch of adjoints (a vector-Jacobian product for K cotangents in one pass)
and, given tangents, also carries the adjoints' tangents: forward over reverse,
the second-order adjoint ``H v`` of ADOL-C and CppAD, for K directions.

Each entry is one NumPy call (or a few) over a ``(K, n)`` batch: Python runs once
per entry, not per direction, so a Hessian of n variables costs about one reverse
pass on n-row batches.  Values are the ones the tape saved for its reverse pass,
which are the ones these rules read (see ``ops/_dual.py``).
"""
import numpy as np

from ..core import tape as _tp
from ..core.descriptors import strided_map_np
from ..core.registry import CONST, FAMILY_NAMES, FAMILY_RULES, GRAD_FN_NAMES, LEAF, META_END, OP_NAMES, NoForwardRule
from . import walk

_OP, _SIZE, _F0, _F1, _VAL, _NAME = _tp.OP, _tp.SIZE, _tp.F0, _tp.F1, _tp.VAL, _tp.NAME


class TangentContext:
    """What the families' forward-mode rules may ask about the tape (``FamilyRules``):
    slot sizes, values (flat arrays), tangents ``(K, n)`` or None, and which slots a
    reverse pass must reach (``needs``), and how many leading rows of a reverse pass's
    batches are adjoints (``adjoint_rows``: None for all; 1 in forward over reverse, whose
    other rows are their tangents)."""
    __slots__ = ("T", "ints", "flts", "aux", "K", "tans", "lead", "adjoint_rows", "_maps", "_vals")

    def __init__(self, T, K):
        self.T, self.K = T, K
        self.ints, self.flts = T.arrays()
        self.aux = walk.aux_array(T)
        self.tans = {}
        self.lead = None
        self.adjoint_rows = None
        self._maps, self._vals = {}, {}

    def size(self, s):
        return int(self.ints[s, _SIZE])

    def tan(self, s):
        return self.tans.get(s) if s >= 0 else None

    def needs(self, s):
        return s >= 0 and self.lead[s] != 0

    def strided_map(self, at):
        m = self._maps.get(at)
        if m is None:
            m = self._maps[at] = strided_map_np(self.aux, at)
        return m

    def val(self, s):
        v = self._vals.get(s)
        if v is not None:
            return v
        T = self.T
        if self.ints[s, _OP] == LEAF:
            v = T.leaves[s]._data
        else:
            v = T.vals[s]
            if v is None:
                if self.ints[s, _SIZE] != 1:
                    raise RuntimeError(walk.SECOND_TIME)
                v = np.array([self.flts[s, _VAL]])
        v = self._vals[s] = np.asarray(v, np.float64).reshape(-1)
        return v


_BY_OPCODE = {}     # (opcode, what) -> (rule, kernel index)


def _rules(row, what):
    op = row[_OP]
    got = _BY_OPCODE.get((op, what))
    if got is None:
        f = getattr(FAMILY_RULES[op >> 6], what)
        if f is None:
            raise NoForwardRule(no_forward_message(row))
        got = _BY_OPCODE[(op, what)] = (f, op & 63)
    return got


def no_forward_message(row):
    op = row[_OP]
    name = GRAD_FN_NAMES[row[_NAME]] if row[_NAME] >= 0 else OP_NAMES.get(op, FAMILY_NAMES[op >> 6])
    return str(NoForwardRule.named(name))


def tangents(T, seeds, hi):
    """A ``TangentContext`` whose ``tans`` hold the tangents of every slot up to ``hi``
    that depends on a seeded one; ``seeds``: {slot: (K, n) tangent}."""
    with np.errstate(all="ignore"):     # (a rule's inf and nan are the kernels')
        return _tangents(T, seeds, hi)


def _tangents(T, seeds, hi):
    K = next(iter(seeds.values())).shape[0]
    ctx = TangentContext(T, K)
    ctx.tans.update(seeds)
    lo = min(seeds)
    ints, flts, aux, tans = ctx.ints, ctx.flts, ctx.aux, ctx.tans
    rows = ints[lo + 1:hi + 1].tolist()
    params = flts[lo + 1:hi + 1, _F0:_F1 + 1].tolist()
    for s, row, (f0, f1) in zip(range(lo + 1, hi + 1), rows, params):
        if row[_OP] < META_END or s in tans:
            continue
        ins = walk.entry_inputs(row, aux)
        if not any(i in tans for i in ins if i >= 0):
            continue
        f, k = _rules(row, "tangent")
        t = f(ctx, s, k, row, f0, f1)
        if t is not None:
            tans[s] = t
    return ctx


def _leads(ctx, targets, hi):
    """lead[s]: slot s is, or depends on, a target (what a reverse pass must reach)."""
    lead = np.zeros(len(ctx.ints), np.uint8)
    lead[list(targets)] = 1
    lo = min(targets)
    ints, aux = ctx.ints, ctx.aux
    for s, row in zip(range(lo + 1, hi + 1), ints[lo + 1:hi + 1].tolist()):
        if row[_OP] >= META_END and any(i >= 0 and lead[i] for i in walk.entry_inputs(row, aux)):
            lead[s] = 1
    lead[lo:hi + 1][ints[lo:hi + 1, _OP] == CONST] = 0
    return lead


def reverse(ctx, seeds, targets, second=False):
    """Adjoints of ``targets`` (slots) for ``seeds`` {slot: (B, n) adjoint batch}.
    With ``second``, row 0 of each batch is the first-order adjoint ``g`` and rows
    1..K its tangents along the context's tangents (the forward-over-reverse
    sweep): each entry adds its rule's curvature term to them.  Returns
    {target slot: (B, n) batch, or None where nothing reached it}."""
    with np.errstate(all="ignore"):
        return _reverse(ctx, seeds, targets, second)


def _reverse(ctx, seeds, targets, second):
    hi = max(seeds)
    if ctx.lead is None:
        ctx.lead = _leads(ctx, targets, hi)
    ctx.adjoint_rows = 1 if second else None
    lead = ctx.lead
    adj = {s: g for s, g in seeds.items() if lead[s]}
    if second:
        # an adjoint whose tangent rows are zero (the seed's: a constant) is kept as its
        # row 0 alone, until a curvature term or a batch with tangents adds to them, so
        # that no rule multiplies a zero tangent into an infinite partial (PyTorch's
        # double backward has no term for a constant: x * x at inf has Hessian 2, not NaN)
        adj = {s: g[:1] if not g[1:].any() else g for s, g in adj.items()}
    owned = set()           # slots whose adjoint is an array of the sweep's own (added to in place)
    keep = set(targets)
    ints, flts, aux = ctx.ints, ctx.flts, ctx.aux
    lo = min(targets)
    order = lo + np.flatnonzero(lead[lo:hi + 1])[::-1]
    rows = ints[order].tolist()
    params = flts[order][:, _F0:_F1 + 1].tolist()
    for s, row, (f0, f1) in zip(order.tolist(), rows, params):
        G = adj.get(s) if s in keep else adj.pop(s, None)
        if G is None or row[_OP] < META_END:
            continue
        f, k = _rules(row, "batched_reverse")
        for i, r in f(ctx, s, k, row, f0, f1, G):
            prev = adj.get(i)
            if prev is None:
                adj[i] = r
            elif prev.shape[0] < r.shape[0]:        # (rows 1..K only in r: zero in prev)
                r = r.copy()            # (a rule may hand on its G itself)
                r[0] += prev[0]
                adj[i] = r
                owned.add(i)
            elif i in owned:
                prev[:r.shape[0]] += r
            else:
                prev = adj[i] = prev.copy()
                prev[:r.shape[0]] += r
                owned.add(i)
        if second:
            c, _ = _rules(row, "curvature")
            for i, d in c(ctx, s, k, row, f0, f1, G[0]):     # (into the tangent rows 1..K)
                prev = adj.get(i)
                if prev is None or prev.shape[0] == 1:
                    new = np.zeros((1 + d.shape[0], d.shape[1]))
                    if prev is not None:
                        new[0] = prev[0]
                    prev = adj[i] = new
                    owned.add(i)
                elif i not in owned:
                    prev = adj[i] = prev.copy()
                    owned.add(i)
                prev[1:] += d
    if second:
        return {t: _all_rows(adj.get(t), ctx.K) for t in targets}
    return {t: adj.get(t) for t in targets}


def _all_rows(G, K):
    """An adjoint kept as its row 0 alone (its tangents structurally zero) with them."""
    if G is None or G.shape[0] == 1 + K:
        return G
    full = np.zeros((1 + K, G.shape[1]))
    full[0] = G[0]
    return full


def leaf_slot(T, t):
    """The slot of leaf tensor ``t`` on tape ``T``: None if none, -1 if several
    (``Tape.leaf_slot``)."""
    return T.leaf_slot(t) if t._tape is None else None
