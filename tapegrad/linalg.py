"""``tg.linalg``: PyTorch's ``torch.linalg`` (and ``tg.cholesky_solve``), batched over
leading dimensions, float64 and float32.

The factorisations and solves are host ops (``ops/host.py``): one tape entry each,
forward by NumPy/SciPy's LAPACK, reverse by the rules of the literature (Giles,
"An extended collection of matrix derivative results"; PyTorch's FunctionsManual
for eigh, svd, qr, pinv, cholesky), written once below with tapegrad's operations.
Several outputs (eigh, svd, qr, slogdet) are views of one entry's flat output.
The norms, ``matrix_power``, ``multi_dot``, ``lstsq``, ``eigvalsh`` and
``svdvals`` are compositions of recorded ops.
"""
import collections
import math

import numpy as np

from . import functions as F
from .core import quiet as _quiet
from .core import tape as _tp
from .core.dtypes import torch_name
from .core.registry import NoForwardRule
from .core.tensor import Tensor
from .ops import host as _h
from .ops.compose import cross as _cross
from .ops import shape as _sh

__all__ = ["LinAlgError", "solve", "inv", "det", "slogdet", "cholesky", "cholesky_ex", "solve_triangular",
           "eigh", "eigvalsh", "eig", "eigvals", "norm", "vector_norm", "matrix_norm", "matrix_power", "multi_dot", "svd",
           "svdvals", "qr", "lstsq", "pinv", "matrix_exp", "lu_factor", "lu_solve", "cross"]      # (and tg.cholesky_solve)


class LinAlgError(RuntimeError):
    """A matrix the factorisation cannot handle (singular, not positive-definite):
    ``torch.linalg.LinAlgError``."""


_INF = float("inf")


# -- helpers -------------------------------------------------------------------------------
def _mT(x):
    return F.transpose(x, -2, -1)


def _const(a):
    return Tensor._const(np.asarray(a))


def _out_refused(out, name):
    if out is not None:
        raise TypeError("tapegrad.linalg.%s: out= is not supported (tapegrad ops return new tensors)" % name)


def _float_input(x, fname, what="A"):
    if not isinstance(x, Tensor):
        raise TypeError("%s(): argument '%s' must be Tensor, not %s" % (fname.replace(".", "_"), what,
                                                                         type(x).__name__))
    if x.dtype.kind not in "fc":
        raise RuntimeError("%s: Expected a floating point or complex tensor as input. Got %s"
                           % (fname, torch_name(x.dtype)))


def _matrices(x, fname, what="A"):
    if x.ndim < 2:
        raise RuntimeError("%s: The input tensor %s must have at least 2 dimensions." % (fname, what))


def _square(x, fname, what="A", prefix=True):
    _matrices(x, fname, what)
    n, m = x.shape[-2:]
    if n != m:
        raise RuntimeError("%s%s must be batches of square matrices, but they are %d by %d matrices"
                           % (fname + ": " if prefix else "", what, n, m))


def _same_dtype(fname, A, B):
    if A.dtype != B.dtype:
        raise RuntimeError("%s: Expected A and B to have the same dtype, but found A of type %s and B of type %s "
                           "instead" % (fname, torch_name(A.dtype), torch_name(B.dtype)))


def _batch_note(a, i):
    return "(Batch element %d): " % i if a.ndim > 2 else ""


def _flat_batches(a):
    return a.reshape((-1,) + a.shape[-2:])


def _lapack(name, a):
    from scipy.linalg import lapack
    return getattr(lapack, ("s" if a.dtype == np.float32 else "d") + name)


def _singular_error(a, fname, tail):
    """PyTorch's error for the first singular matrix of ``a`` (LU pivot ``info``)."""
    getrf = _lapack("getrf", a)
    for i, m in enumerate(_flat_batches(a)):
        info = getrf(m)[2]
        if info > 0:
            raise LinAlgError(fname + ": " + _batch_note(a, i) + tail % info)
    raise LinAlgError(fname + ": " + tail % 1)


def _potrf_info(a):
    """LAPACK's potrf info per matrix of ``a`` (its lower triangle), and the factors."""
    potrf = _lapack("potrf", a)
    fl = _flat_batches(a)
    out = np.empty_like(fl)
    info = np.zeros(fl.shape[0], np.int32)
    for i, m in enumerate(fl):
        c, inf = potrf(m, lower=1, clean=1)
        out[i] = c
        info[i] = inf
    return out.reshape(a.shape), info.reshape(a.shape[:-2])


def _broadcast_batches(fname, A, B):
    """``A`` and ``B`` expanded to their broadcast batch shape (recorded: the
    gradient of a broadcast operand is summed by the expand's reverse)."""
    ba, bb = A.shape[:-2], B.shape[:-2]
    try:
        bo = np.broadcast_shapes(ba, bb)
    except ValueError:
        # PyTorch's message names the right-hand side's batch size first ("tensor a")
        for i in range(1, min(len(ba), len(bb)) + 1):
            p, q = bb[-i], ba[-i]
            if p != q and p != 1 and q != 1:
                raise RuntimeError("The size of tensor a (%d) must match the size of tensor b (%d) at non-singleton "
                                   "dimension %d" % (p, q, max(len(ba), len(bb)) - i)) from None
        raise
    if ba != bo:
        A = F.broadcast_to(A, bo + A.shape[-2:])
    if bb != bo:
        B = F.broadcast_to(B, bo + B.shape[-2:])
    return A, B


def _defined(g):
    """Whether an adjoint may be nonzero (PyTorch's "defined" gradient of one output
    of several): a part of the flat adjoint that is zero and is no function of
    anything is left out of the rule (so eigvalsh and svdvals through eigh and svd
    need no distinct eigenvalues)."""
    return g.requires_grad or bool(np.any(g._data))


def _part(flat, start, shape, name="ViewBackward0"):
    n = int(np.prod(shape, dtype=np.int64))
    return _sh.reshape(F.narrow(flat, 0, start, n), tuple(shape), name), start + n


def _split(y, shapes, lead=()):
    """The outputs in a host op's flat output (or adjoint, or tangent) ``y``, as arrays:
    for the forward-mode rules, as ``_parts`` is for tensors.  ``lead``: leading axes
    of ``y`` (K directions) kept in front of each part's shape."""
    parts, at = [], 0
    for sh in shapes:
        size = int(np.prod(sh, dtype=np.int64))
        parts.append(y[..., at:at + size].reshape(tuple(lead) + tuple(sh)))
        at += size
    return parts


def _parts(out, shapes, name="ViewBackward0"):
    """The outputs in the flat output ``out`` of a host op, views of it (named after
    the op, ``name``, as PyTorch names the grad_fn of each output)."""
    res, at = [], 0
    for sh in shapes:
        p, at = _part(out, at, sh, name)
        res.append(p)
    return res


# -- solve ---------------------------------------------------------------------------------
def _solve_fwd(xs, ints, f):
    A, B = xs
    try:
        return np.linalg.solve(A, B)
    except np.linalg.LinAlgError:
        _singular_error(A, "torch.linalg.solve", "The solver failed because the input matrix is singular.%.0s")


def _solve_rev(xs, X, g, ints, f, needs):
    A = xs[0]
    gB = _solve(_mT(A), g)
    return [-F.matmul(gB, _mT(X)) if needs[0] else None, gB]


def _T(a):
    """The transpose of the last two axes, of an array or (as ``_mT``) a tensor."""
    return np.swapaxes(a, -1, -2) if isinstance(a, np.ndarray) else _mT(a)


def _sandwich(Ai, t):
    """``Ai t Ai``: how ``A^-1`` moves along ``t``, up to its sign."""
    return Ai @ t @ Ai


_STEP = 1e-30


def _moved(reverse, *pairs):
    """How ``reverse(*values)`` moves along the tangents: ``pairs`` are (value, tangent).
    For a reverse rule that is analytic in its values (products, solves, no abs or
    comparisons), the complex step Im(reverse(v + ih t)) / h is its derivative to
    rounding, with no difference taken (so h can be tiny)."""
    got = reverse(*(v + 1j * _STEP * t for v, t in pairs))
    if isinstance(got, list):       # (one per input, None where none is needed)
        return [None if r is None else r.imag / _STEP for r in got]
    return got.imag / _STEP


# forward mode: dX = A^-1 (dB - dA X); the adjoints gB = A^-T g, gA = -gB X^T move with
# d(A^-T) = -A^-T dA^T A^-T and dX
def _solve_tangent(xs, X, ts, ints, f):
    (A, _), (tA, tB) = xs, ts
    rhs = (0.0 if tB is None else tB) - (0.0 if tA is None else tA @ X)
    return np.linalg.solve(A, rhs)


def _solve_batched_reverse(xs, X, G, ints, f, needs):
    gB = np.linalg.solve(_T(xs[0]), G)
    return [-gB @ _T(X) if needs[0] else None, gB]


def _solve_curvature(xs, X, ts, tX, g, ints, f, needs):
    (A, _), (tA, _) = xs, ts
    gB = np.linalg.solve(_T(A), g)
    dgB = None if tA is None else -np.linalg.solve(_T(A), _T(tA) @ gB)
    dgA = -gB @ _T(tX) - (0.0 if dgB is None else dgB @ _T(X))
    return [dgA, dgB]


_SOLVE = _h.host_op("linalg_solve", "LinalgSolveExBackward0", _solve_fwd, _solve_rev, _h.SAVE_A | _h.SAVE_OUT,
                    forward_mode=(_solve_tangent, _solve_batched_reverse, _solve_curvature))


def _solve(A, B):
    """``A X = B`` for matrices of one batch shape, no checks."""
    return _h.record(_SOLVE, [A, B], _solve_fwd([A._data, B._data], (), None))


def solve(A, B, *, left=True, out=None):
    _out_refused(out, "solve")
    fname = "linalg.solve"
    _float_input(A, fname)
    _float_input(B, fname, "B")
    _same_dtype(fname, A, B)
    _square(A, fname)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    if vector:
        B = F.unsqueeze(B, -1)
    n = A.shape[-1]
    rows = B.shape[-2] if left else B.shape[-1]
    if B.ndim < 2 or rows != n:
        raise RuntimeError("%s: Incompatible shapes of A and B for the equation %s (%dx%d and %dx%d)"
                           % (fname, "AX = B" if left else "XA = B", n, n, B.shape[-2] if B.ndim >= 2 else 1,
                              B.shape[-1]))
    if not left:
        A, B = _mT(A), _mT(B)
    A, B = _broadcast_batches(fname, A, B)
    X = _solve(A, B)
    if not left:
        X = _mT(X)
    return F.squeeze(X, -1) if vector else X


# -- inv, det, slogdet ---------------------------------------------------------------------
_INV_TAIL = ("The diagonal element %d is zero, the inversion could not be completed because the input matrix is "
             "singular.")


def _inv_fwd(xs, ints, f):
    A = xs[0]
    try:
        return np.linalg.inv(A)
    except np.linalg.LinAlgError:
        _singular_error(A, "linalg.inv", _INV_TAIL)


def _inv_rev(xs, Y, g, ints, f, needs):
    Yt = _mT(Y)
    return [-F.matmul(F.matmul(Yt, g), Yt)]


# forward mode: dY = -Y dA Y; the adjoint -Y^T g Y^T moves with Y
_INV = _h.host_op("linalg_inv", "LinalgInvExBackward0", _inv_fwd, _inv_rev, _h.SAVE_OUT, forward_mode=(
    lambda xs, Y, ts, ints, f: -_sandwich(Y, ts[0]),
    lambda xs, Y, G, ints, f, needs: [-_T(Y) @ G @ _T(Y)],
    lambda xs, Y, ts, tY, g, ints, f, needs: [-_T(tY) @ g @ _T(Y) - _T(Y) @ g @ _T(tY)]))


def inv(A, *, out=None):
    _out_refused(out, "inv")
    _float_input(A, "linalg.inv")
    _square(A, "linalg.inv")
    return _h.record(_INV, [A], _inv_fwd([A._data], (), None))


def _det_fwd(xs, ints, f):
    return np.asarray(np.linalg.det(xs[0]))


