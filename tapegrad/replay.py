"""Record a function once, replay its tape with new inputs.

``tg.compile(fn)`` and ``tg.record(fn, *args)`` run ``fn`` eagerly once under a
recording session (``_Session``) that keeps everything a replay needs:

* the tape itself (all of it on one tape: no rotation while recording), with the
  output shape of every non-elementwise entry;
* where each leaf and constant came from (``sources``): an argument, read anew at
  each replay; a tensor the function captured (closure, module parameter), read
  live, so parameters updated by an optimizer are used and receive ``.grad``;
  or a comparison of recorded values (``x > 0``), recomputed;
* a guard for every place Python read a recorded value (``bool``, ``float``,
  ``item``, ``tolist``, ``numpy``, a tensor used as an index, an integer argument
  read by library code): the value seen then, checked at replay.

Anything the session cannot follow (a value computed outside the tape from a
recorded one: ``detach``, ``argmax``, random numbers, a captured non-leaf) makes
the recording *not replayable*: ``tg.compile`` then always runs the function
eagerly for that signature and ``tg.record`` raises, so a replay is never wrong.

A replay (``Recording.forward``) recomputes every entry from its inputs with the
family's ``replay_prepare`` (the same NumPy call the recorder made), checks the
guards, and builds a sealed tape over the new values: the ordinary compiled
reverse sweep then differentiates it, accumulating into the live leaves.
"""
import functools
import linecache
import math
import os
import sys
import threading
import weakref

import numpy as np

from . import _background
from . import _jit
from . import tape as _tp
from .kernels import forward as _kf
from .kernels import sweep as _ks
from .ops import elementwise as _ew
from .ops import shape as _sh
from .ops.registry import CONST, EXT, FAMILY_RULES, GRAD_FN_NAMES, LEAF, META_END, SHAPE, family, index
from .tensor import Tensor

FORMAT_VERSION = 1
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class TapeDivergence(RuntimeError):
    """A replayed tape met a guard whose value differs from the recording's: the
    Python code would have taken another path."""


class NotReplayable(RuntimeError):
    """The function does something a tape cannot replay (see the message)."""


class _Rerecord(Exception):
    """A captured tensor changed shape, dtype or requires_grad: record again."""


def _user_line():
    """``file:line`` of the first frame outside tapegrad (where the user read a value)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
        f = f.f_back
    if f is None:
        return "<unknown>"
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return '"%s", line %d, in %s%s' % (f.f_code.co_filename, f.f_lineno, f.f_code.co_name,
                                      (": " + line) if line else "")


# -- the recording session ------------------------------------------------------------
class _WatchedArg(Tensor):
    """An integer or boolean argument while recording: library code that reads its
    values (labels turned into gather indices, masks) adds a guard on the whole
    argument, so a replay with other values records again instead of reusing them."""
    __slots__ = ("_real", "_rec", "_idx")

    @property
    def _data(self):
        self._rec.arg_read(self._idx)
        return self._real

    @_data.setter
    def _data(self, value):
        self._rec.refuse("it changes an integer argument in place")
        self._real = value

    # its shape and dtype are part of the signature: reading them is no guard
    shape = property(lambda self: self._real.shape)
    ndim = property(lambda self: self._real.ndim)
    dtype = property(lambda self: self._real.dtype)

    def numel(self):
        return self._real.size

    def dim(self):
        return self._real.ndim

    def __len__(self):
        if not self._real.ndim:
            raise TypeError("len() of a 0-d tensor")
        return len(self._real)


class _Session(_tp.RecordingObserver):
    """What the recording of one call collects (see the module docstring): the
    library reports to it through the ``RecordingObserver`` methods."""

    def __init__(self):
        self.tape = _tp.Tape()
        self.tape.shapes = {}
        self.reason = None
        self.args = []          # (kind, user object, tensor used while recording), array arguments only
        self.arg_at = {}        # argument index -> its entry of ``args`` (other arguments have none)
        self.arg_ids = {}       # id(tensor used while recording) -> argument index
        self.sources = {}       # slot -> ("arg", i) | ("captured", tensor) | ("derived", spec)
        self.guards = []        # (ref, value, where)
        self.arg_guards = {}    # argument index -> (value, where)
        self.tainted = {}       # id -> tensor computed from recorded values off the tape
        self.derived = {}       # id -> (tensor, spec): a comparison of recorded values
        self.keep = []          # objects whose ids the dicts above use
        self.live_arrays = {}   # id(integer argument's array handed to indexing) -> argument index
        self.live = {}          # gather slot -> function of the argument arrays giving its indices
        self.fn_guards = []     # (function, argument index, value, where): a property of an argument

    def refuse(self, why):
        if self.reason is None:
            self.reason = why

    # events from the library
    def adopted(self, s, t):
        i = self.arg_ids.get(id(t))
        if i is not None:
            self.sources[s] = ("arg", i)
            return
        d = self.derived.get(id(t))
        if d is not None:
            self.sources[s] = ("derived", d[1])
            return
        if id(t) in self.tainted:
            self.refuse("a value computed off the tape from recorded values (detach, argmax, a cast of a "
                        "comparison, ...) feeds the computation")
        self.sources[s] = ("captured", t)

    def arg_read(self, i):
        if i not in self.arg_guards:
            self.arg_guards[i] = (np.array(self.args[i][2]._real, copy=True), _user_line())

    def made(self, t):
        """A tensor made off the tape (``Tensor._wrap``) while recording."""
        self.tainted[id(t)] = t

    def ref(self, t):
        """How a replay finds tensor ``t``'s value: ("slot", s) or ("derived", spec)."""
        d = self.derived.get(id(t))
        if d is not None:
            return ("derived", d[1])
        if id(t) in self.tainted:
            self.refuse("Python reads a value computed off the tape from recorded values (detach, argmax, "
                        "a cast of a comparison, ...)")
            return None
        if isinstance(t, _WatchedArg):
            return ("arg", t._idx)
        T = self.tape
        return ("slot", t._slot if (t._tid == T.id and t._sver == t._ver[0]) else T.adopt(t))

    def read(self, t, value):
        """Python read the value of ``t`` (``bool``, ``item``, ...): a guard."""
        if isinstance(t, _WatchedArg):
            return      # (its property already guards the whole argument)
        r = self.ref(t)
        if r is not None:
            self.guards.append((r, np.array(value, copy=True), _user_line()))

    def really_requires_grad(self, t):
        i = self.arg_ids.get(id(t))
        if i is not None:
            return self.args[i][0] in ("leaf", "nonleaf")
        T = self.tape
        if t._tape is not T:
            return bool(t._rg)
        shadows = {s for s, src in self.sources.items()
                   if src[0] == "arg" and self.arg_at[src[1]][0] not in ("leaf", "nonleaf")}
        return _reaches_leaf(T, t._slot, shadows)

    def compared(self, ufunc, a, b, out):
        """``out = ufunc(a, b)`` computed off the tape (a comparison): recomputed at replay."""
        ops = []
        for v in ((a,) if b is None else (a, b)):
            if isinstance(v, Tensor):
                r = self.ref(v)
                if r is None:
                    return
                ops.append(r)
            else:
                ops.append(("value", np.array(v, copy=True)))
        self.derived[id(out)] = (out, (ufunc.__name__, ops))
        self.keep.append(out)

    def index(self, k):
        """A tensor used as an index: an integer argument stays live (its indices
        are recomputed at each replay); any other tensor's values are a guard."""
        if isinstance(k, _WatchedArg) and k._real.ndim >= 1 and k._real.dtype.kind in "iu":
            arr = k._real
            self.live_arrays[id(arr)] = k._idx
            return arr
        d = k._data
        self.read(k, d)
        return d

    def gathered(self, result, shape, idx):
        """``result = x[idx]`` was recorded: when integer arguments are among the
        indices, its gather indices become a function of them."""
        pos = tuple((j, self.live_arrays[id(a)]) for j, a in enumerate(idx)
                    if isinstance(a, np.ndarray) and id(a) in self.live_arrays)
        if pos:
            if result._tape is self.tape and result._sver == result._ver[0]:
                template = tuple(None if any(j == p for p, _ in pos) else a for j, a in enumerate(idx))
                self.live[result._slot] = functools.partial(_live_lin, tuple(shape), template, pos)
            else:
                for _, i in pos:
                    self.arg_read(i)

    def picked(self, x, values, ax, keepdim, largest):
        """``max``/``min`` along ``ax`` was recorded: the elements it picks are recomputed
        from x's values at each replay (its indices output is not replayed)."""
        T = self.tape
        if values._tape is T and values._sver == values._ver[0] and x._tid == T.id and x._sver == x._ver[0]:
            self.live[values._slot] = functools.partial(_extremum_lin, x._slot, ax, keepdim, largest)
        elif values._rg:
            self.refuse("max/min along a dim of a tensor not recorded on this tape")

    def labels(self, target, flags):
        """nll_loss/cross_entropy: a guard on ``flags`` of the labels (whether any is
        ignored or out of range; the gather itself reads them live); returns those
        flags.  Labels that are not an argument: None (their values are a guard)."""
        if not isinstance(target, _WatchedArg):
            return None
        value = flags(target._real)
        self.fn_guards.append((flags, target._idx, value, _user_line()))
        return value


