"""Parameters and modules (PyTorch's ``torch.nn.Parameter`` / ``torch.nn.Module``)."""
import math
from collections import OrderedDict, namedtuple

import numpy as np

from ..core import random as _random
from ..autograd.grad_mode import no_grad
from ..core.tensor import Tensor, _as_array, _init, check_device
from ..core.tensor import typename as _typename
from . import functional as F

__all__ = ["Parameter", "Module", "Linear", "Sequential", "Identity", "ReLU", "Tanh", "Sigmoid", "Softplus", "Softmax",
           "LogSoftmax", "Flatten", "Unflatten", "MSELoss", "L1Loss", "NLLLoss", "CrossEntropyLoss", "BCEWithLogitsLoss",
           "BCELoss", "Conv1d", "Conv2d"]


class Parameter(Tensor):
    """A leaf tensor that requires grad (by default) and that a Module registers as a
    parameter when assigned to one of its attributes.  Operations on it return plain
    Tensors; its values are shared with ``data`` when that is a Tensor."""
    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        if isinstance(data, Tensor):
            # share storage and version counter with ``data`` (a detached alias, as in PyTorch)
            _init(self, data._data, alias_of=data)
        else:
            if data is None:
                data = np.empty((0,), dtype=np.float64)
            _init(self, _as_array(data))
        if requires_grad:
            self._set_requires_grad(True, creation=True)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        p = Parameter(self._data.copy(), requires_grad=self.requires_grad)
        memo[id(self)] = p
        return p

    def __reduce_ex__(self, protocol):
        return (Parameter, (self._data, self.requires_grad))


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class Module:
    """Base class: assigning a Parameter, Module or (via ``register_buffer``) buffer to an
    attribute registers it, in assignment order."""
    training = True

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError("Module.__init__() takes no arguments")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *input):
        raise NotImplementedError('Module [%s] is missing the required "forward" function'
                                  % type(self).__name__)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # -- attribute registration ------------------------------------------------------
    def __setattr__(self, name, value):
        d = self.__dict__
        params, buffers, modules = d.get("_parameters"), d.get("_buffers"), d.get("_modules")

        def remove_from(*dicts):
            for dd in dicts:
                if dd is not None and name in dd:
                    del dd[name]
            d.pop(name, None)

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(buffers, modules)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError("cannot assign '%s' as parameter '%s' (tapegrad.nn.Parameter or None "
                                "expected)" % (_typename(value), name))
            params[name] = None
        elif isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(params, buffers)
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError("cannot assign '%s' as child module '%s' (tapegrad.nn.Module or None "
                                "expected)" % (_typename(value), name))
            modules[name] = None
        elif buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError("cannot assign '%s' as buffer '%s' (tapegrad.Tensor or None expected)"
                                % (_typename(value), name))
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            dd = d.get(key)
            if dd is not None and name in dd:
                return dd[name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            dd = self.__dict__.get(key)
            if dd is not None and name in dd:
                del dd[name]
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def _check_name(self, name, kind):
        if not isinstance(name, str):
            raise TypeError("%s name should be a string. Got %s" % (kind, _typename(name)))
        if "." in name:
            raise KeyError('%s name can\'t contain "."' % kind)
        if name == "":
            raise KeyError('%s name can\'t be empty string ""' % kind)

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(type(self), name) or (name in self.__dict__ and name not in self._parameters):
            raise KeyError("attribute '%s' already exists" % name)
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError("cannot assign '%s' object to parameter '%s' (tapegrad.nn.Parameter or None "
                            "required)" % (_typename(param), name))
        if not param.is_leaf:
            raise ValueError("Cannot assign non-leaf Tensor to parameter '%s'. Model parameters must be "
                             "created explicitly. To express '%s' as a function of another Tensor, compute "
                             "the value in the forward() method." % (name, name))
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(type(self), name) or (name in self.__dict__ and name not in self._buffers):
            raise KeyError("attribute '%s' already exists" % name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError("cannot assign '%s' object to buffer '%s' (tapegrad Tensor or None required)"
                            % (_typename(tensor), name))
        self._buffers[name] = tensor
        if not persistent:
            self.__dict__.setdefault("_non_persistent", set()).add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError("%s is not a Module subclass" % _typename(module))
        self._check_name(name, "module")
        if hasattr(type(self), name) or (name in self.__dict__ and name not in self._modules):
            raise KeyError("attribute '%s' already exists" % name)
        self._modules[name] = module

    register_module = add_module

    # -- traversal ----------------------------------------------------------------
    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mprefix, mod in mods:
            for k, v in get(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mprefix + ("." if mprefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- modes and grads ---------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        from ..optim import zero_grads
        zero_grads(self.parameters(), set_to_none)

    # -- devices and dtypes: tapegrad has the CPU only ------------------------------------
    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``: the CPU only
        (another device raises as PyTorch without it); a dtype casts the floating-point
        parameters and buffers (and gradients) in place, as PyTorch's."""
        probe = Tensor._const(np.zeros((), np.float64)).to(*args, **kwargs)
        dtype = None
        if any(_is_dtype(v) or isinstance(v, Tensor) for v in args) or kwargs.get("dtype") is not None:
            dtype = probe.dtype
        if dtype is not None:
            if dtype.kind != "f":
                raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but got desired "
                                "dtype=%s" % _torch_dtype(dtype))
            self._cast(dtype)
        return self

    def _cast(self, dtype):
        with no_grad():
            for t in list(self.parameters()) + list(self.buffers()):
                if t.dtype.kind == "f" and t.dtype != dtype:
                    t.data = t.data.to(dtype)
                    if t.grad is not None:
                        t.grad = t.grad.to(dtype)
        return self

    def cpu(self):
        return self

    def cuda(self, device=None):
        raise AssertionError("Torch not compiled with CUDA enabled")

    def double(self):
        return self._cast(np.dtype(np.float64))

    def float(self):
        return self._cast(np.dtype(np.float32))

    def half(self):
        return self._cast(np.dtype(np.float16))

    # -- state dict ----------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (detached, sharing storage,
        unless ``keep_vars``)."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        skip = self.__dict__.get("_non_persistent", ())
        for name, b in self._buffers.items():
            if b is not None and name not in skip:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict=True):
        """Copy values in place into the parameters and buffers (under no_grad)."""
        if not hasattr(state_dict, "keys"):
            raise TypeError("Expected state_dict to be dict-like, got %s." % _typename(state_dict))
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        for k, target in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            arr = v._data if isinstance(v, Tensor) else np.asarray(v)
            if arr.shape != target.shape:
                errors.append("size mismatch for %s: copying a param with shape %s from checkpoint, the "
                              "shape in current model is %s." % (k, list(arr.shape), list(target.shape)))
                continue
            with no_grad():
                target._write_(arr)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: %s. "
                              % ", ".join('"%s"' % k for k in unexpected))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in missing))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for %s:\n\t%s"
                               % (type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # -- repr -------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            mod = repr(m).replace("\n", "\n  ")
            lines.append("(" + name + "): " + mod)
        main = type(self).__name__ + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _rng():
    return _random.generator()


class OptimizedModule(Module):
    """``tg.compile(module)``: a Module wrapping the original as ``_orig_mod`` (as
    torch.compile's OptimizedModule does), whose calls replay the recorded tape
    (``compiled``, a ``tapegrad.replay.Compiled``); everything else (parameters,
    state_dict, train/eval, attributes) is the original module's."""

    def __init__(self, mod, compiled):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled", compiled)

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return Module.__getattr__(self, name)
        except AttributeError:
            if name.startswith("__") or "_modules" not in self.__dict__:
                raise
            return getattr(self._modules["_orig_mod"], name)


def _is_dtype(v):
    return isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic))


