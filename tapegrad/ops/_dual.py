"""The elementwise rules in NumPy, for forward mode and second order.

An elementwise op's Jacobian is diagonal, so its reverse rule with the adjoint ``g``
replaced by a tangent is also its tangent rule: the one rule string of each row in
``elementwise.py`` gives the reverse on a batch of adjoints, the tangent on a batch
of tangents (``numpy_rule``), and, differentiated once more by ``dual_rule``, the
curvature term of the forward-over-reverse sweep (how the adjoint an input gets
moves when the values the rule reads move along their tangents).

Batches carry a leading axis of K directions: values are flat ``(n,)`` arrays,
tangents and batched adjoints ``(K, n)``; NumPy's broadcasting pairs them.  A
tangent of None is zero.  ``gather_columns`` / ``scatter_columns`` move a batch
between an operand's elements and the output's (broadcasting, views, gathers).
"""
import ast

import numpy as np

_SPECIAL = {}


def _special(name):
    f = _SPECIAL.get(name)
    if f is None:
        import scipy.special
        f = _SPECIAL[name] = getattr(scipy.special, name)
    return f


def _sign(x):
    s = np.sign(x)
    return np.where(s != s, 0.0, s)         # sign(nan) is 0, as the kernels' sign


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


def _ipow(x, e):
    if np.ndim(e) == 0:         # (the kernels' special cases: a square is a product)
        if e == 0.0:
            return np.ones_like(np.asarray(x, np.float64))
        if e == 1.0:
            return x
        if e == 2.0:
            return x * x
        # the kernels' and PyTorch's scalar pow: by sqrt, whose values at -0.0 and -inf are not
        # pow's (x ** 0.5: -0.0 and nan, not 0.0 and inf; x ** -0.5: -inf and nan, not inf and 0)
        if e == 0.5:
            return np.sqrt(x)
        if e == -0.5:
            return 1.0 / np.sqrt(x)
        return np.power(x, e)
    return power(x, e)


def _where(c, a, b):
    if np.ndim(c) == 0:         # a condition on the parameters alone: one branch
        return a if c else b
    return np.where(c, a, b)


def _polygamma(x, n):
    return _special("polygamma")(np.asarray(n).astype(np.int64), x)


# the value of every function a rule may call, on arrays (see kernels/codegen.py HELPERS, SPECIAL)
NUMPY_FUNCTIONS = {
    "where": _where, "ipow": _ipow, "sign": _sign, "abs": np.abs, "floor": np.floor, "trunc": np.trunc,
    "fmod": np.fmod, "nan_like": lambda x: np.nan, "cos": np.cos, "sin": np.sin, "cosh": np.cosh,
    "sinh": np.sinh, "exp": np.exp, "log": np.log, "log1p": np.log1p, "sqrt": np.sqrt, "tanh": np.tanh,
    "lgamma": lambda x: _special("gammaln")(x), "digamma": lambda x: _special("psi")(x),
    "polygamma": _polygamma, "i0": lambda x: _special("i0")(x), "i1": lambda x: _special("i1")(x),
    "i0e": lambda x: _special("i0e")(x), "i1e": lambda x: _special("i1e")(x),
    "bessel_j0": lambda x: _special("j0")(x), "bessel_j1": lambda x: _special("j1")(x),
}


class _Conditions(ast.NodeTransformer):
    """``a and b`` of a rule's condition, elementwise."""

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        fn = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
        out = node.values[0]
        for v in node.values[1:]:
            out = ast.Call(ast.Attribute(ast.Name("np", ast.Load()), fn, ast.Load()), [out, v], [])
        return out


def _lazy(make):
    """``make()`` compiled at the first call (importing tapegrad compiles no rule; a rule
    calling an unknown function is refused by ``kernels.codegen.check_row``)."""
    cell = []

    def f(*args):
        if not cell:
            cell.append(make())
        return cell[0](*args)
    return f


def numpy_rule(rule, params):
    """The rule as a NumPy function of ``params`` (its value only), made at its first call."""
    return _lazy(lambda: _numpy_rule(rule, params))


