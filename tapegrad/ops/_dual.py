"""The elementwise rules in NumPy, for forward mode and second order.

An elementwise op's Jacobian is diagonal, so its reverse rule with the adjoint ``g``
replaced by a tangent is also its tangent rule: the one rule string of each row in
``elementwise.py`` gives the reverse on a batch of adjoints, the tangent on a batch
of tangents (``numpy_rule``), and, differentiated once more (``dual_rule``, by the
rule language's ``dual``), the curvature term of the forward-over-reverse sweep (how
the adjoint an input gets moves when the values the rule reads move along their
tangents).

Batches carry a leading axis of K directions: values are flat ``(n,)`` arrays,
tangents and batched adjoints ``(K, n)``; NumPy's broadcasting pairs them.  A
tangent of None is zero.  ``gather_columns`` / ``scatter_columns`` move a batch
between an operand's elements and the output's (broadcasting, views, gathers).
"""
import ast

import numpy as np

from .rule_language import NUMPY, dual, power  # noqa: F401  (power: the elementwise forwards' pow)


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
    return _lazy(lambda: _numpy_function(rule, params))


def _numpy_function(expr, params):
    tree = ast.fix_missing_locations(_Conditions().visit(ast.parse(expr, mode="eval")))
    src = "lambda %s: %s" % (params, ast.unparse(tree))
    ns = dict(NUMPY, np=np)
    with np.errstate(all="ignore"):
        return eval(compile(src, "<rule %s>" % expr, "eval"), ns)


def dual_rule(rule):
    """``f(env) -> (value, tangent)``: the rule and its directional derivative, where
    ``env`` maps each name the rule reads to (value, tangent or None).  The rule
    language's ``dual`` writes both as expressions, once for each set of names whose
    tangent is not None.  (The sweeps call the rules under ``np.errstate(all="ignore")``:
    a rule's nan and inf are the kernels'.)"""
    made = {}

    def f(env):
        names = tuple(sorted(env))
        moving = tuple(k for k in names if env[k][1] is not None)
        key = (names, moving)
        g = made.get(key)
        if g is None:
            value, tangent = dual(rule, {k: (k, "_t_" + k if k in moving else None) for k in names})
            g = made[key] = _numpy_function("(%s, %s)" % (value, tangent or "None"),
                                            ", ".join(names + tuple("_t_" + k for k in moving)))
        return g(*[env[k][0] for k in names], *[env[k][1] for k in moving])
    return f


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
