"""fuse="auto": the fused loops compiled in a thread or in a subprocess, beside the replays.

    python benchmarks/fuse_background.py [--quick] [--repeat N] [--only rosen,lj]
        [--strategies thread,subprocess,fork] [--cache DIR] [--json PATH] [--table PATH]

Manual only (not in the tests, not in asv).  Each measurement is a new process on a
new NUMBA_CACHE_DIR: a copy of a cache that ``python -m tapegrad warmup`` filled
(``--cache DIR``: that one, warmed first when its stamp is not valid; default: a
temporary one, about two minutes to warm), so tapegrad's own kernels load from the
cache and only the fused loops are cold.  The process loads the kernels, times
unfused replays of the workload (``tg.compile(fn)``, value and gradient) with
nothing else running, then replays ``tg.compile(fn, fuse="auto")`` until the fused
loops are in use, and a few more.

Strategies:
  thread      tapegrad's ``fuse.consider``: ``FusedProgram.compile()`` in a thread of
              the replaying process (Numba's compiler is Python: it shares the GIL)
  subprocess  a prototype here (``fuse.consider`` with the thread replaced): the
              generated source written where ``compile()`` writes it, then
              ``sys.executable -c ...`` imports it and compiles every loop for the
              signatures ``compile()`` uses (cache=True); when it has exited, the next
              replay loads the loops from Numba's cache (``P.compile()``, cached=True)
              and switches as the thread's result would
  fork        the same with ``os.fork()`` for the new interpreter: the child, which
              has tapegrad and Numba loaded, runs ``P.compile()`` and exits (POSIX
              only, and unsafe in a process whose other threads hold locks)

Workloads (as in benchmarks/compare.py): rosen (10^6 elements) and lj (384 atoms).
Strategies alternate within each repetition, the order reversed every other one;
the table shows medians over the repetitions.  Columns, per strategy and workload:
  unfused ms     median replay with no compile going on
  during med/max median and longest replay while the compile runs
  slowed s       what the replays during the compile and the one that switches took
                 beyond as many unfused replays with no compile going on
  ready s        from the compile's start to the end of the replay that switches
  behind s       ready s less as many fused replays as ran meanwhile: how far a long
                 loop is behind one whose fused loops were there at once (the
                 difference between two strategies: how much sooner one finishes)
  switch ms      that replay (the check of the fused replay against the unfused one,
                 and for the subprocess the load from the cache)
  fused ms       median replay afterwards
  compile s      the compile itself (thread: compile(); subprocess: the child's loops)
  start s        subprocess: interpreter start, importing tapegrad and Numba (fork: the fork)
  load ms        subprocess and fork: compile() in the parent, from the cache
  others         cores other processes kept busy meanwhile (/proc/stat less this
                 benchmark's own CPU time); on a shared machine a measurement above
                 --max-others is done again, and none is meaningful without a free core
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATEGIES = ("thread", "subprocess", "fork")
NAMES = ("rosen", "lj")

# the child of the subprocess strategy: argv = path of the generated source, module
# name, JSON list of (loop name, signature); prints its timings as JSON
CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import importlib.util
from tapegrad import _jit
_jit.load()
t1 = time.perf_counter()
path, name, sigs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spec = importlib.util.spec_from_file_location(name, path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
sys.modules[name] = mod     # (as compile() does: else Numba pickles the loops' globals as a '<dynamic>' module)
t2 = time.perf_counter()
for fn, sig in sigs:
    getattr(mod, fn).compile(sig)
t3 = time.perf_counter()
print(json.dumps({"t0": t0, "import_s": t1 - t0, "module_s": t2 - t1, "compile_s": t3 - t2}))
"""


# -- in the measured process -------------------------------------------------------
def _workload(name):
    """(fn, make_args): the compiled body and a maker of its arguments (leaf first)."""
    import numpy as np
    import tapegrad as tg
    sys.path.insert(0, HERE)
    from benchmarks import compare
    rng = np.random.default_rng(0)
    if name == "rosen":
        x = compare.rosen_inputs(rng)["x"]
        return compare._rosen_body, lambda: (tg.tensor(x, requires_grad=True),)
    inp = compare.lattice_inputs(rng)
    eye = tg.tensor(inp["eye"])
    return compare._lj_body, lambda: (tg.tensor(inp["pos"], requires_grad=True), eye)


