"""``tg.special``: PyTorch's ``torch.special`` (SciPy's names), over the elementwise
rows of ``ops/elementwise.py`` and the reductions."""
import math as _math

import numpy as _np

from . import functions as _f
from .core.tensor import Tensor as _Tensor
from .nn import functional as _F
from .ops.elementwise import UNARY_BY_NAME as _U

__all__ = ["expit", "logit", "gammaln", "digamma", "psi", "polygamma", "multigammaln", "erf", "erfc", "erfinv",
           "ndtr", "ndtri", "log_ndtr", "xlogy", "xlog1py", "entr", "i0", "i0e", "i1", "i1e", "log1p", "expm1",
           "exp2", "logsumexp", "softmax", "log_softmax", "sinc", "round", "gammainc", "gammaincc", "bessel_j0",
           "bessel_j1"]

expit = _f.sigmoid
logit = _f.logit
gammaln = _f.lgamma
digamma = psi = _f.digamma
polygamma = _f.polygamma
erf, erfc, erfinv = _f.erf, _f.erfc, _f.erfinv
i0 = _f.i0
log1p, expm1, exp2, sinc, round = _f.log1p, _f.expm1, _f.exp2, _f.sinc, _f.round
xlogy = _f.xlogy
logsumexp = _f.logsumexp


def _row(name, doc):
    op = _U[name]

    def f(input):
        if not isinstance(input, _Tensor):
            raise TypeError("special_%s(): argument 'input' (position 1) must be Tensor, not %s"
                            % (name, type(input).__name__))
        return op.record(input)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc + " (reverse: ``%s``)." % op.rule
    return f


ndtr = _row("ndtr", "The standard normal distribution function, ``(1 + erf(x / sqrt(2))) / 2``")
ndtri = _row("ndtri", "The inverse of ``ndtr``")
log_ndtr = _row("log_ndtr", "``log(ndtr(x))``, accurate far in the lower tail")
entr = _row("entr", "``-x log x`` (0 at 0, -inf below)")
i0e = _row("i0e", "``exp(-|x|) i0(x)``")
i1 = _row("i1", "The modified Bessel function of the first kind, order 1")
i1e = _row("i1e", "``exp(-|x|) i1(x)``")
bessel_j0 = _row("bessel_j0", "The Bessel function of the first kind, order 0 (differentiable, unlike PyTorch's)")
bessel_j1 = _row("bessel_j1", "The Bessel function of the first kind, order 1 (differentiable, unlike PyTorch's)")
gammainc = _f._incomplete_gamma("special_gammainc", "gammainc", "igamma")
gammaincc = _f._incomplete_gamma("special_gammaincc", "gammaincc", "igammac")


def xlog1py(input, other):
    """``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is nan)."""
    a, b = _f._either_number("special_xlog1py", input, other)
    return _f._B["xlog1py"].record(a, b)


def multigammaln(input, p):
    """The log of the multivariate gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum over j < p of lgamma(input - j / 2)`` (defined for
    ``input > (p - 1) / 2``; as PyTorch 2.13, other values are not refused)."""
    if not isinstance(input, _Tensor):
        raise TypeError("multigammaln(): argument 'input' (position 1) must be Tensor, not %s"
                        % type(input).__name__)
    if isinstance(p, bool) or not isinstance(p, (int, _np.integer)) or p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    out = _f.lgamma(input)
    for j in range(1, p):
        out = out + _f.lgamma(input - j / 2)
    return out + p * (p - 1) / 4 * _math.log(_math.pi)


def softmax(input, dim, *, dtype=None):
    return _F.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    return _F.log_softmax(input, dim, dtype=dtype)
