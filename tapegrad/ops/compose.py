"""Ops made of other recorded ops: ``einsum``, ``tensordot``, ``cross``,
``repeat_interleave`` and ``pad`` (``tg.nn.functional.pad``).

None has an opcode of its own: each is recorded as the views, reshapes, diagonals,
sums, products, matrix products, gathers and setitems it is made of, so its
compiled reverse, its differentiable reverse (create_graph) and its replay are
those ops'.  ``einsum`` contracts its operands in pairs, in the order
``np.einsum_path`` finds, each pair as one batched matrix product (or one
broadcast product when nothing is summed).  While a function is recorded for
replay, the values of a ``repeats`` tensor are a guard, as an index is.
"""
import warnings

import numpy as np

from ..core import tape as _tp
from ..core.descriptors import c_strides
from ..core.dtypes import torch_name
from ..core.tensor import Tensor, _wrap_dim
from . import reduce as _rd
from . import shape as _sh
from .elementwise import BINARY_BY_NAME as _B
from .gathers import _need_tensor, _no_out, _setitem, _values
from .linalg import _matmul

_MUL = _B["mul"].record
_SUB = _B["sub"].record


# -- einsum ---------------------------------------------------------------------------
# A label is an int: 0-25 for A-Z, 26-51 for a-z (PyTorch's numbering, so sorting the
# ints sorts the implicit output as PyTorch does), 52 + k for the k-th dimension
# covered by an ellipsis (counted from the left of the longest ellipsis).
_ELL = -1
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _letter(label):
    return _LETTERS[label]


def _subscript(c):
    """PyTorch's label number of ``c`` (-1 if it is not a letter of [a-zA-Z])."""
    if "A" <= c <= "Z":
        return ord(c) - 65
    if "a" <= c <= "z":
        return ord(c) - 97 + 26
    return -1


def einsum(equation, *operands):
    """``einsum(equation, *operands)``, ``einsum(equation, [operands])`` or the
    sublist form ``einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])``."""
    if not operands:
        raise ValueError("einsum(): must specify the equation string and at least one operand, or at least one "
                         "operand and its subscripts list")
    if isinstance(equation, Tensor):
        args = (equation,) + operands
        equation = ",".join("".join(_sublist_label(s) for s in sub) for sub in args[1::2])
        if len(args) % 2 == 1:
            equation += "->" + "".join(_sublist_label(s) for s in args[-1])
            operands = args[:-1:2]
        else:
            operands = args[::2]
    elif not isinstance(equation, str):
        raise TypeError("einsum(): argument 'equation' (position 1) must be str, not %s" % type(equation).__name__)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, op in enumerate(operands):
        if not isinstance(op, Tensor):
            raise TypeError("expected Tensor as element %d in argument 1, but got %s" % (i, _type_name(op)))
    return _einsum(equation, list(operands))


def _type_name(v):
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else "%s.%s" % (t.__module__.split(".")[0], t.__name__)


def _sublist_label(n):
    if n is Ellipsis:
        return "..."
    if 0 <= n < 26:
        return chr(65 + n)
    if 26 <= n < 52:
        return chr(97 + n - 26)
    raise ValueError("einsum(): subscript in subscript list is not within the valid range [0, 52)")


