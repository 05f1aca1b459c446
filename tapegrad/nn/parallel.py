"""``tg.nn.parallel``: PyTorch's multi-device wrappers, as they behave on a machine
with no GPU and no process group.

``DataParallel(module)`` holds ``module`` (its parameters and state_dict keys are
``module.*``, as PyTorch's) and calls it: with no GPU PyTorch's does the same.
``DistributedDataParallel`` raises PyTorch's error for a process group that was never
initialized (tapegrad has none; ``tapegrad.distributed.DataParallel`` spreads a loss
over a Dask cluster instead).
"""
from .modules import Module

__all__ = ["DataParallel", "DistributedDataParallel"]


class DataParallel(Module):
    """Runs ``module`` as it is (no GPU to replicate it on); ``device_ids`` must be
    empty or None."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if device_ids:
            from ..core.tensor import check_device
            for d in device_ids:
                check_device(d if not isinstance(d, int) else "cuda:%d" % d)
        self.module = module
        self.device_ids = []
        self.dim = dim
        self.output_device = output_device

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    """Raises: DistributedDataParallel needs an initialized process group, which
    tapegrad does not have (as PyTorch before ``init_process_group``)."""

    def __init__(self, module, *args, **kwargs):
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
