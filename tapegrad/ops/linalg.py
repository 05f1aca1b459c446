"""Matrix products: dot, mv, mm and batched matmul with broadcasting, one kernel.

Every case is recorded as a batch of ``(n, k) @ (k, m)`` products with, per output
batch, the index of the ``a`` and ``b`` matrices it used (so broadcast batches
accumulate their gradient); 1-D operands are the ``n = 1`` or ``m = 1`` case.
"""
import numpy as np

from ..core import tape as _tp
from .._jit import address_as_pointer, jit, lazy
from ..core.quiet import IGNORE as _IGNORE, ignoring as _ignoring, restore as _restore
from ..core.tensor import Tensor, to_operand
from ..core.dtypes import cpp_name, torch_name
from ..core.descriptors import aux_words, check_indices
from ..core.registry import (INDEX_MASK, LINALG, SAVE_A, SAVE_B, SAVES_BY_RG, EntryError, FamilyRules, define,
                             each_entry, name_id, register_family)
from ._dual import gather_columns, scatter_columns
from .elementwise import BINARY_BY_NAME
from .shape import reshape, transpose

# dA = G @ B^T reads b, dB = A^T @ G reads a: each kept only when the other needs a gradient
MATMUL = define(LINALG, 0, "matmul", reads=(SAVE_B, SAVE_A))
_KEEP = SAVES_BY_RG[MATMUL]


def _dgemm_function():
    """BLAS dgemm (SciPy's, which Numba's np.dot also uses) under a symbol name, so
    compiled code that calls it stays cacheable (a raw address would not be).
    Made when Numba is loaded: SciPy's BLAS wrappers take 0.4 s to import."""
    import ctypes

    import llvmlite.binding as ll
    import scipy.linalg.cython_blas as blas
    from numba import types
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    cap = blas.__pyx_capi__["dgemm"]
    ll.add_symbol("tapegrad_dgemm", get(cap, name(cap)))
    return types.ExternalFunction("tapegrad_dgemm", types.void(*([types.voidptr] * 13)))


_dgemm = lazy(_dgemm_function)
_N, _T = 78, 84     # 'N', 'T'


@jit
def gemm_acc(ta, tb, M, N, K, A, lda, B, ldb, C, ldc):
    """Column-major ``C(MxN) += op(A)(MxK) @ op(B)(KxN)``: accumulates in place, no
    temporary (np.dot would allocate the product and then add it)."""
    if M == 0 or N == 0 or K == 0:
        return
    cs = np.empty(2, np.uint8)
    cs[0] = ta
    cs[1] = tb
    iv = np.empty(6, np.int32)
    iv[0], iv[1], iv[2], iv[3], iv[4], iv[5] = M, N, K, lda, ldb, ldc
    one = np.ones(1)
    c, i = cs.ctypes.data, iv.ctypes.data
    p = address_as_pointer
    _dgemm(p(c), p(c + 1), p(i), p(i + 4), p(i + 8), p(one.ctypes.data), p(A.ctypes.data), p(i + 12),
           p(B.ctypes.data), p(i + 16), p(one.ctypes.data), p(C.ctypes.data), p(i + 20))


@jit
def linalg_reverse(k, g, a, b, da, db, aux, at):
    """The adjoints of a matrix product's operands; False for a kernel index without a
    branch (``da`` and ``db`` are then NaN)."""
    if k != MATMUL & INDEX_MASK:
        da[:] = np.nan
        db[:] = np.nan
        return False
    # Row-major X (r x c) is column-major X^T, so row-major C += X @ Y is the
    # column-major call C^T += Y^T X^T: the operands swap places.
    nb, n, kk, m = aux[at], aux[at + 1], aux[at + 2], aux[at + 3]
    for bo in range(nb):
        ia = aux[at + 4 + 2 * bo]
        ib = aux[at + 5 + 2 * bo]
        G = g[bo * n * m:(bo + 1) * n * m]
        if da.size:         # dA (n x kk) += G (n x m) @ B^T, B (kk x m)
            B = b[ib * kk * m:(ib + 1) * kk * m]
            gemm_acc(_T, _N, kk, n, m, B, m, G, m, da[ia * n * kk:(ia + 1) * n * kk], kk)
        if db.size:         # dB (kk x m) += A^T @ G, A (n x kk)
            A = a[ia * n * kk:(ia + 1) * n * kk]
            gemm_acc(_N, _T, m, kk, n, G, m, A, kk, db[ib * kk * m:(ib + 1) * kk * m], m)
    return True


