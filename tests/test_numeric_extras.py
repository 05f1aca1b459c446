"""cov, corrcoef, trapezoid / trapz, cumulative_trapezoid, histc, mvlgamma, norm,
igamma / igammac (special.gammainc / gammaincc), special.bessel_j0 / j1, F.conv1d /
conv2d (and nn.Conv1d / Conv2d), and the keyword forms x.reshape(shape=),
x.permute(dims=), x.pow(exponent=).

Values against NumPy / SciPy references (and literal ones), gradients by gradcheck and
gradgradcheck, the compiled and the interpreted reverse, replay through tg.compile and
tg.record with new inputs, and PyTorch's values, gradients and error messages where
torch is installed."""
import math
import warnings

import numpy as np
import pytest
import scipy.integrate as si
import scipy.special as sp

import tapegrad as tg
import tapegrad.nn.functional as F
from tapegrad.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(18)
X35 = RNG.standard_normal((3, 5))
FW = np.array([1, 2, 1, 3, 1])
AW = RNG.uniform(0.2, 1.5, 5)
Y24 = RNG.standard_normal((2, 4))
XS = np.array([0.0, 1.0, 3.0, 3.5])


def t(a, rg=False):
    return tg.tensor(np.asarray(a), requires_grad=rg)


def _raises(torch, tf, gf, exc=None):
    """tapegrad raises what PyTorch raises, with its message."""
    with pytest.raises(Exception) as te:
        tf()
    with pytest.raises(type(te.value) if exc is None else exc) as ge:
        gf()
    assert str(ge.value) == str(te.value)


# -- cov, corrcoef --------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"correction": 0}, {"fweights": FW}, {"aweights": AW},
                                {"fweights": FW, "aweights": AW, "correction": 2}])
def test_cov_against_numpy(kw):
    got = tg.cov(t(X35), **{k: (t(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}).numpy()
    want = np.cov(X35, ddof=kw.get("correction", 1), fweights=kw.get("fweights"), aweights=kw.get("aweights"))
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_cov_corrcoef_literals_and_shapes():
    np.testing.assert_allclose(tg.cov(tg.arange(6).reshape(2, 3)).numpy(), [[1.0, 1.0], [1.0, 1.0]])
    c = tg.cov(tg.arange(6))
    assert c.shape == () and c.item() == 3.5 and c.dtype == tg.float64
    assert tg.cov(t(X35).float()).dtype == tg.float32
    np.testing.assert_allclose(tg.corrcoef(t(X35)).numpy(), np.corrcoef(X35), rtol=1e-13)
    r = tg.corrcoef(t([[1.0, 2, 3], [1, 1, 1]])).numpy()
    assert r[0, 0] == 1.0 and np.isnan(r[0, 1]) and np.isnan(r[1, 1])
    assert tg.corrcoef(tg.arange(4)).item() == 1.0
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        assert np.isnan(tg.cov(tg.ones(3, 1)).numpy()).all()
    assert X35.T.shape == t(X35).t().shape and t(X35).cov().shape == (3, 3) and t(X35).corrcoef().shape == (3, 3)


def test_cov_corrcoef_gradients():
    x, a = t(X35, True), t(AW, True)
    assert gradcheck(lambda x, a: tg.cov(x, fweights=t(FW), aweights=a), (x, a))
    assert gradgradcheck(lambda x, a: tg.cov(x, fweights=t(FW), aweights=a), (x, a))
    assert gradcheck(tg.corrcoef, (x,)) and gradgradcheck(tg.corrcoef, (x,))


def test_cov_corrcoef_against_torch(reverse):
    torch = pytest.importorskip("torch")
    for f, tf in ((lambda x, a: tg.cov(x, fweights=t(FW), aweights=a, correction=2),
                   lambda x, a: torch.cov(x, fweights=torch.tensor(FW), aweights=a, correction=2)),
                  (lambda x, a: tg.corrcoef(x * a), lambda x, a: torch.corrcoef(x * a))):
        x, a = t(X35, True), t(AW, True)
        tx, ta = torch.tensor(X35, requires_grad=True), torch.tensor(AW, requires_grad=True)
        y, ty = f(x, a), tf(tx, ta)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
        w = RNG.standard_normal(y.shape)
        y.backward(t(w))
        ty.backward(torch.tensor(w))
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-11, atol=1e-14)
        np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-11, atol=1e-14)
    assert str(torch.cov(torch.tensor(X35).float(), aweights=torch.tensor(AW)).dtype) == "torch.float64"
    assert tg.cov(t(X35).float(), aweights=t(AW)).dtype == tg.float64
    assert tg.cov(t(X35).float(), fweights=t(FW)).dtype == tg.float32


