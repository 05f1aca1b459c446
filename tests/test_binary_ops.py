"""The second elementwise table (ops/elementwise.py, families UNARY2/BINARY2: kernels
compiled only once a backward meets one of them): hypot, remainder (and ``%``), fmod,
copysign, xlogy, logit, sinc, softplus; and the compositions logaddexp, logaddexp2,
lerp, nan_to_num.  Values and gradients against NumPy/SciPy formulas and PyTorch, at
the special points (zeros, signs, infinities, nan), through the compiled and the
interpreted reverse, gradcheck/gradgradcheck, create_graph, and tg.compile replays."""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine

inf, nan = math.inf, math.nan

A = np.array([-2.5, -1.0, -0.3, 0.0, 0.4, 1.7, 3.0, -0.0])
B = np.array([1.5, -0.7, 2.0, 0.6, -1.3, 0.25, -4.0, 0.9])
P = np.array([0.05, 0.2, 0.5, 0.7, 0.93, 0.999, 0.01, 0.35])     # in (0, 1), for logit


def _softplus(x, beta=1.0, threshold=20.0):
    return tg.nn.functional.softplus(x, beta, threshold)


BINARY = {
    # name: (tapegrad function, torch function name, NumPy forward, d/da, d/db)
    "hypot": (tg.hypot, "hypot", np.hypot, lambda a, b: a / np.hypot(a, b), lambda a, b: b / np.hypot(a, b)),
    "remainder": (tg.remainder, "remainder", np.remainder, lambda a, b: np.ones_like(a),
                  lambda a, b: -np.floor(a / b)),
    "fmod": (tg.fmod, "fmod", np.fmod, lambda a, b: np.ones_like(a), lambda a, b: -np.trunc(a / b)),
    "copysign": (tg.copysign, "copysign", np.copysign,
                 lambda a, b: np.where(a == 0, 0.0, np.copysign(a, b) / np.where(a == 0, 1.0, a)),
                 lambda a, b: np.zeros_like(a)),
    "xlogy": (tg.xlogy, "xlogy", None, None, lambda a, b: a / b),
    "logaddexp": (tg.logaddexp, "logaddexp", np.logaddexp, lambda a, b: 1 / (1 + np.exp(b - a)),
                  lambda a, b: 1 / (1 + np.exp(a - b))),
    "logaddexp2": (tg.logaddexp2, "logaddexp2", np.logaddexp2, lambda a, b: 1 / (1 + 2.0 ** (b - a)),
                   lambda a, b: 1 / (1 + 2.0 ** (a - b))),
}
UNARY = {
    # name: (function, torch spelling, input, NumPy forward, derivative)
    "logit": (tg.logit, "logit", P, lambda x: np.log(x / (1 - x)), lambda x: 1 / (x * (1 - x))),
    "sinc": (tg.sinc, "sinc", A, np.sinc,
             lambda x: np.where(x == 0, 0.0, (np.pi * x * np.cos(np.pi * x) - np.sin(np.pi * x))
                                / (np.pi * np.where(x == 0, 1.0, x) ** 2))),
    "softplus": (_softplus, "nn.functional.softplus", A, lambda x: np.log1p(np.exp(x)),
                 lambda x: 1 / (1 + np.exp(-x))),
}


