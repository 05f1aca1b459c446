"""A tg.compile'd call never waits for code generation or compilation (fused loops are
planned, generated and compiled in a background thread, within a budget of entries, loops
and seconds; over it a tape stays unfused with the reason in ``why``), and an exception
that is not a replay's own failure reaches the caller."""
import signal
import threading

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.replay import forward as _forward
from tapegrad.replay import fuse as _fuse
from tapegrad.replay.recording import Recording


def _rk4_body(p, y0, steps=40, dt=0.01):
    def f(y):
        return tg.stack([y[1], -p[0] * y[0].sin() - p[1] * y[1]])
    y, loss = y0, 0.0
    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + 0.5 * dt * k1)
        k3 = f(y + 0.5 * dt * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        loss = loss + (y * y).sum()
    return loss


def _rosen(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def _value_and_grad(f, *arrays):
    ts = [tg.tensor(a, requires_grad=True) for a in arrays]
    y = f(*ts)
    y.backward()
    return y.item(), [t.grad.numpy() for t in ts]


def test_a_tape_over_the_entries_budget_stays_unfused_with_the_reason(monkeypatch):
    # (the arena's compiled forward off, as when the kernels are not loaded yet: fusion decides)
    monkeypatch.setattr(_forward, "ARENA_TOTAL", 0)
    monkeypatch.setattr(_fuse, "MAX_ENTRIES", 1000)
    monkeypatch.setattr(_fuse, "AUTO_ELEMENTS", 0)
    f = tg.compile(_rk4_body)
    y0 = tg.tensor([1.0, 0.0])
    for i in range(5):
        p = np.array([9.81, 0.1]) + 0.01 * i
        got = _value_and_grad(lambda q: f(q, y0), p)
        want = _value_and_grad(lambda q: _rk4_body(q, y0), p)
        assert got[0] == pytest.approx(want[0], rel=1e-12)
        np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-11)
    (info,) = f.fusion()
    assert info == {"fused": False, "why": "its tape has %d entries; fusion plans tapes of up to 1000 (the plan "
                                           "and the compile grow with the tape)" % next(iter(f.cache.values()))[0].n}
    assert not [t for t in threading.enumerate() if t.name == "tapegrad-fuse"]


def test_the_loops_and_time_budgets(monkeypatch):
    x = np.random.default_rng(0).uniform(-2, 2, 300)
    monkeypatch.setattr(_fuse, "MAX_GROUPS", 0)
    rt = tg.record(_rosen, x, fuse=True)
    rt.value_and_grad(x)
    assert rt.fusion == {"fused": False, "why": "it would take 1 fused loops; fusion compiles up to 0 (the compile "
                                                "time grows with them)"}
    monkeypatch.setattr(_fuse, "MAX_GROUPS", 48)
    monkeypatch.setattr(_fuse, "BUDGET_S", 0.0)
    rt = tg.record(_rosen, x, fuse=True)
    v, g = rt.value_and_grad(x)
    assert rt.fusion["fused"] is False
    assert rt.fusion["why"].endswith("took longer than the 0 s a fused program may take to build")
    want = _value_and_grad(_rosen, x)
    assert v == pytest.approx(want[0], rel=1e-13)
    np.testing.assert_allclose(g, want[1][0], rtol=1e-13)


def test_the_build_runs_beside_the_calls(monkeypatch):
    """fuse="auto": the replays go on, unfused, while the build (held here) has not finished."""
    monkeypatch.setattr(_fuse, "AUTO_ELEMENTS", 0)
    monkeypatch.setattr(_forward, "ARENA_TOTAL", 0)
    release, started = threading.Event(), threading.Event()
    build = _fuse._build

    def held(R, metas, budget):
        started.set()
        release.wait(60)
        return build(R, metas, budget)
    monkeypatch.setattr(_fuse, "_build", held)
    f = tg.compile(_rosen)
    x = np.random.default_rng(1).uniform(-2, 2, 200)
    want = _value_and_grad(_rosen, x)
    try:
        for i in range(6):
            got = _value_and_grad(f, x)
            assert got[0] == pytest.approx(want[0], rel=1e-13)
            if i == 3:
                assert started.wait(60)
                assert f.fusion()[0] == {"fused": False, "why": "compiling in the background"}
    finally:
        release.set()
    for t in threading.enumerate():
        if t.name == "tapegrad-fuse":
            t.join(120)
    for _ in range(2):
        got = _value_and_grad(f, x)
        assert got[0] == pytest.approx(want[0], rel=1e-12)
    info = f.fusion()[0]        # (switched to the loops, or kept unfused for a reason given)
    assert info["fused"] or info["why"] != "compiling in the background", info


def test_a_background_build_lets_the_caller_run():
    b = _fuse.Budget(10.0, background=True)
    slept = []
    original = _fuse.time.sleep
    try:
        _fuse.time.sleep = lambda s: slept.append(s)
        for _ in range(3):
            b.tick("planning")
            b.resume = 0.0          # (as after WORK_S of work)
    finally:
        _fuse.time.sleep = original
    assert slept == [_fuse.YIELD_S] * 3
    fg = _fuse.Budget(10.0)
    fg.tick("planning")             # (a build in the caller's thread, fuse=True: no sleep)


# -- exceptions -----------------------------------------------------------------------
class _Timeout(Exception):
    pass


def _raise_timeout(signum, frame):
    raise _Timeout("the time is up")


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="no SIGALRM here")
def test_an_exception_from_a_signal_handler_during_a_replay_propagates(monkeypatch):
    f = tg.compile(lambda x: (x.sin() * x).sum())
    f(tg.tensor([1.0, 2.0]))
    f(tg.tensor([1.0, 2.0]))            # (the first replay, with its checks)
    forward = Recording.forward

    def interrupted(self, arrays, _from=None):
        signal.raise_signal(signal.SIGALRM)     # (the handler runs here, as a timer's would)
        return forward(self, arrays, _from)
    old = signal.signal(signal.SIGALRM, _raise_timeout)
    try:
        monkeypatch.setattr(Recording, "forward", interrupted)
        with pytest.raises(_Timeout, match="the time is up"):
            f(tg.tensor([3.0, 4.0]))
    finally:
        signal.signal(signal.SIGALRM, old)
    assert f.stats.errors == 0 and f.stats.recordings == 1


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, MemoryError])
def test_interrupts_and_memory_errors_during_a_replay_propagate(monkeypatch, exc):
    f = tg.compile(lambda x: (x * x).sum())
    f(tg.tensor([1.0, 2.0]))
    f(tg.tensor([1.0, 2.0]))

    def raising(self, arrays, _from=None):
        raise exc()
    monkeypatch.setattr(Recording, "forward", raising)
    with pytest.raises(exc):
        f(tg.tensor([3.0, 4.0]))
    assert f.stats.errors == 0 and f.stats.recordings == 1


