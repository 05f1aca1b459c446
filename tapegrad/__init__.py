"""tapegrad: reverse-mode automatic differentiation on a flat Wengert tape.

Operations run eagerly on NumPy arrays and append one entry each to a per-thread
tape; ``backward()`` walks the tape once in compiled (Numba) code.
"""
__version__ = "0.1.0"        # (the same as pyproject.toml's: tests/test_demo.py checks)

import operator

import numpy as np

from . import autograd  # noqa: F401  (tg.autograd)
from .autograd import gradcheck  # noqa: F401
from .autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from .functions import *  # noqa: F401,F403
from .functions import (abs, add, amax, amin, argmax, argmin, bmm, broadcast_to, cat, clamp, clone,  # noqa: F401
                        concat, cos, diagonal, div, dot, exp, expm1, flatten, floor, log, log1p, log_softmax,
                        logsumexp, matmul, max, maximum, mean, min, minimum, mm, mul, mv, neg, permute, pow,
                        prod, relu, reshape, round, sigmoid, sign, sin, softmax, sqrt, squeeze, stack, std, sub,
                        sum, t, tan, tanh, transpose, unsqueeze, var, where)
from . import tape as _tape
from . import replay as _replay
from .replay import NotReplayable, Tape, TapeDivergence, compile, load_tape, record  # noqa: F401
from .profile import profile  # noqa: F401
from .tape import memory_stats  # noqa: F401
from .tensor import Tensor
from .tensor import unsupported_array_msg as _unsupported_array_msg

__version__ = "0.1.0"

float64 = double = np.dtype(np.float64)
float32 = float = np.dtype(np.float32)
float16 = half = np.dtype(np.float16)
int64 = long = np.dtype(np.int64)
int32 = int = np.dtype(np.int32)
bool = np.dtype(np.bool_)

clip = clamp
_rng = np.random.default_rng()


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (float64 unless ``dtype`` says otherwise)."""
    return Tensor(data, dtype=dtype, requires_grad=requires_grad)


def from_numpy(arr):
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
        out.requires_grad_(True, _creation=True)
    return out


def zeros(*size, dtype=None, requires_grad=False):
    return _make(np.zeros(_shape(size), dtype or np.float64), requires_grad)


def ones(*size, dtype=None, requires_grad=False):
    return _make(np.ones(_shape(size), dtype or np.float64), requires_grad)


def empty(*size, dtype=None, requires_grad=False):
    return _make(np.empty(_shape(size), dtype or np.float64), requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False):
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
        if dtype.kind == "f":
            dtype = np.float64
    return _make(np.full(_shape((size,)), fill_value, dtype), requires_grad)


def zeros_like(x, dtype=None, requires_grad=False):
    return _make(np.zeros(x.shape, dtype or x.dtype), requires_grad)


def ones_like(x, dtype=None, requires_grad=False):
    return _make(np.ones(x.shape, dtype or x.dtype), requires_grad)


def full_like(x, fill_value, dtype=None, requires_grad=False):
    return _make(np.full(x.shape, fill_value, dtype or x.dtype), requires_grad)


def empty_like(x, dtype=None, requires_grad=False):
    return _make(np.empty(x.shape, dtype or x.dtype), requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    arr = np.arange(start, end, step)
    if dtype is not None:
        arr = arr.astype(dtype)
    elif arr.dtype.kind == "f":
        arr = arr.astype(np.float64)
    return _make(arr, requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad=False):
    return _make(np.linspace(start, end, steps, dtype=dtype or np.float64), requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False):
    return _make(np.eye(n, m, dtype=dtype or np.float64), requires_grad)


def manual_seed(seed):
    """Seed tapegrad's random generator (a NumPy Generator)."""
    global _rng
    _rng = np.random.default_rng(seed)
    return _rng


def _random():
    if _tape.recording[0]:
        _replay.refuse_hook("it draws random numbers (a replay would reuse them)")


def randn(*size, dtype=None, requires_grad=False):
    _random()
    return _make(_rng.standard_normal(_shape(size)).astype(dtype or np.float64, copy=False), requires_grad)


def rand(*size, dtype=None, requires_grad=False):
    _random()
    return _make(_rng.random(_shape(size)).astype(dtype or np.float64, copy=False), requires_grad)


def randint(low, high=None, size=(), dtype=None):
    _random()
    if high is None:
        low, high = 0, low
    return Tensor._const(_rng.integers(low, high, size=size).astype(dtype or np.int64))


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(x):
    return x.numel()

from . import nn, optim  # noqa: E402,F401
