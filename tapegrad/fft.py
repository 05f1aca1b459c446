"""``tg.fft``: PyTorch's ``torch.fft`` (NumPy's pocketfft in the forward).

Three host ops on the real pair tensors of complex tensors (``complex.py``):
``fft_c2c`` (complex to complex, forward or inverse), ``fft_r2c`` (real to the
one-sided half spectrum) and ``fft_c2r`` (the half spectrum to real).  Each keeps its
sizes: the zero-padding or trimming that ``n=``/``s=`` ask for is a recorded op before
it.  The reverse rules are the adjoint transforms, written with the same three ops,
so they differentiate again:

- c2c: the adjoint of the transform with norm N is the opposite transform with the
  dual norm ("backward" <-> "forward", "ortho" itself);
- r2c: the real part of the adjoint c2c of the half spectrum zero-padded to full length;
- c2r: the r2c of the gradient with the dual norm, the bins that stand for two
  (1 .. n - m) doubled.
"""
import builtins

import numpy as np

from . import complex_tensor as _c
from . import functions as F
from .core.tensor import Tensor
from .ops import host as _h
from .complex_tensor import ComplexTensor

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn",
           "irfftn", "hfft", "ihfft", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]

_NORMS = ("backward", "ortho", "forward")
_DUAL = {0: 2, 1: 1, 2: 0}


def _norm_code(norm):
    if norm is None:
        return 0
    if norm not in _NORMS:
        raise ValueError('Invalid normalization mode: "%s"' % norm)
    return _NORMS.index(norm)


def _params(ints):
    """(norm code, complex dims) of an entry's integer parameters."""
    k = ints[1]
    return ints[0], list(ints[2:2 + k])


def _as_complex(x):
    """``x`` as a complex numpy array of the pair array ``x`` (..., 2)."""
    return x[..., 0] + 1j * x[..., 1] if x.dtype == np.float64 else (x[..., 0] + 1j * x[..., 1]).astype(np.complex64)


def _as_pair(z, dt):
    return np.ascontiguousarray(np.stack([z.real, z.imag], -1).astype(dt))


# -- the three host ops -----------------------------------------------------------------------------
def _c2c_fwd(xs, ints, f):
    inverse = ints[-1]
    norm, dims = _params(ints)
    z = _as_complex(xs[0])
    out = (np.fft.ifftn if inverse else np.fft.fftn)(z, axes=dims, norm=_NORMS[norm])
    return _as_pair(out, xs[0].dtype)


def _c2c_rev(xs, y, g, ints, f, needs):
    norm, dims = _params(ints)
    return [_c2c(g, dims, _DUAL[norm], not ints[-1])]


# forward mode (each transform is linear): a tangent is transformed as the value is, K
# cotangents as the reverse transforms one, and the curvature is zero.  The rules see
# arrays with a leading K axis, so the transforms' dims move up by one.
def _after_k(ints, dims, norm=None):
    """``ints`` for arrays with a leading K axis (and ``norm`` instead of the entry's)."""
    return ((ints[0] if norm is None else norm, len(dims)) + tuple(d + 1 for d in dims)
            + tuple(ints[2 + len(dims):]))


def _linear(tangent, batched_reverse):
    return tangent, batched_reverse, lambda xs, y, ts, ty, g, ints, f, needs: [None]


def _c2c_batched_reverse(xs, y, G, ints, f, needs):
    norm, dims = _params(ints)
    back = _after_k(ints, dims, _DUAL[norm])[:-1] + (1 - ints[-1],)
    return [_c2c_fwd([G], back, f)]


_C2C = _h.host_op("fft_c2c", "FftC2CBackward0", _c2c_fwd, _c2c_rev, 0, forward_mode=_linear(
    lambda xs, y, ts, ints, f: _c2c_fwd([ts[0]], _after_k(ints, _params(ints)[1]), f), _c2c_batched_reverse))


def _c2c(pair, dims, norm, inverse):
    ints = (norm, len(dims)) + tuple(dims) + (int(inverse),)
    return _h.record(_C2C, [pair], _c2c_fwd([pair._data], ints, None), ints)


def _r2c_fwd(xs, ints, f):
    norm, dims = _params(ints)
    out = np.fft.rfftn(xs[0], axes=dims, norm=_NORMS[norm])
    return _as_pair(out, xs[0].dtype)


