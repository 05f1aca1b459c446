"""The compiled kernels, compiled and loaded without making the program wait.

When a backward first wants the compiled kernels (``autograd.engine``: interpreting
has cost about what loading them would, or the tape is long) and Numba's disk cache
holds no complete compile for this machine, a second process compiles them
(``python -m tapegrad warmup --background``) while this one goes on interpreting
backward passes and replaying tapes in NumPy.  When that process is done, a thread
here loads the kernels from the cache (importing Numba and loading a kernel each
take long enough to be felt), and the backward passes after that use them.

A finished compile is recorded by a stamp next to the cache (``STAMP``): the key
of what it was compiled for (tapegrad's kernel sources, Numba, Python, the CPU,
the Numba settings that change code), the warm-up groups done, and the signatures
each kernel was compiled for, which the loading thread loads one by one.  A lock
file beside it makes concurrent processes compile once: a second warm-up process
waits for the first and then finds the stamp.  Numba writes each cache file
atomically, so a compile process killed midway leaves complete files and no stamp:
the next run compiles what is missing.

``TAPEGRAD_BACKGROUND_COMPILE=0`` compiles in the foreground instead, at the first
backward that wants the kernels (the test suite runs so); ``TAPEGRAD_QUIET=1``
silences the two notices on stderr.
"""
import os
import pickle
import sys
import threading
import time
import warnings

from . import _jit

ENABLED = os.environ.get("TAPEGRAD_BACKGROUND_COMPILE", "1") != "0" and os.name == "posix"
QUIET = os.environ.get("TAPEGRAD_QUIET", "") not in ("", "0")
POLL_S = 0.1            # at most this often, a look at the compile process
STAMP = "tapegrad-kernels.ready"
LOCK = "tapegrad-kernels.lock"
LOG = "tapegrad-warmup.log"
GROUPS = ("select", "elementwise", "more elementwise", "reductions", "indexing/shape", "matmul", "replay",
          "sweep variants")
ONLY = None             # the warm-up groups a background compile does (None: all; tests narrow it)

_phase = [None]         # None, "compiling" (the child runs), "loading" (the thread runs), "failed"
_child = [None]
_next_poll = [0.0]
_LOOKING = threading.Lock()     # one thread at a time looks at the compile's progress


def _after_fork_in_child():
    # a forked child has neither the compile process (its parent's child) nor the loading
    # thread: it starts over, and the lock file keeps it from compiling a second time
    if _phase[0] in ("compiling", "loading"):
        _phase[0] = None
    _child[0] = None
    _next_poll[0] = 0.0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
_started = [0.0]
_key = []


def notice(msg):
    if not QUIET:
        print("tapegrad: " + msg, file=sys.stderr, flush=True)


INTERPRET = ["auto"]        # the engine's TAPEGRAD_INTERPRET mode (autograd.engine puts its own list here)


def deferring():
    """Whether the kernels, not ready yet, are to come from the background (so a
    replay keeps to NumPy rather than compile its forward kernels now)."""
    if not ENABLED or _phase[0] == "failed":
        return False
    return INTERPRET[0] == "auto"


def request():
    """Called by a backward that wants the compiled kernels while they are not
    ready; returns whether to use them now (and compile or load them in the
    foreground, as with ``TAPEGRAD_BACKGROUND_COMPILE=0``).  Otherwise starts their
    compile or load in the background, and looks at its progress (at most every
    ``POLL_S``): cheap enough to be called at every backward."""
    if _jit.READY[0] or not ENABLED:
        return True
    now = time.perf_counter()
    if now < _next_poll[0]:
        return False
    if not _LOOKING.acquire(blocking=False):    # another thread is looking: it decides
        return False
    try:
        _next_poll[0] = now + POLL_S
        phase = _phase[0]
        if phase is None:
            if stamp_valid():
                _start_loading()
            else:
                _start_compiling()
        elif phase == "compiling":
            rc = _child[0].poll()
            if rc is not None:
                _child[0] = None
                if rc == 0 and stamp_valid():
                    _start_loading()
                else:
                    _fail("the background compile exited with status %s (see %s)" % (rc, os.path.join(cache_dir(), LOG)))
        return _jit.READY[0] or _phase[0] == "failed"
    finally:
        _LOOKING.release()


def _fail(why):
    _phase[0] = "failed"
    warnings.warn("tapegrad: %s; compiling the kernels in the foreground" % why, RuntimeWarning, stacklevel=3)


