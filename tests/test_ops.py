"""Every operation against central finite differences (gradcheck), in several
shapes, and against PyTorch's values where PyTorch is installed."""
import numpy as np
import pytest

import tapegrad as tg

rng = np.random.default_rng(0)


@pytest.fixture(autouse=True, params=["arena", "by-address"])
def storage(request, monkeypatch):
    """Run every test twice: small slots packed in the arena (the default for small
    arrays) and every slot passed by address with an uninitialised adjoint (the path
    large arrays take)."""
    if request.param == "by-address":
        from tapegrad.autograd import engine
        monkeypatch.setattr(engine, "BIG", 1)
    return request.param


def leaf(*shape, lo=-2.0, hi=2.0, positive=False, away=0.0):
    a = rng.uniform(lo, hi, size=shape)
    if positive:
        a = np.abs(a) + 0.5
    if away:
        a = np.where(np.abs(a) < away, a + np.sign(a + 1e-9) * away * 2, a)
    return tg.tensor(a, requires_grad=True)


def _functional(x):
    """tg.nn.functional, or torch's for a torch tensor (softplus is no Tensor method)."""
    if isinstance(x, tg.Tensor):
        return tg.nn.functional
    import torch
    return torch.nn.functional


def _special(x):
    """tg.special, or torch.special for a torch tensor."""
    if isinstance(x, tg.Tensor):
        return tg.special
    import torch
    return torch.special


def _full_like(x, v):
    """A constant of x's shape (tg's or torch's)."""
    if isinstance(x, tg.Tensor):
        return tg.full_like(x, v)
    import torch
    return torch.full_like(x, v)


