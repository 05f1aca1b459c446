"""Complex tensors: ``ComplexTensor``, a complex view of a real tensor whose last
dimension of size 2 holds (real, imaginary) pairs (``tg.view_as_real``).

Every operation on a complex tensor is computed on that real pair tensor with
tapegrad's real operations, so the tape, the compiled sweep, create_graph and replay
never see a complex number.  The gradient of a real loss with respect to a complex
tensor is then the pair (dL/dre, dL/dim) read as ``dL/dre + i dL/dim``: PyTorch's
convention (the conjugate Wirtinger derivative, times two).

What a complex tensor supports: arithmetic with tensors and numbers (``+ - * /``,
unary ``-``), ``abs angle real imag conj exp sum mean``, reshaping, transposing,
indexing, ``cat``/``stack``, ``matmul``, ``tg.fft`` and ``tg.linalg.eig``.  Any
other operation refuses a complex tensor with a TypeError (the internal fields a
real operation reads raise it), never computing on the wrong numbers.
"""
import builtins
import numbers
import warnings

import numpy as np

from . import functions as F
from .core.tensor import Tensor
from .ops import host as _h
from .ops import shape as _sh

__all__ = ["ComplexTensor", "view_as_real", "view_as_complex", "complex", "polar", "real", "imag", "conj",
           "conj_physical", "angle", "is_complex", "resolve_conj", "resolve_neg"]

_REAL_OF = {np.dtype(np.complex128): np.dtype(np.float64), np.dtype(np.complex64): np.dtype(np.float32)}
_COMPLEX_OF = {v: k for k, v in _REAL_OF.items()}

UNSUPPORTED = ("tapegrad: this operation does not take a complex tensor (complex tensors support arithmetic, "
               "abs, angle, real, imag, conj, exp, sum, mean, reshaping, indexing, cat, stack, matmul, tg.fft "
               "and tg.linalg.eig; tg.view_as_real gives the real (..., 2) tensor for anything else)")


def _refused(self):
    raise TypeError(UNSUPPORTED)


def _refuse_set(self, value):
    raise TypeError(UNSUPPORTED)


def _internal():
    return property(_refused, _refuse_set)


def _cdim(dim, ndim):
    """A complex tensor's dim as a non-negative dim of its pair tensor (PyTorch's
    IndexError when out of range)."""
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError("dim must be an int, got %s" % type(dim).__name__)
    lo, hi = -builtins.max(ndim, 1), builtins.max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)"
                         % (lo, hi, dim))
    return int(dim) % builtins.max(ndim, 1)


def _cdims(dims, ndim):
    if dims is None:
        return list(range(ndim))
    if isinstance(dims, (int, np.integer)):
        dims = [dims]
    return [_cdim(d, ndim) for d in dims]


