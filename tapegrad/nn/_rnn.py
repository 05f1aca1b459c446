"""The recurrences behind nn.RNN / LSTM / GRU and their cells.

The pointwise part of a step is one entry: a host op ``lstm_cell(gates, c)`` giving
(h, c) stacked as (2, N, H), ``gru_cell(gi, gh, h)`` giving h; the matrix products
stay matmuls (the input's projection for all time steps at once, then one per step for
the hidden state), as PyTorch's CPU recurrences compute them.  Each cell's reverse is
PyTorch's formula, written with tapegrad's ops (differentiable again) and on arrays."""
import numpy as np

from .. import functions as _f
from ..core.registry import SAVE_A, SAVE_B, SAVE_C, SAVE_OUT
from ..core.tensor import Tensor
from . import _host
from ._sparse import dropout as _dropout

__all__ = []


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _expit(x):
    """The logistic function in one pass (SciPy's), in x's dtype."""
    import scipy.special
    return scipy.special.expit(x)


# -- lstm_cell(gates (N, 4H), c (N, H)) -> (7, N, H): h, c and, for the reverse, i, f, g, o, tanh(c) -------
def _lstm_fwd(arrays, ints, floats):
    gates, c = arrays
    H = c.shape[-1]
    out = np.empty((7,) + c.shape, np.result_type(gates.dtype, c.dtype))
    sig = _expit(gates)
    i, f, o = sig[..., :H], sig[..., H:2 * H], sig[..., 3 * H:]
    g = np.tanh(gates[..., 2 * H:3 * H], out=out[4])
    out[2], out[3], out[5] = i, f, o
    cy = out[1]
    np.multiply(f, c, out=cy)
    cy += i * g
    tc = np.tanh(cy, out=out[6])
    np.multiply(o, tc, out=out[0])
    return out


def _lstm_rev(xs, y, g, ints, floats, needs):
    """(Recomputed from the saved gates: differentiable again, as create_graph needs.)"""
    gates, c = xs
    H = c.shape[-1]
    i = _f.sigmoid(gates[..., :H])
    f = _f.sigmoid(gates[..., H:2 * H])
    gg = _f.tanh(gates[..., 2 * H:3 * H])
    o = _f.sigmoid(gates[..., 3 * H:])
    tc = _f.tanh(y[1])
    dh, dc = g[0], g[1]
    dct = dc + dh * o * (1 - tc * tc)
    dgates = _f.cat([dct * gg * i * (1 - i), dct * c * f * (1 - f), dct * i * (1 - gg * gg),
                     dh * tc * o * (1 - o)], -1) if needs[0] else None
    return [dgates, dct * f if needs[1] else None]


def _lstm_arr_rev(xs, y, g, ints, floats, needs):
    """(From the activations the forward kept: arithmetic only.)"""
    c = xs[1]
    i, f, gg, o, tc = y[2], y[3], y[4], y[5], y[6]
    dh, dc = g[0], g[1]
    dct = dc + dh * o * (1 - tc * tc)
    dgates = None
    if needs[0]:
        H = c.shape[-1]
        dgates = np.empty(c.shape[:-1] + (4 * H,))
        dgates[..., :H] = dct * gg * i * (1 - i)
        dgates[..., H:2 * H] = dct * c * f * (1 - f)
        dgates[..., 2 * H:3 * H] = dct * i * (1 - gg * gg)
        dgates[..., 3 * H:] = dh * tc * o * (1 - o)
    return [dgates, dct * f if needs[1] else None]


_LSTM_CELL = _host.nn_op("lstm_cell", "LstmCellBackward0", _lstm_fwd, _lstm_rev, _lstm_arr_rev,
                         SAVE_A | SAVE_B | SAVE_OUT)


def lstm_cell_pointwise(gates, c):
    """(h, c) of one LSTM step from its gate pre-activations (N, 4H) (order i, f, g, o)."""
    out = _host.record(_LSTM_CELL, [gates, c], _lstm_fwd([gates._data, c._data], (), None))
    return out[0], out[1]


