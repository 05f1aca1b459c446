"""Numba configuration shared by every compiled kernel, and its lazy loading.

Every kernel is compiled with a disk cache in a directory ``tapegrad._private`` chose
and checks before each read and write (owned by this user, writable by no one else,
not a symbolic link): beside the sources when that qualifies, else under
``NUMBA_CACHE_DIR`` or the user's cache.  The kernels get a cache object of their own
(``_DiskCache``), so Numba's global configuration is never changed and Numba's cache is
only ever pointed at checked directories.  Where none qualifies, a kernel is compiled
without a disk cache.

``error_model="numpy"`` makes division by zero give inf/nan (PyTorch's values)
instead of raising ZeroDivisionError inside the sweep.

Numba is imported on first use, not by ``import tapegrad``: importing it and
loading even one cached kernel costs over a second, which a script that takes a
few gradients never needs to pay (``autograd.engine`` differentiates small tapes
without the kernels until then).  Until ``load()``, ``jit`` returns a stand-in
(``_Kernel``); ``load()`` makes the dispatchers and puts them, and the other
Numba objects kernels name (``lazy``), in place of the stand-ins in every tapegrad
module, so compiled code and Python callers see the real thing.

The disk cache never fails a compile: an entry that fails to load (an index or data
file truncated by a killed process or a full disk, zeroed, or not rebuilding) is
removed, with one RuntimeWarning naming it, and the kernel compiled anew; an entry that
cannot be written (a full disk, a read-only file system) leaves the kernel compiled in
memory, with one RuntimeWarning.
"""
import glob
import os
import sys
import threading
import warnings

from . import _private

_ALL = []           # every dispatcher, so a changed kernel source can flush them all
_PENDING = []       # stand-ins made before load(), in definition order
_LOCK = threading.RLock()
LOADED = [False]     # Numba imported, the dispatchers made
READY = [False]      # ... and the kernels are to be used (``load``; or ``_background`` once they are loaded)
_AFTER_LOAD = []    # callbacks run once the dispatchers exist (the stale-cache flush)


def _njit(fn, kw):
    """``numba.njit(error_model="numpy", nogil=True)`` with tapegrad's disk cache
    (``_disk_cache``; ``cache=False`` for none)."""
    import numba
    opts = dict(error_model="numpy", nogil=True)
    opts.update(kw)
    cache = opts.pop("cache", True)
    d = numba.njit(**opts)(fn)
    if cache:
        c = _disk_cache(fn)
        if c is not None:
            d._cache = c
    _ALL.append(d)
    return d


def _disk_cache(fn):
    """A disk cache of ``fn``'s machine code in the checked directory for its source
    file, or None (no such directory; a function made from text in memory)."""
    src = fn.__code__.co_filename
    if not os.path.isfile(src):
        return None
    d = _private.numba_dir(src)
    if d is None:
        return None
    return _cache_class()(fn, src, d)


_CLASSES = []
_DAMAGED = set()    # cache files found damaged (and removed) by this process


