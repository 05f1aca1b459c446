"""Gathers and scatters along a dimension: ``gather``, ``take``, ``index_select``,
``masked_fill``, ``scatter``, ``index_add``...

Every op here is a composition of kernels the shape and elementwise families
already have, so it needs no opcode: the index tensor is turned into flat element
indices (its values checked as PyTorch checks them), and the op is recorded as one
flat gather (``out = x.flat[lin]``, reverse: a scatter-add, so repeated indices
accumulate), a flat scatter-add (reverse: a gather), a setitem (``out.flat[lin] =
src.flat[vmap]``, reverse: zero at ``lin`` for ``self``, a gather for ``src``) or an
elementwise ``where``; scatter_reduce's prod, amax and amin reduce a matrix of each
position's elements with reduce.py's ops.  Their compiled reverse, create_graph and replay rules are
those kernels'.  While a function is recorded for replay, the values of an index or
mask tensor are a guard (a replay with other indices records again).
"""
import numpy as np

from ..core import tape as _tp
from ..core.descriptors import c_strides
from ..core.dtypes import cpp_name, torch_name
from ..core.registry import name_id
from ..core.tensor import Tensor, _wrap_dim
from ._record import RESHAPE, SETITEM, record_shape
from . import reduce as _rd
from . import shape as _sh
from .elementwise import BINARY_BY_NAME as _B

_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))
_WHERE = _B["where"].record
_MUL = _B["mul"].record
_DIV = _B["div"].record


# -- shared pieces ------------------------------------------------------------------
def _values(t):
    """The values of an index or mask tensor ``t``; while recording, a guard on them."""
    d = t._data
    if _tp.recording[0]:
        rec = _tp.state().rec
        if rec is not None:
            rec.read(t, d)
    return d


def _need_tensor(fname, v, arg, pos):
    if not isinstance(v, Tensor):
        raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                        % (fname, arg, pos, type(v).__name__))


def _no_out(out):
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")


def _shape1(shape):
    """A 0-d tensor's shape as PyTorch's kernels see it: one element along dim 0."""
    return shape if shape else (1,)


def _grid_lin(shape, strides):
    """For every position of an array of ``shape``, its flat index in an array of
    ``strides`` (elements): ``sum_d p_d * strides[d]``."""
    lin = np.zeros(shape, np.int64)
    for d, n in enumerate(shape):
        if n != 1:
            sh = [1] * len(shape)
            sh[d] = n
            lin = lin + np.arange(n, dtype=np.int64).reshape(sh) * strides[d]
    return np.broadcast_to(lin, shape)


def _lin_along(shape, strides, ax, idx):
    """As ``_grid_lin``, with the coordinate along ``ax`` replaced by ``idx`` (an
    integer array of ``shape``, or one that broadcasts to it)."""
    sub = list(shape)
    sub[ax] = 1
    return _grid_lin(tuple(sub), strides) + np.asarray(idx, np.int64) * strides[ax]


def _along(idx, nd, ax):
    """A 1-d index as an array along ``ax`` of an ``nd``-d array."""
    sh = [1] * nd
    sh[ax] = idx.size
    return idx.reshape(sh)


def _check_index_dims(x, index, src, ax, gathering):
    """PyTorch's shape rules of gather/scatter (none for an empty index): one ndim
    for all (a 0-d tensor counts as 1-d), and the index no larger than ``self``
    apart from ``ax`` (and than ``src`` anywhere)."""
    if not index._data.size:
        return
    nd = max(x.ndim, 1)
    if max(index.ndim, 1) != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as %s tensor"
                           % ("input" if gathering else "self"))
    if src is not None and max(src.ndim, 1) != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    xs, ish = _shape1(x.shape), _shape1(index.shape)
    wrong = any(d != ax and ish[d] > xs[d] for d in range(nd))
    if gathering:
        if wrong:
            d = next(d for d in range(nd) if d != ax and ish[d] > xs[d])
            raise RuntimeError("Size does not match at dimension %d expected index %s to be no larger than self %s "
                               "apart from dimension %d" % (d, list(index.shape), list(x.shape), ax))
        return
    if src is None:
        if wrong:
            raise RuntimeError("Expected index %s to be no larger than self %s apart from dimension %d"
                               % (list(index.shape), list(x.shape), ax))
        return
    ss = _shape1(src.shape)
    if wrong or any(ish[d] > ss[d] for d in range(nd)):
        raise RuntimeError("Expected index %s to be no larger than self %s apart from dimension %d and to be no "
                           "larger size than src %s" % (list(index.shape), list(x.shape), ax, list(src.shape)))


def _check_bounds(idx, n, ax):
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        raise RuntimeError("index %d is out of bounds for dimension %d with size %d"
                           % (idx.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]], ax, n))


def _fill_value(fname, x, value):
    """``value`` (a number or a 0-d tensor) as a 0-d tensor of ``x``'s dtype (a
    tensor through a differentiable cast)."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError("%s only supports a 0-dimensional value tensor, but got tensor with %d dimension(s)."
                               % (fname, value.ndim))
        return _sh.to_dtype(value, x.dtype) if value.dtype != x.dtype else value
    if not isinstance(value, (bool, int, float, np.number, np.bool_)):
        raise TypeError("%s() received an invalid combination of arguments - got (Tensor, %s, %s), but expected one "
                        "of:" % (fname.rstrip("_"), "Tensor" if fname.startswith("masked") else "int, Tensor",
                                 type(value).__name__))
    dt = x.dtype
    if dt.kind in "iu" and not isinstance(value, (bool, np.bool_)):
        info = np.iinfo(dt)
        if not (np.isfinite(value) and info.min <= int(value) <= info.max):
            raise RuntimeError("value cannot be converted to type %s without overflow" % _C_TYPES.get(dt.name, dt.name))
    return Tensor._const(np.asarray(value).astype(dt))


_C_TYPES = {"int64": "int64_t", "int32": "int32_t", "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t"}


def _masked(x, mask, v, name):
    """``where(mask, v, x)``, recorded under PyTorch's grad_fn ``name``."""
    return _WHERE(v, x, mask, name_id(name))


def _setitem(x, out, lin, vmap, src, name):
    """``out`` (``x`` with ``out.flat[lin] = src.flat[vmap]``) recorded as a setitem."""
    if not ((x._requires_grad or src._requires_grad) and _tp.state().grad):
        return Tensor._wrap(out)
    lin, vmap = lin.reshape(-1), vmap.reshape(-1)
    return record_shape(SETITEM, x, out, name, np.concatenate(([lin.size], lin, vmap)), b=src)


def _accumulate(x, src, lin, vmap, name):
    """``x`` with ``src.flat[vmap[j]]`` added at ``x.flat[lin[j]]``, in that order (as
    PyTorch's loop: repeated indices add up one after another)."""
    d = x._data
    lin, vmap = lin.reshape(-1), vmap.reshape(-1)
    if not ((x._requires_grad or src._requires_grad) and _tp.state().grad):
        out = d.copy()
        np.add.at(out.reshape(-1), lin, src._data.reshape(-1)[vmap])
        return Tensor._wrap(out)
    n = d.size
    picked = _sh.gather_flat(_sh.reshape(src, (-1,)), vmap)
    # x first, then the picked elements: the sums run in PyTorch's order
    both = _sh.cat([_sh.reshape(x, (-1,)), picked])
    flat = _sh.scatter_add(both, np.concatenate((np.arange(n, dtype=np.int64), lin)), n)
    return record_shape(RESHAPE, flat, flat._data.reshape(d.shape), name)     # (not a view: a new tensor)


# -- gather -------------------------------------------------------------------------
def gather(input, dim, index, *, sparse_grad=False, out=None):
    _no_out(out)
    _need_tensor("gather", input, "input", 1)
    _need_tensor("gather", index, "index", 3)
    x = input
    ax = _wrap_dim(dim, x.ndim)
    if index._data.size and index.dtype not in _INDEX_DTYPES:
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    _check_index_dims(x, index, None, ax, True)
    return _gather(x, ax, _values(index))


def _gather(x, ax, idx):
    """``x`` gathered along ``ax`` by the integer array ``idx`` (its shapes checked)."""
    xs, ish = _shape1(x.shape), _shape1(idx.shape)
    if idx.size:
        _check_bounds(idx, xs[ax], ax)
    lin = _lin_along(ish, c_strides(xs), ax, idx.reshape(ish)).reshape(idx.shape)
    return _sh.gather_linear(x, lin, "GatherBackward0")


def take_along_dim(input, indices, dim=None, *, out=None):
    _no_out(out)
    _need_tensor("take_along_dim", input, "input", 1)
    _need_tensor("take_along_dim", indices, "indices", 2)
    x = input
    if indices.dtype != np.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got %s"
                           % torch_name(indices.dtype))
    if dim is None:
        return _gather(_sh.reshape(x, (-1,)), 0, _values(indices).reshape(-1))
    ax = _wrap_dim(dim, x.ndim)
    if x.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           "but got %d dimensions for input, and %d dimensions for indices"
                           % (x.ndim, indices.ndim))
    xs = list(x.shape)
    xs[ax] = indices.shape[ax]
    try:
        shape = np.broadcast_shapes(tuple(xs), indices.shape)
    except ValueError:
        raise RuntimeError(_size_mismatch(tuple(xs), indices.shape)) from None
    idx = _values(indices)
    n = x.shape[ax]
    if idx.size and not n:
        raise RuntimeError("ZeroDivisionError")
    if idx.size:
        idx = idx % n       # (along a dim, PyTorch wraps any index, as Python's modulo)
    idx = np.broadcast_to(idx, shape)
    xs = list(shape)
    xs[ax] = x.shape[ax]
    if x.shape != tuple(xs):
        x = _sh.expand(x, *xs)
    return _gather(x, ax, idx)


def _size_mismatch(a, b):
    """PyTorch's message for two shapes that do not broadcast."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    for i in range(n - 1, -1, -1):
        if pa[i] != pb[i] and pa[i] != 1 and pb[i] != 1:
            return ("The size of tensor a (%d) must match the size of tensor b (%d) at non-singleton dimension %d"
                    % (pa[i], pb[i], i))
    return "shapes %s and %s do not broadcast" % (list(a), list(b))


# -- take ---------------------------------------------------------------------------
def take(input, index):
    _need_tensor("take", input, "input", 1)
    _need_tensor("take", index, "index", 2)
    x = input
    if index.dtype != np.int64:
        raise RuntimeError("take(): Expected a long tensor for index, but got %s" % torch_name(index.dtype))
    return _sh.gather_linear(x, _flat_index(_values(index), x._data.size), "TakeBackward0")


def put(input, index, source, accumulate=False):
    """``input`` with ``source``'s elements written (or added) at the flat positions
    ``index`` names, negative ones counting from the end (the out-of-place ``put_``)."""
    _need_tensor("put", input, "input", 1)
    _need_tensor("put", index, "index", 2)
    _need_tensor("put", source, "source", 3)
    x = input
    if index.dtype != np.int64:
        raise RuntimeError("put_(): Expected a long tensor for index, but got %s" % torch_name(index.dtype))
    if source._data.size != index._data.size:
        raise IndexError("put_(): Expected source and index to have the same number of elements, but got "
                         "source.numel() = %d, index.numel() = %d" % (source._data.size, index._data.size))
    if source.dtype != x.dtype:
        raise RuntimeError("put_(): self and source expected to have the same dtype, but got self.dtype = %s and "
                           "source.dtype = %s" % (torch_name(x.dtype), torch_name(source.dtype)))
    lin = _flat_index(_values(index), x._data.size).reshape(-1)
    vmap = np.arange(lin.size, dtype=np.int64)
    if accumulate:
        return _accumulate(x, source, lin, vmap, "PutBackward0")
    out = x._data.copy()
    out.reshape(-1)[lin] = source._data.reshape(-1)
    return _setitem(x, out, lin, vmap, source, "PutBackward0")


def _flat_index(idx, n):
    """take's and put's flat indices, negative ones from the end, checked."""
    if idx.size:
        bad = (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexError("out of range: tried to access index %d on a tensor of %d elements."
                             % (idx.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]], n))
    return np.where(idx < 0, idx + n, idx)


# -- index_select -------------------------------------------------------------------
def index_select(input, dim, index, *, out=None):
    _no_out(out)
    _need_tensor("index_select", input, "input", 1)
    _need_tensor("index_select", index, "index", 3)
    x = input
    ax = _wrap_dim(dim, x.ndim)
    if index.dtype not in (np.int64, np.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    idx = _values(index).reshape(-1)
    xs = _shape1(x.shape)
    if idx.size and ((idx < 0) | (idx >= xs[ax])).any():
        raise IndexError("index out of range in self")
    out_shape = list(xs)
    out_shape[ax] = idx.size
    lin = _lin_along(tuple(out_shape), c_strides(xs), ax, _along(idx, len(xs), ax))
    if not x.ndim:
        lin = lin.reshape(())         # (a 0-d input gives a 0-d result)
    return _sh.gather_linear(x, lin, "IndexSelectBackward0")


# -- masked_fill --------------------------------------------------------------------
def _broadcast(x, mask):
    """The shape of ``x`` and ``mask`` broadcast (PyTorch's message when they do not)."""
    try:
        return np.broadcast_shapes(mask.shape, x.shape)
    except ValueError:
        raise RuntimeError(_size_mismatch(mask.shape, x.shape)) from None


def masked_fill(input, mask, value):
    _need_tensor("masked_fill", input, "input", 1)
    _need_tensor("masked_fill", mask, "mask", 2)
    x = input
    if mask.dtype != np.bool_:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype %s"
                           % cpp_name(mask.dtype))
    v = _fill_value("masked_fill_", x, value)
    _broadcast(x, mask)         # (out of place, x broadcasts to the mask's shape too, as in PyTorch)
    return _masked(x, mask, v, "MaskedFillBackward1" if isinstance(value, Tensor) else "MaskedFillBackward0")


