"""Helpers the distributions share: broadcasting parameters, lazy properties, the
conversions between probabilities and logits, draws from tapegrad's generator."""
import numbers

import numpy as np

from .. import functions as _f
from ..autograd.grad_mode import enable_grad
from ..core import random as _random
from ..core.tensor import Tensor

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
