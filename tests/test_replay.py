"""Tape replay (tg.compile, tg.record): replays agree with eager execution, guards
catch every branch, captured parameters are read live, tapes save and load."""
import gc
import os
import re
import subprocess
import sys
import textwrap
import warnings
import weakref

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F

sys.path.insert(0, os.path.dirname(__file__))
from test_ops import BINARY, MATMUL, PAIRS, REDUCTIONS, SHAPE_OPS, SHAPES, UNARY, inplace_fn, setitem_fn  # noqa: E402

rng = np.random.default_rng(7)


def _arr(shape, positive=False, away=0.0, lo=-2.0, hi=2.0):
    a = rng.uniform(lo, hi, size=shape)
    if positive:
        a = np.abs(a) + 0.5
    if away:
        a = np.where(np.abs(a) < away, a + np.sign(a + 1e-9) * away * 2, a)
    return a


def _scalar(fn):
    """fn's output folded to a scalar with fixed, uneven weights (so every element counts)."""
    def f(*xs):
        y = fn(*xs)
        w = np.linspace(0.5, 1.5, max(y.numel(), 1)).reshape(y.shape) if y.numel() else np.zeros(y.shape)
        return (y * tg.tensor(w, dtype=y.dtype)).sum()
    return f


def _eager(fn, arrays):
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]
    y = fn(*xs)
    y.backward()
    return y.item(), [x.grad.numpy() for x in xs]


def _compiled(cf, arrays):
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]
    y = cf(*xs)
    y.backward()
    return y.item(), [x.grad.numpy() for x in xs]


def _check_replay(fn, make, replayable=True):
    """Record on one set of inputs, then call with three others: values and
    gradients agree with eager execution on the same inputs (1e-12 relative)."""
    f = _scalar(fn)
    cf = tg.compile(f)
    _compiled(cf, make())
    for _ in range(3):
        arrays = make()
        v1, g1 = _compiled(cf, arrays)
        v2, g2 = _eager(f, arrays)
        np.testing.assert_allclose(v1, v2, rtol=1e-12, atol=1e-300)
        for a, b in zip(g1, g2):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    if replayable:
        assert cf.stats.replays == 3 and cf.stats.recordings == 1, (cf.stats, cf.why)
    return cf


CATALOG = {}
for _n, (_f, _kw) in UNARY.items():
    for _s in SHAPES:
        CATALOG["unary-%s-%s" % (_n, _s)] = (_f, (lambda s=_s, kw=_kw: [_arr(s, **kw)]))
for _n, (_f, _kw) in BINARY.items():
    for _p in PAIRS:
        CATALOG["binary-%s-%s" % (_n, _p)] = (_f, (lambda p=_p, kw=_kw: [_arr(p[0], **kw), _arr(p[1], **kw)]))
for _n, _f in REDUCTIONS.items():
    CATALOG["reduce-%s" % _n] = (_f, lambda: [_arr((2, 3, 4))])
for _n, _f in SHAPE_OPS.items():
    CATALOG["shape-%s" % _n] = (_f, lambda: [_arr((2, 3, 4))])
for _p in MATMUL:
    CATALOG["matmul-%s" % (_p,)] = (lambda a, b: a @ b, (lambda p=_p: [_arr(p[0]), _arr(p[1])]))
CATALOG["setitem"] = (setitem_fn, lambda: [_arr((3, 4)), _arr((4,))])
CATALOG["inplace"] = (inplace_fn, lambda: [_arr((3, 4))])
CATALOG["softmax-ce"] = (lambda x: F.cross_entropy(x, tg.tensor([0, 2, 1])), lambda: [_arr((3, 4))])

# a boolean mask from the values is a guard: new values with another mask record again
GUARDED = {"shape-mask"}


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_op_replays_like_eager(name):
    fn, make = CATALOG[name]
    _check_replay(fn, make, replayable=name not in GUARDED)


def test_where_condition_is_recomputed_on_replay():
    # where(a > 0, a, b): the comparison is part of the replay, not a frozen mask
    cf = tg.compile(lambda a, b: tg.where(a > 0, a, b).sum())
    x = tg.tensor([1.0, -1.0, 2.0], requires_grad=True)
    cf(x, tg.tensor([5.0, 6.0, 7.0]))
    x2 = tg.tensor([-1.0, 1.0, -2.0], requires_grad=True)
    y = cf(x2, tg.tensor([5.0, 6.0, 7.0]))
    assert y.item() == 5.0 + 1.0 + 7.0
    y.backward()
    assert x2.grad.tolist() == [0.0, 1.0, 0.0]
    assert cf.stats.replays == 1


def _replay_and_eager(f, x, w, calls=3):
    cf = tg.compile(f)
    out = []
    for _ in range(calls):
        W = tg.tensor(w, requires_grad=True)
        y = cf(tg.tensor(x), W)
        y.backward()
        out.append((y.item(), W.grad.numpy()))
    W = tg.tensor(w, requires_grad=True)
    y = f(tg.tensor(x), W)
    y.backward()
    assert cf.stats.replays == calls - 1
    return out, (y.item(), W.grad.numpy())


def test_replay_is_bit_for_bit_without_transcendental_functions():
    """Sums are added in NumPy's order, and +-*/, relu, squares and sqrt round
    alike: the compiled forward gives eager's bits."""
    def f(x, w):
        h = (x * w + 0.5).relu() + w / (x ** 2 + 1.0)      # (> 0: its sqrt is no nan, whatever the draws)
        return (h * h.sum(-1, keepdim=True)).mean() + h.sqrt().sum()
    x, w = _arr((5, 40), positive=True), _arr((5, 40), positive=True)
    replays, (v, g) = _replay_and_eager(f, x, w)
    for rv, rg in replays:
        assert rv == v and np.array_equal(rg, g)


def test_replay_agrees_with_eager_to_1e_12_with_transcendental_functions():
    """exp, tanh, ... run in libm in the compiled forward and in NumPy's SIMD
    loops eagerly: the last bit may differ, never more than 1e-12 relative;
    replays of the same inputs agree bit for bit."""
    def f(x, w):
        h = tg.tanh(x @ w)
        return (h.softmax(-1) * h).sum() + h.var() + h.exp().log_softmax(0).mean()
    x, w = _arr((5, 4)), _arr((4, 3))
    replays, (v, g) = _replay_and_eager(f, x, w, calls=4)
    for rv, rg in replays:
        np.testing.assert_allclose(rv, v, rtol=1e-12)
        np.testing.assert_allclose(rg, g, rtol=1e-12, atol=1e-15)
    for rv, rg in replays[2:]:      # (the first call records: it is the eager call)
        assert rv == replays[1][0] and np.array_equal(rg, replays[1][1])


