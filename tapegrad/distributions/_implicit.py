"""The implicit derivatives of Gamma and Beta draws with respect to their concentrations
(what PyTorch's ``_standard_gamma_grad`` and ``_dirichlet_grad`` compute), on float64 arrays.

A draw ``x`` of a distribution with CDF ``F(x; a)`` moves with ``a`` as
``dx/da = -(dF/da) / f`` (``f`` the density).  Both functions evaluate that quotient from
series whose terms all have one sign, so no digits cancel:

* Gamma(a, 1), ``x < a + 1``: ``P(a, x) = x**a e**-x sum_n x**n / Gamma(a + n + 1)``, so
  ``dx/da = x sum_n c_n (digamma(a + n + 1) - log x)``, ``c_0 = 1/a``,
  ``c_n = c_(n-1) x / (a + n)``; every bracket is positive below ``exp(digamma(a + 1)) > a``.
* Gamma(a, 1), ``x >= a + 1``: ``Q(a, x) = x**a e**-x K(a, x) / Gamma(a)`` with ``K``
  Legendre's continued fraction, so ``dx/da = x (K (log x - digamma(a)) + dK/da)`` (both terms
  positive); ``K`` and ``dK/da`` come from its forward recurrence, differentiated term by term.
* Beta(a, b): the hypergeometric series ``I_x(a, b) = x**a (1-x)**b / (a B(a, b))
  sum_n s_n``, ``s_n = s_(n-1) x (a + b + n - 1) / (a + n)`` (all positive), differentiated
  in ``a``, or the same series of ``1 - I_(1-x)(b, a)`` differentiated in its second
  parameter: the one of fewer terms, unless its terms (of one sign below
  ``exp(digamma(a + 1) - digamma(a + b))`` and above ``exp(digamma(a) - digamma(a + b))``
  respectively) cancel more than the other's.

Each element iterates until its terms are below float64's resolution (at most ``_MAX_TERMS``
terms); the cost is about ``sqrt(a)`` terms for a draw of a large concentration (0.4 s for
10**5 draws of concentration 1000, NumPy only: no kernel to compile).

Exact rather than PyTorch's approximations: PyTorch's closed forms (Taylor series,
saddle-point expansions, rational fits) are off by about 1e-4 typically and by up to 2e-2 in
the far tails, a bias of every gradient that no number of draws averages away; the draws
themselves cannot match PyTorch's (another generator), so bit-for-bit agreement was never on
offer, and the exact values agree with PyTorch's to PyTorch's own accuracy
(tests/test_gamma_rsample.py checks both against mpmath, finite differences and torch).
"""
import numpy as np
from scipy import special as _sp

_EPS = 1e-17
_MAX_TERMS = 100000


def _iterate(state, step, n_max=_MAX_TERMS):
    """Run ``step(n, state) -> (state, done)`` over the elements still iterating: ``state``
    a tuple of equal-length arrays, ``done`` a boolean array; returns the final states."""
    out = tuple(np.array(s, copy=True) for s in state)
    live = np.arange(out[0].size)
    cur = tuple(s.copy() for s in out)
    for n in range(1, n_max + 1):
        if live.size == 0:
            break
        cur, done = step(n, cur)
        if done.any():
            idx = live[done]
            for o, c in zip(out, cur):
                o[idx] = c[done]
            keep = ~done
            live = live[keep]
            cur = tuple(c[keep] for c in cur)
    for o, c in zip(out, cur):          # (not converged within n_max: the last partial sums)
        o[live] = c
    return out


def _gamma_series(a, x):
    lx = np.log(x)
    d = _sp.digamma(a + 1) - lx                 # digamma(a + n + 1) - log x, n = 0
    c = 1.0 / a
    total = c * d

    def step(n, st):
        a, x, c, d, total = st
        c = c * x / (a + n)
        d = d + 1.0 / (a + n)
        term = c * d
        total = total + term
        r = x / (a + n + 1)                       # (the next terms shrink at least this fast)
        done = term <= _EPS * total * (1.0 - r)
        return (a, x, c, d, total), done
    total = _iterate((a, x, c, d, total), step)[-1]
    return x * total


