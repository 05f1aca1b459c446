"""Elementwise operations: one line per op.

Each row gives the op's name, its grad_fn name, its forward (a NumPy function),
its reverse rule as an expression and its forward on one float as an expression
(the compiled replay of single numbers).  ``tapegrad.kernels.codegen`` checks
every row at import (``check_row``: an ``OpDefinitionError`` names the op and the
missing or unknown piece) and compiles the expressions into the Numba kernels; the
names a reverse rule uses decide what the tape keeps for the reverse pass
(``x``/``a``/``b``: inputs, ``y``: the output), so an op that needs nothing saves
nothing.  The same rules, evaluated over tensors, are the differentiable reverse.

Unary rules see ``g`` (the output's adjoint), ``x``, ``y`` and the scalar
parameters ``p``, ``q``; binary rules see ``g``, ``a``, ``b``, ``c`` (the
condition of ``where``) and ``y``.  Kinks and ties follow PyTorch: relu'(0) = 0,
clamp's boundary counts as inside, maximum splits a tie 0.5/0.5, ``x**0`` has a
zero derivative even at 0.
"""
import functools as _functools
import math as _math
import operator as _operator

import numpy as np

from ..core.dtypes import torch_name
from ..core.promotion import DEFAULT, result_type, with_number
from ..core.registry import BINARY, BINARY2, SAVE_MARKER, SAVES_BY_RG, UNARY, UNARY2, define
from .rule_language import power as _libm_power


class Unary:
    """One unary op: its name, grad_fn name, NumPy forward, reverse rule (an
    expression in ``g, x, y, p, q``) and its forward on one float (an expression in
    ``x, p, q``, the compiled replay of single numbers)."""
    __slots__ = ("name", "grad_fn", "forward", "rule", "scalar", "nparams", "code", "saves", "nm", "record",
                 "graph", "number", "second", "np_rule", "dual")

    def __init__(self, name, grad_fn, forward, rule, scalar, nparams=0, saves_anyway=False, number=None):
        self.name, self.grad_fn, self.forward, self.rule, self.scalar = name, grad_fn, forward, rule, scalar
        self.nparams = nparams
        self.saves = SAVE_MARKER if saves_anyway else 0
        self.number = number        # the forward on one Python float (see the comment on UNARY_OPS), or None
        self.second = False         # a row of UNARY_OPS_2


class Binary:
    """One binary op: as ``Unary``, with a reverse rule for each input (expressions in
    ``g, a, b, c, y``; ``c`` is where's condition) and the one-float forward in
    ``a, b, c``; ``public``, a name under which ``functions.py`` makes it PyTorch's
    function of two tensors, Tensor method and in-place method (ops whose public
    forms take more than two tensors are written there by hand)."""
    __slots__ = ("name", "grad_fn", "forward", "rule_a", "rule_b", "scalar", "code", "saves", "reads", "nm",
                 "record", "graph", "operator", "number", "second", "np_rule", "dual", "public")

    def __init__(self, name, grad_fn, forward, rule_a, rule_b, scalar, number=None, public=None):
        self.name, self.grad_fn, self.forward = name, grad_fn, forward
        self.rule_a, self.rule_b, self.scalar = rule_a, rule_b, scalar
        self.number = number
        self.public = public        # PyTorch's name: tg.<public>(input, other), the method and its in-place form
        self.second = False         # a row of BINARY_OPS_2


_EXPIT = []


def expit(x):
    """scipy.special.expit, imported on first use (scipy.special takes 0.2 s to import)."""
    if not _EXPIT:
        from scipy.special import expit as f
        _EXPIT.append(f)
    out = _EXPIT[0](x)
    if out.dtype is not x.dtype and x.dtype.kind == "f":     # (float16: SciPy computes float32)
        out = out.astype(x.dtype)
    return out


def _clamp(x, p, q):
    return np.minimum(np.maximum(x, p), q)


def _relu(x):
    return np.maximum(x, x.dtype.type(0))


def _rsub(x, p):
    return np.subtract(p, x)


def _rdiv(x, p):
    return np.divide(p, x)


def _rpow(x, p):
    if x.dtype.kind in "iu" and type(p) is int:
        return integer_power(np.asarray(p, x.dtype), x)
    return np.power(p, x)


def _power(a, b):
    # (a and b have one dtype here: the recorder promoted them; _libm_power: pow's values where
    # NumPy computes a broadcast exponent of 0.5 as sqrt, as PyTorch's pow of two tensors)
    if a.dtype.kind != "f":
        return integer_power(a, b)
    return _libm_power(a, b)


def integer_power(a, b):
    """PyTorch's integer power: a negative exponent gives 0 (1 and -1 excepted),
    where NumPy raises; bool ** bool is refused."""
    if a.dtype.kind == "b" and b.dtype.kind == "b":
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    negative = b < 0
    if not negative.any():
        return np.power(a, b)
    out = np.power(a, np.where(negative, 0, b))
    odd = (b % 2) != 0
    special = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(out.dtype)
    return np.where(negative, special, out)


def _pow(x, p):
    # PyTorch's special cases (also faster than np.power: 2x for squares, 3x for cubes)
    if p == 2.0:
        return np.square(x)
    if p == 3.0:
        return x * x * x
    if p == 0.5:
        return np.sqrt(x)
    if p == 1.0:
        return np.copy(x)
    if p == -0.5 and x.dtype.kind == "f":
        return np.reciprocal(np.sqrt(x))
    return np.power(x, p)


def _sign(x):
    out = np.asarray(np.sign(x))
    if out.dtype.kind == "f" and out.ndim:
        out[out != out] = 0.0       # sign(nan) is 0 in PyTorch
    elif out.dtype.kind == "f" and out != out:
        out = np.zeros((), out.dtype)
    return out


def _where(c, a, b):
    return np.where(c, a, b)


def _div_trunc(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.trunc(np.divide(a, b))


def _atan2(a, b):
    # (a and b have one dtype here; integers and bools give the default float, as in PyTorch)
    if a.dtype.kind != "f":
        a, b = a.astype(DEFAULT), b.astype(DEFAULT)
    return np.arctan2(a, b)


def _div_floor(a, b):
    # NumPy's floor division of floats is PyTorch's (and Python's): 1.0 // 0.1 is 9
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(a, b)


def _reciprocal(x):
    # (integers and bools give the default float, as in PyTorch; NumPy's reciprocal of 0 would be an integer)
    return np.reciprocal(x if x.dtype.kind == "f" else x.astype(DEFAULT))


def _rsqrt(x):
    # PyTorch's rsqrt is 1 / sqrt(x): inf at 0, -inf at -0.0, nan below zero
    return np.reciprocal(np.sqrt(x if x.dtype.kind == "f" else x.astype(DEFAULT)))


def _frac(x):
    # x - trunc(x), as PyTorch computes it (frac(inf) is nan); floats only, as in PyTorch
    if x.dtype.kind != "f":
        raise NotImplementedError("\"frac_cpu\" not implemented for '%s'" % torch_name(x.dtype))
    return np.subtract(x, np.trunc(x))


_XLOGY = []


def _scipy_special(name):
    """A scipy.special function, imported on first use (as ``expit``)."""
    import scipy.special
    return getattr(scipy.special, name)


def _float_operands(a, b):
    # (a and b have one dtype here; integers and bools give the default float, as in PyTorch)
    if a.dtype.kind != "f":
        return a.astype(DEFAULT), b.astype(DEFAULT)
    return a, b


def _hypot(a, b):
    if a.dtype.kind != "f":
        raise NotImplementedError("\"hypot_cpu\" not implemented for '%s'" % torch_name(a.dtype))
    return np.hypot(a, b)


def _remainder(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.remainder(a, b)


def _fmod(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def _copysign(a, b):
    return np.copysign(*_float_operands(a, b))


def _binary_cross_entropy(p, y):
    """PyTorch's elementwise binary cross entropy: each log clamped at -100 (log1p for
    the second, as PyTorch's CPU kernel)."""
    p, y = _float_operands(p, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -(y * np.maximum(np.log(p), -100.0) + (1.0 - y) * np.maximum(np.log1p(-p), -100.0))


def _ldexp(a, b):
    a, b = _float_operands(a, b)
    return a * np.exp2(b)


def _xlogy(a, b):
    if not _XLOGY:
        _XLOGY.append(_scipy_special("xlogy"))
    return _XLOGY[0](*_float_operands(a, b))


def _logit(x, eps):
    if x.dtype.kind != "f":
        x = x.astype(DEFAULT)
    if eps >= 0.0:
        x = np.clip(x, eps, 1.0 - eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x / (1.0 - x))


def _sinc(x):
    return np.sinc(x if x.dtype.kind == "f" else x.astype(DEFAULT))


def _softplus(x, beta, threshold):
    # PyTorch's: x where x * beta > threshold (linear there), else log1p(exp(x * beta)) / beta
    with np.errstate(over="ignore"):
        return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta).astype(x.dtype, copy=False)


# -- nn activations (tg.nn.functional): PyTorch's kernels' formulas, in the input's dtype
def _activation(f):
    def forward(x, *params):
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(f(x, *params)).astype(x.dtype, copy=False)
    forward.__name__ = f.__name__
    return forward


@_activation
def _silu(x):
    return x / (1.0 + np.exp(-x))


@_activation
def _mish(x):
    return x * np.tanh(np.log1p(np.exp(x)))


@_activation
def _elu(x, alpha, scale):
    return np.where(x > 0, x * scale, np.expm1(np.minimum(x, 0.0)) * (alpha * scale))


@_activation
def _celu(x, alpha, backward_scale):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0) * (1.0 / alpha)) * alpha)


