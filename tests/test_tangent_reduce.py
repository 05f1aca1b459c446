"""Forward mode and second order for the reduce family (tapegrad/ops/reduce.py).

For every kernel (prod, var, std, amax/amin/max()/min(), logsumexp, softmax,
log_softmax, cumsum, cumprod, logcumsumexp), in several layouts (everything, dim 0,
dim -1, keepdim, 3-D, one element) and at its special points (ties, zeros, a
constant group, NaN and -inf), driven directly on a recorded tape:
the tangent against central differences of the forward; ``u . (J v) == (J^T u) . v``
between the tangent rule and the compiled backward; the batched reverse on K rows
against K backward passes; ``H v`` of ``(y * w).sum() + (y * y).sum() / 2`` from the
forward-over-reverse sweep against central differences of the gradient, and
everything against PyTorch where it is installed.
"""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import functional as Fn
from tapegrad.autograd import tangent as TG

try:
    import torch
except ImportError:     # (the comparisons with PyTorch are skipped)
    torch = None

RNG = np.random.default_rng(11)
EPS = 1e-6
K = 3


def _signed(shape, lo=0.5, hi=1.5):
    """Away from 0 (prod's and cumprod's divisions), both signs."""
    return RNG.uniform(lo, hi, shape) * RNG.choice([-1.0, 1.0], shape)


def _with_zeros(shape, flat_positions):
    x = _signed(shape)
    x.reshape(-1)[list(flat_positions)] = 0.0
    return x


X34 = _signed((3, 4))
X234 = _signed((2, 3, 4))
ONE = _signed((1,))
ZERO_D = np.array(0.7)