_plain_wrap = Tensor._const     # a tensor of the replay's values (no session is told of it)
_LIN_BASES = {}


def _lin_base(shape):
    """The flat index of every element of an array of ``shape`` (read-only, shared)."""
    b = _LIN_BASES.get(shape)
    if b is None:
        if len(_LIN_BASES) > 64:
            _LIN_BASES.clear()
        b = _LIN_BASES[shape] = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
        b.flags.writeable = False
    return b


def _pair_gather(fn, arrays):
    """``(a, b, n0, n1)`` when the live gather ``fn`` is ``x[a, b]`` of an (n0, n1)
    array by two int64 vectors of equal length, each an argument (its index) or a
    constant of the recording (the array); else None.  The signature fixes the
    arguments' shapes and dtypes for every replay."""
    shape, template, pos = fn.args
    if len(shape) != 2 or len(template) != 2:
        return None
    refs = list(template)
    if any(not isinstance(r, np.ndarray) for j, r in enumerate(refs) if j not in {p for p, _ in pos}):
        return None         # (a constant int or slice: the general path; an int here means an argument)
    for j, i in pos:
        refs[j] = i
    got = [arrays[r] if isinstance(r, int) else r for r in refs]
    if not all(isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype == np.int64 for v in got) \
            or got[0].size != got[1].size:
        return None
    return (refs[0], refs[1], shape[0], shape[1])


def _live_lin(shape, template, pos, vals, arrays):
    idx = list(template)
    for j, i in pos:
        idx[j] = arrays[i]
    return _lin_base(shape)[tuple(idx)].reshape(-1)


def _extremum_lin(slot, ax, keepdim, largest, vals, arrays):
    from .ops.reduce import extremum_lin
    return extremum_lin(vals[slot], ax, keepdim, largest)[1].reshape(-1)


_SESSIONS_LOCK = threading.Lock()


def _begin(rec):
    st = _tp.state()
    if st.rec is not None:
        raise RuntimeError("a compiled function is being recorded already on this thread (nested tg.compile "
                           "calls record eagerly)")
    with _SESSIONS_LOCK:
        _tp.recording[0] += 1
    st.rec = rec
    st.tape = rec.tape


def _end(rec):
    st = _tp.state()
    st.rec = None
    with _SESSIONS_LOCK:
        _tp.recording[0] -= 1
    _tp.rotate()


# -- arguments --------------------------------------------------------------------
def _is_array_arg(v):
    return isinstance(v, (Tensor, np.ndarray))


def _is_grad_leaf(v):
    """A leaf that requires grad and is not a view: gradients accumulate into it."""
    return bool(v._rg) and v._tape is None and (v._x is None or v._x.base is None)