def _det_rev(xs, d, g, ints, f, needs):
    A = xs[0]
    if not np.all(d._data != 0):
        return [_cofactors(A, g)]
    c = F.unsqueeze(F.unsqueeze(g * d, -1), -1)
    return [c * _mT(inv(A))]


def _cofactors(A, g):
    """``g`` times the cofactor matrix of ``A``, also for a singular A (PyTorch's
    rule): with A = U S Vh, det(U) det(Vh) U diag(prod_{j != i} S_j) Vh."""
    U, S, Vh = svd(A, full_matrices=False)
    n = A.shape[-1]
    others = F.where(_const(np.eye(n, dtype=np.bool_)), _const(np.ones((), S.dtype)), F.unsqueeze(S, -2))
    D = F.prod(others, -1) * F.unsqueeze(g * det(U) * det(Vh), -1)
    return F.matmul(U * F.unsqueeze(D, -2), Vh)


def _det_inverse(A, d):
    """A^-1 for the forward-mode rules; a singular A (det 0, where the reverse takes
    cofactors from an SVD) sends the walk to the reverse-mode path."""
    if not np.all(d != 0):
        raise NoForwardRule.named("LinalgDetBackward0")
    return np.linalg.inv(A)


def _det_tangent(xs, d, ts, ints, f):
    return d * np.einsum("...ij,...ji->...", _det_inverse(xs[0], d), ts[0])


def _det_curvature(xs, d, ts, td, g, ints, f, needs):
    Ai = _det_inverse(xs[0], d)
    return [(g * td)[..., None, None] * _T(Ai) - (g * d)[..., None, None] * _T(_sandwich(Ai, ts[0]))]


# forward mode: d det = det tr(A^-1 dA); the adjoint g det A^-T moves with d det and
# d(A^-T) = -(A^-1 dA A^-1)^T
_DET = _h.host_op("linalg_det", "LinalgDetBackward0", _det_fwd, _det_rev, _h.SAVE_A | _h.SAVE_OUT, forward_mode=(
    _det_tangent,
    lambda xs, d, G, ints, f, needs: [(G * d)[..., None, None] * _T(_det_inverse(xs[0], d))],
    _det_curvature))


def det(A, *, out=None):
    _out_refused(out, "det")
    _float_input(A, "linalg.det")
    _square(A, "linalg.det")
    return _h.record(_DET, [A], _det_fwd([A._data], (), None))


# PyTorch factors a real matrix's transpose for slogdet (det A^T = det A, and A^T is the
# column-major matrix LAPACK reads in A's memory); its reverse and forward mode solve with
# that LU.  At a singular matrix (a zero pivot: sign 0, logabsdet -inf) these solves divide
# by the zero pivot and give infs and nans where a nonsingular matrix has A^-T; below they
# are LAPACK's getrs with A^T's getrf, as there.  (The infs and nans come from the zero
# pivot, so they are PyTorch's where the two LAPACKs factor the matrix alike, which they do
# for exactly singular matrices of small integers; a matrix singular only to rounding may
# come out with a zero pivot in one and a tiny one in the other.)
def _lu_t(m):
    """LAPACK's LU (getrf) of the square matrix ``m``'s transpose: (LU, 0-based pivots)."""
    lu, piv, _ = _lapack("getrf", m)(m.T)
    return lu, piv


def _lu_sign(lu, piv):
    """PyTorch's sign from an LU: the product of the signs of U's diagonal (0 for a
    zero pivot) times the permutation's parity, so a singular matrix's is 0.0 or -0.0."""
    odd = np.count_nonzero(piv != np.arange(len(piv))) % 2
    return np.prod(np.sign(np.diagonal(lu))) * (-1.0 if odd else 1.0)


def _slogdet_fwd(xs, ints, f):
    A = xs[0]
    s, l = np.linalg.slogdet(np.swapaxes(A, -1, -2))
    s = np.array(s)
    zero = np.flatnonzero(s.reshape(-1) == 0)
    if zero.size:       # (NumPy's 0.0: PyTorch's carries the sign of the product)
        s = s.reshape(-1)
        fl = _flat_batches(A)
        for i in zero:
            s[i] = 0.0 * _lu_sign(*_lu_t(fl[i]))
    return np.concatenate([np.ravel(s), np.ravel(l)])


def _singular_mask(A, y):
    """Which of ``A``'s matrices the forward found singular (sign 0), shaped as A's batch."""
    nb = int(np.prod(A.shape[:-2], dtype=np.int64))
    return np.asarray(y)[:nb].reshape(A.shape[:-2]) == 0


def _solve_refuses(A, singular):
    """PyTorch's error for a second-order derivative at a singular matrix: its reverse
    with grad mode on solves A^T X = g I by linalg.solve, which refuses the matrix."""
    i = int(np.flatnonzero(singular.reshape(-1))[0])
    raise LinAlgError("torch.linalg.solve: " + _batch_note(A, i)
                      + "The solver failed because the input matrix is singular.")


def _logabsdet_adjoints(A, G, singular):
    """``G_b A_b^-T`` for logabsdet adjoints ``G`` (rows, then A's batch shape): the rows
    of A's adjoint, those of a singular matrix by PyTorch's solve (infs and nans)."""
    R = G.shape[0]
    n = A.shape[-1]
    fl, Gf, sf = _flat_batches(A), G.reshape(R, -1), singular.reshape(-1)
    out = np.empty((R,) + fl.shape, np.result_type(A.dtype, G.dtype))
    ok = ~sf
    if ok.any():
        out[:, ok] = Gf[:, ok, None, None] * _T(np.linalg.inv(fl[ok]))
    getrs = _lapack("getrs", fl)
    for i in np.flatnonzero(sf):
        lu, piv = _lu_t(fl[i])
        B = np.zeros((n, R * n), fl.dtype)      # [diag(G_0), diag(G_1), ...]
        for r in range(R):
            B[np.arange(n), r * n + np.arange(n)] = Gf[r, i]
        X = getrs(lu, piv, B, trans=0)[0]
        out[:, i] = X.reshape(n, R, n).transpose(1, 0, 2)
    return out.reshape((R,) + A.shape)


def _logabsdet_tangents(A, tA, singular):
    """tr(A^-1 dA) per direction of ``tA`` (K, *A.shape) and matrix: (K, nb); a singular
    matrix's by PyTorch's solve A X = dA with A^T's LU (infs and nans)."""
    K, n = tA.shape[0], A.shape[-1]
    fl, sf = _flat_batches(A), singular.reshape(-1)
    Tf = tA.reshape((K,) + fl.shape)
    dl = np.empty((K, fl.shape[0]), np.result_type(A.dtype, tA.dtype))
    ok = ~sf
    if ok.any():
        dl[:, ok] = np.einsum("bij,kbji->kb", np.linalg.inv(fl[ok]), Tf[:, ok])
    getrs = _lapack("getrs", fl)
    for i in np.flatnonzero(sf):
        lu, piv = _lu_t(fl[i])
        B = np.ascontiguousarray(Tf[:, i].transpose(1, 0, 2).reshape(n, K * n), dtype=fl.dtype)
        X = getrs(lu, piv, B, trans=1)[0].reshape(n, K, n)
        dl[:, i] = np.einsum("jkj->k", X)
    return dl


def _slogdet_rev(xs, y, g, ints, f, needs):
    A = xs[0]
    nb = int(np.prod(A.shape[:-2], dtype=np.int64))
    gl, _ = _part(g, nb, A.shape[:-2])
    singular = _singular_mask(A, y._data)
    if not singular.any():
        return [F.unsqueeze(F.unsqueeze(gl, -1), -1) * _mT(inv(A))]
    if not _defined(gl):        # (only the sign is used: no logabsdet adjoint to solve with)
        return [Tensor._wrap(np.zeros_like(A._data))]
    if _tp.is_grad_enabled():   # (create_graph)
        _solve_refuses(A._data, singular)
    return [Tensor._wrap(_logabsdet_adjoints(A._data, gl._data[None], singular)[0])]


# forward mode: d logabsdet = tr(A^-1 dA), the sign does not move; the adjoint gl A^-T
# moves with d(A^-T) = -(A^-1 dA A^-1)^T.  At a singular matrix the tangent and the
# adjoint are PyTorch's solves (infs and nans); the adjoint's derivative is what PyTorch's
# double backward refuses there (its error).
def _slogdet_tangent(xs, y, ts, ints, f):
    A = xs[0]
    singular = _singular_mask(A, y)
    if singular.any():
        dl = _logabsdet_tangents(A, ts[0], singular)
    else:
        dl = np.einsum("...ij,...ji->...", np.linalg.inv(A), ts[0]).reshape(len(ts[0]), -1)
    return np.concatenate([np.zeros_like(dl), dl], axis=1)


def _logabsdet_adjoint(A, g):
    """The logabsdet half of the adjoint ``g`` (leading axes kept), shaped to scale A's matrices."""
    nb = int(np.prod(A.shape[:-2], dtype=np.int64))
    return g.reshape(g.shape[:g.ndim - 1] + (2, nb))[..., 1, :].reshape(g.shape[:g.ndim - 1] + A.shape[:-2] + (1, 1))


def _slogdet_batched_reverse(xs, y, G, ints, f, needs):
    A = xs[0]
    singular = _singular_mask(A, y)
    if not singular.any():
        return [_logabsdet_adjoint(A, G) * _T(np.linalg.inv(A))]
    Gl = _logabsdet_adjoint(A, G)[..., 0, 0]
    res = np.zeros(G.shape[:1] + A.shape, np.result_type(A.dtype, G.dtype))
    used = np.flatnonzero(np.any(Gl.reshape(len(Gl), -1) != 0, axis=1))    # (rows of the sign alone: zero)
    if used.size:
        res[used] = _logabsdet_adjoints(A, Gl[used], singular)
    return [res]


def _slogdet_curvature(xs, y, ts, ty, g, ints, f, needs):
    A = xs[0]
    gl = _logabsdet_adjoint(A, g)
    singular = _singular_mask(A, y)
    if singular.any():
        if not np.any(gl):
            return [None]
        _solve_refuses(A, singular)
    return [-gl * _T(_sandwich(np.linalg.inv(A), ts[0]))]


_SLOGDET = _h.host_op("linalg_slogdet", "LinalgSlogdetBackward0", _slogdet_fwd, _slogdet_rev,
                      _h.SAVE_A | _h.SAVE_OUT,
                      forward_mode=(_slogdet_tangent, _slogdet_batched_reverse, _slogdet_curvature))


SlogdetResult = collections.namedtuple("slogdet", ["sign", "logabsdet"])


def slogdet(A, *, out=None):
    _out_refused(out, "slogdet")
    _float_input(A, "linalg.slogdet")
    _square(A, "linalg.slogdet")
    y = _h.record(_SLOGDET, [A], _slogdet_fwd([A._data], (), None))
    sign, logabsdet = _parts(y, [A.shape[:-2], A.shape[:-2]], "LinalgSlogdetBackward0")
    return SlogdetResult(sign, logabsdet)


# -- cholesky ------------------------------------------------------------------------------
_NOT_PD = ("The factorization could not be completed because the input is not positive-definite "
           "(the leading minor of order %d is not positive-definite).")


def _chol_fwd(xs, ints, f):
    A = xs[0]
    L, info = _potrf_info(A)
    bad = np.flatnonzero(info.reshape(-1))
    if bad.size:
        i = int(bad[0])
        raise LinAlgError("linalg.cholesky: " + _batch_note(A, i) + _NOT_PD % int(info.reshape(-1)[i]))
    return np.swapaxes(L, -1, -2).copy() if ints[0] else L


def _chol_rev(xs, L, gL, ints, f, needs):
    if ints[0]:
        L, gL = _mT(L), _mT(gL)
    P = F.tril(F.matmul(_mT(L), gL))
    S = 0.5 * (P + _mT(F.tril(P, -1)))
    gA = solve_triangular(_mT(L), S, upper=True, left=True)
    return [solve_triangular(L, gA, upper=False, left=False)]


