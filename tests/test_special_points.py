"""Derivatives at special points (signed zeros, infinities, poles, quotients past 2**52), where
the ways one elementwise rule is evaluated could part: the eager gradient (compiled and
interpreted reverse), forward mode by the NumPy walk (tangent_program.MODE "off") and by the
compiled program ("now"), and H v (walk, program, double backward).  The expected values are
PyTorch 2.13's, written out; the *_against_torch tests compare with torch itself where it is
installed.

- ``x ** p`` with a number p is PyTorch's scalar pow: ``x ** -0.5`` in its derivative is
  1 / sqrt(x), -inf at -0.0 and nan at -inf (not pow's inf and 0);
- ``pow(x, b)`` with a tensor b is its pow of two tensors, pow's values: no sqrt there;
- trigamma (digamma's derivative) is 0 at +inf, 1e-300 at 1e300;
- remainder's derivative in b is -(a // b) by PyTorch's floor division: a / b where b is 0.
"""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.autograd import functional as Fn
from tapegrad.autograd import tangent_program as TP

inf, nan = math.inf, math.nan

X = np.array([-0.0, -inf, 0.0, inf, 4.0, -4.0])

# x ** p (p a number): p -> (d/dx, d2/dx2) at X
POW_SCALAR = {
    0.5: ([-inf, nan, inf, 0.0, 0.25, nan], [-inf, -0.0, -inf, -0.0, -0.03125, nan]),
    1.5: ([-0.0, nan, 0.0, inf, 3.0, nan], [-inf, nan, inf, 0.0, 0.375, nan]),
    -0.5: ([-inf, -0.0, -inf, -0.0, -0.0625, nan], [inf, 0.0, inf, 0.0, 0.0234375, nan]),
}
# pow(x, b) (b a tensor): b -> (pow(X, b), d/dx, d2/dx2 or None) at X
POW_TENSOR = {
    0.5: ([0.0, inf, 0.0, inf, 2.0, nan], [inf, 0.0, inf, 0.0, 0.25, nan], [-inf, -0.0, -inf, -0.0, -0.03125, nan]),
    1.5: ([0.0, inf, 0.0, inf, 8.0, nan], [0.0, inf, 0.0, inf, 3.0, nan], [inf, 0.0, inf, 0.0, 0.375, nan]),
    -0.5: ([inf, 0.0, inf, 0.0, 0.5, nan], [-inf, -0.0, -inf, -0.0, -0.0625, nan],
           [inf, 0.0, inf, 0.0, 0.0234375, nan]),
    # (its second derivative at -inf has the opposite sign to PyTorch's pow(-inf, 0.5) = inf)
    2.5: ([0.0, inf, 0.0, inf, 32.0, nan], [0.0, inf, 0.0, inf, 20.0, nan], None),
}

# digamma: trigamma and tetragamma (SciPy's at -inf and the poles: PyTorch's trigamma gives nan at
# -inf and a large finite number at -1)
DG_X = np.array([inf, 1e300, 2.5, 0.0, -0.0, -1.0, -inf])
TRIGAMMA = [0.0, 1e-300, 0.4903577561002349, inf, inf, inf, inf]
TETRAGAMMA = [-0.0, -0.0, -0.23620405164172736, -inf, -inf, -inf, -inf]

# remainder(a, b): d/db = -(a // b), PyTorch's floor division (a / b where b is 0)
REM_A = np.array([1.0, -1.0, 0.0, 1.0, 9007199254740991.0, -3.0, 5.0, inf, 1.0, -1.0, 2.5, 7.0])
REM_B = np.array([0.0, 0.0, 0.0, -0.0, 1.0, 2.0, -2.0, 1.0, inf, inf, 0.5, nan])
REM_DB = [-inf, inf, nan, inf, -9007199254740991.0, 2.0, 3.0, nan, -0.0, 1.0, -5.0, nan]


@pytest.fixture(autouse=True)
def _quiet():
    with np.errstate(all="ignore"):         # (sqrt(-4), 1 / 0 at the points chosen: NumPy's warnings)
        yield


# -- each way of evaluating the rules --------------------------------------------------
def _grads(f, x):
    """d sum(f(x)) / dx by the compiled reverse and by the interpreted one."""
    out = []
    for mode in ("never", "always"):
        old, engine.INTERPRET[0] = engine.INTERPRET[0], mode
        try:
            t = tg.tensor(x, requires_grad=True)
            g, = tg.autograd.grad(f(t).sum(), t)
        finally:
            engine.INTERPRET[0] = old
        out.append(g.numpy())
    return out


