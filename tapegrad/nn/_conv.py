"""Convolutions of ``tg.nn.functional`` (conv1d, conv2d, conv_transpose1d,
conv_transpose2d) and the patch extraction F.unfold / F.fold.

A convolution is one entry: three host ops closed under differentiation, all on the
same parameters (nd, stride, the four paddings, dilation, groups, the input-side
spatial size, the kernel size):

* ``conv(x, w[, b])``: the cross-correlation, by im2col (the patches of the padded
  input as one array) and a matmul per group, as PyTorch's CPU kernels for float64;
* ``conv_transpose(z, w[, b])``: its adjoint in x (the patch adjoints added back,
  a strided add per kernel offset): ``F.conv_transpose*d``, and conv's input gradient;
* ``conv_weight(x, z)``: its adjoint in w: conv's weight gradient.

conv's reverse is conv_transpose and conv_weight, conv_transpose's is conv and
conv_weight, conv_weight's is conv_transpose and conv: create_graph and gradgradcheck
differentiate through the same three entries.  A 1-d convolution is the 2-d one of
height 1 (as PyTorch computes it)."""
import warnings

import numpy as np

from ..core.registry import SAVE_A, SAVE_B
from ..core.tensor import Tensor
from ..ops import compose as _compose
from . import _host

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "unfold", "fold"]

_TENSOR_TYPES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                 "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
                 "uint8": "ByteTensor", "bool": "BoolTensor"}
_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int", "int32": "int"}


# -- the computation on arrays, 2-d.  ints: nd, stride (sH, sW), padding (top, bottom, left, right), dilation
# (dH, dW), groups, the x side's spatial size (xH, xW), the kernel's (kH, kW), the z side's (zH, zW), bias
_NINTS = 17


class _P:
    __slots__ = ("nd", "sh", "sw", "pt", "pb", "pl", "pr", "dh", "dw", "g", "xh", "xw", "kh", "kw", "zh", "zw",
                 "bias")

    def __init__(self, ints):
        (self.nd, self.sh, self.sw, self.pt, self.pb, self.pl, self.pr, self.dh, self.dw, self.g, self.xh, self.xw,
         self.kh, self.kw, self.zh, self.zw, self.bias) = ints[:_NINTS]

    def out_size(self):
        return self.zh, self.zw


def _as2d(a, nd):
    """A 1-d convolution's array as the 2-d one of height 1."""
    return a if nd == 2 else a.reshape(a.shape[:2] + (1,) + a.shape[2:])


