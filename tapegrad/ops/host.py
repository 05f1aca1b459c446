"""Host ops: entries whose forward is a NumPy/SciPy call (LAPACK) and whose reverse
runs in Python, between segments of the compiled sweep.

A host op is one record in ``HOST_OPS``, registered with ``host_op`` by the module
that defines it (``tapegrad/linalg.py`` for ``tg.linalg``): its NumPy forward and
its reverse rule written once with tapegrad's own operations.  That rule is the
differentiable reverse (create_graph, the interpreted backward); the compiled
backward stops at a host entry (``autograd/engine.py`` marks it in ``stops``) and
calls the same rule on arrays with grad mode off, adding the input adjoints into
the sweep's adjoint store.  No kernel is compiled for the family.

An entry keeps up to three input slots (a, b, c), its integer parameters and the
shapes of its inputs and output in ``aux`` (``[nint, ints..., nin, (ndim, dims...)
per input, ndim, dims...]``) and two float parameters in F0, F1.  An op with
several differentiable outputs (eigh, svd, qr, slogdet) has one entry whose output
is their flat concatenation; the public function returns views of it.
"""
from typing import Callable, NamedTuple

import numpy as np

from ..core import tape as _tp
from ..core.descriptors import aux_words
from ..core.registry import (GRAD_FN_NAMES, HOST, SAVE_A, SAVE_B, SAVE_C, SAVE_OUT, EntryError, FamilyRules, each_entry,
                             NoForwardRule, OpDefinitionError, define, name_id, register_family)
from ..core.tensor import Tensor
from .shape import VARIADIC     # (an entry whose input slots are listed in aux)




class HostOp(NamedTuple):
    """``forward(arrays, ints, floats)``: the output array from the input arrays
    (shaped), the integer parameters and (f0, f1).
    ``reverse(xs, y, g, ints, floats, needs)``: the adjoint of each input (a tensor,
    or None for none) with tapegrad's operations, from the inputs ``xs`` and the
    output ``y`` as shaped tensors (None where the op does not save them: ``saves``,
    bits ``SAVE_A``, ``SAVE_B``, ``SAVE_C``, ``SAVE_OUT``), the output's adjoint
    ``g`` (in the output's dtype) and which inputs need a gradient."""
    name: str
    code: int
    forward: Callable
    reverse: Callable
    saves: int
    grad_fn: str
    # the reverse also gets ``entry=(tape, slot)`` and ``tie(j, value)``: input j's (-1:
    # the output's) value as a flat tensor standing for its slot (tg.autograd.Function)
    entry: bool = False
    # forward mode (autograd/tangent.py) on real NumPy arrays (an op with a complex value
    # has none), K directions on a leading axis, or None (functional then takes the
    # reverse-mode path):
    #   tangent(xs, y, ts, ints, floats)             -> the output's (K, *shape) tangent
    #   batched_reverse(xs, y, G, ints, floats, needs) -> per input its (B, *shape) adjoints
    #   curvature(xs, y, ts, ty, g, ints, floats, needs) -> per input the (K, *shape)
    #     derivative of its adjoint for ``g`` as the values read move along ts and ty
    forward_mode: tuple = None
    # batched_reverse also gets ``adjoints``: how many leading rows of G are adjoints (the
    # rest, in forward over reverse, are their tangents), for a rule that checks them (eig)
    adjoint_rows: bool = False
    # the compiled backward's reverse on arrays, or None (``reverse`` then runs, grad mode off):
    #   array_reverse(g, entry) -> per input its flat float64 adjoint (None: none), a new
    #   array the backward may keep, from the output's flat float64 adjoint ``g``; or None,
    #   for ``reverse`` to run instead
    array_reverse: Callable = None


HOST_OPS = {}       # kernel index -> HostOp
BY_NAME = {}        # op name -> HostOp
_SAVE_BITS = (SAVE_A, SAVE_B, SAVE_C)