@_activation
def _leaky_relu(x, slope):
    return np.where(x > 0, x, x * slope)


@_activation
def _hardtanh(x, lo, hi):
    return np.minimum(np.maximum(x, lo), hi)


@_activation
def _hardswish(x):
    return x * np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0


@_activation
def _hardsigmoid(x):
    return np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0


@_activation
def _log_sigmoid(x):
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def _special(name, fix=None):
    """The forward of a special function: SciPy's ufunc (imported on first use), in the
    input's float dtype (integers and bools give the default float, as in PyTorch)."""
    cache = []

    def f(x, *params):
        if not cache:
            cache.append(_scipy_special(name))
        if x.dtype.kind != "f":
            x = x.astype(DEFAULT)
        with np.errstate(all="ignore"):
            out = cache[0](*[int(p) for p in params], x) if params else cache[0](x)
        if fix is not None:
            out = fix(x, out)
        out = np.asarray(out)
        return out.astype(x.dtype, copy=False) if out.dtype != x.dtype else out
    f.__name__ = name
    return f


def _lgamma_at_minus_inf(x, out):
    return np.where(x == -np.inf, np.inf, out)       # (PyTorch's, C's lgamma: +inf; SciPy's gammaln: -inf)


def _xlog1py(a, b):
    return _scipy_special("xlog1py")(*_float_operands(a, b))


def _incomplete_gamma(name):
    """gammainc / gammaincc (PyTorch's igamma / igammac): floats only, as in PyTorch."""
    def f(a, b):
        if a.dtype.kind != "f":
            raise NotImplementedError("\"%s_cpu\" not implemented for '%s'" % (name, torch_name(a.dtype)))
        with np.errstate(all="ignore"):
            return np.asarray(_scipy_special("gammainc" if name == "igamma" else "gammaincc")(a, b), a.dtype)
    f.__name__ = name
    return f


# ``number``: the recorders' single-number path (``NumberTensor``).  A one-element
# float64 operand is computed as a Python float, with no NumPy call on a one-element
# array (about 1 us, most of a recorded op's cost).  Only ops whose result is NumPy's
# to the bit have one: exp, log, tanh... differ in the last bit between libm and
# NumPy's SIMD loops, so they stay on NumPy.  An operand that raises there (a
# division by zero, sqrt(-1)) goes the NumPy way, which gives inf/nan.  C functions
# where there is one: a lambda's frame costs as much as the op.
def _swapped(f):
    return lambda x, p: f(p, x)


UNARY_OPS = [
    #     name        grad_fn             forward       reverse                 forward on one float
    Unary("neg",      "NegBackward0",     np.negative,  "-g",                   "-x", number=_operator.neg),
    Unary("abs",      "AbsBackward0",     np.abs,       "g * sign(x)",          "abs(x)", number=abs),
    Unary("exp",      "ExpBackward0",     np.exp,       "g * y",                "exp(x)"),
    Unary("log",      "LogBackward0",     np.log,       "g / x",                "log(x)"),
    Unary("log1p",    "Log1PBackward0",   np.log1p,     "g / (1.0 + x)",        "log1p(x)"),
    Unary("expm1",    "Expm1Backward0",   np.expm1,     "g * (y + 1.0)",        "expm1(x)"),
    Unary("sqrt",     "SqrtBackward0",    np.sqrt,      "g / (2.0 * y)",        "sqrt(x)", number=_math.sqrt),
    Unary("sin",      "SinBackward0",     np.sin,       "g * cos(x)",           "sin(x)", number=_math.sin),
    Unary("cos",      "CosBackward0",     np.cos,       "-g * sin(x)",          "cos(x)", number=_math.cos),
    Unary("tan",      "TanBackward0",     np.tan,       "g * (1.0 + y * y)",    "tan(x)"),
    Unary("tanh",     "TanhBackward0",    np.tanh,      "g * (1.0 - y * y)",    "tanh(x)"),
    Unary("sigmoid",  "SigmoidBackward0", expit,        "g * y * (1.0 - y)",    "1.0 / (1.0 + exp(-x))"),
    Unary("relu",     "ReluBackward0",    _relu,        "where(x <= 0.0, 0.0, g)", "mx(x, 0.0)"),
    Unary("sign",     "SignBackward0",    _sign,        "0.0 * g",              "sign(x)"),
    Unary("floor",    "FloorBackward0",   np.floor,     "0.0 * g",              "np.floor(x)"),
    Unary("round",    "RoundBackward0",   np.round,     "0.0 * g",              "np.rint(x)"),
    Unary("clamp",    "ClampBackward1",   _clamp,       "where((x >= p) and (x <= q), g, 0.0)", "mn(mx(x, p), q)",
          nparams=2),
    # Python-scalar operands ride in the parameter p
    Unary("add_s",    "AddBackward0",     np.add,       "g",                    "x + p", nparams=1,
          number=_operator.add),
    Unary("mul_s",    "MulBackward0",     np.multiply,  "g * p",                "x * p", nparams=1, saves_anyway=True,
          number=_operator.mul),
    Unary("div_s",    "DivBackward0",     np.divide,    "g / p",                "x / p", nparams=1, saves_anyway=True,
          number=_operator.truediv),
    Unary("rsub_s",   "RsubBackward1",    _rsub,        "-g",                   "p - x", nparams=1,
          number=_swapped(_operator.sub)),
    Unary("rdiv_s",   "DivBackward0",     _rdiv,        "-g * p / (x * x)",     "p / x", nparams=1,
          number=_swapped(_operator.truediv)),
    Unary("pow_s",    "PowBackward0",     _pow,         "where(p == 0.0, 0.0, g * p * ipow(x, p - 1.0))", "ipow(x, p)",
          nparams=1),
    Unary("rpow_s",   "PowBackward2",     _rpow,        "where((p == 0.0) and (x >= 0.0), 0.0, g * y * log(p))",
          "p ** x", nparams=1),
    Unary("copy",     "CloneBackward0",   np.copy,      "g",                    "x"),
    # PyTorch's formulas (derivatives.yaml) in its order of operations, so the gradients are its
    # own to the last bit: its rsqrt(v) is 1.0 / sqrt(v) (inf at a domain boundary: acos'(1) = -inf);
    # log10's constant is derivatives.yaml's 2.3025850929940456, one ulp below ln 10
    Unary("asin",     "AsinBackward0",    np.arcsin,    "g * (1.0 / sqrt(1.0 - x * x))", "asin(x)"),
    Unary("acos",     "AcosBackward0",    np.arccos,    "-g * (1.0 / sqrt(1.0 - x * x))", "acos(x)"),
    Unary("atan",     "AtanBackward0",    np.arctan,    "g / (x * x + 1.0)",    "atan(x)"),
    Unary("sinh",     "SinhBackward0",    np.sinh,      "g * cosh(x)",          "sinh(x)"),
    Unary("cosh",     "CoshBackward0",    np.cosh,      "g * sinh(x)",          "cosh(x)"),
    Unary("asinh",    "AsinhBackward0",   np.arcsinh,   "g * (1.0 / sqrt(x * x + 1.0))", "asinh(x)"),
    Unary("acosh",    "AcoshBackward0",   np.arccosh,   "g * (1.0 / sqrt(x * x - 1.0))", "acosh(x)"),
    Unary("atanh",    "AtanhBackward0",   np.arctanh,   "g / (1.0 - x * x)",    "atanh(x)"),
    Unary("log2",     "Log2Backward0",    np.log2,      "g / (x * 0.6931471805599453)", "log2(x)"),
    Unary("log10",    "Log10Backward0",   np.log10,     "g / (x * 2.3025850929940456)", "log10(x)"),
    Unary("exp2",     "Exp2Backward0",    np.exp2,      "g * y * 0.6931471805599453", "2.0 ** x"),
    Unary("reciprocal", "ReciprocalBackward0", _reciprocal, "-g * (y * y)",     "1.0 / x",
          number=_functools.partial(_operator.truediv, 1.0)),
    Unary("rsqrt",    "RsqrtBackward0",   _rsqrt,       "-0.5 * g * (y * y * y)", "1.0 / sqrt(x)"),
    # PyTorch's zeros_like(grad): 0 also where the incoming gradient is inf or nan (not 0.0 * g)
    Unary("ceil",     "CeilBackward0",    np.ceil,      "0.0",                  "np.ceil(x)"),
    Unary("trunc",    "TruncBackward0",   np.trunc,     "0.0",                  "np.trunc(x)"),
    Unary("frac",     "FracBackward0",    _frac,        "g",                    "x - np.trunc(x)"),
]