def _forward(call, mode):
    """``call()`` (a functional jvp or hvp) with the compiled programs off (the NumPy walk)
    or on ("now": compiled in the caller at the first walk), checking the program ran."""
    old = TP.MODE[0], TP.COMPILE_AFTER
    TP.MODE[0], TP.COMPILE_AFTER = mode, 1
    try:
        runs = TP.RUNS[0]
        r = call()
    finally:
        TP.MODE[0], TP.COMPILE_AFTER = old
    if mode == "off":
        assert TP.RUNS[0] == runs
    elif engine.INTERPRET[0] != "always":
        assert TP.RUNS[0] > runs, [str(v[1]) for v in TP._PROGRAMS.values() if isinstance(v[1], Exception)]
    return r


def _jvps(f, x):
    """J 1 of the elementwise f by the walk and by the program."""
    v = np.ones_like(x)
    return [_forward(lambda: Fn.jvp(f, tg.tensor(x), tg.tensor(v))[1].numpy(), mode) for mode in ("off", "now")]


def _hvps(f, x):
    """H 1 of sum(f(x)) (the second derivatives of the elementwise f) by the walk, the
    program and double backward."""
    v = np.ones_like(x)
    out = [_forward(lambda: Fn.hvp(lambda t: f(t).sum(), tg.tensor(x), tg.tensor(v))[1].numpy(), mode)
           for mode in ("off", "now")]
    t = tg.tensor(x, requires_grad=True)
    g, = tg.autograd.grad(f(t).sum(), t, create_graph=True)
    h, = tg.autograd.grad(g, t, tg.tensor(v))
    return out + [h.numpy()]


FIRST = ("compiled reverse", "interpreted reverse", "jvp walk", "jvp program")
SECOND = ("hvp walk", "hvp program", "double backward")


def _first(f, x):
    return dict(zip(FIRST, _grads(f, x) + _jvps(f, x)))


def _second(f, x):
    return dict(zip(SECOND, _hvps(f, x)))


def _assert_each(got, want, rtol=0.0):
    for path, g in got.items():
        if rtol:
            np.testing.assert_allclose(g, want, rtol=rtol, atol=0, equal_nan=True, err_msg=path)
        else:
            np.testing.assert_array_equal(g, want, err_msg=path)


# -- the expected values ---------------------------------------------------------------
def test_pow_scalar_exponent(fast_only):
    for p, (d1, d2) in POW_SCALAR.items():
        _assert_each(_first(lambda x: x ** p, X), d1)
        _assert_each(_second(lambda x: x ** p, X), d2)


@pytest.mark.parametrize("shape", [(1,), (), (6,)], ids=["one element", "0-d", "full"])
def test_pow_tensor_exponent(shape, fast_only):
    for b, (y, d1, d2) in POW_TENSOR.items():
        e = tg.tensor(np.full(shape, b))
        out = tg.pow(tg.tensor(X), e).numpy()
        np.testing.assert_array_equal(out, y)
        assert not np.signbit(out[0])           # (pow(-0.0, b) is +0.0 for a b > 0 not an odd integer)
        _assert_each(_first(lambda x: tg.pow(x, e), X), d1)
        if d2 is not None:
            _assert_each(_second(lambda x: tg.pow(x, e), X), d2)


def test_pow_tensor_exponent_one_number():
    """Every input one number: the single-number reverse."""
    for b, (_, d1, _) in POW_TENSOR.items():
        for xi, want in zip(X, d1):
            x = tg.tensor(xi, requires_grad=True)
            g, = tg.autograd.grad(tg.pow(x, tg.tensor(b)), x)
            np.testing.assert_array_equal(g.numpy(), want)


def test_digamma_derivatives(fast_only):
    _assert_each(_first(tg.digamma, DG_X), TRIGAMMA, rtol=1e-15)
    _assert_each(_second(tg.digamma, DG_X), TETRAGAMMA, rtol=1e-15)
    # polygamma(1, x)'s derivative is tapegrad's own polygamma(2, x), -0.0 at inf (SciPy's;
    # PyTorch's polygamma(2, inf) is nan)
    _assert_each(_first(lambda x: tg.polygamma(1, x), DG_X[:3]), TETRAGAMMA[:3], rtol=1e-15)
    np.testing.assert_array_equal(tg.polygamma(2, tg.tensor(DG_X[:3])).numpy()[:2], [0.0, 0.0])


