"""Ops compute inf and nan as IEEE arithmetic makes them without NumPy's
RuntimeWarnings ("divide by zero encountered in log", "overflow encountered in
exp"...), as PyTorch computes them silently: code that runs under ``-W error`` with
PyTorch runs with tapegrad (``core/quiet.py``).  The user's own NumPy calls keep
their error state.  Where PyTorch warns (``var`` with no degrees of freedom), its
warning is given instead of NumPy's."""
import warnings

import numpy as np
import pytest

import tapegrad as tg

SPECIAL = [0.0, -0.0, -1.0, 1.0, 2.0, np.inf, -np.inf, np.nan, 1e308, -1e308, 1e-320, 40.0, -40.0, 800.0]

UNARY = ["exp", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "asin",
         "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "reciprocal", "exp2", "expm1", "erf", "erfc",
         "erfinv", "lgamma", "digamma", "abs", "neg", "sign", "relu", "floor", "ceil", "trunc", "frac", "square",
         "logit", "sinc", "i0", "sum", "mean", "prod", "std", "norm"]
BINARY = ["add", "sub", "mul", "div", "pow", "atan2", "maximum", "minimum", "fmod", "remainder", "hypot", "xlogy",
          "copysign"]


def _x(M):
    return M.tensor(SPECIAL, dtype=M.float64, requires_grad=True)


def _y(M):
    return M.tensor(SPECIAL[::-1], dtype=M.float64, requires_grad=True)


def _v(M):
    return M.tensor([[0.0, -1.0, 1e308, -np.inf], [np.inf, np.nan, 40.0, -800.0]], dtype=M.float64,
                    requires_grad=True)


CASES = {"unary_" + u: (lambda M, u=u: getattr(M, u)(_x(M))) for u in UNARY}
CASES.update({"binary_" + b: (lambda M, b=b: getattr(M, b)(_x(M), _y(M))) for b in BINARY})
CASES.update({
    "softmax": lambda M: M.softmax(_v(M), 1),
    "log_softmax": lambda M: M.log_softmax(_v(M), 1),
    "softmax_all_minus_inf": lambda M: M.softmax(M.tensor([-np.inf, -np.inf], dtype=M.float64,
                                                          requires_grad=True), 0),
    "logsumexp": lambda M: M.logsumexp(_v(M), 1),
    "cumsum": lambda M: M.cumsum(_x(M), 0),
    "cumprod": lambda M: M.cumprod(_x(M), 0),
    "matmul_overflow": lambda M: M.matmul(M.full((2, 2), 1e200, dtype=M.float64, requires_grad=True),
                                          M.full((2, 2), 1e200, dtype=M.float64)),
    "vector_norm_overflow": lambda M: M.linalg.vector_norm(_v(M)),
    "div_by_zero_number": lambda M: M.ones(3, dtype=M.float64, requires_grad=True) / 0,
    "pow_half_of_zero": lambda M: M.zeros(3, dtype=M.float64, requires_grad=True) ** 0.5,
    "sqrt_of_zero": lambda M: M.zeros(3, dtype=M.float64, requires_grad=True).sqrt(),
    "log_of_zero_number": lambda M: M.tensor(0.0, dtype=M.float64, requires_grad=True).log(),
    "exp_overflow_number": lambda M: M.tensor(800.0, dtype=M.float64, requires_grad=True).exp(),
    "mul_overflow_number": lambda M: M.tensor(1e300, dtype=M.float64, requires_grad=True) * 1e300,
    "mean_of_inf_and_minus_inf": lambda M: M.tensor([np.inf, -np.inf], dtype=M.float64, requires_grad=True).mean(),
    "cross_entropy_minus_inf_logit": lambda M: M.nn.functional.cross_entropy(
        M.tensor([[-np.inf, 0.0]], dtype=M.float64, requires_grad=True), M.tensor([1])),
    "bce_at_0_and_1": lambda M: M.nn.functional.binary_cross_entropy(
        M.tensor([0.0, 1.0], dtype=M.float64, requires_grad=True), M.tensor([0.0, 1.0], dtype=M.float64)),
    "bce_of_saturated_sigmoid": lambda M: M.nn.functional.binary_cross_entropy(
        M.sigmoid(M.tensor([40.0, -40.0, 0.0], dtype=M.float64, requires_grad=True)),
        M.tensor([0.0, 1.0, 0.0], dtype=M.float64)),
})


def _run(M, fn):
    """The op, then its backward."""
    out = fn(M)
    if out.requires_grad:
        out.sum().backward()


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_numpy_warning_forward_or_backward(name, reverse):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(tg, CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_pytorch_is_silent_there_too(name):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(torch, CASES[name])


def test_second_derivatives_and_replays_are_silent():
    x = tg.tensor([0.0, 1.0, -1.0], requires_grad=True)
    f = tg.compile(lambda x: (x.log() * x).sum(), fuse=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g, = tg.autograd.grad((x.log() * x).sum(), x, create_graph=True)
        g.sum().backward()
        for _ in range(3):
            f(tg.tensor([0.0, 1.0, -1.0], requires_grad=True)).backward()
        tg.autograd.functional.hvp(lambda x: (x.log() * x).sum(), tg.tensor([0.0, 1.0]), tg.tensor([1.0, 1.0]))
    assert f.stats.replays >= 1


def test_the_users_numpy_error_state_is_kept():
    before = np.geterr()
    with np.errstate(divide="raise"):
        tg.tensor([0.0, 1.0], requires_grad=True).log().sum().backward()
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))
    assert np.geterr() == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.tensor([0.0]).log()
        with pytest.raises(RuntimeWarning, match="divide by zero encountered in log"):
            np.log(np.zeros(1))


def test_var_without_degrees_of_freedom_warns_as_pytorch():
    msg = ("var(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
           "(input numel divided by output numel).")
    for M in (tg, pytest.importorskip("torch")):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = M.ones(1, dtype=M.float64).var()
            wide = M.tensor([1.0, 2.0], dtype=M.float64).var(correction=3)
            std = M.ones(2, 3, dtype=M.float64).std(1, correction=3)
        assert np.isnan(out.item()) and wide.item() == np.inf and np.isnan(std.numpy()).all()
        assert [(type(x.message), str(x.message).split(" (Triggered")[0]) for x in w] == \
            [(UserWarning, msg)] * 2 + [(UserWarning, msg.replace("var()", "std()"))]
