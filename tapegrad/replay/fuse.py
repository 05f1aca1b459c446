"""Fused replay: a recorded tape of array ops compiled into generated Numba loops.

A replay otherwise runs one NumPy call per entry, each writing a fresh temporary,
so on large arrays it is memory bound.  Here the tape is cut into *groups*: runs of
elementwise entries over one index space (the loop shape), the strided views and
reshapes they read through folded into their index arithmetic, ended by the sums
and means that reduce them.  Each group becomes one loop nest (``fwd_<g>``) that
writes only what something after the group reads (another group, an output, a
guard, every one-element value), and one loop nest for its adjoints (``rev_<g>``)
that recomputes the group's values instead of storing them and adds the adjoints
of what it read straight into their gradient arrays, broadcast operands included.

The source of both is generated from the op table's own expressions (the one-float
forward and the reverse rule of each row, as the compiled kernels use them), with
every shape and stride a constant, written to the kernels' cache directory under
a hash of its text and compiled with ``cache=True``: a later process with the same
tape loads the machine code.  ``plan`` says why a tape is not fused (any other op,
a dtype other than float64, a live gather, a value derived off the tape).
The index maps, the loop nests, the carried sums and the compiling are
``kernels/loops.py``'s, shared with the tangent programs; the loop bodies are here.

Sums run in blocks of ``BLOCK`` elements along the innermost axis, each block in
``LANES`` interleaved partial sums, added into the total: for n elements the
rounding error is at most about (BLOCK / LANES + n / BLOCK) ulp of the sum of
magnitudes, where NumPy's pairwise sum has log2(n); ``Recording`` checks the first fused replay against the unfused one
(1e-12 of the largest magnitude) and keeps the unfused path when they differ.
"""
import ast
import math
import time

import numpy as np

from ..autograd import differentiable as _differentiable
from ..autograd import engine as _engine
from ..core import tape as _tp
from ..core.descriptors import strided_map_np
from ..core.registry import (BINARY, BINARY2, CONST, FAMILY_RULES, HOST, META_END, REDUCE, SHAPE, UNARY, UNARY2,
                             family, index)
from ..ops import elementwise as _ew
from ..ops import reduce as _rd
from ..kernels import loops
from ..kernels.codegen import literal as _literal
from ..ops._record import RESHAPE, STRIDED
from .forward import _close, _source_value

BLOCK = 4096        # elements of the innermost axis summed before they join a total ...
LANES = 4           # ... in this many partial sums (interleaved), when the axis has at least 4 * LANES
_ELEMENTWISE = (UNARY, UNARY2, BINARY, BINARY2)
MAX_CARRY = 4       # an adjoint added to at more steps apart than this along the innermost axis: in memory


class NotFusable(Exception):
    """Why a tape stays on the unfused replay (``Recording.fuse_why``)."""


class _Call:
    """An entry between groups (a matrix product, a gather, max...): its forward is the
    replay's own NumPy call, its reverse the family's differentiable rule, grad mode off."""
    __slots__ = ("slot", "f")

    def __init__(self, slot, f):
        self.slot, self.f = slot, f


class _Group:
    """One loop nest: its loop shape, its entries in tape order, what it reads from
    outside (``ext``: base slots) and what it writes (``outs``)."""
    __slots__ = ("shape", "members", "ext", "outs", "fwd", "rev", "reds", "compares")

    def __init__(self, shape):
        self.shape, self.members, self.ext, self.outs, self.reds, self.compares = shape, [], [], [], [], []


class _Rename(ast.NodeTransformer):
    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        new = self.names.get(node.id)
        return ast.parse(new, mode="eval").body if new is not None else node


class _IntegerPowers(ast.NodeTransformer):
    """``ipow(v, e)`` with a constant ``e`` (``x ** -3``, and its rule's
    ``ipow(x, -3.0 - 1.0)``): the kernels' closed form for ``e`` (``codegen._IPOW_CASES``,
    the same bits), else for an integral ``|e| <= 64`` repeated squaring
    (``ipow_int``), which the loop vectorizes, not a libm pow per element."""
    def visit_Call(self, node):
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Name) and node.func.id == "ipow" and len(node.args) == 2
                and isinstance(node.args[0], ast.Name)):
            return node
        try:
            e = float(eval(compile(ast.Expression(node.args[1]), "<exponent>", "eval"), {"__builtins__": {}}))
        except Exception:       # (not a constant)
            return node
        from ..kernels.codegen import _IPOW_CASES
        x = node.args[0].id
        form = next((f.format(a=x) for v, f in _IPOW_CASES if float(v) == e), None)
        if form is None and e == int(e) and abs(e) <= 64:
            form = "ipow_int(%s, %r)" % (x, e)
        return node if form is None else ast.parse(form, mode="eval").body


def _subst(expr, names):
    tree = _Rename(names).visit(ast.parse(expr, mode="eval"))
    return ast.unparse(_IntegerPowers().visit(tree))


def _profiled(method):
    """``method`` timed into the active ``tg.profile``s (``fused_s``, ``fused_runs``)."""
    def run(self, *args):
        profiles = _engine.PROFILERS
        if not profiles:
            return method(self, *args)
        t0 = time.perf_counter()
        try:
            return method(self, *args)
        finally:
            dt = time.perf_counter() - t0
            for p in profiles:
                p.fused_s += dt
                p.fused_runs += 1
    return run


