"""Pooling of ``tg.nn.functional``: max, average and their adaptive forms, 1-d and 2-d.

Each is one entry (a host op).  The windows of every output element are a table of flat
positions in its (H, W) plane, a position past the plane standing for padding; the
forward gathers them (one copy) and reduces, the reverse adds each output's adjoint back
(``np.bincount``).  max_pool keeps its input and finds the maxima again for the reverse
(first maximum, NaN propagating, as PyTorch's kernel); avg_pool and its adjoint
avg_pool_t are each other's reverse, so create_graph differentiates through them.
A 1-d pool is the 2-d one of height 1."""
import numpy as np

from .. import _jit
from .._jit import jit
from ..core.registry import SAVE_A
from ..core.tensor import Tensor
from . import _host

__all__ = ["max_pool1d", "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
           "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "lp_pool1d", "lp_pool2d"]

# ints: nd, adaptive, H, W, Ho, Wo, kH, kW, sH, sW, pH, pW, dH, dW, count_include_pad, divisor_override
_NINTS = 16


def _axis_windows(n_in, n_out, k, s, p, d, adaptive):
    """(positions (n_out, kmax), valid mask, pool size per output) along one axis."""
    o = np.arange(n_out)
    if adaptive:
        start = (o * n_in) // n_out
        end = -((-(o + 1) * n_in) // n_out)
        kmax = int((end - start).max()) if n_out else 1
        pos = start[:, None] + np.arange(kmax)[None, :]
        valid = pos < end[:, None]
        return pos, valid, (end - start).astype(np.float64), (end - start).astype(np.float64)
    pos = (o * s - p)[:, None] + (np.arange(k) * d)[None, :]
    valid = (pos >= 0) & (pos < n_in)
    # PyTorch's divisors: the window clipped to the padded input, and to the input itself
    lo = o * s - p
    hi = np.minimum(lo + k, n_in + p)
    padded = (hi - lo).astype(np.float64)
    inner = (np.minimum(hi, n_in) - np.maximum(lo, 0)).astype(np.float64)
    return pos, valid, padded, inner


def _table(ints):
    """(flat positions (Ho, Wo, K), with H * W for padding; divisor (Ho, Wo))."""
    nd, adaptive, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw, incl, div = ints[:_NINTS]
    rp, rv, rpad, rin = _axis_windows(h, ho, kh, sh, ph, dh, adaptive)
    cp, cv, cpad, cin = _axis_windows(w, wo, kw, sw, pw, dw, adaptive)
    flat = rp[:, None, :, None] * w + cp[None, :, None, :]
    valid = rv[:, None, :, None] & cv[None, :, None, :]
    flat = np.where(valid, flat, h * w).reshape(ho, wo, -1)
    if div:
        divisor = np.full((ho, wo), float(div))
    elif adaptive or not incl:
        divisor = rin[:, None] * cin[None, :]
    else:
        divisor = rpad[:, None] * cpad[None, :]
    return flat, divisor


def _gather(x, ints, fill):
    h, w = ints[2], ints[3]
    flat, divisor = _table(ints)
    planes = x.reshape(-1, h * w)
    padded = np.empty((planes.shape[0], h * w + 1), x.dtype)
    padded[:, :h * w] = planes
    padded[:, h * w] = fill
    return padded[:, flat], flat, divisor           # (P, Ho, Wo, K)


def _out_shape(x_shape, ints):
    lead = x_shape[:-ints[0]]
    return lead + ((ints[4], ints[5]) if ints[0] == 2 else (ints[5],))


def _scatter(values, positions, ints, nplanes, dtype):
    """Add ``values`` (P, ...) at the flat plane ``positions`` (P, ...) into (P, H * W);
    positions H * W (padding) are dropped."""
    hw = ints[2] * ints[3]
    glob = positions + (np.arange(nplanes) * (hw + 1)).reshape((-1,) + (1,) * (positions.ndim - 1))
    out = np.bincount(glob.reshape(-1), weights=values.reshape(-1).astype(np.float64),
                      minlength=nplanes * (hw + 1))
    return out.reshape(nplanes, hw + 1)[:, :hw].astype(dtype, copy=False)


def _padded_planes(x, ints, fill):
    """x as (planes, Hp, Wp): padded by the padding on top and left, and on the bottom and
    right as far as the last window reaches (ceil_mode), with ``fill``."""
    h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw = ints[2:14]
    planes = x.reshape(-1, h, w)
    hp = max(h + ph, (ho - 1) * sh + (kh - 1) * dh + 1)
    wp = max(w + pw, (wo - 1) * sw + (kw - 1) * dw + 1)
    if ph == 0 and pw == 0 and hp == h and wp == w:
        return planes
    out = np.full((planes.shape[0], hp, wp), fill, x.dtype)
    out[:, ph:ph + h, pw:pw + w] = planes
    return out


def _offsets(ints):
    """Per kernel offset: (row slice, column slice) of the padded planes its values come from,
    and the flat plane position (Ho, Wo) each output's value has there."""
    h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw = ints[2:14]
    rows0, cols0 = np.arange(ho) * sh - ph, np.arange(wo) * sw - pw
    for i in range(kh):
        for j in range(kw):
            r, q = i * dh, j * dw
            yield (slice(r, r + sh * (ho - 1) + 1, sh), slice(q, q + sw * (wo - 1) + 1, sw),
                   (rows0 + r)[:, None] * w + (cols0 + q)[None, :])


# -- max_pool ----------------------------------------------------------------------------------
def _argmax(x, ints):
    """The maximum of each window and its flat plane position, (P, Ho, Wo) each: PyTorch's
    scan (the first maximum; a NaN replaces it, the last NaN staying)."""
    if ints[1]:         # adaptive windows of several sizes: gathered
        win, flat, _ = _gather(x, ints, -np.inf)
        am = win.argmax(-1)
        vals = np.take_along_axis(win, am[..., None], -1)[..., 0]
        idx = np.take_along_axis(np.broadcast_to(flat, win.shape), am[..., None], -1)[..., 0]
        return vals, idx
    xp = _padded_planes(x, ints, -np.inf)
    best = idx = None
    for rs, cs, pos in _offsets(ints):
        v = xp[:, rs, cs]
        if best is None:
            best, idx = v.copy(), np.broadcast_to(pos, v.shape).copy()
            continue
        upd = (v > best) | np.isnan(v)
        np.copyto(best, v, where=upd)
        np.copyto(idx, pos, where=upd)
    return best, idx


def _max_fwd(arrays, ints, floats):
    x = arrays[0]
    if ints[1]:
        vals = _argmax(x, ints)[0]
    else:       # the values alone (np.maximum keeps a NaN, as PyTorch's scan); the positions are the reverse's
        xp = _padded_planes(x, ints, -np.inf)
        vals = None
        for rs, cs, _ in _offsets(ints):
            vals = xp[:, rs, cs].copy() if vals is None else np.maximum(vals, xp[:, rs, cs], out=vals)
    return vals.reshape(_out_shape(x.shape, ints))


def _max_indices(x, ints):
    _, idx = _argmax(x, ints)
    return idx.reshape(_out_shape(x.shape, ints))


def _max_rev(xs, y, g, ints, floats, needs):
    x = xs[0]
    idx = _max_indices(x._data, ints)
    hw = ints[2] * ints[3]
    nplanes = x.numel() // hw
    glob = (idx.reshape(nplanes, -1) + (np.arange(nplanes) * hw)[:, None]).reshape(-1)
    flat = g.reshape(-1)
    dx = Tensor._const(np.zeros(x.numel(), g.dtype)).index_add(0, Tensor._const(glob), flat)
    return [dx.reshape(x.shape)]


@jit
def _max_rev_kernel(x, g, dx, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw):
    """Each output's adjoint added at its window's maximum, planes (P, H, W): PyTorch's
    scan (from the window's first element inside the input; a greater value or a NaN
    takes over), the windows' positions outside the input left out."""
    h, w = x.shape[1], x.shape[2]
    for p in range(x.shape[0]):
        for i in range(ho):
            for j in range(wo):
                best, at_r, at_c = 0.0, -1, -1
                for a in range(kh):
                    r = i * sh - ph + a * dh
                    if r < 0 or r >= h:
                        continue
                    for b in range(kw):
                        c = j * sw - pw + b * dw
                        if c < 0 or c >= w:
                            continue
                        v = x[p, r, c]
                        if at_r < 0 or v > best or v != v:
                            best, at_r, at_c = v, r, c
                if at_r >= 0:
                    dx[p, at_r, at_c] += g[p, i, j]


def _max_arr_rev(xs, y, g, ints, floats, needs):
    x = xs[0]
    if (not ints[1] and _jit.READY[0] and x.dtype == np.float64 and g.dtype == np.float64
            and x.flags.c_contiguous):      # (the kernels are loaded: one pass, no positions array)
        h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw = ints[2:14]
        dx = np.zeros(x.shape)
        _max_rev_kernel(x.reshape(-1, h, w), np.ascontiguousarray(g).reshape(-1, ho, wo), dx.reshape(-1, h, w),
                        ho, wo, kh, kw, sh, sw, ph, pw, dh, dw)
        return [dx]
    idx = _max_indices(x, ints)
    hw = ints[2] * ints[3]
    nplanes = x.size // hw
    glob = (idx.reshape(nplanes, -1) + (np.arange(nplanes) * hw)[:, None]).reshape(-1)
    return [np.bincount(glob, weights=g.reshape(-1), minlength=x.size).reshape(x.shape)]


_MAX_POOL = _host.nn_op("max_pool", "MaxPool2DWithIndicesBackward0", _max_fwd, _max_rev, _max_arr_rev, SAVE_A)


# -- avg_pool and its adjoint --------------------------------------------------------------------
def _avg_fwd(arrays, ints, floats):
    x = arrays[0]
    if ints[1]:
        win, _, divisor = _gather(x, ints, 0)
        out = win.sum(-1) / divisor
    else:
        xp = _padded_planes(x, ints, 0)
        out = None
        for rs, cs, _ in _offsets(ints):
            out = xp[:, rs, cs].copy() if out is None else out + xp[:, rs, cs]
        out /= _table_divisor(ints)
    return out.astype(x.dtype, copy=False).reshape(_out_shape(x.shape, ints))


def _table_divisor(ints):
    nd, adaptive, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw, incl, div = ints[:_NINTS]
    if div:
        return float(div)
    _, _, rpad, rin = _axis_windows(h, ho, kh, sh, ph, dh, 0)
    _, _, cpad, cin = _axis_windows(w, wo, kw, sw, pw, dw, 0)
    return (rpad[:, None] * cpad[None, :]) if incl else (rin[:, None] * cin[None, :])


def _avg_t_fwd(arrays, ints, floats):
    """The adjoint: an output-shaped array spread back over the input (x-shaped)."""
    z = arrays[0]
    nd, h, w, ho, wo = ints[0], ints[2], ints[3], ints[4], ints[5]
    lead = z.shape[:-nd]
    if ints[1]:
        flat, divisor = _table(ints)
        zp = (z.reshape(-1, ho, wo) / divisor)[..., None]
        vals = np.broadcast_to(zp, zp.shape[:3] + (flat.shape[-1],))
        dx = _scatter(vals, np.broadcast_to(flat, vals.shape), ints, zp.shape[0], z.dtype)
        return dx.reshape(lead + ((h, w) if nd == 2 else (w,)))
    zd = z.reshape(-1, ho, wo) / _table_divisor(ints)
    hp = max(h + ints[10], (ho - 1) * ints[8] + (ints[6] - 1) * ints[12] + 1)
    wp = max(w + ints[11], (wo - 1) * ints[9] + (ints[7] - 1) * ints[13] + 1)
    dxp = np.zeros((zd.shape[0], hp, wp), z.dtype)
    for rs, cs, _ in _offsets(ints):
        dxp[:, rs, cs] += zd
    dx = np.ascontiguousarray(dxp[:, ints[10]:ints[10] + h, ints[11]:ints[11] + w])
    return dx.reshape(lead + ((h, w) if nd == 2 else (w,)))


def _avg_rev(xs, y, g, ints, floats, needs):
    return [_host.record(_AVG_POOL_T, [g], _avg_t_fwd([g._data], ints, None), ints)]


def _avg_arr_rev(xs, y, g, ints, floats, needs):
    return [_avg_t_fwd([g], ints, None)]


def _avg_t_rev(xs, y, g, ints, floats, needs):
    return [_host.record(_AVG_POOL, [g], _avg_fwd([g._data], ints, None), ints)]


def _avg_t_arr_rev(xs, y, g, ints, floats, needs):
    return [_avg_fwd([g], ints, None)]


_AVG_POOL = _host.nn_op("avg_pool", "AvgPool2DBackward0", _avg_fwd, _avg_rev, _avg_arr_rev, 0)
_AVG_POOL_T = _host.nn_op("avg_pool_t", "AvgPool2DBackwardBackward0", _avg_t_fwd, _avg_t_rev, _avg_t_arr_rev, 0)


# -- the public functions -------------------------------------------------------------------------------
def _tuple(name, v, nd, fname):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),) * nd
    v = tuple(int(u) for u in v)
    if len(v) == 1:
        return v * nd
    if len(v) != nd:
        raise RuntimeError("%s: %s must either be a single int, or a tuple of %s ints" % (
            fname, name, "two" if nd == 2 else "one"))
    return v


