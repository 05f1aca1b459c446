"""The recording session of one call (``_Session``), the stand-ins of its integer
arguments (``_WatchedArg``) and what it notes for the guards.

``tg.compile`` and ``tg.record`` run the function once while a ``_Session`` sits in
the thread's state (``state().rec``); the library reports to it through the
``RecordingObserver`` methods (``tapegrad/core/tape.py``), and it keeps where each leaf
and constant came from, a guard for every value Python read, and the live gathers
whose indices come from integer arguments.
"""
import contextlib
import functools
import gc
import linecache
import math
import os
import sys
import threading

import numpy as np

from ..core import tape as _tp
from ..ops import shape as _sh
from ..ops.order import ORDER_LIN
from ..ops.reduce import extremum_lin
from ..core.registry import CONST, EXT, LEAF
from ..core.tensor import Tensor

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class TapeDivergence(RuntimeError):
    """A replayed tape met a guard whose value differs from the recording's: the
    Python code would have taken another path."""


class NotReplayable(RuntimeError):
    """The function does something a tape cannot replay (see the message)."""


class NotReproduced(RuntimeError):
    """The first replay's check: the tape replayed on the recorded inputs does not
    reproduce the recorded call (the message says how): it is never used."""


class _Rerecord(Exception):
    """A captured tensor changed shape, dtype or requires_grad: record again."""


class _Stale(_Rerecord):
    """An input the recording call kept by reference for the first replay's check
    was changed in place since: record again, checking at once."""


@contextlib.contextmanager
def _gc_paused():
    """The cyclic garbage collector off while a recording is laid out: a tape of
    many entries allocates tens of thousands of small objects, each batch of which
    would start a collection walking the whole heap (most of the time spent)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


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
    __slots__ = ("_real", "_rec", "_idx", "_base")     # (_base: the argument; _idx: it, or a reshape of it)

    @property
    def _data(self):
        self._rec.arg_read(self._base)
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

    # a reshape of integer labels (``targets.view(-1)``) stays an argument: a replay
    # reshapes the new labels the same way (``Recording.with_views``)
    # (anything else, an error included, takes Tensor's own path: eager's answer and message)
    def view(self, *shape):
        if not self._real.flags.c_contiguous or (len(shape) == 1 and not isinstance(shape[0], (int, tuple, list))):
            return Tensor.view(self, *shape)
        v = self._reshaped(shape)
        return Tensor.view(self, *shape) if v is None else v

    def reshape(self, *shape):
        v = self._reshaped(shape)
        return Tensor.reshape(self, *shape) if v is None else v

    def flatten(self, start_dim=0, end_dim=-1):
        n = max(self._real.ndim, 1)
        if not (-n <= start_dim < n and -n <= end_dim < n) or start_dim % n > end_dim % n:
            return Tensor.flatten(self, start_dim, end_dim)
        shape = self._real.shape or (1,)
        a, b = start_dim % n, end_dim % n
        return self._reshaped((shape[:a] + (math.prod(shape[a:b + 1]),) + shape[b + 1:],))

    def _reshaped(self, shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        if not all(type(d) is int for d in shape):
            return None
        try:
            arr = self._real.reshape(shape)
        except ValueError:
            return None
        return self._rec.arg_view(self, arr)



class RecordingTape(_tp.Tape):
    """The tape one call is recorded on: all of it on this one tape (``Tape.room``
    does not rotate a tape with ``shapes``), with the output shapes of its entries
    but the elementwise ones (whose recorders write their entries themselves and
    skip their single-number path on this tape)."""
    __slots__ = ("shapes", "dtypes")

    def __init__(self):
        super().__init__()
        self.shapes = {}        # slot -> output shape, of every entry made by ``new_slot``
        self.dtypes = {}        # slot -> its dtype, the same entries (a cast is a reshape entry)

    def new_slot(self, code, a, b, c, i0, i1, nm, f0, f1, arr, save, ver):
        s = _tp.Tape.new_slot(self, code, a, b, c, i0, i1, nm, f0, f1, arr, save, ver)
        self.shapes[s] = arr.shape
        self.dtypes[s] = arr.dtype.str
        return s


class _Session(_tp.RecordingObserver):
    """What the recording of one call collects (see the module docstring): the
    library reports to it through the ``RecordingObserver`` methods."""

    def __init__(self):
        self.tape = RecordingTape()
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
        self.nargs = 0          # the call's positional arguments; indices from it on are ``arg_views``
        self.arg_views = []     # (argument index, shape): a reshape of an integer argument, index nargs + k

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
            self.arg_guards[i] = (np.array(self.arg_at[i][2]._real, copy=True), _user_line())

    def arg_view(self, w, arr):
        """A reshape of integer argument ``w``: watched as the argument is."""
        v = _watched(arr, self, self.nargs + len(self.arg_views), w._base)
        self.arg_views.append((w._base, arr.shape))
        self.keep.append(v)
        return v

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
        return ("slot", t._slot if (t._tape_id == T.id and t._slot_version == t._ver[0]) else T.adopt(t))

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
            return bool(t._requires_grad)
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
            if result._tape is self.tape and result._slot_version == result._ver[0]:
                template = tuple(None if any(j == p for p, _ in pos) else a for j, a in enumerate(idx))
                self.live[result._slot] = functools.partial(_live_lin, tuple(shape), template, pos)
            else:
                for _, i in pos:
                    self.arg_read(i)

    def picked(self, x, values, ax, keepdim, largest):
        """``max``/``min`` along ``ax`` was recorded: the elements it picks are recomputed
        from x's values at each replay (its indices output is not replayed)."""
        T = self.tape
        if values._tape is T and values._slot_version == values._ver[0] and x._tape_id == T.id and x._slot_version == x._ver[0]:
            self.live[values._slot] = functools.partial(_extremum_lin, x._slot, ax, keepdim, largest)
        elif values._requires_grad:
            self.refuse("max/min along a dim of a tensor not recorded on this tape")

    def ordered(self, x, values, kind, params, indices=None):
        """sort, topk, median, quantile, cummax...: the elements the gather picks are
        recomputed from x's values at each replay, and so is the indices output."""
        T = self.tape
        if values._tape is T and values._slot_version == values._ver[0] and x._tape_id == T.id and x._slot_version == x._ver[0]:
            self.live[values._slot] = functools.partial(_order_lin, x._slot, kind, params)
        elif values._requires_grad:
            self.refuse("%s of a tensor not recorded on this tape" % kind)
        if indices is not None:
            r = self.ref(x)
            if r is not None:
                self.derived[id(indices)] = (indices, (kind + "_indices", [r, ("value", np.array(params, np.int64))]))
                self.keep.append(indices)

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
    return extremum_lin(vals[slot], ax, keepdim, largest)[1].reshape(-1)


