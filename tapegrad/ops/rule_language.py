"""The rule language: what an elementwise op's rules may call, once for every back end.

A rule (``"g * cos(x)"``, a row of ``ops/elementwise.py``) is a Python expression over
the entry's variables, numbers, ``+ - * /``, comparisons and ``and``/``or`` (in
conditions), and calls of the functions in ``FUNCTIONS``.  Each function says how
every back end spells it:

``numpy``     its value on arrays (forward mode and second order in NumPy, ``ops/_dual.py``);
``kernel``    its name in the generated kernels' namespace (``kernels/codegen.py``: a
              ``math`` function, a helper of its header, ``abs``, or a special function);
``tensor``    the op of the elementwise tables that computes it on tensors, by name
              (create_graph; ``ops/elementwise.py`` resolves it at import);
``partials``  one rule-language template per argument, its partial derivative
              (``{0}``, ``{1}``: the arguments), None where it is not differentiable
              (an order, a parameter); ``()`` for a step (zero derivative).

``dual`` differentiates a rule with these partials: the one differentiator forward
mode, the tangent programs and the Hessian programs use.  ``where`` is the one
structural form (its condition is not differentiated).  A function missing here, or
a row whose back ends do not all know it, is an ``OpDefinitionError`` at import
(``check_functions``; ``kernels.codegen.check_row`` for the rules).
"""
import ast
from typing import Callable, NamedTuple

import numpy as np

_SPECIAL = {}


def _scipy(name):
    """scipy.special's ``name``, imported at its first use (``import tapegrad`` imports no SciPy)."""
    def f(*args):
        g = _SPECIAL.get(name)
        if g is None:
            import scipy.special
            g = _SPECIAL[name] = getattr(scipy.special, name)
        return g(*args)
    f.__name__ = name
    return f


def _sign(x):
    s = np.sign(x)
    return np.where(s != s, 0.0, s)         # sign(nan) is 0, as the kernels' sign


def ipow(x, e):
    """``x ** e`` with the kernels' values: a square is a product, ``x ** 0.5`` and
    ``x ** -0.5`` go by sqrt (PyTorch's scalar pow: -0.0 and nan at -0.0 and -inf,
    where libm's pow gives 0.0 and inf)."""
    if np.ndim(e) == 0:
        if e == 0.0:
            return np.ones_like(np.asarray(x, np.float64))
        if e == 1.0:
            return x
        if e == 2.0:
            return x * x
        if e == 0.5:
            return np.sqrt(x)
        if e == -0.5:
            return 1.0 / np.sqrt(x)
        return np.power(x, e)
    return power(x, e)


def power(x, e):
    """``np.power(x, e)`` with C's pow values (PyTorch's for a tensor exponent): NumPy takes
    an exponent of 0.5 that its loop reads at stride 0 (one broadcast element) as sqrt,
    -0.0 at -0.0 and nan at -inf where pow gives 0.0 and inf."""
    out = np.power(x, e)
    if type(e) is not np.ndarray or e.dtype.kind != "f":
        return out
    if e.size == 1:
        if e.item() != 0.5:
            return out
        half = True
    elif e.shape != out.shape or 0 in e.strides:
        half = e == 0.5
        if not half.any():
            return out
    else:
        return out
    out = np.where(half & (x == -np.inf), np.inf, out)
    return np.where(half & (x == 0.0), 0.0, out).astype(out.dtype, copy=False)


def _where(c, a, b):
    if np.ndim(c) == 0:         # a condition on the parameters alone: one branch
        return a if c else b
    return np.where(c, a, b)


def _polygamma(x, n):
    return _scipy("polygamma")(np.asarray(n).astype(np.int64), x)


class Fn(NamedTuple):
    numpy: Callable
    kernel: str
    tensor: str
    partials: tuple


