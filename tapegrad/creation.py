"""Creation functions (``tg.tensor``, ``tg.zeros``, ``tg.arange``...), the random
ones (``tg.randn``, ``tg.multinomial``, ``tg.normal``...) and the in-place random
methods (``Tensor.normal_``...), with PyTorch's signatures: ``device=`` accepts the
CPU (``"cpu"``, ``tg.device("cpu")``, ``None``) and refuses any other device as
PyTorch built without it does; ``generator=`` takes a ``tg.Generator`` (the default
generator, seeded by ``tg.manual_seed``, when omitted)."""

import builtins as _builtins
import operator

import numpy as np

from .core import random as _random
from .core.dtypes import torch_name as _torch_name
from .core.tape import is_grad_enabled as _is_grad_enabled
from .core.tensor import Tensor, check_device
from .core.tensor import from_data as _from_data
from .core.tensor import unsupported_array_msg as _unsupported_array_msg
from .ops import shape as _sh
from .functions import _broadcast_msg, _num
from .functions import clone as _clone
from .functions import where as _where

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "zeros", "ones", "empty", "full", "zeros_like",
           "ones_like", "empty_like", "full_like", "arange", "linspace", "logspace", "eye", "rand", "randn", "randint",
           "rand_like", "randn_like", "randint_like", "randperm", "multinomial", "normal", "poisson", "bernoulli",
           "is_tensor", "numel"]

_OUT = "out= is not supported by tapegrad"


def _device(device):
    if device is not None:
        check_device(device)


def _dtype(dtype):
    return None if dtype is None else np.dtype(dtype)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(operator.index(s) for s in size)
    for s in shape:
        if s < 0:
            raise RuntimeError("Trying to create tensor with negative dimension %d: %s" % (s, list(shape)))
    return shape


def _make(arr, requires_grad):
    if arr.dtype.kind == "c":
        from . import complex_tensor      # (imported late: its host ops number after linalg's)
        return complex_tensor.from_numpy_complex(arr, requires_grad)
    out = Tensor._const(arr)
    if requires_grad:
        out._set_requires_grad(True, creation=True)
    return out


def _check(out, device):
    if out is not None:
        raise TypeError(_OUT)
    _device(device)


