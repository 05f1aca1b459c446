"""Grad mode: no_grad, enable_grad, set_grad_enabled (thread-local, exception-safe)."""
import functools

from ..core import tape as _tp

is_grad_enabled = _tp.is_grad_enabled


class _Mode:
    _value = None

    def __init__(self, orig_func=None):
        # lets ``@no_grad`` (without parentheses) work, as in PyTorch
        self._func = orig_func if callable(orig_func) else None

    def __enter__(self):
        self._prev = _tp.is_grad_enabled()
        _tp._set_grad_enabled(self._value)
        return self

    def __exit__(self, *exc):
        _tp._set_grad_enabled(self._prev)
        return False

    def __call__(self, *args, **kwargs):
        if self._func is not None:
            with type(self)():
                return self._func(*args, **kwargs)
        func = args[0]

        @functools.wraps(func)
        def wrapper(*a, **kw):
            with self.clone():
                return func(*a, **kw)
        return wrapper

    def clone(self):
        return type(self)()


class no_grad(_Mode):
    """Disable recording: ``with tg.no_grad():`` or ``@tg.no_grad()``."""
    _value = False


class enable_grad(_Mode):
    _value = True


class set_grad_enabled(_Mode):
    """``set_grad_enabled(False)`` as a call takes effect at once; as a context
    manager it is undone on exit."""

    def __init__(self, mode):
        self._value = bool(mode)
        self._func = None
        self._prev = _tp.is_grad_enabled()
        _tp._set_grad_enabled(self._value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _tp._set_grad_enabled(self._prev)
        return False

    def clone(self):
        return set_grad_enabled(self._value)
