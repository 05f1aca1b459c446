"""The flat Wengert tape: recording, slots, versions, freeing.

Every recorded operation appends one packed entry to ``buf``: nine integers
(opcode, input slots a/b/c, two integer parameters, grad_fn name id, element
count, version) and three floats (two scalar parameters, and the value itself
when the slot has one element).  Entry ``s`` produces slot ``s``; ``vals[s]`` is
the array the reverse pass needs from it (None when no entry reads it).
Variable-length parameters (shapes, strides, index arrays) go to ``aux``.

Tapes are per thread and short-lived: after a backward the thread starts a new
tape, and a tape is freed by reference counting once no tensor recorded on it is
alive (tensors hold their tape; a tape holds only arrays, its leaves, and the
tensors of older tapes it imported).  A tensor from an older tape used in a new
operation is imported as an ``EXT`` entry; backward hands its adjoint on to the
older tape, so graphs spanning several tapes differentiate as one.
"""
import itertools
import os
import struct
import sys
import threading
import weakref

import numpy as np

from .registry import CONST, EXT, LEAF, OPCODES

VARIADIC = -2   # in an entry's C field: its input slots are listed in aux (at its AUX offset)

_ids = itertools.count(1)
_tls = threading.local()

# A tape's id carries the number of the thread that records on it above its serial
# (``OWNER_SHIFT``).  A leaf (or constant) remembers its slot on one tape only
# (``_tape_id``, ``_slot``, ``_slot_version``, read by every recorder without a lock):
# those fields belong to one thread at a time, the first whose tape adopts it (its
# number stays in ``_tape_id`` when the slot is forgotten), until that thread ends.
# Another thread's tape keeps its own slot for the leaf (``Tape.foreign``): a leaf used by
# several threads' graphs at once gets its gradient from every one (``Tape.adopt``).
OWNER_SHIFT = 40
SERIAL_MASK = (1 << OWNER_SHIFT) - 1
OWNER_MASK = ~SERIAL_MASK
_thread_numbers = itertools.count(1)
_LIVE_THREADS = set()           # the numbers of the threads whose state is alive
_CLAIM = threading.Lock()       # taking a leaf's fields for this thread

# Bumped by every in-place operation (also under no_grad): a tape whose mark is
# older than the counter must check the versions of the values it saved.
inplace_counter = [0]

# How many threads are recording a function for replay (``tapegrad.replay``) or are
# in inference mode (``tg.inference_mode``): the few places that must tell the
# recording something (``RecordingObserver``), and ``Tensor._wrap``, which marks the
# tensors made in inference mode, test this first, so they cost nothing otherwise.
recording = [0]

# A tape is freed only when none of its tensors is alive, so the thread starts a new
# tape past this many entries or elements (the values an entry keeps are at most its
# inputs' and output's): a loop that records without ever calling backward holds
# at most about one tape's worth of memory.
ROTATE_ENTRIES = 1 << 18
ROTATE_ELEMENTS = 1 << 22   # 32 MiB of float64

# Anomaly mode (``tg.autograd.detect_anomaly``): [enabled, check_nan].  While it is
# on, every recording stops by ``Tape.room`` to note the user's source line.
anomaly = [False, True]
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # tapegrad/

# One entry: 9 int64 fields then 3 float64 fields, packed into a bytearray
# (``struct.pack_into`` is several times cheaper per op than growing
# array.array or ndarray rows, and backward views the buffer without copying).
OP, A, B, C, AUX, PARAM, NAME, SIZE, VERSION, F0, F1, VAL = range(12)
NFIELDS = 12
ENTRY = struct.Struct("9q3d")   # VAL: the value itself when the slot has one element
_FIELD = struct.Struct("q")
ESIZE = ENTRY.size


