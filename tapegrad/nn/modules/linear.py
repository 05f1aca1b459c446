"""Identity, Linear and Bilinear (PyTorch's ``torch.nn.modules.linear``)."""
import math

import numpy as np

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._common import factory_dtype
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """The input, unchanged (its arguments are accepted and ignored, as PyTorch's)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ W.T + b``; W (out_features, in_features) and b drawn from
    U(-1/sqrt(in_features), 1/sqrt(in_features)) with tapegrad's generator (PyTorch's
    kaiming_uniform_(a=sqrt(5)) default)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dt))
        if bias:
            self.bias = Parameter(np.empty((out_features,), dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (self.in_features, self.out_features,
                                                            self.bias is not None)


class Bilinear(Module):
    """``y[..., o] = x1 @ W[o] @ x2 + b[o]``; W (out_features, in1_features,
    in2_features) and b drawn from U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(np.empty((out_features, in1_features, in2_features), dtype=dt))
        if bias:
            self.bias = Parameter(np.empty((out_features,), dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.in1_features <= 0:
            raise ValueError("in1_features must be > 0, but got (in1_features=%d)" % self.in1_features)
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return "in1_features=%d, in2_features=%d, out_features=%d, bias=%s" % (
            self.in1_features, self.in2_features, self.out_features, self.bias is not None)