def host_op(name, grad_fn, forward, reverse, saves, entry=False, forward_mode=None, adjoint_rows=False,
            array_reverse=None):
    """Define the host op ``name`` (an opcode of the HOST family)."""
    if not callable(forward) or not callable(reverse):
        raise OpDefinitionError("host op %r: its forward and its reverse rule must be functions" % name)
    if forward_mode is not None and (len(forward_mode) != 3 or not all(map(callable, forward_mode))):
        raise OpDefinitionError("host op %r: forward_mode is (tangent, batched_reverse, curvature)" % name)
    k = len(HOST_OPS)
    code = define(HOST, k, name, saves=saves)
    op = HOST_OPS[k] = BY_NAME[name] = HostOp(name, code, forward, reverse, saves, grad_fn, entry, forward_mode,
                                                   adjoint_rows, array_reverse)
    return op


def record(op, inputs, out, ints=(), floats=(0.0, 0.0), grad_fn=None):
    """The tensor of ``out`` (the forward's result for tensors ``inputs``), recorded
    as an entry of host op ``op`` when an input requires grad."""
    out = np.asarray(out)
    if not out.flags.c_contiguous:
        out = out.copy()
    if not _tp.state().grad or not any(x._requires_grad for x in inputs):
        return Tensor._wrap(out)
    variadic = len(inputs) > 3
    if variadic and op.saves & (SAVE_A | SAVE_B | SAVE_C):
        raise OpDefinitionError("host op %r: an op of more than three inputs saves none of them" % op.name)
    T = _tp.current()
    slots = []
    for j, x in enumerate(inputs):
        s = x._slot if (x._tape_id == T.id and x._slot_version == x._ver[0]) else T.adopt(x)
        if not variadic and op.saves & _SAVE_BITS[j]:
            T.vals[s] = x._data
        slots.append(s)
    words = ([len(slots)] + slots if variadic else []) + [len(ints)] + [int(i) for i in ints] + [len(inputs)]
    for x in inputs:
        words += [x._data.ndim] + list(x._data.shape)
    words += [out.ndim] + list(out.shape)
    at = T.aux_append(np.array(words, np.int64))
    a, b, c = (-1, -1, VARIADIC) if variadic else (slots + [-1, -1, -1])[:3]
    ver = [0]
    o = T.new_slot(op.code, a, b, c, at, -1, name_id(grad_fn or op.grad_fn), float(floats[0]), float(floats[1]),
                   out, bool(op.saves & SAVE_OUT), ver)
    return Tensor._recorded(out, T, o, ver)


def decode(aux, at):
    """(integer parameters, input shapes, output shape) of the entry at ``aux[at]``."""
    p = at + 1 + int(aux[at])
    ints = tuple(aux[at + 1:p].tolist())
    nin = int(aux[p])
    p += 1
    shapes = []
    for _ in range(nin + 1):
        nd = int(aux[p])
        shapes.append(tuple(aux[p + 1:p + 1 + nd].tolist()))
        p += 1 + nd
    return ints, shapes[:-1], shapes[-1]


# -- the family's rules -----------------------------------------------------------------
def _slots_and_meta(aux, row):
    """The input slots of a host entry and where its parameters start in ``aux``."""
    at = row[_tp.AUX]
    if row[_tp.C] == VARIADIC:
        n = int(aux[at])
        return [int(v) for v in aux[at + 1:at + 1 + n]], at + 1 + n
    return [row[_tp.A], row[_tp.B], row[_tp.C]], at


