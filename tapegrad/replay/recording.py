"""A recorded tape and what replaying it needs (``Recording``), and the recording
of one call (``_record_call``).

A replay (``Recording.forward``, see ``forward.py``) recomputes every entry from
its inputs, ``check_guards`` compares what Python read, and ``tape_for`` builds a
sealed ``ReplayedTape`` over the new values: the ordinary compiled reverse sweep
then differentiates it, accumulating into the live leaves.
"""
import threading
import weakref

import numpy as np

from ..core import tape as _tp
from ..kernels import sweep as _ks
from ..ops import elementwise as _ew
from ..ops import shape as _sh
from ..core.registry import CHECK_TAPES, CONST, EXT, FAMILY_SHIFT, GRAD_FN_NAMES, LEAF, META_END, SHAPE, check_entries
from ..ops._record import RESHAPE
from ..core.tensor import Tensor
from .forward import Forward, _ArenaVals, _SavedVals, _ScalarVals
from .fuse import FusedVals, consider as _consider_fusing, switch as _switch_fusing
from .replayed import ArraysPlan, NumbersPlan, ReplayedTape
from .session import (NotReproduced, _Rerecord, _Session, _all_same, _arg_shape_dtype, _begin, _end, _flatten,
                      _gc_paused, _is_array_arg, _plain_wrap, _real, _recording_arg, _unflatten)