def _gamma_fraction(a, x):
    # K = 1/(d1 + c2/(d2 + c3/(d3 + ...))), d_k = x + 2k - 1 - a, c_k = -(k-1)(k-1-a); the
    # convergents A_k/B_k and their derivatives in a (dd_k/da = -1, dc_k/da = k - 1)
    one, zero = np.ones_like(x), np.zeros_like(x)
    d1 = x + 1.0 - a
    # state at k = 1: (A_1, A_0, B_1, B_0) = (1, 0, d1, 1), derivatives (0, 0, -1, 0); scaled by 1/B_1
    s = 1.0 / d1
    st = (a, x, one * s, zero, one, one * s, zero, zero, -one * s, zero, one * s, zero)

    def step(n, st):
        a, x, A1, A0, B1, B0, dA1, dA0, dB1, dB0, K, dK = st
        k = n + 1
        dk = x + 2.0 * k - 1.0 - a
        ck = -(k - 1.0) * (k - 1.0 - a)
        A2 = dk * A1 + ck * A0
        B2 = dk * B1 + ck * B0
        dA2 = -A1 + dk * dA1 + (k - 1.0) * A0 + ck * dA0
        dB2 = -B1 + dk * dB1 + (k - 1.0) * B0 + ck * dB0
        s = 1.0 / B2
        A2, A1, B1, dA2, dA1, dB2, dB1 = A2 * s, A1 * s, B1 * s, dA2 * s, dA1 * s, dB2 * s, dB1 * s
        Kn = A2                                   # (B2 scaled to 1)
        dKn = dA2 - Kn * dB2
        done = (np.abs(Kn - K) <= _EPS * np.abs(Kn)) & (np.abs(dKn - dK) <= _EPS * np.abs(dKn))
        return (a, x, A2, A1, np.ones_like(B2), B1, dA2, dA1, dB2, dB1, Kn, dKn), done
    K, dK = _iterate(st, step)[-2:]
    return x * (K * (np.log(x) - _sp.digamma(a)) + dK)


_HUGE = 1e7       # (concentrations from which the series would take over 3e4 terms)


def _gamma_wilson_hilferty(a, x):
    # Wilson and Hilferty: P(a, x) ~ Phi(z), z = 3 sqrt(a) (c - 1 + 1/(9a)), c = (x/a)**(1/3);
    # x(a) at fixed z differentiates as c**2 (3 - c) / 2 + c**2 / (6a), off by about a**-1.5
    # (1e-11 at a = 1e7 between the 1e-6 and 1 - 1e-6 quantiles, 7e-11 at 1e-10 of the ends)
    c = np.cbrt(x / a)
    return c * c * (1.5 - 0.5 * c) + c * c / (6.0 * a)


def standard_gamma_grad(alpha, x):
    """``dx/dalpha`` for a draw ``x`` of Gamma(alpha, 1): ``-(dP(alpha, x)/dalpha) / p(x;
    alpha)``, ``P`` the regularised lower incomplete gamma function and ``p`` the density,
    evaluated exactly (to about 1e-14 relative, 1e-13 for alpha near 1e4) from sign-definite
    series (module docstring); from alpha = 1e7, where the series would take over 3e4 terms,
    from the derivative of Wilson and Hilferty's cube-root normal approximation of the
    quantile, whose error falls as alpha**-1.5 (1e-11 there).
    PyTorch's ``_standard_gamma_grad`` evaluates the same quotient with closed-form
    approximations (a Taylor series below 0.8, a saddle-point expansion for alpha > 8, a
    rational fit otherwise) good to about 1e-4 (1e-3 at worst); this is the value they
    approximate.  Broadcasts; float64; 0 where ``x`` is 0."""
    a, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    shape = a.shape
    a, x = a.ravel(), x.ravel()
    out = np.zeros(a.shape)
    ok = (x > 0) & (a > 0) & np.isfinite(x)
    huge = ok & (a >= _HUGE)
    if huge.any():
        out[huge] = _gamma_wilson_hilferty(a[huge], x[huge])
    ok = ok & ~huge
    lo = ok & (x < a + 1.0)
    hi = ok & ~lo
    if lo.any():
        out[lo] = _gamma_series(a[lo], x[lo])
    if hi.any():
        out[hi] = _gamma_fraction(a[hi], x[hi])
    out[~((a > 0) & (x >= 0))] = np.nan
    return out.reshape(shape)


_STIRLING = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)   # B_2k / 2k


