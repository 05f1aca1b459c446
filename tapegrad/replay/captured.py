"""What a recorded call reads from outside its arguments, and the guards that say a
replay may assume it unchanged (``Captures``).

A tape holds what the call computed with the Python values it read: a step size
read from a global is a constant of its entries, a loop bound read from a closure is
how many entries there are.  So, at a recording, the code of the function is read
(its bytecode, and that of every Python function it reaches the same way, as
torch.compile's guards are built from what its tracer reads) for the values it can
read from outside its arguments:

* module globals (``LOAD_GLOBAL``), closure cells (``LOAD_DEREF``), default
  arguments, the arguments that are no arrays (an object passed in), ``self`` of a
  bound method or a module;
* the attributes and constant subscripts read off them (``m.k``, ``cfg["lr"]``,
  ``self.layers[0].scale``, the chain of ``LOAD_ATTR`` / ``BINARY_SUBSCR`` after the
  load), and a local assigned once from such a chain;
* an ``nn.Module`` reached so: its non-tensor attributes, its parameters, buffers
  and submodules by identity, and the same for each submodule;
* the Python functions, methods, classes, partials and callable objects reached so
  (outside tapegrad, NumPy, SciPy and the standard library): their code is read in
  turn, with their own globals, closure, defaults and ``self``.

Each value found gets a guard by its kind (``_kind``): numbers, strings, None and
tuples of them by value; NumPy arrays by identity, shape, dtype and contents;
lists, dicts and sets by their items; anything else (a tensor, a function, a
module, an object) by identity.  A replay first runs the guards (one generated
function, a few dozen nanoseconds a value); when one fails the call is recorded
again, and ``describe`` names the value.  The guards are also run right after the
recording call: a call that changes what it reads (a counter, an attribute it
sets, a list it appends to) is not replayed, since a replay would not do it.

What cannot be seen this way (a value read through C code, ``getattr`` with a
computed name, ``globals()``, objects made inside the call, other random number
generators than tapegrad's) is listed in docs/replay.md ("What a replay assumes").
"""
import dis
import functools
import math
import os
import sys
import types

import numpy as np

from ..core.tensor import Tensor
from .session import propagates

_ROOT_LOADS = frozenset(("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FAST", "LOAD_FAST_CHECK"))
_STORES = frozenset(("STORE_ATTR", "DELETE_ATTR"))
_GLOBAL_STORES = frozenset(("STORE_GLOBAL", "DELETE_GLOBAL"))
_DEREF_STORES = frozenset(("STORE_DEREF", "DELETE_DEREF"))
_LIBRARIES = frozenset(("tapegrad", "numpy", "scipy", "numba", "torch", "jax", "jaxlib", "sklearn", "dask",
                        "distributed", "matplotlib", "tqdm", "pandas", "llvmlite", "_pytest", "pytest", "pluggy",
                        "hypothesis")) | frozenset(sys.stdlib_module_names)
MAX_FUNCTIONS = 256         # code objects read per recording ...
MAX_ITEMS = 64              # ... items of a container guarded one by one (a larger one of plain values: by ==)
MAX_DEPTH = 4               # ... containers within containers
MAX_CHAIN = 8               # ... attributes and subscripts in one chain
_CONSTS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented), range, slice)


class _Missing:
    """A chain that does not evaluate (an attribute not set, a key not there): its guard
    holds it, and a replay finding the value there records again."""
    __slots__ = ()

    def __repr__(self):
        return "<missing>"


MISSING = _Missing()
_CHAIN_ERRORS = (AttributeError, KeyError, IndexError, TypeError, ValueError)


def _is_library(obj):
    """Whether ``obj`` (a function, class or module) comes from tapegrad, NumPy, SciPy,
    the standard library...: code a recording does not read."""
    mod = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
    if not isinstance(mod, str):
        return True         # (a builtin: no Python code)
    return mod.partition(".")[0] in _LIBRARIES or mod == "builtins"


def _is_module(v):
    """Whether ``v`` is an ``nn.Module`` (a layer above this one: known by what it holds)."""
    d = getattr(v, "__dict__", None)
    return (isinstance(d, dict) and isinstance(d.get("_modules"), dict) and isinstance(d.get("_parameters"), dict)
            and callable(getattr(type(v), "forward", None)))


def _const(v, depth=0):
    """Whether ``v`` is a value compared by value: a number, string, None, or a tuple or
    frozenset of those."""
    t = type(v)
    if t in _CONSTS or isinstance(v, np.generic):
        return True
    if (t is tuple or t is frozenset) and depth < MAX_DEPTH and len(v) <= MAX_ITEMS:
        return all(_const(o, depth + 1) for o in v)
    return False


# -- reading code ----------------------------------------------------------------------
class _CodeReads:
    """What one code object reads (cached per code object): ``chains``, each (root
    kind, root name, steps) with root kind "global", "deref" or "local" and steps
    ("attr", name) / ("item", constant); ``stores``: chains it assigns to or deletes
    (their guards make a call that changes them unreplayable); ``aliases``: a local
    assigned once, from a chain; ``nested``: the code objects it makes functions of
    (lambdas, comprehensions, inner functions); ``calls`` and ``uses``: the calls that
    pass chains and how each chain's value is used (``_call_sites``)."""
    __slots__ = ("chains", "stores", "aliases", "nested", "calls", "uses")


_CODE_CACHE = {}


def _code_reads(code):
    got = _CODE_CACHE.get(code)
    if got is not None:
        return got
    if len(_CODE_CACHE) > 4096:
        _CODE_CACHE.clear()
    got = _CODE_CACHE[code] = _read_code(code)
    return got


