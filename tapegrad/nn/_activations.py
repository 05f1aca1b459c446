"""The activation functions of ``tg.nn.functional`` (PyTorch's names, arguments and
gradients, including at the kinks: relu's is 0 at 0, leaky_relu's the slope, hardtanh's
0 at its bounds, where clamp's would be 1)."""
import math
import warnings

import numpy as np

from .. import _jit
from .. import creation as _c
from .._jit import jit
from .. import functions as _f
from ..core.dtypes import torch_name as _torch_name
from ..core.registry import SAVE_A, SAVE_OUT
from ..core.tensor import Tensor
from . import _host

__all__ = ["threshold", "threshold_", "relu6", "hardtanh", "hardtanh_", "elu", "elu_", "selu", "selu_", "celu",
           "celu_", "leaky_relu", "leaky_relu_", "prelu", "rrelu", "rrelu_", "glu", "gelu", "logsigmoid",
           "hardshrink", "tanhshrink", "softsign", "softmin", "softshrink", "hardsigmoid", "silu", "mish",
           "hardswish", "relu_"]

_U = _f._U


def _float_input(name, kernel, input):
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' (position 1) must be Tensor, not %s" % (name, type(input).__name__))
    if input.dtype.kind != "f":
        raise NotImplementedError("\"%s\" not implemented for '%s'" % (kernel, _torch_name(input.dtype)))


def _inplace(input, out):
    """``input`` overwritten with ``out`` (an in-place activation, recorded as PyTorch's
    in-place ops are: the input's version moves on and it takes ``out``'s history)."""
    return input.copy_(out)


def _row(name, kernel, input, inplace, *params):
    _float_input(name, kernel, input)
    out = _U[name].record(input, *[float(p) for p in params]) if params else _U[name].record(input)
    return _inplace(input, out) if inplace else out


def threshold(input, threshold, value, inplace=False):
    """``input`` where it is above ``threshold``, else ``value`` (gradient 0 there)."""
    if not isinstance(input, Tensor):
        raise TypeError("threshold(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    out = _f.where(input > threshold, input, _c.full_like(input, value))
    return _inplace(input, out) if inplace else out


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, inplace=True)


