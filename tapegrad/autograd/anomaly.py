"""Anomaly detection: ``detect_anomaly`` / ``set_detect_anomaly`` (PyTorch's API).

While it is on, every recorded operation notes the user's source line, and
backward runs the Python walk of the differentiable reverse (slower) so that the
gradients each entry produces can be checked: the first one that holds NaN or inf
raises, naming the operation and the line that recorded it.
"""
import warnings

from ..core import tape as _tp


def is_anomaly_enabled():
    return _tp.anomaly[0]


def is_anomaly_check_nan_enabled():
    return _tp.anomaly[1]


def _set(mode, check_nan):
    _tp.anomaly[0], _tp.anomaly[1] = bool(mode), bool(check_nan)
    T = _tp.state().tape
    if T is not None and not T.sealed:
        T.limit = 0 if mode else min(T.cap, _tp.ROTATE_ENTRIES)    # the next op notes its source


class set_detect_anomaly:
    """``set_detect_anomaly(True)`` turns anomaly detection on at once; as a context
    manager it is undone on exit."""

    def __init__(self, mode, check_nan=True):
        self._prev = (_tp.anomaly[0], _tp.anomaly[1])
        _set(mode, check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(*self._prev)
        return False


class detect_anomaly:
    """Context manager (or decorator) that enables anomaly detection."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self):
        self._prev = (_tp.anomaly[0], _tp.anomaly[1])
        _set(True, self.check_nan)
        return self

    def __exit__(self, *exc):
        _set(*self._prev)
        return False

    def __call__(self, func):
        import functools
        check_nan = self.check_nan

        @functools.wraps(func)
        def wrapper(*a, **kw):
            with set_detect_anomaly(True, check_nan):
                return func(*a, **kw)
        return wrapper