BINARY_OPS = [
    #      name        grad_fn              forward      reverse for a, reverse for b, forward on one float each
    Binary("add",      "AddBackward0",      np.add,      "g", "g", "a + b", number=_operator.add),
    Binary("sub",      "SubBackward0",      np.subtract, "g", "-g", "a - b", number=_operator.sub),
    Binary("mul",      "MulBackward0",      np.multiply, "g * b", "g * a", "a * b", number=_operator.mul),
    Binary("div",      "DivBackward0",      np.divide,   "g / b", "-g * a / (b * b)", "a / b",
           number=_operator.truediv),
    # (PyTorch's b * a ** (b - 1), by its pow of two tensors, which is C's pow: the kernels' ipow
    # takes an exponent of +-0.5 by sqrt, whose values at -0.0 and -inf are not pow's, so for a
    # non-integer exponent a base of -0.0 or -inf is read as +0.0 or +inf: pow's values there)
    Binary("pow",      "PowBackward1",      _power,
           "where(b == 0.0, 0.0, g * b * ipow(where((b != trunc(b)) and (a == 0.0), a + 0.0,"
           " where((b != trunc(b)) and (a < -1.7976931348623157e308), -a, a)), b - 1.0))",
           "where((a == 0.0) and (b >= 0.0), 0.0, g * y * log(a))", "a ** b"),
    # (written as PyTorch's masks, so a nan operand passes the gradient to both)
    Binary("maximum",  "MaximumBackward0",  np.maximum,
           "where(a < b, 0.0, where(a == b, 0.5 * g, g))",
           "where(b < a, 0.0, where(a == b, 0.5 * g, g))", "mx(a, b)"),
    Binary("minimum",  "MinimumBackward0",  np.minimum,
           "where(a > b, 0.0, where(a == b, 0.5 * g, g))",
           "where(b > a, 0.0, where(a == b, 0.5 * g, g))", "mn(a, b)"),
    # where(c, a, b): the condition c is a third (constant) input
    Binary("where",    "WhereBackward0",    _where,      "where(c != 0.0, g, 0.0)", "where(c != 0.0, 0.0, g)",
           "where(c != 0.0, a, b)"),
    # div(rounding_mode="trunc" / "floor") of floats: a step function, zero gradient (PyTorch)
    Binary("div_trunc", "DivBackward2",     _div_trunc,  "0.0 * g", "0.0 * g", "np.trunc(a / b)"),
    Binary("div_floor", "DivBackward2",     _div_floor,  "0.0 * g", "0.0 * g", "a // b"),
    # PyTorch's: 0 where a * a + b * b is 0 (at (0, 0), and where it underflows), not 0/0
    Binary("atan2",    "Atan2Backward0",    _atan2,
           "where(a * a + b * b == 0.0, 0.0, g * b / where(a * a + b * b == 0.0, 1.0, a * a + b * b))",
           "where(a * a + b * b == 0.0, 0.0, -g * a / where(a * a + b * b == 0.0, 1.0, a * a + b * b))",
           "atan2(a, b)"),
]


# The second table: ops whose kernels (families UNARY2 and BINARY2, a second unary
# and binary kernel) are compiled only once a backward meets one of them, so that
# the first backward of a tape of the common ops above compiles none of these.
# Same columns; their replay forward is NumPy's (no compiled replay kernel).
UNARY_OPS_2 = [
    # logit(x, eps): p = eps, -1.0 for None (PyTorch's nan outside [0, 1]; with eps, 0 outside
    # [eps, 1 - eps] and at nan)
    Unary("logit",    "LogitBackward0",   _logit,
          "where(p < 0.0, where(x < 0.0, nan_like(x), where(x > 1.0, nan_like(x), g / (x * (1.0 - x)))),"
          " where((x >= p) and (x <= 1.0 - p), g / (x * (1.0 - x)), 0.0))",
          "where(p < 0.0, log(x / (1.0 - x)), log(mn(mx(x, p), 1.0 - p) / (1.0 - mn(mx(x, p), 1.0 - p))))",
          nparams=1),
    Unary("sinc",     "SincBackward0",    _sinc,
          "where(x == 0.0, 0.0, (3.141592653589793 * x * cos(3.141592653589793 * x)"
          " - sin(3.141592653589793 * x)) / (3.141592653589793 * x * x)) * g",
          "where(x == 0.0, 1.0, sin(3.141592653589793 * x) / (3.141592653589793 * x))"),
    # special functions: SciPy's forwards; the rules' special functions are SciPy's too
    # (kernels/special.py).  PyTorch's formulas (derivatives.yaml); no one-float forward
    # where the kernels have no such function (the second table needs none)
    Unary("erf",      "ErfBackward0",     _special("erf"), "1.1283791670955126 * exp(-(x * x)) * g", "erf(x)"),
    Unary("erfc",     "ErfcBackward0",    _special("erfc"), "-1.1283791670955126 * exp(-(x * x)) * g", "erfc(x)"),
    Unary("erfinv",   "ErfinvBackward0",  _special("erfinv"), "0.886226925452758 * exp(y * y) * g", None),
    Unary("lgamma",   "LgammaBackward0",  _special("gammaln", _lgamma_at_minus_inf), "g * digamma(x)", "lgamma(x)"),
    Unary("digamma",  "DigammaBackward0", _special("psi"), "g * polygamma(x, 1.0)", "digamma(x)"),
    # polygamma(n, x): p = n
    Unary("polygamma", "PolygammaBackward0", _special("polygamma"), "g * polygamma(x, p + 1.0)",
          "polygamma(x, p)", nparams=1),
    Unary("i0",       "I0Backward0",      _special("i0"), "g * i1(x)", "i0(x)"),
    Unary("i0e",      "SpecialI0EBackward0", _special("i0e"), "g * (i1e(x) - sign(x) * y)", "i0e(x)"),
    # (PyTorch's: 0.5 where |x| is below the float64 epsilon)
    Unary("i1",       "SpecialI1Backward0", _special("i1"),
          "g * where(abs(x) > 2.220446049250313e-16, i0(x) - y / where(abs(x) > 2.220446049250313e-16, x, 1.0),"
          " 0.5)", "i1(x)"),
    Unary("i1e",      "SpecialI1EBackward0", _special("i1e"),
          "g * where(abs(x) > 2.220446049250313e-16, i0e(x) - y * (sign(x) + 1.0 / where(abs(x) >"
          " 2.220446049250313e-16, x, 1.0)), 0.5)", "i1e(x)"),
    Unary("ndtr",     "SpecialNdtrBackward0", _special("ndtr"), "g * (exp(-0.5 * (x * x)) * 0.3989422804014327)",
          "0.5 * erfc(-x * 0.7071067811865476)"),
    Unary("ndtri",    "SpecialNdtriBackward0", _special("ndtri"), "g * 2.5066282746310002 * exp(y * y * 0.5)", None),
    Unary("log_ndtr", "SpecialLogNdtrBackward0", _special("log_ndtr"),
          "g / 2.5066282746310002 * exp(-(y + x * x / 2.0))", None),
    # Bessel functions of the first kind (PyTorch defines no derivative for them: these are
    # J0' = -J1 and J1' = J0 - J1 / x, 0.5 at 0)
    Unary("bessel_j0", "SpecialBesselJ0Backward0", _special("j0"), "-g * bessel_j1(x)", "bessel_j0(x)"),
    Unary("bessel_j1", "SpecialBesselJ1Backward0", _special("j1"),
          "g * where(abs(x) > 2.220446049250313e-16, bessel_j0(x) - y / where(abs(x) > 2.220446049250313e-16, x,"
          " 1.0), 0.5)", "bessel_j1(x)"),
    Unary("entr",     "SpecialEntrBackward0", _special("entr"), "g * -(1.0 + log(x))", None),
    # softplus(x, beta, threshold): p = beta, q = threshold
    Unary("softplus", "SoftplusBackward0", _softplus,
          "where(x * p > q, g, g * exp(x * p) / (exp(x * p) + 1.0))",
          "where(x * p > q, x, log1p(exp(x * p)) / p)", nparams=2),
    # nn activations (tg.nn.functional), PyTorch's derivatives (its kernels' formulas)
    Unary("silu",     "SiluBackward0",    _silu,
          "g * (1.0 / (1.0 + exp(-x))) * (1.0 + x * (1.0 - 1.0 / (1.0 + exp(-x))))", "x / (1.0 + exp(-x))"),
    Unary("mish",     "MishBackward0",    _mish,
          "g * (tanh(log1p(exp(x))) + x * (1.0 / (1.0 + exp(-x)))"
          " * (1.0 - tanh(log1p(exp(x))) * tanh(log1p(exp(x)))))", "x * tanh(log1p(exp(x)))"),
    # elu(x, alpha, scale): p = alpha, q = scale (selu: its constants; celu: elu of x / alpha)
    Unary("elu",      "EluBackward0",     _elu,
          "where(x > 0.0, g * q, g * (q * p) * exp(x))", "where(x > 0.0, x * q, expm1(mn(x, 0.0)) * (p * q))",
          nparams=2),
    # celu(x, alpha): p = alpha, q = 1 / float32(alpha), the input scale of PyTorch's reverse
    # (its derivatives.yaml converts alpha to float there; the forward uses 1 / alpha)
    Unary("celu",     "CeluBackward0",    _celu,
          "where(x > 0.0, g, g * (q * p) * exp(x * q))", "where(x > 0.0, x, expm1(mn(x, 0.0) * (1.0 / p)) * p)",
          nparams=2),
    # leaky_relu(x, slope): p = slope (the slope also at 0, as PyTorch's)
    Unary("leaky_relu", "LeakyReluBackward0", _leaky_relu, "where(x > 0.0, g, g * p)", "where(x > 0.0, x, x * p)",
          nparams=1),
    # hardtanh(x, min, max): p, q; gradient 0 at and beyond the bounds (PyTorch's)
    Unary("hardtanh", "HardtanhBackward0", _hardtanh, "where(x <= p, 0.0, where(x >= q, 0.0, g))", "mn(mx(x, p), q)",
          nparams=2),
    Unary("hardswish", "HardswishBackward0", _hardswish,
          "where(x <= -3.0, 0.0, where(x < 3.0, g * (x / 3.0 + 0.5), g))", "x * mn(mx(x + 3.0, 0.0), 6.0) / 6.0"),
    # (PyTorch's reverse multiplies by 1/6 rounded to float32)
    Unary("hardsigmoid", "HardsigmoidBackward0", _hardsigmoid,
          "where(x > -3.0, where(x < 3.0, g * 0.1666666716337204, 0.0), 0.0)", "mn(mx(x + 3.0, 0.0), 6.0) / 6.0"),
    Unary("log_sigmoid", "LogSigmoidBackward0", _log_sigmoid, "g / (1.0 + exp(x))",
          "mn(x, 0.0) - log1p(exp(-abs(x)))"),
]

