"""``tg.save`` and ``tg.load``: tensors, and the containers, numbers and strings
around them (state dicts of modules and optimizers), in a file.

The file is a zip archive (stored, not compressed):

* ``tapegrad.format``: the text ``tapegrad-save 1``;
* ``data.pkl``: the object, pickled with every tensor and NumPy array replaced by a
  reference to its array member (pickle's persistent ids);
* ``arrays/<n>.npy``: each array in NumPy's ``.npy`` format (written and read with
  ``allow_pickle=False``: a member holds numbers only).

``tg.load(f)`` (``weights_only=True``, the default, also for ``None`` as in
PyTorch) reads the pickle with an unpickler that builds only Python's plain containers
and scalars, tensors and a short list of harmless types (``collections.OrderedDict``,
``set``, ``frozenset``, ``tg.device``, NumPy dtypes and scalars): a pickle naming
anything else (a class, a function such as ``os.system``) is refused with
``pickle.UnpicklingError`` naming it, before it is called.  Pickle's BUILD (setting an
object's state) is done only for NumPy dtypes and for the classes
``add_safe_globals`` allows, never for a private (``_``) attribute: a file can set no
field of a tensor, of ``tg.device`` or of any class.  A member the pickle refers to must
be an ``arrays/<n>.npy`` of the archive whose header matches its size; anything else
malformed is an ``UnpicklingError`` naming it.  ``weights_only=False`` unpickles
anything, which runs whatever code the file names: only for files of a trusted source.
"""
import _compat_pickle
import collections
import io
import os
import pickle
import re
import struct
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


_ARRAY_MEMBER = re.compile(r"arrays/[0-9]+\.npy")
_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
_WEIGHTS_ONLY = ("Load it with weights_only=False only if you trust the file's source: unpickling can run "
                 "arbitrary code.")


class _Members:
    """The arrays of a tapegrad archive, read for the pickle's persistent ids."""

    def __init__(self, zf, where):
        self._zf, self._where, self._loaded = zf, where, {}

    def tensor(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 3 and pid[0] in ("tensor", "parameter", "ndarray")
                and isinstance(pid[1], str)):
            raise pickle.UnpicklingError("tg.load: an unknown persistent id %r" % (pid,))
        out = self._loaded.get(pid[1])
        if out is not None:
            return out
        if self._zf is None:
            raise pickle.UnpicklingError("tg.load: a tensor reference outside a tapegrad archive")
        kind, name, rg = pid
        arr = self._array(name)
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

    def _array(self, name):
        """Member ``name``'s array: an ``arrays/<n>.npy`` of the archive, in NumPy's format
        without pickle, its header's shape and dtype matching its size (checked before
        anything is allocated for it)."""
        what = "%s refers to the member %r, which" % (self._where, name)
        if not _ARRAY_MEMBER.fullmatch(name):
            raise pickle.UnpicklingError("%s is not an array member (arrays/<n>.npy)" % what)
        try:
            info = self._zf.getinfo(name)
        except KeyError:
            raise pickle.UnpicklingError("%s the archive does not have" % what) from None
        try:
            with self._zf.open(info) as m:
                version = np.lib.format.read_magic(m)
                if version not in _NPY_HEADERS:
                    raise ValueError("NumPy format version %d.%d, which tg.save does not write" % version)
                shape, fortran, dtype = _NPY_HEADERS[version](m)
                count = 1
                for n in shape:
                    count *= n
                if dtype.hasobject or count * dtype.itemsize != info.file_size - m.tell():
                    raise ValueError("its header (shape %s, dtype %s) does not match its %d bytes"
                                     % (shape, dtype, info.file_size))
                m.seek(0)
                return np.lib.format.read_array(m, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:     # (what a damaged member raises)
            raise pickle.UnpicklingError("%s is not a valid array: %s" % (what, e)) from None


def _find_safe(module, name):
    if (module, name) in _compat_pickle.NAME_MAPPING:         # (Python 2 names, in protocols 0-2)
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    g = _SAFE.get((module, name)) or _USER_SAFE.get((module, name))
    if g is None:
        raise pickle.UnpicklingError(
            "Weights only load failed: the file names the global %s.%s, which tg.load(weights_only=True) "
            "does not build (it builds tensors, Python's containers, numbers and strings, and the types "
            "tapegrad.serialization.get_safe_globals() and its safe list allow). %s" % (module, name, _WEIGHTS_ONLY))
    return g


class _WeightsOnlyUnpickler(pickle._Unpickler):
    """The weights-only unpickler: pickle's own Python implementation, whose opcodes can be
    overridden (the C one's cannot), with ``find_class`` limited to the safe globals and
    BUILD (``_build``) limited to what they need."""
    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file, members, **kw):
        super().__init__(file, **kw)
        self._members = members

    def find_class(self, module, name):
        return _find_safe(module, name)

    def persistent_load(self, pid):
        return self._members.tensor(pid)

    def _build(self):
        # pickle's BUILD sets the state of the object below it on the stack: a NumPy dtype's
        # (its own __setstate__ checks it), an allowed class's (its __setstate__, or public
        # attributes); no other object's, so not a class's attributes, a tensor's fields or
        # tg.device's
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, np.dtype):
            inst.__setstate__(state)
            return
        if type(inst) is collections.OrderedDict and isinstance(state, dict) and all(
                isinstance(k, str) and not k.startswith("__") for k in state):
            inst.__dict__.update(state)     # (a state_dict's _metadata, as PyTorch's unpickler allows)
            return
        if type(inst) in _USER_SAFE.values() and not isinstance(inst, type):
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None:
                setstate(state)
                return
            slots = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slots = state
            for d in (state, slots):
                if d is None:
                    continue
                if not isinstance(d, dict) or any(not isinstance(k, str) or k.startswith("_") for k in d):
                    raise pickle.UnpicklingError(
                        "Weights only load failed: the file sets private or non-string attributes of a %s object "
                        "(pickle's BUILD), which tg.load(weights_only=True) refuses. %s"
                        % (type(inst).__qualname__, _WEIGHTS_ONLY))
                for k, v in d.items():
                    setattr(inst, k, v)
            return
        raise pickle.UnpicklingError(
            "Weights only load failed: the file sets the state of a %s object (pickle's BUILD), which "
            "tg.load(weights_only=True) does only for NumPy dtypes and the classes add_safe_globals allows. %s"
            % (type(inst).__qualname__, _WEIGHTS_ONLY))

    dispatch[pickle.BUILD[0]] = _build


