"""Higher-level differentiation: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``, ``vhp``.

The equivalent of ``torch.autograd.functional``, with the same signatures,
defaults, return structures and error messages, built only on
``tapegrad.autograd.grad`` (``create_graph=True`` where a second derivative is
needed) and ordinary tensor operations.

Structure rules (as in PyTorch): ``inputs`` is a Tensor or a tuple of Tensors
and ``func`` returns a Tensor or a tuple of Tensors; every result mirrors
whether the inputs / outputs were tuples.  Results are detached unless
``create_graph=True``.

Without ``create_graph``, ``jvp``, ``hvp``, ``vhp``, ``jacobian`` and ``hessian``
differentiate the tape ``func`` recorded in one or two passes over it, K
directions at a time (``autograd.tangent``: forward mode, and forward over reverse
for second derivatives).  A tape they cannot walk that way (an op without a
forward-mode rule, a tape spanning several tapes, hooks) is differentiated the
reverse-mode way PyTorch does it, with the same values; so is ``strict=True``
and ``create_graph=True`` (the result is then differentiable).

Differences from PyTorch:

* ``vectorize=True`` is accepted; both settings compute the same values.
* ``strategy="forward-mode"`` pushes the input directions forward, the default
  pulls the output rows back; both give the same Jacobian.
* ``vhp`` and ``hvp`` both compute ``H v`` by forward over reverse; they agree
  wherever ``func`` is twice continuously differentiable (PyTorch's note).
"""
import numpy as np

from ..core import tape as _tp
from ..ops.shape import stack
from ..core.tensor import Tensor
from . import tangent as _tangent
from . import tangent_program as _program
from . import walk as _walk
from .api import grad_op_by_op as grad
from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _zeros(shape, dtype, requires_grad=False):
    """``tg.zeros`` (the package's creation functions sit a floor above this one)."""
    out = Tensor._const(np.zeros(shape, dtype))
    if requires_grad:
        out._set_requires_grad(True, creation=True)
    return out


def _zeros_like(x, requires_grad=False):
    return _zeros(x.shape, x.dtype, requires_grad)


# -- structure handling --------------------------------------------------------------------
def _as_tuple(inp, arg_name, fn_name):
    """(was it a tuple, the tuple of Tensors); PyTorch's type errors otherwise."""
    is_inp_tuple = True
    if not isinstance(inp, tuple):
        inp = (inp,)
        is_inp_tuple = False
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            if is_inp_tuple:
                raise TypeError(
                    f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the"
                    f" value at index {i} has type {type(el)}.")
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the"
                f" given {arg_name} has type {type(el)}.")
    return is_inp_tuple, inp


