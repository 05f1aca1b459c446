"""Dropout, embeddings, one_hot and the bilinear map of ``tg.nn.functional``."""
import warnings

import numpy as np

from .. import functions as _f
from ..autograd.grad_mode import no_grad
from ..core import random as _random
from ..core.dtypes import torch_name as _torch_name
from ..core.tensor import Tensor
from . import _host

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "embedding",
           "one_hot", "bilinear"]


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError("dropout probability has to be between 0 and 1, but got %s" % (p,))


def _apply_noise(input, noise, inplace):
    """``input * noise`` (one entry: the noise is a constant), in place when asked."""
    out = input * Tensor._const(noise)
    return input.copy_(out) if inplace else out


def _dropout(input, p, train, inplace, feature):
    """Zero each element (``feature``: each channel, dimensions 0 and 1) with probability
    ``p`` and scale the rest by 1 / (1 - p); the input itself where nothing is dropped."""
    if p == 0 or not train or input.numel() == 0:
        return input
    if p == 1:
        return _apply_noise(input, np.zeros((), input.dtype), inplace)
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else tuple(input.shape)
    keep = _random.generator(None, "dropout").random(shape) >= p
    return _apply_noise(input, (keep / (1 - p)).astype(input.dtype), inplace)


def dropout(input, p=0.5, training=True, inplace=False):
    """Each element zeroed with probability ``p``, the rest scaled by 1 / (1 - p), in
    training (``training=False``: the input, unchanged)."""
    _check_p(p)
    return _dropout(input, p, training, inplace, False)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Whole channels of an (N, C, L) or (C, L) input zeroed with probability ``p``."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError("dropout1d: Expected 2D or 3D input, but received a %dD input. Note that dropout1d exists "
                           "to provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, "
                           "and an optional batch dimension (i.e. 2D or 3D inputs)." % input.ndim)
    if input.ndim == 2:
        return _dropout(input.unsqueeze(0), p, training, False, True).squeeze(0) if not inplace else \
            input.copy_(_dropout(input.unsqueeze(0), p, training, False, True).squeeze(0))
    return _dropout(input, p, training, inplace, True)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Whole channels of an (N, C, H, W) input zeroed with probability ``p`` (a 3-d input is
    taken as (N, C, L), as PyTorch does, with its warning)."""
    _check_p(p)
    nd = input.ndim
    if nd not in (3, 4):
        warnings.warn("dropout2d: Received a %d-D input to dropout2d, which is deprecated and will result in an error "
                      "in a future release. To retain the behavior and silence this warning, please use dropout "
                      "instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D inputs)." % nd,
                      stacklevel=2)
    if nd == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", stacklevel=2)
    return _dropout(input, p, training, inplace, True)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Whole channels of an (N, C, D, H, W) or (C, D, H, W) input zeroed with probability ``p``."""
    _check_p(p)
    nd = input.ndim
    if nd not in (4, 5):
        warnings.warn("dropout3d: Received a %d-D input to dropout3d, which is deprecated and will result in an error "
                      "in a future release. To retain the behavior and silence this warning, please use dropout "
                      "instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D inputs)." % nd,
                      stacklevel=2)
    if nd == 4:
        out = _dropout(input.unsqueeze(0), p, training, False, True).squeeze(0)
        return input.copy_(out) if inplace and out is not input else out
    return _dropout(input, p, training, inplace, True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _alpha_dropout(input, p, train, inplace, feature):
    """SELU's dropout: dropped elements set to SELU's negative saturation, then an affine
    map that keeps the mean and variance (PyTorch's formula)."""
    if p == 0 or not train or input.numel() == 0:
        return input
    if p == 1:
        return _apply_noise(input, np.zeros((), input.dtype), inplace)
    alpha = -_SELU_ALPHA * _SELU_SCALE
    a = 1.0 / np.sqrt((alpha * alpha * p + 1) * (1 - p))
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else tuple(input.shape)
    keep = (_random.generator(None, "alpha_dropout").random(shape) >= p).astype(input.dtype)
    b = (keep - 1) * (alpha * a) + alpha * a * p
    out = input * Tensor._const((keep * a).astype(input.dtype)) + Tensor._const(b.astype(input.dtype))
    return input.copy_(out) if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks (keeps zero mean and unit variance)."""
    _check_p(p)
    return _alpha_dropout(input, p, training, inplace, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels."""
    _check_p(p)
    return _alpha_dropout(input, p, training, inplace, True)


def _renorm_rows(weight, idx, max_norm, norm_type):
    """PyTorch's embedding_renorm_: each row of ``weight`` that ``idx`` names and whose
    ``norm_type``-norm exceeds ``max_norm`` is scaled in place (no gradient) to
    ``max_norm / (norm + 1e-7)``."""
    rows = np.unique(idx)
    w = weight._data[rows].astype(np.float64)
    if norm_type == np.inf:
        norms = np.abs(w).max(1)
    elif norm_type == 0:
        norms = (w != 0).sum(1).astype(np.float64)
    else:
        norms = (np.abs(w) ** norm_type).sum(1) ** (1.0 / norm_type)
    big = norms > max_norm
    _host.refuse_replay("embedding's max_norm renormalises its weight in place (a replay would not)")
    if big.any():
        new = weight._data.copy()
        scale = max_norm / (norms[big] + 1e-7)
        new[rows[big]] = (w[big] * scale[:, None]).astype(weight.dtype)
        with no_grad():
            weight._write_(new)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """The rows of ``weight`` that the integer ``input`` names, shaped ``input.shape +
    (embedding_dim,)``; no gradient reaches row ``padding_idx``; ``scale_grad_by_freq``
    divides each row's gradient by the count of its index in ``input``; ``max_norm``
    renormalises the rows used, in place, first."""
    if not isinstance(weight, Tensor):
        raise TypeError("embedding(): argument 'weight' (position 2) must be Tensor, not %s" % type(weight).__name__)
    if sparse:
        raise NotImplementedError("sparse=True gradients (sparse tensors) are not supported by tapegrad")
    idx = input._data if isinstance(input, Tensor) else np.asarray(input)
    if idx.dtype.kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
                           "Int; but got torch.%sTensor instead (while checking arguments for embedding)"
                           % _torch_name(idx.dtype))
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    n = weight.shape[0]
    if padding_idx is not None:
        if padding_idx > 0 and padding_idx >= n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        if padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = n + padding_idx
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        _host.guard_values(input, idx)
        _renorm_rows(weight, idx.reshape(-1), max_norm, norm_type)
    ind = input if isinstance(input, Tensor) else Tensor._const(idx)
    # (indexing by the index tensor itself: a replay reads its values, where a view of a constant
    # index made inside the recorded function would be off the tape)
    out = _f.index_select(weight, 0, ind) if idx.ndim == 1 else weight[ind]
    if (padding_idx is not None and (idx == padding_idx).any()) or scale_grad_by_freq:
        # the gradient of each row scaled, the value left exactly as it is: v + (v - v) * s
        if isinstance(input, Tensor):
            _host.guard_values(input, idx)
        flat = idx.reshape(-1)
        scale = np.ones(flat.shape, weight.dtype)
        if scale_grad_by_freq:
            counts = np.bincount(flat, minlength=n)
            scale /= counts[flat]
        if padding_idx is not None:
            scale[flat == padding_idx] = 0
        plain = out.detach()
        out = plain + (out - plain) * Tensor._const(scale.reshape(tuple(idx.shape) + (1,)))
    return out


