"""Helpers the distributions share: broadcasting parameters, lazy properties, the
conversions between probabilities and logits, draws from tapegrad's generator."""
import numbers

import numpy as np

from .. import functions as _f
from ..autograd.grad_mode import enable_grad, is_grad_enabled
from ..core import random as _random
from ..core.tensor import Tensor
from ..ops import host as _host
from ._implicit import dirichlet_grad, standard_gamma_grad  # noqa: F401 (the rules' values, and tests')

euler_constant = 0.57721566490153286060

__all__ = ["broadcast_all", "lazy_property", "logits_to_probs", "probs_to_logits", "clamp_probs", "euler_constant"]


def broadcast_all(*values):
    """The values as tensors of one broadcast shape: numbers become tensors of the first
    tensor's dtype (float64 when all are numbers)."""
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    dtype = next((v.dtype for v in values if isinstance(v, Tensor)), np.dtype(np.float64))
    shape = np.broadcast_shapes(*(v.shape for v in values if isinstance(v, Tensor)))
    # (a number becomes a constant of the full shape: no expand of a constant on the tape)
    return tuple(Tensor._const(np.full(shape, v, dtype=dtype)) if not isinstance(v, Tensor)
                 else v if v.shape == shape else v.expand(shape) for v in values)


def _shape(size):
    """A sample shape as a tuple of ints (a tuple, list or an int-like ``torch.Size``)."""
    if isinstance(size, numbers.Integral):
        raise TypeError("sample_shape must be a tuple of ints, not int")
    return tuple(int(s) for s in size)


def _sum_rightmost(value, dim):
    """``value`` summed over its ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


def clamp_probs(probs):
    """Probabilities clamped into [eps, 1 - eps] (eps of their dtype)."""
    eps = float(np.finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Log-odds (``is_binary``) or log-probabilities of ``probs``."""
    p = clamp_probs(probs)
    if is_binary:
        return p.log() - (-p).log1p()
    return p.log()


def logits_to_probs(logits, is_binary=False):
    """The sigmoid of log-odds (``is_binary``) or the softmax of logits over the last dimension."""
    if is_binary:
        return logits.sigmoid()
    return _f.softmax(logits, -1)


class lazy_property:
    """A property computed on first access (with gradients recorded) and then stored on
    the instance; a parameter given as the other spelling (``probs``/``logits``)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _np(t):
    """A tensor's values (no gradient) as a NumPy array."""
    return t.detach().numpy()


def _gen():
    """tapegrad's random generator (tg.manual_seed seeds it; refused while recording)."""
    return _random.generator()


def _const(arr, dtype):
    """A constant tensor of ``arr`` in ``dtype``."""
    return Tensor._const(np.ascontiguousarray(np.asarray(arr, dtype=dtype)))


def _full(shape, value, dtype):
    return Tensor._const(np.full(tuple(shape), value, dtype=dtype))


# -- Gamma and Dirichlet draws as differentiable functions of their concentrations -------------
# Two host ops, each an entry whose inputs are the concentration and the draw (a constant, so a
# forward recomputation gives the same draw back) and whose reverse is the implicit derivative of
# the draw (``_implicit``), as PyTorch's ``_standard_gamma`` and ``_sample_dirichlet``.


def _draw_fwd(xs, ints, f):
    return np.array(xs[1], copy=True)


def _gamma_rev(xs, y, g, ints, f, needs):
    alpha = xs[0]
    if is_grad_enabled() and alpha.requires_grad:       # (create_graph: dx/dalpha is an entry of its own,
        return [g * _host.record(_GAMMA_GRAD, [alpha, y.detach()], _dxda_fwd([alpha._data, y._data], (), None)),
                None]                                    # whose own derivative PyTorch does not define)
    d = standard_gamma_grad(alpha.detach().numpy(), y.detach().numpy()).astype(y.dtype)
    return [g * Tensor._const(d), None]


def _dxda_fwd(xs, ints, f):
    return standard_gamma_grad(xs[0], xs[1]).astype(xs[1].dtype)


def _dxda_rev(xs, y, g, ints, f, needs):
    raise NotImplementedError("the derivative for '_standard_gamma_grad' is not implemented.")


def _dirichlet_rev(xs, y, g, ints, f, needs):
    # PyTorch's _Dirichlet.backward: dirichlet_grad(x, alpha, total) * (g - sum(x * g)), computed
    # once_differentiable (on values: under create_graph the result is a constant, as PyTorch's)
    a, x, gv = xs[0]._data, y._data, g.detach().numpy()
    d = dirichlet_grad(x, a, np.broadcast_to(a.sum(-1, keepdims=True), a.shape))
    out = d * (gv - (x * gv).sum(-1, keepdims=True))
    return [Tensor._const(np.ascontiguousarray(out.astype(x.dtype))), None]


# (defined when tg.distributions is imported, itself on first use: the registry lists them then)
_STANDARD_GAMMA = _host.host_op("standard_gamma", "StandardGammaBackward0", _draw_fwd, _gamma_rev,
                               _host.SAVE_A | _host.SAVE_OUT)
_GAMMA_GRAD = _host.host_op("standard_gamma_grad", "StandardGammaGradBackward0", _dxda_fwd, _dxda_rev, 0)
_DIRICHLET = _host.host_op("sample_dirichlet", "_DirichletBackward", _draw_fwd, _dirichlet_rev,
                          _host.SAVE_A | _host.SAVE_OUT)


def _gamma_draws(alpha, shape, generator):
    """Gamma(alpha, 1) draws of ``shape`` (alpha broadcast to it) in alpha's dtype, at least
    its smallest normal number (as PyTorch's)."""
    dtype = alpha.dtype
    rng = _random.generator(generator, "_standard_gamma")   # (first: a recording is told that this draws)
    x = rng.standard_gamma(np.broadcast_to(_np(alpha).astype(np.float64), shape))
    return np.maximum(x, np.finfo(dtype).tiny).astype(dtype)


def _draw(op, alpha, shape, x):
    a = alpha.expand(shape) if tuple(alpha.shape) != tuple(shape) else alpha
    x = np.ascontiguousarray(x)
    if not a.requires_grad:
        return Tensor._const(x)
    return _host.record(op, [a, Tensor._const(x)], x)


def standard_gamma(alpha, shape, generator=None):
    """A draw of Gamma(alpha, 1) of ``shape`` (alpha broadcast to it) that differentiates
    with respect to ``alpha`` (PyTorch's ``_standard_gamma``): one host op entry, its inputs
    the concentration and the draw, its reverse ``g * standard_gamma_grad(alpha, x)``."""
    shape = tuple(shape)
    x = _gamma_draws(alpha, shape, generator)
    return _draw(_STANDARD_GAMMA, alpha, shape, x)


def sample_dirichlet(alpha, shape, generator=None):
    """A draw of Dirichlet(alpha) of ``shape`` (alpha broadcast to it, the categories last)
    that differentiates with respect to ``alpha`` as PyTorch's ``_Dirichlet``: normalised
    Gamma draws, whose reverse is ``dirichlet_grad(x, alpha, total) * (g - sum(x * g))``
    over the last dimension (the implicit derivative of each Beta(alpha_i, total - alpha_i)
    marginal).  One host op entry."""
    shape = tuple(shape)
    g = _gamma_draws(alpha, shape, generator).astype(np.float64)
    x = g / g.sum(-1, keepdims=True)
    x = np.maximum(x, np.finfo(alpha.dtype).tiny).astype(alpha.dtype)
    return _draw(_DIRICHLET, alpha, shape, x)
