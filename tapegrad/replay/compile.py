"""``tg.compile``: call a function, replaying its recorded tape when the arguments'
signature and every guard match a recording."""
import sys
import warnings

import numpy as np

from ..core import tape as _tp
from ..core.tensor import Tensor
from .recording import NotReproduced, _record_call
from .session import (NotReplayable, TapeDivergence, _Rerecord, _Stale, _arg_key, _is_array_arg, _is_grad_leaf,
                      _real, propagates)

# -- tg.compile ----------------------------------------------------------------------
class CompileStats:
    """``errors``: replays that raised, after which the call was recorded again."""
    __slots__ = ("calls", "recordings", "replays", "divergences", "eager", "errors")

    def __init__(self):
        self.calls = self.recordings = self.replays = self.divergences = self.eager = self.errors = 0

    def __repr__(self):
        return ("CompileStats(calls=%d, recordings=%d, replays=%d, divergences=%d, eager=%d, errors=%d)"
                % (self.calls, self.recordings, self.replays, self.divergences, self.eager, self.errors))


MAX_TAPES = 8           # recordings kept per signature (one per path through the guards)
MAX_DIVERGENCES = 64    # a signature that diverged this often without a replay runs eagerly


class Compiled:
    """``tg.compile(fn)``: calls ``fn``, replaying its recorded tape when the
    arguments' signature and every guard match a recording."""

    def __init__(self, fn, strict=False, log=False, fuse="auto"):
        _check_fuse(fuse)
        self.fn = fn
        self.fuse = fuse
        self.strict = strict
        self.log = log
        self.stats = CompileStats()
        self.cache = {}         # signature -> [Recording] (most recent first) or a reason string
        self.why = {}           # signature -> why it runs eagerly
        self.replay_error = None    # the last exception a replay raised (then the call was recorded again)
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
                    keys.append(("T", d.shape, d.dtype.num, a._requires_grad, _is_grad_leaf(a)))
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
        diverged = failed = None
        check_now = False
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
                    except _Rerecord as e:
                        entry.remove(R)
                        check_now = isinstance(e, _Stale)
                        break
                    except NotReproduced as e:      # (the first replay's check: never replayed)
                        entry.remove(R)
                        self.why[key] = str(e)
                        if not entry:
                            self.cache[key] = str(e)
                        st.eager += 1
                        return self.fn(*args, **kwargs)
                    except Exception as e:      # (a path the recording did not take may fail: record anew)
                        if propagates(e):
                            raise
                        bad = failed = ("the replay", None, None)
                        self.replay_error = "%s: %s" % (type(e).__name__, e)
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
        out, R, why = _record_call(self.fn, args, kwargs, check_now=check_now, fuse=self.fuse)
        st.recordings += 1
        if failed is not None:
            # the function itself ran: the replay's failure was the library's (or a path the
            # guards did not see coming), worth knowing about rather than hidden by the re-recording
            st.errors += 1
            if st.errors == 1:
                warnings.warn("tapegrad.compile: replaying %s raised %s; it was recorded again "
                              "(compiled.stats.errors counts these, compiled.replay_error has the last)"
                              % (getattr(self.fn, "__name__", self.fn), self.replay_error),
                              RuntimeWarning, stacklevel=2)
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

    def fusion(self):
        """For every recording kept: what fusion did with it (``Recording.fusion``):
        groups, entries fused, bytes of intermediates not written, compile seconds
        and whether Numba's cache served it, or why it is not fused."""
        return [R.fusion() for entry in self.cache.values() if not isinstance(entry, str) for R in entry]


def _check_fuse(fuse):
    if fuse not in (False, True, "auto"):
        raise ValueError("fuse must be False, True or 'auto', got %r" % (fuse,))


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


def compile(fn=None, *, strict=False, log=False, fuse="auto"):
    """Record ``fn`` at its first call with each signature and replay that tape
    afterwards (see ``tapegrad.replay``).  ``strict=True``: raise
    ``TapeDivergence`` when Python would take another path, instead of recording
    again.  ``log=True``: print a line to stderr at each recording.
    ``fuse``: compile a recorded tape of large arrays into fused loops
    (``tapegrad.replay.fuse``): ``"auto"`` (the default) in the background once
    it has been replayed twice, kept when it is faster; True at its first replay;
    False never."""
    if fn is None:
        return lambda f: compile(f, strict=strict, log=log, fuse=fuse)
    compiled = Compiled(fn, strict, log, fuse)
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
