"""What the layers share: the factory arguments (device, dtype) and the checks of
their sizes."""
import numpy as np

from ...core.tensor import check_device
from ...functions import get_default_dtype


def factory_dtype(device=None, dtype=None):
    """The dtype of a layer's parameters: ``dtype``, else the default; ``device`` must be the CPU."""
    if device is not None:
        check_device(device)
    return np.dtype(get_default_dtype() if dtype is None else dtype)


def ntuple(v, n):
    """``v`` as a tuple of ints (an int repeated n times, or the ints of an iterable)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),) * n
    return tuple(int(u) for u in v)