def differentiable_reverse(ctx, s, k, row, f0, f1, g):
    op = HOST_OPS[k]
    slots, at = _slots_and_meta(ctx.aux, row)
    ints, shapes, oshape = decode(ctx.aux, at)
    slots = slots[:len(shapes)]
    needs = [ctx.needs(i) for i in slots]
    if not any(needs):
        return []
    shaped = _shaped if _tp.state().grad else _shaped_unrecorded
    xs = [shaped(ctx.value(i), sh) if j < 3 and op.saves & _SAVE_BITS[j] else None
          for j, (i, sh) in enumerate(zip(slots, shapes))]
    y = shaped(ctx.value(s), oshape) if op.saves & SAVE_OUT else None
    dt = next((t.dtype for t in xs + [y] if t is not None), None)
    g = shaped(g, oshape)
    if dt is not None and dt.kind == "f" and g.dtype != dt:
        g = g.to(dt)
    if op.entry:
        def tie(j, v):      # input j's (-1: the output's) value v as a flat tensor standing for its slot
            return ctx.value(s if j < 0 else slots[j], compute=lambda: v)
        grads = op.reverse(xs, y, g, ints, (f0, f1), needs, entry=(ctx.T, s), tie=tie)
    else:
        grads = op.reverse(xs, y, g, ints, (f0, f1), needs)
    return [(i, shaped(r, (r.numel(),))) for i, r, nd in zip(slots, grads, needs) if nd and r is not None]


def array_reverse(T, s, k, row, g):
    """The op's ``array_reverse`` at entry ``s`` (see ``FamilyRules``), or None."""
    rule = HOST_OPS[k].array_reverse
    if rule is None:
        return None
    grads = rule(g, entry=(T, s))
    if grads is None:
        return None
    return [(i, r) for i, r in zip(_slots_and_meta(T.aux_array(), row)[0], grads) if r is not None]


def _shaped(t, shape):
    return t.reshape(shape)


def _shaped_unrecorded(t, shape):
    """(Grad mode off, the compiled backward's call: no view entry to record.)"""
    return t if t.shape == shape else t.reshape(shape)


def replay_rule(k, row, aux, shape, name, f0, f1):
    op = HOST_OPS[k]
    slots, at = _slots_and_meta(aux, row)
    ints, shapes, oshape = decode(aux, at)
    slots = slots[:len(shapes)]

    if op.entry:        # (tg.autograd.Function: its forward keeps the call's context in the replay's values)
        def f(v):
            return np.ascontiguousarray(op.forward([np.asarray(v[i]).reshape(sh) for i, sh in zip(slots, shapes)],
                                                   ints, (f0, f1), vals=v)).reshape(oshape)
        return f

    def f(v):
        return np.ascontiguousarray(op.forward([np.asarray(v[i]).reshape(sh) for i, sh in zip(slots, shapes)],
                                               ints, (f0, f1))).reshape(oshape)
    return f


def _compiled_forward(k, ints, e, sizes, aux, live):
    return False        # (the replay calls the NumPy forward)


# -- forward mode (autograd/tangent.py): each op's own rules, on shaped arrays ----------------
def _forward_entry(ctx, s, k, row):
    """(op, input slots, ints, input shapes, output shape, input values, output value)
    of host entry ``s``; NoForwardRule for an op without forward-mode rules."""
    op = HOST_OPS[k]
    if op.forward_mode is None:
        raise NoForwardRule.named(GRAD_FN_NAMES[row[_tp.NAME]])
    slots, at = _slots_and_meta(ctx.aux, row)
    ints, shapes, oshape = decode(ctx.aux, at)
    slots = slots[:len(shapes)]
    xs = [ctx.val(i).reshape(sh) if j < 3 and op.saves & _SAVE_BITS[j] else None
          for j, (i, sh) in enumerate(zip(slots, shapes))]
    y = ctx.val(s).reshape(oshape) if op.saves & SAVE_OUT else None
    return op, slots, ints, shapes, oshape, xs, y


def _input_tangents(ctx, slots, shapes):
    return [None if ctx.tan(i) is None else ctx.tan(i).reshape((ctx.K,) + sh) for i, sh in zip(slots, shapes)]


def _entry_kw(op, ctx, s):
    """An entry op's rules (tg.autograd.Function) also get the entry, to find its call."""
    return {"entry": (ctx.T, s)} if op.entry else {}


