"""Shape, view, indexing and joining operations.

Five kernels cover them all, because in C order every one of these ops either
keeps the element order (reshape family: the adjoint passes through), reads the
input through a strided descriptor (transpose, permute, expand, slicing, integer
indexing: the adjoint is scattered back through the same map), reads it through
explicit flat indices (advanced indexing, max along a dim), overwrites a region
(``__setitem__``: CopySlices), or concatenates (cat, stack); two more, the
transposes of the strided and the flat-index reads (STRIDED_SCATTER, SCATTER_ADD),
are what the differentiable reverse of those records.
"""
import warnings

import numpy as np

from ..core import tape as _tp
from .._jit import jit
from ..core.descriptors import (aux_words, c_strides, check_descriptor, check_descriptors, descriptor, refuse,
                                slot_view, strided_gather_add, strided_map, strided_map_np, strided_scatter_add, u64)
from ..core.dtypes import tensor_type_name, torch_name
from ..core.tensor import Tensor, _wrap_dim
from ..core.promotion import DEFAULT, promote_types
from ._args import numpy_names
from ._dual import gather_columns, scatter_columns
from ._record import (CAT, GATHER, RESHAPE, SCATTER_ADD, SETITEM, STRIDED, STRIDED_SCATTER, check_words,
                      record_shape as _record)
from ..core.registry import (GRAD_FN_NAMES, OP_NAMES, SHAPE, EntryError, FamilyRules, OpDefinitionError, define,
                             each_entry, name_id, register_family)

CODES = {
    RESHAPE: define(SHAPE, RESHAPE, "reshape"),
    STRIDED: define(SHAPE, STRIDED, "strided"),
    GATHER: define(SHAPE, GATHER, "gather"),
    SETITEM: define(SHAPE, SETITEM, "setitem"),
    CAT: define(SHAPE, CAT, "cat"),
    SCATTER_ADD: define(SHAPE, SCATTER_ADD, "scatter_add"),
    STRIDED_SCATTER: define(SHAPE, STRIDED_SCATTER, "strided_scatter"),
}
VARIADIC = _tp.VARIADIC   # an entry whose input slots are listed in aux, see ``_record``


@jit
def shape_reverse(k, g, dx, dv, aux, at, aloc, aptr, aarena, sizes):
    """Add the adjoints of the entry's input (``dx``) and setitem's value (``dv``) for its
    adjoint ``g``; False for a kernel index without a branch (``dx`` is then NaN)."""
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
    else:       # (a kernel without its branch: NaN, and the sweep names the op)
        for i in range(dx.size):
            dx[i] = np.nan
        return False
    return True


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
def _untracked_view(t, x):
    """A view that was not recorded: shares x's version; one made under no_grad
    from a tensor that requires grad is a leaf that requires grad (PyTorch)."""
    t._ver = x._ver
    t._slot_version = x._ver[0]
    ex = t._extras()
    ex.base = x._extra.base if (x._extra is not None and x._extra.base is not None) else x
    if x._requires_grad:
        t._requires_grad = True
        ex.name = "no_grad_view"


def _mark_view(t, x):
    """Remember the tensor whose storage ``t`` views (for in-place checks)."""
    if out_is_view(t._data, x._data):
        if not t._requires_grad:
            _untracked_view(t, x)
            return t
        xe = x._extra
        root = xe.base if (xe is not None and xe.base is not None) else x
        te = t._extras()
        te.base = root
        if xe is not None and type(xe.name) is tuple:
            # a view of a piece of split, chunk or unbind: PyTorch refuses writing it too
            te.name = (0, GRAD_FN_NAMES[t._tape.field(t._slot, _tp.NAME)].rsplit("Backward", 1)[0])
        t._ver = x._ver
        t._slot_version = x._ver[0]
        t._tape.versions[t._slot] = x._ver
        t._tape.set_field(t._slot, _tp.VERSION, x._ver[0])
    return t


def out_is_view(a, b):
    base = a.base
    if base is None:
        return False
    if base is b or base is b.base:
        return True
    # (NumPy's as_strided, which unfold uses, keeps its input one object further down)
    return type(base) is not np.ndarray and (getattr(base, "base", None) is b
                                             or (b.base is not None and getattr(base, "base", None) is b.base))


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


