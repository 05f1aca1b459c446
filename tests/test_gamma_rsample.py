"""Reparameterised draws of Gamma, Chi2, Beta, Dirichlet and StudentT
(distributions/utils.standard_gamma and sample_dirichlet, distributions/_implicit): the
implicit derivatives of a Gamma and a Beta draw against central finite differences of
SciPy's CDFs, mpmath and PyTorch's ``_standard_gamma_grad`` / ``_dirichlet_grad`` over wide
grids; the reverse rules at a fixed draw (PyTorch's ``_Dirichlet_backward``); Monte Carlo
gradients of known expectations; the distribution of the draws; shapes and dtypes as
PyTorch's; PyTorch's refusal of the second derivative; no replay of a random draw."""
import numpy as np
import pytest
from scipy import special as sp

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.distributions.utils import dirichlet_grad, sample_dirichlet, standard_gamma, standard_gamma_grad

D = tg.distributions
ALPHAS = np.geomspace(1e-3, 1e3, 13)
QUANTILES = np.array([1e-3, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999])
BETA_PARAMS = np.geomspace(1e-2, 1e3, 7)


def _gamma_grid(alphas=ALPHAS, qs=QUANTILES):
    a, q = np.meshgrid(alphas, qs, indexing="ij")
    x = np.where(q < 0.5, sp.gammaincinv(a, q), sp.gammainccinv(a, 1 - q))
    ok = x > 1e-300                     # (a quantile of a tiny concentration below float64's range)
    return a[ok], q[ok], x[ok]


def _beta_grid(ps=BETA_PARAMS, qs=QUANTILES):
    a, b, q = np.meshgrid(ps, ps, qs, indexing="ij")
    x = sp.betaincinv(a, b, q)
    ok = (x > 0) & (x < 1)              # (a quantile that rounds to 0 or 1)
    return a[ok], b[ok], q[ok], x[ok]


# -- the implicit derivatives ---------------------------------------------------------------
def test_gamma_derivative_against_finite_differences_of_the_cdf():
    # dx/da = -(dP/da) / p, dP/da by a central difference of gammainc (of -gammaincc above the median)
    a, q, x = _gamma_grid()
    up = q >= 0.5

    def cdf(b):
        return np.where(up, -sp.gammaincc(b, x), sp.gammainc(b, x))
    h = 1e-6 * a
    density = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    fd = -(cdf(a + h) - cdf(a - h)) / (2 * h) / density
    np.testing.assert_allclose(standard_gamma_grad(a, x), fd, rtol=1e-6)


@pytest.mark.parametrize("a", [1e-3, 0.5, 10.0, 1000.0])
def test_gamma_derivative_against_the_inverse_cdf(a):
    # x(a) = P^-1(a, u) at fixed u: its derivative is the implicit one
    x = np.maximum(np.random.default_rng(0).standard_gamma(a, 400), 1e-300)
    x = x[(x > 1e-100) & (sp.gammainc(a, x) > 1e-12) & (sp.gammaincc(a, x) > 1e-12)]
    u = sp.gammainc(a, x)
    h = 1e-5 * a
    fd = (sp.gammaincinv(a + h, u) - sp.gammaincinv(a - h, u)) / (2 * h)
    np.testing.assert_allclose(standard_gamma_grad(a, x), fd, rtol=2e-5)


def test_gamma_derivative_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    a, q, x = _gamma_grid(np.geomspace(1e-3, 1e4, 8), np.array([1e-10, 1e-3, 0.3, 0.5, 0.9, 0.999, 1 - 1e-10]))
    for ai, xi in zip(a, x):
        X = mpmath.mpf(xi)
        dP = mpmath.diff(lambda b: mpmath.gammainc(b, 0, X, regularized=True), ai)
        exact = -dP / (X ** (ai - 1) * mpmath.exp(-X) / mpmath.gamma(ai))
        np.testing.assert_allclose(standard_gamma_grad(ai, xi), float(exact), rtol=1e-12, err_msg=str((ai, xi)))


