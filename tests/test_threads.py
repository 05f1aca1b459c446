"""Several threads differentiating through the same leaves and modules at once.

Each thread records on its own tape; a leaf that several threads' graphs use at once
has one slot per tape (``core/tape.py``: ``Tape.adopt``), and its ``.grad`` is
written by one backward at a time (``autograd/walk.py``).  Every test runs the
threads with a switch interval of a microsecond, so that they interleave between
almost any two bytecodes, compares each thread's results with the same work done in
one thread beforehand, and runs interpreted and with the compiled sweep.
"""
import sys
import threading

import numpy as np
import pytest

import tapegrad as tg

THREADS = 6


@pytest.fixture
def switching():
    """Threads switch every microsecond while the test runs."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def run_threads(work, n=THREADS):
    """``work(k)`` in ``n`` threads at once; returns their results by k (re-raising the
    first error a thread met)."""
    out, errors = [None] * n, []
    start = threading.Barrier(n)

    def target(k):
        try:
            start.wait(60)
            out[k] = work(k)
        except BaseException as e:      # noqa: BLE001  (re-raised in the test's thread below)
            errors.append(e)
    ts = [threading.Thread(target=target, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not any(t.is_alive() for t in ts)
    if errors:
        raise errors[0]
    return out


def test_grad_of_a_shared_leaf_on_every_thread(reverse, switching):
    # the case that lost gradients: W's one cached slot was overwritten by each thread
    for values in ([1.0, 2.0, 3.0], [0.5]):         # (an array, and the single-number path)
        W = tg.tensor(values, requires_grad=True)

        def work(k, rounds=60):
            got = []
            for _ in range(rounds):
                g, = tg.autograd.grad((W * (k + 2)).sum() + W.sum(), W)
                got.append(g.tolist())
            return got
        for k, got in enumerate(run_threads(work)):
            assert got == [[k + 3.0] * len(values)] * 60
        assert W.grad is None


def test_backward_into_a_shared_leaf_loses_nothing(reverse, switching):
    # integer-valued gradients: their sum is exact in any order
    V = tg.tensor(np.arange(1.0, 2001.0), requires_grad=True)      # (large: NumPy's add releases the GIL)
    rounds = 20

    def work(k):
        for _ in range(rounds):
            ((V * (k + 1)).sum() + (V * V).sum() * 0.0 + V.sum()).backward()
    run_threads(work)
    expected = rounds * sum(k + 2 for k in range(THREADS))
    np.testing.assert_array_equal(V.grad.numpy(), np.full(2000, float(expected)))


def _module_and_batches():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(5, 7), tg.nn.Tanh(), tg.nn.Linear(7, 2))
    rng = np.random.default_rng(0)
    batches = [(tg.tensor(rng.standard_normal((4, 5))), tg.tensor(rng.integers(0, 2, 4)))
               for _ in range(THREADS)]
    return model, batches


def _loss(model, x, y):
    return tg.nn.functional.cross_entropy(model(x), y) + (model[0].weight ** 2).sum() * 1e-3


def test_a_shared_module_gives_each_thread_its_own_gradients(reverse, switching):
    model, batches = _module_and_batches()
    params = list(model.parameters())
    alone = [[g.numpy() for g in tg.autograd.grad(_loss(model, x, y), params)] for x, y in batches]

    def work(k, rounds=15):
        x, y = batches[k]
        return [[g.numpy() for g in tg.autograd.grad(_loss(model, x, y), params)] for _ in range(rounds)]
    for k, got in enumerate(run_threads(work)):
        for grads in got:
            for g, want in zip(grads, alone[k]):
                np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-15)


def test_a_shared_module_accumulates_every_threads_backward(reverse, switching):
    model, batches = _module_and_batches()
    params = list(model.parameters())
    alone = [tg.autograd.grad(_loss(model, x, y), params) for x, y in batches]
    expected = [sum(a[i].numpy() for a in alone) * 4 for i in range(len(params))]

    def work(k):
        x, y = batches[k]
        for _ in range(4):
            _loss(model, x, y).backward()
    run_threads(work)
    for p, want in zip(params, expected):
        np.testing.assert_allclose(p.grad.numpy(), want, rtol=1e-12, atol=1e-14)


def test_second_derivatives_of_a_shared_leaf(reverse, switching):
    x = tg.tensor([0.3, -1.2, 2.0], requires_grad=True)

    def work(k, rounds=10):
        out = []
        for _ in range(rounds):
            y = (x ** 3 * (k + 1)).sum()
            g, = tg.autograd.grad(y, x, create_graph=True)
            h, = tg.autograd.grad(g.sum(), x)
            out.append((g.detach().numpy(), h.numpy()))
        return out
    for k, got in enumerate(run_threads(work)):
        for g, h in got:
            np.testing.assert_allclose(g, 3 * (k + 1) * x.detach().numpy() ** 2, rtol=1e-14)
            np.testing.assert_allclose(h, 6 * (k + 1) * x.detach().numpy(), rtol=1e-14)


def test_a_compiled_function_shared_by_threads(reverse, switching):
    W = tg.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    step = tg.compile(lambda x: (tg.tanh(x @ W) * x).sum(), fuse=False)
    inputs = [tg.tensor([[float(k), 1.0]]) for k in range(THREADS)]
    alone = [tg.autograd.grad(step(x), W)[0].numpy() for x in inputs]

    def work(k, rounds=10):
        return [tg.autograd.grad(step(inputs[k]), W)[0].numpy() for _ in range(rounds)]
    for k, got in enumerate(run_threads(work)):
        for g in got:
            np.testing.assert_allclose(g, alone[k], rtol=1e-14)


def test_a_leaf_changed_in_place_by_one_thread_while_others_read_it(reverse, switching):
    # an optimizer's step between another thread's uses: each use reads the leaf's value
    # then (a fresh slot per version), never another thread's slot
    W = tg.tensor([1.0, 1.0], requires_grad=True)
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            with tg.no_grad():
                W.add_(0.0)         # (the version moves, the values do not)

    def work(k, rounds=40):
        out = []
        for _ in range(rounds):
            g, = tg.autograd.grad((W * (k + 1)).sum(), W)
            out.append(g.tolist())
        return out
    t = threading.Thread(target=writer)
    t.start()
    try:
        results = run_threads(work, n=4)
    finally:
        stop.set()
        t.join(60)
    for k, got in enumerate(results):
        assert got == [[k + 1.0, k + 1.0]] * 40


def test_a_thread_that_ended_passes_its_leaves_on():
    # the leaf's fields belonged to a thread that has ended: the next thread takes them
    # over (and so its own fast path), with the right gradients
    W = tg.tensor([2.0], requires_grad=True)
    first = run_threads(lambda k: tg.autograd.grad((W * 3).sum(), W)[0].tolist(), n=1)
    assert first == [[3.0]]
    g, = tg.autograd.grad((W * W).sum(), W)
    assert g.tolist() == [4.0]
    from tapegrad.core import tape as _tp
    assert W._tape_id >> _tp.OWNER_SHIFT == _tp.state().number


@pytest.mark.parametrize("how", ["grad", "backward", "create_graph"])
def test_every_slot_of_a_leaf_counts(reverse, how):
    # a leaf changed in place between two uses has two slots on the tape (as it has when
    # threads take turns with it): the gradient from both reaches it, as in PyTorch
    def f(W):
        y = (W * 3).sum()
        with tg.no_grad():
            W.add_(1.0)
        return y + (W * W).sum()
    W = tg.tensor([1.0, 2.0], requires_grad=True)
    if how == "backward":
        f(W).backward()
        got = W.grad.tolist()
    else:
        got = tg.autograd.grad(f(W), W, create_graph=how == "create_graph")[0].tolist()
    assert got == [7.0, 9.0]            # 3 + 2 * (W + 1)
    torch = pytest.importorskip("torch")
    Wt = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    yt = (Wt * 3).sum()
    with torch.no_grad():
        Wt.add_(1.0)
    assert torch.autograd.grad(yt + (Wt * Wt).sum(), Wt)[0].tolist() == got