# -- lstm_sequence(xw (L, N, 4H), w_hh (4H, H), hc0 (2, N, H)) -> (7, L, N, H) --------------------------------
# A whole LSTM direction as one entry: the recurrence runs in NumPy, the output keeps per step h, c
# and, for the reverse, the gate activations i, f, g, o and tanh(c); the reverse runs backpropagation
# through time on arrays (one matrix product per step for the hidden state's adjoint, one for the
# weight's adjoint over all steps).  ints: (backward in time).
def _steps(L, reverse):
    return range(L - 1, -1, -1) if reverse else range(L)


def _lstm_seq_fwd(arrays, ints, floats):
    xw, w_hh, hc0 = arrays
    L, N, H = xw.shape[0], xw.shape[1], w_hh.shape[1]
    out = np.empty((7, L, N, H), np.result_type(xw.dtype, w_hh.dtype))
    h, c = hc0[0], hc0[1]
    w_t = w_hh.T
    for t in _steps(L, ints[0]):
        gates = xw[t] + h @ w_t
        sig = _expit(gates)
        i, f, o = sig[:, :H], sig[:, H:2 * H], sig[:, 3 * H:]
        g = np.tanh(gates[:, 2 * H:3 * H], out=out[4, t])
        out[2, t], out[3, t], out[5, t] = i, f, o
        c = np.multiply(f, c, out=out[1, t])
        c += i * g
        tc = np.tanh(c, out=out[6, t])
        h = np.multiply(o, tc, out=out[0, t])
    return out


def _previous(y, hc0, t, L, reverse, k):
    """The state (k = 0: h, 1: c) before step t."""
    first = (t == L - 1) if reverse else (t == 0)
    if first:
        return hc0[k]
    return y[k, t + 1] if reverse else y[k, t - 1]


def _lstm_seq_arr_rev(xs, y, g, ints, floats, needs):
    xw, w_hh, hc0 = xs
    L, N, H = xw.shape[0], xw.shape[1], w_hh.shape[1]
    rev = ints[0]
    dgates = np.empty((L, N, 4 * H))
    dh = np.zeros((N, H))
    dc = np.zeros((N, H))
    for t in reversed(list(_steps(L, rev))):
        dh += g[0, t]
        dc += g[1, t]
        i, f, gg, o, tc = y[2, t], y[3, t], y[4, t], y[5, t], y[6, t]
        dct = dc + dh * o * (1 - tc * tc)
        d = dgates[t]
        d[:, :H] = dct * gg * i * (1 - i)
        d[:, H:2 * H] = dct * _previous(y, hc0, t, L, rev, 1) * f * (1 - f)
        d[:, 2 * H:3 * H] = dct * i * (1 - gg * gg)
        d[:, 3 * H:] = dh * tc * o * (1 - o)
        dc = dct * f
        dh = d @ w_hh
    dw = None
    if needs[1]:
        prev = np.empty((L, N, H))
        for t in range(L):
            prev[t] = _previous(y, hc0, t, L, rev, 0)
        dw = dgates.reshape(L * N, 4 * H).T @ prev.reshape(L * N, H)
    return [dgates if needs[0] else None, dw, np.stack([dh, dc]) if needs[2] else None]


def _lstm_seq_rev(xs, y, g, ints, floats, needs):
    """The same with tapegrad's operations, the states recomputed by the cell entries
    (differentiable again: create_graph)."""
    xw, w_hh, hc0 = xs
    L, H = xw.shape[0], w_hh.shape[1]
    rev = ints[0]
    h, c = hc0[0], hc0[1]
    w_t = w_hh.t()
    before, acts = {}, {}
    for t in _steps(L, rev):
        before[t] = (h, c)
        pre = xw[t] + _f.matmul(h, w_t)
        i, f = _f.sigmoid(pre[:, :H]), _f.sigmoid(pre[:, H:2 * H])
        gg, o = _f.tanh(pre[:, 2 * H:3 * H]), _f.sigmoid(pre[:, 3 * H:])
        c = f * c + i * gg
        tc = _f.tanh(c)
        h = o * tc
        acts[t] = (i, f, gg, o, tc)
    dh = dc = None
    dgs, prevs = [None] * L, [None] * L
    for t in reversed(list(_steps(L, rev))):
        dh = g[0, t] if dh is None else dh + g[0, t]
        dc = g[1, t] if dc is None else dc + g[1, t]
        i, f, gg, o, tc = acts[t]
        h_prev, c_prev = before[t]
        dct = dc + dh * o * (1 - tc * tc)
        d = _f.cat([dct * gg * i * (1 - i), dct * c_prev * f * (1 - f), dct * i * (1 - gg * gg),
                    dh * tc * o * (1 - o)], -1)
        dgs[t], prevs[t] = d, h_prev
        dc = dct * f
        dh = _f.matmul(d, w_hh)
    dxw = _f.stack(dgs)
    dw = _f.matmul(dxw.reshape(-1, 4 * H).t(), _f.stack(prevs).reshape(-1, H)) if needs[1] else None
    return [dxw if needs[0] else None, dw, _f.stack([dh, dc]) if needs[2] else None]