def _torch_fn(torch, name):
    f = torch
    for part in name.split("."):
        f = getattr(f, part)
    return f


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values_and_gradients(name, reverse):
    f, _, fwd, da, db = BINARY[name]
    a = tg.tensor(A, requires_grad=True)
    b = tg.tensor(B, requires_grad=True)
    y = f(a, b)
    y.sum().backward()
    if fwd is not None:
        np.testing.assert_allclose(y.detach().numpy(), fwd(A, B), rtol=4e-15, atol=1e-300)
    else:
        from scipy.special import xlogy
        np.testing.assert_allclose(y.detach().numpy(), xlogy(A, B), rtol=1e-15)
    if da is not None:
        np.testing.assert_allclose(a.grad.numpy(), da(A, B), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(b.grad.numpy(), db(A, B), rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_and_gradients(name, reverse):
    f, _, x0, fwd, d = UNARY[name]
    x = tg.tensor(x0, requires_grad=True)
    y = f(x)
    y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), fwd(x0), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(x.grad.numpy(), d(x0), rtol=1e-13, atol=1e-300)


def test_the_remainder_has_the_divisors_sign_and_the_operators():
    a = tg.tensor([5.5, -5.5, 5.5, -5.5, 3.0])
    b = tg.tensor([2.0, 2.0, -2.0, -2.0, 0.0])
    np.testing.assert_array_equal(tg.remainder(a, b).numpy(), [1.5, 0.5, -0.5, -1.5, nan])
    np.testing.assert_array_equal(tg.fmod(a, b).numpy(), [1.5, -1.5, 1.5, -1.5, nan])
    np.testing.assert_array_equal((a % 2.0).numpy(), [1.5, 0.5, 1.5, 0.5, 1.0])
    np.testing.assert_array_equal((7.0 % tg.tensor([2.0, -3.0])).numpy(), [1.0, -2.0])
    np.testing.assert_array_equal(tg.remainder(-7.0, tg.tensor([3.0])).numpy(), [2.0])
    # integers stay integers, as Python's and C's; a zero divisor is PyTorch's error
    r = tg.remainder(tg.tensor([7, -7, 7]), tg.tensor([3, 3, -3]))
    assert r.dtype == tg.int64 and r.tolist() == [1, 2, -2]
    assert tg.fmod(tg.tensor([7, -7]), 3).tolist() == [1, -1]
    assert (tg.tensor([7, -7]) % 3).tolist() == [1, 2]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tg.remainder(tg.tensor([1]), 0)
    with pytest.raises(TypeError, match="fmod"):
        tg.fmod(2.0, tg.tensor([1.0]))


def test_special_points():
    # copysign: the gradient is 0 at a zero input, the sign taken from -0.0 too
    a = tg.tensor([0.0, -0.0, 2.0, -3.0], requires_grad=True)
    y = tg.copysign(a, tg.tensor([-1.0, 1.0, -0.0, 0.0]))
    np.testing.assert_array_equal(np.signbit(y.detach().numpy()), [True, False, True, False])
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0, -1.0, -1.0])
    # xlogy: 0 where x is 0, unless y is nan; its gradient in x is 0 where x == 0 and y <= 0
    x = tg.tensor([0.0, 0.0, 0.0, 2.0], requires_grad=True)
    z = tg.tensor([0.0, nan, 3.0, 0.5], requires_grad=True)
    y = tg.xlogy(x, z)
    np.testing.assert_array_equal(y.detach().numpy(), [0.0, nan, 0.0, 2.0 * math.log(0.5)])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, nan, math.log(3.0), math.log(0.5)])
    np.testing.assert_array_equal(z.grad.numpy(), [nan, nan, 0.0, 4.0])
    assert tg.xlogy(2.0, tg.tensor([1.0, math.e])).tolist() == [0.0, 2.0]
    # logit: nan outside [0, 1] without eps; with eps clamped, and 0 gradient outside
    p = tg.tensor([-0.5, 0.0, 0.25, 1.0, 1.5], requires_grad=True)
    tg.logit(p).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [nan, inf, 1 / (0.25 * 0.75), inf, nan])
    p.grad = None
    y = tg.logit(p, eps=0.1)
    np.testing.assert_allclose(y.detach().numpy(), np.log([0.1 / 0.9, 0.1 / 0.9, 1 / 3, 9.0, 9.0]), rtol=1e-15)
    y.sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0, 1 / (0.25 * 0.75), 0.0, 0.0])
    # sinc(0) = 1 with gradient 0; softplus above the threshold is x itself
    s = tg.tensor([0.0, 25.0, -800.0], requires_grad=True)
    tg.sinc(s[:1]).sum().backward()
    assert s.grad.tolist() == [0.0, 0.0, 0.0]
    s.grad = None
    y = tg.nn.functional.softplus(s)
    assert y.tolist() == [math.log(2.0), 25.0, 0.0]
    y.sum().backward()
    assert s.grad.tolist() == [0.5, 1.0, 0.0]
    np.testing.assert_allclose(tg.nn.Softplus(beta=2.0, threshold=1.0)(tg.tensor([0.3, 0.6])).numpy(),
                               [np.log1p(np.exp(0.6)) / 2, 0.6], rtol=1e-15)
    # logaddexp: equal infinities give themselves; large gaps do not overflow
    u = tg.tensor([-inf, inf, 1000.0, -1000.0, 2.0])
    v = tg.tensor([-inf, inf, 0.0, 0.0, 2.0])
    np.testing.assert_array_equal(tg.logaddexp(u, v).numpy(), np.logaddexp(u.numpy(), v.numpy()))
    np.testing.assert_array_equal(tg.logaddexp2(u, v).numpy(), np.logaddexp2(u.numpy(), v.numpy()))
    # nan_to_num: defaults and given values; the gradient passes where the input is finite
    w = tg.tensor([nan, inf, -inf, 1.5], requires_grad=True)
    y = tg.nan_to_num(w)
    fi = np.finfo(np.float64)
    assert y.tolist() == [0.0, fi.max, fi.min, 1.5]
    assert tg.nan_to_num(w, nan=1.0, posinf=2.0, neginf=-2.0).tolist() == [1.0, 2.0, -2.0, 1.5]
    (y * 2.0).sum().backward()
    assert w.grad.tolist() == [0.0, 0.0, 0.0, 2.0]


