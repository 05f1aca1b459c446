"""``tg.func``: PyTorch's ``torch.func`` transforms ``grad``, ``grad_and_value``, ``vjp``,
``jvp``, ``jacrev``, ``jacfwd`` and ``hessian``, with its signatures (``argnums``,
``has_aux``).

Each transform runs ``func`` on fresh inputs and differentiates with
``tg.autograd.grad``.  Transforms compose (``grad(grad(f))``, ``jacfwd(jacrev(f))``):
an input that already requires grad, as the inputs an outer transform makes do, is
differentiated through an identity view of it with ``create_graph=True``, so the
result stays differentiable for the outer transform.

``vmap`` (in ``tapegrad._vmap``) maps a function over a dimension by calling it once
per index.

Differences from PyTorch: ``jacfwd`` and ``jvp`` compute with
reverse sweeps (the Jacobian row by row, and ``jvp`` by the double-backward trick),
with the same values; arguments named by ``argnums`` are tensors (a tuple of tensors
counts as several), and outputs are a tensor or a tuple of tensors.
"""
import numpy as np

from . import functions as F
from .autograd import functional as _functional
from .autograd.api import grad_op_by_op as _grad
from .autograd.grad_mode import enable_grad
from .core.tensor import Tensor
from ._vmap import vmap  # noqa: F401

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap"]


def _argnums(argnums, nargs, api):
    if isinstance(argnums, bool) or not isinstance(argnums, (int, tuple)):
        raise RuntimeError("%s: argnums must be int or Tuple[int, ...], got: %s" % (api, type(argnums)))
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not nums:
        raise RuntimeError("%s: argnums must be non-empty" % api)
    for n in nums:
        if not isinstance(n, int) or isinstance(n, bool):
            raise RuntimeError("%s: argnums must be int or Tuple[int, ...], got: %s" % (api, type(n)))
        if not -nargs <= n < nargs:
            raise RuntimeError("Got argnum=%d, but only %d positional inputs" % (n, nargs))
    return tuple(n % nargs for n in nums)


def _fresh(x, api):
    """A tensor to differentiate with respect to, and whether a graph must be kept
    (``x`` already takes part in one, an outer transform's)."""
    if not isinstance(x, Tensor):
        raise RuntimeError("%s: Expected inputs to be Tensors, got %s" % (api, type(x).__name__))
    if x.dtype.kind != "f" and not x.is_complex():
        raise RuntimeError("%s: only Tensors of floating point dtype can require gradients" % api)
    if x.requires_grad:
        return x.view(x.shape), True
    return x.detach().requires_grad_(True), False


def _prepare(args, nums, api):
    """The arguments with fresh tensors at ``nums`` (a tuple argument: each of its
    tensors), the fresh tensors grouped per argnum, and whether a graph is kept."""
    args = list(args)
    groups, keep = [], False
    for n in nums:
        a = args[n]
        if isinstance(a, (tuple, list)):
            fresh = []
            for t in a:
                f, k = _fresh(t, api)
                fresh.append(f)
                keep = keep or k
            args[n] = type(a)(fresh)
            groups.append(tuple(fresh))
        else:
            f, k = _fresh(a, api)
            args[n] = f
            groups.append(f)
            keep = keep or k
    return args, groups, keep


def _flat(groups):
    out = []
    for g in groups:
        out.extend(g if isinstance(g, tuple) else [g])
    return out


def _regroup(flat, groups, single):
    res, i = [], 0
    for g in groups:
        if isinstance(g, tuple):
            res.append(tuple(flat[i:i + len(g)]))
            i += len(g)
        else:
            res.append(flat[i])
            i += 1
    return res[0] if single else tuple(res)


def _split_aux(out, has_aux, api):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError("%s(f, ...)(*args): output of function f should be a tuple: (output, aux) if has_aux "
                           "is True" % api)
    return out


def _like(out, items):
    """``items`` as a tuple of ``out``'s type: a named tuple (slogdet's) keeps its fields,
    as torch.func's results do."""
    return type(out)(*items) if hasattr(out, "_fields") else tuple(items)


def _detach_all(x):
    if isinstance(x, Tensor):
        return x.detach()
    if isinstance(x, tuple):
        return _like(x, [_detach_all(v) for v in x])
    if isinstance(x, list):
        return [_detach_all(v) for v in x]
    if isinstance(x, dict):
        return {k: _detach_all(v) for k, v in x.items()}
    return x