@jit
def linalg_forward(a, b, y, aux, at):
    """The compiled forward of a replay (kernels/forward.py): ``y = a @ b`` per
    batch, C (n x m) = A (n x kk) @ B (kk x m), as column-major C^T = B^T A^T."""
    nb, n, kk, m = aux[at], aux[at + 1], aux[at + 2], aux[at + 3]
    y[:] = 0.0
    for bo in range(nb):
        ia = aux[at + 4 + 2 * bo]
        ib = aux[at + 5 + 2 * bo]
        gemm_acc(_N, _N, m, n, kk, b[ib * kk * m:(ib + 1) * kk * m], m, a[ia * n * kk:(ia + 1) * n * kk], kk,
                 y[bo * n * m:(bo + 1) * n * m], m)


_PLAIN = {}     # (n, k, m) -> aux words of an unbatched product
_F64 = np.dtype(np.float64)


def _check_dtypes(a, b):
    """PyTorch does not promote matrix products: its error for two dtypes (worded
    by the kernel the shapes select), or for bool operands."""
    case = "dot" if a.ndim == 1 and b.ndim == 1 else ("mv" if b.ndim == 1 else ("mm" if b.ndim == 2 else "bmm"))
    if a.dtype != b.dtype:
        na, nb = torch_name(a.dtype), torch_name(b.dtype)
        if case == "dot":
            msg = "dot : expected both vectors to have same dtype, but found %s and %s" % (na, nb)
        elif case == "mv":
            msg = "addmv input tensors must have the same dtype, but got %s, %s, and %s" % (nb, na, nb)
        elif case == "mm":
            msg = "expected m1 and m2 to have the same dtype, but got: %s != %s" % (
                cpp_name(a.dtype), cpp_name(b.dtype))
        else:
            msg = "expected scalar type %s but found %s" % (na, nb)
        raise RuntimeError(msg)
    if a.dtype.kind == "b":
        raise NotImplementedError("\"%s\" not implemented for 'Bool'"
                                  % {"dot": "dot", "mv": "addmv_impl_cpu", "mm": "addmm_impl_cpu_", "bmm": "bmm"}[case])


def matmul(input, other):
    x, y = input, other
    if not isinstance(y, Tensor):
        y = to_operand(y)
    a, b = x._data, y._data
    if (a.dtype is not _F64 or b.dtype is not _F64) and a.ndim and b.ndim:
        _check_dtypes(a, b)
    return _matmul(x, y)