class _State:
    """Per-thread grad mode and recording tape."""
    __slots__ = ("grad", "tape", "rec", "inference", "number", "__weakref__")

    def __init__(self):
        self.grad = True
        self.tape = None
        self.rec = None         # the RecordingObserver recording on this thread (tapegrad.replay)
        self.inference = False  # in tg.inference_mode
        self.number = next(_thread_numbers)     # (in the ids of the thread's tapes: OWNER_SHIFT)


def set_inference(st, flag):
    """Turn this thread's inference mode on or off (``recording`` counts it)."""
    flag = bool(flag)
    if flag != st.inference:
        recording[0] += 1 if flag else -1
        st.inference = flag


class RecordingObserver:
    """What the core and the ops tell a recording for replay.

    ``tapegrad.replay``'s session implements it and sits in ``state().rec`` while
    its thread records; the core never imports the recording.  A place that must
    tell it something tests ``recording[0]`` first (no thread records: nothing
    more to pay), then ``rec = state().rec`` and ``if rec is not None: rec.read(t, v)``.
    The methods here are the answers of an observer that follows nothing.
    """
    tape = None     # the tape the recording is made on

    def made(self, t):
        """Tensor ``t`` was made off the tape (``Tensor._wrap``: a result that needs
        no grad, ``detach``, a comparison, ...)."""

    def adopted(self, s, t):
        """Leaf or constant ``t`` entered ``tape`` as slot ``s``."""

    def refuse(self, why):
        """The function does something a replay cannot repeat; ``why`` completes
        "cannot record ... for replay: "."""

    def read(self, t, value):
        """Python read the values of ``t`` (``bool``, ``item``, ``tolist``, ``numpy``)."""

    def really_requires_grad(self, t):
        """False for a tensor that requires grad only because the recording traces
        the function's arguments (``numpy()`` of it is allowed, as in eager execution)."""
        return bool(t._requires_grad)

    def compared(self, ufunc, a, b, out):
        """``out = ufunc(a, b)`` (``b`` None: ``ufunc(a)``) was computed off the tape:
        a comparison or bitwise op; ``a``, ``b`` are tensors or arrays."""

    def index(self, k):
        """Tensor ``k`` is used as an index: the array to index with."""
        return k._data

    def gathered(self, out, shape, idx):
        """``out = x[idx]`` was recorded, ``x`` of ``shape``, ``idx`` a tuple of
        integer arrays (from ``index``) and full slices."""

    def picked(self, x, values, ax, keepdim, largest):
        """``values`` are the max (``largest``) or min of ``x`` along ``ax``: which
        elements they are depends on x's values."""

    def ordered(self, x, values, kind, params, indices=None):
        """``values`` is a gather of ``x`` at the elements ``ops.order.ORDER_LIN[kind](
        x's value, *params)`` picks (sort, topk, median, ...), and ``indices`` (when
        given) their indices: both depend on x's values."""

    def labels(self, target, flags):
        """Class labels ``target`` of a loss (nll_loss, cross_entropy): the tuple
        ``flags(labels array)`` when the recording follows the labels (then the
        caller may gather by them directly), else None."""
        return None


def checked_values(t):
    """The values of tensor ``t`` that library code decides on (a check that raises, a
    Python bool it returns): while a function is recorded for replay, a guard, so that
    each replay decides again rather than reusing what the recording saw."""
    if recording[0]:
        rec = state().rec
        if rec is not None:
            rec.read(t, t._data)
    return t._data


def state():
    try:
        return _tls.st
    except AttributeError:
        st = _tls.st = _State()
        _LIVE_THREADS.add(st.number)
        weakref.finalize(st, _LIVE_THREADS.discard, st.number)     # (at the thread's end)
        return st


def forget_slot(t):
    """``t``'s slot on its tape no longer holds its value (changed in place, another
    array, requires_grad changed): a fresh slot on next use, by the thread that has
    its fields (``OWNER_SHIFT``)."""
    t._tape_id &= OWNER_MASK


def is_grad_enabled():
    return state().grad


