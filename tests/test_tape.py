"""The flat tape itself: graphs spanning several tapes, freeing, inspection,
per-thread state, the Numba cache fallback, float32 and empty tensors."""
import gc
import os
import shutil
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core.registry import OPCODES

SECOND_MSG = "Trying to backward through the graph a second time"


def _new_tape():
    """Force the thread onto a fresh tape (what every backward does)."""
    tg.core.tape.rotate()
    return tg.core.tape.current()


# ----------------------------------------------------------------------------
# graphs spanning tapes
# ----------------------------------------------------------------------------
def test_backward_then_reuse_intermediate_on_new_tape():
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 2
    t1 = tg.core.tape.current()
    y.sum().backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    z = (y * 3).sum()
    assert tg.core.tape.current() is not t1          # backward rotated the tape
    z.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 8.0, 8.0])


def test_backward_through_several_chained_tapes_accumulates():
    xv = np.array([0.3, -1.2, 2.0])
    x = tg.tensor(xv, requires_grad=True)
    a = x * 2
    a.sum().backward(retain_graph=True)            # tape 1
    b = a.sin()
    b.sum().backward(retain_graph=True)            # tape 2 -> tape 1
    c = b * b
    c.sum().backward()                             # tape 3 -> tape 2 -> tape 1
    expected = 2 + 2 * np.cos(2 * xv) + 4 * np.sin(2 * xv) * np.cos(2 * xv)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


def test_one_graph_over_four_tapes_single_backward():
    xv = np.array([0.5, 1.5, -0.7, 2.2])
    x = tg.tensor(xv, requires_grad=True)
    ids = []
    a = x * 2
    ids.append(tg.core.tape.current().id)
    _new_tape()
    b = a.sin()
    ids.append(tg.core.tape.current().id)
    _new_tape()
    c = b * x                                      # x is a leaf on this tape too
    ids.append(tg.core.tape.current().id)
    _new_tape()
    loss = c.sum()
    ids.append(tg.core.tape.current().id)
    assert len(set(ids)) == 4
    # the newest tape imported c from an older tape as an EXT entry
    ent = tg.core.tape.current().entries()
    assert ent["op"][0] == OPCODES["ext"]
    loss.backward()
    expected = 2 * np.cos(2 * xv) * xv + np.sin(2 * xv)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


def test_autograd_grad_through_tapes():
    xv = np.array([1.0, 2.0, -3.0])
    x = tg.tensor(xv, requires_grad=True)
    y = x ** 2
    _new_tape()
    z = (y * x).sum()
    (gx,) = tg.autograd.grad(z, x, retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), 3 * xv ** 2, rtol=1e-12)
    gy, gx2 = tg.autograd.grad(z, [y, x])
    np.testing.assert_allclose(gy.numpy(), xv, rtol=1e-12)
    np.testing.assert_allclose(gx2.numpy(), 3 * xv ** 2, rtol=1e-12)
    assert x.grad is None


def test_autograd_grad_on_intermediate_of_older_tape():
    # target is a non-leaf recorded on an older tape than the output
    xv = np.array([0.5, -1.0])
    x = tg.tensor(xv, requires_grad=True)
    y = x.exp()
    _new_tape()
    z = (y * 3).sum()
    (gy,) = tg.autograd.grad(z, y)
    np.testing.assert_allclose(gy.numpy(), [3.0, 3.0])
    assert x.grad is None


def test_inputs_with_leaf_used_on_two_tapes():
    xv = np.array([1.0, 2.0, 3.0])
    wv = np.array([4.0, 5.0, 6.0])
    x = tg.tensor(xv, requires_grad=True)
    w = tg.tensor(wv, requires_grad=True)
    y = x * w                                      # tape 1: x and w
    _new_tape()
    z = (y + x * 3).sum()                          # tape 2: y imported, x again
    z.backward(inputs=[x])
    np.testing.assert_allclose(x.grad.numpy(), wv + 3)
    assert w.grad is None


def test_inputs_only_leaf_on_older_tape():
    xv = np.array([1.0, 2.0, 3.0])
    x = tg.tensor(xv, requires_grad=True)
    w = tg.tensor([2.0, 2.0, 2.0], requires_grad=True)
    y = x * x                                      # tape 1: x
    _new_tape()
    z = (y * w).sum()                              # tape 2: w, y imported
    z.backward(inputs=[x])
    np.testing.assert_allclose(x.grad.numpy(), 4 * xv)
    assert w.grad is None