def tangent(ctx, s, k, row, f0, f1):
    op, slots, ints, shapes, oshape, xs, y = _forward_entry(ctx, s, k, row)
    t = op.forward_mode[0](xs, y, _input_tangents(ctx, slots, shapes), ints, (f0, f1), **_entry_kw(op, ctx, s))
    return None if t is None else np.asarray(t, np.float64).reshape(ctx.K, -1)


def batched_reverse(ctx, s, k, row, f0, f1, G):
    op, slots, ints, shapes, oshape, xs, y = _forward_entry(ctx, s, k, row)
    needs = [ctx.needs(i) for i in slots]
    kw = _entry_kw(op, ctx, s)
    if op.adjoint_rows:
        kw["adjoints"] = G.shape[0] if ctx.adjoint_rows is None else ctx.adjoint_rows
    grads = op.forward_mode[1](xs, y, G.reshape((G.shape[0],) + oshape), ints, (f0, f1), needs, **kw)
    return [(i, np.asarray(r, np.float64).reshape(G.shape[0], -1))
            for i, r, nd in zip(slots, grads, needs) if nd and r is not None]


def curvature(ctx, s, k, row, f0, f1, g):
    op, slots, ints, shapes, oshape, xs, y = _forward_entry(ctx, s, k, row)
    ts = _input_tangents(ctx, slots, shapes)
    if all(t is None for t in ts):
        return []
    ty = ctx.tan(s)
    ty = None if ty is None else ty.reshape((ctx.K,) + oshape)
    needs = [ctx.needs(i) for i in slots]
    ds = op.forward_mode[2](xs, y, ts, ty, np.asarray(g, np.float64).reshape(oshape), ints, (f0, f1), needs,
                            **_entry_kw(op, ctx, s))
    return [(i, np.asarray(d, np.float64).reshape(ctx.K, -1))
            for i, d, nd in zip(slots, ds, needs) if nd and d is not None]


@each_entry
def check_entries(k, e, ints, aux):
    """``FamilyRules.check_entries``: a host op's reverse runs in NumPy, on its inputs'
    and output's values shaped by the words ``record`` wrote; they must agree with
    the slots' sizes (``[m, slots[m]]`` when variadic, ``[len(ints), ints, nin,
    (ndim, shape)[nin], ndim, shape]``)."""
    row = ints[e].tolist()
    at = row[_tp.AUX]
    if row[_tp.C] == VARIADIC:
        m = int(aux_words(aux, at, 1, "a host op")[0])
        slots = [int(v) for v in aux_words(aux, at + 1, m, "a host op")]
        p = at + 1 + m
    else:
        slots, p = [v for v in (row[_tp.A], row[_tp.B], row[_tp.C]) if v != -1], at
    p += 1 + int(aux_words(aux, p, 1, "a host op")[0])
    nin = int(aux_words(aux, p, 1, "a host op")[0])
    p += 1
    if nin != len(slots) or any(not 0 <= s < e for s in slots):
        raise EntryError("%d inputs described for the input slots %s" % (nin, slots))
    for s in slots + [e]:
        nd = int(aux_words(aux, p, 1, "a host op")[0])
        shape = [int(v) for v in aux_words(aux, p + 1, nd, "a host op")] if 0 <= nd <= 64 else [-1]
        if min(shape, default=0) < 0 or int(np.prod(shape, dtype=object)) != ints[s, _tp.SIZE]:
            raise EntryError("slot %d of %d elements described as of shape %s" % (s, ints[s, _tp.SIZE], shape))
        p += 1 + nd


register_family(HOST, FamilyRules(differentiable_reverse, replay_rule, expands_adjoint=True,
                                  scalar_replay=frozenset(), compiled_forward=_compiled_forward,
                                  tangent=tangent, batched_reverse=batched_reverse, curvature=curvature,
                                  array_reverse=array_reverse, check_entries=check_entries))