def test_remainder_derivatives(fast_only):
    _assert_each(_first(lambda b: tg.remainder(tg.tensor(REM_A), b), REM_B), REM_DB)
    _assert_each(_first(lambda a: tg.remainder(a, tg.tensor(REM_B)), REM_A), np.ones(len(REM_A)))
    hv = dict(zip(SECOND[:2], _hvps(lambda b: tg.remainder(tg.tensor(REM_A), b), REM_B)[:2]))
    _assert_each(hv, np.zeros(len(REM_B)))


# -- against PyTorch --------------------------------------------------------------------
def _torch_first(torch, f, x):
    """PyTorch's J 1 (forward mode) and its gradient of the sum, which must agree."""
    xt = torch.tensor(x, dtype=torch.float64)
    jv = torch.func.jvp(f, (xt,), (torch.ones_like(xt),))[1].numpy()
    xr = xt.clone().requires_grad_(True)
    g, = torch.autograd.grad(f(xr).sum(), xr)
    np.testing.assert_array_equal(jv, g.numpy())
    return jv


def _torch_second(torch, f, x):
    xt = torch.tensor(x, dtype=torch.float64)
    return torch.autograd.functional.hvp(lambda t: f(t).sum(), xt, torch.ones_like(xt))[1].numpy()


def test_pow_scalar_exponent_against_torch(fast_only):
    torch = pytest.importorskip("torch")
    for p, (d1, d2) in POW_SCALAR.items():
        want = _torch_first(torch, lambda x: x ** p, X)
        np.testing.assert_array_equal(want, d1)
        _assert_each(_first(lambda x: x ** p, X), want)
        want = _torch_second(torch, lambda x: x ** p, X)
        np.testing.assert_array_equal(want, d2)
        _assert_each(_second(lambda x: x ** p, X), want)


def test_pow_tensor_exponent_against_torch(fast_only):
    torch = pytest.importorskip("torch")
    xt = torch.tensor(X, dtype=torch.float64)
    for b, (y, d1, d2) in POW_TENSOR.items():
        e, et = tg.tensor([b]), torch.tensor([b], dtype=torch.float64)
        want = torch.pow(xt, et).numpy()
        np.testing.assert_array_equal(want, y)
        np.testing.assert_array_equal(tg.pow(tg.tensor(X), e).numpy(), want)
        want = _torch_first(torch, lambda x: torch.pow(x, et), X)
        np.testing.assert_array_equal(want, d1)
        _assert_each(_first(lambda x: tg.pow(x, e), X), want, rtol=1e-15)
        if d2 is not None:
            want = _torch_second(torch, lambda x: torch.pow(x, et), X)
            np.testing.assert_array_equal(want, d2)
            _assert_each(_second(lambda x: tg.pow(x, e), X), want, rtol=1e-15)


def test_digamma_against_torch(fast_only):
    torch = pytest.importorskip("torch")
    x = DG_X[:5]        # (not at -inf and -1.0: see TRIGAMMA)
    want = _torch_first(torch, torch.digamma, x)
    np.testing.assert_allclose(want, TRIGAMMA[:5], rtol=1e-9)     # (PyTorch's trigamma is less exact)
    _assert_each(_first(tg.digamma, x), want, rtol=1e-9)
    x = DG_X[1:5]       # (PyTorch's tetragamma is nan at inf)
    _assert_each(_second(tg.digamma, x), _torch_second(torch, torch.digamma, x), rtol=1e-9)


def test_remainder_and_fmod_against_torch(fast_only):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    # quotients past 2**52 too, where rounding d + 0.5 would be off by one
    a = np.concatenate([REM_A, rng.normal(size=20) * 1e17, rng.normal(size=20) * 10.0])
    b = np.concatenate([REM_B, rng.normal(size=20) * 3.0, rng.normal(size=20)])
    at = torch.tensor(a, dtype=torch.float64)
    for name in ("remainder", "fmod"):
        want = _torch_first(torch, lambda y: getattr(torch, name)(at, y), b)
        if name == "remainder":
            np.testing.assert_array_equal(want[:len(REM_DB)], REM_DB)
        _assert_each(_first(lambda y: getattr(tg, name)(tg.tensor(a), y), b), want)