# -- masked_select ------------------------------------------------------------------
def masked_select(input, mask, *, out=None):
    _no_out(out)
    _need_tensor("masked_select", input, "input", 1)
    _need_tensor("masked_select", mask, "mask", 2)
    x = input
    if mask.dtype != np.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = _broadcast(x, mask)
    m = _values(mask)
    if x.shape != shape:
        x = _sh.expand(x, *shape)
    lin = np.flatnonzero(np.broadcast_to(m, shape))
    return _sh.gather_linear(x, lin, "MaskedSelectBackward0")


# -- scatter ------------------------------------------------------------------------
def _scatter_index(fname, x, dim, index, src):
    """Checks of scatter's arguments; the flat indices in ``x`` and in ``src`` of the
    index's elements."""
    _need_tensor(fname, x, "input", 1)
    _need_tensor(fname, index, "index", 3)
    ax = _wrap_dim(dim, x.ndim)
    # (scatter_add and scatter_reduce check as scatter does, and say so)
    if index._data.size and index.dtype not in _INDEX_DTYPES:
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src is not None and src.dtype != x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    _check_index_dims(x, index, src, ax, False)
    idx = _values(index)
    xs, ish = _shape1(x.shape), _shape1(index.shape)
    if idx.size:
        _check_bounds(idx, xs[ax], ax)
    lin = _lin_along(ish, c_strides(xs), ax, idx.reshape(ish))
    vmap = None if src is None else _grid_lin(ish, c_strides(_shape1(src.shape)))
    return lin, vmap


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    x = input
    if src is not None and not isinstance(src, Tensor):     # scatter(x, dim, index, 2.0)
        src, value = None, src
    if (src is None) == (value is None):
        raise TypeError("scatter() expects either a src tensor or a value")
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        return _scatter_reduced(x, dim, index, src, value, reduce)
    lin, vmap = _scatter_index("scatter", x, dim, index, src)
    if src is None:
        mask = np.zeros(x.shape, np.bool_)
        mask.reshape(-1)[lin.reshape(-1)] = True
        return _masked(x, Tensor._const(mask), _fill_value("scatter", x, value), "ScatterBackward1")
    out = x._data.copy()
    out.reshape(-1)[lin.reshape(-1)] = src._data.reshape(-1)[vmap.reshape(-1)]
    return _setitem(x, out, lin, vmap, src, "ScatterBackward0")


