"""Sorting, selection and the scans that pick elements: ``sort``, ``argsort``,
``msort``, ``topk``, ``kthvalue``, ``median``, ``nanmedian``, ``quantile``,
``nanquantile``, ``cummax``, ``cummin``, ``diff``, and the integer-valued
``searchsorted`` and ``unique``.

Every differentiable op here is a composition, so it needs no opcode: NumPy finds
which elements of the input the result is (a stable sort, NaN as the largest value,
as PyTorch orders them), and the values are recorded as one flat gather of the input
(``shape.gather_linear``, reverse: a scatter-add, so an element picked twice gets
both adjoints); quantile interpolates two such gathers with elementwise ops, and diff
subtracts two slices.  Their compiled reverse, create_graph and replay rules are those
kernels'.  Which elements a gather picks depends on the input's values: while a
function is recorded for replay, the gather is reported to the recording
(``rec.ordered``), which picks the elements again from the replayed input
(``ORDER_LIN``), as ``max(dim)`` does, and computes the indices output (an int64
tensor made off the tape) again.
"""
import numpy as np

from ..core import tape as _tp
from ..core.dtypes import torch_name
from ..core.tensor import Tensor, _wrap_dim
from . import shape as _sh
from .elementwise import BINARY_BY_NAME as _B
from . import reduce as _rd
from .reduce import MaxMin

_SUB = _B["sub"].record
_MUL = _B["mul"].record
_ADD = _B["add"].record


def _no_out(out):
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")


def _need_tensor(fname, v, arg, pos):
    if not isinstance(v, Tensor):
        raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                        % (fname, arg, pos, type(v).__name__))


def _need_int(fname, v, arg, pos):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError("%s(): argument '%s' (position %d) must be int, not %s"
                        % (fname, arg, pos, type(v).__name__))
    return int(v)


# -- the orders (NumPy), shared by the recording and its replays -----------------------
def _argsort(d, ax, descending):
    """Stable argsort of ``d`` along ``ax``, NaN the largest value (PyTorch's order)."""
    if d.dtype.kind == "b":
        d = d.view(np.uint8)
    if not descending:
        return np.argsort(d, axis=ax, kind="stable")
    if d.dtype.kind == "f":
        return np.lexsort((-d, ~np.isnan(d)), axis=ax)
    return np.argsort(~d, axis=ax, kind="stable")       # (~ reverses the order of integers)


def _lin(d, idx, ax):
    """The flat indices into ``d`` of the elements ``idx`` picks along ``ax``."""
    return np.take_along_axis(np.arange(d.size, dtype=np.int64).reshape(d.shape), idx, axis=ax)


def _as1(d):
    """A 0-d array as one element along dim 0 (PyTorch's kernels see it so)."""
    return d.reshape(1) if d.ndim == 0 else d


def _sort_lin(d, ax, descending):
    e = _as1(d)
    idx = _argsort(e, ax, descending).astype(np.int64)
    return idx.reshape(d.shape), _lin(e, idx, ax).reshape(d.shape)


# -- PyTorch's CPU topk among equal values ---------------------------------------------
# Which of several equal values topk reports depends on how its kernel selects: C++'s
# std::partial_sort (k * 64 <= n) or std::nth_element then std::sort of the first
# k - 1, as libstdc++ implements them (introselect, median-of-three pivots, heaps,
# insertion sorts).  The functions below run those algorithms on a row of
# (value, position) pairs, for the rows where equal values make the order matter.
def _stl_lg(n):
    return n.bit_length() - 1


