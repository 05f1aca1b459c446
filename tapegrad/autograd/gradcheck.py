"""Compare the reverse sweep with central finite differences."""
import numpy as np

from ..core.tensor import Tensor, from_data
from .api import grad
from .grad_mode import enable_grad, no_grad


class GradcheckError(RuntimeError):
    pass


def _outputs(fn, inputs):
    out = fn(*inputs)
    return (out,) if isinstance(out, Tensor) else tuple(out)


def _numerical(fn, inputs, i, eps):
    """d(outputs)/d(inputs[i]) as a list of (n_in, n_out_k) matrices, by central differences."""
    x = inputs[i]
    flat = x._data.reshape(-1)
    cols = []
    with no_grad():
        base = [o._data for o in _outputs(fn, inputs)]
        jac = [np.zeros((flat.size, b.size)) for b in base]
        for j in range(flat.size):
            orig = flat[j].item()
            flat[j] = orig + eps
            plus = [np.array(o._data, dtype=np.float64).reshape(-1) for o in _outputs(fn, inputs)]
            flat[j] = orig - eps
            minus = [np.array(o._data, dtype=np.float64).reshape(-1) for o in _outputs(fn, inputs)]
            flat[j] = orig
            for k in range(len(base)):
                jac[k][j] = (plus[k] - minus[k]) / (2 * eps)
    del cols
    return jac


def _analytical(fn, inputs, i):
    outs = _outputs(fn, inputs)
    x = inputs[i]
    jac = []
    for o in outs:
        J = np.zeros((x._data.size, o._data.size))
        if o.requires_grad:
            for j in range(o._data.size):
                seed = np.zeros(o._data.size)
                seed[j] = 1.0
                g, = grad(o, x, Tensor._wrap(seed.reshape(o.shape).astype(o.dtype)), retain_graph=True,
                          allow_unused=True)
                if g is not None:
                    J[:, j] = g._data.reshape(-1)
        jac.append(J)
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """True when every gradient of ``func`` with respect to each input that requires
    grad matches central finite differences (float64 inputs recommended)."""
    fn = func
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor) or not x.requires_grad:
            continue
        num = _numerical(fn, inputs, i, eps)
        ana = _analytical(fn, inputs, i)
        for k, (n, a) in enumerate(zip(num, ana)):
            if not np.allclose(a, n, atol=atol, rtol=rtol, equal_nan=True):
                if raise_exception:
                    raise GradcheckError(
                        "Jacobian mismatch for output %d with respect to input %d,\nnumerical:%s\nanalytical:%s\n"
                        % (k, i, n, a))
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
                  seed=0):
    """True when the second derivatives of ``func`` match central finite differences
    of its first derivatives: the gradient ``v . d func / d inputs`` is computed with
    ``create_graph=True`` and checked by ``gradcheck`` with respect to the inputs
    and to ``v`` (random unless ``grad_outputs`` is given; ``seed`` draws it)."""
    fn = func
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    n = len(inputs)
    outs = _outputs(fn, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        grad_outputs = tuple(from_data(rng.standard_normal(o.shape), dtype=o.dtype, requires_grad=True)
                             for o in outs)
    else:
        grad_outputs = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def first_derivatives(*args):
        with enable_grad():
            ins, vs = args[:n], args[n:]
            outs = _outputs(fn, ins)
            pairs = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
            if not pairs:
                return tuple(Tensor._wrap(np.zeros(ins[i].shape, ins[i].dtype)) for i in wrt)
            gs = grad([o for o, _ in pairs], [ins[i] for i in wrt], [v for _, v in pairs], create_graph=True,
                      allow_unused=True)
            return tuple(Tensor._wrap(np.zeros(ins[i].shape, ins[i].dtype)) if g is None else g
                         for i, g in zip(wrt, gs))

    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
