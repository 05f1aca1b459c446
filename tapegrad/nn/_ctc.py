"""F.ctc_loss: the connectionist temporal classification loss, one entry (a host op
whose input is the log-probabilities; the targets and lengths ride in its integer
parameters).  The forward is the alpha recursion in log space, over the whole batch
at once; the reverse runs the beta recursion and gives PyTorch's gradient,
``exp(log_probs) - exp(log(sum of alpha * beta over the positions of each class) + nll -
log_probs)`` (it assumes the log-probabilities come from a log_softmax, as PyTorch's
does).  As in PyTorch, that reverse has no derivative of its own."""
import numpy as np

from ..autograd.grad_mode import is_grad_enabled
from ..core.registry import SAVE_A
from ..core.tensor import Tensor
from . import _host

__all__ = ["ctc_loss"]


def _decode(ints):
    """(blank, zero_infinity, N, input lengths, target lengths, targets per sample)."""
    blank, zero_inf, n = ints[0], ints[1], ints[2]
    p = 3
    in_len = np.array(ints[p:p + n], np.int64)
    p += n
    tg_len = np.array(ints[p:p + n], np.int64)
    p += n
    flat = np.array(ints[p:p + int(tg_len.sum())], np.int64)
    starts = np.concatenate([[0], np.cumsum(tg_len)[:-1]]).astype(np.int64)
    return blank, zero_inf, n, in_len, tg_len, [flat[s:s + l] for s, l in zip(starts, tg_len)]


def _extended(targets, blank, width):
    """The labels with blanks between and around them, (N, width), and where a skip
    from s - 2 is allowed."""
    n = len(targets)
    ext = np.full((n, width), blank, np.int64)
    valid = np.zeros((n, width), bool)
    for b, t in enumerate(targets):
        ext[b, 1:2 * len(t):2] = t
        valid[b, :2 * len(t) + 1] = True
    skip = np.zeros((n, width), bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    return ext, valid, skip


def _lse(*xs):
    m = xs[0]
    for x in xs[1:]:
        m = np.maximum(m, x)
    safe = np.where(np.isfinite(m), m, 0.0)
    total = sum(np.exp(x - safe) for x in xs)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(m), np.log(total) + safe, m)


def _alphas(lp, ints):
    blank, zero_inf, n, in_len, tg_len, targets = _decode(ints)
    T = lp.shape[0]
    width = 2 * int(tg_len.max(initial=0)) + 1
    ext, valid, skip = _extended(targets, blank, width)
    rows = np.arange(n)[:, None]
    lpe = lp[:, rows, ext]                      # (T, N, width): log_probs at each extended label
    la = np.full((T, n, width), -np.inf)
    la[0, :, 0] = lpe[0, :, 0]
    has = tg_len > 0
    la[0, has, 1] = lpe[0, has, 1]
    ninf = np.full((n, 1), -np.inf)
    for t in range(1, T):
        prev = la[t - 1]
        s1 = np.concatenate([ninf, prev[:, :-1]], 1)
        s2 = np.where(skip, np.concatenate([ninf, ninf, prev[:, :-2]], 1), -np.inf)
        la[t] = np.where(valid, _lse(prev, s1, s2) + lpe[t], -np.inf)
    end = in_len - 1
    last = la[end, np.arange(n)]                # (N, width)
    i2 = 2 * tg_len
    fin = np.where(has, _lse(last[np.arange(n), i2], last[np.arange(n), np.maximum(i2 - 1, 0)]),
                   last[np.arange(n), 0])
    return -fin, la, lpe, ext, valid, skip, in_len, tg_len, zero_inf