# -- branches and guards --------------------------------------------------------
def branchy(x):
    if x.sum() > 0:                 # the guard
        return (x * x).sum()
    return (x * 3.0).sum()


def test_branch_gives_the_right_gradient_on_both_sides_back_and_forth():
    cf = tg.compile(branchy)
    for v in [1.0, 2.0, -1.0, -3.0, 0.5, -0.5, 4.0]:
        x = tg.tensor([v, 0.25], requires_grad=True)
        y = cf(x)
        y.backward()
        if v + 0.25 > 0:
            assert y.item() == v * v + 0.0625
            assert x.grad.tolist() == [2 * v, 0.5]
        else:
            assert y.item() == 3 * v + 0.75
            assert x.grad.tolist() == [3.0, 3.0]
    s = cf.stats
    assert (s.calls, s.recordings, s.replays) == (7, 2, 5)
    assert s.divergences == 1      # later switches find the other recording among the kept ones


def test_strict_raises_naming_the_line():
    cf = tg.compile(branchy, strict=True)
    cf(tg.tensor([1.0, 2.0], requires_grad=True))
    cf(tg.tensor([3.0, 2.0], requires_grad=True))
    with pytest.raises(tg.TapeDivergence) as e:
        cf(tg.tensor([-5.0, 2.0], requires_grad=True))
    msg = str(e.value)
    line = branchy.__code__.co_firstlineno + 1
    assert "test_replay.py\", line %d, in branchy" % line in msg
    assert "if x.sum() > 0" in msg
    assert "recorded True, now False" in msg


def test_item_and_float_are_guards():
    def f(x):
        s = float(x.sum().detach().numpy()) if False else x.sum().item()
        return x * s
    cf = tg.compile(lambda x: f(x).sum())
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    assert cf(x).item() == 9.0
    assert cf(tg.tensor([1.0, 2.0], requires_grad=True)).item() == 9.0
    assert cf.stats.replays == 1
    # a different value read by .item(): recorded again, the result follows eager execution
    assert cf(tg.tensor([2.0, 2.0], requires_grad=True)).item() == 16.0
    assert cf.stats.recordings == 2


def test_tensor_index_is_a_guard():
    def f(x, idx):
        return x[idx].sum() * 2
    cf = tg.compile(f)
    x = tg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    i1 = tg.tensor([0, 2])
    assert cf(x, i1).item() == 8.0
    assert cf(x, tg.tensor([0, 2])).item() == 8.0
    assert cf.stats.replays == 1
    y = cf(x, tg.tensor([1, 3]))        # an integer argument as index stays live: replayed
    assert y.item() == 12.0
    x.grad = None
    y.backward()
    assert x.grad.tolist() == [0.0, 2.0, 0.0, 2.0]
    assert cf.stats.recordings == 1 and cf.stats.replays == 2
    # an index computed inside the function is a guard on its values
    # an index computed off the tape inside the function: not replayed, still right
    cg = tg.compile(lambda x, k: x[tg.tensor([0, 1]) + k].sum())
    assert cg(x, 0).item() == 3.0 and cg(x, 0).item() == 3.0 and cg(x, 2).item() == 7.0
    assert cg.stats.replays == 0


def test_data_only_outputs_do_not_require_grad():
    cf = tg.compile(lambda x, w: ((x * 2).sum(), (x * w).sum()))
    x = tg.tensor([1.0, 2.0])
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    for _ in range(2):
        a, b = cf(x, w)
        assert not a.requires_grad and a.grad_fn is None and a.item() == 6.0
        assert b.requires_grad and b.grad_fn.name() == "SumBackward0" and b.item() == 11.0
    assert cf.stats.replays == 1


# -- captured tensors -------------------------------------------------------------
def _train(loss_fn, model, opt, batches):
    """Losses of a training loop (``loss_fn(model, X, y)`` per batch)."""
    out = []
    for X, y in batches:
        opt.zero_grad()
        loss = loss_fn(model, X, y)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def test_captured_parameters_update_between_replays():
    tg.manual_seed(0)
    X = tg.randn(16, 5)
    y = tg.tensor(np.arange(16) % 3)

    def losses(step_fn, model):
        return _train(step_fn, model, tg.optim.SGD(model.parameters(), lr=0.5, momentum=0.9), [(X, y)] * 6)

    def make():
        tg.manual_seed(1)
        return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))

    m1, m2 = make(), make()
    eager = losses(lambda m, X, y: F.cross_entropy(m(X), y), m1)
    model_ref = {}
    step = tg.compile(lambda X, y: F.cross_entropy(model_ref["m"](X), y))
    model_ref["m"] = m2
    replayed = losses(lambda m, X, y: step(X, y), m2)
    np.testing.assert_allclose(replayed, eager, rtol=1e-12)     # (log_softmax: libm's exp and log)
    assert eager[-1] < eager[0]
    assert step.stats.recordings == 1 and step.stats.replays == 5
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p1.numpy(force=True), p2.numpy(force=True), rtol=1e-12, atol=1e-15)


def test_captured_tensor_changing_shape_records_again():
    box = {"w": tg.tensor([1.0, 2.0], requires_grad=True)}
    cf = tg.compile(lambda x: (x * box["w"].sum()).sum())
    x = tg.tensor([1.0, 1.0, 1.0])
    assert cf(x).item() == 9.0
    box["w"].data = tg.tensor([1.0, 2.0, 3.0])      # the same tensor, a new shape
    y = cf(x)
    assert y.item() == 18.0
    assert cf.stats.recordings == 2
    y.backward()
    assert box["w"].grad.tolist() == [3.0, 3.0, 3.0]


def test_name_bound_to_another_tensor_records_again():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    cf = tg.compile(lambda x: (x * w).sum())
    x = tg.tensor([1.0, 1.0])
    assert cf(x).item() == 3.0
    w = tg.tensor([5.0, 7.0], requires_grad=True)     # the closure now names another tensor
    y = cf(x)
    assert y.item() == 12.0 and cf.stats.recordings == 2
    y.backward()
    assert w.grad.tolist() == [1.0, 1.0]


def test_captured_tensor_updated_in_place_is_read_live():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    cf = tg.compile(lambda x: (x * w).sum())
    x = tg.tensor([3.0, 4.0])
    assert cf(x).item() == 11.0
    with tg.no_grad():
        w.mul_(2.0)
    y = cf(x)
    assert y.item() == 22.0 and cf.stats.replays == 1
    y.backward()
    assert w.grad.tolist() == [3.0, 4.0]