def _arg_key(v):
    if type(v) is Tensor or isinstance(v, Tensor):
        return ("T", v._data.shape, v._data.dtype.num, v._rg, _is_grad_leaf(v))
    if isinstance(v, np.ndarray):
        return ("A", v.shape, v.dtype.num)
    try:
        hash(v)
    except TypeError:
        raise NotReplayable("argument of type %s is neither an array nor hashable" % type(v).__name__) from None
    return ("V", type(v).__name__, v)


def _recording_arg(rec, i, v, grad_arrays):
    """The tensor ``fn`` sees for argument ``v`` while recording."""
    arr = v._data if isinstance(v, Tensor) else v
    if arr.dtype.kind != "f":
        w = object.__new__(_WatchedArg)
        w._real, w._rec, w._idx = arr, rec, i
        w._rg, w._tid, w._slot, w._ver, w._sver, w._tape, w._x = False, 0, -1, [0], 0, None, None
        kind = "int"
        t = w
    elif isinstance(v, Tensor) and _is_grad_leaf(v):
        kind, t = "leaf", v                          # a leaf that requires grad: gradients go to it
    else:
        t = _plain_wrap(arr)
        t._rg = True                                  # recorded like a leaf; a constant on replay
        if isinstance(v, Tensor):
            t._ver = v._ver
        kind = "array" if not isinstance(v, Tensor) else ("nonleaf" if v._rg else "data")
        if kind == "array" and grad_arrays:
            kind = "leaf"
    rec.args.append((kind, v, t, t._ver[0]))
    rec.arg_at[i] = rec.args[-1]
    rec.arg_ids[id(t)] = i
    rec.keep.append(t)
    return t


