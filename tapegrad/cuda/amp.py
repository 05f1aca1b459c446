"""``tg.cuda.amp``: PyTorch's deprecated CUDA spellings of ``tg.amp``; without CUDA,
``autocast`` disables itself and ``GradScaler`` passes through, with PyTorch's warnings."""
import warnings

from .. import amp as _amp

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


class autocast(_amp.autocast):
    """``torch.cuda.amp.autocast(args...)``: ``tg.amp.autocast("cuda", args...)``."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``torch.cuda.amp.GradScaler(args...)``: ``tg.amp.GradScaler("cuda", args...)``, which
    without CUDA warns and passes through."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    return _amp.custom_bwd(bwd, device_type="cuda")