def test_cov_errors_as_torch():
    torch = pytest.importorskip("torch")
    x, tx = t(X35), torch.tensor(X35)
    cases = [({"fweights": FW.astype(float)}), ({"aweights": FW}), ({"aweights": -AW}), ({"fweights": -FW}),
             ({"fweights": FW[:2]}), ({"aweights": AW[None]}), ({"aweights": 0 * AW})]
    for kw in cases:
        _raises(torch, lambda: torch.cov(tx, **{k: torch.tensor(v) for k, v in kw.items()}),
                lambda: tg.cov(x, **{k: t(v) for k, v in kw.items()}))
    _raises(torch, lambda: torch.cov(torch.zeros(2, 3, 4)), lambda: tg.cov(tg.zeros(2, 3, 4)))
    _raises(torch, lambda: torch.cov(torch.tensor([[True, False]])), lambda: tg.cov(t([[True, False]])))
    _raises(torch, lambda: torch.corrcoef(torch.zeros(2, 3, 4)), lambda: tg.corrcoef(tg.zeros(2, 3, 4)))


# -- trapezoid, cumulative_trapezoid ---------------------------------------------------
@pytest.mark.parametrize("args,kw", [((), {}), ((), {"dx": 0.5}), ((XS,), {}), ((), {"dim": 0}),
                                     ((XS[None],), {}), ((XS[:2],), {"dim": 0})])
def test_trapezoid_against_numpy_scipy(args, kw):
    targs = [t(a) for a in args]
    npkw = {"axis": kw.get("dim", -1)}
    if args:
        npkw["x"] = args[0] if args[0].ndim > 1 or kw.get("dim", -1) == -1 else args[0]
    if "dx" in kw:
        npkw["dx"] = kw["dx"]
    want = np.trapezoid(Y24, **npkw)
    np.testing.assert_allclose(tg.trapezoid(t(Y24), *targs, **kw).numpy(), want, rtol=1e-14)
    np.testing.assert_allclose(tg.trapz(t(Y24), *targs, **kw).numpy(), want, rtol=1e-14)
    np.testing.assert_allclose(tg.cumulative_trapezoid(t(Y24), *targs, **kw).numpy(),
                               si.cumulative_trapezoid(Y24, **npkw), rtol=1e-14)


def test_trapezoid_literals():
    y = tg.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(tg.trapezoid(y).numpy(), [2.0, 8.0])
    assert tg.trapezoid(y).dtype == tg.float64
    np.testing.assert_array_equal(tg.trapezoid(y, dx=2).numpy(), [4.0, 16.0])
    np.testing.assert_array_equal(tg.trapezoid(y, t([1, 2, 4])).numpy(), [3.5, 12.5])
    np.testing.assert_array_equal(tg.cumulative_trapezoid(y).numpy(), [[0.5, 2.0], [3.5, 8.0]])
    np.testing.assert_array_equal(tg.trapezoid(tg.zeros(2, 0)).numpy(), [0.0, 0.0])
    assert tg.cumulative_trapezoid(tg.zeros(2, 1)).shape == (2, 0)


def test_trapezoid_gradients_and_torch(reverse):
    y, x = t(Y24, True), t(np.cumsum(RNG.uniform(0.1, 1, 4)), True)
    for f in (lambda y, x: tg.trapezoid(y, x), lambda y, x: tg.cumulative_trapezoid(y * y, x),
              lambda y, x: tg.trapz(y, dx=0.3, dim=0) * x.sum(), lambda y, x: tg.cumulative_trapezoid(y, dx=0.7)):
        assert gradcheck(f, (y, x)) and gradgradcheck(f, (y, x))
    torch = pytest.importorskip("torch")
    ty, tx = torch.tensor(Y24, requires_grad=True), torch.tensor(x.detach().numpy(), requires_grad=True)
    for name in ("trapezoid", "cumulative_trapezoid"):
        y.grad = x.grad = ty.grad = tx.grad = None
        out, tout = getattr(tg, name)(y, x), getattr(torch, name)(ty, tx)
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-14)
        (out * out).sum().backward()
        (tout * tout).sum().backward()
        np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)


