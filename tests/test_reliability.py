"""Anomaly detection and memory accounting."""
import gc
import inspect
import os
import warnings

import numpy as np
import pytest

import tapegrad as tg

HERE = os.path.abspath(__file__)


def _line_of(marker):
    """Line number in this file of the source line containing ``marker``."""
    src = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
    return next(i + 1 for i, line in enumerate(src) if marker in line and "_line_of" not in line)


@pytest.fixture(autouse=True)
def _anomaly_off():
    yield
    tg.autograd.set_detect_anomaly(False)


# -- anomaly detection ---------------------------------------------------------------
def test_detect_anomaly_names_the_operation_and_the_line():
    x = tg.tensor([1.0, 0.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        ctx = tg.autograd.detect_anomaly()
    with ctx:
        y = x * 2
        z = tg.sqrt(y)                          # ANOMALY-SQRT: sqrt'(0) = inf, times 0 is nan
        w = (z * 0.0).sum()
        with pytest.raises(RuntimeError) as e:
            w.backward()
    msg = str(e.value)
    assert msg.startswith("Function 'SqrtBackward0' returned nan values in its 0th output.")
    assert '"%s", line %d' % (HERE, _line_of("ANOMALY-SQRT")) in msg
    assert not tg.autograd.is_anomaly_enabled()


def test_anomaly_reports_inf_and_the_input_index():
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor([0.0, 1.0], requires_grad=True)
    with tg.autograd.set_detect_anomaly(True):
        q = a / b                               # ANOMALY-DIV
        with pytest.raises(RuntimeError, match=r"Function 'DivBackward0' returned inf values in its 0th output"):
            q.sum().backward()
    with tg.autograd.set_detect_anomaly(True):
        q = a * 1.0 / (b * 1.0)
        with pytest.raises(RuntimeError, match=r"'DivBackward0' returned inf values"):
            tg.autograd.grad(q.sum(), b)


def test_without_anomaly_mode_nan_gradients_just_propagate():
    x = tg.tensor([0.0, 1.0], requires_grad=True)
    (tg.sqrt(x) * 0.0).sum().backward()
    assert np.isnan(x.grad.numpy()[0]) and x.grad.numpy()[1] == 0.0


FUNCS = {
    "sin_mul": lambda x, w: (tg.sin(x) * w).sum(),
    "matmul_softmax": lambda x, w: (x.reshape(2, 3) @ w.reshape(3, 2)).softmax(-1)[:, 0].sum(),
    "index_cat": lambda x, w: tg.cat([x[1:], w * x[:1]]).pow(2).mean(),
    "reduce": lambda x, w: (x.var() + (x * w).prod() + tg.logsumexp(x * w, 0)),
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_anomaly_mode_gives_the_same_gradients(name):
    rng = np.random.default_rng(1)
    xv, wv = rng.uniform(0.5, 1.5, 6), rng.uniform(0.5, 1.5, 6)
    fn = FUNCS[name]
    grads = []
    for mode in (False, True):
        x, w = tg.tensor(xv, requires_grad=True), tg.tensor(wv, requires_grad=True)
        with tg.autograd.set_detect_anomaly(mode):
            loss = fn(x, w)
            loss.backward()
            gx, = tg.autograd.grad(fn(x, w), x)
        grads.append((x.grad.numpy(), w.grad.numpy(), gx.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_anomaly_mode_with_hooks_retain_grad_and_create_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.autograd.set_detect_anomaly(True):
        y = x * x
        y.retain_grad()
        y.register_hook(lambda g: g * 10)
        y.sum().backward()
        np.testing.assert_allclose(y.grad.numpy(), [10.0, 10.0])
        np.testing.assert_allclose(x.grad.numpy(), [20.0, 40.0])
        g, = tg.autograd.grad((x ** 3).sum(), x, create_graph=True)
        h, = tg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), [6.0, 12.0])


def test_anomaly_mode_accumulates_leaf_grads_in_place_like_the_fast_path():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    held = x.grad
    with tg.autograd.set_detect_anomaly(True):
        (x * 3).sum().backward()
    assert x.grad is held
    np.testing.assert_allclose(held.numpy(), [6.0, 6.0])


def test_set_detect_anomaly_as_call_and_flags():
    assert not tg.autograd.is_anomaly_enabled()
    tg.autograd.set_detect_anomaly(True, check_nan=False)
    assert tg.autograd.is_anomaly_enabled() and not tg.autograd.is_anomaly_check_nan_enabled()
    x = tg.tensor([0.0], requires_grad=True)
    (tg.sqrt(x) * 0.0).sum().backward()                 # check_nan=False: no error
    assert np.isnan(x.grad.numpy()[0])
    tg.autograd.set_detect_anomaly(False)
    assert not tg.autograd.is_anomaly_enabled() and tg.autograd.is_anomaly_check_nan_enabled()   # the default again


def test_detect_anomaly_as_decorator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @tg.autograd.detect_anomaly()
        def f(x):
            assert tg.autograd.is_anomaly_enabled()
            return (tg.sqrt(x) * 0.0).sum().backward()
    with pytest.raises(RuntimeError, match="SqrtBackward0"):
        f(tg.tensor([0.0], requires_grad=True))
    assert not tg.autograd.is_anomaly_enabled()


def test_anomaly_mode_turned_on_in_the_middle_of_a_tape():
    x = tg.tensor([1.0, 4.0], requires_grad=True)
    y = x * 2                                   # recorded before: no source line
    tg.autograd.set_detect_anomaly(True)
    z = tg.log(y - 2.0)                         # ANOMALY-LOG: log'(0) = inf
    with pytest.raises(RuntimeError) as e:
        z.sum().backward()
    assert "LogBackward0" in str(e.value) and "line %d" % _line_of("ANOMALY-LOG") in str(e.value)


# -- memory ------------------------------------------------------------------------
def test_memory_stats_counts_and_releases():
    gc.collect()
    base = tg.memory_stats()
    x = tg.ones(1000, requires_grad=True)
    y = (x.sin() * x).sum()
    s = tg.memory_stats()
    assert s["tapes"] == base["tapes"] + 1
    assert s["entries"] == base["entries"] + 4          # leaf, sin, mul, sum
    assert s["saved_bytes"] == base["saved_bytes"] + 2 * 8000   # x (for sin and mul) and sin(x)
    y.backward()
    assert tg.memory_stats()["saved_bytes"] == base["saved_bytes"]     # backward frees what it consumed
    del y
    assert tg.memory_stats() == base                    # the tape went with its last tensor


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_ten_thousand_training_steps_hold_flat_memory():
    # (the compiled sweep loaded first: loading it, about 150 MB of Numba and LLVM, is no leak;
    # run alone, the test would otherwise see it happen between its two measurements)
    tg._jit.load()
    rng = np.random.default_rng(0)
    X = tg.tensor(rng.standard_normal((32, 8)))
    Y = tg.tensor(rng.standard_normal((32, 1)))
    model = tg.nn.Sequential(tg.nn.Linear(8, 16), tg.nn.Tanh(), tg.nn.Linear(16, 1))
    opt = tg.optim.SGD(model.parameters(), lr=0.01)
    stats, rss = {}, {}
    for it in range(10_000):
        opt.zero_grad()
        loss = ((model(X) - Y) ** 2).mean()
        loss.backward()
        opt.step()
        if it in (200, 9_999):
            stats[it] = tg.memory_stats()
            rss[it] = _rss_bytes()
    assert stats[200] == stats[9_999]
    assert stats[9_999]["tapes"] <= 2
    assert rss[9_999] - rss[200] < 8 * 2 ** 20, rss
    assert loss.item() < ((Y - Y.mean()) ** 2).mean().item()    # it did train


def test_recording_without_backward_holds_bounded_memory():
    """A loop that records (grad mode on) but never calls backward: each iteration's
    graph dies with its tensors, so what the tapes hold stays bounded (PyTorch frees
    such graphs node by node; tapegrad starts a new tape past a size budget)."""
    rng = np.random.default_rng(0)
    W = tg.tensor(rng.standard_normal((100, 100)) * 0.1, requires_grad=True)
    X = tg.tensor(rng.standard_normal((100, 100)))
    peak, rss = 0, {}
    budget = 2 * tg.core.tape.ROTATE_ELEMENTS * 8        # two tapes' worth of float64
    for it in range(3000):
        y = (X @ W).tanh().sum()
        assert np.isfinite(y.item())
        peak = max(peak, tg.memory_stats()["saved_bytes"])
        if it in (1000, 2999):
            rss[it] = _rss_bytes()
    assert peak < budget, peak
    assert rss[2999] - rss[1000] < 64 * 2 ** 20, rss
    y.backward()                                      # the last graph still differentiates
    Xn, Wn = X.numpy(), W.detach().numpy()
    np.testing.assert_allclose(W.grad.numpy(), Xn.T @ (1 - np.tanh(Xn @ Wn) ** 2),
                               rtol=1e-10)


def test_repeated_create_graph_without_backward_is_bounded():
    x = tg.tensor(np.linspace(0.1, 1.0, 2000), requires_grad=True)
    peak = 0
    for _ in range(600):
        g, = tg.autograd.grad((x ** 3).sum(), x, create_graph=True)
        h, = tg.autograd.grad(g.sum(), x, create_graph=True)
        peak = max(peak, tg.memory_stats()["saved_bytes"])
    np.testing.assert_allclose(h.detach().numpy(), 6 * x.detach().numpy(), rtol=1e-12)
    assert peak < 2 * tg.core.tape.ROTATE_ELEMENTS * 8 * 2, peak


def test_anomaly_mode_leaf_roots_and_inputs_accumulate_in_place():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    tg.autograd.backward([x], [tg.tensor([1.0, 1.0])])
    held = x.grad
    with tg.autograd.set_detect_anomaly(True):
        tg.autograd.backward([x], [tg.tensor([2.0, 3.0])])
        (x * x).sum().backward(inputs=[x])
    assert x.grad is held
    np.testing.assert_allclose(held.numpy(), [1 + 2 + 2, 1 + 3 + 4])