def test_second_backward_through_freed_older_tape_raises():
    x = tg.tensor([0.1, 0.2], requires_grad=True)
    y = x.sin()                                    # saves x
    y.sum().backward()                             # not retained: frees sin's saved value
    z = (y * 2).sum()                              # new tape, y imported
    with pytest.raises(RuntimeError, match=SECOND_MSG):
        z.backward()


def test_non_retained_cross_tape_backward_frees_older_tape():
    xv = np.array([0.1, 0.2])
    x = tg.tensor(xv, requires_grad=True)
    y = x.sin()
    y.sum().backward(retain_graph=True)
    (y * 2).sum().backward()                       # through tape 1, not retained
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.cos(xv))
    with pytest.raises(RuntimeError, match=SECOND_MSG):
        (y * 5).sum().backward()


def test_two_losses_sharing_leaves_same_tape_without_retain():
    xv = np.array([0.5, -1.0, 2.0])
    wv = np.array([1.5, 2.0, -0.5])
    x = tg.tensor(xv, requires_grad=True)
    w = tg.tensor(wv, requires_grad=True)
    l1 = (x * w).sum()
    l2 = (x.sin() * w).sum()
    assert l1._tape is l2._tape                    # one tape, no backward in between
    l1.backward()
    np.testing.assert_allclose(x.grad.numpy(), wv)
    np.testing.assert_allclose(w.grad.numpy(), xv)
    l2.backward()                                  # shares only leaves with l1
    np.testing.assert_allclose(x.grad.numpy(), wv + np.cos(xv) * wv, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), xv + np.sin(xv), rtol=1e-12)


def test_two_losses_sharing_leaves_matmul_without_retain():
    rng = np.random.default_rng(3)
    Xv, Wv = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    X = tg.tensor(Xv)
    W = tg.tensor(Wv, requires_grad=True)
    l1 = (X @ W).sum()
    l2 = ((X @ W) ** 2).sum()
    l1.backward()
    l2.backward()
    expected = Xv.T @ np.ones((4, 2)) + Xv.T @ (2 * (Xv @ Wv))
    np.testing.assert_allclose(W.grad.numpy(), expected, rtol=1e-12)


def test_autograd_grad_outputs_on_two_tapes_target_on_tape_between():
    # z2 on tape 1, y on tape 2, z1 on tape 3: d(z1 + z2)/dy = 3
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    z2 = (x * 5).sum()
    _new_tape()
    y = x * 2
    _new_tape()
    z1 = (y * 3).sum()
    (gy,) = tg.autograd.grad([z1, z2], [y], retain_graph=True)
    np.testing.assert_array_equal(gy.numpy(), [3.0, 3.0])
    gy, gx = tg.autograd.grad([z1, z2], [y, x])
    np.testing.assert_array_equal(gy.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(gx.numpy(), [11.0, 11.0])


def test_backward_inputs_nonleaf_on_tape_between_outputs():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    z2 = (x * 5).sum()
    _new_tape()
    y = x * 2
    _new_tape()
    z1 = (y * 3).sum()
    tg.autograd.backward([z1, z2], inputs=[y])
    assert y.grad is not None
    np.testing.assert_array_equal(y.grad.numpy(), [3.0, 3.0])
    assert x.grad is None


def test_hooks_and_retain_grad_on_older_tape():
    xv = np.array([1.0, 2.0])
    x = tg.tensor(xv, requires_grad=True)
    a = x.exp()
    a.retain_grad()
    a.register_hook(lambda g: g * 10)
    _new_tape()
    (a * a).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 20 * np.exp(xv), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 20 * np.exp(2 * xv), rtol=1e-12)


