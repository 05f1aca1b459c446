"""``kl_divergence(p, q)`` and ``register_kl``: the pairs PyTorch registers between
tapegrad's distributions, each written with tapegrad's ops (differentiable)."""
import functools
import math
import warnings

from .. import functions as _f
from ..nn import functional as _F
from .continuous import Cauchy, Exponential, Gamma, HalfNormal, Laplace, LogNormal, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, Poisson
from .distribution import Distribution
from .independent import Independent
from .multivariate import Beta, Dirichlet
from . import _linalg as _la
from . import mvn as _mvn
from .mvn import LowRankMultivariateNormal, MultivariateNormal
from .utils import _full, _sum_rightmost, euler_constant as _euler_gamma

__all__ = ["register_kl", "kl_divergence"]

_KL_REGISTRY = {}
_KL_MEMOIZE = {}


def register_kl(type_p, type_q):
    """Decorator registering ``fun(p, q)`` as KL(p || q) for ``p`` of type ``type_p`` and
    ``q`` of ``type_q`` (subclasses included; the most specific pair wins)."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun
    return decorator


@functools.total_ordering
class _Match:
    __slots__ = ["types"]

    def __init__(self, *types):
        self.types = types

    def __eq__(self, other):
        return self.types == other.types

    def __le__(self, other):
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left, right = _KL_REGISTRY[left_p, left_q], _KL_REGISTRY[right_p, right_q]
    if left is not right:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({left_p.__name__}, {right_q.__name__})", RuntimeWarning, stacklevel=2)
    return left


def kl_divergence(p, q):
    """KL(p || q), of shape ``batch_shape``; NotImplementedError for an unregistered pair."""
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _KL_MEMOIZE[type(p), type(q)] = _dispatch_kl(type(p), type(q))
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} "
                                  f"and q type {q.__class__.__name__}")
    return fun(p, q)


def _inf_where(mask, t):
    return _f.where(mask, math.inf, t)


def _infinite_like(t):
    return _full(t.shape, math.inf, t.dtype)


def _x_log_x(t):
    return _f.xlogy(t, t)


# -- same families --

@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (_F.softplus(-q.logits) - _F.softplus(-p.logits))
    t1 = _f.where(p.probs == 0, 0.0, _inf_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (_F.softplus(q.logits) - _F.softplus(p.logits))
    t2 = _f.where(p.probs == 1, 0.0, _inf_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sp = p.concentration1 + p.concentration0
    sq = q.concentration1 + q.concentration0
    t1 = _f.lgamma(q.concentration1) + _f.lgamma(q.concentration0) + _f.lgamma(sp)
    t2 = _f.lgamma(p.concentration1) + _f.lgamma(p.concentration0) + _f.lgamma(sq)
    t3 = (p.concentration1 - q.concentration1) * _f.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * _f.digamma(p.concentration0)
    t5 = (sq - sp) * _f.digamma(sp)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _inf_where(p.total_count > q.total_count, kl)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    shape = t.shape
    t = _inf_where((q.probs == 0).expand(shape), t)
    t = _f.where((p.probs == 0).expand(shape), 0.0, t)
    return t.sum(-1)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sp = p.concentration.sum(-1)
    sq = q.concentration.sum(-1)
    t1 = _f.lgamma(sp) - _f.lgamma(sq)
    t2 = (_f.lgamma(p.concentration) - _f.lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = _f.digamma(p.concentration) - _f.digamma(sp).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return -ratio.log() + ratio - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = _f.lgamma(q.concentration) - _f.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * _f.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    ratio = p.scale / q.scale
    d = (p.loc - q.loc).abs()
    return -ratio.log() + d / q.scale + ratio * (-d / p.scale).exp() - 1


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    return t1 - (4 * p.scale * q.scale).log()


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


# -- different families --

@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    t1 = -p.entropy()
    t2 = _f.lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (_f.digamma(p.concentration1) - _f.digamma(p.concentration1 + p.concentration0))
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    e = p.concentration1 / (p.concentration1 + p.concentration0)
    var = q.scale.pow(2)
    t1 = -p.entropy()
    t2 = 0.5 * (var * 2 * math.pi).log()
    t3 = (e * (1 - e) / (p.concentration1 + p.concentration0 + 1) + e.pow(2)) * 0.5
    t4 = q.loc * e
    t5 = q.loc.pow(2) * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where((q.low > 0.0) | (q.high < 1.0), result)


@register_kl(Exponential, Beta)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    return _infinite_like(p.rate)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return t1 + ratio + _f.lgamma(q.concentration) + q.concentration * _euler_gamma - (1 + _euler_gamma)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * (rate_sqr * var * 2 * math.pi).log()
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var


@register_kl(Gamma, Beta)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p, q):
    return _infinite_like(p.concentration)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * (beta_sqr * var * 2 * math.pi).log() - p.concentration - _f.lgamma(p.concentration)
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (p.concentration - 1) * _f.digamma(p.concentration) + (t2 - t3 + t4) / var


@register_kl(Laplace, Beta)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var = q.scale.pow(2)
    ratio = p.scale.pow(2) / var
    t1 = 0.5 * (2 * ratio / math.pi).log()
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + ratio + (t2 - t3 + t4) / var - 1


@register_kl(Normal, Beta)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    d = p.loc - q.loc
    ratio = p.scale / q.scale
    dr = d / p.scale
    t1 = ratio.log()
    t2 = math.sqrt(2 / math.pi) * p.scale * (-0.5 * dr.pow(2)).exp()
    t3 = d * _f.erf(math.sqrt(0.5) * dr)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p, q):
    return _infinite_like(p.rate)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    w = p.high - p.low
    t1 = w.log()
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - w) / w
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + w) / w
    t4 = _f.lgamma(q.concentration1) + _f.lgamma(q.concentration0) - _f.lgamma(q.concentration1 + q.concentration0)
    result = t3 + t4 - t1 - t2
    return _inf_where((p.high > 1.0) | (p.low < 0.0), result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _inf_where(p.low < 0.0, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    w = p.high - p.low
    t1 = w.log()
    t2 = _f.lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - w) / w
    t4 = q.rate * (p.high + p.low) / 2
    return _inf_where(p.low < 0.0, -t1 + t2 + t3 + t4)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    w = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / w).log()
    t2 = w.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


# -- multivariate normals --

def _event_check(p, q, what):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two %s with                          different event shapes "
                         "cannot be computed" % what)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    _event_check(p, q, "Multivariate Normals")
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = _mvn._half_log_det(lq) - _mvn._half_log_det(lp)
    n = p.event_shape[0]
    term2 = _la.trace_xxt(_la.solve_tril(lq, lp))
    term3 = _mvn._mahalanobis(lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


def _woodbury_a(q):
    wt_dinv = q._unbroadcasted_cov_factor.transpose(-2, -1) / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return _la.solve_tril(q._capacitance_tril, wt_dinv)


def _lr_logdet(d):
    return _mvn._lowrank_logdet(d._unbroadcasted_cov_factor, d._unbroadcasted_cov_diag, d._capacitance_tril)


def _lr_mahalanobis(q, x):
    return _mvn._lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, x, q._capacitance_tril)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    _event_check(p, q, "Low Rank Multivariate Normals")
    term1 = _lr_logdet(q) - _lr_logdet(p)
    term3 = _lr_mahalanobis(q, q.loc - p.loc)
    a = _woodbury_a(q)
    pw, pd, qd = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_cov_diag
    term21 = (pd / qd).sum(-1)
    term22 = _la.trace_xxt(pw * qd.rsqrt().unsqueeze(-1))
    term23 = _la.trace_xxt(a * pd.sqrt().unsqueeze(-2))
    term24 = _la.trace_xxt(_f.matmul(a, pw))
    return 0.5 * (term1 + term21 + term22 - term23 - term24 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p, q):
    _event_check(p, q, "(Low Rank) Multivariate Normals")
    lp = p._unbroadcasted_scale_tril
    term1 = _lr_logdet(q) - 2 * _mvn._half_log_det(lp)
    term3 = _lr_mahalanobis(q, q.loc - p.loc)
    a = _woodbury_a(q)
    term21 = _la.trace_xxt(lp * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _la.trace_xxt(_f.matmul(a, lp))
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p, q):
    _event_check(p, q, "(Low Rank) Multivariate Normals")
    lq = q._unbroadcasted_scale_tril
    term1 = 2 * _mvn._half_log_det(lq) - _lr_logdet(p)
    term3 = _mvn._mahalanobis(lq, q.loc - p.loc)
    term21 = _la.trace_xxt(_la.solve_tril(lq, p._unbroadcasted_cov_factor))
    term22 = _la.trace_xxt(_la.solve_tril(lq, _f.diag_embed(p._unbroadcasted_cov_diag.sqrt())))
    return 0.5 * (term1 + term21 + term22 + term3 - p.event_shape[0])