def test_a_replay_failure_of_its_own_records_again(monkeypatch):
    f = tg.compile(lambda x: (x * x).sum())
    f(tg.tensor([1.0, 2.0]))
    f(tg.tensor([1.0, 2.0]))

    def raising(self, arrays, _from=None):
        raise FloatingPointError("a path the recording did not take")
    monkeypatch.setattr(Recording, "forward", raising)
    with pytest.warns(RuntimeWarning, match="replaying <lambda> raised FloatingPointError"):
        assert f(tg.tensor([3.0, 4.0])).item() == 25.0
    assert f.stats.errors == 1 and f.stats.recordings == 2


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="no SIGALRM here")
def test_a_signal_handlers_exception_in_the_first_replays_check_propagates(monkeypatch):
    f = tg.compile(lambda x: (x.exp() * x).sum())
    f(tg.tensor([1.0, 2.0]))
    python_forward = Recording._forward_python

    def interrupted(self, arrays, captured=None):
        signal.raise_signal(signal.SIGALRM)
        return python_forward(self, arrays, captured)
    old = signal.signal(signal.SIGALRM, _raise_timeout)
    try:
        monkeypatch.setattr(Recording, "_forward_python", interrupted)
        with pytest.raises(_Timeout):
            f(tg.tensor([3.0, 4.0]))
    finally:
        signal.signal(signal.SIGALRM, old)
