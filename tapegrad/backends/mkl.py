"""``tg.backends.mkl``: tapegrad does not use it (NumPy's BLAS and Numba do the work)."""


def is_available():
    return False
