"""Replays take the last call's buffers again (``tapegrad.core.tape.take_spare``)
when nothing else holds them, and never one that a result handed out still uses."""
import sys
import weakref

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.core import tape as _tp
from tapegrad.kernels import sweep as _ks


@pytest.fixture
def compiled():
    """The compiled forward and reverse sweep (the sites that reuse adjoints are
    there), also under TAPEGRAD_INTERPRET=always (the engine's mode: one list)."""
    from tapegrad import _jit
    _jit.load()
    mode = engine.INTERPRET[0]
    engine.INTERPRET[0] = "never"
    yield
    engine.INTERPRET[0] = mode


def _recording(cf):
    (entry,) = [v for v in cf.cache.values() if isinstance(v, list)]
    return entry[0]


rng = np.random.default_rng(11)
IDENTITY_UNCHECKED = False


# -- the helper ---------------------------------------------------------------
def _made(*args):
    return ("made",) + args


def test_take_spare_takes_a_buffer_nothing_else_holds():
    spare = {"k": np.arange(3.0)}
    first = weakref.ref(spare["k"])
    got = _tp.take_spare(spare, "k", _made, 1)
    assert got is first() and "k" not in spare      # taken out while in use
    np.testing.assert_array_equal(got, [0.0, 1.0, 2.0])
    spare["k"] = got
    del got
    assert _tp.take_spare(spare, "k", _made) is first()


@pytest.mark.parametrize("holder", ["local", "view", "list", "tuple", "dict"])
def test_take_spare_makes_a_new_buffer_while_something_holds_it(holder):
    a = np.arange(4.0)
    spare = {"k": a}
    kept = {"local": lambda: a, "view": lambda: a[1:], "list": lambda: [a], "tuple": lambda: (a, 1),
            "dict": lambda: {0: a}}[holder]()
    del a
    assert _tp.take_spare(spare, "k", _made, 7, 8) == ("made", 7, 8)
    assert "k" not in spare
    held = kept if holder in ("local", "view") else kept[0]
    np.testing.assert_array_equal(held, [1.0, 2.0, 3.0] if holder == "view" else [0.0, 1.0, 2.0, 3.0])


def test_take_spare_missing_key_makes_one():
    spare = {}
    assert _tp.take_spare(spare, "k", _made, 5) == ("made", 5)
    assert _tp.take_spare(spare, "k", np.zeros, 3).tolist() == [0.0, 0.0, 0.0]


def test_take_spare_takes_a_pair_only_whole():
    spare = {"p": (np.zeros(2), np.ones(2))}
    first = weakref.ref(spare["p"][0])
    pair = _tp.take_spare(spare, "p", _made)
    assert pair[0] is first() and pair[1].tolist() == [1.0, 1.0]
    spare["p"] = pair
    del pair
    kept_part = spare["p"][1]            # one part held: neither is handed out again
    assert _tp.take_spare(spare, "p", _made) == ("made",)
    assert kept_part.tolist() == [1.0, 1.0]
    spare["p"] = (np.zeros(2), np.ones(2))
    kept_pair = spare["p"]               # the tuple itself held
    assert _tp.take_spare(spare, "p", _made) == ("made",)
    assert kept_pair[1].tolist() == [1.0, 1.0]


def test_take_spare_counts_are_measured_on_the_helper(monkeypatch):
    """The thresholds are the counts ``take_spare`` itself reads (measured at
    import): one more reference anywhere and the buffer is not taken."""
    measured = _tp._TAKEN_ALONE, _tp._PART_ALONE
    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        assert measured == (-1, -1)
        return
    assert measured[0] >= 1 and measured[1] > measured[0]      # (a part: also its tuple's reference)
    monkeypatch.setattr(_tp, "_TAKEN_ALONE", 0)     # (restored after the test, whatever it measures)
    monkeypatch.setattr(_tp, "_PART_ALONE", 0)
    _tp._calibrate()
    assert (_tp._TAKEN_ALONE, _tp._PART_ALONE) == measured
    spare = {}
    for limit in range(measured[0] - 1, 0, -1):
        spare["k"] = np.zeros(1)
        monkeypatch.setattr(_tp, "_TAKEN_ALONE", limit)
        assert _tp.take_spare(spare, "k", _made) == ("made",)


