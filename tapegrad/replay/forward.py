"""The forward strategies of a replay, and the containers of its values.

``Recording.forward`` recomputes every slot's value from the arguments in one of
three ways, chosen once per recording from the values of a Python replay, which
the others must reproduce:

* Python (``_forward_python``): each entry's family ``replay_rule`` (the NumPy
  call the recorder made), one call per entry, values in a list (``_Vals``);
* scalar (``_forward_scalar``): a tape whose every value is one float64 number, in
  one compiled call (``kernels.sweep.replay_scalar``) that writes the values into
  the replayed tape's entries (``_ScalarVals``);
* arena (``_forward_arena``): small and middling float64 arrays, in one compiled
  call (``kernels.forward.replay_forward``) over one arena of all values
  (``_ArenaVals``), NumPy only for the entries it does not know.
"""
import functools
import math
import time

import numpy as np

from .. import _background, _jit
from ..core import quiet as _quiet
from ..core import tape as _tp
from ..kernels import forward as _kf
from ..kernels import sweep as _ks
from ..ops import elementwise as _ew
from ..ops import shape as _sh
from ..core.registry import FAMILY_RULES, SHAPE, family, index
from .session import NotReproduced, _Rerecord, _Stale, _all_same, _gc_paused, _live_lin, _pair_gather, propagates
from ..ops.order import ORDER_LIN as _ORDER_LIN


def _promoting(f):
    """``f`` on two arrays in PyTorch's common dtype, as the eager comparison
    computed it (ops.promotion: a 0-d operand does not raise the other's dtype)."""
    def g(a, b):
        if a.dtype != b.dtype:
            a, b = _ew._promote(a, b)
        return f(a, b)
    return g


_DERIVED_FNS = {name: _promoting(getattr(np, name)) for name in
                ("greater", "greater_equal", "less", "less_equal", "equal", "not_equal",
                 "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or")}
_DERIVED_FNS["invert"] = np.invert
_DERIVED_FNS.update((f.__name__, f) for f in (np.isnan, np.isinf, np.isfinite, np.isposinf, np.isneginf))


def _casting(f, dt):
    """A reshape entry's replay in its recorded dtype (a float cast is a reshape entry)."""
    def g(v):
        out = f(v)
        return out if out.dtype == dt else out.astype(dt)
    return g


def _order_indices(kind):
    """The indices output of sort, topk, median, kthvalue, cummax/cummin (``kind`` of
    ``ORDER_LIN``) of a value, its integer parameters in one array."""
    f = _ORDER_LIN[kind]
    return lambda x, params: np.asarray(f(x, *(int(p) for p in params))[0])


for _kind in ("sort", "topk", "median", "kth", "cum"):
    _DERIVED_FNS[_kind + "_indices"] = _order_indices(_kind)


# The compiled forward serves tapes of small and middling arrays, whose NumPy calls
# cost more in overhead than in arithmetic; it copies views (NumPy does not) and
# its arena of every value at once would not be recycled by malloc beyond these.
ARENA_SLOT = 1 << 16        # elements of the largest value
ARENA_TOTAL = 1 << 19       # elements of all values