def _stl_push_heap(a, f, hole, top, val, comp):
    parent = (hole - 1) // 2
    while hole > top and comp(a[f + parent], val):
        a[f + hole] = a[f + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[f + hole] = val


def _stl_adjust_heap(a, f, hole, n, val, comp):
    top = hole
    child = hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if comp(a[f + child], a[f + child - 1]):
            child -= 1
        a[f + hole] = a[f + child]
        hole = child
    if (n & 1) == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        a[f + hole] = a[f + child - 1]
        hole = child - 1
    _stl_push_heap(a, f, hole, top, val, comp)


def _stl_make_heap(a, f, l, comp):
    n = l - f
    if n < 2:
        return
    parent = (n - 2) // 2
    while True:
        _stl_adjust_heap(a, f, parent, n, a[f + parent], comp)
        if parent == 0:
            return
        parent -= 1


def _stl_pop_heap(a, f, l, res, comp):
    val = a[res]
    a[res] = a[f]
    _stl_adjust_heap(a, f, 0, l - f, val, comp)


def _stl_heap_select(a, f, m, l, comp):
    _stl_make_heap(a, f, m, comp)
    for i in range(m, l):
        if comp(a[i], a[f]):
            _stl_pop_heap(a, f, m, i, comp)


def _stl_sort_heap(a, f, l, comp):
    while l - f > 1:
        l -= 1
        _stl_pop_heap(a, f, l, l, comp)


def _stl_partial_sort(a, f, m, l, comp):
    _stl_heap_select(a, f, m, l, comp)
    _stl_sort_heap(a, f, m, comp)


def _stl_move_median_to_first(a, r, x, y, z, comp):
    if comp(a[x], a[y]):
        if comp(a[y], a[z]):
            a[r], a[y] = a[y], a[r]
        elif comp(a[x], a[z]):
            a[r], a[z] = a[z], a[r]
        else:
            a[r], a[x] = a[x], a[r]
    elif comp(a[x], a[z]):
        a[r], a[x] = a[x], a[r]
    elif comp(a[y], a[z]):
        a[r], a[z] = a[z], a[r]
    else:
        a[r], a[y] = a[y], a[r]


def _stl_unguarded_partition(a, f, l, p, comp):
    while True:
        while comp(a[f], a[p]):
            f += 1
        l -= 1
        while comp(a[p], a[l]):
            l -= 1
        if not f < l:
            return f
        a[f], a[l] = a[l], a[f]
        f += 1


def _stl_unguarded_partition_pivot(a, f, l, comp):
    mid = f + (l - f) // 2
    _stl_move_median_to_first(a, f, f + 1, mid, l - 1, comp)
    return _stl_unguarded_partition(a, f + 1, l, f, comp)


def _stl_unguarded_linear_insert(a, i, comp):
    val = a[i]
    nxt = i - 1
    while comp(val, a[nxt]):
        a[i] = a[nxt]
        i = nxt
        nxt -= 1
    a[i] = val


def _stl_insertion_sort(a, f, l, comp):
    if f == l:
        return
    for i in range(f + 1, l):
        if comp(a[i], a[f]):
            val = a[i]
            a[f + 1:i + 1] = a[f:i]
            a[f] = val
        else:
            _stl_unguarded_linear_insert(a, i, comp)


def _stl_nth_element(a, f, nth, l, comp):
    if f == l or nth == l:
        return
    depth = _stl_lg(l - f) * 2
    while l - f > 3:
        if depth == 0:
            _stl_heap_select(a, f, nth + 1, l, comp)
            a[f], a[nth] = a[nth], a[f]
            return
        depth -= 1
        cut = _stl_unguarded_partition_pivot(a, f, l, comp)
        if cut <= nth:
            f = cut
        else:
            l = cut
    _stl_insertion_sort(a, f, l, comp)


def _stl_introsort_loop(a, f, l, depth, comp):
    while l - f > 16:
        if depth == 0:
            _stl_partial_sort(a, f, l, l, comp)
            return
        depth -= 1
        cut = _stl_unguarded_partition_pivot(a, f, l, comp)
        _stl_introsort_loop(a, cut, l, depth, comp)
        l = cut


def _stl_sort(a, f, l, comp):
    if f == l:
        return
    _stl_introsort_loop(a, f, l, _stl_lg(l - f) * 2, comp)
    if l - f > 16:
        _stl_insertion_sort(a, f, f + 16, comp)
        for i in range(f + 16, l):
            _stl_unguarded_linear_insert(a, i, comp)
    else:
        _stl_insertion_sort(a, f, l, comp)




def _topk_row(vals, k, largest):
    q = [(float(v), j) for j, v in enumerate(vals)]
    n = len(q)
    if largest:
        def comp(x, y):
            return (x[0] != x[0] and y[0] == y[0]) or x[0] > y[0]
    else:
        def comp(x, y):
            return (x[0] == x[0] and y[0] != y[0]) or x[0] < y[0]
    if k * 64 <= n:
        _stl_partial_sort(q, 0, k, n, comp)
    else:
        _stl_nth_element(q, 0, k - 1, n, comp)
        _stl_sort(q, 0, k - 1, comp)
    return [j for _, j in q[:k]]


def _topk_lin(d, ax, k, largest):
    """The ``k`` largest (smallest) along ``ax``, sorted: the stable order's, and in a
    row with equal values the positions PyTorch's CPU kernel reports."""
    e = _as1(d)
    order = _argsort(e, ax, largest)
    idx = np.take(order, np.arange(k), axis=ax).astype(np.int64)
    srt = np.moveaxis(np.take_along_axis(e, order, axis=ax), ax, -1)
    eq = srt[..., 1:] == srt[..., :-1]
    if e.dtype.kind == "f":
        eq |= np.isnan(srt[..., 1:]) & np.isnan(srt[..., :-1])
    tied = eq.any(axis=-1)
    if tied.any():
        moved = np.moveaxis(e, ax, -1)
        im = np.moveaxis(idx, ax, -1)
        for pos in (zip(*np.nonzero(tied)) if tied.ndim else [()]):
            im[pos] = _topk_row(moved[pos], k, largest)
        idx = np.moveaxis(im, -1, ax)
    shape = idx.shape if d.ndim else ()
    return idx.reshape(shape), _lin(e, idx, ax).reshape(shape)


def _squeeze(e, d, idx, ax, keepdim):
    lin = _lin(e, idx, ax)
    if d.ndim == 0:
        return idx.reshape(()), lin.reshape(())
    if not keepdim:
        return np.squeeze(idx, ax), np.squeeze(lin, ax)
    return idx, lin


def _median_lin(d, ax, keepdim, ignore_nan):
    """The lower median along ``ax``: the element at position ``(n - 1) // 2`` of the
    stable order (PyTorch's index among equal values); with a NaN, the first NaN
    (median) or the median of the others (nanmedian; all NaN: the first)."""
    e = _as1(d)
    order = _argsort(e, ax, False)
    n = e.shape[ax]
    if e.dtype.kind == "f":
        nan = np.isnan(e)
        cnt = n - nan.sum(axis=ax, keepdims=True)
        if ignore_nan:
            pos = np.maximum((cnt - 1) // 2, 0)
        else:
            pos = np.where(cnt < n, cnt, (n - 1) // 2)      # (the first NaN sorts first among the NaNs)
    else:
        pos = np.full(order.shape[:ax] + (1,) + order.shape[ax + 1:], (n - 1) // 2, np.int64)
    idx = np.take_along_axis(order, pos.astype(np.int64), axis=ax).astype(np.int64)
    return _squeeze(e, d, idx, ax, keepdim)


def _gt_or_nan(a, b):
    return a > b or (a != a and b == b)


def _quickselect(row, k):
    """The position PyTorch's CPU kthvalue reports for the ``k``-th smallest
    (0-based) of ``row``: Sedgewick's quickselect (median of three, NaN largest),
    run on the row and its positions."""
    v = [float(t) for t in row]
    p = list(range(len(v)))

    def swap(i, j):
        v[i], v[j] = v[j], v[i]
        p[i], p[j] = p[j], p[i]
    lo, hi = 0, len(v) - 1
    while True:
        if hi <= lo:
            return p[k]
        if hi == lo + 1:
            if _gt_or_nan(v[lo], v[hi]):
                swap(lo, hi)
            return p[k]
        mid = (lo + hi) >> 1
        swap(mid, lo + 1)
        if _gt_or_nan(v[lo + 1], v[hi]):
            swap(lo + 1, hi)
        if _gt_or_nan(v[lo], v[hi]):
            swap(lo, hi)
        if _gt_or_nan(v[lo + 1], v[lo]):
            swap(lo + 1, lo)
        i, j, piv = lo + 1, hi, v[lo]
        while True:
            i += 1
            while _gt_or_nan(piv, v[i]):
                i += 1
            j -= 1
            while _gt_or_nan(v[j], piv):
                j -= 1
            if j < i:
                break
            swap(i, j)
        swap(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1


def _kth_lin(d, ax, k, keepdim):
    """The ``k``-th smallest along ``ax`` (1-based), at the position PyTorch's CPU
    kernel reports: the stable order's where the value is unique in its row, the
    quickselect's where it is not."""
    e = _as1(d)
    order = _argsort(e, ax, False)
    idx = np.take(order, [k - 1], axis=ax).astype(np.int64)
    val = np.take_along_axis(e, idx, axis=ax)
    same = (e == val) | (np.isnan(e) & np.isnan(val)) if e.dtype.kind == "f" else (e == val)
    tied = same.sum(axis=ax, keepdims=True) > 1
    if tied.any():
        moved = np.moveaxis(e, ax, -1)
        im = np.moveaxis(idx, ax, -1)
        rows = np.moveaxis(tied, ax, -1)[..., 0]
        for pos in (zip(*np.nonzero(rows)) if rows.ndim else [()]):
            im[pos + (0,)] = _quickselect(moved[pos], k - 1)
        idx = np.moveaxis(im, -1, ax)
    return _squeeze(e, d, idx, ax, keepdim)


def _cum_lin(d, ax, largest):
    """cummax/cummin along ``ax``: the running extremum's position, the last among
    equal values and NaN propagating (its last NaN), as PyTorch's."""
    e = _as1(d)
    f = e.view(np.uint8) if e.dtype.kind == "b" else e
    run = (np.maximum if largest else np.minimum).accumulate(f, axis=ax)
    hit = f == run
    if f.dtype.kind == "f":
        hit |= np.isnan(f)
    sh = [1] * e.ndim
    sh[ax] = e.shape[ax]
    at = np.where(hit, np.arange(e.shape[ax], dtype=np.int64).reshape(sh), -1)
    idx = np.maximum.accumulate(at, axis=ax)
    return idx.reshape(d.shape), _lin(e, idx, ax).reshape(d.shape)


def _quantile_ranks(d, ax, qs, interpolation, ignore_nan):
    """PyTorch's ranks (float) into the sorted rows (``ax``: last), of shape
    ``(nq, *rows, 1)``."""
    n = d.shape[ax]
    q = np.asarray(qs, np.float64).reshape((-1,) + (1,) * d.ndim)
    if ignore_nan:
        cnt = n - np.isnan(d).sum(axis=ax, keepdims=True)
        ranks = q * (cnt - 1)
        ranks = np.where(cnt == 0, 0.0, ranks)
    else:
        ranks = q * (n - 1)
        hasnan = np.isnan(d).any(axis=ax, keepdims=True)
        ranks = np.where(hasnan, float(n - 1), ranks)
    if interpolation == "lower":
        ranks = np.floor(ranks)
    elif interpolation == "higher":
        ranks = np.ceil(ranks)
    elif interpolation == "nearest":
        ranks = np.round(ranks)
    return np.broadcast_to(ranks, (q.shape[0],) + d.shape[:ax] + (1,) + d.shape[ax + 1:])


def _quantile_lin(d, ax, qs, interpolation, ignore_nan, above, shape):
    """The flat indices of the values below (``above`` False) or above each rank."""
    order = _argsort(d, ax, False)
    ranks = _quantile_ranks(d, ax, qs, interpolation, ignore_nan)
    pos = (np.ceil(ranks) if above else np.floor(ranks)).astype(np.int64)
    lin_sorted = _lin(d, order, ax)
    out = np.stack([np.take_along_axis(lin_sorted, p, axis=ax) for p in pos])
    return None, out.reshape(shape)


# name -> function of (input value, *params) giving (indices, flat indices): what a
# replay calls to pick the elements again (replay.session's ``_order_lin``)
ORDER_LIN = {"sort": _sort_lin, "topk": _topk_lin, "median": _median_lin, "kth": _kth_lin,
             "cum": _cum_lin, "quantile": _quantile_lin}


def _picked(x, kind, params, name):
    """The elements of ``x`` that ``ORDER_LIN[kind]`` picks, as a recorded gather
    (a replay picks them again), and their indices (an int64 tensor, or None)."""
    idx, lin = ORDER_LIN[kind](x._data, *params)
    values = _sh.gather_linear(x, lin, name)
    indices = None if idx is None else _index_tensor(idx)
    if _tp.recording[0]:
        rec = _tp.state().rec
        if rec is not None:
            rec.ordered(x, values, kind, params, indices)
    return values, indices


def _index_tensor(idx):
    return Tensor._wrap(np.asarray(idx, np.int64))


def _no_complex(fname, x):
    if x.dtype.kind == "c":
        raise RuntimeError("%s(): complex tensors are not supported" % fname)


# -- sort, argsort, msort -------------------------------------------------------------
def sort(input, dim=-1, descending=False, *, stable=False, out=None):
    """Values and indices sorted along ``dim``; ties keep their order (PyTorch's CPU
    sort is stable), NaN sorts as the largest value."""
    _no_out(out)
    _need_tensor("sort", input, "input", 1)
    x = input
    ax = _wrap_dim(dim, x.ndim)
    if not x._data.size:
        return MaxMin((_sh.gather_linear(x, np.zeros(x.shape, np.int64), "SortBackward0"),
                       _index_tensor(np.zeros(x.shape, np.int64))))
    return MaxMin(_picked(x, "sort", (ax, bool(descending)), "SortBackward0"))


def argsort(input, dim=-1, descending=False, *, stable=False):
    _need_tensor("argsort", input, "input", 1)
    ax = _wrap_dim(dim, input.ndim)
    d = input._data
    if not d.size:
        return _index_tensor(np.zeros(d.shape, np.int64))
    return _index_tensor(_sort_lin(d, ax, bool(descending))[0])


def msort(input, *, out=None):
    _no_out(out)
    _need_tensor("msort", input, "input", 1)
    return sort(input, 0)[0]


# -- topk, kthvalue -------------------------------------------------------------------
def topk(input, k, dim=None, largest=True, sorted=True, *, out=None):
    """The ``k`` largest (smallest) along ``dim`` (default the last), sorted, with the
    indices PyTorch's CPU kernel reports among equal values (``sorted=False`` returns
    them sorted too: an order PyTorch leaves unspecified)."""
    _no_out(out)
    _need_tensor("topk", input, "input", 1)
    k = _need_int("topk", k, "k", 2)
    x = input
    if x.dtype.kind == "b":
        raise RuntimeError("topk does not support bool dtypes on CPU")
    ax = _wrap_dim(-1 if dim is None else dim, x.ndim)
    n = x.shape[ax] if x.ndim else 1
    if k < 0 or k > n:
        raise RuntimeError("selected index k out of range")
    if not x._data.size or k == 0:
        shape = list(x.shape)
        if shape:
            shape[ax] = k
        z = np.zeros(shape, np.int64)
        return MaxMin((_sh.gather_linear(x, z, "TopkBackward0"), _index_tensor(z)))
    return MaxMin(_picked(x, "topk", (ax, k, bool(largest)), "TopkBackward0"))


def kthvalue(input, k, dim=None, keepdim=False, *, out=None):
    """The ``k``-th smallest along ``dim`` and its index (where the value repeats,
    the index PyTorch's CPU quickselect reports)."""
    _no_out(out)
    _need_tensor("kthvalue", input, "input", 1)
    k = _need_int("kthvalue", k, "k", 2)
    x = input
    if x.dtype.kind == "b":
        raise NotImplementedError('"kthvalue_cpu" not implemented for \'Bool\'')
    ax = _wrap_dim(-1 if dim is None else dim, x.ndim)
    n = x.shape[ax] if x.ndim else 1
    if n == 0:
        raise IndexError("kthvalue(): Expected reduction dim %d to have non-zero size." % ax)
    if k < 1 or k > n:
        raise RuntimeError("kthvalue(): selected number k out of range for dimension %d" % ax)
    if not x._data.size:
        return _empty_reduced(x, ax, keepdim, "KthvalueBackward0")
    return MaxMin(_picked(x, "kth", (ax, k, bool(keepdim)), "KthvalueBackward0"))


def _empty_reduced(x, ax, keepdim, name):
    shape = list(x.shape)
    if keepdim:
        shape[ax] = 1
    else:
        del shape[ax]
    z = np.zeros(shape, np.int64)
    return MaxMin((_sh.gather_linear(x, z, name), _index_tensor(z)))


# -- median, nanmedian -----------------------------------------------------------------
def _median(fname, input, dim, keepdim, ignore_nan):
    _need_tensor(fname, input, "input", 1)
    x = input
    _no_complex(fname, x)
    if x.dtype.kind == "b":
        raise NotImplementedError('"%s" not implemented for \'Bool\'' % ("median_cpu" if dim is None else "median_out"))
    name = "NanmedianBackward0" if ignore_nan else "MedianBackward0"
    if dim is None:
        if x._data.size and x._requires_grad and x.dtype.kind == "f":
            # PyTorch's gradient of the median of everything: spread evenly over the elements
            # equal to it (the NaNs, when it is NaN), as max()'s: an extremum entry (its replay
            # takes the median again, ``EXTREMUM_OF_ALL``), not the gather of one of them
            return _rd._record(_rd.EXTREMUM, x, _rd.EXTREMUM_OF_ALL[name](x._data), tuple(range(x.ndim)), name)
        flat = _sh.reshape(x, (-1,))
        if not flat._data.size:
            if x.dtype.kind != "f":
                _no_median(fname)
            return Tensor._wrap(np.full((), np.nan, x.dtype))
        return _picked(flat, "median", (0, False, ignore_nan), name)[0]
    ax = _wrap_dim(dim, x.ndim)
    if x.ndim and x.shape[ax] == 0:
        raise IndexError("median(): Expected reduction dim %d to have non-zero size." % ax)     # (nanmedian too)
    if not x._data.size:
        return _empty_reduced(x, ax, keepdim, name.replace("Backward0", "Backward1"))
    return MaxMin(_picked(x, "median", (ax, bool(keepdim), ignore_nan), name.replace("Backward0", "Backward1")))


def _median_of_all(ignore_nan):
    def f(v):
        d = v.reshape(-1)
        return d[_median_lin(d, 0, False, ignore_nan)[1]]
    return f


_rd.EXTREMUM_OF_ALL.update(MedianBackward0=_median_of_all(False), NanmedianBackward0=_median_of_all(True))


def _no_median(fname):
    raise IndexError("%s(): Expected reduction dim 0 to have non-zero size." % fname)


def median(input, dim=None, keepdim=False, *, out=None):
    """The lower median of all elements (a tensor), or along ``dim`` (values and
    indices); a NaN makes the median NaN."""
    _no_out(out)
    return _median("median", input, dim, keepdim, False)


def nanmedian(input, dim=None, keepdim=False, *, out=None):
    """As ``median``, ignoring NaNs (NaN where a row is all NaN)."""
    _no_out(out)
    return _median("nanmedian", input, dim, keepdim, True)


# -- quantile, nanquantile --------------------------------------------------------------
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(fname, input, q, dim, keepdim, interpolation, ignore_nan):
    _need_tensor(fname, input, "input", 1)
    x = input
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           "but got %s" % interpolation)
    if isinstance(q, Tensor):
        qv = q._data
        if _tp.recording[0]:
            rec = _tp.state().rec
            if rec is not None:
                rec.read(q, qv)
        if qv.ndim > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        if qv.dtype.kind != "f":
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        qs = tuple(float(v) for v in qv.reshape(-1))
        scalar = qv.ndim == 0
        if not all(0.0 <= v <= 1.0 for v in qs):
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
    elif isinstance(q, (float, int, np.floating, np.integer)) and not isinstance(q, bool):
        qs, scalar = (float(q),), True
    else:
        raise TypeError("%s() received an invalid combination of arguments - got (Tensor, %s), but expected one of:"
                        % (fname, type(q).__name__))
    if not x._data.size:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if x.dtype.kind != "f":
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    for v in qs:
        if not 0.0 <= v <= 1.0:
            raise RuntimeError("quantile() q must be in the range [0, 1] but got %s" % _num(v))
    if dim is None:
        src = _sh.reshape(x, (-1,))
        ax = 0
        out_shape = (1,) * x.ndim if keepdim else ()
    else:
        ax = _wrap_dim(dim, x.ndim)
        src = x if x.ndim else _sh.reshape(x, (1,))
        sh = list(x.shape)
        if keepdim:
            if sh:
                sh[ax] = 1
        elif sh:
            del sh[ax]
        out_shape = tuple(sh)
    shape = out_shape if scalar else (len(qs),) + out_shape
    d = src._data
    if ignore_nan and _tp.recording[0]:        # (the ranks depend on which elements are NaN)
        rec = _tp.state().rec
        if rec is not None:
            m = Tensor._wrap(np.isnan(d))
            rec.compared(np.isnan, src, None, m)
            rec.read(m, m._data)
    params = (ax, qs, interpolation, ignore_nan)
    lo = _picked(src, "quantile", params + (False, shape), "GatherBackward0")[0]
    if interpolation not in ("linear", "midpoint"):
        return lo
    hi = _picked(src, "quantile", params + (True, shape), "GatherBackward0")[0]
    ranks = _quantile_ranks(d, ax, qs, interpolation, ignore_nan)
    w = 0.5 if interpolation == "midpoint" else (ranks - np.floor(ranks)).reshape(shape)
    w = Tensor._const(np.asarray(w, x.dtype) if np.ndim(w) else np.full(shape, w, x.dtype))
    return _ADD(lo, _MUL(_SUB(hi, lo), w))


def _num(v):
    return repr(float(v)).rstrip("0").rstrip(".") if float(v) != int(v) else "%d" % int(v)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The ``q``-th quantiles (a number or a 1-D tensor: its dimension first) of all
    elements or along ``dim``, by PyTorch's ranks and interpolation; a NaN makes its
    row's quantiles NaN."""
    _no_out(out)
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """As ``quantile``, ignoring NaNs."""
    _no_out(out)
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# -- cummax, cummin -----------------------------------------------------------------------
def _cum(fname, input, dim, largest):
    _need_tensor(fname, input, "input", 1)
    x = input
    ax = _wrap_dim(dim, x.ndim)
    if not x._data.size:
        z = np.zeros(x.shape, np.int64)
        return MaxMin((_sh.gather_linear(x, z, "CummaxBackward0" if largest else "CumminBackward0"),
                       _index_tensor(z)))
    return MaxMin(_picked(x, "cum", (ax, largest), "CummaxBackward0" if largest else "CumminBackward0"))


def cummax(input, dim, *, out=None):
    """Running maximum along ``dim`` and its index (the last of equal values; NaN
    propagates)."""
    _no_out(out)
    return _cum("cummax", input, dim, True)


def cummin(input, dim, *, out=None):
    _no_out(out)
    return _cum("cummin", input, dim, False)


# -- diff ----------------------------------------------------------------------------------
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """``n``-th forward difference along ``dim``, after joining ``prepend`` and
    ``append`` (a composition of slices and sub; bool: xor)."""
    _need_tensor("diff", input, "input", 1)
    x = input
    n = _need_int("diff", n, "n", 2)
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError("order must be non-negative but got %d" % n)
    ax = _wrap_dim(dim, x.ndim)
    parts = []
    for v, arg in ((prepend, "prepend"), (None, None), (append, "append")):
        if arg is None:
            parts.append(x)
            continue
        if v is None:
            continue
        if not isinstance(v, Tensor):
            raise TypeError("diff(): argument '%s' must be Tensor, not %s" % (arg, type(v).__name__))
        if v.ndim != x.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        parts.append(v)
    if len(parts) > 1:
        x = _sh.cat(parts, ax)
    lead = (slice(None),) * ax
    for _ in range(n):
        m = x.shape[ax]
        if m == 0:
            break
        a = _sh.getitem(x, lead + (slice(1, None),))
        b = _sh.getitem(x, lead + (slice(0, m - 1),))
        if x.dtype.kind == "b":
            x = Tensor._wrap(np.logical_xor(a._data, b._data))
        else:
            x = _SUB(a, b)
    return x


# -- searchsorted (integers, no gradient) ----------------------------------------------------
def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, out=None, sorter=None):
    """For every value, the index where it would be inserted into the sorted last
    dimension of ``sorted_sequence`` (``right``/``side='right'``: after equal
    values); ``sorter`` sorts the sequence first.  int64 (int32 with ``out_int32``)."""
    _no_out(out)
    _need_tensor("searchsorted", sorted_sequence, "sorted_sequence", 1)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError("torch.searchsorted(): side can only be 'left' or 'right' but got %s" % side)
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    seq = _read(sorted_sequence)
    scalar = not isinstance(values, Tensor)
    v = np.asarray(values) if scalar else _read(values)
    if sorter is not None:
        _need_tensor("searchsorted", sorter, "sorter", 6)
        srt = _read(sorter)
        if srt.dtype != np.int64:
            raise RuntimeError("torch.searchsorted(): sorter must be a tensor of long dtype but got dtype %s"
                               % torch_name(srt.dtype))
        if srt.shape != seq.shape:
            raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size, but got boundary "
                               "tensor %sand got sorter tensor %s" % (list(seq.shape), list(srt.shape)))
        seq = np.take_along_axis(seq, srt, axis=-1) if seq.ndim else seq
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
                           "dimension")
    if seq.ndim > 1 and (scalar or seq.shape[:-1] != v.shape[:-1] or v.ndim != seq.ndim):
        if scalar:
            raise RuntimeError("torch.searchsorted(): input value can be a scalar only when boundaries tensor "
                               "dimension is 1, but we got boundaries tensor dim(%d) and input value's dim(0) "
                               "numel(1)" % seq.ndim)
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got "
                           "boundaries tensor %s and input value tensor %s" % (list(seq.shape), list(v.shape)))
    how = "right" if right else "left"
    if seq.ndim == 1:
        res = np.searchsorted(seq, v, side=how)
    else:
        s2 = seq.reshape(-1, seq.shape[-1])
        v2 = v.reshape(-1, v.shape[-1])
        res = np.stack([np.searchsorted(s2[i], v2[i], side=how) for i in range(s2.shape[0])]).reshape(v.shape)
    return Tensor._wrap(np.asarray(res, np.int32 if out_int32 else np.int64))