# -- a recording ----------------------------------------------------------------------
class Recording(Forward):
    """One recorded tape and what replaying it needs.  ``forward(args)`` replays.

    ``__init__`` sets every attribute: what the recording holds, then (in
    ``_forget_layouts``) what replays lay out from it on first use, which
    ``with_grad_args``, pickling and tape files make again."""

    def __init__(self, rec, out_template, out_refs, nargs):
        T = rec.tape
        n = T.n
        self.n = n
        self.buf = bytes(T.buf[:n * _tp.ESIZE])
        # (the calls of tg.autograd.Functions: their specs must live as long as the recording;
        # not their contexts, which hold the recorded tensors)
        self.host_keep = [getattr(v[-1], "_spec", v) for v in (getattr(T, "host_state", None) or {}).values()]
        ints, flts = T.arrays()
        self.ints = ints.copy()
        self.f0 = flts[:, _tp.F0].copy()
        self.f1 = flts[:, _tp.F1].copy()
        self.aux = np.concatenate(T.aux) if T.aux else np.zeros(0, np.int64)
        if CHECK_TAPES[0]:          # (the compiled forwards and fused programs index by these words too)
            check_entries(self.ints, self.aux)
        self.shapes = dict(T.shapes)
        # the dtypes of the reshape entries: a float cast (``x.float()``) is one, its replay casts
        reshape = (SHAPE << FAMILY_SHIFT) | RESHAPE
        self.casts = {s: dt for s, dt in T.dtypes.items() if self.ints[s, _tp.OP] == reshape}
        self.saved = np.array([v is not None for v in T.vals], bool)
        self.saved_slots = np.flatnonzero(self.saved).tolist()
        self.nargs = nargs
        # by argument position; an argument that is not an array (a number, an option of
        # tg.compile's signature key) is "value", with no shape
        self.arg_kinds = [rec.arg_at[i][0] if i in rec.arg_at else "value" for i in range(nargs)]
        self.arg_meta = [_arg_shape_dtype(rec.arg_at[i][2]) if i in rec.arg_at else None for i in range(nargs)]
        self.sources = {}
        for s, src in rec.sources.items():
            if src[0] == "captured":
                t = src[1]
                self.sources[s] = ("captured", t, t._data.shape, t._data.dtype, bool(t._requires_grad))
            else:
                self.sources[s] = src
        self.guards = rec.guards
        self.arg_guards = rec.arg_guards
        # the dtype in which the tape saved a value derived off it (a comparison), where it
        # differs from the derived value's own
        self.derived_dtypes = {}
        for s, src in self.sources.items():
            v = T.vals[s]
            if src[0] == "derived" and v is not None:
                self.derived_dtypes[s] = np.asarray(v).dtype.str
        self.fn_guards = rec.fn_guards
        self.arg_views = tuple(rec.arg_views)     # (argument, shape): index nargs + k of a replay's arrays
        self.live = {s: f for s, f in rec.live.items() if s < n}
        self.out_template = out_template
        self.out_refs = out_refs
        self.rg = _requires_grad(self.ints, self.aux, self._source_rg())
        # entries that depend on no leaf needing a gradient are constants of the replayed
        # tape, as eager execution would not have recorded them at all
        self.untracked = np.flatnonzero(~self.rg & (self.ints[:, _tp.OP] >= META_END))
        # the recording traced every argument, so its entries kept what they would for
        # inputs that all need a gradient; a replay keeps what eager execution keeps
        ops = self.ints[:, _tp.OP].copy()
        ops[self.untracked] = CONST
        for s, src in self.sources.items():
            if src[0] == "arg" and self.arg_kinds[src[1]] not in ("leaf", "nonleaf"):
                ops[s] = CONST
        self.saved &= _kept(self.ints, ops)
        self.saved_slots = np.flatnonzero(self.saved).tolist()
        self.out_slots = sorted({r[1] for r in out_refs if r is not None and r[0] == "slot"})
        self.source_items = sorted(self.sources.items())
        self.one_slots = np.flatnonzero(self.ints[:, _tp.SIZE] == 1)
        self.names = [GRAD_FN_NAMES[nm] if nm >= 0 else "" for nm in self.ints[:, _tp.NAME].tolist()]
        self.rows = self.ints[:, :6].tolist()
        # entries that view their input (they share its version counter, as in eager
        # execution), in tape order: a replay gives them their input's counter, so a
        # kept view of a parameter changed in place (an optimizer step) is noticed
        versions = T.versions
        self.view_links = [(s, a) for s, (op, a) in enumerate(self.ints[:, :2].tolist())
                           if op >= META_END and a >= 0 and versions[s] is versions[a]]
        # the forward strategy (forward.py), decided at the first replays
        self.scalar = None      # set by ``compile_scalar``: False when the compiled scalar forward does not apply
        self.arena = None       # set by ``_arena_plan``: False when the compiled arena forward does not apply
        self.program = None     # see ``_program``
        self.shapes_all = None  # every slot's shape, for the compiled forwards
        self.captures = None    # tg.compile: the guards on what the function reads from outside its arguments
        self.checked = False    # a tape file's: the bounds-checked NumPy reverse (``tg.load_tape``)
        self.fuse = False       # tg.compile's and tg.record's ``fuse``: False, True or "auto" (fuse.py)
        self.fuse_name = ""     # (the function's name, for fuse.py's warning)
        self.pending = None     # ``_RecordedCall``: what the first replay checks the tape against
        self.live_params = []   # tg.compile: (slot, field, sign, index) of the numbers read live (``set_live``)
        self.live_now = None    # ... and their values at the last replay
        self.live_lock = threading.RLock()      # (held from setting them until the replayed tape is made)
        self._forget_layouts()

    def _forget_layouts(self):
        """(Re)set what replays lay out from the recording on first use."""
        # ``_plan``: the replayed tapes' entries, and where their leaves come from
        self.template = None
        self.orig_ops = None
        self.links = None
        self.vobj_own = None
        # reused by single-number replays: dead tapes' entry buffers (with their views),
        # a version-counter list ("versions": ``take_spare``), a list of Nones for values
        self.spare = []
        self.spare_versions = {}
        self.shared_slot = None
        self.none_vals = None
        # how backward sweeps the replayed tapes (replayed.py)
        self.arrays_plan = ArraysPlan()
        self.numbers_plan = NumbersPlan()
        # ``_arena_plan``: the compiled arena forward's layout
        self.sizes_c = None
        self.ints_c = None
        self.known = None
        self.pre_gathers = None
        self.arena_off = None
        self.arena_bytes = None
        self.arena_total = None
        self.spare_arena = {}
        self.vloc_all = None
        self.saved_set = None
        # ``fuse.try_fuse``: the fused program (None: not tried yet; False: not fused, why in ``fuse_why``)
        self.fused = None
        self.fused_plan = None
        self.fuse_why = None
        self.unfused_replays = 0
        self.fused_pending = None       # (fuse="auto": the program compiled in the background, or why not)
        self.fuse_switch = None         # (... compiled: the next replay checks it and switches, ``fuse.switch``)
        self.fuse_building = False

    def _source_rg(self):
        out = {}
        for s, src in self.sources.items():
            if src[0] == "arg":
                out[s] = self.arg_kinds[src[1]] in ("leaf", "nonleaf")
            elif src[0] == "captured":
                out[s] = src[4]
        return out


    def with_views(self, arrays):
        """A replay's argument arrays, then the reshapes of integer arguments that the
        function indexed with (``arg_views``: labels flattened by ``view(-1)``)."""
        if not self.arg_views:
            return arrays
        return list(arrays) + [arrays[i].reshape(shape) for i, shape in self.arg_views]

    def check_args(self, arrays):
        for fn, i, val, where in self.fn_guards:
            new = fn(arrays[i])
            if new != val:
                return ("the labels of argument %d, read at %s" % (i, where), val, new)
        for i, (val, where) in self.arg_guards.items():
            new = arrays[i]
            if new.shape != val.shape or new.dtype != val.dtype or new.tobytes() != val.tobytes():
                return ("the values of integer argument %d, read at %s" % (i, where), val, new)
        return None

    def check_guards(self, vals, arrays):
        for ref, val, where in self.guards:
            new = self.value_of(ref, vals, arrays)
            if np.shape(new) != val.shape or not np.array_equal(new, val, equal_nan=val.dtype.kind == "f"):
                return (where, val, new)
        return None

    def _plan(self):
        """What every replayed tape of this recording shares: its entries with the
        untracked ones made constants and versions zeroed, and for each leaf or
        constant where its tensor comes from (argument index or captured tensor)."""
        buf = bytearray(self.buf)
        n = self.n
        ints = np.frombuffer(buf, np.int64).reshape(n, _tp.NFIELDS)
        ints[:, _tp.VERSION] = 0
        ints[self.untracked, _tp.OP] = CONST
        links = []          # (slot, argument index or -1, captured tensor or None, kind)
        for s, src in sorted(self.sources.items()):
            if src[0] == "arg":
                kind = self.arg_kinds[src[1]]
                if kind == "nonleaf":
                    ints[s, _tp.OP] = EXT
                elif kind != "leaf":
                    ints[s, _tp.OP] = CONST
                links.append((s, src[1], None, kind))
            elif src[0] == "captured":
                links.append((s, -1, src[1], "leaf" if ints[s, _tp.OP] == LEAF else "const"))
        self.orig_ops = np.ascontiguousarray(self.ints[:, _tp.OP])
        del ints
        self.template = bytes(buf)
        self.links = links
        own = {s for s, _, _, _ in links} | set(self.out_slots) | {s for s, _ in self.view_links}
        self.vobj_own = sorted(own)
        self.shared_slot = next((s for s in range(self.n) if s not in own), None)     # (where the shared counter is)

    def consider_fusing(self, arrays, vals):
        _consider_fusing(self, arrays, vals)

    def switch_fusing(self, arrays):
        return _switch_fusing(self, arrays)

    def fusion(self):
        """What fusion did with this recording: its ``FusedProgram.stats``, or why it is not fused."""
        if self.fused:
            return dict(self.fused.stats, fused=True)
        if self.fuse_building or self.fused_pending is not None or self.fuse_switch is not None:
            return {"fused": False, "why": "compiling in the background"}
        if self.fuse and not self.fuse_why and (self.arena or self.scalar):
            return {"fused": False, "why": "its values are small: the compiled forward of small arrays serves it"}
        why = self.fuse_why or ("fusion is off (fuse=False)" if not self.fuse else "not replayed often enough yet")
        return {"fused": False, "why": why}

    def _entries_for(self, vals, plan):
        """A replayed tape over a copy of the entries, the one-element values in them."""
        n = self.n
        buf = bytearray(self.template)
        ints = np.frombuffer(buf, np.int64).reshape(n, _tp.NFIELDS)
        flts = np.frombuffer(buf, np.float64).reshape(n, _tp.NFIELDS)
        ones = self.one_slots
        if ones.size:
            flts[ones, _tp.VAL] = np.array([vals[s].reshape(-1)[0] for s in ones.tolist()], np.float64)
        return ReplayedTape(buf, n, (ints, flts), plan)

    def tape_for(self, vals, arrays, args):
        """A sealed tape over the replayed values, whose leaves are the live tensors."""
        if self.template is None:
            self._plan()
        n = self.n
        scalar = isinstance(vals, _ScalarVals)
        if scalar:
            buf = vals.buf
            T = ReplayedTape(buf, n, (vals.ints, vals.flts), self.numbers_plan)
            if len(self.spare) < 2:
                weakref.finalize(T, self.spare.append, (buf, vals.ints, vals.flts))
            # one-element values live in the entries (VAL): no values, and one list of
            # Nones shared by the replays (a sealed tape's values are only ever cleared)
            if self.none_vals is None:
                self.none_vals = [None] * n
            T.vals = self.none_vals
        elif type(vals) is FusedVals:      # (the program wrote the outputs and every one-element value)
            T = self._entries_for(vals, self.fused_plan)
            if self.saved_set is None:
                self.saved_set = frozenset(self.saved_slots)
            T.vals = _SavedVals(vals, self.saved_set, n)      # (the others made when read)
            T.arena = vals
        elif type(vals) is _ArenaVals:     # (the entries made by the compiled forward, their VAL filled)
            # (live gathers change indices, never which entries backward runs: one plan)
            T = ReplayedTape(vals.buf, n, vals.entries, self.arrays_plan)
            # the saved values as views of the arena, made when read (the compiled sweep
            # reads them by address; differentiating twice, grad_fn and memory_stats
            # read them as arrays)
            T.vals = _SavedVals(vals, self.saved_set, n)
            T.vaddr = (self.vloc_all, vals.vaddr)      # the sweep reads every value where it is
            T.arena = vals                              # ... which keeps it alive
            T.host_state = vals.host_state              # (tg.autograd.Function contexts)
        else:
            T = self._entries_for(vals, self.arrays_plan)
            T.host_state = getattr(vals, "host_state", None)     # (tg.autograd.Function contexts)
            tv = T.vals = [None] * n
            for s in self.saved_slots:
                tv[s] = vals[s]
        # the version counters: one shared by the entries no tensor shows (never
        # bumped), the leaves' own, the outputs' own.  A single-number tape takes the
        # last replay's list again when that tape is gone (no large allocation).
        if scalar:
            versions = _tp.take_spare(self.spare_versions, "versions", _shared_versions, n)
            # (a reused list's counter is in the slots no tensor shows; all slots may be shown)
            shared = versions[self.shared_slot] if self.shared_slot is not None else [0]
            for s in self.vobj_own:
                versions[s] = shared
            self.spare_versions["versions"] = versions
        else:
            shared = [0]
            versions = [shared] * n
        ext = T.ext
        leaves = T.leaves
        vnum = []
        for s, i, t, kind in self.links:
            if t is None:
                t = args[i]
                if not isinstance(t, Tensor):
                    continue
                if kind == "nonleaf":
                    ext[s] = (t._tape, t._slot)
                    t._tape.seal()
            if kind == "leaf":
                leaves[s] = t
                # (where the leaf is on this tape, as an eager call's adoption says: the
                # tangent walks of autograd.functional and tg.func find its slot so)
                t._tape_id, t._slot, t._slot_version = T.id, s, t._ver[0]
            versions[s] = t._ver
            if t._ver[0] or scalar:     # (a reused buffer holds the last replay's versions)
                vnum.append((s, t._ver[0]))
        for s, a in self.view_links:
            v = versions[s] = versions[a]
            if v[0] or scalar:
                vnum.append((s, v[0]))
        if vnum:
            ints = T.arrays()[0]
            for s, v in vnum:
                ints[s, _tp.VERSION] = v
        for s in self.out_slots:       # an output changed in place moves its own version only
            if versions[s] is shared:
                versions[s] = [0]
        T.versions = versions
        aux = self.aux
        lins = getattr(vals, "lins", None)
        if type(vals) is _ArenaVals and vals.aux is not None:
            aux = vals.aux          # (the live gathers' indices are in it already)
        elif lins:
            aux = self.aux_with(lins)
        T.aux = [aux]
        T.aux_len = aux.size
        T.inplace_mark = _tp.inplace_counter[0]
        return T

    def outputs(self, vals, arrays, args, T):
        leaves = []
        for ref in self.out_refs:
            kind = ref[0]
            if kind == "slot":
                s = ref[1]
                if type(vals) is _ArenaVals and s not in vals.src:
                    o = self.arena_off[s]       # a copy: a kept output must not keep the whole arena alive
                    v = vals.arena[o:o + self.sizes_c[s]].reshape(self.shapes_all[s])
                    v = v.copy()
                else:
                    v = vals[s]
                if self.rg[s] and T is not None:
                    leaves.append(Tensor._recorded(v, T, s, T.versions[s]))
                else:
                    leaves.append(_plain_wrap(v))
            elif kind == "arg":
                a = args[ref[1]]
                leaves.append(a if isinstance(a, Tensor) else _plain_wrap(a))
            elif kind == "object":
                leaves.append(ref[1])
            else:
                leaves.append(_plain_wrap(self.derived(ref[1], vals, arrays)))
        return _unflatten(self.out_template, leaves)

    def with_grad_args(self, argnums):
        """This recording with only the arguments ``argnums`` (a tuple of indices)
        as gradient leaves: the other floating-point arguments are constants of
        the replayed tapes, so the reverse sweep does not reach them."""
        import copy
        R = copy.copy(self)
        R.fuse, R.fuse_name = self.fuse, self.fuse_name      # (not in the saved state: see __getstate__)
        R.pending = None
        R.arg_kinds = [k if (i in argnums or k not in ("leaf", "nonleaf")) else "data"
                       for i, k in enumerate(self.arg_kinds)]
        R.rg = _requires_grad(self.ints, self.aux, R._source_rg())
        R.untracked = np.flatnonzero(~R.rg & (self.ints[:, _tp.OP] >= META_END))
        # (what replays lay out from the kinds and flags: made again for this one)
        R._forget_layouts()
        R.arena = False if self.arena is False else None      # (False: not for this forward, or a loaded file)
        return R

    # -- numbers read live (tg.compile: ``captured.StandIns``) ---------------------
    def number_positions(self, old, numbers):
        """Where this recording reads ``numbers`` [(old value, new value)] that recording
        ``old`` read as old values: {number index: [(slot, F0 or F1, sign)]}, when the two
        differ only there (the same entries, sources, guards and outputs), each such
        parameter an operand the entry applies as it is (``x * s``, ``x + s``, ``x - s``:
        sign -1, ``s / x``, ``x ** s``...); else None."""
        if not _same_but_numbers(old, self):
            return None
        out = {}
        for col, a_, b_ in ((_tp.F0, old.f0, self.f0), (_tp.F1, old.f1, self.f1)):
            diff = np.flatnonzero(a_.view(np.int64) != b_.view(np.int64))
            for s in diff.tolist():
                hits = [(i, sign) for i, (a, b) in enumerate(numbers) for sign in (1.0, -1.0)
                        if _bits(a_[s]) == _bits(sign * a) and _bits(b_[s]) == _bits(sign * b)]
                if len(hits) != 1 or col != _tp.F0 or self.rows[s][_tp.OP] not in _NUMBER_OPS:
                    return None
                i, sign = hits[0]
                out.setdefault(i, []).append((s, col, sign))
        return out or None

    def set_live(self, values):
        """The numbers read live at this replay (``live_params``: (slot, field, sign,
        index into ``values``)) into the entries' parameters: the arrays, the replay's
        template, the spare entries, the Python forward's calls."""
        if values == self.live_now:
            return
        if self.pending is not None:        # (its check replays the recorded values first)
            self.first_checks()
        buf = self.buf if type(self.buf) is bytearray else bytearray(self.buf)
        self.buf = buf
        if self.template is not None and type(self.template) is not bytearray:
            self.template = bytearray(self.template)
        # (the entries' float fields, as arrays over those buffers)
        targets = [np.frombuffer(b, np.float64) for b in [buf] + ([self.template] if self.template is not None
                                                                   else [])] + [f.reshape(-1) for _, _, f in self.spare]
        for s, col, sign, i in self.live_params:
            v = sign * values[i]
            (self.f0 if col == _tp.F0 else self.f1)[s] = v
            at = s * _tp.NFIELDS + col
            for f in targets:
                f[at] = v
            if self.program is not None:
                self.program[s] = self._program_entry(s)
        self.live_now = values

    # -- saving ---------------------------------------------------------------
    def __getstate__(self):
        st = dict(self.__dict__)
        src = {}
        for s, v in self.sources.items():
            if v[0] == "captured":       # saved as its current value: a constant of the saved tape
                src[s] = ("const", np.array(v[1]._data, copy=True))
            else:
                src[s] = v
        st["sources"] = src
        st["source_items"] = sorted(src.items())
        for k in _LAYOUTS:      # (laid out again by the process that replays it)
            del st[k]
        del st["program"], st["arena"], st["captures"], st["pending"], st["live_params"], st["live_now"], st["live_lock"]
        st["buf"] = bytes(st["buf"])        # (the numbers read live as they were last: constants of the saved tape)
        st.pop("host_keep", None)           # (Python objects: a loaded tape cannot run a Function)
        del st["fuse"], st["fuse_name"]     # (a loaded tape is fused only when asked again)
        st.pop("unfused_s", None)           # (this process's timing of its replays)
        if st["shapes_all"] is None:
            del st["shapes_all"]
        st["out_refs"] = [r if r[0] != "object" else ("value_tensor", np.array(r[1]._data)) for r in self.out_refs]
        return st

    def __setstate__(self, st):
        self.__dict__.update(st)
        for k in ("constants", "rg_slots", "real_leaf"):    # (never read: kept by tape files of format 2)
            self.__dict__.pop(k, None)
        self.__dict__.setdefault("view_links", [])
        self.__dict__.setdefault("shapes_all", None)
        self.__dict__.setdefault("checked", False)
        self.__dict__.setdefault("derived_dtypes", {})
        self.__dict__.setdefault("casts", {})
        self.__dict__.setdefault("arg_views", ())
        self.__dict__.setdefault("fuse", False)
        self.__dict__.setdefault("fuse_name", "")
        self.__dict__.pop("env", None)
        self.program = None
        self.arena = None
        self.captures = None
        self.pending = None
        self.live_params = []
        self.live_now = None
        self.live_lock = threading.RLock()
        self.host_keep = []
        self._forget_layouts()
        self.saved_slots = np.flatnonzero(self.saved).tolist()
        self.out_refs = [r if r[0] != "value_tensor" else ("object", _plain_wrap(r[1])) for r in self.out_refs]