def _cache_class():
    """``_DiskCache``, made once Numba is imported (its base classes are Numba's)."""
    if _CLASSES:
        return _CLASSES[0]
    from numba.core import caching

    class _Locator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
        """Numba's cache of one source file's functions in ``path``, a directory
        ``_private`` made: checked (not made) before Numba writes there."""

        def __init__(self, py_func, py_file, path):
            self._py_file, self._lineno, self._cache_path = py_file, py_func.__code__.co_firstlineno, path

        def get_cache_path(self):
            return self._cache_path

        def ensure_cache_path(self):
            why = _private.problem(self._cache_path)
            if why is not None:
                raise _private.Refused(self._cache_path, why)

        @classmethod
        def from_function(cls, py_func, py_file):
            return None     # (made by _DiskCache only, for the directory it was given)

    class _Impl(caching.CompileResultCacheImpl):
        def __init__(self, py_func, locator):   # (CacheImpl's, with this locator rather than a search)
            self._lineno = py_func.__code__.co_firstlineno
            self._locator = locator
            modname = os.path.splitext(os.path.basename(locator._py_file))[0]
            self._filename_base = self.get_filename_base("%s.%s" % (modname, py_func.__qualname__),
                                                         getattr(sys, "abiflags", ""))

    class _File(caching.IndexDataCacheFile):
        """Numba's index and data files, a damaged one removed (``_remove_damaged``)."""

        def _load_index(self):
            try:
                return super()._load_index()
            except OSError:
                raise               # (unreadable, not damaged: never removed; a missing file Numba handles)
            except Exception as e:      # (whatever unpickling a damaged file raises: UnpicklingError, EOFError...)
                _remove_damaged(self, self._index_path, e)
                return {}

        def _load_data(self, name):
            try:
                return super()._load_data(name)
            except OSError:
                raise               # (Numba's own answer: a file removed meanwhile is a miss)
            except Exception as e:      # (as _load_index's)
                _remove_damaged(self, self._data_path(name), e)
                raise OSError("damaged cache file removed") from e

    class _DiskCache(caching.FunctionCache):
        """``FunctionCache`` in a checked directory: checked before each load and save;
        a load that fails is a miss (the entry removed), a save that fails leaves the
        kernel compiled in memory."""

        def __init__(self, py_func, py_file, path):
            self._name = repr(py_func)
            self._py_func = py_func
            self._impl = _Impl(py_func, _Locator(py_func, py_file, path))
            self._cache_path = path
            self._cache_file = _File(cache_path=path, filename_base=self._impl.filename_base,
                                     source_stamp=self._impl.locator.get_source_stamp())
            self.enable()

        def _usable(self):
            why = _private.problem(self._cache_path)
            if why is not None:
                _private.warn_once(("unsafe", self._cache_path), "Numba's cache directory %s is not used any more: "
                                   "%s; compiling without it" % (self._cache_path, why), stacklevel=6)
            return why is None

        def load_overload(self, sig, target_context):
            if not self._usable():
                return None
            try:
                return super().load_overload(sig, target_context)
            except OSError:
                return None
            except Exception as e:      # (an entry that unpickled but does not rebuild: damaged too)
                _remove_damaged(self._cache_file, self._cache_file._index_path, e)
                return None

        def save_overload(self, sig, data):
            if not self._usable():
                return
            try:
                super().save_overload(sig, data)
            except OSError as e:        # (a full disk, a read-only file system: the kernel stays in memory)
                _private.warn_once(("save", self._cache_path), "cannot write Numba's cache in %s (%s); the "
                                   "kernels are compiled in memory" % (self._cache_path, e), stacklevel=6)

        def flush(self):
            if self._usable():
                try:
                    super().flush()
                except OSError:
                    pass

    _CLASSES.append(_DiskCache)
    return _DiskCache


def _remove_damaged(f, path, err):
    """Remove a function's index and data files, one of which failed to load (one warning per file)."""
    base = f._index_path[:-len(".nbi")]
    for p in [f._index_path] + glob.glob(glob.escape(base) + ".*.nbc"):
        try:
            os.remove(p)
        except OSError:
            pass
    if path not in _DAMAGED:
        _DAMAGED.add(path)
        warnings.warn("tapegrad: Numba's cache file %s was damaged (%s: %s); removed it and compiling the "
                      "kernel again" % (path, type(err).__name__, err), RuntimeWarning, stacklevel=2)


class _Kernel:
    """A kernel before Numba is loaded: calling it loads Numba (``load``) and calls
    the dispatcher; ``py_func`` is the plain Python function, usable without Numba."""
    def __init__(self, fn, kw):
        self.py_func, self.kw, self.dispatcher = fn, kw, None
        self.__name__, self.__doc__ = fn.__name__, fn.__doc__

    # (LOADED, not the dispatcher, is the test: another thread's load() sets the
    # dispatchers before it replaces the stand-ins that compiled code will look up)
    def __call__(self, *args, **kwargs):
        if not LOADED[0]:
            load()
        return self.dispatcher(*args, **kwargs)

    def __getattr__(self, name):        # signatures, stats, ... of the dispatcher
        if name.startswith("__"):
            raise AttributeError(name)
        if not LOADED[0]:
            load()
        return getattr(self.dispatcher, name)

    def __repr__(self):
        return "<tapegrad kernel %s%s>" % (self.__name__, "" if self.dispatcher is None else " (loaded)")


class _Lazy:
    """Another Numba object a kernel names (an intrinsic, an external function,
    the ``numba`` module itself), made by ``factory`` at ``load()``."""
    __slots__ = ("factory", "value")

    def __init__(self, factory):
        self.factory, self.value = factory, None


def jit(fn=None, **kw):
    """``numba.njit(cache=True, error_model="numpy", nogil=True)``, made when Numba
    is loaded (at once if it already is)."""
    if fn is None:
        return lambda f: jit(f, **kw)
    with _LOCK:
        if LOADED[0]:
            return _njit(fn, kw)
        k = _Kernel(fn, kw)
        _PENDING.append(k)
        return k


