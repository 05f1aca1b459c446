"""Forward over reverse on a tape, compiled: one generated Numba program per tape structure.

``autograd.tangent`` walks a tape in NumPy, a few calls per entry over K directions;
on vectors of thousands of elements its Python and temporaries are most of the time.
Here, for one direction (``hvp``, ``vhp``; ``jvp``: the forward loops alone,
``first_order``), the two passes are written out for one tape as fused loops: views are folded into the index maps of the entries that read them,
and the entries of one size go into one loop (``_Plan``), where each element's
tangents, then its adjoints and their tangents (the reverse rule once more, plus the
rule differentiated along the tangents of what it reads: the rule language's ``dual``) pass in registers;
only what crosses loops goes through arrays.  Every rule comes from its op record,
as the compiled kernels' do.  (A loop per entry, tried first, compiled in time
quadratic in the entries: 200 s for 120.)

A program is keyed by the tape's structure from the first seeded slot on (its
entries' integer fields, auxiliary words, the parameters written into the code,
which slots are seeded and wanted), not by its values, so that each call of a loss
that records the same tape again finds it.  It is compiled in a background thread
once the same structure has been walked ``COMPILE_AFTER`` times (the NumPy walk serves
until then), written where the kernels are and cached by Numba on disk.  Gathers
are index maps too; matrix products (loops when small, else ``np.dot`` per batch), concatenations, writes
and scatters (setitem, SCATTER_ADD, STRIDED_SCATTER) and the reductions and scans by
groups (logsumexp, softmax, log_softmax, var, std, extrema, prod, cumsum) are calls
between the loops, over whole arrays.  A tape with any other entry keeps the NumPy walk (the
reason is kept in ``_PROGRAMS``).  The index maps, the loop nests, the carried sums and
the compiling are ``kernels/loops.py``'s, shared with fused replay; the loop bodies are here.
"""
import ast
import re
import threading

import numpy as np

from ..core import tape as _tp
from ..core.descriptors import strided_map_np
from ..core.registry import BINARY, BINARY2, LINALG, META_END, REDUCE, SHAPE, UNARY, UNARY2, family, index
from ..ops import elementwise as _ew
from ..ops import reduce as _rd
from ..kernels import loops
from ..kernels.codegen import literal as _literal
from ..ops._record import CAT, GATHER, RESHAPE, SCATTER_ADD, SETITEM, STRIDED, STRIDED_SCATTER
from ..ops.rule_language import dual, plus

COMPILE_AFTER = 2       # walks of one tape structure before its program is compiled (1: at the first)
MAX_ENTRIES = 256       # entries past which a tape keeps the NumPy walk (the compile grows with the source) ...
MAX_LOOPS = 12          # ... and loops (Numba compiles many loops in one function slowly)
OWN_BUFFER_MAX = 1 << 17   # elements up to which a loop's second index into an adjoint gets a buffer of its own
MODE = ["auto"]         # "auto" (background compile), "now" (compile in the caller: tests), "off"
# Products of up to this many multiply-adds (all batches) are written as loops; larger ones
# call np.dot.  Numba lowers each np.dot, reshape and slice assignment to hundreds of IR
# instructions: a fuzzer's pair of 13-entry programs with one batched product compiled in
# 32 s that way, in 10 s with loops (and whole-array assignments written as loops too).
SMALL_PRODUCT = 4096

_GROUP_CALLS = (_rd.LOGSUMEXP, _rd.SOFTMAX, _rd.LOG_SOFTMAX, _rd.VAR, _rd.STD, _rd.EXTREMUM,   # calls by groups
                _rd.CUMSUM, _rd.PROD)
_REVERSE_READS_TY = (_rd.LOGSUMEXP, _rd.STD, _rd.SOFTMAX, _rd.LOG_SOFTMAX)     # (the others' curvature needs no dy)
_OP, _A, _B, _C, _AUX, _PARAM, _SIZE = _tp.OP, _tp.A, _tp.B, _tp.C, _tp.AUX, _tp.PARAM, _tp.SIZE
_F64 = np.dtype(np.float64)


class Unsupported(Exception):
    """Why a tape keeps the NumPy walk."""


class _Matrix:
    """A matrix operand of a product in a generated program: the 1-D array ``name``
    (None: all ones) holding ``nb`` matrices of ``rows`` x ``cols`` one after another,
    used transposed when ``t``."""

    def __init__(self, name, rows, cols, t=False):
        self.name, self.rows, self.cols, self.t = name, rows, cols, t

    @property
    def T(self):
        return _Matrix(self.name, self.rows, self.cols, not self.t)

    @property
    def shape(self):
        """The shape used in the product."""
        return (self.cols, self.rows) if self.t else (self.rows, self.cols)

    def whole(self, nb):
        """As an argument of np.dot (batch ``q`` when ``nb`` > 1)."""
        shape, q = ((self.rows, self.cols), "") if nb == 1 else ((nb, self.rows, self.cols), "[q]")
        a = "np.ones(%r)%s" % (shape, q) if self.name is None else "%s.reshape%r%s" % (self.name, shape, q)
        return a + ".T" if self.t else a

    def element(self, r, c, nb):
        """Element (``r``, ``c``) of batch ``q`` (index names) as used in the product."""
        if self.name is None:
            return "1.0"
        if self.t:
            r, c = c, r
        at = []         # (an axis of one element adds nothing)
        if nb > 1:
            at.append("q * %d" % (self.rows * self.cols))
        if self.rows > 1:
            at.append(r if self.cols == 1 else "%s * %d" % (r, self.cols))
        if self.cols > 1:
            at.append(c)
        return "%s[%s]" % (self.name, " + ".join(at) or "0")


# -- planning: views folded into index maps, entries into loops ---------------------
class _Access:
    """How a loop over ``n`` elements reads slot ``slot``: element ``i`` is ``slot``'s
    element ``map[i]`` (``map`` None: element ``i`` itself)."""
    __slots__ = ("slot", "map")

    def __init__(self, slot, m, n=0, size=0):
        self.slot = slot
        self.map = None if (m is None or size == n and np.array_equal(m, np.arange(n))) else np.asarray(m, np.int64)


class _Entry:
    """An entry the program computes: ``kind`` "unary", "binary", "sum" (a sum or mean,
    over all or over groups: ``out_map``) or "matmul" (``dims`` n, k, m, batches: a call between
    the loops, not a member of one), its loop size ``n``, and per operand the
    access to its base (``ops``: tangents, adjoints; None for an operand that depends
    on no seeded slot) and to its own slot (``own``: values, as the tape saved them)."""
    __slots__ = ("slot", "kind", "op", "n", "ops", "own", "baked", "mean", "count", "out_map", "group", "dims", "add")