# -- what cannot be replayed runs eagerly (and tg.record refuses it) ----------------
@pytest.mark.parametrize("body, why", [
    (lambda x: (x * x.detach()).sum(), "off the tape"),
    (lambda x: (x * tg.randn(3)).sum(), "random"),
    (lambda x: (x * x.argmax()).sum(), "off the tape"),
])
def test_not_replayable_runs_eagerly(body, why):
    tg.manual_seed(3)
    cf = tg.compile(body)
    x = tg.tensor([1.0, 3.0, 2.0], requires_grad=True)
    tg.manual_seed(5)
    y1 = cf(x)
    tg.manual_seed(5)
    y2 = body(tg.tensor([1.0, 3.0, 2.0], requires_grad=True))
    assert y1.item() == y2.item()
    cf(x)
    assert cf.stats.replays == 0 and cf.stats.eager == 1
    assert why in next(iter(cf.why.values()))
    with pytest.raises(tg.NotReplayable, match=why):
        tg.record(body, np.array([1.0, 3.0, 2.0]))


def test_random_numbers_are_fresh_each_call():
    cf = tg.compile(lambda x: (x * tg.rand(100)).sum())
    x = tg.ones(100, requires_grad=True)
    tg.manual_seed(0)
    a = cf(x).item()
    b = cf(x).item()
    assert a != b           # fresh random numbers each call, as eager execution
    assert cf.stats.replays == 0


# -- tg.record ------------------------------------------------------------------------
def rosen(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def test_record_value_and_grad_and_scipy():
    from scipy.optimize import minimize, rosen as srosen, rosen_der
    tape = tg.record(rosen, np.zeros(6))
    x = np.array([0.3, -0.2, 1.5, 0.7, 0.1, 2.0])
    v, g = tape.value_and_grad(x)
    assert v == pytest.approx(srosen(x), rel=1e-14)
    np.testing.assert_allclose(g, rosen_der(x), rtol=1e-13)
    np.testing.assert_allclose(tape.gradient(x), g, rtol=0)
    assert tape(x) == pytest.approx(srosen(x), rel=1e-14)
    res = minimize(tape.value_and_grad, np.full(6, -0.5), jac=True, method="BFGS")
    assert res.success and np.abs(res.x - 1).max() < 1e-4


def test_tg_Tape_is_a_deprecated_alias_of_RecordedTape():
    tape = tg.record(lambda x: (x * x).sum(), np.array([1.0, 2.0]))
    assert type(tape) is tg.RecordedTape
    assert repr(tape) == "<tapegrad.RecordedTape of 3 entries, 0 guards>"
    with pytest.warns(DeprecationWarning, match="tapegrad.Tape is deprecated.*tapegrad.RecordedTape"):
        alias = tg.Tape
    assert alias is tg.RecordedTape and isinstance(tape, alias)
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        tg.NoSuchName


def test_replayed_tapes_carry_what_only_replay_needs():
    from tapegrad.replay.replayed import ArraysPlan, NumbersPlan, ReplayedTape
    from tapegrad.replay.session import RecordingTape
    from tapegrad.core.tape import Tape, state
    assert Tape.plan is None and Tape.shapes is None
    assert not {"scalar", "plan", "vaddr", "arena", "views", "shapes"} & set(Tape.__slots__)
    assert type(tg.tensor([1.0], requires_grad=True).exp()._tape) is Tape
    tapes = []

    def body(x):
        tapes.append(state().tape)
        return (x * x).sum()
    tg.compile(body)(tg.tensor([1.0, 2.0, 3.0], requires_grad=True))
    assert type(tapes[0]) is RecordingTape and tapes[0].shapes == {0: (3,), 2: ()}      # (x, sum: not x * x)
    f = tg.compile(lambda x: (x * x).sum())
    for xs, plan in (([1.0, 2.0], ArraysPlan), ([3.0], NumbersPlan)):
        for i in range(3):          # (the first call records: its result is the eager call's own)
            x = tg.tensor(xs, requires_grad=True)
            y = f(x)
            if i:
                assert type(y._tape) is ReplayedTape and type(y._tape.plan) is plan
                assert y._tape.arrays() is y._tape.views
            else:
                assert type(y._tape) is RecordingTape and y._tape.plan is None
            y.backward()
            assert x.grad.tolist() == [2 * v for v in xs]
    assert f.stats.recordings == 2 and f.stats.replays == 4


def test_record_vjp_and_several_arguments():
    tape = tg.record(lambda a, b: tg.tanh(a @ b), np.ones((2, 3)), np.ones((3, 4)))
    A, B = _arr((2, 3)), _arr((3, 4))
    ct = _arr((2, 4))
    y, (ga, gb) = tape.vjp((A, B), ct)
    np.testing.assert_allclose(y, np.tanh(A @ B), rtol=1e-14)
    d = ct * (1 - np.tanh(A @ B) ** 2)
    np.testing.assert_allclose(ga, d @ B.T, rtol=1e-12)
    np.testing.assert_allclose(gb, A.T @ d, rtol=1e-12)


def test_record_diverges_with_an_error():
    tape = tg.record(branchy, np.array([1.0, 2.0]))
    assert tape.value_and_grad(np.array([3.0, 1.0]))[0] == 10.0
    with pytest.raises(tg.TapeDivergence, match="recorded True, now False"):
        tape.value_and_grad(np.array([-3.0, 1.0]))
    with pytest.raises(ValueError, match="shape"):
        tape(np.zeros(3))


def test_saved_tape_replays_in_a_fresh_process(tmp_path):
    tape = tg.record(rosen, np.zeros(5))
    path = tmp_path / "rosen.tape"
    tape.save(str(path))
    x = np.array([0.5, -1.0, 2.0, 0.25, 1.5])
    v, g = tape.value_and_grad(x)
    code = textwrap.dedent("""
        import sys, numpy as np, tapegrad as tg
        tape = tg.load_tape(sys.argv[1])
        v, g = tape.value_and_grad(np.array([0.5, -1.0, 2.0, 0.25, 1.5]))
        print(repr(v), repr(g.tolist()))
    """)
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    v2, g2 = out.stdout.strip().split(" ", 1)
    assert float(v2) == v
    assert eval(g2) == g.tolist()
    import pickle
    assert pickle.loads(pickle.dumps(tape)).value_and_grad(x)[0] == v


def test_load_refuses_another_format(tmp_path, monkeypatch):
    from tapegrad.replay import tapefile as _tapefile
    tape = tg.record(rosen, np.zeros(3))
    path = tmp_path / "old.tape"
    monkeypatch.setattr(_tapefile, "FORMAT_VERSION", 999)
    tape.save(str(path))
    monkeypatch.undo()
    with pytest.raises(ValueError, match="saved in format 999 .*; this tapegrad reads format 2"):
        tg.load_tape(str(path))
    (tmp_path / "junk.tape").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="not a tapegrad tape"):
        tg.load_tape(str(tmp_path / "junk.tape"))