def _order_lin(slot, kind, params, vals, arrays):
    return ORDER_LIN[kind](vals[slot], *params)[1].reshape(-1)


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
    return bool(v._requires_grad) and v._tape is None and (v._extra is None or v._extra.base is None)


def _arg_key(v):
    if getattr(v, "_PAIR", False):
        raise NotReplayable("a complex tensor argument is not replayed (pass tg.view_as_real(x), and "
                            "tg.view_as_complex it inside)")
    if type(v) is Tensor or isinstance(v, Tensor):
        return ("T", v._data.shape, v._data.dtype.num, v._requires_grad, _is_grad_leaf(v))
    if isinstance(v, np.ndarray):
        return ("A", v.shape, v.dtype.num)
    try:
        hash(v)
    except TypeError:
        raise NotReplayable("argument of type %s is neither an array nor hashable" % type(v).__name__) from None
    return ("V", type(v).__name__, v)


def _watched(arr, rec, idx, base):
    """The stand-in for integer argument ``base`` (``idx``: it, or one of its reshapes)."""
    w = object.__new__(_WatchedArg)
    w._real, w._rec, w._idx, w._base = arr, rec, idx, base
    w._requires_grad, w._tape_id, w._slot, w._ver, w._slot_version, w._tape, w._extra = False, 0, -1, [0], 0, None, None
    return w