def _matmul(x, y):
    """matmul without the dtype check: the differentiable reverse multiplies a
    float64 adjoint by a float32 operand (the sweep computes in float64)."""
    a, b = x._data, y._data
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are %dD and %dD"
                           % (a.ndim, b.ndim))
    A = a[None, :] if a.ndim == 1 else a
    B = b[:, None] if b.ndim == 1 else b
    if A.shape[-1] != B.shape[-2]:
        if a.ndim == 1 and b.ndim == 1:
            raise RuntimeError("inconsistent tensor size, expected tensor [%d] and src [%d] to have the same "
                               "number of elements, but got %d and %d elements respectively"
                               % (a.size, b.size, a.size, b.size))
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (%dx%d and %dx%d)"
                           % (int(np.prod(A.shape[:-1])), A.shape[-1], B.shape[-2], B.shape[-1]))
    token = _ignoring(_IGNORE)      # (an overflow is inf without NumPy's warning: core/quiet.py)
    try:
        out = np.matmul(a, b)
    except ValueError as e:
        raise RuntimeError(_broadcast_msg(A.shape[:-2], B.shape[:-2]) or str(e)) from None
    finally:
        _restore(token)
    out = out if type(out) is np.ndarray else np.asarray(out)
    if not (x._requires_grad or y._requires_grad) or not _tp.state().grad:
        return Tensor._wrap(out)
    n, k, m = A.shape[-2], A.shape[-1], B.shape[-1]
    ba, bb = A.shape[:-2], B.shape[:-2]
    if not ba and not bb:
        words = _PLAIN.get((n, k, m))
        if words is None:
            words = _PLAIN[(n, k, m)] = np.array((1, n, k, m, 0, 0), np.int64)
    else:
        bo = np.broadcast_shapes(ba, bb)
        nbo = int(np.prod(bo, dtype=np.int64))
        ia = np.broadcast_to(np.arange(int(np.prod(ba, dtype=np.int64))).reshape(ba), bo).ravel()
        ib = np.broadcast_to(np.arange(int(np.prod(bb, dtype=np.int64))).reshape(bb), bo).ravel()
        words = np.empty(4 + 2 * nbo, np.int64)
        words[:4] = (nbo, n, k, m)
        words[4::2] = ia
        words[5::2] = ib
    if a.ndim == 1 and b.ndim == 1:
        name = "DotBackward0"
    elif b.ndim == 1 and a.ndim == 2:
        name = "MvBackward0"
    elif a.ndim == 1 and b.ndim == 2:
        name = "SqueezeBackward4"
    elif a.ndim == 2 and b.ndim == 2:
        name = "MmBackward0"
    elif a.ndim == 3 and b.ndim == 3 and ba == bb:
        name = "BmmBackward0"
    else:
        name = "UnsafeViewBackward0"
    T = _tp.current()
    sa = x._slot if (x._tape_id == T.id and x._slot_version == x._ver[0]) else T.adopt(x)
    sb = y._slot if (y._tape_id == T.id and y._slot_version == y._ver[0]) else T.adopt(y)
    keep = _KEEP[(1 if x._requires_grad else 0) | (2 if y._requires_grad else 0)]
    if keep & SAVE_A:
        T.vals[sa] = a
    if keep & SAVE_B:
        T.vals[sb] = b
    at = T.aux_append(words)
    ver = [0]
    o = T.new_slot(MATMUL, sa, sb, -1, at, -1, name_id(name), 0.0, 0.0, out, False, ver)
    return Tensor._recorded(out, T, o, ver)


def _broadcast_msg(sa, sb):
    """PyTorch's message for batch shapes that do not broadcast (None if they do)."""
    for i in range(1, min(len(sa), len(sb)) + 1):
        p, q = sa[-i], sb[-i]
        if p != q and p != 1 and q != 1:
            return ("The size of tensor a (%d) must match the size of tensor b (%d) at non-singleton dimension %d"
                    % (p, q, max(len(sa), len(sb)) - i))
    return None


def mm(input, mat2):
    x, y = input, mat2
    if x.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if y.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return matmul(x, y)


def mv(input, vec):
    x, y = input, vec
    if x.ndim != 2 or y.ndim != 1:
        raise RuntimeError("vector + matrix @ vector expected, got %d, %d" % (x.ndim, y.ndim))
    if x.shape[1] != y.shape[0]:
        raise RuntimeError("size mismatch, got input (%d), mat (%dx%d), vec (%d)"
                           % (x.shape[0], x.shape[0], x.shape[1], y.shape[0]))
    return matmul(x, y)


def dot(input, tensor):
    x, y = input, tensor
    if x.ndim != 1 or y.ndim != 1:
        raise RuntimeError("1D tensors expected, but got %dD and %dD tensors" % (x.ndim, y.ndim))
    return matmul(x, y)


def bmm(input, mat2):
    x, y = input, mat2
    if x.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if y.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    xs, ys = x.shape, y.shape
    if ys[0] != xs[0] or ys[1] != xs[2]:
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: [%d, %d] but got: [%d, %d]."
                           % (xs[0], xs[2], ys[0], ys[1]))
    return matmul(x, y)


