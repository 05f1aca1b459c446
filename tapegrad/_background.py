"""The compiled kernels, compiled and loaded without making the program wait.

When a backward first wants the compiled kernels (``autograd.engine``: interpreting
has cost about what loading them would, or the tape is long) and Numba's disk cache
holds no complete compile for this machine, a second process compiles them
(``python -m tapegrad warmup --background``) while this one goes on interpreting
backward passes and replaying tapes in NumPy.  When that process is done, a thread
here loads the kernels from the cache (importing Numba and loading a kernel each
take long enough to be felt), and the backward passes after that use them.

A finished compile is recorded by a stamp next to the cache (``STAMP``, JSON): the
key of what it was compiled for (tapegrad's kernel sources, Numba, Python, the CPU,
the Numba settings that change code), the warm-up groups done, and the signatures
each kernel was compiled for (Numba types written as plain data, read back by name:
``_type_data``), which the loading thread loads one by one.  A lock file beside it
makes concurrent processes compile once: a second warm-up process waits for the
first and then finds the stamp.  Numba writes each cache file atomically, so a
compile process killed midway leaves complete files and no stamp: the next run
compiles what is missing.  The stamp, the lock and the compile's log live in the
checked directory of Numba's cache (``tapegrad._private``), opened never through a
symbolic link; where there is no such directory there is no background compile.

``TAPEGRAD_BACKGROUND_COMPILE=0`` compiles in the foreground instead, at the first
backward that wants the kernels (the test suite runs so); ``TAPEGRAD_QUIET=1``
silences the two notices on stderr.
"""
import json
import os
import re
import sys
import threading
import time
import warnings

from . import _jit, _private

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
        if phase is None and cache_dir() is None:      # (no disk cache: nothing a second process could leave)
            _phase[0] = "failed"
            return True
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
                    _fail("the background compile exited with status %s (see %s)"
                          % (rc, os.path.join(cache_dir() or "?", LOG)))
        return _jit.READY[0] or _phase[0] == "failed"
    finally:
        _LOOKING.release()


def _fail(why):
    _phase[0] = "failed"
    warnings.warn("tapegrad: %s; compiling the kernels in the foreground" % why, RuntimeWarning, stacklevel=3)