def unflatten(input, dim, sizes):
    """Dimension ``dim`` of ``input`` as the dimensions ``sizes`` (one may be -1)."""
    x = input
    d = _wrap_dim(dim, x.ndim)
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = x.shape[d] if x.ndim else 1
    if -1 not in sizes and int(np.prod(sizes, dtype=np.int64)) != n:
        raise RuntimeError("unflatten: Provided sizes %s don't multiply up to the size of dim %d (%d) in the input "
                           "tensor" % (list(sizes), d, n))
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        _check_inferred(sizes)
    if -1 in sizes:
        rest = int(np.prod([s for s in sizes if s != -1], dtype=np.int64))
        if rest == 0 or n % rest:
            if rest == 0:
                raise RuntimeError("cannot reshape tensor of 0 elements into shape %s because the unspecified "
                                   "dimension size -1 can be any value and is ambiguous" % list(sizes))
            raise RuntimeError("shape '%s' is invalid for input of size %d" % (list(sizes), n))
        sizes = tuple(n // rest if s == -1 else s for s in sizes)
    sh = x.shape
    return reshape(x, sh[:d] + sizes + sh[d + 1:])


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
    found by applying it to a zero-size-buffer int8 array (only the geometry is used).
    The compiled reverse adds through it unchecked, so it is checked here: the result
    must be a view of the probe (a NumPy scalar or a copy is not: its address says
    nothing), lying inside it."""
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape=shape, strides=c_strides(shape),
                                            writeable=False)
    v = index_fn(dummy)
    if type(v) is not np.ndarray or not _views(v, dummy):
        raise EntryError("a view of a tensor of shape %s was computed as a %s, not a view"
                         % (list(shape), "NumPy scalar" if isinstance(v, np.generic) else "copy"))
    off = v.__array_interface__["data"][0] - dummy.__array_interface__["data"][0]
    words = descriptor(v.shape, v.strides, off)
    check_descriptor(words, 0, int(np.prod(shape, dtype=np.int64)), v.size)
    return words, v.shape


def _views(v, probe):
    """Whether array ``v`` is ``probe`` or a view made from it (its chain of bases reaches it)."""
    root = probe.base
    while v is not None:
        if v is probe or v is root:
            return True
        v = v.base
    return False


_VIEWS = {}     # (input shape, what the view is) -> its descriptor words


def strided(x, index_fn, name, key=None):
    """A view of ``x`` that NumPy expresses as strides (``index_fn`` makes it;
    ``key``, when given, names the view so its descriptor is computed once)."""
    out = index_fn(x._data)
    if not x._requires_grad or not _tp.state().grad:
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
            % (tensor_type_name(x.dtype, "Tensor"), list(x.shape), list(sizes), len(sizes), x.ndim))


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
    if not x._requires_grad or not _tp.state().grad:
        return Tensor._wrap(np.asarray(out))    # a 0-d index gives a NumPy scalar
    return _record(GATHER, x, out, name, lin.ravel())


# -- indexing ----------------------------------------------------------------------
# PyTorch reads ``x[idx]`` in two steps: the integers, slices, ``None`` and ``...``
# are applied first, one after another (select, slice, unsqueeze), and the tensor
# indices (masks expanded to their nonzero positions, a Python or 0-d bool to an
# unsqueeze indexed by a length-1 or empty index) then index the result.  An integer
# is thus never an advanced index: where the broadcast index dimensions go (in place
# when the index tensors are adjacent, else in front) is decided among the tensors
# alone.  ``_normalize_index`` turns an index into those two steps as NumPy indices:
# a basic one (a view) and one of integer arrays and ``slice(None)``, for which
# NumPy's placement rule is PyTorch's.
_FULL = slice(None)
_TRUE_INDEX = np.zeros(1, np.int64)     # x[True]: the new dimension of size 1, kept
_FALSE_INDEX = np.zeros(0, np.int64)    # x[False]: ... and indexed by nothing
_TRUE_INDEX.flags.writeable = _FALSE_INDEX.flags.writeable = False
_MAXSIZE = 2 ** 63 - 1


def _sequence_as_tuple(idx):
    """PyTorch (after NumPy): a list that holds a tensor, a sequence, a slice,
    ``None`` or ``...`` is read as a tuple of indices, other lists as one index tensor."""
    if len(idx) >= 32:
        return False
    for k in idx:
        if k is None or k is Ellipsis or isinstance(k, (Tensor, list, tuple, slice, np.ndarray, str)):
            warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed "
                          "in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be "
                          "interpreted as tensor index, x[torch.tensor(seq)], which will result either in an error or "
                          "a different result", UserWarning, stacklevel=5)
            return True
    return False


def _is_mask(dt):
    if dt.kind == "b":
        return True
    if dt.kind == "u" and dt.itemsize == 1:     # (uint8: a mask, as in PyTorch)
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.",
                      UserWarning, stacklevel=5)
        return True
    return False


def _is_int_index(dt):
    return dt.kind == "i" and dt.itemsize >= 4      # int64, int32 (PyTorch refuses int8, int16)


def _sequence_index(k):
    """An index tensor made from a list, tuple or array as PyTorch makes it: bool (and
    uint8) stay, any other type becomes int64 (floats truncated)."""
    if isinstance(k, str):
        raise TypeError("new(): invalid data type 'str'")
    if isinstance(k, np.ndarray):
        a = k
    else:
        if k and isinstance(k[0], (Tensor, list, tuple)):
            _check_sequence_items(k)
        a = np.asarray(k)
    dt = a.dtype
    if _is_mask(dt):
        return a
    if dt.kind not in "iuf":
        if dt.kind in "US":
            raise TypeError("new(): invalid data type 'str'")
        _check_sequence_items(k)
        raise TypeError("Could not infer dtype of %s" % type(a.reshape(-1)[0] if a.size else k).__name__)
    return a if dt == np.int64 else a.astype(np.int64)


def _check_sequence_items(seq):
    for k in seq:
        if isinstance(k, Tensor):
            if k._data.size != 1 or k.dtype.kind not in "iub":
                raise TypeError("only integer tensors of a single element can be converted to an index")
        elif isinstance(k, (list, tuple)):
            _check_sequence_items(k)
        elif isinstance(k, str):
            raise TypeError("new(): invalid data type 'str'")


def _type_name(k):
    t = type(k)
    return t.__name__ if t.__module__ == "builtins" else "%s.%s" % (t.__module__, t.__name__)


def _dims_named(idx):
    """PyTorch's count of the dimensions an index names."""
    used = 0
    for k in idx:
        if isinstance(k, Tensor):
            used += k.ndim if _is_mask(k.dtype) else 1     # (not ._data: no guard while recording)
        elif not (k is None or k is Ellipsis or k is True or k is False):
            used += 1
    return used


def _normalize_index(x, idx):
    """``x[idx]`` as PyTorch reads it: ``(pre, adv, name)`` where ``pre`` is a basic
    NumPy index (ints, slices, None) applied first and ``adv`` a tuple of integer
    arrays and ``slice(None)`` applied to its result (None when there are no index
    tensors; ``pre`` is None when it does nothing and ``adv`` is not None); ``name``
    is the grad_fn of a basic index.  Raises PyTorch's errors for the integers, the
    index types and the masks; index tensors are checked when they are used."""
    shape = x.shape
    nd = len(shape)
    single = type(idx) is not tuple
    if single:
        if isinstance(idx, Tensor) and nd and not _tp.recording[0]:
            a = idx._data       # x[labels], x[mask]: the common single tensor index
            if a.ndim:
                if _is_int_index(a.dtype):
                    return None, (a,), None
                if a.dtype.kind == "b" and a.shape == shape[:a.ndim]:
                    return None, np.nonzero(a), None
        if isinstance(idx, tuple):
            idx, single = tuple(idx), False
        elif type(idx) is list and _sequence_as_tuple(idx):
            idx, single = tuple(idx), False
        else:
            idx = (idx,)
    elif nd and len(idx) == nd and not _tp.recording[0]:
        # one integer tensor per dimension (logp[rows, labels]): nothing to slice
        arrays = []
        for k in idx:
            if not isinstance(k, Tensor):
                break
            a = k._data
            if not a.ndim or not _is_int_index(a.dtype):
                break
            arrays.append(a)
        else:
            return None, tuple(arrays), None
    pre = []
    adv = None          # [(dim of the sliced tensor, its integer index array)]
    masks = None
    bad_dtype = False
    name = "AliasBackward0"
    used = -1           # PyTorch's count of the dimensions named, when needed
    src = 0             # dim of x the next item applies to
    dim = 0             # dim of the sliced tensor it gives
    try:
        for i, k in enumerate(idx):
            tk = type(k)
            if tk is not int and tk is not slice and k is not None and k is not Ellipsis and tk is not bool:
                if isinstance(k, Tensor):
                    rec = _tp.state().rec if _tp.recording[0] else None
                    # (while recording: a guard on its values, or a live argument)
                    k = k._data if rec is None else rec.index(k)
                elif isinstance(k, (list, tuple, np.ndarray, str)):
                    k = _sequence_index(k)
                if type(k) is np.ndarray:
                    dt = k.dtype
                    if not k.ndim:
                        if _is_mask(dt):
                            k = bool(k)         # a 0-d bool tensor: as a Python bool
                        elif _is_int_index(dt):
                            k = int(k)          # a 0-d integer tensor: as an integer
                    elif _is_mask(dt):
                        if src + k.ndim > nd and used < 0:
                            used = _dims_named(idx)
                            if used > nd:
                                _too_many(idx, nd, single)
                        if masks is None:
                            masks = []
                        masks.append((dim, k))
                        pre.extend([_FULL] * k.ndim)
                        src += k.ndim
                        dim += k.ndim
                        continue
                    if type(k) is np.ndarray:
                        if src >= nd and used < 0:
                            used = _dims_named(idx)
                            if used > nd:
                                _too_many(idx, nd, single)
                        if not _is_int_index(dt):
                            bad_dtype = True    # (raised after the integers are applied, as PyTorch does)
                        if adv is None:
                            adv = []
                        adv.append((dim, k))
                        pre.append(_FULL)
                        src += 1
                        dim += 1
                        continue
                tk = type(k)
            if (tk is not int and tk is not slice and tk is not bool and k is not None and k is not Ellipsis
                    and not isinstance(k, np.bool_) and hasattr(k, "__index__")):
                k, tk = k.__index__(), int          # (NumPy integers and other integer types: an int)
            if tk is int:
                if src >= nd and used < 0:
                    used = _dims_named(idx)
                    if used > nd:
                        _too_many(idx, nd, single)
                size = shape[src] if src < nd else 0
                if not -size <= k < size:
                    raise IndexError("index %d is out of bounds for dimension %d with size %d" % (k, i, size))
                name = "SelectBackward0"
                pre.append(k)
                src += 1
            elif tk is slice:
                if src >= nd and used < 0:
                    used = _dims_named(idx)
                    if used > nd:
                        _too_many(idx, nd, single)
                if k.step is not None:
                    if k.step == 0:
                        raise ValueError("slice step cannot be zero")
                    if k.step < 0:
                        raise ValueError("step must be greater than zero")
                if single or not ((k.start is None or k.start == 0) and (k.stop is None or k.stop >= _MAXSIZE)
                                  and (k.step is None or k.step == 1)):
                    name = "SliceBackward0"
                pre.append(k)
                src += 1
                dim += 1
            elif k is None:
                name = "UnsqueezeBackward0"
                pre.append(None)
                dim += 1
            elif k is Ellipsis:
                if used < 0:
                    used = _dims_named(idx)
                    if used > nd:
                        _too_many(idx, nd, single)
                n = nd - used
                pre.extend([_FULL] * min(n, nd - src))
                src += n
                dim += n
            elif tk is bool:
                if adv is None:
                    adv = []
                adv.append((dim, _TRUE_INDEX if k else _FALSE_INDEX))
                pre.append(None)
                dim += 1
            else:
                raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                                 "Variables are valid indices (got %s)" % _type_name(k))
    except (IndexError, ValueError, TypeError):
        if used < 0 and _dims_named(idx) > nd:      # (PyTorch counts the dimensions first)
            _too_many(idx, nd, single)
        raise
    if bad_dtype:
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if adv is None and masks is None:
        pre.append(Ellipsis)            # (a 0-d view, never a NumPy scalar)
        return tuple(pre), None, name
    for k in pre:
        if k is not _FULL:
            pre.append(Ellipsis)
            pre = tuple(pre)
            sliced = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape, (0,) * nd)[pre].shape
            break
    else:
        pre, sliced = None, shape
    if masks is not None:
        if adv is None:
            adv = []
        for at, m in masks:
            for j in range(m.ndim):
                if at + j >= len(sliced):
                    raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)"
                                     % (-len(sliced), len(sliced) - 1, at + j))
                if m.shape[j] != sliced[at + j]:
                    raise IndexError("The shape of the mask %s at index %d does not match the shape of the indexed "
                                     "tensor %s at index %d" % (list(m.shape), j, list(sliced), at + j))
            adv.extend(zip(range(at, at + m.ndim), np.nonzero(m)))
    if len(adv) == 1 and adv[0][0] == 0:
        return pre, (adv[0][1],), None
    out = [_FULL] * (max(j for j, _ in adv) + 1)
    for j, a in adv:
        out[j] = a
    return pre, tuple(out), None


