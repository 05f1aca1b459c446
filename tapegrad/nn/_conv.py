"""Convolutions of ``tg.nn.functional``."""
import numpy as np

from .. import functions as _f
from ..core.tensor import Tensor, from_data
from ..ops import compose as _compose

__all__ = ["conv1d", "conv2d"]


# -- convolutions --------------------------------------------------------------------
# A composition: the input zero-padded (pad), its patches gathered along each spatial
# dimension by index arrays (index_select), then one einsum with the weight over the
# channels of a group and the kernel offsets.  The reverse, create_graph and replay are
# those ops' (the gathers' reverse adds the overlapping patches back).
_TENSOR_TYPES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                 "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
                 "uint8": "ByteTensor", "bool": "BoolTensor"}
_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int", "int32": "int"}


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
    if any(p for pr in pads for p in pr):
        x = _compose.pad(x, [p for pr in reversed(pads) for p in pr])
    n = x.shape[0]
    outs = [(padded[i] - span[i]) // stride[i] + 1 for i in range(nd)]
    # the patches: along each spatial dim, (out position, kernel offset) -> input position
    for i in range(nd):
        idx = np.arange(outs[i])[:, None] * stride[i] + np.arange(ks[i])[None, :] * dilation[i]
        x = _f.index_select(x, 2 + 2 * i, from_data(idx.reshape(-1)))
        x = x.reshape(*(tuple(x.shape[:2 + 2 * i]) + (outs[i], ks[i]) + tuple(x.shape[3 + 2 * i:])))
    # x: (n, c, o1, k1, o2, k2, ...) -> (n, groups, c / groups, ...)
    x = x.reshape(*((n, groups, cin // groups) + tuple(x.shape[2:])))
    w = weight.reshape(*((groups, cout // groups) + tuple(weight.shape[1:])))
    letters = "hijklm"[:nd]
    kletters = "pqrstu"[:nd]
    xs = "ngc" + "".join(o + k for o, k in zip(letters, kletters))
    out = _f.einsum("%s,goc%s->ngo%s" % (xs, kletters, letters), x, w)
    out = out.reshape(*((n, cout) + tuple(outs)))
    if bias is not None:
        out = out + bias.reshape(*((1, cout) + (1,) * nd))
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
