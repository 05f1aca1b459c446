"""A first run compiles the kernels in a background process and interprets until
they are ready (``tapegrad._background``): the notices, the switch to kernels
loaded from the cache (not compiled in the foreground), one compile for two
processes started at once, a killed compile process, and the cheap poll."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tapegrad import _background, _jit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# a tape of one shape op: the background compile narrowed to the warm-up group
# that covers it ("select", the quickest to compile)
CODE = """
    import time
    import tapegrad as tg
    from tapegrad import _background, _jit
    from tapegrad.autograd import engine
    from tapegrad.kernels import sweep as K
    from tapegrad.core.registry import SHAPE
    _background.ONLY = ["select"]
    engine.INTERPRET_BUDGET_S = 0.0         # (the kernels are wanted from the first backward)
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[1].backward()
    print("first", _jit.READY[0], x.grad.tolist())
    interpreted = 0
    end = time.perf_counter() + 500
    while not _jit.READY[0] and time.perf_counter() < end:
        x.grad = None
        x[1].backward()                     # interpreted, and polls the compile
        interpreted += 1
        time.sleep(0.001)
    x.grad = None
    x[1].backward()
    r = K.run_for(1 << SHAPE)
    print("ready", _jit.READY[0], interpreted > 0, x.grad.tolist(), len(r.stats.cache_hits),
          len(r.stats.cache_misses))
"""


def _env(cache, **kw):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=ROOT, TAPEGRAD_BACKGROUND_COMPILE="1")
    env.pop("TAPEGRAD_INTERPRET", None)
    env.pop("TAPEGRAD_QUIET", None)
    env.update(kw)
    return env


def _start(cache, **kw):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(CODE)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(cache, **kw), cwd=ROOT)


def _finish(p):
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-4000:]
    return out.splitlines(), [ln for ln in err.splitlines() if ln.startswith("tapegrad:")]


def _log(cache):
    with open(os.path.join(str(cache), _background.LOG)) as fh:
        return fh.read()


heavy = pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always" or
                           os.environ.get("NUMBA_BOUNDSCHECK") == "1",
                           reason="compile processes, not kernels: tested once, in the default pass")

COMPILING = ("tapegrad: compiling the kernels for this machine in the background (first run only); "
             "interpreting until they are ready")


@heavy
def test_first_run_interprets_while_a_background_process_compiles(tmp_path):
    out, notes = _finish(_start(tmp_path))
    # interpreted at first; then the kernels, loaded from the cache the child filled (a
    # cache hit: nothing compiled in the foreground), give the same gradient
    assert out == ["first False [0.0, 1.0, 0.0]", "ready True True [0.0, 1.0, 0.0] 1 0"]
    assert notes[0] == COMPILING and len(notes) == 2
    assert re.fullmatch(r"tapegrad: compiled kernels ready \(\d+ s after the compile started\)", notes[1])
    assert os.path.exists(tmp_path / _background.STAMP)
    assert _log(tmp_path).count("warmup done in") == 1
    # a later run: no compile, no notice; the kernels are loaded (in a thread) from the cache
    out, notes = _finish(_start(tmp_path))
    assert out == ["first False [0.0, 1.0, 0.0]", "ready True True [0.0, 1.0, 0.0] 1 0"]
    assert notes == []
    assert _log(tmp_path).count("warmup done in") == 1


@heavy
def test_two_processes_on_an_empty_cache_compile_once(tmp_path):
    a, b = _start(tmp_path, TAPEGRAD_QUIET="1"), _start(tmp_path, TAPEGRAD_QUIET="1")
    (out_a, notes_a), (out_b, notes_b) = _finish(a), _finish(b)
    assert out_a == out_b == ["first False [0.0, 1.0, 0.0]", "ready True True [0.0, 1.0, 0.0] 1 0"]
    assert notes_a == notes_b == []         # TAPEGRAD_QUIET=1
    log = _log(tmp_path)
    # the second warm-up process waited on the lock, then found the first one's stamp
    assert log.count("warmup done in") == 1, log
    assert log.count("another process compiled the kernels meanwhile") == 1, log


@heavy
def test_a_killed_compile_process_leaves_a_usable_cache(tmp_path):
    env = _env(tmp_path, PYTHONUNBUFFERED="1")
    p = subprocess.Popen([sys.executable, "-m", "tapegrad", "warmup", "--only", "select,elementwise"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    lines = []
    for line in p.stdout:               # killed in the middle of compiling the elementwise kernels
        lines.append(line)
        if line.strip().startswith("select"):
            time.sleep(3)
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL, lines
    assert not os.path.exists(tmp_path / _background.STAMP)         # not taken for a finished compile
    # what it wrote is whole: the kernels it compiled load, and nothing is damaged
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import warnings
        warnings.simplefilter("error")
        import tapegrad as tg
        from tapegrad.kernels import sweep as K
        from tapegrad.core.registry import SHAPE
        x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x[2].backward()
        r = K.run_for(1 << SHAPE)
        print(x.grad.tolist(), len(r.stats.cache_hits), len(r.stats.cache_misses))
    """)], capture_output=True, text=True, env=dict(env, TAPEGRAD_INTERPRET="never"), cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.split() == ["[0.0,", "0.0,", "1.0]", "1", "0"]
    # and a first run then compiles (in the background) what is missing
    out, notes = _finish(_start(tmp_path))
    assert out[1] == "ready True True [0.0, 1.0, 0.0] 1 0" and notes[0] == COMPILING


