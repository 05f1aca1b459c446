"""The Tensor type: a NumPy array plus its place on the tape.

A tensor that requires grad and was produced by a recorded operation holds its
tape (``_tape``) and slot (``_slot``); a leaf or constant gets a slot on the
current tape the first time an operation uses it (``_tape_id``/``_slot`` remember
it).  ``_ver`` is the version counter, shared by tensors that share storage, and
``_slot_version`` the version the slot was made at: a mismatch means the tensor changed
in place since, so its next use makes a fresh slot.
"""
import threading
import warnings

import numpy as np

from . import buffers as _buffers
from . import tape as _tp
from .tape import recording as _recording
from . import promotion as _pr
from .dtypes import cpp_name, tensor_type_name, torch_name
from .promotion import infer_dtype
from .registry import GRAD_FN_NAMES

_FLOATS = (np.float64, np.float32, np.float16)
DEFAULT_DTYPE = np.float64

# grad_fn's node of (tape, slot): set by tapegrad/autograd/graph.py when it is imported
# (by ``import tapegrad``), so that the core imports nothing above it
NODE_FOR = None

_NONLEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access "
    "the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See "
    "github.com/pytorch/pytorch/pull/30531 for more information.")



_DEVICE_TYPES = ("cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, lazy, vulkan, mps, "
                 "meta, hpu, mtia, privateuseone")
_KNOWN_DEVICES = frozenset(_DEVICE_TYPES.split(", "))
_NO_ACCELERATOR = "Cannot access accelerator device when none is available."
_DETACH_VIEW = ("Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) "
                "for training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and "
                "hence detach_() cannot be called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.")


class device:
    """PyTorch's ``torch.device``: a device type and an optional index.  tapegrad
    computes on the CPU only; a tensor or an operation asked for another device
    raises as PyTorch built without that device does (``check_device``)."""
    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, (int, np.integer)) and not isinstance(type, bool):
            raise RuntimeError(_NO_ACCELERATOR)
        elif not isinstance(type, str):
            raise TypeError("device() received an invalid combination of arguments - got (%s)"
                            % _builtin_type(type).__name__)
        else:
            name, sep, idx = type.partition(":")
            if name not in _KNOWN_DEVICES:
                raise RuntimeError("Expected one of %s device type at start of device string: %s"
                                   % (_DEVICE_TYPES, type))
            if sep:
                if not idx.isdigit():
                    raise RuntimeError("Invalid device string: '%s'" % type)
                if index is not None:
                    raise RuntimeError("type (string) must not include an index because index was passed "
                                       "explicitly: %s" % type)
                index = int(idx)
            type = name
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name, value):
        raise AttributeError("attribute '%s' of 'device' objects is not writable" % name)

    def __repr__(self):
        if self.index is None:
            return "device(type='%s')" % self.type
        return "device(type='%s', index=%d)" % (self.type, self.index)

    def __str__(self):
        return self.type if self.index is None else "%s:%d" % (self.type, self.index)

    def __eq__(self, other):    # (a string is not a device: ``device("cpu") == "cpu"`` is False, as in PyTorch)
        return isinstance(other, device) and other.type == self.type and other.index == self.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))


_builtin_type = type
CPU = device("cpu")


def check_device(dev):
    """The device ``dev`` names (a string, an index or a device), or PyTorch's error
    for one tapegrad does not have."""
    d = dev if isinstance(dev, device) else device(dev)
    if d.type == "cpu":
        return d
    if d.type == "cuda":
        raise AssertionError("Torch not compiled with CUDA enabled")
    if d.type == "mps":
        raise RuntimeError("PyTorch is not linked with support for mps devices")
    raise RuntimeError("tapegrad computes on the CPU only; it has no '%s' device" % d.type)


def is_float_dtype(dt):
    return dt.kind == "f"