# -- structures of outputs ------------------------------------------------------------
def _flatten(obj, leaves):
    """A template of ``obj`` with its tensors replaced by their index in ``leaves``."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return ("T", len(leaves) - 1)
    if isinstance(obj, tuple) and type(obj) is not tuple and hasattr(obj, "_fields"):
        return ("N", type(obj), [_flatten(o, leaves) for o in obj])
    if isinstance(obj, (tuple, list)):
        return ("L" if isinstance(obj, list) else "U", type(obj), [_flatten(o, leaves) for o in obj])
    if isinstance(obj, dict):
        return ("D", type(obj), [(k, _flatten(v, leaves)) for k, v in obj.items()])
    return ("V", obj)


def _unflatten(tpl, leaves):
    kind = tpl[0]
    if kind == "T":
        return leaves[tpl[1]]
    if kind == "V":
        return tpl[1]
    if kind == "N":
        return tpl[1](*[_unflatten(o, leaves) for o in tpl[2]])
    if kind in ("L", "U"):
        items = [_unflatten(o, leaves) for o in tpl[2]]
        if tpl[1] in (list, tuple):
            return tpl[1](items)
        try:
            return tpl[1](items)
        except TypeError:
            return tpl[1](*items)
    return tpl[1]((k, _unflatten(v, leaves)) for k, v in tpl[2])


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


# The compiled forward serves tapes of small and middling arrays, whose NumPy calls
# cost more in overhead than in arithmetic; it copies views (NumPy does not) and
# its arena of every value at once would not be recycled by malloc beyond these.
ARENA_SLOT = 1 << 16        # elements of the largest value
ARENA_TOTAL = 1 << 19       # elements of all values


# -- a recording ----------------------------------------------------------------------
class Recording:
    """One recorded tape and what replaying it needs.  ``forward(args)`` replays."""

    def __init__(self, rec, out_template, out_refs, nargs):
        T = rec.tape
        n = T.n
        self.n = n
        self.buf = bytes(T.buf[:n * _tp.ESIZE])
        ints, flts = T.arrays()
        self.ints = ints.copy()
        self.f0 = flts[:, _tp.F0].copy()
        self.f1 = flts[:, _tp.F1].copy()
        self.aux = np.concatenate(T.aux) if T.aux else np.zeros(0, np.int64)
        self.shapes = dict(T.shapes)
        self.saved = np.array([v is not None for v in T.vals], bool)
        self.saved_slots = np.flatnonzero(self.saved).tolist()
        self.nargs = nargs
        # by argument position; an argument that is not an array (a number, an option of
        # tg.compile's signature key) is "value", with no shape
        self.arg_kinds = [rec.arg_at[i][0] if i in rec.arg_at else "value" for i in range(nargs)]
        self.arg_meta = [_arg_shape_dtype(rec.arg_at[i][2]) if i in rec.arg_at else None for i in range(nargs)]
        self.sources = {}
        self.constants = {}     # slot -> array (for a saved tape: captured tensors' values)
        for s, src in rec.sources.items():
            if src[0] == "captured":
                t = src[1]
                self.sources[s] = ("captured", t, t._data.shape, t._data.dtype, bool(t._rg))
            else:
                self.sources[s] = src
        self.guards = rec.guards
        self.arg_guards = rec.arg_guards
        self.fn_guards = rec.fn_guards
        self.live = {s: f for s, f in rec.live.items() if s < n}
        self.out_template = out_template
        self.out_refs = out_refs
        self.rg = _requires_grad(self.ints, self.aux, self._source_rg())
        self.real_leaf = {}     # slot -> argument index or captured tensor, for gradient leaves
        for s, src in self.sources.items():
            if src[0] == "arg" and self.arg_kinds[src[1]] in ("leaf", "nonleaf"):
                self.real_leaf[s] = src[1]
            elif src[0] == "captured" and src[4] and src[1]._tape is None:
                self.real_leaf[s] = src[1]
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
        self.rg_slots = np.flatnonzero(self.rg)
        self.out_slots = sorted({r[1] for r in out_refs if r is not None and r[0] == "slot"})
        self.source_items = sorted(self.sources.items())
        self.one_slots = np.flatnonzero(self.ints[:, _tp.SIZE] == 1)
        self.scalar = None      # set by ``compile_scalar`` after the first replay
        self.template = None    # see ``_plan``
        self.spare = []         # entry buffers of dead replayed tapes (single-number tapes)
        self.spare_vobj = None  # ... and their version-counter list
        self.none_vals = None
        self.plans = {}         # roots -> what backward marks and lays out (engine._sweep_tape)
        self.program = None     # see ``_program``
        self.arena = None       # see ``_arena_plan``: False when the compiled forward does not apply
        self.names = [GRAD_FN_NAMES[nm] if nm >= 0 else "" for nm in self.ints[:, _tp.NAME].tolist()]
        self.rows = self.ints[:, :6].tolist()
        # entries that view their input (they share its version counter, as in eager
        # execution), in tape order: a replay gives them their input's counter, so a
        # kept view of a parameter changed in place (an optimizer step) is noticed
        vobj = T.vobj
        self.view_links = [(s, a) for s, (op, a) in enumerate(self.ints[:, :2].tolist())
                           if op >= META_END and a >= 0 and vobj[s] is vobj[a]]

    def _source_rg(self):
        out = {}
        for s, src in self.sources.items():
            if src[0] == "arg":
                out[s] = self.arg_kinds[src[1]] in ("leaf", "nonleaf")
            elif src[0] == "captured":
                out[s] = src[4]
        return out

    # -- replay ---------------------------------------------------------------
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
        except Exception:
            got = None
        if got is None or not all(np.allclose(got[s], vals[s], rtol=1e-13, atol=0, equal_nan=True)
                                  for s in range(self.n)):
            self.scalar = False

    def _program(self):
        """Each entry's forward as a function of the slot values (None for leaves
        and constants, whose values come from ``sources``)."""
        prog = []
        aux, f0, f1 = self.aux, self.f0, self.f1
        for s, row in enumerate(self.rows):
            code = row[_tp.OP]
            rules = FAMILY_RULES.get(family(code))        # (none for meta entries: ``sources``)
            if family(code) == SHAPE and s in self.live:
                prog.append((s, None, ("live", row[_tp.A], self.shapes[s])))
                continue
            f = None if rules is None else rules.replay_rule(index(code), row, aux, self.shapes.get(s), self.names[s],
                                                             f0[s], f1[s])
            prog.append((s, f, self.sources.get(s)))
        self.program = prog

    def forward(self, arrays, _from=None):
        """Every slot's value for argument arrays ``arrays`` (may raise _Rerecord)."""
        if self.scalar:
            return self._forward_scalar(arrays, _from)
        if self.arena:
            return self._forward_arena(arrays)
        vals = self._forward_python(arrays)
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

    def _forward_python(self, arrays):
        if self.program is None:
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
                vals[s] = self.derived(src[1], vals, arrays)
            else:
                vals[s] = _source_value(src, arrays)
        return vals

    def _forward_scalar(self, arrays, known=None):
        from .kernels.sweep import replay_scalar
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
            elif src[0] == "derived":
                v = self.derived(src[1], vals, arrays)
            else:
                v = _source_value(src, arrays)
            flts[s, _tp.VAL] = v.item() if v.ndim else v[()]
        replay_scalar(self.orig_ops, ints, flts, n)
        return vals

    def _arena_plan(self, arrays, vals):
        """Use the compiled forward (``kernels.forward``) when every value is float64
        and no constant derives from other values: the entries' values go into one
        arena per replay (laid out here), the sources are read where they are.
        ``vals``: the values of a Python replay, which it must reproduce.  Returns
        the compiled forward's values when it applies, else None."""
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
        self.spare_arena = None      # (arena, value addresses) of the last compiled replay
        self.shapes_all = [v.shape for v in vals]
        self.vloc_all = np.full(n, -2, np.int64)
        self.saved_set = frozenset(self.saved_slots)
        self.arena = True
        try:
            got = self._forward_arena(arrays)
            ok = all(_close(got[s], vals[s]) for s in range(n))
            if ok and vals.lins:        # and the gathers' indices, which the reverse sweep reads
                ok = np.array_equal(self.aux if got.aux is None else got.aux, self.aux_with(vals.lins))
        except Exception:
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

    def _forward_arena(self, arrays):
        n = self.n
        # the last replay's arena again when nothing holds it any more (its tape was
        # freed by backward or died, and no view of it got out): warm memory, no malloc
        # ... and every value's address with it (the arena's part stays with the arena;
        # the sources' are written below).  The two travel as one pair, taken out
        # while checked, so that a thread never gets addresses of another's arena.
        got, self.spare_arena = self.spare_arena, None
        arena = vaddr = None
        if got is not None:
            arena, vaddr = got
            del got
        if arena is None or _tp.refs(arena) > _tp.ALONE:
            arena = np.empty(self.arena_total)
            vaddr = None
        if vaddr is None or _tp.refs(vaddr) > _tp.ALONE:
            vaddr = self.arena_bytes + _ks.address(arena)
        self.spare_arena = (arena, vaddr)
        src = {}
        for s, sc in self.source_items:     # (no "derived" ones: see _arena_plan)
            v = _source_value(sc, arrays)
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
        self.vobj_own = sorted({s for s, _, _, _ in links} | set(self.out_slots) | {s for s, _ in self.view_links})

    def tape_for(self, vals, arrays, args):
        """A sealed tape over the replayed values, whose leaves are the live tensors."""
        if self.template is None:
            self._plan()
        n = self.n
        scalar = isinstance(vals, _ScalarVals)
        if scalar:
            buf = vals.buf
            T = _tp.Tape.replayed(buf, n)
            T.views = (vals.ints, vals.flts)
            if len(self.spare) < 2:
                weakref.finalize(T, self.spare.append, (buf, vals.ints, vals.flts))
            # one-element values live in the entries (VAL): no values, and one list of
            # Nones shared by the replays (a sealed tape's values are only ever cleared)
            if self.none_vals is None:
                self.none_vals = [None] * n
            T.vals = self.none_vals
            T.scalar = True
        elif type(vals) is _ArenaVals:     # (the entries made by the compiled forward, their VAL filled)
            T = _tp.Tape.replayed(vals.buf, n)
            T.views = vals.entries
            # the saved values as views of the arena, made when read (the compiled sweep
            # reads them by address; differentiating twice, grad_fn and memory_stats
            # read them as arrays)
            T.vals = _SavedVals(vals, self.saved_set, n)
            T.vaddr = (self.vloc_all, vals.vaddr)      # the sweep reads every value where it is
            T.arena = vals                              # ... which keeps it alive
        else:
            buf = bytearray(self.template)
            ints = np.frombuffer(buf, np.int64).reshape(n, _tp.NFIELDS)
            flts = np.frombuffer(buf, np.float64).reshape(n, _tp.NFIELDS)
            ones = self.one_slots
            if ones.size:
                flts[ones, _tp.VAL] = np.array([vals[s].reshape(-1)[0] for s in ones.tolist()], np.float64)
            T = _tp.Tape.replayed(buf, n)
            T.views = (ints, flts)
            tv = T.vals = [None] * n
            for s in self.saved_slots:
                tv[s] = vals[s]
        # the version counters: one shared by the entries no tensor shows (never
        # bumped), the leaves' own, the outputs' own.  A single-number tape takes the
        # last replay's list again when that tape is gone (no large allocation).
        vobj, self.spare_vobj = self.spare_vobj, None
        if scalar and vobj is not None and _tp.refs(vobj) <= _tp.ALONE:
            shared = self.spare_shared
            for s in self.vobj_own:
                vobj[s] = shared
        else:
            shared = [0]
            vobj = [shared] * n
        if scalar:
            self.spare_vobj, self.spare_shared = vobj, shared
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
            elif kind == "leaf":
                leaves[s] = t
            if kind == "leaf" and i >= 0:
                leaves[s] = t
            vobj[s] = t._ver
            if t._ver[0] or scalar:     # (a reused buffer holds the last replay's versions)
                vnum.append((s, t._ver[0]))
        for s, a in self.view_links:
            v = vobj[s] = vobj[a]
            if v[0] or scalar:
                vnum.append((s, v[0]))
        if vnum:
            ints = T.arrays()[0]
            for s, v in vnum:
                ints[s, _tp.VERSION] = v
        for s in self.out_slots:       # an output changed in place moves its own version only
            if vobj[s] is shared:
                vobj[s] = [0]
        T.vobj = vobj
        aux = self.aux
        lins = getattr(vals, "lins", None)
        if type(vals) is _ArenaVals and vals.aux is not None:
            aux = vals.aux          # (the live gathers' indices are in it already)
        elif lins:
            aux = self.aux_with(lins)
        T.aux = [aux]
        T.aux_len = aux.size
        if not scalar:      # (live gathers change indices, never which entries backward runs)
            T.plan = self.plans
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
                    leaves.append(Tensor._recorded(v, T, s, T.vobj[s]))
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
        R.arg_kinds = [k if (i in argnums or k not in ("leaf", "nonleaf")) else "data"
                       for i, k in enumerate(self.arg_kinds)]
        R.real_leaf = {s: i for s, i in self.real_leaf.items() if not isinstance(i, int) or i in argnums}
        R.rg = _requires_grad(self.ints, self.aux, R._source_rg())
        R.untracked = np.flatnonzero(~R.rg & (self.ints[:, _tp.OP] >= META_END))
        R.rg_slots = np.flatnonzero(R.rg)
        # (what replays lay out from the kinds and flags: made again for this one)
        R.template = None
        R.spare, R.spare_vobj, R.none_vals, R.plans = [], None, None, {}
        R.arena = False if self.arena is False else None      # (False: not for this forward, or a loaded file)
        for k in ("spare_shared", "sizes_c", "ints_c", "known", "arena_off", "arena_bytes", "arena_total",
                  "vloc_all", "pre_gathers", "saved_set", "spare_arena", "links", "orig_ops", "vobj_own"):
            R.__dict__.pop(k, None)
        return R

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
        st["template"] = None
        st["spare"] = []
        st["spare_vobj"] = None
        st.pop("spare_shared", None)
        st["plans"] = {}
        st["program"] = None
        st["source_items"] = sorted(src.items())
        st["arena"] = None      # (laid out again by the process that replays it)
        for k in ("sizes_c", "ints_c", "known", "arena_off", "arena_bytes", "arena_total", "vloc_all",
                  "pre_gathers", "saved_set", "spare_arena"):
            st.pop(k, None)
        st.pop("links", None)
        st.pop("env", None)
        st["real_leaf"] = {s: v for s, v in self.real_leaf.items() if not isinstance(v, Tensor)}
        st["out_refs"] = [r if r[0] != "object" else ("value_tensor", np.array(r[1]._data)) for r in self.out_refs]
        return st

    def __setstate__(self, st):
        self.__dict__.update(st)
        self.__dict__.setdefault("view_links", [])
        self.template = None
        self.program = None
        self.arena = None
        self.none_vals = None
        self.saved_slots = np.flatnonzero(self.saved).tolist()
        self.out_refs = [r if r[0] != "value_tensor" else ("object", _plain_wrap(r[1])) for r in self.out_refs]


