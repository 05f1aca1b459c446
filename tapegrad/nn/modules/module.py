"""``tg.nn.Module`` (PyTorch's ``torch.nn.Module``): registration of parameters,
buffers and sub-modules, traversal, modes, state dicts, dtype casts and hooks."""
import itertools
import warnings
import weakref
from collections import OrderedDict, namedtuple

import numpy as np

from ...autograd.function import Function
from ...autograd.grad_mode import is_grad_enabled, no_grad
from ...core.tensor import Tensor
from ...core.tensor import typename as _typename
from ..parameter import Buffer, Parameter

__all__ = ["Module", "RemovableHandle", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_hook", "register_module_full_backward_pre_hook"]


class RemovableHandle:
    """``torch.utils.hooks.RemovableHandle``: ``remove()`` takes the hook out of the
    dictionary (and the extra dictionaries) it was registered in; a context manager."""
    next_id = itertools.count()

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(RemovableHandle.next_id)
        if extra_dict is None:
            extra_dict = ()
        elif isinstance(extra_dict, dict):
            extra_dict = (extra_dict,)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self):
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookDict(OrderedDict):
    """(An OrderedDict a weakref can point to, as RemovableHandle keeps.)"""


# the hooks of every module (register_module_forward_hook and friends)
_global_forward_pre_hooks = _HookDict()
_global_forward_hooks = _HookDict()
_global_forward_hooks_always_called = _HookDict()
_global_backward_hooks = _HookDict()
_global_backward_pre_hooks = _HookDict()


def register_module_forward_pre_hook(hook):
    """A forward pre-hook of every module, run before the modules' own."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, always_call=False):
    """A forward hook of every module, run before the modules' own."""
    handle = RemovableHandle(_global_forward_hooks, extra_dict=_global_forward_hooks_always_called)
    _global_forward_hooks[handle.id] = hook
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_hook(hook):
    """A full backward hook of every module, run before the modules' own."""
    handle = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    return handle


def register_module_full_backward_pre_hook(hook):
    """A backward pre-hook of every module, run before the modules' own."""
    handle = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    return handle


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class _BackwardHookFunction(Function):
    """The identity on a module's tensors (inputs or outputs) whose backward hands their
    gradients to the module's full backward hooks (PyTorch's BackwardHookFunction)."""

    @staticmethod
    def forward(ctx, on_grads, *tensors):
        ctx.on_grads = on_grads
        return tuple(t.clone() for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.on_grads(grads))