# -- where: next to Numba's cache ---------------------------------------------------
def cache_dir():
    """Where the stamp, the lock and the log go: beside Numba's cache of the sweep, in a
    directory ``tapegrad._private`` checked (``NUMBA_CACHE_DIR`` when set and accepted,
    else the ``__pycache__`` beside the sweep's source, else the user cache's); None
    when the kernels have no disk cache."""
    root = _private.numba_root()
    if root is False:
        return None
    if root:
        return root
    return _private.numba_dir(os.path.join(_private.PACKAGE, "kernels", "sweep.py"))


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
    """The stamp's data (a dict), or None (none, unreadable, not this format)."""
    d = cache_dir()
    if d is None:
        return None
    try:
        fd = _private.open_private(os.path.join(d, STAMP), os.O_RDONLY)
        with open(fd, "rb") as fh:
            data = json.loads(fh.read(1 << 24).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def stamp_valid():
    data = _read_stamp()
    if data is None or data.get("key") != key() or not isinstance(data.get("groups"), list):
        return False
    return set(data["groups"]) >= set(ONLY or GROUPS)


# A kernel's signature in the stamp: its Numba types as plain data, read back by name
# (no code from the file runs): a scalar type's name, or [kind, arguments...].
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


def _type_data(t):
    """Numba type ``t`` as plain data, or None for a type the stamp does not keep (the
    kernel then compiles at its first call)."""
    from numba.core import types
    if isinstance(t, types.Array):
        dt = _type_data(t.dtype)
        return None if not isinstance(dt, str) else ["array", dt, t.ndim, t.layout, bool(t.mutable is False)]
    if isinstance(t, types.IntegerLiteral):
        return ["literal", int(t.literal_value)]
    if isinstance(t, types.Omitted):
        v = t.value
        return ["omitted", v] if type(v) in (int, float, bool) else None
    if isinstance(t, (types.Integer, types.Float, types.Boolean)):
        name = "boolean" if isinstance(t, types.Boolean) else str(t)
        return name if _NAME.match(name) and getattr(types, name, None) == t else None
    return None


def _type_from(data):
    """The Numba type ``_type_data`` wrote (ValueError for anything else)."""
    from numba.core import types
    if isinstance(data, str):
        t = getattr(types, data, None) if _NAME.match(data) else None
        if isinstance(t, (types.Integer, types.Float, types.Boolean)):
            return t
    elif isinstance(data, list) and data:
        kind, args = data[0], data[1:]
        if kind == "array" and len(args) == 4 and isinstance(args[0], str) and type(args[1]) is int \
                and 0 <= args[1] <= 32 \
                and args[2] in ("C", "F", "A") and type(args[3]) is bool:
            return types.Array(_type_from(args[0]), args[1], args[2], readonly=args[3])
        if kind == "literal" and len(args) == 1 and type(args[0]) is int:
            return types.literal(args[0])
        if kind == "omitted" and len(args) == 1 and type(args[0]) in (int, float, bool):
            return types.Omitted(args[0])
    raise ValueError("not a kernel argument type: %r" % (data,))


def _signatures_data(signatures):
    out = []
    for sig in signatures:
        ts = [_type_data(t) for t in sig]
        if all(t is not None for t in ts):
            out.append(ts)
    return out


def write_stamp(groups):
    """(In the warm-up process, after its compile.)  The key, the groups done, and
    every kernel's signatures, written atomically."""
    from .kernels import sweep
    runs = {id(r) for r in sweep._VARIANTS.values()}
    sigs = {}
    for d in _jit._ALL:
        if id(d) not in runs and d.signatures:
            sigs.setdefault((d.py_func.__module__, d.py_func.__qualname__), []).extend(d.signatures)
    data = {"key": key(), "groups": list(groups),
            "kernels": [[m, q, _signatures_data(ss)] for (m, q), ss in sigs.items()],
            "variants": [[v, _signatures_data(r.signatures)] for v, r in sweep._VARIANTS.items() if r.signatures]}
    d = cache_dir()
    if d is None:
        return
    path = os.path.join(d, STAMP)
    tmp = path + ".%d.tmp" % os.getpid()
    fd = _private.open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with open(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def lock():
    """An exclusive lock on the cache's compile, held until the returned file is
    closed (or the process ends): waits for another process's compile.  (None, and no
    lock, when the kernels have no disk cache.)"""
    import fcntl
    d = cache_dir()
    if d is None:
        return None
    fh = open(_private.open_private(os.path.join(d, LOCK), os.O_RDWR | os.O_CREAT | os.O_APPEND), "a+")
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
        if not _private.checked(d):
            raise OSError("%s: %s" % (d, _private.problem(d)))
        log = _private.open_private(os.path.join(d, LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            _child[0] = subprocess.Popen(cmd, env=env, cwd=d, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            os.close(log)
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
        data = _read_stamp()
        if data is None:
            raise ValueError("the stamp is gone or unreadable")
        by_name = {}
        runs = {id(r) for r in sweep._VARIANTS.values()} | {id(sweep.run)}
        for d in list(_jit._ALL):
            if id(d) not in runs:
                by_name[(d.py_func.__module__, d.py_func.__qualname__)] = d
        for module, qualname, ss in data["kernels"]:
            d = by_name.get((module, qualname))
            for sig in (ss if d is not None else ()):
                d.compile(tuple(_type_from(t) for t in sig))
        for v, ss in data["variants"]:
            r = sweep.variant_dispatcher(int(v))
            for sig in ss:
                r.compile(tuple(_type_from(t) for t in sig))
    except Exception as e:      # (a stamp from another build, a failed compile, a damaged stamp: whatever it
        # raises, the kernels are then compiled in the foreground, as the warning says)
        _phase[0] = "failed"
        warnings.warn("tapegrad: loading the compiled kernels failed (%s: %s); compiling them in the "
                      "foreground" % (type(e).__name__, e), RuntimeWarning)
        return
    _jit.READY[0] = True
    if _started[0]:
        notice("compiled kernels ready (%.0f s after the compile started)" % (time.perf_counter() - _started[0]))
