"""tg.autograd.Function: a user's forward and backward, recorded as one host op entry
(tapegrad/autograd/function.py): values and gradients against PyTorch's Function in
the compiled and the interpreted reverse, several inputs and outputs, non-tensor
arguments, needs_input_grad, mark_non_differentiable, once_differentiable,
create_graph, gradcheck and gradgradcheck, and tg.compile running it eagerly."""
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


@pytest.mark.parametrize("mode", ["never", "always"])
def test_values_and_gradients_match_torch(mode, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(engine, "INTERPRET", [mode])
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


def test_compile_runs_a_function_eagerly():
    Exp, _, _ = TG
    cf = tg.compile(lambda x: Exp.apply(x * 2.0).sum())
    for v in ([0.0, 1.0], [1.0, 2.0]):
        x = tg.tensor(v, requires_grad=True)
        out = cf(x)
        out.backward()
        np.testing.assert_allclose(out.item(), np.exp(2 * np.array(v)).sum())
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * np.array(v)))
    assert cf.stats.replays == 0


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