def _zeros_for(t):
    return Tensor._const(np.zeros(t.shape, t.dtype)) if not t.is_complex() else t.detach() * 0


def _grads(out, inputs, grad_outputs, keep, retain=None):
    """Gradients of ``out`` with respect to ``inputs`` (zeros where it does not depend
    on one), differentiable when ``keep``."""
    if not out.requires_grad:
        return [_zeros_for(x) for x in inputs]
    gs = _grad(out, inputs, grad_outputs=grad_outputs, create_graph=keep,
               retain_graph=True if retain is None else retain, allow_unused=True)
    return [(_zeros_for(x) if g is None else g) for g, x in zip(gs, inputs)]


# -- grad ------------------------------------------------------------------------------------------
def grad_and_value(func, argnums=0, has_aux=False):
    """``func``'s gradient with respect to the arguments ``argnums`` and its value:
    ``(grad, value)``, or ``(grad, (value, aux))`` with ``has_aux``."""
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), "grad_and_value(f)(*args)")
        with enable_grad():
            args2, groups, keep = _prepare(args, nums, "grad_and_value(f)(*args)")
            out, aux = _split_aux(func(*args2, **kwargs), has_aux, "grad_and_value")
            if not isinstance(out, Tensor):
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got %s"
                                   % type(out).__name__)
            if out.ndim != 0:
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   "tensor with %d dims. Maybe you wanted to use the vjp or jacrev APIs instead?"
                                   % out.ndim)
            flat = _grads(out, _flat(groups), None, keep)
        g = _regroup(flat, groups, isinstance(argnums, int))
        if not keep:
            g, out, aux = _detach_all(g), out.detach(), _detach_all(aux)
        return (g, (out, aux)) if has_aux else (g, out)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of scalar ``func`` with respect to the arguments ``argnums``
    (``(grad, aux)`` with ``has_aux``)."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


# -- vjp, jvp --------------------------------------------------------------------------------------
def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)``: ``vjp_fn(cotangents)`` is the tuple of
    cotangent-Jacobian products, one per primal (``(output, vjp_fn, aux)`` with ``has_aux``)."""
    with enable_grad():
        args, groups, keep = _prepare(primals, tuple(range(len(primals))), "vjp(f, *primals)")
        out, aux = _split_aux(func(*args), has_aux, "vjp")
    outs = out if isinstance(out, tuple) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise RuntimeError("vjp(f, *primals): Expected f to be a function that has a Tensor or a tuple of "
                               "Tensors as output, got %s" % type(o).__name__)

    def vjp_fn(*cotangents):
        cts = cotangents[0] if len(cotangents) == 1 and isinstance(out, tuple) else cotangents
        cts = tuple(cts) if isinstance(cts, (tuple, list)) else (cts,)
        if len(cts) != len(outs):
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               "outputs to the function")
        for c, o in zip(cts, outs):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError("Mismatch in shape: grad_output[0] has a shape of torch.Size(%s) and output[0] "
                                   "has a shape of torch.Size(%s)." % (list(c.shape), list(o.shape)))
        pairs = [(o, c) for o, c in zip(outs, cts) if o.requires_grad]
        flat_in = _flat(groups)
        if not pairs:
            flat = [_zeros_for(x) for x in flat_in]
        else:
            with enable_grad():
                gs = _grad([o for o, _ in pairs], flat_in, grad_outputs=[c for _, c in pairs], create_graph=keep,
                           retain_graph=True, allow_unused=True)
            flat = [(_zeros_for(x) if g is None else g) for g, x in zip(gs, flat_in)]
        res = _regroup(flat, groups, False)
        return res if keep else _detach_all(res)
    primal_out = out if keep else _detach_all(out)
    return (primal_out, vjp_fn, aux if keep else _detach_all(aux)) if has_aux else (primal_out, vjp_fn)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(func(*primals), J tangents)`` (``(output, jvp_out, aux)`` with ``has_aux``): one
    tangent pass over the tape outside other transforms, else the double-backward trick."""
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid "
                           "to call f(*primals).")
    if not isinstance(tangents, tuple) or len(tangents) != len(primals):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, tangents also must be. "
                           "Got primals with structure %s and tangents with structure %s"
                           % (type(primals).__name__, type(tangents).__name__))
    for p, t in zip(primals, tangents):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same shape "
                               "at each index, got %s and %s" % (list(p.shape), list(t.shape)))
    with enable_grad():
        args, groups, keep = _prepare(primals, tuple(range(len(primals))), "jvp(f, primals, tangents)")
        out, aux = _split_aux(func(*args), has_aux, "jvp")
        outs = out if isinstance(out, tuple) else (out,)
        flat_in = _flat(groups)
        res = None
        if not keep and not strict:     # (nothing to differentiate through: forward mode on the tape)
            res = _functional._on_tape(_functional._jvp_on_tape, tuple(flat_in), outs, tangents)
        if res is not None:
            res = list(res)
            outs = ()
        else:
            res = []
        for o in outs:
            if not o.requires_grad:
                res.append(_zeros_for(o))
                continue
            u = (o.detach() * 0).requires_grad_(True)       # the dummy cotangent, differentiated
            gs = _grad(o, flat_in, grad_outputs=u, create_graph=True, retain_graph=True, allow_unused=True)
            pairs = [(g, t) for g, t in zip(gs, tangents) if g is not None and g.requires_grad]
            if not pairs:
                res.append(_zeros_for(o))
                continue
            (j,) = _grad([g for g, _ in pairs], u, grad_outputs=[t for _, t in pairs], create_graph=keep,
                         retain_graph=True, allow_unused=True)
            res.append(_zeros_for(o) if j is None else j)
    jv = _like(out, res) if isinstance(out, tuple) else res[0]
    if not keep:
        out, jv, aux = _detach_all(out), _detach_all(jv), _detach_all(aux)
    return (out, jv, aux) if has_aux else (out, jv)


