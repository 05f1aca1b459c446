"""Reductions, normalisations and scans along dimensions.

Every op here maps each input element to a group (the output element it reduces
into, or its row for softmax and cumsum) through one strided descriptor, so a
single kernel serves any ``dim`` (int or tuple) and ``keepdim``.  Ties in
max/min/amax split the gradient evenly (PyTorch's full-reduction rule); a NaN
maximum sends it to the NaNs for max()/min() and makes it NaN for amax/amin, as in
PyTorch; ``max(dim)`` returns indices and gives the whole gradient to them (see
``max_dim``).  prod's gradient follows PyTorch's too (NaN and inf included).

The file has one section per op (``# -- sum --``...): its declaration (opcode,
what it saves, whether its groups are rows), its public function, its
differentiable reverse and its replay rule.  The family's shared pieces come
first; last the family kernels, where each op's compiled reverse is its branch
of ``reduce_reverse`` (one function: a function per op, even inlined, made the
cold compile of ``python -m tapegrad warmup`` about 5% longer), and the family's
registration.
"""
import math
import warnings

import numpy as np

from .. import _jit
from ..core import tape as _tp
from .._jit import jit
from ..core.descriptors import (c_strides, check_descriptor, check_descriptors, descriptor, refuse, strided_gather_add,
                                strided_map, strided_map_np, u64)
from ..core.quiet import IGNORE as _IGNORE, ignoring as _ignoring, restore as _restore, wrap as _quiet
from ..core.tensor import Tensor, _wrap_dim
from ..core.dtypes import torch_name
from ..core.promotion import DEFAULT
from ._args import REQUIRED, numpy_names
from ..core.registry import (GRAD_FN_NAMES, OP_NAMES, REDUCE, SAVE_A, SAVE_OUT, SAVES_BY_RG, FamilyRules,
                             NoForwardRule, OpDefinitionError, define, name_id, register_family)
from ._dual import gather_columns, scatter_columns
from .shape import diagonal, gather_flat, scatter_add, strided_view, to_dtype

# -- the family's shared pieces ------------------------------------------------
CODES = {}              # kernel index -> opcode
PER_ROW = set()         # ops whose output has the input's shape: a group is a row along ``dim``
_DIFFERENTIABLE = {}    # kernel index -> differentiable reverse (see ``differentiable_reverse``)
_REPLAY = {}            # kernel index -> replay rule (see ``replay_rule``)


def declare(name, saves=0, per_row=False):
    """A new op of the family: its kernel index (the next one: its branch of
    ``reduce_reverse``) and opcode, with what its entries keep for the reverse pass
    (``SAVE_A``: the input, ``SAVE_OUT``: the output; ``_record`` reads it back) and
    whether a group is a row (the output has the input's shape)."""
    k = len(CODES)
    CODES[k] = define(REDUCE, k, name, saves)
    if per_row:
        PER_ROW.add(k)
    return k


PUBLIC = {}              # PyTorch's name -> a function of the family ``functions.py`` binds as tg.<name> and a method


METHODS = {}        # name -> Tensor.<name>, where the method's signature differs from tg.<name>'s


def public(f):
    """Make ``f`` (a function of the family, its input first) ``tg.<name>`` and ``Tensor.<name>``."""
    PUBLIC[f.__name__] = f
    return f


def differentiable(k):
    """Register ``f(ctx, s, a, g, gi, ngroups, n, f0)``, the adjoint of input ``a``
    for the flat adjoint ``g`` of entry ``s``, with tapegrad's own ops (``gi``: the
    group of each input element)."""
    def register(f):
        _DIFFERENTIABLE[k] = f
        return f
    return register


def replay(k):
    """Register ``f(a, axes, ax, shape, name, f0)``: the entry's forward as a
    function of the slot values (``axes``: the reduced axes, ``ax`` the first)."""
    def register(f):
        _REPLAY[k] = f
        return f
    return register


_ALL_AXES = [tuple(range(n)) for n in range(33)]


def normalize_dims(dim, ndim):
    """``dim`` (None, int, or tuple) as a sorted tuple of non-negative axes."""
    if dim is None:
        return _ALL_AXES[ndim] if ndim < len(_ALL_AXES) else tuple(range(ndim))
    if ndim == 0:
        dims = dim if isinstance(dim, (list, tuple)) else (dim,)
        for d in dims:
            _wrap_dim(d, 0)
        if len(dims) > 1:
            _repeated(dims, 0)
        return ()
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return tuple(range(ndim))
        axes = {_wrap_dim(d, ndim) for d in dim}
        if len(axes) != len(dim):
            _repeated(dim, ndim)
        return tuple(sorted(axes))
    return (_wrap_dim(dim, ndim),)


def _repeated(dims, ndim):
    seen = set()
    for d in dims:
        w = _wrap_dim(d, ndim)
        if w in seen:
            raise RuntimeError("dim %d appears multiple times in the list of dims" % w)
        seen.add(w)


_GROUPS = {}


def _groups(shape, axes):
    key = (shape, axes)
    w = _GROUPS.get(key)
    if w is None:
        w = np.array(_group_words(shape, axes), np.int64)
        n = int(np.prod(shape, dtype=np.int64))
        groups = int(np.prod([shape[d] for d in range(len(shape)) if d not in axes], dtype=np.int64))
        check_descriptor(w, 0, groups, n, "the groups")     # (once per shape and axes: kept)
        w = _GROUPS[key] = w
    return w


def _group_words(shape, axes):
    kept = [shape[d] for d in range(len(shape)) if d not in axes]
    ks = c_strides(kept)
    st, j = [], 0
    for d in range(len(shape)):
        if d in axes:
            st.append(0)
        else:
            st.append(ks[j])
            j += 1
    return descriptor(shape, st)


def _record(kind, x, out, axes, name, f0=0.0):
    """Record op ``kind`` of ``x`` along ``axes`` (its group descriptor in aux), keeping
    what ``declare`` said it saves."""
    out = out if type(out) is np.ndarray else np.asarray(out)
    if not x._requires_grad or not _tp.state().grad:
        return Tensor._wrap(out)
    T = _tp.current()
    s = x._slot if (x._tape_id == T.id and x._slot_version == x._ver[0]) else T.adopt(x)
    code = CODES[kind]
    saves = SAVES_BY_RG[code][0]
    if saves & SAVE_A:
        T.vals[s] = x._data
    d = x._data
    if kind in PER_ROW:
        ngroups = d.size // (d.shape[axes[0]] if axes else 1) if d.size else 0
    else:
        ngroups = out.size
    at = T.aux_append(_groups(d.shape, axes))     # also records the input's shape
    ver = [0]
    o = T.new_slot(code, s, -1, -1, at, ngroups, name_id(name), f0, 0.0, out, bool(saves & SAVE_OUT), ver)
    return Tensor._recorded(out, T, o, ver)


def _spread(g, gi, ngroups, n):
    """The flat per-group adjoint ``g`` spread over each group's elements."""
    return strided_view(g, np.array((1, 0, n, 0), np.int64)) if ngroups == 1 else gather_flat(g, gi)


def _name(base, dim):
    return base + ("Backward0" if dim is None else "Backward1")


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


# -- forward mode (autograd/tangent.py): per kernel, on K rows (``forward_mode``) ---------
_FORWARD = {}           # kernel index -> (tangent, batched reverse, curvature)


def forward_mode(k):
    """Register kernel ``k``'s forward-mode rules, each called with
    ``(ctx, s, a, t, gi, ngroups, n, f0)``: ``t`` the input's tangents ``(K, n)``
    (``tangent``), a batch of the entry's adjoints ``(B, ngroups or n)``
    (``batched reverse``: the input's adjoints ``(B, n)``), or one adjoint of the entry
    (``curvature``: ``(K, n)``, or None when zero); ``gi`` the group of every input element."""
    def register(rules):
        _FORWARD[k] = rules
        return rules
    return register


def _group_sum(t, gi, ngroups):
    return t.sum(axis=1, keepdims=True) if ngroups == 1 else scatter_columns(t, gi, ngroups)


def _group_spread(G, gi, ngroups, n):
    return np.repeat(G, n, axis=1) if ngroups == 1 else gather_columns(G, gi)


def _spread_flat(v, gi):
    """A per-group flat value on every element (``v`` of one element when ``gi`` is None)."""
    return v[0] if gi is None else v[gi]


def _totals_flat(v, gi, ngroups):
    """Each group's sum of the flat ``v``, in the elements' order (the kernel's)."""
    return np.array([v.sum()]) if gi is None else np.bincount(gi, weights=v, minlength=ngroups)


def _output_tangent(ctx, s, a, t, gi, ngroups, n, f0, k):
    """The entry's output tangent: the tangent pass's, else computed again."""
    ty = ctx.tan(s)
    return _FORWARD[k][0](ctx, s, a, t, gi, ngroups, n, f0) if ty is None else ty


# -- sum --------------------------------------------------------------------------
SUM = declare("sum")
_add_reduce = np.add.reduce
SHORT_AXIS = 8          # NumPy adds fewer than 8 elements one after another (its pairwise sum's block)