# (a function of (library, x), the input); the library is tapegrad or torch
CASES = {
    # prod: everything (f0 = 1) or along a dim; zeros one per group, two in a group, first/last
    "prod_all": (lambda L, x: L.prod(x), X34),
    "prod_dim0": (lambda L, x: L.prod(x, 0), X34),
    "prod_last_keepdim": (lambda L, x: L.prod(x, -1, keepdim=True), X34),
    "prod_3d": (lambda L, x: L.prod(x, 1), X234),
    "prod_one": (lambda L, x: L.prod(x), ONE),
    "prod_0d": (lambda L, x: L.prod(x), ZERO_D),
    "prod_all_one_zero": (lambda L, x: L.prod(x), _with_zeros((3, 4), [5])),
    "prod_all_two_zeros": (lambda L, x: L.prod(x), _with_zeros((3, 4), [0, 7])),
    "prod_all_three_zeros": (lambda L, x: L.prod(x), _with_zeros((3, 4), [0, 7, 11])),
    "prod_dim0_zeros": (lambda L, x: L.prod(x, 0), _with_zeros((3, 4), [0, 4, 9, 2, 11])),
    "prod_last_zeros": (lambda L, x: L.prod(x, -1), _with_zeros((3, 4), [0, 3, 5, 6, 7])),
    "prod_3d_zeros": (lambda L, x: L.prod(x, 1), _with_zeros((2, 3, 4), [1, 5, 13, 17, 21])),
    # var, std with corrections; a constant group (std 0)
    "var_all": (lambda L, x: L.var(x), X34),
    "var_dim0_c0": (lambda L, x: L.var(x, dim=0, correction=0), X34),
    "var_last_keepdim_c2": (lambda L, x: L.var(x, dim=-1, correction=2, keepdim=True), X34),
    "var_3d_dims": (lambda L, x: L.var(x, dim=(0, 2)), X234),
    "var_one": (lambda L, x: L.var(x, correction=0), ONE),
    "std_all": (lambda L, x: L.std(x), X34),
    "std_dim0_c0": (lambda L, x: L.std(x, dim=0, correction=0), X34),
    "std_last_keepdim": (lambda L, x: L.std(x, dim=-1, keepdim=True), X34),
    "std_3d_dims": (lambda L, x: L.std(x, dim=(0, 2), correction=0), X234),
    # amax / amin (NaN result: NaN), max() / min() (everything, ties split)
    "amax_all": (lambda L, x: L.amax(x), X34),
    "amax_dim0": (lambda L, x: L.amax(x, 0), X34),
    "amin_last_keepdim": (lambda L, x: L.amin(x, -1, keepdim=True), X34),
    "amax_3d_dims": (lambda L, x: L.amax(x, (0, 2)), X234),
    "amin_one": (lambda L, x: L.amin(x), ONE),
    "max_all": (lambda L, x: L.max(x), X34),
    "min_all": (lambda L, x: L.min(x), X234),
    "max_0d": (lambda L, x: L.max(x), ZERO_D),
    # logsumexp
    "logsumexp_all": (lambda L, x: L.logsumexp(x, (0, 1)), X34 * 3),
    "logsumexp_dim0": (lambda L, x: L.logsumexp(x, 0), X34 * 3),
    "logsumexp_last_keepdim": (lambda L, x: L.logsumexp(x, -1, keepdim=True), X34 * 3),
    "logsumexp_3d": (lambda L, x: L.logsumexp(x, 1), X234 * 3),
    "logsumexp_one": (lambda L, x: L.logsumexp(x, 0), ONE),
    # softmax, log_softmax (per row)
    "softmax_dim0": (lambda L, x: L.softmax(x, 0), X34 * 2),
    "softmax_last": (lambda L, x: L.softmax(x, -1), X34 * 2),
    "softmax_3d": (lambda L, x: L.softmax(x, 1), X234 * 2),
    "softmax_one": (lambda L, x: L.softmax(x, 0), ONE),
    "softmax_rows_of_one": (lambda L, x: L.softmax(x, 1), X34[:, :1]),
    "log_softmax_dim0": (lambda L, x: L.log_softmax(x, 0), X34 * 2),
    "log_softmax_last": (lambda L, x: L.log_softmax(x, -1), X34 * 2),
    "log_softmax_3d": (lambda L, x: L.log_softmax(x, 1), X234 * 2),
    "log_softmax_0d": (lambda L, x: L.log_softmax(x, 0), ZERO_D),
    # the scans
    "cumsum_dim0": (lambda L, x: L.cumsum(x, 0), X34),
    "cumsum_last": (lambda L, x: L.cumsum(x, -1), X34),
    "cumsum_3d": (lambda L, x: L.cumsum(x, 1), X234),
    "cumsum_0d": (lambda L, x: L.cumsum(x, 0), ZERO_D),
    "cumsum_rows_of_one": (lambda L, x: L.cumsum(x, 1), X34[:, :1]),
    "cumprod_dim0": (lambda L, x: L.cumprod(x, 0), X34),
    "cumprod_last": (lambda L, x: L.cumprod(x, -1), X34),
    "cumprod_3d": (lambda L, x: L.cumprod(x, 1), X234),
    "cumprod_one": (lambda L, x: L.cumprod(x, 0), ONE),
    "cumprod_0d": (lambda L, x: L.cumprod(x, 0), ZERO_D),
    "cumprod_zeros_last": (lambda L, x: L.cumprod(x, -1), _with_zeros((3, 5), [0, 6, 8, 12, 13, 14])),
    "cumprod_zeros_dim0": (lambda L, x: L.cumprod(x, 0), _with_zeros((4, 3), [3, 9, 1, 4, 10])),
    "cumprod_zeros_3d": (lambda L, x: L.cumprod(x, 1), _with_zeros((2, 4, 3), [3, 9, 13, 16, 19, 22])),
    "cumprod_one_zero": (lambda L, x: L.cumprod(x, 0), np.array([0.0])),
    "logcumsumexp_dim0": (lambda L, x: L.logcumsumexp(x, 0), X34 * 3),
    "logcumsumexp_last": (lambda L, x: L.logcumsumexp(x, -1), X34 * 3),
    "logcumsumexp_3d": (lambda L, x: L.logcumsumexp(x, 1), X234 * 3),
    "logcumsumexp_one": (lambda L, x: L.logcumsumexp(x, 0), ONE),
    "logcumsumexp_0d": (lambda L, x: L.logcumsumexp(x, 0), ZERO_D),
    "logcumsumexp_spread": (lambda L, x: L.logcumsumexp(x, -1), np.array([[-40.0, 3.0, -2.0, 30.0, 29.0]])),
}

# exact two-way ties (central differences see their mean there too), at maxima and minima
TIES = {
    "amax_all_tie": (lambda L, x: L.amax(x), "max", None),
    "amin_dim0_tie": (lambda L, x: L.amin(x, 0), "min", 0),
    "amax_last_keepdim_tie": (lambda L, x: L.amax(x, -1, keepdim=True), "max", 1),
    "max_all_tie": (lambda L, x: L.max(x), "max", None),
    "min_all_tie": (lambda L, x: L.min(x), "min", None),
}


def _tied(kind, axis):
    """A (3, 4) input whose every group along ``axis`` (everything for None) has two
    elements equal to its extremum."""
    x = RNG.uniform(-1.0, 1.0, (3, 4))
    groups = [x.reshape(-1)] if axis is None else ([x[:, j] for j in range(4)] if axis == 0 else list(x))
    for g in groups:
        i = np.argmax(g) if kind == "max" else np.argmin(g)
        g[(i + 1) % g.size] = g[i]
    return x