# -- memory ---------------------------------------------------------------------------
def _traced_growth(run, warm, first, second):
    """Traced memory after ``run(warm)`` then ``run(first)``, and after ``run(second)`` more."""
    import tracemalloc
    run(warm)
    gc.collect()
    tracemalloc.start()
    run(first)
    gc.collect()
    a = tracemalloc.get_traced_memory()[0]
    run(second)
    gc.collect()
    b = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return a, b


def test_long_replay_loop_keeps_memory_flat(kernels):
    # (kernels loaded first: run alone, the interpreted start would load Numba mid-measure)
    w = tg.tensor(_arr((8,)), requires_grad=True)
    cf = tg.compile(lambda x: (tg.sin(x) * w).sum())
    x = tg.tensor(_arr((8,)))

    def run(k):
        for _ in range(k):
            w.grad = None
            cf(x).backward()

    a, b = _traced_growth(run, 200, 500, 5000)
    assert b - a < 64 * 1024, (a, b)
    assert cf.stats.replays == 5699
    assert tg.memory_stats()["tapes"] < 20


# -- the compiled path for tapes of single numbers, and arguments of every kind --------
def recurrence(y0, w, steps):
    y = y0
    for _ in range(steps):
        y = tg.sin(y) * w + tg.cos(y) * 0.5 - tg.tanh(y) / 3.0 + tg.maximum(y, w) ** 2 * 0.1
    return y.sum()


def test_single_number_tapes_replay_in_compiled_loops_exactly():
    cf = tg.compile(recurrence)
    for v in (0.3, -0.2, 0.7):
        y0, w = tg.tensor([v], requires_grad=True), tg.tensor([0.9], requires_grad=True)
        out = cf(y0, w, 40)
        out.backward()
        e0, ew = tg.tensor([v], requires_grad=True), tg.tensor([0.9], requires_grad=True)
        ref = recurrence(e0, ew, 40)
        ref.backward()
        assert out.item() == pytest.approx(ref.item(), rel=1e-13)
        assert y0.grad.item() == pytest.approx(e0.grad.item(), rel=1e-12)
        assert w.grad.item() == pytest.approx(ew.grad.item(), rel=1e-12)
    R = cf.cache[next(iter(cf.cache))][0]
    assert R.scalar is True
    assert cf.stats.replays == 2


def test_single_number_tape_backward_twice_follows_pytorch():
    cf = tg.compile(recurrence)
    w = tg.tensor([0.9], requires_grad=True)
    cf(tg.tensor([0.3]), w, 5)
    y = cf(tg.tensor([0.3]), w, 5)
    w.grad = None
    y.backward(retain_graph=True)
    g1 = w.grad.item()
    y.backward()
    assert w.grad.item() == pytest.approx(2 * g1, rel=1e-14)
    y2 = cf(tg.tensor([0.3]), w, 5)
    y2.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y2.backward()


def test_leaves_that_received_grad_keep_replaying():
    w = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    cf = tg.compile(lambda w, x: (w * x).sum())
    x = tg.tensor([1.0, 1.0, 2.0])
    for i in range(5):
        cf(w, x).backward()
        assert w.grad.tolist() == [float(i + 1), float(i + 1), 2.0 * (i + 1)]
    assert cf.stats.recordings == 1 and cf.stats.replays == 4


def test_non_leaf_argument_passes_the_gradient_back():
    cf = tg.compile(lambda h: (h * h).sum())
    for v in (1.0, 2.0):
        x = tg.tensor([v, 3.0], requires_grad=True)
        h = x * 2
        y = cf(h)
        assert y.item() == 4 * v * v + 36.0
        y.backward()
        assert x.grad.tolist() == [8 * v, 24.0]
    assert cf.stats.replays == 1


def test_float32_replays_in_float32():
    cf = tg.compile(lambda x, w: tg.tanh(x @ w).sum())
    for _ in range(2):
        x = tg.tensor(_arr((3, 4)), dtype=tg.float32)
        w = tg.tensor(_arr((4, 2)), dtype=tg.float32, requires_grad=True)
        y = cf(x, w)
        y.backward()
        assert y.dtype == tg.float32 and w.grad.dtype == tg.float32
        w2 = tg.tensor(w.detach().numpy(), requires_grad=True)
        ref = tg.tanh(x @ w2).sum()
        ref.backward()
        assert y.item() == ref.item()
        assert np.array_equal(w.grad.numpy(), w2.grad.numpy())
    assert cf.stats.replays == 1


def test_outputs_keep_the_structure_and_python_values():
    cf = tg.compile(lambda x, k: {"loss": (x * k).sum(), "parts": [x * k, k], "n": x.numel()})
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(2):
        out = cf(x, 3)
        assert set(out) == {"loss", "parts", "n"}
        assert out["loss"].item() == 9.0 and out["parts"][0].tolist() == [3.0, 6.0]
        assert out["parts"][1] == 3 and out["n"] == 2
    assert cf(x, 4)["loss"].item() == 12.0      # another constant: another recording
    assert cf.stats.recordings == 2 and cf.stats.replays == 1


def test_log_compiles(capsys):
    cf = tg.compile(lambda x: (x * 2).sum(), log=True)
    cf(tg.tensor([1.0], requires_grad=True))
    cf(tg.tensor([1.0], requires_grad=True))
    err = capsys.readouterr().err
    assert err.count("tapegrad.compile: recording") == 1 and "tensor[1]" in err


def test_single_number_tape_recomputes_what_depends_only_on_data():
    # sin(x) of a data argument is a constant of each replayed tape, but a new one each call
    cf = tg.compile(lambda x, w: (tg.sin(x) * w + tg.exp(x)).sum())
    w = tg.tensor([2.0], requires_grad=True)
    for v in (0.5, 1.0, -0.25):
        w.grad = None
        y = cf(tg.tensor([v]), w)
        y.backward()
        assert y.item() == pytest.approx(2 * np.sin(v) + np.exp(v), rel=1e-15)
        assert w.grad.item() == pytest.approx(np.sin(v), rel=1e-15)
    assert cf.stats.replays == 2 and cf.cache[next(iter(cf.cache))][0].scalar