def _step(f, make_args):
    args = make_args()
    loss = f(*args)
    loss.backward()
    return float(loss.item()), args[0].grad


def _recording(f):
    return [R for entry in f.cache.values() if not isinstance(entry, str) for R in entry][0]


class _Process:
    """``fuse.consider`` with the background thread replaced by a process that fills
    Numba's cache (``fork``: a fork of this one, which has tapegrad and Numba loaded;
    else a new interpreter); the replay after it exits loads the loops and switches."""

    def __init__(self, events, fork=False):
        from tapegrad.replay import fuse
        self.fuse, self.events, self.fork, self.jobs = fuse, events, fork, {}

    def __call__(self, R, arrays, vals):
        fuse = self.fuse
        if R.fuse is True:
            return fuse.try_fuse(R, arrays, vals, R.fuse_name)
        R.unfused_replays += 1
        if R.fuse_building:
            proc, P = self.jobs[id(R)]
            if proc.poll() is None:
                return
            R.fuse_building = False
            self.events["child_end"] = time.perf_counter()      # (seen: at most a replay late)
            out, err = proc.result()
            if proc.returncode != 0:
                R.fused, R.fuse_why = False, "the compile process failed: %s" % err[-300:]
                return
            self.events["child"] = json.loads(out.strip().splitlines()[-1])
            try:
                P.compile()         # (from the cache the child filled)
            except Exception as e:
                R.fused, R.fuse_why = False, "its fused loops did not load: %s" % e
                return
            fuse.try_fuse(R, arrays, vals, R.fuse_name, P)
            return
        if R.unfused_replays < fuse.AUTO_AFTER:
            return
        if sum(v.size for v in vals if hasattr(v, "size")) < fuse.AUTO_ELEMENTS:
            R.fused, R.fuse_why = False, "its values are small (the compiled forwards serve it)"
            return
        try:
            P = fuse.FusedProgram(R, fuse.value_metas(vals))
        except fuse.NotFusable as e:
            R.fused, R.fuse_why = False, str(e)
            return
        self.events["start"] = time.perf_counter()
        proc = _Forked(P) if self.fork else _Spawned(P)
        self.events["launched"] = time.perf_counter()
        self.jobs[id(R)] = (proc, P)
        R.fuse_building = True


class _Spawned:
    """``sys.executable -c CHILD``: imports ``P``'s source and compiles its loops."""

    def __init__(self, P):
        path, name = _write_source(P)
        sigs = []
        for gi, g in enumerate(P.groups):
            for kind, n in (("fwd", len(g.ext) + len(g.outs)), ("rev", 2 * len(g.ext) + len(g.outs))):
                sigs.append(("%s_%d" % (kind, gi), "int64(%s)" % ", ".join(["float64[::1]"] * n)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        self.err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, path, name, json.dumps(sigs)], env=env,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True)

    def poll(self):
        return self.proc.poll()

    @property
    def returncode(self):
        return self.proc.returncode

    def result(self):
        out = self.proc.stdout.read()
        self.proc.stdout.close()
        self.err.seek(0)
        return out, self.err.read()


