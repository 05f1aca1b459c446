"""Normalisations of ``tg.nn.functional``: layer_norm is one entry (a host op, NumPy
forward and both reverses: PyTorch's LayerNorm formulas); group_norm and instance_norm
use it on a reshaped input; batch_norm and rms_norm are compositions."""
import math

import numpy as np

from .. import _jit
from .. import functions as _f
from .._jit import jit
from ..autograd.grad_mode import no_grad
from ..core.registry import SAVE_A, SAVE_B
from ..core.tensor import Tensor
from . import _host

__all__ = ["layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "local_response_norm"]


# -- layer_norm: ints (number of normalised trailing dims, has weight, has bias), floats (eps, -) ------------
def _moments(x, k, eps):
    """(x - mean, 1 / sqrt(var + eps), the normalised axes): the biased variance, as
    PyTorch's LayerNorm."""
    if k == 1:          # (the common case: one axis, with einsum's single pass for the squares)
        mu = x.mean(-1, keepdims=True)
        d = x - mu
        var = np.einsum("...i,...i->...", d, d)[..., None] / x.shape[-1]
        return d, 1.0 / np.sqrt(var + eps), (x.ndim - 1,)
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axes, keepdims=True)
    d = x - mu
    rstd = 1.0 / np.sqrt((d * d).mean(axes, keepdims=True) + eps)
    return d, rstd, axes


_NONE, _NONE2 = np.empty(0), np.empty((0, 0))     # (an absent weight, bias or adjoint for the row kernels)


@jit
def _ln_rows(x, w, b, eps, y):
    """layer_norm of each row of ``x`` (rows, n) into ``y``, weight ``w`` and bias ``b``
    when not empty: the NumPy path's formulas (two-pass moments, the biased variance),
    each row read from memory once rather than once per NumPy pass."""
    rows, n = x.shape
    for r in range(rows):
        s = 0.0
        for j in range(n):
            s += x[r, j]
        mu = s / n
        q = 0.0
        for j in range(n):
            d = x[r, j] - mu
            q += d * d
        rstd = 1.0 / math.sqrt(q / n + eps)
        for j in range(n):
            v = (x[r, j] - mu) * rstd
            if w.size:
                v *= w[j]
            if b.size:
                v += b[j]
            y[r, j] = v


@jit
def _ln_rows_rev(x, g, w, eps, dx, dw, db):
    """The adjoints of ``_ln_rows`` for adjoint ``g``: ``dx`` written, ``dw`` and ``db``
    accumulated, each only when not empty (PyTorch's LayerNorm backward formulas)."""
    rows, n = x.shape
    for r in range(rows):
        s = 0.0
        for j in range(n):
            s += x[r, j]
        mu = s / n
        q = 0.0
        for j in range(n):
            d = x[r, j] - mu
            q += d * d
        rstd = 1.0 / math.sqrt(q / n + eps)
        if dx.size:
            s1 = 0.0
            s2 = 0.0
            for j in range(n):
                dh = g[r, j] * w[j] if w.size else g[r, j]
                s1 += dh
                s2 += dh * ((x[r, j] - mu) * rstd)
            m1, m2 = s1 / n, s2 / n
            for j in range(n):
                dh = g[r, j] * w[j] if w.size else g[r, j]
                dx[r, j] = (dh - m1 - ((x[r, j] - mu) * rstd) * m2) * rstd
        if dw.size:
            for j in range(n):
                dw[j] += g[r, j] * ((x[r, j] - mu) * rstd)
        if db.size:
            for j in range(n):
                db[j] += g[r, j]


def _rows_kernel_fits(x, k, params):
    """The row kernels take float64, C-contiguous arrays normalised over the last axis
    (once the compiled kernels are loaded); anything else takes the NumPy path."""
    return (_jit.READY[0] and k == 1 and x.size and x.dtype == np.float64 and x.flags.c_contiguous
            and all(a.dtype == np.float64 for a in params))


