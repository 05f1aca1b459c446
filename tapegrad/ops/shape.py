"""Shape, view, indexing and joining operations.

Five kernels cover them all, because in C order every one of these ops either
keeps the element order (reshape family: the adjoint passes through), reads the
input through a strided descriptor (transpose, permute, expand, slicing, integer
indexing: the adjoint is scattered back through the same map), reads it through
explicit flat indices (advanced indexing, max along a dim), overwrites a region
(``__setitem__``: CopySlices), or concatenates (cat, stack).
"""
import numpy as np

from .. import tape as _tp
from .._jit import jit
from ..kernels.index import (c_strides, descriptor, slot_view, strided_gather_add, strided_map, strided_map_np,
                             strided_scatter_add, u64)
from ..tensor import _TYPE_NAME, Tensor, _wrap_dim
from .promotion import promote_types
from .registry import SHAPE, define, name_id

RESHAPE, STRIDED, GATHER, SETITEM, CAT, SCATTER_ADD, STRIDED_SCATTER = range(7)
CODES = {
    RESHAPE: define(SHAPE, RESHAPE, "reshape"),
    STRIDED: define(SHAPE, STRIDED, "strided"),
    GATHER: define(SHAPE, GATHER, "gather"),
    SETITEM: define(SHAPE, SETITEM, "setitem"),
    CAT: define(SHAPE, CAT, "cat"),
    SCATTER_ADD: define(SHAPE, SCATTER_ADD, "scatter_add"),
    STRIDED_SCATTER: define(SHAPE, STRIDED_SCATTER, "strided_scatter"),
}
VARIADIC = -2   # an entry whose input slots are listed in aux, see ``_record``


@jit
def shape_reverse(k, g, dx, dv, aux, at, aloc, aptr, aarena, sizes):
    n = g.size
    if k == RESHAPE:
        for i in range(n):
            dx[i] += g[i]
    elif k == STRIDED:
        strided_scatter_add(dx, g, aux, at)
    elif k == GATHER:
        for i in range(n):
            dx[aux[at + i]] += g[i]
    elif k == SCATTER_ADD:  # the transpose of GATHER (used by the differentiable reverse)
        for i in range(dx.size):
            dx[i] += g[aux[at + i]]
    elif k == STRIDED_SCATTER:  # the transpose of STRIDED (likewise)
        strided_gather_add(dx, g, aux, at)
    elif k == SETITEM:      # aux: [r, lin[r], vmap[r]]
        r = aux[at]
        if dx.size:
            keep = np.ones(n, np.bool_)
            for j in range(r):
                keep[aux[at + 1 + j]] = False
            for i in range(n):
                if keep[i]:
                    dx[i] += g[i]
        if dv.size:
            for j in range(r):
                dv[aux[at + 1 + r + j]] += g[aux[at + 1 + j]]
    elif k == CAT:          # aux: [m, slots[m], outer, total, (inner, offset)[m]]
        m = aux[at]
        outer = aux[at + 1 + m]
        total = aux[at + 2 + m]
        for j in range(m):
            s = aux[at + 1 + j]
            inner = aux[at + 3 + m + 2 * j]
            off = aux[at + 4 + m + 2 * j]
            d = slot_view(aloc, aptr, np.int64(aarena.ctypes.data), s, sizes[s])
            if d.size == 0:
                continue
            for o in range(outer):
                for q in range(inner):
                    d[o * inner + q] += g[o * total + off + q]


# -- the compiled forward of a replay (kernels/forward.py) -------------------------
COMPILED_FORWARD = (RESHAPE, STRIDED, GATHER)


@jit
def shape_forward(k, x, y, aux, at):
    """``y`` from ``x``: a copy, a strided view made contiguous, or a gather (its
    indices in ``aux``, checked when recorded or made from the arguments)."""
    if k == RESHAPE:
        for i in range(y.size):
            y[i] = x[i]
    elif k == STRIDED:
        mp = strided_map(aux, at).astype(np.uint64)
        for i in range(y.size):
            y[i] = x[mp[i]]
    else:
        for i in range(y.size):
            y[i] = x[u64(aux[at + i])]