def _r2c_rev(xs, y, g, ints, f, needs):
    norm, dims = _params(ints)
    n = ints[2 + len(dims)]                     # the real input's length along the last dim
    last = dims[-1]
    gc = _pad_to(g, last, n)                    # the half spectrum's gradient, zero beyond it
    return [_c2c(gc, dims, _DUAL[norm], True)[..., 0]]


def _r2c_batched_reverse(xs, y, G, ints, f, needs):
    norm, dims = _params(ints)
    n, last = ints[2 + len(dims)], dims[-1] + 1
    full = list(G.shape)
    full[last] = n
    gc = np.zeros(full, G.dtype)                # the half spectrum's cotangents, zero beyond it
    m = min(n, G.shape[last])
    gc[(slice(None),) * last + (slice(0, m),)] = G[(slice(None),) * last + (slice(0, m),)]
    z = np.fft.ifftn(_as_complex(gc), axes=[d + 1 for d in dims], norm=_NORMS[_DUAL[norm]])
    return [z.real]


_R2C = _h.host_op("fft_r2c", "FftR2CBackward0", _r2c_fwd, _r2c_rev, 0, forward_mode=_linear(
    lambda xs, y, ts, ints, f: _r2c_fwd([ts[0]], _after_k(ints, _params(ints)[1]), f), _r2c_batched_reverse))


def _r2c(x, dims, norm):
    ints = (norm, len(dims)) + tuple(dims) + (x.shape[dims[-1]],)
    return _h.record(_R2C, [x], _r2c_fwd([x._data], ints, None), ints)


def _c2r_fwd(xs, ints, f):
    norm, dims = _params(ints)
    n = ints[2 + len(dims)]
    z = _as_complex(xs[0])
    s = [z.shape[d] for d in dims[:-1]] + [n]
    return np.ascontiguousarray(np.fft.irfftn(z, s=s, axes=dims, norm=_NORMS[norm]).astype(xs[0].dtype))


def _c2r_rev(xs, y, g, ints, f, needs):
    norm, dims = _params(ints)
    n = ints[2 + len(dims)]
    gi = _r2c(g, dims, _DUAL[norm])             # (..., n // 2 + 1, 2)
    m = n // 2 + 1
    w = np.ones(m, g.dtype)
    w[1:n - m + 1] = 2.0                         # bins 1 .. n - m stand for two of the full spectrum
    shape = [1] * (g.ndim + 1)
    shape[dims[-1]] = m
    return [gi * Tensor._const(w.reshape(shape))]


def _c2r_batched_reverse(xs, y, G, ints, f, needs):
    norm, dims = _params(ints)
    n = ints[2 + len(dims)]
    gi = _r2c_fwd([G], _after_k(ints, dims, _DUAL[norm]), f)      # (K, ..., n // 2 + 1, 2)
    m = n // 2 + 1
    w = np.ones(m, G.dtype)
    w[1:n - m + 1] = 2.0
    shape = [1] * gi.ndim
    shape[dims[-1] + 1] = m
    return [gi * w.reshape(shape)]


_C2R = _h.host_op("fft_c2r", "FftC2RBackward0", _c2r_fwd, _c2r_rev, 0, forward_mode=_linear(
    lambda xs, y, ts, ints, f: _c2r_fwd([ts[0]], _after_k(ints, _params(ints)[1]), f), _c2r_batched_reverse))


def _c2r(pair, dims, norm, n):
    ints = (norm, len(dims)) + tuple(dims) + (n,)
    return _h.record(_C2R, [pair], _c2r_fwd([pair._data], ints, None), ints)


# -- sizes: zero-padding and trimming, recorded ----------------------------------------------------
def _pad_to(t, dim, n):
    """``t`` trimmed or zero-padded to length ``n`` along ``dim`` (a real tensor or a
    pair tensor, ``dim`` counted from the front)."""
    cur = t.shape[dim]
    if cur == n:
        return t
    if cur > n:
        return F.narrow(t, dim, 0, n)
    shape = list(t.shape)
    shape[dim] = n - cur
    return F.cat([t, Tensor._const(np.zeros(shape, t.dtype))], dim)