def sum_values(d, axes, keepdims=False, dtype=None):
    """``d.sum(axis=axes)``.  Over one short last axis (``(diff * diff).sum(-1)`` of
    3-vectors) NumPy makes one inner-loop call per row, 10x slower than adding the
    axis's slices, which gives the same bits: NumPy adds so few in order too.  (inf - inf
    is nan without NumPy's warning, as in PyTorch: core/quiet.py)"""
    token = _ignoring(_IGNORE)
    try:
        return _sum_values(d, axes, keepdims, dtype)
    finally:
        _restore(token)


def _sum_values(d, axes, keepdims, dtype):
    if (dtype is None and len(axes) == 1 and axes[0] == d.ndim - 1 and d.ndim >= 2 and 1 < d.shape[-1] < SHORT_AXIS
            and d.dtype.kind == "f" and d.size >= 1 << 14):
        out = d[..., 0] + d[..., 1]
        for j in range(2, d.shape[-1]):
            out += d[..., j]
        return out[..., None] if keepdims else out
    return _add_reduce(d, axes, dtype, None, keepdims)      # (d.sum's own call, without its Python wrapper)


def sum(input, dim=None, keepdim=False, *, dtype=None, **kw):
    x = input
    if kw:
        dim, keepdim = numpy_names("sum", kw, dim, keepdim)
    axes = normalize_dims(dim, x.ndim)
    d = x._data
    out = sum_values(d, axes, keepdim, dtype)
    if d.dtype.kind in "biu" and dtype is None:       # (uint8 too: NumPy sums it as uint64)
        out = out.astype(np.int64)
    return _record(SUM, x, out, axes, _name("Sum", dim))


@differentiable(SUM)
def _sum_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    if ngroups == 1:        # one element standing for all n (see shape.expand_adjoint)
        return g
    return gather_flat(g, gi)


@replay(SUM)
def _sum_replay(a, axes, ax, shape, name, f0):
    return lambda v: np.asarray(sum_values(v[a], axes)).reshape(shape)


forward_mode(SUM)((lambda ctx, s, a, t, gi, ngroups, n, f0: _group_sum(t, gi, ngroups),
                   lambda ctx, s, a, G, gi, ngroups, n, f0: _group_spread(G, gi, ngroups, n),
                   lambda ctx, s, a, g, gi, ngroups, n, f0: None))


# -- nansum, nanmean: compositions of sum (no kernel of their own) --
# The NaNs are replaced by zeros with ``where`` (its reverse: no gradient at a NaN).
# PyTorch's nansum reverse multiplies by the mask instead, so that a group of NaNs alone
# gets NaN through nanmean's 0 / 0; here it gets 0 (docs/differences.md).
@public
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum of the elements that are not NaN."""
    x = input
    if x.dtype.kind == "f":
        x = tensor_where(x != x, 0.0, x)
    axes = normalize_dims(dim, x.ndim)
    if dtype is not None:
        x = to_dtype(x, dtype)
    out = sum_values(x._data, axes, keepdim)
    if x.dtype.kind in "biu" and dtype is None:
        out = out.astype(np.int64)
    return _record(SUM, x, out, axes, "NansumBackward0")


def _nansum_method(self, dim=None, keepdim=False, dtype=None):
    return nansum(self, dim, keepdim, dtype=dtype)


METHODS["nansum"] = _nansum_method      # (Tensor.nansum takes dtype by position; torch.nansum by keyword)


@public
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the elements that are not NaN (NaN where all are)."""
    x = input if dtype is None else to_dtype(input, dtype)
    if x.dtype.kind != "f":
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got %s"
                           % torch_name(x.dtype))
    # (the count of numbers made from x itself, 1 where a number and NaN where not, so that
    # a replay computes it from the tape: a sum of a comparison is a value off the tape)
    return nansum(x, dim, keepdim) / nansum(tensor_where(x == x, 1.0, x), dim, keepdim)


# -- trace: the sum of the diagonal view --
def trace(input):
    x = input
    if x.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim %d" % x.ndim)
    if x.dtype.kind == "b":
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    dv = diagonal(x)
    d = dv._data
    out = d.sum()
    if d.dtype.kind in "iu":
        out = out.astype(np.int64)
    return _record(SUM, dv, out, (0,), "TraceBackward0")


# -- mean -------------------------------------------------------------------------
MEAN = declare("mean")


def mean(input, dim=None, keepdim=False, *, dtype=None, **kw):
    x = input
    if kw:
        dim, keepdim = numpy_names("mean", kw, dim, keepdim)
    if dtype is not None:
        x = to_dtype(x, dtype)
    axes = normalize_dims(dim, x.ndim)
    if not x.dtype.kind == "f":
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating "
                           "point or complex dtype. Got: %s" % torch_name(x.dtype))
    return _record(MEAN, x, _mean_values(x._data, axes, keepdim), axes, _name("Mean", dim))


def _mean_values(d, axes, keepdim):
    if d.size:
        out = sum_values(d, axes, keepdim) / _count(d.shape, axes)
    else:       # the mean of nothing is nan (PyTorch), without NumPy's warning
        out = np.full(np.sum(d, axis=axes, keepdims=keepdim).shape, np.nan, d.dtype)
    return np.asarray(out, d.dtype)