def one_hot(tensor, num_classes=-1):
    """The int64 one-hot encoding (..., num_classes) of a tensor of class indices
    (``num_classes=-1``: one more than the largest index)."""
    if not isinstance(tensor, Tensor):
        raise TypeError("one_hot(): argument 'input' (position 1) must be Tensor, not %s" % type(tensor).__name__)
    idx = tensor._data
    if idx.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if idx.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(idx.max()) + 1
    if idx.size and idx.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if idx.size and idx.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    _host.guard_values(tensor, idx)
    out = np.zeros(idx.shape + (num_classes,), np.int64)
    np.put_along_axis(out, idx[..., None], 1, axis=-1)
    return Tensor._const(out)


def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]``."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError("bilinear(): input batch dimensions do not match: got %s and %s"
                           % (list(input1.shape[:-1]), list(input2.shape[:-1])))
    if weight.ndim != 3:
        raise RuntimeError("bilinear(): weight must be three-dimensional, but got %d dimension(s)" % weight.ndim)
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError("bilinear(): input1 size does not match weight size: got %d but expected %d"
                           % (input1.shape[-1], weight.shape[1]))
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError("bilinear(): input2 size does not match weight size: got %d but expected %d"
                           % (input2.shape[-1], weight.shape[2]))
    out = _f.einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias
