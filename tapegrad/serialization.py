"""``tg.save`` and ``tg.load``: tensors, and the containers, numbers and strings
around them (state dicts of modules and optimizers), in a file.

The file is a zip archive (stored, not compressed):

* ``tapegrad.format``: the text ``tapegrad-save 1``;
* ``data.pkl``: the object, pickled with every tensor and NumPy array replaced by a
  reference to its array member (pickle's persistent ids);
* ``arrays/<n>.npy``: each array in NumPy's ``.npy`` format (written and read with
  ``allow_pickle=False``: a member holds numbers only).

``tg.load(f)`` (``weights_only=True``, the default) reads the pickle with an
unpickler that builds only Python's plain containers and scalars, tensors and a short
list of harmless types (``collections.OrderedDict``, ``set``, ``frozenset``,
``tg.device``, NumPy dtypes and scalars): a pickle naming anything else (a class, a
function such as ``os.system``) is refused with ``pickle.UnpicklingError`` naming it,
before it is called.  ``weights_only=False`` unpickles anything, which runs whatever
code the file names: only for files of a trusted source.
"""
import _compat_pickle
import collections
import io
import os
import pickle
import zipfile

import numpy as np

from .core.tensor import Tensor, device as _device
from .core.tensor import check_device as _check_device
from .nn import Parameter as _Parameter

try:
    from numpy._core.multiarray import scalar as _np_scalar
except ImportError:                     # (NumPy 1)
    from numpy.core.multiarray import scalar as _np_scalar

__all__ = ["save", "load", "add_safe_globals", "get_safe_globals"]

FORMAT = b"tapegrad-save 1"
_FORMAT_MEMBER = "tapegrad.format"
_DATA_MEMBER = "data.pkl"

# (module, name) -> the object a weights-only load may build
_SAFE = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("builtins", "slice"): slice,
    ("builtins", "range"): range,
    ("_codecs", "encode"): __import__("_codecs").encode,       # (bytes, in pickle protocol 2)
    ("numpy", "dtype"): np.dtype,
    ("tapegrad.core.tensor", "device"): _device,
}
for _mod in ("numpy.core.multiarray", "numpy._core.multiarray"):      # (a NumPy scalar: a dtype and its bytes)
    _SAFE[(_mod, "scalar")] = _np_scalar
_USER_SAFE = {}


def add_safe_globals(safe_globals):
    """Allow ``tg.load(weights_only=True)`` to build these classes or functions too
    (as ``torch.serialization.add_safe_globals``): only for ones that run no code
    from the file's data."""
    for g in safe_globals:
        _USER_SAFE[(g.__module__, g.__qualname__)] = g


def get_safe_globals():
    """The globals ``add_safe_globals`` allowed."""
    return list(_USER_SAFE.values())


class _Pickler(pickle.Pickler):
    def __init__(self, file, protocol, arrays):
        super().__init__(file, protocol)
        self._arrays = arrays       # [(name, ndarray)]
        self._ids = {}              # id(obj) -> persistent id
        self._keep = []

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            kind = "parameter" if isinstance(obj, _Parameter) else "tensor"
            return self._member(obj, lambda: (kind, np.require(obj._data, requirements="C"), bool(obj.requires_grad)))
        if type(obj) is np.ndarray:
            if obj.dtype.hasobject:
                return None         # (pickled as usual: refused by a weights-only load)
            return self._member(obj, lambda: ("ndarray", np.require(obj, requirements="C"), False))
        return None

    def _member(self, obj, describe):
        pid = self._ids.get(id(obj))
        if pid is None:
            kind, arr, rg = describe()
            name = "arrays/%d.npy" % len(self._arrays)
            self._arrays.append((name, arr))
            pid = self._ids[id(obj)] = (kind, name, rg)
            self._keep.append(obj)
        return pid