# -- tril, triu, outer, inner, kron: compositions of where, mul, matmul and views --
# (their gradients, create_graph and replay are those of the ops they are made of)
def _triangle(x, diagonal, lower, what):
    if x.ndim < 2:
        raise RuntimeError("%s: input tensor must have at least 2 dimensions" % what)
    d = x._data
    n, m = d.shape[-2:]
    diagonal = int(diagonal)
    keep = np.tri(n, m, diagonal, dtype=np.bool_) if lower else ~np.tri(n, m, diagonal - 1, dtype=np.bool_)
    zero = np.zeros((), d.dtype)
    if not x._requires_grad or not _tp.state().grad:
        return Tensor._wrap(np.where(keep, d, zero))
    # where, not a product with the mask: inf and nan outside the triangle become 0
    return BINARY_BY_NAME["where"].record(x, Tensor._const(zero), Tensor._const(keep),
                                          name_id("TrilBackward0" if lower else "TriuBackward0"))


def tril(input, diagonal=0):
    return _triangle(input, diagonal, True, "tril")


def triu(input, diagonal=0):
    return _triangle(input, diagonal, False, "triu")


def _tensor_argument(v, fname, name, position):
    if not isinstance(v, Tensor):
        raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                        % (fname, name, position, type(v).__name__))


def outer(input, vec2):
    x, y = input, vec2
    _tensor_argument(y, "outer", "vec2", 2)
    for v, name in ((x, "self"), (y, "vec2")):
        if v.ndim != 1:
            raise RuntimeError("outer: Expected 1-D argument %s, but got %d-D" % (name, v.ndim))
    return BINARY_BY_NAME["mul"].record(reshape(x, (x.shape[0], 1)), y)


def inner(input, other):
    """``sum(a[..., :] * b[..., :], -1)`` over every pair of leading indices: one
    matrix product of the flattened operands."""
    a, b = input, other
    _tensor_argument(b, "inner", "other", 2)
    if a.ndim == 0 or b.ndim == 0:
        return BINARY_BY_NAME["mul"].record(a, b)
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    k = a.shape[-1]
    if b.shape[-1] != k:
        raise RuntimeError("inner() the last dimension must match on both input tensors but got shapes %s and %s"
                           % (list(a.shape), list(b.shape)))
    rows = int(np.prod(a.shape[:-1], dtype=np.int64))
    cols = int(np.prod(b.shape[:-1], dtype=np.int64))
    p = matmul(reshape(a, (rows, k)), transpose(reshape(b, (cols, k)), 0, 1))
    return reshape(p, a.shape[:-1] + b.shape[:-1])


def kron(input, other):
    """``a[i] * b[j]`` at ``i * b.shape + j`` along every dimension: the product of
    the two reshaped to interleaved dimensions, then merged."""
    a, b = input, other
    _tensor_argument(b, "kron", "other", 2)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a.shape
    sb = (1,) * (nd - b.ndim) + b.shape
    ra = tuple(n for s in sa for n in (s, 1))
    rb = tuple(n for s in sb for n in (1, s))
    p = BINARY_BY_NAME["mul"].record(reshape(a, ra), reshape(b, rb))
    return reshape(p, tuple(i * j for i, j in zip(sa, sb)), "UnsafeViewBackward0")