def _parse(equation, ops):
    """Each operand's labels (``_ELL`` for its ellipsis) and the output's, with
    PyTorch's checks and messages, in its order."""
    n = len(ops)
    arrow = equation.find("->")
    lhs = equation if arrow < 0 else equation[:arrow]
    labels, cur, found, i = [[]], 0, False, 0
    while i < len(lhs):
        c = lhs[i]
        if c == " ":
            pass
        elif c == ".":
            if found:
                raise RuntimeError("einsum(): found '.' for operand %d for which an ellipsis was already found" % cur)
            if not (i + 2 < len(lhs) and lhs[i + 1] == "." and lhs[i + 2] == "."):
                raise RuntimeError("einsum(): found '.' for operand %d that is not part of any ellipsis" % cur)
            i += 2
            labels[cur].append(_ELL)
            found = True
        elif c == ",":
            cur += 1
            if cur >= n:
                raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
            labels.append([])
            found = False
        else:
            s = _subscript(c)
            if s < 0:
                raise RuntimeError("einsum(): invalid subscript given at index %d in the equation string, subscripts "
                                   "must be in [a-zA-Z]" % i)
            labels[cur].append(s)
        i += 1
    if cur != n - 1:
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    ell = 0         # the dimensions the longest ellipsis covers
    counts = [0] * 52
    for k, (lab, op) in enumerate(zip(labels, ops)):
        nl = len(lab) - (_ELL in lab)
        if _ELL in lab:
            if nl > op.ndim:
                raise RuntimeError("einsum(): the number of subscripts in the equation (%d) is more than the number "
                                   "of dimensions (%d) for operand %d" % (nl, op.ndim, k))
            ell = max(ell, op.ndim - nl)
        elif nl != op.ndim:
            raise RuntimeError("einsum(): the number of subscripts in the equation (%d) does not match the number of "
                               "dimensions (%d) for operand %d and no ellipsis was given" % (nl, op.ndim, k))
        for s in lab:
            if s >= 0:
                counts[s] += 1
    ell_labels = list(range(52, 52 + ell))
    if arrow < 0:
        out = ell_labels + [s for s in range(52) if counts[s] == 1]
    else:
        out, found, i = [], False, arrow + 2
        while i < len(equation):
            c = equation[i]
            if c == " ":
                pass
            elif c == ".":
                if found:
                    raise RuntimeError("einsum(): found '.' for output but an ellipsis (...) was already found")
                if not (i + 2 < len(equation) and equation[i + 1] == "." and equation[i + 2] == "."):
                    raise RuntimeError("einsum(): found '.' for output that is not part of any ellipsis (...)")
                i += 2
                out.extend(ell_labels)
                found = True
            else:
                s = _subscript(c)
                if s < 0:
                    raise RuntimeError("einsum(): invalid subscript given at index %d in the equation string, "
                                       "subscripts must be in [a-zA-Z]" % i)
                if counts[s] == 0:
                    raise RuntimeError("einsum(): output subscript %s does not appear in the equation for any input "
                                       "operand" % c)
                if s in out:
                    raise RuntimeError("einsum(): output subscript %s appears more than once in the output" % c)
                out.append(s)
            i += 1
    return labels, out, ell


def _dim_labels(lab, nd, ell):
    """The label of each dimension of an operand (its ellipsis dimensions numbered
    52 + k, right-aligned with the longest ellipsis)."""
    if _ELL not in lab:
        return list(lab)
    p = lab.index(_ELL)
    e = nd - (len(lab) - 1)
    return lab[:p] + list(range(52 + ell - e, 52 + ell)) + lab[p + 1:]


def _einsum(equation, ops):
    labels, out, ell = _parse(equation, ops)
    sizes = {}
    dims = []
    for k, (lab, op) in enumerate(zip(labels, ops)):
        dl = _dim_labels(lab, op.ndim, ell)
        sh = op.shape
        first = {}
        for d, (s, n) in enumerate(zip(dl, sh)):
            if s in first:
                if n != sh[first[s]]:
                    raise RuntimeError("einsum(): subscript %s is repeated for operand %d but the sizes don't match, "
                                       "%d != %d" % (_letter(s), k, n, sh[first[s]]))
                continue
            first[s] = d
            seen = sizes.get(s)
            if seen is not None and n != seen and n != 1 and seen != 1:
                if s >= 52:
                    raise RuntimeError("einsum(): dimension %d covered by ellipsis in operand %dhas size %d which does "
                                       "not broadcast with previously seen ellipsis with size %d for the respective "
                                       "dimension" % (d, k, n, seen))
                raise RuntimeError("einsum(): subscript %s has size %d for operand %d which does not broadcast with "
                                   "previously seen size %d" % (_letter(s), n, k, seen))
            if seen is None or seen == 1:
                sizes[s] = n
        dims.append(dl)
    terms = []
    for k, (op, dl) in enumerate(zip(ops, dims)):
        op, dl = _diagonals(op, dl)
        others = set(out)
        for j, d2 in enumerate(dims):
            if j != k:
                others.update(d2)
        terms.append(_sum_labels(op, dl, [s for s in dl if s not in others]))
    order = _path(terms, out, sizes) if len(terms) > 2 else [(0, 1)] if len(terms) == 2 else []
    for pair in order:
        picked = [terms[i] for i in pair]
        rest = [t for i, t in enumerate(terms) if i not in pair]
        keep = set(out)
        for _, dl in rest:
            keep.update(dl)
        acc = picked[0]
        for j in range(1, len(picked)):
            later = set(keep)
            for _, dl in picked[j + 1:]:
                later.update(dl)
            acc = _contract(acc, picked[j], later)
        terms = rest + [acc]
    x, dl = terms[0]
    x, dl = _sum_labels(x, dl, [s for s in dl if s not in out])
    if dl != out:
        return _sh.permute(x, *[dl.index(s) for s in out])
    if any(x is op for op in ops):
        return _sh.reshape(x, x.shape)        # (a new tensor, a view of the operand, as PyTorch's)
    return x


