"""Special functions (rows of the second elementwise table) and ``tg.special``: values
against SciPy, gradients against SciPy's derivatives (digamma, polygamma, i0, i1... are
SciPy's own C functions in the kernels, kernels/special.py), the compiled and the
interpreted reverse, gradcheck/gradgradcheck, create_graph, replay, and PyTorch."""
import math

import numpy as np
import pytest
import scipy.special as sp

import tapegrad as tg

S = tg.special
X = np.array([0.15, 0.6, 1.3, 2.7, 4.4, 9.5])           # positive (lgamma, digamma, entr...)
Z = np.array([-2.9, -1.1, -0.35, 0.2, 0.85, 3.3])       # either sign
U = np.array([-0.95, -0.6, -0.1, 0.3, 0.7, 0.99])       # in (-1, 1) (erfinv)
Q = np.array([0.01, 0.2, 0.45, 0.6, 0.9, 0.999])        # in (0, 1) (ndtri)
SQRT_PI = math.sqrt(math.pi)

# name: (tapegrad function, torch name, input, value, derivative)
CASES = {
    "erf": (tg.erf, "erf", Z, sp.erf, lambda x: 2 / SQRT_PI * np.exp(-x * x)),
    "erfc": (tg.erfc, "erfc", Z, sp.erfc, lambda x: -2 / SQRT_PI * np.exp(-x * x)),
    "erfinv": (tg.erfinv, "erfinv", U, sp.erfinv, lambda x: SQRT_PI / 2 * np.exp(sp.erfinv(x) ** 2)),
    "lgamma": (tg.lgamma, "lgamma", np.concatenate([X, -Z[:2] - 0.5]), sp.gammaln, sp.psi),
    "digamma": (tg.digamma, "digamma", np.concatenate([X, [-2.5, -0.4]]), sp.psi, lambda x: sp.polygamma(1, x)),
    "polygamma1": (lambda x: tg.polygamma(1, x), "polygamma1", X, lambda x: sp.polygamma(1, x),
                   lambda x: sp.polygamma(2, x)),
    "polygamma3": (lambda x: tg.polygamma(3, x), "polygamma3", X, lambda x: sp.polygamma(3, x),
                   lambda x: sp.polygamma(4, x)),
    "i0": (tg.i0, "i0", Z, sp.i0, sp.i1),
    "i0e": (S.i0e, "special.i0e", Z, sp.i0e, lambda x: sp.i1e(x) - np.sign(x) * sp.i0e(x)),
    "i1": (S.i1, "special.i1", Z, sp.i1, lambda x: sp.i0(x) - sp.i1(x) / x),
    "i1e": (S.i1e, "special.i1e", Z, sp.i1e, lambda x: sp.i0e(x) - sp.i1e(x) * (np.sign(x) + 1 / x)),
    "ndtr": (S.ndtr, "special.ndtr", Z, sp.ndtr, lambda x: np.exp(-x * x / 2) / math.sqrt(2 * math.pi)),
    "ndtri": (S.ndtri, "special.ndtri", Q, sp.ndtri,
              lambda x: math.sqrt(2 * math.pi) * np.exp(sp.ndtri(x) ** 2 / 2)),
    "log_ndtr": (S.log_ndtr, "special.log_ndtr", np.concatenate([Z, [-30.0]]), sp.log_ndtr,
                 lambda x: np.exp(-x * x / 2) / math.sqrt(2 * math.pi) / sp.ndtr(x)),
    "entr": (S.entr, "special.entr", X, sp.entr, lambda x: -(1 + np.log(x))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients(name, reverse):
    f, _, x0, value, deriv = CASES[name]
    x = tg.tensor(x0, requires_grad=True)
    y = f(x)
    np.testing.assert_allclose(y.detach().numpy(), value(x0), rtol=1e-15)
    w = np.linspace(0.5, 2.0, x0.size)
    y.backward(tg.tensor(w))
    np.testing.assert_allclose(x.grad.numpy(), w * deriv(x0), rtol=2e-15 if name != "log_ndtr" else 1e-13)


def test_xlog1py(reverse):
    a = tg.tensor([0.0, 0.0, 0.0, 2.0, -1.5], requires_grad=True)
    b = tg.tensor([-1.0, np.nan, 3.0, 0.5, 2.0], requires_grad=True)
    y = S.xlog1py(a, b)
    np.testing.assert_array_equal(y.detach().numpy(), sp.xlog1py(a.detach().numpy(), b.detach().numpy()))
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0.0, np.nan, math.log1p(3.0), math.log1p(0.5), math.log1p(2.0)],
                               rtol=4e-16)
    np.testing.assert_allclose(b.grad.numpy(), [np.nan, np.nan, 0.0, 2.0 / 1.5, -1.5 / 3.0])
    assert S.xlog1py(2.0, tg.tensor([0.0, math.e - 1])).tolist() == [0.0, 2.0]