# -- differentiable reverse (create_graph=True) ----------------------------------------
# ``linalg_reverse`` with tapegrad's own ops: dA = G @ B^T, dB = A^T @ G per batch,
# batches gathered from / scatter-added to the operands that were broadcast.
def differentiable_reverse(ctx, s, k, row, f0, f1, g):
    from .shape import gather_flat, scatter_add, transpose
    a, b, at = row[_tp.A], row[_tp.B], row[_tp.AUX]
    aux = ctx.aux
    nb, n, kk, m = (int(v) for v in aux[at:at + 4])
    ia, ib = aux[at + 4:at + 4 + 2 * nb:2], aux[at + 5:at + 5 + 2 * nb:2]
    if nb == 1:
        G = g.reshape(n, m)
        out = []
        if ctx.needs(a):
            out.append((a, _matmul(G, transpose(ctx.value(b).reshape(kk, m), 0, 1)).reshape(-1)))
        if ctx.needs(b):
            out.append((b, _matmul(transpose(ctx.value(a).reshape(n, kk), 0, 1), G).reshape(-1)))
        return out
    G = g.reshape(nb, n, m)
    whole = np.arange(nb)

    def lin(idx, r, c):
        return (idx[:, None] * (r * c) + np.arange(r * c)).ravel()

    def batches(slot, idx, r, c):
        v = ctx.value(slot)
        if ctx.size(slot) == nb * r * c and np.array_equal(idx, whole):
            return v.reshape(nb, r, c)
        return gather_flat(v, lin(idx, r, c)).reshape(nb, r, c)

    def to_operand(d, slot, idx, r, c):
        d = d.reshape(-1)
        if ctx.size(slot) == nb * r * c and np.array_equal(idx, whole):
            return d
        return scatter_add(d, lin(idx, r, c), ctx.size(slot))

    out = []
    if ctx.needs(a):
        dA = _matmul(G, transpose(batches(b, ib, kk, m), 1, 2))
        out.append((a, to_operand(dA, a, ia, n, kk)))
    if ctx.needs(b):
        dB = _matmul(transpose(batches(a, ia, n, kk), 1, 2), G)
        out.append((b, to_operand(dB, b, ib, kk, m)))
    return out


# -- replay (tapegrad.replay): the forward again, from the entry alone ----------------
def replay_rule(k, row, aux, shape, name, f0, f1):
    a, b = row[_tp.A], row[_tp.B]
    return lambda v: np.asarray(np.matmul(v[a], v[b]))


def _compiled_forward(k, ints, e, sizes, aux, live):
    return True


# -- forward mode (autograd/tangent.py): the product rule on K tangent rows ----------------
def _layout(ctx, row):
    """(a, b, batches, n, k, m, and for each operand the flat index of its batch of
    every product, or None when the batches are the operand itself)."""
    a, b, at = row[_tp.A], row[_tp.B], row[_tp.AUX]
    aux = ctx.aux
    nb, n, kk, m = (int(v) for v in aux[at:at + 4])
    whole = np.arange(nb)

    def index(slot, idx, r, c):
        if ctx.size(slot) == nb * r * c and np.array_equal(idx, whole):
            return None
        return (idx[:, None] * (r * c) + np.arange(r * c)).ravel()
    ia, ib = aux[at + 4:at + 4 + 2 * nb:2], aux[at + 5:at + 5 + 2 * nb:2]
    return a, b, nb, n, kk, m, index(a, ia, n, kk), index(b, ib, kk, m)


def _values(ctx, slot, idx, shape):
    v = ctx.val(slot)
    return (v if idx is None else v[idx]).reshape(shape)


def _tangents(ctx, slot, idx, shape):
    t = ctx.tan(slot)
    if t is None:
        return None
    return (t if idx is None else gather_columns(t, idx)).reshape((t.shape[0],) + shape)


def _to_operand(ctx, d, slot, idx):
    d = d.reshape(d.shape[0], -1)
    return d if idx is None else scatter_columns(d, idx, ctx.size(slot))


def _batched_matmul(L, R):
    """``L @ R`` where one side is a batch of K rows ``(K, 1, r, c)`` and the other one
    matrix ``(1, c, m)`` (or the reverse): one GEMM over the stacked rows instead of K
    small products; other layouts by NumPy's broadcasting matmul."""
    if L.ndim == 4 and R.ndim == 3 and L.shape[1] == 1 and R.shape[0] == 1:      # (K, 1, r, c) @ (1, c, m)
        K, _, r, c = L.shape
        return (L.reshape(K * r, c) @ R[0]).reshape(K, 1, r, -1)
    if L.ndim == 3 and R.ndim == 4 and L.shape[0] == 1 and R.shape[1] == 1:      # (1, r, c) @ (K, 1, c, m)
        K, _, c, m = R.shape
        out = L[0] @ R[:, 0].transpose(1, 0, 2).reshape(c, K * m)
        return out.reshape(-1, K, m).transpose(1, 0, 2)[:, None]
    return np.matmul(L, R)