class _Extra:
    """Fields most tensors never use, kept off the hot creation path."""
    __slots__ = ("grad", "hooks", "retains", "accnode", "base", "post_hooks", "name", "inference")

    def __init__(self):
        self.inference = False      # made in tg.inference_mode
        self.grad = None
        self.hooks = None
        self.retains = False
        self.accnode = None
        self.base = None
        self.post_hooks = None
        self.name = None


class Tensor:
    __slots__ = ("_data", "_requires_grad", "_tape_id", "_slot", "_ver", "_slot_version", "_tape", "_extra", "__weakref__")
    __array_priority__ = 1000       # ndarray <op> Tensor defers to Tensor's reflected ops

    def __init__(self, *args, device=None):
        """PyTorch's legacy constructor: ``Tensor(sequence or array)`` holds the data in
        the default dtype, ``Tensor(2, 3)`` is a new 2 x 3 tensor (of zeros), ``Tensor()``
        an empty one and ``Tensor(tensor)`` an alias of ``tensor``.  (Operations make
        their tensors without calling this: see ``_wrap``.)"""
        if device is not None:
            check_device(device)
        _init(self, _legacy_array(args))
        if len(args) == 1 and isinstance(args[0], Tensor):
            self._ver = args[0]._ver        # an alias: shares storage, so shares the version

    # -- construction helpers (hot path: no __init__ checks) --------------------
    @staticmethod
    def _wrap(arr):
        """A tensor of ``arr`` made off the tape (a result that needs no grad, a
        detach, a comparison): a recording for replay is told of it."""
        t = _new(Tensor)
        t._data = arr
        t._requires_grad = False
        t._tape_id = 0
        t._slot = -1
        t._ver = [0]
        t._slot_version = 0
        t._tape = None
        t._extra = None
        if _recording[0]:
            st = _tp.state()
            rec = st.rec
            if rec is not None:
                rec.made(t)
            if st.inference:
                t._extras().inference = True
        return t

    @staticmethod
    def _const(arr):
        """A tensor of ``arr`` made from outside data (tg.zeros, tg.from_numpy, a
        number, a replay's values): as ``_wrap``, but no recording is told of it."""
        t = _new(Tensor)
        t._data = arr
        t._requires_grad = False
        t._tape_id = 0
        t._slot = -1
        t._ver = [0]
        t._slot_version = 0
        t._tape = None
        t._extra = None
        if _recording[0] and _tp.state().inference:
            t._extras().inference = True
        return t

    @staticmethod
    def _recorded(arr, tape, slot, ver):
        t = _new(Tensor)
        t._data = arr
        t._requires_grad = True
        t._tape_id = tape.id
        t._slot = slot
        t._ver = ver
        t._slot_version = ver[0]
        t._tape = tape
        t._extra = None
        return t

    def _written_(self):
        """The array under this tensor (``_data``) was just written in place outside
        any recorded op (an optimizer step, ``load_state_dict``, an initializer): bump
        its version as an in-place op does, so an entry that saved the old values
        raises PyTorch's in-place error at backward.  The documented way for ``nn``
        and ``optim`` to change a parameter."""
        _tp.inplace_counter[0] += 1
        self._ver[0] += 1
        if self._tape is None and self._requires_grad:
            self._tape_id &= _tp.OWNER_MASK     # a leaf's slot on any tape now holds an old value

    def _write_(self, values):
        """Copy ``values`` (an array-like, cast as needed) into this tensor's array and
        bump its version (``_written_``)."""
        np.copyto(self._data, values, casting="unsafe")
        self._written_()

    def _extras(self):
        x = self._extra
        if x is None:
            x = self._extra = _Extra()
        return x

    # -- basic properties -------------------------------------------------------
    @property
    def data(self):
        """The tensor's values as a tensor that does not require grad (shares storage,
        and version: tapegrad, unlike PyTorch, detects in-place changes made through it)."""
        return self.detach()

    @data.setter
    def data(self, value):
        """Replace the values without recording (PyTorch's ``x.data = y``)."""
        if not isinstance(value, Tensor):
            raise TypeError("data must be a Tensor, got %s" % type(value).__name__)
        if value._data is self._data:           # ``x.data -= ...`` already wrote in place
            return
        self._data = value._data                # any shape or dtype, as in PyTorch
        self._ver = value._ver
        self._tape_id &= _tp.OWNER_MASK             # a fresh slot on next use

    @property
    def shape(self):
        return self._data.shape

    def size(self, dim=None):
        if dim is None:
            return self._data.shape
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    @property
    def dtype(self):
        return self._data.dtype

    def numel(self):
        return self._data.size

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self._set_requires_grad(flag, setter=True)

    def requires_grad_(self, requires_grad=True):
        return self._set_requires_grad(requires_grad)

    def _set_requires_grad(self, requires_grad, creation=False, setter=False):
        flag = bool(requires_grad)
        if self._tape is not None:
            if not flag:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a "
                    "computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach().")
            return self
        if flag and not is_float_dtype(self._data.dtype):
            if creation or setter:
                raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients"
                                   if creation else
                                   "only Tensors of floating point and complex dtype can require gradients")
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if flag != self._requires_grad:
            self._requires_grad = flag
            self._tape_id &= _tp.OWNER_MASK    # a fresh slot of the right kind on next use
        return self

    @property
    def is_leaf(self):
        return self._tape is None

    @property
    def grad_fn(self):
        if self._tape is None:
            return None
        return NODE_FOR(self._tape, self._slot)

    @property
    def grad(self):
        if self._tape is not None and not (self._extra is not None and self._extra.retains):
            warnings.warn(_NONLEAF_GRAD_WARNING, UserWarning, stacklevel=2)
            return None
        x = self._extra
        return None if x is None else x.grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError("assigned grad expected to be a Tensor or None but got grad of type "
                                + type(value).__name__)
            if value.shape != self.shape:
                raise RuntimeError(
                    "attempting to assign a gradient of size '%s' to a tensor of size '%s'. Please ensure "
                    "that the gradient and the tensor are the same size"
                    % (list(value.shape), list(self.shape)))
            if value.dtype != self.dtype:
                raise RuntimeError(
                    "attempting to assign a gradient with dtype '%s' to a tensor with grad_dtype '%s'. "
                    "The gradient must match the tensor's grad_dtype (defaults to the tensor's dtype). "
                    "You can set the tensor's grad_dtype attribute with a specific dtype, or None to allow "
                    "any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and its "
                    "gradient may break downstream systems that assume they match."
                    % (cpp_name(value.dtype), torch_name(self.dtype)))
        if value is None and self._extra is None:
            return
        self._extras().grad = value

    @property
    def retains_grad(self):
        return self._tape is not None and self._extra is not None and self._extra.retains

    @property
    def _version(self):
        return self._ver[0]

    @property
    def T(self):
        return self.permute(*range(self.ndim - 1, -1, -1)) if self.ndim > 1 else self

    @property
    def mT(self):
        return self.transpose(-2, -1)

    # -- conversion -------------------------------------------------------------
    def numpy(self, *, force=False):
        if _recording[0]:
            rec = _tp.state().rec
            if rec is not None:
                rec.read(self, self._data)
                if self._requires_grad and not rec.really_requires_grad(self):
                    return self._data
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()      # (a guard while recording for replay)
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """A NumPy function's result on a tensor (``np.sin(t)``) comes back as a tensor
        that does not require grad, as in PyTorch (which also turns a bool result into
        uint8)."""
        array = np.asarray(array)
        if array.dtype == np.bool_:
            array = array.astype(np.uint8)
        if array.dtype.kind not in "biuf":
            return array
        return Tensor._const(array if array.flags.c_contiguous else np.ascontiguousarray(array))

    def __format__(self, format_spec):
        if type(self) in _FORMATTED_AS_NUMBER and len(self.shape) == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __iter__(self):
        if len(self.shape) == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter([self[i] for i in range(self.shape[0])])

    # -- devices: tapegrad has the CPU only ----------------------------------------
    @property
    def device(self):
        return CPU

    def is_inference(self):
        """Whether the tensor was made in ``tg.inference_mode``."""
        x = self._extra
        return x is not None and x.inference

    @property
    def is_cuda(self):
        return False

    def cpu(self):
        return self

    def cuda(self, device=None, non_blocking=False):
        if device is not None and not isinstance(device, str):
            check_device(device)
        raise AssertionError("Torch not compiled with CUDA enabled")

    def item(self):
        if self._data.size != 1:
            raise RuntimeError("a Tensor with %d elements cannot be converted to Scalar" % self._data.size)
        if _recording[0]:
            rec = _tp.state().rec
            if rec is not None:
                rec.read(self, self._data)
        return self._data.reshape(-1)[0].item()

    def tolist(self):
        if _recording[0]:
            rec = _tp.state().rec
            if rec is not None:
                rec.read(self, self._data)
        return self._data.tolist()

    def __float__(self):
        if self._requires_grad:
            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
                          "behavior.\nConsider using tensor.detach() first.", UserWarning, stacklevel=2)
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(self.item())

    def __int__(self):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        if _recording[0]:
            rec = _tp.state().rec
            if rec is not None:
                rec.read(self, self._data)
        return bool(self._data.reshape(-1)[0])

    def detach(self):
        t = Tensor._wrap(self._data)
        t._ver = self._ver          # shares storage, so shares the version counter
        return t

    def detach_(self):
        if self._extra is not None and self._extra.base is not None:
            raise RuntimeError(_DETACH_VIEW)
        if self._tape is not None:
            self._tape = None
            self._requires_grad = False
            self._tape_id = 0
        return self

    # -- hooks and retain_grad --------------------------------------------------
    def retain_grad(self):
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._tape is None:
            return
        x = self._extras()
        if not x.retains:
            x.retains = True
            import weakref
            self._tape.retained[self._slot] = weakref.ref(self)

    def register_hook(self, hook):
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        x = self._extras()
        if x.hooks is None:
            x.hooks = []
        if self._tape is not None:
            self._tape.hooks[self._slot] = (x.hooks, self.shape, self.dtype)
        return _RemovableHandle(x.hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        if self._tape is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        x = self._extras()
        if x.post_hooks is None:
            x.post_hooks = []
        return _RemovableHandle(x.post_hooks, hook)

    # -- printing ---------------------------------------------------------------
    def __repr__(self):
        return _format(self)

    __str__ = __repr__

    def __hash__(self):
        return id(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._data, self._requires_grad))

    def __deepcopy__(self, memo):
        if self._tape is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                               "deepcopy protocol at the moment.")
        t = from_data(self._data, requires_grad=self._requires_grad)
        memo[id(self)] = t
        return t