@jit
def pair_index(a, b, n0, n1, aux, at):
    """``aux[at + i]``: the flat index of ``x[a[i], b[i]]`` in an (n0, n1) array
    (``logits[rows, labels]``), negative indices counting from the end.  Returns -1,
    or the first ``i`` out of range (the caller raises)."""
    for i in range(a.size):
        r = a[i]
        c = b[i]
        if r < 0:
            r += n0
        if c < 0:
            c += n1
        if r < 0 or r >= n0 or c < 0 or c >= n1:
            return i
        aux[at + i] = r * n1 + c
    return -1


# -- recording -------------------------------------------------------------------
def _record(kind, x, out, name, words=None, b=None):
    """Record ``out`` computed from tensor ``x`` (and ``b`` for setitem)."""
    out = out if type(out) is np.ndarray else np.asarray(out)
    rg = x._rg or (b is not None and b._rg)
    if not rg or not _tp.state().grad:
        return Tensor._wrap(out)
    T = _tp.current()
    s = -1 if not (x._rg or _tp.recording[0]) else \
        (x._slot if (x._tid == T.id and x._sver == x._ver[0]) else T.adopt(x))     # (replay needs x)
    sb = -1
    if b is not None:
        sb = b._slot if (b._tid == T.id and b._sver == b._ver[0]) else T.adopt(b)
    at = -1 if words is None else T.aux_append(words)
    ver = [0]
    o = T.new_slot(CODES[kind], s, sb, -1, at, -1, name_id(name), 0.0, 0.0, out, False, ver)
    t = Tensor._recorded(out, T, o, ver)
    return t


def _untracked_view(t, x):
    """A view that was not recorded: shares x's version; one made under no_grad
    from a tensor that requires grad is a leaf that requires grad (PyTorch)."""
    t._ver = x._ver
    t._sver = x._ver[0]
    ex = t._extra()
    ex.base = x._x.base if (x._x is not None and x._x.base is not None) else x
    if x._rg:
        t._rg = True
        ex.name = "no_grad_view"


def _mark_view(t, x):
    """Remember the tensor whose storage ``t`` views (for in-place checks)."""
    if out_is_view(t._data, x._data):
        if not t._rg:
            _untracked_view(t, x)
            return t
        root = x._x.base if (x._x is not None and x._x.base is not None) else x
        t._extra().base = root
        t._ver = x._ver
        t._sver = x._ver[0]
        t._tape.vobj[t._slot] = x._ver
        t._tape.set_field(t._slot, _tp.VNUM, x._ver[0])
    return t


def out_is_view(a, b):
    return a.base is not None and (a.base is b or a.base is b.base)


def reshape(x, shape, name="ViewBackward0"):
    shape = _shape_arg(shape)
    try:
        out = x._data.reshape(shape)
    except ValueError:
        out = None
    if out is None or out.shape != shape:   # (an inferred size: NumPy takes any negative number for it)
        _check_inferred(shape)
        if out is None:
            raise RuntimeError("shape '%s' is invalid for input of size %d" % (list(shape), x._data.size))
    return _mark_view(_record(RESHAPE, x, out, name), x)


def _check_inferred(shape):
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for i, n in enumerate(shape):
        if n < -1:
            raise RuntimeError("invalid shape dimension %d at index %d of shape %s" % (n, i, list(shape)))


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def flatten(input, start_dim=0, end_dim=-1):
    x = input
    nd = x.ndim
    if nd == 0:
        return reshape(x, (1,))
    s, e = _wrap_dim(start_dim, nd), _wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    sh = x.shape
    new = sh[:s] + (int(np.prod(sh[s:e + 1])),) + sh[e + 1:]
    return reshape(x, new)


def squeeze(input, dim=None, **kw):
    x = input
    if kw:
        dim = _dim_alias("squeeze", kw, dim, None)
    sh = x.shape
    if dim is None:
        return reshape(x, tuple(d for d in sh if d != 1), "SqueezeBackward0")
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    wrapped = [_wrap_dim(d, x.ndim) for d in dims]      # (a 0-d tensor takes dim 0 or -1, as in PyTorch)
    ax = set(wrapped)
    if len(ax) < len(wrapped):
        raise RuntimeError("dim %d appears multiple times in the list of dims"
                           % next(d for i, d in enumerate(wrapped) if d in wrapped[:i]))
    new = tuple(d for i, d in enumerate(sh) if not (i in ax and d == 1))
    return reshape(x, new, "SqueezeBackward1")