def _too_many(idx, nd, single):
    """PyTorch's errors for an index that names more dimensions than ``x`` has."""
    if single and nd == 0:
        k = idx[0]
        if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            if k == 0:
                raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                                 "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
            raise IndexError("index %d is out of bounds for dimension 0 with size 0" % k)
        if isinstance(k, slice):
            raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    raise IndexError("too many indices for tensor of dimension %d" % nd)


def _index_result(shape, adv):
    """For index arrays NumPy refused, PyTorch's checks in its order: ``(error, bounds
    error, result shape)``, an error about the arrays themselves (they do not broadcast,
    or index a dimension of size 0) or else the first index out of range, which PyTorch
    reports only when the result has elements (it checks no value otherwise)."""
    arrays = [(j, a) for j, a in enumerate(adv) if a is not _FULL]
    try:
        bshape = np.broadcast_shapes(*[a.shape for _, a in arrays])
    except ValueError:
        return IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes %s"
                          % ", ".join(str(list(a.shape)) for _, a in arrays)), None, None
    sizes = [shape[j] for j, _ in arrays]
    if 0 in sizes and 0 not in bshape:
        return IndexError("index is out of bounds for dimension with size 0"), None, None
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape, (0,) * len(shape))
    zeros = np.zeros(bshape, np.int64)
    out_shape = dummy[tuple(_FULL if a is _FULL else zeros for a in adv)].shape
    bounds = None
    if 0 not in out_shape:
        flags = [np.broadcast_to((a < -n) | (a >= n), bshape).reshape(-1) for (_, a), n in zip(arrays, sizes)]
        first = int(np.flatnonzero(np.logical_or.reduce(flags))[0])
        k = next(j for j in range(len(flags)) if flags[j][first])
        bounds = IndexError("index %d is out of bounds for dimension %d with size %d"
                            % (np.broadcast_to(arrays[k][1], bshape).reshape(-1)[first], k, sizes[k]))
    return None, bounds, out_shape


def _empty_index(adv):
    """An index giving the same (empty) result as ``adv`` without reading any value."""
    bshape = np.broadcast_shapes(*[a.shape for a in adv if a is not _FULL])
    zeros = np.zeros(bshape, np.int64)
    return tuple(_FULL if a is _FULL else zeros for a in adv)


def getitem(x, idx):
    if (type(idx) is slice and x._data.ndim and type(idx.start) in _BOUNDS and type(idx.stop) in _BOUNDS
            and (idx.step is None or (type(idx.step) is int and idx.step > 0))):
        # x[a:b], the most common index, as _normalize_index reads it, without its walk
        return strided(x, lambda a: a[idx], "SliceBackward0", ("slice", idx.start, idx.stop, idx.step))
    pre, adv, name = _normalize_index(x, idx)
    if adv is None:
        return strided(x, lambda a: a[pre], name, ("index",) + _index_key(pre))
    if pre is not None:     # the integers, slices and new dims first (PyTorch: select, slice, unsqueeze)
        x = strided(x, lambda a: a[pre], name, ("index",) + _index_key(pre))
    out = _gather(x, adv)
    if _tp.recording[0]:
        rec = _tp.state().rec
        if rec is not None:
            rec.gathered(out, x.shape, adv)
    return out


_BOUNDS = (int, type(None))


def _gather(x, adv):
    """``x[adv]`` for a tuple of integer arrays and full slices (differentiable: GATHER)."""
    d = x._data
    try:
        out = d[adv]
    except IndexError:
        err, bounds, _ = _index_result(d.shape, adv)
        if err or bounds:
            raise (err or bounds) from None
        adv = _empty_index(adv)
        out = d[adv]
    if not x._requires_grad or not _tp.state().grad:
        return Tensor._wrap(out)
    if len(adv) == d.ndim and all(type(k) is np.ndarray for k in adv):
        # one integer array per dimension (e.g. logp[rows, labels]): flat indices
        # directly, no index grid
        lin = np.ravel_multi_index(adv, d.shape, mode="wrap") if d.size else np.zeros(out.shape, np.int64)
    else:
        lin = np.arange(d.size, dtype=np.int64).reshape(d.shape)[adv]
    return _record(GATHER, x, out, "IndexBackward0", lin.ravel())


def setitem(y, idx, value, view_op=True):
    """``y[idx] = value``, in place (grad_fn CopySlices for y, IndexPutBackward0 when
    only tensors index it)."""
    from .inplace import check_inplace, commit_inplace
    v = value if isinstance(value, Tensor) else Tensor._const(np.asarray(value, dtype=y.dtype))
    if idx is False:
        return      # (PyTorch: nothing happens, whatever the value)
    check_inplace(y, view_op)
    pre, adv, _ = _normalize_index(y, idx)
    d = y._data
    sliced = d if pre is None else d[pre]
    vdata = v._data
    vshape = vdata.shape
    while vshape and vshape[0] == 1:    # leading ones of the value are dropped (PyTorch)
        vshape = vshape[1:]
    target = sliced
    if adv is not None:
        try:
            target = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), sliced.shape, (0,) * sliced.ndim)[adv]
        except IndexError:
            err, bounds, out_shape = _index_result(sliced.shape, adv)
            if err:
                raise err from None
            _check_value_shape(v, vshape, out_shape, True)
            if bounds:
                raise bounds from None
            adv = _empty_index(adv)
            target = sliced[adv]
    _check_value_shape(v, vshape, target.shape, adv is not None)
    vdata = vdata.reshape(vshape)
    tracking = (y._requires_grad or v._requires_grad) and _tp.state().grad
    if tracking:
        region = np.arange(d.size, dtype=np.int64).reshape(d.shape)
        if pre is not None:
            region = region[pre]
        if adv is not None:
            region = region[adv]
        vmap = np.broadcast_to(np.arange(vdata.size, dtype=np.int64).reshape(vshape), region.shape)
    if adv is None:
        sliced[...] = vdata
    else:
        sliced[adv] = vdata
    if not tracking:
        commit_inplace(y, None)
        return
    words = np.concatenate(([region.size], region.ravel(), vmap.ravel()))
    name = "IndexPutBackward0" if adv is not None and pre is None else "CopySlices"
    r = _record(SETITEM, y, d.copy(), name, words, b=v)
    commit_inplace(y, r)


