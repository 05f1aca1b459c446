"""Fold and Unfold (PyTorch's ``torch.nn.modules.fold``)."""
from .. import functional as F
from .module import Module

__all__ = ["Fold", "Unfold"]


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return "output_size=%s, kernel_size=%s, dilation=%s, padding=%s, stride=%s" % (
            self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return "kernel_size=%s, dilation=%s, padding=%s, stride=%s" % (self.kernel_size, self.dilation, self.padding,
                                                                       self.stride)