def _numpy_rule(rule, params):
    tree = ast.fix_missing_locations(_Conditions().visit(ast.parse(rule, mode="eval")))
    src = "lambda %s: %s" % (params, ast.unparse(tree))
    ns = dict(NUMPY_FUNCTIONS, np=np)
    with np.errstate(all="ignore"):
        return eval(compile(src, "<rule %s>" % rule, "eval"), ns)


# -- the rule differentiated: each node a function of the environment giving
#    (value, tangent or None) ---------------------------------------------------------
def _add(u, v):
    if u is None:
        return v
    if v is None:
        return u
    return u + v


def _mul(t, v):
    return None if t is None else t * v


def _neg(t):
    return None if t is None else -t


def _safe_ratio(num, den):
    """num / den with 0 where den is 0 (the rules' 0.5 limits at 0 are taken care of there)."""
    return np.where(den == 0.0, 0.0, num / np.where(den == 0.0, 1.0, den))


def _bessel_ratio_limit(u, f0, f1):
    """f0(u) - f1(u) / u, 0.5 at 0 (i1' and bessel_j1'; their 0.5 at 0)."""
    small = np.abs(u) <= 2.220446049250313e-16
    return np.where(small, 0.5, f0(u) - f1(u) / np.where(small, 1.0, u))


# derivative of f at u, for each function of one argument a rule may call
_F = NUMPY_FUNCTIONS
_DERIVATIVES = {
    "abs": _sign, "cos": lambda u: -np.sin(u), "sin": np.cos, "cosh": np.sinh, "sinh": np.cosh, "exp": np.exp,
    "log": lambda u: 1.0 / u, "log1p": lambda u: 1.0 / (1.0 + u), "sqrt": lambda u: 0.5 / np.sqrt(u),
    "tanh": lambda u: 1.0 - np.tanh(u) * np.tanh(u),
    "lgamma": _F["digamma"], "digamma": lambda u: _polygamma(u, 1),
    "i0": _F["i1"], "i1": lambda u: _bessel_ratio_limit(u, _F["i0"], _F["i1"]),
    "i0e": lambda u: _F["i1e"](u) - _sign(u) * _F["i0e"](u),
    "i1e": lambda u: np.where(np.abs(u) <= 2.220446049250313e-16, 0.5,
                              _F["i0e"](u) - _F["i1e"](u) * (_sign(u) + 1.0 / np.where(u == 0.0, 1.0, u))),
    "bessel_j0": lambda u: -_F["bessel_j1"](u),
    "bessel_j1": lambda u: _bessel_ratio_limit(u, _F["bessel_j0"], _F["bessel_j1"]),
}
_STEPS = frozenset(("sign", "floor", "trunc", "nan_like"))      # zero derivative