# forward mode, consistent with the reverse rule's symmetric gradient: dL = L phi(L^-1 sym(dA)
# L^-T), phi the lower triangle with half the diagonal; the adjoint Li^T S Li (Li = L^-1, S from
# P = tril(L^T gL)) moves with L
def _lower(L, t, ints):
    return (_T(L), None if t is None else _T(t)) if ints[0] else (L, t)


def _phi(M):
    return np.tril(M) - 0.5 * np.eye(M.shape[-1]) * M


def _chol_tangent(xs, L, ts, ints, f):
    L, _ = _lower(L, None, ints)
    Li = np.linalg.inv(L)
    dL = L @ _phi(Li @ (0.5 * (ts[0] + _T(ts[0]))) @ _T(Li))
    return _T(dL) if ints[0] else dL


def _chol_adjoint(L, gL):
    """(L^-1, S): the reverse rule's adjoint of A is L^-T S L^-1."""
    P = np.tril(_T(L) @ gL)
    return np.linalg.inv(L), 0.5 * (P + _T(np.tril(P, -1)))


def _chol_batched_reverse(xs, L, G, ints, f, needs):
    Li, S = _chol_adjoint(_lower(L, None, ints)[0], _T(G) if ints[0] else G)
    return [_T(Li) @ S @ Li]


def _chol_curvature(xs, L, ts, tL, g, ints, f, needs):
    L, dL = _lower(L, tL, ints)
    gL = _T(g) if ints[0] else g
    Li, S = _chol_adjoint(L, gL)
    dP = np.tril(_T(dL) @ gL)
    dS = 0.5 * (dP + _T(np.tril(dP, -1)))
    dLi = -_sandwich(Li, dL)
    return [_T(dLi) @ S @ Li + _T(Li) @ dS @ Li + _T(Li) @ S @ dLi]


_CHOLESKY = _h.host_op("linalg_cholesky", "LinalgCholeskyExBackward0", _chol_fwd, _chol_rev, _h.SAVE_OUT,
                       forward_mode=(_chol_tangent,
                                     _chol_batched_reverse,
                                     _chol_curvature))


def cholesky(A, *, upper=False, out=None):
    _out_refused(out, "cholesky")
    _float_input(A, "linalg.cholesky")
    _square(A, "linalg.cholesky")
    ints = (int(bool(upper)),)
    return _h.record(_CHOLESKY, [A], _chol_fwd([A._data], ints, None), ints)


CholeskyExResult = collections.namedtuple("cholesky_ex", ["L", "info"])


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    _out_refused(out, "cholesky_ex")
    _float_input(A, "linalg.cholesky_ex")
    _square(A, "linalg.cholesky_ex")
    L, info = _potrf_info(A._data)
    if check_errors and info.any():
        _chol_fwd([A._data], (0,), None)
    if not info.any():
        return CholeskyExResult(cholesky(A, upper=upper), Tensor._wrap(info))
    if upper:
        L = np.swapaxes(L, -1, -2).copy()
    return CholeskyExResult(Tensor._wrap(L), Tensor._wrap(info))


# -- solve_triangular, cholesky_solve --------------------------------------------------------
def _trsm(A, B, upper, left, unit, trans=False):
    """``op(A) X = B`` (left) or ``X op(A) = B`` per batch, BLAS trsm: a singular
    triangle gives inf and nan as in PyTorch, no error."""
    from scipy.linalg import blas
    trsm = blas.strsm if A.dtype == np.float32 else blas.dtrsm
    A3, B3 = _flat_batches(A), _flat_batches(B)
    out = np.empty(B3.shape, B.dtype)
    with np.errstate(all="ignore"):
        for i in range(B3.shape[0]):
            out[i] = trsm(1.0, A3[i], B3[i], side=0 if left else 1, lower=0 if upper else 1,
                          trans_a=1 if trans else 0, diag=1 if unit else 0)
    return out.reshape(B.shape)


def _st_fwd(xs, ints, f):
    A, B = xs
    return _trsm(A, B, *(bool(i) for i in ints))


def _st_rev(xs, X, g, ints, f, needs):
    A = xs[0]
    upper, left, unit = (bool(i) for i in ints)
    gB = solve_triangular(_mT(A), g, upper=not upper, left=left, unitriangular=unit)
    gA = None
    if needs[0]:
        gA = -(F.matmul(gB, _mT(X)) if left else F.matmul(_mT(X), gB))
        gA = F.triu(gA, int(unit)) if upper else F.tril(gA, -int(unit))
    return [gA, gB]


# forward mode: the triangle the forward reads (its diagonal 1 with unitriangular) as a
# matrix: left, dX = A^-1 (dB - dA X); right (X A = B), dX = (dB - X dA) A^-1
def _triangle(M, ints, unit_diagonal):
    upper, _, unit = ints
    T = np.triu(M, unit) if upper else np.tril(M, -unit)
    return T + np.eye(M.shape[-1]) if unit and unit_diagonal else T


def _st_tangent(xs, X, ts, ints, f):
    A, left = _triangle(xs[0], ints, True), ints[1]
    tA, tB = ts
    rhs = (0.0 if tB is None else tB) - (0.0 if tA is None else
                                          (_triangle(tA, ints, False) @ X if left else X @ _triangle(tA, ints, False)))
    return np.linalg.solve(A, rhs) if left else _T(np.linalg.solve(_T(A), _T(rhs)))


def _st_adjoints(A, X, G, ints):
    gB = np.linalg.solve(_T(A), G) if ints[1] else _T(np.linalg.solve(A, _T(G)))
    return gB, -_triangle(gB @ _T(X) if ints[1] else _T(X) @ gB, ints, False)


def _st_curvature(xs, X, ts, tX, g, ints, f, needs):
    A, left = _triangle(xs[0], ints, True), ints[1]
    tA = None if ts[0] is None else _triangle(ts[0], ints, False)
    gB, _ = _st_adjoints(A, X, g, ints)
    d = gB @ _T(tX) if left else _T(tX) @ gB
    dgB = None
    if tA is not None:
        dgB = -np.linalg.solve(_T(A), _T(tA) @ gB) if left else -_T(np.linalg.solve(A, _T(gB @ _T(tA))))
        d = d + (dgB @ _T(X) if left else _T(X) @ dgB)
    return [-_triangle(d, ints, False), dgB]


_SOLVE_TRIANGULAR = _h.host_op("linalg_solve_triangular", "LinalgSolveTriangularBackward0", _st_fwd, _st_rev,
                               _h.SAVE_A | _h.SAVE_OUT, forward_mode=(
    _st_tangent,
    lambda xs, X, G, ints, f, needs: _st_adjoints(_triangle(xs[0], ints, True), X, G, ints)[::-1],
    _st_curvature))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    _out_refused(out, "solve_triangular")
    fname = "linalg.solve_triangular"
    _float_input(A, fname)
    _float_input(B, fname, "B")
    _same_dtype(fname, A, B)
    _square(A, fname)
    _matrices(B, fname, "B")
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError("%s: Incompatible shapes of A and B for the equation %s (%dx%d and %dx%d)"
                           % (fname, "AX = B" if left else "XA = B", n, n, B.shape[-2], B.shape[-1]))
    A, B = _broadcast_batches(fname, A, B)
    ints = (int(bool(upper)), int(bool(left)), int(bool(unitriangular)))
    return _h.record(_SOLVE_TRIANGULAR, [A, B], _st_fwd([A._data, B._data], ints, None), ints)


def _cs_fwd(xs, ints, f):
    B, L = xs
    upper = bool(ints[0])
    # (L L^T) X = B: L Y = B, then L^T X = Y (upper: U^T Y = B, then U X = Y)
    Y = _trsm(L, B, upper, True, False, trans=upper)
    return _trsm(L, Y, upper, True, False, trans=not upper)


def _cs_rev(xs, X, g, ints, f, needs):
    L = xs[1]
    upper = bool(ints[0])
    gB = _cholesky_solve(g, L, upper)
    gL = None
    if needs[1]:
        common = F.matmul(gB, _mT(X))
        common = common + _mT(common)
        gL = -F.matmul(L, common) if upper else -F.matmul(common, L)
    return [gB, gL]


# forward mode, with A = L L^T (U^T U): dX = A^-1 (dB - dA X); the adjoints gB = A^-1 g and
# gL = -C L (-L C), C = gB X^T + X gB^T, move with A, X and L
def _cs_matrix(L, upper):
    return _T(L) @ L if upper else L @ _T(L)


def _cs_dmatrix(L, dL, upper):
    return _T(dL) @ L + _T(L) @ dL if upper else dL @ _T(L) + L @ _T(dL)


def _cs_tangent(xs, X, ts, ints, f):
    (_, L), (tB, tL) = xs, ts
    upper = bool(ints[0])
    rhs = (0.0 if tB is None else tB) - (0.0 if tL is None else _cs_dmatrix(L, tL, upper) @ X)
    return np.linalg.solve(_cs_matrix(L, upper), rhs)


def _cs_batched_reverse(xs, X, G, ints, f, needs):
    L, upper = xs[1], bool(ints[0])
    gB = np.linalg.solve(_cs_matrix(L, upper), G)
    C = gB @ _T(X) + X @ _T(gB)
    return [gB, -(L @ C if upper else C @ L)]


def _cs_curvature(xs, X, ts, tX, g, ints, f, needs):
    (_, L), (_, tL) = xs, ts
    upper = bool(ints[0])
    A = _cs_matrix(L, upper)
    gB = np.linalg.solve(A, g)
    C = gB @ _T(X) + X @ _T(gB)
    dC = gB @ _T(tX)
    dgB = None
    if tL is not None:
        dgB = -np.linalg.solve(A, _cs_dmatrix(L, tL, upper) @ gB)
        dC = dC + dgB @ _T(X)
    dC = dC + _T(dC)
    dgL = -(L @ dC if upper else dC @ L)
    if tL is not None:
        dgL = dgL - (tL @ C if upper else C @ tL)
    return [dgB, dgL]


_CHOLESKY_SOLVE = _h.host_op("cholesky_solve", "CholeskySolveBackward0", _cs_fwd, _cs_rev,
                             _h.SAVE_B | _h.SAVE_OUT,
                             forward_mode=(_cs_tangent, _cs_batched_reverse, _cs_curvature))


def _cholesky_solve(input, input2, upper=False, *, out=None):
    """``tg.cholesky_solve(B, L, upper=False)``: ``X`` with ``L L^T X = B``
    (``U^T U X = B`` with ``upper``)."""
    _out_refused(out, "cholesky_solve")
    B, L = input, input2
    _float_input(B, "cholesky_solve", "input")
    _float_input(L, "cholesky_solve", "input2")
    _square(L, "cholesky_solve", prefix=False)
    _matrices(B, "cholesky_solve", "B")
    if B.dtype != L.dtype:
        raise RuntimeError("Expected b and A to have the same dtype, but found b of type %s and A of type %s instead."
                           % (torch_name(B.dtype), torch_name(L.dtype)))
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError("Incompatible matrix sizes for cholesky_solve: each A matrix is %d by %d but each b "
                           "matrix is %d by %d" % (L.shape[-1], L.shape[-1], B.shape[-2], B.shape[-1]))
    L, B = _broadcast_batches("cholesky_solve", L, B)
    ints = (int(bool(upper)),)
    return _h.record(_CHOLESKY_SOLVE, [B, L], _cs_fwd([B._data, L._data], ints, None), ints)


# tg.cholesky_solve (torch.linalg has none)
_cholesky_solve.__name__ = _cholesky_solve.__qualname__ = "cholesky_solve"


# -- eigh, eigvalsh ------------------------------------------------------------------------
def _eigh_fwd(xs, ints, f):
    w, V = np.linalg.eigh(xs[0], UPLO="U" if ints[0] else "L")
    return np.concatenate([w.ravel(), V.ravel()])


def _eigh_rev(xs, y, g, ints, f, needs):
    A_shape = tuple(ints[1:])
    n = A_shape[-1]
    lshape = A_shape[:-1]
    L, V = _parts(y, [lshape, A_shape])
    gL, gV = _parts(g, [lshape, A_shape])
    inner = F.diag_embed(gL)
    if _defined(gV):
        VtgV = F.matmul(_mT(V), gV)
        E = F.unsqueeze(L, -2) - F.unsqueeze(L, -1)         # E_ij = L_j - L_i
        E = F.where(_const(np.eye(n, dtype=np.bool_)), _const(np.ones((), y.dtype)), E)
        inner = inner + 0.5 * (VtgV - _mT(VtgV)) / E
    return [F.matmul(V, F.matmul(inner, _mT(V)))]