# PyTorch's floor division before rounding: (a - fmod(a, b)) / b, one less where the signs of b
# and fmod(a, b) differ
_QUOTIENT = "((a - fmod(a, b)) / b - where((fmod(a, b) != 0.0) and ((b < 0.0) != (fmod(a, b) < 0.0)), 1.0, 0.0))"

BINARY_OPS_2 = [
    Binary("hypot",    "HypotBackward0",    _hypot,      "g * a / y", "g * b / y", "hypot(a, b)"),
    # PyTorch's: -g times the quotient rounded down (remainder: PyTorch's floor division, a / b
    # where b is 0, else _QUOTIENT rounded down, then up where it is more than 0.5 above that)
    # or toward zero (fmod)
    Binary("remainder", "RemainderBackward0", _remainder, "g",
           "-g * where(b == 0.0, floor(a / b), floor({d}) + where({d} - floor({d}) > 0.5, 1.0, 0.0))"
           .format(d=_QUOTIENT),
           "where((fmod(a, b) != 0.0) and ((b < 0.0) != (fmod(a, b) < 0.0)), fmod(a, b) + b, fmod(a, b))"),
    Binary("fmod",     "FmodBackward0",     _fmod,       "g", "-g * trunc(a / b)", "fmod(a, b)"),
    Binary("copysign", "CopysignBackward0", _copysign,   "where(a == 0.0, 0.0, g * (y / a))", "0.0",
           "copysign(a, b)"),
    # PyTorch's: xlogy(g, b), 0 where a == 0 and b <= 0
    Binary("xlogy",    "XlogyBackward0",    _xlogy,
           "where((a == 0.0) and (b <= 0.0), 0.0, where((g == 0.0) and (b == b), 0.0, g * log(b)))",
           "g * a / b", "where((a == 0.0) and (b == b), 0.0, a * log(b))"),
    Binary("xlog1py",  "SpecialXlog1PyBackward0", _xlog1py,
           "where((a == 0.0) and (b <= -1.0), 0.0, where((g == 0.0) and (b == b), 0.0, g * log1p(b)))",
           "g * a / (b + 1.0)", "where((a == 0.0) and (b == b), 0.0, a * log1p(b))"),
    # the regularized incomplete gamma functions P(a, x), Q(a, x) (SciPy's); PyTorch's
    # derivative in x only (its public functions refuse an input a that requires grad)
    Binary("gammainc", "IgammaBackward0", _incomplete_gamma("igamma"), "0.0 * g",
           "g * exp((a - 1.0) * log(b) - b - lgamma(a))", "gammainc(a, b)"),
    Binary("gammaincc", "IgammacBackward0", _incomplete_gamma("igammac"), "0.0 * g",
           "-g * exp((a - 1.0) * log(b) - b - lgamma(a))", "gammaincc(a, b)"),
    # F.binary_cross_entropy(p, y) (the weight and the reduction are ops of their own).
    # PyTorch's reverse: (p - y) / max(p (1 - p), EPSILON), finite where a log is clamped (its
    # EPSILON is the float 1e-12); for the target, -logit(p), unclamped
    Binary("binary_cross_entropy", "BinaryCrossEntropyBackward0", _binary_cross_entropy,
           "g * (a - b) / where(a * (1.0 - a) > 9.999999960041972e-13, a * (1.0 - a), 9.999999960041972e-13)",
           "-g * log(a / (1.0 - a))", "-(b * mx(log(a), -100.0) + (1.0 - b) * mx(log1p(-a), -100.0))"),
    # input * 2 ** other (PyTorch's; integer and bool inputs give the default float)
    Binary("ldexp",    "LdexpBackward0",    _ldexp,      "g * exp2(b)", "g * y * 0.6931471805599453",
           "a * exp2(b)", public="ldexp"),
]


for _op in UNARY_OPS_2 + BINARY_OPS_2:
    _op.second = True           # (compiled reverse only: no one-float forward needed)
ALL_UNARY = UNARY_OPS + UNARY_OPS_2
ALL_BINARY = BINARY_OPS + BINARY_OPS_2
NUMBER_FORWARD = {op.name: op.number for op in ALL_UNARY + ALL_BINARY if op.number is not None}


def _uses(rule, name):
    import re
    return re.search(r"\b%s\b" % name, rule) is not None


for _table, _family in ((UNARY_OPS, UNARY), (UNARY_OPS_2, UNARY2)):
    for _i, _op in enumerate(_table):
        _op.saves |= (1 if _uses(_op.rule, "x") else 0) | (8 if _uses(_op.rule, "y") else 0)
        _op.code = define(_family, _i, _op.name, _op.saves)


def _reads(rule):
    return ((1 if _uses(rule, "a") else 0) | (2 if _uses(rule, "b") else 0) | (4 if _uses(rule, "c") else 0)
            | (8 if _uses(rule, "y") else 0))


# Each input's rule decides what is kept when that input needs a gradient (a * b
# keeps b only when a requires grad); the output is kept whenever a rule reads it
# (PyTorch always saves an output its formulas use).
for _table, _family in ((BINARY_OPS, BINARY), (BINARY_OPS_2, BINARY2)):
    for _i, _op in enumerate(_table):
        _op.reads = (_reads(_op.rule_a), _reads(_op.rule_b))
        _op.saves = _op.reads[0] | _op.reads[1]
        _op.code = define(_family, _i, _op.name, _op.saves & 8, (_op.reads[0] & 7, _op.reads[1] & 7))

UNARY_BY_NAME = {op.name: op for op in ALL_UNARY}
BINARY_BY_NAME = {op.name: op for op in ALL_BINARY}


# -- recording ------------------------------------------------------------------
from ..core import tape as _tp  # noqa: E402
from ..core.quiet import IGNORE as _IGNORE, ignoring as _ignoring, restore as _restore  # noqa: E402
from ..core.descriptors import broadcast_strides, check_descriptor, descriptor  # noqa: E402
from ..core.tensor import NumberTensor, Tensor  # noqa: E402
from ..core.registry import name_id  # noqa: E402

for _op in ALL_UNARY + ALL_BINARY:
    _op.nm = name_id(_op.grad_fn)
_SUB_NM = name_id("SubBackward0")       # add_s recorded as a subtraction (``x - 2``)


def _slot(T, t):
    if t._tape_id == T.id and t._slot_version == t._ver[0]:
        return t._slot
    return T.adopt(t)


_new = object.__new__
_ndarray = np.ndarray
_state = _tp.state
_tls = _tp._tls
_pack = _tp.ENTRY.pack_into
_ESIZE = _tp.ESIZE


_tape = _tp.tape_of


def _promote(ad, bd):
    """Two arrays of different dtypes in PyTorch's common dtype, not NumPy's
    (float32 * int64 is float32, float32 * 0-d float64 is float32: ops.promotion)."""
    dt = result_type(ad, bd)
    return (ad if ad.dtype == dt else ad.astype(dt)), (bd if bd.dtype == dt else bd.astype(dt))


_NEG_INT_POW = "Integers to negative integer powers are not allowed."
SUB_BOOL = ("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
            "mask, use the `~` or `logical_not()` operator instead.")