def _init(t, arr, requires_grad=False, alias_of=None):
    """Make ``t`` a leaf holding ``arr``; ``alias_of``, a tensor whose storage ``arr``
    is: ``t`` shares its version counter too (a detached alias, ``nn.Parameter(x)``)."""
    t._data = arr
    t._requires_grad = False
    t._tape_id = 0
    t._slot = -1
    t._ver = [0] if alias_of is None else alias_of._ver
    t._slot_version = t._ver[0]
    t._tape = None
    t._extra = None
    if _recording[0] and _tp.state().inference:
        t._extras().inference = True
    if requires_grad:
        t._set_requires_grad(True, creation=True)


def from_data(data, dtype=None, requires_grad=False):
    """A new leaf holding a copy of ``data`` (``tg.tensor``)."""
    t = _new(Tensor)
    _init(t, _as_array(data, dtype), requires_grad)
    return t


def _legacy_array(args):
    if not args:
        return np.empty((0,), DEFAULT_DTYPE)
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)) for a in args):
        for a in args:
            if a < 0:
                raise RuntimeError("Trying to create tensor with negative dimension %d: %s"
                                   % (a, [int(v) for v in args]))
        return np.zeros(tuple(int(a) for a in args), DEFAULT_DTYPE)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, Tensor):
            return data._data
        if not isinstance(data, (list, tuple, np.ndarray)) or (isinstance(data, np.ndarray) and data.ndim == 0):
            raise TypeError("new(): data must be a sequence (got %s)" % type(data).__name__)
        arr = _as_array(data)
        if arr.dtype != DEFAULT_DTYPE:
            arr = arr.astype(DEFAULT_DTYPE)
        return arr
    raise TypeError("new() received an invalid combination of arguments - got (%s), but expected one of:\n"
                    " * (*, device device = None)\n * (Tensor other)\n"
                    " * (tuple of ints size, *, device device = None)\n"
                    " * (object data, *, device device = None)"
                    % ", ".join(type(a).__name__ for a in args))