def tangent(ctx, s, k, row, f0, f1):
    a, b, nb, n, kk, m, ia, ib = _layout(ctx, row)
    ta, tb = _tangents(ctx, a, ia, (nb, n, kk)), _tangents(ctx, b, ib, (nb, kk, m))
    out = None
    if ta is not None:
        out = _batched_matmul(ta, _values(ctx, b, ib, (nb, kk, m)))
    if tb is not None:
        p = _batched_matmul(_values(ctx, a, ia, (nb, n, kk)), tb)
        out = p if out is None else out + p
    return None if out is None else out.reshape(ctx.K, -1)


def batched_reverse(ctx, s, k, row, f0, f1, G):
    a, b, nb, n, kk, m, ia, ib = _layout(ctx, row)
    Gb = G.reshape(G.shape[0], nb, n, m)
    out = []
    if ctx.needs(a):
        dA = _batched_matmul(Gb, _values(ctx, b, ib, (nb, kk, m)).swapaxes(-1, -2))
        out.append((a, _to_operand(ctx, dA, a, ia)))
    if ctx.needs(b):
        dB = _batched_matmul(_values(ctx, a, ia, (nb, n, kk)).swapaxes(-1, -2), Gb)
        out.append((b, _to_operand(ctx, dB, b, ib)))
    return out


def curvature(ctx, s, k, row, f0, f1, g):
    """dA = G B^T moves with B's tangent, dB = A^T G with A's."""
    a, b, nb, n, kk, m, ia, ib = _layout(ctx, row)
    gb = g.reshape(nb, n, m)
    out = []
    if ctx.needs(a):
        tb = _tangents(ctx, b, ib, (nb, kk, m))
        if tb is not None:
            out.append((a, _to_operand(ctx, _batched_matmul(gb, tb.swapaxes(-1, -2)), a, ia)))
    if ctx.needs(b):
        ta = _tangents(ctx, a, ia, (nb, n, kk))
        if ta is not None:
            out.append((b, _to_operand(ctx, _batched_matmul(ta.swapaxes(-1, -2), gb), b, ib)))
    return out


@each_entry
def check_entries(k, e, ints, aux):
    """``FamilyRules.check_entries``: ``linalg_reverse`` and ``linalg_forward`` slice batch
    ``ia`` of A (n x kk) and ``ib`` of B (kk x m) for each output batch, from
    ``[nb, n, kk, m, (ia, ib)[nb]]``, and hand the slices to BLAS unchecked."""
    row = ints[e]
    a, b, at, size = int(row[_tp.A]), int(row[_tp.B]), int(row[_tp.AUX]), int(row[_tp.SIZE])
    if not (0 <= a < e and 0 <= b < e):
        raise EntryError("input slots %d, %d" % (a, b))
    nb, n, kk, m = (int(v) for v in aux_words(aux, at, 4, "matmul"))
    if min(nb, n, kk, m) < 0 or nb * n * m != size:
        raise EntryError("%d products of (%d x %d) @ (%d x %d) for an output of %d" % (nb, n, kk, kk, m, size))
    pairs = aux_words(aux, at + 4, 2 * nb, "matmul")
    for idx, s, block, what in ((pairs[0::2], a, n * kk, "A"), (pairs[1::2], b, kk * m, "B")):
        count = int(ints[s, _tp.SIZE]) // block if block else 0
        if block and int(ints[s, _tp.SIZE]) % block:
            raise EntryError("%s of %d elements is no stack of %d-element matrices" % (what, ints[s, _tp.SIZE], block))
        if block:
            check_indices(idx, count, "a batch index of " + what)


register_family(LINALG, FamilyRules(differentiable_reverse, replay_rule, expands_adjoint=True,
                                    scalar_replay=frozenset(), compiled_forward=_compiled_forward,
                                    tangent=tangent, batched_reverse=batched_reverse, curvature=curvature,
                                    check_entries=check_entries))
