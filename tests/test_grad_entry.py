"""grad(create_graph=True) of a scalar as one grad_of entry per input (autograd/grad_entry.py):
after the op-by-op path has served a tape structure, the entry gives the same gradients,
grad_fn names and requires_grad, and the same second derivatives, by the compiled program."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import grad_entry as GE
from tapegrad.autograd import tangent_program as TP

RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def forced(monkeypatch):
    from tapegrad import _jit
    _jit.load()             # (the entry serves compiled backward passes only)
    monkeypatch.setattr(GE, "OBSERVE", 1)
    monkeypatch.setattr(TP, "MODE", ["now"])
    monkeypatch.setattr(TP, "COMPILE_AFTER", 1)
    monkeypatch.setattr(GE, "_OBSERVED", {})


def rosen(x):
    h = x[:-1]
    return (100 * (x[1:] - h ** 2) ** 2 + (1 - h) ** 2).sum()


def two_inputs(x, w):
    return (tg.sin(x * w) ** 2).sum() + (x * x * w).sum() + w.exp().sum()


def _double_backward(f, arrays, vs):
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]
    y = f(*xs)
    gs = tg.autograd.grad(y, xs, create_graph=True)
    s = sum((g * tg.tensor(v)).sum() for g, v in zip(gs, vs))
    s.backward()
    return y.item(), [g.detach().numpy() for g in gs], [g.grad_fn.name() for g in gs], [x.grad.numpy() for x in xs]


@pytest.mark.parametrize("f, n_in", [(rosen, 1), (two_inputs, 2)], ids=["rosen", "two inputs"])
def test_same_as_op_by_op(f, n_in):
    arrays = [RNG.standard_normal(50) for _ in range(n_in)]
    vs = [RNG.standard_normal(50) for _ in range(n_in)]
    served = GE.SERVED[0]
    first = _double_backward(f, arrays, vs)      # op by op, observed
    assert GE.SERVED[0] == served
    again = [_double_backward(f, arrays, vs) for _ in range(2)]
    assert GE.SERVED[0] == served + 2, "the entry did not serve"
    for got in again:
        assert got[0] == first[0]
        assert got[2] == first[2]               # grad_fn names
        for a, b in zip(got[1], first[1]):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
        for a, b in zip(got[3], first[3]):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_third_derivative_goes_op_by_op():
    """create_graph through the entry's reverse: the op-by-op gradient, differentiable again."""
    x0 = np.array([0.3, -0.7, 1.1])

    def third(x0):
        x = tg.tensor(x0, requires_grad=True)
        g, = tg.autograd.grad((x ** 4).sum(), x, create_graph=True)
        h, = tg.autograd.grad((g * g).sum(), x, create_graph=True)
        t, = tg.autograd.grad(h.sum(), x)
        return g.detach().numpy(), h.detach().numpy(), t.numpy()
    for _ in range(3):
        g, h, t = third(x0)
        np.testing.assert_allclose(g, 4 * x0 ** 3, rtol=1e-14)
        np.testing.assert_allclose(h, 2 * (4 * x0 ** 3) * 12 * x0 ** 2, rtol=1e-13)     # d/dx (16 x^6)
        np.testing.assert_allclose(t, 96 * 5 * x0 ** 4, rtol=1e-12)


def test_linear_and_unused_inputs():
    """A gradient that does not depend on the inputs (requires_grad False) comes out as op
    by op; an input the output does not reach (None with allow_unused) keeps the op-by-op
    path (a gap: it is not on the tape)."""
    def call(unused):
        x, w, u = (tg.tensor(np.arange(3.0) + 1, requires_grad=True) for _ in range(3))
        y = (x * 3.0).sum() + (w * w).sum()
        return tg.autograd.grad(y, [x, w, u] if unused else [x, w], create_graph=True, allow_unused=True)
    served = GE.SERVED[0]
    for k in range(6):
        gx, gw, *gu = call(k >= 3)
        assert gu in ([], [None])
        assert not gx.requires_grad and gw.requires_grad
        np.testing.assert_array_equal(gx.numpy(), [3.0, 3.0, 3.0])
        np.testing.assert_array_equal(gw.detach().numpy(), [2.0, 4.0, 6.0])
        gw.sum().backward()
    assert GE.SERVED[0] == served + 2


def test_a_value_changed_in_place_raises_as_op_by_op():
    def call(change):
        x = tg.tensor([0.5, 1.5], requires_grad=True)
        e = x.exp()
        g, = tg.autograd.grad((e * e).sum(), x, create_graph=True)
        if change:
            with tg.no_grad():
                e.mul_(2.0)
        return g
    served = GE.SERVED[0]
    for _ in range(2):
        call(False).sum().backward()
    assert GE.SERVED[0] == served + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        call(True).sum().backward()
    assert GE.SERVED[0] == served + 2


@pytest.mark.parametrize("case", ["hook", "anomaly", "retain_graph=False", "two outputs", "grad_outputs"])
def test_what_the_entry_leaves_to_the_op_by_op_path(case):
    """Hooks, anomaly mode, retain_graph=False, several outputs and given grad_outputs keep the
    op-by-op path, with its values."""
    x0, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 2.0, -1.0])

    def call():
        x = tg.tensor(x0, requires_grad=True)
        if case == "hook":
            x.register_hook(lambda g: g * 2.0)
        y = (x ** 3).sum()
        kw = {"create_graph": True}
        if case == "retain_graph=False":
            kw["retain_graph"] = False
        outs = [y, (x * x).sum()] if case == "two outputs" else y
        if case == "grad_outputs":
            kw["grad_outputs"] = tg.tensor(1.0)
        with tg.autograd.set_detect_anomaly(case == "anomaly"):
            g, = tg.autograd.grad(outs, x, **kw)
            (g * tg.tensor(v)).sum().backward()
        return g.detach().numpy(), x.grad.numpy()
    served = GE.SERVED[0]
    for _ in range(3):
        g, h = call()
        scale = 2.0 if case == "hook" else 1.0
        extra = 2 * x0 if case == "two outputs" else 0.0
        np.testing.assert_allclose(g, scale * (3 * x0 ** 2 + extra), rtol=1e-14)
        np.testing.assert_allclose(h, scale * (6 * x0 + (2.0 if case == "two outputs" else 0.0)) * v * scale,
                                   rtol=1e-13)
    assert GE.SERVED[0] == served
