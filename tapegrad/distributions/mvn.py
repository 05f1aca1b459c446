"""MultivariateNormal and LowRankMultivariateNormal (PyTorch's semantics). Their Cholesky
factors and triangular solves are tapegrad compositions (``_linalg.py``), so gradients
with respect to every parameter come from the tape."""
import math

import numpy as np

from .. import functions as _f
from . import _linalg as _la
from . import constraints
from .distribution import Distribution
from .utils import _gen, _const, _shape, lazy_property

__all__ = ["MultivariateNormal", "LowRankMultivariateNormal"]


def _broadcast_shapes(*shapes):
    return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes)))


def _mahalanobis(l, x):
    """``x.mT @ inv(l @ l.mT) @ x`` for the vectors ``x``, ``l`` lower-triangular."""
    return _la.solve_tril_vec(l, x).pow(2).sum(-1)


def _half_log_det(l):
    return l.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def _precision_to_scale_tril(p):
    lf = _la.cholesky(p.flip((-2, -1)))
    l_inv = lf.flip((-2, -1)).transpose(-2, -1)
    return _la.tril_inverse(l_inv)


def _sym(a):
    # (the factor of the symmetric part: for a symmetric input the value is a's, and the
    # gradient PyTorch's symmetric one)
    return (a + a.transpose(-2, -1)) * 0.5


class MultivariateNormal(Distribution):
    """The multivariate normal distribution of mean ``loc`` and one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (its lower Cholesky factor)."""
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        for name, m in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                        ("precision_matrix", precision_matrix)):
            if m is not None:
                if m.dim() < 2:
                    raise ValueError("%s matrix must be at least two-dimensional, with optional leading batch "
                                     "dimensions" % name if name == "scale_tril" else
                                     "%s must be at least two-dimensional, with optional leading batch "
                                     "dimensions" % name)
                batch_shape = _broadcast_shapes(m.shape[:-2], loc.shape[:-1])
                n = m.shape[-1]
                setattr(self, name, m.expand(batch_shape + (n, n)))
        self.loc = loc.expand(batch_shape + (loc.shape[-1],))
        Distribution.__init__(self, batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = _la.cholesky(_sym(covariance_matrix))
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(_sym(precision_matrix))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = _shape(batch_shape)
        n = self.event_shape[0]
        new.loc = self.loc.expand(batch_shape + (n,))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape + (n, n)))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full(self, t):
        n = self._event_shape[0]
        return t.expand(self._batch_shape + (n, n))

    @lazy_property
    def scale_tril(self):
        return self._full(self._unbroadcasted_scale_tril)

    @lazy_property
    def covariance_matrix(self):
        l = self._unbroadcasted_scale_tril
        return self._full(_f.matmul(l, l.transpose(-2, -1)))

    @lazy_property
    def precision_matrix(self):
        li = _la.tril_inverse(self._unbroadcasted_scale_tril)
        return self._full(_f.matmul(li.transpose(-2, -1), li))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _const(_gen().standard_normal(shape), self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril * eps.unsqueeze(-2)).sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - _half_log_det(self._unbroadcasted_scale_tril)

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + _half_log_det(self._unbroadcasted_scale_tril)
        return h if len(self._batch_shape) == 0 else h.expand(self._batch_shape)


def _capacitance_tril(w, d):
    """The Cholesky factor of ``I + w.mT @ inv(diag(d)) @ w``."""
    m = w.shape[-1]
    k = _f.matmul(w.transpose(-2, -1) / d.unsqueeze(-2), w) + _const(np.eye(m), w.dtype)
    return _la.cholesky(k)


def _lowrank_logdet(w, d, cap):
    return 2 * _half_log_det(cap) + d.log().sum(-1)


def _lowrank_mahalanobis(w, d, x, cap):
    wt_dinv_x = ((w.transpose(-2, -1) / d.unsqueeze(-2)) * x.unsqueeze(-2)).sum(-1)
    return (x.pow(2) / d).sum(-1) - _mahalanobis(cap, wt_dinv_x)


class LowRankMultivariateNormal(Distribution):
    """The multivariate normal distribution of mean ``loc`` and covariance
    ``cov_factor @ cov_factor.mT + diag(cov_diag)``, through the Woodbury identity and the
    matrix determinant lemma (the work grows with the rank, not the event size, squared)."""
    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            shape = _broadcast_shapes(tuple(loc.shape) + (1,), cov_factor.shape, tuple(cov_diag.shape) + (1,))
        except ValueError as e:
            raise ValueError(f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor "
                             f"{tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}") from e
        self.cov_factor = cov_factor.expand(shape)
        self.loc = loc.expand(shape[:-1])
        self.cov_diag = cov_diag.expand(shape[:-1])
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _capacitance_tril(cov_factor, cov_diag)
        Distribution.__init__(self, shape[:-2], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = _shape(batch_shape)
        loc_shape = batch_shape + self.event_shape
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1)
                + self._unbroadcasted_cov_diag).expand(self._batch_shape + self._event_shape)

    def _full(self, t):
        n = self._event_shape[0]
        return t.expand(self._batch_shape + (n, n))

    @lazy_property
    def scale_tril(self):
        n = self._event_shape[0]
        sd = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        w = self._unbroadcasted_cov_factor / sd
        k = _f.matmul(w, w.transpose(-2, -1)) + _const(np.eye(n), w.dtype)
        return self._full(sd * _la.cholesky(k))

    @lazy_property
    def covariance_matrix(self):
        w = self._unbroadcasted_cov_factor
        return self._full(_f.matmul(w, w.transpose(-2, -1)) + _f.diag_embed(self._unbroadcasted_cov_diag))

    @lazy_property
    def precision_matrix(self):
        wt_dinv = self._unbroadcasted_cov_factor.transpose(-2, -1) / self._unbroadcasted_cov_diag.unsqueeze(-2)
        a = _la.solve_tril(self._capacitance_tril, wt_dinv)
        return self._full(_f.diag_embed(self._unbroadcasted_cov_diag.reciprocal())
                          - _f.matmul(a.transpose(-2, -1), a))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        w_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        g = _gen()
        eps_w = _const(g.standard_normal(w_shape), self.loc.dtype)
        eps_d = _const(g.standard_normal(shape), self.loc.dtype)
        return (self.loc + (self._unbroadcasted_cov_factor * eps_w.unsqueeze(-2)).sum(-1)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        w, d, cap = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril
        m = _lowrank_mahalanobis(w, d, value - self.loc, cap)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + _lowrank_logdet(w, d, cap) + m)

    def entropy(self):
        w, d, cap = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + _lowrank_logdet(w, d, cap))
        return h if len(self._batch_shape) == 0 else h.expand(self._batch_shape)