# forward mode, on the direction's symmetric part S (the reverse gives a symmetric
# gradient, as PyTorch's): with M = V^T S V, dL = diag(M) and dV = V (F o M), F_ij =
# 1 / (L_j - L_i) off the diagonal (``_gaps``).  The adjoint
# V (diag(gL) + (W - W^T) o F / 2) V^T, W = V^T gV, moves with dL (through F) and dV.
def _eigh_split(y, ints, lead=()):
    A_shape = tuple(ints[1:])
    return _split(y, [A_shape[:-1], A_shape], lead)


def _gaps(L):
    """F_ij = 1 / (L_j - L_i), 0 on the diagonal; infinite between equal values off it, as
    in the reverse rules (and PyTorch's): where a result depends on the eigenvectors of a
    repeated eigenvalue, it is not finite rather than silently some number."""
    E = L[..., None, :] - L[..., :, None]
    n = L.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        F = 1.0 / (E + np.eye(n))               # (the diagonal: 1 / 1, then zeroed)
    return F * (1 - np.eye(n))


def _eigh_tangent(xs, y, ts, ints, f):
    L, V = _eigh_split(y, ints)
    S = ts[0] + _T(ts[0])
    M = _T(V) @ (0.5 * S) @ V
    dL = np.diagonal(M, 0, -2, -1)
    dV = V @ (_gaps(L) * M)
    K = len(ts[0])
    return np.concatenate([dL.reshape(K, -1), dV.reshape(K, -1)], 1)


def _eigh_inner(L, V, gL, gV):
    inner = gL[..., None] * np.eye(L.shape[-1])
    if np.any(gV):
        W = _T(V) @ gV
        inner = inner + 0.5 * (W - _T(W)) * _gaps(L)
    return inner


def _eigh_batched_reverse(xs, y, G, ints, f, needs):
    L, V = _eigh_split(y, ints)
    gL, gV = _eigh_split(G, ints, (len(G),))
    return [V @ _eigh_inner(L, V, gL, gV) @ _T(V)]


def _eigh_curvature(xs, y, ts, ty, g, ints, f, needs):
    L, V = _eigh_split(y, ints)
    gL, gV = _eigh_split(g, ints)
    dL, dV = _eigh_split(ty, ints, (len(ty),))
    inner = _eigh_inner(L, V, gL, gV)
    d = dV @ inner @ _T(V)
    d = d + _T(d)
    if np.any(gV):
        Fg = _gaps(L)
        W, dW = _T(V) @ gV, _T(dV) @ gV
        dF = -(dL[..., None, :] - dL[..., :, None]) * Fg * Fg
        d = d + V @ (0.5 * ((dW - _T(dW)) * Fg + (W - _T(W)) * dF)) @ _T(V)
    return [d]


_EIGH = _h.host_op("linalg_eigh", "LinalgEighBackward0", _eigh_fwd, _eigh_rev, _h.SAVE_OUT,
                   forward_mode=(_eigh_tangent, _eigh_batched_reverse, _eigh_curvature))

EighResult = collections.namedtuple("eigh", ["eigenvalues", "eigenvectors"])


def _uplo(UPLO):
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError("Expected UPLO argument to be 'L' or 'U', but got %s" % UPLO)
    return int(UPLO in ("U", "u"))


def eigh(A, UPLO="L", *, out=None):
    _out_refused(out, "eigh")
    _float_input(A, "linalg.eigh")
    _square(A, "linalg.eigh")
    ints = (_uplo(UPLO),) + A.shape
    y = _h.record(_EIGH, [A], _eigh_fwd([A._data], ints, None), ints)
    L, V = _parts(y, [A.shape[:-1], A.shape], "LinalgEighBackward0")
    return EighResult(L, V)


def eigvalsh(A, UPLO="L", *, out=None):
    _out_refused(out, "eigvalsh")
    _float_input(A, "linalg.eigvalsh")
    _square(A, "linalg.eigh")
    if not A.requires_grad:
        return Tensor._wrap(np.linalg.eigvalsh(A._data, UPLO="U" if _uplo(UPLO) else "L"))
    return eigh(A, UPLO).eigenvalues


# -- svd, svdvals --------------------------------------------------------------------------
def _svd_shapes(shape, full):
    m, n = shape[-2:]
    k = min(m, n)
    b = tuple(shape[:-2])
    return [b + ((m, m) if full else (m, k)), b + (k,), b + ((n, n) if full else (k, n))]


def _svd_fwd(xs, ints, f):
    U, S, Vh = np.linalg.svd(xs[0], full_matrices=bool(ints[0]))
    return np.concatenate([U.ravel(), S.ravel(), Vh.ravel()])


def _svd_rev(xs, y, g, ints, f, needs):
    full = bool(ints[0])
    shape = tuple(ints[1:])
    m, n = shape[-2:]
    k = min(m, n)
    U, S, Vh = _parts(y, _svd_shapes(shape, full))
    gU, gS, gVh = _parts(g, _svd_shapes(shape, full))
    if full:
        U, gU = F.narrow(U, -1, 0, k), F.narrow(gU, -1, 0, k)
        Vh, gVh = F.narrow(Vh, -2, 0, k), F.narrow(gVh, -2, 0, k)
    du, dv = _defined(gU), _defined(gVh)
    if not du and not dv:
        return [F.matmul(U * F.unsqueeze(gS, -2), Vh)]
    V, gV = _mT(Vh), _mT(gVh)
    S2 = S * S
    E = F.unsqueeze(S2, -2) - F.unsqueeze(S2, -1)
    E = F.where(_const(np.eye(k, dtype=np.bool_)), _const(np.ones((), y.dtype)), E)
    Sr, Sc = F.unsqueeze(S, -2), F.unsqueeze(S, -1)
    core = 0.0
    if du:
        UhgU = F.matmul(_mT(U), gU)
        core = (UhgU - _mT(UhgU)) * Sr / E
    if dv:
        VhgV = F.matmul(_mT(V), gV)
        core = core + Sc * (VhgV - _mT(VhgV)) / E
    core = core + F.diag_embed(gS)
    if m > n and du:
        gA = F.matmul(U, core)
        gUSinv = gU / Sr
        gA = gA + gUSinv - F.matmul(U, F.matmul(_mT(U), gUSinv))
        gA = F.matmul(gA, Vh)
    elif m < n and dv:
        gA = F.matmul(core, Vh)
        gVSinv = gV / Sr
        gA = gA + _mT(gVSinv) - F.matmul(F.matmul(_mT(gVSinv), V), Vh)
        gA = F.matmul(U, gA)
    else:
        gA = F.matmul(U, F.matmul(core, Vh))
    return [gA]


# forward mode (reduced, or full of a square A; PyTorch has none for full_matrices of another
# shape: the reverse-mode path): with P = U^T dA V, dS = diag(P), F_ij = 1 / (s_j^2 - s_i^2) off
# the diagonal (``_gaps``),
#   dU = U (F o (P S + S P^T)) + (I - U U^T) dA V S^-1,
#   dV = V (F o (S P + P^T S)) + (I - V V^T) dA^T U S^-1.
# The reverse rule on arrays moves by the complex step.
def _svd_split(y, ints, lead=()):
    full, shape = bool(ints[0]), tuple(ints[1:])
    if full and shape[-1] != shape[-2]:
        raise NoForwardRule.named("LinalgSvdBackward0")
    return _split(y, _svd_shapes(shape, full), lead)


def _svd_tangent(xs, y, ts, ints, f):
    U, S, Vh = _svd_split(y, ints)
    dA, V = ts[0], _T(Vh)
    P = _T(U) @ dA @ V
    Sd = S[..., None, :]                         # (scales columns; S[..., :, None] scales rows)
    Fg = _gaps(S * S)
    Sinv = np.divide(1.0, S, out=np.full(S.shape, np.inf), where=S != 0)[..., None, :]
    dU = U @ (Fg * (P * Sd + S[..., :, None] * _T(P)))
    dV = V @ (Fg * (S[..., :, None] * P + _T(P) * Sd))
    m, n = dA.shape[-2:]
    if m > n:
        dU = dU + (dA @ V - U @ (_T(U) @ dA @ V)) * Sinv
    elif n > m:
        dV = dV + (_T(dA) @ U - V @ (_T(V) @ _T(dA) @ U)) * Sinv
    K = len(dA)
    return np.concatenate([dU.reshape(K, -1), np.diagonal(P, 0, -2, -1).reshape(K, -1), _T(dV).reshape(K, -1)], 1)


def _svd_reverse_np(U, S, Vh, gU, gS, gVh):
    """The reverse rule (``_svd_rev``) on arrays; leading axes of the adjoints batch."""
    du, dv = bool(np.any(gU)), bool(np.any(gVh))
    if not du and not dv:
        return (U * gS[..., None, :]) @ Vh
    V, gV = _T(Vh), _T(gVh)
    Fg, Sr, Sc = _gaps(S * S), S[..., None, :], S[..., :, None]
    core = gS[..., None] * np.eye(S.shape[-1])
    if du:
        W = _T(U) @ gU
        core = core + (W - _T(W)) * Sr * Fg
    if dv:
        W = _T(V) @ gV
        core = core + Sc * (W - _T(W)) * Fg
    m, n = U.shape[-2], Vh.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        if m > n and du:
            gUS = gU / Sr
            return (U @ core + gUS - U @ (_T(U) @ gUS)) @ Vh
        if m < n and dv:
            gVS = gV / Sr
            return U @ (core @ Vh + _T(gVS) - (_T(gVS) @ V) @ Vh)
    return U @ core @ Vh


def _svd_batched_reverse(xs, y, G, ints, f, needs):
    return [_svd_reverse_np(*_svd_split(y, ints), *_svd_split(G, ints, (len(G),)))]


def _svd_curvature(xs, y, ts, ty, g, ints, f, needs):
    U, S, Vh = _svd_split(y, ints)
    gs = _svd_split(g, ints)
    dU, dS, dVh = _svd_split(ty, ints, (len(ty),))
    return [_moved(lambda U, S, Vh: _svd_reverse_np(U, S, Vh, *gs), (U, dU), (S, dS), (Vh, dVh))]


_SVD = _h.host_op("linalg_svd", "LinalgSvdBackward0", _svd_fwd, _svd_rev, _h.SAVE_OUT,
                  forward_mode=(_svd_tangent, _svd_batched_reverse, _svd_curvature))

SvdResult = collections.namedtuple("svd", ["U", "S", "Vh"])


def svd(A, full_matrices=True, *, driver=None, out=None):
    _out_refused(out, "svd")
    _float_input(A, "linalg.svd")
    _matrices(A, "linalg.svd")
    ints = (int(bool(full_matrices)),) + A.shape
    y = _h.record(_SVD, [A], _svd_fwd([A._data], ints, None), ints)
    return SvdResult(*_parts(y, _svd_shapes(A.shape, bool(full_matrices)), "LinalgSvdBackward0"))


def svdvals(A, *, driver=None, out=None):
    _out_refused(out, "svdvals")
    _float_input(A, "linalg.svdvals")
    _matrices(A, "linalg.svdvals")
    if not A.requires_grad:
        return Tensor._wrap(np.linalg.svd(A._data, compute_uv=False))
    return svd(A, full_matrices=False).S


# -- qr ------------------------------------------------------------------------------------
_QR_MODES = ("reduced", "complete", "r")


def _qr_shapes(shape, mode):
    m, n = shape[-2:]
    k = min(m, n)
    b = tuple(shape[:-2])
    if mode == 1:
        return [b + (m, m), b + (m, n)]
    return [b + (m, k), b + (k, n)]


def _qr_fwd(xs, ints, f):
    Q, R = np.linalg.qr(xs[0], mode="complete" if ints[0] == 1 else "reduced")
    return np.concatenate([Q.ravel(), R.ravel()])