class _BackwardHook:
    """Calls ``hook(module, grad_input, grad_output)`` once the gradients of a call's
    inputs are known, and the pre-hooks ``hook(module, grad_output)`` when its outputs'
    are (PyTorch's ``torch.utils.hooks.BackwardHook``)."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module, self.user_hooks, self.user_pre_hooks = module, user_hooks, user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = -1
        self.input_index = self.output_index = None

    @staticmethod
    def _with_nones(indices, values, size):
        res = [None] * size
        for i, v in zip(indices, values):
            res[i] = v
        return tuple(res)

    def _wrap(self, args, on_grads):
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not idx or not is_grad_enabled():
            return args, None
        new = _BackwardHookFunction.apply(on_grads, *[args[i] for i in idx])
        out = list(args)
        for i, v in zip(idx, new):
            out[i] = v
        return tuple(out), idx

    def setup_input_hook(self, args):
        def on_grads(grads):
            if self.grad_outputs is None:        # (a gradient reaching the inputs but not through the outputs)
                return grads
            res = self._with_nones(self.input_index, grads, self.n_inputs)
            for hook in self.user_hooks:
                out = hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(res):
                    raise RuntimeError("Backward hook returned an invalid number of grad_input, got %d, but "
                                       "expected %d" % (len(out), len(res)))
                res = out
            self.grad_outputs = None
            return [res[i] for i in self.input_index]
        res, self.input_index = self._wrap(args, on_grads)
        self.n_inputs = len(args)
        return res

    def setup_output_hook(self, result):
        def on_grads(grads):
            self.grad_outputs = self._with_nones(self.output_index, grads, self.n_outputs)
            for hook in self.user_pre_hooks:
                new = hook(self.module, self.grad_outputs)
                if new is None:
                    continue
                if len(new) != len(self.grad_outputs):
                    raise RuntimeError("Backward pre hook returned an invalid number of grad_output, got %d, but "
                                       "expected %d" % (len(new), len(self.grad_outputs)))
                self.grad_outputs = tuple(new)
            local = self.grad_outputs
            if self.input_index is None:
                warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                              "outputs since no inputs require gradients. See https://docs.pytorch.org/docs/main/"
                              "generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more "
                              "details.", stacklevel=2)
                grad_inputs = self._with_nones([], [], self.n_inputs)
                for hook in self.user_hooks:
                    r = hook(self.module, grad_inputs, self.grad_outputs)
                    if r is not None and not (isinstance(r, tuple) and all(e is None for e in r)):
                        raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                           "always return None or None for all gradients.")
                self.grad_outputs = None
            return [local[i] for i in self.output_index]
        single = not isinstance(result, tuple)
        args = (result,) if single else result
        res, self.output_index = self._wrap(args, on_grads)
        self.n_outputs = len(args)
        return res[0] if single else res


def _is_dtype(v):
    return isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic))


def _torch_dtype(dt):
    return "torch." + dt.name


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks", "_forward_hooks_with_kwargs",
               "_forward_hooks_always_called", "_backward_hooks", "_backward_pre_hooks", "_state_dict_hooks",
               "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")


class Module:
    """Base class: assigning a Parameter, Module or (``register_buffer``, ``nn.Buffer``)
    buffer to an attribute registers it, in assignment order."""
    training = True
    _version = 1
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if not self.call_super_init and (args or kwargs):
            if kwargs:
                raise TypeError("%s.__init__() got an unexpected keyword argument '%s'"
                                % (type(self).__name__, next(iter(kwargs))))
            raise TypeError("%s.__init__() takes 1 positional argument but %d were given"
                            % (type(self).__name__, len(args) + 1))
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_is_full_backward_hook"] = None
        for name in _HOOK_DICTS:
            d[name] = _HookDict()
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    def forward(self, *input):
        raise NotImplementedError('Module [%s] is missing the required "forward" function'
                                  % type(self).__name__)

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if (d.get("_forward_hooks") or d.get("_forward_pre_hooks") or d.get("_backward_hooks")
                or d.get("_backward_pre_hooks") or _global_forward_hooks or _global_forward_pre_hooks
                or _global_backward_hooks or _global_backward_pre_hooks):
            return self._call_impl(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        """A call with hooks, in PyTorch's order: the forward pre-hooks (global first),
        the backward hooks' input side, forward, the forward hooks, the output side."""
        d = self.__dict__
        fwd_pre = d.get("_forward_pre_hooks", {})
        fwd = d.get("_forward_hooks", {})
        always = d.get("_forward_hooks_always_called", {})
        called = set()
        result = None
        try:
            full_hooks = list(_global_backward_hooks.values()) + (
                list(d.get("_backward_hooks", {}).values()) if d.get("_is_full_backward_hook") else [])
            pre_hooks = list(_global_backward_pre_hooks.values()) + list(d.get("_backward_pre_hooks", {}).values())
            for hid, hook in itertools.chain(_global_forward_pre_hooks.items(), fwd_pre.items()):
                if hid in d.get("_forward_pre_hooks_with_kwargs", {}):
                    r = hook(self, args, kwargs)
                    if r is not None:
                        if isinstance(r, tuple) and len(r) == 2:
                            args, kwargs = r
                        else:
                            raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                               "new_kwargs), but got %s." % (r,))
                else:
                    r = hook(self, args)
                    if r is not None:
                        args = r if isinstance(r, tuple) else (r,)
            bw = None
            if full_hooks or pre_hooks:
                bw = _BackwardHook(self, full_hooks, pre_hooks)
                args = bw.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hid, hook in itertools.chain(_global_forward_hooks.items(), fwd.items()):
                if hid in always or hid in _global_forward_hooks_always_called:
                    called.add(hid)
                if hid in d.get("_forward_hooks_with_kwargs", {}):
                    r = hook(self, args, kwargs, result)
                else:
                    r = hook(self, args, result)
                if r is not None:
                    result = r
            if bw is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn("For backward hooks to be called, module output should be a Tensor or a tuple of "
                                  "Tensors but received %s" % type(result), stacklevel=2)
                else:
                    result = bw.setup_output_hook(result)
            return result
        except Exception:
            # the forward hooks registered with always_call=True run even when the call raised
            for hid, hook in itertools.chain(_global_forward_hooks.items(), fwd.items()):
                if (hid in always or hid in _global_forward_hooks_always_called) and hid not in called:
                    try:
                        r = hook(self, args, result)
                        if r is not None:
                            result = r
                    except Exception as e:
                        warnings.warn("forward hook with ``always_call=True`` raised an exception that was silenced "
                                      "as another error was raised in forward: %s" % e, stacklevel=2)
            raise

    # -- hooks ------------------------------------------------------------------------
    def _hook_dict(self, name):
        d = self.__dict__.get(name)
        if d is None:
            raise AttributeError("cannot register a hook before Module.__init__() call")
        return d

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` (or ``hook(module, args, kwargs)``) before each forward;
        it may return new args (and kwargs).  Returns a RemovableHandle."""
        hooks = self._hook_dict("_forward_pre_hooks")
        handle = RemovableHandle(hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``) after
        each forward; it may return a new output.  Returns a RemovableHandle."""
        hooks = self._hook_dict("_forward_hooks")
        handle = RemovableHandle(hooks, extra_dict=[self._forward_hooks_with_kwargs,
                                                    self._forward_hooks_always_called])
        hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` when the gradients of a call's
        positional tensor inputs are computed (or of its outputs, when no input requires
        grad); it may return new grad_input.  Returns a RemovableHandle."""
        if self.__dict__.get("_is_full_backward_hook") is False:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        self._is_full_backward_hook = True
        hooks = self._hook_dict("_backward_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` when the gradients of a call's outputs are
        computed; it may return new grad_output.  Returns a RemovableHandle."""
        hooks = self._hook_dict("_backward_pre_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_backward_hook(self, hook):
        """PyTorch's deprecated non-full backward hook: not supported (its grad_input is
        that of the last autograd node, which tapegrad's tape does not have); use
        ``register_full_backward_hook``."""
        raise NotImplementedError("Module.register_backward_hook (deprecated in PyTorch) is not supported by "
                                  "tapegrad: use register_full_backward_hook")

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` after ``state_dict``."""
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    _register_state_dict_hook = register_state_dict_post_hook

    def register_state_dict_pre_hook(self, hook):
        """``hook(module, prefix, keep_vars)`` before ``state_dict``."""
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before this module loads its part of a state dict."""
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = lambda *a: hook(self, *a)
        return handle

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` after ``load_state_dict``."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    # -- attribute registration ------------------------------------------------------
    def __setattr__(self, name, value):
        d = self.__dict__
        params, buffers, modules = d.get("_parameters"), d.get("_buffers"), d.get("_modules")

        def remove_from(*dicts):
            for dd in dicts:
                if dd is not None and name in dd:
                    del dd[name]
            d.pop(name, None)
            np_set = d.get("_non_persistent_buffers_set")
            if np_set is not None:
                np_set.discard(name)

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(buffers, modules)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError("cannot assign '%s' as parameter '%s' (tapegrad.nn.Parameter or None "
                                "expected)" % (_typename(value), name))
            params[name] = None
        elif isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(params, buffers)
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError("cannot assign '%s' as child module '%s' (tapegrad.nn.Module or None "
                                "expected)" % (_typename(value), name))
            modules[name] = None
        elif isinstance(value, Buffer):
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            remove_from(params, buffers, modules)
            self.register_buffer(name, value.data, value.persistent)
        elif buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError("cannot assign '%s' as buffer '%s' (tapegrad.Tensor or None expected)"
                                % (_typename(value), name))
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            dd = d.get(key)
            if dd is not None and name in dd:
                return dd[name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            dd = self.__dict__.get(key)
            if dd is not None and name in dd:
                del dd[name]
                self.__dict__.get("_non_persistent_buffers_set", set()).discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def __setstate__(self, state):
        self.__dict__.update(state)
        # (a module pickled without some of the hook dictionaries)
        for name in _HOOK_DICTS:
            self.__dict__.setdefault(name, _HookDict())
        self.__dict__.setdefault("_non_persistent_buffers_set", set())
        self.__dict__.setdefault("_is_full_backward_hook", None)

    def __getstate__(self):
        return self.__dict__.copy()

    def _check_name(self, name, kind):
        if not isinstance(name, str):
            raise TypeError("%s name should be a string. Got %s" % (kind, _typename(name)))
        if "." in name:
            raise KeyError('%s name can\'t contain "."' % kind)
        if name == "":
            raise KeyError('%s name can\'t be empty string ""' % kind)

    def register_parameter(self, name, param):
        """Add ``param`` (a Parameter, or None) as parameter ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(type(self), name) or (name in self.__dict__ and name not in self._parameters):
            raise KeyError("attribute '%s' already exists" % name)
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError("cannot assign '%s' object to parameter '%s' (tapegrad.nn.Parameter or None "
                            "required)" % (_typename(param), name))
        if not param.is_leaf:
            raise ValueError("Cannot assign non-leaf Tensor to parameter '%s'. Model parameters must be "
                             "created explicitly. To express '%s' as a function of another Tensor, compute "
                             "the value in the forward() method." % (name, name))
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add ``tensor`` (or None) as buffer ``name``: in ``state_dict`` unless
        ``persistent=False``, cast by ``to``/``double``..., not a parameter."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(type(self), name) or (name in self.__dict__ and name not in self._buffers):
            raise KeyError("attribute '%s' already exists" % name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError("cannot assign '%s' object to buffer '%s' (tapegrad Tensor or None required)"
                            % (_typename(tensor), name))
        if isinstance(tensor, Buffer):
            tensor = tensor.data
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add ``module`` (or None) as sub-module ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError("%s is not a Module subclass" % _typename(module))
        self._check_name(name, "module")
        if hasattr(type(self), name) or (name in self.__dict__ and name not in self._modules):
            raise KeyError("attribute '%s' already exists" % name)
        self._modules[name] = module

    def register_module(self, name, module):
        """``add_module``."""
        self.add_module(name, module)

    def _get_name(self):
        return type(self).__name__

    def get_submodule(self, target):
        """The sub-module at dotted path ``target`` ("" is the module itself)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target, module, strict=False):
        """Set the sub-module at dotted path ``target`` (``strict``: it must exist)."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        atoms = target.split(".")
        if not isinstance(module, Module):
            raise ValueError("`module` is not an nn.Module, found %s" % type(module))
        parent = self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]) and not isinstance(getattr(parent, atoms[-1]), Module):
            raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_parameter(self, target):
        """The parameter at dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer at dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        buf = getattr(mod, name)
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return buf

    def get_extra_state(self):
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    # -- traversal ----------------------------------------------------------------
    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mprefix, mod in mods:
            for k, v in get(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mprefix + ("." if mprefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter) pairs: the module's own first, then its children's."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """The parameters (each once), the module's own first."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, buffer) pairs."""
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """The buffers."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        """(name, module) of the direct sub-modules."""
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        """The direct sub-modules."""
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) of the module ("") and every sub-module, depth first."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        """The module and every sub-module."""
        for _, m in self.named_modules():
            yield m

    def apply(self, fn):
        """``fn(m)`` for every sub-module (children first), then the module; returns it."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- modes and grads ---------------------------------------------------------
    def train(self, mode=True):
        """Training mode (``mode=False``: evaluation) for the module and its sub-modules."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        """``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` of every parameter; returns the module."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the parameters' gradients (to None, or zero in place)."""
        from ...optim import zero_grads
        zero_grads(self.parameters(), set_to_none)

    def share_memory(self):
        """A no-op (tapegrad's arrays are already in the process's memory); returns the module."""
        return self

    # -- devices and dtypes: tapegrad has the CPU only ------------------------------------
    def _apply(self, fn, recurse=True):
        """``fn`` on every parameter (in place: the Parameter object stays), gradient
        and buffer (replaced)."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    p.data = new
                if p.grad is not None:
                    g = fn(p.grad)
                    if g is not p.grad:
                        p.grad = g
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``: the CPU only
        (another device raises as PyTorch without it); a dtype casts the floating-point
        parameters, buffers and gradients, as PyTorch's."""
        kwargs.pop("non_blocking", None)
        probe = Tensor._const(np.zeros((), np.float64)).to(*args, **kwargs)
        dtype = None
        if any(_is_dtype(v) or isinstance(v, Tensor) for v in args) or kwargs.get("dtype") is not None:
            dtype = probe.dtype
        if dtype is not None:
            if dtype.kind not in "fc":
                raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but got desired "
                                "dtype=%s" % _torch_dtype(dtype))
            self._cast(dtype)
        return self

    def _cast(self, dtype):
        def cast(t):
            if t.dtype.kind == "f" and t.dtype != dtype:
                return t.to(dtype)
            return t
        return self._apply(cast)

    def cpu(self):
        """The module (the CPU is tapegrad's only device)."""
        return self

    def cuda(self, device=None):
        raise AssertionError("Torch not compiled with CUDA enabled")

    def type(self, dst_type):
        """Cast every parameter and buffer to ``dst_type``."""
        dt = np.dtype(dst_type) if _is_dtype(dst_type) else Tensor._const(np.zeros(())).type(dst_type).dtype
        return self._apply(lambda t: t.to(dt) if t.dtype != dt else t)

    def double(self):
        """Floating-point parameters and buffers to float64."""
        return self._cast(np.dtype(np.float64))

    def float(self):
        """Floating-point parameters and buffers to float32."""
        return self._cast(np.dtype(np.float32))

    def half(self):
        """Floating-point parameters and buffers to float16."""
        return self._cast(np.dtype(np.float16))

    def bfloat16(self):
        raise TypeError("tapegrad has no bfloat16 dtype (NumPy has none)")

    def to_empty(self, *, device=None, recurse=True):
        """Every parameter and buffer replaced by an uninitialised one of its shape (on the CPU)."""
        if device is not None:
            Tensor._const(np.zeros(())).to(device)
        return self._apply(lambda t: Tensor._const(np.empty(t.shape, t.dtype)), recurse=recurse)

    # -- state dict ----------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (detached, sharing storage,
        unless ``keep_vars``)."""
        if args:        # (PyTorch's deprecated positional destination, prefix, keep_vars)
            warnings.warn("Positional args are being deprecated, use kwargs instead. Refer to "
                          "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict "
                          "for details.", FutureWarning, stacklevel=2)
            names = ("destination", "prefix", "keep_vars")
            vals = dict(zip(names, args))
            destination = vals.get("destination", destination)
            prefix = vals.get("prefix", prefix)
            keep_vars = vals.get("keep_vars", keep_vars)
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        meta = getattr(destination, "_metadata", None)
        if meta is not None:
            meta[prefix[:-1]] = {"version": self._version}
        for hook in self.__dict__.get("_state_dict_pre_hooks", {}).values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self.__dict__.get("_state_dict_hooks", {}).values():
            r = hook(self, destination, prefix, meta.get(prefix[:-1]) if meta is not None else {})
            if r is not None:
                destination = r
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """Copy this module's own entries of ``state_dict`` (keys ``prefix + name``) into its
        parameters and persistent buffers, collecting the missing and unexpected keys and
        the errors (PyTorch's, which subclasses override to upgrade old checkpoints)."""
        for hook in self.__dict__.get("_load_state_dict_pre_hooks", {}).values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        assign = local_metadata.get("assign_to_params_buffers", False)
        local = [(k, v) for k, v in self._parameters.items() if v is not None]
        local += [(k, v) for k, v in self._buffers.items()
                  if v is not None and k not in self._non_persistent_buffers_set]
        for name, target in local:
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            v = state_dict[key]
            if not isinstance(v, (Tensor, np.ndarray)):
                error_msgs.append('While copying the parameter named "%s", expected torch.Tensor or Tensor-like '
                                  "object from checkpoint but received %s" % (key, type(v)))
                continue
            arr = v._data if isinstance(v, Tensor) else np.asarray(v)
            if target.ndim == 0 and arr.shape == (1,):
                arr = arr.reshape(())
            if arr.shape != target.shape:
                error_msgs.append("size mismatch for %s: copying a param with shape %s from checkpoint, the "
                                  "shape in current model is %s." % (key, list(arr.shape), list(target.shape)))
                continue
            if assign:
                new = v if isinstance(v, Tensor) else Tensor._const(arr)
                if isinstance(target, Parameter):
                    new = new if isinstance(new, Parameter) else Parameter(new, requires_grad=target.requires_grad)
                    new.requires_grad_(target.requires_grad)
                setattr(self, name, new)
                continue
            with no_grad():
                target._write_(arr.astype(target.dtype, copy=False))
        extra_key = prefix + "_extra_state"
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            names = {k for k, _ in local}
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    head = key[len(prefix):].split(".", 1)
                    if len(head) > 1:
                        if head[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif head[0] not in names:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values in place into the parameters and buffers (under no_grad; with
        ``assign=True`` the state dict's tensors replace them)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError("Expected state_dict to be dict-like, got %s." % type(state_dict))
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)

        def load(module, local_state, prefix=""):
            local_meta = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_meta["assign_to_params_buffers"] = True
            module._load_from_state_dict(local_state, prefix, local_meta, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    cp = prefix + name + "."
                    load(child, {k: v for k, v in local_state.items() if k.startswith(cp)}, cp)
            keys = _IncompatibleKeys(missing, unexpected)
            for hook in module.__dict__.get("_load_state_dict_post_hooks", {}).values():
                if hook(module, keys) is not None:
                    raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not "
                                         "expected to return new values, if incompatible_keys need to be modified, "
                                         "it should be done inplace.")

        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: %s. "
                              % ", ".join('"%s"' % k for k in unexpected))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in missing))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for %s:\n\t%s"
                               % (type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # -- repr -------------------------------------------------------------------------
    def extra_repr(self):
        """The module's own line in ``repr`` (its arguments), for subclasses to define."""
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            mod = repr(m).replace("\n", "\n  ")
            lines.append("(" + name + "): " + mod)
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


class OptimizedModule(Module):
    """``tg.compile(module)``: a Module wrapping the original as ``_orig_mod`` (as
    torch.compile's OptimizedModule does), whose calls replay the recorded tape
    (``compiled``, a ``tapegrad.replay.Compiled``); everything else (parameters,
    state_dict, train/eval, attributes) is the original module's."""

    def __init__(self, mod, compiled):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled", compiled)

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return Module.__getattr__(self, name)
        except AttributeError:
            if name.startswith("__") or "_modules" not in self.__dict__:
                raise
            return getattr(self._modules["_orig_mod"], name)