def _ln_fwd(arrays, ints, floats):
    k, has_w, has_b = ints[:3]
    x = arrays[0]
    if _rows_kernel_fits(x, k, arrays[1:]):
        y = np.empty_like(x)
        n = x.shape[-1]
        _ln_rows(x.reshape(-1, n), np.ascontiguousarray(arrays[1]) if has_w else _NONE,
                 np.ascontiguousarray(arrays[1 + has_w]) if has_b else _NONE, float(floats[0]), y.reshape(-1, n))
        return y
    y, rstd, _ = _moments(x, k, floats[0])
    y *= rstd
    if has_w:
        y *= arrays[1]
    if has_b:
        y += arrays[1 + has_w]
    return y.astype(x.dtype, copy=False)


def _ln_rev(xs, y, g, ints, floats, needs):
    """The adjoints with tapegrad's operations (differentiable again)."""
    k, has_w, has_b = ints[:3]
    x = xs[0]
    axes = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))
    mu = x.mean(axes, keepdim=True)
    d = x - mu
    rstd = _f.rsqrt((d * d).mean(axes, keepdim=True) + floats[0])
    xhat = d * rstd
    out = [None] * len(needs)
    if needs[0]:
        dxhat = g * xs[1] if has_w else g
        out[0] = rstd * (dxhat - dxhat.mean(axes, keepdim=True) - xhat * (dxhat * xhat).mean(axes, keepdim=True))
    if has_w and needs[1]:
        out[1] = (g * xhat).sum(lead) if lead else g * xhat
    if has_b and needs[1 + has_w]:
        out[1 + has_w] = g.sum(lead) if lead else g
    return out


def _ln_arr_rev(xs, y, g, ints, floats, needs):
    k, has_w, has_b = ints[:3]
    x = xs[0]
    if _rows_kernel_fits(x, k, xs[1:1 + has_w]) and g.dtype == np.float64:
        n = x.shape[-1]
        out = [None] * len(needs)
        dx = np.empty_like(x) if needs[0] else _NONE2
        dw = np.zeros(n) if has_w and needs[1] else _NONE
        db = np.zeros(n) if has_b and needs[1 + has_w] else _NONE
        _ln_rows_rev(x.reshape(-1, n), np.ascontiguousarray(g).reshape(-1, n),
                     np.ascontiguousarray(xs[1]) if has_w else _NONE, float(floats[0]), dx.reshape(-1, n), dw, db)
        if needs[0]:
            out[0] = dx
        if has_w and needs[1]:
            out[1] = dw
        if has_b and needs[1 + has_w]:
            out[1 + has_w] = db
        return out
    xhat, rstd, axes = _moments(x.astype(np.float64, copy=False), k, floats[0])
    xhat *= rstd
    lead = tuple(range(x.ndim - k))
    n = 1
    for a in axes:
        n *= x.shape[a]
    out = [None] * len(needs)
    outer, inner = "pqrstuvw"[:x.ndim - k], "abcdefgh"[:k]        # (einsum's single passes)
    full = outer + inner
    if needs[0]:
        dxhat = g * xs[1] if has_w else g
        proj = np.einsum("%s,%s->%s" % (full, full, outer), dxhat, xhat).reshape(x.shape[:x.ndim - k] + (1,) * k)
        dx = dxhat - dxhat.mean(axes, keepdims=True)
        dx -= xhat * (proj / n)
        dx *= rstd
        out[0] = dx
    if has_w and needs[1]:
        out[1] = np.einsum("%s,%s->%s" % (full, full, inner), g, xhat)
    if has_b and needs[1 + has_w]:
        out[1 + has_w] = g.sum(lead) if lead else g
    return out


_LAYER_NORM = _host.nn_op("layer_norm", "NativeLayerNormBackward0", _ln_fwd, _ln_rev, _ln_arr_rev, SAVE_A | SAVE_B)


