"""Reparameterised draws of Gamma, Chi2, Beta, Dirichlet and StudentT
(distributions/utils.standard_gamma): the implicit derivative of a Gamma draw against
finite differences of SciPy's inverse CDF, mpmath and PyTorch's ``_standard_gamma_grad``;
Monte Carlo gradients of known expectations; shapes and dtypes as PyTorch's; PyTorch's
refusal of the second derivative; no replay of a random draw."""
import numpy as np
import pytest
from scipy import special as sp

import tapegrad as tg
from tapegrad.distributions.utils import standard_gamma_grad

D = tg.distributions
ALPHAS = [1e-3, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 100.0, 1000.0]


def _draws(a, n=400, seed=0):
    return np.maximum(np.random.default_rng(seed).standard_gamma(a, n), 1e-300)


@pytest.mark.parametrize("a", ALPHAS)
def test_derivative_against_the_inverse_cdf(a):
    # x(a) = P^-1(a, u) at fixed u: its derivative is the implicit one
    x = _draws(a)
    x = x[(x > 1e-100) & (sp.gammainc(a, x) > 1e-12) & (sp.gammaincc(a, x) > 1e-12)]
    u = sp.gammainc(a, x)
    h = 1e-5 * a
    fd = (sp.gammaincinv(a + h, u) - sp.gammaincinv(a - h, u)) / (2 * h)
    np.testing.assert_allclose(standard_gamma_grad(a, x), fd, rtol=2e-5, atol=1e-300)


def test_derivative_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    for a, x in [(0.5, 0.3), (10.0, 12.0), (1000.0, 1010.0), (0.01, 1e-50), (3.0, 0.01), (2.0, 15.0)]:
        def cdf(b):
            return mpmath.gammainc(b, 0, x, regularized=True)
        exact = -mpmath.diff(cdf, a) / (mpmath.mpf(x) ** (a - 1) * mpmath.e ** (-x) / mpmath.gamma(a))
        np.testing.assert_allclose(standard_gamma_grad(a, x), float(exact), rtol=1e-7)


@pytest.mark.parametrize("a", ALPHAS)
def test_derivative_against_torch(a):
    torch = pytest.importorskip("torch")
    x = _draws(a)
    theirs = torch._standard_gamma_grad(torch.tensor(np.full_like(x, a)), torch.tensor(x)).numpy()
    ours = standard_gamma_grad(a, x)
    ok = np.isfinite(theirs) & (theirs != 0)
    # (PyTorch's closed-form approximations are good to about 1e-4, 1e-2 at worst for tiny a)
    rel = np.abs(ours[ok] - theirs[ok]) / np.abs(theirs[ok])
    assert np.median(rel) < 1e-4 and rel.max() < 2e-2