def _pool_size(n, k, s, p, d, ceil):
    """PyTorch's pooling_output_shape."""
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)
    out = num // s + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def _spatial(input, nd, fname):
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' (position 1) must be Tensor, not %s" % (fname, type(input).__name__))
    if input.ndim not in (nd + 1, nd + 2) or any(s == 0 for s in input.shape[1:]):
        raise RuntimeError("%s: Expected %dD or %dD (batch mode) tensor with optional 0 dim batch size for input, "
                           "but got: %s" % (fname, nd + 1, nd + 2, list(input.shape)))
    return tuple(input.shape[-nd:])


def _regular(fname, input, nd, kernel_size, stride, padding, dilation, ceil_mode, avg):
    size = _spatial(input, nd, fname)
    ks = _tuple("kernel_size", kernel_size, nd, fname)
    st = ks if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _tuple("stride", stride, nd, fname)
    pad = _tuple("padding", padding, nd, fname)
    dil = _tuple("dilation", dilation, nd, fname)
    if any(k <= 0 for k in ks):
        raise RuntimeError("%s: kernel_size must be greater than zero, but got %s" % (
            fname, " ".join("k%s: %d" % (a, k) for a, k in zip("HW"[2 - nd:], ks))))
    if any(s <= 0 for s in st):
        raise RuntimeError("%s: stride must be greater than zero, but got %s" % (
            fname, " ".join("d%s: %d" % (a, s) for a, s in zip("HW"[2 - nd:], st))))
    for k, p, d in zip(ks, pad, dil):
        if avg and p > k // 2:
            raise RuntimeError("pad should be smaller than or equal to half of kernel size, but got padW = %d, padH = "
                               "%d, kW = %d, kH = %d" % (pad[-1], pad[0], ks[-1], ks[0]))
        if not avg and p > ((k - 1) * d + 1) // 2:
            raise RuntimeError("pad should be at most half of effective kernel size, but got pad=%d, kernel_size=%d "
                               "and dilation=%d" % (p, k, d))
    outs = tuple(_pool_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in zip(size, ks, st, pad, dil))
    if any(o < 1 for o in outs):
        lead = input.shape[-nd - 1]
        raise RuntimeError("Given input size: (%s). Calculated output size: (%s). Output size is too small" % (
            "x".join(str(s) for s in (lead,) + size), "x".join(str(s) for s in (lead,) + outs)))
    if nd == 1:
        ks, st, pad, dil, size, outs = ((1,) + ks, (1,) + st, (0,) + pad, (1,) + dil, (1,) + size, (1,) + outs)
    return [nd, 0, size[0], size[1], outs[0], outs[1], ks[0], ks[1], st[0], st[1], pad[0], pad[1], dil[0], dil[1]]


