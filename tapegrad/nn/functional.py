"""Functional layers and losses (``tg.nn.functional``, PyTorch's ``torch.nn.functional``)."""
import functools
import warnings

import numpy as np

from .. import functions as _f
from ..core import tape as _tp
from ..core.dtypes import torch_name as _torch_name
from ..core.tensor import Tensor
from ..ops import compose as _compose
from ..ops.elementwise import BINARY_BY_NAME as _BINARY
from ._reduction import _check_reduction, _legacy_reduction, _reduce, _size_warning, _t

__all__ = ["linear", "relu", "tanh", "sigmoid", "softmax", "log_softmax", "mse_loss", "l1_loss", "nll_loss",
           "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "pad", "conv1d", "conv2d"]


# -- layers -------------------------------------------------------------------------
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (weight has shape (out_features, in_features))."""
    if bias is not None and isinstance(bias, Tensor) and not input.dtype == weight.dtype == bias.dtype:
        # PyTorch's addmm: no promotion, its messages
        first, what = (bias, "self") if bias.dtype != weight.dtype else (input, "mat1")
        raise RuntimeError("%s and mat2 must have the same dtype, but got %s and %s"
                           % (what, _torch_name(first.dtype), _torch_name(weight.dtype)))
    if input.ndim > 2 and weight.ndim == 2:
        # the leading dimensions folded into one matrix product (as PyTorch's at::linear does), not one
        # product per batch element, so the reverse is two products too
        lead = tuple(input.shape[:-1])
        out = _f.matmul(input.reshape(-1, input.shape[-1]), _f.t(weight))
        out = out if bias is None else out + bias
        return out.reshape(lead + (weight.shape[0],))
    out = _f.matmul(input, _f.t(weight) if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


def relu(input, inplace=False):
    if inplace:
        return input.relu_()
    return _f.relu(input)


def tanh(input):
    return _f.tanh(input)


def sigmoid(input):
    return _f.sigmoid(input)


def softplus(input, beta=1.0, threshold=20.0):
    """``log1p(exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``
    (PyTorch's linear reversion, which keeps it finite)."""
    if not isinstance(input, Tensor):
        raise TypeError("softplus(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    if input.dtype.kind != "f":
        raise NotImplementedError("\"softplus_cpu\" not implemented for '%s'" % _torch_name(input.dtype))
    return _f._U["softplus"].record(input, float(beta), float(threshold))


def _implicit_dim(name, ndim):
    warnings.warn("Implicit dimension choice for {} has been deprecated. Change the call to include dim=X "
                  "as an argument.".format(name), stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim)
    if dtype is not None:
        input = _f.to_dtype(input, dtype)
    return _f.softmax(input, dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim)
    if dtype is not None:
        input = _f.to_dtype(input, dtype)
    return _f.log_softmax(input, dim)


# -- regression losses ----------------------------------------------------------------
def _no_weight(name, weight):
    if weight is not None:
        raise NotImplementedError("weight= of %s is not supported by tapegrad" % name)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _no_weight("mse_loss", weight)
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    target = _t(target, input)
    _size_warning(input, target)
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _no_weight("l1_loss", weight)
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    target = _t(target, input)
    _size_warning(input, target)
    return _reduce(_f.abs(input - target), reduction)


# -- classification losses --------------------------------------------------------------
def _target_array(target):
    t = target._data if isinstance(target, Tensor) else np.asarray(target)
    return t


def label_flags(tgt, ignore_index, c):
    """(any target equals ignore_index, any other target is out of range)."""
    ignored = tgt == ignore_index
    return bool(ignored.any()), bool(((~ignored) & ((tgt < 0) | (tgt >= c))).any())


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log likelihood of class indices: ``-input[n, target[n]]`` (one gather)."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    rec = _tp.state().rec if _tp.recording[0] else None
    if (rec is not None and weight is None and input.ndim == 2 and isinstance(target, Tensor)
            and target.ndim == 1 and target.shape[0] == input.shape[0] and target.dtype.kind in "iu"):
        # recorded for replay: the labels stay an argument of the gather (tapegrad.replay)
        flags = functools.partial(label_flags, ignore_index=ignore_index, c=input.shape[1])
        if rec.labels(target, flags) == (False, False):
            picked = input[np.arange(input.shape[0]), target]
            return -picked if reduction == "none" else (-picked.sum() if reduction == "sum" else -picked.mean())
    tgt = _target_array(target)
    if rec is not None and isinstance(target, Tensor):
        rec.read(target, tgt)       # (labels computed in the function: their values are a guard)
    if tgt.dtype.kind not in "iu":
        raise RuntimeError("expected target dtype to be Long or Byte, but got %s" % _torch_name(tgt.dtype))
    if input.ndim == 1:                      # a single sample: (C,) with a 0-d target
        if tgt.ndim != 0:
            raise ValueError("Expected input batch_size (1) to match target batch_size (%d)."
                             % (tgt.shape[0] if tgt.ndim else 1))
        loss = nll_loss(_f.unsqueeze(input, 0), tgt.reshape(1), weight, ignore_index=ignore_index, reduction=reduction)
        return _f.squeeze(loss, 0) if reduction == "none" else loss
    if input.ndim < 1:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    n, c = input.shape[0], input.shape[1]
    if tgt.shape[:1] != (n,):
        raise ValueError("Expected input batch_size ({}) to match target batch_size ({}).".format(
            n, tgt.shape[0] if tgt.ndim else 1))
    if input.ndim > 2:                       # (N, C, d1, ...): classes last, then flatten
        spatial = input.shape[2:]
        if tgt.shape[1:] != spatial:
            raise RuntimeError("Expected target size {}, got {}".format(
                [n] + list(spatial), list(tgt.shape)))
        perm = (0,) + tuple(range(2, input.ndim)) + (1,)
        flat = _f.reshape(_f.permute(input, perm), (-1, c))
        loss = nll_loss(flat, tgt.reshape(-1), weight, ignore_index=ignore_index, reduction=reduction)
        return _f.reshape(loss, (n,) + tuple(spatial)) if reduction == "none" else loss
    tgt = tgt.astype(np.int64, copy=False)
    ignored = tgt == ignore_index
    bad = (~ignored) & ((tgt < 0) | (tgt >= c))
    if bad.any():
        raise IndexError("Target %d is out of bounds." % int(tgt[bad][0]))
    safe = np.where(ignored, 0, tgt)
    picked = input[np.arange(n), safe]                           # one gather entry
    if weight is None and not ignored.any():
        if reduction == "none":
            return -picked
        if reduction == "sum":
            return -picked.sum()
        return -picked.mean()
    w = np.ones(n, dtype=input.dtype) if weight is None else \
        np.asarray(_target_array(weight), dtype=input.dtype)[safe]
    w = np.where(ignored, 0, w).astype(input.dtype)
    loss = picked * Tensor._wrap(-w)
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    return total / float(w.sum())


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy of logits ``input`` (N, C[, ...]) against class indices (or class
    probabilities of the same shape): log_softmax over dim 1, then nll_loss."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError("label_smoothing must be between 0.0 and 1.0. Got: %s" % label_smoothing)
    cdim = 0 if input.ndim == 1 else 1
    logp = _f.log_softmax(input, cdim)
    if (isinstance(target, Tensor) and target.dtype.kind in "iu" and label_smoothing == 0
            and not (target.ndim == 0 and input.ndim == 1 and False)):
        return nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    tgt = _target_array(target)
    c = input.shape[cdim]
    if tgt.dtype.kind == "f":                # class probabilities
        if tgt.shape != input.shape:
            raise RuntimeError("Expected floating point type target to have the same shape as input")
        prob = _t(target, input)
        if label_smoothing > 0:
            prob = prob * (1 - label_smoothing) + label_smoothing / c
        if weight is not None:
            wshape = [1] * input.ndim
            wshape[cdim] = c
            logp = logp * Tensor._wrap(np.asarray(_target_array(weight), input.dtype).reshape(wshape))
        loss = -(logp * prob).sum(cdim)
        if reduction == "mean":
            return loss.sum() / float(max(loss.numel(), 1) if input.ndim > 1 else 1)
        return _reduce(loss, reduction)
    nll = nll_loss(logp, tgt, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0:
        return nll
    # smoothing term: -(1/C) * sum_c w_c logp_c per sample
    if weight is not None:
        wshape = [1] * input.ndim
        wshape[cdim] = c
        lw = logp * Tensor._wrap(np.asarray(_target_array(weight), input.dtype).reshape(wshape))
    else:
        lw = logp
    smooth = -lw.sum(cdim)
    ignored = tgt == ignore_index
    if ignored.any():
        smooth = smooth * Tensor._wrap((~ignored).astype(input.dtype))
    if reduction == "mean":
        if weight is not None:
            w = np.asarray(_target_array(weight), input.dtype)[np.where(ignored, 0, tgt)]
            denom = float(np.where(ignored, 0, w).sum())
        else:
            denom = float((~ignored).sum())
        smooth = smooth.sum() / denom
    else:
        smooth = _reduce(smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / c)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """``max(x, 0) - x*y + log1p(exp(-|x|))`` (stable for any logit): written as
    ``(1-y)*x + max(-x, 0) + log1p(exp(-|x|))``; ``maximum`` splits its tie at 0, so
    the gradient there is ``sigmoid(0) - y`` as it should be."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    target = _t(target, input)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError("Target size ({}) must be the same as input size ({})".format(
            list(target.shape), list(input.shape)))
    softplus_neg = _f.maximum(-input, 0.0) + _f.log1p(_f.exp(-_f.abs(input)))    # log(1 + exp(-x))
    if pos_weight is not None:
        lw = (_t(pos_weight, input) - 1) * target + 1
        loss = (1 - target) * input + lw * softplus_neg
    else:
        loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * _t(weight, input)
    return _reduce(loss, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """``-(y log p + (1-y) log(1-p))`` with each log clamped at -100, and PyTorch's
    gradient ``(p - y) / max(p (1 - p), 1e-12)`` (finite where a log is clamped)."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    target = _t(target, input)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError("Using a target size ({}) that is different to the input size ({}) is deprecated. "
                         "Please ensure they have the same size.".format(list(target.shape),
                                                                       list(input.shape)))
    if not _tp.checked_values((input >= 0) & (input <= 1)).all():       # (NaN is not in it, as in PyTorch)
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = _BINARY["binary_cross_entropy"].record(input, target)
    if weight is not None:
        loss = loss * _t(weight, input)
    return _reduce(loss, reduction)


def pad(input, pad, mode="constant", value=None):
    """``input`` padded by ``pad`` (last dimension first: ``(left, right, top, bottom, ...)``;
    a negative pad crops) with ``value`` (mode "constant"), or by reflecting, replicating
    or wrapping around its edges (modes "reflect", "replicate", "circular")."""
    return _compose.pad(input, pad, mode, value)


# -- the rest of torch.nn.functional, one module per kind (each names its __all__) ------------
from ._activations import *  # noqa: E402,F401,F403
from ._conv import *  # noqa: E402,F401,F403
from . import _activations, _conv  # noqa: E402

__all__ += _activations.__all__ + _conv.__all__
from ._losses import *  # noqa: E402,F401,F403
from . import _losses  # noqa: E402

__all__ += _losses.__all__
from ._sparse import *  # noqa: E402,F401,F403
from ._norm import *  # noqa: E402,F401,F403
from ._pooling import *  # noqa: E402,F401,F403
from . import _norm, _pooling, _sparse  # noqa: E402

__all__ += _sparse.__all__ + _norm.__all__ + _pooling.__all__
from ._interp import *  # noqa: E402,F401,F403
from ._attention import *  # noqa: E402,F401,F403
from . import _attention, _interp  # noqa: E402

__all__ += _interp.__all__ + _attention.__all__
from ._ctc import *  # noqa: E402,F401,F403
from . import _ctc  # noqa: E402

__all__ += _ctc.__all__