def _diagonals(x, dl):
    """Repeated labels of one operand: its diagonal (moved to the last dimension)."""
    while len(set(dl)) < len(dl):
        p = next(i for i, s in enumerate(dl) if s in dl[:i])
        q = dl.index(dl[p])
        x = _sh.diagonal(x, 0, q, p)
        dl = [s for i, s in enumerate(dl) if i not in (p, q)] + [dl[p]]
    return x, dl


def _sum_labels(x, dl, gone):
    if not gone:
        return x, dl
    return _rd.sum(x, [dl.index(s) for s in gone]), [s for s in dl if s not in gone]


_PATHS = {}      # (labels of each term, output, sizes) -> the pairs to contract


def _path(terms, out, sizes):
    """The pairs to contract, in ``np.einsum_path``'s greedy order (left to right
    when there are more labels than letters)."""
    key = (tuple(tuple(dl) for _, dl in terms), tuple(out), tuple(sorted(sizes.items())))
    path = _PATHS.get(key)
    if path is None:
        if len(_PATHS) > 1024:
            _PATHS.clear()
        path = _PATHS[key] = _find_path(terms, out, sizes)
    return path


def _find_path(terms, out, sizes):
    used = sorted({s for _, dl in terms for s in dl} | set(out))
    if len(used) > 52:
        return [(0, 1)] + [(0, 1)] * (len(terms) - 2)
    letter = {s: _LETTERS[i] for i, s in enumerate(used)}
    eq = ",".join("".join(letter[s] for s in dl) for _, dl in terms) + "->" + "".join(letter[s] for s in out)
    dummies = [np.broadcast_to(np.zeros((), np.float64), tuple(sizes[s] for s in dl)) for _, dl in terms]
    path = np.einsum_path(eq, *dummies, optimize="greedy")[0][1:]
    return [tuple(p) for p in path if len(p) > 1] or [tuple(range(len(terms)))]