# -- integer arguments used as indices stay live ------------------------------------------
def test_training_with_new_labels_every_batch_replays():
    tg.manual_seed(0)
    rng_ = np.random.default_rng(0)
    Xs = [tg.tensor(rng_.standard_normal((8, 5))) for _ in range(6)]
    ys = [tg.tensor(rng_.integers(0, 3, 8)) for _ in range(6)]

    def make():
        tg.manual_seed(2)
        return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))

    def train(loss_fn, model):
        return _train(loss_fn, model, tg.optim.Adam(model.parameters(), lr=0.05), list(zip(Xs, ys)))

    m1, m2 = make(), make()
    eager = train(lambda m, X, y: F.cross_entropy(m(X), y), m1)
    step = tg.compile(lambda X, y: F.cross_entropy(m2(X), y))
    replayed = train(lambda m, X, y: step(X, y), m2)
    np.testing.assert_allclose(replayed, eager, rtol=1e-13)
    assert step.stats.recordings == 1 and step.stats.replays == 5, (step.stats, step.why)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p1.numpy(force=True), p2.numpy(force=True), rtol=1e-12)


@pytest.mark.parametrize("flatten", [lambda t: t.view(-1), lambda t: t.reshape(-1), lambda t: t.flatten(),
                                     lambda t: t.view((t.shape[0] * t.shape[1],))],
                         ids=["view", "reshape", "flatten", "view_tuple"])
def test_labels_reshaped_inside_the_function_stay_live(flatten):
    """nanoGPT's loss: ``cross_entropy(logits.view(-1, C), targets.view(-1), ignore_index=-1)``
    with (batch, block) targets: a replay takes each batch's labels, reshaped as recorded."""
    rng_ = np.random.default_rng(1)
    W = tg.tensor(rng_.standard_normal((5, 7)), requires_grad=True)

    def loss(x, t):
        logits = x @ W
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), flatten(t), ignore_index=-1)
    step = tg.compile(loss)
    for i in range(5):
        x, t = tg.tensor(rng_.standard_normal((2, 3, 5))), tg.as_tensor(rng_.integers(0, 7, (2, 3)))
        W.grad = None
        got = step(x, t)
        got.backward()
        g = W.grad.numpy().copy()
        W.grad = None
        want = loss(x, t)
        want.backward()
        assert got.item() == pytest.approx(want.item(), rel=1e-14)
        np.testing.assert_allclose(g, W.grad.numpy(), rtol=1e-13, atol=1e-15)
    assert step.stats.recordings == 1 and step.stats.replays == 4 and step.stats.eager == 0, (step.stats, step.why)
    # an ignored label, then one out of range: eager's answers (a guard on the labels' flags)
    t = tg.as_tensor(np.array([[0, -1, 2], [3, 4, 5]]))
    assert step(x, t).item() == pytest.approx(loss(x, t).item(), rel=1e-14)
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        step(x, tg.as_tensor(np.array([[0, 1, 2], [3, 4, 9]])))


@pytest.mark.parametrize("bad", [lambda t: t.view(4), lambda t: t.reshape(5), lambda t: t.flatten(3),
                                 lambda t: t.flatten(1, 0), lambda t: t.mT.view(-1)],
                         ids=["view", "reshape", "flatten_dim", "flatten_order", "view_noncontiguous"])
def test_labels_reshaped_wrongly_raise_as_eager(bad):
    W = tg.tensor(_arr((5, 7)), requires_grad=True)

    def loss(x, t):
        return F.cross_entropy((x @ W).view(-1, 7), bad(t))
    x, t = tg.tensor(_arr((2, 3, 5))), tg.as_tensor(np.zeros((2, 3), np.int64))
    with pytest.raises((RuntimeError, IndexError)) as eager:
        loss(x, t)
    with pytest.raises(type(eager.value), match=re.escape(str(eager.value))):
        tg.compile(loss)(x, t)


def test_labels_ignored_or_out_of_range_follow_eager():
    cf = tg.compile(lambda z, y: F.cross_entropy(z, y))
    z = tg.tensor(_arr((4, 3)), requires_grad=True)
    y1 = tg.tensor([0, 2, 1, 1])
    assert cf(z, y1).item() == pytest.approx(F.cross_entropy(z, y1).item(), rel=1e-15)
    y2 = tg.tensor([0, -100, 1, 2])      # an ignored label: the recording's guard diverges
    assert cf(z, y2).item() == pytest.approx(F.cross_entropy(z, y2).item(), rel=1e-15)
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        cf(z, tg.tensor([0, 7, 1, 2]))
    assert cf(z, tg.tensor([2, 2, 0, 1])).item() == pytest.approx(
        F.cross_entropy(z, tg.tensor([2, 2, 0, 1])).item(), rel=1e-15)
    assert cf.stats.replays >= 1


def test_integer_index_argument_is_live():
    cf = tg.compile(lambda x, idx: (x[idx] * tg.tensor([1.0, 10.0])).sum())
    x = tg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    for idx, want, grad in (([0, 1], 21.0, [1, 10, 0, 0]), ([3, 3], 44.0, [0, 0, 0, 11]),
                            ([-1, 2], 34.0, [0, 0, 10, 1])):
        x.grad = None
        y = cf(x, np.array(idx))
        assert y.item() == want
        y.backward()
        assert x.grad.tolist() == grad
    with pytest.raises(IndexError):
        cf(x, np.array([0, 9]))         # the replay fails, so the call runs eagerly and raises
    assert cf.stats.replays == 2 and cf.stats.recordings == 1


def test_max_along_a_dim_picks_anew_on_replay():
    cf = tg.compile(lambda x: (x.max(1).values * tg.tensor([1.0, 10.0])).sum())
    for rows in ([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], [[9.0, 5.0, 2.0], [7.0, 0.0, 8.0]]):
        x = tg.tensor(rows, requires_grad=True)
        y = cf(x)
        y.backward()
        m = np.array(rows)
        assert y.item() == m.max(1) @ [1.0, 10.0]
        want = np.zeros_like(m)
        want[0, m[0].argmax()] = 1.0
        want[1, m[1].argmax()] = 10.0
        assert x.grad.tolist() == want.tolist()
    assert cf.stats.replays == 1
    # the indices it returns are computed off the tape: a function using them runs eagerly
    ci = tg.compile(lambda x: x.max(1).indices)
    x = tg.tensor([[1.0, 5.0], [7.0, 0.0]], requires_grad=True)
    assert ci(x).tolist() == [1, 0] and ci(x).tolist() == [1, 0] and ci.stats.replays == 0