# The reverse rule is written once, for tensors (the reverse, differentiable) and for arrays
# (forward mode: K adjoints, and the complex step): these few operations take either.
def _tril(a, k=0):
    return np.tril(a, k) if isinstance(a, np.ndarray) else F.tril(a, k)


def _triu(a, k=0):
    return np.triu(a, k) if isinstance(a, np.ndarray) else F.triu(a, k)


def _diag_part(M):
    """The diagonal of M's last two axes, as a diagonal matrix."""
    if isinstance(M, np.ndarray):
        return np.diagonal(M, 0, -2, -1)[..., None] * np.eye(M.shape[-1])
    return F.diag_embed(F.diagonal(M, 0, -2, -1))


def _right_solve(b, R):
    """b R^-1 for square R (complex values too, for ``_moved``)."""
    return _T(np.linalg.solve(_T(R), _T(b)))


def _solve_tri(M, b, upper, left, unit=False):
    """M^-1 b (``left``) or b M^-1 for a triangular M (``upper`` or lower)."""
    if isinstance(b, np.ndarray):
        return np.linalg.solve(M, b) if left else _right_solve(b, M)
    return solve_triangular(M, b, upper=upper, left=left, unitriangular=unit)


def _last(a, start, n):
    """Columns ``start`` to ``start + n`` (the last axis)."""
    return a[..., start:start + n] if isinstance(a, np.ndarray) else F.narrow(a, -1, start, n)


def _cat_last(parts):
    return np.concatenate(parts, -1) if isinstance(parts[0], np.ndarray) else F.cat(parts, -1)


def _qr_square_deep(Q, R, gQ, gR):
    """gA of A = QR, m >= n (TensorFlow's and PyTorch's rule): with
    M = R gR^T - gQ^T Q, gA = (gQ + Q copyltu(M)) R^{-T}."""
    M = R @ _T(gR) - _T(gQ) @ Q
    low = _tril(M, -1)
    b = gQ + Q @ (low + _T(low) + _diag_part(M))
    return _solve_tri(_T(R), b, upper=False, left=False)


def _qr_reverse(A, Q, R, gQ, gR):
    m, n = A.shape[-2:]
    if m >= n:
        return _qr_square_deep(Q, R, gQ, gR)
    # wide: A = [X | Y], R = [U | V], X = Q U (square), Y = Q V
    gV = _last(gR, m, n - m)
    gX = _qr_square_deep(Q, _last(R, 0, m), gQ + _last(A, m, n - m) @ _T(gV), _last(gR, 0, m))
    return _cat_last([gX, Q @ gV])


def _qr_rev(xs, y, g, ints, f, needs):
    mode = ints[0]
    shape = tuple(ints[1:])
    m, n = shape[-2:]
    if mode == 2:
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
                           "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    if mode == 1 and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    Q, R = _parts(y, _qr_shapes(shape, mode))
    gQ, gR = _parts(g, _qr_shapes(shape, mode))
    return [_qr_reverse(xs[0], Q, R, gQ, gR)]


# forward mode (reduced, or complete of a square or wide A; mode='r' and complete of a tall
# A have no derivative, as in the reverse rule): for m >= n, with X = Q^T dA R^-1 and
# O = tril(X, -1) - tril(X, -1)^T, dR = (X - O) R and dQ = dA R^-1 - Q (X - O); a wide
# A = [X | Y] is the square QR of X and V = Q^T Y.  The reverse rule (the same as
# ``_qr_rev``, on arrays) moves by the complex step.
def _qr_split(y, ints, lead=()):
    mode, shape = ints[0], tuple(ints[1:])
    m, n = shape[-2:]
    if mode == 2 or (mode == 1 and m > n):
        raise NoForwardRule.named("LinalgQrBackward0")
    return _split(y, _qr_shapes(shape, mode), lead)


def _qr_tangent_square_deep(Q, R, dA):
    X = _T(Q) @ _right_solve(dA, R)
    low = np.tril(X, -1)
    up = X - (low - _T(low))                   # X - O: upper triangular
    return _right_solve(dA, R) - Q @ up, up @ R


def _qr_tangent(xs, y, ts, ints, f):
    Q, R = _qr_split(y, ints)
    dA = ts[0]
    m, n = dA.shape[-2:]
    if m >= n:
        dQ, dR = _qr_tangent_square_deep(Q, R, dA)
    else:
        Y = xs[0][..., m:]
        dQ, dU = _qr_tangent_square_deep(Q, R[..., :m], dA[..., :m])
        dR = np.concatenate([dU, _T(dQ) @ Y + _T(Q) @ dA[..., m:]], -1)
    K = len(dA)
    return np.concatenate([dQ.reshape(K, -1), dR.reshape(K, -1)], 1)


def _qr_batched_reverse(xs, y, G, ints, f, needs):
    Q, R = _qr_split(y, ints)
    gQ, gR = _qr_split(G, ints, (len(G),))
    return [_qr_reverse(xs[0], Q, R, gQ, gR)]


def _qr_curvature(xs, y, ts, ty, g, ints, f, needs):
    Q, R = _qr_split(y, ints)
    gQ, gR = _qr_split(g, ints)
    dQ, dR = _qr_split(ty, ints, (len(ty),))
    return [_moved(lambda A, Q, R: _qr_reverse(A, Q, R, gQ, gR), (xs[0], ts[0]), (Q, dQ), (R, dR))]


_QR = _h.host_op("linalg_qr", "LinalgQrBackward0", _qr_fwd, _qr_rev, _h.SAVE_A | _h.SAVE_OUT,
                 forward_mode=(_qr_tangent, _qr_batched_reverse, _qr_curvature))

QrResult = collections.namedtuple("qr", ["Q", "R"])


def qr(A, mode="reduced", *, out=None):
    _out_refused(out, "qr")
    _float_input(A, "linalg.qr")
    _matrices(A, "linalg.qr")
    if mode not in _QR_MODES:
        raise RuntimeError("qr received unrecognized mode '%s' but expected one of 'reduced' (default), 'r', or "
                           "'complete'" % mode)
    code = _QR_MODES.index(mode)
    ints = (code,) + A.shape
    y = _h.record(_QR, [A], _qr_fwd([A._data], ints, None), ints)
    Q, R = _parts(y, _qr_shapes(A.shape, code), "LinalgQrBackward0")
    if code == 2:
        Q = Tensor._wrap(np.zeros(0, A.dtype))
    return QrResult(Q, R)


# -- matrix_exp ----------------------------------------------------------------------------
def _expm_fwd(xs, ints, f):
    from scipy.linalg import expm
    A = xs[0]
    return np.asarray(expm(A), A.dtype) if A.size else A.copy()


def _expm_rev(xs, y, g, ints, f, needs):
    # the adjoint of exp at A is the upper-right block of exp([[A^T, G], [0, A^T]])
    At = _mT(xs[0])
    n = At.shape[-1]
    top = F.cat([At, g], -1)
    bottom = F.cat([_const(np.zeros(At.shape, g.dtype)), At], -1)
    big = matrix_exp(F.cat([top, bottom], -2))
    return [F.narrow(F.narrow(big, -2, 0, n), -1, n, n)]


# forward mode, by block matrices (Higham's Frechet derivatives): the tangent L(A, E) is
# the upper-right block of exp([[A, E], [0, A]]); the adjoint L(A^T, g) moves along E
# with the second derivative L2(A^T; E^T, g), the corner block of exp([[X, E1, 0], [0, X, E2],
# [0, 0, X]]) summed over both orders of E1 = E^T and E2 = g.
def _expm_corner(X, *Es):
    """The upper-right n x n block of exp of the block bidiagonal matrix with X on the
    diagonal and ``Es`` above it (leading axes broadcast)."""
    from scipy.linalg import expm
    n, b = X.shape[-1], len(Es) + 1
    lead = np.broadcast_shapes(X.shape[:-2], *(E.shape[:-2] for E in Es))
    big = np.zeros(lead + (b * n, b * n))
    for i in range(b):
        big[..., i * n:(i + 1) * n, i * n:(i + 1) * n] = X
    for i, E in enumerate(Es):
        big[..., i * n:(i + 1) * n, (i + 1) * n:(i + 2) * n] = E
    return expm(big)[..., :n, -n:] if n else np.zeros(lead + (0, 0))


_MATRIX_EXP = _h.host_op("linalg_matrix_exp", "LinalgMatrixExpBackward0", _expm_fwd, _expm_rev, _h.SAVE_A,
                         forward_mode=(
    lambda xs, y, ts, ints, f: _expm_corner(xs[0], ts[0]),
    lambda xs, y, G, ints, f, needs: [_expm_corner(_T(xs[0]), G)],
    lambda xs, y, ts, ty, g, ints, f, needs: [_expm_corner(_T(xs[0]), _T(ts[0]), g)
                                              + _expm_corner(_T(xs[0]), g, _T(ts[0]))]))


def matrix_exp(A):
    _float_input(A, "linalg.matrix_exp")
    _square(A, "linalg.matrix_exp")
    return _h.record(_MATRIX_EXP, [A], _expm_fwd([A._data], (), None))


# -- pinv ----------------------------------------------------------------------------------
def _pinv_fwd(xs, ints, f):
    A = xs[0]
    hermitian = bool(ints[0])
    atol, rtol = f
    m, n = A.shape[-2:]
    if A.size == 0:
        return np.zeros(A.shape[:-2] + (n, m), A.dtype)
    if rtol < 0:
        rtol = np.finfo(A.dtype).eps * max(m, n) if atol <= 0 else 0.0
    atol = max(atol, 0.0)
    if hermitian:
        w, V = np.linalg.eigh(A)
        s = np.abs(w)
        tol = np.maximum(atol, rtol * s.max(-1, keepdims=True))
        winv = np.where(s > tol, 1.0 / np.where(s > tol, w, 1), 0).astype(A.dtype)
        return (V * winv[..., None, :]) @ np.swapaxes(V, -1, -2)
    U, S, Vh = np.linalg.svd(A, full_matrices=False)
    tol = np.maximum(atol, rtol * S.max(-1, keepdims=True))
    Sinv = np.where(S > tol, 1.0 / np.where(S > tol, S, 1), 0).astype(A.dtype)
    return (np.swapaxes(Vh, -1, -2) * Sinv[..., None, :]) @ np.swapaxes(U, -1, -2)


def _pinv_reverse(A, P, g):
    """gA of P = A^+ (PyTorch's rule), on tensors (the reverse rule, differentiable) or
    arrays (forward mode: K adjoints, and the complex step)."""
    m, n = A.shape[-2:]
    Ph, gh = _T(P), _T(g)
    if m <= n:
        K = gh @ P
        KPh = K @ Ph
        return -_T(P @ K) + KPh - A @ P @ KPh + Ph @ P @ (gh - K @ A)
    K = P @ gh
    PhK = Ph @ K
    return -_T(K @ P) + (gh - A @ K) @ P @ Ph + PhK - PhK @ P @ A


def _pinv_rev(xs, P, g, ints, f, needs):
    return [_pinv_reverse(xs[0], P, g)]


# forward mode (P = A^+ of constant rank, as the reverse rule assumes):
#   dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P;
# the reverse rule, a polynomial in A and P, moves by the complex step (``_moved``).
def _pinv_tangent(xs, P, ts, ints, f):
    A, dA = xs[0], ts[0]
    dAt = _T(dA)
    return (-P @ dA @ P + P @ _T(P) @ (dAt - dAt @ A @ P) + (dAt - P @ A @ dAt) @ _T(P) @ P)


_PINV = _h.host_op("linalg_pinv", "LinalgPinvBackward0", _pinv_fwd, _pinv_rev, _h.SAVE_A | _h.SAVE_OUT,
                   forward_mode=(_pinv_tangent, lambda xs, P, G, ints, f, needs: [_pinv_reverse(xs[0], P, G)],
                                 lambda xs, P, ts, tP, g, ints, f, needs: [
                                     _moved(lambda A, P: _pinv_reverse(A, P, g), (xs[0], ts[0]), (P, tP))]))