def unsqueeze(input, dim=None, **kw):
    x = input
    if kw:
        dim = _dim_alias("unsqueeze", kw, dim, None)
    if dim is None:
        raise TypeError("unsqueeze() missing 1 required positional argument: 'dim'")
    nd = x.ndim + 1
    d = _wrap_dim(dim, nd)
    sh = x.shape
    return reshape(x, sh[:d] + (1,) + sh[d:], "UnsqueezeBackward0")


def _view_words(shape, index_fn):
    """Descriptor of ``index_fn`` applied to a C-ordered array of ``shape``,
    found by applying it to a zero-size-buffer int8 array (only the geometry is used)."""
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape=shape, strides=c_strides(shape),
                                            writeable=False)
    v = index_fn(dummy)
    off = v.__array_interface__["data"][0] - dummy.__array_interface__["data"][0]
    return descriptor(v.shape, v.strides, off), v.shape


_VIEWS = {}     # (input shape, what the view is) -> its descriptor words


def strided(x, index_fn, name, key=None):
    """A view of ``x`` that NumPy expresses as strides (``index_fn`` makes it;
    ``key``, when given, names the view so its descriptor is computed once)."""
    out = index_fn(x._data)
    if not x._rg or not _tp.state().grad:
        t = Tensor._wrap(out if type(out) is np.ndarray else np.asarray(out))
        if out_is_view(t._data, x._data):     # shares storage, so shares the version
            _untracked_view(t, x)
        return t
    words = None if key is None else _VIEWS.get((x.shape, key))
    if words is None:
        words = np.array(_view_words(x.shape, index_fn)[0], np.int64)
        if key is not None:
            if len(_VIEWS) > 4096:
                _VIEWS.clear()
            _VIEWS[(x.shape, key)] = words
    return _mark_view(_record(STRIDED, x, out, name, words), x)


def _index_key(idx):
    """A hashable spelling of a basic index (slices are not hashable before 3.12)."""
    return tuple((k.start, k.stop, k.step) if type(k) is slice else k for k in idx)