@differentiable(MEAN)
def _mean_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    if ngroups == 1:        # (as sum's)
        return g / n
    return gather_flat(g, gi) / (n // ngroups)


@replay(MEAN)
def _mean_replay(a, axes, ax, shape, name, f0):
    return lambda v: _mean_values(v[a], axes, False).reshape(shape)


forward_mode(MEAN)((lambda ctx, s, a, t, gi, ngroups, n, f0: _group_sum(t, gi, ngroups) / (n // ngroups),
                    lambda ctx, s, a, G, gi, ngroups, n, f0: _group_spread(G, gi, ngroups, n) / (n // ngroups),
                    lambda ctx, s, a, g, gi, ngroups, n, f0: None))


# -- prod -------------------------------------------------------------------------
PROD = declare("prod", SAVE_A)


@_quiet
def prod(input, dim=None, keepdim=False, *, dtype=None, **kw):
    x = input
    if kw:
        dim, keepdim = numpy_names("prod", kw, dim, keepdim)
    if dtype is not None:
        x = to_dtype(x, dtype)
    axes = normalize_dims(dim, x.ndim)
    d = x._data
    out = d.prod(axis=axes, keepdims=keepdim, dtype=np.int64 if d.dtype.kind in "biu" else None)
    return _record(PROD, x, out, axes, _name("Prod", dim), 1.0 if dim is None else 0.0)


@differentiable(PROD)
def _prod_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    x = ctx.value(a)
    xd = x._data
    zeros = np.bincount(gi, weights=(xd == 0), minlength=ngroups)
    several = zeros.max(initial=0) > 1
    if several and _tp.state().grad:
        raise NotImplementedError("tapegrad: create_graph=True through prod() of a group that holds two "
                                  "or more zeros is not supported")

    def product():
        out = np.ones(ngroups, xd.dtype)
        np.multiply.at(out, gi, xd)
        return out
    y = ctx.value(s, product)        # the product itself (not saved), so its own reverse is used
    safe = tensor_where(Tensor._wrap(xd == 0), 1.0, x)
    others = tensor_where(Tensor._wrap(xd == 0), gather_flat(_group_prod(safe, gi, ngroups), gi),
                   gather_flat(y, gi) / safe)
    if several:     # (not differentiated further) a group with two zeros: all its products of others are 0
        others = tensor_where(Tensor._wrap((xd == 0) & (zeros[gi] > 1)), 0.0, others)
    return _spread(g, gi, ngroups, n) * others


def _group_prod(x, gi, ngroups):
    """Product of each group of the flat tensor ``x`` (differentiable): the groups
    laid out as the rows of a matrix, by sorting."""
    order = np.argsort(gi, kind="stable")
    rows = gather_flat(x, order).reshape(ngroups, -1)
    return prod(rows, dim=1)


@replay(PROD)
def _prod_replay(a, axes, ax, shape, name, f0):
    return lambda v: np.asarray(v[a].prod(axis=axes)).reshape(shape)


# -- prod: as its reverse kernel, ``others`` (the product of a group's other elements) is
# the result / the input without zeros, the exact exclusive product with one anywhere;
# its curvature is the exact Hessian (also where a group holds two zeros: PyTorch's
# double backward is exact there too) -------------------------------------------------
def _group_order(gi):
    return None if gi is None else np.argsort(gi, kind="stable")


def _to_rows(v, order, ngroups):
    """``v`` (..., n) as (..., ngroups, L): each group's elements in their flat order."""
    if order is not None:
        v = v[..., order]
    return v.reshape(v.shape[:-1] + (ngroups, -1))


def _from_rows(r, order):
    r = r.reshape(r.shape[:-2] + (-1,))
    if order is None:
        return r
    out = np.empty_like(r)
    out[..., order] = r
    return out


def _exclusive_products(R):
    """Along the last axis, each element's product of the others: exclusive prefix times
    exclusive suffix, multiplied in the kernel's order."""
    pre = np.ones_like(R)
    np.cumprod(R[..., :-1], axis=-1, out=pre[..., 1:])
    suf = np.ones_like(R)
    suf[..., :-1] = np.cumprod(R[..., :0:-1], axis=-1)[..., ::-1]
    return pre * suf


def _prod_others(ctx, a, gi, ngroups, n, f0):
    x = ctx.val(a)
    zeros = np.count_nonzero(x == 0.0)
    if zeros > 1 and f0 != 0.0:     # prod() of everything with two zeros: 0 (the kernel's)
        return np.zeros(n)
    order = _group_order(gi)
    R = _to_rows(x, order, ngroups)
    if zeros == 0:                  # PyTorch: result / input
        return _spread_flat(np.cumprod(R, axis=-1)[:, -1], gi) / x
    return _from_rows(_exclusive_products(R), order)


def _prod_tangent(ctx, s, a, t, gi, ngroups, n, f0):
    return _group_sum(t * _prod_others(ctx, a, gi, ngroups, n, f0), gi, ngroups)


def _prod_batched_reverse(ctx, s, a, G, gi, ngroups, n, f0):
    return _group_spread(G, gi, ngroups, n) * _prod_others(ctx, a, gi, ngroups, n, f0)


def _prod_curvature(ctx, s, a, g, gi, ngroups, n, f0):
    """g_o sum_j!=i t_j prod_k!={i,j} x_k, by the number of zeros of the group: none,
    E_i (sum_j t_j / x_j - t_i / x_i); one (at z), t_z E_i off it and sum_j!=z t_j E_j
    at it; two, the other zero's t times E at each; more, 0 (E: the exclusive
    product with the zeros set to 1)."""
    t = ctx.tan(a)
    if t is None:
        return None
    order = _group_order(gi)
    X = _to_rows(ctx.val(a), order, ngroups)
    T = _to_rows(t, order, ngroups)
    zero = X == 0.0
    z = zero.sum(axis=-1, keepdims=True)
    Xs = np.where(zero, 1.0, X)
    E = _exclusive_products(Xs)
    TX = T / Xs
    # (without zeros, the others' product as the first derivative takes it: PyTorch's
    # result / input, NaN at an infinite input, as in the compiled program)
    W = _to_rows(_prod_others(ctx, a, gi, ngroups, n, f0), order, ngroups)
    d = np.where(z == 0, W * (TX.sum(axis=-1, keepdims=True) - TX), 0.0)
    if z.max(initial=0) > 0:
        tz = np.where(zero, T, 0.0).sum(axis=-1, keepdims=True)
        one = np.where(zero, np.where(zero, 0.0, T * E).sum(axis=-1, keepdims=True), tz * E)
        d = d + np.where(z == 1, one, 0.0) + np.where((z == 2) & zero, (tz - T) * E, 0.0)
    return _from_rows(d * np.asarray(g, np.float64).reshape(ngroups, 1), order)


forward_mode(PROD)((_prod_tangent, _prod_batched_reverse, _prod_curvature))


# -- var, std ---------------------------------------------------------------------
VAR = declare("var", SAVE_A)
STD = declare("std", SAVE_A | SAVE_OUT)


def _correction(unbiased, correction):
    if correction is not None:
        return float(correction)
    return 1.0 if unbiased in (None, True) else 0.0


def _check_float(x):
    if x.dtype.kind != "f":
        raise RuntimeError("std and var only support floating point and complex dtypes")


def _var_std(kind, what, input, dim, unbiased, keepdim, correction, kw):
    x = input
    if kw:
        dim, keepdim = numpy_names(what, kw, dim, keepdim)
    _check_float(x)
    axes = normalize_dims(dim, x.ndim)
    c = _correction(unbiased, correction)
    d = x._data
    if _count(d.shape, axes) - c > 0:
        out = _var_values(kind, d, axes, c, keepdim)
    else:       # (inf or nan, as PyTorch's; its warning, not NumPy's "Degrees of freedom <= 0 for slice")
        warnings.warn("%s(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      "factor (input numel divided by output numel)." % what, UserWarning, stacklevel=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = _var_values(kind, d, axes, c, keepdim)
    return _record(kind, x, out, axes, "VarBackward0" if kind == VAR else "StdBackward0", c)


def _var_values(kind, d, axes, c, keepdim):
    with np.errstate(all="ignore"):
        return d.var(axis=axes, ddof=c, keepdims=keepdim) if kind == VAR else d.std(axis=axes, ddof=c, keepdims=keepdim)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, **kw):
    return _var_std(VAR, "var", input, dim, unbiased, keepdim, correction, kw)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, **kw):
    return _var_std(STD, "std", input, dim, unbiased, keepdim, correction, kw)


@differentiable(VAR)
def _var_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    x = ctx.value(a)
    K = n // ngroups
    m = gather_flat(scatter_add(x, gi, ngroups), gi) / K
    return _spread(g, gi, ngroups, n) * 2.0 * (x - m) / (K - f0)


@differentiable(STD)
def _std_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    x = ctx.value(a)
    K = n // ngroups
    m = gather_flat(scatter_add(x, gi, ngroups), gi) / K
    Y = gather_flat(ctx.value(s), gi)
    nz = Tensor._wrap(Y._data != 0)
    return tensor_where(nz, _spread(g, gi, ngroups, n) * (x - m) / ((K - f0) * tensor_where(nz, Y, 1.0)), 0.0)


def _var_std_replay(k):
    def rule(a, axes, ax, shape, name, f0):
        def var_std(v):         # ddof f0, quiet as the recorders are
            with np.errstate(invalid="ignore", divide="ignore"):
                x = v[a]
                return np.asarray(x.var(axis=axes, ddof=f0) if k == VAR else x.std(axis=axes, ddof=f0)).reshape(shape)
        return var_std
    return rule


replay(VAR)(_var_std_replay(VAR))
replay(STD)(_var_std_replay(STD))


# -- var, std: d var = 2 (x - m) . t / (L - c), with L a group's size and c the
# correction (f0); std's is var's / (2 std), 0 where std is 0 (the reverse's) --------------
def _centered(ctx, a, gi, ngroups, n):
    x = ctx.val(a)
    L = n // ngroups
    return x - _spread_flat(_totals_flat(x, gi, ngroups) / L, gi), L


def _centered_tangent(t, gi, ngroups, n):
    L = n // ngroups
    return t - _group_spread(_group_sum(t, gi, ngroups) / L, gi, ngroups, n)


def _var_tangent(ctx, s, a, t, gi, ngroups, n, f0):
    c, L = _centered(ctx, a, gi, ngroups, n)
    return _group_sum(t * (2.0 * c / (L - f0)), gi, ngroups)


def _var_batched_reverse(ctx, s, a, G, gi, ngroups, n, f0):
    c, L = _centered(ctx, a, gi, ngroups, n)
    return _group_spread(G, gi, ngroups, n) * 2.0 * c / (L - f0)


def _var_curvature(ctx, s, a, g, gi, ngroups, n, f0):
    t = ctx.tan(a)
    if t is None:
        return None
    L = n // ngroups
    return _spread_flat(np.asarray(g, np.float64), gi) * 2.0 * _centered_tangent(t, gi, ngroups, n) / (L - f0)


def _std_parts(ctx, s, a, gi, ngroups, n):
    """(x - m, L, where std is not 0, std on every element with 1 where it is 0)."""
    c, L = _centered(ctx, a, gi, ngroups, n)
    y = _spread_flat(ctx.val(s), gi)
    nz = y != 0.0
    return c, L, nz, np.where(nz, y, 1.0)


def _std_tangent(ctx, s, a, t, gi, ngroups, n, f0):
    c, L, nz, y = _std_parts(ctx, s, a, gi, ngroups, n)
    return _group_sum(t * np.where(nz, c / ((L - f0) * y), 0.0), gi, ngroups)


def _std_batched_reverse(ctx, s, a, G, gi, ngroups, n, f0):
    c, L, nz, y = _std_parts(ctx, s, a, gi, ngroups, n)
    return np.where(nz, _group_spread(G, gi, ngroups, n) * c / ((L - f0) * y), 0.0)


def _std_curvature(ctx, s, a, g, gi, ngroups, n, f0):
    """d of g (x - m) / ((L - c) y): g ((t - mean t) / y - (x - m) dy / y^2) / (L - c)."""
    t = ctx.tan(a)
    if t is None:
        return None
    c, L, nz, y = _std_parts(ctx, s, a, gi, ngroups, n)
    dy = _group_spread(_output_tangent(ctx, s, a, t, gi, ngroups, n, f0, STD), gi, ngroups, n)
    d = (_centered_tangent(t, gi, ngroups, n) / y - c * dy / (y * y)) / (L - f0)
    return np.where(nz, _spread_flat(np.asarray(g, np.float64), gi) * d, 0.0)


forward_mode(VAR)((_var_tangent, _var_batched_reverse, _var_curvature))
forward_mode(STD)((_std_tangent, _std_batched_reverse, _std_curvature))


# -- amax, amin, max(), min() (the extremum kernel) -------------------------------------
EXTREMUM = declare("extremum", SAVE_A | SAVE_OUT)


def _check_nonempty(x, what, dim):
    if x._data.size == 0:
        if dim is None:
            raise RuntimeError("%s(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument." % what)
        for a in normalize_dims(dim, x.ndim):
            if x.shape[a] == 0:
                raise IndexError("%s(): Expected reduction dim %d to have non-zero size." % (what, a))


def amax(input, dim=None, keepdim=False, **kw):
    x = input
    if kw:
        dim, keepdim = numpy_names("amax", kw, dim, keepdim)
    axes = normalize_dims(None if dim == () else dim, x.ndim)
    _check_nonempty(x, "amax", axes)
    return _record(EXTREMUM, x, x._data.max(axis=axes, keepdims=keepdim), axes, "AmaxBackward0", 1.0)


def amin(input, dim=None, keepdim=False, **kw):
    x = input
    if kw:
        dim, keepdim = numpy_names("amin", kw, dim, keepdim)
    axes = normalize_dims(None if dim == () else dim, x.ndim)
    _check_nonempty(x, "amin", axes)
    return _record(EXTREMUM, x, x._data.min(axis=axes, keepdims=keepdim), axes, "AminBackward0", 1.0)


@differentiable(EXTREMUM)
def _extremum_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    yg = ctx.value(s)._data[gi]
    xd = ctx.value(a)._data
    hit = ((xd == yg) | (np.isnan(xd) & np.isnan(yg))).astype(np.float64)
    cnt = np.bincount(gi, weights=hit, minlength=ngroups)
    w = hit / np.where(cnt == 0, 1.0, cnt)[gi]
    if f0 != 0.0:       # amax/amin: a NaN result sends NaN to its whole group (PyTorch)
        w[np.isnan(yg)] = np.nan
    return _spread(g, gi, ngroups, n) * Tensor._wrap(w.astype(g.dtype))


# the value an extremum entry of another op takes of all of its input, by grad_fn name
# (ops/order.py adds median's and nanmedian's: their gradient is max()'s)
EXTREMUM_OF_ALL = {}


@replay(EXTREMUM)
def _extremum_replay(a, axes, ax, shape, name, f0):
    of_all = EXTREMUM_OF_ALL.get(name)
    if of_all is not None:
        return lambda v: np.asarray(of_all(v[a])).reshape(shape)
    pick = np.max if name.startswith(("Max", "Amax")) else np.min
    return lambda v: np.asarray(pick(v[a], axis=axes)).reshape(shape)


# -- amax, amin, max(), min(): the mean of the tied elements' tangents (PyTorch's
# amax/amin and evenly-read rules, and the transpose of the reverse: a NaN maximum takes
# the NaNs' for max()/min(), and is NaN for amax/amin); piecewise linear, no curvature ---
def _extremum_hits(ctx, s, a, gi, ngroups, n, f0):
    """(hit: the elements equal to their group's extremum, their count on every element,
    the elements whose group's result is NaN for amax/amin, or None)."""
    x = ctx.val(a)
    yg = _spread_flat(ctx.val(s), gi)
    hit = (x == yg) | (np.isnan(x) & np.isnan(yg))
    cnt = _spread_flat(_totals_flat(hit.astype(np.float64), gi, ngroups), gi)
    bad = np.isnan(yg) if f0 != 0.0 else None
    return hit, np.where(cnt == 0.0, 1.0, cnt), (bad if bad is not None and bad.any() else None)


def _extremum_tangent(ctx, s, a, t, gi, ngroups, n, f0):
    hit, cnt, bad = _extremum_hits(ctx, s, a, gi, ngroups, n, f0)
    w = hit / cnt
    if bad is not None:
        w[bad] = np.nan
    return _group_sum(t * w, gi, ngroups)


def _extremum_batched_reverse(ctx, s, a, G, gi, ngroups, n, f0):
    hit, cnt, bad = _extremum_hits(ctx, s, a, gi, ngroups, n, f0)
    dx = np.where(hit, _group_spread(G, gi, ngroups, n) / cnt, 0.0)
    if bad is not None:
        dx[:, bad] = np.nan
    return dx


forward_mode(EXTREMUM)((_extremum_tangent, _extremum_batched_reverse, lambda ctx, s, a, g, gi, ngroups, n, f0: None))


# -- logsumexp --------------------------------------------------------------------
LOGSUMEXP = declare("logsumexp", SAVE_A | SAVE_OUT)


@_quiet
def logsumexp(input, dim=REQUIRED, keepdim=False, **kw):
    x = input
    if kw:
        dim, keepdim = numpy_names("logsumexp", kw, dim, keepdim, REQUIRED)
    if dim is REQUIRED:
        raise TypeError("logsumexp() missing 1 required positional argument: 'dim'")
    axes = normalize_dims(dim, x.ndim)
    if x.dtype.kind != "f":         # (an integer tensor's is computed in the default dtype)
        x = Tensor._wrap(x._data.astype(DEFAULT))
    return _record(LOGSUMEXP, x, _logsumexp_values(x._data, axes, keepdim), axes, "LogsumexpBackward0")


def _logsumexp_values(d, axes, keepdim):
    if d.ndim == 0:     # the log-sum-exp of one number is the number
        out = d.astype(np.result_type(d.dtype, np.float32))
    else:
        from scipy import special      # (imported on first use: 0.2 s)
        out = special.logsumexp(d, axis=axes, keepdims=keepdim) if d.size else \
            np.full(np.sum(d, axis=axes, keepdims=keepdim).shape, -np.inf, d.dtype)
    return np.asarray(out, d.dtype)


@differentiable(LOGSUMEXP)
def _logsumexp_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    x = ctx.value(a)
    return _spread(g, gi, ngroups, n) * _exp(x - gather_flat(ctx.value(s), gi))


@replay(LOGSUMEXP)
def _logsumexp_replay(a, axes, ax, shape, name, f0):
    return lambda v: _logsumexp_values(v[a], axes, False).reshape(shape)


# -- logsumexp: p = exp(x - y) (the reverse's weights), dy = p . t, d(g p) = g p (t - dy) ----
def _lse_weights(ctx, s, a, gi):
    return np.exp(ctx.val(a) - _spread_flat(ctx.val(s), gi))


def _lse_tangent(ctx, s, a, t, gi, ngroups, n, f0):
    return _group_sum(t * _lse_weights(ctx, s, a, gi), gi, ngroups)


def _lse_batched_reverse(ctx, s, a, G, gi, ngroups, n, f0):
    return _group_spread(G, gi, ngroups, n) * _lse_weights(ctx, s, a, gi)


def _lse_curvature(ctx, s, a, g, gi, ngroups, n, f0):
    t = ctx.tan(a)
    if t is None:
        return None
    dy = _group_spread(_output_tangent(ctx, s, a, t, gi, ngroups, n, f0, LOGSUMEXP), gi, ngroups, n)
    return _spread_flat(np.asarray(g, np.float64), gi) * _lse_weights(ctx, s, a, gi) * (t - dy)


forward_mode(LOGSUMEXP)((_lse_tangent, _lse_batched_reverse, _lse_curvature))


# -- softmax, log_softmax ------------------------------------------------------------
SOFTMAX = declare("softmax", SAVE_OUT, per_row=True)
LOG_SOFTMAX = declare("log_softmax", SAVE_OUT, per_row=True)


def _shifted(d, axis):
    """``d - max(d)`` along ``axis`` (a row of -inf stays -inf, not nan)."""
    m = d.max(axis=axis, keepdims=True)
    if not np.isfinite(m).all():
        m[~np.isfinite(m)] = 0.0
    return d - m


def _check_softmax(x, axes, what):
    if x.dtype.kind != "f":
        last = "lastdim_" if not axes or axes[0] == x.ndim - 1 else ""
        raise NotImplementedError("\"%s_%skernel_impl\" not implemented for '%s'" % (what, last, torch_name(x.dtype)))


def _softmax_args(what, x, dim, dtype, kw):
    """(input in ``dtype``, axes) of softmax / log_softmax, with PyTorch's errors."""
    if kw:
        dim, _ = numpy_names(what, kw, dim, None, REQUIRED)
    if dim is REQUIRED:
        raise TypeError("%s() missing 1 required positional argument: 'dim'" % what)
    if dtype is not None:
        x = to_dtype(x, dtype)
    axes = (_wrap_dim(dim, x.ndim),) if x.ndim else (_wrap_dim(dim, 0) and ())
    _check_softmax(x, axes, what)
    return x, axes


@_quiet
def softmax(input, dim=REQUIRED, dtype=None, **kw):
    x, axes = _softmax_args("softmax", input, dim, dtype, kw)
    return _record(SOFTMAX, x, _softmax_values(x._data, axes[0] if axes else None), axes, "SoftmaxBackward0")


def _by_rows(k, d, ax):
    """Softmax or log-softmax of float64 rows (the last axis, contiguous) in one call
    of the replay's kernel, once the kernels are loaded, for up to 1,024 elements;
    else None.  Small: NumPy's seven calls cost most of the op (64x10: 30 us against
    18); from about 1,000 elements NumPy's SIMD exp wins (64x64: 56 us against 95)."""
    if not (_jit.READY[0] and d.size <= 1024 and d.dtype == np.float64 and ax == d.ndim - 1
            and d.flags.c_contiguous):
        return None
    y = np.empty(d.shape)
    reduce_forward(k, d.reshape(-1), y.reshape(-1), d.size // d.shape[-1])
    return y


def _softmax_values(d, ax):
    if d.ndim and d.size:
        y = _by_rows(SOFTMAX, d, ax)
        if y is not None:
            return y
        e = np.exp(_shifted(d, ax))
        return e / e.sum(axis=ax, keepdims=True)
    return np.ones_like(d)


@_quiet
def log_softmax(input, dim=REQUIRED, dtype=None, **kw):
    x, axes = _softmax_args("log_softmax", input, dim, dtype, kw)
    return _record(LOG_SOFTMAX, x, _log_softmax_values(x._data, axes[0] if axes else None), axes,
                   "LogSoftmaxBackward0")


def _log_softmax_values(d, ax):
    if d.ndim and d.size:
        y = _by_rows(LOG_SOFTMAX, d, ax)
        if y is not None:
            return y
        s = _shifted(d, ax)
        return s - np.log(np.exp(s).sum(axis=ax, keepdims=True))
    return np.zeros_like(d)


@jit(inline="always")
def softmax_forward(x, y, ngroups, k):
    """Softmax (``k == SOFTMAX``) or log-softmax of ``ngroups`` runs, from x - max as ``_shifted``."""
    kk = x.size // ngroups
    for g in range(ngroups):
        lo = g * kk
        m = x[lo]
        for i in range(lo + 1, lo + kk):
            if x[i] > m or x[i] != x[i]:
                m = x[i]
        if not math.isfinite(m):
            m = 0.0
        for i in range(lo, lo + kk):
            y[i] = math.exp(x[i] - m)
        t = pairwise_sum(y, lo, kk)
        if k == LOG_SOFTMAX:
            t = math.log(t)
            for i in range(lo, lo + kk):
                y[i] = (x[i] - m) - t
        else:
            for i in range(lo, lo + kk):
                y[i] = y[i] / t


@differentiable(SOFTMAX)
def _softmax_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    y = ctx.value(s)
    return y * (g - gather_flat(scatter_add(g * y, gi, ngroups), gi))


@differentiable(LOG_SOFTMAX)
def _log_softmax_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    y = ctx.value(s)
    return g - _exp(y) * gather_flat(scatter_add(g, gi, ngroups), gi)


@replay(SOFTMAX)
def _softmax_replay(a, axes, ax, shape, name, f0):
    return lambda v: _softmax_values(v[a], ax)


@replay(LOG_SOFTMAX)
def _log_softmax_replay(a, axes, ax, shape, name, f0):
    return lambda v: _log_softmax_values(v[a], ax)


# -- softmax, log_softmax: from the output alone (all they save); a group is a row -------
def _row_sums(t, gi, ngroups, n):
    """Each row's sum of the batch ``t`` on every element of the row."""
    return _group_spread(_group_sum(t, gi, ngroups), gi, ngroups, n)


def _softmax_tangent(ctx, s, a, t, gi, ngroups, n, f0):
    y = ctx.val(s)
    return y * (t - _row_sums(t * y, gi, ngroups, n))


def _softmax_batched_reverse(ctx, s, a, G, gi, ngroups, n, f0):
    y = ctx.val(s)
    return y * (G - _row_sums(G * y, gi, ngroups, n))


def _softmax_curvature(ctx, s, a, g, gi, ngroups, n, f0):
    """d of y (g - sum g y): dy (g - sum g y) - y sum g dy."""
    t = ctx.tan(a)
    if t is None:
        return None
    y, g = ctx.val(s), np.asarray(g, np.float64)[None, :]
    dy = _output_tangent(ctx, s, a, t, gi, ngroups, n, f0, SOFTMAX)
    return dy * (g - _row_sums(g * y, gi, ngroups, n)) - y * _row_sums(g * dy, gi, ngroups, n)


def _log_softmax_tangent(ctx, s, a, t, gi, ngroups, n, f0):
    return t - _row_sums(np.exp(ctx.val(s)) * t, gi, ngroups, n)


def _log_softmax_batched_reverse(ctx, s, a, G, gi, ngroups, n, f0):
    return G - np.exp(ctx.val(s)) * _row_sums(G, gi, ngroups, n)


def _log_softmax_curvature(ctx, s, a, g, gi, ngroups, n, f0):
    """d of g - exp(y) sum g: -exp(y) dy sum g."""
    t = ctx.tan(a)
    if t is None:
        return None
    dy = _output_tangent(ctx, s, a, t, gi, ngroups, n, f0, LOG_SOFTMAX)
    return -np.exp(ctx.val(s)) * dy * _row_sums(np.asarray(g, np.float64)[None, :], gi, ngroups, n)


forward_mode(SOFTMAX)((_softmax_tangent, _softmax_batched_reverse, _softmax_curvature))
forward_mode(LOG_SOFTMAX)((_log_softmax_tangent, _log_softmax_batched_reverse, _log_softmax_curvature))


# -- the scans (cumsum, cumprod, logcumsumexp): batches as (K,) + the input's shape,
# scanned along the row axis (rows of one element, a 0-d input's too, as (n, 1)) --------
def _scan_layout(ctx, s, ngroups, n):
    """(shape, axis) of the entry's rows, for a batch with a leading axis."""
    if ngroups == n:
        return (n, 1), 2
    shape, ax = _row_layout(ctx, s)
    return shape, ax + 1


def _batch(v, shape):
    return v.reshape((-1,) + shape)


def _rev_cumsum(v, ax):
    """The sums from each element to its row's end, added from the end (the kernels' order)."""
    return np.flip(np.cumsum(np.flip(v, ax), axis=ax), ax)


def _on_rows(rule):
    """A scan's rule ``rule(X, Y, T, ax, f0)`` on the input ``X`` and output ``Y`` laid
    out by rows, as a ``forward_mode`` rule of the K-row batch ``t`` (tangents or adjoints)."""
    def f(ctx, s, a, t, gi, ngroups, n, f0):
        shape, ax = _scan_layout(ctx, s, ngroups, n)
        X, Y = _batch(ctx.val(a), shape), _batch(ctx.val(s), shape)
        return rule(X, Y, _batch(t, shape), ax, f0).reshape(t.shape[0], n)
    return f


# -- cumsum -----------------------------------------------------------------------
CUMSUM = declare("cumsum", per_row=True)


@_quiet
def cumsum(input, dim=REQUIRED, *, dtype=None, **kw):
    """Cumulative sum along ``dim``; an integer or bool input sums in int64
    (PyTorch), ``dtype=`` casts the input first."""
    return _scan(CUMSUM, "cumsum", "CumsumBackward0", np.cumsum, input, dim, dtype, kw)


def _scan(code, name, grad_fn, accumulate, x, dim, dtype, kw):
    """A cumulative op (cumsum, cumprod) recorded: PyTorch's argument checks, ``dtype=``
    casting the input first, integers and bools accumulated in int64."""
    if kw:
        dim, _ = numpy_names(name, kw, dim, None, REQUIRED)
    if dim is REQUIRED:
        raise TypeError('%s() missing 1 required positional arguments: "dim"' % name)
    if dtype is not None:
        x = to_dtype(x, dtype)
    d = x._data
    ax = _wrap_dim(dim, d.ndim)
    wide = np.int64 if d.dtype.kind in "biu" and dtype is None else d.dtype
    if d.ndim == 0:
        return _record(code, x, d.astype(wide), (), grad_fn)
    return _record(code, x, accumulate(d, axis=ax, dtype=wide), (ax,), grad_fn)


@jit(inline="always")
def cumsum_forward(x, y, ngroups):
    kk = x.size // ngroups
    for g in range(ngroups):
        t = 0.0
        for i in range(g * kk, (g + 1) * kk):
            t += x[i]
            y[i] = t


@differentiable(CUMSUM)
def _cumsum_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    return g if ngroups == n else _reverse_cumsum(ctx, s, g, gi, ngroups)


def _reverse_cumsum(ctx, s, g, gi, ngroups):
    """sum of g over each row from each element on: the row's total minus the
    cumulative sum before the element (tapegrad ops, so differentiable again)."""
    at = int(ctx.ints[s, _tp.AUX])
    aux = ctx.aux
    nd = int(aux[at])
    shape = tuple(int(v) for v in aux[at + 2:at + 2 + nd])
    strides = aux[at + 2 + nd:at + 2 + 2 * nd]
    ax = next(d for d in range(nd) if strides[d] == 0)
    total = gather_flat(scatter_add(g, gi, ngroups), gi)
    return total - cumsum(g.reshape(shape), ax).reshape(-1) + g


@replay(CUMSUM)
def _cumsum_replay(a, axes, ax, shape, name, f0):
    if ax is None:
        return lambda v: v[a].copy().reshape(shape)
    return lambda v: np.cumsum(v[a], axis=ax).reshape(shape)


def _cumsum_tangent(ctx, s, a, t, gi, ngroups, n, f0):
    shape, ax = _scan_layout(ctx, s, ngroups, n)
    return np.cumsum(_batch(t, shape), axis=ax).reshape(t.shape[0], n)


def _cumsum_batched_reverse(ctx, s, a, G, gi, ngroups, n, f0):
    shape, ax = _scan_layout(ctx, s, ngroups, n)
    return _rev_cumsum(_batch(G, shape), ax).reshape(G.shape[0], n)


forward_mode(CUMSUM)((_cumsum_tangent, _cumsum_batched_reverse, lambda ctx, s, a, g, gi, ngroups, n, f0: None))


# -- cumprod ----------------------------------------------------------------------
CUMPROD = declare("cumprod", SAVE_A | SAVE_OUT, per_row=True)


@_quiet
def cumprod(input, dim=REQUIRED, *, dtype=None, out=None, **kw):
    """Cumulative product along ``dim``; integer and bool inputs multiply in int64
    (PyTorch), ``dtype=`` casts the input first.  The gradient is PyTorch's, exact
    with zeros: before a row's first zero ``reversed_cumsum(g * y) / x``, at it the
    sum of ``g`` times the products of the others, after it 0."""
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    return _scan(CUMPROD, "cumprod", "CumprodBackward0", np.cumprod, input, dim, dtype, kw)


def _row_layout(ctx, s):
    """(shape, axis) of the rows of per-row entry ``s``, from its group descriptor."""
    at = int(ctx.ints[s, _tp.AUX])
    aux = ctx.aux
    nd = int(aux[at])
    shape = tuple(int(v) for v in aux[at + 2:at + 2 + nd])
    strides = aux[at + 2 + nd:at + 2 + 2 * nd]
    return shape, next(d for d in range(nd) if strides[d] == 0)


def _reversed_cumsum(t, ax):
    from .shape import flip
    return flip(cumsum(flip(t, [ax]), ax), [ax])


@differentiable(CUMPROD)
def _cumprod_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    if ngroups == n:
        return g
    shape, ax = _row_layout(ctx, s)
    return _cumprod_vjp(ctx.value(a).reshape(shape), ctx.value(s).reshape(shape), g.reshape(shape), ax).reshape(-1)


def _cumprod_vjp(x, y, G, ax):
    """The adjoint of ``x`` for ``y = cumprod(x, ax)`` and adjoint ``G``, exact as a
    function of ``x`` with zeros (so differentiable again): before a row's first zero
    z ``reversed_cumsum(G y) / x``; at z the sum of ``G`` times the products without
    x_z; after z, x_z (zero) times this adjoint for x with x_z set to 1 (one level of
    recursion per zero of a row)."""
    zero = x._data == 0
    seen = np.cumsum(zero, axis=ax)
    before = Tensor._wrap(seen == 0)
    dx = tensor_where(before, _reversed_cumsum(G * y, ax) / tensor_where(before, x, 1.0), 0.0)
    if not zero.any():
        return dx
    first = Tensor._wrap(zero & (seen == 1))
    xp = tensor_where(first, 1.0, x)
    yp = cumprod(xp, ax)
    Gm = tensor_where(Tensor._wrap(seen >= 1), G, 0.0)
    dx = dx + tensor_where(first, sum(Gm * yp, ax, True), 0.0)
    after = (seen >= 1) & ~(zero & (seen == 1))
    if after.any():
        xz = sum(tensor_where(first, x, 0.0), ax, True)
        dx = dx + tensor_where(Tensor._wrap(after), xz * _cumprod_vjp(xp, yp, Gm, ax), 0.0)
    return dx


@replay(CUMPROD)
def _cumprod_replay(a, axes, ax, shape, name, f0):
    if ax is None:
        return lambda v: v[a].copy().reshape(shape)
    return lambda v: np.cumprod(v[a], axis=ax).reshape(shape)


def _cumprod_jvp(X, Y, T, ax):
    """PyTorch's cumprod_jvp, exact with zeros: before a row's first zero
    y cumsum(t / x); from it on the cumulative product of x with t at the first zero
    (0 after a second zero)."""
    zero = X == 0.0
    dy = np.cumsum(T / np.where(zero, 1.0, X), axis=ax) * Y
    if not zero.any():
        return dy
    first = zero & (np.cumsum(zero, axis=ax) == 1)
    new = np.cumprod(np.where(first, T, X), axis=ax)
    return np.where(np.cumsum(first, axis=ax) > 0, new, dy)


def _cumprod_vjp_np(X, Y, G, ax):
    """The reverse kernel's: before a row's first zero reversed_cumsum(g y) / x, at it
    the sum of g times the products of the others, after it 0."""
    zero = X == 0.0
    seen = np.cumsum(zero, axis=ax)
    before = seen == 0
    dx = np.where(before, _rev_cumsum(G * Y, ax) / np.where(before, X, 1.0), 0.0)
    if zero.any():
        first = zero & (seen == 1)
        Yp = np.cumprod(np.where(first, 1.0, X), axis=ax)
        dx = dx + np.where(first, (np.where(seen >= 1, G, 0.0) * Yp).sum(axis=ax, keepdims=True), 0.0)
    return dx


def _cumprod_curvature_np(X, Y, T, dY, g, ax):
    """The exact derivative of ``_cumprod_vjp_np``: before a row's first zero z,
    d(R / x) with R = reversed_cumsum(g y); at z, sum over j >= z of g_j d(cumprod(xp))_j,
    xp being x with x_z = 1; after z, where the adjoint is x_z (0) times the adjoint for
    xp, t_z times that adjoint."""
    zero = X == 0.0
    seen = np.cumsum(zero, axis=ax)
    before = seen == 0
    Xs = np.where(before, X, 1.0)
    d = np.where(before, _rev_cumsum(g * dY, ax) / Xs - _rev_cumsum(g * Y, ax) * T / (Xs * Xs), 0.0)
    if not zero.any():
        return d
    first = zero & (seen == 1)
    Xp = np.where(first, 1.0, X)
    Yp = np.cumprod(Xp, axis=ax)
    Gm = np.where(seen >= 1, g, 0.0)
    dYp = _cumprod_jvp(Xp, Yp, np.where(first, 0.0, T), ax)
    d = d + np.where(first, (Gm * dYp).sum(axis=ax, keepdims=True), 0.0)
    after = (seen >= 1) & ~first
    if after.any():
        tz = np.where(first, T, 0.0).sum(axis=ax, keepdims=True)
        d = d + np.where(after, tz * _cumprod_vjp_np(Xp, Yp, Gm, ax), 0.0)
    return d



_cumprod_tangent = _on_rows(lambda X, Y, T, ax, f0: _cumprod_jvp(X, Y, T, ax))
_cumprod_batched_reverse = _on_rows(lambda X, Y, G, ax, f0: _cumprod_vjp_np(X, Y, G, ax))


def _cumprod_curvature(ctx, s, a, g, gi, ngroups, n, f0):
    t = ctx.tan(a)
    if t is None:
        return None
    shape, ax = _scan_layout(ctx, s, ngroups, n)
    X, Y = _batch(ctx.val(a), shape), _batch(ctx.val(s), shape)
    dY = _batch(_output_tangent(ctx, s, a, t, gi, ngroups, n, f0, CUMPROD), shape)
    d = _cumprod_curvature_np(X, Y, _batch(t, shape), dY, _batch(np.asarray(g, np.float64), shape), ax)
    return d.reshape(t.shape[0], n)


forward_mode(CUMPROD)((_cumprod_tangent, _cumprod_batched_reverse, _cumprod_curvature))


# -- logcumsumexp -------------------------------------------------------------------
LOGCUMSUMEXP = declare("logcumsumexp", SAVE_A | SAVE_OUT, per_row=True)


@_quiet
def logcumsumexp(input, dim, *, out=None):
    """``log(cumsum(exp(x)))`` along ``dim`` without overflow or underflow (NumPy's
    ``logaddexp.accumulate``); the reverse sums ``g_i exp(x_j - y_i)`` by a recurrence
    whose factors are at most 1."""
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    x = input
    d = x._data
    if d.dtype.kind != "f":
        raise NotImplementedError('"logcumsumexp_out_cpu" not implemented for \'%s\'' % torch_name(d.dtype))
    return _logcumsumexp(x, _wrap_dim(dim, d.ndim), 0.0)


def _logcumsumexp(x, ax, f0):
    """f0 = 0: PyTorch's NaN gradient at a row's leading -infs; 1 (the differentiable
    reverse's own use, whose -inf terms are absent ones): 0 there."""
    d = x._data
    if d.ndim == 0:
        return _record(LOGCUMSUMEXP, x, d.copy(), (), "LogcumsumexpBackward0", f0)
    return _record(LOGCUMSUMEXP, x, np.logaddexp.accumulate(d, axis=ax), (ax,), "LogcumsumexpBackward0", f0)


@differentiable(LOGCUMSUMEXP)
def _logcumsumexp_differentiable(ctx, s, a, g, gi, ngroups, n, f0):
    if ngroups == n:
        return g
    from .shape import flip
    shape, ax = _row_layout(ctx, s)
    x = ctx.value(a).reshape(shape)
    y = ctx.value(s).reshape(shape)
    G = g.reshape(shape)
    gd = G._data
    empty = y._data == -np.inf      # (a row's leading -infs: no terms, and no -inf - -inf)
    if empty.any():
        y = tensor_where(Tensor._wrap(empty), 0.0, y)
    dx = None
    for sign, mask in ((1.0, (gd > 0) & ~empty), (-1.0, (gd < 0) & ~empty)):    # sum_i>=j g_i exp(x_j - y_i)
        if not mask.any():                                                     # in logs, by sign
            continue
        m = Tensor._wrap(mask)
        lg = tensor_where(m, _log(tensor_where(m, G * sign, 1.0)), -np.inf)
        r = flip(_logcumsumexp(flip(lg - y, [ax]), ax, 1.0), [ax])
        part = _exp(x + r)
        dx = part * sign if dx is None else dx + part * sign
    if dx is None:
        dx = G * 0.0
    if empty.any() and f0 == 0.0:
        dx = tensor_where(Tensor._wrap(empty), np.nan, dx)
    return dx.reshape(-1)


@replay(LOGCUMSUMEXP)
def _logcumsumexp_replay(a, axes, ax, shape, name, f0):
    if ax is None:
        return lambda v: v[a].copy().reshape(shape)
    return lambda v: np.logaddexp.accumulate(v[a], axis=ax).reshape(shape)


# -- logcumsumexp: dy_j = sum_k<=j t_k exp(x_k - y_j) and the reverse's
# sum_i>=j g_i exp(x_j - y_i), each in logs by sign (no overflow, as the kernel's
# recurrence); the curvature is t R(g) - R(g dy), R being the reverse.  At a row's leading
# -infs (y = -inf) the tangent is 0 (PyTorch's jvp, there and after them: it is NaN only
# for a row of -infs alone) and the reverse NaN when f0 = 0, as the kernel's ----------------
def _signed_logs(v, mask):
    """log |v| where ``mask`` (v of one sign), -inf elsewhere."""
    return np.where(mask, np.log(np.where(mask, np.abs(v), 1.0)), -np.inf)


def _nan_spread(v, out, ax, backward):
    """NaNs of ``v`` passed on along the rows (forward or backward), as the kernel's sums do."""
    bad = np.isnan(v)
    if not bad.any():
        return out
    if backward:
        bad = np.flip(np.logical_or.accumulate(np.flip(bad, ax), axis=ax), ax)
    else:
        bad = np.logical_or.accumulate(bad, axis=ax)
    return np.where(bad, np.nan, out)


def _lcse_jvp(X, Y, T, ax):
    out = np.zeros(np.broadcast_shapes(T.shape, X.shape))
    for sign, mask in ((1.0, T > 0.0), (-1.0, T < 0.0)):
        if mask.any():
            out += sign * np.exp(np.logaddexp.accumulate(_signed_logs(T, mask) + X, axis=ax) - Y)
    empty = Y == -np.inf        # (-inf - -inf: no terms)
    if empty.any():
        out = np.where(empty, 0.0, out)
    return _nan_spread(T, out, ax, False)


def _lcse_vjp(X, Y, G, ax, f0):
    empty = Y == -np.inf        # (no terms there: no -inf - -inf)
    Ys = np.where(empty, 0.0, Y)
    out = np.zeros(np.broadcast_shapes(G.shape, X.shape))
    for sign, mask in ((1.0, G > 0.0), (-1.0, G < 0.0)):
        mask = mask & ~empty
        if mask.any():
            r = np.flip(np.logaddexp.accumulate(np.flip(_signed_logs(G, mask) - Ys, ax), axis=ax), ax)
            out += sign * np.exp(X + r)
    lo = X == -np.inf           # the kernel's: nothing added, NaN at a row's leading -infs (f0 = 0)
    if lo.any():
        out = np.where(lo, np.where(empty & (f0 == 0.0), np.nan, 0.0), out)
    return _nan_spread(np.where(empty, 0.0, G), out, ax, True)


_lcse_tangent = _on_rows(lambda X, Y, T, ax, f0: _lcse_jvp(X, Y, T, ax))
_lcse_batched_reverse = _on_rows(_lcse_vjp)


def _lcse_curvature(ctx, s, a, g, gi, ngroups, n, f0):
    t = ctx.tan(a)
    if t is None:
        return None
    shape, ax = _scan_layout(ctx, s, ngroups, n)
    X, Y = _batch(ctx.val(a), shape), _batch(ctx.val(s), shape)
    dY = _batch(_output_tangent(ctx, s, a, t, gi, ngroups, n, f0, LOGCUMSUMEXP), shape)
    G = _batch(np.asarray(g, np.float64), shape)
    d = _batch(t, shape) * _lcse_vjp(X, Y, G, ax, f0) - _lcse_vjp(X, Y, G * dY, ax, f0)
    return d.reshape(t.shape[0], n)


forward_mode(LOGCUMSUMEXP)((_lcse_tangent, _lcse_batched_reverse, _lcse_curvature))


# -- max(dim), min(dim): a gather of the extrema (shape family) -----------------------
class MaxMin(tuple):
    """``(values, indices)``, like ``torch.return_types.max``."""
    __slots__ = ()

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def max_dim(x, dim, keepdim=False, largest=True):
    """max/min along one dim: values and first-occurrence indices; the gradient goes
    entirely to the returned index (PyTorch)."""
    from .shape import gather_linear
    ax = _wrap_dim(dim, x.ndim)
    what = "max" if largest else "min"
    d = x._data
    if d.ndim and d.shape[ax] == 0:
        raise IndexError("%s(): Expected reduction dim %d to have non-zero size." % (what, ax))
    idx, lin = extremum_lin(d, ax, keepdim, largest)
    values = gather_linear(x, lin, "MaxBackward0" if largest else "MinBackward0")
    if _tp.recording[0]:            # (a replay picks the elements again)
        rec = _tp.state().rec
        if rec is not None:
            rec.picked(x, values, ax, keepdim, largest)
    return MaxMin((values, Tensor._wrap(idx)))


def extremum_lin(d, ax, keepdim, largest):
    """(indices along ``ax``, flat indices into ``d``) of its first maxima (minima)."""
    if d.ndim == 0:
        idx = np.zeros((), np.int64)
    else:
        idx = (d.argmax(axis=ax) if largest else d.argmin(axis=ax)).astype(np.int64)
        idx = np.expand_dims(idx, ax)
    lin = np.arange(d.size, dtype=np.int64).reshape(d.shape)
    lin = np.take_along_axis(lin, idx, axis=ax) if d.ndim else lin
    if not keepdim and d.ndim:
        idx = np.squeeze(idx, ax)
        lin = np.squeeze(lin, ax)
    return idx, lin


# -- the family kernels: one branch per op ------------------------------------------
@jit
def reduce_reverse(k, g, x, y, dx, aux, at, ngroups, f0):
    """Add the adjoint of input ``x`` to ``dx`` for entry output ``y`` with adjoint
    ``g`` (``gi``: the group of each input element, from the descriptor ``aux[at:]``).
    False for a kernel index without a branch (``dx`` is then NaN)."""
    n = dx.size
    if n == 0:
        return True
    if ngroups == 1:
        if k == SUM or k == MEAN:
            v = g[0] if k == SUM else g[0] / n
            for i in range(n):
                dx[i] += v
            return True
        gi = np.zeros(n, np.int64)
    elif k == SUM:
        strided_gather_add(dx, g, aux, at)      # (each element its group's adjoint, no map made)
        return True
    elif k == MEAN:
        strided_gather_add(dx, g / (n // ngroups), aux, at)     # (the same bits: one division per group)
        return True
    else:
        gi = strided_map(aux, at)
    K = n // ngroups
    if k == PROD:     # PyTorch: result / input; with a zero anywhere, the exact product of the others
        zeros = 0           # (f0 = 1: prod() of everything, whose gradient is 0 when two or more are zero)
        for i in range(n):
            if x[i] == 0.0:
                zeros += 1
        if zeros > 1 and f0 != 0.0:
            return True
        if zeros == 0:
            p = np.ones(ngroups)
            for i in range(n):
                p[u64(gi[i])] *= x[i]
            for i in range(n):
                o = u64(gi[i])
                dx[i] += g[o] * (p[o] / x[i])
        else:           # exclusive prefix times exclusive suffix product, in order (NaN/inf as PyTorch)
            ex = np.empty(n)
            p = np.ones(ngroups)
            for i in range(n):
                o = u64(gi[i])
                ex[i] = p[o]
                p[o] *= x[i]
            p[:] = 1.0
            for i in range(n - 1, -1, -1):
                o = u64(gi[i])
                dx[i] += g[o] * (ex[i] * p[o])
                p[o] *= x[i]
    elif k == VAR or k == STD:
        m = np.zeros(ngroups)
        for i in range(n):
            m[u64(gi[i])] += x[i]
        for j in range(ngroups):
            m[j] /= K
        for i in range(n):
            o = u64(gi[i])
            if k == VAR:
                dx[i] += g[o] * 2.0 * (x[i] - m[o]) / (K - f0)
            elif y[o] != 0.0:       # std of a constant: 0, not nan (PyTorch)
                dx[i] += g[o] * (x[i] - m[o]) / ((K - f0) * y[o])
    elif k == EXTREMUM:     # f0 = 0: max()/min() (ties and NaNs split); 1: amax/amin (a NaN result: NaN)
        cnt = np.zeros(ngroups)
        for i in range(n):
            o = u64(gi[i])
            if x[i] == y[o] or (x[i] != x[i] and y[o] != y[o]):
                cnt[o] += 1.0
        for i in range(n):
            o = u64(gi[i])
            if y[o] != y[o] and f0 != 0.0:
                dx[i] += np.nan
            elif x[i] == y[o] or (x[i] != x[i] and y[o] != y[o]):
                dx[i] += g[o] / cnt[o]
    elif k == LOGSUMEXP:
        for i in range(n):
            o = u64(gi[i])
            dx[i] += g[o] * math.exp(x[i] - y[o])
    elif k == SOFTMAX:
        s = np.zeros(ngroups)
        for i in range(n):
            s[u64(gi[i])] += g[i] * y[i]
        for i in range(n):
            dx[i] += y[i] * (g[i] - s[u64(gi[i])])
    elif k == LOG_SOFTMAX:
        s = np.zeros(ngroups)
        for i in range(n):
            s[u64(gi[i])] += g[i]
        for i in range(n):
            dx[i] += g[i] - math.exp(y[i]) * s[u64(gi[i])]
    elif k == CUMSUM:
        s = np.zeros(ngroups)
        for i in range(n - 1, -1, -1):
            o = u64(gi[i])
            s[o] += g[i]
            dx[i] += s[o]
    elif k == CUMPROD:  # before a row's first zero: revcumsum(g y) / x; at it: g times the others; after: 0
        z = np.full(ngroups, -1, np.int64)
        for i in range(n):
            o = u64(gi[i])
            if x[i] == 0.0 and z[o] < 0:
                z[o] = i
        s = np.zeros(ngroups)
        for i in range(n - 1, -1, -1):
            o = u64(gi[i])
            s[o] += g[i] * y[i]
            if z[o] < 0 or i < z[o]:
                dx[i] += s[o] / x[i]
        p = np.ones(ngroups)
        t = np.zeros(ngroups)
        for i in range(n):
            o = u64(gi[i])
            if z[o] >= 0 and i > z[o]:
                p[o] *= x[i]
            if z[o] >= 0 and i >= z[o]:
                t[o] += g[i] * p[o]
            elif z[o] >= 0:
                p[o] *= x[i]
        for o in range(ngroups):
            if z[o] >= 0:
                dx[z[o]] += t[o]
    elif k == LOGCUMSUMEXP:     # t_j = g_j + exp(y_j - y_j+1) t_j+1, dx_j = exp(x_j - y_j) t_j
        t = np.zeros(ngroups)
        nxt = np.zeros(ngroups)
        seen = np.zeros(ngroups, np.bool_)
        for i in range(n - 1, -1, -1):
            o = u64(gi[i])
            if seen[o]:
                t[o] = g[i] + (1.0 if y[i] == nxt[o] else math.exp(y[i] - nxt[o])) * t[o]
            else:
                t[o] = g[i]
                seen[o] = True
            nxt[o] = y[i]
            if x[i] != -math.inf:
                dx[i] += math.exp(x[i] - y[i]) * t[o]
            elif y[i] == -math.inf and f0 == 0.0:   # (a row's leading -infs: NaN, as PyTorch's exp(x - y))
                dx[i] += np.nan
    else:     # (a kernel without its branch: NaN, and the sweep names the op)
        for i in range(n):
            dx[i] = np.nan
        return False
    return True


# The compiled forward of a replay (kernels/forward.py): reductions whose groups are
# runs of consecutive elements (everything, or the last axes: ``forward_runs``),
# summed in NumPy's order so that sums replay bit for bit.
COMPILED_FORWARD = (SUM, MEAN, SOFTMAX, LOG_SOFTMAX, CUMSUM)


def forward_runs(ngroups, nx, aux, at):
    """Whether the ``ngroups`` groups of a reduction of ``nx`` elements are runs."""
    if ngroups == 1:
        return True
    return np.array_equal(strided_map_np(aux, at), np.arange(nx) // (nx // ngroups))


@jit
def pairwise_sum(a, lo, n):
    """``a[lo:lo + n].sum()`` in NumPy's order (its pairwise_sum: blocks of 128 in
    eight partial sums), so that a replayed sum is bit for bit the eager one."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    if n <= 128:
        r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
        r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
        i = 8
        m = n - n % 8
        while i < m:
            j = lo + i
            r0 += a[j]
            r1 += a[j + 1]
            r2 += a[j + 2]
            r3 += a[j + 3]
            r4 += a[j + 4]
            r5 += a[j + 5]
            r6 += a[j + 6]
            r7 += a[j + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[lo + i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_sum(a, lo, n2) + pairwise_sum(a, lo + n2, n - n2)


@jit
def reduce_forward(k, x, y, ngroups):
    """``y`` from ``x`` for a reduction over ``ngroups`` runs (``COMPILED_FORWARD``)."""
    kk = x.size // ngroups
    if k == SUM or k == MEAN:
        for g in range(ngroups):
            y[g] = pairwise_sum(x, g * kk, kk)
        if k == MEAN:
            for g in range(ngroups):
                y[g] /= kk
    elif k == CUMSUM:
        cumsum_forward(x, y, ngroups)
    else:
        softmax_forward(x, y, ngroups, k)


# -- the family's rules for the Python passes (registry.FAMILY_RULES) -----------------
def differentiable_reverse(ctx, s, k, row, f0, f1, g):
    """``reduce_reverse`` written with tapegrad's own ops on flat adjoints: ``gi``
    maps every input element to its group, gathering spreads a per-group value over
    the group and scatter-adding sums over it (each op's rule is in its section)."""
    a, at, ngroups = row[_tp.A], row[_tp.AUX], row[_tp.PARAM]
    n = ctx.size(a)
    if n == 0 or not ctx.needs(a):
        return []
    gi = ctx.strided_map(at) if ngroups != 1 else np.zeros(n, np.int64)
    return [(a, _DIFFERENTIABLE[k](ctx, s, a, g, gi, ngroups, n, f0))]


def replay_rule(k, row, aux, shape, name, f0, f1):
    """An entry's forward again (tapegrad.replay), as a function of the slot values:
    the same array functions the recorders use, on the axes its group descriptor
    gives stride 0, reshaped to the recorded output shape (keepdim or not)."""
    at = row[_tp.AUX]
    nd = int(aux[at])
    strides = aux[at + 2 + nd:at + 2 + 2 * nd]
    axes = tuple(int(d) for d in range(nd) if strides[d] == 0)
    return _REPLAY[k](row[_tp.A], axes, axes[0] if axes else None, shape, name, f0)


def _compiled_forward(k, ints, e, sizes, aux, live):
    a = ints[e, _tp.A]
    return (k in COMPILED_FORWARD and sizes[a] > 0
            and forward_runs(int(ints[e, _tp.PARAM]), int(sizes[a]), aux, int(ints[e, _tp.AUX])))


def _forward_rules(ctx, k, row, which):
    """(rule, a, gi, ngroups, n) of the entry, or None when its input is empty."""
    rules = _FORWARD.get(k)
    if rules is None:
        raise NoForwardRule("Trying to use forward AD with %s that does not support it because it has not "
                            "been implemented yet." % GRAD_FN_NAMES[row[_tp.NAME]])
    a, at, ngroups = row[_tp.A], row[_tp.AUX], row[_tp.PARAM]
    n = ctx.size(a)
    if n == 0:
        return None
    gi = ctx.strided_map(at) if ngroups != 1 else None
    return rules[which], a, gi, ngroups, n


def tangent(ctx, s, k, row, f0, f1):
    t = ctx.tan(row[_tp.A])
    got = None if t is None else _forward_rules(ctx, k, row, 0)
    if got is None:
        return None
    rule, a, gi, ngroups, n = got
    return rule(ctx, s, a, t, gi, ngroups, n, f0)


def batched_reverse(ctx, s, k, row, f0, f1, G):
    got = _forward_rules(ctx, k, row, 1) if ctx.needs(row[_tp.A]) else None
    if got is None:
        return []
    rule, a, gi, ngroups, n = got
    return [(a, rule(ctx, s, a, G, gi, ngroups, n, f0))]


def curvature(ctx, s, k, row, f0, f1, g):
    got = _forward_rules(ctx, k, row, 2) if ctx.needs(row[_tp.A]) else None
    if got is None:
        return []
    rule, a, gi, ngroups, n = got
    d = rule(ctx, s, a, g, gi, ngroups, n, f0)
    return [] if d is None else [(a, d)]


def _exp(x):
    return UNARY_BY_NAME["exp"].record(x)


def _log(x):
    return UNARY_BY_NAME["log"].record(x)


from .elementwise import UNARY_BY_NAME, tensor_where    # noqa: E402


def check_entries(ks, es, ints, aux):
    """``FamilyRules.check_entries``: ``reduce_reverse`` reads the output and its adjoint
    at each input element's group (the descriptor at AUX), unchecked; PARAM is the
    number of groups."""
    a, n, groups = ints[es, _tp.A], ints[es, _tp.SIZE], ints[es, _tp.PARAM]
    refuse((a >= 0) & (a < es), es, lambda i: "no input slot (%d)" % a[i])
    nx = ints[a, _tp.SIZE]
    out = np.where(np.isin(ks, list(PER_ROW)), nx, groups)
    refuse((n == out) & (groups >= 0) & ((nx == 0) | (groups > 0)), es,
           lambda i: "%d groups of an input of %d elements for an output of %d" % (groups[i], nx[i], n[i]))
    check_descriptors(aux, ints[es, _tp.AUX], groups, nx, es, "the groups")


# a one-element sum, mean, cumsum, cumprod or logcumsumexp is its input: the compiled replay of single numbers passes it on
register_family(REDUCE, FamilyRules(differentiable_reverse, replay_rule, expands_adjoint=True,
                                    scalar_replay=frozenset((SUM, MEAN, CUMSUM, CUMPROD, LOGCUMSUMEXP)),
                                    compiled_forward=_compiled_forward, tangent=tangent,
                                    batched_reverse=batched_reverse, curvature=curvature, check_entries=check_entries))
for _k, _code in CODES.items():
    for _table, _piece in ((_DIFFERENTIABLE, "differentiable reverse (@differentiable)"),
                           (_REPLAY, "replay rule (@replay)")):
        if _k not in _table:
            raise OpDefinitionError("reduce op %r: no %s in tapegrad/ops/reduce.py" % (OP_NAMES[_code], _piece))