# -- recording a call ---------------------------------------------------------------
def _record_call(fn, args, kwargs, grad_arrays=False):
    """Run ``fn`` once under a session.  Returns (outputs as eager would give them,
    Recording or None, the reason it cannot be replayed or None)."""
    rec = _Session()
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
        elif t._tape is T and t._sver == t._ver[0]:
            refs.append(("slot", t._slot))
        elif t._tape is None and id(t) not in rec.tainted and not t._rg:
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
    R = None
    if rec.reason is None:
        R = Recording(rec, tpl, refs, len(args))
    # what the eager call returns: the recorded tensors, with the arguments' stand-ins
    # turned back into constants (so requires_grad is what eager execution gives)
    user_args = list(args)          # (by position, as a replay's arguments)
    arrays = [_real(a) for a in user_args]
    if R is not None:
        try:
            vals = R.forward(arrays)
            bad = R.check_guards(vals, arrays)
            same = bad is None and all(
                r is None or r[0] != "slot" or _same(vals[r[1]], leaves[j]._data) for j, r in enumerate(refs))
            same = same and all(v is None or _same(v, vals[s]) for s, v in enumerate(T.vals))
        except _Rerecord:
            same = False
        except Exception as e:      # a replay must reproduce the call exactly, or not be used
            rec.refuse("its replay fails (%s: %s)" % (type(e).__name__, e))
            R, same = None, True
        if R is not None and not same:
            rec.refuse("its replay does not reproduce the recorded values")
            R = None
        if R is not None:
            if _jit.READY[0] or not _background.deferring():
                R.compile_scalar(vals)      # (else at the first replay once the kernels are ready)
            T2 = R.tape_for(vals, arrays, user_args)
            return R.outputs(vals, arrays, user_args, T2), R, None
    # not replayable: hand back the recorded call itself
    for s, t in list(T.leaves.items()):
        i = rec.arg_ids.get(id(t))
        if i is not None and rec.arg_at[i][0] != "leaf":
            del T.leaves[s]
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
        elif t._rg and t._tape is T and not rg[t._slot]:
            fixed.append(_plain_wrap(t._data))
        else:
            fixed.append(t)
    return _unflatten(tpl, fixed), None, rec.reason


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
        if d.shape != src[2] or d.dtype != src[3] or bool(t._rg) != src[4]:
            raise _Rerecord()
        return d
    return src[1]