def test_take_spare_never_reuses_without_exact_counts(monkeypatch):
    # free-threaded Python: the thresholds are -1
    monkeypatch.setattr(_tp, "_TAKEN_ALONE", -1)
    monkeypatch.setattr(_tp, "_PART_ALONE", -1)
    spare = {"k": np.zeros(1), "p": (np.zeros(1), np.zeros(1))}
    assert _tp.take_spare(spare, "k", _made) == ("made",)
    assert _tp.take_spare(spare, "p", _made) == ("made",)


# -- single numbers: version counters (forward) and adjoints (backward) --------------
def _scalar_fn():
    return tg.compile(lambda y, w: (tg.sin(y) * w + tg.cos(y) * 0.5).sum())


def test_single_number_replays_reuse_versions_and_adjoints(compiled):
    cf = _scalar_fn()
    w = tg.tensor([0.7], requires_grad=True)
    for v in (0.1, 0.2, 0.3):
        cf(tg.tensor([v], requires_grad=True), w).backward()
    R = _recording(cf)
    plan = R.numbers_plan
    assert R.shared_slot is not None
    counter = R.spare_versions["versions"][R.shared_slot]       # (holds the counter, not the list)
    adj, reach = (weakref.ref(a) for a in plan.spare["numbers"])
    for v in (0.4, 0.5):
        y = tg.tensor([v], requires_grad=True)
        w.grad = None
        cf(y, w).backward()          # its tape is gone at the next call
        assert R.spare_versions["versions"][R.shared_slot] is counter
        assert plan.spare["numbers"][0] is adj() and plan.spare["numbers"][1] is reach()
        assert y.grad.item() == pytest.approx(np.cos(v) * 0.7 - np.sin(v) * 0.5, rel=1e-14)
        assert w.grad.item() == pytest.approx(np.sin(v), rel=1e-14)


def test_single_number_replay_kept_result_is_untouched(compiled):
    """A loss kept from one call keeps its own version counters and reach marks
    through the next calls' replays and backward passes."""
    cf = _scalar_fn()
    for v in (0.1, 0.2, 0.3):
        cf(tg.tensor([v], requires_grad=True), tg.tensor([0.7], requires_grad=True)).backward()
    R = _recording(cf)
    y1, w1 = tg.tensor([0.4], requires_grad=True), tg.tensor([0.7], requires_grad=True)
    y2, w2 = tg.tensor([0.8], requires_grad=True), tg.tensor([0.7], requires_grad=True)
    kept, changed = cf(y1, w1), cf(y2, w2)      # outputs and tapes alive through the next calls
    kept_versions = kept._tape.versions
    with tg.no_grad():
        w2.add_(1.0)                            # ``changed`` must notice, ``kept`` not
    later = []
    for v in (0.5, 0.6):
        w = tg.tensor([0.7], requires_grad=True)
        later.append(w)
        cf(tg.tensor([v], requires_grad=True), w).backward()
        assert R.spare_versions["versions"] is not kept_versions or IDENTITY_UNCHECKED
    with tg.no_grad():
        later[-1].add_(1.0)                     # a later call's leaf: none of the kept tapes' business
    assert kept.item() == np.sin(0.4) * 0.7 + np.cos(0.4) * 0.5
    kept.backward()
    assert y1.grad.item() == np.cos(0.4) * 0.7 - np.sin(0.4) * 0.5
    assert w1.grad.item() == np.sin(0.4)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        changed.backward()
    freed = kept._tape.freed         # its reach marks: not taken by later sweeps
    g = y1.grad.item()
    cf(tg.tensor([0.9], requires_grad=True), tg.tensor([0.7], requires_grad=True)).backward()
    assert R.numbers_plan.spare["numbers"][1] is not freed or IDENTITY_UNCHECKED
    assert y1.grad.item() == g
    with pytest.raises(RuntimeError, match="second time"):
        kept.backward()


