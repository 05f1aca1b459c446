"""RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam and SparseAdam: PyTorch's update
rules (its single-tensor implementation, the one it runs on the CPU), op for op, and
its state layout (the keys and order of ``optimizer.state[p]``).

Each step reads ``p.grad``, updates the state arrays and the parameter's array in
place and bumps their version counters (``Tensor._written_``), under ``no_grad``.
The scalars are rounded to the parameter's dtype as PyTorch's kernels see them
(``_Arith``), so float32 parameters follow PyTorch's float32 trajectory too.
"""
import numpy as np

from ..autograd.grad_mode import no_grad
from ..core.tensor import Tensor
from .optimizer import Optimizer, _Arith, _grad_array, _implementation_options

__all__ = ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "SparseAdam"]


# -- the in-place arithmetic of PyTorch's kernels, on arrays -----------------------------
def _addcmul(A, a, value, t1, t2):
    """``a.addcmul(t1, t2, value=value)``: ``a + value * t1 * t2``."""
    return A.down(A.up(a) + A.up(A.s(value) * t1) * A.up(t2))


def _addcdiv(A, a, value, t1, t2):
    """``a.addcdiv(t1, t2, value=value)``: ``a + value * t1 / t2``."""
    return A.down(A.up(a) + A.up(A.s(value) * t1) / A.up(t2))


def _lerp(A, a, b, w):
    """``a.lerp(b, w)``: PyTorch's kernel takes the form exact at the nearer end."""
    if abs(w) < 0.5:
        return A.axpy(a, w, b - a)
    return A.axpy(b, -(1 - w), b - a)


def _new_state(d):
    return Tensor._wrap(np.zeros_like(d))


def _step_counter():
    """``state["step"]``: a 0-d float tensor, as PyTorch keeps it."""
    return Tensor._wrap(np.array(0.0))


def _advance(st):
    """``state["step"] += 1``; the new count as a float."""
    t = st["step"]
    t._data += 1
    t._written_()
    return float(t._data)


def _check_lr(lr):
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError("Invalid learning rate: {}".format(lr))


def _check_betas(betas):
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))


def _nonnegative(value, what):
    if not 0.0 <= value:
        raise ValueError("Invalid {} value: {}".format(what, value))


def _with_grad(group):
    """The group's parameters that have a gradient (the others are skipped, no state made)."""
    return [p for p in group["params"] if p.grad is not None]


def _scalar(v):
    return float(v.item()) if isinstance(v, Tensor) else v


class RMSprop(Optimizer):
    """Divides the gradient by a running root mean square of recent gradients
    (``alpha``), optionally centred (minus the running mean's square) and with momentum."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _implementation_options(differentiable)
        _check_lr(lr)
        _nonnegative(eps, "epsilon")
        _nonnegative(momentum, "momentum")
        _nonnegative(weight_decay, "weight_decay")
        _nonnegative(alpha, "alpha")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, alpha, eps = _scalar(group["lr"]), group["alpha"], group["eps"]
                wd, mom, centered = group["weight_decay"], group["momentum"], group["centered"]
                for p in _with_grad(group):
                    d = p._data
                    A = _Arith(d.dtype)
                    g = _grad_array(p, group["maximize"])
                    st = self.state[p]
                    if len(st) == 0:
                        st["step"] = _step_counter()
                        st["square_avg"] = _new_state(d)
                        if mom > 0:
                            st["momentum_buffer"] = _new_state(d)
                        if centered:
                            st["grad_avg"] = _new_state(d)
                    _advance(st)
                    if wd != 0:
                        g = A.axpy(g, wd, d)
                    sq = st["square_avg"]._data
                    sq[...] = _addcmul(A, sq * A.s(alpha), 1 - alpha, g, g)
                    st["square_avg"]._written_()
                    if centered:
                        ga = st["grad_avg"]._data
                        ga[...] = _lerp(A, ga, g, 1 - alpha)
                        st["grad_avg"]._written_()
                        avg = np.sqrt(_addcmul(A, sq, -1, ga, ga))
                    else:
                        avg = np.sqrt(sq)
                    avg = avg + A.s(eps)
                    if mom > 0:
                        buf = st["momentum_buffer"]._data
                        buf[...] = _addcdiv(A, buf * A.s(mom), 1, g, avg)
                        st["momentum_buffer"]._written_()
                        d[...] = A.axpy(d, -lr, buf)
                    else:
                        d[...] = _addcdiv(A, d, -lr, g, avg)
                    p._written_()
        return loss


class Adagrad(Optimizer):
    """Divides the gradient by the root of the sum of all squared gradients so far; the
    step size decays as ``lr / (1 + (step - 1) * lr_decay)``."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        _implementation_options(differentiable)
        _check_lr(lr)
        _nonnegative(lr_decay, "lr_decay")
        _nonnegative(weight_decay, "weight_decay")
        _nonnegative(initial_accumulator_value, "initial_accumulator_value")
        _nonnegative(eps, "epsilon")
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)
        # (PyTorch makes the state of the constructor's parameters at once, gradient or not)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group["initial_accumulator_value"])

    def _init_state(self, p, value):
        st = self.state[p]
        st["step"] = _step_counter()
        st["sum"] = Tensor._wrap(np.full_like(p._data, value))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, lr_decay, eps, wd = _scalar(group["lr"]), group["lr_decay"], group["eps"], group["weight_decay"]
                for p in _with_grad(group):
                    d = p._data
                    A = _Arith(d.dtype)
                    st = self.state[p]
                    if len(st) == 0:        # (a parameter of a later add_param_group: the defaults' value)
                        self._init_state(p, self.defaults["initial_accumulator_value"])
                    step = _advance(st)
                    g = _grad_array(p, group["maximize"])
                    if wd != 0:
                        g = A.axpy(g, wd, d)
                    clr = lr / (1 + (step - 1) * lr_decay)
                    s = st["sum"]._data
                    s[...] = _addcmul(A, s, 1, g, g)
                    st["sum"]._written_()
                    std = np.sqrt(s) + A.s(eps)
                    d[...] = _addcdiv(A, d, -clr, g, std)
                    p._written_()
        return loss