# -- from data ----------------------------------------------------------------------
def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data`` (float64 unless ``dtype`` says otherwise)."""
    _device(device)
    dt = _dtype(dtype)
    if dt is not None and dt.kind == "c":
        return _complex_data(data, dt, requires_grad)
    try:
        return _from_data(data, dtype, requires_grad)
    except TypeError as e:
        if str(e) != _COMPLEX_REFUSED:
            raise
    return _complex_data(data, None, requires_grad)


_COMPLEX_REFUSED = "tapegrad does not support complex tensors"


def _complex_data(data, dt, requires_grad):
    """A complex tensor of ``data`` (numbers, nested lists, a complex array or tensor)."""
    from . import complex_tensor as _complex
    if isinstance(data, _complex.ComplexTensor):
        arr = data.detach().numpy()
    elif isinstance(data, Tensor):
        arr = data.numpy(force=True)
    else:
        arr = np.array(data)
    if dt is None:
        dt = np.dtype(np.complex64) if arr.dtype == np.complex64 else np.dtype(np.complex128)
    return _complex.from_numpy_complex(arr.astype(dt), requires_grad)


def from_numpy(ndarray):
    """A tensor sharing memory with ``ndarray`` (as PyTorch, also a strided one, such as
    a transposed array; one with a negative or zero stride, which PyTorch refuses or
    cannot write, is copied)."""
    arr = ndarray
    if not isinstance(arr, np.ndarray):
        raise TypeError("expected np.ndarray (got %s)" % type(arr).__name__)
    if arr.dtype.kind not in "biuf":
        if arr.dtype.kind == "c":
            from . import complex_tensor      # (a copy: the pair tensor's own array)
            return complex_tensor.from_numpy_complex(arr)
        raise TypeError(_unsupported_array_msg(arr.dtype))
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    shared = arr.flags.c_contiguous or all(st > 0 for st, n in zip(arr.strides, arr.shape) if n > 1)
    return Tensor._const(arr if shared else np.ascontiguousarray(arr))


def as_tensor(data, *, dtype=None, device=None):
    """``data`` as a tensor, sharing memory where it can: a tensor of the dtype asked
    is returned itself (another dtype: ``data.to(dtype)``, recorded), a NumPy array
    of a supported dtype shares its memory (``from_numpy``); anything else is copied
    as by ``tg.tensor``."""
    _device(device)
    dt = _dtype(dtype)
    if isinstance(data, Tensor):
        return data if dt is None or dt == data.dtype else _sh.to_dtype(data, dt)
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf" and (dt is None or dt == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype=dt)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=None):
    """``obj`` as a tensor (PyTorch's ``asarray``): ``copy=None`` shares memory with a
    tensor or a NumPy array when the dtype allows (as ``as_tensor``), ``copy=True``
    always copies, ``copy=False`` never does (a ValueError when it would have to).
    ``requires_grad=None`` is the tensor's own flag (False for other data).  Of a tensor,
    a copy or a cast is recorded (``clone``, ``to``), as in PyTorch."""
    _device(device)
    dt = _dtype(dtype)
    if isinstance(obj, Tensor):
        if copy is False and dt is not None and dt != obj.dtype:
            raise ValueError("can't alias tensor with dtype '%s' into dtype '%s'."
                             % (_torch_name(obj.dtype), _torch_name(dt)))
        if dt is not None and dt != obj.dtype:
            out = _sh.to_dtype(obj, dt)
        elif copy:
            out = _clone(obj)
        else:
            out = obj
        if requires_grad is None or bool(requires_grad) == out.requires_grad:
            return out
        out = out.detach()
        if requires_grad:
            out._set_requires_grad(True, creation=True)
        return out
    elif isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf":
        if copy is False and dt is not None and dt != obj.dtype:
            raise ValueError("can't alias tensor with dtype '%s' into dtype '%s'."
                             % (_torch_name(obj.dtype), _torch_name(dt)))
        if copy is False and any(st <= 0 for st, n in zip(obj.strides, obj.shape) if n > 1):
            raise ValueError("At least one stride in the given numpy array is negative, and tensors with negative "
                             "strides are not currently supported. (You can probably work around this by making a "
                             "copy of your array  with array.copy().) ")
        out = tensor(obj, dtype=dt) if copy or (dt is not None and dt != obj.dtype) else from_numpy(obj)
    else:
        if copy is False:
            raise ValueError("can't alias arbitrary sequence into a tensor.")
        out = tensor(obj, dtype=dt)
    if requires_grad:
        out._set_requires_grad(True, creation=True)
    return out


# -- filled ---------------------------------------------------------------------------
def zeros(*size, out=None, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros of shape ``size`` (float64 unless ``dtype`` says otherwise)."""
    _check(out, device)
    return _make(np.zeros(_shape(size), dtype or np.float64), requires_grad)


def ones(*size, out=None, dtype=None, device=None, requires_grad=False):
    """A tensor of ones of shape ``size`` (float64 unless ``dtype`` says otherwise)."""
    _check(out, device)
    return _make(np.ones(_shape(size), dtype or np.float64), requires_grad)


def empty(*size, out=None, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialized tensor of shape ``size`` (float64 unless ``dtype`` says otherwise)."""
    _check(out, device)
    return _make(np.empty(_shape(size), dtype or np.float64), requires_grad)


def full(size, fill_value, *, out=None, dtype=None, device=None, requires_grad=False):
    """A tensor of shape ``size`` filled with ``fill_value`` (its dtype: bool, int64 or the
    default float, unless ``dtype`` says otherwise)."""
    _check(out, device)
    fill_value = _fill_value("full", fill_value)
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
        if dtype.kind == "f":
            dtype = np.float64
    return _make(np.full(_shape((size,)), fill_value, dtype), requires_grad)


def _fill_value(fn, v):
    """A fill value as PyTorch takes it: a Python or NumPy number, or a tensor of one
    element (a string, a list, an array of several is a TypeError, as PyTorch's)."""
    if isinstance(v, Tensor) and v.numel() == 1:
        return v.item()
    if isinstance(v, (_builtins.bool, _builtins.int, _builtins.float, _builtins.complex)) or \
            (isinstance(v, np.generic) and v.dtype.kind in "biufc"):
        return v
    raise TypeError("%s(): argument 'fill_value' (position 2) must be Number, not %s"
                    % (fn, _type_name(v)))


def _type_name(v):
    """A type as PyTorch's argument errors name it: ``str``, ``Tensor``, ``numpy.ndarray``."""
    t = type(v)
    top = t.__module__.split(".")[0]
    return t.__name__ if top in ("builtins", "tapegrad") else "%s.%s" % (top, t.__qualname__)


def _like(input, dtype):
    if not isinstance(input, Tensor):
        raise TypeError("argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    return input.shape, np.dtype(dtype or input.dtype)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    """Zeros of ``input``'s shape and dtype (unless ``dtype`` says otherwise)."""
    _device(device)
    shape, dt = _like(input, dtype)
    return _make(np.zeros(shape, dt), requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    """Ones of ``input``'s shape and dtype (unless ``dtype`` says otherwise)."""
    _device(device)
    shape, dt = _like(input, dtype)
    return _make(np.ones(shape, dt), requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    """``fill_value`` in ``input``'s shape and dtype (unless ``dtype`` says otherwise)."""
    _device(device)
    shape, dt = _like(input, dtype)
    return _make(np.full(shape, _fill_value("full_like", fill_value), dt), requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    """An uninitialized tensor of ``input``'s shape and dtype (unless ``dtype`` says
    otherwise)."""
    _device(device)
    shape, dt = _like(input, dtype)
    return _make(np.empty(shape, dt), requires_grad)


def arange(start=0, end=None, step=1, *, out=None, dtype=None, device=None, requires_grad=False):
    """``start, start + step, ...`` up to ``end`` (excluded); ``arange(end)`` from 0. int64
    for integer arguments, else the default float."""
    _check(out, device)
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if not step or step != step:        # (0 or nan, as PyTorch's check reads it)
        raise RuntimeError("step must be nonzero")
    if not (np.isfinite(start) and np.isfinite(end)):
        raise RuntimeError("unsupported range: %s -> %s" % (start, end))
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    arr = np.arange(start, end, step)
    if dtype is not None:
        arr = arr.astype(dtype)
    elif arr.dtype.kind == "f":
        arr = arr.astype(np.float64)
    return _make(arr, requires_grad)


def linspace(start, end, steps, *, out=None, dtype=None, device=None, requires_grad=False):
    """``steps`` values evenly spaced from ``start`` to ``end`` (both included), PyTorch's
    to the bit in float64."""
    _check(out, device)
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


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, device=None, requires_grad=False):
    """``base ** linspace(start, end, steps)``."""
    _check(out, device)
    dt = np.dtype(dtype or np.float64)
    if dt.kind == "b" and steps > 1:
        raise NotImplementedError("\"logspace_cpu\" not implemented for 'Bool'")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    exps = _linspace(start, end, steps) if steps > 1 else np.full(steps, float(start))
    vals = np.power(float(base), exps)
    if dt.kind in "iu":
        vals = np.trunc(vals)
    return _make(vals.astype(dt), requires_grad)


def eye(n, m=None, *, out=None, dtype=None, device=None, requires_grad=False):
    """The ``n`` x ``m`` identity matrix (``m`` defaults to ``n``)."""
    _check(out, device)
    return _make(np.eye(n, m, dtype=dtype or np.float64), requires_grad)


def is_tensor(obj, /):
    """Whether ``obj`` is a tapegrad tensor."""
    return isinstance(obj, Tensor)


def numel(input):
    """The number of elements of ``input``."""
    return input.numel()


# -- random -----------------------------------------------------------------------------
def _float_dtype(dtype, kernel):
    dt = np.dtype(dtype or np.float64)
    if dt.kind != "f":
        raise NotImplementedError("\"%s\" not implemented for '%s'" % (kernel, _torch_name(dt)))
    return dt


def _normal_array(rng, shape, dt):
    if dt == np.float32:
        return rng.standard_normal(shape, dtype=np.float32)
    return rng.standard_normal(shape).astype(dt, copy=False)


def _uniform_array(rng, shape, dt):
    if dt == np.float32:
        return rng.random(shape, dtype=np.float32)
    return rng.random(shape).astype(dt, copy=False)


def randn(*size, generator=None, out=None, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Standard normal numbers of shape ``size`` (float64 unless ``dtype`` says otherwise)."""
    _check(out, device)
    dt = _float_dtype(dtype, "normal_kernel_cpu")
    return _make(_normal_array(_random.generator(generator, "randn"), _shape(size), dt), requires_grad)


def rand(*size, generator=None, out=None, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Numbers drawn uniformly from [0, 1), of shape ``size``."""
    _check(out, device)
    dt = _float_dtype(dtype, "check_uniform_bounds")
    return _make(_uniform_array(_random.generator(generator, "rand"), _shape(size), dt), requires_grad)


def rand_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Numbers drawn uniformly from [0, 1) in ``input``'s shape and dtype."""
    _device(device)
    shape, dt = _like(input, dtype)
    dt = _float_dtype(dt, "check_uniform_bounds")
    return _make(_uniform_array(_random.generator(generator, "rand_like"), shape, dt), requires_grad)


def randn_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal numbers in ``input``'s shape and dtype."""
    _device(device)
    shape, dt = _like(input, dtype)
    dt = _float_dtype(dt, "normal_kernel_cpu")
    return _make(_normal_array(_random.generator(generator, "randn_like"), shape, dt), requires_grad)


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
    _check(out, device)
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
    return _make(_integers(_random.generator(generator, "randint"), low, high, size, np.dtype(dtype or np.int64)),
                 requires_grad)


def _integers(rng, low, high, shape, dt):
    if low >= high:
        raise RuntimeError("random_ expects 'from' to be less than 'to', but got from=%d >= to=%d" % (low, high))
    return rng.integers(low, high, size=shape).astype(dt)


def _is_int(v):
    return isinstance(v, (_builtins.int, np.integer)) and not isinstance(v, (_builtins.bool, np.bool_)) \
        or (isinstance(v, Tensor) and v.ndim == 0 and v.dtype.kind in "iu")


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Integers drawn uniformly from [low, high) in ``input``'s shape and dtype;
    ``randint_like(input, high)`` as in PyTorch."""
    _device(device)
    if high is None:
        low, high = 0, low
    shape, dt = _like(input, dtype)
    arr = _integers(_random.generator(generator, "randint_like"), _builtins.int(low), _builtins.int(high), shape, dt)
    return _make(arr, requires_grad)


def randperm(n, *, generator=None, out=None, dtype=np.dtype(np.int64), device=None, requires_grad=False,
             pin_memory=False):
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype`` says otherwise)."""
    _check(out, device)
    n = operator.index(n)
    if n < 0:
        raise RuntimeError("Trying to create tensor with negative dimension %d: [%d]" % (n, n))
    dt = np.dtype(dtype)
    if dt.kind == "b":
        raise NotImplementedError("\"randperm\" not implemented for 'Bool'")
    if dt.kind in "iu" and n > 0 and n - 1 > np.iinfo(dt).max:
        raise RuntimeError("value cannot be converted to type %s without overflow" % _c_type(dt))
    return _make(_random.generator(generator, "randperm").permutation(n).astype(dt), requires_grad)


def _c_type(dt):
    return {"f": "float", "i": "int%d_t", "u": "uint%d_t"}[dt.kind].replace("%d", str(dt.itemsize * 8)) \
        if dt.kind != "f" else {2: "c10::Half", 4: "float", 8: "double"}[dt.itemsize]


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """``num_samples`` category indices per row of ``input`` (1-D, or 2-D: one row per
    distribution; the weights need not sum to 1), with or without replacement."""
    if out is not None:
        raise TypeError(_OUT)
    if not isinstance(input, Tensor):
        raise TypeError("multinomial(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    d = input._data
    if d.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if d.dtype.kind != "f":
        raise RuntimeError("multinomial only supports floating-point dtypes for input, got: %s" % _torch_name(d.dtype))
    k = operator.index(num_samples)
    if k <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n = d.shape[-1]
    if not replacement and k > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    p = np.atleast_2d(d).astype(np.float64)
    if not np.isfinite(p).all() or (p < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    tot = p.sum(axis=1, keepdims=True)
    if (tot <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = _random.generator(generator, "multinomial")
    if replacement:
        cdf = np.cumsum(p, axis=1)
        cdf /= cdf[:, -1:]
        u = rng.random((p.shape[0], k))
        res = np.stack([np.searchsorted(c, v, side="right") for c, v in zip(cdf, u)]) if p.shape[0] else \
            np.zeros((0, k), np.int64)
        res = np.minimum(res, n - 1)
    else:
        # the exponential race (PyTorch's own method): the k largest p / E, E ~ Exp(1)
        keys = p / rng.standard_exponential(p.shape)
        res = np.argsort(-keys, axis=1, kind="stable")[:, :k]
    res = np.asarray(res, np.int64)
    return Tensor._const(res[0] if d.ndim == 1 else res)


def _zero_grad_link(out, *inputs):
    """``out`` (an array drawn from distributions the tensors ``inputs`` parametrize)
    as PyTorch gives it: a result that requires grad when an input does, its gradient
    zero (PyTorch's normal, poisson and bernoulli are not reparametrized)."""
    t = Tensor._const(out)
    links = [v for v in inputs if isinstance(v, Tensor) and v.requires_grad]
    if not links or not _is_grad_enabled():
        return t
    never = Tensor._const(np.zeros((), np.bool_))
    for v in links:
        if v.dtype != t.dtype:
            v = _sh.to_dtype(v, t.dtype)
        t = t + _where(never, v, Tensor._const(np.zeros((), t.dtype)))
    return t


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, device=None,
           requires_grad=False, pin_memory=False):
    """Normal numbers of the given means and standard deviations: tensors (the result
    has their broadcast shape, and a zero gradient), or two numbers and ``size``."""
    _check(out, device)
    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    rng = _random.generator(generator, "normal")
    if not tm and not ts:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments - got (%s, %s), but expected "
                            "one of:\n * (Tensor mean, Tensor std, *, torch.Generator generator = None, "
                            "Tensor out = None)\n * (Tensor mean, float std = 1, *, torch.Generator generator = "
                            "None, Tensor out = None)\n * (float mean, Tensor std, *, torch.Generator generator = "
                            "None, Tensor out = None)\n * (float mean, float std, tuple of ints size, *, "
                            "torch.Generator generator = None, Tensor out = None, torch.dtype dtype = None, "
                            "torch.layout layout = None, torch.device device = None, bool pin_memory = False, "
                            "bool requires_grad = False)\n" % (type(mean).__name__, type(std).__name__))
        if std < 0:
            raise RuntimeError("normal expects std >= 0.0, but found std %s" % _num(std))
        dt = _float_dtype(dtype, "normal_kernel_cpu")
        arr = (_normal_array(rng, _shape((size,)), np.dtype(np.float64)) * float(std) + float(mean)).astype(dt)
        return _make(arr, requires_grad)
    m = mean._data if tm else mean
    s = std._data if ts else std
    for v in (m, s):
        if isinstance(v, np.ndarray) and v.dtype.kind != "f":
            raise NotImplementedError("\"normal_kernel_cpu\" not implemented for '%s'" % _torch_name(v.dtype))
    if ts and (s < 0).any():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if not ts and s < 0:
        raise RuntimeError("normal expects std >= 0.0, but found std %s" % _num(s))
    dt = m.dtype if tm else s.dtype         # (the mean's dtype, as PyTorch)
    if tm and ts:
        try:
            shape = np.broadcast_shapes(m.shape, s.shape)
        except ValueError:
            raise RuntimeError(_broadcast_msg(m.shape, s.shape)) from None
    else:
        shape = m.shape if tm else s.shape
    arr = np.asarray(rng.standard_normal(shape) * s + m, dt)
    return _zero_grad_link(arr, mean, std)


def poisson(input, generator=None):
    """Poisson counts of the rates ``input`` (in its dtype; a zero gradient)."""
    if not isinstance(input, Tensor):
        raise TypeError("poisson(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    d = input._data
    if d.dtype.kind != "f":
        raise NotImplementedError("\"poisson_cpu\" not implemented for '%s'" % _torch_name(d.dtype))
    if (d < 0).any() or np.isnan(d).any():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    arr = _random.generator(generator, "poisson").poisson(d).astype(d.dtype)
    return _zero_grad_link(np.asarray(arr), input)


_P_RANGE = ("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
            "improved?  If so, please report an enhancement request to PyTorch.)")


def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 draws, 1 with probability ``input`` (elementwise; or ``p``, a number, in
    ``input``'s shape), in ``input``'s dtype, with a zero gradient."""
    if out is not None:
        raise TypeError(_OUT)
    if not isinstance(input, Tensor):
        raise TypeError("bernoulli(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    d = input._data
    rng = _random.generator(generator, "bernoulli")
    if p is not None:
        if isinstance(p, Tensor):
            return _bernoulli_tensor(input, p._data, rng)
        if not 0 <= p <= 1:
            raise RuntimeError("bernoulli_ expects p to be in [0, 1], but got p=%s" % _num(p))
        return _zero_grad_link(np.asarray(rng.random(d.shape) < p, d.dtype), input)
    return _bernoulli_tensor(input, d, rng)


def _bernoulli_tensor(input, probs, rng):
    d = input._data
    if d.dtype.kind != "f":
        raise NotImplementedError("\"bernoulli_tensor_cpu_p_\" not implemented for '%s'" % _torch_name(d.dtype))
    pr = np.asarray(probs, np.float64)
    if not ((pr >= 0) & (pr <= 1)).all():
        raise RuntimeError(_P_RANGE)
    return _zero_grad_link(np.asarray(rng.random(np.broadcast_shapes(d.shape, pr.shape)) < pr, d.dtype), input)


# -- in-place random methods (Tensor.normal_ ...) -------------------------------------------
def _fill_random(self, values):
    """Write ``values`` into ``self`` as an in-place op (a leaf that requires grad
    refuses, as in PyTorch; earlier uses of ``self`` see their gradient cut)."""
    _sh.setitem(self, Ellipsis, Tensor._const(np.asarray(values, self.dtype)), view_op=False)
    return self


def _float_self(self, kernel):
    if self.dtype.kind != "f":
        raise NotImplementedError("\"%s\" not implemented for '%s'" % (kernel, _torch_name(self.dtype)))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with normal numbers of mean ``mean`` and standard deviation ``std``."""
    _float_self(self, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError("normal expects std >= 0.0, but found std %s" % _num(std))
    rng = _random.generator(generator, "normal_")
    return _fill_random(self, rng.standard_normal(self.shape) * std + mean)


def uniform_(self, *args, generator=None, **kw):
    """``uniform_(from=0, to=1)``: fill with numbers drawn uniformly from [from, to)."""
    lo, hi = _from_to("uniform_", args, kw, 0.0, 1.0)
    _float_self(self, "check_uniform_bounds")
    if lo > hi:
        raise RuntimeError("uniform_ expects to return a [from, to) range, but found from=%s > to=%s"
                           % (_num(lo), _num(hi)))
    rng = _random.generator(generator, "uniform_")
    return _fill_random(self, lo + (hi - lo) * rng.random(self.shape))


def _from_to(name, args, kw, lo, hi):
    vals = [lo, hi]
    if len(args) > 2:
        raise TypeError("%s() takes at most 2 positional arguments (%d given)" % (name, len(args)))
    vals[:len(args)] = args
    for k, v in kw.items():
        if k not in ("from", "to"):
            raise TypeError("%s() got an unexpected keyword argument '%s'" % (name, k))
        i = 0 if k == "from" else 1
        if i < len(args):
            raise TypeError("%s() got multiple values for argument '%s'" % (name, k))
        vals[i] = v
    return vals


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with exponential numbers of rate ``lambd``."""
    if self.dtype.kind != "f":
        raise RuntimeError("Exponential distribution is a continuous probability distribution. dtype must be a "
                           "floating point but you specified %s" % _torch_name(self.dtype))
    if not lambd > 0:
        raise RuntimeError("exponential_ expects lambda > 0.0, but found lambda=%s" % _num(lambd))
    rng = _random.generator(generator, "exponential_")
    return _fill_random(self, rng.standard_exponential(self.shape) / lambd)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1 draws, 1 with probability ``p`` (a number, or a tensor of them)."""
    rng = _random.generator(generator, "bernoulli_")
    if isinstance(p, Tensor):
        pr = p._data
        if not ((pr >= 0) & (pr <= 1)).all():
            raise RuntimeError(_P_RANGE)
        return _fill_random(self, rng.random(self.shape) < np.broadcast_to(pr, self.shape))
    if not 0 <= p <= 1:
        raise RuntimeError("bernoulli_ expects p to be in [0, 1], but got p=%s" % _num(p))
    return _fill_random(self, rng.random(self.shape) < p)


def random_(self, *args, generator=None, **kw):
    """``random_(from=0, to=None)``: fill with integers drawn uniformly from [from, to);
    ``random_(to)`` from [0, to); ``random_()`` from [0, 2**mantissa] for a float
    dtype, [0, the dtype's maximum] for an integer one."""
    rng = _random.generator(generator, "random_")
    dt = self.dtype
    if not args and not kw:
        if dt.kind == "f":
            hi = (1 << (np.finfo(dt).nmant + 1)) + 1
        else:
            hi = 2 if dt.kind == "b" else _builtins.int(np.iinfo(dt).max) + 1
        return _fill_random(self, rng.integers(0, hi, self.shape))
    if len(args) == 1 and not kw:
        lo, hi = 0, args[0]
    else:
        lo, hi = _from_to("random_", args, kw, 0, None)
        if hi is None:
            hi = _builtins.int(np.iinfo(dt).max) + 1 if dt.kind in "iu" else 1 << (np.finfo(dt).nmant + 1)
    return _fill_random(self, _integers(rng, _builtins.int(lo), _builtins.int(hi), self.shape, np.dtype(np.int64)))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy numbers of median ``median`` and scale ``sigma``."""
    _float_self(self, "cauchy_cpu")
    rng = _random.generator(generator, "cauchy_")
    return _fill_random(self, median + sigma * rng.standard_cauchy(self.shape))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with log-normal numbers (exp of a normal of mean ``mean``, deviation ``std``)."""
    _float_self(self, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError("log_normal_ expects std > 0.0, but found std=%s" % _num(std))
    rng = _random.generator(generator, "log_normal_")
    return _fill_random(self, rng.lognormal(mean, std, self.shape))


def geometric_(self, p, *, generator=None):
    """Fill with geometric numbers (the trial of the first success, from 1) of success
    probability ``p``."""
    if not 0 < p < 1:
        raise RuntimeError("geometric_ expects p to be in (0, 1), but got p=%s" % _num(p))
    rng = _random.generator(generator, "geometric_")
    return _fill_random(self, rng.geometric(p, self.shape))


def _new(self, size, dtype, device, requires_grad, fill):
    _device(device)
    arr = np.empty(_shape(size), np.dtype(dtype or self.dtype))
    if fill is not None:
        arr[...] = fill
    return _make(arr, requires_grad)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros of shape ``size``, of this tensor's dtype unless ``dtype`` says otherwise."""
    return _new(self, size, dtype, device, requires_grad, 0)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    """A tensor of ones of shape ``size``, of this tensor's dtype unless ``dtype`` says otherwise."""
    return _new(self, size, dtype, device, requires_grad, 1)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    """An uninitialized tensor of shape ``size``, of this tensor's dtype unless ``dtype`` says otherwise."""
    return _new(self, size, dtype, device, requires_grad, None)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A tensor of shape ``size`` filled with ``fill_value``, of this tensor's dtype unless
    ``dtype`` says otherwise."""
    return _new(self, (size,), dtype, device, requires_grad, fill_value)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    """A copy of ``data`` as a new leaf, of this tensor's dtype unless ``dtype`` says otherwise."""
    _device(device)
    if isinstance(data, Tensor):
        data = data.detach()._data
    return _from_data(data, np.dtype(dtype or self.dtype), requires_grad)


def _bernoulli_m(self, p=None, *, generator=None):
    return bernoulli(self, p, generator=generator)


def _multinomial_m(self, num_samples, replacement=False, *, generator=None):
    return multinomial(self, num_samples, replacement, generator=generator)


# the methods
for _name, _fn in {"normal_": normal_, "uniform_": uniform_, "exponential_": exponential_, "bernoulli_": bernoulli_,
           "random_": random_, "cauchy_": cauchy_, "log_normal_": log_normal_, "geometric_": geometric_,
           "bernoulli": _bernoulli_m, "multinomial": _multinomial_m,
                    "new_zeros": new_zeros, "new_ones": new_ones, "new_empty": new_empty, "new_full": new_full,
                    "new_tensor": new_tensor}.items():
    setattr(Tensor, _name, _fn)