def _scatter_reduced(x, dim, index, src, value, reduce):
    """scatter's deprecated ``reduce=``: values only, as in PyTorch (whose reverse
    of it is not implemented)."""
    if src is None:
        src = Tensor._const(np.full(index.shape, value, x.dtype))
    lin, vmap = _scatter_index("scatter", x, dim, index, src)
    if (x._requires_grad or src._requires_grad) and _tp.state().grad:
        raise RuntimeError("the derivative for 'scatter' with reduce= is not implemented: use scatter_reduce")
    out = x._data.copy()
    ufunc = np.add if reduce == "add" else np.multiply
    ufunc.at(out.reshape(-1), lin.reshape(-1), src._data.reshape(-1)[vmap.reshape(-1)])
    return Tensor._wrap(out)


def scatter_add(input, dim, index, src):
    _need_tensor("scatter_add", src, "src", 4)
    lin, vmap = _scatter_index("scatter_add", input, dim, index, src)
    return _accumulate(input, src, lin, vmap, "ScatterAddBackward0")


# -- index_add, index_copy, index_fill ------------------------------------------------
def _index_vector(fname, x, dim, index, dtypes):
    """The checks every index_* op makes first; ``(axis, index values as a vector)``."""
    _need_tensor(fname, x, "input", 1)
    _need_tensor(fname, index, "index", 3)
    ax = _wrap_dim(dim, x.ndim)
    if index.dtype not in dtypes:
        if fname == "index_add":
            raise RuntimeError("index_add_(): Expected dtype int32/int64 for index but got: %s"
                               % torch_name(index.dtype))
        if fname == "index_copy":
            raise RuntimeError("index_copy_(): Expected a long tensor for index, but got %s" % torch_name(index.dtype))
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if index.ndim > 1:
        if fname == "index_add":
            raise IndexError("index_add_(): Index is supposed to be a vector, but got dim: %d with type: %s and "
                             "size: %s" % (index.ndim, torch_name(index.dtype), list(index.shape)))
        if fname == "index_copy":
            raise IndexError("index_copy_(): Index should have dimension 1 or 0 (got %d)" % index.ndim)
        raise RuntimeError("Index has to be a vector/scalar")
    return ax, _values(index).reshape(-1)


def _source_lin(x, ax, idx, source):
    """The flat index in ``x`` of each element of ``source`` (slice ``j`` along ``ax``
    goes to slice ``idx[j]``)."""
    xs = _shape1(x.shape)
    return _lin_along(_shape1(source.shape), c_strides(xs), ax, _along(idx, len(xs), ax))


def index_add(input, dim, index, source, *, alpha=1, out=None):
    _no_out(out)
    x = input
    _need_tensor("index_add", source, "source", 4)
    ax, idx = _index_vector("index_add", x, dim, index, (np.int64, np.int32))
    xs, ss = _shape1(x.shape), _shape1(source.shape)
    if source.ndim != x.ndim or any(a != b for d, (a, b) in enumerate(zip(ss, xs)) if d != ax):
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified "
                           "dimension. Got self.shape = %s source.shape = %s" % (list(x.shape), list(source.shape)))
    if idx.size != ss[ax]:
        raise RuntimeError("index_add_(): Number of indices (%d) should be equal to source.size(dim): (%d), for "
                           "dim: %d" % (idx.size, ss[ax], ax))
    if source.dtype != x.dtype:
        raise RuntimeError("index_add_(): self (%s) and source (%s) must have the same scalar type"
                           % (torch_name(x.dtype), torch_name(source.dtype)))
    if idx.size:
        _check_bounds(idx, xs[ax], ax)
    lin = _source_lin(x, ax, idx, source)
    if alpha != 1 or type(alpha) is bool:
        # (alpha in the result's dtype: an integer tensor truncates it, as PyTorch)
        source = _MUL(source, Tensor._const(np.asarray(alpha).astype(x.dtype)))
    return _accumulate(x, source, lin, np.arange(lin.size, dtype=np.int64), "IndexAddBackward0")