class _Vals(list):
    """Slot values of a replay, and the indices of its live gathers (``lins``)."""
    __slots__ = ("lins",)

    def __init__(self, items):
        super().__init__(items)
        self.lins = None


class _ArenaVals:
    """The values of a compiled replay (``Recording._forward_arena``): the sources'
    arrays, and the entries' values in one arena (views made on demand)."""
    __slots__ = ("arena", "src", "off", "shapes", "vaddr", "lins", "views", "aux", "buf", "entries")

    def __init__(self, arena, src, off, shapes, vaddr):
        self.arena, self.src, self.off, self.shapes, self.vaddr = arena, src, off, shapes, vaddr
        self.lins = self.aux = None
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
    rg = np.zeros(n, bool)
    for s in range(n):
        row = ints[s]
        code = int(row[_tp.OP])
        if code < META_END:
            rg[s] = source_rg.get(s, code == EXT)
            continue
        ins = [int(row[_tp.A]), int(row[_tp.B])]
        if row[_tp.C] == _sh.VARIADIC:
            at = int(row[_tp.AUX])
            ins += [int(aux[at + 1 + j]) for j in range(int(aux[at]))]
        else:
            ins.append(int(row[_tp.C]))
        rg[s] = any(rg[i] for i in ins if i >= 0)
    return rg


def _real(a):
    return a._data if isinstance(a, Tensor) else a


def _arg_shape_dtype(t):
    a = np.asarray(t._real if isinstance(t, _WatchedArg) else t._data)
    return a.shape, a.dtype


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


def _reaches_leaf(T, s, exclude=()):
    ints, _ = T.arrays()
    seen, todo = set(), [s]
    aux = np.concatenate(T.aux) if T.aux else None
    while todo:
        e = todo.pop()
        if e < 0 or e in seen:
            continue
        seen.add(e)
        code = int(ints[e, _tp.OP])
        if code == LEAF and e in T.leaves and e not in exclude:
            return True
        if code == EXT:
            return True
        if code in (LEAF, CONST):
            continue
        todo += [int(ints[e, _tp.A]), int(ints[e, _tp.B])]
        if ints[e, _tp.C] == _sh.VARIADIC:
            at = int(ints[e, _tp.AUX])
            todo += [int(aux[at + 1 + j]) for j in range(int(aux[at]))]
        else:
            todo.append(int(ints[e, _tp.C]))
    return False


# -- tg.compile ----------------------------------------------------------------------
class CompileStats:
    __slots__ = ("calls", "recordings", "replays", "divergences", "eager")

    def __init__(self):
        self.calls = self.recordings = self.replays = self.divergences = self.eager = 0

    def __repr__(self):
        return ("CompileStats(calls=%d, recordings=%d, replays=%d, divergences=%d, eager=%d)"
                % (self.calls, self.recordings, self.replays, self.divergences, self.eager))


MAX_TAPES = 8           # recordings kept per signature (one per path through the guards)
MAX_DIVERGENCES = 64    # a signature that diverged this often without a replay runs eagerly


class Compiled:
    """``tg.compile(fn)``: calls ``fn``, replaying its recorded tape when the
    arguments' signature and every guard match a recording."""

    def __init__(self, fn, strict=False, log=False):
        self.fn = fn
        self.strict = strict
        self.log = log
        self.stats = CompileStats()
        self.cache = {}         # signature -> [Recording] (most recent first) or a reason string
        self.why = {}           # signature -> why it runs eagerly
        try:
            self.__name__ = fn.__name__
            self.__doc__ = fn.__doc__
        except AttributeError:
            pass

    def __repr__(self):
        return "<tapegrad.compile of %r, %r>" % (self.fn, self.stats)

    def __call__(self, *args, **kwargs):
        st = self.stats
        st.calls += 1
        ts = _tp.state()
        if ts.rec is not None:
            st.eager += 1
            return self.fn(*args, **kwargs)
        keys, arrays = [], []
        try:
            for a in args:
                if type(a) is Tensor:
                    d = a._data
                    keys.append(("T", d.shape, d.dtype.num, a._rg, _is_grad_leaf(a)))
                    arrays.append(d)
                else:
                    keys.append(_arg_key(a))
                    arrays.append(_real(a))
            key = (tuple(keys), tuple(sorted((k, _arg_key(v)) for k, v in kwargs.items())) if kwargs else (),
                   ts.grad)
        except NotReplayable as e:
            self.why[None] = str(e)
            st.eager += 1
            return self.fn(*args, **kwargs)
        if kwargs and any(_is_array_arg(v) for v in kwargs.values()):
            self.why[key] = "arrays passed by keyword are not supported"
            st.eager += 1
            return self.fn(*args, **kwargs)
        entry = self.cache.get(key)
        if isinstance(entry, str):
            st.eager += 1
            return self.fn(*args, **kwargs)
        diverged = None
        if entry:
            env = _env(self.fn)
            for R in list(entry):
                if R.env != env:
                    entry.remove(R)
                    continue
                bad = R.check_args(arrays)
                if bad is None:
                    try:
                        vals = R.forward(arrays)
                    except _Rerecord:
                        entry.remove(R)
                        break
                    except Exception:       # (a path the recording did not take may fail: record anew)
                        bad = ("the replay", None, None)
                    else:
                        bad = R.check_guards(vals, arrays)
                if bad is None:
                    if R is not entry[0]:
                        entry.remove(R)
                        entry.insert(0, R)
                    st.replays += 1
                    T = R.tape_for(vals, arrays, args)
                    return R.outputs(vals, arrays, args, T)
                diverged = bad
            if diverged is not None:
                st.divergences += 1
                if self.strict:
                    where, old, new = diverged
                    raise TapeDivergence("the tape recorded at the first call diverges at %s: recorded %r, "
                                         "now %r" % (where, _show(old), _show(new)))
                if st.divergences > MAX_DIVERGENCES and st.replays == 0:
                    self.cache[key] = "guards diverge at every call"
                    st.eager += 1
                    return self.fn(*args, **kwargs)
        out, R, why = _record_call(self.fn, args, kwargs)
        st.recordings += 1
        if self.log:
            print("tapegrad.compile: recording %s for %s%s" % (getattr(self.fn, "__name__", self.fn), _sig(key),
                                                                "" if R else " (not replayable: %s)" % why),
                  file=sys.stderr)
        if R is None:
            self.why[key] = why
            if not self.cache.get(key):     # (a path through other guards may still replay)
                self.cache[key] = why
        else:
            R.env = _env(self.fn)
            lst = self.cache.setdefault(key, [])
            lst.insert(0, R)
            del lst[MAX_TAPES:]
        return out


