"""Numeric-script functions made of other recorded ops: ``cov``, ``corrcoef``,
``trapezoid`` (``trapz``), ``cumulative_trapezoid``, ``mvlgamma``, ``norm``, and
``histc`` (no gradient, as in PyTorch).

None has an opcode of its own: each is recorded as the sums, products, slices,
matrix products, ``where``s and ``lgamma``s it is made of (PyTorch's formulas), so its
compiled reverse, its differentiable reverse (create_graph) and its replay are those
ops'.  ``norm``'s ``where``s give PyTorch's gradient, 0, where the norm (or an element,
for a power below 1) is 0, instead of the 0/0 of the plain formula.
"""
import math
import warnings

import numpy as np

from . import functions as _f
from .core import tape as _tp
from .core.dtypes import torch_name
from .core.tensor import Tensor, _wrap_dim, from_data

__all__ = ["cov", "corrcoef", "trapezoid", "trapz", "cumulative_trapezoid", "histc", "mvlgamma", "norm"]


def _need_tensor(name, v, arg="input", pos=1):
    if not isinstance(v, Tensor):
        raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s" % (name, arg, pos, type(v).__name__))


def _no_out(out):
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")


# -- cov, corrcoef ---------------------------------------------------------------------
def _check_weights(kind, w, n, dtype_ok, dtype_text):
    if not isinstance(w, Tensor):
        raise TypeError("cov(): argument '%s' must be Tensor, not %s" % (kind, type(w).__name__))
    if w.ndim > 1:
        raise RuntimeError("cov(): expected %s to have one or fewer dimensions but got %s with %d dimensions"
                           % (kind, kind, w.ndim))
    if not dtype_ok(w.dtype):
        raise RuntimeError("cov(): expected %s to have %s dtype but got %s with %s dtype"
                           % (kind, dtype_text, kind, torch_name(w.dtype)))
    if w.numel() != n:
        raise RuntimeError("cov(): expected %s to have the same numel as there are observations in the input "
                           "but got %d != %d" % (kind, w.numel(), n))
    if n and _tp.checked_values(w < 0).any():
        raise RuntimeError("cov(): %s cannot be negative" % kind)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the variables in the rows of ``input`` (observations in the
    columns), with integer frequency weights ``fweights`` and float observation
    weights ``aweights``; ``correction`` is subtracted from the (weighted) count."""
    _need_tensor("cov", input)
    if input.ndim > 2:
        raise RuntimeError("cov(): expected input to have two or fewer dimensions but got an input with %d "
                           "dimensions" % input.ndim)
    if input.dtype == np.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    n = x.shape[1]
    w = None
    if fweights is not None:
        _check_weights("fweights", fweights, n, lambda d: d.kind in "iu", "integral")
        w = fweights
    if aweights is not None:
        _check_weights("aweights", aweights, n, lambda d: d.kind == "f", "floating point")
        w = aweights if w is None else w * aweights
    if w is None:
        w_sum = n
        avg = _f.sum(x, 1) / n
    else:
        w_sum = _f.sum(w)
        if _tp.checked_values(w_sum == 0).any():
            raise RuntimeError("cov(): weights sum to zero, can't be normalized")
        avg = _f.sum(x * w, 1) / w_sum
    if w is not None and correction != 0:
        factor = w_sum - correction * (_f.sum(w * aweights) / w_sum if aweights is not None else 1)
    else:
        factor = w_sum - correction
    # (this one reads the values without a guard: a replay computes PyTorch's result,
    # 0 degrees of freedom, without the warning)
    if float(factor._data if isinstance(factor, Tensor) else factor) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=2)
        if not isinstance(factor, Tensor):
            factor = 0.0
    if isinstance(factor, Tensor):
        factor = _f.where(factor <= 0, 0.0, factor)
    xc = x - avg.unsqueeze(1)
    c = _f.mm(xc, (xc if w is None else xc * w).t())
    if not isinstance(factor, Tensor):
        factor = from_data(np.asarray(factor, c.dtype))
    with np.errstate(invalid="ignore", divide="ignore"):
        return _f.squeeze(c / factor)


def corrcoef(input):
    """The Pearson correlation coefficients of the rows of ``input``: ``cov`` divided
    by the product of the standard deviations, clipped to [-1, 1]."""
    _need_tensor("corrcoef", input)
    if input.ndim > 2:
        raise RuntimeError("corrcoef(): expected input to have two or fewer dimensions but got an input with %d "
                           "dimensions" % input.ndim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = cov(input)
    with np.errstate(invalid="ignore", divide="ignore"):
        if c.ndim == 0:
            return c / c            # (nan for a covariance of nan, inf or 0, else 1)
        sd = _f.sqrt(_f.diagonal(c))
        c = c / sd.reshape(-1, 1)
        c = c / sd.reshape(1, -1)
    return _f.clamp(c, -1, 1)


# -- trapezoid, cumulative_trapezoid ---------------------------------------------------
def _trapezoid_args(name, y, x, dx, dim):
    _need_tensor(name, y, "y")
    if x is not None and dx is not None:
        raise TypeError("%s() received an invalid combination of arguments - got (Tensor, %s, dx=%s), but expected "
                        "one of:\n * (Tensor y, Tensor x, *, int dim = -1)\n * (Tensor y, *, Number dx = 1, int dim "
                        "= -1)\n" % (name, type(x).__name__ if not isinstance(x, Tensor) else "Tensor",
                                     type(dx).__name__))
    if x is not None and not isinstance(x, Tensor):
        raise TypeError("%s(): argument 'x' (position 2) must be Tensor, not %s" % (name, type(x).__name__))
    if y.ndim == 0:
        if x is None and name == "cumulative_trapezoid":
            raise IndexError("slice() cannot be applied to a 0-dim tensor.")
        raise IndexError("Dimension specified as %d but tensor has no dimensions" % (0 if x is not None else dim))
    ax = _wrap_dim(dim, y.ndim)
    if dx is None:
        dx = 1
    elif isinstance(dx, (bool, np.bool_, complex, np.complexfloating)) or (
            isinstance(dx, Tensor) or not isinstance(dx, (int, float, np.integer, np.floating))):
        if isinstance(dx, (bool, np.bool_, complex, np.complexfloating)):
            raise RuntimeError("%s: Currently, we only support dx as a real number." % name.replace("trapz", "trapezoid"))
        raise TypeError("%s(): argument 'dx' must be Number, not %s" % (name, type(dx).__name__))
    return ax, dx


def _spacing(name, y, x, ax):
    """x's differences along ``ax``, shaped to broadcast against y's (NumPy's rule)."""
    if x.ndim == 1:
        if x.shape[0] != y.shape[ax]:
            raise RuntimeError("%s: There must be one `x` value for each sample point" % name)
        shape = [1] * y.ndim
        shape[ax] = x.shape[0]
        xv = x.reshape(*shape)
    elif x.ndim < y.ndim:
        xv = x.reshape(*((1,) * (y.ndim - x.ndim) + tuple(x.shape)))
    else:
        xv = x
    m = xv.shape[ax]
    return _f.narrow(xv, ax, 1, m - 1) - _f.narrow(xv, ax, 0, m - 1) if m else _f.narrow(xv, ax, 0, 0)


def _halves(y, ax):
    n = y.shape[ax]
    if n == 0:
        return _f.narrow(y, ax, 0, 0), _f.narrow(y, ax, 0, 0)
    return _f.narrow(y, ax, 1, n - 1), _f.narrow(y, ax, 0, n - 1)


def _trapezoid(name, y, x, dx, dim):
    ax, dx = _trapezoid_args(name, y, x, dx, dim)
    if y.shape[ax] == 0:
        return from_data(np.zeros(tuple(s for i, s in enumerate(y.shape) if i != ax), y.dtype))
    if y.dtype == np.bool_ or (x is not None and x.dtype == np.bool_):
        raise RuntimeError("trapezoid: received a bool input for `y`, but bool is not supported")
    if x is not None:
        d = _spacing("trapezoid", y, x, ax)
        right, left = _halves(y, ax)
        return _f.sum(d * (right + left), ax) / 2.0
    n = y.shape[ax]
    ends = _f.narrow(y, ax, 0, 1) + _f.narrow(y, ax, n - 1, 1)
    return (_f.sum(y, ax) - _f.squeeze(ends, ax) * 0.5) * dx


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along ``dim``: samples ``y`` at the points ``x`` (a 1-D
    tensor, or broadcasting with ``y``) or spaced ``dx`` apart (1 by default)."""
    return _trapezoid("trapezoid", y, x, dx, dim)


def trapz(y, x=None, *, dx=None, dim=-1):
    """An alias of ``trapezoid``."""
    return _trapezoid("trapz", y, x, dx, dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal rule along ``dim`` (one element fewer than ``y`` there)."""
    ax, dx = _trapezoid_args("cumulative_trapezoid", y, x, dx, dim)
    if y.dtype == np.bool_ or (x is not None and x.dtype == np.bool_):
        raise RuntimeError("cumulative_trapezoid: received a bool input for `y`, but bool is not supported")
    right, left = _halves(y, ax)
    if x is not None:
        d = _spacing("cumulative_trapezoid", y, x, ax)
        return _f.cumsum(d * (right + left), ax) / 2.0
    return _f.cumsum(dx / 2.0 * (right + left), ax)


# -- histc ---------------------------------------------------------------------------
def _c_number(v):
    """A double as C++'s stream prints it (PyTorch's messages)."""
    if v != v:
        return "-nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "%g" % v


def histc(input, bins=100, min=0, max=0, *, out=None):
    """The histogram of ``input`` in ``bins`` equal bins over [min, max] (the data's
    range when both are equal); elements outside are ignored.  No gradient."""
    _need_tensor("histc", input)
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)):
        raise TypeError("histc(): argument 'bins' must be int, not %s" % type(bins).__name__)
    _no_out(out)
    a = input.detach().numpy()
    if a.dtype.kind != "f":
        raise NotImplementedError("\"histogram_cpu\" not implemented for '%s'" % torch_name(a.dtype))
    if bins <= 0:
        raise RuntimeError("torch.histogram(): bins must be > 0, but got %d for dimension 0" % bins)
    lo, hi = float(min), float(max)
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError("torch.histc: range of [%s, %s] is not finite" % (_c_number(lo), _c_number(hi)))
    if not lo < hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    v = a.reshape(-1)
    v = v[(v >= lo) & (v <= hi)]
    edges = np.linspace(lo, hi, bins + 1).astype(a.dtype)
    pos = np.floor((v.astype(np.float64) - lo) * bins / (hi - lo)).astype(np.int64)
    pos = np.clip(pos, 0, bins - 1)
    # (the edges' rounding decides, as in PyTorch's local search)
    pos = np.where((pos > 0) & (v < edges[pos]), pos - 1, pos)
    pos = np.where((pos < bins - 1) & (v >= edges[np.minimum(pos + 1, bins)]), pos + 1, pos)
    counts = np.bincount(pos, minlength=bins).astype(a.dtype)
    return from_data(counts)