_new = object.__new__
_DATA = Tensor._data            # the ndarray slot's own descriptor
_MATERIALIZE = threading.Lock()


class NumberTensor(Tensor):
    """A one-element float64 tensor made by the recorders' single-number path
    (``ops.elementwise``): its value is the Python float ``_f``, computed with
    ``math`` and packed into its tape entry, and its ndarray is made only when
    something reads ``_data``.  A chain of operations on single numbers then never
    makes a one-element array (a NumPy call on one is ~1 us, most of an op's cost).

    Once made, the array is the tensor's data for good (``_f`` becomes None), so an
    in-place change through it is never shadowed by a stale ``_f``."""
    __slots__ = ("_f", "_shp")

    @property
    def _data(self):
        if self._f is None:
            return _DATA.__get__(self)
        with _MATERIALIZE:      # (two threads reading it at once get one array)
            f = self._f
            if f is None:
                return _DATA.__get__(self)
            arr = np.array(f, np.float64).reshape(self._shp)
            _DATA.__set__(self, arr)
            self._f = None
            return arr

    @_data.setter
    def _data(self, arr):
        with _MATERIALIZE:
            _DATA.__set__(self, arr)
            self._f = None

    @property
    def shape(self):
        return self._shp if self._f is not None else self._data.shape

    @property
    def dtype(self):
        return _F64 if self._f is not None else self._data.dtype