def _set_grad_enabled(mode):
    state().grad = bool(mode)


def current():
    """This thread's recording tape (created on first use)."""
    return tape_of(state())


def tape_of(st):
    """The tape of thread state ``st`` with room for one more entry (a new tape when
    it is full or sealed); the recorders, which hold ``st`` already, call it directly."""
    t = st.tape
    if t is None or (t.n >= t.limit and not t.room()):
        if t is not None and t.ext:
            prune_imports(t)
        t = st.tape = Tape()
    return t


def prune_imports(T):
    """Free what the tapes ``T`` imports from hold beyond what ``T`` needs of them.

    A tape full in the middle of an expression leaves it to the next, which imports
    the tensors of the expression so far and so holds the tape they are on: a loop
    that records without backward would chain every tape to the last.  Once no
    tensor of an older tape is alive (only ``T``'s imports refer to it), all a
    backward can reach there is what the imported slots depend on: the rest is
    marked freed, its saved values dropped, and its own imports outside that cone
    forgotten, which frees the tapes before it."""
    older = {}
    for To, so in T.ext.values():
        older.setdefault(id(To), [To, []])[1].append(so)
    for entry in older.values():
        To, slots = entry
        # holders: T's import tuples, ``entry``, ``To`` here and getrefcount's argument
        if To.owner != T.owner or sys.getrefcount(To) != len(slots) + 3 or To.hooks or To.retained:
            continue
        To.keep_only(slots)
    older.clear()


_PRUNE_LIMIT = 1 << 14      # entries in the cone past which ``keep_only`` leaves a tape as it is


def _claim(t, mine):
    """Give this thread (number ``mine``) the fields of leaf ``t`` if no other live
    thread has them; returns whether it has them."""
    owner = t._tape_id >> OWNER_SHIFT
    if owner and owner in _LIVE_THREADS:
        return False
    with _CLAIM:
        owner = t._tape_id >> OWNER_SHIFT
        if owner == mine:
            return True
        if owner and owner in _LIVE_THREADS:
            return False
        t._tape_id = mine << OWNER_SHIFT       # (no slot yet: the caller makes it)
        return True


def rotate():
    """Start a new tape for the next operations (called after each backward)."""
    state().tape = None


def resume(T):
    """Record the next operations onto ``T`` again, when that is safe: this thread's
    tape, not sealed (no newer tape refers to it).  Otherwise start a new tape."""
    st = state()
    st.tape = T if (not T.sealed and T.owner == threading.get_ident() and T.n < ROTATE_ENTRIES
                    and T.elements < ROTATE_ELEMENTS) else None


def take_spare(spare, key, make, *args):
    """``spare[key]`` when nothing else holds it, else a new one, ``make(*args)``.

    ``spare`` is a dict where a replay leaves its buffers for the next call, which
    takes them out with this (warm memory, no allocation).  A buffer is taken only
    when nothing holds it any more: no tensor, view, tape or gradient handed out.
    A tuple there is a buffer with what belongs to it (its addresses, its arrays),
    taken whole only when nothing else holds the tuple or any part of it.  The
    value is taken out of ``spare`` while checked: another thread, finding
    nothing, makes its own.  The caller puts it back once it is in use."""
    got = spare.pop(key, None)
    # Alone, ``got`` is held by this local and getrefcount's argument (a part: also
    # by its tuple and the loop variable); ``_calibrate`` measured those counts on
    # this very function.  Any more is a holder outside: make a new one.
    if got is None or sys.getrefcount(got) > _TAKEN_ALONE:
        return make(*args)
    if type(got) is tuple:
        for part in got:
            if sys.getrefcount(part) > _PART_ALONE:
                return make(*args)
    return got


