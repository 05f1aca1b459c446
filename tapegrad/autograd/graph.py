"""grad_fn objects: a read-only view of tape entries, shaped like PyTorch's graph."""
import struct
import weakref

import numpy as np

from ..core import tensor as _tensor
from ..core.registry import CONST, EXT, GRAD_FN_NAMES, LEAF, OP_NAMES, REDUCE, SAVES_BY_RG, family
from ..ops.shape import VARIADIC
from ..core.tape import A, AUX, B, C, ESIZE, F0, NAME, OP, SIZE, VAL
from ..core.tensor import Tensor
from .walk import SECOND_TIME, aux_array, entry_inputs

_SCALAR_OPERAND = {"add_s", "mul_s", "div_s"}
_VAL = struct.Struct("d")


class Node:
    """The entry that produced a tensor (``tensor.grad_fn``)."""
    __slots__ = ("_tape", "_slot", "__weakref__")

    def __init__(self, tape, slot):
        self._tape, self._slot = tape, slot

    def name(self):
        return GRAD_FN_NAMES[self._tape.field(self._slot, NAME)]

    def _inputs(self):
        T, s = self._tape, self._slot
        row = T.arrays()[0][s]
        ins = entry_inputs(row, aux_array(T))
        if row[C] != VARIADIC:      # (a VARIADIC entry's -1 is an input that needs no gradient: (None, 0))
            ins = [i for i in ins if i >= 0]
        if OP_NAMES[T.field(s, OP)] in _SCALAR_OPERAND:
            ins.append(-1)      # PyTorch wraps the Python number as a second input
        return ins

    @property
    def next_functions(self):
        T = self._tape
        out = []
        for i in self._inputs():
            op = T.field(i, OP) if i >= 0 else CONST
            if i < 0 or op == CONST:
                out.append((None, 0))
            elif op == LEAF:
                out.append((accumulate_node(T.leaves[i]), 0))
            elif op == EXT:
                out.append((node_for(*T.ext[i]), 0))
            else:
                out.append((node_for(T, i), 0))
        return tuple(out)

    @property
    def metadata(self):
        return {}

    def _value(self, slot):
        T = self._tape
        v = T.vals[slot] if slot >= 0 else None
        if v is None and slot >= 0 and T.field(slot, SIZE) == 1:
            v = np.asarray(_VAL.unpack_from(T.buf, slot * ESIZE + 8 * VAL)[0])
        if v is None:
            raise RuntimeError(SECOND_TIME)
        return Tensor._wrap(v)

    def _kept(self, bit):
        """Whether this entry saved its input a (``bit`` 1) or b (2): PyTorch's
        ``_saved_self`` is None when only what ``self``'s rule reads was kept."""
        T, s = self._tape, self._slot
        rg = 0
        for j, col in enumerate((A, B)):
            i = T.field(s, col)
            if i >= 0 and T.field(i, OP) != CONST:
                rg |= 1 << j
        return bool(SAVES_BY_RG[T.field(s, OP)][rg] & bit)

    @property
    def _saved_self(self):
        if not self._kept(1):
            return None
        return self._value(self._tape.field(self._slot, A))

    @property
    def _saved_other(self):
        T, s = self._tape, self._slot
        b = T.field(s, B)
        if b >= 0:
            return self._value(b) if self._kept(2) else None
        return Tensor._wrap(np.asarray(_VAL.unpack_from(T.buf, s * ESIZE + 8 * F0)[0]))

    @property
    def _saved_result(self):
        return self._value(self._slot)

    @property
    def _saved_self_sym_sizes(self):
        T, s = self._tape, self._slot
        if family(T.field(s, OP)) != REDUCE:
            raise AttributeError("_saved_self_sym_sizes")
        aux = aux_array(T)
        at = T.field(s, AUX)
        return tuple(int(v) for v in aux[at + 2:at + 2 + aux[at]])

    def __repr__(self):
        return "<%s object at %#x>" % (self.name(), id(self))

    def __eq__(self, other):
        return isinstance(other, Node) and other._tape is self._tape and other._slot == self._slot

    def __hash__(self):
        return hash((id(self._tape), self._slot))


class AccumulateGrad:
    """The node that accumulates into a leaf's ``.grad``."""
    __slots__ = ("variable", "__weakref__")
    next_functions = ()

    def __init__(self, variable):
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"

    def __repr__(self):
        return "<AccumulateGrad object at %#x>" % id(self)


def accumulate_node(leaf):
    x = leaf._extras()
    node = x.accnode() if x.accnode is not None else None
    if node is None:
        node = AccumulateGrad(leaf)
        x.accnode = weakref.ref(node)
    return node


_NODE_CLASSES = {}      # grad_fn name -> its Node subclass


def node_class(name):
    """The class of the grad_fns named ``name`` (``type(t.grad_fn).__name__`` is
    'MulBackward0', as in PyTorch): one Node subclass per name, made once."""
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        cls = _NODE_CLASSES[name] = type(name, (Node,), {"__slots__": (), "__module__": "tapegrad.autograd"})
    return cls


def node_for(tape, slot):
    if tape.nodes is None:
        tape.nodes = weakref.WeakValueDictionary()
    node = tape.nodes.get(slot)
    if node is None:
        node = tape.nodes[slot] = node_class(GRAD_FN_NAMES[tape.field(slot, NAME)])(tape, slot)
    return node


_tensor.NODE_FOR = node_for     # Tensor.grad_fn's lookup: the core holds the slot, this module fills it