def _read(t):
    """The values of an integer-result op's input; while recording, a guard on them."""
    d = t._data
    if _tp.recording[0]:
        rec = _tp.state().rec
        if rec is not None:
            rec.read(t, d)
    return d


# -- unique (no gradient) --------------------------------------------------------------------
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements (or slices along ``dim``), sorted; with the index of each
    element's value (``return_inverse``, int64 of the input's shape) and the counts.
    Each NaN is distinct, as in PyTorch."""
    _need_tensor("unique", input, "input", 1)
    d = _read(input)
    if dim is None:
        vals, inv, cnt = np.unique(d.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
        inv = inv.reshape(d.shape)
    else:
        ax = _wrap_dim(dim, d.ndim)
        if d.ndim == 0:
            vals, inv, cnt = d.reshape(()), np.zeros((), np.int64), np.ones((), np.int64)
        else:
            vals, inv, cnt = np.unique(d, return_inverse=True, return_counts=True, axis=ax)
            inv = inv.reshape(-1)
    out = Tensor._wrap(np.asarray(vals, d.dtype))
    if not (return_inverse or return_counts):
        return out
    res = [out]
    if return_inverse:
        res.append(_index_tensor(inv))
    if return_counts:
        res.append(_index_tensor(cnt))
    return tuple(res)