def _calibrate():
    """The reference counts ``take_spare`` reads for a value nothing else holds
    and for a part of such a tuple: measured (they depend on the interpreter) as
    the lowest thresholds at which it takes fresh ones."""
    global _TAKEN_ALONE, _PART_ALONE

    def lowest(which, fresh):
        for limit in range(1, 64):
            globals()[which] = limit
            if type(take_spare({0: fresh()}, 0, list)) is not list:
                return limit
        return -1
    _TAKEN_ALONE = _PART_ALONE = 1 << 30
    _TAKEN_ALONE = lowest("_TAKEN_ALONE", lambda: np.zeros(0))
    _PART_ALONE = lowest("_PART_ALONE", lambda: (np.zeros(0), np.zeros(0)))
    if _TAKEN_ALONE < 0 or _PART_ALONE < 0:
        _TAKEN_ALONE = _PART_ALONE = -1


_TAKEN_ALONE = _PART_ALONE = -1
if getattr(sys, "_is_gil_enabled", lambda: True)():
    _calibrate()
# else free-threaded Python: counts are not exact, so nothing is ever reused (-1)


# The slot of a view, read from its base's current slot (``Tape.adopt``): the view
# policy belongs to the op layer, which sets it (``ops/_record.py``); the core knows no op.
view_slot = None

_LIVE = weakref.WeakSet()       # every tape still alive, for memory_stats()
_NO_FREED = np.zeros(0, np.uint8)
_NO_AUX = np.zeros(0, np.int64)     # (writeable: Numba compiles read-only arrays apart)


def memory_stats():
    """What the live tapes hold: how many tapes and entries, and the bytes of the
    values they keep for backward (each array counted once), of their entry
    buffers and of their auxiliary parameters; and the bytes of the buffers kept for
    ``tg.tensor``'s large copies (``core/buffers.py``), of them those nothing uses."""
    from . import buffers
    kept, idle = buffers.stats()
    tapes = list(_LIVE)
    seen, saved = set(), 0
    for T in tapes:
        for v in T.vals:
            if v is not None and id(v) not in seen:
                seen.add(id(v))
                saved += v.nbytes
    return {
        "tapes": len(tapes),
        "entries": sum(T.n for T in tapes),
        "saved_arrays": len(seen),
        "saved_bytes": saved,
        "entry_bytes": sum(len(T.buf) for T in tapes),
        "aux_bytes": sum(8 * T.aux_len for T in tapes),
        "copy_buffer_bytes": kept,
        "idle_copy_buffer_bytes": idle,
    }