def _input(x, name, real_only=False):
    if not isinstance(x, Tensor):
        raise TypeError("fft_%s(): argument 'input' (position 1) must be Tensor, not %s" % (name, type(x).__name__))
    if isinstance(x, ComplexTensor):
        if real_only:
            raise RuntimeError("%s expects a real input tensor, but got Complex%s"
                               % (name, "Double" if x.dtype == np.complex128 else "Float"))
        return x
    if x.dtype.kind in "biu":
        x = x.to(F.get_default_dtype())
    elif x.dtype.kind != "f":
        raise RuntimeError("%s: unsupported dtype %s" % (name, x.dtype))
    elif x.dtype == np.float16:
        x = x.to(np.float32)
    return x


def _dims_sizes(x, s, dim, name, default_all=True, max_dims=None):
    """The dims (non-negative) and sizes of an n-dimensional transform, as PyTorch
    resolves ``s`` and ``dim``."""
    nd = x.ndim
    if dim is not None:
        dims = [dim] if isinstance(dim, (int, np.integer)) else list(dim)
        dims = [_c._cdim(d, nd) for d in dims]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        dims = list(range(nd - len(s), nd))
        if len(s) > nd:
            raise RuntimeError("Got shape with %d values but input tensor only has %d dimensions."
                               % (len(s), nd))
    else:
        dims = list(range(nd)) if default_all else list(range(nd - 2, nd))
    if not dims and nd == 0:
        raise RuntimeError("%s: expected a tensor with at least one dimension" % name)
    sizes = [x.shape[d] for d in dims] if s is None else [int(v) if v != -1 else x.shape[d] for v, d in zip(s, dims)]
    for v in sizes:
        if v < 1:
            raise RuntimeError("Invalid number of data points (%d) specified" % v)
    return dims, sizes


def _one_dim(x, n, dim, name):
    d = _c._cdim(dim, x.ndim)
    if x.ndim == 0:
        raise IndexError("Dimension specified as %d but tensor has no dimensions" % dim)
    size = x.shape[d] if n is None else int(n)
    if size < 1:
        raise RuntimeError("Invalid number of data points (%d) specified" % size)
    return [d], [size]


def _out(out):
    if out is not None:
        raise TypeError("tapegrad: out= is not supported (tapegrad ops return new tensors)")


# -- complex to complex ---------------------------------------------------------------------------
def _c2c_transform(x, dims, sizes, norm, inverse):
    pair = _c._pair(x)
    for d, n in zip(dims, sizes):
        pair = _pad_to(pair, d, n)
    return ComplexTensor._from_pair(_c2c(pair, dims, norm, inverse))


def _c2c_1d(input, n, dim, norm, out, name, inverse):
    _out(out)
    x = _input(input, name)
    dims, sizes = _one_dim(x, n, dim, name)
    return _c2c_transform(x, dims, sizes, _norm_code(norm), inverse)


def _c2c_nd(input, s, dim, norm, out, name, inverse):
    _out(out)
    x = _input(input, name)
    dims, sizes = _dims_sizes(x, s, dim, name)
    if not dims:
        return _c._wrap(_c._pair(x))
    return _c2c_transform(x, dims, sizes, _norm_code(norm), inverse)


def fft(input, n=None, dim=-1, norm=None, *, out=None):
    return _c2c_1d(input, n, dim, norm, out, "fft", False)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    return _c2c_1d(input, n, dim, norm, out, "ifft", True)


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    return _c2c_nd(input, s, dim, norm, out, "fftn", False)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    return _c2c_nd(input, s, dim, norm, out, "ifftn", True)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return fftn(input, s, dim, norm, out=out)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return ifftn(input, s, dim, norm, out=out)


# -- real to half spectrum and back -----------------------------------------------------------------
def _r2c_transform(x, dims, sizes, norm):
    for d, n in zip(dims, sizes):
        x = _pad_to(x, d, n)
    return ComplexTensor._from_pair(_r2c(x, dims, norm))


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    _out(out)
    x = _input(input, "rfft", real_only=True)
    dims, sizes = _one_dim(x, n, dim, "rfft")
    return _r2c_transform(x, dims, sizes, _norm_code(norm))


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    _out(out)
    x = _input(input, "rfftn", real_only=True)
    dims, sizes = _dims_sizes(x, s, dim, "rfftn")
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    return _r2c_transform(x, dims, sizes, _norm_code(norm))


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return rfftn(input, s, dim, norm, out=out)


