"""The losses of ``tg.nn.functional`` beyond the classification and squared-error ones:
compositions of tapegrad's ops written as PyTorch's kernels compute them (its formulas,
clamps and epsilons), so values and gradients agree, kinks included."""
import math
import warnings

import numpy as np

from .. import creation as _c
from .. import functions as _f
from ..autograd.grad_mode import no_grad
from ..core.tensor import Tensor
from ..linalg import vector_norm
from . import _host
from ._activations import logsigmoid
from ._reduction import _check_reduction, _legacy_reduction, _reduce, _size_warning, _t

__all__ = ["smooth_l1_loss", "huber_loss", "kl_div", "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss",
           "margin_ranking_loss", "hinge_embedding_loss", "multilabel_soft_margin_loss", "soft_margin_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "multi_margin_loss", "pairwise_distance",
           "cosine_similarity", "normalize"]


def _tensor_arg(name, arg, pos, v):
    if not isinstance(v, Tensor):
        raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s" % (name, arg, pos,
                                                                                     type(v).__name__))


def _broadcast(input, target):
    shape = np.broadcast_shapes(tuple(input.shape), tuple(target.shape))
    return (input if tuple(input.shape) == shape else _f.broadcast_to(input, shape),
            target if tuple(target.shape) == shape else _f.broadcast_to(target, shape))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (d = input - target;
    beta 0 is the L1 loss)."""
    _tensor_arg("smooth_l1_loss", "input", 1, input)
    target = _t(target, input)
    _size_warning(input, target)
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    input, target = _broadcast(input, target)
    d = input - target
    z = _f.abs(d)
    if beta == 0.0:
        return _reduce(z, reduction)
    return _reduce(_f.where(z < beta, d * d * (0.5 / beta), z - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``, times ``weight``."""
    _tensor_arg("huber_loss", "input", 1, input)
    target = _t(target, input)
    _size_warning(input, target)
    reduction = _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    input, target = _broadcast(input, target)
    d = input - target
    z = _f.abs(d)
    loss = _f.where(z < delta, d * d * 0.5, (z - 0.5 * delta) * delta)
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise ValueError("Weights and input must have the same size.")
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """``target * (log(target) - input)`` (input a log-probability; ``log_target``: target is
    one too), 0 where target is 0; ``reduction="batchmean"`` divides the sum by the batch."""
    _tensor_arg("kl_div", "input", 1, input)
    target = _t(target, input)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    red = "sum" if reduction == "batchmean" else _check_reduction(reduction)
    if log_target:
        loss = _f.exp(target) * (target - input)
    else:
        loss = _f.xlogy(target, target) - target * input
    out = _reduce(loss, red)
    if reduction == "batchmean" and input.ndim != 0:
        out = out / input.shape[0]
    return out


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """``exp(input) - target * input`` (``log_input``), else ``input - target * log(input +
    eps)``; ``full`` adds Stirling's term where target > 1."""
    _tensor_arg("poisson_nll_loss", "input", 1, input)
    target = _t(target, input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    if log_input:
        loss = _f.exp(input) - target * input
    else:
        loss = input - target * _f.log(input + eps)
    if full:        # Stirling's term, where target > 1 (a constant: the target is not differentiated)
        _host.guard_values(target)
        t = np.asarray(target._data, dtype=loss.dtype)
        safe = np.where(t > 1, t, 1.0)
        stirling = np.where(t > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * math.pi * safe), 0.0)
        loss = loss + Tensor._const(stirling.astype(loss.dtype))
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``0.5 (log(var) + (input - target)^2 / var)`` (var clamped below at ``eps`` without
    changing its gradient, as PyTorch's), plus ``0.5 log(2 pi)`` when ``full``."""
    _tensor_arg("gaussian_nll_loss", "input", 1, input)
    target = _t(target, input)
    if isinstance(var, (float, int)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = _c.ones_like(input) * float(var)
    else:
        var = _t(var, input)
        if bool((var._data < 0).any()):
            raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif input.ndim == var.ndim and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # the clamp is PyTorch's in-place clamp under no_grad: the value moves, the gradient is var's
    with no_grad():
        lift = _f.clamp(var.detach(), min=eps) - var.detach()
    var = var + lift
    loss = (_f.log(var) + (input - target) ** 2 / var) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def _target_values(target, like):
    return _t(target, like)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """``1 - cos(x1, x2)`` where target is 1, ``max(0, cos(x1, x2) - margin)`` where it is -1."""
    _tensor_arg("cosine_embedding_loss", "input1", 1, input1)
    _tensor_arg("cosine_embedding_loss", "input2", 2, input2)
    target = _t(target, input1)
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    tdim = target.ndim
    if tdim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if tdim == 1:
        if input1.ndim != 2 or input2.ndim != 2:
            raise RuntimeError("1D target tensor expects 2D input tensors, but found inputs with sizes %s and %s."
                               % (list(input1.shape), list(input2.shape)))
    elif input1.ndim != 1 or input2.ndim != 1:
        raise RuntimeError("0D target tensor expects 1D input tensors, but found inputs with sizes %s and %s."
                           % (list(input1.shape), list(input2.shape)))
    d = tdim
    prod = (input1 * input2).sum(d)
    m1 = (input1 * input1).sum(d) + 1e-12
    m2 = (input2 * input2).sum(d) + 1e-12
    cos = prod / _f.sqrt(m1 * m2)
    zeros = _c.zeros_like(cos)
    pos = 1 - cos
    neg = _f.clamp_min(cos - margin, 0)
    out = _f.where(target == 1, pos, zeros) + _f.where(target == -1, neg, zeros)
    return _reduce(out, reduction)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``."""
    target = _t(target, input1)
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError("margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           "input1: %s, input2: %s, target: %s " % (list(input1.shape), list(input2.shape),
                                                                    list(target.shape)))
    return _reduce(_f.clamp_min(-target * (input1 - input2) + margin, 0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """``input`` where target is 1, ``max(0, margin - input)`` where it is -1."""
    target = _t(target, input)
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    zeros = _c.zeros_like(input)
    margin_clamp = _f.clamp_min(margin - input, 0)
    out = _f.where(target != 1, margin_clamp, zeros) + _f.where(target != -1, input, zeros)
    return _reduce(out, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The mean over classes of ``-(y log sigmoid(x) + (1 - y) log sigmoid(-x))`` (times ``weight``)."""
    target = _t(target, input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    cdim = input.ndim - 1
    loss = loss.sum(cdim) / input.shape[cdim]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-target * input))``."""
    target = _t(target, input)
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    return _reduce(_f.log1p(_f.exp(-input * target)), reduction)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of ``x1 - x2 + eps`` along the last dimension."""
    _tensor_arg("pairwise_distance", "x1", 1, x1)
    _tensor_arg("pairwise_distance", "x2", 2, x2)
    nd = max(x1.ndim, x2.ndim)
    inner = nd - 1
    d = x1 - x2 + eps
    if nd == 0:
        return _f.abs(d) if p != 0 else (d != 0).to(d.dtype)
    return vector_norm(d, p, inner, keepdim)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` with the pairwise p-distance (``swap``: d(a, n)
    is the smaller of it and d(p, n))."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if margin <= 0:
        raise ValueError("margin must be greater than 0, got %s" % margin)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError("The anchor, positive, and negative tensors are expected to have the same number of "
                           "dimensions, but got: anchor %dD, positive %dD, and negative %dD inputs"
                           % (anchor.ndim, positive.ndim, negative.ndim))
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _f.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(_f.clamp_min(margin + d_pos - d_neg, 0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """triplet_margin_loss with any ``distance_function`` (pairwise_distance by default)."""
    if margin <= 0:
        raise ValueError("TripletMarginWithDistanceLoss: expected margin to be greater than 0, got %s instead"
                         % margin)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = _f.minimum(d_neg, dist(positive, negative))
    return _reduce(_f.clamp_min(margin + d_pos - d_neg, 0.0), reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Per sample, the mean over classes i != y of ``max(0, margin - x[y] + x[i])^p``
    (times ``weight[y]``)."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    x = input.unsqueeze(0) if input.ndim <= 1 else input
    tgt = np.asarray(target._data if isinstance(target, Tensor) else target).reshape(-1).astype(np.int64)
    if isinstance(target, Tensor):
        _host.guard_values(target)
    n, c = x.shape[0], x.shape[1] if x.ndim > 1 else 1
    if x.ndim != 2 or tgt.shape[0] != n:
        raise RuntimeError("inconsistent target size, expected %d but got %s" % (n, list(tgt.shape)))
    if ((tgt < 0) | (tgt >= c)).any():
        raise IndexError("target out of range")
    picked = x[np.arange(n), tgt].unsqueeze(1)
    z = _f.clamp_min(margin - picked + x, 0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[tgt].unsqueeze(1)
    mask = np.ones((n, c), dtype=x.dtype)
    mask[np.arange(n), tgt] = 0
    loss = (z * Tensor._const(mask)).sum(1) / c
    if input.ndim <= 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``sum(x1 / |x1| * x2 / |x2|, dim)`` with each norm clamped below at ``eps`` (the
    value only, as PyTorch's clamp under no_grad)."""
    _tensor_arg("cosine_similarity", "x1", 1, x1)
    _tensor_arg("cosine_similarity", "x2", 2, x2)
    shape = np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    if tuple(x1.shape) != shape:
        x1 = _f.broadcast_to(x1, shape)
    if tuple(x2.shape) != shape:
        x2 = _f.broadcast_to(x2, shape)
    n1 = vector_norm(x1, 2, dim, True)
    n2 = vector_norm(x2, 2, dim, True)
    with no_grad():
        l1 = _f.clamp_min(n1.detach(), eps) - n1.detach()
        l2 = _f.clamp_min(n2.detach(), eps) - n2.detach()
    return ((x1 / (n1 + l1)) * (x2 / (n2 + l2))).sum(dim)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    if out is not None:
        raise NotImplementedError("normalize(out=) is not supported by tapegrad")
    denom = _f.clamp_min(vector_norm(input, p, dim, True), eps)
    return input / denom


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """``tg.cdist``: the p-norm distances between the rows of ``x1`` (..., P, M) and of ``x2``
    (..., R, M), (..., P, R).  For p = 2 PyTorch computes them by a matrix product when
    ``compute_mode`` asks (by default, when P or R exceeds 25): so does this, for the same
    values."""
    _tensor_arg("cdist", "x1", 1, x1)
    _tensor_arg("cdist", "x2", 2, x2)
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError("cdist only supports at least 2D tensors, X1 got: %dD" % min(x1.ndim, x2.ndim))
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError("X1 and X2 must have the same number of columns. X1: %d X2: %d"
                           % (x1.shape[-1], x2.shape[-1]))
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    modes = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueError("%s is not a valid value for compute_mode" % compute_mode)
    P, R = x1.shape[-2], x2.shape[-2]
    batch = np.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    if tuple(x1.shape[:-2]) != batch:
        x1 = _f.broadcast_to(x1, batch + tuple(x1.shape[-2:]))
    if tuple(x2.shape[:-2]) != batch:
        x2 = _f.broadcast_to(x2, batch + tuple(x2.shape[-2:]))
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or
                         (compute_mode == "use_mm_for_euclid_dist_if_necessary" and (P > 25 or R > 25)))
    if use_mm:      # PyTorch's _euclidean_dist: |x1|^2 + |x2|^2 - 2 x1 x2^T, clamped at 1e-30, square-rooted
        n1 = (x1 * x1).sum(-1, keepdim=True)
        n2 = (x2 * x2).sum(-1, keepdim=True)
        d2 = _f.matmul(x1 * -2, x2.transpose(-1, -2)) + n1 + n2.transpose(-1, -2)
        return _f.sqrt(_f.clamp_min(d2, 1e-30))
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return vector_norm(diff, p, -1)