def _tol(v, name):
    if v is None:
        return -1.0
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise NotImplementedError("tapegrad.linalg.pinv: %s must be a number or a one-element tensor" % name)
        v = v.item()
    return float(v)


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    _out_refused(out, "pinv")
    _float_input(A, "linalg.pinv")
    _matrices(A, "linalg.pinv")
    ints, fl = (int(bool(hermitian)),), (_tol(atol, "atol"), _tol(rtol, "rtol"))
    return _h.record(_PINV, [A], _pinv_fwd([A._data], ints, fl), ints, fl)


# -- lstsq: a composition of qr and solve_triangular (full-rank A) -----------------------------
LstsqResult = collections.namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    fname = "torch.linalg.lstsq"
    _float_input(A, "linalg.lstsq")
    _float_input(B, "linalg.lstsq", "B")
    if A.ndim < 2:
        raise RuntimeError("%s: input must have at least 2 dimensions." % fname)
    if driver is not None and driver not in _DRIVERS:
        raise RuntimeError("%s: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)" % fname)
    if A.dtype != B.dtype:
        raise RuntimeError("%s: Expected input and other to have the same dtype, but got input's dtype %s and "
                           "other's dtype %s" % (fname, torch_name(A.dtype), torch_name(B.dtype)))
    vector = B.ndim == A.ndim - 1
    if vector:
        B = F.unsqueeze(B, -1)
    if B.shape[-2] != A.shape[-2]:
        raise RuntimeError("%s: input.size(-2) should match other.size(-2)" % fname)
    A, B = _broadcast_batches(fname, A, B)
    m, n = A.shape[-2:]
    if m >= n:
        Q, R = qr(A)
        X = solve_triangular(R, F.matmul(_mT(Q), B), upper=True)
    else:
        Q, R = qr(_mT(A))
        X = F.matmul(Q, solve_triangular(_mT(R), B, upper=False))
    rank = Tensor._wrap(np.asarray(np.linalg.matrix_rank(A._data), np.int64)) if A.size else \
        Tensor._wrap(np.zeros(A.shape[:-2], np.int64))
    driver = driver or "gelsy"
    empty = Tensor._wrap(np.zeros(0, A.dtype))
    residuals, sv = empty, empty
    if driver in ("gelsd", "gelss"):
        sv = svdvals(A)
    if driver != "gelsy" and m > n:
        rec = _tp.state().rec if _tp.recording[0] else None
        if rec is not None:     # (a replay would keep this call's choice for another A)
            rec.refuse("linalg.lstsq with driver %r computes residuals only where A has full rank, a choice "
                       "made from A's values" % driver)
    if driver != "gelsy" and m > n and bool(np.all(rank._data == n)):
        r = F.matmul(A, X) - B
        residuals = F.sum(r * r, -2)
        if vector:
            residuals = F.squeeze(residuals, -1)
    if vector:
        X = F.squeeze(X, -1)
    return LstsqResult(X, residuals, rank, sv)


# -- norms ---------------------------------------------------------------------------------
@_quiet.wrap     # (a square that overflows is inf, without NumPy's warning: core/quiet.py)
def _vnorm_np(x, p, axes, keepdim):
    a = np.abs(x)
    if p == _INF:
        r = a.max(axis=axes, keepdims=keepdim)
    elif p == -_INF:
        r = a.min(axis=axes, keepdims=keepdim)
    elif p == 0:
        r = (a != 0).sum(axis=axes, keepdims=keepdim).astype(x.dtype)
    elif p == 1:
        r = a.sum(axis=axes, keepdims=keepdim)
    elif p == 2:
        r = np.sqrt((a * a).sum(axis=axes, keepdims=keepdim))
    else:
        r = (a ** p).sum(axis=axes, keepdims=keepdim) ** (1.0 / p)
    return np.asarray(r, x.dtype)


def _vnorm_fwd(xs, ints, f):
    return _vnorm_np(xs[0], f[0], tuple(ints[1:]), bool(ints[0]))


def _vnorm_rev(xs, y, g, ints, f, needs):
    x = xs[0]
    p = f[0]
    keepdim, axes = bool(ints[0]), tuple(ints[1:])
    if not keepdim:
        for d in sorted(axes):
            g = F.unsqueeze(g, d)
            y = F.unsqueeze(y, d)
    zero = _const(np.zeros((), x.dtype))
    one = _const(np.ones((), x.dtype))
    if p == 0:
        return [x * zero]
    if p == 1:
        return [F.sign(x) * g]
    at0 = y == 0
    ysafe = F.where(at0, one, y)
    if p == 2:
        return [x * F.where(at0, zero, g / ysafe)]
    if math.isinf(p):
        mask = F.where(F.abs(x) == y, one, zero)
        count = F.sum(mask, list(axes), keepdim=True)
        return [F.sign(x) * (g / count) * mask]
    ax = F.abs(x)
    if p < 1:
        xz = x == 0
        pw = F.pow(F.where(xz, one, ax), p - 1)
        return [F.where(xz, zero, F.sign(x) * pw * g * F.pow(ysafe, 1 - p))]
    if p < 2:
        return [F.sign(x) * F.pow(ax, p - 1) * F.where(at0, zero, g / F.pow(ysafe, p - 1))]
    return [x * F.pow(ax, p - 2) * F.where(at0, zero, g / F.pow(ysafe, p - 1))]


# forward mode: dy = sum(w dx) over the reduced axes, with w = dy/dx the reverse rule's
# weights (x / y for the 2-norm, sign(x) |x|^(p-1) y^(1-p) for order p; sign(x) for 1, the
# extrema shared among ties for +-inf, 0 for 0; 0 where y is 0 as in the reverse rule).  The
# adjoint w g moves with x and y for finite p other than 0 and 1; w is piecewise constant else.
def _vnorm_parts(x, y, ints, f):
    """(axes, y kept over them, the weights w, p): as the reverse rule."""
    p = f[0]
    axes = tuple(sorted(ints[1:]))
    if not ints[0]:
        y = np.expand_dims(y, axes)
    at0 = y == 0
    ys = np.where(at0, 1.0, y)
    ax = np.abs(x)
    with np.errstate(all="ignore"):
        if p == 0:
            w = np.zeros(x.shape)
        elif p == 1:
            w = np.sign(x)
        elif p == 2:
            w = np.where(at0, 0.0, x / ys)
        elif math.isinf(p):
            mask = ax == y
            w = np.sign(x) * mask / mask.sum(axis=axes, keepdims=True)
        else:
            w = np.where(at0 | (x == 0), 0.0, np.sign(x) * ax ** (p - 1) * ys ** (1 - p))
    return axes, y, ys, at0, w, p


def _vnorm_tangent(xs, y, ts, ints, f):
    axes, _, _, _, w, _ = _vnorm_parts(xs[0], y, ints, f)
    dy = (w * ts[0]).sum(axis=tuple(a + 1 for a in axes), keepdims=True)
    return dy if ints[0] else np.squeeze(dy, tuple(a + 1 for a in axes))


def _vnorm_batched_reverse(xs, y, G, ints, f, needs):
    axes, _, _, _, w, _ = _vnorm_parts(xs[0], y, ints, f)
    if not ints[0]:
        G = np.expand_dims(G, tuple(a + 1 for a in axes))
    return [w * G]


def _vnorm_curvature(xs, y, ts, ty, g, ints, f, needs):
    axes, y, ys, at0, w, p = _vnorm_parts(xs[0], y, ints, f)
    if p in (0, 1) or math.isinf(p):
        return [None]
    if not ints[0]:
        g, ty = np.expand_dims(g, axes), np.expand_dims(ty, tuple(a + 1 for a in axes))
    x, t = xs[0], ts[0]
    with np.errstate(all="ignore"):
        if p == 2:
            d = t / ys - x * ty / (ys * ys)
        else:       # d(sign(x) |x|^(p-1) y^(1-p)): |x|^(p-2) is infinite at 0 for p < 2, as in the double backward
            d = (p - 1) * np.abs(x) ** (p - 2) * t / ys ** (p - 1) - (p - 1) * w * ty / ys
            if p < 1:
                d = np.where(x == 0, 0.0, d)
    return [np.where(at0, 0.0, g * d)]


_VECTOR_NORM = _h.host_op("linalg_vector_norm", "LinalgVectorNormBackward0", _vnorm_fwd, _vnorm_rev,
                          _h.SAVE_A | _h.SAVE_OUT,
                          forward_mode=(_vnorm_tangent, _vnorm_batched_reverse, _vnorm_curvature))


def _dims(dim, ndim, fname):
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool):
        dim = (dim,)
    out = []
    for d in dim:
        d = int(d)
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)"
                             % (-max(ndim, 1), max(ndim, 1) - 1, d))
        d %= max(ndim, 1)
        if d in out:
            raise RuntimeError("dim %d appears multiple times in the list of dims" % d)
        out.append(d)
    return tuple(out)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    _out_refused(out, "vector_norm")
    if isinstance(ord, str) or isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise TypeError("linalg_vector_norm(): argument 'ord' must be Number, not %s" % type(ord).__name__)
    _float_input(x, "linalg.vector_norm", "input")
    if dtype is not None:
        x = F.to_dtype(x, dtype)
    p = float(ord)
    if x.ndim == 0:
        x = F.reshape(x, (1,))
        axes = (0,)
        keep = False
    else:
        axes = _dims(dim, x.ndim, "linalg.vector_norm")
        if not axes and dim is not None:
            axes = tuple(range(x.ndim))
        keep = bool(keepdim)
    if math.isinf(p) and any(x.shape[d] == 0 for d in axes):
        raise RuntimeError("linalg.vector_norm cannot compute the %s norm on an empty tensor because the operation "
                           "does not have an identity" % ("inf" if p > 0 else "-inf"))
    ints = (int(keep),) + axes
    return _h.record(_VECTOR_NORM, [x], _vnorm_fwd([x._data], ints, (p, 0.0)), ints, (p, 0.0))


_MATRIX_ORDS = ("fro", "nuc", _INF, -_INF, 1, -1, 2, -2)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    _out_refused(out, "matrix_norm")
    fname = "linalg.matrix_norm"
    _float_input(A, fname)
    _matrices(A, fname)
    if dtype is not None:
        A = F.to_dtype(A, dtype)
    d = tuple(dim)
    if len(d) != 2:
        raise RuntimeError("%s: dim must be a 2-tuple. Got %s" % (fname, " ".join(str(v) for v in d)))
    d0, d1 = (_dims((v,), A.ndim, fname)[0] for v in d)
    if d0 == d1:
        raise RuntimeError("%s: dims must be different. Got (%d, %d)" % (fname, d[0], d[1]))
    if ord not in _MATRIX_ORDS:
        raise RuntimeError("%s: Order %s not supported." % (fname, ord))
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        B = F.movedim(A, (d0, d1), (-2, -1))
        s = svdvals(B)
        r = F.sum(s, -1) if ord == "nuc" else (F.amax(s, -1) if ord == 2 else F.amin(s, -1))
        if keepdim:
            for v in sorted((d0, d1)):
                r = F.unsqueeze(r, v)
        return r
    # 1, -1: over columns of the column sums (dim d0 summed); inf, -inf: over rows
    sum_dim, ext_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
    s = F.sum(F.abs(A), sum_dim, keepdim=True)
    r = F.amax(s, ext_dim, keepdim=True) if ord in (1, _INF) else F.amin(s, ext_dim, keepdim=True)
    if not keepdim:
        r = F.squeeze(F.squeeze(r, max(d0, d1)), min(d0, d1))
    return r


def norm(input, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    _out_refused(out, "norm")
    A = input
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) == 1:
            return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        raise RuntimeError("linalg.norm: If dim is specified, it must be of length 1 or 2. Got %s" % list(dim))
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim not in (1, 2):
        raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got %dD."
                           % A.ndim)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)


# -- matrix_power, multi_dot: products ------------------------------------------------------
def matrix_power(A, n, *, out=None):
    _out_refused(out, "matrix_power")
    if not isinstance(A, Tensor):
        raise TypeError("linalg_matrix_power(): argument 'input' must be Tensor, not %s" % type(A).__name__)
    _square(A, "linalg.matrix_power")
    n = int(n)
    if n == 0:
        return Tensor._wrap(np.ascontiguousarray(np.broadcast_to(np.eye(A.shape[-1], dtype=A.dtype), A.shape)))
    if n < 0:
        A = inv(A)
        n = -n
    result, base = None, A
    while True:
        if n & 1:
            result = base if result is None else F.matmul(result, base)
        n >>= 1
        if not n:
            return result
        base = F.matmul(base, base)


