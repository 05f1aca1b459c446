"""``Distribution``, the base class of tapegrad's distributions (PyTorch's
``torch.distributions.Distribution``: shapes, argument and sample validation)."""
import warnings

from ..autograd.grad_mode import no_grad
from ..core.tensor import Tensor
from . import constraints
from .utils import _shape, lazy_property

__all__ = ["Distribution"]


def _all_true(valid):
    return bool(valid.all()) if isinstance(valid, Tensor) else bool(valid)


class Distribution:
    """A probability distribution with ``batch_shape`` (independent, differently
    parameterised copies) and ``event_shape`` (the shape of one draw)."""
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Whether distributions validate their arguments by default (on, as PyTorch)."""
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. "
                              "Please set `arg_constraints = {}` or initialize the distribution "
                              "with `validate_args=False` to turn off validation.", stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue
                value = getattr(self, param)
                with no_grad():
                    valid = constraint.check(value)
                if not _all_true(valid):
                    raise ValueError(
                        f"Expected parameter {param} "
                        f"({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {repr(self)} "
                        f"to satisfy the constraint {repr(constraint)}, "
                        f"but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A distribution of the same parameters broadcast to ``batch_shape`` (no new checks)."""
        raise NotImplementedError

    def _expand_params(self, cls, names, batch_shape, _instance, event_shape=()):
        new = self._get_checked_instance(cls, _instance)
        batch_shape = _shape(batch_shape)
        for n in names:
            if n in self.__dict__:
                setattr(new, n, self.__dict__[n].expand(batch_shape + tuple(event_shape)))
        Distribution.__init__(new, batch_shape, event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def batch_shape(self):
        """The shape over which the parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self):
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self):
        """A dict from parameter names to the constraints their values satisfy."""
        raise NotImplementedError

    @property
    def support(self):
        """The constraint of the distribution's support."""
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A sample of shape ``sample_shape + batch_shape + event_shape`` (no gradient)."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterised sample: differentiable with respect to the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample((n,))

    def log_prob(self, value):
        """The log of the density or mass function at ``value``."""
        raise NotImplementedError

    def cdf(self, value):
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value):
        """The inverse cumulative distribution function at ``value``."""
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        """All values of a discrete distribution's support along a new first dimension."""
        raise NotImplementedError

    def entropy(self):
        """The entropy, of shape ``batch_shape``."""
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()):
        return _shape(sample_shape) + self._batch_shape + self._event_shape

    def _validate_sample(self, value):
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        shape = tuple(value.shape)
        start = len(shape) - len(self._event_shape)
        if shape[start:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {shape} vs {self._event_shape}.")
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {shape} vs {expected}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                          "initialize the distribution with `validate_args=False` to turn off validation.",
                          stacklevel=2)
            return
        with no_grad():
            valid = support.check(value)
        if not _all_true(valid):
            raise ValueError("Expected value argument "
                             f"({type(value).__name__} of shape {shape}) "
                             f"to be within the support ({repr(support)}) "
                             f"of the distribution {repr(self)}, "
                             f"but found invalid values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom __init__ method "
                "must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else tuple(self.__dict__[p].shape)}"
                         for p in names)
        return self.__class__.__name__ + "(" + args + ")"
