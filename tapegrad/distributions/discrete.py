"""The discrete distributions: Bernoulli, Categorical, Binomial, Poisson (``probs`` and
``logits`` lazy, as PyTorch: the one given is stored, the other computed on first use)."""
import math
import numbers

import numpy as np

from .. import functions as _f
from . import constraints
from .distribution import Distribution
from .utils import _const, _full, _gen, _np, _shape, broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Bernoulli", "Categorical", "Binomial", "Poisson"]


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


def _softplus(x):
    """log(1 + exp(x)), exact for every x (no linear threshold)."""
    return _f.logaddexp(x, _full(x.shape, 0.0, x.dtype))


class _ProbsLogits(Distribution):
    """Shared by the distributions parameterised by ``probs`` or ``logits``."""

    @property
    def param_shape(self):
        return self._param.shape

    def _expand_pl(self, cls, batch_shape, _instance, param_shape, extra=()):
        new = self._get_checked_instance(cls, _instance)
        batch_shape = _shape(batch_shape)
        shape = batch_shape + tuple(param_shape)
        for n in extra:
            setattr(new, n, getattr(self, n).expand(batch_shape))
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(shape)
            new._param = new.logits
        return new, batch_shape


class Bernoulli(_ProbsLogits):
    """The Bernoulli distribution: 1 with probability ``probs`` (or ``sigmoid(logits)``)."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            is_scalar = isinstance(probs, numbers.Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, numbers.Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        Distribution.__init__(self, () if is_scalar else self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new, batch_shape = self._expand_pl(Bernoulli, batch_shape, _instance, ())
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        p = self.probs
        return _f.where(p == 0.5, math.nan, (p >= 0.5).to(p.dtype))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        p = np.broadcast_to(_np(self.probs), shape)
        return _const(_gen().random(shape) < p, self._param.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return value * logits - _softplus(logits)

    def entropy(self):
        return _softplus(self.logits) - self.probs * self.logits

    def enumerate_support(self, expand=True):
        values = _const(np.arange(2), self._param.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((2,) + self._batch_shape)
        return values


class Categorical(_ProbsLogits):
    """The categorical distribution over ``0 .. K-1`` (``K`` the last dimension of
    ``probs``, normalised to sum 1, or of ``logits``, normalised by logsumexp)."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = tuple(self._param.shape[:-1]) if self._param.dim() > 1 else ()
        Distribution.__init__(self, batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new, batch_shape = self._expand_pl(Categorical, batch_shape, _instance, (self._num_events,))
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def mean(self):
        return _full(self._extended_shape(), math.nan, self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return _full(self._extended_shape(), math.nan, self.probs.dtype)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        p = _np(self.probs)
        cdf = np.cumsum(p, -1)
        cdf = cdf / cdf[..., -1:]
        u = _gen().random(shape)
        idx = (u[..., None] >= np.broadcast_to(cdf, shape + (self._num_events,))).sum(-1)
        return _const(np.minimum(idx, self._num_events - 1), np.int64)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        shape = np.broadcast_shapes(value.shape, self.logits.shape)
        idx = value.expand(tuple(shape[:-1]) + (1,))
        return self.logits.expand(shape).gather(-1, idx).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=float(np.finfo(self.logits.dtype).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = _const(np.arange(self._num_events), np.int64).reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((self._num_events,) + self._batch_shape)
        return values


def _clamp_by_zero(x):
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_ProbsLogits):
    """The binomial distribution of ``total_count`` trials of success probability ``probs``
    (or ``sigmoid(logits)``)."""
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
        self._param = self.probs if probs is not None else self.logits
        Distribution.__init__(self, self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new, batch_shape = self._expand_pl(Binomial, batch_shape, _instance, (), extra=("total_count",))
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        n = np.broadcast_to(_np(self.total_count), shape).astype(np.int64)
        p = np.broadcast_to(_np(self.probs), shape)
        return _const(_gen().binomial(n, p), self._param.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_factorial_n = _f.lgamma(n + 1)
        log_factorial_k = _f.lgamma(value + 1)
        log_factorial_nmk = _f.lgamma(n - value + 1)
        logits = self.logits
        normalize = n * _clamp_by_zero(logits) + n * (-logits.abs()).exp().log1p() - log_factorial_n
        return value * logits - log_factorial_k - log_factorial_nmk - normalize

    def _homogeneous(self, what):
        n = _np(self.total_count)
        total = int(n.max())
        if not n.min() == total:
            raise NotImplementedError("Inhomogeneous total count not supported by `%s`." % what)
        return total

    def entropy(self):
        self._homogeneous("entropy")
        lp = self.log_prob(self.enumerate_support(False))
        return -(lp.exp() * lp).sum(0)

    def enumerate_support(self, expand=True):
        total = self._homogeneous("enumerate_support")
        values = _const(np.arange(1 + total), self._param.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((1 + total,) + self._batch_shape)
        return values


class Poisson(Distribution):
    """The Poisson distribution of rate ``rate``."""
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        Distribution.__init__(self, () if isinstance(rate, numbers.Number) else self.rate.shape,
                              validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Poisson, ("rate",), batch_shape, _instance)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return _const(_gen().poisson(np.broadcast_to(_np(self.rate), shape)), self.rate.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return _f.xlogy(value, rate) - rate - _f.lgamma(value + 1)