def test_lerp():
    s = tg.tensor([1.0, -2.0, 0.5], requires_grad=True)
    e = tg.tensor([3.0, 4.0, -1.0], requires_grad=True)
    for w in (0.0, 0.25, 0.5, 1.0, 1.5):
        y = tg.lerp(s, e, w)
        np.testing.assert_allclose(y.detach().numpy(), s.detach().numpy() + w * (e.detach().numpy()
                                                                                - s.detach().numpy()), rtol=1e-15)
    assert tg.lerp(s, e, 1.0).tolist() == e.tolist()        # exact at the ends
    assert tg.lerp(s, e, 0.0).tolist() == s.tolist()
    w = tg.tensor([0.2, 0.7, 1.0], requires_grad=True)
    tg.lerp(s, e, w).sum().backward()
    np.testing.assert_allclose(s.grad.numpy(), 1 - w.detach().numpy(), rtol=1e-15)
    np.testing.assert_allclose(e.grad.numpy(), w.detach().numpy(), rtol=1e-15)
    np.testing.assert_allclose(w.grad.numpy(), e.detach().numpy() - s.detach().numpy(), rtol=1e-15)


# inputs away from kinks (remainder/fmod jump where a/b is an integer; copysign at 0)
_GA = np.array([[-2.3, -0.7, 0.45], [1.3, 2.6, -3.7]])
_GB = np.array([[1.1, -0.6, 0.8], [-1.9, 0.7, 1.6]])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_gradcheck_and_gradgradcheck_binary(name):
    f = BINARY[name][0]
    a = tg.tensor(np.abs(_GA) if name == "xlogy" else _GA, requires_grad=True)
    b = tg.tensor(np.abs(_GB) if name == "xlogy" else _GB, requires_grad=True)
    assert tg.autograd.gradcheck(f, (a, b))
    assert tg.autograd.gradgradcheck(f, (a, b))
    # broadcasting: a row against a matrix, and a column
    assert tg.autograd.gradcheck(f, (a, tg.tensor(np.abs(_GB[:1]) if name == "xlogy" else _GB[:1],
                                                  requires_grad=True)))


