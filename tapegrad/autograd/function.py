"""``tg.autograd.Function``: an operation whose forward and backward the user writes
(PyTorch's ``torch.autograd.Function``), recorded as one host op entry
(``ops/host.py``): the compiled backward stops at it and calls the user's
``backward`` with grad mode off; ``create_graph=True`` calls it with grad mode on,
so a backward written with tapegrad's operations is differentiated again.

The entry's inputs are the tensor arguments of ``apply``; its output is the flat
concatenation of the differentiable outputs, which ``apply`` returns as views.
The context of each call (saved tensors, flags) is kept by the tape, beside its
entry (``Tape.host_state``).
``tg.compile`` and ``tg.record`` replay a Function: the entry's float parameter
names its call (``_CallSpec``: the class, the arguments that are not tensors, which
inputs need a gradient, the outputs' structure and dtypes), and a replay calls the
user's ``forward`` again on the new input values, with a new context, which the
replayed tape keeps for ``backward``.  A forward whose outputs change type, shape or
dtype from the recorded call raises (a divergence: ``tg.compile`` records again),
never giving a wrong value or gradient.  ``create_graph=True`` through a replayed
call gives ``backward`` saved tensors that stand for the replayed tape's slots
(``_tied_saved``), as an eager call's are the recorded tensors.  A tape file cannot
hold a Function (``replay/tapefile.py`` refuses to save one).
"""
import itertools
import weakref
import functools

import numpy as np

from ..core import tape as _tp
from ..core.registry import NoForwardRule
from ..core.tensor import Tensor
from ..ops import host as _h
from ..ops import shape as _sh
from .grad_mode import is_grad_enabled, no_grad

_DTYPES = (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.float16))


class FunctionCtx:
    """``ctx`` of a Function: ``save_for_backward``, ``save_for_forward``, ``saved_tensors``,
    ``needs_input_grad``, ``mark_non_differentiable``, ``set_materialize_grads``
    and any attribute the forward sets."""

    def __init__(self):
        self.needs_input_grad = ()
        self.to_save = ()
        self._non_differentiable = ()
        self.materialize_grads = True
        self._saved = None

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        """Tensors for ``jvp`` (forward mode), where ``saved_tensors`` returns them."""
        self.to_save_forward = tensors

    @property
    def saved_tensors(self):
        if self._saved is None:
            return tuple(self.to_save)
        return self._saved

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def mark_dirty(self, *tensors):
        raise NotImplementedError("tapegrad: in-place Functions (ctx.mark_dirty) are not supported")

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


def once_differentiable(fn):
    """A backward that is not differentiated again: it runs with grad mode off and
    its gradients require no grad."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            out = fn(ctx, *args)
        return out
    return wrapper


class Function:
    """Subclass with ``@staticmethod forward(ctx, *args)`` and ``@staticmethod
    backward(ctx, *grad_outputs)``; call ``YourFunction.apply(*args)``."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """Forward mode: the outputs' tangents from the inputs' (None for an argument that is
        not a tensor or has none), as PyTorch's; optional."""
        raise NotImplementedError(_NO_JVP)

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        rec = _tp.state().rec       # (while recording, an argument may require grad only to be traced)
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and (rec.really_requires_grad(a) if rec is not None
                                                                 else a.requires_grad) for a in args)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        tensors = [a for a in args if isinstance(a, Tensor)]
        if not _tp.state().grad or not any(t.requires_grad for t in tensors):
            return out
        st = _tp.state()
        if st.rec is not None and any(isinstance(v, Tensor) for v in kwargs.values()):
            st.rec.refuse("a tg.autograd.Function (%s) is given a tensor by keyword, which a replay would not "
                          "follow" % cls.__name__)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        nondiff = {id(t) for t in ctx._non_differentiable}
        diff = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and id(o) not in nondiff
                and o.dtype.kind == "f"]
        if not diff:
            return out
        dt = np.result_type(*[outs[i].dtype for i in diff])
        flat = np.concatenate([outs[i]._data.astype(dt, copy=False).ravel() for i in diff]) if diff else np.zeros(0)
        # the outputs' dtype, then per output: 1 differentiable, 0 another tensor, -1 no tensor; its shape
        ints = [_DTYPES.index(np.dtype(dt)) if np.dtype(dt) in _DTYPES else 0, len(outs)]
        for i, o in enumerate(outs):
            if isinstance(o, Tensor):
                ints += [1 if i in diff else 0, o.ndim] + list(o.shape)
            else:
                ints += [-1, 0]
        spec = _CallSpec(cls, args, kwargs, ctx.needs_input_grad, ints,
                         [o.dtype if isinstance(o, Tensor) else None for o in outs])
        y = _h.record(_FUNCTION, tensors, flat, ints, floats=(float(spec.key), 0.0), grad_fn=cls.__name__ + "Backward")
        spec.slot = y._slot
        ctx._spec = spec            # (the tape keeps the context, and so the spec a replay reads)
        views, at = {}, 0
        for i in diff:
            o = outs[i]
            n = o.numel()
            v = _sh.reshape(_sh.narrow(y, 0, at, n), o.shape, cls.__name__ + "Backward")
            if v.dtype != o.dtype:
                v = _sh.to_dtype(v, o.dtype)
            views[i] = v
            at += n
        # saved outputs and inputs are the recorded tensors (create_graph differentiates through them)
        by_id = {id(outs[i]): views[i] for i in diff}
        ctx._saved = tuple(by_id.get(id(t), t) for t in ctx.to_save)
        ctx._input_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx._nargs = len(args)
        # (the tape owns the context, as it owns the entry: ``Tape.host_state``)
        y._tape.keep_host_state(y._slot, (cls, ctx))
        res = tuple(views.get(i, o) for i, o in enumerate(outs))
        return res[0] if single else res


