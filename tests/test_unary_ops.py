"""The unary elementwise ops asin, acos, atan, sinh, cosh, asinh, acosh, atanh, log2,
log10, exp2, square, reciprocal, rsqrt, ceil, trunc, frac (and the NumPy spellings
arcsin ... arctanh): rows of the elementwise table (ops/elementwise.py; square is
pow(x, 2), as in PyTorch), checked against PyTorch's values and gradients, also at
the domain boundaries, through the compiled and the interpreted reverse,
create_graph, and tg.compile / tg.record replays."""
import math

import numpy as np
import pytest

import tapegrad as tg

inf, nan = math.inf, math.nan

CASES = {
    # name: (inputs, torch's values, torch's gradient of the sum), float64
    "asin": ([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0],
             [-1.5707963267948966, -0.5235987755982989, 0.0, 0.5235987755982989, 1.5707963267948966, nan],
             [inf, 1.1547005383792517, 1.0, 1.1547005383792517, inf, nan]),
    "acos": ([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0],
             [3.141592653589793, 2.0943951023931957, 1.5707963267948966, 1.0471975511965976, 0.0, nan],
             [-inf, -1.1547005383792517, -1.0, -1.1547005383792517, -inf, nan]),
    "atan": ([-inf, -2.0, 0.0, 0.5, 3.0, inf],
             [-1.5707963267948966, -1.1071487177940904, 0.0, 0.4636476090008061, 1.2490457723982544, 1.5707963267948966],
             [0.0, 0.2, 1.0, 0.8, 0.1, 0.0]),
    "sinh": ([-2.0, -0.5, 0.0, 1.0, 3.0, inf],
             [-3.626860407847019, -0.5210953054937474, 0.0, 1.1752011936438014, 10.017874927409903, inf],
             [3.7621956910836314, 1.1276259652063807, 1.0, 1.5430806348152437, 10.067661995777765, inf]),
    "cosh": ([-2.0, -0.5, 0.0, 1.0, 3.0, inf],
             [3.7621956910836314, 1.1276259652063807, 1.0, 1.5430806348152437, 10.067661995777765, inf],
             [-3.626860407847019, -0.5210953054937474, 0.0, 1.1752011936438014, 10.017874927409903, inf]),
    "asinh": ([-inf, -2.0, 0.0, 0.5, 3.0, 1e+300],
             [-inf, -1.4436354751788103, 0.0, 0.48121182505960347, 1.8184464592320668, 691.4686750787736],
             [0.0, 0.4472135954999579, 1.0, 0.8944271909999159, 0.31622776601683794, 0.0]),
    "acosh": ([-1.0, 0.5, 1.0, 1.5, 3.0, inf],
             [nan, nan, 0.0, 0.9624236501192069, 1.762747174039086, inf],
             [inf, nan, inf, 0.8944271909999159, 0.35355339059327373, 0.0]),
    "atanh": ([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0],
             [-inf, -0.5493061443340548, 0.0, 0.5493061443340548, inf, nan],
             [inf, 1.3333333333333333, 1.0, 1.3333333333333333, inf, -0.3333333333333333]),
    "log2": ([-1.0, -0.0, 0.0, 0.5, 8.0, inf],
             [nan, -inf, -inf, -1.0, 3.0, inf],
             [-1.4426950408889634, -inf, inf, 2.8853900817779268, 0.18033688011112042, 0.0]),
    "log10": ([-1.0, -0.0, 0.0, 0.5, 1000.0, inf],
             [nan, -inf, -inf, -0.3010299956639812, 3.0, inf],
             [-0.43429448190325187, -inf, inf, 0.8685889638065037, 0.00043429448190325184, 0.0]),
    "exp2": ([-inf, -1100.0, -1.0, 0.0, 0.5, 10.0, 1100.0],
             [0.0, 0.0, 0.5, 1.0, 1.4142135623730951, 1024.0, inf],
             [0.0, 0.0, 0.34657359027997264, 0.6931471805599453, 0.9802581434685472, 709.782712893384, inf]),
    "square": ([-3.0, -0.5, 0.0, 1.5, inf],
             [9.0, 0.25, 0.0, 2.25, inf],
             [-6.0, -1.0, 0.0, 3.0, inf]),
    "reciprocal": ([-2.0, -0.0, 0.0, 0.25, 4.0, inf],
             [-0.5, -inf, inf, 4.0, 0.25, 0.0],
             [-0.25, -inf, -inf, -16.0, -0.0625, -0.0]),
    "rsqrt": ([-1.0, -0.0, 0.0, 0.25, 4.0, inf],
             [nan, -inf, inf, 2.0, 0.5, 0.0],
             [nan, inf, -inf, -4.0, -0.0625, -0.0]),
    "ceil": ([-1.5, -0.5, 0.0, 0.3, 2.0, inf, nan],
             [-1.0, -0.0, 0.0, 1.0, 2.0, inf, nan],
             [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    "trunc": ([-1.5, -0.5, 0.0, 0.3, 2.0, inf, nan],
             [-1.0, -0.0, 0.0, 0.0, 2.0, inf, nan],
             [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    "frac": ([-1.5, -0.5, 0.0, 0.3, 2.0, 1e+300, inf, nan],
             [-0.5, -0.5, 0.0, 0.3, 0.0, 0.0, nan, nan],
             [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
}

NAMES = sorted(CASES)
GRAD_FN = {"asin": "AsinBackward0", "acos": "AcosBackward0", "atan": "AtanBackward0", "sinh": "SinhBackward0",
           "cosh": "CoshBackward0", "asinh": "AsinhBackward0", "acosh": "AcoshBackward0", "atanh": "AtanhBackward0",
           "log2": "Log2Backward0", "log10": "Log10Backward0", "exp2": "Exp2Backward0", "square": "PowBackward0",
           "reciprocal": "ReciprocalBackward0", "rsqrt": "RsqrtBackward0", "ceil": "CeilBackward0",
           "trunc": "TruncBackward0", "frac": "FracBackward0"}
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh",
           "arctanh": "atanh"}
# inputs away from the domain boundaries and the integers (gradcheck, second derivatives)
DOMAIN = {"asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atanh": (-0.9, 0.9), "acosh": (1.2, 3.0),
          "log2": (0.3, 3.0), "log10": (0.3, 3.0), "rsqrt": (0.3, 3.0), "reciprocal": (0.3, 3.0),
          "ceil": (1.1, 1.9), "trunc": (-1.9, -1.1), "frac": (-0.9, -0.1)}
rng = np.random.default_rng(18)


def inside(name, *shape):
    lo, hi = DOMAIN.get(name, (-2.0, 2.0))
    return rng.uniform(lo, hi, shape)


def _check(actual, expected, rtol=1e-15, signed_zeros=False):
    """Equal to rtol (inf and nan as themselves), and, with ``signed_zeros``, zeros
    of the same sign (a gradient's sign of zero is not compared: an adjoint summed
    into a zeroed buffer is +0.0 where PyTorch's leaf may keep a -0.0)."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=0)
    if signed_zeros:
        zeros = expected == 0
        np.testing.assert_array_equal(np.signbit(actual[zeros]), np.signbit(expected[zeros]))


@pytest.mark.parametrize("name", NAMES)
def test_values_and_gradients_at_the_edges_are_torchs(name, reverse):
    xs, values, grads = CASES[name]
    x = tg.tensor(xs, requires_grad=True)
    with np.errstate(all="ignore"):
        y = getattr(tg, name)(x)
        y.sum().backward()
        method = getattr(x.detach(), name)()
    assert y.grad_fn.name() == GRAD_FN[name] and y.dtype == tg.float64
    _check(y.detach().numpy(), values, signed_zeros=True)
    _check(x.grad.numpy(), grads)
    np.testing.assert_array_equal(method.numpy(), y.detach().numpy())


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_numpy_spellings_are_aliases(alias):
    name = ALIASES[alias]
    assert getattr(tg, alias) is getattr(tg, name)
    assert getattr(tg.Tensor, alias) is getattr(tg.Tensor, name)
    x = tg.tensor([0.5, -0.25], requires_grad=True) if name != "acosh" else tg.tensor([1.5, 2.0], requires_grad=True)
    y = getattr(x, alias)()
    assert y.grad_fn.name() == GRAD_FN[name]
    np.testing.assert_array_equal(y.detach().numpy(), getattr(np, alias)(x.detach().numpy()))


@pytest.mark.parametrize("name", ["ceil", "trunc"])
def test_step_functions_pass_zero_whatever_the_incoming_gradient(name, reverse):
    # PyTorch's zeros_like(grad): +0.0 also for an infinite, nan or negative incoming gradient
    x = tg.tensor([0.5, -1.5, 2.25], requires_grad=True)
    getattr(tg, name)(x).backward(tg.tensor([inf, nan, -1.0]))
    _check(x.grad.numpy(), [0.0, 0.0, 0.0], signed_zeros=True)


def test_reciprocal_of_a_single_number(reverse):
    # one float64 element takes the recorder's single-number path; 1 / 0 falls back to NumPy's inf
    for v, want, grad in ((4.0, 0.25, -0.0625), (0.0, inf, -inf), (-0.0, -inf, -inf)):
        x = tg.tensor(v, requires_grad=True)
        with np.errstate(divide="ignore"):
            y = x.reciprocal()
            (y * 1.0).backward()
        assert y.item() == want and x.grad.item() == grad


def test_literal_cases_are_torchs():
    torch = pytest.importorskip("torch")
    for name, (xs, values, grads) in CASES.items():
        x = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
        y = getattr(torch, name)(x)
        y.sum().backward()
        assert type(y.grad_fn).__name__ == GRAD_FN[name]
        _check(y.detach().numpy(), values, rtol=0, signed_zeros=True)
        _check(x.grad.numpy(), grads, rtol=0, signed_zeros=True)


@pytest.mark.parametrize("name", NAMES)
def test_matches_torch_on_random_inputs(name, reverse):
    torch = pytest.importorskip("torch")
    xv = np.concatenate([inside(name, 20), rng.uniform(-3.0, 3.0, 20)])      # (in and out of the domain)
    w = rng.standard_normal(40)
    x, xt = tg.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    with np.errstate(all="ignore"):
        y = getattr(tg, name)(x)
        (y * tg.tensor(w)).sum().backward()
    yt = getattr(torch, name)(xt)
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-15, atol=0)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-15, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_second_derivative_matches_torch(name, reverse):
    torch = pytest.importorskip("torch")
    xv = inside(name, 6)
    x, xt = tg.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    (g,) = tg.autograd.grad(getattr(tg, name)(x).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad(getattr(torch, name)(xt).sum(), xt, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-15)
    # (ceil, trunc: PyTorch's zeros; frac: the incoming gradient itself; neither depends on x)
    assert g.requires_grad == gt.requires_grad == (name not in ("ceil", "trunc", "frac"))
    if not gt.requires_grad:
        return
    w = rng.standard_normal(6)
    (gg,) = tg.autograd.grad((g * tg.tensor(w)).sum(), x)
    (ggt,) = torch.autograd.grad((gt * torch.tensor(w)).sum(), xt)
    np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=1e-13)


def _second_derivative(name, v):
    """The second derivative by hand (the literal check of create_graph)."""
    return {"asin": v / (1 - v * v) ** 1.5, "acos": -v / (1 - v * v) ** 1.5, "atan": -2 * v / (1 + v * v) ** 2,
            "sinh": math.sinh(v), "cosh": math.cosh(v), "asinh": -v / (1 + v * v) ** 1.5,
            "acosh": -v / (v * v - 1) ** 1.5, "atanh": 2 * v / (1 - v * v) ** 2, "log2": -1 / (v * v * math.log(2)),
            "log10": -1 / (v * v * math.log(10)), "exp2": 2 ** v * math.log(2) ** 2, "square": 2.0,
            "reciprocal": 2 / v ** 3, "rsqrt": 0.75 * v ** -2.5}[name]


@pytest.mark.parametrize("name", NAMES)
def test_create_graph_second_derivative_by_hand(name, reverse):
    v = {"acosh": 1.7, "ceil": 1.3, "trunc": -1.3, "frac": -0.4}.get(name, 0.6)
    x = tg.tensor(v, requires_grad=True)
    (g,) = tg.autograd.grad(getattr(tg, name)(x) * 1.0, x, create_graph=True)
    if name in ("ceil", "trunc", "frac"):       # (a constant gradient, which nothing differentiates)
        assert g.item() == (1.0 if name == "frac" else 0.0) and not g.requires_grad
        return
    (gg,) = tg.autograd.grad(g * 1.0, x)
    assert gg.item() == pytest.approx(_second_derivative(name, v), rel=1e-13)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)], ids=str)
def test_gradcheck_and_gradgradcheck(name, shape):
    x = tg.tensor(inside(name, *shape), requires_grad=True)
    f = getattr(tg, name)
    assert tg.autograd.gradcheck(f, (x,))
    assert tg.autograd.gradgradcheck(f, (x,))


def _eager(name):
    f = getattr(tg, name)
    return lambda x: (f(x) * x).sum()


def _expected(name, xv):
    """Value and gradient of sum(f(x) * x) from torch's formulas, in NumPy."""
    f, df = {"asin": (np.arcsin, lambda v, y: 1 / np.sqrt(1 - v * v)),
             "acos": (np.arccos, lambda v, y: -1 / np.sqrt(1 - v * v)),
             "atan": (np.arctan, lambda v, y: 1 / (1 + v * v)),
             "sinh": (np.sinh, lambda v, y: np.cosh(v)),
             "cosh": (np.cosh, lambda v, y: np.sinh(v)),
             "asinh": (np.arcsinh, lambda v, y: 1 / np.sqrt(v * v + 1)),
             "acosh": (np.arccosh, lambda v, y: 1 / np.sqrt(v * v - 1)),
             "atanh": (np.arctanh, lambda v, y: 1 / (1 - v * v)),
             "log2": (np.log2, lambda v, y: 1 / (v * np.log(2))),
             "log10": (np.log10, lambda v, y: 1 / (v * np.log(10))),
             "exp2": (np.exp2, lambda v, y: y * np.log(2)),
             "square": (np.square, lambda v, y: 2 * v),
             "reciprocal": (np.reciprocal, lambda v, y: -y * y),
             "rsqrt": (lambda v: 1 / np.sqrt(v), lambda v, y: -0.5 * y ** 3),
             "ceil": (np.ceil, lambda v, y: 0 * v),
             "trunc": (np.trunc, lambda v, y: 0 * v),
             "frac": (lambda v: v - np.trunc(v), lambda v, y: 1 + 0 * v)}[name]
    y = f(xv)
    return (y * xv).sum(), y + df(xv, y) * xv


@pytest.mark.parametrize("name", NAMES)
def test_compile_replays_with_new_inputs(name):
    cf = tg.compile(_eager(name))
    for _ in range(3):
        xv = inside(name, 5)
        x = tg.tensor(xv, requires_grad=True)
        out = cf(x)
        out.backward()
        v, g = _expected(name, xv)
        assert out.item() == pytest.approx(v, rel=1e-14)
        np.testing.assert_allclose(x.grad.numpy(), g, rtol=1e-13)
    assert cf.stats.recordings == 1 and cf.stats.replays == 2


@pytest.mark.parametrize("name", NAMES)
def test_record_replays_with_new_inputs(name):
    tape = tg.record(_eager(name), inside(name, 4))
    xv = inside(name, 4)
    v, g = tape.value_and_grad(xv)      # (one input: its gradient alone)
    want_v, want_g = _expected(name, xv)
    assert v == pytest.approx(want_v, rel=1e-14)
    np.testing.assert_allclose(g, want_g, rtol=1e-13)


@pytest.mark.parametrize("name", NAMES)
def test_single_number_chain_replays_in_the_compiled_scalar_loop(name):
    # 0-d tensors: the generated one-float forward and reverse of the row (unary_forward1, unary_reverse1)
    cf = tg.compile(_eager(name))
    for v in inside(name, 3):
        x = tg.tensor(v, requires_grad=True)
        out = cf(x)
        out.backward()
        want_v, want_g = _expected(name, np.array(v))
        assert out.item() == pytest.approx(want_v, rel=1e-14)
        assert x.grad.item() == pytest.approx(want_g.item(), rel=1e-13)
    assert cf.stats.replays == 2
    if name != "square":            # (square records pow(x, 2))
        R = cf.cache[next(iter(cf.cache))][0]
        assert R.scalar is True


# -- dtypes and errors ------------------------------------------------------------------
FLOAT_OF_INTEGERS = ["asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2",
                     "reciprocal", "rsqrt"]


@pytest.mark.parametrize("name", FLOAT_OF_INTEGERS)
def test_integers_and_bools_give_the_default_float(name):
    for dt in (tg.int64, tg.int8, tg.uint8, tg.bool):
        with np.errstate(all="ignore"):
            y = getattr(tg, name)(tg.tensor([1, 0], dtype=dt))
        assert y.dtype == tg.float64
        with np.errstate(all="ignore"):
            want = getattr(tg, name)(tg.tensor([1.0, 0.0]))
        np.testing.assert_array_equal(y.numpy(), want.numpy())
    for dt in (tg.float32, tg.float16):
        with np.errstate(all="ignore"):
            assert getattr(tg, name)(tg.tensor([0.5], dtype=dt)).dtype == dt


def test_integer_results_of_ceil_trunc_square():
    i = tg.tensor([3, -2], dtype=tg.int8)
    for name in ("ceil", "trunc"):
        y = getattr(tg, name)(i)
        assert y.dtype == tg.int8 and y.tolist() == [3, -2]
    assert tg.square(i).dtype == tg.int8 and tg.square(i).tolist() == [9, 4]
    b = tg.square(tg.tensor([True, False]))
    assert b.dtype == tg.int64 and b.tolist() == [1, 0]
    assert tg.square(tg.tensor([1.5], dtype=tg.float32)).dtype == tg.float32


def test_errors_are_torchs():
    for name in ("ceil", "trunc"):
        with pytest.raises(NotImplementedError, match=r"^\"%s_vml_cpu\" not implemented for 'Bool'$" % name):
            getattr(tg, name)(tg.tensor([True]))
    for dt, spelled in ((tg.int64, "Long"), (tg.int8, "Char"), (tg.uint8, "Byte"), (tg.bool, "Bool")):
        with pytest.raises(NotImplementedError, match=r"^\"frac_cpu\" not implemented for '%s'$" % spelled):
            tg.frac(tg.tensor([1], dtype=dt))
    with pytest.raises(TypeError, match=r"^square\(\): argument 'input' \(position 1\) must be Tensor, not float$"):
        tg.square(2.0)


def test_dtypes_and_errors_match_torch():
    torch = pytest.importorskip("torch")
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)      # (tapegrad's default)
    try:
        for name in NAMES:
            for dt in ("int64", "int8", "uint8", "bool", "float32", "float16", "float64"):
                v = np.array([1, 0, 3]).astype(dt)
                try:
                    want = getattr(torch, name)(torch.tensor(v))
                except Exception as e:      # noqa: BLE001  (the same error, or a failing test)
                    with pytest.raises(type(e)) as got:
                        getattr(tg, name)(tg.tensor(v))
                    assert str(got.value) == str(e), (name, dt)
                    continue
                with np.errstate(all="ignore"):
                    got = getattr(tg, name)(tg.tensor(v))
                assert got.dtype.name == str(want.dtype)[6:], (name, dt)
                np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64),
                                           rtol=1e-3 if dt == "float16" else 1e-6)
        with pytest.raises(TypeError) as e:
            torch.square(2.0)
        with pytest.raises(TypeError) as got:
            tg.square(2.0)
        assert str(got.value) == str(e.value)
    finally:
        torch.set_default_dtype(old)
