"""``tg.accelerator``: tapegrad computes on the CPU, so there is no accelerator, as in a
PyTorch build without one: ``is_available()`` is False, ``current_accelerator()``
None, ``device_count()`` 0, and the calls that need a device raise PyTorch's error."""
from .core.tensor import _NO_ACCELERATOR

__all__ = ["current_accelerator", "current_device_idx", "current_device_index", "device_count", "is_available",
           "set_device_idx", "set_device_index", "synchronize"]


def is_available():
    return False


def current_accelerator(check_available=False):
    """None: there is no accelerator."""
    return None


def device_count():
    return 0


def current_device_index():
    raise RuntimeError(_NO_ACCELERATOR)


def set_device_index(device):
    raise RuntimeError(_NO_ACCELERATOR)


def synchronize(device=None):
    raise RuntimeError(_NO_ACCELERATOR)


current_device_idx = current_device_index
set_device_idx = set_device_index
