"""``tg.nn.Parameter`` and ``tg.nn.Buffer`` (PyTorch's ``torch.nn.parameter``)."""
import numpy as np

from ..core.tensor import Tensor, _as_array, _init

__all__ = ["Parameter", "Buffer"]


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


class Buffer:
    """``nn.Buffer(data, persistent=True)``: assigned to a Module attribute, registers
    ``data`` as a buffer (``register_buffer``); it is a marker, not a tensor type, as in
    PyTorch, where the module then holds the plain tensor."""

    def __init__(self, data=None, *, persistent=True):
        if data is None:
            data = Tensor._const(np.empty((0,), dtype=np.float64))
        if not isinstance(data, Tensor):
            raise TypeError("Buffer data must be a Tensor, got %s" % type(data).__name__)
        self.data = data
        self.persistent = persistent