# the entries whose F0 parameter is an operand applied as it is (``x * s``: mul_s(x, s))
_NUMBER_OPS = frozenset(_ew.UNARY_BY_NAME[k].code for k in ("add_s", "mul_s", "div_s", "rsub_s", "rdiv_s",
                                                             "pow_s", "rpow_s"))


def _bits(v):
    return np.float64(v).view(np.int64)


def _same_but_numbers(a, b):
    """Whether recordings ``a`` and ``b`` are the same tape but for their entries'
    parameters: entries, auxiliary words, shapes, sources (the same captured tensors, or
    equal constants), guards, outputs."""
    if a.n != b.n or a.nargs != b.nargs or a.arg_kinds != b.arg_kinds or a.shapes != b.shapes or a.casts != b.casts:
        return False
    cols = [c for c in range(_tp.NFIELDS) if c not in (_tp.VERSION, _tp.F0, _tp.F1, _tp.VAL)]    # (the int fields)
    if not (np.array_equal(a.ints[:, cols], b.ints[:, cols]) and np.array_equal(a.aux, b.aux)):
        return False
    if a.sources.keys() != b.sources.keys() or a.live.keys() != b.live.keys():
        return False
    for s, x in a.sources.items():
        y = b.sources[s]
        if x[0] != y[0]:
            return False
        if x[0] == "captured":
            if x[1] is not y[1] and (x[4] or y[4] or not _deep_equal(x[1]._data, y[1]._data)):
                return False
        elif not _deep_equal(x[1:], y[1:]):
            return False
    return (len(a.guards) == len(b.guards) and all(_deep_equal(g[:2], h[:2]) for g, h in zip(a.guards, b.guards))
            and _deep_equal(a.arg_guards, b.arg_guards)
            and _deep_equal([g[1:3] for g in a.fn_guards], [g[1:3] for g in b.fn_guards])
            and a.arg_views == b.arg_views
            and _deep_equal(a.out_template, b.out_template) and _deep_equal(a.out_refs, b.out_refs)
            and all(_deep_equal(a.live[s].args, b.live[s].args) for s in a.live))


