"""Activation modules and MultiheadAttention (PyTorch's ``torch.nn.modules.activation``)."""
import numpy as np

from .. import functional as F
from .. import init
from ..init import constant_, xavier_normal_, xavier_uniform_
from ..parameter import Parameter
from ._common import factory_dtype
from .linear import Linear
from .module import Module

__all__ = ["Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU", "Mish",
           "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid", "Softplus",
           "Softshrink", "PReLU", "Softsign", "Tanhshrink", "Softmin", "Softmax", "Softmax2d", "LogSoftmax",
           "MultiheadAttention"]


def _inplace_tail(inplace):
    return ", inplace=True" if inplace else ""


class _Inplace(Module):
    """An activation whose only argument is ``inplace``."""
    _fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _Plain(Module):
    """An activation without arguments."""
    _fn = None

    def forward(self, input):
        return type(self)._fn(input)


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return "threshold=%s, value=%s%s" % (self.threshold, self.value, _inplace_tail(self.inplace))


class ReLU(_Inplace):
    _fn = staticmethod(F.relu)


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return "lower=%s, upper=%s%s" % (self.lower, self.upper, _inplace_tail(self.inplace))


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        if min_value is not None or max_value is not None:
            import warnings
            warnings.warn("keyword argument `min_value` is deprecated and rename to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_val if min_value is None else min_value
            max_val = max_val if max_value is None else max_value
        if max_val <= min_val:
            raise AssertionError("max_val must be greater than min_val")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return "min_val=%s, max_val=%s%s" % (self.min_val, self.max_val, _inplace_tail(self.inplace))


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Sigmoid(_Plain):
    _fn = staticmethod(F.sigmoid)


class Tanh(_Plain):
    _fn = staticmethod(F.tanh)


class Hardsigmoid(_Inplace):
    _fn = staticmethod(F.hardsigmoid)

    def extra_repr(self):
        return ""


class Hardswish(_Inplace):
    _fn = staticmethod(F.hardswish)

    def extra_repr(self):
        return ""


class SiLU(_Inplace):
    _fn = staticmethod(F.silu)


class Mish(_Inplace):
    _fn = staticmethod(F.mish)


class SELU(_Inplace):
    _fn = staticmethod(F.selu)


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return "alpha=%s%s" % (self.alpha, _inplace_tail(self.inplace))


class CELU(ELU):
    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return "dim=%s" % self.dim


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return "approximate=%r" % (self.approximate,)


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Softshrink(Hardshrink):
    def forward(self, input):
        return F.softshrink(input, self.lambd)


class LeakyReLU(Module):
    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return "negative_slope=%s%s" % (self.negative_slope, _inplace_tail(self.inplace))


class LogSigmoid(_Plain):
    _fn = staticmethod(F.logsigmoid)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return "beta={}, threshold={}".format(self.beta, self.threshold)


class PReLU(Module):
    """leaky_relu with a learnt slope: one (``num_parameters=1``) or one per channel,
    initialised to ``init``."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        self.num_parameters = num_parameters
        super().__init__()
        self.init = init
        self.weight = Parameter(np.empty((num_parameters,), dtype=factory_dtype(device, dtype)))
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return "num_parameters=%s" % self.num_parameters


class Softsign(_Plain):
    _fn = staticmethod(F.softsign)


class Tanhshrink(_Plain):
    _fn = staticmethod(F.tanhshrink)


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return "dim=%s" % self.dim


class Softmax(Softmin):
    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)


class LogSoftmax(Softmin):
    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)


class Softmax2d(Module):
    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError("Softmax2d: expected input to be 3D or 4D, got %dD instead" % input.ndim)
        return F.softmax(input, -3, _stacklevel=5)


class NonDynamicallyQuantizableLinear(Linear):
    """(PyTorch's name for MultiheadAttention's out_proj, a Linear.)"""


class MultiheadAttention(Module):
    """Multi-head attention: in_proj_weight (3E, E) xavier-uniform (or q/k/v_proj_weight
    when kdim/vdim differ from embed_dim), in_proj_bias and out_proj.bias 0."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError("embed_dim and num_heads must be greater than 0, got embed_dim=%s and num_heads=%s "
                             "instead" % (embed_dim, num_heads))
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(np.empty((embed_dim, embed_dim), dt))
            self.k_proj_weight = Parameter(np.empty((embed_dim, self.kdim), dt))
            self.v_proj_weight = Parameter(np.empty((embed_dim, self.vdim), dt))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(np.empty((3 * embed_dim, embed_dim), dt))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(np.empty((3 * embed_dim,), dt))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dt)
        if add_bias_kv:
            self.bias_k = Parameter(np.empty((1, 1, embed_dim), dt))
            self.bias_v = Parameter(np.empty((1, 1, embed_dim), dt))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            xavier_uniform_(self.in_proj_weight)
        else:
            xavier_uniform_(self.q_proj_weight)
            xavier_uniform_(self.k_proj_weight)
            xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            constant_(self.in_proj_bias, 0.0)
            constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            xavier_normal_(self.bias_v)

    def __setstate__(self, state):
        state.setdefault("_qkv_same_embed_dim", True)
        super().__setstate__(state)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        key_padding_mask = F._attention._canonical_mask(key_padding_mask, "key_padding_mask",
                                                        None if attn_mask is None else attn_mask.dtype, "attn_mask",
                                                        query.dtype)
        attn_mask = F._attention._canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if self.batch_first and batched:
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = (x.transpose(1, 0) for x in (query, key))
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        kw = dict(training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
                  attn_mask=attn_mask, average_attn_weights=average_attn_weights, is_causal=is_causal)
        if not self._qkv_same_embed_dim:
            kw.update(use_separate_proj_weight=True, q_proj_weight=self.q_proj_weight,
                      k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight)
        out, weights = F.multi_head_attention_forward(query, key, value, self.embed_dim, self.num_heads,
                                                      self.in_proj_weight, self.in_proj_bias, self.bias_k,
                                                      self.bias_v, self.add_zero_attn, self.dropout,
                                                      self.out_proj.weight, self.out_proj.bias, **kw)
        if self.batch_first and batched:
            return out.transpose(1, 0), weights
        return out, weights