def relu_(input):
    return input.relu_()


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``clamp(input, min_val, max_val)``, with gradient 0 at the bounds (PyTorch's)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _row("hardtanh", "hardtanh_backward_cpu", input, inplace, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """``hardtanh(input, 0, 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def elu(input, alpha=1.0, inplace=False):
    """``x`` for x > 0, else ``alpha * (exp(x) - 1)``."""
    return _row("elu", "elu_cpu", input, inplace, alpha, 1.0)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with SELU's constants."""
    return _row("elu", "elu_cpu", input, inplace, _SELU_ALPHA, _SELU_SCALE)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``; its gradient is PyTorch's,
    whose input scale is 1 / alpha rounded through float32."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _row("celu", "elu_cpu", input, inplace, alpha, 1.0 / float(np.float32(alpha)))


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` for x > 0, else ``negative_slope * x``."""
    return _row("leaky_relu", "leaky_relu_cpu", input, inplace, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def prelu(input, weight):
    """leaky_relu with a learnt slope ``weight``: one, or one per channel (dimension 1)."""
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError("prelu(): argument 'input' and 'weight' must be Tensors")
    if weight.ndim > 1:
        raise RuntimeError("prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = %d" % weight.ndim)
    n = weight.numel()
    w = weight
    if input.ndim >= 2 and n != 1:
        if input.shape[1] != n:
            raise RuntimeError("Mismatch of parameter numbers and input channel size. Found parameter numbers = %d "
                               "and channel size = %d." % (n, input.shape[1]))
        w = weight.reshape((n,) + (1,) * (input.ndim - 2))
    elif n != 1:
        if input.ndim == 0 or input.shape[0] != n and input.ndim == 1:
            raise RuntimeError("Mismatch of parameter numbers and input channel size. Found parameter numbers = %d "
                               "and channel size = %d." % (n, input.shape[0] if input.ndim else 1))
    else:
        w = weight.reshape(())
    return _f.where(input > 0, input, w * input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: slopes drawn from U(lower, upper) in training, their mean
    ``(lower + upper) / 2`` otherwise."""
    _float_input("rrelu", "rrelu_with_noise_cpu", input)
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    from ..core import random as _random
    slopes = _random.generator(None, "rrelu").uniform(lower, upper, input.shape).astype(input.dtype)
    noise = np.where(input._data >= 0, 1.0, slopes).astype(input.dtype)
    out = input * Tensor._const(noise)
    return _inplace(input, out) if inplace else out


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def glu(input, dim=-1):
    """``a * sigmoid(b)``, ``a`` and ``b`` the halves of ``input`` along ``dim``."""
    if not isinstance(input, Tensor):
        raise TypeError("glu(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % input.ndim if -input.ndim <= dim < input.ndim else dim
    if not -input.ndim <= dim < input.ndim:
        raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)"
                         % (-input.ndim, input.ndim - 1, dim))
    n = input.shape[d]
    if n % 2:
        raise RuntimeError("Halving dimension must be even, but dimension %d is size %d" % (d, n))
    a, b = _f.split(input, n // 2, d)
    return a * _f.sigmoid(b)


# -- gelu: one entry whose output is (2, ...): the values and their derivative, which the reverse
# multiplies by the adjoint (PyTorch's formulas; its reverse recomputes them) ----------------------------
_SQRT1_2, _INV_SQRT_2PI = 0.7071067811865476, 0.3989422804014327
_K_BETA, _K_KAPPA = 0.7978845608028654, 0.044715


@jit
def _gelu_kernel(x, y, d, tanh):
    """GELU's values and derivatives in one pass (float64, flat arrays)."""
    for k in range(x.size):
        v = x[k]
        if tanh:
            t = math.tanh(_K_BETA * (v + _K_KAPPA * (v * v * v)))
            right = 1.0 + t
            y[k] = 0.5 * v * right
            d[k] = 0.5 * right + 0.5 * v * (1.0 - t * t) * (_K_BETA * (1.0 + 3.0 * _K_KAPPA * (v * v)))
        else:
            cdf = (math.erf(v * _SQRT1_2) + 1.0) * 0.5
            y[k] = v * cdf
            d[k] = cdf + v * (math.exp((v * v) * -0.5) * _INV_SQRT_2PI)


def _gelu_fwd(arrays, ints, floats):
    x = arrays[0]
    out = np.empty((2,) + x.shape, x.dtype)
    if _jit.READY[0] and x.dtype == np.float64 and x.flags.c_contiguous:     # (the kernels are loaded)
        _gelu_kernel(x.reshape(-1), out[0].reshape(-1), out[1].reshape(-1), bool(ints[0]))
        return out
    if ints[0]:         # approximate="tanh"
        inner = _K_BETA * (x + _K_KAPPA * (x * x * x))
        t = np.tanh(inner)
        right = 1.0 + t
        np.multiply(0.5 * x, right, out=out[0])
        out[1] = 0.5 * right + 0.5 * x * (1.0 - t * t) * (_K_BETA * (1.0 + 3.0 * _K_KAPPA * (x * x)))
    else:       # (in place, in the output's two halves: no temporary arrays)
        cdf, d = out[0], out[1]
        np.multiply(x, _SQRT1_2, out=cdf)
        _erf(cdf, out=cdf)
        cdf += 1.0
        cdf *= 0.5                      # Phi(x), where the value goes
        np.multiply(x, x, out=d)
        d *= -0.5
        np.exp(d, out=d)
        d *= _INV_SQRT_2PI
        d *= x
        d += cdf                        # the derivative, Phi(x) + x phi(x)
        cdf *= x                        # the value, x Phi(x) (x * 0.5 * (1 + erf): the same bits)
    return out


def _gelu_derivative(x, tanh):
    """The derivative with tapegrad's operations (create_graph differentiates it)."""
    if tanh:
        t = _f.tanh((x + x * x * x * _K_KAPPA) * _K_BETA)
        return (t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * ((x * x * (3.0 * _K_KAPPA) + 1.0) * _K_BETA)
    return (_f.erf(x * _SQRT1_2) + 1.0) * 0.5 + x * _f.exp(x * x * -0.5) * _INV_SQRT_2PI


def _gelu_rev(xs, y, g, ints, floats, needs):
    return [g[0] * _gelu_derivative(xs[0], ints[0])]


def _gelu_arr_rev(xs, y, g, ints, floats, needs):
    return [g[0] * y[1]]


def _erf(x, out=None):
    import scipy.special
    return scipy.special.erf(x, out=out)


_GELU = _host.nn_op("gelu", "GeluBackward0", _gelu_fwd, _gelu_rev, _gelu_arr_rev, SAVE_A | SAVE_OUT)


def gelu(input, approximate="none"):
    """``x * Phi(x)`` (``approximate="tanh"``: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``)."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    _float_input("gelu", "GeluKernelImpl", input)
    ints = [int(approximate == "tanh")]
    return _host.record(_GELU, [input], _gelu_fwd([input._data], ints, None), ints)[0]


def logsigmoid(input):
    """``log(sigmoid(x))``, computed as ``min(x, 0) - log1p(exp(-|x|))``."""
    _float_input("log_sigmoid", "log_sigmoid_forward_cpu", input)
    return _U["log_sigmoid"].record(input)


def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    _float_input("hardshrink", "hardshrink_cpu", input)
    return _f.where((input > lambd) | (input < -lambd), input, _c.zeros_like(input))


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    _float_input("softshrink", "softshrink_cpu", input)
    if lambd < 0:
        raise RuntimeError("lambda must be greater or equal to 0, but found to be %s." % lambd)
    return _f.where(input > lambd, input - lambd, _f.where(input < -lambd, input + lambd, _c.zeros_like(input)))


def tanhshrink(input):
    """``x - tanh(x)``."""
    return input - _f.tanh(input)


def softsign(input):
    """``x / (1 + |x|)``."""
    return input / (_f.abs(input) + 1)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-input, dim)``."""
    if dim is None:
        warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the call to include dim=X "
                      "as an argument.", stacklevel=_stacklevel)
        dim = 0 if input.ndim in (0, 1, 3) else 1
    if dtype is not None:
        input = _f.to_dtype(input, dtype)
    return _f.softmax(-input, dim)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``, gradient 1/6 strictly inside (-3, 3)."""
    return _row("hardsigmoid", "hardsigmoid_cpu", input, inplace)


def silu(input, inplace=False):
    """``x * sigmoid(x)``."""
    return _row("silu", "silu_cpu", input, inplace)


def mish(input, inplace=False):
    """``x * tanh(softplus(x))``."""
    return _row("mish", "mish_cpu", input, inplace)


def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6``."""
    return _row("hardswish", "hardswish_cpu", input, inplace)