def test_labels_and_max_along_a_dim_in_one_tape_replay_their_own_indices(kernels):
    """Two live gathers in one compiled replay: cross-entropy's indices made before
    the kernel, max's after NumPy picks anew.  Both must reach the reverse sweep
    (the second once kept the recorded argmax: a wrong gradient)."""
    def body(x, W, rows, labels):
        z = x @ W
        m = z.max(1)[0]
        return -z.log_softmax(1)[rows, labels].mean() + (m * m).sum()

    cf = tg.compile(body)
    rng_ = np.random.default_rng(5)
    rows = np.arange(6)
    for _ in range(4):
        x = tg.tensor(rng_.standard_normal((6, 4)))
        labels = rng_.integers(-5, 5, 6)        # negative labels count from the end, as in eager
        W = tg.tensor(rng_.standard_normal((4, 5)), requires_grad=True)
        y = cf(x, W, rows, labels)
        y.backward()
        W0 = tg.tensor(W.numpy(force=True), requires_grad=True)
        z = body(x, W0, rows, labels)
        z.backward()
        np.testing.assert_allclose(y.item(), z.item(), rtol=1e-12)
        np.testing.assert_allclose(W.grad.numpy(), W0.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert cf.stats.replays == 3 and _recording(cf).arena is True
    with pytest.raises(IndexError):     # a label out of range: the replay gives up, eager raises
        cf(x, W, rows, np.array([0, 1, 2, 3, 4, 5]))


def test_constant_row_index_with_label_vector_replays_like_eager(kernels):
    """``z[3, labels]``: the 3 is a constant of the recording, never an argument's
    position (argument 3 here is another integer vector of the same length)."""
    cf = tg.compile(lambda z, w, labels, other: (z * w)[3, labels].sum() + 0.0 * float(other.shape[0]))
    w = tg.tensor(np.ones((5, 4)), requires_grad=True)
    other = np.array([4, 4, 4, 4, 4])
    for k in range(4):
        zk = np.arange(20.0).reshape(5, 4) + k
        if k == 1:          # rows 3 and 4 alike at the first compiled replay, whose values are checked
            zk[4] = zk[3]
        z = tg.tensor(zk)
        labels = np.array([0, 1, 3, 2, k % 4])
        w.grad = None
        y = cf(z, w, labels, other)
        y.backward()
        assert y.item() == (z.numpy()[3, labels]).sum()
        want = np.zeros((5, 4))
        np.add.at(want, (3, labels), z.numpy()[3, labels])
        assert w.grad.tolist() == want.tolist()
    assert cf.stats.replays == 3


# -- the compiled forward (kernels/forward.py) and its arena ------------------------
@pytest.fixture
def kernels():
    """The compiled forward needs the kernels loaded (before that, replays run NumPy)."""
    from tapegrad import _jit
    _jit.load()


def _recording(cf):
    (entry,) = [v for v in cf.cache.values() if isinstance(v, list)]
    return entry[0]


def _mlp_step(n_in=6, hidden=8):
    W1 = tg.tensor(_arr((n_in, hidden)), requires_grad=True)
    W2 = tg.tensor(_arr((hidden, 3)), requires_grad=True)
    cf = tg.compile(lambda x, labels: F.cross_entropy((x @ W1).relu() @ W2, labels))
    return cf, (W1, W2)


def test_compiled_forward_runs_every_entry_of_an_mlp(kernels):
    cf, (W1, W2) = _mlp_step()
    labels = np.array([0, 2, 1, 1, 0])
    for _ in range(3):
        cf(tg.tensor(_arr((5, 6))), labels).backward()
    R = _recording(cf)
    assert R.arena is True
    computed = [s for s in range(R.n) if R.ints[s, 0] >= 64]
    assert all(R.known[s] for s in computed), [R.names[s] for s in computed if not R.known[s]]
    x = _arr((5, 6))
    W1.grad = W2.grad = None
    y = cf(tg.tensor(x), labels)
    y.backward()
    g1, g2 = W1.grad.numpy(), W2.grad.numpy()
    W1.grad = W2.grad = None
    z = F.cross_entropy((tg.tensor(x) @ W1).relu() @ W2, labels)
    z.backward()
    np.testing.assert_allclose(y.item(), z.item(), rtol=1e-12)
    np.testing.assert_allclose(g1, W1.grad.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g2, W2.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_compiled_forward_is_for_float64_and_middling_sizes(kernels):
    f32 = tg.compile(lambda x: (x * x).sum())
    big = tg.compile(lambda x: (x * x).sum())
    for _ in range(3):
        f32(tg.tensor(_arr(4), dtype=tg.float32))
        big(tg.tensor(_arr(1 << 17)))
    assert _recording(f32).arena is False and _recording(big).arena is False


def test_arena_is_reused_only_when_nothing_holds_it(kernels):
    cf, (W1, W2) = _mlp_step()
    labels = np.array([0, 2, 1, 1, 0])
    xs = [_arr((5, 6)) for _ in range(6)]
    for x in xs[:3]:
        cf(tg.tensor(x), labels).backward()
    R = _recording(cf)
    first = weakref.ref(R.spare_arena["arena"][0])      # (a reference of its own would hold it)
    cf(tg.tensor(xs[3]), labels).backward()     # freed by its backward: the same memory again
    assert R.spare_arena["arena"][0] is first()
    # two losses alive at once: the second may not overwrite the first's values
    a = cf(tg.tensor(xs[4]), labels)
    b = cf(tg.tensor(xs[5]), labels)
    assert R.spare_arena["arena"][0] is not first()
    for loss, x in ((a, xs[4]), (b, xs[5])):
        W1.grad = W2.grad = None
        loss.backward()
        g = W1.grad.numpy()
        W1.grad = W2.grad = None
        F.cross_entropy((tg.tensor(x) @ W1).relu() @ W2, labels).backward()
        np.testing.assert_allclose(g, W1.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_threads_replaying_one_recording_get_their_own_memory(kernels):
    """Replays of one recording in several threads at once: arenas, value addresses
    and adjoints reused across calls must never be shared between two live tapes."""
    import sys
    import threading
    cf = tg.compile(lambda x, W1, W2, labels: F.cross_entropy((x @ W1).relu() @ W2, labels))
    labels = np.array([0, 2, 1, 1, 0])
    rng_ = np.random.default_rng(3)
    jobs = [[(_arr((5, 6)) + rng_.standard_normal((5, 6)), _arr((6, 8)) * (1 + k), _arr((8, 3)))
             for k in range(25)] for _ in range(4)]
    for x, w1, w2 in jobs[0][:3]:
        cf(tg.tensor(x), tg.tensor(w1, requires_grad=True), tg.tensor(w2, requires_grad=True), labels).backward()
    bad = []

    def work(items):
        for x, w1, w2 in items:
            W1, W2 = tg.tensor(w1, requires_grad=True), tg.tensor(w2, requires_grad=True)
            y = cf(tg.tensor(x), W1, W2, labels)
            y.backward()
            V1, V2 = tg.tensor(w1, requires_grad=True), tg.tensor(w2, requires_grad=True)
            z = F.cross_entropy((tg.tensor(x) @ V1).relu() @ V2, labels)
            z.backward()
            if not (np.allclose(y.item(), z.item(), rtol=1e-12) and np.allclose(W1.grad.numpy(), V1.grad.numpy(),
                                                                             rtol=1e-12, atol=1e-15)
                    and np.allclose(W2.grad.numpy(), V2.grad.numpy(), rtol=1e-12, atol=1e-15)):
                bad.append((y.item(), z.item()))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)         # switch threads as often as the interpreter allows
    try:
        threads = [threading.Thread(target=work, args=(items,)) for items in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not bad, bad[:3]
    assert cf.stats.replays >= 100 and _recording(cf).arena is True


def test_arena_values_handed_out_stay_put(kernels):
    """tg.record returns arrays of the replay and create_graph keeps values in the
    new graph: neither may change when the tape is replayed again."""
    tape = tg.record(lambda x, w: (x @ w).tanh(), _arr((4, 3)), _arr((3, 2)))
    x1, w1 = _arr((4, 3)), _arr((3, 2))
    outs = [tape(x1, w1) for _ in range(3)]
    kept = outs[-1].copy()
    for _ in range(3):
        tape(_arr((4, 3)), _arr((3, 2)))
    assert np.array_equal(outs[-1], kept)
    np.testing.assert_allclose(kept, np.tanh(x1 @ w1), rtol=1e-12)

    cf = tg.compile(lambda x, w: ((x @ w).tanh() ** 2).sum())
    w = tg.tensor(_arr((3, 2)), requires_grad=True)
    for _ in range(3):
        cf(tg.tensor(_arr((4, 3))), w)
    x = _arr((4, 3))
    (g,) = tg.autograd.grad(cf(tg.tensor(x), w), [w], create_graph=True)
    for _ in range(3):
        cf(tg.tensor(_arr((4, 3))), w).backward()
    w.grad = None
    (g.sum()).backward()
    w2 = tg.tensor(w.detach().numpy(), requires_grad=True)
    (g2,) = tg.autograd.grad(((tg.tensor(x) @ w2).tanh() ** 2).sum(), [w2], create_graph=True)
    g2.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_adjoint_memory_reused_by_replays_never_changes_a_gradient_handed_out(kernels):
    """A replay's backward reuses its adjoint arrays when nothing holds them: a
    hook's gradient and a .grad kept from one replay keep their values through the
    next ones."""
    cf, (W1, W2) = _mlp_step(48, 64)         # (W1 and the hidden layer: adjoints of their own)
    labels = np.array([0, 2, 1, 1, 0])
    seen = []
    W2.register_hook(lambda g: seen.append(g))
    xs = [_arr((5, 48)) for _ in range(5)]
    grads = []
    for x in xs:
        W1.grad = W2.grad = None
        cf(tg.tensor(x), labels).backward()
        grads.append((W1.grad, W2.grad))
    for x, (g1, g2), h in zip(xs, grads, seen[len(seen) - len(xs):]):
        V1 = tg.tensor(W1.detach().numpy(), requires_grad=True)
        V2 = tg.tensor(W2.detach().numpy(), requires_grad=True)
        F.cross_entropy((tg.tensor(x) @ V1).relu() @ V2, labels).backward()
        np.testing.assert_allclose(g1.numpy(), V1.grad.numpy(), rtol=1e-12, atol=1e-15)
        for got in (g2, h):
            np.testing.assert_allclose(got.numpy(), V2.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_single_number_replays_reuse_memory_only_when_their_tape_is_gone(kernels):
    """Replays of a single-number tape take the last one's version counters and
    adjoint arrays again only once nothing holds them: live tapes stay separate."""
    cf = tg.compile(lambda y, w: (tg.sin(y) * w + tg.cos(y) * 0.5).sum())
    w = tg.tensor([0.7], requires_grad=True)
    for v in (0.1, 0.2, 0.3):
        cf(tg.tensor([v]), w).backward()
    ys = [tg.tensor([v], requires_grad=True) for v in (0.4, 0.5, 0.6)]
    losses = [cf(y, w) for y in ys]         # three tapes alive at once
    for loss, y in zip(losses[::-1], ys[::-1]):
        w.grad = None
        loss.backward()
        v = y.item()
        assert y.grad.item() == pytest.approx(np.cos(v) * 0.7 - np.sin(v) * 0.5, rel=1e-12)
        assert w.grad.item() == pytest.approx(np.sin(v), rel=1e-12)
    # a tape's "freed" marks outlive the next replays' backward passes
    for loss in losses:
        with pytest.raises(RuntimeError, match="second time"):
            loss.backward()
    # and so do its version counters: a value changed in place is still caught
    wa, wb = tg.tensor([0.7], requires_grad=True), tg.tensor([0.7], requires_grad=True)
    a = cf(tg.tensor([0.4], requires_grad=True), wa)
    with tg.no_grad():
        wa.add_(1.0)
    cf(tg.tensor([0.5], requires_grad=True), wb).backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        a.backward()


def test_long_compiled_replay_loop_keeps_memory_flat(kernels):
    """The compiled forward's arenas and the reused adjoints: a training loop's
    memory does not grow."""
    cf, (W1, W2) = _mlp_step(48, 64)
    labels = np.array([0, 2, 1, 1, 0])
    x = tg.tensor(_arr((5, 48)))

    def run(k):
        for _ in range(k):
            W1.grad = W2.grad = None
            cf(x, labels).backward()

    run(50)
    assert _recording(cf).arena is True
    a, b = _traced_growth(run, 0, 300, 3000)
    assert b - a < 64 * 1024, (a, b)
    assert tg.memory_stats()["tapes"] < 20


def test_compile_with_a_number_before_the_arrays():
    # a non-array argument before an array one: positions must stay in step (was an IndexError)
    f = tg.compile(lambda s, x: (x * x).sum() * s)
    x = tg.ones(3, requires_grad=True)
    for _ in range(3):
        y = f(2.0, x)
        y.backward()
        assert y.item() == 6.0
        np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0, 4.0])
        x.grad = None
    y = f(3.0, x)               # another number: another signature, recorded anew
    y.backward()
    assert y.item() == 9.0
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0, 6.0])
    assert f.stats.recordings == 2 and f.stats.replays == 2