UNARY = {
    "neg": (lambda x: -x, {}),
    "abs": (tg.abs, dict(away=0.1)),
    "exp": (tg.exp, {}),
    "log": (tg.log, dict(positive=True)),
    "log1p": (tg.log1p, dict(positive=True)),
    "expm1": (tg.expm1, {}),
    "sqrt": (tg.sqrt, dict(positive=True)),
    "sin": (tg.sin, {}),
    "cos": (tg.cos, {}),
    "tan": (tg.tan, dict(lo=-1.0, hi=1.0)),
    "tanh": (tg.tanh, {}),
    "sigmoid": (tg.sigmoid, {}),
    "relu": (tg.relu, dict(away=0.1)),
    "sign": (tg.sign, dict(away=0.1)),
    "floor": (tg.floor, dict(away=0.1)),
    "round": (tg.round, dict(away=0.1)),
    "clamp": (lambda x: x.clamp(-0.5, 0.7), {}),
    "clamp_min": (lambda x: x.clamp(min=0.1), {}),
    "add_s": (lambda x: x + 3.0, {}),
    "radd_s": (lambda x: 3.0 + x, {}),
    "sub_s": (lambda x: x - 3.0, {}),
    "rsub_s": (lambda x: 3.0 - x, {}),
    "mul_s": (lambda x: x * 2.5, {}),
    "rmul_s": (lambda x: 2.5 * x, {}),
    "div_s": (lambda x: x / 4.0, {}),
    "rdiv_s": (lambda x: 4.0 / x, dict(positive=True)),
    "pow2": (lambda x: x ** 2, {}),
    "pow3": (lambda x: x ** 3, {}),
    "pow_half": (lambda x: x ** 0.5, dict(positive=True)),
    "pow4": (lambda x: x ** 4, {}),
    "pow_m3": (lambda x: x ** -3, dict(away=0.5)),
    "pow_m7": (lambda x: x ** -7.0, dict(positive=True)),
    "rpow": (lambda x: 2.0 ** x, {}),
    "clone": (lambda x: x.clone(), {}),
    "softmax0": (lambda x: x.softmax(0), {}),
    "softmax-1": (lambda x: x.softmax(-1), {}),
    "log_softmax": (lambda x: x.log_softmax(-1), {}),
    # (methods: the same lambda runs on torch's tensors in test_unary_matches_torch)
    "asin": (lambda x: x.asin(), dict(lo=-0.9, hi=0.9)),
    "acos": (lambda x: x.acos(), dict(lo=-0.9, hi=0.9)),
    "atan": (lambda x: x.atan(), {}),
    "sinh": (lambda x: x.sinh(), {}),
    "cosh": (lambda x: x.cosh(), {}),
    "asinh": (lambda x: x.asinh(), {}),
    "acosh": (lambda x: x.acosh(), dict(lo=1.2, hi=3.0)),
    "atanh": (lambda x: x.atanh(), dict(lo=-0.9, hi=0.9)),
    "log2": (lambda x: x.log2(), dict(positive=True)),
    "log10": (lambda x: x.log10(), dict(positive=True)),
    "exp2": (lambda x: x.exp2(), {}),
    "square": (lambda x: x.square(), {}),
    "reciprocal": (lambda x: x.reciprocal(), dict(away=0.3)),
    "rsqrt": (lambda x: x.rsqrt(), dict(positive=True)),
    "ceil": (lambda x: x.ceil(), dict(lo=1.1, hi=1.9)),
    "trunc": (lambda x: x.trunc(), dict(lo=-1.9, hi=-1.1)),
    "frac": (lambda x: x.frac(), dict(lo=-0.9, hi=-0.1)),
    "logit": (lambda x: x.logit(), dict(lo=0.1, hi=0.9)),
    "sinc": (lambda x: x.sinc(), dict(away=0.1)),
    "softplus": (lambda x: _functional(x).softplus(x, 2.0, 1.0), {}),
    "erf": (lambda x: x.erf(), {}),
    "erfc": (lambda x: x.erfc(), {}),
    "erfinv": (lambda x: x.erfinv(), dict(lo=-0.9, hi=0.9)),
    "lgamma": (lambda x: x.lgamma(), dict(positive=True)),
    "digamma": (lambda x: x.digamma(), dict(positive=True)),
    "polygamma": (lambda x: x.polygamma(2), dict(positive=True)),
    "i0": (lambda x: x.i0(), {}),
    "i0e": (lambda x: _special(x).i0e(x), dict(away=0.1)),
    "i1": (lambda x: _special(x).i1(x), {}),
    "i1e": (lambda x: _special(x).i1e(x), dict(away=0.1)),
    "ndtr": (lambda x: _special(x).ndtr(x), {}),
    "ndtri": (lambda x: _special(x).ndtri(x), dict(lo=0.1, hi=0.9)),
    "log_ndtr": (lambda x: _special(x).log_ndtr(x), {}),
    "entr": (lambda x: _special(x).entr(x), dict(positive=True)),
    "bessel_j0": (lambda x: _special(x).bessel_j0(x), {}),
    "bessel_j1": (lambda x: _special(x).bessel_j1(x), {}),
}
# (PyTorch defines no derivative of these: its comparison is of the values)
TORCH_NO_GRADIENT = {"bessel_j0", "bessel_j1"}
SHAPES = [(), (5,), (3, 4)]


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_unary_gradcheck(name, shape):
    fn, kw = UNARY[name]
    x = leaf(*shape, **kw)
    assert tg.autograd.gradcheck(fn, (x,))


BINARY = {
    "add": (lambda a, b: a + b, {}),
    "sub": (lambda a, b: a - b, {}),
    "mul": (lambda a, b: a * b, {}),
    "div": (lambda a, b: a / b, dict(positive=True)),
    "pow": (lambda a, b: a ** b, dict(positive=True)),
    "maximum": (tg.maximum, {}),
    "minimum": (tg.minimum, {}),
    "where": (lambda a, b: tg.where(a > 0, a, b), {}),
    "atan2": (tg.atan2, dict(away=0.3)),
    "div_trunc": (lambda a, b: tg.div(a, b, rounding_mode="trunc"), dict(positive=True)),
    "div_floor": (lambda a, b: tg.div(a, b, rounding_mode="floor"), dict(positive=True)),
    "hypot": (tg.hypot, {}),
    "remainder": (lambda a, b: a % b, dict(positive=True)),
    "fmod": (tg.fmod, dict(positive=True)),
    "copysign": (tg.copysign, dict(away=0.3)),
    "xlogy": (tg.xlogy, dict(positive=True)),
    "xlog1py": (lambda a, b: _special(a).xlog1py(a, b), dict(positive=True)),
    # (differentiable in the second argument only, as PyTorch: the first is a constant here)
    "gammainc": (lambda a, b: _special(a).gammainc(_full_like(a, 1.5), b) + 0 * a, dict(positive=True)),
    "gammaincc": (lambda a, b: _special(a).gammaincc(_full_like(a, 2.5), b) + 0 * a, dict(positive=True)),
    # (an op of its own, on probabilities of one shape: both differentiable)
    "binary_cross_entropy": (lambda a, b: _functional(a).binary_cross_entropy(
        *[t.sigmoid().expand(np.broadcast_shapes(a.shape, b.shape)) for t in (a, b)], reduction="none"), {}),
    "ldexp": (lambda a, b: a.ldexp(b), {}),
}
PAIRS = [((), ()), ((4,), (4,)), ((3, 4), (3, 4)), ((3, 1), (1, 4)), ((4,), (3, 4)), ((3, 4), ()),
         ((2, 3, 4), (3, 1)), ((1,), (3,))]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", PAIRS, ids=str)
