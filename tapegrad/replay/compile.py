"""``tg.compile``: call a function, replaying its recorded tape when the arguments'
signature and every guard match a recording."""
import sys
import warnings

import numpy as np

from ..core import tape as _tp
from ..core.tensor import Tensor
from .captured import StandIns, discover, operand_candidates
from .recording import _record_call
from .session import (NotReplayable, NotReproduced, TapeDivergence, _Rerecord, _Stale, _arg_key, _is_array_arg, _is_grad_leaf,
                      _real, propagates)

# -- tg.compile ----------------------------------------------------------------------
class CompileStats:
    """``divergences``: calls where every recording of the signature met a guard that
    differs (a value Python read, or one the function reads from outside its
    arguments), after which the call was recorded again; ``errors``: replays that
    raised, after which the call was recorded again; ``checks``: replays that
    ``check=N`` compared with an eager call."""
    __slots__ = ("calls", "recordings", "replays", "divergences", "eager", "errors", "checks")

    def __init__(self):
        self.calls = self.recordings = self.replays = self.divergences = self.eager = self.errors = self.checks = 0

    def __repr__(self):
        return ("CompileStats(calls=%d, recordings=%d, replays=%d, divergences=%d, eager=%d, errors=%d, checks=%d)"
                % (self.calls, self.recordings, self.replays, self.divergences, self.eager, self.errors,
                   self.checks))


MAX_TAPES = 8           # recordings kept per signature (one per path through the guards)
MAX_DIVERGENCES = 64    # a signature that diverged this often without a replay runs eagerly
RECORD_LIMIT = 8        # recordings made because a value read from outside the arguments changed (as
                        # torch.compile's recompile limit): past it, such a call runs eagerly, with one warning
MAX_SIDE_EFFECTS = 3    # recordings of a signature refused because the call changed what it reads: then eager