def _check_value_shape(v, vs, shape, advanced):
    """PyTorch's errors for a value (its leading ones dropped: ``vs``) that does not
    broadcast to the indexed region's ``shape``."""
    if advanced:
        try:
            np.broadcast_shapes(vs, shape)
            ok = len(vs) <= len(shape) and np.broadcast_shapes(vs, shape) == tuple(shape)
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError("shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of "
                               "shape %s" % (list(vs), list(shape)))
        return
    lead = len(shape) - len(vs)
    if lead < 0:
        raise RuntimeError("expand(torch.%s{%s}, size=%s): the number of sizes provided (%d) must be greater or "
                           "equal to the number of dimensions in the tensor (%d)"
                           % (tensor_type_name(v.dtype, "Tensor"), list(vs), list(shape), len(shape), len(vs)))
    for i in range(len(vs) - 1, -1, -1):
        n = shape[i + lead]
        if vs[i] != n and vs[i] != 1:
            raise RuntimeError("The expanded size of the tensor (%d) must match the existing size (%d) at "
                               "non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s"
                               % (n, vs[i], i + lead, list(shape), list(vs)))


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
    return numpy_names(fname, kw, dim, None, default)[0]


def _cat(tensors, dim, stacking, name=None):
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
        name = name or "CatBackward0"
    if not any(t._requires_grad for t in tensors) or not _tp.state().grad:
        return Tensor._wrap(out)
    T = _tp.current()
    slots = []
    for t in tensors:
        slots.append((t._slot if (t._tape_id == T.id and t._slot_version == t._ver[0]) else T.adopt(t))
                     if (t._requires_grad or _tp.recording[0]) else -1)
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
    if not x._requires_grad or not _tp.state().grad:
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
    if not x._requires_grad or not _tp.state().grad:
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
    if not x._requires_grad or not _tp.state().grad:
        return Tensor._wrap(out)
    return _record(STRIDED_SCATTER, x, out, "AsStridedScatterBackward0", words)


def gather_flat(x, idx):
    """``x[idx]`` for a flat tensor and an integer array (differentiable)."""
    return gather_linear(x, idx, "IndexBackward0")


COMPLEX_CAST = [None]   # a real tensor to a complex dtype: filled by tapegrad/complex_tensor.py


def to_dtype(x, dtype):
    """``x`` in ``dtype`` (``Tensor.to``): a float result is a recorded copy
    (``ToCopyBackward0``), an integer or bool one does not require grad."""
    dt = np.dtype(dtype)
    if dt == x.dtype:
        return x
    if dt.kind == "c":
        if COMPLEX_CAST[0] is None:
            raise TypeError("tapegrad does not support complex tensors")
        return COMPLEX_CAST[0](x, dt)
    out = x._data.astype(dt)
    if dt.kind != "f":
        return Tensor._wrap(out)
    return _record(RESHAPE, x, out, "ToCopyBackward0")


_EXPAND = {}


def expand_adjoint(g, n):
    """An adjoint of one element standing for that value at all ``n`` elements of
    its slot (the reverse of a full sum or mean leaves it so, which saves the
    elementwise rules after it from working on ``n`` copies), made explicit."""
    if g.numel() == n:
        return g
    words = _EXPAND.get(n)
    if words is None:
        if len(_EXPAND) > 1024:
            _EXPAND.clear()
        words = _EXPAND[n] = np.array((1, 0, n, 0), np.int64)
    return strided_view(g, words)


# -- split, chunk, unbind, tensor_split, narrow: views of x (one STRIDED entry each) --
def _split_dim(x, what, dim):
    if x.ndim == 0:
        raise RuntimeError("%s expects at least a 1-dimensional tensor" % what)
    return _wrap_dim(dim, x.ndim)


def _slices(x, ax, bounds, name, pieces=True):
    """The views ``x[..., start:stop, ...]`` along ``ax`` for each (start, stop)."""
    lead = (_FULL,) * ax
    out = tuple(strided(x, lambda a, k=lead + (slice(s, e),): a[k], name, ("slice", ax, s, e)) for s, e in bounds)
    return _pieces(out, name) if pieces else out


def _pieces(views, name):
    """PyTorch refuses in-place writes to the views of a function returning several
    (split, chunk, unbind) when they require grad: ``inplace.check_inplace`` reads the mark."""
    if views and views[0]._requires_grad:
        op = name[:-len("Backward0")]
        for i, v in enumerate(views):
            if v._extra is not None and (v._extra.name is None or type(v._extra.name) is tuple):
                v._extra.name = (i, op)
    return views


def _runs(sizes):
    bounds, at = [], 0
    for n in sizes:
        bounds.append((at, at + n))
        at += n
    return bounds


def split(tensor, split_size_or_sections, dim=0):
    """PyTorch's ``torch.split``: pieces of ``split_size`` (the last one smaller), or
    of the listed sizes; every piece a view of ``tensor``."""
    x = tensor
    if isinstance(split_size_or_sections, (list, tuple)):
        return _split_with_sizes(x, [int(n) for n in split_size_or_sections], dim)
    size = int(split_size_or_sections)
    ax = _split_dim(x, "split", dim)
    n = x.shape[ax]
    if size < 0:
        raise RuntimeError("split expects split_size be non-negative, but got split_size=%d" % size)
    if size == 0:
        if n:
            raise RuntimeError("split_size can only be 0 if dimension size is 0, but got dimension size of %d" % n)
        return _slices(x, ax, [(0, 0)], "SplitBackward0")
    return _slices(x, ax, [(s, min(s + size, n)) for s in range(0, max(n, 1), size)], "SplitBackward0")


def _split_with_sizes(x, sizes, dim):
    ax = _split_dim(x, "split", dim)
    n = x.shape[ax]
    if any(s < 0 for s in sizes):
        raise RuntimeError("split_with_sizes expects split_sizes have only non-negative entries, but got "
                           "split_sizes=%s" % sizes)
    if sum(sizes) != n:
        raise RuntimeError("split_with_sizes expects split_sizes to sum exactly to %d (input tensor's size at "
                           "dimension %d), but got split_sizes=%s" % (n, ax, sizes))
    return _slices(x, ax, _runs(sizes), "SplitWithSizesBackward0")


def chunk(input, chunks, dim=0, **kw):
    x = input
    if kw:
        dim = _dim_alias("chunk", kw, dim, 0)
    ax = _split_dim(x, "chunk", dim)
    if not isinstance(chunks, (int, np.integer)) or isinstance(chunks, bool):
        raise TypeError("chunk(): argument 'chunks' (position 2) must be int, not %s" % type(chunks).__name__)
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: %d" % chunks)
    n = x.shape[ax]
    size = -(-n // chunks)
    if n == 0:      # (PyTorch: `chunks` empty pieces)
        return _slices(x, ax, [(0, 0)] * chunks, "SplitWithSizesBackward0")
    return _slices(x, ax, [(s, min(s + size, n)) for s in range(0, n, size)], "SplitBackward0")


def tensor_split(input, indices_or_sections=None, dim=0, sections=None, indices=None, **kw):
    """NumPy's ``array_split``: ``sections`` pieces as equal as can be (the first ones
    one longer), or the pieces between the listed indices (sliced as Python slices)."""
    x = input
    if kw:
        dim = _dim_alias("tensor_split", kw, dim, 0)
    given = [v for v in (indices_or_sections, sections, indices) if v is not None]
    if len(given) != 1:
        raise TypeError("tensor_split() received an invalid combination of arguments: give one of "
                        "indices_or_sections, sections or indices")
    indices_or_sections = given[0]
    if x.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    ax = _wrap_dim(dim, x.ndim)
    n = x.shape[ax]
    arg = indices_or_sections
    if isinstance(arg, Tensor):
        if arg.dtype != np.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype of long, but got %s"
                               % torch_name(arg.dtype))
        if arg.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               "one-dimensional tensor, but got a tensor with %d dims" % arg.ndim)
        arg = arg.tolist()
    if isinstance(arg, (list, tuple)):
        cuts = [int(i) for i in arg]
        starts = [0] + cuts
        stops = cuts + [n]
        bounds = [slice(s, e).indices(n)[:2] for s, e in zip(starts, stops)]
        return _slices(x, ax, [(s, max(s, e)) for s, e in bounds], "SliceBackward0", False)
    sections = int(arg)
    if sections <= 0:
        raise RuntimeError("number of sections must be larger than 0, got %d" % sections)
    q, r = divmod(n, sections)
    return _slices(x, ax, _runs([q + 1] * r + [q] * (sections - r)), "SliceBackward0", False)