_F64 = np.dtype(np.float64)
_FORMATTED_AS_NUMBER = (Tensor, NumberTensor)     # (formatted as their number when 0-d, as PyTorch formats a plain Tensor)


def _rebuild(data, rg):
    return from_data(data, requires_grad=rg)


class _RemovableHandle:
    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook
        hooks.append(hook)

    def remove(self):
        try:
            self._hooks.remove(self._hook)
        except ValueError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_SUPPORTED = ("float64, float32, float16, complex64, complex128, int64, int32, int16, int8, uint64, uint32, "
              "uint16, uint8, and bool")


def typename(obj):
    """``torch.typename``, for the messages that name what they were given: a
    tensor by its type name (``tapegrad.DoubleTensor``), anything else by its class."""
    if isinstance(obj, Tensor):
        return "tapegrad." + tensor_type_name(obj.dtype, "Tensor")
    t = type(obj)
    mod = t.__module__
    return t.__qualname__ if mod in (None, "builtins") else mod + "." + t.__qualname__


def unsupported_array_msg(dt):
    """PyTorch's refusal of a NumPy array of dtype ``dt`` (object, strings...)."""
    return ("can't convert np.ndarray of type numpy.%s. The only supported types are: %s."
            % (dt.type.__name__, _SUPPORTED))


