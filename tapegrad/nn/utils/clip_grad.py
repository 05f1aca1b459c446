"""Gradient clipping (``torch.nn.utils.clip_grad``): the gradients are scaled or
clamped in place, under ``no_grad``, as PyTorch's are."""
import types
import warnings

import numpy as np

from ... import linalg
from ...autograd.grad_mode import no_grad
from ...core.tensor import Tensor

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _tensors(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type`` norm of the norms of ``tensors`` (that of their concatenation)."""
    tensors = _tensors(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return Tensor._wrap(np.array(0.0))
    with no_grad():
        norms = [linalg.vector_norm(t, norm_type) for t in tensors]
        total = linalg.vector_norm(Tensor._wrap(np.stack([n._data for n in norms])), norm_type)
    if error_if_nonfinite and not np.isfinite(total._data):
        raise RuntimeError("The total norm of order {} for gradients from `parameters` is non-finite, so it cannot "
                           "be clipped. To disable this error and scale the gradients by the non-finite norm anyway, "
                           "set `error_if_nonfinite=False`".format(norm_type))
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by ``min(1, max_norm / (total_norm + 1e-6))``."""
    grads = [p.grad for p in _tensors(parameters) if p.grad is not None]
    max_norm = float(max_norm)
    if not grads:
        return
    total = total_norm._data if isinstance(total_norm, Tensor) else np.asarray(total_norm)
    coef = np.minimum(max_norm / (total + 1e-6), 1.0)
    for g in grads:
        with np.errstate(invalid="ignore"):         # (inf * 0 of a non-finite norm: nan, as PyTorch's)
            g._data[...] = g._data * coef.astype(g._data.dtype)
        g._written_()


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of ``parameters`` in place so that their total ``norm_type``
    norm is at most ``max_norm``; returns the total norm before clipping."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=3)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated spelling of ``clip_grad_norm_``."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp the gradients of ``parameters`` in place to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    for p in _tensors(parameters):
        g = p.grad
        if g is not None:
            np.clip(g._data, -clip_value, clip_value, out=g._data)
            g._written_()