SUB_TWO_BOOLS = ("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                 "`logical_xor()` operator instead.")
NEG_BOOL = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead.")


def _promote_sub(ad, bd):
    if ad.dtype.kind == "b" or bd.dtype.kind == "b":
        raise RuntimeError(SUB_TWO_BOOLS if ad.dtype.kind == bd.dtype.kind else SUB_BOOL)
    return _promote(ad, bd)


def _forward_type_error(name, ad, bd):
    """NumPy's TypeError on two bool operands as PyTorch's error (``b - b``)."""
    if name == "sub" and ad.dtype.kind == "b" and bd.dtype.kind == "b":
        raise RuntimeError(SUB_TWO_BOOLS) from None


_FLOAT_FUNCTIONS = {"exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sigmoid", "asin", "acos",
                    "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2"}
_BOOL_REFUSED = {"abs": ('"abs_cpu" not implemented for \'Bool\'', NotImplementedError),
                 "floor": ('"floor_vml_cpu" not implemented for \'Bool\'', NotImplementedError),
                 "round": ('"round_vml_cpu" not implemented for \'Bool\'', NotImplementedError),
                 "ceil": ('"ceil_vml_cpu" not implemented for \'Bool\'', NotImplementedError),
                 "trunc": ('"trunc_vml_cpu" not implemented for \'Bool\'', NotImplementedError),
                 "relu": ("Boolean inputs not supported for relu", RuntimeError),
                 "neg": (NEG_BOOL, RuntimeError)}


def wrap_int(p, dt):
    """A Python int as PyTorch casts it to an integer dtype: to int64, then to ``dt``,
    wrapping (NumPy raises OverflowError instead)."""
    if not -2 ** 63 <= p < 2 ** 64:
        raise OverflowError("int too big to convert")
    return np.array((p + 2 ** 63) % 2 ** 64 - 2 ** 63, np.int64).astype(dt)[()]


def _integral_unary(op, d, p, out, name):
    """A unary op on an integer or bool array (never on the tape: such tensors do
    not require grad), with PyTorch's dtype where NumPy's differs, or its error."""
    k = op.name
    if d.dtype.kind == "b":
        if k in _BOOL_REFUSED:
            msg, error = _BOOL_REFUSED[k]
            raise error(msg) from None
        if k == "sign":
            return d.copy()
        if k == "rsub_s" or (k == "add_s" and name == _SUB_NM):
            raise RuntimeError(SUB_BOOL) from None
        if k == "rpow_s" and isinstance(p, (bool, np.bool_)):
            raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    if k in _FLOAT_FUNCTIONS:       # (NumPy computes a bool array's exp in float16)
        return np.asarray(op.forward(d.astype(DEFAULT)))
    if k == "pow_s":
        dt = with_number(d.dtype, p)
        if dt.kind == "b":          # bool ** bool: x ** True is x, x ** False is 1
            return d.copy() if p else np.ones_like(d)
        return np.asarray(_pow(d.astype(dt), p))
    return out


_BROADCAST = {}     # input shapes -> (aux words or None, bits): computed once per shape combination


def _broadcast_plan(osh, ins):
    """How the reverse reads each input: bit k set = input k is a scalar (stride 0);
    otherwise, when some input really broadcasts, strided descriptors for all
    (bit 3 + k: input k has the output's shape, read at the output's index)."""
    bits, general = 0, False
    for k, v in enumerate(ins):
        if v.shape != osh:
            if v.size == 1:
                bits |= 1 << k
            else:
                general = True
    if not general:
        return None, bits
    words = []
    n = int(np.prod(osh, dtype=np.int64))
    for k, v in enumerate(ins):
        if v.shape == osh:
            bits |= 8 << k
        d = descriptor(osh, broadcast_strides(v.shape, osh))
        check_descriptor(d, 0, v.size, n, "a broadcast")       # (once per shapes: the plan is kept)
        words += d
    if len(ins) == 2:
        words += descriptor((0,), (0,))
    return np.array(words, np.int64), bits


# NumPy multiplies by a Python float about twice as slowly as by a 0-d array of the
# same dtype (the scalar is converted on every call); the result is the same.
_CONST_OPERAND = {"add_s", "mul_s", "div_s", "rsub_s", "rdiv_s"}
_CONSTANTS = {}


_F64 = np.dtype(np.float64)
_CONSTANTS64 = {}      # the same for float64, keyed by the number alone (hashing a dtype is slow)


def _constant(p, dt):
    if dt is _F64:
        c = _CONSTANTS64.get(p)
        if c is not None:
            return c
    c = _CONSTANTS.get((p, dt))
    if c is None:
        if dt.kind != "f" or type(p) not in (float, int):
            return p
        if len(_CONSTANTS) > 1024:
            _CONSTANTS.clear()
            _CONSTANTS64.clear()
        c = _CONSTANTS[(p, dt)] = np.array(p, dt)
        c.flags.writeable = False
        if dt is _F64:
            _CONSTANTS64[p] = c
    return c


def _unary_recorder(op):
    """The function that applies and records ``op`` (a row of UNARY_OPS).

    This and ``_binary_recorder`` are the hot path of recording: the op's constants
    are bound in a closure and the tape append (``Tape.new_slot``) and tensor
    construction (``Tensor._recorded``) are written out here rather than called:
    four copies, each recorder's single-number and array paths, which
    tests/test_recorders.py checks against the calls they copy."""
    n, fwd, code, nm0, saves = op.nparams, op.forward, op.code, op.nm, op.saves
    save_in, save_out = saves & 1, saves & 8
    if n == 1 and op.name in _CONST_OPERAND:
        n = -1                  # forward with the number as a cached 0-d array

    number = op.number

    def record(input, p=0.0, q=0.0, name=-1):
        if number is not None and input._requires_grad:
            # the single-number path: no one-element array made (``number``: see UNARY_OPS)
            if type(input) is NumberTensor:
                v, d = input._f, None           # (None once its array was made)
                shp = input._shp
            else:
                d = input._data
                v = d.item() if (d.size == 1 and d.dtype is _F64) else None
                shp = d.shape
            if v is not None and (n == 0 or type(p) is float or type(p) is int):
                try:
                    st = _tls.st
                except AttributeError:
                    st = _state()
                r = None
                if st.grad:
                    try:
                        r = number(v) if n == 0 else number(v, p)
                    except (ArithmeticError, ValueError):
                        pass
                if r is not None:
                    T = st.tape
                    if T is None or T.n >= T.limit:
                        T = _tape(st)
                # (recorded for replay: the NumPy path, which notes what replay needs)
                if r is not None and T.shapes is None:
                    if input._tape_id == T.id and input._slot_version == input._ver[0]:
                        s = input._slot
                    else:
                        s = T.adopt(input)
                        if T.n >= T.cap:
                            T.grow()
                    if save_in and d is not None:
                        T.vals[s] = d
                    # inlined copy of Tape.new_slot (entry fields OP..VAL, n, vals, versions; save=False:
                    # VAL holds the value) and of Tensor._recorded's fields, on a NumberTensor;
                    # tests/test_recorders.py checks it writes what they write
                    o = T.n
                    _pack(T.buf, o * _ESIZE, code, s, -1, -1, -1, -1, nm0 if name < 0 else name, 1, 0, p, q, r)
                    T.n = o + 1
                    T.vals.append(None)     # (the value is in the entry, where the sweep reads it)
                    ver = [0]
                    T.versions.append(ver)
                    t = _new(NumberTensor)
                    t._f = r
                    t._shp = shp
                    t._requires_grad = True
                    t._tape_id = T.id
                    t._slot = o
                    t._ver = ver
                    t._slot_version = 0
                    t._tape = T
                    t._extra = None
                    return t
        d = input._data
        token = _ignoring(_IGNORE)      # (inf and nan as IEEE makes them, without NumPy's warnings: core/quiet.py)
        try:
            if n == 0:
                out = fwd(d)
            elif n == -1:
                out = fwd(d, _constant(p, d.dtype))
            else:
                out = fwd(d, p) if n == 1 else fwd(d, p, q)
        except OverflowError:   # a Python int beyond an integer tensor's range wraps, as in PyTorch
            if d.dtype.kind not in "iu" or type(p) is not int or n != -1:
                if op.name == "pow_s" and type(p) is int and p < 0:      # (uint8 ** -1)
                    raise RuntimeError(_NEG_INT_POW) from None
                raise
            out = fwd(d, wrap_int(p, d.dtype))
        except TypeError:       # NumPy refusing a bool array (-x, sign(x)): PyTorch's result or error
            if d.dtype.kind != "b":
                raise
            out = _integral_unary(op, d, p, None, name)
            if out is None:
                raise
        finally:
            _restore(token)
        if type(out) is not _ndarray:
            out = np.asarray(out)
        if not input._requires_grad:
            if d.dtype is not _F64 and d.dtype.kind != "f":     # (integer and bool tensors: never recorded)
                out = _integral_unary(op, d, p, out, name)
            return Tensor._wrap(out)
        try:
            st = _tls.st
        except AttributeError:
            st = _state()
        if not st.grad:
            return Tensor._wrap(out)
        T = st.tape
        if T is None or T.n >= T.limit:
            T = _tape(st)
        if input._tape_id == T.id and input._slot_version == input._ver[0]:
            s = input._slot
        else:
            s = T.adopt(input)
            if T.n >= T.cap:    # importing the input took the last free entry
                T.grow()
        if save_in:
            T.vals[s] = d
        # inlined copy of Tape.new_slot (entry fields OP..VAL, n, vals, versions) and of
        # Tensor._recorded's fields (no calls on the hot path); tests/test_recorders.py
        # checks it writes what they write
        o = T.n
        sz = out.size
        _pack(T.buf, o * _ESIZE, code, s, -1, -1, -1, -1, nm0 if name < 0 else name, sz, 0, p, q,
              out.item() if sz == 1 else 0.0)
        T.n = o + 1
        T.vals.append(out if save_out else None)
        ver = [0]
        T.versions.append(ver)
        t = _new(Tensor)
        t._data = out
        t._requires_grad = True
        t._tape_id = T.id
        t._slot = o
        t._ver = ver
        t._slot_version = 0
        t._tape = T
        t._extra = None
        return t
    record.__name__ = op.name
    return record


def _save_conditions(code):
    """For inputs a, b, c of a binary opcode: (kept at all, kept whichever input
    needs a gradient, kept when a needs one, kept when b needs one), from
    ``registry.SAVES_BY_RG``.  The recorder tests them in this order, so an op whose
    saves do not depend on requires_grad (add, pow) never reads a tensor's flag."""
    by_rg = SAVES_BY_RG[code]
    out = []
    for bit in (1, 2, 4):
        if_a, if_b = bool(by_rg[1] & bit), bool(by_rg[2] & bit)
        out.append((if_a or if_b, if_a and if_b, if_a, if_b))
    return out


def _broadcast_error(shapes):
    """PyTorch's error for operands whose shapes do not broadcast (or a ValueError
    NumPy raised for another reason, unchanged)."""
    cur = tuple(shapes[0])
    for nxt in shapes[1:]:
        nd = max(len(cur), len(nxt))
        a, b = (1,) * (nd - len(cur)) + cur, (1,) * (nd - len(nxt)) + tuple(nxt)
        for d in range(nd - 1, -1, -1):
            if a[d] != b[d] and a[d] != 1 and b[d] != 1:
                return RuntimeError("The size of tensor a (%d) must match the size of tensor b (%d) at "
                                    "non-singleton dimension %d" % (a[d], b[d], d))
        cur = tuple(max(x, y) if min(x, y) != 0 else 0 for x, y in zip(a, b))
    import sys
    return sys.exc_info()[1]


SHORT_LAST = 8          # a broadcast's last axis shorter than this, over a large output: by components
SHORT_MIN_SIZE = 1 << 14


def broadcast_apply(fwd, ad, bd):
    """``fwd(ad, bd)`` for a NumPy ufunc.  NumPy's inner loop runs along the output's
    last axis: over ``pos[:, None, :] - pos[None, :, :]`` that is 3 elements per call
    of it, 3x slower than PyTorch; one ufunc call per index of a short last axis, each
    over everything else, gives the same values (elementwise: order does not matter)."""
    sa, sb = ad.shape, bd.shape
    k = sa[-1] if sa else 1
    if not sb or sb[-1] > k:
        k = sb[-1] if sb else 1
    if not 1 < k < SHORT_LAST or type(fwd) is not np.ufunc or len(sa) < 2 and len(sb) < 2:
        return fwd(ad, bd)
    shape = np.broadcast_shapes(sa, sb)
    if _math.prod(shape) < SHORT_MIN_SIZE or fwd.nout != 1:
        return fwd(ad, bd)
    ka, kb = bool(sa) and sa[-1] == k, bool(sb) and sb[-1] == k
    first = fwd(ad[..., 0], bd[..., 0])          # (its dtype is the result's)
    out = np.empty(shape, first.dtype)
    out[..., 0] = first
    for j in range(1, k):
        fwd(ad[..., j] if ka else ad[..., 0], bd[..., j] if kb else bd[..., 0], out=out[..., j])
    return out


def _binary_recorder(op):
    """The function that applies and records ``op`` (a row of BINARY_OPS) on two
    tensors (``c``: where's condition)."""
    fwd, code, nm0, saves = op.forward, op.code, op.nm, op.saves
    save_out = saves & 8
    # input k is kept when ``save_k`` and: always, or when a needs grad, or when b does
    (save_a, a_always, a_if_a, a_if_b), (save_b, b_always, b_if_a, b_if_b), (save_c, c_always, c_if_a, c_if_b) = \
        _save_conditions(code)
    # The Tensor operator (``__mul__``...) is this function itself, one call less per
    # op; any other right operand goes to the general dispatcher set in ``operator``.
    # ``operator[1]``: the op with a Python float or int on the right (``y * 0.5``: mul_s).
    operator = op.operator = [None, None]
    number = op.number
    promote = _promote_sub if op.name == "sub" else _promote
    opname = op.name

    def record(a, b, c=None, name=-1):
        tb = type(b)
        if tb is not Tensor and tb is not NumberTensor and not isinstance(b, Tensor):
            if (tb is float or tb is int) and operator[1] is not None:
                return operator[1](a, b)
            return operator[0](a, b)            # as ``a <op> b``: a number, array...
        if number is not None and c is None and (a._requires_grad or b._requires_grad):
            # the single-number path: no one-element array made (``number``: see UNARY_OPS)
            if type(a) is NumberTensor:
                va, ad, sha = a._f, None, a._shp
            else:
                ad = a._data
                va = ad.item() if (ad.size == 1 and ad.dtype is _F64) else None
                sha = ad.shape
            vb = None
            if va is None:              # (an array on the left: b is not looked at)
                pass
            elif tb is NumberTensor:
                vb, bd, shb = b._f, None, b._shp
            else:
                bd = b._data
                vb = bd.item() if (bd.size == 1 and bd.dtype is _F64) else None
                shb = bd.shape
            if vb is not None and sha == shb:       # ((1,) with (): the NumPy path)
                try:
                    st = _tls.st
                except AttributeError:
                    st = _state()
                r = None
                if st.grad:
                    try:
                        r = number(va, vb)
                    except (ArithmeticError, ValueError):
                        pass
                if r is not None:
                    T = st.tape
                    if T is None or T.n >= T.limit:
                        T = _tape(st)
                if r is not None and T.shapes is None:
                    tid = T.id
                    sa = a._slot if (a._tape_id == tid and a._slot_version == a._ver[0]) else T.adopt(a)
                    sb = b._slot if (b._tape_id == tid and b._slot_version == b._ver[0]) else T.adopt(b)
                    if save_a and ad is not None and (a_always or (a_if_a and a._requires_grad) or (a_if_b and b._requires_grad)):
                        T.vals[sa] = ad
                    if save_b and bd is not None and (b_always or (b_if_a and a._requires_grad) or (b_if_b and b._requires_grad)):
                        T.vals[sb] = bd
                    # inlined copy of Tape.new_slot (entry fields OP..VAL, n, vals, versions; save=False:
                    # VAL holds the value) and of Tensor._recorded's fields, on a NumberTensor;
                    # tests/test_recorders.py checks it writes what they write
                    o = T.n
                    if o >= T.cap:
                        T.grow()
                    _pack(T.buf, o * _ESIZE, code, sa, sb, -1, -1, 0, nm0 if name < 0 else name, 1, 0, 0.0, 0.0, r)
                    T.n = o + 1
                    T.vals.append(None)
                    ver = [0]
                    T.versions.append(ver)
                    t = _new(NumberTensor)
                    t._f = r
                    t._shp = sha
                    t._requires_grad = True
                    t._tape_id = tid
                    t._slot = o
                    t._ver = ver
                    t._slot_version = 0
                    t._tape = T
                    t._extra = None
                    return t
        ad, bd = a._data, b._data
        if ad.dtype is not bd.dtype:
            ad, bd = promote(ad, bd)
        token = _ignoring(_IGNORE)      # (as the unary recorder's)
        try:
            if c is not None:
                out = fwd(c._data, ad, bd)
            elif ad.shape == bd.shape:
                out = fwd(ad, bd)
            else:
                out = broadcast_apply(fwd, ad, bd)
        except ValueError:
            raise _broadcast_error([ad.shape, bd.shape] if c is None else [c._data.shape, ad.shape, bd.shape]) \
                from None
        except TypeError:
            _forward_type_error(opname, ad, bd)
            raise
        finally:
            _restore(token)
        if type(out) is not _ndarray:
            out = np.asarray(out)
        if not (a._requires_grad or b._requires_grad):
            return Tensor._wrap(out)
        try:
            st = _tls.st
        except AttributeError:
            st = _state()
        if not st.grad:
            return Tensor._wrap(out)
        T = st.tape
        if T is None or T.n >= T.limit:
            T = _tape(st)
        tid = T.id
        sa = a._slot if (a._tape_id == tid and a._slot_version == a._ver[0]) else T.adopt(a)
        sb = b._slot if (b._tape_id == tid and b._slot_version == b._ver[0]) else T.adopt(b)
        sc = -1 if c is None else _slot(T, c)
        if save_a and (a_always or (a_if_a and a._requires_grad) or (a_if_b and b._requires_grad)):
            T.vals[sa] = ad
        if save_b and (b_always or (b_if_a and a._requires_grad) or (b_if_b and b._requires_grad)):
            T.vals[sb] = bd
        if save_c and (c_always or (c_if_a and a._requires_grad) or (c_if_b and b._requires_grad)):
            T.vals[sc] = c._data
        osh = out.shape
        i0, bits = -1, 0
        if ad.shape != osh or bd.shape != osh or (c is not None and c._data.shape != osh):
            key = (ad.shape, bd.shape, None if c is None else c._data.shape)
            plan = _BROADCAST.get(key)
            if plan is None:
                plan = _BROADCAST[key] = _broadcast_plan(osh, (ad, bd) if c is None else (ad, bd, c._data))
            words, bits = plan
            if words is not None:
                i0 = T.aux_append(words)
        # inlined copy of Tape.new_slot (entry fields OP..VAL, n, vals, versions) and of
        # Tensor._recorded's fields (no calls on the hot path); tests/test_recorders.py
        # checks it writes what they write
        o = T.n
        if o >= T.cap:          # importing an input above took the last free entry
            T.grow()
        sz = out.size
        _pack(T.buf, o * _ESIZE, code, sa, sb, sc, i0, bits, nm0 if name < 0 else name, sz, 0, 0.0, 0.0,
              out.item() if sz == 1 else 0.0)
        T.n = o + 1
        T.vals.append(out if save_out else None)
        ver = [0]
        T.versions.append(ver)
        t = _new(Tensor)
        t._data = out
        t._requires_grad = True
        t._tape_id = tid
        t._slot = o
        t._ver = ver
        t._slot_version = 0
        t._tape = T
        t._extra = None
        return t
    record.__name__ = op.name
    return record


for _op in ALL_UNARY:
    _op.record = _unary_recorder(_op)
for _op in ALL_BINARY:
    _op.record = _binary_recorder(_op)


def unary(op, x, p=0.0, q=0.0, name=-1):
    """Apply and record a unary op (``op`` is a row of UNARY_OPS)."""
    return op.record(x, p, q, name)


def binary(op, a, b, c=None, name=-1):
    """Apply and record a binary op on two tensors (``c``: where's condition)."""
    return op.record(a, b, c, name)


# -- differentiable reverse (create_graph=True) ----------------------------------------
# The same rule strings, evaluated with tapegrad's own operations on tensors, so
# the gradient is recorded and can be differentiated again.  Conditions are not
# differentiated (``and`` becomes ``&`` on boolean tensors).  A rule may call
# ``where``, ``ipow`` and any unary op of the table by its name (on a number, the
# NumPy function of that name: a rule may apply it to a parameter);
# ``kernels.codegen.check_row`` refuses a rule calling anything else.
from ..core.registry import UNARY as _UNARY_FAMILY, BINARY as _BINARY_FAMILY, FamilyRules, register_family  # noqa: E402
from ..core.descriptors import check_descriptors, refuse     # noqa: E402
from .rule_language import FUNCTIONS     # noqa: E402
from .shape import expand_adjoint, gather_flat, scatter_add     # noqa: E402


def _operand(v, like):
    """A rule's number operand of ``where`` as a tensor of ``like``'s dtype."""
    if isinstance(v, Tensor):
        return v
    return Tensor._const(np.asarray(v, with_number(like.dtype, v)))


def tensor_where(cond, a, b):
    """where() of a rule: ``cond`` a bool tensor or a Python bool, ``a``/``b`` tensors or numbers."""
    if isinstance(cond, (bool, np.bool_)):
        return a if cond else b
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):    # (two numbers: the default float)
        a = Tensor._const(np.asarray(a, DEFAULT))
    like = a if isinstance(a, Tensor) else b
    return BINARY_BY_NAME["where"].record(_operand(a, like), _operand(b, like), cond)


