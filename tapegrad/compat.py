"""PyTorch's spellings that training scripts use on the CPU, around the tensor rather
than in it: the legacy tensor types (``tg.FloatTensor([1, 2])``,
``isinstance(x, tg.LongTensor)``, ``x.type(tg.DoubleTensor)``), storage queries
(``stride``, ``storage_offset``, ``data_ptr``, ``is_contiguous``...), ``as_strided``,
``promote_types``, and the default dtype and device.

A tensor's *storage* is the NumPy array that owns its memory (a tensor made by
slicing, transposing or viewing another shares its storage); strides and offsets
count elements, as in PyTorch.
"""
import warnings

import numpy as np

from . import functions as _f
from .core import promotion as _pr
from .core.dtypes import tensor_type_name, torch_name
from .core.tensor import Tensor, _wrap_dim, check_device, device, from_data
from .ops import shape as _sh

__all__ = ["DoubleTensor", "FloatTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
           "ByteTensor", "BoolTensor", "as_strided", "promote_types", "set_default_dtype", "set_default_device",
           "get_default_device", "set_default_tensor_type", "is_storage", "typename", "bfloat16"]

_PREFIXES = ("tapegrad.", "torch.")


# -- the legacy tensor types ---------------------------------------------------------------
class _TensorType(type):
    """The metaclass of the legacy types: ``isinstance(x, tg.FloatTensor)`` is whether
    ``x`` is a float32 tensor, as in PyTorch; calling the type makes a tensor."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __call__(cls, *args, device=None):
        if device is not None:
            check_device(device)
        dt = cls.dtype
        if not args:
            return Tensor._const(np.empty((0,), dt))
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)) for a in args):
            for a in args:
                if a < 0:
                    raise RuntimeError("Trying to create tensor with negative dimension %d: %s"
                                       % (a, [int(v) for v in args]))
            return Tensor._const(np.zeros(tuple(int(a) for a in args), dt))
        if len(args) == 1:
            data = args[0]
            if isinstance(data, Tensor):
                if data.dtype != dt:
                    raise TypeError("expected %s (got %s)" % (_type_name(dt), _type_name(data.dtype)))
                return Tensor(data)         # (an alias: shares storage and version)
            if isinstance(data, (list, tuple)) or (isinstance(data, np.ndarray) and data.ndim):
                return from_data(np.asarray(data).astype(dt) if isinstance(data, np.ndarray)
                                 else _cast_list(data, dt), dt)
            raise TypeError("new(): data must be a sequence (got %s)" % type(data).__name__)
        pos, bad = next((i, a) for i, a in enumerate(args, 1) if not isinstance(a, (int, np.integer)))
        raise TypeError("new(): argument 'size' failed to unpack the object at pos %d with error \"type must be "
                        "tuple of ints,but got %s\"" % (pos, type(bad).__name__))

    def __repr__(cls):
        return "<class 'tapegrad.%s'>" % cls.__name__


def _cast_list(data, dt):
    """Nested lists as ``dt`` (PyTorch's legacy constructors truncate floats for an integer type)."""
    return np.asarray(data).astype(dt) if dt.kind in "iub" else data


def _type_name(dt):
    return "tapegrad." + tensor_type_name(dt)


def _legacy_type(dt):
    return _TensorType(tensor_type_name(dt), (), {"dtype": dt, "__module__": "tapegrad",
                                                  "__doc__": "Legacy constructor of %s tensors (PyTorch's "
                                                             "``torch.%s``)." % (dt.name, tensor_type_name(dt))})


DoubleTensor = _legacy_type(np.dtype(np.float64))
FloatTensor = _legacy_type(np.dtype(np.float32))
HalfTensor = _legacy_type(np.dtype(np.float16))
LongTensor = _legacy_type(np.dtype(np.int64))
IntTensor = _legacy_type(np.dtype(np.int32))
ShortTensor = _legacy_type(np.dtype(np.int16))
CharTensor = _legacy_type(np.dtype(np.int8))
ByteTensor = _legacy_type(np.dtype(np.uint8))
BoolTensor = _legacy_type(np.dtype(np.bool_))
_TYPES = {t.__name__: t for t in (DoubleTensor, FloatTensor, HalfTensor, LongTensor, IntTensor, ShortTensor,
                                  CharTensor, ByteTensor, BoolTensor)}


def _dtype_of_type_name(name):
    """'torch.FloatTensor' / 'tapegrad.FloatTensor' -> float32 (CUDA types: PyTorch's error without CUDA)."""
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            rest = name[len(prefix):]
            if rest.startswith("cuda."):
                check_device("cuda")
            if rest in _TYPES:
                return _TYPES[rest].dtype
    raise ValueError("invalid type: '%s'" % name)


def typename(obj, /):
    """``torch.typename``: a tensor's legacy type name (``tapegrad.DoubleTensor``), else
    the qualified name of the object's class."""
    from .core.tensor import typename as _typename
    return _typename(obj)


# -- Tensor methods --------------------------------------------------------------------------
def _storage(arr):
    """``(owner, offset)``: the array owning ``arr``'s memory, as a flat array of
    ``arr``'s dtype, and ``arr``'s first element's index in it; ``arr`` itself (flat)
    when it owns its memory or its owner cannot be read that way."""
    owner = arr
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    if owner is not arr and owner.dtype == arr.dtype and owner.flags.c_contiguous and arr.size:
        delta = arr.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
        if delta % arr.itemsize == 0 and 0 <= delta < owner.nbytes:
            return owner.reshape(-1), delta // arr.itemsize
    if arr.flags.c_contiguous:
        return arr.reshape(-1), 0
    return None, 0


class _StorageMethods:
    def ndimension(self):
        """The number of dimensions (``dim()``)."""
        return self._data.ndim

    def nelement(self):
        """The number of elements (``numel()``)."""
        return self._data.size

    def element_size(self):
        """Bytes per element."""
        return self._data.itemsize

    def is_contiguous(self):
        """Whether the elements lie in memory in row-major order without gaps (sizes
        of 1 ignored, as PyTorch ignores their strides)."""
        return bool(self._data.flags.c_contiguous)

    def stride(self, dim=None):
        """The step in memory, in elements, from one index to the next along each
        dimension (of ``dim`` only, when given)."""
        d = self._data
        st = tuple(s // d.itemsize for s in d.strides)
        if dim is None:
            return st
        if d.ndim == 0:
            raise IndexError("Dimension specified as %d but tensor has no dimensions" % dim)
        return st[_wrap_dim(dim, d.ndim)]

    def storage_offset(self):
        """The index of the first element in the storage (the array owning the memory)."""
        return _storage(self._data)[1]

    def data_ptr(self):
        """The address of the first element (0 for a tensor of no elements, as PyTorch)."""
        d = self._data
        return int(d.__array_interface__["data"][0]) if d.size else 0

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """Without ``dtype``, PyTorch's legacy type name (``"torch.DoubleTensor"``: scripts
        compare it with PyTorch's strings); with one (a dtype, a legacy type, or its name
        spelled ``torch.`` or ``tapegrad.``), the tensor in that dtype (itself when it
        already is; a recorded copy otherwise, as ``to(dtype)``)."""
        if dtype is None:
            return "torch." + tensor_type_name(self.dtype)
        if isinstance(dtype, str):
            dt = _dtype_of_type_name(dtype)
        elif isinstance(dtype, _TensorType):
            dt = dtype.dtype
        elif isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
            dt = np.dtype(dtype)
        else:
            raise TypeError("type() received an invalid combination of arguments - got (%s)" % type(dtype).__name__)
        return self if dt == self.dtype else _sh.to_dtype(self, dt)

    def as_strided(self, size, stride, storage_offset=None):
        return as_strided(self, size, stride, storage_offset)


_f._bind(Tensor, _StorageMethods)


# -- as_strided --------------------------------------------------------------------------------
def _int_list(v, what):
    try:
        return tuple(int(x) for x in v)
    except TypeError:
        raise TypeError("as_strided(): argument '%s' must be tuple of ints, not %s" % (what, type(v).__name__))


def as_strided(input, size, stride, storage_offset=None):
    """A view of ``input``'s storage with the given sizes and strides (in elements),
    starting ``storage_offset`` elements in (``input.storage_offset()`` by default).

    The view must lie inside the storage.  Its gradient is recorded as a strided view
    of ``input``'s elements, so ``input`` must then be contiguous and the view must lie
    inside ``input``'s own elements (a view of a larger storage, beyond them, raises
    when ``input`` requires grad).  Elements the view repeats (a stride of 0, or
    overlapping rows) receive the sum of their gradients, as in PyTorch."""
    if not isinstance(input, Tensor):
        raise TypeError("as_strided(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    size, stride = _int_list(size, "size"), _int_list(stride, "stride")
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    for s in stride:
        if s < 0:
            raise RuntimeError("as_strided: Negative strides are not supported at the moment, got strides: %s"
                               % list(stride))
    for s in size:
        if s < 0:
            raise RuntimeError("Trying to create tensor with negative dimension %d: %s" % (s, list(size)))
    d = input._data
    flat, own_offset = _storage(d)
    offset = own_offset if storage_offset is None else int(storage_offset)
    if offset < 0:
        raise RuntimeError("Tensor: invalid storage offset %d" % offset)
    n = int(np.prod(size, dtype=np.int64))
    span = sum((a - 1) * b for a, b in zip(size, stride)) + 1 if n else 0
    storage_size = flat.size if flat is not None else d.size
    if n and offset + span > storage_size:
        item = d.itemsize
        raise RuntimeError("setStorage: sizes %s, strides %s, storage offset %d, and itemsize %d requiring a storage "
                           "size of %d are out of bounds for storage of size %d"
                           % (list(size), list(stride), offset, item, (offset + span) * item, storage_size * item))
    if flat is None:
        raise RuntimeError("as_strided: tapegrad cannot read the storage of this non-contiguous tensor; "
                           "call .contiguous() first (a new storage)")
    # the view's elements relative to input's first element: the descriptor of its gradient
    rel = offset - own_offset if n else 0
    if input.requires_grad and (not d.flags.c_contiguous or rel < 0 or rel + span > d.size):
        raise RuntimeError(
            "as_strided: the view reaches elements of the storage outside the input, which requires grad "
            "(its elements are [%d, %d) of the storage, the view's [%d, %d)); tapegrad differentiates as_strided "
            "within the input's own elements of a contiguous input" % (own_offset, own_offset + d.size, offset,
                                                                      offset + span))
    item = d.itemsize
    strides = tuple(s * item for s in stride)

    def view(a):
        # ``input``'s array: the view of its storage; any other (the geometry probe of
        # ``strided``, an array of ``input``'s shape): the same view relative to it
        if a is d:
            return np.ndarray(size, d.dtype, buffer=flat, offset=offset * item, strides=strides)
        base = a.reshape(-1)[rel:]
        return np.lib.stride_tricks.as_strided(base, size, tuple(s * a.itemsize for s in stride))
    return _sh.strided(input, view, "AsStridedBackward0", ("as_strided", size, stride, rel))


# -- dtypes and defaults -----------------------------------------------------------------------
def _need_dtype(v, pos, name, fname):
    if not (isinstance(v, np.dtype) or isinstance(v, _TensorType)):
        raise TypeError("%s(): argument '%s' (position %d) must be torch.dtype, not %s"
                        % (fname, name, pos, type(v).__name__))


def promote_types(type1, type2):
    """The smallest dtype of a kind at least as high as both (PyTorch's table: a float
    beats any integer, ``uint8`` with ``int8`` is ``int16``)."""
    _need_dtype(type1, 1, "type1", "promote_types")
    _need_dtype(type2, 2, "type2", "promote_types")
    a, b = np.dtype(type1), np.dtype(type2)
    if a.kind == "c" or b.kind == "c":
        return np.promote_types(a, b)
    return _pr.promote_types(a, b)


def set_default_dtype(d, /):
    """tapegrad's default floating-point dtype is float64 and stays so: ``float64`` is
    accepted (a no-op); another floating dtype raises NotImplementedError (pass
    ``dtype=`` to the tensors that need it); a non-float dtype raises PyTorch's TypeError."""
    if not isinstance(d, np.dtype) and not (isinstance(d, type) and issubclass(d, np.generic)):
        raise TypeError("invalid dtype object: only floating-point types are supported as the default type")
    d = np.dtype(d)
    if d.kind != "f":
        raise TypeError("only floating-point types are supported as the default type")
    if d != np.float64:
        raise NotImplementedError("tapegrad's default dtype is float64 and cannot be changed to %s; pass dtype=%s "
                                  "where a tensor should have it" % (torch_name(d).lower(), "tg." + d.name))


def set_default_tensor_type(t, /):
    """Deprecated in PyTorch for ``set_default_dtype``: ``DoubleTensor`` is accepted."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    dt = _dtype_of_type_name(t) if isinstance(t, str) else getattr(t, "dtype", None)
    if not isinstance(dt, np.dtype):
        raise TypeError("invalid type object: only floating-point types are supported as the default type")
    set_default_dtype(dt)


def set_default_device(device):
    """The CPU (or None) is tapegrad's only device and its default; another device
    raises as PyTorch built without it does."""
    if device is not None:
        check_device(device)


def get_default_device():
    """``device(type='cpu')``."""
    return device("cpu")


class _AbsentDtype:
    """A dtype PyTorch has and tapegrad cannot hold (NumPy has no bfloat16): the name
    exists, so that a script's table of dtypes loads; making a tensor of it raises
    NumPy's ``TypeError: Cannot interpret 'tapegrad.bfloat16' as a data type``."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "tapegrad." + self.name

    def __reduce__(self):
        return (_AbsentDtype, (self.name,))


bfloat16 = _AbsentDtype("bfloat16")


def is_storage(obj, /):
    """False: tapegrad has no storage objects (a tensor's storage is a NumPy array)."""
    return False