def unbind(input, dim=0, **kw):
    x = input
    if kw:
        dim = _dim_alias("unbind", kw, dim, 0)
    if x.ndim == 0:
        raise IndexError("Dimension specified as %d but tensor has no dimensions" % dim)
    ax = _wrap_dim(dim, x.ndim)
    lead = (_FULL,) * ax
    return _pieces(tuple(strided(x, lambda a, k=lead + (i, Ellipsis): a[k], "UnbindBackward0", ("select", ax, i))
                         for i in range(x.shape[ax])), "UnbindBackward0")


def narrow(input, dim, start, length):
    x = input
    if x.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    ax = _wrap_dim(dim, x.ndim)
    start, length = int(start), int(length)     # (a 0-d integer tensor as start: its value)
    n = x.shape[ax]
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if not -n <= start <= n:
        raise IndexError("start out of range (expected to be in range of [%d, %d], but got %d)" % (-n, n, start))
    if start < 0:
        start += n
    if start + length > n:
        raise RuntimeError("start (%d) + length (%d) exceeds dimension size (%d)." % (start, length, n))
    return _slices(x, ax, [(start, start + length)], "SliceBackward0", False)[0]


def select(input, dim, index):
    """``input`` indexed by ``index`` along ``dim`` (a view, one dimension fewer)."""
    x = input
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    ax = _wrap_dim(dim, x.ndim)
    i, n = index.__index__(), x.shape[ax]
    if not -n <= i < n:
        raise IndexError("select(): index %d out of range for tensor of size %s at dimension %d"
                         % (i, list(x.shape), ax))
    i %= n
    key = (_FULL,) * ax + (i, Ellipsis)     # (``...``: a 0-d result stays a view, never a NumPy scalar)
    return strided(x, lambda a: a[key], "SelectBackward0", ("select", ax, i))


def unfold(self, dimension, size, step):
    """``Tensor.unfold``: the windows of ``size`` elements, ``step`` apart, along
    ``dimension``, as a new last dimension (a view; windows may overlap)."""
    x = self
    ax = _wrap_dim(dimension, max(x.ndim, 1))
    size, step = size.__index__(), step.__index__()
    n = x.shape[ax] if x.ndim else 1
    if size < 0:
        raise RuntimeError("size is %d but must be >= 0" % size)
    if size > n:
        raise RuntimeError("maximum size for tensor at dimension %d is %d but size is %d" % (ax, n, size))
    if step <= 0:
        raise RuntimeError("step is %d but must be > 0" % step)
    count = (n - size) // step + 1

    def windows(a):
        if a.ndim == 0:     # (the one window, of ``size`` 0 or 1 elements)
            return a.reshape(1)[:size]
        sh, st = a.shape, a.strides
        return np.lib.stride_tricks.as_strided(
            a, sh[:ax] + (count,) + sh[ax + 1:] + (size,), st[:ax] + (st[ax] * step,) + st[ax + 1:] + (st[ax],),
            writeable=step >= size and a.flags.writeable)     # (overlapping windows: no writing through them)
    return strided(x, windows, "UnfoldBackward0", ("unfold", ax, size, step))


# -- movedim, swapaxes: permute and transpose under PyTorch's names --
def _dim_list(d):
    """An int, a 0-d integer tensor or a sequence of them, as a list of ints."""
    if isinstance(d, (list, tuple)):
        return [int(k) for k in d]
    if isinstance(d, Tensor) and d.ndim:
        return [int(k) for k in d.tolist()]
    return [d.__index__()]


def movedim(input, source, destination):
    x = input
    nd = x.ndim
    src, dst = _dim_list(source), _dim_list(destination)
    if len(src) != len(dst):
        raise RuntimeError("movedim: Invalid source or destination dims: source (%s dims) should contain the same "
                           "number of dims as destination (%s dims)" % (src, dst))
    s = [_wrap_dim(d, nd) for d in src]
    t = [_wrap_dim(d, nd) for d in dst]
    if len(set(s)) != len(s):
        raise RuntimeError("movedim: repeated dim in `source` (%s)" % src)
    if len(set(t)) != len(t):
        raise RuntimeError("movedim: repeated dim in `destination` (%s)" % dst)
    if nd == 0:
        return strided(x, lambda a: a[...], "AliasBackward0", ("index", Ellipsis))
    perm = [-1] * nd
    for a, b in zip(s, t):
        perm[b] = a
    rest = iter(d for d in range(nd) if d not in s)
    perm = [p if p >= 0 else next(rest) for p in perm]
    return permute(x, *perm)


def swapaxes(input, axis0, axis1):
    return transpose(input, axis0, axis1)


def swapdims(input, dim0, dim1):
    return transpose(input, dim0, dim1)


# -- flip, fliplr, flipud, rot90: copies of a strided view (one STRIDED entry, own storage) --
def _cached_words(shape, key, index_fn):
    """The descriptor of the view ``index_fn`` of an array of ``shape`` (``key`` names it)."""
    words = _VIEWS.get((shape, key))
    if words is None:
        if len(_VIEWS) > 4096:
            _VIEWS.clear()
        words = _VIEWS[(shape, key)] = np.array(_view_words(shape, index_fn)[0], np.int64)
    return words


def strided_copy(x, index_fn, name, key):
    """A copy of the strided view ``index_fn`` of ``x``: recorded as that view (the
    adjoint scatters back through it), but not a view, as PyTorch's result is not."""
    out = index_fn(x._data).copy()
    if not x._requires_grad or not _tp.state().grad:
        return Tensor._wrap(out)
    return _record(STRIDED, x, out, name, _cached_words(x.shape, key, index_fn))


def _dims_arg(dims, fname, position):
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        raise TypeError("%s(): argument 'dims' (position %d) must be tuple of ints, not int" % (fname, position))
    return list(dims)


def _flipped(x, dims):
    nd = x.ndim
    axes = [_wrap_dim(d, nd) for d in dims]
    for i, a in enumerate(axes):
        if a in axes[:i]:
            raise RuntimeError("dim %d appears multiple times in the list of dims" % a)
    key = tuple(sorted(axes))
    # (a 0-d array indexed by () is a NumPy scalar, not a view: ``...`` keeps it an array)
    idx = tuple(slice(None, None, -1) if i in key else _FULL for i in range(nd)) or Ellipsis
    return strided_copy(x, lambda a: a[idx], "FlipBackward0", ("flip",) + key)


def flip(input, dims):
    return _flipped(input, _dims_arg(dims, "flip", 2))


def flip_method(self, *dims, **kw):
    """``Tensor.flip(dims)``, also as separate ints (``x.flip(0)``), as PyTorch accepts."""
    return _flipped(self, _varargs("flip", dims, kw, "dims"))


def _varargs(fname, args, kw, name):
    """The sizes or dims of a method taking them as one sequence or as separate ints
    (``x.flip(0, 1)``, ``x.flip((0, 1))``, ``x.flip(dims=(0, 1))``)."""
    if kw:
        if args or list(kw) != [name]:
            raise TypeError("%s() got an unexpected keyword argument '%s'"
                            % (fname, next(k for k in kw if k != name or args)))
        args = (kw[name],)
    return _sizes_arg(args)


def fliplr(input):
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return _flipped(input, [1])


def flipud(input):
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return _flipped(input, [0])


def rot90(input, k=1, dims=(0, 1)):
    x = input
    dims = _dims_arg(dims, "rot90", 3)
    if len(dims) != 2:
        raise RuntimeError("expected total rotation dims == 2, but got dims = %d" % len(dims))
    if x.ndim < 2:
        raise RuntimeError("expected total dims >= 2, but got total dims = %d" % x.ndim)
    a, b = _wrap_dim(dims[0], x.ndim), _wrap_dim(dims[1], x.ndim)
    if a == b:
        raise RuntimeError("expected rotation dims to be different, but got dim0 = %d and dim1 = %d"
                           % (dims[0], dims[1]))
    k = int(k) % 4      # (np.rot90 turns from the first axis towards the second, as PyTorch)
    return strided_copy(x, lambda v: np.rot90(v, k, (a, b)), "Rot90Backward0", ("rot90", k, a, b))