def test_foreground_compile_when_background_is_off():
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import tapegrad as tg
        from tapegrad import _background, _jit
        from tapegrad.autograd import engine
        engine.INTERPRET_BUDGET_S = 0.0
        x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x[1].backward()
        print(_background.ENABLED, _jit.READY[0], _background._phase[0], x.grad.tolist())
    """)], capture_output=True, text=True, cwd=ROOT, timeout=600,
        env=dict(os.environ, TAPEGRAD_BACKGROUND_COMPILE="0", PYTHONPATH=ROOT, TAPEGRAD_INTERPRET="auto"))
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.split() == ["False", "True", "None", "[0.0,", "1.0,", "0.0]"]
    assert "tapegrad:" not in r.stderr


class _Child:
    def __init__(self):
        self.polls = 0

    def poll(self):
        self.polls += 1
        return None             # still compiling


def test_the_poll_looks_at_the_compile_at_most_every_poll_interval(monkeypatch):
    child = _Child()
    monkeypatch.setattr(_background, "ENABLED", True)
    monkeypatch.setattr(_jit, "READY", [False])
    monkeypatch.setattr(_background, "_phase", ["compiling"])
    monkeypatch.setattr(_background, "_child", [child])
    monkeypatch.setattr(_background, "_next_poll", [0.0])
    monkeypatch.setattr(_background, "POLL_S", 3600.0)
    assert not any(_background.request() for _ in range(10000))
    assert child.polls == 1                 # the first call looked; the others until POLL_S did not
    _background._next_poll[0] = 0.0
    assert not _background.request() and child.polls == 2


def test_the_stamp_is_valid_for_its_key_and_groups(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_background, "ONLY", None)
    assert _background.cache_dir() == str(tmp_path)
    assert not _background.stamp_valid()                            # no stamp
    path = tmp_path / _background.STAMP

    def stamp(key, groups):
        path.write_text(json.dumps({"key": key, "groups": groups, "kernels": [], "variants": []}))

    stamp(_background.key(), list(_background.GROUPS))
    assert _background.stamp_valid()
    stamp(_background.key(), ["select", "elementwise"])         # a partial warm-up
    assert not _background.stamp_valid()
    monkeypatch.setattr(_background, "ONLY", ["select"])
    assert _background.stamp_valid()
    stamp(_background.key().replace("numba-", "numba-0"), ["select"])     # another Numba
    assert not _background.stamp_valid()
    path.write_bytes(b"\x80\x04K\x01.")          # (not JSON: a pickle is data nobody unpickles)
    assert not _background.stamp_valid()
    assert " numba-" in _background.key() and " py%d.%d " % sys.version_info[:2] in _background.key()


@pytest.fixture
def not_ready(monkeypatch):
    """The kernels loaded but not ready, as while a background compile runs: the
    dispatchers exist, READY alone says no.  The interpretation budget is reset,
    since what earlier tests in this process interpreted counts against it (over
    it, a backward would compile in the foreground and set READY)."""
    from tapegrad.autograd import engine
    _jit.load()
    monkeypatch.setattr(_jit, "READY", [False])
    monkeypatch.setattr(_background, "deferring", lambda: True)
    monkeypatch.setattr(engine, "_interpreted_s", [0.0])
    monkeypatch.setattr(engine, "INTERPRET_BUDGET_S", float("inf"))


def test_replays_keep_to_numpy_until_the_kernels_are_ready(not_ready):
    import numpy as np
    import tapegrad as tg

    def f(xy):
        return (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2

    def want(x, y):
        return [-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)]

    step = tg.compile(f)
    R = None
    for i in range(6):
        if i == 3:
            _jit.READY[0] = True            # the background compile is done
        x, y = -1.5 + 0.1 * i, 2.0 - 0.05 * i
        p = tg.tensor([x, y], requires_grad=True)
        step(p).backward()
        np.testing.assert_allclose(p.grad.numpy(), want(x, y), rtol=1e-13)
        R = next(iter(step.cache.values()))[0]
        # recorded and replayed in NumPy while not ready (no compiled forward decided);
        # the first replay once ready decides (not a tape of single numbers: xy has
        # two), the next one takes the compiled forward over one arena
        assert (R.scalar, R.arena) == ((None, None) if i < 3 else (False, None) if i == 3 else (False, True)), i
    assert step.stats.recordings == 1 and step.stats.replays == 5


def test_single_number_replays_take_the_compiled_forward_once_ready(not_ready):
    import numpy as np
    import tapegrad as tg
    step = tg.compile(lambda x, y: (1 - x) ** 2 + 100 * (y - x ** 2) ** 2)
    for i in range(5):
        if i == 2:
            _jit.READY[0] = True
        xv, yv = -1.5 + 0.1 * i, 2.0 - 0.05 * i
        x, y = tg.tensor([xv], requires_grad=True), tg.tensor([yv], requires_grad=True)
        step(x, y).sum().backward()
        np.testing.assert_allclose([x.grad.item(), y.grad.item()],
                                   [-2 * (1 - xv) - 400 * xv * (yv - xv * xv), 200 * (yv - xv * xv)], rtol=1e-13)
        R = next(iter(step.cache.values()))[0]
        assert R.scalar is (None if i < 2 else True), i
