"""``tg.backends.cpu``."""


def get_cpu_capability():
    """The instruction set PyTorch's CPU kernels were chosen for; tapegrad's are NumPy's
    and Numba's: "DEFAULT"."""
    return "DEFAULT"