def test_trapezoid_errors_as_torch():
    torch = pytest.importorskip("torch")
    y, ty = t(Y24), torch.tensor(Y24)
    for name in ("trapezoid", "cumulative_trapezoid"):
        tf, gf = getattr(torch, name), getattr(tg, name)
        _raises(torch, lambda: tf(ty, torch.tensor([1.0, 2])), lambda: gf(y, t([1.0, 2])))
        _raises(torch, lambda: tf(ty, torch.tensor([1.0, 2]), dx=1.0), lambda: gf(y, t([1.0, 2]), dx=1.0))
        _raises(torch, lambda: tf(ty, dim=2), lambda: gf(y, dim=2))
        _raises(torch, lambda: tf(torch.tensor(3.0)), lambda: gf(t(3.0)))
    _raises(torch, lambda: torch.trapezoid(ty, dx=True), lambda: tg.trapezoid(y, dx=True))
    _raises(torch, lambda: torch.trapezoid(ty > 0), lambda: tg.trapezoid(y > 0))


# -- histc -----------------------------------------------------------------------------
def test_histc_against_numpy_and_literals():
    h = RNG.standard_normal(1000)
    for bins, lo, hi in ((100, 0, 0), (7, 0, 0), (5, -1, 1), (3, 0.5, 0.5)):
        got = tg.histc(t(h), bins=bins, min=lo, max=hi)
        rng = (h.min(), h.max()) if lo == hi else (lo, hi)
        np.testing.assert_array_equal(got.numpy(), np.histogram(h, bins, range=rng)[0])
        assert got.dtype == tg.float64 and not got.requires_grad
    np.testing.assert_array_equal(tg.histc(t([1.0, 2, 1, 4, 5.5, 7]), 4, 0, 3).numpy(), [0, 2, 1, 0])
    np.testing.assert_array_equal(tg.histc(t([2.0, 2]), bins=4).numpy(), [0, 0, 2, 0])
    np.testing.assert_array_equal(tg.histc(tg.zeros(0), bins=3).numpy(), [0, 0, 0])
    x = t([1.0, 2, 1, 4], True)
    assert tg.histc(x, 2).grad_fn is None and x.histc(bins=2).dtype == tg.float64
    assert tg.histc(x.float(), 3).dtype == tg.float32


def test_histc_against_torch():
    torch = pytest.importorskip("torch")
    h = RNG.standard_normal(500)
    for kw in ({}, {"bins": 7}, {"bins": 5, "min": -1, "max": 1}, {"bins": 6, "min": -0.3, "max": 0.9}):
        np.testing.assert_array_equal(tg.histc(t(h), **kw).numpy(), torch.histc(torch.tensor(h), **kw).numpy())
        np.testing.assert_array_equal(tg.histc(t(h).float(), **kw).numpy(),
                                      torch.histc(torch.tensor(h).float(), **kw).numpy())
    for args, kw in ((([1, 2],), {}), (([1.0, 2],), {"bins": 0}), (([1.0, 2],), {"bins": 4, "min": 3, "max": 1}),
                     (([1.0, math.nan],), {"bins": 4}), (([1.0, math.inf],), {"bins": 4}),
                     (([1.0, 2],), {"bins": 2.5})):
        _raises(torch, lambda: torch.histc(torch.tensor(*args), **kw), lambda: tg.histc(t(*args), **kw))


# -- mvlgamma --------------------------------------------------------------------------
def test_mvlgamma(reverse):
    a = np.array([2.5, 3.0, 7.25])
    for p in (1, 2, 3):
        np.testing.assert_allclose(tg.mvlgamma(t(a), p).numpy(), sp.multigammaln(a, p), rtol=1e-14)
    np.testing.assert_allclose(t(a).mvlgamma(p=2).numpy(), sp.multigammaln(a, 2), rtol=1e-14)
    x = t(a, True)
    tg.mvlgamma(x, 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), sp.psi(a) + sp.psi(a - 0.5) + sp.psi(a - 1), rtol=1e-14)
    assert gradcheck(lambda x: tg.mvlgamma(x, 3), (x,)) and gradgradcheck(lambda x: tg.mvlgamma(x, 3), (x,))
    assert tg.mvlgamma(tg.tensor([2, 3]), 1).dtype == tg.float64


def test_mvlgamma_against_torch():
    torch = pytest.importorskip("torch")
    a = np.array([0.7, 2.5, 3.0])
    np.testing.assert_allclose(tg.mvlgamma(t(a), 3).numpy(), torch.mvlgamma(torch.tensor(a), 3).numpy(), rtol=1e-14)
    _raises(torch, lambda: torch.mvlgamma(torch.tensor(a), 0), lambda: tg.mvlgamma(t(a), 0))
    _raises(torch, lambda: torch.mvlgamma(2.0, 1), lambda: tg.mvlgamma(2.0, 1))


