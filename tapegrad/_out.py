"""``out=``: PyTorch's functions that write their result into a given tensor.

``install`` wraps tapegrad's public functions whose PyTorch counterparts take
``out=`` (the elementwise unary recorders excepted: they are bound with no wrapper,
and ``out=`` to them is a TypeError).  The result is computed as usual and copied
into ``out`` with PyTorch's rules: no autograd (an input or ``out`` that requires
grad raises, while grad is enabled), a result dtype that can be cast to ``out``'s
(float to int, or anything but bool to bool, cannot), and an ``out`` of another
shape resized, with PyTorch's warning when it held elements.  ``out`` itself is
returned (a tuple of them for a function of several results).
"""
import functools
import warnings

import numpy as np

from .core.dtypes import torch_name
from .core.tape import is_grad_enabled
from .core.tensor import Tensor

# PyTorch 2.13's functions with an out= parameter that tapegrad has (those whose documented signature
# has one, and those whose overload with a dim has one: sum, prod, argmax...)
NAMES = """argmax argmin clamp_max clamp_min diff log_softmax prod scatter scatter_add slogdet softmax sum take
abs absolute add addbmm addcdiv addcmul addmm addmv addr all amax amin angle any arange arctan2 atan2
baddbmm bernoulli bitwise_and bitwise_not bitwise_or bitwise_xor bmm cat cholesky_solve clamp clip column_stack
complex concat concatenate conj_physical copysign cross cummax cummin cumprod cumsum diag div divide dot dstack
empty eq exp eye fix floor_divide fmod full gather ge ger greater greater_equal gt histc hstack hypot igamma
igammac index_add index_copy index_select inner inverse isneginf isposinf kron kthvalue le lerp less less_equal
linspace logaddexp logaddexp2 logcumsumexp logical_and logical_not logical_or logical_xor logit logspace logsumexp
lt masked_select matmul matrix_power max maximum mean median min minimum mm msort mul multinomial multiply mv
mvlgamma nan_to_num nanmedian nanquantile ne neg negative nonzero norm normal not_equal ones outer polar polygamma
pow quantile rand randint randn randperm remainder searchsorted sgn sort square stack std sub subtract
take_along_dim tensordot topk tril triu true_divide var vstack where xlogy zeros""".split()

_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}

_RESIZED = ("An output with one or more elements was resized since it had shape %s, which does not match the required "
            "output shape %s. This behavior is deprecated, and in a future PyTorch release outputs will not be resized "
            "unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
            "elements with t.resize_(0).")


def can_cast(from_, to):
    """``torch.can_cast``: not to a lower kind (bool < integer < float < complex)."""
    return _RANK[np.dtype(to).kind] >= _RANK[np.dtype(from_).kind]


def write_out(fname, out, result):
    """Copy ``result`` (a tensor or a tuple of them) into ``out``; returns ``out``."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError("%s(): argument 'out' must be tuple of %d Tensors, not %s"
                            % (fname, len(result), type(out).__name__))
        written = [write_out(fname, o, r) for o, r in zip(out, result)]
        return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
    if not isinstance(out, Tensor):
        raise TypeError("%s(): argument 'out' must be Tensor, not %s" % (fname, type(out).__name__))
    if not isinstance(result, Tensor):
        raise TypeError("%s(): out= is given but the result is not a tensor" % fname)
    if is_grad_enabled() and (result.requires_grad or out.requires_grad):
        raise RuntimeError("%s(): functions with out=... arguments don't support automatic differentiation, but one "
                           "of the arguments requires grad." % fname)
    if not can_cast(result.dtype, out.dtype):
        raise RuntimeError("result type %s can't be cast to the desired output type %s"
                           % (torch_name(result.dtype), torch_name(out.dtype)))
    r = result._data
    if out.shape != r.shape:
        if out._data.size:
            warnings.warn(_RESIZED % (list(out.shape), list(r.shape)), UserWarning, stacklevel=3)
        out._data = np.empty(r.shape, out.dtype)
    np.copyto(out._data, r, casting="unsafe")
    out._written_()
    return out


def takes_out(f, name):
    """``f`` with PyTorch's ``out=`` handled around it."""
    @functools.wraps(f)
    def with_out(*args, out=None, **kwargs):
        if out is None:
            return f(*args, **kwargs)
        return write_out(name, out, f(*args, **kwargs))
    return with_out


def install(namespace):
    """Wrap the functions of ``namespace`` (tapegrad's) named in ``NAMES``."""
    for name in NAMES:
        f = namespace.get(name)
        if f is None or getattr(f, "__module__", "") == "tapegrad.ops.elementwise" \
                or "_unary_recorder" in getattr(f, "__qualname__", ""):
            continue
        namespace[name] = takes_out(f, name)
