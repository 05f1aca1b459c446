"""``tg.distributions``: PyTorch's ``torch.distributions`` over tapegrad's ops.

Every density, entropy, moment and reparameterised sample is a composition of recorded
tapegrad ops, so its gradients (compiled reverse, ``create_graph``, replay) come from the
tape. Draws use tapegrad's generator (``tg.manual_seed`` makes them reproducible).
"""
from . import constraints  # noqa: F401
from .continuous import Cauchy, Chi2, Exponential, Gamma, HalfNormal, Laplace, LogNormal, Normal, StudentT, Uniform
from .discrete import Bernoulli, Binomial, Categorical, Poisson
from .distribution import Distribution
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate import Beta, Dirichlet
from .mvn import LowRankMultivariateNormal, MultivariateNormal

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet", "Distribution", "Exponential",
           "Gamma", "HalfNormal", "Independent", "Laplace", "LogNormal", "LowRankMultivariateNormal",
           "MultivariateNormal", "Normal", "Poisson", "StudentT", "Uniform",
           "constraints", "kl_divergence", "register_kl"]