def _ipow_rule(v, e):
    if isinstance(e, Tensor):
        return BINARY_BY_NAME["pow"].record(v, e)
    if type(e) is float and e == 1.0 and isinstance(v, Tensor):
        return _pow1(v)
    return UNARY_BY_NAME["pow_s"].record(v, e)


def _nan_like(x):
    """A rule's nan (logit outside [0, 1]); ``where`` makes it a tensor of x's dtype."""
    return float("nan")


def _tensor_or_number(op):
    number = getattr(np, op.name, op.forward)

    def f(v, *args):
        return op.record(v, *args) if isinstance(v, Tensor) else number(v, *args)
    f.__name__ = op.name
    return f


def _binary_tensor_or_number(op):
    number = getattr(np, op.name, op.forward)

    def f(u, v):
        if not isinstance(u, Tensor) and not isinstance(v, Tensor):
            return number(u, v)
        like = u if isinstance(u, Tensor) else v
        return op.record(_operand(u, like), _operand(v, like))
    f.__name__ = op.name
    return f


# The tensor ops a rule's functions name (rule_language.FUNCTIONS' ``tensor``): the table's
# unary ops, its binary ops, and the three forms of where, ipow and nan_like.
TENSOR_SPELLINGS = {op.name: _tensor_or_number(op) for op in ALL_UNARY}
TENSOR_SPELLINGS.update({op.name: _binary_tensor_or_number(op) for op in ALL_BINARY if op.name not in TENSOR_SPELLINGS})
TENSOR_SPELLINGS.update(where=tensor_where, ipow=_ipow_rule, nan_like=_nan_like)
_GRAPH_NS = {name: TENSOR_SPELLINGS[fn.tensor] for name, fn in FUNCTIONS.items() if fn.tensor in TENSOR_SPELLINGS}


