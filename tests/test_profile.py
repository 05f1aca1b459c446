"""tg.profile(): per-opcode counts, record vs. backward time, tape length, saved bytes."""
import gc
import threading

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import tape as _tp
from tapegrad.autograd import differentiable, engine
from tapegrad.kernels import sweep
from tapegrad.profile import profile


@pytest.fixture(autouse=True)
def _compiled_sweep(monkeypatch):
    """Profiles time the compiled sweep (TAPEGRAD_INTERPRET=always would bypass it)."""
    monkeypatch.setattr(engine, "INTERPRET", ["auto"])


def _block(x):
    y = tg.sin(tg.sin(tg.sin(x)))
    z = y * x * x
    loss = z.sum()
    loss.backward()
    return loss


def test_counts_times_and_entries():
    x = tg.tensor(np.linspace(0.1, 1.0, 10), requires_grad=True)
    _block(x)                       # compile outside the profile
    x.grad = None
    with profile() as p:
        _block(x)
    assert p.counts == {"sin": 3, "mul": 2, "leaf": 1, "sum": 1}
    assert p.entries == 7
    assert p.tapes == 1
    assert p.backwards == 1 and p.sweeps >= 1
    assert p.backward_s > 0 and p.sweep_s > 0 and p.record_s > 0
    assert p.sweep_s <= p.backward_s
    assert abs(p.record_s + p.backward_s - p.wall_s) < 1e-9
    # kept for backward (each sin and mul saves its inputs): x, the three sin outputs, y*x
    assert p.saved_bytes == 5 * 10 * 8
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy() * np.sin(np.sin(np.sin(x.detach().numpy())))
                               + x.detach().numpy() ** 2 * np.cos(np.sin(np.sin(x.detach().numpy()))) * np.cos(np.sin(x.detach().numpy()))
                               * np.cos(x.detach().numpy()))


def test_report_table():
    x = tg.tensor([0.5, 1.5], requires_grad=True)
    with profile() as p:
        _block(x)
    s = str(p)
    assert s == p.report()
    lines = s.splitlines()
    assert lines[0].startswith("tapegrad profile: ") and "backward" in lines[0] and "sweep" in lines[0]
    assert lines[1].startswith("tape: 7 entries on 1 tape, 80 B saved")
    assert lines[2].split() == ["op", "entries", "share"]
    assert lines[3].split() == ["sin", "3", "42.9%"]
    assert lines[4].split() == ["mul", "2", "28.6%"]
    assert "entries=7" in repr(p)


def test_only_the_block_is_counted():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    a = tg.exp(x)                   # on the current tape before the block
    with profile() as p:
        b = tg.cos(a) * 3.0
    c = tg.sin(b)                   # after the block
    (c.sum()).backward()
    assert p.counts == {"cos": 1, "mul_s": 1}
    assert p.entries == 2
    assert p.backwards == 0 and p.backward_s == 0.0 and p.sweep_s == 0.0
    assert p.record_s == p.wall_s > 0


def test_many_tapes_freed_inside_the_block():
    x = tg.tensor(np.ones(4), requires_grad=True)
    w = tg.tensor(np.full(4, 0.5), requires_grad=True)
    (x * w).sum().backward()
    with profile() as p:
        for _ in range(5):          # each backward starts a new tape; the old one is freed
            loss = (tg.tanh(x * w) + x).sum()
            loss.backward()
            del loss
            gc.collect()
        for _ in range(3):          # recorded and dropped without backward (one tape)
            tg.sin(x)
            gc.collect()
    assert p.counts == {"leaf": 5 * 2 + 1, "sin": 3, "mul": 5, "tanh": 5, "add": 5, "sum": 5}
    assert p.entries == 10 + 1 + 3 + 5 * 4
    assert p.tapes == 6
    assert p.backwards == 5 and p.sweeps == 5
    assert p.saved_bytes == 4 * 8 * 3      # x, w, tanh's output: one iteration's tape at a time


def test_autograd_grad_and_create_graph_are_timed():
    x = tg.tensor([0.3, 0.7], requires_grad=True)
    with profile() as p:
        y = (x * x * x).sum()
        (g,) = tg.autograd.grad(y, x, create_graph=True)
        (h,) = tg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), 3 * x.detach().numpy() ** 2)
    np.testing.assert_allclose(h.detach().numpy(), 6 * x.detach().numpy())
    assert p.backwards == 2
    assert p.backward_s > 0
    assert p.counts["mul"] >= 2


def test_nested_profiles_and_restored_state():
    live, run_for, diff = _tp._LIVE, sweep.run_for, differentiable.run_backward
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with profile() as outer:
        tg.sin(x).sum().backward()
        with profile() as inner:
            tg.cos(x).sum().backward()
    assert inner.counts == {"leaf": 1, "cos": 1, "sum": 1}
    assert outer.counts == {"leaf": 2, "sin": 1, "cos": 1, "sum": 2}
    assert outer.backwards == 2 and inner.backwards == 1
    assert outer.backward_s >= inner.backward_s > 0
    assert _tp._LIVE is live and sweep.run_for is run_for and differentiable.run_backward is diff
    assert engine.PROFILERS == []
    assert tg.core.tape.memory_stats()["tapes"] >= 0        # memory_stats still works


def test_exception_inside_block_restores():
    live = _tp._LIVE
    with pytest.raises(ValueError):
        with profile() as p:
            tg.sin(tg.tensor([1.0], requires_grad=True))
            raise ValueError("boom")
    assert _tp._LIVE is live and engine.PROFILERS == []
    assert p.counts == {"leaf": 1, "sin": 1}


def test_reentering_the_same_profile_is_refused():
    p = profile()
    with p:
        with pytest.raises(RuntimeError):
            p.__enter__()


def test_other_threads_tapes_are_counted():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    out = []

    def work():
        out.append(tg.exp(x) * x)

    with profile() as p:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    assert p.counts == {"leaf": 1, "exp": 1, "mul": 1}
