"""tg.autograd.Function: a user's forward and backward, recorded as one host op entry
(tapegrad/autograd/function.py): values and gradients against PyTorch's Function in
the compiled and the interpreted reverse, several inputs and outputs, non-tensor
arguments, needs_input_grad, mark_non_differentiable, once_differentiable,
create_graph, gradcheck and gradgradcheck, and replays by tg.compile and tg.record."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine


def _classes(m):
    class Exp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class MulAdd(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k, c):
            ctx.save_for_backward(a, b)
            ctx.k = k
            ctx.seen = ctx.needs_input_grad
            idx = (a > 1.5)
            ctx.mark_non_differentiable(idx)
            return a * b * k + c, a - b, idx

        @staticmethod
        def backward(ctx, g1, g2, g3):
            a, b = ctx.saved_tensors
            return g1 * b * ctx.k + g2, g1 * a * ctx.k - g2, None, g1

    class Cube(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @m.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * g * x ** 2
    return Exp, MulAdd, Cube


TG = _classes(tg)


def test_values_and_gradients_match_torch(reverse):
    torch = pytest.importorskip("torch")
    TT = _classes(torch)
    av, bv, cv = np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([0.5, -0.5])
    res = []
    for m, (Exp, MulAdd, Cube) in ((tg, TG), (torch, TT)):
        a, b, c = (m.tensor(v, requires_grad=True) for v in (av, bv, cv))
        o1, o2, idx = MulAdd.apply(a, b, 2.0, c)
        y = Exp.apply(o1 * 0.1) + Cube.apply(o2)
        (y * m.tensor([1.0, 3.0], dtype=m.float64)).sum().backward()
        res.append([y.detach().numpy(), idx.numpy(), a.grad.numpy(), b.grad.numpy(), c.grad.numpy(),
                    idx.requires_grad, type(o1.grad_fn).__name__ if m is torch else o1.grad_fn.name()])
    for mine, theirs in zip(*res):
        np.testing.assert_allclose(mine, theirs) if isinstance(mine, np.ndarray) else None
        assert isinstance(mine, np.ndarray) or mine == theirs


def test_needs_input_grad_and_no_grad_inputs():
    Exp, MulAdd, _ = TG
    a, b, c = tg.tensor([1.0, 2.0], requires_grad=True), tg.tensor([3.0, 4.0]), tg.tensor([0.0, 0.0])
    o1, _, _ = MulAdd.apply(a, b, 2.0, c)
    o1.sum().backward()
    assert a.grad.tolist() == [6.0, 8.0] and b.grad is None
    assert Exp.apply(tg.tensor([0.0])).requires_grad is False       # no input requires grad: not recorded


def test_create_graph_gradcheck_and_gradgradcheck():
    Exp, MulAdd, Cube = TG
    x = tg.tensor([0.5, 1.0, 2.0], requires_grad=True)
    (g,) = tg.autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
    (h,) = tg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), np.exp([0.5, 1.0, 2.0]))
    assert tg.autograd.gradcheck(Exp.apply, (x,)) and tg.autograd.gradgradcheck(Exp.apply, (x,))
    a, b, c = (tg.tensor(v, requires_grad=True) for v in ([1.0, 2.0], [3.0, 4.0], [0.5, 0.5]))
    assert tg.autograd.gradcheck(lambda a, b, c: tg.cat(list(MulAdd.apply(a, b, 2.0, c)[:2])), (a, b, c))
    assert tg.autograd.gradcheck(Cube.apply, (x,))
    (g,) = tg.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert not g.requires_grad          # once_differentiable: its gradient is not differentiated again


def test_float32_gradients_reach_backward_in_float32():
    seen = []

    class Twice(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            seen.append(g.dtype)
            return g * 2.0
    for mode in ("never", "always"):
        engine.INTERPRET[0], old = mode, engine.INTERPRET[0]
        try:
            x = tg.tensor([1.0, 2.0], dtype=tg.float32, requires_grad=True)
            Twice.apply(x).sum().backward()
        finally:
            engine.INTERPRET[0] = old
        assert x.grad.tolist() == [2.0, 2.0] and x.grad.dtype == tg.float32
    assert seen == [tg.float32, tg.float32]


def test_wrong_number_of_gradients():
    class Bad(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g
    x = tg.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"function BadBackward returned an incorrect number of gradients "
                                           r"\(expected 2, got 1\)"):
        Bad.apply(x, x).sum().backward()


def _counted(m):
    """A Function that counts its forward and backward calls and saves its output."""
    calls = {"forward": 0, "backward": 0, "needs": []}

    class Scaled(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, k):
            calls["forward"] += 1
            calls["needs"].append(ctx.needs_input_grad)
            y = (x * w).exp() * k
            ctx.save_for_backward(y, x, w)
            return y

        @staticmethod
        def backward(ctx, g):
            calls["backward"] += 1
            y, x, w = ctx.saved_tensors
            return (g * y * w if ctx.needs_input_grad[0] else None), (g * y * x if ctx.needs_input_grad[1] else None), None
    return Scaled, calls


def test_compile_replays_a_function(reverse):
    Scaled, calls = _counted(tg)
    Exp, MulAdd, Cube = TG

    def loss(x, w):
        y = Scaled.apply(x, w, 0.5)
        p, q, idx = MulAdd.apply(y, x, 2.0, w)
        return (p * q).sum() + Cube.apply(x).sum() + Exp.apply(q * 0.1).sum()

    cf = tg.compile(loss)
    for seed in range(4):
        r = np.random.default_rng(seed)
        a, b = r.standard_normal(3) * 0.5, r.standard_normal(3) * 0.5
        x, w = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        before = dict(calls)
        v = cf(x, w)
        v.backward()
        if seed >= 2:   # (a replay: one forward and one backward; the first two calls also check and plan one)
            assert calls["forward"] == before["forward"] + 1 and calls["backward"] == before["backward"] + 1
        assert calls["needs"][-1] == (True, True, False)
        x2, w2 = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        v2 = loss(x2, w2)
        v2.backward()
        np.testing.assert_allclose(v.item(), v2.item(), rtol=1e-14)
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-13)
        np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-13)
    assert cf.stats.replays == 3 and cf.stats.divergences == 0
    # needs_input_grad in a replay where only w requires grad (another signature: recorded anew, then replayed)
    for _ in range(2):
        x, w = tg.tensor([0.1, 0.2, 0.3]), tg.tensor([0.3, -0.2, 0.1], requires_grad=True)
        cf(x, w).backward()
        assert calls["needs"][-1] == (False, True, False)


def test_a_replayed_function_against_finite_differences():
    Scaled, _ = _counted(tg)
    tape = tg.record(lambda x, w: (Scaled.apply(x, w, 2.0) ** 2).sum(), np.zeros(3), np.zeros(3))
    x, w = np.array([0.3, -0.4, 0.2]), np.array([0.5, 0.1, -0.7])
    v, g = tape.value_and_grad(x, w)

    def f(xv):
        return (4 * np.exp(2 * xv * w)).sum()
    np.testing.assert_allclose(v, f(x), rtol=1e-14)
    fd = [(f(x + e) - f(x - e)) / 2e-6 for e in np.eye(3) * 1e-6]
    np.testing.assert_allclose(g[0], fd, rtol=1e-7)


def test_a_function_whose_outputs_change_shape_is_not_replayed_wrong():
    n = [3]

    class Head(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:n[0]] * 1.0            # (its shape depends on something a recording cannot see)

        @staticmethod
        def backward(ctx, g):
            return tg.cat([g, tg.zeros(3 - g.shape[0])])
    cf = tg.compile(lambda x: Head.apply(x).sum())
    for _ in range(2):
        assert cf(tg.tensor([1.0, 2.0, -1.0], requires_grad=True)).item() == 2.0
    assert cf.stats.replays == 1
    n[0] = 2            # a divergence: recorded again, the right value
    assert cf(tg.tensor([1.0, 2.0, 3.0], requires_grad=True)).item() == 3.0
    assert cf.stats.divergences == 1
    tape = tg.record(lambda x: Head.apply(x).sum(), np.zeros(3))
    n[0] = 3
    with pytest.raises((RuntimeError, tg.TapeDivergence),
                       match="other types, shapes or dtypes than when it was recorded"):
        tape.value_and_grad(np.ones(3))


def test_a_non_differentiable_output_that_feeds_the_loss_is_recomputed_by_the_replay():
    # (MulAdd's third output, a comparison made inside its forward, is not part of the
    # entry: the recording sees the comparison and the replay makes it again from the inputs)
    _, MulAdd, _ = TG
    cf = tg.compile(lambda a, b: (MulAdd.apply(a, b, 1.0, b)[2] * a).sum())
    vals = [cf(tg.tensor([v, 1.0], requires_grad=True), tg.tensor([0.5, 0.5], requires_grad=True)).item()
            for v in (1.0, 2.0, 3.0)]
    assert vals == [0.0, 2.0, 3.0] and cf.stats.replays == 2


def _replay_classes(calls):
    """Functions for the replay tests, each counting its forward and backward calls
    and recording its needs_input_grad: an exp saving its output, a clamp whose mask
    output is marked non-differentiable, a two-output function, a once_differentiable
    backward."""
    class Exp(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            calls["Exp.forward"] = calls.get("Exp.forward", 0) + 1
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            calls["Exp.backward"] = calls.get("Exp.backward", 0) + 1
            (y,) = ctx.saved_tensors
            return g * y

    class Clamp(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, lo, hi):
            calls["Clamp.forward"] = calls.get("Clamp.forward", 0) + 1
            calls.setdefault("Clamp.needs", []).append(ctx.needs_input_grad)
            mask = (x >= lo) & (x <= hi)
            ctx.save_for_backward(mask)
            ctx.mark_non_differentiable(mask)
            return x.clamp(lo, hi), mask

        @staticmethod
        def backward(ctx, g, g_mask):
            calls["Clamp.backward"] = calls.get("Clamp.backward", 0) + 1
            (mask,) = ctx.saved_tensors
            assert not g_mask.numpy().any()
            return g * mask, None, None

    class SinCos(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            calls["SinCos.forward"] = calls.get("SinCos.forward", 0) + 1
            calls.setdefault("SinCos.needs", []).append(ctx.needs_input_grad)
            ctx.save_for_backward(x, w)
            return (x * w).sin(), (x - w).cos()

        @staticmethod
        def backward(ctx, gs, gc):
            calls["SinCos.backward"] = calls.get("SinCos.backward", 0) + 1
            x, w = ctx.saved_tensors
            c, s = (x * w).cos(), (x - w).sin()
            gx = gs * c * w - gc * s if ctx.needs_input_grad[0] else None
            gw = gs * c * x + gc * s if ctx.needs_input_grad[1] else None
            return gx, gw

    class Square(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            calls["Square.forward"] = calls.get("Square.forward", 0) + 1
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @tg.autograd.function.once_differentiable
        def backward(ctx, g):
            calls["Square.backward"] = calls.get("Square.backward", 0) + 1
            (x,) = ctx.saved_tensors
            return 2 * g * x
    return Exp, Clamp, SinCos, Square


def _replay_loss(Exp, Clamp, SinCos, Square):
    def loss(x, w):
        c, mask = Clamp.apply(x, -0.5, 0.5)
        s, k = SinCos.apply(c, w)
        return (Exp.apply(s * 0.5) * mask).sum() + (Square.apply(k) * w).sum()
    return loss


def _loss_np(x, w):
    mask = (x >= -0.5) & (x <= 0.5)
    c = np.clip(x, -0.5, 0.5)
    return (np.exp(np.sin(c * w) * 0.5) * mask).sum() + (np.cos(c - w) ** 2 * w).sum()


def _fd(f, x, w, h=1e-6):
    gx = [(f(x + e, w) - f(x - e, w)) / (2 * h) for e in np.eye(x.size) * h]
    gw = [(f(x, w + e) - f(x, w - e)) / (2 * h) for e in np.eye(w.size) * h]
    return np.array(gx), np.array(gw)


def _inputs(seed, n=4):
    r = np.random.default_rng(seed)
    return r.uniform(-1, 1, n), r.uniform(-1, 1, n)


def test_compile_replays_functions_like_eager_and_finite_differences(reverse):
    calls = {}
    classes = _replay_classes(calls)
    loss = _replay_loss(*classes)
    cf = tg.compile(loss)
    for seed in range(5):
        a, b = _inputs(seed)
        x, w = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        before = dict(calls)
        v = cf(x, w)
        v.backward()
        if seed >= 1:       # a replay: each forward and each backward once (the first replay
            # also replays the tape on the recorded inputs, to check it: each forward once more)
            for name in ("Exp", "Clamp", "SinCos", "Square"):
                for part in ("forward", "backward"):
                    key = name + "." + part
                    assert calls[key] == before[key] + (2 if seed == 1 and part == "forward" else 1), key
        assert calls["Clamp.needs"][-1] == (True, False, False)
        assert calls["SinCos.needs"][-1] == (True, True)
        x2, w2 = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        v2 = loss(x2, w2)
        v2.backward()
        assert v.item() == pytest.approx(v2.item(), rel=1e-14)
        assert v.item() == pytest.approx(_loss_np(a, b), rel=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-13, atol=1e-15)
        gx, gw = _fd(_loss_np, a, b)
        np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-6, atol=1e-8)
    assert cf.stats.replays == 4 and cf.stats.divergences == 0 and cf.stats.eager == 0
    # needs_input_grad of a replay where only w requires grad (a signature of its own)
    for seed in range(2):
        a, b = _inputs(seed)
        w = tg.tensor(b, requires_grad=True)
        cf(tg.tensor(a), w).backward()
        assert calls["SinCos.needs"][-1] == (False, True)
        np.testing.assert_allclose(w.grad.numpy(), _fd(_loss_np, a, b)[1], rtol=1e-6, atol=1e-8)
    assert cf.stats.replays == 5


def test_the_compiled_forward_replays_a_function():
    # (the arena forward: the Function's entry in NumPy between the compiled entries;
    # a comparison, as Clamp's mask, keeps a replay in NumPy)
    from tapegrad import _jit
    _jit.load()
    calls = {}
    Exp, _, SinCos, Square = _replay_classes(calls)

    def loss(x, w):
        s, k = SinCos.apply(x, w)
        return (Exp.apply(s * 0.5) * x).sum() + (Square.apply(k) * w).sum()
    cf = tg.compile(loss)
    for seed in range(4):
        a, b = _inputs(seed, 6)
        x, w = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        cf(x, w).backward()
        x2, w2 = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        loss(x2, w2).backward()
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-12, atol=1e-14)
    (R,) = [R for v in cf.cache.values() for R in v]
    assert R.arena is True and cf.stats.replays == 3


def test_a_function_whose_output_dtype_changes_is_not_replayed_wrong():
    half = [False]

    class Twice(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2.0
            return y.to(tg.float32) if half[0] else y

        @staticmethod
        def backward(ctx, g):
            return g.to(tg.float64) * 2.0
    cf = tg.compile(lambda x: Twice.apply(x))
    for _ in range(2):
        assert cf(tg.tensor([1.0, 2.0], requires_grad=True)).dtype == tg.float64
    half[0] = True
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = cf(x)           # a divergence: recorded again, eager execution's dtype
    assert y.dtype == tg.float32 and y.tolist() == [2.0, 4.0] and cf.stats.divergences == 1
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    tape = tg.record(lambda x: Twice.apply(x).sum(), np.zeros(2))
    half[0] = False
    with pytest.raises(RuntimeError, match="other types, shapes or dtypes than when it was recorded"):
        tape(np.ones(2))


def test_create_graph_through_a_replayed_function(reverse):
    # saved inputs and outputs stand for their slots of the replayed tape, as they do
    # for an eager call: the gradient is differentiated again through them
    calls = {}
    Exp, Clamp, SinCos, Square = _replay_classes(calls)

    def loss(x, w):
        c, mask = Clamp.apply(x, -0.5, 0.5)
        s, k = SinCos.apply(c, w)
        return (Exp.apply(s * 0.5) * mask).sum() + (k * k * w).sum()
    cf = tg.compile(loss)
    for seed in range(4):       # (the first call returns the checked replay of its recording)
        a, b = _inputs(seed)
        res = []
        for f in (cf, loss):
            x, w = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
            gx, gw = tg.autograd.grad(f(x, w), (x, w), create_graph=True)
            ((gx * gx).sum() + (gw * x).sum()).backward()
            res.append([gx.detach().numpy(), gw.detach().numpy(), x.grad.numpy(), w.grad.numpy()])
        for mine, eager in zip(*res):
            np.testing.assert_allclose(mine, eager, rtol=1e-12, atol=1e-14)
    assert cf.stats.replays == 3
    # against finite differences of the replayed gradient
    a, b = _inputs(7)

    def gnorm(av):
        x = tg.tensor(av, requires_grad=True)
        (gx,) = tg.autograd.grad(cf(x, tg.tensor(b)), x)
        return float((gx * gx).sum())
    x = tg.tensor(a, requires_grad=True)
    (gx,) = tg.autograd.grad(cf(x, tg.tensor(b)), x, create_graph=True)
    (h,) = tg.autograd.grad((gx * gx).sum(), x)
    fd = [(gnorm(a + e) - gnorm(a - e)) / 2e-6 for e in np.eye(4) * 1e-6]
    np.testing.assert_allclose(h.numpy(), fd, rtol=1e-6, atol=1e-7)
    # a once_differentiable backward gives a gradient that does not require grad, as eagerly
    cs = tg.compile(lambda x: Square.apply(x).sum())
    for _ in range(3):
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        (g,) = tg.autograd.grad(cs(x), x, create_graph=True)
        assert g.tolist() == [2.0, 4.0] and not g.requires_grad
    assert cs.stats.replays == 2


def test_create_graph_through_a_replayed_function_of_a_non_leaf_it_returns():
    # (its input is computed outside the compiled function, its output is that input,
    # and an integer tensor is saved beside it)
    class Ident(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, idx):
            ctx.save_for_backward(x, idx)
            return x

        @staticmethod
        def backward(ctx, g):
            x, idx = ctx.saved_tensors
            assert idx.dtype == tg.int64
            return g * x * 2, None

    def f(x, idx):
        return (Ident.apply(x * 1.5, idx) * x).sum()
    cf = tg.compile(f)
    for seed in range(3):
        a = _inputs(seed)[0]
        res = []
        for fn in (cf, f):
            w = tg.tensor(a, requires_grad=True)
            (g,) = tg.autograd.grad(fn(w * 2.0, tg.tensor([0, 1])), w, create_graph=True)
            (g * g).sum().backward()
            res.append((g.detach().numpy(), w.grad.numpy()))
        for mine, eager in zip(*res):
            np.testing.assert_allclose(mine, eager, rtol=1e-13)
    assert cf.stats.replays == 2


def test_a_function_in_a_recorded_tape():
    calls = {}
    loss = _replay_loss(*_replay_classes(calls))
    tape = tg.record(loss, np.zeros(4), np.zeros(4))
    for seed in range(3):
        a, b = _inputs(seed)
        before = dict(calls)
        v, (gx, gw) = tape.value_and_grad(a, b)
        assert calls["SinCos.forward"] == before["SinCos.forward"] + 1
        assert calls["SinCos.backward"] == before.get("SinCos.backward", 0) + 1
        assert calls["SinCos.needs"][-1] == (True, True)
        assert float(v) == pytest.approx(_loss_np(a, b), rel=1e-13)
        fx, fw = _fd(_loss_np, a, b)
        np.testing.assert_allclose(gx, fx, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gw, fw, rtol=1e-6, atol=1e-8)
        assert float(tape(a, b)) == float(v)
    # the recording keeps what the calls need to run again, not the recorded tensors
    from tapegrad.autograd.function import _CallSpec
    assert all(type(k) is _CallSpec for k in tape._R.host_keep) and len(tape._R.host_keep) == 4


def test_a_tape_with_a_function_is_not_saved_to_a_file(tmp_path):
    Exp, _, _ = TG
    tape = tg.record(lambda x: Exp.apply(x).sum(), np.zeros(2))
    with pytest.raises(ValueError, match="it calls a tg.autograd.Function"):
        tape.save(str(tmp_path / "f.tape"))


def test_the_tape_owns_the_context():
    # the context (holding recorded tensors) is kept by the tape, so the tape is freed with them
    import gc
    import weakref
    Exp, _, _ = TG
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = Exp.apply(x)
    T = weakref.ref(y._tape)
    y.sum().backward()
    del y
    gc.collect()
    assert T() is None