def _digamma_diff(u, v):
    """digamma(u + v) - digamma(u), without the cancellation of the difference: for
    ``|v| < u / 1000`` its Taylor series in ``v``; else for ``u`` and ``u + v`` at least 10
    the difference of the asymptotic series, ``log1p(v/u) + v / (2u(u + v))``
    and the Bernoulli terms (to z**-14: below 1e-16 there)."""
    u, v = np.broadcast_arrays(np.asarray(u, np.float64), np.asarray(v, np.float64))
    out = _sp.digamma(u + v) - _sp.digamma(u)
    near = np.abs(v) < 1e-3 * u
    big = ~near & (u >= 10) & (u + v >= 10)
    if big.any():
        ub, vb = u[big], v[big]
        w = ub + vb
        t = np.log1p(vb / ub) + vb / (2 * ub * w)
        for k, c in enumerate(_STIRLING, 1):
            t = t - c * (w ** (-2.0 * k) - ub ** (-2.0 * k))
        out[big] = t
    if near.any():
        un, vn = u[near], v[near]
        t = np.zeros_like(un)
        term = np.ones_like(un)
        for k in range(1, 6):
            term = term * vn / k
            t = t + term * _sp.polygamma(k, un)
        out[near] = t
    return out


def _beta_left(a, b, x):
    # dx/da / (1 - x) = -(x/a) sum_n s_n (log x + digamma(a+b+n) - digamma(a+n+1)); also the
    # sum of the terms' magnitudes over the magnitude of their sum (1: no digit cancelled)
    lx = np.log(x)
    D = _digamma_diff(a + 1.0, b - 1.0)
    s = np.ones_like(x)
    total = lx + D

    def step(n, st):
        a, b, x, lx, s, D, total, size = st
        s = s * x * (a + b + n - 1.0) / (a + n)
        D = D + 1.0 / (a + b + n - 1.0) - 1.0 / (a + n)
        term = s * (lx + D)
        total = total + term
        size = size + np.abs(term)
        r = x * (a + b + n) / (a + n + 1.0)
        done = (r < 1) & (np.abs(term) <= _EPS * np.abs(total) * (1.0 - r))
        return (a, b, x, lx, s, D, total, size), done
    total, size = _iterate((a, b, x, lx, s, D, total, np.abs(total)), step)[-2:]
    return -(x / a) * total, size / np.abs(total)


def _beta_right(a, b, x, y):
    # I_x(a, b) = 1 - I_y(b, a), y = 1 - x:
    # dx/da / (1 - x) = (x/b) sum_n t_n (log x + digamma(a+b+n) - digamma(a)),
    # t_n = t_(n-1) y (a + b + n - 1) / (b + n)
    lx = np.log1p(-y)
    E = lx + _digamma_diff(a, b)
    t = np.ones_like(x)

    def step(n, st):
        a, b, y, t, E, total, size = st
        t = t * y * (a + b + n - 1.0) / (b + n)
        E = E + 1.0 / (a + b + n - 1.0)
        term = t * E
        total = total + term
        size = size + np.abs(term)
        r = y * (a + b + n) / (b + n + 1.0)
        done = (r < 1) & (np.abs(term) <= _EPS * np.abs(total) * (1.0 - r))
        return (a, b, y, t, E, total, size), done
    total, size = _iterate((a, b, y, t, E, E.copy(), np.abs(E)), step)[-2:]
    return (x / b) * total, size / np.abs(total)


