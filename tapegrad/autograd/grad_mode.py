"""Grad mode: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local,
exception-safe)."""
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
        if type(mode) is not bool:      # (PyTorch's argument parser: an int or np.bool_ is refused too)
            t = type(mode)
            raise TypeError("set_grad_enabled(): argument 'enabled' (position 1) must be bool, not %s"
                            % (t.__name__ if t.__module__ in ("builtins",) or t.__module__.startswith("tapegrad")
                               else "%s.%s" % (t.__module__.split(".")[0], t.__name__)))
        self._value = mode
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


class inference_mode(_Mode):
    """``with tg.inference_mode():`` (or ``@tg.inference_mode()``, ``@tg.inference_mode``):
    nothing is recorded, as under ``no_grad``, and the tensors made inside are
    inference tensors (``Tensor.is_inference()``).  ``inference_mode(False)`` turns it
    off (and grad mode on), as PyTorch's."""

    def __init__(self, mode=True):
        if callable(mode):          # @tg.inference_mode without parentheses
            self.mode = True
            self._func = mode
            return
        self.mode = bool(mode)
        self._func = None

    def __enter__(self):
        st = _tp.state()
        self._prev = (st.grad, st.inference)
        st.grad = not self.mode
        _tp.set_inference(st, self.mode)
        return self

    def __exit__(self, *exc):
        st = _tp.state()
        st.grad = self._prev[0]
        _tp.set_inference(st, self._prev[1])
        return False

    def clone(self):
        return inference_mode(self.mode)


def is_inference_mode_enabled():
    """Whether this thread is in ``tg.inference_mode``."""
    return _tp.state().inference