def multi_dot(tensors, *, out=None):
    _out_refused(out, "multi_dot")
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got %d" % len(ts))
    for i, t in enumerate(ts):
        if t.dtype != ts[0].dtype:
            raise RuntimeError("multi_dot(): all tensors must have be the same dtype but tensor 0 is %s and tensor "
                               "%d %s" % (_cname(ts[0].dtype), i, _cname(t.dtype)))
    first, last = ts[0].ndim, ts[-1].ndim
    if first not in (1, 2):
        raise RuntimeError("multi_dot(): the first tensor must be 1D or 2D but got %dD" % first)
    if last not in (1, 2):
        raise RuntimeError("multi_dot(): the last tensor must be 1D or 2D but got %dD" % last)
    for i, t in enumerate(ts[1:-1], 1):
        if t.ndim != 2:
            raise RuntimeError("multi_dot(): tensor %d must be 2D but got %dD" % (i, t.ndim))
    if first == 1:
        ts[0] = F.unsqueeze(ts[0], 0)
    if last == 1:
        ts[-1] = F.unsqueeze(ts[-1], -1)
    for i in range(len(ts) - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise RuntimeError("multi_dot(): tensors %d and %d with shapes %s and %s cannot be multiplied"
                               % (i, i + 1, list(tensors[i].shape), list(tensors[i + 1].shape)))
    r = _chain(ts)
    if first == 1:
        r = F.squeeze(r, 0)
    if last == 1:
        r = F.squeeze(r, -1)
    return r


def _cname(dt):
    return {"Double": "double", "Float": "float", "Half": "c10::Half", "Long": "long int", "Int": "int"}.get(
        torch_name(dt), torch_name(dt).lower())


def _chain(ts):
    """The product of the matrices ``ts`` in the order of fewest multiplications."""
    n = len(ts)
    if n == 2:
        return F.matmul(ts[0], ts[1])
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def prod(i, j):
        if i == j:
            return ts[i]
        k = split[i][j]
        return F.matmul(prod(i, k), prod(k + 1, j))
    return prod(0, n - 1)


# -- lu_factor, lu_solve --------------------------------------------------------------------
def _lu_np(A):
    """(LU, pivots: LAPACK's 1-based int32, per matrix) of ``A`` (..., m, n)."""
    getrf = _lapack("getrf", A)
    fl = _flat_batches(A)
    lu = np.empty_like(fl)
    piv = np.empty((fl.shape[0], min(A.shape[-2:])), np.int32)
    infos = np.zeros(fl.shape[0], np.int64)
    for i, m in enumerate(fl):
        f, p, info = getrf(m)
        lu[i], piv[i], infos[i] = f, p + 1, info
    return lu.reshape(A.shape), piv.reshape(A.shape[:-2] + (piv.shape[-1],)), infos


def _permutation(piv, m):
    """The permutation matrices P (A = P L U) of LAPACK's 1-based pivots (..., k)."""
    fl = piv.reshape(-1, piv.shape[-1])
    out = np.empty((fl.shape[0], m, m))
    for b, p in enumerate(fl):
        perm = np.arange(m)
        for i, j in enumerate(p - 1):
            perm[i], perm[j] = perm[j], perm[i]
        P = np.zeros((m, m))
        P[perm, np.arange(m)] = 1.0     # row perm[i] of A is row i of L U
        out[b] = P
    return out.reshape(piv.shape[:-1] + (m, m))


def _unpack(LU):
    """(L with its unit diagonal, U) of packed factors, tensors or arrays."""
    eye = np.eye(LU.shape[-1], dtype=LU.dtype)
    return _tril(LU, -1) + (eye if isinstance(LU, np.ndarray) else _const(eye)), _triu(LU)


def _lu_checked(A):
    """(LU, pivots) of ``A``, or PyTorch's error where U has a zero on its diagonal (in the
    host op's forward: a replay checks too)."""
    lu, piv, infos = _lu_np(A)
    bad = np.flatnonzero(infos)
    if bad.size:
        i = int(infos[bad[0]])
        raise RuntimeError("torch.linalg.lu_factor: %sU[%d,%d] is zero and using it on lu_solve would result in a "
                           "division by zero. If you still want to perform the factorization, consider calling "
                           "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
                           % (_batch_note(A, int(bad[0])), i, i))
    return lu, piv


def _luf_fwd(xs, ints, f):
    return _lu_checked(xs[0])[0]


def _luf_rev(xs, LU, g, ints, f, needs):
    m, n = LU.shape[-2:]
    if m != n:
        raise NotImplementedError("tapegrad: the gradient of linalg.lu_factor is implemented for square matrices")
    # the pivots from A's value now, not the recording's: a replayed tape's A may pivot otherwise
    piv = _lu_np(np.asarray(xs[0]._data))[1]
    P = _const(_permutation(piv, n).astype(LU.dtype))
    return [_luf_reverse(P, *_unpack(LU), g)]


def _luf_reverse(P, L, U, g):
    """gA of A = P L U (PyTorch's rule), on tensors or arrays (as ``_qr_reverse``)."""
    gA = _tril(_T(L) @ _tril(g, -1), -1) + _triu(_triu(g) @ _T(U))
    gA = _solve_tri(_T(U), gA, upper=False, left=False)
    return P @ _solve_tri(_T(L), gA, upper=True, left=True, unit=True)


# forward mode (square A = P L U, the pivots of A's value): with X = L^-1 P^T dA U^-1,
# dL = L tril(X, -1) and dU = triu(X) U, packed as LU is.  The reverse rule on arrays moves
# by the complex step (the pivots stay).
def _lu_parts(A, LU):
    if LU.shape[-2] != LU.shape[-1]:
        raise NoForwardRule.named("LinalgLuFactorExBackward0")     # (no gradient either way)
    return (_permutation(_lu_np(np.asarray(A))[1], LU.shape[-1]),) + _unpack(LU)


def _luf_tangent(xs, LU, ts, ints, f):
    P, L, U = _lu_parts(xs[0], LU)
    X = _right_solve(np.linalg.solve(L, _T(P) @ ts[0]), U)
    return L @ np.tril(X, -1) + np.triu(X) @ U


_LU_FACTOR = _h.host_op("linalg_lu_factor", "LinalgLuFactorExBackward0", _luf_fwd, _luf_rev,
                        _h.SAVE_A | _h.SAVE_OUT, forward_mode=(
    _luf_tangent,
    lambda xs, LU, G, ints, f, needs: [_luf_reverse(*_lu_parts(xs[0], LU), G)],
    lambda xs, LU, ts, tLU, g, ints, f, needs: [
        _moved(lambda M: _luf_reverse(_lu_parts(xs[0], LU)[0], *_unpack(M), g), (LU, tLU))]))

LuFactorResult = collections.namedtuple("lu_factor", ["LU", "pivots"])


def lu_factor(A, *, pivot=True, out=None):
    _out_refused(out, "lu_factor")
    if A.ndim < 2:
        raise RuntimeError("torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: %s instead"
                           % list(A.shape))
    _float_input(A, "linalg.lu_factor")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu, piv = _lu_checked(A._data)
    return LuFactorResult(_h.record(_LU_FACTOR, [A], lu), Tensor._wrap(piv))


def _lus_fwd(xs, ints, f):
    LU, B, piv = xs
    from scipy.linalg import lu_solve as _sp_lu_solve
    trans = ints[0]
    L3, B3 = _flat_batches(LU), _flat_batches(B)
    p3 = piv.reshape(-1, piv.shape[-1]).astype(np.int64) - 1
    out = np.empty(B3.shape, np.result_type(LU.dtype, B.dtype))
    for i in range(B3.shape[0]):
        out[i] = _sp_lu_solve((L3[i], p3[i]), B3[i], trans=trans, check_finite=False)
    return out.reshape(B.shape)


def _lus_rev(xs, X, g, ints, f, needs):
    LU, _, piv = xs
    adjoint = bool(ints[0])
    gB = _lu_solve(LU, piv, g, not adjoint)
    gLU = None
    if needs[0]:
        P = _const(_permutation(piv._data.astype(np.int32), LU.shape[-1]).astype(LU.dtype))
        gLU = _lus_adjoint_LU(P, *_unpack(LU), X, gB, adjoint)
    return [gLU, gB, None]


def _lus_adjoint_LU(P, L, U, X, gB, adjoint):
    """gLU of op(P L U) X = B, packed as LU, from B's adjoint (on tensors or arrays)."""
    PtgA = _T(P) @ -(X @ _T(gB) if adjoint else gB @ _T(X))
    return _tril(PtgA @ _T(U), -1) + _triu(_T(L) @ PtgA)


# forward mode: with A = P L U and op(A) X = B (op: the transpose for ``adjoint``),
# dX = op(A)^-1 (dB - op(dA) X), dA = P (dL U + L dU) from the packed dLU; the reverse rule
# on arrays moves by the complex step (the pivots are a constant input).
def _lus_system(LU, piv):
    return (_permutation(np.asarray(piv).astype(np.int32), LU.shape[-1]),) + _unpack(LU)


def _lus_tangent(xs, X, ts, ints, f):
    (LU, _, piv), (tLU, tB, _) = xs, ts
    P, L, U = _lus_system(LU, piv)
    A = P @ L @ U
    op = _T if ints[0] else (lambda M: M)
    rhs = 0.0 if tB is None else tB
    if tLU is not None:
        rhs = rhs - op(P @ (np.tril(tLU, -1) @ U + L @ np.triu(tLU))) @ X
    return np.linalg.solve(op(A), rhs + np.zeros(X.shape))


def _lus_reverse_np(LU, piv, X, g, adjoint, needs):
    P, L, U = _lus_system(LU, piv)
    A = P @ L @ U
    gB = np.linalg.solve(A if adjoint else _T(A), g)
    return [_lus_adjoint_LU(P, L, U, X, gB, adjoint) if needs[0] else None, gB, None]


def _lus_curvature(xs, X, ts, tX, g, ints, f, needs):
    (LU, _, piv), tLU = xs, ts[0]
    tLU = np.zeros((len(tX),) + LU.shape) if tLU is None else tLU
    return _moved(lambda M, Y: _lus_reverse_np(M, piv, Y, g, bool(ints[0]), needs), (LU, tLU), (X, tX))


_LU_SOLVE = _h.host_op("linalg_lu_solve", "LinalgLuSolveBackward0", _lus_fwd, _lus_rev,
                       _h.SAVE_A | _h.SAVE_C | _h.SAVE_OUT, forward_mode=(
    _lus_tangent,
    lambda xs, X, G, ints, f, needs: _lus_reverse_np(xs[0], xs[2], X, G, bool(ints[0]), needs),
    _lus_curvature))


def _lu_solve(LU, pivots, B, adjoint):
    """``op(A) X = B`` for A = P L U (op: transpose with ``adjoint``), one batch shape."""
    ints = (int(bool(adjoint)),)
    return _h.record(_LU_SOLVE, [LU, B, pivots], _lus_fwd([LU._data, B._data, pivots._data], ints, None), ints)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    _out_refused(out, "lu_solve")
    fname = "linalg.lu_solve"
    _float_input(LU, fname, "LU")
    _float_input(B, fname, "B")
    _square(LU, fname, "LU")
    _matrices(B, fname, "B")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError("%s: Incompatible shapes of A and B for the equation %s (%dx%d and %dx%d)"
                           % (fname, "AX = B" if left else "XA = B", n, n, B.shape[-2], B.shape[-1]))
    if pivots.dtype != np.int32:
        raise RuntimeError("%s: pivots should be a Tensor of scalar type int32. Got: %s"
                           % (fname, torch_name(pivots.dtype)))
    if not left:        # X op(A) = B  <=>  op(A)^T X^T = B^T
        B = _mT(B)
        adjoint = not adjoint
    LU, B = _broadcast_batches(fname, LU, B)
    if pivots.shape[:-1] != LU.shape[:-2]:
        pivots = Tensor._wrap(np.ascontiguousarray(np.broadcast_to(pivots._data, LU.shape[:-2] + (n,))))
    X = _lu_solve(LU, pivots, B, adjoint)
    return X if left else _mT(X)


# -- the torch.* spellings and the Tensor methods -------------------------------------------
def _det(input):
    return det(input)


def _slogdet(input):
    return slogdet(input)


def _logdet(input):
    """``log(det(A))``: nan for a negative determinant, -inf for a singular matrix.  As
    PyTorch's (real input), logabsdet where the sign is not -1: no gradient where it is
    nan."""
    sign, logabsdet = slogdet(input)
    return F.where(sign == -1, float("nan"), logabsdet)


def _inverse(input, *, out=None):
    return inv(input, out=out)


def _matrix_power(input, n, *, out=None):
    return matrix_power(input, n, out=out)


def _matrix_exp(A):
    return matrix_exp(A)


def _pinverse(input, rcond=1e-15):
    return pinv(input, rtol=rcond)


for _f in (_det, _slogdet, _logdet, _inverse, _matrix_power, _matrix_exp, _pinverse):
    _f.__name__ = _f.__qualname__ = _f.__name__[1:]
# tg.det, tg.inverse, ...: torch's names outside torch.linalg (tapegrad/__init__.py imports them)
# -- eig, eigvals: complex eigenpairs of a general matrix ----------------------------------------
# (complex_tensor.py is imported by tapegrad/__init__.py after this module: its host ops come after
# these, so the opcodes of older tape files keep their meaning)
def _eig_fwd(xs, ints, f):
    from . import complex_tensor as _cx
    A = xs[0]
    if ints[0]:                                 # a complex A, given as its pair tensor
        A = _cx.pair_array_to_complex(A)
    L, V = np.linalg.eig(A)
    rdt = np.float32 if L.dtype == np.complex64 else np.float64
    return np.concatenate([_cx.complex_array_to_pair(L, rdt).ravel(), _cx.complex_array_to_pair(V, rdt).ravel()])


def _csolve(A, B):
    """``A^-1 B`` for complex tensors, through the real block system
    [[Ar, -Ai], [Ai, Ar]] [Xr; Xi] = [Br; Bi] (tg.linalg.solve, so it differentiates)."""
    from . import complex_tensor as _cx
    Ar, Ai, Br, Bi = A.real, A.imag, B.real, B.imag
    M = F.cat([F.cat([Ar, -Ai], -1), F.cat([Ai, Ar], -1)], -2)
    X = solve(M, F.cat([Br, Bi], -2))
    n = A.shape[-1]
    return _cx.complex(F.narrow(X, -2, 0, n), F.narrow(X, -2, n, n))


def _eig_rev(xs, y, g, ints, f, needs):
    """PyTorch's rule (FunctionsManual linalg_eig_backward): with E_ij = conj(L_j - L_i),
    gA = V^-H ((V^H gV - V^H V Re(diag(V^H gV))) / E, diagonal gL) V^H, the real part
    for a real A; the loss must not depend on the eigenvectors' phases."""
    from . import complex_tensor as _cx
    shape = tuple(ints[1:])
    n = shape[-1]
    L, V = [_cx.ComplexTensor._from_pair(p) for p in _parts(y, [shape[:-1] + (2,), shape + (2,)])]
    gLp, gVp = _parts(g, [shape[:-1] + (2,), shape + (2,)])
    Vh = V.mH
    eye = _const(np.eye(n, dtype=np.bool_))
    if _defined(gVp):
        VhgV = _cx.matmul(Vh, _cx.ComplexTensor._from_pair(gVp))
        d = VhgV.diagonal(0, -2, -1)
        if not np.allclose(d.imag._data, 0, rtol=1e-2, atol=1e-2):
            raise RuntimeError("linalg_eig_backward: The eigenvectors in the complex case are specified up to "
                               "multiplication by e^{i phi}. The specified loss function depends on this "
                               "quantity, so it is ill-defined.")
        inner = VhgV - _cx.matmul(Vh, V * F.unsqueeze(d.real, -2))
        Lc = L.conj()
        inner = inner / _cx.where(eye, 1 + 0j, Lc.unsqueeze(-2) - Lc.unsqueeze(-1))
    else:
        inner = _cx.ComplexTensor._from_pair(_const(np.zeros(shape + (2,), y.dtype)))
    diag = _cx.ComplexTensor._from_pair(gLp).unsqueeze(-2) if _defined(gLp) else 0j
    inner = _cx.where(eye, diag, inner)
    gA = _csolve(Vh, _cx.matmul(inner, Vh))
    return [gA._r if ints[0] else gA.real]


# forward mode (PyTorch's linalg_eig_jvp): with P = V^-1 dA V and G_ij = 1 / (L_j - L_i) off the
# diagonal (0 on it), dL = diag(P) and dV = V (P o G) - V Re(diag(V^H V (P o G))): unit-norm
# eigenvectors whose phase does not turn.  The adjoint (``_eig_rev``, on arrays: ``_eig_adjoint``)
# moves with L and V (``_eig_curvature``, its product rule).
def _eig_split(y, ints, lead=()):
    """Complex L and V from eig's flat output (or an adjoint or tangent of it)."""
    shape = tuple(ints[1:])
    Lp, Vp = _split(y, [shape[:-1] + (2,), shape + (2,)], lead)
    return Lp[..., 0] + 1j * Lp[..., 1], Vp[..., 0] + 1j * Vp[..., 1]


def _eig_input(t, ints):
    """A tangent or adjoint of eig's input as a complex array (a complex A's comes as its pair)."""
    return t[..., 0] + 1j * t[..., 1] if ints[0] else t


def _eig_pair(z):
    return np.stack([z.real, z.imag], -1)


def _eig_gaps(L):
    """G_ij = 1 / (L_j - L_i), 0 on the diagonal (not finite between equal eigenvalues, as
    in the reverse rule and PyTorch's)."""
    n = L.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1.0 / (L[..., None, :] - L[..., :, None] + np.eye(n))) * (1 - np.eye(n))


