"""Embedding (PyTorch's ``torch.nn.modules.sparse``)."""
import numpy as np

from ...autograd.grad_mode import no_grad
from ...core.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._common import factory_dtype
from .module import Module

__all__ = ["Embedding"]


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``, drawn from
    N(0, 1) (row ``padding_idx`` zero, and no gradient reaches it)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0 and padding_idx >= num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            if padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if _weight is None:
            self.weight = Parameter(np.empty((num_embeddings, embedding_dim), factory_dtype(device, dtype)),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        self.sparse = sparse

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            w = self.weight._data.copy()
            w[self.padding_idx] = 0
            with no_grad():
                self.weight._write_(w)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = "%s, %s" % (self.num_embeddings, self.embedding_dim)
        if self.padding_idx is not None:
            s += ", padding_idx=%s" % self.padding_idx
        if self.max_norm is not None:
            s += ", max_norm=%s" % self.max_norm
        if self.norm_type != 2:
            s += ", norm_type=%s" % self.norm_type
        if self.scale_grad_by_freq is not False:
            s += ", scale_grad_by_freq=%s" % self.scale_grad_by_freq
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is ``embeddings`` (shared; frozen unless ``freeze=False``)."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, _freeze=freeze,
                   padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