def test_record_takes_numbers_as_zero_d_array_arguments():
    tape = tg.record(lambda s, x: (x * x).sum() * s, 2.0, np.ones(3))
    v, (gs, gx) = tape.value_and_grad(3.0, np.ones(3))
    assert v == 9.0 and gs == 3.0
    np.testing.assert_array_equal(gx, [6.0, 6.0, 6.0])
    tape = tg.record(lambda s, x: (x * x).sum() * s, np.float64(2.0), np.ones(3))
    v, gx = tape.value_and_grad(np.float64(2.0), np.ones(3), argnums=1)
    assert v == 6.0
    np.testing.assert_array_equal(gx, [4.0, 4.0, 4.0])
    with pytest.raises(TypeError, match="argument 0 is str"):
        tg.record(lambda s, x: x.sum(), "a", np.ones(3))


@pytest.mark.parametrize("n", [5, 5000])
def test_a_saved_comparison_mask_replays(n):
    # ``x * (x > 0)``: mul saves the mask promoted to float64; the replay's mask is made in that dtype
    c = tg.compile(lambda x: (x * (x > 0)).sum() + (x * tg.gt(x, 0.5)).sum())
    for seed in range(4):
        a = np.random.default_rng(seed).standard_normal(n)
        x = tg.tensor(a, requires_grad=True)
        v = c(x)
        v.backward()
        np.testing.assert_allclose(v.item(), (a * (a > 0)).sum() + (a * (a > 0.5)).sum(), rtol=1e-12)
        np.testing.assert_array_equal(x.grad.numpy(), (a > 0) * 1.0 + (a > 0.5))
    assert c.stats.replays == 3 and c.stats.divergences == 0