def _contract(a, b, keep):
    """The product of two terms summed over the labels they share that no other
    term nor the output has: one matrix product over the shared labels kept
    (the batch), or one broadcast product when nothing is summed."""
    x, la = a
    y, lb = b
    x, la = _sum_labels(x, la, [s for s in la if s not in lb and s not in keep])
    y, lb = _sum_labels(y, lb, [s for s in lb if s not in la and s not in keep])
    # a summed label of size 1 on one side: drop it there, sum it on the other
    for s in [s for s in la if s in lb and s not in keep]:
        nx, ny = x.shape[la.index(s)], y.shape[lb.index(s)]
        if nx == 1 or ny == 1:
            if nx == 1:
                x, la = _drop(x, la, s)
            if ny == 1:
                y, lb = _drop(y, lb, s)
            if s in la:
                x, la = _sum_labels(x, la, [s])
            if s in lb:
                y, lb = _sum_labels(y, lb, [s])
    batch = [s for s in la if s in lb]
    summed = [s for s in batch if s not in keep]
    batch = [s for s in batch if s in keep]
    a_only = [s for s in la if s not in lb]
    b_only = [s for s in lb if s not in la]
    if not summed:
        # x as batch + a_only + (1,)*b_only, y as batch + (1,)*a_only + b_only: one product
        xs = _moved(x, la, batch + a_only)
        ys = _moved(y, lb, batch + b_only)
        nb = len(batch)
        xs = _sh.reshape(xs, xs.shape + (1,) * len(b_only))
        ys = _sh.reshape(ys, ys.shape[:nb] + (1,) * len(a_only) + ys.shape[nb:])
        return _MUL(xs, ys), batch + a_only + b_only
    if x.dtype != y.dtype:
        raise RuntimeError("expected scalar type %s but found %s" % (torch_name(x.dtype), torch_name(y.dtype)))
    if x.dtype.kind == "b":
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    bsz = tuple(max(x.shape[la.index(s)], y.shape[lb.index(s)]) for s in batch)
    xs = _moved(x, la, batch + a_only + summed)
    ys = _moved(y, lb, batch + summed + b_only)
    nb = len(batch)
    if xs.shape[:nb] != bsz:
        xs = _sh.expand(xs, *(bsz + xs.shape[nb:]))
    if ys.shape[:nb] != bsz:
        ys = _sh.expand(ys, *(bsz + ys.shape[nb:]))
    asz, ssz, osz = xs.shape[nb:nb + len(a_only)], xs.shape[nb + len(a_only):], ys.shape[nb + len(summed):]
    na, ns, no = (int(np.prod(s, dtype=np.int64)) for s in (asz, ssz, osz))
    if nb:
        n = int(np.prod(bsz, dtype=np.int64))
        p = _matmul(_flat(xs, (n, na, ns)), _flat(ys, (n, ns, no)))
    else:
        p = _matmul(_flat(xs, (na, ns)), _flat(ys, (ns, no)))
    return _flat(p, bsz + asz + osz), batch + a_only + b_only


def _flat(x, shape):
    return x if x.shape == shape else _sh.reshape(x, shape)


def _drop(x, dl, s):
    i = dl.index(s)
    return _sh.reshape(x, x.shape[:i] + x.shape[i + 1:]), dl[:i] + dl[i + 1:]


def _moved(x, dl, order):
    if dl == order:
        return x
    return _sh.permute(x, *[dl.index(s) for s in order])


# -- tensordot -----------------------------------------------------------------------
def tensordot(a, b, dims=2, out=None):
    _no_out(out)
    _need_tensor("tensordot", a, "self", 1)
    _need_tensor("tensordot", b, "other", 2)
    if isinstance(dims, Tensor):
        d = dims._data
        dims = int(d) if d.ndim == 0 else [list(map(int, r)) for r in d] if d.ndim == 2 else list(map(int, d))
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        n = int(dims)
        if n < 0:
            raise RuntimeError("tensordot expects dims >= 0, but got dims=%d" % n)
        if n > a.ndim or n > b.ndim:
            raise RuntimeError("tensordot expects dims < ndim_a or ndim_b, but got dims=%d" % n)
        da, db = list(range(-n, 0)), list(range(n))
    elif isinstance(dims, (list, tuple)) and len(dims) == 2:
        da, db = dims
        if isinstance(da, (int, np.integer)) or isinstance(db, (int, np.integer)):
            bad = da if isinstance(da, (int, np.integer)) else db
            raise TypeError("tensordot(): argument 'dims_%s' (position 3) must be tuple of ints, not %s"
                            % ("self" if bad is da else "other", type(bad).__name__))
        da, db = list(da), list(db)
    else:
        raise RuntimeError("tensordot expects dims to be int or tuple[list[int], list[int]] or list[list[int]] "
                           "containing two lists, but got dims=%s" % (dims,))
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    ca = [_wrap_dim(d, a.ndim) for d in da]
    cb = [_wrap_dim(d, b.ndim) for d in db]
    for c, dl in ((ca, da), (cb, db)):
        dup = next((d for i, d in enumerate(c) if d in c[:i]), None)
        if dup is not None:
            raise RuntimeError("dim %d appears multiple times in the list of dims" % dup)
    x, y = a, b
    for i, (p, q) in enumerate(zip(ca, cb)):
        n, m = a.shape[p], b.shape[q]
        if n != m:
            if n != 1 and m != 1:
                raise RuntimeError("contracted dimensions need to match, but first has size %d in dim %d and second "
                                   "has size %d in dim %d" % (n, da[i], m, db[i]))
    # a size-1 contracted dimension against a longer one: the other side is summed along it
    for i, (p, q) in enumerate(zip(ca, cb)):
        n, m = a.shape[p], b.shape[q]
        if n == 1 and m != 1:
            y = _rd.sum(y, q, True)
        elif m == 1 and n != 1:
            x = _rd.sum(x, p, True)
    fa = [d for d in range(a.ndim) if d not in ca]
    fb = [d for d in range(b.ndim) if d not in cb]
    xs = x if fa + ca == list(range(a.ndim)) else _sh.permute(x, *(fa + ca))
    ys = y if cb + fb == list(range(b.ndim)) else _sh.permute(y, *(cb + fb))
    asz, bsz = tuple(a.shape[d] for d in fa), tuple(b.shape[d] for d in fb)
    k = int(np.prod([x.shape[d] for d in ca], dtype=np.int64))
    na, nb = int(np.prod(asz, dtype=np.int64)), int(np.prod(bsz, dtype=np.int64))
    p = _matmul(_flat(xs, (na, k)), _flat(ys, (k, nb)))
    return _flat(p, asz + bsz)