def _env(fn):
    """The tensors ``fn`` names directly (closure cells, globals), by identity: a
    name bound to another tensor since the recording means recording again.
    (Tensors reached through containers or attributes are read live, by object.)"""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    out = []
    for c in fn.__closure__ or ():
        try:
            v = c.cell_contents
        except ValueError:
            continue
        if isinstance(v, Tensor):
            out.append(id(v))
    g = fn.__globals__
    for name in code.co_names:
        v = g.get(name)
        if isinstance(v, Tensor):
            out.append(id(v))
    return tuple(out)


def _show(v):
    if v is None:
        return None
    v = np.asarray(v)
    return v.item() if v.size == 1 else v.tolist() if v.size <= 8 else "array of shape %s" % (v.shape,)


def _sig(key):
    parts = []
    for k in key[0]:
        parts.append("%s%s" % ("tensor" if k[0] == "T" else "array", list(k[1])) if k[0] in "TA" else repr(k[2]))
    return "(" + ", ".join(parts) + ")"


def compile(fn=None, *, strict=False, log=False):
    """Record ``fn`` at its first call with each signature and replay that tape
    afterwards (see ``tapegrad.replay``).  ``strict=True``: raise
    ``TapeDivergence`` when Python would take another path, instead of recording
    again.  ``log=True``: print a line to stderr at each recording."""
    if fn is None:
        return lambda f: compile(f, strict=strict, log=log)
    from .nn.modules import Module, OptimizedModule
    if isinstance(fn, Module):
        return OptimizedModule(fn, Compiled(fn, strict, log))
    return Compiled(fn, strict, log)