def _record(op, input, fwd, ints):
    ints = list(ints) + [0] * (_NINTS - len(ints))
    out = fwd([input._data], ints, None)
    return _host.record(op, [input], out, ints), ints


def _max_pool(nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    fname = "max_pool%dd" % nd
    ints = _regular(fname, input, nd, kernel_size, stride, padding, dilation, ceil_mode, False)
    out, ints = _record(_MAX_POOL, input, _max_fwd, ints)
    if return_indices:
        return out, Tensor._const(_max_indices(input._data, ints).astype(np.int64))
    return out


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum over each window of an (N, C, L) or (C, L) input (``return_indices``:
    also the position of each maximum in its row)."""
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum over each window of an (N, C, H, W) or (C, H, W) input (``return_indices``:
    also the flat position H * w + ... of each maximum in its plane)."""
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _avg_pool(nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    fname = "avg_pool%dd" % nd
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    ints = _regular(fname, input, nd, kernel_size, stride, padding, 1, ceil_mode, True)
    ints += [int(bool(count_include_pad)), int(divisor_override or 0)]
    if input.dtype.kind != "f":
        raise NotImplementedError("\"%s\" not implemented for '%s'" % ("avg_pool2d", input.dtype.name))
    return _record(_AVG_POOL, input, _avg_fwd, ints)[0]


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """The mean over each window of an (N, C, L) or (C, L) input."""
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The mean over each window of an (N, C, H, W) or (C, H, W) input (the divisor counts
    the padding when ``count_include_pad``, or is ``divisor_override``)."""
    return _avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _adaptive_ints(fname, input, nd, output_size):
    size = _spatial(input, nd, fname)
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size,) * nd
    output_size = tuple(output_size)
    if len(output_size) != nd:
        raise ValueError("%s: output_size must be %d" % (fname, nd))
    outs = tuple(s if o is None else int(o) for o, s in zip(output_size, size))
    if any(o < 0 for o in outs):
        raise RuntimeError("%s: elements of output_size must be greater than or equal to 0 but received {%s}"
                           % (fname, ", ".join(str(o) for o in outs)))
    if nd == 1:
        size, outs = (1,) + size, (1,) + outs
    return [nd, 1, size[0], size[1], outs[0], outs[1], 1, 1, 1, 1, 0, 0, 1, 1, 0, 0]


def adaptive_avg_pool1d(input, output_size):
    """The mean over ``output_size`` windows spanning an (N, C, L) input (window o:
    [floor(o L / out), ceil((o + 1) L / out)))."""
    return _record(_AVG_POOL, input, _avg_fwd, _adaptive_ints("adaptive_avg_pool1d", input, 1, output_size))[0]


def adaptive_avg_pool2d(input, output_size):
    """The mean over the output_size windows spanning each (H, W) plane."""
    return _record(_AVG_POOL, input, _avg_fwd, _adaptive_ints("adaptive_avg_pool2d", input, 2, output_size))[0]


def _adaptive_max(nd, input, output_size, return_indices):
    ints = _adaptive_ints("adaptive_max_pool%dd" % nd, input, nd, output_size)
    out, ints = _record(_MAX_POOL, input, _max_fwd, ints)
    if return_indices:
        return out, Tensor._const(_max_indices(input._data, ints).astype(np.int64))
    return out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """The maximum over ``output_size`` windows spanning an (N, C, L) input."""
    return _adaptive_max(1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The maximum over the output_size windows spanning each (H, W) plane."""
    return _adaptive_max(2, input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return _adaptive_max(1, input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return _adaptive_max(2, input, output_size, True)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum over each window of x^p)^(1/p)`` (avg_pool of x^p times the window size)."""
    if norm_type == float("inf"):
        return max_pool1d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -max_pool1d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(kernel_size if isinstance(kernel_size, int) else kernel_size[0]) \
        .pow(1.0 / norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum over each window of x^p)^(1/p)``."""
    kh, kw = _tuple("kernel_size", kernel_size, 2, "lp_pool2d")
    if norm_type == float("inf"):
        return max_pool2d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -max_pool2d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(kw * kh).pow(1.0 / norm_type)