# -- norm ------------------------------------------------------------------------------
NORM_X = RNG.standard_normal((3, 4))
NORM_X[0, 1] = 0.0
PS = ["fro", 1, 2, 3, 0.5, -1, 0, math.inf, -math.inf]


@pytest.mark.parametrize("p", PS)
def test_norm_against_numpy(p):
    order = 2 if p == "fro" else p
    for dim in (None, 1, (0, 1)):
        for keep in (False, True):
            got = tg.norm(t(NORM_X), p, dim, keep)
            axis = tuple(range(2)) if dim is None else dim
            with np.errstate(divide="ignore"):
                want = np.linalg.norm(NORM_X.reshape(-1) if axis == (0, 1) else NORM_X, order,
                                      None if axis == (0, 1) else axis, keep and axis != (0, 1))
            if keep and axis == (0, 1):
                want = np.reshape(want, (1, 1))
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)
            assert t(NORM_X).norm(p, dim, keep).shape == got.shape


@pytest.mark.parametrize("p", [p for p in PS if p != 0])
def test_norm_gradients(p, reverse):
    x = t(NORM_X + 0.1 * (NORM_X == 0), True)
    assert gradcheck(lambda x: tg.norm(x, p, 1), (x,))
    if p == "fro" or not math.isinf(p):
        assert gradgradcheck(lambda x: tg.norm(x, p, 1), (x,))


def test_norm_against_torch(reverse):
    torch = pytest.importorskip("torch")
    zero = np.zeros(3)
    for p in PS:
        for a in (NORM_X, zero):
            x, tx = t(a, True), torch.tensor(a, requires_grad=True)
            y, ty = tg.norm(x, p), torch.norm(tx, p)
            np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-14)
            y.backward()
            ty.backward()
            want = tx.grad.numpy() if tx.grad is not None else np.zeros_like(a)     # (p=0: no gradient)
            np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-13, err_msg=str(p))
    assert tg.norm(t(NORM_X).float()).dtype == tg.float32
    assert tg.norm(t(NORM_X).float(), dtype=tg.float64).dtype == tg.float64
    for args, kw in (((), {"p": "abc"}), ((), {}), ((), {"dtype": torch.int64}), ((), {"dim": 5}),
                     ((math.inf,), {}), ((math.inf,), {"dim": 1})):
        for a in (NORM_X, np.arange(3), np.zeros((2, 0))):
            tkw = dict(kw)
            gkw = dict(kw, dtype=tg.int64) if "dtype" in kw else kw
            try:
                torch.norm(torch.tensor(a), *args, **tkw)
            except Exception:
                _raises(torch, lambda: torch.norm(torch.tensor(a), *args, **tkw),
                        lambda: tg.norm(t(a), *args, **gkw))
    _raises(torch, lambda: torch.zeros(2, 3, 4).norm("fro", dim=(0, 1, 2)),
            lambda: tg.zeros(2, 3, 4).norm("fro", dim=(0, 1, 2)))


# -- igamma, igammac, gammainc, gammaincc ------------------------------------------------
A_G = np.array([0.5, 1.5, 2.0, 3.0, 7.5])
X_G = np.array([0.3, 1.5, 0.8, 4.0, 6.0])


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma(name, reverse):
    f = getattr(tg.special, name)
    other = tg.igamma if name == "gammainc" else tg.igammac
    a, x = t(A_G), t(X_G, True)
    y = f(a, x)
    np.testing.assert_allclose(y.detach().numpy(), getattr(sp, name)(A_G, X_G), rtol=1e-15)
    np.testing.assert_array_equal(other(a, x).detach().numpy(), y.detach().numpy())
    np.testing.assert_array_equal(getattr(a, other.__name__)(x).detach().numpy(), y.detach().numpy())
    assert y.grad_fn.name() == ("IgammaBackward0" if name == "gammainc" else "IgammacBackward0")
    y.sum().backward()
    dens = np.exp((A_G - 1) * np.log(X_G) - X_G - sp.gammaln(A_G))
    np.testing.assert_allclose(x.grad.numpy(), dens if name == "gammainc" else -dens, rtol=1e-14)
    assert gradcheck(lambda x: f(a, x), (t(X_G, True),)) and gradgradcheck(lambda x: f(a, x), (t(X_G, True),))
    assert f(a.float(), x.float().detach()).dtype == tg.float32
    z = t(A_G)
    assert getattr(z, other.__name__ + "_")(t(X_G)) is z
    np.testing.assert_array_equal(z.numpy(), y.detach().numpy())