class _CallSpec:
    """What a replay needs to call a Function again: its class, the arguments that are
    not tensors (``None`` where a tensor goes), the keywords, which inputs needed a
    gradient, the structure of the outputs (the entry's ``ints``) and their dtypes.
    Found by ``key`` (the entry's F0) while the tape or a recording of it holds it."""
    _keys = itertools.count(1)
    __slots__ = ("key", "cls", "template", "kwargs", "needs", "ints", "dtypes", "slot", "__weakref__")

    def __init__(self, cls, args, kwargs, needs, ints, dtypes):
        self.key = next(_CallSpec._keys)
        self.cls, self.kwargs, self.needs, self.ints = cls, dict(kwargs), needs, list(ints)
        self.dtypes = list(dtypes)
        self.template = [None if isinstance(a, Tensor) else a for a in args]
        self.slot = -1
        _SPECS[self.key] = self


_SPECS = weakref.WeakValueDictionary()


def _function_forward(xs, ints, f, vals=None):
    """A replay of the Function call the entry records: its forward on the new inputs,
    with a new context, which the replay's values keep (``vals.host_state``) for the
    replayed tape's backward."""
    spec = _SPECS.get(int(f[0]))
    if spec is None or vals is None:
        raise RuntimeError("tapegrad: the tg.autograd.Function this tape calls is gone (a tape pickled or loaded "
                           "from a file cannot call Python code)")
    cls = spec.cls
    it = iter(xs)
    args = [Tensor._const(np.array(next(it))) if a is None else a for a in spec.template]
    ctx = FunctionCtx()
    ctx.needs_input_grad = spec.needs
    with no_grad():
        out = cls.forward(ctx, *args, **spec.kwargs)
    outs = (out,) if not isinstance(out, tuple) else out
    dt = _DTYPES[ints[0]]
    parts, p, at = [], 2, 0
    where = {}          # id(differentiable output) -> (offset in the entry's output, shape, dtype)
    same = len(outs) == ints[1]
    for o, odt in zip(outs, spec.dtypes) if same else ():
        kind, r = ints[p], ints[p + 1]
        shape = tuple(ints[p + 2:p + 2 + r])
        p += 2 + r
        if kind < 0:
            same = same and not isinstance(o, Tensor)
            continue
        if not isinstance(o, Tensor) or tuple(o.shape) != shape or o.dtype != odt:
            same = False
            break
        if kind == 1:
            parts.append(o._data.astype(dt, copy=False).ravel())
            where.setdefault(id(o), (at, shape, o.dtype))
            at += o._data.size
    if not same:
        raise RuntimeError("tapegrad: the tg.autograd.Function %s returned outputs of other types, shapes or dtypes "
                           "than when it was recorded; a recording assumes the same structure on every call (call "
                           "it outside tg.compile / tg.record)" % cls.__name__)
    flat = np.concatenate(parts) if parts else np.zeros(0, dt)
    ctx._saved = tuple(ctx.to_save)
    # where each saved tensor comes from, for a create_graph backward (``_tied_saved``):
    # an output of the entry, an input (its position among the entry's inputs), or neither
    tensors = [a for a in args if isinstance(a, Tensor)]
    inputs = {id(a): j for j, a in enumerate(tensors)}
    ctx._tie = ([a._data for a in tensors], flat,
                [("out",) + where[id(t)] if id(t) in where else ("in", inputs[id(t)]) if id(t) in inputs else None
                 for t in ctx.to_save])
    ctx._input_positions = [i for i, a in enumerate(spec.template) if a is None]
    ctx._nargs = len(spec.template)
    ctx._replayed = True
    if vals.host_state is None:
        vals.host_state = {}
    vals.host_state[spec.slot] = (cls, ctx)
    return flat


def _tied_saved(ctx, tie, name):
    """A replayed call's saved tensors as the eager call's are for ``create_graph``:
    its inputs and outputs stand for their slots of the replayed tape (``tie``, from
    the differentiable walk), so the backward's graph reaches them."""
    xs, flat, where = ctx._tie
    y = None
    res = []
    for t, w in zip(ctx.to_save, where):
        if w is None:
            res.append(t)           # (computed inside forward, with grad mode off: a constant)
        elif w[0] == "in":
            x = np.asarray(xs[w[1]])
            res.append(tie(w[1], x).reshape(x.shape))
        else:
            _, at, shape, dtype = w
            if y is None:
                y = tie(-1, flat)
            v = _sh.reshape(_sh.narrow(y, 0, at, int(np.prod(shape, dtype=np.int64))), shape,
                            name + "Backward")
            res.append(v if v.dtype == dtype else _sh.to_dtype(v, dtype))
    return tuple(res)


