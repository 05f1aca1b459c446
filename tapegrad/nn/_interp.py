"""Resampling of ``tg.nn.functional``: interpolate (nearest, nearest-exact, linear,
bilinear, trilinear, area) and pixel_shuffle.  Each spatial axis is resampled on its own
with PyTorch's source indices and weights: nearest is one index_select per axis,
linear two and a weighted sum (its reverse adds the weighted adjoints back)."""
import math
import warnings

import numpy as np

from .. import functions as _f
from ..core.tensor import Tensor
from ._pooling import adaptive_avg_pool1d, adaptive_avg_pool2d

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle"]


def _scale(in_size, out_size, scale):
    """PyTorch's compute_scales_value: 1 / scale_factor when given, else in / out."""
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _nearest_index(in_size, out_size, scale, exact):
    """PyTorch's nearest_idx / nearest_neighbor_exact_compute_source_index, in float32 as its kernel."""
    if out_size == in_size and not exact:
        return np.arange(out_size)
    if out_size == 2 * in_size and not exact:
        return np.arange(out_size) >> 1
    s = np.float32(_scale(in_size, out_size, scale))
    o = np.arange(out_size, dtype=np.float32)
    src = np.floor((o + np.float32(0.5)) * s) if exact else np.floor(o * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def _linear_weights(in_size, out_size, align_corners, scale):
    """(i0, i1, lambda0, lambda1) of PyTorch's linear upsampling along one axis."""
    if align_corners:
        s = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        src = s * np.arange(out_size)
    else:
        s = _scale(in_size, out_size, scale)
        src = np.maximum(s * (np.arange(out_size) + 0.5) - 0.5, 0.0)
    i0 = src.astype(np.int64)
    i1 = i0 + (i0 < in_size - 1)
    l1 = src - i0
    return i0, i1, 1.0 - l1, l1


def _shape_for(ax, ndim, n):
    s = [1] * ndim
    s[ax] = n
    return tuple(s)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """``input`` (N, C, d1[, d2[, d3]]) resampled to ``size`` (or by ``scale_factor``)."""
    if not isinstance(input, Tensor):
        raise TypeError("interpolate(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                             "bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scales = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError("Input and output must have the same number of spatial dimensions, but got input with "
                                 "spatial dimensions of %s and output size of %s. Please provide input tensor in "
                                 "(N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format."
                                 % (list(input.shape[2:]), size))
            if not all(isinstance(s, (int, np.integer)) for s in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, "
                                "int], but got size with types %s" % [type(s) for s in size])
            out = [int(s) for s in size]
        else:
            out = [int(size)] * dim
    elif scale_factor is not None:
        out = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError("Input and scale_factor must have the same number of spatial dimensions, but got "
                                 "input with spatial dimensions of %s and scale_factor of shape %s. Please provide "
                                 "input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) "
                                 "format."
                                 % (list(input.shape[2:]), scale_factor))
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and out is None:
        recompute_scale_factor = True
    if out is None:
        out = [int(math.floor(input.shape[i + 2] * scales[i])) for i in range(dim)]
    if recompute_scale_factor:
        scales = None
    if antialias:
        if not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
            raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                             "4-D tensor as input")
        raise NotImplementedError("interpolate(antialias=True) is not supported by tapegrad")
    allowed = {"nearest": (3, 4, 5), "nearest-exact": (3, 4, 5), "area": (3, 4), "linear": (3,), "bilinear": (4,),
               "trilinear": (5,)}
    if mode in ("bicubic", "lanczos"):
        raise NotImplementedError("interpolate(mode=%r) is not supported by tapegrad" % mode)
    if mode not in allowed:
        raise NotImplementedError("Input Error: Only 3D, 4D and 5D input Tensors supported (got %dD) for the modes: "
                                  "nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got %s)"
                                  % (input.ndim, mode))
    if input.ndim not in allowed[mode]:
        need = {"linear": "3D", "bilinear": "4D", "trilinear": "5D"}.get(mode)
        if need is not None:
            raise NotImplementedError("Got %dD input, but %s mode needs %s input" % (input.ndim, mode, need))
        raise NotImplementedError("Input Error: Only 3D, 4D and 5D input Tensors supported (got %dD) for the modes: "
                                  "nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got %s)"
                                  % (input.ndim, mode))
    if any(o <= 0 for o in out):
        raise RuntimeError("Input and output sizes should be greater than 0, but got input (%s) and output (%s)" % (
            ", ".join("D: %d" % s for s in input.shape[2:]), ", ".join("D: %d" % s for s in out)))
    if mode == "area":
        return adaptive_avg_pool1d(input, out) if dim == 1 else adaptive_avg_pool2d(input, out)
    x = input
    for i in range(dim):
        ax = 2 + i
        n_in, n_out = input.shape[ax], out[i]
        sc = None if scales is None else scales[i]
        if mode in ("nearest", "nearest-exact"):
            idx = _nearest_index(n_in, n_out, sc, mode == "nearest-exact")
            if not (n_in == n_out and np.array_equal(idx, np.arange(n_in))):
                x = _f.index_select(x, ax, Tensor._const(idx))
        else:
            i0, i1, l0, l1 = _linear_weights(n_in, n_out, align_corners, sc)
            shape = _shape_for(ax, x.ndim, n_out)
            x = (_f.index_select(x, ax, Tensor._const(i0)) * Tensor._const(l0.reshape(shape).astype(x.dtype))
                 + _f.index_select(x, ax, Tensor._const(i1)) * Tensor._const(l1.reshape(shape).astype(x.dtype)))
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated: ``interpolate``."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(mode="nearest")``."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(mode="bilinear", align_corners=True)``."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError("pixel_shuffle expects input to have at least 3 dimensions, but got input with %d "
                           "dimension(s)" % input.ndim)
    c, h, w = input.shape[-3:]
    if c % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           "upscale_factor, but input.size(-3)=%d is not divisible by %d" % (c, r * r))
    lead = tuple(input.shape[:-3])
    x = input.reshape(lead + (c // (r * r), r, r, h, w))
    n = len(lead)
    x = x.permute(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return x.reshape(lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError("pixel_unshuffle expects input to have at least 3 dimensions, but got input with %d "
                           "dimension(s)" % input.ndim)
    c, h, w = input.shape[-3:]
    if h % r or w % r:
        raise RuntimeError("pixel_unshuffle expects height and width to be divisible by downscale_factor")
    lead = tuple(input.shape[:-3])
    x = input.reshape(lead + (c, h // r, r, w // r, r))
    n = len(lead)
    x = x.permute(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return x.reshape(lead + (c * r * r, h // r, w // r))
