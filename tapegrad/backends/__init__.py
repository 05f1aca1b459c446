"""``tg.backends``: the switches PyTorch scripts set for its compute backends, with
the answers of a CPU-only build (tapegrad computes with NumPy and Numba on the CPU):
``cudnn``, ``cuda``, ``mps``, ``mkl``, ``mkldnn`` and ``openmp`` are not available,
and their flags (``cudnn.benchmark = True``...) are accepted and change nothing."""
from . import cpu, cuda, cudnn, mkl, mkldnn, mps, openmp  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp"]