def _function_reverse(xs, y, g, ints, f, needs, entry, tie=None):
    cls, ctx = _call(entry)
    dt = _DTYPES[ints[0]]
    if g.dtype != dt:
        g = g.to(dt)        # (the sweep's adjoints are float64; the user's backward gets the outputs' dtype)
    grads, p, at = [], 2, 0
    for _ in range(ints[1]):
        kind, r = ints[p], ints[p + 1]
        shape = tuple(ints[p + 2:p + 2 + r])
        p += 2 + r
        if kind < 0:
            grads.append(None)
            continue
        if kind == 0:       # (a non-differentiable output: a zero gradient, as PyTorch gives)
            grads.append(Tensor._const(np.zeros(shape, g.dtype)))
            continue
        n = int(np.prod(shape, dtype=np.int64))
        grads.append(_sh.reshape(_sh.narrow(g, 0, at, n), shape))
        at += n
    saved = ctx._saved
    if getattr(ctx, "_replayed", False) and is_grad_enabled():
        if tie is None:
            raise RuntimeError("tapegrad: create_graph=True through a replayed tg.autograd.Function (%s) needs the "
                               "differentiable backward" % cls.__name__)
        ctx._saved = _tied_saved(ctx, tie, cls.__name__)
    try:
        res = cls.backward(ctx, *grads)
    finally:
        ctx._saved = saved
    if not isinstance(res, tuple):
        res = (res,)
    if len(res) != ctx._nargs:
        raise RuntimeError("function %sBackward returned an incorrect number of gradients (expected %d, got %d)"
                           % (cls.__name__, ctx._nargs, len(res)))
    return [res[i] for i in ctx._input_positions]


# -- forward mode (autograd/tangent.py): the user's jvp per direction for the tangent, the
# user's backward per direction for the batched reverse; a user's backward gives no curvature,
# so second order through a Function takes the reverse-mode path
_NO_JVP = "You must implement the jvp function for custom autograd.Function to use it with forward mode AD."


def _outputs(ints):
    """Per output of the call: (kind: 1 differentiable, 0 another tensor, -1 none, shape)."""
    res, p = [], 2
    for _ in range(ints[1]):
        kind, r = ints[p], ints[p + 1]
        res.append((kind, tuple(ints[p + 2:p + 2 + r])))
        p += 2 + r
    return res


def _function_tangent(xs, y, ts, ints, f, entry):
    cls, ctx = _call(entry)
    if cls.jvp is Function.jvp:
        raise NoForwardRule(_NO_JVP)
    K = next(len(t) for t in ts if t is not None)
    outs = _outputs(ints)
    rows = []
    saved = ctx._saved
    ctx._saved = tuple(getattr(ctx, "to_save_forward", ()))
    try:
        for k in range(K):
            args = [None] * ctx._nargs
            for pos, t in zip(ctx._input_positions, ts):
                args[pos] = None if t is None else Tensor._const(np.ascontiguousarray(t[k]))
            with no_grad():
                got = cls.jvp(ctx, *args)
            got = got if isinstance(got, tuple) else (got,)
            if len(got) != len(outs):
                raise RuntimeError("function %s.jvp returned an incorrect number of tangents (expected %d, got %d)"
                                   % (cls.__name__, len(outs), len(got)))
            rows.append(np.concatenate([np.broadcast_to(np.zeros(()) if t is None else np.asarray(t._data, np.float64),
                                                        shape).ravel()
                                        for t, (kind, shape) in zip(got, outs) if kind == 1] or [np.zeros(0)]))
    finally:
        ctx._saved = saved
    return np.stack(rows)


def _function_batched_reverse(xs, y, G, ints, f, needs, entry):
    per = []
    with no_grad():
        for k in range(len(G)):
            per.append(_function_reverse(xs, y, Tensor._const(np.ascontiguousarray(G[k])), ints, f, needs, entry))
    return [None if any(r[j] is None for r in per) else np.stack([np.asarray(r[j]._data, np.float64) for r in per])
            for j in range(len(per[0]))] if per else []


def _function_curvature(xs, y, ts, ty, g, ints, f, needs, entry):
    raise NoForwardRule.named(_call(entry)[0].__name__ + "Backward")


def _call(entry):
    T, s = entry
    got = (getattr(T, "host_state", None) or {}).get(s)
    if got is None:
        raise RuntimeError("tapegrad: the context of this tg.autograd.Function call is gone")
    return got


_FUNCTION = _h.host_op("autograd_function", "FunctionBackward", _function_forward, _function_reverse, 0,
                       entry=True, forward_mode=(_function_tangent, _function_batched_reverse, _function_curvature))
