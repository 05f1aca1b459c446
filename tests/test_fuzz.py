"""Differential fuzzing of tapegrad's reverse mode with random programs.

Hypothesis draws a program one instruction at a time (op, operands among the
values computed so far, parameters); a small interpreter turns each instruction
into a line of Python that calls tapegrad, runs it at once, and keeps it only when
the values it produced are safe for finite differences: finite and moderate,
inside the op's domain (log, sqrt, division, fractional powers) and at least
``MARGIN`` away from every kink or discontinuity (abs, relu, clamp, max/min ties,
floor/round/sign, the condition of ``where``).  An instruction that is not safe
is replaced by ``tanh`` of its operand.  The accepted lines form a function
``f(x0, x1, ...) -> scalar`` whose source is the reproduction printed on failure.

Checks: (1) ``gradcheck`` of every program against central differences,
(2) ``create_graph=False`` and ``create_graph=True`` (and ``.backward()``) give
the same gradients, (3) ``gradgradcheck`` on smaller programs without kinked ops.

Profiles: bounded and derandomized by default (CI); ``TAPEGRAD_FUZZ=long`` runs
``TAPEGRAD_FUZZ_EXAMPLES`` (default 3000) randomized examples per test, and the
forward-mode test's hvp through the compiled tangent programs where they apply.
"""
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tapegrad as tg

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("tapegrad-fuzz-ci", max_examples=200, deadline=None, derandomize=True,
                          suppress_health_check=_HEALTH, print_blob=True)
settings.register_profile("tapegrad-fuzz-long",
                          max_examples=int(os.environ.get("TAPEGRAD_FUZZ_EXAMPLES", "3000")),
                          deadline=None, derandomize=False, suppress_health_check=_HEALTH, print_blob=True)
LONG = os.environ.get("TAPEGRAD_FUZZ", "").lower() == "long"
PROFILE = settings.get_profile("tapegrad-fuzz-long" if LONG else "tapegrad-fuzz-ci")



@pytest.fixture(autouse=True)
def _no_tangent_programs_in_ci():
    """In CI's profile the NumPy walk serves every second derivative and forward-mode
    product: a structure met a few times would otherwise have its tangent programs
    compiled in the background, about a second each and dozens of structures (several
    minutes of a cold run).  The programs of the fuzzer's programs are checked by
    ``_hvp_long`` in the long profile and by test_grad_entry.py."""
    from tapegrad.autograd import tangent_program as tp
    saved = tp.MODE[0]
    if not LONG:
        tp.MODE[0] = "off"
    yield
    tp.MODE[0] = saved


# Set to True to steer the generator around patterns of known, still-open bugs (each
# with a regression test below), so the fuzzer keeps looking for new ones.  All fixed.
AVOID_KNOWN_BUGS = False
MARGIN = 1e-3       # distance kept from kinks and discontinuities
BIG = 1e3           # largest magnitude a value may take
EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-4
SCALARS = [2, 3, -1, 0.5, -1.5, 2.0, 0.25, 1]


class Unsafe(Exception):
    """The instruction would leave the region where finite differences are valid."""


def _a(t):
    return np.asarray(t.detach().numpy())


def _lit(x):
    return repr(np.asarray(x).tolist())


def _bcast_ok(target, shape):
    """``shape`` broadcasts to exactly ``target``."""
    try:
        return np.broadcast_shapes(target, shape) == tuple(target)
    except ValueError:
        return False


def _compatible(s1, s2):
    try:
        np.broadcast_shapes(s1, s2)
        return True
    except ValueError:
        return False


def _gap(x, axes):
    """Smallest distance between the largest and second-largest entry of each group."""
    if x.size == 0:
        raise Unsafe("empty reduction")
    axes = tuple(range(x.ndim)) if axes is None else axes
    rest = [d for d in range(x.ndim) if d not in axes]
    y = np.transpose(x, rest + list(axes)).reshape(int(np.prod([x.shape[d] for d in rest], dtype=int)), -1)
    if y.shape[1] < 2:
        return np.inf
    s = np.sort(y, axis=1)
    return min(np.min(s[:, -1] - s[:, -2]), np.min(s[:, 1] - s[:, 0]))