_STEP = ()
_TINY = "2.220446049250313e-16"     # (where the Bessel ratios take their limit 0.5 at 0)
FUNCTIONS = {
    "abs": Fn(np.abs, "abs", "abs", ("sign({0})",)),
    "sign": Fn(_sign, "sign", "sign", _STEP),
    "floor": Fn(np.floor, "floor", "floor", _STEP),
    "ceil": Fn(np.ceil, "ceil", "ceil", _STEP),
    "trunc": Fn(np.trunc, "trunc", "trunc", _STEP),
    "nan_like": Fn(lambda x: np.nan, "nan_like", "nan_like", _STEP),
    "cos": Fn(np.cos, "cos", "cos", ("(-sin({0}))",)),
    "sin": Fn(np.sin, "sin", "sin", ("cos({0})",)),
    "cosh": Fn(np.cosh, "cosh", "cosh", ("sinh({0})",)),
    "sinh": Fn(np.sinh, "sinh", "sinh", ("cosh({0})",)),
    "exp": Fn(np.exp, "exp", "exp", ("exp({0})",)),
    "tanh": Fn(np.tanh, "tanh", "tanh", ("(1.0 - tanh({0}) * tanh({0}))",)),     # (Mish's rule)
    "exp2": Fn(np.exp2, "exp2", "exp2", ("(0.6931471805599453 * exp2({0}))",)),
    "log": Fn(np.log, "log", "log", ("(1.0 / {0})",)),
    "log1p": Fn(np.log1p, "log1p", "log1p", ("(1.0 / (1.0 + {0}))",)),
    "sqrt": Fn(np.sqrt, "sqrt", "sqrt", ("(0.5 / sqrt({0}))",)),
    "lgamma": Fn(_scipy("gammaln"), "lgamma", "lgamma", ("digamma({0})",)),
    "digamma": Fn(_scipy("psi"), "digamma", "digamma", ("polygamma({0}, 1.0)",)),
    "polygamma": Fn(_polygamma, "polygamma", "polygamma", ("polygamma({0}, {1} + 1.0)", None)),
    "i0": Fn(_scipy("i0"), "i0", "i0", ("i1({0})",)),
    "i1": Fn(_scipy("i1"), "i1", "i1", ("where(abs({0}) <= %s, 0.5, i0({0}) - i1({0}) / {0})" % _TINY,)),
    "i0e": Fn(_scipy("i0e"), "i0e", "i0e", ("(i1e({0}) - sign({0}) * i0e({0}))",)),
    "i1e": Fn(_scipy("i1e"), "i1e", "i1e",
              ("where(abs({0}) <= %s, 0.5, i0e({0}) - i1e({0}) * (sign({0}) + 1.0 / {0}))" % _TINY,)),
    "bessel_j0": Fn(_scipy("j0"), "bessel_j0", "bessel_j0", ("(-bessel_j1({0}))",)),
    "bessel_j1": Fn(_scipy("j1"), "bessel_j1", "bessel_j1",
                    ("where(abs({0}) <= %s, 0.5, bessel_j0({0}) - bessel_j1({0}) / {0})" % _TINY,)),
    "fmod": Fn(np.fmod, "fmod", "fmod", ("1.0", "(-trunc({0} / {1}))")),
    "ipow": Fn(ipow, "ipow", "ipow", ("where({1} == 0.0, 0.0, {1} * ipow({0}, {1} - 1.0))",
                                      "where({0} == 0.0, 0.0, ipow({0}, {1}) * log(where({0} == 0.0, 1.0, {0})))")),
    "where": Fn(_where, "where", "where", None),         # (structural: see ``dual``)
}

NUMPY = {name: fn.numpy for name, fn in FUNCTIONS.items()}      # the namespace rules run in on arrays


class NoDerivative(Exception):
    """A rule has no directional derivative in the rule language (it calls a function of
    an argument it is not differentiable in, along a nonzero tangent)."""


# -- the rule differentiated: (value, tangent or None) source ------------------------
def plus(u, v):
    """The source of ``u + v``, where None stands for zero."""
    if u is None:
        return v
    if v is None:
        return u
    return "(%s + %s)" % (u, v)


def times(t, v):
    """The source of ``t * v``, where a tangent ``t`` of None stands for zero."""
    return None if t is None else "(%s * %s)" % (t, v)


