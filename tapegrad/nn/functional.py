"""Functional layers and losses (``tg.nn.functional``, PyTorch's ``torch.nn.functional``)."""
import functools
import warnings

import numpy as np

from .. import functions as _f
from ..core import tape as _tp
from ..core.dtypes import torch_name as _torch_name
from ..core.tensor import Tensor, from_data
from ..ops import compose as _compose
from ..ops.elementwise import BINARY_BY_NAME as _BINARY

__all__ = ["linear", "relu", "tanh", "sigmoid", "softmax", "log_softmax", "mse_loss", "l1_loss", "nll_loss",
           "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "pad", "conv1d", "conv2d"]


def _t(x, like=None):
    if isinstance(x, Tensor):
        return x
    dt = like.dtype if (like is not None and np.asarray(x).dtype.kind == "f") else None
    return from_data(x, dtype=dt)


def _check_reduction(reduction):
    if reduction not in ("none", "mean", "sum", "elementwise_mean"):
        raise ValueError("{} is not a valid value for reduction".format(reduction))
    if reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.",
                      stacklevel=3)
        return "mean"
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


# -- layers -------------------------------------------------------------------------
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (weight has shape (out_features, in_features))."""
    if bias is not None and isinstance(bias, Tensor) and not input.dtype == weight.dtype == bias.dtype:
        # PyTorch's addmm: no promotion, its messages
        first, what = (bias, "self") if bias.dtype != weight.dtype else (input, "mat1")
        raise RuntimeError("%s and mat2 must have the same dtype, but got %s and %s"
                           % (what, _torch_name(first.dtype), _torch_name(weight.dtype)))
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
def _size_warning(input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn("Using a target size ({}) that is different to the input size ({}). This will likely "
                      "lead to incorrect results due to broadcasting. Please ensure they have the same size."
                      .format(list(target.shape), list(input.shape)), stacklevel=3)


def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's deprecated ``size_average``/``reduce`` arguments, as it maps them."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "none" if not reduce else ("mean" if size_average else "sum")
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='%s' instead."
                  % reduction, stacklevel=3)
    return reduction


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


# -- convolutions --------------------------------------------------------------------
# A composition: the input zero-padded (pad), its patches gathered along each spatial
# dimension by index arrays (index_select), then one einsum with the weight over the
# channels of a group and the kernel offsets.  The reverse, create_graph and replay are
# those ops' (the gathers' reverse adds the overlapping patches back).
_TENSOR_TYPES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                 "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
                 "uint8": "ByteTensor", "bool": "BoolTensor"}
_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int", "int32": "int"}


def _conv_tuple(name, v, nd):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),) * nd
    v = tuple(int(u) for u in v)
    if len(v) == 1:
        return v * nd
    if len(v) != nd:
        raise RuntimeError("expected %s to be a single integer value or a list of %d values to match the convolution "
                           "dimensions, but got %s=[%s]" % (name, nd, name, ", ".join(str(u) for u in v)))
    return v


def _shape_text(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _conv(nd, input, weight, bias, stride, padding, dilation, groups):
    name = "conv%dd" % nd
    for arg, v in (("input", input), ("weight", weight)):
        if not isinstance(v, Tensor):
            raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                            % (name, arg, 1 if arg == "input" else 2, type(v).__name__))
    if weight.ndim != nd + 2:
        raise RuntimeError("weight should have at least three dimensions" if weight.ndim < 3 else
                           "Expected %d-dimensional input for %d-dimensional weight %s, but got %d-dimensional input "
                           "of size %s instead" % (weight.ndim, weight.ndim, _shape_text(weight.shape), input.ndim,
                                                   _shape_text(input.shape)))
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError("Expected %dD (unbatched) or %dD (batched) input to %s, but got input of size: %s"
                           % (nd + 1, nd + 2, name, _shape_text(input.shape)))
    unbatched = input.ndim == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    stride = _conv_tuple("stride", stride, nd)
    dilation = _conv_tuple("dilation", dilation, nd)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise TypeError("%s(): argument 'groups' (position 7) must be int, not %s" % (name, type(groups).__name__))
    ks = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pads = []
            for k, d in zip(ks, dilation):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
        else:
            raise RuntimeError("Invalid padding string: %r" % padding)
    else:
        pads = [(p, p) for p in _conv_tuple("padding", padding, nd)]
    if any(p < 0 for pr in pads for p in pr):
        raise RuntimeError("negative padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        # (PyTorch computes a 1-D convolution as a 2-D one of height 1: its dilation is [1, d])
        raise RuntimeError("dilation should be greater than zero, but got [%s]"
                           % ", ".join(str(d) for d in ((1,) + dilation if nd == 1 else dilation)))
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] % groups:
        raise RuntimeError("Given groups=%d, expected weight to be divisible by %d at dimension 0, but got weight of "
                           "size [%s] instead" % (groups, groups, _shape_text(weight.shape)))
    cin = weight.shape[1] * groups
    if x.shape[1] != cin:
        raise RuntimeError("Given groups=%d, weight of size %s, expected input%s to have %d channels, but got %d "
                           "channels instead" % (groups, _shape_text(weight.shape), _shape_text(x.shape), cin,
                                                 x.shape[1]))
    cout = weight.shape[0]
    if isinstance(bias, Tensor) and bias.dtype != input.dtype:
        raise RuntimeError("Input type (%s) and bias type (%s) should be the same"
                           % (_C_TYPES.get(input.dtype.name, input.dtype.name), _C_TYPES.get(bias.dtype.name,
                                                                                           bias.dtype.name)))
    if bias is not None and (not isinstance(bias, Tensor) or bias.ndim != 1 or bias.shape[0] != cout):
        raise RuntimeError("Given weight of size %s, expected bias to be 1-dimensional with %d elements, but got bias "
                           "of size %s instead" % (_shape_text(weight.shape), cout,
                                                   _shape_text(getattr(bias, "shape", ()))))
    padded = [x.shape[2 + i] + pads[i][0] + pads[i][1] for i in range(nd)]
    span = [dilation[i] * (ks[i] - 1) + 1 for i in range(nd)]
    if any(p < s for p, s in zip(padded, span)):
        raise RuntimeError("Calculated padded input size per channel: (%s). Kernel size: (%s). Kernel size can't be "
                           "greater than actual input size" % (" x ".join(str(p) for p in padded),
                                                               " x ".join(str(s) for s in span)))
    if input.dtype != weight.dtype:
        raise RuntimeError("Input type (torch.%s) and weight type (torch.%s) should be the same or input should be a "
                           "MKLDNN tensor and weight is a dense tensor"
                           % (_TENSOR_TYPES.get(input.dtype.name, input.dtype.name),
                              _TENSOR_TYPES.get(weight.dtype.name, weight.dtype.name)))
    if any(p for pr in pads for p in pr):
        x = _compose.pad(x, [p for pr in reversed(pads) for p in pr])
    n = x.shape[0]
    outs = [(padded[i] - span[i]) // stride[i] + 1 for i in range(nd)]
    # the patches: along each spatial dim, (out position, kernel offset) -> input position
    for i in range(nd):
        idx = np.arange(outs[i])[:, None] * stride[i] + np.arange(ks[i])[None, :] * dilation[i]
        x = _f.index_select(x, 2 + 2 * i, from_data(idx.reshape(-1)))
        x = x.reshape(*(tuple(x.shape[:2 + 2 * i]) + (outs[i], ks[i]) + tuple(x.shape[3 + 2 * i:])))
    # x: (n, c, o1, k1, o2, k2, ...) -> (n, groups, c / groups, ...)
    x = x.reshape(*((n, groups, cin // groups) + tuple(x.shape[2:])))
    w = weight.reshape(*((groups, cout // groups) + tuple(weight.shape[1:])))
    letters = "hijklm"[:nd]
    kletters = "pqrstu"[:nd]
    xs = "ngc" + "".join(o + k for o, k in zip(letters, kletters))
    out = _f.einsum("%s,goc%s->ngo%s" % (xs, kletters, letters), x, w)
    out = out.reshape(*((n, cout) + tuple(outs)))
    if bias is not None:
        out = out + bias.reshape(*((1, cout) + (1,) * nd))
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """The 1-D cross-correlation of ``input`` (N, C_in, L) or (C_in, L) with ``weight``
    (C_out, C_in / groups, K), plus ``bias``; ``padding`` an int, a 1-tuple, 'valid' or
    'same' (the extra element on the right, as PyTorch)."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """The 2-D cross-correlation of ``input`` (N, C_in, H, W) or (C_in, H, W) with
    ``weight`` (C_out, C_in / groups, KH, KW), plus ``bias``."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)