# -- arrays: the compiled forward's arena, the backward's adjoints ----------------
def _array_fn():
    x = rng.uniform(-1, 1, (50, 48))
    W1 = tg.tensor(rng.uniform(-0.3, 0.3, (48, 64)), requires_grad=True)      # 3072 elements: big
    W2 = tg.tensor(rng.uniform(-1, 1, (64, 3)), requires_grad=True)
    # the hidden layer has 3200 elements: big adjoints the user never sees
    cf = tg.compile(lambda x, W1, W2: (((x @ W1).tanh() @ W2) ** 2).sum())
    return cf, x, W1, W2


def _eager(x, W1, W2):
    a, b = (tg.tensor(W.detach().numpy(), requires_grad=True) for W in (W1, W2))
    loss = (((tg.tensor(x) @ a).tanh() @ b) ** 2).sum()
    loss.backward()
    return loss.item(), a.grad.numpy(), b.grad.numpy()


def _warm(cf, x, W1, W2):
    for _ in range(3):
        W1.grad = W2.grad = None
        cf(tg.tensor(x), W1, W2).backward()
    R = _recording(cf)
    assert R.arena is True
    (marks,) = R.arrays_plan.marks.values()
    return R, marks[5]


def test_array_replays_reuse_arena_and_adjoints(compiled):
    cf, x, W1, W2 = _array_fn()
    R, spare = _warm(cf, x, W1, W2)
    arena, vaddr = (weakref.ref(a) for a in R.spare_arena["arena"])
    address = _ks.address(arena())
    small = weakref.ref(spare["arena"])
    ptr, big = spare["big"]
    assert len(big) >= 3            # W1's and the hidden layer's
    ptr, big = weakref.ref(ptr), {s: weakref.ref(a) for s, a in big.items()}
    for _ in range(3):
        W1.grad = W2.grad = None     # nothing holds the last call's results
        x = rng.uniform(-1, 1, (50, 48))
        loss = cf(tg.tensor(x), W1, W2)
        assert R.spare_arena["arena"][0] is arena() and _ks.address(arena()) == address
        assert R.spare_arena["arena"][1] is vaddr()
        loss.backward()
        assert spare["arena"] is small() and spare["big"][0] is ptr()
        assert {s: a for s, a in spare["big"][1].items()} == {s: r() for s, r in big.items()}
        value, g1, g2 = _eager(x, W1, W2)
        assert loss.item() == pytest.approx(value, rel=1e-12)
        np.testing.assert_allclose(W1.grad.numpy(), g1, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(W2.grad.numpy(), g2, rtol=1e-12, atol=1e-14)


def test_array_replay_kept_gradient_and_tape_are_untouched(compiled):
    cf, x, W1, W2 = _array_fn()
    R, spare = _warm(cf, x, W1, W2)
    W1.grad = W2.grad = None
    cf(tg.tensor(x), W1, W2).backward()
    kept_g1, kept_g2 = W1.grad, W2.grad         # the user keeps the gradients ...
    g1_values, g2_values = kept_g1.numpy().copy(), kept_g2.numpy().copy()
    x_kept = rng.uniform(-1, 1, (50, 48))
    kept_loss = cf(tg.tensor(x_kept), W1, W2)   # ... and a loss not yet differentiated
    kept_arena = R.spare_arena["arena"][0]
    loss_value = kept_loss.item()
    for _ in range(3):
        W1.grad = W2.grad = None
        x = rng.uniform(-1, 1, (50, 48))
        loss = cf(tg.tensor(x), W1, W2)
        assert R.spare_arena["arena"][0] is not kept_arena or IDENTITY_UNCHECKED
        loss.backward()
        assert np.array_equal(kept_g1.numpy(), g1_values) and np.array_equal(kept_g2.numpy(), g2_values)
        assert kept_loss.item() == loss_value
        assert not np.shares_memory(W1.grad.numpy(), kept_g1.numpy())
    W1.grad = W2.grad = None
    kept_loss.backward()
    value, g1, g2 = _eager(x_kept, W1, W2)
    assert loss_value == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(W1.grad.numpy(), g1, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(W2.grad.numpy(), g2, rtol=1e-12, atol=1e-14)
    assert np.array_equal(kept_g1.numpy(), g1_values)


# -- eager backward passes: the big adjoints of the last backward (engine._SPARE) ----------
def _mlp_step(X, W1, W2, hook=None):
    h = tg.tanh(X @ W1)
    if hook is not None:
        h.register_hook(hook)
    return ((h @ W2) ** 2).sum(), h


def _mlp_want(X, W1, W2):
    h = np.tanh(X @ W1)
    gy = 2 * (h @ W2)
    gh = gy @ W2.T
    return X.T @ (gh * (1 - h * h)), h.T @ gy, gh


def test_eager_backward_takes_the_last_big_adjoints_nothing_holds(compiled):
    X, W1v, W2v = rng.standard_normal((64, 40)), rng.standard_normal((40, 60)), rng.standard_normal((60, 50))
    W1, W2 = tg.tensor(W1v, requires_grad=True), tg.tensor(W2v, requires_grad=True)
    seen = []
    for _ in range(3):
        W1.grad = W2.grad = None
        _mlp_step(tg.tensor(X), W1, W2)[0].backward()
        g1, g2, _ = _mlp_want(X, W1v, W2v)
        np.testing.assert_allclose(W1.grad.numpy(), g1, rtol=1e-12)
        np.testing.assert_allclose(W2.grad.numpy(), g2, rtol=1e-12)
        seen.append({id(a) for a in engine._SPARE.values()})
    # the (64, 60) and (64, 50) adjoints are taken again: the same arrays at each backward
    assert seen[1] & seen[2] or IDENTITY_UNCHECKED


def test_eager_backward_never_reuses_what_a_gradient_hook_or_grad_result_holds(compiled):
    X, W1v, W2v = rng.standard_normal((64, 40)), rng.standard_normal((40, 60)), rng.standard_normal((60, 50))
    W1, W2 = tg.tensor(W1v, requires_grad=True), tg.tensor(W2v, requires_grad=True)
    kept_hook = []
    loss, _ = _mlp_step(tg.tensor(X), W1, W2, hook=kept_hook.append)
    loss.backward()
    kept_g1, kept_g2 = W1.grad, W2.grad             # .grad kept by the user (not set to None)
    g1, g2, gh = _mlp_want(X, W1v, W2v)
    loss, h = _mlp_step(tg.tensor(X), W1, W2)
    (kept_gh,) = tg.autograd.grad(loss, [h])          # an intermediate's gradient, returned
    for k in range(3):
        X2 = rng.standard_normal((64, 40))
        W1.grad = W2.grad = None
        _mlp_step(tg.tensor(X2), W1, W2)[0].backward()
        np.testing.assert_allclose(W1.grad.numpy(), _mlp_want(X2, W1v, W2v)[0], rtol=1e-12)
        assert not np.shares_memory(W1.grad.numpy(), kept_g1.numpy())
    np.testing.assert_allclose(kept_g1.numpy(), g1, rtol=1e-12)
    np.testing.assert_allclose(kept_g2.numpy(), g2, rtol=1e-12)
    np.testing.assert_allclose(kept_hook[0].numpy(), gh, rtol=1e-12)
    np.testing.assert_allclose(kept_gh.numpy(), gh, rtol=1e-12)


def test_eager_spare_is_bounded(compiled, monkeypatch):
    monkeypatch.setattr(engine, "SPARE_BYTES", 64 * 1024)
    monkeypatch.setattr(engine, "_SPARE", {})
    monkeypatch.setattr(engine, "_SPARE_BYTES", [0])
    for n in range(3000, 3000 + 40 * 7, 7):         # a new size at each backward
        v = rng.standard_normal(n)
        x = tg.tensor(v, requires_grad=True)
        (tg.sin(x) * x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.cos(v) * v + np.sin(v), rtol=1e-13)
        assert engine._SPARE_BYTES[0] <= 64 * 1024 + 8 * 4 * n
        assert sum(a.nbytes for a in engine._SPARE.values()) <= 64 * 1024 + 8 * 4 * n
