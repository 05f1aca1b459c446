"""Optimizers: SGD, Adam and AdamW with PyTorch's update rules and state layout.

The arithmetic runs on the parameters' NumPy arrays in place; each update then
commits through tapegrad's in-place path, which bumps the parameter's version
counter (so a retained graph that saved the old value notices) and gives the
leaf a fresh tape slot on its next use.
"""
import copy
import math
import warnings
from collections import defaultdict

import numpy as np

from ..autograd.grad_mode import no_grad
from ..core.tensor import Tensor
from ..core.tensor import typename as _typename

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def zero_grads(params, set_to_none=True):
    """``.grad = None`` (default) or zero it in place, for each of ``params``
    (shared by Optimizer.zero_grad and Module.zero_grad)."""
    for p in params:
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            if g.grad_fn is not None:
                g.detach_()
            else:
                g.requires_grad_(False)
            with no_grad():
                g.zero_()


class Optimizer:
    """Base class: ``param_groups`` is a list of dicts (``'params'`` plus options);
    ``state`` maps a parameter to its per-parameter state dict."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or "
                            "dicts, but got " + _typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append("Parameter Group %d" % i)
            for key in sorted(group):
                if key != "params":
                    lines.append("    %s: %s" % (key, group[key]))
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError("param_group must be a dict, but got " + _typename(param_group))
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(p))
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required optimization "
                                 "parameter " + name)
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, "
                          "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for more "
                          "information", stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    @staticmethod
    def _closure_loss(closure):
        """Re-evaluate the model (``step(closure)``) with grad enabled."""
        if closure is None:
            return None
        from ..autograd.grad_mode import enable_grad
        with enable_grad():
            return closure()

    def step(self, closure=None):
        raise NotImplementedError

    # -- state_dict ---------------------------------------------------------------
    def state_dict(self):
        index = {}
        start = 0
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {index[id(p)]: v for p, v in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        state_dict = copy.deepcopy(state_dict)
        groups = self.param_groups
        saved = state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = {}
        for g, s in zip(groups, saved):
            for old, p in zip(s["params"], g["params"]):
                id_map[old] = p
        state = {}
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = {key: _cast(p, key, val) for key, val in v.items()}
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved):
            s = dict(s)
            s["params"] = g["params"]
            new_groups.append(s)
        self.state = defaultdict(dict, state)
        self.param_groups = new_groups


def _cast(p, key, value):
    """State tensors follow the parameter's dtype, except Adam's ``step`` counter."""
    if isinstance(value, Tensor) and key != "step" and value.dtype.kind == "f" and p.dtype.kind == "f":
        if value.dtype != p.dtype:
            return Tensor._wrap(value._data.astype(p.dtype))
    return value


class _Arith:
    """PyTorch's per-op rounding for a parameter's dtype.  Each op's scalar is first
    rounded to the dtype (as PyTorch's kernels do) and, for float32/float16, the op is
    evaluated in float64 and rounded once: that reproduces the fused multiply-add in
    PyTorch's ``add(alpha=)``/``addcmul``/``addcdiv``/``lerp`` kernels bit for bit
    (checked against the reference's printed float32 trajectories).  In float64 the
    ops run directly (differences from a fused multiply-add stay at 1e-16)."""

    __slots__ = ("dt", "wide")

    def __init__(self, dt):
        self.dt = dt
        self.wide = dt != np.float64

    def s(self, v):
        """A Python scalar as the kernel sees it."""
        return float(self.dt.type(v)) if self.wide else v

    def up(self, a):
        return a.astype(np.float64) if self.wide else a

    def down(self, a):
        return a.astype(self.dt) if self.wide else a

    def axpy(self, a, alpha, b):
        """``a + alpha * b`` (torch.add(a, b, alpha=alpha)), a new array."""
        return self.down(self.up(a) + self.s(alpha) * self.up(b))


def _grad_array(p, maximize):
    g = p.grad._data
    if g.dtype != p._data.dtype:
        g = g.astype(p._data.dtype)
    return -g if maximize else g


def _implementation_options(differentiable):
    """``foreach``, ``fused`` and ``capturable`` choose among PyTorch's implementations
    of one update (tapegrad has one, on the CPU): accepted and ignored.
    ``differentiable=True`` (an update recorded for autograd) is not supported."""
    if differentiable:
        raise NotImplementedError("differentiable=True is not supported by tapegrad's optimizers")


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
                        maximize=maximize)
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