class Adadelta(Optimizer):
    """Scales the gradient by the ratio of running root mean squares of past updates
    and of past gradients (``rho``), times ``lr``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _implementation_options(differentiable)
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError("Invalid rho value: {}".format(rho))
        _nonnegative(eps, "epsilon")
        _nonnegative(weight_decay, "weight_decay")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, rho, eps, wd = _scalar(group["lr"]), group["rho"], group["eps"], group["weight_decay"]
                for p in _with_grad(group):
                    d = p._data
                    A = _Arith(d.dtype)
                    st = self.state[p]
                    if len(st) == 0:
                        st["step"] = _step_counter()
                        st["square_avg"] = _new_state(d)
                        st["acc_delta"] = _new_state(d)
                    _advance(st)
                    g = _grad_array(p, group["maximize"])
                    if wd != 0:
                        g = A.axpy(g, wd, d)
                    sq, acc = st["square_avg"]._data, st["acc_delta"]._data
                    sq[...] = _addcmul(A, sq * A.s(rho), 1 - rho, g, g)
                    std = np.sqrt(sq + A.s(eps))
                    delta = np.sqrt(acc + A.s(eps)) / std * g
                    acc[...] = _addcmul(A, acc * A.s(rho), 1 - rho, delta, delta)
                    st["square_avg"]._written_()
                    st["acc_delta"]._written_()
                    d[...] = A.axpy(d, -lr, delta)
                    p._written_()
        return loss


class Adamax(Optimizer):
    """Adam with the infinity norm: the second moment is a running maximum of ``|grad|``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _implementation_options(differentiable)
        _check_lr(lr)
        _nonnegative(eps, "epsilon")
        _check_betas(betas)
        _nonnegative(weight_decay, "weight_decay")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, (b1, b2), eps, wd = _scalar(group["lr"]), group["betas"], group["eps"], group["weight_decay"]
                for p in _with_grad(group):
                    d = p._data
                    A = _Arith(d.dtype)
                    st = self.state[p]
                    if len(st) == 0:
                        st["step"] = _step_counter()
                        st["exp_avg"] = _new_state(d)
                        st["exp_inf"] = _new_state(d)
                    step = _advance(st)
                    g = _grad_array(p, group["maximize"])
                    if wd != 0:
                        g = A.axpy(g, wd, d)
                    m, u = st["exp_avg"]._data, st["exp_inf"]._data
                    m[...] = _lerp(A, m, g, 1 - b1)
                    np.maximum(u * A.s(b2), np.abs(g) + A.s(eps), out=u)
                    st["exp_avg"]._written_()
                    st["exp_inf"]._written_()
                    clr = lr / (1 - b1 ** step)
                    d[...] = _addcdiv(A, d, -clr, m, u)
                    p._written_()
        return loss


