"""Attention of ``tg.nn.functional``: scaled_dot_product_attention and
multi_head_attention_forward (what nn.MultiheadAttention calls).

The attention weights ``softmax(q k^T * scale + bias)`` (a causal mask, an explicit
one, both or none) are one entry, a host op that keeps q, k and the weights: its
reverse is ``dS = P * (dP - sum(dP * P))``, ``dq = dS k * scale``, ``dk = dS^T q *
scale``, ``dbias = dS``.  The product with v is a matmul, dropout between them as
F.dropout."""
import math

import numpy as np

from .. import functions as _f
from ..core.registry import SAVE_A, SAVE_B, SAVE_OUT
from ..core.tensor import Tensor
from . import _host
from ._sparse import dropout as _dropout
from ..ops import compose as _compose

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


# ints: is_causal, has_bias; floats: scale.  The weights are computed in place in the
# product's new array, and the reverse in one new array: the same operations in the same
# order as out of place (the same bits), without a fresh array of the batch's scores per step.
_ABOVE = {}     # (L, S) -> the causal mask's hidden positions, the last few shapes' (generation grows L)


def _above(L, S):
    m = _ABOVE.get((L, S))
    if m is None:
        if len(_ABOVE) >= 8:
            _ABOVE.clear()      # (one call: safe beside another thread's)
        m = _ABOVE[(L, S)] = ~np.tril(np.ones((L, S), bool))
    return m


def _scores(q, k, ints, floats, bias):
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    s *= floats[0]
    if ints[0]:
        np.copyto(s, -np.inf, where=_above(s.shape[-2], s.shape[-1]))
    if bias is not None:
        if bias.dtype == s.dtype and np.broadcast_shapes(bias.shape, s.shape) == s.shape:
            s += bias
        else:
            s = s + bias
    return s


def _softmax_rows_in_place(s):
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    s -= m
    np.exp(s, out=s)
    s /= s.sum(-1, keepdims=True)
    return s


def _fwd(arrays, ints, floats):
    q, k = arrays[0], arrays[1]
    bias = arrays[2] if ints[1] else None
    with np.errstate(invalid="ignore", divide="ignore"):
        return _softmax_rows_in_place(_scores(q, k, ints, floats, bias)).astype(q.dtype, copy=False)


def _rev(xs, y, g, ints, floats, needs):
    q, k = xs[0], xs[1]
    scale = floats[0]
    ds = y * (g - (g * y).sum(-1, keepdim=True))
    out = [None] * len(needs)
    if needs[0]:
        out[0] = _f.matmul(ds, k) * scale
    if needs[1]:
        out[1] = _f.matmul(ds.transpose(-1, -2), q) * scale
    if len(needs) > 2 and needs[2]:
        out[2] = ds
    return out


def _arr_rev(xs, y, g, ints, floats, needs):
    q, k = xs[0], xs[1]
    scale = floats[0]
    ds = g * y                                  # ds = y * (g - sum(g * y))
    np.subtract(g, ds.sum(-1, keepdims=True), out=ds)
    ds *= y
    out = [None] * len(needs)
    if needs[0]:
        out[0] = np.matmul(ds, k)
        out[0] *= scale
    if needs[1]:
        out[1] = np.matmul(np.swapaxes(ds, -1, -2), q)
        out[1] *= scale
    if len(needs) > 2 and needs[2]:
        out[2] = ds
    return out


_ATTN = _host.nn_op("attention_weights", "ScaledDotProductAttentionBackward0", _fwd, _rev, _arr_rev,
                    SAVE_A | SAVE_B | SAVE_OUT)