def test_incomplete_gamma_against_torch(reverse):
    torch = pytest.importorskip("torch")
    for name in ("igamma", "igammac"):
        x, tx = t(X_G, True), torch.tensor(X_G, requires_grad=True)
        y, ty = getattr(tg, name)(t(A_G), x), getattr(torch, name)(torch.tensor(A_G), tx)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-13)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)
        with pytest.raises(NotImplementedError) as te:
            getattr(torch, name)(torch.tensor(A_G, requires_grad=True), tx).sum().backward()
        with pytest.raises(NotImplementedError, match="^%s$" % str(te.value).replace(".", r"\.")):
            getattr(tg, name)(t(A_G, True), x)
        with tg.no_grad():
            getattr(tg, name)(t(A_G, True), x)          # (no derivative asked for)
        _raises(torch, lambda: getattr(torch, name)(torch.tensor([1, 2]), torch.tensor([1, 2])),
                lambda: getattr(tg, name)(t([1, 2]), t([1, 2])))
        _raises(torch, lambda: getattr(torch, name)(torch.tensor([1.0]), 2.0),
                lambda: getattr(tg, name)(t([1.0]), 2.0))
    _raises(torch, lambda: torch.special.gammainc(torch.tensor([1.0]), 2.0),
            lambda: tg.special.gammainc(t([1.0]), 2.0))
    edge_a, edge_x = np.array([0.0, -1, 1, 0, math.inf, 2]), np.array([0.0, 1, 0, 1, 1, math.inf])
    for name in ("gammainc", "gammaincc"):
        np.testing.assert_array_equal(getattr(tg.special, name)(t(edge_a), t(edge_x)).numpy(),
                                      getattr(torch.special, name)(torch.tensor(edge_a), torch.tensor(edge_x)).numpy())


# -- bessel_j0, bessel_j1 --------------------------------------------------------------
Z_J = np.array([-7.5, -2.0, -0.3, 0.0, 0.4, 2.4048, 5.0, 30.0])


def test_bessel(reverse):
    for f, value, deriv in ((tg.special.bessel_j0, sp.j0, lambda z: -sp.j1(z)),
                            (tg.special.bessel_j1, sp.j1, lambda z: sp.jvp(1, z))):
        x = t(Z_J, True)
        y = f(x)
        np.testing.assert_allclose(y.detach().numpy(), value(Z_J), rtol=1e-15)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), deriv(Z_J), rtol=1e-13, atol=1e-16)
        assert gradcheck(f, (t(Z_J[Z_J != 0], True),)) and gradgradcheck(f, (t(Z_J[Z_J != 0], True),))
    assert tg.special.bessel_j1(t(0.0, True)).grad_fn is not None
    assert tg.special.bessel_j0(tg.tensor([1, 2])).dtype == tg.float64


def test_bessel_against_torch():
    torch = pytest.importorskip("torch")
    for name in ("bessel_j0", "bessel_j1"):
        # (PyTorch's own polynomial approximations, off SciPy's by up to 6e-8 relative beyond |x| = 5;
        # SciPy's match the true J0(7.5) = 0.26633965788037842 to the last digit)
        np.testing.assert_allclose(getattr(tg.special, name)(t(Z_J)).numpy(),
                                   getattr(torch.special, name)(torch.tensor(Z_J)).numpy(), rtol=1e-7, atol=1e-15)
        _raises(torch, lambda: getattr(torch.special, name)(2.0), lambda: getattr(tg.special, name)(2.0))
        # (PyTorch defines no derivative: its result does not require grad; tapegrad's has J0' = -J1, J1')
        assert not getattr(torch.special, name)(torch.tensor(Z_J, requires_grad=True)).requires_grad