def test_binary_gradcheck(name, shapes):
    fn, kw = BINARY[name]
    a, b = leaf(*shapes[0], **kw), leaf(*shapes[1], **kw)
    assert tg.autograd.gradcheck(fn, (a, b))


REDUCTIONS = {
    "sum": lambda x: x.sum(),
    "sum0": lambda x: x.sum(0),
    "sum-1k": lambda x: x.sum(-1, keepdim=True),
    "sum01": lambda x: x.sum((0, 1)),
    "mean": lambda x: x.mean(),
    "mean1": lambda x: x.mean(1),
    "prod": lambda x: x.prod(),
    "prod1": lambda x: x.prod(1),
    "var": lambda x: x.var(),
    "var1": lambda x: x.var(1, keepdim=True),
    "std": lambda x: x.std(),
    "std0": lambda x: x.std(0, unbiased=False),
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "max1": lambda x: x.max(1)[0],
    "min0k": lambda x: x.min(0, keepdim=True).values,
    "amax": lambda x: x.amax(1),
    "logsumexp": lambda x: tg.logsumexp(x, 1),
    "logsumexp01": lambda x: tg.logsumexp(x, (0, 2)),
    "cumsum1": lambda x: x.cumsum(1),
    "cumsum-1": lambda x: x.cumsum(-1),
    "cumprod1": lambda x: x.cumprod(1),
    "cumprod-1": lambda x: x.cumprod(-1),
    "logcumsumexp0": lambda x: x.logcumsumexp(0),
    "logcumsumexp2": lambda x: x.logcumsumexp(2),
    "sort1": lambda x: x.sort(1)[0],
    "topk2": lambda x: x.topk(2)[0],
    "kthvalue0": lambda x: x.kthvalue(2, 0).values,
    "median1": lambda x: x.median(1)[0],
    "median": lambda x: x.median(),
    "cummax2": lambda x: x.cummax(2)[0],
    "cummin0": lambda x: x.cummin(0).values,
    "quantile1": lambda x: x.quantile(0.3, dim=1),
    "diff1": lambda x: x.diff(dim=1),
    "nansum1": lambda x: x.nansum(1),
    "nanmean02": lambda x: x.nanmean((0, 2), keepdim=True),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_gradcheck(name):
    x = leaf(2, 3, 4)
    assert tg.autograd.gradcheck(REDUCTIONS[name], (x,))


SHAPE_OPS = {
    "reshape": lambda x: x.reshape(4, 6) * 2,
    "view": lambda x: x.view(-1) * 2,
    "flatten": lambda x: x.flatten(1),
    "squeeze": lambda x: x.reshape(2, 1, 12).squeeze(1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "transpose": lambda x: x.transpose(0, 2),
    "permute": lambda x: x.permute(2, 0, 1),
    "T": lambda x: x[0].T,
    "t": lambda x: x[1].t(),
    "expand": lambda x: x[:, :1, :].expand(2, 5, 4),
    "broadcast_to": lambda x: tg.broadcast_to(x[0, 0], (3, 4)),
    "int": lambda x: x[1],
    "slice": lambda x: x[:, 1:3],
    "step": lambda x: x[:, ::2, 1::2],
    "none_ellipsis": lambda x: x[1, None, ..., -1],
    "neg_index": lambda x: x[-1, -2],
    "intarray": lambda x: x[[0, 0, 1]],
    "intarray2": lambda x: x[[0, 1, 1], [2, 0, 0]],
    "mixed": lambda x: x[:, [0, 2, 2]],
    "mask": lambda x: x[x > 0],
    "cat": lambda x: tg.cat([x, x * 2], 1),
    "cat_last": lambda x: tg.cat([x[:, :, :2], x], -1),
    "stack": lambda x: tg.stack([x, x.sin()], 1),
    "diagonal": lambda x: x[0].diagonal(),
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_gradcheck(name):
    x = leaf(2, 3, 4)
    assert tg.autograd.gradcheck(SHAPE_OPS[name], (x,))


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_gradgradcheck(name):
    # the differentiable reverse of views and gathers records their scatters (strided_scatter, scatter_add)
    x = leaf(2, 3, 4)
    assert tg.autograd.gradgradcheck(lambda t: SHAPE_OPS[name](t) * t.sum(), (x,))


def grad_of_cube(x):
    """``x.grad`` of ``sum(x ** 3)`` by ``backward(create_graph=True)``: a recorded copy of the adjoint."""
    with pytest.warns(UserWarning, match="reference cycle"):       # (PyTorch's warning, as in PyTorch)
        (x ** 3).sum().backward(create_graph=True)
    return x.grad


def test_backward_create_graph_grad_is_differentiable():
    x = leaf(4)
    g = grad_of_cube(x)
    assert g.requires_grad and g.grad_fn.name() == "CopyBackwards"     # (torch::autograd::CopyBackwards)
    np.testing.assert_allclose(g.detach().numpy(), 3 * x.detach().numpy() ** 2, rtol=1e-15)
    (h,) = tg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * x.detach().numpy(), rtol=1e-15)


MATMUL = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
          ((5, 2, 3), (5, 3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((3,), (2, 3, 4)), ((2, 2, 3), (3,))]


@pytest.mark.parametrize("shapes", MATMUL, ids=str)
def test_matmul_gradcheck(shapes):
    a, b = leaf(*shapes[0]), leaf(*shapes[1])
    assert tg.autograd.gradcheck(lambda a, b: a @ b, (a, b))


def setitem_fn(x, s):
    y = x * 2
    y[1] = s * 3
    y[0, 1:3] = 0.0
    return y


def inplace_fn(x):
    y = x * 1.5
    y += x
    y.mul_(x)
    y.sub_(1.0)
    y /= 2.0
    return y


def test_setitem_gradcheck():
    assert tg.autograd.gradcheck(setitem_fn, (leaf(3, 4), leaf(4)))


def test_inplace_gradcheck():
    assert tg.autograd.gradcheck(inplace_fn, (leaf(3, 4),))


def test_gradcheck_detects_a_wrong_gradient():
    x = leaf(3)
    # a hook that changes the gradient makes the reverse pass disagree with finite differences
    def f(x):
        y = x * 2
        if y.requires_grad:         # gradcheck's finite differences run under no_grad
            y.register_hook(lambda g: g * 3)
        return y
    assert not tg.autograd.gradcheck(f, (x,), raise_exception=False)
    with pytest.raises(tg.autograd.GradcheckError):
        tg.autograd.gradcheck(f, (x,))




def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_torch(name):
    torch = _torch()
    fn, kw = UNARY[name]
    x = leaf(3, 4, **kw)
    y = fn(x)
    w = rng.standard_normal(y.shape)
    (y * tg.tensor(w)).sum().backward()
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    fnt = {"floor": torch.floor, "round": torch.round, "sign": torch.sign, "sigmoid": torch.sigmoid, "relu": torch.relu,
           "abs": torch.abs, "exp": torch.exp, "log": torch.log, "log1p": torch.log1p, "expm1": torch.expm1,
           "sqrt": torch.sqrt, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "tanh": torch.tanh}
    yt = fnt[name](xt) if name in fnt else fn(xt)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-14)
    if name in TORCH_NO_GRADIENT:
        assert not yt.requires_grad
        return
    (yt * torch.tensor(w)).sum().backward()
    # (PyTorch's trigamma, digamma's derivative, is off by up to 5e-10 relative; tapegrad's is
    # SciPy's, exact to the last bits: tests/test_special.py)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-9 if name == "digamma" else 1e-12,
                               atol=1e-14)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_matches_torch(name):
    torch = _torch()
    x = leaf(2, 3, 4)
    f = REDUCTIONS[name]
    y = f(x)
    w = rng.standard_normal(y.shape)
    (y * tg.tensor(w)).sum().backward()
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    ft = {"logsumexp": lambda x: torch.logsumexp(x, 1), "logsumexp01": lambda x: torch.logsumexp(x, (0, 2))}
    yt = ft[name](xt) if name in ft else f(xt)
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_empty(name):
    fn, _ = UNARY[name]
    x = tg.zeros(0, 3, requires_grad=True)
    y = fn(x)
    assert y.shape == (0, 3)
    y.sum().backward()
    assert x.grad.shape == (0, 3) and x.grad.dtype == np.float64


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_empty_broadcast(name):
    fn, _ = BINARY[name]
    a, b = tg.zeros(0, 3, requires_grad=True), tg.ones(3, requires_grad=True)
    fn(a, b).sum().backward()
    assert a.grad.shape == (0, 3)
    np.testing.assert_array_equal(b.grad.numpy(), np.zeros(3))   # nothing flows from an empty output


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "logsumexp", "amax", "softmax"])
def test_reduction_over_nonempty_dim_of_empty(op):
    x = tg.zeros(0, 3, requires_grad=True)
    y = {"sum": lambda: x.sum(1), "mean": lambda: x.mean(1), "prod": lambda: x.prod(1),
         "logsumexp": lambda: tg.logsumexp(x, 1), "amax": lambda: x.amax(1),
         "softmax": lambda: x.softmax(1)}[op]()
    y.sum().backward()
    assert x.grad.shape == (0, 3)