def save(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """Write ``obj`` (tensors, and lists, tuples, dicts, numbers and strings of them:
    a module's or an optimizer's ``state_dict()``...) to ``f``, a path or a binary
    file object.  Tensors keep their dtype, shape, values and ``requires_grad``
    (``nn.Parameter`` stays a Parameter); two references to one tensor load as one."""
    if pickle_module is not pickle:
        raise TypeError("tg.save pickles with the standard pickle module only")
    buf = io.BytesIO()
    arrays = []
    _Pickler(buf, pickle_protocol, arrays).dump(obj)
    opened = isinstance(f, (str, bytes, os.PathLike))
    fh = open(f, "wb") if opened else f
    try:
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as z:
            z.writestr(_FORMAT_MEMBER, FORMAT)
            z.writestr(_DATA_MEMBER, buf.getvalue())
            for name, arr in arrays:
                with z.open(name, "w", force_zip64=arr.nbytes > (1 << 30)) as m:
                    np.lib.format.write_array(m, arr, allow_pickle=False)
    finally:
        if opened:
            fh.close()


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, zf, weights_only, **kw):
        super().__init__(file, **kw)
        self._zf = zf
        self._weights_only = weights_only
        self._loaded = {}

    def find_class(self, module, name):
        if not self._weights_only:
            return super().find_class(module, name)
        if (module, name) in _compat_pickle.NAME_MAPPING:         # (Python 2 names, in protocols 0-2)
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        g = _SAFE.get((module, name)) or _USER_SAFE.get((module, name))
        if g is None:
            raise pickle.UnpicklingError(
                "Weights only load failed: the file names the global %s.%s, which tg.load(weights_only=True) "
                "does not build (it builds tensors, Python's containers, numbers and strings, and the types "
                "tapegrad.serialization.get_safe_globals() and its safe list allow). Load it with "
                "weights_only=False only if you trust the file's source: unpickling can run arbitrary code."
                % (module, name))
        return g

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 3 and pid[0] in ("tensor", "parameter", "ndarray")
                and isinstance(pid[1], str)):
            raise pickle.UnpicklingError("tg.load: an unknown persistent id %r" % (pid,))
        out = self._loaded.get(pid[1])
        if out is not None:
            return out
        if self._zf is None:
            raise pickle.UnpicklingError("tg.load: a tensor reference outside a tapegrad archive")
        kind, name, rg = pid
        with self._zf.open(name) as m:
            arr = np.lib.format.read_array(m, allow_pickle=False)
        if kind == "ndarray":
            out = arr
        elif kind == "parameter":
            out = _Parameter(Tensor._const(arr), requires_grad=bool(rg))
        else:
            out = Tensor._const(arr)
            if rg:
                out.requires_grad_(True)
        self._loaded[name] = out
        return out


def load(f, map_location=None, pickle_module=pickle, *, weights_only=True, mmap=None, **pickle_load_args):
    """Read an object ``tg.save`` wrote (``f`` a path or a binary file object).
    ``weights_only=True`` (the default) builds tensors, containers, numbers and
    strings only and refuses any other global the file names; ``weights_only=False``
    unpickles anything (it can run arbitrary code: trusted files only).
    ``map_location`` may name the CPU only."""
    if map_location is not None and not callable(map_location) and not isinstance(map_location, dict):
        _check_device(map_location)
    if pickle_module is not pickle:
        raise TypeError("tg.load unpickles with the standard pickle module only")
    opened = isinstance(f, (str, bytes, os.PathLike))
    fh = open(f, "rb") if opened else f
    try:
        if zipfile.is_zipfile(fh):
            fh.seek(0)
            with zipfile.ZipFile(fh) as z:
                names = set(z.namelist())
                if _FORMAT_MEMBER not in names or z.read(_FORMAT_MEMBER) != FORMAT or _DATA_MEMBER not in names:
                    raise RuntimeError("tg.load: %r is a zip archive but not one tg.save wrote" % (f,))
                with z.open(_DATA_MEMBER) as data:
                    return _Unpickler(data, z, bool(weights_only), **pickle_load_args).load()
        fh.seek(0)
        # a plain pickle (no tensors): read with the same rules
        return _Unpickler(fh, None, bool(weights_only), **pickle_load_args).load()
    finally:
        if opened:
            fh.close()