def _series_cost(x, p, q):
    """About how many terms the series in ``x`` of parameters (p, q) takes: those while its
    terms grow, then those of their geometric decay (ratio -> x)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rise = np.maximum(0.0, (x * (p + q) - p - 1.0) / (1.0 - x))
        return np.where(x < 1.0, rise + 40.0 / -np.log(x), np.inf)      # (at x = 1: never converges)


_LARGE = 1e5      # (both concentrations from here: the series would take over 300 terms)
_LONG = 2e4       # (a series estimated longer: by differences)


def _beta_by_differences(a, b, x):
    """dx/da / (1 - x) at fixed b for large a and b: ``-(dI_x(a, b)/da) / f(x; a, b)``,
    the derivative from central differences of SciPy's ``betainc`` (Boost's, accurate to
    about 1e-15 relative there by Temme's uniform asymptotic expansions), of sixth order
    (steps of +-1, 2 and 3 h), ``h`` a fiftieth of the shift of ``a`` that moves the mean
    by one standard deviation, less in the tails; ``f`` SciPy's (Boost's) density.  About
    1e-11 relative up to concentrations of 1e9, 1e-8 at 1e12 and beyond (the rounding of
    ``betainc``'s values over the steps)."""
    from scipy.stats import beta as _beta_distribution      # (only for huge concentrations: a slow import)
    t = a + b
    sd = np.sqrt(a * b / (t * t * (t + 1.0)))
    z = (x - a / t) / sd
    h = 0.02 * sd / (b / (t * t)) / (1.0 + np.abs(z))
    upper = z > 0           # (the complement where it is the smaller: no digits lost to 1 - I)

    def cdf(k):
        c = a + k * h
        return np.where(upper, -_sp.betaincc(c, b, x), _sp.betainc(c, b, x))
    dI = (45.0 * (cdf(1) - cdf(-1)) - 9.0 * (cdf(2) - cdf(-2)) + (cdf(3) - cdf(-3))) / (60.0 * h)
    return -dI / _beta_distribution.pdf(x, a, b) / (1.0 - x)


def dirichlet_grad(x, alpha, total):
    """PyTorch's ``_dirichlet_grad(x, alpha, total)``: for ``x`` a draw of Beta(alpha,
    total - alpha), ``-(dI_x(alpha, beta)/dalpha) / f(x; alpha, beta) / (1 - x)`` at fixed
    ``beta = total - alpha`` (``I`` the regularised incomplete beta function, ``f`` the
    density), the factor the reverse of a Dirichlet draw scales by.  Evaluated exactly (to
    about 1e-12 relative) from sign-definite series; PyTorch's closed-form approximations are
    good to about 1e-3 (1e-1 in the far tails).  Broadcasts; float64; at ``x = 1`` (``1 - x``
    lost to rounding) the limit ``(digamma(total) - digamma(alpha)) / beta``, as PyTorch's.
    The series take about sqrt(alpha * beta / total) terms: from both concentrations 1e5 on,
    the derivative is taken by differences of the incomplete beta function instead
    (``_beta_by_differences``: about 1e-11 relative to 1e9, 1e-8 beyond; PyTorch's is off by
    1e-3 at 1e12).  Within the series' range it is exact to about 1e-12."""
    x, a, t = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(alpha, np.float64),
                                  np.asarray(total, np.float64))
    shape = x.shape
    x, a, t = x.ravel(), a.ravel(), t.ravel()
    b = t - a
    out = np.full(x.shape, np.nan)
    ok = (a > 0) & (b > 0) & (x >= 0) & (x <= 1)
    y = 1.0 - x
    # the series that takes fewer terms; where its terms cancelled more than 3 digits (they have
    # one sign below exp(digamma(a + 1) - digamma(a + b)) on the left and above
    # exp(digamma(a) - digamma(a + b)) on the right), the other one if it cancels less and is
    # not too long; differences of the incomplete beta function for both concentrations large,
    # and where neither series is short enough or free of cancellation
    with np.errstate(divide="ignore", invalid="ignore"):
        cost_l, cost_r = _series_cost(x, a, b), _series_cost(y, b, a)
    inner = ok & (x > 0) & (x < 1)
    by_differences = inner & (((a >= _LARGE) & (b >= _LARGE)) | (np.minimum(cost_l, cost_r) > _LONG))
    left = ok & ~by_differences & (x > 0) & (cost_l <= cost_r)
    right = ok & ~by_differences & (x > 0) & ~left
    cond = np.ones(x.shape)
    for side, series, other, other_cost in ((left, _beta_left, _beta_right, cost_r),
                                            (right, _beta_right, _beta_left, cost_l)):
        if not side.any():
            continue
        args = (a[side], b[side], x[side]) + ((y[side],) if series is _beta_right else ())
        out[side], cond[side] = series(*args)
        bad = np.flatnonzero(side)[cond[side] > 1e3]
        bad = bad[other_cost[bad] <= _LONG]
        if bad.size:
            args = (a[bad], b[bad], x[bad]) + ((y[bad],) if other is _beta_right else ())
            v, c = other(*args)
            better = c < cond[bad]
            out[bad[better]], cond[bad[better]] = v[better], c[better]
    by_differences |= inner & (cond > 1e3)
    if by_differences.any():
        out[by_differences] = _beta_by_differences(a[by_differences], b[by_differences], x[by_differences])
    out[ok & (x == 0)] = 0.0
    return out.reshape(shape)
