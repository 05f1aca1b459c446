"""``backward`` and ``grad``: PyTorch's argument handling (``_make_grads``), then one
backward pass, compiled (``engine``) or differentiable (``differentiable``:
``create_graph=True``, and anomaly mode)."""
import warnings

import numpy as np

from ..core import tape as _tp
from ..core.tensor import Tensor, from_data
from . import differentiable, engine, walk


def _as_tuple(tensors):
    if tensors is None:
        return None
    if isinstance(tensors, Tensor):
        return (tensors,)
    return tuple(tensors)       # an int or float raises "'int' object is not iterable", as in PyTorch


def _pairs(tensors):
    """Complex tensors (``complex_tensor.ComplexTensor``, marked ``_PAIR``) as their
    real (..., 2) pair tensors, on which the tape differentiates them."""
    if tensors is None or not any(getattr(t, "_PAIR", False) for t in tensors):
        return tensors
    return tuple(t._r if getattr(t, "_PAIR", False) else t for t in tensors)


def _make_grads(outputs, grads):
    """Validate the user's gradients; implicit ones only for single-element outputs."""
    new = []
    for i, (out, g) in enumerate(zip(outputs, grads)):   # types first, then the count (PyTorch's order)
        if not isinstance(out, Tensor):
            raise AssertionError("Expected output to be a torch.Tensor")     # (PyTorch's _make_grads asserts)
        if isinstance(g, Tensor):
            if g.shape != out.shape:
                raise RuntimeError("Mismatch in shape: grad_output[%d] has a shape of torch.Size(%s) and "
                                   "output[%d] has a shape of torch.Size(%s)."
                                   % (i, list(g.shape), i, list(out.shape)))
            new.append(np.asarray(g._data, dtype=np.float64))
        elif g is None:
            if out.requires_grad:
                if out.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                new.append(np.ones(out.shape))
            else:
                new.append(None)
        else:
            raise TypeError("gradients can be either Tensors or None, but got " + type(g).__name__)
    if len(grads) != len(outputs):
        raise RuntimeError("got %d tensors and %d gradients" % (len(outputs), len(grads)))
    return new


def _check_roots(tensors):
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError("backward() expects Tensors, got %s" % type(t).__name__)
        if not t.requires_grad:
            raise RuntimeError("element %d of tensors does not require grad and does not have a grad_fn" % i)


def _run(roots, grads, given, retain_graph, targets, accumulate, graph, record):
    """One backward from ``roots`` (``grads``: their validated seed arrays; ``given``:
    the user's gradients, which the differentiable pass differentiates through).
    Returns ({id(target): gradient}, [(leaf root, its own seed)]): a root that is a
    leaf gets its seed directly, merged here into the targets' gradients."""
    if graph:
        grads = differentiable.graph_seeds(roots, given)
    seeds, leaf_seeds = [], []
    for t, g in zip(roots, grads):
        if g is not None:
            (seeds if t._tape is not None else leaf_seeds).append((t, g))
    if graph:
        res = differentiable.run_backward(seeds, retain_graph, targets, accumulate, record,
                                          _tp.anomaly[0] and _tp.anomaly[1]) if seeds else {}
        leaf_seeds = [(t, differentiable.as_shape(g, t.shape)) for t, g in leaf_seeds]
    else:
        res = engine.run_backward(seeds, retain_graph, targets, accumulate) if seeds else {}
    if targets is not None:
        for t, g in leaf_seeds:
            if any(t is i for i in targets):
                prev = res.get(id(t))
                res[id(t)] = g if prev is None else prev + g
    return res, leaf_seeds


def _into_grad(t, g):
    walk.accumulate_array(t, g, False)


