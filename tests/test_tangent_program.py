"""The compiled forward over reverse (tapegrad/autograd/tangent_program.py).

``dual``, the rules differentiated as source, against ``ops/_dual.py``'s NumPy
derivatives for every rule of both elementwise tables; then whole programs (views,
broadcasting, sums and means over dims, several loops) against the NumPy walk
(autograd/tangent.py, itself checked against finite differences in test_tangent.py),
against finite differences of the gradient and against Rosenbrock's Hessian by hand.
"""
import os
import re

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import functional as Fn
from tapegrad.autograd import tangent_program as TP
from tapegrad.ops import elementwise as E
from tapegrad.ops.rule_language import NoDerivative

F = tg.nn.functional
RNG = np.random.default_rng(11)
compiled_code = pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always",
                                   reason="the tangent programs are compiled code (this run walks in NumPy)")


# -- dual: every rule's derivative (the rule language's one differentiator) ---------------
def _rule_cases():
    for op in E.ALL_UNARY:
        yield op.name, op.rule, ("g, x, y, p, q", ("x", "y"))
    for op in E.ALL_BINARY:
        yield op.name + "/a", op.rule_a, ("g, a, b, c, y", ("a", "b", "y"))
        yield op.name + "/b", op.rule_b, ("g, a, b, c, y", ("a", "b", "y"))


# (where a rule's derivative is finite outside the op's domain, NaN in central differences:
# binary cross entropy's probability lies in (0, 1))
DOMAINS = {("binary_cross_entropy", "a"): (0.05, 0.95)}


