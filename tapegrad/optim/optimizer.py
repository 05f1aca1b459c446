"""The optimizers' base class and the arithmetic they share (``torch.optim.optimizer``).

The arithmetic runs on the parameters' NumPy arrays in place; each update then
commits through tapegrad's in-place path, which bumps the parameter's version
counter (so a retained graph that saved the old value notices) and gives the
leaf a fresh tape slot on its next use.
"""
import copy
import warnings
from collections import defaultdict

import numpy as np

from ..autograd.grad_mode import no_grad
from ..core.tensor import Tensor
from ..core.tensor import typename as _typename

__all__ = ["Optimizer", "required"]


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