def _c2r_transform(x, dims, sizes, norm):
    """``sizes``: the real output's lengths; the last dim's input is trimmed or padded
    to its half spectrum, sizes[-1] // 2 + 1."""
    pair = _c._pair(x)
    for d, n in zip(dims[:-1], sizes[:-1]):
        pair = _pad_to(pair, d, n)
    pair = _pad_to(pair, dims[-1], sizes[-1] // 2 + 1)
    return _c2r(pair, dims, norm, sizes[-1])


def _c2r_size(x, n, dim):
    """The dim and the real output's length of a one-dimensional c2r transform (by
    default 2 (m - 1) for m input bins)."""
    d = _c._cdim(dim, x.ndim)
    size = 2 * (x.shape[d] - 1) if n is None else int(n)
    if size < 1:
        raise RuntimeError("Invalid number of data points (%d) specified" % size)
    return d, size


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    _out(out)
    x = _input(input, "irfft")
    d, size = _c2r_size(x, n, dim)
    return _c2r_transform(x, [d], [size], _norm_code(norm))


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    _out(out)
    x = _input(input, "irfftn")
    dims, sizes = _dims_sizes(x, s, dim, "irfftn")
    if not dims:
        raise RuntimeError("irfftn must transform at least one axis")
    if s is None or s[-1] == -1:
        sizes[-1] = 2 * (x.shape[dims[-1]] - 1)
        if sizes[-1] < 1:
            raise RuntimeError("Invalid number of data points (%d) specified" % sizes[-1])
    return _c2r_transform(x, dims, sizes, _norm_code(norm))


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return irfftn(input, s, dim, norm, out=out)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The real spectrum of a Hermitian signal given by its first half: irfft of the
    conjugate with the dual norm."""
    _out(out)
    x = _input(input, "hfft")
    d, size = _c2r_size(x, n, dim)
    return _c2r_transform(_c.conj(x) if isinstance(x, ComplexTensor) else x, [d], [size],
                          _DUAL[_norm_code(norm)])


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of hfft: the conjugate of rfft with the dual norm."""
    _out(out)
    x = _input(input, "ihfft", real_only=True)
    dims, sizes = _one_dim(x, n, dim, "ihfft")
    return _c.conj(_r2c_transform(x, dims, sizes, _DUAL[_norm_code(norm)]))


# -- shifts and frequencies -----------------------------------------------------------------------
def _shift(input, dim, sign):
    if not isinstance(input, Tensor):
        raise TypeError("fftshift(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    nd = input.ndim
    dims = list(range(nd)) if dim is None else _c._cdims(dim, nd)
    shifts = [(input.shape[d] // 2) if sign > 0 else -(input.shape[d] // 2) for d in dims]
    if not dims:
        return input.clone()
    if isinstance(input, ComplexTensor):
        return _c.roll(input, shifts, dims)
    return F.roll(input, shifts, dims)


def fftshift(input, dim=None):
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):
    return _shift(input, dim, -1)


def _freq(values, n, d, dtype, requires_grad, name):
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError("%s(): argument 'n' (position 1) must be int, not %s" % (name, type(n).__name__))
    if n < 0:
        raise RuntimeError("%s: n must be non-negative, got %d" % (name, n))
    dt = np.dtype(F.get_default_dtype() if dtype is None else dtype)
    t = Tensor._const(np.ascontiguousarray((values / (n * d)).astype(dt)))
    if requires_grad:
        t.requires_grad_(True)
    return t


def fftfreq(n, d=1.0, *, out=None, dtype=None, device=None, requires_grad=False):
    _out(out)
    if device is not None:
        from .core.tensor import check_device
        check_device(device)
    k = np.concatenate([np.arange(0, (n + 1) // 2), np.arange(-(n // 2), 0)]) if n > 0 else np.zeros(0)
    return _freq(k.astype(np.float64), n, d, dtype, requires_grad, "fftfreq")


def rfftfreq(n, d=1.0, *, out=None, dtype=None, device=None, requires_grad=False):
    _out(out)
    if device is not None:
        from .core.tensor import check_device
        check_device(device)
    return _freq(np.arange(0, n // 2 + 1).astype(np.float64), n, d, dtype, requires_grad, "rfftfreq")


del builtins