class FusedProgram:
    """The groups of one recording and their compiled loops; ``forward`` and
    ``reverse`` run them on a replay's arguments."""

    def __init__(self, R, metas, budget=None):
        """``metas``: every slot's value's (shape, dtype, or None for what is no
        array), from an unfused replay (``value_metas``); ``budget``: the ``Budget``
        the planning and the code generation keep to (None: none)."""
        self.R = R
        self.n = R.n
        self.budget = budget or Budget(math.inf)
        self.shapes = [m[0] for m in metas]
        self._plan(R, metas)
        self.source = self._generate()
        self.stats = {}

    # -- planning ---------------------------------------------------------------
    def _plan(self, R, metas):
        if R.live:
            raise NotFusable("it gathers with indices computed from its inputs")
        # comparisons (``where``'s condition, a mask) are computed at each replay from
        # the values they compare and read by the loops as 0.0 / 1.0
        self.derived = {s: src[1] for s, src in R.sources.items() if src[0] == "derived"}
        for s, (_, dt) in enumerate(metas):
            if s in self.derived and dt is not None and dt.kind in "bif":
                continue
            if dt != np.float64:
                raise NotFusable("slot %d is %s, not float64" % (s, dt if dt is not None else "not an array"))
        rows, aux, n = R.rows, R.aux, self.n
        tick = self.budget.tick
        self.views = loops.Views(lambda s: math.prod(self.shapes[s]))
        self.base = self.views.of       # view slot -> (base slot, flat index of the base at each of its elements)
        self.loads = {}         # (entry, operand position) -> (base slot, flat index map over the loop)
        group_of = {}
        groups, steps, calls = [], [], {}
        cur = None
        for s, row in enumerate(rows):
            op = row[_tp.OP]
            if op < META_END:
                continue
            if not s & 63:
                tick("planning")
            fam, k = family(op), index(op)
            if fam == SHAPE and k in (RESHAPE, STRIDED):
                self.views.add(s, row[_tp.A], strided_map_np(aux, row[_tp.AUX]) if k == STRIDED else None)
                continue
            if fam in _ELEMENTWISE:
                loop = self.shapes[s]
                ins = self._operands(s, row, fam)
            elif fam == REDUCE and k in (_rd.SUM, _rd.MEAN):
                a = row[_tp.A]
                loop = self.shapes[a]
                gm = strided_map_np(aux, row[_tp.AUX])          # input element -> output element
                if loops.affine(gm, loop) is None:
                    raise NotFusable("a reduction's groups are not strided")
                ins = [(0, a, np.arange(int(np.prod(loop)), dtype=np.int64))]
            else:
                if R.program is None:
                    R._program()
                f = R.program[s][1]
                if fam == HOST or f is None:
                    raise NotFusable("%s has no fused form" % (R.names[s] or "an entry of the %s family" % fam))
                calls[s] = c = _Call(s, f)
                steps.append(c)
                cur = None          # (what follows may read it: a new group)
                continue
            # join the open group when the loop shape matches and every operand it
            # computes is read element for element (not through a view, not a reduction)
            ok = cur is not None and cur.shape == loop
            resolved = []
            for j, o, m in ins:
                b, mm = self._chase(o)
                mm = mm[m]
                if ok and b in self.derived and any(group_of.get(r) is cur for r in self._compared(b)):
                    ok = False      # (it compares a value of the open group: computed after it)
                if ok and group_of.get(b) is cur and (b != o or b in cur.reds
                                                       or not np.array_equal(mm, np.arange(mm.size))):
                    ok = False
                resolved.append((j, b, mm))
            if not ok:
                cur = _Group(loop)
                groups.append(cur)
                steps.append(cur)
            for j, b, mm in resolved:
                if group_of.get(b) is not cur:
                    aff = loops.affine(mm, loop) if mm.size else (0, (0,) * len(loop))
                    if aff is None:
                        raise NotFusable("%s reads its operand through a map that is not strided" % R.names[s])
                    self.loads[(s, j)] = (b, aff)
                    if b not in cur.ext:
                        cur.ext.append(b)
                else:
                    self.loads[(s, j)] = (b, None)      # a value of the group, in a local
            cur.members.append(s)
            group_of[s] = cur
            if fam == REDUCE:
                cur.reds.append(s)
                self.loads[(s, "out")] = loops.affine(strided_map_np(aux, rows[s][_tp.AUX]), loop)
        if len(groups) > MAX_GROUPS:
            raise NotFusable("it would take %d fused loops; fusion compiles up to %d (the compile time grows with "
                             "them)" % (len(groups), MAX_GROUPS))
        # what each group writes: what later groups read, outputs, guards, one-element values
        needed = set(R.out_slots) | set(_guard_slots(R.guards))
        for g in groups:
            needed.update(g.ext)
        for s in calls:
            needed.update(self._chase(o)[0] for o in self._inputs(s))
            if any(o in self.derived for o in self._inputs(s)):
                raise NotFusable("a comparison is read by %s" % R.names[s])
        for d in self.derived:
            needed.update(self._compared(d))
        for s in needed:
            if s in self.base:
                raise NotFusable("a view is an output or read by Python")
        for g in groups:
            g.outs = [s for s in g.members if s in needed or self.shapes[s] == () or math.prod(self.shapes[s]) == 1
                      or s in g.reds]
        if not groups:
            raise NotFusable("it has no elementwise entries to fuse")
        self.groups, self.steps, self.calls = groups, steps, calls
        self.group_of = group_of
        self.rg = R.rg
        # the sources: every base slot a group or a call reads that none writes
        read = {b for g in groups for b in g.ext} | {self._chase(o)[0] for s in calls for o in self._inputs(s)}
        self.sources = sorted(b for b in read if b not in group_of and b not in calls and b not in self.derived)
        for g in groups:
            g.compares = [b for b in g.ext if b in self.derived]

    def _compared(self, d):
        """The base slots comparison ``d`` reads."""
        out = []

        def walk(spec):
            for ref in spec[1]:
                if ref[0] == "slot":
                    out.append(self._chase(ref[1])[0])
                elif ref[0] == "derived":
                    walk(ref[1])
        walk(self.derived[d])
        return out

    def _inputs(self, s):
        row = self.R.rows[s]
        return [o for o in (row[_tp.A], row[_tp.B], row[_tp.C]) if o >= 0]

    def _chase(self, s):
        return self.views.chase(s)

    def _operands(self, s, row, fam):
        """(position, slot, flat index of the operand at each output element) of an elementwise entry."""
        size = math.prod(self.shapes[s])
        if fam in (UNARY, UNARY2):
            return [(0, row[_tp.A], self._same(row[_tp.A], size))]
        ins = (row[_tp.A], row[_tp.B], row[_tp.C])
        at, bits = row[_tp.AUX], row[_tp.PARAM]
        out = []
        for j in range(3):
            if ins[j] < 0:
                if j == 2:
                    break
                raise NotFusable("an operand is missing")
            if at >= 0 and not bits & (8 << j):
                m = strided_map_np(self.R.aux, at)
            else:
                m = self._same(ins[j], size)
            if at >= 0:
                at += 2 + 2 * int(self.R.aux[at])
            out.append((j, ins[j], m))
        return out

    def _same(self, o, size):
        return np.arange(size, dtype=np.int64) if math.prod(self.shapes[o]) == size else np.zeros(size, np.int64)

    # -- code -------------------------------------------------------------------
    def _generate(self):
        # each group's loads, in order (one pass over them all, not one per group)
        self.group_loads = {id(g): [] for g in self.groups}
        for (s, j), v in sorted((k, v) for k, v in self.loads.items() if k[1] != "out"):
            g = self.group_of.get(s)
            if g is not None:
                self.group_loads[id(g)].append(((s, j), v))
        parts = [_header()]
        for gi, g in enumerate(self.groups):
            self.budget.tick("generating its loops")
            parts.append(self._group_source(gi, g, reverse=False))
            parts.append(self._group_source(gi, g, reverse=True))
        return "\n".join(parts)

    def _index(self, aff, nd):
        return loops.index(aff[0], aff[1], loops.loop_names(nd))

    def _value_expr(self, s):
        row = self.R.rows[s]
        fam, k = family(row[_tp.OP]), index(row[_tp.OP])
        op = loops.ELEMENTWISE[fam][k]
        names = {"p": _literal(self.R.f0[s]), "q": _literal(self.R.f1[s])}
        for j, var in ((0, "x"),) if fam in (UNARY, UNARY2) else ((0, "a"), (1, "b"), (2, "c")):
            if (s, j) in self.loads:
                names[var] = self._load_name(s, j)
        return op, _subst(op.scalar, names)

    def _load_name(self, s, j):
        b, aff = self.loads[(s, j)]
        return "v%d" % b if aff is None else "l%d_%d" % (s, j)

    def _group_source(self, gi, g, reverse):
        nd = len(g.shape)
        ext = ["e%d" % b for b in g.ext]
        outs = ["o%d" % s for s in g.outs]
        args = ext + outs
        if reverse:
            args = ext + ["ge%d" % b for b in g.ext] + ["go%d" % s for s in g.outs]
        lines = [loops.decorator(), "def %s_%d(%s):" % ("rev" if reverse else "fwd", gi,
                                                                           ", ".join(args))]
        ind = "    "
        full = [s for s in g.reds if self.shapes[s] == ()] if not reverse else []
        for s in full:
            lines.append(ind + "t%d = 0.0" % s)
        if not reverse:
            for s in g.reds:
                if self.shapes[s] != ():
                    # (loops, not slice assignments: Numba lowers those to hundreds of IR instructions each)
                    lines.append(ind + "for i in range(%d): o%d[i] = 0.0" % (math.prod(self.shapes[s]), s))
        pre, post = [], []
        lines += self._nest(g, self._body(g, reverse, pre, post), full, pre, post)
        for s in full:
            lines.append(ind + "o%d[0] = t%d" % (s, s))
        if not reverse:
            for s in g.reds:
                if index(self.R.rows[s][_tp.OP]) == _rd.MEAN:
                    cnt = math.prod(self.shapes[self.R.rows[s][_tp.A]]) / max(math.prod(self.shapes[s]), 1)
                    lines.append(ind + "for i in range(%d): o%d[i] = o%d[i] / %r" % (math.prod(self.shapes[s]), s, s, cnt))
        lines.append(ind + "return 0")
        return "\n".join(lines) + "\n"

    def _nest(self, g, body, full, pre=(), post=()):
        """The loop nest over ``g``'s shape around ``body`` (its lines), with ``pre`` and
        ``post`` around the innermost loop.  A full sum is added in blocks of ``BLOCK``
        along the innermost axis, each block into ``LANES`` partial sums (``@L`` in
        ``body`` names the lane): one chain of adds is bound by their latency, not by
        memory."""
        ind, nd = "    ", len(g.shape)
        if not full:
            return loops.nest(g.shape, body, pre, post)
        if nd == 0:
            return [ind + ln.replace("@L", "0") for ln in body]
        lines = [ind * (d + 1) + "for i%d in range(%d):" % (d, g.shape[d]) for d in range(nd - 1)]
        last, depth, n = nd - 1, ind * nd, g.shape[-1]
        lanes = LANES if n >= 4 * LANES else 1
        inner = depth + ind
        lines.append(depth + "for b%d in range(0, %d, %d):" % (last, n, BLOCK))
        lines += [inner + "u%d_%d = 0.0" % (s, k) for s in full for k in range(lanes)]
        lines.append(inner + "end%d = min(b%d + %d, %d)" % (last, last, BLOCK, n))
        rest = "b%d" % last
        if lanes > 1:
            # (a count, not range's step: Numba then knows the index is not negative)
            lines.append(inner + "for j%d in range((end%d - b%d) // %d):" % (last, last, last, lanes))
            for k in range(lanes):
                lines.append(inner + ind + "i%d = b%d + %d * j%d + %d" % (last, last, lanes, last, k))
                lines += [inner + ind + ln.replace("@L", str(k)) for ln in body]
            rest = "b%d + (end%d - b%d) // %d * %d" % (last, last, last, lanes, lanes)
        lines.append(inner + "for i%d in range(%s, end%d):" % (last, rest, last))
        lines += [inner + ind + ln.replace("@L", "0") for ln in body]
        for s in full:
            lanes_sum = ["u%d_%d" % (s, k) for k in range(lanes)]
            while len(lanes_sum) > 1:
                lanes_sum = ["(%s + %s)" % (lanes_sum[i], lanes_sum[i + 1]) for i in range(0, len(lanes_sum), 2)]
            lines.append(inner + "t%d += %s" % (s, lanes_sum[0]))
        return lines

    def _accumulators(self, g):
        """How each gradient array of ``g`` is added into: {base: (kind, lowest offset, strides)}.

        Every base whose loads share their strides gets a local accumulator ``a<b>``,
        so that the loop does not wait on its own stores (a store, then a load of the
        same element, is a chain of latencies): ``"row"`` when the loads are at one
        element per iteration (loaded at its start, stored at its end); ``"hoist"``
        when that element does not move along the innermost axis (loaded before the
        loop, stored after it); ``"carry"`` when the loads are at offsets whole
        innermost steps apart, x[i] and x[i + 1] (up to ``MAX_CARRY`` steps): the sums
        of the elements ahead are carried to the next iteration (``loops.ShiftedSums``,
        in order).  Each element still receives its contributions in the same order,
        so the sums are bitwise those of one ``+=`` per contribution."""
        nd = len(g.shape)
        loads = {}
        for (s, j), (b, aff) in self.group_loads[id(g)]:
            if aff is not None and self.rg[b]:
                loads.setdefault(b, []).append(aff)
        acc = {}
        for b, affs in loads.items():
            strides = {st for _, st in affs}
            offsets = sorted({o for o, _ in affs})
            if len(strides) != 1:
                continue
            st = strides.pop()
            if nd == 0 or (len(offsets) == 1 and st[-1] != 0):
                acc[b] = ("row", offsets[0], st)
            elif len(offsets) == 1:
                acc[b] = ("hoist", offsets[0], st)
            elif (st[-1] > 0 and g.shape[-1] >= 2 and offsets[-1] - offsets[0] <= MAX_CARRY * st[-1]
                  and all((o - offsets[0]) % st[-1] == 0 for o in offsets)):
                acc[b] = ("carry", offsets[0], st)
        return acc

    def _index_at(self, aff, nd, last):
        """``_index`` of ``aff`` with the innermost index the constant ``last``."""
        off, st = aff
        return self._index((off + st[-1] * last, st[:-1] + (0,)), nd)

    def _body(self, g, reverse, pre=None, post=None):
        """The lines of one iteration: the loads, every value in tape order, then
        (forward) the writes or (reverse) the adjoints; (reverse) the accumulators'
        lines around the innermost loop go to ``pre`` and ``post``."""
        nd = len(g.shape)
        body = []
        cidx = self._index((0, loops.c_strides(g.shape)), nd)
        for (s, j), (b, aff) in self.group_loads[id(g)]:
            if aff is not None:
                body.append("l%d_%d = e%d[%s]" % (s, j, b, self._index(aff, nd)))
        ops = {}
        for s in g.members:
            if s in g.reds:
                continue
            op, expr = self._value_expr(s)
            ops[s] = op
            body.append("v%d = %s" % (s, expr))
        if not reverse:
            for s in g.outs:
                if s in g.reds:
                    a = self.loads[(s, 0)]
                    src = self._load_name(s, 0) if a[1] is not None else "v%d" % a[0]
                    if self.shapes[s] == ():
                        body.append("%s += %s" % ("u%d_@L" % s if nd else "t%d" % s, src))
                    else:
                        body.append("o%d[%s] += %s" % (s, self._index(self.loads[(s, "out")], nd), src))
                else:
                    body.append("o%d[%s] = v%d" % (s, cidx, s))
            return body
        rg = self.rg
        self._acc = acc = self._accumulators(g)
        ends = []
        carried = {"ge%d" % b: (off, st) for b, (kind, off, st) in acc.items() if kind == "carry"}

        def shifted(array, shift, last):
            off, st = carried[array]
            aff = (off + shift * st[-1], st)
            return self._index(aff, nd) if last is None else self._index_at(aff, nd, last)
        self._shifted = loops.ShiftedSums(shifted, in_order=True)
        starts = len(body)          # (the carried sums' first lines go here)
        for b, (kind, off, st) in sorted(acc.items()):
            at0 = self._index((off, st), nd)
            if kind == "row":
                body.append("a%d = ge%d[%s]" % (b, b, at0))
                ends.append("ge%d[%s] = a%d" % (b, at0, b))
            elif kind == "hoist":
                pre.append("a%d = ge%d[%s]" % (b, b, self._index_at((off, st), nd, 0)))
                post.append("ge%d[%s] = a%d" % (b, self._index_at((off, st), nd, 0), b))
        for s in g.members:
            if rg[s] and s not in g.reds:
                body.append("d%d = %s" % (s, ("go%d[%s]" % (s, cidx)) if s in g.outs else "0.0"))
        for s in g.reds:
            if not rg[s]:
                continue
            ridx = self._index(self.loads[(s, "out")], nd) if self.shapes[s] != () else "0"
            scale = ""
            if index(self.R.rows[s][_tp.OP]) == _rd.MEAN:
                scale = " / %r" % (math.prod(self.shapes[self.R.rows[s][_tp.A]]) / max(math.prod(self.shapes[s]), 1))
            self._add_adjoint(body, s, 0, "go%d[%s]%s" % (s, ridx, scale), g)
        for s in reversed(g.members):
            if s in g.reds or not rg[s]:
                continue
            op = ops[s]
            if isinstance(op, _ew.Unary):
                names = {"g": "d%d" % s, "y": "v%d" % s, "p": _literal(self.R.f0[s]),
                         "q": _literal(self.R.f1[s]), "x": self._load_name(s, 0)}
                self._add_adjoint(body, s, 0, "(%s)" % _subst(op.rule, names), g)
            else:
                names = {"g": "d%d" % s, "y": "v%d" % s}
                for j, var in ((0, "a"), (1, "b"), (2, "c")):
                    if (s, j) in self.loads:
                        names[var] = self._load_name(s, j)
                for j, rule in ((0, op.rule_a), (1, op.rule_b)):
                    self._add_adjoint(body, s, j, "(%s)" % _subst(rule, names), g)
        before, start, end, after = self._shifted.carry(g.shape[-1] if nd else 0)
        body[starts:starts] = start
        pre += before
        post[:0] = after
        return body + end + ends

    def _add_adjoint(self, body, s, j, expr, g):
        """The contribution ``expr`` of entry ``s`` to the adjoint of its operand ``j``."""
        if (s, j) not in self.loads:
            return
        b, aff = self.loads[(s, j)]
        if not self.rg[b]:
            return
        if aff is None:
            body.append("d%d += %s" % (b, expr))
        elif b in self._acc and self._acc[b][0] == "carry":
            kind, off, st = self._acc[b]
            body.append(self._shifted.add("ge%d" % b, (aff[0] - off) // st[-1], expr))
        elif b in self._acc:
            body.append("a%d += %s" % (b, expr))
        else:
            body.append("ge%d[%s] += %s" % (b, self._index(aff, len(g.shape)), expr))

    # -- compiling --------------------------------------------------------------
    def compile(self):
        """Write the source where the kernels' is, import it and compile every loop for
        its arguments (float64 arrays), timing it and whether Numba's cache served it."""
        t0 = time.perf_counter()
        mod = loops.load("fused", self.source)
        cached = True
        for gi, g in enumerate(self.groups):
            self.budget.tick("compiling its loops")
            g.fwd, g.rev = getattr(mod, "fwd_%d" % gi), getattr(mod, "rev_%d" % gi)
            for f in (g.fwd, g.rev):
                sig = "int64(%s)" % ", ".join(["float64[::1]"] * (len(g.ext) * (2 if f is g.rev else 1)
                                                                  + len(g.outs)))
                f.compile(sig)
                cached = cached and loops.from_cache(f)
        self.stats = {"groups": len(self.groups), "entries": sum(len(g.members) for g in self.groups),
                      "calls": len(self.calls),
                      "compile_s": time.perf_counter() - t0, "cached": cached,
                      "bytes_saved": 8 * sum(math.prod(self.shapes[s]) for g in self.groups for s in g.members
                                             if s not in g.outs)}
        return self

    # -- running ----------------------------------------------------------------
    def run(self, arrays):
        return FusedVals(self.R, self.forward(arrays), arrays)

    @_profiled
    def forward(self, arrays):
        """The values of the groups' outputs: {slot: flat array}."""
        R = self.R
        vals = {}
        for s in self.sources:
            v = _source_value(R.sources[s], arrays) if s in R.sources else None
            if v is None:
                raise NotFusable("slot %d has no value" % s)
            vals[s] = np.ascontiguousarray(v, np.float64).reshape(-1)
        shaped = _Shaped(self, vals)
        for g in self.steps:
            if type(g) is _Call:
                with np.errstate(all="ignore"):
                    vals[g.slot] = np.ascontiguousarray(g.f(shaped), np.float64).reshape(-1)
                continue
            for d in g.compares:
                if d not in vals:
                    v = R.derived(self.derived[d], shaped, arrays)
                    vals[d] = np.ascontiguousarray(np.broadcast_to(v, self.shapes[d]), np.float64).reshape(-1)
            outs = [np.empty(math.prod(self.shapes[s])) for s in g.outs]
            with np.errstate(all="ignore"):
                g.fwd(*[vals[b] for b in g.ext], *outs)
            for s, o in zip(g.outs, outs):
                vals[s] = o
        return vals

    def value(self, vals, s):
        """Slot ``s``'s value (flat) from the fused values ``vals``: a view's from its base."""
        v = vals.get(s)
        if v is None and s in self.base:
            b, m = self.base[s]
            v = vals[b][m]
        return v

    @_profiled
    def reverse(self, vals, seeds):
        """The adjoints of every source needing one ({slot: flat array}) for the
        output adjoints ``seeds`` ({slot: flat array})."""
        rg = self.rg
        adj = {}
        for s, gs in seeds.items():
            adj[s] = np.array(gs, np.float64).reshape(-1)
        ctx = None
        for g in reversed(self.steps):
            if type(g) is _Call:
                if rg[g.slot] and g.slot in adj:
                    ctx = ctx or _CallContext(self, vals)
                    self._call_reverse(ctx, g.slot, adj)
                continue
            if not any(rg[s] for s in g.members):
                continue
            go = []
            for s in g.outs:
                a = adj.get(s)
                go.append(a if a is not None else np.zeros(vals[s].size))
            ge = []
            for b in g.ext:
                if rg[b]:
                    a = adj.get(b)
                    if a is None:
                        a = adj[b] = np.zeros(vals[b].size)
                    ge.append(a)
                else:
                    ge.append(_EMPTY)
            with np.errstate(all="ignore"):
                g.rev(*[vals[b] for b in g.ext], *ge, *go)
        return {s: adj[s] for s in self.sources if s in adj}


    def _call_reverse(self, ctx, s, adj):
        """A call's input adjoints, by its family's differentiable rule on tensors
        (grad mode off), added into ``adj``; a view's go to its base, through its map."""
        from ..autograd.grad_mode import set_grad_enabled
        from ..core.tensor import Tensor
        R = self.R
        row, op = R.rows[s], R.rows[s][_tp.OP]
        with set_grad_enabled(False):
            parts = FAMILY_RULES[family(op)].differentiable_reverse(ctx, s, index(op), row, R.f0[s], R.f1[s],
                                                                    Tensor._wrap(adj[s]))
        for i, r in parts:
            d = np.asarray(r._data, np.float64).reshape(-1)
            b, m = self._chase(i)
            if b != i:
                d = np.bincount(m, weights=d, minlength=math.prod(self.shapes[b]))
            a = adj.get(b)
            if a is None:
                adj[b] = d.copy()
            else:
                a += d


class _Shaped:
    """The fused values as a call's replay rule reads them: ``v[slot]``, shaped."""
    __slots__ = ("P", "vals")

    def __init__(self, P, vals):
        self.P, self.vals = P, vals

    def __getitem__(self, s):
        return self.P.value(self.vals, s).reshape(self.P.shapes[s])


class _CallContext:
    """What a family's ``differentiable_reverse`` asks of the tape (the interface of
    ``autograd.differentiable._Context``), answered from a fused replay's values."""
    __slots__ = ("P", "vals", "aux", "ints", "_maps")

    def __init__(self, P, vals):
        self.P, self.vals, self.aux, self.ints, self._maps = P, vals, P.R.aux, P.R.ints, {}

    def size(self, s):
        return math.prod(self.P.shapes[s])

    def needs(self, s):
        return s >= 0 and bool(self.P.rg[s]) and self.ints[s, _tp.OP] != CONST

    strided_map = _differentiable._Context.strided_map     # (the same, over ``aux`` and ``_maps``)

    def value(self, s, compute=None):
        from ..core.tensor import Tensor
        return Tensor._wrap(self.P.value(self.vals, s))


_EMPTY = np.zeros(0)


def _header():
    from ..kernels import codegen
    return codegen.tape_header("fused tape")


def _guard_slots(guards):
    out = []

    def walk(ref):
        if ref[0] == "slot":
            out.append(ref[1])
        elif ref[0] == "derived":
            for r in ref[1][1]:
                walk(r)
    for ref, _, _ in guards:
        walk(ref)
    return out




# -- a replay by the fused program --------------------------------------------------
class FusedVals:
    """The values of a fused replay: the groups' outputs and the sources (``fv``,
    flat), shaped on reading; any other slot (a create_graph backward, hooks, a
    Python read the plan did not foresee) makes the unfused replay's values, once."""
    __slots__ = ("R", "fv", "arrays", "full", "lins", "host_state")

    def __init__(self, R, fv, arrays):
        self.R, self.fv, self.arrays = R, fv, arrays
        self.full = self.lins = self.host_state = None

    def __getitem__(self, s):
        R = self.R
        src = R.sources.get(s)
        if src is not None:
            if src[0] != "derived":
                return _source_value(src, self.arrays)
            v = R.derived(src[1], self, self.arrays)      # (its own dtype: the loops read a float copy)
            dt = R.derived_dtypes.get(s)
            return v if dt is None or v.dtype.str == dt else v.astype(dt)
        P = R.fused
        v = P.value(self.fv, s)
        if v is not None:
            return v.reshape(P.shapes[s])
        if self.full is None:
            self.full = self.R._forward_python(self.arrays)
        return self.full[s]


class FusedPlan:
    """How backward sweeps a fused replay's tape: the fused reverse when it is a
    plain ``backward`` into the leaves of outputs the program wrote (no hooks, no
    targets, nothing retained or changed in place), else the ordinary sweep
    (``ArraysPlan``) over the unfused values."""
    __slots__ = ("arrays_plan", "program", "reach")

    def __init__(self, arrays_plan, program, rg):
        self.arrays_plan, self.program = arrays_plan, program
        self.reach = rg.astype(np.uint8)

    def sweep_own(self, T, slot_seeds, retain, tgt_ids, accumulate, pending, leaf_grads):
        vals = T.arena
        if not (type(vals) is FusedVals and tgt_ids is None and accumulate and not T.hooks and not T.retained
                and not T.ext and T.intact()
                and all(s in vals.fv for s in slot_seeds)):
            return False
        seeds = {}
        for s, gs in slot_seeds.items():
            g = np.array(gs[0], np.float64).reshape(-1)
            for h in gs[1:]:
                g += h.reshape(-1)
            seeds[s] = g
        grads = self.program.reverse(vals.fv, seeds)
        for s, leaf in T.leaves.items():
            g = grads.get(s)
            if g is not None:
                leaf_grads.append((leaf, g, True))
        if not retain:
            T.freed = self.reach        # a second backward through it: PyTorch's error, from the ordinary sweep
        return True

    def prepare(self, *args):
        return self.arrays_plan.prepare(*args)

    def free(self, *args):
        return self.arrays_plan.free(*args)


AUTO_AFTER = 2              # fuse="auto": unfused replays of a recording before it is compiled ...
AUTO_ELEMENTS = 1 << 16     # ... when its values hold at least this many elements (smaller: the compiled forwards)
AUTO_KEEP = 1.0             # ... and kept when one fused replay takes at most this times the unfused one's time
MAX_ENTRIES = 20_000        # tapes of more entries are not fused: the plan, the source and the compile grow
MAX_GROUPS = 48             # ... with the tape, and so do the fused loops (each compiled on its own)
BUDGET_S = 60.0             # seconds a fused program's plan, source and compile may take (then: not fused)
WORK_S = 0.002              # a background build lets the replaying thread run (sleeps) after this much work ...
YIELD_S = 0.001             # ... for this long: planning is Python, holding the GIL against the replays


class Budget:
    """The time a fused program's build may take (``tick`` raises ``NotFusable``
    past it).  A build in a background thread also sleeps at each ``tick`` after
    ``WORK_S`` of work, so that the thread replaying gets the GIL back at once rather
    than after the interpreter's switch interval at each of its NumPy calls."""
    __slots__ = ("seconds", "deadline", "background", "resume")

    def __init__(self, seconds, background=False):
        self.seconds, self.background = seconds, background
        self.deadline = time.perf_counter() + seconds
        self.resume = 0.0

    def tick(self, what):
        now = time.perf_counter()
        if now > self.deadline:
            raise NotFusable("%s took longer than the %g s a fused program may take to build" % (what, self.seconds))
        if self.background and now >= self.resume:
            time.sleep(YIELD_S)
            self.resume = time.perf_counter() + WORK_S


def value_metas(vals):
    """(shape, dtype or None) of every value of an unfused replay: what planning reads."""
    return [(tuple(v.shape), v.dtype) if type(v) is np.ndarray else (np.shape(v), None) for v in vals]


def _build(R, metas, budget):
    """A compiled ``FusedProgram`` of ``R`` within ``budget``, or ``NotFusable``."""
    if R.n > MAX_ENTRIES:
        return NotFusable("its tape has %d entries; fusion plans tapes of up to %d (the plan and the compile grow "
                          "with the tape)" % (R.n, MAX_ENTRIES))
    try:
        return FusedProgram(R, metas, budget).compile()
    except NotFusable as e:
        return e
    except Exception as e:          # (a generated loop Numba refuses: kept unfused, the reason shown)
        return NotFusable("its fused loops did not compile (%s: %s)"
                          % (type(e).__name__, str(e).strip().splitlines()[-1][:200]))


def consider(R, arrays, vals):
    """After an unfused replay of ``R`` with ``fuse`` on: fuse now (True), or
    (``"auto"``) plan, generate and compile in a background thread once the
    recording has been replayed ``AUTO_AFTER`` times, and check and switch at the
    replay after it is ready: no replay waits for code generation or compilation."""
    if R.fuse is True:
        try_fuse(R, arrays, vals, R.fuse_name)
        return
    R.unfused_replays += 1
    ready = R.fused_pending
    if ready is not None:
        R.fused_pending, R.fuse_building = None, False
        if isinstance(ready, NotFusable):
            R.fused, R.fuse_why = False, str(ready)
        else:
            R.fuse_switch = ready       # (checked and switched to at the next replay: ``switch``)
        return
    if R.unfused_replays < AUTO_AFTER or R.fuse_building:
        return
    size = sum(v.size for v in vals if hasattr(v, "size"))
    if size < AUTO_ELEMENTS:
        R.fused, R.fuse_why = False, ("its values are small (%d elements in all; \"auto\" fuses from %d)"
                                      % (size, AUTO_ELEMENTS))
        return
    if R.n > MAX_ENTRIES:
        R.fused, R.fuse_why = False, str(_build(R, None, None))
        return
    if "nonleaf" in R.arg_kinds:
        R.fused, R.fuse_why = False, _NONLEAF
        return
    if R.live_params:
        R.fused, R.fuse_why = False, _LIVE
        return
    metas = value_metas(vals)
    R.fuse_building = True

    def build():
        with loops.gil_handed_back():
            R.fused_pending = _build(R, metas, Budget(BUDGET_S, background=True))
    loops.in_background("tapegrad-fuse", build)


_NONLEAF = "an argument is a tensor computed by other operations (a non-leaf)"
_LIVE = "it reads numbers live (the fused loops hold them as constants)"


def switch(R, arrays):
    """The replay that switches to the fused loops compiled in the background (``R.fuse_switch``):
    the unfused replay, the fused one checked against it (value and gradient) and timed
    (``try_fuse``); the fused values when they are kept, else the unfused ones.  Its cost
    is about one unfused replay and one fused one, value and gradient."""
    P, R.fuse_switch = R.fuse_switch, None
    t0 = time.perf_counter()
    vals = R._forward_python(arrays)
    R.unfused_s = time.perf_counter() - t0
    fv = try_fuse(R, arrays, vals, R.fuse_name, P)
    return FusedVals(R, fv, arrays) if fv is not None else vals


def try_fuse(R, arrays, vals, name, P=None):
    """Fuse recording ``R`` (``vals``: the values of an unfused replay on
    ``arrays``, timed in ``R.unfused_s``): compile its program (``P``: compiled
    already) and check one fused replay, value and gradient, against the unfused one.
    Sets ``R.fused`` (a ``FusedProgram``, or False with the reason in ``R.fuse_why``);
    returns the fused replay's values when it is kept, else None."""
    import warnings
    R.fused = False
    if "nonleaf" in R.arg_kinds:
        R.fuse_why = _NONLEAF
        return None
    if R.live_params:
        R.fuse_why = _LIVE
        return None
    try:
        if P is None:
            P = _build(R, value_metas(vals), Budget(BUDGET_S))
            if isinstance(P, NotFusable):
                raise P
        t0 = time.perf_counter()
        fv = P.forward(arrays)
        forward_s = time.perf_counter() - t0
        bad = [s for s in fv if s not in P.sources and s not in P.derived and not _close(fv[s].reshape(P.shapes[s]), vals[s])]
        grad = _scalar_output(R, P)
        fused_s, unfused_s = forward_s, R.unfused_s
        if not bad and grad:
            bad, reverse_s, unfused_s = _check_gradient(R, P, fv, arrays, vals)
            fused_s = forward_s + reverse_s
    except NotFusable as e:
        R.fuse_why = str(e)
        return None
    if bad:
        R.fuse_why = "the fused replay differs from the unfused one at %s" % bad
        warnings.warn("tapegrad: the fused replay of %s differs from the unfused one (%s): it is not fused"
                      % (name, bad), RuntimeWarning, stacklevel=3)
        return None
    if R.fuse == "auto":
        # "auto" keeps the loops only where they pay: scalar libm calls (exp, log1p...) in a
        # loop can be slower than NumPy's vectorized ones over data that stays in cache.  The
        # check just run timed both (value, and gradient for one output number): no more
        # replays in this call
        P.stats.update(fused_ms=1e3 * fused_s, unfused_ms=1e3 * unfused_s)
        if fused_s > AUTO_KEEP * unfused_s:
            R.fuse_why = ("its fused loops are slower than the unfused replay here (%.3g ms against %.3g ms)"
                          % (1e3 * fused_s, 1e3 * unfused_s))
            return None
    R.fuse_why = None
    R.fused = P
    R.fused_plan = FusedPlan(R.arrays_plan, P, R.rg)
    return fv


def _scalar_output(R, P):
    return len(R.out_slots) == 1 and math.prod(P.shapes[R.out_slots[0]]) == 1 and bool(R.rg[R.out_slots[0]])


def _ordinary_gradient(R, P, arrays, vals):
    """{source slot: gradient} by the ordinary sweep over the unfused values ``vals``."""
    from ..autograd import engine
    from ..core.tensor import Tensor
    s = R.out_slots[0]
    leaf = [i for i, k in enumerate(R.arg_kinds) if k == "leaf"]
    args = [Tensor._wrap(np.array(a)) if i in leaf else a for i, a in enumerate(arrays)]
    for i in leaf:
        args[i]._requires_grad = True
    T = R.tape_for(vals, arrays, args)
    out = Tensor._recorded(vals[s], T, s, T.versions[s])
    wanted = [b for b in P.sources if b in T.leaves and R.rg[b]]
    if not wanted:
        return {}
    mine = {id(args[i]) for i in leaf}
    if all(id(t) in mine for t in T.leaves.values()):
        # every leaf is this check's own: the plain backward, which reuses the recording's
        # adjoint arrays (a backward with ``inputs`` makes fresh ones, whose first touch
        # cost more than the sweep on large tapes)
        engine.run_backward([(out, np.ones(1))], False)
        return {b: (None if T.leaves[b].grad is None else T.leaves[b].grad._data) for b in wanted}
    res = engine.run_backward([(out, np.ones(1))], False, [T.leaves[b] for b in wanted], accumulate=False)
    return {b: res.get(id(T.leaves[b])) for b in wanted}


def _check_gradient(R, P, fv, arrays, vals):
    """The fused gradient against the ordinary sweep's over the unfused values: (the
    slots where they differ (empty when they agree), the seconds of the fused reverse,
    the seconds of an unfused replay and its gradient)."""
    clock = time.perf_counter
    t0 = clock()
    grads = P.reverse(fv, {R.out_slots[0]: np.ones(1)})
    t1 = clock()
    want_grads = _ordinary_gradient(R, P, arrays, vals)
    t3 = clock() + R.unfused_s          # (the unfused replay of ``vals``: timed by ``Forward.forward``)
    bad = []
    for b, want in want_grads.items():
        got = grads.get(b)
        want = np.zeros(P.shapes[b]) if want is None else np.asarray(want).reshape(P.shapes[b])
        got = np.zeros(P.shapes[b]) if got is None else got.reshape(P.shapes[b])
        if not _close(got, want):
            bad.append(b)
    return bad, t1 - t0, t3 - t1