class Forward:
    """The forward strategies of a ``Recording`` (its base class): ``forward``
    picks one, the others are its steps.  The attributes they use are set by
    ``Recording.__init__``."""

    def compile_scalar(self, vals):
        """Use the compiled forward (``kernels.sweep.replay_scalar``) when every value
        of the tape is one float64 number and every entry one it knows; ``vals``:
        the values of a Python replay, which the compiled one must reproduce."""
        self.scalar = False
        if self.live or any(v.size != 1 or v.dtype != np.float64 for v in vals):
            return
        for s, row in enumerate(self.rows):
            rules = FAMILY_RULES.get(family(row[_tp.OP]))     # (none for meta entries: their values are given)
            if rules is not None and index(row[_tp.OP]) not in rules.scalar_replay:
                return
        self.shapes_all = [v.shape for v in vals]
        self.scalar = True
        try:
            got = self.forward([None] * self.nargs, _from=vals)
        except Exception as e:
            if propagates(e):
                self.scalar = None
                raise
            got = None
        if got is None or not _all_same([(got.flts[:, _tp.VAL],
                                           np.fromiter((v.reshape(-1)[0] for v in vals), np.float64, self.n))]):
            self.scalar = False     # (every value one float64 number: one comparison of the entries' VAL field)

    casts = {}                  # (a Recording's own: slot -> the dtype of a reshape entry)
    unfused_s = 0.0             # (the seconds of the last Python forward: ``forward``)
    fuse_switch = None          # (a Recording's own: ``fuse.switch``)
    derived_dtypes = {}         # (a Recording's own: slot -> the dtype its tape saved a derived value in)

    def _program(self):
        """Each entry's forward as a function of the slot values (None for leaves
        and constants, whose values come from ``sources``)."""
        self.program = [self._program_entry(s) for s in range(self.n)]

    def _program_entry(self, s):
        row = self.rows[s]
        code = row[_tp.OP]
        rules = FAMILY_RULES.get(family(code))        # (none for meta entries: ``sources``)
        if family(code) == SHAPE and s in self.live:
            return (s, None, ("live", row[_tp.A], self.shapes[s]))
        f = None if rules is None else rules.replay_rule(index(code), row, self.aux, self.shapes.get(s), self.names[s],
                                                         self.f0[s], self.f1[s])
        if s in self.casts:
            f = _casting(f, np.dtype(self.casts[s]))
        return (s, f, self.sources.get(s))

    def first_checks(self):
        """Before the first replay: the tape replayed on the recorded call's inputs
        (``self.pending``) must reproduce its values, guards and outputs, or it is never
        used (raises ``NotReproduced``; ``_Stale`` when an input kept by reference was
        changed in place since, and the call is to be recorded and checked again).  The
        compiled forwards are decided on those values too."""
        p, self.pending = self.pending, None
        if not p.intact():
            raise _Stale()
        if self.scalar is None and self._scalar_check(p):
            return
        with _gc_paused():
            try:
                vals = self._forward_python(p.arrays, p.captured)
                bad = self.check_args(p.arrays) or self.check_guards(vals, p.arrays)
            except _Rerecord:
                raise _Stale() from None
            except Exception as e:
                if propagates(e):
                    raise
                raise NotReproduced("its replay fails (%s: %s)" % (type(e).__name__, e)) from None
            if bad is not None or not p.reproduced(vals):
                raise NotReproduced("its replay does not reproduce the recorded values")
            if self.scalar is None and (_jit.READY[0] or not _background.deferring()):
                self.compile_scalar(vals)       # (else at a later replay, once the kernels are ready)
            if _jit.READY[0] and not self.scalar and self.arena is None and self.fuse is not True:
                self._arena_plan(p.arrays, vals, p.captured)        # (fuse=True: the fused loops first)

    def forward(self, arrays, _from=None):
        """Every slot's value for argument arrays ``arrays`` (may raise _Rerecord)."""
        if self.pending is not None:
            self.first_checks()
        if self.fused:
            return self.fused.run(arrays)
        if self.fuse_switch is not None:
            return self.switch_fusing(arrays)       # (Recording's: fuse.py)
        if self.scalar:
            return self._forward_scalar(arrays, _from)
        if self.arena:
            return self._forward_arena(arrays)
        t0 = time.perf_counter()
        vals = self._forward_python(arrays)
        self.unfused_s = time.perf_counter() - t0         # (what fuse="auto" weighs its loops against)
        # ("auto" waits for the kernels, asking for them as a backward would: its loops
        # compile in a thread, which must not load them in the foreground)
        if self.fuse and self.fused is None and (self.fuse is True or _jit.READY[0] or _background.request()):
            self.consider_fusing(arrays, vals)      # (Recording's: fuse.py)
            if self.fused or self.fuse_building:
                return vals
        if _jit.READY[0]:
            if self.scalar is None:
                # recorded before the kernels were ready (``_record_call``): decide now
                if _from is None:
                    self.compile_scalar(vals)
            elif self.arena is None:
                got = self._arena_plan(arrays, vals)
                if got is not None:
                    return got      # (every replay from here on gives the compiled forward's bits)
        return vals

    @_quiet.wrap        # (NumPy's warnings kept out, as eager ops': the checks and fusion's switch call it too)
    def _forward_python(self, arrays, captured=None):
        """(``captured``: {slot: value} read instead of those captured tensors.)"""
        if self.program is None:
            with _gc_paused():
                self._program()
        vals = _Vals([None] * self.n)
        if self.live:
            vals.lins = lins = {}
        for s, f, src in self.program:
            if f is not None:
                vals[s] = f(vals)
                continue
            kind = src[0]
            if kind == "live":
                lin = lins[s] = self.live[s](vals, arrays)
                vals[s] = np.take(vals[src[1]], lin).reshape(src[2])
            elif kind == "derived":
                v = self.derived(src[1], vals, arrays)
                dt = self.derived_dtypes.get(s)
                # (a comparison an op promoted before saving it, ``x * (x > 0)``'s mask: the tape's dtype)
                vals[s] = v if dt is None or v.dtype.str == dt else v.astype(dt)
            elif captured is not None and s in captured:
                vals[s] = captured[s]
            else:
                vals[s] = _source_value(src, arrays)
        return vals

    def _scalar_check(self, p):
        """The first replay's check of a tape whose every value is one float64 number,
        without a Python replay: the compiled scalar forward on the recorded inputs
        (``p``, a ``_RecordedCall``) against every value the recording wrote into its
        entries (VAL), and the guards.  True when it holds (the tape then replays so),
        None when this check does not apply or differs (the Python replay's check then
        decides)."""
        if not _jit.READY[0] or self.live or self.casts or not bool((self.ints[:, _tp.SIZE] == 1).all()):
            return None
        for s, src in self.sources.items():
            if src[0] == "arg":
                if self.arg_meta[src[1]][1] != np.float64:
                    return None
            elif src[0] != "captured" or src[3] != np.float64:
                return None
        for row in self.rows:
            rules = FAMILY_RULES.get(family(row[_tp.OP]))
            if rules is not None and index(row[_tp.OP]) not in rules.scalar_replay:
                return None
        shapes = self._scalar_shapes()
        if shapes is None:
            return None
        self.shapes_all, self.scalar = shapes, True
        try:
            got = self._forward_scalar(p.arrays, captured=p.captured)
            recorded = np.frombuffer(self.buf, np.float64).reshape(self.n, _tp.NFIELDS)[:, _tp.VAL]
            ok = (_all_same([(got.flts[:, _tp.VAL], recorded)]) and self.check_args(p.arrays) is None
                  and self.check_guards(got, p.arrays) is None)
        except Exception as e:
            if propagates(e):
                raise
            ok = False
        if not ok:
            self.shapes_all, self.scalar = None, None
            return None
        return True

    def _scalar_shapes(self):
        """Every slot's shape from the recording alone (sources, non-elementwise entries,
        the elementwise ones broadcast from their operands), or None."""
        from ..core.registry import BINARY, BINARY2, UNARY, UNARY2
        shapes = []
        for s, row in enumerate(self.rows):
            src = self.sources.get(s)
            if src is not None:
                shapes.append(self.arg_meta[src[1]][0] if src[0] == "arg" else src[2])
            elif s in self.shapes:
                shapes.append(tuple(self.shapes[s]))
            elif family(row[_tp.OP]) in (UNARY, UNARY2, BINARY, BINARY2):
                ins = [shapes[o] for o in (row[_tp.A], row[_tp.B], row[_tp.C]) if 0 <= o < s]
                if not ins:
                    return None
                shapes.append(max(ins, key=len))        # (one element each: all their dims are 1)
            else:
                return None
        return shapes

    def _forward_scalar(self, arrays, known=None, captured=None):
        from ..kernels.sweep import replay_scalar
        n = self.n
        if self.template is None:
            self._plan()
        # the entries of a replayed tape no longer alive are reused, not copied; the
        # kernel reads the recorded opcodes from ``orig_ops`` (untracked entries are
        # constants of the replayed tape, but computed all the same)
        if self.spare:
            buf, ints, flts = self.spare.pop()      # (with its views of the entries)
        else:
            buf = bytearray(self.template)
            ints = np.frombuffer(buf, np.int64).reshape(n, _tp.NFIELDS)
            flts = np.frombuffer(buf, np.float64).reshape(n, _tp.NFIELDS)
        vals = _ScalarVals(buf, flts, self.shapes_all)
        vals.ints = ints
        for s, src in self.source_items:
            if known is not None:
                v = known[s]
            elif captured is not None and s in captured:
                v = captured[s]
            elif src[0] == "derived":
                v = self.derived(src[1], vals, arrays)
            else:
                v = _source_value(src, arrays)
            flts[s, _tp.VAL] = v.item() if v.ndim else v[()]
        replay_scalar(self.orig_ops, ints, flts, n)
        return vals

    def _arena_plan(self, arrays, vals, captured=None):
        """Use the compiled forward (``kernels.forward``) when every value is float64
        and no constant derives from other values: the entries' values go into one
        arena per replay (laid out here), the sources are read where they are.
        ``vals``: the values of a Python replay of ``arrays`` (and ``captured``, as
        ``_forward_python``'s), which it must reproduce.  Returns the compiled
        forward's values when it applies, else None."""
        self.arena = False
        n = self.n
        if any(src[0] == "derived" for src in self.sources.values()):
            return
        if any(type(v) is not np.ndarray or v.dtype != np.float64 for v in vals):
            return
        if max(v.size for v in vals) > ARENA_SLOT or sum(v.size for v in vals) > ARENA_TOTAL:
            return          # large arrays: NumPy's own loops, and Python per entry costs nothing
        sizes = np.ascontiguousarray(self.ints[:, _tp.SIZE])
        off = np.zeros(n, np.int64)
        total = 0
        for s in range(n):
            if s not in self.sources:
                off[s] = total
                total += -(-int(sizes[s]) // 8) * 8      # each slot 64-byte aligned
        self.sizes_c = sizes
        self.ints_c = np.ascontiguousarray(self.ints)
        self.known = _kf.forward_known(self.ints, sizes, self.aux, self.live)
        # gathers whose indices come from the arguments alone: the indices are made
        # before the kernel runs, which then gathers them itself
        self.pre_gathers = [(s, fn, self.rows[s][4], _pair_gather(fn, arrays))
                            for s, fn in sorted(self.live.items())
                            if isinstance(fn, functools.partial) and fn.func is _live_lin]
        for s, _, _, _ in self.pre_gathers:
            self.known[s] = 1
        self.arena_off = off
        self.arena_bytes = 8 * off
        self.arena_total = max(total, 1)
        self.spare_arena = {}        # "arena": (arena, value addresses) of the last compiled replay
        self.shapes_all = [v.shape for v in vals]
        self.vloc_all = np.full(n, -2, np.int64)
        self.saved_set = frozenset(self.saved_slots)
        self.arena = True
        try:
            got = self._forward_arena(arrays, captured)
            ok = _arena_close(self, got, vals)
            if ok and vals.lins:        # and the gathers' indices, which the reverse sweep reads
                ok = np.array_equal(self.aux if got.aux is None else got.aux, self.aux_with(vals.lins))
        except Exception as e:
            if propagates(e):
                self.arena = None
                raise
            ok = False
        if not ok:
            self.arena = False
            return None
        return got

    def aux_with(self, lins):
        """A copy of the recorded parameter words with the live gathers' indices
        ``lins`` ({slot: flat indices}) where the reverse sweep reads them."""
        aux = self.aux.copy()
        for s, lin in lins.items():
            at = self.rows[s][4]
            aux[at:at + lin.size] = lin
        return aux

    def _new_arena(self):
        """A compiled replay's arena, and the addresses of its values in it."""
        arena = np.empty(self.arena_total)
        return arena, self.arena_bytes + _ks.address(arena)

    def _forward_arena(self, arrays, captured=None):
        n = self.n
        # the last replay's arena again when nothing holds it any more (its tape was
        # freed by backward or died, and no view of it got out): warm memory, no malloc
        # ... and every value's address with it (the arena's part stays with the arena;
        # the sources' are written below).  The two are one pair, so that a thread
        # never gets addresses of another's arena.
        arena, vaddr = _tp.take_spare(self.spare_arena, "arena", self._new_arena)
        self.spare_arena["arena"] = (arena, vaddr)
        src = {}
        for s, sc in self.source_items:     # (no "derived" ones: see _arena_plan)
            v = captured[s] if captured is not None and s in captured else _source_value(sc, arrays)
            if v.dtype != np.float64 or not v.flags.c_contiguous:
                v = np.ascontiguousarray(v, np.float64)
            src[s] = v
            if v.size:
                vaddr[s] = _ks.address(v)
        vals = _ArenaVals(arena, src, self.arena_off, self.shapes_all, vaddr)
        # the replayed tape's entries, made now: the kernel writes the single numbers'
        # values into them (and reads the entries' float parameters)
        if self.template is None:
            self._plan()
        buf = vals.buf = bytearray(self.template)
        flts = np.frombuffer(buf, np.float64).reshape(n, _tp.NFIELDS)
        vals.entries = (np.frombuffer(buf, np.int64).reshape(n, _tp.NFIELDS), flts)
        aux = self.aux
        if self.pre_gathers:
            aux = vals.aux = aux.copy()
            for s, fn, at, pair in self.pre_gathers:
                if pair is not None:        # x[rows, labels]: one call makes the indices
                    a, b, n0, n1 = pair
                    if _sh.pair_index(arrays[a] if type(a) is int else a, arrays[b] if type(b) is int else b,
                                      n0, n1, aux, at) >= 0:
                        raise IndexError("an index is out of range")    # (the eager call says which)
                else:
                    lin = fn(vals, arrays)
                    aux[at:at + lin.size] = lin
        e = _kf.replay_forward(self.ints_c, flts, self.sizes_c, vaddr, aux, self.known, 0)
        while e < n:        # an entry the compiled forward does not know: NumPy, then on
            if self.program is None:
                self._program()
            _, f, sc = self.program[e]
            if f is not None:
                v = f(vals)
            else:           # a live gather: its indices go where the reverse sweep reads them
                lin = self.live[e](vals, arrays)
                if vals.aux is None:
                    aux = vals.aux = aux.copy()
                at = self.rows[e][4]
                aux[at:at + lin.size] = lin
                v = np.take(vals[sc[1]], lin)
            o = self.arena_off[e]
            arena[o:o + self.sizes_c[e]] = np.asarray(v).reshape(-1)
            e = _kf.replay_forward(self.ints_c, flts, self.sizes_c, vaddr, aux, self.known, e + 1)
        return vals

    def derived(self, spec, vals, arrays):
        name, ops = spec
        xs = [self.value_of(r, vals, arrays) for r in ops]
        return np.asarray(_DERIVED_FNS[name](*xs))

    def value_of(self, ref, vals, arrays):
        kind = ref[0]
        if kind == "slot":
            return vals[ref[1]]
        if kind == "arg":
            return arrays[ref[1]]
        if kind == "value":
            return ref[1]
        return self.derived(ref[1], vals, arrays)



def _source_value(src, arrays):
    """The value of a leaf or constant of a replay: ``("arg", i)``, ``("captured",
    tensor, shape, dtype, requires_grad)`` read live (a change means recording
    again) or ``("const", array)``."""
    kind = src[0]
    if kind == "arg":
        return arrays[src[1]]
    if kind == "captured":
        t = src[1]
        d = t._data
        if d.shape != src[2] or d.dtype != src[3] or bool(t._requires_grad) != src[4]:
            raise _Rerecord()
        return d
    return src[1]


class _Vals(list):
    """Slot values of a replay, the indices of its live gathers (``lins``) and what its
    host entries keep in Python (``host_state``: the contexts of tg.autograd.Function calls)."""
    __slots__ = ("lins", "host_state")

    def __init__(self, items):
        super().__init__(items)
        self.lins = None
        self.host_state = None


class _ArenaVals:
    """The values of a compiled replay (``Recording._forward_arena``): the sources'
    arrays, and the entries' values in one arena (views made on demand); ``host_state``
    as ``_Vals``'."""
    __slots__ = ("arena", "src", "off", "shapes", "vaddr", "lins", "views", "aux", "buf", "entries", "host_state")

    def __init__(self, arena, src, off, shapes, vaddr):
        self.arena, self.src, self.off, self.shapes, self.vaddr = arena, src, off, shapes, vaddr
        self.lins = self.aux = self.host_state = None
        self.views = {}

    def __getitem__(self, s):
        v = self.src.get(s)
        if v is None:
            v = self.views.get(s)
            if v is None:
                shape = self.shapes[s]
                o = self.off[s]
                v = self.views[s] = self.arena[o:o + math.prod(shape)].reshape(shape)
        return v


class _SavedVals:
    """``T.vals`` of a compiled replay's tape: slot -> the value its reverse reads
    (a view of the arena or a source array, the same object at every read) or
    None; assignments (``engine._free``) override."""
    __slots__ = ("vals", "saved", "n", "over")

    def __init__(self, vals, saved, n):
        self.vals, self.saved, self.n, self.over = vals, saved, n, None

    def __len__(self):
        return self.n

    def __getitem__(self, s):
        if not 0 <= s < self.n:
            raise IndexError("slot %d out of range" % s)
        over = self.over
        if over is not None and s in over:
            return over[s]
        return self.vals[s] if s in self.saved else None

    def __setitem__(self, s, v):
        if not 0 <= s < self.n:
            raise IndexError("slot %d out of range" % s)
        if self.over is None:
            self.over = {}
        self.over[s] = v

    def __iter__(self):
        return (self[s] for s in range(self.n))


def _arena_close(R, got, vals):
    """``_close(got[s], vals[s])`` for every entry's value of a compiled replay
    (``got``, in its arena) against a Python replay's, in one pass over the arena
    (the sources are the same arrays in both)."""
    slots = [s for s in range(R.n) if s not in R.sources and R.sizes_c[s]]
    if not slots:
        return True
    sizes = R.sizes_c[slots]
    starts = np.cumsum(sizes) - sizes
    where = np.repeat(R.arena_off[slots] - starts, sizes) + np.arange(int(sizes.sum()))
    y = np.concatenate([np.asarray(vals[s], np.float64).reshape(-1) for s in slots])
    return _flat_close(got.arena[where], y, sizes)


def _flat_close(x, y, sizes):
    """``_close`` of the pieces of ``sizes`` elements (none empty) of flat ``x``, ``y``."""
    fin = np.isfinite(y)
    if not np.array_equal(fin, np.isfinite(x)) or not np.array_equal(x[~fin], y[~fin], equal_nan=True):
        return False
    starts = np.cumsum(sizes) - sizes
    scale = np.repeat(np.maximum.reduceat(np.where(fin, np.abs(y), 0.0), starts), sizes)
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.where(fin, np.abs(x - y) <= 1e-12 * scale, True)))


def _close(a, b):
    """The compiled forward's value ``a`` against NumPy's ``b``: within 1e-12 of
    the largest magnitude (BLAS and libm round differently, never more)."""
    if a.shape != b.shape:
        return False
    fin = np.isfinite(b)
    if not np.array_equal(fin, np.isfinite(a)) or not np.array_equal(a[~fin], b[~fin], equal_nan=True):
        return False
    if not fin.any():
        return True
    scale = float(np.max(np.abs(b[fin])))
    return bool(np.all(np.abs(a[fin] - b[fin]) <= 1e-12 * scale))


class _ScalarVals:
    """The values of a compiled scalar replay: slot ``s`` is ``flts[s, VAL]``."""
    __slots__ = ("buf", "ints", "flts", "shapes")

    def __init__(self, buf, flts, shapes):
        self.buf, self.flts, self.shapes = buf, flts, shapes
        self.ints = None

    def __getitem__(self, s):
        return np.full(self.shapes[s], self.flts[s, _tp.VAL])