def _cols(x, P, ho, wo):
    """The patches of x as one contiguous array (groups, C/groups * kH * kW, N * Ho * Wo):
    rows are the kernel's (channel, offset), columns the output positions of the whole
    batch, so that the forward and both reverses are one matmul (per group) each."""
    n, c, h, w = x.shape
    if P.pt or P.pb or P.pl or P.pr:
        xp = np.zeros((n, c, h + P.pt + P.pb, w + P.pl + P.pr), x.dtype)
        xp[:, :, P.pt:P.pt + h, P.pl:P.pl + w] = x
    else:
        xp = x
    s0, s1, s2, s3 = xp.strides
    view = np.lib.stride_tricks.as_strided(xp, (c, P.kh, P.kw, n, ho, wo),
                                           (s1, s2 * P.dh, s3 * P.dw, s0, s2 * P.sh, s3 * P.sw), writeable=False)
    return np.ascontiguousarray(view).reshape(P.g, (c // P.g) * P.kh * P.kw, n * ho * wo)


def _batch_last(z, g):
    """z (N, O, Ho, Wo) as (groups, O/groups, N * Ho * Wo) (one copy)."""
    n, o = z.shape[:2]
    return np.ascontiguousarray(z.transpose(1, 0, 2, 3)).reshape(g, o // g, -1)


def _conv_fwd(x, w, P):
    """y = conv(x, w): (N, O, Ho, Wo) from x (N, C, H, W), w (O, C/g, kH, kW)."""
    ho, wo = P.out_size()
    n = x.shape[0]
    o = w.shape[0]
    y = np.matmul(w.reshape(P.g, o // P.g, -1), _cols(x, P, ho, wo))          # (g, O/g, N Ho Wo)
    return np.ascontiguousarray(y.reshape(o, n, ho, wo).transpose(1, 0, 2, 3))


def _conv_dx(z, w, P):
    """conv's adjoint in x: x-shaped (N, C, xH, xW) from z (N, O, Ho, Wo)."""
    n, o, ho, wo = z.shape
    c = w.shape[1] * P.g
    wm = w.reshape(P.g, o // P.g, -1)
    dcols = np.matmul(wm.transpose(0, 2, 1), _batch_last(z, P.g))             # (g, CgK, N Ho Wo)
    dcols = dcols.reshape(c, P.kh, P.kw, n, ho, wo)
    hp, wp = P.xh + P.pt + P.pb, P.xw + P.pl + P.pr
    # (channels first while adding: each kernel offset's patch is then one strided block)
    dxp = np.zeros((c, n, hp, wp), np.result_type(z.dtype, w.dtype))
    for i in range(P.kh):
        r = i * P.dh
        for j in range(P.kw):
            q = j * P.dw
            dxp[:, :, r:r + P.sh * (ho - 1) + 1:P.sh, q:q + P.sw * (wo - 1) + 1:P.sw] += dcols[:, i, j]
    return dxp[:, :, P.pt:P.pt + P.xh, P.pl:P.pl + P.xw].transpose(1, 0, 2, 3)


def _conv_dw(x, z, P):
    """conv's adjoint in w: (O, C/g, kH, kW) from x (N, C, H, W) and z (N, O, Ho, Wo)."""
    n, o, ho, wo = z.shape
    cols = _cols(x, P, ho, wo)                                                 # (g, CgK, N Ho Wo)
    dw = np.matmul(_batch_last(z, P.g), cols.transpose(0, 2, 1))              # (g, O/g, CgK)
    return dw.reshape(o, x.shape[1] // P.g, P.kh, P.kw)


# -- the three host ops --------------------------------------------------------------------------
def _fwd(arrays, ints, floats):
    P = _P(ints)
    x, w = _as2d(arrays[0], P.nd), _as2d(arrays[1], P.nd)
    y = _conv_fwd(x, w, P)
    if P.bias:
        y += arrays[2].reshape(1, -1, 1, 1)
    return y if P.nd == 2 else y.reshape(y.shape[:2] + y.shape[3:])


def _t_fwd(arrays, ints, floats):
    P = _P(ints)
    z, w = _as2d(arrays[0], P.nd), _as2d(arrays[1], P.nd)
    x = np.ascontiguousarray(_conv_dx(z, w, P))
    if P.bias:
        x += arrays[2].reshape(1, -1, 1, 1)
    return x if P.nd == 2 else x.reshape(x.shape[:2] + x.shape[3:])


def _w_fwd(arrays, ints, floats):
    P = _P(ints)
    x, z = _as2d(arrays[0], P.nd), _as2d(arrays[1], P.nd)
    dw = _conv_dw(x, z, P)
    return dw if P.nd == 2 else dw.reshape(dw.shape[:2] + dw.shape[3:])


def _bias_grad(g, nd):
    return g.sum((0,) + tuple(range(2, g.ndim)))


def _rev(xs, y, g, ints, floats, needs):
    x, w = xs[0], xs[1]
    dx = _record(_CONV_T, [g, w], ints) if needs[0] else None
    dw = _record(_CONV_W, [x, g], ints) if needs[1] else None
    db = _bias_grad(g, ints[0]) if len(needs) > 2 and needs[2] else None
    return [dx, dw, db]


def _arr_rev(xs, y, g, ints, floats, needs):
    P = _P(ints)
    x, w, g2 = _as2d(xs[0], P.nd), _as2d(xs[1], P.nd), _as2d(g, P.nd)
    dx = _conv_dx(g2, w, P).reshape(xs[0].shape) if needs[0] else None
    dw = _conv_dw(x, g2, P).reshape(xs[1].shape) if needs[1] else None
    db = g.sum((0,) + tuple(range(2, g.ndim))) if len(needs) > 2 and needs[2] else None
    return [dx, dw, db]


def _t_rev(xs, y, g, ints, floats, needs):
    z, w = xs[0], xs[1]
    dz = _record(_CONV, [g, w], ints) if needs[0] else None
    dw = _record(_CONV_W, [g, z], ints) if needs[1] else None
    db = _bias_grad(g, ints[0]) if len(needs) > 2 and needs[2] else None
    return [dz, dw, db]


def _t_arr_rev(xs, y, g, ints, floats, needs):
    P = _P(ints)
    z, w, g2 = _as2d(xs[0], P.nd), _as2d(xs[1], P.nd), _as2d(g, P.nd)
    dz = _conv_fwd(g2, w, P).reshape(xs[0].shape) if needs[0] else None
    dw = _conv_dw(g2, z, P).reshape(xs[1].shape) if needs[1] else None
    db = g.sum((0,) + tuple(range(2, g.ndim))) if len(needs) > 2 and needs[2] else None
    return [dz, dw, db]


def _w_rev(xs, y, g, ints, floats, needs):
    x, z = xs[0], xs[1]
    dx = _record(_CONV_T, [z, g], ints) if needs[0] else None
    dz = _record(_CONV, [x, g], ints) if needs[1] else None
    return [dx, dz]


def _w_arr_rev(xs, y, g, ints, floats, needs):
    P = _P(ints)
    x, z, g2 = _as2d(xs[0], P.nd), _as2d(xs[1], P.nd), _as2d(g, P.nd)
    dx = _conv_dx(z, g2, P).reshape(xs[0].shape) if needs[0] else None
    dz = _conv_fwd(x, g2, P).reshape(xs[1].shape) if needs[1] else None
    return [dx, dz]


_CONV = _host.nn_op("conv", "ConvolutionBackward0", _fwd, _rev, _arr_rev, SAVE_A | SAVE_B)
_CONV_T = _host.nn_op("conv_transpose", "ConvolutionBackward0", _t_fwd, _t_rev, _t_arr_rev, SAVE_A | SAVE_B)
_CONV_W = _host.nn_op("conv_weight", "ConvolutionBackwardBackward0", _w_fwd, _w_rev, _w_arr_rev, SAVE_A | SAVE_B)
_FORWARDS = {id(_CONV): _fwd, id(_CONV_T): _t_fwd, id(_CONV_W): _w_fwd}


def _record(op, inputs, ints):
    """The entry of ``op`` on tensors ``inputs`` (the last ``bias`` int says whether a bias is among them)."""
    ints = list(ints[:_NINTS - 1]) + [1 if len(inputs) > 2 else 0]
    out = _FORWARDS[id(op)]([t._data for t in inputs], ints, None)
    return _host.record(op, inputs, out, ints)


# -- the public functions ----------------------------------------------------------------------
def _conv_tuple(name, v, nd):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),) * nd
    v = tuple(int(u) for u in v)
    if len(v) == 1:
        return v * nd
    if len(v) != nd:
        raise RuntimeError("expected %s to be a single integer value or a list of %d values to match the convolution "
                           "dimensions, but got %s=[%s]" % (name, nd, name, ", ".join(str(u) for u in v)))
    return v


def _shape_text(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _ints(nd, stride, pads, dilation, groups, xsize, ks, zsize):
    """The host ops' ints, 2-d (a 1-d convolution has height 1)."""
    if nd == 1:
        return [1, 1, stride[0], 0, 0, pads[0][0], pads[0][1], 1, dilation[0], groups, 1, xsize[0], 1, ks[0], 1,
                zsize[0], 0]
    return [2, stride[0], stride[1], pads[0][0], pads[0][1], pads[1][0], pads[1][1], dilation[0], dilation[1],
            groups, xsize[0], xsize[1], ks[0], ks[1], zsize[0], zsize[1], 0]


def _conv(nd, input, weight, bias, stride, padding, dilation, groups):
    name = "conv%dd" % nd
    for arg, v in (("input", input), ("weight", weight)):
        if not isinstance(v, Tensor):
            raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                            % (name, arg, 1 if arg == "input" else 2, type(v).__name__))
    if weight.ndim != nd + 2:
        raise RuntimeError("weight should have at least three dimensions" if weight.ndim < 3 else
                           "Expected %d-dimensional input for %d-dimensional weight %s, but got %d-dimensional input "
                           "of size %s instead" % (weight.ndim, weight.ndim, _shape_text(weight.shape), input.ndim,
                                                   _shape_text(input.shape)))
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError("Expected %dD (unbatched) or %dD (batched) input to %s, but got input of size: %s"
                           % (nd + 1, nd + 2, name, _shape_text(input.shape)))
    unbatched = input.ndim == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    stride = _conv_tuple("stride", stride, nd)
    dilation = _conv_tuple("dilation", dilation, nd)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise TypeError("%s(): argument 'groups' (position 7) must be int, not %s" % (name, type(groups).__name__))
    ks = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pads = []
            if any(d % 2 == 1 and k % 2 == 0 for k, d in zip(ks, dilation)):
                warnings.warn("Using padding='same' with even kernel lengths and odd dilation may require a "
                              "zero-padded copy of the input be created", stacklevel=3)
            for k, d in zip(ks, dilation):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
        else:
            raise RuntimeError("Invalid padding string: %r" % padding)
    else:
        pads = [(p, p) for p in _conv_tuple("padding", padding, nd)]
    if any(p < 0 for pr in pads for p in pr):
        raise RuntimeError("negative padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        # (PyTorch computes a 1-D convolution as a 2-D one of height 1: its dilation is [1, d])
        raise RuntimeError("dilation should be greater than zero, but got [%s]"
                           % ", ".join(str(d) for d in ((1,) + dilation if nd == 1 else dilation)))
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] % groups:
        raise RuntimeError("Given groups=%d, expected weight to be divisible by %d at dimension 0, but got weight of "
                           "size [%s] instead" % (groups, groups, _shape_text(weight.shape)))
    cin = weight.shape[1] * groups
    if x.shape[1] != cin:
        raise RuntimeError("Given groups=%d, weight of size %s, expected input%s to have %d channels, but got %d "
                           "channels instead" % (groups, _shape_text(weight.shape), _shape_text(x.shape), cin,
                                                 x.shape[1]))
    cout = weight.shape[0]
    if isinstance(bias, Tensor) and bias.dtype != input.dtype:
        raise RuntimeError("Input type (%s) and bias type (%s) should be the same"
                           % (_C_TYPES.get(input.dtype.name, input.dtype.name), _C_TYPES.get(bias.dtype.name,
                                                                                           bias.dtype.name)))
    if bias is not None and (not isinstance(bias, Tensor) or bias.ndim != 1 or bias.shape[0] != cout):
        raise RuntimeError("Given weight of size %s, expected bias to be 1-dimensional with %d elements, but got bias "
                           "of size %s instead" % (_shape_text(weight.shape), cout,
                                                   _shape_text(getattr(bias, "shape", ()))))
    padded = [x.shape[2 + i] + pads[i][0] + pads[i][1] for i in range(nd)]
    span = [dilation[i] * (ks[i] - 1) + 1 for i in range(nd)]
    if any(p < s for p, s in zip(padded, span)):
        raise RuntimeError("Calculated padded input size per channel: (%s). Kernel size: (%s). Kernel size can't be "
                           "greater than actual input size" % (" x ".join(str(p) for p in padded),
                                                               " x ".join(str(s) for s in span)))
    if input.dtype != weight.dtype:
        raise RuntimeError("Input type (torch.%s) and weight type (torch.%s) should be the same or input should be a "
                           "MKLDNN tensor and weight is a dense tensor"
                           % (_TENSOR_TYPES.get(input.dtype.name, input.dtype.name),
                              _TENSOR_TYPES.get(weight.dtype.name, weight.dtype.name)))
    outs = [(padded[i] - span[i]) // stride[i] + 1 for i in range(nd)]
    ints = _ints(nd, stride, pads, dilation, groups, tuple(x.shape[2:]), ks, outs)
    out = _record(_CONV, [x, weight] + ([bias] if bias is not None else []), ints)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """The 1-D cross-correlation of ``input`` (N, C_in, L) or (C_in, L) with ``weight``
    (C_out, C_in / groups, K), plus ``bias``; ``padding`` an int, a 1-tuple, 'valid' or
    'same' (the extra element on the right, as PyTorch)."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """The 2-D cross-correlation of ``input`` (N, C_in, H, W) or (C_in, H, W) with
    ``weight`` (C_out, C_in / groups, KH, KW), plus ``bias``."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    name = "conv_transpose%dd" % nd
    for arg, v in (("input", input), ("weight", weight)):
        if not isinstance(v, Tensor):
            raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                            % (name, arg, 1 if arg == "input" else 2, type(v).__name__))
    if weight.ndim != nd + 2:
        raise RuntimeError("weight should have at least three dimensions" if weight.ndim < 3 else
                           "Expected %d-dimensional input for %d-dimensional weight %s, but got %d-dimensional input "
                           "of size %s instead" % (weight.ndim, weight.ndim, _shape_text(weight.shape), input.ndim,
                                                   _shape_text(input.shape)))
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError("Expected %dD (unbatched) or %dD (batched) input to %s, but got input of size: %s"
                           % (nd + 1, nd + 2, name, _shape_text(input.shape)))
    unbatched = input.ndim == nd + 1
    z = input.unsqueeze(0) if unbatched else input
    stride = _conv_tuple("stride", stride, nd)
    padding = _conv_tuple("padding", padding, nd)
    output_padding = _conv_tuple("output_padding", output_padding, nd)
    dilation = _conv_tuple("dilation", dilation, nd)
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero, but got [%s]"
                           % ", ".join(str(d) for d in ((1,) + dilation if nd == 1 else dilation)))
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        hw = ((0, 1, 1) if nd == 1 else (output_padding[0], stride[0], dilation[0]))
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got output_padding_"
                           "height: %d output_padding_width: %d stride_height: %d stride_width: %d dilation_height: %d "
                           "dilation_width: %d" % (hw[0], output_padding[-1], hw[1], stride[-1], hw[2], dilation[-1]))
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    cin = weight.shape[0]
    if z.shape[1] != cin:
        raise RuntimeError("Given transposed=1, weight of size %s, expected input%s to have %d channels, but got %d "
                           "channels instead" % (_shape_text(weight.shape), _shape_text(z.shape), cin, z.shape[1]))
    if cin % groups:
        raise RuntimeError("Given groups=%d, expected weight to be divisible by %d at dimension 0, but got weight of "
                           "size %s instead" % (groups, groups, _shape_text(weight.shape)))
    if input.dtype != weight.dtype:
        raise RuntimeError("Input type (torch.%s) and weight type (torch.%s) should be the same"
                           % (_TENSOR_TYPES.get(input.dtype.name, input.dtype.name),
                              _TENSOR_TYPES.get(weight.dtype.name, weight.dtype.name)))
    cout = weight.shape[1] * groups
    if bias is not None and (not isinstance(bias, Tensor) or bias.ndim != 1 or bias.shape[0] != cout):
        raise RuntimeError("Given transposed=1, weight of size %s, expected bias to be 1-dimensional with %d elements, "
                           "but got bias of size %s instead" % (_shape_text(weight.shape), cout,
                                                                _shape_text(getattr(bias, "shape", ()))))
    ks = tuple(weight.shape[2:])
    xsize = tuple((z.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ks[i] - 1) + 1 + output_padding[i]
                  for i in range(nd))
    if any(s <= 0 for s in xsize):
        raise RuntimeError("Given input size per channel: (%s). Calculated output size per channel: (%s). Output size "
                           "is too small" % (" x ".join(str(s) for s in z.shape[2:]),
                                             " x ".join(str(s) for s in xsize)))
    # the conv it transposes: x of size xsize, padded by ``padding`` on both sides (the output_padding
    # elements lie beyond the last patch: zero, as in PyTorch, before the bias), z of the input's size
    pads = [(p, p) for p in padding]
    ints = _ints(nd, stride, pads, dilation, groups, xsize, ks, tuple(z.shape[2:]))
    out = _record(_CONV_T, [z, weight] + ([bias] if bias is not None else []), ints)
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 1-D convolution of ``input`` (N, C_in, L) with ``weight``
    (C_in, C_out / groups, K): conv1d's gradient with respect to its input."""
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 2-D convolution of ``input`` (N, C_in, H, W) with ``weight``
    (C_in, C_out / groups, KH, KW)."""
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


# -- patches: F.unfold (im2col) and F.fold (col2im), one gather and one scatter-add ------------------
def _pair(name, v):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v), int(v))
    v = tuple(int(u) for u in v)
    if len(v) == 1:
        return v * 2
    if len(v) != 2:
        raise RuntimeError("%s must be an int or a pair of ints" % name)
    return v


def _patch_index(c, hp, wp, ks, dil, stride, oh, ow):
    """Flat indices into (C, Hp, Wp) of each (c, ki, kj, position) of the patches."""
    ci = np.arange(c)[:, None, None, None, None] * (hp * wp)
    rows = (np.arange(ks[0]) * dil[0])[None, :, None, None, None] + (np.arange(oh) * stride[0])[None, None, None, :,
                                                                                                 None]
    cols = (np.arange(ks[1]) * dil[1])[None, None, :, None, None] + (np.arange(ow) * stride[1])[None, None, None,
                                                                                                None, :]
    return (ci + rows * wp + cols).reshape(-1)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding patches of ``input`` (N, C, H, W) as columns: (N, C * kH * kW, L)."""
    if not isinstance(input, Tensor):
        raise TypeError("unfold(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    ks, dil, pad, st = (_pair(n, v) for n, v in (("kernel_size", kernel_size), ("dilation", dilation),
                                                 ("padding", padding), ("stride", stride)))
    if input.ndim not in (3, 4) or 0 in input.shape[1:]:
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           "dimensions for input, but got: %s" % _shape_text(input.shape))
    if min(ks) <= 0 or min(dil) <= 0 or min(st) <= 0 or min(pad) < 0:
        raise RuntimeError("im2col: kernel size, dilation and stride should be greater than zero and padding "
                           "non-negative")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    n, c, h, w = x.shape
    hp, wp = h + 2 * pad[0], w + 2 * pad[1]
    oh = (hp - (dil[0] * (ks[0] - 1) + 1)) // st[0] + 1
    ow = (wp - (dil[1] * (ks[1] - 1) + 1)) // st[1] + 1
    if oh < 1 or ow < 1:
        raise RuntimeError("Given input with spatial size (%d, %d), kernel_size=(%d, %d), dilation=(%d, %d), "
                           "padding=(%d, %d), calculated shape of the array of sliding blocks as (%d, %d), but its "
                           "components must be at least one." % (h, w, ks[0], ks[1], dil[0], dil[1], pad[0], pad[1],
                                                                 oh, ow))
    if pad[0] or pad[1]:
        x = _compose.pad(x, [pad[1], pad[1], pad[0], pad[0]])
    idx = Tensor._const(_patch_index(c, hp, wp, ks, dil, st, oh, ow))
    out = x.reshape(n, c * hp * wp).index_select(1, idx).reshape(n, c * ks[0] * ks[1], oh * ow)
    return out if input.ndim == 4 else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The columns (N, C * kH * kW, L) added back into an (N, C, *output_size) image
    (the adjoint of unfold)."""
    if not isinstance(input, Tensor):
        raise TypeError("fold(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    size, ks, dil, pad, st = (_pair(n, v) for n, v in (("output_size", output_size), ("kernel_size", kernel_size),
                                                       ("dilation", dilation), ("padding", padding),
                                                       ("stride", stride)))
    if input.ndim not in (2, 3) or 0 in input.shape[-2:]:
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           "dimensions for input, but got: %s" % _shape_text(input.shape))
    z = input if input.ndim == 3 else input.unsqueeze(0)
    n, ck, L = z.shape
    k = ks[0] * ks[1]
    if ck % k:
        raise RuntimeError("Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           "got input.size(1)=%d and kernel_size=(%d, %d)." % (ck, ks[0], ks[1]))
    c = ck // k
    hp, wp = size[0] + 2 * pad[0], size[1] + 2 * pad[1]
    oh = (hp - (dil[0] * (ks[0] - 1) + 1)) // st[0] + 1
    ow = (wp - (dil[1] * (ks[1] - 1) + 1)) // st[1] + 1
    if oh * ow != L:
        raise RuntimeError("Given output_size=(%d, %d), kernel_size=(%d, %d), dilation=(%d, %d), padding=(%d, %d), "
                           "stride=(%d, %d), expected size of input's dimension 2 to match the calculated number of "
                           "sliding blocks %d * %d = %d, but got input.size(2)=%d." % (
                               size[0], size[1], ks[0], ks[1], dil[0], dil[1], pad[0], pad[1], st[0], st[1], oh, ow,
                               oh * ow, L))
    idx = Tensor._const(_patch_index(c, hp, wp, ks, dil, st, oh, ow))
    out = Tensor._const(np.zeros((n, c * hp * wp), z.dtype)).index_add(1, idx, z.reshape(n, ck * L))
    out = out.reshape(n, c, hp, wp)
    if pad[0] or pad[1]:
        out = out[:, :, pad[0]:pad[0] + size[0], pad[1]:pad[1] + size[1]]
    return out if input.ndim == 3 else out.squeeze(0)