def dual(rule, env):
    """``(value, tangent)`` source of the expression ``rule``, ``env`` mapping each name
    it reads to its (value, tangent or None) source; the tangent is None where zero."""
    return _dual(ast.parse(rule, mode="eval").body, env)


def _value(node, env):
    class Values(ast.NodeTransformer):
        def visit_Name(self, n):
            return ast.parse(env[n.id][0], mode="eval").body if n.id in env else n
    return ast.unparse(Values().visit(ast.parse(ast.unparse(node), mode="eval").body))


def _dual(node, env):
    if isinstance(node, ast.Constant):
        return repr(float(node.value)) if isinstance(node.value, (int, float)) else repr(node.value), None
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        u, du = _dual(node.operand, env)
        return "(-%s)" % u, None if du is None else "(-%s)" % du
    if isinstance(node, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
        return "(%s)" % _value(node, env), None          # a condition: not differentiated
    if isinstance(node, ast.BinOp):
        (u, du), (v, dv) = _dual(node.left, env), _dual(node.right, env)
        op = type(node.op)
        if op is ast.Add:
            return "(%s + %s)" % (u, v), plus(du, dv)
        if op is ast.Sub:
            return "(%s - %s)" % (u, v), plus(du, None if dv is None else "(-%s)" % dv)
        if op is ast.Mult:
            return "(%s * %s)" % (u, v), plus(times(du, v), times(dv, u))
        if op is ast.Div:
            q = "(%s / %s)" % (u, v)
            return q, plus(None if du is None else "(%s / %s)" % (du, v),
                            None if dv is None else "(-%s * %s / %s)" % (dv, q, v))
        raise NoDerivative("a rule's %s has no derivative in the rule language" % op.__name__)
    if isinstance(node, ast.Call):
        name = node.func.id
        fn = FUNCTIONS.get(name)
        if fn is None:
            raise NoDerivative("a rule calls %s(), which is not a function of the rule language "
                               "(tapegrad/ops/rule_language.py)" % name)
        args = [_dual(a, env) for a in node.args]
        values = [a for a, _ in args]
        value = "%s(%s)" % (name, ", ".join(values))
        if name == "where":
            (c, _), (a, da), (b, db) = args
            if da is None and db is None:
                return value, None
            return value, "where(%s, %s, %s)" % (c, da or "0.0", db or "0.0")
        tangent = None
        for j, (_, du) in enumerate(args):
            if du is None:
                continue
            partial = fn.partials[j] if j < len(fn.partials) else (None if fn.partials else "")
            if partial is None:
                raise NoDerivative("%s() is not differentiable in its argument %d" % (name, j + 1))
            if partial:         # ("": a step, no derivative)
                tangent = plus(tangent, times(du, partial.format(*values)))
        return value, tangent
    raise NoDerivative("a rule's %s has no derivative in the rule language" % type(node).__name__)


def called(rule):
    """The names of the functions ``rule`` calls."""
    return {n.func.id for n in ast.walk(ast.parse(rule, mode="eval"))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def check_functions(kernel_names, tensor_names):
    """Raise OpDefinitionError unless every function of the language is known to every
    back end (the kernels' namespace ``kernel_names``, the tensor ops ``tensor_names``)
    and its partial derivatives are rules calling functions of the language."""
    from ..core.registry import OpDefinitionError
    for name, fn in FUNCTIONS.items():
        where = "rule function %r (tapegrad/ops/rule_language.py)" % name
        if not callable(fn.numpy):
            raise OpDefinitionError("%s has no NumPy evaluator" % where)
        if fn.kernel not in kernel_names:
            raise OpDefinitionError("%s: its kernel spelling %r is not in the kernels' namespace" % (where, fn.kernel))
        if fn.tensor not in tensor_names:
            raise OpDefinitionError("%s: its tensor spelling %r is no op of the elementwise tables" % (where, fn.tensor))
        for p in fn.partials or ():
            if p:
                unknown = called(p.format("u", "v")) - set(FUNCTIONS)
                if unknown:
                    raise OpDefinitionError("%s: its derivative %r calls %s, not a function of the language"
                                            % (where, p, ", ".join(sorted(unknown))))