def _eig_tangent(xs, y, ts, ints, f):
    L, V = _eig_split(y, ints)
    P = np.linalg.solve(V, _eig_input(ts[0], ints) @ V)
    dL = np.diagonal(P, 0, -2, -1)
    dV = V @ (P * _eig_gaps(L))
    dV = dV - V * np.diagonal(_T(V.conj()) @ dV, 0, -2, -1).real[..., None, :]
    K = len(ts[0])
    return np.concatenate([_eig_pair(dL).reshape(K, -1), _eig_pair(dV).reshape(K, -1)], 1)


def _eig_off(V, gV, L, adjoints):
    """The off-diagonal part of the adjoint's inner matrix, ``(W - V^H V Re(diag W)) o conj(G)``
    with W = V^H gV, and what it is made of; zero for an adjoint without gV (not 0 * inf
    between equal eigenvalues: a loss of the eigenvalues alone needs them distinct nowhere).
    The first ``adjoints`` rows are adjoints, checked as the reverse rule checks its own."""
    Vh = _T(V.conj())
    W = Vh @ gV
    d = np.diagonal(W, 0, -2, -1)
    if not np.allclose(d[:adjoints].imag, 0, rtol=1e-2, atol=1e-2):
        raise RuntimeError("linalg_eig_backward: The eigenvectors in the complex case are specified up to "
                           "multiplication by e^{i phi}. The specified loss function depends on this "
                           "quantity, so it is ill-defined.")
    M = Vh @ V
    num = W - M * d.real[..., None, :]
    used = np.any(gV != 0, axis=(-2, -1))[..., None, None]
    return np.where(used, num * _eig_gaps(L).conj(), 0), Vh, W, d, M, used


def _eig_adjoint(L, V, gL, gV, real, adjoints):
    off, Vh = _eig_off(V, gV, L, adjoints)[:2]
    eye = np.eye(L.shape[-1], dtype=bool)
    gA = np.linalg.solve(Vh, np.where(eye, gL[..., None, :], off) @ Vh)
    return gA.real if real else _eig_pair(gA)


def _eig_batched_reverse(xs, y, G, ints, f, needs, adjoints):
    L, V = _eig_split(y, ints)
    gL, gV = _eig_split(G, ints, (len(G),))
    return [_eig_adjoint(L, V, gL, gV, not ints[0], adjoints)]


def _eig_curvature(xs, y, ts, ty, g, ints, f, needs):
    L, V = _eig_split(y, ints)
    gL, gV = _eig_split(g, ints)
    dL, dV = _eig_split(ty, ints, (len(ty),))
    off, Vh, W, d, M, used = _eig_off(V, gV, L, None)
    eye = np.eye(L.shape[-1], dtype=bool)
    inner = np.where(eye, gL[..., None, :], off)
    gA = np.linalg.solve(Vh, inner @ Vh)
    dVh = _T(dV.conj())
    dX = inner @ dVh - dVh @ gA
    if np.any(used):
        Gc = _eig_gaps(L).conj()
        dW = dVh @ gV
        dM = dVh @ V + Vh @ dV
        dGc = -(dL[..., None, :] - dL[..., :, None]).conj() * Gc * Gc
        doff = (dW - dM * d.real[..., None, :] - M * np.diagonal(dW, 0, -2, -1).real[..., None, :]) * Gc \
            + (W - M * d.real[..., None, :]) * dGc
        dX = dX + np.where(eye | ~used, 0, doff) @ Vh
    dA = np.linalg.solve(Vh, dX)
    return [dA.real if not ints[0] else _eig_pair(dA)]


_EIG = _h.host_op("linalg_eig", "LinalgEigBackward0", _eig_fwd, _eig_rev, _h.SAVE_OUT,
                  forward_mode=(_eig_tangent, _eig_batched_reverse, _eig_curvature), adjoint_rows=True)

EigResult = collections.namedtuple("eig", ["eigenvalues", "eigenvectors"])


def eig(A, *, out=None):
    """The eigenvalues and eigenvectors (unit norm, as LAPACK's geev gives them) of a
    real or complex square matrix, as complex tensors."""
    from . import complex_tensor as _cx
    _out_refused(out, "eig")
    _float_input(A, "linalg.eig")
    _square(A, "linalg.eig")
    if isinstance(A, _cx.ComplexTensor):
        ints, x = (1,) + A.shape, A._r
    else:
        ints, x = (0,) + A.shape, A
    if not np.all(np.isfinite(x._data)):
        raise RuntimeError("torch.linalg.eig: input tensor should not contain infs or NaNs.")
    y = _h.record(_EIG, [x], _eig_fwd([x._data], ints, None), ints)
    L, V = _parts(y, [A.shape[:-1] + (2,), A.shape + (2,)], "LinalgEigBackward0")
    return EigResult(_cx.ComplexTensor._from_pair(L), _cx.ComplexTensor._from_pair(V))


def eigvals(A, *, out=None):
    _out_refused(out, "eigvals")
    return eig(A).eigenvalues


TORCH_FUNCTIONS = {f.__name__: f for f in (_det, _slogdet, _logdet, _inverse, _matrix_power, _matrix_exp, _pinverse,
                                           _cholesky_solve)}


class _LinalgMethods:
    """Tensor's methods of these (bound onto Tensor at import, as functions.py binds its table)."""

    def det(self):
        return det(self)

    def slogdet(self):
        return slogdet(self)

    def logdet(self):
        return _logdet(self)

    def inverse(self):
        return inv(self)

    def cholesky_solve(self, input2, upper=False):
        return _cholesky_solve(self, input2, upper)

    def matrix_power(self, n):
        return matrix_power(self, n)

    def matrix_exp(self):
        return matrix_exp(self)

    def pinverse(self, rcond=1e-15):
        return pinv(self, rtol=rcond)


F._bind(Tensor, _LinalgMethods)


def cross(input, other, *, dim=-1, out=None):
    """The cross product along ``dim`` (last by default), broadcasting the other
    dimensions: ``torch.cross`` with the dimension given."""
    return _cross(input, other, dim, out=out)
