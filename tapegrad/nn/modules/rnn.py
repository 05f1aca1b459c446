"""RNN, LSTM, GRU and their cells (PyTorch's ``torch.nn.modules.rnn``): PyTorch's
parameter names (weight_ih_l0, ..., the _reverse suffix), gate order, initialisation
(U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) in registration order), shapes and checks."""
import math
import numbers
import warnings

import numpy as np

from ...core.tensor import Tensor
from .. import _rnn
from .. import init
from ..parameter import Parameter
from ._common import factory_dtype
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


def _no_packed(input):
    if type(input).__name__ == "PackedSequence":
        raise NotImplementedError("tapegrad's recurrent layers take padded (L, N, H) tensors; PackedSequence input "
                                  "is not supported (pad the sequences, nn.utils.rnn.pad_sequence)")


class RNNBase(Module):
    """The parameters and checks the recurrent layers share."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bias, batch_first
        self.dropout = float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        D = 2 if bidirectional else 1
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          "expects num_layers greater than 1, but got dropout=%s and num_layers=%s"
                          % (dropout, num_layers), stacklevel=2)
        if not isinstance(bias, bool):
            raise TypeError("bias should be of type bool, got: %s" % type(bias).__name__)
        if not isinstance(batch_first, bool):
            raise TypeError("batch_first should be of type bool, got: %s" % type(batch_first).__name__)
        if not isinstance(input_size, int):
            raise TypeError("input_size should be of type int, got: %s" % type(input_size).__name__)
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError("hidden_size should be of type int, got: %s" % type(hidden_size).__name__)
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        gates = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}.get(mode)
        if gates is None:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = gates * hidden_size
        dt = factory_dtype(device, dtype)
        self._flat_weights_names = []
        self._all_weights = []
        real_hidden = proj_size if proj_size > 0 else hidden_size
        for layer in range(num_layers):
            for direction in range(D):
                layer_input = input_size if layer == 0 else real_hidden * D
                params = [np.empty((gate_size, layer_input), dt), np.empty((gate_size, real_hidden), dt)]
                names = ["weight_ih_l{}{}", "weight_hh_l{}{}"]
                if bias:
                    params += [np.empty((gate_size,), dt), np.empty((gate_size,), dt)]
                    names += ["bias_ih_l{}{}", "bias_hh_l{}{}"]
                if proj_size > 0:
                    params.append(np.empty((proj_size, hidden_size), dt))
                    names.append("weight_hr_l{}{}")
                suffix = "_reverse" if direction == 1 else ""
                names = [n.format(layer, suffix) for n in names]
                for n, p in zip(names, params):
                    setattr(self, n, Parameter(p))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, w) for w in ws] for ws in self._all_weights]

    def flatten_parameters(self):
        """A no-op (cuDNN's contiguous weights; tapegrad keeps each weight as it is)."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def _layer_weights(self):
        out = []
        for names in self._all_weights:
            ws = {n.split("_l")[0]: getattr(self, n) for n in names}
            out.append((ws["weight_ih"], ws["weight_hh"], ws.get("bias_ih"), ws.get("bias_hh"), ws.get("weight_hr")))
        return out

    def check_input(self, input, batch_sizes):
        w = self._flat_weights[0]
        if input.dtype != w.dtype:
            raise ValueError("RNN input dtype (%s) does not match weight dtype (%s). Convert input: input.to(%s), or "
                             "convert model: model.to(%s)" % (_tn(input.dtype), _tn(w.dtype), _tn(w.dtype),
                                                              _tn(input.dtype)))
        expected = 2 if batch_sizes is not None else 3
        if input.ndim != expected:
            raise RuntimeError("input must have %d dimensions, got %d" % (expected, input.ndim))
        if self.input_size != input.shape[-1]:
            raise RuntimeError("input.size(-1) must be equal to input_size. Expected %d, got %d"
                               % (self.input_size, input.shape[-1]))

    def get_expected_hidden_size(self, input, batch_sizes):
        mini_batch = input.shape[0] if self.batch_first else input.shape[1]
        D = 2 if self.bidirectional else 1
        return (self.num_layers * D, mini_batch, self.proj_size if self.proj_size > 0 else self.hidden_size)

    def check_hidden_size(self, hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.shape)))

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def extra_repr(self):
        s = "%s, %s" % (self.input_size, self.hidden_size)
        if self.proj_size != 0:
            s += ", proj_size=%s" % self.proj_size
        if self.num_layers != 1:
            s += ", num_layers=%s" % self.num_layers
        if self.bias is not True:
            s += ", bias=%s" % self.bias
        if self.batch_first is not False:
            s += ", batch_first=%s" % self.batch_first
        if self.dropout != 0:
            s += ", dropout=%s" % self.dropout
        if self.bidirectional is not False:
            s += ", bidirectional=%s" % self.bidirectional
        return s

    def _zeros(self, input, size):
        D = 2 if self.bidirectional else 1
        n = input.shape[0] if self.batch_first else input.shape[1]
        return Tensor._const(np.zeros((self.num_layers * D, n, size), input.dtype))

    def _unbatch(self, input, name):
        if input.ndim not in (2, 3):
            raise ValueError("%s: Expected input to be 2D or 3D, got %dD %s" % (
                name, input.ndim, "tensor instead" if name == "RNN" else "instead"))
        batched = input.ndim == 3
        bdim = 0 if self.batch_first else 1
        return (input if batched else input.unsqueeze(bdim)), batched, bdim


def _tn(dt):
    return "torch." + dt.name