def _compile(node):
    if isinstance(node, ast.Expression):
        return _compile(node.body)
    if isinstance(node, ast.Constant):
        c = node.value
        return lambda env: (c, None)
    if isinstance(node, ast.Name):
        name = node.id
        return lambda env: env[name]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        f = _compile(node.operand)

        def neg(env):
            u, du = f(env)
            return -u, _neg(du)
        return neg
    if isinstance(node, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
        # a condition: its value only (conditions are not differentiated)
        names = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - set(NUMPY_FUNCTIONS))
        test = _numpy_rule(ast.unparse(node), ", ".join(names) or "_=None")
        return lambda env: (test(*[env[k][0] for k in names]), None)
    if isinstance(node, ast.BinOp):
        fa, fb = _compile(node.left), _compile(node.right)
        op = type(node.op)
        if op is ast.Add:
            def f(env):
                (u, du), (v, dv) = fa(env), fb(env)
                return u + v, _add(du, dv)
        elif op is ast.Sub:
            def f(env):
                (u, du), (v, dv) = fa(env), fb(env)
                return u - v, _add(du, _neg(dv))
        elif op is ast.Mult:
            def f(env):
                (u, du), (v, dv) = fa(env), fb(env)
                return u * v, _add(_mul(du, v), _mul(dv, u))
        elif op is ast.Div:
            def f(env):
                (u, du), (v, dv) = fa(env), fb(env)
                q = u / v
                return q, _add(_mul(du, 1.0 / v), _mul(dv, -q / v))
        else:
            raise NotImplementedError("a rule's %s has no second-order form" % op.__name__)
        return f
    if isinstance(node, ast.Call):
        name = node.func.id
        args = [_compile(a) for a in node.args]
        if name not in NUMPY_FUNCTIONS:
            raise NotImplementedError("a rule calls %s(), which has no NumPy form in tapegrad/ops/_dual.py" % name)
        value = NUMPY_FUNCTIONS[name]
        if name == "where":
            fc, fa, fb = args

            def where(env):
                c = fc(env)[0]
                if np.ndim(c) == 0:
                    return (fa if c else fb)(env)
                (u, du), (v, dv) = fa(env), fb(env)
                if du is None and dv is None:
                    return np.where(c, u, v), None
                return np.where(c, u, v), np.where(c, 0.0 if du is None else du, 0.0 if dv is None else dv)
            return where
        if name == "ipow":
            fu, fe = args

            def ipow(env):
                (u, du), (e, de) = fu(env), fe(env)
                y = _ipow(u, e)
                t = None
                if du is not None and np.ndim(e) == 0:       # (a fixed exponent: no mask)
                    if e == 1.0:
                        t = du
                    elif e == 2.0:
                        t = du * (2.0 * u)
                    elif e != 0.0:
                        t = du * (e * _ipow(u, e - 1.0))
                elif du is not None:
                    t = du * np.where(e == 0.0, 0.0, e * _ipow(u, e - 1.0))
                if de is not None:
                    with np.errstate(all="ignore"):
                        t = _add(t, de * np.where(u == 0.0, 0.0, y * np.log(np.where(u == 0.0, 1.0, u))))
                return y, t
            return ipow
        if name == "fmod":
            fu, fv = args

            def fmod(env):
                (u, du), (v, dv) = fu(env), fv(env)
                return np.fmod(u, v), _add(du, _mul(dv, -np.trunc(u / v)))
            return fmod
        if name == "polygamma":
            fu, fn = args

            def polygamma(env):
                (u, du), (n, _) = fu(env), fn(env)
                return _polygamma(u, n), _mul(du, _polygamma(u, n + 1.0))
            return polygamma
        if name in _STEPS:
            fu = args[0]
            return lambda env: (value(fu(env)[0]), None)
        deriv = _DERIVATIVES[name]
        fu = args[0]

        def call(env):
            u, du = fu(env)
            return value(u), (None if du is None else du * deriv(u))
        return call
    raise NotImplementedError("a rule's %s has no second-order form" % type(node).__name__)


def dual_rule(rule):
    """``f(env) -> (value, tangent)``: the rule and its directional derivative, where
    ``env`` maps each name the rule reads to (value, tangent or None).  (The sweeps
    call the rules under ``np.errstate(all="ignore")``: a rule's nan and inf are
    the kernels'.)"""
    def make():
        f = _compile(ast.parse(rule, mode="eval"))

        return f
    return _lazy(make)


# -- batches between an operand's elements and the output's ---------------------------
def as_batch(r, K, n):
    """A rule's result as a (K, n) float64 batch (a rule may fold to a number)."""
    if type(r) is np.ndarray and r.shape == (K, n) and r.dtype == np.float64:
        return r
    r = np.asarray(r, np.float64)
    if r.shape == (K, n):
        return r
    return np.broadcast_to(r, (K, n)).copy()


def gather_columns(t, idx):
    """``t[:, idx]``: the elements of a batch at ``idx``."""
    return np.take(t, idx, axis=1)


def scatter_columns(t, idx, n):
    """The transpose of ``gather_columns``: column ``i`` of ``t`` added into column ``idx[i]``."""
    K = t.shape[0]
    if K == 1:
        return np.bincount(idx, weights=t[0], minlength=n)[None, :]
    flat = (idx[None, :] + (np.arange(K, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, weights=t.ravel(), minlength=K * n).reshape(K, n)
