"""``tg.profile()``: where a block of tapegrad code spends its time and tape.

    with tg.profile() as p:
        loss = model(x).sum()
        loss.backward()
    print(p)            # or p.report()

reports, for the operations recorded inside the block: how many tape entries of
each opcode (``p.counts``, name -> count; ``p.entries`` in all, on ``p.tapes``
tapes), the block's wall time split into recording (everything but backward:
``p.record_s``) and backward (``p.backward_s``, over ``p.backwards`` calls), the
part of backward spent inside the compiled reverse sweep (``p.sweep_s``), the time
inside the loops of fused replays, forward and reverse (``p.fused_s`` over
``p.fused_runs`` runs: ``tg.compile(fn, fuse=...)``, which adds them into the
profiles of ``engine.PROFILERS``), and the
bytes of the arrays the tapes kept for backward (``p.saved_bytes``: the largest
amount seen, taken before each backward and at the end of the block).

How it sees the entries: the tape current on entry is counted from its length at
entry, and every tape created inside the block is counted from its start.  Tapes
are counted incrementally (each entry once) before each backward, whenever a new
tape starts (the old one may be freed soon after), and at the end of the block,
so a tape freed inside the block is still counted up to its last entries.
Backward calls reach the profiler through one check in
``tapegrad.autograd.engine.run_backward`` (a list that is empty when no profile is
active), so recording and backward cost nothing extra when profiling is off.
While a block is active, ``tapegrad.core.tape._LIVE`` is wrapped to see new tapes, the
compiled sweep (whichever variant ``kernels.sweep.run_for`` picks) is timed, and so is the differentiable
reverse (``create_graph=True``); everything is restored on exit.  Tapes of other
threads created during the block are counted too.  Profiles nest.
"""
import re
import weakref
from time import perf_counter

import numpy as np

from . import _jit
from .core import tape as _tp
from .autograd import differentiable as _diff
from .autograd import engine as _engine
from .kernels import sweep as _sweep
from .core.registry import OP_NAMES

_ACTIVE = []        # active profile objects, outermost first
_saved = {}         # what was patched while any profile is active


class _Watch:
    """Stands in for ``tape._LIVE`` while profiling: tells the profiles about each new tape."""

    def __init__(self, base):
        self.base = base

    def add(self, T):
        self.base.add(T)
        for p in list(_ACTIVE):
            p._new_tape(T)

    def __iter__(self):
        return iter(self.base)

    def __len__(self):
        return len(self.base)

    def __getattr__(self, name):
        return getattr(self.base, name)


def _next_tape_id():
    """The id the next tape will get, without taking it from the counter."""
    m = re.search(r"\d+", repr(_tp._ids))
    return int(m.group()) if m else 0


def _install():
    # profiles measure the compiled sweep: load it now (outside the timings) rather
    # than interpret the first backward passes (see autograd.engine)
    _jit.load()
    _saved["live"] = _tp._LIVE
    _tp._LIVE = _Watch(_tp._LIVE)
    run_for, diff_run = _sweep.run_for, _diff.run_backward
    _saved["run_for"], _saved["diff"] = run_for, diff_run

    def timed_run_for(fams):
        run = run_for(fams)

        def timed_run(*args):
            t = perf_counter()
            try:
                return run(*args)
            finally:
                dt = perf_counter() - t
                for p in _ACTIVE:
                    p.sweep_s += dt
                    p.sweeps += 1
        return timed_run

    def timed_diff(*args, **kw):
        return _backward(diff_run, args, kw)

    _sweep.run_for = timed_run_for
    _diff.run_backward = timed_diff


def _uninstall():
    _tp._LIVE = _saved.pop("live")
    _sweep.run_for = _saved.pop("run_for")
    _diff.run_backward = _saved.pop("diff")


def _backward(fn, args, kw):
    """Run a backward for every active profile: count the tapes first (the backward
    may free what they saved), then time it."""
    ps = list(_ACTIVE)
    t0 = perf_counter()
    for p in ps:
        p._snapshot()
    t1 = perf_counter()
    try:
        return fn(*args, **kw)
    finally:
        t2 = perf_counter()
        for p in ps:
            p.backward_s += t2 - t1
            p.backwards += 1
            p._overhead_s += t1 - t0