def test_empty_sum_and_mean_values():
    x = tg.zeros(0, requires_grad=True)
    s, m = x.sum(), x.mean()
    assert s.item() == 0.0 and np.isnan(m.item())
    (s + m).backward()
    assert x.grad.shape == (0,)


def test_empty_matmul_and_cat():
    a, b = tg.zeros(0, 3, requires_grad=True), tg.ones(3, 4, requires_grad=True)
    (a @ b).sum().backward()
    assert a.grad.shape == (0, 3)
    np.testing.assert_array_equal(b.grad.numpy(), np.zeros((3, 4)))
    c = tg.ones(2, 3, requires_grad=True)
    tg.cat([a, c]).sum().backward()
    np.testing.assert_array_equal(c.grad.numpy(), np.ones((2, 3)))


@pytest.mark.parametrize("shape", [(384, 384, 3), (20000, 2), (5000, 7), (100, 50, 4)])
def test_sums_over_a_short_last_axis_are_numpys(shape):
    """sum/mean over a short last axis add its slices (ops.reduce.sum_values): NumPy's bits,
    whatever the layout, with nan and overflow."""
    from tapegrad.ops.reduce import sum_values
    d = np.random.default_rng(12).standard_normal(shape)
    for arr in (d, np.asfortranarray(d), d[..., ::-1], d * 1e308, np.where(d > 1, np.nan, d)):
        for keep in (False, True):
            got, want = sum_values(arr, (arr.ndim - 1,), keep), arr.sum(axis=arr.ndim - 1, keepdims=keep)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    x = tg.tensor(d, requires_grad=True)
    np.testing.assert_array_equal(x.mean(-1).detach().numpy(), d.mean(-1))
    x.sum(-1, keepdim=True).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(shape))