@pytest.mark.parametrize("name", sorted(UNARY) + ["logit_eps", "softplus_beta", "lerp", "nan_to_num"])
def test_gradcheck_and_gradgradcheck_unary(name):
    if name == "logit_eps":
        f, x0 = (lambda x: tg.logit(x, eps=0.02)), P
    elif name == "softplus_beta":
        f, x0 = (lambda x: tg.nn.functional.softplus(x, 3.0, 2.0)), A[A != 0] * 0.3
    elif name == "lerp":
        f, x0 = (lambda x: tg.lerp(x, x.exp(), tg.sigmoid(x))), A
    elif name == "nan_to_num":
        f, x0 = (lambda x: tg.nan_to_num(tg.log(x))), np.array([0.5, 1.5, 2.5])
    else:
        f, _, x0, _, _ = UNARY[name]
    x = tg.tensor(x0[x0 != 0] if name == "sinc" else x0, requires_grad=True)
    assert tg.autograd.gradcheck(f, (x,))
    assert tg.autograd.gradgradcheck(f, (x,))


def test_create_graph_second_derivatives():
    x = tg.tensor([0.3, 1.2, 2.5], requires_grad=True)
    y = tg.tensor([1.1, -0.4, 0.9], requires_grad=True)
    (g,) = tg.autograd.grad(tg.hypot(x, y).sum(), x, create_graph=True)
    (h,) = tg.autograd.grad(g.sum(), x)
    xv, yv = x.detach().numpy(), y.detach().numpy()
    np.testing.assert_allclose(h.numpy(), yv ** 2 / np.hypot(xv, yv) ** 3, rtol=1e-13)
    (g,) = tg.autograd.grad(tg.nn.functional.softplus(x).sum(), x, create_graph=True)
    (h,) = tg.autograd.grad(g.sum(), x)
    s = 1 / (1 + np.exp(-xv))
    np.testing.assert_allclose(h.numpy(), s * (1 - s), rtol=1e-13)


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_curvature_at_a_tie(name):
    """The Hessian of logaddexp is c s (1 - s) [[1, -1], [-1, 1]], s the weight of the first
    argument (c = ln 2 for logaddexp2): at a tie (a == b) too, where a composition through
    maximum and abs gave 0.  By forward over reverse (the NumPy walk, then the compiled
    program), by double backward, and against PyTorch where installed."""
    from tapegrad.autograd import functional as Fn
    from tapegrad.autograd import tangent_program as TP
    op, c = getattr(tg, name), (1.0 if name == "logaddexp" else math.log(2.0))
    v = np.array([1.0, 0.7])
    for a, b in ((0.0, 0.0), (1.5, 1.5), (-3.0, -3.0), (2.0, 5.0), (0.0, -40.0)):
        s = 1.0 / (1.0 + np.exp(c * np.array([b - a, a - b])))     # (the weights of a and of b)
        e = np.exp(-c * abs(a - b))         # (s (1 - s) = e / (1 + e)^2, exact where s rounds to 1)
        want = c * e / (1 + e) ** 2 * np.array([[1.0, -1.0], [-1.0, 1.0]]) @ v
        f = lambda x: op(x[0], x[1])     # noqa: E731
        x0 = np.array([a, b])
        walk = Fn.hvp(f, tg.tensor(x0), tg.tensor(v))[1].numpy()
        np.testing.assert_allclose(walk, want, rtol=1e-13, atol=1e-300)
        old, TP.MODE[0] = TP.MODE[0], "now"
        try:
            runs = TP.RUNS[0]
            hs = [Fn.hvp(f, tg.tensor(x0), tg.tensor(v))[1].numpy() for _ in range(3)]
        finally:
            TP.MODE[0] = old
        if engine.INTERPRET[0] != "always":
            assert TP.RUNS[0] > runs
        for h in hs:
            np.testing.assert_allclose(h, want, rtol=1e-13, atol=1e-300)
        x = tg.tensor(x0, requires_grad=True)
        g, = tg.autograd.grad(f(x), x, create_graph=True)
        np.testing.assert_allclose(g.detach().numpy(), s, rtol=1e-14)
        hd, = tg.autograd.grad(g, x, tg.tensor(v))
        np.testing.assert_allclose(hd.numpy(), want, rtol=1e-13, atol=1e-300)
        try:
            import torch
        except ImportError:
            continue
        ht = torch.autograd.functional.hvp(lambda t: getattr(torch, name)(t[0], t[1]), torch.tensor(x0),
                                           torch.tensor(v))[1].numpy()
        np.testing.assert_allclose(walk, ht, rtol=1e-13, atol=1e-300)