# -- conv1d, conv2d ----------------------------------------------------------------------
def _conv_ref(x, w, b, stride, pads, dilation, groups):
    """The cross-correlation by loops (NumPy), x batched, pads per dim as (left, right)."""
    nd = w.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    n, cin = x.shape[:2]
    cout, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(x.shape[2 + i] - dilation[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    out = np.zeros((n, cout) + tuple(outs))
    for o in range(cout):
        g = o // (cout // groups)
        for pos in np.ndindex(*outs):
            for k in np.ndindex(*ks):
                idx = tuple(pos[i] * stride[i] + k[i] * dilation[i] for i in range(nd))
                out[(slice(None), o) + pos] += (x[(slice(None), slice(g * cg, (g + 1) * cg)) + idx]
                                                * w[(o, slice(None)) + k]).sum(1)
    return out + (0 if b is None else b.reshape((1, cout) + (1,) * nd))


CONV_CASES = [
    ((2, 4, 10), (6, 2, 3), dict(groups=2)),
    ((4, 10), (6, 4, 3), dict(padding="same")),
    ((2, 4, 11), (6, 4, 4), dict(padding="same", dilation=3)),
    ((2, 4, 11), (8, 1, 3), dict(padding=2, stride=3, dilation=2, groups=4)),
    ((1, 3, 9), (2, 3, 2), dict(padding="valid", stride=(2,))),
    ((2, 4, 7, 6), (6, 2, 3, 2), dict(groups=2, padding=(1, 0), stride=(2, 1))),
    ((4, 7, 6), (6, 4, 3, 3), dict(padding="same", dilation=(1, 2))),
]


def _pads(kw, ks, nd):
    p = kw.get("padding", 0)
    d = kw.get("dilation", 1)
    d = (d,) * nd if isinstance(d, int) else tuple(d) * (nd // len(d))
    if p == "same":
        return [(d[i] * (ks[i] - 1) // 2, d[i] * (ks[i] - 1) - d[i] * (ks[i] - 1) // 2) for i in range(nd)]
    if p == "valid":
        return [(0, 0)] * nd
    p = (p,) * nd if isinstance(p, int) else tuple(p) * (nd // len(p))
    return [(q, q) for q in p]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_against_loops(case):
    xs, ws, kw = CONV_CASES[case]
    nd = len(ws) - 2
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal(ws), RNG.standard_normal(ws[0])
    conv = F.conv1d if nd == 1 else F.conv2d
    got = conv(t(x), t(w), t(b), **kw).numpy()

    def tup(v):
        return (v,) * nd if isinstance(v, int) else tuple(v) * (nd // len(v))
    xb = x if len(xs) == nd + 2 else x[None]
    want = _conv_ref(xb, w, b, tup(kw.get("stride", 1)), _pads(kw, ws[2:], nd), tup(kw.get("dilation", 1)),
                     kw.get("groups", 1))
    np.testing.assert_allclose(got, want if len(xs) == nd + 2 else want[0], rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("case", [0, 3, 5])
def test_conv_gradients(case, reverse):
    xs, ws, kw = CONV_CASES[case]
    nd = len(ws) - 2
    conv = F.conv1d if nd == 1 else F.conv2d
    x, w, b = t(RNG.standard_normal(xs), True), t(RNG.standard_normal(ws), True), t(RNG.standard_normal(ws[0]), True)
    assert gradcheck(lambda x, w, b: conv(x, w, b, **kw), (x, w, b))
    assert gradgradcheck(lambda x, w, b: conv(x, w, b, **kw), (x, w, b))


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_against_torch(case, reverse):
    torch = pytest.importorskip("torch")
    xs, ws, kw = CONV_CASES[case]
    nd = len(ws) - 2
    arrays = [RNG.standard_normal(s) for s in (xs, ws, (ws[0],))]
    ours = [t(a, True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty = getattr(torch.nn.functional, "conv%dd" % nd)(*theirs, **kw)
    y = getattr(F, "conv%dd" % nd)(*ours, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-13)
    c = RNG.standard_normal(ty.shape)
    (y * t(c)).sum().backward()
    (ty * torch.tensor(c)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_conv_errors_as_torch():
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    x, w = RNG.standard_normal((2, 4, 10)), RNG.standard_normal((6, 2, 3))
    cases = [((x, w), {}), ((x[0, 0], w), {"groups": 2}), ((x, w), {"groups": 3}), ((x, w[..., None]), {"groups": 2}),
             ((x, w), {"padding": "same", "stride": 2, "groups": 2}), ((x, w), {"padding": "foo", "groups": 2}),
             ((x, w), {"padding": -1, "groups": 2}), ((x, w), {"stride": 0, "groups": 2}),
             ((x, w), {"dilation": 0, "groups": 2}), ((x, RNG.standard_normal((6, 2, 20))), {"groups": 2}),
             ((x, w, RNG.standard_normal(5)), {"groups": 2}), ((x, w), {"groups": 0}),
             ((x, w), {"padding": (1, 2), "groups": 2}), ((x, RNG.standard_normal((5, 2, 4))), {"groups": 2})]
    for args, kw in cases:
        _raises(torch, lambda: TF.conv1d(*[torch.tensor(a) for a in args], **kw),
                lambda: F.conv1d(*[t(a) for a in args], **kw))
    _raises(torch, lambda: TF.conv1d(torch.tensor(x).float(), torch.tensor(w), groups=2),
            lambda: F.conv1d(t(x).float(), t(w), groups=2))
    _raises(torch, lambda: TF.conv1d(torch.tensor(x), torch.tensor(w), torch.tensor(np.ones(5)).float(), groups=2),
            lambda: F.conv1d(t(x), t(w), t(np.ones(5)).float(), groups=2))
    _raises(torch, lambda: TF.conv2d(torch.randn(1, 4, 5, dtype=torch.float64), torch.tensor(np.zeros((6, 4, 3, 3)))),
            lambda: F.conv2d(tg.randn(1, 4, 5), t(np.zeros((6, 4, 3, 3)))))


def test_conv_modules_against_torch():
    torch = pytest.importorskip("torch")
    for ours, theirs, xs in ((tg.nn.Conv1d(4, 6, 3, padding=1, groups=2, padding_mode="circular"),
                              torch.nn.Conv1d(4, 6, 3, padding=1, groups=2, padding_mode="circular"), (2, 4, 9)),
                             (tg.nn.Conv2d(3, 2, (3, 2), padding="same", bias=False),
                              torch.nn.Conv2d(3, 2, (3, 2), padding="same", bias=False), (3, 5, 6)),
                             (tg.nn.Conv2d(2, 4, 3, stride=2, dilation=(1, 2), padding_mode="reflect", padding=1),
                              torch.nn.Conv2d(2, 4, 3, stride=2, dilation=(1, 2), padding_mode="reflect", padding=1),
                              (1, 2, 7, 8))):
        assert repr(ours) == repr(theirs)
        theirs = theirs.double()
        with torch.no_grad():
            for name, p in theirs.named_parameters():
                p.copy_(torch.tensor(dict(ours.named_parameters())[name].detach().numpy()))
        x = RNG.standard_normal(xs)
        np.testing.assert_allclose(ours(t(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-12, atol=1e-13)
        bound = 1 / math.sqrt(ours.weight.shape[1] * np.prod(ours.weight.shape[2:]))
        assert np.abs(ours.weight.detach().numpy()).max() <= bound
    for kw, exc in (({"groups": 4}, ValueError), ({"padding": "foo"}, ValueError),
                    ({"padding": "same", "stride": 2}, ValueError)):
        _raises(torch, lambda: torch.nn.Conv1d(6, 6, 3, **kw) if "groups" not in kw else torch.nn.Conv1d(6, 3, 3, **kw),
                lambda: tg.nn.Conv1d(6, 6, 3, **kw) if "groups" not in kw else tg.nn.Conv1d(6, 3, 3, **kw), exc)
    with pytest.raises(ValueError) as te:
        torch.nn.Conv1d(6, 6, 3, padding_mode="x")
    with pytest.raises(ValueError) as ge:       # (PyTorch prints a set: the order of its names varies)
        tg.nn.Conv1d(6, 6, 3, padding_mode="x")
    assert sorted(str(ge.value)) == sorted(str(te.value))


# -- replay ------------------------------------------------------------------------------
def _replay_function(x, y):
    c = tg.cov(x, aweights=y * y + 0.1)
    return (c.sum() + tg.corrcoef(x).sum() + tg.trapezoid(x, y.cumsum(0)).sum()
            + tg.cumulative_trapezoid(x, dx=0.5).sum() + tg.norm(x, 3) + x.norm(dim=1).sum()
            + tg.mvlgamma(y * y + 2, 2).sum() + tg.special.gammainc(t(np.full(5, 1.5)), y * y + 0.1).sum()
            + tg.special.bessel_j1(y).sum() + tg.special.bessel_j0(y).sum()
            + F.conv1d(x[None], y.reshape(1, 1, 5).expand(2, 3, 5) * 0.3, padding=2).sum())


@pytest.mark.parametrize("how", ["compile", "record"])
def test_replay_with_new_inputs(how):
    rng = np.random.default_rng(5)
    xv, yv = rng.standard_normal((3, 5)), rng.standard_normal(5)
    if how == "compile":
        step = tg.compile(_replay_function)
    else:
        tape = tg.record(_replay_function, xv, yv)
    for _ in range(3):
        xv, yv = rng.standard_normal((3, 5)), rng.standard_normal(5)
        x, y = t(xv, True), t(yv, True)
        x2, y2 = t(xv, True), t(yv, True)
        want = _replay_function(x2, y2)
        want.backward()
        if how == "compile":
            out = step(x, y)
            out.backward()
            gx, gy = x.grad.numpy(), y.grad.numpy()
        else:
            out, (gx, gy) = tape.value_and_grad(xv, yv)
        assert float(np.asarray(out.item() if hasattr(out, "item") else out)) == pytest.approx(want.item(), rel=1e-12)
        np.testing.assert_allclose(gx, x2.grad.numpy(), rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(gy, y2.grad.numpy(), rtol=1e-11, atol=1e-13)
    if how == "compile":
        assert step.stats.replays >= 2


def test_create_graph_second_derivative(reverse):
    x = t(X_G, True)
    (g,) = tg.autograd.grad(tg.special.gammainc(t(A_G), x).sum(), x, create_graph=True)
    (h,) = tg.autograd.grad(g.sum(), x)
    dens = np.exp((A_G - 1) * np.log(X_G) - X_G - sp.gammaln(A_G))
    np.testing.assert_allclose(h.numpy(), dens * ((A_G - 1) / X_G - 1), rtol=1e-13)
    z = t(Z_J[Z_J != 0], True)
    (g,) = tg.autograd.grad(tg.special.bessel_j0(z).sum(), z, create_graph=True)
    (h,) = tg.autograd.grad(g.sum(), z)
    zv = Z_J[Z_J != 0]
    np.testing.assert_allclose(h.numpy(), -(sp.j0(zv) - sp.j1(zv) / zv), rtol=1e-13, atol=1e-16)


# -- keyword forms -----------------------------------------------------------------------
def test_keyword_forms():
    x = tg.arange(24.0).reshape(2, 3, 4)
    assert x.reshape(shape=(12, 2)).shape == (12, 2)
    assert tg.reshape(x, shape=(24,)).shape == (24,)
    assert x.permute(dims=(2, 1, 0)).shape == (4, 3, 2)
    assert tg.permute(x, dims=(2, 0, 1)).shape == (4, 2, 3)
    np.testing.assert_array_equal(x.pow(exponent=2).numpy(), np.arange(24.0).reshape(2, 3, 4) ** 2)
    np.testing.assert_array_equal(tg.pow(input=x, exponent=t(2.0)).numpy(), x.numpy() ** 2)
    with pytest.raises(TypeError, match="multiple values for argument 'shape'"):
        x.reshape(2, shape=(12,))
    with pytest.raises(TypeError, match="unexpected keyword argument 'size'"):
        x.permute(size=(2, 1, 0))
    y = x.clone()
    y.pow_(exponent=2)
    np.testing.assert_array_equal(y.numpy(), x.numpy() ** 2)


def test_keyword_forms_against_torch():
    torch = pytest.importorskip("torch")
    tx, x = torch.arange(24.0).reshape(2, 3, 4), tg.arange(24.0).reshape(2, 3, 4)
    assert tuple(tx.reshape(shape=(12, 2)).shape) == x.reshape(shape=(12, 2)).shape
    assert tuple(tx.permute(dims=(2, 1, 0)).shape) == x.permute(dims=(2, 1, 0)).shape
    np.testing.assert_array_equal(tx.pow(exponent=3).numpy(), x.pow(exponent=3).numpy())
    _raises(torch, lambda: tx.reshape(2, shape=(12,)), lambda: x.reshape(2, shape=(12,)))


def test_nuclear_norm():
    x = tg.tensor([[3.0, 0.0], [0.0, -4.0]], requires_grad=True)
    y = tg.norm(x, "nuc")
    assert y.item() == pytest.approx(7.0, rel=1e-15)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [[1.0, 0.0], [0.0, -1.0]], atol=1e-15)     # U V^T
    a = np.random.default_rng(2).standard_normal((2, 3, 4))
    got = tg.norm(tg.tensor(a), "nuc", dim=(1, 2)).numpy()
    np.testing.assert_allclose(got, [np.linalg.norm(m, "nuc") for m in a], rtol=1e-14)
    torch = pytest.importorskip("torch")
    t = torch.tensor(a[0], requires_grad=True)
    u = tg.tensor(a[0], requires_grad=True)
    torch.norm(t, "nuc").backward()
    tg.norm(u, "nuc").backward()
    np.testing.assert_allclose(u.grad.numpy(), t.grad.numpy(), rtol=1e-13, atol=1e-15)
