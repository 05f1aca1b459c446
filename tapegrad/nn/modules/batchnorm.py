"""BatchNorm1d/2d/3d (PyTorch's ``torch.nn.modules.batchnorm``): running statistics as
buffers (running_mean, running_var, num_batches_tracked), updated in place in training mode."""
import numpy as np

from ...autograd.grad_mode import no_grad
from ...core.tensor import Tensor
from .. import _host
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._common import factory_dtype
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


class _NormBase(Module):
    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dt = factory_dtype(device, dtype)
        if affine:
            self.weight = Parameter(np.empty((num_features,), dt))
            if bias:
                self.bias = Parameter(np.empty((num_features,), dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor._const(np.zeros((num_features,), dt)))
            self.register_buffer("running_var", Tensor._const(np.ones((num_features,), dt)))
            self.register_buffer("num_batches_tracked", Tensor._const(np.array(0, np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return "%s, eps=%s, momentum=%s, affine=%s, bias=%s, track_running_stats=%s" % (
            self.num_features, self.eps, self.momentum, self.affine, self.bias is not None, self.track_running_stats)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            # (a checkpoint from before num_batches_tracked existed)
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                                   else Tensor._const(np.array(0, np.int64)))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            _host.refuse_replay("BatchNorm counts its batches in place (a replay would not)")
            with no_grad():
                self.num_batches_tracked._write_(self.num_batches_tracked._data + 1)
            factor = 1.0 / float(self.num_batches_tracked._data) if self.momentum is None else self.momentum
        bn_training = True if self.training else (self.running_mean is None and self.running_var is None)
        use_stats = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_stats else None, self.running_var if use_stats else None,
                            self.weight, self.bias, bn_training, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs."""

    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ValueError("expected 2D or 3D input (got %dD input)" % input.ndim)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) inputs."""

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError("expected 4D input (got %dD input)" % input.ndim)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W) inputs."""

    def _check_input_dim(self, input):
        if input.ndim != 5:
            raise ValueError("expected 5D input (got %dD input)" % input.ndim)