def index_copy(input, dim, index, source, *, out=None):
    _no_out(out)
    x = input
    _need_tensor("index_copy", source, "source", 4)
    ax, idx = _index_vector("index_copy", x, dim, index, (np.int64,))
    if source.ndim and x.ndim and source.ndim != x.ndim:
        raise IndexError("index_copy_(): When source and destination are not scalars, their dimensionality must "
                         "match. Source dimensionality (%d), destination dimensionality (%d)" % (source.ndim, x.ndim))
    ns = source.shape[ax] if source.ndim else 1
    if idx.size != ns:
        raise IndexError("index_copy_(): Number of indices (%d) should be equal to source.size(dim) (%d)"
                         % (idx.size, ns))
    xsl = [n for d, n in enumerate(x.shape) if d != ax]
    ssl = [n for d, n in enumerate(source.shape) if d != ax]
    if xsl != ssl:
        raise RuntimeError("index_copy_(): Source/destination tensor must have same slice shapes. Destination slice "
                           "shape: %s at dimension %d and source slice shape: %s at dimension 0."
                           % (" ".join(map(str, xsl)), ax, " ".join(map(str, ssl))))
    if source.dtype != x.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, but got (self) %s "
                           "and (source) %s" % (torch_name(x.dtype), torch_name(source.dtype)))
    n = _shape1(x.shape)[ax]
    if idx.size:
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            raise IndexError("index_copy_(): index %d is out of bounds for dimension %d with size %d"
                             % (idx[np.flatnonzero(bad)[0]], ax, n))
    lin = _source_lin(x, ax, idx, source)
    vmap = np.arange(lin.size, dtype=np.int64)
    out = x._data.copy()
    out.reshape(-1)[lin.reshape(-1)] = source._data.reshape(-1)
    return _setitem(x, out, lin, vmap, source, "IndexCopyBackward0")


def index_fill(input, dim, index, value):
    x = input
    ax, idx = _index_vector("index_fill", x, dim, index, (np.int64,))
    v = _fill_value("index_fill_", x, value)
    xs = _shape1(x.shape)
    n = xs[ax]
    if idx.size:
        bad = (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexError("index %d is out of bounds for dimension %d with size %d"
                             % (idx[np.flatnonzero(bad)[0]], ax, n))
    sel = list(xs)
    sel[ax] = idx.size
    lin = _lin_along(tuple(sel), c_strides(xs), ax, _along(np.where(idx < 0, idx + n, idx), len(xs), ax))
    mask = np.zeros(x.shape, np.bool_)
    mask.reshape(-1)[lin.reshape(-1)] = True
    return _masked(x, Tensor._const(mask), v, "IndexFillBackward1" if isinstance(value, Tensor)
                   else "IndexFillBackward0")


# -- masked_scatter -----------------------------------------------------------------
def masked_scatter(input, mask, source):
    _need_tensor("masked_scatter", input, "input", 1)
    _need_tensor("masked_scatter", mask, "mask", 2)
    _need_tensor("masked_scatter", source, "source", 3)
    x = input
    if mask.dtype != np.bool_:
        raise RuntimeError("masked_scatter_ only supports boolean masks, but got mask with dtype %s"
                           % torch_name(mask.dtype))
    if source.dtype != x.dtype:
        raise RuntimeError("masked_scatter: expected self and source to have same dtypes but got%s and %s"
                           % (torch_name(x.dtype), torch_name(source.dtype)))
    shape = _broadcast(x, mask)
    m = _values(mask)
    if x.shape != shape:
        x = _sh.expand(x, *shape)
    lin = np.flatnonzero(np.broadcast_to(m, shape))
    if lin.size > source._data.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    vmap = np.arange(lin.size, dtype=np.int64)
    out = x._data.copy()       # (C order: an expanded input becomes a plain array)
    out.reshape(-1)[lin] = source._data.reshape(-1)[:lin.size]
    return _setitem(x, out, lin, vmap, source, "MaskedScatterBackward0")


# -- scatter_reduce -------------------------------------------------------------------
_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_ALIASES = {"max": "amax", "min": "amin"}      # (PyTorch accepts these, undocumented)
_AT = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}
_PAD = {"prod": 1.0, "amax": -np.inf, "amin": np.inf}


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    """``self`` with the elements of ``src`` reduced into the positions ``index``
    names.  sum and mean scatter-add; prod, amax and amin reduce a matrix of each
    touched position's elements (``_groups``) with reduce.py's prod/amax/amin, whose
    gradients are PyTorch's for this op too (zeros in a product, ties split evenly)."""
    _no_out(out)
    x = input
    _need_tensor("scatter_reduce", src, "src", 4)
    reduce = _ALIASES.get(reduce, reduce)
    if reduce not in _REDUCTIONS:
        raise RuntimeError("reduce argument must be either sum, prod, mean, amax or amin, got %s" % reduce)
    lin, vmap = _scatter_index("scatter_reduce", x, dim, index, src)
    lin, vmap = lin.reshape(-1), vmap.reshape(-1)
    d = x._data
    name = "ScatterReduceBackward0"
    touched, gid = np.unique(lin, return_inverse=True)
    per = np.bincount(gid.reshape(-1), minlength=touched.size)
    tracking = (x._requires_grad or src._requires_grad) and _tp.state().grad
    if not tracking:
        out = d.copy()
        flat = out.reshape(-1)
        if not include_self and reduce in ("sum", "mean"):
            flat[touched] = 0
        _reduce_at(reduce, flat, lin, src._data.reshape(-1)[vmap], touched, per, include_self)
        return Tensor._wrap(out)
    if reduce in ("sum", "mean"):
        base = x
        if not include_self and touched.size:
            mask = np.zeros(d.shape, np.bool_)
            mask.reshape(-1)[touched] = True
            base = _masked(x, Tensor._const(mask), Tensor._const(np.zeros((), d.dtype)), "MaskedFillBackward0")
        if reduce == "sum":
            return _accumulate(base, src, lin, vmap, name)
        total = _accumulate(base, src, lin, vmap, "ScatterAddBackward0")
        count = np.ones(d.size, d.dtype)
        count[touched] = per + (1 if include_self else 0)
        return _DIV(total, Tensor._const(count.reshape(d.shape)), None, name_id(name))
    if not touched.size:
        return _setitem(x, d.copy(), lin, vmap, src, name)      # (nothing to reduce: a copy of x)
    rows = _groups(x, src, lin, vmap, touched, gid.reshape(-1), per, include_self, _PAD[reduce])
    r = _rd.prod(rows, 1) if reduce == "prod" else (_rd.amax if reduce == "amax" else _rd.amin)(rows, 1)
    out = d.copy()
    out.reshape(-1)[touched] = r._data
    return _setitem(x, out, touched, np.arange(touched.size, dtype=np.int64), r, name)