class ComplexTensor(Tensor):
    """A complex64 or complex128 tensor: a complex view of the real tensor ``_r`` of
    shape ``shape + (2,)`` (float32 or float64).  Its autograd state (requires_grad,
    grad_fn, .grad, hooks) is that of ``_r``."""
    __slots__ = ("_r",)
    _PAIR = True

    # the fields real operations read: a complex tensor refuses them (see UNSUPPORTED)
    _data = _internal()
    _requires_grad = _internal()
    _tape_id = _internal()
    _slot = _internal()
    _ver = _internal()
    _slot_version = _internal()
    _tape = _internal()
    _extra = _internal()

    def __init__(self, *args, **kwargs):
        raise TypeError("tapegrad: make a complex tensor with tg.tensor, tg.complex or tg.view_as_complex")

    @staticmethod
    def _from_pair(r):
        t = object.__new__(ComplexTensor)
        t._r = r
        return t

    # -- the complex values -------------------------------------------------------------
    def _values(self):
        """The complex NumPy array (a view of the pair tensor's array when it can be)."""
        a = self._r.detach().numpy()
        cdt = _COMPLEX_OF[a.dtype]
        if a.strides[-1] == a.itemsize and a.ndim and all(s % (2 * a.itemsize) == 0 for s in a.strides[:-1]):
            return a.view(cdt)[..., 0]
        return (a[..., 0] + 1j * a[..., 1]).astype(cdt)

    @property
    def shape(self):
        return self._r.shape[:-1]

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[_cdim(dim, self.ndim)]

    @property
    def ndim(self):
        return self._r.ndim - 1

    def dim(self):
        return self.ndim

    @property
    def dtype(self):
        return _COMPLEX_OF[self._r.dtype]

    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def is_complex(self):
        return True

    def is_floating_point(self):
        return False

    @property
    def device(self):
        return self._r.device

    def cpu(self):
        return self

    def numpy(self, *, force=False):
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                               "instead.")
        return self._values()

    def __array__(self, dtype=None, copy=None):
        a = self._values()
        return a if dtype is None else a.astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise RuntimeError("a Tensor with %d elements cannot be converted to Scalar" % self.numel())
        return builtins.complex(self._values().reshape(-1)[0])

    def tolist(self):
        return self._values().tolist()

    def __complex__(self):
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __float__(self):
        raise TypeError("can't convert complex to float")

    def __int__(self):
        raise TypeError("can't convert complex to int")

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item() != 0)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self):
        return id(self)

    def __repr__(self):
        body = np.array2string(self._values(), separator=", ", prefix="tensor(", threshold=1000, edgeitems=3,
                               precision=4)
        suffix = []
        if self.dtype != np.complex128:
            suffix.append("dtype=tapegrad.%s" % self.dtype.name)
        r = self._r
        if r.grad_fn is not None:
            suffix.append("grad_fn=<%s>" % type(r.grad_fn).__name__)
        elif r.requires_grad:
            suffix.append("requires_grad=True")
        return "tensor(%s)" % ", ".join([body] + suffix)

    __str__ = __repr__

    def __format__(self, spec):
        if self.numel() == 1 and self.ndim == 0:
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __reduce_ex__(self, protocol):
        raise TypeError("tapegrad: tg.save and pickle do not take complex tensors; save tg.view_as_real(x)")

    def __deepcopy__(self, memo):
        return ComplexTensor._from_pair(self._r.__deepcopy__(memo))

    # -- autograd: that of the pair tensor ----------------------------------------------
    @property
    def requires_grad(self):
        return self._r.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self._r.requires_grad = flag

    def requires_grad_(self, requires_grad=True):
        self._r.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self):
        return self._r.is_leaf

    @property
    def grad_fn(self):
        return self._r.grad_fn

    @property
    def grad(self):
        g = self._r.grad
        return None if g is None else ComplexTensor._from_pair(g)

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, ComplexTensor):
                raise RuntimeError("attempting to assign a gradient with dtype '%s' to a tensor with grad_dtype "
                                   "'%s'" % (value.dtype, self.dtype))
            value = value._r
        self._r.grad = value

    @property
    def retains_grad(self):
        return self._r.retains_grad

    def retain_grad(self):
        self._r.retain_grad()

    def register_hook(self, hook):
        def on_pair(g):
            r = hook(ComplexTensor._from_pair(g))
            return None if r is None else _pair(r, g.dtype)
        return self._r.register_hook(on_pair)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        if gradient is None:
            raise RuntimeError("grad can be implicitly created only for real scalar outputs")
        from .autograd.api import backward
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self):
        return ComplexTensor._from_pair(self._r.detach())

    def clone(self, *, memory_format=None):
        return ComplexTensor._from_pair(self._r.clone())

    def contiguous(self, memory_format=None):
        return ComplexTensor._from_pair(self._r.contiguous())

    def to(self, *args, **kwargs):
        dtype = kwargs.pop("dtype", None)
        for a in args:
            if isinstance(a, np.dtype) or (isinstance(a, type) and issubclass(a, np.generic)):
                dtype = np.dtype(a)
            elif isinstance(a, Tensor):
                dtype = a.dtype
        if dtype is None or np.dtype(dtype) == self.dtype:
            return self
        dtype = np.dtype(dtype)
        if dtype.kind == "c":
            return ComplexTensor._from_pair(self._r.to(_REAL_OF[dtype]))
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=2)
        return self.real.to(dtype)

    def type(self, dtype=None):
        if dtype is None:
            return "tapegrad.%sTensor" % ("ComplexDouble" if self.dtype == np.complex128 else "ComplexFloat")
        return self.to(dtype)

    def cdouble(self):
        return self.to(np.complex128)

    def cfloat(self):
        return self.to(np.complex64)

    # -- elementwise ---------------------------------------------------------------------
    @property
    def real(self):
        return self._r[..., 0]

    @property
    def imag(self):
        return self._r[..., 1]

    def conj(self):
        return conj(self)

    conj_physical = conj

    def resolve_conj(self):
        return self

    resolve_neg = resolve_conj

    def is_conj(self):
        return False

    def abs(self):
        return abs(self)

    __abs__ = abs
    absolute = abs

    def angle(self):
        return angle(self)

    def exp(self):
        return exp(self)

    def __neg__(self):
        return ComplexTensor._from_pair(-self._r)

    neg = negative = __neg__

    def __pos__(self):
        return self

    def __add__(self, other):
        return add(self, other)

    def __radd__(self, other):
        return add(other, self)

    def __sub__(self, other):
        return sub(self, other)

    def __rsub__(self, other):
        return sub(other, self)

    def __mul__(self, other):
        return mul(self, other)

    def __rmul__(self, other):
        return mul(other, self)

    def __truediv__(self, other):
        return div(self, other)

    def __rtruediv__(self, other):
        return div(other, self)

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __pow__(self, exponent):
        return pow(self, exponent)

    def __eq__(self, other):
        return _equal(self, other, np.equal)

    def __ne__(self, other):
        return _equal(self, other, np.not_equal)

    def add(self, other, *, alpha=1):
        return add(self, other, alpha=alpha)

    def sub(self, other, *, alpha=1):
        return sub(self, other, alpha=alpha)

    def mul(self, other):
        return mul(self, other)

    def div(self, other):
        return div(self, other)

    multiply, divide, subtract, true_divide = mul, div, sub, div

    def matmul(self, other):
        return matmul(self, other)

    def pow(self, exponent):
        return pow(self, exponent)

    # -- in place: the pair tensor written in place (its version bumped, its autograd as any write)
    def _assign(self, value):
        v = _pair(value, self._r.dtype)
        if v.dtype != self._r.dtype:
            v = v.to(self._r.dtype)
        self._r.copy_(F.broadcast_to(v, self._r.shape))
        return self

    def __iadd__(self, other):
        return self._assign(add(self, other))

    def __isub__(self, other):
        return self._assign(sub(self, other))

    def __imul__(self, other):
        return self._assign(mul(self, other))

    def __itruediv__(self, other):
        return self._assign(div(self, other))

    def add_(self, other, *, alpha=1):
        return self._assign(add(self, other, alpha=alpha))

    def sub_(self, other, *, alpha=1):
        return self._assign(sub(self, other, alpha=alpha))

    def mul_(self, other):
        return self._assign(mul(self, other))

    def div_(self, other):
        return self._assign(div(self, other))

    def copy_(self, src, non_blocking=False):
        return self._assign(src)

    def fill_(self, value):
        return self._assign(value)

    def zero_(self):
        return self._assign(0)

    # -- reductions -----------------------------------------------------------------------
    def sum(self, dim=None, keepdim=False, *, dtype=None):
        return sum(self, dim, keepdim)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        return mean(self, dim, keepdim)

    # -- shapes ---------------------------------------------------------------------------
    def reshape(self, *shape):
        return reshape(self, _shape_args(shape))

    def view(self, *shape):
        shape = _shape_args(shape)
        if isinstance(shape, np.dtype) or (len(shape) == 1 and not isinstance(shape[0], int)):
            raise TypeError("tapegrad: view(dtype) of a complex tensor is not supported; use tg.view_as_real")
        return ComplexTensor._from_pair(self._r.view(tuple(shape) + (2,)))

    def view_as(self, other):
        return self.view(*other.shape)

    def reshape_as(self, other):
        return self.reshape(*other.shape)

    def expand(self, *sizes):
        sizes = _shape_args(sizes)
        return ComplexTensor._from_pair(self._r.expand(tuple(sizes) + (2,)))

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:
            return self.reshape(1)
        s, e = _cdim(start_dim, self.ndim), _cdim(end_dim, self.ndim)
        return ComplexTensor._from_pair(self._r.flatten(s, e))

    def unsqueeze(self, dim):
        d = _cdim(dim, self.ndim + 1)
        return ComplexTensor._from_pair(self._r.unsqueeze(d))

    def squeeze(self, dim=None):
        dims = [d for d in _cdims(dim, self.ndim) if self.shape[d] == 1]
        r = self._r
        for d in sorted(dims, reverse=True):
            r = r.squeeze(d)
        return ComplexTensor._from_pair(r)

    def transpose(self, dim0, dim1):
        a, b = _cdim(dim0, self.ndim), _cdim(dim1, self.ndim)
        return ComplexTensor._from_pair(self._r.transpose(a, b))

    swapaxes = swapdims = transpose

    def permute(self, *dims):
        dims = _shape_args(dims)
        if len(dims) != self.ndim:
            raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does not match "
                               "the length of the desired ordering of dimensions i.e. input.dim() = %d is not "
                               "equal to len(dims) = %d" % (self.ndim, len(dims)))
        return ComplexTensor._from_pair(self._r.permute(*(_cdims(dims, self.ndim) + [self.ndim])))

    def t(self):
        if self.ndim > 2:
            raise RuntimeError("t() expects a tensor with <= 2 dimensions, but self is %dD" % self.ndim)
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def T(self):
        return self.permute(*range(self.ndim - 1, -1, -1))

    @property
    def mT(self):
        if self.ndim < 2:
            raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got %d-D tensor."
                               % self.ndim)
        return self.transpose(-2, -1)

    @property
    def mH(self):
        return self.mT.conj()

    H = mH

    def adjoint(self):
        return self.mH

    def flip(self, *dims):
        dims = _shape_args(dims)
        return ComplexTensor._from_pair(_sh.flip(self._r, _cdims(dims, self.ndim)))

    def roll(self, shifts, dims=None):
        return roll(self, shifts, dims)

    def __getitem__(self, idx):
        return ComplexTensor._from_pair(self._r[_pair_index(idx)])

    def __setitem__(self, idx, value):
        self._r[_pair_index(idx)] = _pair(value, self._r.dtype)

    def diagonal(self, offset=0, dim1=0, dim2=1):
        a, b = _cdim(dim1, self.ndim), _cdim(dim2, self.ndim)
        d = F.diagonal(self._r, offset, a, b)       # (..., 2, k): the pair axis stays before the diagonal
        return ComplexTensor._from_pair(F.transpose(d, -1, -2))


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _pair_index(idx):
    """An index of a complex tensor as an index of its pair tensor (the pair axis kept)."""
    if isinstance(idx, ComplexTensor):
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if not isinstance(idx, tuple):
        idx = (idx,)
    if builtins.any(isinstance(i, ComplexTensor) for i in idx):
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return idx + (slice(None),)