class _Unpickler(pickle.Unpickler):
    """``weights_only=False``: pickle's unpickler, tensors from the archive's members."""

    def __init__(self, file, members, **kw):
        super().__init__(file, **kw)
        self._members = members

    def persistent_load(self, pid):
        return self._members.tensor(pid)


# what pickle's Python unpickler raises on malformed data (an unknown opcode, a memo or
# stack index that is not there, a bad number or string), and a damaged zip member
_MALFORMED = (EOFError, KeyError, IndexError, struct.error, UnicodeDecodeError, ValueError, TypeError,
              AttributeError, zipfile.BadZipFile)


def _unpickle(file, members, weights_only, pickle_load_args):
    if not weights_only:
        try:
            return _Unpickler(file, members, **pickle_load_args).load()
        except (EOFError, zipfile.BadZipFile) as e:       # (a truncated or damaged pickle member)
            raise pickle.UnpicklingError("%s is damaged (%s: %s)" % (members._where, type(e).__name__, e)) from e
    try:
        return _WeightsOnlyUnpickler(file, members, **pickle_load_args).load()
    except _MALFORMED as e:
        raise pickle.UnpicklingError("%s is damaged (%s: %s)" % (members._where, type(e).__name__, e)) from e


def load(f, map_location=None, pickle_module=pickle, *, weights_only=True, mmap=None, **pickle_load_args):
    """Read an object ``tg.save`` wrote (``f`` a path or a binary file object).
    ``weights_only=True`` (the default; None means it too, as in PyTorch) builds tensors,
    containers, numbers and strings only and refuses any other global the file names;
    ``weights_only=False`` unpickles anything (it can run arbitrary code: trusted files
    only).  ``map_location`` may name the CPU only."""
    weights_only = True if weights_only is None else bool(weights_only)
    if map_location is not None and not callable(map_location) and not isinstance(map_location, dict):
        _check_device(map_location)
    if pickle_module is not pickle:
        raise TypeError("tg.load unpickles with the standard pickle module only")
    opened = isinstance(f, (str, bytes, os.PathLike))
    fh = open(f, "rb") if opened else f
    where = "tg.load: %r" % (f,) if opened else "tg.load: the file"
    try:
        if zipfile.is_zipfile(fh):
            fh.seek(0)
            try:
                z = zipfile.ZipFile(fh)
            except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
                raise pickle.UnpicklingError("%s is a damaged zip archive (%s)" % (where, e)) from None
            with z:
                names = set(z.namelist())
                if _FORMAT_MEMBER not in names or z.read(_FORMAT_MEMBER) != FORMAT or _DATA_MEMBER not in names:
                    raise RuntimeError("tg.load: %r is a zip archive but not one tg.save wrote" % (f,))
                with z.open(_DATA_MEMBER) as data:
                    return _unpickle(data, _Members(z, where), weights_only, pickle_load_args)
        fh.seek(0)
        if fh.read(4) == b"PK\x03\x04":          # (a zip archive's first member, its directory lost)
            raise pickle.UnpicklingError("%s is a damaged zip archive (truncated?)" % where)
        fh.seek(0)
        # a plain pickle (no tensors): read with the same rules
        return _unpickle(fh, _Members(None, where), weights_only, pickle_load_args)
    finally:
        if opened:
            fh.close()