class Builder:
    def __init__(self, data, shapes, seed, kinks=True, max_ops=40):
        self.data = data
        self.rng = np.random.default_rng(seed)
        self.kinks = kinks
        self.leaf_data = [np.round(self.rng.uniform(-1.5, 1.5, size=s), 3) for s in shapes]
        self.leaves = ["x%d" % i for i in range(len(shapes))]
        self.vals = list(self.leaves)
        self.sinks = list(self.leaves)
        self.lines = []
        self.notes = []
        self.counter = len(shapes)
        self.max_ops = max_ops
        self.used_ops = []
        self._fresh()

    # -- drawing -------------------------------------------------------------------
    def int(self, lo, hi):
        return self.data.int(lo, hi)

    def choice(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def flag(self):
        return self.int(0, 1) == 1

    def permutation(self, n):
        p = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.int(0, i)
            p[i], p[j] = p[j], p[i]
        return p

    def pick(self):
        return self.vals[self.int(0, len(self.vals) - 1)]

    def new(self):
        name = "v%d" % self.counter
        self.counter += 1
        return name

    # -- values --------------------------------------------------------------------
    def _fresh(self):
        self.ns = {"tg": tg, "np": np}
        for name, d in zip(self.leaves, self.leaf_data):
            self.ns[name] = tg.tensor(d.copy(), requires_grad=True)

    def t(self, name):
        return self.ns[name]

    def x(self, name):
        return _a(self.ns[name])

    def shape(self, name):
        return tuple(self.ns[name].shape)

    def ev(self, expr):
        with tg.no_grad():
            return eval(expr, self.ns)

    def partners(self, a, want):
        """Values whose shape satisfies ``want(shape)``."""
        return [v for v in self.vals if want(self.shape(v))]

    # -- safe operands -----------------------------------------------------------------
    def positive(self, a, lo=0.2):
        """An expression for a value >= ``lo`` built from ``a`` (``a`` itself when it is)."""
        x = self.x(a)
        if x.size and x.min() >= lo:
            return a
        forms = ["{a} * {a} + 0.3", "tg.exp({a})", "tg.sigmoid({a}) + 0.2", "({a} - {m}) + 0.3",
                 "tg.sqrt({a} * {a} + 1)", "1 + tg.tanh({a}) ** 2"]
        form = self.choice(forms).format(a=a, m=repr(float(np.round(x.min(), 3)) if x.size else 0.0))
        v = _a(self.ev(form))
        if v.size and (v.min() < 0.1 or v.max() > 50):
            form = "{a} * {a} + 0.3".format(a=a)
        return "(%s)" % form

    def nonzero(self, a):
        x = self.x(a)
        if x.size and np.abs(x).min() >= 0.2:
            return a
        return self.positive(a)

    def margin(self, dist):
        d = np.asarray(dist)
        if d.size and np.min(np.abs(d)) < MARGIN:
            raise Unsafe("kink")

    def bounded(self, a, hi=4.0):
        """``a`` when its values are at most ``hi``, else a squashed form."""
        x = self.x(a)
        if x.size == 0 or x.max() <= hi:
            return a
        return "(tg.tanh(%s) * %s)" % (a, hi)

    # -- running -------------------------------------------------------------------
    def _check_value(self, name):
        t = self.ns[name]
        if not isinstance(t, tg.Tensor) or t.dtype != np.float64:
            raise Unsafe("not a float64 tensor")
        x = _a(t)
        if not np.all(np.isfinite(x)) or (x.size and np.abs(x).max() > BIG):
            raise Unsafe("magnitude")
        if x.size == 0:
            raise Unsafe("empty")

    def _backward_ok(self, extra):
        """The graph built so far can be differentiated (in-place ops may invalidate it)."""
        roots = [self.ns[v] for v in self.vals + [extra] if self.ns[v].requires_grad]
        loss = roots[0].sum()
        for r in roots[1:]:
            loss = loss + r.sum()
        tg.autograd.grad(loss, [self.ns[x] for x in self.leaves], retain_graph=True, allow_unused=True)

    def commit(self, lines, result, uses, inplace=False):
        """Run ``lines``; keep them when safe, else undo them.  ``result``: the name
        of the new value; ``uses``: operand names."""
        n0 = len(self.lines)
        self.pending = lines
        try:
            for ln in lines:
                try:
                    exec(ln, self.ns)
                except RuntimeError as e:
                    if inplace and re.search(r"in-?place|leaf|more than one element|view", str(e)):
                        raise Unsafe("refused: %s" % str(e).splitlines()[0][:80])
                    raise
            self._check_value(result)
            if inplace:
                mutated = [v for v in self.vals
                           if np.shares_memory(self.ns[v].detach().numpy(), self.ns[result].detach().numpy())]
                for v in mutated:
                    self._check_value(v)
                try:
                    self._backward_ok(result)
                except RuntimeError as e:
                    if "inplace" in str(e) or "in-place" in str(e):
                        raise Unsafe("version: %s" % str(e).splitlines()[0][:80])
                    raise
        except Unsafe as e:
            self.notes.append("# rejected %s (%s)" % ("; ".join(lines), e))
            if inplace:
                del self.lines[n0:]
                self._fresh()
                for ln in self.lines:
                    exec(ln, self.ns)
            return False
        self.lines.extend(lines)
        for u in uses:
            if u in self.sinks:
                self.sinks.remove(u)
        if inplace:
            for v in mutated:
                if v not in self.sinks:
                    self.sinks.append(v)
        if result not in self.vals:
            self.vals.append(result)
        if result not in self.sinks:
            self.sinks.append(result)
        return True

    def emit(self, expr, uses):
        out = self.new()
        return self.commit(["%s = %s" % (out, expr)], out, uses)

    def fallback(self, a):
        out = self.new()
        ok = self.commit(["%s = tg.tanh(%s)" % (out, a)], out, [a])
        assert ok

    # -- program -------------------------------------------------------------------
    def build(self):
        n = self.int(5, self.max_ops)
        ops = [o for o in OPS if self.kinks or not o[2]]
        weights_total = sum(o[1] for o in ops)
        for _ in range(n):
            r = self.int(0, weights_total - 1)
            for name, w, kinked, fn in ops:
                if r < w:
                    break
                r -= w
            a = self.pick()
            try:
                ok = fn(self, a)
            except Unsafe as e:
                self.notes.append("# %s on %s skipped (%s)" % (name, a, e))
                ok = False
            if ok:
                self.used_ops.append(name)
            else:
                self.fallback(a)
        self.finish()

    def finish(self):
        terms = []
        for v in self.sinks:
            t = self.ns[v]
            if not t.requires_grad:
                continue
            w = np.round(self.rng.uniform(-1, 1, size=t.shape), 2)
            terms.append("(%s * tg.tensor(%s)).sum()" % (v, _lit(w)))
        assert terms, "no differentiable output"
        self.lines.append("out = " + " + ".join(terms))
        exec(self.lines[-1], self.ns)
        self.source = "def f(%s):\n%s\n    return out\n" % (
            ", ".join(self.leaves), "\n".join("    " + ln for ln in self.lines))
        ns = {"tg": tg, "np": np}
        exec(self.source, ns)
        self.f = ns["f"]

    def inputs(self):
        return [tg.tensor(d.copy(), requires_grad=True) for d in self.leaf_data]

    def listing(self):
        head = ["import numpy as np", "import tapegrad as tg", ""]
        head += ["%s = tg.tensor(%s, requires_grad=True)" % (n, _lit(d)) for n, d in zip(self.leaves, self.leaf_data)]
        return "\n".join(head) + "\n\n" + self.source + "\n# ops: %s\n" % " ".join(self.used_ops)


# -- the op set -------------------------------------------------------------------------
def op_unary(b, a):
    f = b.choice(["neg", "exp", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "log", "log1p", "sqrt"])
    if f in ("exp", "expm1"):
        arg = b.bounded(a)
    elif f == "tan":
        arg = a if np.abs(b.x(a)).max() <= 1.2 else "tg.tanh(%s)" % a
    elif f in ("log", "sqrt"):
        arg = b.positive(a)
    elif f == "log1p":
        arg = a if b.x(a).min() >= -0.8 else b.positive(a)
    else:
        arg = a
    style = b.int(0, 2)
    if f == "neg" and style == 2:
        expr = "-%s" % arg
    elif style == 1:
        expr = "%s.%s()" % (arg if arg == a else "(%s)" % arg, f)
    else:
        expr = "tg.%s(%s)" % (f, arg)
    return b.emit(expr, [a])


def op_kinked_unary(b, a):
    f = b.choice(["abs", "relu", "clamp", "sign", "floor", "round", "clamp_both"])
    x = b.x(a)
    if f in ("abs", "relu", "sign"):
        b.margin(x)
        expr = b.choice(["tg.%s(%s)", "%s.%s()"]) 
        expr = expr % ((f, a) if expr.startswith("tg") else (a, f))
        if f == "abs" and b.flag():
            expr = "abs(%s)" % a
    elif f == "floor":
        b.margin(x - np.round(x))
        expr = "tg.floor(%s)" % a
    elif f == "round":
        b.margin(x - np.floor(x) - 0.5)
        expr = "tg.round(%s)" % a
    elif f == "clamp":
        lo = b.choice([-0.5, 0.0, 0.3, -1])
        if b.flag():
            b.margin(x - lo)
            expr = "tg.clamp(%s, min=%r)" % (a, lo)
        else:
            b.margin(x - lo)
            expr = "%s.clamp(max=%r)" % (a, lo)
    else:
        lo, hi = b.choice([(-0.5, 0.5), (-1, 0.2), (0.0, 1.0)])
        b.margin(x - lo)
        b.margin(x - hi)
        expr = b.choice(["tg.clamp(%s, %r, %r)", "tg.clip(%s, %r, %r)"]) % (a, lo, hi)
    return b.emit(expr, [a])


def _partner(b, a, want=None):
    """Another value broadcast-compatible with ``a`` (or ``a`` itself)."""
    sa = b.shape(a)
    cands = b.partners(a, want or (lambda s: _compatible(sa, s)))
    return b.choice(cands) if cands else None


def op_binary(b, a):
    f = b.choice(["+", "-", "*", "/", "**", "add_alpha", "sub_alpha"])
    form = b.int(0, 2)       # 0: tensor-tensor, 1: tensor-scalar, 2: scalar-tensor
    c = _partner(b, a) if form == 0 else None
    if form == 0 and c is None:
        form = 1
    s = b.choice(SCALARS)
    uses = [a] if c is None else [a, c]
    if f in ("+", "-", "*"):
        expr = {0: "%s %s %s" % (a, f, c), 1: "%s %s %r" % (a, f, s), 2: "%r %s %s" % (s, f, a)}[form]
        if form == 0 and b.flag():
            expr = "tg.%s(%s, %s)" % ({"+": "add", "-": "sub", "*": "mul"}[f], a, c)
    elif f in ("add_alpha", "sub_alpha"):
        other = c if c is not None else a
        expr = "tg.%s(%s, %s, alpha=%r)" % (f[:3], a, other, s)
        uses = [a, other]
    elif f == "/":
        if form == 0:
            expr = "%s / %s" % (a, b.nonzero(c))
            if b.flag():
                expr = "tg.div(%s, %s)" % (a, b.nonzero(c))
        elif form == 1:
            expr = "%s / %r" % (a, s)
        else:
            expr = "%r / %s" % (s, b.nonzero(a))
    else:
        if form == 0:
            cx = b.x(c)
            e = c if np.abs(cx).max() <= 2.5 else "tg.tanh(%s)" % c
            expr = "%s ** %s" % (b.positive(a), e)
            if b.flag():
                expr = "tg.pow(%s, %s)" % (b.positive(a), e)
        elif form == 1:
            p = b.choice([2, 3, 0.5, -1, 1.5, -0.5, 2.0, 0, 1])
            base = a
            if isinstance(p, float) and p != int(p):
                base = b.positive(a)
            elif p < 0:
                base = b.nonzero(a)
            expr = "%s ** %r" % (base, p)
        else:
            base = b.choice([2.0, 0.5, 3, 1.5])
            expr = "%r ** %s" % (base, b.bounded(a, 3.0))
    return b.emit(expr, uses)


def op_extremum(b, a):
    c = _partner(b, a)
    if c is None:
        raise Unsafe("no partner")
    b.margin(b.x(a) - b.x(c))
    f = b.choice(["tg.maximum(%s, %s)", "tg.minimum(%s, %s)", "%s.maximum(%s)", "tg.max(%s, %s)",
                  "tg.min(%s, %s)", "tg.clamp(%s, min=%s)", "tg.clamp(%s, max=%s)"])
    return b.emit(f % (a, c), [a, c])


def op_where(b, a):
    c = _partner(b, a)
    if c is None:
        c = a
    shape = np.broadcast_shapes(b.shape(a), b.shape(c))
    if b.flag():
        d = _partner(b, a, lambda s: _compatible(shape, s))
        thr = b.choice([0.0, 0.5, -0.3])
        b.margin(b.x(d) - thr)
        cond = "%s > %r" % (d, thr)
        uses = [a, c, d]
    else:
        mshape = shape[b.int(0, len(shape)):] if shape else ()
        cond = "tg.tensor(%s)" % _lit(b.rng.random(mshape) < 0.5)
        uses = [a, c]
    return b.emit("tg.where(%s, %s, %s)" % (cond, a, c), uses)


def _dims(b, nd, multi=True):
    """A ``dim`` argument: None, an int (maybe negative) or a tuple."""
    if nd == 0:
        return b.choice([None, 0, -1])
    k = b.int(0, 2 if multi else 1)
    if k == 0 and multi:
        return None
    if k == 2 and nd > 1:
        ds = sorted(set(b.int(0, nd - 1) for _ in range(b.int(1, nd))))
        return tuple(ds)
    d = b.int(0, nd - 1)
    return d - nd if b.flag() else d


def _axes(dim, nd):
    if dim is None or nd == 0:
        return None
    return tuple(sorted(d % nd for d in (dim if isinstance(dim, tuple) else (dim,))))


def op_reduce(b, a):
    f = b.choice(["sum", "mean", "prod", "var", "std", "logsumexp", "softmax", "log_softmax"])
    x = b.x(a)
    nd = x.ndim
    keep = b.flag()
    if f in ("softmax", "log_softmax"):
        dim = _dims(b, nd, multi=False)
        dim = 0 if dim is None else dim
        return b.emit("tg.%s(%s, %d)" % (f, a, dim) if b.flag() else "%s.%s(dim=%d)" % (a, f, dim), [a])
    if f == "logsumexp":
        dim = _dims(b, nd)
        dim = 0 if dim is None else dim
        return b.emit("tg.logsumexp(%s, %r, keepdim=%r)" % (a, dim, keep), [a])
    dim = _dims(b, nd)
    axes = _axes(dim, nd)
    args = "" if dim is None else "dim=%r, keepdim=%r" % (dim, keep)
    if f == "prod":
        zeros = (x == 0).sum(axis=axes, keepdims=True) if axes is not None or nd else (x == 0)
        if np.max(zeros) >= 2:
            # documented limitation: create_graph=True through prod() of a group with two zeros
            raise Unsafe("prod over several zeros")
    if f in ("var", "std"):
        count = x.size if axes is None else int(np.prod([x.shape[d] for d in axes]))
        corr = b.choice([None, 0, 1, "unbiased=False"])
        if corr is None:
            cargs = ""
        elif isinstance(corr, str):
            cargs, corr = corr, 0
        else:
            cargs = "correction=%d" % corr
        if count - (1 if corr is None else corr) <= 0:
            raise Unsafe("too few elements")
        if f == "std":
            sd = x.std(axis=axes, ddof=1 if corr is None else corr)
            if np.min(sd) < 0.05:
                raise Unsafe("std near zero")
        args = ", ".join(s for s in (args, cargs) if s)
    expr = "tg.%s(%s%s)" % (f, a, ", " + args if args else "") if b.flag() else "%s.%s(%s)" % (a, f, args)
    return b.emit(expr, [a])


def op_amax(b, a):
    x = b.x(a)
    nd = x.ndim
    f = b.choice(["amax", "amin", "max_dim", "min_dim", "max_all", "min_all"])
    keep = b.flag()
    if f in ("amax", "amin"):
        dim = _dims(b, nd)
        axes = _axes(dim, nd)
        b.margin(_gap(x, axes))
        expr = "tg.%s(%s)" % (f, a) if dim is None else "tg.%s(%s, dim=%r, keepdim=%r)" % (f, a, dim, keep)
    elif f.endswith("_all"):
        b.margin(_gap(x, None))
        expr = "tg.%s(%s)" % (f[:3], a) if b.flag() else "%s.%s()" % (a, f[:3])
    else:
        dim = _dims(b, nd, multi=False)
        dim = 0 if dim is None else dim
        if AVOID_KNOWN_BUGS and (nd == 0 or (nd == 1 and not keep)):
            raise Unsafe("known bug: test_regression_max_dim_of_0d_under_no_grad")
        b.margin(_gap(x, _axes(dim, nd)))
        expr = "tg.%s(%s, dim=%d, keepdim=%r)[0]" % (f[:3], a, dim, keep)
        if b.flag():
            expr = "%s.%s(%d).values" % (a, f[:3], dim) if b.flag() else "%s.%s(%d)[0]" % (a, f[:3], dim)
    return b.emit(expr, [a])


def _factor(b, n, parts):
    """A random shape with ``parts`` dims and ``n`` elements."""
    dims = []
    for _ in range(parts - 1):
        divs = [d for d in range(1, n + 1) if n % d == 0]
        d = b.choice(divs)
        dims.append(d)
        n //= d
    dims.append(n)
    return tuple(dims)


def op_shape(b, a):
    sh = b.shape(a)
    nd = len(sh)
    n = int(np.prod(sh, dtype=int))
    f = b.choice(["reshape", "view", "flatten", "permute", "transpose", "t", "expand", "broadcast_to",
                  "unsqueeze", "squeeze", "diagonal", "clone", "mT"])
    if f in ("reshape", "view"):
        new = list(_factor(b, n, b.int(1, 4)))
        if b.flag():
            new[b.int(0, len(new) - 1)] = -1
        form = b.choice(["%s.reshape(%s)", "tg.reshape(%s, %s)", "%s.view(%s)"])
        if form == "%s.view(%s)" and not b.ns[a]._data.flags.c_contiguous:
            form = "%s.reshape(%s)"     # (view refuses a layout only a copy fits, as PyTorch's)
        expr = form % (a, tuple(new))
    elif f == "flatten":
        if nd < 1:
            expr = "tg.flatten(%s)" % a
        else:
            s = b.int(0, nd - 1)
            expr = "tg.flatten(%s, %d, %d)" % (a, s, b.int(s, nd - 1))
    elif f == "permute":
        perm = b.permutation(nd)
        expr = "%s.permute(%s)" % (a, ", ".join(map(str, perm))) if b.flag() else "tg.permute(%s, %r)" % (a, tuple(perm))
    elif f in ("transpose", "mT"):
        if nd < 2:
            raise Unsafe("ndim")
        if f == "mT":
            expr = "%s.mT" % a
        else:
            expr = "tg.transpose(%s, %d, %d)" % (a, b.int(-nd, nd - 1), b.int(-nd, nd - 1))
    elif f == "t":
        if nd > 2:
            raise Unsafe("ndim")
        expr = "%s.t()" % a
    elif f in ("expand", "broadcast_to"):
        lead = tuple(b.int(1, 3) for _ in range(b.int(0, max(0, 3 - nd))))
        tgt = lead + tuple(b.int(1, 3) if s == 1 else (-1 if (f == "expand" and b.flag()) else s) for s in sh)
        if f == "expand":
            expr = "%s.expand(%s)" % (a, ", ".join(map(str, tgt))) if tgt else "%s.expand(())" % a
        else:
            expr = "tg.broadcast_to(%s, %r)" % (a, tuple(tgt))
    elif f == "unsqueeze":
        d = b.int(-nd - 1, nd)
        expr = "%s.unsqueeze(%d)" % (a, d) if b.flag() else "tg.unsqueeze(%s, %d)" % (a, d)
    elif f == "squeeze":
        ones = [i for i, s in enumerate(sh) if s == 1]
        if ones and b.flag():
            expr = "%s.squeeze(%d)" % (a, b.choice(ones))
        else:
            expr = "tg.squeeze(%s)" % a
    elif f == "diagonal":
        if nd < 2:
            raise Unsafe("ndim")
        d1 = b.int(0, nd - 1)
        d2 = b.choice([d for d in range(nd) if d != d1])
        off = b.int(-1, 1)
        if not (-sh[d1] < off < sh[d2]):
            off = 0
        expr = "tg.diagonal(%s, %d, %d, %d)" % (a, off, d1, d2)
    else:
        expr = "%s.clone()" % a if b.flag() else "tg.clone(%s)" % a
    return b.emit(expr, [a])


def op_cat(b, a):
    sh = b.shape(a)
    stacking = b.flag() or len(sh) == 0
    if stacking:
        cands = b.partners(a, lambda s: s == sh)
        d = b.int(-len(sh) - 1, len(sh))
    else:
        d = b.int(0, len(sh) - 1)
        cands = b.partners(a, lambda s: len(s) == len(sh) and all(s[i] == sh[i] for i in range(len(sh)) if i != d))
    others = [b.choice(cands) for _ in range(b.int(1, 2))]
    items = [a] + others
    if b.flag():
        items = items[::-1]
    if stacking:
        expr = "tg.stack([%s], %d)" % (", ".join(items), d)
    else:
        expr = "%s([%s], dim=%d)" % (b.choice(["tg.cat", "tg.concat"]), ", ".join(items), d)
    return b.emit(expr, items)


def _index(b, sh):
    """A random index of a tensor of shape ``sh`` (a string) with a non-empty result."""
    kind = b.choice(["basic", "basic", "int", "mask", "ints_all", "mixed"])
    nd = len(sh)
    if nd == 0:
        return b.choice(["...", "None", "()"]), False
    if kind == "basic" or kind == "mixed":
        parts = []
        for i in range(b.int(1, nd)):
            s = sh[i]
            c = b.int(0, 3)
            if c == 0:
                parts.append(str(b.int(-s, s - 1)))
            elif c == 1:
                start = b.int(-s, s - 1)
                stop = b.choice([None, s, start % s + 1 + b.int(0, s)])
                step = b.choice([None, 1, 2])
                parts.append("%s:%s%s" % (start, "" if stop is None else stop, "" if step is None else ":%d" % step))
            elif c == 2:
                parts.append(":")
            else:
                parts.append("None, :")
        if kind == "mixed":
            j = b.int(0, len(parts) - 1)
            idx = b.rng.integers(-sh[j], sh[j], size=b.int(1, 4))
            parts[j] = _lit(idx)
            return ", ".join(parts), True
        if b.flag():
            parts.append("...")
        return ", ".join(parts), False
    if kind == "int":
        d = b.int(0, nd - 1)
        idx = b.rng.integers(-sh[d], sh[d], size=tuple(b.int(1, 3) for _ in range(b.int(1, 2))))
        # (a bare nested list as the whole index is a tuple of indices, as in PyTorch:
        # the trailing comma makes it one index tensor)
        wrap = b.choice(["tg.tensor(%s)", "np.array(%s)", "%s,"])
        return ", ".join([":"] * d + [wrap % _lit(idx)]), True
    if kind == "ints_all":
        k = b.int(1, 4)
        return ", ".join("tg.tensor(%s)" % _lit(b.rng.integers(0, s, size=k)) for s in sh), True
    k = b.int(1, nd)
    mask = b.rng.random(sh[:k]) < 0.5
    mask.reshape(-1)[b.int(0, mask.size - 1)] = True
    return "tg.tensor(%s)" % _lit(mask), True


def op_index(b, a):
    idx, _ = _index(b, b.shape(a))
    return b.emit("%s[%s]" % (a, idx), [a])


def op_matmul(b, a):
    sa = b.shape(a)
    if len(sa) == 0:
        raise Unsafe("0-d")
    k = sa[-1]

    def ok(s):
        if len(s) == 0 or (len(s) == 1 and s[0] != k) or (len(s) >= 2 and s[-2] != k):
            return False
        return len(s) < 3 or len(sa) < 3 or _compatible(sa[:-2], s[:-2])
    cands = b.partners(a, ok)
    if cands:
        c = b.choice(cands)
        sc = b.shape(c)
        if len(sa) == 2 and len(sc) == 2 and b.flag():
            expr = "tg.mm(%s, %s)" % (a, c)
        elif len(sa) == 2 and len(sc) == 1 and b.flag():
            expr = "tg.mv(%s, %s)" % (a, c)
        elif len(sa) == 1 and len(sc) == 1 and b.flag():
            expr = "tg.dot(%s, %s)" % (a, c)
        elif len(sa) == 3 and len(sc) == 3 and sa[0] == sc[0] and b.flag():
            expr = "tg.bmm(%s, %s)" % (a, c)
        else:
            expr = b.choice(["%s @ %s", "tg.matmul(%s, %s)", "%s.matmul(%s)"]) % (a, c)
        return b.emit(expr, [a, c])
    if len(sa) == 1:
        return b.emit("%s @ %s" % (a, a), [a])
    return b.emit("%s @ %s.transpose(-1, -2)" % (a, a) if b.flag() else "%s.mT @ %s" % (a, a), [a])


def op_inplace(b, a):
    """An in-place update of a non-leaf: ``a`` itself or a fresh copy of it."""
    lines = []
    direct = b.flag() and a not in b.leaves
    if direct:
        y = a
        yx = b.x(a)
    else:
        y = b.new()
        copy = b.choice(["%s.clone()", "%s * 1.0", "%s + 0", "1.5 - %s"]) % a
        lines.append("%s = %s" % (y, copy))
        yx = _a(b.ev(copy))
    sy = yx.shape
    if AVOID_KNOWN_BUGS and direct:
        shared = [v for v in b.vals if v != y and np.shares_memory(b.x(v), yx)]
        if shared and (len(sy) != 1 or any(len(b.shape(v)) != 1 for v in shared)):
            raise Unsafe("known bug: test_regression_stale_2d_view_after_inplace")
    f = b.choice(["add_", "sub_", "mul_", "div_", "+=", "-=", "*=", "/=", "pow_", "neg_", "exp_",
                  "setitem", "setitem", "view_", "copy_", "fill_", "zero_", "clamp_", "relu_"])
    if f in ("clamp_", "relu_") and not b.kinks:
        f = "mul_"
    cands = b.partners(a, lambda s: _bcast_ok(sy, s))
    w = b.choice(cands) if cands and b.flag() else None
    uses = [a] + ([w] if w else [])
    operand = w if w else repr(b.choice(SCALARS))
    if f in ("add_", "sub_", "mul_"):
        lines.append("%s.%s(%s)" % (y, f, operand))
    elif f == "div_":
        lines.append("%s.div_(%s)" % (y, b.nonzero(w) if w else repr(b.choice([2, 0.5, -4]))))
    elif f in ("+=", "-=", "*="):
        lines.append("%s %s %s" % (y, f, operand))
    elif f == "/=":
        lines.append("%s /= %s" % (y, b.nonzero(w) if w else "3"))
    elif f == "pow_":
        lines.append("%s.pow_(2)" % y)
    elif f == "neg_":
        lines.append("%s.neg_()" % y)
    elif f == "exp_":
        if yx.max() > 4:
            raise Unsafe("exp_ overflow")
        lines.append("%s.exp_()" % y)
    elif f == "relu_":
        b.margin(yx)
        lines.append("%s.relu_()" % y)
    elif f == "clamp_":
        lo = b.choice([-0.5, 0.0, 0.3])
        b.margin(yx - lo)
        lines.append("%s.clamp_(min=%r)" % (y, lo))
    elif f == "copy_":
        if not w:
            raise Unsafe("no source")
        lines.append("%s.copy_(%s)" % (y, w))
    elif f == "fill_":
        lines.append("%s.fill_(%r)" % (y, b.choice(SCALARS)))
    elif f == "zero_":
        lines.append("%s.zero_()" % y)
    else:
        idx, advanced = _index(b, sy)
        if advanced and f == "setitem":
            # duplicate positions make the write order-dependent: write each once
            idx = _dedupe(b, sy, idx)
        b.ns["_probe"] = tg.zeros(sy)
        target = tuple(b.ev("_probe[%s]" % idx).shape)
        if f == "setitem":
            vc = b.partners(a, lambda s: _bcast_ok(target, s))
            if vc and b.flag():
                v = b.choice(vc)
                uses.append(v)
                val = v
            elif b.flag():
                v = b.pick()
                uses.append(v)
                val = "%s.mean()" % v
            else:
                val = repr(b.choice(SCALARS))
            lines.append("%s[%s] = %s" % (y, idx, val))
        else:
            if advanced:
                raise Unsafe("advanced index gives a copy")
            if AVOID_KNOWN_BUGS and len(target) != 1:
                raise Unsafe("known bug: test_regression_inplace_on_2d_view")
            wc = b.partners(a, lambda s: _bcast_ok(target, s))
            op = b.choice(["mul_", "add_", "sub_"])
            arg = b.choice(wc) if wc and b.flag() else repr(b.choice(SCALARS))
            if arg in b.vals:
                uses.append(arg)
            lines.append("%s[%s].%s(%s)" % (y, idx, op, arg))
    return b.commit(lines, y, [u for u in uses if u != y], inplace=True)


def _dedupe(b, sh, idx):
    """Replace an advanced index with one whose positions are distinct."""
    d = b.int(0, len(sh) - 1)
    k = b.int(1, sh[d])
    pos = b.rng.permutation(sh[d])[:k]
    return ", ".join([":"] * d + ["tg.tensor(%s)" % _lit(pos)])


OPS = [
    # name, weight, kinked, generator
    ("unary", 12, False, op_unary),
    ("kinked_unary", 4, True, op_kinked_unary),
    ("binary", 14, False, op_binary),
    ("extremum", 3, True, op_extremum),
    ("where", 3, False, op_where),
    ("reduce", 8, False, op_reduce),
    ("amax", 3, True, op_amax),
    ("shape", 10, False, op_shape),
    ("cat", 3, False, op_cat),
    ("index", 7, False, op_index),
    ("matmul", 4, False, op_matmul),
    ("inplace", 9, False, op_inplace),
]


def _shapes(b, n_leaves, max_numel):
    base = [b.int(1, 4) for _ in range(3)]
    while int(np.prod(base)) > max_numel:
        base[base.index(max(base))] -= 1
    shapes = []
    for _ in range(n_leaves):
        nd = b.int(0, 3)
        s = base[3 - nd:]
        shapes.append(tuple(1 if (d > 1 and b.int(0, 3) == 0) else d for d in s))
    return shapes


class HypothesisSource:
    """Choices drawn by hypothesis (so failing programs shrink)."""

    def __init__(self, data):
        self.data = data

    def int(self, lo, hi):
        return self.data.draw(st.integers(lo, hi))


class RandomSource:
    """Choices drawn from a seeded NumPy generator."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def int(self, lo, hi):
        return int(self.rng.integers(lo, hi + 1))


def _program(source, kinks=True, max_leaves=3, max_numel=24, max_ops=40, record=True):
    pre = Builder.__new__(Builder)
    pre.data = source
    n = pre.int(1, max_leaves)
    shapes = _shapes(pre, n, max_numel)
    seed = pre.int(0, 2 ** 32 - 1)
    b = Builder(source, shapes, seed, kinks=kinks, max_ops=max_ops)
    try:
        b.build()
    except Exception:
        print("program so far (leaf shapes %s, seed %d):\n%s\nfailing: %s"
              % (shapes, seed, "\n".join(b.lines), getattr(b, "pending", None)))
        raise
    if record:
        note(b.listing())
    return b


def _grads(b, create_graph):
    xs = b.inputs()
    out = b.f(*xs)
    gs = tg.autograd.grad(out, xs, create_graph=create_graph, allow_unused=True)
    return out, [None if g is None else _a(g).copy() for g in gs]


def _same(g1, g2, rtol):
    if g1 is None or g2 is None:
        return (g1 is None or not np.any(g1)) and (g2 is None or not np.any(g2))
    return g1.shape == g2.shape and np.allclose(g1, g2, rtol=rtol, atol=1e-12)


def _perturbed(b, rng, k):
    """The program's inputs scaled by 1 + 0.01 k N(0, 1), as two sets of fresh leaves
    (one for each side compared)."""
    arrays = [_a(x) * (1.0 + 0.01 * k * rng.standard_normal(_a(x).shape)) for x in b.inputs()]
    return [tg.tensor(a, requires_grad=True) for a in arrays], [tg.tensor(a, requires_grad=True) for a in arrays]


# -- the tests --------------------------------------------------------------------------
@settings(PROFILE)
@given(st.data())
def test_fuzz_gradients(data):
    b = _program(HypothesisSource(data))
    msg = "\n" + b.listing()
    # the program is deterministic: running it again gives the planned value
    out0 = b.f(*b.inputs())
    assert np.allclose(_a(out0), _a(b.ns["out"]), rtol=1e-12, atol=1e-12), msg
    assert out0.requires_grad and np.isfinite(_a(out0)).all(), msg
    # (1) against central differences
    xs = b.inputs()
    try:
        ok = tg.autograd.gradcheck(b.f, xs, eps=EPS, atol=ATOL, rtol=RTOL)
    except tg.autograd.GradcheckError as e:
        raise AssertionError(str(e) + msg) from None
    assert ok, msg
    # (2) create_graph=False / True and .backward() agree
    out1, g1 = _grads(b, False)
    out2, g2 = _grads(b, True)
    assert any(g is not None for g in g1), msg
    for i, (p, q) in enumerate(zip(g1, g2)):
        assert _same(p, q, 1e-9), "x%d: create_graph=False %s vs True %s%s" % (i, p, q, msg)
    xs = b.inputs()
    b.f(*xs).backward()
    for i, (x, p) in enumerate(zip(xs, g1)):
        q = None if x.grad is None else _a(x.grad)
        assert _same(p, q, 1e-12), "x%d: grad() %s vs backward() %s%s" % (i, p, q, msg)


@settings(PROFILE, max_examples=max(1, PROFILE.max_examples // 2))
@given(st.data())
def test_fuzz_replay(data):
    """(4) tg.compile: replaying the recorded tape on new inputs gives what eager
    execution gives on them (values and gradients), or the call ran eagerly."""
    b = _program(HypothesisSource(data))
    msg = "\n" + b.listing()
    cf = tg.compile(b.f)
    cf(*b.inputs())
    rng = np.random.default_rng(len(b.lines))
    for k in range(2):
        xs, ys = _perturbed(b, rng, k)
        out_r = cf(*xs)
        out_e = b.f(*ys)
        assert out_r.requires_grad == out_e.requires_grad and out_r.shape == out_e.shape, msg
        assert np.allclose(_a(out_r), _a(out_e), rtol=1e-12, atol=1e-13, equal_nan=True), msg
        w = np.linspace(0.5, 1.5, out_e.numel()).reshape(out_e.shape)
        (out_r * tg.tensor(w)).sum().backward()
        (out_e * tg.tensor(w)).sum().backward()
        for i, (x, y) in enumerate(zip(xs, ys)):
            p, q = (None if x.grad is None else _a(x.grad)), (None if y.grad is None else _a(y.grad))
            assert _same(p, q, 1e-11), "x%d: replay %s vs eager %s (stats %s, %s)%s" % (
                i, p, q, cf.stats, cf.why, msg)
    assert cf.stats.calls == 3, msg


FUSED_EXAMPLES = 12     # (each fused program is compiled: ~1 s apiece)


@settings(PROFILE, max_examples=max(1, min(FUSED_EXAMPLES, PROFILE.max_examples)) if not LONG else PROFILE.max_examples)
@given(st.data())
def test_fuzz_fused_replay(data):
    """(4b) tg.compile(fuse=True) of ``sum(f * w)``: the fused replay (or, where it
    does not fuse, the replay) gives eager's value and gradients on new inputs."""
    if os.environ.get("TAPEGRAD_INTERPRET") == "always":
        return      # (the fused loops are compiled code)
    b = _program(HypothesisSource(data), max_ops=16)
    msg = "\n" + b.listing()
    out0 = b.f(*b.inputs())
    w = tg.tensor(np.linspace(0.5, 1.5, out0.numel()).reshape(out0.shape))

    def loss(*xs):
        return (b.f(*xs) * w).sum()
    cf = tg.compile(loss, fuse=True)
    cf(*b.inputs())
    rng = np.random.default_rng(len(b.lines))
    for k in range(2):
        xs, ys = _perturbed(b, rng, k)
        out_r, out_e = cf(*xs), loss(*ys)
        assert np.allclose(_a(out_r), _a(out_e), rtol=1e-11, atol=1e-12, equal_nan=True), (cf.fusion(), msg)
        out_r.backward()
        out_e.backward()
        for i, (x, y) in enumerate(zip(xs, ys)):
            p, q = (None if x.grad is None else _a(x.grad)), (None if y.grad is None else _a(y.grad))
            assert _same(p, q, 1e-10), "x%d: fused %s vs eager %s (%s)%s" % (i, p, q, cf.fusion(), msg)
    note("fusion: %s" % cf.fusion())
    assert not any("did not compile" in (f.get("why") or "") for f in cf.fusion()), (cf.fusion(), msg)


@settings(PROFILE, max_examples=max(1, PROFILE.max_examples // 3))
@given(st.data())
def test_fuzz_second_derivatives(data):
    b = _program(HypothesisSource(data), kinks=False, max_leaves=2, max_numel=8, max_ops=20)
    msg = "\n" + b.listing()
    assert not any(name in ("kinked_unary", "extremum", "amax") for name in b.used_ops), msg
    xs = b.inputs()
    try:
        ok = tg.autograd.gradgradcheck(b.f, xs, eps=EPS, atol=ATOL, rtol=RTOL)
    except tg.autograd.GradcheckError as e:
        raise AssertionError(str(e) + msg) from None
    assert ok, msg


@settings(PROFILE, max_examples=max(1, PROFILE.max_examples // 3))
@given(st.data())
def test_fuzz_forward_mode(data):
    """(5) Forward mode and forward over reverse on the tape (``autograd.tangent``):
    J v against central differences and against the reverse pass (u . J v = J^T u . v);
    H v of ``sum(f * w)`` against the create_graph double backward."""
    from tapegrad.autograd import functional as Fn
    b = _program(HypothesisSource(data))
    msg = "\n" + b.listing()
    rng = np.random.default_rng(len(b.lines))
    xs = b.inputs()
    vs = [rng.standard_normal(tuple(x.shape)) for x in xs]
    fresh = tuple(x.detach().requires_grad_(True) for x in xs)
    out = b.f(*fresh)
    jv = _hvp_long(Fn._on_tape, Fn._jvp_on_tape, fresh, (out,), tuple(tg.tensor(v) for v in vs))
    if jv is None:
        return          # (an op without a forward-mode rule: functional takes the reverse-mode path)
    jv = _a(jv[0])
    plus = _a(b.f(*[tg.tensor(_a(x) + EPS * v) for x, v in zip(xs, vs)]))
    minus = _a(b.f(*[tg.tensor(_a(x) - EPS * v) for x, v in zip(xs, vs)]))
    assert np.allclose(jv, (plus - minus) / (2 * EPS), atol=ATOL, rtol=RTOL), msg
    u = rng.standard_normal(jv.shape)
    ys = b.inputs()
    gs = tg.autograd.grad((b.f(*ys) * tg.tensor(u)).sum(), ys, allow_unused=True)
    rhs = sum(float((_a(g) * v).sum()) for g, v in zip(gs, vs) if g is not None)
    assert abs(float((u * jv).sum()) - rhs) <= 1e-8 * (1 + abs(rhs)), msg
    w = tg.tensor(np.linspace(0.5, 1.5, jv.size).reshape(jv.shape))

    def scalar(*a):
        return (b.f(*a) * w).sum()
    hv = _hvp_long(Fn.hvp, scalar, tuple(b.inputs()), tuple(tg.tensor(v) for v in vs))[1]
    zs = b.inputs()
    g = tg.autograd.grad(scalar(*zs), zs, create_graph=True, allow_unused=True)
    pairs = [(gi, tg.tensor(v)) for gi, v in zip(g, vs) if gi is not None and gi.requires_grad]
    want = [None] * len(zs)
    if pairs:
        got = tg.autograd.grad([p for p, _ in pairs], zs, grad_outputs=[v for _, v in pairs], allow_unused=True)
        want = [None if t is None else _a(t) for t in got]
    for i, (h, q) in enumerate(zip(hv, want)):
        assert _same(_a(h), q, 1e-9), "x%d: hvp on the tape %s vs double backward %s%s" % (i, _a(h), q, msg)


def _hvp_long(hvp, *args):
    """``hvp(*args)`` (or a jvp); in the long profile through the tape structure's compiled
    program (``autograd.tangent_program``) when it covers the tape: compiled at the first
    walk, in the caller (about a second per program, too slow for CI's examples)."""
    if not LONG:
        return hvp(*args)
    from tapegrad.autograd import tangent_program as tp
    saved = tp.MODE[0], tp.COMPILE_AFTER
    tp.MODE[0], tp.COMPILE_AFTER = "now", 1
    try:
        return hvp(*args)
    finally:
        tp.MODE[0], tp.COMPILE_AFTER = saved


def test_generator_covers_the_op_set():
    """The generator really produces the op mix it claims, and rarely falls back
    to ``tanh`` (guards against a silent degeneration of the fuzzer)."""
    used, fallbacks, total = {}, 0, 0
    for seed in range(40):
        b = _program(RandomSource(seed), record=False)
        for name in b.used_ops:
            used[name] = used.get(name, 0) + 1
        total += len(b.used_ops)
        fallbacks += sum(1 for n in b.notes if "skipped" in n or "rejected" in n)
        assert b.f(*b.inputs()).requires_grad
    assert set(used) == {o[0] for o in OPS}, used
    assert fallbacks < 0.25 * total, (fallbacks, total, used)


# -- regressions found by the fuzzer --------------------------------------------------------
_VIEW_BUG = ("in-place through a view that is not 1-D: ops/_record.view_slot appends the view's region "
             "unraveled (T.aux_append(region(t, base))), so backward's np.concatenate in engine._aux "
             "raises ValueError")


def test_regression_inplace_on_2d_view():
    x = tg.tensor([[0.3, 0.2], [0.1, 0.5]], requires_grad=True)
    v = x * 2
    v[0:1, :].mul_(3.0)
    g, = tg.autograd.grad(v.sum(), x)
    np.testing.assert_allclose(_a(v), [[1.8, 1.2], [0.2, 1.0]])
    np.testing.assert_allclose(_a(g), [[6.0, 6.0], [2.0, 2.0]])


def test_regression_stale_2d_view_after_inplace():
    x = tg.tensor([[0.3, 0.2], [0.1, 0.5]], requires_grad=True)
    v = x * 2
    w = v[0:1, :]
    v.add_(1.0)
    g, = tg.autograd.grad((w * w).sum(), x)
    np.testing.assert_allclose(_a(w), [[1.6, 1.4]])
    np.testing.assert_allclose(_a(g), [[6.4, 5.6], [0.0, 0.0]])


def test_regression_inplace_on_0d_view():
    x = tg.tensor([[0.3, 0.2]], requires_grad=True)
    v = x * 2
    v[0, 1].mul_(3.0)
    g, = tg.autograd.grad(v.sum(), x)
    np.testing.assert_allclose(_a(v), [[0.6, 1.2]])
    np.testing.assert_allclose(_a(g), [[2.0, 6.0]])



def test_regression_max_dim_of_0d_under_no_grad():
    x = tg.tensor([0.5, 0.2], requires_grad=True)
    with tg.no_grad():
        w = tg.max(x, dim=0)[0]
        w[None].mul_(2)
        np.testing.assert_allclose(_a(w), 1.0)
        w.zero_()
        np.testing.assert_allclose(_a(w), 0.0)