class _Forked:
    """``os.fork()``: the child runs ``P.compile()`` (it fills the cache) and exits."""

    def __init__(self, P):
        r, w = os.pipe()
        t0 = time.perf_counter()
        self.pid = os.fork()
        if self.pid == 0:
            status = 1
            try:
                os.close(r)
                t1 = time.perf_counter()
                P.compile()
                os.write(w, json.dumps({"t0": t1, "import_s": 0.0, "module_s": 0.0,
                                        "compile_s": time.perf_counter() - t1}).encode())
                status = 0
            finally:
                os._exit(status)
        os.close(w)
        self.r, self.returncode, self.fork_s = r, None, time.perf_counter() - t0

    def poll(self):
        if self.returncode is None:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(st)
        return self.returncode

    def result(self):
        chunks = []
        while True:
            b = os.read(self.r, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(self.r)
        return b"".join(chunks).decode(), ""


def _write_source(P):
    """Where and under which module name ``FusedProgram.compile`` puts ``P``'s source."""
    from tapegrad.kernels import codegen
    path = os.path.join(codegen._writable_dir(), "fused_%s.py" % P.digest)
    if not os.path.exists(path):
        tmp = path + ".%d.tmp" % os.getpid()
        with open(tmp, "w") as f:
            f.write(P.source)
        os.replace(tmp, path)
    return path, "tapegrad_fused_%s" % P.digest


def measure(name, strategy, quick):
    """One measurement in this process: a dict of figures (seconds)."""
    import tapegrad as tg
    from tapegrad import _jit
    from tapegrad.replay import fuse, recording
    clock = time.perf_counter
    _jit.load()
    fn, make_args = _workload(name)
    events = {}
    compile_ = fuse.FusedProgram.compile
    try_fuse = fuse.try_fuse

    def timed_compile(self):
        t0 = clock()
        try:
            return compile_(self)
        finally:
            events.setdefault("compiles", []).append((t0, clock()))

    def timed_try_fuse(*a, **k):
        t0 = clock()
        try:
            return try_fuse(*a, **k)
        finally:
            events["try_fuse_s"] = clock() - t0
    fuse.FusedProgram.compile, fuse.try_fuse = timed_compile, timed_try_fuse
    if strategy in ("subprocess", "fork"):
        recording._consider_fusing = _Process(events, fork=strategy == "fork")

    # unfused replays, nothing else running
    plain = tg.compile(fn)
    for _ in range(3):
        _step(plain, make_args)
    base = []
    load = os.getloadavg()[0]
    n_base = 8 if quick else 20
    for _ in range(n_base):
        t = clock()
        _step(plain, make_args)
        base.append(clock() - t)

    auto = tg.compile(fn, fuse="auto")
    calls = []          # (start, seconds, state after the call)
    after, deadline = 0, clock() + 600
    while after < (4 if quick else 10) and clock() < deadline:
        t = clock()
        _step(auto, make_args)
        dt = clock() - t
        R = _recording(auto)
        state = ("fused" if R.fused else "refused" if R.fused is False
                 else "building" if R.fuse_building or R.fused_pending is not None else "unfused")
        calls.append((t, dt, state))
        if state in ("fused", "refused"):
            after += 1
    R = _recording(auto)
    if not R.fused:
        return {"error": "not fused: %s" % R.fuse_why}
    for _ in range(n_base):         # (as many again, after: the machine may have changed meanwhile)
        t = clock()
        _step(plain, make_args)
        base.append(clock() - t)
    if strategy == "thread":
        start, end = events["compiles"][0]
        compile_s = end - start
    else:
        start = events["start"]
        compile_s = events["child"]["compile_s"]
    k = next(i for i, c in enumerate(calls) if c[2] == "building")
    s = next(i for i, c in enumerate(calls) if c[2] in ("fused", "refused"))
    during = [c[1] for c in calls[k + 1:s]]
    fused = [c[1] for c in calls[s + 1:]]
    unfused = statistics.median(base)
    out = {"unfused_s": unfused, "unfused_max_s": max(base),
           "slowed_s": sum(during) + calls[s][1] - (len(during) + 1) * unfused,
           "during_n": len(during),
           "during_med_s": statistics.median(during) if during else None,
           "during_max_s": max(during) if during else None,
           "ready_s": calls[s][0] + calls[s][1] - start,
           "switch_s": calls[s][1], "check_s": events.get("try_fuse_s"),
           "fused_s": statistics.median(fused), "compile_s": compile_s,
           "loops": 2 * len(R.fused.groups), "cached": R.fused.stats.get("cached"),
           "switch_interval_s": sys.getswitchinterval(), "load_avg": load}
    if strategy != "thread":
        ch = events["child"]
        out.update(start_s=ch["t0"] - events["start"] + ch["import_s"] + ch["module_s"],
                   spawn_s=events["launched"] - events["start"],
                   child_total_s=events["child_end"] - events["start"],
                   load_s=events["compiles"][0][1] - events["compiles"][0][0])
    return out


# -- the driver ----------------------------------------------------------------------
def _env(cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, TAPEGRAD_BACKGROUND_COMPILE="0", TAPEGRAD_QUIET="1")
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        env[v] = "1"
    env["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return env


def _warm(cache):
    """``cache`` holding tapegrad's kernels (``python -m tapegrad warmup`` unless its stamp is valid)."""
    env = _env(cache)
    ok = subprocess.run([sys.executable, "-c", "import sys; from tapegrad import _background; "
                         "sys.exit(0 if _background.stamp_valid() else 1)"], env=env, cwd=HERE).returncode == 0
    if not ok:
        print("warming tapegrad's kernels into %s (python -m tapegrad warmup) ..." % cache, flush=True)
        subprocess.run([sys.executable, "-m", "tapegrad", "warmup"], env=env, cwd=HERE, check=True,
                       stdout=subprocess.DEVNULL)


def _busy():
    """(busy, total) CPU seconds of the machine so far (Linux's /proc/stat; None elsewhere)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(v) - v[3] - v[4]) / hz, sum(v) / hz


def _others(seconds=1.0):
    """Cores kept busy by other processes over the next ``seconds``."""
    a = _busy()
    time.sleep(seconds)
    b = _busy()
    return None if a is None else (b[0] - a[0]) / seconds


def _wait_idle(limit_s, most=0.3):
    """Wait (at most ``limit_s``) until other processes keep at most ``most`` of a core busy."""
    t_end = time.monotonic() + limit_s
    while True:
        o = _others()
        if o is None or o <= most or time.monotonic() > t_end:
            return o


def _run(name, strategy, template, quick):
    d = tempfile.mkdtemp(prefix="fusebg-nbc-")
    try:
        shutil.copytree(template, d, dirs_exist_ok=True)
        for f in os.listdir(d):
            if f.endswith(".lock"):
                os.remove(os.path.join(d, f))
        own0, busy0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), _busy(), time.monotonic()
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name, strategy]
                           + (["--quick"] if quick else []), env=_env(d), cwd=HERE, capture_output=True, text=True)
        own1, busy1, wall = resource.getrusage(resource.RUSAGE_CHILDREN), _busy(), time.monotonic() - t0
        if p.returncode != 0:
            return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "status %d" % p.returncode}
        r = json.loads(p.stdout.strip().splitlines()[-1])
        if busy0 is not None:       # (the cores other processes kept busy meanwhile)
            own = own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime
            r["others"] = max(0.0, (busy1[0] - busy0[0] - own) / wall)
        return r
    finally:
        shutil.rmtree(d, ignore_errors=True)


COLUMNS = [("unfused ms", "unfused_s", 1e3), ("during med", "during_med_s", 1e3), ("during max", "during_max_s", 1e3),
           ("n", "during_n", 1), ("slowed s", "slowed_s", 1), ("ready s", "ready_s", 1),
           ("behind s", "behind_s", 1), ("switch ms", "switch_s", 1e3),
           ("fused ms", "fused_s", 1e3), ("compile s", "compile_s", 1), ("start s", "start_s", 1),
           ("load ms", "load_s", 1e3), ("others", "others", 1)]


def _median(rows, key):
    if key == "behind_s":
        v = [r["ready_s"] - (r["during_n"] + 1) * r["fused_s"] for r in rows]
        return statistics.median(v) if v else None
    v = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(v) if v else None


def table(results):
    head = "%-10s %-10s " % ("(runs)", "") + " ".join("%10s" % c for c, _, _ in COLUMNS)
    lines = [head]
    for name in NAMES:
        for strategy in STRATEGIES:
            rows = [r for r in results if r["name"] == name and r["strategy"] == strategy and "error" not in r]
            if not rows:
                continue
            name_col = "%s (%d)" % (name, len(rows))
            cells = []
            for _, key, scale in COLUMNS:
                m = _median(rows, key)
                cells.append("%10s" % ("-" if m is None else ("%.0f" % m if scale == 1 and key == "during_n"
                                                              else "%.3g" % (m * scale))))
            lines.append("%-10s %-10s " % (name_col, strategy) + " ".join(cells))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Columns and method: see the module docstring.")
    ap.add_argument("--quick", action="store_true", help="one repetition, fewer replays timed")
    ap.add_argument("--repeat", type=int, default=None, help="repetitions (default 3, --quick 1)")
    ap.add_argument("--only", default=",".join(NAMES), help="workloads, comma-separated (rosen,lj)")
    ap.add_argument("--cache", default=None,
                    help="a Numba cache dir warmed with tapegrad's kernels, copied for each measurement "
                         "(warmed first when needed; default: a temporary one)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated (thread,subprocess,fork)")
    ap.add_argument("--wait-idle", type=float, default=120.0, metavar="S",
                    help="before each measurement, wait up to S seconds for other processes to leave the "
                         "cores idle (default 120; 0: no wait)")
    ap.add_argument("--max-others", type=float, default=0.5, metavar="CORES",
                    help="a measurement during which other processes kept more cores busy is done again "
                         "(at most --retries times; default 0.5)")
    ap.add_argument("--retries", type=int, default=3, help="(default 3)")
    ap.add_argument("--json", default=None, help="write every measurement there")
    ap.add_argument("--table", nargs="+", default=None, metavar="JSON",
                    help="only print the table of --json files (measurements above --max-others left out)")
    ap.add_argument("--worker", nargs=2, metavar=("WORKLOAD", "STRATEGY"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(measure(args.worker[0], args.worker[1], args.quick)))
        return
    if args.table:
        results = []
        for path in args.table:
            with open(path) as f:
                results += json.load(f)
        kept = [r for r in results if r.get("others") is None or r["others"] <= args.max_others]
        print("%d measurements, %d left out (other processes kept more than %g cores busy)"
              % (len(results), len(results) - len(kept), args.max_others))
        print(table(kept))
        return
    names = [n for n in args.only.split(",") if n]
    strategies = tuple(n for n in args.strategies.split(",") if n)
    bad = sorted(set(names) - set(NAMES)) + sorted(set(strategies) - set(STRATEGIES))
    if bad:
        ap.error("unknown workload or strategy %s" % ", ".join(bad))
    repeat = args.repeat or (1 if args.quick else 3)
    own = args.cache is None
    template = tempfile.mkdtemp(prefix="fusebg-template-") if own else os.path.abspath(args.cache)
    results = []
    try:
        _warm(template)
        for rep in range(repeat):
            order = strategies if rep % 2 == 0 else strategies[::-1]
            for name in names:
                for strategy in order:
                    for attempt in range(1 + args.retries):
                        if args.wait_idle > 0:
                            _wait_idle(args.wait_idle)
                        r = _run(name, strategy, template, args.quick)
                        if r.get("others") is None or r["others"] <= args.max_others or "error" in r:
                            break
                        print("%d %-6s %-10s other processes kept %.2f cores busy: again"
                              % (rep, name, strategy, r["others"]), flush=True)
                    r.update(name=name, strategy=strategy, rep=rep)
                    results.append(r)
                    print("%d %-6s %-10s %s" % (rep, name, strategy, r.get("error") or
                                                "ready %.2f s, during %s ms (unfused %.1f ms), others %s"
                                                % (r["ready_s"], "-" if r["during_med_s"] is None
                                                   else "%.1f" % (1e3 * r["during_med_s"]), 1e3 * r["unfused_s"],
                                                   "?" if r.get("others") is None else "%.2f" % r["others"])),
                          flush=True)
    finally:
        if own:
            shutil.rmtree(template, ignore_errors=True)
    import numba
    import numpy
    print("\nmedians of %d repetition(s); Python %s, NumPy %s, Numba %s, %d CPUs, switch interval %.0f ms"
          % (repeat, sys.version.split()[0], numpy.__version__, numba.__version__, os.cpu_count(),
             1e3 * sys.getswitchinterval()))
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