# -- making and taking apart -----------------------------------------------------------------
def is_complex(input):
    if not isinstance(input, Tensor):
        raise TypeError("is_complex(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    return isinstance(input, ComplexTensor)


def _real_dtype(t):
    """The real dtype of the pair tensor a real tensor ``t`` joins: its own if floating,
    else the default."""
    dt = t.dtype
    return dt if dt.kind == "f" and dt != np.float16 else np.dtype(F.get_default_dtype())


def _pair(x, like_dtype=None):
    """``x`` (a complex or real tensor, a number, an array) as a real pair tensor of
    shape ``x.shape + (2,)``."""
    if isinstance(x, ComplexTensor):
        return x._r
    if isinstance(x, Tensor):
        if x.dtype.kind not in "biuf":
            raise TypeError(UNSUPPORTED)
        rdt = _real_dtype(x)
        if like_dtype is not None and x.dtype.kind != "f":
            rdt = like_dtype
        xr = x if x.dtype == rdt else x.to(rdt)
        return F.stack([xr, Tensor._const(np.zeros(xr.shape, xr.dtype))], -1)
    if isinstance(x, numbers.Number) or isinstance(x, np.ndarray) or isinstance(x, np.generic):
        a = np.asarray(x)
        if a.dtype.kind not in "biufc":
            raise TypeError("unsupported operand: %s" % type(x).__name__)
        dt = like_dtype if like_dtype is not None else np.dtype(F.get_default_dtype())
        if isinstance(x, np.ndarray) and a.dtype.kind in "fc" and like_dtype is None:
            dt = _REAL_OF.get(a.dtype, a.dtype if a.dtype.kind == "f" else dt)
        c = a.astype(np.complex128)
        return Tensor._const(np.ascontiguousarray(np.stack([c.real, c.imag], -1).astype(dt)))
    raise TypeError("unsupported operand type: %s" % type(x).__name__)


def _wrap(r):
    return ComplexTensor._from_pair(r)


def _result_real_dtype(a, b):
    """The real dtype of the pair result of a binary op on ``a`` and ``b``: PyTorch's
    promotion (a tensor wins over a number; complex64 with float64 gives complex128)."""
    def of(x):
        if isinstance(x, ComplexTensor):
            return x._r.dtype, True
        if isinstance(x, Tensor):
            return (x.dtype if x.dtype.kind == "f" else None), True
        return None, False
    (da, ta), (db, tb) = of(a), of(b)
    cands = [d for d, t in ((da, ta), (db, tb)) if d is not None and t]
    if not cands:
        return np.dtype(F.get_default_dtype())
    return np.result_type(*cands)


def _operands(a, b):
    dt = _result_real_dtype(a, b)
    pa, pb = _pair(a, dt), _pair(b, dt)
    if pa.dtype != dt:
        pa = pa.to(dt)
    if pb.dtype != dt:
        pb = pb.to(dt)
    return pa, pb


def _is_real_operand(x):
    """A real tensor or real number: multiplying by it scales both parts."""
    if isinstance(x, ComplexTensor):
        return False
    if isinstance(x, Tensor):
        return x.dtype.kind in "biuf"
    return isinstance(x, (numbers.Real, np.floating, np.integer)) and not isinstance(x, builtins.complex)


def _scale(c, x):
    """complex ``c`` times real ``x`` (tensor or number), on the pair."""
    dt = _result_real_dtype(c, x)
    r = c._r if c._r.dtype == dt else c._r.to(dt)
    if isinstance(x, Tensor):
        xr = x if x.dtype == dt else x.to(dt)
        return _wrap(r * F.unsqueeze(xr, -1))
    return _wrap(r * x)


def add(input, other, *, alpha=1, out=None):
    if out is not None:
        raise TypeError("tapegrad: out= is not supported (tapegrad ops return new tensors)")
    if alpha != 1:
        other = mul(other, alpha)
    pa, pb = _operands(input, other)
    return _wrap(pa + pb)


def sub(input, other, *, alpha=1, out=None):
    if out is not None:
        raise TypeError("tapegrad: out= is not supported (tapegrad ops return new tensors)")
    if alpha != 1:
        other = mul(other, alpha)
    pa, pb = _operands(input, other)
    return _wrap(pa - pb)


def mul(input, other, *, out=None):
    if out is not None:
        raise TypeError("tapegrad: out= is not supported (tapegrad ops return new tensors)")
    if isinstance(input, ComplexTensor) and _is_real_operand(other):
        return _scale(input, other)
    if isinstance(other, ComplexTensor) and _is_real_operand(input):
        return _scale(other, input)
    pa, pb = _operands(input, other)
    ar, ai, br, bi = pa[..., 0], pa[..., 1], pb[..., 0], pb[..., 1]
    return _wrap(F.stack([ar * br - ai * bi, ar * bi + ai * br], -1))


def div(input, other, *, rounding_mode=None, out=None):
    if out is not None:
        raise TypeError("tapegrad: out= is not supported (tapegrad ops return new tensors)")
    if rounding_mode is not None:
        raise RuntimeError("div_floor_cpu not implemented for 'Complex%s'"
                           % ("Double" if _result_real_dtype(input, other) == np.float64 else "Float"))
    if isinstance(input, ComplexTensor) and _is_real_operand(other):
        if isinstance(other, Tensor):
            dt = _result_real_dtype(input, other)
            o = other if other.dtype == dt else other.to(dt)
            r = input._r if input._r.dtype == dt else input._r.to(dt)
            return _wrap(r / F.unsqueeze(o, -1))
        return _wrap(input._r / other)
    pa, pb = _operands(input, other)
    ar, ai, br, bi = pa[..., 0], pa[..., 1], pb[..., 0], pb[..., 1]
    den = br * br + bi * bi
    return _wrap(F.stack([(ar * br + ai * bi) / den, (ai * br - ar * bi) / den], -1))


def pow(input, exponent):
    """A complex tensor to a non-negative integer power (repeated products); other
    exponents are refused."""
    if isinstance(exponent, (int, np.integer)) and not isinstance(exponent, bool) and 0 <= exponent <= 64:
        result, base, e = None, input, int(exponent)
        if e == 0:
            return _wrap(_pair(Tensor._const(np.ones(input.shape, input._r.dtype))))
        while e:
            if e & 1:
                result = base if result is None else mul(result, base)
            e >>= 1
            if e:
                base = mul(base, base)
        return result
    raise TypeError("tapegrad: a complex tensor's power takes a non-negative integer exponent (at most 64)")


def _equal(a, b, ufunc):
    try:
        pa, pb = _operands(a, b)
    except TypeError:
        return NotImplemented
    a, b = pa.detach().numpy(), pb.detach().numpy()
    same = np.logical_and(a[..., 0] == b[..., 0], a[..., 1] == b[..., 1])
    return Tensor._wrap(same if ufunc is np.equal else np.logical_not(same))


def conj(input):
    if not isinstance(input, ComplexTensor):
        return input
    return _wrap(input._r * Tensor._const(np.array([1.0, -1.0], input._r.dtype)))


conj_physical = conj


def resolve_conj(input):
    return input


resolve_neg = resolve_conj


def real(input):
    if isinstance(input, ComplexTensor):
        return input.real
    return input


def imag(input):
    if isinstance(input, ComplexTensor):
        return input.imag
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def view_as_real(input):
    """The real tensor of shape ``input.shape + (2,)`` under complex ``input`` (itself,
    not a copy): its last dimension holds the real and imaginary parts."""
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return input._r


def view_as_complex(input):
    """The complex tensor whose (real, imaginary) pairs are the last dimension, of size
    2, of the float32 or float64 tensor ``input`` (sharing its memory)."""
    if isinstance(input, ComplexTensor):
        raise RuntimeError("view_as_complex is only supported for floating point tensors, but got a tensor of "
                           "scalar type: Complex%s" % ("Double" if input.dtype == np.complex128 else "Float"))
    if not isinstance(input, Tensor):
        raise TypeError("view_as_complex(): argument 'input' (position 1) must be Tensor, not %s"
                        % type(input).__name__)
    if input.dtype not in _COMPLEX_OF:
        raise RuntimeError("view_as_complex is only supported for float and double tensors, but got a tensor of "
                           "scalar type: %s" % _torch_dtype_name(input.dtype))
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    # a recorded view when it requires grad: the complex tensor is not a leaf, as in PyTorch
    return _wrap(input.view(input.shape) if input.requires_grad else input)


def _torch_dtype_name(dt):
    from .core.dtypes import torch_name
    return torch_name(dt)


def _two_real(fname, names, x, y, out):
    """PyTorch's checks of complex() and polar(): two float tensors of one dtype."""
    if out is not None:
        raise TypeError("tapegrad: out= is not supported (tapegrad ops return new tensors)")
    for name, v in zip(names, (x, y)):
        if not isinstance(v, Tensor) or isinstance(v, ComplexTensor):
            raise TypeError("%s(): argument '%s' must be a real Tensor" % (fname, name))
    for v in (x, y):
        if v.dtype not in _COMPLEX_OF:
            raise RuntimeError("Expected both inputs to be Half, Float or Double tensors but got %s and %s"
                               % (_torch_dtype_name(x.dtype), _torch_dtype_name(y.dtype)))
    if x.dtype != y.dtype:
        raise RuntimeError("Expected object of scalar type %s but got scalar type %s for second argument"
                           % (_torch_dtype_name(x.dtype), _torch_dtype_name(y.dtype)))


def complex(real, imag, *, out=None):
    """The complex tensor ``real + i imag`` (two float tensors of one dtype, broadcast)."""
    _two_real("complex", ("real", "imag"), real, imag, out)
    shape = np.broadcast_shapes(real.shape, imag.shape)
    return _wrap(F.stack([F.broadcast_to(real, shape), F.broadcast_to(imag, shape)], -1))


def polar(abs, angle, *, out=None):
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``."""
    _two_real("polar", ("abs", "angle"), abs, angle, out)
    return _wrap(F.stack([abs * F.cos(angle), abs * F.sin(angle)], -1))


def from_numpy_complex(arr, requires_grad=False):
    """A complex tensor of a complex NumPy array (a copy, as the pair tensor's layout
    differs from a strided complex array's only when it is contiguous)."""
    arr = np.asarray(arr)
    rdt = _REAL_OF.get(arr.dtype)
    if rdt is None:
        raise TypeError("tapegrad supports complex64 and complex128, not %s" % arr.dtype)
    pair = np.ascontiguousarray(arr).view(rdt).reshape(arr.shape + (2,)) if arr.flags.c_contiguous else \
        np.stack([arr.real, arr.imag], -1).astype(rdt)
    r = Tensor._const(pair)
    if requires_grad:
        r.requires_grad_(True)
    return _wrap(r)


# -- abs and angle: host ops, for PyTorch's zero gradient at 0 ----------------------------------
def _abs_fwd(xs, ints, f):
    return np.hypot(xs[0][..., 0], xs[0][..., 1])


def _abs_rev(xs, y, g, ints, f, needs):
    safe = F.where(y == 0, Tensor._const(np.ones((), y.dtype)), y)
    return [xs[0] * F.unsqueeze(g / safe, -1)]


def _over(v, d):
    """``v / d``, zero where ``d`` is (the gradients' zero at 0, as PyTorch)."""
    return np.divide(v, d, out=np.zeros(np.broadcast_shapes(np.shape(v), np.shape(d))), where=d != 0)


# forward mode: d|z| = (a da + b db) / |z|; the adjoint g (a, b) / |z| moves with
# d((a, b) / |z|) = (da, db) / |z| - (a, b) d|z| / |z|^2
_ABS = _h.host_op("complex_abs", "AbsBackward0", _abs_fwd, _abs_rev, _h.SAVE_A | _h.SAVE_OUT, forward_mode=(
    lambda xs, y, ts, ints, f: (_over(xs[0], y[..., None]) * ts[0]).sum(-1),
    lambda xs, y, G, ints, f, needs: [_over(xs[0], y[..., None]) * G[..., None]],
    lambda xs, y, ts, ty, g, ints, f, needs: [g[..., None] * (
        _over(ts[0], y[..., None]) - _over(xs[0] * ty[..., None], (y * y)[..., None]))]))


def abs(input):
    if not isinstance(input, ComplexTensor):
        return F.abs(input)
    r = input._r
    return _h.record(_ABS, [r], _abs_fwd([r._data], (), None))


def _angle_fwd(xs, ints, f):
    return np.arctan2(xs[0][..., 1], xs[0][..., 0])


def _angle_rev(xs, y, g, ints, f, needs):
    x = xs[0]
    re, im = x[..., 0], x[..., 1]
    s = re * re + im * im
    safe = F.where(s == 0, Tensor._const(np.ones((), s.dtype)), s)
    q = g / safe
    return [F.stack([-im * q, re * q], -1)]


def _angle_direction(x):
    """(-b, a) / (a^2 + b^2): the gradient of atan2(b, a), zero at 0."""
    return _over(np.stack([-x[..., 1], x[..., 0]], -1), (x * x).sum(-1)[..., None])


def _angle_curvature(xs, y, ts, ty, g, ints, f, needs):
    x, t = xs[0], ts[0]
    s = (x * x).sum(-1)[..., None]
    turned = np.stack([-t[..., 1], t[..., 0]], -1)
    return [g[..., None] * (_over(turned, s) - _angle_direction(x) * _over(2 * (x * t).sum(-1)[..., None], s))]


# forward mode: d angle = (a db - b da) / (a^2 + b^2); the adjoint is g times that gradient
_ANGLE = _h.host_op("complex_angle", "AngleBackward0", _angle_fwd, _angle_rev, _h.SAVE_A, forward_mode=(
    lambda xs, y, ts, ints, f: (_angle_direction(xs[0]) * ts[0]).sum(-1),
    lambda xs, y, G, ints, f, needs: [_angle_direction(xs[0]) * G[..., None]],
    _angle_curvature))


_REAL_ANGLE = _h.host_op("real_angle", "AngleBackward0", lambda xs, ints, f: np.angle(xs[0]).astype(xs[0].dtype),
                         lambda xs, y, g, ints, f, needs: [Tensor._const(np.zeros(g.shape, g.dtype))], 0,
                         forward_mode=(      # (piecewise constant: no tangent, zero gradient)
    lambda xs, y, ts, ints, f: None,
    lambda xs, y, G, ints, f, needs: [np.zeros(G.shape)],
    lambda xs, y, ts, ty, g, ints, f, needs: [None]))


def angle(input):
    if not isinstance(input, ComplexTensor):
        if not isinstance(input, Tensor):
            raise TypeError("angle(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
        x = input if input.dtype.kind == "f" else input.to(F.get_default_dtype())
        if not x.requires_grad:
            return Tensor._wrap(np.angle(x.numpy()).astype(x.dtype))
        return _h.record(_REAL_ANGLE, [x], np.angle(x._data).astype(x.dtype))
    r = input._r
    return _h.record(_ANGLE, [r], _angle_fwd([r._data], (), None))


def exp(input):
    if not isinstance(input, ComplexTensor):
        return F.exp(input)
    r = input._r
    e = F.exp(r[..., 0])
    return _wrap(F.stack([e * F.cos(r[..., 1]), e * F.sin(r[..., 1])], -1))


# -- reductions, shapes, products --------------------------------------------------------------
def _reduction(real_fn):
    def fn(input, dim=None, keepdim=False, *, dtype=None):
        if not isinstance(input, ComplexTensor):
            return real_fn(input, dim, keepdim, dtype=dtype) if dim is not None else real_fn(input, dtype=dtype)
        dims = _cdims(dim, input.ndim) if dim is not None else list(range(input.ndim))
        if not dims:
            return input.clone()
        return _wrap(real_fn(input._r, dims, keepdim))
    fn.__name__ = real_fn.__name__
    return fn


sum = _reduction(F.sum)
mean = _reduction(F.mean)


def reshape(input, shape):
    if not isinstance(input, ComplexTensor):
        return F.reshape(input, shape)
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    return _wrap(F.reshape(input._r, tuple(shape) + (2,)))


def _joined(tensors, dim, fn, name):
    tensors = list(tensors)
    if not builtins.any(isinstance(t, ComplexTensor) for t in tensors):
        return fn(tensors, dim)
    dt = np.result_type(*[t._r.dtype if isinstance(t, ComplexTensor) else _real_dtype(t) for t in tensors])
    pairs = [p if p.dtype == dt else p.to(dt) for p in (_pair(t, dt) for t in tensors)]
    nd = tensors[0].ndim + (1 if name == "stack" else 0)
    return _wrap(fn(pairs, _cdim(dim, nd)))


def cat(tensors, dim=0, *, out=None):
    if out is not None:
        raise TypeError("tapegrad: out= is not supported (tapegrad ops return new tensors)")
    return _joined(tensors, dim, F.cat, "cat")


def stack(tensors, dim=0, *, out=None):
    if out is not None:
        raise TypeError("tapegrad: out= is not supported (tapegrad ops return new tensors)")
    return _joined(tensors, dim, F.stack, "stack")


def matmul(input, other, *, out=None):
    if out is not None:
        raise TypeError("tapegrad: out= is not supported (tapegrad ops return new tensors)")
    if not isinstance(input, ComplexTensor) and not isinstance(other, ComplexTensor):
        return F.matmul(input, other)
    for x in (input, other):
        if not isinstance(x, Tensor):
            raise TypeError("matmul(): argument must be Tensor, not %s" % type(x).__name__)
    a_c, b_c = isinstance(input, ComplexTensor), isinstance(other, ComplexTensor)
    parts = []
    if a_c != b_c or input.dtype != other.dtype:      # (PyTorch's matmul does not promote)
        raise RuntimeError("expected m1 and m2 to have the same dtype, but got: %s != %s"
                           % (_cpp(input.dtype), _cpp(other.dtype)))
    for x in (input, other):
        r = x._r
        parts.append((r[..., 0], r[..., 1]))
    (ar, ai), (br, bi) = parts
    re = F.matmul(ar, br) - F.matmul(ai, bi)
    im = F.matmul(ar, bi) + F.matmul(ai, br)
    return _wrap(F.stack([re, im], -1))


def _cpp(dt):
    if dt.kind == "c":
        return "c10::complex<%s>" % ("double" if dt == np.complex128 else "float")
    from .core.dtypes import cpp_name
    return cpp_name(dt)


def roll(input, shifts, dims=None):
    if not isinstance(input, ComplexTensor):
        return F.roll(input, shifts, dims)
    if dims is None:
        return roll(input.flatten(), shifts, 0).reshape(input.shape)
    if isinstance(dims, (int, np.integer)):
        dims = [dims]
    return _wrap(F.roll(input._r, shifts, _cdims(dims, input.ndim)))


def where(condition, input=None, other=None):
    if not (isinstance(input, ComplexTensor) or isinstance(other, ComplexTensor)
            or isinstance(input, builtins.complex) or isinstance(other, builtins.complex)):
        return F.where(condition, input, other) if input is not None or other is not None else F.where(condition)
    pa, pb = _operands(input, other)
    return _wrap(F.where(F.unsqueeze(condition, -1), pa, pb))


# -- the public names that dispatch on a complex argument ------------------------------------
_COMPLEX_TYPES = None     # (ComplexTensor, complex, np.complex128, np.complex64): set below


def _dispatching(real_fn, complex_fn, arity=1, sequence=False):
    """``real_fn``, or ``complex_fn`` when one of its first ``arity`` arguments is a
    complex tensor or number (``sequence``: the first argument is a list of tensors).
    Exact type tests only, so a real call pays one or two of them."""
    C = _COMPLEX_TYPES

    def complex_in_keywords(kwargs):
        for v in kwargs.values():
            if type(v) in C or (sequence and isinstance(v, (list, tuple)) and builtins.any(type(t) in C for t in v)):
                return True
        return False
    if sequence:
        def fn(*args, **kwargs):
            if args:
                for t in args[0]:
                    if type(t) in C:
                        return complex_fn(*args, **kwargs)
            if kwargs and complex_in_keywords(kwargs):
                return complex_fn(*args, **kwargs)
            return real_fn(*args, **kwargs)
    elif arity == 1:
        def fn(*args, **kwargs):
            if (args and type(args[0]) in C) or (kwargs and complex_in_keywords(kwargs)):
                return complex_fn(*args, **kwargs)
            return real_fn(*args, **kwargs)
    else:
        def fn(*args, **kwargs):
            for a in args[:arity]:
                if type(a) in C:
                    return complex_fn(*args, **kwargs)
            if kwargs and complex_in_keywords(kwargs):
                return complex_fn(*args, **kwargs)
            return real_fn(*args, **kwargs)
    fn.__name__ = real_fn.__name__
    fn.__qualname__ = getattr(real_fn, "__qualname__", real_fn.__name__)
    fn.__doc__ = real_fn.__doc__
    fn.__wrapped__ = real_fn
    return fn


def public_names(namespace):
    """The names of ``tapegrad`` that take complex tensors, made to dispatch (called
    by ``tapegrad/__init__.py`` over its own namespace)."""
    global _COMPLEX_TYPES
    _COMPLEX_TYPES = frozenset((ComplexTensor, builtins.complex, np.complex128, np.complex64))
    binary = {"add": add, "sub": sub, "subtract": sub, "mul": mul, "multiply": mul, "div": div, "divide": div,
              "true_divide": div, "matmul": matmul, "pow": pow}
    unary = {"abs": abs, "absolute": abs, "exp": exp, "sum": sum, "mean": mean, "reshape": reshape, "roll": roll,
             "neg": lambda x: -x, "negative": lambda x: -x}
    for name in ("flatten", "unsqueeze", "squeeze", "transpose", "permute", "t", "flip", "diagonal",
                 "clone", "detach", "swapaxes", "swapdims"):
        method = getattr(ComplexTensor, name)
        unary[name] = (lambda _m: lambda x, *a, **k: _m(x, *a, **k))(method)
    for table, kw in ((binary, dict(arity=2)), (unary, {}),
                      ({"cat": cat, "concat": cat, "concatenate": cat, "stack": stack}, dict(sequence=True)),
                      ({"where": where}, dict(arity=3))):
        for name, cfn in table.items():
            if name in namespace:
                namespace[name] = _dispatching(namespace[name], cfn, **kw)
    namespace.update({n: globals()[n] for n in __all__ if n != "ComplexTensor"})
    namespace.update(complex128=np.dtype(np.complex128), cdouble=np.dtype(np.complex128),
                     complex64=np.dtype(np.complex64), cfloat=np.dtype(np.complex64))


def _to_complex(x, dtype):
    """A real tensor in a complex dtype (``Tensor.to``): its gradient is the real part."""
    rdt = _REAL_OF[np.dtype(dtype)]
    return _wrap(_pair(x if x.dtype == rdt else F.to_dtype(x, rdt)))


_sh.COMPLEX_CAST[0] = _to_complex
F.COMPLEX_ARITH.update(add=add, sub=sub, mul=mul, div=div, pow=pow)


class _RealMethods:
    """The complex methods of a real tensor, as PyTorch's: ``real`` and ``conj`` are
    the tensor itself, ``imag`` raises, ``angle`` is 0 or pi."""
    real = property(lambda self: self)
    imag = property(imag)
    conj = conj_physical = resolve_conj = resolve_neg = lambda self: self
    angle = angle
    is_complex = lambda self: False
    is_conj = is_neg = lambda self: False


F._bind(Tensor, _RealMethods)
F._bind(ComplexTensor, type("_Restore", (), {n: ComplexTensor.__dict__[n] for n in (
    "real", "imag", "conj", "conj_physical", "resolve_conj", "resolve_neg", "angle", "is_complex", "is_conj")}))


def pair_array_to_complex(a):
    """The complex array of a pair array (..., 2)."""
    out = a[..., 0] + 1j * a[..., 1]
    return out.astype(np.complex64) if a.dtype == np.float32 else out


def complex_array_to_pair(z, rdt):
    return np.ascontiguousarray(np.stack([z.real, z.imag], -1).astype(rdt))
