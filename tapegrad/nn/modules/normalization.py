"""LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm (PyTorch's
``torch.nn.modules.normalization``)."""
import numbers

import numpy as np

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._common import factory_dtype
from .module import Module

__all__ = ["LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm"]


class LayerNorm(Module):
    """F.layer_norm over the trailing ``normalized_shape`` dimensions, weight 1 and bias 0."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        dt = factory_dtype(device, dtype)
        if elementwise_affine:
            self.weight = Parameter(np.empty(self.normalized_shape, dt))
            if bias:
                self.bias = Parameter(np.empty(self.normalized_shape, dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "%s, eps=%s, elementwise_affine=%s, bias=%s" % (self.normalized_shape, self.eps,
                                                              self.elementwise_affine, self.bias is not None)


class GroupNorm(Module):
    """F.group_norm with ``num_groups`` groups, per-channel weight 1 and bias 0."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels (%d) must be divisible by num_groups (%d)" % (num_channels, num_groups))
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        dt = factory_dtype(device, dtype)
        if affine:
            self.weight = Parameter(np.empty((num_channels,), dt))
            if bias:
                self.bias = Parameter(np.empty((num_channels,), dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "%s, %s, eps=%s, affine=%s, bias=%s" % (self.num_groups, self.num_channels, self.eps, self.affine,
                                                      self.bias is not None)


class RMSNorm(Module):
    """F.rms_norm over the trailing ``normalized_shape`` dimensions, weight 1."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(np.empty(self.normalized_shape, factory_dtype(device, dtype)))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return "%s, eps=%s, elementwise_affine=%s" % (self.normalized_shape, self.eps, self.elementwise_affine)


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return "%s, alpha=%s, beta=%s, k=%s" % (self.size, self.alpha, self.beta, self.k)
