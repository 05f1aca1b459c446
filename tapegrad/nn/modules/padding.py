"""Padding layers (PyTorch's ``torch.nn.modules.padding``): F.pad with a fixed padding."""
from .. import functional as F
from .module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _PadNd(Module):
    _n = 2
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, self._n)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return "%s" % (self.padding,)


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return "padding=%s, value=%s" % (self.padding, self.value)


class ConstantPad1d(_ConstantPadNd):
    _n = 2


class ConstantPad2d(_ConstantPadNd):
    _n = 4


class ConstantPad3d(_ConstantPadNd):
    _n = 6


class ZeroPad1d(ConstantPad1d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return "%s" % (self.padding,)


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return "%s" % (self.padding,)


class ZeroPad3d(ConstantPad3d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return "%s" % (self.padding,)


class ReflectionPad1d(_PadNd):
    _n, _mode = 2, "reflect"


class ReflectionPad2d(_PadNd):
    _n, _mode = 4, "reflect"


class ReflectionPad3d(_PadNd):
    _n, _mode = 6, "reflect"


class ReplicationPad1d(_PadNd):
    _n, _mode = 2, "replicate"


class ReplicationPad2d(_PadNd):
    _n, _mode = 4, "replicate"


class ReplicationPad3d(_PadNd):
    _n, _mode = 6, "replicate"


class _CircularPadNd(_PadNd):
    _mode = "circular"
    _dims = (2, 3)

    def forward(self, input):
        if input.ndim not in self._dims:
            raise ValueError("expected %dD or %dD input (got %dD input)" % (self._dims + (input.ndim,)))
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    _n, _dims = 2, (2, 3)


class CircularPad2d(_CircularPadNd):
    _n, _dims = 4, (3, 4)


class CircularPad3d(_CircularPadNd):
    _n, _dims = 6, (4, 5)