def test_gamma_derivative_against_torch():
    torch = pytest.importorskip("torch")
    a, q, x = _gamma_grid(np.geomspace(1e-3, 1e3, 25), np.array([1e-6, *QUANTILES, 1 - 1e-6]))
    theirs = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    ours = standard_gamma_grad(a, x)
    rel = np.abs(ours - theirs) / ours
    # PyTorch's closed forms: about 1e-5 typically, 1e-3 between the 0.001 and 0.999 quantiles,
    # 2e-2 in the far upper tail of a tiny concentration
    inner = (q >= 1e-3) & (q <= 0.999)
    assert np.median(rel) < 1e-5 and rel[inner].max() < 1e-3 and rel.max() < 3e-2


def test_gamma_derivative_for_huge_concentrations():
    # from 1e7 the Wilson-Hilferty derivative (error ~ a**-1.5); PyTorch's saddle-point
    # expansion is good to about 1e-9 there
    torch = pytest.importorskip("torch")
    a, q, x = _gamma_grid(np.array([9.9e6, 1e7, 1e8, 1e10, 1e12]), np.array([1e-6, 0.01, 0.3, 0.5, 0.7, 0.99]))
    theirs = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    np.testing.assert_allclose(standard_gamma_grad(a, x), theirs, rtol=1e-9)


def test_gamma_derivative_edges():
    np.testing.assert_array_equal(standard_gamma_grad([2.0, 0.5], [0.0, 0.0]), [0.0, 0.0])
    assert np.isnan(standard_gamma_grad(-1.0, 1.0))
    assert standard_gamma_grad(np.ones((2, 1)), np.ones(3)).shape == (2, 3)
    # at a = 1 (the exponential distribution): dx/da = log x + e**x E1(x) + euler_gamma
    x = np.array([1e-3, 0.1, 1.0, 1.9, 5.0, 30.0])     # (below 1e-3 the closed form cancels)
    np.testing.assert_allclose(standard_gamma_grad(1.0, x), np.log(x) + np.exp(x) * sp.exp1(x) + np.euler_gamma,
                               rtol=1e-13)