def _deep_equal(x, y):
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.shape == y.shape
                and x.dtype == y.dtype and x.tobytes() == y.tobytes())
    if isinstance(x, Tensor) or isinstance(y, Tensor):
        return x is y
    if type(x) is not type(y):
        return False
    if isinstance(x, (tuple, list)):
        return len(x) == len(y) and all(_deep_equal(p, q) for p, q in zip(x, y))
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_deep_equal(x[k], y[k]) for k in x)
    if isinstance(x, float) and x != x:
        return y != y
    try:
        return bool(x == y)
    except Exception:
        return x is y


def _shared_versions(n):
    """The version counters of a replayed tape's ``n`` entries: one shared counter."""
    return [[0]] * n


# what ``Recording._forget_layouts`` sets
_LAYOUTS = ("template", "orig_ops", "links", "vobj_own", "shared_slot", "spare", "spare_versions", "none_vals",
            "arrays_plan", "numbers_plan", "sizes_c", "ints_c", "known", "pre_gathers", "arena_off", "arena_bytes",
            "arena_total", "spare_arena", "vloc_all", "saved_set", "fused", "fused_plan", "fuse_why",
            "unfused_replays", "fused_pending", "fuse_switch", "fuse_building")


# -- recording a call ---------------------------------------------------------------
class _RecordedCall:
    """What the recording call computed, kept until the first replay checks that the
    tape replayed on the same inputs reproduces it (``Recording.first_checks``): the
    check costs about one replay, which the recording call does not pay.

    The inputs as they were: a NumPy argument copied (a caller may refill it), a
    tensor argument's array kept with the tensor's version (one changed in place since
    means recording again, checked at once), a captured tensor that requires grad
    copied (an optimizer changes it before the next call), any other captured tensor
    kept as a tensor argument is; the values the tape kept and the outputs, by
    reference (an output's version watched too).  No tensor is kept: the recorded
    tape and its values are freed as an eager call's are."""
    __slots__ = ("arrays", "captured", "watch", "values")

    def __init__(self, R, rec, leaves, refs, args):
        self.arrays, self.watch = [], []
        for a in args:
            if isinstance(a, Tensor):
                self.arrays.append(a._data)
                self.watch.append((a._ver, a._ver[0]))
            elif isinstance(a, np.ndarray):
                self.arrays.append(a.copy())
            else:
                self.arrays.append(a)
        self.arrays = R.with_views(self.arrays)
        self.captured = {}
        for s, src in R.sources.items():
            if src[0] == "captured":
                t = src[1]
                if src[4]:
                    self.captured[s] = t._data.copy()
                else:
                    self.captured[s] = t._data
                    self.watch.append((t._ver, t._ver[0]))
        # (not the sources' values, nor views of their memory: an optimizer's step, or a
        # caller refilling an argument, changes them; the values computed from them tell)
        sources = {id(_root(_real(a))) for a in args if _is_array_arg(a)}
        sources.update(id(_root(src[1]._data)) for src in R.sources.values() if src[0] == "captured")
        values = [(s, v) for s, v in enumerate(rec.tape.vals)
                  if v is not None and s not in R.sources and id(_root(v)) not in sources]
        for t, r in zip(leaves, refs):
            if r is not None and r[0] == "slot" and id(_root(t._data)) not in sources:
                values.append((r[1], t._data))
                self.watch.append((t._ver, t._ver[0]))
        self.values = values

    def intact(self):
        """Whether no tensor whose array it keeps was changed in place since."""
        return all(ver[0] == v for ver, v in self.watch)

    def reproduced(self, vals):
        return _all_same([(v, vals[s]) for s, v in self.values])