def test_float_casts_replay_in_their_dtype():
    """``x.float()`` / ``.double()`` are reshape entries: their replay casts as they did
    (the recording was refused: the replay kept the input's dtype)."""
    rng = np.random.default_rng(3)

    def f(x):
        return (x.float().exp() * 2).sum() + x.float().double().sin().sum()
    for n in (50, 3000):
        c = tg.compile(f)
        for i in range(3):
            xv = rng.standard_normal(n)
            a, b = tg.tensor(xv, requires_grad=True), tg.tensor(xv, requires_grad=True)
            got, want = c(a), f(b)
            got.backward()
            want.backward()
            assert got.dtype == want.dtype == tg.float64     # (0-d float32 + 0-d float64)
            assert got.item() == want.item()
            assert a.grad.dtype == tg.float64
            np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
        assert c.stats.replays == 2 and not c.why
    rt = tg.record(lambda x: x.float().sum(), np.arange(4.0))
    v = rt(np.arange(5.0, 9.0))
    assert float(v) == 26.0 and np.asarray(v).dtype == np.float32


def test_ops_on_transposed_views_replay():
    """An op on a transposed view keeps the view's layout in eager execution, so a sum
    of it adds in another order than the replay's (C-ordered) value: a few ulp apart,
    which the recording's check accepts (it refused these)."""
    rng = np.random.default_rng(5)
    fns = [lambda x: (x.t()[:, ::2] * 1.0).sum(),
           lambda x: (x.t()[1:, ::2] * x[::2, 1:].t()).exp().sum()]
    for f in fns:
        xv = rng.standard_normal((6, 8))
        rt = tg.record(f, xv)
        for k in range(2):
            xk = xv + k
            v, g = rt.value_and_grad(xk)
            x = tg.tensor(xk, requires_grad=True)
            want = f(x)
            want.backward()
            np.testing.assert_allclose(v, want.item(), rtol=1e-14, atol=0)
            np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-14, atol=1e-300)


def test_a_replay_that_raises_is_recorded_again_counted_and_warned_once():
    def f(x):
        return (x * x).sum()

    step = tg.compile(f)
    x = np.arange(4.0)
    assert float(step(tg.tensor(x))) == 14.0
    (R,) = next(iter(step.cache.values()))

    def broken(arrays):
        raise ValueError("a replay bug")

    R.forward = broken
    with pytest.warns(RuntimeWarning, match=r"replaying f raised ValueError: a replay bug; it was recorded again"):
        assert float(step(tg.tensor(x + 1))) == 30.0        # the eager value all the same
    assert step.stats.errors == 1 and step.stats.recordings == 2
    assert step.replay_error == "ValueError: a replay bug"
    assert "errors=1" in repr(step.stats)
    # the new recording replays; a second failure is counted, not warned again
    assert float(step(tg.tensor(x + 2))) == 54.0 and step.stats.replays == 1
    for entry in step.cache.values():
        for R in entry:
            R.forward = broken
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(step(tg.tensor(x))) == 14.0
    assert step.stats.errors == 2


@pytest.mark.parametrize("labels", ["argmax", "comparison", "max indices"])
def test_labels_computed_inside_the_function_are_not_replayed_stale(labels):
    """cross_entropy/nll_loss with labels computed from the inputs (not an argument): their
    values came from the recording's inputs, so the tape refuses to replay them and
    tg.compile runs such a function eagerly, with eager values and gradients."""
    import tapegrad.nn.functional as NF
    make = {"argmax": lambda x: x.argmax(1), "comparison": lambda x: (x[:, 0] > 0).long(),
            "max indices": lambda x: x.max(1)[1]}[labels]

    def f(x):
        return NF.cross_entropy(x, make(x)) + NF.nll_loss(x.log_softmax(1), make(x), reduction="sum")
    x0, x1 = np.array([[2.0, 0, 0], [0, 2, 0]]), np.array([[0.0, 0, 2], [-2, 0, 0]])
    with pytest.raises(tg.NotReplayable, match="computed off the tape"):
        tg.record(f, x0)
    c = tg.compile(f)
    for x in (x0, x1, x1):
        t, e = tg.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
        y, ye = c(t), f(e)
        y.backward()
        ye.backward()
        assert float(y) == float(ye)
        np.testing.assert_array_equal(t.grad.numpy(), e.grad.numpy())
    assert c.stats.replays == 0
