"""tg.distributions: densities, moments, entropies, cdf/icdf against SciPy (always) and
torch.distributions (when torch is installed), gradients of log_prob and of rsample
(gradcheck, gradgradcheck, PyTorch's), sample statistics under tg.manual_seed, shapes
and expand, kl_divergence for every registered pair, and PyTorch's validation messages."""
import math
import re

import numpy as np
import pytest
import scipy.integrate as integrate
import scipy.special as sp
import scipy.stats as st

import tapegrad as tg
from tapegrad import distributions as D
from tapegrad.distributions import constraints


@pytest.fixture(autouse=True)
def _torch_validates():
    """PyTorch's distributions validate by default, but ``torch.compile`` (run by another
    test file in the same process) turns that default off: the comparisons set it."""
    import sys
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    old = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(old)

R = np.array


# name: (parameters, value (broadcast against the batch shape), SciPy's frozen distribution
# of the parameters (None: no SciPy counterpart), the methods SciPy checks)
CASES = {
    "Normal": (dict(loc=R([0.3, -1.2, 2.0]), scale=R([1.5, 0.4, 2.0])), R([0.1, -1.0, 3.5]),
               lambda p: st.norm(p["loc"], p["scale"]), "log_prob cdf icdf entropy mean variance stddev"),
    "LogNormal": (dict(loc=R([0.3, -0.2, 1.0]), scale=R([0.5, 0.4, 1.1])), R([0.7, 1.0, 3.5]),
                  lambda p: st.lognorm(p["scale"], scale=np.exp(p["loc"])),
                  "log_prob cdf icdf entropy mean variance stddev"),
    "HalfNormal": (dict(scale=R([0.5, 1.4, 2.0])), R([0.7, 0.1, 3.5]), lambda p: st.halfnorm(scale=p["scale"]),
                   "log_prob cdf icdf entropy mean variance stddev"),
    "Uniform": (dict(low=R([0.3, -1.2, 2.0]), high=R([1.5, 0.4, 2.5])), R([0.5, 0.0, 2.2]),
                lambda p: st.uniform(p["low"], p["high"] - p["low"]),
                "log_prob cdf icdf entropy mean variance stddev"),
    "Exponential": (dict(rate=R([0.5, 1.4, 3.0])), R([0.7, 0.1, 3.5]), lambda p: st.expon(scale=1 / p["rate"]),
                    "log_prob cdf icdf entropy mean variance stddev"),
    "Laplace": (dict(loc=R([0.3, -1.2, 2.0]), scale=R([1.5, 0.4, 2.0])), R([0.1, -1.0, 3.5]),
                lambda p: st.laplace(p["loc"], p["scale"]), "log_prob cdf icdf entropy mean variance stddev"),
    "Cauchy": (dict(loc=R([0.3, -1.2, 2.0]), scale=R([1.5, 0.4, 2.0])), R([0.1, -1.0, 3.5]),
               lambda p: st.cauchy(p["loc"], p["scale"]), "log_prob cdf icdf entropy"),
    "StudentT": (dict(df=R([1.5, 4.0, 7.5]), loc=R([0.3, -1.2, 2.0]), scale=R([1.5, 0.4, 2.0])),
                 R([0.1, -1.0, 3.5]), lambda p: st.t(p["df"], p["loc"], p["scale"]), "log_prob entropy"),
    "Gamma": (dict(concentration=R([0.7, 2.0, 5.5]), rate=R([1.5, 0.4, 2.0])), R([0.3, 4.0, 2.5]),
              lambda p: st.gamma(p["concentration"], scale=1 / p["rate"]),
              "log_prob entropy mean variance stddev"),
    "Beta": (dict(concentration1=R([0.7, 2.0, 5.5]), concentration0=R([1.5, 0.4, 2.0])), R([0.3, 0.9, 0.55]),
             lambda p: st.beta(p["concentration1"], p["concentration0"]), "log_prob entropy mean variance stddev"),
    "Dirichlet": (dict(concentration=R([[0.7, 2.0, 5.5], [1.5, 0.4, 2.0]])), R([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]),
                  None, ""),
    "Bernoulli": (dict(probs=R([0.2, 0.55, 0.9])), R([1.0, 0.0, 1.0]), lambda p: st.bernoulli(p["probs"]),
                  "log_prob entropy mean variance stddev"),
    "Binomial": (dict(total_count=R([6.0, 6.0, 6.0]), probs=R([0.2, 0.55, 0.9])), R([2.0, 0.0, 6.0]),
                 lambda p: st.binom(p["total_count"].astype(int), p["probs"]),
                 "log_prob entropy mean variance stddev"),
    "Poisson": (dict(rate=R([0.5, 1.4, 7.0])), R([0.0, 2.0, 9.0]), lambda p: st.poisson(p["rate"]),
                "log_prob mean variance stddev"),
    "Categorical": (dict(probs=R([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])), R([2.0, 0.0]), None, ""),
    # (the other parameterisation: "Class:logits")
    "Bernoulli:logits": (dict(logits=R([-1.4, 0.2, 2.2])), R([1.0, 0.0, 1.0]),
                         lambda p: st.bernoulli(sp.expit(p["logits"])), "log_prob entropy mean variance stddev"),
    "Binomial:logits": (dict(total_count=R([6.0, 6.0, 6.0]), logits=R([-1.4, 0.2, 2.2])), R([2.0, 0.0, 6.0]),
                        lambda p: st.binom(6, sp.expit(p["logits"])), "log_prob entropy mean variance stddev"),
    "Categorical:logits": (dict(logits=R([[0.2, -1.3, 2.5], [0.6, 0.0, 1.3]])), R([2.0, 0.0]), None, ""),
}
NOGRAD = {"total_count"}


def _cls(name):
    return name.split(":")[0]


def _tg(name, params, requires_grad=True, **kw):
    ts = {k: tg.tensor(v, requires_grad=requires_grad and k not in NOGRAD) for k, v in params.items()}
    return getattr(D, _cls(name))(**ts, **kw), ts


def _torch(torch, name, params, requires_grad=True):
    ts = {k: torch.tensor(v, dtype=torch.float64, requires_grad=requires_grad and k not in NOGRAD)
          for k, v in params.items()}
    return getattr(torch.distributions, _cls(name))(**ts), ts


def _method(d, m, value, tensor=tg.tensor):
    if m in ("log_prob", "cdf"):
        return getattr(d, m)(tensor(value))
    if m == "icdf":
        return d.icdf(tensor(R([0.1, 0.45, 0.93])))
    if m == "entropy":
        return d.entropy()
    return getattr(d, m)


def _scipy(ref, m, value):
    return {"log_prob": lambda: ref.logpmf(value) if hasattr(ref, "logpmf") else ref.logpdf(value),
            "cdf": lambda: ref.cdf(value), "icdf": lambda: ref.ppf(R([0.1, 0.45, 0.93])),
            "entropy": ref.entropy, "mean": ref.mean, "variance": ref.var, "stddev": ref.std}[m]()


SCIPY = [(n, m) for n, c in sorted(CASES.items()) for m in c[3].split()]


@pytest.mark.parametrize("name,method", SCIPY)
def test_values_against_scipy(name, method):
    params, value, ref, _ = CASES[name]
    d, _ = _tg(name, params)
    got = _method(d, method, value)
    want = _scipy(ref(params), method, value)
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-10, atol=1e-13)


def test_dirichlet_and_categorical_against_scipy():
    c, v = CASES["Dirichlet"][0]["concentration"], CASES["Dirichlet"][1]
    d, _ = _tg("Dirichlet", {"concentration": c})
    np.testing.assert_allclose(d.log_prob(tg.tensor(v)).detach().numpy(),
                               [st.dirichlet(c[i]).logpdf(v[i]) for i in range(2)], rtol=1e-12)
    np.testing.assert_allclose(d.entropy().detach().numpy(), [st.dirichlet(c[i]).entropy() for i in range(2)],
                               rtol=1e-12)
    np.testing.assert_allclose(d.mean.detach().numpy(), [st.dirichlet(c[i]).mean() for i in range(2)], rtol=1e-14)
    np.testing.assert_allclose(d.variance.detach().numpy(), [st.dirichlet(c[i]).var() for i in range(2)],
                               rtol=1e-14)
    p = CASES["Categorical"][0]["probs"]
    cat = D.Categorical(probs=tg.tensor(p * 3.0))          # normalised
    np.testing.assert_allclose(cat.probs.numpy(), p, rtol=1e-15)
    np.testing.assert_allclose(cat.log_prob(tg.tensor([2.0, 0.0])).numpy(), np.log([0.5, 0.6]), rtol=1e-15)
    np.testing.assert_allclose(cat.entropy().numpy(), [st.entropy(p[0]), st.entropy(p[1])], rtol=1e-14)
    assert cat.mode.tolist() == [2, 0]
    cl = D.Categorical(logits=tg.tensor(np.log(p) + 4.0))
    np.testing.assert_allclose(cl.probs.numpy(), p, rtol=1e-14)
    np.testing.assert_allclose(cl.logits.numpy(), np.log(p), rtol=1e-14)