def _tuple_postprocess(res, to_unpack):
    """Undo ``_as_tuple``: ``to_unpack`` is one flag, or (outer, inner) for nested results."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _size(shape):
    return f"torch.Size({list(shape)})"


def _grad_preprocess(inputs, create_graph, need_graph):
    """Fresh tensor objects for the inputs, so that the function's own captures of
    the same tensors are not confused with the arguments (PyTorch issue 32576)."""
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.reshape(inp.shape))     # a differentiable shallow copy, like view_as
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs, create_graph):
    """Detach the results (recursively for nested tuples) unless a graph was asked for."""
    if isinstance(inputs[0], Tensor):
        return inputs if create_graph else tuple(inp.detach() for inp in inputs)
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.shape != el_other.shape:
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {_size(el_other.shape)} "
                               f"but got {_size(el_v.shape)}.")


def _check_requires_grad(inputs, input_type, strict):
    """In strict mode, PyTorch's errors for results that do not depend on the inputs."""
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:     # only reachable for grad_inputs
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}."
                               " This is not allowed in strict mode.")
        if inp.requires_grad:
            continue
        if input_type == "hessian":
            raise RuntimeError(
                f"The hessian of the user-provided function with respect to input {i}"
                " is independent of the input. This is not allowed in strict mode."
                " You should ensure that your function is thrice differentiable and that"
                " the hessian depends on the inputs.")
        if input_type == "jacobian":
            raise RuntimeError(
                "While computing the hessian, found that the jacobian of the user-provided"
                f" function with respect to input {i} is independent of the input. This is not"
                " allowed in strict mode. You should ensure that your function is twice"
                " differentiable and that the jacobian depends on the inputs (this would be"
                " violated by a linear function for example).")
        if input_type == "grad_inputs":
            raise RuntimeError(
                f"The gradient with respect to input {i} is independent of the inputs of the"
                " user-provided function. This is not allowed in strict mode.")
        raise RuntimeError(
            f"Output {i} of the user-provided function does not require gradients."
            " The outputs must be computed in a differentiable manner from the input"
            " when running in strict mode.")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """``autograd.grad`` that skips outputs which are None or do not require grad,
    and returns None for every input when nothing is differentiable."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs, new_grad_outputs = (), ()
    for out, grad_out in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs += (out,)
            new_grad_outputs += (grad_out,)
    if not new_outputs:
        return (None,) * len(inputs)
    return grad(new_outputs, inputs, new_grad_outputs, allow_unused=True,
                create_graph=create_graph, retain_graph=retain_graph)


_FILL_ERRORS = {
    "back": "The output of the user-provided function is independent of input {i}. "
            "This is not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs "
                  "when using the double backward trick to compute forward mode gradients. "
                  "This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the "
                         "grad_jacobian. This is not allowed in strict mode as it prevents from using the "
                         "double backward trick to replace forward mode AD.",
}


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    """Replace None gradients by zeros shaped like ``refs``, or raise in strict mode."""
    res = ()
    for i, grads_i in enumerate(grads):
        if grads_i is None:
            if strict:
                raise RuntimeError(_FILL_ERRORS[stage].format(i=i))
            grads_i = _zeros_like(refs[i])
        elif strict and create_graph and not grads_i.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of input {i}. "
                               "This is not allowed in strict mode when create_graph=True.")
        res += (grads_i,)
    return res


# -- the tape walked directly (autograd.tangent) -----------------------------------------
class _Tape:
    """The tape ``func`` recorded, as ``autograd.tangent`` walks it: the slots of the
    inputs and outputs (``of`` gives None when the fast path cannot be taken; the
    reverse-mode path then computes the same values)."""
    __slots__ = ("T", "ins", "outs", "hi")

    @staticmethod
    def of(inputs, outputs):
        T = None
        for out in outputs:
            if out._tape is not None:
                if T is not None and out._tape is not T:
                    return None
                T = out._tape
        ins = []
        for x in inputs:
            s = None if T is None else _tangent.leaf_slot(T, x)
            if s is not None and s < 0:
                return None     # several slots (Tape.leaf_slot)
            if s is None and x._tape_id & _tp.SERIAL_MASK and (T is None or x._tape_id != T.id):
                return None     # used on another tape
            ins.append(s)
        if T is not None:
            lo = min([s for s in ins if s is not None] + [T.n])
            if any(s >= lo for s in T.hooks) or _imports(T, inputs):
                return None     # (hooks run in a backward; an older tape may hold work on the inputs)
        outs = []
        for out in outputs:
            if T is not None and out._tape is T:
                outs.append(("slot", out._slot))
            elif any(out is x for x in inputs):
                outs.append(("input", next(i for i, x in enumerate(inputs) if out is x)))
            elif out.requires_grad:
                return None     # (a view of an input not yet on the tape...)
            else:
                outs.append(("const", None))
        if T is not None and _tp.inplace_counter[0] != T.inplace_mark:
            _check_saved(T, inputs, outs)
        self = _Tape()
        self.T, self.ins, self.outs = T, ins, outs
        self.hi = max([s for kind, s in outs if kind == "slot"] + [-1])
        return self

    def tangents(self, seeds):
        """The tangent context for {input index: (K, n) directions}, or None when no
        output depends on a seeded input."""
        slots = {self.ins[i]: d for i, d in seeds.items() if self.ins[i] is not None}
        if not slots or self.hi < 0 or min(slots) > self.hi:
            return None
        return _tangent.tangents(self.T, slots, self.hi)


def _check_saved(T, inputs, outs):
    """Raise as a backward from the outputs to the inputs would (PyTorch's path raises
    there) when a value it needs was changed in place after an op saved it: the
    tangent walks and programs read the values the tape saved."""
    roots = {s: None for kind, s in outs if kind == "slot"}
    if roots:
        _walk.mark(T, T.arrays()[0], roots, {id(x): x for x in inputs}, False)


def _imports(T, inputs):
    """Whether ``T`` imports (EXT) a tensor from a tape, or a tape it imports from, on which
    one of ``inputs`` is a leaf: work on the inputs the tangent pass over ``T`` would not see."""
    ids = {id(x) for x in inputs}
    seen, todo = set(), [src for src, _ in T.ext.values()]
    while todo:
        U = todo.pop()
        if id(U) in seen:
            continue
        seen.add(id(U))
        if any(id(t) in ids for t in U.leaves.values()):
            return True
        todo.extend(src for src, _ in U.ext.values())
    return False


def _result(arr, shape, dtype):
    return Tensor._wrap(np.ascontiguousarray(arr).reshape(shape).astype(dtype, copy=False))


def _jvp_on_tape(inputs, outputs, v):
    tape = _Tape.of(inputs, outputs)
    if tape is None:
        return None
    if v is None:           # (a single one-element input: its direction is 1)
        v = (Tensor._wrap(np.ones(inputs[0].shape)),)
    directions = {i: vi._data.reshape(1, -1).astype(np.float64) for i, vi in enumerate(v)}
    slots = {tape.ins[i]: d for i, d in directions.items() if tape.ins[i] is not None}
    outs = sorted({s for kind, s in tape.outs if kind == "slot" and slots and s >= min(slots)})
    tans = _program.first_order(tape.T, slots, outs) if outs else None     # (compiled: None until ready)
    ctx = None if tans is not None else tape.tangents(directions)
    if ctx is not None:
        tans = ctx.tans
    res = ()
    for out, (kind, s) in zip(outputs, tape.outs):
        t = None
        if kind == "slot" and tans is not None:
            t = tans.get(s)
        elif kind == "input":
            t = v[s]._data
        res += (_result(np.zeros(out.shape) if t is None else t, out.shape, out.dtype),)
    return res


def _second_order(tape, out_slot, directions, K):
    """{input index: (1 + K, n) batch}: the gradient (row 0) and its derivatives
    along the K ``directions`` {input index: (K, n)} (rows 1..K), from one tangent
    pass and one forward-over-reverse pass; inputs nothing reached are left out."""
    slots = {tape.ins[i]: d for i, d in directions.items() if tape.ins[i] is not None}
    if slots and tape.hi >= 0:
        targets = [s for s in tape.ins if s is not None]
        got = _program.second_order(tape.T, slots, targets, out_slot)
        if got is not None:
            return {i: got[s] for i, s in enumerate(tape.ins) if s is not None}
    ctx = tape.tangents(directions)
    if ctx is None:
        return {}
    seed = np.zeros((1 + K, 1))
    seed[0] = 1.0
    targets = [s for s in tape.ins if s is not None]
    got = _tangent.reverse(ctx, {out_slot: seed}, targets, second=True)
    return {i: got[s] for i, s in enumerate(tape.ins) if s is not None and got.get(s) is not None}


def _hvp_on_tape(inputs, outputs, v):
    tape = _Tape.of(inputs, outputs)
    if tape is None or tape.outs[0][0] != "slot":
        return None
    got = _second_order(tape, tape.outs[0][1], {i: vi._data.reshape(1, -1).astype(np.float64)
                                                for i, vi in enumerate(v)}, 1)
    return tuple(_result(got[i][1] if i in got else np.zeros(x.shape), x.shape, x.dtype)
                 for i, x in enumerate(inputs))


def _hessian_on_tape(inputs, output):
    tape = _Tape.of(inputs, (output,))
    if tape is None or tape.outs[0][0] != "slot":
        return None
    sizes = [x.numel() for x in inputs]
    N = sum(sizes)
    off = np.cumsum([0] + sizes)
    eye = np.eye(N)
    got = _second_order(tape, tape.outs[0][1], {i: eye[:, off[i]:off[i + 1]] for i in range(len(inputs))
                                                if sizes[i]}, N)
    res = ()
    for i, xi in enumerate(inputs):
        row = ()
        for j, xj in enumerate(inputs):
            # rows off[j]..off[j+1] of input i's batch: grad_i's derivative along each element of x_j
            block = got[i][1 + off[j]:1 + off[j + 1]].T if i in got else np.zeros((sizes[i], sizes[j]))
            row += (_result(block, tuple(xi.shape) + tuple(xj.shape), xi.dtype),)
        res += (row,)
    return res


def _jacobian_on_tape(inputs, outputs, forward):
    tape = _Tape.of(inputs, outputs)
    if tape is None:
        return None
    sizes_in = [x.numel() for x in inputs]
    blocks = [[None] * len(inputs) for _ in outputs]   # blocks[o][i]: (out numel, in numel), None for zeros
    for o, (kind, s) in enumerate(tape.outs):
        if kind == "input":
            blocks[o][s] = np.eye(sizes_in[s])
    if forward:
        N = sum(sizes_in)
        off = np.cumsum([0] + sizes_in)
        eye = np.eye(N)
        ctx = tape.tangents({i: eye[:, off[i]:off[i + 1]] for i in range(len(inputs)) if sizes_in[i]})
        for o, (kind, s) in enumerate(tape.outs):
            t = ctx.tans.get(s) if kind == "slot" and ctx is not None else None
            if t is not None:
                for i in range(len(inputs)):
                    blocks[o][i] = t[off[i]:off[i + 1]].T
    else:
        targets = [s for s in tape.ins if s is not None]
        sizes_out = [out.numel() if kind == "slot" else 0 for out, (kind, _) in zip(outputs, tape.outs)]
        M = sum(sizes_out)
        off = np.cumsum([0] + sizes_out)
        eye = np.eye(M)
        seeds = {}
        for o, (kind, s) in enumerate(tape.outs):
            if kind == "slot" and sizes_out[o]:
                seeds[s] = seeds.get(s, 0) + eye[:, off[o]:off[o + 1]]
        if seeds and targets:
            got = _tangent.reverse(_tangent.TangentContext(tape.T, M), seeds, targets)
            for o in range(len(outputs)):
                if sizes_out[o]:
                    for i, si in enumerate(tape.ins):
                        d = got.get(si) if si is not None else None
                        if d is not None:
                            blocks[o][i] = d[off[o]:off[o + 1]]
    return tuple(tuple(_result(np.zeros((out.numel(), x.numel())) if blocks[o][i] is None else blocks[o][i],
                               tuple(out.shape) + tuple(x.shape), np.result_type(out.dtype, x.dtype))
                       for i, x in enumerate(inputs)) for o, out in enumerate(outputs))


def _on_tape(f, *args):
    """``f(*args)``, or None when the tape has an op without a forward-mode rule."""
    try:
        out = f(*args)
    except _tangent.NoForwardRule:
        return None
    _tp.rotate()        # (as after a backward: the next call records on a new, short tape)
    return out


# -- public API ----------------------------------------------------------------------------
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """Vector-Jacobian product ``v^T J`` of ``func`` at ``inputs``.

    ``v`` has the shape of ``func``'s output(s); it may be None only when the
    output is a single one-element Tensor.  Returns ``(func_output, vjp)``, the
    vjp shaped like the inputs.  ``strict=True`` raises when an input does not
    influence the outputs (otherwise its vjp is zeros).
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns "
                               "a single Tensor with a single element.")

    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")

    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """Jacobian-vector product ``J v`` of ``func`` at ``inputs``.

    ``v`` has the shape of the input(s); it may be None only when the input is a
    single one-element Tensor.  Returns ``(func_output, jvp)``, the jvp shaped
    like the outputs.  Computed by the double-backward trick: ``g(u) = u^T J`` is
    linear in a dummy cotangent ``u``, so the vjp of ``g`` with ``v`` is ``J v``.
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
        elif len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function "
                               "is a single Tensor with a single element.")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if not create_graph and not strict:
            result = _on_tape(_jvp_on_tape, inputs, outputs, v)
            if result is not None:
                outputs = _grad_postprocess(outputs, False)
                return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_outputs_tuple)
        # The vjp is linear in u, so u's value never reaches the result; zeros are
        # merely guaranteed free of inf/nan.
        grad_outputs = tuple(_zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)

    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")

    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_outputs_tuple)


def _check_strategy(strategy, hint):
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".' + hint)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """Jacobian of ``func`` at ``inputs``.

    A single input and output give one Tensor of shape ``out.shape + in.shape``;
    a tuple on one side gives a tuple of those; tuples on both sides give a tuple
    (per output) of tuples (per input).  ``strict=True`` raises when an output is
    independent of an input (otherwise that block is zeros).  ``vectorize`` is
    accepted (PyTorch's refusal of ``strict`` together with ``vectorize`` is kept).
    Without ``create_graph``, ``strategy="forward-mode"`` pushes every input
    direction forward in one pass over the tape and the default pulls every output
    row back in one pass; otherwise one reverse sweep per output element.
    """
    _check_strategy(strategy, ' Hint: If your function has more outputs than inputs, "forward-mode" tends to '
                              'be more performant. Otherwise, prefer to use "reverse-mode".')
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
        if not create_graph and not strict:
            jac = _on_tape(_jacobian_on_tape, inputs, outputs, strategy == "forward-mode")
            if jac is not None:
                return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))

        jac = ()
        for i, out in enumerate(outputs):
            rows = tuple([] for _ in inputs)     # rows[k]: d out.flat[j] / d inputs[k], for each j
            flat = out.reshape(-1)
            for j in range(out.numel()):
                vj = _autograd_grad((flat[j],), inputs, retain_graph=True, create_graph=create_graph)
                for k, (rows_k, vj_k, inp_k) in enumerate(zip(rows, vj, inputs)):
                    if vj_k is not None:
                        if strict and create_graph and not vj_k.requires_grad:
                            # PyTorch's message names the output index here
                            raise RuntimeError("The jacobian of the user-provided function is independent of "
                                               f"input {i}. This is not allowed in strict mode when "
                                               "create_graph=True.")
                        rows_k.append(vj_k)
                    else:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of "
                                               f"input {k}. This is not allowed in strict mode.")
                        rows_k.append(_zeros_like(inp_k))
            # an empty output has no rows to stack (PyTorch fails there): its block is empty zeros
            jac += (tuple(stack(rows_k, 0).reshape(tuple(out.shape) + tuple(inputs[k].shape)) if rows_k
                          else _zeros(tuple(out.shape) + tuple(inputs[k].shape), inputs[k].dtype)
                          for k, rows_k in enumerate(rows)),)

        jac = _grad_postprocess(jac, create_graph)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """Hessian of the scalar function ``func`` at ``inputs``: the Jacobian of its gradient.

    A single input gives a Tensor of shape ``in.shape + in.shape``; a tuple of
    inputs gives a tuple of tuples with ``H[i][j]`` of shape
    ``inputs[i].shape + inputs[j].shape``.  ``func`` must return a single
    one-element Tensor.  ``vectorize`` and ``outer_jacobian_strategy`` are accepted:
    without ``create_graph`` the Hessian comes from one tangent pass over the tape
    with every input direction and one forward-over-reverse pass.
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    _check_strategy(outer_jacobian_strategy, "")
    if not create_graph and not strict:
        with enable_grad():
            xs = _grad_preprocess(inputs, create_graph=False, need_graph=True)
            out = func(*xs)
            is_out_tuple, _ = _as_tuple(out, "outputs of the user-provided function", "hessian")
            if is_out_tuple or not isinstance(out, Tensor):
                raise RuntimeError("The function given to hessian should return a single Tensor")
            if out.numel() != 1:
                raise RuntimeError("The Tensor returned by the function given to hessian should contain a single "
                                   "element")
            res = _on_tape(_hessian_on_tape, xs, out)
        if res is not None:
            return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single "
                               "element")
        return out.squeeze()

    def jac_func(*inp):
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_function_setup(func, inputs, v, create_graph, strict, name):
    """Shared first half of ``vhp`` and ``hvp``: validated inputs, v, the scalar
    output and its gradient (with a graph, to be differentiated again)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    if v is not None:
        _, v = _as_tuple(v, "v", name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, inputs, is_inputs_tuple)
    elif len(inputs) != 1 or inputs[0].numel() != 1:
        raise RuntimeError("The vector v can only be None if the input to the user-provided function "
                           "is a single Tensor with a single element.")
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {name} should contain a single element")
    if not create_graph and not strict and v is not None:
        return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, None    # (the caller tries the tape first)
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def _hvp_from_tape(inputs, outputs, v, is_outputs_tuple, is_inputs_tuple):
    """``vhp``'s and ``hvp``'s result from the tape, or None (the reverse-mode path then)."""
    result = _on_tape(_hvp_on_tape, inputs, outputs, v)
    if result is None:
        return None
    outputs = _grad_postprocess(outputs, False)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """Vector-Hessian product ``v^T H`` of the scalar function ``func`` at ``inputs``.

    ``v`` has the shape of the input(s) (None only for a single one-element
    input).  Returns ``(func_output, vhp)``, the vhp shaped like the inputs.
    """
    with enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_function_setup(
            func, inputs, v, create_graph, strict, "vhp")
        if jac is None:
            done = _hvp_from_tape(inputs, outputs, v, is_outputs_tuple, is_inputs_tuple)
            if done is not None:
                return done
            jac = _autograd_grad(outputs, inputs, create_graph=True)

    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")

    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """Hessian-vector product ``H v`` of the scalar function ``func`` at ``inputs``.

    ``v`` has the shape of the input(s) (None only for a single one-element
    input).  Returns ``(func_output, hvp)``, the hvp shaped like the inputs.
    Uses the double-backward trick on the gradient, so it costs one more reverse
    sweep than ``vhp``; for a twice continuously differentiable ``func`` the two
    agree.
    """
    with enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_function_setup(
            func, inputs, v, create_graph, strict, "hvp")
        if jac is None:
            done = _hvp_from_tape(inputs, outputs, v, is_outputs_tuple, is_inputs_tuple)
            if done is not None:
                return done
            jac = _autograd_grad(outputs, inputs, create_graph=True)
        grad_jac = tuple(_zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)

    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")

    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)
