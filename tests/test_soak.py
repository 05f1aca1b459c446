"""The soak run (tests/soak.py) in processes of its own: under glibc's heap checker,
which aborts the process at the first corrupted heap block (what a kernel writing
outside its array leaves), and in a plain process, which must exit 0 (a corrupted
process often dies only at exit).  Under CI's NUMBA_BOUNDSCHECK=1 pass the same
loop runs with every compiled index checked (the subprocesses inherit it)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAMS = int(os.environ.get("TAPEGRAD_SOAK_PROGRAMS", "2000"))
# The soak runs the compiled kernels whatever TAPEGRAD_INTERPRET says: CI's interpreted
# pass would repeat the main pass's run.
pytestmark = pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always",
                                reason="the soak runs the compiled kernels (the main and bounds-checked passes run it)")


def _malloc_check_env():
    """glibc's heap consistency checks (MALLOC_CHECK_=3: report and abort); since glibc
    2.34 they live in libc_malloc_debug.so, which must be preloaded."""
    env = dict(os.environ, MALLOC_CHECK_="3", TAPEGRAD_CHECK_TAPES="1")
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
              "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"):
        lib = os.path.join(d, "libc_malloc_debug.so.0")
        if os.path.exists(lib):
            env["LD_PRELOAD"] = lib
            return env
    import platform
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the heap check is glibc's (this C library is %r)" % (platform.libc_ver(),))
    major, minor = (int(v) for v in platform.libc_ver()[1].split(".")[:2])
    assert (major, minor) < (2, 34), "glibc %d.%d has no libc_malloc_debug.so to preload" % (major, minor)
    return env      # (older glibc checks with MALLOC_CHECK_ alone)


def _run(env, *args):
    r = subprocess.run([sys.executable, os.path.join(HERE, "soak.py"), *map(str, args)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, "exit status %d\n%s\n%s" % (r.returncode, r.stdout[-3000:], r.stderr[-6000:])
    assert "all gradients agree" in r.stdout, r.stdout[-3000:]
    return r.stdout


def test_soak_under_the_heap_checker():
    """(Before the 0-d flip was fixed, this run aborted: "free(): invalid pointer".)"""
    out = _run(_malloc_check_env(), PROGRAMS, 20_000)
    assert "%d programs" % PROGRAMS in out


def test_soak_plain_process_exits_cleanly():
    """Includes the 100,000-iteration loop of the 0-d flip's compiled backward."""
    out = _run(dict(os.environ), PROGRAMS, 100_000)
    assert "100000 0-d flips" in out