def test_pow_integral_exponents_match_torch(reverse):
    """The gradient of x ** p for an integral p (the compiled reverse raises x to p - 1 by
    repeated squaring up to |p - 1| = 64, by pow beyond) against PyTorch's (std::pow), at
    zeros of both signs, infinities, NaN, tiny and huge numbers; compiled and interpreted."""
    torch = pytest.importorskip("torch")
    from tapegrad.autograd import engine
    xs = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -2.5, 1e-3, 0.7, 1.1, 3.0, -7.25, 1e30, -1e-30, 1e-80])
    for p in (-65, -64, -13, -7, -4, -3, -2, 4, 5, 13, 64, 65, 66, 2.5, -3.5):
        x = tg.tensor(xs, requires_grad=True)
        with np.errstate(all="ignore"):
            (x ** p).backward(tg.ones(xs.size))
        xt = torch.tensor(xs, requires_grad=True)
        (xt ** p).backward(torch.ones(xs.size, dtype=torch.float64))
        got, want = x.grad.numpy(), xt.grad.numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg="p = %r" % p)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, err_msg="p = %r" % p)
    # the reverse of r2 ** -3 (Lennard-Jones) on many elements: within a few ulp of PyTorch's
    r2 = rng.uniform(0.8, 30.0, 5000)
    x = tg.tensor(r2, requires_grad=True)
    (x ** -3).sum().backward()
    xt = torch.tensor(r2, requires_grad=True)
    (xt ** -3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-15 * 4, atol=0)
