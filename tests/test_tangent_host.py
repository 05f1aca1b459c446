"""Forward-mode rules of the linear-algebra host ops (solve, inv, slogdet, cholesky,
solve_triangular, cholesky_solve, the 2-norm of vector_norm; tapegrad/linalg.py):
each op's tangent against central differences and against its reverse (u . J v == J^T u . v),
its curvature through H v against differences of the gradient and against the double
backward, with batches and broadcasting; checked to run on the forward path (not the
reverse-mode fallback), and against PyTorch where it is installed."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import functional as Fn

RNG = np.random.default_rng(23)
EPS = 1e-6
LA = tg.linalg


def _well_conditioned(*shape):
    m = shape[-1]
    return RNG.standard_normal(shape) + 3 * np.eye(m)


def _forward_path(call, f, xs, vs):
    """``call`` (a functional *_on_tape) on the tape ``f`` records: None would mean the
    reverse-mode fallback."""
    ins = tuple(tg.tensor(x, requires_grad=True) for x in xs)
    out = f(*ins)
    got = Fn._on_tape(call, ins, (out,), tuple(tg.tensor(v) for v in vs))
    assert got is not None, "took the reverse-mode fallback"
    return out, got


def _grad(f, xs):
    ts = [tg.tensor(x, requires_grad=True) for x in xs]
    f(*ts).backward()
    return [np.zeros_like(x) if t.grad is None else t.grad.numpy() for x, t in zip(xs, ts)]


def _check(f, xs):
    xs = [np.asarray(x, np.float64) for x in xs]
    vs = [RNG.standard_normal(x.shape) for x in xs]
    out, (jv,) = _forward_path(Fn._jvp_on_tape, f, xs, vs)
    plus = f(*[tg.tensor(x + EPS * v) for x, v in zip(xs, vs)]).numpy()
    minus = f(*[tg.tensor(x - EPS * v) for x, v in zip(xs, vs)]).numpy()
    np.testing.assert_allclose(jv.numpy(), (plus - minus) / (2 * EPS), rtol=1e-5, atol=1e-6)
    assert np.abs(jv.numpy()).max() > 1e-3
    u = RNG.standard_normal(out.shape)
    _, vj = Fn.vjp(f, tuple(tg.tensor(x) for x in xs), tg.tensor(u))
    lhs = float((u * jv.numpy()).sum())
    rhs = sum(float((a.numpy() * v).sum()) for a, v in zip(vj, vs))
    assert abs(lhs - rhs) <= 1e-9 * (1 + abs(lhs))
    w = tg.tensor(RNG.standard_normal(out.shape))

    def scalar(*a):
        return (f(*a) * w).sum()
    _, hv = _forward_path(Fn._hvp_on_tape, scalar, xs, vs)
    gp = _grad(scalar, [x + EPS * v for x, v in zip(xs, vs)])
    gm = _grad(scalar, [x - EPS * v for x, v in zip(xs, vs)])
    zs = [tg.tensor(x, requires_grad=True) for x in xs]
    g = tg.autograd.grad(scalar(*zs), zs, create_graph=True)
    dd = tg.autograd.grad(g, zs, grad_outputs=[tg.tensor(v) for v in vs])
    for h, p, m, d in zip(hv, gp, gm, dd):
        np.testing.assert_allclose(h.numpy(), (p - m) / (2 * EPS), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(h.numpy(), d.numpy(), rtol=1e-10, atol=1e-10)


CASES = {
    "solve": (lambda A, b: LA.solve(A, b.sin()), [_well_conditioned(4, 4), RNG.standard_normal(4)]),
    "solve matrix rhs": (lambda A, B: LA.solve(A * A, B), [_well_conditioned(3, 3), RNG.standard_normal((3, 2))]),
    "solve batched, broadcast": (lambda A, B: LA.solve(A, B).tanh(),
                                 [_well_conditioned(2, 3, 3), RNG.standard_normal((3, 2))]),
    "solve left=False": (lambda A, B: LA.solve(A, B, left=False), [_well_conditioned(3, 3),
                                                                    RNG.standard_normal((2, 3))]),
    "solve A only": (lambda A: LA.solve(A, tg.tensor([1.0, -2.0, 0.5])), [_well_conditioned(3, 3)]),
    "solve b only": (lambda b, M=tg.tensor(_well_conditioned(3, 3)): LA.solve(M, b) ** 2, [RNG.standard_normal(3)]),
    "inv": (lambda A: LA.inv(A.exp()), [RNG.standard_normal((3, 3)) * 0.3]),
    "inv batched": (lambda A: LA.inv(A) @ A.sin(), [_well_conditioned(2, 3, 3)]),
    "slogdet": (lambda A: LA.slogdet(A)[1] * LA.slogdet(A)[0], [_well_conditioned(4, 4)]),
    "slogdet batched": (lambda A: LA.slogdet(A @ A.mT + tg.eye(3))[1], [RNG.standard_normal((2, 3, 3))]),
    "cholesky": (lambda M: LA.cholesky(M @ M.mT + tg.eye(3)).sin(), [RNG.standard_normal((3, 3))]),
    "cholesky upper, batched": (lambda M: LA.cholesky(M @ M.mT + tg.eye(3), upper=True) ** 2,
                                [RNG.standard_normal((2, 3, 3))]),
    "solve_triangular": (lambda M, B: LA.solve_triangular(M.tril() + 3 * tg.eye(3), B, upper=False),
                         [RNG.standard_normal((3, 3)), RNG.standard_normal((3, 2))]),
    "solve_triangular upper, right, unit": (
        lambda M, B: LA.solve_triangular(M, B, upper=True, left=False, unitriangular=True).tanh(),
        [RNG.standard_normal((2, 3, 3)), RNG.standard_normal((2, 2, 3))]),
    "solve_triangular A only": (lambda M, B=tg.tensor(RNG.standard_normal((3, 2))): LA.solve_triangular(
        M.triu() + 3 * tg.eye(3), B, upper=True), [RNG.standard_normal((3, 3))]),
    "cholesky_solve": (lambda M, B: tg.cholesky_solve(B, LA.cholesky(M @ M.mT + tg.eye(3))),
                       [RNG.standard_normal((3, 3)), RNG.standard_normal((3, 2))]),
    "cholesky_solve upper, B only": (lambda B, U=LA.cholesky(tg.tensor(_well_conditioned(3, 3) @ _well_conditioned(
        3, 3).T), upper=True): tg.cholesky_solve(B, U, upper=True).sin(), [RNG.standard_normal((3, 2))]),
    "cholesky_solve L only": (lambda M, B=tg.tensor(RNG.standard_normal((3, 2))): tg.cholesky_solve(
        B, LA.cholesky(M @ M.mT + tg.eye(3)), upper=False).exp(), [RNG.standard_normal((3, 3))]),
    "vector_norm": (lambda x: LA.vector_norm(x) * x, [RNG.standard_normal(4)]),
    "vector_norm over a dim, keepdim": (lambda x: LA.vector_norm(x, dim=1, keepdim=True) * x,
                                        [RNG.standard_normal((3, 4))]),
    "linalg.norm of rows, matrix_norm": (lambda x: LA.norm(x, dim=0).exp() + LA.matrix_norm(x.sin()).sum(),
                                         [RNG.standard_normal((2, 3, 4))]),
    "logdet and solve": (lambda x: LA.slogdet(tg.eye(3) + x.reshape(3, 3) @ x.reshape(3, 3).t())[1]
                         + LA.solve(tg.eye(3) * 2 + x.reshape(3, 3), x[:3]).sum(), [RNG.standard_normal(9)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_host_op_forward_rules(name):
    f, xs = CASES[name]
    _check(f, xs)


def test_gaussian_process_objective_hessian():
    """A Gaussian-process marginal likelihood in log length-scales: the dense Hessian by
    the forward path, against finite differences of the gradient and against PyTorch."""
    A, y = RNG.standard_normal((8, 5)), RNG.standard_normal(8)

    def f(x, lib=tg):
        K = (lib.tensor(A) * x.exp()) @ lib.tensor(A).T + lib.eye(8, dtype=x.dtype)
        return lib.linalg.slogdet(K)[1] + lib.tensor(y) @ lib.linalg.solve(K, lib.tensor(y))
    x0 = RNG.standard_normal(5) * 0.3
    ins = (tg.tensor(x0, requires_grad=True),)
    assert Fn._on_tape(Fn._hessian_on_tape, ins, f(*ins)) is not None
    H = Fn.hessian(f, tg.tensor(x0)).numpy()
    fd = np.stack([(_grad(f, [x0 + EPS * e])[0] - _grad(f, [x0 - EPS * e])[0]) / (2 * EPS) for e in np.eye(5)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-6)
    torch = pytest.importorskip("torch")
    want = torch.autograd.functional.hessian(lambda x: f(x, torch), torch.tensor(x0)).numpy()
    np.testing.assert_allclose(H, want, rtol=1e-10, atol=1e-12)


def test_ops_without_rules_take_the_reverse_path():
    """qr has no forward-mode rule, nor vector_norm of another order than 2: the functional
    API falls back to the reverse-mode path, with the right values."""
    x0 = RNG.standard_normal(3)

    def qr(x):
        return LA.qr(tg.eye(3) * 2 + tg.outer(x, x))[1].sum()

    def norm3(x):
        return LA.vector_norm(x, 3) * x.sum()
    for f in (qr, norm3):
        ins = (tg.tensor(x0, requires_grad=True),)
        assert Fn._on_tape(Fn._hvp_on_tape, ins, (f(*ins),), (tg.tensor(x0),)) is None
        _, hv = Fn.hvp(f, tg.tensor(x0), tg.tensor(np.ones(3)))
        fd = (_grad(f, [x0 + EPS])[0] - _grad(f, [x0 - EPS])[0]) / (2 * EPS)
        np.testing.assert_allclose(hv.numpy(), fd, rtol=1e-4, atol=1e-5)


def test_cholesky_tangent_of_a_nonsymmetric_direction_matches_its_reverse():
    """The reverse rule's gradient is symmetric (PyTorch's): the tangent takes a direction's
    symmetric part, so that u . J v == J^T u . v for any v, not only symmetric ones."""
    M = RNG.standard_normal((3, 3))
    A0, V = M @ M.T + np.eye(3), RNG.standard_normal((3, 3))
    assert np.abs(V - V.T).max() > 0.1
    _, (jv,) = _forward_path(Fn._jvp_on_tape, lambda A: LA.cholesky(A), [A0], [V])
    u = RNG.standard_normal((3, 3))
    _, vj = Fn.vjp(lambda A: LA.cholesky(A), tg.tensor(A0), tg.tensor(u))
    np.testing.assert_allclose(float((u * jv.numpy()).sum()), float((vj.numpy() * V).sum()), rtol=1e-12)
    _, (jv_sym,) = _forward_path(Fn._jvp_on_tape, lambda A: LA.cholesky(A), [A0], [(V + V.T) / 2])
    np.testing.assert_allclose(jv.numpy(), jv_sym.numpy(), rtol=1e-13, atol=1e-13)