def _read_code(code):
    every = list(dis.get_instructions(code))
    ins = [i for i in every if i.opname not in ("CACHE", "EXTENDED_ARG", "NOP")]
    out = _CodeReads()
    out.chains, out.stores, out.nested = [], [], []
    stored = {}         # local name -> how many stores
    alias_of = {}       # local name -> the chain stored into it
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.nested.append(c)
    n = len(ins)
    i = 0
    while i < n:
        op = ins[i].opname
        if op == "STORE_FAST" or op == "DELETE_FAST":
            stored[ins[i].argval] = stored.get(ins[i].argval, 0) + 1
        if op in _GLOBAL_STORES:
            out.stores.append(("global", ins[i].argval, ()))
        elif op in _DEREF_STORES:
            out.stores.append(("deref", ins[i].argval, ()))
        if op not in _ROOT_LOADS:
            i += 1
            continue
        kind = "global" if op in ("LOAD_GLOBAL", "LOAD_NAME") else "deref" if "DEREF" in op else "local"
        name = ins[i].argval
        steps = []
        j = i + 1
        while j < n and len(steps) < MAX_CHAIN:
            o = ins[j].opname
            if o in ("LOAD_ATTR", "LOAD_METHOD"):
                steps.append(("attr", ins[j].argval))
                j += 1
            elif (o == "LOAD_CONST" and j + 1 < n and ins[j + 1].opname == "BINARY_SUBSCR"
                  and _const(ins[j].argval)):
                steps.append(("item", ins[j].argval))
                j += 2
            else:
                break
        nxt = ins[j] if j < n else None
        chain = (kind, name, tuple(steps))
        out.chains.append(chain)
        if nxt is not None:
            if nxt.opname in _STORES:               # obj.attr = ... / del obj.attr
                out.stores.append((kind, name, tuple(steps) + (("attr", nxt.argval),)))
            elif nxt.opname == "STORE_FAST" and steps:
                alias_of.setdefault(nxt.argval, []).append(chain)
        i = j if j > i + 1 else i + 1
    # a local assigned once, from a chain: its reads are that chain's
    out.aliases = {k: v[0] for k, v in alias_of.items() if len(v) == 1 and stored.get(k) == 1}
    try:
        out.calls, out.uses = _call_sites(code, every)
    except Exception as e:      # (bytecode this model does not know: no arguments followed into callees)
        if propagates(e):
            raise
        out.calls, out.uses = [], {}
    return out


# -- which chains a call passes (the symbolic stack of one code object) ------------------------
_NULL = ("null",)
_TWO_TO_ONE = frozenset(("BINARY_OP", "COMPARE_OP", "IS_OP", "CONTAINS_OP"))
_ARITH_310 = frozenset("%s_%s" % (k, o) for k in ("BINARY", "INPLACE")
                       for o in ("ADD", "SUBTRACT", "MULTIPLY", "TRUE_DIVIDE", "POWER"))
_ONE_TO_ONE = frozenset(("UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_NOT", "UNARY_INVERT", "GET_ITER", "GET_LEN",
                         "FORMAT_SIMPLE", "TO_BOOL"))
