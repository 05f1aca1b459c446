"""Numba configuration shared by every compiled kernel.

All kernels are compiled with ``cache=True``.  Numba writes the cache next to the
source, falls back to a user-wide directory when the package is read-only, and
raises at decoration time when nothing is writable; ``jit`` then points Numba at a
temporary directory instead of letting ``import tapegrad`` fail.

``error_model="numpy"`` makes division by zero give inf/nan (PyTorch's values)
instead of raising ZeroDivisionError inside the sweep.
"""
import os
import tempfile

import numba
from numba.core import cgutils, types
from numba.extending import intrinsic

_ALL = []   # every dispatcher, so a changed kernel source can flush them all


def _fallback_cache_dir():
    d = os.path.join(tempfile.gettempdir(), "tapegrad-numba-cache")
    os.makedirs(d, exist_ok=True)
    return d


def jit(fn=None, **kw):
    """``numba.njit(cache=True, error_model="numpy")`` that never fails at import."""
    if fn is None:
        return lambda f: jit(f, **kw)
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
    _ALL.append(d)
    return d


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
