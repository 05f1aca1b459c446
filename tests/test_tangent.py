"""Forward mode and second order on the tape (tapegrad/autograd/tangent.py).

Every elementwise, shape and matmul op: its tangent rule against central finite
differences of the forward, its batched reverse against the compiled backward
(``u . (J v) == (J^T u) . v``), its curvature term through ``H v`` against finite
differences of the gradient; the functional API on top (jvp, hvp, vhp, jacobian
both ways, hessian) against finite differences and against PyTorch where it is
installed, and the fallback to the reverse-mode path where a rule is missing.
"""
import sys

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import functional as Fn
from tapegrad.autograd import tangent as TG

F = tg.nn.functional
RNG = np.random.default_rng(7)
EPS = 1e-6


def _fd_jvp(f, xs, vs):
    plus = f(*[tg.tensor(x + EPS * v) for x, v in zip(xs, vs)])
    minus = f(*[tg.tensor(x - EPS * v) for x, v in zip(xs, vs)])
    return (plus.numpy() - minus.numpy()) / (2 * EPS)


def _grad(f, xs):
    ts = [tg.tensor(x, requires_grad=True) for x in xs]
    f(*ts).backward()
    return [np.zeros_like(x) if t.grad is None else t.grad.numpy() for x, t in zip(xs, ts)]


def _fd_hvp(f, xs, vs):
    gp = _grad(f, [x + EPS * v for x, v in zip(xs, vs)])
    gm = _grad(f, [x - EPS * v for x, v in zip(xs, vs)])
    return [(a - b) / (2 * EPS) for a, b in zip(gp, gm)]


def _check(f, xs, second=True, rtol=1e-5, atol=1e-6):
    """jvp against finite differences and against the reverse pass; with ``second``,
    H v of ``sum(f * w)`` against finite differences of its gradient."""
    xs = [np.asarray(x, np.float64) for x in xs]
    vs = [RNG.standard_normal(x.shape) for x in xs]
    ins = tuple(tg.tensor(x) for x in xs)
    out, jv = Fn.jvp(f, ins, tuple(tg.tensor(v) for v in vs))
    np.testing.assert_allclose(jv.numpy(), _fd_jvp(f, xs, vs), rtol=rtol, atol=atol)
    u = RNG.standard_normal(out.shape)
    _, vj = Fn.vjp(f, ins, tg.tensor(u))
    lhs = float((u * jv.numpy()).sum())
    rhs = float(sum((a.numpy() * v).sum() for a, v in zip(vj, vs)))
    assert abs(lhs - rhs) <= 1e-9 * (1 + abs(lhs))
    if second:
        w = tg.tensor(RNG.standard_normal(out.shape))

        def scalar(*a):
            return (f(*a) * w).sum()
        _, hv = Fn.hvp(scalar, ins, tuple(tg.tensor(v) for v in vs))
        for got, want in zip(hv, _fd_hvp(scalar, xs, vs)):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


X = RNG.uniform(0.2, 0.8, (3, 4))