# -- cross ---------------------------------------------------------------------------
_CROSS_DEFAULT = ("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                  "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree with "
                  "that of linalg.cross in a future release.")


def cross(input, other, dim=None, *, out=None):
    _no_out(out)
    _need_tensor("cross", input, "input", 1)
    _need_tensor("cross", other, "other", 2)
    x, y = input, other
    if dim is None:
        warnings.warn(_CROSS_DEFAULT, UserWarning, stacklevel=2)
        dim = next((i for i, n in enumerate(x.shape) if n == 3), None)     # (of the input, not broadcast)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    if x.ndim != y.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = _wrap_dim(dim, x.ndim)
    if x.shape[d] != 3 or y.shape[d] != 3:
        raise RuntimeError("linalg.cross: inputs dimension %d must have length 3. Got %d and %d"
                           % (d, x.shape[d], y.shape[d]))
    for i in range(1, x.ndim + 1):
        p, q = x.shape[-i], y.shape[-i]
        if p != q and p != 1 and q != 1:
            raise RuntimeError("The size of tensor a (%d) must match the size of tensor b (%d) at non-singleton "
                               "dimension %d" % (p, q, x.ndim - i))
    if x.dtype != y.dtype:
        raise RuntimeError("expected scalar type %s but found %s" % (torch_name(x.dtype), torch_name(y.dtype)))
    if x.dtype.kind == "b":
        raise NotImplementedError("\"cross\" not implemented for 'Bool'")
    # x[1] y[2] - x[2] y[1], x[2] y[0] - x[0] y[2], x[0] y[1] - x[1] y[0]
    x1, x2 = _sh.roll(x, -1, d), _sh.roll(x, -2, d)
    y1, y2 = _sh.roll(y, -1, d), _sh.roll(y, -2, d)
    return _SUB(_MUL(x1, y2), _MUL(x2, y1))