def lazy(factory):
    """A module-level Numba object for kernels to name, made at ``load()``."""
    with _LOCK:
        if LOADED[0]:
            return factory()
        z = _Lazy(factory)
        _PENDING.append(z)
        return z


def loaded():
    return LOADED[0]


def load(ready=True):
    """Import Numba, make every pending kernel's dispatcher, and put the real objects
    in place of the stand-ins (compilation itself stays lazy, per kernel, at first
    call).  Idempotent and thread-safe.  ``ready=False`` (``_background``, loading
    the kernels from the cache in a thread) leaves ``READY`` to its caller: until
    then backward passes go on being interpreted."""
    if LOADED[0]:
        if ready:
            READY[0] = True
        return
    with _LOCK:
        if LOADED[0]:
            if ready:
                READY[0] = True
            return
        for z in _PENDING:
            if isinstance(z, _Lazy):
                z.value = z.factory()
            else:
                z.dispatcher = _njit(z.py_func, z.kw)
        real = {id(z): (z.value if isinstance(z, _Lazy) else z.dispatcher) for z in _PENDING}
        for name, mod in list(sys.modules.items()):
            if mod is None or not name.startswith("tapegrad"):     # (the generated module's name too)
                continue
            d = getattr(mod, "__dict__", None)
            if not d:
                continue
            for k, v in list(d.items()):
                if isinstance(v, (_Kernel, _Lazy)):
                    r = real.get(id(v))
                    if r is not None:
                        d[k] = r
        LOADED[0] = True
        del _PENDING[:]
        for f in _AFTER_LOAD:
            f()
        if ready:
            READY[0] = True


def _numba_module():
    import numba
    return numba


numba = lazy(_numba_module)     # kernels use ``numba.carray``: ``from .._jit import numba``


def _address_as_pointer():
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def address_as_pointer(typingctx, addr):
        """An int64 address (``ndarray.__array_interface__``) as a ``void*``.

        Large slot arrays are handed to the sweep by address, so nothing is copied and
        no ``typed.List`` (tens of microseconds to build from Python) is needed.
        """
        sig = types.voidptr(addr)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], cgutils.voidptr_t)

        return sig, codegen
    return address_as_pointer


address_as_pointer = lazy(_address_as_pointer)


# -- kernels called by address -----------------------------------------------------
# Numba links a called kernel's code into its caller and optimises and emits it again
# there: the elementwise kernels, the largest, were compiled once more in every
# variant of the sweep.  Called through a C entry's address instead, they are
# compiled once (and cached), and a variant costs only its own loop.
_ENTRIES = {}


def c_entry(fn, argtypes):
    """(Once Numba is loaded.)  ``fn`` as a cached C function taking ``argtypes``
    (names of Numba scalar types) and returning nothing; its ``address`` is what
    ``c_caller``'s intrinsic calls.  Made once per process."""
    key = (fn, argtypes)
    e = _ENTRIES.get(key)
    if e is None:
        with _LOCK:
            e = _ENTRIES.get(key)
            if e is None:
                import numba
                from numba.core import sigutils
                from numba.core.ccallback import CFunc
                sig = numba.types.void(*[getattr(numba.types, t) for t in argtypes])
                # (numba.cfunc's own steps, with tapegrad's disk cache: _disk_cache)
                e = CFunc(fn, sigutils.normalize_signature(sig), locals={},
                          options=dict(error_model="numpy", nogil=True))
                c = _disk_cache(fn)
                if c is not None:
                    e._cache = c
                e.compile()
                _ENTRIES[key] = e
    return e


def c_caller(argtypes):
    """A module-level intrinsic ``call(address, args)`` for kernels: calls the C
    entry at ``address`` (an int64, see ``c_entry``) with the tuple ``args``, each
    converted to its type in ``argtypes``."""
    def factory():
        from llvmlite import ir
        from numba.core import types
        from numba.extending import intrinsic
        target = [getattr(types, t) for t in argtypes]

        @intrinsic
        def call(typingctx, address, args):
            if not isinstance(args, types.BaseTuple) or len(args) != len(target):
                return None

            def codegen(context, builder, signature, llargs):
                fnty = ir.FunctionType(ir.VoidType(), [context.get_value_type(t) for t in target])
                f = builder.inttoptr(llargs[0], fnty.as_pointer())
                vals = [context.cast(builder, builder.extract_value(llargs[1], i), args[i], t)
                        for i, t in enumerate(target)]
                builder.call(f, vals)
                return context.get_dummy_value()

            return types.none(address, args), codegen
        return call
    return lazy(factory)