class profile:
    """Context manager: per-opcode tape entries, record vs. backward time, tape
    length and saved bytes of the code run inside it.  See the module docstring."""

    def __init__(self):
        self.counts = {}            # op name -> entries recorded in the block
        self.entries = 0            # entries recorded in the block
        self.tapes = 0              # tapes that received entries in the block
        self.saved_bytes = 0        # bytes kept for backward by the block's entries (largest seen)
        self.wall_s = 0.0           # the block's wall time (less the profiler's own work)
        self.backward_s = 0.0       # inside backward / autograd.grad
        self.sweep_s = 0.0          # inside the compiled reverse sweep (part of backward_s)
        self.record_s = 0.0         # wall_s - backward_s: recording and the user's own Python
        self.backwards = 0          # backward calls
        self.sweeps = 0             # calls of the compiled sweep
        self.fused_s = 0.0          # inside the loops of fused replays, forward and reverse
        self.fused_runs = 0         # their runs
        self._tracked = {}          # tape id -> (weakref to tape, first slot of the block), while alive
        self._start = {}            # tape id -> first slot of the block
        self._seen = {}             # tape id -> entries counted so far
        self._codes = {}            # opcode -> count
        self._overhead_s = 0.0
        self._active = False

    # -- context manager -------------------------------------------------------
    def __enter__(self):
        if self._active:
            raise RuntimeError("this profile is already active")
        self._active = True
        T = _tp.state().tape
        if T is not None:
            self._track(T, T.n)
        self._first_id = _next_tape_id()
        if not _ACTIVE:
            _install()
        _ACTIVE.append(self)
        _engine.PROFILERS.append(self)
        self._t0 = perf_counter()
        return self

    def __exit__(self, *exc):
        t = perf_counter()
        _engine.PROFILERS.remove(self)
        _ACTIVE.remove(self)
        if not _ACTIVE:
            _uninstall()
        self._active = False
        # tapes created in the block that no hook saw (other threads), then a last count
        for T in list(_tp._LIVE):
            if T.id & _tp.SERIAL_MASK >= self._first_id and T.id not in self._tracked:     # (serials: any thread's)
                self._track(T, 0)
        self._snapshot()
        self.wall_s += t - self._t0 - self._overhead_s
        self.record_s = max(self.wall_s - self.backward_s, 0.0)
        self._overhead_s = 0.0
        return False

    # -- hooks -----------------------------------------------------------------
    def backward(self, fn, seeds, retain_graph, targets, accumulate):
        """Called by ``engine.run_backward`` while profiles are active."""
        return _backward(fn, (seeds, retain_graph, targets, accumulate), {})

    def _new_tape(self, T):
        t = perf_counter()
        self._snapshot()            # the previous tapes may be freed soon
        self._track(T, 0)
        self._overhead_s += perf_counter() - t

    def _track(self, T, start):
        if T.id not in self._tracked:
            self._tracked[T.id] = (weakref.ref(T), start)
            self._seen[T.id] = self._start[T.id] = start

    def _snapshot(self):
        """Count the entries appended since the last snapshot; update saved bytes."""
        saved, seen_arrays, dead = 0, set(), []
        for tid, (ref, start) in self._tracked.items():
            T = ref()
            if T is None:
                dead.append(tid)
                continue
            n, done = T.n, self._seen[tid]
            if n > done:
                ints, _ = T.arrays()
                codes, k = np.unique(ints[done:n, _tp.OP], return_counts=True)
                del ints
                for c, m in zip(codes.tolist(), k.tolist()):
                    self._codes[c] = self._codes.get(c, 0) + m
                self._seen[tid] = n
            vals = getattr(T, "vals", None) or ()     # (a replayed tape may be set up after its creation)
            for s in range(start, min(n, len(vals))):
                v = vals[s]
                if v is not None and id(v) not in seen_arrays:
                    seen_arrays.add(id(v))
                    saved += v.nbytes
        for tid in dead:
            del self._tracked[tid]     # counted up to its last snapshot
        self.saved_bytes = max(self.saved_bytes, saved)
        self.counts = {OP_NAMES.get(c, "op%d" % c): m
                       for c, m in sorted(self._codes.items(), key=lambda cm: (-cm[1], cm[0]))}
        self.entries = sum(self._codes.values())
        self.tapes = sum(1 for tid, n in self._seen.items() if n > self._start[tid])

    # -- report ----------------------------------------------------------------
    def report(self):
        """A small table: times, tape size, entries per opcode."""
        lines = [
            "tapegrad profile: %.6f s = record %.6f s + backward %.6f s (%d call%s; compiled sweep %.6f s in %d run%s)"
            % (self.wall_s, self.record_s, self.backward_s, self.backwards, "" if self.backwards == 1 else "s",
               self.sweep_s, self.sweeps, "" if self.sweeps == 1 else "s"),
            "tape: %d entries on %d tape%s, %s saved for backward (largest seen)"
            % (self.entries, self.tapes, "" if self.tapes == 1 else "s", _bytes(self.saved_bytes)),
        ]
        if self.fused_runs:
            lines.append("fused replays: %.6f s in their loops (%d run%s, forward and reverse)"
                         % (self.fused_s, self.fused_runs, "" if self.fused_runs == 1 else "s"))
        if self.counts:
            w = max(8, max(len(k) for k in self.counts))
            lines.append("%-*s %8s %7s" % (w, "op", "entries", "share"))
            for k, m in self.counts.items():
                lines.append("%-*s %8d %6.1f%%" % (w, k, m, 100.0 * m / self.entries))
        return "\n".join(lines)

    __str__ = report

    def __repr__(self):
        return "<tapegrad.profile entries=%d record_s=%.6f backward_s=%.6f>" % (
            self.entries, self.record_s, self.backward_s)


def _bytes(b):
    for unit in ("B", "KiB", "MiB"):
        if b < 1024:
            return ("%d %s" % (b, unit)) if unit == "B" else ("%.1f %s" % (b, unit))
        b /= 1024.0
    return "%.1f GiB" % b