def test_automatic_rotation_of_long_tapes(monkeypatch):
    monkeypatch.setattr(tg.core.tape, "ROTATE_ENTRIES", 16)
    xv = np.array([0.2, 0.4])
    x = tg.tensor(xv, requires_grad=True)
    first = _new_tape()
    y = x
    for _ in range(50):
        y = (y * 1.01 + 0.5).sin()
    last = tg.core.tape.current()
    assert last.id - first.id >= 8                     # 150 entries over 16-entry tapes
    assert len(first) <= 17
    y.sum().backward()
    yv = xv.copy()
    g = np.ones(2)
    for _ in range(50):
        g = g * 1.01 * np.cos(yv * 1.01 + 0.5)
        yv = np.sin(yv * 1.01 + 0.5)
    np.testing.assert_allclose(y.detach().numpy(), yv, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g, rtol=1e-10)
    with pytest.raises(RuntimeError, match=SECOND_MSG):
        y.sum().backward()                             # the sin entries were freed


def test_inplace_on_tensor_from_older_tape():
    # y recorded on tape 1, changed in place on tape 2, then used
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    _new_tape()
    y.mul_(3)
    (y * y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [18.0, 36.0])


def _run_snippet(code, timeout=120):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)


def test_inplace_add_on_tensor_from_older_tape_terminates():
    # run in a subprocess: at commit 093ef9d this spun forever inside backward
    # (the compiled sweep cannot be interrupted by a signal)
    code = ("import tapegrad as tg, numpy as np\n"
            "x = tg.tensor([1.0, 2.0], requires_grad=True)\n"
            "y = x.sin()\n"                      # saves its input, not its output
            "tg.core.tape.rotate()\n"
            "y.add_(1)\n"
            "y.sum().backward()\n"
            "print(x.grad.tolist())\n"
            "x = tg.tensor([1.0, 2.0], requires_grad=True)\n"
            "y = x.exp()\n"                      # saves its output: add_ must be an error
            "tg.core.tape.rotate()\n"
            "y.add_(1)\n"
            "try:\n"
            "    y.sum().backward()\n"
            "    print('no error')\n"
            "except RuntimeError as e:\n"
            "    print(str(e)[:120])\n")
    try:
        r = _run_snippet(code, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("backward after y.add_(1) on a tensor from an older tape did not terminate")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    np.testing.assert_allclose(eval(lines[0]), np.cos([1.0, 2.0]), rtol=1e-12)
    assert lines[1].startswith("one of the variables needed for gradient computation has been modified")


# ----------------------------------------------------------------------------
# memory
# ----------------------------------------------------------------------------
def _rss_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_training_loop_frees_tapes_and_memory_is_bounded():
    rng = np.random.default_rng(0)
    Xv = rng.standard_normal((64, 20))
    true_W = rng.standard_normal((20, 5))
    Yv = Xv @ true_W + 0.5
    X, Y = tg.tensor(Xv), tg.tensor(Yv)
    W = tg.zeros(20, 5, requires_grad=True)
    b = tg.zeros(5, requires_grad=True)
    lr = 0.05

    early = None
    lens = []
    rss500 = None
    first_loss = None
    gc_was_enabled = gc.isenabled()
    gc.disable()                      # freeing must not depend on the cycle collector
    try:
        for it in range(3000):
            pred = X @ W + b
            loss = ((pred - Y) ** 2).mean()
            lens.append(len(tg.core.tape.current()))
            if it == 10:
                early = weakref.ref(tg.core.tape.current())
            if first_loss is None:
                first_loss = loss.item()
            W.grad = None
            b.grad = None
            loss.backward()
            with tg.no_grad():
                W -= lr * W.grad
                b -= lr * b.grad
            if it == 12:
                early_alive_at_12 = early() is not None
            if it == 500:
                rss500 = _rss_bytes()
        rss3000 = _rss_bytes()
        final_loss = loss.item()
        del pred, loss
        alive_no_gc = early() is not None
    finally:
        if gc_was_enabled:
            gc.enable()

    # the model learned (sanity check that the loop does what it claims)
    assert final_loss < 1e-6 < first_loss
    np.testing.assert_allclose(W.detach().numpy(), true_W, atol=1e-3)
    np.testing.assert_allclose(b.detach().numpy(), np.full(5, 0.5), atol=1e-3)
    # tape length per iteration is constant, not growing
    assert max(lens) == lens[5] == lens[-1]
    assert max(lens) < 32
    # the tape of iteration 10 is gone by reference counting alone
    if alive_no_gc or early_alive_at_12:
        gc.collect()
        if early() is None:
            pytest.fail("tape of iteration 10 was only freed by gc.collect(): a reference cycle")
        pytest.fail("tape of iteration 10 is still alive after gc.collect(): a leak")
    assert rss3000 - rss500 < 20 * 2 ** 20, (rss500, rss3000)


def test_training_loop_with_data_updates_frees_tapes():
    rng = np.random.default_rng(1)
    Xv = rng.standard_normal((32, 20))
    Yv = rng.standard_normal((32, 5))
    X, Y = tg.tensor(Xv), tg.tensor(Yv)
    W = tg.zeros(20, 5, requires_grad=True)
    b = tg.zeros(5, requires_grad=True)
    refs = []
    gc.disable()
    try:
        for it in range(300):
            loss = ((X @ W + b - Y) ** 2).mean()
            refs.append(weakref.ref(tg.core.tape.current()))
            W.grad = None
            b.grad = None
            loss.backward()
            W.data.sub_(0.05 * W.grad.data)
            b.data.sub_(0.05 * b.grad.data)
        del loss
        alive = [i for i, r in enumerate(refs) if r() is not None]
    finally:
        gc.enable()
    assert alive == []
    # the same gradient descent in NumPy
    Wn, bn = np.zeros((20, 5)), np.zeros(5)
    for it in range(300):
        r = Xv @ Wn + bn - Yv
        g = 2 * r / r.size
        Wn, bn = Wn - 0.05 * (Xv.T @ g), bn - 0.05 * g.sum(0)
    np.testing.assert_allclose(W.detach().numpy(), Wn, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.detach().numpy(), bn, rtol=1e-10, atol=1e-12)


def test_data_augmented_assignment_update():
    # the classic SGD idiom ``p.data -= lr * p.grad``: PyTorch's ``.data`` has a
    # setter, so the augmented assignment (in place, then re-assign) works
    W = tg.ones(2, 2, requires_grad=True)
    (W * 3).sum().backward()
    W.data -= 0.5 * W.grad.data
    np.testing.assert_array_equal(W.detach().numpy(), np.full((2, 2), -0.5))
    assert W.requires_grad and W.is_leaf


def test_tape_freed_when_last_tensor_dies():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    z = y.sin()
    ref = weakref.ref(tg.core.tape.current())
    _new_tape()
    del y
    assert ref() is not None          # z still holds it
    del z
    assert ref() is None


def test_older_tape_kept_alive_by_newer_tape_import():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    old = weakref.ref(tg.core.tape.current())
    _new_tape()
    z = (y * 2).sum()
    del y
    assert old() is not None          # z's tape imported y
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])
    del z
    assert old() is None