for _name, (_fn, _kind, _axis) in TIES.items():
    CASES[_name] = (_fn, _tied(_kind, _axis))

# points where the Hessian is not the limit of central differences of the gradient
NOT_SMOOTH = set(TIES)


def _record(fn, x0):
    x = tg.tensor(x0, requires_grad=True)
    y = fn(tg, x)
    return x, y, y._tape, TG.leaf_slot(y._tape, x)


def _tangent(fn, x0, V):
    x, y, T, s = _record(fn, x0)
    ctx = TG.tangents(T, {s: V}, y._slot)
    return ctx.tans[y._slot]


def _forward(fn, x0):
    return np.asarray(fn(tg, tg.tensor(x0)).numpy(), np.float64).reshape(-1)


def _backward(fn, x0, u):
    """J^T u by the compiled backward of a fresh recording."""
    x, y, T, s = _record(fn, x0)
    y.backward(tg.tensor(u.reshape(y.shape)))
    return x.grad.numpy().reshape(-1)


def _directions(x0):
    return RNG.standard_normal((K, max(x0.size, 1)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_tangent_against_central_differences(name):
    fn, x0 = CASES[name]
    V = _directions(x0)
    got = _tangent(fn, x0, V)
    want = np.stack([(_forward(fn, x0 + EPS * v.reshape(x0.shape)) - _forward(fn, x0 - EPS * v.reshape(x0.shape)))
                     / (2 * EPS) for v in V])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(CASES))
def test_tangent_is_the_transpose_of_the_compiled_backward(name):
    fn, x0 = CASES[name]
    V = _directions(x0)
    jv = _tangent(fn, x0, V)
    for k in range(K):
        u = RNG.standard_normal(jv.shape[1])
        lhs = float(u @ jv[k])
        rhs = float(_backward(fn, x0, u) @ V[k])
        assert abs(lhs - rhs) <= 1e-12 * (1 + abs(lhs)), (lhs, rhs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_batched_reverse_is_k_backward_passes(name):
    fn, x0 = CASES[name]
    x, y, T, s = _record(fn, x0)
    U = RNG.standard_normal((K, y.numel()))
    got = TG.reverse(TG.TangentContext(T, K), {y._slot: U}, [s])[s]
    want = np.stack([_backward(fn, x0, u) for u in U])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


def _scalar(fn, w):
    """(y * w).sum() + (y * y).sum() / 2: both the rule's own curvature and the adjoints'
    tangents through its batched reverse."""
    def f(L, x):
        y = fn(L, x)
        return (y * w(L)).sum() + (y * y).sum() * 0.5
    return f


def _weights(fn, x0):
    w0 = RNG.standard_normal(_forward(fn, x0).size).reshape(np.shape(fn(tg, tg.tensor(x0)).numpy()))
    return lambda L: L.tensor(w0)


def _sweep(f, x0, V):
    """(gradient, H V) of the scalar ``f`` by the forward-over-reverse sweep on its tape."""
    x, y, T, s = _record(f, x0)
    ctx = TG.tangents(T, {s: V}, y._slot)
    seed = np.zeros((1 + V.shape[0], 1))
    seed[0] = 1.0
    r = TG.reverse(ctx, {y._slot: seed}, [s], second=True)[s]
    return r[0], r[1:]


def _grad(f, x0):
    x = tg.tensor(x0, requires_grad=True)
    f(tg, x).backward()
    return x.grad.numpy().reshape(-1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hvp_against_central_differences_of_the_gradient(name):
    fn, x0 = CASES[name]
    f = _scalar(fn, _weights(fn, x0))
    V = _directions(x0)
    g, HV = _sweep(f, x0, V)
    np.testing.assert_allclose(g, _grad(f, x0), rtol=1e-13, atol=1e-14)
    if name in NOT_SMOOTH:
        return
    for k in range(K):
        v = V[k].reshape(x0.shape)
        want = (_grad(f, x0 + EPS * v) - _grad(f, x0 - EPS * v)) / (2 * EPS)
        np.testing.assert_allclose(HV[k], want, rtol=1e-5, atol=1e-6)


def _torch_fn(fn):
    return lambda x: fn(torch, x)


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_pytorch(name):
    torch.set_default_dtype(torch.float64)
    fn, x0 = CASES[name]
    V = _directions(x0)
    X0 = torch.tensor(x0)
    got = _tangent(fn, x0, V)
    if name == "logcumsumexp_spread":      # (PyTorch's tangent is wrong there: test_logcumsumexp_of_a_spread_row)
        return
    lcse = name.startswith("logcumsumexp")
    # (PyTorch's logcumsumexp_jvp divides cumsums of exp(x - max): about 1e-10 off, where
    # this one is within 1e-15 of 40-digit arithmetic)
    tol = 1e-9 if lcse else 1e-12
    for k in range(K):
        want = torch.func.jvp(_torch_fn(fn), (X0,), (torch.tensor(V[k].reshape(x0.shape)),))[1]
        np.testing.assert_allclose(got[k], want.numpy().reshape(-1), rtol=tol, atol=tol)
    w = _weights(fn, x0)
    f = _scalar(fn, w)
    g, HV = _sweep(f, x0, V)
    for k in range(K):
        v = torch.tensor(V[k].reshape(x0.shape))
        if lcse:        # (PyTorch's double backward of logcumsumexp is NaN: its forward over reverse,
            # as inexact as its jvp; this H v is within 3e-15 of 60-digit arithmetic)
            hv = torch.func.jvp(torch.func.grad(lambda x: f(torch, x)), (X0,), (v,))[1]
        else:
            hv = torch.autograd.functional.hvp(lambda x: f(torch, x), X0, v)[1]
        tol = 1e-8 if lcse else 1e-11
        np.testing.assert_allclose(HV[k], hv.numpy().reshape(-1), rtol=tol, atol=tol)


# -- the kernels' special values --------------------------------------------------------
def test_three_way_ties_take_the_mean_of_the_tangents():
    x0 = np.array([[1.0, 3.0, 3.0, 3.0], [2.0, -1.0, 2.0, 0.5]])
    V = _directions(x0)
    got = _tangent(lambda L, x: L.amax(x, 1), x0, V)
    np.testing.assert_allclose(got[:, 0], V[:, 1:4].mean(1), rtol=1e-15)
    np.testing.assert_allclose(got[:, 1], V[:, [4, 6]].mean(1), rtol=1e-15)
    got = _tangent(lambda L, x: L.max(x), x0, V)
    np.testing.assert_allclose(got[:, 0], V[:, 1:4].mean(1), rtol=1e-15)


def test_nan_maxima():
    """amax/amin: NaN for the group of a NaN (PyTorch); max(): the NaNs' tangents,
    the transpose of its backward that sends the gradient to the NaNs."""
    x0 = np.array([[1.0, np.nan, 2.0], [0.5, 0.25, -1.0]])
    V = _directions(x0)
    got = _tangent(lambda L, x: L.amax(x, 1), x0, V)
    assert np.isnan(got[:, 0]).all()
    np.testing.assert_array_equal(got[:, 1], V[:, 3])
    got = _tangent(lambda L, x: L.max(x), x0, V)
    np.testing.assert_array_equal(got[:, 0], V[:, 1])
    for fn in (lambda L, x: L.amax(x, 1), lambda L, x: L.max(x)):
        x, y, T, s = _record(fn, x0)
        U = RNG.standard_normal((K, y.numel()))
        got = TG.reverse(TG.TangentContext(T, K), {y._slot: U}, [s])[s]
        np.testing.assert_array_equal(got, np.stack([_backward(fn, x0, u) for u in U]))


def test_std_of_a_constant_group_is_zero_not_nan():
    x0 = np.array([[2.0, 2.0, 2.0], [0.5, 1.0, -1.0]])
    fn = lambda L, x: L.std(x, 1)      # noqa: E731
    V = _directions(x0)
    got = _tangent(fn, x0, V)
    assert (got[:, 0] == 0.0).all() and np.isfinite(got).all()
    x, y, T, s = _record(fn, x0)
    U = RNG.standard_normal((K, 2))
    got = TG.reverse(TG.TangentContext(T, K), {y._slot: U}, [s])[s]
    np.testing.assert_array_equal(got[:, :3], 0.0)
    np.testing.assert_allclose(got, np.stack([_backward(fn, x0, u) for u in U]), rtol=1e-13, atol=1e-15)
    _, HV = _sweep(_scalar(fn, lambda L: L.tensor([0.3, -0.7])), x0, V)
    assert (HV[:, :3] == 0.0).all() and np.isfinite(HV).all()


def test_prod_of_everything_with_two_zeros():
    """The gradient is 0 (the compiled backward's); the tangent is 0; the Hessian is not:
    d2 prod / dx_i dx_j at the two zeros is the product of the others."""
    x0 = np.array([0.0, 2.0, 0.0, -3.0])
    fn = lambda L, x: L.prod(x)        # noqa: E731
    V = _directions(x0)
    assert (_tangent(fn, x0, V) == 0.0).all()
    x, y, T, s = _record(fn, x0)
    got = TG.reverse(TG.TangentContext(T, K), {y._slot: np.ones((K, 1))}, [s])[s]
    assert (got == 0.0).all()
    g, HV = _sweep(lambda L, x: L.prod(x), x0, V)
    H = np.zeros((4, 4))
    H[0, 2] = H[2, 0] = -6.0
    np.testing.assert_allclose(HV, V @ H, rtol=1e-14, atol=1e-15)


def test_logcumsumexp_leading_minus_infinities():
    """A row's leading -infs: a tangent of 0 (PyTorch's jvp), a NaN adjoint (the compiled
    backward's and PyTorch's exp(x - y)); a -inf after a finite element: 0 both ways."""
    x0 = np.array([[-np.inf, -np.inf, 0.5, -np.inf, 1.0], [0.0, -np.inf, 2.0, 1.0, -1.0]])
    fn = lambda L, x: L.logcumsumexp(x, 1)     # noqa: E731
    V = _directions(x0)
    jv = _tangent(fn, x0, V)
    assert (jv[:, :2] == 0.0).all() and np.isfinite(jv).all()
    with np.errstate(invalid="ignore"):     # (-inf - -inf at the leading -infs, not compared)
        fd = (_forward(fn, np.where(np.isinf(x0), x0, x0 + EPS * V[0].reshape(2, 5)))
              - _forward(fn, np.where(np.isinf(x0), x0, x0 - EPS * V[0].reshape(2, 5)))) / (2 * EPS)
    np.testing.assert_allclose(jv[0, 2:], fd[2:], rtol=1e-6, atol=1e-7)
    x, y, T, s = _record(fn, x0)
    U = RNG.standard_normal((K, 10))
    got = TG.reverse(TG.TangentContext(T, K), {y._slot: U}, [s])[s]
    want = np.stack([_backward(fn, x0, u) for u in U])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    assert np.isnan(got[:, :2]).all() and (got[:, [3, 6]] == 0.0).all()
    if torch is not None:
        X0 = torch.tensor(x0)
        for k in range(K):
            jt = torch.func.jvp(lambda t: torch.logcumsumexp(t, 1), (X0,), (torch.tensor(V[k].reshape(2, 5)),))[1]
            np.testing.assert_allclose(jv[k], jt.numpy().reshape(-1), rtol=1e-12, atol=1e-13)


def test_logcumsumexp_of_a_spread_row():
    """Terms 70 apart in logs: the tangent of 50-digit arithmetic, where PyTorch's jvp
    (cumsums of exp(x - max)) gives 4e-18 for the first element's and 1.899 for 2."""
    x0 = np.array([[-40.0, 3.0, -2.0, 30.0, 29.0]])
    got = _tangent(lambda L, x: L.logcumsumexp(x, -1), x0, np.arange(1.0, 6.0)[None, :])
    np.testing.assert_allclose(got[0], [1.0, 2.0, 2.006692850924285, 3.9999999999962284, 4.268941421366866],
                               rtol=1e-14)


# -- through the functional API: no reduce op falls back to the reverse-mode path ----------


def _all_kernels(x):
    m = x.reshape(3, 4)
    return (tg.prod(m, 0).sum() + tg.var(m, 1).sum() + tg.std(m) + tg.amax(m, 1).sum() + tg.min(m * 0.5)
            + tg.logsumexp(m, 0).sum() + (tg.softmax(m, 1) * m).sum() + tg.log_softmax(m, 0)[1].sum()
            + (tg.cumsum(m, 1) ** 2).sum() + tg.cumprod(m, 0).sum() + tg.logcumsumexp(m, 1).sum())


def test_hessian_of_every_kernel_through_the_functional_api(fast_only):
    x0 = _signed(12)
    H = Fn.hessian(_all_kernels, tg.tensor(x0)).numpy()
    want = np.zeros((12, 12))
    f = lambda L, x: _all_kernels(x)      # noqa: E731
    for j in range(12):
        e = np.zeros(12)
        e[j] = EPS
        want[:, j] = (_grad(f, x0 + e) - _grad(f, x0 - e)) / (2 * EPS)
    np.testing.assert_allclose(H, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)

    def g(x):
        return tg.softmax(x.reshape(3, 4), 1) * tg.cumprod(x, 0).reshape(3, 4)
    J = Fn.jacobian(g, tg.tensor(x0), strategy="forward-mode").numpy()
    Jr = Fn.jacobian(g, tg.tensor(x0)).numpy()
    np.testing.assert_allclose(J, Jr, rtol=1e-12, atol=1e-13)
