"""backward, grad and gradcheck with PyTorch's argument handling (``_make_grads``)."""
import warnings

import numpy as np

from ..tensor import Tensor, from_data
from .. import tape as _tp
from . import differentiable, engine
from .anomaly import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly  # noqa
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from . import functional  # noqa: F401,E402


def _as_tuple(tensors):
    if tensors is None:
        return None
    if isinstance(tensors, Tensor):
        return (tensors,)
    return tuple(tensors)       # an int or float raises "'int' object is not iterable", as in PyTorch


def _make_grads(outputs, grads):
    """Validate the user's gradients; implicit ones only for single-element outputs."""
    new = []
    for i, (out, g) in enumerate(zip(outputs, grads)):   # types first, then the count (PyTorch's order)
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


def _split_roots(tensors, grads):
    """Seeds for recorded roots, and gradients that go straight to leaf roots."""
    seeds, leaf_seeds = [], []
    for t, g in zip(tensors, grads):
        if g is None:
            continue
        (seeds if t._tape is not None else leaf_seeds).append((t, g))
    return seeds, leaf_seeds


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
    tensors = _as_tuple(tensors)
    given = _as_tuple(grad_tensors) if grad_tensors is not None else (None,) * len(tensors)
    grads = _make_grads(tensors, given)
    _check_roots(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph:
        differentiable.warn_reference_cycle()
    if create_graph or _tp.anomaly[0]:
        return _backward_graph(tensors, given, retain_graph, inputs, create_graph)
    seeds, leaf_seeds = _split_roots(tensors, grads)
    if inputs is None:
        if seeds:
            engine.run_backward(seeds, retain_graph)
        for t, g in leaf_seeds:
            engine._accumulate(t, g, False)
        return None
    res = engine.run_backward(seeds, retain_graph, targets=inputs) if seeds else {}
    for t, g in leaf_seeds:
        if any(t is i for i in inputs):
            prev = res.get(id(t))
            res[id(t)] = g if prev is None else prev + g
    for t in {id(t): t for t in inputs}.values():
        g = res.get(id(t))
        if g is None:
            continue
        if t._tape is None:
            engine._accumulate(t, np.asarray(g), False)
        else:
            x = t._extra()
            x.retains = True            # a non-leaf named in inputs= shows its .grad
            gt = np.array(g, dtype=t.dtype).reshape(t.shape)
            if x.grad is None:
                x.grad = Tensor._wrap(gt)
            else:
                x.grad._data += gt
    return None


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of ``outputs`` with respect to ``inputs``, returned as a tuple;
    ``.grad`` is left untouched."""
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
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError("grad() expects Tensors as inputs, got %s" % type(t).__name__)
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    given = _as_tuple(grad_outputs) if grad_outputs is not None else (None,) * len(outputs)
    grads = _make_grads(outputs, given)
    _check_roots(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph or _tp.anomaly[0]:
        return _grad_graph(outputs, inputs, given, retain_graph, allow_unused, materialize_grads, create_graph)
    seeds, leaf_seeds = _split_roots(outputs, grads)
    res = engine.run_backward(seeds, retain_graph, targets=inputs, accumulate=False) if seeds else {}
    for t, g in leaf_seeds:
        if any(t is i for i in inputs):
            prev = res.get(id(t))
            res[id(t)] = g.reshape(t.shape) if prev is None else prev + g.reshape(t.shape)
    out = []
    for i, t in enumerate(inputs):
        g = res.get(id(t))
        if g is None:
            if materialize_grads:
                out.append(Tensor._wrap(np.zeros(t.shape, t.dtype)))
                continue
            if not allow_unused:
                raise RuntimeError("The differentiated Tensor at index %d appears to not have been used in the "
                                   "graph. Set allow_unused=True if this is the desired behavior." % i)
            out.append(None)
        else:
            out.append(Tensor._wrap(np.array(g, dtype=t.dtype).reshape(t.shape)))
    return tuple(out)


# -- create_graph=True: the same, through the differentiable reverse ----------------------
def _graph_results(roots, given, retain_graph, targets, accumulate, record):
    seeds, leaf_seeds = _split_roots(roots, differentiable.graph_seeds(roots, given))
    res = differentiable.run_backward(seeds, retain_graph, targets, accumulate, record,
                                      _tp.anomaly[0] and _tp.anomaly[1]) if seeds else {}
    return res, leaf_seeds


def _backward_graph(tensors, given, retain_graph, inputs, record):
    res, leaf_seeds = _graph_results(tensors, given, retain_graph, inputs, True, record)
    if record:
        accumulate = differentiable.accumulate_grad
    else:       # anomaly mode without create_graph: in place, as the compiled path
        def accumulate(t, g):
            engine._accumulate(t, g._data.reshape(-1), False)
    if inputs is None:
        for t, g in leaf_seeds:
            accumulate(t, g)
        return None
    for t, g in leaf_seeds:
        if any(t is i for i in inputs):
            g = differentiable.as_shape(g, t.shape)
            prev = res.get(id(t))
            res[id(t)] = g if prev is None else prev + g
    for t in {id(t): t for t in inputs}.values():
        g = res.get(id(t))
        if g is None:
            continue
        if t._tape is None:
            accumulate(t, g)
        else:
            x = t._extra()
            x.retains = True
            x.grad = g if x.grad is None else x.grad + g
    return None


def _grad_graph(outputs, inputs, given, retain_graph, allow_unused, materialize_grads, record):
    res, leaf_seeds = _graph_results(outputs, given, retain_graph, inputs, False, record)
    for t, g in leaf_seeds:
        if any(t is i for i in inputs):
            g = differentiable.as_shape(g, t.shape)
            prev = res.get(id(t))
            res[id(t)] = g if prev is None else prev + g
    out = []
    for i, t in enumerate(inputs):
        g = res.get(id(t))
        if g is None:
            if materialize_grads:       # PyTorch's zeros take part in the new graph
                out.append(from_data(np.zeros(t.shape, t.dtype), requires_grad=record))
                continue
            if not allow_unused:
                raise RuntimeError("The differentiated Tensor at index %d appears to not have been used in the "
                                   "graph. Set allow_unused=True if this is the desired behavior." % i)
            out.append(None)
        else:
            out.append(g)
    return tuple(out)
