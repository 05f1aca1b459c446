"""PyTorch's documented signatures of the names tapegrad has, and tapegrad's own,
in one comparable form (used by tests/test_signatures.py).

    python tests/torch_signatures.py      # (with torch installed) rewrites tests/data/torch_signatures.json

A signature is a list of parameters ``[name, kind, default]``: kind is "pos"
(positional or keyword), "posonly", "kw" (keyword-only), "*" or "**"; default is
None for a required parameter, else a normalized spelling of the default value.
PyTorch's builtins have no ``inspect.signature``: their signature is parsed from the
first lines of their docstring (``add(input, other, *, alpha=1, out=None) -> Tensor``),
every overload the docstring lists, merged into one (a parameter that some overloads
lack becomes optional).  Python functions and classes are read with ``inspect``.
"""
import ast
import inspect
import json
import os
import re
import sys

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "torch_signatures.json")

# -- tapegrad's public names, by namespace ------------------------------------------------
# (namespace, tapegrad module path, torch module path, what the names are)
NAMESPACES = [
    ("torch", "tapegrad", "torch", "functions"),
    ("Tensor", "tapegrad.Tensor", "torch.Tensor", "methods"),
    ("torch.nn.functional", "tapegrad.nn.functional", "torch.nn.functional", "functions"),
    ("torch.linalg", "tapegrad.linalg", "torch.linalg", "functions"),
    ("torch.autograd", "tapegrad.autograd", "torch.autograd", "functions"),
    ("torch.autograd.functional", "tapegrad.autograd.functional", "torch.autograd.functional", "functions"),
    ("torch.optim", "tapegrad.optim", "torch.optim", "classes"),
    ("torch.nn", "tapegrad.nn", "torch.nn", "classes"),
    ("torch.nn.init", "tapegrad.nn.init", "torch.nn.init", "functions"),
    ("torch.special", "tapegrad.special", "torch.special", "functions"),
    ("torch.fft", "tapegrad.fft", "torch.fft", "functions"),
    ("torch.func", "tapegrad.func", "torch.func", "functions"),
    ("torch.distributions", "tapegrad.distributions", "torch.distributions", "classes"),
]


def _resolve(path):
    import importlib
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(path)


def tapegrad_names():
    """{qualified torch-style name: tapegrad object} for every public function,
    Tensor method and class constructor tapegrad has (dunder methods excluded: the
    operators are bound to recorders and compared by behaviour elsewhere)."""
    import types
    out = {}
    for ns, tg_path, _, what in NAMESPACES:
        mod = _resolve(tg_path)
        names = sorted(vars(mod)) if what != "methods" else sorted(n for n in dir(mod))
        for name in names:
            if name.startswith("_"):
                continue
            if what == "methods":
                v = inspect.getattr_static(mod, name)
                if isinstance(v, (property, staticmethod, classmethod)) or not callable(v):
                    continue
                out["%s.%s" % (ns, name)] = v
                continue
            v = getattr(mod, name)
            if isinstance(v, types.ModuleType):
                continue
            if what == "classes":
                if isinstance(v, type) and getattr(v, "__module__", "").startswith(tg_path):
                    out["%s.%s" % (ns, name)] = v
                continue
            if isinstance(v, type):
                continue
            # (a function only imported into this namespace, from a module outside it, is not its own)
            if callable(v) and (getattr(v, "__module__", None) or "").startswith(tg_path):
                out["%s.%s" % (ns, name)] = v
    return out


# -- normalized forms ----------------------------------------------------------------------
def norm_default(v):
    """One spelling for a default value, whichever side it comes from (a doc string
    such as "1e-08" or "torch.strided", or a Python value)."""
    if v is inspect.Parameter.empty:
        return None
    if isinstance(v, str) and not isinstance(v, _DocDefault):
        return repr(v)
    if isinstance(v, _DocDefault):
        s = str(v).strip()
        try:
            return norm_default(ast.literal_eval(s))
        except (ValueError, SyntaxError):
            return s
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, (int, float)):
        return repr(float(v))
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(norm_default(x) for x in v) + ")"
    if inspect.ismodule(v):             # (pickle_module=pickle)
        return v.__name__
    mod = type(v).__module__
    if mod.startswith("numpy") and hasattr(v, "name"):      # a tapegrad dtype
        return "torch." + v.name
    if mod.startswith("torch"):
        return str(v)
    return "<%s>" % type(v).__name__


class _DocDefault(str):
    """A default as written in a docstring."""


def _split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def parse_doc_params(params):
    """``"input, dim, keepdim=False, *, dtype=None"`` as normalized parameters."""
    out, kw = [], False
    for p in _split_top(params.replace("\\*", "*")):
        if p == "*":
            kw = True
            continue
        if p.startswith("**"):
            out.append([p[2:].split(":")[0].strip(), "**", None])
            continue
        if p.startswith("*"):
            out.append([p[1:].split(":")[0].strip(), "*", None])
            kw = True
            continue
        name, eq, default = p.partition("=")
        name = name.split(":")[0].strip()
        name = name.split()[-1] if name else name      # ("bool pivot": a C++ type before the name)
        out.append([name, "kw" if kw else "pos", norm_default(_DocDefault(default)) if eq else None])
    return out