def _as_array(data, dtype=None):
    if isinstance(data, Tensor):
        arr = data._data
        if dtype is not None:
            arr = arr.astype(dtype)
        return arr.copy() if dtype is None else arr
    if dtype is not None:
        dtype = np.dtype(dtype)
    if isinstance(data, np.ndarray):
        if data.dtype.kind not in "biufc":
            raise TypeError(unsupported_array_msg(data.dtype))
        arr = None if data.dtype.kind == "c" else _buffers.copy_of(data, dtype)
        if arr is None:
            arr = np.array(data, dtype=dtype, copy=True)
    else:
        try:
            arr = np.array(data, dtype=dtype)
        except (ValueError, TypeError) as e:
            _bad_data(data)
            raise TypeError("could not convert %r to a tensor: %s" % (type(data).__name__, e)) from None
        if arr.dtype == object or arr.dtype.kind in "USV":
            _bad_data(data)
            raise TypeError("could not convert data of type %s to a tensor: only numbers, nested sequences "
                            "of numbers and arrays are supported" % type(data).__name__)
        if dtype is None and arr.dtype not in _PLAIN and arr.dtype.kind != "c":
            # NumPy scalars, arrays or tensors inside: PyTorch's inference, not NumPy's
            # (np.float32(1.5) stays float32, [np.float32(1), 2.5] is float64)
            dt = infer_dtype(data)
            if dt is not None and dt != arr.dtype:
                arr = arr.astype(dt)
    if arr.dtype.kind == "c":
        raise TypeError("tapegrad does not support complex tensors")
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return arr


_PLAIN = (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_))    # what Python numbers give
_MAX_DIMS = 64


def _is_seq(obj):
    return isinstance(obj, (list, tuple, str)) or (isinstance(obj, (np.ndarray, Tensor)) and obj.ndim > 0)


def _bad_data(data):
    """Raise PyTorch's error for ``data`` that NumPy could not make a numeric array
    of (torch.tensor's order: strings, the shape along the first elements, the
    element types, then every sequence's length)."""
    if isinstance(data, str):
        raise TypeError("new(): invalid data type 'str'")
    sizes = []
    seq = data
    while _is_seq(seq):
        n = len(seq)
        sizes.append(n)
        if len(sizes) > _MAX_DIMS:
            raise ValueError("too many dimensions '%s'" % type(seq).__name__)
        if n == 0:
            break
        seq = seq[0]
    _infer(data)
    _check_lengths(data, sizes, 0)


def _infer(obj):
    if isinstance(obj, (list, tuple)):
        for v in obj:
            _infer(v)
    elif isinstance(obj, str):
        raise TypeError("new(): invalid data type 'str'")
    elif not isinstance(obj, (int, float, complex, np.number, np.bool_, np.ndarray, Tensor)):
        raise RuntimeError("Could not infer dtype of %s" % type(obj).__name__)


def _check_lengths(obj, sizes, dim):
    if dim == len(sizes):
        if isinstance(obj, (list, tuple)):
            raise TypeError("must be real number, not %s" % type(obj).__name__)
        return
    if not _is_seq(obj):
        raise TypeError("not a sequence")
    if len(obj) != sizes[dim]:
        raise ValueError("expected sequence of length %d at dim %d (got %d)" % (sizes[dim], dim, len(obj)))
    if isinstance(obj, (list, tuple)):
        for v in obj:
            _check_lengths(v, sizes, dim + 1)


def _wrap_dim(dim, ndim):
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError("dim must be an int, got %s" % type(dim).__name__)
    if dim < lo or dim > hi:
        raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)"
                         % (lo, hi, dim))
    return dim % max(ndim, 1)


def _format(t):
    arr = t._data
    suffix = []
    if arr.dtype.kind == "f" and arr.dtype != DEFAULT_DTYPE:
        suffix.append("dtype=tapegrad.%s" % arr.dtype.name)
    elif arr.dtype.kind in "iu" and arr.dtype != np.int64:
        suffix.append("dtype=tapegrad.%s" % arr.dtype.name)
    if arr.size == 0:
        suffix.insert(0, "size=%s" % (tuple(arr.shape),)) if arr.ndim > 1 else None
    if t._tape is not None:
        suffix.append("grad_fn=<%s>" % GRAD_FN_NAMES[t._tape.field(t._slot, _tp.NAME)])
    elif t._requires_grad:
        suffix.append("requires_grad=True")
    body = _format_array(arr)
    if not suffix:
        return "tensor(%s)" % body
    return "tensor(%s, %s)" % (body, ", ".join(suffix))