class Tape:
    __slots__ = ("id", "owner", "buf", "n", "cap", "limit", "sealed", "elements", "counted", "vals", "versions", "leaves",
                 "ext", "imports", "hooks", "retained", "freed", "aux", "aux_len", "inplace_mark", "sources", "nodes",
                 "host_state", "_arrays", "foreign", "__weakref__")
    # ``host_state``: {slot: object} what a host entry keeps in Python beside the tape
    # (a tg.autograd.Function's context), owned by the tape; unset until one is kept

    # The two things the replay package's tapes add (a tape made here has neither):
    # how backward sweeps a replayed tape (``replay.replayed.ReplayedTape``), and the
    # output shape of every entry of a tape a function is recorded on for replay
    # (``replay.session.RecordingTape``, which stays one tape: ``room`` never rotates it).
    plan = None
    shapes = None

    def __init__(self):
        self.id = state().number << OWNER_SHIFT | next(_ids)
        self.owner = threading.get_ident()     # the thread that records on it
        self.foreign = None     # id(leaf) -> (leaf, slot, version): other threads' leaves (adopt)
        self.buf = bytearray(ESIZE * 256)
        self.n = 0
        self.cap = 256          # entries the buffer holds
        # recorders call ``room`` when n reaches limit (<= cap): normally the capacity,
        # 0 once sealed, and the next entry while anomaly mode notes source lines
        self.limit = 0 if anomaly[0] else min(32, ROTATE_ENTRIES)   # first look at the sizes early
        self.sealed = False
        self.elements = 0       # elements of the entries before ``counted`` (see ``room``)
        self.counted = 0
        self.vals = []          # slot -> ndarray or None
        self.versions = []          # slot -> the version counter of the tensor it came from
        self.leaves = {}        # slot -> leaf Tensor (gradients accumulate into it)
        self.ext = {}           # slot -> (older tape, slot there) of an imported tensor
        self.imports = {}       # id(tensor) -> slot, for EXT entries
        self.hooks = {}         # slot -> (hooks, shape, dtype) of a non-leaf tensor
        self.retained = {}      # slot -> weakref of a tensor that called retain_grad()
        self.freed = _NO_FREED     # (never written: a tape that frees gets an array of its own)
        self.aux = []           # chunks of int64 words; see aux_append
        self.aux_len = 0
        self.inplace_mark = inplace_counter[0]
        self.sources = None     # [(first slot, user source line)] recorded in anomaly mode
        self.nodes = None       # slot -> grad_fn Node (weak), so grad_fn is the same object each time
        self._arrays = None     # (n, buf, ints, flts) of the last ``arrays()``
        _LIVE.add(self)

    def __len__(self):
        return self.n

    # -- recording ------------------------------------------------------------
    def aux_append(self, words):
        """Store variable-length integer parameters; returns their offset."""
        at = self.aux_len
        w = words if (type(words) is np.ndarray and words.ndim == 1) else np.asarray(words, dtype=np.int64).ravel()
        self.aux.append(w)
        self.aux_len += w.size
        return at

    def aux_array(self):
        """All the auxiliary parameters as one int64 array (``aux_append``'s offsets
        index it); the pieces are joined once and kept joined."""
        aux = self.aux
        if len(aux) > 1:
            aux = self.aux = [np.concatenate(aux)]
        return aux[0] if aux else _NO_AUX

    def grow(self):
        # a new buffer rather than extending this one: views of the old entries
        # (a backward in progress) stay valid while entries are appended
        old = self.buf
        self.buf = bytearray(2 * len(old))
        self.buf[:len(old)] = old
        self.cap = len(self.buf) // ESIZE

    def room(self):
        """Called when ``n`` reached ``limit``: make room for the next entries, or
        report (False) that this tape is full or sealed and a new one must start.
        It also counts the elements of the entries so far, and comes back sooner
        when they are large."""
        n = self.n
        if self.sealed:
            return False
        if n >= ROTATE_ENTRIES and self.shapes is None:     # (a recording for replay stays on one tape)
            return False
        if n > self.counted:
            sizes = np.frombuffer(self.buf, np.int64, count=n * NFIELDS)[self.counted * NFIELDS + SIZE::NFIELDS]
            self.elements += int(sizes.sum())
            self.counted = n
            del sizes
            if self.elements >= ROTATE_ELEMENTS and self.shapes is None:
                return False
        if n >= self.cap:
            self.grow()
        if anomaly[0]:
            self.note_source()
            self.limit = n + 1     # come back here for the next operation
        else:
            # entries until the element budget could run out at the average size so far
            left = (ROTATE_ELEMENTS - self.elements) * n // max(self.elements, 1) if n else 1024
            self.limit = min(self.cap, n + max(8, min(1024, left)))
            if self.shapes is None:
                self.limit = min(self.limit, ROTATE_ENTRIES)
        return True

    def note_source(self):
        """Remember the user's line that records the next entries (anomaly mode)."""
        import sys
        f = sys._getframe(2)
        while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
            f = f.f_back
        where = "<unknown>" if f is None else '"%s", line %d, in %s' % (f.f_code.co_filename, f.f_lineno,
                                                                       f.f_code.co_name)
        if self.sources is None:
            self.sources = []
        self.sources.append((self.n, where))

    def source(self, s):
        """The user's line that recorded entry ``s`` (anomaly mode), or None."""
        if not self.sources:
            return None
        import bisect
        i = bisect.bisect_right(self.sources, (s, "\uffff")) - 1
        return self.sources[i][1] if i >= 0 else None

    def new_slot(self, code, a, b, c, i0, i1, nm, f0, f1, arr, save, ver):
        """Append an entry whose output is ``arr`` (kept for the reverse pass if ``save``)."""
        s = self.n
        if s >= self.cap:
            self.grow()
        size = arr.size
        ENTRY.pack_into(self.buf, s * ESIZE, code, a, b, c, i0, i1, nm, size, ver[0], f0, f1,
                        arr.item() if size == 1 else 0.0)
        self.n = s + 1
        self.vals.append(arr if save else None)
        self.versions.append(ver)
        return s

    def keep_host_state(self, s, obj):
        """Keep ``obj`` for the host entry at slot ``s`` (``host_state``), as long as the tape."""
        if getattr(self, "host_state", None) is None:
            self.host_state = {}
        self.host_state[s] = obj

    def intact(self):
        """Nothing of this tape was freed and no in-place op ran anywhere since it was
        made (or marked): a backward's checks of its saved values cannot fail."""
        return not self.freed.size and inplace_counter[0] == self.inplace_mark

    def seal(self):
        self.sealed = True
        self.limit = 0          # the owner's next op sees "no room" and starts a new tape

    def field(self, s, k):
        return _FIELD.unpack_from(self.buf, s * ESIZE + 8 * k)[0]

    def set_field(self, s, k, v):
        _FIELD.pack_into(self.buf, s * ESIZE + 8 * k, v)

    def arrays(self):
        """Views of the entries: (int64 (n, 12), float64 (n, 12)); only the int
        fields of the first, the float fields (F0, F1, VAL) of the second mean anything.
        (The last call's, while no entry was added: a backward and the programs ask
        several times.)"""
        n, buf = self.n, self.buf
        got = self._arrays
        if got is not None and got[0] == n and got[1] is buf:
            return got[2], got[3]
        ints = np.frombuffer(buf, dtype=np.int64, count=n * NFIELDS).reshape(n, NFIELDS)
        flts = np.frombuffer(buf, dtype=np.float64, count=n * NFIELDS).reshape(n, NFIELDS)
        self._arrays = (n, buf, ints, flts)
        return ints, flts

    def adopt(self, t):
        """The slot of tensor ``t`` on this tape, making one when needed."""
        ver = t._ver
        if t._tape is None:                       # a leaf or a constant
            if (t._extra is not None and t._extra.base is not None and t._extra.name != "no_grad_view"
                    and t._extra.base._tape is not None):
                return view_slot(self, t)
            mine = self.id >> OWNER_SHIFT
            if t._tape_id >> OWNER_SHIFT != mine and not _claim(t, mine):
                return self._foreign_slot(t)
            code = LEAF if t._requires_grad else CONST
            # (its value is kept only by an entry whose reverse reads it: the recorders)
            s = self.new_slot(code, -1, -1, -1, -1, -1, -1, 0.0, 0.0, t._data, False, ver)
            if t._requires_grad:
                self.leaves[s] = t
            t._tape_id, t._slot, t._slot_version = self.id, s, ver[0]
            if recording[0]:
                rec = state().rec
                if rec is not None and rec.tape is self:
                    rec.adopted(s, t)
            return s
        if t._tape is self:                       # changed in place since its slot was made
            return self._refresh(t)
        # an imported tensor is remembered by (tape, slot), not by the tensor: an
        # in-place op later moves the tensor, but this entry still means the old value
        key = (t._tape.id, t._slot)
        s = self.imports.get(key)
        if s is not None and self.field(s, VERSION) == ver[0]:
            return s
        s = self.new_slot(EXT, -1, -1, -1, -1, -1, -1, 0.0, 0.0, t._data, False, ver)
        self.ext[s] = (t._tape, t._slot)
        if recording[0]:
            rec = state().rec
            if rec is not None and rec.tape is self:
                rec.refuse("it uses a tensor that requires grad computed outside the function; pass it as an "
                           "argument instead")
        # Seal the source: if it is another thread's current tape, that thread's next
        # op starts a new tape, so links between tapes always point to older entries.
        t._tape.seal()
        self.imports[key] = s
        return s

    def _foreign_slot(self, t):
        """The slot of leaf or constant ``t``, whose fields another thread has, on
        this tape: kept here (with ``t``, so that its id stays its own), one per
        version."""
        ver = t._ver[0]
        f = self.foreign
        if f is None:
            f = self.foreign = {}
        got = f.get(id(t))
        if got is not None and got[0] is t and got[2] == ver:
            return got[1]
        s = self.new_slot(LEAF if t._requires_grad else CONST, -1, -1, -1, -1, -1, -1, 0.0, 0.0, t._data, False,
                          t._ver)
        if t._requires_grad:
            self.leaves[s] = t
        f[id(t)] = (t, s, ver)
        if recording[0]:
            rec = state().rec
            if rec is not None and rec.tape is self:
                rec.adopted(s, t)
        return s

    def leaf_slot(self, t):
        """The slot leaf ``t`` has on this tape: None if it has none, -1 if it has several
        (it changed in place between uses, or threads took turns with it)."""
        found = None
        for s, leaf in self.leaves.items():
            if leaf is t:
                if found is not None:
                    return -1
                found = s
        return found

    def _refresh(self, t):
        """A fresh slot for a non-leaf whose version moved without a recorded op on
        it: a view re-reads its base; otherwise an identity entry, so later saves
        get the current version."""
        if t._extra is not None and t._extra.base is not None:
            return view_slot(self, t)
        s = self.new_slot(OPCODES["copy"], t._slot, -1, -1, -1, -1, self.field(t._slot, NAME),
                          0.0, 0.0, t._data, False, t._ver)
        t._slot, t._slot_version = s, t._ver[0]
        return s

    def keep_only(self, slots):
        """Keep only what a backward from ``slots`` reads (the entries they depend on):
        every other entry is marked freed (a backward reaching one raises PyTorch's
        error) and its saved value dropped, and the imports outside forgotten."""
        n = self.n
        ints = np.frombuffer(self.buf, np.int64, count=n * NFIELDS).reshape(n, NFIELDS)
        aux = self.aux_array()
        cone = np.zeros(n, np.uint8)
        todo = [s for s in slots if 0 <= s < n]
        seen = 0
        while todo:
            s = todo.pop()
            if cone[s]:
                continue
            cone[s] = 1
            seen += 1
            if seen > _PRUNE_LIMIT:
                return False
            row = ints[s]
            if row[C] == VARIADIC:
                at = row[AUX]
                todo.extend(int(i) for i in aux[at + 1:at + 1 + aux[at]] if i >= 0)
            else:
                todo.extend(int(i) for i in (row[A], row[B], row[C]) if i >= 0)
        del ints
        freed = cone ^ 1
        freed[:self.freed.size] |= self.freed[:n]
        self.freed = freed
        vals = self.vals
        for s in np.flatnonzero(cone == 0).tolist():
            vals[s] = None
        for s in [s for s in self.ext if not cone[s]]:
            del self.ext[s]
        self.imports = {k: s for k, s in self.imports.items() if cone[s]}
        return True

    # -- inspection -----------------------------------------------------------
    def entries(self):
        """The tape as NumPy arrays (copies): opcode, a, b, c, i0, i1, name, size, f0, f1."""
        ints, flts = self.arrays()
        names = ("op", "a", "b", "c", "i0", "i1", "name", "size")
        out = {k: ints[:, i].copy() for i, k in enumerate(names)}
        out["f0"], out["f1"] = flts[:, F0].copy(), flts[:, F1].copy()
        return out

    def __repr__(self):
        return f"<tapegrad.Tape id={self.id} entries={len(self)}>"
