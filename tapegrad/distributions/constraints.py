"""``tg.distributions.constraints``: the regions a parameter or a value must lie in, as
PyTorch's ``torch.distributions.constraints``.  ``check(value)`` returns a bool tensor of
``value``'s shape without the constraint's ``event_dim`` rightmost dimensions."""
import numpy as _np

from ..core.tensor import Tensor as _Tensor

__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "greater_than", "greater_than_eq",
           "half_open_interval", "independent", "integer_interval", "interval", "is_dependent", "less_than",
           "lower_cholesky", "lower_triangular", "nonnegative", "nonnegative_integer", "one_hot", "positive",
           "positive_definite", "positive_integer", "positive_semidefinite", "real", "real_vector", "simplex",
           "square", "symmetric", "unit_interval"]


class Constraint:
    """A region over which a variable is valid. ``is_discrete``: whether the region is
    discrete; ``event_dim``: how many rightmost dimensions make one event."""
    is_discrete = False
    event_dim = 0

    def check(self, value):
        """A bool tensor saying, for each event of ``value``, whether it satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for a constraint that depends on other variables (it cannot be checked)."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim
        super().__init__()

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    """Whether ``constraint`` is a dependent (uncheckable) constraint."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property whose value is a constraint depending on the instance (``Uniform.support``);
    on the class it is a dependent constraint."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """``base_constraint`` over ``reinterpreted_batch_ndims`` more rightmost dimensions:
    an event is valid only if all its entries are."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        if not isinstance(base_constraint, Constraint):
            raise AssertionError("base_constraint must be a Constraint, got %s" % type(base_constraint).__name__)
        if not isinstance(reinterpreted_batch_ndims, int):
            raise AssertionError("reinterpreted_batch_ndims must be an int, got %s"
                                 % type(reinterpreted_batch_ndims).__name__)
        if reinterpreted_batch_ndims < 0:
            raise AssertionError("reinterpreted_batch_ndims must be >= 0, got %d" % reinterpreted_batch_ndims)
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__()

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if result.dim() < n:
            raise ValueError("Expected value.dim() >= %d but got %d"
                             % (self.base_constraint.event_dim + n, value.dim()))
        result = result.reshape(tuple(result.shape[:result.dim() - n]) + (-1,))
        return result.all(-1)

    def __repr__(self):
        return "%s(%r, %d)" % (type(self).__name__[1:], self.base_constraint, self.reinterpreted_batch_ndims)


class _Boolean(Constraint):
    """The two values {0, 1}."""
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    """One-hot vectors."""
    is_discrete = True
    event_dim = 1

    def check(self, value):
        is_boolean = (value == 0) | (value == 1)
        return is_boolean.all(-1) & (value.sum(-1) == 1)


def _fmt(self, **bounds):
    return type(self).__name__[1:] + "(" + ", ".join(f"{k}={v}" for k, v in bounds.items()) + ")"


class _IntegerInterval(Constraint):
    """The integers in [lower_bound, upper_bound]."""
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self):
        return _fmt(self, lower_bound=self.lower_bound, upper_bound=self.upper_bound)


class _IntegerGreaterThan(Constraint):
    """The integers in [lower_bound, inf)."""
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return _fmt(self, lower_bound=self.lower_bound)


class _Real(Constraint):
    """The extended real line [-inf, inf] (NaN is outside)."""

    def check(self, value):
        return value == value


class _GreaterThan(Constraint):
    """The half line (lower_bound, inf]."""

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value):
        return value > self.lower_bound

    def __repr__(self):
        return _fmt(self, lower_bound=self.lower_bound)


class _GreaterThanEq(_GreaterThan):
    """The half line [lower_bound, inf)."""

    def check(self, value):
        return value >= self.lower_bound


class _LessThan(Constraint):
    """The half line [-inf, upper_bound)."""

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return _fmt(self, upper_bound=self.upper_bound)


class _Interval(Constraint):
    """The interval [lower_bound, upper_bound]."""

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self):
        return _fmt(self, lower_bound=self.lower_bound, upper_bound=self.upper_bound)


class _HalfOpenInterval(_Interval):
    """The interval [lower_bound, upper_bound)."""

    def check(self, value):
        return (value >= self.lower_bound) & (value < self.upper_bound)


class _Simplex(Constraint):
    """The unit simplex in the last dimension: ``x >= 0`` and ``x.sum(-1) == 1`` (to 1e-6)."""
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Square(Constraint):
    """Square matrices."""
    event_dim = 2

    def check(self, value):
        return _Tensor._const(_np.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1]))


class _Symmetric(_Square):
    """Symmetric matrices (to PyTorch's isclose tolerance, atol 1e-6)."""

    def check(self, value):
        if value.shape[-2] != value.shape[-1]:
            return super().check(value)
        d = (value - value.transpose(-2, -1)).abs() <= 1e-6 + 1e-5 * value.transpose(-2, -1).abs()
        return d.reshape(tuple(d.shape[:-2]) + (-1,)).all(-1)


class _LowerTriangular(Constraint):
    """Lower-triangular matrices."""
    event_dim = 2

    def check(self, value):
        d = value.tril() == value
        return d.reshape(tuple(d.shape[:-2]) + (-1,)).all(-1)


class _LowerCholesky(Constraint):
    """Lower-triangular matrices with a positive diagonal."""
    event_dim = 2

    def check(self, value):
        d = value.tril() == value
        lower = d.reshape(tuple(d.shape[:-2]) + (-1,)).all(-1)
        return lower & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


def _batch_flags(value, fn):
    v = value.detach().numpy()
    flat = v.reshape((-1,) + v.shape[-2:])
    return _Tensor._const(_np.array([fn(m) for m in flat], dtype=bool).reshape(v.shape[:-2]))


def _is_pd(m):
    try:
        _np.linalg.cholesky(m)
    except _np.linalg.LinAlgError:
        return False
    return not _np.isnan(m).any()


class _PositiveSemidefinite(_Symmetric):
    """Symmetric positive-semidefinite matrices (eigenvalues >= 0)."""

    def check(self, value):
        sym = super().check(value)
        if not bool(sym.all()):
            return sym
        return _batch_flags(value, lambda m: bool((_np.linalg.eigvalsh(m) >= 0).all()))


class _PositiveDefinite(_Symmetric):
    """Symmetric positive-definite matrices (a Cholesky factorisation exists)."""

    def check(self, value):
        sym = super().check(value)
        if not bool(sym.all()):
            return sym
        return _batch_flags(value, _is_pd)


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
square = _Square()
symmetric = _Symmetric()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