def _rosen(x):
    head = x[:-1]
    return (100 * (x[1:] - head ** 2) ** 2 + (1 - head) ** 2).sum()


def _rosen_grad(xv):
    g = np.zeros_like(xv)
    d = xv[1:] - xv[:-1] ** 2
    g[:-1] = -400 * xv[:-1] * d - 2 * (1 - xv[:-1])
    g[1:] += 200 * d
    return g


def test_recording_loop_rotating_mid_expression_holds_bounded_memory(monkeypatch):
    """A loss evaluated again and again without backward, each call straddling a
    rotation (the next tape imports ``x[:-1]``): the older tapes are pruned to what
    the imports need, so the tapes do not chain up and memory stays flat."""
    monkeypatch.setattr(tg.core.tape, "ROTATE_ELEMENTS", 20_000)     # a rotation every few calls
    xv = np.linspace(-1.5, 1.5, 1000)
    x = tg.tensor(xv, requires_grad=True)
    first = _new_tape().id

    def own():
        """This loop's live tapes and the bytes they keep (not memory_stats': a tape of an
        earlier test may still be alive, held by a thread that has not finished)."""
        tapes = [T for T in tg.core.tape._LIVE if T.id >= first]
        kept = {id(v): v.nbytes for T in tapes for v in T.vals if v is not None}
        return len(tapes), sum(kept.values())
    saved = []
    for i in range(400):
        loss = _rosen(x)
        if i % 50 == 49:
            saved.append(own()[1])
    tapes, _ = own()
    assert tapes <= 4, tapes
    assert max(saved) < 4 * 20_000 * 8, saved          # a few tapes' worth, not 400 calls' (3.2 MB)
    loss.backward()                                     # the last call still differentiates
    np.testing.assert_allclose(x.grad.numpy(), _rosen_grad(xv), rtol=1e-12)