def _shape_text(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing
    ``normalized_shape`` dimensions (var the biased variance)."""
    if not isinstance(input, Tensor):
        raise TypeError("layer_norm(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    shape = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else tuple(
        int(s) for s in normalized_shape)
    k = len(shape)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError("Expected %s to be of same shape as normalized_shape, but got %s of shape %s and "
                               "normalized_shape = %s" % (name, name, _shape_text(t.shape), _shape_text(shape)))
    if k == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                           "element, but got normalized_shape = []")
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError("Given normalized_shape=%s, expected input with shape [*, %s], but got input of size%s"
                           % (_shape_text(shape), ", ".join(str(s) for s in shape), _shape_text(input.shape)))
    if input.dtype.kind != "f":
        raise RuntimeError("\"LayerNormKernelImpl\" not implemented for '%s'" % input.dtype.name)
    inputs = [input] + [t for t in (weight, bias) if t is not None]
    ints = [k, int(weight is not None), int(bias is not None)]
    out = _ln_fwd([t._data for t in inputs], ints, (float(eps), 0.0))
    return _host.record(_LAYER_NORM, inputs, out, ints, (float(eps), 0.0))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Each sample's channels split into ``num_groups`` groups, each normalised over its
    channels and spatial positions, then ``* weight + bias`` per channel."""
    if input.ndim < 2:
        raise RuntimeError("Expected at least 2 dimensions for input tensor but received %d" % input.ndim)
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError("Expected number of channels in input to be divisible by num_groups, but got input of "
                           "shape %s and num_groups=%d" % (_shape_text(input.shape), num_groups))
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.shape[0] != c):
            raise RuntimeError("Expected %s to be a vector of size equal to the number of channels in input, but got "
                               "%s of shape %s and input of shape %s" % (name, name, _shape_text(t.shape),
                                                                          _shape_text(input.shape)))
    x = layer_norm(input.reshape(n, num_groups, -1), (input.numel() // max(n * num_groups, 1),), None, None, eps)
    x = x.reshape(input.shape)
    cshape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        x = x * weight.reshape(cshape)
    if bias is not None:
        x = x + bias.reshape(cshape)
    return x


def _verify_batch_size(shape):
    n = shape[0]
    for s in shape[2:]:
        n *= s
    if n == 1:
        raise ValueError("Expected more than 1 value per channel when training, got input size %s"
                         % _torch_size(shape))


def _torch_size(shape):
    return "torch.Size([%s])" % ", ".join(str(s) for s in shape)


def _update_running(running, new, momentum):
    _host.refuse_replay("it updates a normalisation's running statistics in place (a replay would not)")
    with no_grad():
        running._write_(((1 - momentum) * running._data + momentum * new).astype(running.dtype))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Per channel (dimension 1), ``(x - mean) / sqrt(var + eps) * weight + bias``: the
    batch's mean and biased variance in training (the running statistics then move by
    ``momentum`` toward the batch's mean and unbiased variance, in place), the running
    statistics otherwise."""
    if training:
        _verify_batch_size(tuple(input.shape))
    if training and eps <= 0.0:
        raise ValueError("batch_norm eps must be positive during training, but got %s" % eps)
    if eps < 0.0:
        raise ValueError("batch_norm eps must be non-negative, but got %s" % eps)
    if input.ndim < 2:
        raise ValueError("Expected 2D or more input (got %dD input)" % input.ndim)
    c = input.shape[1]
    cshape = (1, c) + (1,) * (input.ndim - 2)
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and t.numel() != c:
            raise RuntimeError("running_mean should contain %d elements not %d" % (c, t.numel())
                               if name.startswith("running") else
                               "%s should contain %d elements not %d" % (name, c, t.numel()))
    axes = (0,) + tuple(range(2, input.ndim))
    if training or running_mean is None or running_var is None:
        mean = input.mean(axes, keepdim=True)
        d = input - mean
        var = (d * d).mean(axes, keepdim=True)
        if training:
            count = input.numel() // c
            m = mean._data.reshape(-1)
            v = var._data.reshape(-1) * (count / max(count - 1, 1))
            if running_mean is not None:
                _update_running(running_mean, m, momentum)
            if running_var is not None:
                _update_running(running_var, v, momentum)
        x = d * _f.rsqrt(var + eps)
    else:
        return _by_running_stats(input, running_mean, running_var, weight, bias, eps)
    if weight is not None:
        x = x * weight.reshape(cshape)
    if bias is not None:
        x = x + bias.reshape(cshape)
    return x


def _by_running_stats(input, running_mean, running_var, weight, bias, eps):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` per channel with the running
    statistics, the channels moved last (so the statistics broadcast as they are)."""
    x = input.movedim(1, -1) if input.ndim > 2 else input
    x = (x - running_mean) * _f.rsqrt(running_var + eps)
    if weight is not None:
        x = x * weight
    if bias is not None:
        x = x + bias
    return x.movedim(-1, 1) if input.ndim > 2 else x


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Each sample's channels normalised over their spatial positions (``use_input_stats``),
    else by the running statistics; then ``* weight + bias`` per channel."""
    if input.ndim < 3:
        raise ValueError("Expected 3D or more input (got %dD input)" % input.ndim)
    if use_input_stats:
        spatial = 1
        for s in input.shape[2:]:
            spatial *= s
        if spatial == 1:
            raise ValueError("Expected more than 1 spatial element when training, got input size %s"
                             % _torch_size(tuple(input.shape)))
    n, c = input.shape[0], input.shape[1]
    cshape = (1, c) + (1,) * (input.ndim - 2)
    if use_input_stats:
        x = layer_norm(input, tuple(input.shape[2:]), None, None, eps)
        if running_mean is not None or running_var is not None:
            axes = tuple(range(2, input.ndim))
            count = input.numel() // (n * c)
            m = input._data.mean(axes).mean(0)
            v = (input._data.var(axes) * (count / max(count - 1, 1))).mean(0)
            if running_mean is not None:
                _update_running(running_mean, m, momentum)
            if running_var is not None:
                _update_running(running_var, v, momentum)
    else:
        return _by_running_stats(input, running_mean, running_var, weight, bias, eps)
    if weight is not None:
        x = x * weight.reshape(cshape)
    if bias is not None:
        x = x + bias.reshape(cshape)
    return x


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing ``normalized_shape``
    dimensions (eps None: the dtype's machine epsilon)."""
    shape = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else tuple(
        int(s) for s in normalized_shape)
    k = len(shape)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError("Given normalized_shape=%s, expected input with shape [*, %s], but got input of size%s"
                           % (_shape_text(shape), ", ".join(str(s) for s in shape), _shape_text(input.shape)))
    if eps is None:
        eps = float(np.finfo(input.dtype).eps)
    axes = tuple(range(input.ndim - k, input.ndim))
    x = input * _f.rsqrt((input * input).mean(axes, keepdim=True) + eps)
    return x if weight is None else x * weight


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha / size * sum of x^2 over ``size`` neighbouring channels)^beta``."""
    dim = input.ndim
    if dim < 3:
        raise ValueError("Expected 3D or higher dimensionality input (got %d dimensions)" % dim)
    if input.numel() == 0:
        return input
    div = (input * input).unsqueeze(1)
    if dim == 3:
        div = _pad_channels(div, size)
        div = _avg_channels(div, size).squeeze(1)
    else:
        sizes = input.shape
        div = div.reshape(sizes[0], 1, sizes[1], sizes[2], -1)
        div = _pad_channels(div, size)
        div = _avg_channels(div, size).squeeze(1)
        div = div.reshape(sizes)
    div = (div * alpha + k) ** beta
    return input / div


def _pad_channels(div, size):
    from ..ops import compose as _compose
    pads = [0, 0] * (div.ndim - 3) + [size // 2, (size - 1) // 2]
    return _compose.pad(div, pads)


def _avg_channels(div, size):
    """The mean over windows of ``size`` along dimension 2 (stride 1)."""
    n = div.shape[2] - size + 1
    acc = div.narrow(2, 0, n)
    for i in range(1, size):
        acc = acc + div.narrow(2, i, n)
    return acc / size