class NAdam(Optimizer):
    """Adam with Nesterov momentum, the momentum decaying by ``momentum_decay``
    (Dozat's schedule, ``mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))``)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _implementation_options(differentiable)
        _check_lr(lr)
        _nonnegative(eps, "epsilon")
        _check_betas(betas)
        _nonnegative(weight_decay, "weight_decay")
        _nonnegative(momentum_decay, "momentum_decay")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, (b1, b2), eps, wd = _scalar(group["lr"]), group["betas"], group["eps"], group["weight_decay"]
                psi = group["momentum_decay"]
                for p in _with_grad(group):
                    d = p._data
                    A = _Arith(d.dtype)
                    st = self.state[p]
                    if len(st) == 0:
                        st["step"] = _step_counter()
                        st["mu_product"] = Tensor._wrap(np.array(1.0))
                        st["exp_avg"] = _new_state(d)
                        st["exp_avg_sq"] = _new_state(d)
                    step = _advance(st)
                    g = _grad_array(p, group["maximize"])
                    bc2 = 1 - b2 ** step
                    if wd != 0:
                        if group["decoupled_weight_decay"]:
                            d[...] = d * A.s(1 - lr * wd)
                        else:
                            g = A.axpy(g, wd, d)
                    mu = b1 * (1.0 - 0.5 * 0.96 ** (step * psi))
                    mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * psi))
                    mp = st["mu_product"]
                    mp._data *= mu
                    mp._written_()
                    mu_product = float(mp._data)
                    m, v = st["exp_avg"]._data, st["exp_avg_sq"]._data
                    m[...] = _lerp(A, m, g, 1 - b1)
                    v[...] = _addcmul(A, v * A.s(b2), 1 - b2, g, g)
                    st["exp_avg"]._written_()
                    st["exp_avg_sq"]._written_()
                    denom = np.sqrt(v / A.s(bc2)) + A.s(eps)
                    mu_product_next = mu_product * mu_next
                    d[...] = _addcdiv(A, d, -lr * (1.0 - mu) / (1.0 - mu_product), g, denom)
                    d[...] = _addcdiv(A, d, (-lr * mu_next) / (1.0 - mu_product_next), m, denom)
                    p._written_()
        return loss


class RAdam(Optimizer):
    """Adam with the variance of the adaptive learning rate rectified: plain momentum
    SGD while the approximated simple moving average's length ``rho_t`` is at most 5."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _implementation_options(differentiable)
        _check_lr(lr)
        _nonnegative(eps, "epsilon")
        _check_betas(betas)
        _nonnegative(weight_decay, "weight_decay")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, (b1, b2), eps, wd = _scalar(group["lr"]), group["betas"], group["eps"], group["weight_decay"]
                for p in _with_grad(group):
                    d = p._data
                    A = _Arith(d.dtype)
                    st = self.state[p]
                    if len(st) == 0:
                        st["step"] = _step_counter()
                        st["exp_avg"] = _new_state(d)
                        st["exp_avg_sq"] = _new_state(d)
                    step = _advance(st)
                    g = _grad_array(p, group["maximize"])
                    if wd != 0:
                        if group["decoupled_weight_decay"]:
                            d[...] = d * A.s(1 - lr * wd)
                        else:
                            g = A.axpy(g, wd, d)
                    m, v = st["exp_avg"]._data, st["exp_avg_sq"]._data
                    m[...] = _lerp(A, m, g, 1 - b1)
                    v[...] = _addcmul(A, v * A.s(b2), 1 - b2, g, g)
                    st["exp_avg"]._written_()
                    st["exp_avg_sq"]._written_()
                    bc1 = 1 - b1 ** step
                    bc2 = 1 - b2 ** step
                    corrected = m / A.s(bc1)
                    rho_inf = 2 / (1 - b2) - 1
                    rho_t = rho_inf - 2 * step * (b2 ** step) / bc2
                    if rho_t > 5.0:
                        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                        adaptive = A.s(bc2 ** 0.5) / (np.sqrt(v) + A.s(eps))
                        update = corrected * A.s(lr) * adaptive * A.s(rect)
                    else:
                        update = corrected * A.s(lr)
                    d[...] = A.axpy(d, -1.0, update)
                    p._written_()
        return loss


class SparseAdam(Optimizer):
    """PyTorch's Adam for sparse gradients (``nn.Embedding(sparse=True)``).  tapegrad's
    gradients are dense, so ``step`` raises PyTorch's error for a dense gradient; the
    constructor checks its arguments as PyTorch's does."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 < lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 < eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        _check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        complex_params = [[i, j] for i, group in enumerate(self.param_groups)
                          for j, p in enumerate(group["params"]) if p.dtype.kind == "c"]
        if complex_params:
            raise ValueError("Complex params at indices {}: SparseAdam does not support complex parameters"
                             .format(complex_params))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            if _with_grad(group):
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
        return loss