# -- tg.record: a tape for numeric scripts ---------------------------------------------
class Tape:
    """One recording of a function of arrays (``tg.record``).  ``tape(*args)``
    replays the forward pass; ``value_and_grad``/``gradient``/``vjp``
    differentiate with respect to the floating-point array arguments."""

    def __init__(self, recording):
        self._R = recording

    @property
    def num_entries(self):
        return self._R.n

    def __repr__(self):
        return "<tapegrad.Tape of %d entries, %d guards>" % (self._R.n, len(self._R.guards))

    def _replay(self, args, R=None):
        R = self._R if R is None else R
        if len(args) != R.nargs:
            raise TypeError("this tape takes %d arguments (%d given)" % (R.nargs, len(args)))
        arrays = []
        for i, a in enumerate(args):
            arr = np.asarray(a._data if isinstance(a, Tensor) else a)
            shape, dtype = R.arg_meta[i]
            if arr.shape != shape:
                raise ValueError("argument %d has shape %s; the tape was recorded with %s" % (i, arr.shape, shape))
            if arr.dtype != dtype:
                arr = arr.astype(dtype)
            arrays.append(arr)
        bad = R.check_args(arrays)
        if bad is None:
            try:
                vals = R.forward(arrays)
            except _Rerecord:
                raise TapeDivergence("a tensor the function captured changed shape, dtype or requires_grad "
                                     "since the recording") from None
            bad = R.check_guards(vals, arrays)
        if bad is not None:
            where, old, new = bad
            raise TapeDivergence("the recorded tape diverges at %s: recorded %r, now %r"
                                 % (where, _show(old), _show(new)))
        return arrays, vals

    def __call__(self, *args):
        arrays, vals = self._replay(args)
        return _unflatten(self._R.out_template, [self._R.value_of(r, vals, arrays) if r[0] != "object"
                                                 else r[1]._data for r in self._R.out_refs])

    def _grad_args(self, argnums):
        """(recording, selected argument indices, whether one gradient is returned
        bare) for ``argnums`` (None: every floating-point argument)."""
        R = self._R
        if argnums is None:
            return R, [i for i, (_, dt) in enumerate(R.arg_meta) if dt.kind == "f"], None
        single = type(argnums) is int or isinstance(argnums, np.integer)
        nums = (argnums,) if single else argnums
        if not single and (not isinstance(nums, tuple) or not all(type(a) is int or isinstance(a, np.integer)
                                                                  for a in nums)):
            raise RuntimeError("argnums must be int or Tuple[int, ...], got: %s" % type(argnums))
        if not nums:
            raise RuntimeError("argnums must be non-empty")
        picked = []
        for a in nums:
            a = int(a)
            if not -R.nargs <= a < R.nargs:
                raise RuntimeError("Got argnum=%d, but only %d positional inputs" % (a, R.nargs))
            picked.append(a % R.nargs)
        if len(set(picked)) != len(picked):
            raise RuntimeError("argnums elements must be unique, got %r" % (argnums,))
        for a in picked:
            if R.arg_meta[a][1].kind != "f":
                raise RuntimeError("only Tensors of floating point dtype can require gradients (argument %d has "
                                   "dtype %s)" % (a, R.arg_meta[a][1]))
        key = tuple(sorted(picked))
        if key == tuple(i for i, k in enumerate(R.arg_kinds) if k in ("leaf", "nonleaf")):
            return R, picked, single
        variants = self.__dict__.setdefault("_variants", {})
        V = variants.get(key)
        if V is None:
            V = variants[key] = R.with_grad_args(key)
        return V, picked, single

    def _differentiate(self, args, cotangent, argnums=None):
        from .autograd.engine import run_backward
        R, picked, single = self._grad_args(argnums)
        arrays, vals = self._replay(args, R)
        if len(R.out_refs) != 1 or R.out_refs[0][0] != "slot":
            raise RuntimeError("value_and_grad/gradient/vjp need a function returning one tensor")
        chosen = set(picked)
        leaves = [Tensor._wrap(a) if i in chosen else a for i, a in enumerate(arrays)]
        for t in leaves:
            if isinstance(t, Tensor):
                t._rg = True
        T = R.tape_for(vals, arrays, leaves)
        s = R.out_refs[0][1]
        y = vals[s]
        if cotangent is None:
            if y.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs; use vjp")
            seed = np.ones(1)
        else:
            seed = np.asarray(cotangent, np.float64).reshape(-1)
            if seed.size != y.size:
                raise ValueError("cotangent has %d elements, the output %d" % (seed.size, y.size))
        if R.rg[s]:
            out = Tensor._recorded(y, T, s, T.vobj[s])
            if getattr(self._R, "checked", False):
                # a tape from a file: the NumPy reverse, whose indexing is bounds-checked
                # (the compiled sweep trusts the tape's indices)
                from .autograd.engine import _interpret
                _interpret([(out, seed)], False, None, True)
            else:
                run_backward([(out, seed)], False)      # into the fresh leaves' .grad (the replay plan's path)
        grads = []
        for i in picked:
            g = leaves[i].grad if R.rg[s] else None
            grads.append(np.zeros(arrays[i].shape, arrays[i].dtype) if g is None else g._data)
        if argnums is None:
            grads = [grads[picked.index(i)] if i in chosen else None for i in range(len(arrays))]
            return y, (grads[0] if len(grads) == 1 else tuple(grads))
        return y, (grads[0] if single else tuple(grads))

    def value_and_grad(self, *args, argnums=None):
        """(value as a float, gradient) for one argument, (value, tuple of gradients) for several.
        ``argnums`` (an int or a tuple, as in ``torch.func``): differentiate with respect
        to those arguments only (one gradient for an int, a tuple for a tuple); the
        others are data, which the reverse sweep does not reach."""
        y, grads = self._differentiate(args, None, argnums)
        return float(y.reshape(-1)[0]), grads

    def gradient(self, *args, argnums=None):
        return self.value_and_grad(*args, argnums=argnums)[1]

    def vjp(self, args, cotangent, argnums=None):
        """(output, vector-Jacobian products) of the output with ``cotangent``."""
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        return self._differentiate(args, cotangent, argnums)

    # -- saving ---------------------------------------------------------------
    def save(self, path):
        """Write the tape to ``path`` in tapegrad's data-only tape file format (an
        ``.npz`` of numeric arrays and a JSON header, see ``tapegrad._tapefile``):
        ``tg.load_tape`` reads it back without executing anything from the file."""
        from . import _tapefile
        from ._version import __version__
        _tapefile.save(self._R, path, __version__)

    # (in-memory pickling, for trusted processes such as Dask's workers; files use ``save``)
    def __getstate__(self):
        return {"format": FORMAT_VERSION, "recording": self._R}

    def __setstate__(self, st):
        v = st.get("format") if isinstance(st, dict) else None
        if v != FORMAT_VERSION:
            raise ValueError("this tape was pickled in format %r; this tapegrad reads format %d" % (v, FORMAT_VERSION))
        self._R = st["recording"]


def load_tape(path, trusted=False):
    """A tape saved by ``Tape.save``.  The file is parsed as data (JSON and NumPy
    arrays without pickle) and checked entry by entry: a crafted, truncated or
    foreign file raises ``ValueError`` and nothing from it runs.  The tape then
    replays with NumPy's bounds-checked forward and reverse passes; ``trusted=True``
    (a file you wrote yourself) lets it use the compiled kernels, which are faster
    and do not check the tape's indices."""
    from . import _tapefile
    R = _tapefile.load(path)
    if not trusted:
        R.checked = True
        R.arena = False
        R.scalar = False
    return Tape(R)


def _record_arg(i, a):
    """An argument of ``tg.record`` as an array: a tape is a function of arrays, and
    replays convert its arguments so (a number is a 0-d array, a varying input)."""
    if _is_array_arg(a):
        return a
    arr = np.asarray(a) if not isinstance(a, (str, bytes)) else None
    if arr is None or arr.dtype.kind not in "biuf":
        raise TypeError("tg.record takes arrays, tensors or numbers as arguments (argument %d is %s); pass "
                        "other values to the function through a closure" % (i, type(a).__name__))
    return arr


def record(fn, *example_args):
    """Record ``fn`` on ``example_args`` (arrays or tensors; every floating-point
    one is differentiated) and return the ``Tape``.  Raises ``NotReplayable`` when
    the function does something a tape cannot replay."""
    _, R, why = _record_call(fn, [_record_arg(i, a) for i, a in enumerate(example_args)], {}, grad_arrays=True)
    if R is None:
        raise NotReplayable("cannot record %s for replay: %s" % (getattr(fn, "__name__", fn), why))
    return Tape(R)

