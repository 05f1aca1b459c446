"""NumPy's floating-point warnings kept out of the ops, as PyTorch has none.

NumPy warns (``RuntimeWarning: divide by zero encountered in log``, ``overflow
encountered in exp``...) where an op's result is inf or nan by IEEE arithmetic;
PyTorch computes the same values silently, so code that runs with ``-W error``
under PyTorch must under tapegrad too.  The ops compute under NumPy's "ignore"
error state, restored before they return: the user's own NumPy calls keep theirs.

``np.errstate`` costs about two microseconds, as much as recording an op; NumPy
keeps the state in a context variable (``numpy._core._ufunc_config``, NumPy 2),
which ``ignoring()`` sets and ``restore(token)`` resets for a fraction of that.
Where that variable is not there (NumPy 1), both fall back to ``np.seterr``.
A backward, a replay or any other whole pass uses ``np.errstate`` once (``ALL``).
"""
import functools

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar as _STATE, _make_extobj
    _IGNORE = _make_extobj(all="ignore")
except ImportError:         # (NumPy 1: the state is per thread, set by np.seterr)
    _STATE = None


def ALL():
    """``with quiet.ALL():`` around a whole pass (a backward, a replay)."""
    return np.errstate(all="ignore")


if _STATE is not None:
    ignoring = _STATE.set       # ignoring(IGNORE) -> token; restore(token)
    restore = _STATE.reset
    IGNORE = _IGNORE
else:
    def ignoring(state):
        return np.seterr(**state)

    def restore(token):
        np.seterr(**token)

    IGNORE = dict(all="ignore")


def call(f, *args, **kwargs):
    """``f(*args, **kwargs)`` with NumPy's floating-point errors ignored."""
    token = ignoring(IGNORE)
    try:
        return f(*args, **kwargs)
    finally:
        restore(token)


def wrap(f):
    """``f`` computing with NumPy's floating-point errors ignored (a decorator)."""
    def quiet(*args, **kwargs):
        token = ignoring(IGNORE)
        try:
            return f(*args, **kwargs)
        finally:
            restore(token)
    return functools.update_wrapper(quiet, f)