def test_literal_moments():
    assert D.Normal(1.5, 2.0).mode.item() == 1.5
    assert math.isnan(D.Cauchy(0.0, 1.0).mean.item()) and D.Cauchy(0.0, 1.0).variance.item() == math.inf
    assert D.Gamma(3.0, 2.0).mode.item() == 1.0 and D.Gamma(0.5, 2.0).mode.item() == 0.0
    assert D.Beta(3.0, 2.0).mode.item() == pytest.approx(2 / 3, rel=1e-15)
    assert D.LogNormal(0.0, 1.0).mode.item() == pytest.approx(math.exp(-1), rel=1e-15)
    t = D.StudentT(tg.tensor([0.5, 1.5, 4.0]), 1.0, 2.0)
    m, v = t.mean.tolist(), t.variance.tolist()
    assert math.isnan(m[0]) and m[1:] == [1.0, 1.0]
    assert math.isnan(v[0]) and v[1] == math.inf and v[2] == pytest.approx(4.0 * 4 / 2, rel=1e-15)
    b = D.Bernoulli(tg.tensor([0.2, 0.5, 0.7]))
    md = b.mode.tolist()
    assert md[0] == 0.0 and math.isnan(md[1]) and md[2] == 1.0
    assert D.Binomial(10, tg.tensor([0.33])).mode.tolist() == [3.0]
    assert D.Poisson(tg.tensor([2.7])).mode.tolist() == [2.0]
    np.testing.assert_allclose(D.Dirichlet(tg.tensor([[2.0, 3.0, 1.0], [0.5, 0.2, 0.9]])).mode.numpy(),
                               [[1 / 3, 2 / 3, 0.0], [1.0, 0.0, 0.0]], rtol=1e-15)   # (PyTorch's choice)
    assert math.isnan(D.Uniform(0.0, 1.0).mode.item())
    assert D.Normal(0.0, 2.0).perplexity().item() == pytest.approx(math.exp(st.norm(0, 2).entropy()), rel=1e-14)


def test_gamma_cdf():
    p = CASES["Gamma"][0]
    d, _ = _tg("Gamma", p, requires_grad=False)
    v = CASES["Gamma"][1]
    np.testing.assert_allclose(d.cdf(tg.tensor(v)).numpy(), st.gamma(p["concentration"], scale=1 / p["rate"]).cdf(v),
                               rtol=1e-13)
    dg, _ = _tg("Gamma", p)
    with pytest.raises(NotImplementedError, match="derivative of gammainc"):
        dg.cdf(tg.tensor(v))
    with tg.no_grad():
        np.testing.assert_allclose(dg.cdf(tg.tensor(v)).numpy(), d.cdf(tg.tensor(v)).numpy(), rtol=0)


# -- gradients --

GRAD_METHODS = {n: [m for m in ("log_prob", "cdf", "icdf", "entropy", "mean", "variance") if m in c[3]]
                for n, c in CASES.items()}
GRAD_METHODS["Dirichlet"] = ["log_prob", "entropy", "mean", "variance"]
GRAD_METHODS["Categorical"] = GRAD_METHODS["Categorical:logits"] = ["log_prob", "entropy"]
GRADS = [(n, m) for n in sorted(CASES) for m in GRAD_METHODS[n]]


def _param_fn(name, method):
    params, value, _, _ = CASES[name]
    keys = [k for k in params if k not in NOGRAD]
    fixed = {k: tg.tensor(v) for k, v in params.items() if k in NOGRAD}

    def f(*xs):
        d = getattr(D, _cls(name))(**dict(zip(keys, xs)), **fixed)
        return _method(d, method, value)
    return f, [tg.tensor(params[k], requires_grad=True) for k in keys]


@pytest.mark.parametrize("name,method", GRADS)
def test_gradcheck(name, method):
    f, xs = _param_fn(name, method)
    assert tg.autograd.gradcheck(f, xs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradgradcheck_log_prob(name):
    f, xs = _param_fn(name, "log_prob")
    assert tg.autograd.gradgradcheck(f, xs)


@pytest.mark.parametrize("name,method", GRADS)
def test_against_torch(name, method):
    torch = pytest.importorskip("torch")
    params, value, _, _ = CASES[name]
    d, ts = _tg(name, params)
    td, tts = _torch(torch, name, params)
    got = _method(d, method, value)
    want = _method(td, method, value, lambda v: torch.tensor(v, dtype=torch.float64))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-13)
    got.sum().backward()
    want.sum().backward()
    for k in ts:
        if k in NOGRAD:
            continue
        if tts[k].grad is None:
            assert ts[k].grad is None or not ts[k].grad.numpy().any()
        else:
            # (PyTorch's trigamma, digamma's derivative, is off by up to 5e-10: tests/test_special.py)
            np.testing.assert_allclose(ts[k].grad.numpy(), tts[k].grad.numpy(), rtol=2e-8, atol=1e-12,
                                       err_msg=k)


@pytest.mark.parametrize("name", sorted(CASES))
def test_mode_and_moments_against_torch(name):
    torch = pytest.importorskip("torch")
    params = CASES[name][0]
    d, _ = _tg(name, params)
    td, _ = _torch(torch, name, params)
    for m in ("mean", "variance", "stddev", "mode"):
        got, want = getattr(d, m), getattr(td, m)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, err_msg=m)


def test_probs_logits_lazy_and_against_torch():
    torch = pytest.importorskip("torch")
    for name, kw in [("Bernoulli", {}), ("Binomial", {"total_count": 5}), ("Categorical", {})]:
        for given, v in [("probs", R([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])),
                         ("logits", R([[0.2, -1.3, 2.5], [0.6, 0.0, 1.3]]))]:
            if name != "Categorical":
                v = v[0] if given == "probs" else v
            x, tx = tg.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
            d = getattr(D, name)(**{given: x}, **kw)
            td = getattr(torch.distributions, name)(**{given: tx}, **kw)
            other = "logits" if given == "probs" else "probs"
            assert given in d.__dict__ and other not in d.__dict__
            np.testing.assert_allclose(getattr(d, other).detach().numpy(), getattr(td, other).detach().numpy(),
                                       rtol=1e-13)
            assert other in d.__dict__
            assert d.param_shape == tuple(td.param_shape)
            s = getattr(d, other).sum()
            s.backward()
            getattr(td, other).sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_replay_of_log_prob_with_new_inputs():
    # (validation reads values in Python, which a replay cannot repeat: validate_args=False)
    def f(loc, scale, x):
        kw = dict(validate_args=False)
        return (D.Normal(loc, scale, **kw).log_prob(x) + D.Gamma(scale, 2.0, **kw).log_prob(x.abs() + 0.1)
                + D.Beta(scale, 1.5, **kw).log_prob(x.sigmoid())
                + D.kl_divergence(D.Normal(loc, scale, **kw), D.Laplace(x, 1.0, **kw))).sum()
    step = tg.compile(f)
    rng = np.random.default_rng(3)
    for _ in range(4):
        lv, sv, xv = rng.normal(size=4), rng.uniform(0.5, 2, size=4), rng.normal(size=4)
        a = [tg.tensor(lv, requires_grad=True), tg.tensor(sv, requires_grad=True), tg.tensor(xv)]
        b = [tg.tensor(lv, requires_grad=True), tg.tensor(sv, requires_grad=True), tg.tensor(xv)]
        out = step(*a)
        out.backward()
        want = f(*b)
        want.backward()
        assert out.item() == pytest.approx(want.item(), rel=1e-13)
        np.testing.assert_allclose(a[1].grad.numpy(), b[1].grad.numpy(), rtol=1e-12)
    assert step.stats.replays >= 2


def test_validation_runs_eagerly_under_compile():
    def f(loc, x):
        return D.Normal(loc, 1.0).log_prob(x).sum()
    step = tg.compile(f)
    for v in (0.5, 1.5, 2.5):
        out = step(tg.tensor([v], requires_grad=True), tg.tensor([1.0]))
        assert out.item() == pytest.approx(st.norm(v, 1.0).logpdf(1.0), rel=1e-14)
    assert step.stats.replays == 0 and step.stats.eager >= 1


def test_rsample_refused_while_recording():
    def f(loc):
        return D.Normal(loc, 1.0, validate_args=False).rsample((3,)).sum()
    with pytest.raises(tg.NotReplayable, match="random numbers"):
        tg.record(f, tg.tensor(0.5, requires_grad=True))


# -- rsample --

RSAMPLE = {
    "Normal": dict(loc=R([0.3, -1.2]), scale=R([1.5, 0.4])),
    "LogNormal": dict(loc=R([0.3, -0.2]), scale=R([0.5, 0.4])),
    "HalfNormal": dict(scale=R([0.5, 1.4])),
    "Uniform": dict(low=R([0.3, -1.2]), high=R([1.5, 0.4])),
    "Exponential": dict(rate=R([0.5, 1.4])),
    "Laplace": dict(loc=R([0.3, -1.2]), scale=R([1.5, 0.4])),
    "Cauchy": dict(loc=R([0.3, -1.2]), scale=R([1.5, 0.4])),
}


@pytest.mark.parametrize("name", sorted(RSAMPLE))
def test_rsample_gradcheck(name):
    keys = list(RSAMPLE[name])

    def f(*xs):
        tg.manual_seed(11)
        return getattr(D, name)(**dict(zip(keys, xs))).rsample((5,))
    xs = [tg.tensor(v, requires_grad=True) for v in RSAMPLE[name].values()]
    assert getattr(D, name).has_rsample
    assert tg.autograd.gradcheck(f, xs)
    assert tg.autograd.gradgradcheck(f, xs)