def _beta_implicit_fd(a, b, q, x):
    up = q >= 0.5

    def cdf(c):
        return np.where(up, -sp.betaincc(c, b, x), sp.betainc(c, b, x))
    h = 1e-6 * a
    density = np.exp((a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - sp.betaln(a, b))
    return -(cdf(a + h) - cdf(a - h)) / (2 * h) / density      # dx/da at fixed b


def test_dirichlet_grad_against_finite_differences_of_the_cdf():
    a, b, q, x = _beta_grid()
    np.testing.assert_allclose(dirichlet_grad(x, a, a + b) * (1 - x), _beta_implicit_fd(a, b, q, x), rtol=1e-6)


def test_dirichlet_grad_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    a, b, q, x = _beta_grid(np.array([0.01, 0.3, 3.0, 1000.0]), np.array([1e-8, 0.05, 0.5, 0.95, 1 - 1e-8]))
    for ai, bi, xi in zip(a, b, x):
        X = mpmath.mpf(xi)
        dI = mpmath.diff(lambda c: mpmath.betainc(c, bi, 0, X, regularized=True), ai)
        exact = -dI / (X ** (ai - 1) * (1 - X) ** (bi - 1) / mpmath.beta(ai, bi)) / (1 - X)
        np.testing.assert_allclose(dirichlet_grad(xi, ai, ai + bi), float(exact), rtol=1e-11, err_msg=str((ai, bi, xi)))


def test_digamma_differences_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    from tapegrad.distributions._implicit import _digamma_diff
    mpmath.mp.dps = 40
    for u in [0.01, 0.5, 3.0, 9.9, 10.0, 30.0, 1000.0, 1e6]:
        for v in [-0.9 * u, -1e-5 * u, 1e-8, 1e-4 * u, 0.01 * u, 3.0, 0.5 * u, 10 * u, 1000.0]:
            exact = mpmath.digamma(mpmath.mpf(u) + mpmath.mpf(v)) - mpmath.digamma(mpmath.mpf(u))
            np.testing.assert_allclose(_digamma_diff(np.array([u]), np.array([v]))[0], float(exact), rtol=1e-13,
                                       err_msg=str((u, v)))


def test_dirichlet_grad_against_torch():
    torch = pytest.importorskip("torch")
    a, b, q, x = _beta_grid(np.geomspace(1e-2, 1e3, 9), np.array([1e-6, *QUANTILES, 1 - 1e-6]))
    theirs = torch._dirichlet_grad(torch.tensor(x), torch.tensor(a), torch.tensor(a + b)).numpy()
    ours = dirichlet_grad(x, a, a + b)
    rel = np.abs(ours - theirs) / np.abs(ours)
    inner = (q >= 1e-3) & (q <= 0.999)
    assert np.median(rel) < 1e-8 and rel[inner].max() < 5e-3 and rel.max() < 0.1


def _beta_draws(a, b, n, seed=0):
    rng = np.random.default_rng(seed)
    ga, gb = rng.standard_gamma(a, n), rng.standard_gamma(b, n)
    return ga / (ga + gb)


def test_dirichlet_grad_for_huge_concentrations():
    # both concentrations from 1e5: by differences of SciPy's incomplete beta function (the
    # series would take sqrt(concentration) terms and were cut short past about 1e8: 8% low at
    # 1e9, 400x at 1e12).  At x = 0.5 of Beta(n, n) (its median), dx/da / (1 - x) is
    # 1 / (2n) up to O(1/n)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (1e6, 1e9, 1e12, 1e15):
            np.testing.assert_allclose(dirichlet_grad(0.5, n, 2 * n) * 2 * n, 1.0, rtol=1e-5)
        # the two methods agree where both apply (the series beside the switch)
        from tapegrad.distributions import _implicit
        a, b = 3e5, 1e5
        x = _beta_draws(a, b, 12)
        by_differences = dirichlet_grad(x, a, a + b)
        old = _implicit._LARGE
        _implicit._LARGE = np.inf
        try:
            series = dirichlet_grad(x, a, a + b)
        finally:
            _implicit._LARGE = old
        np.testing.assert_allclose(by_differences, series, rtol=1e-9)
        # one concentration huge, the other small: 1 - x ~ Gamma(b) / a, so dx/da / (1 - x) ~ 1 / a;
        # and the mirror case (x ~ Gamma(a) / b): finite and positive
        for a, b in ((1e12, 2.0), (1e7, 0.5), (1e15, 30.0)):
            got = dirichlet_grad(_beta_draws(a, b, 20), a, a + b)
            np.testing.assert_allclose(got * a, 1.0, rtol=1e-4)
        for a, b in ((2.0, 1e12), (0.5, 1e7), (1e3, 1e12)):
            x = _beta_draws(a, b, 20)
            got = dirichlet_grad(x, a, a + b)
            assert np.isfinite(got).all() and (got > 0).all()
    torch = pytest.importorskip("torch")
    for a, b in ((1e9, 1e9), (1e12, 1e12), (1e9, 1e12)):
        x = _beta_draws(a, b, 20)
        theirs = torch._dirichlet_grad(torch.tensor(x), torch.full((20,), a, dtype=torch.float64),
                                       torch.full((20,), a + b, dtype=torch.float64)).numpy()
        ours = dirichlet_grad(x, a, a + b)
        # (PyTorch's closed forms: about 1e-3 typically, and far off near the mean at these sizes)
        assert np.median(np.abs(ours / theirs - 1)) < 1e-2, (a, b)


def test_dirichlet_grad_at_the_ends():
    # x = 0: 0; x = 1 (1 - x underflowed): the limit (digamma(total) - digamma(a)) / b, as PyTorch's
    np.testing.assert_array_equal(dirichlet_grad(0.0, 2.0, 5.0), 0.0)
    np.testing.assert_allclose(dirichlet_grad(1.0, 2.0, 5.0), (sp.digamma(5.0) - sp.digamma(2.0)) / 3.0, rtol=1e-14)
    assert np.isnan(dirichlet_grad(0.5, 3.0, 2.0))          # (beta = total - alpha <= 0)


# -- the reverse rules at a fixed draw ------------------------------------------------------
def test_the_gradient_of_a_gamma_draw_is_the_implicit_derivative():
    tg.manual_seed(3)
    a = tg.tensor([0.7, 4.0], requires_grad=True)
    r = tg.tensor([2.0, 0.5], requires_grad=True)
    x = D.Gamma(a, r).rsample()
    x.sum().backward()
    s = (x * r).detach().numpy()          # the standard draw
    np.testing.assert_allclose(a.grad.numpy(), standard_gamma_grad(a.detach().numpy(), s) / r.detach().numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(r.grad.numpy(), -x.detach().numpy() / r.detach().numpy(), rtol=1e-12)


def test_a_seeded_generator_fixes_the_draw_and_its_gradient():
    a = tg.tensor([[0.3, 2.0, 50.0]], requires_grad=True)
    w = tg.tensor([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])
    xs, grads = [], []
    for _ in range(2):
        a.grad = None
        x = standard_gamma(a, (2, 3), generator=tg.Generator().manual_seed(7))
        (x * w).sum().backward()
        xs.append(x.detach().numpy())
        grads.append(a.grad.numpy())
    np.testing.assert_array_equal(xs[0], xs[1])
    np.testing.assert_array_equal(grads[0], grads[1])
    expect = (standard_gamma_grad(a.detach().numpy(), xs[0]) * w.numpy()).sum(0, keepdims=True)
    np.testing.assert_allclose(grads[0], expect, rtol=1e-13)
    with pytest.raises(TypeError, match="argument 'generator' must be torch.Generator"):
        standard_gamma(a, (3,), generator=0)


def test_the_dirichlet_reverse_is_pytorchs():
    torch = pytest.importorskip("torch")
    from torch.distributions.dirichlet import _Dirichlet_backward
    c = tg.tensor([[1.0, 2.0, 3.0], [0.5, 0.05, 40.0]], requires_grad=True)
    w = tg.tensor([[1.0, -2.0, 0.5], [0.3, 0.0, 1.0]])
    x = sample_dirichlet(c, (4, 2, 3), generator=tg.Generator().manual_seed(1))
    assert x.grad_fn.name() == "_DirichletBackward"
    (x * w).sum().backward()
    xv, cv, wv = x.detach().numpy(), c.detach().numpy(), np.broadcast_to(w.numpy(), x.shape)
    total = np.broadcast_to(cv.sum(-1, keepdims=True), cv.shape)
    ours = (dirichlet_grad(xv, cv, total) * (wv - (xv * wv).sum(-1, keepdims=True))).sum(0)
    np.testing.assert_allclose(c.grad.numpy(), ours, rtol=1e-13)
    theirs = _Dirichlet_backward(torch.tensor(xv), torch.tensor(cv).expand(xv.shape), torch.tensor(wv)).sum(0)
    np.testing.assert_allclose(c.grad.numpy(), theirs.numpy(), rtol=1e-3, atol=1e-12)
    np.testing.assert_allclose(xv.sum(-1), 1.0, rtol=1e-15)


def test_beta_backward_reaches_both_concentrations():
    tg.manual_seed(5)
    a = tg.tensor(2.0, requires_grad=True)
    b = tg.tensor(3.5, requires_grad=True)
    y = D.Beta(a, b).rsample()
    y.sum().backward()
    yv = y.item()
    # the implicit derivatives of the Beta draw at fixed b and at fixed a (the reflected CDF)
    q = np.array([sp.betainc(2.0, 3.5, yv)])
    dya = _beta_implicit_fd(np.array([2.0]), np.array([3.5]), q, np.array([yv]))
    dyb = -_beta_implicit_fd(np.array([3.5]), np.array([2.0]), 1 - q, np.array([1 - yv]))
    np.testing.assert_allclose([a.grad.item(), b.grad.item()], [dya[0], dyb[0]], rtol=1e-6)
    assert a.grad.item() > 0 > b.grad.item()


@pytest.mark.parametrize("mode", ["always", "never"])
def test_compiled_and_interpreted_backward_agree(mode, monkeypatch):
    monkeypatch.setattr(engine, "INTERPRET", [mode])
    a = tg.tensor([0.5, 3.0], requires_grad=True)
    c = tg.tensor([1.0, 2.0, 0.5], requires_grad=True)
    tg.manual_seed(11)
    x = D.Gamma(a, 2.0).rsample((5,))
    y = D.Dirichlet(c).rsample((5,))
    ((x * x).sum() + (y * tg.tensor([1.0, -1.0, 2.0])).sum()).backward()
    xs = 2.0 * x.detach().numpy()
    np.testing.assert_allclose(a.grad.numpy(), (2 * x.detach().numpy() * standard_gamma_grad(
        a.detach().numpy(), xs) / 2.0).sum(0), rtol=1e-12)
    yv, w = y.detach().numpy(), np.array([1.0, -1.0, 2.0])
    cv = np.broadcast_to(c.detach().numpy(), yv.shape)
    expect = (dirichlet_grad(yv, cv, cv.sum(-1, keepdims=True)) * (w - (yv * w).sum(-1, keepdims=True))).sum(0)
    np.testing.assert_allclose(c.grad.numpy(), expect, rtol=1e-12)


# -- Monte Carlo ----------------------------------------------------------------------------
def test_monte_carlo_gradients_of_known_expectations():
    tg.manual_seed(0)
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


def test_monte_carlo_gradient_of_the_gamma_mean_over_concentrations():
    # d/da E[x] = 1 for Gamma(a, 1), from tiny to large concentrations; the standard error of the
    # estimate is std(dx/da) / sqrt(n)
    tg.manual_seed(2)
    alphas = [0.01, 0.3, 1.0, 30.0, 1000.0]
    a = tg.tensor(alphas, requires_grad=True)
    n = 20000
    x = D.Gamma(a, 1.0).rsample((n,))
    x.mean(0).sum().backward()
    d = standard_gamma_grad(np.array(alphas), x.detach().numpy())
    se = d.std(0) / np.sqrt(n)
    assert np.all(np.abs(a.grad.numpy() - 1.0) < 5 * se), (a.grad.numpy(), se)


def test_draws_have_the_right_distribution():
    tg.manual_seed(1)
    n = 50000

    def close(v, mean, var):
        assert abs(v.mean() - mean) < 5 * np.sqrt(var / n), (v.mean(), mean)
        assert abs(v.var() - var) < 0.05 * var, (v.var(), var)
    close(D.Gamma(tg.tensor(3.0), tg.tensor(2.0)).rsample((n,)).detach().numpy(), 1.5, 0.75)
    close(D.Gamma(tg.tensor(0.2), tg.tensor(1.0)).rsample((n,)).detach().numpy(), 0.2, 0.2)
    close(D.Chi2(tg.tensor(5.0)).rsample((n,)).detach().numpy(), 5.0, 10.0)
    y = D.Beta(tg.tensor(2.0), tg.tensor(5.0)).rsample((n,)).detach().numpy()
    close(y, 2 / 7, 10 / (49 * 8))
    assert 0 < y.min() and y.max() < 1
    close(D.StudentT(tg.tensor(7.0), 1.0, 2.0).rsample((n,)).detach().numpy(), 1.0, 4 * 7 / 5)
    c = np.array([1.0, 1.0, 2.0])
    z = D.Dirichlet(tg.tensor(c)).rsample((n,)).detach().numpy()
    np.testing.assert_allclose(z.sum(-1), 1.0, atol=1e-12)
    m = c / c.sum()
    for i in range(3):
        close(z[:, i], m[i], m[i] * (1 - m[i]) / (c.sum() + 1))


def test_sample_and_rsample_draw_the_same_numbers():
    for make in (lambda: D.Gamma(tg.tensor([0.5, 3.0]), tg.tensor([1.0, 2.0])),
                 lambda: D.Dirichlet(tg.tensor([0.5, 3.0, 1.0]))):
        tg.manual_seed(4)
        s = make().sample((3,)).numpy()
        tg.manual_seed(4)
        r = make().rsample((3,)).detach().numpy()
        np.testing.assert_allclose(s, r, rtol=1e-15)


# -- shapes, dtypes, flags ------------------------------------------------------------------
MAKERS = {
    "Gamma": lambda L, dt: L.distributions.Gamma(L.ones(2, 3, dtype=dt) * 2, L.ones(3, dtype=dt)),
    "Chi2": lambda L, dt: L.distributions.Chi2(L.ones(4, dtype=dt) * 3),
    "Beta": lambda L, dt: L.distributions.Beta(L.ones(2, dtype=dt) * 2, L.ones(2, dtype=dt) * 3),
    "Dirichlet": lambda L, dt: L.distributions.Dirichlet(L.ones(2, 4, dtype=dt)),
    "StudentT": lambda L, dt: L.distributions.StudentT(L.ones(3, dtype=dt) * 5, 0.0, 2.0),
    "Independent": lambda L, dt: L.distributions.Independent(L.distributions.Gamma(L.ones(2, 3, dtype=dt), 1.0), 1),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_shapes_and_flags_as_pytorch(name):
    torch = pytest.importorskip("torch")
    ours, theirs = MAKERS[name](tg, tg.float64), MAKERS[name](torch, torch.float64)
    assert ours.has_rsample and theirs.has_rsample
    for shape in ((), (5,), (2, 3)):
        assert tuple(ours.rsample(shape).shape) == tuple(theirs.rsample(shape).shape)
    assert tuple(ours.expand((7,) + tuple(ours.batch_shape)).rsample().shape) == \
        tuple(theirs.expand((7,) + tuple(theirs.batch_shape)).rsample().shape)


GRAD_MAKERS = {
    "Gamma": lambda p: D.Gamma(p, 2.0),
    "Chi2": lambda p: D.Chi2(p),
    "Beta": lambda p: D.Beta(p, p.flip(0)),
    "Dirichlet": lambda p: D.Dirichlet(p),
    "StudentT": lambda p: D.StudentT(p, 0.0, 2.0),
    "Independent": lambda p: D.Independent(D.Gamma(p, 1.0), 1),
}


@pytest.mark.parametrize("name", sorted(GRAD_MAKERS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_is_kept_and_gradients_reach_the_parameters(name, dtype):
    dt = getattr(tg, dtype)
    assert MAKERS[name](tg, dt).rsample((3,)).dtype == dt
    p = tg.tensor([1.5, 2.5], dtype=dt, requires_grad=True)
    x = GRAD_MAKERS[name](p).rsample((3,))
    assert x.dtype == dt and x.requires_grad
    (x * tg.tensor([1.0, -0.5], dtype=dt)).sum().backward()
    assert p.grad.dtype == dt and np.all(np.isfinite(p.grad.numpy())) and np.all(p.grad.numpy() != 0)


def test_the_default_dtype_is_float64():
    a = tg.tensor(2.0, requires_grad=True)
    for d in (D.Gamma(a, 1.0), D.Chi2(a), D.Beta(a, 2.0), D.StudentT(a), D.Dirichlet(a.expand(3))):
        x = d.rsample((2,))
        assert x.dtype == tg.float64 and x.requires_grad


def test_second_derivative_is_refused_as_in_pytorch():
    a = tg.tensor([2.0], requires_grad=True)
    x = D.Gamma(a, tg.tensor([1.0])).rsample()
    g, = tg.autograd.grad(x.sum(), a, create_graph=True)        # the first derivative: allowed
    np.testing.assert_allclose(g.detach().numpy(), standard_gamma_grad(2.0, x.detach().numpy()), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="the derivative for '_standard_gamma_grad' is not implemented"):
        g.sum().backward()
    # the Dirichlet draw's reverse is once-differentiable: under create_graph its result is a
    # constant (PyTorch's too: "element 0 of tensors does not require grad")
    c = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    g, = tg.autograd.grad(D.Dirichlet(c).rsample()[0], c, create_graph=True)
    assert not g.requires_grad
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        g.sum().backward()


# -- replay ---------------------------------------------------------------------------------
REPLAY = {
    "Gamma": lambda a: D.Gamma(a, 2.0, validate_args=False),
    "Chi2": lambda a: D.Chi2(a, validate_args=False),
    "Beta": lambda a: D.Beta(a, 1.5, validate_args=False),
    "Dirichlet": lambda a: D.Dirichlet(a.expand(3), validate_args=False),
    "StudentT": lambda a: D.StudentT(a, validate_args=False),
}


@pytest.mark.parametrize("name", sorted(REPLAY))
def test_recording_a_draw_is_refused(name):
    with pytest.raises(tg.NotReplayable, match=r"it draws random numbers \(a replay would reuse them\)"):
        tg.record(lambda a: REPLAY[name](a).rsample((3,)).sum(), tg.tensor(2.0, requires_grad=True))


def test_a_compiled_function_that_draws_runs_eagerly():
    def f(a):
        return D.Gamma(a, tg.tensor(1.0), validate_args=False).rsample((3,)).sum()
    c = tg.compile(f)
    a = tg.tensor(2.0, requires_grad=True)
    values = []
    for _ in range(3):
        a.grad = None
        y = c(a)
        y.backward()
        values.append(y.item())
        assert a.grad.item() > 0
    assert len(set(values)) == 3                   # a new draw each call: never a replayed one
    assert c.stats.replays == 0 and c.stats.eager >= 2
    assert "random numbers" in next(iter(c.why.values()))