def _graph_ns():
    """The names rules are evaluated with (the differentiable reverse)."""
    return _GRAPH_NS


def _graph_rule(rule, params):
    src = "lambda %s: %s" % (params, rule.replace(" and ", " & "))
    return eval(compile(src, "<rule %s>" % rule, "eval"), _GRAPH_NS)


for _op in ALL_UNARY:
    _op.graph = _graph_rule(_op.rule, "g, x, y, p, q")
for _op in ALL_BINARY:
    _op.graph = (_graph_rule(_op.rule_a, "g, a, b, c, y"), _graph_rule(_op.rule_b, "g, a, b, c, y"))


def _pow1(x):
    """``x ** 1`` inside a differentiable reverse (``g * 2 * x ** 1`` for a square):
    the entry PyTorch records too, so higher derivatives still depend on x, but with
    x's own data (read-only) as its value and x's version counter, like a view,
    instead of a copy."""
    if not x._requires_grad or not _tp.state().grad:
        return x
    op = UNARY_BY_NAME["pow_s"]
    T = _tp.current()
    s = x._slot if (x._tape_id == T.id and x._slot_version == x._ver[0]) else T.adopt(x)
    T.vals[s] = x._data                 # pow's reverse reads its input
    out = x._data.view()
    out.flags.writeable = False
    o = T.new_slot(op.code, s, -1, -1, -1, -1, op.nm, 1.0, 0.0, out, False, x._ver)
    return Tensor._recorded(out, T, o, x._ver)


def _adjoint(r, g):
    """A rule's result as a tensor of g's size (a rule may fold to a number)."""
    if isinstance(r, Tensor):
        return r
    return Tensor._wrap(np.full(g._data.shape, r, g.dtype))


def unary_differentiable_reverse(ctx, s, k, row, f0, f1, g, table=UNARY_OPS):
    op = table[k]
    a = row[_tp.A]
    if not ctx.needs(a):
        return []
    x = ctx.value(a) if op.saves & 1 else None
    y = ctx.value(s) if op.saves & 8 else None
    return [(a, _adjoint(op.graph(g, x, y, f0, f1), g))]


def binary_differentiable_reverse(ctx, s, k, row, f0, f1, g, table=BINARY_OPS):
    op = table[k]
    ins, maps = _binary_maps(ctx, row)      # input k -> output: flat index of every output element
    needs = (ctx.needs(ins[0]), ctx.needs(ins[1]))
    reads = (op.reads[0] if needs[0] else 0) | (op.reads[1] if needs[1] else 0)
    vals = [None, None, None, None]     # a, b, c, y: what the rules of the inputs to differentiate read
    for j in range(4):
        if reads & (1 << j):
            v = ctx.value(s if j == 3 else ins[j])
            if j < 3 and maps[j] is not None:
                v = gather_flat(v, maps[j])
            vals[j] = v
    out = []
    for j in (0, 1):
        sl = ins[j]
        if not needs[j]:
            continue
        r = _adjoint(op.graph[j](g, *vals), g)
        size, n_out = ctx.size(sl), row[_tp.SIZE]
        if size != n_out or maps[j] is not None:
            if r.numel() != n_out:      # one element standing for the whole output: made explicit
                r = expand_adjoint(r, n_out)
            if maps[j] is not None:
                r = scatter_add(r, maps[j], size)
            else:                       # a one-element operand broadcast over the output
                r = r.sum().reshape(size)
        out.append((sl, r))
    return out


# -- forward mode and second order (autograd/tangent.py): the same rules in NumPy ----
# The Jacobian of an elementwise op is diagonal, so a row's reverse rule with the
# adjoint replaced by a tangent is its tangent rule (_dual.py), on K directions at once.
from ._dual import as_batch, dual_rule, gather_columns, numpy_rule, scatter_columns  # noqa: E402

for _op in ALL_UNARY:
    _op.np_rule, _op.dual = numpy_rule(_op.rule, "g, x, y, p, q"), dual_rule(_op.rule)
for _op in ALL_BINARY:
    _op.np_rule = (numpy_rule(_op.rule_a, "g, a, b, c, y"), numpy_rule(_op.rule_b, "g, a, b, c, y"))
    _op.dual = (dual_rule(_op.rule_a), dual_rule(_op.rule_b))


def _unary_values(ctx, s, op, a):
    return (ctx.val(a) if op.saves & 1 else None), (ctx.val(s) if op.saves & 8 else None)


def unary_tangent(ctx, s, k, row, f0, f1, table=UNARY_OPS):
    op, a = table[k], row[_tp.A]
    t = ctx.tan(a)
    if t is None:
        return None
    x, y = _unary_values(ctx, s, op, a)
    return as_batch(op.np_rule(t, x, y, f0, f1), ctx.K, row[_tp.SIZE])


def unary_batched_reverse(ctx, s, k, row, f0, f1, G, table=UNARY_OPS):
    op, a = table[k], row[_tp.A]
    if not ctx.needs(a):
        return []
    x, y = _unary_values(ctx, s, op, a)
    return [(a, as_batch(op.np_rule(G, x, y, f0, f1), G.shape[0], row[_tp.SIZE]))]


def unary_curvature(ctx, s, k, row, f0, f1, g, table=UNARY_OPS):
    op, a = table[k], row[_tp.A]
    if not ctx.needs(a):
        return []
    x, y = _unary_values(ctx, s, op, a)
    d = op.dual({"g": (g, None), "x": (x, ctx.tan(a)), "y": (y, ctx.tan(s)), "p": (f0, None),
                 "q": (f1, None)})[1]
    return [] if d is None else [(a, as_batch(d, ctx.K, row[_tp.SIZE]))]