def _format_array(arr):
    """PyTorch's layout: every element padded to one width; integral floats as
    ``5.``, others with 4 decimals, scientific when magnitudes are far apart."""
    if arr.dtype.kind != "f":
        return np.array2string(arr, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3)
    if arr.size == 0:
        return "[]"
    finite = np.abs(arr[np.isfinite(arr)]).astype(np.float64)
    nonzero = finite[finite != 0]
    if finite.size and np.all(finite == np.round(finite)):
        sci = finite.size and finite.max() >= 1e8
        fmt = "{:.4e}" if sci else "{:.0f}."
    elif nonzero.size and (nonzero.max() / nonzero.min() > 1000.0 or nonzero.max() >= 1e8
                           or nonzero.min() < 1e-4):
        fmt = "{:.4e}"
    else:
        fmt = "{:.4f}"

    def one(v):
        return fmt.format(v) if np.isfinite(v) else ("nan" if np.isnan(v) else ("inf" if v > 0 else "-inf"))
    flat = arr.reshape(-1)
    shown = flat if flat.size <= 1000 else np.concatenate((flat[:3], flat[-3:]))
    width = max(len(one(v)) for v in shown)
    return np.array2string(arr, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3,
                           formatter={"float_kind": lambda v: one(v).rjust(width)})


# -- operands -----------------------------------------------------------------------
# What an op accepts besides a Tensor: a numeric NumPy array or a Python/NumPy number.
_SCALARS = (int, float, bool, np.integer, np.floating, np.bool_)    # (no complex: tapegrad has none)


class _Unsupported(TypeError):
    """Data that is neither a tensor, a numeric array nor a number (``_arith`` turns it
    into Python's "unsupported operand type(s)" error)."""


def to_operand(v, like=None):
    """``v`` as a tensor operand of an op: itself, or a constant (a number takes the
    dtype PyTorch computes it in with ``like``)."""
    if isinstance(v, Tensor):
        return v
    if isinstance(v, np.ndarray):
        if v.dtype.kind not in "biuf":
            _bad_array(v)
        return Tensor._const(v)
    # a number with a tensor takes the dtype PyTorch computes the pair in (it stays
    # the weaker operand: int32 with 2 is int32, int32 with 2.5 the default float)
    dt = _pr.with_number(like.dtype, v) if (isinstance(like, Tensor) and _is_scalar(v)) else None
    try:
        arr = np.asarray(v, dtype=dt)
    except OverflowError:
        if dt is None:
            raise
        raise _overflow(dt) from None
    except (TypeError, ValueError):
        raise _Unsupported("expected a Tensor, a number or a numeric array, got %s" % type(v).__name__) from None
    if arr.dtype.kind not in "biuf":
        if arr.dtype.kind == "c":
            _bad_array(arr)
        raise _Unsupported("expected a Tensor, a number or a numeric array, got %s" % type(v).__name__)
    return Tensor._const(arr)


def _bad_array(arr):
    """PyTorch's refusal of a NumPy array it cannot hold (tapegrad also refuses complex)."""
    if arr.dtype.kind == "c":
        raise TypeError("tapegrad does not support complex tensors")
    raise TypeError(unsupported_array_msg(arr.dtype))


def _is_scalar(v):
    return isinstance(v, _SCALARS) and not isinstance(v, np.ndarray)


def _overflow(dt):
    return RuntimeError("value cannot be converted to type %s without overflow"
                        % {"int32": "int", "int64": "int64_t", "int16": "int16_t", "int8": "int8_t",
                           "uint8": "uint8_t"}.get(dt.name, dt.name))
