"""The layers' whole-op entries: host ops (``ops/host.py``) whose forward is NumPy on
whole arrays and whose reverse comes twice, as the family asks:

* ``reverse(xs, y, g, ints, floats, needs)``: the differentiable rule, written with
  tapegrad's operations (create_graph, the interpreted backward, gradgradcheck);
* ``array_reverse(xs, y, g, ints, floats, needs)``: the same adjoints on NumPy arrays,
  which the compiled backward calls at the entry's stop without making a tensor.

``nn_op`` registers both; the array rule reads the entry's saved values from the tape
(``Tape.vals``), its parameters and shapes from ``aux``, and which inputs may need an
adjoint (an input that is a constant needs none)."""
import numpy as np

from ..autograd.grad_mode import is_grad_enabled
from ..core import tape as _tp
from ..core.registry import CONST, SAVE_A, SAVE_B, SAVE_C, SAVE_OUT
from ..core.tensor import Tensor
from ..ops import host as _h

_SAVE_BITS = (SAVE_A, SAVE_B, SAVE_C)
_ROW = 9        # the integer fields of an entry


def nn_op(name, grad_fn, forward, reverse, array_reverse, saves):
    """Register host op ``name``: ``forward(arrays, ints, floats)``, the two reverses above
    (``array_reverse`` may return None to take the differentiable rule instead)."""
    def on_arrays(g, entry):
        T, s = entry
        row = [T.field(s, k) for k in range(_ROW)]
        aux = T.aux_array()
        slots, at = _h._slots_and_meta(aux, row)
        ints, shapes, oshape = _h.decode(aux, at)
        slots = slots[:len(shapes)]
        xs = [np.asarray(T.vals[i]).reshape(sh) if j < 3 and saves & _SAVE_BITS[j] and T.vals[i] is not None
              else None for j, (i, sh) in enumerate(zip(slots, shapes))]
        y = np.asarray(T.vals[s]).reshape(oshape) if saves & SAVE_OUT and T.vals[s] is not None else None
        needs = [i >= 0 and T.field(i, _tp.OP) != CONST for i in slots]
        flts = T.arrays()[1]
        floats = (float(flts[s, _tp.F0]), float(flts[s, _tp.F1]))
        grads = array_reverse(xs, y, g.reshape(oshape), ints, floats, needs)
        if grads is None:
            return None
        return [None if (r is None or not nd) else np.ascontiguousarray(r, dtype=np.float64).reshape(-1)
                for r, nd in zip(grads, needs)]
    def rule(xs, y, g, ints, floats, needs):
        # with grad mode off (a backward without create_graph that walks the tape in Python),
        # the array rule computes the same adjoints without recording anything
        if not is_grad_enabled():
            arr = [None if x is None else x._data for x in xs]
            grads = array_reverse(arr, None if y is None else y._data, g._data, ints, floats, needs)
            if grads is not None:
                return [None if (r is None or not nd) else
                        Tensor._const(np.ascontiguousarray(r, dtype=x_dtype(xs, y, i)))
                        for i, (r, nd) in enumerate(zip(grads, needs))]
        return reverse(xs, y, g, ints, floats, needs)
    return _h.host_op(name, grad_fn, forward, rule, saves, array_reverse=on_arrays)


def x_dtype(xs, y, i):
    """The dtype of input i's adjoint: its own (when kept), else the output's, else float64."""
    t = xs[i] if i < len(xs) and xs[i] is not None else y
    return t.dtype if t is not None and t.dtype.kind == "f" else np.float64


def record(op, inputs, out, ints=(), floats=(0.0, 0.0), grad_fn=None):
    """The tensor of ``out`` recorded as an entry of ``op`` (``ops.host.record``)."""
    return _h.record(op, inputs, out, ints, floats, grad_fn)


def refuse_replay(why):
    """Tell a recording for replay (tg.compile, tg.record) that this call cannot be
    replayed (``why``): its side effect happens in Python, which a replay would skip."""
    if _tp.recording[0]:
        rec = _tp.state().rec
        if rec is not None:
            rec.refuse(why)


def guard_values(t, value=None):
    """Tell a recording for replay that the values of tensor ``t`` (``value``, its array
    by default) were read in Python and shaped the computation (indices, masks, lengths):
    a replay with other values records again instead of reusing them."""
    if _tp.recording[0] and t is not None and hasattr(t, "_data"):
        rec = _tp.state().rec
        if rec is not None:
            rec.read(t, t._data if value is None else value)