class RNN(RNNBase):
    """An Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError("Unknown nonlinearity '%s'. Select from 'tanh' or 'relu'." % self.nonlinearity)
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        _no_packed(input)
        input, batched, bdim = self._unbatch(input, "RNN")
        if hx is not None:
            if not batched:
                if hx.ndim != 2:
                    raise RuntimeError("For unbatched 2-D input, hx should also be 2-D but got %d-D tensor" % hx.ndim)
                hx = hx.unsqueeze(1)
            elif hx.ndim != 3:
                raise RuntimeError("For batched 3-D input, hx should also be 3-D but got %d-D tensor" % hx.ndim)
        else:
            self.check_input(input, None)
        if hx is not None:
            self.check_forward_args(input, hx, None)
        out, h, _ = _rnn.run_rnn(self.mode, input, hx, None, self._layer_weights(), self.num_layers, self.dropout,
                                 self.training, self.bidirectional, self.batch_first)
        if not batched:
            out, h = out.squeeze(bdim), h.squeeze(1)
        return out, h


class LSTM(RNNBase):
    """A long short-term memory layer (gates i, f, g, o; ``proj_size`` projects h)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        mini_batch = input.shape[0] if self.batch_first else input.shape[1]
        D = 2 if self.bidirectional else 1
        return (self.num_layers * D, mini_batch, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def forward(self, input, hx=None):
        _no_packed(input)
        input, batched, bdim = self._unbatch(input, "LSTM")
        if hx is None:
            self.check_input(input, None)
        else:
            if batched:
                if hx[0].ndim != 3 or hx[1].ndim != 3:
                    raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got (%d-D, %d-D) "
                                       "tensors" % (hx[0].ndim, hx[1].ndim))
            else:
                if hx[0].ndim != 2 or hx[1].ndim != 2:
                    raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got (%d-D, %d-D) "
                                       "tensors" % (hx[0].ndim, hx[1].ndim))
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
            self.check_forward_args(input, hx, None)
        h0, c0 = (None, None) if hx is None else hx
        out, h, c = _rnn.run_rnn("LSTM", input, h0, c0, self._layer_weights(), self.num_layers, self.dropout,
                                 self.training, self.bidirectional, self.batch_first)
        if not batched:
            out, h, c = out.squeeze(bdim), h.squeeze(1), c.squeeze(1)
        return out, (h, c)


class GRU(RNNBase):
    """A gated recurrent unit layer (gates r, z, n)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        _no_packed(input)
        input, batched, bdim = self._unbatch(input, "GRU")
        if hx is not None:
            if not batched:
                if hx.ndim != 2:
                    raise RuntimeError("For unbatched 2-D input, hx should also be 2-D but got %d-D tensor" % hx.ndim)
                hx = hx.unsqueeze(1)
            elif hx.ndim != 3:
                raise RuntimeError("For batched 3-D input, hx should also be 3-D but got %d-D tensor" % hx.ndim)
        else:
            self.check_input(input, None)
        if hx is not None:
            self.check_forward_args(input, hx, None)
        out, h, _ = _rnn.run_rnn("GRU", input, hx, None, self._layer_weights(), self.num_layers, self.dropout,
                                 self.training, self.bidirectional, self.batch_first)
        if not batched:
            out, h = out.squeeze(bdim), h.squeeze(1)
        return out, h


class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        dt = factory_dtype(device, dtype)
        self.weight_ih = Parameter(np.empty((num_chunks * hidden_size, input_size), dt))
        self.weight_hh = Parameter(np.empty((num_chunks * hidden_size, hidden_size), dt))
        if bias:
            self.bias_ih = Parameter(np.empty((num_chunks * hidden_size,), dt))
            self.bias_hh = Parameter(np.empty((num_chunks * hidden_size,), dt))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "%s, %s" % (self.input_size, self.hidden_size)
        if self.bias is not True:
            s += ", bias=%s" % self.bias
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += ", nonlinearity=%s" % self.nonlinearity
        return s

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def _prepare(self, name, input, hx, what="hidden"):
        if input.ndim not in (1, 2):
            raise ValueError("%s: Expected input to be 1D or 2D, got %dD instead" % (name, input.ndim))
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        return input, batched

    def _zeros(self, input):
        return Tensor._const(np.zeros((input.shape[0], self.hidden_size), input.dtype))


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if hx is not None and hx.ndim not in (1, 2):
            raise ValueError("RNNCell: Expected hidden to be 1D or 2D, got %dD instead" % hx.ndim)
        input, batched = self._prepare("RNNCell", input, hx)
        hx = self._zeros(input) if hx is None else (hx if batched else hx.unsqueeze(0))
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError("Unknown nonlinearity: %s" % self.nonlinearity)
        ret = _rnn.rnn_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, self.nonlinearity)
        return ret if batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None:
            for i, v in enumerate(hx):
                if v.ndim not in (1, 2):
                    raise ValueError("LSTMCell: Expected hx[%d] to be 1D or 2D, got %dD instead" % (i, v.ndim))
        input, batched = self._prepare("LSTMCell", input, hx)
        if hx is None:
            z = self._zeros(input)
            hx = (z, z)
        elif not batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        h, c = _rnn.lstm_cell(input, hx[0], hx[1], self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None and hx.ndim not in (1, 2):
            raise ValueError("GRUCell: Expected hidden to be 1D or 2D, got %dD instead" % hx.ndim)
        input, batched = self._prepare("GRUCell", input, hx)
        hx = self._zeros(input) if hx is None else (hx if batched else hx.unsqueeze(0))
        ret = _rnn.gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return ret if batched else ret.squeeze(0)