# -- roll, repeat, tile: gathers by flat indices (one GATHER entry) --
def _gathered(x, arrange, name):
    """``arrange(x)`` for a NumPy rearrangement of elements (np.roll, np.tile): recorded
    as the gather of the flat indices it gives the index grid of ``x``."""
    if not x._requires_grad or not _tp.state().grad:
        out = arrange(x._data)
        return Tensor._wrap(out if out.flags.c_contiguous else out.copy())
    return gather_linear(x, arrange(np.arange(x._data.size, dtype=np.int64).reshape(x.shape)), name)


def roll(input, shifts, dims=None):
    x = input
    sh = _dim_list(shifts)
    if dims is None:
        if len(sh) != 1:
            raise RuntimeError("shifts and dimensions must align. shifts: %d, dims:0" % len(sh))
        return _gathered(x, lambda a: np.roll(a.reshape(-1), sh[0]).reshape(a.shape), "RollBackward0")
    ds = _dim_list(dims)
    if not sh:
        raise RuntimeError("`shifts` required")
    if len(sh) != len(ds):
        raise RuntimeError("shifts and dimensions must align. shifts: %d, dims:%d" % (len(sh), len(ds)))
    if x.ndim == 0:
        raise IndexError("Dimension specified as %d but tensor has no dimensions" % ds[0])
    axes = tuple(_wrap_dim(d, x.ndim) for d in ds)
    return _gathered(x, lambda a: np.roll(a, sh, axes), "RollBackward0")


def _sizes_arg(sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        sizes = sizes[0]
    return [int(s) for s in sizes]


def _repeated(x, reps):
    shape = (1,) * (len(reps) - x.ndim) + x.shape
    out = [s * r for s, r in zip(shape, reps)]
    for n in out:
        if n < 0:
            raise RuntimeError("Trying to create tensor with negative dimension %d: %s" % (n, out))
    return _gathered(x, lambda a: np.tile(a.reshape(shape), reps), "RepeatBackward0")


def repeat(self, *repeats, **kw):
    """``Tensor.repeat``: the tensor tiled ``repeats[i]`` times along each dimension
    (leading ones added to its shape when ``repeats`` is longer)."""
    if not repeats and not kw:
        raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
    reps = _varargs("repeat", repeats, kw, "repeats")
    if len(reps) < self.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                           "tensor")
    return _repeated(self, reps)


def tile(input, dims):
    """``repeat`` with ones added in front of ``dims`` when it is shorter than the shape."""
    reps = [int(n) for n in _dims_arg(dims, "tile", 2)]
    return _repeated(input, [1] * (input.ndim - len(reps)) + reps)


def tile_method(self, *dims, **kw):
    return tile(self, _varargs("tile", dims, kw, "dims"))


# -- diag, diag_embed: zeros with a diagonal set (one STRIDED_SCATTER entry, the transpose of diagonal) --
def embed_strided(x, shape, index_fn, name, key):
    """Zeros of ``shape`` whose strided view ``index_fn`` holds ``x`` (of the view's shape)."""
    words = _cached_words(shape, key, index_fn)
    out = np.zeros(shape, x.dtype)
    if out.size:
        v = _as_view(out.reshape(-1), words)
        v[...] = x._data
    if not x._requires_grad or not _tp.state().grad:
        return Tensor._wrap(out)
    return _record(STRIDED_SCATTER, x, out, name, words)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    x = input
    nd = x.ndim + 1
    a, b = _wrap_dim(dim1, nd), _wrap_dim(dim2, nd)
    if a == b:
        raise RuntimeError("diagonal dimensions cannot be identical %d, %d" % (dim1, dim2))
    n = x.shape[-1] + abs(offset)
    rest = list(x.shape[:-1])
    shape = tuple(n if d in (a, b) else rest.pop(0) for d in range(nd))
    return embed_strided(x, shape, lambda v: np.diagonal(v, offset, a, b), "DiagEmbedBackward0",
                         ("diagonal", offset, a, b))


def diag(input, diagonal=0):
    x = input
    if x.ndim == 1:
        n = x.shape[0] + abs(diagonal)
        return embed_strided(x, (n, n), lambda v: np.diagonal(v, diagonal), "DiagEmbedBackward0",
                             ("diagonal", diagonal, 0, 1))
    if x.ndim == 2:
        return strided_copy(x, lambda v: np.diagonal(v, diagonal), "DiagonalBackward0_copy",
                            ("diagonal", diagonal, 0, 1))
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got %dD" % x.ndim)


# -- atleast_1d/2d/3d, vstack, hstack, dstack, column_stack: reshape and cat --
def _tensor_args(tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0]), False
    return list(tensors), len(tensors) == 1


def _atleast(tensors, fname, nd):
    items, single = _tensor_args(tensors)
    if single and not isinstance(items[0], Tensor):
        raise TypeError("%s() received an invalid combination of arguments - got (%s), but expected one of:\n"
                        " * (Tensor input)\n * (tuple of Tensors tensors)\n" % (fname, type(items[0]).__name__))
    _check_tensors(items)
    out = tuple(_at_least(t, nd) for t in items)
    return out[0] if single else out


def _at_least(t, nd):
    k = t.ndim
    if k >= nd:
        return t
    if k == 0:
        return reshape(t, (1,) * nd)
    if nd == 2:         # (n,) -> (1, n)
        return unsqueeze(t, 0)
    return unsqueeze(unsqueeze(t, 0), 2) if k == 1 else unsqueeze(t, 2)     # (1, n, 1), (m, n, 1)


def atleast_1d(*tensors):
    return _atleast(tensors, "atleast_1d", 1)


def atleast_2d(*tensors):
    return _atleast(tensors, "atleast_2d", 2)


def atleast_3d(*tensors):
    return _atleast(tensors, "atleast_3d", 3)


def _check_tensors(items):
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError("expected Tensor as element %d in argument 0, but got %s" % (i, type(t).__name__))


def _stack_args(tensors, fname):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError("%s(): argument 'tensors' (position 1) must be tuple of Tensors, not %s"
                        % (fname, type(tensors).__name__))
    if not tensors:
        raise RuntimeError("%s expects a non-empty TensorList" % fname)
    _check_tensors(tensors)
    return list(tensors)


def vstack(tensors):
    return cat([_at_least(t, 2) for t in _stack_args(tensors, "vstack")], 0)


def hstack(tensors):
    ts = [_at_least(t, 1) for t in _stack_args(tensors, "hstack")]
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def dstack(tensors):
    return cat([_at_least(t, 3) for t in _stack_args(tensors, "dstack")], 2)


def column_stack(tensors):
    ts = _stack_args(tensors, "column_stack")
    return cat([reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in ts], 1)


# -- meshgrid, cartesian_prod, block_diag: expand, stack and cat --
_MESHGRID_WARNING = "torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument."