def test_pruning_keeps_what_live_tensors_and_imports_need(monkeypatch):
    """Tapes with a tensor alive are left whole; held losses from every call, summed,
    still give the exact gradient; a kept intermediate differentiates after many
    rotations."""
    monkeypatch.setattr(tg.core.tape, "ROTATE_ELEMENTS", 20_000)
    xv = np.linspace(-1.5, 1.5, 1000)
    x = tg.tensor(xv, requires_grad=True)
    _new_tape()
    early = (x[:-1] ** 2).sin()                         # alive throughout: its tape stays whole
    losses = [_rosen(x) for _ in range(60)]
    for _ in range(100):
        _rosen(x)
    total = losses[0]
    for l in losses[1:]:
        total = total + l
    total.backward()
    np.testing.assert_allclose(x.grad.numpy(), 60 * _rosen_grad(xv), rtol=1e-12)
    x.grad = None
    early.sum().backward()
    want = np.zeros_like(xv)
    want[:-1] = np.cos(xv[:-1] ** 2) * 2 * xv[:-1]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_pruned_tape_frees_its_values_and_refuses_a_backward_it_cannot_do():
    """``keep_only`` keeps the cone of the imported slots: the rest is marked freed
    (a backward reaching it raises PyTorch's error instead of reading nothing)."""
    x = tg.tensor([0.5, 1.5, 2.5], requires_grad=True)
    T = _new_tape()
    a = (x * 2).exp()                   # slots: x, mul, exp
    b = (x * 3).sin()                   # mul, sin: outside the cone of a
    assert T.vals[T.n - 1] is None and T.vals[T.n - 2] is not None     # sin's input kept
    ok = T.keep_only([a._slot])
    assert ok
    assert T.vals[b._slot - 1] is None                  # b's saved input dropped
    a.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * x.detach().numpy()), rtol=1e-12)
    with pytest.raises(RuntimeError, match=SECOND_MSG):
        b.sum().backward()


# ----------------------------------------------------------------------------
# inspection
# ----------------------------------------------------------------------------
def test_tape_entries_are_inspectable():
    t = _new_tape()
    x = tg.tensor([0.5, 1.0, 1.5], requires_grad=True)
    y = (x * 2).sin()
    assert tg.core.tape.current() is t
    assert len(t) == 3
    e = t.entries()
    assert set(e) >= {"op", "a", "b", "c", "i0", "i1", "name", "size", "f0", "f1"}
    assert e["op"].tolist() == [OPCODES["leaf"], OPCODES["mul_s"], OPCODES["sin"]]
    # slot numbers link the entries: mul reads slot 0, sin reads slot 1
    assert e["a"].tolist() == [-1, 0, 1]
    assert e["b"].tolist() == [-1, -1, -1]
    assert e["size"].tolist() == [3, 3, 3]
    assert e["f0"][1] == 2.0                       # the scalar of x * 2
    # entries() returns copies
    e["op"][:] = 0
    assert t.entries()["op"].tolist() == [OPCODES["leaf"], OPCODES["mul_s"], OPCODES["sin"]]
    # a binary op on two leaves, a reduction and a matmul
    t = _new_tape()
    a = tg.ones(2, 3, requires_grad=True)
    c = tg.ones(3, 4, requires_grad=True)
    m = (a @ c).sum()
    e = t.entries()
    ops = e["op"].tolist()
    assert ops[:2] == [OPCODES["leaf"], OPCODES["leaf"]]
    assert len(ops) == 4
    assert e["a"][2] == 0 and e["b"][2] == 1       # matmul reads both leaves
    assert e["size"].tolist() == [6, 12, 8, 1]
    assert e["a"][3] == 2                          # sum reads the matmul
    np.testing.assert_allclose(m.item(), 24.0)
    del y