def test_rsample_gradients_literal():
    tg.manual_seed(0)
    loc, scale = tg.tensor(0.5, requires_grad=True), tg.tensor(2.0, requires_grad=True)
    x = D.Normal(loc, scale).rsample((1000,))
    x.mean().backward()
    assert loc.grad.item() == pytest.approx(1.0, rel=1e-14)
    eps = (x.detach().numpy() - 0.5) / 2.0
    assert scale.grad.item() == pytest.approx(eps.mean(), rel=1e-12)
    rate = tg.tensor(2.0, requires_grad=True)
    y = D.Exponential(rate).rsample((100,))
    y.sum().backward()
    assert rate.grad.item() == pytest.approx(-(y.detach().numpy() / 2.0).sum(), rel=1e-12)
    low, high = tg.tensor(1.0, requires_grad=True), tg.tensor(3.0, requires_grad=True)
    u = D.Uniform(low, high).rsample((50,))
    u.sum().backward()
    assert low.grad.item() + high.grad.item() == pytest.approx(50.0, rel=1e-12)
    assert D.Normal(loc, scale).sample((3,)).requires_grad is False


def test_samples_reproducible_under_manual_seed():
    for name, p in sorted(RSAMPLE.items()) + [("Gamma", dict(concentration=R([0.7]), rate=R([2.0])))]:
        d, _ = _tg(name, p, requires_grad=False)
        tg.manual_seed(5)
        a = d.sample((3,)).numpy()
        tg.manual_seed(5)
        b = d.sample((3,)).numpy()
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["Bernoulli", "Binomial", "Poisson", "Categorical"])
def test_no_rsample(name):       # (Gamma, Beta, Dirichlet, StudentT: tests/test_gamma_rsample.py)
    d, _ = _tg(name, CASES[name][0])
    assert not d.has_rsample
    with pytest.raises(NotImplementedError):
        d.rsample()


# -- sample statistics: a fixed seed, 4000 draws, the mean within 5 standard errors and
# the distribution by a Kolmogorov-Smirnov test (continuous) or the frequencies (discrete)

STATS = {
    "Normal": (dict(loc=1.3, scale=0.7), lambda p: st.norm(1.3, 0.7)),
    "LogNormal": (dict(loc=0.3, scale=0.5), lambda p: st.lognorm(0.5, scale=math.exp(0.3))),
    "HalfNormal": (dict(scale=1.7), lambda p: st.halfnorm(scale=1.7)),
    "Uniform": (dict(low=-1.0, high=2.5), lambda p: st.uniform(-1.0, 3.5)),
    "Exponential": (dict(rate=2.5), lambda p: st.expon(scale=0.4)),
    "Laplace": (dict(loc=1.0, scale=0.5), lambda p: st.laplace(1.0, 0.5)),
    "Cauchy": (dict(loc=1.0, scale=0.5), lambda p: st.cauchy(1.0, 0.5)),
    "StudentT": (dict(df=5.0, loc=1.0, scale=0.5), lambda p: st.t(5.0, 1.0, 0.5)),
    "Gamma": (dict(concentration=0.6, rate=2.0), lambda p: st.gamma(0.6, scale=0.5)),
    "Beta": (dict(concentration1=0.6, concentration0=2.0), lambda p: st.beta(0.6, 2.0)),
    "Bernoulli": (dict(probs=0.3), lambda p: st.bernoulli(0.3)),
    "Binomial": (dict(total_count=7, probs=0.3), lambda p: st.binom(7, 0.3)),
    "Poisson": (dict(rate=3.5), lambda p: st.poisson(3.5)),
}


@pytest.mark.parametrize("name", sorted(STATS))
def test_sample_statistics(name):
    kw, ref = STATS[name]
    ref = ref(kw)
    tg.manual_seed(1234)
    x = getattr(D, name)(**kw).sample((4000,)).numpy()
    assert x.shape == (4000,)
    if name != "Cauchy":
        assert abs(x.mean() - ref.mean()) < 5 * ref.std() / math.sqrt(4000)
    if name in ("Bernoulli", "Binomial", "Poisson"):
        assert np.all(x == np.round(x)) and x.min() >= 0
        ks = np.arange(int(x.max()) + 1)
        freq = (x[:, None] == ks).mean(0)
        pmf = ref.pmf(ks)
        assert np.all(np.abs(freq - pmf) < 5 * np.sqrt(pmf * (1 - pmf) / 4000) + 1e-12)
    else:
        assert st.kstest(x, ref.cdf).pvalue > 1e-4


def test_dirichlet_and_categorical_sample_statistics():
    tg.manual_seed(99)
    c = R([0.5, 2.0, 3.5])
    x = D.Dirichlet(tg.tensor(c)).sample((4000,)).numpy()
    assert x.shape == (4000, 3)
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-14)
    ref = st.dirichlet(c)
    assert np.all(np.abs(x.mean(0) - ref.mean()) < 5 * np.sqrt(ref.var() / 4000))
    p = R([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    k = D.Categorical(probs=tg.tensor(p)).sample((4000,))
    assert k.dtype == tg.int64 and k.shape == (4000, 2)
    freq = (k.numpy()[:, :, None] == np.arange(3)).mean(0)
    assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / 4000))


# -- shapes --

SHAPE_CASES = [
    ("Normal", dict(loc=np.zeros((2, 1)), scale=np.ones(3))),
    ("Uniform", dict(low=np.zeros(3), high=np.ones((2, 3)))),
    ("Gamma", dict(concentration=np.ones((2, 3)), rate=np.ones(3))),
    ("Beta", dict(concentration1=np.ones((2, 3)), concentration0=np.ones(3))),
    ("Dirichlet", dict(concentration=np.ones((2, 4)))),
    ("Categorical", dict(probs=np.full((2, 4), 0.25))),
    ("Bernoulli", dict(probs=np.full((2, 3), 0.5))),
    ("Binomial", dict(total_count=np.full(3, 4.0), probs=np.full((2, 3), 0.5))),
    ("Poisson", dict(rate=np.ones((2, 3)))),
    ("StudentT", dict(df=np.full((2, 3), 3.0))),
    ("LogNormal", dict(loc=np.zeros((2, 3)), scale=1.0)),
    ("HalfNormal", dict(scale=np.ones((2, 3)))),
    ("Exponential", dict(rate=np.ones((2, 3)))),
    ("Laplace", dict(loc=np.zeros((2, 3)), scale=1.0)),
    ("Cauchy", dict(loc=np.zeros((2, 3)), scale=1.0)),
]


def _build(mod, tensor, name, params):
    return getattr(mod, name)(**{k: tensor(v) if isinstance(v, np.ndarray) else v for k, v in params.items()})