def test_special_points_and_dtypes():
    # PyTorch's values at the poles and infinities
    x = tg.tensor([0.0, -1.0, -np.inf, np.inf])
    assert tg.lgamma(x).tolist() == [np.inf, np.inf, np.inf, np.inf]
    assert tg.digamma(tg.tensor([0.0, -0.0])).tolist() == [-np.inf, np.inf]
    assert tg.erf(tg.tensor([np.inf, -np.inf])).tolist() == [1.0, -1.0]
    assert tg.erfinv(tg.tensor([1.0, -1.0])).tolist() == [np.inf, -np.inf]
    assert S.entr(tg.tensor([0.0, -1.0])).tolist() == [0.0, -np.inf]
    # integers give the default float; float32 stays float32
    assert tg.lgamma(tg.tensor([1, 2, 3])).dtype == tg.float64
    np.testing.assert_allclose(tg.lgamma(tg.tensor([1, 2, 5])).numpy(), [0.0, 0.0, math.log(24.0)], atol=1e-15)
    y = tg.erf(tg.tensor([0.5], dtype=tg.float32))
    assert y.dtype == tg.float32 and y.item() == pytest.approx(math.erf(0.5), rel=1e-7)
    # polygamma's checks
    with pytest.raises(RuntimeError, match="negative n"):
        tg.polygamma(-1, tg.tensor([1.0]))
    with pytest.raises(TypeError, match="must be int"):
        tg.polygamma(1.5, tg.tensor([1.0]))
    assert tg.tensor([2.0]).polygamma(0).item() == pytest.approx(sp.psi(2.0), rel=1e-15)


def test_aliases_and_multigammaln():
    x = tg.tensor(X)
    assert S.gammaln is tg.lgamma and S.psi is tg.digamma and S.expit is tg.sigmoid
    np.testing.assert_array_equal(S.psi(x).numpy(), sp.psi(X))
    np.testing.assert_array_equal(S.logsumexp(x, 0).numpy(), tg.logsumexp(x, 0).numpy())
    np.testing.assert_allclose(S.softmax(tg.tensor([[1.0, 2.0, 3.0]]), 1).numpy(),
                               sp.softmax([[1.0, 2.0, 3.0]], axis=1), rtol=1e-15)
    np.testing.assert_allclose(S.log_softmax(tg.tensor([[1.0, 2.0, 3.0]]), 1).numpy(),
                               sp.log_softmax([[1.0, 2.0, 3.0]], axis=1), rtol=1e-15)
    a = tg.tensor([2.5, 3.0, 7.25], requires_grad=True)
    y = S.multigammaln(a, 3)
    np.testing.assert_allclose(y.detach().numpy(), sp.multigammaln(np.array([2.5, 3.0, 7.25]), 3), rtol=1e-14)
    y.sum().backward()
    av = np.array([2.5, 3.0, 7.25])
    np.testing.assert_allclose(a.grad.numpy(), sp.psi(av) + sp.psi(av - 0.5) + sp.psi(av - 1.0), rtol=1e-14)
    # (outside its domain, input <= (p - 1) / 2, the same sum, as PyTorch 2.13 computes it)
    np.testing.assert_allclose(S.multigammaln(tg.tensor([0.7]), 3).numpy(),
                               [sum(sp.gammaln(0.7 - j / 2) for j in range(3)) + 1.5 * math.log(math.pi)], rtol=1e-14)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_and_gradgradcheck(name):
    f, _, x0, _, _ = CASES[name]
    x = tg.tensor(x0[:4].reshape(2, 2), requires_grad=True)
    assert tg.autograd.gradcheck(f, (x,))
    assert tg.autograd.gradgradcheck(f, (x,))