def test_the_gradient_of_a_draw_is_the_implicit_derivative():
    tg.manual_seed(3)
    a = tg.tensor([0.7, 4.0], requires_grad=True)
    r = tg.tensor([2.0, 0.5], requires_grad=True)
    x = D.Gamma(a, r).rsample()
    x.sum().backward()
    s = (x * r).detach().numpy()          # the standard draw
    np.testing.assert_allclose(a.grad.numpy(), standard_gamma_grad(a.detach().numpy(), s) / r.detach().numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(r.grad.numpy(), -x.detach().numpy() / r.detach().numpy(), rtol=1e-12)


def _mc(seed=0):
    tg.manual_seed(seed)


def test_monte_carlo_gradients_of_known_expectations():
    _mc()
    a = tg.tensor([0.5, 2.0, 10.0], requires_grad=True)
    rate = tg.tensor([1.0, 2.0, 0.5])
    x = D.Gamma(a, rate).rsample((40000,))
    x.mean(0).sum().backward()                          # d E[x] / da = 1 / rate
    np.testing.assert_allclose(a.grad.numpy(), [1.0, 0.5, 2.0], rtol=0.03)
    b = tg.tensor([2.0, 3.0], requires_grad=True)
    D.Beta(b[0], b[1]).rsample((40000,)).mean().backward()   # E = a / (a + b)
    np.testing.assert_allclose(b.grad.numpy(), [3 / 25, -2 / 25], rtol=0.05)
    c = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    D.Dirichlet(c).rsample((40000,)).mean(0)[0].backward()
    np.testing.assert_allclose(c.grad.numpy(), [5 / 36, -1 / 36, -1 / 36], rtol=0.05)
    df = tg.tensor(4.0, requires_grad=True)
    D.Chi2(df).rsample((40000,)).mean().backward()      # E = df
    np.testing.assert_allclose(df.grad.item(), 1.0, rtol=0.03)
    df = tg.tensor(6.0, requires_grad=True)
    t = D.StudentT(df, 0.0, 1.0).rsample((80000,))
    (t * t).mean().backward()                           # E t^2 = df / (df - 2): d/d df = -2 / (df - 2)^2
    np.testing.assert_allclose(df.grad.item(), -2 / 16, rtol=0.15)


def test_draws_have_the_right_distribution():
    _mc(1)
    x = D.Gamma(tg.tensor(3.0), tg.tensor(2.0)).rsample((50000,)).detach().numpy()
    assert abs(x.mean() - 1.5) < 4 * np.sqrt(0.75 / 50000) and abs(x.var() - 0.75) < 0.03
    y = D.Beta(tg.tensor(2.0), tg.tensor(5.0)).rsample((50000,)).detach().numpy()
    assert abs(y.mean() - 2 / 7) < 0.005 and 0 < y.min() and y.max() < 1
    z = D.Dirichlet(tg.tensor([1.0, 1.0, 2.0])).rsample((20000,)).detach().numpy()
    np.testing.assert_allclose(z.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(z.mean(0), [0.25, 0.25, 0.5], atol=0.01)


@pytest.mark.parametrize("make", [
    lambda L: L.distributions.Gamma(L.ones(2, 3) * 2, L.ones(3)),
    lambda L: L.distributions.Chi2(L.ones(4) * 3),
    lambda L: L.distributions.Beta(L.ones(2) * 2, L.ones(2) * 3),
    lambda L: L.distributions.Dirichlet(L.ones(2, 4)),
    lambda L: L.distributions.StudentT(L.ones(3) * 5, 0.0, 2.0),
])
def test_shapes_and_flags_as_pytorch(make):
    torch = pytest.importorskip("torch")
    ours, theirs = make(tg), make(torch)
    assert ours.has_rsample and theirs.has_rsample
    for shape in ((), (5,), (2, 3)):
        assert tuple(ours.rsample(shape).shape) == tuple(theirs.rsample(shape).shape)
    assert tuple(ours.expand((7,) + tuple(ours.batch_shape)).rsample().shape) == \
        tuple(theirs.expand((7,) + tuple(theirs.batch_shape)).rsample().shape)


def test_float32_is_kept():
    a = tg.tensor([1.5, 3.0], dtype=tg.float32, requires_grad=True)
    x = D.Gamma(a, tg.tensor([1.0, 1.0], dtype=tg.float32)).rsample((4,))
    assert x.dtype == tg.float32
    x.sum().backward()
    assert a.grad.dtype == tg.float32 and np.all(a.grad.numpy() > 0)


def test_second_derivative_is_refused_as_in_pytorch():
    a = tg.tensor([2.0], requires_grad=True)
    x = D.Gamma(a, tg.tensor([1.0])).rsample()
    g, = tg.autograd.grad(x.sum(), a, create_graph=True)        # the first derivative: allowed
    np.testing.assert_allclose(g.detach().numpy(), standard_gamma_grad(2.0, x.detach().numpy()), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="the derivative for '_standard_gamma_grad' is not implemented"):
        g.sum().backward()


def test_a_compiled_function_that_draws_runs_eagerly():
    def f(a):
        return D.Gamma(a, tg.tensor(1.0)).rsample((3,)).sum()
    c = tg.compile(f)
    values = [c(tg.tensor(2.0, requires_grad=True)).item() for _ in range(3)]
    assert len(set(values)) == 3                   # a new draw each call: never a replayed one
    assert c.stats.replays == 0 and c.stats.eager >= 2 and c.why