def _attention_weights(q, k, is_causal, bias, scale):
    batch = np.broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]))
    if tuple(q.shape[:-2]) != batch:
        q = _f.broadcast_to(q, batch + tuple(q.shape[-2:]))
    if tuple(k.shape[:-2]) != batch:
        k = _f.broadcast_to(k, batch + tuple(k.shape[-2:]))
    inputs = [q, k]
    if bias is not None:
        full = batch + (q.shape[-2], k.shape[-2])
        if tuple(bias.shape) != full:
            bias = _f.broadcast_to(bias, full)
        inputs.append(bias)
    ints = [int(bool(is_causal)), int(bias is not None)]
    floats = (float(scale), 0.0)
    out = _fwd([t._data for t in inputs], ints, floats)
    return _host.record(_ATTN, inputs, out, ints, floats)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """``softmax(q k^T * scale + mask) v`` (scale 1/sqrt(E) by default; a bool mask keeps
    the True positions, a float mask is added; ``is_causal``: the lower triangle),
    dropout ``dropout_p`` on the weights."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError("scaled_dot_product_attention(): argument '%s' must be Tensor, not %s"
                            % (name, type(t).__name__))
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got query.dtype: %s key.dtype: "
                           "%s and value.dtype: %s instead." % (_dt(query), _dt(key), _dt(value)))
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value must have at least 2 dimensions")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError("Expected query and key to have the same embedding dimension, got %d and %d"
                           % (query.shape[-1], key.shape[-1]))
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(rep, -3)
        value = value.repeat_interleave(value.shape[-3] and query.shape[-3] // value.shape[-3], -3)
    sc = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    bias = None
    if attn_mask is not None:
        if attn_mask.dtype == np.bool_:
            _host.guard_values(attn_mask)
            bias = Tensor._const(np.where(attn_mask._data, 0.0, -np.inf).astype(query.dtype))
        else:
            bias = attn_mask
    p = _attention_weights(query, key, is_causal, bias, sc)
    if dropout_p > 0.0:
        p = _dropout(p, dropout_p, True)
    return _f.matmul(p, value)


def linear(input, weight, bias=None):
    out = _f.matmul(input, weight.t())
    return out if bias is None else out + bias


def pad(input, pads):
    return _compose.pad(input, list(pads), "constant", None)


def _dt(t):
    return "torch." + t.dtype.name


def _canonical_mask(mask, name, other_type, other_name, target_type, check_other=True):
    if mask is None:
        return None
    if mask.dtype != np.bool_ and mask.dtype.kind != "f":
        raise AssertionError("only bool and floating types of %s are supported" % name)
    if check_other and other_type is not None and mask.dtype != other_type:
        import warnings
        warnings.warn("Support for mismatched %s and %s is deprecated. Use same type for both instead."
                      % (name, other_name), stacklevel=3)
    if mask.dtype == np.bool_:
        _host.guard_values(mask)
        return Tensor._const(np.where(mask._data, -np.inf, 0.0).astype(target_type))
    return mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be 3-D but found %d-D and "
                                 "%d-D tensors respectively" % (key.ndim, value.ndim))
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise AssertionError("For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but found "
                                 "%d-D tensor instead" % key_padding_mask.ndim)
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError("For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                 "%d-D tensor instead" % attn_mask.ndim)
        return True
    if query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found %d-D and "
                                 "%d-D tensors respectively" % (key.ndim, value.ndim))
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise AssertionError("For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
                                 "found %d-D tensor instead" % key_padding_mask.ndim)
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise AssertionError("For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                     "found %d-D tensor instead" % attn_mask.ndim)
            if attn_mask.ndim == 3 and tuple(attn_mask.shape) != (num_heads, query.shape[0], key.shape[0]):
                raise AssertionError("Expected `attn_mask` shape to be %s but got %s"
                                     % ((num_heads, query.shape[0], key.shape[0]), tuple(attn_mask.shape)))
        return False
    raise AssertionError("query should be unbatched 2D or batched 3D tensor but received %d-D query tensor"
                         % query.ndim)


def _in_projection_packed(q, k, v, w, b=None):
    E = q.shape[-1]
    if k is v:
        if q is k:
            proj = linear(q, w, b).unflatten(-1, (3, E))
            return proj[..., 0, :], proj[..., 1, :], proj[..., 2, :]
        w_q, w_kv = w.split([E, E * 2])
        b_q, b_kv = (None, None) if b is None else b.split([E, E * 2])
        kv = linear(k, w_kv, b_kv).unflatten(-1, (2, E))
        return linear(q, w_q, b_q), kv[..., 0, :], kv[..., 1, :]
    w_q, w_k, w_v = w.chunk(3)
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """PyTorch's multi-head attention on (L, N, E) inputs (or unbatched (L, E)): the
    projections, the heads' attention (with the masks, bias_k/bias_v, add_zero_attn),
    the output projection; returns (output, the weights or None)."""
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       None if attn_mask is None else attn_mask.dtype, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
                           "`generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError("was expecting embedding dimension of %d, but got %d" % (embed_dim_to_check, embed_dim))
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError("embed_dim %d not divisible by num_heads %d" % (embed_dim, num_heads))
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError("key's sequence and batch dims %s do not match value's %s"
                                 % (tuple(key.shape[:2]), tuple(value.shape[:2])))
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b_q, b_k, b_v = in_proj_bias.chunk(3)
        q, k, v = linear(query, q_proj_weight, b_q), linear(key, k_proj_weight, b_k), linear(value, v_proj_weight, b_v)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError("key shape %s does not match value shape %s" % (tuple(key.shape), tuple(value.shape)))
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError("The shape of the 2D attn_mask is %s, but should be %s."
                                   % (tuple(attn_mask.shape), (tgt_len, src_len)))
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError("The shape of the 3D attn_mask is %s, but should be %s."
                                   % (tuple(attn_mask.shape), (bsz * num_heads, tgt_len, src_len)))
        else:
            raise RuntimeError("attn_mask's dimension %d is not supported" % attn_mask.ndim)
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key.")
        k = _f.cat([k, bias_k.repeat(1, bsz, 1)])
        v = _f.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k is set but bias_v is None" if bias_k is not None
                             else "bias_v is set but bias_k is None")
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v
    if add_zero_attn:
        zeros = Tensor._const(np.zeros((bsz * num_heads, 1, head_dim), k.dtype))
        k = _f.cat([k, zeros], 1)
        v = _f.cat([v, zeros], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError("Expected key_padded_mask.shape[0] to be %d, but got %d"
                                 % (bsz, key_padding_mask.shape[0]))
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError("Expected key_padded_mask.shape[1] to be %d, but got %d"
                                 % (src_len, key_padding_mask.shape[1]))
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1).reshape(
            bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        weights = _attention_weights(q, k, False, attn_mask, math.sqrt(1.0 / float(head_dim)))
        if dropout_p > 0.0:
            weights = _dropout(weights, p=dropout_p)
        out = _f.bmm(weights, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not batched:
        out = out.squeeze(1)
    return out, None