# -- repeat_interleave ----------------------------------------------------------------
_INDEX = (np.dtype(np.int64), np.dtype(np.int32))


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None:         # repeat_interleave(repeats): the indices, each repeated its count
        return _repeat_counts(input, output_size)
    x = input
    if dim is None:
        x = _sh.reshape(x, (-1,))
        ax = 0
    else:
        ax = _wrap_dim(dim, x.ndim)
    xs = x.shape if x.ndim else (1,)
    n = xs[ax]
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if repeats.dtype not in _INDEX:
            raise NotImplementedError("\"repeat_interleave_cpu\" not implemented for '%s'" % torch_name(repeats.dtype))
        r = _values(repeats).reshape(-1).astype(np.int64)
        if r.size == 1 and n != 1:
            r = np.full(n, r[0], np.int64)
        elif r.size != n:
            raise RuntimeError("repeats must have the same size as input along dim, but got repeats.size(0) = %d and "
                               "input.size(%d) = %d" % (r.size, ax, n))
        if (r < 0).any():
            raise RuntimeError("repeats can not be negative")
        total = int(r.sum())
        if output_size is not None and int(output_size) != total:
            raise RuntimeError("allocated size does not match required size")
    else:
        k = int(repeats)
        if k < 0:
            raise RuntimeError("Repeats must be non-negative")
        r = np.full(n, k, np.int64)
        total = n * k
        if output_size is not None and int(output_size) != total:
            raise RuntimeError("repeat_interleave: Invalid output_size, expected %d but got %d"
                               % (total, int(output_size)))
    idx = np.repeat(np.arange(n, dtype=np.int64), r)
    out_shape = list(xs)
    out_shape[ax] = idx.size
    sub = [1] * len(xs)
    sub[ax] = idx.size
    lin = np.zeros(tuple(out_shape), np.int64)
    st = c_strides(xs)
    for d, m in enumerate(out_shape):
        if d != ax and m != 1:
            s = [1] * len(xs)
            s[d] = m
            lin = lin + np.arange(m, dtype=np.int64).reshape(s) * st[d]
    lin = lin + idx.reshape(sub) * st[ax]
    name = "IndexSelectBackward0" if isinstance(repeats, Tensor) else "ViewBackward0"
    return _sh.gather_linear(x, lin, name)


def _repeat_counts(repeats, output_size):
    _need_tensor("repeat_interleave", repeats, "repeats", 1)
    if repeats.ndim != 1:
        if repeats.ndim == 0:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if repeats.dtype not in _INDEX:
        raise NotImplementedError("\"repeat_interleave_cpu\" not implemented for '%s'" % torch_name(repeats.dtype))
    r = _values(repeats)
    if (r < 0).any():
        raise RuntimeError("repeats can not be negative")
    if output_size is not None and int(output_size) != int(r.sum()):
        raise RuntimeError("allocated size does not match required size")
    return Tensor._wrap(np.repeat(np.arange(r.size, dtype=r.dtype), r))