def _torch_dtype(dt):
    return "torch." + dt.name


class Linear(Module):
    """``y = x @ W.T + b``; W (out_features, in_features) and b drawn from
    U(-1/sqrt(in_features), 1/sqrt(in_features)) with tapegrad's generator (PyTorch's
    kaiming_uniform_(a=sqrt(5)) default)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        if device is not None:
            check_device(device)
        self.in_features = in_features
        self.out_features = out_features
        dt = np.dtype(dtype or np.float64)
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dt))
        if bias:
            self.bias = Parameter(np.empty((out_features,), dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        rng = _rng()
        w = self.weight
        with no_grad():
            w._write_(rng.uniform(-bound, bound, w.shape))
            if self.bias is not None:
                self.bias._write_(rng.uniform(-bound, bound, self.bias.shape))

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (self.in_features, self.out_features,
                                                            self.bias is not None)


class _ConvNd(Module):
    """Conv1d / Conv2d: the weight (out_channels, in_channels / groups, *kernel_size)
    and bias drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels /
    groups * prod(kernel_size) (PyTorch's kaiming_uniform_(a=sqrt(5)) default); a
    padding_mode other than 'zeros' pads with F.pad first, as PyTorch does."""
    _nd = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if device is not None:
            check_device(device)
        nd = self._nd

        def tup(v):
            return (int(v),) * nd if isinstance(v, (int, np.integer)) else tuple(int(u) for u in v)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError("Invalid padding string {!r}, should be one of {}".format(padding, {"same", "valid"}))
            if padding == "same" and any(s != 1 for s in tup(stride)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        modes = {"zeros", "reflect", "replicate", "circular"}       # (PyTorch prints the set)
        if padding_mode not in modes:
            raise ValueError("padding_mode must be one of {}, but got padding_mode='{}'".format(modes, padding_mode))
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = tup(kernel_size), tup(stride), tup(dilation)
        self.padding = padding if isinstance(padding, str) else tup(padding)
        self.groups, self.padding_mode = groups, padding_mode
        dt = np.dtype(dtype or np.float64)
        self.weight = Parameter(np.empty((out_channels, in_channels // groups) + self.kernel_size, dtype=dt))
        if bias:
            self.bias = Parameter(np.empty((out_channels,), dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        fan_in = self.in_channels // self.groups * int(np.prod(self.kernel_size))
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        rng = _rng()
        with no_grad():
            self.weight._write_(rng.uniform(-bound, bound, self.weight.shape))
            if self.bias is not None:
                self.bias._write_(rng.uniform(-bound, bound, self.bias.shape))

    def forward(self, input):
        conv = F.conv1d if self._nd == 1 else F.conv2d
        if self.padding_mode != "zeros" and not isinstance(self.padding, str):
            pads = []
            for p in reversed(self.padding):
                pads += [p, p]
            input = F.pad(input, pads, mode=self.padding_mode)
            return conv(input, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        s = "%d, %d, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels, self.kernel_size, self.stride)
        if self.padding != (0,) * self._nd:
            s += ", padding=%s" % (self.padding,)
        if self.dilation != (1,) * self._nd:
            s += ", dilation=%s" % (self.dilation,)
        if self.groups != 1:
            s += ", groups=%d" % self.groups
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode=%s" % self.padding_mode
        return s


class Conv1d(_ConvNd):
    """A 1-D convolution layer (``F.conv1d``)."""
    _nd = 1


class Conv2d(_ConvNd):
    """A 2-D convolution layer (``F.conv2d``)."""
    _nd = 2


class Sequential(Module):
    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for k, m in args[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        mods = list(self._modules.values())
        n = len(mods)
        if not -n <= idx < n:
            raise IndexError("index %d is out of range" % idx)
        return mods[idx]

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class Identity(Module):
    def forward(self, input):
        return input


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return "beta={}, threshold={}".format(self.beta, self.threshold)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return "dim=%s" % self.dim


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)


class Flatten(Module):
    """``input.flatten(start_dim, end_dim)`` (by default every dimension but the batch)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return "start_dim=%s, end_dim=%s" % (self.start_dim, self.end_dim)


class Unflatten(Module):
    """``input.unflatten(dim, unflattened_size)``."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be a tuple of ints, but found type %s"
                            % type(unflattened_size).__name__)
        for i, n in enumerate(unflattened_size):
            if not isinstance(n, int):
                raise TypeError("unflattened_size must be tuple of ints, but found element of type %s at pos %d"
                                % (type(n).__name__, i))
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return "dim=%s, unflattened_size=%s" % (self.dim, self.unflattened_size)


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class CrossEntropyLoss(NLLLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, ignore_index, reduce, reduction)
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight
        self.pos_weight = pos_weight

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class BCELoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)
