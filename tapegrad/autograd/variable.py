"""``tg.autograd.Variable``: PyTorch's legacy name of a tensor that records gradients.

Since PyTorch 0.4 a ``Variable`` is a tensor: ``isinstance(t, Variable)`` holds for
every tensor, and ``Variable(t, requires_grad=True)`` is a new leaf sharing ``t``'s
storage (``t.detach().requires_grad_()``); ``volatile`` has no effect.
"""
import warnings

import numpy as np

from ..core.tensor import DEFAULT_DTYPE, Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)

    def __call__(cls, data=None, requires_grad=False, volatile=False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if data is None:
            data = Tensor._const(np.empty((0,), DEFAULT_DTYPE))
        elif not isinstance(data, Tensor):
            raise TypeError("Variable data has to be a tensor, but got %s" % type(data).__name__)
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out


class Variable(metaclass=_VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)``: ``data`` itself as
    a new tensor (sharing its storage) that requires grad or not."""