def _binary_maps(ctx, row):
    """(input slots a, b, c; for each, the flat index of its element at every output
    element, or None when it has the output's elements or is one element)."""
    ins = (row[_tp.A], row[_tp.B], row[_tp.C])
    i0, bits = row[_tp.AUX], row[_tp.PARAM]
    maps = [None, None, None]
    if i0 >= 0:
        at = i0
        for j in range(3):
            if j == 2 and ins[2] < 0:
                break
            if not bits & (8 << j):
                maps[j] = ctx.strided_map(at)
            at += 2 + 2 * int(ctx.aux[at])
    return ins, maps


def _binary_env(ctx, s, op, ins, maps, reads, tangents):
    """The values (and with ``tangents`` the tangents) of a, b, c, y on the output's elements."""
    env = {}
    for j, name in enumerate("abcy"):
        if not reads & (1 << j):
            env[name] = (None, None)
            continue
        sl = s if j == 3 else ins[j]
        v, t = ctx.val(sl), (ctx.tan(sl) if tangents and j != 2 else None)
        if j < 3 and maps[j] is not None:
            v = v[maps[j]]
            t = None if t is None else gather_columns(t, maps[j])
        env[name] = (v, t)
    return env


def _to_operand(ctx, r, sl, m, K, n):
    r = as_batch(r, K, n)
    if m is not None:
        return scatter_columns(r, m, ctx.size(sl))
    if ctx.size(sl) != n:               # a one-element operand broadcast over the output
        return r.sum(axis=1, keepdims=True)
    return r


def binary_tangent(ctx, s, k, row, f0, f1, table=BINARY_OPS):
    op = table[k]
    ins, maps = _binary_maps(ctx, row)
    out = None
    for j in (0, 1):
        t = ctx.tan(ins[j])
        if t is None:
            continue
        if maps[j] is not None:
            t = gather_columns(t, maps[j])
        env = _binary_env(ctx, s, op, ins, maps, op.reads[j], False)
        r = as_batch(op.np_rule[j](t, *[env[v][0] for v in "abcy"]), ctx.K, row[_tp.SIZE])
        out = r if out is None else out + r
    return out


def _binary_adjoints(ctx, s, row, K, rule):
    """(input slot, ``(K, n_input)`` batch) for each input that needs one: ``rule(j, ins,
    maps)`` gives it on the output's elements (None: zero), summed back onto the input."""
    ins, maps = _binary_maps(ctx, row)
    out = []
    for j in (0, 1):
        if ctx.needs(ins[j]):
            r = rule(j, ins, maps)
            if r is not None:
                out.append((ins[j], _to_operand(ctx, r, ins[j], maps[j], K, row[_tp.SIZE])))
    return out


def binary_batched_reverse(ctx, s, k, row, f0, f1, G, table=BINARY_OPS):
    op = table[k]

    def rule(j, ins, maps):
        env = _binary_env(ctx, s, op, ins, maps, op.reads[j], False)
        return op.np_rule[j](G, *[env[v][0] for v in "abcy"])
    return _binary_adjoints(ctx, s, row, G.shape[0], rule)


def binary_curvature(ctx, s, k, row, f0, f1, g, table=BINARY_OPS):
    op = table[k]

    def rule(j, ins, maps):
        env = _binary_env(ctx, s, op, ins, maps, op.reads[j], True)
        env["g"] = (g, None)
        return op.dual[j](env)[1]
    return _binary_adjoints(ctx, s, row, ctx.K, rule)


# -- replay (tapegrad.replay): the forward again, from the entry alone ----------------
def unary_replay_rule(k, row, aux, shape, name, f0, f1, table=UNARY_OPS):
    """An entry's forward again (tapegrad.replay), as a function of the slot values:
    the recorder's NumPy call with the entry's constants bound once."""
    op = table[k]
    a, fwd, n = row[_tp.A], op.forward, op.nparams
    if n == 0:
        return lambda v: np.asarray(fwd(v[a]))
    if op.name in _CONST_OPERAND:
        return lambda v: np.asarray(fwd(v[a], _constant(f0, v[a].dtype)))
    if n == 1:
        return lambda v: np.asarray(fwd(v[a], f0))
    return lambda v: np.asarray(fwd(v[a], f0, f1))


def binary_replay_rule(k, row, aux, shape, name, f0, f1, table=BINARY_OPS):
    op = table[k]
    a, b, c, fwd = row[_tp.A], row[_tp.B], row[_tp.C], op.forward

    def f(v):
        ad, bd = v[a], v[b]
        if ad.dtype is not bd.dtype:
            ad, bd = _promote(ad, bd)
        if c >= 0:
            return np.asarray(fwd(v[c], ad, bd))
        return np.asarray(fwd(ad, bd) if ad.shape == bd.shape else broadcast_apply(fwd, ad, bd))
    return f


def _always(k, ints, e, sizes, aux, live):
    return True


def unary_check_entries(ks, es, ints, aux):
    """``FamilyRules.check_entries``: a unary kernel reads its input and adds into its
    adjoint at the output's indices."""
    a, n = ints[es, _tp.A], ints[es, _tp.SIZE]
    ok = (a >= 0) & (a < es)
    ok[ok] = ints[a[ok], _tp.SIZE] == n[ok]
    refuse(ok, es, lambda i: "input slot %d for an output of %d elements" % (a[i], n[i]))


def binary_check_entries(ks, es, ints, aux):
    """``FamilyRules.check_entries``: a binary (or three-input) kernel reads input j at
    the output's index, at 0 (PARAM bit j: a one-element input), or, with AUX, through
    the j-th broadcast descriptor (PARAM bit 3 + j: one of the output's shape)."""
    rows = ints[es]
    n, at, bits = rows[:, _tp.SIZE], rows[:, _tp.AUX], rows[:, _tp.PARAM]
    slots = rows[:, [_tp.A, _tp.B, _tp.C]]
    refuse((slots[:, :2] >= 0).all(1) & (slots[:, 2] >= -1) & (slots < es[:, None]).all(1), es,
           lambda i: "input slots %s" % slots[i].tolist())
    mapped = at >= 0
    nd = np.zeros(es.size, np.int64)
    if mapped.any():
        refuse(~mapped | (at < len(aux)), es, lambda i: "a broadcast at word %d of %d" % (at[i], len(aux)))
        nd[mapped] = aux[at[mapped]]
    w = 2 + 2 * nd
    for j in range(3):
        s = slots[:, j]
        size = np.where(s >= 0, ints[np.maximum(s, 0), _tp.SIZE], 0)
        m = mapped & (s >= 0)
        if m.any():         # (the sweep's broadcast add and sub read every input's descriptor)
            check_descriptors(aux, at[m] + j * w[m], size[m], n[m], es[m], "input %d's broadcast" % j)
            refuse(aux[at[m] + j * w[m]] == nd[m], es[m], lambda i: "broadcast descriptors of unlike dimensions")
        full = np.where(mapped, bits >> (3 + j) & 1, ~bits >> j & 1).astype(bool)
        refuse((s < 0) | np.where(full, size == n, mapped | (n == 0) | (size >= 1)), es,
               lambda i: "input %d of %d elements for an output of %d" % (j, size[i], n[i]))


# The first table: a compiled reverse, a compiled replay of arrays and of single numbers
# (the kernels generated from the rows).
register_family(_UNARY_FAMILY, FamilyRules(unary_differentiable_reverse, unary_replay_rule, expands_adjoint=False,
                                           scalar_replay=frozenset(range(len(UNARY_OPS))), compiled_forward=_always,
                                           tangent=unary_tangent, batched_reverse=unary_batched_reverse,
                                           curvature=unary_curvature, check_entries=unary_check_entries))
register_family(_BINARY_FAMILY, FamilyRules(binary_differentiable_reverse, binary_replay_rule, expands_adjoint=False,
                                            scalar_replay=frozenset(range(len(BINARY_OPS))),
                                            compiled_forward=_always, tangent=binary_tangent,
                                            batched_reverse=binary_batched_reverse, curvature=binary_curvature,
                                            check_entries=binary_check_entries))


def _never(k, ints, e, sizes, aux, live):
    return False


# The second table: compiled reverse only (its replay forward is the NumPy call)
register_family(UNARY2, FamilyRules(
    _functools.partial(unary_differentiable_reverse, table=UNARY_OPS_2),
    _functools.partial(unary_replay_rule, table=UNARY_OPS_2),
    expands_adjoint=False, scalar_replay=frozenset(), compiled_forward=_never,
    tangent=_functools.partial(unary_tangent, table=UNARY_OPS_2),
    batched_reverse=_functools.partial(unary_batched_reverse, table=UNARY_OPS_2),
    curvature=_functools.partial(unary_curvature, table=UNARY_OPS_2), check_entries=unary_check_entries))
register_family(BINARY2, FamilyRules(
    _functools.partial(binary_differentiable_reverse, table=BINARY_OPS_2),
    _functools.partial(binary_replay_rule, table=BINARY_OPS_2),
    expands_adjoint=False, scalar_replay=frozenset(), compiled_forward=_never,
    tangent=_functools.partial(binary_tangent, table=BINARY_OPS_2),
    batched_reverse=_functools.partial(binary_batched_reverse, table=BINARY_OPS_2),
    curvature=_functools.partial(binary_curvature, table=BINARY_OPS_2), check_entries=binary_check_entries))