_LSTM_SEQ = _host.nn_op("lstm_sequence", "LstmBackward0", _lstm_seq_fwd, _lstm_seq_rev, _lstm_seq_arr_rev,
                        SAVE_A | SAVE_B | SAVE_C | SAVE_OUT)


def lstm_sequence(xw, w_hh, h0, c0, reverse):
    """(outputs (L, N, H), h_n, c_n) of one LSTM direction over the gate inputs ``xw``
    (the input's projection and both biases, (L, N, 4H)); h0 and c0 None for zeros."""
    if h0 is None and c0 is None:       # (one constant: a stack of constants is not on the tape, to replay)
        hc0 = Tensor._const(np.zeros((2,) + tuple(xw.shape[1:2]) + (w_hh.shape[1],), xw.dtype))
    else:
        zeros = Tensor._const(np.zeros(tuple(xw.shape[1:2]) + (w_hh.shape[1],), xw.dtype))
        hc0 = _f.stack([zeros if h0 is None else h0, zeros if c0 is None else c0])
    ints = [int(bool(reverse))]
    out = _host.record(_LSTM_SEQ, [xw, w_hh, hc0], _lstm_seq_fwd([xw._data, w_hh._data, hc0._data], ints, None),
                       ints)
    last = 0 if reverse else xw.shape[0] - 1
    return out[0], out[0, last], out[1, last]


# -- gru_cell(gi (N, 3H), gh (N, 3H), h (N, H)) -> h' ------------------------------------------------
def _gru_parts(gi, gh, H, sig, tanh):
    r = sig(gi[..., :H] + gh[..., :H])
    z = sig(gi[..., H:2 * H] + gh[..., H:2 * H])
    n = tanh(gi[..., 2 * H:] + r * gh[..., 2 * H:])
    return r, z, n


def _gru_fwd(arrays, ints, floats):
    gi, gh, h = arrays
    with np.errstate(over="ignore"):
        r, z, n = _gru_parts(gi, gh, h.shape[-1], _sigmoid, np.tanh)
    return (h - n) * z + n


def _gru_grads(gi, gh, h, g, r, z, n, H, cat, needs):
    dn = g * (1 - z)
    dz = g * (h - n)
    dnp = dn * (1 - n * n)
    dzp = dz * z * (1 - z)
    drp = dnp * gh[..., 2 * H:] * r * (1 - r)
    dgi = cat([drp, dzp, dnp]) if needs[0] else None
    dgh = cat([drp, dzp, dnp * r]) if needs[1] else None
    return [dgi, dgh, g * z if needs[2] else None]


def _gru_rev(xs, y, g, ints, floats, needs):
    gi, gh, h = xs
    H = h.shape[-1]
    r, z, n = _gru_parts(gi, gh, H, _f.sigmoid, _f.tanh)
    return _gru_grads(gi, gh, h, g, r, z, n, H, lambda parts: _f.cat(parts, -1), needs)


def _gru_arr_rev(xs, y, g, ints, floats, needs):
    gi, gh, h = xs
    H = h.shape[-1]
    with np.errstate(over="ignore"):
        r, z, n = _gru_parts(gi, gh, H, _sigmoid, np.tanh)
    return _gru_grads(gi, gh, h, g, r, z, n, H, lambda parts: np.concatenate(parts, -1), needs)


_GRU_CELL = _host.nn_op("gru_cell", "GruCellBackward0", _gru_fwd, _gru_rev, _gru_arr_rev, SAVE_A | SAVE_B | SAVE_C)