def permute(input, *dims):
    x = input
    dims = _shape_arg(dims)
    nd = x.ndim
    if len(dims) != nd:
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does not match "
                           "the length of the desired ordering of dimensions i.e. input.dim() = %d is not "
                           "equal to len(dims) = %d" % (nd, len(dims)))
    perm = tuple(_wrap_dim(d, nd) for d in dims)
    if len(set(perm)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return strided(x, lambda a: a.transpose(perm), "PermuteBackward0", ("permute", perm))


def transpose(x, dim0, dim1, name="TransposeBackward0"):
    nd = x.ndim
    if nd == 0:
        _wrap_dim(dim0, 0)
        _wrap_dim(dim1, 0)
        return x
    a, b = _wrap_dim(dim0, nd), _wrap_dim(dim1, nd)
    return strided(x, lambda v: np.swapaxes(v, a, b), name, ("swap", a, b))


def t(input):
    x = input
    if x.ndim > 2:
        raise RuntimeError("t() expects a tensor with <= 2 dimensions, but self is %dD" % x.ndim)
    if x.ndim < 2:
        return reshape(x, x.shape, "TBackward0")
    return transpose(x, 0, 1, "TBackward0")


def expand(input, *size):
    x, sizes = input, size
    sizes = _shape_arg(sizes)
    sh = x.shape
    if len(sizes) < len(sh):
        raise RuntimeError(_expand_ndim_msg(x, sizes))
    lead = len(sizes) - len(sh)
    target = tuple(sh[i - lead] if (s == -1 and i >= lead) else s for i, s in enumerate(sizes))
    if lead or target != sh:
        _check_expand(sh, sizes, target, lead)
    return strided(x, lambda a: np.broadcast_to(a, target), "ExpandBackward0", ("expand", target))


def _expand_ndim_msg(x, sizes):
    return ("expand(torch.%s{%s}, size=%s): the number of sizes provided (%d) must be greater or equal to the "
            "number of dimensions in the tensor (%d)"
            % (_TYPE_NAME.get(x.dtype, "Tensor"), list(x.shape), list(sizes), len(sizes), x.ndim))


def _check_expand(sh, sizes, target, lead):
    """PyTorch's checks of ``expand`` (right to left, as it infers the sizes)."""
    for i in range(len(target) - 1, -1, -1):
        n = target[i]
        if i < lead:
            if n < 0:
                raise RuntimeError("The expanded size of the tensor (%d) isn't allowed in a leading, non-existing "
                                   "dimension %d" % (n, i))
            continue
        e = sh[i - lead]
        if n != e and (e != 1 or n < 0):
            raise RuntimeError("The expanded size of the tensor (%d) must match the existing size (%d) at "
                               "non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s"
                               % (n, e, i, list(sizes), list(sh)))


def broadcast_to(input, shape):
    x = input
    return expand(x, *_shape_arg((shape,)))


def diagonal(input, offset=0, dim1=0, dim2=1):
    x = input
    a, b = _wrap_dim(dim1, x.ndim), _wrap_dim(dim2, x.ndim)
    if a == b:
        raise RuntimeError("diagonal dimensions cannot be identical %d, %d" % (dim1, dim2))
    return strided(x, lambda v: np.diagonal(v, offset, a, b), "DiagonalBackward0")


def gather_linear(x, lin, name):
    """``out.flat[j] = x.flat[lin.flat[j]]`` (``lin`` an int array of the output's shape)."""
    out = x._data.reshape(-1)[lin] if x._data.size else np.zeros(lin.shape, x.dtype)
    if not x._rg or not _tp.state().grad:
        return Tensor._wrap(np.asarray(out))    # a 0-d index gives a NumPy scalar
    return _record(GATHER, x, out, name, lin.ravel())


# -- indexing ----------------------------------------------------------------------
def _normalize_index(x, idx):
    """Index as NumPy understands it; True when it has an advanced (array) part."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    if len(idx) > x.ndim:
        _check_index_count(x, idx)
    out, advanced = [], False
    dim = 0
    for k in idx:
        if isinstance(k, Tensor):
            if _tp.recording[0]:        # a tensor as index: a guard on its values, or a live argument
                from ..replay import index_hook
                k = index_hook(k)
            else:
                k = k._data
            if k.ndim == 0 and k.dtype.kind in "iu":
                k = int(k)
        if isinstance(k, list):
            k = np.asarray(k)
            if k.dtype.kind not in "iub":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if isinstance(k, np.ndarray):
            if k.dtype.kind == "b":
                for j in range(k.ndim):
                    if dim + j >= x.ndim or k.shape[j] != x.shape[dim + j]:
                        raise IndexError(
                            "The shape of the mask %s at index %d does not match the shape of the indexed "
                            "tensor %s at index %d" % (list(k.shape), j, list(x.shape[dim:]), dim + j))
                dim += k.ndim
            elif k.dtype.kind in "iu":
                dim += 1
            else:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            advanced = True
        elif isinstance(k, slice):
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero" if k.step else "slice step cannot be zero")
            dim += 1
        elif k is None:
            pass
        elif k is Ellipsis:
            dim = x.ndim - sum(1 for j in idx if j is not None and j is not Ellipsis) + dim
        elif isinstance(k, (bool, np.bool_)):
            advanced = True
        elif isinstance(k, (int, np.integer)):
            if dim < x.ndim:
                size = x.shape[dim]
                if not -size <= k < size:
                    raise IndexError("index %d is out of bounds for dimension %d with size %d" % (k, dim, size))
            dim += 1
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                             "are valid indices (got %s)" % type(k).__name__)
        out.append(k)
    return tuple(out), advanced


def _check_index_count(x, idx):
    """PyTorch's errors for an index that uses more dimensions than ``x`` has."""
    used = 0
    for k in idx:
        if k is None or k is Ellipsis or isinstance(k, (bool, np.bool_)):
            continue
        if isinstance(k, (Tensor, np.ndarray)) and k.dtype.kind == "b":
            used += k.ndim
        else:
            used += 1
    nd = x.ndim
    if used <= nd:
        return
    if nd == 0 and used == 1:
        k = next(k for k in idx if not (k is None or k is Ellipsis or isinstance(k, (bool, np.bool_))))
        if isinstance(k, (int, np.integer)):
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        if isinstance(k, slice):
            raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    raise IndexError("too many indices for tensor of dimension %d" % nd)


def _index_name(idx):
    kinds = {type(k) for k in idx}
    if any(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in idx):
        return "SelectBackward0"
    if slice in kinds:
        return "SliceBackward0"
    if type(None) in kinds:
        return "UnsqueezeBackward0"
    return "AliasBackward0"


def _fix_index_error(e):
    msg = str(e).replace("for axis", "for dimension")
    return IndexError(msg)


def getitem(x, idx):
    if _tp.recording[0]:
        from ..replay import live_gather_hook
        nidx, advanced = _normalize_index(x, idx)
        return live_gather_hook(_getitem(x, nidx, advanced), x.shape, nidx)
    idx, advanced = _normalize_index(x, idx)
    return _getitem(x, idx, advanced)


def _getitem(x, idx, advanced):
    try:
        if advanced:
            d = x._data
            if (len(idx) == d.ndim and
                    all(type(k) is np.ndarray and k.dtype.kind in "iu" for k in idx)):
                # one integer array per dimension (e.g. logp[rows, labels]): flat
                # indices directly, no index grid
                out = d[idx]
                if not x._rg or not _tp.state().grad:
                    return Tensor._wrap(out)
                lin = np.ravel_multi_index(idx, d.shape, mode="wrap") if d.size else np.zeros(out.shape, np.int64)
                return _record(GATHER, x, out, "IndexBackward0", lin.ravel())
            lin = np.arange(d.size, dtype=np.int64).reshape(x.shape)[idx]
            return gather_linear(x, lin, "IndexBackward0")
        name = _index_name(idx)
        if not any(k is Ellipsis for k in idx):
            idx = idx + (Ellipsis,)     # a 0-d view, never a NumPy scalar
        return strided(x, lambda a: a[idx], name, ("index",) + _index_key(idx))
    except IndexError as e:
        raise _fix_index_error(e) from None


def setitem(y, idx, value, view_op=True):
    """``y[idx] = value``, in place (grad_fn CopySlices for y)."""
    from .inplace import check_inplace, commit_inplace
    v = value if isinstance(value, Tensor) else Tensor._const(np.asarray(value, dtype=y.dtype))
    check_inplace(y, view_op)
    idx, advanced = _normalize_index(y, idx)
    d = y._data
    tracking = (y._rg or v._rg) and _tp.state().grad
    try:
        if tracking:
            region = np.arange(d.size, dtype=np.int64).reshape(d.shape)[idx]
            vmap = np.broadcast_to(np.arange(v._data.size, dtype=np.int64).reshape(v.shape), region.shape)
        d[idx] = v._data
    except IndexError as e:
        raise _fix_index_error(e) from None
    except ValueError as e:
        raise _setitem_error(d, idx, advanced, v, e) from None
    if not tracking:
        commit_inplace(y, None)
        return
    words = np.concatenate(([region.size], region.ravel(), vmap.ravel()))
    r = _record(SETITEM, y, d.copy(), "IndexPutBackward0" if advanced else "CopySlices", words, b=v)
    commit_inplace(y, r)


def _setitem_error(d, idx, advanced, v, e):
    try:
        shape = d[idx].shape
    except Exception:       # noqa: BLE001  (only the message is at stake)
        return RuntimeError(str(e))
    vs = v.shape
    if advanced:
        return RuntimeError("shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of "
                            "shape %s" % (list(vs), list(shape)))
    lead = len(shape) - len(vs)
    if lead < 0:
        return RuntimeError(_expand_ndim_msg(v, shape))
    for i in range(len(vs) - 1, -1, -1):
        n = shape[i + lead] if i + lead >= 0 else 1
        if vs[i] != n and vs[i] != 1:
            return RuntimeError("The expanded size of the tensor (%d) must match the existing size (%d) at "
                                "non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s"
                                % (n, vs[i], i + lead, list(shape), list(vs)))
    return RuntimeError(str(e))


def _cat_error(datas, ax, e):
    """PyTorch's message for tensors that cannot be concatenated along ``ax``."""
    first = datas[0]
    for i, d in enumerate(datas):
        if d.ndim == 0:
            return RuntimeError("zero-dimensional tensor (at position %d) cannot be concatenated" % i)
    for i, d in enumerate(datas):
        if d.ndim != first.ndim:
            return RuntimeError("Tensors must have same number of dimensions: got %d and %d" % (first.ndim, d.ndim))
        for j in range(d.ndim):
            if j != ax and d.shape[j] != first.shape[j]:
                return RuntimeError("Sizes of tensors must match except in dimension %d. Expected size %d but got "
                                    "size %d for tensor number %d in the list." % (ax, first.shape[j], d.shape[j], i))
    return RuntimeError(str(e))


def cat(tensors, dim=0, **kw):
    if kw:
        dim = _dim_alias("cat", kw, dim, 0)
    return _cat(tensors, dim, False)


def _dim_alias(fname, kw, dim, default):
    from .reduce import numpy_names
    return numpy_names(fname, kw, dim, None, default)[0]


def _cat(tensors, dim, stacking):
    tensors = list(tensors)
    if not tensors:
        if stacking:
            raise RuntimeError("stack expects a non-empty TensorList")
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError("expected Tensor as element %d in argument 0, but got %s"
                            % (tensors.index(t), type(t).__name__))
    datas = [t._data for t in tensors]
    dt = datas[0].dtype
    if any(d.dtype != dt for d in datas):      # PyTorch's common dtype (int64 with float32: float32)
        for d in datas:
            dt = promote_types(dt, d.dtype)
        datas = [d.astype(dt, copy=False) for d in datas]
    if stacking:
        shape0 = datas[0].shape
        for i, d in enumerate(datas):
            if d.shape != shape0:
                raise RuntimeError("stack expects each tensor to be equal size, but got %s at entry 0 and %s "
                                   "at entry %d" % (list(shape0), list(d.shape), i))
        ax = _wrap_dim(dim, len(shape0) + 1)
        out = np.stack(datas, axis=ax)
        parts = [d.reshape(d.shape[:ax] + (1,) + d.shape[ax:]) for d in datas]
        name = "StackBackward0"
    else:
        nd = datas[0].ndim
        if nd == 0:
            raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
        ax = _wrap_dim(dim, nd)
        try:
            out = np.concatenate(datas, axis=ax)
        except ValueError as e:
            raise _cat_error(datas, ax, e) from None
        parts = datas
        name = "CatBackward0"
    if not any(t._rg for t in tensors) or not _tp.state().grad:
        return Tensor._wrap(out)
    T = _tp.current()
    slots = []
    for t in tensors:
        slots.append((t._slot if (t._tid == T.id and t._sver == t._ver[0]) else T.adopt(t))
                     if (t._rg or _tp.recording[0]) else -1)
    outer = int(np.prod(out.shape[:ax], dtype=np.int64))
    total = int(np.prod(out.shape[ax:], dtype=np.int64))
    words = [len(tensors), *slots, outer, total]
    off = 0
    for p in parts:
        inner = int(np.prod(p.shape[ax:], dtype=np.int64))
        words += [inner, off]
        off += inner
    at = T.aux_append(words)
    ver = [0]
    o = T.new_slot(CODES[CAT], -1, -1, VARIADIC, at, -1, name_id(name), 0.0, 0.0, out, False, ver)
    return Tensor._recorded(out, T, o, ver)


def stack(tensors, dim=0, **kw):
    if kw:
        dim = _dim_alias("stack", kw, dim, 0)
    return _cat(tensors, dim, True)


def scatter_add(x, idx, n):
    """A flat tensor of ``n`` elements with ``out[idx[i]] += x[i]`` (``x`` flat):
    the transpose of gathering by ``idx``, needed by the differentiable reverse."""
    d = x._data
    out = np.bincount(idx, weights=d, minlength=n) if d.size else np.zeros(n)
    out = out.astype(d.dtype, copy=False)
    if not x._rg or not _tp.state().grad:
        return Tensor._wrap(out)
    return _record(SCATTER_ADD, x, out, "IndexAddBackward0", idx)


def _words(aux, at):
    return aux[at:at + 2 + 2 * int(aux[at])].copy()


_GEOMETRY = {}   # descriptor words -> (shape, strides in elements, offset, whether elements repeat)


def _geometry(words):
    key = words.tobytes()
    geo = _GEOMETRY.get(key)
    if geo is None:
        nd = int(words[0])
        shape, strides = words[2:2 + nd], words[2 + nd:]
        geo = (tuple(shape.tolist()), tuple(strides.tolist()), int(words[1]), _overlaps(shape, strides))
        if len(_GEOMETRY) > 4096:
            _GEOMETRY.clear()
        _GEOMETRY[key] = geo
    return geo


def _as_view(flat, words):
    """The strided view that descriptor ``words`` describes, over the C-contiguous
    1-d array ``flat``."""
    shape, strides, off, _ = _geometry(words)
    isz = flat.itemsize
    return np.ndarray(shape, flat.dtype, flat, off * isz, tuple(st * isz for st in strides))


def strided_view(x, words):
    """The flat elements of the strided view ``words`` of the flat tensor ``x``
    (differentiable: STRIDED)."""
    d = np.ascontiguousarray(x._data).reshape(-1)
    if d.size:
        out = _as_view(d, words).reshape(-1)
        if out.base is not None and _geometry(words)[3]:
            out.flags.writeable = False     # one element seen several times: no writing through it
    else:
        out = np.zeros(int(np.prod(words[2:2 + int(words[0])])), d.dtype)
    if not x._rg or not _tp.state().grad:
        return Tensor._wrap(out)
    return _mark_view(_record(STRIDED, x, out, "AsStridedBackward0", words), x)


def strided_scatter(x, words, n):
    """A flat tensor of ``n`` elements: zeros with the strided view ``words`` of it
    increased by the flat tensor ``x`` (the transpose of ``strided_view``)."""
    d = x._data
    out = np.zeros(n, d.dtype)
    if d.size:
        if not _geometry(words)[3]:     # each element of the view once: assign into the zeros
            v = _as_view(out, words)
            v[...] = d.reshape(v.shape)
        else:       # elements reached twice (expand): add up
            out += np.bincount(strided_map_np(words, 0), weights=d, minlength=n).astype(d.dtype, copy=False)
    if not x._rg or not _tp.state().grad:
        return Tensor._wrap(out)
    return _record(STRIDED_SCATTER, x, out, "AsStridedScatterBackward0", words)


def gather_flat(x, idx):
    """``x[idx]`` for a flat tensor and an integer array (differentiable)."""
    return gather_linear(x, idx, "IndexBackward0")


# -- differentiable reverse (create_graph=True) ----------------------------------------
# The same rules as ``shape_reverse``, written with tapegrad's own ops on flat
# adjoints, so that the gradient they produce is itself recorded.
def graph_reverse(ctx, s, k, row, g):
    a, b, at = row[1], row[2], row[4]
    aux = ctx.aux
    if k == RESHAPE:
        return [(a, g)]
    if k == STRIDED:
        return [(a, strided_scatter(g, _words(aux, at), ctx.size(a)))]
    if k == STRIDED_SCATTER:
        return [(a, strided_view(g, _words(aux, at)))]
    if k == GATHER:
        return [(a, scatter_add(g, aux[at:at + g.numel()], ctx.size(a)))]
    if k == SCATTER_ADD:
        return [(a, gather_flat(g, aux[at:at + ctx.size(a)]))]
    if k == SETITEM:
        r = int(aux[at])
        lin, vmap = aux[at + 1:at + 1 + r], aux[at + 1 + r:at + 1 + 2 * r]
        out = []
        if ctx.needs(a):
            keep = np.ones(g.numel(), g.dtype)
            keep[lin] = 0
            out.append((a, g * Tensor._wrap(keep)))
        if ctx.needs(b):
            out.append((b, scatter_add(gather_flat(g, lin), vmap, ctx.size(b))))
        return out
    if k == CAT:
        m = int(aux[at])
        outer, total = int(aux[at + 1 + m]), int(aux[at + 2 + m])
        out = []
        for j in range(m):
            sj = int(aux[at + 1 + j])
            if not ctx.needs(sj):
                continue
            inner, off = int(aux[at + 3 + m + 2 * j]), int(aux[at + 4 + m + 2 * j])
            idx = (np.arange(outer, dtype=np.int64)[:, None] * total + off
                   + np.arange(inner, dtype=np.int64)).ravel()
            out.append((sj, gather_flat(g, idx)))
        return out
    raise AssertionError(k)


def _overlaps(shape, strides):
    """Whether a strided view can reach one element twice (a zero or too small a
    stride); conservative: sorted by stride, each must step past the extent of the
    dimensions inside it."""
    reach = 0
    for st, n in sorted(zip(np.abs(strides).tolist(), shape.tolist())):
        if n <= 1:
            continue
        if st <= reach:
            return True
        reach += st * (n - 1)
    return False


# -- replay (tapegrad.replay): the forward again, from the entry alone ----------------
def _replay_flat(k, row, vals, aux, shape):
    """The value of shape entry ``row`` (other than a reshape or a gather, see
    ``replay_prepare``) recomputed from its inputs' values, on the flat (C-order)
    elements as the reverse kernels see them."""
    at = row[4]
    if k == CAT:
        m = int(aux[at])
        outer = int(aux[at + 1 + m])
        parts = [vals[int(aux[at + 1 + j])] for j in range(m)]
        if any(p.size for p in parts):
            out = np.concatenate([p.reshape(outer, -1) if outer else p.reshape(0, p.size) for p in parts], axis=1)
        else:
            out = np.concatenate([p.reshape(-1) for p in parts])
        return out.reshape(shape)
    x = vals[row[1]]
    flat = np.ascontiguousarray(x).reshape(-1)
    n = int(np.prod(shape, dtype=np.int64))
    if k == STRIDED:
        words = _words(aux, at)
        if not flat.size:
            return np.zeros(shape, flat.dtype)
        out = _as_view(flat, words)
        if _geometry(words)[3]:
            out = out.view()
            out.flags.writeable = False
        return out.reshape(shape)
    if k == SETITEM:
        r = int(aux[at])
        out = flat.copy()
        v = np.ascontiguousarray(vals[row[2]]).reshape(-1)
        out[aux[at + 1:at + 1 + r]] = v[aux[at + 1 + r:at + 1 + 2 * r]]
        return out.reshape(shape)
    if k == SCATTER_ADD:
        out = np.bincount(aux[at:at + flat.size], weights=flat, minlength=n) if flat.size else np.zeros(n)
        return out.astype(flat.dtype, copy=False).reshape(shape)
    if k == STRIDED_SCATTER:
        words = _words(aux, at)
        out = np.zeros(n, flat.dtype)
        if flat.size:
            if not _geometry(words)[3]:
                v = _as_view(out, words)
                v[...] = flat.reshape(v.shape)
            else:
                out += np.bincount(strided_map_np(words, 0), weights=flat, minlength=n).astype(flat.dtype, copy=False)
        return out.reshape(shape)
    raise NotImplementedError("replay of shape kernel %d" % k)


def replay_prepare(k, row, aux, shape):
    """An entry's forward again (tapegrad.replay), as a function of the slot values,
    with its index arrays bound once."""
    a = row[1]
    if k == RESHAPE:
        return lambda v: v[a].reshape(shape)
    if k == GATHER:
        n = int(np.prod(shape, dtype=np.int64))
        idx = aux[row[4]:row[4] + n].copy()
        return lambda v: np.take(v[a], idx).reshape(shape)
    return lambda v: _replay_flat(k, row, v, aux, shape)