def _reduce_at(reduce, flat, lin, picked, touched, per, include_self):
    """The values of scatter_reduce in place in ``flat`` (no gradient needed)."""
    if not include_self and reduce in ("prod", "amax", "amin"):
        first = np.unique(lin, return_index=True)[1]       # each position's first element starts it
        flat[touched] = picked[first]
        keep = np.ones(lin.size, np.bool_)
        keep[first] = False
        lin, picked = lin[keep], picked[keep]
    _AT[reduce].at(flat, lin, picked)
    if reduce == "mean":
        count = per + (1 if include_self else 0)
        if flat.dtype.kind == "f":
            flat[touched] /= count
        else:
            flat[touched] //= count.astype(flat.dtype)


def _groups(x, src, lin, vmap, touched, gid, per, include_self, pad):
    """A (touched positions, most elements) matrix: row t holds what is reduced into
    ``touched[t]`` (``x``'s element first when included, then src's in index order),
    padded with ``pad``, which changes no prod, amax or amin."""
    n, m = x._data.size, lin.size
    order = np.argsort(gid, kind="stable")
    first = np.cumsum(per) - per
    col = np.arange(m) - first[gid[order]] + (1 if include_self else 0)
    k = int(per.max()) + (1 if include_self else 0)
    at = n if include_self else 0
    parts = ([_sh.reshape(x, (-1,))] if include_self else []) + [
        _sh.gather_flat(_sh.reshape(src, (-1,)), vmap), Tensor._const(np.full(1, pad, x.dtype))]
    where = np.full((touched.size, k), at + m, np.int64)
    where[gid[order], col] = at + order
    if include_self:
        where[:, 0] = touched
    return _sh.gather_linear(_sh.cat(parts), where, "IndexBackward0")