# -- pad -------------------------------------------------------------------------------
_NON_CONSTANT = ("Padding size %d is not supported for %dD input tensor.\nSupported combinations for non-constant "
                 "padding:\n  - 2D or 3D input: padding size = 2 (pads last dimension)\n  - 3D or 4D input: padding "
                 "size = 4 (pads last 2 dimensions)\n  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def pad(input, pad, mode="constant", value=None):
    x = input
    if not isinstance(pad, (list, tuple)):
        raise TypeError("pad(): argument 'pad' (position 2) must be tuple of ints, not %s" % type(pad).__name__)
    for i, p in enumerate(pad):
        if not isinstance(p, (int, np.integer)) or isinstance(p, bool):
            raise TypeError("pad(): argument 'pad' (position 2) must be tuple of ints, but found element of type %s "
                            "at pos %d" % (type(p).__name__, i))
    pads = [int(p) for p in pad]
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError("Unrecognised padding mode %s" % mode)
    if mode != "constant" and value is not None and value != 0:      # (0 is PyTorch's default, accepted)
        raise RuntimeError("Padding mode \"%s\" doesn't take in value argument" % mode)
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    k = len(pads) // 2
    nd = x.ndim
    if mode == "constant":
        if k > nd:
            raise RuntimeError("Padding length should be less than or equal to two times the input dimension but got "
                               "padding length %d and input of dimension %d" % (len(pads), nd))
        return _constant_pad(x, pads, 0 if value is None else value)
    if k not in (1, 2, 3) or nd not in (k + 1, k + 2):
        raise NotImplementedError(_NON_CONSTANT % (len(pads), nd))
    sh = x.shape
    lead = nd - k      # the batch and channel dimensions
    if mode != "circular":
        empty = any(n == 0 for n in sh[1:]) if nd == k + 2 else any(n == 0 for n in sh)
        if empty:
            raise RuntimeError("Expected %dD or %dD (batch mode) tensor with possibly 0 batch size and other non-zero "
                               "dimensions for input, but got: %s" % (k + 1, k + 2, list(sh)))
    pairs = [(pads[2 * j], pads[2 * j + 1]) for j in range(k)]        # the last dimension first
    if mode == "reflect":
        for j, (lo, hi) in enumerate(pairs):
            d = nd - 1 - j
            if not (lo < sh[d] and hi < sh[d]):
                raise RuntimeError("Argument #%d: Padding size should be less than the corresponding input dimension, "
                                   "but got: padding (%d, %d) at dimension %d of input %s"
                                   % (4 + 2 * j, lo, hi, d, list(sh)))
    if mode == "circular":
        for j, (lo, hi) in enumerate(pairs):
            n = sh[nd - 1 - j]
            if lo > n or hi > n:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            if n + lo + hi < 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
    elif k == 1 and sh[-1] + pairs[0][0] + pairs[0][1] < 1:
        raise RuntimeError("input (W: %d) is too small. Calculated output W: %d"
                           % (sh[-1], sh[-1] + pairs[0][0] + pairs[0][1]))
    index = []
    for d in range(nd):
        n = sh[d]
        if d < lead:
            index.append(np.arange(n, dtype=np.int64))
            continue
        lo, hi = pairs[nd - 1 - d]
        m = n + lo + hi
        if m < 0:
            raise RuntimeError("Trying to create tensor with negative dimension %d: %s"
                               % (m, [sh[e] + (sum(pairs[nd - 1 - e]) if e >= lead else 0) for e in range(nd)]))
        src = np.arange(m, dtype=np.int64) - lo
        if mode == "circular":      # (a negative pad crops first; the rest wraps around what is left)
            a = max(-lo, 0)
            left = n + min(lo, 0) + min(hi, 0)
            if m and left <= 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
            src = a + (np.arange(m, dtype=np.int64) - max(lo, 0)) % max(left, 1)
        elif mode == "reflect":
            src = np.abs(src)
            src = np.where(src > n - 1, 2 * (n - 1) - src, src)
        elif mode == "replicate":
            src = np.clip(src, 0, n - 1)
        index.append(src)
    lin = np.zeros(tuple(len(i) for i in index), np.int64)
    st = c_strides(sh)
    for d, i in enumerate(index):
        s = [1] * nd
        s[d] = len(i)
        lin = lin + i.reshape(s) * st[d]
    return _sh.gather_linear(x, lin, _PAD_NAMES[mode].replace("%d", str(k)))


_PAD_NAMES = {"reflect": "ReflectionPad%dDBackward0", "replicate": "ReplicationPad%dDBackward0",
              "circular": "CopySlices"}


def _constant_pad(x, pads, value):
    sh = x.shape
    nd = x.ndim
    new, keep_in, keep_out = [], [], []
    for d in range(nd):
        j = nd - 1 - d
        lo, hi = (pads[2 * j], pads[2 * j + 1]) if j < len(pads) // 2 else (0, 0)
        n = sh[d]
        m = n + lo + hi
        if m < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        new.append(m)
        a, b = max(0, -lo), n - max(0, -hi)      # the input's kept range
        b = max(a, b)
        keep_in.append(np.arange(a, b, dtype=np.int64))
        keep_out.append(np.arange(a, b, dtype=np.int64) + lo)
    vmap = _grid(keep_in, c_strides(sh))
    lin = _grid(keep_out, c_strides(tuple(new)))
    out = np.full(tuple(new), value, dtype=x.dtype)
    out.reshape(-1)[lin.reshape(-1)] = x._data.reshape(-1)[vmap.reshape(-1)] if x._data.ndim else x._data
    if not (x._requires_grad and _tp.state().grad):
        return Tensor._wrap(out)
    base = Tensor._const(np.full(tuple(new), value, dtype=x.dtype))
    return _setitem(base, out, lin, vmap, x, "ConstantPadNdBackward0")


def _grid(index, strides):
    lin = np.zeros(tuple(len(i) for i in index), np.int64)
    for d, i in enumerate(index):
        s = [1] * len(index)
        s[d] = len(i)
        lin = lin + i.reshape(s) * strides[d]
    return lin