def _unrecorded(t, g):
    """A flat gradient tensor into a leaf's ``.grad`` in place (anomaly mode without
    create_graph: as the compiled path)."""
    walk.accumulate_array(t, g._data.reshape(-1), False)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    """Accumulate into ``.grad`` the sum over roots of (gradient . d root / d leaf)."""
    if grad_variables is not None:
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.", FutureWarning, stacklevel=2)
        if grad_tensors is None:
            grad_tensors = grad_variables
        else:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                               "`backward()`. Please only use `grad_tensors`.")
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if len(inputs) == 0:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        for t in inputs:
            if not t.requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    inputs = _pairs(inputs)
    tensors = _as_tuple(tensors)
    given = _as_tuple(grad_tensors) if grad_tensors is not None else (None,) * len(tensors)
    _no_implicit_complex(tensors, given)
    tensors, given = _pairs(tensors), _pairs(given)
    grads = _make_grads(tensors, given)
    _check_roots(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph:
        differentiable.warn_reference_cycle()
    graph = create_graph or _tp.anomaly[0]
    res, leaf_seeds = _run(tensors, grads, given, retain_graph, inputs, True, graph, create_graph)
    if not graph:
        to_leaf = _into_grad
    else:
        to_leaf = differentiable.accumulate_grad if create_graph else _unrecorded
    if inputs is None:
        for t, g in leaf_seeds:
            to_leaf(t, g)
        return None
    for t in {id(t): t for t in inputs}.values():
        g = res.get(id(t))
        if g is None:
            continue
        if t._tape is None:
            to_leaf(t, g)
            continue
        x = t._extras()
        x.retains = True            # a non-leaf named in inputs= shows its .grad
        if graph:
            x.grad = g if x.grad is None else x.grad + g
        else:
            gt = np.array(g, dtype=t.dtype).reshape(t.shape)
            if x.grad is None:
                x.grad = Tensor._wrap(gt)
            else:
                x.grad._data += gt
    return None


# ``grad_entry.attempt``, registered by that module: create_graph gradients of a scalar
# as one entry each (None: only the op-by-op path)
FUSED_GRAD = [None]


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of ``outputs`` with respect to ``inputs``, returned as a tuple;
    ``.grad`` is left untouched."""
    return _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused,
                 is_grads_batched, materialize_grads, True)


def grad_op_by_op(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
                  allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``grad`` whose ``create_graph`` gradients are always recorded op by op (``differentiable``)."""
    return _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused,
                 is_grads_batched, materialize_grads, False)


def _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused, is_grads_batched,
          materialize_grads, fuse):
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
                      "gradient for other parts of the graph, please use torch.autograd.backward.",
                      FutureWarning, stacklevel=2)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True is not supported by tapegrad")
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    complex_inputs = inputs
    inputs = _pairs(inputs)
    for t in inputs:
        if not isinstance(t, Tensor):
            raise RuntimeError("all inputs have to be Tensors or GradientEdges, but got %s" % type(t).__name__)
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    given = _as_tuple(grad_outputs) if grad_outputs is not None else (None,) * len(outputs)
    _no_implicit_complex(outputs, given)
    outputs, given = _pairs(outputs), _pairs(given)
    if retain_graph is None:
        retain_graph = create_graph
    graph = create_graph or _tp.anomaly[0]
    # (an attempt takes one scalar output on a tape and no given gradient: the checks
    # below cannot fail for it, and run only on the op-by-op path)
    attempt = FUSED_GRAD[0](outputs, inputs, given, retain_graph) if fuse and create_graph and FUSED_GRAD[0] else None
    res = attempt.fused() if attempt is not None else None
    if res is None:
        grads = _make_grads(outputs, given)
        _check_roots(outputs)
        res, _ = _run(outputs, grads, given, retain_graph, inputs, False, graph, create_graph)
        if attempt is not None:
            attempt.observe(res)
    if complex_inputs is not inputs:
        return tuple(g if g is None or not getattr(t, "_PAIR", False) else type(t)._from_pair(g)
                     for t, g in zip(complex_inputs, _grads_of(inputs, res, materialize_grads, allow_unused,
                                                               graph, create_graph)))
    return _grads_of(inputs, res, materialize_grads, allow_unused, graph, create_graph)


def _no_implicit_complex(outputs, given):
    for t, g in zip(outputs, given):
        if g is None and getattr(t, "_PAIR", False):
            raise RuntimeError("grad can be implicitly created only for real scalar outputs")


def _grads_of(inputs, res, materialize_grads, allow_unused, graph, create_graph):
    out = []
    for i, t in enumerate(inputs):
        g = res.get(id(t))
        if g is None:
            if materialize_grads:       # (with create_graph, PyTorch's zeros take part in the new graph)
                z = np.zeros(t.shape, t.dtype)
                out.append(from_data(z, requires_grad=create_graph) if graph else Tensor._wrap(z))
                continue
            if not allow_unused:
                raise RuntimeError("The differentiated Tensor at index %d appears to not have been used in the "
                                   "graph. Set allow_unused=True if this is the desired behavior." % i)
            out.append(None)
        elif graph:
            out.append(g)
        else:
            out.append(Tensor._wrap(np.array(g, dtype=t.dtype).reshape(t.shape)))
    return tuple(out)
