"""Weight initialisation (``tg.nn.init``, PyTorch's ``torch.nn.init``): each fills a
tensor in place under no_grad and returns it.  The draws are PyTorch's distributions
from tapegrad's generators (``tg.manual_seed``, or ``generator=``), not its numbers."""
import math
import warnings

import numpy as np

from ..autograd.grad_mode import no_grad
from ..core import random as _random
from ..core.tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
           "sparse_"]


def _check(tensor, name):
    if not isinstance(tensor, Tensor):
        raise TypeError("%s(): argument 'tensor' must be Tensor, not %s" % (name, type(tensor).__name__))


def _write(tensor, values):
    with no_grad():
        tensor._write_(np.asarray(values, dtype=tensor.dtype).reshape(tensor.shape))
    return tensor


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for ``nonlinearity`` (an ``nn.functional`` name): 1 for
    linear, conv and sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2))
    for leaky_relu (slope ``param``, 0.01 by default), 3/4 for selu."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif (not isinstance(param, bool) and isinstance(param, int)) or isinstance(param, float):
            slope = param
        else:
            raise ValueError("negative_slope %s not a valid number" % (param,))
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError("Unsupported nonlinearity %s" % (nonlinearity,))


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with draws from U(a, b)."""
    _check(tensor, "uniform_")
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with draws from N(mean, std^2)."""
    _check(tensor, "normal_")
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def _norm_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with draws from N(mean, std^2) truncated to [a, b] (each value outside is
    drawn again, as PyTorch's rejection sampler does where the interval holds more than
    30% of the mass, and by uniform proposals otherwise)."""
    _check(tensor, "trunc_normal_")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
                      "be incorrect.", stacklevel=2)
    rng = _random.generator(generator, "trunc_normal_")
    n = tensor.numel()
    lo, hi = (float(np.asarray(v, tensor.dtype)) for v in (a, b))
    p = _norm_cdf((b - mean) / std) - _norm_cdf((a - mean) / std)
    if p > 0.3:
        out = rng.standard_normal(n) * std + mean
        bad = (out < lo) | (out > hi)
        while bad.any():
            out[bad] = rng.standard_normal(int(bad.sum())) * std + mean
            bad = (out < lo) | (out > hi)
    else:       # proposals uniform on [a, b], accepted with the normal density relative to its peak
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2
        out = np.empty(n)
        pending = np.ones(n, bool)
        while pending.any():
            k = int(pending.sum())
            cand = a + (b - a) * rng.random(k)
            logpdf = -0.5 * ((cand - mean) / std) ** 2 - log_peak
            ok = np.log(rng.random(k)) <= logpdf
            idx = np.flatnonzero(pending)
            out[idx[ok]] = cand[ok]
            pending[idx[ok]] = False
    return _write(tensor, out)


def constant_(tensor, val):
    """Fill with ``val``."""
    _check(tensor, "constant_")
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    """Fill with 1."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fill with 0."""
    _check(tensor, "zeros_")
    with no_grad():
        return tensor.zero_()


def eye_(tensor):
    """The identity matrix (a 2-d tensor)."""
    _check(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """The Dirac delta of a {3, 4, 5}-d convolution weight: each group keeps as many
    input channels as it can, unchanged."""
    _check(tensor, "dirac_")
    nd = tensor.ndim
    if nd not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per = sizes[0] // groups
    out = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min(per, sizes[1])):
            out[(g * per + d, d) + centre] = 1
    return _write(tensor, out)


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError("Mode %s not supported, please use one of %s" % (mode, valid))
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(3.0) * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot)."""
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He), gain from
    ``calculate_gain(nonlinearity, a)``, fan the fan_in or fan_out (``mode``)."""
    _check(tensor, "kaiming_uniform_")
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan) (He)."""
    _check(tensor, "kaiming_normal_")
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix times ``gain`` (the trailing dimensions flattened): the
    Q of a normal matrix's QR, its columns' signs those of R's diagonal (Saxe et al.)."""
    _check(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _random.generator(generator, "orthogonal_").standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, q * gain)


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """N(0, std^2) with ``ceil(sparsity * rows)`` entries of each column set to 0."""
    _check(tensor, "sparse_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    rng = _random.generator(generator, "sparse_")
    out = rng.standard_normal((rows, cols)) * std
    for c in range(cols):
        out[rng.permutation(rows)[:num_zeros], c] = 0
    return _write(tensor, out)


def _deprecated(meth):
    new = meth.__name__
    old = new[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn("`nn.init.%s` is now deprecated in favor of `nn.init.%s`." % (old, new), FutureWarning,
                      stacklevel=2)
        return meth(*args, **kwargs)
    deprecated_init.__name__ = old
    deprecated_init.__doc__ = "Deprecated: ``nn.init.%s``." % new
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
