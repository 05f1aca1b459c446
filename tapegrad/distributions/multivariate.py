"""Distributions over vectors: Dirichlet and Beta (a Dirichlet of two components, as PyTorch)."""
import numpy as np

from .. import functions as _f
from ..autograd.grad_mode import no_grad
from . import constraints
from .distribution import Distribution
from .utils import _const, _gen, _np, _shape, broadcast_all, sample_dirichlet
import numbers

__all__ = ["Dirichlet", "Beta"]


class Dirichlet(Distribution):
    """The Dirichlet distribution of ``concentration`` (its last dimension the categories).
    ``rsample`` is PyTorch's implicit reparameterisation (``utils.sample_dirichlet``): the
    draw ``x`` differentiates as ``dirichlet_grad(x, alpha, total) * (g - sum(x * g))``,
    from the CDFs of its Beta(alpha_i, total - alpha_i) marginals (``_implicit``)."""
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        Distribution.__init__(self, shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Dirichlet, ("concentration",), batch_shape, _instance, self.event_shape)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        dtype = self.concentration.dtype
        g = _gen().standard_gamma(np.broadcast_to(_np(self.concentration), shape))
        g = np.maximum(g, np.finfo(dtype).tiny)
        return _const(g / g.sum(-1, keepdims=True), dtype)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return sample_dirichlet(self.concentration, shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return _f.xlogy(c - 1.0, value).sum(-1) + _f.lgamma(c.sum(-1)) - _f.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        c = self.concentration
        m1 = (c - 1).clamp(min=0.0)
        total = m1.sum(-1, keepdim=True)
        mode = m1 / _f.where(total == 0, 1.0, total)     # (all below 1: the first category, as PyTorch)
        k = c.shape[-1]
        onehot = _const(np.arange(k) == np.argmax(_np(mode), -1)[..., None], c.dtype)
        return _f.where((c < 1).all(-1).unsqueeze(-1), onehot, mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return (_f.lgamma(c).sum(-1) - _f.lgamma(a0) - (k - a0) * _f.digamma(a0)
                - ((c - 1.0) * _f.digamma(c)).sum(-1))


class Beta(Distribution):
    """The Beta distribution of ``concentration1`` (alpha) and ``concentration0`` (beta),
    held as a two-component Dirichlet (whose checks and messages it shares with PyTorch).
    ``rsample`` is its Dirichlet's, as in PyTorch."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        if isinstance(concentration1, numbers.Number) and isinstance(concentration0, numbers.Number):
            c = _const([float(concentration1), float(concentration0)], np.float64)
        else:
            c1, c0 = broadcast_all(concentration1, concentration0)
            c = _f.stack([c1, c0], -1)
        self._dirichlet = Dirichlet(c, validate_args=validate_args)
        Distribution.__init__(self, self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = _shape(batch_shape)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def sample(self, sample_shape=()):
        with no_grad():
            return self._dirichlet.sample(sample_shape)[..., 0]

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(_f.stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()