def test_create_graph_third_derivative_of_lgamma():
    x = tg.tensor([0.7, 2.2, 5.0], requires_grad=True)
    (g,) = tg.autograd.grad(tg.lgamma(x).sum(), x, create_graph=True)
    (h,) = tg.autograd.grad(g.sum(), x, create_graph=True)
    (t,) = tg.autograd.grad(h.sum(), x)
    xv = x.detach().numpy()
    np.testing.assert_allclose(g.detach().numpy(), sp.psi(xv), rtol=1e-15)
    np.testing.assert_allclose(h.detach().numpy(), sp.polygamma(1, xv), rtol=1e-15)
    np.testing.assert_allclose(t.numpy(), sp.polygamma(2, xv), rtol=1e-15)


def test_replay_with_new_inputs():
    def f(x):
        return (tg.lgamma(x) + tg.erf(x - 1.0) * tg.digamma(x) + tg.i0(x) + S.log_ndtr(x - 2.0)
                + tg.polygamma(2, x) + S.xlog1py(x, x)).sum()
    step = tg.compile(f)
    rng = np.random.default_rng(8)
    for _ in range(4):
        xv = rng.uniform(0.3, 4.0, size=6)
        x = tg.tensor(xv, requires_grad=True)
        out = step(x)
        out.backward()
        x2 = tg.tensor(xv, requires_grad=True)
        want = f(x2)
        want.backward()
        assert out.item() == pytest.approx(want.item(), rel=1e-14)
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-13)
    assert step.stats.replays >= 2


def _torch_fn(torch, name):
    if name.startswith("polygamma"):
        n = int(name[-1])
        return lambda t: torch.polygamma(n, t)
    f = torch
    for part in name.split("."):
        f = getattr(f, part)
    return f


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    f, tname, x0, _, _ = CASES[name]
    x, tx = tg.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    y, ty = f(x), _torch_fn(torch, tname)(tx)
    # (values: PyTorch's own implementations, within a few ulp of SciPy's; its trigamma,
    # polygamma(1), is off by up to 5e-10)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=2e-9 if name == "polygamma1" else 1e-13)
    y.sum().backward()
    ty.sum().backward()
    # (PyTorch's trigamma, digamma's derivative and polygamma's, is off by up to 5e-10)
    rtol = 2e-9 if name in ("digamma", "polygamma1", "polygamma3") else 1e-13
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol)


def test_special_namespace_against_torch():
    torch = pytest.importorskip("torch")
    for name in S.__all__:
        assert hasattr(torch.special, name), name
    x = np.array([0.3, 1.7, 4.0])
    for name in ("expit", "logit", "gammaln", "digamma", "psi", "erf", "erfc", "ndtr", "log_ndtr", "entr", "i0",
                 "i0e", "i1", "i1e", "log1p", "expm1", "exp2", "sinc"):
        got = getattr(S, name)(tg.tensor(x / 5 if name == "logit" else x)).numpy()
        want = getattr(torch.special, name)(torch.tensor(x / 5 if name == "logit" else x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-13, err_msg=name)
    np.testing.assert_allclose(S.multigammaln(tg.tensor(x + 2), 2).numpy(),
                               torch.special.multigammaln(torch.tensor(x + 2), 2).numpy(), rtol=1e-14)
    np.testing.assert_allclose(S.xlog1py(tg.tensor(x), tg.tensor(x)).numpy(),
                               torch.special.xlog1py(torch.tensor(x), torch.tensor(x)).numpy(), rtol=1e-15)
