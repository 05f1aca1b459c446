"""Special functions for the elementwise kernels' rules (``digamma(x)``, ``i1(x)``...).

SciPy's own C implementations (``scipy.special.cython_special``), called from compiled
code by symbol name, as ``ops/linalg.py`` calls BLAS: the kernels then give SciPy's
values, which are the NumPy-side forwards'.  SciPy exports no Hurwitz zeta there, so
``polygamma(x, n)`` for ``n >= 1`` sums it here (Euler-Maclaurin, as Cephes does).
"""
import math

import numpy as np

from .._jit import jit, lazy

# (name in cython_special's C API, number of double arguments)
_C_FUNCTIONS = {"psi": ("__pyx_fuse_1psi", 1), "i0": ("i0", 1), "i1": ("i1", 1), "i0e": ("i0e", 1),
                "i1e": ("i1e", 1), "j0": ("j0", 1), "j1": ("j1", 1), "gammainc": ("gammainc", 2),
                "gammaincc": ("gammaincc", 2)}


def _external(name):
    """A cython_special function as a Numba ExternalFunction under a symbol name (so
    that compiled code calling it stays cacheable).  Made when Numba is loaded."""
    def make():
        import ctypes

        import llvmlite.binding as ll
        import scipy.special.cython_special as cs
        from numba import types
        capi, nargs = _C_FUNCTIONS[name]
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        cname = ctypes.pythonapi.PyCapsule_GetName
        cname.restype, cname.argtypes = ctypes.c_char_p, [ctypes.py_object]
        cap = cs.__pyx_capi__[capi]
        symbol = "tapegrad_special_" + name
        ll.add_symbol(symbol, get(cap, cname(cap)))
        # (Cython's signature ends with an int, its "skip dispatch" flag)
        return types.ExternalFunction(symbol, types.float64(*([types.float64] * nargs), types.intc))
    return lazy(make)


_psi = _external("psi")
_i0 = _external("i0")
_i1 = _external("i1")
_i0e = _external("i0e")
_i1e = _external("i1e")
_j0 = _external("j0")
_j1 = _external("j1")
_gammainc = _external("gammainc")
_gammaincc = _external("gammaincc")


@jit(inline="always")
def digamma(x):
    return _psi(x, 0)


@jit(inline="always")
def i0(x):
    return _i0(x, 0)


@jit(inline="always")
def i1(x):
    return _i1(x, 0)


@jit(inline="always")
def i0e(x):
    return _i0e(x, 0)


@jit(inline="always")
def i1e(x):
    return _i1e(x, 0)


@jit(inline="always")
def bessel_j0(x):
    return _j0(x, 0)


@jit(inline="always")
def bessel_j1(x):
    return _j1(x, 0)


@jit(inline="always")
def gammainc(a, x):
    return _gammainc(a, x, 0)


@jit(inline="always")
def gammaincc(a, x):
    return _gammaincc(a, x, 0)


# (2j)! / B_2j, the Euler-Maclaurin coefficients of the zeta function's tail
_EM = np.array([12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
                -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
                1.8152105401943546773e17, -7.1661652561756670113e18])
_EPS = 1.1102230246251565e-16


@jit
def hurwitz_zeta(s, q):
    """sum over k >= 0 of (q + k) ** -s, for s > 1: the first terms summed until
    q + k > 9, then the Euler-Maclaurin tail.  inf at the poles q = 0, -1, ...;
    nan for a negative q with a non-integer s; 0 at q = inf (SciPy's zeta: trigamma(inf)
    is 0, as PyTorch's, where the tail would give 0 * inf)."""
    if s == 1.0:
        return np.inf
    if s < 1.0 or q != q or s != s:
        return np.nan
    if q == np.inf:
        return 0.0
    if q <= 0.0:
        if q == math.floor(q):
            return np.inf
        if s != math.floor(s):
            return np.nan
    total = q ** -s
    a = q
    i = 0
    b = 0.0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a ** -s
        total += b
        if abs(b / total) < _EPS:
            return total
    w = a
    # (the tail's integral w ** (1 - s) / (s - 1) as b * w, except where b = w ** -s underflows:
    # trigamma(1e300) is 1e-300, not 0)
    total += (b * w if b >= 2.2250738585072014e-308 else w ** (1.0 - s)) / (s - 1.0)
    total -= 0.5 * b
    f = 1.0
    k = 0.0
    for j in range(12):
        f *= s + k
        b /= w
        t = f * b / _EM[j]
        total += t
        if abs(t / total) < _EPS:
            return total
        k += 1.0
        f *= s + k
        b /= w
        k += 1.0
    return total


@jit(inline="always")
def polygamma(x, n):
    """The n-th derivative of digamma (n = 0: digamma itself), SciPy's formula
    (-1) ** (n + 1) n! zeta(n + 1, x)."""
    if n == 0.0:
        return _psi(x, 0)
    sign = 1.0 if n % 2.0 == 1.0 else -1.0
    return sign * math.gamma(n + 1.0) * hurwitz_zeta(n + 1.0, x)


NAMES = ("digamma", "polygamma", "i0", "i1", "i0e", "i1e", "bessel_j0", "bessel_j1", "gammainc", "gammaincc")     # what a rule may call