def test_replay_with_new_inputs():
    def f(a, b):
        return (tg.hypot(a, b) + tg.xlogy(a.abs(), b.abs() + 1.0) + tg.remainder(a, b) * tg.fmod(b, a)
                + tg.copysign(a, b) + tg.logaddexp(a, b) + tg.sinc(a) + tg.nn.functional.softplus(b)
                + tg.logit(tg.sigmoid(a))).sum()
    step = tg.compile(f)
    rng = np.random.default_rng(3)
    for _ in range(4):
        av, bv = rng.normal(size=5), rng.normal(size=5)
        a = tg.tensor(av, requires_grad=True)
        b = tg.tensor(bv, requires_grad=True)
        out = step(a, b)
        out.backward()
        a2 = tg.tensor(av, requires_grad=True)
        b2 = tg.tensor(bv, requires_grad=True)
        want = f(a2, b2)
        want.backward()
        assert out.item() == pytest.approx(want.item(), rel=1e-14)
        np.testing.assert_allclose(a.grad.numpy(), a2.grad.numpy(), rtol=1e-13)
        np.testing.assert_allclose(b.grad.numpy(), b2.grad.numpy(), rtol=1e-13)
    assert step.stats.replays >= 2


def test_bad_input():
    with pytest.raises(NotImplementedError, match="hypot_cpu"):
        tg.hypot(tg.tensor([1, 2]), tg.tensor([3, 4]))
    with pytest.raises(TypeError, match="must be Tensor"):
        tg.hypot(tg.tensor([1.0]), 2.0)
    with pytest.raises(TypeError, match="must be Tensor"):
        tg.logaddexp(1.0, tg.tensor([1.0]))
    assert tg.copysign(tg.tensor([1, -2]), -1.0).tolist() == [-1.0, -2.0]
    assert tg.copysign(tg.tensor([1, -2]), -1.0).dtype == tg.float64


# -- against PyTorch -------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_against_torch(name):
    torch = pytest.importorskip("torch")
    f, tname = BINARY[name][:2]
    av = np.concatenate([A, [inf, -inf, nan, 0.0, 5.0]])
    bv = np.concatenate([B, [1.0, 2.0, 1.0, -0.0, inf]])
    if name in ("hypot", "copysign", "xlogy", "logaddexp", "logaddexp2"):
        av, bv = np.concatenate([av, [inf, -inf]]), np.concatenate([bv, [inf, -inf]])
    a, b = tg.tensor(av, requires_grad=True), tg.tensor(bv, requires_grad=True)
    ta = torch.tensor(av, requires_grad=True)
    tb = torch.tensor(bv, requires_grad=True)
    y, ty = f(a, b), _torch_fn(torch, tname)(ta, tb)
    # (logaddexp2: PyTorch's exp2/log1p differ from NumPy's in the last bit or two)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=4e-15 if name == "logaddexp2" else 1e-15,
                               atol=0)
    gy = np.linspace(0.5, 1.5, av.size)
    y.backward(tg.tensor(gy))
    ty.backward(torch.tensor(gy))
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-14, atol=1e-300)
    # a number operand where PyTorch takes one
    for other in (2.5, -0.5):
        try:
            want = _torch_fn(torch, tname)(ta.detach(), other)
        except TypeError:
            continue
        np.testing.assert_allclose(f(a.detach(), other).numpy(), want.numpy(), rtol=1e-15)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_torch(name):
    torch = pytest.importorskip("torch")
    f, tname, x0, _, _ = UNARY[name]
    xv = np.concatenate([x0, [0.0, -0.0, inf, -inf, nan, 30.0]])
    if name == "logit":
        xv = np.concatenate([xv, [-0.5, 1.0, 1.5]])
    x, tx = tg.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    y, ty = f(x), _torch_fn(torch, tname)(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-15, atol=0)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14, atol=1e-300)
    if name == "logit":
        x.grad, tx.grad = None, None
        tg.logit(x, 0.1).sum().backward()
        torch.logit(tx, 0.1).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14)
    if name == "softplus":
        for beta, thr in ((2.0, 5.0), (0.5, 1.0)):
            np.testing.assert_allclose(tg.nn.functional.softplus(x, beta, thr).detach().numpy(),
                                       torch.nn.functional.softplus(tx, beta, thr).detach().numpy(), rtol=1e-15)


