"""InstanceNorm1d/2d/3d (PyTorch's ``torch.nn.modules.instancenorm``)."""
import warnings

from .. import functional as F
from .batchnorm import _NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_NormBase):
    _no_batch_dim = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, input):
        nd = self._no_batch_dim
        if input.ndim not in (nd, nd + 1):
            raise ValueError("expected %dD or %dD input (got %dD input)" % (nd, nd + 1, input.ndim))

    def _apply_instance_norm(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def forward(self, input):
        self._check_input_dim(input)
        fdim = input.ndim - self._no_batch_dim
        if input.shape[fdim] != self.num_features:
            if self.affine:
                raise ValueError("expected input's size at dim=%d to match num_features (%d), but got: %d."
                                 % (fdim, self.num_features, input.shape[fdim]))
            warnings.warn("input's size at dim=%d does not match num_features. You can silence this warning by not "
                          "passing in num_features, which is not used because affine=False" % fdim, stacklevel=2)
        if input.ndim == self._no_batch_dim:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) or (C, L) inputs."""
    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) or (C, H, W) inputs."""
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of (N, C, D, H, W) or (C, D, H, W) inputs."""
    _no_batch_dim = 4