def _recording_arg(rec, i, v, grad_arrays):
    """The tensor ``fn`` sees for argument ``v`` while recording."""
    arr = v._data if isinstance(v, Tensor) else v
    if arr.dtype.kind != "f":
        kind, t = "int", _watched(arr, rec, i, i)
    elif isinstance(v, Tensor) and _is_grad_leaf(v):
        kind, t = "leaf", v                          # a leaf that requires grad: gradients go to it
    else:
        t = _plain_wrap(arr)
        t._requires_grad = True                                  # recorded like a leaf; a constant on replay
        if isinstance(v, Tensor):
            t._ver = v._ver
        kind = "array" if not isinstance(v, Tensor) else ("nonleaf" if v._requires_grad else "data")
        if kind == "array" and grad_arrays:
            kind = "leaf"
    rec.args.append((kind, v, t, t._ver[0]))
    rec.arg_at[i] = rec.args[-1]
    rec.arg_ids[id(t)] = i
    rec.keep.append(t)
    return t


# -- structures of outputs ------------------------------------------------------------
def _flatten(obj, leaves):
    """A template of ``obj`` with its tensors replaced by their index in ``leaves``
    (a complex tensor by its real pair tensor's)."""
    if getattr(obj, "_PAIR", False):
        return ("C", type(obj), _flatten(obj._r, leaves))
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
    if kind == "C":
        return tpl[1]._from_pair(_unflatten(tpl[2], leaves))
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


def _real(a):
    return a._data if isinstance(a, Tensor) else a


def _arg_shape_dtype(t):
    a = np.asarray(t._real if isinstance(t, _WatchedArg) else t._data)
    return a.shape, a.dtype


def _same(a, b):
    """Whether a replay reproduced recorded value ``b``: exactly, or for floats within
    the rounding of a sum taken in another order (NumPy sums an array in its memory
    order, and an op on a transposed view keeps the view's layout where the replay's
    value is C-ordered: a few ulp), with the same NaNs."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
        return True
    return a.dtype.kind == "f" and bool(np.allclose(a, b, rtol=1e-13, atol=0.0, equal_nan=True))


def _all_same(pairs):
    """Whether ``_same(a, b)`` holds for every pair: the small pairs' elements in one
    comparison per dtype (a tape of many small values would spend most of a comparison
    per pair in NumPy's call overhead), a large pair on its own."""
    small = {}
    for a, b in pairs:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.size >= 4096:
            if not _same_values(a.reshape(-1), b.reshape(-1)):
                return False
        elif a.size:
            g = small.get(a.dtype)
            if g is None:
                g = small[a.dtype] = ([], [])
            g[0].append(a.reshape(-1))
            g[1].append(b.reshape(-1))
    return all(_same_values(np.concatenate(xs), np.concatenate(ys)) for xs, ys in small.values())


def _same_values(x, y):
    """``_same`` of two flat arrays of one dtype: equal, or (floats) within 1e-13 where
    not, with the same NaNs (the tolerance computed on the elements that differ only)."""
    eq = x == y
    if eq.all():
        return True
    if x.dtype.kind != "f":
        return False
    x, y = x[~eq], y[~eq]
    with np.errstate(invalid="ignore"):
        return bool(np.all((np.abs(x - y) <= 1e-13 * np.abs(y)) | (np.isnan(x) & np.isnan(y))))


def _signal_handler_codes():
    """The code objects of the Python signal handlers installed now."""
    import signal
    codes = set()
    for sig in signal.valid_signals():
        try:
            h = signal.getsignal(sig)
        except (ValueError, OSError):
            continue
        h = getattr(h, "__func__", h)
        code = getattr(h, "__code__", None)
        if code is not None:
            codes.add(code)
    return codes


def propagates(e):
    """Whether exception ``e``, raised while tapegrad replayed a tape (or checked,
    planned or compiled one), is the caller's to see rather than a replay's own
    failure (after which the call is recorded again or run eagerly): one a signal
    handler raised (a timeout: it interrupts whatever runs), and ``MemoryError``.
    (``KeyboardInterrupt`` and ``SystemExit`` are no ``Exception``: never caught.)"""
    if isinstance(e, MemoryError) or not isinstance(e, Exception):
        return True
    tb = e.__traceback__
    if tb is None:
        return False
    handlers = _signal_handler_codes()
    while tb is not None:
        if tb.tb_frame.f_code in handlers:
            return True
        tb = tb.tb_next
    return False


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