# ----------------------------------------------------------------------------
# threads
# ----------------------------------------------------------------------------
def test_grad_mode_is_thread_local():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    entered = threading.Event()
    done = threading.Event()
    res = {}

    def nograd_thread():
        with tg.no_grad():
            res["inner_enabled"] = tg.is_grad_enabled()
            res["inner_rg"] = (x * 2).requires_grad
            entered.set()
            done.wait(10)

    def recording_thread():
        entered.wait(10)
        res["other_enabled"] = tg.is_grad_enabled()
        y = (x * 3).sum()
        res["other_rg"] = y.requires_grad
        (g,) = tg.autograd.grad(y, x)
        res["other_grad"] = g.numpy().tolist()
        done.set()

    t1 = threading.Thread(target=nograd_thread)
    t2 = threading.Thread(target=recording_thread)
    t1.start()
    t2.start()
    t1.join(20)
    t2.join(20)
    assert res == {"inner_enabled": False, "inner_rg": False, "other_enabled": True,
                   "other_rg": True, "other_grad": [3.0, 3.0]}
    assert tg.is_grad_enabled()                    # main thread unaffected


def test_tape_is_per_thread():
    main_tape = tg.core.tape.current()
    seen = {}

    def f():
        seen["tape"] = tg.core.tape.current()
        seen["x"] = (tg.ones(2, requires_grad=True) * 2).sum()

    th = threading.Thread(target=f)
    th.start()
    th.join()
    assert seen["tape"] is not main_tape
    assert tg.core.tape.current() is main_tape
    seen["x"].backward()                           # backward from another thread's tape


def test_older_tape_importing_tensor_of_newer_tape_from_other_thread():
    # u on the main thread's tape (id 1), v = u*2 on a worker thread's tape (newer),
    # w = v*u back on the main thread's (older) tape: the older tape imports from the newer
    xv = np.array([0.3, 0.7])
    x = tg.tensor(xv, requires_grad=True)
    _new_tape()
    u = x.sin()
    box = {}
    th = threading.Thread(target=lambda: box.update(v=u * 2))
    th.start()
    th.join()
    w = (box["v"] * u).sum()
    w.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.sin(xv) * np.cos(xv), rtol=1e-12)


def test_tensor_from_worker_thread_tape_used_on_main_thread():
    xv = np.array([0.3, 0.7])
    x = tg.tensor(xv, requires_grad=True)
    box = {}
    th = threading.Thread(target=lambda: box.update(p=x * 3))
    th.start()
    th.join()
    box["p"].exp().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(3 * xv), rtol=1e-12)


def _train(seed, steps=200):
    rng = np.random.default_rng(seed)
    Xv = rng.standard_normal((40, 8))
    Yv = np.sin(Xv @ rng.standard_normal((8, 3)))
    X, Y = tg.tensor(Xv), tg.tensor(Yv)
    W1 = tg.tensor(rng.standard_normal((8, 16)) * 0.3, requires_grad=True)
    b1 = tg.zeros(16, requires_grad=True)
    W2 = tg.tensor(rng.standard_normal((16, 3)) * 0.3, requires_grad=True)
    params = [W1, b1, W2]
    for _ in range(steps):
        h = (X @ W1 + b1).tanh()
        loss = ((h @ W2 - Y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with tg.no_grad():
            for p in params:
                p -= 0.1 * p.grad
    return [p.detach().numpy().copy() for p in params] + [loss.item()]


def test_threads_training_match_sequential():
    seq = [_train(0), _train(1)]
    out = [None, None]
    errs = []
    barrier = threading.Barrier(2)

    def run(i):
        try:
            barrier.wait(10)
            out[i] = _train(i)
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)                    # interleave the threads finely
    try:
        ths = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(120)
    finally:
        sys.setswitchinterval(old)
    assert not errs, errs
    assert seq[0][-1] != seq[1][-1]
    for a, b in zip(seq, out):
        for pa, pb in zip(a, b):
            np.testing.assert_array_equal(pa, pb)


# ----------------------------------------------------------------------------
# A read-only installation (tests/test_private_dirs.py: the directories it falls back to)
# ----------------------------------------------------------------------------
def _snapshot(root):
    out = {}
    for dp, dns, fns in os.walk(root):     # files only: new files show as new keys
        for n in fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


def test_import_from_read_only_package_copy(tmp_path):
    src = os.path.dirname(tg.__file__)
    site = tmp_path / "site"
    pkg = site / "tapegrad"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "home"
    home.mkdir()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    subprocess.run(["chmod", "-R", "a-w", str(pkg)], check=True)
    try:
        before = _snapshot(pkg)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("NUMBA_", "PYTHON"))}
        env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PYTHONPATH=str(site),
                   TMPDIR=str(tmp))
        code = ("import tapegrad as tg; x=tg.tensor([1.,2.],requires_grad=True); "
                "(x*x).sum().backward(); print(tg.__file__); print(x.grad.tolist())")
        r = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-4000:]
        lines = r.stdout.strip().splitlines()
        assert lines[0] == str(pkg / "__init__.py")  # the copy was imported, not the checkout
        assert lines[-1] == "[2.0, 4.0]"
        after = _snapshot(pkg)
        if os.geteuid() == 0:
            # root ignores the write bits, so Numba's in-tree cache may be written
            # into __pycache__ of the "read-only" copy; only the sources (and the
            # generated kernels, which match the sources) must be untouched.
            def src(snap):
                return {k: v for k, v in snap.items() if "__pycache__" not in k}
            assert src(after) == src(before)
        else:
            assert after == before, sorted(set(after) ^ set(before))
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(pkg)], check=True)