def merge_overloads(overloads):
    """One signature for several overloads: parameters in first-seen order (within
    each kind), a parameter missing from some overload becomes optional (None)."""
    if len(overloads) == 1:
        return overloads[0]
    order, info = [], {}
    for ov in sorted(overloads, key=len, reverse=True):
        for name, kind, default in ov:
            if name not in info:
                order.append(name)
                info[name] = [name, kind, default]
            elif info[name][2] is None and default is not None:
                info[name][2] = default
    for name in order:
        if any(name not in [p[0] for p in ov] for ov in overloads) and info[name][2] is None \
                and info[name][1] not in ("*", "**"):
            info[name][2] = "None"
    rank = {"posonly": 0, "pos": 1, "*": 2, "kw": 3, "**": 4}
    return sorted((info[n] for n in order), key=lambda p: rank[p[1]])


def signature_of(obj, drop_first=False):
    """Normalized parameters of a Python callable (None if it has no signature)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "posonly", inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
             inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.KEYWORD_ONLY: "kw",
             inspect.Parameter.VAR_KEYWORD: "**"}
    params = list(sig.parameters.values())
    if drop_first and params and params[0].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                    inspect.Parameter.POSITIONAL_OR_KEYWORD):
        params = params[1:]
    return [[p.name, kinds[p.kind], norm_default(p.default)] for p in params]


def class_signature(cls):
    """A class's constructor: its ``__init__``, or its ``__new__`` where ``__init__`` is
    a pass-through ``(*args, **kwargs)`` (torch.nn.Parameter)."""
    sig = signature_of(cls.__init__, drop_first=True)
    if sig is not None and [p[1] for p in sig] == ["*", "**"] and inspect.isfunction(cls.__new__):
        sig = signature_of(cls.__new__, drop_first=True)
    return sig


def tapegrad_signature(qualname, obj):
    if isinstance(obj, type):
        return class_signature(obj)
    return signature_of(obj, drop_first=qualname.startswith("Tensor."))


# -- PyTorch's side (needs torch) --------------------------------------------------------
def _doc_overloads(name, doc):
    """The parameter lists of the docstring's signature lines (``name(...) -> ...``)."""
    # (torch.linalg's docstrings name the function with its namespace: ``linalg.solve(A, B, ...)``)
    pat = re.compile(r"^\s*(?:\.\. function:: |\.\. method:: )?(?:torch\.)?(?:linalg\.)?%s\(" % re.escape(name))
    out = []
    lines = (doc or "").splitlines()[:400]
    first = next((k for k, line in enumerate(lines) if line.strip()), 0)
    for k, line in enumerate(lines):
        m = pat.match(line)
        if not m:
            continue
        depth, i = 1, m.end()
        while i < len(line) and depth:
            depth += {"(": 1, ")": -1}.get(line[i], 0)
            i += 1
        rest = line[i:].strip()
        # a signature line returns something, or is the docstring's first line
        if depth == 0 and (rest.startswith("->") or (not rest and k == first)):
            out.append(parse_doc_params(line[m.end():i - 1]))
    return out


def torch_signature(qualname):
    """PyTorch's signature of ``qualname`` ("torch.sum", "Tensor.view", "torch.nn.Linear"),
    or None where torch has no such name, or "undocumented" where it has no
    signature to read."""
    ns, _, name = qualname.rpartition(".")
    path = {n: t for n, _, t, _ in NAMESPACES}[ns]
    try:
        owner = _resolve(path)
        obj = inspect.getattr_static(owner, name) if ns == "Tensor" else getattr(owner, name)
    except (AttributeError, ImportError):
        return None
    if isinstance(obj, type):
        return class_signature(obj)
    if ns == "Tensor" and isinstance(obj, (staticmethod, classmethod)):
        obj = getattr(owner, name)
    ovs = _doc_overloads(name, getattr(obj, "__doc__", None))
    if ovs:
        return merge_overloads(ovs)
    if inspect.isfunction(obj):
        sig = signature_of(obj, drop_first=(ns == "Tensor"))
        if sig is not None and not (len(sig) == 2 and sig[0][1] == "*" and sig[1][1] == "**"):
            return sig
    return "undocumented"


def derive(names):
    return {q: torch_signature(q) for q in sorted(names)}


def main():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import torch
    data = {"torch_version": torch.__version__.split("+")[0], "signatures": derive(tapegrad_names())}
    os.makedirs(os.path.dirname(DATA), exist_ok=True)
    with open(DATA, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %d signatures to %s" % (len(data["signatures"]), DATA))


if __name__ == "__main__":
    main()
