"""``tg.amp``: automatic mixed precision, as a CPU float64 program meets it.

``autocast`` is a context manager (and decorator) that changes nothing: on the CPU
PyTorch would run matrix products in bfloat16 inside it; tapegrad keeps each
tensor's dtype (float64 by default), and for "cuda" it warns and disables itself as
PyTorch does without CUDA.  ``GradScaler("cuda")`` warns and passes through as
PyTorch's without CUDA (``scale`` returns its input, ``step`` calls the optimizer's);
``GradScaler("cpu")`` scales the loss and unscales the gradients, skipping a step
with a non-finite gradient, as PyTorch's does.
"""
import functools
import warnings

import numpy as np

from .autograd.grad_mode import no_grad
from .core.tensor import Tensor, device as _device

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]


def is_autocast_available(device_type):
    """Whether ``autocast`` may be used for ``device_type``: the CPU only."""
    return device_type == "cpu"


class autocast:
    """``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a
    context manager and decorator that leaves every dtype as it is."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError("Expected `device_type` of type `str`, got: `{}`".format(type(device_type)))
        _device(device_type)              # (PyTorch's error for an unknown device type)
        self.device = device_type
        self.fast_dtype = dtype
        self._enabled = enabled
        if device_type == "cuda" and enabled:
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", UserWarning,
                          stacklevel=2)
            self._enabled = False
        elif device_type not in ("cpu", "cuda") and enabled:
            warnings.warn("User provided device_type of '{}', but it is not available. Disabling"
                          .format(device_type), UserWarning, stacklevel=2)
            self._enabled = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def run(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return run


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator of a custom ``Function.forward`` under autocast: returns it unchanged."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator of a custom ``Function.backward`` under autocast: returns it unchanged."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd


_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    """Loss scaling: ``scaler.scale(loss).backward()``, ``scaler.step(optimizer)``,
    ``scaler.update()``.  Enabled on the CPU only (for "cuda" it warns and passes
    through, as PyTorch without CUDA)."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = {}

    def is_enabled(self):
        return self._enabled

    def _state(self, optimizer):
        return self._per_optimizer_states.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})

    def _check_scale(self, funcname):
        if self._scale is None:
            raise AssertionError("Attempted {} but _scale is None.  This may indicate your script did not use "
                                 "scaler.scale(loss or outputs) earlier in the iteration.".format(funcname))

    def scale(self, outputs):
        """``outputs`` (a tensor, or tensors in lists and tuples) times the scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._scale = float(np.float32(self._init_scale))     # (PyTorch keeps it in float32)
            self._growth_tracker = self._init_growth_tracker
        if isinstance(outputs, Tensor):
            return outputs * Tensor._const(np.array(self._scale, np.float32))
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(v) for v in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale (once per step), noting any
        non-finite one."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        st = self._state(optimizer)
        if st["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv = np.float32(1.0 / self._scale)
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype == np.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    g._data[...] = g._data * inv.astype(g._data.dtype)
                    g._written_()
                    found = found or not np.isfinite(g._data).all()
        st["found_inf"] = found
        st["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step()`` on the unscaled gradients, skipped when one is not finite."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale("step")
        st = self._state(optimizer)
        if st["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == _READY:
            self.unscale_(optimizer)
        out = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = _STEPPED
        return out

    def update(self, new_scale=None):
        """Halve the scale (``backoff_factor``) after a step with a non-finite gradient;
        double it (``growth_factor``) after ``growth_interval`` steps without one."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            self._scale = float(np.float32(new_scale.item() if isinstance(new_scale, Tensor) else new_scale))
        else:
            found = [st["found_inf"] for st in self._per_optimizer_states.values() if st["found_inf"] is not None]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(found):
                self._scale = float(np.float32(self._scale * self._backoff_factor))
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale = float(np.float32(self._scale * self._growth_factor))
                    self._growth_tracker = 0
        self._per_optimizer_states = {}

    def get_scale(self):
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._init_growth_tracker if self._growth_tracker is None
                else self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale = float(np.float32(state_dict["scale"]))
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker = state_dict["_growth_tracker"]
