"""What the losses share: the reduction argument (and PyTorch's deprecated
``size_average``/``reduce``), the target made a tensor (PyTorch's ``torch.nn._reduction``)."""
import warnings

import numpy as np

from ..core.tensor import Tensor, from_data


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