def _root(a):
    """The array whose memory ``a`` views (``a`` itself when it owns its memory)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def _record_call(fn, args, kwargs, grad_arrays=False, check_now=False, fuse=False):
    """Run ``fn`` once under a session.  Returns (outputs as eager would give them,
    Recording or None, the reason it cannot be replayed or None).  Whether a replay
    reproduces the call is checked at the first replay (``Recording.first_checks``),
    or here with ``check_now``.  ``fuse``: tg.compile's or tg.record's."""
    rec = _Session()
    rec.nargs = len(args)
    _begin(rec)
    try:
        targs = [(_recording_arg(rec, i, v, grad_arrays) if _is_array_arg(v) else v) for i, v in enumerate(args)]
        out = fn(*targs, **kwargs)
    finally:
        _end(rec)
    leaves = []
    tpl = _flatten(out, leaves)
    refs = []
    T = rec.tape
    for t in leaves:
        if id(t) in rec.derived:
            refs.append(("derived", rec.derived[id(t)][1]))
        elif id(t) in rec.arg_ids:
            refs.append(("arg", rec.arg_ids[id(t)]))
        elif t._tape is T and t._slot_version == t._ver[0]:
            refs.append(("slot", t._slot))
        elif t._tape is None and id(t) not in rec.tainted and not t._requires_grad:
            refs.append(("object", t))
        else:
            rec.refuse("it returns a tensor the tape does not produce (computed off the tape, or changed in place "
                       "after its last recorded operation)")
            refs.append(None)
    if T.n == 0:
        rec.refuse("it records nothing")
    for kind, user, t, v0 in rec.args:
        if t._ver[0] != v0:
            rec.refuse("it changes an argument in place")
    for s, src in rec.sources.items():
        if src[0] == "captured" and src[1]._ver[0] != T.field(s, _tp.VERSION):
            rec.refuse("it changes a captured tensor in place")
    user_args = list(args)          # (by position, as a replay's arguments)
    R = None
    with _gc_paused():
        if rec.reason is None:
            R = Recording(rec, tpl, refs, len(args))
            R.fuse, R.fuse_name = fuse, getattr(fn, "__name__", repr(fn))
            R.pending = _RecordedCall(R, rec, leaves, refs, user_args)
            if check_now:
                try:
                    R.first_checks()
                except NotReproduced as e:
                    rec.refuse(str(e))
                    R = None
                except _Rerecord:
                    rec.refuse("its replay does not reproduce the recorded values")
                    R = None
        # what the eager call returns: the recorded tensors, with the arguments' stand-ins
        # turned back into constants (so requires_grad is what eager execution gives)
        for s, t in list(T.leaves.items()):
            i = rec.arg_ids.get(id(t))
            if i is not None and rec.arg_at[i][0] != "leaf":
                del T.leaves[s]
                a = rec.arg_at[i][1]
                if rec.arg_at[i][0] == "nonleaf":       # (as eager adoption imports it: gradients flow to its tape)
                    T.set_field(s, _tp.OP, EXT)
                    T.ext[s] = (a._tape, a._slot)
                    a._tape.seal()
                else:
                    T.set_field(s, _tp.OP, CONST)
        ints, _ = T.arrays()
        aux = np.concatenate(T.aux) if T.aux else np.zeros(0, np.int64)
        rg = _requires_grad(ints, aux, {s: s in T.leaves for s in range(T.n) if ints[s, _tp.OP] in (LEAF, CONST)})
        ints[np.flatnonzero(~rg & (ints[:, _tp.OP] >= META_END)), _tp.OP] = CONST   # what eager execution would not record
        del ints
    fixed = []
    for t, r in zip(leaves, refs):
        if r is not None and r[0] == "arg":
            a = user_args[r[1]]
            fixed.append(a if isinstance(a, Tensor) else _plain_wrap(a))
        elif t._requires_grad and t._tape is T and not rg[t._slot]:
            fixed.append(_plain_wrap(t._data))
        else:
            fixed.append(t)
    return _unflatten(tpl, fixed), R, rec.reason


def _kept(ints, ops):
    """Which slots the entries keep for the reverse pass (``kernels.sweep.free_saved``'s
    rule), with ``ops`` the opcodes as replayed (constants where eager execution
    records nothing, which need no gradient)."""
    n = ints.shape[0]
    keep = np.zeros(n, bool)
    e = np.flatnonzero(ops >= META_END)
    a, b, c = ints[e, _tp.A], ints[e, _tp.B], ints[e, _tp.C]
    rg = (((a >= 0) & (ops[a] != CONST)).astype(np.int64)
          | (((b >= 0) & (ops[b] != CONST)).astype(np.int64) << 1))
    sv = _ks.SAVES_TABLE[ops[e], rg]
    for col, bit in ((a, 1), (b, 2), (c, 4)):
        keep[col[((sv & bit) != 0) & (col >= 0)]] = True
    keep[e[(sv & 8) != 0]] = True
    return keep


def _requires_grad(ints, aux, source_rg):
    """Which slots depend on a leaf that requires grad (``source_rg``: slot -> bool
    for leaves and constants), as eager recording would say."""
    n = ints.shape[0]
    rg = [False] * n
    ops, ia, ib, ic, iaux = (ints[:, f].tolist() for f in (_tp.OP, _tp.A, _tp.B, _tp.C, _tp.AUX))
    variadic = _sh.VARIADIC
    aux = aux.tolist() if len(aux) else []
    for s in range(n):
        if ops[s] < META_END:
            rg[s] = source_rg.get(s, ops[s] == EXT)
            continue
        a, b, c = ia[s], ib[s], ic[s]
        r = (a >= 0 and rg[a]) or (b >= 0 and rg[b])
        if not r:
            if c == variadic:
                at = iaux[s]
                r = any(rg[i] for i in aux[at + 1:at + 1 + aux[at]] if i >= 0)
            else:
                r = c >= 0 and rg[c]
        rg[s] = r
    return np.array(rg, bool)