class Compiled:
    """``tg.compile(fn)``: calls ``fn``, replaying its recorded tape when the
    arguments' signature and every guard match a recording."""

    def __init__(self, fn, strict=False, log=False, fuse="auto", check=0):
        _check_fuse(fuse)
        if isinstance(check, bool) or not isinstance(check, int) or check < 0:
            raise ValueError("check must be a non-negative int (every check-th replay is compared with an eager "
                             "call; 0: never), got %r" % (check,))
        self.fn = fn
        self.fuse = fuse
        self.strict = strict
        self.log = log
        self.check = check
        self.stats = CompileStats()
        self.cache = {}         # signature -> [Recording] (most recent first) or a reason string
        self.why = {}           # signature -> why it runs eagerly, or why it was last recorded again
        self.replay_error = None    # the last exception a replay raised (then the call was recorded again)
        self.rerecords = 0      # recordings made because a captured value changed (RECORD_LIMIT)
        self.side_effects = {}  # signature -> recordings refused because the call changed what it reads
        self.warned_limit = False
        try:
            self.__name__ = fn.__name__
            self.__doc__ = fn.__doc__
        except AttributeError:
            pass

    def __repr__(self):
        return "<tapegrad.compile of %r, %r>" % (self.fn, self.stats)

    def _eager(self, args, kwargs):
        self.stats.eager += 1
        return self.fn(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        st = self.stats
        st.calls += 1
        ts = _tp.state()
        if ts.rec is not None:
            return self._eager(args, kwargs)
        keys, arrays = [], []
        try:
            for a in args:
                if type(a) is Tensor:
                    d = a._data
                    keys.append(("T", d.shape, d.dtype.num, a._requires_grad, _is_grad_leaf(a)))
                    arrays.append(d)
                else:
                    keys.append(_arg_key(a))
                    arrays.append(_real(a))
            key = (tuple(keys), tuple(sorted((k, _arg_key(v)) for k, v in kwargs.items())) if kwargs else (),
                   ts.grad)
        except NotReplayable as e:
            self.why[None] = str(e)
            return self._eager(args, kwargs)
        if kwargs and any(_is_array_arg(v) for v in kwargs.values()):
            self.why[key] = "arrays passed by keyword are not supported"
            return self._eager(args, kwargs)
        entry = self.cache.get(key)
        if isinstance(entry, str):
            return self._eager(args, kwargs)
        diverged = failed = changed = changed_from = None
        check_now = False
        if entry:
            for R in list(entry):
                caps = R.captures
                if caps is not None:
                    g = caps.failing(args, kwargs)
                    if g is not None:       # (a value it read from outside its arguments changed)
                        if changed is None:
                            changed, changed_from = caps.describe(g, args, kwargs), R
                        continue
                lock = R.live_lock if R.live_params else None     # (its entries' numbers are set per replay)
                if lock is not None:
                    lock.acquire()
                try:
                    arrays_r = R.with_views(arrays)
                    bad = R.check_args(arrays_r)
                    if bad is None:
                        try:
                            if R.live_params:
                                R.set_live(caps.values(args, kwargs))
                            vals = R.forward(arrays_r)
                        except _Rerecord as e:
                            entry.remove(R)
                            check_now = isinstance(e, _Stale)
                            break
                        except NotReproduced as e:      # (the first replay's check: never replayed)
                            entry.remove(R)
                            self.why[key] = str(e)
                            if not entry:
                                self.cache[key] = str(e)
                            return self._eager(args, kwargs)
                        except Exception as e:      # (a path the recording did not take may fail: record anew)
                            if propagates(e):
                                raise
                            bad = failed = ("the replay", None, None)
                            self.replay_error = "%s: %s" % (type(e).__name__, e)
                        else:
                            bad = R.check_guards(vals, arrays_r)
                    if bad is None:
                        if R is not entry[0]:
                            entry.remove(R)
                            entry.insert(0, R)
                        st.replays += 1
                        T = R.tape_for(vals, arrays_r, args)
                        out = R.outputs(vals, arrays_r, args, T)
                        if self.check and st.replays % self.check == 0:
                            self._compare_with_eager(out, args, kwargs)
                        return out
                    diverged = bad
                finally:
                    if lock is not None:
                        lock.release()
            if diverged is not None:
                st.divergences += 1
                if self.strict:
                    where, old, new = diverged
                    raise TapeDivergence("the tape recorded at the first call diverges at %s: recorded %r, "
                                         "now %r" % (where, _show(old), _show(new)))
                if st.divergences > MAX_DIVERGENCES and st.replays == 0:
                    self.cache[key] = "guards diverge at every call"
                    return self._eager(args, kwargs)
            elif changed is not None:
                st.divergences += 1
                self.why[key] = changed + ": recorded again"
                if self.strict:
                    raise TapeDivergence("%s: a replay of %s would assume the value recorded"
                                         % (changed, _name(self.fn)))
                self.rerecords += 1
                if self.rerecords > RECORD_LIMIT:
                    self.why[key] = changed + (": runs eagerly (recorded %d times as values it reads changed)"
                                               % RECORD_LIMIT)
                    if not self.warned_limit:
                        self.warned_limit = True
                        warnings.warn("tapegrad.compile: %s was recorded %d times because values it reads from "
                                      "outside its arguments changed, last %s; calls whose values match none of "
                                      "its recordings now run eagerly (pass a value that changes at every call "
                                      "as an argument)" % (_name(self.fn), RECORD_LIMIT, changed),
                                      RuntimeWarning, stacklevel=2)
                    return self._eager(args, kwargs)
        try:
            caps = discover(self.fn, args, kwargs)
        except Exception as e:      # (code this reading does not follow: never replayed unguarded)
            if propagates(e):
                raise
            self.why[key] = "its code could not be read for what it reads from outside its arguments (%s: %s)" \
                % (type(e).__name__, e)
            self.cache[key] = self.why[key]
            return self._eager(args, kwargs)
        stand = None        # (floats that changed, recorded with stand-ins: they may be read live)
        if changed_from is not None:
            old = changed_from.captures
            numbers = operand_candidates(old, args, kwargs) + old.live
            if numbers:
                stand = StandIns(numbers, args, kwargs)
                stand.put()
        try:
            out, R, why = _record_call(self.fn, args, kwargs, check_now=check_now, fuse=self.fuse)
        finally:
            if stand is not None:
                stand.take()
        st.recordings += 1
        if R is not None and len(caps):
            g = caps.failing(args, kwargs)
            if g is not None:
                why = "it changes %s while it runs (a replay would not)" % g.label
                R = None
                n = self.side_effects[key] = self.side_effects.get(key, 0) + 1
                if n >= MAX_SIDE_EFFECTS and not self.cache.get(key):
                    self.cache[key] = why
                self.why[key] = why
            else:
                R.captures = caps
                if stand is not None:
                    self._read_live(R, changed_from, stand, caps, key)
        elif R is not None:
            R.captures = None       # (it reads nothing from outside its arguments)
        if failed is not None:
            # the function itself ran: the replay's failure was the library's (or a path the
            # guards did not see coming), worth knowing about rather than hidden by the re-recording
            st.errors += 1
            if st.errors == 1:
                warnings.warn("tapegrad.compile: replaying %s raised %s; it was recorded again "
                              "(compiled.stats.errors counts these, compiled.replay_error has the last)"
                              % (_name(self.fn), self.replay_error), RuntimeWarning, stacklevel=2)
        if self.log:
            print("tapegrad.compile: recording %s for %s%s%s" % (
                _name(self.fn), _sig(key), "" if R else " (not replayable: %s)" % why,
                " (%s)" % changed if changed is not None else ""), file=sys.stderr)
        if R is None:
            if why is not None:
                self.why[key] = why
            if not self.cache.get(key) and why is not None and not why.startswith("it changes "):
                self.cache[key] = why           # (a path through other guards may still replay)
        else:
            lst = self.cache.setdefault(key, [])
            lst.insert(0, R)
            del lst[MAX_TAPES:]
        return out

    def _read_live(self, R, old, stand, caps, key):
        """Recording ``R`` made with stand-ins for floats that changed since recording
        ``old``: when it differs from ``old`` only in entries holding those numbers as
        their operands, it reads them live there at each replay (and replaces ``old``)."""
        used = stand.numbers()
        if not used:
            return
        pairs = []
        for g, v in used:
            pairs.append((old.live_now[old.captures.live.index(g)] if g in old.captures.live else g.value, v))
        spots = R.number_positions(old, pairs)
        if spots is None:
            return
        live, params = [], []
        for i, (g, v) in enumerate(used):
            at = spots.get(i)
            if at is None and g in old.captures.live and pairs[i][0] == v:
                j = old.captures.live.index(g)      # (read live already, unchanged: where it was)
                at = [(s, col, sign) for s, col, sign, k in old.live_params if k == j]
            new = next((h for h in caps.guards if h.root.obj is g.root.obj and h.root.kind == g.root.kind
                        and h.root.key == g.root.key and h.steps == g.steps), None)
            if not at or new is None:
                return
            live.append(new)
            params += [(s, col, sign, len(live) - 1) for s, col, sign in at]
        R.captures = caps.without(live)
        R.live_params, R.live_now = params, tuple(v for _, v in used)
        entry = self.cache.get(key)
        if isinstance(entry, list) and old in entry:
            entry.remove(old)
        self.rerecords -= 1         # (not a recording for one value: it serves them all)
        self.why[key] = "%s: read live from now on" % ", ".join(g.label for g in live)

    def _compare_with_eager(self, out, args, kwargs):
        """``check=N``: the replay's result against an eager call's (values within
        1e-10 of each output's largest magnitude, shapes, dtypes, structure)."""
        from .session import _flatten
        st = self.stats
        st.checks += 1
        want = self.fn(*args, **kwargs)
        got_leaves, want_leaves = [], []
        tg, tw = _flatten(out, got_leaves), _flatten(want, want_leaves)
        where = None
        if _structure(tg) != _structure(tw) or len(got_leaves) != len(want_leaves):
            where = "the structure of its result"
        else:
            for i, (a, b) in enumerate(zip(got_leaves, want_leaves)):
                a, b = np.asarray(a._data), np.asarray(b._data)
                if a.shape != b.shape or a.dtype != b.dtype or not _close_enough(a, b):
                    where = "output %d (%s %s against eager %s %s%s)" % (
                        i, a.dtype, a.shape, b.dtype, b.shape,
                        "" if a.shape != b.shape or a.dtype != b.dtype else
                        ", largest difference %.3g" % float(np.max(np.abs(a.astype(float) - b.astype(float)))))
                    break
        if where is not None:
            raise TapeDivergence("tapegrad.compile(check=%d): replay %d of %s differs from eager execution in %s; "
                                 "something it reads is not guarded (see \"What a replay assumes\" in "
                                 "docs/replay.md): pass it as an argument" % (self.check, st.replays,
                                                                               _name(self.fn), where))

    def fusion(self):
        """For every recording kept: what fusion did with it (``Recording.fusion``):
        groups, entries fused, bytes of intermediates not written, compile seconds
        and whether Numba's cache served it, or why it is not fused."""
        return [R.fusion() for entry in self.cache.values() if not isinstance(entry, str) for R in entry]


def _check_fuse(fuse):
    if fuse not in (False, True, "auto"):
        raise ValueError("fuse must be False, True or 'auto', got %r" % (fuse,))


def _name(fn):
    return getattr(fn, "__name__", None) or repr(fn)


def _structure(tpl):
    """A result's template (``session._flatten``) without its values: what must match."""
    kind = tpl[0]
    if kind == "T":
        return ("T",)
    if kind == "V":
        v = tpl[1]
        return ("V", v if isinstance(v, (int, float, str, bool, type(None))) else type(v))
    if kind == "C":
        return ("C", _structure(tpl[2]))
    if kind == "D":
        return ("D", tpl[1], tuple((k, _structure(v)) for k, v in tpl[2]))
    return (kind, tpl[1], tuple(_structure(o) for o in tpl[2]))


def _close_enough(a, b):
    """A replayed value against eager's: equal where not finite, else within 1e-10 of the
    largest magnitude (libm and a replay's order of summation differ in the last bits)."""
    if a.dtype.kind not in "fc":
        return bool(np.array_equal(a, b))
    fin = np.isfinite(b)
    if not np.array_equal(fin, np.isfinite(a)) or not np.array_equal(a[~fin], b[~fin], equal_nan=True):
        return False
    if not fin.any():
        return True
    scale = float(np.max(np.abs(b[fin])))
    return bool(np.all(np.abs(a[fin] - b[fin]) <= 1e-10 * scale))


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


def compile(fn=None, *, strict=False, log=False, fuse="auto", check=0):
    """Record ``fn`` at its first call with each signature and replay that tape
    afterwards (see ``tapegrad.replay``).  ``strict=True``: raise
    ``TapeDivergence`` when Python would take another path, or a value ``fn`` reads
    from outside its arguments changed, instead of recording again.  ``log=True``:
    print a line to stderr at each recording.  ``fuse``: compile a recorded tape of
    large arrays into fused loops (``tapegrad.replay.fuse``): ``"auto"`` (the
    default) in the background once it has been replayed twice, kept when it is
    faster; True at its first replay; False never.  ``check=N``: call ``fn`` eagerly
    as well at every N-th replay and raise ``TapeDivergence`` when the results differ
    (while developing: a replay costs an eager call more then)."""
    if fn is None:
        return lambda f: compile(f, strict=strict, log=log, fuse=fuse, check=check)
    if not callable(fn):        # (at the call to compile, as torch.compile's assertion)
        raise AssertionError("A callable function is expected, but %s is provided." % type(fn))
    compiled = Compiled(fn, strict, log, fuse, check)
    for cls, wrap in WRAPPERS:
        if isinstance(fn, cls):
            return wrap(fn, compiled)
    return compiled


# (class, wrap): ``tg.compile`` of an instance of ``cls`` returns ``wrap(instance,
# Compiled)``.  The layers above replay register theirs (``tapegrad/__init__.py``:
# nn's Module is wrapped in an OptimizedModule, as torch.compile does).
WRAPPERS = []


def register_wrapper(cls, wrap):
    WRAPPERS.append((cls, wrap))
