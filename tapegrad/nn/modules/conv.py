"""Convolution layers (PyTorch's ``torch.nn.modules.conv``)."""
import math

import numpy as np

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._common import factory_dtype, ntuple
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]


class _ConvNd(Module):
    """The weight (out_channels, in_channels / groups, *kernel_size) (transposed:
    (in_channels, out_channels / groups, *kernel_size)) and bias drawn as PyTorch's
    default (kaiming_uniform_(a=sqrt(5)), bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)));
    a padding_mode other than 'zeros' pads with F.pad first, as PyTorch does."""
    _nd = 1
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None, output_padding=0):
        super().__init__()
        nd = self._nd
        stride = ntuple(stride, nd)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError("Invalid padding string {!r}, should be one of {}".format(padding, {"same", "valid"}))
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in modes:
            raise ValueError("padding_mode must be one of {}, but got padding_mode='{}'".format(modes, padding_mode))
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = ntuple(kernel_size, nd), stride, ntuple(dilation, nd)
        self.padding = padding if isinstance(padding, str) else ntuple(padding, nd)
        self.transposed = self._transposed
        self.output_padding = ntuple(output_padding, nd)
        self.groups, self.padding_mode = groups, padding_mode
        if isinstance(self.padding, str):
            self._reversed_padding_repeated_twice = [0, 0] * nd
            if self.padding == "same":
                for d, k, i in zip(self.dilation, self.kernel_size, range(nd - 1, -1, -1)):
                    total = d * (k - 1)
                    self._reversed_padding_repeated_twice[2 * i] = total // 2
                    self._reversed_padding_repeated_twice[2 * i + 1] = total - total // 2
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(self.padding) for _ in range(2)]
        dt = factory_dtype(device, dtype)
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(np.empty(shape, dtype=dt))
        if bias:
            self.bias = Parameter(np.empty((out_channels,), dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = "%d, %d, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels, self.kernel_size, self.stride)
        if self.padding != (0,) * len(self.padding):
            s += ", padding=%s" % (self.padding,)
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation=%s" % (self.dilation,)
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding=%s" % (self.output_padding,)
        if self.groups != 1:
            s += ", groups=%d" % self.groups
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode=%s" % self.padding_mode
        return s

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):
            self.padding_mode = "zeros"

    def _conv_forward(self, input, weight, bias):
        conv = F.conv1d if self._nd == 1 else F.conv2d
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_ConvNd):
    """A 1-D convolution layer (``F.conv1d``)."""
    _nd = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)


class Conv2d(Conv1d):
    """A 2-D convolution layer (``F.conv2d``)."""
    _nd = 2


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError('Only "zeros" padding mode is supported for %s' % type(self).__name__)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype, output_padding)

    def _output_padding(self, input, output_size, stride, padding, kernel_size, num_spatial_dims, dilation=None):
        if output_size is None:
            return tuple(self.output_padding)
        has_batch = input.ndim == num_spatial_dims + 2
        non_spatial = 2 if has_batch else 1
        output_size = list(output_size)
        if len(output_size) == non_spatial + num_spatial_dims:
            output_size = output_size[non_spatial:]
        if len(output_size) != num_spatial_dims:
            raise ValueError("ConvTranspose%dD: for %dD input, output_size must have %d or %d elements (got %d)"
                             % (num_spatial_dims, input.ndim, num_spatial_dims, non_spatial + num_spatial_dims,
                                len(output_size)))
        mins, maxs = [], []
        for d in range(num_spatial_dims):
            m = ((input.shape[d + non_spatial] - 1) * stride[d] - 2 * padding[d]
                 + (dilation[d] if dilation is not None else 1) * (kernel_size[d] - 1) + 1)
            mins.append(m)
            maxs.append(m + stride[d] - 1)
        for size, lo, hi in zip(output_size, mins, maxs):
            if size < lo or size > hi:
                raise ValueError("requested an output size of %s, but valid sizes range from %s to %s (for an input of "
                                 "%s)" % (output_size, mins, maxs, list(input.shape[2:])))
        return tuple(s - m for s, m in zip(output_size, mins))

    def forward(self, input, output_size=None):
        if self.padding_mode != "zeros":
            raise ValueError("Only `zeros` padding mode is supported for %s" % type(self).__name__)
        op = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size, self._nd,
                                  self.dilation)
        fn = F.conv_transpose1d if self._nd == 1 else F.conv_transpose2d
        return fn(input, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """The transposed 1-D convolution (the gradient of Conv1d with respect to its input)."""
    _nd = 1


class ConvTranspose2d(_ConvTransposeNd):
    """The transposed 2-D convolution."""
    _nd = 2
