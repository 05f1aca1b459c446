"""Numba configuration shared by every compiled kernel, and its lazy loading.

All kernels are compiled with ``cache=True``.  Numba writes the cache next to the
source, falls back to a user-wide directory when the package is read-only, and
raises at decoration time when nothing is writable; ``jit`` then points Numba at a
temporary directory instead of letting ``import tapegrad`` fail.

``error_model="numpy"`` makes division by zero give inf/nan (PyTorch's values)
instead of raising ZeroDivisionError inside the sweep.

Numba is imported on first use, not by ``import tapegrad``: importing it and
loading even one cached kernel costs over a second, which a script that takes a
few gradients never needs to pay (``autograd.engine`` differentiates small tapes
without the kernels until then).  Until ``load()``, ``jit`` returns a stand-in
(``_Kernel``); ``load()`` makes the dispatchers and puts them, and the other
Numba objects kernels name (``lazy``), in place of the stand-ins in every tapegrad
module, so compiled code and Python callers see the real thing.

A damaged cache entry (an index or data file truncated by a killed process or a
full disk, or zeroed) would make every later call fail to unpickle it: each
dispatcher's cache file reader is wrapped (``_guard_cache``) so that such an
entry is removed, with one RuntimeWarning naming it, and the kernel compiled anew.
"""
import glob
import os
import sys
import tempfile
import threading
import warnings

_ALL = []           # every dispatcher, so a changed kernel source can flush them all
_PENDING = []       # stand-ins made before load(), in definition order
_LOCK = threading.RLock()
LOADED = [False]     # Numba imported, the dispatchers made
READY = [False]      # ... and the kernels are to be used (``load``; or ``_background`` once they are loaded)
_AFTER_LOAD = []    # callbacks run once the dispatchers exist (the stale-cache flush)


def _fallback_cache_dir():
    d = os.path.join(tempfile.gettempdir(), "tapegrad-numba-cache")
    os.makedirs(d, exist_ok=True)
    return d


def _njit(fn, kw):
    """``numba.njit(cache=True, error_model="numpy")`` that never fails for want of a
    cache directory."""
    import numba
    opts = dict(cache=True, error_model="numpy", nogil=True)
    opts.update(kw)
    try:
        d = numba.njit(**opts)(fn)
    except RuntimeError:        # "cannot cache function ...: no locator available"
        numba.config.CACHE_DIR = _fallback_cache_dir()
        try:
            d = numba.njit(**opts)(fn)
        except RuntimeError:
            opts["cache"] = False
            d = numba.njit(**opts)(fn)
    _guard_cache(d)
    _ALL.append(d)
    return d


_DAMAGED = set()    # cache files found damaged (and removed) by this process


def _guard_cache(d):
    """Make dispatcher ``d``'s disk cache treat an unreadable entry as absent: a
    file that fails to unpickle (``pickle data was truncated``, ``invalid load
    key``, an empty file) is removed with the other files of its function, and
    the kernel is compiled again (Numba itself writes each file atomically, index
    before data, so only an outside cause leaves one half-written)."""
    f = getattr(getattr(d, "_cache", None), "_cache_file", None)
    if f is None or not hasattr(f, "_load_index"):     # (no cache: nothing to guard)
        return
    load_index, load_data = f._load_index, f._load_data

    def guarded_index():
        try:
            return load_index()
        except OSError:
            raise                   # (unreadable, not damaged: never removed; a missing file Numba handles)
        except Exception as e:      # (what fails to unpickle: a damaged file)
            _remove_damaged(f, f._index_path, e)
            return {}

    def guarded_data(name):
        try:
            return load_data(name)
        except OSError:
            raise                   # (Numba's own answer: a file removed meanwhile is a miss)
        except Exception as e:
            _remove_damaged(f, f._data_path(name), e)
            raise OSError("damaged cache file removed") from e

    f._load_index, f._load_data = guarded_index, guarded_data


def _remove_damaged(f, path, err):
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
                sig = numba.types.void(*[getattr(numba.types, t) for t in argtypes])
                opts = dict(cache=True, error_model="numpy", nogil=True)
                try:
                    e = numba.cfunc(sig, **opts)(fn)
                except RuntimeError:        # no writable cache directory (see _njit)
                    numba.config.CACHE_DIR = _fallback_cache_dir()
                    try:
                        e = numba.cfunc(sig, **opts)(fn)
                    except RuntimeError:
                        opts["cache"] = False
                        e = numba.cfunc(sig, **opts)(fn)
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