def _fwd(arrays, ints, floats):
    lp = arrays[0].astype(np.float64, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        nll = _alphas(lp, ints)[0]
    if ints[1]:
        nll = np.where(np.isinf(nll), 0.0, nll)
    return nll.astype(arrays[0].dtype)


def _grad(lp, g, ints):
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        nll, la, lpe, ext, valid, skip, in_len, tg_len, zero_inf = _alphas(lp, ints)
        T, n, width = la.shape
        lb = np.full_like(la, -np.inf)
        ninf = np.full((n, 1), -np.inf)
        idx = np.arange(n)
        i2 = 2 * tg_len
        skip_next = np.zeros_like(skip)
        skip_next[:, :-2] = skip[:, 2:]
        for t in range(T - 1, -1, -1):
            at_end = in_len - 1 == t
            nxt = lb[t + 1] if t + 1 < T else np.full((n, width), -np.inf)
            s1 = np.concatenate([nxt[:, 1:], ninf], 1)
            s2 = np.where(skip_next, np.concatenate([nxt[:, 2:], ninf, ninf], 1), -np.inf)
            cur = np.where(valid, _lse(nxt, s1, s2) + lpe[t], -np.inf)
            start = np.full((n, width), -np.inf)
            start[idx, i2] = lpe[t, idx, i2]
            has = tg_len > 0
            start[idx[has], i2[has] - 1] = lpe[t, idx[has], i2[has] - 1]
            cur = np.where(at_end[:, None], start, cur)
            cur[in_len - 1 < t] = -np.inf
            lb[t] = cur
        ab = la + lb                                            # (T, N, width)
        C = lp.shape[2]
        m = np.max(np.where(np.isfinite(ab), ab, -np.inf), axis=2, keepdims=True)
        msafe = np.where(np.isfinite(m), m, 0.0)
        e = np.where(np.isfinite(ab), np.exp(ab - msafe), 0.0)
        acc = np.zeros((T, n, C))
        tt, bb = np.meshgrid(np.arange(T), np.arange(n), indexing="ij")
        np.add.at(acc, (np.broadcast_to(tt[..., None], ab.shape), np.broadcast_to(bb[..., None], ab.shape),
                        np.broadcast_to(ext[None], ab.shape)), e)
        lcab = np.log(acc) + msafe
        # (a sample no alignment reaches has an infinite loss and, as in PyTorch, nan gradients)
        grad = np.exp(lp) - np.exp(lcab + nll[None, :, None] - lp)
    grad[np.arange(T)[:, None] >= in_len[None, :]] = 0.0
    bad = np.isinf(nll)
    if zero_inf:
        grad[:, bad] = 0.0
    return grad * g[None, :, None]


def _rev(xs, y, g, ints, floats, needs):
    if is_grad_enabled():
        raise RuntimeError("derivative for aten::_ctc_loss_backward is not implemented")
    return [Tensor._const(_grad(xs[0]._data.astype(np.float64), g._data, ints).astype(xs[0].dtype))]


def _arr_rev(xs, y, g, ints, floats, needs):
    return [_grad(xs[0].astype(np.float64), g, ints)]


_CTC = _host.nn_op("ctc_loss", "CtcLossBackward0", _fwd, _rev, _arr_rev, SAVE_A)


def _ints_of(v, name):
    if isinstance(v, Tensor):
        a = v._data
        if a.dtype.kind not in "iu":
            raise RuntimeError("%s must be integral" % name)
        return a.astype(np.int64).reshape(-1)
    return np.asarray(v, np.int64).reshape(-1)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """The CTC loss of ``log_probs`` (T, N, C) (log_softmax outputs) against ``targets``
    ((N, S) padded, or the N targets concatenated), per sample averaged by its target
    length and then over the batch ("mean"), summed ("sum") or not reduced ("none")."""
    if not isinstance(log_probs, Tensor):
        raise TypeError("ctc_loss(): argument 'log_probs' (position 1) must be Tensor, not %s"
                        % type(log_probs).__name__)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError("%s is not a valid value for reduction" % reduction)
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise RuntimeError("ctc_loss: expected log_probs to be 2-D or 3-D, got %d-D" % log_probs.ndim)
    T, n, C = lp.shape
    tgt = _ints_of(targets, "targets") if not isinstance(targets, Tensor) else targets._data.astype(np.int64)
    if unbatched:
        tgt = tgt.reshape(1, -1)
    in_len = _ints_of(input_lengths, "input_lengths")
    tg_len = _ints_of(target_lengths, "target_lengths")
    if in_len.shape != (n,) or tg_len.shape != (n,):
        raise RuntimeError("input_lengths must be of size batch_size")
    if (in_len > T).any():
        raise RuntimeError("Expected input_lengths to have value at most %d, but got value %d (while checking "
                           "arguments for ctc_loss_cpu)" % (T, int(in_len.max())))
    if (in_len < 0).any() or (tg_len < 0).any():
        raise RuntimeError("ctc_loss: lengths must be non-negative")
    if tgt.ndim == 2:
        if tg_len.size and tgt.shape[1] < tg_len.max():
            raise RuntimeError("Expected tensor to have size at least %d at dimension 1, but got size %d for argument "
                               "#2 'targets' (while checking arguments for ctc_loss_cpu)"
                               % (int(tg_len.max()), tgt.shape[1]))
        flat = np.concatenate([tgt[b, :tg_len[b]] for b in range(n)]) if n else np.zeros(0, np.int64)
    else:
        if tgt.size < tg_len.sum():
            raise RuntimeError("Expected tensor to have size at least %d at dimension 0, but got size %d for argument "
                               "#2 'targets' (while checking arguments for ctc_loss_cpu)"
                               % (int(tg_len.sum()), tgt.size))
        flat = tgt.reshape(-1)
    if ((flat < 0) | (flat >= C)).any() or (flat == blank).any():
        raise RuntimeError("ctc_loss: targets must be classes in [0, %d) other than blank (%d)" % (C, blank))
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    for t in (targets, input_lengths, target_lengths):      # (their values are the entry's parameters)
        if isinstance(t, Tensor):
            _host.guard_values(t)
    ints = [int(blank), int(bool(zero_infinity)), n] + in_len.tolist() + tg_len.tolist() + flat.tolist()
    nll = _host.record(_CTC, [lp], _fwd([lp._data], ints, None), ints)
    if reduction == "mean":
        out = (nll / Tensor._const(np.maximum(tg_len, 1).astype(nll.dtype))).mean()
    elif reduction == "sum":
        out = nll.sum()
    else:
        out = nll
    return out.squeeze(0) if unbatched and reduction == "none" else out
