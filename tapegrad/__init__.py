"""tapegrad: reverse-mode automatic differentiation on a flat Wengert tape.

Operations run eagerly on NumPy arrays and append one entry each to a per-thread
tape; ``backward()`` walks the tape once in compiled (Numba) code.
"""
import builtins as _builtins
import operator

import numpy as np

from . import autograd  # noqa: F401  (tg.autograd)
from .autograd import gradcheck  # noqa: F401
from .autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from .functions import *  # noqa: F401,F403
del to_dtype    # noqa: F821  (internal: ``Tensor.to``)
from .functions import (abs, add, amax, amin, argmax, argmin, bmm, broadcast_to, cat, clamp, clone,  # noqa: F401
                        concat, cos, diagonal, div, dot, exp, expm1, flatten, floor, log, log1p, log_softmax,
                        logsumexp, matmul, max, maximum, mean, min, minimum, mm, mul, mv, neg, permute, pow,
                        prod, relu, reshape, round, sigmoid, sign, sin, softmax, sqrt, squeeze, stack, std, sub,
                        sum, t, tan, tanh, transpose, unsqueeze, var, where)
from .core import tape as _tape
from .replay import NotReplayable, RecordedTape, TapeDivergence, compile, load_tape, record  # noqa: F401
from .profile import profile  # noqa: F401
from .core.tape import memory_stats  # noqa: F401
from .core.tensor import Tensor, device
from .core.tensor import check_device as _check_device
from .core.tensor import from_data as _from_data
from .core.tensor import unsupported_array_msg as _unsupported_array_msg

from ._version import __version__  # noqa: F401
from .core import random as _random
from .core.random import manual_seed  # noqa: F401

float64 = double = np.dtype(np.float64)
float32 = float = np.dtype(np.float32)
float16 = half = np.dtype(np.float16)
int64 = long = np.dtype(np.int64)
int32 = int = np.dtype(np.int32)
int16 = short = np.dtype(np.int16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)