# ----------------------------------------------------------------------------
# float32
# ----------------------------------------------------------------------------
def _f32_pipeline(dtype):
    rng = np.random.default_rng(7)
    xv = rng.standard_normal((4, 3))
    wv = rng.standard_normal((3, 5))
    x = tg.tensor(xv, dtype=dtype, requires_grad=True)
    w = tg.tensor(wv, dtype=dtype, requires_grad=True)
    h = (x * 1.5).sin() @ w
    y = h[1:3, ::2] * h[0, ::2]
    z = (y.sin() * y).sum() + h[:, 4].sum()
    z.backward()
    return x, w, z


def test_float32_end_to_end():
    x32, w32, z32 = _f32_pipeline(tg.float32)
    x64, w64, z64 = _f32_pipeline(tg.float64)
    assert z32.dtype == tg.float32
    assert x32.grad.dtype == tg.float32 and w32.grad.dtype == tg.float32
    assert x32.grad.numpy().dtype == np.float32
    assert x64.grad.dtype == tg.float64
    np.testing.assert_allclose(x32.grad.numpy(), x64.grad.numpy(), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(w32.grad.numpy(), w64.grad.numpy(), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(z32.item(), z64.item(), rtol=1e-5)


def test_float32_across_tapes_and_autograd_grad():
    xv = np.array([0.25, -1.5, 3.0])
    x = tg.tensor(xv, dtype=tg.float32, requires_grad=True)
    y = x.sin() * x
    _new_tape()
    z = (y * y).sum()
    (g,) = tg.autograd.grad(z, x)
    assert g.dtype == tg.float32
    f = np.sin(xv) * xv
    np.testing.assert_allclose(g.numpy(), 2 * f * (np.cos(xv) * xv + np.sin(xv)), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------
# empty tensors
# ----------------------------------------------------------------------------
def test_empty_sum_backward():
    x = tg.zeros(0, requires_grad=True)
    s = x.sum()
    assert s.item() == 0.0
    s.backward()
    assert x.grad is not None
    assert x.grad.shape == (0,)
    assert x.grad.dtype == tg.float64


def test_empty_mean_is_nan_with_empty_grad():
    x = tg.zeros(0, requires_grad=True)
    m = x.mean()
    assert np.isnan(m.item())
    m.backward()
    assert x.grad is not None
    assert x.grad.shape == (0,)


def test_empty_through_elementwise_and_tapes():
    x = tg.zeros(0, 3, requires_grad=True)
    y = x.sin() * 2
    _new_tape()
    (y.exp()).sum().backward()
    assert x.grad.shape == (0, 3)


@pytest.mark.parametrize("before", [253, 254, 255, 256])
def test_inputs_imported_at_the_end_of_the_buffer(before):
    """A binary op whose inputs are new to the tape appends their entries first; when
    they take the buffer's last free entries, the op's own entry must still fit."""
    tg.core.tape.rotate()
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 1.0
    for _ in range(before - 2):
        y = y + 0.0
    a = tg.tensor([2.0, 2.0, 2.0], requires_grad=True)         # imported by the op below
    out = tg.where(tg.tensor([True, False, True]), y * a, y)   # and so is the condition
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 1.0, 2.0])
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 0.0, 3.0])