def test_lerp_and_nan_to_num_against_torch():
    torch = pytest.importorskip("torch")
    s, e = np.array([1.0, -2.0, 0.5, 3.0]), np.array([3.0, 4.0, -1.0, 3.5])
    w = np.array([0.2, 0.7, 1.0, -0.3])
    for weight in (0.3, 0.8, w):
        tw = torch.tensor(weight) if isinstance(weight, np.ndarray) else weight
        gw = tg.tensor(weight) if isinstance(weight, np.ndarray) else weight
        # (PyTorch's kernel multiplies and adds in one rounding, a fused multiply-add)
        np.testing.assert_allclose(tg.lerp(tg.tensor(s), tg.tensor(e), gw).numpy(),
                                   torch.lerp(torch.tensor(s), torch.tensor(e), tw).numpy(), rtol=1e-15, atol=4e-16)
    x = np.array([nan, inf, -inf, 2.0])
    for kw in ({}, {"nan": 1.0, "posinf": 9.0, "neginf": -9.0}):
        np.testing.assert_array_equal(tg.nan_to_num(tg.tensor(x), **kw).numpy(),
                                      torch.nan_to_num(torch.tensor(x), **kw).numpy())


def test_integer_and_error_behaviour_against_torch():
    torch = pytest.importorskip("torch")
    ia, ib = [7, -7, 7, -7], [3, 3, -3, -3]
    for name in ("remainder", "fmod"):
        got = getattr(tg, name)(tg.tensor(ia), tg.tensor(ib))
        want = getattr(torch, name)(torch.tensor(ia), torch.tensor(ib))
        assert got.tolist() == want.tolist() and str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    with pytest.raises(NotImplementedError) as want:
        torch.hypot(torch.tensor([1]), torch.tensor([2]))
    with pytest.raises(NotImplementedError) as got:
        tg.hypot(tg.tensor([1]), tg.tensor([2]))
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("sa,sb", [((384, 1, 3), (1, 384, 3)), ((384, 1, 3), (1, 384, 1)), ((100, 200, 2), (2,)),
                                   ((5000, 4), (5000, 1)), ((1, 3), (9000, 3)), ((20000, 3), ())])
def test_broadcasts_over_a_short_last_axis_are_exact(sa, sb):
    """Broadcasts with a short last axis run by components (ops.elementwise.broadcast_apply):
    the values, dtype and gradients of NumPy's single call."""
    from tapegrad.ops.elementwise import broadcast_apply
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    for f in (np.subtract, np.multiply, np.greater, np.maximum, np.arctan2):
        want = f(a, b)
        got = broadcast_apply(f, a, b)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    x, y = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    z = x * y - y
    np.testing.assert_array_equal(z.detach().numpy(), a * b - b)
    w = rng.standard_normal(z.shape)
    (z * tg.tensor(w)).sum().backward()
    axes_a = tuple(range(len(z.shape) - len(sa))) + tuple(i + len(z.shape) - len(sa) for i, n in enumerate(sa) if n == 1)
    np.testing.assert_allclose(x.grad.numpy(), (w * b).sum(axis=axes_a).reshape(sa), rtol=1e-12, atol=1e-12)