clip = clamp


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data`` (float64 unless ``dtype`` says otherwise)."""
    if device is not None:
        _check_device(device)
    return _from_data(data, dtype, requires_grad)


def from_numpy(ndarray):
    arr = ndarray
    """A tensor sharing memory with ``arr``."""
    if not isinstance(arr, np.ndarray):
        raise TypeError("expected np.ndarray (got %s)" % type(arr).__name__)
    if arr.dtype.kind not in "biuf":
        if arr.dtype.kind == "c":
            raise TypeError("tapegrad does not support complex tensors")
        raise TypeError(_unsupported_array_msg(arr.dtype))
    return Tensor._const(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr))


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(operator.index(s) for s in size)
    for s in shape:
        if s < 0:
            raise RuntimeError("Trying to create tensor with negative dimension %d: %s" % (s, list(shape)))
    return shape


def _make(arr, requires_grad):
    out = Tensor._const(arr)
    if requires_grad:
        out._set_requires_grad(True, creation=True)
    return out


def zeros(*size, dtype=None, requires_grad=False):
    return _make(np.zeros(_shape(size), dtype or np.float64), requires_grad)


def ones(*size, dtype=None, requires_grad=False):
    return _make(np.ones(_shape(size), dtype or np.float64), requires_grad)


def empty(*size, dtype=None, requires_grad=False):
    return _make(np.empty(_shape(size), dtype or np.float64), requires_grad)


def full(size, fill_value, *, dtype=None, requires_grad=False):
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
        if dtype.kind == "f":
            dtype = np.float64
    return _make(np.full(_shape((size,)), fill_value, dtype), requires_grad)


def zeros_like(input, *, dtype=None, requires_grad=False):
    x = input
    return _make(np.zeros(x.shape, dtype or x.dtype), requires_grad)


def ones_like(input, *, dtype=None, requires_grad=False):
    x = input
    return _make(np.ones(x.shape, dtype or x.dtype), requires_grad)


def full_like(input, fill_value, *, dtype=None, requires_grad=False):
    x = input
    return _make(np.full(x.shape, fill_value, dtype or x.dtype), requires_grad)


def empty_like(input, *, dtype=None, requires_grad=False):
    x = input
    return _make(np.empty(x.shape, dtype or x.dtype), requires_grad)


def arange(start=0, end=None, step=1, *, dtype=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    arr = np.arange(start, end, step)
    if dtype is not None:
        arr = arr.astype(dtype)
    elif arr.dtype.kind == "f":
        arr = arr.astype(np.float64)
    return _make(arr, requires_grad)


def linspace(start, end, steps, *, dtype=None, requires_grad=False):
    dt = np.dtype(dtype or np.float64)
    if dt.kind == "b" and steps > 1:
        raise NotImplementedError("\"linspace_cpu\" not implemented for 'Bool'")
    if dt.kind in "iu" and steps > 1:     # (the bounds truncated first, the values toward zero)
        return _make(np.trunc(_linspace(_builtins.int(start), _builtins.int(end), steps)).astype(dt), requires_grad)
    if dt == np.float64 and steps > 1:
        return _make(_linspace(start, end, steps), requires_grad)
    return _make(np.linspace(start, end, steps).astype(dt), requires_grad)


def _linspace(start, end, steps):
    """PyTorch's linspace in float64: ``start + step * i`` for the first half and
    ``end - step * (steps - 1 - i)`` for the second, each rounded once (the fused
    multiply-add PyTorch's kernel compiles to), so the values are its to the bit."""
    step = (end - start) / (steps - 1)
    i = np.arange(steps, dtype=np.float64)
    first = i < steps // 2
    base = np.where(first, start * 1.0, end * 1.0)
    k = np.where(first, i, -(steps - 1 - i))           # base + step * k
    p = step * k
    # the rounding error of each product (Dekker's exact product) and of the sum (Knuth's two-sum)
    split = 134217729.0
    s1 = split * step
    sh = s1 - (s1 - step)
    sl = step - sh
    k1 = split * k
    kh = k1 - (k1 - k)
    kl = k - kh
    pe = ((sh * kh - p) + sh * kl + sl * kh) + sl * kl
    s = base + p
    bb = s - base
    se = (base - (s - bb)) + (p - bb)
    return s + (se + pe)


def eye(n, m=None, *, dtype=None, requires_grad=False):
    return _make(np.eye(n, m, dtype=dtype or np.float64), requires_grad)


def randn(*size, dtype=None, requires_grad=False):
    return _make(_random.generator().standard_normal(_shape(size)).astype(dtype or np.float64, copy=False), requires_grad)


def rand(*size, dtype=None, requires_grad=False):
    return _make(_random.generator().random(_shape(size)).astype(dtype or np.float64, copy=False), requires_grad)


_RANDINT_FORMS = (
    "randint() received an invalid combination of arguments - got (%s), but expected one of:\n"
    " * (int high, tuple of ints size, *, Generator generator, Tensor out = None, dtype dtype = None, "
    "layout layout = None, device device = None, bool pin_memory = False, bool requires_grad = False)\n"
    " * (int low, int high, tuple of ints size, *, Generator generator, Tensor out = None, dtype dtype = None, "
    "layout layout = None, device device = None, bool pin_memory = False, bool requires_grad = False)\n")


def randint(*args, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
            requires_grad=False, **kwargs):
    """``randint(high, size)`` or ``randint(low, high, size)``: integers drawn uniformly
    from [low, high) (low 0 by default), int64 unless ``dtype`` says otherwise."""
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    if device is not None:
        _check_device(device)
    bad = set(kwargs) - {"low", "high", "size"}
    if bad:
        raise TypeError("randint() got an unexpected keyword argument '%s'" % sorted(bad)[0])
    names = ("low", "high", "size") if len(args) == 3 or (len(args) == 2 and "size" in kwargs) \
        or (len(args) == 1 and "high" in kwargs) or "low" in kwargs else ("high", "size")
    if len(args) > len(names):
        raise TypeError(_RANDINT_FORMS % ", ".join(type(a).__name__ for a in args))
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in given or k not in names:
            raise TypeError(_RANDINT_FORMS % ", ".join([type(a).__name__ for a in args]
                                                     + ["%s=%s" % (n, type(v).__name__) for n, v in kwargs.items()]))
        given[k] = v
    missing = [n for n in names if n not in given and n != "low"]
    if missing:
        if len(missing) == 1 and args:
            raise TypeError(_RANDINT_FORMS % ", ".join(type(a).__name__ for a in args))
        raise TypeError('randint() missing %d required positional argument: %s'
                        % (len(missing), ", ".join('"%s"' % n for n in missing)))
    for pos, n in enumerate(names):
        v = given.get(n, 0)
        if n == "size":
            if not isinstance(v, (tuple, list)) or not _builtins.all(_is_int(s) for s in v):
                raise TypeError("randint(): argument 'size' (position %d) must be tuple of ints, not %s"
                                % (pos + 1, type(v).__name__))
        elif not _is_int(v):
            raise TypeError("randint(): argument '%s' (position %d) must be int, not %s"
                            % (n, pos + 1, type(v).__name__))
    low, high, size = _builtins.int(given.get("low", 0)), _builtins.int(given["high"]), _shape((given["size"],))
    if low >= high:
        raise RuntimeError("random_ expects 'from' to be less than 'to', but got from=%d >= to=%d" % (low, high))
    return _make(_random.generator().integers(low, high, size=size).astype(dtype or np.int64), requires_grad)


def _is_int(v):
    return isinstance(v, (_builtins.int, np.integer)) and not isinstance(v, (_builtins.bool, np.bool_)) \
        or (isinstance(v, Tensor) and v.ndim == 0 and v.dtype.kind in "iu")


def is_tensor(obj, /):
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()

from . import nn, optim  # noqa: E402,F401
from . import special  # noqa: E402,F401  (tg.special)
from .replay.compile import register_wrapper as _register_wrapper  # noqa: E402
from .replay.tapefile import register_function as _register_function  # noqa: E402
_register_wrapper(nn.Module, nn.modules.OptimizedModule)            # tg.compile(module), as torch.compile
_register_function("label_flags", nn.functional.label_flags)        # the labels' guard of a loss, in tape files


def __getattr__(name):
    if name == "distributions":         # tg.distributions, imported on first use
        import importlib
        return importlib.import_module(".distributions", __name__)
    if name == "Tape":
        import warnings
        warnings.warn("tapegrad.Tape is deprecated and will be removed in the next release: the recorded "
                      "tape of tg.record is tapegrad.RecordedTape", DeprecationWarning, stacklevel=2)
        return RecordedTape
    raise AttributeError("module 'tapegrad' has no attribute %r" % name)