# -- Jacobians and the Hessian -----------------------------------------------------------------------
def _jacobian(func, argnums, has_aux, api, forward=False):
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), api)
        with enable_grad():
            args2, groups, keep = _prepare(args, nums, api)
            out, aux = _split_aux(func(*args2, **kwargs), has_aux, api.split("(")[0])
            outs = out if isinstance(out, tuple) else (out,)
            flat_in = _flat(groups)
            per_out = []
            for o in outs:
                if not isinstance(o, Tensor):
                    raise RuntimeError("%s: Expected f to return a Tensor or a tuple of Tensors, got %s"
                                       % (api, type(o).__name__))
            blocks = None
            if not keep:        # (nothing to differentiate through: one pass over the tape)
                blocks = _functional._on_tape(_functional._jacobian_on_tape, tuple(flat_in), outs, forward)
            for o_index, o in enumerate(outs):
                if blocks is not None:
                    per_out.append(_regroup(list(blocks[o_index]), groups, isinstance(argnums, int)))
                    continue
                rows = []
                flat_o = o.reshape(-1)
                for k in range(flat_o.shape[0]):
                    rows.append(_grads(flat_o[k], flat_in, None, keep))
                jac = []
                for i, x in enumerate(flat_in):
                    if rows:
                        j = F.stack([r[i] for r in rows], 0)
                    else:
                        j = Tensor._const(np.zeros((0,) + tuple(x.shape), x.dtype))
                    jac.append(j.reshape(tuple(o.shape) + tuple(x.shape)))
                per_out.append(_regroup(jac, groups, isinstance(argnums, int)))
        res = _like(out, per_out) if isinstance(out, tuple) else per_out[0]
        if not keep:
            res, aux = _detach_all(res), _detach_all(aux)
        return (res, aux) if has_aux else res
    return wrapper


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """The Jacobian of ``func`` with respect to the arguments ``argnums``, shaped
    ``output.shape + input.shape``: outside other transforms every output row pulled back
    in one pass over the tape, inside one a reverse sweep per output element."""
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    return _jacobian(func, argnums, has_aux, "jacrev(f, argnums)(*args)")


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of ``func``: outside other transforms, every input direction pushed
    forward in one pass over the tape; inside one (a result to differentiate again),
    by reverse sweeps with the same values."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or 'same'. Got %s"
                           % randomness)
    return _jacobian(func, argnums, has_aux, "jacfwd(f, argnums)(*args)", forward=True)


def hessian(func, argnums=0):
    """The Hessian of ``func`` with respect to the arguments ``argnums``:
    ``jacfwd(jacrev(func, argnums), argnums)``."""
    return jacfwd(jacrev(func, argnums), argnums)