@pytest.mark.parametrize("name, rule, params", list(_rule_cases()), ids=[c[0] for c in _rule_cases()])
def test_dual_of_every_rule_matches_central_differences(name, rule, params):
    """The derivative ``dual`` writes for each rule (the tangent programs' source, and
    through ``_dual.dual_rule`` forward mode's in NumPy) against central differences of
    the rule's value along the same tangents."""
    from tapegrad.ops._dual import dual_rule, numpy_rule
    names, moving = params
    value_of, dual_of = numpy_rule(rule, names), dual_rule(rule)
    rng = np.random.default_rng(abs(hash(name)) % 2 ** 32)
    for _ in range(5):
        point = {"g": rng.normal(), "p": float(rng.integers(1, 4)), "q": 0.5, "c": 1.0}
        for v in ("x", "y", "a", "b"):
            point[v] = rng.uniform(*DOMAINS.get((name.split("/")[0], v), (0.3, 1.7)))
        tangents = {v: rng.normal() for v in moving}
        order = [k.strip() for k in names.split(",")]

        def at(h):
            return float(value_of(*[np.float64(point[k] + h * tangents.get(k, 0.0)) for k in order]))
        eps = 1e-6
        with np.errstate(all="ignore"):      # (a point outside a rule's domain: nan on both sides)
            want_t = (at(eps) - at(-eps)) / (2 * eps)
            v, t = dual_of({k: (np.float64(point[k]), np.float64(tangents[k]) if k in tangents else None)
                            for k in order})
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(float(v), at(0.0), rtol=1e-13, atol=1e-300, equal_nan=True)
        np.testing.assert_allclose(0.0 if t is None else float(t), want_t, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_dual_by_hand():
    env = {"x": ("x", "tx"), "g": ("g", None)}
    assert TP.dual("g * x", env) == ("(g * x)", "(tx * g)")
    assert TP.dual("g / (1.0 + x)", env)[1] == "(-tx * (g / (1.0 + x)) / (1.0 + x))"
    assert TP.dual("where(x > 0.0, g, 0.0)", env)[1] is None        # (a condition is not differentiated)
    assert TP.dual("polygamma(x, 2.0)", env)[1] == "(tx * polygamma(x, 2.0 + 1.0))"
    with pytest.raises(NoDerivative, match=r"erfcx\(\), which is not a function of the rule language"):
        TP.dual("erfcx(x)", env)
    with pytest.raises(NoDerivative, match=r"polygamma\(\) is not differentiable in its argument 2"):
        TP.dual("polygamma(2.0, x)", env)


# -- whole programs ---------------------------------------------------------------------
@pytest.fixture
def compiled(monkeypatch):
    """Compile each tape structure's program at its first walk, in the caller."""
    monkeypatch.setattr(TP, "MODE", ["now"])
    monkeypatch.setattr(TP, "COMPILE_AFTER", 1)


def _hvp(f, xs, vs, mode):
    """``functional.hvp`` with the programs on (``mode`` "now") or off, and how many
    programs ran for it."""
    old = TP.MODE[0]
    TP.MODE[0] = mode
    try:
        runs = TP.RUNS[0]
        _, hv = Fn.hvp(f, tuple(tg.tensor(x) for x in xs), tuple(tg.tensor(v) for v in vs))
        return [h.numpy() for h in hv], TP.RUNS[0] - runs
    finally:
        TP.MODE[0] = old


def _fd_hvp(f, xs, vs, eps=1e-6):
    def grad(at):
        ts = [tg.tensor(x, requires_grad=True) for x in at]
        f(*ts).backward()
        return [t.grad.numpy() for t in ts]
    gp = grad([x + eps * v for x, v in zip(xs, vs)])
    gm = grad([x - eps * v for x, v in zip(xs, vs)])
    return [(a - b) / (2 * eps) for a, b in zip(gp, gm)]


def _check(f, xs):
    xs = [np.asarray(x, np.float64) for x in xs]
    vs = [RNG.standard_normal(x.shape) for x in xs]
    got, runs = _hvp(f, xs, vs, "now")
    assert runs == 1, [str(v[1]) for v in TP._PROGRAMS.values() if isinstance(v[1], Exception)]
    want, runs = _hvp(f, xs, vs, "off")
    assert runs == 0
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-11 * max(np.abs(w).max(), 1.0))
    for g, w in zip(got, _fd_hvp(f, xs, vs)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return got, vs


def _rosen(x):
    head = x[:-1]
    return (100 * (x[1:] - head ** 2) ** 2 + (1 - head) ** 2).sum()


@compiled_code
@pytest.mark.parametrize("n", [517, 10_000])
def test_rosenbrock_equals_its_hessian_vector_product_by_hand(compiled, n):
    """The loop adds into x's adjoint at x[:-1] and at x[1:]: element i + 1's share waits
    in a local carried to the next iteration (no buffer, no store read back)."""
    x = RNG.uniform(-2, 2, n)
    (got,), (v,) = _check(_rosen, [x])
    want = np.zeros_like(x)
    want[:-1] = (1200 * x[:-1] ** 2 - 400 * x[1:] + 2) * v[:-1] - 400 * x[:-1] * v[1:]
    want[1:] += -400 * x[:-1] * v[:-1] + 200 * v[1:]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    runs = [g[2] for g in TP._PROGRAMS.values() if g[2] is not None and n in g[1].sizes.values()]
    assert len(runs) == 1
    names = set(runs[0].py_func.__code__.co_varnames)
    assert {"kag0_0", "kah0_0"} <= names and not any(name.startswith("bg") for name in names)


@compiled_code
@pytest.mark.parametrize("n, own", [(300, True), (301, False)], ids=["own buffer", "past OWN_BUFFER_MAX"])
def test_two_gathers_of_one_input_add_into_its_adjoint(compiled, monkeypatch, n, own):
    """Added at x[p] and x[q] (index arrays, not shifts), the second goes through a buffer
    of its own, added after the loop, or, for a larger x, into x's arrays directly;
    x itself, at i, is added as Rosenbrock's shifts are."""
    if not own:
        monkeypatch.setattr(TP, "OWN_BUFFER_MAX", n - 1)
    p, q = RNG.permutation(n), RNG.permutation(n)
    x = RNG.uniform(-1.5, 1.5, n)
    (got,), (v,) = _check(lambda t: (t[p] * t[q] * t.sin()).sum(), [x])
    a, b, c = x[p], x[q], np.sin(x)         # by hand: d/dx of sum(a b c), then along v
    va, vb, vc = v[p], v[q], np.cos(x) * v
    want = np.zeros_like(x)
    np.add.at(want, p, vb * c + b * vc)
    np.add.at(want, q, va * c + a * vc)
    want += np.cos(x) * (va * b + a * vb) - np.sin(x) * v * a * b
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    runs = [g[2] for g in TP._PROGRAMS.values() if g[2] is not None and n in g[1].sizes.values()]
    names = set(runs[-1].py_func.__code__.co_varnames)
    assert "kag0_0" not in names and "uag0_0_1" in names        # (x at i: one offset, nothing carried)
    assert ({"bg0_0", "bh0_0"} <= names) if own else not any(name.startswith("bg") for name in names)


_HALVES = [
    ("rosenbrock, a shift", _rosen, [(517,)]),
    ("several loops, a constant index", lambda x: (x.reshape(4, 5) * x[:5]).tanh().sum() * x[3] + x[7] ** 3, [(20,)]),
    ("two inputs, matrix products", lambda a, b: ((a @ b).tanh() * (b.t() @ a.t()).t()).sum() + (a @ b[:, 0]).exp().sum(),
     [(3, 4), (4, 5)]),
    ("softmax and logsumexp", lambda x: (F.softmax(x.reshape(6, 4), 1) * x.reshape(6, 4).cos()).sum()
     + x.reshape(4, 6).logsumexp(0).square().sum(), [(24,)]),
    ("concatenation", lambda w: (tg.cat([w, w.sin()]) ** 2).sum() + tg.stack([w, w * w]).exp().sum(), [(5,)]),
]


@compiled_code
@pytest.mark.parametrize("f, shapes", [c[1:] for c in _HALVES], ids=[c[0] for c in _HALVES])
def test_the_gradient_and_curvature_kinds_are_halves_of_hvp(compiled, f, shapes):
    """The "grad" and "hv" programs (a served grad(create_graph=True): its gradients,
    then their derivative along the second backward's adjoint) are the "hvp" program
    without the other half of its results: the same values, bit for bit, and without
    the arrays of the half they leave out."""
    xs = [tg.tensor(RNG.uniform(-1.5, 1.5, sh), requires_grad=True) for sh in shapes]
    out = f(*xs)
    T = out._tape
    slots = [x._slot for x in xs]
    assert all(T.leaves[s] is x for s, x in zip(slots, xs))
    seeds = {s: RNG.standard_normal((1, x.numel())) for s, x in zip(slots, xs)}
    res = {}
    for kind in ("hvp", "grad", "hv"):
        got = TP.program(T, kind, sorted(seeds), slots, (out._slot,))
        assert got[2] is not None, got[1]
        res[kind] = TP.execute(got, T, {s: seeds[s] for s in sorted(seeds)})
        names = set(got[2].py_func.__code__.co_varnames)
        for half, kept in (("ag", kind != "hv"), ("ah", kind != "grad")):
            wanted = {"%s%d" % (half, s) for s in slots}
            assert wanted <= names if kept else not wanted & names
            own = {n for n in names if re.match(r"[bc]%s(%s)_\d+$" % (half[1], "|".join(map(str, slots))), n)}
            assert kept or not own      # (their own buffers and accumulators too)
            if f is _rosen:     # (x[1:]'s share carried in a local: no buffer)
                assert not own and (("k%s%d_0" % (half, slots[0]) in names) == kept)
    assert len(res["grad"]) == len(res["hv"]) == len(slots)
    for j in range(len(slots)):
        np.testing.assert_array_equal(res["grad"][j], res["hvp"][2 * j])
        np.testing.assert_array_equal(res["hv"][j], res["hvp"][2 * j + 1])
    # and the gradients are backward's; the curvature is the NumPy walk's (finite differences above)
    out.backward(retain_graph=True)
    for j, x in enumerate(xs):
        np.testing.assert_allclose(res["grad"][j], x.grad.numpy().reshape(-1), rtol=1e-12, atol=1e-12)
    assert np.abs(res["hv"][0]).max() > 0


@compiled_code
def test_broadcasting_views_and_several_loops(compiled):
    a = RNG.uniform(0.6, 1.4, (3, 4))
    b = RNG.uniform(0.6, 1.4, (4,))

    def f(a, b):
        # broadcast operands (a row, one element), a transposed view, powers and a mean
        # over a dim read by a later loop, a scalar from a sum read by another
        y = (a * b).sin() + a.t().reshape(3, 4) ** 3 - tg.atan2(a, b[:1]) * tg.hypot(a, b)
        m = y.mean(0)                      # (4,): its own loop, read element for element after
        s = (y * y).sum()
        return ((m * b).exp().sum() + s * 0.5 + (a / s).log1p().sum()) ** 2
    _check(f, [a, b])


@compiled_code
def test_sums_and_means_over_dims(compiled):
    x = RNG.standard_normal((4, 5, 6))

    def f(x):
        y = (x * x).sin() + x[:, 1:, :].exp().sum(1, keepdim=True) * x[:, :1, ::2].mean()
        z = y.mean(dim=(0, 2)) ** 2 + y.reshape(20, -1).sum(0).tanh().sum()
        return z.sum() + (x.transpose(0, 2) * 2.0).cos().mean()
    _check(f, [x])


@compiled_code
def test_two_inputs_and_a_constant_operand(compiled):
    w = RNG.standard_normal(30)
    c = tg.tensor(RNG.uniform(1, 2, 30))

    def f(x, y):
        return ((x * y + c).log() * tg.tensor(w)).sum() + (x / y).square().mean()
    _check(f, [RNG.uniform(1, 2, 30), RNG.uniform(1, 2, 30)])


@compiled_code
def test_matrix_products_between_the_loops(compiled):
    """A matrix product is a call between the loops (np.dot): matrix-vector,
    vector-matrix, matrix-matrix and dot products, with both operands or one moving,
    operands that are views of the input, a product as the output, batched products
    with broadcast batches."""
    A = tg.tensor(RNG.standard_normal((5, 4)))
    W = tg.tensor(RNG.standard_normal((4, 4)))
    x = RNG.standard_normal(4)
    got, vs = _check(lambda x: F.softplus(A @ x).sum() + 0.5 * (x * x).sum(), [x])
    # the softplus objective's Hessian is A^T diag(sigmoid'(A x)) A + I, by hand
    z = A.numpy() @ x
    s = 1 / (1 + np.exp(-z))
    want = A.numpy().T @ (s * (1 - s) * (A.numpy() @ vs[0])) + vs[0]
    np.testing.assert_allclose(got[0], want, rtol=1e-12, atol=1e-12)
    _check(lambda x: (x @ W @ x).sin(), [x])
    _check(lambda x: (A @ x) @ (A @ x.sin()), [x])
    _check(lambda a, b: ((a @ b).tanh() * (b.t() @ a.t()).t()).sum(), [RNG.standard_normal((3, 4)),
                                                                       RNG.standard_normal((4, 5))])
    _check(lambda x: ((x[1:].reshape(3, 3) @ x[:-1].reshape(3, 3).t()) ** 2).mean() + (x[::2] @ x[::2]).exp(),
           [RNG.standard_normal(10)])
    _check(lambda x, w: (F.softplus(x @ w) @ w).square().sum() + ((W @ x.reshape(4, 1)) * x).sum(),
           [x, RNG.standard_normal((4, 4))])
    # batched products, one np.dot per batch; a broadcast operand is read again for each batch
    # (its adjoint adds up over them)
    B3 = tg.tensor(RNG.standard_normal((3, 2, 4)))
    _check(lambda x: (x.reshape(2, 2, 2) @ x.reshape(2, 2, 2)).sin().sum(), [RNG.standard_normal(8)])
    _check(lambda w: ((B3 @ w).tanh() ** 2).sum() + (w.t() @ B3.mT).exp().mean(), [RNG.standard_normal((4, 3))])
    _check(lambda a, b: ((a @ b) * (a.sin() @ b)).sum() + (b.mT @ a.mT).cos().sum(),
           [RNG.standard_normal((3, 2, 4)), RNG.standard_normal((1, 4, 2))])
    _check(lambda a: (a.reshape(2, 1, 3, 2) @ a.reshape(1, 2, 2, 3)).square().sum(), [RNG.standard_normal(12)])


@compiled_code
def test_small_products_are_loops_and_large_ones_call_np_dot(compiled, monkeypatch):
    """A product of up to ``SMALL_PRODUCT`` multiply-adds is written as loops (Numba lowers
    each np.dot, reshape and slice assignment to hundreds of IR instructions: slow to
    compile); a larger one calls np.dot, batch by batch; both equal the NumPy walk."""
    from tapegrad.kernels import loops
    sources = []
    load = loops.load
    monkeypatch.setattr(loops, "load", lambda prefix, source: sources.append(source) or load(prefix, source))

    def f(a, b):
        return ((a @ b).tanh() * (b.t() @ a.t()).t()).sum() + (a.sin() @ b).square().mean()
    _check(f, [RNG.standard_normal((3, 7)), RNG.standard_normal((7, 2))])
    small = sources[-1]
    assert "np.dot" not in small and "[:] =" not in small and ".reshape" not in small
    monkeypatch.setattr(TP, "SMALL_PRODUCT", 0)         # (every product larger: np.dot)
    B2, B3 = tg.tensor(RNG.standard_normal((5, 2))), tg.tensor(RNG.standard_normal((1, 5, 2)))
    _check(lambda a: (a @ B2).sin().sum(), [RNG.standard_normal((3, 5))])
    assert sources[-1].count("np.dot(") == 3        # (the tangent, the adjoint and its tangent)
    _check(lambda a: (a @ B3).sin().sum(), [RNG.standard_normal((2, 3, 5))])     # (B3 broadcast over 2 batches)
    assert "for q in range(2):" in sources[-1] and sources[-1].count("np.dot(") == 3


@compiled_code
def test_gathers_softmax_and_masks(compiled):
    """Gathers are index maps (their indices are part of the structure); logsumexp,
    softmax and log_softmax are calls between the loops; a where's condition and a
    bool or integer operand are read as float64."""
    X = RNG.standard_normal((40, 6))
    y = RNG.integers(0, 3, 40)
    W = RNG.standard_normal((6, 3))

    def nll(w):             # multinomial logistic regression
        return F.cross_entropy(tg.tensor(X) @ w, tg.tensor(y))
    got, vs = _check(nll, [W])
    # by hand: H V = X^T R / N, R_n = p_n * z_n - p_n (p_n . z_n), z_n = V^T x_n
    z = X @ W
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    Z = X @ vs[0]
    R = p * Z - p * (p * Z).sum(1, keepdims=True)
    np.testing.assert_allclose(got[0], X.T @ R / len(X), rtol=1e-12, atol=1e-14)
    _check(lambda w: -(tg.tensor(X) @ w).log_softmax(1)[np.arange(40), y].mean(), [W])
    _check(lambda w: (tg.tensor(X) @ w).logsumexp(1).sin().sum() + w.logsumexp(0).sum() + w.reshape(-1).logsumexp(0),
           [W])
    _check(lambda w: ((tg.tensor(X) @ w).softmax(1) ** 2).sum() + (w.softmax(0) * w).sum()
           + (w.log_softmax(1) ** 2).sum(), [W])
    idx = tg.tensor(RNG.integers(0, 18, 30))
    _check(lambda w: (w.reshape(-1)[idx] ** 2 * w.reshape(-1)[idx.flip(0)]).sum() + w.roll(1, 0).exp().sum()
           + (w[[0, 2, 2], [1, 0, 0]] ** 3).sum(), [W])
    _check(lambda w: tg.where(w > 0, w.exp(), w.sin()).sum() + F.relu(w).square().sum() + w.norm()
           + (w * tg.tensor(np.arange(3))).sin().sum() + (w * tg.tensor(np.arange(3) > 1)).exp().sum(), [W])


@compiled_code
def test_concatenations(compiled):
    """cat and stack: calls between the loops that place each moving input's tangent
    (a constant piece's is zero)."""
    C = tg.tensor(RNG.standard_normal(3))
    _check(lambda w: (tg.cat([w, w.sin()]) ** 2).sum() + tg.stack([w, w * w]).exp().sum(), [RNG.standard_normal(5)])
    _check(lambda w: (tg.cat([w.reshape(2, 3), C.reshape(1, 3), (w * 2).reshape(2, 3)], 0).tanh().sum(0)
                      * tg.cat([w.reshape(3, 2), w.reshape(3, 2)[:, :1]], 1).t()[1]).sum(), [RNG.standard_normal(6)])
    _check(lambda w: tg.cat([w.reshape(2, 3), C.reshape(1, 3).expand(2, 3), w.reshape(2, 3) ** 2], 1)
           .logsumexp(1).sum(), [RNG.standard_normal(6)])


@compiled_code
def test_variances_and_extrema(compiled):
    """var, std (0 where std is 0), amax/amin/max(): calls by groups; ties share the
    adjoint, and amax's NaN sends NaN to its group, as on the NumPy walk."""
    w = RNG.standard_normal(24)
    _check(lambda w: w.var() + w.reshape(4, 6).var(1).sin().sum() + w.reshape(4, 6).var(0, unbiased=False).exp().sum(),
           [w])
    _check(lambda w: w.std() + (w.reshape(4, 6).std(1) ** 3).sum() + w.reshape(4, 6).std(0, correction=0).log().sum()
           + (w[:3] * 0.0 + 1.0).std(), [w])
    _check(lambda w: (w.reshape(4, 6).amax(1) ** 2).sum() + w.max() * w.min() + w.reshape(4, 6).amin(0).exp().sum()
           + w.reshape(4, 6).max(1).values.sin().sum(), [w])
    x, v = np.array([0.5, 0.5, -1.0, np.nan, 2.0, 1.0]), RNG.standard_normal(6)

    def ties(x):
        return (x[:3].amax() ** 2) * x[:3].sum() + x.reshape(3, 2).amax(1).exp().sum() + x[:3].max() * x[1]
    got, runs = _hvp(ties, [x], [v], "now")
    want, _ = _hvp(ties, [x], [v], "off")
    assert runs == 1
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    assert np.isnan(got[0][2:4]).all() and not np.isnan(got[0][[0, 1, 4, 5]]).any()     # (the NaN pair)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-13)


def _jvp(f, xs, vs, mode):
    old = TP.MODE[0]
    TP.MODE[0] = mode
    try:
        runs = TP.RUNS[0]
        _, t = Fn.jvp(f, tuple(tg.tensor(x) for x in xs), tuple(tg.tensor(v) for v in vs))
        return [a.numpy() for a in (t if isinstance(t, tuple) else (t,))], TP.RUNS[0] - runs
    finally:
        TP.MODE[0] = old


@compiled_code
def test_jacobian_vector_products(compiled):
    """A jvp runs the forward loops alone: functional.jvp, tg.func.jvp and a recorded
    tape's jvp, with several outputs and outputs that are views (of an entry or of
    an input), against the NumPy walk and finite differences."""
    A = tg.tensor(RNG.standard_normal((5, 4)))
    cases = [
        (lambda x: 100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2, [RNG.standard_normal(50)]),
        (lambda x: F.softplus(A @ x) * (A @ x).tanh(), [RNG.standard_normal(4)]),
        (lambda x, y: ((x * y).sin(), (x / y.exp()).sum()), [RNG.standard_normal(6), RNG.standard_normal(6)]),
        (lambda x: (x.reshape(2, 3).sin()).t()[1:], [RNG.standard_normal(6)]),
        (lambda x: (x[1:], x.exp()[::2], (x * x).sum()), [RNG.standard_normal(6)]),
    ]
    eps = 1e-6
    for f, xs in cases:
        vs = [RNG.standard_normal(x.shape) for x in xs]
        got, runs = _jvp(f, xs, vs, "now")
        want, none = _jvp(f, xs, vs, "off")
        assert runs == 1 and none == 0, [str(v[1]) for v in TP._PROGRAMS.values() if isinstance(v[1], Exception)]
        plus = f(*[tg.tensor(x + eps * v) for x, v in zip(xs, vs)])
        minus = f(*[tg.tensor(x - eps * v) for x, v in zip(xs, vs)])
        plus, minus = (plus, minus) if isinstance(plus, tuple) else ((plus,), (minus,))
        for g, w, p, m in zip(got, want, plus, minus):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(g, (p.numpy() - m.numpy()) / (2 * eps), rtol=1e-6, atol=1e-6)
    x, v = RNG.standard_normal(6), RNG.standard_normal(6)
    runs = TP.RUNS[0]
    _, t = tg.func.jvp(lambda a: (a.exp() * a).sum(0), (tg.tensor(x),), (tg.tensor(v),))
    tape = tg.record(lambda a: (a.exp() * a).sum(0), x)
    y, t2 = tape.jvp(x, v)
    assert TP.RUNS[0] == runs + 2
    want = ((np.exp(x) * (1 + x)) * v).sum()
    np.testing.assert_allclose([t.item(), float(t2)], [want, want], rtol=1e-13)


@compiled_code
def test_a_recorded_tape_keeps_its_programs(compiled, monkeypatch):
    """A recorded tape's hvp and jvp find their programs without the structure key once
    compiled (one structure), and give the NumPy walk's values at every point; with the
    programs off, the walk serves."""
    def f(a):
        return (a.exp() * a.sin()).sum() + (a[1:] * a[:-1]).sum()
    x0 = RNG.standard_normal(7)
    tape = tg.record(f, x0)
    keyed = []
    real = TP.program
    monkeypatch.setattr(TP, "program", lambda *a: (TP.MODE[0] == "now" and keyed.append(a[1])) or real(*a))
    runs = TP.RUNS[0]
    for k in range(3):
        x, v = RNG.standard_normal(7), RNG.standard_normal(7)
        _, hv = tape.hvp(x, v)
        _, t = tape.jvp(x, v)
        TP.MODE[0] = "off"
        try:
            _, hv_walk = tape.hvp(x, v)
            _, t_walk = tape.jvp(x, v)
        finally:
            TP.MODE[0] = "now"
        np.testing.assert_allclose(hv, hv_walk, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(float(t), float(t_walk), rtol=1e-13)
        want = (np.exp(x) * (np.sin(x) + np.cos(x))) @ v + v[1:] @ x[:-1] + x[1:] @ v[:-1]
        np.testing.assert_allclose(float(t), want, rtol=1e-12)
    assert TP.RUNS[0] == runs + 6           # (every hvp and jvp with the programs on ran one)
    assert sorted(keyed) == ["hvp", "jvp"]  # (keyed once each, at the first call)


@compiled_code
def test_cumulative_sums(compiled):
    """cumsum: running sums along each row forward, from each row's end in reverse."""
    _check(lambda w: w.cumsum(0).sin().sum() + (w.reshape(4, 6).cumsum(1) ** 2).sum()
           + w.reshape(4, 6).cumsum(0).exp().sum() + w.reshape(4, 6).t().cumsum(1)[1].tanh().sum()
           + (w[3].cumsum(0) * w).sum(), [RNG.standard_normal(24)])


@compiled_code
def test_setitem_and_scatters(compiled):
    """Writes and scatters: calls that place each moving input's tangent (a setitem:
    the last write of a repeated index wins; index_add and diag: added), for hvp and
    jvp, against the NumPy walk and finite differences."""
    A = tg.tensor(RNG.standard_normal((4, 4)))

    def residual(x):            # a residual assembled by slices, as numeric scripts write them
        r = tg.zeros(6)
        r[1:] = x[:-1] * x[1:]
        r[0] = x[2] ** 3
        return r.sin() * r

    def writes(x):
        y = x * 3.0 - 1.0                       # (saves nothing that the writes change)
        y[[0, 2, 0]] = x[1:4] * 2.0             # a repeated index: the last write wins
        z = x * 1.0
        z[1:3].mul_(x[:2])                      # in place on a view (CopySlices)
        return (y * z).tanh()

    def scatters(x):
        s = tg.zeros(4).index_add(0, tg.tensor([3, 0, 3, 1, 2, 0]), x)     # adds up repeats
        d = tg.diag(x[:4].sin())                # zeros with a diagonal: a strided scatter
        return (d @ A).tanh().sum(0) * s + x[2:]

    def scatter_in_place(x):
        y = x + 0.5
        y.index_add_(0, tg.tensor([1, 1, 4]), x[:3] ** 2)
        return y * x

    cases = [residual, writes, scatters, scatter_in_place]
    for f in cases:
        _check(lambda x: (f(x) ** 2).sum() + f(x).sum(), [RNG.standard_normal(6)])
    eps = 1e-6
    for f in cases:
        x, v = RNG.standard_normal(6), RNG.standard_normal(6)
        got, runs = _jvp(f, [x], [v], "now")
        want, none = _jvp(f, [x], [v], "off")
        assert runs == 1 and none == 0, [str(e[1]) for e in TP._PROGRAMS.values() if isinstance(e[1], Exception)]
        np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-13)
        fd = (f(tg.tensor(x + eps * v)).numpy() - f(tg.tensor(x - eps * v)).numpy()) / (2 * eps)
        np.testing.assert_allclose(got[0], fd, rtol=1e-6, atol=1e-6)
        assert np.abs(want[0]).max() > 0.1


@compiled_code
def test_products(compiled):
    """prod, of everything and along dims: the product of the others (result / input
    without zeros), and its tangent for groups with no zero, one, two (the curvature
    pairs them) and three."""
    x = RNG.standard_normal(12)
    _check(lambda w: w.prod() + (w.reshape(3, 4).prod(1) ** 2).sum() + w.reshape(3, 4).prod(0).sin().sum(), [x])
    z = x.copy()
    z[[1, 5, 6, 9, 10, 11]] = 0.0       # rows of (3, 4): one, two and three zeros; so are the columns
    weights = tg.tensor([1.0, -2.0, 3.0])
    got, vs = _check(lambda w: (w.reshape(3, 4).prod(1) * weights).sum() + w.reshape(3, 4).t().prod(1).sum()
                     + (w[:4] * w[4:8]).prod(), [z])
    one = x.copy()
    one[4] = 0.0
    _check(lambda w: w.prod() * w.sum(), [one])
    got, vs = _check(lambda w: w.prod(), [one])
    # by hand: d2/dx4 dxj = the product of all but x4 and xj; any other pair keeps the zero
    pair = np.array([np.prod(np.delete(one, [4, j])) if j != 4 else 0.0 for j in range(12)])
    want = vs[0][4] * pair
    want[4] = (vs[0] * pair).sum()
    np.testing.assert_allclose(got[0], want, rtol=1e-11, atol=1e-12)
    two = x.copy()
    two[[2, 7]] = 0.0
    got, vs = _check(lambda w: w.prod(), [two])
    others = np.prod(np.delete(two, [2, 7]))
    want = np.zeros(12)
    want[2], want[7] = others * vs[0][7], others * vs[0][2]
    np.testing.assert_allclose(got[0], want, rtol=1e-12, atol=1e-12)


@compiled_code
def test_regression_a_call_names_no_parameter(compiled):
    """(Found by the long fuzz: logsumexp's reverse called its weight ``p<n>``, the name
    of entry n's unary parameter, when the counters met.)"""
    c5, c7, c10 = tg.tensor([0.67, 0.91, -0.46]), tg.tensor(0.28), tg.tensor(-0.09)

    def f(x0, x1):      # (the fuzzer's program, its unused entries kept: they number the slots)
        v2 = tg.neg(x1)
        tg.sub(x0, tg.tanh(x0), alpha=0.5)
        v6 = tg.exp(x0 + -1)
        tg.neg(x0), x0.exp()
        v9 = tg.neg(v2)
        -x0, x0.expm1()
        v12 = tg.sub(v6, v6, alpha=2.0)
        tg.permute(x1, ())
        v14 = tg.logsumexp(v2, -1, keepdim=False)
        v6[tg.tensor([2])], x1.tanh()
        v17 = v9.softmax(dim=0)
        x1.sin(), tg.neg(x0), tg.exp(x0), tg.expm1(x0)
        return 0 + (v12 * c5).sum() + (v14 * c7).sum() + (v17 * c10).sum() + (x1 * 0).sum()
    _check(f, [np.array([1.436, 0.871, -1.464]), np.array(-1.397)])


@compiled_code
def test_background_compile_switches_over():
    """By default the structure's second walk starts the compile in a thread; the
    program serves once it is ready, with the NumPy walk's values."""
    x, v = RNG.uniform(-2, 2, 300), RNG.standard_normal(300)
    _, first = Fn.hvp(_rosen, tg.tensor(x), tg.tensor(v))
    for _ in range(TP.COMPILE_AFTER):
        Fn.hvp(_rosen, tg.tensor(x), tg.tensor(v))
    TP.wait()
    runs = TP.RUNS[0]
    _, hv = Fn.hvp(_rosen, tg.tensor(x), tg.tensor(v))
    assert TP.RUNS[0] == runs + 1
    np.testing.assert_allclose(hv.numpy(), first.numpy(), rtol=1e-12, atol=1e-12)


@compiled_code
def test_what_it_cannot_compile_keeps_the_numpy_walk(compiled):
    A = RNG.standard_normal((5, 4))
    x, v = RNG.standard_normal(4), RNG.standard_normal(4)

    def f(x):
        return F.softplus(tg.tensor(A) @ x).cumprod(0).sum()    # a running product: no compiled rule
    got, runs = _hvp(f, [x], [v], "now")
    assert runs == 0
    for g, w in zip(got, _fd_hvp(f, [x], [v])):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    reasons = [str(e[1]) for e in TP._PROGRAMS.values() if isinstance(e[1], TP.Unsupported)]
    assert any("no compiled forward-mode rule" in r for r in reasons), reasons
    # several directions (a Hessian) and float32 stay on the NumPy walk too
    runs = TP.RUNS[0]
    h = Fn.hessian(_rosen, tg.tensor(x))
    xs = x.astype(np.float32)
    _, hv = Fn.hvp(lambda x: (x.sin() * x).sum(), tg.tensor(xs), tg.tensor(v.astype(np.float32)))
    assert TP.RUNS[0] == runs
    assert hv.dtype == tg.float32
    xd = xs.astype(np.float64)
    np.testing.assert_allclose(hv.numpy(), (2 * np.cos(xd) - xd * np.sin(xd)) * v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h.numpy(), h.numpy().T, rtol=1e-12)


@compiled_code
def test_a_new_process_loads_the_program_from_the_cache(tmp_path):
    import subprocess
    import sys
    code = ("import numpy as np, tapegrad as tg\n"
            "from tapegrad.autograd import tangent_program as TP\n"
            "TP.MODE[0] = 'now'; TP.COMPILE_AFTER = 1\n"
            "x = tg.tensor(np.linspace(-1, 1, 64))\n"
            "def f(x):\n    return (x.exp()[1:] * x[:-1]).sum() + (x ** 3).sum()\n"
            "for _ in range(2):\n    _, hv = tg.autograd.functional.hvp(f, x, x)\n"
            "got = [v for v in TP._PROGRAMS.values() if v[2] is not None][0][2]\n"
            "print(bool(got.stats.cache_hits), TP.RUNS[0], hv.numpy().tobytes().hex())\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), TAPEGRAD_QUIET="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    first, second = (subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                    cwd=root, timeout=600) for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    hit1, runs1, bits1 = first.stdout.split()
    hit2, runs2, bits2 = second.stdout.split()
    assert (hit1, hit2) == ("False", "True") and runs1 == runs2 == "2" and bits1 == bits2


@compiled_code
def test_a_tape_it_cannot_compile_is_not_kept_alive(compiled):
    """(The reason kept for a structure must not hold the tape it was planned on.)"""
    import gc
    import weakref
    A = tg.tensor(RNG.standard_normal((3, 3)))
    x = tg.tensor(RNG.standard_normal(3))
    tapes = []

    def f(x):
        y = (A @ x).sin().prod()
        tapes.append(weakref.ref(y._tape))
        return y
    Fn.hvp(f, x, x)
    gc.collect()
    assert tapes and tapes[0]() is None


def test_a_tape_module_is_named_by_the_library_source():
    """A tape's generated module (its file name is the hash of its text) carries the hash of
    the library's kernel sources: Numba's cache of it would not notice a change in the
    functions it calls (kernels/special.py), so a changed library must make a new module."""
    from tapegrad.kernels import codegen
    for what in ("tangent program", "fused tape"):
        assert codegen._source_hash() in codegen.tape_header(what)
    assert len(codegen._source_hash()) == 16
