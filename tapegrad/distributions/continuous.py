"""The continuous distributions of one variable: Normal, LogNormal, HalfNormal, Uniform,
Exponential, Laplace, Cauchy, StudentT, Gamma, Chi2 (PyTorch's semantics, tapegrad's ops)."""
import math
import numbers

import numpy as np

from .. import functions as _f
from ..autograd.grad_mode import is_grad_enabled, no_grad
from . import constraints
from .distribution import Distribution
from .utils import _const, _full, _gen, _np, broadcast_all, standard_gamma

__all__ = ["Normal", "LogNormal", "HalfNormal", "Uniform", "Exponential", "Laplace", "Cauchy", "StudentT", "Gamma", "Chi2"]

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


def _numbers(*values):
    return all(isinstance(v, numbers.Number) for v in values)


class _Params(Distribution):
    """A distribution whose parameters (``_params``) broadcast to its batch shape."""
    _params = ()

    def _init_params(self, values, validate_args):
        for n, t in zip(self._params, broadcast_all(*values)):
            setattr(self, n, t)
        batch_shape = () if _numbers(*values) else getattr(self, self._params[0]).shape
        Distribution.__init__(self, batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(type(self)._expand_cls, self._params, batch_shape, _instance)

    def _first(self):
        return getattr(self, self._params[0])

    def _draw(self, fn, sample_shape):
        """A constant tensor of ``fn(generator, shape)`` in the parameters' dtype."""
        shape = self._extended_shape(sample_shape)
        return _const(fn(_gen(), shape), self._first().dtype)


class Normal(_Params):
    """The normal distribution of mean ``loc`` and standard deviation ``scale``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init_params((loc, scale), validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=()):
        eps = self._draw(lambda g, s: g.standard_normal(s), sample_shape)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return -(value - self.loc) ** 2 / (2 * var) - self.scale.log() - _LOG_SQRT_2PI

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + _f.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * _f.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


Normal._expand_cls = Normal


class _OverNormal(Distribution):
    """A distribution defined as a transform of ``base_dist``, a Normal."""
    has_rsample = True

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self)._expand_cls, _instance)
        new.base_dist = self.base_dist.expand(batch_shape)
        Distribution.__init__(new, new.base_dist.batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __repr__(self):
        return Distribution.__repr__(self)


class LogNormal(_OverNormal):
    """The distribution of ``exp(X)`` for ``X ~ Normal(loc, scale)``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive

    def __init__(self, loc, scale, validate_args=None):
        self.base_dist = Normal(loc, scale, validate_args=validate_args)
        Distribution.__init__(self, self.base_dist.batch_shape, validate_args=validate_args)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = value.log()
        return self.base_dist.log_prob(y) - y

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.base_dist.cdf(value.log())

    def icdf(self, value):
        return self.base_dist.icdf(value).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class HalfNormal(_OverNormal):
    """The distribution of ``|X|`` for ``X ~ Normal(0, scale)``."""
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative

    def __init__(self, scale, validate_args=None):
        self.base_dist = Normal(0, scale, validate_args=False)
        Distribution.__init__(self, self.base_dist.batch_shape, validate_args=validate_args)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return _full(self.scale.shape, 0.0, self.scale.dtype)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape).abs()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return _f.where(value >= 0, lp, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


LogNormal._expand_cls = LogNormal
HalfNormal._expand_cls = HalfNormal


class Uniform(_Params):
    """The uniform distribution on the half-open interval [low, high)."""
    has_rsample = True
    _params = ("low", "high")

    @property
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    def __init__(self, low, high, validate_args=None):
        self._init_params((low, high), validate_args)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return math.nan * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    def rsample(self, sample_shape=()):
        u = self._draw(lambda g, s: g.random(s), sample_shape)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = (self.low <= value) & (self.high > value)
        return _f.where(inside, 0.0, -math.inf) - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


Uniform._expand_cls = Uniform


class Exponential(_Params):
    """The exponential distribution of rate ``rate``."""
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _params = ("rate",)

    def __init__(self, rate, validate_args=None):
        self._init_params((rate,), validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return _full(self.rate.shape, 0.0, self.rate.dtype)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        return self._draw(lambda g, s: g.standard_exponential(s), sample_shape) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


Exponential._expand_cls = Exponential


class Laplace(_Params):
    """The Laplace distribution of location ``loc`` and scale ``scale``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init_params((loc, scale), validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return 2 ** 0.5 * self.scale

    def rsample(self, sample_shape=()):
        eps = float(np.finfo(self.loc.dtype).eps)
        u = self._draw(lambda g, s: g.uniform(eps - 1, 1, s), sample_shape)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        d = value - self.loc
        return 0.5 - 0.5 * d.sign() * (-d.abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


Laplace._expand_cls = Laplace


class Cauchy(_Params):
    """The Cauchy (Lorentz) distribution of median ``loc`` and half width ``scale``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init_params((loc, scale), validate_args)

    @property
    def mean(self):
        return _full(self._extended_shape(), math.nan, self.loc.dtype)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return _full(self._extended_shape(), math.inf, self.loc.dtype)

    def rsample(self, sample_shape=()):
        eps = self._draw(lambda g, s: g.standard_cauchy(s), sample_shape)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


Cauchy._expand_cls = Cauchy


class StudentT(_Params):
    """Student's t distribution of ``df`` degrees of freedom, location ``loc`` and scale
    ``scale``. ``rsample`` is PyTorch's: a normal draw over the square root of a chi-square
    draw (a Gamma draw, differentiated with respect to ``df`` implicitly) over ``df``."""
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = ("df", "loc", "scale")

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        Distribution.__init__(self, self.df.shape, validate_args=validate_args)

    @property
    def mean(self):
        return _f.where(self.df <= 1, math.nan, self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        big = self.scale.pow(2) * df / (df - 2)
        return _f.where(df > 2, big, _f.where(df > 1, math.inf, math.nan))

    def sample(self, sample_shape=()):
        with no_grad():
            t = _const(_gen().standard_t(_np(self.df), self._extended_shape(sample_shape)), self.df.dtype)
            return self.loc + self.scale * t

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        z = _const(_gen().standard_normal(shape), self.df.dtype)
        chi2 = 2.0 * standard_gamma(0.5 * self.df, shape)          # Chi2(df) = Gamma(df / 2, rate 1 / 2)
        return self.loc + self.scale * z * (chi2 / self.df).rsqrt()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + _f.lgamma(0.5 * self.df) - _f.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * (y ** 2.0 / self.df).log1p() - z

    def entropy(self):
        df = self.df
        lbeta = _f.lgamma(0.5 * df) + math.lgamma(0.5) - _f.lgamma(0.5 * (df + 1))
        return (self.scale.log() + 0.5 * (df + 1) * (_f.digamma(0.5 * (df + 1)) - _f.digamma(0.5 * df))
                + 0.5 * df.log() + lbeta)


StudentT._expand_cls = StudentT


class Gamma(_Params):
    """The Gamma distribution of shape ``concentration`` and inverse scale ``rate``.
    ``rsample`` differentiates a draw with respect to the concentration implicitly, as
    PyTorch does (``utils.standard_gamma``; the derivative exact, PyTorch's an approximation
    good to about 1e-4: ``_implicit.standard_gamma_grad``)."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _params = ("concentration", "rate")

    def __init__(self, concentration, rate, validate_args=None):
        self._init_params((concentration, rate), validate_args)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        dtype = self.concentration.dtype
        a = np.broadcast_to(_np(self.concentration), shape)
        x = _gen().standard_gamma(a) / np.broadcast_to(_np(self.rate), shape)
        return _const(np.maximum(x, np.finfo(dtype).tiny), dtype)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = standard_gamma(self.concentration, shape) / self.rate.expand(shape)
        tiny = np.finfo(x.dtype).tiny
        if (_np(x) < tiny).any():      # (as PyTorch: the value clamped, its gradient not)
            x = x + (x.clamp(min=float(tiny)) - x).detach()
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (_f.xlogy(self.concentration, self.rate) + _f.xlogy(self.concentration - 1, value)
                - self.rate * value - _f.lgamma(self.concentration))

    def cdf(self, value):
        """The regularised lower incomplete gamma function of ``rate * value`` (values
        only: tapegrad has no ``gammainc`` op, so no gradient is recorded and one asked
        for is refused)."""
        if self._validate_args:
            self._validate_sample(value)
        x = self.rate * value
        if is_grad_enabled() and (self.concentration.requires_grad or x.requires_grad):
            raise NotImplementedError("Gamma.cdf: the derivative of gammainc is not implemented in tapegrad "
                                      "(compute it under tg.no_grad() or with detached parameters)")
        from scipy import special as sp
        a, xv = np.broadcast_arrays(_np(self.concentration), _np(x))
        return _const(sp.gammainc(a, xv), x.dtype)

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + _f.lgamma(c) + (1.0 - c) * _f.digamma(c)


Gamma._expand_cls = Gamma


class Chi2(Gamma):
    """The chi-square distribution of ``df`` degrees of freedom: Gamma(df / 2, rate 1 / 2)."""
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        df, = broadcast_all(df)
        Gamma.__init__(self, 0.5 * df, _full(df.shape, 0.5, df.dtype), validate_args=validate_args)

    @property
    def df(self):
        return self.concentration * 2


Chi2._expand_cls = Chi2