def meshgrid(*tensors, indexing=None):
    items, _ = _tensor_args(tensors)
    if indexing is None:
        warnings.warn(_MESHGRID_WARNING, UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError('torch.meshgrid: indexing must be one of "xy" or "ij", but received: %s' % indexing)
    return _meshgrid(items, indexing)


def _meshgrid(items, indexing):
    if not items:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    _check_tensors(items)
    for t in items:
        if t.dtype != items[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    for t in items:
        if t.ndim > 1:
            raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: %s" % (t,))
    # "xy": the first two dimensions of the grid swapped (x along the columns)
    order = list(range(len(items)))
    if indexing == "xy" and len(items) >= 2:
        order[0], order[1] = 1, 0
    sizes = [0] * len(items)
    for i, t in enumerate(items):
        sizes[order[i]] = t.numel()
    out = []
    for i, t in enumerate(items):
        view = [1] * len(items)
        view[order[i]] = -1
        out.append(expand(reshape(t, tuple(view)), *sizes))
    return tuple(out)


def cartesian_prod(*tensors):
    items = list(tensors)
    _check_tensors(items)
    for t in items:
        if t.ndim != 1:
            raise RuntimeError("Expect a 1D vector, but got shape %s" % list(t.shape))
    if len(items) == 1:
        return items[0]
    grids = _meshgrid(items, "ij")
    return stack([reshape(g, (-1,)) for g in grids], 1)


def block_diag(*tensors):
    """The tensors (each 0-d, 1-d as a row, or 2-d) along the diagonal of a matrix
    of zeros: one cat of rows, each a cat of zeros, a block and zeros."""
    _check_tensors(tensors)
    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError("torch.block_diag: Input tensors must have 2 or fewer dimensions. Input %d has %d "
                               "dimensions" % (i, t.ndim))
        blocks.append(reshape(t, (1, t.numel())) if t.ndim < 2 else t)
    dt = blocks[0].dtype if blocks else DEFAULT
    for b in blocks:
        dt = promote_types(dt, b.dtype)
    if not blocks:
        return Tensor._wrap(np.zeros((1, 0), dt))
    cols = sum(b.shape[1] for b in blocks)
    rows, at = [], 0
    for b in blocks:
        r, c = b.shape
        left = Tensor._const(np.zeros((r, at), dt))
        right = Tensor._const(np.zeros((r, cols - at - c), dt))
        rows.append(cat([left, b, right], 1))
        at += c
    return _cat(rows, 0, False, "BlockDiagBackward0")


# -- the rules of the Python passes, one section per kernel ----------------------------
# Each kernel's differentiable reverse (create_graph=True: the rule of ``shape_reverse``
# written with tapegrad's own ops on flat adjoints, so that the gradient it produces is
# itself recorded) and its replay rule (the entry's forward again from its inputs'
# values, on the flat C-order elements as the kernels see them).
_DIFFERENTIABLE = {}    # kernel -> f(ctx, s, row, g): [(input slot, adjoint)]
_REPLAY = {}            # kernel -> f(row, aux, shape): a function of the slot values


def _rules(k):
    def register(differentiable, replay):
        _DIFFERENTIABLE[k], _REPLAY[k] = differentiable, replay
    return register


def _flat_input(row, vals):
    return np.ascontiguousarray(vals[row[_tp.A]]).reshape(-1)


# -- reshape (also clone and the float casts) --
def _reshape_differentiable(ctx, s, row, g):
    return [(row[_tp.A], g)]


def _reshape_replay(row, aux, shape):
    a = row[_tp.A]
    return lambda v: v[a].reshape(shape)


_rules(RESHAPE)(_reshape_differentiable, _reshape_replay)


# -- strided (views: slices, transpose, expand...) --
def _strided_differentiable(ctx, s, row, g):
    a = row[_tp.A]
    return [(a, strided_scatter(g, _words(ctx.aux, row[_tp.AUX]), ctx.size(a)))]


def _strided_values(row, vals, aux, shape):
    words = _words(aux, row[_tp.AUX])
    flat = _flat_input(row, vals)
    if not flat.size:
        return np.zeros(shape, flat.dtype)
    out = _as_view(flat, words)
    if _geometry(words)[3]:
        out = out.view()
        out.flags.writeable = False
    return out.reshape(shape)


_rules(STRIDED)(_strided_differentiable, lambda row, aux, shape: lambda v: _strided_values(row, v, aux, shape))


# -- strided_scatter (the reverse of a view, recorded by create_graph) --
def _strided_scatter_differentiable(ctx, s, row, g):
    return [(row[_tp.A], strided_view(g, _words(ctx.aux, row[_tp.AUX])))]


def _strided_scatter_values(row, vals, aux, shape):
    words = _words(aux, row[_tp.AUX])
    flat = _flat_input(row, vals)
    n = int(np.prod(shape, dtype=np.int64))
    out = np.zeros(n, flat.dtype)
    if flat.size:
        if not _geometry(words)[3]:
            v = _as_view(out, words)
            v[...] = flat.reshape(v.shape)
        else:
            out += np.bincount(strided_map_np(words, 0), weights=flat, minlength=n).astype(flat.dtype, copy=False)
    return out.reshape(shape)


_rules(STRIDED_SCATTER)(_strided_scatter_differentiable,
                        lambda row, aux, shape: lambda v: _strided_scatter_values(row, v, aux, shape))


# -- gather (index arrays, max along a dim) --
def _gather_differentiable(ctx, s, row, g):
    a, at = row[_tp.A], row[_tp.AUX]
    return [(a, scatter_add(g, ctx.aux[at:at + g.numel()], ctx.size(a)))]


def _gather_replay(row, aux, shape):
    a = row[_tp.A]
    n = int(np.prod(shape, dtype=np.int64))
    idx = aux[row[_tp.AUX]:row[_tp.AUX] + n].copy()        # (the index array bound once)
    return lambda v: np.take(v[a], idx).reshape(shape)


_rules(GATHER)(_gather_differentiable, _gather_replay)


# -- scatter_add (the reverse of a gather, recorded by create_graph) --
def _scatter_add_differentiable(ctx, s, row, g):
    a, at = row[_tp.A], row[_tp.AUX]
    return [(a, gather_flat(g, ctx.aux[at:at + ctx.size(a)]))]


def _scatter_add_values(row, vals, aux, shape):
    at = row[_tp.AUX]
    flat = _flat_input(row, vals)
    n = int(np.prod(shape, dtype=np.int64))
    out = np.bincount(aux[at:at + flat.size], weights=flat, minlength=n) if flat.size else np.zeros(n)
    return out.astype(flat.dtype, copy=False).reshape(shape)


_rules(SCATTER_ADD)(_scatter_add_differentiable,
                    lambda row, aux, shape: lambda v: _scatter_add_values(row, v, aux, shape))


# -- setitem (CopySlices: input a overwritten at ``lin`` by elements ``vmap`` of input b) --
def _setitem_differentiable(ctx, s, row, g):
    a, b, at = row[_tp.A], row[_tp.B], row[_tp.AUX]
    aux = ctx.aux
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


def _setitem_values(row, vals, aux, shape):
    at = row[_tp.AUX]
    r = int(aux[at])
    out = _flat_input(row, vals).copy()
    v = np.ascontiguousarray(vals[row[_tp.B]]).reshape(-1)
    out[aux[at + 1:at + 1 + r]] = v[aux[at + 1 + r:at + 1 + 2 * r]]
    return out.reshape(shape)


_rules(SETITEM)(_setitem_differentiable, lambda row, aux, shape: lambda v: _setitem_values(row, v, aux, shape))


# -- cat (and stack): the inputs listed in aux (``VARIADIC``) --
def _cat_differentiable(ctx, s, row, g):
    at = row[_tp.AUX]
    aux = ctx.aux
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


def _cat_values(row, vals, aux, shape):
    at = row[_tp.AUX]
    m = int(aux[at])
    outer = int(aux[at + 1 + m])
    parts = [vals[int(aux[at + 1 + j])] for j in range(m)]
    if any(p.size for p in parts):
        out = np.concatenate([p.reshape(outer, -1) if outer else p.reshape(0, p.size) for p in parts], axis=1)
    else:
        out = np.concatenate([p.reshape(-1) for p in parts])
    return out.reshape(shape)


_rules(CAT)(_cat_differentiable, lambda row, aux, shape: lambda v: _cat_values(row, v, aux, shape))


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


# -- the family's rules (registry.FAMILY_RULES) --------------------------------------
def differentiable_reverse(ctx, s, k, row, f0, f1, g):
    return _DIFFERENTIABLE[k](ctx, s, row, g)


def replay_rule(k, row, aux, shape, name, f0, f1):
    """An entry's forward again (tapegrad.replay), as a function of the slot values,
    with its index arrays bound once."""
    return _REPLAY[k](row, aux, shape)


def _compiled_forward(k, ints, e, sizes, aux, live):
    return k in COMPILED_FORWARD and e not in live     # (indices from the arguments: Python's)


# -- forward mode (autograd/tangent.py): every shape op is linear, so its tangent is
#    its forward on the K tangent rows, its batched reverse its reverse, no curvature --
def _index_of(ctx, row, k, n_in):
    """The input element of each output element (RESHAPE, STRIDED, GATHER), or of each
    input element the output element it adds into (SCATTER_ADD, STRIDED_SCATTER)."""
    at = row[_tp.AUX]
    if k in (STRIDED, STRIDED_SCATTER):
        return ctx.strided_map(at)
    if k == GATHER:
        return ctx.aux[at:at + row[_tp.SIZE]]
    return ctx.aux[at:at + n_in]                    # SCATTER_ADD


def _cat_pieces(ctx, row):
    at = row[_tp.AUX]
    aux = ctx.aux
    m = int(aux[at])
    outer, total = int(aux[at + 1 + m]), int(aux[at + 2 + m])
    return [(int(aux[at + 1 + j]), int(aux[at + 3 + m + 2 * j]), int(aux[at + 4 + m + 2 * j]))
            for j in range(m)], outer, total


def _batch_view(t, words):
    """The strided view ``words`` of every row of the C-contiguous batch ``t``."""
    shape, strides, off, _ = _geometry(words)
    isz = t.itemsize
    return np.ndarray((t.shape[0],) + shape, t.dtype, t, off * isz,
                      (t.strides[0],) + tuple(st * isz for st in strides))


def tangent(ctx, s, k, row, f0, f1):
    K, n = ctx.K, row[_tp.SIZE]
    if k == STRIDED:
        ta = ctx.tan(row[_tp.A])
        if ta is None:
            return None
        if not ta.size:
            return np.zeros((K, n))
        return _batch_view(np.ascontiguousarray(ta), _words(ctx.aux, row[_tp.AUX])).reshape(K, n)
    if k == CAT:
        out = np.zeros((K, n))
        pieces, outer, total = _cat_pieces(ctx, row)
        view = out.reshape(K, outer, total)
        for sj, inner, off in pieces:
            t = ctx.tan(sj) if sj >= 0 else None
            if t is not None:
                view[:, :, off:off + inner] = t.reshape(K, outer, inner)
        return out
    a = row[_tp.A]
    ta = ctx.tan(a)
    if k == SETITEM:
        tb = ctx.tan(row[_tp.B])
        out = np.zeros((K, n)) if ta is None else ta.copy()
        at = row[_tp.AUX]
        r = int(ctx.aux[at])
        lin, vmap = ctx.aux[at + 1:at + 1 + r], ctx.aux[at + 1 + r:at + 1 + 2 * r]
        out[:, lin] = 0.0 if tb is None else gather_columns(tb, vmap)
        return out
    if ta is None:
        return None
    if k == RESHAPE:
        return ta
    idx = _index_of(ctx, row, k, ctx.size(a))
    if k in (STRIDED, GATHER):
        return gather_columns(ta, idx)
    return scatter_columns(ta, idx, n)              # SCATTER_ADD, STRIDED_SCATTER


def batched_reverse(ctx, s, k, row, f0, f1, G):
    if k == CAT:
        pieces, outer, total = _cat_pieces(ctx, row)
        view = G.reshape(G.shape[0], outer, total)
        return [(sj, view[:, :, off:off + inner].reshape(G.shape[0], -1))
                for sj, inner, off in pieces if ctx.needs(sj)]
    a = row[_tp.A]
    if k == SETITEM:
        at = row[_tp.AUX]
        r = int(ctx.aux[at])
        lin, vmap = ctx.aux[at + 1:at + 1 + r], ctx.aux[at + 1 + r:at + 1 + 2 * r]
        out = []
        if ctx.needs(a):
            ga = G.copy()
            ga[:, lin] = 0.0
            out.append((a, ga))
        b = row[_tp.B]
        if ctx.needs(b):
            out.append((b, scatter_columns(gather_columns(G, lin), vmap, ctx.size(b))))
        return out
    if not ctx.needs(a):
        return []
    if k == RESHAPE:
        return [(a, G)]
    if k == STRIDED:
        words = _words(ctx.aux, row[_tp.AUX])
        if not _geometry(words)[3] and G.size:     # no element seen twice: the view written, not added
            out = np.zeros((G.shape[0], ctx.size(a)))
            view = _batch_view(out, words)
            view[...] = G.reshape(view.shape)
            return [(a, out)]
    idx = _index_of(ctx, row, k, ctx.size(a))
    if k in (STRIDED, GATHER):
        return [(a, scatter_columns(G, idx, ctx.size(a)))]
    return [(a, gather_columns(G, idx))]


def curvature(ctx, s, k, row, f0, f1, g):
    return ()


def check_entries(ks, es, ints, aux):
    """``FamilyRules.check_entries``: the shape kernels (``shape_reverse``, ``shape_forward``)
    index the input, the output and setitem's value by these words unchecked."""
    a, n, at = ints[es, _tp.A], ints[es, _tp.SIZE], ints[es, _tp.AUX]
    needs_a = (ks != CAT) & (ks != SETITEM)
    refuse(~needs_a | ((a >= 0) & (a < es)), es, lambda i: "no input slot (%d)" % a[i])
    na = np.where(a >= 0, ints[np.maximum(a, 0), _tp.SIZE], 0)
    same = ks == RESHAPE
    refuse(~same | (na == n), es, lambda i: "an input of %d elements for an output of %d" % (na[i], n[i]))
    for kind, base, count in ((STRIDED, na, n), (STRIDED_SCATTER, n, na)):
        m = ks == kind
        if m.any():
            check_descriptors(aux, at[m], base[m], count[m], es[m])
    rest = ~same & (ks != STRIDED) & (ks != STRIDED_SCATTER)
    _check_each(ks[rest], es[rest], ints, aux)


@each_entry
def _check_each(k, e, ints, aux):
    row = ints[e]
    sizes = ints[:, _tp.SIZE]
    a, b, at, n = int(row[_tp.A]), int(row[_tp.B]), int(row[_tp.AUX]), int(row[_tp.SIZE])
    if k == CAT:            # aux: [m, slots[m], outer, total, (inner, offset)[m]]
        m = int(aux_words(aux, at, 1, "cat")[0])
        w = [int(v) for v in aux_words(aux, at, 3 + 3 * m, "cat")]
        outer, total = w[1 + m], w[2 + m]
        if outer < 0 or total < 0 or outer * total != n:
            raise EntryError("%d rows of %d elements for an output of %d" % (outer, total, n))
        at_row = 0          # (the inputs' pieces of a row lie side by side, in order)
        for j in range(m):
            sj, inner, off = w[1 + j], w[3 + m + 2 * j], w[4 + m + 2 * j]
            if not -1 <= sj < e or inner < 0 or off != at_row or (sj >= 0 and sizes[sj] != outer * inner):
                raise EntryError("input %d (slot %d) does not fit rows of %d elements" % (j, sj, total))
            at_row += inner
        if at_row != total:
            raise EntryError("inputs of %d elements per row for rows of %d" % (at_row, total))
    elif k == SETITEM:
        if a >= 0 and sizes[a] != n:
            raise EntryError("an input of %d elements for an output of %d" % (sizes[a], n))
        r = int(aux_words(aux, at, 1, "setitem")[0])
        check_words(k, aux_words(aux, at, 1 + 2 * max(r, 0), "setitem"), 0, n, sizes[b] if b >= 0 else 0)
    elif k == GATHER:
        check_words(k, aux_words(aux, at, n, "gather"), sizes[a], n, 0)
    elif k == SCATTER_ADD:
        check_words(k, aux_words(aux, at, sizes[a], "scatter"), sizes[a], n, 0)
    else:
        raise EntryError("shape kernel %d has no check" % k)


for _k, _code in CODES.items():
    if _k not in _DIFFERENTIABLE:
        raise OpDefinitionError("shape op %r: no rules (_rules) in tapegrad/ops/shape.py" % OP_NAMES[_code])
register_family(SHAPE, FamilyRules(differentiable_reverse, replay_rule, expands_adjoint=True,
                                   scalar_replay=frozenset((RESHAPE, STRIDED, GATHER)),
                                   compiled_forward=_compiled_forward, tangent=tangent,
                                   batched_reverse=batched_reverse, curvature=curvature, check_entries=check_entries))