# -- mvlgamma ---------------------------------------------------------------------------
def mvlgamma(input, p, *, out=None):
    """The log of the multivariate gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum over j < p of lgamma(input - j / 2)``."""
    _need_tensor("mvlgamma", input)
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError("mvlgamma(): argument 'p' (position 2) must be int, not %s" % type(p).__name__)
    _no_out(out)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    y = _f.lgamma(input)
    for j in range(1, p):
        y = y + _f.lgamma(input - j / 2)
    return y + p * (p - 1) / 4 * math.log(math.pi)


# -- norm -------------------------------------------------------------------------------
def _dims(dim, ndim):
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool):
        return (_wrap_dim(dim, ndim),)
    return tuple(_wrap_dim(d, ndim) for d in dim)


def _safe_pow(a, e, at_zero):
    """``a ** e`` for a >= 0, ``at_zero`` where a is 0, with a zero gradient there."""
    zero = a == 0
    return _f.where(zero, at_zero, _f.where(zero, 1.0, a) ** e)


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """``torch.norm``: the vector p-norm of ``input`` over ``dim`` (all elements by
    default), p a number, ``inf``, ``-inf`` or ``'fro'`` (the 2-norm); ``dtype``
    casts ``input`` first."""
    _need_tensor("norm", input)
    _no_out(out)
    if p is None:
        p = "fro"
    if isinstance(p, str):
        if p == "nuc":      # (the sum of the singular values: tg.linalg's)
            from . import linalg as _la
            return _la.matrix_norm(input if dtype is None else input.to(dtype), "nuc",
                                   dim=(-2, -1) if dim is None else dim, keepdim=keepdim)
        if p != "fro":
            raise RuntimeError("linalg.matrix_norm: Order %s not supported." % p)
        if dim is not None and not isinstance(dim, (int, np.integer)) and len(dim) > 2:
            raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got %s" % " ".join(str(d) for d in dim))
        p = 2.0
    x = input
    if x.dtype.kind not in "fc":
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. Got %s"
                           % torch_name(x.dtype))
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt.kind not in "fc":
            raise RuntimeError("linalg.vector_norm: dtype should be floating point or complex, but got %s"
                               % torch_name(dt))
        x = x.to(dt)
    p = float(p)
    dims = _dims(dim, x.ndim)
    a = _f.abs(x)
    if math.isinf(p):
        empty = [d for d in dims if x.shape[d] == 0] if x.ndim else []
        if x.numel() == 0 and (dim is None or empty):
            if dim is None:
                raise RuntimeError("linalg.vector_norm cannot compute the %s norm on an empty tensor because the "
                                   "operation does not have an identity" % ("inf" if p > 0 else "-inf"))
            raise RuntimeError("linalg.vector_norm cannot compute the %s norm on the dimension %dbecause this "
                               "dimension is empty and the operation does not have an identity"
                               % ("inf" if p > 0 else "-inf", empty[0]))
        reduce = _f.amax if p > 0 else _f.amin
        return reduce(a, dims if x.ndim else (), keepdim)
    if p == 0:
        return _f.sum(_f.where(a != 0, 1.0, 0.0 * a), dims, keepdim)
    if p == 1:
        return _f.sum(a, dims, keepdim)
    s = _f.sum(_safe_pow(a, p, 0.0 if p > 0 else math.inf), dims, keepdim)
    if p > 0:
        return _safe_pow(s, 1.0 / p, 0.0)
    return s ** (1.0 / p)


class _Methods:
    def cov(self, *, correction=1, fweights=None, aweights=None):
        return cov(self, correction=correction, fweights=fweights, aweights=aweights)

    def corrcoef(self):
        return corrcoef(self)

    def histc(self, bins=100, min=0, max=0):
        return histc(self, bins, min, max)

    def mvlgamma(self, p):
        return mvlgamma(self, p)

    def mvlgamma_(self, p):
        return _f._inplace(mvlgamma)(self, p)

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        return norm(self, p, dim, keepdim, dtype=dtype)


_f._bind(Tensor, _Methods)
