"""The Cholesky factor and triangular solves MultivariateNormal needs, as compositions
of recorded tapegrad ops (one step per row or column, each a broadcast elementwise op and
a sum), so their gradients come from the tape. O(n^3) work, O(n) steps: written for the
small event sizes of distributions (tg.linalg's LAPACK kernels are for large ones)."""
import numpy as np

from .. import functions as _f
from ..core import tape as _tape
from ..core.tensor import Tensor

__all__ = ["cholesky", "solve_tril", "solve_tril_vec", "trace_xxt", "tril_inverse"]


def _recording():
    return bool(_tape.recording[0]) and _tape.state().rec is not None


def _check_pd(a):
    """PyTorch's error for a matrix (or a batch element) that is not positive definite.
    (Its values read directly: while a function is recorded for replay, the guards are the
    signs of ``cholesky``'s pivots, so that a replay with such a matrix diverges and the
    eager call raises, and a replay with another positive definite one does not.)"""
    v = a._data
    flat = v.reshape((-1,) + v.shape[-2:])
    for b, m in enumerate(flat):
        for k in range(1, m.shape[-1] + 1):
            try:
                np.linalg.cholesky(m[:k, :k])
            except np.linalg.LinAlgError:
                where = "(Batch element %d): " % b if v.ndim > 2 else ""
                raise RuntimeError("linalg.cholesky: %sThe factorization could not be completed because the input "
                                   "is not positive-definite (the leading minor of order %d is not "
                                   "positive-definite)." % (where, k)) from None
            if np.isnan(m[:k, :k]).any():
                break


def cholesky(a):
    """The lower Cholesky factor ``L`` of symmetric positive-definite ``a`` (``..., n, n``),
    ``L @ L.mT == a``, column by column (Cholesky-Crout); only ``a``'s lower triangle is read."""
    _check_pd(a)
    recording = _recording()
    n = a.shape[-1]
    cols = []
    for j in range(n):
        s = a[..., :, j]
        if j:
            c = _f.stack(cols, -1)                      # (..., n, j)
            s = s - (c * c[..., j:j + 1, :]).sum(-1)
        pivot = s[..., j:j + 1]
        if recording:
            _tape.checked_values(pivot > 0)
        d = pivot.sqrt()
        mask = Tensor._const((np.arange(n) >= j).astype(a.dtype))
        cols.append(s * mask / d)
    return _f.stack(cols, -1)


def solve_tril_vec(l, b):
    """``y`` with ``l @ y == b`` for lower-triangular ``l`` (``..., n, n``) and vectors ``b``
    (``..., n``), the batch dimensions broadcast (forward substitution)."""
    n = l.shape[-1]
    ys = []
    for i in range(n):
        r = b[..., i]
        if i:
            r = r - (l[..., i, :i] * _f.stack(ys, -1)).sum(-1)
        ys.append(r / l[..., i, i])
    return _f.stack(ys, -1)


def tril_inverse(l):
    """The inverse of lower-triangular ``l`` (``..., n, n``)."""
    n = l.shape[-1]
    eye = Tensor._const(np.eye(n, dtype=l.dtype))
    return solve_tril_vec(l.unsqueeze(-3), eye).transpose(-2, -1)   # (row j of the solve: column j)


def solve_tril(l, b):
    """``x`` with ``l @ x == b`` for lower-triangular ``l`` (``..., n, n``) and matrices ``b``
    (``..., n, m``), the batch dimensions broadcast."""
    return solve_tril_vec(l.unsqueeze(-3), b.transpose(-2, -1)).transpose(-2, -1)


def trace_xxt(x):
    """The trace of ``x @ x.mT`` over the last two dimensions."""
    return x.pow(2).sum(-1).sum(-1)
