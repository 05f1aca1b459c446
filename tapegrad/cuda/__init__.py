"""``tg.cuda``: tapegrad computes on the CPU only, so there is no CUDA device, as in a
PyTorch built without CUDA (``is_available()`` is False, ``device_count()`` 0);
``tg.cuda.amp`` has PyTorch's deprecated mixed-precision spellings."""

_NO_CUDA = "Torch not compiled with CUDA enabled"


def is_available():
    return False


def device_count():
    return 0


def is_initialized():
    return False


def current_device():
    raise AssertionError(_NO_CUDA)


def manual_seed(seed):
    """Does nothing, as PyTorch's without CUDA (there is no CUDA generator to seed)."""


def manual_seed_all(seed):
    """Does nothing, as PyTorch's without CUDA."""


def synchronize(device=None):
    raise AssertionError(_NO_CUDA)
