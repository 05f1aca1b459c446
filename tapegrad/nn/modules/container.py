"""Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict (PyTorch's
``torch.nn.modules.container``)."""
import operator
from collections import OrderedDict
from collections import abc as container_abcs
from itertools import chain, islice

from ...core.tensor import Tensor
from ...core.tensor import typename as _typename
from ..parameter import Parameter
from .module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _renumber(mod):
    mod.__dict__["_modules"] = OrderedDict((str(i), m) for i, m in enumerate(mod._modules.values()))


def _dir_without_digits(mod):
    return [k for k in Module.__dir__(mod) if not k.isdigit()]


class Sequential(Module):
    """Its modules applied in order (``Sequential(*modules)`` or ``Sequential(OrderedDict)``)."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for k, m in args[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def _item_by_idx(self, iterator, idx):
        size = len(self)
        idx = operator.index(idx)
        if not -size <= idx < size:
            raise IndexError("index %d is out of range" % idx)
        return next(islice(iterator, idx % size, None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._item_by_idx(self._modules.values(), idx)

    def __setitem__(self, idx, module):
        setattr(self, self._item_by_idx(self._modules.keys(), idx), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, self._item_by_idx(self._modules.keys(), idx))
        _renumber(self)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __dir__(self):
        return _dir_without_digits(self)

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but %s is given." % type(other))
        ret = Sequential()
        for layer in chain(self, other):
            ret.append(layer)
        return ret

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but %s is given." % type(other))
        offset = len(self)
        for i, m in enumerate(other):
            self.add_module(str(i + offset), m)
        return self

    def __mul__(self, other):
        if not isinstance(other, int):
            raise TypeError("unsupported operand type(s) for *: %s and %s" % (type(self), type(other)))
        if other <= 0:
            raise ValueError("Non-positive multiplication factor %d for %s" % (other, type(self)))
        combined = Sequential()
        offset = 0
        for _ in range(other):
            for m in self:
                combined.add_module(str(offset), m)
                offset += 1
        return combined

    def __rmul__(self, other):
        return self.__mul__(other)

    def __imul__(self, other):
        if not isinstance(other, int):
            raise TypeError("unsupported operand type(s) for *: %s and %s" % (type(self), type(other)))
        if other <= 0:
            raise ValueError("Non-positive multiplication factor %d for %s" % (other, type(self)))
        n = offset = len(self)
        for _ in range(other - 1):
            for i in range(n):
                self.add_module(str(i + offset), self._modules[str(i)])
            offset += n
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def append(self, module):
        """Add ``module`` at the end; returns the Sequential."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        """Insert ``module`` before position ``index``."""
        if not isinstance(module, Module):
            raise AssertionError("module should be of type: %s" % Module)
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError("Index out of range: %d" % index)
        if index < 0:
            index += n
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        return self

    def extend(self, sequential):
        """Append each module of ``sequential``."""
        for layer in sequential:
            self.append(layer)
        return self

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(Module):
    """A list of sub-modules, registered as ``"0"``, ``"1"``, ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self += modules

    def _abs_index(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError("index %d is out of range" % idx)
        return str(idx + len(self) if idx < 0 else idx)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[self._abs_index(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._abs_index(idx), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, self._abs_index(idx))
        _renumber(self)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        combined = ModuleList()
        for i, m in enumerate(chain(self, other)):
            combined.add_module(str(i), m)
        return combined

    def __dir__(self):
        return _dir_without_digits(self)

    def __repr__(self):
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        spans, blocks = [[0, 0]], [reprs[0]]
        for i, r in enumerate(reprs[1:], 1):        # runs of equal modules print once, as PyTorch's
            if r == blocks[-1]:
                spans[-1][1] += 1
                continue
            spans.append([i, i])
            blocks.append(r)
        lines = []
        for (a, b), r in zip(spans, blocks):
            s = "(%d): %s" % (a, r) if a == b else "(%d-%d): %d x %s" % (a, b, b - a + 1, r)
            lines.append(_addindent(s, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def insert(self, index, module):
        """Insert ``module`` before position ``index``."""
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self, module):
        """Add ``module`` at the end; returns the list."""
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def extend(self, modules):
        """Append each of ``modules``."""
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        offset = len(self)
        for i, m in enumerate(modules):
            self.add_module(str(offset + i), m)
        return self


class ModuleDict(Module):
    """A dict of sub-modules, in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Add the (key, module) pairs of a mapping or an iterable of pairs."""
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            + type(modules).__name__)
        if isinstance(modules, (OrderedDict, ModuleDict, container_abcs.Mapping)):
            for k, m in modules.items():
                self[k] = m
        else:
            for j, m in enumerate(modules):
                if not isinstance(m, container_abcs.Iterable):
                    raise TypeError("ModuleDict update sequence element #%d should be Iterable; is%s"
                                    % (j, type(m).__name__))
                if len(m) != 2:
                    raise ValueError("ModuleDict update sequence element #%d has length %d; 2 is required"
                                     % (j, len(m)))
                self[m[0]] = m[1]


def _param_line(k, p, dtype_name):
    if isinstance(p, Tensor):
        size = "x".join(str(s) for s in p.shape)
        return "  (%s): %s containing: [%s of size %s]" % (
            k, "Parameter" if isinstance(p, Parameter) else "Tensor", dtype_name(p), size)
    return "  (%s): Object of type: %s" % (k, type(p).__name__)


class ParameterList(Module):
    """A list of parameters (a tensor given is made a Parameter), registered as
    ``"0"``, ``"1"``, ..."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _abs_index(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError("index %d is out of range" % idx)
        return str(idx + len(self) if idx < 0 else idx)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = self.__class__()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, self._abs_index(idx))

    def __setitem__(self, idx, param):
        idx = self._abs_index(idx)
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, idx, param)

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def __dir__(self):
        return _dir_without_digits(self)

    def append(self, value):
        """Add ``value`` at the end; returns the list."""
        i = len(self)
        self._size += 1
        self[i] = value
        return self

    def extend(self, values):
        """Append each of ``values``."""
        if not isinstance(values, container_abcs.Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(_param_line(k, p, lambda t: "tapegrad." + t.dtype.name) for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters (a tensor given is made a Parameter), in insertion order
    (a plain dict given to the constructor or ``update`` is taken in sorted key order,
    as PyTorch's)."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def _key_to_attr(self, key):
        if not isinstance(key, str):
            raise TypeError("Index given to ParameterDict cannot be used as a key as it is not a string (type is "
                            "'%s'). Open an issue on github if you need non-string keys." % type(key).__name__)
        return key

    def __getitem__(self, key):
        return getattr(self, self._key_to_attr(key))

    def __setitem__(self, key, value):
        self._keys[key] = None
        attr = self._key_to_attr(key)
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, attr, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        k, _ = self._keys.popitem()
        self._keys[k] = None
        v = self[k]
        del self[k]
        return k, v

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        """Add the (key, value) pairs of a mapping or an iterable of pairs."""
        if not isinstance(parameters, container_abcs.Iterable):
            raise TypeError("ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            + type(parameters).__name__)
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            for k, p in parameters.items():
                self[k] = p
        elif isinstance(parameters, container_abcs.Mapping):
            for k, p in sorted(parameters.items()):
                self[k] = p
        else:
            for j, p in enumerate(parameters):
                if not isinstance(p, container_abcs.Iterable):
                    raise TypeError("ParameterDict update sequence element #%d should be Iterable; is%s"
                                    % (j, type(p).__name__))
                if len(p) != 2:
                    raise ValueError("ParameterDict update sequence element #%d has length %d; 2 is required"
                                     % (j, len(p)))
                self[p[0]] = p[1]

    def extra_repr(self):
        return "\n".join(_param_line(k, p, _typename) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other):
        c = self.copy()
        c.update(other)
        return c

    def __ror__(self, other):
        c = other.copy()
        c.update(self)
        return c

    def __ior__(self, other):
        self.update(other)
        return self
