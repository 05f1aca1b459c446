"""Flatten and Unflatten (PyTorch's ``torch.nn.modules.flatten``)."""
from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """``input.flatten(start_dim, end_dim)`` (by default every dimension but the batch)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return "start_dim=%s, end_dim=%s" % (self.start_dim, self.end_dim)


class Unflatten(Module):
    """``input.unflatten(dim, unflattened_size)``."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be a tuple of ints, but found type %s"
                            % type(unflattened_size).__name__)
        for i, n in enumerate(unflattened_size):
            if not isinstance(n, int):
                raise TypeError("unflattened_size must be tuple of ints, but found element of type %s at pos %d"
                                % (type(n).__name__, i))
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return "dim=%s, unflattened_size=%s" % (self.dim, self.unflattened_size)
