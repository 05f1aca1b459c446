"""Optimizers with PyTorch's update rules and state layout: SGD, Adam, AdamW here;
RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam and SparseAdam in ``adaptive``,
LBFGS in ``lbfgs``, the learning-rate schedules in ``lr_scheduler``.
"""
import math

import numpy as np

from ..autograd.grad_mode import no_grad
from ..core.tensor import Tensor
from .optimizer import (Optimizer, _Arith, _grad_array, _implementation_options, required,  # noqa: F401
                        zero_grads)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
           "SparseAdam", "LBFGS", "lr_scheduler"]


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        _implementation_options(differentiable)
        if lr < 0.0:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: {}".format(momentum))
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
                wd, nesterov = group["weight_decay"], group["nesterov"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d = p._data
                    A = _Arith(d.dtype)
                    g = _grad_array(p, group["maximize"])
                    if wd != 0:
                        g = A.axpy(g, wd, d)                     # grad.add(param, alpha=wd)
                    if mom != 0:
                        st = self.state[p]
                        buf = st.get("momentum_buffer")
                        if buf is None:
                            buf = Tensor._wrap(np.array(g, dtype=d.dtype, copy=True))
                            st["momentum_buffer"] = buf
                        else:
                            b = buf._data
                            b[...] = A.axpy(b * A.s(mom), 1 - damp, g)   # buf.mul_(mom).add_(g, alpha=1-damp)
                            buf._written_()
                        g = A.axpy(g, mom, buf._data) if nesterov else buf._data
                    d[...] = A.axpy(d, -lr, g)                   # param.add_(g, alpha=-lr)
                    p._written_()        # (the step wrote p._data in place)
        return loss


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _implementation_options(differentiable)
        if decoupled_weight_decay:
            self._decoupled = True      # (AdamW's update)
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, decoupled_weight_decay=self._decoupled)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
                wd, amsgrad = group["weight_decay"], group["amsgrad"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d = p._data
                    A = _Arith(d.dtype)
                    g = _grad_array(p, group["maximize"])
                    st = self.state[p]
                    if len(st) == 0:
                        st["step"] = Tensor._wrap(np.array(0.0))
                        st["exp_avg"] = Tensor._wrap(np.zeros_like(d))
                        st["exp_avg_sq"] = Tensor._wrap(np.zeros_like(d))
                        if amsgrad:
                            st["max_exp_avg_sq"] = Tensor._wrap(np.zeros_like(d))
                    step_t = st["step"]
                    step_t._data += 1
                    step_t._written_()
                    step = float(step_t._data)
                    if wd != 0:
                        if self._decoupled:
                            d[...] = d * A.s(1 - lr * wd)        # param.mul_(1 - lr*wd)
                        else:
                            g = A.axpy(g, wd, d)                 # grad.add(param, alpha=wd)
                    m, v = st["exp_avg"]._data, st["exp_avg_sq"]._data
                    # exp_avg.lerp_(grad, 1 - beta1): m + w*(g - m)
                    m[...] = A.axpy(m, 1 - b1, g - m)
                    # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    v[...] = v * A.s(b2)
                    v[...] = A.down(A.up(v) + A.up(A.s(1 - b2) * g) * A.up(g))
                    st["exp_avg"]._written_()
                    st["exp_avg_sq"]._written_()
                    bc1 = 1 - b1 ** step
                    bc2_sqrt = math.sqrt(1 - b2 ** step)
                    step_size = lr / bc1
                    if amsgrad:
                        mx = st["max_exp_avg_sq"]._data
                        np.maximum(mx, v, out=mx)
                        st["max_exp_avg_sq"]._written_()
                        vv = mx
                    else:
                        vv = v
                    # denom = (sqrt(v) / bias_correction2_sqrt).add_(eps)
                    denom = np.sqrt(vv) / A.s(bc2_sqrt) + A.s(eps)
                    # param.addcdiv_(exp_avg, denom, value=-step_size)
                    d[...] = A.down(A.up(d) + A.up(A.s(-step_size) * m) / A.up(denom))
                    p._written_()
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr*wd`` before the Adam update."""
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize, differentiable=differentiable)


from .adaptive import Adadelta, Adagrad, Adamax, NAdam, RAdam, RMSprop, SparseAdam  # noqa: E402
from .lbfgs import LBFGS  # noqa: E402
from . import lr_scheduler  # noqa: E402,F401