def gru_cell_pointwise(gi, gh, h):
    """h' of one GRU step from the input's and the hidden state's projections (N, 3H),
    order r, z, n: ``n = tanh(gi_n + r * gh_n)``, ``h' = (h - n) * z + n``."""
    return _host.record(_GRU_CELL, [gi, gh, h], _gru_fwd([gi._data, gh._data, h._data], (), None))


# -- cells and layers -------------------------------------------------------------------------------
def _linear(x, w, b):
    out = _f.matmul(x, w.t())
    return out if b is None else out + b


def lstm_cell(x, hx, cx, w_ih, w_hh, b_ih, b_hh):
    gates = _linear(hx, w_hh, b_hh) + _linear(x, w_ih, b_ih)
    return lstm_cell_pointwise(gates, cx)


def gru_cell(x, hx, w_ih, w_hh, b_ih, b_hh):
    return gru_cell_pointwise(_linear(x, w_ih, b_ih), _linear(hx, w_hh, b_hh), hx)


def rnn_cell(x, hx, w_ih, w_hh, b_ih, b_hh, nonlinearity):
    pre = _linear(hx, w_hh, b_hh) + _linear(x, w_ih, b_ih)
    return _f.tanh(pre) if nonlinearity == "tanh" else _f.relu(pre)


def _direction(mode, x, h, c, weights, reverse):
    """One direction of one layer over x (L, N, I): (outputs (L, N, H_out), h_n, c_n)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    L = x.shape[0]
    steps = range(L - 1, -1, -1) if reverse else range(L)
    if not (mode == "LSTM" and w_hr is None):        # (lstm_sequence makes its own zeros)
        h = _initial(h, x, weights, False)
        c = _initial(c, x, weights, True) if mode == "LSTM" else None
    outs = [None] * L
    if mode == "GRU":
        gi_all = _linear(x, w_ih, b_ih)
        for t in steps:
            h = gru_cell_pointwise(gi_all[t], _linear(h, w_hh, b_hh), h)
            outs[t] = h
        return _f.stack(outs), h, None
    # LSTM and RNN: both biases folded into the input's projection, computed once
    bias = None if b_ih is None else b_ih + b_hh
    xw = _linear(x, w_ih, bias)
    if mode == "LSTM" and w_hr is None:
        return lstm_sequence(xw, w_hh, h, c, reverse)
    w_hh_t = w_hh.t()
    for t in steps:
        pre = xw[t] + _f.matmul(h, w_hh_t)
        if mode == "LSTM":
            h, c = lstm_cell_pointwise(pre, c)
            if w_hr is not None:
                h = _f.matmul(h, w_hr.t())
        elif mode == "RNN_TANH":
            h = _f.tanh(pre)
        else:
            h = _f.relu(pre)
        outs[t] = h
    return _f.stack(outs), h, c


def _initial(state, x, weights, cell):
    """The initial state: ``state``, or zeros when none is given (a new constant per layer: no
    view of a constant, which a replay could not follow)."""
    if state is not None:
        return state
    w_hh, w_hr = weights[1], weights[4]
    size = w_hh.shape[1] if w_hr is None or cell else w_hr.shape[0]
    if cell:
        size = w_hh.shape[0] // 4
    return Tensor._const(np.zeros((x.shape[1], size), x.dtype))


def run_rnn(mode, input, hx, cx, layers, num_layers, dropout, training, bidirectional, batch_first):
    """PyTorch's _VF.rnn_tanh / rnn_relu / lstm / gru on a padded (L, N, I) input (or (N,
    L, I) with ``batch_first``): returns (output, h_n, c_n or None)."""
    x = input.transpose(0, 1) if batch_first else input
    D = 2 if bidirectional else 1
    hs, cs = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(D):
            k = layer * D + d
            h0 = None if hx is None else hx[k]
            c0 = None if cx is None else cx[k]
            out, h_n, c_n = _direction(mode, x, h0, c0, layers[k], d == 1)
            outs.append(out)
            hs.append(h_n)
            cs.append(c_n)
        x = outs[0] if D == 1 else _f.cat(outs, -1)
        if dropout > 0 and training and layer < num_layers - 1:
            x = _dropout(x, dropout, True)
    out = x.transpose(0, 1) if batch_first else x
    return out, _f.stack(hs), (_f.stack(cs) if mode == "LSTM" else None)