_NO_FALLTHROUGH = frozenset(("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD",
                             "JUMP_BACKWARD", "JUMP_ABSOLUTE", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP"))


def _depths(code, ins):
    """The stack depth before each reachable instruction (by offset), over the jumps and
    the exception handlers, as the compiler computes it."""
    at = {i.offset: k for k, i in enumerate(ins)}
    depth = {}
    todo = [(0, 0)]
    try:
        for e in dis.Bytecode(code).exception_entries:
            todo.append((at[e.target], e.depth + 1 + int(e.lasti)))
    except AttributeError:      # (3.10: no exception table)
        pass
    while todo:
        k, d = todo.pop()
        while k < len(ins):
            i = ins[k]
            if i.offset in depth:
                break
            depth[i.offset] = d
            arg = i.arg if i.opcode >= dis.HAVE_ARGUMENT else None
            if i.opcode in dis.hasjrel or i.opcode in dis.hasjabs:
                t = at.get(i.argval)
                if t is not None:
                    todo.append((t, d + dis.stack_effect(i.opcode, arg, jump=True)))
            if i.opname in _NO_FALLTHROUGH:
                break
            d += dis.stack_effect(i.opcode, arg, jump=False)
            k += 1
    return depth


def _call_sites(code, ins):
    """(The calls of ``code`` that pass chains: [(callee chain, positional arguments,
    keyword arguments)], each argument a chain (root kind, name, steps) or None, the
    callee's object first for a method call (``obj.f(a)``: the chain of ``obj``); how
    each chain's value is used: {chain: {"op", or anything else}}, "op" when every
    load of it is an operand of an arithmetic or comparison operator, whose methods a
    number sees called.)  A symbolic stack over straight-line code: at a jump target
    or any instruction this model does not know, everything on the stack becomes
    unknown (and its chains' use "unknown").  (Python 3.10 to 3.12, whose call
    sequences it knows; later versions: no calls followed, every use unknown.)"""
    if sys.version_info[:2] not in ((3, 10), (3, 11), (3, 12)):
        return [], {}
    uses = {}

    def used(v, how):
        if v is not None and v is not _NULL and v[0] in ("global", "local", "deref"):
            uses.setdefault(v, set()).add(how)

    def drop(vals, how="unknown"):
        for v in vals:
            used(v, how)
    at_call = "PRECALL" if sys.version_info[:2] == (3, 11) else "CALL"
    depths = _depths(code, ins)
    sites = []
    stack = []
    kw = ()
    for i in ins:
        d = depths.get(i.offset)
        if d is None:
            continue
        if i.is_jump_target or len(stack) != d:
            drop(stack)
            stack = [None] * d
        op, arg = i.opname, (i.arg if i.opcode >= dis.HAVE_ARGUMENT else None)
        eff = dis.stack_effect(i.opcode, arg, jump=False)
        push = None
        if op in ("LOAD_GLOBAL", "LOAD_NAME"):
            push = [("global", i.argval, ())]
            if eff == 2:
                push.insert(0, _NULL)
        elif op in ("LOAD_FAST", "LOAD_FAST_CHECK"):
            push = [("local", i.argval, ())]
        elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
            push = [("deref", i.argval, ())]
        elif op == "LOAD_CONST":
            push = [("const", i.argval)]
        elif op == "PUSH_NULL":
            push = [_NULL]
        elif op in ("LOAD_ATTR", "LOAD_METHOD"):
            top = stack.pop()
            used(top, "attribute")
            c = (top[0], top[1], top[2] + (("attr", i.argval),)) if _chain_or_none(top) is not None else None
            stack += [c, top] if eff == 1 else [c]         # (a method: the function, then its object)
            kw = ()
            continue
        elif op == "BINARY_SUBSCR":
            key, cont = stack.pop(), stack.pop()
            used(key, "index")
            used(cont, "subscript")
            ok = _chain_or_none(cont) is not None and key is not None and key[0] == "const" and _const(key[1])
            stack.append((cont[0], cont[1], cont[2] + (("item", key[1]),)) if ok else None)
            continue
        elif op == "KW_NAMES":
            kw = code.co_consts[arg]
            continue
        elif op in (at_call, "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW"):
            n = arg
            if op == "CALL_FUNCTION_KW":        # (3.10: the names on top)
                names = stack[-1][1] if stack[-1] is not None and stack[-1][0] == "const" else None
                args, callee, pos0 = stack[len(stack) - 1 - n:-1], stack[-(n + 2)], []
            elif op == "CALL_FUNCTION":
                names, args, callee, pos0 = (), stack[len(stack) - n:], stack[-(n + 1)], []
            else:       # [NULL or method, callable or self, args]
                names, args = kw, stack[len(stack) - n:]
                first, second = stack[-(n + 2)], stack[-(n + 1)]
                callee, pos0 = (second, []) if first is _NULL else (first, [second])
            drop(args, "argument")
            used(callee, "called")
            if names is not None and _chain_or_none(callee) is not None:
                pos = pos0 + list(args[:len(args) - len(names)])
                sites.append((callee, [_chain_or_none(c) for c in pos],
                              {k: _chain_or_none(c) for k, c in zip(names, args[len(args) - len(names):])}))
            kw = ()
            drop(stack[len(stack) + eff:] if eff < 0 else ())
            stack = [None] * (len(stack) + eff)
            continue
        elif op in _TWO_TO_ONE or op.startswith(("BINARY_", "INPLACE_")):
            # (arithmetic, which a number's methods see when the other operand is no tensor;
            # not formatting, comparisons, bit operations, where C code may read it)
            arith = i.argrepr.rstrip("=") in ("+", "-", "*", "/", "**") if op == "BINARY_OP" else op in _ARITH_310
            drop(stack[-2:], "op" if arith else op)
            del stack[-2:]
            stack.append(None)
            continue
        elif op in _ONE_TO_ONE:
            used(stack[-1], "op" if op.startswith("UNARY_") else op)
            stack[-1] = None
            continue
        elif op == "SWAP":
            stack[-1], stack[-arg] = stack[-arg], stack[-1]
            continue
        elif op == "COPY":
            stack.append(stack[-arg])
            continue
        elif op in ("POP_TOP", "STORE_FAST", "STORE_GLOBAL", "STORE_DEREF", "STORE_NAME", "STORE_ATTR",
                    "STORE_SUBSCR", "RETURN_VALUE", "NOP", "RESUME", "PRECALL", "EXTENDED_ARG", "CACHE"):
            drop(stack[len(stack) + eff:] if eff < 0 else (), op)
            del stack[len(stack) + eff:]
            continue
        if push is None or len(push) != eff:        # (what this model does not know: all unknown)
            drop(stack)
            stack = [None] * (len(stack) + eff)
            kw = ()
        else:
            stack += push
    drop(stack)
    return sites, uses


def _chain_or_none(c):
    return c if c is not None and c is not _NULL and c[0] in ("global", "local", "deref") else None


# -- the guards --------------------------------------------------------------------------
class _Guard:
    """One value: ``root`` (how the check reaches the start of its chain: a ``_Root``),
    ``steps``, what was read (``value``), its ``kind`` and ``expect`` (what the check
    compares with), and its description."""
    __slots__ = ("root", "steps", "value", "kind", "expect", "label", "uses")


class _Root:
    """Where a chain starts: ``kind`` "dict" (a module's globals: ``obj[key]``), "cell"
    (``obj.cell_contents``), "object" (``obj`` itself), "arg" (argument ``key`` of the
    call), "kwarg" (keyword argument ``key``), "default" / "kwdefault" (a default of
    function ``obj``); ``name`` what the code calls it, ``where`` what it is."""
    __slots__ = ("kind", "obj", "key", "name", "where")

    def __init__(self, kind, obj, key, name, where=""):
        self.kind, self.obj, self.key, self.name, self.where = kind, obj, key, name, where


def _evaluate(root, steps, args, kwargs):
    try:
        if root.kind == "dict":
            v = root.obj[root.key]
        elif root.kind == "cell":
            v = root.obj.cell_contents
        elif root.kind == "object":
            v = root.obj
        elif root.kind == "arg":
            v = args[root.key]
        elif root.kind == "kwarg":
            v = kwargs[root.key]
        elif root.kind == "default":
            v = root.obj.__defaults__[root.key]
        else:
            v = root.obj.__kwdefaults__[root.key]
        for kind, k in steps:
            v = getattr(v, k) if kind == "attr" else v[k]
        return v
    except _CHAIN_ERRORS:
        return MISSING


def _label(root, steps, where=True):
    """How a value is named in ``why`` and the warnings: ``cfg.opt.lr (a global of module
    train)``."""
    s = _path(root, steps)
    return "%s (%s)" % (s, root.where) if where and root.where else s


def _path(root, steps):
    s = root.name
    for kind, k in steps:
        s += ".%s" % k if kind == "attr" else "[%r]" % (k,)
    return s


class _Discovery:
    """The walk of one recording's code (``discover``): the guards found, the code
    objects read, and why the reading stopped short (``incomplete``)."""

    def __init__(self, args, kwargs):
        self.args, self.kwargs = args, kwargs
        self.guards = []
        self.seen = {}          # (id(root object), root key, steps) -> guard: each chain once
        self.functions = set()  # ids of the functions, methods and objects followed
        self.analyzed = set()   # (function, self, arguments bound): the code read
        self.keep = []          # (what those ids are of)
        self.read = 0
        self.incomplete = None

    # -- values --------------------------------------------------------------
    def chain(self, root, steps, uses=None):
        """Guard the value of ``root`` + ``steps`` (and follow it, when it is code or a
        module); ``uses``: how the code read it uses it (``_call_sites``; None: not read
        by code of its own: found in a module, a class, a partial)."""
        key = (id(root.obj), root.kind, root.key, steps)
        if key in self.seen:
            g = self.seen[key]
            if g is not None:
                g.uses |= uses or {"unknown"}
            return
        if steps:
            base = _evaluate(root, (), self.args, self.kwargs)
            if isinstance(base, types.ModuleType) and _is_library(base):
                self.seen[key] = None       # (np.pi, tg.tensor, math.exp: never rebound)
                return
        v = _evaluate(root, steps, self.args, self.kwargs)
        if root.kind in ("arg", "kwarg") and not steps:
            self.seen[key] = None       # (an argument itself: the signature says it)
            self.follow(v, root, steps)
            return
        if isinstance(v, types.ModuleType) and _is_library(v):
            self.seen[key] = None       # (np, math, tg...: never rebound, their attributes constants)
            return
        if steps and isinstance(v, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            owner = getattr(v, "__self__", None)
            if isinstance(owner, (list, dict, set, bytearray)):
                # hist.append, d.get...: the container they work on
                self.chain(root, steps[:-1])
                return
        g = _Guard()
        g.root, g.steps, g.value, g.label = root, steps, v, _label(root, steps)
        g.kind, g.expect = _kind(v)
        g.uses = set(uses or {"unknown"})
        self.seen[key] = g
        self.guards.append(g)
        self.follow(v, root, steps)

    def follow(self, v, root, steps, depth=0):
        """Read the code ``v`` runs, or the modules and containers it holds."""
        if v is MISSING or v is None or _const(v):
            return
        if isinstance(v, Tensor) or isinstance(v, np.ndarray):
            return
        if isinstance(v, (list, tuple, dict, set, frozenset)):
            if depth < MAX_DEPTH:
                items = v.values() if isinstance(v, dict) else v
                for o in list(items)[:MAX_ITEMS]:
                    self.follow(o, root, steps, depth + 1)
            return
        if id(v) in self.functions:
            return
        self.functions.add(id(v))
        self.keep.append(v)
        if len(self.functions) > MAX_FUNCTIONS:
            self.incomplete = self.incomplete or "it reaches more than %d functions" % MAX_FUNCTIONS
            return
        if _is_module(v):
            self.module(v, root, steps)
        elif isinstance(v, types.FunctionType):
            if not _is_library(v):
                self.function(v, None)
        elif isinstance(v, types.MethodType):
            f = v.__func__
            if isinstance(f, types.FunctionType) and not _is_library(f):
                self.function(f, v.__self__)
        elif isinstance(v, functools.partial):
            # (the arguments it binds: its args tuple, and its keywords dict, which can be changed)
            self.chain(root, steps + (("attr", "args"),))
            self.chain(root, steps + (("attr", "keywords"),))
            self.follow(v.func, root, steps, depth)
        elif isinstance(v, type):
            if not _is_library(v):
                # its class attributes (read through instances made in the call too), and the
                # code that makes and calls instances
                for cls in v.__mro__:
                    if _is_library(cls):
                        continue
                    for k, a in list(vars(cls).items()):
                        if not (k.startswith("__") and k.endswith("__")) and not isinstance(
                                a, (types.FunctionType, staticmethod, classmethod, property)):
                            self.chain(root, steps + (("attr", k),))
                for name in ("__init__", "__call__", "__new__"):
                    f = v.__dict__.get(name)
                    if isinstance(f, (staticmethod, classmethod)):
                        f = f.__func__
                    if isinstance(f, types.FunctionType):
                        self.function(f, None)
        elif not isinstance(v, types.ModuleType) and not _is_library(type(v)):
            call = getattr(type(v), "__call__", None)       # a callable object of the user's
            if isinstance(call, types.FunctionType):
                self.function(call, v)

    def module(self, m, root, steps):
        """An ``nn.Module``: every attribute of it and of its submodules, and the code of
        the forwards that are not tapegrad's."""
        obj = _Root("object", m, None, _path(root, steps), root.where)
        todo = [(m, obj)]
        while todo:
            mod, r = todo.pop()
            for k in list(vars(mod)):
                self.chain(r, (("attr", k),))
            for name, sub in list(getattr(mod, "_modules", {}).items()):
                if _is_module(sub) and id(sub) not in self.functions:
                    self.functions.add(id(sub))
                    self.keep.append(sub)
                    todo.append((sub, _Root("object", sub, None, "%s.%s" % (r.name, name), r.where)))
            fwd = type(mod).forward
            if isinstance(fwd, types.FunctionType) and not _is_library(fwd):
                self.function(fwd, mod, r)

    # -- code ----------------------------------------------------------------
    def function(self, f, self_obj, self_root=None, bound=None):
        """Read function ``f``'s code: ``self_obj`` its first argument's value (a bound
        method's object, or None), ``self_root`` how to reach it; ``bound``: {parameter:
        (root, steps) of what the call passes, or None when unknown}, the parameters a
        call gives (None: no call known, every default taken)."""
        key = (id(f), id(self_obj), tuple(sorted((k, id(r[0].obj), r[0].kind, r[0].key, r[1]) if r else (k,)
                                                 for k, r in (bound or {}).items())))
        if key in self.analyzed:
            return
        self.analyzed.add(key)
        self.read += 1
        if self.read > MAX_FUNCTIONS:
            self.incomplete = self.incomplete or "it reaches more than %d functions" % MAX_FUNCTIONS
            return
        code = f.__code__
        qual = getattr(f, "__qualname__", code.co_name)
        g = f.__globals__
        closure = dict(zip(code.co_freevars, f.__closure__ or ()))
        npos = code.co_argcount
        params = code.co_varnames[:npos]
        defaults = f.__defaults__ or ()
        kwdefaults = f.__kwdefaults__ or {}
        bound = bound or {}
        roots = {}      # parameter -> (root, steps)
        if self_obj is not None and npos:
            roots[params[0]] = (self_root or _Root("object", self_obj, None, params[0], "self of %s()" % qual), ())
        for i, name in enumerate(params):
            d = i - (npos - len(defaults))
            if name in roots:
                continue
            if name in bound:
                if bound[name] is not None:
                    roots[name] = bound[name]
            elif d >= 0:
                roots[name] = (_DefaultRoot(f, d, name, qual), ())
        for name in code.co_varnames[npos:npos + code.co_kwonlyargcount]:
            if name in bound:
                if bound[name] is not None:
                    roots[name] = bound[name]
            elif name in kwdefaults:
                roots[name] = (_KwDefaultRoot(f, name, qual), ())
        self.code(code, _Context(g, g.get("__name__", "?"), closure, roots, qual))

    def code(self, code, ctx):
        reads = _code_reads(code)
        for kind, name, steps in reads.chains:
            self.chain_in(ctx, kind, name, steps, reads)
        for kind, name, steps in reads.stores:
            self.chain_in(ctx, kind, name, steps, reads)
        for callee, pos, kws in reads.calls:
            self.call(ctx, reads, callee, pos, kws)
        for c in reads.nested:
            # a function made in the body: its globals are these, its cells this one's
            # (closure cells or arguments), its own arguments unknown
            inner = _Context(ctx.globals, ctx.module, ctx.closure, {k: v for k, v in ctx.roots.items()
                                                                   if k in c.co_freevars}, ctx.qual)
            inner.locals_unknown = True
            self.code(c, inner)

    def resolve(self, ctx, kind, name, reads):
        """(root, steps) of a chain's start in ``ctx``, or None where it is a local."""
        if kind == "global":
            if name in ctx.globals or not hasattr(_builtins, name):
                return _Root("dict", ctx.globals, name, name, "a global of module %s" % ctx.module), ()
            return None
        if kind == "deref":
            cell = ctx.closure.get(name)
            if cell is not None:
                return _Root("cell", cell, None, name, "a closure variable of %s()" % ctx.qual), ()
            return ctx.roots.get(name)
        if not ctx.locals_unknown:
            r = ctx.roots.get(name)
            if r is not None:
                return r
        alias = reads.aliases.get(name)
        if alias is not None and alias[1] != name:
            r = self.resolve(ctx, alias[0], alias[1], reads)
            if r is not None:
                return r[0], r[1] + alias[2]
        return None

    def chain_in(self, ctx, kind, name, steps, reads):
        r = self.resolve(ctx, kind, name, reads)
        if r is not None:
            self.chain(r[0], r[1] + steps, reads.uses.get((kind, name, steps)))

    def call(self, ctx, reads, callee, pos, kws):
        """A call site passing chains: read the callee's code with its parameters bound
        to them (``helper(x, cfg)``: ``cfg.lr`` read in ``helper`` as its ``c.lr``)."""
        if not any(pos) and not any(kws.values()):
            return
        r = self.resolve(ctx, callee[0], callee[1], reads)
        if r is None:
            return
        root, steps = r[0], r[1] + callee[2]
        if steps:
            base = _evaluate(root, (), self.args, self.kwargs)
            if isinstance(base, types.ModuleType) and _is_library(base):
                return
        v = _evaluate(root, steps, self.args, self.kwargs)
        f, self_obj, skip = None, None, 0
        if isinstance(v, types.MethodType):
            f, self_obj, skip = v.__func__, v.__self__, 1
            if callee[2] and pos and pos[0] == (callee[0], callee[1], callee[2][:-1]):
                pos = pos[1:]           # (obj.m(a): the object is the method's own)
        elif isinstance(v, types.FunctionType):
            f = v
        elif isinstance(v, type) and not _is_library(v):
            f, skip = v.__dict__.get("__init__"), 1
        elif _is_module(v):
            f, self_obj, skip = type(v).forward, v, 1
        elif v is not MISSING and not isinstance(v, (types.ModuleType, functools.partial)):
            f, self_obj, skip = getattr(type(v), "__call__", None), v, 1
        if not isinstance(f, types.FunctionType) or _is_library(f):
            return
        code = f.__code__
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        bound = {}
        for i, c in enumerate(pos):
            if skip + i < code.co_argcount:
                bound[names[skip + i]] = self.resolve_chain(ctx, c, reads)
        for k, c in kws.items():
            if k in names:
                bound[k] = self.resolve_chain(ctx, c, reads)
        self.function(f, self_obj, None, bound)

    def resolve_chain(self, ctx, c, reads):
        if c is None:
            return None
        r = self.resolve(ctx, c[0], c[1], reads)
        return None if r is None else (r[0], r[1] + c[2])


import builtins as _builtins  # noqa: E402


class _Context:
    __slots__ = ("globals", "module", "closure", "roots", "qual", "locals_unknown")

    def __init__(self, g, module, closure, roots, qual):
        self.globals, self.module, self.closure, self.roots, self.qual = g, module, closure, roots, qual
        self.locals_unknown = False


def _DefaultRoot(f, i, name, qual):
    """A positional parameter's default: ``f.__defaults__[i]``."""
    return _Root("default", f, i, name, "a default argument of %s()" % qual)


def _KwDefaultRoot(f, name, qual):
    return _Root("kwdefault", f, name, name, "a default argument of %s()" % qual)


def _kind(v, depth=0):
    """(kind, what the check compares with) of a value read."""
    if v is MISSING:
        return "missing", None
    t = type(v)
    if v is None or t is bool:
        return "is", v
    if t is float:
        return ("nan", None) if v != v else ("float", (v, math.copysign(1.0, v)))
    if _const(v):
        return "eq", v
    if t is np.ndarray:
        if v.dtype.hasobject:
            return "is", v
        return "array", (v.shape, v.dtype, v.tobytes())
    if t is types.MethodType:       # (a new object at each attribute read: its function and object)
        return "method", (v.__func__, v.__self__)
    if t is types.BuiltinMethodType and not isinstance(getattr(v, "__self__", None), types.ModuleType):
        return "bmethod", (v.__self__, v.__name__)
    if t is set:
        return ("set", frozenset(v)) if all(_const(o) for o in v) else ("is", v)
    if depth < MAX_DEPTH and (t is list or isinstance(v, dict)) and len(v) <= MAX_ITEMS:
        if t is list:
            return "list", [(_kind(o, depth + 1), o) for o in v]
        return "dict", (t, [(k, _kind(o, depth + 1), o) for k, o in list(v.items())])
    if t is list and all(_const(o) for o in v):
        return "list_eq", list(v)
    return "is", v


def _matches(kind, expect, v):
    """Whether value ``v`` passes a guard (the general form; ``Captures`` generates
    straight-line checks for the common kinds)."""
    if kind == "missing":
        return v is MISSING
    if kind == "is":
        return v is expect
    if kind == "float":
        return type(v) is float and v == expect[0] and math.copysign(1.0, v) == expect[1]
    if kind == "nan":
        return type(v) is float and v != v
    if kind == "eq":
        return type(v) is type(expect) and v == expect
    if kind == "array":
        return (type(v) is np.ndarray and v.shape == expect[0] and v.dtype == expect[1]
                and v.tobytes() == expect[2])
    if kind == "method":
        return type(v) is types.MethodType and v.__func__ is expect[0] and v.__self__ is expect[1]
    if kind == "bmethod":
        return (type(v) is types.BuiltinMethodType and getattr(v, "__self__", None) is expect[0]
                and v.__name__ == expect[1])
    if kind == "set":
        return type(v) is set and v == expect
    if kind == "list_eq":
        return type(v) is list and v == expect
    if kind == "list":
        return type(v) is list and len(v) == len(expect) and all(
            _matches(k, e, o) for ((k, e), _), o in zip(expect, v))
    if kind == "dict":
        t, items = expect
        if type(v) is not t or len(v) != len(items):
            return False
        for k, (kk, e), _ in items:
            o = v.get(k, MISSING)
            if o is MISSING or not _matches(kk, e, o):
                return False
        return True
    return False


# -- the guards of one recording ------------------------------------------------------------
class Captures:
    """The guards of one recording: ``failing(args, kwargs)`` is the first guard whose
    value changed (None: all hold), in one generated function.  ``live``: the numbers
    read anew at each replay (``operands``), whose guard only asks for a float;
    ``values(args, kwargs)`` reads them."""

    def __init__(self, guards, incomplete=None, live=()):
        self.guards = guards
        self.incomplete = incomplete
        self.live = list(live)
        every = guards + self.live
        self.check = _generate(guards, self.live) if every else _nothing
        self.values = _generate_values(self.live) if self.live else None

    def __len__(self):
        return len(self.guards) + len(self.live)

    def failing(self, args, kwargs):
        i = self.check(args, kwargs)
        return None if i < 0 else (self.guards + self.live)[i]

    def describe(self, g, args, kwargs):
        """What changed, for ``compiled.why`` and the warnings: the value's name, the
        value recorded and the value now."""
        now = _evaluate(g.root, g.steps, args, kwargs)
        return "%s changed (recorded %s, now %s)" % (g.label, _short(g.value), _short(now))

    def without(self, live):
        """These guards with those of ``live`` (guards of floats) read live instead."""
        return Captures([g for g in self.guards if g not in live], self.incomplete, self.live + list(live))


def _short(v):
    if isinstance(v, np.ndarray):
        return "an array of shape %s" % (v.shape,) if v.size > 8 else repr(v.tolist())
    if isinstance(v, Tensor):
        return "a tensor of shape %s (another object)" % (tuple(v.shape),)
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _nothing(args, kwargs):
    return -1


def _accessor(i, g, ns):
    """The expression reaching guard ``g``'s value (names it needs bound in ``ns``)."""
    r = g.root
    ns["r%d" % i] = r.obj
    if r.kind == "dict":
        ns["k%d" % i] = r.key
        expr = "r%d[%r]" % (i, r.key) if type(r.key) is str and r.key.isidentifier() else "r%d[k%d]" % (i, i)
    elif r.kind == "cell":
        expr = "r%d.cell_contents" % i
    elif r.kind == "object":
        expr = "r%d" % i
    elif r.kind == "arg":
        expr = "args[%d]" % r.key
    elif r.kind == "kwarg":
        ns["k%d" % i] = r.key
        expr = "kwargs[k%d]" % i
    elif r.kind == "default":
        expr = "r%d.__defaults__[%d]" % (i, r.key)
    else:
        ns["k%d" % i] = r.key
        expr = "r%d.__kwdefaults__[k%d]" % (i, i)
    for j, (kind, k) in enumerate(g.steps):
        if kind == "attr" and k.isidentifier() and not k.startswith("__"):
            expr += "." + k
        elif kind == "attr":
            ns["a%d_%d" % (i, j)] = k
            expr = "getattr(%s, a%d_%d)" % (expr, i, j)
        else:
            ns["s%d_%d" % (i, j)] = k
            expr += "[s%d_%d]" % (i, j)
    return expr


def _generate_values(live):
    """``values(args, kwargs)``: the tuple of the live numbers' values now."""
    ns = {}
    exprs = [_accessor(i, g, ns) for i, g in enumerate(live)]
    src = "def values(args, kwargs):\n    return (%s,)\n" % ", ".join(exprs)
    exec(compile(src, "<tapegrad live numbers>", "exec"), ns)
    return ns["values"]


def _generate(guards, live=()):
    """``check(args, kwargs)``: the index of the first guard that fails, or -1, as
    straight-line Python (roots and expected values bound as names, never as
    source).  A guard of ``live`` (after ``guards``) asks only for a float."""
    ns = {"MISSING": MISSING, "_matches": _matches, "_copysign": math.copysign, "_ndarray": np.ndarray,
          "_ERRORS": _CHAIN_ERRORS}
    lines = ["def check(args, kwargs):"]
    nguards = len(guards)
    for i, g in enumerate(list(guards) + list(live)):
        r = g.root
        expr = _accessor(i, g, ns)
        ns["e%d" % i] = g.expect
        if r.kind == "object" and not g.steps:
            v = "r%d" % i
        else:
            lines += ["    try:", "        v = %s" % expr, "    except _ERRORS:", "        v = MISSING"]
            v = "v"
        k = g.kind if i < nguards else "live"
        if k == "live":
            cond = "type(%s) is float" % v
        elif k == "missing":
            cond = "%s is MISSING" % v
        elif k == "is":
            cond = "%s is e%d" % (v, i)
        elif k == "float":
            ns["e%d" % i], ns["sg%d" % i] = g.expect
            cond = "type(%s) is float and %s == e%d" % (v, v, i)
            if g.expect[0] == 0.0:      # (0.0 and -0.0: x * s differs in the sign of zeros)
                cond += " and _copysign(1.0, %s) == sg%d" % (v, i)
        elif k == "nan":
            cond = "type(%s) is float and %s != %s" % (v, v, v)
        elif k == "eq":
            ns["t%d" % i] = type(g.expect)
            cond = "type(%s) is t%d and %s == e%d" % (v, i, v, i)
        elif k == "method":
            ns["mf%d" % i], ns["mo%d" % i] = g.expect
            ns["_MethodType"] = types.MethodType
            cond = "type(%s) is _MethodType and %s.__func__ is mf%d and %s.__self__ is mo%d" % (v, v, i, v, i)
        elif k == "array":
            ns["sh%d" % i], ns["dt%d" % i], ns["b%d" % i] = g.expect
            cond = ("type(%s) is _ndarray and %s.shape == sh%d and %s.dtype == dt%d and %s.tobytes() == b%d"
                    % (v, v, i, v, i, v, i))
        else:
            ns["kd%d" % i] = k
            cond = "_matches(kd%d, e%d, %s)" % (i, i, v)
        lines.append("    if not (%s):" % cond)
        lines.append("        return %d" % i)
    lines.append("    return -1")
    exec(compile("\n".join(lines) + "\n", "<tapegrad guards>", "exec"), ns)
    return ns["check"]


# -- a recording's discovery ------------------------------------------------------------
def discover(fn, args, kwargs):
    """The ``Captures`` of a call of ``fn`` on ``args``, ``kwargs`` (evaluated now, before
    it runs)."""
    d = _Discovery(args, kwargs)
    root = _Root("object", fn, None, getattr(fn, "__qualname__", None) or type(fn).__name__, "the function compiled")
    target, self_obj = fn, None
    if isinstance(fn, types.MethodType):
        target, self_obj = fn.__func__, fn.__self__
        root = _Root("object", self_obj, None, "self", "the object of the method compiled")
    if isinstance(target, types.FunctionType):
        code = target.__code__
        npos = code.co_argcount - (1 if self_obj is not None else 0)
        names = code.co_varnames[(1 if self_obj is not None else 0):code.co_argcount]
        bound = {}
        for i, name in enumerate(names):
            if i < len(args):
                a = args[i]
                bound[name] = None if _is_array(a) else (_Root("arg", None, i, name, "an argument"), ())
        for name, a in kwargs.items():
            bound[name] = None if _is_array(a) else (_Root("kwarg", None, name, name, "an argument"), ())
        del npos
        if _is_library(target):
            pass
        else:
            d.functions.add(id(fn))
            d.keep.append(fn)
            d.function(target, self_obj, root if self_obj is not None else None, bound)
    else:
        d.follow(fn, root, ())
    for i, a in enumerate(args):        # objects passed in: the code they run (a callback, a model)
        if not _is_array(a):
            d.follow(a, _Root("arg", None, i, "argument %d" % i, "an argument"), ())
    return Captures(d.guards, d.incomplete)


def _is_array(a):
    return isinstance(a, (Tensor, np.ndarray))


# -- numbers read live: a float that changed, recorded again with a stand-in --------------
# A float guarded by value records again at every new value: a learning rate on a
# schedule would record at every call.  So when one changes, the next recording reads a
# stand-in for it (``_Operand``: the same number, which notes every use of it but as an
# operand of a tensor's arithmetic) where it is stored; when the code reads it only as
# such an operand (``_Guard.uses`` "op": its bytecode passes it to no call) and the
# stand-in saw no other use, the two recordings are compared (``Recording.number_positions``):
# when they differ only in entries holding the old and the new number as their parameter,
# the new one reads it live there at each replay, as torch.compile makes a number that
# changed a symbolic input ("automatic dynamic").
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _Watch:
    """What a stand-in saw: ``why`` the first use other than as an operand of tapegrad's
    (None: none), ``used`` whether tapegrad computed with it."""
    __slots__ = ("why", "used")

    def __init__(self):
        self.why, self.used = None, False


def _seen(self, name):
    """A use of stand-in ``self`` by its caller: tapegrad's own, or another (noted)."""
    w = self._watch
    if sys._getframe(2).f_code.co_filename.startswith(_PACKAGE_DIR):
        w.used = True
    elif w.why is None:
        w.why = name


def _noted(name):
    base = getattr(float, name)

    def method(self, *args):
        _seen(self, name)
        return base(self, *args)
    method.__name__ = name
    return method


def _operand_of_tensors(name):
    base = getattr(float, name)

    def method(self, other):
        if isinstance(other, Tensor):       # (the tensor's operator records it, with this as its parameter)
            self._watch.used = True
            return NotImplemented
        _seen(self, name)
        return base(self, other)
    method.__name__ = name
    return method


class _Operand(float):
    """A captured float during a recording (``operands``): the number itself, its uses
    noted in ``_watch``."""
    __slots__ = ("_watch",)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _seen(self, "NumPy's %s" % ufunc.__name__)
        inputs = tuple(float.__float__(v) if isinstance(v, _Operand) else v for v in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array__(self, dtype=None, copy=None):
        _seen(self, "an array made of it")
        return np.array(float.__float__(self), dtype=dtype)


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__pow__", "__rpow__"):
    setattr(_Operand, _name, _operand_of_tensors(_name))
for _name in ("__bool__", "__int__", "__float__", "__round__", "__trunc__", "__floor__", "__ceil__", "__hash__",
              "__format__", "__repr__", "__str__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
              "__neg__", "__pos__", "__abs__", "__divmod__", "__rdivmod__", "__floordiv__", "__rfloordiv__",
              "__mod__", "__rmod__", "__reduce__", "__reduce_ex__", "__getnewargs__", "is_integer",
              "as_integer_ratio", "hex", "conjugate"):
    setattr(_Operand, _name, _noted(_name))


def operand_candidates(caps, args, kwargs):
    """The guards of ``caps`` that may be read live: floats that changed since (their
    guard fails now), read by code of the recording only as operands, where a stand-in
    can be put (a global, a closure cell, an instance attribute, a dict or list item)."""
    out = []
    for g in caps.guards:
        if g.kind != "float" or g.uses != {"op"}:
            continue
        v = _evaluate(g.root, g.steps, args, kwargs)
        if type(v) is float and v != g.expect[0] and _place(g, args, kwargs) is not None:
            out.append(g)
    return out


def _place(g, args, kwargs):
    """(container, key) where guard ``g``'s value is stored, or None: a module's globals,
    a cell (key None), an instance's ``__dict__``, a dict or a list."""
    r, steps = g.root, g.steps
    if not steps:
        if r.kind == "dict" and type(r.obj) is dict:
            return r.obj, r.key
        if r.kind == "cell":
            return r.obj, None
        return None
    parent = _evaluate(r, steps[:-1], args, kwargs)
    kind, k = steps[-1]
    if kind == "attr":
        d = getattr(parent, "__dict__", None)
        if type(d) is dict and k in d and not isinstance(getattr(type(parent), k, None), property):
            return d, k
        return None
    if type(parent) is dict and k in parent or type(parent) is list and type(k) is int:
        return parent, k
    return None


class StandIns:
    """Stand-ins (``_Operand``) put where the values of some guards are stored, for one
    recording: ``put()`` before it, ``take()`` after (each one's value back unless the
    call changed it), ``numbers()`` those the call used only as operands of tapegrad's."""

    def __init__(self, guards, args, kwargs):
        self.items = []
        for g in guards:
            place = _place(g, args, kwargs)
            v = _evaluate(g.root, g.steps, args, kwargs)
            s = _Operand(v)
            s._watch = _Watch()
            self.items.append((g, place, v, s))

    def put(self):
        for g, (c, k), v, s in self.items:
            if k is None:
                c.cell_contents = s
            else:
                c[k] = s

    def take(self):
        for g, (c, k), v, s in self.items:
            now = c.cell_contents if k is None else c.get(k) if type(c) is dict else c[k]
            if now is s:
                if k is None:
                    c.cell_contents = v
                else:
                    c[k] = v

    def numbers(self):
        """[(guard, its value)] of the stand-ins used only as operands of tapegrad's."""
        return [(g, v) for g, _, v, s in self.items if s._watch.why is None and s._watch.used]