class _Plan:
    """The entries from the first seeded slot to the output that depend on a seeded
    slot, views folded into the index maps of their readers, the rest grouped into
    loops: an entry joins the first loop of its size after the loops that make its
    operands, or the very loop of one it reads element for element, whose values
    then pass in registers."""

    def __init__(self, T, lo, hi, seeds, targets, outs, kind="hvp"):
        ints, flts = T.arrays()
        aux = T.aux_array()
        # "hvp": forward over reverse from outs[0] (``out``), each wanted slot's adjoint and
        # its tangent; "grad", "hv": the adjoints alone, their tangents alone (``_RETURNS``);
        # "jvp": the tangents of ``outs`` only
        self.lo, self.kind, self.outs = lo, kind, list(outs)
        self.out = outs[0] if kind != "jvp" else None
        self.seeds, self.targets = list(seeds), list(targets)
        self.sizes = {}
        size = self._size = lambda s: self.sizes.setdefault(s, int(ints[s, _SIZE]))     # noqa: E731
        self.views = loops.Views(size)
        self.view = self.views.of       # view slot -> (base slot, base element of each of its elements)
        dep = set(seeds)
        self.entries, self.groups = [], []      # groups: [loop size, [members], a call (matmul) or a loop]
        self.group_of, self.sums, self.calls = {}, set(), set()
        for s in range(lo, hi + 1):
            row = ints[s]
            if row[_OP] < META_END:
                continue
            variadic = row[_C] == _tp.VARIADIC
            ins = ([int(i) for i in aux[row[_AUX] + 1:row[_AUX] + 1 + aux[row[_AUX]]]] if variadic else
                   [int(row[_A]), int(row[_B]), int(row[_C])])
            if not any(i in dep for i in ins if i >= 0):
                continue
            fam, k = family(int(row[_OP])), index(int(row[_OP]))
            if variadic and not (fam == SHAPE and k == CAT):
                raise Unsupported("entry %d has a list of inputs and is not a concatenation" % s)
            dep.add(s)
            if fam == SHAPE and k in (RESHAPE, STRIDED, GATHER):       # views and gathers: index maps
                at = int(row[_AUX])
                # (a gather's indices are auxiliary words: part of the key)
                self.views.add(s, int(row[_A]), strided_map_np(aux, at) if k == STRIDED else
                               aux[at:at + size(s)] if k == GATHER else None)
                continue
            self.entries.append(self._entry(s, row, fam, k, flts, aux, dep))
        for o in outs:          # (a jvp's output may be a view: its base's tangent through the map)
            b = self.view[o][0] if kind == "jvp" and o in self.view else o
            if b not in self.group_of and not (kind == "jvp" and b in seeds):
                raise Unsupported("an output is %s" % ("a view" if o in self.view else
                                                        "an input, or does not depend on the inputs"))
        if any(t not in seeds for t in targets):
            raise Unsupported("a wanted slot has no direction")
        if kind in ("grad", "hv") and any(t in self.group_of for t in targets):
            raise Unsupported("a wanted slot is computed by the program")     # (its adjoint is read, not only returned)
        n_loops = sum(not call for _, _, call in self.groups)
        if n_loops > MAX_LOOPS:
            raise Unsupported("its entries make %d loops (at most %d)" % (n_loops, MAX_LOOPS))

    def _chase(self, s):
        return self.views.chase(s)

    def _entry(self, s, row, fam, k, flts, aux, dep):
        size = self._size
        e = _Entry()
        e.slot, e.baked, e.mean, e.op = s, None, False, None
        if fam == SHAPE and k == CAT:
            return self._cat(e, s, row, aux, dep)
        if fam == SHAPE and k in (SETITEM, SCATTER_ADD, STRIDED_SCATTER):
            return self._scatter(e, s, row, aux, k, dep)
        if fam in (UNARY, UNARY2):
            e.kind, e.op, e.n = "unary", loops.ELEMENTWISE[fam][k], size(s)
            owns = [(int(row[_A]), np.arange(e.n))]
            if _baked_opcodes()[row[_OP]]:
                e.baked = (float(flts[s, _tp.F0]), float(flts[s, _tp.F1]))
        elif fam in (BINARY, BINARY2):
            e.kind, e.op, e.n = "binary", loops.ELEMENTWISE[fam][k], size(s)
            at, bits = int(row[_AUX]), int(row[_PARAM])
            owns = []
            for j in range(3):
                o = int(row[_A + j])
                if o < 0:
                    owns.append(None)
                    continue
                if at >= 0 and not bits & (8 << j):
                    m = strided_map_np(aux, at)
                elif size(o) == e.n:
                    m = np.arange(e.n)
                else:
                    m = np.zeros(e.n, np.int64)        # one element broadcast over the output
                if at >= 0:
                    at += 2 + 2 * int(aux[at])
                owns.append((o, m))
        elif fam == REDUCE and k in (_rd.SUM, _rd.MEAN):
            a, ngroups = int(row[_A]), int(row[_PARAM])
            e.kind, e.n, e.mean = "sum", size(a), k == _rd.MEAN
            e.count = float(size(a) // max(ngroups, 1))
            e.out_map = _Access(s, strided_map_np(aux, int(row[_AUX])) if ngroups != 1 else np.zeros(e.n, np.int64),
                                e.n, size(s))
            owns = [(a, np.arange(e.n))]
        elif fam == REDUCE and k in _GROUP_CALLS:
            a, ngroups = int(row[_A]), int(row[_PARAM])
            e.kind, e.op, e.n, e.count = "group", k, size(s), ngroups
            e.out_map = _Access(s, strided_map_np(aux, int(row[_AUX])) if ngroups != 1 else
                                np.zeros(size(a), np.int64), size(a), size(s))     # (each input element's group)
            owns = [(a, np.arange(size(a)))]
        elif fam == LINALG and k == 0:          # matmul
            at = int(row[_AUX])
            nb, n, kk, m = (int(v) for v in aux[at:at + 4])
            ia, ib = aux[at + 4:at + 4 + 2 * nb:2], aux[at + 5:at + 5 + 2 * nb:2]
            e.kind, e.n, e.dims = "matmul", size(s), (n, kk, m, nb)
            # each operand read batch by batch, as the products use them (a broadcast batch again)
            owns = [(int(row[_A]), (ia[:, None] * (n * kk) + np.arange(n * kk)).ravel()),
                    (int(row[_B]), (ib[:, None] * (kk * m) + np.arange(kk * m)).ravel())]
        else:
            raise Unsupported("entry %d (family %d, kernel %d) has no compiled forward-mode rule" % (s, fam, k))
        e.own, e.ops = [], []
        for got in owns:
            if got is None:
                e.own.append(None)
                e.ops.append(None)
                continue
            o, m = got
            e.own.append(_Access(o, m, len(m), size(o)))
            b, mb = self._chase(o)
            e.ops.append(_Access(b, mb[m], len(m), size(b)) if b in dep else None)
        if e.kind in ("matmul", "group"):       # its own group, after everything so far (so after its operands)
            g = len(self.groups)
            self.groups.append([e.n, [], True])
            self.calls.add(s)
        else:
            first = 0
            for acc in e.ops:
                if acc is not None and acc.slot in self.group_of:
                    g = self.group_of[acc.slot]
                    first = max(first, g if (acc.map is None and acc.slot not in self.sums
                                             and acc.slot not in self.calls) else g + 1)
            g = next((j for j in range(first, len(self.groups))
                      if self.groups[j][0] == e.n and not self.groups[j][2]), None)
            if g is None:
                g = len(self.groups)
                self.groups.append([e.n, [], False])
        self.groups[g][1].append(e)
        e.group = self.group_of[s] = g
        if e.kind == "sum":
            self.sums.add(s)
        return e

    def _cat(self, e, s, row, aux, dep):
        """A concatenation: each input's elements go to their places in the output."""
        at = int(row[_AUX])
        m = int(aux[at])
        outer, total = int(aux[at + 1 + m]), int(aux[at + 2 + m])
        pieces = []
        for j in range(m):
            o, inner, off = int(aux[at + 1 + j]), int(aux[at + 3 + m + 2 * j]), int(aux[at + 4 + m + 2 * j])
            i = np.arange(outer * inner)
            pieces.append((o, i, (i // inner) * total + off + i % inner if inner else i))
        return self._placement(e, s, pieces, False, dep)

    def _scatter(self, e, s, row, aux, k, dep):
        """A setitem (``y`` where it is not written, ``v``'s elements ``vmap`` at ``lin``,
        in order: the last write wins), or a scatter (SCATTER_ADD, STRIDED_SCATTER: the
        transposes of a gather and of a strided view, which add into their places)."""
        n, a, at = self._size(s), int(row[_A]), int(row[_AUX])
        if k == SETITEM:
            r = int(aux[at])
            lin, vmap = aux[at + 1:at + 1 + r], aux[at + 1 + r:at + 1 + 2 * r]
            keep = np.setdiff1d(np.arange(n), lin)
            return self._placement(e, s, [(a, keep, keep), (int(row[_B]), vmap, lin)], False, dep)
        na = self._size(a)
        place = strided_map_np(aux, at) if k == STRIDED_SCATTER else aux[at:at + na]
        return self._placement(e, s, [(a, np.arange(na), place)], True, dep)

    def _placement(self, e, s, pieces, add, dep):
        """A call between the loops, linear: for each (input, its elements, their places in
        the output), the input's tangents copied (``add``: added) to those places of the
        output's; in reverse, the adjoints read back from them (``dims``: the places)."""
        e.kind, e.n, e.own, e.ops, e.dims, e.add = "cat", self._size(s), [], [], [], add
        for o, elems, place in pieces:
            e.dims.append(np.asarray(place, np.int64))
            if o < 0:
                e.ops.append(None)
                continue
            b, mb = self._chase(o)
            e.ops.append(_Access(b, mb[elems], len(elems), self._size(b)) if b in dep else None)
        g = len(self.groups)
        self.groups.append([e.n, [e], True])
        self.calls.add(s)
        e.group = self.group_of[s] = g
        return e

    def in_register(self, e, acc):
        """Whether entry ``e`` reads operand ``acc`` in a register of its own loop (a
        member of the loop, element for element: the grouping makes it so)."""
        return self.group_of.get(acc.slot) == e.group


class _Source:
    """The program's text: a forward loop for each loop whose tangents a later loop
    reads; then, in reverse order, each loop's reverse: its tangents again, then its
    adjoints and their tangents (``g<s>``, ``h<s>``) in registers within the loop, in
    arrays (``ag<s>``, ``ah<s>``) across loops and for the wanted slots."""

    def __init__(self, plan):
        p = self.p = plan
        self.maps, self._map_ids, self.values = [], {}, []
        self.lines = []
        self._loops, self._dp = 0, ""
        self._own = []          # (name, size): the buffers of ``_adjoint_arrays``, in the work array
        self.t_arrays, self.a_arrays = set(), set(p.targets)      # slots whose tangent, adjoint cross loops
        # slots whose adjoint's tangent array has been added to (by the loops emitted so
        # far, which come after theirs on the tape): the others' is structurally zero and
        # read as None, so that no rule multiplies a zero into an infinite partial
        self.h_live = set()
        for e in p.entries:
            for acc in e.ops:
                if acc is not None and not p.in_register(e, acc):
                    self.a_arrays.add(acc.slot)
                    if acc.slot not in p.seeds:
                        self.t_arrays.add(acc.slot)
        if p.kind == "jvp":             # (no reverse: the outputs' tangents are what it returns)
            self.a_arrays = set()
            self.t_arrays.update(p.view[o][0] if o in p.view else o for o in p.outs)
            self.t_arrays -= set(p.seeds)

    def emit(self, depth, line):
        self.lines.append("    " * depth + line)

    def _idx(self, m):
        """Element ``i`` through map ``m`` (None: ``i``): a constant, an affine
        expression, or an index array of the program's arguments."""
        if m is None:
            return "i"
        aff = loops.affine(m, (m.size,)) if m.size else None
        if aff is not None:
            return loops.index(aff[0], aff[1], ("i",))
        key = m.tobytes()
        j = self._map_ids.get(key)
        if j is None:
            j = self._map_ids[key] = len(self.maps)
            self.maps.append(np.ascontiguousarray(m, np.int64))
        return "m%d[i]" % j

    def _value(self, acc):
        if acc.slot not in self.values:
            self.values.append(acc.slot)
        return "v%d[%s]" % (acc.slot, self._idx(acc.map))

    def _tangent(self, e, acc):
        if acc is None:
            return None
        if self.p.in_register(e, acc):
            return "%s%d" % (self._dp, acc.slot)
        return "%s[%s]" % (self._tangents_of(acc.slot), self._idx(acc.map))

    def _tangents_of(self, slot):
        """The name of the array of ``slot``'s tangents: a seed's argument, or its ``t`` array."""
        return "%s%d" % ("s" if slot in self.p.seeds else "t", slot)

    def _unary_env(self, e, tangents=False):
        if e.baked is None:
            env = {"p": ("p%d" % e.slot, None), "q": ("q%d" % e.slot, None)}
        else:
            env = {"p": (_literal(e.baked[0]), None), "q": (_literal(e.baked[1]), None)}
        env["x"] = (self._value(e.own[0]) if e.op.saves & 1 else "0.0", self._tangent(e, e.ops[0]) if tangents else None)
        env["y"] = (self._value(_Access(e.slot, None)) if e.op.saves & 8 else "0.0",
                    "%s%d" % (self._dp, e.slot) if tangents else None)
        return env

    def _binary_env(self, e, rule, tangents=False):
        """The names rule ``rule`` (0: a's, 1: b's) reads."""
        reads = e.op.reads[rule]
        env = {}
        for j, name in enumerate("abc"):
            if e.own[j] is None or not reads & (1 << j):
                env[name] = ("0.0", None)
            else:
                env[name] = (self._value(e.own[j]), self._tangent(e, e.ops[j]) if tangents and j < 2 else None)
        env["y"] = (self._value(_Access(e.slot, None)) if reads & 8 else "0.0",
                    "%s%d" % (self._dp, e.slot) if tangents and reads & 8 else None)
        return env

    def _tangent_expr(self, e):
        if e.kind == "unary":
            return dual(e.op.rule, dict(self._unary_env(e), g=(self._tangent(e, e.ops[0]), None)))[0]
        terms = []
        for j, rule in ((0, e.op.rule_a), (1, e.op.rule_b)):
            t = self._tangent(e, e.ops[j])
            if t is not None:
                terms.append(dual(rule, dict(self._binary_env(e, j), g=(t, None)))[0])
        return " + ".join(terms) if terms else "0.0"

    def build(self):
        p = self.p
        body = self.lines
        for n, members, call in p.groups:
            if any(e.slot in self.t_arrays for e in members):
                (self._forward_call if call else self._forward)(n, members)
        if p.kind != "jvp":
            for n, members, call in reversed(p.groups):
                (self._reverse_call if call else self._reverse)(n, members)
            ret = "return (%s,)" % ", ".join("%s%d" % (a, t) for t in p.targets for a in _RETURNS[p.kind])
        else:       # (new arrays: the work array is the next call's)
            ret = "return (%s,)" % ", ".join([self._jvp_output(o) for o in p.outs])
        self.lines = head = []
        args = (["prm", "work"] + ["v%d" % s for s in self.values] + ["m%d" % j for j in range(len(self.maps))]
                + ["s%d" % s for s in p.seeds])
        self.emit(0, loops.decorator())
        self.emit(0, "def run(%s):" % ", ".join(args))
        self.work = 0
        for s in sorted(self.t_arrays):
            self.emit(1, "t%d = work[%d:%d]" % (s, self.work, self.work + p.sizes[s]))
            self.work += p.sizes[s]
        zero_from = self.work
        for s in sorted(self.a_arrays):
            n = p.sizes[s]
            if s in p.targets:
                self.emit(1, "ag%d, ah%d = np.zeros(%d), np.zeros(%d)" % (s, s, n, n))
            else:
                self.emit(1, "ag%d, ah%d = work[%d:%d], work[%d:%d]" % (s, s, self.work, self.work + n,
                                                                      self.work + n, self.work + 2 * n))
                self.work += 2 * n
        if self.work > zero_from:   # (the adjoints, in one loop: a slice assignment per array compiles slowly)
            self.emit(1, "for i in range(%d, %d):" % (zero_from, self.work))
            self.emit(2, "work[i] = 0.0")
        for name, n in self._own:
            self.emit(1, "%s = work[%d:%d]" % (name, self.work, self.work + n))
            self.work += n
        for e in p.entries:
            if e.kind == "unary" and e.baked is None:
                self.emit(1, "p%d, q%d = prm[%d, 0], prm[%d, 1]" % (e.slot, e.slot, e.slot - p.lo, e.slot - p.lo))
        source = "\n".join(head + body + ["    " + ret]) + "\n"
        if p.kind in ("grad", "hv"):
            left_out = "h" if p.kind == "grad" else "g"
            source = _without_sinks(source, {"a%s%d" % (left_out, t) for t in p.targets},
                                    re.compile(r"[bc]%s(%s)_\d+$" % (left_out, "|".join(map(str, p.targets)))))
        return source

    def _jvp_output(self, o):
        """A jvp's output tangent as a new array: its own, or its base's through the map."""
        b, m = self.p.view.get(o, (o, None))
        name = self._tangents_of(b)
        if m is None or (m.size == self.p._size(b) and np.array_equal(m, np.arange(m.size))):
            return "%s.copy()" % name
        self._loops += 1
        out = "o%d" % self._loops
        self.lines += ["    %s = np.empty(%d)" % (out, m.size), "    for i in range(%d):" % m.size,
                       "        %s[i] = %s[%s]" % (out, name, self._idx(m))]
        return out

    def _forward(self, n, members):
        """The members' tangents, written where a later loop reads them."""
        pre, post = [], []
        self._loops += 1
        self._dp = "f%d_" % self._loops       # (every name assigned once: Numba's SSA pass is then quick)
        start = len(self.lines)
        for e in members:
            if e.kind != "sum":
                self.emit(2, "%s%d = %s" % (self._dp, e.slot, self._tangent_expr(e)))
                if e.slot in self.t_arrays:
                    self.emit(2, "t%d[i] = %s%d" % (e.slot, self._dp, e.slot))
                continue
            if e.slot not in self.t_arrays:
                continue
            at, t, scale = self._idx(e.out_map.map), self._tangent(e, e.ops[0]), " / %r" % e.count if e.mean else ""
            if at.isdigit():        # (a total: in a local)
                pre.append("acc%d = 0.0" % e.slot)
                self.emit(2, "acc%d += %s" % (e.slot, t))
                post.append("t%d[%s] = acc%d%s" % (e.slot, at, e.slot, scale))
            else:
                pre.append("for i in range(%d): t%d[i] = 0.0" % (self.p.sizes[e.slot], e.slot))
                self.emit(2, "t%d[%s] += %s" % (e.slot, at, t))
                if e.mean:
                    post.append("for i in range(%d): t%d[i] = t%d[i]%s" % (self.p.sizes[e.slot], e.slot, e.slot, scale))
        self._loop(n, start, pre, post)

    def _loop(self, n, start, pre, post):
        """The lines emitted since ``start`` (one iteration's, at depth 2) made the loop over
        ``n`` elements, with ``pre`` before it and ``post`` after it."""
        body = [ln[8:] for ln in self.lines[start:]]
        self.lines[start:] = loops.nest((n,), body, pre, post, names=("i",))

    def _reverse(self, n, members):
        p = self.p
        pre, post = [], []
        consts = {}
        self._loops += 1
        self._dp = "d%d_" % self._loops
        self._adj = {}          # slot -> the names of its adjoint and that's tangent now (each assigned once)
        # additions into arrays at ``off + i``, carried to the next iteration
        self._shifted = loops.ShiftedSums(_shifted_index, in_order=False)
        start = len(self.lines)
        for e in members:
            if e.kind != "sum":
                self.emit(2, "%s%d = %s" % (self._dp, e.slot, self._tangent_expr(e)))
        for e in members:       # each member's adjoint: the seed, what later loops left, or 0
            s = e.slot
            at = self._idx(e.out_map.map) if e.kind == "sum" else "i"
            if s == p.out:
                first = ("1.0", None)
            elif s in self.a_arrays:
                first = ("ag%d[%s]" % (s, at), "ah%d[%s]" % (s, at) if s in self.h_live else None)
            else:
                first = ("0.0", None)
            self._adj[s] = ["g%d_0" % s, None if first[1] is None else "h%d_0" % s, 0]
            self.emit(2, "g%d_0 = %s" % (s, first[0]))
            if first[1] is not None:
                self.emit(2, "h%d_0 = %s" % (s, first[1]))
        for e in reversed(members):
            s = e.slot
            g, h = self._adj[s][:2]
            if e.kind == "sum":
                scale = " / %r" % e.count if e.mean else ""
                self._add(e, e.ops[0], g + scale, None if h is None else h + scale, consts, pre, post)
                continue
            for j, rule in ([(0, e.op.rule)] if e.kind == "unary" else [(0, e.op.rule_a), (1, e.op.rule_b)]):
                if e.ops[j] is None:
                    continue
                env = self._unary_env(e, True) if e.kind == "unary" else self._binary_env(e, j, True)
                c0, curvature = dual(rule, dict(env, g=(g, None)))
                c1 = None if h is None else dual(rule, dict({k: (v, None) for k, (v, _) in env.items()},
                                                            g=(h, None)))[0]
                self._add(e, e.ops[j], c0, plus(c1, curvature), consts, pre, post)
        before, _, end, after = self._shifted.carry(n)      # (nothing at an iteration's start: not in order)
        for ln in end:
            self.emit(2, ln)
        self._loop(n, start, pre + before, post + after)

    # -- a matrix product between the loops: np.dot on whole arrays ---------------------
    def _whole(self, name, acc, size):
        """Array ``name`` read through ``acc``'s map as a 1-D array of ``size`` elements
        (gathered into a new one unless the map is the identity)."""
        if acc.map is None:
            return name
        self._loops += 1
        tmp = "x%d" % self._loops
        self.emit(1, "%s = np.empty(%d)" % (tmp, size))
        self.emit(1, "for i in range(%d):" % size)
        self.emit(2, "%s[i] = %s[%s]" % (tmp, name, self._idx(acc.map)))
        return tmp

    def _operands(self, e):
        """The matrix product ``e``'s operands as ``_Matrix``es, values and tangents
        (None where an operand depends on no seeded slot)."""
        n, kk, m, nb = e.dims
        vals, tans = [], []
        for j, (rows, cols) in ((0, (n, kk)), (1, (kk, m))):
            size = nb * rows * cols
            own = e.own[j]
            if e.ops[1 - j] is None:
                vals.append(None)       # (only the other operand's rules read it: the tape kept it only then)
            else:
                if own.slot not in self.values:
                    self.values.append(own.slot)
                vals.append(_Matrix(self._whole("v%d" % own.slot, own, size), rows, cols))
            acc = e.ops[j]
            tans.append(None if acc is None else
                        _Matrix(self._whole(self._tangents_of(acc.slot), acc, size), rows, cols))
        return vals, tans

    def _product(self, e, into, terms, new=True):
        """``into`` (a new array, else an existing one) = the sum of the products of the
        ``terms`` (pairs of ``_Matrix``), flattened, batch by batch when ``e`` has several."""
        nb = e.dims[3]
        (rows, inner), cols = terms[0][0].shape, terms[0][1].shape[1]
        size = nb * rows * cols
        if new:
            self.emit(1, "%s = np.empty(%d)" % (into, size))
        if nb * rows * inner * cols > SMALL_PRODUCT:
            expr = " + ".join("np.dot(%s, %s)" % (a.whole(nb), b.whole(nb)) for a, b in terms)
            if nb == 1:
                self.emit(1, "%s[:] = (%s).reshape(-1)" % (into, expr))
            else:
                self.emit(1, "for q in range(%d):" % nb)
                self.emit(2, "%s[q * %d:(q + 1) * %d] = (%s).reshape(-1)" % (into, size // nb, size // nb, expr))
            return
        self._loops += 1
        total = "mm%d" % self._loops      # (each name assigned in one place: Numba's SSA pass is then quick)
        body = "%s += %s" % (total, " + ".join("%s * %s" % (a.element("r", "k", nb), b.element("k", "c", nb))
                                               for a, b in terms))
        shape, names = ((nb,) if nb > 1 else ()) + (rows, cols, inner), (("q",) if nb > 1 else ()) + ("r", "c", "k")
        self.lines += loops.nest(shape, [body], ["%s = 0.0" % total],
                                 ["%s = %s" % (_Matrix(into, rows, cols).element("r", "c", nb), total)], names=names)

    def _forward_call(self, n, members):
        """The product rule: dC = dA B + A dB."""
        e, = members
        if e.kind == "cat":
            if e.add or any(acc is None for acc in e.ops):
                self.emit(1, "for i in range(%d): t%d[i] = 0.0" % (self.p.sizes[e.slot], e.slot))
            for acc, place in zip(e.ops, e.dims):
                if acc is not None and place.size:
                    base = self._tangents_of(acc.slot)
                    self.emit(1, "for i in range(%d):" % place.size)
                    self.emit(2, "t%d[%s] %s= %s[%s]" % (e.slot, self._idx(place), "+" if e.add else "", base,
                                                        self._idx(acc.map)))
            return
        if e.kind == "group":
            self._group_tangent(e, "t%d" % e.slot)
            return
        (A, B), (tA, tB) = self._operands(e)
        self._product(e, "t%d" % e.slot, ([] if tA is None else [(tA, B)]) + ([] if tB is None else [(A, tB)]),
                      new=False)

    def _reverse_call(self, n, members):
        """dA = G B^T and dB = A^T G, and their tangents: H B^T + G dB^T and A^T H + dA^T G."""
        e, = members
        if e.kind == "group":
            return self._reverse_group(e)
        if e.kind == "cat":         # (linear: the adjoints' tangents pass as the adjoints do)
            if e.slot == self.p.out:
                G, H = "1.0", None
            elif e.slot in self.a_arrays:
                G, H = "ag%d[%%s]" % e.slot, "ah%d[%%s]" % e.slot if e.slot in self.h_live else None
            else:
                return
            for acc, place in zip(e.ops, e.dims):
                if acc is not None and place.size:
                    at, to = self._idx(place), self._idx(acc.map)
                    self.emit(1, "for i in range(%d):" % place.size)
                    self.emit(2, "ag%d[%s] += %s" % (acc.slot, to, G % at if "%" in G else G))
                    if H:
                        self.emit(2, "ah%d[%s] += %s" % (acc.slot, to, H % at))
                        self.h_live.add(acc.slot)
            return
        s, (rows, inner, cols, nb) = e.slot, e.dims
        if s == self.p.out:
            G, H = _Matrix(None, rows, cols), None
        elif s in self.a_arrays:
            G, H = _Matrix("ag%d" % s, rows, cols), _Matrix("ah%d" % s, rows, cols) if s in self.h_live else None
        else:
            return              # (it reaches no output: no adjoint)
        (A, B), (tA, tB) = self._operands(e)
        parts = ([] if e.ops[0] is None else
                 [(0, [(G, B.T)], [] if H is None else [(H, B.T)], [] if tB is None else [(G, tB.T)])])
        parts += ([] if e.ops[1] is None else
                  [(1, [(A.T, G)], [] if H is None else [(A.T, H)], [] if tA is None else [(tA.T, G)])])
        for j, dg, dh, curvature in parts:
            acc = e.ops[j]
            self._loops += 1
            g, h = "cg%d" % self._loops, "ch%d" % self._loops
            dh = dh + curvature         # (empty: no tangent to add)
            self._product(e, g, dg)
            if dh:
                self._product(e, h, dh)
                self.h_live.add(acc.slot)
            at = "i" if acc.map is None else self._idx(acc.map)
            self.emit(1, "for i in range(%d):" % (nb * (rows * inner if j == 0 else inner * cols)))
            self.emit(2, "ag%d[%s] += %s[i]" % (acc.slot, at, g))
            if dh:
                self.emit(2, "ah%d[%s] += %s[i]" % (acc.slot, at, h))

    # -- reductions by groups between the loops: loops over the whole arrays ---------------
    # logsumexp, softmax, log_softmax, var, std and the extremum (amax, max()...), each
    # as the NumPy walk's rules (ops/reduce.py's forward_mode): its output's tangent,
    # the adjoint of its input and that adjoint's tangent.
    def _group_values(self, e):
        """The names the rules read: x's tangent ``tx``, the group ``g`` of element i,
        values ``x``, ``y`` (input, output), and per-group statistics."""
        acc = e.ops[0]
        n = e.own[0].map.size if e.own[0].map is not None else self.p.sizes[e.own[0].slot]
        base = self._tangents_of(acc.slot)
        k = e.op
        reads = (e.slot,) if k in (_rd.SOFTMAX, _rd.LOG_SOFTMAX) else () if k == _rd.CUMSUM else \
            (e.own[0].slot,) if k in (_rd.VAR, _rd.PROD) else (e.own[0].slot, e.slot)
        for slot in reads:
            if slot not in self.values:
                self.values.append(slot)
        self._loops += 1
        j = self._loops
        v = {"tx": self._whole(base, acc, n), "n": n, "g": self._idx(e.out_map.map), "j": j,
             "y": "v%d" % e.slot, "x": "v%d" % e.own[0].slot, "G": e.count, "L": n // max(e.count, 1),
             "f0": "prm[%d, 0]" % (e.slot - self.p.lo)}
        loop = "for i in range(%d):" % n
        if k in (_rd.VAR, _rd.STD):         # c = x - the group's mean, the tangent's mean TM
            self.emit(1, "M%(j)d, TM%(j)d = np.zeros(%(G)d), np.zeros(%(G)d)" % v)
            self.emit(1, loop)
            self.emit(2, "M%(j)d[%(g)s] += %(x)s[i]" % v)
            self.emit(2, "TM%(j)d[%(g)s] += %(tx)s[i]" % v)
            self.emit(1, "for q in range(%(G)d):" % v)
            self.emit(2, "M%(j)d[q] /= %(L)d" % v)
            self.emit(2, "TM%(j)d[q] /= %(L)d" % v)
            self.emit(1, "D%(j)d = %(L)d - %(f0)s" % v)
            v["c"] = "(%(x)s[i] - M%(j)d[%(g)s])" % v
        elif k == _rd.EXTREMUM:             # hits: the elements equal to their group's extremum
            v["hit"] = "(%(x)s[i] == %(y)s[%(g)s] or (%(x)s[i] != %(x)s[i] and %(y)s[%(g)s] != %(y)s[%(g)s]))" % v
            v["bad"] = "(%(f0)s != 0.0 and %(y)s[%(g)s] != %(y)s[%(g)s])" % v   # (amax's NaN: NaN to all)
            self.emit(1, "C%(j)d = np.zeros(%(G)d)" % v)
            self.emit(1, loop)
            self.emit(2, "if %(hit)s:" % v)
            self.emit(3, "C%(j)d[%(g)s] += 1.0" % v)
            self.emit(1, "for q in range(%(G)d):" % v)
            self.emit(2, "if C%(j)d[q] == 0.0:" % v)
            self.emit(3, "C%(j)d[q] = 1.0" % v)
            v["w"] = "(np.nan if %(bad)s else (1.0 / C%(j)d[%(g)s] if %(hit)s else 0.0))" % v
        elif k == _rd.PROD:     # per group: zeros Z, the product of the others P, sum t/x over them, t over zeros
            self.emit(1, "Z%(j)d, P%(j)d, ST%(j)d, TZ%(j)d = np.zeros(%(G)d), np.ones(%(G)d), np.zeros(%(G)d), "
                         "np.zeros(%(G)d)" % v)
            self.emit(1, loop)
            self.emit(2, "if %(x)s[i] == 0.0:" % v)
            self.emit(3, "Z%(j)d[%(g)s] += 1.0" % v)
            self.emit(3, "TZ%(j)d[%(g)s] += %(tx)s[i]" % v)
            self.emit(2, "else:")
            self.emit(3, "P%(j)d[%(g)s] *= %(x)s[i]" % v)
            self.emit(3, "ST%(j)d[%(g)s] += %(tx)s[i] / %(x)s[i]" % v)
            # the product of the others (PyTorch's result / input without zeros; with one, the
            # zero's is the product of the rest, 0 elsewhere; with more, 0)
            v["w"] = ("(P%(j)d[%(g)s] / %(x)s[i] if Z%(j)d[%(g)s] == 0.0 else "
                      "(P%(j)d[%(g)s] if Z%(j)d[%(g)s] == 1.0 and %(x)s[i] == 0.0 else 0.0))" % v)
        return v

    def _group_tangent(self, e, into):
        """The output's tangent into the array ``into``, emitted; returns the names."""
        v = self._group_values(e)
        k = e.op
        v["into"] = into
        self.emit(1, "for i in range(%d):" % e.n)
        self.emit(2, "%s[i] = 0.0" % into)
        loop = "for i in range(%(n)d):" % v
        if k == _rd.CUMSUM:             # a running sum along each row (its elements in flat order)
            self.emit(1, "R%(j)d = np.zeros(%(G)d)" % v)
            self.emit(1, loop)
            self.emit(2, "R%(j)d[%(g)s] += %(tx)s[i]" % v)
            self.emit(2, "%(into)s[i] = R%(j)d[%(g)s]" % v)
            return v
        if k in (_rd.LOGSUMEXP, _rd.VAR, _rd.STD, _rd.EXTREMUM, _rd.PROD):     # dy = sum of w dx over the group
            w = {_rd.LOGSUMEXP: "exp(%(x)s[i] - %(y)s[%(g)s])", _rd.VAR: "2.0 * %(c)s / D%(j)d",
                 _rd.STD: "(%(c)s / (D%(j)d * %(y)s[%(g)s]) if %(y)s[%(g)s] != 0.0 else 0.0)",
                 _rd.EXTREMUM: "%(w)s", _rd.PROD: "%(w)s"}[k] % v
            self.emit(1, loop)
            self.emit(2, "%s[%s] += %s * %s[i]" % (into, v["g"], w, v["tx"]))
            return v
        p = "%(y)s[i]" % v if k == _rd.SOFTMAX else "exp(%(y)s[i])" % v
        self.emit(1, "S%(j)d = np.zeros(%(G)d)" % v)
        self.emit(1, loop)
        self.emit(2, "S%s[%s] += %s * %s[i]" % (v["j"], v["g"], p, v["tx"]))
        self.emit(1, loop)
        if k == _rd.SOFTMAX:            # dy = y (dx - sum y dx)
            self.emit(2, "%(into)s[i] = %(y)s[i] * (%(tx)s[i] - S%(j)d[%(g)s])" % v)
        else:                           # dy = dx - sum p dx, p = exp(y)
            self.emit(2, "%(into)s[i] = %(tx)s[i] - S%(j)d[%(g)s]" % v)
        return v

    def _reverse_group(self, e):
        s, acc = e.slot, e.ops[0]
        if s == self.p.out:
            G, H = "np.ones(%d)" % e.n, None
        elif s in self.a_arrays:
            G, H = "ag%d" % s, "ah%d" % s if s in self.h_live else None
        else:
            return
        if s in self.t_arrays or e.op not in _REVERSE_READS_TY:     # (written by the forward loops, or not read)
            v = self._group_values(e)
            v["into"] = "t%d" % s if s in self.t_arrays else None
        else:
            self._loops += 1
            self.emit(1, "ty%d = np.empty(%d)" % (self._loops, e.n))
            v = self._group_tangent(e, "ty%d" % self._loops)
        v.update(ty=v["into"], gy="gy%(j)d" % v, hy="hy%(j)d" % v, gx="gx%(j)d" % v, hx="hx%(j)d" % v)
        k = e.op
        # the adjoint's tangent hy is structurally zero (H None): its terms are left out, as in
        # the NumPy walk, and a linear group (no curvature) gives its input none either
        hz = H is None
        has_hx = not (hz and k in (_rd.CUMSUM, _rd.EXTREMUM))

        def h(term, rest=None):
            """``term + rest`` with the hy term left out where hy is zero."""
            if hz:
                return rest if rest is not None else "0.0"
            return term if rest is None else "%s + %s" % (term, rest)
        self.emit(1, "%s = %s" % (v["gy"], G))
        if not hz:
            self.emit(1, "%s = %s" % (v["hy"], H))
        self.emit(1, ("%(gx)s, %(hx)s = np.empty(%(n)d), np.empty(%(n)d)" if has_hx
                      else "%(gx)s = np.empty(%(n)d)") % v)
        loop = "for i in range(%(n)d):" % v
        if k == _rd.CUMSUM:             # linear: the running sums from each row's end
            self.emit(1, ("RG%(j)d, RH%(j)d = np.zeros(%(G)d), np.zeros(%(G)d)" if has_hx
                          else "RG%(j)d = np.zeros(%(G)d)") % v)
            self.emit(1, "for i in range(%(n)d - 1, -1, -1):" % v)
            self.emit(2, "RG%(j)d[%(g)s] += %(gy)s[i]" % v)
            self.emit(2, "%(gx)s[i] = RG%(j)d[%(g)s]" % v)
            if has_hx:
                self.emit(2, "RH%(j)d[%(g)s] += %(hy)s[i]" % v)
                self.emit(2, "%(hx)s[i] = RH%(j)d[%(g)s]" % v)
        elif k == _rd.LOGSUMEXP:        # dx = gy p, its tangent hy p + gy p (dx - dy)
            self.emit(1, loop)
            self.emit(2, "pe%(j)d = exp(%(x)s[i] - %(y)s[%(g)s])" % v)
            self.emit(2, "%(gx)s[i] = %(gy)s[%(g)s] * pe%(j)d" % v)
            self.emit(2, ("%(hx)s[i] = " % v) + h("%(hy)s[%(g)s] * pe%(j)d" % v,
                                                "%(gy)s[%(g)s] * pe%(j)d * (%(tx)s[i] - %(ty)s[%(g)s])" % v))
        elif k == _rd.VAR:              # dx = gy 2 c / D, its tangent hy 2 c / D + gy 2 (dx - mean dx) / D
            self.emit(1, loop)
            self.emit(2, "%(gx)s[i] = %(gy)s[%(g)s] * 2.0 * %(c)s / D%(j)d" % v)
            self.emit(2, ("%(hx)s[i] = (" % v) + h("%(hy)s[%(g)s] * 2.0 * %(c)s" % v,
                                                 "%(gy)s[%(g)s] * 2.0 * (%(tx)s[i] - TM%(j)d[%(g)s])" % v)
                      + ") / D%(j)d" % v)
        elif k == _rd.STD:              # var's over 2 y, 0 where y is 0
            self.emit(1, loop)
            self.emit(2, "if %(y)s[%(g)s] != 0.0:" % v)
            self.emit(3, "%(gx)s[i] = %(gy)s[%(g)s] * %(c)s / (D%(j)d * %(y)s[%(g)s])" % v)
            self.emit(3, ("%(hx)s[i] = (" % v) + h("%(hy)s[%(g)s] * %(c)s / %(y)s[%(g)s]" % v,
                                                 "%(gy)s[%(g)s] * ((%(tx)s[i] - TM%(j)d[%(g)s]) / %(y)s[%(g)s]"
                                                 " - %(c)s * %(ty)s[%(g)s] / (%(y)s[%(g)s] * %(y)s[%(g)s]))" % v)
                      + ") / D%(j)d" % v)
            self.emit(2, "else:")
            self.emit(3, "%(gx)s[i] = 0.0" % v)
            self.emit(3, "%(hx)s[i] = 0.0" % v)
        elif k == _rd.PROD:             # dx = gy w, its tangent hy w + gy dw (dw: the others' tangent)
            self.emit(1, loop)
            self.emit(2, "w%(j)d = %(w)s" % v)
            self.emit(2, "%(gx)s[i] = %(gy)s[%(g)s] * w%(j)d" % v)
            self.emit(2, "if Z%(j)d[%(g)s] == 0.0:" % v)
            self.emit(3, "dw%(j)d = w%(j)d * (ST%(j)d[%(g)s] - %(tx)s[i] / %(x)s[i])" % v)
            self.emit(2, "elif Z%(j)d[%(g)s] == 1.0:" % v)     # (only the zero's t moves a non-zero's others)
            self.emit(3, "dw%(j)d = TZ%(j)d[%(g)s] * P%(j)d[%(g)s] / %(x)s[i] if %(x)s[i] != 0.0 else "
                         "P%(j)d[%(g)s] * ST%(j)d[%(g)s]" % v)
            self.emit(2, "elif Z%(j)d[%(g)s] == 2.0 and %(x)s[i] == 0.0:" % v)     # (the other zero's t)
            self.emit(3, "dw%(j)d = (TZ%(j)d[%(g)s] - %(tx)s[i]) * P%(j)d[%(g)s]" % v)
            self.emit(2, "else:")
            self.emit(3, "dw%(j)d = 0.0" % v)
            self.emit(2, ("%(hx)s[i] = " % v) + h("%(hy)s[%(g)s] * w%(j)d" % v, "%(gy)s[%(g)s] * dw%(j)d" % v))
        elif k == _rd.EXTREMUM:         # the ties share the adjoint; no curvature
            self.emit(1, loop)
            self.emit(2, "if %(bad)s:" % v)
            self.emit(3, "%(gx)s[i] = np.nan" % v)
            if has_hx:
                self.emit(3, "%(hx)s[i] = np.nan" % v)
            self.emit(2, "elif %(hit)s:" % v)
            self.emit(3, "%(gx)s[i] = %(gy)s[%(g)s] / C%(j)d[%(g)s]" % v)
            if has_hx:
                self.emit(3, "%(hx)s[i] = %(hy)s[%(g)s] / C%(j)d[%(g)s]" % v)
            self.emit(2, "else:")
            self.emit(3, "%(gx)s[i] = 0.0" % v)
            if has_hx:
                self.emit(3, "%(hx)s[i] = 0.0" % v)
        else:
            self.emit(1, "S%(j)d_1, S%(j)d_2 = np.zeros(%(G)d), np.zeros(%(G)d)" % v)
            self.emit(1, loop)
            if k == _rd.SOFTMAX:        # dx = y (gy - sum gy y), its tangent by the product rule
                self.emit(2, "S%(j)d_1[%(g)s] += %(gy)s[i] * %(y)s[i]" % v)
                self.emit(2, ("S%(j)d_2[%(g)s] += " % v) + h("%(hy)s[i] * %(y)s[i]" % v, "%(gy)s[i] * %(ty)s[i]" % v))
                self.emit(1, loop)
                self.emit(2, "%(gx)s[i] = %(y)s[i] * (%(gy)s[i] - S%(j)d_1[%(g)s])" % v)
                self.emit(2, ("%(hx)s[i] = %(ty)s[i] * (%(gy)s[i] - S%(j)d_1[%(g)s])" % v)
                          + (" + %(y)s[i] * (" % v) + h("%(hy)s[i]" % v, "-S%(j)d_2[%(g)s]" % v) + ")")
            else:                       # dx = gy - p sum gy, p = exp(y), dp = p dy
                self.emit(2, "S%(j)d_1[%(g)s] += %(gy)s[i]" % v)
                if not hz:
                    self.emit(2, "S%(j)d_2[%(g)s] += %(hy)s[i]" % v)
                self.emit(1, loop)
                self.emit(2, "pe%(j)d = exp(%(y)s[i])" % v)
                self.emit(2, "%(gx)s[i] = %(gy)s[i] - pe%(j)d * S%(j)d_1[%(g)s]" % v)
                self.emit(2, ("%(hx)s[i] = " % v) + h("%(hy)s[i]" % v, "-pe%(j)d * %(ty)s[i] * S%(j)d_1[%(g)s]"
                                                                       " - pe%(j)d * S%(j)d_2[%(g)s]" % v))
        self.emit(1, loop)
        self.emit(2, "ag%d[%s] += %s[i]" % (acc.slot, self._idx(acc.map), v["gx"]))
        if has_hx:
            self.emit(2, "ah%d[%s] += %s[i]" % (acc.slot, self._idx(acc.map), v["hx"]))
            self.h_live.add(acc.slot)

    def _add(self, e, acc, c0, c1, consts, pre, post):
        """Add ``c0`` (to the adjoint) and ``c1`` (to its tangent) of entry ``e`` into
        operand ``acc``: a register of the loop, its arrays, or, when it is one
        element for every ``i``, locals added to them after the loop."""
        b = acc.slot
        if self.p.in_register(e, acc):
            names = self._adj[b]
            names[2] += 1
            g = "g%d_%d" % (b, names[2])
            self.emit(2, "%s = %s + %s" % (g, names[0], c0))
            names[0] = g
            if c1 is not None:
                h = "h%d_%d" % (b, names[2])
                self.emit(2, "%s = %s" % (h, c1 if names[1] is None else "%s + %s" % (names[1], c1)))
                names[1] = h
            return
        at = self._idx(acc.map)
        if at.isdigit():
            names = consts.get((b, at))
            if names is None:
                names = consts[(b, at)] = ["cg%d_%s" % (b, at), "ch%d_%s" % (b, at), False]
                pre.append("%s = %s = 0.0" % tuple(names[:2]))
                post.append("ag%d[%s] += %s" % (b, at, names[0]))
            self.emit(2, "%s += %s" % (names[0], c0))
            if c1 is not None:
                self.emit(2, "%s += %s" % (names[1], c1))
                if not names[2]:
                    names[2] = True
                    post.append("ah%d[%s] += %s" % (b, at, names[1]))
                    self.h_live.add(b)
            return
        shift = _SHIFT.match(at)
        if shift is not None:       # (the arrays of a slot that is not the loop's member: it reads none)
            off = int(shift.group(1) or 0)
            self.emit(2, self._shifted.add("ag%d" % b, off, c0))
            if c1 is not None:
                self.emit(2, self._shifted.add("ah%d" % b, off, c1))
                self.h_live.add(b)
            return
        g, h = self._adjoint_arrays(b, at, consts, pre, post, c1 is not None)
        self.emit(2, "%s[%s] += %s" % (g, at, c0))
        if c1 is not None:
            self.emit(2, "%s[%s] += %s" % (h, at, c1))
            self.h_live.add(b)

    def _adjoint_arrays(self, b, at, consts, pre, post, tangent):
        """The arrays a loop adds into slot ``b``'s adjoint and its tangent at index ``at``
        (an index array's: shifts go to ``ShiftedSums``): ``ag``/``ah`` at the loop's first
        index into them; at any other, for an adjoint small enough to stay in cache, zeroed
        buffers of its own, added in after the loop.  (Two index arrays into one array
        may carry a dependence from one element to another through memory, which keeps
        LLVM from vectorizing the loop.  At 10^6 elements the loop is bound by memory,
        and the buffers' traffic costs more.)"""
        first = consts.setdefault(("first", b), at)
        n = self.p._size(b)
        if at == first or n > OWN_BUFFER_MAX:
            return "ag%d" % b, "ah%d" % b
        names = consts.get(("own", b, at))
        if names is None:
            j = len(self._own)
            names = consts[("own", b, at)] = ["bg%d_%d" % (b, j), "bh%d_%d" % (b, j), False]
            self._own.append((names[0], n))
            pre.append("%s[:] = 0.0" % names[0])
            post.append("ag%d += %s" % (b, names[0]))
        if tangent and not names[2]:
            names[2] = True
            self._own.append((names[1], n))
            pre.append("%s[:] = 0.0" % names[1])
            post.append("ah%d += %s" % (b, names[1]))
        return names[0], names[1]


_SHIFT = re.compile(r"(?:(\d+) \+ )?i$")       # an index ``i`` or ``off + i``


def _shifted_index(array, off, last):
    """Element ``off + i`` of a loop over ``i`` (``last``: at ``i = last``)."""
    return loops.index(off, (1,), ("i",)) if last is None else str(off + last)


_RETURNS = {"hvp": ("ag", "ah"), "grad": ("ag",), "hv": ("ah",)}     # per wanted slot, what a kind returns


def _without_sinks(source, sinks, sink_pattern):
    """The program ``source`` without the statements that write the arrays ``sinks``
    (the names, and those ``sink_pattern`` matches: a wanted slot's adjoint, or its
    tangent, which the program's kind does not return; nothing reads them but the
    return), then without the assignments of names nothing reads any more (what only
    fed them).  LLVM drops what then only fed those, up to the loads of the tangents.
    (The generated statements that assign a name do nothing else; ``source`` is the
    function alone.)"""
    fn = ast.parse(source).body[0]

    def base(t):
        while isinstance(t, ast.Subscript):
            t = t.value
        return t.id if isinstance(t, ast.Name) else None

    def sink(t):
        b = base(t)
        return b is not None and (b in sinks or sink_pattern.match(b) is not None)

    def prune(body, read):
        out = []
        for st in body:
            if isinstance(st, (ast.For, ast.If)):
                st.body, st.orelse = prune(st.body, read), prune(st.orelse, read)
                if isinstance(st, ast.For) and not st.body:
                    continue
                st.body = st.body or [ast.Pass()]
            elif isinstance(st, ast.AugAssign):
                if sink(st.target) or (isinstance(st.target, ast.Name) and st.target.id not in read):
                    continue
            elif isinstance(st, ast.Assign):
                keep = []
                for t in st.targets:
                    if isinstance(t, ast.Tuple) and isinstance(st.value, ast.Tuple):
                        pairs = [(a, v) for a, v in zip(t.elts, st.value.elts)
                                 if not sink(a) and not (isinstance(a, ast.Name) and a.id not in read)]
                        if len(pairs) == 1:
                            (t, st.value), = pairs
                            keep.append(t)
                        elif pairs:
                            t.elts, st.value.elts = [a for a, _ in pairs], [v for _, v in pairs]
                            keep.append(t)
                    elif not sink(t) and not (isinstance(t, ast.Name) and t.id not in read):
                        keep.append(t)
                if not keep:
                    continue
                st.targets = keep
            out.append(st)
        return out

    while True:
        before = ast.dump(fn)
        read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        fn.body = prune(fn.body, read)
        if ast.dump(fn) == before:
            return ast.unparse(fn) + "\n"


# -- running: a program per tape structure, compiled in the background ------------------
_PROGRAMS = {}      # structure key -> [walks seen, plan or Unsupported or None, compiled function or None]
RUNS = [0]          # calls of compiled programs (tests, benchmarks)


_BAKED = []


def _baked_opcodes():
    """Opcodes whose rule raises to a power made of the parameters (``x ** p``): their
    parameters are written into the program (so that ``ipow`` folds to a product)
    and are part of its key."""
    if not _BAKED:
        from ..core.registry import FAMILY_NAMES, FAMILY_SHIFT
        from ..kernels import codegen
        mask = np.zeros(len(FAMILY_NAMES) << FAMILY_SHIFT, bool)
        mask[[op.code for op in _ew.ALL_UNARY if codegen._invariant_ipow(op.rule)]] = True
        _BAKED.append(mask)
    return _BAKED[0]


def _key(T, lo, hi, seeds, targets, outs, ints, flts):
    """The structure of the tape from ``lo`` to ``hi``: its entries' integer fields but
    their versions (absolute: a loss recorded again on a fresh tape finds the same),
    the auxiliary words, the sizes of the slots before ``lo``, the parameters written
    into the program (``_baked_opcodes``), the seeded, wanted and output slots."""
    baked = _baked_opcodes()[ints[lo:hi + 1, _OP]]
    return (lo, ints[lo:hi + 1, :_tp.VERSION].tobytes(), T.aux_array().tobytes(), ints[:lo, _SIZE].tobytes(),
            flts[lo:hi + 1, _tp.F0:_tp.F1 + 1][baked].tobytes(), tuple(seeds), tuple(targets), tuple(outs))


def _slot_value(T, ints, flts, s):
    leaf = T.leaves.get(s)
    if leaf is not None:
        v = leaf._data
        if v.dtype is _F64 and v.flags.c_contiguous:
            return v.reshape(-1)
    else:
        v = T.vals[s]
        if v is None:
            if ints[s, _SIZE] != 1:
                return None
            return np.array([flts[s, _tp.VAL]])
    if v.dtype != np.float64:
        if v.dtype.kind not in "biu":
            return None         # (float32 and the like: the NumPy walk)
        v = v.astype(np.float64)        # a condition (read as 0.0 or 1.0) or an integer operand, exact
    return np.ascontiguousarray(v).reshape(-1)


def second_order(T, seeds, targets, out, cache=None):
    """{target slot: (g, h)}: the gradient ``g`` of slot ``out`` at each wanted slot and
    its derivative ``h`` along the tangents ``seeds`` {slot: (1, n)} (one direction),
    by the tape structure's compiled program; or None while it is not compiled, or
    when it cannot be (the caller then walks the tape in NumPy, ``autograd.tangent``).
    ``cache``: a dict kept by a caller whose tapes all have one structure (a recorded
    tape's replays), which then finds the program without its key (``_run``)."""
    res = _run(T, "hvp", seeds, list(targets), (out,), cache)
    return None if res is None else {t: (res[2 * i], res[2 * i + 1]) for i, t in enumerate(targets)}


def first_order(T, seeds, outs, cache=None):
    """{output slot: its tangent (flat)} along the tangents ``seeds`` {slot: (1, n)} (a
    Jacobian-vector product: the forward loops alone), or None as ``second_order``."""
    res = _run(T, "jvp", seeds, [], tuple(outs), cache)
    return None if res is None else dict(zip(outs, res))


def _run(T, kind, seeds, targets, outs, cache=None):
    if any(d.shape[0] != 1 for d in seeds.values()):
        return None
    if cache is None or MODE[0] == "off":
        got = program(T, kind, list(seeds), targets, outs)
    else:
        # (the structure key costs about as much as a small program's run)
        at = (kind, tuple(seeds), tuple(targets), outs)
        got = cache.get(at)
        if got is None:
            got = program(T, kind, list(seeds), targets, outs)
            if got is not None and (got[2] is not None or isinstance(got[1], Unsupported)):     # (settled)
                cache[at] = got
    return None if got is None else execute(got, T, seeds)


def program(T, kind, seeds, targets, outs):
    """The record ``[walks, plan, compiled program]`` of this tape structure's program
    (``seeds``: the seeded slots, in the order ``execute`` gets their tangents), one
    more walk counted: at the ``COMPILE_AFTER``-th its plan is made and compiled (in
    the background).  None where no program can serve."""
    from . import engine
    if MODE[0] == "off" or engine.INTERPRET[0] == "always" or not outs or not seeds:
        return None
    lo, hi = min(seeds), max(outs)
    if hi - lo >= MAX_ENTRIES or hi < lo:
        return None
    ints, flts = T.arrays()
    key = (kind,) + _key(T, lo, hi, seeds, targets, outs, ints, flts)
    got = _PROGRAMS.get(key)
    if got is None:
        got = _PROGRAMS[key] = [0, None, None]
    got[0] += 1
    if got[2] is None and got[1] is None and got[0] >= COMPILE_AFTER:
        try:
            plan = got[1] = _Plan(T, lo, hi, sorted(seeds), targets, outs, kind)
        except Unsupported as e:
            got[1] = e.with_traceback(None)      # (its frames would hold the tape)
        else:
            plan.lo_hi = (lo, hi)
            if MODE[0] == "now":
                _compile(got)
            else:
                loops.in_background("tapegrad-tangent", lambda: _compile(got))
    return got


def execute(got, T, seeds):
    """Run ``got``'s compiled program (``program``) on tape ``T``'s values with the
    tangents ``seeds`` {slot: (1, n)} (one direction: the callers check): its flat
    results, or None while it is not compiled, or when a value it reads was freed or is
    not float64 (the caller then takes another path)."""
    plan, run = got[1], got[2]
    if run is None:
        return None
    ints, flts = T.arrays()
    vals = []
    for s in plan.values:
        v = _slot_value(T, ints, flts, s)
        if v is None:
            return None     # (freed, or not float64: the NumPy walk says so or copes)
        vals.append(v)
    lo, hi = plan.lo_hi
    prm = np.ascontiguousarray(flts[lo:hi + 1, _tp.F0:_tp.F1 + 1])
    tans = [np.ascontiguousarray(seeds[s][0], np.float64) for s in plan.seeds]
    work = _tp.take_spare(plan.spare, 0, np.empty, plan.work)
    res = run(prm, work, *vals, *plan.maps, *tans)      # (compiled: NumPy's error state plays no part)
    plan.spare[0] = work
    RUNS[0] += 1
    return res


def _compile(got):
    """Generate, write and compile the program of ``got``'s plan (in a background thread):
    ``got[2]`` is the compiled function once done, or stays None after an error (with
    ``got[1]`` the reason)."""
    from .. import _jit
    try:
        _jit.load()
        from ..kernels import codegen
        import numba
        plan = got[1]
        src = _Source(plan)
        source = codegen.tape_header("tangent program") + "\n" + src.build()
        plan.values, plan.maps, plan.work, plan.spare = src.values, src.maps, max(src.work, 1), {}
        run = loops.load("tangent", source).run
        f64, i64 = numba.float64, numba.int64
        run.compile((f64[:, ::1], f64[::1]) + (f64[::1],) * len(plan.values) + (i64[::1],) * len(plan.maps)
                    + (f64[::1],) * len(plan.seeds))
        got[2] = run
    except Exception as e:          # (kept on the NumPy walk, the reason kept)
        got[1] = Unsupported("its program did not compile: %s: %s" % (type(e).__name__, str(e)[:300]))


def wait(timeout=60.0):
    """Wait for the tangent programs being compiled in the background (benchmarks, tests)."""
    for t in threading.enumerate():
        if t.name == "tapegrad-tangent":
            t.join(timeout)