# -- where: next to Numba's cache ---------------------------------------------------
def cache_dir():
    """Where the stamp and the lock go: ``NUMBA_CACHE_DIR`` when set, else the
    ``__pycache__`` beside the sweep's source (where Numba caches it), else a user
    cache directory (a read-only installation: Numba's cache is user-wide too)."""
    d = os.environ.get("NUMBA_CACHE_DIR")
    if d:
        os.makedirs(d, exist_ok=True)
        return d
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels", "__pycache__")
    try:
        os.makedirs(d, exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    from .kernels import codegen
    return codegen._writable_dir()


def key():
    """What a compile is valid for (without importing Numba)."""
    if not _key:
        import hashlib
        import platform
        from importlib.metadata import PackageNotFoundError, version
        from .kernels import sweep
        try:
            numba_version = version("numba")
        except PackageNotFoundError:
            numba_version = "?"
        cpu = platform.machine()
        try:
            with open("/proc/cpuinfo") as fh:
                info = fh.read()
            names = [ln.split(":", 1)[1].strip() for ln in info.splitlines()
                     if ln.startswith(("model name", "flags"))][:2]
            cpu += " " + hashlib.sha256(" ".join(names).encode()).hexdigest()[:16]
        except OSError:
            cpu += " " + platform.processor()
        env = ",".join("%s=%s" % (k, os.environ.get(k, "")) for k in ("NUMBA_BOUNDSCHECK", "NUMBA_OPT",
                                                                        "NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES"))
        _key.append("%s numba-%s py%d.%d %s [%s]" % (sweep.SOURCE_HASH, numba_version, sys.version_info[0],
                                                     sys.version_info[1], cpu, env))
    return _key[0]


def _read_stamp():
    try:
        with open(os.path.join(cache_dir(), STAMP), "rb") as fh:
            head = fh.readline().decode("utf-8", "replace").rstrip("\n")
            return head, fh.read()
    except OSError:
        return None, None


def stamp_valid():
    head, _ = _read_stamp()
    if head is None or not head.startswith(key() + " groups="):
        return False
    done = set(head[len(key() + " groups="):].split(","))
    return done >= set(ONLY or GROUPS)


def write_stamp(groups):
    """(In the warm-up process, after its compile.)  The key, the groups done, and
    every kernel's signatures, written atomically."""
    from .kernels import sweep
    runs = {id(r) for r in sweep._VARIANTS.values()}
    sigs = {}
    for d in _jit._ALL:
        if id(d) not in runs and d.signatures:
            sigs.setdefault((d.py_func.__module__, d.py_func.__qualname__), []).extend(d.signatures)
    variants = {v: list(r.signatures) for v, r in sweep._VARIANTS.items() if r.signatures}
    path = os.path.join(cache_dir(), STAMP)
    tmp = path + ".%d.tmp" % os.getpid()
    with open(tmp, "wb") as fh:
        fh.write(("%s groups=%s\n" % (key(), ",".join(groups))).encode())
        pickle.dump((sigs, variants), fh, protocol=4)
    os.replace(tmp, path)


def lock():
    """An exclusive lock on the cache's compile, held until the returned file is
    closed (or the process ends): waits for another process's compile."""
    import fcntl
    fh = open(os.path.join(cache_dir(), LOCK), "a+")
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    return fh


# -- compiling in a second process --------------------------------------------------
def _start_compiling():
    import subprocess
    d = cache_dir()
    cmd = [sys.executable, "-m", "tapegrad", "warmup", "--background"]
    if ONLY:
        cmd += ["--only", ",".join(ONLY)]
    env = dict(os.environ)
    # this tapegrad: an installed one is found from site-packages; a checkout's directory
    # goes first on the path.  The child runs in the cache directory (``-m`` puts the
    # working directory first on the path: no other tapegrad there), so relative paths
    # are made absolute.
    import site
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [os.path.abspath(q) for q in env.get("PYTHONPATH", "").split(os.pathsep) if q]
    installed = {os.path.abspath(q) for q in site.getsitepackages() + [site.getusersitepackages()]}
    if root not in installed:
        paths.insert(0, root)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if env.get("NUMBA_CACHE_DIR"):
        env["NUMBA_CACHE_DIR"] = os.path.abspath(env["NUMBA_CACHE_DIR"])
    try:
        with open(os.path.join(d, LOG), "a") as log:
            _child[0] = subprocess.Popen(cmd, env=env, cwd=d, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        _fail("cannot start the background compile (%s)" % e)
        return
    _phase[0] = "compiling"
    _started[0] = time.perf_counter()
    notice("compiling the kernels for this machine in the background (first run only); "
           "interpreting until they are ready")


# -- loading them here, in a thread -------------------------------------------------
def _start_loading():
    _phase[0] = "loading"
    t = threading.Thread(target=_load, name="tapegrad-load-kernels", daemon=True)
    t.start()


def _load():
    try:
        _jit.load(ready=False)
        from .kernels import sweep
        _, body = _read_stamp()
        sigs, variants = pickle.loads(body)
        by_name = {}
        runs = {id(r) for r in sweep._VARIANTS.values()} | {id(sweep.run)}
        for d in list(_jit._ALL):
            if id(d) not in runs:
                by_name[(d.py_func.__module__, d.py_func.__qualname__)] = d
        for name, ss in sigs.items():
            d = by_name.get(name)
            for sig in (ss if d is not None else ()):
                d.compile(sig)
        for v, ss in variants.items():
            r = sweep.variant_dispatcher(v)
            for sig in ss:
                r.compile(sig)
    except Exception as e:      # (a stamp from another build, a failed compile: the foreground's way)
        _phase[0] = "failed"
        warnings.warn("tapegrad: loading the compiled kernels failed (%s: %s); compiling them in the "
                      "foreground" % (type(e).__name__, e), RuntimeWarning)
        return
    _jit.READY[0] = True
    if _started[0]:
        notice("compiled kernels ready (%.0f s after the compile started)" % (time.perf_counter() - _started[0]))