UNARY = {
    "neg": tg.neg, "abs": lambda x: tg.abs(x - 0.5), "exp": tg.exp, "log": tg.log, "log1p": tg.log1p,
    "expm1": tg.expm1, "sqrt": tg.sqrt, "sin": tg.sin, "cos": tg.cos, "tan": tg.tan, "tanh": tg.tanh,
    "sigmoid": tg.sigmoid, "relu": lambda x: tg.relu(x - 0.5), "sign": lambda x: tg.sign(x - 0.5),
    "floor": lambda x: tg.floor(x * 3), "round": lambda x: tg.round(x * 3), "clamp": lambda x: tg.clamp(x, 0.3, 0.7),
    "add_s": lambda x: x + 2.5, "mul_s": lambda x: x * 3.0, "div_s": lambda x: x / 3.0, "rsub_s": lambda x: 2.0 - x,
    "rdiv_s": lambda x: 2.0 / x, "pow_s3": lambda x: x ** 3, "pow_s2": lambda x: x ** 2, "pow_s_half": lambda x: x ** 0.5,
    "pow_s_frac": lambda x: x ** 1.7, "pow_s1": lambda x: x ** 1, "rpow_s": lambda x: 2.0 ** x,
    "copy": lambda x: x.clone(), "asin": tg.asin, "acos": tg.acos, "atan": tg.atan, "sinh": tg.sinh, "cosh": tg.cosh,
    "asinh": tg.asinh, "acosh": lambda x: tg.acosh(x + 1.5), "atanh": tg.atanh, "log2": tg.log2, "log10": tg.log10,
    "exp2": tg.exp2, "reciprocal": tg.reciprocal, "rsqrt": tg.rsqrt, "ceil": lambda x: tg.ceil(x * 3),
    "trunc": lambda x: tg.trunc(x * 3), "frac": lambda x: tg.frac(x * 3), "logit": tg.logit,
    "logit_eps": lambda x: tg.logit(x, eps=0.3), "sinc": tg.sinc, "erf": tg.erf, "erfc": tg.erfc,
    "erfinv": tg.erfinv, "lgamma": tg.lgamma, "digamma": tg.digamma, "polygamma": lambda x: tg.polygamma(2, x),
    "i0": tg.i0, "i0e": tg.special.i0e, "i1": tg.special.i1, "i1e": tg.special.i1e, "ndtr": tg.special.ndtr,
    "ndtri": tg.special.ndtri, "log_ndtr": tg.special.log_ndtr, "bessel_j0": tg.special.bessel_j0,
    "bessel_j1": tg.special.bessel_j1, "entr": tg.special.entr,
    "softplus": lambda x: F.softplus(x * 4 - 2, beta=2.0, threshold=1.0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, fast_only):
    _check(UNARY[name], [X])


A, B1, B0 = RNG.uniform(0.6, 1.4, (3, 4)), RNG.uniform(0.6, 1.4, (4,)), RNG.uniform(0.6, 1.4, (1,))
BINARY = {
    "add": tg.add, "sub": tg.sub, "mul": tg.mul, "div": tg.div, "pow": tg.pow, "maximum": tg.maximum,
    "minimum": tg.minimum, "where": lambda a, b: tg.where(a > 1.0, a, b),
    "div_trunc": lambda a, b: tg.div(a * 5, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: tg.div(a * 5, b, rounding_mode="floor"), "atan2": tg.atan2, "hypot": tg.hypot,
    "remainder": lambda a, b: tg.remainder(a * 3, b), "fmod": lambda a, b: tg.fmod(a * 3, b),
    "copysign": lambda a, b: tg.copysign(a, b - 1.0), "xlogy": tg.xlogy, "xlog1py": tg.special.xlog1py,
}


@pytest.mark.parametrize("other", [B1, B0, A[0, 0] * 0.93, A * 0.9 + 0.13], ids=["row", "one", "0d", "same"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_broadcasting(name, other, fast_only):
    _check(BINARY[name], [A, np.asarray(other)])
    _check(lambda b, a: BINARY[name](a, b), [np.asarray(other), A])


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_incomplete_gamma_in_x(name, fast_only):
    a = tg.tensor(RNG.uniform(1.0, 3.0, (3, 4)))
    _check(lambda x: getattr(tg, name)(a, x), [A])


SHAPE = {
    "slices": lambda x: x[1:, ::2] * x[:-1, 1::2],
    "transpose": lambda x: x.T @ x,
    "expand": lambda x: x[:, :1].expand(3, 4) * x,
    "reshape": lambda x: x.reshape(2, 6).sum(0) * x.reshape(-1)[:6],
    "index": lambda x: x[np.array([0, 2, 2]), 1:] ** 2,
    "mask": lambda x: x[x > 0.5] * 3.0,
    "setitem": lambda x: _setitem(x),
    "cat": lambda x: tg.cat([x, x ** 2, tg.ones(1, 4)], 0).sin(),
    "stack": lambda x: tg.stack([x, x.exp()], 1) ** 2,
    "flip_roll": lambda x: tg.flip(x, (0,)) * tg.roll(x, 1, 1),
    "diagonal": lambda x: tg.diagonal(x @ x.T) ** 3,
    "permute": lambda x: x.reshape(3, 2, 2).permute(2, 0, 1).tanh(),
    "gather": lambda x: tg.gather(x, 1, tg.tensor(np.array([[0, 3], [1, 1], [2, 0]]))) ** 2,
    "repeat": lambda x: x.repeat(2, 1).cos(),
}


def _setitem(x):
    y = x * 1.0
    y[1] = x[0] ** 2
    y[:, 2] = 0.5
    return y * x


@pytest.mark.parametrize("name", sorted(SHAPE))
def test_shape(name, fast_only):
    _check(SHAPE[name], [X])


MATMUL = {
    "mm": ((3, 4), (4, 5)), "mv": ((3, 4), (4,)), "vm": ((4,), (4, 5)), "dot": ((4,), (4,)),
    "bmm": ((2, 3, 4), (2, 4, 5)), "broadcast": ((2, 1, 3, 4), (5, 4, 2)), "batch_vec": ((2, 3, 4), (4,)),
}


@pytest.mark.parametrize("name", sorted(MATMUL))
def test_matmul(name, fast_only):
    sa, sb = MATMUL[name]
    _check(lambda a, b: tg.tanh(a @ b) * (a @ b), [RNG.standard_normal(sa), RNG.standard_normal(sb)])


def test_k_directions_equal_k_single_passes():
    x = tg.tensor(X.reshape(-1), requires_grad=True)
    y = (tg.sin(x[1:] * x[:-1]) ** 2).sum() + (x.exp() * x).sum()
    T, s = y._tape, TG.leaf_slot(y._tape, x)
    V = RNG.standard_normal((5, x.numel()))
    ctx = TG.tangents(T, {s: V}, y._slot)
    seed = np.zeros((6, 1))
    seed[0] = 1.0
    many = TG.reverse(ctx, {y._slot: seed}, [s], second=True)[s]
    for k in range(5):
        c1 = TG.tangents(T, {s: V[k:k + 1]}, y._slot)
        one = TG.reverse(c1, {y._slot: seed[:2]}, [s], second=True)[s]
        np.testing.assert_allclose(ctx.tans[y._slot][k], c1.tans[y._slot][0], rtol=1e-14)
        np.testing.assert_allclose(many[1 + k], one[1], rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(many[0], one[0], rtol=1e-14)


def _hessian_fd(f, x):
    n = x.size
    H = np.zeros((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = EPS
        H[:, j] = (_grad(f, [x + e])[0] - _grad(f, [x - e])[0]) / (2 * EPS)
    return H


def test_hessian_and_jacobian_both_strategies(fast_only):
    Am = tg.tensor(RNG.standard_normal((6, 4)))

    def f(x):
        return F.softplus(Am @ x).sum() + (x[0] * x[1:] ** 2).sum()
    x0 = RNG.standard_normal(4)
    H = Fn.hessian(f, tg.tensor(x0))
    np.testing.assert_allclose(H.numpy(), _hessian_fd(f, x0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(H.numpy(), H.numpy().T, rtol=1e-12, atol=1e-12)

    def g(x):
        return tg.tanh(Am @ x) * (Am @ x.sin())
    J1 = Fn.jacobian(g, tg.tensor(x0))
    J2 = Fn.jacobian(g, tg.tensor(x0), strategy="forward-mode", vectorize=True)
    cols = [_fd_jvp(g, [x0], [np.eye(4)[j]]) for j in range(4)]
    np.testing.assert_allclose(J1.numpy(), np.stack(cols, 1), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(J2.numpy(), J1.numpy(), rtol=1e-12, atol=1e-13)


def test_tuple_inputs_and_outputs(fast_only):
    a0, b0 = RNG.standard_normal((3,)), RNG.standard_normal((2, 3))

    def f(a, b):
        return (b * a).exp(), (a ** 2).sum() * b[0]
    ja = Fn.jacobian(f, (tg.tensor(a0), tg.tensor(b0)))
    jf = Fn.jacobian(f, (tg.tensor(a0), tg.tensor(b0)), strategy="forward-mode")
    assert [[t.shape for t in row] for row in ja] == [[(2, 3, 3), (2, 3, 2, 3)], [(3, 3), (3, 2, 3)]]
    for ra, rf in zip(ja, jf):
        for x, y in zip(ra, rf):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12, atol=1e-13)

    def s(a, b):
        return (b * a.sin()).sum() * a.sum()
    H = Fn.hessian(s, (tg.tensor(a0), tg.tensor(b0)))
    assert H[0][1].shape == (3, 2, 3) and H[1][0].shape == (2, 3, 3)
    np.testing.assert_allclose(H[0][1].numpy(), np.moveaxis(H[1][0].numpy(), 2, 0), rtol=1e-12, atol=1e-12)
    v = (tg.tensor(RNG.standard_normal(3)), tg.tensor(RNG.standard_normal((2, 3))))
    _, hv = Fn.hvp(s, (tg.tensor(a0), tg.tensor(b0)), v)
    want = _fd_hvp(s, [a0, b0], [t.numpy() for t in v])
    for got, w in zip(hv, want):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-5, atol=1e-6)


def test_unused_input_and_constant_output(fast_only):
    def f(a, b):
        return a * 2.0
    out, jv = Fn.jvp(f, (tg.tensor([1.0, 2.0]), tg.tensor([3.0])), (tg.tensor([1.0, 1.0]), tg.tensor([5.0])))
    assert jv.tolist() == [2.0, 2.0]
    _, hv = Fn.hvp(lambda a, b: (a * a).sum(), (tg.tensor([1.0, 2.0]), tg.tensor([3.0])),
                   (tg.tensor([1.0, -1.0]), tg.tensor([5.0])))
    assert hv[0].tolist() == [2.0, -2.0] and hv[1].tolist() == [0.0]
    J = Fn.jacobian(lambda a: tg.ones(3), tg.tensor([1.0, 2.0]))
    assert J.shape == (3, 2) and not J.numpy().any()
    J = Fn.jacobian(lambda a: a, tg.tensor([1.0, 2.0]))
    assert J.tolist() == [[1.0, 0.0], [0.0, 1.0]]


class _Cube(tg.autograd.Function):
    """x^3 as a user's Function: a host op with no forward-mode rule (its backward is
    differentiable, so second order works by the double backward)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x ** 2


def test_an_op_without_a_forward_rule_falls_back_to_reverse_mode():
    """A tg.autograd.Function without jvp has no forward-mode rule: the reverse-mode path gives
    the values, and a tangent walk raises PyTorch's error for such a Function."""
    M = RNG.standard_normal((3, 3))
    M = tg.tensor(M + M.T)
    x0 = RNG.standard_normal(3)

    def f(x):
        return (_Cube.apply(M + tg.diag(x.sin())) * M).sum()
    H = Fn.hessian(f, tg.tensor(x0))
    np.testing.assert_allclose(H.numpy(), _hessian_fd(f, x0), rtol=1e-5, atol=1e-6)
    x = tg.tensor(x0, requires_grad=True)
    y = f(x)
    with pytest.raises(NotImplementedError, match="You must implement the jvp function for custom autograd.Function"):
        TG.tangents(y._tape, {TG.leaf_slot(y._tape, x): np.ones((1, 3))}, y._slot)


class _SinCos(tg.autograd.Function):
    """Two outputs, a number argument and a forward-mode rule (PyTorch's jvp and
    save_for_forward)."""
    @staticmethod
    def forward(ctx, x, scale, w):
        ctx.save_for_backward(x, w)
        ctx.save_for_forward(w, x)          # (jvp sees these as saved_tensors, in this order)
        ctx.scale = scale
        return (x * w).sin() * scale, (x * w).cos()

    @staticmethod
    def backward(ctx, gs, gc):
        x, w = ctx.saved_tensors
        d = gs * (x * w).cos() * ctx.scale - gc * (x * w).sin()
        return d * w, None, d * x

    @staticmethod
    def jvp(ctx, tx, _, tw):
        w, x = ctx.saved_tensors
        u = (0.0 if tx is None else tx * w) + (0.0 if tw is None else x * tw)
        return (x * w).cos() * ctx.scale * u, -(x * w).sin() * u


def test_function_with_jvp_takes_the_forward_path():
    """A Function with jvp: functional.jvp and the forward-mode Jacobian walk the tape with
    it (no reverse-mode fallback), the reverse-mode Jacobian uses its backward for every
    row at once, and both agree with differences; hvp (no curvature from a user's
    backward) falls back to the reverse path with the right values."""
    x0, w0, v, u = (RNG.standard_normal(4) for _ in range(4))

    def f(x, w):
        s, c = _SinCos.apply(x.exp(), 1.5, w)
        return s * c + s

    ins = (tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True))
    got = Fn._on_tape(Fn._jvp_on_tape, ins, (f(*ins),), (tg.tensor(v), tg.tensor(u)))
    assert got is not None, "took the reverse-mode fallback"
    np.testing.assert_allclose(got[0].numpy(), _fd_jvp(f, [x0, w0], [v, u]), rtol=1e-6, atol=1e-8)
    for forward in (True, False):
        ins = (tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True))
        J = Fn._on_tape(Fn._jacobian_on_tape, ins, (f(*ins),), forward)
        assert J is not None
        for j, (x, other) in enumerate(((x0, w0), (w0, x0))):
            fd = np.stack([_fd_jvp(f, [x0, w0], [e, np.zeros(4)] if j == 0 else [np.zeros(4), e])
                           for e in np.eye(4)], 1)
            np.testing.assert_allclose(J[0][j].numpy(), fd, rtol=1e-6, atol=1e-8)
    _, jv = Fn.jvp(lambda x: f(x, tg.tensor(w0)), tg.tensor(x0), tg.tensor(v))
    np.testing.assert_allclose(jv.numpy(), _fd_jvp(lambda x: f(x, tg.tensor(w0)), [x0], [v]), rtol=1e-6, atol=1e-8)

    def scalar(x, w):
        return (f(x, w) ** 2).sum()
    ins = (tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True))
    assert Fn._on_tape(Fn._hvp_on_tape, ins, (scalar(*ins),), (tg.tensor(v), tg.tensor(u))) is None
    _, hv = Fn.hvp(scalar, (tg.tensor(x0), tg.tensor(w0)), (tg.tensor(v), tg.tensor(u)))
    for h, want in zip(hv, _fd_hvp(scalar, [x0, w0], [v, u])):
        np.testing.assert_allclose(h.numpy(), want, rtol=1e-5, atol=1e-6)
    # tg.func.jvp and a recorded tape take the same rule
    _, jv2 = tg.func.jvp(lambda x: f(x, tg.tensor(w0)), (tg.tensor(x0),), (tg.tensor(v),))
    np.testing.assert_allclose(jv2.numpy(), jv.numpy(), rtol=1e-12)
    R = tg.record(f, x0, w0)
    x1 = RNG.standard_normal(4)
    np.testing.assert_allclose(R.jvp((x1, w0), (v, u))[1], _fd_jvp(f, [x1, w0], [v, u]), rtol=1e-6, atol=1e-8)


def test_float32_inputs_give_float32_results(fast_only):
    x = tg.tensor(X.astype(np.float32))
    _, hv = Fn.hvp(lambda t: (t.sin() ** 2).sum(), x, tg.ones_like(x))
    assert hv.dtype == tg.float32
    H = Fn.hessian(lambda t: (t.sin() ** 2).sum(), x.reshape(-1))
    assert H.dtype == tg.float32 and H.shape == (12, 12)
    np.testing.assert_allclose(H.numpy().sum(1).reshape(3, 4), hv.numpy(), rtol=1e-5)


try:
    import torch
except ImportError:     # (the comparisons below need it)
    torch = None


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_against_pytorch(fast_only):
    torch.set_default_dtype(torch.float64)      # (conftest.py puts torch's back after the test)
    A0 = RNG.standard_normal((30, 10))
    x0, v0 = RNG.standard_normal(10), RNG.standard_normal(10)

    def make(lib):
        Am = lib.tensor(A0)
        return lambda x: lib.nn.functional.softplus(Am @ x).sum() + (lib.tanh(x[1:] * x[:-1]) ** 2).sum()
    ft, fg = make(torch), make(tg)
    X0, V0 = torch.tensor(x0), torch.tensor(v0)
    np.testing.assert_allclose(Fn.hvp(fg, tg.tensor(x0), tg.tensor(v0))[1].numpy(),
                               torch.autograd.functional.hvp(ft, X0, V0)[1].numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Fn.hessian(fg, tg.tensor(x0)).numpy(),
                               torch.autograd.functional.hessian(ft, X0).numpy(), rtol=1e-12, atol=1e-12)

    def make_map(lib):
        Am = lib.tensor(A0[:10])
        return lambda x: lib.tanh(Am @ lib.sin(x)) * x + x.exp()
    mt, mg = make_map(torch), make_map(tg)
    np.testing.assert_allclose(Fn.jacobian(mg, tg.tensor(x0)).numpy(),
                               torch.autograd.functional.jacobian(mt, X0, vectorize=True).numpy(), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(Fn.jvp(mg, tg.tensor(x0), tg.tensor(v0))[1].numpy(),
                               torch.func.jvp(mt, (X0,), (V0,))[1].numpy(), rtol=1e-12, atol=1e-12)


def _rosen(x):
    h = x[:-1]
    return (100 * (x[1:] - h ** 2) ** 2 + (1 - h) ** 2).sum()


def test_recorded_tape_jvp_hvp_jacobian_hessian():
    x0, x1, v = RNG.uniform(-2, 2, 6), RNG.uniform(-2, 2, 6), RNG.standard_normal(6)
    R = tg.record(_rosen, x0)
    for x in (x0, x1):              # the recording's point and another one, replayed
        y, hv = R.hvp(x, v)
        assert y == pytest.approx(float(_rosen(tg.tensor(x))))
        np.testing.assert_allclose(hv, _fd_hvp(_rosen, [x], [v])[0], rtol=1e-6, atol=1e-6)
        H = R.hessian(x)
        np.testing.assert_allclose(H, _hessian_fd(_rosen, x), rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(H @ v, hv, rtol=1e-12, atol=1e-9)
        y, jv = R.jvp(x, v)
        np.testing.assert_allclose(jv, _grad(_rosen, [x])[0] @ v, rtol=1e-12)

    def g(x, w):
        return tg.tanh(x * w) * x[0]
    R2 = tg.record(g, x0, v)
    Jx, Jw = R2.jacobian((x1, v))
    cols = np.stack([_fd_jvp(lambda t: g(t, tg.tensor(v)), [x1], [np.eye(6)[j]]) for j in range(6)], 1)
    np.testing.assert_allclose(Jx, cols, rtol=1e-6, atol=1e-8)
    assert Jw.shape == (6, 6)
    np.testing.assert_allclose(R2.jacobian((x1, v), argnums=0), Jx, rtol=1e-14)
    with pytest.raises(ValueError, match="2 tensors given for 1"):
        tg.record(lambda x, w: (x * w).sum(), x0, v).hvp((x0, v), (v, v), argnums=0)
    with pytest.raises(RuntimeError, match="should contain a single element"):
        R2.hessian((x0, v))


def test_recorded_tape_of_an_op_without_a_forward_rule_takes_reverse_passes(monkeypatch):
    """A tg.autograd.Function and svd with full_matrices of a tall matrix have no
    forward-mode rule: a recorded tape's jvp, hvp, jacobian and hessian take reverse passes
    over the replay, with the same values as functional's (checked against differences),
    at another point than the recording's, for one argument and for several, and with
    argnums."""
    rec = sys.modules["tapegrad.replay.record"]     # (the package exports the function record)
    taken = []
    for name in ("_reverse_jvp", "_reverse_second", "_reverse_jacobian"):
        monkeypatch.setattr(rec, name, lambda *a, _f=getattr(rec, name), _n=name: taken.append(_n) or _f(*a))
    x0, x1 = RNG.standard_normal(9), RNG.standard_normal(9)
    w0, v, u = RNG.standard_normal(9), RNG.standard_normal(9), RNG.standard_normal(9)

    def f(x, w):
        A = x.reshape(3, 3)
        S = A @ A.T + tg.diag(w[:3].exp())
        return (tg.linalg.svd(A[:, :2])[1] ** 3).sum() + (_Cube.apply(S) * S).sum() + (x * w).sin().sum()
    R = tg.record(f, x0, w0)

    def fx(x):
        return f(x, tg.tensor(w0))
    y, hv = R.hvp((x1, w0), (v, u))
    assert y == pytest.approx(float(f(tg.tensor(x1), tg.tensor(w0))))
    for got, want in zip(hv, _fd_hvp(f, [x1, w0], [v, u])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    _, hvx = R.hvp((x1, w0), v, argnums=0)
    np.testing.assert_allclose(hvx, _fd_hvp(fx, [x1], [v])[0], rtol=1e-5, atol=1e-5)
    H = R.hessian((x1, w0), argnums=0)
    np.testing.assert_allclose(H, _hessian_fd(fx, x1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(H @ v, hvx, rtol=1e-10, atol=1e-10)
    Hs = R.hessian((x1, w0))
    assert [[b.shape for b in row] for row in Hs] == [[(9, 9)] * 2] * 2
    np.testing.assert_allclose(Hs[0][0], H, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Hs[0][1] @ u + Hs[0][0] @ v, hv[0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(Hs[1][0], Hs[0][1].T, rtol=1e-9, atol=1e-9)
    y, jv = R.jvp((x1, w0), (v, u))
    np.testing.assert_allclose(jv, _fd_jvp(f, [x1, w0], [v, u]), rtol=1e-6, atol=1e-6)

    def g(x):
        return tg.fft.rfft(x).abs() * _Cube.apply(x).sum()
    Rg = tg.record(g, x0)
    J = Rg.jacobian(x1)
    cols = np.stack([_fd_jvp(g, [x1], [np.eye(9)[j]]) for j in range(9)], 1)
    assert J.shape == (5, 9)
    np.testing.assert_allclose(J, cols, rtol=1e-6, atol=1e-6)
    _, jv = Rg.jvp(x1, v)
    np.testing.assert_allclose(jv, J @ v, rtol=1e-10, atol=1e-10)
    # the tape's ops after a fallback record on a new, short tape
    t = tg.tensor(x1, requires_grad=True)
    (t * 2).sum().backward()
    assert t.grad.tolist() == [2.0] * 9
    assert sorted(set(taken)) == ["_reverse_jacobian", "_reverse_jvp", "_reverse_second"]


def test_a_tape_from_a_file_takes_numpys_walks_for_second_order(tmp_path, monkeypatch):
    """An untrusted tape file (``load_tape``) replays with bounds-checked NumPy: its
    jvp, hvp, hessian and jacobian, with and without forward-mode rules (svd with full_matrices
    of a tall matrix has none),
    use neither a compiled tangent program nor the compiled reverse sweep."""
    from tapegrad.autograd import engine, tangent_program as TP
    x0, x1, v = RNG.standard_normal(9), RNG.standard_normal(9), RNG.standard_normal(9)
    fns = [lambda x: (x.sin() ** 2 * x).sum(),
           lambda x: (tg.linalg.svd(x.reshape(3, 3)[:, :2])[1] ** 3).sum() + (x ** 3).sum()]
    want = []
    for i, f in enumerate(fns):
        R = tg.record(f, x0)
        R.save(str(tmp_path / ("t%d.npz" % i)))
        want.append((R.hvp(x1, v)[1], R.hessian(x1), R.jvp(x1, v)[1], R.jacobian(x1), _fd_hvp(f, [x1], [v])[0]))

    def compiled(*a, **k):
        raise AssertionError("a compiled path on an untrusted tape")
    for name in ("first_order", "second_order"):
        monkeypatch.setattr(TP, name, compiled)
    monkeypatch.setattr(engine, "run_backward", compiled)
    for i, f in enumerate(fns):
        L = tg.load_tape(str(tmp_path / ("t%d.npz" % i)))
        got = (L.hvp(x1, v)[1], L.hessian(x1), L.jvp(x1, v)[1], L.jacobian(x1))
        for a, b in zip(got, want[i]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[1] @ v, got[0], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(got[0], want[i][4], rtol=1e-5, atol=1e-5)


def test_func_transforms_walk_the_tape_outside_other_transforms(fast_only):
    x0 = RNG.standard_normal(5)

    def f(x):
        return tg.tanh(x) * x.sum() + x.exp()
    cols = np.stack([_fd_jvp(f, [x0], [np.eye(5)[j]]) for j in range(5)], 1)
    np.testing.assert_allclose(tg.func.jacfwd(f)(tg.tensor(x0)).numpy(), cols, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(tg.func.jacrev(f)(tg.tensor(x0)).numpy(), cols, rtol=1e-6, atol=1e-8)
    v = RNG.standard_normal(5)
    _, jv = tg.func.jvp(f, (tg.tensor(x0),), (tg.tensor(v),))
    np.testing.assert_allclose(jv.numpy(), cols @ v, rtol=1e-6, atol=1e-8)


def test_func_hessian_composes_through_the_tape():
    x0 = RNG.standard_normal(4)

    def s(x):
        return (tg.sin(x) * x.roll(1)).sum() ** 2
    H = tg.func.hessian(s)(tg.tensor(x0))
    np.testing.assert_allclose(H.numpy(), _hessian_fd(s, x0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(H.numpy(), Fn.hessian(s, tg.tensor(x0)).numpy(), rtol=1e-12, atol=1e-12)
    xr = tg.tensor(x0, requires_grad=True)     # inside a differentiable context: still exact and differentiable
    g = tg.func.jacfwd(lambda t: t.sin() * t)(xr)
    assert g.requires_grad
    g.trace().backward()
    np.testing.assert_allclose(xr.grad.numpy(), 2 * np.cos(x0) - x0 * np.sin(x0), rtol=1e-12)


def test_work_on_an_older_tape_is_not_missed():
    """An input used on a tape the function's result imports from: the tangent pass over the
    last tape would not see that work, so the reverse-mode path is taken, with exact values."""
    from tapegrad.core import tape as _tp
    x0 = RNG.standard_normal(3)

    def f(x):
        z = x * x
        _tp.rotate()                # (what a backward inside the function does)
        return (z.sin() * x).sum()
    xs = (tg.tensor(x0).requires_grad_(True),)
    out = f(*xs)
    assert Fn._Tape.of(xs, (out,)) is None
    np.testing.assert_allclose(Fn.hessian(f, tg.tensor(x0)).numpy(), _hessian_fd(f, x0), rtol=1e-5, atol=1e-6)


def test_jacobian_through_a_function_without_jvp_walks_the_tape():
    """The reverse-mode Jacobian needs only a Function's backward (every row at once):
    it walks the tape; the forward-mode one needs jvp, and falls back without it."""
    x0 = RNG.standard_normal(5)

    def f(x):
        return _Cube.apply(x.sin()) * x
    ins = (tg.tensor(x0, requires_grad=True),)
    J = Fn._on_tape(Fn._jacobian_on_tape, ins, (f(*ins),), False)
    assert J is not None
    fd = np.stack([_fd_jvp(f, [x0], [e]) for e in np.eye(5)], 1)
    np.testing.assert_allclose(J[0][0].numpy(), fd, rtol=1e-6, atol=1e-8)
    ins = (tg.tensor(x0, requires_grad=True),)
    assert Fn._on_tape(Fn._jacobian_on_tape, ins, (f(*ins),), True) is None
    np.testing.assert_allclose(Fn.jacobian(f, tg.tensor(x0), strategy="forward-mode", vectorize=True).numpy(), fd,
                               rtol=1e-6, atol=1e-8)