@pytest.mark.parametrize("name,params", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shapes_against_torch(name, params):
    torch = pytest.importorskip("torch")
    d = _build(D, tg.tensor, name, params)
    td = _build(torch.distributions, lambda v: torch.tensor(v, dtype=torch.float64), name, params)
    assert d.batch_shape == tuple(td.batch_shape) and d.event_shape == tuple(td.event_shape)
    tg.manual_seed(0)
    s, ts = d.sample((5, 1)), td.sample((5, 1))
    assert s.shape == tuple(ts.shape)
    assert d.log_prob(s).shape == tuple(td.log_prob(ts).shape)
    e, te = d.expand((4,) + d.batch_shape), td.expand((4,) + td.batch_shape)
    assert type(e) is type(d) and e.batch_shape == tuple(te.batch_shape) and e.event_shape == tuple(te.event_shape)
    assert e.sample().shape == tuple(te.sample().shape)
    v = s.numpy()[0, 0]
    np.testing.assert_allclose(e.log_prob(tg.tensor(v)).numpy(), te.log_prob(torch.tensor(v)).numpy(), rtol=1e-12)
    if d.has_enumerate_support:
        assert d.enumerate_support().shape == tuple(td.enumerate_support().shape)
        assert d.enumerate_support(False).shape == tuple(td.enumerate_support(False).shape)
    if name not in ("Dirichlet", "Categorical", "Binomial", "Poisson"):
        np.testing.assert_allclose(e.entropy().numpy(), te.entropy().numpy(), rtol=1e-12)


def test_shapes_literal():
    d = D.Normal(tg.zeros(2, 1), tg.ones(3))
    assert d.batch_shape == (2, 3) and d.event_shape == ()
    assert d.sample().shape == (2, 3) and d.rsample([4]).shape == (4, 2, 3)
    assert D.Normal(0.0, 1.0).batch_shape == () and D.Normal(0.0, 1.0).sample((7,)).shape == (7,)
    ind = D.Independent(d, 1)
    assert ind.batch_shape == (2,) and ind.event_shape == (3,)
    x = tg.tensor(np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(ind.log_prob(x).numpy(), d.log_prob(x).numpy().sum(-1), rtol=1e-15)
    np.testing.assert_allclose(ind.entropy().numpy(), d.entropy().numpy().sum(-1), rtol=1e-15)
    e = ind.expand((5, 2))
    assert e.batch_shape == (5, 2) and e.event_shape == (3,) and e.base_dist.batch_shape == (5, 2, 3)
    assert D.Dirichlet(tg.ones(2, 4)).expand((3, 2)).sample((6,)).shape == (6, 3, 2, 4)
    with pytest.raises(ValueError, match="Expected reinterpreted_batch_ndims <= len"):
        D.Independent(d, 3)
    with pytest.raises(ValueError, match="must be at least one-dimensional"):
        D.Dirichlet(tg.tensor(1.0))


def test_independent_against_torch():
    torch = pytest.importorskip("torch")
    loc, scale = np.arange(6.0).reshape(2, 3), np.full((2, 3), 1.5)
    d = D.Independent(D.Normal(tg.tensor(loc), tg.tensor(scale)), 2)
    td = torch.distributions.Independent(torch.distributions.Normal(torch.tensor(loc), torch.tensor(scale)), 2)
    x = np.ones((4, 2, 3))
    np.testing.assert_allclose(d.log_prob(tg.tensor(x)).numpy(), td.log_prob(torch.tensor(x)).numpy(), rtol=1e-13)
    assert d.log_prob(tg.tensor(x)).shape == (4,)
    assert repr(d) == repr(td).replace("torch.Size([2, 3])", "(2, 3)")
    assert d.has_rsample and d.rsample((2,)).shape == (2, 2, 3)


# -- kl_divergence --

def _p(name, **kw):
    return name, {k: R(v, dtype=float) for k, v in kw.items()}


KL_PAIRS = [
    (_p("Bernoulli", probs=[0.2, 0.7, 0.0, 1.0]), _p("Bernoulli", probs=[0.5, 0.1, 0.3, 0.6])),
    (_p("Beta", concentration1=[0.7, 2.0], concentration0=[1.5, 3.0]),
     _p("Beta", concentration1=[1.2, 0.5], concentration0=[2.5, 1.0])),
    (_p("Binomial", total_count=[5, 5], probs=[0.3, 0.6]), _p("Binomial", total_count=[5, 4], probs=[0.5, 0.2])),
    (_p("Categorical", probs=[[0.2, 0.3, 0.5], [0.5, 0.5, 0.0]]),
     _p("Categorical", probs=[[0.4, 0.4, 0.2], [0.1, 0.3, 0.6]])),
    (_p("Dirichlet", concentration=[[0.7, 2.0, 1.0], [1.5, 0.4, 3.0]]),
     _p("Dirichlet", concentration=[[1.7, 0.9, 2.0], [0.5, 1.4, 1.0]])),
    (_p("Exponential", rate=[0.5, 2.0]), _p("Exponential", rate=[1.5, 0.7])),
    (_p("Gamma", concentration=[0.7, 2.0], rate=[1.5, 3.0]), _p("Gamma", concentration=[1.2, 0.5], rate=[2.5, 1.0])),
    (_p("HalfNormal", scale=[0.5, 2.0]), _p("HalfNormal", scale=[1.5, 0.7])),
    (_p("LogNormal", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("LogNormal", loc=[1.0, 0.0], scale=[1.5, 0.7])),
    (_p("Laplace", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Laplace", loc=[1.0, 0.0], scale=[1.5, 0.7])),
    (_p("Normal", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Normal", loc=[1.0, 0.0], scale=[1.5, 0.7])),
    (_p("Poisson", rate=[0.5, 2.0]), _p("Poisson", rate=[1.5, 0.7])),
    (_p("Uniform", low=[0.0, -1.0, 0.0], high=[1.0, 1.0, 2.0]),
     _p("Uniform", low=[-1.0, -2.0, 0.5], high=[2.0, 1.5, 3.0])),
    (_p("Cauchy", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Cauchy", loc=[1.0, 0.0], scale=[1.5, 0.7])),
    (_p("Bernoulli", probs=[0.2, 0.7]), _p("Poisson", rate=[1.5, 0.7])),
    (_p("Beta", concentration1=[0.7, 2.0], concentration0=[1.5, 3.0]), _p("Exponential", rate=[1.5, 0.7])),
    (_p("Beta", concentration1=[0.7, 2.0], concentration0=[1.5, 3.0]),
     _p("Gamma", concentration=[1.2, 0.5], rate=[2.5, 1.0])),
    (_p("Beta", concentration1=[0.7, 2.0], concentration0=[1.5, 3.0]), _p("Normal", loc=[1.0, 0.0], scale=[1.5, 0.7])),
    (_p("Beta", concentration1=[0.7, 2.0, 1.0], concentration0=[1.5, 3.0, 1.0]),
     _p("Uniform", low=[-1.0, 0.0, 0.5], high=[2.0, 1.0, 1.0])),
    (_p("Exponential", rate=[0.5, 2.0]), _p("Beta", concentration1=[1.2, 0.5], concentration0=[2.5, 1.0])),
    (_p("Exponential", rate=[0.5, 2.0]), _p("Uniform", low=[0.0, 1.0], high=[2.0, 3.0])),
    (_p("Exponential", rate=[0.5, 2.0]), _p("Gamma", concentration=[1.2, 0.5], rate=[2.5, 1.0])),
    (_p("Exponential", rate=[0.5, 2.0]), _p("Normal", loc=[1.0, 0.0], scale=[1.5, 0.7])),
    (_p("Gamma", concentration=[0.7, 2.0], rate=[1.5, 3.0]),
     _p("Beta", concentration1=[1.2, 0.5], concentration0=[2.5, 1.0])),
    (_p("Gamma", concentration=[0.7, 2.0], rate=[1.5, 3.0]), _p("Uniform", low=[0.0, 1.0], high=[2.0, 3.0])),
    (_p("Gamma", concentration=[0.7, 2.0], rate=[1.5, 3.0]), _p("Exponential", rate=[1.5, 0.7])),
    (_p("Gamma", concentration=[0.7, 2.0], rate=[1.5, 3.0]), _p("Normal", loc=[1.0, 0.0], scale=[1.5, 0.7])),
    (_p("Laplace", loc=[0.3, -1.0], scale=[0.5, 2.0]),
     _p("Beta", concentration1=[1.2, 0.5], concentration0=[2.5, 1.0])),
    (_p("Laplace", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Exponential", rate=[1.5, 0.7])),
    (_p("Laplace", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Gamma", concentration=[1.2, 0.5], rate=[2.5, 1.0])),
    (_p("Laplace", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Uniform", low=[0.0, 1.0], high=[2.0, 3.0])),
    (_p("Laplace", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Normal", loc=[1.0, 0.0], scale=[1.5, 0.7])),
    (_p("Normal", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Beta", concentration1=[1.2, 0.5], concentration0=[2.5, 1.0])),
    (_p("Normal", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Exponential", rate=[1.5, 0.7])),
    (_p("Normal", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Gamma", concentration=[1.2, 0.5], rate=[2.5, 1.0])),
    (_p("Normal", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Uniform", low=[0.0, 1.0], high=[2.0, 3.0])),
    (_p("Normal", loc=[0.3, -1.0], scale=[0.5, 2.0]), _p("Laplace", loc=[1.0, 0.0], scale=[1.5, 0.7])),
    (_p("Poisson", rate=[0.5, 2.0]), _p("Bernoulli", probs=[0.2, 0.7])),
    (_p("Poisson", rate=[0.5, 2.0]), _p("Binomial", total_count=[5, 5], probs=[0.3, 0.6])),
    (_p("Uniform", low=[0.1, 0.3, -0.5], high=[0.6, 0.9, 0.5]),
     _p("Beta", concentration1=[1.2, 0.5, 2.0], concentration0=[2.5, 1.0, 2.0])),
    (_p("Uniform", low=[0.1, 0.3, -0.5], high=[0.6, 2.9, 0.5]), _p("Exponential", rate=[1.5, 0.7, 1.0])),
    (_p("Uniform", low=[0.1, 0.3, -0.5], high=[0.6, 2.9, 0.5]),
     _p("Gamma", concentration=[1.2, 0.5, 2.0], rate=[2.5, 1.0, 2.0])),
    (_p("Uniform", low=[0.1, 0.3], high=[0.6, 2.9]), _p("Normal", loc=[1.0, 0.0], scale=[1.5, 0.7])),
]
KL_IDS = ["%s-%s-%d" % (p[0], q[0], i) for i, (p, q) in enumerate(KL_PAIRS)]
INT = {"total_count"}


def _mk(name, params, requires_grad=False):
    ts = {k: tg.tensor(v, requires_grad=requires_grad and k not in INT) for k, v in params.items()}
    return getattr(D, name)(**ts), ts


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # (masked to inf, as PyTorch)
@pytest.mark.parametrize("p,q", KL_PAIRS, ids=KL_IDS)
def test_kl_against_torch(p, q):
    torch = pytest.importorskip("torch")
    dp, tp = _mk(*p, requires_grad=True)
    dq, tq = _mk(*q, requires_grad=True)

    def mk(name, params):
        ts = {k: torch.tensor(v, dtype=torch.float64, requires_grad=k not in INT) for k, v in params.items()}
        return getattr(torch.distributions, name)(**ts), ts
    (tdp, ttp), (tdq, ttq) = mk(*p), mk(*q)
    got, want = D.kl_divergence(dp, dq), torch.distributions.kl_divergence(tdp, tdq)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-13)
    fin = np.isfinite(want.detach().numpy())
    if fin.any() and want.requires_grad:
        w = R(fin, dtype=float)
        (got * tg.tensor(w)).sum().backward()
        (want * torch.tensor(w)).sum().backward()
        for mine, theirs in ((tp, ttp), (tq, ttq)):
            for k, t in mine.items():
                if theirs[k].grad is None:
                    assert t.grad is None or not t.grad.numpy().any(), k
                else:
                    # (PyTorch's trigamma is off by up to 5e-10: tests/test_special.py)
                    np.testing.assert_allclose(t.grad.numpy(), theirs[k].grad.numpy(), rtol=2e-8, atol=1e-12,
                                               err_msg=k)


def test_kl_independent_and_errors_against_torch():
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    a = np.arange(6.0).reshape(2, 3)
    p = D.Independent(D.Normal(tg.tensor(a), tg.tensor(a + 1)), 1)
    q = D.Independent(D.Normal(tg.tensor(a * 0.5), tg.tensor(a + 2)), 1)
    tp = TD.Independent(TD.Normal(torch.tensor(a), torch.tensor(a + 1)), 1)
    tq = TD.Independent(TD.Normal(torch.tensor(a * 0.5), torch.tensor(a + 2)), 1)
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), TD.kl_divergence(tp, tq).numpy(), rtol=1e-13)
    for mine, theirs in [((D.Normal(0.0, 1.0), D.StudentT(2.0)), (TD.Normal(0.0, 1.0), TD.StudentT(2.0))),
                         ((D.Binomial(3, tg.tensor([0.5])), D.Binomial(4, tg.tensor([0.5]))),
                          (TD.Binomial(3, torch.tensor([0.5])), TD.Binomial(4, torch.tensor([0.5]))))]:
        with pytest.raises(NotImplementedError) as e1:
            D.kl_divergence(*mine)
        with pytest.raises(NotImplementedError) as e2:
            TD.kl_divergence(*theirs)
        assert str(e1.value) == str(e2.value)


def _quad_kl(p, q, lo, hi):
    def f(x):
        lp = p.logpdf(x)
        return 0.0 if lp < -700 else math.exp(lp) * (lp - q.logpdf(x))
    return integrate.quad(f, lo, hi, limit=200, epsabs=1e-12, epsrel=1e-10)[0]


KL_SCIPY = [
    (D.Normal(0.3, 0.5), D.Normal(1.0, 1.5), st.norm(0.3, 0.5), st.norm(1.0, 1.5), -np.inf, np.inf),
    (D.Laplace(0.3, 0.5), D.Laplace(1.0, 1.5), st.laplace(0.3, 0.5), st.laplace(1.0, 1.5), -np.inf, np.inf),
    (D.Cauchy(0.3, 0.5), D.Cauchy(1.0, 1.5), st.cauchy(0.3, 0.5), st.cauchy(1.0, 1.5), -np.inf, np.inf),
    (D.Exponential(0.5), D.Exponential(1.5), st.expon(scale=2), st.expon(scale=1 / 1.5), 0, np.inf),
    (D.Gamma(2.0, 3.0), D.Gamma(1.2, 2.5), st.gamma(2.0, scale=1 / 3), st.gamma(1.2, scale=0.4), 0, np.inf),
    (D.Beta(2.0, 3.0), D.Beta(1.2, 2.5), st.beta(2.0, 3.0), st.beta(1.2, 2.5), 0, 1),
    (D.HalfNormal(0.5), D.HalfNormal(1.5), st.halfnorm(scale=0.5), st.halfnorm(scale=1.5), 0, np.inf),
    (D.LogNormal(0.3, 0.5), D.LogNormal(1.0, 1.5), st.lognorm(0.5, scale=math.exp(0.3)),
     st.lognorm(1.5, scale=math.e), 0, np.inf),
    (D.Uniform(0.2, 0.7), D.Uniform(0.0, 2.0), st.uniform(0.2, 0.5), st.uniform(0.0, 2.0), 0.2, 0.7),
    (D.Beta(2.0, 3.0), D.Exponential(1.5), st.beta(2.0, 3.0), st.expon(scale=1 / 1.5), 0, 1),
    (D.Beta(2.0, 3.0), D.Gamma(1.2, 2.5), st.beta(2.0, 3.0), st.gamma(1.2, scale=0.4), 0, 1),
    (D.Beta(2.0, 3.0), D.Normal(1.0, 1.5), st.beta(2.0, 3.0), st.norm(1.0, 1.5), 0, 1),
    (D.Beta(2.0, 3.0), D.Uniform(-1.0, 2.0), st.beta(2.0, 3.0), st.uniform(-1.0, 3.0), 0, 1),
    (D.Exponential(0.5), D.Gamma(1.2, 2.5), st.expon(scale=2), st.gamma(1.2, scale=0.4), 0, np.inf),
    (D.Exponential(0.5), D.Normal(1.0, 1.5), st.expon(scale=2), st.norm(1.0, 1.5), 0, np.inf),
    (D.Gamma(2.0, 3.0), D.Exponential(1.5), st.gamma(2.0, scale=1 / 3), st.expon(scale=1 / 1.5), 0, np.inf),
    (D.Gamma(2.0, 3.0), D.Normal(1.0, 1.5), st.gamma(2.0, scale=1 / 3), st.norm(1.0, 1.5), 0, np.inf),
    (D.Laplace(0.3, 0.5), D.Normal(1.0, 1.5), st.laplace(0.3, 0.5), st.norm(1.0, 1.5), -np.inf, np.inf),
    (D.Normal(0.3, 0.5), D.Laplace(1.0, 1.5), st.norm(0.3, 0.5), st.laplace(1.0, 1.5), -np.inf, np.inf),
    (D.Uniform(0.1, 0.6), D.Beta(1.2, 2.5), st.uniform(0.1, 0.5), st.beta(1.2, 2.5), 0.1, 0.6),
    (D.Uniform(0.1, 0.6), D.Exponential(1.5), st.uniform(0.1, 0.5), st.expon(scale=1 / 1.5), 0.1, 0.6),
    (D.Uniform(0.1, 0.6), D.Gamma(1.2, 2.5), st.uniform(0.1, 0.5), st.gamma(1.2, scale=0.4), 0.1, 0.6),
    (D.Uniform(0.1, 0.6), D.Normal(1.0, 1.5), st.uniform(0.1, 0.5), st.norm(1.0, 1.5), 0.1, 0.6),
]


@pytest.mark.parametrize("case", KL_SCIPY, ids=["%s-%s" % (type(c[0]).__name__, type(c[1]).__name__) for c in KL_SCIPY])
def test_kl_against_quadrature(case):
    p, q, sp_, sq, lo, hi = case
    assert D.kl_divergence(p, q).item() == pytest.approx(_quad_kl(sp_, sq, lo, hi), rel=1e-7, abs=1e-10)


def test_kl_discrete_and_infinite_literal():
    pp, qp = R([0.2, 0.3, 0.5]), R([0.4, 0.4, 0.2])
    got = D.kl_divergence(D.Categorical(tg.tensor(pp)), D.Categorical(tg.tensor(qp))).item()
    assert got == pytest.approx(float(np.sum(pp * np.log(pp / qp))), rel=1e-14)
    ks = np.arange(60)
    got = D.kl_divergence(D.Poisson(tg.tensor(2.0)), D.Poisson(tg.tensor(0.7))).item()
    pk = st.poisson(2.0).pmf(ks)
    assert got == pytest.approx(float(np.sum(pk * (st.poisson(2.0).logpmf(ks) - st.poisson(0.7).logpmf(ks)))),
                                rel=1e-12)
    ks = np.arange(6)
    got = D.kl_divergence(D.Binomial(5, tg.tensor(0.3)), D.Binomial(5, tg.tensor(0.6))).item()
    bp, bq = st.binom(5, 0.3), st.binom(5, 0.6)
    assert got == pytest.approx(float(np.sum(bp.pmf(ks) * (bp.logpmf(ks) - bq.logpmf(ks)))), rel=1e-12)
    got = D.kl_divergence(D.Bernoulli(tg.tensor([0.3, 0.0, 1.0])), D.Bernoulli(tg.tensor([0.6, 0.5, 0.0]))).tolist()
    assert got[0] == pytest.approx(0.3 * math.log(0.3 / 0.6) + 0.7 * math.log(0.7 / 0.4), rel=1e-12)
    assert got[1] == pytest.approx(math.log(2), rel=1e-12) and got[2] == math.inf
    d1 = D.Dirichlet(tg.tensor([2.0, 3.0]))
    d2 = D.Dirichlet(tg.tensor([1.2, 2.5]))
    assert D.kl_divergence(d1, d2).item() == pytest.approx(
        D.kl_divergence(D.Beta(2.0, 3.0), D.Beta(1.2, 2.5)).item(), rel=1e-14)
    assert D.kl_divergence(D.Normal(0.0, 1.0), D.Uniform(0.0, 1.0)).item() == math.inf
    assert D.kl_divergence(D.Uniform(0.0, 3.0), D.Uniform(1.0, 2.0)).item() == math.inf
    assert D.kl_divergence(D.Poisson(tg.tensor(1.0)), D.Bernoulli(tg.tensor(0.5))).item() == math.inf
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q "
                                                  "type StudentT"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.StudentT(2.0))


def test_kl_gradcheck():
    def f(l1, s1, l2, s2):
        return (D.kl_divergence(D.Normal(l1, s1), D.Laplace(l2, s2))
                + D.kl_divergence(D.Gamma(s1, s2), D.Gamma(s2, s1))
                + D.kl_divergence(D.Beta(s1, s2), D.Normal(l1, s2)))
    xs = [tg.tensor(v, requires_grad=True) for v in ([0.3, -1.0], [0.5, 2.0], [1.0, 0.0], [1.5, 0.7])]
    assert tg.autograd.gradcheck(f, xs)
    assert tg.autograd.gradgradcheck(f, xs)


def test_register_kl():
    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return p.loc * 0 + 42.0

    assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 42.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), MyNormal(1.0, 1.0)).item() == 0.5
    with pytest.raises(TypeError, match="Expected type_p to be a Distribution subclass"):
        D.register_kl(int, D.Normal)


# -- validation --

def _norm(msg):
    """PyTorch's message with tapegrad's spelling of a shape (a tuple, not torch.Size)."""
    msg = msg.replace(", dtype=torch.float64", "")
    return re.sub(r"torch\.Size\((\[[^\]]*\])\)", lambda m: str(tuple(eval(m.group(1)))), msg)


BAD_ARGS = [
    ("Normal", (0.0, -1.0), {}), ("Normal", (math.nan, 1.0), {}), ("Uniform", (1.0, 0.5), {}),
    ("Exponential", (-2.0,), {}), ("Laplace", (0.0, 0.0), {}), ("Cauchy", (0.0, -0.5), {}),
    ("StudentT", ([-1.0],), {"loc": [0.0]}), ("Gamma", (1.0, -1.0), {}), ("Gamma", (-1.0, 1.0), {}),
    ("Beta", (-1.0, 1.0), {}), ("LogNormal", (0.0, -1.0), {}), ("HalfNormal", (-1.0,), {}),
    ("Bernoulli", (1.5,), {}), ("Poisson", (-0.5,), {}),
    ("Binomial", (2.5,), {"probs": [0.5]}), ("Binomial", (2,), {"probs": [1.5]}),
    ("Categorical", ([-0.1, 1.1],), {}), ("Dirichlet", ([1.0, -1.0],), {}),
]


def _args(mod, tensor, args, kw):
    conv = lambda v: tensor(v) if isinstance(v, list) else v  # noqa: E731
    return [conv(a) for a in args], {k: conv(v) for k, v in kw.items()}


@pytest.mark.parametrize("name,args,kw", BAD_ARGS, ids=["%s-%d" % (b[0], i) for i, b in enumerate(BAD_ARGS)])
def test_bad_arguments_against_torch(name, args, kw):
    torch = pytest.importorskip("torch")
    a, k = _args(D, tg.tensor, args, kw)
    with pytest.raises(ValueError) as mine:
        getattr(D, name)(*a, **k)
    a, k = _args(None, lambda v: torch.tensor(v, dtype=torch.float64), args, kw)
    with pytest.raises(ValueError) as theirs:
        getattr(torch.distributions, name)(*a, **k)
    m, t = str(mine.value), _norm(str(theirs.value))
    head = "but found invalid values:"
    if name == "StudentT":      # (PyTorch's is raised by the Chi2 it builds: "of distribution Chi2()")
        head = " of distribution "
    assert m.split(head)[0] == t.split(head)[0]
    assert m.startswith("Expected parameter")
    getattr(D, name)(*_args(D, tg.tensor, args, kw)[0], **_args(D, tg.tensor, args, kw)[1], validate_args=False)


BAD_VALUES = [
    ("Normal", (0.0, 1.0), [math.nan]), ("Exponential", (1.0,), [-1.0]), ("Uniform", (0.0, 1.0), [1.5]),
    ("Gamma", (1.0, 1.0), [-0.5]), ("Beta", (1.0, 1.0), [1.5]), ("Poisson", (1.0,), [0.5]),
    ("Bernoulli", (0.5,), [0.5]), ("Binomial", (3, 0.5), [4.0]), ("HalfNormal", (1.0,), [-1.0]),
    ("LogNormal", (0.0, 1.0), [0.0]), ("Dirichlet", ([1.0, 1.0],), [0.3, 0.3]),
    ("Categorical", ([0.5, 0.5],), [2.0]),
]


@pytest.mark.parametrize("name,args,value", BAD_VALUES, ids=["%s-%d" % (b[0], i) for i, b in enumerate(BAD_VALUES)])
def test_bad_values_against_torch(name, args, value):
    torch = pytest.importorskip("torch")
    a, _ = _args(D, tg.tensor, args, {})
    with pytest.raises(ValueError) as mine:
        getattr(D, name)(*a).log_prob(tg.tensor(value))
    a, _ = _args(None, lambda v: torch.tensor(v, dtype=torch.float64), args, {})
    with pytest.raises(ValueError) as theirs:
        getattr(torch.distributions, name)(*a).log_prob(torch.tensor(value, dtype=torch.float64))
    head = "but found invalid values:"
    assert str(mine.value).split(head)[0] == _norm(str(theirs.value)).split(head)[0]


def test_validation_messages_literal():
    with pytest.raises(ValueError, match=re.escape(
            "Expected parameter scale (Tensor of shape (2,)) of distribution Normal(loc: (2,), scale: (2,)) to "
            "satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values:\ntensor([ 1., -1.])")):
        D.Normal(tg.zeros(2), tg.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(ValueError, match=re.escape("The right-most size of value must match event_shape: "
                                                   "(2, 2) vs (3,).")):
        D.Dirichlet(tg.ones(3)).log_prob(tg.ones(2, 2) / 2)
    with pytest.raises(ValueError, match=re.escape("Value is not broadcastable with batch_shape+event_shape: "
                                                   "(4,) vs (3,).")):
        D.Normal(tg.zeros(3), 1.0).log_prob(tg.zeros(4))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Bernoulli(0.5, 0.5)
    with pytest.raises(ValueError, match="Input arguments must all be instances of Number"):
        D.Normal("a", 1.0)
    assert D.Normal(0.0, 1.0, validate_args=False).log_prob(0.5).item() == pytest.approx(st.norm.logpdf(0.5))
    assert D.Exponential(1.0, validate_args=False).log_prob(tg.tensor(-1.0)).item() == 1.0
    old = D.Distribution._validate_args
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(0.0, -1.0)
    finally:
        D.Distribution.set_default_validate_args(old)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)


def test_constraints():
    x = tg.tensor([-1.0, 0.0, 0.5, 1.0, 2.0, math.nan])
    assert constraints.real.check(x).tolist() == [True] * 5 + [False]
    assert constraints.positive.check(x).tolist() == [False, False, True, True, True, False]
    assert constraints.nonnegative.check(x).tolist() == [False, True, True, True, True, False]
    assert constraints.unit_interval.check(x).tolist() == [False, True, True, True, False, False]
    assert constraints.half_open_interval(0.0, 1.0).check(x).tolist() == [False, True, True, False, False, False]
    assert constraints.boolean.check(x).tolist() == [False, True, False, True, False, False]
    assert constraints.nonnegative_integer.check(x).tolist() == [False, True, False, True, True, False]
    assert constraints.positive_integer.check(x).tolist() == [False, False, False, True, True, False]
    assert constraints.integer_interval(0, 1).check(x).tolist() == [False, True, False, True, False, False]
    assert constraints.less_than(0.5).check(x).tolist() == [True, True, False, False, False, False]
    s = tg.tensor([[0.2, 0.8], [0.5, 0.6], [-0.5, 1.5]])
    assert constraints.simplex.check(s).tolist() == [True, False, False]
    assert constraints.real_vector.check(tg.tensor([[1.0, math.nan], [1.0, 2.0]])).tolist() == [False, True]
    assert constraints.one_hot.check(tg.tensor([[0.0, 1.0], [1.0, 1.0]])).tolist() == [True, False]
    m = tg.tensor([[[1.0, 0.0], [2.0, 3.0]], [[1.0, 2.0], [2.0, 3.0]]])
    assert constraints.lower_triangular.check(m).tolist() == [True, False]
    assert constraints.symmetric.check(m).tolist() == [False, True]
    assert constraints.square.check(m).tolist() == [True, True]
    assert constraints.is_dependent(constraints.dependent) and not constraints.is_dependent(constraints.real)
    assert constraints.is_dependent(D.Uniform.support) and repr(D.Uniform(0.0, 2.0).support) == \
        "Interval(lower_bound=0.0, upper_bound=2.0)"
    with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
        constraints.dependent.check(x)
    assert constraints.independent(constraints.positive, 1).event_dim == 1
    assert repr(constraints.independent(constraints.positive, 1)) == \
        "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"


def test_constraints_against_torch():
    torch = pytest.importorskip("torch")
    TC = torch.distributions.constraints
    xv = [-1.0, 0.0, 0.5, 1.0, 2.0, math.nan]
    x, tx = tg.tensor(xv), torch.tensor(xv)
    for n in ("real", "positive", "nonnegative", "unit_interval", "boolean", "nonnegative_integer",
              "positive_integer"):
        assert getattr(constraints, n).check(x).tolist() == getattr(TC, n).check(tx).tolist(), n
        assert repr(getattr(constraints, n)) == repr(getattr(TC, n))
    for n, args in (("interval", (0.0, 1.0)), ("half_open_interval", (0.0, 1.0)), ("greater_than", (0.5,)),
                    ("greater_than_eq", (0.5,)), ("less_than", (0.5,)), ("integer_interval", (0, 1))):
        c, tc = getattr(constraints, n)(*args), getattr(TC, n)(*args)
        assert c.check(x).tolist() == tc.check(tx).tolist(), n
        assert repr(c) == repr(tc)
    for d, td in ((D.Normal(0.0, 1.0), torch.distributions.Normal(0.0, 1.0)),
                  (D.Binomial(4, tg.tensor(0.5)), torch.distributions.Binomial(4, torch.tensor(0.5)))):
        assert repr(d.support) == repr(td.support)
        assert {k: repr(v) for k, v in d.arg_constraints.items()} == {k: repr(v) for k, v in td.arg_constraints.items()}


def test_second_derivative_by_create_graph():
    loc, scale = tg.tensor([0.3, -1.0], requires_grad=True), tg.tensor([0.5, 2.0], requires_grad=True)
    x = tg.tensor([1.0, 0.5])
    lp = D.Normal(loc, scale).log_prob(x).sum()
    (gs,) = tg.autograd.grad(lp, scale, create_graph=True)
    s, z = scale.detach().numpy(), x.numpy() - loc.detach().numpy()
    np.testing.assert_allclose(gs.detach().numpy(), z ** 2 / s ** 3 - 1 / s, rtol=1e-14)
    (hs,) = tg.autograd.grad(gs.sum(), scale)
    np.testing.assert_allclose(hs.numpy(), -3 * z ** 2 / s ** 4 + 1 / s ** 2, rtol=1e-14)


def test_compiled_and_interpreted_reverse(reverse):
    c = tg.tensor([0.7, 2.0, 5.5], requires_grad=True)
    r = tg.tensor([1.5, 0.4, 2.0], requires_grad=True)
    v = R([0.3, 4.0, 2.5])
    (D.Gamma(c, r).log_prob(tg.tensor(v)).sum() + D.StudentT(c, r, 1.0).entropy().sum()).backward()
    cv, rv = c.detach().numpy(), r.detach().numpy()
    dt = sp.psi(0.5 * (cv + 1)) - sp.psi(0.5 * cv)
    want_c = (np.log(rv) + np.log(v) - sp.psi(cv)
              + 0.5 * dt + 0.25 * (cv + 1) * (sp.polygamma(1, 0.5 * (cv + 1)) - sp.polygamma(1, 0.5 * cv))
              + 0.5 / cv + 0.5 * sp.psi(0.5 * cv) - 0.5 * sp.psi(0.5 * (cv + 1)))
    np.testing.assert_allclose(c.grad.numpy(), want_c, rtol=1e-12)
    np.testing.assert_allclose(r.grad.numpy(), cv / rv - v, rtol=1e-13)


# -- MultivariateNormal, LowRankMultivariateNormal (Cholesky factors and triangular solves
# are compositions of recorded ops: distributions/_linalg.py) --

def _spd(rng, *batch, n=3):
    a = rng.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + np.eye(n)


MVN_RNG = np.random.default_rng(2024)
MVN_LOC = MVN_RNG.normal(size=(2, 3))
MVN_COV = _spd(MVN_RNG, 2)
MVN_X = MVN_RNG.normal(size=(4, 2, 3))
LR_W = MVN_RNG.normal(size=(2, 3, 2))
LR_D = MVN_RNG.uniform(0.5, 2.0, size=(2, 3))
MVN_FORMS = {"covariance_matrix": MVN_COV, "precision_matrix": np.linalg.inv(MVN_COV),
             "scale_tril": np.linalg.cholesky(MVN_COV)}


@pytest.mark.parametrize("form", sorted(MVN_FORMS))
def test_mvn_against_scipy(form):
    d = D.MultivariateNormal(tg.tensor(MVN_LOC), **{form: tg.tensor(MVN_FORMS[form])})
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    ref = [st.multivariate_normal(MVN_LOC[i], MVN_COV[i]) for i in range(2)]
    np.testing.assert_allclose(d.log_prob(tg.tensor(MVN_X)).numpy(),
                               np.stack([ref[i].logpdf(MVN_X[:, i]) for i in range(2)], -1), rtol=1e-12)
    np.testing.assert_allclose(d.entropy().numpy(), [r.entropy() for r in ref], rtol=1e-13)
    np.testing.assert_allclose(d.covariance_matrix.numpy(), MVN_COV, rtol=1e-12)
    np.testing.assert_allclose(d.precision_matrix.numpy(), np.linalg.inv(MVN_COV), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d.scale_tril.numpy(), np.linalg.cholesky(MVN_COV), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(d.variance.numpy(), np.diagonal(MVN_COV, 0, -2, -1), rtol=1e-12)
    np.testing.assert_array_equal(d.mean.numpy(), MVN_LOC)


def test_lowrank_mvn_against_scipy():
    d = D.LowRankMultivariateNormal(tg.tensor(MVN_LOC), tg.tensor(LR_W), tg.tensor(LR_D))
    cov = LR_W @ np.swapaxes(LR_W, -1, -2) + np.stack([np.diag(v) for v in LR_D])
    ref = [st.multivariate_normal(MVN_LOC[i], cov[i]) for i in range(2)]
    np.testing.assert_allclose(d.log_prob(tg.tensor(MVN_X)).numpy(),
                               np.stack([ref[i].logpdf(MVN_X[:, i]) for i in range(2)], -1), rtol=1e-12)
    np.testing.assert_allclose(d.entropy().numpy(), [r.entropy() for r in ref], rtol=1e-13)
    np.testing.assert_allclose(d.covariance_matrix.numpy(), cov, rtol=1e-13)
    np.testing.assert_allclose(d.precision_matrix.numpy(), np.linalg.inv(cov), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d.scale_tril.numpy(), np.linalg.cholesky(cov), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(d.variance.numpy(), np.diagonal(cov, 0, -2, -1), rtol=1e-13)


@pytest.mark.parametrize("form", sorted(MVN_FORMS))
def test_mvn_gradcheck(form):
    if form == "scale_tril":
        def f(loc, m):
            return D.MultivariateNormal(loc, scale_tril=m.tril(), validate_args=False).log_prob(tg.tensor(MVN_X))
    else:
        def f(loc, m):
            m = (m + m.transpose(-2, -1)) * 0.5
            return D.MultivariateNormal(loc, **{form: m}).log_prob(tg.tensor(MVN_X))
    xs = [tg.tensor(MVN_LOC, requires_grad=True), tg.tensor(MVN_FORMS[form], requires_grad=True)]
    assert tg.autograd.gradcheck(f, xs)
    assert tg.autograd.gradgradcheck(f, xs)


def test_lowrank_gradcheck():
    def f(loc, w, dg):
        return D.LowRankMultivariateNormal(loc, w, dg).log_prob(tg.tensor(MVN_X))
    xs = [tg.tensor(v, requires_grad=True) for v in (MVN_LOC, LR_W, LR_D)]
    assert tg.autograd.gradcheck(f, xs)
    assert tg.autograd.gradgradcheck(f, xs)


@pytest.mark.parametrize("form", sorted(MVN_FORMS) + ["lowrank"])
def test_mvn_against_torch(form):
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    if form == "lowrank":
        vals = dict(loc=MVN_LOC, cov_factor=LR_W, cov_diag=LR_D)
        cls, tcls = D.LowRankMultivariateNormal, TD.LowRankMultivariateNormal
    else:
        vals = {"loc": MVN_LOC, form: MVN_FORMS[form]}
        cls, tcls = D.MultivariateNormal, TD.MultivariateNormal
    ts = {k: tg.tensor(v, requires_grad=True) for k, v in vals.items()}
    tts = {k: torch.tensor(v, requires_grad=True) for k, v in vals.items()}
    d, td = cls(**ts), tcls(**tts)
    for m in ("log_prob", "entropy"):
        got = d.log_prob(tg.tensor(MVN_X)) if m == "log_prob" else d.entropy()
        want = td.log_prob(torch.tensor(MVN_X)) if m == "log_prob" else td.entropy()
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
        got.sum().backward(retain_graph=True)         # (the factor made in __init__ serves both)
        want.sum().backward(retain_graph=True)
        for k in ts:
            if tts[k].grad is None:
                assert ts[k].grad is None or not ts[k].grad.numpy().any(), k
            else:
                np.testing.assert_allclose(ts[k].grad.numpy(), tts[k].grad.numpy(), rtol=1e-9, atol=1e-12,
                                           err_msg=k)
            ts[k].grad = None
            tts[k].grad = None
    for p in ("mean", "mode", "variance", "stddev", "covariance_matrix", "precision_matrix", "scale_tril"):
        np.testing.assert_allclose(getattr(d, p).detach().numpy(), getattr(td, p).detach().numpy(), rtol=1e-10,
                                   atol=1e-13, err_msg=p)
    e, te = d.expand((5, 2)), td.expand((5, 2))
    assert e.batch_shape == tuple(te.batch_shape) and e.event_shape == tuple(te.event_shape)
    assert e.rsample((3,)).shape == tuple(te.rsample((3,)).shape)
    np.testing.assert_allclose(e.log_prob(tg.tensor(MVN_X[0])).detach().numpy(),
                               te.log_prob(torch.tensor(MVN_X[0])).detach().numpy(), rtol=1e-12)
    assert repr(d) == _norm(repr(td))


def test_mvn_rsample_and_sample_statistics():
    loc, cov = R([1.0, -0.5]), R([[2.0, 0.6], [0.6, 0.5]])

    def f(l, c):
        tg.manual_seed(3)
        return D.MultivariateNormal(l, (c + c.transpose(-2, -1)) * 0.5).rsample((4,))
    xs = [tg.tensor(loc, requires_grad=True), tg.tensor(cov, requires_grad=True)]
    assert tg.autograd.gradcheck(f, xs) and tg.autograd.gradgradcheck(f, xs)

    def g(l, w, dg):
        tg.manual_seed(3)
        return D.LowRankMultivariateNormal(l, w, dg).rsample((4,))
    assert tg.autograd.gradcheck(g, [tg.tensor(v, requires_grad=True) for v in (loc, [[0.5], [1.0]], [0.3, 0.2])])
    tg.manual_seed(7)
    for d in (D.MultivariateNormal(tg.tensor(loc), tg.tensor(cov)),
              D.LowRankMultivariateNormal(tg.tensor(loc), tg.tensor([[1.2], [0.5]]), tg.tensor([0.56, 0.25]))):
        x = d.sample((4000,)).numpy()
        assert x.shape == (4000, 2)
        c = d.covariance_matrix.numpy()
        np.testing.assert_allclose(c, cov, rtol=1e-12)
        assert np.all(np.abs(x.mean(0) - loc) < 5 * np.sqrt(np.diag(cov) / 4000))
        # (the sample covariance: its standard error (c_ij^2 + c_ii c_jj) / n)
        se = np.sqrt((cov ** 2 + np.outer(np.diag(cov), np.diag(cov))) / 4000)
        assert np.all(np.abs(np.cov(x.T) - cov) < 5 * se)
        u = R([0.3, -0.8])          # (a projection is normal, of mean u.loc and variance u.cov.u)
        assert st.kstest(x @ u, st.norm(loc @ u, math.sqrt(u @ cov @ u)).cdf).pvalue > 1e-4


def _kl_mvn_ref(m0, c0, m1, c1):
    n = len(m0)
    i1 = np.linalg.inv(c1)
    return 0.5 * (np.trace(i1 @ c0) + (m1 - m0) @ i1 @ (m1 - m0) - n
                  + np.log(np.linalg.det(c1) / np.linalg.det(c0)))


def test_mvn_kl_literal_and_against_torch():
    rng = np.random.default_rng(5)
    loc = [rng.normal(size=(2, 3)), rng.normal(size=3)]
    cov = [_spd(rng, 2), _spd(rng)]
    w, dg = [rng.normal(size=(2, 3, 2)), rng.normal(size=(3, 1))], [rng.uniform(0.5, 2, (2, 3)), rng.uniform(0.5, 2, 3)]
    lrcov = [w[i] @ np.swapaxes(w[i], -1, -2) + np.eye(3) * dg[i][..., None, :] for i in range(2)]
    covs = {"mvn": cov, "lr": lrcov}
    try:
        import torch
    except ImportError:
        torch = None

    def mk(M, t, kind, i):
        leaves = ({"loc": loc[i], "covariance_matrix": cov[i]} if kind == "mvn"
                  else {"loc": loc[i], "cov_factor": w[i], "cov_diag": dg[i]})
        leaves = {k: t(v) for k, v in leaves.items()}
        cls = M.MultivariateNormal if kind == "mvn" else M.LowRankMultivariateNormal
        return cls(**leaves), leaves
    checked = 0
    for a in ("mvn", "lr"):
        for b in ("mvn", "lr"):
            (p, pl), (q, ql) = (mk(D, lambda v: tg.tensor(v, requires_grad=True), k, i) for k, i in ((a, 0), (b, 1)))
            got = D.kl_divergence(p, q)
            want = [_kl_mvn_ref(loc[0][i], covs[a][0][i], loc[1], covs[b][1]) for i in range(2)]
            np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-11)
            if torch is None:
                continue
            tt = lambda v: torch.tensor(v, requires_grad=True)  # noqa: E731
            (tp, tpl), (tq, tql) = (mk(torch.distributions, tt, k, i) for k, i in ((a, 0), (b, 1)))
            twant = torch.distributions.kl_divergence(tp, tq)
            np.testing.assert_allclose(got.detach().numpy(), twant.detach().numpy(), rtol=1e-12)
            got.sum().backward()
            twant.sum().backward()
            for mine, theirs in ((pl, tpl), (ql, tql)):
                for k in mine:
                    np.testing.assert_allclose(mine[k].grad.numpy(), theirs[k].grad.numpy(), rtol=1e-9, atol=1e-12,
                                               err_msg=k)
                    checked += 1
    assert torch is None or checked == 20


def test_mvn_errors_against_torch():
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    cases = [
        (lambda M: M.MultivariateNormal, lambda t: (t([0.0, 0.0]),), dict(covariance_matrix=[[1.0, 2.0], [2.0, 1.0]])),
        (lambda M: M.MultivariateNormal, lambda t: (t([0.0, 0.0]),), dict(scale_tril=[[1.0, 0.0], [2.0, -1.0]])),
        (lambda M: M.MultivariateNormal, lambda t: (t([0.0, 0.0]),), dict(precision_matrix=[[1.0, 0.5], [0.4, 1.0]])),
        (lambda M: M.MultivariateNormal, lambda t: (t(0.0),), dict(covariance_matrix=[[1.0]])),
        (lambda M: M.MultivariateNormal, lambda t: (t([0.0]),), dict(covariance_matrix=[1.0])),
        (lambda M: M.MultivariateNormal, lambda t: (t([0.0]),), {}),
        (lambda M: M.LowRankMultivariateNormal, lambda t: (t([0.0, 0.0]), t([[1.0], [1.0]]), t([1.0, -1.0])), {}),
        (lambda M: M.LowRankMultivariateNormal, lambda t: (t([0.0, 0.0]), t([[1.0, 1.0]]), t([1.0, 1.0])), {}),
        (lambda M: M.LowRankMultivariateNormal, lambda t: (t([0.0, 0.0]), t([[1.0], [1.0]]), t([1.0])), {}),
        (lambda M: M.LowRankMultivariateNormal, lambda t: (t([0.0, 0.0]), t([1.0, 1.0]), t([1.0, 1.0])), {}),
    ]
    for cls, args, kw in cases:
        msgs = []
        for M, t in ((D, tg.tensor), (TD, lambda v: torch.tensor(v, dtype=torch.float64))):
            with pytest.raises(ValueError) as e:
                cls(M)(*args(t), **{k: t(v) for k, v in kw.items()})
            msgs.append(str(e.value))
        head = "but found invalid values:"
        assert msgs[0].split(head)[0] == _norm(msgs[1]).split(head)[0]
    for M, t in ((D, tg.tensor), (TD, lambda v: torch.tensor(v, dtype=torch.float64))):
        with pytest.raises(RuntimeError) as e:
            M.MultivariateNormal(t([0.0, 0.0]), t([[1.0, 2.0], [2.0, 1.0]]), validate_args=False)
        msgs.append(str(e.value))
    assert msgs[-2] == msgs[-1]
    with pytest.raises(ValueError) as e1:
        D.kl_divergence(D.MultivariateNormal(tg.zeros(2), tg.eye(2)), D.MultivariateNormal(tg.zeros(3), tg.eye(3)))
    with pytest.raises(ValueError) as e2:
        TD.kl_divergence(TD.MultivariateNormal(torch.zeros(2), torch.eye(2)),
                         TD.MultivariateNormal(torch.zeros(3), torch.eye(3)))
    assert str(e1.value) == str(e2.value)


def test_matrix_constraints_against_torch():
    torch = pytest.importorskip("torch")
    TC = torch.distributions.constraints
    m = R([[[2.0, 0.5], [0.5, 1.0]], [[1.0, 2.0], [2.0, 1.0]], [[1.0, 0.0], [0.3, 2.0]], [[1.0, 0.0], [0.0, 0.0]]])
    for n in ("positive_definite", "positive_semidefinite", "lower_cholesky", "lower_triangular", "symmetric",
              "square"):
        for v in (m, m[:2], m[2:]):
            assert getattr(constraints, n).check(tg.tensor(v)).tolist() == \
                getattr(TC, n).check(torch.tensor(v)).tolist(), n
        assert repr(getattr(constraints, n)) == repr(getattr(TC, n))


def test_float32_parameters():
    loc = tg.tensor([0.5, -1.0], dtype=tg.float32, requires_grad=True)
    d = D.Normal(loc, 2.0)
    assert d.scale.dtype == tg.float32 and d.rsample((3,)).dtype == tg.float32
    lp = d.log_prob(tg.tensor([0.0, 0.0], dtype=tg.float32))
    assert lp.dtype == tg.float32
    np.testing.assert_allclose(lp.detach().numpy(), st.norm([0.5, -1.0], 2.0).logpdf(0.0), rtol=1e-6)
    lp.sum().backward()
    assert loc.grad.dtype == tg.float32
    np.testing.assert_allclose(loc.grad.numpy(), -R([0.5, -1.0]) / 4, rtol=1e-6)
    assert D.Categorical(logits=tg.zeros(3, dtype=tg.float32)).entropy().dtype == tg.float32
    assert D.Bernoulli(tg.tensor([0.3], dtype=tg.float32)).sample((2,)).dtype == tg.float32


def test_mvn_replay_with_new_inputs():
    def f(loc, cov, w, dg, x):
        kw = dict(validate_args=False)
        p = D.MultivariateNormal(loc, cov, **kw)
        q = D.LowRankMultivariateNormal(loc * 0.5, w, dg, **kw)
        return p.log_prob(x).sum() + q.log_prob(x).sum() + D.kl_divergence(p, q).sum()
    step = tg.compile(f)
    rng = np.random.default_rng(12)
    for _ in range(4):
        vals = [rng.normal(size=3), _spd(rng), rng.normal(size=(3, 2)), rng.uniform(0.5, 2, 3), rng.normal(size=(5, 3))]
        a = [tg.tensor(v, requires_grad=i < 4) for i, v in enumerate(vals)]
        b = [tg.tensor(v, requires_grad=i < 4) for i, v in enumerate(vals)]
        out = step(*a)
        out.backward()
        want = f(*b)
        want.backward()
        assert out.item() == pytest.approx(want.item(), rel=1e-13)
        for x, y in zip(a[:4], b[:4]):
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert step.stats.replays >= 2
